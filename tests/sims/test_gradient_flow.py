"""The reference integrator against analytic gradient flows."""

import jax.numpy as jnp
import numpy as np

from sims import gradient_flow


def test_quadratic_flow_matches_exponential():
    # L = ½ Σ_k ρ_k (w_k − w*_k)² ⇒ w_k(t) = w*_k + (w_k(0) − w*_k) e^{−η ρ_k t}.
    rho = jnp.array([2.0, 0.5, 0.01])
    w_star = jnp.array([1.0, -2.0, 3.0])
    w0 = jnp.array([0.3, 0.0, -1.0])
    t = jnp.linspace(0.0, 20.0, 41)
    loss = lambda w, a: 0.5 * jnp.sum(a[0] * (w - a[1]) ** 2)
    ws = gradient_flow(loss, w0, t, (rho, w_star), lr=0.7)
    exact = w_star + (w0 - w_star) * jnp.exp(-0.7 * rho * t[:, None])
    np.testing.assert_allclose(ws, exact, atol=1e-9, rtol=0)  # global error of Dopri8 at rtol=1e-12


def test_per_leaf_learning_rates_and_pytrees():
    # Scalar product flow u = a b with a(0) = b(0): balanced sigmoid, checked with per-leaf rates
    # η_a = η_b = 2 being the same as time doubled.
    loss = lambda p, S: 0.5 * (p["a"] * p["b"] - S) ** 2
    p0 = {"a": jnp.array(0.01), "b": jnp.array(0.01)}
    t = jnp.array([0.0, 1.0, 3.0, 5.0])
    fast = gradient_flow(loss, p0, t, 2.0, lr={"a": 2.0, "b": 2.0})
    slow = gradient_flow(loss, p0, 2 * t, 2.0)
    np.testing.assert_allclose(fast["a"], slow["a"], atol=1e-9)
    assert fast["a"].shape == (4,)
