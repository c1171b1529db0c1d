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
Riccati equation Ẋ = FX + XF − X², whose solution is (Dominé et al. 2024, Thm 4.1; T Eq. 14)

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

**Fast paths.** X is also invariant to dropping the rotation W from the bracket: HᵀH = I + L₀ᵀGL₀.
Scaled by e^{−m} on both sides it is M̂ = diag(e^{−2m}) + ŶᵀŶ with the graded Ŷ of step 2, and
Z = K R̂⁻¹ from its Cholesky factor R̂ costs a third of the Householder path. Cholesky is accurate
to ≈ ε·κ(Ŝ), Ŝ the unit-diagonal scaling of M̂ (Demmel 1989), and κ(Ŝ) ≤ h·tr Ŝ⁻¹ is computed at
every time. Both the factorisation's accuracy and κ(Ŝ) are invariant to the diagonal scaling
e^{−m}, which only guards against overflow: while e^{2f⁺t} stays representable (f⁺t ≤ 314 in
float64) the unscaled M = I + L₀ᵀGL₀ and Z = E L₀ R⁻¹ give the same X with one exponential per
mode and time instead of about six transcendentals (the *direct* path). A trajectory takes the
first path whose check passes at all its times — direct (horizon and κ(Ŝ) ≤ ε^{−1/3}), then the
graded Cholesky (κ(Ŝ) ≤ ε^{−1/3}), then Householder — so generic inits (κ ≈ 10) at moderate times
run the direct path, later times the graded one, and an init with a 1e-12 trace of the fastest
mode (κ ≈ 1e11, where Cholesky alone would be off by 1e-5) the Householder path. Under ``vmap``
chunks of 64 trajectories run the direct path as one batched computation, and a chunk with a
trajectory that fails its check is redone trajectory by trajectory. For one trajectory the direct
result is computed unconditionally and the fallback's under a ``lax.cond`` (zeros when it is not
needed), then chosen by ``jnp.where``, and the init's lower-trapezoidal form comes from LAPACK's
QR (vmap and derivatives keep the elementwise Householder of step 2).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sims import _checks
from sims.gradient_flow import gradient_flow

__all__ = [
    "Solution",
    "PhaseDiagram",
    "solve",
    "loss",
    "balanced_init",
    "imbalance",
    "ntk_kernel_distance",
    "phase_diagram",
    "verify",
]


class Solution(NamedTuple):
    """Exact λ-balanced trajectory at the requested times (``T = t.shape``)."""

    network_map: jax.Array  # T + (c, d)   W₂W₁(t), the network map (alias ``network``)
    w1tw1: jax.Array  # T + (d, d)     W₁ᵀW₁(t) (upper-left block of X)
    w2w2t: jax.Array  # T + (c, c)     W₂W₂ᵀ(t) (lower-right block of X)
    q: jax.Array  # T + (d + c, h)     Q(t) = [W₁ᵀ; W₂](t) up to a rotation of the hidden space
    lam: jax.Array  # ()               λ = (W₂ᵀW₂ − W₁W₁ᵀ)_ii (conserved)
    kernel_distance: jax.Array  # T    NTK kernel distance from t = 0 (Fort et al. 2020)
    t: jax.Array  # T                  the times

    @property
    def network(self) -> jax.Array:
        """W₂W₁(t): :attr:`network_map` under its former name (an alias)."""
        return self.network_map


class PhaseDiagram(NamedTuple):
    """Kernel distance and loss over a (relative scale λ, absolute scale) grid (position Fig. 6a)."""

    lams: jax.Array  # (nλ,)                 relative scales λ
    scales: jax.Array  # (ns,)               absolute scales (see :func:`balanced_init`)
    kernel_distance: jax.Array  # (nλ, ns)   NTK kernel distance S(0, t_end)
    loss: jax.Array  # (nλ, ns)              ½‖W₂W₁ − Σ_yx‖²_F at t_end (excess loss)


