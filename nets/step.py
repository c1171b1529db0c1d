r"""The pure training step: ``Program.init(model) -> state``, ``step(program, state, batch, hp)``.

A :class:`Program` is the static half of a run — the model's structure (``nnx.GraphDef``) and the
static fields of the config — and is hashable, so it is a static argument of ``jax.jit`` and jax's
own compilation cache keys the compiled programs: runs that differ only in the traced
:class:`~nets.config.HParams` (learning rate, momentum, weight decay, scales) reuse one program.
The training state is a :class:`TrainState` pytree; stacking states and hyper-parameters along a
leading axis and ``jax.vmap``-ing the loop of steps trains many runs as one program
(:func:`advance`, the one compiled entry of :func:`nets.loop.fit`; :func:`run` is the same loop
as a ``lax.scan`` over given minibatch indices).

Loss (D §2, App. F.4; T §6.4.3): MSE between ``output_scale · f(input_scale · x)`` and
``one_hot(y) · target_scale / target_downscale`` (PyTorch ``MSELoss``: mean over examples and
outputs), or cross-entropy on the same outputs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from nets import knobs, xla_cpu
from nets.augment import augment_batch
from nets.config import HParams, TrainConfig, hparams, static_part
from nets.losses import cross_entropy, mse, targets
from nets.optim import optimizer, schedule_factor


class TrainState(NamedTuple):
    """The pure training state (a pytree; stackable over runs).

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


class Batch(NamedTuple):
    """One minibatch: inputs x (B, ...), labels or targets y (B,) / (B, k), augmentation key.

    ``weights`` (B,), optional, weight the examples of the loss (normalised to sum 1), e.g. a
    padding mask when a training set smaller than B is used full-batch.
    """

    x: jax.Array
    y: jax.Array
    key: jax.Array
    weights: jax.Array | None = None


def _trainable_filter(last_layer_only: bool):
    return nnx.All(nnx.Param, nnx.PathContains("head")) if last_layer_only else nnx.Param


@dataclasses.dataclass(frozen=True)
class Program:
    """The static half of a training run (hashable: a static argument of the jitted functions).

    Attributes:
      graphdef_train, graphdef_eval: the model structure in training / evaluation mode.
      config: the static part of the :class:`~nets.config.TrainConfig` (``static_part``).
      num_classes: C, the width of the one-hot targets.
      steps_per_epoch: optimizer steps per epoch (the step schedule's clock).
      total_steps: optimizer steps of the run (the cosine schedule's horizon).
      mesh: a 1-D ``('data',)`` mesh to shard minibatches over, or None.
      cpu_options: its programs compile with :data:`nets.xla_cpu.CPU_OPTIONS` on CPU (set by
        :func:`nets.xla_cpu.tune` in :func:`build`: convolutional models).
    """

    graphdef_train: Any
    graphdef_eval: Any
    config: TrainConfig
    num_classes: int
    steps_per_epoch: int
    total_steps: int
    mesh: jax.sharding.Mesh | None = None
    cpu_options: bool = False

    def __hash__(self) -> int:
        # Every call of a jitted function hashes its static arguments; hashing the two graphdefs
        # is a noticeable share of a small MLP's step (benchmarks/bench_training.py): keep it.
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self)))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict:
        # str hashes differ between processes: a copy or an unpickled Program rehashes
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def init(self, model: nnx.Module, hp: HParams) -> TrainState:
        """The initial :class:`TrainState` of ``model`` (already scaled/balanced, see :func:`build`).

        Args:
          model: a model of this program's structure (not modified).
          hp: :class:`~nets.config.HParams` (only their structure shapes the optimizer state).

        Returns:
          :class:`TrainState` at step 0 with fresh copies of the parameters.
        """
        filt = _trainable_filter(self.config.last_layer_only)
        model.train()
        _, trainable, rest = nnx.split(model, filt, ...)
        model.eval()
        # Fresh buffers: the jitted runner donates its input state.
        trainable, rest = jax.tree.map(jnp.copy, (trainable, rest))
        opt_state = _optimizer(self, hp, hp.lr).init(trainable)
        return TrainState(jnp.asarray(0, jnp.int32), trainable, rest, opt_state)


