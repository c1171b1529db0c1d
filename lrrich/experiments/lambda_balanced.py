"""P §6.1 / App. G (Theorem G.2, Fig 6a): λ-balanced linear networks turn from sigmoidal to
exponential modes as λ grows, and from rich to lazy.

Mode transition: a square network (d = h = c = 3) on Σ_yx = diag(σ) from a small, unaligned
λ-balanced init; the mode strengths (W₂W₁)_ii/σ_i against t for several λ, the closed form
:func:`sims.lambda_balanced.solve` (dashed) over plain gradient descent on W₁, W₂ (solid). At
λ = 0 the modes are sigmoidal and learned one after the other (Saxe); as λ grows they become the
exponential saturation of a linear model (P Eq 69–70). Phase diagram: the NTK kernel distance
S(0, t_end) over relative scale λ × absolute scale (:func:`sims.lambda_balanced.phase_diagram`),
with the final loss. "Absolute scale" is ``balanced_init``'s ``scale`` (the size of the balanced
part of the weights): the paper's definition was lost in extraction.

Command: ``lrrich run lambda-balanced`` (one exact computation, no seeds).
Expected: S ≈ 0.27 along λ = 0 at every absolute scale (rich), S < 0.01 where |λ| ≫ scale² (lazy),
and gradient descent within 3.6e-3 of the closed form (the O(lr) discretisation error).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from lrrich.claims import Claim, Less, Value, measured
from lrrich.io import save_figure
from sims import lambda_balanced as lb
from sims import simulate

NAME = "lambda-balanced"
DESCRIPTION = "P §6.1/App. G: sigmoidal→exponential modes as λ grows; NTK phase diagram"
PAPER = {"figure": "position paper Figure 6(a)", "rich region": "small |λ| (balanced layers)"}


@dataclasses.dataclass(frozen=True)
class Config:
    seed: int = 0
    sigmas: tuple[float, ...] = (3.0, 2.0, 1.0)  # singular values of Σ_yx = diag(σ)
    lams: tuple[float, ...] = (0.0, 1.0, 4.0, 16.0)  # λ of the mode-transition panels
    init_scale: float = 0.01  # absolute scale of the mode-transition init
    t_end: float = 8.0  # training time of the mode-transition panels
    lr: float = 1e-3  # gradient-descent learning rate (t = steps · lr)
    n_points: int = 200  # saved times per trajectory
    grid_lams: tuple[float, ...] = tuple(float(x) for x in np.linspace(-10.0, 10.0, 21))
    grid_scales: tuple[float, ...] = tuple(float(x) for x in np.logspace(-2.0, 1.0, 13))
    grid_t_end: float = 6.0  # training time of the phase diagram (small inits still learning)


SCALES = {"small": Config(), "paper": Config(n_points=500, lr=2e-4)}


def run(config: Config, run_dir: Path) -> dict:
    """The mode strengths, closed form and gradient descent, per λ; the (λ, scale) phase diagram."""
    sig = jnp.diag(jnp.asarray(config.sigmas, dtype=jnp.float64))
    k = len(config.sigmas)
    key = jax.random.key(config.seed)
    lams = jnp.asarray(config.lams, dtype=jnp.float64)
    inits = jax.vmap(lambda lam: lb.balanced_init(key, k, k, k, config.init_scale, lam))(lams)
    every = max(1, round(config.t_end / config.lr / config.n_points))
    n_steps = every * config.n_points
    t = jnp.arange(config.n_points + 1) * every * config.lr
    theory = jax.vmap(lambda a, b: lb.solve(a, b, sig, t).network)(*inits)
    gd = jax.jit(jax.vmap(lambda a, b: _gradient_descent(a, b, sig, config.lr, n_steps, every)))(
        *inits
    )
    modes_theory = jnp.diagonal(theory, axis1=-2, axis2=-1) / sig.diagonal()
    modes_gd = jnp.diagonal(gd, axis1=-2, axis2=-1) / sig.diagonal()
    pd = lb.phase_diagram(
        key,
        sig,
        jnp.asarray(config.grid_lams, dtype=jnp.float64),
        jnp.asarray(config.grid_scales, dtype=jnp.float64),
        k,
        config.grid_t_end,
    )
    dist = np.asarray(pd.kernel_distance)
    i0 = int(np.argmin(np.abs(np.asarray(config.grid_lams))))
    summary = {
        "max |theory - GD| mode strength": float(jnp.max(jnp.abs(modes_theory - modes_gd))),
        "kernel distance at lambda=0 (min over scales)": float(dist[i0].min()),
        "kernel distance at max |lambda|, smallest scale": float(max(dist[0, 0], dist[-1, 0])),
        "kernel distance max over grid": float(dist.max()),
    }
    return {
        "summary": summary,
        "t": t,
        "lams": config.lams,
        "sigmas": config.sigmas,
        "modes_theory": modes_theory,
        "modes_gd": modes_gd,
        "grid_lams": config.grid_lams,
        "grid_scales": config.grid_scales,
        "kernel_distance": dist,
        "loss": np.asarray(pd.loss),
        "measured": _measured(summary, config),
    }


def _gradient_descent(W1, W2, sig, lr, n_steps, every):
    """Plain GD on the raw weights (``lambda_balanced.loss``); W₂W₁ saved every ``every`` steps."""
    sim = simulate(lb.loss, {"W1": W1, "W2": W2}, sig, lr=lr, n_steps=n_steps, every=every)
    return sim.params["W2"] @ sim.params["W1"]


def _measured(summary: dict, config: Config) -> dict:
    """The one exact computation the claims read (:func:`lrrich.claims.measured`): gradient
    descent against the closed form, and the kernel distance at λ = 0 (the smallest over all
    absolute scales) and at the largest |λ| (smallest scale)."""
    return measured(
        {
            "gd_error": [summary["max |theory - GD| mode strength"]],
            "kernel_distance_balanced": [summary["kernel distance at lambda=0 (min over scales)"]],
            "kernel_distance_unbalanced": [
                summary["kernel distance at max |lambda|, smallest scale"]
            ],
        },
        exact=True,
        dataset=f"Σ_yx = diag({', '.join(f'{s:g}' for s in config.sigmas)})",
        scale=f"lambdas {', '.join(f'{v:g}' for v in config.lams)}, GD lr {config.lr:g}, "
        f"t = {config.t_end:g}; phase diagram {len(config.grid_lams)} lambdas x "
        f"{len(config.grid_scales)} scales, t = {config.grid_t_end:g}",
    )


CLAIMS = (
    Claim(
        "gd-vs-closed-form",
        "P App. G Theorem G.2, §6.1",
        "the exact dynamics of a λ-balanced square linear network (Theorem G.2); 'smaller λ "
        "(balanced layers) leads to nonlinear dynamics similar to greedy dynamics'",
        "mode strengths (W₂W₁)ᵢᵢ/σᵢ, max error of gradient descent against the closed form",
        "exact",
        Value("gd_error", 0.0, "gd_discretisation"),
        paper="exact solution",
    ),
    Claim(
        "rich-to-lazy",
        "P App. G Fig 6(a)",
        "larger weight imbalance (in any direction) leads the transition from the rich to the "
        "lazy regime in square linear neural networks",
        "NTK kernel distance S(0, t_end): largest |λ| (smallest scale) below λ = 0 (smallest "
        "over every scale)",
        "exact",
        Less("kernel_distance_unbalanced", "kernel_distance_balanced"),
        paper="rich (large) at λ = 0, lazy (small) at large |λ|",
    ),
)
"""P §6.1 / App. G as one exact computation (fixed seed, no training noise)."""


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``modes_vs_lambda.png`` (mode strengths vs t per λ) and ``phase_diagram.png``."""
    import matplotlib.pyplot as plt

    t = np.asarray(results["t"])
    th = np.asarray(results["modes_theory"])
    gd = np.asarray(results["modes_gd"])
    lams = results["lams"]
    fig, axes = plt.subplots(1, len(lams), figsize=(3.2 * len(lams), 3.0), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, lam, a, b in zip(axes, lams, th, gd, strict=True):
        for i, s in enumerate(results["sigmas"]):
            ax.plot(t, b[:, i], lw=2, alpha=0.6, label=f"σ={s:g} (GD)")
            ax.plot(t, a[:, i], "--", color="k", lw=1)
        ax.set(title=f"λ = {lam:g}", xlabel="t")
    axes[0].set_ylabel("mode strength (W₂W₁)ᵢᵢ / σᵢ")
    axes[0].legend(fontsize=7, title="dashed: exact", title_fontsize=7)
    paths = [save_figure(fig, Path(run_dir) / "modes_vs_lambda.png")]

    lam_grid = np.asarray(results["grid_lams"])
    sc = np.asarray(results["grid_scales"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, key, label in (
        (axes[0], "kernel_distance", "log₁₀ NTK kernel distance S(0, t_end)"),
        (axes[1], "loss", "log₁₀ final loss"),
    ):
        z = np.log10(np.maximum(np.asarray(results[key]), 1e-300)).T
        im = ax.pcolormesh(lam_grid, sc, z, shading="nearest", cmap="viridis")
        ax.set(yscale="log", xlabel="relative scale λ", ylabel="absolute scale")
        ax.set_title(label, fontsize=9)
        fig.colorbar(im, ax=ax)
    paths.append(save_figure(fig, Path(run_dir) / "phase_diagram.png"))
    return paths
