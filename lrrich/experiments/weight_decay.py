"""T Fig 7.2(b): a larger weight decay gives a tighter MF regime (lower D_LR) and better accuracy.

T §7.3 trains ResNet18 on CIFAR-10 at weight decays λ ∈ {0, 1e-4, 5e-4, 1e-3}. Here every
(λ, seed) trains in one :func:`nets.train_many` program; test accuracy, D_LR (κ_CKA, T Eq.
2.8–2.9) and ρ_k/ρ_1 are read on the test set.

**Decision (small scale):** the run is ~370× shorter than T's in summed learning rate (Σ_t η_t =
3.9 over 210 steps against 1,458 over T's 78,200), so the weight decays are T's 0, 1e-4 and 1e-3
× 370: the same total decay Σ_t η_t λ (1.46 at T's 1e-3).

Command: ``lrrich run weight-decay`` (k = 4, 1,000 Fashion-MNIST images, 30 epochs = 210 steps,
3 λ × 3 seeds). ``--scale fit`` trains until the networks fit (k = 16, 4,000 images, 1,860
steps, λ up to 0.025: an accelerator run); ``--scale paper`` is T's setting on CIFAR-10.
Expected (seeds 0–2): at 210 steps the networks are far from a fit (λ = 0: train 56 %, test
50.4 ± 3.2 %, D_LR 0.510 ± 0.009); λ = 0.37 collapses to constant outputs (chance accuracy,
D_LR undefined): the claims are not tested at this scale. Findings:
``docs/findings/weight_decay.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np

from lrrich import io
from lrrich.claims import MF_BOUNDARY, Below, Less, Premise, quoting, rf_reference
from lrrich.experiments import _data, _measure, _plots, _presets, _seeds

NAME = "weight-decay"
DESCRIPTION = "T Fig 7.2b: ResNet18 weight-decay sweep, test accuracy and D_LR vs weight decay"
T_STEPS = 78_200
"""SGD steps of T's runs: 200 epochs of ⌈50,000 / 128⌉ = 391 minibatches."""


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """T §2.4, §7.3 (paper: ResNet18 k = 64, CIFAR-10, D App. F.4). Small scale: Fashion-MNIST,
    ``n_train`` images, k = 4, 30 epochs, no augmentation, λ × 370 (module docstring)."""

    dataset: str = "fashion_mnist"
    model: str = "resnet18"  # T's network (the tests use 'mlp')
    width: int = 4
    n_train: int | None = 1000
    n_test: int = 1000  # the first n_test test images are measured
    lr: float = 0.05
    epochs: int = 30
    step_every_epochs: int = 9  # lr × 0.2 every this many epochs
    output_scale: float = 1 / 3
    # coupled L2 weight decays λ, increasing; the claims read the first and the last
    weight_decays: tuple[float, ...] = (0.0, 0.037, 0.37)


SCALES = {
    "small": Config(),
    # until the networks fit: λ up to 0.025 ≈ 0.6 × T's 1e-3 × 42, the matched total decay of a
    # run 42× shorter than T's in Σ_t η_t
    "fit": Config(width=16, n_train=4000, n_test=2000, epochs=60, step_every_epochs=18,
                  weight_decays=(0.0, 1e-3, 5e-3, 0.025)),
    "paper": _presets.paper_scale(Config, "cifar10", model="resnet18", n_test=10_000, epochs=200,
                                  step_every_epochs=60, weight_decays=(0.0, 1e-4, 5e-4, 1e-3)),
}  # fmt: skip


