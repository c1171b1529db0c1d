"""Sweeps: failing points, stale folders, sample statistics, the figure, shards, --vmap."""

import re
import shlex
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

import lrrich
from lrrich import cli, io, sweep
from lrrich.sweep import grid_points, parse_grid, parse_shard, point_dir, run_sweep
from tests.lrrich import toy_experiment

_toy = toy_experiment.autouse_fixture()


def test_sweep_continues_past_failing_and_diverging_points(tmp_path):
    grid = parse_grid(["fail=0,1", "diverge=0,1"])
    out = run_sweep("toy", grid, tmp_path, progress=False)
    status = {p["dir"]: (p["status"], p["message"]) for p in out["points"]}
    assert status["fail=0,diverge=0,seed=0"] == ("finished", None)
    assert status["fail=0,diverge=1,seed=0"][0] == "diverged"
    assert status["fail=1,diverge=0,seed=0"] == ("failed", "RuntimeError: requested failure")
    stored = io.read_json(tmp_path / "fail=1,diverge=0,seed=0" / "status.json")
    assert stored["status"] == "failed" and "Traceback" in stored["traceback"]
    md = (tmp_path / "sweep.md").read_text()
    assert "4 points: 1 finished, 1 diverged, 2 failed" in md
    assert "| fail=1,diverge=0,seed=0 | failed | RuntimeError: requested failure |" in md
    rows = {(r["point"]["fail"], r["point"]["diverge"]): r for r in out["rows"]}
    assert rows[("0", "0")]["n"] == 1 and rows[("0", "1")]["n"] == 0


def test_rerun_retries_failed_points_and_keeps_finished_ones(tmp_path):
    run_sweep("toy", parse_grid(["fail=0,1"]), tmp_path, progress=False)
    mtime = (tmp_path / "fail=0,seed=0" / "results.json").stat().st_mtime_ns
    failed = tmp_path / "fail=1,seed=0"
    (failed / "status.json").unlink()
    io.write_json(failed / "status.json", {"status": "failed", "message": "OOM killed"})
    out = run_sweep("toy", parse_grid(["fail=0,1"]), tmp_path, progress=False)
    assert (tmp_path / "fail=0,seed=0" / "results.json").stat().st_mtime_ns == mtime
    again = {p["dir"]: p["message"] for p in out["points"]}
    assert again["fail=1,seed=0"] == "RuntimeError: requested failure"  # it ran again


def test_cli_sweep_names_the_failed_point_and_exits_nonzero(tmp_path, capsys):
    code = cli.main(["sweep", "toy", "--grid", "fail=0,1", "--out", str(tmp_path), "--quiet"])
    assert code == 1
    err = capsys.readouterr().err
    assert "lrrich: fail=1,seed=0: failed: RuntimeError: requested failure" in err
    assert (tmp_path / "sweep.md").exists()


def test_a_folder_holding_another_grid_is_refused(tmp_path):
    run_sweep("toy", parse_grid(["offset=2"]), tmp_path, progress=False)
    with pytest.raises(ValueError, match="holds another sweep.*grid"):
        run_sweep("toy", parse_grid(["scale=1"]), tmp_path, progress=False)


def test_aggregate_reads_only_the_points_of_this_sweep(tmp_path):
    stale = tmp_path / "scale=5,seed=0"  # a run folder that is not a point of the grid
    run_sweep("toy", parse_grid(["scale=1"]), tmp_path, progress=False)
    stale.mkdir()
    io.write_json(stale / "config.json", {"experiment": "toy", "config": {"scale": 1.0}})
    io.write_json(stale / "results.json", {"status": "finished", "summary": {"y": 100.0}})
    out = sweep.aggregate(tmp_path)
    assert [r["n"] for r in out["rows"]] == [1] and out["rows"][0]["y"]["mean"] == 0.5


def test_a_non_sweep_folder_is_refused_and_left_untouched(tmp_path):
    (tmp_path / "notes.md").write_text("mine")
    with pytest.raises(FileExistsError, match="not a sweep folder"):
        run_sweep("toy", parse_grid(["scale=1"]), tmp_path, progress=False)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.md"]


