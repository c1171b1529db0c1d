"""Input checks shared by the metrics: clear ``ValueError``s instead of silent NaNs.

Shape checks always run; value checks (finite, one-hot) run only on concrete arrays, so under
``jit`` they are skipped and the caller validates at the boundary of their program.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np


class Float64Warning(UserWarning):
    """A float64 input met a session with x64 off: the metric would answer in float32.

    The counterpart of ``sims.Float64Warning`` (same name, same case); the two packages import
    nothing from each other, so each defines its own.
    """


def warn_if_float64_dropped(x, name: str) -> None:
    """Warn when ``x`` is float64 but JAX's x64 mode is off, naming the fix.

    JAX canonicalises float64 to float32 unless x64 is enabled, so a float64 NumPy array would
    silently give a float32 answer (relative error ~1e-7 instead of ~1e-16).
    """
    if jax.config.jax_enable_x64:
        return
    dtype = getattr(x, "dtype", None)
    if dtype is not None and np.dtype(dtype) == np.float64:
        warnings.warn(
            f"{name} is float64 but JAX's x64 mode is off, so metrics would compute in float32; "
            "wrap the call in `with jax.enable_x64(True):` (or set "
            "jax.config.update('jax_enable_x64', True) at the entry point) for float64 answers",
            Float64Warning,
            stacklevel=4,
        )


def is_concrete(x) -> bool:
    """True when ``x`` holds values (not a tracer), so value checks can run."""
    return not isinstance(x, jax.core.Tracer)


def as_float(x, name: str) -> jax.Array:
    """``x`` as a floating JAX array: integers and booleans become the default float dtype,
    float16/bfloat16 are upcast to float32 (their 3-digit round-off would swamp every tolerance
    here), complex arrays are refused (the metrics are defined for real features); a float64
    ``x`` while x64 is off warns (:class:`Float64Warning`)."""
    warn_if_float64_dropped(x, name)
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
    warn_if_float64_dropped(x, name)
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
