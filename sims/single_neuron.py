"""Single hidden neuron f(x) = a wᵀx: exact gradient flow for every balance δ (Kunin et al. 2024, §3).

Convention (used by every function here and checked against :func:`sims.gradient_flow`): gradient
flow with per-layer rates η_a, η_w on L = ½‖X a w − y‖² with whitened input XᵀX = I, so β* = Xᵀy and

.. math::
    \\dot a = \\eta_a (w^\\top\\beta_* - a\\|w\\|^2), \\qquad
    \\dot w = \\eta_w (a\\beta_* - a^2 w)                       \\quad \\text{(K Eq. 14–15)}

conserve δ = η_w a² − η_a‖w‖² (K Eq. 13). Names: ``beta_star`` β*, ``delta`` δ, ``mu`` μ = a‖w‖ (signed),
``phi`` φ = cos(w, β*), ``beta`` β = a w, ``eta_a``/``eta_w`` η_a/η_w.

**The exact solution, one formula for all δ.** With s = ‖β*‖ and q = wᵀβ*, the pair (a, q) obeys
ȧ = δa + η_a q − η_w a²·a, q̇ = η_w s² a − η_w a²·q: a *linear* flow L = [[δ, η_a], [η_w s², 0]] times a
common scalar decay. Hence (a, q) = λ(t)·e^{Lt}(a₀, q₀) with λ̇ = −η_w a² λ, and λ⁻² is an integral of
exponentials. With D = √(δ² + 4η_aη_w s²), ν± = (−δ ± D)/(2η_a) (the eigen-slopes q/a of L),
A = η_a(q₀ − ν₋a₀)/D, B = η_a(q₀ − ν₊a₀)/D (A − B = a₀), in the frame rescaled by e^{(δ+D)t/2}:

.. math::
    \\lambda^{-2} = e^{-(\\delta+D)t} + 2\\eta_w\\Big[A^2\\tfrac{1-e^{-(\\delta+D)t}}{\\delta+D}
      - 2AB\\tfrac{e^{-Dt}-e^{-(\\delta+D)t}}{\\delta} + B^2\\tfrac{e^{-2Dt}-e^{-(\\delta+D)t}}{\\delta-D}\\Big],

a = λ(A − B e^{−Dt}), q = λ(ν₊A − ν₋B e^{−Dt}), and the part of w orthogonal to β* only decays:
w = q β*/s² + λ e^{−(δ+D)t/2} (I − β̂β̂ᵀ) w₀. This covers K Eq. 21–25 (δ = 0), the Riccati/Bernoulli
pair K Eq. 26–28 (δ > 0, ν = q/a) and K Eq. 31–32 (δ < 0, v = a/q, a may change sign once), without the
poles those forms have where a or q crosses zero. Every exponential is non-positive, and the δ-divided
term is evaluated with ``expm1``, so the solution is finite for t up to 1e8 and inits down to 1e-12.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sims import _checks
from sims.gradient_flow import gradient_flow

__all__ = [
    "Trajectory",
    "solve",
    "loss",
    "basin",
    "params_from_mu_phi",
    "preconditioner",
    "ntk",
    "kernel_distance",
    "implicit_bias_potential",
    "implicit_bias",
    "implicit_bias_1d",
    "verify",
]


class Trajectory(NamedTuple):
    """Exact single-neuron trajectory at the requested times (``T = t.shape``)."""

    a: jax.Array  # T          second-layer weight a(t)
    w: jax.Array  # T + (d,)   first-layer weights w(t)
    mu: jax.Array  # T         μ = a‖w‖ (signed)
    phi: jax.Array  # T        φ = wᵀβ*/(‖w‖‖β*‖)  (0 at the saddle w = 0)
    network_map: jax.Array  # T + (d,) β = a w, f(x) = βᵀx (alias ``beta``)
    delta: jax.Array  # ()     δ = η_w a₀² − η_a‖w₀‖² (conserved)
    t: jax.Array  # T          the times

    @property
    def beta(self) -> jax.Array:
        """β(t) = a w: :attr:`network_map` under its former name (an alias)."""
        return self.network_map


def solve(
    a0: jax.Array | float,
    w0: jax.Array,
    beta_star: jax.Array,
    t: jax.Array,
    *,
    eta_a: jax.Array | float = 1.0,
    eta_w: jax.Array | float = 1.0,
) -> Trajectory:
    """Exact gradient flow of the single hidden neuron f(x) = a wᵀx, whitened input, any δ.

    .. math::
        \\dot a = \\eta_a(w^\\top\\beta_* - a\\|w\\|^2),\\quad \\dot w = \\eta_w(a\\beta_* - a^2 w),
        \\quad \\delta = \\eta_w a^2 - \\eta_a\\|w\\|^2

    (Kunin et al. 2024, Eq. 14–15; μ, φ of Eq. 16–17 for any η_a, η_w, App. A.2.1). Solved in closed
    form for δ > 0, δ = 0 and δ < 0 alike, including trajectories where a changes sign (Lemma A.1), by
    the linear-flow-times-decay representation in the module docstring. Saddle initialisations
    (a₀ = 0 and w₀ᵀβ* = 0) stay at the saddle. Jit/vmap-friendly; η_a, η_w and the init are traced.

    Args:
      a0: a(0), scalar.
      w0: w(0), shape (d,).
      beta_star: β* = Xᵀy, shape (d,), non-zero.
      t: times ≥ 0, any shape T.
      eta_a: η_a > 0, learning rate of a (scalar, keyword; default 1).
      eta_w: η_w > 0, learning rate of w (scalar, keyword; default 1).

    Returns:
      :class:`Trajectory` with a (T), w (T + (d,)), mu (T), phi (T), ``network_map`` β (alias
      ``beta``, T + (d,)), delta (()), t (T).

    Example:
      >>> traj = solve(0.1, jnp.array([0.1, 0.0]), jnp.array([1.0, 1.0]), jnp.linspace(0, 10, 50))
    """
    a0, w0, beta_star, eta_a, eta_w = _prepare(a0, w0, beta_star, eta_a, eta_w)
    t = _checks.as_float(t, "t").astype(a0.dtype)
    _checks.check_finite(t, "t")
    _checks.check_positive(t, "t", strict=False)
    return _solve_jit(a0, w0, beta_star, t, eta_a, eta_w)


def loss(params: dict, task) -> jax.Array:
    """Raw-parameter loss the flow descends (K Eq 13): ½‖X a w − y‖², or ½‖a w − β*‖² from β*.

    With whitened data (XᵀX = I, β* = Xᵀy) the two differ by the constant ½(‖y‖² − ‖β*‖²), so
    they have the same gradient flow.

    Args:
      params: ``{"a": (), "w": (d,)}``.
      task: β* (d,), or the data ``(X (n, d), y (n,))``.

    Returns:
      () loss.
    """
    beta = params["a"] * params["w"]
    if isinstance(task, tuple):
        X, y = task
        r = X @ beta - y
    else:
        r = beta - task
    return 0.5 * jnp.sum(r * r)


def basin(a0, w0, beta_star, eta_a=1.0, eta_w=1.0) -> jax.Array:
    """Which branch of the minima manifold a β* = a w is reached on: sign of a(∞) (K Eq. 33).

    .. math::
        \\operatorname{sgn} a(\\infty) = \\operatorname{sgn}\\Big(w_0^\\top\\beta_*
          + \\frac{a_0}{2\\eta_a}\\big(\\delta + \\sqrt{\\delta^2 + 4\\eta_a\\eta_w\\|\\beta_*\\|^2}\\big)\\Big)

    For δ ≥ 0 this equals sgn a₀ (the two-sheeted / conical cases); for δ < 0 it is the hyperplane
    of K Eq. 33 (printed there for η_a = η_w = 1). Zero on the separating surface, whose points flow
    into a saddle (a = wᵀβ* = 0).

    Args:
      a0: a(0), scalar. w0: w(0), shape (d,). beta_star: β*, shape (d,).
      eta_a, eta_w: η_a, η_w > 0.

    Returns:
      +1, −1 or 0, scalar of the input dtype.
    """
    a0, w0, beta_star, eta_a, eta_w = _prepare(a0, w0, beta_star, eta_a, eta_w)
    delta = eta_w * a0**2 - eta_a * (w0 @ w0)
    _, dpD, _ = _kappa_pm(delta, 4.0 * eta_a * eta_w * (beta_star @ beta_star))
    return jnp.sign(w0 @ beta_star + a0 * dpD / (2.0 * eta_a))


def params_from_mu_phi(mu, phi, delta, w0, beta_star, eta_a=1.0, eta_w=1.0):
    """Recover (a, w) from (μ, φ), δ and the plane span{w₀, β*} (K Eq. 34–35).

    .. math::
        \\eta_w a^2 = \\tfrac{\\sqrt{\\delta^2 + 4\\eta_a\\eta_w\\mu^2} + \\delta}{2},\\;
        \\eta_a\\|w\\|^2 = \\tfrac{\\sqrt{\\delta^2 + 4\\eta_a\\eta_w\\mu^2} - \\delta}{2},\\;
        w = \\|w\\|\\phi\\,\\hat\\beta_* + \\|w\\|\\sqrt{1-\\phi^2}\\,\\hat w_{0\\perp}

    with sgn a = sgn μ (K Eq. 34 at η_a = η_w = 1) and ŵ₀⊥ the unit part of w₀ orthogonal to β*
    (K Eq. 35; the orthogonal coefficient is never negative along the flow).

    Args:
      mu: μ, any shape T. phi: φ, shape T. delta: δ, scalar.
      w0: w(0), shape (d,), fixing the plane of motion. beta_star: β*, shape (d,).
      eta_a, eta_w: η_a, η_w > 0.

    Returns:
      (a, w) with shapes T and T + (d,).
    """
    mu, phi, delta = (_checks.as_float(x, n) for x, n in ((mu, "mu"), (phi, "phi"), (delta, "d")))
    if jnp.shape(mu) != jnp.shape(phi):
        raise ValueError(f"mu and phi must have the same shape, got {mu.shape} and {phi.shape}")
    _checks.check_shape(delta, "delta", (), "(a scalar)")
    _, w0, beta_star, eta_a, eta_w = _prepare(0.0 * delta, w0, beta_star, eta_a, eta_w)
    _, k_plus, k_minus = _kappa_pm(delta, 4.0 * eta_a * eta_w * mu**2)
    a = jnp.sign(mu) * jnp.sqrt(k_plus / (2.0 * eta_w))
    norm_w = jnp.sqrt(k_minus / (2.0 * eta_a))
    bhat = beta_star / jnp.linalg.norm(beta_star)
    perp = w0 - (w0 @ bhat) * bhat
    n_perp = jnp.linalg.norm(perp)
    e_perp = jnp.where(n_perp > 0, perp / jnp.where(n_perp > 0, n_perp, 1.0), 0.0)
    c1 = norm_w * phi
    c2 = norm_w * jnp.sqrt(jnp.clip(1.0 - phi**2, 0.0, None))
    return a, c1[..., None] * bhat + c2[..., None] * e_perp


def preconditioner(beta, delta, eta_a=1.0, eta_w=1.0) -> jax.Array:
    """Function-space preconditioner M(β, δ) of β̇ = −M Xᵀ(Xβ − y) (K Eq. 4 / 39).

    .. math::
        M = \\frac{\\kappa+\\delta}{2} I_d + \\frac{\\kappa-\\delta}{2}\\frac{\\beta\\beta^\\top}{\\|\\beta\\|^2},
        \\qquad \\kappa = \\sqrt{\\delta^2 + 4\\eta_a\\eta_w\\|\\beta\\|^2}

    equal to η_w a² I + η_a w wᵀ on the conserved surface. At β = 0 the direction β̂ is undefined;
    the rank-one term (which vanishes there unless δ < 0) is then dropped.

    Args:
      beta: β, shape (..., d). delta: δ, broadcastable to beta.shape[:-1]. eta_a, eta_w: η_a, η_w.

    Returns:
      M, shape (..., d, d).
    """
    beta = _checks.as_float(beta, "beta")
    if beta.ndim < 1:
        raise ValueError(f"beta must have shape (..., d), got {beta.shape}")
    delta = _checks.as_float(delta, "delta").astype(beta.dtype)
    eta = jnp.asarray(eta_a, beta.dtype) * jnp.asarray(eta_w, beta.dtype)
    b2 = jnp.sum(beta**2, axis=-1)
    _, k_plus, k_minus = _kappa_pm(delta, 4.0 * eta * b2)
    bhat = beta / jnp.where(b2 > 0, jnp.sqrt(b2), 1.0)[..., None]
    eye = jnp.eye(beta.shape[-1], dtype=beta.dtype)
    return 0.5 * k_plus[..., None, None] * eye + 0.5 * k_minus[..., None, None] * (
        bhat[..., :, None] * bhat[..., None, :]
    )


def ntk(a, w, X, eta_a=1.0, eta_w=1.0) -> jax.Array:
    """NTK matrix K = X (η_w a² I + η_a w wᵀ) Xᵀ of f(x) = a wᵀx on the data X (K Eq. 10).

    Args:
      a: a, shape (...). w: w, shape (..., d). X: data, shape (n, d). eta_a, eta_w: η_a, η_w.

    Returns:
      K, shape (..., n, n).
    """
    a = _checks.as_float(a, "a")
    w = _checks.as_float(w, "w")
    X = _checks.as_float(X, "X")
    if w.ndim < 1 or a.shape != w.shape[:-1]:
        raise ValueError(f"w must have shape a.shape + (d,) = {a.shape} + (d,), got {w.shape}")
    _checks.check_shape(X, "X", (None, w.shape[-1]), "(n, d)")
    Xw = w @ X.T  # (..., n)
    eta_a = jnp.asarray(eta_a, w.dtype)
    eta_w = jnp.asarray(eta_w, w.dtype)
    return eta_w * (a**2)[..., None, None] * (X @ X.T) + eta_a * Xw[..., :, None] * Xw[..., None, :]


def kernel_distance(K0, K) -> jax.Array:
    """Kernel distance S(0, t) = 1 − ⟨K₀, K_t⟩ / (‖K₀‖_F ‖K_t‖_F) (K §1, Notation; Fort et al. 2020).

    The one kernel distance of sims (:mod:`sims.piecewise_linear` re-exports it).

    Args:
      K0: kernel(s) at initialisation, shape (..., n, n), broadcastable against K.
      K: kernels, shape (..., n, n).

    Returns:
      S, the broadcast batch shape, in [0, 1] for positive semi-definite kernels.
    """
    K0 = _checks.as_float(K0, "K0")
    K = _checks.as_float(K, "K")
    if K0.ndim < 2 or K0.shape[-1] != K0.shape[-2] or K.shape[-2:] != K0.shape[-2:]:
        raise ValueError(
            f"K0 and K must be square kernels (..., n, n) of the same n, got {K0.shape}, {K.shape}"
        )
    inner = jnp.sum(K0 * K, axis=(-2, -1))
    norms = jnp.sqrt(jnp.sum(K0**2, axis=(-2, -1)) * jnp.sum(K**2, axis=(-2, -1)))
    return 1.0 - inner / norms


def implicit_bias_potential(beta, delta) -> jax.Array:
    """Potential Ψ_δ(β) of the time-warped mirror flow, η_aη_w = 1 (K Theorem 3.1, Eq. 67).

    .. math::
        \\Psi_\\delta(\\beta) = \\tfrac13\\big(\\kappa - 2\\delta\\big)\\sqrt{\\kappa + \\delta}
          + \\max\\{0, \\operatorname{sgn}(\\delta)\\tfrac{\\sqrt2}{3}|\\delta|^{3/2}\\},
        \\qquad \\kappa = \\sqrt{\\delta^2 + 4\\|\\beta\\|^2}

    For δ > 0 the two terms nearly cancel at small ‖β‖; it is evaluated as
    (κ − δ)(2p² + 2p p₀ − p₀²)/(6(p + p₀)) with p = √(κ + δ), p₀ = √(2δ) (the same value, exactly).

    Args:
      beta: β, shape (..., d). delta: δ, broadcastable to beta.shape[:-1].

    Returns:
      Ψ_δ(β) ≥ 0, shape (...), zero at β = 0.
    """
    beta = _checks.as_float(beta, "beta")
    delta = _checks.as_float(delta, "delta").astype(beta.dtype)
    kappa, kp, km = _kappa_pm(delta, 4.0 * jnp.sum(beta**2, axis=-1))
    p = jnp.sqrt(kp)
    p0 = jnp.sqrt(2.0 * jnp.maximum(delta, 0.0))
    upstream = km * (2.0 * p**2 + 2.0 * p * p0 - p0**2) / (6.0 * (p + p0))
    return jnp.where(delta > 0, upstream, (kappa - 2.0 * delta) * p / 3.0)


def implicit_bias(
    X, y, beta0, delta, eta_a=1.0, eta_w=1.0, *, a_changes_sign: bool = False
) -> jax.Array:
    """Interpolant reached by gradient flow from β₀ at balance δ, for low-rank XᵀX (K Theorem 3.1).

    .. math::
        \\beta(\\infty) = \\arg\\min_{X\\beta = y}\\; \\Psi_\\delta(\\beta)
          - \\psi_\\delta\\,\\hat\\beta_0^\\top\\beta, \\qquad
        \\psi_\\delta = \\sqrt{\\sqrt{\\delta^2 + 4\\|\\beta_0\\|^2} - \\delta}

    (Ψ_δ of K Eq. 67), a strictly convex program solved by Newton's method on the affine set
    {Xβ = y} (projected Newton steps, Armijo backtracking on the cancellation-free Ψ_δ). General
    η_a, η_w enter through the rescaling β' = √(η_aη_w) β, y' = √(η_aη_w) y of K App. A.3.
    The theorem assumes β(t) ≠ 0 along the flow (always true for δ ≥ 0 off the saddle). For δ < 0
    flows on which a changes sign, K App. A.4.4 observes that the 1-D answer flips to β_min − αv;
    equivalently β̂₀ → −β̂₀ in the linear term, which ``a_changes_sign=True`` applies (checked
    against gradient flow in the tests, beyond what the theorem proves).

    Args:
      X: data, shape (n, d) (any rank; XᵀX need not be whitened). y: targets, shape (n,).
      beta0: β₀ = a₀w₀, shape (d,), non-zero. delta: δ = η_w a₀² − η_a‖w₀‖², scalar.
      eta_a, eta_w: η_a, η_w > 0.
      a_changes_sign: whether a(t) crosses zero on the flow (only possible for δ < 0).

    Returns:
      β(∞), shape (d,).
    """
    X = _checks.as_float(X, "X")
    _checks.check_shape(X, "X", (None, None), "(n, d)")
    n, d = X.shape
    dtype = X.dtype
    sign = -1.0 if a_changes_sign else 1.0
    y = _checks.as_float(y, "y").astype(dtype)
    beta0 = _checks.as_float(beta0, "beta0").astype(dtype)
    delta = _checks.as_float(delta, "delta").astype(dtype)
    _checks.check_shape(y, "y", (n,), "(n,), matching X")
    _checks.check_shape(beta0, "beta0", (d,), "(d,), matching X")
    _checks.check_shape(delta, "delta", (), "(a scalar)")
    if _checks.is_concrete(beta0) and not np.any(np.asarray(beta0) != 0):
        raise ValueError("beta0 must be non-zero (Theorem 3.1 needs β(t) ≠ 0)")
    scale = jnp.sqrt(jnp.asarray(eta_a, dtype) * jnp.asarray(eta_w, dtype))
    _checks.check_positive(scale, "eta_a * eta_w")
    return _implicit_bias(X, scale * y, sign * scale * beta0, delta) / scale


def implicit_bias_1d(X, y, beta0, delta, *, a_changes_sign: bool = False) -> jax.Array:
    """Closed-form interpolant when null(XᵀX) is one-dimensional, η_aη_w = 1 (K Eq. 70–72).

    .. math::
        \\beta(\\infty) = \\beta_{\\min} + \\alpha v,\\quad
        \\alpha = k\\sqrt{\\tfrac{k^2+\\delta}{2} + \\sqrt{\\big(\\tfrac{k^2+\\delta}{2}\\big)^2
          + \\|\\beta_{\\min}\\|^2}},\\quad
        k = \\sqrt{\\sqrt{\\|\\beta_0\\|^2 + \\delta^2/4} - \\delta/2}\\;\\hat\\beta_0^\\top v

    where β_min = X⁺y is the minimum-norm interpolant (K writes β* for it) and v the unit null vector.
    On δ < 0 flows where a changes sign the reached point is β_min − αv (K App. A.4.4, remark).

    Args:
      X: data, shape (d − 1, d) of full row rank (so the null space is a line). y: shape (d − 1,).
      beta0: β₀, shape (d,), non-zero. delta: δ, scalar.
      a_changes_sign: whether a(t) crosses zero on the flow (then α → −α).

    Returns:
      β(∞), shape (d,).
    """
    X = _checks.as_float(X, "X")
    _checks.check_shape(X, "X", (None, None), "(n, d)")
    n, d = X.shape
    if n != d - 1:
        raise ValueError(
            f"X must have shape (d - 1, d) for a one-dimensional null space, got {X.shape}"
        )
    y = _checks.as_float(y, "y").astype(X.dtype)
    beta0 = _checks.as_float(beta0, "beta0").astype(X.dtype)
    delta = _checks.as_float(delta, "delta").astype(X.dtype)
    _checks.check_shape(y, "y", (n,), "(n,), matching X")
    _checks.check_shape(beta0, "beta0", (d,), "(d,), matching X")
    _checks.check_shape(delta, "delta", (), "(a scalar)")
    if _checks.is_concrete(X):
        sv = np.linalg.svd(np.asarray(X), compute_uv=False)
        if sv.min() <= 1e-10 * sv.max():
            raise ValueError("X must have full row rank d − 1 (one-dimensional null space)")
    _, _, vt = jnp.linalg.svd(X)
    v = vt[-1]
    beta_min = jnp.linalg.pinv(X) @ y
    b0n = jnp.linalg.norm(beta0)
    _, _, km0 = _kappa_pm(delta, 4.0 * b0n**2)
    k = jnp.sqrt(0.5 * km0) * (beta0 @ v) / b0n
    h = 0.5 * (k**2 + delta)
    alpha = k * jnp.sqrt(h + jnp.sqrt(h**2 + beta_min @ beta_min))
    return beta_min + (-alpha if a_changes_sign else alpha) * v


def verify(key: jax.Array, n_cases: int = 8) -> float:
    """Max error of :func:`solve` against the integrated raw (a, w) gradient flow, relative to ‖β*‖.

    Random whitened problems (d = 3) with initialisations cycling through δ > 0, δ = 0, δ < 0 with a
    changing sign and δ < 0 without, unequal η_a, η_w on odd cases, scales from 0.01 to 3 (see
    ``_random_cases``). Errors are max |Δa|, |Δw|, |Δβ| over 40 times in [0, 30]. Run under float64.

    Args:
      key: PRNG key. n_cases: number of random initialisations.

    Returns:
      The max error (≤ 1e-8 expected in float64).
    """
    if n_cases < 1:
        raise ValueError(f"n_cases must be a positive integer, got {n_cases}")
    X, y, beta_star, a0, w0, eta_a, eta_w = _random_cases(key, n_cases)
    t = jnp.concatenate([jnp.linspace(0.0, 2.0, 20), jnp.geomspace(2.5, 30.0, 20)]).astype(X.dtype)
    exact = jax.vmap(lambda a, w, ea, ew: solve(a, w, beta_star, t, eta_a=ea, eta_w=ew))(
        a0, w0, eta_a, eta_w
    )
    ref = jax.vmap(lambda a, w, ea, ew: _reference_flow(X, y, a, w, t, ea, ew))(
        a0, w0, eta_a, eta_w
    )
    err = jnp.maximum(
        jnp.max(jnp.abs(exact.a - ref["a"])),
        jnp.maximum(
            jnp.max(jnp.abs(exact.w - ref["w"])),
            jnp.max(jnp.abs(exact.network_map - ref["a"][..., None] * ref["w"])),
        ),
    )
    return float(err / jnp.linalg.norm(beta_star))


def _prepare(a0, w0, beta_star, eta_a, eta_w):
    a0 = _checks.as_float(a0, "a0")
    w0 = _checks.as_float(w0, "w0")
    beta_star = _checks.as_float(beta_star, "beta_star")
    _checks.check_shape(a0, "a0", (), "(a scalar)")
    _checks.check_shape(w0, "w0", (None,), "(d,)")
    d = w0.shape[0]
    _checks.check_shape(beta_star, "beta_star", (d,), "(d,), matching w0")
    dtype = jnp.result_type(a0, w0, beta_star)
    eta_a = _checks.as_float(eta_a, "eta_a").astype(dtype)
    eta_w = _checks.as_float(eta_w, "eta_w").astype(dtype)
    _checks.check_shape(eta_a, "eta_a", (), "(a scalar)")
    _checks.check_shape(eta_w, "eta_w", (), "(a scalar)")
    for x, name in ((a0, "a0"), (w0, "w0"), (beta_star, "beta_star"), (eta_a, "eta_a")):
        _checks.check_finite(x, name)
    _checks.check_finite(eta_w, "eta_w")
    _checks.check_positive(eta_a, "eta_a")
    _checks.check_positive(eta_w, "eta_w")
    if _checks.is_concrete(beta_star) and not np.any(np.asarray(beta_star) != 0):
        raise ValueError("beta_star must be non-zero (β* = Xᵀy = 0 leaves nothing to learn)")
    return a0.astype(dtype), w0.astype(dtype), beta_star.astype(dtype), eta_a, eta_w


def _kappa_pm(delta, c):
    """(κ, κ + δ, κ − δ) for κ = √(δ² + c), c ≥ 0, without cancellation: (κ + δ)(κ − δ) = c.

    The larger of κ ± δ is κ + |δ|, the smaller c over it; written per sign of δ without |δ|, so
    the derivative at δ = 0 is the true one (d(κ ± δ)/dδ = ±1 there). The one place for this trick.
    """
    kappa = jnp.sqrt(delta**2 + c)
    pos = delta >= 0
    big = kappa + jnp.where(pos, delta, -delta)
    small = jnp.where(big > 0, c / jnp.where(big > 0, big, 1.0), 0.0)
    return kappa, jnp.where(pos, big, small), jnp.where(pos, small, big)


def _one_minus_exp_over(x):
    """(1 − e^{−x})/x for x ≥ 0, smooth through x = 0 (value 1, derivative −½)."""
    x = jnp.where(x >= 0, x, 0.0)  # the unused branch of a where may pass x < 0
    small = x < 1e-8
    xs = jnp.where(small, 1.0, x)
    return jnp.where(small, 1.0 - 0.5 * x, -jnp.expm1(-xs) / xs)


def _solve(a0, w0, beta_star, t, eta_a, eta_w) -> Trajectory:
    s2 = beta_star @ beta_star
    q0 = w0 @ beta_star
    w_perp0 = w0 - (q0 / s2) * beta_star
    delta = eta_w * a0**2 - eta_a * (w0 @ w0)
    D, dpD, Dmd = _kappa_pm(delta, 4.0 * eta_a * eta_w * s2)  # D, δ + D, D − δ  (all > 0)
    nu_p = Dmd / (2.0 * eta_a)  # ν₊ = (D − δ)/(2η_a)
    nu_m = -dpD / (2.0 * eta_a)  # ν₋ = −(D + δ)/(2η_a)
    A = eta_a * (q0 - nu_m * a0) / D
    B = eta_a * (q0 - nu_p * a0) / D

    # Five transcendentals per time: e^{−(δ+D)t/2}, e^{−(D−δ)t/2} and three expm1 (D = mean of the two).
    e_half = jnp.exp(-0.5 * dpD * t)  # e^{−(δ+D)t/2}
    p_half = jnp.exp(-0.5 * Dmd * t)  # e^{−(D−δ)t/2}
    E = e_half**2  # e^{−(δ+D)t}
    eD = e_half * p_half  # e^{−Dt}
    # (e^{−Dt} − e^{−(δ+D)t})/δ = e^{−max(D, δ+D)t} t (1 − e^{−|δ|t})/(|δ|t) > 0; each branch is
    # smooth and they agree at δ = 0, so the derivative there is right (|δ| itself has a kink).
    T2 = t * jnp.where(
        delta > 0, eD * _one_minus_exp_over(delta * t), E * _one_minus_exp_over(-delta * t)
    )
    T1 = -jnp.expm1(-dpD * t) / dpD  # (1 − e^{−(δ+D)t})/(δ + D)
    decay_b = -jnp.expm1(-Dmd * t) / Dmd  # (1 − e^{−(D−δ)t})/(D − δ)
    lam_m2 = E + 2.0 * eta_w * (A**2 * T1 - 2.0 * A * B * T2 + B**2 * E * decay_b)
    lam = jax.lax.rsqrt(lam_m2)
    a_gen = lam * (A - B * eD)
    q_gen = lam * (nu_p * A - nu_m * B * eD)
    r_gen = lam * e_half

    # A = 0: the initialisation lies on the basin boundary (K Eq. 33) and flows into a saddle; λ⁻²
    # then decays like e^{−(δ+D)t}, so divide it out analytically. Includes the saddles a = q = 0.
    g0 = 1.0 + 2.0 * eta_w * B**2 * decay_b
    lam_e = p_half * jax.lax.rsqrt(g0)  # λ e^{−Dt}
    on_boundary = A == 0
    a = jnp.where(on_boundary, -B * lam_e, a_gen)
    q = jnp.where(on_boundary, -nu_m * B * lam_e, q_gen)
    r = jnp.where(on_boundary, jax.lax.rsqrt(g0), r_gen)
    # Materialise (a, q, r) once: without the barrier XLA fuses the transcendentals above into every
    # output below and evaluates them up to five times (3× slower under vmap on CPU).
    a, q, r = jax.lax.optimization_barrier((a, q, r))

    w = (q / s2)[..., None] * beta_star + r[..., None] * w_perp0
    norm_w = jnp.sqrt(q**2 / s2 + r**2 * (w_perp0 @ w_perp0))
    pos_norm = norm_w > 0
    phi = jnp.where(pos_norm, q / (jnp.sqrt(s2) * jnp.where(pos_norm, norm_w, 1.0)), 0.0)
    phi = jnp.clip(phi, -1.0, 1.0)
    return Trajectory(
        a=a, w=w, mu=a * norm_w, phi=phi, network_map=a[..., None] * w, delta=delta, t=t
    )


_solve_jit = jax.jit(_solve)


def _bias_objective(beta, delta, lin):
    return implicit_bias_potential(beta, delta) - lin @ beta


def _bias_grad_hess(beta, delta):
    # ∇Ψ = 2β/√(κ+δ);  ∇²Ψ = (2/√(κ+δ)) (I − β̂β̂ᵀ) + (√(κ+δ)/κ) β̂β̂ᵀ  (K Eq. 59–65).
    b2 = beta @ beta
    kappa, kp, _ = _kappa_pm(delta, 4.0 * b2)
    p = jnp.sqrt(kp)
    bhat = beta / jnp.sqrt(b2)
    P = jnp.outer(bhat, bhat)
    eye = jnp.eye(beta.shape[0], dtype=beta.dtype)
    return 2.0 * beta / p, (2.0 / p) * (eye - P) + (p / kappa) * P


@jax.jit
def _implicit_bias(X, y, beta0, delta):
    dtype = X.dtype
    d = X.shape[1]
    X_pinv = jnp.linalg.pinv(X)
    proj = jnp.eye(d, dtype=dtype) - X_pinv @ X  # projector onto null(X)
    beta_min = X_pinv @ y
    b0n = jnp.linalg.norm(beta0)
    _, _, km0 = _kappa_pm(delta, 4.0 * b0n**2)
    lin = jnp.sqrt(km0) * beta0 / b0n  # ψ_δ β̂₀

    def newton(_, beta):
        g, H = _bias_grad_hess(beta, delta)
        g = g - lin
        Hr = proj @ H @ proj + (jnp.eye(d, dtype=dtype) - proj)
        step = -proj @ jnp.linalg.solve(Hr, proj @ g)
        f0 = _bias_objective(beta, delta, lin)
        slope = g @ step

        def shrink(state):
            s, _ = state
            return 0.5 * s, _bias_objective(beta + 0.5 * s * step, delta, lin)

        def keep_going(state):  # Armijo backtracking
            s, f = state
            return (f > f0 + 1e-4 * s * slope) & (s > 1e-12)

        s, _ = jax.lax.while_loop(
            keep_going, shrink, (jnp.ones((), dtype), _bias_objective(beta + step, delta, lin))
        )
        new = beta + s * step
        return jnp.where(jnp.all(jnp.isfinite(new)), new, beta)

    # Start on the interpolating set, along the component that keeps β₀'s direction.
    start = beta_min + proj @ beta0
    return jax.lax.fori_loop(0, 60, newton, start)


def _random_cases(key: jax.Array, n_cases: int, d: int = 3):
    """Random whitened problem and ``n_cases`` initialisations cycling through the δ regimes.

    Regimes (case i mod 4): upstream δ > 0; exactly balanced δ = 0; downstream with a changing sign
    (a₀ > 0 small, w₀ pointing away from β*); downstream with a keeping its sign. Odd cases use
    unequal η_a, η_w ∈ [e⁻¹, e]; scales are log-uniform in [0.01, 3].

    Returns:
      (X, y, beta_star, a0 (N,), w0 (N, d), eta_a (N,), eta_w (N,)) with XᵀX = I.
    """
    kx, ky, ke, ks, ku = jax.random.split(key, 5)
    X, _ = jnp.linalg.qr(jax.random.normal(kx, (d + 3, d)))
    y = jax.random.normal(ky, (d + 3,))
    beta_star = X.T @ y
    s = jnp.linalg.norm(beta_star)
    bhat = beta_star / s
    idx = jnp.arange(n_cases)
    unequal = (idx % 2 == 1)[:, None]
    etas = jnp.where(
        unequal, jnp.exp(jax.random.uniform(ke, (n_cases, 2), minval=-1.0, maxval=1.0)), 1.0
    )
    eta_a, eta_w = etas[:, 0], etas[:, 1]
    scale = jnp.exp(jax.random.uniform(ks, (n_cases,), minval=jnp.log(0.01), maxval=jnp.log(3.0)))
    u = jax.random.normal(ku, (n_cases, d))
    u = u / jnp.linalg.norm(u, axis=1, keepdims=True)
    away = u - 2.0 * jnp.maximum(u @ bhat, 0.0)[:, None] * bhat - bhat  # wᵀβ* < −‖β*‖ · scale
    regime = idx % 4
    a0 = jnp.select(
        [regime == 0, regime == 1, regime == 2],
        [2.0 * scale, scale * jnp.sqrt(eta_a), 0.3 * scale],
        -0.5 * scale,
    )
    w0 = scale[:, None] * jnp.select(
        [(regime == 0)[:, None], (regime == 1)[:, None], (regime == 2)[:, None]],
        [0.5 * u, jnp.sqrt(eta_w)[:, None] * u, away],
        2.0 * u,
    )
    return X, y, beta_star, a0, w0, eta_a, eta_w


def _reference_flow(X, y, a0, w0, t, eta_a, eta_w):
    """Raw (a, w) gradient flow of ½‖X a w − y‖² from :func:`sims.gradient_flow`."""
    return gradient_flow(
        loss, {"a": a0, "w": w0}, t, (X, y), lr={"a": eta_a, "w": eta_w}, atol=1e-16
    )
