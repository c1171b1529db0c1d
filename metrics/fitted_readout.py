"""The network's own lazy baseline: D_LR of fixed features with a least-squares readout.

A network whose features never moved (the lazy limit) can still fit its readout. What it then
reads is D_LR of its features Φ with the outputs of the least-squares readout of the targets Y
(intercept included):

.. math::
    \\hat F = \\mathbf 1 \\bar y^\\top + \\Phi_c \\hat\\beta, \\qquad
    \\hat\\beta = \\arg\\min_\\beta \\lVert \\Phi_c \\beta - Y_c \\rVert_F^2, \\qquad
    D_{LR}^{\\text{fit}}(\\Phi, Y) = D_{LR}(\\Phi, \\hat F),

so :math:`\\hat F_c = P_\\Phi Y_c`, the projection of the centred targets onto col(Φ_c) (T
Definition 2 / D Eq 4 for D_LR). Evaluated on the features of a network **at initialisation** it is
the baseline a trained network's D_LR is read against: "rich" is a distance from where *this*
network started. The isotropic reference :func:`metrics.random_feature_dlr` is the same quantity
for Gaussian features; real untrained features (a ReLU MLP on MNIST) read far lower.

Computation: thin SVD of the exactly rescaled Φ_c (O(np²), never n×n), P_Φ Y_c = U_k (U_kᵀ Y_c)
over the k singular values above ``max(n, p)·ε·s₁`` (NumPy ``lstsq``'s default cut-off: directions
below it are round-off of Φ, not features), every GEMM at full float32 precision, then
:func:`metrics.dlr_with_rank`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from metrics._numerics import CONSTANT_FACTOR, centre, mm, pow2_scale
from metrics._validate import as_matrix, common_dtype, is_concrete, same_n
from metrics.dlr import DLR, dlr_with_rank


def fitted_readout(features, targets) -> jax.Array:
    """Outputs of the least-squares readout (with intercept) of ``targets`` on ``features``.

    Args:
      features: (n, p) features Φ, float32 or float64 (module docstring for the other dtypes).
      targets: (n, C) or (n,) targets Y.

    Returns:
      (n, C) fitted outputs F̂ = ȳ + P_Φ Y_c in the inputs' common dtype.
    """
    phi, y = _inputs(features, targets)
    return _fit(phi, y)


def fitted_readout_dlr(features, targets, *, rtol: float | None = None) -> DLR:
    """D_LR of ``features`` with the least-squares readout of ``targets`` (module docstring).

    Args:
      features: (n, p) features Φ, e.g. a network's penultimate layer at initialisation.
      targets: (n, C) or (n,) targets Y (one-hot labels, regression targets).
      rtol: the rank tolerance of :func:`metrics.dlr` for the fitted outputs.

    Returns:
      :class:`metrics.DLR` ``(value, rank)``: the D_LR and the rank r of the fitted centred outputs.

    Raises:
      ValueError: the checks of :func:`metrics.dlr` (shapes, NaN/inf, n < 2, constant features),
        or targets whose projection onto the features is zero (nothing to fit).
    """
    phi, y = _inputs(features, targets)
    if is_concrete(phi):
        _, phi_c = centre(pow2_scale(phi))
        scale = float(jnp.linalg.norm(pow2_scale(phi)))
        if (
            float(jnp.linalg.norm(phi_c))
            <= CONSTANT_FACTOR * float(jnp.finfo(phi.dtype).eps) * scale
        ):
            raise ValueError(
                "features are constant over the samples: a readout of them fits only the mean "
                "of the targets, and D_LR is undefined"
            )
    return dlr_with_rank(phi, _fit(phi, y), rtol=rtol)


def _inputs(features, targets) -> tuple[jax.Array, jax.Array]:
    y = jnp.asarray(targets)
    if y.ndim == 1:
        y = y[:, None]
    phi = as_matrix(features, "features", what="(n, p)")
    y = as_matrix(y, "targets", what="(n, C)")
    same_n(phi, y, "features", "targets")
    dtype = common_dtype(phi, y)
    return phi.astype(dtype), y.astype(dtype)


@jax.jit
def _fit(phi: jax.Array, y: jax.Array) -> jax.Array:
    _, phi_c = centre(pow2_scale(phi))
    y_mean, y_c = centre(y)
    u, s, _ = jnp.linalg.svd(phi_c, full_matrices=False)
    cut = max(phi.shape) * jnp.finfo(phi.dtype).eps * s[0]
    u = jnp.where(s > cut, u, 0.0)  # columns of round-off directions set to zero
    return y_mean + mm(u, mm(u.T, y_c))
