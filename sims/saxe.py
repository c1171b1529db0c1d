r"""Two-layer linear network from task-aligned init: Saxe et al.'s decoupled modes (T §3.5, App. A.2.3).

Shapes (used throughout, the same as :mod:`sims.lambda_balanced`): input x ∈ R^d with
E[xxᵀ] = I (whitened), output y ∈ R^c, hidden width h,

    W1: (h, d),   W2: (c, h),   f(x) = W2 W1 x,   Σ_yx = E[y xᵀ]: (c, d) = U diag(ρ) Vᵀ,

U: (c, r), V: (d, r), r = min(c, d) (thin SVD; T Eq. A.30 writes the transpose, E[x yᵀ] = UᵀPV).
Loss L = ½E‖f(x) − y‖² = ½‖W2W1 − Σ_yx‖_F² + const, gradient flow Ẇ = −η ∇L (η = ``eta``).

**Task-aligned init** (T §A.2.3): W1(0) = R diag(α₁) Vᵀ, W2(0) = U diag(α₂) Rᵀ with R: (h, r)
having orthonormal (or zero) columns. The flow keeps this form and each mode i is the scalar
diagonal network of :mod:`sims.diagonal` with σ² = 1 and target S = ρ_i (T Eq. A.35–A.38):

.. math::  \dot α_1 = −η α_2 (α_1 α_2 − ρ),\qquad \dot α_2 = −η α_1 (α_1 α_2 − ρ).

The mode strength u_i = α₁α₂ = u_iᵀ W2 W1 v_i is sigmoidal for balanced init α₁ = α₂ = α
(T Eq. 3.15 / A.39): u/ρ = α²/ρ = 1/(1 + (ρ/α²(0) − 1)e^{−2ηρt}); unbalanced α₁ ≠ α₂ is also exact
(the diagonal network's general closed form). The network map is W2W1(t) = U diag(u(t)) Vᵀ
(T Eq. A.40) and W1W1ᵀ − W2ᵀW2 = R diag(α₁² − α₂²) Rᵀ is conserved (T Eq. A.29, transposed to these
shapes). The printed rate 2ρ_i of Eq. A.39 agrees with the ½-MSE integrator (checked by ``verify``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sims import _checks
from sims import diagonal as _diagonal
from sims.gradient_flow import gradient_flow

__all__ = [
    "SaxeInit",
    "SaxeTrajectory",
    "aligned_init",
    "solve",
    "conserved",
    "loss",
    "verify",
]


class SaxeInit(NamedTuple):
    """Two-layer linear-network weights.

    Attributes:
      w1: first layer W1, shape ``(h, d)``.
      w2: second layer W2, shape ``(c, h)``.
    """

    w1: jax.Array
    w2: jax.Array


class SaxeTrajectory(NamedTuple):
    """Exact trajectory of a task-aligned two-layer linear network (``T`` = shape of ``t``).

    Attributes:
      t: times, shape ``T``.
      rho: singular values ρ_i of Σ_yx (descending), shape ``(r,)``.
      strength: mode strengths u_i(t) = u_iᵀ W2W1 v_i (= α_i² when balanced), shape ``T + (r,)``.
      network_map: W2(t) W1(t), shape ``T + (c, d)``.
      w1: W1(t), shape ``T + (h, d)``.
      w2: W2(t), shape ``T + (c, h)``.
    """

    t: jax.Array
    rho: jax.Array
    strength: jax.Array
    network_map: jax.Array
    w1: jax.Array
    w2: jax.Array


def solve(
    w1_0: jax.Array,
    w2_0: jax.Array,
    sigma_yx: jax.Array,
    t: jax.Array,
    *,
    eta: jax.Array | float = 1.0,
) -> SaxeTrajectory:
    r"""Exact gradient flow of f = W2W1x from a task-aligned init (Saxe et al.; T Eq. 3.15, A.39–A.40).

    .. math::  \frac{u_i(t)}{ρ_i} = \frac{1}{1 + (ρ_i/u_i(0) − 1)e^{−2ηρ_i t}}\ \ (α_1 = α_2),
               \qquad W_2W_1(t) = U\,\mathrm{diag}(u(t))\,V^\top

    Unbalanced aligned inits (α₁ ≠ α₂ per mode) are solved exactly too (:func:`sims.diagonal.solve`
    with σ² = 1, S = ρ_i).

    Args:
      w1_0: W1(0), shape ``(h, d)``, task-aligned (see :func:`aligned_init`; checked when concrete).
      w2_0: W2(0), shape ``(c, h)``.
      sigma_yx: Σ_yx = E[y xᵀ], shape ``(c, d)`` (whitened input E[xxᵀ] = I).
      t: times t ≥ 0, any shape ``T``.
      eta: learning rate η > 0 (scalar) of the flow on :func:`loss`.

    Returns:
      :class:`SaxeTrajectory`.
    """
    lr = eta
    sigma_yx = _as_matrix(sigma_yx, "sigma_yx")
    w1_0 = _as_matrix(w1_0, "w1_0")
    w2_0 = _as_matrix(w2_0, "w2_0")
    c, d = sigma_yx.shape
    h = w1_0.shape[0]
    _checks.check_shape(w1_0, "w1_0", (None, d), f"(h, d) with d = {d} from sigma_yx")
    _checks.check_shape(w2_0, "w2_0", (c, h), f"(c, h) with c = {c}, h = {h}")
    t = _checks.as_float(t, "t")
    _checks.check_finite(t, "t")
    _checks.check_positive(t, "t", strict=False)
    sigma_yx, w1_0, w2_0, t, lr = _checks.promote(
        sigma_yx=sigma_yx, w1_0=w1_0, w2_0=w2_0, t=t, lr=lr
    )
    u, rho, v, r_dir, alpha1, alpha2 = _modes(sigma_yx, w1_0, w2_0)
    _check_aligned(w1_0, w2_0, u, v, r_dir, alpha1, alpha2)
    modes = _diagonal.solve(alpha1, alpha2, 1.0, rho, t, eta=lr)
    return _weights(u, rho, v, r_dir, modes)


def loss(params: SaxeInit, sigma_yx: jax.Array) -> jax.Array:
    """½‖W2W1 − Σ_yx‖_F² = ½E‖W2W1x − y‖² − const for whitened x, for the integrator.

    Args:
      params: :class:`SaxeInit` ``(w1 (h, d), w2 (c, h))``.
      sigma_yx: Σ_yx, shape ``(c, d)``.
    """
    return 0.5 * jnp.sum((params.w2 @ params.w1 - sigma_yx) ** 2)


def aligned_init(
    sigma_yx: jax.Array,
    hidden: int,
    scale: jax.Array | float,
    scale2: jax.Array | float | None = None,
    rotation: jax.Array | None = None,
) -> SaxeInit:
    r"""Task-aligned initialisation W1 = R diag(α₁) Vᵀ, W2 = U diag(α₂) Rᵀ (T §A.2.3).

    Only the first min(h, r) modes get a nonzero init when the hidden layer is narrower than r.

    Args:
      sigma_yx: input-output correlation Σ_yx = E[y xᵀ], shape ``(c, d)``.
      hidden: hidden width h ≥ 1 (static).
      scale: α₁ — first-layer mode scale, scalar or shape ``(r,)``.
      scale2: α₂ — second-layer mode scale (default ``scale``: balanced, T Eq. A.31).
      rotation: R, shape ``(h, min(h, r))`` with orthonormal columns (default: the first columns
        of the identity).

    Returns:
      :class:`SaxeInit` ``(w1 (h, d), w2 (c, h))``.
    """
    sigma_yx = _as_matrix(sigma_yx, "sigma_yx")
    if not isinstance(hidden, int | np.integer) or hidden < 1:
        raise ValueError(f"hidden must be a positive int, got {hidden!r}")
    u, rho, v = _svd(sigma_yx)
    r = rho.shape[0]
    k = min(hidden, r)
    alpha1 = jnp.broadcast_to(jnp.asarray(scale, sigma_yx.dtype), (r,))[:k]
    alpha2 = (
        alpha1
        if scale2 is None
        else jnp.broadcast_to(jnp.asarray(scale2, sigma_yx.dtype), (r,))[:k]
    )
    if rotation is None:
        rotation = jnp.eye(hidden, k, dtype=sigma_yx.dtype)
    rotation = _checks.as_float(rotation, "rotation").astype(sigma_yx.dtype)
    _checks.check_shape(rotation, "rotation", (hidden, k), "(h, min(h, r))")
    w1 = (rotation * alpha1) @ v[:, :k].T
    w2 = (u[:, :k] * alpha2) @ rotation.T
    return SaxeInit(w1=w1, w2=w2)


def conserved(w1: jax.Array, w2: jax.Array) -> jax.Array:
    r"""The conserved quantity W1W1ᵀ − W2ᵀW2 (T Eq. A.29 in the (h, d), (c, h) shapes).

    Args:
      w1: W1, shape ``(..., h, d)``.
      w2: W2, shape ``(..., c, h)``.

    Returns:
      shape ``(..., h, h)``.
    """
    return w1 @ jnp.swapaxes(w1, -1, -2) - jnp.swapaxes(w2, -1, -2) @ w2


def verify(key: jax.Array, n_cases: int = 8) -> float:
    """Max error of :func:`solve` against :func:`sims.gradient_flow` of (W1, W2), relative to ρ₁.

    Random Σ_yx (c = 3, d = 4, h = 5), random hidden rotation R; cases cycle through balanced small
    init (T Eq. A.39), tiny (1e-8) balanced, unbalanced α₁ ≠ α₂ with mixed signs, and O(1) init
    with a zero mode; 50 times up to past the slowest emergence. Errors of W2W1 relative to ρ₁,
    of W1, W2 relative to max(√ρ₁, max|W(0)|). Run under float64.
    """
    c, d, h = 3, 4, 5
    worst = 0.0
    for i in range(n_cases):
        ks, kr, ka, kb = jax.random.split(jax.random.fold_in(key, i), 4)
        sigma_yx = jax.random.normal(ks, (c, d))
        rot, _ = jnp.linalg.qr(jax.random.normal(kr, (h, c)))
        rho = jnp.linalg.svd(sigma_yx, compute_uv=False)
        kind = i % 4
        if kind == 0:
            a1 = a2 = 1e-3 * jnp.ones(c)
        elif kind == 1:
            # Tiny init. Not 1e-12 here: the raw-weight integrators (diffrax and scipy's DOP853
            # alike) leave the aligned manifold by round-off, which the saddle amplifies to ~1e-8
            # by the end of the plateau; the closed form itself is tested at 1e-12.
            a1 = a2 = 1e-8 * jnp.exp(jax.random.normal(ka, (c,)))
        elif kind == 2:
            a1 = 0.3 * jax.random.normal(ka, (c,))
            a2 = 0.05 * jax.random.normal(kb, (c,))
        else:
            a1 = jax.random.normal(ka, (c,)).at[-1].set(0.0)
            a2 = jax.random.normal(kb, (c,)).at[-1].set(0.0)
        init = aligned_init(sigma_yx, h, a1, a2, rotation=rot)
        live = jnp.abs(a1 * a2) > 0  # a zero mode stays at the saddle: no time-scale of its own
        u0 = jnp.where(live, jnp.abs(a1 * a2), 1.0)
        t_end = float(jnp.max(jnp.where(live, (jnp.log(rho / u0) + 10.0) / rho, 0.0)))
        t = jnp.linspace(0.0, t_end, 50)
        flow = _reference_flow(init, t, sigma_yx)
        exact = solve(init.w1, init.w2, sigma_yx, t)
        s_w = max(float(jnp.sqrt(rho[0])), float(jnp.max(jnp.abs(init.w1))))
        err = max(
            float(jnp.max(jnp.abs(exact.network_map - flow.w2 @ flow.w1)) / rho[0]),
            float(jnp.max(jnp.abs(exact.w1 - flow.w1)) / s_w),
            float(jnp.max(jnp.abs(exact.w2 - flow.w2)) / s_w),
        )
        worst = max(worst, err)
    return worst


# The two halves of solve around its concrete alignment check, one program each (eagerly, every
# primitive would compile on its own).
@jax.jit
def _modes(sigma_yx, w1_0, w2_0):
    """U, ρ, V of Σ_yx and the init's modes R, α₁(0), α₂(0) (:func:`_mode_decomposition`)."""
    u, rho, v = _svd(sigma_yx)
    return (u, rho, v, *_mode_decomposition(w1_0, w2_0, u, v))


