"""Multitask sparse parity (T Table 4.2, Eq 4.1–4.4; Michaud et al. 2023), generated on device.

Input (i, x): n_s control bits (one-hot of the skill i) followed by n_b uniform skill bits x; skill
i ∈ {1..n_s} is drawn with P_s(i) = A i^{−(α+1)} (Eq 4.1). Skill k reads m relevant bits M(k, x) and
its skill function is g_k(i, x) = (−1)^{Σ_j M_j(i, x)} if i = k else 0 (Eq 4.2); the target is
f*(i, x) = S Σ_k g_k(i, x) (Eq 4.4). Relevant bits are mutually exclusive across skills when
n_s·m ≤ n_b (as in T App. C.3), otherwise each skill draws its own m-subset.

Everything is a pure function of a PRNG key and a :class:`SparseParityTask` pytree, so fresh
batches are generated inside a jitted training step (no host round-trip).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = [
    "SparseParityTask",
    "SparseParityBatch",
    "make_sparse_parity",
    "sample_sparse_parity",
    "sample_skill",
    "skill_functions",
    "estimate_skill_strength",
]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class SparseParityTask:
    """A multitask sparse-parity problem (T Table 4.2).

    Attributes:
      relevant: (n_s, m) int indices of the relevant skill bits of each skill (M in Eq 4.2).
      probs: (n_s,) skill frequencies P_s(k) (Eq 4.1).
      S: target scale S (scalar array).
      n_s, n_b, m: numbers of skills, skill bits and relevant bits (static).
    """

    relevant: jax.Array
    probs: jax.Array
    S: jax.Array
    n_s: int = dataclasses.field(metadata=dict(static=True))
    n_b: int = dataclasses.field(metadata=dict(static=True))
    m: int = dataclasses.field(metadata=dict(static=True))

    @property
    def in_dim(self) -> int:
        """Input dimension n_s + n_b."""
        return self.n_s + self.n_b


class SparseParityBatch(NamedTuple):
    """A batch of samples."""

    x: jax.Array  # (B, n_s + n_b) float {0, 1}: one-hot control bits, then skill bits
    y: jax.Array  # (B,) targets S g_i(i, x) ∈ {±S}
    skill: jax.Array  # (B,) int skill index i − 1 ∈ [0, n_s)


def make_sparse_parity(
    key: jax.Array, n_s: int, n_b: int, m: int, alpha: float, S: float = 1.0, dtype=None
) -> SparseParityTask:
    """Draw the relevant bits of every skill and build the task (T Table 4.2, Eq 4.1).

    Args:
      key: PRNG key (the task is a deterministic function of it).
      n_s: number of skills n_s ≥ 1.
      n_b: number of skill bits n_b ≥ m.
      m: relevant bits per skill, 1 ≤ m ≤ n_b.
      alpha: power-law exponent α > 0 (frequencies ∝ i^{−(α+1)}).
      S: target scale S > 0.
      dtype: float dtype of ``probs`` and ``S`` (default: JAX's default float).

    Returns:
      :class:`SparseParityTask`.
    """
    if int(n_s) < 1:
        raise ValueError(f"n_s (number of skills) must be >= 1, got {n_s}")
    if int(m) < 1 or int(m) > int(n_b):
        raise ValueError(f"m (relevant bits) must satisfy 1 <= m <= n_b = {n_b}, got {m}")
    if not float(alpha) > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if not float(S) > 0:
        raise ValueError(f"S (target scale) must be > 0, got {S}")
    dtype = jnp.result_type(float) if dtype is None else dtype
    if n_s * m <= n_b:
        relevant = jax.random.permutation(key, n_b)[: n_s * m].reshape(n_s, m)
    else:
        u = jax.random.uniform(key, (n_s, n_b))
        relevant = jnp.argsort(u, axis=1)[:, :m]
    w = jnp.arange(1, n_s + 1, dtype=dtype) ** (-(float(alpha) + 1.0))
    return SparseParityTask(
        relevant=jnp.sort(relevant, axis=1).astype(jnp.int32),
        probs=w / jnp.sum(w),
        S=jnp.asarray(S, dtype),
        n_s=int(n_s),
        n_b=int(n_b),
        m=int(m),
    )


def _encode(task: SparseParityTask, skill: jax.Array, bits: jax.Array, dtype) -> SparseParityBatch:
    M = jnp.take_along_axis(bits, task.relevant[skill], axis=1)  # M(i, x), (B, m)
    sign = 1 - 2 * (jnp.sum(M, axis=1) % 2)  # (−1)^{Σ_j M_j}
    x = jnp.concatenate([jax.nn.one_hot(skill, task.n_s, dtype=dtype), bits.astype(dtype)], 1)
    return SparseParityBatch(x, task.S.astype(dtype) * sign.astype(dtype), skill)


def sample_sparse_parity(
    key: jax.Array, task: SparseParityTask, batch: int, dtype=jnp.float32
) -> SparseParityBatch:
    """Draw ``batch`` i.i.d. samples (i, x) ~ P_s(i) 2^{−n_b} with targets f*(i, x) (T Eq 4.1, 4.4).

    Jittable (``batch`` and ``dtype`` static).

    Returns:
      :class:`SparseParityBatch` with x of shape (batch, n_s + n_b).
    """
    k1, k2 = jax.random.split(key)
    skill = jax.random.categorical(k1, jnp.log(task.probs), shape=(batch,))
    bits = jax.random.bernoulli(k2, 0.5, (batch, task.n_b)).astype(jnp.int32)
    return _encode(task, skill, bits, dtype)


def sample_skill(
    key: jax.Array, task: SparseParityTask, k: int | jax.Array, n: int, dtype=jnp.float32
) -> SparseParityBatch:
    """Draw ``n`` samples of skill index ``k`` (0-based), x uniform (for R_k, Eq 4.7)."""
    bits = jax.random.bernoulli(key, 0.5, (n, task.n_b)).astype(jnp.int32)
    return _encode(task, jnp.full((n,), k, jnp.int32), bits, dtype)


def skill_functions(task: SparseParityTask, x: jax.Array) -> jax.Array:
    """Skill basis functions g_k(i, x) ∈ {−1, 0, 1} of encoded inputs (T Eq 4.2).

    Args:
      task: the task; x: (B, n_s + n_b) encoded inputs.

    Returns:
      (B, n_s) values g_k(i, x); row j is zero except at its own skill.
    """
    ctrl = x[:, : task.n_s] > 0.5
    bits = (x[:, task.n_s :] > 0.5).astype(jnp.int32)
    M = bits[:, task.relevant]  # (B, n_s, m): the relevant bits of every skill k
    parity = 1 - 2 * (jnp.sum(M, axis=2) % 2)
    return jnp.where(ctrl, parity, 0).astype(x.dtype)


def estimate_skill_strength(
    apply_fn: Callable[[jax.Array], jax.Array],
    key: jax.Array,
    task: SparseParityTask,
    n: int = 20_000,
    dtype=jnp.float32,
) -> jax.Array:
    """Skill strengths R_k = E_X[g_k(k, X) f(k, X)] on ``n`` fresh samples per skill (T Eq 4.7).

    Args:
      apply_fn: model, (B, n_s + n_b) → (B,) or (B, 1) outputs f.
      key: PRNG key for the held-out samples.
      task: the task; n: samples per skill (T App. C.3 uses 20,000).

    Returns:
      (n_s,) estimates of R_k (divide by S for R_k/S).
    """

    def one(k, kk):
        b = sample_skill(kk, task, k, n, dtype)
        f = apply_fn(b.x).reshape(n)
        return jnp.mean(f * b.y) / task.S.astype(dtype)  # y = S g_k

    ks = jnp.arange(task.n_s)
    return jax.lax.map(lambda a: one(*a), (ks, jax.random.split(key, task.n_s)))
