"""Layers shared by the model zoo, with PyTorch's numerics behind ``torch_defaults``.

The papers trained PyTorch models; with ``torch_defaults=True`` every layer built here matches the
corresponding ``torch.nn`` layer at its defaults:

* ``nn.Linear`` / ``nn.Conv2d``: weights and biases U(−1/√fan_in, 1/√fan_in), fan_in = in·k·k;
* ``nn.Conv2d(padding=p)``: symmetric padding ((p, p), (p, p)) — Flax's ``'SAME'`` pads (0, 1)
  for a stride-2 3×3 conv on an even input, which shifts the sampling grid by one pixel;
* ``nn.BatchNorm2d``: momentum 0.1 in torch terms (= 0.9 in the Flax convention
  m ← momentum·m + (1 − momentum)·batch), ε = 1e-5, running variance from the *unbiased* batch
  variance (normalisation itself uses the biased one);
* ``nn.LayerNorm``: ε = 1e-5, two-pass variance.

With ``torch_defaults=False`` the layers fall back to Flax's defaults (LeCun-normal weights, zero
biases, ``'SAME'`` padding, BatchNorm momentum 0.99 with biased running variance, LayerNorm ε = 1e-6).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from nets.init import torch_uniform

TORCH_BN_MOMENTUM = 0.9  # Flax convention; torch's momentum=0.1
TORCH_BN_EPS = 1e-5
TORCH_LN_EPS = 1e-5
FLAX_BN_MOMENTUM = 0.99
FLAX_LN_EPS = 1e-6


class BatchNorm(nnx.Module):
    r"""Batch normalisation over every axis but the last (channels), torch- or Flax-style.

    Training mode (``use_running_average=False``, set by ``model.train()``):

    .. math::
        y = \gamma \frac{x - \mu_B}{\sqrt{\sigma_B^2 + \epsilon}} + \beta,\qquad
        m \leftarrow \rho\, m + (1-\rho)\, \mu_B,\qquad
        v \leftarrow \rho\, v + (1-\rho)\, c\, \sigma_B^2,

    with μ_B, σ²_B the batch mean and biased variance over the N = ∏ non-channel sizes entries,
    c = N/(N−1) when ``unbiased_running_var`` (PyTorch) and c = 1 otherwise (Flax).
    Evaluation mode (``model.eval()``) normalises with (m, v) instead.

    Args:
      num_features: number of channels C (last axis).
      momentum: ρ in the Flax convention (torch's momentum is 1 − ρ).
      epsilon: ε.
      unbiased_running_var: store the unbiased batch variance in the running average (torch).
      use_running_average: start in evaluation mode.
      param_dtype: dtype of γ, β, m, v.
    """

    def __init__(
        self,
        num_features: int,
        *,
        momentum: float = TORCH_BN_MOMENTUM,
        epsilon: float = TORCH_BN_EPS,
        unbiased_running_var: bool = True,
        use_running_average: bool = False,
        param_dtype=jnp.float32,
    ):
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.num_features = num_features
        self.momentum = momentum
        self.epsilon = epsilon
        self.unbiased_running_var = unbiased_running_var
        self.use_running_average = use_running_average
        self.scale = nnx.Param(jnp.ones((num_features,), param_dtype))
        self.bias = nnx.Param(jnp.zeros((num_features,), param_dtype))
        self.mean = nnx.BatchStat(jnp.zeros((num_features,), param_dtype))
        self.var = nnx.BatchStat(jnp.ones((num_features,), param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        """Normalised x, same shape (…, C)."""
        if x.shape[-1] != self.num_features:
            raise ValueError(f"BatchNorm expects {self.num_features} channels, got {x.shape[-1]}")
        if self.use_running_average:
            mean, var = self.mean.get_value(), self.var.get_value()
        else:
            axes = tuple(range(x.ndim - 1))
            n = math.prod(x.shape[:-1])
            mean = jnp.mean(x, axis=axes)
            var = jnp.mean(jnp.square(x - mean), axis=axes)  # two-pass, as torch
            correction = n / (n - 1) if (self.unbiased_running_var and n > 1) else 1.0
            rho = self.momentum
            old_mean, old_var = self.mean.get_value(), self.var.get_value()
            self.mean.set_value((rho * old_mean + (1 - rho) * mean).astype(old_mean.dtype))
            self.var.set_value((rho * old_var + (1 - rho) * correction * var).astype(old_var.dtype))
        inv = self.scale.get_value() * jax.lax.rsqrt(var + self.epsilon)
        return (x - mean) * inv + self.bias.get_value()


def batch_norm(num_features: int, *, torch_defaults: bool, param_dtype) -> BatchNorm:
    """``nn.BatchNorm2d`` numerics (ρ = 0.9, ε = 1e-5, unbiased running var) or Flax's (ρ = 0.99)."""
    if torch_defaults:
        return BatchNorm(num_features, param_dtype=param_dtype)
    return BatchNorm(
        num_features,
        momentum=FLAX_BN_MOMENTUM,
        epsilon=TORCH_BN_EPS,  # Flax's BatchNorm default ε is also 1e-5
        unbiased_running_var=False,
        param_dtype=param_dtype,
    )


def layer_norm(dim: int, *, torch_defaults: bool, param_dtype, rngs: nnx.Rngs) -> nnx.LayerNorm:
    """``nn.LayerNorm`` (ε = 1e-5, two-pass variance) or Flax's default (ε = 1e-6)."""
    if torch_defaults:
        return nnx.LayerNorm(
            dim,
            epsilon=TORCH_LN_EPS,
            use_fast_variance=False,
            param_dtype=param_dtype,
            rngs=rngs,
        )
    return nnx.LayerNorm(dim, epsilon=FLAX_LN_EPS, param_dtype=param_dtype, rngs=rngs)


def conv(
    in_ch: int,
    out_ch: int,
    kernel: int,
    *,
    stride: int = 1,
    padding: int = 0,
    bias: bool = True,
    torch_defaults: bool,
    param_dtype,
    rngs: nnx.Rngs,
    kernel_init=None,
    bias_init=None,
) -> nnx.Conv:
    """``nn.Conv2d(in_ch, out_ch, kernel, stride, padding, bias)`` on NHWC inputs.

    torch_defaults: symmetric padding ((p, p), (p, p)) and U(±1/√(in_ch·k·k)) weights and biases;
    otherwise Flax's ``'SAME'`` (p > 0) / ``'VALID'`` padding and LeCun-normal weights, zero biases.
    ``kernel_init`` / ``bias_init`` override the initialisers (e.g. torchvision's VGG init).
    """
    if torch_defaults:
        pad = ((padding, padding), (padding, padding))
        fan_in = in_ch * kernel * kernel
        kw = dict(kernel_init=torch_uniform(fan_in), bias_init=torch_uniform(fan_in))
    else:
        pad = "SAME" if padding else "VALID"
        kw = {}
    if kernel_init is not None:
        kw["kernel_init"] = kernel_init
    if bias_init is not None:
        kw["bias_init"] = bias_init
    return nnx.Conv(
        in_ch,
        out_ch,
        (kernel, kernel),
        strides=(stride, stride),
        padding=pad,
        use_bias=bias,
        param_dtype=param_dtype,
        rngs=rngs,
        **kw,
    )


def linear(
    fan_in: int,
    fan_out: int,
    *,
    bias: bool = True,
    torch_defaults: bool,
    param_dtype,
    rngs: nnx.Rngs,
    kernel_init=None,
    bias_init=None,
) -> nnx.Linear:
    """``nn.Linear(fan_in, fan_out)``: U(±1/√fan_in) weights and biases, or Flax's defaults."""
    kw = (
        dict(kernel_init=torch_uniform(fan_in), bias_init=torch_uniform(fan_in))
        if torch_defaults
        else {}
    )
    if kernel_init is not None:
        kw["kernel_init"] = kernel_init
    if bias_init is not None:
        kw["bias_init"] = bias_init
    return nnx.Linear(fan_in, fan_out, use_bias=bias, param_dtype=param_dtype, rngs=rngs, **kw)


def gelu(x: jax.Array, *, exact: bool) -> jax.Array:
    """GELU: exact x·Φ(x) with the erf (torch's ``nn.GELU()``) or the tanh approximation (Flax)."""
    return jax.nn.gelu(x, approximate=not exact)


POOLS = ("max", "avg")


def pool2d(x: jax.Array, size: int, kind: str = "max") -> jax.Array:
    r"""Non-overlapping ``size``×``size`` pooling (stride = size, no padding) of NHWC images.

    .. math::
        y_{n,i,j,c} = \max_{0 \le a, b < s} x_{n, si + a, sj + b, c}
        \quad\text{(or the mean over the window)},

    as ``nn.MaxPool2d(s)`` / ``nn.AvgPool2d(s)`` (rows and columns beyond a multiple of s are
    dropped). Computed as a reshape and a reduction: the same values as ``nnx.max_pool`` /
    ``nnx.avg_pool``, but the gradient is elementwise instead of XLA's ``select_and_scatter`` /
    windowed sum, 4–5× faster on XLA:CPU (benchmarks/bench_zoo.py). At exact ties in a max
    window the gradient is split equally among the tied entries (``select_and_scatter`` gives it
    to the first); after a ReLU the tied zeros get no gradient either way.

    Args:
      x: images (n, H, W, C).
      size: window and stride s ≥ 1.
      kind: ``'max'`` or ``'avg'``.

    Returns:
      (n, ⌊H/s⌋, ⌊W/s⌋, C).
    """
    if kind not in POOLS:
        raise ValueError(f"unknown pooling kind {kind!r}; choose one of {list(POOLS)}")
    if x.ndim != 4:
        raise ValueError(f"pool2d needs NHWC images (n, H, W, C), got shape {x.shape}")
    if not 1 <= size <= min(x.shape[1], x.shape[2]):
        raise ValueError(f"pool size must be in [1, min(H, W)] for shape {x.shape}, got {size}")
    n, h, w, c = x.shape
    ho, wo = h // size, w // size
    blocks = x[:, : ho * size, : wo * size].reshape(n, ho, size, wo, size, c)
    return blocks.max(axis=(2, 4)) if kind == "max" else blocks.mean(axis=(2, 4))


def adaptive_avg_pool(x: jax.Array, out: int) -> jax.Array:
    r"""``nn.AdaptiveAvgPool2d(out)`` on NHWC images: an out × out grid of possibly overlapping
    bins,

    .. math::
        y_{n,i,j,c} = \operatorname{mean}\{x_{n,a,b,c} :
        \lfloor iH/o \rfloor \le a < \lceil (i+1)H/o \rceil,\;
        \lfloor jW/o \rfloor \le b < \lceil (j+1)W/o \rceil\},

    so an H that is a multiple of o gives the plain (H/o)-pooling and H < o replicates rows
    (VGG16's classifier input on 32×32 images, where H = 1 and o = 7).

    Args:
      x: images (n, H, W, C).
      out: output height and width o ≥ 1.

    Returns:
      (n, o, o, C).
    """
    if x.ndim != 4:
        raise ValueError(f"adaptive_avg_pool needs NHWC images (n, H, W, C), got shape {x.shape}")
    if out < 1:
        raise ValueError(f"output size must be >= 1, got {out}")

    def pool_axis(x, axis):
        size = x.shape[axis]
        bins = []
        for i in range(out):
            lo, hi = (i * size) // out, -((-(i + 1) * size) // out)
            bins.append(jnp.mean(jax.lax.slice_in_dim(x, lo, hi, axis=axis), axis=axis))
        return jnp.stack(bins, axis=axis)

    return pool_axis(pool_axis(x, 1), 2)


def check_images(x: jax.Array, size: int | tuple[int, ...], channels: int, model: str) -> None:
    """Raise ValueError unless x has shape (n, H, W, channels) with H = W in ``size``."""
    sizes = (size,) if isinstance(size, int) else size
    ok = x.ndim == 4 and x.shape[1] == x.shape[2] and x.shape[1] in sizes
    if not ok or x.shape[3] != channels:
        want = " or ".join(f"(n, {s}, {s}, {channels})" for s in sizes)
        raise ValueError(f"{model} expects NHWC images x of shape {want}, got {tuple(x.shape)}")


def count_params(model: nnx.Module) -> int:
    """Number of trainable parameters (``nnx.Param`` entries; BatchNorm running stats excluded).

    Works on abstract models from ``nnx.eval_shape`` as well, e.g.
    ``count_params(nnx.eval_shape(lambda: ResNet18(rngs=nnx.Rngs(0))))`` allocates nothing.
    """
    leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
    return int(sum(math.prod(leaf.shape) for leaf in leaves))
