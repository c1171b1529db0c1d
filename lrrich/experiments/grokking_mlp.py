"""T §6.4.3 Table 6.1 / Fig 6.5: grokking in a 4-layer tanh MLP, removed by the four γ₊-raising fixes.

A depth-4, width-512 tanh MLP trained with MSE on one-hot × S labels from LeCun weights × w fits
its 1,000 MNIST training images at once but generalises only after a long plateau (T §6.4.3 =
position paper App. H.3, Fig 11). Theorem 1 (T Eq 6.14) ties the feature-learning dynamics to a
large γ₊ ≥ S/Σ₀; each fix of Table 6.1 raises γ₊ and should remove the delay: (a) the default
w = 5, S = 3, input scale s_in = 1, output scale s_out = 1; (b) weight downscaling w = 1; (c)
target upscaling S = 30; (d) input downscaling s_in = 0.01; (e) output downscaling s_out = 0.1
(the :class:`nets.TrainConfig` knobs ``weight_scale``, ``target_scale``, ``input_scale``,
``output_scale``). Each variant records t_fit (training accuracy reaches ``train_threshold``),
t_gen (test accuracy reaches ``test_fraction`` of the best final one), the generalisation delay
t_gen − t_fit, and the test D_LR along the way (T Fig 6.4: lazy → rich).

Command: ``lrrich run grokking-mlp`` (1,000 mnist5k images, 8,000 of the paper's 16,000 Adam
steps); ``--scale paper`` draws the 1,000 images from the full MNIST (the [data] extra) and trains
16,000 steps = T's 2,000 epochs; one seed per run (T states no seed count, D averages at least
three): ``lrrich sweep grokking-mlp --scale paper --seeds 3``.
Expected (seed 0; threshold 87.9 %): the default fits at step 100 with 28 % test accuracy and groks
at 7,800 (delay 7,700); weight / input / output downscaling generalise as they fit (delay 0 / 0 /
200); target upscaling removes the plateau (85.6 % at t_fit) but reaches the threshold at 2,800
(delay 2,700).

Choices where T is silent: the last partial batch (full batches of 128, as many steps as PyTorch's
epochs: ``_presets.paper_steps``); inputs are the raw [0, 1] pixels (T: "flattened (vectorized)
MNIST"); initialisation: LeCun-normal weights × w and zero biases; D_LR is read on the test
images. Findings: ``docs/findings/grokking_mlp.md``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jax
import numpy as np

from lrrich.claims import Above, Below, Claim, Premise, measured
from lrrich.experiments import _data, _measure, _presets

NAME = "grokking-mlp"
DESCRIPTION = (
    "T §6.4.3 Table 6.1 / Fig 6.5: grokking in a 4-layer tanh MLP removed by raising γ₊ "
    "(weight, target, input, output scale)"
)
PAPER = {
    "delay_default": "long plateau before generalising (Fig 6.5a)",
    "max_delay_fixes": "no delay: all four fixes generalise as they fit (Fig 6.5b-e)",
}

VARIANTS: dict[str, tuple[str, ...]] = {
    "default": (),
    "weight_downscaling": ("weight_scale",),
    "target_upscaling": ("target_scale",),
    "input_downscaling": ("input_scale",),
    "output_downscaling": ("output_scale",),
}
"""Variant name → the TrainConfig knobs it moves from the default to the fixed value (Table 6.1)."""


@dataclasses.dataclass(frozen=True)
class Config(_presets.StepTraining):
    """T §6.4.3 (``SCALES["paper"]``); the small scale trains 8,000 of its 16,000 steps.

    T: Adam lr 1e-3 with weight decay 1e-4 (PyTorch's ``Adam(weight_decay=…)``, coupled L2),
    batch 128, 2,000 epochs; "depth 4" counts the readout. The optimizer and run-length fields are
    :class:`~lrrich.experiments._presets.StepTraining`'s (``log_every``: the resolution of t_fit
    and t_gen); ``seed`` sets the init (shared by the variants), the data order and the subset.

    Attributes:
      dataset: ``'mnist5k'`` (offline), ``'mnist'`` (TFDS, the [data] extra) or ``'digits'``.
      data_dir: TFDS folder for MNIST (None: ``~/tensorflow_datasets``).
      n_train: training images (T: 1,000).
      depth, width, activation: linear layers (hidden layers + 1), hidden width, nonlinearity.
      weight_scale, target_scale: the default (grokking) w and S of Table 6.1 (a).
      fixed_weight_scale, fixed_target_scale, fixed_input_scale, fixed_output_scale: Table 6.1
        (b)–(e); the default input and output scales are 1.
      variants: which of ``VARIANTS`` to run (the default among them).
      train_threshold: training accuracy that counts as fitted (t_fit).
      test_fraction: t_gen's threshold, a fraction of the best final test accuracy over variants.
    """

    dataset: str = "mnist5k"
    data_dir: str | None = None
    n_train: int = 1000
    depth: int = 4
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
    weight_scale: float = 5.0
    target_scale: float = 3.0
    fixed_weight_scale: float = 1.0
    fixed_target_scale: float = 30.0
    fixed_input_scale: float = 0.01
    fixed_output_scale: float = 0.1
    variants: tuple[str, ...] = tuple(VARIANTS)
    train_threshold: float = 0.99
    test_fraction: float = 0.95


PAPER_EPOCHS = 2000
"""T §6.4.3: "the model was trained for 2000 epochs" (1,000 images, batch 128)."""

SCALES = {
    "small": Config(),
    "paper": Config(
        dataset="mnist",
        steps=_presets.paper_steps(1000, 128, PAPER_EPOCHS),
        log_every=100,
        checkpoint_every=2000,
    ),
}


def run(config: Config, run_dir: Path) -> dict:
    """Train every variant from the same init; the curves and the delays per variant."""
    from lrrich.trainer import train

    if "default" not in config.variants:
        raise ValueError(f"variants must include 'default', got {config.variants}")
    for v in set(config.variants) - set(VARIANTS):
        raise ValueError(f"unknown variant {v!r}; choose from {list(VARIANTS)}")
    if config.depth < 2:
        raise ValueError(f"depth must be ≥ 2 (hidden layers + readout), got {config.depth}")
    if config.dataset not in ("mnist5k", "digits", "mnist"):
        raise ValueError(f"dataset must be 'mnist5k', 'digits' or 'mnist', got {config.dataset!r}")
    # raw [0, 1] pixels; LeCun-normal weights and zero biases ("flax" init)
    data = _data.load_task(config.dataset, n_train=config.n_train, seed=config.seed,
                           data_dir=config.data_dir)  # fmt: skip
    curves, train_seconds = {}, {}
    for variant in config.variants:
        tc = variant_train_config(config, variant)
        model = _data.build_model("mlp", data, width=config.width, depth=config.depth - 1,
                                  seed=config.seed, activation=config.activation,
                                  init="flax")  # fmt: skip
        # only dlr_test is read: one D_LR Gram less per log point
        _, hist = train(model, data, tc, key=jax.random.key(config.seed),
                        log_every=config.log_every, metric_splits=("test",),
                        run_dir=run_dir / variant, checkpoint_every=config.checkpoint_every,
                        resume=True, progress=True)  # fmt: skip
        keys = ("step", "train_acc", "test_acc", "train_loss", "dlr_test")
        curves[variant] = {k: hist.column(k).tolist() for k in keys}
        train_seconds[variant] = hist.train_time + hist.compile_time
    summary = _summary(curves, config)
    return {
        "summary": summary,
        "curves": curves,
        "timing": {f"train_s_{v}": s for v, s in train_seconds.items()},
        "measured": _measured(summary, config, data),
    }


def variant_train_config(config: Config, variant: str):
    """The :class:`nets.TrainConfig` of ``variant`` (Table 6.1 row) under ``config``."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {list(VARIANTS)}")
    scales = {"weight_scale": config.weight_scale, "target_scale": config.target_scale,
              "input_scale": 1.0, "output_scale": 1.0}  # fmt: skip
    for knob in VARIANTS[variant]:
        scales[knob] = getattr(config, f"fixed_{knob}")
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
        summary[f"t_fit_{variant}"] = t_fit
        summary[f"t_gen_{variant}"] = t_gen
        summary[f"delay_{variant}"] = None if None in (t_fit, t_gen) else max(t_gen - t_fit, 0.0)
        summary[f"test_acc_{variant}"] = c["test_acc"][-1]
        summary[f"dlr_at_fit_{variant}"] = None if fit_at is None else c["dlr_test"][fit_at]
        summary[f"test_acc_at_fit_{variant}"] = None if fit_at is None else c["test_acc"][fit_at]
        summary[f"dlr_final_{variant}"] = c["dlr_test"][-1]
    fixes = [summary[f"delay_{v}"] for v in config.variants if v != "default"]
    if fixes:
        summary["max_delay_fixes"] = None if None in fixes else max(fixes)
    return summary


