"""Test-suite settings: float64 on (sims are float64 by design), non-interactive plotting, one
OpenBLAS thread (:mod:`nets.blas`)."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # nets/blas.py: LAPACK ~100× faster on 2 cores

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

from nets.blas import limit_blas_threads  # noqa: E402

limit_blas_threads()  # in case NumPy's OpenBLAS was loaded before this file set the variable

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module.

    The suite compiles thousands of XLA:CPU programs in one process and each keeps its code mapped
    in memory; one CI run segfaulted inside the XLA compiler after ~500 tests, late in the
    session. Modules share no jitted state that matters for speed, so freeing the caches between
    modules costs a few recompilations and keeps the process small.
    """
    yield
    jax.clear_caches()
