"""The reference integrator against analytic gradient flows."""

import jax
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


def test_a_new_init_rate_or_target_reuses_the_compiled_integrator():
    """The same loss gives the same vector field, so diffrax's compiled solve is reused: only the
    first call compiles (counted from JAX's backend-compile events), and each run is its own flow."""
    compiles = []

    def count(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(duration)

    loss = lambda w, a: 0.5 * jnp.sum(a[0] * (w - a[1]) ** 2)  # noqa: E731
    rho = jnp.array([2.0, 0.5])
    t = jnp.linspace(0.0, 4.0, 5)
    gradient_flow(loss, jnp.zeros(2), t, (rho, jnp.ones(2)), lr=1.0)  # compiles
    cases = [
        (jnp.array([0.3, -1.0]), jnp.array([1.0, 2.0]), 1.0),
        (jnp.zeros(2), -jnp.ones(2), 0.3),
    ]
    jax.monitoring.register_event_duration_secs_listener(count)
    try:
        runs = [gradient_flow(loss, w0, t, (rho, w_star), lr=lr) for w0, w_star, lr in cases]
    finally:
        jax.monitoring.unregister_event_duration_listener(count)
    assert compiles == []
    for ws, (w0, w_star, lr) in zip(runs, cases, strict=True):
        exact = w_star + (w0 - w_star) * jnp.exp(-lr * rho * t[:, None])
        np.testing.assert_allclose(ws, exact, atol=1e-9, rtol=0)  # as in the test above
