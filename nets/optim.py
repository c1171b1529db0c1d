r"""Optimizers and learning-rate schedules with PyTorch semantics (the papers trained PyTorch).

* SGD: ``torch.optim.SGD`` — :math:`v \leftarrow \mu v + (g + \lambda\theta)`,
  :math:`\theta \leftarrow \theta - \eta v` (coupled L2 weight decay λ, heavy-ball momentum μ);
  with ``nesterov``, :math:`\theta \leftarrow \theta - \eta\,(g + \lambda\theta + \mu v)`
  (torch's ``nesterov=True``, Sutskever et al. 2013).
* Adam: ``torch.optim.Adam`` — weight decay added to the gradient before the moments (coupled).
* AdamW: ``torch.optim.AdamW`` — decoupled, :math:`\theta \leftarrow \theta - \eta\lambda\theta`
  next to the Adam step (optax's ``adamw`` multiplies the decay by the learning rate, as torch).
* Schedules: constant; step (× ``step_factor`` every ``step_every_epochs`` epochs, D App. F
  "0.2 per 60 epochs"); cosine to zero; all with an optional linear warm-up.

Every number (η, μ, λ, β₁, β₂, ε, the step factor) may be a traced array: the transformation's
structure depends only on the optimizer's name, so a sweep over them compiles once. Momentum and
weight decay are always present (μ = 0 gives v = g exactly, λ = 0 adds exactly 0).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("constant", "step", "cosine")


def schedule_factor(
    kind: str,
    step: jax.Array,
    *,
    steps_per_epoch: int,
    total_steps: int,
    warmup_steps: int,
    step_every_epochs: int,
    step_factor: jax.Array | float,
) -> jax.Array:
    r"""η(step)/η: the shape of the learning-rate schedule ``kind`` (traceable in ``step``).

    .. math::
        \text{constant: } 1,\quad \text{step: } \gamma^{\lfloor s/(E\cdot spe)\rfloor},\quad
        \text{cosine: } \tfrac12\big(1 + \cos(\pi \min(s - w, T - w)/(T - w))\big),

    each multiplied by the warm-up ramp min(s/w, 1) for s < w (the step and cosine clocks start
    after the warm-up, as ``optax.join_schedules``).

    Args:
      kind: one of ``SCHEDULES``.
      step: () int, the optimizer step s.
      steps_per_epoch: spe; total_steps: T (cosine reaches 0 at T); warmup_steps: w;
      step_every_epochs: E; step_factor: γ.

    Returns:
      () float factor.
    """
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}; choose one of {SCHEDULES}")
    s = jnp.asarray(step)
    dtype = jnp.result_type(step_factor, float)
    after = jnp.maximum(s - warmup_steps, 0).astype(dtype)
    if kind == "constant":
        main = jnp.ones((), dtype)
    elif kind == "step":
        period = int(step_every_epochs) * int(steps_per_epoch)
        main = jnp.asarray(step_factor, dtype) ** jnp.floor(after / period)
    else:
        horizon = max(int(total_steps) - int(warmup_steps), 1)
        main = 0.5 * (1 + jnp.cos(jnp.pi * jnp.minimum(after, horizon) / horizon))
    if warmup_steps <= 0:
        return main
    ramp = s.astype(dtype) / warmup_steps
    return jnp.where(s < warmup_steps, ramp, main)


def learning_rate_schedule(config, steps_per_epoch: int, total_steps: int) -> optax.Schedule:
    """The learning rate η(step) of ``config`` (a :class:`nets.config.TrainConfig`).

    Args:
      config: training config (``lr``, ``schedule``, ``step_every_epochs``, ``step_factor``,
        ``warmup_steps``).
      steps_per_epoch: optimizer steps in one epoch.
      total_steps: total optimizer steps of the run (cosine decays to 0 at this step).

    Returns:
      an optax schedule ``step -> η``.
    """
    if config.schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {config.schedule!r}; choose one of {SCHEDULES}")

    def schedule(step):
        return config.lr * schedule_factor(
            config.schedule,
            step,
            steps_per_epoch=steps_per_epoch,
            total_steps=total_steps,
            warmup_steps=int(config.warmup_steps),
            step_every_epochs=int(config.step_every_epochs),
            step_factor=config.step_factor,
        )

    return schedule


def optimizer(
    kind: str,
    learning_rate: jax.Array | float | Callable,
    *,
    momentum: jax.Array | float = 0.0,
    b1: jax.Array | float = 0.9,
    b2: jax.Array | float = 0.999,
    eps: jax.Array | float = 1e-8,
    weight_decay: jax.Array | float = 0.0,
    nesterov: bool = False,
) -> optax.GradientTransformation:
    """The optax transformation ``kind`` with torch-style weight decay; numbers may be traced.

    Args:
      kind: one of ``OPTIMIZERS``.
      learning_rate: η, a scalar (traced or not) or an optax schedule.
      momentum: SGD momentum μ; b1, b2, eps: Adam's β₁, β₂, ε; weight_decay: λ.
      nesterov: Nesterov momentum (SGD only; a Python bool, it shapes the transformation).

    Returns:
      ``optax.GradientTransformation`` whose state structure depends on ``kind`` only.
    """
    if kind not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {kind!r}; choose one of {OPTIMIZERS}")
    if nesterov and kind != "sgd":
        raise ValueError(f"nesterov=True is a form of SGD momentum; {kind!r} has none")
    if kind == "adamw":
        return optax.adamw(learning_rate, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay)
    if kind == "sgd":
        core = optax.sgd(learning_rate, momentum=momentum, nesterov=bool(nesterov))
    else:
        core = optax.adam(learning_rate, b1=b1, b2=b2, eps=eps)
    return optax.chain(optax.add_decayed_weights(weight_decay), core)


def make_optimizer(config, steps_per_epoch: int, total_steps: int) -> optax.GradientTransformation:
    """The optax transformation of ``config`` with its learning-rate schedule.

    Args:
      config: training config (``optimizer``, ``momentum``, ``nesterov``, ``b1``, ``b2``,
        ``eps``, ``weight_decay`` and the schedule fields).
      steps_per_epoch: optimizer steps in one epoch.
      total_steps: total optimizer steps.

    Returns:
      ``optax.GradientTransformation``.
    """
    if config.optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {config.optimizer!r}; choose one of {OPTIMIZERS}")
    if config.lr < 0 or config.weight_decay < 0 or not 0 <= config.momentum < 1:
        raise ValueError(
            f"need lr ≥ 0, weight_decay ≥ 0, 0 ≤ momentum < 1; got lr={config.lr}, "
            f"weight_decay={config.weight_decay}, momentum={config.momentum}"
        )
    return optimizer(
        config.optimizer,
        learning_rate_schedule(config, steps_per_epoch, total_steps),
        momentum=config.momentum,
        b1=config.b1,
        b2=config.b2,
        eps=config.eps,
        weight_decay=config.weight_decay,
        nesterov=config.nesterov,
    )