def test_mean_and_sample_std_match_the_definitions(tmp_path):
    out = run_sweep("toy", parse_grid(["scale=0.3"]), tmp_path, seeds=4, progress=False)
    ys = [0.3 * s + 0.5 for s in range(4)]
    mean = sum(ys) / 4
    sample_std = (sum((y - mean) ** 2 for y in ys) / 3) ** 0.5  # ddof = 1, written out
    row = out["rows"][0]
    assert row["n"] == 4 and row["y"]["n"] == 4
    np.testing.assert_allclose(row["y"]["mean"], mean, rtol=1e-15)
    np.testing.assert_allclose(row["y"]["std"], sample_std, rtol=1e-14)
    assert out["std"] == "sample standard deviation over seeds (ddof = 1)"
    md = (tmp_path / "sweep.md").read_text()
    assert "mean ± sample standard deviation over seeds (ddof = 1)" in md
    assert f"| {mean:.4g} ± {sample_std:.2g} |" in md


def test_a_single_seed_shows_no_spread(tmp_path):
    out = run_sweep("toy", parse_grid(["scale=2"]), tmp_path, progress=False)
    assert out["rows"][0]["y"]["std"] is None
    md = (tmp_path / "sweep.md").read_text()
    assert "| 2 | 1 | 0.25 | -0.5 | 10 | — | 1 | 0.5 | 0.25 | 0.25 |" in md  # one run: a column
    assert "The same in every finished run" not in md


def test_a_metric_undefined_for_some_seeds_shows_its_own_n(tmp_path):
    out = run_sweep("toy", parse_grid(["scale=1"]), tmp_path, seeds=3, progress=False)
    row = out["rows"][0]
    assert row["n"] == 3 and row["odd_seeds_only"] == {"mean": 1.5, "std": None, "n": 1}
    assert "| 1.5 (n=1) |" in (tmp_path / "sweep.md").read_text()


def test_a_point_that_failed_after_writing_results_counts_as_failed(tmp_path):
    io.write_json(tmp_path / "results.json", {"status": "finished", "summary": {}})
    io.write_json(tmp_path / "status.json", {"status": "failed", "message": "OSError: disk full"})
    assert sweep.point_status(tmp_path) == {"status": "failed", "message": "OSError: disk full"}


def test_figure_is_a_grid_of_result_panels_without_timings(tmp_path):
    rows = run_sweep("toy", parse_grid(["offset=1,2,3"]), tmp_path, progress=False)["rows"]
    results, timings = sweep._metric_names(rows)
    assert results == [
        "half_y", "minus_y", "num_classes", "odd_seeds_only", "twice_y", "y", "y_squared"
    ]  # fmt: skip
    assert timings == ["train_seconds"]
    assert sweep._constant_metrics(rows) == {"num_classes": 10.0}
    assert imread(tmp_path / "sweep.png").shape[0] > 0
    md = (tmp_path / "sweep.md").read_text()
    assert "train_seconds" in md  # still tabulated
    assert "The same in every finished run (not tabulated): num_classes = 10." in md
    header = next(line for line in md.splitlines() if line.startswith("| offset |"))
    assert "num_classes" not in header and "y_squared" in header


def test_constant_metrics_need_one_value_in_every_run_of_every_row():
    def stats(mean, std, n):
        return {"mean": mean, "std": std, "n": n}

    one = {"point": {}, "n": 1}
    assert sweep._constant_metrics([{**one, "c": stats(4.0, None, 1)}]) == {}  # one run: unknown
    assert sweep._constant_metrics([{**one, "c": stats(0.1, 1e-17, 3)}]) == {"c": 0.1}  # round-off
    assert sweep._constant_metrics([{**one, "c": stats(4.0, 0.5, 3)}]) == {}  # varies over seeds
    rows = [{**one, "c": stats(4.0, None, 1)}, {**one, "c": stats(4.0 + 1e-9, None, 1)}]
    assert sweep._constant_metrics(rows) == {}  # varies over the grid, however little
    assert sweep._constant_metrics([{**one, "c": stats(4.0, 0.0, 2)}, {**one, "c": None}]) == {}


