"""Two-layer piecewise-linear networks: NTK vs autodiff, both integrators vs each other and diffrax."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sims import gradient_flow, tolerance
from sims import piecewise_linear as pl


def _problem(seed, h=5, d=3, n=8):
    k = jax.random.split(jax.random.PRNGKey(seed), 4)
    return (
        jax.random.normal(k[0], (h,)),
        jax.random.normal(k[1], (h, d)),
        jax.random.normal(k[2], (n, d)),
        jax.random.normal(k[3], (n,)),
    )


def _patterns(traj, X, gamma):
    return jax.vmap(lambda W: pl.activation_pattern(W, X, gamma))(traj.W)


@pytest.mark.parametrize("gamma", [0.0, 0.3])
def test_ntk_matches_jacobian(gamma):
    a, W, X, _ = _problem(0)
    eta_a, eta_w = 1.7, 0.6
    f = lambda p: pl.network(p[0], p[1], X, gamma)
    Ja, JW = jax.jacobian(f)((a, W))
    K_ref = eta_a * Ja @ Ja.T + eta_w * JW.reshape(X.shape[0], -1) @ JW.reshape(X.shape[0], -1).T
    K = pl.ntk(a, W, X, gamma, eta_a, eta_w)
    np.testing.assert_allclose(K, K_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("gamma", [0.0, 0.2])
def test_integrators_match_diffrax_before_any_pattern_change(gamma):
    # On a horizon with a fixed activation pattern the field is smooth: RK4 (both coordinate
    # systems) must agree with Dopri8 on the autodiff gradient of the loss to ~1e-10.
    a0, W0, X, y = _problem(1)
    t = jnp.linspace(0.0, 0.4, 5)
    kw = dict(gamma=gamma, eta_a=1.3, eta_w=0.8, n_substeps=100)
    p = pl.solve(a0, W0, X, y, t, **kw)
    s = pl.solve(a0, W0, X, y, t, coordinates="spherical", **kw)
    C = _patterns(p, X, gamma)
    assert bool(jnp.all(C == C[0]))
    loss = lambda q, _: 0.5 * jnp.sum((pl.network(q[0], q[1], X, gamma) - y) ** 2)
    a_ref, W_ref = gradient_flow(loss, (a0, W0), t, lr=(1.3, 0.8))
    for tr in (p, s):
        np.testing.assert_allclose(tr.a, a_ref, atol=tolerance(np.float64))
        np.testing.assert_allclose(tr.W, W_ref, atol=tolerance(np.float64))
    np.testing.assert_allclose(p.delta, 0.8 * a0**2 - 1.3 * jnp.sum(W0**2, -1), rtol=1e-13)


def test_rk4_is_fourth_order_across_kinks_against_diffrax():
    # Activation patterns change on this horizon (no sliding, so Dopri8 resolves the kinks by
    # step rejection): the kink-aware RK4 keeps its order, ≈7e-7 at the default 100 steps per
    # interval and 16⁴ times less at 1,600 (plain RK4 was first order here, ≈1e-3 at 100).
    a0, W0, X, y = _problem(5)
    t = jnp.linspace(0.0, 2.0, 5)
    loss = lambda q, _: 0.5 * jnp.sum((pl.network(q[0], q[1], X, 0.2) - y) ** 2)
    a_ref, W_ref = gradient_flow(loss, (a0, W0), t, lr=(1.3, 1.0), max_steps=400_000)
    errs = []
    for ns in (100, 1600):
        for coordinates in ("parameters", "spherical"):
            p = pl.solve(
                a0, W0, X, y, t, gamma=0.2, eta_a=1.3, n_substeps=ns, coordinates=coordinates
            )
            err = max(float(jnp.abs(p.W - W_ref).max()), float(jnp.abs(p.a - a_ref).max()))
            errs.append(err)
    C = _patterns(p, X, 0.2)
    assert int(jnp.sum(C[-1] != C[0])) > 0  # the pattern did change
    assert max(errs[:2]) < tolerance(np.float64, "fixed_step")
    assert max(errs[2:]) < 1e-3 * max(errs[:2])  # fourth order: 16⁴ ≈ 6.6e4 expected


def test_sliding_along_a_kink_is_fourth_order():
    # Here the flow slides along kinks (Filippov: the field on both sides points into w_iᵀx_j = 0;
    # Dopri8 runs out of steps). The sliding entries stay at z = 0, both coordinate systems agree,
    # and the default steps are within the fixed-step tolerance of a 16× finer run.
    a0, W0, X, y = _problem(2)
    t = jnp.linspace(0.0, 2.0, 5)
    kw = dict(gamma=0.2, eta_a=1.3)
    fine = pl.solve(a0, W0, X, y, t, n_substeps=1600, **kw)
    z = jnp.einsum("thd,nd->thn", fine.beta_hat, X)
    assert bool(jnp.any(jnp.all(jnp.abs(z[2:]) < 1e-12, axis=0)))  # an entry held at the kink
    for coordinates in ("parameters", "spherical"):
        p = pl.solve(a0, W0, X, y, t, n_substeps=100, coordinates=coordinates, **kw)
        q = pl.solve(a0, W0, X, y, t, n_substeps=400, coordinates=coordinates, **kw)
        err100 = float(jnp.abs(p.W - fine.W).max())
        err400 = float(jnp.abs(q.W - fine.W).max())
        assert err100 < tolerance(np.float64, "fixed_step")
        assert err400 < err100 / 50  # fourth order: 4⁴ = 256 expected


def test_downstream_neuron_changes_sign_in_both_coordinates():
    # δ < 0 and a_i pushed through zero: μ_i changes sign, the spherical field stays finite.
    X = jnp.array([[1.0, 0.2], [0.3, 1.0], [1.0, -0.5]])
    a0, W0 = jnp.array([0.05]), jnp.array([[1.0, 0.4]])
    y = -1.0 * (X @ W0[0]).clip(0.0)
    t = jnp.linspace(0.0, 3.0, 7)
    p = pl.solve(a0, W0, X, y, t, n_substeps=400)
    s = pl.solve(a0, W0, X, y, t, coordinates="spherical", n_substeps=400)
    assert float(p.delta[0]) < 0 and float(p.mu[-1, 0]) < 0 < float(p.mu[0, 0])
    assert bool(jnp.all(jnp.isfinite(s.mu)))
    np.testing.assert_allclose(s.a, p.a, atol=1e-9)
    np.testing.assert_allclose(s.W, p.W, atol=1e-9)


def test_limits_and_conservation():
    # Smooth horizon (fixed pattern): RK4 keeps the quadratic invariant δ_i to ~1e-12. (Through
    # sliding along a kink it drifts at O(dt); the spherical integrator carries δ_i exactly.)
    a0, W0, X, y = _problem(1)
    # The horizon, step size (0.1 / 100 = 0.2 / 200) and shapes of the integrator comparison
    # above, so its compiled program is reused.
    t = jnp.linspace(0.0, 0.4, 5)
    p = pl.solve(a0, W0, X, y, t, n_substeps=100, gamma=0.1)
    np.testing.assert_array_equal(p.a[0], a0)  # t = 0 returns the initialisation
    _, _, delta_t = pl.neuron_coordinates(p.a, p.W)
    np.testing.assert_allclose(delta_t, jnp.broadcast_to(p.delta, delta_t.shape), atol=1e-11)
    assert float(p.loss[-1]) < float(p.loss[0])


def test_euler_is_gradient_descent():
    a0, W0, X, y = _problem(4)
    lr, gamma = 0.01, 0.25
    loss = lambda q: 0.5 * jnp.sum((pl.network(q[0], q[1], X, gamma) - y) ** 2)
    q = (a0, W0)
    for _ in range(6):
        q = jax.tree.map(lambda v, g: v - lr * g, q, jax.grad(loss)(q))
    tr = pl.solve(a0, W0, X, y, jnp.array([6 * lr]), n_substeps=6, method="euler", gamma=gamma)
    np.testing.assert_allclose(tr.W[-1], q[1], atol=1e-14)
    np.testing.assert_allclose(tr.a[-1], q[0], atol=1e-14)


def test_coordinates_round_trip_and_distances():
    a, W, X, _ = _problem(5)
    mu, bh, delta = pl.neuron_coordinates(a, W, 1.5, 0.5)
    a2, W2 = pl.parameters_from_coordinates(mu, bh, delta, 1.5, 0.5)
    np.testing.assert_allclose(a2, a, rtol=1e-13)
    np.testing.assert_allclose(W2, W, rtol=1e-13)
    K = pl.ntk(a, W, X)
    assert abs(float(pl.kernel_distance(K, 3.0 * K))) < 1e-14
    C0 = pl.activation_pattern(W, X)
    assert float(pl.hamming_distance(C0, pl.activation_pattern(-W, X))) == 1.0


def test_vmap_over_seeds_and_no_recompile_on_new_gamma():
    a0, W0, X, y = (jnp.stack(v) for v in zip(*[_problem(s) for s in range(3)], strict=True))
    t = jnp.linspace(0.0, 1.0, 3)
    run = jax.vmap(lambda a, W, Xs, ys, g: pl.solve(a, W, Xs, ys, t, gamma=g, n_substeps=10))
    out = run(a0, W0, X, y, jnp.array([0.0, 0.1, 0.2]))
    assert out.W.shape == (3, 3, 5, 3)
    one = pl.solve(a0[1], W0[1], X[1], y[1], t, gamma=0.1, n_substeps=10)
    np.testing.assert_allclose(out.W[1], one.W, atol=1e-13)
    pl.solve(a0[0], W0[0], X[0], y[0], t, gamma=0.3, n_substeps=10)
    n = pl._solve._cache_size()
    pl.solve(a0[0], W0[0], X[0], y[0], t, gamma=0.45, n_substeps=10)
    assert pl._solve._cache_size() == n


def test_bad_input():
    a0, W0, X, y = _problem(0)
    t = jnp.linspace(0.0, 1.0, 3)
    for g in (1.0, -0.1):
        with pytest.raises(ValueError, match="gamma"):
            pl.solve(a0, W0, X, y, t, gamma=g)
    with pytest.raises(ValueError, match="a0"):
        pl.solve(a0[:-1], W0, X, y, t)
    with pytest.raises(ValueError, match="X"):
        pl.solve(a0, W0, X[:, :2], y, t)
    with pytest.raises(ValueError, match="y"):
        pl.solve(a0, W0, X, y[:-1], t)
    with pytest.raises(ValueError, match="non-zero"):
        pl.solve(a0, W0.at[0].set(0.0), X, y, t)
    with pytest.raises(ValueError, match="gamma"):
        pl.activation_pattern(W0, X, 1.5)


@pytest.mark.parametrize("name", ["eta_a", "eta_w"])
@pytest.mark.parametrize("value", [-1.0, 0.0, float("nan")])
def test_solve_rejects_non_positive_rates(name, value):
    X, y = jnp.eye(2), jnp.array([1.0, -1.0])
    with pytest.raises(ValueError, match=name):
        pl.solve(jnp.ones(2), jnp.eye(2), X, y, jnp.array([0.0, 1.0]), **{name: value})
