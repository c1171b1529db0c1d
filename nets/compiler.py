"""Alias of the compiler-option part of :mod:`nets.xla_cpu` (the names the README documents)."""

from nets.xla_cpu import CPU_OPTIONS, compiler_options, jit

__all__ = ["CPU_OPTIONS", "compiler_options", "jit"]