def test_bad_seed_requests_are_refused(tmp_path):
    with pytest.raises(ValueError, match="--seeds must be a whole number ≥ 1 .*, got 0"):
        run_sweep("toy", parse_grid(["scale=1"]), tmp_path, seeds=0)
    with pytest.raises(ValueError, match="--grid seed=... and --seeds 3 both set the seed"):
        run_sweep("toy", parse_grid(["seed=1,2"]), tmp_path, seeds=3)
    with pytest.raises(ValueError, match=r"--set and --grid both set \['scale'\]"):
        run_sweep("toy", parse_grid(["scale=1"]), tmp_path, fixed={"scale": "2"})
    with pytest.raises(ValueError, match="--executor must be one of"):
        run_sweep("toy", parse_grid(["scale=1"]), tmp_path, executor="mpi")
    with pytest.raises(ValueError, match="--vectorize applies to --vmap sweeps"):
        run_sweep("toy", parse_grid(["scale=1"]), tmp_path, vectorize=True)
    assert not any(tmp_path.iterdir())


def test_fixed_overrides_apply_to_every_point(tmp_path):
    out = run_sweep("toy", parse_grid(["scale=1"]), tmp_path, seeds=2, fixed={"offset": "10"})
    assert out["rows"][0]["y"]["mean"] == 10.5
    assert io.read_json(tmp_path / "sweep_config.json")["set"] == {"offset": "10"}


def test_shards_split_the_grid_without_overlap(tmp_path, monkeypatch):
    grid = parse_grid(["scale=1,2,3"])
    run_sweep("toy", grid, tmp_path, shard=(0, 2), progress=False)
    done = sorted(p.parent.name for p in tmp_path.glob("*/results.json"))
    assert done == ["scale=1,seed=0", "scale=3,seed=0"]
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    out = run_sweep("toy", grid, tmp_path, shard=parse_shard("slurm"), progress=False)
    assert [p["status"] for p in out["points"]] == ["finished"] * 3


def test_parse_shard_rejects_bad_text(monkeypatch):
    assert parse_shard("3/4") == (3, 4)
    for bad in ("4/4", "-1/2", "1", "a/b"):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(bad)
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    with pytest.raises(ValueError, match="--shard slurm needs SLURM_ARRAY_TASK_ID"):
        parse_shard("slurm")


def _use_module(monkeypatch, fake):
    """Stand in ``fake`` for lrrich.sweep_vmap (imported or not yet)."""
    monkeypatch.setitem(sys.modules, "lrrich.sweep_vmap", fake)
    monkeypatch.setattr(lrrich, "sweep_vmap", fake, raising=False)


class _VmapUnsupported(Exception):
    pass


@pytest.mark.parametrize(
    "error, line",
    [
        (_VmapUnsupported("toy has no vmapped form"), "--vmap: toy has no vmapped form"),
        (RuntimeError("XLA ran out of memory"), "--vmap failed (RuntimeError: XLA ran out of"),
    ],
)
def test_vmap_falls_back_to_processes_with_one_line(tmp_path, monkeypatch, capsys, error, line):
    fake = types.ModuleType("lrrich.sweep_vmap")

    def run_points(exp, configs, run_dirs, scale, vectorize=False):
        raise error

    fake.VmapUnsupported, fake.run_points = _VmapUnsupported, run_points
    _use_module(monkeypatch, fake)
    out = run_sweep("toy", parse_grid(["scale=1,2"]), tmp_path, vmap=True)
    err = capsys.readouterr().err
    assert line in err and "running the points as processes" in err
    assert [p["status"] for p in out["points"]] == ["finished", "finished"]


def test_vmap_runs_the_unfinished_points_in_one_call(tmp_path, monkeypatch):
    calls = []
    fake = types.ModuleType("lrrich.sweep_vmap")
    fake.VmapUnsupported = type("VmapUnsupported", (Exception,), {})

    def run_points(exp, configs, run_dirs, scale, vectorize=False):
        calls.append(([c.scale for c in configs], [d.name for d in run_dirs], scale))
        for c, d in zip(configs, run_dirs, strict=True):
            io.write_json(d / "results.json", {"status": "finished", "summary": {"y": -c.scale}})
        return []

    fake.run_points = run_points
    _use_module(monkeypatch, fake)
    grid = parse_grid(["scale=1,2"])
    run_sweep("toy", grid, tmp_path, vmap=True, progress=False, shard=(1, 2))
    out = run_sweep("toy", grid, tmp_path, vmap=True, progress=False)
    assert calls == [([2.0], ["scale=2,seed=0"], "small"), ([1.0], ["scale=1,seed=0"], "small")]
    assert {r["point"]["scale"]: r["y"]["mean"] for r in out["rows"]} == {"1": -1.0, "2": -2.0}


