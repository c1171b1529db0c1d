"""T §6.4.3 Table 6.1 / Fig 6.5: grokking in a 4-layer tanh MLP, removed by four γ₊-raising fixes.

A depth-4 tanh MLP trained with MSE on one-hot × S labels from LeCun weights × w fits its 1,000
MNIST training images at once but generalises only after a long plateau (T §6.4.3, Fig 6.5a).
Theorem 1 (T Eq 6.14) ties feature learning to a large γ₊ ≥ S/Σ₀; each fix of Table 6.1
(:data:`VARIANTS`) raises γ₊ and should remove the delay t_gen − t_fit (Fig 6.5b-e).

Command: ``lrrich run grokking-mlp`` (1,000 mnist5k images, 8,000 of the paper's 16,000 Adam
steps); ``--scale paper``: 1,000 images of the full MNIST (the [data] extra), 16,000 steps = T's
2,000 epochs; one seed per run (T states no seed count, D averages at least three):
``lrrich sweep grokking-mlp --scale paper --seeds 3``.
Expected (seed 0; threshold 87.9 %): the default fits at step 100 with 28 % test accuracy and
groks at 7,800 (delay 7,700); weight / input / output downscaling generalise as they fit (delay
0 / 0 / 200); target upscaling removes the plateau (85.6 % at t_fit), delay 2,700.

Choices where T is silent: the last partial batch (full batches of 128, as many steps as PyTorch's
epochs); inputs are the raw [0, 1] pixels; initialisation: LeCun-normal weights × w and zero
biases; D_LR is read on the test images. Findings: ``docs/findings/grokking_mlp.md``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from lrrich.claims import Above, Below, Premise, measured, quoting
from lrrich.experiments import _data, _measure, _plots, _presets, _seeds
from lrrich.io import save_figure

NAME = "grokking-mlp"
DESCRIPTION = ("T §6.4.3 Table 6.1 / Fig 6.5: grokking in a 4-layer tanh MLP removed by raising "
               "γ₊ (weight, target, input, output scale)")  # fmt: skip
VARIANTS: dict[str, tuple[str, ...]] = {
    "default": (),  # (a) w = 5, S = 3, input scale s_in = 1, output scale s_out = 1
    "weight_downscaling": ("weight_scale",),  # (b) w = 1
    "target_upscaling": ("target_scale",),  # (c) S = 30
    "input_downscaling": ("input_scale",),  # (d) s_in = 0.01
    "output_downscaling": ("output_scale",),  # (e) s_out = 0.1
}
"""Variant name → the TrainConfig knobs it moves from the default to the fixed value (Table 6.1)."""


@dataclasses.dataclass(frozen=True)
class Config(_presets.StepTraining):
    """T §6.4.3: Adam lr 1e-3, weight decay 1e-4 (coupled L2), batch 128, 2,000 epochs; ``seed``
    sets the init (shared by the variants), the data order and the subset."""

    dataset: str = "mnist5k"  # "mnist5k" (offline), "mnist" (TFDS, the [data] extra), "digits"
    data_dir: str | None = None  # TFDS folder for MNIST (None: ~/tensorflow_datasets)
    n_train: int = 1000  # training images (T: 1,000)
    depth: int = 4  # linear layers, the readout counted (T's "depth 4")
    width: int = 512
    activation: str = "tanh"
    optimizer: str = "adam"
    b2: float = 0.999
    weight_decay: float = 1e-4
    warmup_steps: int = 0
    batch_size: int = 128
    steps: int = 8000
    log_every: int = 100
    checkpoint_every: int = 2000
    weight_scale: float = 5.0  # the default (grokking) w and S of Table 6.1 (a)
    target_scale: float = 3.0
    fixed_weight_scale: float = 1.0  # Table 6.1 (b)–(e)
    fixed_target_scale: float = 30.0
    fixed_input_scale: float = 0.01
    fixed_output_scale: float = 0.1
    variants: tuple[str, ...] = tuple(VARIANTS)  # which to run (the default among them)
    train_threshold: float = 0.99  # training accuracy that counts as fitted (t_fit)
    test_fraction: float = 0.95  # t_gen's threshold: this × the best final test accuracy


PAPER_EPOCHS = 2000  # T §6.4.3: "the model was trained for 2000 epochs" (1,000 images, batch 128)

SCALES = {
    "small": Config(),
    "paper": Config(dataset="mnist", steps=_presets.paper_steps(1000, 128, PAPER_EPOCHS)),
}


def run(config: Config, run_dir: Path) -> dict:
    """Train every variant from the same init; the curves and the delays per variant."""
    if "default" not in config.variants:
        raise ValueError(f"variants must include 'default', got {config.variants}")
    tcs = {v: variant_train_config(config, v) for v in config.variants}  # unknown ones raise
    if config.depth < 2:
        raise ValueError(f"depth must be ≥ 2 (hidden layers + readout), got {config.depth}")
    if config.dataset not in ("mnist5k", "digits", "mnist"):
        raise ValueError(f"dataset must be 'mnist5k', 'digits' or 'mnist', got {config.dataset!r}")
    data = _data.load_task(config.dataset, n_train=config.n_train, seed=config.seed,
                           data_dir=config.data_dir)  # fmt: skip
    curves, train_seconds = {}, {}
    for variant in config.variants:
        model = _data.build_model("mlp", data, width=config.width, depth=config.depth - 1,
                                  seed=config.seed, activation=config.activation,
                                  init="flax")  # fmt: skip
        # only dlr_test is read: one D_LR Gram less per log point
        _, hist = _seeds.train_run(model, data, tcs[variant], config, Path(run_dir) / variant,
                                   metric_splits=("test",))  # fmt: skip
        keys = ("step", "train_acc", "test_acc", "train_loss", "dlr_test")
        curves[variant] = {k: hist.column(k).tolist() for k in keys}
        train_seconds[variant] = hist.train_time + hist.compile_time
    summary = _summary(curves, config)
    return {"summary": summary, "curves": curves,
            "timing": {f"train_s_{v}": s for v, s in train_seconds.items()},
            "measured": _measured(summary, config, data)}  # fmt: skip


def variant_train_config(config: Config, variant: str):
    """The :class:`nets.TrainConfig` of ``variant`` (Table 6.1 row) under ``config``."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {list(VARIANTS)}")
    scales = {"weight_scale": config.weight_scale, "target_scale": config.target_scale,
              "input_scale": 1.0, "output_scale": 1.0}  # fmt: skip
    scales.update({knob: getattr(config, f"fixed_{knob}") for knob in VARIANTS[variant]})
    return _presets.train_config(config, loss="mse", **scales)


