"""The IDX file format of MNIST, Fashion-MNIST and EMNIST, read from a local folder.

IDX (LeCun et al.'s MNIST format): two zero bytes, a type code, the number of dimensions d, then
d big-endian uint32 sizes and the big-endian data; files are usually gzipped. A dataset folder
holds four files, e.g. ``train-images-idx3-ubyte.gz``, ``train-labels-idx1-ubyte.gz``,
``t10k-images-idx3-ubyte.gz``, ``t10k-labels-idx1-ubyte.gz`` (MNIST and Fashion-MNIST names;
``train-images.idx3-ubyte`` style names and EMNIST's ``emnist-<split>-train-images-idx3-ubyte.gz``
are recognised too). Debian's package ``dataset-fashion-mnist`` installs Fashion-MNIST (MIT
licence) this way under ``/usr/share/datasets/fashion-mnist/``.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np

from nets.data.base import LAYOUTS, Dataset, float_dtype, take_train, to_layout, validate

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
"""Where Debian's ``dataset-fashion-mnist`` package installs the four IDX files."""

_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
"""IDX type code → NumPy big-endian dtype (the IDX specification's table)."""
_NAME = re.compile(
    r"^(?:(?P<prefix>emnist-[a-z]+)-)?(?P<split>train|t10k|test)-(?P<kind>images|labels)"
    r"[-.]idx(?P<ndim>[13])-ubyte(?:\.gz)?$"
)
_SPLITS = {"train": "train", "t10k": "test", "test": "test"}


