"""Discrete gradient descent on the raw parameters of any model, on the gradient-flow time axis.

Every model module exposes ``loss(params, task)``, the raw-parameter loss its closed form solves
(a ½-MSE: a population loss ½E[(f − y)²] on whitened data, or the summed ½Σ_j(f(x_j) − y_j)² of a
finite batch — each module's ``loss`` docstring says which). Gradient descent with learning rate η
on that same loss,

.. math::  \\theta_{k+1} = \\theta_k - \\eta\\,\\nabla_\\theta L(\\theta_k), \\qquad t_k = \\eta k,

is the forward-Euler discretisation of the flow dθ/dt = −∇L, so step k sits at time t = η·k on the
axis of ``solve(..., t)`` and tends to it as η → 0 (error O(η) at fixed t). Per-parameter rates
(η_a, η_w) are the ratios of ``eta`` to the base rate: ``eta={"a": η_a, "w": η_w}`` descends with
steps η·η_a, η·η_w — the discretisation of ``solve(..., eta_a=η_a, eta_w=η_w)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sims import _checks

PyTree = Any

__all__ = ["Simulation", "simulate"]


class Simulation(NamedTuple):
    """Gradient-descent iterates saved every ``every`` steps (``K`` = number of saves)."""

    t: jax.Array  # (K,)            t = η·step (0, η·every, 2η·every, ...)
    params: PyTree  # leaves (K, ...) θ at those steps
    loss: jax.Array  # (K,)         L(θ) at those steps


def simulate(
    loss: Callable[[PyTree, Any], jax.Array],
    params0: PyTree,
    task: Any,
    *,
    lr: jax.Array | float,
    n_steps: int,
    every: int = 1,
    eta: PyTree | float = 1.0,
) -> Simulation:
    """Full-batch gradient descent θ ← θ − lr·η ⊙ ∇L(θ, task), returned on the time axis t = lr·step.

    .. math::  \\theta_{k+1} = \\theta_k - \\mathrm{lr}\\,\\eta \\odot \\nabla_\\theta L(\\theta_k),
               \\quad t_k = \\mathrm{lr}\\cdot k

    (forward Euler for the flow that every ``solve`` integrates exactly; module docstring). One
    ``lax.scan``; ``lr``, ``eta``, ``params0`` and ``task`` are traced (vmap over seeds or rates),
    ``n_steps`` and ``every`` are static.

    Args:
      loss: ``loss(params, task) -> ()``, e.g. ``sims.diagonal.loss``.
      params0: θ(0), a pytree of floating arrays (the same pytree ``loss`` takes).
      task: the task argument of ``loss`` (e.g. ``(sigma2, S)`` or ``beta_star``).
      lr: () step size, > 0; it is also the time per step.
      n_steps: number of steps (static, ≥ 0).
      every: save every ``every`` steps (static, ≥ 1; the first save is step 0).
      eta: relative per-parameter rates — a scalar or a pytree like ``params0`` (e.g. η_a, η_w).

    Returns:
      :class:`Simulation` with ``n_steps // every + 1`` saves: t, params, loss.

    Raises:
      ValueError: lr ≤ 0 or non-finite, a negative rate in ``eta``, n_steps < 0, every < 1.
    """
    if not isinstance(n_steps, int | np.integer) or n_steps < 0:
        raise ValueError(f"n_steps must be a non-negative int, got {n_steps!r}")
    if not isinstance(every, int | np.integer) or every < 1:
        raise ValueError(f"every must be a positive int, got {every!r}")
    leaves = jax.tree.leaves(params0)
    if not leaves:
        raise ValueError("params0 must contain at least one array")
    params0 = jax.tree.map(lambda x: _checks.as_float(x, "params0"), params0)
    dtype = jnp.result_type(*jax.tree.leaves(params0))
    lr = _checks.as_float(lr, "lr")
    if lr.ndim != 0:
        raise ValueError(f"lr must be a scalar, got shape {lr.shape}")
    _checks.check_finite(lr, "lr")
    _checks.check_positive(lr, "lr")
    for e in jax.tree.leaves(eta):
        e = _checks.as_float(e, "eta")
        _checks.check_finite(e, "eta")
        _checks.check_positive(e, "eta", strict=False)
    if jax.tree_util.treedef_is_leaf(jax.tree.structure(eta)):  # one rate for every leaf
        eta = jax.tree.map(lambda _: eta, params0)
    eta = jax.tree.map(jnp.asarray, eta)
    args = (loss, params0, task, lr.astype(dtype), eta, int(n_steps), int(every))
    try:
        hash(loss)
    except TypeError:  # an unhashable callable cannot key a compiled program: run it eagerly
        return _simulate.__wrapped__(*args)
    return _simulate(*args)


# One compiled program per (loss, shapes, n_steps, every): a new init, task, lr or eta reuses it.
@functools.partial(jax.jit, static_argnums=(0, 5, 6))
def _simulate(loss, params0, task, lr, eta, n_steps, every):
    grad = jax.value_and_grad(loss)
    steps = jax.tree.map(lambda x, e: lr * jnp.asarray(e, x.dtype), params0, eta)

    def step(params, _):
        _, g = grad(params, task)
        return jax.tree.map(lambda p, s, gi: p - s * gi, params, steps, g), None

    def block(params, _):
        value = loss(params, task)
        new, _ = jax.lax.scan(step, params, None, length=every)
        return new, (params, value)

    n_saves = n_steps // every
    last, (saved, values) = jax.lax.scan(block, params0, None, length=n_saves)
    final = loss(last, task)
    params = jax.tree.map(lambda s, x: jnp.concatenate([s, x[None]], axis=0), saved, last)
    t = lr * every * jnp.arange(n_saves + 1, dtype=lr.dtype)
    return Simulation(t=t, params=params, loss=jnp.concatenate([values, final[None]]))