def _summary(curves: dict, config: Config) -> dict:
    """t_fit, t_gen, the delay, the test accuracy and D_LR at t_fit and at the end, per variant."""
    threshold = config.test_fraction * max(c["test_acc"][-1] for c in curves.values())
    summary: dict = {"test_threshold": threshold}
    for variant, c in curves.items():
        steps = np.asarray(c["step"])
        t_fit = _measure.first_step(steps, np.asarray(c["train_acc"]), config.train_threshold)
        t_gen = _measure.first_step(steps, np.asarray(c["test_acc"]), threshold)
        fit_at = None if t_fit is None else int(np.searchsorted(steps, t_fit))
        at_fit = {k: None if fit_at is None else c[k][fit_at] for k in ("dlr_test", "test_acc")}
        delay = None if None in (t_fit, t_gen) else max(t_gen - t_fit, 0.0)
        row = dict(t_fit=t_fit, t_gen=t_gen, delay=delay, test_acc=c["test_acc"][-1],
                   dlr_at_fit=at_fit["dlr_test"], test_acc_at_fit=at_fit["test_acc"],
                   dlr_final=c["dlr_test"][-1])  # fmt: skip
        summary.update({f"{k}_{variant}": v for k, v in row.items()})
    fixes = [summary[f"delay_{v}"] for v in config.variants if v != "default"]
    if fixes:
        summary["max_delay_fixes"] = None if None in fixes else max(fixes)
    return summary


NO_DELAY_STEPS = 200  # a delay below this is none: two log intervals (t_fit's, t_gen's resolution)


