"""ResNet18 learning-rate sweep and the minimum-feature check of thesis Table 2.2.

D App. E Fig 15 / S's table / T Fig 7.2(a): ResNet18 on CIFAR-100 with SGD at learning rates
0.005 / 0.05 / 0.2 — the smallest learning rate is lazier (D_LR 0.053, test 66.3 %), the
intermediate one is the richest and the best (0.025, 78.3 %), the largest drifts back (0.039,
74.5 %). At every learning rate the feature decomposition is read as in T Table 2.2: the
minimum-feature (MF) regime has D_eff(ρ) ≈ D_eff(Q̂) ≈ C and D_LR < 0.1 (T Definition 2). The
lr = 0.05 point is T Table 2.2's ResNet18/CIFAR-100 row (D_eff 99.9 / 99.7, D_LR 0.025).

Grid: ``lrs`` — ``run`` trains every value in one run (default: the paper's three); a sweep sets
one per run, e.g. ``lrrich sweep resnet-lr --grid lrs=0.005,0.05,0.2 --seeds 3`` (a one-value run
reports the plain keys ``dlr``, ``test_acc``, ``d_eff_rho``, …).

Command: ``lrrich run resnet-lr --out runs/lr`` (small: ResNet18 with k = 4 on 1,024 real
Fashion-MNIST images zero-padded to 32×32, C = 10, 3 × 1,600 steps (200 epochs)). The paper's
setting is an accelerator run (``--scale paper``).
Runtime: 9 min 24 s wall, 17.6 min CPU on the idle 2-core CPU (0.11 s per step).
Expected (seed 0; lr 0.005 / 0.05 / 0.2): test D_LR 0.31 / 0.114 / 0.113, test accuracy 67.3 /
75.9 / 77.7 % — the smallest lr the laziest and the worst (reproduced); lr 0.2, not 0.05, the
richest and the best (the paper's optimum not reproduced); D_eff(ρ) 7.4 / 9.9 / 9.7, D_eff(Q̂)
13.4 / 16.8 / 15.4 (C = 10).

Findings (three seeds, augmentation, under-training): ``docs/findings/resnet_lr.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from lrrich.experiments import _comparison
from lrrich.experiments import _image_runs as common

NAME = "resnet-lr"
RUNTIME = "9.4 min"  # small-scale `lrrich run` on an idle 2-core CPU ("CPU": CPU time)
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
class Config(common.ImageTraining):
    """ResNet18 learning-rate settings. Paper: T §2.4 (Table 2.2 setup) and D App. F.4.

    Paper: ResNet18 (k = 64, Φ ∈ ℝ⁵¹²) on all 50,000 CIFAR-100 images, SGD momentum 0.9, weight
    decay 1e-3, batch 128, 600 epochs without schedule, output scale ε = 1/10, CIFAR
    augmentation; learning rates 0.005 / 0.05 / 0.2.

    Small-scale deviations: 1,024 Fashion-MNIST training images zero-padded to 32×32×1 (all 10,000 test
    images; ``mnist5k`` when Fashion-MNIST is not installed; C = 10, so the MF regime predicts
    D_eff ≈ 10 instead of 100), k = 4 instead of 64 (Φ ∈ ℝ³²), 200 epochs (1,600 steps), no
    augmentation, output scale 1/3 (D's CIFAR-10 value). The shared training fields are
    documented in :class:`~lrrich.experiments._image_runs.ImageTraining`.

    Attributes:
      lrs: the SGD learning rates trained (paper 0.005, 0.05, 0.2).
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
    "paper": common.paper_scale(Config, "cifar100", epochs=600, output_scale=0.1),
}


def run(config: Config, run_dir: Path) -> dict:
    """Train ResNet18 at each learning rate; summary: D_LR, accuracy, D_eff(ρ), D_eff(Q̂) per lr,
    the richest and the best learning rate, and whether every run is in the MF regime."""

    if not config.lrs:
        raise ValueError("lrs is empty: give at least one learning rate > 0")
    data = common.load_data(config, "resnet18")
    points, by_suffix = {}, {}
    for lr in config.lrs:
        tc = common.train_config(
            config,
            len(data.x_train),
            lr=lr,
            schedule=config.schedule,
            step_every_epochs=config.step_every_epochs,
        )
        res = common.train_point(
            "resnet18",
            data,
            tc,
            width=config.width,
            seed=config.seed,
            run_dir=Path(run_dir) / f"lr{common.tag(lr)}",
            checkpoint_every=config.checkpoint_every,
        )
        points[f"lr={common.tag(lr)}"] = by_suffix[f"_lr{common.tag(lr)}"] = res
    results = list(points.values())
    summary = common.grid_summary(by_suffix)
    if len(points) > 1:
        summary["richest_lr"] = float(config.lrs[int(np.argmin([r["dlr"] for r in results]))])
        summary["best_lr"] = float(config.lrs[int(np.argmax([r["test_acc"] for r in results]))])
    summary["num_classes"] = data.num_classes
    summary["all_mf_regime"] = bool(all(r["dlr"] < _comparison.MF_BOUNDARY for r in results))
    return {
        "summary": summary,
        "points": points,
        "lrs": list(config.lrs),
        "comparison": comparison(points, config, data),
    }


