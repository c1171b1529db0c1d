"""D Fig 1 / App. F.4.1: rich dynamics without better features — encoded labels.

The one-hot label is written into the first C = 10 pixels of every training image (true labels)
and of every test image (random labels), ``nets.encode_labels``. The same MLP, from the same
initialisation, trains with MSE on one-hot targets with full backprop (rich) or only its last
layer (lazy). The rich network learns the shortcut (D_LR → 0, at chance on the true test digits);
the lazy one keeps reading the image and generalises better while its D_LR stays large.

Command: ``lrrich run encoded-labels`` (the 4,000 / 1,000 mnist5k digits, 3 seeds; ``--set
seeds=1`` takes a third of the time). ``--scale matched-steps`` trains the paper's number of Adam
steps (one seed, about five times the small scale); ``--scale paper`` all 60,000 MNIST images.
Expected (seeds 0–2, mean ± std): rich train / test accuracy 100 % / 16.0 ± 0.2 %, test D_LR
0.078 ± 0.006; lazy 79.6 ± 1.0 % / 70.4 ± 1.7 %, D_LR 0.388 ± 0.013; at-init baseline 0.615 ±
0.020. The paper: 0.0087 vs 0.63 and 10.0 % vs 74.4 % with both networks fitted; the lazy readout
here fits 80 % of its training set, so the claims that compare the two are not tested at this
scale. Findings: ``docs/findings/encoded_labels.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from lrrich import io
from lrrich.claims import MF_BOUNDARY, Below, Less, Premise, Value, measured, quoting, rf_reference
from lrrich.experiments import _data, _measure, _presets, _seeds

NAME = "encoded-labels"
DESCRIPTION = "D Fig 1: encoded-label MNIST MLP, full backprop (rich) vs last layer only"
MODES = (("rich", False), ("lazy", True))
"""Each mode and whether it trains the last layer only."""
PAPER_STEPS = 46_900
"""Adam steps of the paper's run: 100 epochs of ⌈60,000 / 128⌉ = 469 minibatches."""


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """Encoded-label rich vs lazy settings (D App. F.4, Fig 1).

    Paper: encoded MNIST (60,000 images), output scale 1/3, batch 128, Adam, 100 epochs, MSE on
    one-hot targets. D's learning rate and MLP size are not legible: Adam's lr 1e-3 and the
    thesis's 4-layer FCN (3 hidden ReLU layers of width 256). Small-scale deviation: the 4,000
    mnist5k images, so 100 epochs are 3,100 Adam steps (``matched-steps``: 46,500).
    """

    dataset: str = "mnist5k"
    width: int = 256
    depth: int = 3
    optimizer: str = "adam"
    lr: float = 1e-3
    epochs: int = 100
    output_scale: float = 1 / 3
    code_value: float = 1.0  # pixel value of the hot code entry (pixels lie in [0, 1])
    code_seed: int = 0  # NumPy seed of the random test-time codes
    log_points: int = 20  # log points over training
    eval_size: int = 768  # train / test images per log point (the summary: the full sets)
    modes: tuple[str, ...] = ("rich", "lazy")  # the modes trained (one: no claim is read)


SCALES = {
    "small": Config(),
    # the paper's number of Adam steps on the mnist5k images: 1,500 epochs × 31 minibatches
    "matched-steps": Config(epochs=1500, checkpoint_every=10_000, eval_size=2048, seeds=1),
    "paper": Config(dataset="mnist", checkpoint_every=4680, eval_size=2048),
}


def run(config: Config, run_dir: Path) -> dict:
    """Train rich and lazy from the same inits; summary: seed means per mode."""
    from nets import encode_labels

    bad = [m for m in config.modes if m not in dict(MODES)]
    if bad or not config.modes:
        raise ValueError(f"modes must be a non-empty subset of {[m for m, _ in MODES]}, got {bad}")
    data = _data.load_data(config, "mlp")
    data = encode_labels(data, value=config.code_value, seed=config.code_seed)
    total = len(data.x_train) // min(config.batch_size, len(data.x_train)) * config.epochs
    seeds = _presets.seed_list(config)
    modes = [m for m, _ in MODES if m in config.modes]
    runs = {m: _train_mode(config, data, m, seeds, total, run_dir) for m in modes}
    per_seed = []
    for i, seed in enumerate(seeds):
        model0 = _data.build_model("mlp", data, width=config.width, depth=config.depth, seed=seed)
        one = {"seed": seed, "init_dlr": _measure.init_baseline(model0, data)}  # rich and lazy's
        for mode, r in runs.items():
            one.update({f"{mode}_{k}": r[i][k] for k in _PER_MODE})
        per_seed.append(one | {"n_features": next(iter(runs.values()))[i]["n_features"]})
    both = set(config.modes) == set(dict(MODES))
    record = _measured(per_seed, config, data, total) if both else measured({})
    return {"summary": _seeds.seed_mean(per_seed) | {"seeds": len(seeds)}, "per_seed": per_seed,
            "histories": {m: {k: r[0]["history"][k] for k in _CURVES} for m, r in runs.items()},
            "dataset": dict(name=data.name, n_train=len(data.x_train), n_test=len(data.x_test)),
            "measured": record}  # fmt: skip


_PER_MODE = "dlr dlr_rank dlr_train train_acc test_acc test_follows_code train_seconds".split()
_CURVES = ("step", "epoch", "train_acc", "test_acc", "dlr_train", "dlr_test")


