"""Saxe task-aligned two-layer linear network (T §3.5, Eq. A.30–A.40) against independent answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sims import saxe, tolerance

SIGMA = jnp.array([[2.0, 0.3, -0.1, 0.4], [0.1, -1.0, 0.5, 0.0], [0.2, 0.1, 0.3, -0.6]])  # (c, d)


def test_solve_matches_gradient_flow():
    # Balanced small, tiny (1e-8), unbalanced mixed-sign and O(1)-with-a-zero-mode inits, random R.
    err = saxe.verify(jax.random.key(0), n_cases=4)
    assert err <= tolerance(jnp.float64)


def test_t0_and_t_infinity():
    init = saxe.aligned_init(SIGMA, 5, 0.3, jnp.array([0.5, -0.2, 0.1]))
    traj = saxe.solve(init.w1, init.w2, SIGMA, jnp.array([0.0, 1e4]))
    np.testing.assert_allclose(traj.w1[0], init.w1, atol=1e-15)
    np.testing.assert_allclose(traj.w2[0], init.w2, atol=1e-15)
    np.testing.assert_allclose(traj.network_map[1], SIGMA, atol=1e-13)  # learns Σ_yx (h ≥ r)
    np.testing.assert_allclose(traj.strength[1], np.linalg.svd(np.asarray(SIGMA))[1], rtol=1e-13)


def test_balanced_modes_are_the_sigmoid_of_eq_a39_and_map_of_eq_a40():
    alpha0 = 1e-3
    init = saxe.aligned_init(SIGMA, 4, alpha0)
    t = np.linspace(0.0, 15.0, 31)
    traj = saxe.solve(init.w1, init.w2, SIGMA, jnp.asarray(t))
    u, rho, vt = np.linalg.svd(np.asarray(SIGMA), full_matrices=False)
    # Eq. A.39 written out: α²/ρ = 1/(1 + (ρ/α0² − 1) e^{−2ρt}).
    alpha2 = rho / (1.0 + (rho / alpha0**2 - 1.0) * np.exp(-2.0 * rho * t[:, None]))
    np.testing.assert_allclose(traj.strength, alpha2, rtol=1e-12)
    np.testing.assert_allclose(
        traj.network_map, np.einsum("cr,tr,rd->tcd", u, alpha2, vt), atol=1e-13
    )
    # Greedy / stage-like: when mode 1 is half learned the others are still tiny (T §3.5.1).
    t_half = np.log(rho[0] / alpha0**2 - 1) / (2 * rho[0])
    s = saxe.solve(init.w1, init.w2, SIGMA, jnp.array(t_half)).strength / rho
    assert s[0] == pytest.approx(0.5, rel=1e-10) and float(jnp.max(s[1:])) < 1e-2


def test_conserved_quantity_eq_a29():
    init = saxe.aligned_init(SIGMA, 5, jnp.array([0.7, 0.2, 0.05]), jnp.array([0.1, -0.3, 0.4]))
    traj = saxe.solve(init.w1, init.w2, SIGMA, jnp.linspace(0.0, 30.0, 7))
    q = saxe.conserved(traj.w1, traj.w2)
    np.testing.assert_allclose(q, jnp.broadcast_to(q[0], q.shape), atol=1e-13)
    # Balanced aligned init is exactly balanced (T Eq. A.31).
    bal = saxe.aligned_init(SIGMA, 5, 0.1)
    np.testing.assert_allclose(saxe.conserved(bal.w1, bal.w2), 0.0, atol=1e-16)


def test_narrow_hidden_layer_learns_the_top_modes():
    init = saxe.aligned_init(SIGMA, 2, 0.1)  # h = 2 < r = 3: the third mode is a saddle
    traj = saxe.solve(init.w1, init.w2, SIGMA, jnp.array([1e3]))
    rho = np.linalg.svd(np.asarray(SIGMA), compute_uv=False)
    np.testing.assert_allclose(traj.strength[0], [rho[0], rho[1], 0.0], atol=1e-13)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_finite_for_long_times_and_tiny_inits(dtype):
    sigma = SIGMA.astype(dtype)
    init = saxe.aligned_init(sigma, 3, 1e-12)
    t = jnp.array([0.0, 1.0, 1e2, 1e4], dtype)
    traj = saxe.solve(init.w1, init.w2, sigma, t)
    for x in traj:
        assert x.dtype == dtype and bool(jnp.all(jnp.isfinite(x)))
    np.testing.assert_allclose(traj.network_map[-1], sigma, atol=10 * tolerance(dtype))


def test_vmap_over_init_scales_and_no_retrace():
    traces = 0

    def f(scale, t):
        nonlocal traces
        traces += 1
        init = saxe.aligned_init(SIGMA, 3, scale)
        return saxe.solve(init.w1, init.w2, SIGMA, t).strength

    jf = jax.jit(f)
    scales = jnp.array([1e-6, 1e-3, 0.5])
    t = jnp.linspace(0.0, 10.0, 6)
    out = jax.vmap(jf, in_axes=(0, None))(scales, t)
    assert out.shape == (3, 6, 3)
    jf(scales[0], t)
    before = traces
    jf(0.4 * scales[2], 2 * t)
    assert traces == before
    np.testing.assert_allclose(out[1], f(scales[1], t), rtol=1e-13)


def test_bad_input():
    init = saxe.aligned_init(SIGMA, 4, 0.1)
    with pytest.raises(ValueError, match="task-aligned"):
        saxe.solve(init.w1 + 0.01, init.w2, SIGMA, 1.0)
    with pytest.raises(ValueError, match="w2_0"):
        saxe.solve(init.w1, init.w2.T, SIGMA, 1.0)
    with pytest.raises(ValueError, match="w1_0"):
        saxe.solve(init.w1[:, :3], init.w2, SIGMA, 1.0)
    with pytest.raises(ValueError, match="t"):
        saxe.solve(init.w1, init.w2, SIGMA, -1.0)
    with pytest.raises(ValueError, match="sigma_yx"):
        saxe.solve(init.w1, init.w2, SIGMA.at[0, 0].set(jnp.nan), 1.0)
    with pytest.raises(ValueError, match="hidden"):
        saxe.aligned_init(SIGMA, 0, 0.1)
    with pytest.raises(ValueError, match="rotation"):
        saxe.aligned_init(SIGMA, 4, 0.1, rotation=jnp.eye(4))


def test_the_former_argument_order_raises():
    # saxe.solve(sigma_yx, w1_0, w2_0, t, lr) was once read by its shapes; it now fails loudly.
    init = saxe.aligned_init(SIGMA, 4, 0.1)
    t = jnp.array([0.0, 0.5, 2.0])
    with pytest.raises(TypeError):
        saxe.solve(SIGMA, init.w1, init.w2, t, 0.5)
    with pytest.raises(ValueError, match="shape"):
        saxe.solve(SIGMA, init.w1, init.w2, t, eta=0.5)
    new = saxe.solve(init.w1, init.w2, SIGMA, t, eta=0.5)
    np.testing.assert_allclose(new.strength[1], saxe.solve(init.w1, init.w2, SIGMA, 0.25).strength)
