"""Scaling laws of the multilinear skill model in time, data, parameters and compute (T §4.3, Table 4.1).

Skills follow P_s(k) = A k^{−(α+1)} (Eq 4.1); the multilinear model (:mod:`sims.skills`) is
simulated in closed form. "n_s = ∞" is handled exactly: the first ``n_sim`` skills are simulated
and the remaining ones contribute their untouched loss ½S²·A·ζ(α+1, n_sim+1) (valid while those
skills have not started to emerge, which the simulators check).

Exponents (Table 4.1): time −α/(α+1), data −α/(α+1), parameters −α, compute −α/(α+2) with
T ∝ C^{(α+1)/(α+2)}, N ∝ C^{1/(α+2)}. Prefactors (derived here for n_s → ∞, A = 1/ζ(α+1)):

* time: L ≈ K_T T^{−α/(α+1)}, K_T = S²A/(2(α+1)) (2ηAS)^{−α/(α+1)} ∫_0^∞ x^{−1/(α+1)} h(x) dx,
  h(x) = (1 + e^x/(S/R_0 − 1))^{−2} (substitute x = 2ηASk^{−(α+1)}T in Eq 4.21);
* data: E_D[L] ≈ K_D D^{−α/(α+1)}, K_D = S²A^{1/(α+1)} Γ(α/(α+1)) / (2(α+1)) (Eq 4.30 with
  (1 − P)^D ≈ e^{−DP});
* parameters: L(N) = ½S²A ζ(α+1, N+1) ≈ K_N N^{−α}, K_N = S²A/(2α) (Eq 4.36);
* compute: the corner of the time law and the N plateau, K_T(C/N)^{−α/(α+1)} = K_N N^{−α}
  (Eq 4.38–4.43; the loss of N skills is ≈ max, not the sum, of the two terms).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
from jax.typing import ArrayLike

from sims._checks import as_float, check_alpha, check_finite, check_positive, promote
from sims.skills import loss_curve, skill_frequencies

__all__ = [
    "TimeLaw",
    "solve",
    "loss",
    "Exponents",
    "Prefactors",
    "exponents",
    "prefactors",
    "power_law_norm",
    "time_curve",
    "data_curve",
    "expected_data_loss",
    "parameter_curve",
    "compute_curves",
    "compute_frontier",
    "finite_n_time_law",
    "fit_power_law",
]


class Exponents(NamedTuple):
    """Table 4.1: loss exponents and the compute-optimal allocation exponents."""

    time: jax.Array  # −α/(α+1)
    data: jax.Array  # −α/(α+1)
    params: jax.Array  # −α
    compute: jax.Array  # −α/(α+2)
    compute_T: jax.Array  # T ∝ C^{(α+1)/(α+2)}
    compute_N: jax.Array  # N ∝ C^{1/(α+2)}


class Prefactors(NamedTuple):
    """Prefactors K of L ≈ K · resource^{exponent} for n_s → ∞ (see the module docstring)."""

    time: jax.Array  # K_T
    data: jax.Array  # K_D
    params: jax.Array  # K_N
    compute: jax.Array  # K_C
    compute_N: jax.Array  # N*(C) = compute_N · C^{1/(α+2)}


class TimeLaw(NamedTuple):
    """Loss over time of the multilinear model with power-law skills, beside its scaling law."""

    t: jax.Array  # (T,) times
    loss: jax.Array  # (T,) loss L(T) of the closed-form skill dynamics (T Eq 4.17, 4.19–4.21)
    law: (
        jax.Array
    )  # (T,) the power law K_T T^{−α/(α+1)} (n_s → ∞) or Eq C.2 (finite n_s); ∞ at T = 0


def solve(
    r0: jax.Array | float,
    S: jax.Array | float,
    alpha: jax.Array | float,
    t: jax.Array,
    *,
    eta: jax.Array | float = 1.0,
    n_s: int | None = None,
    n_sim: int = 100_000,
) -> TimeLaw:
    """Loss over time of the multilinear model with P_s(k) = A k^{−(α+1)}, and its time law (T §4.3.1).

    .. math::  L(T) = \\sum_k P_s(k)\\,\\tfrac12\\big(S - R_k(T)\\big)^2 \\approx
               K_T\\,T^{-\\alpha/(\\alpha+1)}   \\quad (T Eq 4.17, 4.21, Table 4.1)

    The flow of :func:`loss` from a balanced init with R_k(0) = r0 for every skill and D, N → ∞
    (d_k/D = P_s(k)). With ``n_s=None`` skills beyond ``n_sim`` contribute their untouched loss
    (a ``ValueError`` says when ``t`` is long enough for them to emerge).

    Args:
      r0: R_k(0), the initial strength of every skill, 0 < r0 < S.
      S: target scale S > 0.
      alpha: power-law exponent α > 0.
      t: (T,) times.
      eta: learning rate η > 0.
      n_s: number of skills (static; None → ∞).
      n_sim: skills simulated explicitly when ``n_s`` is None (static).

    Returns:
      :class:`TimeLaw` (t, loss, law), each (T,), in the dtype of the inputs (a float64 input
      while x64 is off warns with :class:`sims.Float64Warning`).
    """
    r0, S, alpha, eta, t = promote(r0=r0, S=S, alpha=alpha, eta=eta, t=t)
    if t.ndim != 1:
        raise ValueError(f"t must be a 1-D array of times, got shape {t.shape}")
    for x, name in ((r0, "r0"), (S, "S"), (alpha, "alpha"), (eta, "eta")):
        if x.ndim != 0:
            raise ValueError(f"{name} must be a scalar, got shape {x.shape}")
    for x, name in ((r0, "r0"), (S, "S"), (alpha, "alpha"), (eta, "eta"), (t, "t")):
        check_finite(x, name)
    check_positive(r0, "r0 (initial skill strength R_k(0))")
    check_positive(S, "S (target scale)")
    check_positive(eta, "eta (learning rate η)")
    L = time_curve(t, alpha, S, r0, eta, n_s=n_s, n_sim=n_sim)
    if n_s is None:
        law = prefactors(alpha, S, r0, eta).time * t ** exponents(alpha).time
    else:
        law = finite_n_time_law(t, alpha, int(n_s), S, r0, eta)
    return TimeLaw(t, L, law)


def loss(params: dict, task: tuple) -> jax.Array:
    """Raw-parameter loss Σ_k P_s(k) ½(S − a_k b_k)² with P_s(k) ∝ k^{−(α+1)} (T Eq 4.1, 4.10, 4.17).

    Args:
      params: ``{"a": (n_s,), "b": (n_s,)}`` (n_s skills, most frequent first).
      task: ``(S, alpha)``: target scale S () and power-law exponent α ().

    Returns:
      () loss.
    """
    S, alpha = task
    P = skill_frequencies(alpha, params["a"].shape[0])
    return 0.5 * jnp.sum(P * (S - params["a"] * params["b"]) ** 2)


def exponents(alpha: ArrayLike) -> Exponents:
    """Scaling-law exponents of Table 4.1 for power-law exponent α > 0 (T Eq 4.25, 4.34, 4.36, 4.43–4.44)."""
    check_alpha(alpha)
    a = as_float(alpha, "alpha")
    return Exponents(-a / (a + 1), -a / (a + 1), -a, -a / (a + 2), (a + 1) / (a + 2), 1 / (a + 2))


def power_law_norm(alpha: ArrayLike, n_s: int | None = None) -> jax.Array:
    """A = 1/Σ_{j≤n_s} j^{−(α+1)} (T Eq 4.1); ``n_s=None`` means n_s → ∞ (A = 1/ζ(α+1))."""
    check_alpha(alpha)
    a = as_float(alpha, "alpha")
    one = jnp.ones_like(a)
    z = jss.zeta(a + 1, one)
    if n_s is not None:
        z = z - jss.zeta(a + 1, one * (int(n_s) + 1))
    return 1.0 / z


def prefactors(
    alpha: ArrayLike, S: ArrayLike = 1.0, r0: ArrayLike = 1e-3, eta: ArrayLike = 1.0
) -> Prefactors:
    """Prefactors of the four scaling laws for n_s → ∞ (derived in the module docstring).

    Args:
      alpha: α > 0; S: target scale; r0: R_k(0) (0 < r0 < S); eta: η.

    Returns:
      :class:`Prefactors`.
    """
    check_alpha(alpha)
    a = as_float(alpha, "alpha")
    A = power_law_norm(a)
    e = -a / (a + 1)
    K_T = S**2 * A / (2 * (a + 1)) * (2 * eta * A * S) ** e * _time_integral(a, S, r0)
    K_D = S**2 * A ** (1 / (a + 1)) * jnp.exp(jss.gammaln(a / (a + 1))) / (2 * (a + 1))
    K_N = S**2 * A / (2 * a)
    # Compute-optimal N balances the two terms of Eq 4.38: a model of N skills follows the
    # time law until skill N is learned and then plateaus at K_N N^{−α}, so the optimum sits at
    # the corner K_T (C/N)^e = K_N N^{−α}: N* = (K_N/K_T)^{(α+1)/(α(α+2))} C^{1/(α+2)}.
    cN = (K_N / K_T) ** ((a + 1) / (a * (a + 2)))
    K_C = K_N * cN ** (-a)
    return Prefactors(K_T, K_D, K_N, K_C, cN)


def time_curve(
    T: ArrayLike,
    alpha: ArrayLike,
    S: ArrayLike = 1.0,
    r0: ArrayLike = 1e-3,
    eta: ArrayLike = 1.0,
    n_s: int | None = None,
    n_sim: int = 100_000,
) -> jax.Array:
    """Loss L(T) of the multilinear model with D, N → ∞ (N = n_s skills, d_k/D = P_s(k)) (T Eq 4.19–4.21).

    Args:
      T: (n,) times; alpha: α; S, r0, eta: as in :mod:`sims.skills`.
      n_s: number of skills (None → ∞: skills beyond ``n_sim`` contribute ½S²P_s(k) each).
      n_sim: number of skills simulated explicitly.

    Returns:
      (n,) loss values.
    """
    check_alpha(alpha)
    # One dtype for all (float32 in, float32 out; Python scalars take the arrays' dtype).
    T, alpha, S, r0, eta = promote(T=T, alpha=alpha, S=S, r0=r0, eta=eta)
    n_sim = n_sim if n_s is None else int(n_s)
    A = power_law_norm(alpha, n_s)
    P = A * jnp.arange(1, n_sim + 1, dtype=A.dtype) ** (-(alpha + 1.0))
    if n_s is None:
        _check_untouched(T, alpha, S, r0, eta, P[-1])
    return loss_curve(r0, S, P, T, eta=eta, absent_mass=_tail_mass(alpha, n_sim, n_s))


def expected_data_loss(
    D: ArrayLike,
    alpha: ArrayLike,
    S: ArrayLike = 1.0,
    n_s: int | None = None,
    n_sim: int = 1_000_000,
) -> jax.Array:
    """Expected loss after training on D samples, E_D[L] = ½S²Σ_k P_s(k)(1 − P_s(k))^D (T Eq 4.28–4.29).

    The one-shot learner (Eq 4.26) with R_k(0) → 0 and T, N → ∞.

    Args:
      D: data set sizes (any shape); alpha: α; S: target scale.
      n_s: number of skills (None → ∞; skills beyond ``n_sim`` are counted as unobserved,
        exact up to D·P_s(n_sim)).
      n_sim: number of skills summed explicitly.

    Returns:
      E_D[L], shape of D.
    """
    check_alpha(alpha)
    n_sim = n_sim if n_s is None else int(n_s)
    A = power_law_norm(alpha, n_s)
    P = A * jnp.arange(1, n_sim + 1, dtype=jnp.result_type(float)) ** (-(alpha + 1.0))
    D = jnp.asarray(D, P.dtype)
    tail = _tail_mass(alpha, n_sim, n_s)
    one = jax.lax.map(lambda d: jnp.sum(P * jnp.exp(d * jnp.log1p(-P))), D.reshape(-1))
    return (0.5 * S**2 * (one + tail)).reshape(D.shape)


def data_curve(
    key: jax.Array,
    D: ArrayLike,
    alpha: ArrayLike,
    S: ArrayLike = 1.0,
    r0: ArrayLike = 0.0,
    n_s: int | None = None,
    n_sim: int = 1_000_000,
    n_draws: int = 4,
) -> jax.Array:
    """Simulated loss after T → ∞ on sampled data sets of size D (one-shot learner, T §4.3.2).

    For each D a data set of D skill indices is drawn from P_s, skill counts d_k are formed and
    R_k(∞) = S if d_k > 0 else R_k(0) (Eq B.12); the test loss Σ_k P_s(k)½(S − R_k)² is averaged
    over ``n_draws`` data sets. With ``n_s=None`` (n_s → ∞) indices beyond ``n_sim`` are drawn
    with their true total probability and counted as unobserved (exact up to D·P_s(n_sim)).

    Args:
      key: PRNG key; D: (n,) data set sizes (Python ints); alpha: α; S: target scale;
      r0: R_k(0); n_s: number of skills (None → ∞); n_sim: skills tracked when n_s is None;
      n_draws: data sets per D.

    Returns:
      (n,) mean losses.
    """
    check_alpha(alpha)
    n_sim = n_sim if n_s is None else int(n_s)
    A = power_law_norm(alpha, n_s)
    P = A * jnp.arange(1, n_sim + 1, dtype=jnp.result_type(float)) ** (-(alpha + 1.0))
    tail = _tail_mass(alpha, n_sim, n_s)
    cdf = jnp.cumsum(P)
    l_unseen = 0.5 * (S - r0) ** 2

    @jax.jit
    def one(u):
        idx = jnp.searchsorted(cdf, u)  # = n_sim for the tail (k > n_sim)
        seen = jnp.zeros(n_sim + 1, bool).at[idx].set(True)[:n_sim]
        return jnp.dot(P, jnp.where(seen, 0.0, l_unseen)) + tail * l_unseen

    out = []
    for i, d in enumerate(np.asarray(D).astype(int)):
        ks = jax.random.split(jax.random.fold_in(key, i), n_draws)
        out.append(jnp.mean(jnp.stack([one(jax.random.uniform(k, (int(d),))) for k in ks])))
    return jnp.stack(out)


def parameter_curve(
    N: ArrayLike,
    alpha: ArrayLike,
    S: ArrayLike = 1.0,
    r0: ArrayLike = 1e-3,
    T: ArrayLike | None = None,
    eta: ArrayLike = 1.0,
    n_s: int | None = None,
) -> jax.Array:
    """Loss of a model with the N most frequent skills after long training, D → ∞ (T Eq 4.35–4.36).

    L(N) = Σ_{k≤N} P_s(k)½(S − R_k(T))² + ½S² Σ_{k>N} P_s(k); with ``T=None`` the skills k ≤ N are
    fully learned and L(N) = ½S²A ζ(α+1, N+1) exactly (Eq B.13).

    Args:
      N: (n,) numbers of basis functions (Python ints); alpha: α; S, r0, eta: model constants;
      T: training time (None → ∞); n_s: number of skills (None → ∞).

    Returns:
      (n,) losses.
    """
    check_alpha(alpha)
    out = []
    A = power_law_norm(alpha, n_s)
    for n in np.asarray(N).astype(int):
        absent = _tail_mass(alpha, int(n), n_s)
        if T is None:
            out.append(0.5 * S**2 * absent)
            continue
        P = A * jnp.arange(1, int(n) + 1, dtype=jnp.result_type(float)) ** (-(alpha + 1.0))
        out.append(loss_curve(r0, S, P, jnp.asarray([T]), eta=eta, absent_mass=absent)[0])
    return jnp.stack(out)


def compute_curves(
    C: ArrayLike,
    N: ArrayLike,
    alpha: ArrayLike,
    S: ArrayLike = 1.0,
    r0: ArrayLike = 1e-3,
    eta: ArrayLike = 1.0,
) -> jax.Array:
    """Loss at compute C = T·N for models of N skills, D, n_s → ∞ (T §4.3.4, Fig 4.3).

    Args:
      C: (m,) compute budgets; N: (n,) model sizes (Python ints); alpha, S, r0, eta: as above.

    Returns:
      (n, m) losses L(T = C/N, N).
    """
    check_alpha(alpha)
    A = power_law_norm(alpha)
    N = np.asarray(N).astype(int)
    P = A * jnp.arange(1, int(N.max()) + 1, dtype=jnp.result_type(float)) ** (-(alpha + 1.0))
    k = jnp.arange(1, int(N.max()) + 1, dtype=P.dtype)

    # One padded problem per N (skills k > N get zero weight and count as absent): one compile.
    def one(n, absent):
        Pn = jnp.where(k <= n, P, 0.0)
        return loss_curve(r0, S, Pn, jnp.asarray(C) / n, eta=eta, absent_mass=absent)

    absent = jnp.stack([_tail_mass(alpha, int(n), None) for n in N])
    return jax.jit(jax.vmap(one))(jnp.asarray(N, P.dtype), absent)


def compute_frontier(C: ArrayLike, N: ArrayLike, losses: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """Compute-optimal loss and model size: min over N of L(C, N) (T Eq 4.43–4.44).

    Args:
      C: (m,) budgets; N: (n,) sizes; losses: (n, m) from :func:`compute_curves`.

    Returns:
      (L*(C) (m,), N*(C) (m,)).
    """
    i = jnp.argmin(losses, axis=0)
    return losses[i, jnp.arange(losses.shape[1])], jnp.asarray(N)[i]


def finite_n_time_law(
    T: ArrayLike,
    alpha: ArrayLike,
    N: int,
    S: ArrayLike = 1.0,
    r0: ArrayLike = 1e-3,
    eta: ArrayLike = 1.0,
) -> jax.Array:
    """Time law corrected for N = n_s finite skills, L(T) ≈ K_T T^{−α/(α+1)} − L_C (T Eq C.2).

    Eq C.2, dL/dT = −α/(α+1)·(L + L_C)/T with L_C = S²A N^{−α}/(2α), integrates to
    L + L_C ∝ T^{−α/(α+1)}; the constant is fixed by the n_s → ∞ law (skills k > N would still be
    at ½S² for T ≪ N^{α+1}), with A normalised over the N skills. Valid for 1 ≪ T ≪ N^{α+1}/(2ηAS).

    Args:
      T: times; alpha: α; N: number of skills (= n_s); S, r0, eta: as in :mod:`sims.skills`.

    Returns:
      corrected loss, shape of T.
    """
    check_alpha(alpha)
    a = as_float(alpha, "alpha")
    A_N, A_inf = power_law_norm(a, N), power_law_norm(a)
    K_T = prefactors(a, S, r0, eta).time
    # K_T scales as A^{1/(α+1)} (A from the density, A^{−α/(α+1)} from the rate): rescale to A_N.
    K_T = K_T * (A_N / A_inf) ** (1 / (a + 1))
    L_C = S**2 * A_N * N ** (-a) / (2 * a)
    return K_T * jnp.asarray(T) ** (-a / (a + 1)) - L_C


def fit_power_law(
    x: ArrayLike, y: ArrayLike, window: tuple[float, float] | None = None
) -> tuple[float, float]:
    """Least-squares slope and prefactor of log y = log K + e log x over ``window`` (x range).

    Returns:
      (exponent e, prefactor K).
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    m = np.isfinite(y) & (y > 0)
    if window is not None:
        m &= (x >= window[0]) & (x <= window[1])
    if m.sum() < 2:
        raise ValueError(f"need at least 2 points in the fitting window {window}, got {m.sum()}")
    e, c = np.polyfit(np.log(x[m]), np.log(y[m]), 1)
    return float(e), float(np.exp(c))


