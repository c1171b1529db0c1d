"""D_LR: 1 − CKA between the feature kernel and the projection onto the learned-function space.

Nam et al. thesis (T) Definition 1–2, Eq. 2.8–2.9; "Disentangling rich dynamics" (seed 000) Eq. 3–4, 7.
The MP operator is T_MP = a₁|1⟩⟨1| + a₂P_Ĥ with Ĥ = span{f̂_1, …, f̂_C}; CKA centres both kernels,
which removes the a₁ term, so on n samples (H = I − 11ᵀ/n, Φ_c = HΦ, F_c = HF, Q an orthonormal basis
of col(F_c) of numerical rank r)

    CKA = ⟨Φ_cΦ_cᵀ, QQᵀ⟩_F / (‖Φ_cΦ_cᵀ‖_F ‖QQᵀ‖_F) = ‖QᵀΦ_c‖_F² / (‖Φ_cᵀΦ_c‖_F √r),

using ‖Φ_cΦ_cᵀ‖_F = ‖Φ_cᵀΦ_c‖_F and ‖QQᵀ‖_F = √r. Cost O(np² + nC²), memory O(np + p² + nC):
no n×n matrix is formed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from metrics._validate import as_matrix, common_dtype, default_rtol, is_concrete, same_n
from metrics.moments import Moments, _centre, _rayleigh_ritz, accumulate_moments


class DLR(NamedTuple):
    """D_LR with the numerical rank of the centred outputs it used.

    Attributes:
      value: () D_LR ∈ [0, 1]; NaN under ``jit`` when undefined (constant outputs or features).
      rank: () int, r = dim col(F_c), the numerical rank of the centred outputs.
    """

    value: jax.Array
    rank: jax.Array


@jax.jit
def _dlr_arrays(phi: jax.Array, f: jax.Array, rtol: jax.Array):
    """(D_LR, r, ‖Φ_cᵀΦ_c‖_F) from in-memory arrays."""
    _, phi_c = _centre(phi)
    _, f_c = _centre(f)
    z, s, _ = _rayleigh_ritz(f_c)  # F_c = (z/s) diag(s) Vᵀ at GEMM speed, s to a few ε·s₁
    keep = (s > rtol * s[0]) & (s[0] > rtol * jnp.linalg.norm(f))
    r = jnp.sum(keep)
    u = z / jnp.where(keep, s, 1.0)  # left singular vectors; columns beyond the rank dropped
    a = jnp.where(keep, u, 0.0).T @ phi_c  # (C, p) = QᵀΦ_c
    gram_norm = jnp.linalg.norm(phi_c.T @ phi_c)
    cka = jnp.sum(a * a) / (gram_norm * jnp.sqrt(r.astype(phi.dtype)))
    return jnp.clip(1.0 - cka, 0.0, 1.0), r, gram_norm


@jax.jit
def _dlr_moments(m: Moments, rtol: jax.Array, mask: jax.Array):
    """(D_LR, r, ‖Φ_cᵀΦ_c‖_F) from streamed statistics, outputs = columns of M where mask is True.

    With G the output factor (F_c = U G, U orthonormal) and G = U' S Vᵀ its SVD, an orthonormal
    basis of col(F_c) is F_c V_r S_r⁻¹, so QᵀΦ_c = S_r⁻¹ V_rᵀ (Φ_cᵀF_c)ᵀ.
    """
    g = jnp.where(mask, m.out_factor, 0.0)
    _, s, v = _rayleigh_ritz(g)
    nu = jnp.where(mask, m.out_mean, 0.0)
    f_norm = jnp.sqrt(jnp.sum(g * g) + m.n * jnp.sum(nu * nu))  # ‖F‖_F uncentred
    keep = (s > rtol * s[0]) & (s[0] > rtol * f_norm)
    r = jnp.sum(keep)
    inv_s = jnp.where(keep, 1.0 / jnp.where(keep, s, 1.0), 0.0)
    a = (inv_s[:, None] * v.T) @ jnp.where(mask, m.cross, 0.0).T  # (q, p)
    gram_norm = jnp.linalg.norm(m.phi_css)
    cka = jnp.sum(a * a) / (gram_norm * jnp.sqrt(r.astype(s.dtype)))
    return jnp.clip(1.0 - cka, 0.0, 1.0), r, gram_norm


def _check_result(value, r, gram_norm, features_name: str, outputs_name: str) -> jax.Array:
    if is_concrete(r):
        if int(r) == 0:
            raise ValueError(
                f"{outputs_name} have zero numerical rank after centring (constant over samples): "
                "the learned-function space is empty and D_LR is undefined"
            )
        if not float(gram_norm) > 0.0:
            raise ValueError(
                f"{features_name} are constant over samples (zero centred variance): "
                "D_LR is undefined"
            )
    return value


def dlr_with_rank(features, outputs, *, rtol: float | None = None) -> DLR:
    """:func:`dlr` and the numerical rank r it used, safe inside ``jax.jit``.

    Same formula and arguments as :func:`dlr`. On concrete arrays the value checks of :func:`dlr`
    run; on traced arrays nothing is checked and an undefined D_LR (outputs of zero centred rank,
    constant features) is NaN, so a jitted training step never raises.

    Returns:
      :class:`DLR` (value, rank).
    """
    phi = as_matrix(features, "features", what="(n, p)")
    f = as_matrix(outputs, "outputs", what="(n, C)")
    same_n(phi, f, "features", "outputs")
    n, c = f.shape
    if n < 2:
        raise ValueError(f"features and outputs need n ≥ 2 samples to centre, got n = {n}")
    if c > n:
        raise ValueError(f"outputs must have C ≤ n columns, got shape (n, C) = {f.shape}")
    dtype = common_dtype(phi, f)
    tol = default_rtol(dtype, c) if rtol is None else rtol
    value, r, gram_norm = _dlr_arrays(phi.astype(dtype), f.astype(dtype), jnp.asarray(tol, dtype))
    value = _check_result(value, r, gram_norm, "features", "outputs")
    return DLR(jnp.where(r > 0, value, jnp.nan), r)


def dlr(features, outputs, *, rtol: float | None = None) -> jax.Array:
    r"""D_LR = 1 − CKA(feature kernel, projection onto the learned-function space).

    .. math::
        D_{LR} = 1 - \frac{\lVert Q^\top \Phi_c \rVert_F^2}{\lVert \Phi_c^\top \Phi_c \rVert_F\,\sqrt{r}}

    (thesis T Definition 2, Eq. 2.8–2.9; seed 000 Eq. 4), Φ_c, F_c the sample-centred features and
    outputs, Q an orthonormal basis of col(F_c) of numerical rank r. Lies in [0, 1]; 0 = richest
    (features span the centred learned functions isotropically). Invariant to the scale of Φ, to
    orthogonal maps of Φ and to invertible linear maps of F. Cost O(np² + nC²); never forms n×n.

    Args:
      features: (n, p) last-layer features Φ (input of the final linear layer), NumPy or JAX,
        float32 or float64.
      outputs: (n, C) network outputs F = f̂(x) on the same n inputs (logits, or softmax
        probabilities: the rank is numerical, so their centred rank C − 1 is detected).
      rtol: singular values of F_c below ``rtol·s_max`` count as zero, and F_c counts as zero
        (constant outputs) when ``s_max ≤ rtol·‖F‖_F``; default 100·C·ε of the dtype. Pass a larger
        value if F was computed in lower precision than its dtype.

    Returns:
      () D_LR in the common dtype of the inputs.

    Raises:
      ValueError: wrong shapes, mismatched n, n < 2, C > n, NaN/inf, outputs of zero centred rank
        or constant features (value checks only outside ``jit``; under ``jit`` those give NaN).
    """
    return dlr_with_rank(features, outputs, rtol=rtol).value


def dlr_from_moments(stats: Moments, *, n_outputs: int | None = None, rtol: float | None = None):
    """D_LR from streamed :class:`~metrics.moments.Moments` (same formula as :func:`dlr`).

    Args:
      stats: statistics of features Φ and stacked outputs M = [F, …] (see
        :func:`metrics.moments.accumulate_moments`).
      n_outputs: C, the number of leading columns of M that are the network outputs F (the rest,
        e.g. targets, are ignored); default all q columns.
      rtol: relative singular-value cutoff for the rank of F_c; default 100·C·ε.

    Returns:
      () D_LR.
    """
    q = stats.out_mean.shape[0]
    c = q if n_outputs is None else int(n_outputs)
    if not 1 <= c <= q:
        raise ValueError(f"n_outputs must be in [1, {q}] (columns of the stacked outputs), got {c}")
    if is_concrete(stats.n) and float(stats.n) < 2:
        raise ValueError(f"need n ≥ 2 samples to centre, got n = {float(stats.n):g}")
    dtype = stats.phi_css.dtype
    tol = default_rtol(dtype, c) if rtol is None else rtol
    mask = jnp.asarray(np.arange(q) < c)
    value, r, gram_norm = _dlr_moments(stats, jnp.asarray(tol, dtype), mask)
    return _check_result(value, r, gram_norm, "features", "outputs")


def dlr_streaming(batches: Iterable, *, rtol: float | None = None) -> jax.Array:
    """D_LR of a sample given as an iterator of ``(features, outputs)`` batches.

    Accumulates Φ_cᵀΦ_c (p×p), Φ_cᵀF_c (p×C), the means and a C×C factor of F_c
    (:func:`metrics.moments.accumulate_moments`): memory O(p² + pC + C²) whatever n. Same value as
    :func:`dlr` on the concatenated sample up to round-off (float32 error bound in
    :mod:`metrics.moments`).

    Args:
      batches: iterable of tuples ``(features (B, p), outputs (B, C))``.
      rtol: as in :func:`dlr`.

    Returns:
      () D_LR.
    """
    return dlr_from_moments(accumulate_moments(batches), rtol=rtol)
