"""Pre-activation ResNet18-k for 32×32 images (Nakkiran et al. 2021, "Deep double descent")."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from nets.models.layers import batch_norm, check_images, conv, linear, pool2d

BLOCKS_PER_STAGE = (2, 2, 2, 2)  # ResNet18


class PreActBlock(nnx.Module):
    """Pre-activation basic block (He et al. 2016b): y = conv(relu(bn(conv(relu(bn(x)))))) + s.

    The shortcut s is x, or a 1×1 conv (stride ``stride``, no bias) applied to relu(bn₁(x)) when
    the shape changes — as in Nakkiran et al.'s ``PreActBlock``.
    """

    def __init__(
        self,
        in_planes: int,
        planes: int,
        stride: int,
        *,
        torch_defaults: bool,
        param_dtype,
        rngs: nnx.Rngs,
    ):
        kw = dict(torch_defaults=torch_defaults, param_dtype=param_dtype, rngs=rngs)
        bn = dict(torch_defaults=torch_defaults, param_dtype=param_dtype)
        self.bn1 = batch_norm(in_planes, **bn)
        self.conv1 = conv(in_planes, planes, 3, stride=stride, padding=1, bias=False, **kw)
        self.bn2 = batch_norm(planes, **bn)
        self.conv2 = conv(planes, planes, 3, padding=1, bias=False, **kw)
        if stride != 1 or in_planes != planes:
            self.shortcut = conv(in_planes, planes, 1, stride=stride, bias=False, **kw)
        else:
            self.shortcut = None

    def __call__(self, x: jax.Array) -> jax.Array:
        out = jax.nn.relu(self.bn1(x))
        shortcut = self.shortcut(out) if self.shortcut is not None else x
        out = self.conv1(out)
        out = self.conv2(jax.nn.relu(self.bn2(out)))
        return out + shortcut


class ResNet18(nnx.Module):
    """Pre-activation ResNet18-k of Nakkiran et al. (2021), the ResNet18 of the D_LR paper.

    conv3×3(k) → 4 stages of 2 :class:`PreActBlock` with widths (k, 2k, 4k, 8k) and strides
    (1, 2, 2, 2) → 4×4 average pool → Φ ∈ ℝ^{8k} → ``head = Linear(8k, C)``. There is no BN-ReLU
    after the last stage (Nakkiran et al.'s ``PreActResNet.forward``), so Φ is the pooled residual
    stream. k = 64 is the standard ResNet18 (11,171,146 parameters for C = 10, Φ ∈ ℝ⁵¹²).

    Args:
      num_classes: C.
      k: width k of the first stage.
      in_channels: image channels (3 for CIFAR; MNIST padded to 32×32 has 1).
      torch_defaults: PyTorch numerics — U(±1/√fan_in) conv/linear init, symmetric padding 1
        for the stride-2 3×3 convs, BN ρ = 0.9 (torch momentum 0.1), ε = 1e-5, unbiased running
        variance; ``False`` uses Flax's defaults (``'SAME'`` padding pads (0, 1) at stride 2).
      param_dtype: dtype of the parameters.
      rngs: ``nnx.Rngs`` with a ``params`` stream.
    """

    def __init__(
        self,
        num_classes: int = 10,
        *,
        k: int = 64,
        in_channels: int = 3,
        torch_defaults: bool = True,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        if min(num_classes, k, in_channels) <= 0:
            raise ValueError(f"need positive sizes, got {num_classes=}, {k=}, {in_channels=}")
        self.in_channels = in_channels
        kw = dict(torch_defaults=torch_defaults, param_dtype=param_dtype, rngs=rngs)
        self.conv1 = conv(in_channels, k, 3, padding=1, bias=False, **kw)
        blocks, in_planes = [], k
        for stage, n_blocks in enumerate(BLOCKS_PER_STAGE):
            planes = k * 2**stage
            for b in range(n_blocks):
                stride = 2 if (stage > 0 and b == 0) else 1
                blocks.append(PreActBlock(in_planes, planes, stride, **kw))
                in_planes = planes
        self.blocks = nnx.List(blocks)
        self.head = linear(8 * k, num_classes, **kw)

    def features(self, x: jax.Array) -> jax.Array:
        """Penultimate features Φ(x), shape (n, 8k), from NHWC images x of shape (n, 32, 32, c)."""
        check_images(x, 32, self.in_channels, "ResNet18")
        x = self.conv1(x)
        for block in self.blocks:
            x = block(x)
        x = pool2d(x, 4, "avg")  # F.avg_pool2d(out, 4): 4×4 → 1×1
        return x.reshape(x.shape[0], -1)

    def __call__(self, x: jax.Array) -> jax.Array:
        """Logits, shape (n, num_classes)."""
        return self.head(self.features(x))