@jax.jit
def _weights(u, rho, v, r_dir, modes) -> SaxeTrajectory:
    """W1(t) = R diag(α₁(t)) Vᵀ, W2(t) = U diag(α₂(t)) Rᵀ, W2W1(t) = U diag(u(t)) Vᵀ."""
    w1 = jnp.einsum("hr,...r,dr->...hd", r_dir, modes.a, v)
    w2 = jnp.einsum("cr,...r,hr->...ch", u, modes.b, r_dir)
    network_map = jnp.einsum("cr,...r,dr->...cd", u, modes.network_map, v)
    return SaxeTrajectory(
        t=modes.t, rho=rho, strength=modes.network_map, network_map=network_map, w1=w1, w2=w2
    )


def _svd(sigma_yx: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Thin SVD Σ_yx = U diag(ρ) Vᵀ: U (c, r), ρ (r,), V (d, r)."""
    u, rho, vt = jnp.linalg.svd(sigma_yx, full_matrices=False)
    return u, rho, vt.T


def _as_matrix(x, name: str) -> jax.Array:
    x = _checks.as_float(x, name)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {x.shape}")
    _checks.check_finite(x, name)
    return x


def _mode_decomposition(w1, w2, u, v):
    """Per mode i: the hidden direction r_i and α₁ = r_iᵀW1v_i, α₂ = r_iᵀW2ᵀu_i (T Eq. A.32)."""
    x = w1 @ v  # (h, r): column i = α₁ r_i
    y = w2.T @ u  # (h, r): column i = α₂ r_i
    nx, ny = jnp.linalg.norm(x, axis=0), jnp.linalg.norm(y, axis=0)
    longer = nx >= ny
    ref = jnp.where(longer, x, y)  # the longer one fixes r_i best
    # Its own norm (not max(nx, ny), whose derivative splits between the two at a balanced init).
    nref = jnp.where(longer, nx, ny)
    # A mode at round-off level of the largest one is a saddle (α₁ = α₂ = 0), not a direction.
    nonzero = nref > 8 * jnp.finfo(x.dtype).eps * jnp.max(nref)
    r_dir = ref / jnp.where(nonzero, nref, 1.0)
    r_dir = jnp.where(nonzero, r_dir, 0.0)
    alpha1 = jnp.sum(r_dir * x, axis=0)
    alpha2 = jnp.sum(r_dir * y, axis=0)
    alpha1 = jnp.where(nonzero, alpha1, 0.0)
    alpha2 = jnp.where(nonzero, alpha2, 0.0)
    return r_dir, alpha1, alpha2


def _check_aligned(w1, w2, u, v, r_dir, alpha1, alpha2) -> None:
    """Raise unless W1 = R diag(α₁)Vᵀ, W2 = U diag(α₂)Rᵀ with orthonormal nonzero columns of R."""
    if not all(_checks.is_concrete(z) for z in (w1, w2, u, v)):
        return
    w1n, w2n = np.asarray(w1), np.asarray(w2)
    rd = np.asarray(r_dir)
    w1_hat = (rd * np.asarray(alpha1)) @ np.asarray(v).T
    w2_hat = (np.asarray(u) * np.asarray(alpha2)) @ rd.T
    g = rd.T @ rd
    nz = np.diag(g) > 0
    g_err = np.abs(g - np.diag(nz.astype(g.dtype)))
    scale = max(
        np.abs(w1n).max(initial=0.0), np.abs(w2n).max(initial=0.0), np.finfo(w1n.dtype).tiny
    )
    tol = np.sqrt(np.finfo(w1n.dtype).eps)
    if (
        np.abs(w1n - w1_hat).max(initial=0.0) > tol * scale
        or np.abs(w2n - w2_hat).max(initial=0.0) > tol * scale
        or g_err.max(initial=0.0) > tol
    ):
        raise ValueError(
            "w1_0, w2_0 must be task-aligned: W1 = R diag(α1) Vᵀ (h, d), W2 = U diag(α2) Rᵀ (c, h) "
            "with Σ_yx = U diag(ρ) Vᵀ and orthonormal columns of R (build them with aligned_init)"
        )


@jax.jit
def _reference_flow(params0: SaxeInit, t: jax.Array, sigma_yx: jax.Array) -> SaxeInit:
    # atol far below the 1e-12 inits keeps the error control relative on the plateau.
    return gradient_flow(loss, params0, t, sigma_yx, atol=1e-30)