def solve(
    W1_0: jax.Array,
    W2_0: jax.Array,
    sigma_yx: jax.Array,
    t: jax.Array,
    *,
    eta: jax.Array | float = 1.0,
) -> Solution:
    """Exact gradient flow of f = W₂W₁x from any λ-balanced init (T Eq. 14, Definition G.1).

    .. math::
        X(\\eta t) = \\begin{bmatrix} W_1^\\top W_1 & W_1^\\top W_2^\\top \\\\ W_2 W_1 & W_2W_2^\\top
        \\end{bmatrix} = e^{F\\eta t}Q_0[I + Q_0^\\top G(\\eta t) Q_0]^{-1}Q_0^\\top e^{F\\eta t}

    (Dominé et al. 2024, Thm 4.1) evaluated stably (module docstring) for any t ≥ 0 (finite at
    t = 1e4 and for inits of 1e-12); aligned or not, any h, d, c. Task-aligned inits reduce to
    T Eq. 69, whose λ → 0 limit is Saxe's sigmoid and |λ| → ∞ limit the linear model's
    exponential (T Eq. 70). Differentiable (``jax.grad``, ``jax.jacfwd``) in every argument.

    Args:
      W1_0: (h, d) initial first layer W₁(0).
      W2_0: (c, h) initial second layer W₂(0); W₂ᵀW₂ − W₁W₁ᵀ must equal λI_h.
      sigma_yx: (c, d) input–output covariance Σ_yx = E[y xᵀ] (whitened inputs).
      t: times t ≥ 0, any shape T.
      eta: learning rate η > 0 of the flow Ẇ = −η∇L (:func:`loss`).

    Returns:
      :class:`Solution` (``network_map`` W₂W₁ (alias ``network``), blocks W₁ᵀW₁, W₂W₂ᵀ, Q up to
      rotation, λ, NTK kernel distance from init, t), each with leading shape T.

    Raises:
      ValueError: shapes that don't match, non-finite inputs, t < 0, η ≤ 0, or an init that is
        not λ-balanced (the message reports the size of the violation).
    """
    W1, W2, sig, t = _prepare(W1_0, W2_0, sigma_yx, t)
    eta = _checks.as_float(eta, "eta")
    _checks.check_shape(eta, "eta", (), "(a scalar)")
    _checks.check_finite(eta, "eta")
    _checks.check_positive(eta, "eta")
    eta = eta.astype(t.dtype)
    return _solve_jit(W1, W2, sig, eta * t)._replace(t=t)


def loss(params: dict, sigma_yx: jax.Array) -> jax.Array:
    """Raw-parameter loss the flow descends: ½‖W₂W₁ − Σ_yx‖²_F = ½E‖W₂W₁x − y‖² − const (whitened x).

    Args:
      params: ``{"W1": (h, d), "W2": (c, h)}``.
      sigma_yx: (c, d) Σ_yx.

    Returns:
      () loss.
    """
    P = params["W2"] @ params["W1"]
    return 0.5 * jnp.sum((P - sigma_yx) ** 2)


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

    def grid(path):
        return _phase_grid(key, sig, lams, scales, t_end, int(h), path)

    # The whole grid on one path, redone on the next only if some cell fails its accuracy check
    # (a per-cell lax.cond would run every path for every cell under vmap).
    def chain(paths):
        dist, loss, fast = grid(paths[0])
        if len(paths) == 1:
            return dist, loss
        if _checks.is_concrete(fast):  # called eagerly: decide here (a cond would retrace)
            return (dist, loss) if bool(jnp.all(fast)) else chain(paths[1:])
        return jax.lax.cond(jnp.all(fast), lambda: (dist, loss), lambda: chain(paths[1:]))

    dist, loss = chain(("direct", "cholesky", "householder"))
    return PhaseDiagram(lams=lams, scales=scales, kernel_distance=dist, loss=loss)


# One compiled program per path and shapes (called eagerly, the vmapped cells compiled each
# primitive separately: ~200 programs per call).
@functools.partial(jax.jit, static_argnums=(5, 6))
def _phase_grid(key, sig, lams, scales, t_end, h: int, path: str):
    """(kernel distance, excess loss, fast-path accepted) of every (λ, scale) cell, (nλ, ns)."""
    c, d = sig.shape

    def cell(lam, scale):
        W1, W2 = _balanced_init(key, d, h, c, scale, lam)
        sol, fast = _solve_path(W1, W2, sig, t_end, path)
        return sol.kernel_distance, 0.5 * jnp.sum((sol.network_map - sig) ** 2), fast

    return jax.vmap(lambda lam: jax.vmap(lambda s: cell(lam, s))(scales))(lams)


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
    W1, W2 = _verify_inits(jax.random.split(ks[3], n_cases), scale, lam, d, h, c)
    t = jnp.broadcast_to(jnp.linspace(0.0, 40.0, 41), (n_cases, 41))
    ref = _reference(W1, W2, sig, t)
    sol = _verify_solve(W1, W2, sig, t)
    size = (1.0 + jnp.abs(lam))[:, None, None, None]  # ‖Σ‖₂ = 1
    errs = [
        jnp.max(jnp.abs(a - b) / size)
        for a, b in zip((sol.network_map, sol.w1tw1, sol.w2w2t), ref, strict=True)
    ]
    return float(max(errs))


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


def _log_h(f, t):
    """log h with h = (1 − e^{−x})/x, x = 2|f|t (h → 1 as x → 0), so g = t e^{2 max(f, 0) t} h."""
    x = 2.0 * jnp.abs(f) * t
    small = x < 1e-8
    xs = jnp.where(small, 1.0, x)
    return jnp.where(small, -0.5 * x, jnp.log(-jnp.expm1(-xs) / xs))


