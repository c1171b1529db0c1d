"""LeNet-5 (LeCun et al. 1998) with exposed penultimate features."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from nets.models.conv_pool import conv_pool
from nets.models.layers import POOLS, check_images, conv, linear

_ACTIVATIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh}


class LeNet5(nnx.Module):
    """LeNet-5: conv5×5(6) → pool → conv5×5(16) → pool → 120 → 84 → head, Φ ∈ ℝ⁸⁴.

    Inputs are NHWC images of 32×32 (the classic LeNet-5 input; no padding) or 28×28 (MNIST as
    is; the first conv pads 2 on every side so that both give 5×5×16 = 400 inputs to the first
    dense layer). The parameter count is 61,706 for 10 classes either way. Activation and pooling
    default to the common PyTorch version (ReLU, 2×2 max-pool); ``activation='tanh'`` with
    ``pool='avg'`` is the 1998 network up to its RBF output layer.

    Args:
      num_classes: C, the width of ``head``.
      in_channels: image channels (1 for MNIST).
      image_size: 32 or 28.
      activation: ``'relu'`` or ``'tanh'``.
      pool: ``'max'`` or ``'avg'`` (2×2, stride 2).
      torch_defaults: PyTorch's init U(±1/√fan_in) and symmetric padding (see
        :mod:`nets.models.layers`); ``False`` uses Flax's defaults.
      param_dtype: dtype of the parameters.
      rngs: ``nnx.Rngs`` with a ``params`` (or ``default``) stream.
    """

    def __init__(
        self,
        num_classes: int = 10,
        *,
        in_channels: int = 1,
        image_size: int = 32,
        activation: str = "relu",
        pool: str = "max",
        torch_defaults: bool = True,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        if image_size not in (28, 32):
            raise ValueError(f"LeNet5 image_size must be 28 or 32, got {image_size}")
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"unknown activation {activation!r}; choose one of {list(_ACTIVATIONS)}"
            )
        if pool not in POOLS:
            raise ValueError(f"unknown pool {pool!r}; choose one of {list(POOLS)}")
        if num_classes <= 0 or in_channels <= 0:
            raise ValueError(f"need positive sizes, got num_classes={num_classes}, {in_channels=}")
        self.in_channels = in_channels
        self.image_size = image_size
        self.activation = activation
        self.pool = pool
        kw = dict(torch_defaults=torch_defaults, param_dtype=param_dtype, rngs=rngs)
        self.conv1 = conv(in_channels, 6, 5, padding=2 if image_size == 28 else 0, **kw)
        self.conv2 = conv(6, 16, 5, **kw)
        self.fc1 = linear(16 * 5 * 5, 120, **kw)
        self.fc2 = linear(120, 84, **kw)
        self.head = linear(84, num_classes, **kw)

    def features(self, x: jax.Array) -> jax.Array:
        """Penultimate features Φ(x), shape (n, 84), from images x of shape (n, S, S, in_channels)."""
        check_images(x, self.image_size, self.in_channels, "LeNet5")
        act = _ACTIVATIONS[self.activation]
        # pool2d(act(conv(x)), 2) as one convolution on the 2×2 windows (nets.models.conv_pool);
        # ReLU and tanh are nondecreasing, so a max-pool commutes with them
        x = conv_pool(self.conv1, x, size=2, kind=self.pool, act=act, monotone=True)
        x = conv_pool(self.conv2, x, size=2, kind=self.pool, act=act, monotone=True)
        x = x.reshape(x.shape[0], -1)
        return act(self.fc2(act(self.fc1(x))))

    def __call__(self, x: jax.Array) -> jax.Array:
        """Logits, shape (n, num_classes)."""
        return self.head(self.features(x))
