"""The one training loop of nets: R runs of one compiled program, logged, checkpointed, resumable.

:func:`fit` is the loop; :func:`train` is its one-run case (optionally sharded over devices,
checkpointed, resumed) and :func:`nets.sweep.train_many` its stacked case (R runs of one
architecture as one ``jax.vmap``-ed program, split over several devices when there are).
The compiled work is :func:`nets.step.advance` (an on-device loop of the pure step over
minibatches gathered on device from a per-epoch permutation) and
:func:`nets.evaluate.log_values` (a whole log point on device); the loop only decides when to
call them, so Python runs at log and checkpoint points only.

The call chain from :func:`train` to the step::

    train(model, ...)              one run; train_many (nets.sweep) passes R runs
    └─ fit(models, ...)            checks, builds the runs (nets.step.build / build_many), folders
       └─ _loop(runs, ...)         per epoch: one permutation; per stop: log, checkpoint, divergence
          └─ Runs.advance          one dispatch per stop (the steps up to the next one)
             └─ nets.step.advance  the one compiled entry; mode "one" (one run), "vmap" (R runs
                │                  as one jax.vmap) or "map" (R runs one after another), each
                │                  device of a runs mesh taking its share of the R runs
                └─ fori_loop over the stop's steps (a traced count) → nets.step.step

Randomness is a pure function of ``key`` and the step: the data order of epoch e uses
``fold_in(data_key, e)``, the augmentation of step s ``fold_in(aug_key, s)``; dropout draws from
the model's own RNG state, which is checkpointed. Hence resuming from a checkpoint reproduces the
uninterrupted run exactly.

Scale-out: ``data_parallel=True`` shards every minibatch over all local devices with
``jax.sharding`` (parameters replicated, gradients all-reduced by XLA); see :mod:`nets.parallel`
for multi-host runs with ``jax.distributed``. Batches are ``drop_last`` (every step has the same
shape); ``steps_per_epoch = n_train // batch_size``.

The sweep batcher :mod:`nets.batch` stacks the ``train`` calls of several threads into one
:func:`fit`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nets import checks, rundir
from nets.checkpoint import Checkpointer
from nets.config import HParams, TrainConfig
from nets.data.base import Dataset, validate
from nets.evaluate import (
    EVAL_CHUNK,
    SPLITS,
    default_metric,
    features_and_outputs,
    freeze,
    freeze_many,
    frozen_features,
    log_values,
    log_values_many,
    shared_fields,
)
from nets.history import History, JsonlLog, TrainingDiverged
from nets.step import (
    RUNS_AXIS,
    Program,
    TrainState,
    advance,
    build,
    build_many,
    epoch_orders,
    forward,
    learning_rate,
    learning_rate_jit,
    runs_mesh,
)
from nets.xla_cpu import one_blas_thread

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


# ------------------------------------------------------------------------------------ the runs


_RUNS = jax.sharding.PartitionSpec(RUNS_AXIS)  # stacked along axis 0 over a runs mesh

_learning_rates = jax.jit(jax.vmap(learning_rate, in_axes=(None, 0, None)), static_argnums=0)


def _unstack(tree: Any, i: int) -> Any:
    return jax.tree.map(lambda a: a[i], tree)


def _run_shapes(tree: Any) -> Any:
    """The shapes of one run of a stacked ``tree`` (for ``jax.eval_shape``; nothing is sliced)."""
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), tree)


@jax.jit  # every run's slice in one dispatch (R × leaves eager slices cost ~2 ms a run)
def _unstack_all(tree: Any) -> list:
    return [_unstack(tree, i) for i in range(jax.tree.leaves(tree)[0].shape[0])]


@dataclasses.dataclass
class Runs:
    """R runs of one compiled program as the loop advances them.

    Attributes:
      program: the shared static half; state, hp: the :class:`TrainState` and
        :class:`~nets.config.HParams`, stacked along a leading axis R when ``stacked``;
      data_keys, aug_keys: the data-order and augmentation keys, (R,) when stacked;
      configs: the R configs; stacked: R runs in one program (else one run, possibly sharded);
      idx_sharding: how one run's minibatch indices are sharded over a device mesh, or None;
      vectorize: stacked runs train as a ``jax.vmap`` of the step (mode ``"vmap"`` of
        :func:`nets.step.advance`), else one after another in the program (``"map"``, bitwise
        = train on the CPU).
      mesh: the :func:`nets.step.runs_mesh` that stacked runs are split over (each device
        trains its share), or None (one device).
    """

    program: Program
    state: TrainState
    hp: HParams
    data_keys: jax.Array
    aug_keys: jax.Array
    configs: tuple[TrainConfig, ...]
    stacked: bool
    idx_sharding: jax.sharding.NamedSharding | None = None
    vectorize: bool = True
    mesh: jax.sharding.Mesh | None = None
    _placed: tuple | None = dataclasses.field(default=None, repr=False)

    @property
    def size(self) -> int:
        return len(self.configs)

    def order(self, epoch: int, n: int, spe: int, batch: int) -> jax.Array:
        """Minibatch indices of epoch ``epoch``: (spe, B), or (R, spe, B) when stacked."""
        if self.stacked:
            order = epoch_orders(self.data_keys, epoch, n, spe, batch)
            if self.mesh is None:
                return order
            return jax.device_put(order, jax.sharding.NamedSharding(self.mesh, _RUNS))
        order = epoch_orders(self.data_keys[None], epoch, n, spe, batch)[0]
        if self.idx_sharding is not None:  # each minibatch split over the devices
            order = jax.device_put(order, self.idx_sharding)
        return order

    def advance(self, x, y, order: jax.Array, j: int, count: int, length: int) -> jax.Array:
        """``count`` ≤ ``length`` steps from position ``j`` of the epoch, one dispatch; returns
        the (R, length) losses on device (NaN from ``count`` on)."""
        mode = ("vmap" if self.vectorize else "map") if self.stacked else "one"
        self.state, losses = advance(
            self.program, self.state, x, y, order, j, self.aug_keys, self.hp,
            length=length, mode=mode, mesh=self.mesh, count=count,
        )  # fmt: skip
        return losses if self.stacked else losses[None]

    def run(self, i: int) -> tuple[TrainState, HParams]:
        """The state and hyper-parameters of run i (on the first device when split over a mesh)."""
        if not self.stacked:
            return self.state, self.hp
        return self._gathered(_unstack(self.state, i), _unstack(self.hp, i))

    @functools.cached_property
    def shared_hparams(self) -> tuple[bool, ...] | None:
        """Per hyper-parameter field, whether every run has the same value: a vmapped log point
        takes those unbatched (:func:`nets.evaluate.shared_fields`); None unless ``vectorize``
        (one run after another stays bitwise each run's own)."""
        return shared_fields(self.configs) if self.vectorize else None

    def _shared(self, subsets: tuple) -> tuple:
        """The fixed log subsets replicated over the runs mesh (once per fit), else as given."""
        if self.mesh is None:
            return subsets
        if self._placed is None or self._placed[0] is not subsets:
            whole = jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec())
            self._placed = (subsets, jax.device_put(subsets, whole))
        return self._placed[1]

    def _gathered(self, *trees):
        """``trees`` on one device: the first of the runs mesh, if the runs are split over one."""
        if self.mesh is None:
            return trees
        return jax.device_put(trees, self.mesh.devices.flat[0])

    def model(self, i: int) -> nnx.Module:
        """Run i's model, in evaluation mode."""
        state, _ = self.run(i)
        return nnx.merge(self.program.graphdef_eval, state.trainable, state.rest)

    def models(self) -> list[nnx.Module]:
        """Every run's model, in evaluation mode."""
        if not self.stacked:
            return [self.model(0)]
        (stacked,) = self._gathered((self.state.trainable, self.state.rest))
        states = _unstack_all(stacked)
        return [nnx.merge(self.program.graphdef_eval, t, r) for t, r in states]

    def learning_rates(self, step: int) -> np.ndarray:
        """(R,) η(step) of the runs."""
        if self.stacked:
            return np.asarray(_learning_rates(self.program, self.hp, step))
        return np.asarray(learning_rate_jit(self.program, self.hp, step))[None]

    def freeze(self, subsets, chunk: int):
        """Features and frozen Gram statistics of the fit/eval subsets (see :func:`freeze`)."""
        if self.stacked:
            (fit_x, _), (held_x, _) = self._shared(subsets)
            return freeze_many(self.program, self.state, self.hp, fit_x, held_x, chunk, self.mesh)
        return freeze(self.program, self.state, self.hp, subsets[0][0], subsets[1][0], chunk)

    def log_values(self, subsets, traced, chunk: int, splits, known) -> dict[str, np.ndarray]:
        """One log point of every run on the host: ``{key: (R,) values}``."""
        if self.stacked:
            out = log_values_many(
                self.program, self.state, self.hp, *self._shared(subsets), traced, chunk, splits,
                known, self.mesh, self.shared_hparams,
            )  # fmt: skip
            return jax.device_get(out)
        feats, frozen = (None, None) if known is None else known
        out = log_values(
            self.program, self.state, self.hp, *subsets, traced, chunk, feats, frozen,
            metric_splits=splits,
        )  # fmt: skip
        return {k: np.asarray(v)[None] for k, v in jax.device_get(out).items()}


