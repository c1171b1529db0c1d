"""D_LR and test error vs training-set size and vs weight decay (D Fig 5, T Fig 7.1, 7.2b).

D Fig 5 / T Fig 7.1: the learning curve of ResNet18 on CIFAR-10 is a power law whose exponent
steepens at a critical training-set size, where D_LR drops below the MF boundary 0.1. T Fig
7.2(b): a larger weight decay gives a tighter MF regime (smaller D_LR), and the model without
weight decay is already in it. Every (n, λ) of ``n_trains`` × ``weight_decays`` trains in one
run; a sweep sets one of each per run (``lrrich sweep learning-curve --grid n_trains=100,4000
--grid weight_decays=0,0.001 --seeds 3``; a one-point run reports the plain keys ``dlr``, …).

Command: ``lrrich run learning-curve --out runs/lc`` (small: a 2-hidden-layer ReLU MLP on nested
class-balanced subsets of the 4,000 mnist5k images, 14 networks per seed, 3 seeds). ``--scale
conv``: LeNet-5; ``--scale resnet``: ResNet18 with k = 4; ``--scale fcn``: T Fig 7.6's FCN.
``--scale paper`` trains λ = 1e-3; its weight-decay panel is a sweep at the full size:
``lrrich sweep learning-curve --scale paper --grid n_trains=50000 --grid
weight_decays=0,0.0001,0.0005,0.001``.
Expected (seed 0): MLP test error 31.7 % → 4.4 % for n = 50 → 4,000, test D_LR 0.215 → 0.18,
flat from n = 100 (no critical n), 0.117 with λ = 1e-3; LeNet-5 0.359 → 0.181, falling
steadily; ResNet18 0.190 → 0.082, below 0.1 from n = 1,000. Seeds 0–2 at n = 4,000: MLP 0.169
± 0.019; ``--scale fcn`` 0.115 ± 0.003, above 0.1 in every seed. Findings (the MLP's flat
curve, training length, the ResNet at small n): ``docs/findings/learning_curve.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from lrrich import io
from lrrich.claims import MF_BOUNDARY, Below, Claim, Holds, Less, measured, rf_reference
from lrrich.experiments import _data, _measure, _presets, _seeds

NAME = "learning-curve"
DESCRIPTION = "D Fig 5 / T Fig 7.1-7.2b: D_LR and test error vs training-set size, weight decay"


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """Learning-curve settings (D App. F.4, Fig 5 row; T §2.4, §7.2–7.3).

    Paper: ResNet18 (k = 64) on CIFAR-10 subsets of 500 … 50,000 images, SGD lr 0.05, weight decay
    1e-3, 200 epochs, lr × 0.2 every 60, output scale 1/3, augmented. Small scale: mnist5k, the
    MLP, lr 0.5, raw [0, 1] pixels, no augmentation. ``--scale fcn`` reads T Fig 7.6's "FCN of
    width 512 and depth 4" as four weight layers (**Decision**). ``matched_steps`` (**Deviation**
    of the CPU scales: a 50-image run would barely move): every n trains the optimizer steps of
    ``epochs`` epochs at the largest n; ``False`` is D's protocol.
    """

    dataset: str = "mnist5k"
    model: str = "mlp"  # 'mlp' (small), 'resnet18' (paper), 'lenet5', …
    width: int = 256
    depth: int = 2
    n_trains: tuple[int, ...] = (50, 100, 200, 500, 1000, 2000, 4000)  # nested, class-balanced
    weight_decays: tuple[float, ...] = (0.0, 1e-3)  # coupled L2 weight decays λ (T §2.4: 1e-3)
    lr: float = 0.5
    epochs: int = 100  # at every n, or at the largest n with matched_steps
    step_every_epochs: int = 40  # lr × 0.2 every this many epochs (matched_steps: of the largest n)
    output_scale: float = 1 / 3
    matched_steps: bool = True


SCALES = {
    "small": Config(),
    # the same protocol with a conv net: LeNet-5 at the paper's ResNet18 learning rate 0.05
    "conv": Config(model="lenet5", lr=0.05),
    # the paper's model at k = 4 with mf-regime's protocol (60 epochs at n = 4,000, 1,860 steps
    # per network, lr × 0.2 every 18 epochs)
    "resnet": Config(model="resnet18", width=4, lr=0.05, epochs=60, step_every_epochs=18),
    # T Fig 7.6's FCN on MNIST: width 512, 4 weight layers, weight decay 1e-3
    "fcn": Config(width=512, depth=3, weight_decays=(1e-3,)),
    "paper": _presets.paper_scale(
        Config, "cifar10", model="resnet18", weight_decays=(1e-3,), lr=0.05, epochs=200,
        n_trains=(500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000), step_every_epochs=60,
        matched_steps=False,
    ),
}  # fmt: skip


def run(config: Config, run_dir: Path) -> dict:
    """Train ``seeds`` networks per (n, λ); summary: D_LR and test accuracy per point, error
    exponents."""
    from nets.data import stratified_order

    if not config.n_trains or not config.weight_decays:
        raise ValueError("n_trains and weight_decays must each hold at least one value")
    full = _data.load_data(dataclasses.replace(config, n_train=None), config.model)
    bad = [n for n in config.n_trains if not 1 <= n <= len(full.x_train)]
    if bad:
        raise ValueError(f"n_trains entries must be in [1, {len(full.x_train)}], got {bad}")
    order = stratified_order(full.y_train, config.seed)  # nested subsets: its first n
    points, per_seed, summary = {}, {}, {}
    for wd in config.weight_decays:
        for n in sorted(config.n_trains):
            keep = np.sort(order[:n])
            data = full._replace(x_train=full.x_train[keep], y_train=full.y_train[keep])
            runs = _seeds.train_seeds(
                config.model, data, _train_config(config, n, wd),
                seeds=_presets.seed_list(config), width=config.width, depth=config.depth,
                run_dir=Path(run_dir) / f"n{n}_wd{_seeds.tag(wd)}",
                checkpoint_every=config.checkpoint_every,
            )  # fmt: skip
            for r in runs:
                r.update(n_train=n, weight_decay=wd)
                r.pop("decomposition", None)  # only D_LR and accuracy are plotted here
            label = f"n={n}, wd={_seeds.tag(wd)}"
            per_seed[label] = [_seeds.point_summary(r) for r in runs]
            # the seed mean of each headline number; curves and sizes of the first seed
            points[label] = {**runs[0], **_seeds.seed_mean(per_seed[label])}
            summary.update(_seeds.point_summary(points[label], f"_n{n}_wd{_seeds.tag(wd)}"))
    summary = _curve_summary(config, list(points.values()), summary, len(full.x_test))
    record = _measured(per_seed, points, config, full, max(config.n_trains))
    return {"summary": summary, "points": points, "per_seed": per_seed, "measured": record}


def _train_config(config: Config, n: int, wd: float):
    """The training of one point: ``epochs`` epochs of n (or of the largest n, in optimizer
    steps, with ``matched_steps``), the step schedule's period scaled with them."""
    n_max = max(config.n_trains)
    batch = min(config.batch_size, n)
    spe = n // batch
    per_epoch = n_max // min(config.batch_size, n_max) if config.matched_steps else spe
    steps = config.epochs * per_epoch
    every = max(1, round(config.step_every_epochs * steps / config.epochs / spe))
    return _presets.train_config(config, n, weight_decay=wd, batch_size=batch, steps=steps,
                                 schedule="step", step_every_epochs=every)  # fmt: skip


