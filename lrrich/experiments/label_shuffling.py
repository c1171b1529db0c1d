"""D Fig 3 / T Fig 3.5: label shuffling 0 / 10 / 100 % — rich dynamics without generalisation.

A network is trained with MSE on one-hot targets after a fraction of the training labels has been
permuted among themselves (``nets.shuffle_labels``; class histogram kept, test set untouched).
The paper's point: D_LR stays small even with fully random labels, where the test accuracy is at
chance: low-rank (rich) dynamics is a property of training, not of structure in the data.

Command: ``lrrich run label-shuffling`` (a 2-hidden-layer ReLU MLP on 2,000 Fashion-MNIST images,
3 seeds); ``lrrich sweep label-shuffling --grid shuffle_fractions=0,0.1,1 --seeds 3`` trains one
fraction per run (plain keys ``dlr``, ``test_acc``, …). ``--scale conv``: ResNet18 k = 4 on 512
images, one seed; ``--scale paper``: ResNet18 on 10,000 CIFAR-10 images (an accelerator).
Expected (seeds 0–2, 0 / 100 % shuffled): test D_LR 0.188 ± 0.001 / 0.246 ± 0.013 (at-init
baseline 0.604 ± 0.009), test accuracy 83.4 / 10.4 %; ``--scale conv`` (seed 0): test D_LR
0.151 / 0.099, test accuracy 66.6 / 9.7 %. Paper: D_LR 0.031 / 0.034, test 95.0 / 9.5 %.
Findings (which inputs D_LR is read on, normalisation, LeNet-5, the ResNet18 runs):
``docs/findings/label_shuffling.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from lrrich.claims import MF_BOUNDARY, Above, Below, Premise, Value, quoting
from lrrich.experiments import _data, _measure, _plots, _presets, _seeds

NAME = "label-shuffling"
DESCRIPTION = "D Fig 3: label shuffling 0/10/100% — rich (small D_LR) without generalisation"
PAPER_WEIGHT_DECAY = 1e-3
"""The weight decay of the paper's ResNet18 runs (T §2.4; D's table lost its value)."""


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """Label-shuffling settings (D App. F.4, T §2.4).

    Paper: ResNet18 (k = 64) on 10,000 CIFAR-10 images, SGD lr 0.05, momentum 0.9, weight decay
    1e-3, batch 128, 200 epochs with lr × 0.2 every 60, output scale 1/3, CIFAR augmentation,
    inputs standardised per channel. **Decision:** D's table lost its learning-rate and
    weight-decay cells; T §2.4's ResNet18 values are used.
    Small-scale deviations: 2,000 Fashion-MNIST images (``mnist5k`` when it is not installed),
    an MLP of width 512 at lr 0.5 without weight decay, 300 epochs, raw [0, 1] pixels: the
    largest setting that fits fully random labels within a CPU budget (findings).
    **Deviation:** ``--scale conv`` keeps weight decay 0 where T §2.4 uses 1e-3.
    Every seed trains on the same subset and the same shuffled labels (drawn with ``seed``).
    """

    dataset: str = "fashion_mnist"
    n_train: int | None = 2000
    model: str = "mlp"  # 'resnet18' (paper) or another of _data.MODELS
    width: int = 512
    depth: int = 2
    shuffle_fractions: tuple[float, ...] = (0.0, 0.1, 1.0)  # of training labels permuted
    lr: float = 0.5
    momentum: float = 0.9
    weight_decay: float = 0.0
    epochs: int = 300
    step_every_epochs: int = 100  # lr × 0.2 every this many epochs (paper 60)
    output_scale: float = 1 / 3


SCALES = {
    "small": Config(),
    # a conv net that memorises shuffled labels on the CPU (2,400 steps per fraction)
    "conv": Config(model="resnet18", width=4, n_train=512, lr=0.05, epochs=600,
                   step_every_epochs=200, shuffle_fractions=(0.0, 1.0)),
    "paper": _presets.paper_scale(Config, "cifar10", n_train=10_000, model="resnet18", lr=0.05,
                                  weight_decay=1e-3, epochs=200, step_every_epochs=60,
                                  checkpoint_every=1_000),
}  # fmt: skip


def _tag(fraction: float) -> str:
    return _seeds.tag(100 * fraction)


def run(config: Config, run_dir: Path) -> dict:
    """Train ``seeds`` networks per shuffle fraction; summary: seed means per fraction."""
    from nets import shuffle_labels

    if not config.shuffle_fractions:
        raise ValueError("shuffle_fractions is empty: give at least one fraction in [0, 1]")
    seeds = _presets.seed_list(config)
    data = _data.load_data(config, config.model)
    tc = _presets.train_config(config, len(data.x_train), schedule="step")
    net = dict(width=config.width, depth=config.depth)
    points, per_seed, curves, means = {}, {}, {}, {}
    for frac in config.shuffle_fractions:
        res = _seeds.train_seeds(
            config.model, shuffle_labels(data, frac, seed=config.seed), tc, seeds=seeds,
            run_dir=Path(run_dir) / f"shuffle{_tag(frac)}",
            checkpoint_every=config.checkpoint_every, **net,
        )  # fmt: skip
        label = f"{_tag(frac)}% shuffled"
        points[label], per_seed[label] = res[0], [_seeds.point_summary(r) for r in res]
        curves[label] = _seeds.seed_curves(res)
        means[f"_shuffle{_tag(frac)}"] = _seeds.seed_mean(per_seed[label])
    init = [_data.build_model(config.model, data, seed=s, **net) for s in seeds]
    baseline = [_measure.init_baseline(m, data) for m in init]
    # points: the first seed's point (its decomposition)
    return {"summary": _seeds.grid_summary(means) | {"seeds": len(seeds)}, "points": points,
            "seed_histories": curves, "per_seed": per_seed,
            "measured": _measured(per_seed, points, config, data, baseline)}  # fmt: skip


_row = quoting("S ablation table", "D §5 (Fig 3): 'even with fully randomized labels, the model "
               "enters the rich regime'; S's ablation table (ResNet18, CIFAR-10): no shuffling "
               "D_LR 0.031, test 95.0 % ('Rich + good generalization'), fully shuffled D_LR "
               "0.034, test 9.5 % ('Rich but no generalization')")  # fmt: skip
_FITS = {
    k: Premise(f"train_acc_{k}", ">=", 0.94, f"the network fits its {what} (≥ 94 % train)")
    for k, what in (("shuffle0", "training labels"), ("shuffle100", "random labels"))
}
_F0, _F100 = (_FITS["shuffle0"],), (_FITS["shuffle100"],)
_D = "S ablation table; D Fig 3"
CLAIMS = (
    _row("dlr-shuffle0", "test D_LR, no shuffling",
         Value("dlr_shuffle0", 0.031, "dlr_close_values", Below("dlr_shuffle0", MF_BOUNDARY)),
         "0.031 (rich: < 0.1)", source=_D, premise=_F0, dlr=("dlr_shuffle0",)),
    _row("dlr-shuffle100", "test D_LR, fully shuffled labels",
         Value("dlr_shuffle100", 0.034, "dlr_close_values", Below("dlr_shuffle100", MF_BOUNDARY)),
         "0.034 (rich: < 0.1)", source=_D, premise=_F100, dlr=("dlr_shuffle100",)),
    _row("test-acc-shuffle0", "test accuracy, no shuffling (direction: it generalises, > 50 %)",
         Value("test_acc_shuffle0", 0.950, "accuracy", Above("test_acc_shuffle0", 0.5)),
         "95.0 %", premise=_F0),
    _row("test-acc-shuffle100", "test accuracy, fully shuffled labels: at chance (1/C)",
         Value("test_acc_shuffle100", 0.10, "chance_accuracy"), "9.5 % (chance)", premise=_F100,
         note="the paper's 9.5 % is chance on 10 classes"),
)  # fmt: skip
"""D Fig 3 / S's ablation rows, read on the test split (D does not say on which inputs its D_LR
is measured; the training-input D_LR stays in ``per_seed``): "rich but no generalization" is a
statement about a network that fits its labels, the premise of every row."""


def _measured(per_seed: dict, points: dict, config: Config, data, baseline: list) -> dict:
    """The per-seed record the claims read: the 0 % and 100 % rows."""
    rows = {"shuffle0": "0% shuffled", "shuffle100": "100% shuffled"}
    values = {f"{f}_{key}": [r[f] for r in per_seed[label]] for key, label in rows.items()
              if label in per_seed for f in ("dlr", "test_acc", "train_acc")}  # fmt: skip
    deviations = []
    if config.weight_decay != PAPER_WEIGHT_DECAY:
        deviations.append(f"weight decay {config.weight_decay:g} (T §2.4: {PAPER_WEIGHT_DECAY:g})")
    if config.normalize == "none":
        deviations.append("raw [0, 1] inputs (D App. F.4.2 standardises per channel)")
    if config.model != "resnet18" or config.width != 64 or not data.name.startswith("cifar10"):
        deviations.append(f"{config.model} (width {config.width}) on {data.name} instead of "
                          "ResNet18 (k = 64) on CIFAR-10: only the directions carry "
                          "over")  # fmt: skip
    return _seeds.claims_record(
        values, config, data, p=next(iter(points.values()))["n_features"], baseline=baseline,
        scale=f"{config.model} (width {config.width}), {config.epochs} epochs, SGD lr "
        f"{config.lr:g}, wd {config.weight_decay:g}, inputs normalize={config.normalize}",
        deviations=deviations,
    )  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``shuffle_training.png`` (D_LR and accuracy vs epoch), ``shuffle_features.png``."""
    return _plots.plot_points(
        results["points"], run_dir, "shuffle", "label shuffling", results.get("seed_histories")
    )
