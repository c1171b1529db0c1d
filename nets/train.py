"""Training with optax: one entry point :func:`train`, a pure jitted step, the lazy/rich knobs.

The model is split into pytrees (``nnx.split``) around ``jax.jit``: the trainable parameters
(all ``nnx.Param`` for full backprop, only those under ``head`` for last-layer-only training),
the rest of the state (frozen parameters, BatchNorm statistics, dropout RNG) and the optimizer
state. An epoch is a ``lax.scan`` over minibatches gathered on device from a per-epoch
permutation, so the Python loop only runs at log/checkpoint points.

Randomness is a pure function of ``key`` and the step: the data order of epoch e uses
``fold_in(data_key, e)``, the augmentation of step s ``fold_in(aug_key, s)``; dropout draws from
the model's own RNG state, which is checkpointed. Hence resuming from a checkpoint reproduces
the uninterrupted run exactly.

Loss (seed 000 §2, App. F.4; thesis §6.4.3): MSE between ``output_scale · f(input_scale · x)``
and ``one_hot(y) · target_scale / target_downscale`` (PyTorch ``MSELoss``: mean over examples and
outputs), or cross-entropy on the same outputs.

Scale-out: ``data_parallel=True`` shards every minibatch over all local devices with
``jax.sharding`` (parameters replicated, gradients all-reduced by XLA); see :mod:`nets.parallel`
for multi-host runs with ``jax.distributed``. Batches are ``drop_last`` (every step has the
same shape); ``steps_per_epoch = n_train // batch_size``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from nets import knobs
from nets.augment import AUGMENTATIONS, augment_batch
from nets.checkpoint import Checkpointer
from nets.data.base import Dataset, validate
from nets.losses import LOSSES, cross_entropy, mse, targets
from nets.optim import learning_rate_schedule, make_optimizer


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Every knob that changes the training dynamics (defaults: plain SGD, MSE, one-hot targets).

    Attributes:
      loss: ``'mse'`` (one-hot × target scale, default) or ``'ce'``.
      target_scale: S, one-hot labels are multiplied by S (T Table 6.1 "target scale").
      target_downscale: α of seed 000 Fig 2b, targets y → y/α (larger α = lazier).
      input_scale: inputs x → s_in·x (T Table 6.1 "input scale"; float inputs only).
      output_scale: outputs f → s_out·f (T Table 6.1 "output scale"; seed 000 App. F "ε").
      weight_scale: initial parameters θ₀ → w·θ₀ (T Table 6.1 "weight scale").
      layer_balance: α of Kunin et al. App. D.3 (first layer ÷α, readout ×α).
      balance_first: dotted path of the first layer for ``layer_balance``.
      optimizer: ``'sgd'`` (heavy-ball momentum), ``'adam'`` or ``'adamw'`` (torch semantics).
      lr: base learning rate η.
      momentum: SGD momentum μ.
      b1, b2, eps: Adam moments and ε.
      weight_decay: λ (coupled L2 for sgd/adam, decoupled for adamw).
      schedule: ``'constant'``, ``'step'`` (× ``step_factor`` every ``step_every_epochs``) or
        ``'cosine'``.
      step_every_epochs, step_factor: the step schedule (seed 000: 60 epochs, 0.2).
      warmup_steps: linear warm-up from 0 over this many steps.
      batch_size: minibatch size B.
      epochs: number of epochs (ignored when ``steps`` is set).
      steps: total optimizer steps, overriding ``epochs``.
      last_layer_only: train only the readout ``head`` (the lazy baseline); features stay fixed.
      augment: ``'none'`` or ``'cifar'`` (random crop 32 with zero padding 4 + horizontal flip).
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

    def validate(self) -> TrainConfig:
        """Raise ``ValueError`` naming the first invalid field; returns ``self``."""
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; choose one of {LOSSES}")
        if self.augment not in AUGMENTATIONS:
            raise ValueError(f"unknown augment {self.augment!r}; choose one of {AUGMENTATIONS}")
        for name in ("target_scale", "target_downscale", "input_scale", "output_scale"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("weight_scale", "layer_balance"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.batch_size < 1 or self.epochs < 0 or (self.steps is not None and self.steps < 0):
            raise ValueError(
                f"need batch_size ≥ 1, epochs ≥ 0, steps ≥ 0; got {self.batch_size}, "
                f"{self.epochs}, {self.steps}"
            )
        return self


class TrainState(NamedTuple):
    """The pure training state (a pytree; stackable over seeds).

    Attributes:
      step: () int, optimizer steps taken.
      trainable: ``nnx.State`` of the parameters being trained.
      rest: ``nnx.State`` of everything else (frozen parameters, batch statistics, RNG state).
      opt_state: the optax state of ``trainable``.
    """

    step: jax.Array
    trainable: nnx.State
    rest: nnx.State
    opt_state: optax.OptState


@dataclasses.dataclass
class History:
    """What :func:`train` measured.

    Attributes:
      records: one dict per log point (``step``, ``epoch``, ``lr``, ``loss`` = mean training
        minibatch loss since the previous point, ``train_loss``/``train_acc`` and
        ``test_loss``/``test_acc`` on the fixed fit/eval subsets, one entry per metric, e.g.
        ``dlr_train``/``dlr_test``, and the cumulative ``train_time``/``log_time`` in seconds).
      train_time: seconds spent in training steps (excluding compilation of the first call).
      log_time: seconds spent computing the log records.
      compile_time: seconds of the first (compiling) call.
      checkpoint_time: seconds spent writing checkpoints.
      steps: total optimizer steps.
      resumed_from: step restored from a checkpoint, or None.
    """

    records: list[dict]
    train_time: float = 0.0
    log_time: float = 0.0
    compile_time: float = 0.0
    checkpoint_time: float = 0.0
    steps: int = 0
    resumed_from: int | None = None

    def column(self, key: str) -> np.ndarray:
        """The values of ``key`` over the log points, shape (n_records,) (NaN where missing)."""
        return np.array([r.get(key, np.nan) for r in self.records], dtype=float)

    @property
    def final(self) -> dict:
        """The last log record."""
        return self.records[-1]


class TrainingDiverged(FloatingPointError):
    """The training loss became NaN or infinite."""


def _trainable_filter(last_layer_only: bool):
    return nnx.All(nnx.Param, nnx.PathContains("head")) if last_layer_only else nnx.Param


def split_model(model: nnx.Module, config: TrainConfig) -> tuple[Any, Any, TrainState]:
    """Split ``model`` into (train graphdef, eval graphdef, initial :class:`TrainState`).

    The knobs ``weight_scale`` and ``layer_balance`` are applied here. The optimizer state is
    left empty (``None``); :func:`train` fills it.
    """
    if config.weight_scale != 1:
        model = knobs.scale_weights(model, config.weight_scale)
    if config.layer_balance != 1:
        model = knobs.balance_layers(model, config.layer_balance, first=config.balance_first)
    if not hasattr(model, "head"):
        raise ValueError(f"{type(model).__name__} has no readout attribute 'head'")
    filt = _trainable_filter(config.last_layer_only)
    model.eval()
    gd_eval, _, _ = nnx.split(model, filt, ...)
    model.train()
    gd_train, trainable, rest = nnx.split(model, filt, ...)
    model.eval()
    # Fresh buffers: the jitted runner donates its input state.
    trainable, rest = jax.tree.map(jnp.copy, (trainable, rest))
    return gd_train, gd_eval, TrainState(jnp.asarray(0, jnp.int32), trainable, rest, None)


class _Program(NamedTuple):
    run: Callable  # (state, x, y, idx (L, B), steps (L,), aug_key) -> (state, losses (L,))
    run_seeds: Callable  # run vmapped over (state, idx, aug_key)
    forward: Callable  # (trainable, rest, x) -> (features, outputs)
    tx: optax.GradientTransformation


_PROGRAMS: dict = {}


def _build_program(gd_train, gd_eval, config, num_classes, spe, total, mesh) -> _Program:
    cache_key = (gd_train, gd_eval, config, num_classes, spe, total, mesh)
    if cache_key in _PROGRAMS:
        return _PROGRAMS[cache_key]
    tx = make_optimizer(config, spe, total)
    filt = _trainable_filter(config.last_layer_only)
    t_scale = config.target_scale / config.target_downscale

    def loss_of(outputs, y):
        if config.loss == "ce":
            return cross_entropy(outputs, y)
        return mse(outputs, targets(y, num_classes, t_scale))

    def scale_in(x):
        if config.input_scale != 1 and jnp.issubdtype(x.dtype, jnp.floating):
            return x * config.input_scale
        return x

    def loss_fn(trainable, rest, xb, yb, key):
        model = nnx.merge(gd_train, trainable, rest, copy=True)
        xb = scale_in(augment_batch(config.augment, xb, key))
        outputs = config.output_scale * model(xb)
        _, _, new_rest = nnx.split(model, filt, ...)
        return loss_of(outputs, yb), new_rest

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
    batch_sharding = None
    if mesh is not None:
        batch_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))

    def run(state, x, y, idx, steps, aug_key):
        def body(st, inp):
            i, s = inp
            xb, yb = x[i], y[i]
            if batch_sharding is not None:
                xb = jax.lax.with_sharding_constraint(xb, batch_sharding)
                yb = jax.lax.with_sharding_constraint(yb, batch_sharding)
            (loss, rest), grads = grad_fn(
                st.trainable, st.rest, xb, yb, jax.random.fold_in(aug_key, s)
            )
            updates, opt_state = tx.update(grads, st.opt_state, st.trainable)
            trainable = optax.apply_updates(st.trainable, updates)
            return TrainState(st.step + 1, trainable, rest, opt_state), loss

        return jax.lax.scan(body, state, (idx, steps))

    def forward(trainable, rest, x):
        model = nnx.merge(gd_eval, trainable, rest)
        feats = model.features(scale_in(x))
        return feats, config.output_scale * model.head(feats)

    run_seeds = jax.vmap(run, in_axes=(0, None, None, 0, None, 0))
    prog = _Program(
        jax.jit(run, donate_argnums=0), jax.jit(run_seeds, donate_argnums=0), jax.jit(forward), tx
    )
    _PROGRAMS[cache_key] = prog
    return prog


def _pieces(n: int) -> list[int]:
    """Binary decomposition of n (so at most log2(n)+1 distinct scan lengths get compiled)."""
    return [1 << b for b in reversed(range(n.bit_length())) if n >> b & 1]


def _default_metrics() -> dict[str, Callable]:
    try:
        from metrics import dlr
    except ImportError:
        warnings.warn("metrics.dlr is unavailable; D_LR is not logged", stacklevel=3)
        return {}
    return {"dlr": lambda feats, outputs: float(dlr(feats, outputs))}


def _subset(x: np.ndarray, y: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    if size >= len(x):
        return x, y
    idx = np.sort(np.random.default_rng(0).choice(len(x), size=size, replace=False))
    return x[idx], y[idx]


class _JsonlLog:
    """Log records as JSON lines, the whole file rewritten atomically at each point."""

    def __init__(self, path: Path, keep_until: int | None):
        from lrrich.io import atomic_write_bytes

        self._write = atomic_write_bytes
        self.path = path
        self.lines: list[str] = []
        if keep_until is not None and path.exists():
            for line in path.read_text().splitlines():
                if line.strip() and json.loads(line)["step"] <= keep_until:
                    self.lines.append(line)

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.lines]

    def append(self, record: dict) -> None:
        from lrrich.io import _jsonable

        self.lines.append(json.dumps(_jsonable(record)))
        self._write(self.path, ("\n".join(self.lines) + "\n").encode())


def train(
    model: nnx.Module,
    data: Dataset,
    config: TrainConfig,
    *,
    key: jax.Array,
    log_every: int | None = None,
    eval_size: int = 2048,
    metrics: Mapping[str, Callable] | None = None,
    callback: Callable[[dict, nnx.Module], None] | None = None,
    run_dir: str | Path | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
    data_parallel: bool | jax.sharding.Mesh = False,
    progress: bool = True,
) -> tuple[nnx.Module, History]:
    r"""Train ``model`` on ``data`` with ``config``; returns the trained model and its history.

    Minimises :math:`\frac{1}{nC}\sum_{i,c}(s_{out} f_c(s_{in} x_i) - S e_{y_i,c}/\alpha)^2`
    (or cross-entropy) with the optimizer, schedule and knobs of ``config``; see the module
    docstring for the pure, jitted, resumable design.

    Args:
      model: an NNX model following the :mod:`nets` contract (``model(x)`` logits,
        ``model.features(x)`` Φ, readout ``head``); it is not modified.
      data: training/test arrays (:class:`nets.data.Dataset`).
      config: :class:`TrainConfig`.
      key: PRNG key of the data order and the augmentation (the model's init is the caller's).
      log_every: steps between log points (default: 10 points over the run); a point is also
        logged at step 0 and at the end.
      eval_size: size of the fixed fit (train) and eval (test) subsets used at log points.
      metrics: ``{name: fn(features, outputs) -> float}`` computed at log points on both
        subsets (keys ``name_train``, ``name_test``); default ``{"dlr": metrics.dlr}``.
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
      TrainingDiverged: the loss became NaN/inf (the last good checkpoint is kept).
      nets.checkpoint.CheckpointError: an unreadable checkpoint when resuming.
    """
    config.validate()
    validate(data)
    if (checkpoint_every or resume) and run_dir is None:
        raise ValueError("checkpoint_every/resume need a run_dir")
    if config.loss == "ce" and data.task != "classification":
        raise ValueError("loss='ce' needs a classification dataset")
    n = len(data.x_train)
    batch = config.batch_size
    if batch > n:
        raise ValueError(f"batch_size={batch} exceeds the {n} training examples")
    spe = n // batch
    total = config.steps if config.steps is not None else config.epochs * spe
    if log_every is None:  # ~10 points, on epoch boundaries when there are ≥ 10 epochs
        log_every = spe * (total // (10 * spe)) or max(total // 10, 1)
    log_every = int(log_every)
    if log_every < 1:
        raise ValueError(f"log_every must be ≥ 1, got {log_every}")

    mesh = None
    if data_parallel is True:
        mesh = jax.make_mesh(
            (jax.local_device_count(),), ("data",), axis_types=(jax.sharding.AxisType.Auto,)
        )
    elif isinstance(data_parallel, jax.sharding.Mesh):
        mesh = data_parallel
    if mesh is not None and batch % mesh.size:
        raise ValueError(f"batch_size={batch} is not divisible by the {mesh.size} devices")

    gd_train, gd_eval, state = split_model(model, config)
    prog = _build_program(gd_train, gd_eval, config, data.num_classes, spe, total, mesh)
    state = state._replace(opt_state=prog.tx.init(state.trainable))

    x, y = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
    if mesh is not None:
        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        x, y, state = jax.device_put((x, y, state), replicated)
    fit = _subset(data.x_train, data.y_train, eval_size)
    held = _subset(data.x_test, data.y_test, eval_size)
    chunk = min(1024, max(len(fit[0]), len(held[0])))
    metric_fns = _default_metrics() if metrics is None else dict(metrics)
    data_key, aug_key = jax.random.split(key)
    perm_fn = jax.jit(
        lambda e: (
            jax.random.permutation(jax.random.fold_in(data_key, e), n)[: spe * batch]
            .reshape(spe, batch)
            .astype(jnp.int32)
        )
    )
    schedule = learning_rate_schedule(config, spe, total)

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
    log = _JsonlLog(run_dir / "metrics.jsonl", start) if run_dir is not None else None
    history = History(records=log.records() if log else [], resumed_from=start or None)
    history.steps = total

    def record(step: int, loss_sum: float, loss_count: int) -> None:
        t0 = time.perf_counter()
        rec: dict[str, Any] = {"step": step, "epoch": step / spe, "lr": float(schedule(step))}
        rec["loss"] = loss_sum / loss_count if loss_count else math.nan
        for split, (xs, ys) in (("train", fit), ("test", held)):
            feats, outs = _forward_chunks(prog.forward, state, xs, chunk)
            rec.update(_loss_acc(split, np.asarray(outs), ys, config, data))
            for name, fn in metric_fns.items():
                rec[f"{name}_{split}"] = fn(feats, outs)
        history.log_time += time.perf_counter() - t0
        rec["train_time"], rec["log_time"] = history.train_time, history.log_time
        history.records.append(rec)
        if log is not None:
            log.append(rec)
        if callback is not None:
            callback(rec, nnx.merge(gd_eval, state.trainable, state.rest))

    if start == 0:
        record(0, 0.0, 0)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=start, desc="train", unit="step", leave=False)
    # One compiled scan length for the whole run: events and epoch ends are multiples of it.
    unit = math.gcd(spe, log_every, checkpoint_every)
    if mesh is not None:
        idx_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "data"))
    step, loss_sum, loss_count, first = start, 0.0, 0, True
    try:
        while step < total:
            epoch, j = divmod(step, spe)
            perm = perm_fn(epoch)
            stop = min((epoch + 1) * spe, total, (step // log_every + 1) * log_every)
            if checkpoint_every:
                stop = min(stop, (step // checkpoint_every + 1) * checkpoint_every)
            t0 = time.perf_counter()
            chunk_losses = []
            lengths = [unit] * ((stop - step) // unit) + _pieces((stop - step) % unit)
            for length in lengths:
                idx = perm[j : j + length]
                if mesh is not None:
                    idx = jax.device_put(idx, idx_sharding)
                steps = jnp.arange(step, step + length, dtype=jnp.int32)
                state, losses = prog.run(state, x, y, idx, steps, aug_key)
                chunk_losses.append(losses)
                j += length
                step += length
            losses = np.concatenate([np.asarray(v) for v in chunk_losses])
            dt = time.perf_counter() - t0
            if first:
                history.compile_time, first = dt, False
            else:
                history.train_time += dt
            if not np.all(np.isfinite(losses)):
                bad = step - len(losses) + int(np.argmin(np.isfinite(losses)))
                last = ckpt.latest_step() if ckpt is not None else None
                where = (
                    f"last good checkpoint: step {last} in {ckpt.directory}"
                    if last is not None
                    else "no checkpoint was saved"
                )
                raise TrainingDiverged(
                    f"training loss became {losses[~np.isfinite(losses)][0]} at step {bad} "
                    f"(lr={config.lr}, optimizer={config.optimizer}); lower the learning rate; "
                    f"{where}"
                )
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
    return nnx.merge(gd_eval, state.trainable, state.rest), history


def _loss_acc(split: str, outputs: np.ndarray, y: np.ndarray, config: TrainConfig, data) -> dict:
    """Loss (as trained) and accuracy on host, in float64."""
    outputs = outputs.astype(np.float64)
    if config.loss == "ce":
        z = outputs - outputs.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        loss = -np.mean(logp[np.arange(len(y)), y])
    else:
        scale = config.target_scale / config.target_downscale
        if data.task == "classification":
            t = scale * np.eye(data.num_classes)[y]
        else:
            t = scale * (y if y.ndim == 2 else y[:, None])
        loss = np.mean((outputs - t) ** 2)
    out = {f"{split}_loss": float(loss)}
    if data.task == "classification":
        out[f"{split}_acc"] = float(np.mean(outputs.argmax(axis=1) == y))
    return out


def _forward_chunks(forward, state: TrainState, x: np.ndarray, chunk: int = 1024):
    """Features and outputs of ``x`` in chunks of exactly ``chunk`` rows (the last one padded)."""
    feats, outs = [], []
    for i in range(0, len(x), chunk):
        xb = x[i : i + chunk]
        pad = chunk - len(xb)
        if pad:
            xb = np.concatenate([xb, np.repeat(xb[:1], pad, axis=0)])
        f, o = forward(state.trainable, state.rest, jnp.asarray(xb))
        feats.append(f[: len(xb) - pad])
        outs.append(o[: len(xb) - pad])
    return jnp.concatenate(feats), jnp.concatenate(outs)


def evaluate(model: nnx.Module, data: Dataset, config: TrainConfig | None = None) -> dict:
    """Loss and accuracy of ``model`` on the full train and test sets of ``data``.

    Args:
      model: a model following the :mod:`nets` contract.
      data: the dataset.
      config: the training config whose loss and scales define the loss (default
        ``TrainConfig()``).

    Returns:
      ``{"train_loss", "test_loss"}`` plus ``"train_acc", "test_acc"`` for classification.
    """
    config = (config or TrainConfig()).validate()
    gd_train, gd_eval, state = split_model(
        model, dataclasses.replace(config, weight_scale=1.0, layer_balance=1.0)
    )
    prog = _build_program(gd_train, gd_eval, config, data.num_classes, 1, 1, None)
    out = {}
    for split in ("train", "test"):
        xs, ys = getattr(data, f"x_{split}"), getattr(data, f"y_{split}")
        _, outs = _forward_chunks(prog.forward, state, xs)
        out.update(_loss_acc(split, np.asarray(outs), ys, config, data))
    return out
