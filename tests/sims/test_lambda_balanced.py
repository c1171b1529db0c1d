"""λ-balanced linear network: closed form vs integrator, high-precision naive formula and limits."""

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

from sims import lambda_balanced
from sims.lambda_balanced import balanced_init, ntk_kernel_distance, phase_diagram, solve
from sims.tolerances import tolerance


def _naive_mp(W1, W2, sig, t):
    """X(t) = e^{Ft}Q₀[I + Q₀ᵀG Q₀]⁻¹Q₀ᵀe^{Ft} evaluated as written, in enough digits to be exact."""
    W1, W2, sig = (np.asarray(x) for x in (W1, W2, sig))
    h, d = W1.shape
    c = W2.shape[0]
    lam = np.trace(W2.T @ W2 - W1 @ W1.T) / h
    F = np.block([[-lam / 2 * np.eye(d), sig.T], [sig, lam / 2 * np.eye(c)]])
    fmax = np.max(np.abs(np.linalg.eigvalsh(F)))
    with mp.workdps(int(40 + 2.4 * fmax * t / np.log(10))):
        E, V = mp.eigsy(mp.matrix(F.tolist()))
        Q0 = mp.matrix(np.concatenate([W1.T, W2], 0).tolist())
        tt = mp.mpf(t)
        n = d + c
        eF = V * mp.diag([mp.exp(E[i] * tt) for i in range(n)]) * V.T
        g = [mp.expm1(2 * E[i] * tt) / (2 * E[i]) if E[i] != 0 else tt for i in range(n)]
        M = mp.eye(h) + Q0.T * (V * mp.diag(g) * V.T) * Q0
        X = eF * Q0 * mp.inverse(M) * Q0.T * eF
        return np.array(X.tolist(), dtype=float)


def _blocks_close(sol, i, X, d, atol):
    np.testing.assert_allclose(sol.network[i], X[d:, :d], atol=atol, rtol=0)
    np.testing.assert_allclose(sol.w1tw1[i], X[:d, :d], atol=atol, rtol=0)
    np.testing.assert_allclose(sol.w2w2t[i], X[d:, d:], atol=atol, rtol=0)


def test_verify_against_integrator():
    # Unaligned inits, λ ∈ [−4, 4], scales 1e-3–2, t ∈ [0, 40] (past convergence).
    # (counted as growth: another test module in this worker may have compiled other shapes)
    before = [
        f._cache_size() for f in (lambda_balanced._verify_solve, lambda_balanced._verify_inits)
    ]
    assert lambda_balanced.verify(jax.random.key(0), 6) <= 1e-8
    # one compiled program for the batched closed form and one for the inits (evaluated eagerly,
    # vmap compiled each primitive of the unrolled paths separately: ~600 programs)
    after = [
        f._cache_size() for f in (lambda_balanced._verify_solve, lambda_balanced._verify_inits)
    ]
    assert all(a - b <= 1 for a, b in zip(after, before, strict=True)) and min(after) >= 1


@pytest.mark.parametrize("lam, scale", [(0.0, 1e-12), (1.0, 1e-3), (-3.0, 1.0), (1e-3, 0.5)])
def test_matches_high_precision_naive_formula(lam, scale):
    sig = jax.random.normal(jax.random.key(3), (3, 4))
    W1, W2 = balanced_init(jax.random.key(5), 4, 3, 3, scale, lam)
    ts = [0.0, 0.3, 5.0, 20.0, 60.0]
    sol = solve(W1, W2, sig, jnp.array(ts))
    for i, t in enumerate(ts):
        _blocks_close(sol, i, _naive_mp(W1, W2, sig, t), 4, atol=1e-10)


@pytest.mark.slow
def test_matches_high_precision_naive_formula_long_times():
    sig = jax.random.normal(jax.random.key(3), (3, 4))
    W1, W2 = balanced_init(jax.random.key(5), 4, 3, 3, 1e-3, -3.0)
    ts = [200.0, 1000.0, 1e4]
    sol = solve(W1, W2, sig, jnp.array(ts))
    for i, t in enumerate(ts):
        _blocks_close(sol, i, _naive_mp(W1, W2, sig, t), 4, atol=1e-9)


