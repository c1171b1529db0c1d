"""The Random Hierarchy Model (Petrini et al. 2023; Kunin et al. 2024 App. D.3, Fig 6c)."""

from __future__ import annotations

import numpy as np

from nets.data.base import Dataset


def _distinct_tuples(rng, count: int, v: int, s: int) -> np.ndarray:
    """``count`` distinct s-tuples over a vocabulary of v, shape (count, s)."""
    codes = rng.choice(v**s, size=count, replace=False)
    return np.stack([(codes // v**k) % v for k in reversed(range(s))], axis=1)


def random_hierarchy(
    n_train: int,
    n_test: int,
    *,
    num_classes: int = 4,
    m: int = 4,
    s: int = 2,
    v: int = 8,
    levels: int = 3,
    seed: int = 0,
) -> Dataset:
    r"""Samples of a random hierarchy model with n_c classes, m synonyms, patches s, vocab v, L levels.

    The rules are drawn once from ``seed``: each class has m distinct top-level s-tuples and each
    token of each lower level m distinct s-tuples, no tuple shared between two symbols (this
    needs :math:`m\,n_c \le v^s` and :math:`m\,v \le v^s`). A sample picks a class, then
    a synonym uniformly at every node; the input is the one-hot code (s^L, v) of the leaf
    sequence, flattened to s^L v entries.

    Args:
      n_train, n_test: numbers of samples (drawn independently, with replacement).
      num_classes: n_c.
      m: number of synonyms per symbol.
      s: patch size.
      v: vocabulary size at every level.
      levels: L.
      seed: NumPy seed of the rules and the samples.

    Returns:
      :class:`Dataset` with float32 inputs (n, s^L v) and n_c classes.
    """
    if m * num_classes > v**s or m * v > v**s:
        raise ValueError(
            f"need m·n_c ≤ v^s and m·v ≤ v^s; got m={m}, n_c={num_classes}, v={v}, s={s}"
        )
    if min(n_train, n_test, levels, m, s, v, num_classes) < 1:
        raise ValueError("all sizes must be ≥ 1")
    rng = np.random.default_rng(seed)
    top = _distinct_tuples(rng, num_classes * m, v, s).reshape(num_classes, m, s)
    lower = [_distinct_tuples(rng, v * m, v, s).reshape(v, m, s) for _ in range(levels - 1)]

    def sample(n):
        y = rng.integers(0, num_classes, size=n)
        seq = top[y, rng.integers(0, m, size=n)]  # (n, s)
        for rules in lower:
            choice = rng.integers(0, m, size=seq.shape)
            seq = rules[seq, choice].reshape(n, -1)  # each token → s tokens
        x = np.eye(v, dtype=np.float32)[seq].reshape(n, -1)
        return x, y.astype(np.int32)

    x_tr, y_tr = sample(n_train)
    x_te, y_te = sample(n_test)
    return Dataset(x_tr, y_tr, x_te, y_te, num_classes=num_classes, name="random-hierarchy")
