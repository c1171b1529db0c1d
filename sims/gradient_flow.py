"""Reference integrator: the raw-parameter gradient flow of any loss, integrated numerically.

Every closed form in :mod:`sims` is checked against this integrator (STYLE: "the testing triangle").

.. math::  \\frac{d\\theta}{dt} = -\\eta \\odot \\nabla_\\theta L(\\theta)

integrated with diffrax (8th-order Dormand–Prince, PID step-size control) at tight tolerances.
Run it under float64 (``jax.enable_x64(True)``) for reference-quality answers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

PyTree = Any

__all__ = ["gradient_flow", "vector_field_flow"]


def vector_field_flow(
    field: Callable[[PyTree, Any], PyTree],
    params0: PyTree,
    t: jax.Array,
    args: Any = None,
    *,
    rtol: float = 1e-12,
    atol: float = 1e-14,
    max_steps: int = 2_000_000,
    solver: diffrax.AbstractSolver | None = None,
) -> PyTree:
    """Integrate dθ/dt = field(θ, args) from t = 0 and return θ at the times ``t``.

    Args:
      field: ``field(params, args) -> d params/dt`` (autonomous vector field, same pytree as params).
      params0: initial parameters θ(0), any pytree of floating arrays.
      t: 1-D array of non-decreasing save times, ``t[0] >= 0``.
      args: passed through to ``field``.
      rtol, atol: step-size controller tolerances.
      max_steps: cap on accepted + rejected steps.
      solver: a diffrax solver (default ``Dopri8``; use ``Kvaerno5`` for stiff flows).

    Returns:
      θ(t): pytree like ``params0`` with a leading axis of length ``len(t)``.
    """
    t = jnp.asarray(t)
    if t.ndim != 1 or t.shape[0] == 0:
        raise ValueError(f"t must be a non-empty 1-D array of times, got shape {t.shape}")
    _check_times(t)
    term = _ode_term(field)
    sol = diffrax.diffeqsolve(
        term,
        solver if solver is not None else diffrax.Dopri8(),
        t0=jnp.zeros((), t.dtype),
        t1=t[-1],
        dt0=None,
        y0=params0,
        args=args,
        saveat=diffrax.SaveAt(ts=t),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
    )
    return sol.ys


def gradient_flow(
    loss: Callable[[PyTree, Any], jax.Array],
    params0: PyTree,
    t: jax.Array,
    args: Any = None,
    *,
    lr: PyTree | float = 1.0,
    rtol: float = 1e-12,
    atol: float = 1e-14,
    max_steps: int = 2_000_000,
    solver: diffrax.AbstractSolver | None = None,
) -> PyTree:
    """Integrate the gradient flow dθ/dt = −η ∇_θ L(θ) and return θ at the times ``t``.

    Args:
      loss: ``loss(params, args) -> scalar`` (e.g. ½E[(f(x) − y)²]); differentiated with ``jax.grad``.
      params0: initial parameters θ(0) (pytree).
      t: 1-D array of non-decreasing save times, ``t[0] >= 0``.
      args: extra data passed to ``loss`` (targets, covariances, ...).
      lr: learning rate η — a scalar or a pytree matching ``params0`` (per-layer rates, e.g. η_a, η_w).
      rtol, atol, max_steps, solver: see :func:`vector_field_flow`.

    Returns:
      θ(t): pytree like ``params0`` with a leading time axis.

    Example:
      >>> loss = lambda p, S: 0.5 * (p["a"] * p["b"] - S) ** 2
      >>> ys = gradient_flow(loss, {"a": 0.1, "b": 0.1}, jnp.linspace(0, 10, 5), 2.0)
    """
    _check_loss(loss, params0, args)
    lr = jax.tree.map(jnp.asarray, lr)  # traced, like the data: a new rate reuses the program
    return vector_field_flow(
        _descent_field(loss), params0, t, (args, lr), rtol=rtol, atol=atol, max_steps=max_steps,
        solver=solver,
    )  # fmt: skip


def _check_times(t: jax.Array) -> None:
    """Refuse concrete save times that are not finite, start before 0 or are not sorted (diffrax
    would fail inside its compiled solve with an error that names none of these)."""
    if isinstance(t, jax.core.Tracer):
        return
    tn = np.asarray(t)
    if not np.all(np.isfinite(tn)):
        raise ValueError("t must hold finite times, got NaN or inf")
    if tn[0] < 0:
        raise ValueError(f"t must start at t[0] >= 0 (the flow starts at t = 0), got {tn[0]}")
    down = np.flatnonzero(np.diff(tn) < 0)
    if down.size:
        i = int(down[0])
        raise ValueError(
            f"t must be non-decreasing, but t[{i + 1}] = {tn[i + 1]} < t[{i}] = {tn[i]}; pass "
            "np.sort(t) and reorder the answer if needed"
        )


def _check_loss(loss: Callable, params0: PyTree, args: Any) -> None:
    """``loss(params0, args)`` must trace to a scalar; otherwise one sentence saying why."""
    hint = ""
    if isinstance(args, tuple) and len(args) == 1:
        hint = (
            "; args is passed to loss unchanged, so the 1-tuple (x,) is read as a tuple (the sims "
            "losses read a tuple task as the data (X, y)): pass x itself"
        )
    try:
        out = jax.eval_shape(loss, params0, args)
    except (TypeError, ValueError, IndexError) as e:
        raise ValueError(f"loss(params0, args) fails: {type(e).__name__}: {e}{hint}") from e
    if not hasattr(out, "shape") or out.shape != ():
        shape = getattr(out, "shape", type(out).__name__)
        raise ValueError(f"loss must return a scalar, got {shape}{hint}")


# diffrax compiles `diffeqsolve` once per vector-field *function* (and shapes): the same loss must
# give the same function object, or every call compiles the whole integrator again (seconds each).
def _cached(make: Callable) -> Callable:
    """``make(fn)`` memoised on ``fn``'s identity (uncached for the rare unhashable callable)."""
    cached = functools.lru_cache(maxsize=256)(make)

    def get(fn):
        try:
            return cached(fn)
        except TypeError:  # unhashable callable object
            return make(fn)

    return get


@_cached
def _ode_term(field: Callable) -> diffrax.ODETerm:
    return diffrax.ODETerm(lambda s, y, a: field(y, a))


@_cached
def _descent_field(loss: Callable) -> Callable:
    """−η ⊙ ∇L as a field of (θ, (args, η)); η a scalar or a pytree like θ."""
    grad = jax.grad(loss)

    def field(params, args_lr):
        args, lr = args_lr
        g = grad(params, args)
        if jax.tree_util.treedef_is_leaf(jax.tree.structure(lr)):
            return jax.tree.map(lambda gi: -lr * gi, g)
        return jax.tree.map(lambda gi, ei: -ei * gi, g, lr)

    return field
