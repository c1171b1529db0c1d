"""Flax models and optax training with the lazy/rich knobs."""

from nets.data import Dataset, load_digits
from nets.knobs import as_regression, balance_layers, encode_labels, scale_weights, shuffle_labels
from nets.models import MLP, MODELS, VGG16, LeNet5, ResNet18, Transformer, get_model
from nets.train import History, TrainConfig, TrainingDiverged, TrainState, evaluate, train

__all__ = [
    "MLP",
    "MODELS",
    "VGG16",
    "LeNet5",
    "ResNet18",
    "Transformer",
    "get_model",
    "Dataset",
    "History",
    "TrainConfig",
    "TrainState",
    "TrainingDiverged",
    "as_regression",
    "balance_layers",
    "encode_labels",
    "evaluate",
    "load_digits",
    "scale_weights",
    "shuffle_labels",
    "train",
]
