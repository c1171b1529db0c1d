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
    bound = 1.0 / math.sqrt(fan_in)

    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def scaled_normal(std: float):
    """Initializer N(0, std²) (e.g. the small-init regimes of the skill-model MLP, std = 0.01)."""

    def init(key, shape, dtype=jnp.float32):
        return std * jax.random.normal(key, shape, dtype)

    return init
