"""Feature decomposition: intensity, quality, utilization and effective dimensions of Φ.

Thesis T §1.5.3–1.5.4 (Alg. 1, Eq. 1.29–1.34) and §2.3 (Eq. 2.3–2.7); seed 000 Eq. 5–6, 9.
Nyström on a fitting sample S_fit of n ≥ p points: ϕ = Φ(S_fit)ᵀ = U S Vᵀ (p×n), with the empirical
measure (**Decision**, SPEC 2.2) ρ_k = s_k²/n and e_k(x) = √n u_kᵀΦ(x)/s_k, so ⟨e_k|e_l⟩ = δ_kl on
S_fit. Inner products with target / learned functions are taken on a separate evaluation sample
S_eval (Eq. 1.34), normalising by the evaluation norm of e_k.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from metrics._validate import as_matrix, check_finite, default_rtol, is_concrete, same_n
from metrics.dlr import _check_result, _dlr_moments
from metrics.moments import Moments, _rayleigh_ritz, accumulate_moments, moments


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
      d_eff_rho_adjusted: () 1 + D_eff(ρ_2, …, ρ_p) (T Eq. 2.6; seed 000 Eq. 9).
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
    v = jnp.maximum(v, 0.0)  # eigenvalues may carry −ε round-off
    w = v / jnp.sum(v, axis=-1, keepdims=True)
    return jnp.exp(-jnp.sum(jax.scipy.special.xlogy(w, w), axis=-1))


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
      ValueError: NaN/inf, or values with no positive entry (D_eff undefined), on concrete input.
    """
    v = jnp.asarray(values)
    if not jnp.issubdtype(v.dtype, jnp.floating):
        v = v.astype(jnp.result_type(float))
    if v.ndim < 1 or v.shape[-1] < 1:
        raise ValueError(f"values must have shape (..., k) with k ≥ 1, got {v.shape}")
    check_finite(v, "values")
    if is_concrete(v) and np.any(np.max(np.asarray(v), axis=-1) <= 0):
        raise ValueError("values must have a positive entry: D_eff of all-zero values is undefined")
    return _effective_dimension(v)


def _projection_norms(m: Moments, cols: jax.Array, w: jax.Array, rtol: jax.Array):
    """(Σ_x (P_X e_k)(x)² for each k, rank of X) on S_eval, X = the columns of M where cols.

    X = 1νᵀ + M_c = [1/√n, U] [√n νᵀ; G] (uncentred, U ⟂ 1 the orthonormal factor of M_c), so the
    SVD of the small (q+1)×q matrix on the right, S Vᵀ, gives the orthonormal basis X V S⁻¹.
    """
    g = jnp.concatenate([jnp.sqrt(m.n) * m.out_mean[None, :], m.out_factor], axis=0)
    _, s, v = _rayleigh_ritz(jnp.where(cols, g, 0.0))
    keep = s > rtol * s[0]
    inv_s = jnp.where(keep, 1.0 / jnp.where(keep, s, 1.0), 0.0)
    x_phi = m.cross.T + jnp.outer(m.out_mean, m.phi_mean) * m.n  # Mᵀ Φ, uncentred (q, p)
    x_phi = jnp.where(cols[:, None], x_phi, 0.0)
    coef = (inv_s[:, None] * v.T) @ x_phi @ w  # (Q_X)ᵀ E, Q_X orthonormal basis of col(X)
    return jnp.sum(coef * coef, axis=0), jnp.sum(keep)


class Nystrom(NamedTuple):
    """Empirical eigenvalues and eigenfunctions of the feature operator (T Alg. 1).

    Attributes:
      rho: (p,) ρ_k = s_k²/n, decreasing.
      weights: (p, p) W with e_k(x) = Σ_i Φ_i(x) W_ik = √n u_kᵀΦ(x)/s_k; columns of numerically
        null modes (ρ_k ≤ 10pε ρ_1) are zero.
    """

    rho: jax.Array
    weights: jax.Array


