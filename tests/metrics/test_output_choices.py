"""D_LR on logits, centred logits and softmax probabilities against naive NumPy definitions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from metrics import (
    OUTPUT_CHOICES,
    centred_logits,
    dlr_by_output,
    output_choice,
    probabilities,
)


def naive_dlr(phi, f):
    """1 − CKA(HΦΦᵀH, P) with n×n matrices; P projects onto col(HF) (NumPy SVD, rank by 1e-9)."""
    phi, f = np.asarray(phi, np.float64), np.asarray(f, np.float64)
    n = phi.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    k = h @ phi @ phi.T @ h
    u, s, _ = np.linalg.svd(h @ f, full_matrices=False)
    r = int(np.sum(s > 1e-9 * s[0]))
    p_f = u[:, :r] @ u[:, :r].T
    return 1.0 - np.sum(k * p_f) / (np.linalg.norm(k) * np.sqrt(r)), r


def naive_centred(z):
    """Each logit minus the mean of its row, written out class by class."""
    z = np.asarray(z, np.float64)
    out = np.empty_like(z)
    for i in range(z.shape[0]):
        out[i] = [z[i, c] - sum(z[i]) / z.shape[1] for c in range(z.shape[1])]
    return out


def naive_softmax(z, tau):
    """exp(z/τ) / Σ exp(z/τ), row by row, shifted by the row maximum."""
    z = np.asarray(z, np.float64) / tau
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _problem(seed, n=120, p=30, c=6, shift=2.0):
    """Features concentrated on c − 1 directions u_k, and logits z = U B + m 1ᵀ: a class part the
    features carry plus a per-sample shift m_i that they do not (softmax ignores it)."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(n, c - 1))
    phi = 3.0 * u @ rng.normal(size=(c - 1, p)) + 0.3 * rng.normal(size=(n, p))
    z = u @ rng.normal(size=(c - 1, c)) + shift * rng.normal(size=(n, 1))
    return phi, z


def test_transforms_match_naive():
    _, z = _problem(0)
    np.testing.assert_allclose(np.asarray(centred_logits(z)), naive_centred(z), atol=1e-12)
    for tau in (0.3, 1.0, 7.0):
        np.testing.assert_allclose(
            np.asarray(probabilities(z, tau)), naive_softmax(z, tau), rtol=1e-12
        )
    assert np.asarray(output_choice(z, "logits")) == pytest.approx(z)


@pytest.mark.parametrize("tau", [0.5, 1.0, 4.0])
def test_dlr_by_output_matches_naive(tau):
    phi, z = _problem(1)
    got = dlr_by_output(phi, z, temperature=tau)
    refs = {
        "logits": naive_dlr(phi, z),
        "centred_logits": naive_dlr(phi, naive_centred(z)),
        "probabilities": naive_dlr(phi, naive_softmax(z, tau)),
    }
    for choice in OUTPUT_CHOICES:
        value, rank = refs[choice]
        assert float(getattr(got, choice).value) == pytest.approx(value, abs=1e-10), choice
        assert int(getattr(got, choice).rank) == rank, choice
    # the per-sample shift adds one output direction the features do not carry
    assert (refs["logits"][1], refs["centred_logits"][1]) == (6, 5)
    assert refs["logits"][0] > refs["centred_logits"][0] + 0.05, refs


def test_high_temperature_probabilities_span_the_centred_logits():
    """softmax(z/τ) → 1/C + (z − z̄)/(Cτ) as τ → ∞ (module docstring): the same D_LR."""
    phi, z = _problem(2)
    target = float(dlr_by_output(phi, z).centred_logits.value)
    gap = [
        abs(float(dlr_by_output(phi, z, temperature=t).probabilities.value) - target)
        for t in (1e2, 1e4)
    ]
    assert gap[1] < 1e-4
    assert gap[1] < gap[0] / 10  # the O(1/τ) correction shrinks with τ


def test_float32_and_jit():
    phi, z = _problem(3)
    ref = dlr_by_output(phi, z, temperature=2.0)
    fn = jax.jit(lambda a, b, t: dlr_by_output(a, b, temperature=t))
    got = fn(jnp.asarray(phi, jnp.float32), jnp.asarray(z, jnp.float32), jnp.float32(2.0))
    for choice in OUTPUT_CHOICES:
        assert float(getattr(got, choice).value) == pytest.approx(
            float(getattr(ref, choice).value), abs=5e-5
        )


def test_bad_input():
    phi, z = _problem(4)
    with pytest.raises(ValueError, match="unknown output choice"):
        output_choice(z, "margins")
    with pytest.raises(ValueError, match="temperature must be > 0"):
        probabilities(z, 0.0)
    with pytest.raises(ValueError, match="logits must be a 2-D array"):
        centred_logits(z[:, 0])
    with pytest.raises(ValueError, match="same number of rows"):
        dlr_by_output(phi[:-1], z)
