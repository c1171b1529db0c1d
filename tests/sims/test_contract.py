"""One contract for every solver in sims (as optax's tests loop over ``_OPTIMIZERS_UNDER_TEST``).

Each model is described by a :class:`Model`: how a few scalars (init scale, δ/λ, target scale) build
its initial parameters and task, how its ``solve`` is called, which output is the network map, and
what that map is as a function of the raw parameters. Every test below runs on every model:
t = 0 gives the init, t → ∞ reaches the minimiser, vmap and jit without recompilation, dtype
preserved, float32 close to float64 up to t = 1e4, ``jax.grad`` and ``jax.jacfwd`` equal to
central finite differences at generic *and* balanced points, the closed form equal to
:func:`sims.gradient_flow` on ``module.loss``, :func:`sims.simulate` close to it at small steps, and
a float64 input with x64 off never yields a silent float32 answer. Tolerances come from
:mod:`sims.tolerances`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sims import (
    diagonal,
    emergence,
    gradient_flow,
    lambda_balanced,
    linear_model,
    piecewise_linear,
    saxe,
    scalar_linear,
    scaling_laws,
    simulate,
    single_neuron,
    skills,
    tolerance,
)
from sims._checks import Float64Warning


class Model(NamedTuple):
    """How the contract tests drive one solver."""

    name: str
    build: Callable  # (scale, knob, target, dtype) -> (params pytree, task)
    result: Callable  # (params, task, t) -> the solver's result NamedTuple at the times t
    network: Callable  # (params, task) -> network map M (the same quantity, from raw parameters)
    target: Callable  # task -> the network map at the minimiser reached from the build's inits
    loss: Callable  # module.loss(params, task)
    generic: tuple  # (scale, knob, target) at a generic point
    balanced: tuple  # (scale, knob, target) at a balanced point (δ = 0, a = b, λ = 0, ...)
    t_end: float  # a time by which the flow has converged
    t_probe: float  # a time inside the transition (where derivatives are probed)
    # Longest time of the float32-vs-float64 check: 1e4 for closed forms; a fixed-step
    # integrator is checked over the horizon its step size resolves.
    float32_horizon: float = 1e4
    # task -> the scale errors are relative to; None: max |target(task)| (the target's size).
    size: Callable | None = None
    # The result field holding the network map: ``network_map`` for every model whose answer is a
    # trajectory of the network; scaling_laws' answer is the loss curve itself (its 10^5 skills
    # are never stored), so there the compared quantity is ``loss``.
    field: str = "network_map"

    def solve(self, params, task, t):
        """The network map at the times t, shape T + M (the field the contract names)."""
        return getattr(self.result(params, task, t), self.field)


_W = np.array([0.6, 0.2, 0.1])
_BS = np.array([1.0, -0.5, 0.3])


def _single_neuron_build(scale, delta, target, dtype):
    w0 = scale * jnp.asarray(_W, dtype)
    a0 = jnp.sqrt(w0 @ w0 + delta)  # δ = a₀² − ‖w₀‖² (η_a = η_w = 1)
    return {"a": a0, "w": w0}, target * jnp.asarray(_BS, dtype)


def _diagonal_build(scale, delta, target, dtype):
    a0 = scale * jnp.asarray([1.0, 0.7, 1.3], dtype)
    b0 = a0 - delta * jnp.asarray([1.0, -1.0, 0.5], dtype)  # δ = 0: a = b
    sigma2 = jnp.asarray([1.0, 0.5, 0.25], dtype)
    return {"a": a0, "b": b0}, (sigma2, target * jnp.asarray([1.0, 0.5, 2.0], dtype))


_SIG = np.array([[2.0, 0.5, 0.0], [0.3, 1.0, 0.4]])


def _saxe_build(scale, delta, target, dtype):
    sig = target * jnp.asarray(_SIG, dtype)
    init = saxe.aligned_init(sig, 2, scale, scale * (1.0 + delta))  # δ = 0: balanced
    return init, sig


_A = np.linalg.qr(np.array([[1.0, 0.2], [-0.3, 1.0], [0.5, 0.4]]))[0]  # (d, h) orthonormal frame
_B = np.linalg.qr(np.array([[0.8, -0.6], [0.6, 0.8]]) @ np.diag([1.0, -1.0]))[0]  # (c, h)


def _lambda_balanced_build(scale, lam, target, dtype):
    # W1 = diag(s1) Aᵀ, W2 = B diag(s2) with s2² − s1² = λ: λ-balanced, smooth through λ = 0
    # (balanced_init's max(±λ, 0) has a kink there), unaligned with Σ.
    base = scale**2 * jnp.asarray([1.0, 0.6], dtype)
    s1, s2 = jnp.sqrt(base - lam / 2), jnp.sqrt(base + lam / 2)
    W1 = s1[:, None] * jnp.asarray(_A.T, dtype)
    W2 = jnp.asarray(_B, dtype) * s2[None, :]
    return {"W1": W1, "W2": W2}, target * jnp.asarray(_SIG, dtype)


def _scalar_linear_build(scale, delta, target, dtype):
    a0 = scale * jnp.asarray([1.0, -0.4, 0.8, 0.3], dtype)
    b0 = a0 + delta * jnp.asarray([0.5, 1.0, -1.0, 0.2], dtype)  # δ = 0: a_i = b_i
    return {"a": a0, "b": b0}, target * jnp.asarray(1.5, dtype)


_RHO = np.array([1.0, 0.4, 0.1])


def _linear_model_build(scale, delta, target, dtype):
    v0 = scale * jnp.asarray([1.0, -0.5, 2.0], dtype) + delta
    return {"v": v0}, (jnp.asarray(_RHO, dtype), target * jnp.asarray([1.0, 0.3, -0.7], dtype))


_P = np.array([0.5, 0.3, 0.2])


def _skills_build(scale, delta, target, dtype):
    r0 = scale * jnp.asarray([1.0, 0.5, 2.0], dtype)
    a0 = jnp.sqrt(r0)  # balanced a = b (the closed form's assumption)
    return {"a": a0, "b": a0}, (target * jnp.asarray(1.0, dtype), jnp.asarray(_P, dtype))


_B2 = 0.5  # 𝓑² of the time-extended emergence model (T Eq 5.2)


def _emergence_build(scale, delta, target, dtype):
    r0 = scale * jnp.asarray([1.0, 0.5, 2.0], dtype)
    a0 = jnp.sqrt(r0 / _B2)  # balanced a = b with R = 𝓑² a b (the closed form's assumption)
    S = target * jnp.asarray(1.0, dtype)
    return {"a": a0, "b": a0}, (S, jnp.asarray(_P, dtype), jnp.asarray(_B2, dtype))


_XPL = np.array([[1.0, 0.2], [-0.3, 1.0], [0.6, -0.8]])  # (n, d) inputs of the ReLU network
_WPL = np.array([[1.0, 0.5], [0.2, 1.0], [-0.4, 0.9], [0.8, -0.7]])  # (h, d) first-layer directions


def _piecewise_linear_build(scale, delta, target, dtype):
    # Every data point activates some neuron and the init is generic, so the flow interpolates.
    W0 = scale * jnp.asarray(_WPL, dtype)
    a0 = jnp.sqrt(jnp.sum(W0**2, axis=1) + delta)  # δ_i = a_i² − ‖w_i‖² (η_a = η_w = 1)
    y = target * jnp.asarray([0.8, 0.5, 0.3], dtype)
    return {"a": a0, "W": W0}, (jnp.asarray(_XPL, dtype), y)


# Fixed RK4 steps per save interval of piecewise_linear.solve in these tests: dt ≤ 0.17 on the
# intervals used (up to t = 100), well inside RK4's stability region for this small network.
_PL_SUBSTEPS = 600


def _scaling_laws_build(scale, delta, target, dtype):
    # n_s = 3 power-law skills (α = 1) from one shared R_k(0) = scale, balanced a = b (the closed
    # form's assumption; δ has no meaning here). Its "network map" is the loss itself: solve
    # returns L(t), not the R_k (for n_s → ∞ there are 10^5 of them).
    a0 = jnp.full(3, jnp.sqrt(scale), dtype)
    return {"a": a0, "b": a0}, (target * jnp.asarray(1.0, dtype), jnp.asarray(1.0, dtype))


def _scaling_laws_solve(p, task, t):
    S, alpha = task
    return scaling_laws.solve(p["a"][0] * p["b"][0], S, alpha, t, n_s=3)


def _piecewise_linear_solve(p, task, t):
    X, y = task
    return piecewise_linear.solve(p["a"], p["W"], X, y, t, n_substeps=_PL_SUBSTEPS)


MODELS_UNDER_TEST = [
    Model(
        "single_neuron",
        _single_neuron_build,
        lambda p, bs, t: single_neuron.solve(p["a"], p["w"], bs, t),
        lambda p, task: p["a"] * p["w"],
        lambda bs: bs,
        single_neuron.loss,
        (0.3, 0.05, 1.0),
        (0.3, 0.0, 1.0),
        60.0,
        2.0,
    ),
    Model(
        "diagonal",
        _diagonal_build,
        lambda p, task, t: diagonal.solve(p["a"], p["b"], *task, t),
        lambda p, task: p["a"] * p["b"],
        lambda task: task[1],
        diagonal.loss,
        (0.1, 0.02, 1.0),
        (0.1, 0.0, 1.0),
        200.0,
        3.0,
    ),
    Model(
        "saxe",
        _saxe_build,
        lambda p, sig, t: saxe.solve(p.w1, p.w2, sig, t),
        lambda p, task: p.w2 @ p.w1,
        lambda sig: sig,
        saxe.loss,
        (0.1, 0.3, 1.0),
        (0.1, 0.0, 1.0),
        60.0,
        2.0,
    ),
    Model(
        "lambda_balanced",
        _lambda_balanced_build,
        lambda p, sig, t: lambda_balanced.solve(p["W1"], p["W2"], sig, t),
        lambda p, task: p["W2"] @ p["W1"],
        lambda sig: sig,
        lambda_balanced.loss,
        (0.5, 0.1, 1.0),
        (0.5, 0.0, 1.0),
        60.0,
        2.0,
    ),
    Model(
        "scalar_linear",
        _scalar_linear_build,
        lambda p, S, t: scalar_linear.solve(p["a"], p["b"], S, t),
        lambda p, task: jnp.sum(p["a"] * p["b"]),
        lambda S: S,
        scalar_linear.loss,
        (0.2, 0.1, 1.0),
        (0.2, 0.0, 1.0),
        60.0,
        1.0,
    ),
    Model(
        "linear_model",
        _linear_model_build,
        lambda p, task, t: linear_model.solve(jnp.sqrt(task[0]) * p["v"], task[0], task[1], t),
        lambda p, task: jnp.sqrt(task[0]) * p["v"],  # the mode coefficients c = √ρ v
        lambda task: task[1],
        linear_model.loss,
        (0.5, 0.1, 1.0),
        (0.5, 0.0, 1.0),
        400.0,
        2.0,
    ),
    Model(
        "skills",
        _skills_build,
        lambda p, task, t: skills.solve(p["a"] * p["b"], task[0], task[1], t),
        lambda p, task: p["a"] * p["b"],
        lambda task: jnp.full(3, task[0]),
        skills.loss,
        (0.01, 0.0, 1.0),
        (0.01, 0.0, 1.0),
        400.0,
        6.0,
    ),
    Model(
        "emergence",
        _emergence_build,
        lambda p, task, t: emergence.solve(_B2 * p["a"] * p["b"], *task[:2], t, B2=task[2]),
        lambda p, task: task[2] * p["a"] * p["b"],
        lambda task: jnp.full(3, task[0]),
        emergence.loss,
        (0.01, 0.0, 1.0),
        (0.01, 0.0, 1.0),
        800.0,
        12.0,
    ),
    Model(
        "piecewise_linear",
        _piecewise_linear_build,
        _piecewise_linear_solve,
        lambda p, task: piecewise_linear.network(p["a"], p["W"], task[0]),
        lambda task: task[1],
        piecewise_linear.loss,
        (0.5, 0.1, 1.0),
        (0.5, 0.0, 1.0),
        60.0,
        1.0,
        float32_horizon=100.0,
    ),
    Model(
        "scaling_laws",
        _scaling_laws_build,
        _scaling_laws_solve,
        scaling_laws.loss,  # the loss is the quantity solve returns
        lambda task: jnp.zeros(()),  # n_s = 3 skills: every one is learned, L → 0
        scaling_laws.loss,
        (0.01, 0.0, 1.0),
        (0.01, 0.0, 1.0),
        800.0,
        10.0,
        size=lambda task: 0.5 * task[0] ** 2,  # ½S², the loss before any skill is learned
        field="loss",
    ),
]
IDS = [m.name for m in MODELS_UNDER_TEST]


def _run(model: Model, x, t, dtype=jnp.float64):
    params, task = model.build(*x, dtype)
    return model.solve(params, task, jnp.asarray(t, dtype))


@functools.cache
def _grid(model: Model) -> np.ndarray:
    """The times of every plain float64 (and float32) solve below, sorted: 0 to 2·t_probe in seven
    steps (where the flow is compared with the integrator), t_end and 1e2, 1e3, 1e4 up to the
    float32 horizon. One shape per model, so each solver is traced and compiled once for them all
    (the time shape is part of every jit cache key)."""
    t = np.linspace(0.0, 2.0 * model.t_probe, 7)
    t = np.concatenate([t, [model.t_end, 1e2, 1e3, 1e4]])
    return np.unique(t[t <= model.float32_horizon])


def _at(model: Model, t: float) -> int:
    """Index of the time t in :func:`_grid`."""
    return int(np.flatnonzero(_grid(model) == t)[0])


def _scale(model: Model, x) -> float:
    _, task = model.build(*x, jnp.float64)
    if model.size is not None:
        return float(model.size(task))
    return float(jnp.max(jnp.abs(model.target(task))))


@pytest.mark.parametrize("model", MODELS_UNDER_TEST, ids=IDS)
def test_t0_is_the_init_and_t_infinity_the_minimiser(model):
    params, task = model.build(*model.generic, jnp.float64)
    out = model.solve(params, task, jnp.asarray(_grid(model)))
    size = _scale(model, model.generic)
    tol0 = tolerance(np.float64, "initial_value")
    np.testing.assert_allclose(out[0], model.network(params, task), atol=tol0 * size, rtol=0)
    tol = tolerance(np.float64, "fixed_point")
    end = out[_at(model, model.t_end)]
    np.testing.assert_allclose(end, model.target(task), atol=tol * size, rtol=0)


@pytest.mark.parametrize("model", MODELS_UNDER_TEST, ids=IDS)
def test_closed_form_is_the_flow_of_its_loss(model):
    params, task = model.build(*model.generic, jnp.float64)
    t = jnp.linspace(0.0, 2.0 * model.t_probe, 7)  # the grid's first seven times
    ref = gradient_flow(model.loss, params, t, task, atol=1e-16)
    want = jax.vmap(lambda p: model.network(p, task))(ref)
    got = model.solve(params, task, jnp.asarray(_grid(model)))[:7]
    tol = tolerance(np.float64) * _scale(model, model.generic)
    np.testing.assert_allclose(got, want, atol=tol, rtol=0)


@pytest.mark.parametrize("model", MODELS_UNDER_TEST, ids=IDS)
def test_gradient_descent_approaches_the_closed_form(model):
    params, task = model.build(*model.generic, jnp.float64)
    lr = 1e-2
    sim = simulate(model.loss, params, task, lr=lr, n_steps=int(model.t_probe / lr) * 2, every=20)
    got = jax.vmap(lambda p: model.network(p, task))(sim.params)
    want = model.solve(params, task, sim.t)
    tol = tolerance(np.float64, "gradient_descent") * _scale(model, model.generic)
    np.testing.assert_allclose(got, want, atol=tol, rtol=0)
    assert float(jnp.max(jnp.abs(got - want))) > 0  # the two sides are computed independently


@pytest.mark.parametrize("model", MODELS_UNDER_TEST, ids=IDS)
def test_vmap_over_inits_and_no_recompilation(model):
    t = _grid(model)
    scales = jnp.array([0.5, 1.0, 1.5]) * model.generic[0]

    def run(s, knob, target):
        return _run(model, (s, knob, target), t)

    batch = jax.vmap(run, in_axes=(0, None, None))(scales, *model.generic[1:])
    one = run(scales[2], *model.generic[1:])
    np.testing.assert_allclose(batch[2], one, rtol=1e-13, atol=1e-15)
    # Under jit, new values of (scale, knob, target) reuse the compiled solver: checked on the
    # finite-difference tests' jitted x ↦ sums of the result (compiled here once for all three).
    sums = _derivatives(model)[0]
    (s, knob, target), balanced_knob = model.generic, model.balanced[1]
    sums(jnp.array([s, knob, target]))
    n = sums._cache_size()
    sums(jnp.array([1.1 * s, knob, 0.9 * target]))
    sums(jnp.array([0.7 * s, balanced_knob, 1.2 * target]))
    assert sums._cache_size() == n


@pytest.mark.parametrize("model", MODELS_UNDER_TEST, ids=IDS)
def test_dtype_preserved_and_float32_close_to_float64_up_to_1e4(model):
    t = _grid(model)  # 0 to 2·t_probe, t_end and 1e2, 1e3, 1e4 up to the float32 horizon
    hi = _run(model, model.generic, t, jnp.float64)
    lo = _run(model, model.generic, t, jnp.float32)
    assert hi.dtype == jnp.float64 and lo.dtype == jnp.float32
    tol = tolerance(np.float32) * _scale(model, model.generic)
    np.testing.assert_allclose(np.asarray(lo, np.float64), hi, atol=tol, rtol=0)


def _float_fields(result) -> list[str]:
    return [
        name
        for name, value in zip(result._fields, result, strict=True)
        if jnp.issubdtype(
            value.dtype if hasattr(value, "dtype") else jnp.asarray(value).dtype, jnp.floating
        )
    ]


@functools.cache
def _derivatives(model: Model):
    """Jitted x ↦ sums of the result at t_probe (x = (scale, knob, target)), and its derivatives.

    ``sums(x)[0]`` is Σ network map; ``sums(x)[1:]`` one weighted sum per float field of the
    result (the cosine weights keep entries from cancelling). Returns ``(sums, jacfwd, jacrev)``:
    ``jax.jacfwd`` of ``sums(x)[0]`` and ``jax.jacrev`` of ``sums``, whose row 0 is the reverse-mode
    gradient of Σ network map (``jax.grad`` is that same vector-Jacobian product; a program of its
    own would cost up to 20 s of compilation per model for no other path). Each is compiled once per
    model and shared by the generic and the balanced point of both finite-difference tests (the
    shifted points reuse ``sums``' program).
    """
    t = jnp.array([model.t_probe])

    def sums(x):
        params, task = model.build(*tuple(x), jnp.float64)
        out = model.result(params, task, t)
        fields = [jnp.asarray(getattr(out, n)) for n in _float_fields(out)]
        return jnp.stack(
            [jnp.sum(getattr(out, model.field))]
            + [
                jnp.sum(v * jnp.cos(jnp.arange(v.size, dtype=v.dtype)).reshape(v.shape))
                for v in fields
            ]
        )

    network = lambda x: sums(x)[0]  # noqa: E731
    return tuple(jax.jit(f) for f in (sums, jax.jacfwd(network), jax.jacrev(sums)))


@pytest.mark.parametrize("point", ["generic", "balanced"])
@pytest.mark.parametrize("model", MODELS_UNDER_TEST, ids=IDS)
def test_grad_and_jacfwd_equal_finite_differences(model, point):
    x0 = np.array(getattr(model, point), dtype=np.float64)
    sums, jacfwd, jacrev = _derivatives(model)
    x0j = jnp.asarray(x0)
    g, jf = np.asarray(jacrev(x0j))[0], np.asarray(jacfwd(x0j))  # reverse / forward mode, Σ map
    h = 1e-5
    shifted = x0 + h * np.concatenate([np.eye(3), -np.eye(3)])  # on the host: no eager programs
    values = np.array([float(sums(x)[0]) for x in shifted])
    fd = (values[:3] - values[3:]) / (2 * h)
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(jf))
    scale = max(1.0, float(np.max(np.abs(fd))))
    tol = tolerance(np.float64, "finite_difference")
    for i in range(3):
        assert abs(float(g[i]) - fd[i]) <= tol * scale, (i, float(g[i]), fd[i])
        assert abs(float(jf[i]) - fd[i]) <= tol * scale, (i, float(jf[i]), fd[i])


@pytest.mark.parametrize("model", MODELS_UNDER_TEST, ids=IDS)
def test_float64_input_without_x64_is_never_a_silent_float32_answer(model):
    params, task = model.build(*model.generic, jnp.float64)
    as_np = lambda tree: jax.tree.map(lambda x: np.asarray(x, np.float64), tree)  # noqa: E731
    params, task = as_np(params), as_np(task)
    t = np.linspace(0.0, 1.0, 3)
    with jax.enable_x64(False), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = model.solve(params, task, t)
    warned = any(issubclass(w.category, Float64Warning) for w in caught)
    assert warned or out.dtype == np.float64


@pytest.mark.parametrize("model", MODELS_UNDER_TEST, ids=IDS)
def test_every_result_carries_the_network_map_under_one_name(model):
    params, task = model.build(*model.generic, jnp.float64)
    out = model.result(params, task, jnp.asarray(_grid(model)))
    assert "t" in out._fields
    if model.field == "network_map":
        assert "network_map" in out._fields
    # The former names stay as aliases of the one field.
    for alias in ("u", "network", "coeff", "theta", "beta", "R"):
        if hasattr(type(out), alias) and isinstance(getattr(type(out), alias), property):
            assert getattr(out, alias) is out.network_map


@pytest.mark.parametrize("model", MODELS_UNDER_TEST, ids=IDS)
def test_grad_of_every_result_field_at_a_balanced_init_equals_finite_differences(model):
    # Not only the network map: every float field (weights, strengths, losses, conserved
    # quantities) must have a finite gradient equal to a central difference at the balanced /
    # degenerate point, where closed forms divide by C = a² − b² = 0 or similar.
    x0_np = np.array(model.balanced, dtype=np.float64)
    x0 = jnp.asarray(x0_np)
    sums, _, jacrev = _derivatives(model)
    t = jnp.array([model.t_probe])
    shapes = jax.eval_shape(lambda x: model.result(*model.build(*x, jnp.float64), t), x0)
    names = _float_fields(shapes)  # the fields behind sums(x)[1:], traced only
    g = np.asarray(jacrev(x0))[1:]  # (fields, 3)
    # Fourth-order central differences (8[f(x ± h)] − [f(x ± 2h)])/12h: the skill models' small
    # init scales (0.01) curve fast enough that the second-order one is off by 1e-6.
    h = 1e-5
    at = lambda i, step: np.asarray(sums(x0_np + step * np.eye(3)[i]))  # noqa: E731  (host shift)
    fd = np.stack(
        [
            (8 * (at(i, h) - at(i, -h)) - (at(i, 2 * h) - at(i, -2 * h))) / (12 * h)
            for i in range(3)
        ],
        axis=1,
    )[1:]
    tol = tolerance(np.float64, "finite_difference")
    assert len(names) == len(g)
    for name, g_f, fd_f in zip(names, g, fd, strict=True):
        assert np.all(np.isfinite(g_f)), (name, g_f)
        scale = max(1.0, float(np.max(np.abs(fd_f))))
        np.testing.assert_allclose(g_f, fd_f, atol=tol * scale, rtol=0, err_msg=name)
