"""Multilinear skill model (T Eq 4.9–4.11, 4.17, B.1–B.14) against the raw (a, b) gradient flow."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sims import skills
from sims.gradient_flow import gradient_flow
from sims.tolerances import tolerance

_ROUNDING = tolerance(np.float64, "rounding")


def test_verify_against_sample_level_flow():
    assert skills.verify(jax.random.key(3), 1) < tolerance(np.float64)


def test_rate_convention_single_skill_flow():
    # ½ p (S − ab)² with η: logistic rate 2ηpS (Eq B.9), integrated independently.
    S, p, eta, a0 = 2.0, 0.3, 0.7, 0.05
    t = jnp.linspace(0.0, 40.0, 9)
    ys = gradient_flow(
        lambda q, _: 0.5 * p * (S - q["a"] * q["b"]) ** 2, {"a": a0, "b": a0}, t, lr=eta
    )
    R = skills.skill_strength(t, S, a0**2, p, eta)
    np.testing.assert_allclose(ys["a"] * ys["b"], R, atol=tolerance(np.float64) * S)


def test_limits_and_stability():
    S = 3.0
    assert skills.skill_strength(0.0, S, 1e-4, 0.2) == pytest.approx(1e-4)
    big = skills.skill_strength(jnp.array([1e4, 1e8]), S, 1e-12, 0.2)
    np.testing.assert_allclose(big, S)
    assert skills.skill_strength(1e8, S, 1e-3, 0.0) == pytest.approx(1e-3)  # d_k = 0 keeps R(0)
    assert skills.skill_strength(1e8, S, 0.0, 0.5) == 0.0  # a = b = 0 is a fixed point
    # R0 > S decays onto S
    assert skills.skill_strength(50.0, S, 2 * S, 0.5) == pytest.approx(S)
    d = jnp.array([0, 1, 5])
    np.testing.assert_allclose(skills.one_shot_limit(d, S, 0.01), [0.01, S, S])
    np.testing.assert_allclose(skills.basis_function_limit(2, 4, S), [S, S, 0.0, 0.0])


def test_loss_curve_matches_naive_sum():
    P = skills.skill_frequencies(0.5, 50)
    p_naive = np.arange(1, 51) ** -1.5
    np.testing.assert_allclose(P, p_naive / p_naive.sum(), rtol=_ROUNDING)
    t = jnp.logspace(-1, 4, 17)
    S, r0 = 1.5, 1e-3
    naive = np.array(
        [
            sum(
                float(P[k])
                * 0.5
                * (S - S * r0 / (r0 + (S - r0) * np.exp(-2 * float(P[k]) * S * ti))) ** 2
                for k in range(50)
            )
            + 0.5 * S**2 * 0.1
            for ti in np.asarray(t)
        ]
    )
    L = skills.loss_curve(r0, S, P, t, absent_mass=0.1)
    np.testing.assert_allclose(L, naive, rtol=_ROUNDING)
    np.testing.assert_allclose(
        skills.solve(r0, S, P, t, absent_mass=0.1).loss, naive, rtol=_ROUNDING
    )


def test_bad_input():
    with pytest.raises(ValueError, match="alpha"):
        skills.skill_frequencies(0.0, 10)
    with pytest.raises(ValueError, match="n_s"):
        skills.skill_frequencies(0.5, 0)
    with pytest.raises(ValueError, match="S"):
        skills.skill_strength(1.0, -1.0, 0.1, 0.5)
    with pytest.raises(ValueError, match="r0"):
        skills.skill_strength(1.0, 1.0, -0.1, 0.5)


def test_traced_hyperparameters_no_recompile():
    f = jax.jit(lambda S, p: skills.skill_strength(jnp.linspace(0, 5, 4), S, 1e-3, p))
    f(1.0, 0.2)
    f(2.0, 0.3)
    assert f._cache_size() == 1


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"eta": -1.0}, "eta"),
        ({"eta": 0.0}, "eta"),
        ({"r0": jnp.ones(5)}, "r0"),
        ({"p": jnp.array([0.5, jnp.nan, 0.2])}, "p"),
        ({"r0": jnp.nan}, "r0"),
    ],
)
def test_solve_bad_input_names_the_argument(kwargs, match):
    args = {"r0": 1e-3, "p": jnp.array([0.5, 0.3, 0.2]), "eta": 1.0}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        skills.solve(args["r0"], 1.0, args["p"], jnp.linspace(0.0, 1.0, 4), eta=args["eta"])


def test_the_former_t_first_order_raises():
    # The former order solve(t, S, r0, p, p_test, eta, absent_mass) is no longer recognised: it
    # fails on a shape check or on the keyword-only options instead of being reinterpreted.
    P = skills.skill_frequencies(0.5, 6)
    t, S = jnp.logspace(-1, 3, 5), 1.5
    with pytest.raises(ValueError, match="p must be"):
        skills.solve(t, S, 1e-3, P, eta=0.7)
    with pytest.raises(ValueError, match="p must be"):
        skills.loss_curve(t, S, 1e-3, P, eta=0.7)
    with pytest.raises(TypeError):
        skills.solve(1e-3, S, P, t, None, 0.7, 0.1)
    with pytest.raises(TypeError):
        skills.loss_curve(1e-3, S, P, t, None, 0.7, 0.1)
    with warnings.catch_warnings():  # the contract order never warns
        warnings.simplefilter("error")
        out = skills.solve(jnp.full(6, 1e-3), S, P, jnp.linspace(0.0, 1.0, 6))
        skills.loss_curve(1e-3, S, P, t)
    assert out.network_map.shape == (6, 6)


@pytest.mark.parametrize(
    "S, r0, p, match",
    [(0.0, 1e-3, [0.5, 0.5], "S"), (1.0, -1e-3, [0.5, 0.5], "r0"), (1.0, 1e-3, [0.5, -0.5], "p")],
)
def test_solve_refuses_a_model_outside_its_domain(S, r0, p, match):
    # solve's closed form is compiled, where skill_strength's own checks cannot run: solve checks.
    with pytest.raises(ValueError, match=match):
        skills.solve(r0, S, jnp.array(p), jnp.linspace(0.0, 1.0, 4))