def _curve_summary(config: Config, pts: list[dict], summary: dict, n_test: int) -> dict:
    """``summary`` with each λ's error exponent and D_LR at the ends of the curve, and the curves
    in words (the plain keys of one point when the grid has one)."""
    if len(pts) == 1:
        return {**_seeds.point_summary(pts[0]), "seeds": config.seeds}
    n_max, wd0 = max(config.n_trains), config.weight_decays[0]
    if len(config.n_trains) > 1:
        for wd in config.weight_decays:
            sel, t = [p for p in pts if p["weight_decay"] == wd], _seeds.tag(wd)
            n = np.array([p["n_train"] for p in sel], float)
            err = np.maximum(1 - np.array([p["test_acc"] for p in sel]), 0.5 / n_test)
            # least-squares slope of log(test error) vs log(n), error floored at half an example
            summary[f"error_exponent_wd{t}"] = float(np.polyfit(np.log(n), np.log(err), 1)[0])
            summary[f"dlr_smallest_n_wd{t}"] = sel[0]["dlr"]
            summary[f"dlr_largest_n_wd{t}"] = sel[-1]["dlr"]
        curve = [f"{p['dlr']:.3f} (n={p['n_train']})" for p in pts if p["weight_decay"] == wd0]
        summary["D_LR vs n"] = f"{', '.join(curve)} at λ={_seeds.tag(wd0)}"
    if len(config.weight_decays) > 1:
        row = [f"{p['dlr']:.3f} (λ={_seeds.tag(p['weight_decay'])})" for p in pts
               if p["n_train"] == n_max]  # fmt: skip
        summary["D_LR vs weight decay"] = f"{', '.join(row)} at n={n_max}"
    summary["seeds"] = config.seeds
    return summary


