"""D Fig 6 / T Fig 7.3(b): VGG16 without BatchNorm stays lazy; with BatchNorm it turns rich.

Two VGG16s (configuration D, CIFAR head, Φ ∈ ℝ^{8w}) train identically over ``seeds`` seeds, one
with conv → BN → ReLU blocks (``vgg16_bn``). S's table (CIFAR-100): without BN test D_LR 0.66 and
test accuracy 21.7 %, with BN 0.073 and 72.0 %, both networks past 94 % training accuracy. Each
network's test D_LR is also read at its first log point past ``fit_accuracy``: the comparison at
equal fit of T Fig 7.3(b).

Command: ``lrrich run vgg-batchnorm`` (width 4 on 1,024 Fashion-MNIST images zero-padded to 32×32,
30 epochs, 3 seeds). ``lrrich sweep vgg-batchnorm --grid batch_norm=false,true --seeds 3`` trains
one network per run (plain keys ``dlr``, ``test_acc``, …). ``--scale fit`` trains at T's lr 0.01
for 300 epochs (ten times the small scale per seed); ``--scale paper`` is CIFAR-100 at width 64.
Expected (seed 0, without / with BN): test D_LR 0.50 / 0.187, test accuracy 40 / 69 %, training
accuracy 40 / 88 %: the network without BN does not fit, so no claim is tested; at ``--scale
fit`` it fits 52.8 % of its training set by epoch 300. Findings: ``docs/findings/vgg_batchnorm.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from lrrich.claims import Less, Premise, Value, measured, quoting
from lrrich.experiments import _data, _measure, _plots, _presets, _seeds

NAME = "vgg-batchnorm"
DESCRIPTION = "D Fig 6: VGG16 without vs with BatchNorm — lazy vs rich (D_LR), accuracy"
FIT_EPOCHS = 300
"""Epochs of the ``fit`` preset: 2,400 steps at lr 0.01 on 1,024 mnist5k images."""
VARIANTS = {False: ("no_bn", "without BN", "vgg16"), True: ("bn", "with BN", "vgg16_bn")}
"""batch_norm → (key suffix, label, model)."""


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """VGG16 ±BN (D App. F.4, T §2.4).

    Paper: VGG16 (width 64) on all of CIFAR-100, SGD lr 0.01, momentum 0.9, weight decay 1e-3,
    batch 128, 400 epochs at a constant rate, output scale 1/10, CIFAR augmentation.
    Small-scale deviations: 1,024 Fashion-MNIST images (``mnist5k`` when it is not installed;
    10 classes), width 4 (Φ ∈ ℝ³²), 30 epochs, no augmentation, lr 0.05 and output scale 1/3
    (at 0.01 and 1/10 neither network learns within a CPU budget; findings).
    """

    dataset: str = "fashion_mnist"
    n_train: int | None = 1024
    width: int = 4
    init: str = "torchvision"  # D's "VGG16 from PyTorch"; 'torch': per-layer defaults
    head: str = "cifar"  # Φ ∈ ℝ^{8w}; 'torchvision': two 4096-wide layers (the paper preset)
    batch_norm: tuple[bool, ...] = (False, True)  # the BN settings trained
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 1e-3
    epochs: int = 30
    output_scale: float = 1 / 3
    fit_accuracy: float = 0.94  # training accuracy at which the "fit" D_LR is read (T: 94 %)


SCALES = {
    "small": Config(),
    "fit": Config(dataset="mnist5k", lr=0.01, epochs=FIT_EPOCHS, checkpoint_every=400),
    "paper": _presets.paper_scale(
        Config, "cifar100", lr=0.01, output_scale=0.1, epochs=400, head="torchvision"
    ),
}


def run(config: Config, run_dir: Path) -> dict:
    """Train VGG16 for each ``batch_norm`` value and seed; summary: seed means per variant and
    the epoch each first passed ``fit_accuracy``."""
    if not config.batch_norm:
        raise ValueError("batch_norm is empty: give False and/or True")
    if not 0 < config.fit_accuracy <= 1:
        raise ValueError(f"fit_accuracy must lie in (0, 1], got {config.fit_accuracy}")
    data = _data.load_data(config, "vgg16")
    tc = _presets.train_config(config, len(data.x_train))
    seeds = _presets.seed_list(config)
    extra = {"init": config.init} | ({} if config.head == "cifar" else {"head": config.head})
    points, per_seed, by_suffix, baseline, curves = {}, {}, {}, {}, {}
    for bn in config.batch_norm:
        key, name, model = VARIANTS[bn]
        net = dict(width=config.width, **extra)
        init = [_data.build_model(model, data, seed=s, **net) for s in seeds]
        baseline[key] = [_measure.init_baseline(m, data) for m in init]
        ckpt = config.checkpoint_every
        runs = _seeds.train_seeds(
            model, data, tc, seeds=seeds, run_dir=Path(run_dir) / key, checkpoint_every=ckpt, **net
        )
        runs = [r | _first_fit(r["history"], config.fit_accuracy) for r in runs]
        points[name], curves[name] = runs[0], _seeds.seed_curves(runs)
        per_seed[name] = [{k: v for k, v in r.items() if k not in _CURVES} for r in runs]
        fits = [r["fit_epoch"] for r in runs if r["fit_epoch"] is not None]
        fit_epoch = float(np.mean(fits)) if fits else float("nan")
        by_suffix[f"_{key}"] = _seeds.seed_mean(runs) | {"fit_epoch": fit_epoch}
    summary = _seeds.grid_summary(by_suffix)
    for suffix, res in by_suffix.items():
        summary[f"fit_epoch{suffix if len(by_suffix) > 1 else ''}"] = res["fit_epoch"]
    summary["seeds"] = len(seeds)
    both = set(per_seed) == {"without BN", "with BN"}
    record = _measured(per_seed, config, data, baseline) if both else measured({})
    return {"summary": summary, "points": points, "seed_histories": curves, "per_seed": per_seed,
            "measured": record}  # fmt: skip


_CURVES = ("history", "decomposition")


def _first_fit(history: dict, level: float) -> dict:
    """The epoch and test D_LR of the first log point whose training accuracy reaches ``level``
    (None when none does)."""
    acc = np.asarray([np.nan if a is None else a for a in history["train_acc"]], float)
    hit = np.flatnonzero(np.nan_to_num(acc, nan=-1.0) >= level)
    if not hit.size:
        return {"fit_epoch": None, "dlr_at_fit": None}
    i = int(hit[0])
    return {"fit_epoch": float(history["epoch"][i]), "dlr_at_fit": history["dlr_test"][i]}


_BOTH_FIT = tuple(
    Premise(f"train_acc_{k}", ">=", 0.94, f"the network {what} fits its training set (≥ 94 %)")
    for k, what in (("no_bn", "without BN"), ("bn", "with BN"))
)
_row = quoting("S table; D Fig 6", "D §5 (Fig 6): 'VGG16 without batch norm is in the lazy "
               "regime, while adding batch norm leads to the rich regime'; S's table "
               "(CIFAR-100): D_LR 0.66 / 0.073, test accuracy 21.7 % / 72.0 % without / with BN; "
               "T Fig 7.3(b): 'Despite both models achieving training accuracy of over 94%, the "
               "underlying dynamics and performance differ significantly'",
               premise=_BOTH_FIT)  # fmt: skip
_BN_LOWER = Less("dlr_bn", "dlr_no_bn")
CLAIMS = (
    _row("dlr-no-bn", "test D_LR without BN (direction: above the network with BN)",
         Value("dlr_no_bn", 0.66, "dlr", direction=_BN_LOWER), "0.66", dlr=("dlr_no_bn", "dlr_bn")),
    _row("dlr-bn", "test D_LR with BN (direction: below the network without BN)",
         Value("dlr_bn", 0.073, "dlr", direction=_BN_LOWER), "0.073", dlr=("dlr_bn", "dlr_no_bn")),
    _row("dlr-at-fit", "test D_LR at the first log point past 94 % train accuracy, with BN < "
         "without", Less("dlr_at_fit_bn", "dlr_at_fit_no_bn"), "0.073 < 0.66 (both > 94 % train)",
         source="T Fig 7.3(b)", dlr=("dlr_at_fit_bn", "dlr_at_fit_no_bn")),
    _row("test-acc-order",
         "test accuracy, with BN above without (the values are CIFAR-100's: ordering only)",
         Less("test_acc_no_bn", "test_acc_bn"), "21.7 % < 72.0 %"),
)  # fmt: skip
"""Every comparison assumes both networks fit their training set: one that does not is
under-trained, not shown lazy."""


def _measured(per_seed: dict, config: Config, data, baseline: dict) -> dict:
    """The per-seed record the claims read; the D_LR at fit only when every seed of both
    networks passed ``fit_accuracy``."""
    runs = [r for rs in per_seed.values() for r in rs]
    at_fit = ("dlr_at_fit",) if all(r.get("dlr_at_fit") is not None for r in runs) else ()
    key = {name: k for k, name, _ in VARIANTS.values()}
    values = {f"{k}_{key[name]}": [r[k] for r in rs] for name, rs in per_seed.items()
              for k in ("dlr", "test_acc", "train_acc", *at_fit)}  # fmt: skip
    p = runs[0]["n_features"]
    deviations = [] if data.name.startswith("cifar100") else [
        f"{data.num_classes} classes ({data.name}) instead of CIFAR-100's 100, VGG16 width "
        f"{config.width} (p = {p}) instead of 64 with torchvision's head (p = 4,096)"]  # fmt: skip
    return _seeds.claims_record(
        values, config, data, p=p,
        baseline=lambda f: baseline["no_bn" if f.endswith("no_bn") else "bn"],
        scale=f"VGG16 width {config.width}, {config.epochs} epochs, SGD lr {config.lr:g}, "
        f"wd {config.weight_decay:g}", deviations=deviations,
    )  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``vgg_training.png`` (D_LR and accuracy vs epoch), ``vgg_features.png``."""
    return _plots.plot_points(
        results["points"], run_dir, "vgg", "VGG16 ± BatchNorm", results.get("seed_histories")
    )