def read_idx(path: str | Path) -> np.ndarray:
    """Read one IDX file (gzipped when its name ends in ``.gz``) into a NumPy array.

    Args:
      path: the file.

    Returns:
      the array with the file's shape and native-endian dtype (uint8 for MNIST's files).

    Raises:
      ValueError: the header is not IDX or the data is shorter/longer than the header says.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:  # gzip raises these on a cut-off stream
        raise ValueError(f"{path}: unreadable or truncated IDX file ({e})") from e
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _DTYPES or raw[3] == 0:
        raise ValueError(f"{path}: not an IDX file (bad magic number {raw[:4].hex()})")
    dtype, ndim = np.dtype(_DTYPES[raw[2]]), raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header ({len(raw)} bytes, need {header})")
    shape = tuple(int(s) for s in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    expected = header + int(np.prod(shape)) * dtype.itemsize
    if len(raw) != expected:
        raise ValueError(
            f"{path}: truncated or corrupt IDX file: header says shape {shape} "
            f"({expected} bytes) but the file holds {len(raw)} bytes"
        )
    data = np.frombuffer(raw, dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def find_idx_files(data_dir: str | Path, prefix: str | None = None) -> dict[str, Path]:
    """The four IDX files of one dataset in ``data_dir``.

    Args:
      data_dir: the folder.
      prefix: for folders holding several EMNIST splits, which one (e.g. ``'emnist-digits'``).

    Returns:
      ``{'train_images', 'train_labels', 'test_images', 'test_labels'}`` → path.

    Raises:
      FileNotFoundError: the folder does not exist or lacks one of the four files.
      ValueError: the folder holds several datasets and ``prefix`` does not pick one.
    """
    data_dir = Path(data_dir).expanduser()
    if not data_dir.is_dir():
        raise FileNotFoundError(f"data_dir {data_dir} is not a folder")
    found: dict[str | None, dict[str, Path]] = {}
    for path in sorted(data_dir.iterdir()):
        m = _NAME.match(path.name)
        if m:
            key = f"{_SPLITS[m['split']]}_{m['kind']}"
            found.setdefault(m["prefix"], {}).setdefault(key, path)
    if prefix is not None:
        found = {p: f for p, f in found.items() if p == prefix}
    if len(found) > 1:
        raise ValueError(
            f"data_dir {data_dir} holds several IDX datasets {sorted(map(str, found))}; "
            "pick one with prefix=..."
        )
    files = next(iter(found.values()), {})
    keys = ("train_images", "train_labels", "test_images", "test_labels")
    missing = [k for k in keys if k not in files]
    if missing:
        raise FileNotFoundError(
            f"data_dir {data_dir} lacks the IDX files {missing} (expected names like "
            "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, "
            "t10k-labels-idx1-ubyte.gz)"
        )
    return {k: files[k] for k in keys}


def load_idx(
    data_dir: str | Path,
    *,
    prefix: str | None = None,
    layout: str = "image",
    n_train: int | None = None,
    seed: int = 0,
    num_classes: int | None = None,
    name: str | None = None,
    dtype=np.float32,
) -> Dataset:
    """An image classification dataset from the four IDX files in ``data_dir``.

    uint8 pixels are scaled to [0, 1]. EMNIST stores its images transposed; files named
    ``emnist-*`` are transposed back so that digits appear upright, as MNIST's.

    Args:
      data_dir: folder with the four files (see :func:`find_idx_files`).
      prefix: which dataset of a folder with several (EMNIST splits).
      layout: ``'flat'`` (n, H·W), ``'image'`` (n, H, W, 1) or ``'padded'`` (n, H+4, W+4, 1).
      n_train: keep a seeded class-balanced subset of this many training images (None: all).
      seed: NumPy seed of the subset.
      num_classes: C (default: largest label + 1).
      name: dataset name (default: the folder's name).
      dtype: floating dtype of the pixels (an integer dtype is a ``TypeError``).

    Returns:
      a validated :class:`~nets.data.base.Dataset`.
    """
    dtype = float_dtype(dtype)
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {layout!r}")
    files = find_idx_files(data_dir, prefix)
    arrays = {k: read_idx(p) for k, p in files.items()}
    for split in ("train", "test"):
        x, y = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        xf, yf = files[f"{split}_images"], files[f"{split}_labels"]
        if x.ndim != 3 or y.ndim != 1:
            raise ValueError(
                f"{xf} must hold images (n, H, W) and {yf} labels (n,); got {x.shape}, {y.shape}"
            )
        if len(x) != len(y):
            raise ValueError(
                f"{xf} holds {len(x)} images but {yf} holds {len(y)} labels; they must match"
            )
    xs = {}
    for split in ("train", "test"):
        x = arrays[f"{split}_images"]
        if files[f"{split}_images"].name.startswith("emnist-"):
            x = np.swapaxes(x, 1, 2)
        scale = 255.0 if x.dtype == np.uint8 else 1.0
        xs[split] = to_layout((x.astype(np.float64) / scale).astype(dtype), layout)
    y_tr, y_te = (arrays[f"{s}_labels"].astype(np.int32) for s in ("train", "test"))
    c = num_classes or int(max(y_tr.max(), y_te.max()) + 1)
    data = Dataset(
        xs["train"],
        y_tr,
        xs["test"],
        y_te,
        num_classes=c,
        name=name or Path(data_dir).expanduser().name,
    )
    return validate(take_train(data, n_train, seed))


def load_fashion_mnist(
    *,
    data_dir: str | Path | None = None,
    layout: str = "image",
    n_train: int | None = None,
    seed: int = 0,
    dtype=np.float32,
) -> Dataset:
    """Fashion-MNIST (60,000 / 10,000 28×28 grey images, 10 classes) from local IDX files.

    Reads ``data_dir`` when given, else Debian's ``/usr/share/datasets/fashion-mnist``
    (``apt-get install dataset-fashion-mnist``). Nothing is downloaded; TFDS stays available
    through :func:`nets.data.load_tfds` (``load_tfds('fashion_mnist', download=True)``).

    Args:
      data_dir: folder with the four Fashion-MNIST IDX files (default: Debian's folder).
      layout: ``'flat'``, ``'image'`` (default) or ``'padded'`` (see :data:`LAYOUTS`).
      n_train: keep a seeded class-balanced subset of this many training images (None: all).
      seed: NumPy seed of the subset.
      dtype: floating dtype of the pixels (an integer dtype is a ``TypeError``).

    Returns:
      :class:`~nets.data.base.Dataset` named ``'fashion_mnist'``.
    """
    dtype = float_dtype(dtype)
    folder = Path(data_dir).expanduser() if data_dir is not None else FASHION_MNIST_DIR
    if data_dir is None and not folder.is_dir():
        raise FileNotFoundError(
            f"Fashion-MNIST is not installed at {FASHION_MNIST_DIR}: run "
            "`apt-get install dataset-fashion-mnist` (Debian/Ubuntu), or pass data_dir=<folder "
            "with the four IDX .gz files>, or use TFDS: load_tfds('fashion_mnist', download=True)"
        )
    return load_idx(
        folder,
        layout=layout,
        n_train=n_train,
        seed=seed,
        num_classes=10,
        name="fashion_mnist",
        dtype=dtype,
    )
