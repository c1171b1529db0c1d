r"""2-D convolution whose gradients XLA:CPU computes fast inside loops (``lax.scan``).

jax differentiates ``lax.conv_general_dilated`` into two more convolutions with permuted
dimension numbers: the input gradient takes the kernel as "O, I" swapped, the kernel gradient
contracts over the batch (``dim_labels=f01b_i01o->01bf``). XLA:CPU's convolution
canonicalisation rewrites these into its library's NHWC/HWIO form in a top-level program, but not
in the body of a ``while`` loop — every ``lax.scan`` of training steps, i.e. every chunk of
``nets.train``. There they are emitted as naive loop nests: measured on the 2-core CPU of
benchmarks/bench_zoo.py (jaxlib 0.10.2), the kernel gradient of LeNet-5's blocked conv1
(512×16×16×4 → 24, 3×3) takes 8.4 ms in a jitted function and 200 ms in a one-step scan;
``nets.train`` of LeNet-5 ran at ~400 ms per step against 21 ms per step in the benchmark's
jitted step.

:func:`conv_general_dilated` is a drop-in for ``lax.conv_general_dilated`` (``nnx.Conv`` takes
it as its ``conv_general_dilated``; :func:`loop_friendly` swaps it into a model's copy) that,
for the plain case — NHWC images, HWIO kernel, no dilation, one group — has a ``custom_vjp``
writing both gradients as convolutions in the canonical form themselves, with explicit
transposes (stride s, padding (l, h), kernel k, input size H, output size H_o per spatial axis):

.. math::
    \partial x = \mathrm{conv}\big(\mathrm{dilate}_s(\partial y),\ \mathrm{flip}(W)^{\top_{io}};\
      \text{pad } (k-1-l,\ H + l - 1 - (H_o-1)s)\big),\qquad
    \partial W_{a,c,o} = \sum_{n,i} \tilde x_{n,\,si+a,\,c}\, \partial y_{n,i,o},

the second as a convolution of x̃ᵀ (channels as batch, batch as features; x̃ the input padded
by (l, k + (H_o−1)s − H − l)) with ∂y (kernel dilation s). The same values as jax's own
transpose rules up to float round-off (tests/nets/test_convolution.py); anything else (other
layouts, dilations, groups, ``preferred_element_type``) is ``lax.conv_general_dilated`` itself.
The rewrite is chosen when the program is lowered (``lax.platform_dependent``): on CPU only;
other backends differentiate with jax's own rules.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx
from jax import lax

__all__ = ["conv_general_dilated", "conv_layers", "loop_friendly"]

_NHWC = ("NHWC", "HWIO", "NHWC")
_NHWC_NUMBERS = lax.conv_dimension_numbers((1, 1, 1, 1), (1, 1, 1, 1), _NHWC)


def _pairs(padding, x_shape, w_shape, strides) -> tuple[tuple[int, int], ...]:
    if isinstance(padding, str):
        return tuple(lax.padtype_to_pads(x_shape[1:3], w_shape[:2], strides, padding))
    return tuple((int(lo), int(hi)) for lo, hi in padding)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _conv(x, w, strides, pads, precision):
    return lax.conv_general_dilated(
        x, w, strides, pads, dimension_numbers=_NHWC, precision=precision
    )


def _conv_fwd(x, w, strides, pads, precision):
    return _conv(x, w, strides, pads, precision), (x, w)


def _canonical_grads(strides, pads, precision, x, w, dy):
    """(∂x, ∂W) as two NHWC/HWIO convolutions with explicit transposes (module docstring)."""
    (kh, kw), (h, wd), out = w.shape[:2], x.shape[1:3], dy.shape[1:3]
    sizes = ((kh, h, out[0]), (kw, wd, out[1]))
    # input gradient: the transposed convolution of the dilated ∂y with the flipped kernel
    axes = list(zip(sizes, pads, strides, strict=True))
    dx_pads = [(k - 1 - lo, n + lo - 1 - (m - 1) * s) for (k, n, m), (lo, _), s in axes]
    w_t = jnp.flip(w, (0, 1)).transpose(0, 1, 3, 2)
    dx = lax.conv_general_dilated(
        dy, w_t, (1, 1), dx_pads, lhs_dilation=strides, dimension_numbers=_NHWC,
        precision=precision,
    )  # fmt: skip
    # kernel gradient: channels as the batch, the batch as the contracted features
    crop = [(lo, k + (m - 1) * s - n - lo) for (k, n, m), (lo, _), s in axes]
    zero = jnp.zeros((), x.dtype)
    x_t = lax.pad(x, zero, [(0, 0, 0), *((lo, hi, 0) for lo, hi in crop), (0, 0, 0)])
    dw = lax.conv_general_dilated(
        x_t.transpose(3, 1, 2, 0), dy.transpose(1, 2, 0, 3), (1, 1), "VALID",
        rhs_dilation=strides, dimension_numbers=_NHWC, precision=precision,
    )  # fmt: skip
    return dx.astype(x.dtype), dw.transpose(1, 2, 0, 3).astype(w.dtype)


def _stock_grads(strides, pads, precision, x, w, dy):
    """(∂x, ∂W) by jax's own transpose rules (GPU/TPU: their libraries take any layout)."""
    conv = lambda x, w: lax.conv_general_dilated(  # noqa: E731
        x, w, strides, pads, dimension_numbers=_NHWC, precision=precision
    )
    return jax.vjp(conv, x, w)[1](dy)


