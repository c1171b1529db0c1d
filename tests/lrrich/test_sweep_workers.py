"""A parallel sweep's workers end with it, and its folder has one writer at a time."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lrrich import cli, registry, runfolder
from lrrich.sweep import run_sweep
from tests.lrrich import toy_experiment

REPO = Path(__file__).resolve().parents[2]
_toy = toy_experiment.autouse_fixture()
_STARTUP_S = 120  # two spawned workers import JAX on a loaded 2-core machine
_GONE_S = 10  # how soon the workers must be gone after their sweep is killed

# An experiment whose points record that they started, then sleep far longer than the test.
SLEEPY = textwrap.dedent(
    """
    import dataclasses, os, time
    from pathlib import Path

    NAME = "sleepy"
    DESCRIPTION = "sleeps (sweep-worker test fixture)"


    @dataclasses.dataclass(frozen=True)
    class Config:
        seed: int = 0
        sleep_s: float = 600.0


    def run(config, run_dir):
        marker = Path(os.environ["SLEEPY_MARKERS"]) / f"seed-{config.seed}"
        marker.write_text(str(os.getpid()))
        time.sleep(config.sleep_s)
        return {"summary": {"seed": config.seed}}
    """
)


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``, read from /proc."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended while we looked
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            alive.append(int(stat.parent.name))
    return alive


def _wait_for(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_parallel_sweep_leaves_no_worker_and_no_lock(tmp_path, capsys, monkeypatch):
    (tmp_path / "sleepy.py").write_text(SLEEPY)
    markers, out = tmp_path / "markers", tmp_path / "sweep"
    markers.mkdir()
    env = {
        **os.environ,
        "SLEEPY_MARKERS": str(markers),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
    }
    argv = ["sweep", "sleepy", "--seeds", "4", "--jobs", "2", "--out", str(out), "--quiet"]
    script = (
        "import sys, sleepy; from lrrich import cli, registry; registry.register(sleepy); "
        f"sys.exit(cli.main({argv!r}))"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, start_new_session=True)
    try:
        started = _wait_for(lambda: len(list(markers.iterdir())) == 2, _STARTUP_S)
        assert started, f"the two workers did not start within {_STARTUP_S} s"
        assert len(_group_members(proc.pid)) >= 3  # the sweep and its two workers

        # A second writer into the same folder is refused, naming the folder and the holder.
        monkeypatch.syspath_prepend(str(tmp_path))
        import sleepy

        registry.register(sleepy)
        try:
            assert cli.main(argv) == 2
        finally:
            registry._REGISTRY.pop("sleepy", None)
        err = capsys.readouterr().err
        assert f"{out} is in use by another lrrich process (PID {proc.pid})" in err

        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        gone = _wait_for(lambda: not _group_members(proc.pid), _GONE_S)
        assert gone, f"workers {_group_members(proc.pid)} outlived their sweep by {_GONE_S} s"
    finally:
        for pid in _group_members(proc.pid):  # only this test's own processes
            os.kill(pid, signal.SIGKILL)
    assert sorted(p.name for p in markers.iterdir()) == ["seed-0", "seed-1"]  # no new point
    assert not list(out.glob("*/results.json"))
    with runfolder.lock(out):  # the killed sweep's lock went with it
        pass


def test_the_shards_of_one_sweep_may_run_at_once_but_no_other_writer(tmp_path):
    grid = {"scale": ["1", "2"]}
    with runfolder.lock(tmp_path, shared=True):  # another shard of this sweep, still running
        out = run_sweep("toy", grid, tmp_path, shard=(0, 2), progress=False)
        assert [p["status"] for p in out["points"]] == ["finished", "pending"]
        with pytest.raises(runfolder.FolderInUse, match=f"{tmp_path} is in use by another"):
            run_sweep("toy", grid, tmp_path, progress=False)
    with runfolder.lock(tmp_path):  # a whole sweep running: no shard joins it
        with pytest.raises(runfolder.FolderInUse):
            run_sweep("toy", grid, tmp_path, shard=(1, 2), progress=False)
    runs = [line for line in (tmp_path / "sweep_runs.jsonl").read_text().splitlines() if line]
    assert len(runs) == 1 and '"shard": "0/2"' in runs[0]
