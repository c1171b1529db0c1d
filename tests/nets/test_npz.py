"""User .npz datasets: labels are checked, never truncated or wrapped."""

import numpy as np
import pytest

from nets.data.npz import load_npz


def _save(path, y_train, y_test=None, **extra):
    rng = np.random.default_rng(0)
    y_test = np.arange(4) % 3 if y_test is None else y_test
    np.savez(
        path,
        x_train=rng.normal(size=(len(y_train), 5)),
        y_train=y_train,
        x_test=rng.normal(size=(len(y_test), 5)),
        y_test=y_test,
        **extra,
    )
    return path


def test_integer_valued_labels_load_exactly(tmp_path):
    y = np.array([0, 2, 1, 2, 0, 1])
    for stored in (y, y.astype(np.float64), y.astype(np.uint8)):
        d = load_npz(_save(tmp_path / "d.npz", stored))
        assert d.y_train.dtype == np.int32 and d.num_classes == 3
        np.testing.assert_array_equal(d.y_train, y)


def test_fractional_labels_are_refused_not_truncated(tmp_path):
    y = np.array([0, 1, 2, 1]) + 0.7
    with pytest.raises(ValueError, match=r"y_train: class labels must be whole numbers, got 0\.7"):
        load_npz(_save(tmp_path / "d.npz", y))
    d = load_npz(_save(tmp_path / "r.npz", y), task="regression")  # real targets are fine there
    np.testing.assert_array_equal(d.y_train, y)


def test_nan_labels_are_refused_not_wrapped(tmp_path):
    with pytest.raises(ValueError, match=r"y_test: class labels must be whole numbers, got nan"):
        load_npz(_save(tmp_path / "d.npz", np.arange(4) % 2, np.array([0.0, np.nan, 1.0])))


def test_negative_and_non_numeric_labels_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"labels must lie in \[0"):
        load_npz(_save(tmp_path / "neg.npz", np.array([0, -1, 1])))
    with pytest.raises(ValueError, match="class labels must be integers, got dtype <U1"):
        load_npz(_save(tmp_path / "str.npz", np.array(["a", "b"])))