def build(
    model: nnx.Module,
    config: TrainConfig,
    *,
    num_classes: int,
    steps_per_epoch: int,
    total_steps: int,
    mesh: jax.sharding.Mesh | None = None,
) -> tuple[Program, TrainState, HParams]:
    """The :class:`Program`, initial :class:`TrainState` and :class:`HParams` of one run.

    Applies the knobs acting on the initial parameters (``weight_scale``: θ₀ → wθ₀, T Table 6.1;
    ``layer_balance``: Kunin et al. App. D.3) to a copy of ``model``.

    Args:
      model: an NNX model with ``features``, ``head`` (not modified).
      config: the training config.
      num_classes: C; steps_per_epoch, total_steps: the run's clock; mesh: data-parallel mesh.

    Returns:
      (program, state, hparams); hparams have the dtype of the trained parameters.
    """
    original = model
    config.validate()
    model = _with_knobs(model, config)
    if model is original:
        model = nnx.merge(*nnx.split(model))  # a copy: train()/eval() flip flags in place
    if not hasattr(model, "head"):
        raise ValueError(f"{type(model).__name__} has no readout attribute 'head'")
    filt = _trainable_filter(config.last_layer_only)
    model.eval()
    gd_eval, trainable, _ = nnx.split(model, filt, ...)
    model.train()
    trained, cpu_options = xla_cpu.tune(model)  # every XLA:CPU workaround of the run, in one call
    gd_train, _, _ = nnx.split(trained, filt, ...)
    model.eval()
    leaves = jax.tree.leaves(trainable)
    if not leaves:
        raise ValueError(f"{type(model).__name__} has no trainable parameters")
    dtype = jnp.result_type(*leaves)
    program = Program(
        gd_train,
        gd_eval,
        static_part(config),
        int(num_classes),
        int(steps_per_epoch),
        int(total_steps),
        mesh,
        cpu_options,
    )
    hp = hparams(config, dtype)
    return program, program.init(model, hp), hp


def build_many(
    models: Sequence[nnx.Module],
    configs: Sequence[TrainConfig],
    *,
    num_classes: int,
    steps_per_epoch: int,
    total_steps: int,
) -> tuple[Program, TrainState, HParams, int | None]:
    """:func:`build` of R runs of one program at once: their states and hparams stacked (axis 0).

    Run 0 is built by :func:`build`; the others only have their knobs applied and their
    parameters split out, and one compiled call stacks the R states and initialises their
    optimizers. Each run's values are exactly those :func:`build` gives it alone.

    Args:
      models, configs: R models and configs (not modified); the rest as :func:`build`.

    Returns:
      (program, stacked state, stacked hparams, the index of the first run that cannot share
      run 0's program — another structure or static config — or None).
    """
    program, state0, hp0 = build(
        models[0], configs[0], num_classes=num_classes, steps_per_epoch=steps_per_epoch,
        total_steps=total_steps,
    )  # fmt: skip
    graphdef, static = nnx.graphdef(models[0]), static_part(configs[0])
    filt = _trainable_filter(program.config.last_layer_only)
    parts = [(state0.trainable, state0.rest)]
    for i, (model, config) in enumerate(zip(models[1:], configs[1:], strict=True), 1):
        if static_part(config) != static:
            return program, state0, hp0, i
        config.validate()
        other, *part = nnx.split(_with_knobs(model, config), filt, ...)  # one flatten per run
        if other != graphdef:  # the knobs rescale values, never the structure
            return program, state0, hp0, i
        parts.append(tuple(part))
    dtype = hp0.lr.dtype
    hp = HParams(*(np.asarray([getattr(c, f) for c in configs], dtype) for f in HParams._fields))
    trainable, rest, opt_state, hp = _stack_init(program, parts, hp)
    steps = jnp.zeros(len(parts), jnp.int32)
    return program, TrainState(steps, trainable, rest, opt_state), hp, None


@functools.partial(jax.jit, static_argnums=0)  # one dispatch for all R runs
def _stack_init(program: Program, parts: list, hp: HParams):
    trainable, rest = jax.tree.map(lambda *a: jnp.stack(a), *parts)
    opt_state = jax.vmap(lambda t, h: _optimizer(program, h, h.lr).init(t))(trainable, hp)
    return trainable, rest, opt_state, hp


def _with_knobs(model: nnx.Module, config: TrainConfig) -> nnx.Module:
    """``model`` with the initial-parameter knobs of ``config`` applied (a copy), or ``model``."""
    if config.weight_scale != 1:
        model = knobs.scale_weights(model, config.weight_scale)
    if config.layer_balance != 1:
        model = knobs.balance_layers(model, config.layer_balance, first=config.balance_first)
    return model


