"""How closely a run stepped inside a stacked program must equal its own ``nets.train``.

``train_many(vectorize=False)``, the thread batcher and ``lrrich sweep --vmap`` step stacked runs
one after another inside one program (``lax.map``, :data:`nets.step.MODES`). On XLA:CPU each
run then does its own program's arithmetic: bitwise equal (``lrrich.sweep_vmap.VMAP_RTOL = 0``).
On a GPU, XLA may pick other GEMM kernels inside the loop: on an H200 (2026-11-27) the batcher's
bitwise checks failed while its vmapped group held at rtol 1e-4, the tolerance used there.
"""

from __future__ import annotations

import jax
import numpy as np

EXACT = jax.default_backend() == "cpu"
SAME_RUN_RTOL = 0.0 if EXACT else 1e-4  # on the CPU: lrrich.sweep_vmap.VMAP_RTOL


def assert_same_run(got, want, err_msg: str = "") -> None:
    """``got`` equals ``want`` (numbers or arrays; NaN equals NaN) to :data:`SAME_RUN_RTOL`."""
    np.testing.assert_allclose(got, want, rtol=SAME_RUN_RTOL, atol=0, err_msg=err_msg)


def assert_same_records(got: list[dict], want: list[dict]) -> None:
    """Equal log records: the same keys, integers and strings equal, floats by
    :func:`assert_same_run` (bitwise on the CPU)."""
    assert [sorted(r) for r in got] == [sorted(r) for r in want]
    for g, w in zip(got, want, strict=True):
        for k, v in w.items():
            if isinstance(v, float):
                assert_same_run(g[k], v, err_msg=k)
            else:
                assert g[k] == v, k
