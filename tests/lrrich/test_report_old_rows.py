"""Reports of runs recorded before claims were declared: their stored comparison rows (the keys
of the older format) still render, with every row's test and a count of the verdicts."""

from lrrich import io, report
from lrrich.runner import run_experiment
from tests.lrrich import toy_experiment

_toy = toy_experiment.autouse_fixture()

_REF = {"dlr": 0.441, "n": 100, "p": 32, "rank": 10, "rank_source": "C"}


def test_report_prints_every_stored_rows_test_and_counts_verdicts(tmp_path):
    run_experiment("toy", None, tmp_path / "r")
    res = io.read_json(tmp_path / "r" / "results.json")
    common = dict(dataset="toy data", scale="tiny", criterion="D §5: 'claim'", note="")
    res["comparison"] = [
        dict(
            quantity="D_LR", paper=0.1, measured="0.3", verdict="direction reproduced",
            tolerance="dlr: |measured - paper| < 0.05 in every seed", n_seeds=3,
            values=[0.3, 0.31, 0.29], reference=_REF, **common,
        ),
        dict(
            quantity="order", paper="a < b", measured="a < b", verdict="inconclusive",
            tolerance="the ordering in every seed", n_seeds=3,
            values={"a": [1, 2, 3], "b": [2, 1, 4]}, reference=None, **common,
        ),
        {"quantity": "old row", "paper": 1, "measured": 1, "verdict": "reproduced"},
    ]  # fmt: skip
    io.write_json(tmp_path / "r" / "results.json", res)
    md = report.render_markdown(tmp_path / "r")
    table = md.split("## Paper vs measured")[1].split("## Disagreements")[0]
    assert "| quantity | paper | measured | n | random-feature D_LR | verdict |" in table
    assert (
        "| D_LR | 0.1 | 0.3 | 3 | 0.441 (n 100, p 32, r 10 = C) | direction reproduced |" in table
    )
    assert "  - criterion: D §5: 'claim'" in table
    assert "  - tolerance / test: dlr: |measured - paper| < 0.05" in table
    assert "  - per-seed values (n = 3 seeds): 0.3, 0.31, 0.29" in table
    assert "  - per-seed values (n = 3 seeds): a: 1, 2, 3; b: 2, 1, 4" in table
    assert "  - criterion: —" in table  # a row of the oldest format, without those keys
    section = md.split("## Disagreements")[1].split("## ")[0]
    assert "Of 3 quantities: 1 reproduced, 1 direction reproduced, 1 inconclusive." in section
