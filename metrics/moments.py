"""Streaming sufficient statistics of features and outputs: O(p² + pq + q²) memory for any n.

Every metric in :mod:`metrics` that needs more than one pass over n samples is a function of these
statistics, so arrays and iterators of batches go through the same formulas.

* Feature second moments are accumulated **centred**, batch by batch, and merged with the
  parallel update of Chan, Golub & LeVeque (1979):
  ``S = S_a + S_b + (n_a n_b / n) δ δᵀ`` with ``δ = μ_b − μ_a``. Uncentred accumulation would lose
  ``(|μ|/σ)²·ε`` relative accuracy on post-ReLU features, whose mean is large against their spread.
* The centred outputs M_c (n×q) are kept as a q×q factor ``G = diag(s) Vᵀ`` with ``M_c = U G`` for
  some U with orthonormal columns, i.e. their SVD without U. Batches are merged by factoring the
  stack ``[G_a; G_b; √(n_a n_b/n) δ_Mᵀ]``, whose Gram is that of the union (pairwise, in a binary
  tree, when streaming, so round-off grows like log of the number of batches). Each factor comes from
  two Rayleigh–Ritz passes (:func:`_rayleigh_ritz`): GEMMs plus two q×q ``eigh``, because XLA's
  CPU QR/SVD of a tall matrix is 10–100× slower than a GEMM of the same size. Numerical ranks are
  read off singular values accurate to a few ε·s₁ for typical spectra (≤ 3ε on random softmax
  outputs), up to ~5·10²ε·s₁ for strongly graded ones (s_{q−1}/s₁ ~ 10⁻¹¹, measured in
  ``tests/metrics/test_moments.py``), against √ε·s₁ from one eigendecomposition of M_cᵀM_c.

Float32 error bound. Per batch of size B the centred Gram ``Φ_cᵀΦ_c`` is a GEMM with entrywise error
``≤ γ_B |Φ_c|ᵀ|Φ_c|`` (``γ_k = kε/(1 − kε)``, Higham 2002, Eq. 3.13); merging n/B batches adds
``≤ γ_{n/B}`` more. The accumulated statistic therefore satisfies
``|ΔS| ≤ γ_{B + n/B + 2} |Φ_c|ᵀ|Φ_c|`` entrywise (worst case, smallest for B ≈ √n; the observed
error grows like ``√(B + n/B)·ε``). For n = 10⁶, B = 10³ in float32 this is ≤ 2.4·10⁻⁴ worst case;
``tests/metrics/test_moments.py`` measures the error against a float64 reference and checks it
against this bound. Accumulate in float64 (cast the batches) when that is not enough.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from metrics._validate import as_matrix, common_dtype, same_n


class Moments(NamedTuple):
    """Sufficient statistics of features Φ (n×p) and stacked outputs M (n×q) over n samples.

    Attributes:
      n: () number of samples, in the statistics' dtype.
      phi_mean: (p,) μ = (1/n) Σ_x Φ(x).
      phi_css: (p, p) centred sum of squares Σ_x (Φ(x) − μ)(Φ(x) − μ)ᵀ = Φ_cᵀΦ_c.
      out_mean: (q,) ν = (1/n) Σ_x M(x).
      cross: (p, q) centred cross products Φ_cᵀ M_c.
      out_factor: (q, q) G = diag(s) Vᵀ with M_c = U G, U orthonormal (n×q): s (decreasing) and V
        are the singular values and right singular vectors of the centred outputs, so
        GᵀG = M_cᵀM_c without the squared round-off of that Gram matrix.
    """

    n: jax.Array
    phi_mean: jax.Array
    phi_css: jax.Array
    out_mean: jax.Array
    cross: jax.Array
    out_factor: jax.Array


def _centre(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Column mean and centred copy, with one refinement pass (removes the mean's round-off)."""
    mu = jnp.mean(x, axis=0)
    xc = x - mu
    mu = mu + jnp.mean(xc, axis=0)
    return mu, x - mu


