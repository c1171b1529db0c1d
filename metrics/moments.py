"""Streaming sufficient statistics of features and outputs: O(p² + pq + q²) memory for any n.

Every metric in :mod:`metrics` that needs more than one pass over n samples is a function of these
statistics, so arrays and iterators of batches go through the same formulas.

* Feature second moments are accumulated **centred**, batch by batch, and merged with the
  parallel update of Chan, Golub & LeVeque (1979):
  ``S = S_a + S_b + (n_a n_b / n) δ δᵀ`` with ``δ = μ_b − μ_a``. Uncentred accumulation would lose
  ``(|μ|/σ)²·ε`` relative accuracy on post-ReLU features, whose mean is large against their spread.
* The centred outputs M_c (n×q) are kept in **factored form**, a thin QR ``M_c = U G`` (Householder,
  LAPACK ``geqrf``) without U: the q×q triangular factor G and the features in that orthonormal
  basis, ``A = UᵀΦ_c`` (q×p). Two samples merge by a QR of the small stack (TSQR, Demmel et al.
  2012): with ``w = n_a n_b/n`` and ``δ`` the difference of the means,
  ``[G_a; G_b; √w δ_Mᵀ] = Q_s G`` and ``A = Q_sᵀ [A_a; A_b; √w δ_Φᵀ]``, because the union's
  centred outputs are ``[U_a 0 z; 0 U_b z] [G_a; G_b; √w δ_Mᵀ]`` with the unit vector
  z ∝ (−n_b 1_a, n_a 1_b) ⟂ U_a, U_b, whose inner product with the union's centred features is
  ``√w δ_Φᵀ``. Everything is orthogonal transformations: the orthonormal basis of col(M_c) and its
  numerical rank come out as accurately as from LAPACK's SVD of the tall matrix (null singular
  values ≈ ε·s₁), whatever the output spectrum, and Householder QR's column-wise backward error
  keeps graded (badly scaled) output columns exact. The same route serves in-memory arrays (one
  batch), moments and streams, so all three D_LR paths agree to round-off.
* Optionally (``feature_factor=True``) the uncentred features are kept as a p×p triangular factor
  R with ``ΦᵀΦ = RᵀR`` (TSQR again: merge by the QR of ``[R_a; R_b]``), which resolves the
  Nyström eigenvalues to ε·s₁ instead of ε·s₁² (:mod:`metrics.decomposition`).

Float32 error bound. Per batch of size B the centred Gram ``Φ_cᵀΦ_c`` is a GEMM with entrywise error
``≤ γ_B |Φ_c|ᵀ|Φ_c|`` (``γ_k = kε/(1 − kε)``, Higham 2002, Eq. 3.13); merging n/B batches adds
``≤ γ_{n/B}`` more. The accumulated statistic therefore satisfies
``|ΔS| ≤ γ_{B + n/B + 2} |Φ_c|ᵀ|Φ_c|`` entrywise (worst case, smallest for B ≈ √n; the observed
error grows like ``√(B + n/B)·ε``). For n = 10⁶, B = 10³ in float32 this is ≤ 2.4·10⁻⁴ worst case;
``tests/metrics/test_moments.py`` measures the error against a float64 reference and checks it
against this bound. Every GEMM requests full float32 precision (:mod:`metrics._numerics`).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from metrics._numerics import FOLD_RATIO, centre, mm, pow2_scale
from metrics._validate import as_matrix, common_dtype, same_n


class Moments(NamedTuple):
    """Sufficient statistics of features Φ (n×p) and stacked outputs M (n×q) over n samples.

    Attributes:
      n: () number of samples, in the statistics' dtype.
      phi_mean: (p,) μ = (1/n) Σ_x Φ(x).
      phi_css: (p, p) centred sum of squares Σ_x (Φ(x) − μ)(Φ(x) − μ)ᵀ = Φ_cᵀΦ_c.
      out_mean: (q,) ν = (1/n) Σ_x M(x).
      cross: (p, q) centred cross products Φ_cᵀ M_c (= out_projᵀ out_factor).
      out_factor: (q, q) upper-triangular G with M_c = U G, U (n×q) with orthonormal columns
        (thin QR of the centred outputs), so GᵀG = M_cᵀM_c without squaring its condition number.
      out_proj: (q, p) A = UᵀΦ_c, the centred features in that orthonormal basis.
      phi_factor: (p, p) upper-triangular R with ΦᵀΦ = RᵀR (uncentred), or None unless requested
        (``feature_factor=True``).
    """

    n: jax.Array
    phi_mean: jax.Array
    phi_css: jax.Array
    out_mean: jax.Array
    cross: jax.Array
    out_factor: jax.Array
    out_proj: jax.Array
    phi_factor: jax.Array | None = None


def _pad_rows(x: jax.Array, rows: int) -> jax.Array:
    """``x`` with zero rows appended up to ``rows`` (a thin QR needs at least as many rows as columns)."""
    if x.shape[0] >= rows:
        return x  # no copy (a zero-width pad is one on XLA:CPU)
    return jnp.pad(x, ((0, rows - x.shape[0]), (0, 0)))


def _tall_qr(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(R, Qᵀb) for the thin QR a = QR of an m×k ``a`` (R is k×k even when m < k)."""
    k = a.shape[1]
    q, r = jnp.linalg.qr(_pad_rows(a, k))
    return r, mm(q.T, _pad_rows(b, k))


