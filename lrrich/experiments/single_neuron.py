"""K Fig 3 and Fig 4: the single hidden neuron f(x) = a wᵀx, exact theory over gradient flow.

Fig 3: μ, φ and S(0, t) per balance δ = a² − ‖w‖², the (a, w) gradient flow against K Eq 16–17;
Fig 4a: the β = a w paths; Fig 4b: the interpolant reached from a rank-one X vs K Eq 72 and K
Theorem 3.1.

Command: ``lrrich run kunin-single-neuron`` (one exact computation, no seeds).
Expected: theory and simulation agree to ~1e-10; S(0, ∞) ≈ 0 upstream (δ ≫ 0), S jumps early when
balanced (δ = 0), late downstream (δ ≪ 0, t ≈ |δ|); in Fig 4b the interpolant moves from the
minimum-norm solution (δ ≫ 0) towards β₀'s direction (δ ≪ 0), as Eq 72 says.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from lrrich import io
from lrrich.claims import Claim, Holds, Value, measured
from sims import gradient_flow
from sims import single_neuron as sn

NAME = "kunin-single-neuron"
DESCRIPTION = (
    "K Fig 3-4: single neuron mu, phi, S(0,t) and beta paths vs delta; implicit bias (Eq 72)"
)


@dataclasses.dataclass(frozen=True)
class Config:
    """K Fig 3–4; the defaults are the small scale."""

    seed: int = 0  # PRNG seed of X, y and Fig 4b's rank-one X
    deltas: tuple[float, ...] = (-10.0, -1.0, 0.0, 1.0, 10.0)  # balances δ of Fig 3 / 4a
    beta0_angle: float = 0.45  # angle of β₀ from β*, in units of π (0.5: orthogonal)
    beta0_norm: float = 1.0  # ‖β₀‖
    n_samples: int = 5  # rows of the whitened X
    t_max: float = 100.0  # the last saved time
    n_times: int = 120  # saved times (t = 0, then log-spaced)
    bias_deltas: tuple[float, ...] = (-4.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 4.0)  # Fig 4b
    bias_beta0_norm: float = 0.5  # Fig 4b's ‖β₀‖
    bias_t_max: float = 200.0  # Fig 4b's last time


SCALES = {
    "paper": Config(deltas=(-10.0, -3.0, -1.0, -0.3, 0.0, 0.3, 1.0, 3.0, 10.0), n_times=300,
                    bias_deltas=tuple(float(x) for x in np.linspace(-4.0, 4.0, 33)))
}  # fmt: skip


def run(config: Config, run_dir: Path) -> dict:
    """Integrate the flows, evaluate the closed forms, and save everything the plots need."""
    kx, ky, kb = jax.random.split(jax.random.key(config.seed), 3)
    fig3, (bias, flips) = _trajectories(config, kx, ky), _implicit_bias(config, kb)
    sim, theory, reached = fig3["sim"], fig3["theory"], bias["reached"]
    err = lambda a, b: float(jnp.max(jnp.abs(a - b)))
    summary = {f"fig3_max_err_{k}": err(theory[k], sim[k]) for k in ("mu", "phi", "S")}
    summary.update(fig4a_max_err_beta=err(theory["beta"], sim["beta"]),
                   fig4b_max_err_eq72=err(bias["eq72"], reached),
                   fig4b_max_err_program=err(bias["program"], reached),
                   fig4b_max_residual=float(jnp.max(jnp.abs(reached @ bias["X"].T - bias["y"]))),
                   fig4b_sign_flips=flips)  # fmt: skip
    ends = zip(config.deltas, np.asarray(sim["S"][:, -1]), strict=True)
    summary.update({f"S_final_delta_{d:g}": float(v) for d, v in ends})
    return {"summary": summary, "measured": _measured(summary, config), **fig3, "bias": bias}


def _flows(beta0, deltas, t, X, y):
    """a₀ > 0 and w₀ per δ with a₀w₀ = β₀ and a₀² − ‖w₀‖² = δ (K Eq. 34, η_a = η_w = 1), and the
    raw (a, w) gradient flows of ½‖X a w − y‖² from them."""
    a0 = jnp.sqrt((jnp.sqrt(deltas**2 + 4.0 * (beta0 @ beta0)) + deltas) / 2.0)
    w0 = beta0 / a0[:, None]
    flow = jax.vmap(lambda a, w: gradient_flow(sn.loss, {"a": a, "w": w}, t, (X, y), atol=1e-16))
    return a0, w0, flow(a0, w0)


def _trajectories(config: Config, kx, ky) -> dict:
    """Fig 3 / 4a per δ, flow and closed form; X (n, 2) orthonormal, Xᵀy = β* a unit vector at π/4."""
    X, _ = jnp.linalg.qr(jax.random.normal(kx, (config.n_samples, 2)))
    beta_star = jnp.array([1.0, 1.0]) / jnp.sqrt(2.0)
    noise = jax.random.normal(ky, (config.n_samples,))
    y = X @ beta_star + noise - X @ (X.T @ noise)
    ang = jnp.pi * (0.25 + config.beta0_angle)
    beta0 = config.beta0_norm * jnp.array([jnp.cos(ang), jnp.sin(ang)])
    t = jnp.concatenate([jnp.zeros(1), jnp.geomspace(1e-3, config.t_max, config.n_times - 1)])
    deltas = jnp.asarray(config.deltas)
    a0, w0, sim = _flows(beta0, deltas, t, X, y)
    theory = jax.vmap(lambda a, w: sn.solve(a, w, beta_star, t))(a0, w0)
    mu_s, phi_s, S_s = jax.vmap(_mu_phi_S, (0, 0, None, None))(sim["a"], sim["w"], beta_star, X)
    _, _, S_t = jax.vmap(_mu_phi_S, (0, 0, None, None))(theory.a, theory.w, beta_star, X)
    sim = {"mu": mu_s, "phi": phi_s, "S": S_s, "beta": sim["a"][..., None] * sim["w"]}
    exact = {"mu": theory.mu, "phi": theory.phi, "S": S_t, "beta": theory.beta}
    return {"t": t, "deltas": deltas, "sim": sim, "theory": exact, "beta_star": beta_star}


def _implicit_bias(config: Config, key) -> tuple[dict, int]:
    """Fig 4b, rank-one X (1, 2): β paths per δ, their ends, K Eq 72, K Thm 3.1; sign flips of a."""
    X, y = jax.random.normal(key, (1, 2)), jnp.array([1.0])
    v = jnp.linalg.svd(X)[2][-1]  # unit null vector
    beta_min = jnp.linalg.pinv(X) @ y
    ang = jnp.pi * 0.6
    beta0 = config.bias_beta0_norm * jnp.array([jnp.cos(ang), jnp.sin(ang)])
    deltas = jnp.asarray(config.bias_deltas)
    t = jnp.concatenate([jnp.zeros(1), jnp.geomspace(1e-2, config.bias_t_max, 80)])
    a0, _, sim = _flows(beta0, deltas, t, X, y)
    paths = sim["a"][..., None] * sim["w"]
    reached = paths[:, -1]
    flips = np.asarray(sim["a"][:, -1] * a0 < 0)
    cases = list(zip(deltas, flips, strict=True))
    eq72, program = (jnp.stack([f(X, y, beta0, d, a_changes_sign=bool(s)) for d, s in cases])
                     for f in (sn.implicit_bias_1d, sn.implicit_bias))  # fmt: skip
    out = dict(deltas=deltas, X=X, y=y, v=v, beta_min=beta_min, beta0=beta0, paths=paths,
               reached=reached, eq72=eq72, program=program)  # fmt: skip
    out.update(alpha_reached=(reached - beta_min) @ v, alpha_eq72=(eq72 - beta_min) @ v)
    return out, int(flips.sum())


def _mu_phi_S(a, w, beta_star, X):
    """μ = a‖w‖, φ = cos∠(w, β*) and the kernel distance S(0, t) of the NTK on X."""
    nw = jnp.linalg.norm(w, axis=-1)
    K = sn.ntk(a, w, X)
    return a * nw, (w @ beta_star) / (nw * jnp.linalg.norm(beta_star)), sn.kernel_distance(K[0], K)


def _measured(summary: dict, config: Config) -> dict:
    errs = [summary[f"fig3_max_err_{k}"] for k in ("mu", "phi", "S")]
    deltas = sorted(config.deltas)  # down … upstream
    s_end = [summary[f"S_final_delta_{d:g}"] for d in deltas]
    ends = [f"S(0, t_max) {v:.2g} at δ = {d:g}" for d, v in zip(deltas, s_end, strict=True)]
    return measured(
        {"theory_flow_error": [max(*errs, summary["fig4a_max_err_beta"])],
         "eq72_error": [summary["fig4b_max_err_eq72"]],
         "S_falls_with_delta": [float(len(s_end) > 1 and np.all(np.diff(s_end) < 0))]},
        exact=True, dataset=f"whitened X, {config.n_samples} samples; rank-one X for Fig 4b",
        scale=f"deltas {', '.join(f'{d:g}' for d in config.deltas)}, t_max {config.t_max:g}; "
        f"{', '.join(ends)}",
    )  # fmt: skip


CLAIMS = (
    Claim("theory-flow", "K Fig 3, Fig 4 (left), Eq 16-17",
          "Our theoretical predictions (black dashed lines) agree with gradient flow simulations "
          "(solid lines)",
          "max error of μ, φ, S and β = a w, closed form vs the integrated gradient flow", "exact",
          Value("theory_flow_error", 0.0, "closed_form"), paper="agree"),
    Claim("implicit-bias", "K §3 Eq 72, Theorem 3.1, Fig 4 (right)",
          "the interpolant gradient flow reaches from a rank-one X minimises the δ-dependent "
          "implicit bias (Eq 72)",
          "max error of Eq 72 against the interpolant the flow reaches", "exact",
          Value("eq72_error", 0.0, "closed_form"), paper="agree"),
    Claim("kernel-distance-vs-delta", "K Fig 3",
          "For upstream initializations (δ ≫ 0) ... S remains near zero, indicative of the lazy "
          "regime. For balanced initializations (δ = 0) ... S quickly moves away from zero, "
          "indicative of the rich regime; downstream (δ ≪ 0): S remains small before a sudden "
          "transition towards one",
          "kernel distance S(0, t_max) falls strictly as δ grows (values in the scale column)",
          "exact", Holds("S_falls_with_delta", "S(0, t_max) strictly decreasing in δ"),
          paper="upstream lazy, balanced rich, downstream rich later"),
)  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """K Fig 3 (μ, φ, S vs t) and Fig 4 (β paths; implicit bias vs δ) from the saved results."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    def key(theory: str) -> list:  # line styles (colour is δ: the colour bar)
        return [Line2D([], [], color="0.25", lw=2, label="simulation: gradient flow of (a, w)"),
                Line2D([], [], color="k", ls="--", lw=0.9, label=f"theory: {theory}")]  # fmt: skip

    t, deltas = np.asarray(results["t"]), np.asarray(results["deltas"])
    sim, th = ({k: np.asarray(v) for k, v in results[r].items()} for r in ("sim", "theory"))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), layout="constrained")
    colors = _delta_colours(fig, axes[-1], deltas)
    ylabels = ("μ = a‖w‖ (signed size of β = a w)", "φ = cos∠(w, β*) (alignment with β*)",
               "S(0, t) (kernel distance from t = 0)")  # fmt: skip
    for name, ax, ylabel in zip(("mu", "phi", "S"), axes, ylabels, strict=True):
        for i, color in enumerate(colors):
            ax.plot(t[1:], sim[name][i, 1:], color=color, lw=2)
            ax.plot(t[1:], th[name][i, 1:], "k--", lw=0.9)
        ax.set(xscale="log", xlabel="t (gradient-flow time)", ylabel=ylabel)
    axes[0].legend(handles=key("exact solution (K Eq. 16–17)"), fontsize=7)
    fig.suptitle("K Fig 3: single neuron, simulation (solid) vs exact solution (dashed)")
    paths = [io.save_figure(fig, run_dir / "fig3_mu_phi_S.png")]

    fig, (ax, bx, cx) = plt.subplots(1, 3, figsize=(16, 4.8), layout="constrained")
    for bs, bt, color in zip(sim["beta"], th["beta"], _delta_colours(fig, ax, deltas), strict=True):
        ax.plot(bs[:, 0], bs[:, 1], color=color, lw=2)
        ax.plot(bt[:, 0], bt[:, 1], "k--", lw=0.9)
    ax.plot(*np.asarray(results["beta_star"]), "k*", ms=12, ls="")
    ax.set(
        aspect="equal", xlabel="β₁ (first coordinate of β = a w)", ylabel="β₂ (second coordinate)"
    )
    ax.set_title("(a) whitened X: β(t) from the same β₀", fontsize=10)
    star = Line2D([], [], color="k", marker="*", ms=10, ls="", label="β* = Xᵀy (target)")
    ax.legend(handles=[*key("exact β(t)"), star], fontsize=7)
    b = {k: np.asarray(v) for k, v in results["bias"].items()}
    colors = _delta_colours(fig, bx, b["deltas"])
    along = (b["paths"].reshape(-1, 2) - b["beta_min"]) @ b["v"]
    line = b["beta_min"] + np.array([along.min() - 0.2, along.max() + 0.2])[:, None] * b["v"]
    bx.plot(line[:, 0], line[:, 1], color="0.55", lw=1, label="Xβ = y (the interpolants)")
    for p, color in zip(b["paths"], colors, strict=True):
        bx.plot(p[:, 0], p[:, 1], color=color, lw=1.5)
    bx.plot(b["eq72"][:, 0], b["eq72"][:, 1], "ko", ms=4, label="theory: limit of K Eq. 72")
    bx.plot(*b["beta0"], "ks", ms=5, label="β₀ (start)")
    bx.plot([], [], color=colors[len(b["deltas"]) // 2], lw=1.5, label="simulation: gradient flow")
    bx.set(aspect="equal", xlabel="β₁", ylabel="β₂")
    bx.set_title(f"(b) rank-one X = {np.round(b['X'][0], 2)}, y = {b['y'][0]:g}", fontsize=10)
    cx.plot(b["deltas"], b["alpha_reached"], "o", color="C0", label="simulation: gradient flow")
    cx.plot(b["deltas"], b["alpha_eq72"], "k--", label="theory: K Eq. 72")
    cx.set(xlabel="δ (balance)", ylabel="α = vᵀ(β(∞) − β_min) (position along Xβ = y)")
    cx.set_title("(c) implicit bias vs δ", fontsize=10)
    for x in (bx, cx):
        x.legend(fontsize=7)
    fig.suptitle("K Fig 4: β = a w trajectories and the interpolant reached")
    return paths + [io.save_figure(fig, run_dir / "fig4_beta_implicit_bias.png")]


def _delta_colours(fig, ax, deltas: np.ndarray) -> np.ndarray:
    """One colour per δ, keyed by a colour bar beside ``ax`` with evenly spaced δ ticks."""
    import matplotlib as mpl

    colours = mpl.colormaps["plasma"](np.linspace(0.0, 0.85, len(deltas)))
    norm = mpl.colors.BoundaryNorm(np.arange(len(deltas) + 1) - 0.5, len(deltas))
    mappable = mpl.cm.ScalarMappable(norm=norm, cmap=mpl.colors.ListedColormap(colours))
    bar = fig.colorbar(mappable, ax=ax, ticks=np.arange(len(deltas)), fraction=0.06, pad=0.02)
    bar.ax.set_yticklabels([f"{d:g}" for d in deltas])
    bar.set_label("δ = a² − ‖w‖² (balance)")
    return colours
