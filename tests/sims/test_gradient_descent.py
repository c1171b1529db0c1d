"""sims.simulate (gradient descent on a model's loss, t = η·step) and sims.plot.overlay."""

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest

from sims import Float64Warning, diagonal, plot, simulate, tolerance

matplotlib.use("Agg")


def test_simulate_is_gradient_descent_written_out():
    # Independent reference: the update written by hand for L = ½ Σ σ²(ab − S)².
    s2, S = jnp.array([1.0, 0.5]), jnp.array([1.0, 2.0])
    a, b = jnp.array([0.1, 0.3]), jnp.array([0.2, -0.1])
    lr, n = 0.05, 7
    sim = simulate(diagonal.loss, {"a": a, "b": b}, (s2, S), lr=lr, n_steps=n, every=1)
    for k in range(n + 1):
        np.testing.assert_allclose(sim.params["a"][k], a, rtol=1e-14)
        np.testing.assert_allclose(sim.params["b"][k], b, rtol=1e-14)
        np.testing.assert_allclose(sim.loss[k], 0.5 * jnp.sum(s2 * (a * b - S) ** 2), rtol=1e-14)
        r = s2 * (a * b - S)
        a, b = a - lr * r * b, b - lr * r * a
    np.testing.assert_allclose(sim.t, lr * np.arange(n + 1), rtol=1e-15)


def test_per_parameter_rates_and_saving_every_k_steps():
    loss = lambda p, _: 0.5 * (p["x"] ** 2 + p["y"] ** 2)  # noqa: E731
    sim = simulate(
        loss, {"x": 1.0, "y": 1.0}, None, lr=0.1, n_steps=10, every=5, eta={"x": 2.0, "y": 0.5}
    )
    np.testing.assert_allclose(sim.t, [0.0, 0.5, 1.0])
    np.testing.assert_allclose(sim.params["x"], 0.8 ** np.arange(0, 11, 5), rtol=1e-14)
    np.testing.assert_allclose(sim.params["y"], 0.95 ** np.arange(0, 11, 5), rtol=1e-14)


def test_simulate_error_is_first_order_in_the_step():
    # Forward Euler: halving η halves the gap to the closed form at fixed t.
    a0 = b0 = jnp.array([0.1, 0.2])
    task = (jnp.array([1.0, 0.5]), jnp.array([1.0, 1.0]))
    gaps = []
    for lr in (0.02, 0.01):
        sim = simulate(diagonal.loss, {"a": a0, "b": b0}, task, lr=lr, n_steps=int(4.0 / lr))
        exact = diagonal.solve(a0, b0, *task, sim.t).u
        gaps.append(float(jnp.max(jnp.abs(sim.params["a"] * sim.params["b"] - exact))))
    assert 1.8 < gaps[0] / gaps[1] < 2.2
    assert gaps[0] < tolerance(np.float64, "gradient_descent")


def test_simulate_vmaps_over_rates_without_recompiling():
    loss = lambda p, s: 0.5 * (p - s) ** 2  # noqa: E731
    run = jax.jit(lambda lr: simulate(loss, jnp.array(0.0), 1.0, lr=lr, n_steps=3).params)
    out = jax.vmap(run)(jnp.array([0.1, 0.5]))
    np.testing.assert_allclose(out[:, -1], 1.0 - (1.0 - jnp.array([0.1, 0.5])) ** 3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"lr": 0.0, "n_steps": 1}, "lr"),
        ({"lr": -0.1, "n_steps": 1}, "lr"),
        ({"lr": jnp.nan, "n_steps": 1}, "lr"),
        ({"lr": jnp.ones(2), "n_steps": 1}, "lr"),
        ({"lr": 0.1, "n_steps": -1}, "n_steps"),
        ({"lr": 0.1, "n_steps": 2, "every": 0}, "every"),
        ({"lr": 0.1, "n_steps": 2, "eta": -1.0}, "eta"),
    ],
)
def test_simulate_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate(lambda p, _: p**2, jnp.array(1.0), None, **kwargs)


def test_simulate_warns_on_float64_without_x64():
    with jax.enable_x64(False), pytest.warns(Float64Warning, match="enable_x64"):
        simulate(lambda p, _: jnp.sum(p**2), np.ones(2, np.float64), None, lr=0.1, n_steps=1)


class _History:
    def __init__(self, cols):
        self.cols = cols

    def column(self, name):
        return self.cols[name]


def test_overlay_draws_exact_lines_and_simulated_markers():
    t = np.linspace(0.0, 1.0, 11)
    ax = plot.overlay(t, np.c_[t, 2 * t], np.c_[t[::2], 2 * t[::2]], t[::2])
    lines = ax.get_lines()
    assert len(lines) == 4
    np.testing.assert_array_equal(lines[1].get_xdata(), t[::2])
    hist = _History({"step": np.arange(5), "loss": np.ones(5)})
    ax = plot.overlay(t, np.ones(11), hist, column="loss", time_scale=0.25)
    np.testing.assert_allclose(ax.get_lines()[1].get_xdata(), 0.25 * np.arange(5))


def test_overlay_bad_input():
    t = np.linspace(0.0, 1.0, 5)
    with pytest.raises(ValueError, match="sim_t"):
        plot.overlay(t, t, t)
    with pytest.raises(ValueError, match="column"):
        plot.overlay(t, t, _History({}))
    with pytest.raises(ValueError, match="exact"):
        plot.overlay(t, t[:3], t, t)
    with pytest.raises(ValueError, match="curves"):
        plot.overlay(t, np.c_[t, t], t, t)


def test_tolerance_table_by_kind_and_dtype():
    assert tolerance(np.float64) == tolerance(np.float64, "closed_form_vs_flow") == 1e-8
    assert tolerance(np.float32, "initial_value") > tolerance(np.float64, "initial_value")
    with pytest.raises(ValueError, match="kind"):
        tolerance(np.float64, "nope")
    with pytest.raises(ValueError, match="float16"):
        tolerance(np.float16)


def test_an_unhashable_loss_runs_and_a_scalar_eta_scales_every_leaf():
    class Loss:  # defines __eq__ without __hash__: cannot key a compiled program
        def __eq__(self, other):
            return isinstance(other, Loss)

        def __call__(self, p, s):
            return 0.5 * (p["a"] - s) ** 2 + 0.5 * (p["b"] - s) ** 2

    p0 = {"a": jnp.array(0.0), "b": jnp.array(2.0)}
    sim = simulate(Loss(), p0, 1.0, lr=0.1, n_steps=3, eta=0.5)
    # each leaf contracts toward 1 by (1 − lr·η) per step
    np.testing.assert_allclose(sim.params["a"][-1], 1.0 - 0.95**3, rtol=1e-12)
    np.testing.assert_allclose(sim.params["b"][-1], 1.0 + 0.95**3, rtol=1e-12)
