r"""Convolution → activation → pooling as one convolution on the pooling windows.

For a stride-1 convolution followed by non-overlapping b×b pooling (LeNet-5's conv → ReLU →
max-pool), regroup the image into b×b blocks ("space to depth") and the kernel accordingly:

.. math::
    \tilde x_{n,I,J,(r,s,c)} = x_{n,\,bI+r,\,bJ+s,\,c},\qquad
    \tilde W_{P,Q,(r,s,c),(u,v,o)} = W_{bP+r-u,\,bQ+s-v,\,c,\,o}
    \quad(\text{zero outside } [0,k_h)\times[0,k_w)),

with P, Q ∈ [0, K) and K = ⌈(b + k − 1)/b⌉ kernel blocks. Then the valid convolution
:math:`\tilde z = \tilde x \star \tilde W` holds the convolution output of every position of
every pooling window,

.. math::
    \tilde z_{n,i,j,(u,v,o)} = z_{n,\,bi+u,\,bj+v,\,o} = \sum_{a,d,c} x_{n,\,bi+u+a,\,bj+v+d,\,c}\,W_{a,d,c,o},

(substitute a = bP + r − u: each a ∈ [0, k) is reached by exactly one (P, r)), so the pooled
output is a reduction over the (u, v) channel groups of z̃ — no window gather, and the gradient of
the pooling is elementwise.

Why: a convolution is an im2col GEMM of inner size k_h·k_w·C and width O, too thin for the vector
units at LeNet-5's channel counts; the blocked form is K²b²C × b²O (b = 2: 36 × 24 for conv1,
216 × 64 for conv2) at (K/k)²b² = 1.44× the multiply-adds, a gain for thin layers only (timings in
``benchmarks/bench_zoo.py``); use the plain convolution for wide layers (C, O ≳ 64).

Same values as ``pool2d(act(conv(x)), b, kind)`` up to float round-off (a different summation
order); tests/nets/test_conv_pool.py checks values and gradients against that composition.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nets.models.layers import POOLS, pool2d

__all__ = ["blocked_kernel_index", "conv_pool"]

_DIMENSIONS = ("NHWC", "HWIO", "NHWC")
_PADDINGS = ("SAME", "SAME_LOWER", "VALID")  # the strings lax.padtype_to_pads knows


@functools.lru_cache(maxsize=64)
def blocked_kernel_index(kh: int, kw: int, c: int, o: int, b: int) -> np.ndarray:
    """Gather index of the blocked kernel W̃ into ``concat(W.ravel(), [0])``.

    Args:
      kh, kw: kernel size; c, o: input and output channels; b: block (pooling window) size.

    Returns:
      int32 array (K_h, K_w, b·b·c, b·b·o), K = ⌈(b + k − 1)/b⌉; entries equal to kh·kw·c·o
      select the appended zero (kernel offsets outside [0, k)).
    """
    if min(kh, kw, c, o, b) < 1:
        raise ValueError(f"sizes must be ≥ 1, got {kh=}, {kw=}, {c=}, {o=}, {b=}")
    big_h, big_w = -(-(b + kh - 1) // b), -(-(b + kw - 1) // b)
    p, q, r, s, u, v = np.ix_(*(np.arange(n) for n in (big_h, big_w, b, b, b, b)))
    # kernel offsets a = bP + r − u, d = bQ + s − v: shapes (Kh, 1, b, 1, b, 1), (1, Kw, 1, b, 1, b)
    a, d = b * p + r - u, b * q + s - v
    inside = (a >= 0) & (a < kh) & (d >= 0) & (d < kw)
    flat = (a * kw + d) * c * o  # offset of W[a, d, 0, 0] in W.ravel()
    flat = np.where(inside, flat, -1)  # (Kh, Kw, r, s, u, v)
    cc, oo = np.arange(c)[:, None], np.arange(o)[None, :]
    idx = flat[..., None, None] + cc * o + oo  # (Kh, Kw, r, s, u, v, c, o)
    idx = np.where(flat[..., None, None] < 0, kh * kw * c * o, idx)
    idx = idx.transpose(0, 1, 2, 3, 6, 4, 5, 7)  # (Kh, Kw, r, s, c, u, v, o)
    return idx.reshape(big_h, big_w, b * b * c, b * b * o).astype(np.int32)


def _fast_path(conv: nnx.Module) -> bool:
    def ones(v) -> bool:
        return v is None or all(int(e) == 1 for e in np.atleast_1d(v))

    return (
        isinstance(conv, nnx.Conv)
        and len(conv.kernel_size) == 2
        and ones(conv.strides)
        and ones(conv.kernel_dilation)
        and ones(conv.input_dilation)
        and conv.feature_group_count == 1
        and conv.mask is None
        and not (isinstance(conv.padding, str) and conv.padding not in _PADDINGS)
    )


def conv_pool(
    conv: nnx.Conv,
    x: jax.Array,
    *,
    size: int,
    kind: str = "max",
    act: Callable[[jax.Array], jax.Array] | None = None,
    monotone: bool = False,
) -> jax.Array:
    r"""``pool2d(act(conv(x)), size, kind)`` computed as one convolution on size×size blocks.

    See the module docstring for the blocked form z̃ = x̃ ⋆ W̃. The bias and the activation are
    applied to z̃ (elementwise, so the same as on z), then max or mean over the window's (u, v)
    channel groups (``monotone``: max first, then bias and activation). Rows and columns of z
    beyond a multiple of ``size`` are dropped, as ``pool2d`` / ``nn.MaxPool2d`` drop them.
    Convolutions with strides, dilations, groups, a mask or circular/causal padding fall back to
    the composition itself.

    Args:
      conv: an ``nnx.Conv`` on NHWC images (its padding, bias, dtype, precision and
        ``conv_general_dilated`` are used).
      x: images (n, H, W, C).
      size: pooling window and stride b ≥ 1.
      kind: ``'max'`` or ``'avg'``.
      act: elementwise activation between the convolution and the pooling (``None``: identity).
      monotone: ``act`` is nondecreasing (ReLU, tanh, sigmoid, GELU is *not*). Max pooling then
        commutes with it and with the bias, max_w act(z_w + β) = act(max_w z_w + β), so both are
        applied to the pooled output: the same values with b² times fewer evaluations
        (benchmarks/bench_zoo.py). Ignored for average pooling.

    Returns:
      (n, ⌊H_o/b⌋, ⌊W_o/b⌋, O), H_o × W_o the convolution's output size.
    """
    if kind not in POOLS:
        raise ValueError(f"unknown pooling kind {kind!r}; choose one of {list(POOLS)}")
    if int(size) != size or size < 1:
        raise ValueError(f"pool size must be an integer ≥ 1, got {size!r}")
    act = (lambda z: z) if act is None else act
    if not _fast_path(conv):
        return pool2d(act(conv(x)), size, kind)
    if x.ndim != 4 or x.shape[-1] != conv.in_features:
        raise ValueError(
            f"conv_pool needs NHWC images (n, H, W, {conv.in_features}), got shape {x.shape}"
        )
    kernel = conv.kernel.get_value()
    bias = conv.bias.get_value() if conv.use_bias else None
    x, kernel, bias = conv.promote_dtype((x, kernel, bias), dtype=conv.dtype)
    kh, kw, c, o = kernel.shape
    pads = conv.padding
    if isinstance(pads, str):
        pads = jax.lax.padtype_to_pads(x.shape[1:3], (kh, kw), (1, 1), pads)
    elif isinstance(pads, int):
        pads = ((pads, pads), (pads, pads))
    pads = tuple(tuple(int(e) for e in p) if not isinstance(p, int) else (p, p) for p in pads)
    x = jnp.pad(x, ((0, 0), *pads, (0, 0)))
    n, h, w, _ = x.shape
    b = int(size)
    ho, wo = (h - kh + 1) // b, (w - kw + 1) // b  # pooled output size
    if ho < 1 or wo < 1:
        raise ValueError(
            f"pool size must be in [1, conv output size] for input {x.shape} and kernel "
            f"{(kh, kw)}, got {size}"
        )
    idx = blocked_kernel_index(kh, kw, c, o, b)
    big_h, big_w = idx.shape[:2]
    hi, wi = (ho + big_h - 1) * b, (wo + big_w - 1) * b  # input rows/cols the blocks read
    # extra zero rows/cols meet only zero entries of W̃ (module docstring); surplus ones are unused
    x = jnp.pad(x[:, :hi, :wi], ((0, 0), (0, max(hi - h, 0)), (0, max(wi - w, 0)), (0, 0)))
    xb = x.reshape(n, hi // b, b, wi // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    xb = xb.reshape(n, hi // b, wi // b, b * b * c)
    wb = jnp.concatenate([kernel.reshape(-1), jnp.zeros((1,), kernel.dtype)])[idx]
    z = conv.conv_general_dilated(  # the layer's own (nets.xla_cpu.loop_friendly swaps it)
        xb, wb, (1, 1), "VALID", dimension_numbers=_DIMENSIONS, precision=conv.precision
    ).reshape(n, ho, wo, b * b, o)
    if kind == "max" and monotone:  # max_w act(z_w + β) = act(max_w z_w + β)
        z = z.max(axis=3)
        return act(z if bias is None else z + bias)
    if bias is not None:
        z = z + bias
    return act(z).max(axis=3) if kind == "max" else act(z).mean(axis=3)
