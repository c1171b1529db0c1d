"""D_LR: 1 − CKA between the feature kernel and the projection onto the learned-function space.

Nam et al. thesis (T) Definition 1–2, Eq. 2.8–2.9; "Disentangling rich dynamics" (D) Eq. 3–4, 7.
The MP operator is T_MP = a₁|1⟩⟨1| + a₂P_Ĥ with Ĥ = span{f̂_1, …, f̂_C}; CKA centres both kernels,
which removes the a₁ term, so on n samples (H = I − 11ᵀ/n, Φ_c = HΦ, F_c = HF, Q an orthonormal basis
of col(F_c) of numerical rank r)

    CKA = ⟨Φ_cΦ_cᵀ, QQᵀ⟩_F / (‖Φ_cΦ_cᵀ‖_F ‖QQᵀ‖_F) = ‖QᵀΦ_c‖_F² / (‖Φ_cᵀΦ_c‖_F √r),

using ‖Φ_cΦ_cᵀ‖_F = ‖Φ_cᵀΦ_c‖_F and ‖QQᵀ‖_F = √r. There is one implementation, :func:`_dlr_stats`,
on the factored statistics of :mod:`metrics.moments` (F_c = U G by Householder QR, A = UᵀΦ_c): with
G = U' S Vᵀ the SVD of the small factor, Q = U U'_r and QᵀΦ_c = U'_rᵀ A. Arrays, moments and streams
all go through it. Cost O(np² + npC + nC²), memory O(np + p² + nC): no n×n matrix is formed.

Rank: the columns of F are first equilibrated by exact powers of two (F D, ‖F_j D_jj‖ ≈ 1; same
column space), then singular values s_k of F_c D with s_k ≤ rtol·‖F D‖₂ count as zero,
rtol = 2ε(√n + √C) by default (:mod:`metrics._numerics`), ‖F D‖₂ estimated as
√(s₁² + n‖Dν‖²) (the rounding of F is relative to F, not to its centred part). The rank used is
returned by :func:`dlr_with_rank`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from metrics._numerics import (
    CONSTANT_FACTOR,
    centre,
    mm,
    pow2_column_scale,
    pow2_scale,
    rank_rtol,
)
from metrics._validate import (
    as_float,
    as_matrix,
    check_finite,
    common_dtype,
    is_concrete,
    same_n,
)
from metrics.moments import Moments, accumulate_moments, moments


class DLR(NamedTuple):
    """D_LR with the numerical rank of the centred outputs it used.

    Attributes:
      value: () D_LR ∈ [0, 1]; NaN under ``jit`` when undefined (constant outputs or features).
      rank: () int, r = dim col(F_c), the numerical rank of the centred outputs.
    """

    value: jax.Array
    rank: jax.Array


class _Checks(NamedTuple):
    """Scalars the eager wrappers turn into errors (under ``jit`` the value is NaN instead)."""

    features_vary: jax.Array
    rtol: jax.Array


def _dlr_stats(m: Moments, cols: jax.Array, rtol: jax.Array) -> tuple[DLR, _Checks]:
    """The one D_LR formula (T Eq. 2.8–2.9), on factored statistics; outputs = columns of M where ``cols``.

    CKA = ‖U'_rᵀA‖_F² / (‖Φ_cᵀΦ_c‖_F √r) with G_F D = U' S V'ᵀ (D the column equilibration) and
    A = UᵀΦ_c from :class:`Moments`, so that U U'_r is an orthonormal basis of col(F_c).

    Args:
      m: :class:`Moments` with q stacked output columns.
      cols: (q,) bool mask of the output columns F among M.
      rtol: () relative rank tolerance; ≤ 0 selects the default 2ε(√n + √C).

    Returns:
      (DLR(value, rank), the scalars the eager wrappers check).
    """
    dtype = m.phi_css.dtype
    c = jnp.sum(cols)
    tol = jnp.where(rtol > 0, rtol, rank_rtol(dtype, m.n, c))
    g = jnp.where(cols[None, :], m.out_factor, 0.0)
    nu = jnp.where(cols, m.out_mean, 0.0)
    d = pow2_column_scale(jnp.sqrt(jnp.sum(g * g, axis=0) + m.n * nu * nu))  # 1/‖F_j‖
    u, s, _ = jnp.linalg.svd(g * d)  # G_F D = U' S V'ᵀ, same column space as G_F
    f_norm = jnp.sqrt(s[0] ** 2 + m.n * jnp.sum((nu * d) ** 2))  # ≥ ‖F D‖₂ ≥ f_norm/√2
    keep = s > tol * f_norm
    r = jnp.sum(keep)
    b = mm(u.T, m.out_proj)  # rows: u'_kᵀ A = (U u'_k)ᵀ Φ_c
    numerator = jnp.sum(jnp.where(keep[:, None], b * b, 0.0))
    gram_norm = jnp.linalg.norm(m.phi_css)
    spread2 = jnp.trace(m.phi_css)  # ‖Φ_c‖_F²
    total2 = spread2 + m.n * jnp.sum(m.phi_mean**2)  # ‖Φ‖_F²
    varies = spread2 > (CONSTANT_FACTOR * jnp.finfo(dtype).eps) ** 2 * total2
    cka = numerator / (gram_norm * jnp.sqrt(r.astype(dtype)))
    value = jnp.where((r > 0) & varies, jnp.clip(1.0 - cka, 0.0, 1.0), jnp.nan)
    return DLR(value, r), _Checks(varies, tol)


_dlr_stats_jit = jax.jit(_dlr_stats)


@jax.jit
def _dlr_arrays(phi: jax.Array, f: jax.Array, rtol: jax.Array) -> tuple[DLR, _Checks]:
    """D_LR of in-memory arrays: one batch of moments (features rescaled by a power of two only if
    their Gram would overflow or underflow), the formula."""
    m = moments(phi, pow2_scale(f), rescale=True)
    return _dlr_stats(m, jnp.ones(f.shape[1], bool), rtol)


def _raise_if_undefined(res: DLR, checks: _Checks, features: str, outputs: str) -> None:
    if not is_concrete(res.rank):
        return
    if int(res.rank) == 0:
        raise ValueError(
            f"{outputs} have zero numerical rank after centring: every singular value of the "
            f"centred {outputs} is ≤ rtol·‖{outputs}‖ (rtol = {float(checks.rtol):.2g}), i.e. "
            f"they do not vary over samples beyond their rounding; the learned-function space is "
            "empty and D_LR is undefined"
        )
    if not bool(checks.features_vary):
        raise ValueError(
            f"{features} are constant over samples at working precision (centred spread "
            f"≤ {CONSTANT_FACTOR:g}ε of their magnitude): the feature kernel vanishes after "
            "centring and D_LR is undefined"
        )


def _check_samples(shape: tuple[int, ...], what: str) -> None:
    """Refuse outputs of shape ``what`` (last two axes n, C) with n < 2 or C > n."""
    n, c = shape[-2:]
    if n < 2:
        raise ValueError(f"features and outputs need n ≥ 2 samples to centre, got n = {n}")
    if c > n:
        raise ValueError(f"outputs must have C ≤ n columns, got shape {what} = {shape}")


def _rtol_array(rtol: float | None, dtype) -> jax.Array:
    if rtol is None:
        return jnp.asarray(-1.0, dtype)
    if is_concrete(rtol) and not 0.0 < float(rtol) < 1.0:
        raise ValueError(f"rtol must lie in (0, 1), got {rtol}")
    return jnp.asarray(rtol, dtype)


def dlr_with_rank(features, outputs, *, rtol: float | None = None) -> DLR:
    r"""D_LR and the numerical rank r of the centred outputs it used; safe inside ``jax.jit``.

    .. math::
        D_{LR} = 1 - \frac{\lVert Q^\top \Phi_c \rVert_F^2}{\lVert \Phi_c^\top \Phi_c \rVert_F\,\sqrt{r}}

    (thesis T Definition 2, Eq. 2.8–2.9; D Eq. 4). Same arguments as :func:`dlr`. On
    concrete arrays the value checks of :func:`dlr` run; on traced arrays nothing is checked and an
    undefined D_LR (outputs of zero centred rank, constant features) is NaN, so a jitted training
    step never raises. Inputs are rescaled internally by exact powers of two (D_LR is scale
    invariant), so finite features or outputs of any magnitude give a finite answer.

    Args:
      features: (n, p) features Φ.
      outputs: (n, C) outputs F.
      rtol: relative rank tolerance (see :func:`dlr`).

    Returns:
      :class:`DLR` ``(value, rank)``: () D_LR in the inputs' common dtype, () int rank r.
    """
    phi = as_matrix(features, "features", what="(n, p)")
    f = as_matrix(outputs, "outputs", what="(n, C)")
    same_n(phi, f, "features", "outputs")
    _check_samples(f.shape, "(n, C)")
    dtype = common_dtype(phi, f)
    res, checks = _dlr_arrays(phi.astype(dtype), f.astype(dtype), _rtol_array(rtol, dtype))
    _raise_if_undefined(res, checks, "features", "outputs")
    return res


def batched_by_default(backend: str | None = None) -> bool:
    """Whether per-run metrics of R stacked runs run as one ``vmap`` (True) or a loop (False).

    Batched on GPUs and TPUs, where one run's D_LR is a chain of small kernels that uses a
    fraction of the device; looped (``lax.map``) on the CPU, where XLA:CPU's batched QR and SVD
    are no faster than the loop and a jitted ``vmap`` of two D_LRs over 16 runs of 360 rows can
    hang (jaxlib 0.10.2; ``benchmarks/xla_cpu_hangs.py dlr_pair``).

    Args:
      backend: a platform name; default jax's default backend, read at call time.
    """
    return (backend or jax.default_backend()) != "cpu"


@partial(jax.jit, static_argnames="batched")
def _dlr_many(phi: jax.Array, f: jax.Array, rtol: jax.Array, batched: bool) -> DLR:
    def one(pair):
        return _dlr_arrays(pair[0], pair[1], rtol)[0]

    return jax.vmap(one)((phi, f)) if batched else jax.lax.map(one, (phi, f))


def dlr_many(features, outputs, *, rtol: float | None = None, batched: bool | None = None) -> DLR:
    r"""D_LR of R runs at once: each run's :func:`dlr_with_rank`, as one program.

    .. math::
        D_{LR}^{(i)} = 1 - \frac{\lVert Q_i^\top \Phi_{i,c} \rVert_F^2}
        {\lVert \Phi_{i,c}^\top \Phi_{i,c} \rVert_F\,\sqrt{r_i}},\qquad i = 1, \dots, R

    (thesis T Definition 2, Eq. 2.8–2.9, per run). The runs' D_LRs are one ``jax.vmap`` on
    GPUs/TPUs and one ``lax.map`` on the CPU (:func:`batched_by_default`): use this rather than
    ``jax.vmap(dlr)`` for stacked runs, seeds or checkpoints. Safe inside ``jax.jit``. An
    undefined D_LR (outputs of zero centred rank, constant features) is NaN for that run and
    raises nothing, so the other runs' values are kept; its rank tells which (0: constant
    outputs).

    Args:
      features: (R, n, p) features Φ_i of the R runs.
      outputs: (R, n, C) outputs F_i on the same n inputs, C ≤ n.
      rtol: relative rank tolerance, as in :func:`dlr`.
      batched: force the ``vmap`` (True) or the loop (False); default per backend.

    Returns:
      :class:`DLR` of (R,) values in the inputs' common dtype and (R,) int ranks.

    Raises:
      ValueError: inputs that are not 3-D, different R or n, n < 2, C > n, p or C = 0, NaN/inf
        (value checks only outside ``jit``), complex input.
    """
    arrays = []
    for x, name, what in ((features, "features", "(R, n, p)"), (outputs, "outputs", "(R, n, C)")):
        x = as_float(x, name)
        if x.ndim != 3 or x.shape[2] == 0:
            raise ValueError(f"{name} must be a 3-D array of shape {what}, got shape {x.shape}")
        check_finite(x, name)
        arrays.append(x)
    phi, f = arrays
    if phi.shape[:2] != f.shape[:2]:
        raise ValueError(
            f"features and outputs must have the same runs R and rows n, got (R, n) = "
            f"{phi.shape[:2]} and {f.shape[:2]}"
        )
    _check_samples(f.shape, "(R, n, C)")
    dtype = common_dtype(phi, f)
    use_vmap = batched_by_default() if batched is None else bool(batched)
    return _dlr_many(phi.astype(dtype), f.astype(dtype), _rtol_array(rtol, dtype), use_vmap)


class FrozenFeatures(NamedTuple):
    """The feature half of D_LR's statistics, for features that stay fixed while outputs change.

    Built once by :func:`freeze_features`; :func:`dlr_with_rank_frozen` then costs O(npC + nC²)
    per call instead of O(np²) (e.g. the log points of last-layer-only training, where Φ is
    frozen and only the readout moves).

    Attributes:
      centred: (n, p) Φ_c = HΦ·2⁻ᵉ, the centred features times an exact power of two (2ᵉ ≈ max|Φ|,
        so that Φ_cᵀΦ_c stays in range; D_LR is scale invariant).
      mean: (p,) the column mean of Φ·2⁻ᵉ.
      css: (p, p) Φ_cᵀΦ_c.
    """

    centred: jax.Array
    mean: jax.Array
    css: jax.Array


@jax.jit
def _freeze(phi: jax.Array) -> FrozenFeatures:
    mu, phi_c = centre(pow2_scale(phi))
    return FrozenFeatures(phi_c, mu, mm(phi_c.T, phi_c))


def freeze_features(features) -> FrozenFeatures:
    """:class:`FrozenFeatures` of (n, p) features Φ (float32/float64; traceable)."""
    phi = as_matrix(features, "features", what="(n, p)")
    return _freeze(phi.astype(common_dtype(phi)))


@jax.jit
def _dlr_frozen(frozen: FrozenFeatures, f: jax.Array, rtol: jax.Array) -> tuple[DLR, _Checks]:
    nu, f_c = centre(pow2_scale(f))
    q, g = jnp.linalg.qr(f_c)  # F_c = Q G (n ≥ C), Householder, as metrics.moments
    a = mm(q.T, frozen.centred)  # QᵀΦ_c
    m = Moments(
        n=jnp.asarray(f.shape[0], f.dtype),
        phi_mean=frozen.mean,
        phi_css=frozen.css,
        out_mean=nu,
        cross=mm(a.T, g),
        out_factor=g,
        out_proj=a,
        phi_factor=None,
    )
    return _dlr_stats(m, jnp.ones(f.shape[1], bool), rtol)


def dlr_with_rank_frozen(frozen: FrozenFeatures, outputs, *, rtol: float | None = None) -> DLR:
    """:func:`dlr_with_rank` of the features behind ``frozen`` (:func:`freeze_features`) and ``outputs``.

    The same formula (T Eq. 2.8–2.9) on the same statistics, with Φ_cᵀΦ_c reused: the result
    agrees with ``dlr_with_rank(features, outputs)`` to rounding (the only difference is that Φ
    is always centred explicitly, never through the folded ΦᵀΦ − nμμᵀ). Safe inside ``jax.jit``
    (NaN when undefined); eager calls raise as :func:`dlr` does.

    Args:
      frozen: :class:`FrozenFeatures` of n samples.
      outputs: (n, C) outputs F, C ≤ n, on the same samples in the same order.
      rtol: relative rank tolerance (see :func:`dlr`).

    Returns:
      :class:`DLR` ``(value, rank)`` in the common dtype of the features and outputs.
    """
    f = as_matrix(outputs, "outputs", what="(n, C)")
    n = f.shape[0]
    if frozen.centred.shape[0] != n:
        raise ValueError(
            f"outputs have n = {n} rows but the frozen features {frozen.centred.shape[0]}"
        )
    _check_samples(f.shape, "(n, C)")
    dtype = common_dtype(frozen.centred, f)
    frozen = FrozenFeatures(*(x.astype(dtype) for x in frozen))
    res, checks = _dlr_frozen(frozen, f.astype(dtype), _rtol_array(rtol, dtype))
    _raise_if_undefined(res, checks, "features", "outputs")
    return res


def dlr(features, outputs, *, rtol: float | None = None) -> jax.Array:
    r"""D_LR = 1 − CKA(feature kernel, projection onto the learned-function space).

    .. math::
        D_{LR} = 1 - \frac{\lVert Q^\top \Phi_c \rVert_F^2}{\lVert \Phi_c^\top \Phi_c \rVert_F\,\sqrt{r}}

    (thesis T Definition 2, Eq. 2.8–2.9; D Eq. 4), Φ_c, F_c the sample-centred features and
    outputs, Q an orthonormal basis of col(F_c) of numerical rank r (Householder QR of F_c and the
    SVD of its small factor: as accurate as LAPACK's SVD on graded output spectra). Lies in [0, 1];
    0 = richest (features span the centred learned functions isotropically). Invariant to the
    scale of Φ, to orthogonal maps of Φ and to invertible linear maps of F. Cost O(np² + npC +
    nC²); never forms n×n; every GEMM at full float32 precision. Works under ``jax.jit``
    (undefined cases give NaN there); :func:`dlr_with_rank` also returns r.

    Args:
      features: (n, p) last-layer features Φ (input of the final linear layer), NumPy or JAX,
        float32 or float64 (float16/bfloat16 are upcast to float32; complex is refused).
      outputs: (n, C) network outputs F = f̂(x) on the same n inputs (logits, or softmax
        probabilities: the rank is numerical, so their centred rank C − 1 is detected).
      rtol: singular values s_k of the column-equilibrated F_c D with s_k ≤ ``rtol``·‖F D‖₂
        count as zero (module docstring); default 2ε(√n + √C) of the dtype (the rounding noise
        of an n×C matrix). Pass a larger value if F was computed in lower precision than its
        dtype.

    Returns:
      () D_LR in the common dtype of the inputs.

    Raises:
      ValueError: wrong shapes, mismatched n, n < 2, C > n, C or p = 0, NaN/inf, complex input,
        outputs of zero centred rank or constant features (value checks only outside ``jit``;
        under ``jit`` those give NaN).
    """
    return dlr_with_rank(features, outputs, rtol=rtol).value


def dlr_from_moments(
    stats: Moments, *, n_outputs: int | None = None, rtol: float | None = None
) -> jax.Array:
    """D_LR from :class:`~metrics.moments.Moments` (the same formula as :func:`dlr`).

    Args:
      stats: statistics of features Φ and stacked outputs M = [F, …] (see
        :func:`metrics.moments.accumulate_moments`).
      n_outputs: C, the number of leading columns of M that are the network outputs F (the rest,
        e.g. targets, are ignored); default all q columns.
      rtol: relative rank tolerance as in :func:`dlr`; default 2ε(√n + √C).

    Returns:
      () D_LR.
    """
    return _dlr_from_moments(stats, n_outputs, rtol).value


def _dlr_from_moments(stats: Moments, n_outputs: int | None, rtol: float | None) -> DLR:
    q = stats.out_mean.shape[0]
    c = q if n_outputs is None else int(n_outputs)
    if not 1 <= c <= q:
        raise ValueError(f"n_outputs must be in [1, {q}] (columns of the stacked outputs), got {c}")
    if is_concrete(stats.n) and float(stats.n) < 2:
        raise ValueError(f"need n ≥ 2 samples to centre, got n = {float(stats.n):g}")
    dtype = stats.phi_css.dtype
    cols = jnp.asarray(np.arange(q) < c)
    res, checks = _dlr_stats_jit(stats, cols, _rtol_array(rtol, dtype))
    _raise_if_undefined(res, checks, "features", "outputs")
    return res


def _pow2_batches(batches: Iterable) -> Iterator[tuple[jax.Array, jax.Array]]:
    """``(features, outputs)`` batches rescaled by the powers of two fixed by the first batch."""
    shifts = None
    for batch in batches:
        if not isinstance(batch, tuple | list) or len(batch) != 2:
            raise ValueError(
                "dlr_streaming batches must be tuples (features (B, p), outputs (B, C))"
            )
        phi, f = (as_float(x, name) for x, name in zip(batch, ("features", "outputs"), strict=True))
        if shifts is None:
            shifts = [int(np.frexp(float(jnp.max(jnp.abs(x), initial=0.0)))[1]) for x in (phi, f)]
        yield jnp.ldexp(phi, -shifts[0]), jnp.ldexp(f, -shifts[1])


def dlr_streaming(batches: Iterable, *, rtol: float | None = None) -> jax.Array:
    """D_LR of a sample given as an iterator of ``(features, outputs)`` batches.

    Accumulates Φ_cᵀΦ_c (p×p), the means, the triangular factor of F_c and the features in its
    basis (:func:`metrics.moments.accumulate_moments`): memory O(p² + pC + C²) whatever n. The
    same formula as :func:`dlr`, which it matches to round-off. Batches are rescaled by powers of
    two fixed on the first batch (exact), so large-magnitude data do not overflow the Gram.

    Args:
      batches: iterable of tuples ``(features (B, p), outputs (B, C))``.
      rtol: as in :func:`dlr`.

    Returns:
      () D_LR.
    """
    return dlr_from_moments(accumulate_moments(_pow2_batches(batches)), rtol=rtol)
