"""The verdict machinery of the comparison rows: tolerances over seeds, orderings, the row's
keys, the random-feature reference, and how report.md prints them."""

import math

import numpy as np
import pytest
from scipy import stats

from lrrich import io, report
from lrrich.experiments import _comparison as cmp
from lrrich.runner import run_experiment
from tests.lrrich import toy_experiment

_toy = toy_experiment.autouse_fixture()


def test_within_decides_only_when_every_seed_agrees():
    # dlr: |measured − paper| < 0.05
    assert cmp.within([0.10, 0.12, 0.14], 0.11, "dlr") is True
    assert cmp.within([0.30, 0.40], 0.11, "dlr") is False
    assert cmp.within([0.10, 0.20], 0.11, "dlr") is None  # the seeds straddle the bound
    assert cmp.within(0.12, 0.11, "dlr") is True  # one seed
    assert cmp.within([0.11, math.nan], 0.11, "dlr") is None  # NaN is never close
    # a gap equal to the bound is outside, also where float round-off makes it 0.04999…
    assert 0.15 - 0.10 < 0.05 and cmp.within([0.15, 0.156], 0.10, "accuracy") is False
    # relative: |measured / paper − 1| ≤ 0.25
    assert cmp.within([5.0, 4.0], 4.0, "constant") is True
    assert cmp.within([5.1], 4.0, "constant") is False


def test_ordered_every_seed_then_welch():
    assert cmp.ordered([0.1, 0.2], [0.3, 0.4]) is True
    assert cmp.ordered([0.5, 0.6], [0.3, 0.4]) is False
    assert cmp.ordered([0.1, 0.5], [0.3, 0.4]) is None  # mixed, too few seeds for the test
    assert cmp.ordered([0.1], [0.2], margin=0.05) is True
    assert cmp.ordered([0.1], [0.2], margin=0.15) is False
    # mixed seeds, but the means differ by far more than the spread: the Welch test decides
    low = np.array([0.10, 0.11, 0.12, 0.13, 0.50])
    high = np.array([0.60, 0.61, 0.62, 0.63, 0.40])
    p = stats.ttest_ind(low, high, equal_var=False, alternative="less").pvalue
    # Welch's t written out: (mean_a − mean_b) / sqrt(s_a²/n + s_b²/n)
    t = (low.mean() - high.mean()) / math.sqrt(low.var(ddof=1) / 5 + high.var(ddof=1) / 5)
    assert t < -2.5 and p < cmp.ORDER_ALPHA
    assert cmp.ordered(low, high) is True and cmp.ordered(high, low) is False
    # mixed seeds with overlapping means: inconclusive
    assert cmp.ordered([0.1, 0.3, 0.2], [0.2, 0.2, 0.25]) is None
    with pytest.raises(ValueError, match="one value per seed"):
        cmp.ordered([0.1, 0.2], [0.3])


def test_judge_and_holds():
    assert cmp.judge(True, False) == "reproduced"
    assert cmp.judge(False, True) == "direction reproduced"
    assert cmp.judge(False, False) == "not reproduced"
    assert cmp.judge(None, True) == "inconclusive"
    assert cmp.judge(False, None) == "inconclusive"
    assert cmp.holds(None) == "inconclusive" and cmp.holds(np.bool_(True)) == "reproduced"
    assert cmp.every([True, None]) is None and cmp.every([True, False, None]) is False