def _safe_norm(x, axis):
    """‖x‖ along ``axis`` with a zero (not NaN) derivative at x = 0."""
    sq = jnp.sum(x * x, axis=axis)
    pos = sq > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


def _householder(cols, complete):
    """Householder QR A = QR of a batch of small matrices given as a list of k columns (m, ...).

    Rows run along axis 0 and the batch (here: the times) along the trailing axes, so every step is
    an elementwise operation on whole time vectors: thousands of tiny QRs run as a few fused loops
    instead of one LAPACK call each (those were ~20× slower, and XLA:CPU sometimes deadlocked on
    them once vmapped; see ``benchmarks/bench_closed_form.py --hang``). Each reflection updates all
    remaining columns at once. Differentiable everywhere, including all-zero columns (the
    reflection is then skipped).

    Returns:
      (q, r): q, the list of m (``complete``), min(m, k) (``False``) or no (``None``) orthonormal
      columns (m, ...); r, the list of the k columns (min(m, k), ...) of the upper-trapezoidal R.
    """
    m, k = cols[0].shape[0], len(cols)
    p = min(m, k)
    A = jnp.stack(cols, axis=1)  # (m, k, ...)
    refl = []
    done = []
    for j in range(p):
        x = A[j:, j]
        sign = jnp.where(x[0] >= 0, 1.0, -1.0).astype(x.dtype)
        norm = _safe_norm(x, 0)
        v = jnp.concatenate([(x[0] + sign * norm)[None], x[1:]], axis=0)
        vv = norm * (norm + jnp.abs(x[0]))  # ½vᵀv
        if x.shape[0] == 1:
            # The last row (m ≤ k) is already reduced: no reflection, as in LAPACK's dlarfg, so
            # R's signs (and Q(t)'s gauge) are LAPACK's and lapack=True/False agree.
            vv = jnp.zeros_like(vv)
        beta = jnp.where(vv > 0, 1.0 / jnp.where(vv > 0, vv, 1.0), 0.0)
        refl.append((v, beta))
        diag = jnp.where(vv > 0, -sign * norm, x[0])
        done.append(jnp.concatenate([A[:j, j], diag[None], jnp.zeros_like(x[1:])], axis=0))
        if j + 1 < k:
            rest = A[j:, j + 1 :]
            coef = beta[None] * jnp.sum(v[:, None] * rest, axis=0)
            rest = rest - v[:, None] * coef[None]
            A = jnp.concatenate([A[:, : j + 1], jnp.concatenate([A[:j, j + 1 :], rest], 0)], 1)
    done += [A[:, c] for c in range(p, k)]
    r = [col[:p] for col in done]
    if complete is None:
        return None, r
    n_q = m if complete else p
    batch = cols[0].shape[1:]
    E = jnp.broadcast_to(
        jnp.eye(m, n_q, dtype=cols[0].dtype).reshape((m, n_q) + (1,) * len(batch)), (m, n_q) + batch
    )
    for j in reversed(range(p)):
        v, beta = refl[j]
        y = E[j:]
        y = y - v[:, None] * (beta[None] * jnp.sum(v[:, None] * y, axis=0))[None]
        E = jnp.concatenate([E[:j], y], axis=0)
    return [E[:, c] for c in range(n_q)], r


