"""User-supplied datasets as NumPy ``.npz`` files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nets.data.base import Dataset, validate

KEYS = ("x_train", "y_train", "x_test", "y_test")


def _class_labels(y: np.ndarray, what: str) -> np.ndarray:
    """``y`` as int32 class indices; a ValueError for NaN, non-integer or out-of-range labels."""
    y = np.asarray(y)
    if y.dtype == bool or not (
        np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)
    ):
        raise ValueError(f"{what}: class labels must be integers, got dtype {y.dtype}")
    if np.issubdtype(y.dtype, np.floating):
        bad = ~np.isfinite(y) | (y != np.round(y))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(
                f"{what}: class labels must be whole numbers, got {float(y.flat[i])!r} at index {i} "
                f"({int(bad.sum())} such labels); pass task='regression' for real-valued targets"
            )
    if y.size and (y.min() < 0 or y.max() > np.iinfo(np.int32).max):
        raise ValueError(f"{what}: class labels must lie in [0, 2**31), got {y.min()}..{y.max()}")
    return y.astype(np.int32)


def load_npz(
    path: str | Path, *, num_classes: int | None = None, task: str = "classification"
) -> Dataset:
    """Load a dataset from an ``.npz`` with arrays ``x_train, y_train, x_test, y_test``.

    Images should be (n, H, W, C) (or flat (n, d)), already scaled as they should be fed to the
    model; labels int (n,) for classification. An optional scalar array ``num_classes`` in the
    file overrides the inferred ``max(label) + 1``.

    Args:
      path: the ``.npz`` file (e.g. written with ``np.savez(path, x_train=..., ...)``).
      num_classes: number of classes (default: from the file or the labels).
      task: ``'classification'`` or ``'regression'``.

    Returns:
      a validated :class:`Dataset`.

    Raises:
      FileNotFoundError: ``path`` does not exist.
      ValueError: missing arrays, or (classification) labels that are NaN, not whole numbers or
        negative.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist; save your arrays with "
            f"np.savez({str(path)!r}, x_train=..., y_train=..., x_test=..., y_test=...)"
        )
    with np.load(path) as f:
        missing = [k for k in KEYS if k not in f.files]
        if missing:
            raise ValueError(
                f"{path} lacks arrays {missing}; it must hold {list(KEYS)}, has {f.files}"
            )
        arrays = {k: f[k] for k in KEYS}
        stored = int(f["num_classes"]) if "num_classes" in f.files else None
    if task == "classification":
        arrays["y_train"] = _class_labels(arrays["y_train"], f"{path}: y_train")
        arrays["y_test"] = _class_labels(arrays["y_test"], f"{path}: y_test")
        c = num_classes or stored or int(max(arrays["y_train"].max(), arrays["y_test"].max()) + 1)
    else:
        c = num_classes or (1 if arrays["y_train"].ndim == 1 else arrays["y_train"].shape[1])
    return validate(Dataset(**arrays, num_classes=c, task=task, name=path.stem))