def test_hidden_wider_than_growing_space():
    # d = 3, c = 1, h = 2, λ < 0: F has one growing direction, h = 2 > 1 (needs the rotation W).
    lam = -0.7
    O, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(2, 2)))
    A, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(3, 2)))
    s2 = np.array([0.5, 0.0])
    W2 = jnp.array(np.array([[s2[0], 0.0]]) @ O.T)
    W1 = jnp.array((O * np.sqrt(s2**2 - lam)) @ A.T)
    sig = jnp.array([[0.8, -0.3, 0.5]])
    ts = [0.0, 2.0, 30.0, 100.0]
    sol = solve(W1, W2, sig, jnp.array(ts))
    for i, t in enumerate(ts):
        _blocks_close(sol, i, _naive_mp(W1, W2, sig, t), 3, atol=1e-10)


def test_t0_and_t_infinity_limits():
    # t → ∞: W₂W₁ → best rank-h approximation of Σ; the blocks → Σ_i (√(σ²+λ²/4) ∓ λ/2) r rᵀ / u uᵀ.
    d, h, c, lam = 4, 2, 3, 0.7
    sig = jax.random.normal(jax.random.key(1), (c, d))
    W1, W2 = balanced_init(jax.random.key(2), d, h, c, 0.1, lam)
    sol = solve(W1, W2, sig, jnp.array([0.0, 1e4]))
    np.testing.assert_allclose(sol.network[0], W2 @ W1, atol=1e-14)
    np.testing.assert_allclose(sol.w1tw1[0], W1.T @ W1, atol=1e-14)
    np.testing.assert_allclose(sol.w2w2t[0], W2 @ W2.T, atol=1e-14)
    U, s, Vt = np.linalg.svd(np.asarray(sig))
    U, s, Vt = U[:, :h], s[:h], Vt[:h]
    f = np.sqrt(s**2 + lam**2 / 4)
    np.testing.assert_allclose(sol.network[1], (U * s) @ Vt, atol=1e-12)
    np.testing.assert_allclose(sol.w1tw1[1], (Vt.T * (f - lam / 2)) @ Vt, atol=1e-12)
    np.testing.assert_allclose(sol.w2w2t[1], (U * (f + lam / 2)) @ U.T, atol=1e-12)
    np.testing.assert_allclose(sol.lam, lam, rtol=1e-12)


def _aligned(sigmas, s0, lam):
    """Task-aligned init with mode strengths s0 (Σ = diag(σ)) and W₂ᵀW₂ − W₁W₁ᵀ = λI."""
    a = np.sqrt((np.sqrt(lam**2 + 4 * s0**2) - lam) / 2)  # a² (a² + λ) = s0², b² = a² + λ
    b = s0 / a
    O, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(len(s0), len(s0))))
    return jnp.array((O * a).T), jnp.array(O * b), jnp.diag(jnp.array(sigmas))


def test_small_lambda_gives_saxe_sigmoid():
    # λ = 0: ṡ = 2s(σ − s) ⇒ s(t) = σ s₀e^{2σt} / (σ − s₀ + s₀e^{2σt}) (Saxe et al. 2014).
    sig, s0 = np.array([3.0, 1.0]), np.array([1e-4, 1e-4])
    W1, W2, S = _aligned(sig, s0, 0.0)
    t = jnp.linspace(0.0, 8.0, 33)
    modes = jnp.diagonal(solve(W1, W2, S, t).network, axis1=-2, axis2=-1)
    e = np.exp(2 * sig * np.asarray(t)[:, None])
    np.testing.assert_allclose(modes, sig * s0 * e / (sig - s0 + s0 * e), atol=1e-12)


@pytest.mark.parametrize("lam", [1e3, -1e3])
def test_large_lambda_gives_exponential_modes(lam):
    # |λ| → ∞ (position Eq. 70): s(t) → σ + (s₀ − σ)e^{−|λ|t}, the linear model's modes.
    sig, s0 = np.array([2.0, 0.5]), np.array([0.1, 0.1])
    W1, W2, S = _aligned(sig, s0, lam)
    t = jnp.linspace(0.0, 8.0, 33) / abs(lam)
    modes = jnp.diagonal(solve(W1, W2, S, t).network, axis1=-2, axis2=-1)
    expo = sig + (s0 - sig) * np.exp(-abs(lam) * np.asarray(t)[:, None])
    np.testing.assert_allclose(modes, expo, atol=1e-5)  # O(σ²/λ²)
    assert np.max(np.abs(modes - expo)) > 1e-9  # not trivially equal