def _graded(f, L0, t):
    """The graded pieces shared by both paths, for times t (N,) along the last axis.

    Returns:
      (hh, t_safe, inv_scale, lower): hh (n, N) = (1 − e^{−2|f|t})/(2|f|t) (so g = t e^{2f⁺t} hh),
      t with 0 → 1, e^{−m_j} (h, N) and the columns j of Ŷ, lower[j] (n, N) = e^{ℓ_i − m_j} L0_ij
      (zero above row j, every entry ≤ 1 in size).
    """
    n, h = L0.shape
    dtype = L0.dtype
    fp = jnp.maximum(f, 0.0)[:, None]  # (n, 1)
    x = 2.0 * jnp.abs(f)[:, None] * t[None, :]
    small = x < 1e-8
    xs = jnp.where(small, 1.0, x)
    hh = jnp.where(small, 1.0 - 0.5 * x, -jnp.expm1(-xs) / xs)  # (1 − e^{−x})/x, g = t e^{2f⁺t} h
    pos = t > 0
    t_safe = jnp.where(pos, t, 1.0)
    # ℓ_j = ½ log g_j for the first h rows (the column scales): f⁺t + ½ log(t h).
    ell = jnp.where(pos, fp[:h] * t + 0.5 * jnp.log(t_safe * hh[:h]), -jnp.inf)  # (h, N)
    # Column scale m_j = max(0, ℓ_j + c_j), c_j = log max_i|L0_ij|: as ℓ_i ≤ ℓ_j for i ≥ j, every
    # scaled entry e^{ℓ_i − m_j}|L0_ij| ≤ 1 (no overflow at t = 1e4). X is invariant to m.
    col_max = jax.lax.stop_gradient(jnp.max(jnp.abs(L0), axis=0))
    c = jnp.where(col_max > 0, jnp.log(jnp.where(col_max > 0, col_max, 1.0)), -jnp.inf)[:, None]
    inv_scale = jnp.exp(-jnp.maximum(ell + c, 0.0))  # e^{−m_j}, (h, N)
    # e^{ℓ_j − m_j} = e^{min(ℓ_j, −c_j)}, (h, N); capped for all-zero columns (saddle directions),
    # whose entries are 0 but whose derivative e^{ℓ_j} must stay finite.
    big = 0.5 * float(np.log(np.finfo(dtype).max))
    top = jnp.exp(jnp.minimum(ell, jnp.where(col_max[:, None] > 0, -c, big)))
    # e^{ℓ_i − ℓ_j} (i ≥ j) as running products of ρ_k = e^{ℓ_{k+1} − ℓ_k} ≤ 1: the log t terms
    # cancel exactly, ρ_k = e^{(f⁺_{k+1} − f⁺_k)t} (h_{k+1}/h_k)^{1/2}; underflow to 0 is harmless.
    rho = jnp.exp((fp[1:] - fp[:-1]) * t) * jnp.sqrt(hh[1:] / hh[:-1])  # (n − 1, N)
    ones = jnp.ones_like(t)
    lower = []  # columns j: (n, N), g_i^{1/2} L0_ij e^{−m_j}
    for j in range(h):
        run, decay = ones, [ones]
        for k in range(j, n - 1):
            run = run * rho[k]
            decay.append(run)
        col = L0[j:, j : j + 1] * (top[j] * jnp.stack(decay))
        lower.append(jnp.concatenate([jnp.zeros((j, t.shape[0]), dtype), col], axis=0))
    return hh, t_safe, inv_scale, lower


def _at_times(f, Wm, L0, t):
    """Z(t) (h columns (n, N)) in F's eigenbasis with X̃(t) = Z Zᵀ, for times t (N,) (module docstring 1–3).

    Times run along the last axis and every step is elementwise over them (no per-time LAPACK
    call): the graded H = [W; g^{1/2} L0] diag(e^{−m}) is factorised by :func:`_householder`.
    """
    n, h = L0.shape
    hh, t_safe, inv_scale, lower = _graded(f, L0, t)
    # Divide each column by its largest entry (at least e^{−m_j}, the size of its W block) so that
    # the dominant entry is exactly ±1: two nearly parallel columns (an init missing the fastest
    # mode) then cancel exactly in the reflection and keep their e^{−60}-sized difference.
    # Column scaling leaves X unchanged, so its derivative is dropped.
    s = [
        jax.lax.stop_gradient(jnp.maximum(jnp.max(jnp.abs(lower[j]), axis=0), inv_scale[j]))
        for j in range(h)
    ]
    lower = [lower[j] / s[j] for j in range(h)]
    inv_scale = jnp.stack([inv_scale[j] / s[j] for j in range(h)])
    upper = [Wm[:, j : j + 1] * inv_scale[j] for j in range(h)]  # (h, N) each
    # H = ΩR (Householder: Ω orthonormal to working precision even when R is far from invertible,
    # e.g. an init with no component on the fastest-growing eigenvector).
    omega, r_cols = _householder(
        [jnp.concatenate([upper[j], lower[j]], axis=0) for j in range(h)], complete=False
    )
    # Growing rows (f_it > ½): Z_i = e^{f_it − ℓ_i} Ω_i with e^{f_it − ℓ_i} = (t h_i)^{−1/2} bounded
    # (no cancellation, unlike computing f_it − ℓ_i). Other rows: Z = E L0 diag(e^{−m}) R⁻¹ by
    # forward substitution, with e^{f_it} ≤ e^{½}.
    grow = f[:, None] * t[None, :] > 0.5  # (n, N)
    r = jax.lax.rsqrt(jnp.where(grow, t_safe * hh, 1.0))
    damp = jnp.exp(jnp.minimum(f[:, None] * t[None, :], 0.5))
    z, tri = [], []
    for j in range(h):
        rhs = damp * L0[:, j : j + 1] * inv_scale[j]
        for k in range(j):
            rhs = rhs - r_cols[j][k] * tri[k]
        tri.append(rhs / r_cols[j][j])
        z.append(jnp.where(grow, r * omega[j][h:], tri[j]))
    return z


