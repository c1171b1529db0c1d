"""One BLAS/LAPACK thread on CPU: the LAPACK calls behind QR, SVD and eigh run 100× faster.

XLA:CPU runs LAPACK (``geqrf``, ``gesdd``, ``syevd``: the QR and SVD of :func:`metrics.dlr`, the
eigendecompositions of the prior measures) through the OpenBLAS that ships with NumPy/SciPy. By
default OpenBLAS starts one worker thread per core, and those workers then compete with XLA's own
thread pool for the same cores. Measured on a 2-core CPU (jax 0.10.2, OpenBLAS 0.3 from the
numpy/scipy wheels), ``jnp.linalg.qr`` of a 1,437 × 10 float32 matrix: **28–56 ms** with the default
threads vs **0.03–0.05 ms** with one (the slow case appears depending on which library loaded
OpenBLAS first, so it comes and goes between processes); a 20,000 × 10 QR 75 ms vs 0.6 ms. One log
point of the digits MLP (forward + D_LR on train and test) went from 60 ms to 0.74 ms. Every
LAPACK problem in this project is small or tall-and-skinny, where one thread loses nothing.

Importing this module changes nothing. :func:`one_blas_thread` is a context manager that limits
the BLAS libraries loaded in the process to one thread and restores their settings on exit
(:func:`nets.train` and :func:`nets.train_many` run inside it); :func:`limit_blas_threads` sets
the limit for the rest of the process and is called by the entry points (the ``lrrich`` command,
the benchmarks, the test suite). Setting ``OPENBLAS_NUM_THREADS=1`` in the environment before
Python starts has the same effect.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from threadpoolctl import threadpool_limits

__all__ = ["one_blas_thread", "limit_blas_threads"]


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the body with every loaded BLAS library (OpenBLAS, MKL, BLIS) limited to one thread."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def limit_blas_threads() -> None:
    """Limit every loaded BLAS library to one thread for the rest of the process (entry points).

    Libraries loaded later are not affected by the call: entry points call it after importing
    ``jax`` and ``numpy`` (jax binds its LAPACK kernels to SciPy's OpenBLAS on first use, which
    :mod:`scipy.linalg` loads; this function imports it first so the limit reaches it).
    """
    import numpy  # noqa: F401
    import scipy.linalg  # noqa: F401

    threadpool_limits(limits=1, user_api="blas")
