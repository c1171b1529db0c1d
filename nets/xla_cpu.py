r"""Every XLA:CPU workaround of nets, in one place: compiler options, BLAS threads, conv gradients.

Each is a speed fix only — results equal plain jax to float32 round-off (tests/nets/
test_compiler.py, test_convolution.py, test_blas.py) — and each applies on the CPU backend only.
The measurements behind them, for the jaxlib they were taken with, are in the docstrings of
``benchmarks/bench_zoo.py`` (options, convolutions) and ``benchmarks/bench_vmap_sweep.py`` (BLAS).

* **Compiler options** (:data:`CPU_OPTIONS`): YNNPACK for single dots only, not for
  convolutions and reductions, where it is slow for small-channel convolution gradients.
* **Loop-friendly convolution gradients** (:func:`loop_friendly`): XLA:CPU leaves jax's
  convolution gradients as naive loop nests inside a ``while`` body (every ``lax.scan`` of
  training steps); a ``custom_vjp`` writes both in the NHWC/HWIO form it runs fast.
* **One BLAS thread** (:func:`one_blas_thread`, :func:`limit_blas_threads`): OpenBLAS's worker
  threads fight XLA's thread pool for the cores in LAPACK calls (QR, SVD, eigh of D_LR).

:func:`tune` applies the first two to a model in one call: :func:`nets.step.build` trains the
copy it returns and records the options in the :class:`~nets.step.Program`, and :func:`jit`
compiles each program with the options its Program carries. Importing this module changes no
global state and initialises no backend.

The two gradients of the plain convolution (stride s, padding (l, h), kernel k, input size H,
output size H_o per spatial axis) is written as

.. math::
    \partial x = \mathrm{conv}\big(\mathrm{dilate}_s(\partial y),\ \mathrm{flip}(W)^{\top_{io}};\
      \text{pad } (k-1-l,\ H + l - 1 - (H_o-1)s)\big),\qquad
    \partial W_{a,c,o} = \sum_{n,i} \tilde x_{n,\,si+a,\,c}\, \partial y_{n,i,o},

the second as a convolution of x̃ᵀ (channels as batch, batch as features; x̃ the input padded by
(l, k + (H_o−1)s − H − l)) with ∂y (kernel dilation s).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax import lax
from threadpoolctl import threadpool_limits

__all__ = [
    "CPU_OPTIONS",
    "compiler_options",
    "conv_general_dilated",
    "conv_layers",
    "has_convolution",
    "jit",
    "limit_blas_threads",
    "loop_friendly",
    "one_blas_thread",
    "program_jit",
    "tune",
]

#: XLA debug options of nets' convolutional programs on CPU: YNNPACK for single dots only.
CPU_OPTIONS: dict[str, str] = {
    "xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"
}

# ---------------------------------------------------------------------------- compiler options


@functools.cache
def _accepted(options: tuple[tuple[str, str], ...]) -> bool:
    """Whether this jaxlib's XLA compiles a program with ``options`` (one tiny probe per process)."""
    try:
        x = jax.device_put(np.float32(0), jax.devices("cpu")[0])
        jax.jit(lambda x: x + 1, compiler_options=dict(options)).lower(x).compile()
    except Exception:  # noqa: BLE001 — unknown option/value (XLA error) or no compiler_options (TypeError)
        return False
    return True


def compiler_options(backend: str | None = None) -> dict[str, str] | None:
    """:data:`CPU_OPTIONS` on CPU when the installed XLA accepts them, else ``None``.

    Args:
      backend: the platform (default: jax's default backend, read now, not at import).
    """
    backend = jax.default_backend() if backend is None else backend
    if backend != "cpu" or not CPU_OPTIONS:
        return None
    options = tuple(sorted(CPU_OPTIONS.items()))
    return dict(options) if _accepted(options) else None


