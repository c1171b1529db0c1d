"""Neural-collapse measures NC1–NC4 (Papyan et al. 2020; thesis T App. D, Eq. D.1–D.9).

Class means μ_i are the means over each class A_i (equal to T Eq. D.2 for balanced classes),
Σ_W = (1/n) Σ_i Σ_{x∈A_i} (Φ(x) − μ_i)(Φ(x) − μ_i)ᵀ (Eq. D.4), Σ_B = (1/C) Σ_i (μ_i − μ_G)(μ_i − μ_G)ᵀ
(Eq. D.5). Every measure is 0 at collapse. Two global means μ_G are available:

* ``"class_means"`` (default): μ_G = (1/C) Σ_i μ_i, thesis T Eq. D.3. The centred class means then
  sum to zero, so perfectly collapsed features onto a simplex ETF score NC2 = 0 whatever the class
  sizes; this is the definition behind the MP-operator propositions (T Prop 2.5.1–2.5.2).
* ``"samples"``: μ_G = (1/n) Σ_x Φ(x) = Σ_i (n_i/n) μ_i, Papyan, Han & Donoho (2020) and the
  NC toolkits built on it. Identical to the above for balanced classes; with unbalanced classes
  collapsed features score NC2 > 0 — use it to compare with numbers from that literature.
"""

from __future__ import annotations

from functools import partial
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from metrics._numerics import CONSTANT_FACTOR, centre, mm, pow2_scale
from metrics._validate import as_matrix, is_concrete, same_n


class NeuralCollapse(NamedTuple):
    """NC1–NC4; each → 0 under neural collapse.

    Attributes:
      nc1: () Tr(Σ_W Σ_B^†)/C, within-class variability (D §4; T Eq. D.6).
      nc2: () ‖M̄ᵀM̄/‖M̄ᵀM̄‖_F − (I − 11ᵀ/C)/√(C − 1)‖_F, distance of the centred class means
        M̄ = [μ_i − μ_G] from a simplex ETF (T Eq. D.7; Zhu et al. 2021, NC2).
      nc3: () (1/C) Σ_i ‖w_i/‖w_i‖ − (μ_i − μ_G)/‖μ_i − μ_G‖‖², self-duality (T Eq. D.8), or None
        without ``head_weight``.
      nc4: () fraction of samples where argmax_i f̂_i(x) ≠ argmin_i ‖Φ(x) − μ_i‖ (T Eq. D.9),
        or None without ``outputs``.
      sigma_b_rank: () numerical rank of Σ_B used in the pseudo-inverse (C − 1 for an ETF).
    """

    nc1: jax.Array
    nc2: jax.Array
    nc3: jax.Array | None
    nc4: jax.Array | None
    sigma_b_rank: jax.Array


def _head(head_weight, p: int, c: int, dtype) -> jax.Array:
    """(p, C) head kernel for NC3, checked; ones (unused) when ``head_weight`` is None."""
    if head_weight is None:
        return jnp.ones((p, c), dtype)
    head = as_matrix(head_weight, "head_weight", what="(p, C)")
    if head.shape != (p, c):
        raise ValueError(f"head_weight must have shape (p, C) = {(p, c)}, got {head.shape}")
    if is_concrete(head) and np.any(np.all(np.asarray(head) == 0, axis=0)):
        raise ValueError("head_weight has an all-zero column w_i: NC3 (w_i/‖w_i‖) is undefined")
    return head.astype(dtype)


def _logits(outputs, phi: jax.Array, c: int) -> jax.Array:
    """(n, C) outputs for NC4, checked; zeros (unused) when ``outputs`` is None."""
    if outputs is None:
        return jnp.zeros((phi.shape[0], c), phi.dtype)
    logits = as_matrix(outputs, "outputs", what="(n, C)")
    same_n(phi, logits, "features", "outputs")
    if logits.shape[1] != c:
        raise ValueError(f"outputs must have C = {c} columns, got shape {logits.shape}")
    return logits.astype(phi.dtype)