def _cholesky(M, zeros, floor: float = 0.0):
    """Upper Cholesky factor R of the h × h matrices M (nested lists of (N,) time vectors, upper
    triangle read) and the bound κ(Ŝ) ≤ tr Ŝ · tr Ŝ⁻¹ = h·Σ_jk M_jj (R⁻¹)²_jk (N,) on the condition
    number of M scaled to a unit diagonal, which sets Cholesky's accuracy ≈ ε·κ(Ŝ) (Demmel 1989).
    κ(Ŝ) is invariant to a diagonal scaling of M, so scaled and unscaled brackets share it.
    Pivots are clamped at ``floor``, which keeps R finite where rounding makes them ≤ 0."""
    h = len(M)
    R = [[zeros] * h for _ in range(h)]
    for j in range(h):
        d = M[j][j] - sum(R[k][j] ** 2 for k in range(j))
        R[j][j] = jnp.sqrt(jnp.maximum(d, floor))
        inv = 1.0 / R[j][j]
        for k in range(j + 1, h):
            R[j][k] = (M[j][k] - sum(R[i][j] * R[i][k] for i in range(j))) * inv
    # R⁻¹ by back substitution; (√M_jj R⁻¹_jk)² rather than M_jj (R⁻¹_jk)², which underflows
    # first when M_jj ≈ e^{700}.
    Rinv = [[zeros] * h for _ in range(h)]
    for k in range(h):
        Rinv[k][k] = 1.0 / R[k][k]
        for j in reversed(range(k)):
            Rinv[j][k] = -sum(R[j][i] * Rinv[i][k] for i in range(j + 1, k + 1)) / R[j][j]
    kappa = h * sum((jnp.sqrt(M[j][j]) * Rinv[j][k]) ** 2 for j in range(h) for k in range(j, h))
    return R, kappa


def _forward(K, R):
    """Z = K R⁻¹ for the columns K[j] (n, N) by forward substitution along the hidden index."""
    z = []
    for j, col in enumerate(K):
        for k in range(j):
            col = col - z[k] * R[k][j]
        z.append(col / R[j][j])
    return z


def _at_times_cholesky(f, L0, t):
    """Z(t) (h columns (n, N)) by a Cholesky factorisation of the graded bracket, and κ(Ŝ) (N,).

    The fast path (module docstring, "Fast path"): with Ŷ_ij = e^{ℓ_i − m_j} L0_ij (i ≥ j, entries
    ≤ 1) the bracket scaled by e^{−m} on both sides is M̂ = diag(e^{−2m}) + ŶᵀŶ = R̂ᵀR̂ (h × h,
    no overflow at any t), and Z = K R̂⁻¹ with K_ij = e^{f_it − m_j} L0_ij evaluated without
    cancellation (growing rows as (t h_i)^{−1/2} Ŷ_ij, the others as e^{f_it} e^{−m_j} L0_ij).
    κ(Ŝ) (:func:`_cholesky`) is returned per time so that the caller can fall back to the
    Householder path where it is large (an init almost missing a fast mode makes two columns of
    Ŷ nearly parallel).
    """
    n, h = L0.shape
    hh, t_safe, inv_scale, lower = _graded(f, L0, t)
    M = [[None] * h for _ in range(h)]
    for j in range(h):
        for k in range(j, h):
            acc = jnp.sum(lower[j][k:n] * lower[k][k:n], axis=0)
            M[j][k] = acc + inv_scale[j] ** 2 if j == k else acc
    R, kappa = _cholesky(M, jnp.zeros_like(t))
    grow = f[:, None] * t[None, :] > 0.5
    r = jax.lax.rsqrt(jnp.where(grow, t_safe * hh, 1.0))
    damp = jnp.exp(jnp.minimum(f[:, None] * t[None, :], 0.5))
    K = [
        jnp.where(grow, r * lower[j][:n], damp * L0[:, j : j + 1] * inv_scale[j]) for j in range(h)
    ]
    return _forward(K, R), kappa


# expm1(x)/x = Σ_k x^k/(k + 1)!: 13 terms reach ε = 2⁻⁵² for |x| < 0.35 (the next is 1e-17).
_EXPM1_SWITCH = 0.35


_EXPM1_SERIES = tuple(1.0 / math.factorial(k + 1) for k in range(13))


