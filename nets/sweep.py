"""Whole sweeps as one compiled program: :func:`train_many` (seeds × traced hyper-parameters).

R runs that share the model structure and the static part of their configs
(:func:`nets.config.static_part`) — e.g. 4 seeds × 4 learning rates of one MLP — are trained by
``jax.vmap`` of :func:`nets.step.run` over their stacked :class:`~nets.step.TrainState` and
:class:`~nets.config.HParams`: one compilation and one scan for all of them, each with its own
initialisation, data order, augmentation and hyper-parameters. Run i equals
``train(models[i], data, configs[i], key=keys[i])`` up to floating-point reassociation under
``vmap``, with the same log points and History.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from metrics import freeze_features
from nets.blas import one_blas_thread
from nets.compiler import jit
from nets.config import TrainConfig
from nets.data.base import Dataset, validate
from nets.evaluate import EVAL_CHUNK, default_metric, forward_all, frozen_features, log_values
from nets.history import History, TrainingDiverged
from nets.loop import (
    check_metric_splits,
    default_log_every,
    eval_subset,
    host_metric_values,
    record_values,
    run_length,
    split_metrics,
)
from nets.step import (
    build,
    epoch_order,
    forward,
    learning_rate_jit,
    run_many,
    uses_cpu_options,
)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _epoch_orders(keys: jax.Array, epoch: int, n: int, spe: int, batch: int) -> jax.Array:
    return jax.vmap(lambda k: epoch_order(jax.random.fold_in(k, epoch), n, spe, batch))(keys)


@jit(static_argnums=(0, 5, 6, 7), options_if=uses_cpu_options)
def _log_many(program, states, hps, fit, held, metric_fns, chunk, metric_splits, cache=None):
    # lax.map, not vmap: one run at a time keeps the metrics' small GEMMs and eigh unbatched,
    # which XLA:CPU runs ~4x faster per run than their batched forms (bench_vmap_sweep.py).
    def one(args):
        state, hp, known = args
        feats, frozen = (None, None) if known is None else known
        return log_values(
            program, state, hp, fit, held, metric_fns, chunk, feats, frozen,
            metric_splits=metric_splits,
        )  # fmt: skip

    return jax.lax.map(one, (states, hps, cache))


@jit(static_argnums=(0, 5), options_if=uses_cpu_options)
def _freeze_many(program, states, hps, x_fit, x_held, chunk):
    """Per run: the features of both subsets and their :func:`metrics.freeze_features`, stacked."""

    def one(args):
        state, hp = args
        feats = tuple(forward_all(program, state, x, hp, chunk)[0] for x in (x_fit, x_held))
        return feats, tuple(freeze_features(f) for f in feats)

    return jax.lax.map(one, (states, hps))


def _stack(trees: Sequence[Any]) -> Any:
    return jax.tree.map(lambda *a: jnp.stack(a), *trees)


def _unstack(tree: Any, i: int) -> Any:
    return jax.tree.map(lambda a: a[i], tree)


@one_blas_thread()
def train_many(
    models: Sequence[nnx.Module],
    data: Dataset,
    configs: Sequence[TrainConfig],
    keys: jax.Array | Sequence[jax.Array],
    *,
    log_every: int | None = None,
    eval_size: int = 2048,
    metrics: Mapping[str, Callable] | None = None,
    metric_splits: Sequence[str] = ("train", "test"),
    progress: bool = False,
) -> tuple[list[nnx.Module], list[History]]:
    """Train R runs at once: run i is ``train(models[i], data, configs[i], key=keys[i])``.

    Args:
      models: R models of one architecture (their initialisations may differ).
      data: the dataset, shared by all runs.
      configs: R configs differing only in traced fields (``lr``, ``momentum``,
        ``weight_decay``, ``b1``, ``b2``, ``eps``, ``step_factor``, target/input/output scales)
        and in the initial-parameter knobs ``weight_scale`` / ``layer_balance``.
      keys: R PRNG keys of data order and augmentation.
      log_every, eval_size, metrics, metric_splits, progress: as :func:`nets.train`.

    Returns:
      (R trained models in eval mode, R :class:`History`; their times are each run's share,
      1/R, of the batch's time). A run whose loss becomes non-finite
      stops being logged and its History's ``diverged`` holds the :class:`TrainingDiverged`
      that :func:`nets.train` would have raised; the other runs go on.

    Raises:
      ValueError: mismatched lengths, or runs that cannot share one program (the message names
        the first differing field).
    """
    models, configs = list(models), list(configs)
    keys = list(keys) if not isinstance(keys, jax.Array) else [keys[i] for i in range(len(keys))]
    if not (len(models) == len(configs) == len(keys)) or not models:
        raise ValueError(
            f"models, configs and keys must have the same length ≥ 1, got {len(models)}, "
            f"{len(configs)}, {len(keys)}"
        )
    validate(data)
    for c in configs:
        c.validate()
        if c.loss == "ce" and data.task != "classification":
            raise ValueError("loss='ce' needs a classification dataset")
    n = len(data.x_train)
    spe, total = run_length(configs[0], n)
    batch = configs[0].batch_size
    built = [
        build(m, c, num_classes=data.num_classes, steps_per_epoch=spe, total_steps=total)
        for m, c in zip(models, configs, strict=True)
    ]
    program = built[0][0]
    for i, (p, _, _) in enumerate(built):
        if p != program:
            raise ValueError(_mismatch(program, p, i))
    state = _stack([b[1] for b in built])
    hp = _stack([b[2] for b in built])
    log_every = int(default_log_every(spe, total) if log_every is None else log_every)
    if log_every < 1:
        raise ValueError(f"log_every must be ≥ 1, got {log_every}")

    x, y = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
    subsets = tuple(
        tuple(jnp.asarray(a) for a in eval_subset(xs, ys, eval_size))
        for xs, ys in ((data.x_train, data.y_train), (data.x_test, data.y_test))
    )
    chunk = min(EVAL_CHUNK, max(len(s[0]) for s in subsets))
    metric_fns = {"dlr": default_metric} if metrics is None else dict(metrics)
    metric_splits = check_metric_splits(metric_splits)
    one_state, one_hp = built[0][1], built[0][2]
    f_struct, o_struct = jax.eval_shape(
        lambda s, xs: forward(program, s, xs, one_hp), one_state, subsets[0][0]
    )
    traced, host = split_metrics(metric_fns, f_struct, o_struct)
    pairs = jnp.stack([jax.random.split(k) for k in keys])
    data_keys, aug_keys = pairs[:, 0], pairs[:, 1]

    R = len(models)
    histories = [History(records=[], steps=total) for _ in range(R)]
    alive = np.ones(R, bool)
    sums, counts = np.zeros(R), 0

    # lazy runs of a model without batch statistics: Φ and Φ_cᵀΦ_c computed once (as nets.train)
    cache = [] if frozen_features(program, one_state) else None

    def record(step: int) -> None:
        t0 = time.perf_counter()
        if cache == []:
            cache.append(_freeze_many(program, state, hp, subsets[0][0], subsets[1][0], chunk))
        known = cache[0] if cache else None
        values = jax.device_get(
            _log_many(program, state, hp, *subsets, traced, chunk, metric_splits, known)
        )
        lrs = np.asarray(jax.vmap(lambda h: learning_rate_jit(program, h, step))(hp))
        for i in np.flatnonzero(alive):
            host_values = {}
            if host:
                host_values = host_metric_values(
                    program, _unstack(state, i), _unstack(hp, i), subsets, host, chunk,
                    metric_splits,
                )  # fmt: skip
            rec = {
                "step": step,
                "epoch": step / spe,
                "lr": float(lrs[i]),
                "loss": sums[i] / counts if counts else math.nan,
            }
            rec.update(record_values({k: v[i] for k, v in values.items()}, host_values))
            histories[i].records.append(rec)
        dt = (time.perf_counter() - t0) / R
        for i in np.flatnonzero(alive):
            h = histories[i]
            if len(h.records) == 1:
                h.compile_time += dt
            else:
                h.log_time += dt
            h.records[-1]["train_time"], h.records[-1]["log_time"] = h.train_time, h.log_time

    record(0)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=f"train ×{R}", unit="step", leave=False)
    unit = math.gcd(spe, log_every)
    step, first = 0, True
    try:
        while step < total and alive.any():
            epoch, j = divmod(step, spe)
            perm = _epoch_orders(data_keys, epoch, n, spe, batch)
            stop = min((epoch + 1) * spe, total, (step // log_every + 1) * log_every)
            t0 = time.perf_counter()
            chunk_losses = []
            while step < stop:
                length = min(unit, stop - step)
                length = 1 << (length.bit_length() - 1) if length < unit else length
                idx = perm[:, j : j + length]
                state, losses = run_many(program, state, x, y, idx, aug_keys, hp)
                chunk_losses.append(losses)
                j += length
                step += length
            losses = np.concatenate([np.asarray(v) for v in chunk_losses], axis=1)
            dt = (time.perf_counter() - t0) / R  # each run's share of the batch
            for h in histories:
                if first:
                    h.compile_time += dt
                else:
                    h.train_time += dt
            first = False
            finite = np.isfinite(losses).all(axis=1)
            for i in np.flatnonzero(alive & ~finite):
                pos = int(np.argmin(np.isfinite(losses[i])))
                bad, value = step - losses.shape[1] + pos, float(losses[i, pos])
                histories[i].diverged = TrainingDiverged(
                    f"training loss became {value} at step {bad} (lr={configs[i].lr}, "
                    f"optimizer={configs[i].optimizer}); lower the learning rate",
                    step=bad,
                    loss=value,
                )
                alive[i] = False
            sums += np.where(finite, losses.sum(axis=1), 0.0)
            counts += losses.shape[1]
            if bar is not None:
                bar.update(losses.shape[1])
            if step % log_every == 0 or step == total:
                record(step)
                sums[:], counts = 0.0, 0
    finally:
        if bar is not None:
            bar.close()
    trained = [nnx.merge(program.graphdef_eval, *(_unstack(state, i)[1:3])) for i in range(R)]
    return trained, histories


def _mismatch(program, other, i: int) -> str:
    """Why run i cannot share run 0's compiled program."""
    if other.graphdef_train != program.graphdef_train:
        return (
            f"models[{i}] has another structure than models[0]; train_many needs one architecture"
        )
    for field in TrainConfig.__dataclass_fields__:
        a, b = getattr(program.config, field), getattr(other.config, field)
        if a != b:
            return (
                f"configs[{i}].{field} = {b!r} differs from configs[0].{field} = {a!r}; only "
                "traced hyper-parameters (nets.HParams fields) and weight_scale/layer_balance "
                "may differ between the runs of train_many"
            )
    return f"run {i} differs from run 0 in num_classes/steps ({other} vs {program})"
