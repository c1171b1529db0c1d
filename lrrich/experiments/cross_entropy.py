"""D App. E (Fig 17): D_LR extends to cross-entropy training — on which outputs?

Under cross-entropy (CE) the loss sees the logits z only through softmax(z), so D_LR (D Eq. 7)
depends on which outputs it reads (:mod:`metrics.output_choices`): the logits z, the centred
logits z − z̄1ᵀ or the probabilities softmax(z). The network is trained with CE over ``seeds``
seeds and, from the same initialisations, with MSE on one-hot targets (the papers' protocol, the
control); the test D_LR is logged on each output choice, and at the end the probabilities' D_LR
is scanned over the softmax temperature τ (τ → ∞ gives the centred logits, τ → 0 the argmax).

D's caption of Fig 17 is lost in extraction. **Decision:** the small scale trains a
2-hidden-layer ReLU MLP of width 256 on real MNIST (mnist5k) with Adam; ``--scale grokking`` is
the transformer on a / b mod 97 with teddykoker/grokking's CE (AdamW λ = 1); ``--scale paper``
is ResNet18 (k = 64) on CIFAR-10.

Command: ``lrrich run cross-entropy --out runs/cross-entropy`` (3 seeds × CE and MSE;
``--set seeds=1`` for a quicker look).
Expected (seeds 0–2): test accuracy CE 93.5 %, MSE 95.8 %; test D_LR from init to the end on the
logits 0.58 → 0.246, centred logits 0.60 → 0.241, probabilities 0.60 → 0.448, against the MSE
control's 0.144: every choice falls, none reaches the MSE reading. Grokking: the logits' D_LR
falls while the transformer memorises, then rises with the test accuracy (0.645 / 0.573 /
0.388 at 97.0 / 72.6 / 11.1 %); those claims are judged only where every seed groks. Findings
(the temperature scan, the per-sample shift, the grokking transformer):
``docs/findings/cross_entropy.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import metrics
from lrrich import io
from lrrich.claims import Claim, Less, Premise, Value, measured, rf_reference
from lrrich.experiments import _data, _measure, _plots, _presets, _seeds

NAME = "cross-entropy"
DESCRIPTION = "D Fig 17: D_LR under cross-entropy on logits / centred logits / probabilities"
TASKS = ("image", "modular")
CHOICES = metrics.OUTPUT_CHOICES


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """Cross-entropy vs MSE training with D_LR on three output choices (D App. E, Fig 17).
    ``task='modular'``: a / b mod ``p`` (``seed`` sets the split), a ``depth``-block transformer
    of width d = ``width`` with 4 heads."""

    task: str = "image"  # 'image' (dataset, model) or 'modular'
    dataset: str = "mnist5k"
    model: str = "mlp"  # the image network (_data.MODELS)
    width: int = 256
    depth: int = 2
    optimizer: str = "adam"
    lr: float = 1e-3
    epochs: int = 20
    p: int = 97  # prime modulus of the modular task
    steps: int = 0  # optimizer steps (0: epochs decide)
    warmup_steps: int = 0  # linear learning-rate warm-up
    mse_twin: bool = True  # also train each seed with MSE on one-hot × target_scale (the control)
    target_scale: float = 1.0  # S of the MSE control's targets
    log_points: int = 20  # log points over training (D_LR on the test subset at each)
    eval_size: int = 1000  # test inputs per log point (1,000: all of mnist5k's test set)
    temperatures: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0)  # final τ scan


_GROKKING = Config(
    task="modular", width=128, depth=2, optimizer="adamw", b2=0.98, weight_decay=1.0,
    warmup_steps=10, batch_size=512, steps=2000, mse_twin=False, eval_size=4656, log_points=20,
)  # fmt: skip
"""The grokking probe's setting (teddykoker/grokking, CE): 2 blocks, d = 128, AdamW λ = 1."""
SCALES = {
    "small": Config(),
    "grokking": _GROKKING,
    "paper": _presets.paper_scale(
        Config, "cifar10", model="resnet18", optimizer="sgd", lr=0.05, epochs=200, eval_size=2048
    ),
}


