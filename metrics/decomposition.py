"""Feature decomposition: intensity, quality, utilization and effective dimensions of Φ.

Thesis T §1.5.3–1.5.4 (Alg. 1, Eq. 1.29–1.34) and §2.3 (Eq. 2.3–2.7); D Eq. 5–6, 9.
Nyström on a fitting sample S_fit of n ≥ p points: ϕ = Φ(S_fit)ᵀ = U S Vᵀ (p×n), with the empirical
measure (**Decision**) ρ_k = s_k²/n and e_k(x) = √n u_kᵀΦ(x)/s_k, so ⟨e_k|e_l⟩ = δ_kl on S_fit.
Inner products with target / learned functions are taken on a separate evaluation sample S_eval
(Eq. 1.34), normalising by the evaluation norm of e_k.

Float32-safe route: the SVD of ϕ is read off the triangular factor R of Φ (Householder QR, TSQR
when streamed; ΦᵀΦ = RᵀR, :mod:`metrics.moments`), so s_k carries an absolute error ≈ ε·s₁, not
ε·s₁² as from an eigendecomposition of the Gram matrix; evaluation norms ‖e_k‖² = ‖R_eval w_k‖²
and projections onto outputs/targets use the factored output statistics, never a Gram matrix.
Every mode above the rank tolerance 2ε(√n + √p)·s₁ (:mod:`metrics._numerics`) is kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from metrics._numerics import mm, pow2_column_scale, pow2_scale, rank_rtol
from metrics._validate import as_float, as_matrix, check_finite, is_concrete, same_n
from metrics.dlr import dlr_from_moments
from metrics.moments import Moments, accumulate_moments, moments


class FeatureDecomposition(NamedTuple):
    """Per-eigenfunction metrics of the features, in decreasing order of intensity (p entries).

    Attributes:
      rho: (p,) intensities ρ_k = s_k²/n_fit (T Eq. 1.29), decreasing.
      relative_intensity: (p,) ρ_k/ρ_1.
      quality: (p,) Q*_k = ⟨e_k|P_H* e_k⟩/(‖e_k‖² dim H*) (T Eq. 2.3), or None without targets.
      utilization: (p,) Q̂_k = ⟨e_k|P_Ĥ e_k⟩/(‖e_k‖² dim Ĥ) (T Eq. 2.5, unsquared).
      cum_quality: (p,) Π*(k) = Σ_{j≤k} Q*_j (T Eq. 2.4), or None.
      cum_utilization: (p,) Π̂(k) = Σ_{j≤k} Q̂_j (T Eq. 2.5).
      d_eff_rho: () D_eff(ρ) (T Eq. 1.16) over all p intensities.
      d_eff_rho_adjusted: () 1 + D_eff(ρ_2, …, ρ_p) (T Eq. 2.6; D Eq. 9).
      d_eff_quality: () D_eff(Q*), or None.
      d_eff_utilization: () D_eff(Q̂).
      e1_constant_overlap: () |⟨e_1|1⟩|/‖e_1‖ on S_eval (≈ 1 when e_1 is the constant, T §2.5.1).
      dlr: () D_LR on S_eval (:func:`metrics.dlr`).
      is_mf: () bool, minimum-feature regime D_LR < threshold (T Definition 2, ε = 0.1).
      dim_learned: () dim Ĥ, numerical rank of the (uncentred) outputs.
      dim_target: () dim H*, numerical rank of the targets, or None.
    """

    rho: jax.Array
    relative_intensity: jax.Array
    quality: jax.Array | None
    utilization: jax.Array
    cum_quality: jax.Array | None
    cum_utilization: jax.Array
    d_eff_rho: jax.Array
    d_eff_rho_adjusted: jax.Array
    d_eff_quality: jax.Array | None
    d_eff_utilization: jax.Array
    e1_constant_overlap: jax.Array
    dlr: jax.Array
    is_mf: jax.Array
    dim_learned: jax.Array
    dim_target: jax.Array | None


@jax.jit
def _effective_dimension(v: jax.Array) -> jax.Array:
    """D_eff of non-negative values; 0 for an all-zero (or empty) vector."""
    v = jnp.maximum(v, 0.0)  # eigenvalues may carry −ε round-off
    total = jnp.sum(v, axis=-1, keepdims=True)
    w = v / jnp.where(total > 0, total, 1.0)
    d = jnp.exp(-jnp.sum(jax.scipy.special.xlogy(w, w), axis=-1))
    return jnp.where(total[..., 0] > 0, d, 0.0)


def effective_dimension(values) -> jax.Array:
    r"""Effective dimension, the exponential of the Shannon entropy of the normalised values.

    .. math:: D_{eff}(\rho) = \exp\Big(-\sum_i \hat\rho_i \ln \hat\rho_i\Big),\quad
              \hat\rho_i = \rho_i / \textstyle\sum_j \rho_j

    (thesis T Eq. 1.16), with 0 ln 0 = 0; equals d for d equal non-zero entries. Negative entries
    (round-off of eigenvalues) count as 0.

    Args:
      values: (..., k) non-negative values ρ (eigenvalues, qualities, utilizations).

    Returns:
      (...) D_eff ∈ [1, k].

    Raises:
      ValueError: NaN/inf, complex values, or values with no positive entry (D_eff undefined), on
        concrete input.
    """
    v = as_float(values, "values")
    if v.ndim < 1 or v.shape[-1] < 1:
        raise ValueError(f"values must have shape (..., k) with k ≥ 1, got {v.shape}")
    check_finite(v, "values")
    if is_concrete(v) and np.any(np.max(np.asarray(v), axis=-1) <= 0):
        raise ValueError("values must have a positive entry: D_eff of all-zero values is undefined")
    return _effective_dimension(v)


class Nystrom(NamedTuple):
    """Empirical eigenvalues and eigenfunctions of the feature operator (T Alg. 1).

    Attributes:
      rho: (p,) ρ_k = s_k²/n, decreasing.
      weights: (p, p) W with e_k(x) = Σ_i Φ_i(x) W_ik = √n u_kᵀΦ(x)/s_k; columns of numerically
        null modes (s_k ≤ 2ε(√n + √p)·s₁, :mod:`metrics._numerics`) are zero.
    """

    rho: jax.Array
    weights: jax.Array


@jax.jit
def _nystrom(r: jax.Array, n: jax.Array) -> Nystrom:
    """Nyström from the factor R of ΦᵀΦ: R = U_R S V_Rᵀ gives ϕ = V_R S (Q U_R)ᵀ, so u_k = V_R[:, k]."""
    _, s, vt = jnp.linalg.svd(r)
    live = s > rank_rtol(r.dtype, n, r.shape[0]) * s[0]
    w = jnp.where(live, vt.T * (jnp.sqrt(n) / jnp.where(live, s, 1.0)), 0.0)
    return Nystrom(rho=s * s / n, weights=w)


def _check_fit(features_fit) -> jax.Array:
    fit = as_matrix(features_fit, "features_fit", what="(n, p)")
    if fit.shape[0] < fit.shape[1]:
        raise ValueError(
            f"features_fit has n = {fit.shape[0]} samples < p = {fit.shape[1]} features: Nyström "
            "needs n ≥ p to resolve all p eigenfunctions (use more fitting samples)"
        )
    return fit


def nystrom(features_fit) -> Nystrom:
    r"""Nyström eigen-decomposition of the feature operator on a fitting sample.

    .. math:: \phi = \Phi(S_{fit})^\top = U S V^\top,\quad \rho_k = s_k^2/n,\quad
              e_k(x) = \sqrt{n}\,u_k^\top \Phi(x)/s_k

    (thesis T Alg. 1, Eq. 1.33, with the empirical-measure normalisation ⟨e_k|e_l⟩ = δ_kl on
    S_fit). Computed from the Householder QR of Φ and the SVD of its p×p factor: O(np² + p³),
    singular values to ε·s₁ in float32 and float64.

    Args:
      features_fit: (n, p) features Φ on S_fit, n ≥ p.

    Returns:
      :class:`Nystrom`; evaluate the eigenfunctions on any sample as ``features @ weights``.
    """
    m = moments(_check_fit(features_fit), feature_factor=True)
    return _nystrom(m.phi_factor, m.n)


def _projection_norms(m: Moments, cols: jax.Array, w: jax.Array, rtol: jax.Array):
    """(Σ_x (P_X e_k)(x)² for each k, rank of X) on S_eval, X = the columns of M where cols.

    X = 1νᵀ + M_c = [1/√n, U] [√n νᵀ; G] (uncentred; U ⟂ 1 the orthonormal factor of M_c), so the
    SVD U_s S V_sᵀ of the small (q+1)×q stack gives the basis [1/√n, U] U_s of col(X), and the
    coordinates of Φ in [1/√n, U] are [√n μᵀ; A] (A = UᵀΦ_c = UᵀΦ).
    """
    dtype = m.phi_css.dtype
    stack = jnp.concatenate([jnp.sqrt(m.n) * m.out_mean[None, :], m.out_factor], axis=0)
    stack = jnp.where(cols[None, :], stack, 0.0)
    d = pow2_column_scale(jnp.linalg.norm(stack, axis=0))  # equilibrate as in metrics.dlr
    u, s, _ = jnp.linalg.svd(stack * d, full_matrices=False)
    tol = jnp.where(rtol > 0, rtol, rank_rtol(dtype, m.n, jnp.sum(cols)))
    keep = s > tol * s[0]
    coords = jnp.concatenate([jnp.sqrt(m.n) * m.phi_mean[None, :], m.out_proj], axis=0)
    coef = mm(jnp.where(keep[None, :], u, 0.0).T, mm(coords, w))  # (Q_X)ᵀ E
    return jnp.sum(coef * coef, axis=0), jnp.sum(keep)


@jax.jit
def _decompose(fit: Moments, ev: Moments, out_cols, tgt_cols, rtol, threshold, value):
    dtype = fit.phi_css.dtype
    rho, w = _nystrom(fit.phi_factor, fit.n)
    e_ev = mm(ev.phi_factor, w)  # R_eval W: ‖e_k‖² on S_eval without a Gram matrix
    norm2 = jnp.sum(e_ev * e_ev, axis=0)
    safe = jnp.where(norm2 > 0, norm2, 1.0)

    def metric(cols):
        proj, r = _projection_norms(ev, cols, w, rtol)
        qk = jnp.where(norm2 > 0, proj / safe, 0.0) / jnp.maximum(r, 1).astype(dtype)
        return qk, jnp.cumsum(qk), _effective_dimension(qk), r

    util, cum_util, d_util, r_out = metric(out_cols)
    qual, cum_qual, d_qual, r_tgt = metric(tgt_cols)
    e1 = jnp.abs(mm(ev.phi_mean, w[:, 0])) / jnp.sqrt(safe[0] / ev.n)
    p = rho.shape[0]
    return FeatureDecomposition(
        rho=rho,
        relative_intensity=rho / rho[0],
        quality=qual,
        utilization=util,
        cum_quality=cum_qual,
        cum_utilization=cum_util,
        d_eff_rho=_effective_dimension(rho),
        # 1 + D_eff(ρ₂…ρ_p) (T Eq. 2.6); the constant mode alone counts 1 (p = 1, dead units)
        d_eff_rho_adjusted=1.0 + (_effective_dimension(rho[1:]) if p > 1 else 0.0),
        d_eff_quality=d_qual,
        d_eff_utilization=d_util,
        e1_constant_overlap=e1,
        dlr=value,
        is_mf=value < threshold,
        dim_learned=r_out,
        dim_target=r_tgt,
    )


def feature_decomposition_from_moments(
    fit: Moments,
    evaluation: Moments,
    *,
    n_outputs: int | None = None,
    rtol: float | None = None,
    mf_threshold: float = 0.1,
) -> FeatureDecomposition:
    """Feature decomposition from streamed statistics (see :func:`feature_decomposition`).

    Args:
      fit: :class:`~metrics.moments.Moments` of the features on S_fit with ``phi_factor``
        (``moments(..., feature_factor=True)``); outputs ignored.
      evaluation: :class:`~metrics.moments.Moments` of features and stacked ``[outputs, targets]``
        on S_eval, with ``phi_factor``.
      n_outputs: C, the number of leading stacked columns that are outputs; the remaining columns
        are targets. Default: all columns are outputs (no targets).
      rtol: relative rank tolerance for outputs and targets (and D_LR); default 2ε(√m + √C).
      mf_threshold: ε of the MF-regime test D_LR < ε.

    Returns:
      :class:`FeatureDecomposition`.
    """
    for stats, name in ((fit, "fit"), (evaluation, "evaluation")):
        if stats.phi_factor is None:
            raise ValueError(
                f"{name} moments need the feature factor: compute them with "
                "moments(..., feature_factor=True) or accumulate_moments(..., feature_factor=True)"
            )
    p = fit.phi_mean.shape[0]
    if evaluation.phi_mean.shape[0] != p:
        raise ValueError(
            f"fit and evaluation features must have the same width p, got {p} and "
            f"{evaluation.phi_mean.shape[0]}"
        )
    if is_concrete(fit.n) and float(fit.n) < p:
        raise ValueError(
            f"features_fit has n = {float(fit.n):g} samples < p = {p} features: Nyström needs "
            "n ≥ p to resolve all p eigenfunctions (use more fitting samples)"
        )
    if is_concrete(evaluation.n) and float(evaluation.n) < 2:
        raise ValueError("the evaluation sample needs n ≥ 2 samples")
    q = evaluation.out_mean.shape[0]
    c = q if n_outputs is None else int(n_outputs)
    if not 1 <= c <= q:
        raise ValueError(f"n_outputs must be in [1, {q}], got {c}")
    dtype = fit.phi_css.dtype
    evaluation = jax.tree.map(lambda x: x.astype(dtype), evaluation)
    try:
        value = dlr_from_moments(evaluation, n_outputs=c, rtol=rtol)
    except ValueError as err:
        raise ValueError(f"evaluation sample (features_eval, outputs_eval): {err}") from None
    res = _decompose(
        fit,
        evaluation,
        jnp.asarray(np.arange(q) < c),
        jnp.asarray(np.arange(q) >= c),
        jnp.asarray(-1.0 if rtol is None else rtol, dtype),
        jnp.asarray(mf_threshold, dtype),
        value,
    )
    if is_concrete(res.rho) and not float(res.rho[0]) > 0.0:
        raise ValueError("features_fit are all zero: no eigenfunctions to decompose")
    if c == q:
        res = res._replace(quality=None, cum_quality=None, d_eff_quality=None, dim_target=None)
    elif is_concrete(res.dim_target) and int(res.dim_target) == 0:
        raise ValueError("targets_eval are all zero: the target space H* is empty")
    return res


def feature_decomposition(
    features_fit,
    features_eval,
    outputs_eval,
    targets_eval=None,
    *,
    rtol: float | None = None,
    mf_threshold: float = 0.1,
) -> FeatureDecomposition:
    r"""Nyström eigen-decomposition of the features and their quality, utilization and intensity.

    .. math::
        \rho_k = s_k^2/n,\quad e_k(x) = \sqrt{n}\,u_k^\top\Phi(x)/s_k,\quad
        Q^*_k = \frac{\langle e_k|P_{H^*}e_k\rangle}{\lVert e_k\rVert^2\dim H^*},\quad
        \hat Q_k = \frac{\langle e_k|P_{\hat H}e_k\rangle}{\lVert e_k\rVert^2\dim \hat H}

    (thesis T Alg. 1, Eq. 1.29, 1.33–1.34, 2.3–2.6), ϕ = Φ(S_fit)ᵀ = U S Vᵀ; inner products on
    S_eval. H* = span of the target components, Ĥ = span of the learned ones (uncentred, so the
    constant function counts). Π̂(p) = 1 when Ĥ ⊂ span Φ; Π*(p) = ‖P_Φ f*‖²/‖f*‖² for orthogonal
    equal-norm target components (one-hot); both exactly when S_eval = S_fit. Float32-safe (QR
    route, module docstring): every mode above the rank tolerance is kept; every GEMM at full
    float32 precision; inputs rescaled by exact powers of two. Cost O((n + m)p² + p³ +
    m(C + C*)(p + C + C*)). Also returns D_eff (Eq. 1.16), the adjusted D_eff(ρ) (Eq. 2.6),
    ⟨e_1|1⟩, D_LR on S_eval and the MF-regime flag (D_LR < ``mf_threshold``).

    Args:
      features_fit: (n, p) features Φ on S_fit, n ≥ p (Nyström fit).
      features_eval: (m, p) features Φ on S_eval (may be the same array as ``features_fit``).
      outputs_eval: (m, C) network outputs f̂ on S_eval.
      targets_eval: (m, C*) targets f* on S_eval (one-hot × scale), or None to skip quality.
      rtol: relative rank tolerance for dim Ĥ, dim H* (and D_LR); default 2ε(√m + √C).
      mf_threshold: ε of the MF-regime test (T Definition 2: 0.1).

    Returns:
      :class:`FeatureDecomposition` (quality fields None without targets).

    Raises:
      ValueError: n < p, mismatched widths or sample counts, NaN/inf, complex input, all-zero or
        constant features, outputs of zero rank.
    """
    fit = _check_fit(features_fit)
    ev = as_matrix(features_eval, "features_eval", what="(m, p)")
    out = as_matrix(outputs_eval, "outputs_eval", what="(m, C)")
    same_n(ev, out, "features_eval", "outputs_eval")
    extra = []
    if targets_eval is not None:
        tgt = as_matrix(targets_eval, "targets_eval", what="(m, C*)")
        same_n(ev, tgt, "features_eval", "targets_eval")
        extra = [tgt]
    if out.shape[1] > out.shape[0]:
        raise ValueError(f"outputs_eval must have C ≤ m columns, got shape {out.shape}")
    # exact power-of-two rescaling (one shift for both feature samples, so ρ scales by 4^shift);
    # every field but ρ is scale invariant, and ρ is scaled back (inf only if it is unrepresentable)
    _, shift = jnp.frexp(jnp.maximum(jnp.max(jnp.abs(fit)), jnp.max(jnp.abs(ev))))
    fit_stats = moments(jnp.ldexp(fit, -shift), feature_factor=True)
    same = features_eval is features_fit  # one QR of Φ serves both samples (the costly step)
    ev_stats = moments(
        jnp.ldexp(ev, -shift), *(pow2_scale(x) for x in [out, *extra]), feature_factor=not same
    )
    if same:
        ev_stats = ev_stats._replace(phi_factor=fit_stats.phi_factor)
    res = feature_decomposition_from_moments(
        fit_stats,
        ev_stats,
        n_outputs=out.shape[1],
        rtol=rtol,
        mf_threshold=mf_threshold,
    )
    return res._replace(rho=jnp.ldexp(res.rho, 2 * shift))


def feature_decomposition_streaming(
    fit_batches: Iterable,
    eval_batches: Iterable,
    *,
    n_outputs: int | None = None,
    rtol: float | None = None,
    mf_threshold: float = 0.1,
) -> FeatureDecomposition:
    """:func:`feature_decomposition` for samples streamed as iterators of batches.

    Memory O(p² + p(C + C*) + (C + C*)²) whatever the sample sizes (:mod:`metrics.moments`).

    Args:
      fit_batches: iterable of (B, p) feature batches of S_fit.
      eval_batches: iterable of tuples ``(features (B, p), outputs (B, C))`` or
        ``(features, outputs, targets (B, C*))`` of S_eval.
      n_outputs: C; required when the eval batches carry targets.
      rtol, mf_threshold: as in :func:`feature_decomposition`.

    Returns:
      :class:`FeatureDecomposition`.
    """
    fit = accumulate_moments(
        (b[0] if isinstance(b, tuple | list) else b for b in fit_batches), feature_factor=True
    )
    return feature_decomposition_from_moments(
        fit,
        accumulate_moments(eval_batches, feature_factor=True),
        n_outputs=n_outputs,
        rtol=rtol,
        mf_threshold=mf_threshold,
    )
