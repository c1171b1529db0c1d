"""The random-feature reference D_LR: closed form against Monte Carlo of its definition."""

import jax
import numpy as np
import pytest

from metrics import random_feature_dlr, random_feature_dlr_mc

# (n, p, rank): wide and narrow features, n < p, a scalar output, the widths of the zoo's heads.
GRID = [(2000, 32, 10), (600, 256, 10), (300, 512, 9), (200, 64, 1), (120, 40, 3)]


def _naive_fitted_dlr(rng, n, p, r):
    """One draw of the fitted-readout model with n×n matrices (1 − CKA of T Eq 2.9)."""
    phi = rng.normal(size=(n, p))
    h = np.eye(n) - 1.0 / n
    k = h @ phi @ phi.T @ h
    y = rng.normal(size=(n, r))
    f = h @ phi @ np.linalg.lstsq(h @ phi, h @ y, rcond=None)[0]  # fitted readout, intercept
    u = np.linalg.svd(f, full_matrices=False)[0][:, :r]
    proj = u @ u.T
    return 1.0 - np.sum(k * proj) / (np.linalg.norm(k) * np.linalg.norm(proj))


@pytest.mark.parametrize(("n", "p", "r"), [(150, 30, 5), (80, 120, 3)])
def test_fitted_closed_form_matches_naive_definition(n, p, r):
    rng = np.random.default_rng(0)
    draws = np.array([_naive_fitted_dlr(rng, n, p, r) for _ in range(40)])
    stderr = draws.std(ddof=1) / np.sqrt(draws.size)
    assert abs(random_feature_dlr(n, p, r) - draws.mean()) < 4 * stderr + 2e-3


@pytest.mark.parametrize(("n", "p", "r"), GRID)
def test_fitted_closed_form_matches_monte_carlo(n, p, r):
    mc = random_feature_dlr_mc(jax.random.key(1), n, p, r, draws=16)
    tol = 4 * mc.std / np.sqrt(16) + 2e-3  # Monte Carlo error + the stated approximation bound
    assert abs(float(random_feature_dlr(n, p, r)) - mc.mean) < tol


@pytest.mark.parametrize(("n", "p", "r"), [(2000, 32, 8), (600, 256, 10)])
def test_random_readout_closed_form_matches_monte_carlo(n, p, r):
    mc = random_feature_dlr_mc(jax.random.key(2), n, p, r, readout="random", draws=16)
    tol = 4 * mc.std / np.sqrt(16) + 5e-3  # r ≤ p/4: the stated bound
    assert abs(float(random_feature_dlr(n, p, r, readout="random")) - mc.mean) < tol


def test_large_n_limit_and_known_widths():
    # n → ∞: both readouts → 1 − √(r/p); at r = 10 this is 0.441 (p = 32) and 0.860 (p = 512)
    for p in (32, 512):
        limit = 1 - np.sqrt(10 / p)
        for readout in ("fitted", "random"):
            assert abs(random_feature_dlr(10**9, p, 10, readout=readout) - limit) < 1e-6
    assert abs(1 - np.sqrt(10 / 32) - 0.441) < 1e-3


def test_monotone_in_width_and_rank_and_broadcasts():
    widths = random_feature_dlr(4000, np.array([16, 32, 64, 128, 512]), 10)
    assert widths.shape == (5,) and np.all(np.diff(widths) > 0)  # wider → larger reference
    ranks = random_feature_dlr(4000, 64, np.arange(1, 11))
    assert np.all(np.diff(ranks) < 0)  # more output directions → smaller reference
    assert widths.dtype == np.float64


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((1, 32, 1), {}, "n ≥ 2"),
        ((100, 0, 1), {}, "p ≥ 1"),
        ((100, 32, 0), {}, r"rank must lie in \[1"),
        ((100, 8, 9), {}, r"rank must lie in \[1"),
        ((10, 32, 10), {}, r"rank must lie in \[1"),  # r ≤ n − 1
        ((100.5, 32, 1), {}, "whole number"),
        ((100, 32, 1), {"readout": "trained"}, "readout must be one of"),
    ],
)
def test_bad_input_is_refused(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        random_feature_dlr(*args, **kwargs)


def test_monte_carlo_needs_two_draws():
    with pytest.raises(ValueError, match="draws ≥ 2"):
        random_feature_dlr_mc(jax.random.key(0), 50, 8, 2, draws=1)
