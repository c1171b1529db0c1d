"""Wide and deep linear networks: function-space metric M, square-network and deep implicit biases.

Kunin et al. 2024, §4 and App. B. Two-layer network f(x) = Aᵀ W x with W (h, d) first layer (rate
η_w) and A (h, c) second layer (rate η_a), predictor β = WᵀA (d, c) — the transpose of the network map
W2 W1 of :mod:`sims.saxe` and :mod:`sims.lambda_balanced` (W1 = W, W2 = Aᵀ). Gradient flow on
L = ½‖Xβ − Y‖²_F gives

.. math::  \\mathrm{vec}(\\dot\\beta) = -M\\,\\mathrm{vec}(X^\\top X\\beta - X^\\top Y), \\qquad
           M = \\eta_w A^\\top A \\oplus \\eta_a W^\\top W   \\quad (K Eq 6)

with vec stacking columns (``beta.T.ravel()``) and A ⊕ B = A ⊗ I_d + I_c ⊗ B. Per hidden neuron
β_i = w_i a_iᵀ and the conserved δ_i = Δ_ii, Δ = η_w AAᵀ − η_a WWᵀ.

Corrections to the printed formulas (derived here, checked in the tests against the raw flow):
- K Eq 114 (q_δ) holds for η_aη_w = 1 and δ > 0 only. The potential whose Hessian is
  M_Λ⁻¹ = (4η_aη_wΛ² + δ²)^{−1/2} is q_δ(x) = [2sx·asinh(2sx/|δ|) − √(4s²x² + δ²) + |δ|]/(4s²),
  s = √(η_aη_w) (:func:`hyperbolic_entropy`).
- K Eq 122 has a sign typo: M⁻¹ = ‖β‖^{−2l/(l+1)}(I − l/(l+1) β̂β̂ᵀ); and the main-text Q(β) has
  ‖β0‖^{−(l+2)/(l+1)} where Theorem B.9's ‖β0‖^{−l/(l+1)} = ∇Φ(β0)/β0 is the right exponent.
- Theorem B.6 writes β(∞) = UΛVᵀ; with SVD(XᵀY) = V S Uᵀ (V left, d × d) it is β = VΛUᵀ.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from sims._checks import as_float, check_finite, is_concrete

__all__ = [
    "conserved",
    "neuron_maps",
    "metric_from_parameters",
    "metric",
    "metric_lazy_limit",
    "metric_square_isotropic",
    "square_isotropic_init",
    "hyperbolic_entropy",
    "TaskAligned",
    "interpolant",
    "task_aligned_interpolant",
    "deep_metric",
    "deep_rich_bias",
    "deep_isotropic_init",
    "deep_rich_interpolant",
    "deep_flow_interpolant",
    "verify",
]


#: Newton iterations allowed before :func:`_minimise_on_affine` reports non-convergence: damped
#: steps bring the iterate into the quadratic basin in a few dozen steps on these programs (the
#: tests converge in < 30); the rest is headroom. A bound is needed to stay jittable (while_loop).
NEWTON_MAX_ITER = 100


class TaskAligned(NamedTuple):
    """Implicit-bias solution of a task-aligned square network (K Theorem B.6)."""

    Lambda: jax.Array  # (d,) singular values Λ* of β(∞) in the task basis
    network_map: jax.Array  # (d, d) β(∞) = V diag(Λ*) Uᵀ (alias ``beta``)
    converged: jax.Array  # () bool, Newton's stopping criterion met (see _minimise_on_affine)

    @property
    def beta(self) -> jax.Array:
        """β(∞): :attr:`network_map` under its former name (an alias)."""
        return self.network_map


def interpolant(
    W0: jax.Array,
    A0: jax.Array,
    X: jax.Array,
    Y: jax.Array,
    V: jax.Array,
    U: jax.Array,
    *,
    eta_a: jax.Array | float = 1.0,
    eta_w: jax.Array | float = 1.0,
    max_iter: int = NEWTON_MAX_ITER,
) -> TaskAligned:
    """β(∞) reached by gradient flow of a task-aligned square network from (W0, A0) (K Thm B.6).

    .. math::  \\beta(\\infty) = V\\,\\mathrm{diag}(\\Lambda^*)\\,U^\\top, \\quad
               \\Lambda^* = \\arg\\min_{XV\\mathrm{diag}(\\Lambda)U^\\top = Y}
               \\sum_i q_\\delta(\\Lambda_i) - q_\\delta'(\\Lambda_i(0))\\Lambda_i

    The contract's entry point for this model: reads Λ(0) = diag(Vᵀβ(0)U) and δ from the init and
    checks the assumptions, each violation reported by size in a ``ValueError``: Δ = δI (K App.
    B.1.3), β(0) diagonal in (V, U) (K B.4) and XᵀX diagonal in V (K B.5).

    Args:
      W0: (d, d) first layer W(0); A0: (d, d) second layer A(0) (f(x) = Aᵀ W x, β = WᵀA).
      X: (n, d) inputs; Y: (n, d) targets.
      V, U: (d, d) orthogonal singular vectors of XᵀY = V S Uᵀ.
      eta_a, eta_w: learning rates η_a, η_w.
      max_iter: Newton iterations before non-convergence is reported.

    Returns:
      :class:`TaskAligned` (Λ*, β(∞), converged).
    """
    W0, A0 = _check_two_layer(W0, A0)
    d = W0.shape[1]
    if W0.shape != (d, d) or A0.shape != (d, d):
        raise ValueError(f"W0 and A0 must be square (d, d), got {W0.shape}, {A0.shape}")
    Delta = conserved(W0, A0, eta_a, eta_w)
    delta = jnp.mean(jnp.diag(Delta))
    Lam = V.T @ W0.T @ A0 @ U
    if is_concrete(Delta) and is_concrete(V) and is_concrete(U):
        scale = max(float(jnp.abs(Delta).max()), float(eta_a * jnp.abs(W0 @ W0.T).max()))
        err = float(jnp.abs(Delta - delta * jnp.eye(d, dtype=Delta.dtype)).max()) / scale
        if err > _alignment_tol(W0.dtype):
            raise ValueError(
                f"W0, A0 must have isotropic Δ = η_w AAᵀ − η_a WWᵀ = δI: its deviation from "
                f"δI is {err:.3g} of its scale (allowed {_alignment_tol(W0.dtype):.1g})"
            )
        err = _violation(Lam)
        if err > _alignment_tol(W0.dtype):
            raise ValueError(
                f"β(0) = W0ᵀA0 must be diagonal in (V, U) (K Assumption B.4): the off-diagonal "
                f"part of Vᵀβ(0)U is {err:.3g} of its largest entry"
            )
    return task_aligned_interpolant(
        X, Y, V, U, jnp.diag(Lam), delta, eta_a, eta_w, max_iter=max_iter
    )


def conserved(
    W: jax.Array, A: jax.Array, eta_a: float | jax.Array = 1.0, eta_w: float | jax.Array = 1.0
) -> jax.Array:
    """Conserved matrix Δ = η_w AAᵀ − η_a WWᵀ (K §4); δ_i = Δ_ii.

    Args:
      W: (h, d) first layer; A: (h, c) second layer; eta_a, eta_w: η_a, η_w.

    Returns:
      Δ: (h, h).
    """
    W, A = _check_two_layer(W, A)
    return eta_w * A @ A.T - eta_a * W @ W.T


def neuron_maps(W: jax.Array, A: jax.Array) -> jax.Array:
    """Per-neuron contributions β_i = w_i a_iᵀ, with β = Σ_i β_i = WᵀA (K §4).

    Returns:
      beta_i: (h, d, c).
    """
    W, A = _check_two_layer(W, A)
    return W[:, :, None] * A[:, None, :]


def metric_from_parameters(
    W: jax.Array, A: jax.Array, eta_a: float | jax.Array = 1.0, eta_w: float | jax.Array = 1.0
) -> jax.Array:
    """M = η_w AᵀA ⊕ η_a WᵀW (K Eq 6), the metric on vec(β) (columns stacked).

    Args:
      W: (h, d); A: (h, c); eta_a, eta_w: η_a, η_w.

    Returns:
      M: (d·c, d·c).
    """
    W, A = _check_two_layer(W, A)
    return _kron_sum(eta_w * A.T @ A, eta_a * W.T @ W)


def metric(
    beta_i: jax.Array,
    delta_i: jax.Array,
    eta_a: float | jax.Array = 1.0,
    eta_w: float | jax.Array = 1.0,
) -> jax.Array:
    """M = Σ_i M_i written in β_i and δ_i only (K Theorem 4.1, Eq 7).

    .. math::  M_i = \\tfrac{\\kappa_i + \\delta_i}{2}\\frac{\\beta_i^\\top\\beta_i}{\\|\\beta_i\\|_F^2}
               \\oplus \\tfrac{\\kappa_i - \\delta_i}{2}\\frac{\\beta_i\\beta_i^\\top}{\\|\\beta_i\\|_F^2},
               \\quad \\kappa_i = \\sqrt{\\delta_i^2 + 4\\eta_a\\eta_w\\|\\beta_i\\|_F^2}

    Args:
      beta_i: (h, d, c) per-neuron maps β_i = w_i a_iᵀ, each non-zero.
      delta_i: (h,) conserved δ_i = η_w‖a_i‖² − η_a‖w_i‖².
      eta_a, eta_w: η_a, η_w.

    Returns:
      M: (d·c, d·c).
    """
    beta_i, delta_i = as_float(beta_i, "beta_i"), as_float(delta_i, "delta_i")
    if beta_i.ndim != 3 or delta_i.shape != beta_i.shape[:1]:
        raise ValueError(
            f"beta_i must be (h, d, c) and delta_i (h,), got {beta_i.shape}, {delta_i.shape}"
        )
    n2 = jnp.sum(beta_i**2, axis=(1, 2))
    if is_concrete(n2) and bool(jnp.any(n2 == 0)):
        zero = [int(i) for i in np.flatnonzero(np.asarray(n2) == 0)]
        raise ValueError(
            f"beta_i has zero neurons {zero}: Eq 7 divides by ‖β_i‖², so M_i is undefined "
            "there; drop them or use metric_from_parameters"
        )
    kappa = jnp.sqrt(delta_i**2 + 4 * eta_a * eta_w * n2)
    P_out = jnp.einsum("i,ida,idb->ab", (kappa + delta_i) / (2 * n2), beta_i, beta_i)
    P_in = jnp.einsum("i,iau,ibu->ab", (kappa - delta_i) / (2 * n2), beta_i, beta_i)
    return _kron_sum(P_out, P_in)


def metric_lazy_limit(beta_i: jax.Array, delta_i: jax.Array) -> jax.Array:
    """Leading term of M as |δ_i| → ∞ (K App. B.1.1): Σ_i δ_i⁺ P_i^out ⊕ δ_i⁻ P_i^in.

    With P_i^out = β_iᵀβ_i/‖β_i‖², P_i^in = β_iβ_iᵀ/‖β_i‖², δ⁺ = max(δ, 0), δ⁻ = max(−δ, 0).
    M − this limit = O(η_aη_w‖β_i‖²/|δ_i|). Funnel networks (d > h ≥ c) have a full-rank limit for
    δ → +∞ (lazy), inverted funnels (d ≤ h < c) for δ → −∞.

    Args:
      beta_i: (h, d, c); delta_i: (h,).

    Returns:
      (d·c, d·c).
    """
    n2 = jnp.sum(beta_i**2, axis=(1, 2))
    P_out = jnp.einsum("i,ida,idb->ab", jnp.maximum(delta_i, 0.0) / n2, beta_i, beta_i)
    P_in = jnp.einsum("i,iau,ibu->ab", jnp.maximum(-delta_i, 0.0) / n2, beta_i, beta_i)
    return _kron_sum(P_out, P_in)


def metric_square_isotropic(
    beta: jax.Array,
    delta: jax.Array | float,
    eta_a: float | jax.Array = 1.0,
    eta_w: float | jax.Array = 1.0,
) -> jax.Array:
    """M of a square network (d = h = c) with isotropic Δ = δI (K Lemma B.3, Eq 97).

    .. math::  M = \\sqrt{\\eta_a\\eta_w\\beta^\\top\\beta + \\tfrac{\\delta^2}{4}I} \\oplus
                   \\sqrt{\\eta_a\\eta_w\\beta\\beta^\\top + \\tfrac{\\delta^2}{4}I}

    Args:
      beta: (d, d) predictor β = WᵀA; delta: δ; eta_a, eta_w: η_a, η_w.

    Returns:
      M: (d², d²).
    """
    beta = as_float(beta, "beta")
    if beta.ndim != 2 or beta.shape[0] != beta.shape[1]:
        raise ValueError(f"beta must be square (d, d), got {beta.shape}")
    eye = jnp.eye(beta.shape[0], dtype=beta.dtype)
    q = delta**2 / 4
    return _kron_sum(
        _psd_sqrt(eta_a * eta_w * beta.T @ beta + q * eye),
        _psd_sqrt(eta_a * eta_w * beta @ beta.T + q * eye),
    )


def square_isotropic_init(
    W: jax.Array,
    O: jax.Array,
    delta: jax.Array | float,
    eta_a: float | jax.Array = 1.0,
    eta_w: float | jax.Array = 1.0,
) -> jax.Array:
    """Second layer A with η_w AAᵀ − η_a WWᵀ = δI: A = ((δI + η_a WWᵀ)/η_w)^{1/2} O (K App. B.1.3).

    Args:
      W: (h, h) first layer; O: (h, h) orthogonal; delta: δ with δI + η_a WWᵀ ≻ 0.

    Returns:
      A: (h, h).
    """
    W = as_float(W, "W")
    S = delta * jnp.eye(W.shape[0], dtype=W.dtype) + eta_a * W @ W.T
    if is_concrete(S) and bool(jnp.linalg.eigvalsh(S)[0] <= 0):
        raise ValueError("delta too negative: δI + η_a WWᵀ must be positive definite")
    return _psd_sqrt(S / eta_w) @ O


def hyperbolic_entropy(
    x: jax.Array, delta: jax.Array | float, eta_a: float | jax.Array = 1.0, eta_w: float = 1.0
) -> jax.Array:
    """Hyperbolic-entropy potential q_δ with q_δ'' = (4η_aη_w x² + δ²)^{−1/2} (K Theorem B.6, Eq 114).

    .. math::  q_\\delta(x) = \\frac{1}{4s^2}\\Big(2sx\\,\\sinh^{-1}\\tfrac{2sx}{|\\delta|}
               - \\sqrt{4s^2x^2 + \\delta^2} + |\\delta|\\Big), \\quad s = \\sqrt{\\eta_a\\eta_w}

    (K Eq 114 as printed is the case s = 1, δ > 0.) Requires δ ≠ 0; at δ = 0 the potential diverges
    by a term linear in x, which the implicit-bias program does not see
    (:func:`task_aligned_interpolant` handles δ = 0).

    Args:
      x: (...) singular values Λ_i; delta: δ ≠ 0; eta_a, eta_w: η_a, η_w.

    Returns:
      q_δ(x): (...).
    """
    s = jnp.sqrt(eta_a * eta_w)
    ad = jnp.abs(delta)
    return (2 * s * x * jnp.arcsinh(2 * s * x / ad) - jnp.sqrt(4 * s**2 * x**2 + ad**2) + ad) / (
        4 * s**2
    )


def task_aligned_interpolant(
    X: jax.Array,
    Y: jax.Array,
    V: jax.Array,
    U: jax.Array,
    Lambda0: jax.Array,
    delta: jax.Array,
    eta_a: jax.Array | float = 1.0,
    eta_w: jax.Array | float = 1.0,
    *,
    max_iter: int = NEWTON_MAX_ITER,
) -> TaskAligned:
    """Λ* = argmin_Λ Σ_i q_δ(Λ_i) − q_δ'(Λ_i(0))Λ_i s.t. X V diag(Λ) Uᵀ = Y (K Theorem B.6).

    Assumptions (K B.4–B.5): β(0) = V diag(Λ(0)) Uᵀ with V, U the singular vectors of XᵀY = V S Uᵀ,
    and XᵀX diagonal in V (checked: a ``ValueError`` reports the relative off-diagonal size of
    VᵀXᵀXV when it exceeds √ε). Solved by Newton's method in JAX with q_δ shifted by a linear term
    (so δ = 0 is allowed; for δ = 0 the singular values must stay positive); a solve that does not
    converge raises ``RuntimeError`` (NaN under tracing).

    Args:
      X: (n, d) inputs; Y: (n, d) targets; V, U: (d, d) orthogonal; Lambda0: (d,) Λ(0) > 0;
      delta: isotropic conserved δ (Δ = δI); eta_a, eta_w: η_a, η_w;
      max_iter: Newton iterations before non-convergence is reported.

    Returns:
      :class:`TaskAligned` (Λ*, β(∞), converged).
    """
    X, Y, V, U = (as_float(v, n) for v, n in ((X, "X"), (Y, "Y"), (V, "V"), (U, "U")))
    if is_concrete(X) and is_concrete(V):
        err = _violation(V.T @ X.T @ X @ V)
        if err > _alignment_tol(X.dtype):
            raise ValueError(
                f"XᵀX must be diagonal in V (K Assumption B.5): the off-diagonal part of VᵀXᵀXV "
                f"is {err:.3g} of its largest entry (allowed {_alignment_tol(X.dtype):.1g})"
            )
    sol = _task_aligned(X, Y, V, U, Lambda0, delta, eta_a, eta_w, max_iter)
    lam = _report_newton(sol.Lambda, sol.converged, "task_aligned_interpolant", max_iter)
    return TaskAligned(lam, (V * lam) @ U.T, sol.converged)


def deep_metric(beta: jax.Array, l: int) -> jax.Array:
    """M of a depth-(l+1) square linear network in the rich limit δ → 0 (K Eq 121).

    .. math::  M = \\|\\beta\\|^{2l/(l+1)} I + l\\,\\|\\beta\\|^{-2/(l+1)}\\beta\\beta^\\top

    Args:
      beta: (d,) predictor β = W_1ᵀ⋯W_lᵀ a (non-zero); l: number of square layers W_1..W_l.

    Returns:
      M: (d, d).
    """
    nb = jnp.linalg.norm(beta)
    eye = jnp.eye(beta.shape[0], dtype=beta.dtype)
    return nb ** (2 * l / (l + 1)) * eye + l * nb ** (-2 / (l + 1)) * jnp.outer(beta, beta)


def deep_rich_bias(beta: jax.Array, beta0: jax.Array, l: int) -> jax.Array:
    """Rich-regime implicit bias Q(β) = (l+1)/(l+2)‖β‖^{(l+2)/(l+1)} − ‖β0‖^{−l/(l+1)} β0ᵀβ (K Thm B.9).

    At β0 = 0 the linear term's coefficient ‖β0‖^{−l/(l+1)}β0 is 0 (its limit: its norm is
    ‖β0‖^{1/(l+1)} → 0), so Q is ‖β‖^{(l+2)/(l+1)} up to a factor, minimised on Xβ = y by the
    minimum-norm interpolant.

    Args:
      beta: (..., d); beta0: (d,) β(0) (β0 = 0 is the small-initialisation limit); l: number of
        square layers (depth l + 1).

    Returns:
      Q(β): (...).
    """
    p = (l + 2) / (l + 1)
    n0 = jnp.linalg.norm(beta0)
    # ‖β0‖^{p−2}β0 with its limit 0 at β0 = 0 (not 0^{−l/(l+1)}·0 = inf·0 = NaN).
    coef = jnp.where(n0 > 0, jnp.where(n0 > 0, n0, 1.0) ** (p - 2), 0.0)
    return jnp.linalg.norm(beta, axis=-1) ** p / p - coef * (beta @ beta0)


def deep_isotropic_init(r: jax.Array, scale: jax.Array | float) -> tuple[jax.Array, jax.Array]:
    """Depth-(l+1) initialisation with δ = 0 exactly (K Definition B.7), a rank-one chain.

    .. math::  W_i = \\text{scale}\\; r_i r_{i-1}^\\top \\;(i = 1..l), \\qquad a = \\text{scale}\\; r_l

    so W_{i+1}ᵀW_{i+1} = W_iW_iᵀ and aaᵀ − W_lW_lᵀ = 0·I: every balance condition holds with δ = 0,
    and β(0) = scale^{l+1} r_0.

    Args:
      r: (l + 1, d) unit vectors r_0 (input side) … r_l (direction of a).
      scale: weight scale (small → small initialisation).

    Returns:
      (a (d,), Ws (l, d, d)) with f(x) = aᵀ W_l ⋯ W_1 x.
    """
    r = as_float(r, "r")
    if r.ndim != 2 or r.shape[0] < 2:
        raise ValueError(f"r must be (l + 1, d) with l >= 1, got {r.shape}")
    return scale * r[-1], scale * jnp.einsum("id,ie->ide", r[1:], r[:-1])


def deep_rich_interpolant(
    X: jax.Array, y: jax.Array, beta0: jax.Array, l: int, *, max_iter: int = NEWTON_MAX_ITER
) -> jax.Array:
    """β(∞) = argmin_β Q(β) s.t. Xβ = y (K Theorem B.9, Eq 119), solved by Newton in JAX.

    β0 = 0, the limit of a vanishing initialisation, gives the minimum-norm interpolant
    Xᵀ(XXᵀ)⁻¹y (:func:`deep_rich_bias`). A solve that misses the stopping criterion of ``_minimise_on_affine`` raises ``RuntimeError``
    (under tracing, e.g. ``vmap``, it returns NaN instead).

    Args:
      X: (n, d) inputs (n < d: many interpolants); y: (n,); beta0: (d,) β(0); l: layers;
      max_iter: Newton iterations before non-convergence is reported.

    Returns:
      β(∞): (d,).
    """
    X, y, beta0 = as_float(X, "X"), as_float(y, "y"), as_float(beta0, "beta0")
    if X.ndim != 2 or y.shape != X.shape[:1] or beta0.shape != X.shape[1:]:
        raise ValueError(
            f"need X (n, d), y (n,), beta0 (d,), got {X.shape}, {y.shape}, {beta0.shape}"
        )
    check_finite(beta0, "beta0")
    b, ok = _minimise_on_affine(lambda b: deep_rich_bias(b, beta0, l), X, y, beta0, max_iter)
    return _report_newton(b, ok, "deep_rich_interpolant", max_iter)


def deep_flow_interpolant(
    params0: tuple, X: jax.Array, y: jax.Array, T: float = 400.0
) -> jax.Array:
    """β(T) from the raw-parameter gradient flow of a deep linear network (reference integrator).

    Args:
      params0: (a (d,), Ws (l, d, d)) as from :func:`deep_isotropic_init`; X: (n, d); y: (n,);
      T: integration time (long enough for the residual to vanish).

    Returns:
      β(T): (d,).
    """
    from sims.gradient_flow import gradient_flow

    t = jnp.stack([jnp.zeros((), X.dtype), jnp.asarray(T, X.dtype)])
    p = gradient_flow(_deep_loss, params0, t, (X, y))
    return _deep_beta(jax.tree.map(lambda v: v[-1], p))


def verify(key: jax.Array, n_cases: int = 8) -> float:
    """Max relative error of the closed forms against independent computations (for ``lrrich verify``).

    Per case: Theorem 4.1 (Eq 7) and Eq 97 against M = J diag(η) Jᵀ from the Jacobian of vec(β)
    with respect to the parameters (relative to max|M|); Theorem B.9's interpolant against the
    gradient flow (:func:`sims.gradient_flow`, vmapped over cases) of a depth-3 network from a
    δ = 0 init of scale 0.3, relative to ‖β(∞)‖.
    """
    k_wide, k_sq, k_deep = jax.random.split(key, 3)

    def wide(k):
        k1, k2, k3 = jax.random.split(k, 3)
        W, A = jax.random.normal(k1, (3, 4)), jax.random.normal(k2, (3, 2))
        ea, ew = jnp.exp(0.3 * jax.random.normal(k3, (2,)))
        M_ref = _metric_jacobian(W, A, ea, ew)
        M = metric(neuron_maps(W, A), jnp.diag(conserved(W, A, ea, ew)), ea, ew)
        return jnp.abs(M - M_ref).max() / jnp.abs(M_ref).max()

    def square(k):
        k1, k2, k3, k4 = jax.random.split(k, 4)
        # singular values of W in [1, 2] and |δ| ≤ 0.9 η_a keep δI + η_a WWᵀ positive definite
        W = jnp.linalg.qr(jax.random.normal(k1, (3, 3)))[0] * jax.random.uniform(
            k4, (3,), minval=1, maxval=2
        )
        O = jnp.linalg.qr(jax.random.normal(k2, (3, 3)))[0]
        ea, ew = jnp.exp(0.3 * jax.random.normal(k3, (2,)))
        delta = 0.9 * ea * jnp.tanh(jax.random.normal(jax.random.fold_in(k4, 1), ()))
        A = square_isotropic_init(W, O, delta, ea, ew)
        M_ref = _metric_jacobian(W, A, ea, ew)
        M = metric_square_isotropic(W.T @ A, delta, ea, ew)
        return jnp.abs(M - M_ref).max() / jnp.abs(M_ref).max()

    def deep(k):
        p0, X, y = _deep_case(k, 2, 3, 1, 0.3)
        b_flow = deep_flow_interpolant(p0, X, y)
        b_th = deep_rich_interpolant(X, y, _deep_beta(p0), 2)
        return jnp.abs(b_flow - b_th).max() / jnp.linalg.norm(b_th)

    errs = [
        jax.vmap(f)(jax.random.split(k, n_cases))
        for f, k in ((wide, k_wide), (square, k_sq), (deep, k_deep))
    ]
    return float(max(e.max() for e in errs))


def _kron_sum(P: jax.Array, Q: jax.Array) -> jax.Array:
    """P ⊕ Q = P ⊗ I_d + I_c ⊗ Q for P (c, c), Q (d, d) (K footnote 4)."""
    c, d = P.shape[-1], Q.shape[-1]
    return jnp.kron(P, jnp.eye(d, dtype=Q.dtype)) + jnp.kron(jnp.eye(c, dtype=P.dtype), Q)


def _check_two_layer(W, A):
    W, A = as_float(W, "W"), as_float(A, "A")
    if W.ndim != 2 or A.ndim != 2 or W.shape[0] != A.shape[0]:
        raise ValueError(f"W must be (h, d) and A (h, c) with the same h, got {W.shape}, {A.shape}")
    return W, A


def _psd_sqrt(S: jax.Array) -> jax.Array:
    lam, U = jnp.linalg.eigh(S)
    return (U * jnp.sqrt(jnp.maximum(lam, 0.0))) @ U.T


def _q_shifted(x, delta, s):
    """q_δ up to a linear term: (x log(2sx + R) − R/(2s))/(2s), R = √(4s²x² + δ²); finite at δ = 0."""
    R = jnp.sqrt(4 * s**2 * x**2 + delta**2)
    return (x * jnp.log(2 * s * x + R) - R / (2 * s)) / (2 * s)


def _minimise_on_affine(objective, G, b, x0, max_iter: int = NEWTON_MAX_ITER):
    """argmin objective(x) s.t. Gx = b by damped Newton in the null space of G (convex, smooth).

    The Newton direction is Δ = −P (PHP + (I − P))⁻¹ P g with P = I − G⁺G, which stays in null(G)
    and is well defined when G is rank deficient; a backtracking line search keeps the iterate in
    the objective's domain (non-finite values are rejected).

    Stopping criterion: the full Newton step is small, ‖Δ‖ ≤ √ε (1 + ‖x‖) with ε the machine
    epsilon of x's dtype; that step is then taken, and quadratic convergence leaves an error of
    O(ε). Returns ``(x, converged)``; ``converged`` is False when ``max_iter`` iterations (or a
    failed line search) did not meet the criterion.
    """
    Gp = jnp.linalg.pinv(G)
    P = jnp.eye(x0.shape[0], dtype=x0.dtype) - Gp @ G
    x = x0 + Gp @ (b - G @ x0)
    grad, hess = jax.grad(objective), jax.hessian(objective)
    tol = jnp.sqrt(jnp.finfo(x0.dtype).eps)

    def body(state):
        i, x, _, _ = state
        g, H = P @ grad(x), hess(x)
        step = -P @ jnp.linalg.solve(P @ H @ P + (jnp.eye(P.shape[0], dtype=P.dtype) - P), g)
        done = jnp.linalg.norm(step) <= tol * (1 + jnp.linalg.norm(x))
        f0, slope = objective(x), g @ step

        def bad(s):
            f = objective(x + s * step)
            return jnp.logical_not(jnp.isfinite(f) & (f <= f0 + 0.25 * s * slope))

        s = lax.while_loop(lambda s: bad(s) & (s > 1e-12), lambda s: s / 2, jnp.ones_like(f0))
        s = jnp.where(done, jnp.ones_like(s), s)
        stuck = (s <= 1e-12) | jnp.logical_not(jnp.all(jnp.isfinite(step)))
        return i + 1, jnp.where(stuck, x, x + s * step), done, stuck

    def more(state):
        i, _, done, stuck = state
        return (i < max_iter) & jnp.logical_not(done | stuck)

    false = jnp.zeros((), bool)
    _, x, done, _ = lax.while_loop(more, body, (0, x, false, false))
    return x, done


def _report_newton(x, converged, what: str, max_iter: int):
    """Raise when a concrete Newton solve did not converge; under tracing mark it with NaN."""
    if is_concrete(converged):
        if not bool(converged):
            raise RuntimeError(
                f"{what}: Newton's method did not reach ‖Δ‖ ≤ √ε(1 + ‖x‖) in {max_iter} "
                "iterations (or its line search failed); the problem may be ill-posed"
            )
        return x
    return jnp.where(converged, x, jnp.full_like(x, jnp.nan))


def _violation(M: jax.Array) -> float:
    """Largest off-diagonal entry of M relative to its largest entry (0 when M is diagonal)."""
    M = np.asarray(M)
    off = M - np.diag(np.diag(M))
    return float(np.abs(off).max() / max(np.abs(M).max(), np.finfo(M.dtype).tiny))


def _alignment_tol(dtype) -> float:
    # A violation ε of the alignment moves β(∞) at first order in ε; √eps (1.5e-8 in float64)
    # admits V, U from an SVD of rounded data and rejects genuinely misaligned inputs.
    return float(np.sqrt(np.finfo(dtype).eps))


@partial(jax.jit, static_argnums=8)
def _task_aligned(X, Y, V, U, Lambda0, delta, eta_a, eta_w, max_iter):
    s = jnp.sqrt(eta_a * eta_w)
    # vec(X V diag(Λ) Uᵀ) is linear in Λ: column i of the map is vec(X v_i u_iᵀ).
    G = jnp.einsum("nd,di,ci->nci", X, V, U).reshape(-1, Lambda0.shape[0])
    theta0 = jnp.log(2 * s * Lambda0 + jnp.sqrt(4 * s**2 * Lambda0**2 + delta**2)) / (2 * s)
    obj = lambda lam: jnp.sum(_q_shifted(lam, delta, s) - theta0 * lam)
    lam, ok = _minimise_on_affine(obj, G, Y.reshape(-1), Lambda0, max_iter)
    return TaskAligned(lam, (V * lam) @ U.T, ok)


def _deep_beta(params):
    a, Ws = params
    M = Ws[0]
    for i in range(1, Ws.shape[0]):
        M = Ws[i] @ M
    return M.T @ a


def _deep_loss(params, data):
    X, y = data
    return 0.5 * jnp.sum((X @ _deep_beta(params) - y) ** 2)


def _deep_case(key, l: int, d: int, n: int, scale: float):
    """A random Theorem B.9 problem: δ = 0 init of scale ``scale``, n < d data points."""
    kx, kr, ky = jax.random.split(key, 3)
    X = jax.random.normal(kx, (n, d))
    r = jax.random.normal(kr, (l + 1, d))
    a0, Ws0 = deep_isotropic_init(r / jnp.linalg.norm(r, axis=-1, keepdims=True), scale)
    y = X @ _deep_beta((a0, Ws0)) + jax.random.normal(ky, (n,))
    return (a0, Ws0), X, y


def _metric_jacobian(W, A, eta_a, eta_w):
    """M = J diag(η) Jᵀ, J = ∂vec(β)/∂(W, A): the metric of K Eq 6 from autodiff."""
    vec = lambda W_, A_: (W_.T @ A_).T.ravel()
    JW, JA = jax.jacobian(vec, argnums=(0, 1))(W, A)
    JW, JA = JW.reshape(JW.shape[0], -1), JA.reshape(JA.shape[0], -1)
    return eta_w * JW @ JW.T + eta_a * JA @ JA.T
