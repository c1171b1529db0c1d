"""Scale-out: data parallelism over local devices, multi-host runs, vmapped seeds.

**One device or many, one code path.** :func:`nets.train` with ``data_parallel=True`` builds
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
by orbax collectively into a shared ``run_dir``, ``metrics.jsonl`` and the checkpoints' content
hashes by process 0 only (every process keeps the same History).

**Seeds.** :func:`train_seeds` trains S independently initialised copies of a small model at once:
it is :func:`nets.sweep.train_many` (a ``jax.vmap`` of the one training step) over seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import numpy as np
from flax import nnx

from nets.config import TrainConfig
from nets.data.base import Dataset
from nets.evaluate import evaluate
from nets.sweep import train_many


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
    of :func:`nets.train`, up to floating-point reassociation under ``vmap``; no intermediate
    logging.

    Args:
      make_model: builds the model from ``nnx.Rngs``.
      data: the dataset.
      config: the training config.
      keys: (S,) PRNG keys of data order and augmentation, one per seed.
      init_seeds: S integer seeds of the model initialisation.

    Returns:
      (S trained models in eval mode, final ``{"train_loss", "test_loss", "train_acc",
      "test_acc"}`` arrays of shape (S,) on the full train and test sets).

    Raises:
      FloatingPointError: a seed's training loss became non-finite (a
        :class:`nets.TrainingDiverged`).
    """
    if len(keys) != len(init_seeds):
        raise ValueError(f"keys has {len(keys)} entries but init_seeds {len(init_seeds)}")
    models = [make_model(nnx.Rngs(s)) for s in init_seeds]
    spe = len(data.x_train) // max(config.batch_size, 1)
    total = config.total_steps(spe)
    trained, histories = train_many(
        models, data, [config] * len(models), keys, log_every=max(total, 1), metrics={}
    )
    for h in histories:
        if h.diverged is not None:
            raise h.diverged
    finals: dict[str, list] = {}
    for model in trained:
        for k, v in evaluate(model, data, config).items():
            finals.setdefault(k, []).append(v)
    return trained, {k: np.asarray(v) for k, v in finals.items()}
