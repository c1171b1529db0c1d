"""Wide/deep linear networks: M (K Thm 4.1, Eq 97, Eq 121) vs autodiff, implicit biases vs the flow."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sims import gradient_flow, tolerance
from sims import wide_deep as wd


def _params(seed, h, d, c):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    return jax.random.normal(k1, (h, d)), jax.random.normal(k2, (h, c))


@pytest.mark.parametrize(("h", "d", "c"), [(3, 5, 2), (4, 2, 5), (1, 4, 1)])
def test_theorem_4_1_and_eq_6_match_jacobian_metric(h, d, c):
    W, A = _params(h + d + c, h, d, c)
    ea, ew = 1.4, 0.6
    M_ref = wd._metric_jacobian(W, A, ea, ew)  # J diag(η) Jᵀ, J = ∂vec(β)/∂θ by autodiff
    delta = jnp.diag(wd.conserved(W, A, ea, ew))
    np.testing.assert_allclose(wd.metric(wd.neuron_maps(W, A), delta, ea, ew), M_ref, atol=1e-12)
    np.testing.assert_allclose(wd.metric_from_parameters(W, A, ea, ew), M_ref, atol=1e-12)


@pytest.mark.parametrize(
    ("h", "d", "c", "sign"), [(3, 5, 2, 1.0), (4, 2, 5, -1.0)]
)  # funnel lazy as δ → +∞, inverted funnel lazy as δ → −∞
def test_funnel_limits(h, d, c, sign):
    W, A = _params(7, h, d, c)
    errs = []
    for lam in (10.0, 100.0):
        Wl, Al = (W / lam, A * lam) if sign > 0 else (W * lam, A / lam)  # same β, |δ_i| ~ λ²
        delta = jnp.diag(wd.conserved(Wl, Al))
        assert bool(jnp.all(sign * delta > 0))
        M = wd.metric_from_parameters(Wl, Al)
        M_lim = wd.metric_lazy_limit(wd.neuron_maps(Wl, Al), delta)
        errs.append(float(jnp.abs(M - M_lim).max() / jnp.abs(M).max()))
        assert int(jnp.linalg.matrix_rank(M_lim)) == d * c  # β* reachable: lazy
    assert errs[1] < 2e-3 * errs[0]  # relative gap O(λ⁻⁴)
    Wl, Al = (W * 100.0, A / 100.0) if sign > 0 else (W / 100.0, A * 100.0)  # opposite limit
    M_lim = wd.metric_lazy_limit(wd.neuron_maps(Wl, Al), jnp.diag(wd.conserved(Wl, Al)))
    assert int(jnp.linalg.matrix_rank(M_lim)) < d * c  # low rank: lazy-then-rich


@pytest.mark.parametrize("delta", [-0.8, 0.0, 1.3])
def test_square_isotropic_metric_eq_97(delta):
    k1, k2 = jax.random.split(jax.random.PRNGKey(3))
    W = jnp.linalg.qr(jax.random.normal(k1, (3, 3)))[0] * jnp.array([1.2, 1.5, 2.0])
    O = jnp.linalg.qr(jax.random.normal(k2, (3, 3)))[0]
    ea, ew = 0.7, 1.5
    A = wd.square_isotropic_init(W, O, delta, ea, ew)
    np.testing.assert_allclose(wd.conserved(W, A, ea, ew), delta * jnp.eye(3), atol=1e-12)
    M_ref = wd._metric_jacobian(W, A, ea, ew)
    np.testing.assert_allclose(
        wd.metric_square_isotropic(W.T @ A, delta, ea, ew), M_ref, atol=1e-11
    )


def test_hyperbolic_entropy_hessian_and_paper_form():
    x = jnp.linspace(-2.0, 3.0, 11)
    for delta, ea, ew in ((0.5, 1.0, 1.0), (-0.7, 2.0, 0.3), (2.0, 0.5, 1.0)):
        q = lambda v, de=delta, a=ea, w=ew: wd.hyperbolic_entropy(v, de, a, w)
        q2 = jax.vmap(jax.grad(jax.grad(q)))(x)
        np.testing.assert_allclose(q2, 1 / jnp.sqrt(4 * ea * ew * x**2 + delta**2), rtol=1e-12)
    # K Eq 114 as printed (η = 1, δ > 0), and q(0) = 0.
    paper = 0.25 * (2 * x * jnp.arcsinh(2 * x / 0.5) - jnp.sqrt(4 * x**2 + 0.25) + 0.5)
    np.testing.assert_allclose(wd.hyperbolic_entropy(x, 0.5), paper, rtol=1e-13, atol=1e-15)
    assert float(wd.hyperbolic_entropy(jnp.zeros(()), -1.0, 2.0, 3.0)) == 0.0


def _task_aligned_problem(delta, ea, ew):
    """Square d = h = c = 3 network, XᵀX = V D Vᵀ rank 2, task-aligned init with Δ = δI."""
    ks = jax.random.split(jax.random.PRNGKey(11), 3)
    V, U, R = (jnp.linalg.qr(jax.random.normal(k, (3, 3)))[0] for k in ks)
    D = jnp.array([1.5, 0.7, 0.0])
    X = jnp.sqrt(D)[:, None] * V.T
    Y = X @ (V * jnp.array([1.2, 0.8, 5.0])) @ U.T
    omega = jnp.array([0.3, 0.5, 0.4])
    alpha = jnp.sqrt((delta + ea * omega**2) / ew)
    return X, Y, V, U, R * omega @ V.T, R * alpha @ U.T  # W0 = R ω Vᵀ, A0 = R α Uᵀ


@pytest.mark.parametrize("delta", [-0.05, pytest.param(0.0, marks=pytest.mark.slow), 0.6])
def test_task_aligned_theorem_b6_and_mirror_flow(delta):
    ea, ew = 1.3, 0.8
    X, Y, V, U, W0, A0 = _task_aligned_problem(delta, ea, ew)
    loss = lambda p, _: 0.5 * jnp.sum((X @ p[0].T @ p[1] - Y) ** 2)
    t = jnp.array([0.0, 0.5, 2.0, 60.0])
    W, A = gradient_flow(loss, (W0, A0), t, lr=(ew, ea))
    beta = jnp.einsum("thd,thc->tdc", W, A)
    Lam0 = jnp.diag(V.T @ beta[0] @ U)
    sol = wd.task_aligned_interpolant(X, Y, V, U, Lam0, jnp.asarray(delta), ea, ew)
    np.testing.assert_allclose(beta[-1], sol.beta, atol=1e-9)
    # Mirror flow (K Eq 110): q_δ''(Λ) Λ̇ = −∂L/∂Λ along the raw-parameter trajectory.
    if delta != 0.0:
        for Wt, At in zip(W[1:3], A[1:3], strict=True):
            gW, gA = jax.grad(loss)((Wt, At), None)
            beta_dot = -(ew * gW).T @ At - Wt.T @ (ea * gA)
            lam = jnp.diag(V.T @ Wt.T @ At @ U)
            lam_dot = jnp.diag(V.T @ beta_dot @ U)
            q2 = jax.vmap(jax.grad(jax.grad(lambda v: wd.hyperbolic_entropy(v, delta, ea, ew))))
            grad_lam = jnp.diag(V.T @ X.T @ (X @ Wt.T @ At - Y) @ U)
            np.testing.assert_allclose(q2(lam) * lam_dot, -grad_lam, atol=1e-12)


@pytest.mark.parametrize("l", [2, 3])
def test_deep_metric_eq_121_matches_jacobian(l):
    r = jax.random.normal(jax.random.PRNGKey(l), (l + 1, 4))
    a, Ws = wd.deep_isotropic_init(r / jnp.linalg.norm(r, axis=-1, keepdims=True), 0.7)
    J = jax.jacobian(wd._deep_beta)((a, Ws))
    M_ref = J[0] @ J[0].T + J[1].reshape(4, -1) @ J[1].reshape(4, -1).T
    np.testing.assert_allclose(wd.deep_metric(wd._deep_beta((a, Ws)), l), M_ref, atol=1e-12)


def test_deep_rich_bias_theorem_b9_vs_depth3_flow():
    # Depth 3 (l = 2), δ = 0 init of small scale; one datum in d = 3 leaves a 2-D interpolant set.
    keys = jax.random.split(jax.random.PRNGKey(5), 3)
    cases = [wd._deep_case(k, 2, 3, 1, 0.3) for k in keys]
    p0 = jax.tree.map(lambda *v: jnp.stack(v), *[c[0] for c in cases])
    X, y = jnp.stack([c[1] for c in cases]), jnp.stack([c[2] for c in cases])
    b_flow = jax.vmap(lambda p, Xi, yi: wd.deep_flow_interpolant(p, Xi, yi, 100.0))(p0, X, y)
    beta0 = jax.vmap(wd._deep_beta)(p0)
    b_th = jax.vmap(lambda Xi, yi, b0: wd.deep_rich_interpolant(Xi, yi, b0, 2))(X, y, beta0)
    np.testing.assert_allclose(b_flow, b_th, atol=1e-9)
    # ... and it is not the minimum-norm interpolant (the init direction is kept).
    b_mn = jax.vmap(lambda Xi, yi: jnp.linalg.pinv(Xi) @ yi)(X, y)
    assert float(jnp.abs(b_flow - b_mn).max()) > 1e-2
    q = jax.vmap(lambda b, b0: wd.deep_rich_bias(b, b0, 2))
    assert bool(jnp.all(q(b_th, beta0) < q(b_mn, beta0)))


@pytest.mark.parametrize("l", [1, 2, 3])
def test_deep_rich_interpolant_at_zero_init_is_the_minimum_norm_interpolant(l):
    # β0 = 0 (the vanishing-initialisation limit) used to fail Newton's check on a 0^{−l/(l+1)}·0;
    # the answer is Xᵀ(XXᵀ)⁻¹y, written out in numpy, and small inits approach it.
    rng = np.random.default_rng(l)
    X, y = rng.normal(size=(2, 4)), rng.normal(size=2)
    want = X.T @ np.linalg.solve(X @ X.T, y)
    got = wd.deep_rich_interpolant(jnp.asarray(X), jnp.asarray(y), jnp.zeros(4), l)
    np.testing.assert_allclose(got, want, rtol=0, atol=tolerance(np.float64, "rounding"))
    near = wd.deep_rich_interpolant(jnp.asarray(X), jnp.asarray(y), jnp.full(4, 1e-12), l)
    np.testing.assert_allclose(near, want, rtol=0, atol=1e-3)  # ‖β0‖^{1/(l+1)} ≤ 1e-3


def test_bad_input():
    W, A = _params(0, 3, 4, 2)
    with pytest.raises(ValueError, match="same h"):
        wd.metric_from_parameters(W, A[:2])
    with pytest.raises(ValueError, match="beta_i"):
        wd.metric(wd.neuron_maps(W, A), jnp.ones(2))
    with pytest.raises(ValueError, match="square"):
        wd.metric_square_isotropic(jnp.ones((3, 2)), 0.1)
    with pytest.raises(ValueError, match="positive definite"):
        wd.square_isotropic_init(jnp.eye(3), jnp.eye(3), -2.0)
    with pytest.raises(ValueError, match="beta0"):
        wd.deep_rich_interpolant(jnp.ones((1, 3)), jnp.ones(1), jnp.ones(2), 2)


def test_interpolant_entry_point_reads_the_init():
    ea, ew, delta = 1.3, 0.8, 0.6
    X, Y, V, U, W0, A0 = _task_aligned_problem(delta, ea, ew)
    sol = wd.interpolant(W0, A0, X, Y, V, U, eta_a=ea, eta_w=ew)
    Lam0 = jnp.diag(V.T @ W0.T @ A0 @ U)
    ref = wd.task_aligned_interpolant(X, Y, V, U, Lam0, jnp.asarray(delta), ea, ew)
    assert bool(sol.converged)
    np.testing.assert_allclose(sol.beta, ref.beta, atol=1e-12)
    np.testing.assert_allclose(X @ sol.beta, Y, atol=1e-10)  # an interpolant


def test_interpolant_reports_broken_assumptions_by_size():
    ea, ew, delta = 1.3, 0.8, 0.6
    X, Y, V, U, W0, A0 = _task_aligned_problem(delta, ea, ew)
    Lam0 = jnp.diag(V.T @ W0.T @ A0 @ U)
    X_bad = X + 0.01 * jnp.ones_like(X)  # XᵀX no longer diagonal in V
    with pytest.raises(ValueError, match=r"Assumption B\.5.* is [0-9.e-]+ of"):
        wd.task_aligned_interpolant(X_bad, Y, V, U, Lam0, jnp.asarray(delta), ea, ew)
    with pytest.raises(ValueError, match=r"isotropic.* is [0-9.e-]+ of"):
        wd.interpolant(W0, 1.1 * A0, X, Y, V, U, eta_a=ea, eta_w=ew)
    R = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(3), (3, 3)))[0]
    with pytest.raises(ValueError, match=r"Assumption B\.4"):  # Δ = δI still, β(0) rotated
        wd.interpolant(W0 @ R, A0, X, Y, V, U, eta_a=ea, eta_w=ew)


def test_newton_stops_on_its_criterion_and_reports_non_convergence():
    ea, ew, delta = 1.3, 0.8, -0.05
    X, Y, V, U, W0, A0 = _task_aligned_problem(delta, ea, ew)
    assert bool(wd.interpolant(W0, A0, X, Y, V, U, eta_a=ea, eta_w=ew).converged)
    # Theorem B.9's program has curvature: one Newton step cannot meet the criterion.
    p0, Xd, yd = wd._deep_case(jax.random.PRNGKey(5), 2, 3, 1, 0.3)
    b0 = wd._deep_beta(p0)
    with pytest.raises(RuntimeError, match="deep_rich_interpolant: Newton's method did not"):
        wd.deep_rich_interpolant(Xd, yd, b0, 2, max_iter=1)
    # under vmap the failure cannot raise: it is NaN, never a silent wrong answer
    out = jax.vmap(lambda b: wd.deep_rich_interpolant(Xd, yd, b, 2, max_iter=1))(b0[None])
    assert bool(jnp.all(jnp.isnan(out)))


def test_metric_names_a_zero_neuron():
    W, A = _params(0, 3, 4, 2)
    W = W.at[1].set(0.0)
    with pytest.raises(ValueError, match=r"beta_i has zero neurons \[1\]"):
        wd.metric(wd.neuron_maps(W, A), jnp.diag(wd.conserved(W, A)))