def test_grid_points_and_point_dirs():
    pts = grid_points({"a": ["1", "2"], "b": ["x/y"]}, 2)
    assert pts[0] == {"a": "1", "b": "x/y", "seed": "0"} and len(pts) == 4
    assert point_dir("S", pts[3]).name == "a=2,b=x_y,seed=1"


@pytest.mark.slow
def test_the_readme_sweep_example_runs_to_a_full_table(tmp_path, capsys):
    """The `lrrich sweep` line of the README, as written, into a temporary folder (~1.5 min)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    line = next(s for s in readme.splitlines() if s.startswith("lrrich sweep "))
    argv = shlex.split(line.split("#")[0])[1:]
    assert cli.main([*argv, "--out", str(tmp_path), "--quiet"]) == 0
    out = io.read_json(tmp_path / "sweep.json")
    assert out["failures"] == [] and all(r["n"] == out["seeds"] for r in out["rows"])
    assert "| lr | n |" in (tmp_path / "sweep.md").read_text()


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["scale=1,2,"], "--grid scale=1,2,: empty value"),
        (["scale=1,1"], "--grid scale=1,1: a value is listed twice"),
        (["scale=1", "scale=2"], "--grid scale is given twice"),
        (["=1"], "--grid =1: no key"),
    ],
)
def test_parse_grid_refuses_empty_repeated_and_keyless_items(items, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        parse_grid(items)


def test_grid_values_are_type_checked_under_the_grid_flag(tmp_path):
    with pytest.raises(ValueError, match=r"^--grid scale: expected float, got 'x'"):
        run_sweep("toy", parse_grid(["scale=1,x"]), tmp_path / "s")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("xs", "log"),
    [
        ([0.001, 0.01], True),  # two values a decade apart
        ([0.001, 0.01, 0.1], True),
        ([0.0003, 0.001, 0.003, 0.01], True),
        (list(range(1, 21)), False),  # evenly spaced integers stay linear
        ([0.1, 0.2, 0.3], False),
        ([-1.0, 1.0, 10.0], False),
    ],
)
def test_the_figure_uses_a_log_axis_where_the_grid_spans_decades(xs, log):
    assert sweep._log_spaced(xs) is log


def test_the_sweep_figure_puts_a_decade_spanning_lr_on_a_log_axis(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(sweep.io, "save_figure", lambda fig, path: figures.append(fig) or path)
    run_sweep("toy", parse_grid(["scale=0.001,0.01,0.1"]), tmp_path, progress=False)
    axes = [ax for ax in figures[0].axes if ax.get_visible()]
    assert axes and all(ax.get_xscale() == "log" for ax in axes)
    assert all(ax.get_xlabel() == "scale" and ax.get_ylabel() for ax in axes)


def test_the_terminal_table_is_plain_text(tmp_path):
    out = run_sweep("toy", parse_grid(["scale=1,2"]), tmp_path, seeds=2, progress=False)
    text = sweep.text_table(out)
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["scale", "n"])
    assert set(lines[header + 1]) <= {"-", " "}
    assert lines[header + 2].split()[:4] == ["1", "2", "0.5", "±"]  # half_y: mean of 0.25 and 0.75
    assert "|" not in text and "![" not in text and "#" not in text


def test_a_fixed_override_that_cannot_run_stops_the_sweep_before_any_point(tmp_path):
    with pytest.raises(ValueError, match=r"^--set epochs=-3: epochs must be ≥ 0, got -3"):
        run_sweep("demo", {"lr": ["0.1", "0.2"]}, tmp_path / "s", fixed={"epochs": "-3"})
    assert not (tmp_path / "s").exists()