def _one_hot(labels, n: int, num_classes: int | None) -> jax.Array:
    """(n, C) one-hot labels; checks values only when ``labels`` are concrete."""
    if not is_concrete(labels):
        lab = jnp.asarray(labels)
        if lab.ndim == 1:
            if not jnp.issubdtype(lab.dtype, jnp.integer) or num_classes is None:
                raise ValueError(
                    "traced labels (n,) must be integers and need num_classes (a static int) "
                    "under jit"
                )
            return jax.nn.one_hot(lab, num_classes)
        if lab.ndim == 2 and lab.shape[0] == n:
            return lab
        raise ValueError(f"labels must be (n,) or (n, C) with n = {n}, got shape {lab.shape}")
    lab = np.asarray(labels)
    if lab.ndim == 1:
        if not np.issubdtype(lab.dtype, np.integer):
            raise ValueError(f"labels must be integer class indices (n,), got dtype {lab.dtype}")
        if lab.shape[0] != n:
            raise ValueError(f"labels must have shape (n,) = ({n},), got {lab.shape}")
        if n == 0:
            raise ValueError("labels are empty: need at least one sample per class")
        c = int(lab.max()) + 1 if num_classes is None else num_classes
        if lab.min() < 0 or lab.max() >= c:
            raise ValueError(f"labels must lie in [0, {c}), got range [{lab.min()}, {lab.max()}]")
        return jnp.asarray(np.eye(c)[lab])
    if lab.ndim == 2:
        if lab.shape[0] != n:
            raise ValueError(f"one-hot labels must have shape (n, C) with n = {n}, got {lab.shape}")
        ok = np.all((lab == 0) | (lab == 1)) and np.all(lab.sum(axis=1) == 1)
        if not ok:
            raise ValueError("labels (n, C) must be one-hot: entries 0/1 with one 1 per row")
        return jnp.asarray(lab)
    raise ValueError(f"labels must be (n,) class indices or (n, C) one-hot, got shape {lab.shape}")


@partial(jax.jit, static_argnames="samples_mean")
def _nc(phi, y, head, logits, rtol, samples_mean: bool):
    dtype = phi.dtype
    c = y.shape[1]
    phi = pow2_scale(phi)  # every NC measure is scale invariant: keep squares in range
    scale = jnp.sqrt(jnp.mean(jnp.sum(phi * phi, axis=1)))
    _, phi = centre(phi)  # every NC measure is translation invariant; centring keeps precision
    spread = jnp.sqrt(jnp.mean(jnp.sum(phi * phi, axis=1)))
    counts = jnp.sum(y, axis=0)
    means = mm(y.T, phi) / counts[:, None]  # (C, p) class means μ_i
    # μ_G: the sample mean is 0 after centring (Papyan et al.); else the mean of class means (T D.3)
    mu_g = jnp.zeros_like(means[0]) if samples_mean else jnp.mean(means, axis=0)
    mbar = (means - mu_g).T  # (p, C) M̄
    resid = phi - mm(y, means)  # Φ(x) − μ_{y(x)}
    # Σ_B = M̄M̄ᵀ/C = U S² Uᵀ/C  ⇒  Tr(Σ_W Σ_B^†)/C = Σ_k (u_kᵀΣ_W u_k)/s_k²
    u, s, _ = jnp.linalg.svd(mbar, full_matrices=False)
    keep = (s > rtol * s[0]) & (s[0] > rtol * spread)  # means distinct at working precision
    inv_s2 = jnp.where(keep, 1.0 / jnp.where(keep, s, 1.0) ** 2, 0.0)
    z = mm(resid, u)  # (n, C)
    nc1 = jnp.sum(jnp.mean(z * z, axis=0) * inv_s2)
    g = mm(mbar.T, mbar)
    etf = (jnp.eye(c, dtype=dtype) - 1.0 / c) / jnp.sqrt(jnp.asarray(c - 1, dtype))
    nc2 = jnp.linalg.norm(g / jnp.linalg.norm(g) - etf)
    w_hat = head / jnp.linalg.norm(head, axis=0)
    m_hat = mbar / jnp.linalg.norm(mbar, axis=0)
    nc3 = jnp.mean(jnp.sum((w_hat - m_hat) ** 2, axis=0))
    dist2 = jnp.sum(phi * phi, 1)[:, None] - 2 * mm(phi, means.T) + jnp.sum(means * means, 1)
    nc4 = jnp.mean((jnp.argmax(logits, axis=1) != jnp.argmin(dist2, axis=1)).astype(dtype))
    rank = jnp.sum(keep)
    varies = spread > CONSTANT_FACTOR * jnp.finfo(dtype).eps * scale
    ok = varies & (rank > 0)
    nc1, nc2, nc3 = (jnp.where(ok, v, jnp.nan) for v in (nc1, nc2, nc3))
    return nc1, nc2, nc3, nc4, rank, varies


