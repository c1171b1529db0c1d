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
# # Scaling laws and emergence in the multilinear skill model
#
# The multilinear model f = Σ_k a_k b_k g_k (thesis Ch. 4, Eq. 4.9) learns each skill k along a
# sigmoid R_k(T) = S R₀/(R₀ + (S − R₀)e^{−2ηP_s(k)ST}) (Eq. 4.11). With power-law skill
# frequencies P_s(k) ∝ k^{−(α+1)}, the *sum* of these stage-like sigmoids is a smooth power law
# in time, data, parameters and compute (Table 4.1); and each individual skill *emerges*.
# Everything below is closed form (`sims.skills`, `sims.scaling_laws`, `sims.emergence`); the
# registered experiments `scaling-laws` and `emergence` run the full versions (the latter against
# a real 2-layer MLP on multitask sparse parity).

# %%
import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt

from sims import emergence, scaling_laws, skills

SMOKE = os.environ.get("LRRICH_NOTEBOOK_SMOKE") == "1"
N_SIM, T_MAX = (30_000, 1e5) if SMOKE else (100_000, 5e5)
jax.config.update("jax_enable_x64", True)

# %% [markdown]
# ## Skills emerge one by one, the loss follows a power law

# %%
alpha, S, r0 = 0.3, 1.0, 1e-3
T = jnp.geomspace(1.0, T_MAX, 200)
p = skills.skill_frequencies(alpha, 10)
traj = skills.solve(r0, S, p, T)

fig, axes = plt.subplots(1, 2, figsize=(10, 3.3))
axes[0].semilogx(T, traj.R / S)
axes[0].set(xlabel="T", ylabel="R_k / S", title="first 10 skills (n_s = 10)")
L = scaling_laws.time_curve(T, alpha, S, r0, n_sim=N_SIM)
e, K = scaling_laws.fit_power_law(T, L, window=(1e3, T_MAX))
axes[1].loglog(T, L, label="multilinear model (n_s = ∞)")
axes[1].loglog(T, K * T**e, "k--", label=f"fit: slope {e:.4f}")
axes[1].set(xlabel="T", ylabel="loss", title=f"theory: −α/(α+1) = {-alpha / (alpha + 1):.4f}")
axes[1].legend(fontsize=8)

# %% [markdown]
# ## All four exponents of Table 4.1

# %%
theory = scaling_laws.exponents(alpha)
for name, value in theory._asdict().items():
    print(f"theory {name:>10}: {float(value):+.4f}")
N = jnp.geomspace(10, 1e4, 30)
LN = scaling_laws.parameter_curve(N, alpha, S)
fitted = float(scaling_laws.fit_power_law(N, LN, window=(1e2, 1e4))[0])
print(f"fitted parameter exponent: {fitted:+.4f} (theory {float(theory.params):+.4f})")

# %% [markdown]
# ## Emergence: calibrate on one skill, predict the others
# The extended model (Eq. 5.2) rescales the rate by a constant 𝓑². Here we generate the "network"
# curve of skill 1 from the model itself with 𝓑² = 1/22 plus noise, calibrate 𝓑² back, and predict
# when skills 2–5 emerge. (The `emergence` experiment does this against a trained MLP.)

# %%
t = jnp.linspace(0.0, 3000.0, 200)
p5 = skills.skill_frequencies(alpha, 5)
true_B2 = 1 / 22
R1 = emergence.time_emergence(t, S, r0, p5[0], true_B2)
R1_noisy = R1 + 0.01 * jax.random.normal(jax.random.key(0), R1.shape)
B2_fit, r0_fit = emergence.calibrate_time(t, R1_noisy, S, p5[0], 1.0)
print(f"calibrated B² = {float(B2_fit):.4f} (true {true_B2:.4f}), R0 = {float(r0_fit):.2e}")
pred = emergence.time_emergence(t[:, None], S, r0_fit, p5[None, :], B2_fit)
plt.figure(figsize=(5, 3.2))
plt.plot(t, pred / S)
plt.plot(t[::8], R1_noisy[::8] / S, "k.", ms=3, label="skill 1 data (calibration)")
plt.xlabel("T")
plt.ylabel("R_k / S")
plt.legend(fontsize=8)
