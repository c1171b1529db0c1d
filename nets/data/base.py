"""The in-memory dataset record shared by every loader in :mod:`nets.data`."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

LAYOUTS = ("flat", "image", "padded")
"""Shapes of the 28×28 grey-scale loaders: ``'flat'`` (n, 784) vectors, ``'image'`` (n, 28, 28, 1)
and ``'padded'`` (n, 32, 32, 1), zero-padded by 2 pixels on each side to the CIFAR/LeNet-5 input
size (thesis §2.4 pads MNIST this way for the convolutional networks)."""


def to_layout(images: np.ndarray, layout: str) -> np.ndarray:
    """Reshape grey-scale images (n, H, W) to ``layout`` (one of :data:`LAYOUTS`).

    Args:
      images: (n, H, W) pixel arrays.
      layout: ``'flat'`` → (n, H·W); ``'image'`` → (n, H, W, 1); ``'padded'`` → (n, H+4, W+4, 1).

    Returns:
      the reshaped array, same dtype.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {layout!r}")
    if images.ndim != 3:
        raise ValueError(f"images must have shape (n, H, W), got {images.shape}")
    if layout == "flat":
        return images.reshape(len(images), -1)
    images = images[..., None]
    if layout == "padded":
        images = np.pad(images, ((0, 0), (2, 2), (2, 2), (0, 0)))
    return images


def float_dtype(dtype) -> np.dtype:
    """``dtype`` as a NumPy dtype, refused unless floating (pixels scaled to [0, 1] need one).

    Raises:
      TypeError: an integer, boolean or other non-floating dtype (casting [0, 1] pixels to it
        would turn them into 0 and 1).
    """
    try:
        out = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(
            f"dtype must be a floating NumPy dtype such as np.float32, got {dtype!r}"
        ) from e
    if not np.issubdtype(out, np.floating):
        raise TypeError(
            f"dtype must be a floating dtype (pixels are scaled to [0, 1], which {out} would round "
            "to 0 or 1); pass np.float32 (default) or np.float64"
        )
    return out


def stratified_order(labels: np.ndarray, seed: int) -> np.ndarray:
    """A seeded order of the indices of ``labels`` whose every prefix is class-balanced.

    Indices are shuffled with ``numpy.random.default_rng(seed)``, then stably sorted by their rank
    within their class, so the first n indices hold ⌊n/C⌋ or ⌈n/C⌉ examples of each of C equally
    frequent classes (the class frequencies of ``labels`` in general).

    Args:
      labels: (n,) int class labels.
      seed: NumPy seed of the shuffle.

    Returns:
      (n,) int permutation of ``arange(n)``.
    """
    perm = np.random.default_rng(seed).permutation(len(labels))
    shuffled = labels[perm]
    rank = np.empty(len(labels), np.int64)
    for c in np.unique(shuffled):
        at = np.flatnonzero(shuffled == c)
        rank[at] = np.arange(len(at)) * (len(labels) / len(at))
    return perm[np.argsort(rank, kind="stable")]


def take_train(data: Dataset, n_train: int | None, seed: int) -> Dataset:
    """``data`` with a seeded subset of ``n_train`` training examples, kept in their order.

    Classification subsets are class-balanced (:func:`stratified_order`), regression subsets
    uniformly random.

    Args:
      data: the full dataset.
      n_train: examples to keep (None: all).
      seed: NumPy seed of the subset (:func:`stratified_order`).

    Returns:
      the dataset with ``x_train``, ``y_train`` reduced; test split untouched.
    """
    if n_train is None:
        return data
    n = len(data.x_train)
    if not 1 <= n_train <= n:
        raise ValueError(f"n_train must be in [1, {n}] for {data.name!r}, got {n_train}")
    if data.task == "classification":
        order = stratified_order(data.y_train, seed)
    else:
        order = np.random.default_rng(seed).permutation(n)
    keep = np.sort(order[:n_train])
    return data._replace(x_train=data.x_train[keep], y_train=data.y_train[keep])


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
