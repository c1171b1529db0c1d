"""The fitted-readout D_LR against its naive n×n definition, on well- and ill-conditioned features."""

import jax.numpy as jnp
import numpy as np
import pytest

from metrics import dlr, fitted_readout, fitted_readout_dlr


def naive_fitted_readout_dlr(phi, y):
    """1 − CKA(HΦΦᵀH, P_F) with F = HΦ·lstsq(HΦ, HY): n×n matrices, NumPy's SVD and lstsq."""
    phi, y = np.asarray(phi, np.float64), np.asarray(y, np.float64).reshape(len(phi), -1)
    n = len(phi)
    h = np.eye(n) - np.ones((n, n)) / n
    f = h @ phi @ np.linalg.lstsq(h @ phi, h @ y, rcond=None)[0]
    k = h @ phi @ phi.T @ h
    u, s, _ = np.linalg.svd(f, full_matrices=False)
    r = int(np.sum(s > 1e-9 * s[0]))
    proj = u[:, :r] @ u[:, :r].T
    return 1.0 - np.sum(k * proj) / (np.linalg.norm(k) * np.linalg.norm(proj))


def _one_hot(rng, n, c):
    return np.eye(c)[rng.integers(0, c, n)]


def _graded(rng, n, p, decades):
    """Features with singular values spread over ``decades`` orders of magnitude, offset mean."""
    u, _ = np.linalg.qr(rng.normal(size=(n, p)))
    v, _ = np.linalg.qr(rng.normal(size=(p, p)))
    return (u * np.logspace(0, -decades, p)) @ v.T + 5.0


CASES = {
    "gaussian": lambda rng: (rng.normal(size=(120, 30)), _one_hot(rng, 120, 5)),
    "p > n": lambda rng: (rng.normal(size=(40, 90)), _one_hot(rng, 40, 4)),
    "graded 1e-6": lambda rng: (_graded(rng, 100, 20, 6), _one_hot(rng, 100, 6)),
    "graded 1e-3": lambda rng: (_graded(rng, 100, 20, 3), _one_hot(rng, 100, 6)),
    "scalar target": lambda rng: (rng.normal(size=(80, 16)), rng.normal(size=80)),
    "near collapse": lambda rng: (
        (y := _one_hot(rng, 90, 3)) @ rng.normal(size=(3, 24)) + 1e-5 * rng.normal(size=(90, 24)),
        y,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_naive_definition_float64(case):
    rng = np.random.default_rng(len(case))
    phi, y = CASES[case](rng)
    got = fitted_readout_dlr(jnp.asarray(phi), jnp.asarray(y))
    assert got.value.dtype == jnp.float64
    assert float(got.value) == pytest.approx(naive_fitted_readout_dlr(phi, y), abs=1e-9)


@pytest.mark.parametrize("case", ["gaussian", "graded 1e-3", "near collapse"])
def test_float32_within_1e3_of_naive(case):
    # float32 D_LR is within 1e-3 of float64 (metrics' stated float32 accuracy). Feature
    # directions below ~max(n, p)·ε₃₂ ≈ 1e-5 of s₁ are float32 round-off and are not fitted:
    # the float32 graded case spans 3 decades (the float64 cases above span 6).
    rng = np.random.default_rng(len(case))
    phi, y = CASES[case](rng)
    phi32, y32 = np.float32(phi), np.float32(y)
    got = fitted_readout_dlr(jnp.asarray(phi32), jnp.asarray(y32))
    assert got.value.dtype == jnp.float32
    assert float(got.value) == pytest.approx(naive_fitted_readout_dlr(phi32, y32), abs=1e-3)


def test_features_that_span_the_targets_read_their_own_d_lr():
    # Y ∈ col(Φ): the least-squares readout reproduces Y, so the fitted D_LR is D_LR(Φ, Y)
    rng = np.random.default_rng(3)
    phi = rng.normal(size=(60, 12))
    y = phi @ rng.normal(size=(12, 3)) + 2.0
    np.testing.assert_allclose(np.asarray(fitted_readout(phi, y)), y, atol=1e-10)
    assert float(fitted_readout_dlr(phi, y).value) == pytest.approx(float(dlr(phi, y)), abs=1e-12)


def test_random_features_read_the_isotropic_reference_on_average():
    from metrics import random_feature_dlr

    rng = np.random.default_rng(4)
    draws = [
        float(fitted_readout_dlr(rng.normal(size=(400, 64)), _one_hot(rng, 400, 10)).value)
        for _ in range(8)
    ]
    assert np.mean(draws) == pytest.approx(float(random_feature_dlr(400, 64, 9)), abs=0.01)


@pytest.mark.parametrize(
    ("phi", "y", "match"),
    [
        (np.ones((10, 3)), np.eye(10)[:, :2], "features are constant"),
        (np.zeros((10, 3)), np.eye(10)[:, :2], "features are constant"),
        (np.random.default_rng(0).normal(size=(10, 3)), np.ones((9, 2)), "same number of rows"),
        (np.full((4, 2), np.nan), np.ones((4, 1)), "NaN"),
    ],
)
def test_bad_input_is_refused(phi, y, match):
    with pytest.raises(ValueError, match=match):
        fitted_readout_dlr(phi, y)