def _shift_share(phi, z):
    r"""Share of the sample-centred logits in the per-sample class mean z̄ (the direction softmax
    ignores): C‖Hz̄‖² / ‖Hz‖_F², since z = (z − z̄1ᵀ) + z̄1ᵀ splits Hz into orthogonal parts."""
    zc = z - jnp.mean(z, axis=0)
    zbar = jnp.mean(zc, axis=1)
    return z.shape[1] * jnp.sum(zbar**2) / jnp.sum(zc**2)


LOGGED = {
    "logits": lambda phi, z: metrics.dlr_with_rank(phi, z),
    "centred_logits": lambda phi, z: metrics.dlr_with_rank(phi, metrics.centred_logits(z)),
    "probabilities": lambda phi, z: metrics.dlr_with_rank(phi, metrics.probabilities(z)),
    "shift_share": _shift_share,
}
"""Metrics logged on the test subset at each log point (``<name>_test`` in the History)."""


def run(config: Config, run_dir: Path) -> dict:
    """Train the seeds with CE (and MSE), log D_LR per output choice; scan τ at the end."""
    if config.task not in TASKS:
        raise ValueError(f"task must be one of {list(TASKS)}, got {config.task!r}")
    if not config.temperatures or min(config.temperatures) <= 0:
        raise ValueError(f"temperatures must be > 0, got {config.temperatures}")
    data = _load(config)
    seeds = _presets.seed_list(config)
    runs = {
        loss: _train(config, data, loss, seeds) for loss in ("ce", "mse")[: 1 + config.mse_twin]
    }
    per_seed = [
        {"seed": s, **{k: v for _, numbers in runs.values() for k, v in numbers[i].items()},
         "init_fitted_dlr": _measure.init_baseline(_build(config, data, s), data)}
        for i, s in enumerate(seeds)
    ]  # fmt: skip
    not_averaged = ("seed", "ce_dlr_by_temperature", "init_fitted_dlr")
    summary = _seeds.seed_mean(per_seed, [k for k in per_seed[0] if k not in not_averaged])
    n_eval = min(config.eval_size, len(data.x_test))
    p = runs["ce"][0][0]["n_features"]
    return {"summary": summary | {"seeds": len(seeds)}, "per_seed": per_seed,
            "curves": {loss: curves for loss, (curves, _) in runs.items()},
            "temperatures": list(config.temperatures),
            "dataset": {"name": data.name, "n_train": len(data.x_train), "n_eval": n_eval},
            "measured": _measured(per_seed, config, data, n_eval, p)}  # fmt: skip


def _load(config: Config):
    """The task's dataset (real images shaped for the model, or the modular equations)."""
    if config.task == "modular":
        from nets.data import load

        return load("modular_division", p=config.p, seed=config.seed)
    return _data.load_data(config, config.model)


def _build(config: Config, data, seed: int):
    """A fresh network of ``config`` for ``data``, initialised from ``seed``."""
    if config.task == "modular":
        from flax import nnx

        from nets import Transformer

        return Transformer(config.p + 2, num_layers=config.depth, d_model=config.width,
                           num_heads=4, num_classes=config.p, rngs=nnx.Rngs(seed))  # fmt: skip
    return _data.build_model(config.model, data, width=config.width, depth=config.depth, seed=seed)


