"""Feature decomposition against analytic constructions and a direct implementation of T Alg. 1."""

import jax.numpy as jnp
import numpy as np
import pytest

from metrics.decomposition import (
    effective_dimension,
    feature_decomposition,
    feature_decomposition_streaming,
    nystrom,
)


def _orthonormal_functions(rng, n, p):
    """E (n, p), EᵀE = n I (orthonormal under the empirical measure), first column constant."""
    a = np.concatenate([np.ones((n, 1)), rng.normal(size=(n, p - 1))], axis=1)
    q, r = np.linalg.qr(a)
    return np.sqrt(n) * q * np.sign(np.diag(r))


def test_constructed_features_have_analytic_metrics():
    rng = np.random.default_rng(0)
    n, p = 400, 8
    e = _orthonormal_functions(rng, n, p)
    rho = np.array([9.0, 4.0, 3.0, 2.0, 1.0, 0.5, 0.25, 0.1])
    o, _ = np.linalg.qr(rng.normal(size=(p, p)))
    phi = e * np.sqrt(rho) @ o.T  # Φ_i = Σ_j O_ij √ρ_j e_j  (T Eq. 1.27)
    tgt_modes, out_modes = [0, 2, 5], [1, 2]
    y = e[:, tgt_modes] @ rng.normal(size=(3, 3))
    f = e[:, out_modes] @ rng.normal(size=(2, 4))  # rank 2 outputs, C = 4
    res = feature_decomposition(phi, phi, f, y)
    np.testing.assert_allclose(res.rho, rho, rtol=1e-12)
    np.testing.assert_allclose(res.relative_intensity, rho / 9.0, rtol=1e-12)
    want_q = np.isin(np.arange(p), tgt_modes) / 3.0
    want_u = np.isin(np.arange(p), out_modes) / 2.0
    np.testing.assert_allclose(res.quality, want_q, atol=1e-12)
    np.testing.assert_allclose(res.utilization, want_u, atol=1e-12)
    np.testing.assert_allclose(res.cum_quality, np.cumsum(want_q), atol=1e-12)
    assert int(res.dim_learned) == 2 and int(res.dim_target) == 3
    w = rho / rho.sum()
    assert float(res.d_eff_rho) == pytest.approx(np.exp(-np.sum(w * np.log(w))), rel=1e-12)
    w2 = rho[1:] / rho[1:].sum()
    assert float(res.d_eff_rho_adjusted) == pytest.approx(
        1 + np.exp(-np.sum(w2 * np.log(w2))), rel=1e-12
    )
    assert float(res.d_eff_utilization) == pytest.approx(2.0, rel=1e-10)
    assert float(res.d_eff_quality) == pytest.approx(3.0, rel=1e-10)
    assert float(res.e1_constant_overlap) == pytest.approx(1.0, abs=1e-12)
    # D_LR closed form for these features: 1 − Σ_{k∈T} ρ_k / (√(Σ_{k≥2} ρ_k²) √|T|)
    want_dlr = 1 - rho[out_modes].sum() / (np.sqrt(np.sum(rho[1:] ** 2)) * np.sqrt(2))
    assert float(res.dlr) == pytest.approx(want_dlr, abs=1e-12)
    assert not bool(res.is_mf)


def test_mp_operator_features_are_in_the_mf_regime():
    rng = np.random.default_rng(1)
    n, c = 600, 5
    e = _orthonormal_functions(rng, n, c + 3)
    f = e[:, 1 : c + 1] @ rng.normal(size=(c, c))
    phi = np.concatenate([4.0 * e[:, :1], 1.5 * e[:, 1 : c + 1]], axis=1)  # a₁|1⟩⟨1| + a₂P_Ĥ
    res = feature_decomposition(phi, phi, f)
    assert float(res.dlr) == pytest.approx(0.0, abs=1e-12) and bool(res.is_mf)
    assert float(res.d_eff_rho_adjusted) == pytest.approx(1 + c, rel=1e-10)
    assert res.quality is None and res.cum_quality is None


def test_nystrom_identities_of_the_linear_model():
    rng = np.random.default_rng(2)
    n, p = 300, 10
    phi = rng.normal(size=(n, p)) @ rng.normal(size=(p, p)) + 1.0
    ny = nystrom(phi)
    e = phi @ np.asarray(ny.weights)
    np.testing.assert_allclose(e.T @ e / n, np.eye(p), atol=1e-10)  # ⟨e_k|e_l⟩ = δ_kl (Eq. 1.15)
    proj = phi.T @ e / n  # ⟨Φ_j|e_k⟩
    np.testing.assert_allclose(np.sum(proj**2, axis=0), ny.rho, rtol=1e-10)  # Eq. 1.29
    o = proj / np.sqrt(np.asarray(ny.rho))  # O_ij = ⟨Φ_i|e_j⟩/√ρ_j is orthogonal (Eq. 1.27)
    np.testing.assert_allclose(o @ o.T, np.eye(p), atol=1e-10)
    np.testing.assert_allclose(e * np.sqrt(np.asarray(ny.rho)) @ o.T, phi, atol=1e-10)
    s = np.linalg.svd(phi.T, compute_uv=False)  # independent SVD of ϕ (Alg. 1)
    np.testing.assert_allclose(ny.rho, s**2 / n, rtol=1e-10)


