"""Flax NNX models; each exposes ``features(x)`` (penultimate Φ) and a final layer ``head``.

Contract: ``model(x)`` → logits (n, C); ``model.features(x)`` → Φ(x) (n, p), the input of the
final linear layer ``model.head``; ``model.train()`` / ``model.eval()`` switch BatchNorm (batch vs
running statistics) and Dropout. Images are NHWC.
"""

from __future__ import annotations

from collections.abc import Callable

from flax import nnx

from nets.models.layers import BatchNorm, count_params
from nets.models.lenet import LeNet5
from nets.models.mlp import MLP
from nets.models.resnet import PreActBlock, ResNet18
from nets.models.transformer import Transformer
from nets.models.vgg import VGG16


def _vgg16_bn(**kwargs) -> VGG16:
    return VGG16(batch_norm=True, **kwargs)


MODELS: dict[str, Callable[..., nnx.Module]] = {
    "mlp": MLP,
    "lenet5": LeNet5,
    "vgg16": VGG16,
    "vgg16_bn": _vgg16_bn,
    "resnet18": ResNet18,
    "transformer": Transformer,
}


def get_model(name: str, **kwargs) -> nnx.Module:
    """Build the model called ``name`` (a key of ``MODELS``) with its constructor's ``kwargs``.

    Example: ``get_model("resnet18", num_classes=100, rngs=nnx.Rngs(0))``;
    ``"vgg16_bn"`` is ``VGG16(batch_norm=True, ...)``.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; valid names: {', '.join(sorted(MODELS))}")
    return MODELS[name](**kwargs)


__all__ = [
    "MLP",
    "MODELS",
    "VGG16",
    "BatchNorm",
    "LeNet5",
    "PreActBlock",
    "ResNet18",
    "Transformer",
    "count_params",
    "get_model",
]