def _r_factor(a: jax.Array) -> jax.Array:
    """k×k triangular R with AᵀA = RᵀR for any m×k ``a``."""
    return jnp.linalg.qr(_pad_rows(a, a.shape[1]), mode="r")


def _feature_stats(phi: jax.Array, q: jax.Array, rescale: bool) -> tuple[jax.Array, ...]:
    """(μ, Φ_cᵀΦ_c, QᵀΦ_c) for the orthonormal Q ⟂ 1 (n×k) of the centred outputs.

    Fast path, the centring folded into the products: Φ_cᵀΦ_c = ΦᵀΦ − nμμᵀ and
    QᵀΦ_c = QᵀΦ − (Qᵀ1)μᵀ (no centred copy of Φ: one GEMM at the machine's ``x.T @ x`` rate). Its
    relative error is ≈ ε·‖Φ‖_F²/‖Φ_c‖_F², so it is taken only when ‖Φ‖_F² ≤ FOLD_RATIO·‖Φ_c‖_F²
    (post-ReLU features: ≈ 1.5) and ΦᵀΦ neither overflows nor underflows; otherwise Φ is centred
    first and, with ``rescale``, multiplied by an exact power of two (the statistics are then in
    those units, which scale-invariant callers such as D_LR accept).
    """
    n, k = q.shape
    # one skinny GEMM gives QᵀΦ and the mean (a pass over Φ fewer than a separate mean)
    q1 = jnp.concatenate([q, jnp.full((n, 1), 1.0 / n, q.dtype)], axis=1)
    q_phi_mu = mm(q1.T, phi)
    q_phi, mu = q_phi_mu[:k], q_phi_mu[k]
    raw = mm(phi.T, phi)
    folded = raw - n * jnp.outer(mu, mu)
    t_raw = jnp.trace(raw)
    info = jnp.finfo(phi.dtype)
    in_range = jnp.isfinite(t_raw) & (t_raw > info.tiny / info.eps)
    fast = in_range & (FOLD_RATIO * jnp.trace(folded) >= t_raw)

    def fold(_):
        return mu, folded, q_phi - jnp.outer(jnp.sum(q, axis=0), mu)

    def centred(_):
        mu_c, phi_c = centre(pow2_scale(phi) if rescale else phi)
        return mu_c, mm(phi_c.T, phi_c), mm(q.T, phi_c)

    return jax.lax.cond(fast, fold, centred, None)


@partial(jax.jit, static_argnames=("feature_factor", "rescale"))
def _batch_moments(
    phi: jax.Array, out: jax.Array, feature_factor: bool = False, rescale: bool = False
) -> Moments:
    nu, out_c = centre(out)
    k = out.shape[1]
    q, g = jnp.linalg.qr(_pad_rows(out_c, k))  # M_c = Q G, Householder (column-wise stable)
    if phi.shape[0] >= k:
        mu, css, a = _feature_stats(phi, q, rescale)
    else:  # fewer samples than outputs (a small last batch): Q has k rows, the last ones padding
        mu, phi_c = centre(phi)
        css, a = mm(phi_c.T, phi_c), mm(q[: phi.shape[0]].T, phi_c)
    return Moments(
        n=jnp.asarray(phi.shape[0], phi.dtype),
        phi_mean=mu,
        phi_css=css,
        out_mean=nu,
        cross=mm(a.T, g),
        out_factor=g,
        out_proj=a,
        phi_factor=_r_factor(phi) if feature_factor else None,
    )