def _direct_alg1(phi_fit, phi_ev, f, y):
    """T Alg. 1 + Eq. 1.34 written out with an SVD of ϕ and explicit projections."""
    n = phi_fit.shape[0]
    u, s, _ = np.linalg.svd(phi_fit.T, full_matrices=False)
    e = np.sqrt(n) * phi_ev @ u / s
    out = []
    for x in (f, y):
        qx, sx, _ = np.linalg.svd(x, full_matrices=False)
        qx = qx[:, sx > 1e-9 * sx[0]]
        out.append(np.sum((qx.T @ e) ** 2, axis=0) / np.sum(e**2, axis=0) / qx.shape[1])
    return s**2 / n, out[0], out[1], abs(np.mean(e[:, 0])) / np.sqrt(np.mean(e[:, 0] ** 2))


def test_separate_eval_sample_matches_direct_algorithm_and_streaming():
    rng = np.random.default_rng(3)
    n, m, p, c = 500, 300, 12, 4
    mix = rng.normal(size=(p, p))
    labels = rng.integers(0, c, n + m)
    y_all = np.eye(c)[labels]
    phi_all = np.maximum(rng.normal(size=(n + m, p)) @ mix + y_all @ rng.normal(size=(c, p)), 0)
    f_all = phi_all @ rng.normal(size=(p, c)) + 0.5
    phi_fit, phi_ev, f, y = phi_all[:n], phi_all[n:], f_all[n:], y_all[n:]
    res = feature_decomposition(phi_fit, phi_ev, f, y)
    rho, util, qual, e1 = _direct_alg1(phi_fit, phi_ev, f, y)
    np.testing.assert_allclose(res.rho, rho, rtol=1e-9)
    np.testing.assert_allclose(res.utilization, util, atol=1e-10)
    np.testing.assert_allclose(res.quality, qual, atol=1e-10)
    assert float(res.e1_constant_overlap) == pytest.approx(e1, abs=1e-10)
    stream = feature_decomposition_streaming(
        (phi_fit[i : i + 100] for i in range(0, n, 100)),
        ((phi_ev[i : i + 100], f[i : i + 100], y[i : i + 100]) for i in range(0, m, 100)),
        n_outputs=c,
    )
    for a, b in zip(stream, res, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-8, atol=1e-10)
    res32 = feature_decomposition(*(np.float32(a) for a in (phi_fit, phi_ev, f, y)))
    assert res32.cum_utilization.dtype == jnp.float32
    np.testing.assert_allclose(res32.cum_utilization, res.cum_utilization, atol=2e-4)
    np.testing.assert_allclose(res32.rho, res.rho, rtol=1e-3, atol=1e-5 * float(res.rho[0]))
    assert float(res32.dlr) == pytest.approx(float(res.dlr), abs=5e-5)


def test_cumulative_endpoints():
    rng = np.random.default_rng(4)
    n, p, c, classes = 400, 8, 3, 4  # q = C + C* as in the first test: compiled once
    labels = np.arange(n) % classes  # balanced: one-hot components orthogonal, equal norm
    y = np.eye(classes)[labels] * 3.0
    phi = np.tanh(rng.normal(size=(n, p)) + y @ rng.normal(size=(classes, p)) * 0.3)
    f = phi @ rng.normal(size=(p, c))  # Ĥ ⊂ span Φ
    res = feature_decomposition(phi, phi, f, y)
    assert float(res.cum_utilization[-1]) == pytest.approx(1.0, abs=1e-12)  # Π̂(p) = 1
    p_phi = phi @ np.linalg.pinv(phi)
    want = np.sum((p_phi @ y) ** 2) / np.sum(y**2)  # ‖P_Φ f*‖²/‖f*‖²
    assert 0.1 < want < 0.99
    assert float(res.cum_quality[-1]) == pytest.approx(want, abs=1e-12)
    assert np.all(np.diff(np.asarray(res.cum_quality)) >= -1e-15)
    # the same array for both samples reuses one QR of Φ: same answer as a copy
    copy = feature_decomposition(phi, phi.copy(), f, y)
    np.testing.assert_allclose(copy.cum_utilization, res.cum_utilization, atol=1e-13)
    np.testing.assert_allclose(copy.rho, res.rho, rtol=1e-13)


def test_effective_dimension():
    assert float(effective_dimension(jnp.array([2.0, 2.0, 2.0, 0.0]))) == pytest.approx(3.0)
    assert float(effective_dimension(jnp.array([1.0, 0.0]))) == pytest.approx(1.0)
    v = np.array([0.5, 0.3, 0.2])
    assert float(effective_dimension(v)) == pytest.approx(np.exp(-np.sum(v * np.log(v))))