def test_row_keeps_old_keys_and_counts_seeds():
    ref = cmp.rf_reference(1000, 256, 10)
    r = cmp.row(
        "D_LR",
        0.1,
        "0.12 ± 0.01",
        dataset="d",
        scale="s",
        verdict="inconclusive",
        criterion="D §5: 'x'",
        tolerance=cmp.tolerance("dlr"),
        values={"rich": [0.1, np.float32(0.2), None], "lazy": [0.4, 0.5, 0.6]},
        reference=ref,
    )
    assert {"quantity", "paper", "measured", "dataset", "scale", "verdict", "note"} <= set(r)
    assert r["n_seeds"] == 3 and r["values"]["rich"][2] is None
    assert isinstance(r["values"]["rich"][1], float)
    assert "|measured - paper| < 0.05" in r["tolerance"]
    with pytest.raises(ValueError, match="verdict must be one of"):
        cmp.row(
            "q", 1, 1, dataset="", scale="", verdict="ok", criterion="c", tolerance="t", values=[1]
        )
    with pytest.raises(ValueError, match="criterion"):
        cmp.row(
            "q",
            1,
            1,
            dataset="",
            scale="",
            verdict="reproduced",
            criterion="",
            tolerance="t",
            values=[1],
        )
    with pytest.raises(ValueError, match="same n"):
        cmp.row(
            "q",
            1,
            1,
            dataset="",
            scale="",
            verdict="reproduced",
            criterion="c",
            tolerance="t",
            values={"a": [1, 2], "b": [1]},
        )
    with pytest.raises(ValueError, match="unknown tolerance"):
        cmp.tolerance("nope")


def test_rf_reference_is_the_closed_form():
    ref = cmp.rf_reference(1000, 256, 10)
    # fitted readout, m = n − 1, d = min(m, p): 1 − sqrt(r m p / (d² (m + p + 1))), written out
    m, p, r = 999.0, 256.0, 10.0
    assert ref["dlr"] == pytest.approx(1 - math.sqrt(r * m * p / (p**2 * (m + p + 1))), rel=1e-12)
    assert (ref["n"], ref["p"], ref["rank"], ref["rank_source"]) == (1000, 256, 10, "C")
    assert cmp.rf_reference(20, 32, 97)["rank"] == 19  # capped at min(n − 1, p)
    with pytest.raises(ValueError, match="rank_source"):
        cmp.rf_reference(10, 4, 2, rank_source="guess")


def test_report_prints_every_rows_test_and_counts_verdicts(tmp_path):
    run_experiment("toy", None, tmp_path / "r")
    res = io.read_json(tmp_path / "r" / "results.json")
    common = dict(dataset="toy data", scale="tiny", criterion="D §5: 'claim'")
    res["comparison"] = [
        cmp.row(
            "D_LR",
            0.1,
            "0.3",
            verdict="direction reproduced",
            tolerance=cmp.tolerance("dlr"),
            values=[0.3, 0.31, 0.29],
            reference=cmp.rf_reference(100, 32, 10),
            **common,
        ),
        cmp.row(
            "order",
            "a < b",
            "a < b",
            verdict="inconclusive",
            tolerance=cmp.ORDER_TEST,
            values={"a": [1, 2, 3], "b": [2, 1, 4]},
            **common,
        ),
        {"quantity": "old row", "paper": 1, "measured": 1, "verdict": "reproduced"},
    ]
    io.write_json(tmp_path / "r" / "results.json", res)
    md = report.render_markdown(tmp_path / "r")
    table = md.split("## Paper vs measured")[1].split("## Disagreements")[0]
    assert "| quantity | paper | measured | n | random-feature D_LR | verdict |" in table
    ref = f"{cmp.rf_reference(100, 32, 10)['dlr']:.3f} (n 100, p 32, r 10 = C)"
    assert f"| D_LR | 0.1 | 0.3 | 3 | {ref} | direction reproduced |" in table
    assert "  - criterion: D §5: 'claim'" in table
    assert "  - tolerance / test: dlr: |measured - paper| < 0.05" in table
    assert "  - per-seed values (n = 3 seeds): 0.3, 0.31, 0.29" in table
    assert "  - per-seed values (n = 3 seeds): a: 1, 2, 3; b: 2, 1, 4" in table
    assert "  - criterion: —" in table  # an old row without the new keys
    section = md.split("## Disagreements")[1].split("## ")[0]
    assert "Of 3 quantities: 1 reproduced, 1 direction reproduced, 1 inconclusive." in section


def test_every_registered_experiment_writes_a_comparison_table():
    import importlib
    import inspect

    from lrrich.registry import discover

    for name, exp in discover().items():
        if exp.module is None or name == "toy":
            continue
        mod = importlib.import_module(exp.module)
        assert callable(getattr(mod, "comparison", None)), name
        assert "comparison" in inspect.getsource(mod.run), name  # run() returns the rows