def _optimizer(program: Program, hp: HParams, lr) -> optax.GradientTransformation:
    return optimizer(
        program.config.optimizer,
        lr,
        momentum=hp.momentum,
        b1=hp.b1,
        b2=hp.b2,
        eps=hp.eps,
        weight_decay=hp.weight_decay,
        nesterov=program.config.nesterov,
    )


def learning_rate(program: Program, hp: HParams, step: jax.Array) -> jax.Array:
    r"""The learning rate :math:`\eta(s) = \eta\,\mathrm{factor}(s)` at optimizer step ``step``.

    Args:
      program: the static half (schedule kind, clock); hp: traced η and step factor γ;
      step: () int, the step s (traced or not).

    Returns:
      () η(s) in the dtype of ``hp.lr`` (see :func:`nets.optim.schedule_factor`).
    """
    c = program.config
    return hp.lr * schedule_factor(
        c.schedule,
        step,
        steps_per_epoch=program.steps_per_epoch,
        total_steps=program.total_steps,
        warmup_steps=c.warmup_steps,
        step_every_epochs=c.step_every_epochs,
        step_factor=hp.step_factor,
    ).astype(hp.lr.dtype)


def scale_inputs(x: jax.Array, hp: HParams) -> jax.Array:
    """Input scaling x → s_in·x (T Table 6.1) for float inputs; token ids are left alone.

    Args:
      x: inputs (n, ...); hp: :class:`~nets.config.HParams` (``input_scale`` s_in).

    Returns:
      scaled x, same shape and dtype.
    """
    if jnp.issubdtype(x.dtype, jnp.floating):
        return x * hp.input_scale.astype(x.dtype)
    return x


def loss_value(
    program: Program,
    outputs: jax.Array,
    y: jax.Array,
    hp: HParams,
    weights: jax.Array | None = None,
) -> jax.Array:
    r"""The training loss of ``outputs`` (already × s_out): MSE to S·e_y/α, or cross-entropy.

    Args:
      program: the static half (loss kind, C); outputs: (n, C); y: labels (n,) or targets;
      hp: :class:`~nets.config.HParams` (S, α); weights: optional (n,) example weights.

    Returns:
      () loss.
    """
    if program.config.loss == "ce":
        return cross_entropy(outputs, y, weights)
    scale = (hp.target_scale / hp.target_downscale).astype(outputs.dtype)
    return mse(outputs, targets(y, program.num_classes, scale), weights)


def _compute_cast(program: Program, tree):
    if program.config.compute_dtype == "float32":
        return tree
    low = jnp.dtype(program.config.compute_dtype)
    return jax.tree.map(
        lambda a: a.astype(low) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree
    )


def step(
    program: Program, state: TrainState, batch: Batch, hp: HParams
) -> tuple[TrainState, jax.Array]:
    r"""One optimizer step: :math:`\theta \leftarrow \mathrm{opt}(\theta, \nabla_\theta L(\theta; B), \eta(s))`.

    Pure: the new state depends only on the arguments (dropout draws from the RNG state inside
    ``state.rest``; augmentation from ``batch.key``).

    Args:
      program: the static half (hashable).
      state: :class:`TrainState`.
      batch: :class:`Batch`.
      hp: :class:`~nets.config.HParams` (traced).

    Returns:
      (new state, () minibatch loss before the update).
    """
    xb, yb = batch.x, batch.y
    if program.mesh is not None:
        shard = jax.sharding.NamedSharding(program.mesh, jax.sharding.PartitionSpec("data"))
        xb = jax.lax.with_sharding_constraint(xb, shard)
        yb = jax.lax.with_sharding_constraint(yb, shard)
    filt = _trainable_filter(program.config.last_layer_only)

    def loss_fn(trainable, rest):
        model = nnx.merge(
            program.graphdef_train, _compute_cast(program, trainable), rest, copy=True
        )
        x = scale_inputs(augment_batch(program.config.augment, xb, batch.key), hp)
        outputs = model(_compute_cast(program, x)).astype(hp.output_scale.dtype)
        _, _, new_rest = nnx.split(model, filt, ...)
        new_rest = jax.tree.map(lambda new, old: new.astype(old.dtype), new_rest, rest)
        loss = loss_value(program, hp.output_scale * outputs, yb, hp, batch.weights)
        return loss, new_rest

    (loss, rest), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.trainable, state.rest)
    tx = _optimizer(program, hp, learning_rate(program, hp, state.step))
    updates, opt_state = tx.update(grads, state.opt_state, state.trainable)
    trainable = optax.apply_updates(state.trainable, updates)
    return TrainState(state.step + 1, trainable, rest, opt_state), loss


