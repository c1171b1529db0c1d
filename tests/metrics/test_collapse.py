"""NC1–NC4 on collapsed / non-collapsed features and the MP-operator propositions (T §2.5, App. D)."""

import numpy as np
import pytest

from metrics import dlr, neural_collapse


def _mp_features(rng, per_class, c, p, a1, a2):
    """Features realising T_MP = a₁|1⟩⟨1| + a₂P_Ĥ on the empirical measure of a balanced sample."""
    labels = np.repeat(np.arange(c), per_class)
    y = np.eye(c)[labels]
    n = len(labels)
    basis, _ = np.linalg.qr(np.concatenate([np.ones((n, 1)), y[:, :-1]], axis=1))
    e = np.sqrt(n) * basis * np.sign(basis[0, 0])  # e[:, 0] = 1, orthonormal, spans Ĥ ∋ 1
    cols = np.concatenate([np.sqrt(a1 + a2) * e[:, :1], np.sqrt(a2) * e[:, 1:]], axis=1)
    o, _ = np.linalg.qr(rng.normal(size=(p, p)))
    phi = np.concatenate([cols, np.zeros((n, p - c))], axis=1) @ o.T
    return phi, labels, y


def test_mp_operator_gives_nc1_zero_and_simplex_etf():
    rng = np.random.default_rng(0)
    c, a1, a2 = 4, 3.0, 0.7
    phi, labels, y = _mp_features(rng, 25, c, 9, a1, a2)
    n = len(labels)
    k = phi @ phi.T / n  # empirical operator T[g] = K g, ⟨g|h⟩ = gᵀh/n
    ones = np.ones(n)
    # Prop 2.5.3: ⟨C f_i | T[C f_j − 1]⟩ = a₂(Cδ_ij − 1),  ⟨1 | T[C f_j − 1]⟩ = 0
    lhs = (c * y).T @ k @ (c * y - ones[:, None]) / n
    np.testing.assert_allclose(lhs, a2 * (c * np.eye(c) - 1), atol=1e-12)
    np.testing.assert_allclose(ones @ k @ (c * y - ones[:, None]) / n, 0.0, atol=1e-12)
    # Eq. D.23: (μ_i − μ_G)ᵀ(μ_j − μ_G) = C a₂(δ_ij − 1/C)
    means = y.T @ phi / y.sum(0)[:, None]
    mbar = means - means.mean(0)
    np.testing.assert_allclose(mbar @ mbar.T, c * a2 * (np.eye(c) - 1 / c), atol=1e-12)
    res = neural_collapse(phi, labels, head_weight=mbar.T, outputs=phi @ mbar.T)
    assert float(res.nc1) == pytest.approx(0.0, abs=1e-20)  # Prop 2.5.1
    assert float(res.nc2) == pytest.approx(0.0, abs=1e-12)  # Prop 2.5.2
    assert float(res.nc3) == pytest.approx(0.0, abs=1e-12)
    assert float(res.nc4) == 0.0
    assert int(res.sigma_b_rank) == c - 1
    assert float(dlr(phi, y)) == pytest.approx(0.0, abs=1e-12)


def _naive_nc(phi, labels, w, logits, global_mean="class_means"):
    """NC1–NC4 by their definitions; μ_G of T Eq. D.3 or Papyan et al.'s sample mean."""
    c = labels.max() + 1
    n = len(labels)
    means = np.stack([phi[labels == i].mean(0) for i in range(c)])
    mu_g = means.mean(0) if global_mean == "class_means" else phi.mean(0)
    sw = sum(np.outer(phi[j] - means[labels[j]], phi[j] - means[labels[j]]) for j in range(n)) / n
    sb = sum(np.outer(m - mu_g, m - mu_g) for m in means) / c
    nc1 = np.trace(sw @ np.linalg.pinv(sb, rcond=1e-10, hermitian=True)) / c
    cos = np.array([[(a - mu_g) @ (b - mu_g) for b in means] for a in means])
    etf = (np.eye(c) - 1 / c) / np.sqrt(c - 1)
    nc2 = np.linalg.norm(cos / np.linalg.norm(cos) - etf)
    nc3 = np.mean(
        [
            np.sum((w[:, i] / np.linalg.norm(w[:, i]) - (m - mu_g) / np.linalg.norm(m - mu_g)) ** 2)
            for i, m in enumerate(means)
        ]
    )
    ncc = [np.argmin([np.linalg.norm(x - m) for m in means]) for x in phi]
    nc4 = np.mean(np.argmax(logits, 1) != np.array(ncc))
    return nc1, nc2, nc3, nc4