def _tracing(args: tuple, kwargs: dict) -> bool:
    """Whether the call is being traced by an outer transformation (jax rejects options there)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves((args, kwargs)))


def jit(
    fun: Callable | None = None,
    *,
    options_if: Callable[..., bool] | None = None,
    **jit_kwargs: Any,
) -> Callable:
    """``jax.jit(fun, **jit_kwargs)`` compiled with :func:`compiler_options` of the default backend.

    ``options_if(*args, **kwargs)``, when given, decides per call whether the options apply;
    ``None`` applies them always. Usable as ``jit(f, static_argnums=0)`` or as the decorator
    ``@jit(static_argnums=0)``. Each variant (with/without options) is a ``jax.jit`` of its own,
    so jax's compilation cache works as usual. Inside another trace it is the plain ``jax.jit``
    (jax accepts compiler options on top-level programs only).
    """
    if fun is None:
        return functools.partial(jit, options_if=options_if, **jit_kwargs)
    plain = jax.jit(fun, **jit_kwargs)
    tuned: dict[tuple, Callable] = {}

    @functools.wraps(fun)
    def call(*args, **kwargs):
        options = compiler_options()
        if options is not None and options_if is not None and not options_if(*args, **kwargs):
            options = None
        if options is None or _tracing(args, kwargs):  # nested in another trace: inlined there
            return plain(*args, **kwargs)
        key = tuple(sorted(options.items()))
        if key not in tuned:
            tuned[key] = jax.jit(fun, compiler_options=options, **jit_kwargs)
        return tuned[key](*args, **kwargs)

    return call


def _program_wants_options(program, *args, **kwargs) -> bool:
    return bool(getattr(program, "cpu_options", False))


#: ``jit`` for functions whose first (static) argument is a :class:`nets.step.Program`: the
#: options apply where :func:`tune` asked for them (``Program.cpu_options``).
program_jit = functools.partial(jit, options_if=_program_wants_options)

# ------------------------------------------------------------------ loop-friendly convolutions

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
    # XLA:CPU only: it leaves permuted-layout convolutions as loop nests inside a while body
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


def conv_layers(model: nnx.Module) -> list[nnx.Conv]:
    """The ``nnx.Conv`` layers of ``model``, in graph order."""
    modules = nnx.iter_modules(model) if hasattr(nnx, "iter_modules") else model.iter_modules()
    return [module for _, module in modules if isinstance(module, nnx.Conv)]


def has_convolution(model: nnx.Module) -> bool:
    """Whether ``model`` contains an ``nnx.Conv``."""
    return bool(conv_layers(model))


def loop_friendly(model: nnx.Module) -> nnx.Module:
    """A copy of ``model`` whose ``nnx.Conv`` layers use :func:`conv_general_dilated`.

    The model itself keeps ``lax.conv_general_dilated``, so forward-mode autodiff (``jax.jvp``,
    ``jax.hessian``, the NTK of :mod:`metrics.kernels`) still works on it — a ``custom_vjp`` has
    no forward mode. Write your own ``lax.scan`` over training steps of a conv net on this copy.
    """
    model = nnx.merge(*nnx.split(model))
    for layer in conv_layers(model):
        layer.conv_general_dilated = conv_general_dilated
    return model


def tune(model: nnx.Module) -> tuple[nnx.Module, bool]:
    """The model to train and whether its programs take :data:`CPU_OPTIONS` (one call per run).

    Convolutional models get both workarounds: the :func:`loop_friendly` copy, and the options
    (they leave dots-only programs unchanged but slow D_LR's small reductions, so MLPs and the
    transformer keep XLA's defaults).

    Returns:
      (model or its loop-friendly copy, whether :func:`program_jit` applies the options).
    """
    if not has_convolution(model):
        return model, False
    return loop_friendly(model), True


# ------------------------------------------------------------------------------- BLAS threads


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the body with every loaded BLAS library (OpenBLAS, MKL, BLIS) limited to one thread.

    OpenBLAS's default one-thread-per-core workers compete with XLA's pool for the same cores;
    every LAPACK problem of this project is small or tall-and-skinny, where one thread loses
    nothing. Settings are restored on exit.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def limit_blas_threads() -> None:
    """Limit every loaded BLAS library to one thread for the rest of the process (entry points).

    Libraries loaded later are not affected: call it after importing ``jax`` and ``numpy`` (jax
    binds its LAPACK kernels to SciPy's OpenBLAS on first use, which :mod:`scipy.linalg` loads;
    this function imports it first so the limit reaches it). ``OPENBLAS_NUM_THREADS=1`` in the
    environment before Python starts has the same effect.
    """
    import numpy  # noqa: F401
    import scipy.linalg  # noqa: F401

    threadpool_limits(limits=1, user_api="blas")
