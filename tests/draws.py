"""Random test inputs drawn on the host.

``jax.random.normal(key, shape)`` compiles one XLA program per shape and dtype (about 0.4 s each
on the 2-core CI machine; the suite draws inputs of well over a hundred shapes). Inputs that only
need to be generic — images, kernels, cotangents — come from NumPy's generator instead, which
compiles nothing. Parameters a model initialises itself still use ``jax.random``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def normal(seed: int, shape: tuple[int, ...], dtype=jnp.float32) -> jnp.ndarray:
    """Standard-normal array of ``shape`` and ``dtype``, reproducible from ``seed``."""
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(dtype))