NO_DELAY_STEPS = 200
"""A delay of at most this counts as none: two log intervals of 100 steps, the resolution of
t_fit and t_gen at every scale's ``log_every``."""

_PROTOCOL = Premise(
    "every_variant_finished",
    ">=",
    1.0,
    "every variant ran to the end, so t_gen's threshold is the protocol's (a fraction of the best "
    "final test accuracy over all variants)",
)


def _fix_claim(variant: str) -> Claim:
    return Claim(
        f"no-delay-{variant.replace('_', '-')}",
        "T §6.4.3 Fig 6.5",
        "'Models in Fig. 6.5(b-e) are initialized in richer regimes using these techniques, "
        "skipping the prolonged overfitting phase and showing no delay in generalization' (T "
        "§6.4.3); 'All methods remove the delay in generalization' (Fig 6.5)",
        f"generalisation delay t_gen − t_fit, {variant.replace('_', ' ')} (test accuracy)",
        "test",
        Below(f"delay_{variant}", NO_DELAY_STEPS),
        paper="none (Fig 6.5b-e)",
        premise=(_PROTOCOL,),
        note=f"a delay below {NO_DELAY_STEPS} steps counts as none (two log intervals); a "
        "variant that never reaches the threshold has no delay value",
    )


CLAIMS = (
    Claim(
        "default-groks",
        "T §6.4.3 Fig 6.5(a)",
        "'Basic grokking scenario' (T Fig 6.5(a), Table 6.1 (a), w = 5, S = 3): the default "
        "fits its training set, then generalises after a long plateau",
        "generalisation delay t_gen − t_fit, default (w = 5, S = 3)",
        "test",
        Above("delay_default", NO_DELAY_STEPS),
        paper="long plateau, then generalises (Fig 6.5a)",
        premise=(_PROTOCOL,),
        note="a seed that has not generalised by the end has no delay value",
    ),
    *(_fix_claim(v) for v in VARIANTS if v != "default"),
)
"""T Table 6.1 / Fig 6.5: the default groks late, and each fix removes the delay."""


