"""P §6.1 / App. G (Theorem G.2, Fig 6a): λ-balanced linear networks turn from sigmoidal to
exponential modes as λ grows, and from rich to lazy.

A square network (d = h = c = 3) on Σ_yx = diag(σ) from a small λ-balanced init: the mode
strengths (W₂W₁)_ii/σ_i against t per λ, closed form (dashed) over gradient descent (solid),
sigmoidal at λ = 0 (Saxe), exponential as λ grows (P Eq 69–70); and the NTK kernel distance
S(0, t_end) over relative scale λ × absolute scale, ``balanced_init``'s ``scale`` (the paper's
definition was lost in extraction).

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
    k, key = len(config.sigmas), jax.random.key(config.seed)
    init = lambda lam: lb.balanced_init(key, k, k, k, config.init_scale, lam)
    inits = jax.vmap(init)(jnp.asarray(config.lams, dtype=jnp.float64))
    every = max(1, round(config.t_end / config.lr / config.n_points))  # steps between saves
    t = jnp.arange(config.n_points + 1) * every * config.lr
    theory = jax.vmap(lambda a, b: lb.solve(a, b, sig, t).network)(*inits)
    n_steps = every * config.n_points
    gd = jax.jit(jax.vmap(lambda a, b: _gradient_descent(a, b, sig, config.lr, n_steps, every)))
    modes_theory = jnp.diagonal(theory, axis1=-2, axis2=-1) / sig.diagonal()
    modes_gd = jnp.diagonal(gd(*inits), axis1=-2, axis2=-1) / sig.diagonal()
    grids = (jnp.asarray(g, dtype=jnp.float64) for g in (config.grid_lams, config.grid_scales))
    pd = lb.phase_diagram(key, sig, *grids, k, config.grid_t_end)
    dist = np.asarray(pd.kernel_distance)
    i0 = int(np.argmin(np.abs(np.asarray(config.grid_lams))))
    summary = {
        "max |theory - GD| mode strength": float(jnp.max(jnp.abs(modes_theory - modes_gd))),
        "kernel distance at lambda=0 (min over scales)": float(dist[i0].min()),
        "kernel distance at max |lambda|, smallest scale": float(max(dist[0, 0], dist[-1, 0])),
        "kernel distance max over grid": float(dist.max()),
    }
    return {"summary": summary, "t": t, "lams": config.lams, "sigmas": config.sigmas,
            "modes_theory": modes_theory, "modes_gd": modes_gd, "grid_lams": config.grid_lams,
            "grid_scales": config.grid_scales, "kernel_distance": dist,
            "loss": np.asarray(pd.loss), "measured": _measured(summary, config)}  # fmt: skip


def _gradient_descent(W1, W2, sig, lr, n_steps, every):
    """Plain GD on the raw weights (``lambda_balanced.loss``); W₂W₁ saved every ``every`` steps."""
    sim = simulate(lb.loss, {"W1": W1, "W2": W2}, sig, lr=lr, n_steps=n_steps, every=every)
    return sim.params["W2"] @ sim.params["W1"]


def _measured(summary: dict, config: Config) -> dict:
    """The one exact computation the claims read: GD against the closed form; the kernel distance
    at λ = 0 (the smallest over the absolute scales) and at the largest |λ| (smallest scale)."""
    values = {
        "gd_error": "max |theory - GD| mode strength",  # field → its summary key
        "kernel_distance_balanced": "kernel distance at lambda=0 (min over scales)",
        "kernel_distance_unbalanced": "kernel distance at max |lambda|, smallest scale",
    }
    return measured(
        {field: [summary[key]] for field, key in values.items()}, exact=True,
        dataset=f"Σ_yx = diag({', '.join(f'{s:g}' for s in config.sigmas)})",
        scale=f"lambdas {', '.join(f'{v:g}' for v in config.lams)}, GD lr {config.lr:g}, "
        f"t = {config.t_end:g}; phase diagram {len(config.grid_lams)} lambdas x "
        f"{len(config.grid_scales)} scales, t = {config.grid_t_end:g}",
    )  # fmt: skip


CLAIMS = (
    Claim("gd-vs-closed-form", "P App. G Theorem G.2, §6.1",
          "the exact dynamics of a λ-balanced square linear network (Theorem G.2); 'smaller λ "
          "(balanced layers) leads to nonlinear dynamics similar to greedy dynamics'",
          "mode strengths (W₂W₁)ᵢᵢ/σᵢ, max error of gradient descent against the closed form",
          "exact", Value("gd_error", 0.0, "gd_discretisation"), paper="exact solution"),
    Claim("rich-to-lazy", "P App. G Fig 6(a)",
          "larger weight imbalance (in any direction) leads the transition from the rich to the "
          "lazy regime in square linear neural networks",
          "NTK kernel distance S(0, t_end): largest |λ| (smallest scale) below λ = 0 (smallest "
          "over every scale)",
          "exact", Less("kernel_distance_unbalanced", "kernel_distance_balanced"),
          paper="rich (large) at λ = 0, lazy (small) at large |λ|"),
)  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``modes_vs_lambda.png`` (mode strengths vs t per λ) and ``phase_diagram.png``."""
    import matplotlib.pyplot as plt

    t, th, gd = (np.asarray(results[k]) for k in ("t", "modes_theory", "modes_gd"))
    lams = results["lams"]
    fig, axes = plt.subplots(1, len(lams), figsize=(3.2 * len(lams), 3.0), sharey=True,
                             squeeze=False)  # fmt: skip
    for ax, lam, a, b in zip(axes[0], lams, th, gd, strict=True):
        for i, s in enumerate(results["sigmas"]):
            ax.plot(t, b[:, i], lw=2, alpha=0.6, label=f"σ={s:g} (GD)")
            ax.plot(t, a[:, i], "--", color="k", lw=1)
        ax.set(title=f"λ = {lam:g}", xlabel="t")
    axes[0, 0].set_ylabel("mode strength (W₂W₁)ᵢᵢ / σᵢ")
    axes[0, 0].legend(fontsize=7, title="dashed: exact", title_fontsize=7)
    paths = [save_figure(fig, Path(run_dir) / "modes_vs_lambda.png")]

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    labels = {"kernel_distance": "log₁₀ NTK kernel distance S(0, t_end)",
              "loss": "log₁₀ final loss"}  # fmt: skip
    for ax, (key, label) in zip(axes, labels.items(), strict=True):
        z = np.log10(np.maximum(np.asarray(results[key]), 1e-300)).T
        im = ax.pcolormesh(results["grid_lams"], results["grid_scales"], z, shading="nearest")
        ax.set(yscale="log", xlabel="relative scale λ", ylabel="absolute scale")
        ax.set_title(label, fontsize=9)
        fig.colorbar(im, ax=ax)
    return paths + [save_figure(fig, Path(run_dir) / "phase_diagram.png")]