def _rayleigh_ritz(a: jax.Array, passes: int = 2) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(Z, s, V): the SVD A = (Z/s) diag(s) Vᵀ of an m×q matrix by GEMMs and q×q ``eigh``.

    Iterated Rayleigh–Ritz: each pass diagonalises ZᵀZ and rotates Z ← Z W, V ← V W. One pass
    gives the singular values only to √ε·s₁ (the Gram squares them); the second works on an almost
    orthogonal Z, whose Gram entries carry relative error ε, which fixes the large singular
    values. ``eigh``'s absolute error ε·s₁² still mixes the columns of small singular values with
    each other (error ε·s₁²/s_k for s_k ≪ s₁), so a last pass rotates only the columns with
    s_k ≤ √ε·s₁ among themselves, with their own Gram (scale s_k²). The singular values, and the
    round-off floor of an exactly rank-deficient A, then come out at a few ε·s₁, as from a tall
    SVD, at GEMM speed. s is decreasing; Z = A V has orthogonal columns of norms s.
    """
    q = a.shape[1]
    z, v = a, jnp.eye(q, dtype=a.dtype)
    for _ in range(passes):
        _, w = jnp.linalg.eigh(z.T @ z)
        z, v = z @ w[:, ::-1], v @ w[:, ::-1]  # decreasing eigenvalues
    s = jnp.linalg.norm(z, axis=0)
    small = s <= jnp.sqrt(jnp.finfo(a.dtype).eps) * jnp.max(s)
    block = small[:, None] & small[None, :]
    c = jnp.where(block, z.T @ z, 0.0)
    # the large coordinates get eigenvalue −(trace + tiny) < every small one: eigh keeps them apart
    shift = jnp.trace(c) + jnp.finfo(a.dtype).tiny
    _, w = jnp.linalg.eigh(c - jnp.diag(jnp.where(small, 0.0, shift)))
    w = jnp.where(block, w, jnp.eye(q, dtype=a.dtype))  # large columns first in both orders
    z, v = z @ w, v @ w
    s = jnp.linalg.norm(z, axis=0)
    order = jnp.argsort(-s)
    return z[:, order], s[order], v[:, order]


def _factor(a: jax.Array) -> jax.Array:
    """(q, q) G = diag(s) Vᵀ with GᵀG = AᵀA (see :class:`Moments`), for any m×q A."""
    if a.shape[1] == 0:
        return jnp.zeros((0, 0), a.dtype)
    _, s, v = _rayleigh_ritz(a)
    return s[:, None] * v.T


@jax.jit
def _batch_moments(phi: jax.Array, out: jax.Array) -> Moments:
    mu, phi_c = _centre(phi)
    nu, out_c = _centre(out)
    n = jnp.asarray(phi.shape[0], phi.dtype)
    return Moments(n, mu, phi_c.T @ phi_c, nu, phi_c.T @ out_c, _factor(out_c))


def _merge_sums(a: Moments, b: Moments) -> tuple[Moments, jax.Array]:
    """(Union statistics with ``out_factor`` left as a's, the stack whose factor is the union's)."""
    n = a.n + b.n
    w = a.n * b.n / n
    d_phi = b.phi_mean - a.phi_mean
    d_out = b.out_mean - a.out_mean
    merged = Moments(
        n=n,
        phi_mean=a.phi_mean + (b.n / n) * d_phi,
        phi_css=a.phi_css + b.phi_css + w * jnp.outer(d_phi, d_phi),
        out_mean=a.out_mean + (b.n / n) * d_out,
        cross=a.cross + b.cross + w * jnp.outer(d_phi, d_out),
        out_factor=a.out_factor,
    )
    stack = jnp.concatenate([a.out_factor, b.out_factor, jnp.sqrt(w) * d_out[None, :]], axis=0)
    return merged, stack


@jax.jit
def merge_moments(a: Moments, b: Moments) -> Moments:
    """Statistics of the union of two disjoint samples (Chan–Golub–LeVeque update).

    ``S = S_a + S_b + (n_a n_b / n) δ_Φ δ_Φᵀ``, ``K = K_a + K_b + (n_a n_b / n) δ_Φ δ_Mᵀ`` and the
    output factor G of the stack ``[G_a; G_b; √(n_a n_b / n) δ_Mᵀ]`` (same Gram as the union's
    centred outputs), with δ = mean_b − mean_a.

    Args:
      a, b: :class:`Moments` of two samples with the same p and q.

    Returns:
      :class:`Moments` of both samples together.
    """
    merged, stack = _merge_sums(a, b)
    return merged._replace(out_factor=_factor(stack))


def _outputs_only(m: Moments) -> Moments:
    """The output statistics of ``m`` as Moments of p = 0 features (for the merge tree)."""
    dtype = m.phi_mean.dtype
    q = m.out_mean.shape[0]
    empty = jnp.zeros((0,), dtype)
    return Moments(
        m.n, empty, jnp.zeros((0, 0), dtype), m.out_mean, jnp.zeros((0, q), dtype), m.out_factor
    )


@jax.jit
def _absorb(total: Moments, phi: jax.Array, out: jax.Array) -> tuple[Moments, Moments]:
    """(total ∪ batch without refactoring the outputs, the batch's output statistics)."""
    b = _batch_moments(phi, out)
    return _merge_sums(total, b)[0], _outputs_only(b)


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


def moments(features, *outputs) -> Moments:
    """Sufficient statistics of one in-memory sample (see :class:`Moments`).

    Args:
      features: (n, p) features Φ (NumPy or JAX, float32/float64).
      *outputs: any number of (n, q_i) arrays (e.g. network outputs F, targets Y), stacked
        column-wise into M = [F, Y, ...] (n, q). None for features only.

    Returns:
      :class:`Moments` in the common dtype of the inputs.
    """
    return _batch_moments(*_prepare(features, outputs))


def accumulate_moments(batches: Iterable) -> Moments:
    """Sufficient statistics of a sample streamed as an iterator of batches.

    Memory is O(p² + pq + q² log(n/B)) whatever the number of samples n: the feature statistics
    are merged batch by batch (:func:`merge_moments`), the q×q output factors pairwise in a binary
    tree, so the round-off floor of rank-deficient outputs (e.g. softmax, centred rank q − 1) grows
    like log₂ of the number of batches, not linearly (measured in float32: 4ε vs 25ε·s₁ after
    10³ batches). Batches are cast to the dtype of the first. Error bound: module docstring.

    Args:
      batches: iterable of ``features`` arrays (B, p) or tuples ``(features, outputs, ...)`` with
        (B, q_i) outputs, as for :func:`moments`. Batch sizes may differ.

    Returns:
      :class:`Moments` of all batches together.

    Raises:
      ValueError: if ``batches`` is empty or the batches disagree in p or q.
    """
    total, tree = None, []
    for i, batch in enumerate(batches):
        parts = batch if isinstance(batch, tuple | list) else (batch,)
        phi, out = _prepare(parts[0], parts[1:])
        if total is None:
            total = _batch_moments(phi, out)
            leaf = _outputs_only(total)
        else:
            if phi.shape[1] != total.phi_mean.shape[0] or out.shape[1] != total.out_mean.shape[0]:
                raise ValueError(
                    f"batch {i} has features/outputs widths (p, q) = "
                    f"{(phi.shape[1], out.shape[1])}, expected {total.cross.shape} as in the "
                    "first batch"
                )
            dtype = total.phi_mean.dtype
            total, leaf = _absorb(total, phi.astype(dtype), out.astype(dtype))
        # output factors merge pairwise (binary counter): round-off floor ∝ log(#batches), not #
        level = 0
        while tree and tree[-1][0] == level:
            leaf, level = merge_moments(tree.pop()[1], leaf), level + 1
        tree.append((level, leaf))
    if total is None:
        raise ValueError("batches is empty: need at least one batch of samples")
    out_stats = tree.pop()[1]
    while tree:
        out_stats = merge_moments(tree.pop()[1], out_stats)
    return total._replace(out_factor=out_stats.out_factor)
