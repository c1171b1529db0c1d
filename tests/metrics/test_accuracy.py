"""Accuracy of every D_LR path on graded output spectra against an independent LAPACK reference.

Targets: float64 ≤ 1e-9 absolute for softmax outputs with C ∈ {2, 10, 100, 1000}, graded
linear heads up to condition number 1e12, nearly collapsed features, p > n and constant feature
columns; float32 within 1e-3 of float64 computed on the same float32 numbers. The reference builds
the n×n centred kernel and the projection onto a basis of the centred outputs from NumPy's LAPACK
SVD, with the numerical rank decided by the documented rule on LAPACK singular values.
"""

import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from metrics import dlr_from_moments, dlr_streaming, dlr_with_rank, moments

F64_TOL = 1e-9  # target, float64
F32_TOL = 1e-3  # target, float32 vs float64 on the same float32 data


def lapack_rank(f, dtype=np.float64):
    """Rank rule of metrics.dlr on LAPACK singular values: columns equilibrated by powers of two,
    s_k > 2ε(√n + √C)·√(s₁² + n‖Dν‖²)."""
    f = np.asarray(f, np.float64)
    n, c = f.shape
    norms = np.linalg.norm(f, axis=0)
    d = np.where(norms > 0, np.ldexp(1.0, -np.frexp(norms)[1]), 1.0)
    nu = f.mean(0) * d
    s = np.linalg.svd((f - f.mean(0)) * d, compute_uv=False)
    tol = 2 * np.finfo(dtype).eps * (np.sqrt(n) + np.sqrt(c))
    return int(np.sum(s > tol * np.sqrt(s[0] ** 2 + n * nu @ nu)))


def naive_dlr(phi, f, rank):
    """1 − ⟨HΦΦᵀH, P⟩/(‖HΦΦᵀH‖‖P‖), P = UᵣUᵣᵀ from LAPACK's SVD of HF (T Eq. 2.8–2.9)."""
    phi, f = np.asarray(phi, np.float64), np.asarray(f, np.float64)
    n = phi.shape[0]
    h = np.eye(n) - 1.0 / n
    k = h @ phi @ phi.T @ h
    u = np.linalg.svd(h @ f, full_matrices=False)[0][:, :rank]
    proj = u @ u.T
    return 1.0 - np.sum(k * proj) / (np.linalg.norm(k) * np.linalg.norm(proj))


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _relu(rng, n, p):
    return np.maximum(rng.normal(size=(n, p)), 0.0)


