"""λ-balanced two-layer linear network: exact gradient flow from any λ-balanced init.

Convention (checked against :func:`sims.gradient_flow`): f(x) = W₂W₁x with W₁ ∈ R^{h×d},
W₂ ∈ R^{c×h}, whitened input E[xxᵀ] = I_d, Σ_yx = E[y xᵀ] ∈ R^{c×d}, unit-rate gradient flow on
L = ½E‖f(x) − y‖²:

.. math::
    \\dot W_1 = W_2^\\top(\\Sigma_{yx} - W_2W_1), \\qquad \\dot W_2 = (\\Sigma_{yx} - W_2W_1)W_1^\\top,

which conserves W₂ᵀW₂ − W₁W₁ᵀ; the init is **λ-balanced** when it equals λI_h (position paper
Eq. 14 / Definition G.1; Dominé et al. 2024). Names: ``sigma_yx`` Σ_yx, ``lam`` λ, ``Q`` = [W₁ᵀ; W₂]
∈ R^{(d+c)×h}, ``F`` = [[−λ/2·I_d, Σ_yxᵀ], [Σ_yx, λ/2·I_c]].

**Solution.** λ-balance turns the flow into dQ/dt = FQ − ½QQᵀQ, so X = QQᵀ solves the matrix
Riccati equation Ẋ = FX + XF − X², whose solution is (SPEC §1.4)

.. math::
    X(t) = e^{Ft}Q_0\\,[I_h + Q_0^\\top G(t) Q_0]^{-1} Q_0^\\top e^{Ft},
    \\qquad G(t) = \\int_0^t e^{2Fs}\\,ds .

W₂W₁ is the lower-left c×d block of X, W₁ᵀW₁ and W₂W₂ᵀ its diagonal blocks.

**Stable evaluation.** Evaluated as written this loses digits from t ≈ 10 and is singular by
t ≈ 20–200: the inverted bracket mixes e^{2ft}-sized growing directions with O(1) ones. Here, in
F's eigenbasis (F = V diag(f) Vᵀ, f sorted descending, Q̃ = VᵀQ₀, g_i = (e^{2f_it} − 1)/2f_i):

1. X = Z Zᵀ with Z = E Q̃ R⁻¹, where H = [I_h; g^{1/2}Q̃] = ΩR (QR), so HᵀH = the bracket.
2. A hidden-space rotation W with Q̃W = L₀ lower-trapezoidal (QR of Q̃ᵀ; X is invariant under
   Q₀ → Q₀W) makes H W = [W; g^{1/2}L₀] *graded*: column j's entries in growing rows i ≥ j are
   e^{ℓ_i}L₀_ij with ℓ_i = log g_i^{1/2} non-increasing in i. Each column is then divided by its
   largest entry, computed in log space (QR is invariant to column scaling), so nothing overflows
   even at t = 1e4 and the Householder QR sees no cancellation between scales.
3. Rows with f_it > ½ use the orthonormal factor: Z_i = (e^{f_it}/g_i^{1/2}) Ω_i, where
   e^{f_it}g_i^{-1/2} = (2f_i/(1 − e^{−2f_it}))^{1/2} is bounded; the other rows (decaying, zero and
   short times) use the triangular solve Z_i = e^{f_it}(L₀ R⁻¹)_i, whose factor e^{f_it} ≤ e^{1/2}.

The columns of Z give Q(t) = V Z up to a rotation of the hidden space (the raw weights are defined
only up to that rotation; X is exact).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from sims import _checks
from sims.gradient_flow import gradient_flow

__all__ = [
    "Solution",
    "PhaseDiagram",
    "solve",
    "balanced_init",
    "imbalance",
    "ntk_kernel_distance",
    "phase_diagram",
    "verify",
]


class Solution(NamedTuple):
    """Exact λ-balanced trajectory at the requested times (``T = t.shape``)."""

    network: jax.Array  # T + (c, d)   W₂W₁(t), the network map
    w1tw1: jax.Array  # T + (d, d)     W₁ᵀW₁(t) (upper-left block of X)
    w2w2t: jax.Array  # T + (c, c)     W₂W₂ᵀ(t) (lower-right block of X)
    q: jax.Array  # T + (d + c, h)     Q(t) = [W₁ᵀ; W₂](t) up to a rotation of the hidden space
    lam: jax.Array  # ()               λ = (W₂ᵀW₂ − W₁W₁ᵀ)_ii (conserved)
    kernel_distance: jax.Array  # T    NTK kernel distance from t = 0 (Fort et al. 2020)


class PhaseDiagram(NamedTuple):
    """Kernel distance and loss over a (relative scale λ, absolute scale) grid (position Fig. 6a)."""

    lams: jax.Array  # (nλ,)                 relative scales λ
    scales: jax.Array  # (ns,)               absolute scales (see :func:`balanced_init`)
    kernel_distance: jax.Array  # (nλ, ns)   NTK kernel distance S(0, t_end)
    loss: jax.Array  # (nλ, ns)              ½‖W₂W₁ − Σ_yx‖²_F at t_end (excess loss)


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def imbalance(W1: jax.Array, W2: jax.Array) -> tuple[jax.Array, jax.Array]:
    """λ and the violation of λ-balance, W₂ᵀW₂ − W₁W₁ᵀ = λI_h (position paper, Definition G.1).

    Args:
      W1: (h, d) first layer W₁.
      W2: (c, h) second layer W₂.

    Returns:
      (λ, violation): λ = tr(W₂ᵀW₂ − W₁W₁ᵀ)/h and max|W₂ᵀW₂ − W₁W₁ᵀ − λI| (both scalars).
    """
    C = W2.T @ W2 - W1 @ W1.T
    lam = jnp.trace(C) / C.shape[0]
    return lam, jnp.max(jnp.abs(C - lam * jnp.eye(C.shape[0], dtype=C.dtype)))


def _prepare(W1_0, W2_0, sigma_yx, t):
    W1 = _checks.as_float(W1_0, "W1_0")
    W2 = _checks.as_float(W2_0, "W2_0")
    sig = _checks.as_float(sigma_yx, "sigma_yx")
    t = _checks.as_float(t, "t")
    _checks.check_shape(W1, "W1_0", (None, None), "(h, d)")
    h, d = W1.shape
    _checks.check_shape(W2, "W2_0", (None, h), f"(c, h) with h = {h} from W1_0")
    c = W2.shape[0]
    _checks.check_shape(sig, "sigma_yx", (c, d), f"(c, d) = ({c}, {d}) from W2_0, W1_0")
    if min(h, d, c) == 0:
        raise ValueError(f"dimensions must be positive, got h={h}, d={d}, c={c}")
    for x, name in ((W1, "W1_0"), (W2, "W2_0"), (sig, "sigma_yx"), (t, "t")):
        _checks.check_finite(x, name)
    _checks.check_positive(t, "t", strict=False)
    dtype = jnp.result_type(W1, W2, sig, t)
    W1, W2, sig, t = (x.astype(dtype) for x in (W1, W2, sig, t))
    if _checks.is_concrete(W1) and _checks.is_concrete(W2):
        lam, viol = imbalance(W1, W2)
        scale = max(float(jnp.max(jnp.abs(W2.T @ W2))), float(jnp.max(jnp.abs(W1 @ W1.T))))
        tol = 1e3 * float(jnp.finfo(dtype).eps) * max(scale, float(jnp.finfo(dtype).tiny))
        if float(viol) > tol:
            raise ValueError(
                "W1_0, W2_0 are not λ-balanced: W2ᵀW2 − W1W1ᵀ − λI has max |entry| "
                f"{float(viol):.3e} for λ = {float(lam):.6g} (allowed {tol:.1e}); "
                "use balanced_init or rebalance the layers"
            )
    return W1, W2, sig, t


# ---------------------------------------------------------------------------------------------
# The closed form
# ---------------------------------------------------------------------------------------------


def _log_half_g(f, t):
    """ℓ = ½ log g, g = (e^{2ft} − 1)/(2f) (= t at f = 0), without overflow: −∞ at t = 0."""
    x = 2.0 * jnp.abs(f) * t
    small = x < 1e-8
    xs = jnp.where(small, 1.0, x)
    log_h = jnp.where(small, -0.5 * x, jnp.log(-jnp.expm1(-xs) / xs))  # log((1 − e^{−x})/x)
    return 0.5 * (2.0 * jnp.maximum(f, 0.0) * t + jnp.log(t) + log_h)


def _at_time(f, Wm, L0, t):
    """Z(t) (n × h) in F's eigenbasis with X̃(t) = Z Zᵀ (steps 1–3 of the module docstring)."""
    n, h = L0.shape
    ell = _log_half_g(f, t)  # (n,)
    # log|entry| of the lower block e^{ℓ_i} L0_ij; only i ≥ j can be non-zero (L0 lower-trapezoid).
    rows = jnp.arange(n)[:, None]
    cols = jnp.arange(h)[None, :]
    tri = rows >= cols
    abs_l0 = jnp.abs(L0)
    log_l = jnp.where(
        tri & (abs_l0 > 0), ell[:, None] + jnp.log(jnp.where(abs_l0 > 0, abs_l0, 1.0)), -jnp.inf
    )
    # Column scale m_j = log max(1, max_i e^{ℓ_i}|L0_ij|): the W block is ≤ 1 in magnitude.
    m = jnp.maximum(jnp.max(log_l, axis=0), 0.0)  # (h,)
    lower = jnp.sign(L0) * jnp.exp(log_l - m[None, :])
    upper = Wm * jnp.exp(-m)[None, :]
    omega, R = jnp.linalg.qr(jnp.concatenate([upper, lower], axis=0))
    # Ω-form for growing rows: Z_i = e^{f_i t − ℓ_i} Ω_i (bounded factor).
    z_omega = jnp.exp(f * t - ell)[:, None] * omega[h:]
    # Triangular form: Z = E L0 diag(e^{−m}) R⁻¹, i.e. Zᵀ = R⁻ᵀ (L0 diag(e^{−m}))ᵀ E.
    rhs = (L0 * jnp.exp(-m)[None, :]).T
    z_tri = jnp.exp(jnp.minimum(f * t, 0.5))[:, None] * jsl.solve_triangular(R.T, rhs, lower=True).T
    use_omega = (f * t > 0.5)[:, None]
    return jnp.where(use_omega, z_omega, z_tri)


