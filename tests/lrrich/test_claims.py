"""The claims engine: each rule of lrrich.claims on per-seed values, the statistics against
scipy's own tests, and the declarations' checks."""

import math

import numpy as np
import pytest
from scipy import stats

from lrrich import claims as C


def _claim(relation, *, premise=(), seeds=C.MIN_SEEDS, dlr=()):
    return C.Claim(
        "k", "D Fig 1", "'a quoted sentence'", "a quantity", "test", relation,
        premise=premise, seeds=seeds, dlr=dlr,
    )  # fmt: skip


def _verdict(relation, exact=False, **values):
    return C.judge(_claim(relation), C.measured(values, exact=exact))["verdict"]


def test_premise_failing_in_one_seed_means_not_tested():
    fits = C.Premise("train_acc", ">=", 0.94, "the network fits its training set")
    rec = C.measured({"dlr": [0.05, 0.06, 0.04], "train_acc": [0.99, 0.796, 0.97]}, seeds=[0, 1, 2])
    row = C.judge(_claim(C.Below("dlr", 0.1), premise=(fits,)), rec)
    assert row["verdict"] == "not tested"
    assert "seed 1: 0.796" in row["reason"] and "fits its training set" in row["reason"]
    assert row["premise"][0]["ok"] == [True, False, True]
    # the same values with every seed fitted are judged
    rec["values"]["train_acc"] = [0.99, 0.98, 0.97]
    assert C.judge(_claim(C.Below("dlr", 0.1), premise=(fits,)), rec)["verdict"] == "reproduced"


def test_value_rules_over_seeds():
    value = C.Value("dlr", 0.0087, "dlr")  # |measured − 0.0087| < 0.05
    assert _verdict(value, dlr=[0.01, 0.02, 0.03]) == "reproduced"
    assert _verdict(value, dlr=[0.01]) == "inconclusive"  # n = 1 < 3 seeds
    assert _verdict(value, exact=True, dlr=[0.01]) == "reproduced"  # one exact computation
    assert _verdict(value, dlr=[0.01, 0.2, 0.03]) == "inconclusive"  # the seeds split
    # a magnitude missed in every seed is decided, even on one seed (never inconclusive)
    assert _verdict(value, dlr=[0.119, 0.131, 0.107]) == "not reproduced"
    assert _verdict(value, dlr=[0.119]) == "not reproduced"


def test_missed_magnitude_with_a_direction():
    value = C.Value("rich", 0.0087, "dlr", direction=C.Less("rich", "lazy"))
    # direction: a paired test that passes (large, consistent gaps)
    kw = {"rich": [0.08, 0.07, 0.09], "lazy": [0.39, 0.37, 0.40]}
    assert _verdict(value, **kw) == "direction reproduced"
    # the same direction on one seed is not established: not reproduced, never inconclusive
    assert _verdict(value, rich=[0.08], lazy=[0.39]) == "not reproduced"
    # direction refuted
    assert _verdict(value, rich=[0.5, 0.52, 0.51], lazy=[0.3, 0.31, 0.29]) == "not reproduced"


def test_ordering_is_a_one_sided_paired_t_test():
    low = np.array([0.10, 0.30, 0.12])
    high = np.array([0.20, 0.31, 0.40])  # ordered in every seed, but the gaps vary a lot
    p = stats.ttest_rel(low, high, alternative="less").pvalue
    d = high - low
    t = d.mean() / (d.std(ddof=1) / math.sqrt(3))  # paired t written out
    assert p == pytest.approx(stats.t.sf(t, 2)) and p > C.ALPHA
    # "the ordering in every seed" at n = 3 is a sign test at p = 0.125: not enough
    assert _verdict(C.Less("a", "b"), a=low, b=high) == "inconclusive"
    tight = low + 0.001 * np.array([0.0, 1.0, 2.0])
    high2 = tight + np.array([0.20, 0.21, 0.22])
    assert stats.ttest_rel(tight, high2, alternative="less").pvalue < C.ALPHA
    assert _verdict(C.Less("a", "b"), a=tight, b=high2) == "reproduced"
    assert _verdict(C.Less("a", "b"), a=high2, b=tight) == "not reproduced"  # reverse test
    # a margin: low < high − margin
    assert _verdict(C.Less("a", "b", margin=0.25), a=tight, b=high2) == "not reproduced"


def test_boundary_is_a_one_sample_t_test():
    v = np.array([0.087, 0.082, 0.092])
    p = stats.ttest_1samp(v, 0.1, alternative="less").pvalue
    assert p < C.ALPHA and _verdict(C.Below("dlr", 0.1), dlr=v) == "reproduced"
    near = np.array([0.09, 0.11, 0.095])
    assert stats.ttest_1samp(near, 0.1, alternative="less").pvalue > C.ALPHA
    assert _verdict(C.Below("dlr", 0.1), dlr=near) == "inconclusive"
    assert _verdict(C.Above("dlr", 0.1), dlr=v) == "not reproduced"
    # one seed has no spread: undecided, and a decided ordering still needs the seeds
    assert _verdict(C.Below("dlr", 0.1), dlr=[0.02]) == "inconclusive"
    assert _verdict(C.Below("dlr", 0.1), exact=True, dlr=[0.02]) == "reproduced"


def test_zero_spread_decides_by_sign_and_nan_is_undecided():
    assert _verdict(C.Above("s", 0.99), s=[1.0, 1.0, 1.0]) == "reproduced"
    assert _verdict(C.Below("dlr", 0.1), dlr=[0.05, float("nan"), 0.04]) == "inconclusive"


