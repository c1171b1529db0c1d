"""Optimizers follow PyTorch's update rules (checked against hand-written NumPy recursions)."""

import jax.numpy as jnp
import numpy as np
import pytest

from nets import TrainConfig
from nets.optim import learning_rate_schedule, make_optimizer

GRADS = [np.array([0.3, -1.2, 2.0]), np.array([-0.5, 0.1, 0.7]), np.array([1.5, 0.4, -0.9])]
THETA0 = np.array([1.0, -2.0, 0.5])


def _run(cfg):
    tx = make_optimizer(cfg, steps_per_epoch=10, total_steps=100)
    theta = jnp.asarray(THETA0)
    state = tx.init(theta)
    for g in GRADS:
        up, state = tx.update(jnp.asarray(g), state, theta)
        theta = theta + up
    return np.asarray(theta)


def test_sgd_momentum_coupled_weight_decay_is_torch_sgd():
    lr, mu, wd = 0.1, 0.9, 0.01
    theta, buf = THETA0.copy(), None
    for g in GRADS:  # torch.optim.SGD
        d = g + wd * theta
        buf = d if buf is None else mu * buf + d
        theta = theta - lr * buf
    got = _run(TrainConfig(optimizer="sgd", lr=lr, momentum=mu, weight_decay=wd))
    np.testing.assert_allclose(got, theta, rtol=1e-13)


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_adam_and_adamw_are_torch_adam_and_adamw(name):
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-8, 0.1
    theta, m, v = THETA0.copy(), 0.0, 0.0
    for t, g in enumerate(GRADS, start=1):
        if name == "adam":
            g = g + wd * theta  # coupled L2 (torch.optim.Adam)
        else:
            theta = theta * (1 - lr * wd)  # decoupled (torch.optim.AdamW)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        theta = theta - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    got = _run(TrainConfig(optimizer=name, lr=lr, weight_decay=wd))
    np.testing.assert_allclose(got, theta, rtol=1e-10)


def test_step_cosine_and_warmup_schedules():
    step = learning_rate_schedule(TrainConfig(lr=0.1, schedule="step"), 10, 2000)
    for s, expect in [(0, 0.1), (599, 0.1), (600, 0.02), (1199, 0.02), (1200, 0.004)]:
        np.testing.assert_allclose(float(step(s)), expect, rtol=1e-6)
    cos = learning_rate_schedule(TrainConfig(lr=0.1, schedule="cosine", warmup_steps=10), 10, 110)
    np.testing.assert_allclose(float(cos(5)), 0.05, rtol=1e-6)
    np.testing.assert_allclose(float(cos(10)), 0.1, rtol=1e-6)
    np.testing.assert_allclose(float(cos(60)), 0.05, rtol=1e-6)
    np.testing.assert_allclose(float(cos(110)), 0.0, atol=1e-9)


def test_bad_optimizer_values():
    with pytest.raises(ValueError, match="momentum"):
        make_optimizer(TrainConfig(momentum=1.5), 1, 1)
    with pytest.raises(ValueError, match="optimizer"):
        make_optimizer(TrainConfig(optimizer="rmsprop"), 1, 1)
    for bad in (dict(eps=-1e-8), dict(eps=float("nan")), dict(b1=1.0), dict(b2=-0.1)):
        with pytest.raises(ValueError, match=f"^{next(iter(bad))} must be"):
            TrainConfig(optimizer="adam", **bad).validate()


def test_sgd_nesterov_is_torch_sgd_nesterov():
    """torch.optim.SGD(nesterov=True): v ← μv + d, θ ← θ − η(d + μv) with d = g + λθ."""
    lr, mu, wd = 0.1, 0.9, 0.01
    theta, buf = THETA0.copy(), None
    for g in GRADS:
        d = g + wd * theta
        buf = d if buf is None else mu * buf + d
        theta = theta - lr * (d + mu * buf)
    cfg = TrainConfig(optimizer="sgd", lr=lr, momentum=mu, weight_decay=wd, nesterov=True)
    np.testing.assert_allclose(_run(cfg), theta, rtol=1e-13)
    heavy_ball = _run(TrainConfig(optimizer="sgd", lr=lr, momentum=mu, weight_decay=wd))
    assert np.abs(heavy_ball - theta).max() > 1e-3  # the field reaches the optimizer


def test_nesterov_training_follows_optax_sgd_nesterov():
    """nets.train with nesterov=True against a loop of optax.sgd(nesterov=True) on one batch."""
    import jax
    import optax
    from flax import nnx

    from nets import MLP, load_digits, train

    d = load_digits()
    d = d._replace(x_train=d.x_train[:64], y_train=d.y_train[:64])
    lr, mu, wd, steps = 0.2, 0.9, 1e-3, 6
    cfg = TrainConfig(lr=lr, momentum=mu, weight_decay=wd, nesterov=True, batch_size=64,
                      steps=steps)  # fmt: skip
    model = MLP(64, (16,), 10, rngs=nnx.Rngs(0))
    trained, _ = train(model, d, cfg, key=jax.random.key(0), metrics={}, progress=False)

    graphdef, params = nnx.split(model, nnx.Param)
    x, y = jnp.asarray(d.x_train), jax.nn.one_hot(d.y_train, 10)

    def loss(p):
        return jnp.mean((nnx.merge(graphdef, p)(x) - y) ** 2)

    tx = optax.chain(optax.add_decayed_weights(wd), optax.sgd(lr, momentum=mu, nesterov=True))
    state = tx.init(params)
    for _ in range(steps):  # one full batch per step: the data order cannot matter
        updates, state = tx.update(jax.grad(loss)(params), state, params)
        params = optax.apply_updates(params, updates)
    got = jax.tree.leaves(nnx.state(trained, nnx.Param))
    for a, b in zip(got, jax.tree.leaves(params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_nesterov_needs_sgd_with_momentum():
    with pytest.raises(ValueError, match="nesterov=True needs momentum > 0"):
        TrainConfig(nesterov=True).validate()
    with pytest.raises(ValueError, match="nesterov=True is a form of SGD momentum"):
        TrainConfig(optimizer="adam", nesterov=True, momentum=0.9).validate()
    with pytest.raises(TypeError, match="nesterov must be True or False"):
        TrainConfig(nesterov="yes", momentum=0.9).validate()