def _measured(s: dict, config: Config, data) -> dict:
    """The record the claims read (one seed): each variant's delay (NaN: never generalised) and
    final test accuracy."""
    values = {"every_variant_finished": [1.0]}  # a run trains every variant to the end
    for v in config.variants:
        values[f"delay_{v}"] = [math.nan if s[f"delay_{v}"] is None else s[f"delay_{v}"]]
        values[f"test_acc_{v}"] = [s[f"test_acc_{v}"]]
    deviations = [text for off, text in (
        (2 * config.log_every != NO_DELAY_STEPS, f"log every {config.log_every} steps: the "
         f"delay's resolution is not the claims' {NO_DELAY_STEPS // 2}"),
        (config.steps < 16_000, f"{config.steps:,} Adam steps instead of T's 16,000"),
    ) if off]  # fmt: skip
    return measured(
        values, seeds=[config.seed], dataset=_data.dataset_text(data), deviations=deviations,
        scale=f"tanh MLP depth {config.depth} width {config.width}, Adam, {config.steps:,} "
        f"steps, t_gen at {config.test_fraction:.0%} of the best final test accuracy",
    )  # fmt: skip


_row = quoting(
    "T §6.4.3 Fig 6.5",
    "'Models in Fig. 6.5(b-e) are initialized in richer regimes using these techniques, "
    "skipping the prolonged overfitting phase and showing no delay in generalization' (T "
    "§6.4.3); 'All methods remove the delay in generalization' (Fig 6.5)",
    premise=(Premise("every_variant_finished", ">=", 1.0, "every variant ran to the end, so "
                     "t_gen's threshold is the protocol's (a fraction of the best final test "
                     "accuracy over all variants)"),),
)  # fmt: skip
CLAIMS = (
    _row("default-groks", "generalisation delay t_gen − t_fit, default (w = 5, S = 3)",
         Above("delay_default", NO_DELAY_STEPS), "long plateau, then generalises (Fig 6.5a)",
         source="T §6.4.3 Fig 6.5(a)",
         quote="'Basic grokking scenario' (T Fig 6.5(a), Table 6.1 (a), w = 5, S = 3): the "
         "default fits its training set, then generalises after a long plateau",
         note="a seed that has not generalised by the end has no delay value"),
    *(_row(f"no-delay-{v.replace('_', '-')}",
           f"generalisation delay t_gen − t_fit, {v.replace('_', ' ')} (test accuracy)",
           Below(f"delay_{v}", NO_DELAY_STEPS), "none (Fig 6.5b-e)",
           note=f"a delay below {NO_DELAY_STEPS} steps counts as none (two log intervals); a "
           "variant that never reaches the threshold has no delay value")
      for v in VARIANTS if v != "default"),
)  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``grokking_mlp.png`` (Fig 6.5: accuracies per variant) and ``grokking_mlp_dlr.png``."""
    curves, s = results["curves"], results["summary"]
    delays = {v: "not reached" if s.get(f"delay_{v}") is None else f"{s[f'delay_{v}']:.0f}"
              for v in curves}  # fmt: skip
    panels = {f"{v}\ndelay {delays[v]} steps": [(c, "train_acc", "train"), (c, "test_acc", "test")]
              for v, c in curves.items()}  # fmt: skip
    fig, axes = _plots.step_figure(panels, size=(3.2, 3.2), ylim=(0, 1.02), ylabel="accuracy")
    for ax, v in zip(axes, curves, strict=True):
        ax.axhline(s["test_threshold"], color="gray", ls=":", lw=1)
        for key, color in (("t_fit", "C0"), ("t_gen", "C1")):
            if s.get(f"{key}_{v}") is not None:
                ax.axvline(max(s[f"{key}_{v}"], 1.0), color=color, ls="--", lw=1)
    fig.suptitle("grokking MLP (T Fig 6.5): dashed = t_fit (train ≥ 99%), t_gen (test)", fontsize=9)
    fig_dlr, _ = _plots.step_figure({"richness": [(c, "dlr_test", v) for v, c in curves.items()]},
                                    size=(4.5, 3.2), ylabel="D_LR (test)", ylim=(0, 1))  # fmt: skip
    return [save_figure(fig, run_dir / "grokking_mlp.png"),
            save_figure(fig_dlr, run_dir / "grokking_mlp_dlr.png")]  # fmt: skip