def test_kernel_distance_matches_jacobian_ntk():
    # Naive NTK: Jacobian of f(x) = W₂W₁x on an orthonormal batch, K = J Jᵀ, S = 1 − cos(K₀, K_t).
    d, h, c = 3, 2, 2
    key = jax.random.key(4)
    W1a, W2a = balanced_init(key, d, h, c, 0.3, 0.5)
    W1b, W2b = jax.random.normal(jax.random.key(5), (h, d)), jax.random.normal(key, (c, h))
    X = jnp.linalg.qr(jax.random.normal(jax.random.key(6), (d, d)))[0]

    def ntk(W1, W2):
        J = jax.jacobian(lambda p: jnp.einsum("ch,hd,nd->nc", p[1], p[0], X).reshape(-1))((W1, W2))
        J = jnp.concatenate([j.reshape(j.shape[0], -1) for j in J], axis=1)
        return J @ J.T

    K0, K1 = ntk(W1a, W2a), ntk(W1b, W2b)
    naive = 1 - jnp.sum(K0 * K1) / (jnp.linalg.norm(K0) * jnp.linalg.norm(K1))
    ours = ntk_kernel_distance(W1a.T @ W1a, W2a @ W2a.T, W1b.T @ W1b, W2b @ W2b.T)
    np.testing.assert_allclose(ours, naive, rtol=1e-12)


def test_phase_diagram_rich_corner_and_lazy_edges():
    sig = jnp.diag(jnp.array([3.0, 2.0, 1.0]))
    pd = phase_diagram(
        jax.random.key(0), sig, jnp.array([-8.0, 0.0, 8.0]), jnp.array([1e-3, 3.0]), 3, 30.0
    )
    S = np.asarray(pd.kernel_distance)
    assert S.shape == (3, 2)
    assert S[1, 0] > 0.2  # balanced: rich
    assert S[0, 0] < 0.05 and S[2, 0] < 0.05  # |λ| ≫ scale²: lazy (only one layer moves)
    assert S[0, 1] > 5 * S[0, 0]  # the same λ at a larger absolute scale is richer again
    # λ = 0: the NTK's direction at init does not depend on the scale ("rich at any scale", App. G.2)
    np.testing.assert_allclose(S[1, 1], S[1, 0], rtol=1e-6)
    assert np.all(pd.loss < 1e-10)


def test_finite_tiny_init_long_time_saddle_vmap_and_no_recompile():
    sig = jax.random.normal(jax.random.key(7), (2, 3))
    t = jnp.array([0.0, 1.0, 1e2, 1e4])
    W1, W2 = balanced_init(jax.random.key(8), 3, 2, 2, 1e-12, 0.0)
    sol = solve(W1, W2, sig, t)
    assert all(jnp.all(jnp.isfinite(x)) for x in sol)
    sad = solve(jnp.zeros((2, 3)), jnp.zeros((2, 2)), sig, t)
    assert jnp.all(sad.network == 0) and jnp.all(jnp.isfinite(sad.kernel_distance))
    inits = jax.vmap(lambda lam: balanced_init(jax.random.key(9), 3, 2, 2, 0.5, lam))(
        jnp.array([-1.0, 0.0, 2.0])
    )
    batch = jax.vmap(lambda a, b: solve(a, b, sig, t).network)(*inits)
    np.testing.assert_allclose(
        batch[2], solve(inits[0][2], inits[1][2], sig, t).network, atol=1e-14
    )
    n = lambda_balanced._solve_jit._cache_size()
    for lam, s in ((0.3, 1.0), (-2.0, 0.01)):
        solve(*balanced_init(jax.random.key(1), 3, 2, 2, s, lam), sig, t)
    assert lambda_balanced._solve_jit._cache_size() == n