def test_bad_input():
    rng = np.random.default_rng(5)
    # shapes of test_mp_operator_features_are_in_the_mf_regime and of the first test, so the
    # error paths that run the jitted decomposition reuse their compilations
    phi, f = rng.normal(size=(600, 6)), rng.normal(size=(600, 5))
    with pytest.raises(ValueError, match="n ≥ p"):
        feature_decomposition(phi[:5], phi, f)
    with pytest.raises(ValueError, match="n ≥ p"):
        nystrom(phi[:5])
    with pytest.raises(ValueError, match="same width p"):
        feature_decomposition(phi, phi[:, :5], f)
    with pytest.raises(ValueError, match="same number of rows"):
        feature_decomposition(phi, phi, f[:40])
    with pytest.raises(ValueError, match="same number of rows"):
        feature_decomposition(phi, phi, f, np.eye(2)[:40])
    with pytest.raises(ValueError, match="C ≤ m"):
        feature_decomposition(phi, phi[:4], f[:4])
    bad = phi.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        feature_decomposition(bad, phi, f)
    with pytest.raises(ValueError, match="NaN"):
        feature_decomposition(phi, phi, f, np.full((600, 2), np.inf))
    with pytest.raises(ValueError, match="all zero"):
        feature_decomposition(np.zeros((600, 6)), phi, f)
    with pytest.raises(ValueError, match="constant over samples"):
        feature_decomposition(phi, np.ones((600, 6)), f)
    with pytest.raises(ValueError, match="zero numerical rank"):
        feature_decomposition(phi, phi, np.ones((600, 5)))
    phi8 = rng.normal(size=(400, 8))
    with pytest.raises(ValueError, match="targets_eval are all zero"):
        feature_decomposition(phi8, phi8, phi8[:, :4], np.zeros((400, 3)))
    with pytest.raises(ValueError, match="positive entry"):
        effective_dimension(np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        effective_dimension(np.array([1.0, np.nan]))


def _post_relu(seed, n=600, p=512, c=10):
    """Two-layer ReLU features of labelled Gaussian inputs: graded spectrum (ρ_p/ρ_1 ~ 1e-7)."""
    rng = np.random.default_rng(seed)
    y = np.eye(c)[rng.integers(0, c, n)]
    x = rng.normal(size=(n, 32))
    x[:, :c] += 2 * y
    h = np.maximum(x @ rng.normal(size=(32, 256)) / np.sqrt(32), 0)
    phi = np.maximum(h @ rng.normal(size=(256, p)) / 16, 0)
    return phi, phi @ rng.normal(size=(p, c)) / np.sqrt(p), y


def test_float32_keeps_every_resolvable_mode_of_post_relu_features():
    phi, f, y = (np.float32(a) for a in _post_relu(6))
    res = feature_decomposition(phi, phi, f, y)
    rho, util, qual, _ = _direct_alg1(*(np.float64(a) for a in (phi, phi, f, y)))
    assert rho[-1] / rho[0] < 1e-5  # graded: the old 10·p·ε cutoff (6e-4·ρ₁) dropped modes here
    assert res.cum_utilization.dtype == jnp.float32
    assert float(res.cum_utilization[-1]) == pytest.approx(1.0, abs=1e-5)  # Π̂(p) = 1
    np.testing.assert_allclose(res.cum_utilization, np.cumsum(util), atol=1e-2)
    np.testing.assert_allclose(res.cum_quality, np.cumsum(qual), atol=1e-2)
    np.testing.assert_allclose(res.rho, rho, rtol=1e-2)
    w = lambda v: np.exp(-np.sum(v / v.sum() * np.log(v / v.sum())))  # D_eff, T Eq. 1.16
    assert float(res.d_eff_utilization) == pytest.approx(w(util), rel=1e-2)
    assert float(res.d_eff_quality) == pytest.approx(w(qual), rel=1e-2)
    assert float(res.d_eff_rho) == pytest.approx(w(rho), rel=1e-2)


def test_adjusted_effective_dimension_edge_cases():
    rng = np.random.default_rng(7)
    n = 50
    f = rng.normal(size=(n, 2))
    # one live unit plus dead ones: ρ₂ … ρ_p = 0, so D_eff(ρ) adjusted = 1 (not NaN)
    live = rng.normal(size=(n, 1)) + 2.0
    dead = np.concatenate([live, np.zeros((n, 3))], axis=1)
    res = feature_decomposition(dead, dead, live @ rng.normal(size=(1, 2)) + f * 0)
    assert float(res.d_eff_rho_adjusted) == pytest.approx(1.0)
    # p = 1: the adjusted dimension is 1, never more than p
    res1 = feature_decomposition(live, live, live * 2.0)
    assert float(res1.d_eff_rho_adjusted) == 1.0
