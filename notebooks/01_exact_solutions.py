# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exact solutions explorer: theory over simulation
#
# Closed forms from `sims` against the numerical gradient flow of the raw parameters
# (`sims.gradient_flow`, diffrax at tight tolerances). Convention everywhere: unit learning rate on
# L = ½E[(f(x) − y)²]. Everything runs under `jax.enable_x64(True)`.
#
# 1. The single hidden neuron f(x) = a wᵀx across the balance δ = η_w a² − η_a‖w‖²
#    (Kunin et al. 2024, Eq. 14–17): upstream δ > 0 is lazy, δ = 0 rich, δ < 0 delayed rich.
# 2. The λ-balanced two-layer linear network across λ (position paper §6.1): sigmoidal
#    (Saxe) modes at λ ≈ 0, exponential (linear-model) modes at large |λ|.
# 3. Theory over discrete gradient descent in one call: `sims.simulate` runs GD with step η on a
#    model's own `loss` and returns it on the flow's time axis t = η·step; `sims.plot.overlay`
#    draws the exact solution over it.

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from sims import gradient_flow, lambda_balanced, plot, simulate, single_neuron

SMOKE = os.environ.get("LRRICH_NOTEBOOK_SMOKE") == "1"
N_T = 40 if SMOKE else 200
jax.config.update("jax_enable_x64", True)  # notebook-level choice: float64 for reference answers

# %% [markdown]
# ## 1. Single neuron: μ, φ and the kernel distance for several δ
# Same β₀ = a₀w₀ for every δ; only the split between a and w changes.

# %%
beta_star = jnp.array([1.0, 0.0])
beta0 = 0.05 * jnp.array([np.cos(0.45 * np.pi), np.sin(0.45 * np.pi)])
t = jnp.linspace(0.0, 30.0, N_T)


def init_for_delta(delta):
    """a₀, w₀ with a₀w₀ = β₀ and a₀² − ‖w₀‖² = δ (η_a = η_w = 1)."""
    b = float(jnp.linalg.norm(beta0))
    a0 = np.sqrt((delta + np.sqrt(delta**2 + 4 * b**2)) / 2)
    return jnp.asarray(a0), beta0 / a0


fig, axes = plt.subplots(1, 2, figsize=(10, 3.3))
for delta in (-1.0, 0.0, 1.0, 5.0):
    a0, w0 = init_for_delta(delta)
    exact = single_neuron.solve(a0, w0, beta_star, t)
    flow = gradient_flow(single_neuron.loss, {"a": a0, "w": w0}, t, beta_star)
    mu_flow = flow["a"] * jnp.linalg.norm(flow["w"], axis=-1)
    err = float(jnp.max(jnp.abs(exact.mu - mu_flow)))
    (line,) = axes[0].plot(t, exact.mu, "--", label=f"δ = {delta:g} (err {err:.0e})")
    axes[0].plot(t[::4], mu_flow[::4], ".", color=line.get_color())
    axes[1].plot(t, exact.phi, "--", color=line.get_color())
axes[0].set(xlabel="t", ylabel="μ = a‖w‖", title="theory (dashed) vs gradient flow (dots)")
axes[1].set(xlabel="t", ylabel="φ = cos(w, β*)")
axes[0].legend(fontsize=7)

# %% [markdown]
# ## 2. λ-balanced linear network: from sigmoidal to exponential modes
# Random *unaligned* λ-balanced inits (W₂ᵀW₂ − W₁W₁ᵀ = λI) of the same absolute scale; we plot
# the singular values of the network map W₂W₁(t) against the exact solution.

# %%
key = jax.random.key(0)
d, h, c = 4, 3, 3
U, _ = jnp.linalg.qr(jax.random.normal(jax.random.key(1), (c, c)))
V, _ = jnp.linalg.qr(jax.random.normal(jax.random.key(2), (d, c)))
sigma_yx = U @ jnp.diag(jnp.array([3.0, 2.0, 1.0])) @ V.T
t = jnp.linspace(0.0, 6.0, N_T)


fig, axes = plt.subplots(1, 3, figsize=(12, 3.2), sharey=True)
for ax, lam in zip(axes, (0.0, 2.0, 20.0), strict=True):
    W1, W2 = lambda_balanced.balanced_init(key, d, h, c, 1e-3, lam)
    sol = lambda_balanced.solve(W1, W2, sigma_yx, t)
    flow = gradient_flow(lambda_balanced.loss, {"W1": W1, "W2": W2}, t, sigma_yx, atol=1e-30)
    sv_exact = jnp.linalg.svd(sol.network, compute_uv=False)
    sv_flow = jnp.linalg.svd(flow["W2"] @ flow["W1"], compute_uv=False)
    err = float(jnp.max(jnp.abs(sol.network - flow["W2"] @ flow["W1"])))
    ax.plot(t, sv_exact, "--")
    ax.plot(t[::4], sv_flow[::4], "k.", ms=3)
    ax.set(title=f"λ = {lam:g}  (max err {err:.0e})", xlabel="t")
axes[0].set_ylabel("singular values of W₂W₁")

# %% [markdown]
# At λ = 0 each mode waits on a plateau and then rises sigmoidally (Saxe et al.); as λ grows the
# modes rise immediately and exponentially, as in a linear model — the lazy limit.
# The NTK moves accordingly: `Solution.kernel_distance` gives S(0, t) along the trajectory.

# %%
for lam in (0.0, 2.0, 20.0):
    W1, W2 = lambda_balanced.balanced_init(key, d, h, c, 1e-3, lam)
    dist = lambda_balanced.solve(W1, W2, sigma_yx, t).kernel_distance[-1]
    print(f"λ = {lam:5g}:  S(0, t_end) = {float(dist):.3f}")

# %% [markdown]
# ## 3. Theory over gradient descent, in one call each
# Gradient descent with step η on `single_neuron.loss` is forward Euler for the flow: step k sits at
# t = η·k. At η = 0.05 the iterates follow the closed form to O(η); the overlay shows both.

# %%
a0, w0 = init_for_delta(0.0)
sim = simulate(single_neuron.loss, {"a": a0, "w": w0}, beta_star, lr=0.05, n_steps=600, every=10)
exact = single_neuron.solve(a0, w0, beta_star, sim.t)
ax = plot.overlay(sim.t, exact.beta, sim.params["a"][:, None] * sim.params["w"], sim.t)
ax.set(xlabel="t = η·step", ylabel="β = a w", title="closed form (lines) vs GD η = 0.05 (circles)")
print(
    f"max |GD − exact| = {float(jnp.max(jnp.abs(sim.params['a'][:, None] * sim.params['w'] - exact.beta))):.1e}"
)