def test_bad_input():
    sig = jnp.ones((2, 3))
    W1, W2 = balanced_init(jax.random.key(0), 3, 2, 2, 0.5, 1.0)
    bad = W2.at[0, 0].add(0.1)
    C = np.asarray(bad.T @ bad - W1 @ W1.T)
    viol = np.max(np.abs(C - np.trace(C) / 2 * np.eye(2)))
    with pytest.raises(ValueError, match=rf"not λ-balanced.*max \|entry\| {viol:.3e}"):
        solve(W1, bad, sig, 1.0)
    with pytest.raises(ValueError, match="W2_0"):
        solve(W1, jnp.ones((2, 3)), sig, 1.0)
    with pytest.raises(ValueError, match="sigma_yx"):
        solve(W1, W2, jnp.ones((3, 2)), 1.0)
    with pytest.raises(ValueError, match="t"):
        solve(W1, W2, sig, -1.0)
    with pytest.raises(ValueError, match="h <= min"):
        balanced_init(jax.random.key(0), 3, 4, 5, 1.0, 0.0)


def test_wider_hidden_layer_and_init_missing_the_top_mode():
    # h = 4 (unrolled factorisation at a larger width) and an init with no component on Σ's top
    # singular pair (the first columns of L₀ start below the fastest-growing row), both vs mpmath.
    sig = jax.random.normal(jax.random.key(11), (5, 6))
    W1, W2 = balanced_init(jax.random.key(12), 6, 4, 5, 0.05, -0.4)
    ts = [0.0, 0.7, 6.0, 40.0]
    sol = solve(W1, W2, sig, jnp.array(ts))
    for i, t in enumerate(ts):
        _blocks_close(sol, i, _naive_mp(W1, W2, sig, t), 6, atol=1e-10)
    W1s, W2s, _ = _aligned(np.array([2.0, 1.0]), np.array([1e-3, 1e-2]), 0.0)
    W1a = jnp.concatenate([jnp.zeros((2, 1)), W1s], axis=1)  # (h=2, d=3): nothing on input 0
    W2a = jnp.concatenate([jnp.zeros((1, 2)), W2s], axis=0)  # (c=3, h=2): nothing on output 0
    S = jnp.diag(jnp.array([3.0, 2.0, 1.0]))
    ts = [0.0, 3.0, 15.0, 60.0]
    sol = solve(W1a, W2a, S, jnp.array(ts))
    for i, t in enumerate(ts):
        _blocks_close(sol, i, _naive_mp(W1a, W2a, S, t), 3, atol=1e-10)
    assert abs(float(sol.network[-1][0, 0])) < 1e-10  # the top mode never grows


def test_many_times_and_vmapped_trajectories_return():
    """Regression: per-time LAPACK QRs deadlocked XLA:CPU; times now run as elementwise vectors."""
    keys = jax.random.split(jax.random.key(3), 8)
    W1, W2 = jax.vmap(lambda k: balanced_init(k, 4, 3, 3, 0.1, 1.0))(keys)
    sig = jnp.concatenate([jnp.diag(jnp.array([3.0, 2.0, 1.0])), jnp.zeros((3, 1))], axis=1)
    t = jnp.linspace(0.0, 5.0, 1000)
    batched = jax.vmap(lambda a, b: solve(a, b, sig, t).network)(W1, W2)
    single = solve(W1[5], W2[5], sig, jnp.linspace(0.0, 5.0, 8000)).network
    np.testing.assert_allclose(batched[5, -1], single[-1], rtol=1e-12, atol=1e-12)
    assert batched.shape == (8, 1000, 3, 4) and np.all(np.isfinite(batched))


# One compiled program per evaluation path and shape: evaluated eagerly, every primitive of the
# unrolled factorisations is compiled as its own XLA program (thousands per test).
_path = jax.jit(lambda_balanced._solve_path, static_argnums=4)


@jax.jit
def _both_paths(W1, W2, sig, t):
    """X(t) (N, n, n) in F's eigenbasis from the Cholesky and the Householder paths, and κ(Ŝ)."""
    f, _, _, Wm, L0 = lambda_balanced._eigenbasis(W1, W2, sig)
    Zq = lambda_balanced._at_times(f, Wm, L0, t)
    Zc, kappa = lambda_balanced._at_times_cholesky(f, L0, t)
    X = lambda Z: jnp.einsum("iht,jht->tij", jnp.stack(Z, axis=1), jnp.stack(Z, axis=1))
    return X(Zc), X(Zq), kappa


