r"""Optimizers and learning-rate schedules with PyTorch semantics (the papers trained PyTorch).

* SGD: ``torch.optim.SGD`` — :math:`v \leftarrow \mu v + (g + \lambda\theta)`,
  :math:`\theta \leftarrow \theta - \eta v` (coupled L2 weight decay λ, heavy-ball momentum μ).
* Adam: ``torch.optim.Adam`` — weight decay added to the gradient before the moments (coupled).
* AdamW: ``torch.optim.AdamW`` — decoupled, :math:`\theta \leftarrow \theta - \eta\lambda\theta`
  next to the Adam step (optax's ``adamw`` multiplies the decay by the learning rate, as torch).
* Schedules: constant; step (× ``step_factor`` every ``step_every_epochs`` epochs, seed 000 App. F
  "0.2 per 60 epochs"); cosine to zero; all with an optional linear warm-up.
"""

from __future__ import annotations

import optax

OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("constant", "step", "cosine")


def learning_rate_schedule(config, steps_per_epoch: int, total_steps: int) -> optax.Schedule:
    """The learning rate η(step) of ``config`` (a :class:`nets.train.TrainConfig`).

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
    warm = int(config.warmup_steps)
    if config.schedule == "constant":
        main = optax.constant_schedule(config.lr)
    elif config.schedule == "step":
        main = optax.exponential_decay(
            config.lr,
            transition_steps=int(config.step_every_epochs) * steps_per_epoch,
            decay_rate=config.step_factor,
            staircase=True,
        )
    else:
        main = optax.cosine_decay_schedule(config.lr, decay_steps=max(total_steps - warm, 1))
    if warm <= 0:
        return main
    ramp = optax.linear_schedule(0.0, config.lr, warm)
    return optax.join_schedules([ramp, main], [warm])


def make_optimizer(config, steps_per_epoch: int, total_steps: int) -> optax.GradientTransformation:
    """The optax transformation for ``config.optimizer`` with torch-style weight decay.

    Args:
      config: training config (``optimizer``, ``momentum``, ``b1``, ``b2``, ``eps``,
        ``weight_decay`` and the schedule fields).
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
    lr = learning_rate_schedule(config, steps_per_epoch, total_steps)
    if config.optimizer == "adamw":
        return optax.adamw(
            lr, b1=config.b1, b2=config.b2, eps=config.eps, weight_decay=config.weight_decay
        )
    if config.optimizer == "sgd":
        core = optax.sgd(lr, momentum=config.momentum or None)
    else:
        core = optax.adam(lr, b1=config.b1, b2=config.b2, eps=config.eps)
    if config.weight_decay == 0:
        return core
    return optax.chain(optax.add_decayed_weights(config.weight_decay), core)