_CLAIM = (
    "S's table and key findings: 'The optimal learning rate corresponds to the richest "
    "training: ResNet18 on CIFAR-100 achieves the smallest D_LR at lr=0.05' (D_LR 0.053 / "
    "0.025 / 0.039, test 66.3 / 78.3 / 74.5 % at lr 0.005 / 0.05 / 0.2); D App. E (Fig 15): 'a "
    "smaller learning rate induces lazier dynamics, while a too large learning rate ... also "
    "deviates from the rich regime'"
)
_MF_CLAIM = (
    "T Table 2.2 (caption): 'All generalizing models in the table are in the MF regime "
    "(κ_CKA < 0.1). The models all use only C features (D_eff(Q̂) ≈ C), with only those "
    "features being significant (D_eff(ρ) ≈ C)'"
)


def comparison(points: dict, config: Config, data) -> list[dict]:
    """Paper vs measured (S's table, D App. E, T Table 2.2), one seed (``config.seed``).

    D_LR per learning rate: within ``dlr_close_values`` (S's values are closer to each other
    than 0.05), direction D_LR < 0.1. The lr sweep: reproduced when lr 0.05 has a smaller D_LR
    and a higher test accuracy than every other lr (:func:`~lrrich.experiments._comparison.ordered`),
    direction reproduced when one of the two holds. The MF check: D_LR < 0.1 with D_eff(ρ)
    and D_eff(Q̂) within ``d_eff_loose`` of C.
    """
    cmp = _comparison
    dataset, c = cmp.dataset_text(data), data.num_classes
    scale = f"ResNet18 k = {config.width}, {config.epochs} epochs, SGD, seed {config.seed}"
    rows = []
    res_of = {lr: points[f"lr={common.tag(lr)}"] for lr in config.lrs}
    for lr, res in res_of.items():
        key = f"dlr_lr{common.tag(lr)}"
        if key not in PAPER:
            continue
        ref = cmp.rf_reference(len(data.x_test), res["n_features"], c)
        rows.append(
            cmp.row(
                f"test D_LR at lr {common.tag(lr)}",
                PAPER[key],
                round(res["dlr"], 4),
                dataset=dataset,
                scale=scale,
                verdict=cmp.judge(
                    cmp.within([res["dlr"]], PAPER[key], "dlr_close_values"),
                    cmp.below([res["dlr"]], cmp.MF_BOUNDARY),
                ),
                criterion=f"{_CLAIM}. Value: S's D_LR at this lr; direction: in the rich regime, "
                f"D_LR < {cmp.MF_BOUNDARY} (T Definition 2)",
                tolerance=f"{cmp.tolerance('dlr_close_values')}; direction: "
                f"{cmp.threshold_test(cmp.MF_BOUNDARY)}",
                values=[res["dlr"]],
                reference=ref,
                note=f"test accuracy {res['test_acc']:.1%} (paper "
                f"{PAPER['test_acc_lr' + common.tag(lr)]:.1%} on CIFAR-100); random features at "
                f"p = {res['n_features']} give D_LR {ref['dlr']:.2f} (the paper's p = 512)",
            )
        )
    if 0.05 in res_of and len(res_of) > 1:
        best = res_of[0.05]
        others = {lr: r for lr, r in res_of.items() if lr != 0.05}
        richest = cmp.every(
            cmp.ordered([best["dlr"]], [r["dlr"]], one_seed_spread="dlr_seed_spread")
            for r in others.values()
        )
        most_accurate = cmp.every(
            cmp.ordered([r["test_acc"]], [best["test_acc"]]) for r in others.values()
        )
        either = (
            True
            if True in (richest, most_accurate)
            else (None if None in (richest, most_accurate) else False)
        )
        rows.append(
            cmp.row(
                "lr 0.05 richest / most accurate",
                "0.05 / 0.05",
                ", ".join(
                    f"lr {lr:g}: {r['dlr']:.3f}, {r['test_acc']:.1%}" for lr, r in res_of.items()
                ),
                dataset=dataset,
                scale=scale,
                verdict=cmp.judge(cmp.every([richest, most_accurate]), either),
                criterion=f"{_CLAIM}. Reproduced: lr 0.05 has the smallest test D_LR and the "
                "highest test accuracy; direction: one of the two",
                tolerance=f"each ordering against every other lr: {cmp.ORDER_TEST_ONE_SEED} (D_LR)",
                values={f"dlr_lr{lr:g}": [r["dlr"]] for lr, r in res_of.items()}
                | {f"test_acc_lr{lr:g}": [r["test_acc"]] for lr, r in res_of.items()},
                reference=cmp.rf_reference(len(data.x_test), best["n_features"], c),
                note="one seed: differences smaller than the seed spread of D_LR (0.012-0.021 "
                "over three seeds, docs/findings/resnet_lr.md) decide nothing",
            )
        )
    for lr, res in res_of.items():
        if "d_eff_rho" not in res:
            continue
        mf = cmp.every(
            [
                cmp.below([res["dlr"]], cmp.MF_BOUNDARY),
                *(cmp.within([res[k]], c, "d_eff_loose") for k in ("d_eff_rho", "d_eff_util")),
            ]
        )
        rows.append(
            cmp.row(
                f"T Table 2.2 MF check at lr {common.tag(lr)}: D_eff(rho), D_eff(Q), D_LR",
                "approx. C, approx. C, < 0.1",
                f"{res['d_eff_rho']:.1f}, {res['d_eff_util']:.1f}, {res['dlr']:.3f} (C = {c})",
                dataset=dataset,
                scale=scale,
                verdict=cmp.holds(mf),
                criterion=f"{_MF_CLAIM}. Reproduced: all three",
                tolerance=f"D_LR {cmp.threshold_test(cmp.MF_BOUNDARY)} (T Definition 2); "
                f"{cmp.tolerance('d_eff_loose')}",
                values={
                    "d_eff_rho": [res["d_eff_rho"]],
                    "d_eff_util": [res["d_eff_util"]],
                    "dlr": [res["dlr"]],
                },
                reference=cmp.rf_reference(len(data.x_test), res["n_features"], c),
            )
        )
    return rows


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``lr_sweep.png`` (D_LR, accuracy, D_eff vs lr), ``lr_training.png``, ``lr_features.png``."""
    import matplotlib.pyplot as plt

    from lrrich.io import save_figure

    lrs, pts = results["lrs"], list(results["points"].values())
    c = results["summary"]["num_classes"]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), constrained_layout=True)
    axes[0].plot(lrs, [p["dlr"] for p in pts], "o-", label="test")
    axes[0].plot(lrs, [p["dlr_train"] for p in pts], "s:", label="train")
    axes[0].axhline(0.1, color="grey", lw=0.8, ls="--")
    axes[0].set(xscale="log", xlabel="learning rate", ylabel="D_LR", title="richness")
    axes[0].legend(fontsize=8)
    axes[1].plot(lrs, [p["test_acc"] for p in pts], "o-", label="test")
    axes[1].plot(lrs, [p["train_acc"] for p in pts], "s:", label="train")
    axes[1].set(xscale="log", xlabel="learning rate", ylabel="accuracy", title="performance")
    axes[1].legend(fontsize=8)
    if all("d_eff_rho" in p for p in pts):
        axes[2].plot(lrs, [p["d_eff_rho"] for p in pts], "o-", label="D_eff(ρ) adjusted")
        axes[2].plot(lrs, [p["d_eff_util"] for p in pts], "s-", label="D_eff(Q̂)")
    axes[2].axhline(c, color="grey", lw=0.8, ls="--", label=f"C = {c}")
    axes[2].set(xscale="log", xlabel="learning rate", ylabel="effective dimension")
    axes[2].set_title("T Table 2.2: MF ⇔ D_eff ≈ C", fontsize=9)
    axes[2].legend(fontsize=8)
    paths = [save_figure(fig, Path(run_dir) / "lr_sweep.png")]
    return paths + common.plot_points(results["points"], run_dir, "lr", "ResNet18 lr sweep")