def run_batches(
    program: Program,
    state: TrainState,
    batch_of: Callable[[jax.Array, Any], Batch],
    xs: Any,
    hp: HParams,
) -> tuple[TrainState, jax.Array]:
    """``len(xs)`` steps as one ``lax.scan``: step j trains on ``batch_of(state.step, xs[j])``.

    The one on-device loop of training steps: :func:`run` gathers minibatches from a training set
    on device; a caller that draws its data on device (e.g. fresh samples of a task every step)
    passes its own ``batch_of``.

    Args:
      program: the static half; state: :class:`TrainState`; batch_of: ``(step, x) -> Batch``,
        traceable; xs: a pytree of arrays with a leading axis L (one slice per step);
      hp: :class:`~nets.config.HParams`.

    Returns:
      (state after L steps, (L,) minibatch losses).
    """

    def body(st, x):
        return step(program, st, batch_of(st.step, x), hp)

    return jax.lax.scan(body, state, xs)


def run(
    program: Program,
    state: TrainState,
    x: jax.Array,
    y: jax.Array,
    idx: jax.Array,
    aug_key: jax.Array,
    hp: HParams,
) -> tuple[TrainState, jax.Array]:
    """``len(idx)`` steps as one ``lax.scan``: minibatch j is ``(x[idx[j]], y[idx[j]])``.

    Args:
      program: the static half; state: :class:`TrainState`; x, y: the training set on device;
      idx: (L, B) int minibatch indices; aug_key: the run's augmentation key (step s uses
        ``fold_in(aug_key, s)``); hp: :class:`~nets.config.HParams`.

    Returns:
      (state after L steps, (L,) minibatch losses).
    """

    def batch_of(step_count, i):
        return Batch(x[i], y[i], jax.random.fold_in(aug_key, step_count))

    return run_batches(program, state, batch_of, idx, hp)


def forward(
    program: Program, state: TrainState, x: jax.Array, hp: HParams
) -> tuple[jax.Array, jax.Array]:
    """(features Φ(s_in·x) (n, p), outputs s_out·f(s_in·x) (n, C)) in evaluation mode."""
    model = nnx.merge(program.graphdef_eval, state.trainable, state.rest)
    feats = model.features(scale_inputs(x, hp))
    return feats, hp.output_scale.astype(feats.dtype) * model.head(feats)


learning_rate_jit = jax.jit(learning_rate, static_argnums=0)  # one dispatch per log point

#: How :func:`advance` steps its runs: ``"one"`` one run; R stacked runs as one ``jax.vmap``
#: (``"vmap"``: batched GEMMs, float32 sums reordered, so each run equals its own ``"one"`` to
#: round-off) or one after another inside the program (``"map"``, ``lax.map``: on XLA:CPU each
#: run's arithmetic is exactly its own ``"one"``'s, bitwise; on a GPU XLA may pick other GEMM
#: kernels inside the loop, so equal to round-off there).
MODES = ("one", "vmap", "map")


#: The mesh axis that stacked runs are split over (:func:`runs_mesh`).
RUNS_AXIS = "runs"


def runs_mesh(runs: int, devices: int | None = None) -> jax.sharding.Mesh | None:
    """The 1-D mesh (axis :data:`RUNS_AXIS`) that ``runs`` stacked runs are split over, or None.

    Each of d devices trains R/d of the runs, d the largest divisor of R not above ``devices``
    (default: every local device of the default backend), so no device waits on padding runs.
    None when d = 1 (one device, or R = 1). On a CPU, jax shows one device unless
    ``jax_num_cpu_devices`` (or ``XLA_FLAGS=--xla_force_host_platform_device_count``) is set before
    the backend starts.

    Args:
      runs: R ≥ 1, the number of stacked runs.
      devices: at most this many local devices (≥ 1), or None for all.
    """
    available = jax.local_device_count()
    if devices is None:
        devices = available
    if isinstance(devices, bool) or not isinstance(devices, int | np.integer) or devices < 1:
        raise ValueError(f"devices must be a positive int or None, got {devices!r}")
    if devices > available:
        raise ValueError(
            f"devices={devices} but jax sees {available} local device(s): {jax.local_devices()}"
        )
    d = max(k for k in range(1, min(devices, runs) + 1) if runs % k == 0)
    if d == 1:
        return None
    auto = (jax.sharding.AxisType.Auto,)
    return jax.sharding.Mesh(np.array(jax.local_devices()[:d]), (RUNS_AXIS,), axis_types=auto)


