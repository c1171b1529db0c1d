"""Linear-model modes (T Eq. 1.25–1.26) and learnability (T Eq. 1.35) against independent answers."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import brentq

from sims import linear_model, tolerance

_ROUNDING = tolerance(np.float64, "rounding")


def test_solve_matches_gradient_flow_of_the_weights():
    # Random covariances, zero / tiny / O(1) inits and learning rates, 50 times each.
    err = linear_model.verify(jax.random.key(0), n_cases=4)
    assert err <= tolerance(jnp.float64)


def test_limits_and_zero_init_formula():
    rho = jnp.array([2.0, 0.3, 0.0])
    c0 = jnp.array([0.5, -1.0, 0.7])
    c_star = jnp.array([1.0, 2.0, -3.0])
    traj = linear_model.solve(c0, rho, c_star, jnp.array([0.0, 1e6]), eta=0.5)
    np.testing.assert_array_equal(traj.network_map[0], c0)
    # t → ∞: every mode with ρ > 0 reaches the target, a ρ = 0 mode never moves.
    np.testing.assert_allclose(traj.network_map[1], jnp.array([1.0, 2.0, 0.7]), rtol=0, atol=1e-15)
    # T Eq. 1.26 (f0 = 0): ⟨e_k|f⟩ = ⟨e_k|f*⟩(1 − e^{−ηρt}), written out in numpy.
    t = np.linspace(0.0, 7.0, 11)
    zero = linear_model.solve(0.0 * c0, rho, c_star, jnp.asarray(t), eta=0.5).network_map
    want = np.asarray(c_star) * (1.0 - np.exp(-0.5 * np.outer(t, np.asarray(rho))))
    np.testing.assert_allclose(zero, want, rtol=1e-14, atol=1e-15)


def test_feature_modes_reconstruct_the_function_norm():
    # ‖f‖² = E[(wᵀΦ)²] = wᵀΣw = Σ_k ⟨e_k|f⟩² (Parseval in the eigenbasis, T Eq. 1.15).
    key = jax.random.key(1)
    a = jax.random.normal(key, (6, 4))
    cov = a.T @ a / 6
    w = jax.random.normal(jax.random.key(2), (3, 4))
    rho, coeff = linear_model.feature_modes(cov, w)
    np.testing.assert_allclose(
        jnp.sum(coeff**2, -1), jnp.einsum("bi,ij,bj->b", w, cov, w), rtol=_ROUNDING
    )
    np.testing.assert_allclose(
        rho, np.sort(np.linalg.eigvalsh(np.asarray(cov)))[::-1], rtol=_ROUNDING
    )


@pytest.mark.parametrize("n", [0.5, 3.0, 9.9])
def test_learnability_matches_brentq(n):
    rho = jnp.array([3.0, 1.0, 0.3, 0.1, 1e-3, 1e-6, 0.0, 2e-2, 5e-1, 7.0, 1e-4])
    res = linear_model.learnability(rho, n)
    r = np.asarray(rho)
    kappa = brentq(lambda k: np.sum(r / (r + k)) - n, 1e-14, 1e6, xtol=1e-300, rtol=1e-15)
    np.testing.assert_allclose(res.kappa, kappa, rtol=_ROUNDING)
    np.testing.assert_allclose(jnp.sum(res.L), n, rtol=_ROUNDING)
    assert res.L[6] == 0.0  # a zero-eigenvalue direction is never learned


def test_learnability_equal_eigenvalues_closed_form():
    # m equal eigenvalues ρ: m ρ/(ρ + κ) = n ⇒ κ = ρ(m − n)/n, L = n/m.
    res = linear_model.learnability(jnp.full((8,), 0.25), 3.0)
    np.testing.assert_allclose(res.kappa, 0.25 * 5 / 3, rtol=1e-13)
    np.testing.assert_allclose(res.L, 3 / 8, rtol=1e-13)


def test_learnability_vmaps_over_n_without_retracing():
    traces = 0

    def f(rho, n):
        nonlocal traces
        traces += 1
        return linear_model.learnability(rho, n).kappa

    f = jax.jit(f)
    rho = jnp.array([1.0, 0.5, 0.25, 0.125])
    ns = jnp.array([0.5, 1.0, 2.0, 3.5])
    batched = jax.vmap(f, in_axes=(None, 0))(rho, ns)
    f(rho, ns[0])
    before = traces
    f(2.0 * rho, ns[1])
    f(rho, ns[2])
    assert traces == before  # new values of ρ and n do not retrace
    # κ scales with ρ (Eq. 1.35 is homogeneous).
    np.testing.assert_allclose(f(2.0 * rho, ns[1]), 2.0 * batched[1], rtol=_ROUNDING)


def test_solve_vmaps_and_does_not_retrace():
    traces = 0

    def f(rho, c0, c_star, t, lr):
        nonlocal traces
        traces += 1
        return linear_model.solve(c0, rho, c_star, t, eta=lr).network_map

    f = jax.jit(f)
    rho, cs, t = jnp.array([1.0, 0.1]), jnp.array([1.0, -1.0]), jnp.linspace(0, 3, 5)
    c0s = jnp.array([[0.0, 0.0], [0.2, 0.3], [1.0, 1.0]])
    out = jax.vmap(f, in_axes=(None, 0, None, None, None))(rho, c0s, cs, t, 1.0)
    assert out.shape == (3, 5, 2)
    f(rho, c0s[1], cs, t, 0.3)
    before = traces
    f(2 * rho, c0s[2], cs, t, 0.7)
    f(rho, c0s[0], -cs, 2 * t, 0.1)
    assert traces == before
    np.testing.assert_allclose(out[1], f(rho, c0s[1], cs, t, 1.0), rtol=1e-15)


def test_float32_and_long_times_stay_finite():
    rho = jnp.array([1.0, 1e-3], jnp.float32)
    out = linear_model.solve(jnp.zeros(2, jnp.float32), rho, jnp.ones(2, jnp.float32), 1e7)
    assert out.network_map.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(out.network_map)))
    np.testing.assert_allclose(out.network_map, 1.0, rtol=1e-6)


def test_bad_input():
    rho = jnp.array([1.0, 0.5])
    with pytest.raises(ValueError, match="rho"):
        linear_model.solve(0.0, jnp.array([1.0, -0.5]), rho, 1.0)
    with pytest.raises(ValueError, match="c0"):
        linear_model.solve(jnp.zeros(3), rho, rho, 1.0)
    with pytest.raises(ValueError, match="t"):
        linear_model.solve(0.0, rho, rho, jnp.array([-1.0]))
    with pytest.raises(ValueError, match="NaN"):
        linear_model.solve(jnp.array([jnp.nan, 0.0]), rho, rho, 1.0)
    with pytest.raises(ValueError, match="n must satisfy"):
        linear_model.learnability(jnp.array([1.0, 0.5, 0.0]), 2.0)  # only 2 nonzero modes
    with pytest.raises(ValueError, match="n must satisfy"):
        linear_model.learnability(rho, 0.0)
    with pytest.raises(ValueError, match="rho"):
        linear_model.learnability(jnp.ones((2, 2)), 1.0)
    with pytest.raises(ValueError, match="feature_cov"):
        linear_model.feature_modes(jnp.ones((2, 3)), jnp.ones(2))


def test_an_old_order_call_raises_instead_of_answering():
    # The former call solve(rho, c0, c_star, t, eta) with c0 = 0 used to be read in the contract
    # order and answered a wrong trajectory; only the contract order is accepted now.
    rho, c_star, t = jnp.array([2.0, 0.3]), jnp.array([1.0, -2.0]), jnp.linspace(0.0, 3.0, 4)
    with pytest.raises(TypeError):
        linear_model.solve(rho, jnp.zeros(2), c_star, t, 0.5)  # η positionally
    with pytest.raises(ValueError, match=r"solve\(c0, rho, c_star, t"):
        linear_model.solve(rho, 0.0, c_star, t, eta=0.5)  # a scalar in ρ's place
    with pytest.raises(ValueError, match="rho"):
        linear_model.solve(rho, jnp.array([0.5, -1.0]), c_star, t, eta=0.5)  # c0 < 0 is no ρ
    with warnings.catch_warnings():  # the contract order never warns
        warnings.simplefilter("error")
        got = linear_model.solve(jnp.zeros(2), rho, c_star, t, eta=0.5).network_map
    want = np.asarray(c_star) * -np.expm1(-0.5 * np.outer(np.asarray(t), np.asarray(rho)))
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)


def test_a_negative_eigenvalue_is_refused():
    # ρ < 0 would make the mode grow as e^{η|ρ|t}; it used to be answered (or the arguments
    # silently swapped when c0 ≥ 0).
    c0, c_star = jnp.array([0.5, 1.0]), jnp.array([1.0, 1.0])
    with pytest.raises(ValueError, match="rho .* must be non-negative"):
        linear_model.solve(c0, jnp.array([1.0, -0.5]), c_star, 1.0)
    with pytest.raises(ValueError, match="rho .* must be non-negative"):
        linear_model.solve(0.0, jnp.array([-1.0, 0.5]), c_star, 1.0)
    traced = jax.jit(lambda r: linear_model.solve(c0, r, c_star, 1.0).network_map)
    out = traced(jnp.array([1.0, -0.5]))
    assert np.isnan(out[1]) and np.isfinite(out[0])  # no concrete value to check: NaN, not growth
