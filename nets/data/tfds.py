"""MNIST, Fashion-MNIST, CIFAR-10/100 through tensorflow-datasets (the optional ``[data]`` extra).

Nothing is downloaded unless ``download=True``. With ``download=False`` the prepared TFDS folder
must already exist under ``data_dir`` (e.g. copied from a machine with internet access).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nets.data.base import Dataset

TFDS_NAMES = {
    "mnist": "mnist",
    "fashion_mnist": "fashion_mnist",
    "cifar10": "cifar10",
    "cifar100": "cifar100",
}
# Per-channel statistics of the CIFAR training sets (the standard normalisation, D F.4.2).
_CIFAR_STATS = {
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
}


def load_tfds(
    name: str,
    *,
    data_dir: str | Path | None = None,
    download: bool = False,
    n_train: int | None = None,
    flatten: bool = False,
    seed: int = 0,
) -> Dataset:
    """Load an image classification dataset with tensorflow-datasets, as float32 NumPy arrays.

    Pixels are scaled to [0, 1]; CIFAR images are then standardised per channel.

    Args:
      name: ``'mnist'``, ``'fashion_mnist'``, ``'cifar10'`` or ``'cifar100'``.
      data_dir: TFDS data folder (default ``~/tensorflow_datasets``).
      download: allow TFDS to download and prepare the data (needs the internet once).
      n_train: keep a random subset of this many training images (D uses 1,000 MNIST and
        10,000 CIFAR-10 images in some figures).
      flatten: return (n, H·W·C) instead of (n, H, W, C).
      seed: NumPy seed of the subset.

    Returns:
      :class:`Dataset`.
    """
    if name not in TFDS_NAMES:
        raise ValueError(f"unknown TFDS dataset {name!r}; choose one of {list(TFDS_NAMES)}")
    try:
        import tensorflow_datasets as tfds
    except ImportError as e:
        raise ImportError(
            f'loading {name!r} needs tensorflow-datasets: pip install -e ".[data]" '
            "(or pip install tensorflow-datasets tensorflow-cpu); alternatively save the arrays "
            "as .npz and use nets.data.load('npz', path=...)"
        ) from e
    root = Path(data_dir).expanduser() if data_dir else Path("~/tensorflow_datasets").expanduser()
    try:
        splits = tfds.as_numpy(
            tfds.load(
                TFDS_NAMES[name],
                split=["train", "test"],
                batch_size=-1,
                as_supervised=True,
                data_dir=str(root),
                download=download,
            )
        )
    except Exception as e:  # tfds raises AssertionError/DatasetNotFoundError when data is absent
        raise FileNotFoundError(
            f"{name!r} is not prepared under {root}: run once with download=True (needs the "
            f"internet), or copy a prepared TFDS folder '{TFDS_NAMES[name]}/<version>/' into "
            f"{root}, or pass data_dir=... ({type(e).__name__}: {str(e)[:200]})"
        ) from e
    (x_tr, y_tr), (x_te, y_te) = splits
    x_tr, x_te = x_tr.astype(np.float32) / 255.0, x_te.astype(np.float32) / 255.0
    if name in _CIFAR_STATS:
        mean, std = (np.asarray(v, np.float32) for v in _CIFAR_STATS[name])
        x_tr, x_te = (x_tr - mean) / std, (x_te - mean) / std
    if n_train is not None:
        keep = np.sort(np.random.default_rng(seed).choice(len(x_tr), size=n_train, replace=False))
        x_tr, y_tr = x_tr[keep], y_tr[keep]
    if flatten:
        x_tr, x_te = x_tr.reshape(len(x_tr), -1), x_te.reshape(len(x_te), -1)
    c = 100 if name == "cifar100" else 10
    return Dataset(
        x_tr, y_tr.astype(np.int32), x_te, y_te.astype(np.int32), num_classes=c, name=name
    )
