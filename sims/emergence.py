"""Extended multilinear models for emergence in time, data and width (T Ch. 5, App. B.1.4–B.1.7, C.2).

Conventions as in :mod:`sims.skills` (½-MSE, gradient flow dθ/dt = −η∇L, R_k = E_X[g_k f]).
Each extended model adds one calibration constant fitted on a single-skill (n_s = 1) network:

* time  — g_k scaled by 𝓑 (Eq 5.1–5.2): rate 2ηP_s(k)𝓑²S. **Decision (checked by integration):**
  scaling g_k once by 𝓑 with balanced a_k = b_k gives the rate 2ηP_s(k)𝓑S; the printed 𝓑² rate
  is exact when each layer is scaled by 𝓑 (f = (𝓑a_k)(𝓑b_k)g_k). We parameterise by the rate
  factor ``B2`` = 𝓑² of Eq 5.2 so calibrated numbers compare directly with the thesis' 1/22.
* data  — D_c-shot learner (Eq 5.3–5.5, B.26);
* width — N_c basis functions per skill (Eq 5.6–5.9, B.44), and the ceiling a width-N ReLU
  network can express on a parity skill (:func:`expressible_strength`);
* the linear-model variant with w_k instead of a_k b_k (Eq C.3–C.6).

Also the least-squares calibrations of B², D_c, N_c used in T §5.2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from sims._checks import as_float, check_finite, check_positive, check_skill_inputs
from sims.skills import skill_strength

__all__ = [
    "EmergenceTrajectory",
    "solve",
    "loss",
    "time_emergence",
    "data_emergence",
    "data_emergence_loss",
    "parameter_emergence",
    "expressible_strength",
    "linear_skill_strength",
    "calibrate_time",
    "calibrate_data",
    "calibrate_width",
]


class EmergenceTrajectory(NamedTuple):
    """Closed-form trajectory of the time-extended multilinear model (T Eq 5.2)."""

    t: jax.Array  # (T,) times
    network_map: jax.Array  # (T, N) skill strengths R_k(t), f = Σ_k R_k g_k (alias ``R``)
    loss: jax.Array  # (T,) loss Σ_k p_k ½(S − R_k)² (T Eq 4.10 weighted as in Eq 4.17)

    @property
    def R(self) -> jax.Array:
        """R_k(t): :attr:`network_map` under its former name (an alias)."""
        return self.network_map


def solve(
    r0: jax.Array,
    S: jax.Array | float,
    p: jax.Array,
    t: jax.Array,
    *,
    B2: jax.Array | float = 1.0,
    eta: jax.Array | float = 1.0,
) -> EmergenceTrajectory:
    """Skill strengths over time of the time-extended multilinear model (T Eq 5.1–5.2).

    .. math::  R_k(T) = \\frac{S}{1 + (S/R_k(0) − 1)\\, e^{−2 η p_k 𝓑² S T}}

    The flow of :func:`loss` from a balanced init a_k(0) = b_k(0) with R_k = 𝓑² a_k b_k.

    Args:
      r0: (N,) initial skill strengths R_k(0) ≥ 0 (or a scalar shared by all skills).
      S: target scale S > 0.
      p: (N,) skill weights p_k = d_k/D (P_s(k) for infinite data).
      t: (T,) times.
      B2: calibration constant 𝓑² > 0 (rate factor of Eq 5.2; see the module docstring).
      eta: learning rate η > 0.

    Returns:
      :class:`EmergenceTrajectory` with ``network_map`` (the R_k, alias ``R``) of shape (T, N).
    """
    t, p, r0, S = (as_float(v, n) for v, n in ((t, "t"), (p, "p"), (r0, "r0"), (S, "S")))
    if t.ndim != 1 or p.ndim != 1:
        raise ValueError(f"t must be (T,) and p must be (N,), got {t.shape} and {p.shape}")
    if r0.ndim > 1 or (r0.ndim == 1 and r0.shape != p.shape):
        raise ValueError(f"r0 must be a scalar or have shape {p.shape} like p, got {r0.shape}")
    for x, name in ((t, "t"), (p, "p"), (r0, "r0"), (S, "S"), (B2, "B2"), (eta, "eta")):
        check_finite(x, name)
    check_positive(eta, "eta (learning rate η)")
    check_positive(B2, "B2 (calibration constant B^2)")  # time_emergence's checks: not under jit
    check_skill_inputs(S, r0, p)
    return _closed_form(t, p, r0, S, B2, eta)


def loss(params: dict, task: tuple) -> jax.Array:
    """Raw-parameter loss of the time-extended model, Σ_k p_k ½(S − 𝓑² a_k b_k)² (T Eq 5.1–5.2).

    Each layer is scaled by 𝓑 (f = Σ_k (𝓑a_k)(𝓑b_k) g_k), so R_k = 𝓑² a_k b_k and a balanced init
    gives the rate 2ηp_k𝓑²S of :func:`solve`.

    Args:
      params: ``{"a": (N,), "b": (N,)}``.
      task: ``(S, p, B2)``: target scale S (), skill weights p_k (N,), 𝓑² ().

    Returns:
      () loss.
    """
    S, p, B2 = task
    return 0.5 * jnp.sum(p * (S - B2 * params["a"] * params["b"]) ** 2)


def time_emergence(
    t: ArrayLike, S: ArrayLike, r0: ArrayLike, p: ArrayLike, B2: ArrayLike, eta: ArrayLike = 1.0
) -> jax.Array:
    """Skill strength of the time-extended model (T Eq 5.2).

    .. math::  R_k(T)/S = 1 / (1 + (S/R_k(0) − 1) e^{−2 η P_s(k) 𝓑² S T})

    Args:
      t: times T (any shape, broadcast with the rest).
      S: target scale S > 0.
      r0: R_k(0) ≥ 0.
      p: skill frequency P_s(k) (d_k/D for finite data).
      B2: calibration constant 𝓑² > 0 (rate factor of Eq 5.2; see the module docstring).
      eta: learning rate η.

    Returns:
      R_k(T), broadcast shape.
    """
    check_finite(S, "S (target scale)")
    check_finite(r0, "r0 (initial skill strength R_k(0))")
    check_positive(B2, "B2 (calibration constant B^2)")
    return skill_strength(t, S, r0, p * B2, eta)


def data_emergence(d: ArrayLike, S: ArrayLike, D_c: ArrayLike) -> jax.Array:
    """R_k(∞) of the D_c-shot learner (T Eq 5.5 / B.26), as printed.

    .. math::  R_k(∞) = S(1 − \\sqrt{1 − d_k/D_c})  (d_k < D_c),   S  (d_k ≥ D_c)

    Eq B.26 converts the min-norm test loss Eq B.42, L_k = ½S²(1 − d_k/D_c), into a skill
    strength through Eq 4.10 (L_k = ½(S − R_k)²). For the extended model the exact relation is
    L_k = ½S²(1 − R_k/S) (see :func:`data_emergence_loss`), so the correlation R_k = E[g_k f] of the
    min-norm interpolant is S d_k/D_c in expectation; Eq B.26 is the "loss-equivalent" strength the
    thesis calibrates D_c = 800 with, and is kept here for that comparison.

    Args:
      d: skill counts d_k ≥ 0 (any shape).
      S: target scale S > 0.
      D_c: number of basis functions per skill D_c > 0 (calibration constant).

    Returns:
      R_k(∞), broadcast shape.
    """
    check_positive(D_c, "D_c")
    check_positive(d, "d (skill counts d_k)", strict=False)
    S = as_float(S, "S")
    x = jnp.clip(as_float(d, "d") / D_c, 0.0, 1.0)
    return S * (1.0 - jnp.sqrt(1.0 - x))


def data_emergence_loss(d: ArrayLike, S: ArrayLike, D_c: ArrayLike) -> jax.Array:
    """Skill loss of the D_c-shot learner after training, ½S²(1 − d_k/D_c)_+ (T Eq B.42)."""
    check_positive(D_c, "D_c")
    S = as_float(S, "S")
    x = jnp.clip(as_float(d, "d") / D_c, 0.0, 1.0)
    return 0.5 * S**2 * (1.0 - x)


def parameter_emergence(N: ArrayLike, S: ArrayLike, N_c: ArrayLike, n_s: int) -> jax.Array:
    """R_k(∞) of the model with N_c basis functions per skill and N basis functions (T Eq 5.9 / B.44).

    With q = ⌊(N − 1)/N_c⌋ + 1 and r = N − (q − 1)N_c: R_k = S (k < q), S r/N_c (k = q), 0 (k > q).
    N_c may be any positive real (the calibration treats it as continuous): then the k-th skill
    owns the basis functions in ((k − 1)N_c, kN_c] and R_k/S = clip(N/N_c − (k − 1), 0, 1), which
    equals Eq B.44 for integer N_c.

    Args:
      N: number of basis functions / hidden width N ≥ 0 (any shape).
      S: target scale S.
      N_c: basis functions needed per skill N_c > 0.
      n_s: number of skills (static).

    Returns:
      (..., n_s) skill strengths.
    """
    check_positive(N_c, "N_c")
    check_positive(N, "N (number of basis functions)", strict=False)
    if int(n_s) < 1:
        raise ValueError(f"n_s (number of skills) must be >= 1, got {n_s}")
    S = as_float(S, "S")
    N = as_float(N, "N")[..., None]
    k = jnp.arange(1, int(n_s) + 1, dtype=N.dtype)
    return S * jnp.clip(N / N_c - (k - 1), 0.0, 1.0)


def expressible_strength(widths: Sequence[int], m: int = 3) -> np.ndarray:
    r"""Best R_1/S that N ReLU units with an output bias can express on one m-bit parity skill.

    The ceiling under the width model of T Eq 5.9: however long a width-N network trains, R_1/S
    cannot exceed this value, so Eq 5.9 fitted to it (:func:`calibrate_width`) gives the N_c of a
    network that always finds its best fit — 3.19 on widths (1, 2, 3, 4, 5, 6, 8, 12) for m = 3
    (T's value is 4).

    On {0, 1} skill bits the skill function depends only on the count c ∈ {0, …, m} of relevant
    ones, g = (−1)^c (T Eq 4.2), and its mean is 0, so the best width-N network f = β₀ +
    Σ_j β_j relu(w_jᵀx + b_j) is the projection of S·g onto span{1, relu(·)} and
    R_1/S = E[f g]/S = ‖P g‖² (T Eq 4.7; E[g²] = 1). Constructions (their values are tested):

    * N ≥ m: exact, R_1/S = 1. g is the piecewise-linear interpolant
      1 − 2c + Σ_{j=1}^{m−1} 4(−1)^{j+1} relu(c − j): one unit for c = relu(c), one per kink.
    * N = 1: one unit firing on a single corner, relu(1 − c), gives R_1/S = 1/(2^m − 1).
    * m = 3, N = 2: relu(c − 1), relu(c − 2) fit g on c ≥ 2 and its mean −1/2 on c ≤ 1:
      R_1/S = 5/8.

    For m = 3 these are also the largest values random restarts of Adam reach on the 8
    relevant-bit patterns (tested). For m ≠ 3 the N = 1 value is the construction's (a lower
    bound on the best), and 1 < N < m is not derived (NaN).

    Args:
      widths: (K,) hidden widths N ≥ 1.
      m: relevant bits per skill (T: 3).

    Returns:
      (K,) best R_1/S per width.
    """
    N = np.asarray(widths)
    if N.size == 0 or np.any(N < 1) or int(m) < 1:
        raise ValueError(f"widths must be >= 1 and m >= 1, got widths={widths}, m={m}")
    known = {1: 1.0 / (2 ** int(m) - 1)}
    if int(m) == 3:
        known[2] = 5.0 / 8.0
    return np.array([1.0 if n >= m else known.get(int(n), np.nan) for n in N])


def linear_skill_strength(
    t: ArrayLike, S: ArrayLike, p: ArrayLike, w0: ArrayLike = 0.0, eta: ArrayLike = 1.0
) -> jax.Array:
    """Skill strength of the linear model f = Σ w_k g_k (T Eq C.3–C.4): exponential saturation.

    .. math::  R_k(T) = w_k(T) = S − (S − w_k(0)) e^{−η (d_k/D) T}

    (Eq C.4 is the case w_k(0) = 0). The data- and width-extended linear models (Eq C.5–C.6)
    converge to the same min-norm solutions as :func:`data_emergence` / :func:`parameter_emergence`.

    Args:
      t: times; S: target scale; p: d_k/D (P_s(k) for infinite data); w0: w_k(0); eta: η.

    Returns:
      R_k(T), broadcast shape.
    """
    S = as_float(S, "S")
    check_positive(S, "S (target scale)")
    return S - (S - w0) * jnp.exp(-eta * p * t)


def calibrate_time(
    t: ArrayLike,
    R: ArrayLike,
    S: ArrayLike,
    p: ArrayLike,
    eta: ArrayLike,
    r0_grid: ArrayLike | None = None,
    B2_grid: ArrayLike | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Least-squares fit of (𝓑², R(0)) of Eq 5.2 to a measured skill-strength curve R(T).

    Grid search over log-spaced values (vectorised): the fit is a 2-D minimisation of
    Σ_T (R(T) − R_model(T))².

    Args:
      t: (T,) training times (steps × 1, η given separately); R: (T,) measured R_k.
      S: target scale; p: skill frequency of the calibrated skill (1 for n_s = 1); eta: η.
      r0_grid, B2_grid: candidate values (defaults: 10^[-8, 0]·S and 10^[-4, 1]).

    Returns:
      (B2, r0) best-fitting values.
    """
    S = as_float(S, "S")
    r0_grid = S * jnp.logspace(-8, -0.5, 76) if r0_grid is None else jnp.asarray(r0_grid)
    B2_grid = jnp.logspace(-4, 1, 501) if B2_grid is None else jnp.asarray(B2_grid)
    pred = time_emergence(
        jnp.asarray(t)[None, None, :], S, r0_grid[:, None, None], p, B2_grid[None, :, None], eta
    )
    sse = jnp.sum((pred - jnp.asarray(R)) ** 2, axis=-1)
    i, j = jnp.unravel_index(jnp.argmin(sse), sse.shape)
    return B2_grid[j], r0_grid[i]