@jax.jit
def _nystrom(fit: Moments) -> Nystrom:
    dtype = fit.phi_css.dtype
    p = fit.phi_css.shape[0]
    gram = fit.phi_css + fit.n * jnp.outer(fit.phi_mean, fit.phi_mean)  # ϕϕᵀ = U S² Uᵀ
    lam, u = jnp.linalg.eigh(gram)
    lam, u = jnp.maximum(lam[::-1], 0.0), u[:, ::-1]
    live = lam > 10.0 * p * jnp.finfo(dtype).eps * lam[0]  # numerically null modes get e_k = 0
    w = jnp.where(live, u * jnp.sqrt(fit.n / jnp.where(live, lam, 1.0)), 0.0)
    return Nystrom(rho=lam / fit.n, weights=w)


def nystrom(features_fit) -> Nystrom:
    r"""Nyström eigen-decomposition of the feature operator on a fitting sample.

    .. math:: \phi = \Phi(S_{fit})^\top = U S V^\top,\quad \rho_k = s_k^2/n,\quad
              e_k(x) = \sqrt{n}\,u_k^\top \Phi(x)/s_k

    (thesis T Alg. 1, Eq. 1.33, with the empirical-measure normalisation of SPEC 2.2, so
    ⟨e_k|e_l⟩ = δ_kl on S_fit). Computed from the p×p Gram ϕϕᵀ: O(np² + p³).

    Args:
      features_fit: (n, p) features Φ on S_fit, n ≥ p.

    Returns:
      :class:`Nystrom`; evaluate the eigenfunctions on any sample as ``features @ weights``.
    """
    fit = as_matrix(features_fit, "features_fit", what="(n, p)")
    if fit.shape[0] < fit.shape[1]:
        raise ValueError(
            f"features_fit has n = {fit.shape[0]} samples < p = {fit.shape[1]} features: Nyström "
            "needs n ≥ p to resolve all p eigenfunctions (use more fitting samples)"
        )
    return _nystrom(moments(fit))


