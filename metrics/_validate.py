"""Input checks shared by the metrics: clear ``ValueError``s instead of silent NaNs.

Shape checks always run; value checks (finite, one-hot) run only on concrete arrays, so under
``jit`` they are skipped and the caller validates at the boundary of their program.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def is_concrete(x) -> bool:
    """True when ``x`` holds values (not a tracer), so value checks can run."""
    return not isinstance(x, jax.core.Tracer)


def as_float(x, name: str) -> jax.Array:
    """``x`` as a floating JAX array: integers and booleans become the default float dtype,
    float16/bfloat16 are upcast to float32 (their 3-digit round-off would swamp every tolerance
    here), complex arrays are refused (the metrics are defined for real features)."""
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise ValueError(
            f"{name} must be real, got complex dtype {x.dtype} (pass the real part or the "
            "modulus explicitly)"
        )
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return x.astype(jnp.result_type(float))
    if jnp.finfo(x.dtype).bits < 32:
        return x.astype(jnp.float32)
    return x


def as_matrix(x, name: str, *, what: str = "(n, p)") -> jax.Array:
    """``x`` as a 2-D real floating JAX array with at least one column (see :func:`as_float`)."""
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape {what}, got shape {x.shape}")
    if x.shape[1] == 0:
        raise ValueError(f"{name} must have at least one column, shape {what}, got {x.shape}")
    x = as_float(x, name)
    check_finite(x, name)
    return x


def check_finite(x, name: str) -> None:
    """Raise if a concrete ``x`` holds NaN or inf."""
    if is_concrete(x) and not _all_finite(x):
        raise ValueError(f"{name} contains NaN or inf")


def common_dtype(*arrays) -> np.dtype:
    """The floating dtype all ``arrays`` are cast to (NumPy promotion, so float32+float64 → float64)."""
    return np.result_type(*[np.dtype(a.dtype) for a in arrays])


def same_n(a, b, name_a: str, name_b: str) -> None:
    """Raise unless ``a`` and ``b`` have the same number of rows (samples)."""
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"{name_a} and {name_b} must have the same number of rows n, "
            f"got {a.shape[0]} and {b.shape[0]}"
        )


def _all_finite(x) -> bool:
    """Whether every entry of a concrete ``x`` is finite. On the host (NumPy, or a JAX array on the
    CPU: a zero-copy view) NumPy decides; on an accelerator the reduction runs on the device and one
    bool comes back, never the array (16 GB at n = 10⁶, p = 4096; docs/gpu.md)."""
    if isinstance(x, np.ndarray) or all(d.platform == "cpu" for d in x.devices()):
        return bool(np.all(np.isfinite(np.asarray(x))))
    return bool(jnp.all(jnp.isfinite(x)))
