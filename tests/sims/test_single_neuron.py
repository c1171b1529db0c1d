"""Single hidden neuron: exact solution vs the raw (a, w) gradient flow, limits, regimes, bad input.

The reference is always something computed independently of the closed form: the diffrax flow of
½‖X a w − y‖² on the raw parameters, a paper formula (K Eq. 23–25, 33, 37), or a naive definition.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sims import gradient_flow, tolerance
from sims import single_neuron as sn

TOL = tolerance(np.float64)


def _flow(X, y, a0, w0, t, eta_a=1.0, eta_w=1.0, atol=1e-16):
    return gradient_flow(
        sn.loss, {"a": a0, "w": w0}, t, (X, y), lr={"a": eta_a, "w": eta_w}, atol=atol
    )


def _mu_phi(a, w, beta_star):
    nw = jnp.linalg.norm(w, axis=-1)
    return a * nw, (w @ beta_star) / (nw * jnp.linalg.norm(beta_star))


@pytest.fixture(scope="module")
def cases():
    """12 random inits over all δ regimes, the exact solution and the integrated flow, t ∈ [0, 40]."""
    with jax.numpy_dtype_promotion("strict"):
        X, y, beta_star, a0, w0, eta_a, eta_w = sn._random_cases(jax.random.key(7), 12, d=4)
        # One extra downstream case from a 1e-12 init: escapes the saddle around t ≈ 14.
        a0 = jnp.concatenate([a0, jnp.array([1e-12])])
        w0 = jnp.concatenate([w0, jnp.array([[1e-12, -3e-12, 2e-12, 0.5e-12]])])
        eta_a = jnp.concatenate([eta_a, jnp.array([1.0])])
        eta_w = jnp.concatenate([eta_w, jnp.array([1.0])])
        t = jnp.concatenate([jnp.linspace(0.0, 3.0, 31), jnp.geomspace(3.2, 40.0, 30)])
        exact = jax.vmap(lambda a, w, ea, ew: sn.solve(a, w, beta_star, t, eta_a=ea, eta_w=ew))(
            a0, w0, eta_a, eta_w
        )
        ref = jax.vmap(lambda a, w, ea, ew: _flow(X, y, a, w, t, ea, ew, atol=1e-30))(
            a0, w0, eta_a, eta_w
        )
    return dict(
        X=X,
        y=y,
        beta_star=beta_star,
        a0=a0,
        w0=w0,
        eta_a=eta_a,
        eta_w=eta_w,
        t=t,
        exact=exact,
        ref=ref,
    )


def test_matches_gradient_flow_in_every_regime(cases):
    ex, ref, bs = cases["exact"], cases["ref"], cases["beta_star"]
    s = float(jnp.linalg.norm(bs))
    # The cases really cover δ > 0, δ = 0, δ < 0, sign changes of a, unequal rates, tiny inits.
    assert (
        (ex.delta > 1e-3).any() and (ex.delta < -1e-3).any() and (jnp.abs(ex.delta) < 1e-12).any()
    )
    assert ((ex.a.min(-1) < 0) & (ex.a.max(-1) > 0)).sum() >= 3
    assert (cases["eta_a"] != cases["eta_w"]).any()
    for name in ("a", "w"):
        err = jnp.max(jnp.abs(getattr(ex, name) - ref[name])) / s
        assert err < TOL, (name, float(err))
    beta_ref = ref["a"][..., None] * ref["w"]
    assert jnp.max(jnp.abs(ex.beta - beta_ref)) / s < TOL
    mu_ref, phi_ref = _mu_phi(ref["a"], ref["w"], bs)
    assert jnp.max(jnp.abs(ex.mu - mu_ref)) / s < TOL
    assert jnp.max(jnp.abs(ex.phi - phi_ref)) < 1e-6  # φ of the 1e-12 init: ratio of tiny numbers
    assert jnp.max(jnp.abs(ex.phi[:-1] - phi_ref[:-1])) < TOL
    # δ is conserved along the integrated flow and equals the returned value.
    d_ref = cases["eta_w"][:, None] * ref["a"] ** 2 - cases["eta_a"][:, None] * jnp.sum(
        ref["w"] ** 2, -1
    )
    assert jnp.max(jnp.abs(d_ref - ex.delta[:, None])) < 1e-9


@pytest.mark.slow  # the same comparison as above, through the `lrrich verify` entry point
def test_verify_entry_point():
    assert sn.verify(jax.random.key(3), n_cases=4) < TOL


def test_t0_and_t_infinity_limits(cases):
    ex, bs = cases["exact"], cases["beta_star"]
    np.testing.assert_allclose(ex.a[:, 0], cases["a0"], rtol=1e-14, atol=0)
    np.testing.assert_allclose(ex.w[:, 0], cases["w0"], rtol=1e-13, atol=1e-27)
    t_inf = jnp.array([1e4, 1e8])
    far = jax.vmap(lambda a, w, ea, ew: sn.solve(a, w, bs, t_inf, eta_a=ea, eta_w=ew))(
        cases["a0"], cases["w0"], cases["eta_a"], cases["eta_w"]
    )
    # Whitened input: every non-saddle init reaches the unique minimiser β*, on the branch
    # a(∞)² = (δ + √(δ² + 4η_aη_w‖β*‖²))/(2η_w) (K Eq. 37) picked by the basin (K Eq. 33).
    np.testing.assert_allclose(far.beta, jnp.broadcast_to(bs, far.beta.shape), atol=1e-12)
    e = cases["eta_a"] * cases["eta_w"]
    a_inf2 = (far.delta + jnp.sqrt(far.delta**2 + 4 * e * (bs @ bs))) / (2 * cases["eta_w"])
    np.testing.assert_allclose(far.a[:, -1] ** 2, a_inf2, rtol=1e-12)
    np.testing.assert_allclose(far.phi[:, -1], jnp.sign(far.a[:, -1]), atol=1e-14)
    sides = jax.vmap(lambda a, w, ea, ew: sn.basin(a, w, bs, ea, ew))(
        cases["a0"], cases["w0"], cases["eta_a"], cases["eta_w"]
    )
    np.testing.assert_array_equal(sides, jnp.sign(far.a[:, -1]))
    # ... and the integrator agrees on the branch at t = 40.
    np.testing.assert_array_equal(sides, jnp.sign(cases["ref"]["a"][:, -1]))


def test_basin_matches_printed_eq33():
    # K Eq. 33 at η_a = η_w = 1, δ < 0: sign of w₀ᵀβ* + a₀(δ + √(δ² + 4‖β*‖²))/2.
    bs = jnp.array([0.6, -0.8, 0.5])
    rng = np.random.default_rng(0)
    for _ in range(20):
        a0 = jnp.asarray(rng.normal() * 0.5)
        w0 = jnp.asarray(rng.normal(size=3) * 1.5)
        d = a0**2 - w0 @ w0
        printed = jnp.where(
            d >= 0, jnp.sign(a0), jnp.sign(w0 @ bs + a0 / 2 * (d + jnp.sqrt(d**2 + 4 * bs @ bs)))
        )
        assert sn.basin(a0, w0, bs) == printed


def test_balanced_matches_eq21_25():
    # δ = 0, η_a = η_w = 1, a₀ > 0: φ = tanh(c_φ + s t) (K Eq. 23) and the Bernoulli solution of
    # K Eq. 24. K Eq. 25 as printed holds for s = ‖β*‖ = 1; for general s the integrating factor gives
    # μ = 2s cosh²x / (2x + sinh 2x + c_μ), x = c_φ + s t, c_μ = 2s cosh²(c_φ)/μ₀ − 2c_φ − sinh 2c_φ.
    for s in (1.0, 1.7):
        bs = s * jnp.array([0.6, 0.8, 0.0])
        w0 = 0.05 * jnp.array([-0.3, 0.5, 0.8124038404635961])  # ‖w0‖ = 0.05
        a0 = jnp.linalg.norm(w0)
        t = jnp.linspace(0.0, 8.0, 81)
        ex = sn.solve(a0, w0, bs, t)
        assert abs(float(ex.delta)) < 1e-17
        phi0 = (w0 @ bs) / (jnp.linalg.norm(w0) * s)
        c_phi = jnp.arctanh(phi0)
        x = c_phi + s * t
        mu0 = a0 * jnp.linalg.norm(w0)
        c_mu = 2 * s * jnp.cosh(c_phi) ** 2 / mu0 - (2 * c_phi + jnp.sinh(2 * c_phi))
        mu = 2 * s * jnp.cosh(x) ** 2 / (2 * x + jnp.sinh(2 * x) + c_mu)
        np.testing.assert_allclose(ex.phi, jnp.tanh(x), atol=1e-12)
        np.testing.assert_allclose(ex.mu, mu, rtol=1e-10)


def test_upstream_limit_is_lazy_linear_regression():
    # δ → +∞ with β₀ fixed: M ≈ δ I, β follows linear-regression gradient flow
    # β(t) = β* + (β₀ − β*) e^{−δt} (K §3), with error O(‖β‖/δ), and the NTK barely moves.
    bs = jnp.array([1.0, 0.5])
    beta0 = jnp.array([-0.4, 0.3])
    errs, dists = [], []
    for a0 in (10.0, 100.0):
        w0 = beta0 / a0
        ex = sn.solve(jnp.asarray(a0), w0, bs, jnp.linspace(0.0, 5.0 / a0**2, 50))
        lin = bs + (beta0 - bs) * jnp.exp(-ex.delta * jnp.linspace(0.0, 5.0 / a0**2, 50))[:, None]
        errs.append(float(jnp.max(jnp.abs(ex.beta - lin))))
        X = jnp.eye(2)
        K = sn.ntk(ex.a, ex.w, X)
        dists.append(float(sn.kernel_distance(K[0], K[-1])))
    assert errs[0] < 2e-2 and errs[1] < errs[0] / 50  # error ∝ 1/δ
    assert dists[1] < 1e-7


def test_downstream_limit_is_lazy_then_delayed_rich():
    # δ → −∞ with β₀ fixed: first μ → φ₀‖β*‖ on the fast time-scale 1/|δ| with φ frozen (projected
    # gradient flow along β₀), then φ follows φ̇ = ‖β*‖²|δ|⁻¹ φ(1 − φ²) (K §3), i.e.
    # φ²/(1 − φ²) = φ₀²/(1 − φ₀²) e^{2‖β*‖²t/|δ|}; errors O(1/|δ|).
    bs = jnp.array([1.0, 0.0])
    beta0 = 0.2 * jnp.array([np.cos(1.0), np.sin(1.0)])
    phi0 = float(np.cos(1.0))
    errs = []
    for nw in (10.0, 30.0):
        w0 = nw * beta0 / jnp.linalg.norm(beta0)
        a0 = jnp.linalg.norm(beta0) / nw
        ex0 = sn.solve(a0, w0, bs, jnp.array([10.0 / nw**2]))
        assert abs(float(ex0.phi[0]) - phi0) < 1e-3 and abs(float(ex0.mu[0]) - phi0) < 1e-3
        t = jnp.linspace(0.5, 3.0, 6) * nw**2
        ex = sn.solve(a0, w0, bs, t)
        r = phi0**2 / (1 - phi0**2) * jnp.exp(2 * t / -ex.delta)
        errs.append(float(jnp.max(jnp.abs(ex.phi - jnp.sqrt(r / (1 + r))))))
    assert errs[0] < 2e-2 and errs[1] < errs[0] / 5


def test_long_times_and_tiny_inits_are_finite():
    bs = jnp.array([0.3, -0.2, 0.9])
    t = jnp.array([0.0, 1e-3, 1.0, 1e3, 1e6, 1e8])
    inits = [
        (1e-12, jnp.array([1e-12, 2e-12, -1e-12])),  # δ < 0, tiny
        (-3e-12, jnp.array([1e-12, 0.0, 0.0])),  # δ > 0, tiny, a < 0
        (1e-12, jnp.array([0.0, 0.0, 1e-12])),  # δ = 0, tiny
        (1e-12, jnp.array([-0.3, 0.2, -0.9])),  # δ < 0, a changes sign
        (50.0, jnp.array([1e-3, 0.0, 0.0])),  # strongly upstream
        (1e-3, jnp.array([-30.0, 5.0, 1.0])),  # strongly downstream
    ]
    for a0, w0 in inits:
        ex = sn.solve(jnp.asarray(a0), w0, bs, t, eta_a=0.5, eta_w=3.0)
        for leaf in ex:
            assert jnp.all(jnp.isfinite(leaf)), (a0, w0)
        np.testing.assert_allclose(ex.beta[-1], bs, atol=1e-12)


def test_saddles_stay_put():
    bs = jnp.array([1.0, 2.0])
    t = jnp.array([0.0, 1.0, 1e8])
    ex = sn.solve(0.0, jnp.zeros(2), bs, t)
    for leaf in ex._replace(t=jnp.zeros(3)):
        assert jnp.all(jnp.isfinite(leaf)) and jnp.all(leaf == 0)
    np.testing.assert_array_equal(ex.t, t)
    w0 = jnp.array([2.0, -1.0])  # a = 0, w ⟂ β*: a saddle point of the flow
    ex = sn.solve(0.0, w0, bs, t)
    np.testing.assert_array_equal(ex.w, jnp.broadcast_to(w0, (3, 2)))
    np.testing.assert_array_equal(ex.a, jnp.zeros(3))
    assert sn.basin(0.0, w0, bs) == 0


def test_vmap_over_inits_and_no_recompilation():
    bs = jnp.array([1.0, -1.0, 0.5])
    t = jnp.linspace(0.0, 5.0, 7).reshape(7, 1)  # any shape of t
    f = jax.jit(sn.solve)
    for a0, w0, ea, ew in [
        (0.1, jnp.array([0.2, 0.0, 0.1]), 1.0, 1.0),  # δ < 0
        (2.0, jnp.array([0.2, 0.0, 0.1]), 0.5, 2.0),  # δ > 0, new η
        (-0.3, jnp.array([0.0, 0.3, 0.0]), 3.0, 0.1),
    ]:
        out = f(jnp.asarray(a0), w0, bs, t, eta_a=jnp.asarray(ea), eta_w=jnp.asarray(ew))
        assert out.w.shape == (7, 1, 3) and out.mu.shape == (7, 1) and out.delta.shape == ()
    assert f._cache_size() == 1
    a0 = jnp.linspace(-1.0, 1.0, 5)
    w0 = jnp.ones((5, 3)) * 0.3
    batch = jax.vmap(lambda a, w: sn.solve(a, w, bs, t[:, 0]))(a0, w0)
    assert batch.beta.shape == (5, 7, 3)
    one = sn.solve(a0[1], w0[1], bs, t[:, 0])
    np.testing.assert_allclose(batch.beta[1], one.beta, rtol=1e-15)


def test_bad_input():
    bs = jnp.array([1.0, 0.0])
    w0 = jnp.array([0.1, 0.2])
    t = jnp.array([0.0, 1.0])
    with pytest.raises(ValueError, match="beta_star must be non-zero"):
        sn.solve(0.1, w0, jnp.zeros(2), t)
    with pytest.raises(ValueError, match="beta_star must have shape"):
        sn.solve(0.1, w0, jnp.ones(3), t)
    with pytest.raises(ValueError, match="a0 must have shape"):
        sn.solve(jnp.ones(2), w0, bs, t)
    with pytest.raises(ValueError, match="w0 must have shape"):
        sn.solve(0.1, jnp.ones((2, 2)), bs, t)
    with pytest.raises(ValueError, match="eta_a must be positive"):
        sn.solve(0.1, w0, bs, t, eta_a=0.0)
    with pytest.raises(ValueError, match="eta_w must be positive"):
        sn.solve(0.1, w0, bs, t, eta_w=-1.0)
    with pytest.raises(TypeError):  # the rates are keyword-only
        sn.solve(0.1, w0, bs, t, 1.0, 2.0)
    with pytest.raises(ValueError, match="t must be non-negative"):
        sn.solve(0.1, w0, bs, jnp.array([-1.0]))
    with pytest.raises(ValueError, match="w0 contains NaN"):
        sn.solve(0.1, jnp.array([jnp.nan, 0.0]), bs, t)
    with pytest.raises(ValueError, match="X must have shape"):
        sn.ntk(jnp.ones(3), jnp.ones((3, 2)), jnp.ones((4, 3)))
    with pytest.raises(ValueError, match="one-dimensional null space"):
        sn.implicit_bias_1d(jnp.ones((1, 3)), jnp.ones(1), jnp.ones(3), 0.0)
    with pytest.raises(ValueError, match="beta0 must be non-zero"):
        sn.implicit_bias(jnp.ones((1, 3)), jnp.ones(1), jnp.zeros(3), 0.0)


def test_params_from_mu_phi_inverts_the_flow(cases):
    # K Eq. 34–35 applied to (μ, φ) measured on the integrated flow recovers its (a, w).
    ref, bs = cases["ref"], cases["beta_star"]
    for i in range(8):  # the O(1) cases (φ of the 1e-12 init is too ill-conditioned)
        mu, phi = _mu_phi(ref["a"][i], ref["w"][i], bs)
        delta = (
            cases["eta_w"][i] * cases["a0"][i] ** 2
            - cases["eta_a"][i] * cases["w0"][i] @ (cases["w0"][i])
        )
        a, w = sn.params_from_mu_phi(
            mu, phi, delta, cases["w0"][i], bs, cases["eta_a"][i], cases["eta_w"][i]
        )
        np.testing.assert_allclose(a, ref["a"][i], atol=1e-7)
        np.testing.assert_allclose(w, ref["w"][i], atol=1e-7)


def test_preconditioner_and_ntk_match_parameters(cases):
    # M(β, δ) of K Eq. 39 equals η_w a² I + η_a w wᵀ built from the integrated parameters, and the
    # NTK equals Σ_θ η_θ ∂f(x)/∂θ ∂f(x')/∂θ computed with jax.jacobian.
    ref = cases["ref"]
    d = cases["w0"].shape[1]
    for i in (0, 1, 2, 3):
        a, w = ref["a"][i], ref["w"][i]
        ea, ew = cases["eta_a"][i], cases["eta_w"][i]
        delta = ew * a[0] ** 2 - ea * w[0] @ w[0]
        M = sn.preconditioner(a[:, None] * w, delta, ea, ew)
        M_params = ew * (a**2)[:, None, None] * jnp.eye(d) + ea * w[:, :, None] * w[:, None, :]
        np.testing.assert_allclose(M, M_params, atol=1e-12)
    X = cases["X"]
    a, w = ref["a"][2, 10], ref["w"][2, 10]
    ea, ew = cases["eta_a"][1], cases["eta_w"][1]
    ja, jw = jax.jacobian(lambda p: X @ (p[0] * p[1]))((a, w))
    K_naive = ea * jnp.outer(ja, ja) + ew * jw @ jw.T
    np.testing.assert_allclose(sn.ntk(a, w, X, ea, ew), K_naive, atol=1e-12)
    K0 = sn.ntk(ref["a"][2, 0], ref["w"][2, 0], X)
    K1 = sn.ntk(a, w, X)
    naive = 1 - np.sum(K0 * K1) / (np.linalg.norm(K0) * np.linalg.norm(K1))
    np.testing.assert_allclose(sn.kernel_distance(K0, K1), naive, rtol=1e-12)


def test_implicit_bias_potential_formula():
    # The cancellation-free Ψ_δ equals the printed K Eq. 67 where the latter is accurate, and its
    # gradient is 2β/√(κ + δ) (K Eq. 61/64).
    beta = jnp.array([0.7, -1.2, 0.4])
    for delta in (-3.0, -0.5, 0.0, 0.5, 3.0):
        kappa = np.sqrt(delta**2 + 4 * float(beta @ beta))
        printed = (kappa - 2 * delta) * np.sqrt(kappa + delta) / 3 + max(
            0.0, np.sign(delta) * np.sqrt(2) * abs(delta) ** 1.5 / 3
        )
        np.testing.assert_allclose(sn.implicit_bias_potential(beta, delta), printed, rtol=1e-13)
        g = jax.grad(lambda b, d=delta: sn.implicit_bias_potential(b, d))(beta)
        np.testing.assert_allclose(g, 2 * beta / np.sqrt(kappa + delta), rtol=1e-12)
    assert sn.implicit_bias_potential(jnp.zeros(3), 2.0) == 0


@pytest.mark.parametrize("d", [3, pytest.param(4, marks=pytest.mark.slow)])
def test_implicit_bias_matches_interpolant_reached_by_flow(d):
    # Low-rank, non-whitened X (n = 2 < d): integrate the raw (a, w) flow to convergence and compare
    # with the convex program of K Theorem 3.1 (and, for d = 3, the closed form K Eq. 72).
    key = jax.random.key(11)
    kx, ky, ku = jax.random.split(key, 3)
    X = jax.random.normal(kx, (2, d))
    y = jax.random.normal(ky, (2,))
    u = jax.random.normal(ku, (d,))
    u = u / jnp.linalg.norm(u)
    # (a₀, ±‖w₀‖, η_a, η_w): upstream, downstream, balanced, unequal rates, downstream with a
    # changing sign (beyond Theorem 3.1: K App. A.4.4 remarks that α → −α; here tested for any null
    # space dimension as β̂₀ → −β̂₀).
    inits = jnp.array(
        [
            [1.0, 0.3, 1.0, 1.0],
            [0.3, 1.0, 1.0, 1.0],
            [0.5, 0.5, 1.0, 1.0],
            [0.8, 0.4, 2.0, 0.7],
            [0.1, -2.0, 1.0, 1.0],
        ]
    )
    a0, w0 = inits[:, 0], inits[:, 1:2] * u
    ea, ew = inits[:, 2], inits[:, 3]
    t = jnp.array([0.0, 150.0, 300.0])
    ref = jax.vmap(lambda a, w, e1, e2: _flow(X, y, a, w, t, e1, e2, atol=1e-14))(a0, w0, ea, ew)
    b_inf = ref["a"][:, -1:] * ref["w"][:, -1]
    np.testing.assert_allclose(X @ b_inf.T, jnp.broadcast_to(y[:, None], (2, 5)), atol=1e-10)
    assert ref["a"][-1, -1] < 0 < a0[-1]  # the last case really changes sign
    for i in range(5):
        delta = ew[i] * a0[i] ** 2 - ea[i] * w0[i] @ w0[i]
        flips = bool(ref["a"][i, -1] * a0[i] < 0)
        pred = sn.implicit_bias(X, y, a0[i] * w0[i], delta, ea[i], ew[i], a_changes_sign=flips)
        np.testing.assert_allclose(pred, b_inf[i], atol=1e-9)
        if d == 3 and ea[i] * ew[i] == 1.0:
            pred1 = sn.implicit_bias_1d(X, y, a0[i] * w0[i], delta, a_changes_sign=flips)
            np.testing.assert_allclose(pred1, b_inf[i], atol=1e-9)
    # δ matters: the reached interpolants differ across δ although β₀ directions agree.
    assert float(jnp.max(jnp.abs(b_inf[0] - b_inf[1]))) > 1e-2
