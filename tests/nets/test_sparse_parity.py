"""Multitask sparse parity (T Table 4.2, Eq 4.1–4.4, 4.7) and its trainer nets.skills (T §5.2)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from nets import TrainConfig
from nets.data.sparse_parity import (
    estimate_skill_strength,
    make_sparse_parity,
    sample_skill,
    sample_sparse_parity,
    skill_functions,
)
from nets.models import MLP
from nets.skills import init_networks, train_skills


@pytest.fixture(scope="module")
def task():
    return make_sparse_parity(jax.random.key(0), 5, 32, 3, 0.6, 5.0)


def test_targets_match_naive_parity(task):
    b = sample_sparse_parity(jax.random.key(1), task, 4000)
    x, y, skill = np.asarray(b.x), np.asarray(b.y), np.asarray(b.skill)
    assert x.shape == (4000, 37) and y.shape == (4000,)
    np.testing.assert_array_equal(x[:, :5].argmax(1), skill)
    np.testing.assert_array_equal(x[:, :5].sum(1), 1)
    rel = np.asarray(task.relevant)
    naive = np.array([5.0 * (-1) ** int(x[j, 5 + rel[skill[j]]].sum()) for j in range(4000)])
    np.testing.assert_array_equal(y, naive)
    # relevant bits are mutually exclusive (n_s m = 15 ≤ n_b = 32), T App. C.3
    assert len(set(rel.ravel().tolist())) == 15


def test_frequencies_and_orthogonality(task):
    w = np.arange(1, 6) ** -1.6
    np.testing.assert_allclose(task.probs, w / w.sum(), rtol=1e-6)
    b = sample_sparse_parity(jax.random.key(2), task, 50_000)
    freq = np.bincount(np.asarray(b.skill), minlength=5) / 50_000
    np.testing.assert_allclose(freq, w / w.sum(), atol=0.01)
    G = np.asarray(skill_functions(task, b.x))
    np.testing.assert_array_equal((G != 0).sum(1), 1)  # Eq 4.3: disjoint supports
    np.testing.assert_array_equal(5.0 * G.sum(1), np.asarray(b.y))  # Eq 4.4
    # E[g_k g_k'] = P_s(k) δ_kk'
    np.testing.assert_allclose(G.T @ G / 50_000, np.diag(freq), atol=1e-12)


def test_deterministic_and_jittable(task):
    a = make_sparse_parity(jax.random.key(7), 5, 32, 3, 0.6, 5.0)
    c = make_sparse_parity(jax.random.key(7), 5, 32, 3, 0.6, 5.0)
    np.testing.assert_array_equal(a.relevant, c.relevant)
    f = jax.jit(lambda k, t: sample_sparse_parity(k, t, 4000).y.sum())
    assert float(f(jax.random.key(3), task)) == float(f(jax.random.key(3), task))
    assert float(f(jax.random.key(3), task)) != float(f(jax.random.key(4), task))
    many = make_sparse_parity(jax.random.key(0), 20, 10, 3, 1.0, 1.0)  # overlapping subsets
    assert np.all(np.diff(np.asarray(many.relevant), axis=1) > 0)


def test_skill_strength_of_oracle_and_zero(task):
    oracle = lambda x: task.S * skill_functions(task, x).sum(1)  # noqa: E731
    R = estimate_skill_strength(oracle, jax.random.key(5), task, 1000)
    np.testing.assert_allclose(R, 5.0, rtol=1e-6)
    half = lambda x: 0.5 * oracle(x) * (x[:, 0] > 0.5)  # noqa: E731  only skill 1, half strength
    R = estimate_skill_strength(half, jax.random.key(5), task, 1000)
    np.testing.assert_allclose(R, [2.5, 0, 0, 0, 0], atol=1e-6)
    b = sample_skill(jax.random.key(6), task, 3, 100)
    assert np.all(np.asarray(b.skill) == 3)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(n_s=0), "n_s"),
        (dict(m=40), "m"),
        (dict(alpha=0.0), "alpha"),
        (dict(S=0.0), "S"),
    ],
)
def test_bad_input(kw, match):
    args = dict(n_s=5, n_b=32, m=3, alpha=0.6, S=5.0) | kw
    with pytest.raises(ValueError, match=match):
        make_sparse_parity(jax.random.key(0), **args)


def test_train_skills_learns_first_skill():
    t = make_sparse_parity(jax.random.key(0), 1, 12, 3, 0.6, 5.0, dtype=jnp.float32)
    R = train_skills(
        t, [128], jax.random.key(1), steps=800, eval_every=200, batch=512,
        train=TrainConfig(lr=0.05), init_std=0.01, n_eval=256,
    )  # fmt: skip
    assert R.shape == (1, 1, 5, 1)
    assert abs(R[0, 0, 0, 0]) < 0.05 and R[0, 0, -1, 0] > 0.8  # emergence: ~0 → ~1


def test_padded_units_are_inert():
    # A width-3 network padded to 7 units computes the width-3 function and the padded units get
    # zero gradients, so they stay zero under SGD/Adam (independent check: slice them away).
    t = make_sparse_parity(jax.random.key(0), 2, 8, 3, 0.6, 5.0, dtype=jnp.float32)
    graphdef, params = init_networks(t, [3, 7], 0.1, jax.random.key(2))
    p = jax.tree.map(lambda a: a[0], params)
    b = sample_sparse_parity(jax.random.key(3), t, 64)

    def loss(q):
        return 0.5 * jnp.mean((nnx.merge(graphdef, q)(b.x)[:, 0] - b.y) ** 2)

    small = MLP(t.in_dim, (3,), 1, init="normal", init_std=0.1, rngs=nnx.Rngs(0))
    small.layers[0].kernel[...] = p["layers"][0]["kernel"][...][:, :3]
    small.layers[0].bias[...] = p["layers"][0]["bias"][...][:3]
    small.head.kernel[...] = p["head"]["kernel"][...][:3]
    small.head.bias[...] = p["head"]["bias"][...]
    # jitted, each a program of its own (eagerly, every primitive compiles separately)
    padded_out = jax.jit(lambda q: nnx.merge(graphdef, q)(b.x))(p)
    np.testing.assert_allclose(padded_out, nnx.jit(lambda m: m(b.x))(small), rtol=1e-6, atol=1e-7)
    g = jax.jit(jax.grad(loss))(p)
    assert not np.any(np.asarray(g["layers"][0]["kernel"][...])[:, 3:])
    assert not np.any(np.asarray(g["layers"][0]["bias"][...])[3:])
    assert not np.any(np.asarray(g["head"]["kernel"][...])[3:])
    assert np.all(np.asarray(params["head"]["kernel"][...])[1, :, 0] != 0)  # width 7: all live


def test_bias_init_keeps_the_weights_and_spares_padded_units():
    """init_bias draws N(0, σ²) biases for live units only, from a key of its own."""
    task = make_sparse_parity(jax.random.key(0), 1, 8, 3, 0.6, 5.0, dtype=jnp.float32)
    _, plain = init_networks(task, [2, 5], 0.1, jax.random.key(1))
    _, biased = init_networks(task, [2, 5], 0.1, jax.random.key(1), init_bias=True)
    np.testing.assert_array_equal(
        plain["layers"][0]["kernel"][...], biased["layers"][0]["kernel"][...]
    )
    b = np.asarray(biased["layers"][0]["bias"][...])  # (2 networks, 5 units)
    assert np.all(b[0, 2:] == 0) and np.all(b[0, :2] != 0) and np.all(b[1] != 0)
    assert 0.01 < np.std(b[b != 0]) < 1.0 and np.all(np.asarray(biased["head"]["bias"][...]) != 0)
    assert np.all(np.asarray(plain["layers"][0]["bias"][...]) == 0)


def _reference_skills(task, widths, key, steps, eval_every, batch, tx, init_std, n_eval, data):
    """Independent trainer: the ½-MSE gradient of T Eq 4.5 written out, optax applied directly."""
    G, K = data[0].shape[0], len(widths)
    k_init, k_train, k_eval = jax.random.split(key, 3)
    graphdef, params = init_networks(task, list(widths) * G, init_std, k_init)
    params = jax.tree.map(lambda a: a.reshape(G, K, *a.shape[1:]), params)
    held = [
        sample_skill(jax.random.fold_in(k_eval, k), task, k, n_eval)[:2] for k in range(task.n_s)
    ]
    ev_x = jnp.concatenate([h[0] for h in held])
    ev_y = jnp.stack([h[1] for h in held])

    def f(p, x):
        return nnx.merge(graphdef, p)(x)[:, 0]

    def loss(p, x, y, w):
        out = jax.vmap(jax.vmap(f, (0, None)))(p, x)  # (G, K, B)
        return 0.5 * jnp.sum(
            jnp.sum(w[:, None] * (out - y[:, None]) ** 2, -1) / jnp.sum(w, -1)[:, None]
        )

    @jax.jit  # each piece one program (eagerly, every primitive compiles on its own)
    def measure(p):
        out = jax.vmap(jax.vmap(lambda q: f(q, ev_x)))(p).reshape(G, K, task.n_s, n_eval)
        return jnp.mean(out * ev_y, -1) / task.S**2

    @jax.jit
    def update(params, opt, x, y):
        up, opt = tx.update(jax.grad(loss)(params, x, y, jnp.ones_like(y)), opt, params)
        return optax.apply_updates(params, up), opt

    opt = jax.jit(tx.init)(params)
    R = [measure(params)]
    for i in range(steps // eval_every):
        for k in jax.random.split(jax.random.fold_in(k_train, i), eval_every):
            keys = jax.random.split(k, G)
            idx = [
                jax.random.randint(kk, (batch,), 0, s) for kk, s in zip(keys, data[2], strict=True)
            ]
            x = jnp.stack([data[0][g][idx[g]] for g in range(G)])
            y = jnp.stack([data[1][g][idx[g]] for g in range(G)])
            params, opt = update(params, opt, x, y)
        R.append(measure(params))
    return np.moveaxis(np.stack(R), 0, 2)


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_train_skills_is_the_library_step_and_matches_a_direct_gradient(name):
    """train_skills (vmap of nets.step.step) = an independent ½-MSE gradient loop, to float32."""
    task = make_sparse_parity(jax.random.key(0), 2, 8, 2, 0.6, 3.0, dtype=jnp.float32)
    pool = sample_sparse_parity(jax.random.key(1), task, 64)
    data = (pool.x[None].repeat(2, 0), pool.y[None].repeat(2, 0), jnp.array([48, 64]))
    lr = 0.05 if name == "sgd" else 1e-2
    kw = dict(steps=6, eval_every=3, batch=16, init_std=0.3, n_eval=32)
    train = TrainConfig(optimizer=name, lr=lr, weight_decay=1e-3)
    got = train_skills(task, [3, 5], jax.random.key(2), train=train, n_streams=2, data=data, **kw)
    tx = optax.sgd(lr) if name == "sgd" else optax.adamw(lr, weight_decay=1e-3)
    if name == "sgd":
        tx = optax.chain(optax.add_decayed_weights(1e-3), tx)
    ref = _reference_skills(task, [3, 5], jax.random.key(2), tx=tx, data=data, **kw)
    assert got.shape == (2, 2, 3, task.n_s)
    assert np.abs(ref[..., -1, :] - ref[..., 0, :]).max() > 1e-3  # the networks did learn
    np.testing.assert_allclose(got, ref, rtol=2e-4, atol=1e-6)