def _g_direct(f, ft, t, E):
    """g = (e^{2ft} − 1)/2f (→ t as f → 0), (n, N), from E = e^{ft}: t·Σ_k (2ft)^k/(k + 1)! where
    |2ft| < 0.35, else (E² − 1)/2f, where E² ≥ 1.42 or ≤ 0.71 so the subtraction costs ≤ 2.5
    bits (≤ ~5 ulps in all). Only mul/add (1/2f once per mode): XLA:CPU vectorises it, unlike a
    fused ``expm1`` (3× slower per element here) or a division per element."""
    x = 2.0 * ft
    p = _EXPM1_SERIES[-1]
    for coef in reversed(_EXPM1_SERIES[:-1]):
        p = p * x + coef
    # 1/2f is 0 for modes with f ≈ 0 (always on the series branch): finite, so selecting the
    # series does not leak NaN into derivatives through the unselected branch.
    big = jnp.abs(f) > 1e-150
    inv2f = jnp.where(big, 0.5 / jnp.where(big, f, 1.0), 0.0)[:, None]
    return jnp.where(jnp.abs(x) < _EXPM1_SWITCH, t * p, (E * E - 1.0) * inv2f)


def _direct_horizon(dtype) -> float:
    """Largest f⁺·t for the direct path: e^{2f⁺t} stays below the dtype's maximum by e^{40}
    (float64: 314, float32: 24)."""
    return 0.5 * float(np.log(np.finfo(dtype).max)) - 40.0


def _at_times_direct(f, L0, t):
    """Z(t) (h columns (n, N)) and κ(Ŝ) (N,) from the unscaled bracket, for moderate times.

    M = I + L0ᵀ G L0 with g_i = (e^{2f_it} − 1)/2f_i (→ t as f_i → 0), and Z = E L0 R⁻¹ with
    E = diag(e^{ft}). This is the graded Cholesky path without its column scaling e^{−m}:
    Cholesky and κ(Ŝ) are invariant to that diagonal scaling, which only guards against
    overflow, so while f⁺t ≤ :func:`_direct_horizon` the two agree to rounding and this one
    needs one exponential per mode and time instead of about six transcendentals. (Computing
    only the n − min(c, d) distinct exponentials and mirroring the rest, e^{−ωt} = 1/e^{ωt}, was
    slower: XLA:CPU's concatenation of the halves costs more than the exponentials it saves.)
    """
    n, h = L0.shape
    # f·t is capped at the horizon, past which the caller does not use this path: every value
    # and derivative then stays finite, so selecting the other path's result with jnp.where
    # also differentiates (a NaN here would leak into gradients through the where).
    ft = jnp.minimum(f[:, None] * t[None, :], _direct_horizon(L0.dtype))  # (n, N)
    # The barrier keeps XLA from rewriting E·E below into a second exponential.
    E = jax.lax.optimization_barrier(jnp.exp(ft))
    g = _g_direct(f, ft, t, E)  # (e^{2ft} − 1)/2f, = t at f = 0
    # M_jk = δ_jk + Σ_i L0_ij L0_ik g_i for the h(h + 1)/2 pairs j ≤ k: one small matmul.
    pairs = [(j, k) for j in range(h) for k in range(j, h)]
    P = jnp.stack([L0[:, j] * L0[:, k] for j, k in pairs])  # (p, n)
    Mp = jnp.dot(P, g, precision=jax.lax.Precision.HIGHEST)  # (p, N)
    M = [[None] * h for _ in range(h)]
    for row, (j, k) in enumerate(pairs):
        M[j][k] = Mp[row] + 1.0 if j == k else Mp[row]
    # M ⪰ I, so every pivot (a Schur complement of M) is ≥ 1 in exact arithmetic: the floor ½
    # changes no accepted result and keeps rejected ones finite.
    R, kappa = _cholesky(M, jnp.zeros_like(t), floor=0.5)
    return _forward([E * L0[:, j : j + 1] for j in range(h)], R), kappa


def _eigenbasis(W1, W2, sig, rotation: bool = True, lapack: bool = False):
    """F's spectrum f (n,) descending, eigenvectors V (n, n), λ, and the graded init of
    :func:`_graded_init` (Wm is None with ``rotation=False``)."""
    d = W1.shape[1]
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
    return (f, V, lam) + _graded_init(V, W1, W2, rotation, lapack)


