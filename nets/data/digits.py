"""scikit-learn's 8×8 handwritten digits: the offline real-image default (no download)."""

from __future__ import annotations

import numpy as np

from nets.data.base import Dataset, float_dtype

N_TEST = 360
"""Size of the fixed test split (20% of the 1797 images, stratified by class)."""


def load_digits(*, flatten: bool = True, dtype=np.float32) -> Dataset:
    """The 1797 8×8 digit images, pixels scaled to [0, 1], with a fixed stratified split.

    The split (1437 train / 360 test) is made once with ``random_state=0`` so every run, machine
    and seed sees the same train and test images; training seeds only change the model.

    Args:
      flatten: return inputs of shape (n, 64) (True) or images (n, 8, 8, 1) (False).
      dtype: floating dtype of the inputs (an integer dtype is a ``TypeError``).

    Returns:
      :class:`~nets.data.base.Dataset` with 10 classes.
    """
    dtype = float_dtype(dtype)
    from sklearn.datasets import load_digits as _sk_digits
    from sklearn.model_selection import train_test_split

    bunch = _sk_digits()
    x = (bunch.data / 16.0).astype(dtype)
    y = bunch.target.astype(np.int32)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=N_TEST, random_state=0, stratify=y)
    if not flatten:
        x_tr, x_te = x_tr.reshape(-1, 8, 8, 1), x_te.reshape(-1, 8, 8, 1)
    return Dataset(x_tr, y_tr, x_te, y_te, num_classes=10, name="digits")
