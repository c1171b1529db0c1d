"""VGG16 (torchvision configuration D) for 32×32 images, with or without BatchNorm, two heads."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from nets.init import scaled_normal, torch_kaiming_normal_fan_out, torch_uniform
from nets.models.layers import adaptive_avg_pool, check_images, conv, linear, pool2d
from nets.models.layers import batch_norm as make_batch_norm

# Configuration D (Simonyan & Zisserman 2015, torchvision ``cfgs["D"]``), channels in units of
# ``width`` (64 for the real network); "M" is a 2×2 stride-2 max-pool.
VGG16_CONFIG = (1, 1, "M", 2, 2, "M", 4, 4, 4, "M", 8, 8, 8, "M", 8, 8, 8, "M")
HEADS = ("cifar", "torchvision")
INITS = ("torch", "torchvision", "flax")


def _initializers(init: str, kind: str, fan_in: int, fan_out: int):
    """(kernel_init, bias_init) of one conv/linear layer under the ``init`` scheme."""
    zeros = nnx.initializers.zeros_init()
    if init == "torch":  # nn.Conv2d / nn.Linear reset_parameters
        return torch_uniform(fan_in), torch_uniform(fan_in)
    if init == "torchvision":  # torchvision.models.vgg.VGG._initialize_weights
        if kind == "conv":
            return torch_kaiming_normal_fan_out(fan_out), zeros
        return scaled_normal(0.01), zeros
    return nnx.initializers.lecun_normal(), zeros


class VGG16(nnx.Module):
    """VGG16 (13 3×3 convs of config D, 5 max-pools) on 32×32 images, Φ the head's input.

    Two heads (say which one a config uses):

    * ``head='cifar'`` — the common CIFAR head (e.g. kuangliu/pytorch-cifar): the 1×1×8w map is
      flattened, Φ ∈ ℝ^{8w} (512 for w = 64), ``head = Linear(8w, C)``. Default init: PyTorch's
      layer defaults.
    * ``head='torchvision'`` — ``torchvision.models.vgg16[_bn]``: adaptive average pool to 7×7
      (the 1×1 map is replicated), flatten, Linear(49·8w, hidden) → ReLU → Dropout(p) →
      Linear(hidden, hidden) → ReLU → Dropout(p) → ``head = Linear(hidden, C)``; Φ ∈ ℝ^{hidden}
      is the output of the second dropout. Default init: torchvision's ``_initialize_weights``
      (conv N(0, 2/fan_out) with zero bias, linear N(0, 0.01²) with zero bias, BN γ = 1, β = 0).

    Parameter counts at w = 64, C = 10: 14,728,266 (BN, CIFAR head), 14,719,818 (no BN, CIFAR
    head), 134,301,514 (no BN, torchvision head); torchvision's ImageNet vgg16 (C = 1000) has
    138,357,544. The convs keep their biases with BN, as in torchvision.

    Args:
      num_classes: C.
      batch_norm: conv → BN → ReLU (``vgg16_bn``) instead of conv → ReLU.
      head: ``'cifar'`` or ``'torchvision'``.
      width: w, channels of the first block (64 for VGG16; smaller for quick tests).
      hidden: width of the torchvision head's two hidden layers (4096).
      dropout: dropout rate p of the torchvision head (0.5); active in ``model.train()`` mode.
      in_channels: image channels.
      init: ``'torch'``, ``'torchvision'`` or ``'flax'``; ``None`` picks ``'torchvision'`` for the
        torchvision head, ``'torch'`` for the CIFAR head, ``'flax'`` if not torch_defaults.
      torch_defaults: PyTorch numerics (symmetric padding, BN ρ = 0.9, ε = 1e-5, unbiased
        running variance); ``False`` uses Flax's defaults.
      param_dtype: dtype of the parameters.
      rngs: ``nnx.Rngs`` with a ``params`` stream (and ``dropout`` for the torchvision head;
        ``default`` serves both).
    """

    def __init__(
        self,
        num_classes: int = 10,
        *,
        batch_norm: bool = False,
        head: str = "cifar",
        width: int = 64,
        hidden: int = 4096,
        dropout: float = 0.5,
        in_channels: int = 3,
        init: str | None = None,
        torch_defaults: bool = True,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        if head not in HEADS:
            raise ValueError(f"unknown head {head!r}; choose one of {list(HEADS)}")
        if init is None:
            init = (
                ("torchvision" if head == "torchvision" else "torch") if torch_defaults else "flax"
            )
        if init not in INITS:
            raise ValueError(f"unknown init {init!r}; choose one of {list(INITS)}")
        if min(num_classes, width, hidden, in_channels) <= 0:
            raise ValueError(f"need positive sizes, got {num_classes=}, {width=}, {hidden=}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.in_channels = in_channels
        self.head_type = head
        self.batch_norm = batch_norm
        kw = dict(torch_defaults=torch_defaults, param_dtype=param_dtype, rngs=rngs)

        convs, norms = [], []
        c_in = in_channels
        for v in VGG16_CONFIG:
            if v == "M":
                continue
            c_out = v * width
            k_init, b_init = _initializers(init, "conv", c_in * 9, c_out * 9)
            convs.append(
                conv(c_in, c_out, 3, padding=1, kernel_init=k_init, bias_init=b_init, **kw)
            )
            if batch_norm:
                norms.append(
                    make_batch_norm(c_out, torch_defaults=torch_defaults, param_dtype=param_dtype)
                )
            c_in = c_out
        self.convs = nnx.List(convs)
        self.norms = nnx.List(norms)

        def dense(a: int, b: int) -> nnx.Linear:
            k_init, b_init = _initializers(init, "linear", a, b)
            return linear(a, b, kernel_init=k_init, bias_init=b_init, **kw)

        if head == "cifar":
            self.fc1 = self.fc2 = self.drop1 = self.drop2 = None
            self.head = dense(8 * width, num_classes)
        else:
            self.fc1 = dense(8 * width * 49, hidden)
            self.drop1 = nnx.Dropout(dropout, rngs=rngs)
            self.fc2 = dense(hidden, hidden)
            self.drop2 = nnx.Dropout(dropout, rngs=rngs)
            self.head = dense(hidden, num_classes)

    def features(self, x: jax.Array) -> jax.Array:
        """Penultimate features Φ(x): (n, 8·width) for the CIFAR head, (n, hidden) otherwise.

        Args:
          x: NHWC images, shape (n, 32, 32, in_channels).
        """
        check_images(x, 32, self.in_channels, "VGG16")
        i = 0
        for v in VGG16_CONFIG:
            if v == "M":
                x = pool2d(x, 2, "max")
                continue
            x = self.convs[i](x)
            if self.batch_norm:
                x = self.norms[i](x)
            x = jax.nn.relu(x)
            i += 1
        if self.head_type == "cifar":
            return x.reshape(x.shape[0], -1)
        x = adaptive_avg_pool(x, 7)
        # flatten in torch's (C, H, W) order so fc1 rows line up with torchvision's
        x = jnp.transpose(x, (0, 3, 1, 2)).reshape(x.shape[0], -1)
        x = self.drop1(jax.nn.relu(self.fc1(x)))
        return self.drop2(jax.nn.relu(self.fc2(x)))

    def __call__(self, x: jax.Array) -> jax.Array:
        """Logits, shape (n, num_classes)."""
        return self.head(self.features(x))
