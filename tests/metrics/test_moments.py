"""Streaming statistics against NumPy float64 definitions; merge order; the float32 error bound."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from metrics import accumulate_moments, merge_moments, moments

EPS32 = float(np.finfo(np.float32).eps)


def _data(seed, n, p=25, c=8):
    """Post-ReLU features with a large mean against their spread, softmax outputs (rank c − 1)."""
    rng = np.random.default_rng(seed)
    phi = np.maximum(rng.normal(size=(n, p)), 0.0) * 0.5 + 3.0
    probs = np.asarray(jax.nn.softmax(jnp.asarray(phi @ rng.normal(size=(p, c))), axis=1))
    return phi, probs


def _check_against_definition(m, phi, out, rtol):
    """Every field of ``m`` against the centred float64 definitions on the concatenated sample."""
    phi, out = np.asarray(phi, np.float64), np.asarray(out, np.float64)
    pc, oc = phi - phi.mean(0), out - out.mean(0)
    assert float(m.n) == phi.shape[0]
    np.testing.assert_allclose(m.phi_mean, phi.mean(0), rtol=rtol)
    np.testing.assert_allclose(m.out_mean, out.mean(0), rtol=rtol)
    np.testing.assert_allclose(m.phi_css, pc.T @ pc, rtol=rtol, atol=rtol * np.abs(pc.T @ pc).max())
    np.testing.assert_allclose(m.cross, pc.T @ oc, atol=rtol * np.abs(pc).sum(0).max())
    g = np.asarray(m.out_factor, np.float64)
    np.testing.assert_allclose(g.T @ g, oc.T @ oc, atol=rtol * np.linalg.norm(oc, 2) ** 2)
    # LAPACK SVD of the tall centred outputs; these softmax outputs have a graded spectrum
    # (s₇/s₁ ≈ 2·10⁻¹¹): the QR factor resolves it to a few ε·s₁
    # (the null one is round-off: ≈ 200ε·s₁ from NumPy's centring here, ≈ ε·s₁ ours)
    s_ref = np.linalg.svd(oc, compute_uv=False)
    s_got = np.linalg.svd(g, compute_uv=False)
    eps_s1 = np.finfo(np.float64).eps * s_ref[0]
    np.testing.assert_allclose(s_got[:-1], s_ref[:-1], atol=20 * eps_s1)
    assert s_got[-1] < 1e3 * eps_s1 and s_ref[-1] < 1e3 * eps_s1


def test_streaming_equals_in_memory_and_definitions():
    phi, out = _data(0, 600)
    _check_against_definition(moments(phi, out), phi, out, 1e-13)
    streamed = accumulate_moments((phi[i : i + 100], out[i : i + 100]) for i in range(0, 600, 100))
    _check_against_definition(streamed, phi, out, 1e-13)
    # features only, and outputs given as several arrays stacked column-wise
    assert moments(phi).out_factor.shape == (0, 0)
    two = moments(phi, out[:, :3], out[:, 3:])
    np.testing.assert_allclose(two.cross, moments(phi, out).cross, rtol=1e-13)


def test_merge_order_invariance():
    phi, out = _data(1, 600)
    a, b, c = (moments(phi[s], out[s]) for s in (slice(0, 100), slice(100, 200), slice(200, 600)))
    orders = [
        merge_moments(merge_moments(a, b), c),
        merge_moments(a, merge_moments(b, c)),
        merge_moments(merge_moments(c, a), b),
        merge_moments(b, merge_moments(c, a)),
    ]
    for m in orders:
        _check_against_definition(m, phi, out, 1e-13)
    ref = orders[0]
    for m in orders[1:]:
        for name in ("n", "phi_mean", "phi_css", "out_mean", "cross"):
            np.testing.assert_allclose(getattr(m, name), getattr(ref, name), rtol=1e-13, atol=1e-11)


def _float32_errors(n, batch, seed):
    """(max entrywise |ΔS| / bound, relative Frobenius error of S, output rank floor / (ε s₁))."""
    phi, out = _data(seed, n)
    phi32, out32 = np.float32(phi), np.float32(out)
    m = accumulate_moments((phi32[i : i + batch], out32[i : i + batch]) for i in range(0, n, batch))
    assert m.phi_css.dtype == jnp.float32
    x = np.float64(phi32)  # reference: float64 statistics of the same float32 numbers
    xc = x - x.mean(0)
    exact = xc.T @ xc
    k = batch + n // batch + 2
    gamma = k * EPS32 / (1 - k * EPS32)  # Higham Eq. 3.13, the bound in metrics.moments
    err = np.abs(np.float64(m.phi_css) - exact)
    ratio = float(np.max(err / (gamma * (np.abs(xc).T @ np.abs(xc)))))
    rel = float(np.linalg.norm(err) / np.linalg.norm(exact) / (np.sqrt(k) * EPS32))
    s = np.linalg.svd(np.float64(m.out_factor), compute_uv=False)
    return ratio, rel, s[-1] / s[0] / EPS32


def test_float32_accumulation_error_within_documented_bound():
    ratio, rel, floor = _float32_errors(10_000, 100, seed=2)
    assert ratio <= 1.0  # worst-case bound holds entrywise (measured ≈ 0.01)
    assert rel <= 1.0  # observed error ≲ √(B + n/B)·ε (measured ≈ 0.1)
    assert floor <= 20.0  # softmax outputs: centred rank c − 1 resolved at ≲ 20ε ≪ 2ε(√n + √C)


@pytest.mark.slow
def test_float32_bound_at_a_million_samples():
    ratio, rel, floor = _float32_errors(1_000_000, 1000, seed=3)
    assert ratio <= 1.0 and rel <= 1.0 and floor <= 20.0


def test_bad_batches():
    phi, out = _data(4, 200)
    with pytest.raises(ValueError, match="empty"):
        accumulate_moments(iter([]))
    with pytest.raises(ValueError, match="widths"):
        accumulate_moments([(phi[:100], out[:100]), (phi[100:, :5], out[100:])])
    with pytest.raises(ValueError, match="widths"):
        accumulate_moments([(phi[:100], out[:100]), (phi[100:], out[100:, :2])])
    bad = phi[100:].copy()
    bad[7, 3] = np.nan
    with pytest.raises(ValueError, match="features contains NaN"):
        accumulate_moments([(phi[:100], out[:100]), (bad, out[100:])])
    with pytest.raises(ValueError, match="same number of rows"):
        accumulate_moments([(phi[:100], out[:90])])
    with pytest.raises(ValueError, match="2-D"):
        moments(phi[:, 0])