@jax.jit
def merge_moments(a: Moments, b: Moments) -> Moments:
    """Statistics of the union of two disjoint samples (Chan–Golub–LeVeque update and TSQR).

    ``S = S_a + S_b + w δ_Φ δ_Φᵀ``, ``K = K_a + K_b + w δ_Φ δ_Mᵀ`` with ``w = n_a n_b / n`` and
    δ = mean_b − mean_a; the output factor and projection from the QR
    ``[G_a; G_b; √w δ_Mᵀ] = Q_s G``, ``A = Q_sᵀ [A_a; A_b; √w δ_Φᵀ]`` (module docstring); the
    feature factor, when both have one, from the QR of ``[R_a; R_b]``.

    Args:
      a, b: :class:`Moments` of two samples with the same p and q.

    Returns:
      :class:`Moments` of both samples together.
    """
    n = a.n + b.n
    w = a.n * b.n / n
    d_phi = b.phi_mean - a.phi_mean
    d_out = b.out_mean - a.out_mean
    g, proj = _tall_qr(
        jnp.concatenate([a.out_factor, b.out_factor, jnp.sqrt(w) * d_out[None, :]], axis=0),
        jnp.concatenate([a.out_proj, b.out_proj, jnp.sqrt(w) * d_phi[None, :]], axis=0),
    )
    both = a.phi_factor is not None and b.phi_factor is not None
    return Moments(
        n=n,
        phi_mean=a.phi_mean + (b.n / n) * d_phi,
        phi_css=a.phi_css + b.phi_css + w * jnp.outer(d_phi, d_phi),
        out_mean=a.out_mean + (b.n / n) * d_out,
        cross=a.cross + b.cross + w * jnp.outer(d_phi, d_out),
        out_factor=g,
        out_proj=proj,
        phi_factor=_r_factor(jnp.concatenate([a.phi_factor, b.phi_factor])) if both else None,
    )


def _prepare(features, outputs) -> tuple[jax.Array, jax.Array]:
    """Validated (Φ, M) in their common dtype, M the column stack of ``outputs``."""
    phi = as_matrix(features, "features")
    outs = [as_matrix(o, f"outputs[{i}]", what="(n, q)") for i, o in enumerate(outputs)]
    for i, o in enumerate(outs):
        same_n(phi, o, "features", f"outputs[{i}]")
    dtype = common_dtype(phi, *outs)
    phi = phi.astype(dtype)
    out = (
        jnp.concatenate([o.astype(dtype) for o in outs], axis=1)
        if outs
        else jnp.zeros((phi.shape[0], 0), dtype)
    )
    if phi.shape[0] < 1:
        raise ValueError("features must have at least one row (sample)")
    return phi, out


def moments(features, *outputs, feature_factor: bool = False, rescale: bool = False) -> Moments:
    """Sufficient statistics of one in-memory sample (see :class:`Moments`).

    Cost O(np² + npq + nq²); all GEMMs at full float32 precision.

    Args:
      features: (n, p) features Φ (NumPy or JAX, float32/float64; float16/bfloat16 are upcast to
        float32; complex is refused).
      *outputs: any number of (n, q_i) arrays (e.g. network outputs F, targets Y), stacked
        column-wise into M = [F, Y, ...] (n, q). None for features only.
      feature_factor: also compute the p×p factor R of ΦᵀΦ (one more QR, O(np²)), needed by the
        feature decomposition.
      rescale: if ΦᵀΦ would overflow or underflow, compute the feature statistics of Φ·2⁻ᵉ
        (2ᵉ ≈ max|Φ|, exact) instead; for scale-invariant uses (D_LR) of extreme-magnitude data.

    Returns:
      :class:`Moments` in the common dtype of the inputs.
    """
    phi, out = _prepare(features, outputs)
    return _batch_moments(phi, out, feature_factor=feature_factor, rescale=rescale)


def accumulate_moments(batches: Iterable, *, feature_factor: bool = False) -> Moments:
    """Sufficient statistics of a sample streamed as an iterator of batches.

    Memory is O(p² + pq + q²) whatever the number of samples n: each batch is reduced to its
    :class:`Moments` and merged into the running total (:func:`merge_moments`). The output factor's
    round-off floor grows slowly with the number of merges (measured in float32 on softmax outputs of
    n = 10⁵ samples: 0.8ε·s₁ in one batch, 2ε after 10² batches, 7ε after 10³), far below the rank
    tolerance 2ε(√n + √C)·s₁. Batches are cast to the dtype of
    the first. Error bound: module docstring.

    Args:
      batches: iterable of ``features`` arrays (B, p) or tuples ``(features, outputs, ...)`` with
        (B, q_i) outputs, as for :func:`moments`. Batch sizes may differ.
      feature_factor: as in :func:`moments`.

    Returns:
      :class:`Moments` of all batches together.

    Raises:
      ValueError: if ``batches`` is empty or the batches disagree in p or q.
    """
    total = None
    for i, batch in enumerate(batches):
        parts = batch if isinstance(batch, tuple | list) else (batch,)
        phi, out = _prepare(parts[0], parts[1:])
        if total is not None:
            if phi.shape[1] != total.phi_mean.shape[0] or out.shape[1] != total.out_mean.shape[0]:
                raise ValueError(
                    f"batch {i} has features/outputs widths (p, q) = "
                    f"{(phi.shape[1], out.shape[1])}, expected {total.cross.shape} as in the "
                    "first batch"
                )
            dtype = total.phi_mean.dtype
            phi, out = phi.astype(dtype), out.astype(dtype)
        b = _batch_moments(phi, out, feature_factor=feature_factor)
        total = b if total is None else merge_moments(total, b)
    if total is None:
        raise ValueError("batches is empty: need at least one batch of samples")
    return total