def neural_collapse(
    features,
    labels,
    *,
    head_weight=None,
    outputs=None,
    num_classes: int | None = None,
    rtol: float | None = None,
    global_mean: Literal["class_means", "samples"] = "class_means",
) -> NeuralCollapse:
    r"""Neural-collapse measures NC1–NC4 of features Φ with class labels.

    .. math:: NC1 = \tfrac{1}{C}\operatorname{Tr}(\Sigma_W \Sigma_B^\dagger),\qquad
              \Sigma_B^\dagger \text{ with singular values of } \bar M \le \mathrm{rtol}\,s_1
              \text{ dropped}

    (thesis T App. D, Eq. D.1–D.9; Papyan, Han & Donoho 2020). Computed without p×p matrices in
    O(npC): Σ_B^† from the thin SVD of the p×C matrix M̄ of centred class means. Classes may be
    unbalanced (class means are per-class averages). Jittable: pass ``num_classes`` with traced
    integer labels; under ``jit`` undefined measures (constant features, identical class means)
    are NaN instead of errors. Every GEMM at full float32 precision.

    **Decision (global mean):** the default ``global_mean="class_means"`` is T Eq. D.3,
    μ_G = (1/C) Σ_i μ_i: centred class means then sum to zero and collapsed features score
    NC2 = 0 for any class sizes, as the thesis' MP-operator propositions assume.
    ``global_mean="samples"`` uses the sample mean μ_G = (1/n) Σ_x Φ(x) of Papyan et al. and the
    NC toolkits; the two agree for balanced classes.

    Args:
      features: (n, p) last-layer features Φ.
      labels: (n,) integer classes or (n, C) one-hot labels.
      head_weight: (p, C) final-layer kernel W with f̂ = ΦW + b (Flax ``Linear`` convention), for
        NC3; None skips NC3.
      outputs: (n, C) network outputs f̂ (logits), for NC4; None skips NC4.
      num_classes: C when integer labels do not show every class; default ``max(labels) + 1``.
      rtol: pseudo-inverse tolerance: singular values of M̄ below ``rtol·s₁`` count as zero,
        i.e. eigenvalues of Σ_B below ``rtol²·λ₁``; default ``max(p, C)·ε`` (NumPy's pinv rule).
      global_mean: ``"class_means"`` (T Eq. D.3, default) or ``"samples"`` (Papyan et al.).

    Returns:
      :class:`NeuralCollapse`.

    Raises:
      ValueError: fewer than 2 classes, an empty class, labels not one-hot, mismatched shapes,
        NaN/inf, constant features or identical class means, an all-zero column of ``head_weight``.
    """
    if global_mean not in ("class_means", "samples"):
        raise ValueError(f'global_mean must be "class_means" or "samples", got {global_mean!r}')
    phi = as_matrix(features, "features", what="(n, p)")
    n, p = phi.shape
    y = _one_hot(labels, n, num_classes).astype(phi.dtype)
    c = y.shape[1]
    if c < 2:
        raise ValueError(f"neural collapse needs at least 2 classes, got C = {c}")
    if is_concrete(y) and np.any(np.asarray(y).sum(axis=0) == 0):
        empty = np.flatnonzero(np.asarray(y).sum(axis=0) == 0).tolist()
        raise ValueError(f"classes {empty} have no samples; every class needs at least one")
    head = _head(head_weight, p, c, phi.dtype)
    logits = _logits(outputs, phi, c)
    tol = max(p, c) * float(np.finfo(phi.dtype).eps) if rtol is None else rtol
    nc1, nc2, nc3, nc4, rank, varies = _nc(
        phi, y, head, logits, jnp.asarray(tol, phi.dtype), samples_mean=global_mean == "samples"
    )
    if is_concrete(varies) and not bool(varies):
        raise ValueError(
            f"features are constant over samples at working precision (centred spread "
            f"≤ {CONSTANT_FACTOR:g}ε of their magnitude): NC1–NC4 are undefined"
        )
    if is_concrete(rank) and int(rank) == 0:
        raise ValueError(
            "features have identical class means at working precision (Σ_B = 0): "
            "NC1–NC3 are undefined"
        )
    return NeuralCollapse(
        nc1=nc1,
        nc2=nc2,
        nc3=nc3 if head_weight is not None else None,
        nc4=nc4 if outputs is not None else None,
        sigma_b_rank=rank,
    )
