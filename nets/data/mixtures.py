"""Isotropic Gaussian mixtures, one component per class."""

from __future__ import annotations

import numpy as np

from nets.data.base import Dataset


def gaussian_mixture(
    n_train: int,
    n_test: int,
    *,
    dim: int = 20,
    num_classes: int = 4,
    separation: float = 3.0,
    seed: int = 0,
) -> Dataset:
    r"""Balanced classes :math:`x \mid y = c \sim \mathcal N(\mu_c, I_d)`, means of norm ``separation``.

    The means :math:`\mu_c` are drawn once, uniformly on the sphere of radius ``separation``.

    Args:
      n_train, n_test: numbers of samples (classes cycle, so each is balanced).
      dim: d.
      num_classes: C.
      separation: :math:`\|\mu_c\|`.
      seed: NumPy seed.

    Returns:
      :class:`Dataset` with float32 inputs (n, d) and C classes.
    """
    if min(n_train, n_test, dim, num_classes) < 1 or separation < 0:
        raise ValueError("sizes must be ≥ 1 and separation ≥ 0")
    rng = np.random.default_rng(seed)
    mu = rng.standard_normal((num_classes, dim))
    mu *= separation / np.linalg.norm(mu, axis=1, keepdims=True)

    def sample(n):
        y = rng.permutation(np.arange(n) % num_classes).astype(np.int32)
        return (mu[y] + rng.standard_normal((n, dim))).astype(np.float32), y

    (x_tr, y_tr), (x_te, y_te) = sample(n_train), sample(n_test)
    return Dataset(x_tr, y_tr, x_te, y_te, num_classes=num_classes, name="gaussian-mixture")
