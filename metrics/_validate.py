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


def as_matrix(x, name: str, *, what: str = "(n, p)") -> jax.Array:
    """``x`` as a 2-D floating JAX array; integers become the default float dtype."""
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape {what}, got shape {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    check_finite(x, name)
    return x


def check_finite(x, name: str) -> None:
    """Raise if a concrete ``x`` holds NaN or inf."""
    if is_concrete(x) and not bool(np.all(np.isfinite(np.asarray(x)))):
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


def default_rtol(dtype, width: int) -> float:
    """Relative singular-value cutoff 100·C·ε(dtype) for the numerical rank of an n×C matrix.

    The round-off floor of a rank-deficient centred output matrix (softmax rows summing to one,
    least-squares heads with a bias) is a few ε relative to its largest singular value and does not
    grow with n (measured: 1.4ε at n = 10³, 2.3ε at n = 5·10⁴ for float32 softmax outputs), so the
    cutoff scales with the width C only, unlike NumPy's ``max(n, C)·ε``.
    """
    return 100.0 * max(int(width), 1) * float(np.finfo(np.dtype(dtype)).eps)
