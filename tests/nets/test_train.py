"""Training core: digits split, the pure step, last-layer-only, losses and knobs in TrainConfig."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nets import MLP, TrainConfig, evaluate, load_digits, train
from nets.data import Dataset


@pytest.fixture(scope="module")
def digits():
    return load_digits()


def _mlp(seed=0, hidden=(32,), out=10, act="relu", in_dim=64):
    return MLP(in_dim, hidden, out, activation=act, rngs=nnx.Rngs(seed))


def _params(model):
    return {
        "/".join(map(str, p)): np.asarray(v.get_value())
        for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))
    }


def test_digits_split_is_fixed_and_stratified(digits):
    again = load_digits()
    assert digits.x_train.shape == (1437, 64) and digits.x_test.shape == (360, 64)
    np.testing.assert_array_equal(digits.x_test, again.x_test)
    np.testing.assert_array_equal(digits.y_train, again.y_train)
    assert 0.0 <= digits.x_train.min() and digits.x_train.max() <= 1.0
    counts = np.bincount(digits.y_test, minlength=10)
    assert counts.min() >= 35 and counts.max() <= 37
    assert load_digits(flatten=False).x_train.shape == (1437, 8, 8, 1)


def _naive_forward(params, x):
    h = jax.nn.relu(x @ params["layers/0/kernel"] + params["layers/0/bias"])
    return h @ params["head/kernel"] + params["head/bias"]


def test_one_full_batch_sgd_step_matches_hand_gradient(digits):
    """θ₁ = θ₀ − η ∇ (1/nC) Σ (f − S·e_y)², gradient of an independent hand-written forward."""
    x, y = digits.x_train[:256].astype(np.float64), digits.y_train[:256]
    data = Dataset(x, y, x[:10], y[:10], 10)
    model = MLP(64, (16,), 10, rngs=nnx.Rngs(3))
    model = jax.tree.map(lambda a: a.astype(jnp.float64) if hasattr(a, "dtype") else a, model)
    p0 = {k: jnp.asarray(v, jnp.float64) for k, v in _params(model).items()}
    cfg = TrainConfig(lr=0.3, batch_size=256, steps=1, target_scale=2.0)
    trained, _ = train(model, data, cfg, key=jax.random.key(0), metrics={}, progress=False)

    def loss(p):
        t = 2.0 * np.eye(10)[y]
        return jnp.mean((_naive_forward(p, x) - t) ** 2)

    g = jax.grad(loss)(p0)
    got = _params(trained)
    for k in p0:
        np.testing.assert_allclose(got[k], p0[k] - 0.3 * g[k], rtol=1e-12, atol=1e-14)
    # the caller's model is untouched
    np.testing.assert_array_equal(_params(model)["head/kernel"], p0["head/kernel"])


def test_last_layer_only_keeps_features(digits):
    model = _mlp(hidden=(32, 32))
    before = np.asarray(model.features(jnp.asarray(digits.x_test)))
    cfg = TrainConfig(lr=0.05, momentum=0.9, batch_size=64, epochs=3, last_layer_only=True)
    trained, hist = train(model, digits, cfg, key=jax.random.key(1), metrics={}, progress=False)
    after = np.asarray(trained.features(jnp.asarray(digits.x_test)))
    np.testing.assert_array_equal(before, after)
    p0, p1 = _params(model), _params(trained)
    assert all(np.array_equal(p0[k], p1[k]) for k in p0 if not k.startswith("head"))
    assert not np.allclose(p0["head/kernel"], p1["head/kernel"])
    assert hist.final["train_loss"] < hist.records[0]["train_loss"]


def test_full_training_learns_digits_and_moves_features(digits):
    model = _mlp(hidden=(64,))
    cfg = TrainConfig(lr=0.05, momentum=0.9, batch_size=64, epochs=15)
    trained, hist = train(model, digits, cfg, key=jax.random.key(0), metrics={}, progress=False)
    assert hist.final["test_acc"] > 0.9
    assert hist.final["step"] == 15 * (1437 // 64)
    assert not np.allclose(_params(model)["layers/0/kernel"], _params(trained)["layers/0/kernel"])
    ev = evaluate(trained, digits, cfg)
    assert abs(ev["test_acc"] - hist.final["test_acc"]) < 1e-12


def test_cross_entropy_and_same_key_is_deterministic(digits):
    cfg = TrainConfig(loss="ce", optimizer="adam", lr=1e-3, batch_size=128, epochs=2)
    runs = [
        train(_mlp(), digits, cfg, key=jax.random.key(5), metrics={}, progress=False)[0]
        for _ in range(2)
    ]
    a, b = (_params(m) for m in runs)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_metrics_logged_on_schedule(digits, tmp_path):
    seen = []
    cfg = TrainConfig(lr=0.05, batch_size=64, epochs=4)
    feats_rank = lambda f, o: float(np.linalg.matrix_rank(np.asarray(f)))
    _, hist = train(
        _mlp(),
        digits,
        cfg,
        key=jax.random.key(0),
        log_every=22,
        eval_size=100,
        metrics={"rank": feats_rank},
        callback=lambda r, m: seen.append(r["step"]),
        run_dir=tmp_path,
        progress=False,
    )
    assert seen == [0, 22, 44, 66, 88] == [r["step"] for r in hist.records]
    assert {"rank_train", "rank_test", "train_acc", "test_loss", "lr"} <= set(hist.final)
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 5
    assert hist.log_time > 0 and hist.train_time > 0


def test_scales_enter_the_loss_as_documented(digits):
    """Input/output/target scales and target downscaling give the documented initial loss."""
    model = _mlp()
    cfg = TrainConfig(
        input_scale=0.5,
        output_scale=3.0,
        target_scale=4.0,
        target_downscale=2.0,
        steps=0,
        batch_size=10,
    )
    _, hist = train(
        model, digits, cfg, key=jax.random.key(0), metrics={}, progress=False, eval_size=5000
    )
    out = 3.0 * np.asarray(model(jnp.asarray(0.5 * digits.x_test)), dtype=np.float64)
    expect = np.mean((out - 2.0 * np.eye(10)[digits.y_test]) ** 2)
    np.testing.assert_allclose(hist.records[0]["test_loss"], expect, rtol=1e-6)


@pytest.mark.parametrize(
    "field,value",
    [
        ("loss", "hinge"),
        ("optimizer", "lbfgs"),
        ("schedule", "exp"),
        ("target_scale", 0.0),
        ("augment", "mixup"),
    ],
)
def test_bad_config_is_a_clear_error(digits, field, value):
    cfg = dataclasses.replace(TrainConfig(epochs=1), **{field: value})
    with pytest.raises(ValueError, match=field.split("_")[0]):
        train(_mlp(), digits, cfg, key=jax.random.key(0), metrics={}, progress=False)


def test_bad_data_is_a_clear_error(digits):
    bad = digits._replace(y_train=digits.y_train[:-1])
    with pytest.raises(ValueError, match="y_train"):
        train(_mlp(), bad, TrainConfig(), key=jax.random.key(0), progress=False)
    with pytest.raises(ValueError, match="batch_size"):
        train(_mlp(), digits, TrainConfig(batch_size=5000), key=jax.random.key(0), progress=False)


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("epochs", -3, "epochs must be ≥ 0, got -3"),
        ("batch_size", 0, "batch_size must be ≥ 1, got 0"),
        ("steps", -1, "steps must be ≥ 0"),
        ("lr", float("nan"), "lr must be finite, got nan"),
        ("momentum", 1.0, r"momentum must be in \[0, 1\), got 1.0"),
        ("b2", -0.1, r"b2 must be in \[0, 1\)"),
        ("warmup_steps", -2, "warmup_steps must be ≥ 0"),
    ],
)
def test_a_bad_number_is_named_alone(field, value, message):
    """One message per field, naming the field the user set (not a list of internal fields)."""
    with pytest.raises(ValueError, match=f"^{message}"):
        dataclasses.replace(TrainConfig(), **{field: value}).validate()
