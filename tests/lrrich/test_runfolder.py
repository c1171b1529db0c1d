"""Run folders: the run record, the reuse rules, divergence as a status, --replot."""

import os
import subprocess
from pathlib import Path

import pytest

from lrrich import cli, io, registry, runfolder
from lrrich.report import redraw_figures
from lrrich.runner import run_experiment
from tests.lrrich import toy_experiment

REPO = Path(__file__).resolve().parents[2]


_toy = toy_experiment.autouse_fixture()


def _cfg(**overrides):
    return registry.get("toy").config("small", {k: str(v) for k, v in overrides.items()})


def test_run_record_holds_config_git_command_and_versions(tmp_path):
    run_experiment("toy", _cfg(scale=2), tmp_path / "r")
    rec = io.read_json(tmp_path / "r" / "config.json")
    assert rec["experiment"] == "toy" and rec["config"]["scale"] == 2.0
    prov = rec["provenance"]
    git = ["git", "-C", str(REPO)]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    status = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout
    assert prov["git_commit"] == head.strip() and len(prov["git_commit"]) == 40
    assert prov["git_dirty"] == bool(status.strip())
    assert prov["command"] and prov["packages"]["jax"] and prov["packages"]["numpy"]
    md = (tmp_path / "r" / "report.md").read_text()
    assert "## Provenance" in md and prov["git_commit"] in md


def test_write_run_record_is_the_public_entry_for_other_runners(tmp_path):
    path = runfolder.write_run_record(tmp_path / "v", registry.get("toy"), _cfg(offset=1.5))
    rec = io.read_json(path)
    assert rec["config"]["offset"] == 1.5 and rec["provenance"]["packages"]["flax"]
    assert runfolder.is_run_folder(tmp_path / "v")


def test_a_folder_that_is_not_a_run_is_refused_and_left_untouched(tmp_path):
    (tmp_path / "report.md").write_text("my own notes")
    with pytest.raises(FileExistsError, match="is not a run folder"):
        run_experiment("toy", None, tmp_path)
    assert (tmp_path / "report.md").read_text() == "my own notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_an_interrupted_run_continues_only_with_resume_and_the_same_config(tmp_path):
    with pytest.raises(RuntimeError, match="requested failure"):  # interrupted: no results.json
        run_experiment("toy", _cfg(fail=True), tmp_path)
    before = (tmp_path / "config.json").read_text()
    with pytest.raises(FileExistsError, match="unfinished run; pass --resume"):
        run_experiment("toy", _cfg(scale=2), tmp_path)
    with pytest.raises(ValueError, match=r"another config.*fail: True in the folder, False now"):
        run_experiment("toy", _cfg(scale=2), tmp_path, resume=True)
    with pytest.raises(ValueError, match=r"scale: 1\.0 in the folder, 2\.0 now"):
        run_experiment("toy", _cfg(scale=2, fail=True), tmp_path, resume=True)
    assert (tmp_path / "config.json").read_text() == before  # nothing of the new config written
    with pytest.raises(ValueError, match="scale: 'small' in the folder, 'paper' now"):
        run_experiment("toy", _cfg(fail=True), tmp_path, scale="paper", resume=True)


def test_resume_with_the_same_config_continues(tmp_path):
    run_experiment("toy", _cfg(seed=1), tmp_path)
    res = run_experiment("toy", _cfg(seed=1), tmp_path, resume=True)
    assert res["status"] == "finished" and res["summary"]["y"] == 1.5
    assert len(io.read_json(tmp_path / "config.json")["resumed"]) == 1