def _case(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # the same data in every process
    if name.startswith("softmax"):
        c = int(name[7:])
        n, p = (1200, 100) if c == 1000 else (300, 150)
        phi = _relu(rng, n, p)  # confident softmax: logits of scale ~10, graded spectrum
        return phi, _softmax(10.0 * phi @ rng.normal(size=(p, c)) / np.sqrt(p))
    if name.startswith("head"):
        kappa = float(name[4:])  # linear head W = U diag(1 … 1/κ), cond(W) = κ
        phi = _relu(rng, 300, 150)
        u = np.linalg.qr(rng.normal(size=(150, 20)))[0]
        return phi, phi @ (u * np.logspace(0, -np.log10(kappa), 20))
    if name == "collapsed":  # features collapsed onto 10 class means up to 1e-4 noise
        y = np.eye(10)[rng.integers(0, 10, 300)]
        phi = y @ rng.normal(size=(10, 150)) + 1e-4 * rng.normal(size=(300, 150))
        return phi, phi @ rng.normal(size=(150, 10))
    if name == "p>n":
        phi = rng.normal(size=(100, 300))
        return phi, np.tanh(phi @ rng.normal(size=(300, 10)) / 10)
    if name == "constant_columns":  # dead units and a bias-like unit
        phi = rng.normal(size=(300, 150))
        phi[:, 5], phi[:, 7], phi[:, 9] = 0.0, 3.0, -2.0
        return phi, np.tanh(phi @ rng.normal(size=(150, 10)) / 8)
    raise KeyError(name)


CASES = [
    "softmax2",
    "softmax10",
    "softmax100",
    pytest.param("softmax1000", marks=pytest.mark.slow),
    "head1e6",
    "head1e12",
    "collapsed",
    "p>n",
    "constant_columns",
]


def _three_paths(phi, f, batch):
    """D_LR from arrays, from moments, from a stream of batches."""
    res = dlr_with_rank(phi, f)
    from_moments = dlr_from_moments(moments(phi, f))
    stream = dlr_streaming(
        (phi[i : i + batch], f[i : i + batch]) for i in range(0, len(phi), batch)
    )
    return res, float(from_moments), float(stream)


@pytest.mark.parametrize("name", CASES)
def test_float64_every_path_matches_lapack_reference(name):
    phi, f = _case(name)
    res, from_moments, stream = _three_paths(phi, f, batch=100)  # shapes shared across cases
    r = lapack_rank(f)
    assert int(res.rank) == r
    ref = naive_dlr(phi, f, r)
    assert abs(float(res.value) - ref) <= F64_TOL
    assert abs(from_moments - ref) <= F64_TOL
    assert abs(stream - ref) <= F64_TOL


# float32: the graded cases in the default suite, the rest with `pytest -m slow` (compile time)
F32_CASES = [
    pytest.param(c, marks=pytest.mark.slow)
    if c in ("softmax2", "head1e6", "p>n", "constant_columns")
    else c
    for c in CASES
]


@pytest.mark.parametrize("name", F32_CASES)
def test_float32_within_1e3_of_float64_on_the_same_data(name):
    phi, f = (np.float32(a) for a in _case(name))
    # the float32 numbers carry float32 rounding (e.g. softmax rows sum to 1 ± ε₃₂), so the float64
    # reference decides the rank with float32's tolerance, as the rtol docstring advises
    n, c = f.shape
    rtol32 = 2 * float(np.finfo(np.float32).eps) * (np.sqrt(n) + np.sqrt(c))
    ref = float(dlr_with_rank(np.float64(phi), np.float64(f), rtol=rtol32).value)
    res, from_moments, stream = _three_paths(phi, f, batch=100)
    assert res.value.dtype == jnp.float32
    assert abs(float(res.value) - ref) <= F32_TOL
    assert abs(from_moments - ref) <= F32_TOL
    assert abs(stream - ref) <= F32_TOL


def test_rank_depends_on_dtype_and_size_not_on_c_times_100_eps():
    """A genuine output direction at 3.5e-5·s₁ in float32, C = 100, is kept (the old default
    100·C·ε = 1.2e-3·s₁ dropped it) and one at ε-level round-off is not."""
    rng = np.random.default_rng(11)
    n, c = 400, 100
    q = np.linalg.qr(rng.normal(size=(n, c)))[0]
    q -= q.mean(0)
    q = np.linalg.qr(q)[0]  # orthonormal, ⟂ 1
    s = np.ones(c)
    s[-2], s[-1] = 3.5e-5, 0.0  # one weak genuine direction, one null direction
    f = np.float32(q * s @ np.linalg.qr(rng.normal(size=(c, c)))[0] * 2 ** np.arange(-3, 3, 0.06))
    phi = np.float32(rng.normal(size=(n, 30)))
    assert int(dlr_with_rank(phi, f).rank) == lapack_rank(f, np.float32) == c - 1
    tol = 2 * np.finfo(np.float32).eps * (np.sqrt(n) + np.sqrt(c))
    assert 50 * np.finfo(np.float32).eps < tol < 3.5e-5 / 4  # far from floor and signal


def test_jit_matches_eager_on_graded_spectrum():
    phi, f = _case("softmax100")
    eager = dlr_with_rank(phi, f)
    jitted = jax.jit(dlr_with_rank)(phi, f)
    assert int(jitted.rank) == int(eager.rank) == 99
    assert float(jitted.value) == pytest.approx(float(eager.value), abs=1e-14)
