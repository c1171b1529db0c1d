"""Scalar-in/out p-wide network (T Theorem 1) against the integrator, its limits and lazy regimes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sims import gradient_flow, scalar_linear
from sims.scalar_linear import gamma_plus, solve


def _loss(p, args):
    S, Z = args
    return 0.5 * (jnp.sum(p["a"] * p["b"]) / Z - S) ** 2


def test_verify_against_integrator():
    # Random signs, scales over four decades of S, unbalanced inits, Z ∈ {1, √p}.
    assert scalar_linear.verify(jax.random.key(0), 8) <= 1e-8


def test_thesis_rate_constant_is_twice_the_half_mse_rate():
    # T Eq. 6.12 as printed (exponent −4Dt/Z), coded independently of the module.
    a0 = jnp.array([0.3, -0.1, 0.2])
    b0 = jnp.array([0.1, 0.25, -0.3])
    S, Z = 1.5, 1.0
    t = jnp.linspace(0.0, 3.0, 13)
    Sig0 = float(jnp.sum(a0**2 + b0**2) / 2 / Z)
    S0 = float(jnp.sum(a0 * b0) / Z)
    D = np.sqrt(Sig0**2 - S0**2 + S**2)

    def printed(t, rate):
        e = np.exp(-rate * D / Z * t)
        num = Sig0 - S0 + S + D + (-Sig0 + S0 - S + D) * e
        den = Sig0 + S0 - S + D + (-Sig0 - S0 + S + D) * e
        return num / den

    ys = gradient_flow(_loss, {"a": a0, "b": b0}, t, (S, Z))
    gamma_flow = ((ys["a"][:, 0] + ys["b"][:, 0]) / (a0[0] + b0[0])) ** 2  # u = u₀ γ^{1/2}
    np.testing.assert_allclose(solve(a0, b0, S, t, Z=Z).gamma, gamma_flow, atol=1e-9)
    np.testing.assert_allclose(printed(np.asarray(t), 2.0), gamma_flow, atol=1e-9)
    assert np.max(np.abs(printed(np.asarray(t), 4.0) - gamma_flow)) > 1e-2  # as printed: off


def test_t0_and_t_infinity_limits():
    a0 = jnp.array([0.2, -0.4, 0.1, 0.05])
    b0 = jnp.array([0.3, 0.1, -0.2, 0.05])
    S, Z = -2.0, 2.0
    sol = solve(a0, b0, S, jnp.array([0.0, 1e4]), Z=Z)
    np.testing.assert_allclose(sol.a[0], a0, rtol=1e-15)
    np.testing.assert_allclose(sol.b[0], b0, rtol=1e-15)
    np.testing.assert_allclose(sol.theta[0], jnp.sum(a0 * b0) / Z, rtol=1e-14)
    np.testing.assert_allclose(sol.theta[1], S, rtol=1e-13)
    np.testing.assert_allclose(sol.gamma[1], sol.gamma_plus, rtol=1e-13)
    np.testing.assert_allclose(jnp.sum(sol.a[1] * sol.b[1]) / Z, S, rtol=1e-12)
    # Conserved a_i² − b_i² (T §6.2).
    np.testing.assert_allclose(
        sol.a**2 - sol.b**2, jnp.broadcast_to(a0**2 - b0**2, (2, 4)), atol=1e-15
    )


def test_aligned_modes_follow_eq_6_8_and_6_9():
    # ±1 init, a = ±b: I₊ grows as (θ + Δθ)/(θ₀ + Δθ₀), I₋ shrinks by the inverse (T Eq. 6.8–6.9).
    a0 = jnp.array([1.0, -1.0, 1.0, 1.0, -1.0])
    b0 = jnp.array([1.0, -1.0, -1.0, 1.0, 1.0])
    sol = solve(a0, b0, 8.0, jnp.linspace(0.0, 2.0, 9))
    ratio = (sol.theta + sol.delta_theta) / (sol.theta[0] + sol.delta_theta[0])
    al = (a0 * b0) > 0
    np.testing.assert_allclose(sol.a[:, al] ** 2, ratio[:, None] * a0[al] ** 2, rtol=1e-12)
    np.testing.assert_allclose(sol.a[:, ~al] ** 2, a0[~al] ** 2 / ratio[:, None], rtol=1e-12)
    np.testing.assert_allclose(sol.theta_aligned + sol.theta_antialigned, sol.theta, atol=1e-12)


def test_weight_to_target_bound():
    # γ₊ ≥ S/Σ₀ (T §6.3.1) on random inits and targets.
    k1, k2, k3 = jax.random.split(jax.random.key(1), 3)
    scale = 10 ** jax.random.uniform(k2, (200, 1, 1), minval=-2, maxval=1)
    ab = jax.random.normal(k1, (200, 2, 7)) * scale
    S = 10 ** jax.random.uniform(k3, (200,), minval=-2, maxval=2)
    sol = jax.vmap(lambda x, s: solve(x[0], x[1], s, jnp.zeros(())))(ab, S)
    assert jnp.all(sol.gamma_plus >= S / sol.Sigma0 * (1 - 1e-12))


def test_three_lazy_limits_give_gamma_plus_to_one():
    key = jax.random.key(2)
    # 1) Target downscaling, θ₀ = 0 (symmetrised pairs): |γ₊ − 1| = O(S).
    a = jax.random.normal(key, (8,))
    a0, b0 = jnp.concatenate([a, a]), jnp.concatenate([a, -a])
    devs = [abs(float(gamma_plus(a0, b0, S)) - 1) for S in (1.0, 1e-2, 1e-4)]
    assert devs[0] > 0.1 and devs[2] < 1e-3 and devs[1] > devs[2]
    # 2) NTK init: a, b ~ N(0, 1), Z = √p, p → ∞.
    devs = []
    for p in (10, 1_000, 100_000):
        ab = jax.random.normal(jax.random.fold_in(key, p), (2, p))
        devs.append(abs(float(gamma_plus(ab[0], ab[1], 1.0, np.sqrt(p))) - 1))
    assert devs[0] > devs[1] > devs[2] and devs[2] < 0.05
    # 3) Large init at fixed S, from the zero function (θ₀ = 0, symmetrised as in 1).
    devs = [abs(float(gamma_plus(s * a0, s * b0, 1.0)) - 1) for s in (0.1, 10.0, 1000.0)]
    assert devs[0] > 10 and devs[2] < 1e-4
    # and the weights barely move in the lazy limit, by a lot in the rich one
    lazy = solve(1000.0 * a0, 1000.0 * b0, 1.0, jnp.array([1e4]))
    rich = solve(1e-3 * a0, 1e-3 * b0, 1.0, jnp.array([1e4]))
    assert jnp.max(jnp.abs(lazy.a[0] / (1000.0 * a0) - 1)) < 1e-4
    assert jnp.max(jnp.abs(rich.a[0] / (1e-3 * a0))) > 10


def test_regime_limit_balanced_small_init_is_a_sigmoid():
    # a = b = ε, p = 1, Z = 1: θ̇ = 2θ(S − θ), Saxe's logistic (T Eq. 3.9 with σ = 1).
    eps, S = 1e-3, 2.0
    t = jnp.linspace(0.0, 5.0, 21)
    th0 = eps**2
    logistic = S * th0 * jnp.exp(2 * S * t) / (S - th0 + th0 * jnp.exp(2 * S * t))
    np.testing.assert_allclose(
        solve(jnp.array([eps]), jnp.array([eps]), S, t).theta, logistic, rtol=1e-12
    )


def test_finite_long_time_tiny_init_and_saddle():
    t = jnp.array([0.0, 1.0, 1e2, 1e4])
    for a0, b0 in (
        (jnp.full(4, 1e-12), jnp.full(4, -1e-12)),
        (jnp.full(4, 1e-12), jnp.full(4, 2e-12)),
    ):
        for S in (1.0, -1.0, 0.0):
            sol = solve(a0, b0, S, t)
            for leaf in (sol.a, sol.b, sol.theta):
                assert jnp.all(jnp.isfinite(leaf))
    sad = solve(jnp.zeros(3), jnp.zeros(3), 1.0, t)
    assert jnp.all(sad.a == 0) and jnp.all(sad.b == 0) and jnp.all(sad.theta == 0)
    np.testing.assert_allclose(solve(jnp.full(4, 1e-12), jnp.full(4, 1e-12), 1.0, t).theta[-1], 1.0)


def test_vmap_and_no_recompilation():
    keys = jax.random.split(jax.random.key(3), 5)
    ab = jax.vmap(lambda k: jax.random.normal(k, (2, 6)))(keys)
    t = jnp.linspace(0.0, 3.0, 4)
    batch = jax.vmap(lambda x, S: solve(x[0], x[1], S, t))(ab, jnp.linspace(0.5, 2.0, 5))
    one = solve(ab[2, 0], ab[2, 1], jnp.linspace(0.5, 2.0, 5)[2], t)
    np.testing.assert_allclose(batch.a[2], one.a, rtol=1e-14)
    f = jax.jit(solve)
    f(ab[0, 0], ab[0, 1], 1.0, t, Z=1.0)
    n = f._cache_size()
    for S, Z in ((2.0, 3.0), (-0.5, 0.1)):
        f(ab[1, 0], ab[1, 1], S, t, Z=Z)
    assert f._cache_size() == n


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((jnp.ones(3), jnp.ones(2), 1.0, jnp.ones(2)), {}, "b0"),
        ((jnp.ones((3, 1)), jnp.ones((3, 1)), 1.0, jnp.ones(2)), {}, "a0"),
        ((jnp.ones(3), jnp.ones(3), jnp.ones(2), jnp.ones(2)), {}, "S"),
        ((jnp.ones(3), jnp.ones(3), 1.0, -jnp.ones(2)), {}, "t"),
        ((jnp.ones(3), jnp.ones(3), 1.0, jnp.ones(2)), {"Z": 0.0}, "Z"),
        ((jnp.ones(3), jnp.ones(3), 1.0, jnp.ones(2)), {"eta": -1.0}, "eta"),
        ((jnp.array([1.0, jnp.nan]), jnp.ones(2), 1.0, jnp.ones(2)), {}, "a0"),
    ],
)
def test_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        solve(*args, **kwargs)


def test_z_is_keyword_only():
    t = jnp.linspace(0.0, 1.0, 3)
    with pytest.raises(TypeError):
        solve(jnp.ones(3), 0.5 * jnp.ones(3), 1.0, t, 2.0)
    new = solve(jnp.ones(3), 0.5 * jnp.ones(3), 1.0, t, Z=2.0)
    np.testing.assert_allclose(new.network_map[0], 3 * 0.5 / 2.0, rtol=1e-15)