def _measured(s: dict, config: Config, data) -> dict:
    """The record the claims read (one seed, ``config.seed``; ``lrrich sweep --seeds`` runs
    more): each variant's delay (NaN where it never generalised) and its final test accuracy."""
    values = {"every_variant_finished": [1.0]}  # a run trains every variant to the end
    for v in config.variants:
        values[f"delay_{v}"] = [math.nan if s[f"delay_{v}"] is None else s[f"delay_{v}"]]
        values[f"test_acc_{v}"] = [s[f"test_acc_{v}"]]
    deviations = []
    if 2 * config.log_every != NO_DELAY_STEPS:
        deviations.append(
            f"log every {config.log_every} steps: the delay's resolution is not the claims' "
            f"{NO_DELAY_STEPS // 2}"
        )
    if config.steps < 16_000:
        deviations.append(f"{config.steps:,} Adam steps instead of T's 16,000")
    return measured(
        values,
        seeds=[config.seed],
        dataset=_data.dataset_text(data),
        scale=f"tanh MLP depth {config.depth} width {config.width}, Adam, {config.steps:,} "
        f"steps, t_gen at {config.test_fraction:.0%} of the best final test accuracy",
        deviations=deviations,
    )


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``grokking_mlp.png`` (Fig 6.5: accuracies per variant) and ``grokking_mlp_dlr.png``."""
    import matplotlib.pyplot as plt

    from lrrich.io import save_figure

    curves, s = results["curves"], results["summary"]
    fig, axes = plt.subplots(
        1, len(curves), figsize=(3.2 * len(curves), 3.2), squeeze=False, layout="constrained"
    )
    fig_dlr, ax_dlr = plt.subplots(figsize=(4.5, 3.2))
    for ax, (name, c) in zip(axes[0], curves.items(), strict=True):
        step = np.maximum(np.asarray(c["step"], float), 1.0)  # log-x
        ax.plot(step, c["train_acc"], label="train")
        ax.plot(step, c["test_acc"], label="test")
        ax.axhline(s["test_threshold"], color="gray", ls=":", lw=1)
        for key, color in (("t_fit", "C0"), ("t_gen", "C1")):
            if s.get(f"{key}_{name}") is not None:
                ax.axvline(max(s[f"{key}_{name}"], 1.0), color=color, ls="--", lw=1)
        delay = s.get(f"delay_{name}")
        delay = "not reached" if delay is None else f"{delay:.0f}"
        ax.set(xscale="log", ylim=(0, 1.02), xlabel="step", title=f"{name}\ndelay {delay} steps")
        ax_dlr.plot(step, c["dlr_test"], label=name)
    axes[0][0].set_ylabel("accuracy")
    axes[0][0].legend(loc="lower right", fontsize=8)
    fig.suptitle("grokking MLP (T Fig 6.5): dashed = t_fit (train ≥ 99%), t_gen (test)", fontsize=9)
    ax_dlr.set(xscale="log", xlabel="step", ylabel="D_LR (test)", ylim=(0, 1), title="richness")
    ax_dlr.legend(fontsize=7)
    paths = [save_figure(fig, run_dir / "grokking_mlp.png")]
    return paths + [save_figure(fig_dlr, run_dir / "grokking_mlp_dlr.png")]