def test_fast_cholesky_path_and_its_householder_fallback():
    """Generic inits take the Cholesky path (κ small) and agree with the Householder path; inits
    almost missing the fastest mode give κ(Ŝ) above the bound, where Cholesky alone is wrong, and
    solve() (which then falls back) still matches the 40-digit formula."""
    sig = jax.random.normal(jax.random.key(4), (3, 4))
    t = jnp.concatenate([jnp.zeros(1), jnp.logspace(-8, 4, 60)])
    W1, W2 = jax.vmap(lambda k, la: balanced_init(k, 4, 3, 3, 0.1, la))(
        jax.random.split(jax.random.key(5), 5), jnp.linspace(-2.0, 2.0, 5)
    )
    kmax = lambda_balanced._kappa_max(jnp.float64)
    for i in range(5):
        Xc, Xq, kappa = _both_paths(W1[i], W2[i], sig, t)
        assert float(jnp.max(kappa)) < 1e3 <= kmax
        np.testing.assert_allclose(Xc, Xq, atol=1e-13 * (1 + float(jnp.max(jnp.abs(Xq)))))
    W1s, W2s, _ = _aligned(np.array([2.0, 1.0]), np.array([1e-3, 1e-2]), 0.0)
    S = jnp.diag(jnp.array([3.0, 2.0, 1.0]))
    W1a = jnp.concatenate([jnp.full((2, 1), 1e-12), W1s], axis=1)  # a 1e-12 trace of the top mode
    W2a = jnp.concatenate([jnp.full((1, 2), 1e-12), W2s], axis=0)
    ts = jnp.linspace(0.0, 60.0, 61)
    Xc, Xq, kappa = _both_paths(W1a, W2a, S, ts)
    assert float(jnp.max(kappa)) > kmax
    assert float(jnp.max(jnp.abs(Xc - Xq))) > 1e-8  # the detector is needed: Cholesky loses digits
    sol = solve(W1a, W2a, S, jnp.array([0.0, 20.0, 40.0, 60.0]))
    for i, t_i in enumerate([0.0, 20.0, 40.0, 60.0]):
        _blocks_close(sol, i, _naive_mp(W1a, W2a, S, t_i), 3, atol=1e-10)


def test_phase_diagram_same_under_jit_and_on_both_paths():
    """The grid decides its path once (Cholesky unless a cell needs Householder): eagerly in
    Python, under jit with lax.cond; both agree with the per-cell Householder evaluation."""
    sig = jax.random.normal(jax.random.key(6), (3, 4))
    lams, scales = jnp.linspace(-2.0, 2.0, 3), jnp.array([1e-3, 0.1, 1.0])
    eager = phase_diagram(jax.random.key(7), sig, lams, scales, 2, 8.0)
    jitted = jax.jit(phase_diagram, static_argnums=4)(jax.random.key(7), sig, lams, scales, 2, 8.0)
    np.testing.assert_allclose(jitted.kernel_distance, eager.kernel_distance, atol=1e-14)
    np.testing.assert_allclose(jitted.loss, eager.loss, atol=1e-14)
    for i, lam in enumerate(lams):
        for j, s in enumerate(scales):
            W1, W2 = lambda_balanced._balanced_init(jax.random.key(7), 4, 2, 3, s, lam)
            ref, _ = _path(W1, W2, sig, jnp.asarray(8.0), "householder")
            np.testing.assert_allclose(eager.kernel_distance[i, j], ref.kernel_distance, atol=1e-13)


def test_g_of_the_direct_path_on_both_branches():
    """g = (e^{2ft} − 1)/2f from its 13-term series (|2ft| < 0.35) and from E = e^{ft} (else)
    against NumPy's expm1, both signs of f, across the switch, f = 0 (g = t) and t = 0."""
    f = jnp.array([3.0, 1.0, 1e-3, 0.0, -1e-3, -1.0, -3.0])
    t = jnp.concatenate([jnp.zeros(1), jnp.logspace(-12, 2, 400), jnp.array([0.175, 0.35 / 2])])
    ft = f[:, None] * t[None, :]
    got = np.asarray(lambda_balanced._g_direct(f, ft, t, jnp.exp(ft)))
    fn, tn = np.asarray(f)[:, None], np.asarray(t)[None, :]
    safe = np.where(fn == 0, 1.0, fn)
    want = np.where(fn == 0, tn, np.expm1(2 * safe * tn) / (2 * safe))
    rel = np.abs(got - want) / np.where(want == 0, 1.0, np.abs(want))
    assert np.max(rel[np.abs(2 * fn * tn) < 700]) < 8 * np.finfo(float).eps