_CHUNK = 256  # time points per batched QR (see _solve)


@jax.custom_batching.custom_vmap
def _solve_unbatched(W1, W2, sig, t):
    return _solve_body(W1, W2, sig, t)


@_solve_unbatched.def_vmap
def _solve_vmap(axis_size, in_batched, W1, W2, sig, t):
    """vmap over trajectories runs them one after another (``lax.map``): XLA:CPU deadlocked on the
    single batched QR that plain batching produces for ~10⁴ small matrices."""
    args = [
        x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x))
        for x, b in zip((W1, W2, sig, t), in_batched, strict=True)
    ]
    out = jax.lax.map(lambda a: _solve_unbatched(*a), tuple(args))
    return out, jax.tree.map(lambda _: True, out)


_solve = jax.jit(_solve_unbatched)


def _solve_body(W1, W2, sig, t):
    h, d = W1.shape
    c = W2.shape[0]
    lam, _ = imbalance(W1, W2)
    dtype = W1.dtype
    F = jnp.block(
        [
            [-0.5 * lam * jnp.eye(d, dtype=dtype), sig.T],
            [sig, 0.5 * lam * jnp.eye(c, dtype=dtype)],
        ]
    )
    f, V = jnp.linalg.eigh(F)
    f, V = f[::-1], V[:, ::-1]  # descending: the grading of step 2
    Qt = V.T @ jnp.concatenate([W1.T, W2], axis=0)  # (n, h)
    Wm, Rb = jnp.linalg.qr(Qt.T, mode="complete")  # Q̃ᵀ = W R_b, W ∈ O(h)
    L0 = jnp.triu(Rb).T  # (n, h) = Q̃W, exactly lower-trapezoidal
    ts = t.reshape(-1)
    # Times in chunks of ≤ _CHUNK: XLA:CPU was seen to deadlock on one batched QR/triangular solve
    # over ~8,000 small matrices (0 % CPU, never returns); chunks of 256 run at the same speed.
    n_t = ts.shape[0]
    n_chunks = -(-n_t // _CHUNK)
    padded = jnp.concatenate([ts, jnp.zeros(n_chunks * _CHUNK - n_t, ts.dtype)])
    at_times = jax.vmap(lambda s: _at_time(f, Wm, L0, s))
    Z = jax.lax.map(at_times, padded.reshape(n_chunks, _CHUNK))
    Z = Z.reshape((n_chunks * _CHUNK,) + Z.shape[2:])[:n_t]  # (N, n, h)
    Q = jnp.einsum("ij,tjk->tik", V, Z)
    Qin, Qout = Q[:, :d], Q[:, d:]
    w1tw1 = Qin @ jnp.swapaxes(Qin, -1, -2)
    w2w2t = Qout @ jnp.swapaxes(Qout, -1, -2)
    network = Qout @ jnp.swapaxes(Qin, -1, -2)
    dist = ntk_kernel_distance(W1.T @ W1, W2 @ W2.T, w1tw1, w2w2t)
    shape = t.shape
    return Solution(
        network=network.reshape(shape + (c, d)),
        w1tw1=w1tw1.reshape(shape + (d, d)),
        w2w2t=w2w2t.reshape(shape + (c, c)),
        q=Q.reshape(shape + (d + c, h)),
        lam=lam,
        kernel_distance=dist.reshape(shape),
    )


def solve(W1_0: jax.Array, W2_0: jax.Array, sigma_yx: jax.Array, t: jax.Array) -> Solution:
    """Exact gradient flow of f = W₂W₁x from any λ-balanced init (SPEC §1.4; position paper §6.1).

    .. math::
        X(t) = \\begin{bmatrix} W_1^\\top W_1 & W_1^\\top W_2^\\top \\\\ W_2 W_1 & W_2W_2^\\top
        \\end{bmatrix} = e^{Ft}Q_0[I + Q_0^\\top G(t) Q_0]^{-1}Q_0^\\top e^{Ft}

    evaluated stably (module docstring) for any t ≥ 0 (finite at t = 1e4 and for inits of 1e-12);
    aligned or not, any h, d, c. Task-aligned inits reduce to T Eq. 69 (position paper), whose
    λ → 0 limit is Saxe's sigmoid and |λ| → ∞ limit the linear model's exponential (Eq. 70).

    Args:
      W1_0: (h, d) initial first layer W₁(0).
      W2_0: (c, h) initial second layer W₂(0); W₂ᵀW₂ − W₁W₁ᵀ must equal λI_h.
      sigma_yx: (c, d) input–output covariance Σ_yx = E[y xᵀ] (whitened inputs).
      t: times t ≥ 0, any shape T.

    Returns:
      :class:`Solution` (network map W₂W₁, blocks W₁ᵀW₁, W₂W₂ᵀ, Q up to rotation, λ, NTK kernel
      distance from init), each with leading shape T.

    Raises:
      ValueError: shapes that don't match, non-finite inputs, t < 0, or an init that is not
        λ-balanced (the message reports the size of the violation).
    """
    return _solve(*_prepare(W1_0, W2_0, sigma_yx, t))


# ---------------------------------------------------------------------------------------------
# Initialisation, NTK, phase diagram
# ---------------------------------------------------------------------------------------------


def balanced_init(
    key: jax.Array, d: int, h: int, c: int, scale: jax.Array | float, lam: jax.Array | float
) -> tuple[jax.Array, jax.Array]:
    """A random, unaligned λ-balanced init: W₂ᵀW₂ − W₁W₁ᵀ = λI_h exactly (up to rounding).

    W₁ = O diag(s₁) Aᵀ, W₂ = B diag(s₂) Oᵀ with O ∈ O(h), A, B random orthonormal frames and
    s₁² = (scale·ξ)² + max(−λ, 0), s₂² = (scale·ξ)² + max(λ, 0), ξ_i ~ |N(0, 1)|, so the *absolute
    scale* is ``scale`` (the size of the balanced part) and the *relative scale* is λ (position
    paper App. G.1). Requires h ≤ min(d, c) (wider hidden layers force the sign of λ).

    Args:
      key: PRNG key.
      d, h, c: input, hidden and output widths (static).
      scale: () absolute scale (traced; sweeping it does not recompile).
      lam: () relative scale λ (traced).

    Returns:
      (W1 (h, d), W2 (c, h)).
    """
    if not (0 < h <= min(d, c)):
        raise ValueError(f"balanced_init needs 0 < h <= min(d, c), got d={d}, h={h}, c={c}")
    return _balanced_init(key, d, h, c, jnp.asarray(scale), jnp.asarray(lam))


def _balanced_init(key, d, h, c, scale, lam):
    dtype = jnp.result_type(scale, lam, float)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    O, _ = jnp.linalg.qr(jax.random.normal(k1, (h, h), dtype))
    A, _ = jnp.linalg.qr(jax.random.normal(k2, (d, h), dtype))
    B, _ = jnp.linalg.qr(jax.random.normal(k3, (c, h), dtype))
    xi = jnp.abs(jax.random.normal(k4, (h,), dtype))
    base = (scale * xi) ** 2
    s1 = jnp.sqrt(base + jnp.maximum(-lam, 0.0))
    s2 = jnp.sqrt(base + jnp.maximum(lam, 0.0))
    W1 = (O * s1[None, :]) @ A.T
    W2 = (B * s2[None, :]) @ O.T
    return W1, W2


def ntk_kernel_distance(
    w1tw1_0: jax.Array, w2w2t_0: jax.Array, w1tw1: jax.Array, w2w2t: jax.Array
) -> jax.Array:
    """NTK kernel distance S(0, t) = 1 − ⟨K₀, K_t⟩_F / (‖K₀‖_F‖K_t‖_F) (Fort et al. 2020; position G.2).

    For f = W₂W₁x the NTK on whitened inputs is the operator on c×d maps
    K = I_d ⊗ W₂W₂ᵀ + W₁ᵀW₁ ⊗ I_c (the Gram matrix of the Jacobian on an orthonormal input batch),
    so with P = W₂W₂ᵀ, N = W₁ᵀW₁: ⟨K, K'⟩ = d tr(PP') + tr P tr N' + tr N tr P' + c tr(NN').

    Args:
      w1tw1_0, w2w2t_0: (d, d), (c, c) blocks at initialisation.
      w1tw1, w2w2t: (..., d, d), (..., c, c) blocks along the trajectory.

    Returns:
      (...) kernel distance in [0, 1].
    """
    d = w1tw1_0.shape[-1]
    c = w2w2t_0.shape[-1]

    def inner(N, P, N2, P2):
        return (
            d * jnp.sum(P * P2, axis=(-2, -1))
            + jnp.trace(P, axis1=-2, axis2=-1) * jnp.trace(N2, axis1=-2, axis2=-1)
            + jnp.trace(N, axis1=-2, axis2=-1) * jnp.trace(P2, axis1=-2, axis2=-1)
            + c * jnp.sum(N * N2, axis=(-2, -1))
        )

    k0k0 = inner(w1tw1_0, w2w2t_0, w1tw1_0, w2w2t_0)
    ktkt = inner(w1tw1, w2w2t, w1tw1, w2w2t)
    k0kt = inner(w1tw1_0, w2w2t_0, w1tw1, w2w2t)
    denom = jnp.sqrt(k0k0 * ktkt)
    return jnp.where(denom > 0, 1.0 - k0kt / jnp.where(denom > 0, denom, 1.0), 0.0)


def phase_diagram(
    key: jax.Array,
    sigma_yx: jax.Array,
    lams: jax.Array,
    scales: jax.Array,
    h: int,
    t_end: jax.Array | float,
) -> PhaseDiagram:
    """NTK kernel distance after training over (relative scale λ, absolute scale) (position Fig. 6a).

    Every grid cell starts from :func:`balanced_init` with the same ``key`` (same random frames),
    so only λ and the scale change; the exact solution is evaluated at ``t_end``. Small λ and small
    scale give large kernel distance (rich, sigmoidal); large |λ| or scale give S ≈ 0 (lazy).

    Args:
      key: PRNG key for the init frames.
      sigma_yx: (c, d) task covariance Σ_yx.
      lams: (nλ,) relative scales λ.
      scales: (ns,) absolute scales.
      h: hidden width (≤ min(d, c)).
      t_end: () training time.

    Returns:
      :class:`PhaseDiagram` with (nλ, ns) kernel distances and final excess losses.
    """
    sig = _checks.as_float(sigma_yx, "sigma_yx")
    _checks.check_shape(sig, "sigma_yx", (None, None), "(c, d)")
    c, d = sig.shape
    if not (0 < h <= min(d, c)):
        raise ValueError(f"h must satisfy 0 < h <= min(d, c) = {min(d, c)}, got {h}")
    lams = jnp.asarray(lams, sig.dtype)
    scales = jnp.asarray(scales, sig.dtype)
    t_end = jnp.asarray(t_end, sig.dtype)

    def cell(lam, scale):
        W1, W2 = _balanced_init(key, d, h, c, scale, lam)
        sol = _solve(W1, W2, sig, t_end)
        return sol.kernel_distance, 0.5 * jnp.sum((sol.network - sig) ** 2)

    dist, loss = jax.vmap(lambda lam: jax.vmap(lambda s: cell(lam, s))(scales))(lams)
    return PhaseDiagram(lams=lams, scales=scales, kernel_distance=dist, loss=loss)


# ---------------------------------------------------------------------------------------------
# Verification against the raw-parameter flow
# ---------------------------------------------------------------------------------------------


def _loss(params, sig):
    # ½E‖W₂W₁x − y‖² with E[xxᵀ] = I, up to the constant ½E‖y‖².
    P = params["W2"] @ params["W1"]
    return 0.5 * jnp.sum(P * P) - jnp.sum(sig * P)


@jax.jit
def _reference(W1, W2, sig, t):
    """Integrated raw-parameter flow for a batch of cases: (W₂W₁, W₁ᵀW₁, W₂W₂ᵀ) at the times t."""

    def one(W1, W2, sig, t):
        ys = gradient_flow(_loss, {"W1": W1, "W2": W2}, t, sig, rtol=1e-13, atol=1e-16)
        A, B = ys["W1"], ys["W2"]
        return B @ A, jnp.swapaxes(A, -1, -2) @ A, B @ jnp.swapaxes(B, -1, -2)

    return jax.vmap(one)(W1, W2, sig, t)


def verify(key: jax.Array, n_cases: int = 8) -> float:
    """Max error of :func:`solve` against the integrated raw-parameter flow on random cases.

    Cases: d = 3, h = 2, c = 2, random Σ_yx (spectral norm 1), unaligned inits with λ of both
    signs over [−4, 4] and absolute scales from 1e-3 to 2, compared at 41 times from 0 to 40 (well
    past convergence of the slowest mode for these spectra).

    Args:
      key: PRNG key.
      n_cases: number of random cases.

    Returns:
      max over cases, times and the three blocks (W₂W₁, W₁ᵀW₁, W₂W₂ᵀ) of the abs error divided by
      the target scale ‖Σ_yx‖₂ + |λ| (the size the blocks converge to).
    """
    d, h, c = 3, 2, 2
    ks = jax.random.split(key, 4)
    sig = jax.random.normal(ks[0], (n_cases, c, d))
    sig = sig / jnp.linalg.norm(sig, ord=2, axis=(1, 2))[:, None, None]
    lam = jax.random.uniform(ks[1], (n_cases,), minval=-4.0, maxval=4.0)
    scale = 10 ** jax.random.uniform(ks[2], (n_cases,), minval=-3.0, maxval=0.3)
    W1, W2 = jax.vmap(lambda k, s, la: _balanced_init(k, d, h, c, s, la))(
        jax.random.split(ks[3], n_cases), scale, lam
    )
    t = jnp.broadcast_to(jnp.linspace(0.0, 40.0, 41), (n_cases, 41))
    ref = _reference(W1, W2, sig, t)
    sol = jax.vmap(_solve)(W1, W2, sig, t)
    size = (1.0 + jnp.abs(lam))[:, None, None, None]  # ‖Σ‖₂ = 1
    errs = [
        jnp.max(jnp.abs(a - b) / size)
        for a, b in zip((sol.network, sol.w1tw1, sol.w2w2t), ref, strict=True)
    ]
    return float(max(errs))