_N_QUOTE = (
    "D §5 (Fig 5): 'the learning curve follows a power law but exhibits a shift in the exponent "
    "at a dataset size, which coincides with a sudden transition into the rich regime'; T §7.2 "
    "(Fig 7.1): 'The transition into faster scaling coincides with the transition from the EF "
    "to the MF regime'; T Fig 7.6: 'FCN of width 512 and depth 4 … reaches the MF regime on "
    "MNIST dataset'"
)
_WD_QUOTE = (
    "T §7.3 (Fig 7.2(b)): 'a tighter MF regime correlates with a larger weight-decay'; 'the "
    "model without weight decay also lies in the MF regime'"
)
CLAIMS = (
    Claim("critical-n", "D Fig 5; T Fig 7.1", _N_QUOTE,
          "test D_LR ≥ 0.1 at the smallest n and < 0.1 at every n from a critical n on (the "
          "grid's first λ)", "test",
          Holds("ef_to_mf", "the curve crosses from D_LR ≥ 0.1 to < 0.1 for good, in this seed"),
          paper="EF below a critical n, MF beyond it"),
    Claim("dlr-falls-with-n", "D Fig 5; T Fig 7.1", _N_QUOTE,
          "Spearman rank correlation of n and test D_LR, per seed (the grid's first λ)", "test",
          Below("spearman_n_dlr", -0.8), paper="D_LR falls with n"),
    Claim("mf-largest-n", "D Fig 5; T Fig 7.6", _N_QUOTE,
          "test D_LR at the largest n (the grid's first λ) below 0.1", "test",
          Below("dlr_largest_n", MF_BOUNDARY), paper="< 0.1 (MF regime)", dlr=("dlr_largest_n",)),
    Claim("wd-richer", "T Fig 7.2(b)", _WD_QUOTE,
          "test D_LR at the largest n: largest λ below smallest λ", "test",
          Less("dlr_wd_largest", "dlr_wd_smallest"), paper="smaller D_LR with larger λ",
          dlr=("dlr_wd_largest", "dlr_wd_smallest")),
    Claim("mf-without-wd", "T Fig 7.2(b)", _WD_QUOTE,
          "test D_LR at the largest n without weight decay below 0.1", "test",
          Below("dlr_no_wd", MF_BOUNDARY), paper="< 0.1 at λ = 0", dlr=("dlr_no_wd",)),
)  # fmt: skip
"""D Fig 5, T Fig 7.1, 7.2(b), 7.6. The per-seed checks of a curve (``ef_to_mf``,
``spearman_n_dlr``) are computed within each seed by :func:`curve_checks`; a claim whose grid is
missing (one n, one λ, no λ = 0) is not judged."""


def curve_checks(n: np.ndarray, dlr: np.ndarray) -> dict:
    """One seed's learning-curve checks: ``ef_to_mf`` (1.0 when D_LR ≥ 0.1 at the smallest n and
    < 0.1 at every n from some larger n on, else 0.0) and ``spearman_n_dlr``.

    Args:
      n: (K,) training-set sizes, increasing, K ≥ 2.
      dlr: (K,) that seed's test D_LR at each n.
    """
    below = np.asarray(dlr) < MF_BOUNDARY
    tail = np.flatnonzero(~below)  # the MF side must hold from the last EF point on
    crosses = (not below[0]) and tail.size and tail[-1] < len(below) - 1
    return {"ef_to_mf": float(bool(crosses)), "spearman_n_dlr": _measure.spearman(n, dlr)}