def _time_integral(alpha, S, r0) -> jax.Array:
    # ∫_0^∞ x^{−1/(α+1)} (1 + e^{x − x0})^{−2} dx, x0 = log(S/R0 − 1). With v = x^{α/(α+1)} the
    # integrand becomes smooth: ((α+1)/α) ∫_0^∞ σ(x0 − v^{(α+1)/α})² dv (trapezoid, fine grid).
    x0 = jnp.log(S / r0 - 1.0)
    s = alpha / (alpha + 1)
    v = jnp.linspace(0.0, 1.0, 200_001, dtype=x0.dtype) * jnp.maximum(x0 + 60.0, 60.0) ** s
    return jnp.trapezoid(jax.nn.sigmoid(x0 - v ** (1 / s)) ** 2, v) / s


def _tail_mass(alpha, n_sim: int, n_s: int | None) -> jax.Array:
    """Σ_{k>n_sim}^{n_s} P_s(k) (n_s = None → ∞)."""
    a = as_float(alpha, "alpha")
    A = power_law_norm(a, n_s)
    one = jnp.ones_like(a)
    tail = jss.zeta(a + 1, one * (n_sim + 1))
    if n_s is not None:
        tail = tail - jss.zeta(a + 1, one * (n_s + 1))
    return A * tail


def _check_untouched(T, alpha, S, r0, eta, p_last) -> None:
    """The analytic tail assumes skill n_sim has not moved: 2ηP S T ≪ log(S/R0)."""
    tmax = float(np.max(np.asarray(T)))
    if 2 * eta * float(p_last) * S * tmax > 0.1:
        raise ValueError(
            f"T up to {tmax:.3g} lets skill n_sim emerge (rate×T = "
            f"{2 * eta * float(p_last) * S * tmax:.3g} > 0.1); increase n_sim or lower T"
        )
