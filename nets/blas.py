"""Alias of the BLAS-thread part of :mod:`nets.xla_cpu` (the names the README documents)."""

from nets.xla_cpu import limit_blas_threads, one_blas_thread

__all__ = ["limit_blas_threads", "one_blas_thread"]
