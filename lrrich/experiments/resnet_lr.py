"""S's table / T Fig 7.2(a) / D App. E Fig 15: ResNet18 learning-rate sweep; T Table 2.2's MF check.

ResNet18 on CIFAR-100, SGD at lr 0.005 / 0.05 / 0.2: D_LR 0.053 / 0.025 / 0.039, test 66.3 /
78.3 / 74.5 % (the intermediate rate the richest and the best). Every rate is read as in T Table
2.2 (the MF regime: D_eff(ρ) ≈ D_eff(Q̂) ≈ C, D_LR < 0.1); a rate whose loss diverges in a seed
is kept as "diverged". A sweep sets one rate per run (``lrrich sweep resnet-lr --grid
lrs=0.005,0.05,0.2 --seeds 3``; the plain keys ``dlr``, ``test_acc``, …).

Command: ``lrrich run resnet-lr --out runs/lr`` (small: ResNet18 k = 4 on 1,024 Fashion-MNIST
images, 3 rates × 3 seeds × 200 epochs). ``--scale past-0.2`` (rates 0.2 … 1.6) and ``--scale
width16`` (k = 16) are the deciding runs of the findings.
Expected (seeds 0–2; lr 0.005 / 0.05 / 0.2): test D_LR 0.33 / 0.12 / 0.10 (random features at
p = 32: 0.44), test accuracy 67 / 76 / 78 %: the smallest rate the laziest and the worst, lr
0.2, not 0.05, the richest and the best; D_eff(ρ) 7.4 / 9.9 / 9.7, D_eff(Q̂) 13.4 / 16.8 / 15.4
(C = 10, seed 0). ``past-0.2``: D_LR 0.10 at lr 0.2, 0.26 at lr 1.6, none diverges (but the
lr-1.6 networks fit only 79–93 % of their training images). ``width16``: 0.104 against 0.146
for k = 4 at the same 50 epochs (seed 0). Findings (three seeds, augmentation, under-training,
rates past 0.2, width): ``docs/findings/resnet_lr.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from lrrich import io
from lrrich.claims import MF_BOUNDARY, All, Below, Claim, Less, Premise, Value
from lrrich.experiments import _data, _measure, _plots, _presets, _seeds

NAME = "resnet-lr"
DESCRIPTION = "S / T Fig 7.2a: ResNet18 lr sweep (D_LR, accuracy) and T Table 2.2 MF check"
PAPER = {
    "dlr_lr0.005": 0.053, "dlr_lr0.05": 0.025, "dlr_lr0.2": 0.039, "test_acc_lr0.005": 0.663,
    "test_acc_lr0.05": 0.783, "test_acc_lr0.2": 0.745, "d_eff_rho_lr0.05": 99.9,
    "d_eff_util_lr0.05": 99.7, "richest_lr": 0.05,
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """ResNet18 learning-rate settings (T §2.4, Table 2.2 setup; D App. F.4).

    Paper: ResNet18 (k = 64) on CIFAR-100, SGD momentum 0.9, weight decay 1e-3, batch 128, output
    scale 1/10, augmented. The papers disagree on the schedule: T §2.4 trains 600 epochs at a
    constant rate (the ``paper`` preset), D App. F.4 400 epochs with the rate × 0.2 every 60
    (``--set epochs=400 --set schedule=step``). Small scale: 1,024 Fashion-MNIST images padded
    to 32×32 (C = 10), k = 4, 200 epochs, no augmentation, output scale 1/3.
    """

    dataset: str = "fashion_mnist"
    n_train: int | None = 1024
    width: int = 4
    lrs: tuple[float, ...] = (0.005, 0.05, 0.2)  # the SGD learning rates (paper 0.005, 0.05, 0.2)
    weight_decay: float = 1e-3
    epochs: int = 200
    schedule: str = "constant"  # 'constant' (CIFAR-100) or 'step' (× 0.2 every step_every_epochs)
    step_every_epochs: int = 60  # period of the step schedule (paper 60)
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
    """Train ResNet18 at each learning rate and seed; summary: seed means per rate, the richest
    and the best rate, whether every run is in the MF regime, and the rates that diverged."""
    if not config.lrs:
        raise ValueError("lrs is empty: give at least one learning rate > 0")
    data = _data.load_data(config, "resnet18")
    seeds = _presets.seed_list(config)
    points, per_seed, means, curves, diverged = {}, {}, {}, {}, []
    for lr in config.lrs:
        tc = _presets.train_config(config, len(data.x_train), lr=lr)
        label, sub = f"lr={_seeds.tag(lr)}", Path(run_dir) / f"lr{_seeds.tag(lr)}"
        runs = [_train_or_diverge(config, data, tc, seed, sub) for seed in seeds]
        per_seed[label] = [
            {k: v for k, v in r.items() if k not in ("history", "decomposition")} for r in runs
        ]
        stable = [r for r in runs if not r.get("diverged")]
        if stable:
            points[label] = stable[0]  # the first stable seed's point (its decomposition)
            curves[label] = _seeds.seed_curves(stable)
        means[lr] = _seeds.seed_mean(runs)
        if any(r["diverged"] for r in runs):
            diverged.append(float(lr))
    summary = _seeds.grid_summary({f"_lr{_seeds.tag(lr)}": m for lr, m in means.items()})
    stable_lrs = [lr for lr in config.lrs if np.isfinite(means[lr]["dlr"])]
    if len(config.lrs) > 1 and stable_lrs:
        summary["richest_lr"] = float(min(stable_lrs, key=lambda lr: means[lr]["dlr"]))
        summary["best_lr"] = float(max(stable_lrs, key=lambda lr: means[lr]["test_acc"]))
    mf = all(r["dlr"] < MF_BOUNDARY for p in per_seed.values() for r in p)
    summary |= dict(num_classes=data.num_classes, seeds=len(seeds), diverged_lrs=diverged)
    summary["all_mf_regime"] = mf
    models = [_data.build_model("resnet18", data, width=config.width, seed=s) for s in seeds]
    baseline = [_measure.init_baseline(m, data) for m in models]
    return {"summary": summary, "points": points, "seed_histories": curves, "per_seed": per_seed,
            "lrs": list(config.lrs),
            "measured": _measured(per_seed, config, data, baseline)}  # fmt: skip


def _train_or_diverge(config: Config, data, tc, seed: int, run_dir: Path) -> dict:
    """One seed at one rate (:func:`~lrrich.experiments._seeds.train_seeds`), or, when the loss
    turns non-finite, ``{"diverged": True, "diverged_step": …}`` with NaN measures."""
    from nets import TrainingDiverged

    try:
        (res,) = _seeds.train_seeds(
            "resnet18", data, tc, seeds=[seed], width=config.width, run_dir=run_dir,
            checkpoint_every=config.checkpoint_every,
        )  # fmt: skip
    except TrainingDiverged as err:
        nan = dict.fromkeys(("dlr", "dlr_train", "test_acc", "train_acc"), float("nan"))
        step = {"diverged_step": int(err.step), "n_features": 8 * config.width}
        return {"diverged": True, **step, **nan}
    return {"diverged": False, **res}


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
        f"dlr-lr{lr}", "S table; D App. E Fig 15", _QUOTE, f"test D_LR at lr {lr}", "test",
        Value(f"dlr_lr{lr}", paper, "dlr_close_values", direction=direction), paper=f"{paper:g}",
        dlr=(f"dlr_lr{lr}",),
    )  # fmt: skip


def _fits(lr: str) -> Premise:
    return Premise(f"train_acc_lr{lr}", ">=", 0.94, f"lr {lr} fits its training set (≥ 94 %)")


CLAIMS = (
    _dlr_claim("0.005", 0.053, Less("dlr_lr0.05", "dlr_lr0.005")),
    _dlr_claim("0.05", 0.025, Below("dlr_lr0.05", MF_BOUNDARY)),
    _dlr_claim("0.2", 0.039, Below("dlr_lr0.2", MF_BOUNDARY)),
    Claim("richest-lr0.05", "S table (key findings)", _QUOTE,
          "test D_LR smallest at lr 0.05 (below lr 0.005 and lr 0.2)", "test",
          All((Less("dlr_lr0.05", "dlr_lr0.005"), Less("dlr_lr0.05", "dlr_lr0.2"))),
          paper="0.025 < 0.053, 0.039", dlr=("dlr_lr0.005", "dlr_lr0.05", "dlr_lr0.2")),
    Claim("best-lr0.05", "S table", _QUOTE,
          "test accuracy highest at lr 0.05 (above lr 0.005 and lr 0.2)", "test",
          All((Less("test_acc_lr0.005", "test_acc_lr0.05"),
               Less("test_acc_lr0.2", "test_acc_lr0.05"))),
          paper="78.3 % > 66.3 %, 74.5 %"),
    Claim("mf-lr0.05", "T Table 2.2", _MF_QUOTE,
          "at lr 0.05: test D_LR < 0.1, D_eff(ρ) / C ≈ 1 and D_eff(Q̂) / C ≈ 1", "test",
          All((Below("dlr_lr0.05", MF_BOUNDARY), Value("d_eff_rho_per_c_lr0.05", 1.0, "d_eff"),
               Value("d_eff_util_per_c_lr0.05", 1.0, "d_eff"))),
          paper="D_eff 99.9 / 99.7 (C = 100), D_LR 0.025", dlr=("dlr_lr0.05",)),
    Claim("too-large-lazier", "D App. E Fig 15", _TOO_LARGE_QUOTE,
          "test D_LR at lr 1.6 (the largest rate tried, no blow-up) above lr 0.2", "test",
          Less("dlr_lr0.2", "dlr_lr1.6"), paper="lazier at the largest stable rate",
          premise=(_fits("0.2"), _fits("1.6")), dlr=("dlr_lr0.2", "dlr_lr1.6"),
          note="a network that does not fit its training set is under-trained, not shown lazier"),
)  # fmt: skip
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
    other = not data.name.startswith("cifar100") or config.width != 64
    deviation = f"ResNet18 k = {config.width} on {data.name} (C = {c}) instead of k = 64 on "
    deviation += "CIFAR-100 (C = 100): the D_eff claims read D_eff / C"
    scale = f"ResNet18 k = {config.width}, {config.epochs} epochs, SGD ({config.schedule}), "
    scale += f"wd {config.weight_decay:g}"
    return _seeds.claims_record(
        values, config, data, p=8 * config.width, baseline=baseline, scale=scale,
        deviations=[deviation] if other else [],
    )  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``lr_sweep.png`` (D_LR, accuracy, D_eff vs lr: seed means, dots per seed, diverged rates
    marked), ``lr_training.png``, ``lr_features.png`` (first stable seed per rate)."""
    import matplotlib.pyplot as plt

    lrs, c = results["lrs"], results["summary"]["num_classes"]
    runs = [results["per_seed"][f"lr={_seeds.tag(lr)}"] for lr in lrs]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), constrained_layout=True)
    panels = (
        (0, "dlr", "o-", "C0", "test"), (0, "dlr_train", "s:", "C1", "train"),
        (1, "test_acc", "o-", "C0", "test"), (1, "train_acc", "s:", "C1", "train"),
        (2, "d_eff_rho", "o-", "C0", "D_eff(ρ) adjusted"),
        (2, "d_eff_util", "s-", "C1", "D_eff(Q̂)"),
    )  # fmt: skip
    for i, key, fmt, color, label in panels:  # the mean skips a diverged seed's NaN
        values = [[r.get(key) for r in rs] for rs in runs]
        _plots.seed_dots(axes[i], lrs, values, fmt, color=color, label=label, skip_nan=True)
    axes[0].axhline(0.1, color="grey", lw=0.8, ls="--")
    for lr in results["summary"].get("diverged_lrs", []):
        axes[0].axvline(lr, color="C3", lw=0.8, ls=":", label=f"diverged (lr {lr:g})")
    axes[2].axhline(c, color="grey", lw=0.8, ls="--", label=f"C = {c}")
    axes[0].set(ylabel="D_LR", title="richness")
    axes[1].set(ylabel="accuracy", title="performance")
    axes[2].set(ylabel="effective dimension")
    axes[2].set_title("T Table 2.2: MF ⇔ D_eff ≈ C", fontsize=9)
    for ax in axes:
        ax.set(xscale="log", xlabel="learning rate")
        ax.legend(fontsize=7 if ax is axes[0] else 8)
    paths = [io.save_figure(fig, Path(run_dir) / "lr_sweep.png")]
    if not results["points"]:
        return paths
    return paths + _plots.plot_points(
        results["points"], run_dir, "lr", "ResNet18 lr sweep", results.get("seed_histories")
    )
