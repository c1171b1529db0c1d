"""How nets compiles its programs: ``jax.jit`` with per-program XLA:CPU options.

XLA:CPU (jaxlib 0.10) hands three kinds of operations to the YNNPACK library by default: single
dots, single convolutions and reductions (the ``xla_cpu_experimental_ynn_fusion_type`` list
``INDIVIDUAL_DOT, INDIVIDUAL_CONVOLUTION, REDUCE``). For the small-channel convolutions of
LeNet-5 the YNNPACK path is slow for the weight gradient, a convolution contracting over the
batch: measured on the 2-core CPU of benchmarks/bench_zoo.py (batch 512, ms, best of 20), conv1
(32×32×1 → 6) forward + weight gradient 68 → 19, conv2 (14×14×6 → 16) 15 → 6.1; the LeNet-5
training step (AdamW, batch 512) 108–117 → 44–46 ms. Keeping YNNPACK for the dots only
(``CPU_OPTIONS``) gives those numbers; removing the convolution alone left the step at ~61 ms, the
rest came from the reductions. The MLP steps (dots only) are unchanged (bench_training.py,
bench_vmap_sweep.py: within 3 %). Since LeNet-5 computes conv → ReLU → pool as one blocked
convolution (:mod:`nets.models.conv_pool`) its step is 21–25 ms with the options and 46 ms
without.

nets applies them to the programs of convolutional models only (``options_if=`` of :func:`jit`,
:func:`nets.step.uses_cpu_options`): for the MLP and the transformer they change nothing in
training but slow the small reductions of D_LR at the log points (1.5 → 1.9 ms at 384 × 512).

The options are passed per program (``jax.jit(..., compiler_options=...)``), so importing nets
changes no global XLA state and other programs of the process compile as before. They apply on
the CPU backend only, and only where the installed jaxlib knows them: :func:`compiler_options`
compiles a one-line probe once per process and returns ``None`` (plain ``jax.jit``) where XLA
rejects the option (older or newer jaxlib), so an unknown option never reaches a real program.
The results are the same to float32 round-off (tests/nets/test_compiler.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

__all__ = ["CPU_OPTIONS", "compiler_options", "jit"]

#: XLA debug options of nets' convolutional programs on CPU: YNNPACK for single dots only.
CPU_OPTIONS: dict[str, str] = {
    "xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"
}


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
    """The XLA options for a nets program on ``backend`` (default: jax's default backend).

    Returns :data:`CPU_OPTIONS` on CPU when the installed XLA accepts them, else ``None``
    (GPU/TPU, or a jaxlib without the option).
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

    ``options_if(*args, **kwargs)``, when given, decides per call (from the arguments, e.g. a
    static first argument) whether the options apply; ``None`` applies them always. Usable as
    ``jit(f, static_argnums=0)`` or as the decorator ``@jit(static_argnums=0)``. The
    backend is read at the first call of each program, not at import (importing nets initialises
    no backend); each of the two variants (with/without options) is a ``jax.jit`` of its own, so
    jax's compilation cache works as usual. Called inside another ``jit``/``vmap`` trace it is the
    plain ``jax.jit`` (jax accepts compiler options on top-level programs only; the outer program's
    own options apply to it).
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
