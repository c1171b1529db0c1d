"""Feature-kernel and NTK distances against explicit n×n kernels and Jacobians; norms; activations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.signal import correlate2d

from metrics import (
    ZERO_SUM_LAPLACIAN,
    activation_hamming_distance,
    empirical_ntk,
    feature_kernel_distance,
    filter_smoothness,
    ntk_kernel_distance,
    parameter_distance,
    parameter_norm,
)


def _naive_cka(a, b):
    n = a.shape[0]
    h = np.eye(n) - 1 / n
    ka, kb = h @ a @ a.T @ h, h @ b @ b.T @ h
    return np.sum(ka * kb) / (np.linalg.norm(ka) * np.linalg.norm(kb))


def test_feature_kernel_distance():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(80, 6)), rng.normal(size=(80, 9))
    b[:, :3] += 2 * a[:, :3]
    assert float(feature_kernel_distance(a, b)) == pytest.approx(1 - _naive_cka(a, b), abs=1e-12)
    o, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    assert float(feature_kernel_distance(a, 3 * a @ o + 1)) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="same number of rows"):
        feature_kernel_distance(a, b[:70])
    with pytest.raises(ValueError, match="constant"):
        feature_kernel_distance(a, np.ones((80, 2)))
    with pytest.raises(ValueError, match="NaN"):
        feature_kernel_distance(a, np.full((80, 2), np.nan))


def _mlp(params, x):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"]


def _params(key, d=3, h=7, c=2, scale=1.0):
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "w1": scale * jax.random.normal(k1, (d, h)),
        "b1": jax.random.normal(k2, (h,)),
        "w2": jax.random.normal(k3, (h, c)),
    }


def _jacobian(params, x):
    """(n·C, |θ|) Jacobian of ``_mlp`` written out by hand in NumPy, leaves in ``jax.tree`` order."""
    w1, b1, w2 = (np.asarray(params[k]) for k in ("w1", "b1", "w2"))
    x = np.asarray(x)
    n, d = x.shape
    hidden, c = w2.shape
    h = np.tanh(x @ w1 + b1)
    gate = (1 - h**2)[:, None, :] * w2.T[None]  # ∂f_k/∂(pre-activation_j): (n, C, H)
    d_b1 = gate
    d_w1 = x[:, None, :, None] * gate[:, :, None, :]  # (n, C, d, H)
    d_w2 = np.zeros((n, c, hidden, c))
    for k in range(c):
        d_w2[:, k, :, k] = h
    parts = [d_b1.reshape(n * c, -1), d_w1.reshape(n * c, -1), d_w2.reshape(n * c, -1)]
    return np.concatenate(parts, axis=1)  # keys sorted: b1, w1, w2


X = jax.random.normal(jax.random.PRNGKey(1), (6, 3))


def test_empirical_ntk_matches_explicit_jacobian():
    params = _params(jax.random.PRNGKey(0))
    j = _jacobian(params, X)
    np.testing.assert_allclose(empirical_ntk(_mlp, params, X, chunk=5), j @ j.T, atol=1e-12)


def test_ntk_kernel_distance():
    p0 = _params(jax.random.PRNGKey(0))
    assert float(ntk_kernel_distance(_mlp, p0, p0, X, chunk=5)) == pytest.approx(0.0, abs=1e-12)
    p1 = _params(jax.random.PRNGKey(2))
    j0, j1 = _jacobian(p0, X), _jacobian(p1, X)
    k0, k1 = j0 @ j0.T, j1 @ j1.T
    want = 1 - np.sum(k0 * k1) / (np.linalg.norm(k0) * np.linalg.norm(k1))
    assert float(ntk_kernel_distance(_mlp, p0, p1, X, chunk=5)) == pytest.approx(want, abs=1e-12)
    assert 0.0 < want < 1.0
    # a linear model's NTK does not move: S = 0 between any two parameter values
    lin = lambda p, x: x @ p["w"]
    pa, pb = {"w": jnp.ones((3, 2))}, {"w": -5.0 * jnp.ones((3, 2))}
    assert float(ntk_kernel_distance(lin, pa, pb, X, chunk=5)) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="same pytree structure"):
        ntk_kernel_distance(lin, pa, {"v": pa["w"]}, X)
    with pytest.raises(ValueError, match="identically zero"):
        ntk_kernel_distance(lambda p, x: 0.0 * (x @ p["w"]), pa, pb, X, chunk=5)


def test_parameter_norm_and_distance():
    p0 = _params(jax.random.PRNGKey(0))
    p1 = jax.tree.map(lambda a: a + 1.0, p0)
    want = sum(float(np.sum(np.asarray(v) ** 2)) for v in p0.values())
    assert float(parameter_norm(p0)) == pytest.approx(want, rel=1e-12)
    assert float(parameter_distance(p0, p1)) == pytest.approx(np.sqrt(3 * 7 + 7 + 7 * 2))


def test_activation_hamming_distance():
    rng = np.random.default_rng(1)
    a = [rng.normal(size=(4, 5)), rng.normal(size=(4, 3))]
    b = [a[0].copy(), -a[1]]
    b[0][0, :2] = -b[0][0, :2]
    assert float(activation_hamming_distance(a, b)) == pytest.approx((2 + 12) / 32)
    with pytest.raises(ValueError, match="shapes differ"):
        activation_hamming_distance(a, [a[0], a[1][:2]])


def test_filter_smoothness():
    rng = np.random.default_rng(2)
    w = rng.normal(size=(5, 5, 2, 3))
    got = np.asarray(filter_smoothness(w))
    lap = np.array([[-0.25, -0.5, -0.25], [-0.5, 2, -0.5], [-0.25, -0.5, -0.25]])  # K Eq. 129
    for i in range(2):
        for j in range(3):
            f = w[:, :, i, j] / np.linalg.norm(w[:, :, i, j])
            assert got[i, j] == pytest.approx(np.sum(correlate2d(f, lap, mode="valid") ** 2))
    flat = np.ones((3, 3, 1, 1))
    assert float(filter_smoothness(flat, laplacian=ZERO_SUM_LAPLACIAN)[0, 0]) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="all-zero filter"):
        filter_smoothness(np.zeros((3, 3, 1, 1)))
