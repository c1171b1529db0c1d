"""Seed 000 Fig 4 / seed 001 table: grokking on modular division is a lazy → rich transition.

A 2-layer decoder-only transformer (d = 128, 4 heads, post-LayerNorm; teddykoker/grokking, the
code the paper used) learns true modular division a ∘ b = a·b⁻¹ mod p (b ≠ 0) from half of the
p(p − 1) equations with cross-entropy and AdamW (lr 1e-3, β = (0.9, 0.98), 10 warm-up steps,
decoupled weight decay λ = 1 as teddykoker/grokking). The network first memorises the training set
(train acc → 100 %, test acc at chance), then generalises (test acc → 100 %). The paper reads this
as lazy → rich: D_LR, computed from the features Φ and outputs alone, drops. Logged here: accuracy
and D_LR (train/test subsets) every ``log_every`` steps, and the feature decomposition (Π*, Π̂,
ρ_k/ρ_1; thesis T Eq. 2.3–2.5) before and after the transition.

Command (the paper's own setting, p = 97, 3,000 steps)::

    lrrich run grokking-transformer --out runs/grokking

CPU runtime: 18 min wall on the 2-core CPU shared with ~6 other jobs (load 8–14; 374 s of CPU
time in total: 0.27 s/step wall under that load, 60 log points of ~3 s each), so a few minutes
on an idle 2-core machine. It groks by step ~2,100, within the paper's 3,000 steps, so the small
scale is the paper's own setting.

Paper scale (``--scale paper``): the same setting trained for 10,000 steps with the curves logged
every 10 steps.

Expected outcome (seed 0, measured): train acc 99 % at step 600 (memorisation), test acc 1.2 %
at step 200 → 99 % at step 2,100 → 100 % at 3,000 (grokking). The features collapse: D_eff(ρ)
(T Eq. 2.6) 61 → 16, ρ_k/ρ_1 falls ~12× from k = 14 to 16 and the quality Π*(p) rises 0.04 → 0.17.
D_LR on the logits, however, goes 0.36 (step 200) → 0.57 (step 3000), i.e. it *rises* across
grokking instead of the paper's 0.51 → 0.11: with cross-entropy the logits keep ~69 numerically
non-zero directions (dim Ĥ) while Φ concentrates on ~14, and D_LR weighs all r directions equally.
Paper (seed 001 table): D_LR 0.51 at step 200 → 0.11 at step 3000, test acc 5.2 % → 99.8 %.

Deviations from the paper's code: minibatches are drop-last (9 steps per epoch of the 4,656
training equations instead of torch's 10 with a short last batch); the readout has p outputs
(the answer tokens) instead of p + 2 (teddykoker also scores the never-correct "∘" and "="
tokens); seed 000 App. F's table lists the optimizer and epochs but its weight-decay entry is
lost in the text extraction, so λ = 1 follows teddykoker/grokking's default.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

NAME = "grokking-transformer"
DESCRIPTION = "seed 000 Fig 4: 2-layer transformer groks mod-p division; D_LR drops across it"
PAPER = {
    "dlr_before": 0.51,
    "dlr_after": 0.11,
    "test_acc_before": 0.052,
    "test_acc_after": 0.998,
}

_CURVES = ("step", "train_acc", "test_acc", "train_loss", "test_loss", "dlr_train", "dlr_test")
_DECOMPOSITION_FIELDS = (
    "rho",
    "relative_intensity",
    "cum_quality",
    "cum_utilization",
    "d_eff_rho",
    "d_eff_rho_adjusted",
    "d_eff_quality",
    "d_eff_utilization",
    "dlr",
    "dim_learned",
    "dim_target",
)


@dataclasses.dataclass(frozen=True)
class Config:
    """Grokking of a 2-layer transformer on a ∘ b = a·b⁻¹ mod p (seed 000 App. F, Fig 4).

    The defaults are the paper's setting (the small CPU scale runs it unchanged).

    Attributes:
      seed: PRNG seed of the initialisation, the train/test split and the minibatch order.
      p: prime modulus (97); inputs are the tokens "a ∘ b =" (vocabulary p + 2).
      train_fraction: share of the p(p − 1) equations used for training (1/2 → 4,656 for p = 97).
      num_layers: transformer blocks (2).
      d_model: residual width d (128) = feature dimension of Φ.
      num_heads: attention heads (4).
      loss: ``'ce'`` (teddykoker/grokking's cross-entropy, default) or ``'mse'`` on one-hot
        targets (seed 000 App. F.4 says all its models were trained with MSE, scale 1 for Fig 4;
        with λ = 1 it learns far more slowly here: train acc 3 % at step 600).
      batch_size: minibatch size (512).
      lr: AdamW learning rate (1e-3).
      b1: AdamW β₁ (0.9).
      b2: AdamW β₂ (0.98).
      weight_decay: decoupled weight decay λ (1.0, teddykoker/grokking; torch AdamW semantics).
      warmup_steps: linear learning-rate warm-up from 0 (10 steps).
      steps: optimizer steps (3,000: the paper's "after grokking" point).
      log_every: steps between logged accuracy / D_LR points (also at step 0 and the end).
      eval_size: at most this many train / test equations are evaluated at each log point
        (8,192 ≥ 4,656: the full sets for p = 97).
      decomposition_steps: steps of the feature decomposition, "before" and "after" grokking
        (the paper's 200 and 3000); each a multiple of ``log_every`` and ≤ ``steps``.
      checkpoint_every: orbax checkpoint period (0: none); ``--resume`` continues from it.
    """

    seed: int = 0
    p: int = 97
    train_fraction: float = 0.5
    num_layers: int = 2
    d_model: int = 128
    num_heads: int = 4
    loss: str = "ce"
    batch_size: int = 512
    lr: float = 1e-3
    b1: float = 0.9
    b2: float = 0.98
    weight_decay: float = 1.0
    warmup_steps: int = 10
    steps: int = 3000
    log_every: int = 50
    eval_size: int = 8192
    decomposition_steps: tuple[int, ...] = (200, 3000)
    checkpoint_every: int = 500


SCALES = {
    "small": Config(),
    "paper": Config(steps=10_000, log_every=10, checkpoint_every=1000),
}


def _check(config: Config) -> None:
    if len(config.decomposition_steps) != 2:
        raise ValueError(
            "decomposition_steps must be two steps (before, after grokking), got "
            f"{config.decomposition_steps}"
        )
    for s in config.decomposition_steps:
        if not 0 <= s <= config.steps or s % config.log_every:
            raise ValueError(
                f"decomposition_steps entry {s} must be a multiple of log_every="
                f"{config.log_every} in [0, steps={config.steps}]"
            )


def _decompose(model, data) -> dict:
    """Feature decomposition with Nyström fit on the training set, evaluated on the test set."""
    from flax import nnx

    from metrics import feature_decomposition

    @nnx.jit
    def forward(m, x):
        feats = m.features(x)
        return feats, m.head(feats)

    phi_fit, _ = forward(model, jnp.asarray(data.x_train))
    phi_eval, out_eval = forward(model, jnp.asarray(data.x_test))
    targets = np.eye(data.num_classes, dtype=np.float32)[data.y_test]
    res = feature_decomposition(phi_fit, phi_eval, out_eval, targets)
    return {k: np.asarray(getattr(res, k)).tolist() for k in _DECOMPOSITION_FIELDS}


def run(config: Config, run_dir: Path) -> dict:
    """Train, log accuracy and D_LR (train/test), decompose the features before and after.

    Returns:
      ``summary`` (headline numbers, keys of ``PAPER`` included), ``curves`` (per log point)
      and ``decomposition`` (step → Π*, Π̂, ρ_k/ρ_1, D_eff, D_LR on the test set).
    """
    from flax import nnx

    from metrics import dlr
    from nets import TrainConfig, Transformer, train
    from nets.data import load

    _check(config)
    run_dir = Path(run_dir)
    data = load(
        "modular_division", p=config.p, train_fraction=config.train_fraction, seed=config.seed
    )
    model = Transformer(
        config.p + 2,
        num_layers=config.num_layers,
        d_model=config.d_model,
        num_heads=config.num_heads,
        num_classes=config.p,
        rngs=nnx.Rngs(config.seed),
    )
    tc = TrainConfig(
        loss=config.loss,
        optimizer="adamw",
        lr=config.lr,
        b1=config.b1,
        b2=config.b2,
        weight_decay=config.weight_decay,
        warmup_steps=config.warmup_steps,
        batch_size=config.batch_size,
        steps=config.steps,
    )
    decomp_dir = run_dir / "decomposition"
    decomp_dir.mkdir(parents=True, exist_ok=True)

    def callback(record: dict, trained) -> None:
        # Saved as it is computed, so a resumed run keeps the decompositions of earlier steps.
        step = int(record["step"])
        if step in config.decomposition_steps:
            out = _decompose(trained, data)
            (decomp_dir / f"step{step}.json").write_text(json.dumps(out))

    t0 = time.perf_counter()
    _, hist = train(
        model,
        data,
        tc,
        key=jax.random.key(config.seed),
        log_every=config.log_every,
        eval_size=config.eval_size,
        metrics={"dlr": lambda feats, outputs: float(dlr(feats, outputs))},
        callback=callback,
        run_dir=run_dir / "train",
        checkpoint_every=config.checkpoint_every,
        resume=True,
        progress=True,
    )
    wall = time.perf_counter() - t0
    curves = {k: hist.column(k).tolist() for k in _CURVES}
    decomposition = {
        str(s): json.loads((decomp_dir / f"step{s}.json").read_text())
        for s in config.decomposition_steps
    }
    summary = _summarise(curves, config)
    summary.update(
        n_train=len(data.x_train),
        train_seconds=hist.train_time,
        seconds_per_step=hist.train_time / max(config.steps - 1, 1),
        wall_seconds=wall,
    )
    for tag, s in zip(("before", "after"), config.decomposition_steps, strict=True):
        d = decomposition[str(s)]
        summary[f"d_eff_rho_{tag}"] = d["d_eff_rho_adjusted"]
        summary[f"dim_learned_{tag}"] = d["dim_learned"]
    return {"summary": summary, "curves": curves, "decomposition": decomposition}


def _first_step(steps: np.ndarray, values: np.ndarray, level: float) -> float | None:
    hit = np.nonzero(values >= level)[0]
    return float(steps[hit[0]]) if hit.size else None


def _summarise(curves: dict, config: Config) -> dict:
    """Headline numbers: D_LR and accuracies at the two decomposition steps, grokking delay."""
    steps = np.asarray(curves["step"])
    at = {s: int(np.nonzero(steps == s)[0][0]) for s in config.decomposition_steps}
    before, after = (at[s] for s in config.decomposition_steps)
    out = {
        "step_before": config.decomposition_steps[0],
        "step_after": config.decomposition_steps[1],
    }
    for tag, i in (("before", before), ("after", after)):
        out[f"dlr_{tag}"] = curves["dlr_test"][i]
        out[f"dlr_train_{tag}"] = curves["dlr_train"][i]
        out[f"test_acc_{tag}"] = curves["test_acc"][i]
        out[f"train_acc_{tag}"] = curves["train_acc"][i]
    out["dlr_ratio"] = out["dlr_before"] / max(out["dlr_after"], 1e-12)
    out["memorised_step"] = _first_step(steps, np.asarray(curves["train_acc"]), 0.99)
    out["grokked_step"] = _first_step(steps, np.asarray(curves["test_acc"]), 0.99)
    out["final_test_acc"] = curves["test_acc"][-1]
    out["final_dlr"] = curves["dlr_test"][-1]
    return out


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``grokking.png`` (accuracy and D_LR vs step, log-x) and ``decomposition.png``."""
    import matplotlib.pyplot as plt

    from lrrich.io import save_figure
    from metrics import plot_feature_decomposition

    c, s = results["curves"], results["summary"]
    steps = np.asarray(c["step"], dtype=float)
    shown = steps > 0  # log-x
    marks = (s["step_before"], s["step_after"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), constrained_layout=True)
    for key, label in (("train_acc", "train"), ("test_acc", "test")):
        axes[0].plot(steps[shown], np.asarray(c[key])[shown], label=label)
    for key, label in (("dlr_train", "train"), ("dlr_test", "test")):
        axes[1].plot(steps[shown], np.asarray(c[key])[shown], label=label)
    axes[0].plot(
        [200, 3000],
        [PAPER["test_acc_before"], PAPER["test_acc_after"]],
        "k*",
        ms=9,
        label="paper (test)",
    )
    axes[1].plot([200, 3000], [PAPER["dlr_before"], PAPER["dlr_after"]], "k*", ms=9, label="paper")
    for ax in axes:
        for m in marks:
            ax.axvline(m, color="gray", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("step")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
    axes[0].set(ylabel="accuracy", title="accuracy")
    axes[1].set(ylabel="$D_{LR}$", title="$D_{LR}$ (0 = richest)")
    fig.suptitle(
        f"D_LR {s['dlr_before']:.2f} (step {marks[0]}) → {s['dlr_after']:.2f} (step {marks[1]}); "
        f"test acc {s['test_acc_before']:.1%} → {s['test_acc_after']:.1%}",
        fontsize=9,
    )
    paths = [save_figure(fig, run_dir / "grokking.png")]

    decomp = {
        f"step {step} ({tag})": results["decomposition"][str(step)]
        for tag, step in zip(("before", "after"), marks, strict=True)
    }
    fig = plot_feature_decomposition(decomp)
    paths.append(save_figure(fig, run_dir / "decomposition.png"))
    return paths