def _run_length(configs: Sequence[TrainConfig], n: int) -> tuple[int, int]:
    """(steps_per_epoch, total_steps) shared by ``configs``; ValueError when they differ."""
    spe, total = run_length(configs[0], n)
    for i, c in enumerate(configs[1:], 1):
        spe_i, total_i = run_length(c, n)
        if (spe_i, total_i) != (spe, total):
            raise ValueError(
                f"configs[{i}] trains {total_i} steps ({_length(c, spe_i)}) but configs[0] "
                f"trains {total} ({_length(configs[0], spe)}); the runs of one program share "
                "their length and batch size"
            )
    return spe, total


def _length(c: TrainConfig, spe: int) -> str:
    return f"batch_size={c.batch_size}, {spe} per epoch, epochs={c.epochs}, steps={c.steps}"


def _mismatch(program: Program, other: Program, i: int) -> str:
    """Why run i cannot share run 0's compiled program."""
    if other.graphdef_train != program.graphdef_train:
        return f"models[{i}] has another structure than models[0]; the runs need one architecture"
    for field in TrainConfig.__dataclass_fields__:
        a, b = getattr(program.config, field), getattr(other.config, field)
        if a != b:
            return (
                f"configs[{i}].{field} = {b!r} differs from configs[0].{field} = {a!r}; only "
                "traced hyper-parameters (nets.HParams fields) and weight_scale/layer_balance "
                "may differ between the runs of one program"
            )
    return f"run {i} differs from run 0 ({other} vs {program})"


