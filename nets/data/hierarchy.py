r"""The Random Hierarchy Model (Petrini et al. 2023; Kunin et al. 2024 App. D.3, Fig 6c).

An RHM with n_c classes, m synonyms, patch size s, vocabulary v and L levels is a random,
unambiguous context-free grammar of depth L: each class has m *synonymous* top-level s-tuples
(its production rules), each token of a lower level has m synonymous s-tuples of the level
below, and no s-tuple of a level is produced by two different symbols — so every input parses
back to a single class. A sample is a class, then one synonym chosen at every internal node of
the depth-L s-ary tree; the input is the one-hot code of the s^L leaves. The number of distinct
inputs is

.. math:: P_{\max} = n_c\, m^{\,1 + s + \dots + s^{L-1}}

(K App. D.3 quotes training sets as fractions of it). :func:`rules` draws the grammar,
:func:`num_data` gives P_max, and :func:`random_hierarchy` draws *distinct* samples, split into
disjoint training and test sets (Petrini et al. sample without replacement: a test input that is
also a training input would measure memorisation, not sample complexity).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nets.data.base import Dataset

_INDEX_LIMIT = 2**62
"""Below this many distinct inputs, samples are drawn as distinct int64 indices of the inputs
(exact); above it, as random paths with duplicates redrawn (collisions are then rarer than
n²/2^63)."""


class Rules(NamedTuple):
    """The production rules of one RHM.

    Attributes:
      top: (n_c, m, s) int — ``top[c, j]`` is class c's j-th synonymous top-level s-tuple.
      lower: L − 1 arrays (v, m, s) int, from the top level down — ``lower[l][a, j]`` is the
        j-th s-tuple that token a of level l + 1 (counting the top as level 0) produces.
    """

    top: np.ndarray
    lower: tuple[np.ndarray, ...]


def num_data(*, num_classes: int, m: int, s: int, levels: int) -> int:
    r"""P_max = n_c m^{1 + s + … + s^{L−1}}, the number of distinct inputs of the RHM (exact int)."""
    _check_sizes(num_classes=num_classes, m=m, s=s, v=1, levels=levels)
    return num_classes * m ** _internal_nodes(s, levels)


def rules(*, num_classes: int, m: int, s: int, v: int, levels: int, seed: int) -> Rules:
    r"""Draw the production rules of an RHM (Petrini et al. 2023 §2; K App. D.3).

    Class c's m top-level s-tuples are drawn without replacement from the v^s tuples, disjoint
    from every other class's (m n_c of them); at each lower level every token a ∈ {0…v−1}
    gets m tuples, disjoint between tokens (m v of them). This needs m n_c ≤ v^s and, for
    L ≥ 2, m v ≤ v^s.

    Args:
      num_classes: n_c.
      m: synonyms per symbol.
      s: patch size (tuple length).
      v: vocabulary size of every level.
      levels: L ≥ 1.
      seed: NumPy seed (the rules are the first draws of ``default_rng(seed)``).

    Returns:
      :class:`Rules`.
    """
    return _rules(np.random.default_rng(seed), num_classes, m, s, v, levels)


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
    r"""Distinct samples of the RHM of :func:`rules`, split into disjoint train and test sets.

    The rules are drawn first from ``default_rng(seed)`` (so they do not depend on n_train or
    n_test), then n_train + n_test distinct inputs uniformly without replacement: the first
    n_train are the training set, the rest the test set. A sample's class is uniform and its
    synonym at every node uniform, as in the generative process of K App. D.3. The input is the
    one-hot code (s^L, v) of the leaf sequence, flattened to s^L v entries (leaf-major).

    Args:
      n_train, n_test: numbers of samples; n_train + n_test ≤ P_max (:func:`num_data`).
      num_classes: n_c.
      m: number of synonyms per symbol.
      s: patch size.
      v: vocabulary size at every level.
      levels: L.
      seed: NumPy seed of the rules and the samples.

    Returns:
      :class:`Dataset` with float32 inputs (n, s^L v) and int32 labels in {0…n_c − 1}.
    """
    for name, n in (("n_train", n_train), ("n_test", n_test)):
        if not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"{name} must be a whole number ≥ 1, got {n!r}")
    rng = np.random.default_rng(seed)
    r = _rules(rng, num_classes, m, s, v, levels)  # first the rules, then the samples
    total = num_data(num_classes=num_classes, m=m, s=s, levels=levels)
    n = int(n_train) + int(n_test)
    if n > total:
        raise ValueError(
            f"n_train + n_test = {n} exceeds the {total} distinct inputs of this RHM "
            f"(P_max = n_c·m^(1+s+…+s^(L−1)))"
        )
    y, choices = _distinct_paths(rng, n, num_classes, m, s, levels, total)
    x = encode(r, y, choices, v)
    y = y.astype(np.int32)
    return Dataset(
        x[:n_train], y[:n_train], x[n_train:], y[n_train:], num_classes=num_classes,
        name="random-hierarchy",
    )  # fmt: skip


def encode(r: Rules, y: np.ndarray, choices: np.ndarray, v: int) -> np.ndarray:
    """The one-hot inputs (n, s^L v) of classes ``y`` (n,) with synonym ``choices`` (n, K).

    ``choices`` lists the synonym index at every internal node, level by level from the top
    (1, s, s², … s^{L−1} nodes, K = 1 + s + … + s^{L−1} in all), left to right within a level.
    """
    s = r.top.shape[2]
    n = len(y)
    seq = r.top[y, choices[:, 0]]  # (n, s)
    start = 1
    for level_rules in r.lower:
        width = seq.shape[1]
        seq = level_rules[seq, choices[:, start : start + width]].reshape(n, width * s)
        start += width
    return np.eye(v, dtype=np.float32)[seq].reshape(n, -1)


def _check_sizes(**sizes: int) -> None:
    for name, value in sizes.items():
        if not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be a whole number ≥ 1, got {value!r}")


def _internal_nodes(s: int, levels: int) -> int:
    return sum(s**k for k in range(levels))


def _distinct_tuples(rng, count: int, v: int, s: int) -> np.ndarray:
    """``count`` distinct s-tuples over a vocabulary of v, shape (count, s)."""
    codes = rng.choice(v**s, size=count, replace=False)
    return np.stack([(codes // v**k) % v for k in reversed(range(s))], axis=1)


def _rules(rng, num_classes: int, m: int, s: int, v: int, levels: int) -> Rules:
    _check_sizes(num_classes=num_classes, m=m, s=s, v=v, levels=levels)
    if m * num_classes > v**s or (levels > 1 and m * v > v**s):
        raise ValueError(
            f"the rules need m·n_c ≤ v^s (and m·v ≤ v^s for L ≥ 2): got m={m}, "
            f"n_c={num_classes}, v={v}, s={s}, L={levels}"
        )
    top = _distinct_tuples(rng, num_classes * m, v, s).reshape(num_classes, m, s)
    lower = tuple(_distinct_tuples(rng, v * m, v, s).reshape(v, m, s) for _ in range(levels - 1))
    return Rules(top, lower)


def _distinct_paths(rng, n: int, num_classes: int, m: int, s: int, levels: int, total: int):
    """n distinct (class, synonym choices) pairs, uniform without replacement: (n,), (n, K)."""
    k = _internal_nodes(s, levels)
    if total <= _INDEX_LIMIT:
        # input index = class + n_c · (c_0 + m c_1 + m² c_2 + …), a bijection onto [0, P_max)
        idx = rng.choice(total, size=n, replace=False)
        y = idx % num_classes
        rest = idx // num_classes
        choices = np.stack([(rest // m**j) % m for j in range(k)], axis=1)
        return y, choices
    y = np.empty(0, np.int64)
    choices = np.empty((0, k), np.int64)
    while len(y) < n:  # sequential redraws of duplicates: uniform without replacement
        more = n - len(y)
        y = np.concatenate([y, rng.integers(0, num_classes, size=more)])
        choices = np.concatenate([choices, rng.integers(0, m, size=(more, k))])
        _, first = np.unique(np.column_stack([y, choices]), axis=0, return_index=True)
        keep = np.sort(first)
        y, choices = y[keep], choices[keep]
    return y, choices
