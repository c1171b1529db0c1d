r"""Linear model f = Σ_k w_k Φ_k: exponential mode dynamics and learnability (Nam thesis §1.5–1.6).

Convention (used everywhere in this module): loss L = ½ E[(f(x) − f*(x))²], gradient flow
ẇ = −η ∇_w L with learning rate η (default 1). With the feature covariance Σ_Φ = E[Φ Φᵀ] =
Σ_k ρ_k q_k q_kᵀ the eigenfunctions are e_k = q_kᵀ Φ / √ρ_k and the mode coefficient of
f = wᵀΦ is ⟨e_k|f⟩ = √ρ_k q_kᵀ w (:func:`feature_modes`).

The function obeys df/dt = −η T[f − f*] (T Eq. 1.17); each mode relaxes independently (Eq. 1.25):

.. math::  \langle e_k|f\rangle(t) = \langle e_k|f^*\rangle
           + (\langle e_k|f_0\rangle − \langle e_k|f^*\rangle)\, e^{−η ρ_k t},

which is T Eq. 1.26 for f_0 = 0.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sims import _checks
from sims.gradient_flow import gradient_flow

__all__ = [
    "ModeTrajectory",
    "Learnability",
    "solve",
    "loss",
    "feature_modes",
    "learnability",
    "verify",
]


class ModeTrajectory(NamedTuple):
    """Mode coefficients of a linear model along gradient flow.

    Attributes:
      t: times, any shape ``T``.
      network_map: mode coefficients ⟨e_k|f⟩(t) of the network map f, shape ``T + (p,)``
        (alias ``coeff``).
    """

    t: jax.Array
    network_map: jax.Array

    @property
    def coeff(self) -> jax.Array:
        """⟨e_k|f⟩(t): :attr:`network_map` under its former name (an alias)."""
        return self.network_map


class Learnability(NamedTuple):
    """Eigenlearning prediction for kernel regression on n samples (T Eq. 1.35).

    Attributes:
      L: learnability L_k = ρ_k / (ρ_k + κ), shape ``(p,)``.
      kappa: κ > 0 solving Σ_k ρ_k / (ρ_k + κ) = n, shape ``()``.
    """

    L: jax.Array
    kappa: jax.Array


def solve(
    c0: jax.Array | float,
    rho: jax.Array,
    c_star: jax.Array | float,
    t: jax.Array,
    *,
    eta: jax.Array | float = 1.0,
) -> ModeTrajectory:
    r"""Mode coefficients of a linear model under gradient flow (T Eq. 1.25–1.26).

    .. math::  c_k(t) = c^*_k + (c_k(0) − c^*_k)\, e^{−η ρ_k t},
               \quad c_k = \langle e_k|f\rangle,\ c^*_k = \langle e_k|f^*\rangle

    for the loss ½E[(f − f*)²] and dw/dt = −η ∇_w L. The arguments are read in this order only
    (the contract of :mod:`sims`: init, task, times, rates by keyword); nothing is inferred from
    their values, so a call in another order fails on a shape or a sign check (ρ ≥ 0) or reads as
    the order below.

    Args:
      c0: initial coefficients ⟨e_k|f_0⟩, shape ``(p,)`` (or a scalar / ``(1,)``, broadcast).
      rho: eigenvalues ρ_k ≥ 0 of the feature covariance E[ΦΦᵀ], shape ``(p,)``. A concrete
        ρ_k < 0 raises ``ValueError``; a traced one (under ``jit``/``vmap``) gives NaN in that mode
        rather than a mode growing as e^{η|ρ_k|t}.
      c_star: target coefficients ⟨e_k|f*⟩, shape ``(p,)`` (broadcastable).
      t: times t ≥ 0, any shape ``T``.
      eta: learning rate η > 0 (scalar, keyword-only, default 1).

    Returns:
      :class:`ModeTrajectory` with ``network_map`` (alias ``coeff``) of shape ``T + (p,)``.
    """
    rho, c0, c_star, t, lr = _checks.promote(rho=rho, c0=c0, c_star=c_star, t=t, lr=eta)
    if rho.ndim != 1:
        raise ValueError(
            f"rho must have shape (p,), got {rho.shape}; the order is "
            "solve(c0, rho, c_star, t, *, eta) with the initial coefficients first"
        )
    for x, name in ((c0, "c0"), (c_star, "c_star")):
        if x.ndim > 1 or (x.ndim == 1 and x.shape[0] not in (1, rho.shape[0])):
            raise ValueError(f"{name} must have shape ({rho.shape[0]},) like rho, got {x.shape}")
    if lr.ndim != 0:
        raise ValueError(f"eta must be a scalar, got shape {lr.shape}")
    for x, name in ((rho, "rho"), (c0, "c0"), (c_star, "c_star"), (t, "t"), (lr, "eta")):
        _checks.check_finite(x, name)
    _checks.check_positive(rho, "rho (eigenvalues ρ_k of E[ΦΦᵀ])", strict=False)
    _checks.check_positive(t, "t", strict=False)
    _checks.check_positive(lr, "eta")
    return _closed_form(rho, c0, c_star, t, lr)


def loss(params: dict, task: tuple) -> jax.Array:
    r"""Raw-parameter loss ½E[(wᵀΦ − f*)²] = ½Σ_k(√ρ_k v_k − c*_k)² + const in the eigenbasis (T Eq. 1.25).

    ``v = Qᵀw`` are the weights rotated into the eigenbasis of Σ_Φ = Q diag(ρ) Qᵀ, so the mode
    coefficients of :func:`solve` are c_k = √ρ_k v_k and v̇ = −η∇_v L gives ċ_k = −ηρ_k(c_k − c*_k).

    Args:
      params: ``{"v": (p,)}``.
      task: ``(rho, c_star)``, each (p,).

    Returns:
      () loss.
    """
    rho, c_star = task
    return 0.5 * jnp.sum((jnp.sqrt(rho) * params["v"] - c_star) ** 2)


def feature_modes(feature_cov: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
    r"""Eigenvalues ρ_k of Σ_Φ = E[ΦΦᵀ] and mode coefficients ⟨e_k|wᵀΦ⟩ = √ρ_k q_kᵀ w (T Eq. 1.15).

    Args:
      feature_cov: Σ_Φ, symmetric positive semi-definite, shape ``(p, p)``.
      w: weights, shape ``(..., p)``.

    Returns:
      ``(rho, coeff)``: ρ in descending order, shape ``(p,)``; coefficients, shape ``(..., p)``.
    """
    feature_cov = _checks.as_float(feature_cov, "feature_cov")
    w = _checks.as_float(w, "w")
    if feature_cov.ndim != 2 or feature_cov.shape[0] != feature_cov.shape[1]:
        raise ValueError(f"feature_cov must have shape (p, p), got {feature_cov.shape}")
    if w.ndim < 1 or w.shape[-1] != feature_cov.shape[0]:
        raise ValueError(f"w must have shape (..., {feature_cov.shape[0]}), got {w.shape}")
    _checks.check_finite(feature_cov, "feature_cov")
    feature_cov, w = _checks.promote(feature_cov=feature_cov, w=w)
    rho, q = jnp.linalg.eigh(feature_cov)
    rho, q = jnp.clip(rho[::-1], 0.0), q[:, ::-1]
    return rho, jnp.sqrt(rho) * (w @ q)


def learnability(rho: jax.Array, n: jax.Array | float, *, iters: int = 100) -> Learnability:
    r"""Learnability L_k = ρ_k/(ρ_k + κ) with κ from Σ_k ρ_k/(ρ_k + κ) = n (T Eq. 1.35).

    κ is found by bisection in log κ inside the bracket [ρ_min⁺ (m − n)/n, Σρ/n] (m = number of
    nonzero ρ_k: the left side decreases from m to 0 as κ goes from 0 to ∞), followed by two
    Newton steps; a fixed number of iterations keeps it jittable and vmappable over n and ρ.

    Args:
      rho: eigenvalues ρ_k ≥ 0, shape ``(p,)``.
      n: number of training samples n, 0 < n < m (a traced scalar is fine).
      iters: bisection iterations (static); 100 reaches machine precision for any bracket.

    Returns:
      :class:`Learnability` ``(L, kappa)``.
    """
    rho = _checks.as_float(rho, "rho")
    n = jnp.asarray(n)
    if rho.ndim != 1:
        raise ValueError(f"rho must have shape (p,), got {rho.shape}")
    if n.ndim != 0:
        raise ValueError(f"n must be a scalar, got shape {n.shape}")
    _checks.check_finite(rho, "rho")
    _checks.check_positive(rho, "rho", strict=False)
    if _checks.is_concrete(rho) and _checks.is_concrete(n):
        m = int(np.sum(np.asarray(rho) > 0))
        if not 0 < float(n) < m:
            raise ValueError(
                f"n must satisfy 0 < n < (number of nonzero rho) = {m}, got n = {float(n)}"
            )
    n = n.astype(rho.dtype)
    pos = rho > 0
    m = jnp.sum(pos).astype(rho.dtype)
    rho_min = jnp.min(jnp.where(pos, rho, jnp.max(rho)))
    lo = jnp.log(rho_min * (m - n) / n)
    hi = jnp.log(jnp.sum(rho) / n)

    def excess(log_kappa):
        return jnp.sum(rho / (rho + jnp.exp(log_kappa))) - n

    def bisect(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        above = excess(mid) > 0  # Σ ρ/(ρ+κ) decreases in κ: too large a sum ⇒ κ too small
        return jnp.where(above, mid, lo), jnp.where(above, hi, mid)

    lo, hi = jax.lax.fori_loop(0, iters, bisect, (lo, hi))
    kappa = jnp.exp(0.5 * (lo + hi))
    for _ in range(2):  # Newton polish: F(κ) = Σρ/(ρ+κ) − n, F'(κ) = −Σρ/(ρ+κ)²
        F = jnp.sum(rho / (rho + kappa)) - n
        dF = -jnp.sum(rho / (rho + kappa) ** 2)
        kappa = kappa - F / dF
    return Learnability(L=rho / (rho + kappa), kappa=kappa)


def verify(key: jax.Array, n_cases: int = 8) -> float:
    """Max error of :func:`solve` against the raw-weight gradient flow, relative to max|c*|.

    Draws ``n_cases`` random problems (feature covariance with eigenvalues spread over two decades,
    random targets, random / zero / tiny initial weights and learning rates), integrates
    ẇ = −η Σ_Φ (w − w*) with :func:`sims.gradient_flow` at 50 times, and compares the mode
    coefficients. Run under float64.
    """
    worst = 0.0
    for i in range(n_cases):
        k = jax.random.fold_in(key, i)
        kq, kr, kw, k0, kl = jax.random.split(k, 5)
        p = 5
        q, _ = jnp.linalg.qr(jax.random.normal(kq, (p, p)))
        rho = jnp.exp(jax.random.uniform(kr, (p,), minval=-4.6, maxval=0.0))
        cov = (q * rho) @ q.T
        w_star = jax.random.normal(kw, (p,))
        scale = [1.0, 0.0, 1e-12, 3.0][i % 4]
        w0 = scale * jax.random.normal(k0, (p,))
        lr = jnp.exp(jax.random.uniform(kl, (), minval=-1.0, maxval=1.0))
        t = jnp.linspace(0.0, 5.0 / float(lr * jnp.min(rho)), 50)
        ws = _reference_flow(w0, t, (cov, w_star), lr)
        rho_k, c_flow = feature_modes(cov, ws)
        _, c0 = feature_modes(cov, w0)
        _, c_star = feature_modes(cov, w_star)
        c = solve(c0, rho_k, c_star, t, eta=lr).network_map
        worst = max(worst, float(jnp.max(jnp.abs(c - c_flow)) / jnp.max(jnp.abs(c_star))))
    return worst


def _quadratic_loss(w: jax.Array, args: tuple) -> jax.Array:
    """½E[(wᵀΦ − w*ᵀΦ)²] = ½(w − w*)ᵀ Σ_Φ (w − w*) for a realizable target."""
    cov, w_star = args
    return 0.5 * (w - w_star) @ cov @ (w - w_star)


@jax.jit
def _reference_flow(w0: jax.Array, t: jax.Array, args: tuple, lr: jax.Array) -> jax.Array:
    return gradient_flow(_quadratic_loss, w0, t, args, lr=lr, atol=1e-30)


@jax.jit  # one program per shapes (eagerly, each primitive compiled on its own)
def _closed_form(rho, c0, c_star, t, lr) -> ModeTrajectory:
    """:func:`solve` on validated inputs."""
    x = lr * rho * t[..., None]  # ≥ 0: nothing overflows
    x = jnp.where(rho >= 0, x, jnp.nan)  # a traced ρ < 0 (a concrete one raised in solve)
    # c0 e^{−x} + c*(1 − e^{−x}): exact at t = 0 and t → ∞, no cancellation in 1 − e^{−x}.
    return ModeTrajectory(t=t, network_map=c0 * jnp.exp(-x) - c_star * jnp.expm1(-x))
