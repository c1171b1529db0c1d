"""The training configuration and its traced half, :class:`HParams`.

:class:`TrainConfig` holds every knob of a run. Its fields split in two: the *static* ones set the
program (loss, optimizer kind, schedule kind, batch size, which parameters train, augmentation)
and the *swept* ones (learning rate, momentum, weight decay, Adam moments, target/input/output
scales, step factor) enter the compiled step as traced scalars, :class:`HParams`, so a sweep over
them reuses one compiled program (STYLE §3) and can be ``jax.vmap``-ed.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nets.augment import AUGMENTATIONS
from nets.losses import LOSSES
from nets.optim import OPTIMIZERS, SCHEDULES

COMPUTE_DTYPES = ("float32", "bfloat16")

_STRINGS = ("loss", "balance_first", "optimizer", "schedule", "augment", "compute_dtype")
_BOOLS = ("last_layer_only", "nesterov")
_INTEGERS = ("step_every_epochs", "warmup_steps", "batch_size", "epochs", "steps")
_REALS = (
    "target_scale",
    "target_downscale",
    "input_scale",
    "output_scale",
    "weight_scale",
    "layer_balance",
    "lr",
    "momentum",
    "b1",
    "b2",
    "eps",
    "weight_decay",
    "step_factor",
)


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_)


def _is_real(v) -> bool:
    """A real number: a Python/NumPy int or float, or a 0-d real array (not a bool)."""
    if isinstance(v, bool | np.bool_ | str):
        return False
    if isinstance(v, numbers.Real):
        return True
    dtype = getattr(v, "dtype", None)
    return (
        getattr(v, "shape", None) == ()
        and dtype is not None
        and (np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating))
    )


def _numeric_str(v) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return isinstance(v, str)


def _example_int(v) -> str:
    return str(round(v)) if isinstance(v, float) and np.isfinite(v) else "128"


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Every knob that changes the training dynamics (defaults: plain SGD, MSE, one-hot targets).

    Attributes:
      loss: ``'mse'`` (one-hot × target scale, default) or ``'ce'``.
      target_scale: S, one-hot labels are multiplied by S (T Table 6.1 "target scale").
      target_downscale: α of D Fig 2b, targets y → y/α (larger α = lazier).
      input_scale: inputs x → s_in·x (T Table 6.1 "input scale"; float inputs only).
      output_scale: outputs f → s_out·f (T Table 6.1 "output scale"; D App. F "ε").
      weight_scale: initial parameters θ₀ → w·θ₀ (T Table 6.1 "weight scale").
      layer_balance: α of Kunin et al. App. D.3 (first layer ÷α, readout ×α).
      balance_first: dotted path of the first layer for ``layer_balance``.
      optimizer: ``'sgd'`` (heavy-ball momentum), ``'adam'`` or ``'adamw'`` (torch semantics).
      lr: base learning rate η.
      momentum: SGD momentum μ.
      nesterov: Nesterov momentum for SGD (``torch.optim.SGD(nesterov=True)``: the step uses
        g + μv instead of v; needs μ > 0).
      b1, b2, eps: Adam moments and ε.
      weight_decay: λ (coupled L2 for sgd/adam, decoupled for adamw).
      schedule: ``'constant'``, ``'step'`` (× ``step_factor`` every ``step_every_epochs``) or
        ``'cosine'``.
      step_every_epochs, step_factor: the step schedule (D: 60 epochs, 0.2).
      warmup_steps: linear warm-up from 0 over this many steps.
      batch_size: minibatch size B.
      epochs: number of epochs (ignored when ``steps`` is set).
      steps: total optimizer steps, overriding ``epochs``.
      last_layer_only: train only the readout ``head`` (the lazy baseline); features stay fixed.
      augment: ``'none'`` or ``'cifar'`` (random crop 32 with zero padding 4 + horizontal flip).
      compute_dtype: ``'float32'`` (default) or ``'bfloat16'``: the dtype of the forward and
        backward matmuls/convolutions (parameters, optimizer state and logged metrics stay in
        full precision; bfloat16 is for speed on GPU/TPU).
    """

    loss: str = "mse"
    target_scale: float = 1.0
    target_downscale: float = 1.0
    input_scale: float = 1.0
    output_scale: float = 1.0
    weight_scale: float = 1.0
    layer_balance: float = 1.0
    balance_first: str = "layers.0"
    optimizer: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.0
    nesterov: bool = False
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    schedule: str = "constant"
    step_every_epochs: int = 60
    step_factor: float = 0.2
    warmup_steps: int = 0
    batch_size: int = 128
    epochs: int = 10
    steps: int | None = None
    last_layer_only: bool = False
    augment: str = "none"
    compute_dtype: str = "float32"

    def validate(self) -> TrainConfig:
        """Raise naming the first invalid field (``TypeError``: wrong type, ``ValueError``: out
        of range, NaN or inf); returns ``self``."""
        for name in _STRINGS:
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, got {value!r} ({type(value).__name__})")
        for name, value, valid in (
            ("loss", self.loss, LOSSES),
            ("augment", self.augment, AUGMENTATIONS),
            ("optimizer", self.optimizer, OPTIMIZERS),
            ("schedule", self.schedule, SCHEDULES),
            ("compute_dtype", self.compute_dtype, COMPUTE_DTYPES),
        ):
            if value not in valid:
                raise ValueError(f"unknown {name} {value!r}; choose one of {valid}")
        for name in _BOOLS:
            value = getattr(self, name)
            if not isinstance(value, bool | np.bool_):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        for name in _INTEGERS:
            value = getattr(self, name)
            if not (name == "steps" and value is None) and not _is_int(value):
                raise TypeError(
                    f"{name} must be an int, got {value!r} ({type(value).__name__}); e.g. "
                    f"{name}={_example_int(value)}"
                )
        for name in _REALS:
            value = getattr(self, name)
            if not _is_real(value):
                hint = f" (pass {name}={value.strip()})" if _numeric_str(value) else ""
                raise TypeError(
                    f"{name} must be a real number, got {value!r} ({type(value).__name__}){hint}"
                )
            if not np.isfinite(value):
                raise ValueError(f"{name} must be finite, got {value}")
        for name in (
            "target_scale",
            "target_downscale",
            "input_scale",
            "output_scale",
            "weight_scale",
            "layer_balance",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        steps_ok = self.steps is None or self.steps >= 0
        for name, ok, rule in (
            ("lr", self.lr >= 0, "≥ 0"),
            ("weight_decay", self.weight_decay >= 0, "≥ 0"),
            ("momentum", 0 <= self.momentum < 1, "in [0, 1)"),
            ("eps", self.eps >= 0, "≥ 0"),  # torch.optim.Adam's checks for eps, b1, b2
            ("b1", 0 <= self.b1 < 1, "in [0, 1)"),
            ("b2", 0 <= self.b2 < 1, "in [0, 1)"),
            ("step_factor", self.step_factor >= 0, "≥ 0"),
            ("batch_size", self.batch_size >= 1, "≥ 1"),
            ("epochs", self.epochs >= 0, "≥ 0"),
            ("steps", steps_ok, "≥ 0 (or None: epochs decide)"),
            ("warmup_steps", self.warmup_steps >= 0, "≥ 0"),
            ("step_every_epochs", self.step_every_epochs >= 1, "≥ 1"),
        ):
            if not ok:
                raise ValueError(f"{name} must be {rule}, got {getattr(self, name)}")
        if self.nesterov and self.optimizer != "sgd":
            raise ValueError(
                f"nesterov=True is a form of SGD momentum; optimizer={self.optimizer!r} has none "
                "(pass optimizer='sgd' or nesterov=False)"
            )
        if self.nesterov and not self.momentum > 0:
            raise ValueError(  # torch.optim.SGD's rule
                "nesterov=True needs momentum > 0, got momentum=0 (pass e.g. momentum=0.9)"
            )
        return self

    def total_steps(self, steps_per_epoch: int) -> int:
        """Optimizer steps of the run: ``steps`` if set, else ``epochs · steps_per_epoch``."""
        return self.steps if self.steps is not None else self.epochs * steps_per_epoch


class HParams(NamedTuple):
    """The swept hyper-parameters of :class:`TrainConfig` as traced scalars (a pytree).

    Stack them along a leading axis (``jax.tree.map(jnp.stack, ...)``) to train many runs with
    one ``jax.vmap``-ed program. Every leaf is a () array; the names are the config's fields.
    """

    lr: jax.Array
    momentum: jax.Array
    b1: jax.Array
    b2: jax.Array
    eps: jax.Array
    weight_decay: jax.Array
    step_factor: jax.Array
    target_scale: jax.Array
    target_downscale: jax.Array
    input_scale: jax.Array
    output_scale: jax.Array


def hparams(config: TrainConfig, dtype=jnp.float32) -> HParams:
    """The traced half of ``config``: one () array of ``dtype`` per :class:`HParams` field.

    Args:
      config: the training config.
      dtype: dtype of the scalars, that of the trained parameters (float32 by default).

    Returns:
      :class:`HParams`.
    """
    config.validate()
    return HParams(*(jnp.asarray(getattr(config, f), dtype) for f in HParams._fields))


def static_part(config: TrainConfig) -> TrainConfig:
    """``config`` with every field that does not shape the compiled step reset to its default.

    Resets the :class:`HParams` fields (traced), the knobs applied to the model before training
    (``weight_scale``, ``layer_balance``, ``balance_first``) and the run length (``epochs``,
    ``steps``; the compiled program takes the total step count separately). Two configs with equal
    static parts share one compiled program.
    """
    free = (*HParams._fields, "weight_scale", "layer_balance", "balance_first", "epochs", "steps")
    return dataclasses.replace(
        config, **{f: TrainConfig.__dataclass_fields__[f].default for f in free}
    )
