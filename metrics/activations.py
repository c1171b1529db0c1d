"""Activation-pattern and filter measures of Kunin et al. (K) App. D.3 (Fig. 6, 10, 11)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from metrics._numerics import HIGHEST
from metrics._validate import as_float, check_finite, is_concrete, warn_if_float64_dropped

#: The Laplacian kernel Δ as printed in K Eq. 129. Its entries sum to −1 (not 0), so a constant
#: unit-norm filter scores ≈ 1 rather than 0; :data:`ZERO_SUM_LAPLACIAN` (centre 3) is the discrete
#: 9-point Laplacian, for which smooth filters score ≈ 0.
KUNIN_LAPLACIAN = np.array([[-0.25, -0.5, -0.25], [-0.5, 2.0, -0.5], [-0.25, -0.5, -0.25]])
ZERO_SUM_LAPLACIAN = np.array([[-0.25, -0.5, -0.25], [-0.5, 3.0, -0.5], [-0.25, -0.5, -0.25]])


def activation_hamming_distance(activations_init, activations) -> jax.Array:
    """Normalised Hamming distance of binarised hidden activations (K App. D.3, Fig. 10).

    Each activation is binarised as 1 if > 0 (an active ReLU) and 0 otherwise; the distance is the
    number of flipped units over the total number of activations.

    Args:
      activations_init: pytree (e.g. list over layers) of arrays of hidden pre- or
        post-activations at initialisation, on a fixed input sample.
      activations: pytree of the same structure and shapes, now.

    Returns:
      () fraction in [0, 1] of units whose on/off state changed.
    """
    a = jax.tree.leaves(activations_init)
    b = jax.tree.leaves(activations)
    if not a or len(a) != len(b):
        raise ValueError(
            f"activations_init and activations must be non-empty pytrees with the same leaves, "
            f"got {len(a)} and {len(b)} leaves"
        )
    flips, total = 0, 0
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        x, y = as_float(x, f"activations_init[{i}]"), as_float(y, f"activations[{i}]")
        if x.shape != y.shape:
            raise ValueError(f"activation leaf {i}: shapes differ, {x.shape} vs {y.shape}")
        check_finite(x, f"activations_init[{i}]")
        check_finite(y, f"activations[{i}]")
        flips = flips + jnp.sum((x > 0) != (y > 0))
        total += x.size
    if total == 0:
        raise ValueError("activations_init and activations hold no activations (all leaves empty)")
    return flips / total


def filter_smoothness(kernel, *, laplacian=None) -> jax.Array:
    r"""Roughness of convolutional filters: squared norm of the normalised filter convolved with Δ.

    .. math:: \mathrm{smoothness}(w_{ij}) = \Big\lVert \frac{w_{ij}}{\lVert w_{ij}\rVert_2} * \Delta
              \Big\rVert_2^2

    (Kunin et al. 2024, Eq. 128–129), one value per (input, output) channel pair; ``valid``
    convolution (no padding, so borders add no artefacts). Smaller is smoother.

    Args:
      kernel: (kh, kw, c_in, c_out) Flax ``nnx.Conv`` kernel, kh, kw ≥ 3.
      laplacian: (3, 3) Δ; default :data:`KUNIN_LAPLACIAN` as printed in K Eq. 129.

    Returns:
      (c_in, c_out) smoothness of each filter w_ij (NaN for an all-zero filter under ``jit``,
      a ValueError outside it).
    """
    warn_if_float64_dropped(kernel, "kernel")
    w = jnp.asarray(kernel)
    if w.ndim != 4 or w.shape[0] < 3 or w.shape[1] < 3:
        raise ValueError(
            f"kernel must have shape (kh, kw, c_in, c_out) with kh, kw ≥ 3, got {w.shape}"
        )
    w = as_float(w, "kernel")
    check_finite(w, "kernel")
    lap = as_float(KUNIN_LAPLACIAN.astype(w.dtype) if laplacian is None else laplacian, "laplacian")
    lap = lap.astype(w.dtype)
    if lap.shape != (3, 3):
        raise ValueError(f"laplacian must have shape (3, 3), got {lap.shape}")
    filt = jnp.moveaxis(w, (0, 1), (2, 3))  # (c_in, c_out, kh, kw)
    if is_concrete(filt) and bool(np.any(np.all(np.asarray(filt) == 0, axis=(2, 3)))):
        raise ValueError("kernel has an all-zero filter: its normalised Laplacian is undefined")
    return _smoothness(filt, lap)


@jax.jit
def _smoothness(filt: jax.Array, lap: jax.Array) -> jax.Array:
    filt = filt / jnp.max(jnp.abs(filt), axis=(2, 3), keepdims=True)  # squares stay in range
    unit = filt / jnp.sqrt(jnp.sum(filt * filt, axis=(2, 3), keepdims=True))
    corr = lambda f: jax.scipy.signal.correlate2d(f, lap, mode="valid", precision=HIGHEST)
    out = jax.vmap(jax.vmap(corr))(unit)
    return jnp.sum(out * out, axis=(2, 3))