def _build_runs(
    models, data: Dataset, configs, keys, *, stacked: bool, mesh, devices=None
) -> tuple[Runs, int]:
    """The :class:`Runs` of ``models`` and their steps per epoch (checks that they fit together);
    stacked runs are split over the :func:`~nets.step.runs_mesh` of ``devices``."""
    if not stacked and len(models) != 1:
        raise ValueError(f"an unstacked fit trains one run, got {len(models)}")
    validate(checks.check_dataset(data))
    checks.check_configs(configs)
    for c in configs:
        if c.loss == "ce" and data.task != "classification":
            raise ValueError("loss='ce' needs a classification dataset")
    checks.check_inputs(models[0], data, configs)
    spe, total = _run_length(configs, len(data.x_train))
    if mesh is not None and configs[0].batch_size % mesh.size:
        raise ValueError(
            f"batch_size={configs[0].batch_size} is not divisible by the {mesh.size} devices"
        )
    clock = dict(num_classes=data.num_classes, steps_per_epoch=spe, total_steps=total)
    if not stacked:
        program, state, hp = build(models[0], configs[0], mesh=mesh, **clock)
        checks.check_output_width(program, state, hp, data)
        data_key, aug_key = jax.random.split(keys[0])
        sharding = None
        if mesh is not None:
            sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "data"))
        return Runs(program, state, hp, data_key, aug_key, tuple(configs), False, sharding), spe
    program, state, hp, bad = build_many(models, configs, **clock)
    if bad is not None:  # state and hp are run 0's alone
        checks.check_output_width(program, state, hp, data)
        raise ValueError(_mismatch(program, build(models[bad], configs[bad], **clock)[0], bad))
    checks.check_output_width(program, *_run_shapes((state, hp)), data)
    keys = _split_keys(jnp.stack(keys))
    split = runs_mesh(len(models), devices)
    if split is not None:
        over = jax.sharding.NamedSharding(split, _RUNS)
        state, hp, keys = jax.device_put((state, hp, keys), over)
    return Runs(program, state, hp, keys[:, 0], keys[:, 1], tuple(configs), True, mesh=split), spe


