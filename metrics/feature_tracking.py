"""Following the feature decomposition over training: per-feature intensity and quality in time.

D Fig 7 and T Fig 7.7 plot, at several epochs, the intensity ρ_k (T Eq. 1.29) and the quality
Q*_k (T Eq. 2.3) of each eigenfunction e_k of the last-layer features (:func:`metrics.
feature_decomposition`, which gives both at one time). Comparing "the same feature" at two
times needs a matching, because the eigenfunctions rotate and their intensity order changes.

**Decision (matching).** Both decompositions are taken on the same inputs S_fit (the features
Φ_t of every log point evaluated on one fixed sample). The overlap of eigenfunction k at time a
with eigenfunction l at time b is the squared cosine between them on S_fit,

    O_kl = ⟨e^a_k|e^b_l⟩² / (‖e^a_k‖² ‖e^b_l‖²)   (empirical measure on S_fit),

so Σ_l O_kl = ‖P_{span Φ_b} e^a_k‖²/‖e^a_k‖² ≤ 1 (the eigenfunctions of one time are orthonormal
there). The match a → b is the one-to-one assignment π maximising Σ_k O_{k π(k)} (a linear
assignment problem, solved exactly). Tracks are chained between consecutive log points from an
anchor log point (default: the last, so feature j is the j-th most intense at the end of
training), which follows rotations that are small between log points even when the end points
overlap little. Inside a degenerate eigenspace (equal ρ) the eigenfunctions, and so the match,
are arbitrary: the matched overlap (``FeatureTracks.overlap``) says how well defined each step is.

Float32-safe: the eigenfunctions on S_fit are √n times the left singular vectors of Φ, read off
its Householder QR (Φ = QR, R = U_R S V_Rᵀ, e_k = √n (Q U_R)_k), so the angle error of e_k is
the backward-stable ≈ ε·s₁/gap_k (gap_k: distance of s_k to its nearest other singular value),
not the ε·s₁²/(s_k·gap_k) of a Gram matrix's eigenvectors, and a squared overlap errs by the
square of the angles; no Gram matrix is formed. Modes below the rank tolerance
2ε(√n + √p)·s₁ (:mod:`metrics._numerics`) have zero overlap with everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from metrics._numerics import mm, pow2_scale, rank_rtol
from metrics._validate import as_matrix, common_dtype, is_concrete, same_n
from metrics.decomposition import feature_decomposition


class FeatureTracks(NamedTuple):
    """Which eigenfunction of each log point is the same feature (T log points, p features).

    Attributes:
      rank: (T, p) int, ``rank[t, j]`` = the position (0 = most intense) at log point t of
        tracked feature j, the j-th most intense at the anchor log point.
      overlap: (T, p) the overlap O (module docstring) of tracked feature j between log point t
        and its neighbour towards the anchor (1 at the anchor itself).
    """

    rank: np.ndarray
    overlap: np.ndarray

    def follow(self, values) -> np.ndarray:
        """(T, p) per-time values indexed by intensity position → the same values per tracked
        feature: ``out[t, j] = values[t, rank[t, j]]``."""
        values = np.asarray(values)
        if values.shape != self.rank.shape:
            raise ValueError(
                f"values must have the tracks' shape (T, p) = {self.rank.shape}, got {values.shape}"
            )
        return np.take_along_axis(values, self.rank, axis=1)


class FeatureTrajectories(NamedTuple):
    """Per-feature intensity, quality and utilization over training, along the tracks.

    Every array is (T, p): row t is log point t, column j tracked feature j (the j-th most
    intense at the anchor log point, :class:`FeatureTracks`).

    Attributes:
      rho: ρ_j(t), intensity (T Eq. 1.29).
      quality: Q*_j(t) (T Eq. 2.3).
      utilization: Q̂_j(t) (T Eq. 2.5, unsquared).
      tracks: the :class:`FeatureTracks` behind the columns.
    """

    rho: np.ndarray
    quality: np.ndarray
    utilization: np.ndarray
    tracks: FeatureTracks


@jax.jit
def _eigenbasis(phi: jax.Array) -> jax.Array:
    """(n, p) e_k/√n on the sample: the left singular vectors Q U_R of Φ, zero for null modes."""
    n, p = phi.shape
    q, r = jnp.linalg.qr(pow2_scale(phi))
    u, s, _ = jnp.linalg.svd(r)
    live = s > rank_rtol(phi.dtype, n, p) * s[0]
    return jnp.where(live[None, :], mm(q, u), 0.0)


def eigenfunction_overlap(features_a, features_b) -> jax.Array:
    r"""Squared cosines between the Nyström eigenfunctions of two feature maps on one sample.

    .. math:: O_{kl} = \frac{\langle e^a_k|e^b_l\rangle^2}{\lVert e^a_k\rVert^2
              \lVert e^b_l\rVert^2},\qquad e_k(x) = \sqrt{n}\,u_k^\top\Phi(x)/s_k

    (T Alg. 1, Eq. 1.33: ϕ = Φᵀ = U S Vᵀ on the sample), inner products under the empirical
    measure of the sample, eigenfunctions in decreasing order of intensity ρ_k = s_k²/n.

    Args:
      features_a: (n, p_a) features Φ_a on the sample (e.g. at an earlier log point), n ≥ p_a.
      features_b: (n, p_b) features Φ_b on the same inputs, n ≥ p_b.

    Returns:
      (p_a, p_b) O ∈ [0, 1]; every row and every column sums to ≤ 1; rows and columns of
      numerically null modes are zero.

    Raises:
      ValueError: not 2-D, different n, n < p, NaN/inf or complex input, all-zero features.
    """
    a = as_matrix(features_a, "features_a")
    b = as_matrix(features_b, "features_b")
    same_n(a, b, "features_a", "features_b")
    for x, name in ((a, "features_a"), (b, "features_b")):
        if x.shape[0] < x.shape[1]:
            raise ValueError(
                f"{name} has n = {x.shape[0]} samples < p = {x.shape[1]} features: the "
                "eigenfunctions need n ≥ p"
            )
        if is_concrete(x) and not bool(jnp.any(x != 0)):
            raise ValueError(f"{name} are all zero: no eigenfunctions")
    dtype = common_dtype(a, b)
    ea, eb = _eigenbasis(a.astype(dtype)), _eigenbasis(b.astype(dtype))
    return jnp.clip(mm(ea.T, eb) ** 2, 0.0, 1.0)


def match_features(overlap) -> np.ndarray:
    r"""The one-to-one match of features a → b with the largest total overlap.

    .. math:: \pi = \arg\max_{\pi\ \text{injective}} \sum_k O_{k\pi(k)}

    a linear assignment problem, solved exactly on the host (``scipy.optimize.
    linear_sum_assignment``; it is combinatorial, not a JAX transformation).

    Args:
      overlap: (p_a, p_b) overlaps O (:func:`eigenfunction_overlap`), p_a ≤ p_b.

    Returns:
      (p_a,) int, ``pi[k]`` = the feature of b matched to feature k of a.

    Raises:
      ValueError: not 2-D, p_a > p_b, NaN/inf.
    """
    from scipy.optimize import linear_sum_assignment

    o = np.asarray(overlap, dtype=np.float64)
    if o.ndim != 2 or o.shape[0] > o.shape[1] or o.shape[0] == 0:
        raise ValueError(f"overlap must be a (p_a, p_b) matrix with 1 ≤ p_a ≤ p_b, got {o.shape}")
    if not np.all(np.isfinite(o)):
        raise ValueError("overlap contains NaN or inf")
    rows, cols = linear_sum_assignment(o, maximize=True)
    pi = np.empty(o.shape[0], dtype=np.int64)
    pi[rows] = cols
    return pi


def track_features(features: Sequence, *, anchor: int = -1) -> FeatureTracks:
    """Follow each eigenfunction through T log points by chaining :func:`match_features`.

    Feature j is the j-th most intense eigenfunction at log point ``anchor``; from there its
    position at each neighbouring log point is its match under the overlap of the two
    decompositions (module docstring), step by step towards both ends.

    Args:
      features: T ≥ 1 arrays (n, p) of the features Φ_t on the same n inputs, n ≥ p.
      anchor: the log point whose intensity order names the features (negative counts from the
        end; default the last).

    Returns:
      :class:`FeatureTracks` with (T, p) ``rank`` and ``overlap``.

    Raises:
      ValueError: no log points, different shapes, anchor out of range, and the errors of
        :func:`eigenfunction_overlap`.
    """
    mats = [as_matrix(f, f"features[{t}]") for t, f in enumerate(features)]
    if not mats:
        raise ValueError("features must hold at least one log point")
    shapes = {m.shape for m in mats}
    if len(shapes) != 1:
        raise ValueError(f"every log point needs features of one shape (n, p), got {shapes}")
    n_t, p = len(mats), mats[0].shape[1]
    if not -n_t <= anchor < n_t:
        raise ValueError(f"anchor must be in [-{n_t}, {n_t}), got {anchor}")
    anchor %= n_t
    rank = np.empty((n_t, p), dtype=np.int64)
    overlap = np.ones((n_t, p))
    rank[anchor] = np.arange(p)
    steps = [(t, t - 1) for t in range(anchor + 1, n_t)] + [
        (t, t + 1) for t in range(anchor - 1, -1, -1)
    ]
    for t, prev in steps:  # prev is the neighbour towards the anchor, already tracked
        o = np.asarray(eigenfunction_overlap(mats[prev], mats[t]))
        pi = match_features(o)
        rank[t] = pi[rank[prev]]
        overlap[t] = o[rank[prev], rank[t]]
    return FeatureTracks(rank=rank, overlap=overlap)


def feature_trajectories(
    features_fit: Sequence,
    features_eval: Sequence,
    outputs_eval: Sequence,
    targets_eval,
    *,
    anchor: int = -1,
    rtol: float | None = None,
) -> FeatureTrajectories:
    r"""Intensity ρ_j(t), quality Q*_j(t) and utilization Q̂_j(t) of each feature over training.

    .. math:: \rho_k = s_k^2/n,\quad Q^*_k = \frac{\langle e_k|P_{H^*}e_k\rangle}
              {\lVert e_k\rVert^2\dim H^*},\quad \hat Q_k = \frac{\langle e_k|P_{\hat H}e_k
              \rangle}{\lVert e_k\rVert^2\dim\hat H}

    (T Eq. 1.29, 2.3, 2.5; D Eq. 5–6) at each log point by :func:`metrics.
    feature_decomposition` (Nyström on S_fit, inner products on S_eval), the columns following
    each feature through time by :func:`track_features` on S_fit (D Fig 7, T Fig 7.7).

    Args:
      features_fit: T arrays (n, p): Φ_t on the fixed fitting inputs S_fit, n ≥ p.
      features_eval: T arrays (m, p): Φ_t on the fixed evaluation inputs S_eval.
      outputs_eval: T arrays (m, C): the network outputs f̂_t on S_eval.
      targets_eval: (m, C*) targets f* on S_eval (one-hot × scale; fixed in time).
      anchor: the log point whose intensity order names the features (default the last).
      rtol: relative rank tolerance of dim Ĥ, dim H* (:func:`metrics.feature_decomposition`).

    Returns:
      :class:`FeatureTrajectories`, (T, p) arrays.

    Raises:
      ValueError: sequences of different lengths, and the errors of the functions used.
    """
    n_t = len(features_fit)
    if not n_t or len(features_eval) != n_t or len(outputs_eval) != n_t:
        raise ValueError(
            "features_fit, features_eval and outputs_eval need one entry per log point, got "
            f"{n_t}, {len(features_eval)}, {len(outputs_eval)}"
        )
    decs = [
        feature_decomposition(f, e, o, targets_eval, rtol=rtol)
        for f, e, o in zip(features_fit, features_eval, outputs_eval, strict=True)
    ]
    tracks = track_features(features_fit, anchor=anchor)
    return FeatureTrajectories(
        rho=tracks.follow(np.stack([np.asarray(d.rho) for d in decs])),
        quality=tracks.follow(np.stack([np.asarray(d.quality) for d in decs])),
        utilization=tracks.follow(np.stack([np.asarray(d.utilization) for d in decs])),
        tracks=tracks,
    )
