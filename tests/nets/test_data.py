"""Generated tasks, .npz files, the TFDS front end and ``load`` (mnist5k and IDX files:
test_data_mnist5k.py, test_data_idx.py)."""

import importlib.util

import numpy as np
import pytest

from nets.data import LOADERS, load, load_npz


def test_modular_division_is_true_division():
    d = load("modular_division", p=97, train_fraction=0.5)
    assert len(d.x_train) == 4656 and len(d.x_test) == 4656  # D App. F
    x = np.concatenate([d.x_train, d.x_test])
    y = np.concatenate([d.y_train, d.y_test])
    a, op, b, eq = x.T
    assert np.all(op == 97) and np.all(eq == 98) and np.all(b != 0)
    np.testing.assert_array_equal((b * y) % 97, a)  # a = b·c mod p
    assert len({(i, j) for i, j in zip(a, b, strict=True)}) == 97 * 96
    oh = load("modular_division", p=7, encoding="onehot")
    assert oh.x_train.shape[1] == 14 and np.all(oh.x_train.sum(axis=1) == 2)
    with pytest.raises(ValueError, match="prime"):
        load("modular_division", p=10)


def test_teacher_student_and_mixture():
    ts = load("teacher_student", n_train=200, n_test=50, dim=10, teacher_width=3)
    np.testing.assert_allclose(np.linalg.norm(ts.x_train, axis=1), 1.0, rtol=1e-5)
    assert ts.task == "regression" and ts.y_train.shape == (200,) and ts.y_train.std() > 0
    gm = load("gaussian_mixture", n_train=4000, n_test=40, dim=5, num_classes=2, separation=3.0)
    means = np.stack([gm.x_train[gm.y_train == c].mean(axis=0) for c in range(2)])
    np.testing.assert_allclose(np.linalg.norm(means, axis=1), 3.0, atol=0.15)
    assert np.bincount(gm.y_train).tolist() == [2000, 2000]


def test_npz_roundtrip_and_errors(tmp_path):
    rng = np.random.default_rng(0)
    arrays = dict(
        x_train=rng.normal(size=(20, 3)),
        y_train=rng.integers(0, 4, 20),
        x_test=rng.normal(size=(5, 3)),
        y_test=rng.integers(0, 4, 5),
    )
    np.savez(tmp_path / "d.npz", **arrays, num_classes=6)
    d = load("npz", path=tmp_path / "d.npz")
    assert d.num_classes == 6
    np.testing.assert_array_equal(d.x_test, arrays["x_test"])
    np.savez(tmp_path / "bad.npz", x_train=arrays["x_train"])
    with pytest.raises(ValueError, match="y_train"):
        load_npz(tmp_path / "bad.npz")
    with pytest.raises(FileNotFoundError, match="np.savez"):
        load_npz(tmp_path / "missing.npz")


def test_tfds_missing_says_what_to_do(tmp_path):
    if importlib.util.find_spec("tensorflow_datasets") is None:
        with pytest.raises(ImportError, match=r'pip install -e "\.\[data\]"'):
            load("mnist")
    else:
        with pytest.raises(FileNotFoundError, match="download=True"):
            load("mnist", data_dir=tmp_path)


def test_unknown_dataset_lists_choices():
    with pytest.raises(ValueError, match="digits"):
        load("imagenet")
    assert {"digits", "mnist", "cifar10", "npz", "mnist5k", "fashion_mnist", "idx"} <= set(LOADERS)
