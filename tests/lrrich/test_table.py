"""Verdict tables from recorded runs: the committed docs table is what the records give, a run is
recorded and judged end to end, and the report, its HTML and the terminal show the verdicts."""

import dataclasses
import re
import types
from pathlib import Path

import pytest

from lrrich import claims as C
from lrrich import io, registry, table
from lrrich.cli import main
from lrrich.report import write_report
from lrrich.runner import run_experiment


def test_committed_docs_table_matches_the_records():
    # `lrrich table --check`: no verdict or number of docs/experiments.md is typed by hand
    assert main(["table", "--check"]) == 0, "run `lrrich table` and commit docs/experiments.md"


def test_every_record_names_a_registered_experiment_and_its_provenance():
    records = table.load_records()
    assert records, "docs/records holds the recorded runs behind the docs table"
    names = registry.names()
    for rec in records:
        assert rec["experiment"] in names, rec["path"]
        for key in ("label", "command", "date", "machine", "measured"):
            assert rec.get(key) not in (None, ""), (rec["path"], key)
        assert table.judge_record(rec), f"{rec['path']}: no claim of the experiment reads it"


@dataclasses.dataclass(frozen=True)
class _Config:
    seed: int = 0
    gap: float = 0.3
    fit: float = 1.0


def _run(config, run_dir):
    seeds = [0, 1, 2]
    low = [0.05 + 0.001 * s for s in seeds]
    return {
        "summary": {"low": sum(low) / 3},
        "measured": C.measured(
            {"low": low, "high": [v + config.gap for v in low], "fit": [config.fit] * 3},
            seeds=seeds,
            dataset="toyset (30 train / 10 test)",
            scale="toy",
            baseline={"low": [0.5, 0.52, 0.51]},
            reference={"low": C.rf_reference(10, 32, 3)},
        ),
    }


_FITS = C.Premise("fit", ">=", 0.94, "the toy fits its training set")
_MODULE = types.ModuleType("claims_toy")
_MODULE.__dict__.update(
    NAME="claims-toy",
    DESCRIPTION="D Fig 0: a toy with declared claims",
    Config=_Config,
    run=_run,
    CLAIMS=(
        C.Claim(
            "order",
            "D Fig 0",
            "'low is below high'",
            "test D_LR, low < high",
            "test",
            C.Less("low", "high"),
            paper="low < high",
            premise=(_FITS,),
            dlr=("low",),
        ),
        C.Claim("mf", "D Fig 0", "'rich'", "test D_LR < 0.1", "test", C.Below("low", 0.1)),
    ),
)


@pytest.fixture()
def toy():
    registry.register(_MODULE)
    yield registry.get("claims-toy")
    registry._REGISTRY.pop("claims-toy", None)


def test_run_is_judged_recorded_and_tabled(toy, tmp_path, capsys):
    assert main(["run", "claims-toy", "--out", str(tmp_path / "r"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "Verdicts (claim | measured | at-init baseline | verdict):" in out
    assert "REPRODUCED" in out and "(2 reproduced)" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    res = io.read_json(tmp_path / "r" / "results.json")
    assert [r["verdict"] for r in res["comparison"]] == ["reproduced", "reproduced"]
    # record it, table it into a copy of a doc with the markers, check it
    records = tmp_path / "docs" / "records"
    path = table.record_run(tmp_path / "r", root=records)
    assert path == records / "claims-toy" / "small.json"
    rec = io.read_json(path)
    assert rec["commit"] is None or re.fullmatch("[0-9a-f]{40}", rec["commit"])
    doc = tmp_path / "docs" / "experiments.md"
    doc.write_text(f"# x\n\n{table.BEGIN}\n{table.END}\ntail\n")
    assert not table.update_docs(check=True, path=doc, root=records)
    table.update_docs(path=doc, root=records)
    text = doc.read_text()
    assert "2 claims: 2 reproduced." in text and text.endswith("tail\n")
    assert "| `claims-toy` | D Fig 0: test D_LR, low < high (paper: low < high) | test |" in text
    assert "0.51 ± 0.01" in text  # the at-init baseline column
    assert table.update_docs(check=True, path=doc, root=records)
    # a hand edit of a number is caught
    doc.write_text(text.replace("0.51 ± 0.01", "0.41 ± 0.01"))
    assert not table.update_docs(check=True, path=doc, root=records)


def test_a_failing_premise_reads_not_tested_everywhere(toy, tmp_path):
    cfg = toy.config("small", {"fit": "0.5"})
    res = run_experiment(toy, cfg, tmp_path / "r")
    rows = {r["key"]: r for r in res["comparison"]}
    assert rows["order"]["verdict"] == "not tested" and rows["mf"]["verdict"] == "reproduced"
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| D Fig 0: test D_LR, low < high | low < high |" in md
    assert "**not tested**" in md and "premise fails — the toy fits its training set" in md
    assert "  - decided by: premise fit >= 0.94" in md


def test_report_html_is_rendered_markdown(toy, tmp_path):
    run_experiment(toy, toy.config("small"), tmp_path / "r")
    write_report(tmp_path / "r")
    page = (tmp_path / "r" / "report.html").read_text()
    assert "<table>" in page and "<strong>reproduced</strong>" in page and "<li>" in page
    assert "**" not in page and "<p>- " not in page  # no raw markdown left in the HTML


def test_record_refuses_what_cannot_be_recorded(toy, tmp_path):
    with pytest.raises(FileNotFoundError, match="never finished"):
        table.record_run(tmp_path)
    run = tmp_path / "r"
    run_experiment(toy, toy.config("small"), run)
    res = io.read_json(run / "results.json")
    io.write_json(run / "results.json", {**res, "measured": {"values": {}}})
    with pytest.raises(ValueError, match="no per-seed values"):
        table.record_run(run, root=tmp_path / "records")
    io.write_json(run / "results.json", {**res, "status": "diverged"})
    with pytest.raises(ValueError, match="diverged"):
        table.record_run(run, root=tmp_path / "records")
    with pytest.raises(ValueError, match="markers"):
        (tmp_path / "plain.md").write_text("# no markers\n")
        table.update_docs(path=Path(tmp_path / "plain.md"))