def _train_mode(config: Config, data, mode: str, seeds: list[int], total: int, run_dir: Path):
    """The seeds of one mode, plus the rank of D_LR and how often the test predictions follow
    the random code."""
    from metrics import dlr_with_rank

    c = data.num_classes
    code_test = np.asarray(data.x_test).reshape(len(data.x_test), -1)[:, :c].argmax(1)

    def code_measures(model, data) -> dict:
        phi, out = _measure.forward(model, data.x_test, config.output_scale)
        try:
            rank = int(dlr_with_rank(phi, out).rank)
        except ValueError:  # D_LR undefined (constant outputs): the rank of the one-hot space
            rank = c
        return {"dlr_rank": rank, "test_follows_code": float(np.mean(out.argmax(1) == code_test))}

    tc = _presets.train_config(config, len(data.x_train), last_layer_only=dict(MODES)[mode])
    return _seeds.train_seeds(
        "mlp", data, tc, seeds=seeds, width=config.width, depth=config.depth,
        run_dir=run_dir / mode, checkpoint_every=config.checkpoint_every,
        log_every=max(total // config.log_points, 1), eval_size=config.eval_size,
        extra=code_measures,
    )  # fmt: skip


_row = quoting("D Fig 1", "full backprop (rich) train / test accuracy 100 % / 10.0 %, last layer "
               "only (lazy) 98.7 % / 74.4 %, D_LR 0.0087 vs 0.63 (D Fig 1's table); 'dynamic "
               "feature learning can impair the performance on an image classification task' (D "
               "§1)")  # fmt: skip
_RICH_FITS, _LAZY_FITS = (
    Premise(f"{m}_train_acc", ">=", 0.94, f"the {m} network fits its training set (≥ 94 %)")
    for m in ("rich", "lazy")
)
_BOTH = (_RICH_FITS, _LAZY_FITS)
CLAIMS = (
    _row("dlr-rich", "test D_LR, rich (full backprop)",
         Value("rich_dlr", 0.0087, "dlr", direction=Below("rich_dlr", MF_BOUNDARY)),
         "0.0087", premise=(_RICH_FITS,), dlr=("rich_dlr",)),
    _row("dlr-lazy", "test D_LR, lazy (last layer only)",
         Value("lazy_dlr", 0.63, "dlr", direction=Less("rich_dlr", "lazy_dlr")),
         "0.63", premise=(_LAZY_FITS,), dlr=("lazy_dlr",)),
    _row("dlr-order", "test D_LR, rich < lazy", Less("rich_dlr", "lazy_dlr"), "0.0087 < 0.63",
         premise=_BOTH, dlr=("rich_dlr", "lazy_dlr")),
    _row("rich-test-chance", "test accuracy, rich: at chance (it follows the random test code)",
         Value("rich_test_acc", 0.10, "chance_accuracy"), "10.0 %", premise=(_RICH_FITS,)),
    _row("test-acc-gap",
         "test accuracy, rich below lazy by more than 30 points (the paper's gap: 64)",
         Less("rich_test_acc", "lazy_test_acc", margin=0.3), "10.0 % vs 74.4 %", premise=_BOTH),
)  # fmt: skip
"""Every comparison assumes both networks fit their training set (the paper's 100 % / 98.7 %)."""


def _measured(per_seed: list[dict], config: Config, data, steps: int) -> dict:
    """The per-seed record the claims read; D_LR's reference at the measured rank."""
    fields = [f"{m}_{k}" for m, _ in MODES for k in ("dlr", "test_acc", "train_acc")]
    rank = max(max(s[f"{m}_dlr_rank"] for s in per_seed) for m, _ in MODES)
    ref = rf_reference(len(data.x_test), per_seed[0]["n_features"], rank, rank_source="measured")
    deviations = _presets.partial_batch_deviation(len(data.x_train), config.batch_size)
    deviations += [] if steps >= PAPER_STEPS / 2 else [
        f"{steps:,} Adam steps vs the paper's 46,900 (100 epochs of 60,000 images): "
        "--scale matched-steps trains as many steps as the paper"]  # fmt: skip
    return measured(
        {f: [s[f] for s in per_seed] for f in fields}, seeds=[s["seed"] for s in per_seed],
        dataset=_data.dataset_text(data),
        scale=f"MLP 784-{config.width}x{config.depth}-10, {config.optimizer} lr {config.lr:g}, "
        f"{config.epochs} epochs",
        baseline={f"{m}_dlr": [s["init_dlr"] for s in per_seed] for m, _ in MODES},
        reference={f"{m}_dlr": ref for m, _ in MODES}, deviations=deviations,
    )  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``encoded_labels.png``: D_LR and accuracy (test; dashed: train) vs step, rich vs lazy."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for mode, h in results["histories"].items():
        c = {"rich": "C3", "lazy": "C0"}.get(mode)
        for ax, split in zip(axes, ("dlr_{}", "{}_acc"), strict=True):
            ax.plot(h["step"], h[split.format("test")], "-o", ms=3, color=c, label=f"{mode} (test)")
            ax.plot(h["step"], h[split.format("train")], "--", color=c, label=f"{mode} (train)")
    axes[0].set(xlabel="step", ylabel="D_LR", ylim=(0, 1), title="D_LR (0 = richest)")
    axes[1].set(xlabel="step", ylabel="accuracy", ylim=(0, 1.02), title="accuracy (true labels)")
    axes[1].axhline(0.1, color="grey", lw=0.8, ls=":")
    for ax in axes:
        ax.legend(fontsize=7)
    s = results["summary"]

    def fmt(key: str, spec: str) -> str:  # NaN went through JSON as None
        return "n/a" if s.get(key) is None else format(s[key], spec)

    text = [f"{m} D_LR {fmt(f'{m}_dlr', '.3f')}, test acc {fmt(f'{m}_test_acc', '.1%')}"
            for m in ("rich", "lazy")]  # fmt: skip
    fig.suptitle(f"encoded labels ({results['dataset']['name']}): " + " | ".join(text), fontsize=9)
    return [io.save_figure(fig, run_dir / "encoded_labels.png")]
