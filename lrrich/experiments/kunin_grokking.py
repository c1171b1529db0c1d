"""K App. D.3 / Fig 12: time to grokking against the embedding balance α and the output scale τ.

K (Fig 6d, Fig 12) trains a one-layer transformer on modular division (Power et al.) over a
(α, τ) grid: the embeddings ÷α at initialisation (α > 1 *upstream*), the logits ×τ with the
learning rate ÷τ² (Kumar et al.; small τ richer). It reports the steps until the training and
the test accuracy pass 99 % and finds the fastest grokking in the *unbalanced rich* corner
(large α, small τ). Two models (``Config.model``): ``'transformer'`` (paper;
:class:`nets.Transformer`, one post-LN block, ``embed_std = 1/α``: PyTorch's N(0, 1) embeddings
÷α) and ``'mlp'`` (small scale; one hidden ReLU layer on one-hot (a ‖ b), whose first layer is
the embedding of the two tokens: :func:`nets.balance_layers` divides it by α and multiplies the
readout by α, the function at initialisation unchanged). τ is :class:`nets.TrainConfig`'s
``output_scale`` with ``lr = lr₀/τ²``.

Command: ``lrrich run kunin-grokking`` (MLP, p = 97, the corners α ∈ {1, 10} × τ ∈ {0.5, 1.5}
that the claims read, three seeds, 6,000 AdamW steps each); ``--scale paper`` is K's transformer
on the 5 × 5 grid with 5 seeds and 30,000 steps (an accelerator).
Expected (seeds 0 / 1 / 2): every run fits; at τ = 0.5 the test accuracy jumps from ~1 % to 99 %
at 1,200 / 1,250 / 1,200 steps for α = 10 and 1,450 / 1,300 / 1,300 for α = 1, while at τ = 1.5
one run of six groks within the budget: τ = 0.5 groks in 1,283 ± 38 steps against ≥ 5,975 ± 43
at τ = 1.5. The α gaps are one to five log intervals, so the α ordering asks for five seeds
(``--set n_seeds=5``: α = 10 in 1,240 ± 42 steps against 1,350 ± 71).
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import jax
import numpy as np

from lrrich.claims import Claim, Less, Premise, measured
from lrrich.experiments import _measure, _presets

NAME = "kunin-grokking"
DESCRIPTION = (
    "K App. D.3 / Fig 12: steps to grok on modular division over embedding balance α "
    "and output scale τ"
)
PAPER = {
    "fastest_grid_point": "large α (upstream), small τ: 'fastest grokking in an unbalanced "
    "rich setting' (Fig 12B)",
}


@dataclasses.dataclass(frozen=True)
class Config(_presets.StepTraining):
    """K App. D.3 (``SCALES["paper"]``) and the small-scale MLP.

    K: modular division mod 97, half of the 9,312 equations for training, Power et al.'s code with
    one transformer layer (d = 128, 4 heads, post-LN), CE, α ∈ {0.1, 0.3, 1, 3, 10}, τ ∈ {0.5,
    0.75, 1, 1.25, 1.5}, 5 seeds, at most 30,000 steps, time = first step with accuracy ≥ 99 %.
    The code base's hyper-parameters (not restated in K) are teddykoker/grokking's, the
    :class:`~lrrich.experiments._presets.StepTraining` defaults (AdamW, β = (0.9, 0.98), weight
    decay 1, 10 warm-up steps, batch 512). Here ``lr`` is lr₀ at τ = 1 (small scale 3e-3: with
    1e-3 the MLP does not grok within 6,000 steps), ``steps`` the budget per run, ``log_every``
    the resolution of the times and ``seed`` the first seed (the data split is fixed).

    Attributes:
      n_seeds: random initialisations per grid point.
      p: prime modulus; train_fraction: share of the p(p − 1) equations used for training.
      model: ``'mlp'`` or ``'transformer'``; width: the MLP's hidden width.
      d_model, num_heads, num_layers: transformer size.
      alphas: embedding balances α (first layer ÷α).
      taus: output scales τ (logits ×τ, lr ÷τ²).
      threshold: accuracy that counts as fitted / generalised.
    """

    n_seeds: int = 3
    p: int = 97
    train_fraction: float = 0.5
    model: str = "mlp"
    width: int = 256
    d_model: int = 128
    num_heads: int = 4
    num_layers: int = 1
    alphas: tuple[float, ...] = (1.0, 10.0)
    taus: tuple[float, ...] = (0.5, 1.5)
    lr: float = 3e-3
    steps: int = 6000
    checkpoint_every: int = 2000
    threshold: float = 0.99


SCALES = {
    "small": Config(),
    "paper": Config(
        model="transformer",
        n_seeds=5,
        alphas=(0.1, 0.3, 1.0, 3.0, 10.0),
        taus=(0.5, 0.75, 1.0, 1.25, 1.5),
        lr=1e-3,
        steps=30000,
        log_every=100,
        checkpoint_every=5000,
    ),
}


def run(config: Config, run_dir: Path) -> dict:
    """Train every (α, τ, seed); the time-to-fit / time-to-grok grids and seed 0's curves."""
    from lrrich.trainer import train
    from nets.data import load

    if min(config.alphas, default=0) <= 0 or min(config.taus, default=0) <= 0:
        raise ValueError(f"alphas and taus must be non-empty and > 0, got {config}")
    if config.n_seeds < 1:
        raise ValueError(f"n_seeds must be ≥ 1, got {config.n_seeds}")
    encoding = "tokens" if config.model == "transformer" else "onehot"
    data = load("modular_division", p=config.p, train_fraction=config.train_fraction,
                encoding=encoding)  # fmt: skip
    shape = (len(config.alphas), len(config.taus), config.n_seeds)
    t_fit, t_gen, final_test = np.full(shape, np.nan), np.full(shape, np.nan), np.zeros(shape)
    curves = {}
    grid = itertools.product(
        enumerate(config.alphas), enumerate(config.taus), range(config.n_seeds)
    )
    for (i, alpha), (j, tau), k in grid:
        seed = config.seed + k
        tag = f"alpha={alpha:g},tau={tau:g},seed={seed}"
        model = make_model(config, alpha, seed, data.x_train.shape[1], data.num_classes)
        _, hist = train(model, data, tau_train_config(config, tau), key=jax.random.key(seed),
                        log_every=config.log_every, metrics={}, run_dir=run_dir / tag,
                        checkpoint_every=config.checkpoint_every, resume=True,
                        progress=True)  # fmt: skip
        steps = hist.column("step")
        t_fit[i, j, k] = time_to(steps, hist.column("train_acc"), config.threshold)
        t_gen[i, j, k] = time_to(steps, hist.column("test_acc"), config.threshold)
        final_test[i, j, k] = hist.final["test_acc"]
        if k == 0:
            curves[tag] = {c: hist.column(c).tolist() for c in ("step", "train_acc", "test_acc")}
    return {
        "summary": _summary(t_gen, final_test, config),
        "grid": {
            "alphas": list(config.alphas),
            "taus": list(config.taus),
            "budget": config.steps,
            "t_fit": t_fit.tolist(),  # (n_alpha, n_tau, n_seeds), NaN = not within budget
            "t_gen": t_gen.tolist(),
            "t_fit_mean": _censored(t_fit, config).mean(axis=2).tolist(),
            "t_gen_mean": _censored(t_gen, config).mean(axis=2).tolist(),
            "fraction_grokked": np.mean(~np.isnan(t_gen), axis=2).tolist(),
            "final_test_acc": final_test.mean(axis=2).tolist(),
        },
        "curves": curves,
        "measured": _measured(t_gen, config),
    }