def _measured(per_seed: dict, points: dict, config: Config, full, n_max: int) -> dict:
    """The per-seed record the claims read (:func:`lrrich.claims.measured`)."""
    ns, wds, wd0 = sorted(config.n_trains), sorted(config.weight_decays), config.weight_decays[0]

    def dlr(n, wd):
        return np.array([r["dlr"] for r in per_seed[f"n={n}, wd={_seeds.tag(wd)}"]])

    values = {"dlr_largest_n": dlr(n_max, wd0)}
    if len(ns) > 1:
        curves = np.stack([dlr(n, wd0) for n in ns], axis=1)  # (seeds, K)
        checks = [curve_checks(np.array(ns), c) for c in curves]
        values |= {k: [c[k] for c in checks] for k in ("ef_to_mf", "spearman_n_dlr")}
    if len(wds) > 1:
        values |= {"dlr_wd_largest": dlr(n_max, wds[-1]), "dlr_wd_smallest": dlr(n_max, wds[0])}
    if 0.0 in wds:
        values["dlr_no_wd"] = dlr(n_max, 0.0)
    p = next(iter(points.values()))["n_features"]
    ref = rf_reference(len(full.x_test), p, full.num_classes)
    dropped = ", ".join(str(n) for n in ns if n % min(config.batch_size, n))
    deviations = {
        "the last partial batch of each epoch is dropped where the batch does not divide n "
        f"(n = {dropped}: ⌊n/B⌋ steps per epoch where the papers' PyTorch loader takes ⌈n/B⌉)":
        dropped,
        f"every n trains the {config.epochs} epochs of n = {n_max:,} in optimizer steps "
        "(D: 200 epochs at every n, i.e. fewer steps at small n)": config.matched_steps,
        f"{config.model} on {full.name} instead of ResNet18 on CIFAR-10":
        config.model != "resnet18" or not full.name.startswith("cifar10"),
    }  # fmt: skip
    return measured(
        values, seeds=_presets.seed_list(config),
        dataset=f"{full.name} (subsets of {len(full.x_train):,} / {len(full.x_test):,} test)",
        scale=f"{config.model} (width {config.width}, depth {config.depth}), {config.epochs} "
        f"epochs, SGD lr {config.lr:g}, λ {', '.join(f'{w:g}' for w in wds)}",
        reference={f: ref for f in values if f.startswith("dlr_")},
        deviations=[d for d, applies in deviations.items() if applies],
    )  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``learning_curve.png``: test error and D_LR vs n (one line per λ) and vs λ at the
    largest n."""
    import matplotlib.pyplot as plt

    pts = list(results["points"].values())
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), constrained_layout=True)
    for wd in sorted({p["weight_decay"] for p in pts}):
        sel = sorted((p for p in pts if p["weight_decay"] == wd), key=lambda p: p["n_train"])
        n = [p["n_train"] for p in sel]
        axes[0].loglog(n, [max(1 - p["test_acc"], 1e-3) for p in sel], "o-", label=f"λ={wd:g}")
        axes[1].semilogx(n, [p["dlr"] for p in sel], "o-", label=f"λ={wd:g}")
    axes[0].set(xlabel="training-set size n", ylabel="test error", title="learning curve")
    axes[1].axhline(0.1, color="grey", lw=0.8, ls="--")
    axes[1].set(xlabel="training-set size n", ylabel="D_LR (test)", ylim=(0, 1), title="richness")
    n_max = max(p["n_train"] for p in pts)
    sel = sorted((p for p in pts if p["n_train"] == n_max), key=lambda p: p["weight_decay"])
    for key, fmt, label in (("dlr", "o-", "D_LR (test)"), ("test_acc", "s-", "test accuracy")):
        axes[2].plot(range(len(sel)), [p[key] for p in sel], fmt, label=label)
    axes[2].set_xticks(range(len(sel)), [f"{p['weight_decay']:g}" for p in sel])
    axes[2].set(xlabel="weight decay λ", ylim=(0, 1.02), title=f"n = {n_max}")
    for ax in axes[::2]:
        ax.legend(fontsize=8)
    return [io.save_figure(fig, Path(run_dir) / "learning_curve.png")]