def test_holds_and_all():
    holds = C.Holds("ok", "the grid minimum at small tau, upstream")
    assert _verdict(holds, ok=[1, 1, 1]) == "reproduced"
    assert _verdict(holds, ok=[0, 0, 0]) == "not reproduced"
    assert _verdict(holds, ok=[1, 0, 1]) == "inconclusive"
    assert _verdict(holds, ok=[1]) == "inconclusive"  # one seed
    both = C.All((C.Less("a", "b"), C.Less("b", "c")))
    assert _verdict(both, exact=True, a=[1.0], b=[2.0], c=[3.0]) == "reproduced"
    assert _verdict(both, exact=True, a=[1.0], b=[2.0], c=[1.5]) == "not reproduced"


def test_more_seeds_asked_than_measured():
    claim = _claim(C.Less("a", "b"), seeds=5)
    row = C.judge(claim, C.measured({"a": [0.1, 0.1, 0.1], "b": [0.5, 0.5, 0.5]}))
    assert row["verdict"] == "inconclusive" and "3 of the 5 seeds" in row["reason"]


def test_row_carries_baseline_reference_and_skips_unmeasured_claims():
    claim = _claim(C.Below("dlr", 0.1), dlr=("dlr",))
    ref = C.rf_reference(1000, 256, 10)
    rec = C.measured(
        {"dlr": [0.07, 0.08, 0.075]},
        baseline={"dlr": [0.51, 0.52, 0.50]},
        reference={"dlr": ref},
        deviations=["4,000 images instead of 60,000"],
    )
    row = C.judge(claim, rec)
    assert C.baseline_text(row) == "0.51 ± 0.01"
    assert C.reference_text(row).startswith(f"{ref['dlr']:.3f} (n 1000, p 256, r 10)")
    assert "4,000 images" in row["note"] and row["n_seeds"] == 3
    assert C.judge(_claim(C.Below("other", 0.1)), rec) is None
    assert C.judge_all([claim, _claim(C.Below("other", 0.1))], rec) == [row]


def test_declarations_are_checked():
    with pytest.raises(ValueError, match="split"):
        C.Claim("k", "D", "'q'", "x", "validation", C.Below("a", 1))
    with pytest.raises(ValueError, match="not read"):
        C.Claim("k", "D", "'q'", "x", "test", C.Below("a", 1), dlr=("b",))
    with pytest.raises(ValueError, match="exact=True"):
        C.Claim("k", "D", "'q'", "x", "test", C.Below("a", 1), seeds=1)
    with pytest.raises(ValueError, match="op"):
        C.Premise("a", "=>", 1.0, "a")
    with pytest.raises(ValueError, match="one value per seed"):
        C.measured({"a": [1.0, 2.0], "b": [1.0]})


def test_undefined_seed_values_are_shown_not_crashed_on():
    # a network with constant outputs has an undefined D_LR: NaN in the run, null in JSON
    from lrrich.table import report_lines, terminal_table

    rec = C.measured({"dlr": [0.05, float("nan"), 0.04]}, baseline={"dlr": [0.5, None, 0.5]})
    assert rec["values"]["dlr"][1] is None
    row = C.judge(_claim(C.Below("dlr", 0.1), dlr=("dlr",)), rec)
    assert (
        row["verdict"] == "inconclusive"
        and C.values_text(row["values"]["dlr"]) == "0.05, NaN, 0.04"
    )
    assert any("0.05, NaN, 0.04" in line for line in report_lines([row]))
    assert "INCONCLUSIVE" in terminal_table([row])


def test_rf_reference_is_the_closed_form():
    ref = C.rf_reference(1000, 256, 10)
    # fitted readout, m = n − 1, d = min(m, p): 1 − sqrt(r m p / (d² (m + p + 1))), written out
    m, p, r = 999.0, 256.0, 10.0
    assert ref["dlr"] == pytest.approx(1 - math.sqrt(r * m * p / (p**2 * (m + p + 1))), rel=1e-12)
    assert (ref["n"], ref["p"], ref["rank"], ref["rank_source"]) == (1000, 256, 10, "C")
    assert C.rf_reference(20, 32, 97)["rank"] == 19  # capped at min(n − 1, p)
    with pytest.raises(ValueError, match="rank_source"):
        C.rf_reference(10, 4, 2, rank_source="guess")


def test_an_exact_claim_in_a_record_of_seeds():
    # a closed form checked beside one trained seed: the closed form is one exact computation
    rec = C.measured({"err": [7e-11], "dlr": [0.16]})
    exact = C.Claim(
        "e", "T Eq 3.9", "'exact'", "error", "exact", C.Value("err", 0, "closed_form"), exact=True
    )
    assert C.judge(exact, rec)["verdict"] == "reproduced"
    assert "one exact computation" in C.judge(exact, rec)["reason"]
    assert _verdict(C.Below("dlr", 0.5), dlr=[0.16]) == "inconclusive"  # the seed is no exact value


def test_quoting_builds_the_rows_of_one_quoted_passage():
    fits = C.Premise("train_acc", ">=", 0.9, "fits")
    row = C.quoting("S's table", "'a quoted row'", premise=(fits,), note="shared")
    claim = row("dlr-after", "test D_LR", C.Below("dlr", 0.1), "0.11", dlr=("dlr",))
    assert claim == C.Claim(
        "dlr-after", "S's table", "'a quoted row'", "test D_LR", "test", C.Below("dlr", 0.1),
        paper="0.11", premise=(fits,), dlr=("dlr",), note="shared",
    )  # fmt: skip
    # a row's own fields win over the shared ones, the quote and the place too
    other = row("acc", "accuracy", C.Above("acc", 0.5), source="D Fig 4", quote="'other'", note="")
    assert (other.source, other.quote, other.note) == ("D Fig 4", "'other'", "")
    assert other.premise == (fits,)
    assert C.quoting("K Fig 3", "'q'", "exact")("k", "q", C.Holds("h", "t")).split == "exact"
