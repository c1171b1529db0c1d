"""Input validation shared by the solvers: clear ``ValueError``s instead of silent NaNs.

Checks on concrete values (finite, positive, whitened) run only when the value is concrete; under
``jit``/``vmap`` tracing they are skipped, so validate at the boundary of your program.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np


class Float64Warning(UserWarning):
    """A float64 input met a session with x64 off: the answer would be float32 (see :mod:`sims`)."""


def warn_if_float64_dropped(x, name: str) -> None:
    """Warn (once per call site) when ``x`` is float64 but x64 is off, naming the fix.

    JAX canonicalises float64 to float32 unless x64 is enabled, so a float64 NumPy array would
    silently give a float32 answer (1e-7 instead of 1e-15 accuracy).
    """
    if jax.config.jax_enable_x64:
        return
    dtype = getattr(x, "dtype", None)
    if dtype is not None and np.dtype(dtype) == np.float64:
        warnings.warn(
            f"{name} is float64 but JAX's x64 mode is off, so sims would compute in float32; "
            "wrap the call in `with jax.enable_x64(True):` (or set "
            "jax.config.update('jax_enable_x64', True) at the entry point) for float64 answers",
            Float64Warning,
            stacklevel=3,
        )


def is_concrete(x) -> bool:
    """True when ``x`` holds values (not a tracer), so value checks can run."""
    return not isinstance(x, jax.core.Tracer)


def as_float(x, name: str) -> jax.Array:
    """``x`` as a floating JAX array (integers promoted to the default float dtype).

    Warns with :class:`Float64Warning` when a float64 ``x`` would silently become float32.
    """
    warn_if_float64_dropped(x, name)
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def promote(**named) -> tuple[jax.Array, ...]:
    """The named values as floating arrays of one common dtype (numpy promotion rules).

    Safe under strict dtype promotion. Python scalars are weakly typed: they take the dtype of the
    arrays they meet (float32 arrays with a Python-float rate stay float32). Each value goes
    through :func:`as_float`, so a float64 value with x64 off warns, named.
    """
    xs = [as_float(x, n) for n, x in named.items()]
    typed = [
        x.dtype for x, v in zip(xs, named.values(), strict=True) if not isinstance(v, int | float)
    ]
    dt = np.dtype(jnp.result_type(float)) if not typed else np.dtype(typed[0])
    for t in typed[1:]:
        dt = np.promote_types(dt, t)
    return tuple(x.astype(dt) for x in xs)


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


def check_alpha(alpha) -> None:
    """Raise unless a concrete power-law exponent α is > 0 (P_s(k) ∝ k^{−(α+1)}, T Eq 4.1)."""
    if is_concrete(alpha) and not bool(np.all(np.asarray(alpha) > 0)):
        raise ValueError(f"alpha (power-law exponent α) must be > 0, got {np.asarray(alpha)}")


def check_shape(x, name: str, shape: tuple, what: str = "") -> None:
    """Raise unless ``x.shape == shape`` (``None`` entries match any size)."""
    s = tuple(jnp.shape(x))
    ok = len(s) == len(shape) and all(e is None or e == d for e, d in zip(shape, s, strict=True))
    if not ok:
        want = tuple("*" if e is None else e for e in shape)
        raise ValueError(f"{name} must have shape {want}{' ' + what if what else ''}, got {s}")


def check_skill_inputs(S, r0, p) -> None:
    """Raise unless, where concrete, S > 0, R_k(0) ≥ 0 and p_k ≥ 0 (the multilinear skill model's
    domain, :func:`sims.skills.skill_strength`)."""
    check_positive(S, "S (target scale)")
    check_positive(r0, "r0 (initial skill strength R_k(0))", strict=False)
    check_positive(p, "p (skill weight d_k/D)", strict=False)
