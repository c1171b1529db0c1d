"""The host loop of one training run: :func:`train` (log points, checkpoints, progress).

The compiled work is :func:`nets.step.run` (a ``lax.scan`` of the pure step over minibatches
gathered on device from a per-epoch permutation) and :func:`nets.evaluate.log_values` (a whole log
point on device); this loop only decides when to call them, so Python runs at log and checkpoint
points only.

Randomness is a pure function of ``key`` and the step: the data order of epoch e uses
``fold_in(data_key, e)``, the augmentation of step s ``fold_in(aug_key, s)``; dropout draws from
the model's own RNG state, which is checkpointed. Hence resuming from a checkpoint reproduces the
uninterrupted run exactly.

Scale-out: ``data_parallel=True`` shards every minibatch over all local devices with
``jax.sharding`` (parameters replicated, gradients all-reduced by XLA); see :mod:`nets.parallel`
for multi-host runs with ``jax.distributed``. Batches are ``drop_last`` (every step has the same
shape); ``steps_per_epoch = n_train // batch_size``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from metrics import freeze_features
from nets.batch import active_batcher
from nets.blas import one_blas_thread
from nets.checkpoint import Checkpointer
from nets.config import TrainConfig
from nets.data.base import Dataset, validate
from nets.evaluate import (
    EVAL_CHUNK,
    SPLITS,
    default_metric,
    features_and_outputs,
    frozen_features,
    log_values,
)
from nets.history import History, JsonlLog, TrainingDiverged
from nets.step import (
    Program,
    TrainState,
    build,
    epoch_order,
    forward,
    learning_rate_jit,
    run_jit,
)

_TRACE_ERRORS = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
)


def run_length(config: TrainConfig, n_train: int) -> tuple[int, int]:
    """(steps_per_epoch, total_steps) of ``config`` on ``n_train`` examples (``drop_last``)."""
    if config.batch_size > n_train:
        raise ValueError(f"batch_size={config.batch_size} exceeds the {n_train} training examples")
    spe = n_train // config.batch_size
    return spe, config.total_steps(spe)


def default_log_every(steps_per_epoch: int, total_steps: int) -> int:
    """About 10 log points, on epoch boundaries when the run has ≥ 10 epochs."""
    spe = steps_per_epoch
    return spe * (total_steps // (10 * spe)) or max(total_steps // 10, 1)


def eval_subset(x: np.ndarray, y: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """A fixed subset of ``size`` rows (seeded by 0, in original order), or all rows if fewer."""
    if size >= len(x):
        return x, y
    idx = np.sort(np.random.default_rng(0).choice(len(x), size=size, replace=False))
    return x[idx], y[idx]


def split_metrics(
    metrics: Mapping[str, Callable], features: jax.ShapeDtypeStruct, outputs: jax.ShapeDtypeStruct
) -> tuple[tuple, tuple]:
    """(traceable, host) metric functions: those that trace under ``jit`` run on device.

    A function that converts its inputs to NumPy or Python numbers (``float(...)``) cannot be
    traced, and one that raises ``ValueError`` while tracing checks values; both run on the host
    from the device-computed features and outputs.
    """
    traced, host = [], []
    for name, fn in metrics.items():
        try:
            jax.eval_shape(fn, features, outputs)
        except (*_TRACE_ERRORS, ValueError):
            host.append((name, fn))
        else:
            traced.append((name, fn))
    return tuple(traced), tuple(host)


def undefined_reason(name: str, rank: float | None) -> str:
    """Why the metric ``name`` came out NaN (for D_LR: zero output rank or constant features)."""
    if rank is not None:
        if rank == 0:
            return "outputs are constant over samples (rank 0): the learned-function space is empty"
        return "features are constant over samples (zero centred variance)"
    return f"{name} returned NaN"


def record_values(values: Mapping[str, Any], host_metrics: Mapping[str, Any] | None = None) -> dict:
    """One log record's numbers as floats, with ``undefined: {key: reason}`` for NaN metrics.

    Args:
      values: ``log_values`` output on the host (``*_rank`` entries are folded into reasons).
      host_metrics: ``{key: float or reason string}`` of the host-side metrics.
    """
    rec, undefined = {}, {}
    for key, v in values.items():
        if key.endswith("_rank"):
            continue
        v = float(v)
        rec[key] = v
        if math.isnan(v):
            rank = values.get(f"{key}_rank")
            undefined[key] = undefined_reason(key, None if rank is None else float(rank))
    for key, v in (host_metrics or {}).items():
        if isinstance(v, str):
            rec[key], undefined[key] = math.nan, v
        else:
            rec[key] = v
            if math.isnan(v):
                undefined[key] = undefined_reason(key, None)
    if undefined:
        rec["undefined"] = undefined
    return rec


def check_metric_splits(splits: Sequence[str]) -> tuple[str, ...]:
    """``splits`` as a tuple in canonical order; ValueError unless a non-empty subset of SPLITS."""
    if isinstance(splits, str) or not set(splits) <= set(SPLITS) or not splits:
        raise ValueError(
            f"metric_splits must be a non-empty sequence drawn from {SPLITS}, got {splits!r}"
        )
    return tuple(s for s in SPLITS if s in splits)


def host_metric_values(
    program: Program,
    state: TrainState,
    hp,
    subsets,
    host: tuple,
    chunk: int = EVAL_CHUNK,
    metric_splits: tuple[str, ...] = SPLITS,
) -> dict:
    """Host-side metrics on the fit/eval subsets; a ``ValueError`` becomes its message (NaN)."""
    out = {}
    if not host:
        return out
    for split, (xs, _) in zip(SPLITS, subsets, strict=True):
        if split not in metric_splits:
            continue
        feats, outs = features_and_outputs(program, state, hp, xs, chunk)
        for name, fn in host:
            try:
                out[f"{name}_{split}"] = float(fn(feats, outs))
            except ValueError as e:  # an undefined metric never stops training
                out[f"{name}_{split}"] = f"{type(e).__name__}: {e}"
    return out


@one_blas_thread()
def train(
    model: nnx.Module,
    data: Dataset,
    config: TrainConfig,
    *,
    key: jax.Array,
    log_every: int | None = None,
    eval_size: int = 2048,
    metrics: Mapping[str, Callable] | None = None,
    metric_splits: Sequence[str] = SPLITS,
    callback: Callable[[dict, nnx.Module], None] | None = None,
    run_dir: str | Path | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
    data_parallel: bool | jax.sharding.Mesh = False,
    progress: bool = True,
) -> tuple[nnx.Module, History]:
    r"""Train ``model`` on ``data`` with ``config``; returns the trained model and its history.

    Minimises :math:`\frac{1}{nC}\sum_{i,c}(s_{out} f_c(s_{in} x_i) - S e_{y_i,c}/\alpha)^2`
    (or cross-entropy) with the optimizer, schedule and knobs of ``config`` (seed 000 §2,
    App. F.4; T §6.4.3); see :mod:`nets.step` for the pure step and the module docstring for the
    resumable loop.

    Args:
      model: an NNX model following the :mod:`nets` contract (``model(x)`` logits,
        ``model.features(x)`` Φ, readout ``head``); it is not modified.
      data: training/test arrays (:class:`nets.data.Dataset`).
      config: :class:`TrainConfig`.
      key: PRNG key of the data order and the augmentation (the model's init is the caller's).
      log_every: steps between log points (default: 10 points over the run); a point is also
        logged at step 0 and at the end.
      eval_size: size of the fixed fit (train) and eval (test) subsets used at log points.
      metrics: ``{name: fn(features, outputs)}`` computed at log points on both subsets (keys
        ``name_train``, ``name_test``); default ``{"dlr": metrics.dlr_with_rank}``. Traceable
        functions run on device inside the log point's jitted program; others (NumPy,
        ``float(...)``) on the host. NaN or a ``ValueError`` records NaN with the reason.
      metric_splits: the subsets the metrics are computed on, ``("train", "test")`` (default)
        or one of them (e.g. ``("test",)`` when only ``dlr_test`` is used: one D_LR Gram less
        per log point). Loss and accuracy are always logged on both.
      callback: called as ``callback(record, model)`` after each log point.
      run_dir: folder for ``metrics.jsonl`` (written as computed) and ``checkpoints/``.
      checkpoint_every: save an orbax checkpoint every this many steps (0: never); needs
        ``run_dir``. The final state is always saved when checkpointing is on.
      resume: continue from the latest checkpoint in ``run_dir`` if there is one.
      data_parallel: shard minibatches over all local devices (True) or a given 1-D mesh with
        axis ``'data'``; ``batch_size`` must be divisible by the number of devices.
      progress: show a tqdm progress bar.

    Returns:
      (trained model in eval mode, :class:`History`).

    Raises:
      TrainingDiverged: the loss became NaN/inf (carries ``step`` and ``loss``; the last good
        checkpoint is kept).
      nets.checkpoint.CheckpointError: an unreadable checkpoint when resuming.
    """
    metric_splits = check_metric_splits(metric_splits)  # before batching: a clear error here
    batcher = active_batcher()
    if batcher is not None:  # a thread of a batched sweep (nets.batch): maybe vmapped with others
        kwargs = dict(key=key, log_every=log_every, eval_size=eval_size, metrics=metrics,
                      metric_splits=metric_splits, callback=callback, run_dir=run_dir,
                      checkpoint_every=checkpoint_every, resume=resume,
                      data_parallel=data_parallel, progress=progress)  # fmt: skip
        return batcher.submit(model, data, config, kwargs)
    config.validate()
    validate(data)
    if (checkpoint_every or resume) and run_dir is None:
        raise ValueError("checkpoint_every/resume need a run_dir")
    if config.loss == "ce" and data.task != "classification":
        raise ValueError("loss='ce' needs a classification dataset")
    n = len(data.x_train)
    spe, total = run_length(config, n)
    batch = config.batch_size
    log_every = int(default_log_every(spe, total) if log_every is None else log_every)
    if log_every < 1:
        raise ValueError(f"log_every must be ≥ 1, got {log_every}")
    if eval_size < 2:
        raise ValueError(f"eval_size must be ≥ 2, got {eval_size}")

    mesh = None
    if data_parallel is True:
        mesh = jax.make_mesh(
            (jax.local_device_count(),), ("data",), axis_types=(jax.sharding.AxisType.Auto,)
        )
    elif isinstance(data_parallel, jax.sharding.Mesh):
        mesh = data_parallel
    if mesh is not None and batch % mesh.size:
        raise ValueError(f"batch_size={batch} is not divisible by the {mesh.size} devices")

    program, state, hp = build(
        model,
        config,
        num_classes=data.num_classes,
        steps_per_epoch=spe,
        total_steps=total,
        mesh=mesh,
    )
    x, y = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
    if mesh is not None:
        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        x, y, state = jax.device_put((x, y, state), replicated)
    subsets = tuple(
        tuple(jnp.asarray(a) for a in eval_subset(xs, ys, eval_size))
        for xs, ys in ((data.x_train, data.y_train), (data.x_test, data.y_test))
    )
    chunk = min(EVAL_CHUNK, max(len(s[0]) for s in subsets))
    metric_fns = {"dlr": default_metric} if metrics is None else dict(metrics)
    f_struct, o_struct = jax.eval_shape(
        lambda s, xs: forward(program, s, xs, hp), state, subsets[0][0]
    )
    traced, host = split_metrics(metric_fns, f_struct, o_struct)
    data_key, aug_key = jax.random.split(key)

    ckpt = None
    if run_dir is not None:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
    start = 0
    if checkpoint_every or resume:
        ckpt = Checkpointer(run_dir / "checkpoints")
        if resume and ckpt.latest_step() is not None:
            start, state = ckpt.restore(state)
            if mesh is not None:
                state = jax.device_put(state, replicated)
    log = JsonlLog(run_dir / "metrics.jsonl", start) if run_dir is not None else None
    history = History(records=log.records() if log else [], resumed_from=start or None)
    history.steps = total
    first_log = [True]
    # lazy training of a model without batch statistics: Φ of the subsets is computed once
    cached = [] if frozen_features(program, state) else None

    def record(step: int, loss_sum: float, loss_count: int) -> None:
        t0 = time.perf_counter()
        if cached == []:
            cached.extend(
                features_and_outputs(program, state, hp, xs, chunk)[0] for xs, _ in subsets
            )
            cached.extend(freeze_features(f) for f in tuple(cached))
        feats, frozen = (tuple(cached[:2]), tuple(cached[2:])) if cached else (None, None)
        values = jax.device_get(
            log_values(
                program,
                state,
                hp,
                *subsets,
                traced,
                chunk,
                feats,
                frozen,
                metric_splits=metric_splits,
            )  # fmt: skip
        )
        host_values = host_metric_values(program, state, hp, subsets, host, chunk, metric_splits)
        rec: dict[str, Any] = {
            "step": step,
            "epoch": step / spe,
            "lr": float(learning_rate_jit(program, hp, step)),
            "loss": loss_sum / loss_count if loss_count else math.nan,
        }
        rec.update(record_values(values, host_values))
        dt = time.perf_counter() - t0
        if first_log[0]:
            history.compile_time += dt
            first_log[0] = False
        else:
            history.log_time += dt
        rec["train_time"], rec["log_time"] = history.train_time, history.log_time
        history.records.append(rec)
        if log is not None:
            log.append(rec)
        if callback is not None:
            callback(rec, nnx.merge(program.graphdef_eval, state.trainable, state.rest))

    if start == 0:
        record(0, 0.0, 0)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=start, desc="train", unit="step", leave=False)
    # One compiled scan length for the whole run: events and epoch ends are multiples of it.
    unit = math.gcd(spe, log_every, checkpoint_every)
    idx_sharding = None
    if mesh is not None:
        idx_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "data"))
    step, loss_sum, loss_count, first = start, 0.0, 0, True
    try:
        while step < total:
            epoch, j = divmod(step, spe)
            perm = epoch_order(jax.random.fold_in(data_key, epoch), n, spe, batch)
            stop = min((epoch + 1) * spe, total, (step // log_every + 1) * log_every)
            if checkpoint_every:
                stop = min(stop, (step // checkpoint_every + 1) * checkpoint_every)
            t0 = time.perf_counter()
            chunk_losses = []
            lengths = [unit] * ((stop - step) // unit) + _pieces((stop - step) % unit)
            for length in lengths:
                idx = perm[j : j + length]
                if idx_sharding is not None:
                    idx = jax.device_put(idx, idx_sharding)
                state, losses = run_jit(program, state, x, y, idx, aug_key, hp)
                chunk_losses.append(losses)
                j += length
                step += length
            losses = np.concatenate([np.asarray(v) for v in chunk_losses])
            dt = time.perf_counter() - t0
            if first:
                history.compile_time += dt
                first = False
            else:
                history.train_time += dt
            if not np.all(np.isfinite(losses)):
                raise _diverged(losses, step, config, ckpt)
            loss_sum += float(losses.sum())
            loss_count += len(losses)
            if bar is not None:
                bar.update(len(losses))
            if step % log_every == 0 or step == total:
                record(step, loss_sum, loss_count)
                loss_sum, loss_count = 0.0, 0
                if bar is not None and "test_acc" in history.final:
                    bar.set_postfix(test_acc=f"{history.final['test_acc']:.3f}")
            if (
                ckpt is not None
                and checkpoint_every
                and (step % checkpoint_every == 0 or step == total)
            ):
                t0 = time.perf_counter()
                ckpt.save(step, state)
                history.checkpoint_time += time.perf_counter() - t0
    finally:
        if bar is not None:
            bar.close()
        if ckpt is not None:
            ckpt.close()
    if not history.records or history.records[-1]["step"] != step:
        record(step, loss_sum, loss_count)
    return nnx.merge(program.graphdef_eval, state.trainable, state.rest), history


def _pieces(n: int) -> list[int]:
    """Binary decomposition of n (so at most log2(n)+1 distinct scan lengths get compiled)."""
    return [1 << b for b in reversed(range(n.bit_length())) if n >> b & 1]


def _diverged(losses: np.ndarray, step: int, config: TrainConfig, ckpt) -> TrainingDiverged:
    """The :class:`TrainingDiverged` for the first non-finite loss of a chunk ending at ``step``."""
    pos = int(np.argmin(np.isfinite(losses)))
    bad, value = step - len(losses) + pos, float(losses[pos])
    last = ckpt.latest_step() if ckpt is not None else None
    where = (
        f"last good checkpoint: step {last} in {ckpt.directory}"
        if last is not None
        else "no checkpoint was saved"
    )
    return TrainingDiverged(
        f"training loss became {value} at step {bad} (lr={config.lr}, "
        f"optimizer={config.optimizer}); lower the learning rate; {where}",
        step=bad,
        loss=value,
    )
