"""Diagonal linear network (T §3.3–3.4): the exact solution for any C against independent answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import brentq

from sims import diagonal, gradient_flow, linear_model, tolerance


def test_solve_matches_gradient_flow_for_all_init_kinds():
    # Six kinds: balanced small, unbalanced O(1), tiny 1e-12 with a saddle and a = −b,
    # strongly unbalanced, wrong-sign u0, overshoot; random σ² and target signs.
    err = diagonal.verify(jax.random.key(0), n_cases=6)
    assert err <= tolerance(jnp.float64)


def test_t0_and_t_infinity():
    a0 = jnp.array([0.3, -0.2, 1e-6, 0.5, 0.0, 0.4, 0.0])
    b0 = jnp.array([0.1, 0.7, 1e-6, -0.5, 0.0, -0.4, 0.3])
    S = jnp.array([1.0, -2.0, 0.5, 1.0, 1.0, -1.5, 2.0])
    traj = diagonal.solve(a0, b0, 0.7, S, jnp.array([0.0, 1e5]))
    np.testing.assert_allclose(traj.a[0], a0, rtol=1e-15, atol=1e-300)
    np.testing.assert_allclose(traj.b[0], b0, rtol=1e-15, atol=1e-300)
    # t → ∞: u → S, except a0 = −b0 with S > 0 (anti-balanced saddle, u → 0) and a0 = b0 = 0.
    want = jnp.array([1.0, -2.0, 0.5, 0.0, 0.0, -1.5, 2.0])
    np.testing.assert_allclose(traj.network_map[1], want, rtol=1e-13, atol=1e-15)
    # C = a² − b² is conserved at the end too (T Eq. 3.8).
    np.testing.assert_allclose(
        traj.a[1] ** 2 - traj.b[1] ** 2, a0**2 - b0**2, rtol=1e-12, atol=1e-14
    )


def test_balanced_is_the_sigmoid_of_eq_3_9():
    # T Eq. 3.9 / A.20 written out: u/S = 1/(1 + (S/u0 − 1) e^{−2Sσ²t}).
    a0 = np.array([0.01, 0.2, 1.5])
    S, s2 = np.array([1.0, 2.0, 1.0]), np.array([1.0, 0.3, 2.0])
    t = np.linspace(0.0, 20.0, 41)[:, None]
    want = S / (1.0 + (S / a0**2 - 1.0) * np.exp(-2.0 * S * s2 * t))
    got = diagonal.solve(jnp.asarray(a0), jnp.asarray(a0), jnp.asarray(s2), jnp.asarray(S), t[:, 0])
    np.testing.assert_allclose(got.network_map, want, rtol=1e-13)
    np.testing.assert_allclose(got.a, got.b, rtol=1e-15)  # stays balanced


def test_zero_target_and_balanced_is_algebraic_decay():
    # D = √(4S² + C²) = 0: u̇ = −2σ²u² ⇒ u = u0/(1 + 2σ²u0 t), the degenerate limit of the closed form.
    t = jnp.linspace(0.0, 1e4, 7)
    got = diagonal.solve(jnp.array([0.8]), jnp.array([0.8]), 0.5, 0.0, t).network_map[:, 0]
    np.testing.assert_allclose(got, 0.64 / (1.0 + 2 * 0.5 * 0.64 * t), rtol=1e-13)


def test_large_C_is_the_linear_model_exponential():
    # |C| ≫ |S|: a² + b² ≈ |C|, so u̇ ≈ −σ²|C|(u − S): the linear model with ρ = σ²|C| (T Eq. 3.7).
    S, s2 = jnp.array([1.0]), jnp.array([0.5])
    t = jnp.linspace(0.0, 0.2, 30)
    for big in (1e2, 1e4):
        a0, b0 = jnp.array([jnp.sqrt(big)]), jnp.array([0.0])
        exact = diagonal.solve(a0, b0, s2, S, t).network_map
        lin = linear_model.solve(a0 * b0, s2 * big, S, t).coeff
        assert float(jnp.max(jnp.abs(exact - lin))) < 5.0 / big


def test_small_init_stages_and_eq_3_10():
    # Small balanced init: modes saturate one after another (sigmoid stages, T Fig. 3.3b), while the
    # linear model (Eq. 3.10) has every mode rising from t = 0.
    s2 = jnp.array([1.0, 0.25])
    a0 = jnp.full((2,), 1e-4)
    t_half1 = np.log(1e8 - 1) / 2  # u1 = S/2 (Eq. 3.9 with S = 1)
    traj = diagonal.solve(a0, a0, s2, 1.0, jnp.array([t_half1]))
    assert traj.network_map[0, 0] == pytest.approx(0.5, rel=1e-10) and traj.network_map[0, 1] < 1e-6
    lin = diagonal.linear_comparison(s2, 1.0, jnp.array([t_half1]))
    np.testing.assert_allclose(lin[0], 1.0 - np.exp(-np.asarray(s2) * t_half1), rtol=1e-14)


def test_emergent_and_saturation_times_against_the_integrator():
    # Eq. 3.12: at τ^(e) the integrated u/S equals ε, at τ^(e) + τ^(s) it equals 1 − ε.
    eps, u0, S = 0.05, 1e-6, 2.0
    s2 = jnp.array([1.5, 0.4])
    tau_e = diagonal.emergent_time(eps, u0, S, s2)
    tau_s = diagonal.saturation_time(eps, S, s2)
    times = jnp.sort(jnp.concatenate([tau_e, tau_e + tau_s]))
    a0 = jnp.full((2,), np.sqrt(u0))
    flow = diagonal._reference_flow({"a": a0, "b": a0}, times, (s2, jnp.full((2,), S)))
    u = flow["a"] * flow["b"] / S
    idx = {float(x): i for i, x in enumerate(times)}
    for k in range(2):
        assert u[idx[float(tau_e[k])], k] == pytest.approx(eps, rel=1e-8)
        assert u[idx[float(tau_e[k] + tau_s[k])], k] == pytest.approx(1 - eps, rel=1e-8)


def test_stage_like_threshold_is_the_root_of_eq_3_14():
    # ε* from brentq on the naive Eq. 3.12 times, vs the corrected closed form of Eq. 3.13.
    s2, u0, S = jnp.array([1.0, 0.6, 0.1]), 1e-5, 1.0
    thr = diagonal.stage_like_threshold(s2, u0, S)
    for i in range(2):
        si, sj = float(s2[i]), float(s2[i + 1])

        def gap(e, si=si, sj=sj):
            te = lambda s: np.log((S / u0 - 1) / (1 / e - 1)) / (2 * s * S)
            return np.log(1 / e - 1) / (si * S) - (te(sj) - te(si))

        root = brentq(gap, 1e-12, 0.5 - 1e-12, xtol=1e-16, rtol=1e-14)
        assert float(thr[i]) == pytest.approx(root, rel=1e-10)
    # Eq. 3.14 holds exactly above ε*.
    np.testing.assert_array_equal(diagonal.stage_like(1.01 * thr[0], s2, u0, S)[0], True)
    np.testing.assert_array_equal(diagonal.stage_like(0.99 * thr[0], s2, u0, S)[0], False)
    # The printed Eq. 3.13 (a product, not a power) is not the threshold.
    k = S / u0 - 1
    printed = 1 / (1 + k * (0.6 - 1.0) / (0.6 + 1.0))
    assert not 0 < printed < 1 or abs(printed - float(thr[0])) > 1e-3


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_finite_for_long_times_and_tiny_inits(dtype):
    a0 = jnp.array([1e-12, 1e-12, -1e-12, 1e-12, 0.0, 3.0], dtype)
    b0 = jnp.array([1e-12, 0.0, 1e-12, -2e-12, 0.0, 1e-12], dtype)
    S = jnp.array([1.0, -1.0, 1.0, 0.5, 1.0, 1e-3], dtype)
    s2 = jnp.array([1.0, 0.01, 1.0, 0.1, 1.0, 1e-2], dtype)
    t = jnp.array([0.0, 1.0, 1e2, 1e4, 1e6], dtype)
    traj = diagonal.solve(a0, b0, s2, S, t)
    for x in traj:
        assert x.dtype == dtype and bool(jnp.all(jnp.isfinite(x)))
    assert traj.network_map[-1, 4] == 0.0  # the saddle a = b = 0 stays put
    np.testing.assert_allclose(traj.network_map[-1, [0, 1, 3]], S[jnp.array([0, 1, 3])], rtol=1e-5)
    if dtype == jnp.float32:  # agrees with the float64 answer
        ref = diagonal.solve(*(jnp.asarray(x, jnp.float64) for x in (a0, b0, s2, S, t))).network_map
        np.testing.assert_allclose(traj.network_map, ref, atol=tolerance(jnp.float32), rtol=1e-4)


def test_vmap_over_inits_and_no_retrace():
    traces = 0

    def f(a0, b0, s2, S, t):
        nonlocal traces
        traces += 1
        return diagonal.solve(a0, b0, s2, S, t).network_map

    jf = jax.jit(f)
    a0s = jnp.array([[0.1, 0.2], [1e-6, -0.3], [0.0, 0.0]])
    b0s = jnp.array([[0.1, -0.1], [2e-6, 0.3], [0.0, 0.5]])
    s2, S, t = jnp.array([1.0, 0.5]), jnp.array([1.0, -1.0]), jnp.linspace(0, 5, 4).reshape(2, 2)
    out = jax.vmap(jf, in_axes=(0, 0, None, None, None))(a0s, b0s, s2, S, t)
    assert out.shape == (3, 2, 2, 2)
    jf(a0s[0], b0s[0], s2, S, t)
    before = traces
    jf(a0s[1], b0s[1], 2 * s2, -S, t + 1)
    assert traces == before
    for i in range(3):
        np.testing.assert_allclose(out[i], f(a0s[i], b0s[i], s2, S, t), rtol=1e-14, atol=1e-300)


def test_bad_input():
    a = jnp.array([0.1, 0.2])
    with pytest.raises(ValueError, match="b0"):
        diagonal.solve(a, jnp.ones(3), 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="sigma2"):
        diagonal.solve(a, a, jnp.array([1.0, -1.0]), 1.0, 1.0)
    with pytest.raises(ValueError, match="S"):
        diagonal.solve(a, a, 1.0, jnp.ones(3), 1.0)
    with pytest.raises(ValueError, match="t"):
        diagonal.solve(a, a, 1.0, 1.0, -1.0)
    with pytest.raises(ValueError, match="a0"):
        diagonal.solve(jnp.array([jnp.inf, 0.0]), a, 1.0, 1.0, 1.0)
    with pytest.raises(TypeError):  # the rate is eta=, keyword-only (lr= and a sixth arg are gone)
        diagonal.solve(a, a, 1.0, 1.0, 1.0, 0.5)
    with pytest.raises(TypeError):
        diagonal.solve(a, a, 1.0, 1.0, 1.0, lr=0.5)
    with pytest.raises(ValueError, match="u0 / S"):
        diagonal.emergent_time(0.1, 2.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="eps"):
        diagonal.emergent_time(1.5, 0.1, 1.0, 1.0)
    with pytest.raises(ValueError, match="strictly decreasing"):
        diagonal.stage_like_threshold(jnp.array([0.1, 1.0]), 1e-3, 1.0)


def test_grad_of_a_and_b_at_a_balanced_init_is_finite():
    # a₀ = b₀ = 0.1, σ² = 1, S = 2, t = 2: C = a₀² − b₀² = 0. jax.grad of a(t), b(t) w.r.t. a₀ was
    # NaN (sign(q₀)·√(q²) at q₀ = 0); compare with a central difference of the integrated flow.
    task, t = (jnp.ones(1), jnp.full(1, 2.0)), jnp.array([0.0, 2.0])

    def closed_form(a0):
        out = diagonal.solve(jnp.array([a0]), jnp.array([0.1]), *task, t[-1])
        return jnp.stack([out.a[0], out.b[0], out.network_map[0]])

    def flow(a0):
        ref = gradient_flow(diagonal.loss, {"a": jnp.array([a0]), "b": jnp.array([0.1])}, t, task)
        return np.array([ref["a"][-1, 0], ref["b"][-1, 0], ref["a"][-1, 0] * ref["b"][-1, 0]])

    grad = np.asarray(jax.jacrev(closed_form)(0.1))
    h = 1e-5
    fd = (flow(0.1 + h) - flow(0.1 - h)) / (2 * h)
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, fd, rtol=0, atol=tolerance(np.float64, "finite_difference"))
    np.testing.assert_allclose(grad[0], 0.4671, atol=1e-4)  # the central difference quoted for .a
