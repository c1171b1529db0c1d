"""IDX files (MNIST / Fashion-MNIST / EMNIST layout): a hand-written writer as the reference,
bad folders and files, and Debian's Fashion-MNIST when it is installed."""

import gzip
import struct

import numpy as np
import pytest

from nets.data import find_idx_files, idx, load, load_fashion_mnist, read_idx

NAMES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}


def _write_idx(path, array, code=0x08, fmt="B"):
    """IDX written by the specification with struct, independently of the reader."""
    header = struct.pack(">BBBB", 0, 0, code, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    body = struct.pack(f">{array.size}{fmt}", *array.ravel().tolist())
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(header + body)


def _dataset(folder, n_train=30, n_test=10, prefix="", names=NAMES):
    rng = np.random.default_rng(0)
    arrays = {
        "train_images": rng.integers(0, 256, (n_train, 5, 4), dtype=np.uint8),
        "train_labels": np.arange(n_train, dtype=np.uint8) % 3,
        "test_images": rng.integers(0, 256, (n_test, 5, 4), dtype=np.uint8),
        "test_labels": np.arange(n_test, dtype=np.uint8) % 3,
    }
    folder.mkdir(exist_ok=True)
    for key, name in names.items():
        _write_idx(folder / f"{prefix}{name}", arrays[key])
    return arrays


def test_read_idx_against_the_specification(tmp_path):
    a = np.arange(-12, 12, dtype=np.int32).reshape(2, 3, 4) * 1000
    _write_idx(tmp_path / "a-idx3", a, code=0x0C, fmt="i")
    got = read_idx(tmp_path / "a-idx3")
    assert got.dtype == np.int32 and got.dtype.isnative
    np.testing.assert_array_equal(got, a)
    f = np.linspace(-1, 1, 6).reshape(6)
    _write_idx(tmp_path / "f.gz", f, code=0x0E, fmt="d")
    np.testing.assert_array_equal(read_idx(tmp_path / "f.gz"), f)


def test_load_idx_roundtrip_and_layouts(tmp_path):
    arrays = _dataset(tmp_path / "d")
    data = load("idx", data_dir=tmp_path / "d")
    assert data.name == "d" and data.num_classes == 3 and data.x_train.shape == (30, 5, 4, 1)
    np.testing.assert_allclose(data.x_train[..., 0], arrays["train_images"] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(data.y_test, arrays["test_labels"])
    flat = load("idx", data_dir=tmp_path / "d", layout="flat", n_train=9, seed=3)
    assert flat.x_train.shape == (9, 20) and np.bincount(flat.y_train).tolist() == [3, 3, 3]
    pad = load("idx", data_dir=tmp_path / "d", layout="padded")
    assert pad.x_test.shape == (10, 9, 8, 1)


def test_uncompressed_dotted_names_and_emnist_transpose(tmp_path):
    dotted = {k: v.replace("-idx", ".idx").removesuffix(".gz") for k, v in NAMES.items()}
    arrays = _dataset(tmp_path / "kaggle", names=dotted)
    data = load("idx", data_dir=tmp_path / "kaggle")
    np.testing.assert_array_equal(data.y_train, arrays["train_labels"])
    emnist = {k: v.replace("t10k", "test") for k, v in NAMES.items()}
    arrays = _dataset(tmp_path / "em", prefix="emnist-digits-", names=emnist)
    _dataset(tmp_path / "em", prefix="emnist-letters-", names=emnist)
    with pytest.raises(ValueError, match="several IDX datasets.*prefix"):
        load("idx", data_dir=tmp_path / "em")
    data = load("idx", data_dir=tmp_path / "em", prefix="emnist-digits")
    assert data.x_train.shape == (30, 4, 5, 1)  # EMNIST stores images transposed
    np.testing.assert_allclose(
        data.x_train[0, :, :, 0], arrays["train_images"][0].T / 255.0, rtol=1e-6
    )


def test_bad_folders_and_files_say_which(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="lacks the IDX files.*train_images"):
        load("idx", data_dir=tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        load("idx", data_dir=tmp_path / "nowhere")
    _dataset(tmp_path / "d")
    (tmp_path / "d" / NAMES["test_labels"]).unlink()
    with pytest.raises(FileNotFoundError, match="test_labels"):
        find_idx_files(tmp_path / "d")
    # image and label counts differ
    _dataset(tmp_path / "m")
    _write_idx(tmp_path / "m" / NAMES["train_labels"], np.zeros(29, np.uint8))
    with pytest.raises(ValueError, match="30 images but .*train-labels.* 29 labels"):
        load("idx", data_dir=tmp_path / "m")
    # truncated data, truncated gzip stream, not IDX at all
    _dataset(tmp_path / "t")
    path = tmp_path / "t" / NAMES["train_images"]
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw[:-7]))
    with pytest.raises(ValueError, match="train-images.*truncated"):
        load("idx", data_dir=tmp_path / "t")
    path.write_bytes(gzip.compress(raw)[:-20])
    with pytest.raises(ValueError, match="train-images.*truncated"):
        read_idx(path)
    (tmp_path / "junk").write_bytes(b"\x1f\x00\x08\x03")
    with pytest.raises(ValueError, match="junk: not an IDX file"):
        read_idx(tmp_path / "junk")
    _dataset(tmp_path / "m2")
    with pytest.raises(ValueError, match=r"n_train must be in \[1, 30\]"):
        load("idx", data_dir=tmp_path / "m2", n_train=31)


def test_fashion_mnist_missing_names_every_route(tmp_path, monkeypatch):
    monkeypatch.setattr(idx, "FASHION_MNIST_DIR", tmp_path / "absent")
    with pytest.raises(FileNotFoundError) as err:
        load("fashion_mnist")
    msg = str(err.value)
    assert "\n" not in msg
    assert "apt-get install dataset-fashion-mnist" in msg and "data_dir" in msg
    assert "load_tfds('fashion_mnist'" in msg
    _dataset(tmp_path / "fm")
    assert load("fashion_mnist", data_dir=tmp_path / "fm").name == "fashion_mnist"


@pytest.mark.skipif(
    not idx.FASHION_MNIST_DIR.is_dir(),
    reason="Fashion-MNIST not installed: apt-get install dataset-fashion-mnist",
)
def test_debian_fashion_mnist_is_the_standard_dataset():
    d = load_fashion_mnist(layout="flat")
    assert d.x_train.shape == (60000, 784) and d.x_test.shape == (10000, 784)
    assert np.bincount(d.y_train).tolist() == [6000] * 10
    assert np.bincount(d.y_test).tolist() == [1000] * 10
    # the published training-set pixel statistics of Fashion-MNIST (mean 0.2860, std 0.3530)
    assert float(d.x_train.mean()) == pytest.approx(0.2860, abs=5e-5)
    assert float(d.x_train.std()) == pytest.approx(0.3530, abs=5e-5)