def _conv_bwd(strides, pads, precision, residuals, dy):
    x, w = residuals
    static = (strides, pads, precision)
    return lax.platform_dependent(
        x, w, dy,
        cpu=functools.partial(_canonical_grads, *static),
        default=functools.partial(_stock_grads, *static),
    )  # fmt: skip


_conv.defvjp(_conv_fwd, _conv_bwd)


def conv_general_dilated(
    lhs,
    rhs,
    window_strides,
    padding,
    lhs_dilation=None,
    rhs_dilation=None,
    dimension_numbers=None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    precision=None,
    preferred_element_type=None,
    **kwargs,
):
    """``lax.conv_general_dilated`` with loop-friendly gradients in the plain NHWC/HWIO case.

    Same signature and values; see the module docstring. The ``custom_vjp`` path applies to 2-D
    NHWC × HWIO → NHWC convolutions without dilation, groups or ``preferred_element_type``, of
    matching floating dtypes; otherwise the call is forwarded unchanged.
    """
    plain = (
        lhs.ndim == 4
        and rhs.ndim == 4
        and _is_nhwc(dimension_numbers, lhs.shape, rhs.shape)
        and all(d == 1 for d in (lhs_dilation or (1, 1)))
        and all(d == 1 for d in (rhs_dilation or (1, 1)))
        and feature_group_count == 1
        and batch_group_count == 1
        and preferred_element_type is None
        and not any(v is not None for v in kwargs.values())
        and lhs.dtype == rhs.dtype
        and jnp.issubdtype(lhs.dtype, jnp.floating)
    )
    if not plain:
        return lax.conv_general_dilated(
            lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
            feature_group_count, batch_group_count, precision, preferred_element_type, **kwargs,
        )  # fmt: skip
    strides = tuple(int(s) for s in window_strides)
    pads = _pairs(padding, lhs.shape, rhs.shape, strides)
    return _conv(lhs, rhs, strides, pads, precision)


def _is_nhwc(dimension_numbers, lhs_shape, rhs_shape) -> bool:
    if dimension_numbers is None:  # lax's default is NCHW / OIHW
        return False
    numbers = lax.conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    return numbers == _NHWC_NUMBERS


def loop_friendly(model: nnx.Module) -> nnx.Module:
    """A copy of ``model`` whose ``nnx.Conv`` layers use :func:`conv_general_dilated`.

    nets builds its training programs from this copy (:func:`nets.step.build`); the model itself
    keeps ``lax.conv_general_dilated``, so forward-mode autodiff (``jax.jvp``, ``jax.hessian``,
    the NTK of :mod:`metrics.kernels`) still works on it — a ``custom_vjp`` has no forward mode.
    """
    model = nnx.merge(*nnx.split(model))
    for layer in conv_layers(model):
        layer.conv_general_dilated = conv_general_dilated
    return model


def conv_layers(model: nnx.Module) -> list[nnx.Conv]:
    """The ``nnx.Conv`` layers of ``model``, in graph order."""
    modules = nnx.iter_modules(model) if hasattr(nnx, "iter_modules") else model.iter_modules()
    return [module for _, module in modules if isinstance(module, nnx.Conv)]