_split_keys = jax.jit(jax.vmap(jax.random.split))  # R data/augmentation key pairs, one dispatch


# ----------------------------------------------------------------------------------- log points


@dataclasses.dataclass
class _Logger:
    """Writes the log points of every live run into its History (and ``metrics.jsonl``)."""

    histories: list[History]
    logs: list[JsonlLog | None]
    subsets: tuple
    traced: tuple
    host: tuple
    chunk: int
    splits: tuple[str, ...]
    steps_per_epoch: int
    callback: Callable[[dict, nnx.Module], None] | None
    cache: bool  # Φ cannot change (lazy training without batch statistics): compute it once
    known: Any = None
    first: bool = True

    def record(self, runs: Runs, step: int, alive: np.ndarray, sums: np.ndarray, count: int):
        t0 = time.perf_counter()
        if self.cache and self.known is None:
            self.known = runs.freeze(self.subsets, self.chunk)
        values = runs.log_values(self.subsets, self.traced, self.chunk, self.splits, self.known)
        lrs = runs.learning_rates(step)
        new = {}
        for i in np.flatnonzero(alive):
            host_values = {}
            if self.host:
                state, hp = runs.run(i)
                host_values = host_metric_values(
                    runs.program, state, hp, self.subsets, self.host, self.chunk, self.splits
                )
            new[i] = {
                "step": step,
                "epoch": step / self.steps_per_epoch,
                "lr": float(lrs[i]),
                "loss": sums[i] / count if count else math.nan,
                **record_values({k: v[i] for k, v in values.items()}, host_values),
            }
        dt = (time.perf_counter() - t0) / runs.size  # each run's share of the log point
        for i, rec in new.items():
            h = self.histories[i]
            if self.first:
                h.compile_time += dt
            else:
                h.log_time += dt
            rec["train_time"], rec["log_time"] = h.train_time, h.log_time
            h.records.append(rec)
            if self.logs[i] is not None:
                self.logs[i].append(rec)
            if self.callback is not None:
                self.callback(rec, runs.model(i))
        self.first = False


def _logger(runs: Runs, data: Dataset, histories, logs, *, eval_size, metrics, metric_splits,
            callback, steps_per_epoch: int) -> _Logger:  # fmt: skip
    """The :class:`_Logger` of ``runs``: fixed subsets, metric functions split traced/host."""
    if eval_size < 2:
        raise ValueError(f"eval_size must be ≥ 2, got {eval_size}")
    subsets = tuple(
        tuple(jnp.asarray(a) for a in eval_subset(xs, ys, eval_size))
        for xs, ys in ((data.x_train, data.y_train), (data.x_test, data.y_test))
    )
    chunk = min(EVAL_CHUNK, max(len(s[0]) for s in subsets))
    metric_fns = {"dlr": default_metric} if metrics is None else dict(metrics)
    state, hp = _run_shapes((runs.state, runs.hp)) if runs.stacked else (runs.state, runs.hp)
    f_struct, o_struct = jax.eval_shape(
        lambda s, h, xs: forward(runs.program, s, xs, h), state, hp, subsets[0][0]
    )
    traced, host = split_metrics(metric_fns, f_struct, o_struct)
    cache = frozen_features(runs.program, state)
    return _Logger(histories, logs, subsets, traced, host, chunk, metric_splits,
                   steps_per_epoch, callback, cache)  # fmt: skip


# ------------------------------------------------------------------------------------ the loop


