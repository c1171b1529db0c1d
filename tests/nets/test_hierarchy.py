"""The Random Hierarchy Model against its defining properties (Petrini et al. 2023; K App. D.3).

The reference here is a naive parser and a naive enumeration written from the grammar's
definition: every input must parse bottom-up through the rules to its own class's top-level
tuple, and the set of all inputs must have P_max = n_c m^(1 + s + … + s^(L−1)) elements.
"""

import itertools

import numpy as np
import pytest

from nets.data import load
from nets.data.hierarchy import num_data, random_hierarchy, rules

SMALL = dict(num_classes=2, m=2, s=2, v=4, levels=2)  # P_max = 2 · 2^3 = 16
PAPER = dict(num_classes=8, m=4, s=2, v=8, levels=3)  # K App. D.3: P_max = 8 · 4^7


def _tokens(x: np.ndarray, v: int) -> np.ndarray:
    """One-hot inputs (n, s^L v) back to token sequences (n, s^L)."""
    onehot = x.reshape(len(x), -1, v)
    np.testing.assert_array_equal(onehot.sum(axis=2), 1)
    return onehot.argmax(axis=2)


def _parse(r, seqs: np.ndarray) -> list[int | None]:
    """Naive bottom-up parse of leaf sequences (n, s^L); each one's class, or None if no rule
    produces it."""
    s = r.top.shape[2]

    def inverse(level_rules):  # s-tuple -> the symbol whose rule produces it
        return {tuple(map(int, level_rules[a, j])): a for a in range(len(level_rules))
                for j in range(level_rules.shape[1])}  # fmt: skip

    backs = [inverse(level_rules) for level_rules in reversed(r.lower)]
    top = inverse(r.top)
    out = []
    for seq in seqs:
        seq = [int(t) for t in seq]
        for back in backs:
            seq = [back.get(tuple(seq[i : i + s])) for i in range(0, len(seq), s)]
            if None in seq:
                break
        out.append(None if None in seq else top.get(tuple(seq)))
    return out


def _enumerate(r) -> set[tuple[int, ...]]:
    """Every leaf sequence the rules generate, by naive recursion (small RHMs only)."""

    def expand(symbol, level):
        if level == len(r.lower):
            return [(symbol,)]
        out = []
        for tup in r.lower[level][symbol]:
            for parts in itertools.product(*(expand(int(t), level + 1) for t in tup)):
                out.append(sum(parts, ()))
        return out

    seqs = set()
    for c in range(r.top.shape[0]):
        for tup in r.top[c]:
            for parts in itertools.product(*(expand(int(t), 0) for t in tup)):
                seqs.add(sum(parts, ()))
    return seqs


def test_rules_have_the_shapes_and_are_unambiguous():
    r = rules(**PAPER, seed=3)
    assert r.top.shape == (8, 4, 2) and len(r.lower) == 2
    assert all(rule.shape == (8, 4, 2) for rule in r.lower)
    for level in (r.top, *r.lower):
        assert level.min() >= 0 and level.max() < PAPER["v"]
        flat = [tuple(t) for t in level.reshape(-1, PAPER["s"])]
        assert len(set(flat)) == len(flat)  # no tuple produced by two symbols or twice by one


def test_num_data_counts_every_generated_input():
    for sizes in (SMALL, dict(num_classes=3, m=2, s=3, v=3, levels=2), dict(SMALL, levels=1)):
        r = rules(**sizes, seed=1)
        assert len(_enumerate(r)) == num_data(
            num_classes=sizes["num_classes"], m=sizes["m"], s=sizes["s"], levels=sizes["levels"]
        )
    assert num_data(num_classes=8, m=4, s=2, levels=3) == 8 * 4**7


def test_every_sample_parses_to_its_label():
    d = random_hierarchy(3000, 1000, **PAPER, seed=5)
    r = rules(**PAPER, seed=5)  # the rules depend on the seed only, not on the sample counts
    for x, y in ((d.x_train, d.y_train), (d.x_test, d.y_test)):
        seqs = _tokens(x, PAPER["v"])
        assert seqs.shape[1] == 2**3
        assert _parse(r, seqs) == y.tolist()


def test_train_and_test_are_distinct_disjoint_inputs():
    # Drawn with replacement, this RHM's 400 + 400 samples held 16 distinct inputs and every
    # test input was a training input.
    with pytest.raises(ValueError, match="exceeds the 16 distinct inputs"):
        random_hierarchy(400, 400, **SMALL)
    d = random_hierarchy(10, 6, **SMALL, seed=2)
    train = {bytes(row) for row in d.x_train.astype(np.uint8)}
    test = {bytes(row) for row in d.x_test.astype(np.uint8)}
    assert len(train) == 10 and len(test) == 6 and not train & test
    # all 16 inputs: exactly the set the rules generate
    seqs = {tuple(q) for q in _tokens(np.concatenate([d.x_train, d.x_test]), SMALL["v"])}
    assert seqs == _enumerate(rules(**SMALL, seed=2))


def test_counts_shapes_dtypes_and_class_balance():
    d = load("random_hierarchy", n_train=4000, n_test=500, **PAPER, seed=0)
    assert d.x_train.shape == (4000, 8 * 8) and d.x_test.shape == (500, 64)
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.int32
    assert d.num_classes == 8 and d.task == "classification"
    counts = np.bincount(d.y_train, minlength=8)
    # uniform classes: each count 500 ± 4.4 binomial standard deviations (√(4000·⅛·⅞) ≈ 21)
    assert np.all(np.abs(counts - 500) < 92)


def test_deterministic_under_a_fixed_seed():
    a, b = random_hierarchy(50, 20, **PAPER, seed=7), random_hierarchy(50, 20, **PAPER, seed=7)
    for field in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    c = random_hierarchy(50, 20, **PAPER, seed=8)
    assert not np.array_equal(a.x_train, c.x_train)
    np.testing.assert_array_equal(rules(**PAPER, seed=7).top, rules(**PAPER, seed=7).top)


def test_more_inputs_than_int64_draws_distinct_paths():
    big = dict(num_classes=2, m=4, s=2, v=4, levels=6)  # P_max = 2 · 4^63 > 2^62
    assert num_data(**{k: big[k] for k in ("num_classes", "m", "s", "levels")}) > 2**63
    d = random_hierarchy(300, 100, **big, seed=4)
    r = rules(**big, seed=4)
    seqs = _tokens(np.concatenate([d.x_train, d.x_test]), 4)
    assert len({tuple(q) for q in seqs}) == 400
    assert _parse(r, seqs) == np.concatenate([d.y_train, d.y_test]).tolist()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(num_classes=10, m=4, s=1, v=8), "m·n_c"),
        (dict(num_classes=2, m=5, s=1, v=4, levels=2), "m·v"),
        (dict(num_classes=2, m=0, s=2, v=4), "m must be a whole number"),
        (dict(num_classes=2, m=2, s=2, v=4, levels=0), "levels must be"),
        (dict(num_classes=2, m=2, s=2.0, v=4), "s must be a whole number"),
    ],
)
def test_impossible_parameters_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        random_hierarchy(5, 5, **kwargs)


def test_sample_counts_must_be_positive_whole_numbers():
    with pytest.raises(ValueError, match="n_train"):
        random_hierarchy(0, 5, **SMALL)
    with pytest.raises(ValueError, match="n_test"):
        random_hierarchy(5, 2.5, **SMALL)