def _graded_init(V, W1, W2, rotation: bool, lapack: bool = False):
    """The rotation Wm (h, h) and L0 = VᵀQ₀Wm (n, h) lower-trapezoidal (module docstring, step 2);
    Wm is None, and not computed, with ``rotation=False`` (only the Householder path needs it).

    ``lapack=True`` (L0 only) takes R_b from LAPACK's QR, one call (~1 µs) instead of ~20 tiny
    kernels (~10 µs): for unbatched, undifferentiated evaluation only, since batched LAPACK QRs
    were part of the XLA:CPU hang (``benchmarks/bench_closed_form.py --hang``) and the elementwise
    Householder is the one that differentiates at zero columns. Both follow LAPACK's sign
    convention (the last row unreflected), so ``q``'s derivative, taken on the Householder path,
    is that of the ``q`` returned; they can still differ where an earlier column of Q̃ᵀ happens to
    be reduced already (X is invariant to the signs).
    """
    h = W1.shape[0]
    Qt = V.T @ jnp.concatenate([W1.T, W2], axis=0)  # (n, h)
    # Q̃ᵀ = W R_b (W ∈ O(h)), so L0 = Q̃W = R_bᵀ is lower-trapezoidal.
    if lapack and not rotation:
        Wm, rb_cols = None, list(jnp.linalg.qr(Qt.T, mode="r").T)
    else:
        cols = [Qt[i] for i in range(Qt.shape[0])]
        w_cols, rb_cols = _householder(cols, complete=rotation or None)
        Wm = jnp.stack(w_cols, axis=1) if rotation else None  # (h, h)
    # (n, h); zero columns beyond n when the hidden layer is wider than d + c.
    L0 = jnp.stack([jnp.pad(col, (0, h - col.shape[0])) for col in rb_cols], axis=0)
    return Wm, L0


def _kappa_max(dtype) -> float:
    """Largest κ(Ŝ) for which the Cholesky path is used: ε^{−1/3} (errors ≲ ε^{2/3}, measured
    ≈ 2ε·κ: 5e-9 at κ = 1.4e7 and 1.6e-5 at κ = 1.4e11 in float64)."""
    return float(np.finfo(dtype).eps) ** (-1.0 / 3.0)


def _solve(W1, W2, sig, t, lapack: bool = False):
    return _solve_path(W1, W2, sig, t, "auto", lapack)[0]


def _solve_path(W1, W2, sig, t, path: str, lapack: bool = False):
    """(Solution, fast) on the evaluation ``path`` (static):

    * ``"direct"``: :func:`_at_times_direct` (moderate times, well-conditioned bracket);
    * ``"cholesky"``: :func:`_at_times_cholesky` (any time, well-conditioned bracket);
    * ``"householder"``: :func:`_at_times` (always accurate, about 3× the cost);
    * ``"auto"``: the first of these whose accuracy check passes for every time of the
      trajectory (direct: f⁺·t ≤ :func:`_direct_horizon` and κ(Ŝ) ≤ :func:`_kappa_max`;
      Cholesky: κ(Ŝ) ≤ :func:`_kappa_max`), chosen by ``lax.cond`` per trajectory, which runs one
      branch only outside ``vmap``.

    ``fast`` says whether the path's accuracy check passed (always False for Householder).
    """
    h, d = W1.shape
    c = W2.shape[0]
    dtype = W1.dtype
    f, V, lam, _, L0 = _eigenbasis(W1, W2, sig, rotation=False, lapack=lapack)
    ts = t.reshape(-1)
    kmax = _kappa_max(dtype)

    def direct():
        Z, kappa = _at_times_direct(f, L0, ts)
        # One reduction for both checks (each costs ~5 µs of a 60 µs solve here).
        worst = jnp.max(jnp.where(f[0] * ts <= _direct_horizon(dtype), kappa, jnp.inf))
        return Z, worst <= kmax  # NaN: False

    def cholesky():
        Z, kappa = _at_times_cholesky(f, L0, ts)
        return Z, jnp.all(kappa <= kmax)

    def householder():  # the rotation is built here: the fast paths do not need it
        Wm, L0h = _graded_init(V, W1, W2, rotation=True)  # L0h matches Wm (L0 may be LAPACK's)
        return _at_times(f, Wm, L0h, ts), jnp.asarray(False)

    def assemble(Z):
        # Q's hidden columns k: V z_k (n, N), one small GEMM each (a stacked (n, h, N) Z made
        # XLA emit one unvectorised loop over the concatenation, ~40 % of the solve).
        Qk = [jnp.dot(V, z, precision=jax.lax.Precision.HIGHEST) for z in Z]

        def gram(lo, hi, lo2, hi2):  # A Bᵀ at every time, summed over hidden columns, time-minor
            return jnp.moveaxis(sum(q[lo:hi, None] * q[None, lo2:hi2] for q in Qk), -1, 0)

        w1tw1, w2w2t, network = gram(0, d, 0, d), gram(d, d + c, d, d + c), gram(d, d + c, 0, d)
        Q = jnp.moveaxis(jnp.stack(Qk, axis=1), -1, 0)
        dist = ntk_kernel_distance(W1.T @ W1, W2 @ W2.T, w1tw1, w2w2t)
        shape = t.shape
        return Solution(
            network_map=network.reshape(shape + (c, d)),
            w1tw1=w1tw1.reshape(shape + (d, d)),
            w2w2t=w2w2t.reshape(shape + (c, c)),
            q=Q.reshape(shape + (d + c, h)),
            lam=lam,
            kernel_distance=dist.reshape(shape),
            t=t,
        )

    if path == "auto":
        # The direct result is assembled unconditionally and the fallback's under a lax.cond
        # (zeros when not needed), then selected: the results need not wait for the check,
        # which a cond around the direct path made them do (~8 µs of an 80 µs solve).
        Zd, fast = direct()
        sol = assemble(Zd)

        def fallback():
            Zc, ok = cholesky()
            return assemble(jax.lax.cond(ok, lambda z: z, lambda z: householder()[0], Zc))

        other = jax.lax.cond(fast, lambda: jax.tree.map(jnp.zeros_like, sol), fallback)
        sol = jax.tree.map(lambda a, b: jnp.where(fast, a, b), sol, other)
    else:
        Z, fast = {"direct": direct, "cholesky": cholesky, "householder": householder}[path]()
        sol = assemble(Z)
    return sol, fast