def test_cli_refuses_mixing_configs_with_a_one_line_error(tmp_path, capsys):
    out = str(tmp_path / "R")
    with pytest.raises(RuntimeError, match="requested failure"):  # a bug keeps its traceback
        cli.main(["run", "toy", "--set", "fail=1", "--out", out, "--quiet"])
    capsys.readouterr()
    assert cli.main(["run", "toy", "--set", "scale=2", "--out", out, "--resume", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lrrich: error:") and "\n" not in err
    assert "fail: True in the folder, False now" in err and "scale: 1.0 in the folder" in err


def test_divergence_is_a_status_not_an_exception(tmp_path, capsys):
    res = run_experiment("toy", _cfg(diverge=True), tmp_path / "d")
    assert res["status"] == "diverged" and "loss became nan" in res["message"]
    assert io.read_json(tmp_path / "d" / "results.json")["status"] == "diverged"
    assert "**Status: diverged.**" in (tmp_path / "d" / "report.md").read_text()
    assert not (tmp_path / "d" / "toy.png").exists()  # the plot needs a finished run
    assert cli.main(["run", "toy", "--set", "diverge=1", "--out", str(tmp_path / "c")]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "lrrich: toy diverged: training loss became nan at step 3 (lr=1e9); lower the lr"


def test_report_replot_redraws_figures_from_results_alone(tmp_path, monkeypatch):
    run_experiment("toy", None, tmp_path)
    (tmp_path / "toy.png").unlink()
    exp = registry.get("toy")

    def no_rerun(config, run_dir):
        raise AssertionError("--replot must not run the experiment")

    registry.register(registry.Experiment(**{**exp.__dict__, "run": no_rerun}))
    assert cli.main(["report", str(tmp_path), "--replot"]) == 0
    assert (tmp_path / "toy.png").stat().st_size > 0
    assert redraw_figures(tmp_path) == [tmp_path / "toy.png"]


def test_report_flags_a_dataset_other_than_the_papers(tmp_path):
    run_experiment("toy", None, tmp_path / "small")
    assert "Dataset differs from the paper's" in (tmp_path / "small" / "report.md").read_text()
    run_experiment("toy", None, tmp_path / "paper", scale="paper")
    assert "Dataset differs" not in (tmp_path / "paper" / "report.md").read_text()


def test_report_renders_the_comparison_rows(tmp_path):
    rows = [
        {
            "quantity": "D_LR rich",
            "paper": 0.0087,
            "measured": 0.07,
            "dataset": "digits (1,437 / 360)",
            "scale": "MLP 256x3",
            "verdict": "direction reproduced",
            "note": "smaller | gap",
        }
    ]
    exp = registry.get("toy")
    registry.register(
        registry.Experiment(
            **{**exp.__dict__, "run": lambda c, d: {"comparison": rows, "summary": {"y": 1.0}}}
        )
    )
    run_experiment("toy", None, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| quantity | paper | measured | n | random-feature D_LR | verdict |" in md
    # a row of an older run, without criterion, tolerance, seeds or reference, shows "—"
    assert "| D_LR rich | 0.0087 | 0.07 | — | — | direction reproduced |" in md
    assert "  - dataset: digits (1,437 / 360); scale: MLP 256x3" in md
    assert "  - note: smaller | gap" in md
    assert "| y | 3 |" not in md  # the comparison replaces the bare PAPER table


def test_a_failing_figure_keeps_the_results_and_replot_retries(tmp_path, capsys):
    res = run_experiment("toy", _cfg(tag="plot-fails"), tmp_path)
    assert res["status"] == "finished" and res["summary"]["y"] == 0.5
    assert res["plot_error"] == "TypeError: unsupported format string passed to NoneType.__format__"
    assert "figures failed" in capsys.readouterr().err
    assert "**Figures failed:** TypeError" in (tmp_path / "report.md").read_text()
    results = io.read_json(tmp_path / "results.json")
    results["summary"]["tag"] = "fixed"  # stands for a fixed plot function
    io.write_json(tmp_path / "results.json", results)
    assert cli.main(["report", str(tmp_path), "--replot"]) == 0
    assert (tmp_path / "toy.png").exists()
    assert "plot_error" not in io.read_json(tmp_path / "results.json")
    assert "Figures failed" not in (tmp_path / "report.md").read_text()


def test_a_folder_in_use_refuses_a_second_writer_naming_the_holder(tmp_path, capsys):
    out = tmp_path / "r"
    with runfolder.lock(out):
        assert cli.main(["run", "toy", "--out", str(out), "--quiet"]) == 2
        with pytest.raises(runfolder.FolderInUse):
            with runfolder.lock(out):
                pass
    err = capsys.readouterr().err
    assert f"lrrich: error: {out} is in use by another lrrich process (PID {os.getpid()})" in err
    assert [p.name for p in out.iterdir()] == [runfolder.LOCK]  # nothing of the run written
    assert runfolder.is_empty(out) and not runfolder.is_empty(tmp_path)
    assert cli.main(["run", "toy", "--out", str(out), "--quiet"]) == 0  # the lock was released


def test_resume_of_a_finished_run_reports_it_and_recomputes_nothing(tmp_path, capsys, monkeypatch):
    out = str(tmp_path / "r")
    assert cli.main(["run", "toy", "--set", "scale=2", "--out", out]) == 0
    first = capsys.readouterr().out
    exp = registry.get("toy")

    def never(config, run_dir):
        raise AssertionError("a finished run was computed again")

    monkeypatch.setitem(
        registry._REGISTRY, "toy", registry.Experiment(**{**exp.__dict__, "run": never})
    )
    assert cli.main(["run", "toy", "--set", "scale=2", "--out", out, "--resume"]) == 0
    captured = capsys.readouterr()
    assert f"{out} holds this run, finished: nothing to recompute" in captured.err
    assert "running" not in captured.err
    assert captured.out == first  # the same summary and report path


def test_a_refused_out_prints_no_running_line(tmp_path, capsys):
    (tmp_path / "notes.md").write_text("mine")
    assert cli.main(["run", "toy", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "running" not in err and "is not a run folder" in err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.md"]


def test_resume_of_an_unfinished_run_says_it_continues(tmp_path, capsys, monkeypatch):
    out = str(tmp_path / "r")
    exp = registry.get("toy")

    def interrupted(config, run_dir):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setitem(
            registry._REGISTRY, "toy", registry.Experiment(**{**exp.__dict__, "run": interrupted})
        )
        assert cli.main(["run", "toy", "--out", out]) == 130
    capsys.readouterr()
    assert cli.main(["run", "toy", "--out", out, "--resume"]) == 0
    assert f"continuing the unfinished run toy (small) -> {out}" in capsys.readouterr().err
