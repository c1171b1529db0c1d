"""Knobs: layer balance keeps the function, weight scale, label shuffling/encoding, augmentation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nets import (
    MLP,
    as_regression,
    balance_layers,
    encode_labels,
    load_digits,
    scale_weights,
    shuffle_labels,
)
from nets.augment import random_crop_flip
from tests.draws import normal


def _p(model):
    return {p: np.asarray(v.get_value()) for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}


@pytest.mark.parametrize("alpha", [0.1, 3.0])
@pytest.mark.parametrize("act", ["relu", "leaky_relu", "linear"])
@pytest.mark.usefixtures("full_float32")  # rescaled weights round differently under TF32
def test_layer_balance_keeps_the_initial_function(alpha, act):
    model = MLP(5, (7, 6, 4), 3, activation=act, rngs=nnx.Rngs(1))
    x = normal(0, (20, 5))
    out = balance_layers(model, alpha)
    np.testing.assert_allclose(out(x), model(x), rtol=1e-5, atol=1e-6)
    a, b = _p(model), _p(out)
    np.testing.assert_allclose(
        b[("layers", 0, "kernel")], a[("layers", 0, "kernel")] / alpha, rtol=1e-6
    )
    np.testing.assert_allclose(b[("head", "kernel")], a[("head", "kernel")] * alpha, rtol=1e-6)
    np.testing.assert_array_equal(b[("layers", 1, "kernel")], a[("layers", 1, "kernel")])


def test_layer_balance_rejects_non_homogeneous_activation():
    with pytest.raises(ValueError, match="homogeneous"):
        balance_layers(MLP(3, (4,), 2, activation="tanh", rngs=nnx.Rngs(0)), 2.0)


def test_weight_scale_multiplies_every_parameter():
    model = MLP(3, (4,), 2, activation="linear", rngs=nnx.Rngs(0))
    out = scale_weights(model, 5.0)
    for k, v in _p(model).items():
        np.testing.assert_allclose(_p(out)[k], 5.0 * v, rtol=1e-6)
    # linear 2-layer net: f(x; 5θ) = 25 W₂W₁x + 25 W₂b₁ + 5 b₂
    x = jnp.ones((1, 3))
    w1, b1 = model.layers[0].kernel.get_value(), model.layers[0].bias.get_value()
    w2, b2 = model.head.kernel.get_value(), model.head.bias.get_value()
    np.testing.assert_allclose(out(x), 25 * (x @ w1 @ w2 + b1 @ w2) + 5 * b2, rtol=1e-5)


def test_label_knobs():
    d = load_digits()
    same = shuffle_labels(d, 0.0)
    np.testing.assert_array_equal(same.y_train, d.y_train)
    sh = shuffle_labels(d, 0.5, seed=1)
    np.testing.assert_array_equal(np.bincount(sh.y_train), np.bincount(d.y_train))
    changed = np.mean(sh.y_train != d.y_train)
    assert 0.35 < changed <= 0.5
    np.testing.assert_array_equal(sh.y_test, d.y_test)

    enc = encode_labels(d, seed=0)
    np.testing.assert_array_equal(enc.x_train[:, :10], np.eye(10)[d.y_train])
    np.testing.assert_array_equal(enc.x_train[:, 10:], d.x_train[:, 10:])
    assert np.all(enc.x_test[:, :10].sum(axis=1) == 1)
    code = enc.x_test[:, :10].argmax(axis=1)
    assert 0.03 < np.mean(code == d.y_test) < 0.25  # random test codes, ≈ 1/10 agree

    reg = as_regression(d)
    assert reg.task == "regression" and reg.num_classes == 1
    np.testing.assert_array_equal(reg.y_train, d.y_train.astype(np.float32))


def test_cifar_augmentation_crops_and_flips():
    x = normal(0, (64, 32, 32, 3))
    out = random_crop_flip(x, jax.random.key(1))
    assert out.shape == x.shape
    np.testing.assert_array_equal(out, random_crop_flip(x, jax.random.key(1)))
    padded = np.pad(np.asarray(x), ((0, 0), (4, 4), (4, 4), (0, 0)))
    flips = 0
    for i in range(64):
        windows = [padded[i, a : a + 32, b : b + 32] for a in range(9) for b in range(9)]
        hit = [np.array_equal(np.asarray(out[i]), w) for w in windows]
        hit_f = [np.array_equal(np.asarray(out[i]), w[:, ::-1]) for w in windows]
        assert any(hit) or any(hit_f)
        flips += any(hit_f)
    assert 16 < flips < 48
