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
    """Seed and optimizer of an experiment's networks (defaults: :class:`nets.TrainConfig`'s)."""

    seed: int = 0  # PRNG seed of the initialisation and the data order
    optimizer: str = "sgd"  # 'sgd' (heavy ball), 'adam' (coupled L2), 'adamw' (decoupled)
    lr: float = 0.1  # learning rate η
    momentum: float = 0.0  # SGD momentum μ
    b1: float = 0.9  # Adam's β₁
    b2: float = 0.999  # Adam's β₂
    eps: float = 1e-8  # Adam's ε
    weight_decay: float = 0.0  # λ, coupled for sgd / adam, decoupled for adamw


@dataclasses.dataclass(frozen=True)
class StepTraining(Training):
    """A run measured in optimizer steps (defaults: teddykoker/grokking's AdamW, which D used)."""

    optimizer: str = "adamw"
    lr: float = 1e-3
    b2: float = 0.98
    weight_decay: float = 1.0
    warmup_steps: int = 10  # linear learning-rate warm-up from 0
    batch_size: int = 512  # minibatch size B
    steps: int = 3000  # optimizer steps per run
    log_every: int = 50  # steps between log points (also at step 0 and the end)
    checkpoint_every: int = 500  # steps between checkpoints (0: none), for --resume


@dataclasses.dataclass(frozen=True)
class ImageTraining(Training):
    """The image experiments' training: SGD with momentum 0.9 (D App. F.4, T §2.4)."""

    dataset: str = "mnist5k"  # one of _data.DATASETS
    data_dir: str | None = None  # IDX files for Fashion-MNIST, TFDS for MNIST / CIFAR
    n_train: int | None = None  # training subset size (None: the whole split)
    width: int = 256  # MLP hidden width p, VGG16's first-block width, ResNet18's k
    depth: int = 3  # MLP hidden layers (the conv nets have a fixed depth)
    momentum: float = 0.9
    batch_size: int = 128  # minibatch size B (capped at the training-set size)
    epochs: int = 100
    output_scale: float = 1.0  # ε: the network output is multiplied by ε (D App. F.4)
    augment: str = "none"  # 'cifar' (random crop + flip) or 'none'
    checkpoint_every: int = 0  # optimizer steps between checkpoints (0: none), for --resume
    normalize: str = "none"  # 'none' or 'channel' (per-channel standardisation, D App. F.4.2)


@dataclasses.dataclass(frozen=True)
class Seeds:
    """Repeat every run over seeds ``seed, …, seed + seeds − 1`` (D averages at least three)."""

    seeds: int = 3  # number of seeds n ≥ 1


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
    norm = "channel" if dataset.startswith("cifar") else "none"
    common = dict(dataset=dataset, n_train=None, width=64, augment="cifar", checkpoint_every=2_000)
    return config_cls(**{**common, "normalize": norm, **fields})


def paper_steps(n_train: int, batch_size: int, epochs: int) -> int:
    """E · ⌈n / min(B, n)⌉: the optimizer steps of ``epochs`` epochs of PyTorch's ``DataLoader``,
    which keeps the short last batch (``nets`` drops it), as full batches."""
    checks = (("n_train", n_train, 1), ("batch_size", batch_size, 1), ("epochs", epochs, 0))
    for name, v, low in checks:
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise ValueError(f"{name} must be a whole number ≥ {low}, got {v!r}")
    return epochs * -(-n_train // min(batch_size, n_train))


def partial_batch_deviation(n_train: int, batch_size: int) -> list[str]:
    """The deviation line of ``nets``' drop-last batching at ``n_train`` examples, or ``[]``
    (also when ``n_train`` is unknown, 0)."""
    b = min(batch_size, n_train)
    if n_train < 1 or not (rest := n_train % b):
        return []
    return [f"the last partial batch of each epoch is dropped ({rest} of {n_train:,} examples; "
            f"{n_train // b} steps per epoch where the papers' PyTorch loader takes "
            f"{n_train // b + 1})"]  # fmt: skip
