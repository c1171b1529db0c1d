"""Feature tracking against analytic constructions, brute force and a direct T Alg. 1."""

import itertools

import numpy as np
import pytest

from metrics import (
    eigenfunction_overlap,
    feature_decomposition,
    feature_trajectories,
    match_features,
    track_features,
)


def _orthonormal_functions(rng, n, p):
    """E (n, p), EᵀE = n I (orthonormal under the empirical measure)."""
    q, _ = np.linalg.qr(rng.normal(size=(n, p)))
    return np.sqrt(n) * q


def _features(e, rho, rng):
    """Φ = E diag(√ρ) Oᵀ for a random rotation O: eigenfunctions E, intensities ρ (T Eq. 1.27)."""
    o, _ = np.linalg.qr(rng.normal(size=(len(rho), len(rho))))
    return (e * np.sqrt(rho)) @ o.T


def _naive_overlap(phi_a, phi_b):
    """T Alg. 1 literally, in float64: eigen-decompose ϕϕᵀ/n (p×p), e_k = √n u_kᵀΦ/s_k, then
    the squared cosines of every pair under the empirical measure."""

    def eig(phi):
        phi = np.asarray(phi, np.float64)
        n = len(phi)
        lam, u = np.linalg.eigh(phi.T @ phi / n)
        lam, u = lam[::-1], u[:, ::-1]
        return phi @ u / np.sqrt(lam)  # e_k(x_i) = u_kᵀΦ(x_i)/√λ_k, λ_k = ρ_k = s_k²/n

    ea, eb = eig(phi_a), eig(phi_b)
    g = ea.T @ eb
    return g**2 / np.outer(np.sum(ea**2, 0), np.sum(eb**2, 0))


def test_overlap_matches_naive_alg1():
    rng = np.random.default_rng(0)
    n, p = 60, 5
    a, b = rng.normal(size=(n, p)), rng.normal(size=(n, p)) + 0.5
    got = np.asarray(eigenfunction_overlap(a, b))
    np.testing.assert_allclose(got, _naive_overlap(a, b), atol=1e-10)
    assert np.all(got.sum(0) <= 1 + 1e-12) and np.all(got.sum(1) <= 1 + 1e-12)


def test_overlap_of_rotated_eigenfunctions_is_cos_squared():
    """b's eigenfunctions are a's with e_2, e_3 rotated by θ in their plane: O = cos²θ, sin²θ."""
    rng = np.random.default_rng(1)
    n, theta = 200, 0.3
    e = _orthonormal_functions(rng, n, 4)
    rot = e.copy()
    rot[:, 1] = np.cos(theta) * e[:, 1] + np.sin(theta) * e[:, 2]
    rot[:, 2] = -np.sin(theta) * e[:, 1] + np.cos(theta) * e[:, 2]
    rho = np.array([8.0, 4.0, 2.0, 1.0])
    o = np.asarray(eigenfunction_overlap(_features(e, rho, rng), _features(rot, rho, rng)))
    want = np.eye(4)
    want[1:3, 1:3] = [
        [np.cos(theta) ** 2, np.sin(theta) ** 2],
        [np.sin(theta) ** 2, np.cos(theta) ** 2],
    ]
    np.testing.assert_allclose(o, want, atol=1e-12)


@pytest.mark.parametrize("dtype, atol", [(np.float64, 1e-10), (np.float32, 2e-5)])
def test_overlap_ill_conditioned_spectrum(dtype, atol):
    """ρ graded over 12 decades (s over 6): a Gram route loses the small modes in float32 (ε·s₁²);
    the QR route keeps every overlap to ≈ ε. Reference: the analytic identity overlap."""
    rng = np.random.default_rng(2)
    n, p = 300, 6
    e = _orthonormal_functions(rng, n, p)
    rho = 10.0 ** -np.linspace(0, 12, p) if dtype == np.float64 else 10.0 ** -np.linspace(0, 8, p)
    a = _features(e, rho, rng).astype(dtype)
    b = _features(e, rho, rng).astype(dtype)  # same eigenfunctions, another rotation of Φ
    o = np.asarray(eigenfunction_overlap(a, b))
    assert o.dtype == dtype
    np.testing.assert_allclose(o, np.eye(p), atol=atol)


def test_overlap_null_modes_are_zero():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(50, 4))
    a[:, 3] = a[:, 0] - a[:, 1]  # rank 3
    o = np.asarray(eigenfunction_overlap(a, a))
    np.testing.assert_allclose(o[3], 0.0, atol=1e-20)
    np.testing.assert_allclose(o[:3, :3], np.eye(3), atol=1e-12)


