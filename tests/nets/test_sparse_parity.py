"""Multitask sparse parity (T Table 4.2, Eq 4.1–4.4, 4.7) and the stacked MLP trainer of T Fig 5.1."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nets.data.sparse_parity import (
    estimate_skill_strength,
    make_sparse_parity,
    sample_skill,
    sample_sparse_parity,
    skill_functions,
)


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
    from lrrich.experiments.emergence import train_skills
    from nets import TrainConfig

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
    from flax import nnx

    from lrrich.experiments.emergence import init_networks
    from nets.models import MLP

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