def make_model(config: Config, alpha: float, seed: int, num_inputs: int, num_classes: int):
    """The network at embedding balance α (the two models: the module docstring)."""
    from flax import nnx

    from nets import MLP, Transformer, balance_layers

    if config.model == "transformer":
        return Transformer(
            config.p + 2,
            num_layers=config.num_layers,
            d_model=config.d_model,
            num_heads=config.num_heads,
            num_classes=num_classes,
            embed_std=1.0 / alpha,  # nn.Embedding's N(0, 1) divided by α (App. D.3)
            rngs=nnx.Rngs(seed),
        )
    if config.model == "mlp":
        mlp = MLP(num_inputs, (config.width,), num_classes, activation="relu", rngs=nnx.Rngs(seed))
        # on the model, not TrainConfig.layer_balance: one compiled program serves every α
        return balance_layers(mlp, alpha) if alpha != 1 else mlp
    raise ValueError(f"model must be 'mlp' or 'transformer', got {config.model!r}")


def tau_train_config(config: Config, tau: float):
    """AdamW with logits × τ and learning rate lr₀/τ² (Kunin et al. App. D.3, after Kumar et al.)."""
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    return _presets.train_config(config, loss="ce", lr=config.lr / tau**2, output_scale=tau)


def time_to(steps: np.ndarray, acc: np.ndarray, threshold: float) -> float:
    """First logged step with accuracy ≥ ``threshold``; NaN if never (censored at the budget)."""
    step = _measure.first_step(steps, acc, threshold)
    return float("nan") if step is None else step