def test_noisy_unbalanced_features_match_naive_definitions():
    rng = np.random.default_rng(1)
    c, p = 5, 12
    labels = rng.integers(0, c, 300)
    centres = rng.normal(size=(c, p)) * 2
    phi = centres[labels] + rng.normal(size=(300, p)) + 1.0
    w = rng.normal(size=(p, c))
    logits = phi @ w
    res = neural_collapse(phi, labels, head_weight=w, outputs=logits)
    want = _naive_nc(phi, labels, w, logits)
    for got, ref in zip((res.nc1, res.nc2, res.nc3, res.nc4), want, strict=True):
        assert float(got) == pytest.approx(ref, rel=1e-10, abs=1e-12)
    assert float(res.nc1) > 0.05 and float(res.nc4) > 0
    # one-hot labels give the same; tighter clusters collapse further
    assert float(neural_collapse(phi, np.eye(c)[labels]).nc1) == pytest.approx(float(res.nc1))
    tight = centres[labels] + 0.01 * rng.normal(size=(300, p))
    assert float(neural_collapse(tight, labels).nc1) < 1e-3 * float(res.nc1)


def test_papyan_sample_global_mean_on_unbalanced_classes():
    rng = np.random.default_rng(3)
    c, p = 4, 10
    labels = np.repeat(np.arange(c), [200, 50, 20, 10])  # strongly unbalanced
    centres = rng.normal(size=(c, p)) * 3
    phi = centres[labels] + 0.5 * rng.normal(size=(len(labels), p)) + 2.0
    w = rng.normal(size=(p, c))
    for mean in ("class_means", "samples"):
        res = neural_collapse(phi, labels, head_weight=w, outputs=phi @ w, global_mean=mean)
        want = _naive_nc(phi, labels, w, phi @ w, global_mean=mean)
        for got, ref in zip((res.nc1, res.nc2, res.nc3, res.nc4), want, strict=True):
            assert float(got) == pytest.approx(ref, rel=1e-10, abs=1e-12)
    # collapsed onto a simplex ETF with unbalanced classes: NC2 = 0 with the class-mean centre
    # (T Eq. D.3), > 0 with the sample mean (Papyan et al.)
    etf = np.linalg.qr(rng.normal(size=(p, c)))[0] @ (np.eye(c) - 1 / c)
    collapsed = etf.T[labels] + 1e-9 * rng.normal(size=(len(labels), p))
    assert float(neural_collapse(collapsed, labels).nc2) < 1e-6
    assert float(neural_collapse(collapsed, labels, global_mean="samples").nc2) > 0.1
    with pytest.raises(ValueError, match="global_mean must be"):
        neural_collapse(phi, labels, global_mean="mean")


def test_bad_input():
    phi = np.random.default_rng(2).normal(size=(10, 3))
    with pytest.raises(ValueError, match="at least 2 classes"):
        neural_collapse(phi, np.zeros(10, int))
    with pytest.raises(ValueError, match="one-hot"):
        neural_collapse(phi, np.full((10, 2), 0.5))
    with pytest.raises(ValueError, match="no samples"):
        neural_collapse(phi, np.arange(10) % 2, num_classes=3)
    with pytest.raises(ValueError, match="integer"):
        neural_collapse(phi, np.arange(10) % 2 * 1.0)
    with pytest.raises(ValueError, match=r"head_weight must have shape \(p, C\)"):
        neural_collapse(phi, np.arange(10) % 2, head_weight=np.ones((2, 3)))
    with pytest.raises(ValueError, match="shape"):
        neural_collapse(phi, np.arange(9) % 2)
    labels = np.arange(10) % 2
    with pytest.raises(ValueError, match="constant over samples"):
        neural_collapse(np.full((10, 3), 2.5), labels)
    with pytest.raises(ValueError, match="constant over samples"):
        neural_collapse(np.zeros((10, 3)), labels)
    with pytest.raises(ValueError, match="identical class means"):
        neural_collapse(np.concatenate([phi[:5], phi[:5]]), np.repeat([0, 1], 5))
    bad = phi.copy()
    bad[2, 2] = np.nan
    with pytest.raises(ValueError, match="features contains NaN"):
        neural_collapse(bad, labels)
    with pytest.raises(ValueError, match="same number of rows"):
        neural_collapse(phi, labels, outputs=np.ones((9, 2)))
    with pytest.raises(ValueError, match="all-zero column"):
        neural_collapse(phi, labels, head_weight=np.zeros((3, 2)))