@jax.custom_batching.custom_vmap
def _solve_one_at_a_time(W1, W2, sig, t):
    # Unbatched and undifferentiated here (vmap and jvp have their own rules): LAPACK's QR.
    return _solve(W1, W2, sig, t, lapack=True)


# Trajectories per batched chunk under vmap: the direct path's (chunk, n, N) work arrays then stay
# in cache (64 × 7 × 1000 doubles = 3.6 MB) and memory stays bounded for any batch.
_VMAP_CHUNK = 64


@_solve_one_at_a_time.def_vmap
def _solve_vmap(axis_size, in_batched, W1, W2, sig, t):
    """vmap over trajectories: chunks of up to :data:`_VMAP_CHUNK` trajectories on the direct
    path as one batched computation (~2× faster per trajectory than one at a time); a chunk in
    which some trajectory fails the direct path's check is redone one trajectory after another
    (``lax.map`` of the per-trajectory choice, so each takes only its own path)."""
    args = [
        x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x))
        for x, b in zip((W1, W2, sig, t), in_batched, strict=True)
    ]
    n_chunks = -(-axis_size // _VMAP_CHUNK)
    size = -(-axis_size // n_chunks)
    pad = n_chunks * size - axis_size
    # Padding repeats the first trajectory (a valid input), and is dropped below.
    chunks = [
        jnp.concatenate([x, jnp.broadcast_to(x[:1], (pad,) + x.shape[1:])]).reshape(
            (n_chunks, size) + x.shape[1:]
        )
        for x in args
    ]

    def chunk(a):
        sol, ok = jax.vmap(lambda *x: _solve_path(*x, "direct"))(*a)

        def one_by_one(sol):
            def each(item):
                ok_i, sol_i, args_i = item
                return jax.lax.cond(ok_i, lambda s: s, lambda s: _solve(*args_i, True), sol_i)

            return jax.lax.map(each, (ok, sol, tuple(a)))

        return jax.lax.cond(jnp.all(ok), lambda s: s, one_by_one, sol)

    out = jax.lax.map(chunk, tuple(chunks))
    out = jax.tree.map(lambda x: x.reshape((n_chunks * size,) + x.shape[2:])[:axis_size], out)
    return out, jax.tree.map(lambda _: True, out)


@jax.custom_jvp
def _solve_fast(W1, W2, sig, t):
    return _solve_one_at_a_time(W1, W2, sig, t)


@_solve_fast.defjvp
def _solve_fast_jvp(primals, tangents):
    # custom_vmap has no derivative rule: differentiate the plain (batchable) evaluation instead.
    return jax.jvp(_solve, primals, tangents)


_solve_jit = jax.jit(_solve_fast)


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


# verify's batched init and closed form as one compiled program each: evaluated eagerly, vmap
# compiled every primitive of the unrolled paths separately (thousands of small XLA programs).
@functools.partial(jax.jit, static_argnums=(3, 4, 5))
def _verify_inits(keys, scale, lam, d, h, c):
    return jax.vmap(lambda k, s, la: _balanced_init(k, d, h, c, s, la))(keys, scale, lam)


_verify_solve = jax.jit(jax.vmap(_solve))


@jax.jit
def _reference(W1, W2, sig, t):
    """Integrated raw-parameter flow for a batch of cases: (W₂W₁, W₁ᵀW₁, W₂W₂ᵀ) at the times t."""

    def one(W1, W2, sig, t):
        ys = gradient_flow(loss, {"W1": W1, "W2": W2}, t, sig, rtol=1e-13, atol=1e-16)
        A, B = ys["W1"], ys["W2"]
        return B @ A, jnp.swapaxes(A, -1, -2) @ A, B @ jnp.swapaxes(B, -1, -2)

    return jax.vmap(one)(W1, W2, sig, t)
