"""The in-memory dataset record shared by every loader in :mod:`nets.data`."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Dataset(NamedTuple):
    """A supervised dataset held in memory as NumPy arrays.

    Attributes:
      x_train: inputs, shape (n, *input_shape); float images/vectors or int tokens.
      y_train: labels, shape (n,) int for classification; float (n,) or (n, k) for regression.
      x_test: held-out inputs, shape (m, *input_shape).
      y_test: held-out labels, shape (m,) or (m, k).
      num_classes: C, the number of classes (the model's output width); for regression the
        number of output dimensions k (1 for a scalar target).
      task: ``'classification'`` or ``'regression'``.
      name: a short label, e.g. ``'digits'``.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    task: str = "classification"
    name: str = ""

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one input, e.g. (64,) for digits or (32, 32, 3) for CIFAR."""
        return tuple(self.x_train.shape[1:])


def validate(data: Dataset) -> Dataset:
    """Check shapes and values of ``data``; raises ``ValueError`` naming the bad field."""
    if data.task not in ("classification", "regression"):
        raise ValueError(f"task must be 'classification' or 'regression', got {data.task!r}")
    for split in ("train", "test"):
        x, y = getattr(data, f"x_{split}"), getattr(data, f"y_{split}")
        if x.shape[0] != y.shape[0]:
            raise ValueError(
                f"x_{split} has {x.shape[0]} rows but y_{split} has {y.shape[0]}; they must match"
            )
        if x.shape[0] == 0:
            raise ValueError(f"x_{split} is empty")
        if np.issubdtype(x.dtype, np.floating) and not np.all(np.isfinite(x)):
            raise ValueError(f"x_{split} contains NaN or inf")
        if data.task == "classification":
            if not np.issubdtype(y.dtype, np.integer) or y.ndim != 1:
                raise ValueError(
                    f"y_{split} must be int labels of shape (n,), got {y.dtype} {y.shape}"
                )
            if y.min() < 0 or y.max() >= data.num_classes:
                raise ValueError(
                    f"y_{split} labels must lie in [0, {data.num_classes}), "
                    f"got range [{y.min()}, {y.max()}]"
                )
        elif not np.all(np.isfinite(y)):
            raise ValueError(f"y_{split} contains NaN or inf")
    if data.x_train.shape[1:] != data.x_test.shape[1:]:
        raise ValueError(
            f"x_train rows have shape {data.x_train.shape[1:]} but x_test rows "
            f"{data.x_test.shape[1:]}; they must match"
        )
    return data
