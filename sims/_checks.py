"""Input validation shared by the solvers: clear ``ValueError``s instead of silent NaNs.

Checks on concrete values (finite, positive, whitened) run only when the value is concrete; under
``jit``/``vmap`` tracing they are skipped, so validate at the boundary of your program.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def is_concrete(x) -> bool:
    """True when ``x`` holds values (not a tracer), so value checks can run."""
    return not isinstance(x, jax.core.Tracer)


def as_float(x, name: str) -> jax.Array:
    """``x`` as a floating JAX array (integers promoted to the default float dtype)."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def check_finite(x, name: str) -> None:
    """Raise if a concrete ``x`` holds NaN or inf."""
    if is_concrete(x) and not bool(np.all(np.isfinite(np.asarray(x)))):
        raise ValueError(f"{name} contains NaN or inf")


def check_positive(x, name: str, *, strict: bool = True) -> None:
    """Raise if a concrete ``x`` has an entry ≤ 0 (or < 0 when ``strict=False``)."""
    if not is_concrete(x):
        return
    v = np.asarray(x)
    bad = np.any(v <= 0) if strict else np.any(v < 0)
    if bad:
        raise ValueError(f"{name} must be {'positive' if strict else 'non-negative'}, got {v}")


def check_shape(x, name: str, shape: tuple, what: str = "") -> None:
    """Raise unless ``x.shape == shape`` (``None`` entries match any size)."""
    s = tuple(jnp.shape(x))
    ok = len(s) == len(shape) and all(e is None or e == d for e, d in zip(shape, s, strict=True))
    if not ok:
        want = tuple("*" if e is None else e for e in shape)
        raise ValueError(f"{name} must have shape {want}{' ' + what if what else ''}, got {s}")
