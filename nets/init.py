"""Initialisers, including PyTorch's defaults (the papers trained PyTorch models).

PyTorch's ``nn.Linear`` / ``nn.Conv2d`` draw weights *and* biases from U(−1/√fan_in, 1/√fan_in)
(kaiming_uniform with a = √5 gives the same bound for the weights); Flax defaults to LeCun-normal
weights and zero biases, which changes the dynamics being measured.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp


def torch_uniform(fan_in: int):
    """Initializer U(−1/√fan_in, 1/√fan_in) — PyTorch's default for Linear/Conv weights and biases."""
    if fan_in <= 0:
        raise ValueError(f"fan_in must be positive, got {fan_in}")
    return _flat_uniform(1.0 / math.sqrt(fan_in))


def _flat_uniform(bound: float):
    def init(key, shape, dtype=jnp.float32):
        return _draw(jax.random.uniform, key, shape, dtype, -bound, bound)

    return init


def scaled_normal(std: float):
    """Initializer N(0, std²) (e.g. the small-init regimes of the skill-model MLP, std = 0.01)."""

    def init(key, shape, dtype=jnp.float32):
        return std * _draw(jax.random.normal, key, shape, dtype)

    return init


# Smallest padded draw: every bias and small kernel shares one compiled sampler.
_MIN_DRAW = 1024


def _draw(sample, key, shape, dtype, *args):
    """``sample(key, (n,), dtype, *args).reshape(shape)``, n = prod(shape), value for value.

    Eagerly, XLA compiles one sampler per size (~0.3 s each on CPU; a model's construction is
    mostly these compilations, one per distinct layer size). The draw is flat (a 1-D sampler
    compiles several times faster than a 4-D one) and, where the first n values of a longer draw
    are the n-value draw itself, made at the next power of two ≥ n (at least ``_MIN_DRAW``) and
    cut: one sampler then serves every size up to that length. That holds for threefry keys
    with ``jax_threefry_partitionable`` on (JAX's default: value i depends on the key and i
    alone); any other key or setting draws exactly n values.
    """
    n = math.prod(shape)
    if n > 0 and _prefix_stable(key):
        size = max(_MIN_DRAW, 1 << (n - 1).bit_length())
        return sample(key, (size,), dtype, *args)[:n].reshape(shape)
    return sample(key, (n,), dtype, *args).reshape(shape)


def _prefix_stable(key) -> bool:
    """Whether ``sample(key, (m,))[:n]`` equals ``sample(key, (n,))`` for every m ≥ n."""
    if not jax.config.jax_threefry_partitionable:
        return False
    try:
        impl = jax.random.key_impl(key)
    except (TypeError, ValueError):
        return False
    return "threefry" in str(impl)


def torch_xavier_uniform(fan_in: int, fan_out: int):
    """Initializer U(±√(6/(fan_in + fan_out))) — PyTorch's ``xavier_uniform_``.

    ``nn.MultiheadAttention`` draws its fused q/k/v projection (3d × d) this way, so
    fan_in = d and fan_out = 3d.
    """
    if fan_in <= 0 or fan_out <= 0:
        raise ValueError(f"fan_in and fan_out must be positive, got {fan_in}, {fan_out}")
    return _flat_uniform(math.sqrt(6.0 / (fan_in + fan_out)))


def torch_kaiming_normal_fan_out(fan_out: int):
    """Initializer N(0, 2/fan_out) — ``kaiming_normal_(mode='fan_out', nonlinearity='relu')``.

    torchvision's VGG draws its conv kernels this way (fan_out = out_ch·k·k), with zero biases.
    """
    if fan_out <= 0:
        raise ValueError(f"fan_out must be positive, got {fan_out}")
    return scaled_normal(math.sqrt(2.0 / fan_out))