@jax.jit
def _decompose(fit: Moments, ev: Moments, out_cols, tgt_cols, rtol_out, rtol_tgt, threshold):
    dtype = fit.phi_css.dtype
    rho, w = _nystrom(fit)

    gram_ev = ev.phi_css + ev.n * jnp.outer(ev.phi_mean, ev.phi_mean)
    norm2 = jnp.sum((gram_ev @ w) * w, axis=0)  # Σ_{x∈S_eval} e_k(x)²
    safe = jnp.where(norm2 > 0, norm2, 1.0)

    def metric(cols, tol):
        proj, r = _projection_norms(ev, cols, w, tol)
        qk = jnp.where(norm2 > 0, proj / safe, 0.0) / r.astype(dtype)
        return qk, jnp.cumsum(qk), _effective_dimension(qk), r

    util, cum_util, d_util, r_out = metric(out_cols, rtol_out)
    qual, cum_qual, d_qual, r_tgt = metric(tgt_cols, rtol_tgt)
    value, r_c, gram_norm = _dlr_moments(ev, rtol_out, out_cols)
    e1 = jnp.abs(ev.phi_mean @ w[:, 0]) / jnp.sqrt(safe[0] / ev.n)
    return (
        FeatureDecomposition(
            rho=rho,
            relative_intensity=rho / rho[0],
            quality=qual,
            utilization=util,
            cum_quality=cum_qual,
            cum_utilization=cum_util,
            d_eff_rho=_effective_dimension(rho),
            d_eff_rho_adjusted=1.0 + _effective_dimension(rho[1:]),
            d_eff_quality=d_qual,
            d_eff_utilization=d_util,
            e1_constant_overlap=e1,
            dlr=value,
            is_mf=value < threshold,
            dim_learned=r_out,
            dim_target=r_tgt,
        ),
        r_c,
        gram_norm,
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
      fit: :class:`~metrics.moments.Moments` of the features on S_fit (outputs ignored).
      evaluation: :class:`~metrics.moments.Moments` of features and stacked ``[outputs, targets]``
        on S_eval.
      n_outputs: C, the number of leading stacked columns that are outputs; the remaining columns
        are targets. Default: all columns are outputs (no targets).
      rtol: relative singular-value cutoff for the ranks of outputs and targets; default 100·C·ε.
      mf_threshold: ε of the MF-regime test D_LR < ε.

    Returns:
      :class:`FeatureDecomposition`.
    """
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
    out_cols = jnp.asarray(np.arange(q) < c)
    tgt_cols = jnp.asarray(np.arange(q) >= c)
    tol_out = default_rtol(dtype, c) if rtol is None else rtol
    tol_tgt = default_rtol(dtype, max(q - c, 1)) if rtol is None else rtol
    res, r_c, gram_norm = _decompose(
        fit,
        evaluation,
        out_cols,
        tgt_cols,
        jnp.asarray(tol_out, dtype),
        jnp.asarray(tol_tgt, dtype),
        jnp.asarray(mf_threshold, dtype),
    )
    _check_result(res.dlr, r_c, gram_norm, "features_eval", "outputs_eval")
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
    equal-norm target components (one-hot); both exactly when S_eval = S_fit. Cost O(np² + p³ +
    n(C + C*)²). Also returns D_eff (Eq. 1.16), the adjusted D_eff(ρ) (Eq. 2.6), ⟨e_1|1⟩, D_LR on
    S_eval and the MF-regime flag (D_LR < ``mf_threshold``).

    Args:
      features_fit: (n, p) features Φ on S_fit, n ≥ p (Nyström fit).
      features_eval: (m, p) features Φ on S_eval (may be the same array as ``features_fit``).
      outputs_eval: (m, C) network outputs f̂ on S_eval.
      targets_eval: (m, C*) targets f* on S_eval (one-hot × scale), or None to skip quality.
      rtol: relative singular-value cutoff for the ranks dim Ĥ, dim H* (and D_LR); default
        100·C·ε of the dtype.
      mf_threshold: ε of the MF-regime test (T Definition 2: 0.1).

    Returns:
      :class:`FeatureDecomposition` (quality fields None without targets).

    Raises:
      ValueError: n < p, mismatched widths or sample counts, NaN/inf, all-zero or constant features,
        outputs of zero rank.
    """
    fit = as_matrix(features_fit, "features_fit", what="(n, p)")
    ev = as_matrix(features_eval, "features_eval", what="(m, p)")
    out = as_matrix(outputs_eval, "outputs_eval", what="(m, C)")
    same_n(ev, out, "features_eval", "outputs_eval")
    if fit.shape[0] < fit.shape[1]:
        raise ValueError(
            f"features_fit has n = {fit.shape[0]} samples < p = {fit.shape[1]} features: Nyström "
            "needs n ≥ p to resolve all p eigenfunctions (use more fitting samples)"
        )
    extra = []
    if targets_eval is not None:
        tgt = as_matrix(targets_eval, "targets_eval", what="(m, C*)")
        same_n(ev, tgt, "features_eval", "targets_eval")
        extra = [tgt]
    if out.shape[1] > out.shape[0]:
        raise ValueError(f"outputs_eval must have C ≤ m columns, got shape {out.shape}")
    return feature_decomposition_from_moments(
        moments(fit),
        moments(ev, out, *extra),
        n_outputs=out.shape[1],
        rtol=rtol,
        mf_threshold=mf_threshold,
    )


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
    fit = accumulate_moments(b[0] if isinstance(b, tuple | list) else b for b in fit_batches)
    return feature_decomposition_from_moments(
        fit,
        accumulate_moments(eval_batches),
        n_outputs=n_outputs,
        rtol=rtol,
        mf_threshold=mf_threshold,
    )
