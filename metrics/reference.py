"""The random-feature reference: D_LR of isotropic random features with the same n, p and rank.

D_LR's scale depends on the feature width p: features that learned nothing still give
D_LR ≈ 1 − √(r/p) for r output directions, ≈ 0.44 at p = 32 and ≈ 0.86 at p = 512 with r = 10.
A measured D_LR is therefore read against this reference at the same n, p and r (D_LR = 1 − CKA,
T Definition 2; D Eq 7), never against a fixed threshold alone.

**Model.** Φ ∈ ℝ^{n×p} with i.i.d. standard normal entries (isotropic random features), and the
outputs F either

* ``readout="fitted"``: the least-squares fit (with intercept) of targets independent of Φ, i.e. a
  readout trained on random features — the lazy baseline with nothing learned in Φ; or
* ``readout="random"``: F = ΦW with a standard normal W ∈ ℝ^{p×r} — an untrained readout.

**Closed form.** With Φ_c = HΦ, G = Φ_cᵀΦ_c ~ Wishart_p(m, I) for m = n − 1 (centring removes one
degree of freedom), K = Φ_cΦ_cᵀ, Q an orthonormal basis of the centred outputs (rank r) and
d = min(m, p) the dimension of col(Φ_c), D_LR = 1 − tr(QᵀKQ) / (‖G‖_F √r) (SPEC §2.1). Using
E tr G = mp and E ‖G‖_F² = mp(m + p + 1) (Wishart moments):

* fitted readout: col(F_c) is a uniformly random r-dimensional subspace of col(Φ_c), so
  E[tr(QᵀKQ) | G] = r·tr(G)/d and

  .. math:: D_{LR}^{rf} \\approx 1 - \\sqrt{\\frac{r\\,m\\,p}{d^2\\,(m + p + 1)}};

* random readout: tr(QᵀKQ) ≈ r·tr(G²)/tr(G) (each output direction is weighted by the spectrum), so

  .. math:: D_{LR}^{rf} \\approx 1 - \\sqrt{\\frac{r\\,(m + p + 1)}{m\\,p}}.

Both tend to 1 − √(r/p) as n → ∞ with p fixed. The ratio-of-expectations step is the only
approximation; against the seeded Monte Carlo :func:`random_feature_dlr_mc`
(``tests/metrics/test_reference.py``) the fitted form is within 2·10⁻³ on every tested (n, p, r),
including n < p, and the random form within 5·10⁻³ where r ≤ p/4.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from metrics.dlr import dlr

Readout = Literal["fitted", "random"]
_READOUTS = ("fitted", "random")


class ReferenceSample(NamedTuple):
    """Monte Carlo estimate of the random-feature D_LR.

    Attributes:
        mean: mean D_LR over the draws (scalar).
        std: standard deviation over the draws (scalar; the spread of one draw, not of the mean).
        values: (draws,) D_LR of each draw.
    """

    mean: float
    std: float
    values: np.ndarray


def random_feature_dlr(n, p, rank, *, readout: Readout = "fitted") -> np.ndarray:
    """Expected D_LR of isotropic random features with n samples, width p and ``rank`` outputs.

    .. math:: D_{LR}^{rf} \\approx 1 - \\sqrt{\\frac{r\\,m\\,p}{d^2 (m+p+1)}} \\ \\text{(fitted)},
              \\qquad 1 - \\sqrt{\\frac{r (m+p+1)}{m p}} \\ \\text{(random)},

    with m = n − 1, d = min(m, p) (module docstring for the derivation and its accuracy).

    Args:
        n: number of samples the measured D_LR used (int or integer array, n ≥ 2).
        p: feature width p, the input dimension of the readout (int or array, p ≥ 1).
        rank: numerical rank r of the centred outputs the measured D_LR used — ``DLR.rank`` of
            :func:`metrics.dlr_with_rank` (C for C free outputs, C − 1 for exactly fitted one-hot
            targets); 1 ≤ r ≤ min(n − 1, p).
        readout: ``"fitted"`` (least-squares readout of independent targets, the default) or
            ``"random"`` (an untrained Gaussian readout).

    Returns:
        The reference D_LR in [0, 1], float64, broadcast over the arguments' shapes.
    """
    if readout not in _READOUTS:
        raise ValueError(f"readout must be one of {_READOUTS}; got {readout!r}")
    n, p, r = (np.asarray(v) for v in (n, p, rank))
    for name, v in (("n", n), ("p", p), ("rank", r)):
        if not np.all(np.isfinite(v)) or np.any(v != np.round(v)):
            raise ValueError(f"{name} must be a whole number; got {v}")
    m = n.astype(np.float64) - 1.0
    p = p.astype(np.float64)
    r = r.astype(np.float64)
    if np.any(m < 1) or np.any(p < 1):
        raise ValueError(f"need n ≥ 2 samples and width p ≥ 1; got n = {n}, p = {p}")
    d = np.minimum(m, p)
    if np.any(r < 1) or np.any(r > d):
        raise ValueError(f"rank must lie in [1, min(n - 1, p)] = [1, {d}]; got {rank}")
    if readout == "fitted":
        cka = np.sqrt(r * m * p / (d**2 * (m + p + 1.0)))
    else:
        cka = np.sqrt(r * (m + p + 1.0) / (m * p))
    return 1.0 - np.minimum(cka, 1.0)


def random_feature_dlr_mc(
    key: jax.Array,
    n: int,
    p: int,
    rank: int,
    *,
    readout: Readout = "fitted",
    draws: int = 32,
    dtype=jnp.float32,
) -> ReferenceSample:
    """Seeded Monte Carlo of the random-feature D_LR: ``draws`` independent (Φ, F) of the model.

    Each draw samples Φ ~ N(0, 1)^{n×p} and the outputs of ``readout`` (module docstring) and
    evaluates :func:`metrics.dlr`; this is the definition the closed form
    :func:`random_feature_dlr` approximates, and its spread is the draw-to-draw scatter of D_LR.

    Args:
        key: a ``jax.random`` key.
        n, p, rank: samples, feature width and output rank r (1 ≤ r ≤ min(n − 1, p)).
        readout: ``"fitted"`` or ``"random"``.
        draws: number of independent draws (≥ 2).
        dtype: float dtype of the draws (float64 needs x64 enabled).

    Returns:
        :class:`ReferenceSample` with the mean, the standard deviation and the (draws,) values.
    """
    random_feature_dlr(n, p, rank, readout=readout)  # validates n, p, rank, readout
    if draws < 2:
        raise ValueError(f"need draws ≥ 2 for a spread; got {draws}")

    def one(k):
        k_phi, k_out = jax.random.split(k)
        phi = jax.random.normal(k_phi, (n, p), dtype)
        if readout == "random":
            outputs = phi @ jax.random.normal(k_out, (p, rank), dtype)
        else:
            targets = jax.random.normal(k_out, (n, rank), dtype)
            phi_c = phi - phi.mean(0)
            coef = jnp.linalg.lstsq(phi_c, targets - targets.mean(0))[0]
            outputs = phi_c @ coef
        return dlr(phi, outputs)

    values = np.asarray(jax.lax.map(one, jax.random.split(key, draws)))
    return ReferenceSample(float(values.mean()), float(values.std(ddof=1)), values)