def _censored(t: np.ndarray, config: Config) -> np.ndarray:
    """Times with the runs that never reach the threshold counted at the budget (a lower bound)."""
    return np.where(np.isnan(t), config.steps, t)


def _summary(t_gen: np.ndarray, final_test: np.ndarray, config: Config) -> dict:
    """The fastest, the α = τ = 1 and the slowest grid point, and the means over α and τ."""
    gen_mean = _censored(t_gen, config).mean(axis=2)
    i, j = np.unravel_index(np.argmin(gen_mean), gen_mean.shape)
    a1 = int(np.argmin(np.abs(np.log(np.asarray(config.alphas)))))
    t1 = int(np.argmin(np.abs(np.log(np.asarray(config.taus)))))
    summary = {
        "fastest_grid_point": f"α={config.alphas[i]:g}, τ={config.taus[j]:g}",
        "t_gen_fastest": float(gen_mean[i, j]),
        f"t_gen_alpha={config.alphas[a1]:g}_tau={config.taus[t1]:g}": float(gen_mean[a1, t1]),
        "t_gen_slowest": float(gen_mean.max()),
        "fraction_grokked": float(np.mean(~np.isnan(t_gen), axis=2).mean()),
        "mean_final_test_acc": float(final_test.mean()),
    }
    for a, alpha in enumerate(config.alphas):
        summary[f"t_gen_alpha={alpha:g}_mean_over_tau"] = float(gen_mean[a].mean())
    for t, tau in enumerate(config.taus):
        summary[f"t_gen_tau={tau:g}_mean_over_alpha"] = float(gen_mean[:, t].mean())
    return summary


def _measured(t_gen: np.ndarray, config: Config) -> dict:
    """The per-seed record the claims read: ``t_gen`` (n_alpha, n_tau, n_seeds) steps to 99 %
    test accuracy, censored at the budget (a slow run only understates the gap it stands on)."""
    t = _censored(t_gen, config)
    a_max = int(np.argmax(config.alphas))
    a1 = int(np.argmin(np.abs(np.log(np.asarray(config.alphas)))))
    t_min, t_max = int(np.argmin(config.taus)), int(np.argmax(config.taus))
    scale = (
        f"{config.model}, alphas {', '.join(f'{a:g}' for a in config.alphas)}, taus "
        f"{', '.join(f'{v:g}' for v in config.taus)}, {config.steps} steps, times logged every "
        f"{config.log_every} steps"
    )
    deviations = []
    if config.model != "transformer":
        deviations.append(
            "a one-hidden-layer ReLU MLP on one-hot (a ‖ b) instead of K's one-layer transformer"
        )
    if config.steps < 30_000:
        deviations.append(f"{config.steps:,} steps per run vs K's 30,000")
    values = {
        "t_gen_small_tau": t[:, t_min].mean(0),
        "t_gen_large_tau": t[:, t_max].mean(0),
        "t_gen_upstream": t[a_max, t_min],
        "t_gen_balanced": t[a1, t_min],
        "small_tau_groks": np.all(np.isfinite(t_gen[:, t_min]), axis=0).astype(float),
    }
    return measured(
        values,
        seeds=[config.seed + k for k in range(t.shape[2])],
        dataset=f"a / b mod {config.p}, train fraction {config.train_fraction:g}",
        scale=scale,
        deviations=deviations,
    )


