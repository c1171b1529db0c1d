"""Flax models and optax training with the lazy/rich knobs.

One trainer: :func:`nets.step.step` is the pure training step and :func:`nets.loop.fit` the one
loop that runs it (log points, checkpoints, divergence); :func:`train` is its one-run case and
:func:`train_many` its stacked case (seeds × traced hyper-parameters as one program). The XLA:CPU
workarounds live in :mod:`nets.xla_cpu`.
"""

from nets.config import HParams, TrainConfig, hparams
from nets.data import Dataset, load_digits
from nets.evaluate import evaluate
from nets.history import History, TrainingDiverged
from nets.knobs import as_regression, balance_layers, encode_labels, scale_weights, shuffle_labels
from nets.loop import train
from nets.models import MLP, MODELS, VGG16, LeNet5, ResNet18, Transformer, get_model
from nets.step import TrainState
from nets.sweep import train_many

__all__ = [
    "MLP",
    "MODELS",
    "VGG16",
    "LeNet5",
    "ResNet18",
    "Transformer",
    "get_model",
    "Dataset",
    "HParams",
    "History",
    "TrainConfig",
    "TrainState",
    "TrainingDiverged",
    "as_regression",
    "balance_layers",
    "encode_labels",
    "evaluate",
    "hparams",
    "load_digits",
    "scale_weights",
    "shuffle_labels",
    "train",
    "train_many",
]