def over_runs(fn: Callable, mesh: jax.sharding.Mesh | None, stacked: tuple[bool, ...]) -> Callable:
    """``fn`` with its stacked arguments split over ``mesh``'s devices (``fn`` itself if None).

    Each device applies ``fn`` to its share of the runs (``jax.shard_map``); the arguments
    flagged False in ``stacked`` are replicated, and every output is stacked along axis 0.
    """
    if mesh is None:
        return fn
    runs, whole = jax.sharding.PartitionSpec(RUNS_AXIS), jax.sharding.PartitionSpec()
    specs = tuple(runs if s else whole for s in stacked)
    return jax.shard_map(fn, mesh=mesh, in_specs=specs, out_specs=runs, check_vma=False)


def _steps(program, state, x, y, order, start, count, aug_key, hp, length):
    """Steps ``start, …, start + count − 1`` of one run's epoch ``order``: a loop of ``count``
    (traced, ≤ ``length``) :func:`step` calls; losses (length,), NaN past ``count``."""

    def body(i, carry):
        st, losses = carry
        idx = jax.lax.dynamic_index_in_dim(order, start + i, keepdims=False)
        batch = Batch(x[idx], y[idx], jax.random.fold_in(aug_key, st.step))
        st, loss = step(program, st, batch, hp)
        return st, losses.at[i].set(loss)

    loss = jax.eval_shape(
        lambda: step(program, state, Batch(x[order[0]], y[order[0]], aug_key), hp)
    )
    losses = jnp.full((length,), jnp.nan, loss[1].dtype)
    return jax.lax.fori_loop(0, count, body, (state, losses))


def _advance(program, state, x, y, order, start, count, aug_keys, hp, length, mode, mesh=None):
    if mesh is not None:  # each device steps its share of the runs

        def local(state, x, y, order, start, count, aug_keys, hp):
            return _advance(program, state, x, y, order, start, count, aug_keys, hp, length, mode)

        split = over_runs(local, mesh, (True, False, False, True, False, False, True, True))
        return split(state, x, y, order, start, count, aug_keys, hp)

    def one(state, order, aug_key, hp):
        return _steps(program, state, x, y, order, start, count, aug_key, hp, length)

    if mode == "one":
        return one(state, order, aug_keys, hp)
    if mode == "vmap":
        return jax.vmap(one)(state, order, aug_keys, hp)
    return jax.lax.map(lambda a: one(*a), (state, order, aug_keys, hp))


_advance_jit = xla_cpu.program_jit(_advance, static_argnums=(0, 9, 10, 11), donate_argnums=1)


