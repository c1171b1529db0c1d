"""Losses: MSE on one-hot × target-scale labels (the papers' default) and cross-entropy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

LOSSES = ("mse", "ce")


def targets(y: jax.Array, num_classes: int, scale: float | jax.Array = 1.0) -> jax.Array:
    r"""Regression targets :math:`S\,e_y / \alpha` for labels ``y`` (D §2; T §6.4.3).

    Args:
      y: int labels (n,) for classification, or float targets (n,) / (n, k) for regression.
      num_classes: C, the width of the one-hot code (ignored for float ``y``).
      scale: the combined target scale S/α (target scale S, target downscaling α).

    Returns:
      (n, C) for int labels (one-hot × scale), (n, k) for float targets (× scale).
    """
    if jnp.issubdtype(y.dtype, jnp.integer):
        return scale * jax.nn.one_hot(y, num_classes, dtype=jnp.result_type(float))
    y = y if y.ndim == 2 else y[:, None]
    return scale * y


def mse(outputs: jax.Array, target: jax.Array, weights: jax.Array | None = None) -> jax.Array:
    r"""Mean squared error :math:`\frac{1}{nC}\sum_{i,c}(f_c(x_i) - y_{ic})^2` (PyTorch ``MSELoss``).

    Args:
      outputs: f(x), shape (n, C).
      target: y, shape (n, C).
      weights: optional per-example weights (n,) (e.g. a padding mask), normalised to sum 1.

    Returns:
      scalar loss.
    """
    per = jnp.mean((outputs - target.astype(outputs.dtype)) ** 2, axis=-1)
    if weights is None:
        return jnp.mean(per)
    return jnp.sum(per * weights) / jnp.sum(weights)


def cross_entropy(logits: jax.Array, y: jax.Array, weights: jax.Array | None = None) -> jax.Array:
    r"""Softmax cross-entropy :math:`-\frac1n\sum_i \log \mathrm{softmax}(f(x_i))_{y_i}`.

    Args:
      logits: f(x), shape (n, C).
      y: int labels, shape (n,).
      weights: optional per-example weights (n,), normalised to sum 1.

    Returns:
      scalar loss.
    """
    per = optax.softmax_cross_entropy_with_integer_labels(logits, y)
    if weights is None:
        return jnp.mean(per)
    return jnp.sum(per * weights) / jnp.sum(weights)


def accuracy(outputs: jax.Array, y: jax.Array) -> jax.Array:
    """Fraction of rows whose argmax equals the int label ``y`` (n,)."""
    return jnp.mean((jnp.argmax(outputs, axis=-1) == y).astype(jnp.result_type(float)))