def test_overlap_rejects_bad_input():
    rng = np.random.default_rng(4)
    with pytest.raises(ValueError, match="same number of rows"):
        eigenfunction_overlap(rng.normal(size=(10, 3)), rng.normal(size=(11, 3)))
    with pytest.raises(ValueError, match="n ≥ p"):
        eigenfunction_overlap(rng.normal(size=(3, 5)), rng.normal(size=(3, 2)))
    with pytest.raises(ValueError, match="all zero"):
        eigenfunction_overlap(np.zeros((10, 2)), rng.normal(size=(10, 2)))
    with pytest.raises(ValueError, match="NaN"):
        eigenfunction_overlap(np.full((10, 2), np.nan), rng.normal(size=(10, 2)))


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (6, 6)])
def test_match_is_the_best_assignment_by_brute_force(shape):
    rng = np.random.default_rng(sum(shape))
    o = rng.random(shape)
    pi = match_features(o)
    assert len(set(pi.tolist())) == shape[0]
    best = max(
        sum(o[k, c] for k, c in enumerate(cols))
        for cols in itertools.permutations(range(shape[1]), shape[0])
    )
    assert np.isclose(o[np.arange(shape[0]), pi].sum(), best, rtol=0, atol=1e-12)


def test_match_rejects_bad_input():
    with pytest.raises(ValueError, match="p_a ≤ p_b"):
        match_features(np.ones((3, 2)))
    with pytest.raises(ValueError, match="NaN"):
        match_features(np.full((2, 2), np.nan))


def test_tracks_follow_features_through_an_intensity_crossing():
    """Two eigenfunctions trade places in intensity order: each track keeps its function."""
    rng = np.random.default_rng(5)
    n, p = 120, 4
    e = _orthonormal_functions(rng, n, p)
    # ρ of e_0 falls, ρ of e_1 rises: the order (0, 1) at t = 0 becomes (1, 0) at t = 2
    rhos = [
        np.array([5.0, 3.0, 1.0, 0.5]),
        np.array([4.0, 3.9, 1.0, 0.5]),
        np.array([2.0, 6.0, 1.0, 0.5]),
    ]
    tracks = track_features([_features(e, r, rng) for r in rhos])
    # anchor = last: feature 0 is e_1 (the most intense at the end), position 1 at t = 0
    np.testing.assert_array_equal(tracks.rank, [[1, 0, 2, 3], [1, 0, 2, 3], [0, 1, 2, 3]])
    np.testing.assert_allclose(tracks.overlap, 1.0, atol=1e-10)
    first = track_features([_features(e, r, rng) for r in rhos], anchor=0)
    np.testing.assert_array_equal(first.rank, [[0, 1, 2, 3], [0, 1, 2, 3], [1, 0, 2, 3]])
    rho_sorted = np.stack([np.sort(r)[::-1] for r in rhos])
    np.testing.assert_allclose(first.follow(rho_sorted)[:, 0], [5.0, 4.0, 2.0])


def test_track_rejects_bad_input():
    rng = np.random.default_rng(6)
    with pytest.raises(ValueError, match="at least one"):
        track_features([])
    with pytest.raises(ValueError, match="one shape"):
        track_features([rng.normal(size=(10, 2)), rng.normal(size=(10, 3))])
    with pytest.raises(ValueError, match="anchor"):
        track_features([rng.normal(size=(10, 2))], anchor=1)
    with pytest.raises(ValueError, match="shape"):
        track_features([rng.normal(size=(10, 2))]).follow(np.ones((2, 2)))


def test_trajectories_are_the_decompositions_along_the_tracks():
    """Each column equals the per-time decomposition's value at the tracked position, and the
    quality of an eigenfunction that is a target component is 1/dim H* (analytic)."""
    rng = np.random.default_rng(7)
    n, p = 150, 4
    e = _orthonormal_functions(rng, n, p)
    y = e[:, [0]]  # f* = e_0: Q*_k = δ_k0 for the eigenfunction e_0 (dim H* = 1)
    rhos = [np.array([1.0, 3.0, 2.0, 0.5]), np.array([4.0, 3.0, 2.0, 0.5])]
    phis = [_features(e, r, rng) for r in rhos]
    outs = [ph @ rng.normal(size=(p, 2)) for ph in phis]
    traj = feature_trajectories(phis, phis, outs, y)
    np.testing.assert_allclose(traj.quality[:, 0], 1.0, atol=1e-10)  # e_0 tracked from t = 1
    np.testing.assert_allclose(traj.rho[:, 0], [1.0, 4.0], rtol=1e-10)
    for t in range(2):
        dec = feature_decomposition(phis[t], phis[t], outs[t], y)
        np.testing.assert_allclose(
            traj.utilization[t], np.asarray(dec.utilization)[traj.tracks.rank[t]], atol=1e-12
        )
    with pytest.raises(ValueError, match="one entry per log point"):
        feature_trajectories(phis, phis[:1], outs, y)