@dataclasses.dataclass(frozen=True)
class _Clock:
    """When the loop stops: epoch ends, log points, checkpoints (all in optimizer steps)."""

    n: int
    batch: int
    steps_per_epoch: int
    total: int
    log_every: int
    checkpoint_every: int

    def next_stop(self, step: int) -> int:
        spe, every = self.steps_per_epoch, self.log_every
        stop = min((step // spe + 1) * spe, self.total, (step // every + 1) * every)
        if self.checkpoint_every:
            stop = min(stop, (step // self.checkpoint_every + 1) * self.checkpoint_every)
        return stop

    @property
    def chunk(self) -> int:
        """The most steps between two stops: the static length of the one compiled step loop."""
        periods = (self.steps_per_epoch, self.log_every, self.checkpoint_every or self.total)
        return min(*periods, self.total)


# Initialisations assume inputs of order 1 (LeCun/He scaling); inputs beyond this overflow the
# float32 loss of an untrained network long before any learning rate matters.
_HUGE_INPUT = 1e4


def _diverged(losses: np.ndarray, step: int, config: TrainConfig, ckpt, x) -> TrainingDiverged:
    """The :class:`TrainingDiverged` for the first non-finite loss of a chunk ending at ``step``.

    A loss that is non-finite at step 0 came before any update, so the message names the inputs
    (their largest magnitude, ``x`` the training inputs) instead of the learning rate.
    """
    pos = int(np.argmin(np.isfinite(losses)))
    bad, value = step - len(losses) + pos, float(losses[pos])
    last = ckpt.latest_step() if ckpt is not None else None
    where = (
        f"last good checkpoint: step {last} in {ckpt.directory}"
        if last is not None
        else "no checkpoint was saved"
    )
    if bad == 0:
        biggest = float(jnp.max(jnp.abs(x.astype(jnp.float32)))) * config.input_scale
        cause = (
            f"the inputs are huge (largest |input_scale·x| = {biggest:.3g}): rescale them to "
            "order 1, e.g. standardise x"
            if not biggest <= _HUGE_INPUT
            else "check the inputs and the initial scale (weight_scale, layer_balance, "
            "output_scale)"
        )
        message = (
            f"training loss was {value} at step 0, before any update, so the learning rate is "
            f"not the cause: the untrained model's loss is not finite; {cause}; {where}"
        )
    else:
        message = (
            f"training loss became {value} at step {bad} (lr={config.lr}, "
            f"optimizer={config.optimizer}); lower the learning rate; {where}"
        )
    return TrainingDiverged(message, step=bad, loss=value)


def _loop(runs: Runs, x, y, clock: _Clock, logger: _Logger, start: int, ckpt, bar) -> None:
    """Train ``runs`` from step ``start`` to the end; a run whose loss turns non-finite stops
    (its History's ``diverged``) and the others go on."""
    histories, R = logger.histories, runs.size
    alive = np.array([h.diverged is None for h in histories])
    sums, count, step, first = np.zeros(R), 0, start, True
    if start == 0:
        logger.record(runs, 0, alive, sums, 0)
    perm_epoch, perm = None, None
    while step < clock.total and alive.any():
        epoch, j = divmod(step, clock.steps_per_epoch)
        if epoch != perm_epoch:  # one permutation per epoch, however many stops it has
            perm_epoch, perm = epoch, runs.order(epoch, clock.n, clock.steps_per_epoch, clock.batch)
        t0 = time.perf_counter()
        count = clock.next_stop(step) - step
        losses = np.asarray(runs.advance(x, y, perm, j, count, clock.chunk))[:, :count]
        step += count
        dt = (time.perf_counter() - t0) / R  # each run's share of the program
        for h in histories:
            if first:
                h.compile_time += dt
            else:
                h.train_time += dt
        first = False
        finite = np.isfinite(losses).all(axis=1)
        for i in np.flatnonzero(alive & ~finite):
            histories[i].diverged = _diverged(losses[i], step, runs.configs[i], ckpt, x)
            alive[i] = False
        if not alive.any():
            return
        sums += np.where(finite, losses.sum(axis=1), 0.0)
        count += losses.shape[1]
        if bar is not None:
            bar.update(losses.shape[1])
        if step % clock.log_every == 0 or step == clock.total:
            logger.record(runs, step, alive, sums, count)
            sums[:], count = 0.0, 0
            if bar is not None and R == 1 and "test_acc" in histories[0].final:
                bar.set_postfix(test_acc=f"{histories[0].final['test_acc']:.3f}")
        if (
            ckpt is not None
            and clock.checkpoint_every
            and (step % clock.checkpoint_every == 0 or step == clock.total)
        ):
            t0 = time.perf_counter()
            ckpt.save(step, runs.state)
            histories[0].checkpoint_time += time.perf_counter() - t0
    live = np.flatnonzero(alive)
    if live.size and (not histories[live[0]].records or histories[live[0]].final["step"] != step):
        logger.record(runs, step, alive, sums, count)


def _place_data(runs: Runs, data: Dataset, mesh) -> tuple[jax.Array, jax.Array]:
    """The training set on device, on every device of a data or runs mesh (with a data mesh,
    the replicated ``runs.state`` too)."""
    x, y = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
    whole = jax.sharding.PartitionSpec()
    if mesh is not None:
        x, y, runs.state = jax.device_put(
            (x, y, runs.state), jax.sharding.NamedSharding(mesh, whole)
        )
    elif runs.mesh is not None:
        x, y = jax.device_put((x, y), jax.sharding.NamedSharding(runs.mesh, whole))
    return x, y


def _check_fit(models, data, configs, keys, run_dirs, stacked: bool, *, checkpoint: bool):
    """``fit``'s per-run arguments as lists of one length (ValueError/TypeError otherwise)."""
    checks.check_dataset(data)
    models, configs, keys = list(models), list(configs), list(keys)
    if not (len(models) == len(configs) == len(keys)) or not models:
        raise ValueError(
            f"models, configs and keys must have the same length ≥ 1, got {len(models)}, "
            f"{len(configs)}, {len(keys)}"
        )
    for i, k in enumerate(keys):
        checks.check_key(k, "key" if not stacked else f"keys[{i}]")
    run_dirs = [None] * len(models) if run_dirs is None else [d and Path(d) for d in run_dirs]
    if checkpoint and (len(models) > 1 or run_dirs[0] is None):
        raise ValueError("checkpoint_every/resume need one run and a run_dir")
    return models, configs, keys, run_dirs


def _open_run_dirs(runs: Runs, run_dirs, models, data, keys, *, checkpoint_every, resume):
    """Check and claim the run folders, restore a checkpoint: (start, checkpointer, histories, logs).

    A folder holds one run (its identity is recorded); a fresh start begins a new
    ``metrics.jsonl``, a resume keeps the records up to its checkpoint and restores
    ``runs.state`` in place.
    """
    identities = [
        None if d is None else rundir.run_identity(m, data, c, k)
        for d, m, c, k in zip(run_dirs, models, runs.configs, keys, strict=True)
    ]
    for d, identity in zip(run_dirs, identities, strict=True):
        if d is not None:
            d.mkdir(parents=True, exist_ok=True)
            rundir.check_folder(d, identity)
    if checkpoint_every and not resume and rundir.has_checkpoints(run_dirs[0]):
        raise ValueError(
            f"{run_dirs[0]} already holds checkpoints of this run; pass resume=True to continue "
            f"it, or delete {run_dirs[0] / rundir.CHECKPOINTS} to train it again from step 0"
        )
    start, ckpt = 0, None
    if checkpoint_every or resume:
        ckpt = Checkpointer(run_dirs[0] / rundir.CHECKPOINTS)
        if resume and ckpt.latest_step() is not None:
            sharding = jax.tree.leaves(runs.state)[0].sharding
            start, state = ckpt.restore(runs.state)
            runs.state = jax.device_put(state, sharding) if runs.program.mesh else state
    for d, identity in zip(run_dirs, identities, strict=True):
        if d is not None:
            rundir.record(d, identity)
    logs = [
        JsonlLog(d / "metrics.jsonl", start or None) if d is not None else None for d in run_dirs
    ]
    histories = [
        History(log.records() if log else [], steps=runs.program.total_steps,
                resumed_from=start or None, runs_in_program=runs.size)
        for log in logs
    ]  # fmt: skip
    return start, ckpt, histories, logs


@one_blas_thread()
def fit(
    models: Sequence[nnx.Module],
    data: Dataset,
    configs: Sequence[TrainConfig],
    keys: Sequence[jax.Array],
    *,
    stacked: bool,
    log_every: int | None = None,
    eval_size: int = 2048,
    metrics: Mapping[str, Callable] | None = None,
    metric_splits: Sequence[str] = SPLITS,
    callback: Callable[[dict, nnx.Module], None] | None = None,
    run_dirs: Sequence[str | Path | None] | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
    mesh: jax.sharding.Mesh | None = None,
    progress: bool = False,
    vectorize: bool = True,
    devices: int | None = None,
) -> tuple[list[nnx.Module], list[History]]:
    """Train R runs of one program with one loop (the engine of :func:`train` and ``train_many``).

    Args:
      models, configs, keys: R models of one architecture, their configs (differing only in
        traced fields and the initial-parameter knobs) and PRNG keys of data order/augmentation.
      data: the dataset, shared by all runs.
      stacked: train the runs as one ``vmap``-ed program (else exactly one run).
      log_every, eval_size, metrics, metric_splits, callback, progress: as :func:`train`.
      run_dirs: per run, a folder for ``metrics.jsonl`` (and, with one run, ``checkpoints/``).
      checkpoint_every, resume: as :func:`train`; one run only.
      mesh: shard the minibatches of one unstacked run over this 1-D ``('data',)`` mesh.
      vectorize: stacked runs step as one ``jax.vmap`` (batched GEMMs; float32 sums reordered,
        so run i equals its own :func:`train` to round-off only); False: one after another in
        the same program (``lax.map``): run i equals its own :func:`train` bitwise on the CPU
        (to round-off on a GPU: :data:`nets.step.MODES`).
      devices: split stacked runs over at most this many local devices (default: all), each
        training its share (:func:`nets.step.runs_mesh`); each run's arithmetic is unchanged.

    Returns:
      (R trained models in eval mode, R :class:`History`; times are each run's share, 1/R, of
      the program's). A run whose loss became non-finite has ``History.diverged`` set and stops
      being logged; the others go on.
    """
    models, configs, keys, run_dirs = _check_fit(
        models, data, configs, keys, run_dirs, stacked, checkpoint=bool(checkpoint_every or resume)
    )
    metric_splits = check_metric_splits(metric_splits)
    runs, spe = _build_runs(
        models, data, configs, keys, stacked=stacked, mesh=mesh, devices=devices
    )
    runs.vectorize = vectorize
    total = runs.program.total_steps
    log_every = int(default_log_every(spe, total) if log_every is None else log_every)
    if log_every < 1:
        raise ValueError(f"log_every must be ≥ 1, got {log_every}")
    x, y = _place_data(runs, data, mesh)
    start, ckpt, histories, logs = _open_run_dirs(
        runs, run_dirs, models, data, keys, checkpoint_every=checkpoint_every, resume=resume
    )
    logger = _logger(runs, data, histories, logs, eval_size=eval_size, metrics=metrics,
                     metric_splits=metric_splits, callback=callback, steps_per_epoch=spe)  # fmt: skip
    clock = _Clock(len(data.x_train), configs[0].batch_size, spe, total, log_every,
                   checkpoint_every)  # fmt: skip
    bar = None
    if progress:
        from tqdm.auto import tqdm

        desc = "train" if runs.size == 1 else f"train ×{runs.size}"
        bar = tqdm(total=total, initial=start, desc=desc, unit="step", leave=False)
    try:
        _loop(runs, x, y, clock, logger, start, ckpt, bar)
    finally:
        if bar is not None:
            bar.close()
        if ckpt is not None:
            ckpt.close()
    return runs.models(), histories


# ------------------------------------------------------------------------------- one run: train


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
    (or cross-entropy) with the optimizer, schedule and knobs of ``config`` (D §2, App. F.4;
    T §6.4.3); see :mod:`nets.step` for the pure step and the module docstring for the
    resumable loop (:func:`fit` with one run).

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
    checks.check_dataset(data)
    checks.check_config(config)
    checks.check_key(key)
    mesh = data_parallel if isinstance(data_parallel, jax.sharding.Mesh) else None
    if data_parallel is True:
        auto = (jax.sharding.AxisType.Auto,)
        mesh = jax.make_mesh((jax.local_device_count(),), ("data",), axis_types=auto)
    models, (history,) = fit(
        [model], data, [config], [key], stacked=False, log_every=log_every,
        eval_size=eval_size, metrics=metrics, metric_splits=metric_splits, callback=callback,
        run_dirs=[run_dir], checkpoint_every=checkpoint_every, resume=resume, mesh=mesh,
        progress=progress,
    )  # fmt: skip
    if history.diverged is not None:
        raise history.diverged
    return models[0], history
