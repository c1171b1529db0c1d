"""Numerical policy of :mod:`metrics`: GEMM precision, rank tolerances, exact rescaling.

**Precision.** On GPU/TPU JAX's default float32 matmul runs reduced-precision passes (TF32 or
bf16, ~10⁻³ relative), which would wreck Gram matrices and projections. Every GEMM in
:mod:`metrics` goes through :func:`mm`, which requests ``Precision.HIGHEST`` (full float32; a
no-op for float64 and on CPU). ``tests/metrics/test_numerics.py`` checks every ``dot_general`` in the
lowered programs.

**Tolerance table** (each a multiple of the dtype's ε, the unit round-off ×2):

================  ===========================  ===============================================
name              value                        where it comes from
================  ===========================  ===============================================
rank of an m×k    ``2ε(√m + √k)`` · ‖X‖₂       spectral norm of an m×k matrix of independent
matrix X                                       relative-ε rounding errors is ≈ ε(√m + √k)·scale
                                               (Gaussian-matrix norm); measured floors of
                                               exactly rank-deficient softmax outputs after
                                               the QR route are 0.5–1.6 ε·s₁ for n ≤ 10⁵,
                                               C ≤ 10³ in float32 and float64. NumPy's
                                               ``max(m, k)·ε`` is the worst-case bound; at
                                               n = 10⁶ in float32 it is 0.12·s₁ and would drop
                                               genuine outputs.
constant data     ``‖X_c‖_F ≤ 8ε ‖X‖_F``       centring leaves ≈ ε·|x| per entry (the rounding
                                               of the mean); anything 8× above that varies.
folded centring   ``‖Φ‖_F² ≤ 16 ‖Φ_c‖_F²``     ΦᵀΦ − nμμᵀ loses ≈ ε·‖Φ‖_F²/‖Φ_c‖_F² relative
                                               accuracy: ≤ 16ε keeps float32 D_LR within 10⁻⁵;
                                               beyond it Φ is centred before the GEMM.
================  ===========================  ===============================================
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

HIGHEST = jax.lax.Precision.HIGHEST

#: Multiple of ε(√m + √k) below which a singular value counts as zero (table above).
RANK_FACTOR = 2.0
#: Multiple of ε·‖X‖_F below which centred data counts as constant (table above).
CONSTANT_FACTOR = 8.0
#: Largest ‖Φ‖_F²/‖Φ_c‖_F² for which the centring is folded into the Gram (table above).
FOLD_RATIO = 16.0


def mm(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` at full float32 precision on every backend (module docstring)."""
    return jnp.matmul(a, b, precision=HIGHEST)


def rank_rtol(dtype, m, k) -> jax.Array:
    """Relative rank tolerance 2ε(√m + √k) of an m×k matrix (``m`` may be traced)."""
    eps = jnp.finfo(dtype).eps
    return (
        RANK_FACTOR * eps * (jnp.sqrt(jnp.asarray(m, dtype)) + jnp.sqrt(jnp.asarray(k, dtype)))
    ).astype(dtype)


def pow2_scale(x: jax.Array) -> jax.Array:
    """``x · 2⁻ᵉ`` with 2ᵉ ≈ max|x|: exact (no rounding), keeps squares and Grams in range.

    Exact for normal numbers; subnormal entries are flushed to zero on backends that flush them
    (XLA:CPU), as in every other operation there.

    Every metric here is invariant to the scale of Φ and F, so finite inputs of any magnitude
    (float32 ~10²⁰, whose Gram overflows, or ~10⁻³⁰, whose Gram underflows) give finite answers.
    """
    _, e = jnp.frexp(jnp.max(jnp.abs(x)))
    # two scalar factors 2⁻ᵃ·2⁻ᵇ (a + b = e, each in range): a multiply by a power of two is
    # exact, and is ~7× faster on XLA:CPU than an elementwise ``jnp.ldexp`` of x
    a = e // 2
    one = jnp.ones((), x.dtype)
    return x * jnp.ldexp(one, -a) * jnp.ldexp(one, a - e)


def centre(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Column mean and centred copy of an (n, k) ``x``, with one refinement pass.

    The refinement adds the mean of the first centred copy, which removes the mean's own
    round-off (ε·|μ| per column) so that offset data centre to ≈ ε·|x| residuals.
    """
    mu = jnp.mean(x, axis=0)
    mu = mu + jnp.mean(x - mu, axis=0)
    return mu, x - mu


def pow2_column_scale(norms: jax.Array) -> jax.Array:
    """(k,) powers of two 2⁻ᵉʲ with 2ᵉʲ ≈ ``norms`` (1 for zero columns): exact column equilibration.

    The column space of X·D equals that of X for any invertible diagonal D, so the numerical rank
    of the outputs is decided on the equilibrated X·D: badly scaled but accurately stored columns
    (a graded linear head, rare softmax classes) keep their directions, whose round-off is relative
    to their own norm, not to s₁ (Householder QR's error is column-wise, Higham 2002 Thm 19.4).
    """
    _, e = jnp.frexp(norms)
    return jnp.where(norms > 0, jnp.ldexp(jnp.ones_like(norms), -e), 1.0)