def _train(config: Config, data, loss: str, seeds: list[int]):
    """Train one network per seed with ``loss`` in one program; per seed: the logged curves
    (with the final output ranks) and the numbers ``<loss>_…`` (accuracies, D_LR per output
    choice at the start, end and max, its rank; CE: the final test D_LR of softmax(z/τ) per τ)."""
    from nets import train_many

    n = len(data.x_train)
    tc = _presets.train_config(
        config, n, loss=loss, target_scale=config.target_scale, steps=config.steps or None,
        warmup_steps=config.warmup_steps,
    )  # fmt: skip
    total = tc.total_steps(n // tc.batch_size)
    trained, hists = train_many(
        [_build(config, data, s) for s in seeds], data, [tc] * len(seeds),
        [jax.random.key(s) for s in seeds], log_every=max(total // config.log_points, 1),
        eval_size=config.eval_size, metrics=LOGGED, metric_splits=("test",), progress=True,
        vectorize=config.model != "mlp" or config.task == "modular",
    )  # fmt: skip
    curves, numbers = [], []
    for model, hist in zip(trained, hists, strict=True):
        c = {k: hist.column(k).tolist() for k in ("step", "train_acc", "test_acc")}
        c |= {name: hist.column(f"{name}_test").tolist() for name in LOGGED}
        phi, z = _measure.forward(model, data.x_test[: config.eval_size], tc.output_scale)
        c["n_features"] = int(phi.shape[1])
        final = metrics.dlr_by_output(phi, z)  # the ranks the logged D_LR used at the end
        c["final_rank"] = {ch: int(getattr(final, ch).rank) for ch in CHOICES}
        curves.append(c)
        one = {f"{loss}_{k}": c[k][-1] for k in ("test_acc", "train_acc")}
        for choice in CHOICES if loss == "ce" else ("logits",):
            v, key = c[choice], f"{loss}_{choice}"
            one |= {f"{key}_start": v[0], f"{key}_end": v[-1], f"{key}_max": float(np.nanmax(v)),
                    f"{key}_rank": c["final_rank"][choice]}  # fmt: skip
        share = c["shift_share"]
        one |= {f"{loss}_shift_share_start": share[0], f"{loss}_shift_share_end": share[-1]}
        if loss == "ce":
            by_t = [metrics.dlr_by_output(phi, z, temperature=t) for t in config.temperatures]
            one["ce_dlr_by_temperature"] = [float(d.probabilities.value) for d in by_t]
        numbers.append(one)
    return curves, numbers


_QUOTE = (
    "'our method extends to models trained on cross-entropy loss, while the mathematical "
    "interpretation is less straightforward' (D App. E, Fig 17)"
)


def _claim(prefix: str, choice: str, field: str, target: float, **kw) -> Claim:
    """``field`` (test D_LR on ``choice`` at the end of CE training) is ``target``; direction:
    it falls from init to the end."""
    label = choice.replace("_", " ")
    end, start = f"{prefix}_{choice}_end", f"{prefix}_{choice}_start"
    if prefix == "ce":  # the MLP against its MSE twin (same initialisation)
        key, source, quote = f"{choice}-as-mse", "D App. E Fig 17", _QUOTE
        what = f"test D_LR on {label} at the end (CE) minus the MSE twin's (same initialisation)"
    else:  # the grokking transformer against D's grokked value under MSE
        key, source = f"grokking-{choice}", "D App. E Fig 17; D §5 Fig 4"
        quote = _QUOTE + "; D's grokking transformer ends rich (D_LR 0.11, S's table, step 3,000)"
        what = f"test D_LR on {label} at the end (CE), grokking transformer"
    return Claim(
        key, source, quote, f"{what}; direction: it falls from init to the end", "test",
        Value(field, target, "dlr", direction=Less(end, start)), dlr=(end,), **kw,
    )  # fmt: skip


_GROKS = Premise(
    "modular_test_acc", ">=", 0.9, "the network groks (test accuracy ≥ 90 % at the end)"
)
CLAIMS = (
    *(_claim("ce", c, f"ce_{c}_minus_mse", 0.0, paper="extends to CE (as under MSE)")
      for c in CHOICES),
    *(_claim("modular", c, f"modular_{c}_end", 0.11, premise=(_GROKS,),
             paper="0.11 (D's grokked transformer under MSE)") for c in CHOICES),
)  # fmt: skip
"""D App. E on the MLP (against its MSE twin; fields ``ce_*``) and on the grokking transformer
(``--scale grokking``; fields ``modular_*``, judged only where the network groks)."""


def _measured(per_seed: list[dict], config: Config, data, n_eval: int, p: int) -> dict:
    """The per-seed record the claims read (:func:`lrrich.claims.measured`)."""
    prefix = "modular" if config.task == "modular" else "ce"
    col = lambda key: [s[key] for s in per_seed]
    ends = [f"{c}_{end}" for c in CHOICES for end in ("start", "end")]
    values = {f"{prefix}_{k}": col(f"ce_{k}") for k in ("test_acc", "train_acc", *ends)}
    if config.mse_twin:
        values |= {f"mse_{k}": col(f"mse_{k}") for k in ("test_acc", "train_acc", "logits_end")}
        for c in CHOICES:
            values[f"{prefix}_{c}_minus_mse"] = [s[f"ce_{c}_end"] - s["mse_logits_end"]
                                                 for s in per_seed]  # fmt: skip
    what = f"{config.model} width {config.width} depth {config.depth}"
    if config.task == "modular":
        what = f"{config.depth}-block transformer d = {config.width}, a / b mod {config.p}"
    length = f"{config.steps} steps" if config.steps else f"{config.epochs} epochs"
    deviations = _presets.partial_batch_deviation(len(data.x_train), config.batch_size)
    if config.task == "image" and config.model != "resnet18":
        deviations.append(f"an MLP on {data.name}: D's Fig 17 network is not legible")
    return measured(
        values,
        seeds=col("seed"),
        dataset=f"{data.name} ({len(data.x_train):,} train / {n_eval:,} test)",
        scale=f"{what}, {config.optimizer} lr {config.lr:g}, {length}",
        baseline={f"{prefix}_{c}_end": col("init_fitted_dlr") for c in CHOICES},
        reference={f"{prefix}_{c}_end": rf_reference(n_eval, p, max(col(f"ce_{c}_rank")),
                                                     rank_source="measured") for c in CHOICES},
        deviations=deviations,
    )  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``cross_entropy.png``: test D_LR vs step on the three output choices (CE; MSE control
    dashed; random-feature references dotted), test accuracy, and the final D_LR of
    softmax(z/τ) vs τ."""
    import matplotlib.pyplot as plt

    curves = results["curves"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), constrained_layout=True)
    # the reference of each choice's D_LR field, ce_* (MLP) or modular_* (transformer)
    refs = {k.split("_", 1)[1]: r["dlr"] for k, r in results["measured"]["reference"].items()}
    for k, choice in enumerate(CHOICES):
        label = f"CE: {choice.replace('_', ' ')}"
        _plots.band(axes[0], curves["ce"], choice, label, x="step", color=f"C{k}")
        if f"{choice}_end" in refs:
            axes[0].axhline(refs[f"{choice}_end"], color=f"C{k}", ls=":", lw=1)
    if "mse" in curves:
        _plots.band(axes[0], curves["mse"], "logits", "MSE control", x="step", color="k", ls="--")
    axes[0].axhline(0.1, color="grey", lw=0.8, ls="--")
    axes[0].set(xlabel="step", ylabel="test D_LR (dotted: random features)", ylim=(0, 1))
    axes[0].set_title("D_LR by output choice (mean, min-max over seeds)", fontsize=9)
    for loss, ls, color in (("ce", "-", "C0"), ("mse", "--", "k")):
        for c in curves.get(loss, []):
            axes[1].plot(c["step"], c["test_acc"], ls, color=color, lw=1)
    axes[1].set(xlabel="step", ylabel="test accuracy", ylim=(0, 1.02), title="CE (solid), MSE")
    for s in results["per_seed"]:
        axes[2].semilogx(results["temperatures"], s["ce_dlr_by_temperature"], "o-", ms=3,
                         color="C2", lw=1)  # fmt: skip
        for choice, color in (("centred_logits", "C1"), ("logits", "C0")):
            axes[2].axhline(s[f"ce_{choice}_end"], color=color, ls=":", lw=1)
    axes[2].set(
        xlabel="softmax temperature τ", ylabel="final test D_LR of softmax(z/τ)", ylim=(0, 1)
    )
    axes[2].set_title("dotted: logits (C0), centred logits (C1)", fontsize=9)
    axes[0].legend(fontsize=7)
    return [io.save_figure(fig, Path(run_dir) / "cross_entropy.png")]
