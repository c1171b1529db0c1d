"""What JAX sees on this machine: devices, versions, precision, memory (``lrrich info``).

The first thing to run on a new GPU workstation or cluster node: it says whether the CUDA build
of JAX was installed (``pip install -e ".[cuda12]"``) and found the cards, which matmul precision
float32 products get by default, and how much device memory each card offers.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys

__all__ = ["environment", "format_environment"]

# Accelerator plugins of JAX whose installed versions say which CUDA / ROCm / TPU build is present.
_PLUGINS = (
    "jax-cuda12-plugin",
    "jax-cuda12-pjrt",
    "jax-cuda13-plugin",
    "jax-cuda13-pjrt",
    "jax-rocm7-plugin",
    "jax-rocm7-pjrt",
    "libtpu",
)
# Environment variables that change how JAX / XLA use the devices.
_VARIABLES = (
    "JAX_PLATFORMS",
    "XLA_FLAGS",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "CUDA_VISIBLE_DEVICES",
    "JAX_ENABLE_X64",
    "JAX_DEFAULT_MATMUL_PRECISION",
)
# The precision every GEMM of :mod:`metrics` requests (its module docstring; a test checks it).
METRICS_PRECISION = "HIGHEST"
# Keys of ``Device.memory_stats()`` worth printing, in bytes.
_MEMORY_KEYS = ("bytes_limit", "bytes_in_use", "peak_bytes_in_use")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment() -> dict:
    """What JAX sees: versions, plugins, backend, devices with their memory, precision, x64, flags.

    Returns:
      A JSON-serialisable dict with keys ``python``, ``jax``, ``jaxlib``, ``flax``, ``optax``,
      ``plugins`` (installed accelerator plugin → version), ``backend``, ``platform_version``
      (the backend's own version string; the CUDA version on a GPU), ``process_index``,
      ``process_count``, ``devices`` (one dict per local device: ``id``, ``platform``, ``kind``
      and, where the backend reports it, ``memory`` in bytes), ``default_matmul_precision``,
      ``metrics_precision``, ``x64`` and ``variables`` (the environment variables set among
      JAX_PLATFORMS, XLA_FLAGS, …).
    """
    import jax
    from jax.extend import backend as jax_backend

    backend = jax_backend.get_backend()
    devices = []
    for d in jax.local_devices():
        entry = {"id": d.id, "platform": d.platform, "kind": d.device_kind}
        try:
            stats = d.memory_stats()
        except Exception:  # some backends raise instead of returning None
            stats = None
        if stats:
            entry["memory"] = {k: int(stats[k]) for k in _MEMORY_KEYS if k in stats}
        devices.append(entry)
    return {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": _version("jaxlib"),
        "flax": _version("flax"),
        "optax": _version("optax"),
        "plugins": {p: v for p in _PLUGINS if (v := _version(p)) is not None},
        "backend": jax.default_backend(),
        "platform_version": " ".join(str(backend.platform_version).split()),
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "devices": devices,
        "default_matmul_precision": jax.config.jax_default_matmul_precision,
        "metrics_precision": METRICS_PRECISION,
        "x64": bool(jax.config.jax_enable_x64),
        "variables": {k: os.environ[k] for k in _VARIABLES if k in os.environ},
    }


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def format_environment(env: dict) -> str:
    """The report of :func:`environment` as aligned text lines."""
    default = env["default_matmul_precision"]
    if default is None:
        default = (
            "backend default (full float32 on a CPU; TF32 or bf16 passes for float32 GEMMs "
            "on a GPU/TPU)"
            if env["backend"] != "cpu"
            else "backend default (full float32 on a CPU)"
        )
    plugins = ", ".join(f"{k} {v}" for k, v in env["plugins"].items()) or "none (CPU-only JAX)"
    lines = [
        f"python      {env['python']} ({sys.executable})",
        f"jax         {env['jax']}   jaxlib {env['jaxlib']}   flax {env['flax']}   "
        f"optax {env['optax']}",
        f"plugins     {plugins}",
        f"backend     {env['backend']} ({env['platform_version']})",
        f"processes   {env['process_index']} of {env['process_count']}",
        f"devices     {len(env['devices'])}",
    ]
    for d in env["devices"]:
        mem = d.get("memory")
        if mem:
            parts = [f"limit {_gib(mem['bytes_limit'])}"] if "bytes_limit" in mem else []
            parts += [f"in use {_gib(mem['bytes_in_use'])}"] if "bytes_in_use" in mem else []
            text = ", ".join(parts) or "reported"
        else:
            text = "not reported by this backend"
        lines.append(f"  {d['platform']}:{d['id']:<3d} {d['kind']}   memory: {text}")
    lines += [
        f"matmul      default precision: {default}",
        f"            metrics (dlr, decomposition, kernels): Precision.{env['metrics_precision']}"
        " on every GEMM",
        f"x64         {'on' if env['x64'] else 'off'} (experiments that need float64 turn it on "
        "themselves)",
    ]
    variables = env["variables"] or {}
    if not variables:
        lines.append("variables   none of JAX_PLATFORMS, XLA_FLAGS, XLA_PYTHON_CLIENT_* set")
    for i, (k, v) in enumerate(variables.items()):
        lines.append(f"{'variables' if i == 0 else '':<12s}{k}={v}")
    return "\n".join(lines)