def test_direct_path_agrees_and_hands_over():
    """The direct path (unscaled bracket) equals the Householder path on generic inits at moderate
    times; it declines past its horizon (t = 1e4) and on an init almost missing the top mode, where
    solve() still matches the 40-digit formula."""
    sig = jax.random.normal(jax.random.key(8), (3, 4))
    t = jnp.concatenate([jnp.zeros(1), jnp.logspace(-8, 2, 60)])
    keys = jax.random.split(jax.random.key(9), 5)
    for i, lam in enumerate(np.linspace(-2.0, 2.0, 5)):
        W1, W2 = balanced_init(keys[i], 4, 3, 3, 0.1, lam)
        direct, ok = _path(W1, W2, sig, t, "direct")
        ref, _ = _path(W1, W2, sig, t, "householder")
        assert bool(ok)
        rounding = tolerance(jnp.float64, "rounding")  # one formula, two evaluations
        for a, b in zip(direct[:3], ref[:3], strict=True):
            np.testing.assert_allclose(a, b, atol=rounding * (1 + float(jnp.max(jnp.abs(b)))))
        _, ok_late = _path(W1, W2, sig, jnp.array([1.0, 1e4]), "direct")
        assert not bool(ok_late)
    W1s, W2s, _ = _aligned(np.array([2.0, 1.0]), np.array([1e-3, 1e-2]), 0.0)
    S = jnp.diag(jnp.array([3.0, 2.0, 1.0]))
    W1a = jnp.concatenate([jnp.full((2, 1), 1e-12), W1s], axis=1)  # a 1e-12 trace of the top mode
    W2a = jnp.concatenate([jnp.full((1, 2), 1e-12), W2s], axis=0)
    dense = jnp.linspace(0.0, 60.0, 61)
    assert not bool(_path(W1a, W2a, S, dense, "direct")[1])
    ts = jnp.array([0.0, 20.0, 40.0, 60.0])  # κ(Ŝ) is small at these four: direct, still exact
    sol = jax.jit(lambda a, b: solve(a, b, S, ts))(W1a, W2a)
    for i, t_i in enumerate(ts):
        _blocks_close(sol, i, _naive_mp(W1a, W2a, S, float(t_i)), 3, atol=1e-10)


def test_vmap_chunks_fall_back_per_trajectory():
    """vmap runs chunks of up to 64 on the direct path; a chunk holding one trajectory that fails
    its check (an init almost missing the top mode) is redone trajectory by trajectory. 70
    trajectories (two chunks of 35) equal their one-at-a-time Householder values."""
    W1s, W2s, _ = _aligned(np.array([2.0, 1.0]), np.array([1e-3, 1e-2]), 0.0)
    S = jnp.diag(jnp.array([3.0, 2.0, 1.0]))
    W1a = jnp.concatenate([jnp.full((2, 1), 1e-12), W1s], axis=1)  # a 1e-12 trace of the top mode
    W2a = jnp.concatenate([jnp.full((1, 2), 1e-12), W2s], axis=0)
    keys = jax.random.split(jax.random.key(10), 70)
    W1, W2 = jax.vmap(lambda k, la: balanced_init(k, 3, 2, 3, 0.1, la))(
        keys, jnp.linspace(-1.0, 1.0, 70)
    )
    W1, W2 = W1.at[50].set(W1a), W2.at[50].set(W2a)
    t = jnp.linspace(0.0, 30.0, 50)
    assert not bool(_path(W1a, W2a, S, t, "direct")[1])
    batched = jax.jit(jax.vmap(lambda a, b: solve(a, b, S, t).network))(W1, W2)
    for i in (0, 34, 35, 50, 69):
        ref, _ = _path(W1[i], W2[i], S, t, "householder")
        np.testing.assert_allclose(batched[i], ref.network, atol=tolerance(S.dtype, "rounding"))