_QUOTE = (
    "'We clearly see the fastest grokking in an unbalanced rich setting' (K Fig 12(B): large α "
    "upstream, small τ rich); an upstream initialization 'decreases the time to grokking in "
    "modular arithmetic' (K Fig 6(d))"
)
_GROKS = Premise(
    "small_tau_groks", ">=", 1, "every run at the smallest τ groks (99 % test) within the budget"
)
CLAIMS = (
    Claim(
        "tau-order",
        "K Fig 12(B)",
        _QUOTE,
        "steps to 99 % test accuracy, smallest τ vs largest τ (mean over α; runs that never "
        "grok counted at the budget)",
        "test",
        Less("t_gen_small_tau", "t_gen_large_tau"),
        paper="smaller τ (richer) groks faster",
        premise=(_GROKS,),
    ),
    Claim(
        "alpha-order",
        "K Fig 12(B), Fig 6(d)",
        _QUOTE,
        "steps to 99 % test accuracy at the smallest τ, largest α (upstream) vs α = 1",
        "test",
        Less("t_gen_upstream", "t_gen_balanced"),
        paper="larger α (upstream) groks faster",
        premise=(_GROKS,),
        seeds=5,
        note="grokking times are first logged steps (every log_every steps): a gap of one log "
        "interval still orders the two crossings, a gap of 0 does not; the α effect is a few "
        "log intervals, so its ordering asks for K's 5 seeds (--set n_seeds=5)",
    ),
)
"""K Fig 12(B) read as two orderings of per-seed grokking times (K: 5 seeds per grid point)."""


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``kunin_grokking.png`` (Fig 12 A/B heat maps + final test acc) and ``..._curves.png``."""
    import matplotlib.pyplot as plt

    from lrrich.io import save_figure

    g = results["grid"]
    alphas, taus = g["alphas"], g["taus"]
    panels = (
        ("t_fit_mean", "steps to train acc ≥ 99% (Fig 12A)", "viridis"),
        ("t_gen_mean", "steps to test acc ≥ 99% (Fig 12B)", "viridis"),
        ("final_test_acc", "final test accuracy", "magma"),
    )
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), layout="constrained")
    for ax, (key, title, cmap) in zip(axes, panels, strict=True):
        m, acc = np.array(g[key], dtype=float), key == "final_test_acc"
        hi = 1.0 if acc else float(g["budget"])
        im = ax.imshow(m, cmap=cmap, origin="lower", aspect="auto", vmin=0.0, vmax=hi)
        for (a, t), v in np.ndenumerate(m):
            text = f"{v:.3f}" if acc else f"≥{v:.0f}" if v >= g["budget"] else f"{v:.0f}"
            color = "k" if v / hi > 0.6 else "w"
            ax.text(t, a, text, ha="center", va="center", fontsize=8, color=color)
        ax.set_xticks(range(len(taus)), [f"{t:g}" for t in taus])
        ax.set_yticks(range(len(alphas)), [f"{a:g}" for a in alphas])
        ax.set(xlabel="output scale τ (logits ×τ, lr ÷τ²)", title=title)
        fig.colorbar(im, ax=ax, fraction=0.046)
    axes[0].set_ylabel("embedding balance α (first layer ÷α)")
    paths = [save_figure(fig, run_dir / "kunin_grokking.png")]

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
    for n, (tag, c) in enumerate(results["curves"].items()):
        color = plt.cm.viridis(n / max(len(results["curves"]) - 1, 1))
        axes[0].plot(c["step"], c["train_acc"], color=color, label=tag.rsplit(",", 1)[0])
        axes[1].plot(c["step"], c["test_acc"], color=color)
    axes[0].set(xlabel="step", ylabel="accuracy", title="train")
    axes[1].set(xlabel="step", title="test")
    axes[0].legend(fontsize=6, ncol=2)
    paths.append(save_figure(fig, run_dir / "kunin_grokking_curves.png"))
    return paths
