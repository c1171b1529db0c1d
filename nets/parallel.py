"""Scale-out: data parallelism over local devices, multi-host runs, vmapped seeds.

**One device or many, one code path.** :func:`nets.train.train` with ``data_parallel=True`` builds
a 1-D mesh ``('data',)`` over ``jax.local_devices()``; the dataset and the training state are
replicated, each minibatch is sharded along its batch axis
(``NamedSharding(mesh, PartitionSpec('data'))``) and XLA inserts the gradient all-reduce, so the
update equals the single-device one up to the order of floating-point sums.

**Several hosts** (GPU nodes, TPU pods): start the same script on every host and call, before
any other JAX call::

    import jax
    jax.distributed.initialize()            # TPU / SLURM / Open MPI: arguments auto-detected
    # or explicitly:
    # jax.distributed.initialize(coordinator_address="10.0.0.1:1234",
    #                            num_processes=4, process_id=int(os.environ["RANK"]))
    mesh = data_mesh(jax.devices())          # all devices of all hosts
    model, history = train(model, data, config, key=key, data_parallel=mesh)

Every process holds the full (small) dataset and draws the same permutation from the same key,
so each process feeds identical global index arrays and jax shards them; checkpoints are written
by orbax collectively into a shared ``run_dir``.

**Seeds.** :func:`train_seeds` trains S independently initialised copies of a small model at once
with ``jax.vmap`` over the stacked training states (one compilation, one scan).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nets.data.base import Dataset, validate
from nets.train import TrainConfig, _build_program, _forward_chunks, _loss_acc, split_model


def data_mesh(devices: Sequence[jax.Device] | None = None) -> jax.sharding.Mesh:
    """A 1-D mesh with axis ``'data'`` over ``devices`` (default: all local devices)."""
    devices = list(jax.local_devices() if devices is None else devices)
    return jax.sharding.Mesh(np.array(devices), ("data",), axis_types=(jax.sharding.AxisType.Auto,))


def train_seeds(
    make_model: Callable[[nnx.Rngs], nnx.Module],
    data: Dataset,
    config: TrainConfig,
    keys: jax.Array,
    *,
    init_seeds: Sequence[int],
) -> tuple[list[nnx.Module], dict[str, np.ndarray]]:
    """Train one model per seed with ``jax.vmap`` (same data, per-seed init, order and augmentation).

    Seed i is the run ``train(make_model(nnx.Rngs(init_seeds[i])), data, config, key=keys[i])``
    of :func:`nets.train.train`, up to floating-point reassociation under ``vmap``; no
    intermediate logging.

    Args:
      make_model: builds the model from ``nnx.Rngs``.
      data: the dataset.
      config: the training config.
      keys: (S,) PRNG keys of data order and augmentation, one per seed.
      init_seeds: S integer seeds of the model initialisation.

    Returns:
      (S trained models in eval mode, final ``{"train_loss", "test_loss", "train_acc",
      "test_acc"}`` arrays of shape (S,)).
    """
    config.validate()
    validate(data)
    if len(keys) != len(init_seeds):
        raise ValueError(f"keys has {len(keys)} entries but init_seeds {len(init_seeds)}")
    n, batch = len(data.x_train), config.batch_size
    if batch > n:
        raise ValueError(f"batch_size={batch} exceeds the {n} training examples")
    spe = n // batch
    total = config.steps if config.steps is not None else config.epochs * spe
    splits = [split_model(make_model(nnx.Rngs(s)), config) for s in init_seeds]
    gd_train, gd_eval = splits[0][0], splits[0][1]
    state = jax.tree.map(lambda *a: jnp.stack(a), *[s[2] for s in splits])
    prog = _build_program(gd_train, gd_eval, config, data.num_classes, spe, total, None)
    state = state._replace(opt_state=jax.vmap(prog.tx.init)(state.trainable))
    pairs = jax.vmap(jax.random.split)(keys)
    data_keys, aug_keys = pairs[:, 0], pairs[:, 1]
    perm_fn = jax.jit(
        jax.vmap(
            lambda k, e: (
                jax.random.permutation(jax.random.fold_in(k, e), n)[: spe * batch]
                .reshape(spe, batch)
                .astype(jnp.int32)
            ),
            in_axes=(0, None),
        )
    )
    x, y = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
    step = 0
    while step < total:
        epoch = step // spe
        length = min(spe, total - step)
        idx = perm_fn(data_keys, epoch)[:, :length]
        steps = jnp.arange(step, step + length, dtype=jnp.int32)
        state, losses = prog.run_seeds(state, x, y, idx, steps, aug_keys)
        if not np.all(np.isfinite(np.asarray(losses))):
            raise FloatingPointError(f"training loss became non-finite before step {step + length}")
        step += length
    models, finals = [], {}
    for i in range(len(init_seeds)):
        st = jax.tree.map(lambda a, i=i: a[i], state)
        models.append(nnx.merge(gd_eval, st.trainable, st.rest))
        for split in ("train", "test"):
            xs, ys = getattr(data, f"x_{split}"), getattr(data, f"y_{split}")
            _, outs = _forward_chunks(prog.forward, st, xs)
            for k, v in _loss_acc(split, np.asarray(outs), ys, config, data).items():
                finals.setdefault(k, []).append(v)
    return models, {k: np.asarray(v) for k, v in finals.items()}