def test_grad_past_the_direct_horizon_and_under_vmap():
    """Past the direct path's horizon (t = 1e4) its unused result is selected away by jnp.where;
    its values and derivatives stay finite, so jax.grad (single and vmapped) equals jax.jacfwd
    and a central difference instead of leaking NaN through the where."""
    sig = jax.random.normal(jax.random.key(11), (3, 4))
    t = jnp.array([1.0, 1e3, 1e4])

    def loss_at(scale):
        W1, W2 = balanced_init(jax.random.key(12), 4, 2, 3, scale, 0.5)  # h = 2: a smaller program
        return jnp.sum(solve(W1, W2, sig, t).network)

    # jax.grad is value_and_grad without the value: one program gives the gradient and both
    # points of the difference (no separate compile of the value alone).
    value_and_grad = jax.jit(jax.value_and_grad(loss_at))
    g, j = value_and_grad(0.1)[1], jax.jit(jax.jacfwd(loss_at))(0.1)
    fd = (value_and_grad(0.1 + 1e-6)[0] - value_and_grad(0.1 - 1e-6)[0]) / 2e-6
    rounding, fd_tol = tolerance(t.dtype, "rounding"), tolerance(t.dtype, "finite_difference")
    assert np.isfinite(float(g))
    np.testing.assert_allclose(float(g), float(j), rtol=rounding)
    np.testing.assert_allclose(float(g), float(fd), rtol=fd_tol)
    gv = jax.jit(jax.vmap(jax.grad(loss_at)))(jnp.array([0.05, 0.1, 0.2]))
    np.testing.assert_allclose(float(gv[1]), float(g), rtol=rounding)


def test_lapack_and_householder_inits_give_the_same_solution():
    """The unbatched primal takes L0 from LAPACK's QR, vmap and derivatives from the elementwise
    Householder; column signs may differ (e.g. task-aligned inits, whose Q̃ has exact zeros, or the
    zero init), X may not."""
    S = jnp.diag(jnp.array([3.0, 2.0, 1.0]))
    W1a, W2a, _ = _aligned(np.array([3.0, 2.0, 1.0]), np.array([1e-3, 1e-2, 1e-1]), 0.5)
    Wr1, Wr2 = balanced_init(jax.random.key(13), 3, 3, 3, 0.1, -0.5)
    t = jnp.concatenate([jnp.zeros(1), jnp.logspace(-3, 4, 40)])
    inits = [(W1a, W2a), (Wr1, Wr2), (jnp.zeros((3, 3)), jnp.zeros((3, 3)))]
    lapack = jax.jit(lambda x, y: lambda_balanced._solve(x, y, S, t, True))  # one compile each
    householder = jax.jit(lambda x, y: lambda_balanced._solve(x, y, S, t, False))
    for W1, W2 in inits:
        a, b = lapack(W1, W2), householder(W1, W2)
        for u, v in zip(a[:3], b[:3], strict=True):
            scale = 1 + float(jnp.max(jnp.abs(v)))
            np.testing.assert_allclose(u, v, atol=tolerance(S.dtype, "rounding") * scale)


def test_q_is_one_gauge_alone_batched_and_differentiated():
    # Q(t) is defined up to a rotation of the hidden space; solve must pick the same one whether
    # it runs alone (LAPACK's QR of the init), under vmap or under jax.jvp (the elementwise
    # Householder), or the derivative of q is not the derivative of the q returned.
    # Shapes (d, h, c) = (3, 2, 2), four times and a batch of three, as in
    # test_finite_tiny_init_long_time_saddle_vmap_and_no_recompile: solve alone and under vmap
    # reuse its compiled programs.
    W1, W2 = balanced_init(jax.random.key(4), 3, 2, 2, 0.5, 0.2)
    sig = jnp.array([[2.0, 0.5, 0.0], [0.3, 1.0, 0.4]])
    t = jnp.array([0.0, 0.5, 2.0, 5.0])
    alone = solve(W1, W2, sig, t).q
    three = lambda x: jnp.stack([x, 0.5 * x, x])  # noqa: E731  (0.5·W: λ-balanced as well)
    batched = jax.vmap(lambda a, b: solve(a, b, sig, t).q)(three(W1), three(W2))[0]
    primal, _ = jax.jvp(lambda a: solve(a, W2, sig, t).q, (W1,), (jnp.zeros_like(W1),))
    np.testing.assert_allclose(batched, alone, rtol=0, atol=1e-12)
    np.testing.assert_allclose(primal, alone, rtol=0, atol=1e-12)
