"""The training sub-configs the experiments share, and the one map from them to ``TrainConfig``.

An experiment's ``Config`` extends :class:`Training` (seed and optimizer), :class:`StepTraining`
(a run in optimizer steps) or :class:`ImageTraining` (data, model size, epochs), and mixes in
:class:`Seeds` where its claims are judged over seeds; each field stays top-level (``--set lr=…``).
:func:`train_config` maps any of them to a :class:`nets.TrainConfig`; :func:`paper_scale` is the
papers' common accelerator preset; :func:`paper_steps` counts PyTorch's short last batch.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Training:
    """Seed and optimizer of an experiment's networks (defaults: :class:`nets.TrainConfig`'s).

    Attributes:
      seed: PRNG seed of the initialisation and the data order.
      optimizer: ``'sgd'`` (heavy-ball momentum), ``'adam'`` (coupled L2, PyTorch's
        ``Adam(weight_decay=…)``) or ``'adamw'`` (decoupled weight decay).
      lr: learning rate η.
      momentum: SGD momentum μ.
      b1, b2, eps: Adam's β₁, β₂, ε.
      weight_decay: weight decay λ (coupled for sgd / adam, decoupled for adamw).
    """

    seed: int = 0
    optimizer: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0


@dataclasses.dataclass(frozen=True)
class StepTraining(Training):
    """A run measured in optimizer steps (defaults: teddykoker/grokking's AdamW, which D used).

    Attributes:
      warmup_steps: linear learning-rate warm-up from 0 over this many steps.
      batch_size: minibatch size B.
      steps: optimizer steps per run.
      log_every: steps between logged accuracy / D_LR points (also at step 0 and the end).
      checkpoint_every: steps between checkpoints (0: none), for ``--resume``.
    """

    optimizer: str = "adamw"
    lr: float = 1e-3
    b2: float = 0.98
    weight_decay: float = 1.0
    warmup_steps: int = 10
    batch_size: int = 512
    steps: int = 3000
    log_every: int = 50
    checkpoint_every: int = 500


@dataclasses.dataclass(frozen=True)
class ImageTraining(Training):
    """The image experiments' training: SGD with momentum 0.9 (D App. F.4, T §2.4).

    Attributes:
      dataset: one of :data:`~lrrich.experiments._data.DATASETS`.
      data_dir: folder of the data (IDX files for Fashion-MNIST, TFDS for MNIST / CIFAR).
      n_train: training subset size (None: the whole training split).
      width: hidden width p of the MLP, VGG16's first-block width, ResNet18's k.
      depth: hidden layers of the MLP (the convolutional nets have a fixed depth).
      batch_size: minibatch size B (capped at the training-set size).
      epochs: training epochs.
      output_scale: ε, the network output is multiplied by ε (D App. F.4).
      augment: ``'cifar'`` (random crop + flip) or ``'none'``.
      checkpoint_every: optimizer steps between checkpoints (0: none), for ``--resume``.
      normalize: ``'none'`` or ``'channel'`` (per-channel standardisation, D App. F.4.2).
    """

    dataset: str = "mnist5k"
    data_dir: str | None = None
    n_train: int | None = None
    width: int = 256
    depth: int = 3
    momentum: float = 0.9
    batch_size: int = 128
    epochs: int = 100
    output_scale: float = 1.0
    augment: str = "none"
    checkpoint_every: int = 0
    normalize: str = "none"


@dataclasses.dataclass(frozen=True)
class Seeds:
    """Repeat every run over seeds ``seed, …, seed + seeds − 1`` (D averages at least three).

    Attributes:
      seeds: number of seeds n (≥ 1).
    """

    seeds: int = 3


def seed_list(config) -> list[int]:
    """The seeds of ``config``: ``seed, …, seed + seeds − 1`` (one seed without :class:`Seeds`)."""
    n = getattr(config, "seeds", 1)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"seeds must be a whole number ≥ 1, got {n!r}")
    return [config.seed + i for i in range(n)]


def train_config(config: Training, n_train: int | None = None, **overrides):
    """The :class:`nets.TrainConfig` of ``config``: each of its fields that names a
    ``TrainConfig`` field, ``batch_size`` capped at ``n_train`` (which an :class:`ImageTraining`
    must give); ``overrides`` (any other TrainConfig field) win."""
    from nets import TrainConfig

    if n_train is None and isinstance(config, ImageTraining):
        raise TypeError("train_config of an ImageTraining needs n_train (it caps the batch size)")
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    shared = {
        f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name in names
    }
    if n_train is not None and "batch_size" in shared:
        shared["batch_size"] = min(shared["batch_size"], n_train)
    return TrainConfig(**{**shared, **overrides})


def paper_scale(config_cls: type, dataset: str, **fields):
    """``config_cls`` in the papers' common accelerator setting on ``dataset`` (D App. F.4, T §2.4):
    the whole training split, width 64, CIFAR augmentation, per-channel normalisation on CIFAR,
    a checkpoint every 2,000 steps; ``fields`` win."""
    common = dict(
        dataset=dataset,
        n_train=None,
        width=64,
        augment="cifar",
        checkpoint_every=2_000,
        normalize="channel" if dataset.startswith("cifar") else "none",
    )
    return config_cls(**{**common, **fields})


def paper_steps(n_train: int, batch_size: int, epochs: int) -> int:
    """E · ⌈n / min(B, n)⌉: the optimizer steps of ``epochs`` epochs of PyTorch's ``DataLoader``,
    which keeps the short last batch (``nets`` drops it), as full batches."""
    for name, v, low in (
        ("n_train", n_train, 1),
        ("batch_size", batch_size, 1),
        ("epochs", epochs, 0),
    ):
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise ValueError(f"{name} must be a whole number ≥ {low}, got {v!r}")
    return epochs * -(-n_train // min(batch_size, n_train))


def partial_batch_deviation(n_train: int, batch_size: int) -> list[str]:
    """The deviation line of ``nets``' drop-last batching at ``n_train`` examples, or ``[]``."""
    b = min(batch_size, n_train)
    rest = n_train % b
    if not rest:
        return []
    return [
        f"the last partial batch of each epoch is dropped ({rest} of {n_train:,} examples; "
        f"{n_train // b} steps per epoch where the papers' PyTorch loader takes {n_train // b + 1})"
    ]
