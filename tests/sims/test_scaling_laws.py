"""Scaling laws of the multilinear model (T Table 4.1, Eq 4.17–4.44, C.2)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sims import scaling_laws as sl
from sims import tolerance
from sims.skills import loss_curve


def test_exponents_table_4_1():
    ex = sl.exponents(0.6)
    np.testing.assert_allclose(
        [ex.time, ex.data, ex.params, ex.compute, ex.compute_T, ex.compute_N],
        [-0.6 / 1.6, -0.6 / 1.6, -0.6, -0.6 / 2.6, 1.6 / 2.6, 1 / 2.6],
    )
    with pytest.raises(ValueError, match="alpha"):
        sl.exponents(-0.1)


def test_norm_against_naive_sum():
    k = np.arange(1, 1001)
    assert float(sl.power_law_norm(0.5, 1000)) == pytest.approx(
        1 / np.sum(k**-1.5), rel=tolerance(np.float64, "rounding")
    )


def test_time_law_exponent_and_prefactor():
    a = 0.6
    T = np.logspace(2, 5, 13)
    L = sl.time_curve(T, a, n_sim=100_000)
    e, K = sl.fit_power_law(T, L)
    assert e == pytest.approx(float(sl.exponents(a).time), abs=0.002)
    assert K == pytest.approx(float(sl.prefactors(a).time), rel=0.01)


def test_time_curve_refuses_emerging_tail():
    with pytest.raises(ValueError, match="n_sim"):
        sl.time_curve(np.array([1e9]), 0.3, n_sim=1000)


def test_expected_data_loss_against_naive_sum_and_law():
    a, n_s = 0.5, 2000
    k = np.arange(1, n_s + 1)
    P = k**-1.5 / np.sum(k**-1.5)
    D = np.array([10, 100, 1000])
    naive = [0.5 * np.sum(P * (1 - P) ** d) for d in D]
    np.testing.assert_allclose(sl.expected_data_loss(D, a, n_s=n_s), naive, rtol=1e-10)
    Ds = np.logspace(3, 5, 9)
    e, K = sl.fit_power_law(Ds, sl.expected_data_loss(Ds, a, n_sim=200_000))
    assert e == pytest.approx(-a / (a + 1), abs=0.003)
    assert K == pytest.approx(float(sl.prefactors(a).data), rel=0.01)
    # a simulated data set agrees with the expectation (Eq 4.28)
    Lsim = sl.data_curve(jax.random.key(0), [1000], a, n_s=n_s, n_draws=20)
    assert float(Lsim[0]) == pytest.approx(naive[2], rel=0.05)


def test_parameter_law_against_naive_sum():
    a = 0.3
    N = np.array([1, 10, 100])
    k = np.arange(1, 3_000_001, dtype=float)
    P = k**-1.3 / float(jax.scipy.special.zeta(1.3, 1.0))
    naive = [0.5 * (1 - np.sum(P[:n])) for n in N]
    np.testing.assert_allclose(sl.parameter_curve(N, a), naive, rtol=1e-9)
    # finite training time: not all N skills are learned yet → larger loss
    assert float(sl.parameter_curve([100], a, T=10.0)[0]) > naive[2]


def test_compute_frontier_exponent():
    a = 0.6
    C = np.logspace(3, 8, 26)
    N = np.unique(np.logspace(1, 3.5, 30).astype(int))
    L = sl.compute_curves(C, N, a)
    Lstar, Nstar = sl.compute_frontier(C, N, L)
    e, _ = sl.fit_power_law(C, Lstar, (1e4, 1e7))
    assert e == pytest.approx(-a / (a + 2), abs=0.02)
    assert np.all(np.diff(np.asarray(Nstar)) >= 0)


def test_finite_n_correction_beats_plain_law():
    a, N = 0.1, 5000
    T = np.logspace(2, 4, 5)
    L = np.asarray(sl.time_curve(T, a, n_s=N))
    corr = np.asarray(sl.finite_n_time_law(T, a, N))
    plain = float(sl.prefactors(a).time) * T ** (-a / (a + 1))
    assert np.max(np.abs(corr / L - 1)) < 0.03 < np.max(np.abs(plain / L - 1))


def test_fit_power_law_exact():
    x = np.logspace(0, 3, 10)
    e, K = sl.fit_power_law(x, 2.5 * x**-0.7)
    assert (e, K) == (pytest.approx(-0.7), pytest.approx(2.5))


@pytest.mark.slow
def test_scaling_experiment_tiny(tmp_path):
    from lrrich.experiments import scaling_laws as exp

    with jax.numpy_dtype_promotion("standard"):
        res = exp.run(dataclasses.replace(exp.SCALES["tiny"], alphas=(0.6,)), tmp_path)
        assert res["summary"]["all within tolerance"]
        assert res["summary"]["C1 max log-error, corrected law"] < 0.1
        assert len(exp.plot(res, tmp_path)) == 3


def test_loss_curve_speed_vectorised():
    # 10^5 skills × 10^3 times is a single jitted pass (no Python loop over skills).
    P = jnp.ones(100_000) / 100_000
    f = jax.jit(lambda t: loss_curve(1e-3, 1.0, P, t))
    assert f(jnp.logspace(0, 6, 1000)).shape == (1000,)


def test_solve_is_the_flow_of_its_loss_and_follows_its_law():
    from sims import gradient_flow

    S, alpha, eta, r0 = 1.2, 0.8, 0.7, 1e-2
    t = jnp.linspace(0.0, 30.0, 5)
    a0 = jnp.full(3, jnp.sqrt(r0))
    ys = gradient_flow(sl.loss, {"a": a0, "b": a0}, t, (jnp.asarray(S), jnp.asarray(alpha)), lr=eta)
    want = jax.vmap(lambda q: sl.loss(q, (S, alpha)))(ys)
    sol = sl.solve(r0, S, alpha, t, eta=eta, n_s=3)
    np.testing.assert_allclose(sol.t, t)
    np.testing.assert_allclose(sol.loss, want, atol=tolerance(np.float64) * S**2)
    # n_s → ∞: the loss follows K_T T^{−α/(α+1)} once many skills have emerged.
    T = jnp.array([1e3, 3e3])
    inf = sl.solve(1e-3, 1.0, 1.0, T)
    np.testing.assert_allclose(inf.loss, inf.law, rtol=0.1)


def test_solve_bad_input():
    with pytest.raises(ValueError, match="S"):
        sl.solve(1e-3, jnp.nan, 1.0, jnp.array([1.0]))
    with pytest.raises(ValueError, match="eta"):
        sl.solve(1e-3, 1.0, 1.0, jnp.array([1.0]), eta=-1.0)
