"""Multilinear skill model: decoupled sigmoidal skill dynamics (T Ch. 4, Eq 4.9–4.11, 4.17, App. B.1).

Model and convention (thesis Eq 4.9, B.3–B.4), stated once for the whole module::

    f(i, x) = Σ_{k=1}^N a_k b_k g_k(i, x),
    L^(D)   = 1/(2D) Σ_j (f*(i_j, x_j) − f(i_j, x_j))² = 1/(2D) Σ_k d_k (S − a_k b_k)²,
    dθ/dt   = −η ∇_θ L^(D).

Because the supports of the skill functions g_k are disjoint (Eq 4.3) each skill strength
R_k = a_k b_k evolves on its own; with balanced initialisation a_k(0) = b_k(0) it is the logistic

.. math::  R_k(T) = \\frac{S}{1 + (S/R_k(0) − 1)\\, e^{−2 η (d_k/D) S T}}   \\quad (T Eq 4.11, B.1)

(the rate 2ηS d_k/D is confirmed by :func:`verify` against the raw (a_k, b_k) gradient flow).
Names: ``S`` = target scale S, ``r0`` = R_k(0), ``p`` = training weight d_k/D (→ P_s(k) for
infinite data), ``eta`` = η, ``t`` = time T (in units of the flow: η multiplies the rate).
The entry point is ``solve(r0, S, p, t, *, p_test, eta, absent_mass)``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from sims._checks import as_float, check_alpha, check_finite, check_positive, check_skill_inputs

__all__ = [
    "SkillTrajectory",
    "skill_frequencies",
    "skill_strength",
    "skill_loss",
    "solve",
    "loss",
    "loss_curve",
    "one_shot_limit",
    "basis_function_limit",
    "verify",
]


class SkillTrajectory(NamedTuple):
    """Closed-form trajectory of the multilinear model (T Eq 4.11, 4.17)."""

    t: jax.Array  # (T,) times
    network_map: jax.Array  # (T, N) skill strengths R_k(t), f = Σ_k R_k g_k (alias ``R``)
    skill_loss: jax.Array  # (T, N) skill losses L_k = ½(S − R_k)² (Eq 4.10)
    loss: jax.Array  # (T,) test loss Σ_k P_s(k) L_k + ½S² × (mass of skills absent), Eq 4.17

    @property
    def R(self) -> jax.Array:
        """R_k(t): :attr:`network_map` under its former name (an alias)."""
        return self.network_map


def solve(
    r0: jax.Array | float,
    S: jax.Array | float,
    p: jax.Array,
    t: jax.Array,
    *,
    p_test: jax.Array | None = None,
    eta: jax.Array | float = 1.0,
    absent_mass: jax.Array | float = 0.0,
) -> SkillTrajectory:
    """Closed-form learning dynamics of the multilinear model with N skills (T Eq 4.11, 4.17).

    .. math::  L(T) = Σ_{k≤N} P_s(k) ½(S − R_k(T))² + ½S² Σ_{k>N} P_s(k)

    The flow of :func:`loss` from a balanced init a_k(0) = b_k(0) = √R_k(0). The arguments are read in
    this order only (nothing is inferred from their shapes or values); the options are
    keyword-only.

    Args:
      r0: R_k(0) ≥ 0, scalar or (N,).
      S: target scale S > 0 (scalar).
      p: (N,) training weights d_k/D (empirical skill counts over D, or P_s(k) for D → ∞).
      t: (T,) times.
      p_test: (N,) test weights P_s(k) for the loss (default: ``p``).
      eta: learning rate η > 0 (default 1).
      absent_mass: Σ_{k>N} P_s(k), the probability of skills the model has no basis function for
        (default 0).

    Returns:
      :class:`SkillTrajectory` with ``network_map`` (the R_k, alias ``R``) of shape (T, N), in
      the dtype of the inputs.
    """
    t = as_float(t, "t")
    p = as_float(p, "p")
    if t.ndim != 1 or p.ndim != 1:
        raise ValueError(f"t must be (T,) and p must be (N,), got {t.shape} and {p.shape}")
    r0 = as_float(r0, "r0")
    if r0.ndim > 1 or (r0.ndim == 1 and r0.shape[0] != p.shape[0]):
        raise ValueError(
            f"r0 must be a scalar or have shape ({p.shape[0]},) like p, got {r0.shape}"
        )
    eta = as_float(eta, "eta")
    for x, name in ((t, "t"), (p, "p"), (r0, "r0"), (eta, "eta")):
        check_finite(x, name)
    check_positive(eta, "eta (learning rate η)")
    check_skill_inputs(S, r0, p)  # skill_strength's checks: they do not run under jit
    p_test = p if p_test is None else as_float(p_test, "p_test")
    return _closed_form(r0, S, p, t, p_test, eta, absent_mass)


def loss(params: dict, task: tuple) -> jax.Array:
    """Raw-parameter loss the flow descends: Σ_k p_k ½(S − a_k b_k)² (T Eq 4.10 weighted by Eq 4.17).

    Balanced a_k(0) = b_k(0) with R_k = a_k b_k gives Ṙ_k = 2ηp_k R_k(S − R_k), solved by
    :func:`skill_strength`.

    Args:
      params: ``{"a": (N,), "b": (N,)}``.
      task: ``(S, p)``, the target scale () and the training weights p_k (N,).

    Returns:
      () loss.
    """
    S, p = task
    return 0.5 * jnp.sum(p * (S - params["a"] * params["b"]) ** 2)


def skill_frequencies(alpha: float | jax.Array, n_s: int) -> jax.Array:
    """Power-law skill frequencies P_s(k) = A k^{−(α+1)}, k = 1..n_s (T Eq 4.1).

    Args:
      alpha: α > 0 (the frequencies decay with exponent α + 1); scalar, may be traced.
      n_s: number of skills n_s ≥ 1 (static).

    Returns:
      (n_s,) probabilities summing to one (A = 1/Σ_j j^{−(α+1)}).
    """
    if int(n_s) < 1:
        raise ValueError(f"n_s (number of skills) must be >= 1, got {n_s}")
    check_alpha(alpha)
    alpha = as_float(alpha, "alpha")
    k = jnp.arange(1, int(n_s) + 1, dtype=alpha.dtype)
    w = k ** (-(alpha + 1))
    return w / jnp.sum(w)


def skill_strength(t, S, r0, p, eta=1.0) -> jax.Array:
    """Skill strength R_k(T) of the balanced multilinear model (T Eq 4.11 / B.1).

    .. math::  R_k(T) = S R_0 / (R_0 + (S − R_0) e^{−2 η p_k S T})

    This form is exact for every R_0 ≥ 0 (also R_0 > S, where it decays onto S) and never
    overflows; a skill with p_k = 0 (d_k = 0, never observed) keeps R_k(0) (Eq B.12).

    An elementwise formula, it keeps the paper's R_k(T; S, R_0, p_k) order, times first (as
    :func:`sims.emergence.time_emergence` does): its arguments broadcast, so a reordering could not
    be told apart from this order for scalars. :func:`solve` and :func:`loss_curve` follow the
    package contract (init, task, t).

    Args:
      t: times T, any shape broadcastable with the others.
      S: target scale S > 0.
      r0: initial skill strength R_k(0) = a_k(0) b_k(0) ≥ 0 (balanced init a_k(0) = b_k(0)).
      p: training weight of the skill d_k/D ≥ 0 (P_s(k) for infinite data).
      eta: learning rate η.

    Returns:
      R_k(T), the broadcast shape of the arguments.
    """
    S = as_float(S, "S")
    check_skill_inputs(S, r0, p)
    decay = jnp.exp(-2.0 * eta * p * S * t)
    num = S * r0
    den = r0 + (S - r0) * decay
    # r0 = 0 is a fixed point of the flow (a = b = 0): R stays 0 (avoid 0/0 once decay underflows).
    return jnp.where(r0 == 0, jnp.zeros_like(num * den), num / jnp.where(den == 0, 1.0, den))


def skill_loss(R, S) -> jax.Array:
    """Skill loss L_k = ½ (S − R_k)² of the multilinear model (T Eq 4.10)."""
    return 0.5 * (S - R) ** 2


def loss_curve(
    r0: jax.Array | float,
    S: jax.Array | float,
    p: jax.Array,
    t: jax.Array,
    *,
    p_test: jax.Array | None = None,
    eta: jax.Array | float = 1.0,
    absent_mass: jax.Array | float = 0.0,
    batch_size: int = 1,
) -> jax.Array:
    """Test loss L(T) of the multilinear model without storing all R_k(T) (T Eq 4.17).

    Same quantity as ``solve(r0, S, p, t, ...).loss`` but evaluated ``batch_size`` times at a time,
    so 10^5 skills × 10^3 times need only (batch_size × N) memory. Jittable (``batch_size``
    static).

    Args:
      r0, S, p, t, p_test, eta, absent_mass: as in :func:`solve`.
      batch_size: number of times evaluated together (default 1).

    Returns:
      (T,) loss values.
    """
    batch_size = int(batch_size)
    t = jnp.asarray(t)
    p = jnp.asarray(p)
    p_test = p if p_test is None else jnp.asarray(p_test)
    r0 = jnp.asarray(r0)
    if t.ndim != 1 or p.ndim != 1:
        raise ValueError(f"t must be (T,) and p must be (N,), got {t.shape} and {p.shape}")
    if r0.ndim > 1 or (r0.ndim == 1 and r0.shape != p.shape):
        raise ValueError(f"r0 must be a scalar or have shape {p.shape} like p, got {r0.shape}")
    check_positive(S, "S (target scale)")

    def one(ti):
        R = skill_strength(ti, S, r0, p, eta)
        return jnp.dot(skill_loss(R, S), p_test)

    return jax.lax.map(one, t, batch_size=batch_size) + 0.5 * S**2 * absent_mass


def one_shot_limit(d, S, r0) -> jax.Array:
    """R_k(∞): one-shot learner, S if the skill was observed (d_k > 0) else R_k(0) (T Eq B.12, 4.26).

    Args:
      d: skill counts d_k ≥ 0 in the training set, any shape.
      S: target scale S; r0: R_k(0).

    Returns:
      R_k(T → ∞), the broadcast shape.
    """
    check_positive(d, "d (skill counts d_k)", strict=False)
    d, S, r0 = jnp.asarray(d), as_float(S, "S"), jnp.asarray(r0)
    return jnp.where(d > 0, S * jnp.ones_like(r0), r0 * jnp.ones_like(S))


def basis_function_limit(N, n_s: int, S) -> jax.Array:
    """R_k(∞) for T, D → ∞ when the model has the N most frequent g_k (T Eq B.14, 4.35).

    Skills k ≤ N are learned (R_k = S); skills without a basis function have R_k = 0 (the model
    has no component along g_k; the thesis writes R_k(0) ≈ 0), hence L_k = S²/2 (Eq B.13).

    Args:
      N: number of basis functions N ≥ 0 (scalar or array, may be traced).
      n_s: number of skills (static).
      S: target scale S.

    Returns:
      (..., n_s) skill strengths, leading shape that of N.
    """
    k = jnp.arange(1, int(n_s) + 1)
    N = jnp.asarray(N)[..., None]
    S = as_float(S, "S")
    return jnp.where(k <= N, S, jnp.zeros_like(S))


def verify(key: jax.Array, n_cases: int = 8) -> float:
    """Max |closed form − integrated raw flow| / S over random cases (used by ``lrrich verify``).

    Each case draws n_s skills with power-law frequencies, a data set of D samples (so some
    d_k = 0), balanced small initialisations and a learning rate, integrates the raw (a_k, b_k)
    gradient flow of the sample-level loss Eq B.3 (not the decoupled Eq B.4) and compares
    R_k = a_k b_k with :func:`skill_strength` at 12 times spanning the emergence of every skill.
    """
    from sims.gradient_flow import gradient_flow

    worst = 0.0
    for key_c in jax.random.split(key, n_cases):
        ks = jax.random.split(key_c, 6)
        n_s = 6
        alpha = float(jax.random.uniform(ks[0], (), minval=0.3, maxval=1.5))
        S = float(jax.random.uniform(ks[1], (), minval=0.5, maxval=5.0))
        eta = float(jax.random.uniform(ks[2], (), minval=0.5, maxval=2.0))
        D = 40
        P = skill_frequencies(alpha, n_s)
        skill = jax.random.choice(ks[3], n_s, (D,), p=P)
        sign = jnp.where(jax.random.bernoulli(ks[4], 0.5, (D,)), 1.0, -1.0)
        a0 = S * 10.0 ** jax.random.uniform(ks[5], (n_s,), minval=-3.0, maxval=-1.0)
        a0 = jnp.sqrt(a0)
        d = jnp.bincount(skill, length=n_s)
        p = d / D
        pmin = float(jnp.min(jnp.where(p > 0, p, 1.0)))
        t = jnp.linspace(0.0, 12.0 / (2 * eta * S * pmin), 12)
        ys = gradient_flow(_sample_loss, {"a": a0, "b": a0}, t, (skill, sign, S), lr=eta)
        R_flow = ys["a"] * ys["b"]
        R_cf = skill_strength(t[:, None], S, a0**2, p[None, :], eta)
        worst = max(worst, float(jnp.max(jnp.abs(R_flow - R_cf))) / S)
    return worst


def _sample_loss(params, args):
    """The raw empirical loss Eq B.3 on D samples: ½ mean_j (S g_j − Σ_k a_k b_k g_k(i_j, x_j))²."""
    skill, sign, S = args
    n = params["a"].shape[0]
    G = jax.nn.one_hot(skill, n, dtype=sign.dtype) * sign[:, None]  # g_k(i_j, x_j), Eq 4.2
    f = G @ (params["a"] * params["b"])
    return 0.5 * jnp.mean((S * sign - f) ** 2)


@jax.jit  # one program per shapes (eagerly, each primitive compiled on its own)
def _closed_form(r0, S, p, t, p_test, eta, absent_mass) -> SkillTrajectory:
    """:func:`solve` on validated inputs."""
    R = skill_strength(t[:, None], S, r0, p[None, :], eta)
    Lk = skill_loss(R, S)
    loss = Lk @ p_test + 0.5 * S**2 * absent_mass
    return SkillTrajectory(t, R, Lk, loss)
