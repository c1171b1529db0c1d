"""Whole sweeps as one compiled program: :func:`train_many` (seeds × traced hyper-parameters).

R runs that share the model structure, the static part of their configs
(:func:`nets.config.static_part`) and their length — e.g. 4 seeds × 4 learning rates of one
MLP — are trained by ``jax.vmap`` of :func:`nets.step.run` over their stacked
:class:`~nets.step.TrainState` and :class:`~nets.config.HParams`: one compilation and one scan for
all of them, each with its own initialisation, data order, augmentation and hyper-parameters. The
loop is :func:`nets.loop.fit`, the same as :func:`nets.train`'s, so run i equals
``train(models[i], data, configs[i], key=keys[i])`` up to floating-point reassociation under
``vmap``, with the same log points and History.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from nets.config import TrainConfig
from nets.data.base import Dataset
from nets.evaluate import SPLITS
from nets.history import History
from nets.loop import fit


def train_many(
    models: Sequence[nnx.Module],
    data: Dataset,
    configs: Sequence[TrainConfig],
    keys: jax.Array | Sequence[jax.Array],
    *,
    log_every: int | None = None,
    eval_size: int = 2048,
    metrics: Mapping[str, Callable] | None = None,
    metric_splits: Sequence[str] = SPLITS,
    progress: bool = False,
    vectorize: bool = True,
    devices: int | None = None,
) -> tuple[list[nnx.Module], list[History]]:
    """Train R runs at once: run i is ``train(models[i], data, configs[i], key=keys[i])``.

    Args:
      models: R models of one architecture (their initialisations may differ).
      data: the dataset, shared by all runs.
      configs: R configs of one length (``epochs``/``steps`` giving the same number of steps)
        differing only in traced fields (``lr``, ``momentum``, ``weight_decay``, ``b1``,
        ``b2``, ``eps``, ``step_factor``, target/input/output scales) and in the
        initial-parameter knobs ``weight_scale`` / ``layer_balance``.
      keys: R PRNG keys of data order and augmentation.
      log_every, eval_size, metrics, metric_splits, progress: as :func:`nets.train`.
      vectorize: step the runs as one ``jax.vmap`` (default; fastest for small models, run i
        equals its ``train`` up to float32 reassociation) or one after another inside the same
        program (``lax.map``; run i equals its ``train`` bitwise on the CPU, and there it is the faster
        choice for wide layers, e.g. 784-256×3 MLPs).
      devices: split the runs over at most this many local devices, each training its share
        as one program (default: all; :func:`nets.step.runs_mesh` picks the largest count that
        divides R). On a CPU jax shows one device unless ``jax_num_cpu_devices`` is set before
        it starts (then each device is a core's worth of work).

    Returns:
      (R trained models in eval mode, R :class:`History`; their times are each run's share,
      1/R, of the batch's time). A run whose loss becomes non-finite
      stops being logged and its History's ``diverged`` holds the :class:`TrainingDiverged`
      that :func:`nets.train` would have raised; the other runs go on.

    Raises:
      ValueError: mismatched lengths, or runs that cannot share one program (the message names
        the first differing field, or both run lengths).
    """
    if isinstance(keys, jax.Array) and (
        keys.ndim == 0 or keys.dtype == jnp.uint32 and keys.ndim == 1
    ):
        raise TypeError(
            f"keys must hold one PRNG key per run ({len(models)} here), e.g. "
            f"jax.random.split(jax.random.key(0), {len(models)}); got a single key"
        )
    if not isinstance(keys, jax.Array | Sequence):
        raise TypeError(f"keys must be a sequence of PRNG keys, got {type(keys).__name__}")
    keys = [keys[i] for i in range(len(keys))] if isinstance(keys, jax.Array) else list(keys)
    return fit(
        models, data, configs, keys, stacked=True, log_every=log_every, eval_size=eval_size,
        metrics=metrics, metric_splits=metric_splits, progress=progress, vectorize=vectorize,
        devices=devices,
    )  # fmt: skip
