"""Scalar-in, scalar-out p-wide linear network: exact gradient flow (Nam 2024 thesis §6.2–6.3).

Convention (checked against :func:`sims.gradient_flow`): f(x) = (x/Z) Σ_i a_i b_i with E[x²] = 1,
target y = S x, unit-rate gradient flow on L = ½E[(f(x) − y)²] = ½(θ − S)², θ = Z⁻¹ Σ_i a_i b_i:

.. math::
    \\dot a_i = -\\tfrac{b_i}{Z}(\\theta - S), \\qquad \\dot b_i = -\\tfrac{a_i}{Z}(\\theta - S).

Names: ``a0``/``b0`` a_i(0)/b_i(0) (shape (p,)), ``S`` the target slope S, ``Z`` the output
normalisation Z > 0, ``gamma`` γ(t), ``Sigma0`` Σ₀ = Z⁻¹Σ(a_i² + b_i²)/2, ``S0`` 𝒮₀ = Z⁻¹Σ a_i b_i
(T Eq. 6.13), ``D`` = √(Σ₀² − 𝒮₀² + S²).

**Solution (T Theorem 1, Eq. 6.10–6.14), re-derived for this flow.** u_i = a_i + b_i and
v_i = a_i − b_i obey u̇_i = −u_i(θ − S)/Z, v̇_i = +v_i(θ − S)/Z, so u_i = u_i(0)γ^{1/2},
v_i = v_i(0)γ^{-1/2} (Eq. 6.10–6.11) with γ(0) = 1 and θ = ½[(Σ₀ + 𝒮₀)γ − (Σ₀ − 𝒮₀)/γ], hence the
Riccati equation Z γ̇ = −(Σ₀ + 𝒮₀)γ² + 2Sγ + (Σ₀ − 𝒮₀). Linearising it (γ = n/m with
Z(ṅ, ṁ) = [[S, Σ₀ − 𝒮₀], [Σ₀ + 𝒮₀, −S]](n, m)) gives, with τ = D t / Z,

.. math::
    \\gamma(t) = \\frac{(D + S + \\Sigma_0 - \\mathcal S_0)\\tanh\\tau + D(1 - \\tanh\\tau)}
                      {(D - S + \\Sigma_0 + \\mathcal S_0)\\tanh\\tau + D(1 - \\tanh\\tau)},

i.e. T Eq. 6.12 with the exponent e^{−2Dt/Z}. **Finding on the printed constant:** T Eq. 6.12
prints exp(−4Dt/Z); under the ½-MSE unit-rate flow above the rate is 2D/Z, half the printed one
(the thesis' rate corresponds to the loss without the ½, L = E[(f − y)²]). The limit
γ₊ = (S + D)/(Σ₀ + 𝒮₀) (Eq. 6.14) is unaffected. Both numerator and denominator are sums of
non-negative terms (D ≥ |S|, Σ₀ ≥ |𝒮₀|), so γ is accurate to a few ulps for every t, including
D → 0 (the tanh τ / D factor is evaluated as (t/Z)·tanh(τ)/τ) and t → ∞ (1 − tanh τ = 2σ(−2τ)).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sims import _checks
from sims.gradient_flow import gradient_flow

__all__ = ["Trajectory", "solve", "loss", "gamma_plus", "verify"]


class Trajectory(NamedTuple):
    """Exact scalar-in/out trajectory at the requested times (``T = t.shape``, width p)."""

    a: jax.Array  # T + (p,)  a_i(t)
    b: jax.Array  # T + (p,)  b_i(t)
    network_map: jax.Array  # T  θ(t) = Z⁻¹ Σ_i a_i b_i, the slope of f(x) = θx (alias ``theta``)
    gamma: jax.Array  # T     γ(t) (T Eq. 6.12, rate 2D/Z)
    gamma_plus: jax.Array  # ()   γ₊ = γ(∞) (T Eq. 6.14)
    Sigma0: jax.Array  # ()   Σ₀ = Z⁻¹ Σ_i (a_i(0)² + b_i(0)²)/2 (T Eq. 6.13)
    S0: jax.Array  # ()       𝒮₀ = Z⁻¹ Σ_i a_i(0) b_i(0) = θ(0) (T Eq. 6.13)
    theta_aligned: jax.Array  # T       Z⁻¹ Σ_{i∈I₊} a_i b_i, I₊ = {i : a_i(0) b_i(0) S > 0}
    theta_antialigned: jax.Array  # T   Z⁻¹ Σ_{i∈I₋} a_i b_i, I₋ = {i : a_i(0) b_i(0) S < 0}
    delta_theta: jax.Array  # T   Δθ = θ_aligned − θ_antialigned (T Eq. 6.3–6.4)
    t: jax.Array  # T             the times

    @property
    def theta(self) -> jax.Array:
        """θ(t): :attr:`network_map` under its former name (an alias)."""
        return self.network_map


def solve(
    a0: jax.Array,
    b0: jax.Array,
    S: jax.Array | float,
    t: jax.Array,
    *,
    Z: jax.Array | float = 1.0,
    eta: jax.Array | float = 1.0,
) -> Trajectory:
    """Exact gradient flow of f(x) = (x/Z) Σ a_i b_i from any init (Nam thesis, Theorem 1, Eq. 6.10–6.14).

    .. math::
        a_i = \\tfrac{a_i(0)+b_i(0)}{2}\\gamma^{1/2} + \\tfrac{a_i(0)-b_i(0)}{2}\\gamma^{-1/2},\\quad
        b_i = \\tfrac{a_i(0)+b_i(0)}{2}\\gamma^{1/2} - \\tfrac{a_i(0)-b_i(0)}{2}\\gamma^{-1/2}

    with γ(t) from T Eq. 6.12 at the rate 2D/Z of the ½-MSE flow (the thesis prints 4D/Z; see the
    module docstring). Saddle inits (a = b = 0) stay at the saddle. Jit/vmap-friendly in every
    argument (``S``, ``Z`` and the inits are traced; only p is a shape).

    Args:
      a0: (p,) initial second-factor weights a_i(0).
      b0: (p,) initial first-factor weights b_i(0).
      S: () target slope S (any sign; S = 0 allowed).
      t: times t ≥ 0, any shape T.
      Z: () output normalisation Z > 0 (keyword-only, default 1; Z = √p is the NTK
        parametrisation).
      eta: () learning rate η > 0 of the flow on :func:`loss`.

    Returns:
      :class:`Trajectory` with a, b (T + (p,)), ``network_map`` θ (alias ``theta``), γ, mode sums
      (T) and γ₊, Σ₀, 𝒮₀ (scalars).

    Raises:
      ValueError: mismatched shapes, Z ≤ 0, t < 0 or non-finite inputs.
    """
    a0, b0, S, Z, t = _prepare(a0, b0, S, t, Z)
    eta = _checks.as_float(eta, "eta")
    _checks.check_shape(eta, "eta", (), "(a scalar rate)")
    _checks.check_finite(eta, "eta")
    _checks.check_positive(eta, "eta")
    return _solve(a0, b0, S, Z, eta.astype(t.dtype) * t)._replace(t=t)


def loss(params: dict, task) -> jax.Array:
    """Raw-parameter loss the flow descends: ½(θ − S)², θ = Z⁻¹Σ_i a_i b_i (T Eq. 6.1, whitened x).

    Args:
      params: ``{"a": (p,), "b": (p,)}``.
      task: S, or ``(S, Z)``.

    Returns:
      () loss.
    """
    S, Z = task if isinstance(task, tuple) else (task, 1.0)
    theta = jnp.sum(params["a"] * params["b"]) / Z
    return 0.5 * (theta - S) ** 2


def gamma_plus(a0: jax.Array, b0: jax.Array, S: jax.Array, Z: jax.Array | float = 1.0) -> jax.Array:
    """γ₊ = lim γ(t) = (S + √(Σ₀² − 𝒮₀² + S²))/(Σ₀ + 𝒮₀) (Nam thesis, Eq. 6.14).

    γ₊ ≈ 1 means the weights barely move (lazy), γ₊ ≫ 1 the aligned modes are amplified (rich).
    γ₊ ≥ S/Σ₀ for S > 0 (T §6.3.1). Infinite when Σ₀ + 𝒮₀ = 0 (all a_i = −b_i) and S > 0.

    Args:
      a0, b0: (p,) initial weights a_i(0), b_i(0).
      S: () target slope S.
      Z: () normalisation Z > 0.

    Returns:
      () γ₊.
    """
    a0, b0, S, Z, _ = _prepare(a0, b0, S, 0.0, Z)
    return _solve(a0, b0, S, Z, jnp.zeros((), a0.dtype)).gamma_plus


def verify(key: jax.Array, n_cases: int = 8) -> float:
    """Max error of :func:`solve` against the integrated raw-parameter flow on random cases.

    Cases draw p = 6 neurons, target slopes S of both signs over four decades, inits from 1e-3 to 3
    in scale with random signs (aligned, anti-aligned and unbalanced a ≠ b), and Z ∈ {1, √p}; each
    is compared at 41 times spanning the plateau and the approach to the fixed point.

    Args:
      key: PRNG key.
      n_cases: number of random cases.

    Returns:
      max over cases and times of max(|θ − θ_ref|/|S|, |a − a_ref|/w, |b − b_ref|/w), with the
      weight scale w = √(|S| Z) + max|a(0), b(0)|.
    """
    p = 6
    k = jax.random.split(key, 4)
    S = jax.random.choice(k[0], jnp.array([-1.0, 1.0]), (n_cases,)) * 10 ** jax.random.uniform(
        k[1], (n_cases,), minval=-2.0, maxval=2.0
    )
    scale = 10 ** jax.random.uniform(k[2], (n_cases,), minval=-3.0, maxval=0.5)
    ab = scale[:, None, None] * jax.random.normal(k[3], (n_cases, 2, p))
    a0, b0 = ab[:, 0], ab[:, 1]
    Z = jnp.where(jnp.arange(n_cases) % 2 == 1, np.sqrt(p), 1.0)
    sol0 = jax.vmap(lambda a, b, s, z: solve(a, b, s, jnp.zeros(()), Z=z))(a0, b0, S, Z)
    rate = 2 * jnp.sqrt(S**2 + (sol0.Sigma0 + sol0.S0) * (sol0.Sigma0 - sol0.S0)) / Z
    # Cover the plateau of small inits (≈ log γ₊ / rate) and the approach to the fixed point.
    t_end = (12.0 + jnp.log1p(jnp.abs(sol0.gamma_plus))) / rate
    t = t_end[:, None] * jnp.linspace(0.0, 1.0, 41)
    a_ref, b_ref = _reference(a0, b0, S, Z, t)
    sol = jax.vmap(lambda a, b, s, tt, z: solve(a, b, s, tt, Z=z))(a0, b0, S, t, Z)
    theta_ref = jnp.sum(a_ref * b_ref, axis=-1) / Z[:, None]
    w = (jnp.sqrt(jnp.abs(S) * Z) + jnp.max(jnp.abs(ab), axis=(1, 2)))[:, None, None]
    errs = (
        jnp.max(jnp.abs(sol.network_map - theta_ref) / jnp.abs(S)[:, None]),
        jnp.max(jnp.abs(sol.a - a_ref) / w),
        jnp.max(jnp.abs(sol.b - b_ref) / w),
    )
    return float(max(errs))


def _prepare(a0, b0, S, t, Z):
    a0 = _checks.as_float(a0, "a0")
    b0 = _checks.as_float(b0, "b0")
    _checks.check_shape(a0, "a0", (None,), "(p,)")
    _checks.check_shape(b0, "b0", a0.shape, "(p,), matching a0")
    if a0.shape[0] == 0:
        raise ValueError("a0 must have at least one entry (width p >= 1)")
    S = _checks.as_float(S, "S")
    Z = _checks.as_float(Z, "Z")
    t = _checks.as_float(t, "t")
    _checks.check_shape(S, "S", (), "(a scalar target slope)")
    _checks.check_shape(Z, "Z", (), "(a scalar normalisation)")
    for x, name in ((a0, "a0"), (b0, "b0"), (S, "S"), (Z, "Z"), (t, "t")):
        _checks.check_finite(x, name)
    _checks.check_positive(Z, "Z")
    _checks.check_positive(t, "t", strict=False)
    dtype = jnp.result_type(a0, b0, S, Z, t)
    return tuple(x.astype(dtype) for x in (a0, b0, S, Z, t))


def _tanhc(x):
    """tanh(x)/x, equal to 1 at x = 0 (series below 1e-4, where the relative error is < 1e-17)."""
    small = jnp.abs(x) < 1e-4
    xs = jnp.where(small, 1.0, x)
    return jnp.where(small, 1.0 - x * x / 3.0, jnp.tanh(xs) / xs)


def _invariants(a0, b0, S, Z):
    """P = Σ₀ + 𝒮₀ = Σu²/2Z, M = Σ₀ − 𝒮₀ = Σv²/2Z and D = √(S² + PM), each without cancellation."""
    P = jnp.sum((a0 + b0) ** 2) / (2 * Z)
    M = jnp.sum((a0 - b0) ** 2) / (2 * Z)
    D = jnp.sqrt(S * S + P * M)
    return P, M, D


@jax.jit
def _solve(a0, b0, S, Z, t):
    P, M, D = _invariants(a0, b0, S, Z)
    # D ± S without cancellation (D ≥ |S|, D² − S² = PM).
    pos = S >= 0
    d_plus_s = jnp.where(pos, D + S, P * M / jnp.where(pos, 1.0, D - S))
    d_minus_s = jnp.where(pos, P * M / jnp.where(pos & (D + S > 0), D + S, 1.0), D - S)
    tau = D * t / Z
    th_over_d = (t / Z) * _tanhc(tau)  # tanh(τ)/D, finite as D → 0
    one_minus_th = 2.0 * jax.nn.sigmoid(-2.0 * tau)  # 1 − tanh τ, accurate for large τ
    num = (d_plus_s + M) * th_over_d + one_minus_th
    den = (d_minus_s + P) * th_over_d + one_minus_th
    gamma = num / den
    root = jnp.sqrt(num) / jnp.sqrt(den)  # γ^{1/2}, no overflow even where γ would
    u0 = (a0 + b0) / 2
    v0 = (a0 - b0) / 2
    # u_i γ^{1/2} and v_i γ^{-1/2}; a zero mode stays zero even where γ over/underflows.
    # γ^{±1/2} is infinite only when every u_i(0) (resp. v_i(0)) is zero (P = 0, resp. M = 0), so
    # replacing it by 0 there is exact; multiplying (no where on the modes) keeps the derivative
    # w.r.t. a zero mode (a_i(0) = ±b_i(0)) and costs one product per mode.
    r_up = jnp.where(jnp.isfinite(root), root, 0.0)
    r_vm = jnp.where(root > 0, 1.0 / jnp.where(root > 0, root, 1.0), 0.0)
    up = u0 * r_up[..., None]
    vm = v0 * r_vm[..., None]
    a = up + vm
    b = up - vm

    # Mode sums without p-wide work per time: a_i b_i = u_i(0)² γ − v_i(0)²/γ, so
    # Σ_{i∈I} a_i b_i / Z = ½[P_I γ − M_I/γ] with P_I = Σ_I (a_i+b_i)²/2Z, M_I = Σ_I (a_i−b_i)²/2Z.
    def mode_sum(P_I, M_I):
        return 0.5 * (jnp.where(P_I > 0, P_I * gamma, 0.0) - jnp.where(M_I > 0, M_I / gamma, 0.0))

    sign = jnp.sign(a0 * b0 * S)
    pu, mv = (a0 + b0) ** 2 / (2 * Z), (a0 - b0) ** 2 / (2 * Z)
    theta_al = mode_sum(
        jnp.sum(jnp.where(sign > 0, pu, 0.0)), jnp.sum(jnp.where(sign > 0, mv, 0.0))
    )
    theta_anti = mode_sum(
        jnp.sum(jnp.where(sign < 0, pu, 0.0)), jnp.sum(jnp.where(sign < 0, mv, 0.0))
    )
    # θ = ½[Pγ − M/γ] straight from γ (XLA drops a, b when only θ is used: no p-wide work).
    theta = mode_sum(P, M)
    safe_p = jnp.where(P > 0, P, 1.0)
    g_plus = jnp.where(P > 0, d_plus_s / safe_p, jnp.where(d_plus_s > 0, jnp.inf, 1.0))
    return Trajectory(
        a=a,
        b=b,
        network_map=theta,
        gamma=gamma,
        gamma_plus=g_plus,
        Sigma0=(P + M) / 2,
        S0=(P - M) / 2,
        theta_aligned=theta_al,
        theta_antialigned=theta_anti,
        delta_theta=theta_al - theta_anti,
        t=t,
    )


@jax.jit
def _reference(a0, b0, S, Z, t):
    """Integrated raw-parameter flow for a batch of cases (one compilation for all of them)."""

    def one(a0, b0, S, Z, t):
        # rtol 1e-13: with weights ≫ target, θ = Σab/Z cancels, and 1e-12 leaves ~1e-8 of |S|.
        ys = gradient_flow(loss, {"a": a0, "b": b0}, t, (S, Z), rtol=1e-13, atol=1e-16)
        return ys["a"], ys["b"]

    return jax.vmap(one)(a0, b0, S, Z, t)
