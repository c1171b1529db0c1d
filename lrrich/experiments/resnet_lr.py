"""ResNet18 learning-rate sweep and the minimum-feature check of thesis Table 2.2.

D App. E Fig 15 / S's table / T Fig 7.2(a): ResNet18 on CIFAR-100 with SGD at learning rates
0.005 / 0.05 / 0.2 — the smallest learning rate is lazier (D_LR 0.053, test 66.3 %), the
intermediate one is the richest and the best (0.025, 78.3 %), the largest drifts back (0.039,
74.5 %). At every learning rate the feature decomposition is read as in T Table 2.2: the
minimum-feature (MF) regime has D_eff(ρ) ≈ D_eff(Q̂) ≈ C and D_LR < 0.1 (T Definition 2). The
lr = 0.05 point is T Table 2.2's ResNet18/CIFAR-100 row (D_eff 99.9 / 99.7, D_LR 0.025).

Grid: ``lrs`` — ``run`` trains every value and every seed (``seeds``, default 3) in one run and
judges each row over the seeds; a sweep sets one value per run, e.g. ``lrrich sweep resnet-lr
--grid lrs=0.005,0.05,0.2 --seeds 3`` (a sweep sets
``seeds=1`` per point; a one-value run reports the plain keys
``dlr``, ``test_acc``, ``d_eff_rho``, …). A rate whose loss diverges in a seed is kept as
"diverged" and ends the search for the largest stable rate (D App. E).

Command: ``lrrich run resnet-lr --out runs/lr`` (small: ResNet18 with k = 4 on 1,024 real
Fashion-MNIST images zero-padded to 32×32, C = 10, 3 rates × 3 seeds × 1,600 steps (200
epochs)). The paper's setting is an accelerator run (``--scale paper``). The papers disagree on
its schedule: T §2.4 trains 600 epochs at a constant rate, D App. F.4 400 epochs with the rate
× 0.2 every 60; ``--scale paper`` follows T (whose Table 2.2 value is compared), and ``--set
epochs=400 --set schedule=step`` is D's protocol (the Config docstring says more).
Runtime: tens of minutes on a CPU, each seed (its three rates) about a third of it; ``--set
seeds=1`` for a quick look; ``lrrich list`` shows the wall time and machine of a recorded run.
``--scale past-0.2`` (rates 0.2 / 0.4 / 0.8 / 1.6, 50 epochs on mnist5k) and
``--scale width16`` (k = 16 at lr 0.05, 50 epochs; ``--set width=4`` is its k = 4 comparison)
are the deciding runs of the findings; with 3 seeds both are slow on a CPU.
Expected (seed 0; lr 0.005 / 0.05 / 0.2): test D_LR 0.31 / 0.114 / 0.113, test accuracy 67.3 /
75.9 / 77.7 % — the smallest lr the laziest and the worst; lr 0.2, not 0.05, the richest and
the best; D_eff(ρ) 7.4 / 9.9 / 9.7, D_eff(Q̂)
13.4 / 16.8 / 15.4 (C = 10). Seeds 0-2: test D_LR 0.329 ± 0.021 / 0.119 ± 0.013 / 0.103 ±
0.012 (random features at p = 32: 0.44). ``--scale past-0.2`` (seed 0, mnist5k): test D_LR 0.098 /
0.132 / 0.180 / 0.526 at lr 0.2 / 0.4 / 0.8 / 1.6, none diverges — a too large rate is lazier;
seeds 0–2 on a GPU: 0.102 ± 0.019 at lr 0.2, 0.263 ± 0.036 at lr 1.6 (above in every seed; the
lr-1.6 networks fit 79–93 % of their training images). ``--scale width16``: test D_LR 0.104 (random features
at p = 128: 0.74) against 0.146 for k = 4 at the same 50 epochs (0.45), seed 0.

Findings (three seeds, augmentation, under-training, rates past 0.2, width): ``docs/findings/resnet_lr.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from lrrich.claims import (
    MF_BOUNDARY,
    All,
    Below,
    Claim,
    Less,
    Premise,
    Value,
    measured,
    rf_reference,
)
from lrrich.experiments import _data, _measure, _plots, _presets, _seeds

NAME = "resnet-lr"
DESCRIPTION = "S / T Fig 7.2a: ResNet18 lr sweep (D_LR, accuracy) and T Table 2.2 MF check"
PAPER = {
    "dlr_lr0.005": 0.053,
    "dlr_lr0.05": 0.025,
    "dlr_lr0.2": 0.039,
    "test_acc_lr0.005": 0.663,
    "test_acc_lr0.05": 0.783,
    "test_acc_lr0.2": 0.745,
    "d_eff_rho_lr0.05": 99.9,
    "d_eff_util_lr0.05": 99.7,
    "richest_lr": 0.05,
}


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """ResNet18 learning-rate settings. Paper: T §2.4 (Table 2.2 setup) and D App. F.4.

    Paper: ResNet18 (k = 64, Φ ∈ ℝ⁵¹²) on all 50,000 CIFAR-100 images, SGD momentum 0.9, weight
    decay 1e-3, batch 128, output scale ε = 1/10, CIFAR augmentation; learning rates 0.005 /
    0.05 / 0.2. **The papers disagree on the schedule**: T §2.4 trains CIFAR-100 "for 600 epochs
    without learning rate scheduling", D App. F.4's table gives its ResNet18/CIFAR-100 row (Fig 7)
    400 epochs with the learning rate × 0.2 every 60 epochs. The ``paper`` preset follows T, whose
    Table 2.2 row (D_LR 0.025 at lr 0.05) is the value compared; ``--set epochs=400
    --set schedule=step`` is D's protocol. D names no protocol for Fig 15 itself.

    Small-scale deviations: 1,024 Fashion-MNIST training images zero-padded to 32×32×1 (all 10,000 test
    images; ``mnist5k`` when Fashion-MNIST is not installed; C = 10, so the MF regime predicts
    D_eff ≈ 10 instead of 100), k = 4 instead of 64 (Φ ∈ ℝ³²), 200 epochs (1,600 steps) at a
    constant rate (T §2.4 steps MNIST × 0.2 every 60 epochs; the constant rate is its CIFAR-100
    protocol), no augmentation, output scale 1/3 (D's CIFAR-10 value). The shared training
    fields are documented in :class:`~lrrich.experiments._presets.ImageTraining`.

    Attributes:
      lrs: the SGD learning rates trained (paper 0.005, 0.05, 0.2). A rate whose loss diverges
        in a seed is recorded as diverged there (D App. E: the largest rate is "the largest
        without gradient blow up").
      schedule: ``'constant'`` (CIFAR-100) or ``'step'`` (× 0.2 every ``step_every_epochs``).
      step_every_epochs: period of the step schedule (paper 60).
    """

    dataset: str = "fashion_mnist"
    n_train: int | None = 1024
    width: int = 4
    lrs: tuple[float, ...] = (0.005, 0.05, 0.2)
    momentum: float = 0.9
    weight_decay: float = 1e-3
    epochs: int = 200
    schedule: str = "constant"
    step_every_epochs: int = 60
    output_scale: float = 1 / 3


SCALES = {
    "small": Config(),
    # the deciding runs of docs/findings/resnet_lr.md: rates doubled past 0.2 until the loss
    # diverges (50 epochs: 400 steps per point), and the k = 16 point of the width comparison
    "past-0.2": Config(dataset="mnist5k", lrs=(0.2, 0.4, 0.8, 1.6), epochs=50),
    "width16": Config(dataset="mnist5k", width=16, lrs=(0.05,), epochs=50),
    "paper": _presets.paper_scale(Config, "cifar100", epochs=600, output_scale=0.1),
}


def run(config: Config, run_dir: Path) -> dict:
    """Train ResNet18 at each learning rate and seed; summary: seed means of D_LR, accuracy,
    D_eff(ρ), D_eff(Q̂) per lr, the richest and the best learning rate, whether every run is in
    the MF regime, and the rates that diverged."""

    if not config.lrs:
        raise ValueError("lrs is empty: give at least one learning rate > 0")
    data = _data.load_data(config, "resnet18")
    seeds = _presets.seed_list(config)
    points, per_seed, by_suffix, curves = {}, {}, {}, {}
    for lr in config.lrs:
        tc = _presets.train_config(config, len(data.x_train), lr=lr)
        label = f"lr={_seeds.tag(lr)}"
        runs = []
        for seed in seeds:
            sub = Path(run_dir) / f"lr{_seeds.tag(lr)}"
            runs.append(_train_or_diverge(config, data, tc, seed, sub))
        per_seed[label] = [_compact(r) for r in runs]
        stable = [r for r in runs if not r.get("diverged")]
        if stable:
            points[label] = stable[0]  # the first stable seed's point (its decomposition)
            curves[label] = _seeds.seed_curves(stable)
        by_suffix[f"_lr{_seeds.tag(lr)}"] = _seeds.seed_mean(runs)
    means = {lr: by_suffix[f"_lr{_seeds.tag(lr)}"] for lr in config.lrs}
    summary = _seeds.grid_summary(by_suffix)
    stable_lrs = [lr for lr in config.lrs if np.isfinite(means[lr]["dlr"])]
    if len(config.lrs) > 1 and stable_lrs:
        summary["richest_lr"] = float(min(stable_lrs, key=lambda lr: means[lr]["dlr"]))
        summary["best_lr"] = float(max(stable_lrs, key=lambda lr: means[lr]["test_acc"]))
    summary["num_classes"] = data.num_classes
    summary["seeds"] = len(seeds)
    summary["diverged_lrs"] = [
        float(lr)
        for lr in config.lrs
        if any(r["diverged"] for r in per_seed[f"lr={_seeds.tag(lr)}"])
    ]
    summary["all_mf_regime"] = bool(
        all(r["dlr"] < MF_BOUNDARY for p in per_seed.values() for r in p)
    )
    baseline = [
        _measure.init_baseline(
            _data.build_model("resnet18", data, width=config.width, seed=s), data
        )
        for s in seeds
    ]
    return {
        "summary": summary,
        "points": points,
        "seed_histories": curves,
        "per_seed": per_seed,
        "lrs": list(config.lrs),
        "measured": _measured(per_seed, config, data, baseline),
    }


def _train_or_diverge(config: Config, data, tc, seed: int, run_dir: Path) -> dict:
    """One seed at one rate: :func:`~lrrich.experiments._seeds.train_seeds`, or, when the
    loss turns non-finite, ``{"diverged": True, "diverged_step": …}`` with NaN measures."""
    from nets import TrainingDiverged

    try:
        (res,) = _seeds.train_seeds(
            "resnet18",
            data,
            tc,
            seeds=[seed],
            width=config.width,
            run_dir=run_dir,
            checkpoint_every=config.checkpoint_every,
        )
    except TrainingDiverged as err:
        nan = float("nan")
        return {
            "diverged": True,
            "diverged_step": int(err.step),
            "n_features": 8 * config.width,
            **dict.fromkeys(("dlr", "dlr_train", "test_acc", "train_acc"), nan),
        }
    return {"diverged": False, **res}


def _compact(res: dict) -> dict:
    """A seed's numbers without its curves and decomposition (for ``results["per_seed"]``)."""
    return {k: v for k, v in res.items() if k not in ("history", "decomposition")}


_QUOTE = (
    "S's table and key findings: 'The optimal learning rate corresponds to the richest "
    "training: ResNet18 on CIFAR-100 achieves the smallest D_LR at lr=0.05' (D_LR 0.053 / "
    "0.025 / 0.039, test 66.3 / 78.3 / 74.5 % at lr 0.005 / 0.05 / 0.2); D App. E (Fig 15): 'a "
    "smaller learning rate induces lazier dynamics, while a too large learning rate ... also "
    "deviates from the rich regime'"
)
_MF_QUOTE = (
    "T Table 2.2 (caption): 'All generalizing models in the table are in the MF regime "
    "(κ_CKA < 0.1). The models all use only C features (D_eff(Q̂) ≈ C), with only those "
    "features being significant (D_eff(ρ) ≈ C)'"
)
_TOO_LARGE_QUOTE = (
    "D App. E (Fig 15): 'a too large learning rate (largest without gradient blow up) also "
    "deviates from the rich regime'"
)


def _dlr_claim(lr: str, paper: float, direction) -> Claim:
    return Claim(
        f"dlr-lr{lr}",
        "S table; D App. E Fig 15",
        _QUOTE,
        f"test D_LR at lr {lr}",
        "test",
        Value(f"dlr_lr{lr}", paper, "dlr_close_values", direction=direction),
        paper=f"{paper:g}",
        dlr=(f"dlr_lr{lr}",),
    )


CLAIMS = (
    _dlr_claim("0.005", 0.053, Less("dlr_lr0.05", "dlr_lr0.005")),
    _dlr_claim("0.05", 0.025, Below("dlr_lr0.05", MF_BOUNDARY)),
    _dlr_claim("0.2", 0.039, Below("dlr_lr0.2", MF_BOUNDARY)),
    Claim(
        "richest-lr0.05",
        "S table (key findings)",
        _QUOTE,
        "test D_LR smallest at lr 0.05 (below lr 0.005 and lr 0.2)",
        "test",
        All((Less("dlr_lr0.05", "dlr_lr0.005"), Less("dlr_lr0.05", "dlr_lr0.2"))),
        paper="0.025 < 0.053, 0.039",
        dlr=("dlr_lr0.005", "dlr_lr0.05", "dlr_lr0.2"),
    ),
    Claim(
        "best-lr0.05",
        "S table",
        _QUOTE,
        "test accuracy highest at lr 0.05 (above lr 0.005 and lr 0.2)",
        "test",
        All(
            (Less("test_acc_lr0.005", "test_acc_lr0.05"), Less("test_acc_lr0.2", "test_acc_lr0.05"))
        ),
        paper="78.3 % > 66.3 %, 74.5 %",
    ),
    Claim(
        "mf-lr0.05",
        "T Table 2.2",
        _MF_QUOTE,
        "at lr 0.05: test D_LR < 0.1, D_eff(ρ) / C ≈ 1 and D_eff(Q̂) / C ≈ 1",
        "test",
        All(
            (
                Below("dlr_lr0.05", MF_BOUNDARY),
                Value("d_eff_rho_per_c_lr0.05", 1.0, "d_eff"),
                Value("d_eff_util_per_c_lr0.05", 1.0, "d_eff"),
            )
        ),
        paper="D_eff 99.9 / 99.7 (C = 100), D_LR 0.025",
        dlr=("dlr_lr0.05",),
    ),
    Claim(
        "too-large-lazier",
        "D App. E Fig 15",
        _TOO_LARGE_QUOTE,
        "test D_LR at lr 1.6 (the largest rate tried, no blow-up) above lr 0.2",
        "test",
        Less("dlr_lr0.2", "dlr_lr1.6"),
        paper="lazier at the largest stable rate",
        premise=(
            Premise("train_acc_lr0.2", ">=", 0.94, "lr 0.2 fits its training set (≥ 94 %)"),
            Premise("train_acc_lr1.6", ">=", 0.94, "lr 1.6 fits its training set (≥ 94 %)"),
        ),
        dlr=("dlr_lr0.2", "dlr_lr1.6"),
        note="a network that does not fit its training set is under-trained, not shown lazier",
    ),
)
"""S's table, D App. E and T Table 2.2. A claim whose rates the grid lacks is not judged (the
small grid has no lr 1.6, ``--scale past-0.2`` none of 0.005 / 0.05)."""


def _measured(per_seed: dict, config: Config, data, baseline: list[float]) -> dict:
    """The per-seed record the claims read: D_LR, accuracies and D_eff / C per rate."""
    c = data.num_classes
    values = {}
    for lr in config.lrs:
        t = _seeds.tag(lr)
        runs = per_seed[f"lr={t}"]
        for k in ("dlr", "test_acc", "train_acc"):
            values[f"{k}_lr{t}"] = [r[k] for r in runs]
        for k in ("d_eff_rho", "d_eff_util"):
            if all(k in r for r in runs):
                values[f"{k}_per_c_lr{t}"] = [r[k] / c for r in runs]
    dlr_fields = [f for f in values if f.startswith("dlr_")]
    ref = rf_reference(len(data.x_test), 8 * config.width, c)
    deviations = _presets.partial_batch_deviation(len(data.x_train), config.batch_size)
    if not data.name.startswith("cifar100") or config.width != 64:
        deviations.append(
            f"ResNet18 k = {config.width} on {data.name} (C = {c}) instead of k = 64 on "
            "CIFAR-100 (C = 100): the D_eff claims read D_eff / C"
        )
    return measured(
        values,
        seeds=_presets.seed_list(config),
        dataset=_data.dataset_text(data),
        scale=f"ResNet18 k = {config.width}, {config.epochs} epochs, SGD ({config.schedule}), "
        f"wd {config.weight_decay:g}",
        baseline={f: baseline for f in dlr_fields},
        reference={f: ref for f in dlr_fields},
        deviations=deviations,
    )


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``lr_sweep.png`` (D_LR, accuracy, D_eff vs lr: seed means, dots per seed, diverged rates
    marked), ``lr_training.png``, ``lr_features.png`` (first stable seed per rate)."""
    import matplotlib.pyplot as plt

    from lrrich.io import save_figure

    lrs, per_seed = results["lrs"], results["per_seed"]
    c = results["summary"]["num_classes"]
    runs = [per_seed[f"lr={_seeds.tag(lr)}"] for lr in lrs]

    def mean(key):
        return [float(np.nanmean([r.get(key, np.nan) for r in rs] + [np.nan])) for rs in runs]

    def dots(ax, key, fmt):
        for lr, rs in zip(lrs, runs, strict=True):
            ax.plot([lr] * len(rs), [r.get(key, np.nan) for r in rs], fmt, ms=3, alpha=0.5)

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), constrained_layout=True)
    axes[0].plot(lrs, mean("dlr"), "o-", label="test")
    axes[0].plot(lrs, mean("dlr_train"), "s:", label="train")
    dots(axes[0], "dlr", "k.")
    axes[0].axhline(0.1, color="grey", lw=0.8, ls="--")
    for lr in results["summary"].get("diverged_lrs", []):
        axes[0].axvline(lr, color="C3", lw=0.8, ls=":", label=f"diverged (lr {lr:g})")
    axes[0].set(xscale="log", xlabel="learning rate", ylabel="D_LR", title="richness")
    axes[0].legend(fontsize=7)
    axes[1].plot(lrs, mean("test_acc"), "o-", label="test")
    axes[1].plot(lrs, mean("train_acc"), "s:", label="train")
    dots(axes[1], "test_acc", "k.")
    axes[1].set(xscale="log", xlabel="learning rate", ylabel="accuracy", title="performance")
    axes[1].legend(fontsize=8)
    axes[2].plot(lrs, mean("d_eff_rho"), "o-", label="D_eff(ρ) adjusted")
    axes[2].plot(lrs, mean("d_eff_util"), "s-", label="D_eff(Q̂)")
    axes[2].axhline(c, color="grey", lw=0.8, ls="--", label=f"C = {c}")
    axes[2].set(xscale="log", xlabel="learning rate", ylabel="effective dimension")
    axes[2].set_title("T Table 2.2: MF ⇔ D_eff ≈ C", fontsize=9)
    axes[2].legend(fontsize=8)
    paths = [save_figure(fig, Path(run_dir) / "lr_sweep.png")]
    if not results["points"]:
        return paths
    return paths + _plots.plot_points(
        results["points"], run_dir, "lr", "ResNet18 lr sweep", results.get("seed_histories")
    )