def run(config: Config, run_dir: Path) -> dict:
    """Train every (λ, seed) in one program; accuracy, D_LR and ρ_k/ρ_1 on the test set."""
    from nets import train_many

    wds = tuple(config.weight_decays)
    if len(wds) < 2 or list(wds) != sorted(set(wds)) or wds[0] < 0:
        raise ValueError(f"weight_decays must be ≥ 2 increasing values ≥ 0, got {wds}")
    data = _data.load_data(config, config.model)
    data = data._replace(x_test=data.x_test[: config.n_test], y_test=data.y_test[: config.n_test])
    seeds = _presets.seed_list(config)
    grid = [(wd, s) for wd in wds for s in seeds]
    n = len(data.x_train)
    configs = [_presets.train_config(config, n, weight_decay=wd, schedule="step") for wd, _ in grid]
    net = dict(width=config.width, depth=config.depth)
    models = [_data.build_model(config.model, data, seed=s, **net) for _, s in grid]
    # each seed's network is the same at every λ: its at-init baseline is the first λ's
    baseline = [_measure.init_baseline(m, data) for m in models[: len(seeds)]]
    trained, hists = train_many(
        models, data, configs, [jax.random.key(s) for _, s in grid],
        log_every=max(config.epochs * (n // configs[0].batch_size) // 10, 1),
        eval_size=min(1024, config.n_test), metric_splits=("test",), progress=True,
        vectorize=False,  # one run after another: the vmapped ResNet18 step is slower on a CPU
    )  # fmt: skip
    points = {}
    for (wd, seed), model, hist in zip(grid, trained, hists, strict=True):
        res = _measure.measure(model, data, config.output_scale)
        res.update(weight_decay=wd, seed=seed, train_seconds=hist.train_time)
        res["history"] = {k: hist.column(k).tolist() for k in ("step", "test_acc", "dlr_test")}
        points[f"wd={_seeds.tag(wd)}, seed={seed}"] = res
    summary = {}
    for wd in wds:
        sel = [p for p in points.values() if p["weight_decay"] == wd]
        for k in ("dlr", "test_acc", "train_acc", "d_eff_rho"):
            if all(k in p for p in sel):
                summary[f"{k}_wd{_seeds.tag(wd)}"] = _seeds.seed_mean(sel, [k])[k]
    summary["seeds"] = len(seeds)
    p = next(iter(points.values()))["n_features"]
    return {"summary": summary, "points": points,
            "reference": rf_reference(len(data.x_test), p, data.num_classes),
            "measured": _measured(points, config, data, baseline)}  # fmt: skip


_FITS = tuple(
    Premise(f"train_acc_wd_{k}", ">=", 0.94, f"the network at the {k} λ fits its training set "
            "(≥ 94 %; T's networks are trained to convergence)")
    for k in ("smallest", "largest")
)  # fmt: skip
_row = quoting("T Fig 7.2(b)", "T §7.3 (Fig 7.2(b)): 'we study the effect of weight-decay for a "
               "ResNet18 on CIFAR10 where a tighter MF regime correlates with a larger "
               "weight-decay and better performance'; 'the model without weight decay also lies "
               "in the MF regime'", premise=_FITS)  # fmt: skip
CLAIMS = (
    _row("dlr-lower", "test D_LR at the largest λ below the smallest λ's",
         Less("dlr_wd_largest", "dlr_wd_smallest"), "smaller with larger λ",
         dlr=("dlr_wd_largest", "dlr_wd_smallest")),
    _row("acc-higher", "test accuracy at the largest λ above the smallest λ's",
         Less("test_acc_wd_smallest", "test_acc_wd_largest"), "higher with larger λ"),
    _row("mf-without-wd", "test D_LR at λ = 0 below 0.1 (MF regime)",
         Below("dlr_no_wd", MF_BOUNDARY), "< 0.1", source="T §7.3", premise=(_FITS[0],),
         dlr=("dlr_no_wd",)),
)  # fmt: skip
"""T's networks are converged: every claim assumes they fit their training set."""


def _measured(points: dict, config: Config, data, baseline: list[float]) -> dict:
    """Per seed: the smallest and the largest λ of the grid."""
    wds, seeds = tuple(config.weight_decays), _presets.seed_list(config)

    def v(key, wd):
        by_seed = {p["seed"]: p[key] for p in points.values() if p["weight_decay"] == wd}
        return [by_seed[s] for s in seeds]

    values = {f"{k}_wd_{end}": v(k, wd) for end, wd in (("smallest", wds[0]), ("largest", wds[-1]))
              for k in ("dlr", "test_acc", "train_acc")}  # fmt: skip
    if wds[0] == 0:
        values["dlr_no_wd"] = values["dlr_wd_smallest"]
    deviations = []
    if config.epochs * len(data.x_train) < 0.5 * T_STEPS * config.batch_size:
        deviations.append(f"{config.epochs} epochs of {len(data.x_train):,} images against "
                          "T's 78,200 steps (the small scale scales λ × 370 to match T's total "
                          "decay)")  # fmt: skip
    if not data.name.startswith("cifar10") or config.width != 64:
        deviations.append(f"ResNet18 k = {config.width} on {data.name} instead of k = 64 on "
                          "CIFAR-10")  # fmt: skip
    return _seeds.claims_record(
        values, config, data, p=next(iter(points.values()))["n_features"], baseline=baseline,
        scale=f"{config.model} k = {config.width}, SGD lr {config.lr:g}, {config.epochs} epochs, "
        f"λ {', '.join(_seeds.tag(w) for w in wds)}",
        deviations=deviations,
    )  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``weight_decay.png`` in T Fig 7.2(b)'s layout: test accuracy and D_LR vs λ (each seed and
    the mean) and ρ_k/ρ_1 vs k per λ (first seed)."""
    import matplotlib.pyplot as plt

    pts = list(results["points"].values())
    wds = sorted({p["weight_decay"] for p in pts})
    x = np.arange(len(wds))
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), constrained_layout=True)
    for ax, key, label in ((axes[0], "test_acc", "test accuracy"), (axes[1], "dlr", "test D_LR")):
        _plots.seed_dots(ax, x, [[p[key] for p in pts if p["weight_decay"] == w] for w in wds])
        ax.set(xticks=x, xticklabels=[f"{w:g}" for w in wds], xlabel="weight decay λ", ylabel=label)
    axes[1].axhline(0.1, color="grey", lw=0.8, ls="--")
    if ref := results.get("reference"):
        axes[1].axhline(ref["dlr"], color="C3", lw=0.8, ls=":", label="random features")
        axes[1].legend(fontsize=8)
    axes[1].set_ylim(0, max(0.3, axes[1].get_ylim()[1]))
    first = min(p["seed"] for p in pts)
    for i, w in enumerate(wds):
        p = next(q for q in pts if q["weight_decay"] == w and q["seed"] == first)
        if "decomposition" in p:
            rho = np.asarray(p["decomposition"]["relative_intensity"])
            axes[2].loglog(np.arange(1, len(rho) + 1), rho, color=f"C{i}", label=f"λ={w:g}")
    axes[2].axvline(10, color="grey", lw=0.8, ls=":")
    axes[2].set(xlabel="feature k", ylabel="ρ_k / ρ_1", title=f"intensity (seed {first})")
    axes[2].legend(fontsize=8)
    return [io.save_figure(fig, Path(run_dir) / "weight_decay.png")]