def calibrate_data(
    d: ArrayLike, R: ArrayLike, S: ArrayLike, D_c_grid: ArrayLike | None = None
) -> jax.Array:
    """Least-squares fit of D_c in Eq 5.5 to measured R_k(∞) at skill counts ``d`` (T §5.2.2).

    Args:
      d: (n,) skill counts d_k of the training sets; R: (n,) measured R_k; S: target scale.
      D_c_grid: candidates (default 10^[0, 6], 2001 log-spaced values).

    Returns:
      best-fitting D_c.
    """
    grid = jnp.logspace(0, 6, 2001) if D_c_grid is None else jnp.asarray(D_c_grid)
    pred = data_emergence(jnp.asarray(d)[None, :], S, grid[:, None])
    return _grid_argmin(jnp.sum((pred - jnp.asarray(R)) ** 2, axis=-1), grid)


def calibrate_width(
    N: ArrayLike, R: ArrayLike, S: ArrayLike, N_c_grid: ArrayLike | None = None
) -> jax.Array:
    """Least-squares fit of N_c in Eq 5.9 to measured R_1(∞) at widths ``N`` (T §5.2.3, n_s = 1).

    Args:
      N: (n,) widths; R: (n,) measured R_1; S: target scale.
      N_c_grid: candidates (default 0.25..64, 1009 values).

    Returns:
      best-fitting N_c.
    """
    grid = jnp.linspace(0.25, 64.0, 1021) if N_c_grid is None else jnp.asarray(N_c_grid)
    pred = jax.vmap(lambda nc: parameter_emergence(jnp.asarray(N), S, nc, 1)[:, 0])(grid)
    return _grid_argmin(jnp.sum((pred - jnp.asarray(R)) ** 2, axis=-1), grid)


def _grid_argmin(sse: jax.Array, grid: jax.Array) -> jax.Array:
    return grid[jnp.argmin(jnp.where(jnp.isfinite(sse), sse, jnp.inf))]


@jax.jit  # one program per shapes (eagerly, each primitive compiled on its own)
def _closed_form(t, p, r0, S, B2, eta) -> EmergenceTrajectory:
    """:func:`solve` on validated inputs."""
    R = time_emergence(t[:, None], S, r0, p, B2, eta)
    return EmergenceTrajectory(t, R, 0.5 * (S - R) ** 2 @ p)
