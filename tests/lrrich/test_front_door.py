"""Registry, run directories, reports, sweeps and the CLI, on a toy experiment."""

import html
import json
import re

import numpy as np
import pytest

from lrrich import cli, io, registry, report
from lrrich.runner import run_experiment
from lrrich.sweep import parse_grid, run_sweep
from tests.lrrich import toy_experiment

_toy = toy_experiment.autouse_fixture()


def test_overrides_are_coerced_and_validated():
    exp = registry.get("toy")
    cfg = exp.config("small", {"seed": "3", "scale": "2.5", "fail": "no", "tag": "b"})
    assert (cfg.seed, cfg.scale, cfg.fail, cfg.tag) == (3, 2.5, False, "b")
    assert exp.config("paper").scale == 3.0
    with pytest.raises(ValueError, match="unknown config key 'nope'; valid: seed"):
        exp.config("small", {"nope": "1"})
    with pytest.raises(ValueError, match="expected int"):
        exp.config("small", {"seed": "x"})
    with pytest.raises(ValueError, match="unknown scale"):
        exp.config("huge")
    with pytest.raises(KeyError, match="unknown experiment 'nope'; valid:"):
        registry.get("nope")


def test_run_writes_config_results_figures_report(tmp_path):
    res = run_experiment("toy", None, tmp_path / "r", scale="paper")
    assert res["summary"]["y"] == 0.5
    cfg = io.read_json(tmp_path / "r" / "config.json")
    assert cfg["experiment"] == "toy" and cfg["config"]["scale"] == 3.0
    assert (tmp_path / "r" / "toy.png").stat().st_size > 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| y | 3 | 0.5 |" in md and "![toy](toy.png)" in md
    assert "<table" in (tmp_path / "r" / "report.html").read_text()
    with pytest.raises(FileExistsError):
        run_experiment("toy", None, tmp_path / "r")


def test_report_lists_disagreements_and_carries_the_experiments_docstring(tmp_path):
    run_experiment("toy", None, tmp_path / "r")
    md = (tmp_path / "r" / "report.md").read_text()
    assert "## Disagreements" not in md  # no comparison rows: nothing to list
    assert "## About this experiment" in md and toy_experiment.__doc__.strip() in md
    res = io.read_json(tmp_path / "r" / "results.json")

    def row(q, verdict, note):
        return {"quantity": q, "paper": 1, "measured": 2, "verdict": verdict, "note": note}

    res["comparison"] = [
        row("a", "reproduced", "fine"),
        row("b | c", "direction reproduced", "smaller"),
        row("d", "not reproduced", ""),
    ]
    io.write_json(tmp_path / "r" / "results.json", res)
    md = report.render_markdown(tmp_path / "r")
    section = md.split("## Disagreements")[1].split("## ")[0]
    # the heading counts what the rows say: one of the two disagreements is a direction match
    assert "Of 3 quantities: 1 reproduced, 1 direction reproduced, 1 not reproduced" in section
    assert "- **b / c** (direction reproduced): smaller" in section
    assert "- **d** (not reproduced): no note" in section and "**a**" not in section
    page = report._markdown_to_html(md)
    assert "<pre>" in page and html.escape(toy_experiment.__doc__.strip()) in page


def test_resume_refuses_a_run_dir_of_another_experiment(tmp_path):
    io.write_json(tmp_path / "config.json", {"experiment": "other"})
    with pytest.raises(ValueError, match="holds a run of 'other'"):
        run_experiment("toy", None, tmp_path, resume=True)


def test_failed_run_leaves_no_results(tmp_path):
    with pytest.raises(RuntimeError):
        run_experiment("toy", registry.get("toy").config("small", {"fail": "1"}), tmp_path)
    assert not (tmp_path / "results.json").exists()


def test_atomic_json_handles_arrays_and_nonfinite(tmp_path):
    io.write_json(tmp_path / "x.json", {"a": np.arange(3), "b": np.float32(1.5), "c": float("nan")})
    assert io.read_json(tmp_path / "x.json") == {"a": [0, 1, 2], "b": 1.5, "c": None}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_sweep_aggregates_and_skips_finished(tmp_path):
    out = run_sweep("toy", parse_grid(["scale=1,2"]), tmp_path, seeds=3, progress=False)
    rows = {r["point"]["scale"]: r for r in out["rows"]}
    assert rows["2"]["n"] == 3
    np.testing.assert_allclose(rows["2"]["y"]["mean"], 2 * 1 + 0.5)  # mean of seeds 0,1,2
    # sample std (ddof = 1) of y = 2*seed + 0.5 over seeds 0, 1, 2, written out: sqrt(8/2) = 2
    np.testing.assert_allclose(rows["2"]["y"]["std"], 2.0)
    assert (tmp_path / "sweep.png").exists() and "± " in (tmp_path / "sweep.md").read_text()
    mtime = (tmp_path / "scale=1,seed=0" / "results.json").stat().st_mtime_ns
    run_sweep("toy", parse_grid(["scale=1,2"]), tmp_path, seeds=3, progress=False)
    assert (tmp_path / "scale=1,seed=0" / "results.json").stat().st_mtime_ns == mtime


