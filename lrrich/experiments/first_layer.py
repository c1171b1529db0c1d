"""P §6.2: updating only the first layer can learn features; updating only the last layer is lazy.

A two-layer ReLU network f(x) = W₂ σ(W₁x + b₁) + b₂ trains from one init per seed in three
regimes: ``first`` (W₁, b₁ only), ``last`` (W₂, b₂ only: random features) and ``all``. Read: test
D_LR (D Eq. 7) beside the random-feature reference, accuracy, S_init = 1 − CKA(Φ₀Φ₀ᵀ, ΦΦᵀ) (D §4).

Command: ``lrrich run first-layer`` (4,000 mnist5k digits, width 256, Adam lr 1e-3, 30 epochs;
5 seeds, since an ordering claim asks for five: ``lrrich.claims``).
Expected (seeds 0–2, mean ± std): test D_LR first-only 0.333 ± 0.014 < last-only 0.484 ± 0.005
in every seed, all layers 0.339 ± 0.005; random features 0.824; test accuracy first / last /
all 95.3 / 86.2 / 95.5 %; S_init 0.27 / 0 / 0.30. Findings: ``docs/findings/first_layer.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
from flax import nnx

from lrrich import io
from lrrich.claims import Less, measured, quoting, rf_reference
from lrrich.experiments import _data, _measure, _plots, _presets, _seeds

NAME = "first-layer"
DESCRIPTION = "P §6.2: two-layer ReLU net, first layer only vs last layer only (lazy) vs all"
REGIMES = ("first", "last", "all")
"""The trained parameters: W₁ only, W₂ only (random features), both."""


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """P §6.2 has no experiment: D's MNIST MLP protocol (D App. F.4) with one hidden layer.
    **Decision:** width 256 (D's MLP width), output scale 1, 30 epochs (every loss has flattened)."""

    dataset: str = "mnist5k"
    width: int = 256
    depth: int = 1
    optimizer: str = "adam"
    lr: float = 1e-3
    epochs: int = 30
    output_scale: float = 1.0
    log_points: int = 10  # log points over training
    eval_size: int = 1000  # train / test images per log point (the summary: the full sets)
    seeds: int = 5


SCALES = {"small": Config()}


class _Fixed(nnx.Variable):
    """A parameter held at its initial value: not an ``nnx.Param``, so ``nets`` does not train it."""


def run(config: Config, run_dir: Path) -> dict:
    """Train the three regimes over the seeds; summary: seed means per regime."""
    if config.depth != 1:
        raise ValueError(f"P §6.2 is about two-layer networks: depth must be 1, got {config.depth}")
    data = _data.load_data(config, "mlp")
    seeds = _presets.seed_list(config)
    spe = len(data.x_train) // min(config.batch_size, len(data.x_train))
    log_every = max(spe * config.epochs // config.log_points, 1)
    per_regime, histories = {}, {}
    for r in REGIMES:
        per_regime[r], histories[r] = _train_regime(config, data, r, seeds, log_every)
    per_seed = [{"seed": s, **{f"{r}_{k}": v for r in REGIMES for k, v in per_regime[r][i].items()}}
                for i, s in enumerate(seeds)]  # fmt: skip
    reference = rf_reference(len(data.x_test), config.width, data.num_classes)
    summary = _seeds.seed_mean(per_seed) | {"seeds": len(seeds), "n_features": config.width}
    summary["rf_dlr"] = reference["dlr"]
    baseline = [_measure.init_baseline(_model(config, data, s, "all"), data) for s in seeds]
    return {"summary": summary, "per_seed": per_seed, "histories": histories,
            "reference": reference, "measured": _measured(per_seed, baseline, config, data)}  # fmt: skip


def _train_regime(config: Config, data, regime: str, seeds: list[int], log_every: int):
    """The seeds of one regime as one ``train_many``: per-seed measures, per-seed curves."""
    from metrics import feature_kernel_distance
    from nets import train_many

    models = [_model(config, data, seed, regime) for seed in seeds]
    phi0 = [_measure.forward(m, data.x_test, config.output_scale)[0] for m in models]
    tc = _presets.train_config(config, len(data.x_train), last_layer_only=regime == "last")
    trained, hists = train_many(
        models, data, [tc] * len(seeds), [jax.random.key(s) for s in seeds],
        log_every=log_every, eval_size=config.eval_size, progress=True,
    )  # fmt: skip
    out, curves = [], []
    for model, hist, f0 in zip(trained, hists, phi0, strict=True):
        if hist.diverged is not None:
            raise hist.diverged
        res = _measure.measure(model, data, config.output_scale)
        phi = _measure.forward(model, data.x_test, config.output_scale)[0]
        out.append({k: res[k] for k in ("dlr", "dlr_train", "train_acc", "test_acc")})
        out[-1]["s_init"] = float(feature_kernel_distance(f0, phi))
        curves.append({k: hist.column(k).tolist() for k in _CURVES})
    return out, curves


_CURVES = ("epoch", "train_acc", "test_acc", "dlr_test")


def _model(config: Config, data, seed: int, regime: str):
    """The seed's two-layer MLP (one init for every regime); ``first``: a :class:`_Fixed` readout."""
    model = _data.build_model("mlp", data, width=config.width, depth=1, seed=seed)
    if regime == "first":
        head = model.head
        head.kernel = _Fixed(head.kernel.get_value())
        if head.bias is not None:
            head.bias = _Fixed(head.bias.get_value())
    return model


_row = quoting("P §6.2", "'In 2-layer neural networks, the non-linear activations (e.g., ReLU) "
               "breaks the symmetry between layers: updating only the last layer results in "
               "linear dynamics, whereas updating only the first layer can facilitate feature "
               "learning'", seeds=5)  # fmt: skip
CLAIMS = tuple(
    _row(f"{regime}-richer-than-last", f"test D_LR, {what} < last layer only{why}",
         Less(f"{regime}_dlr", "last_dlr"), "smaller / larger (no values)",
         dlr=(f"{regime}_dlr", "last_dlr"))
    for regime, what, why in (
        ("first", "first layer only", ""),
        ("all", "all layers", " (the control: full training is rich here)"),
    )
)  # fmt: skip
"""P §6.2 as orderings of the test D_LR (P gives no values); an ordering decides, so 5 seeds."""


def _measured(per_seed: list[dict], baseline: list[float], config: Config, data) -> dict:
    fields = [f"{r}_{k}" for r in REGIMES for k in ("dlr", "test_acc", "train_acc")]
    ref = rf_reference(len(data.x_test), config.width, data.num_classes)
    return measured(
        {f: [s[f] for s in per_seed] for f in fields}, seeds=[s["seed"] for s in per_seed],
        dataset=_data.dataset_text(data),
        scale=f"MLP 784-{config.width}-{data.num_classes} (ReLU), {config.optimizer} lr "
        f"{config.lr:g}, {config.epochs} epochs",
        baseline={f"{r}_dlr": baseline for r in REGIMES},
        reference={f"{r}_dlr": ref for r in REGIMES},
        deviations=[*_presets.partial_batch_deviation(len(data.x_train), config.batch_size),
                    "P states the claim without an experiment: D's MNIST MLP protocol with one "
                    "hidden layer (the setting is ours)"],
    )  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``first_layer.png``: test D_LR and accuracy vs epoch per regime (seed bands), and the
    final test D_LR per regime beside the random-feature reference."""
    import matplotlib.pyplot as plt

    labels = {"first": "first layer only", "last": "last layer only (lazy)", "all": "all layers"}
    colors = {"first": "C3", "last": "C0", "all": "C2"}
    rf = results["reference"]["dlr"]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), constrained_layout=True)
    for regime, curves in results["histories"].items():  # seed mean and range
        c, label = colors[regime], labels[regime]
        _plots.band(axes[0], curves, "dlr_test", label, color=c, marker="o")
        _plots.band(axes[1], curves, "test_acc", label, color=c)
        _plots.band(axes[1], curves, "train_acc", None, color=c, ls=":")
    for ax in axes[:2]:
        ax.set_xlabel("epoch")
    axes[0].axhline(rf, color="grey", lw=0.8, ls="--", label="random features")
    axes[0].set(ylabel="test D_LR", ylim=(0, 1), title="P §6.2: which layer learns")
    axes[1].set(ylabel="accuracy (test; dotted: train)", ylim=(0, 1.02))
    axes[0].legend(fontsize=7)
    for j, regime in enumerate(labels):
        vals = [[s[f"{regime}_dlr"] for s in results["per_seed"]]]
        _plots.seed_dots(axes[2], [j], vals, "s", color=colors[regime])
    axes[2].axhline(rf, color="grey", lw=0.8, ls="--", label=f"random features {rf:.2f}")
    axes[2].set_xticks(range(3), ["first only", "last only", "all"])
    axes[2].set(ylabel="final test D_LR (grey: seeds)", ylim=(0, 1))
    axes[2].legend(fontsize=7)
    return [io.save_figure(fig, Path(run_dir) / "first_layer.png")]
