"""SLURM job arrays through submitit (its local executor, offline) and parallel processes."""

import os
import sys
from pathlib import Path

import pytest

from lrrich import cli, io
from lrrich.executors import JOBS, SlurmOptions, active_points
from lrrich.sweep import parse_grid, run_sweep
from tests.lrrich import toy_experiment

REPO = Path(__file__).resolve().parents[2]


_toy = toy_experiment.autouse_fixture()


def test_slurm_array_through_submitits_local_executor(tmp_path, monkeypatch):
    """The --executor slurm path end to end: one array, logs per point, re-runs submit only
    the unfinished points, and the tasks (processes sharing a device) do not preallocate."""
    monkeypatch.syspath_prepend(str(REPO))  # the tasks import tests.lrrich.toy_experiment
    monkeypatch.chdir(REPO)
    opts = SlurmOptions(cluster="local", time_min=5, cpus_per_task=1)
    grid, sweep_dir = parse_grid(["fail=0,1"]), tmp_path / "s"
    out = run_sweep("toy", grid, sweep_dir, executor="slurm", slurm=opts, progress=False)
    assert [p["status"] for p in out["points"]] == ["finished", "failed"]
    assert out["points"][1]["message"] == "RuntimeError: requested failure"
    jobs = io.read_json(sweep_dir / "logs" / JOBS)
    assert jobs["cluster"] == "local" and set(jobs["points"]) == {"fail=0,seed=0", "fail=1,seed=0"}
    for job in jobs["points"].values():
        assert Path(job["stdout"]).is_file() and Path(job["stderr"]).is_file()
    summary = io.read_json(sweep_dir / "fail=0,seed=0" / "results.json")["summary"]
    assert summary["preallocate"] == "false"
    assert "| 0 | 1 |" in (sweep_dir / "sweep.md").read_text()
    run_sweep("toy", grid, sweep_dir, executor="slurm", slurm=opts, progress=False)
    again = io.read_json(sweep_dir / "logs" / JOBS)["points"]
    assert again["fail=0,seed=0"] == jobs["points"]["fail=0,seed=0"]  # finished: not resubmitted
    assert again["fail=1,seed=0"]["job_id"] != jobs["points"]["fail=1,seed=0"]["job_id"]
    assert not any("%" in p.name for p in sweep_dir.rglob("*"))  # no literal logs/%j folder


def test_rerun_skips_points_whose_slurm_job_is_still_queued(tmp_path):
    logs = tmp_path / "logs"
    io.write_json(
        logs / JOBS,
        {"cluster": "slurm", "points": {"a": {"job_id": "7_0"}, "b": {"job_id": "7_1"}}},
    )
    states = {"7_0": "RUNNING", "7_1": "TIMEOUT"}
    assert active_points(logs, state=lambda folder, job: states[job]) == {"a"}
    assert active_points(tmp_path / "none") == set()


def test_slurm_options_are_validated():
    with pytest.raises(ValueError, match="--slurm-time must be at least 1"):
        SlurmOptions(time_min=0)
    with pytest.raises(ValueError, match="--slurm-parallelism must be at least 1"):
        SlurmOptions(array_parallelism=0)
    with pytest.raises(ValueError, match="cluster must be"):
        SlurmOptions(cluster="pbs")


def test_cli_passes_slurm_options(tmp_path, monkeypatch):
    seen = {}

    def fake_run_sweep(name, grid, out, **kw):
        seen.update(kw)
        io.write_json(out / "sweep_config.json", {})
        (out / "sweep.md").write_text("table")
        return {"failures": []}

    monkeypatch.setattr("lrrich.sweep.run_sweep", fake_run_sweep)
    args = ["sweep", "toy", "--grid", "scale=1", "--executor", "slurm", "--out", str(tmp_path)]
    args += ["--slurm-partition", "gpu", "--slurm-gpus", "1", "--slurm-time", "90"]
    args += ["--slurm-parallelism", "4", "--slurm-arg", "account=lab", "--no-wait", "--quiet"]
    assert cli.main(args) == 0
    opts = seen["slurm"]
    assert (opts.partition, opts.gpus_per_node, opts.time_min) == ("gpu", 1, 90)
    assert (opts.array_parallelism, opts.extra, opts.wait) == (4, {"account": "lab"}, False)


@pytest.mark.slow
def test_parallel_processes_do_not_preallocate_the_accelerator(tmp_path):
    out = run_sweep("toy", parse_grid(["scale=1,2"]), tmp_path, jobs=2, progress=False)
    assert [p["status"] for p in out["points"]] == ["finished", "finished"]
    for p in out["points"]:
        summary = io.read_json(tmp_path / p["dir"] / "results.json")["summary"]
        assert summary["preallocate"] == "false"


def _no_sbatch_path(tmp_path) -> str:
    """PATH without any folder holding an ``sbatch``, the Python interpreter's folder first."""
    keep = [d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "sbatch").exists()]
    return os.pathsep.join([str(Path(sys.executable).parent), *keep])


def test_slurm_without_sbatch_refuses_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """submitit installed but no SLURM: the command refuses (exit 2) instead of running the
    array as local processes, and leaves no sweep folder, logs/ or sweep_config.json. Run
    through cli.main in this process (the real ``lrrich`` process's one-line exit 2 is
    test_cli_errors.py's)."""
    monkeypatch.setenv("PATH", _no_sbatch_path(tmp_path))
    monkeypatch.chdir(tmp_path)
    args = ["sweep", "toy", "--grid", "scale=1,2", "--executor", "slurm", "--out", "s"]
    assert cli.main(args) == 2
    assert capsys.readouterr().err.strip() == (
        "lrrich: error: --executor slurm: no SLURM here (sbatch is not on the PATH); use "
        "--executor local (this machine) or --executor local-submitit (the same job array as "
        "local processes)"
    )
    assert list(tmp_path.iterdir()) == []


def test_local_submitit_is_the_explicit_local_array(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))  # the tasks import tests.lrrich.toy_experiment
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PATH", _no_sbatch_path(tmp_path))
    out = run_sweep(
        "toy", parse_grid(["scale=1"]), tmp_path / "s", executor="local-submitit", progress=False
    )
    assert [p["status"] for p in out["points"]] == ["finished"]
    assert io.read_json(tmp_path / "s" / "logs" / JOBS)["cluster"] == "local"
    assert not any("%" in p.name for p in (tmp_path / "s").rglob("*"))


def test_without_submitit_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)  # import submitit raises ImportError
    with pytest.raises(ImportError, match=r'pip install -e "\.\[slurm\]"'):
        run_sweep("toy", parse_grid(["scale=1"]), tmp_path / "s", executor="local-submitit")
    assert not (tmp_path / "s").exists()