def advance(
    program: Program,
    state: TrainState,
    x: jax.Array,
    y: jax.Array,
    order: jax.Array,
    start: int,
    aug_keys: jax.Array,
    hp: HParams,
    *,
    length: int,
    mode: str = "one",
    mesh: jax.sharding.Mesh | None = None,
    count: int | None = None,
) -> tuple[TrainState, jax.Array]:
    """The one compiled entry of training: ``count`` steps from position ``start`` of an epoch.

    Steps j = start, …, start + count − 1 train on minibatch ``order[j]`` (:func:`step`), in one
    on-device loop, so a chunk of steps is one dispatch. ``program``, ``length`` (the most steps
    a call takes) and ``mode`` are static: one compilation serves every chunk of at most
    ``length`` steps. ``start`` and ``count`` are traced, and ``state`` is donated.

    Args:
      program: the static half; state: :class:`TrainState`, stacked along axis 0 (R runs)
        unless ``mode == "one"``; x, y: the training set on device.
      order: the epoch's minibatch indices, (steps_per_epoch, B), or (R, steps_per_epoch, B)
        stacked (:func:`epoch_order`); start: () int position in the epoch.
      aug_keys: the augmentation key(s), (R,) stacked; hp: :class:`~nets.config.HParams`,
        stacked like ``state``.
      length: the static bound on ``count``; mode: one of :data:`MODES`.
      mesh: for stacked modes, a :func:`runs_mesh` whose devices each step their share of the
        runs (state, order, keys and hp split along axis 0 over it, x and y replicated), or
        None for one device.
      count: steps to take, 0 ≤ count ≤ length and start + count ≤ steps_per_epoch (default:
        ``length``).

    Returns:
      (state after ``count`` steps, losses (length,), or (R, length) stacked; the entries from
      ``count`` on are NaN).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mesh is not None and mode == "one":
        raise ValueError("mode 'one' trains one run; a runs mesh splits stacked runs")
    count = length if count is None else count
    spe = order.shape[-2]
    if all(isinstance(v, int | np.integer) for v in (start, count)):
        if not (0 <= count <= length and 0 <= start and start + count <= spe):
            raise ValueError(
                f"steps {start}…{start + count - 1} (count={count}, length={length}) do not lie "
                f"in the epoch's {spe} minibatches with count ≤ length"
            )
    args = (program, state, x, y, order, start, count, aug_keys, hp, length, mode, mesh)
    return _advance_jit(*args)


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def epoch_order(key: jax.Array, n: int, steps_per_epoch: int, batch: int) -> jax.Array:
    """(spe, B) int32 minibatch indices of one epoch: the first spe·B of a permutation of n."""
    perm = jax.random.permutation(key, n)[: steps_per_epoch * batch]
    return perm.reshape(steps_per_epoch, batch).astype(jnp.int32)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))  # one dispatch per epoch, not one per op
def _device_orders(keys: jax.Array, epoch: int, n: int, spe: int, batch: int) -> jax.Array:
    return jax.vmap(lambda k: epoch_order(jax.random.fold_in(k, epoch), n, spe, batch))(keys)


def _sort_rounds(n: int) -> int:
    """How many sorts by fresh 32-bit random keys ``jax.random.permutation`` of n items takes."""
    return int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))


@functools.partial(jax.jit, static_argnums=2)
def _sort_keys(keys: jax.Array, epoch: int, n: int) -> jax.Array:
    """(R, rounds, n) uint32: the random sort keys of ``permutation(fold_in(k, epoch), n)``."""

    def one(key):
        key, rounds = jax.random.fold_in(key, epoch), []
        for _ in range(_sort_rounds(n)):
            key, sub = jax.random.split(key)
            rounds.append(jax.random.bits(sub, (n,), jnp.uint32))
        return jnp.stack(rounds) if rounds else jnp.zeros((0, n), jnp.uint32)  # n = 1: none

    return jax.vmap(one)(keys)


def epoch_orders(
    keys: jax.Array, epoch: int, n: int, steps_per_epoch: int, batch: int
) -> jax.Array:
    """(R, spe, B) int32: :func:`epoch_order` of ``fold_in(keys[i], epoch)`` for each of R keys.

    ``jax.random.permutation`` sorts the items by random 32-bit keys (stably, one or more
    rounds). On the CPU the same keys are drawn on device and sorted stably on the host by NumPy
    (:func:`_stable_argsort_rows`), which gives the identical permutation faster than XLA:CPU's
    sort (tests/nets/test_step.py checks the identity; docs/findings/benchmarks.md the times);
    elsewhere the sort stays on device.
    """
    if {d.platform for d in keys.devices()} != {"cpu"}:
        return _device_orders(keys, epoch, n, steps_per_epoch, batch)
    rounds = np.asarray(_sort_keys(keys, epoch, n))  # (R, rounds, n)
    perm = np.broadcast_to(np.arange(n, dtype=np.uint64), (len(rounds), n))
    for r in range(rounds.shape[1]):
        perm = np.take_along_axis(perm, _stable_argsort_rows(rounds[:, r]), axis=1)
    perm = perm[:, : steps_per_epoch * batch].astype(np.int32)
    return jnp.asarray(perm.reshape(-1, steps_per_epoch, batch))


def _stable_argsort_rows(sort_keys: np.ndarray) -> np.ndarray:
    """(R, n) uint64: each row's stable argsort of its uint32 ``sort_keys``.

    One unstable sort of ``key·2³² + index`` per row: the index breaks ties among equal keys in
    index order, which is the stable order (3–10× faster than a stable ``argsort`` per row).
    """
    n = sort_keys.shape[1]
    packed = sort_keys.astype(np.uint64) << np.uint64(32) | np.arange(n, dtype=np.uint64)
    packed.sort(axis=1)
    return packed & np.uint64(0xFFFFFFFF)