def test_sweep_rejects_bad_grids(tmp_path):
    with pytest.raises(ValueError, match="unknown grid key 'lr'"):
        run_sweep("toy", {"lr": ["1"]}, tmp_path)
    with pytest.raises(ValueError, match="pass --yes"):
        run_sweep("toy", {"scale": [str(i) for i in range(10)]}, tmp_path, seeds=2, max_runs=5)
    with pytest.raises(ValueError, match="expected float"):
        run_sweep("toy", {"scale": ["x"]}, tmp_path)


def test_cli_errors_are_one_line(capsys, tmp_path):
    assert cli.main(["run", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lrrich: error: unknown experiment 'nope'; valid:") and "\n" not in err
    assert cli.main(["run", "toy", "--set", "bogus=1", "--out", str(tmp_path)]) == 2
    assert "unknown config key 'bogus'" in capsys.readouterr().err


def test_cli_run_and_report(capsys, tmp_path):
    assert cli.main(["run", "toy", "--set", "seed=2", "--out", str(tmp_path / "r")]) == 0
    assert "report:" in capsys.readouterr().out
    assert json.loads((tmp_path / "r" / "results.json").read_text())["summary"]["y"] == 2.5
    (tmp_path / "r" / "report.md").unlink()
    assert cli.main(["report", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "report.md").exists()


def test_list_spells_out_paper_keys_and_states_small_runtimes(tmp_path):
    """`lrrich list`, the real command: each paper key a description cites is spelled out
    beneath it, then the recorded small-scale runtime with its machine and date."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "lrrich.cli", "list"], capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(repo)}, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("kunin-single-neuron "))
    assert lines[row + 1].strip() == 'K = Kunin et al. 2024, "Get rich quick"'
    assert lines[row + 2].strip().startswith("small scale:")  # "S(0,t)" is not paper S
    lc = next(i for i, line in enumerate(lines) if line.startswith("learning-curve "))
    assert [line.strip()[:3] for line in lines[lc + 1 : lc + 3]] == ["D =", "T ="]
    el = next(i for i, line in enumerate(lines) if line.startswith("encoded-labels "))
    record = registry.recorded_runtime("encoded-labels")
    assert record and lines[el + 2].strip() == f"small scale: {record}"
    assert re.fullmatch(r"\d+ s \(.+, \d{4}-\d\d-\d\d\)|\d+\.\d min \(.+\)", record)


@pytest.mark.parametrize(
    ("description", "keys"),
    [
        ("S / T Fig 7.2a: ResNet18", ["S", "T"]),
        ("P §6.1/App. G: modes", ["P"]),
        ("K App. D.3 / Fig 12: grok", ["K"]),
        ("K Fig 3-4: mu, phi, S(0,t)", ["K"]),
        ("Main job: exact modes", []),
    ],
)
def test_paper_keys_are_read_from_the_description(description, keys):
    assert registry.paper_keys(description) == keys


def test_run_experiment_checks_the_config_before_writing(tmp_path):
    """The Python entry point refuses a config that cannot run before it creates the folder."""
    import dataclasses

    bad = dataclasses.replace(registry.get("toy").config("small"), scale=float("nan"))
    with pytest.raises(ValueError, match="scale must be a number, got nan"):
        run_experiment("toy", bad, tmp_path / "r")
    assert not (tmp_path / "r").exists()
    with pytest.raises(ValueError, match=r"^--set scale=nan: scale must be a number"):
        registry.get("toy").config("small", {"scale": "nan"})


def test_cli_run_prints_the_experiments_verdict_after_the_summary(tmp_path, capsys, monkeypatch):
    exp = registry.get("toy")
    verdict = lambda results: f"verdict:\n  y = {results['summary']['y']:g}"
    monkeypatch.setitem(
        registry._REGISTRY, "toy", registry.Experiment(**{**exp.__dict__, "verdict": verdict})
    )
    assert cli.main(["run", "toy", "--out", str(tmp_path / "r"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "verdict:\n  y = 0.5\nreport: " in out


def test_the_dataset_note_names_the_dataset_the_rows_were_measured_on(tmp_path):
    """A config asking for `toyset` whose rows were measured on `mnist5k` (a fallback) is noted
    with `mnist5k`, the dataset the numbers come from."""
    run_experiment("toy", None, tmp_path / "r")
    res = io.read_json(tmp_path / "r" / "results.json")
    res["comparison"] = [
        {"quantity": "y", "paper": 1, "measured": 2, "verdict": "reproduced", "note": "",
         "dataset": "mnist5k (4,000 train / 1,000 test)"}
    ]  # fmt: skip
    io.write_json(tmp_path / "r" / "results.json", res)
    md = report.render_markdown(tmp_path / "r")
    assert "this run used `mnist5k`, the paper `paperset`" in md
