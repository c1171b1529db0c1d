"""One error policy: expected failures are one line and exit 2; bugs keep their traceback."""

import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lrrich import cli, registry
from lrrich.runner import run_experiment
from tests.lrrich import toy_experiment

REPO = Path(__file__).resolve().parents[2]


_toy = toy_experiment.autouse_fixture()


def _with_run(monkeypatch, fn):
    exp = registry.get("toy")
    monkeypatch.setitem(
        registry._REGISTRY, "toy", registry.Experiment(**{**exp.__dict__, "run": fn})
    )


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith("lrrich: error: "), err
    return err


def test_corrupt_json_names_the_file(tmp_path, capsys):
    run_experiment("toy", None, tmp_path)
    (tmp_path / "results.json").write_text('{"summary": {"y": 0.5,')
    assert cli.main(["report", str(tmp_path)]) == 2
    err = _one_line_error(capsys)
    assert f"{tmp_path / 'results.json'} is not valid JSON (line 1" in err


def test_unwritable_path_names_the_path(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert cli.main(["run", "toy", "--out", str(tmp_path / "file" / "run"), "--quiet"]) == 2
    assert str(tmp_path / "file" / "run") in _one_line_error(capsys)


def test_disk_full_is_one_line(tmp_path, capsys, monkeypatch):
    from lrrich import runfolder

    def full(path, obj):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(runfolder.io, "write_json", full)
    assert cli.main(["run", "toy", "--out", str(tmp_path / "r"), "--quiet"]) == 2
    err = _one_line_error(capsys)
    assert err == f"lrrich: error: {tmp_path / 'r' / 'config.json'}: No space left on device"


def test_missing_optional_extra_is_one_line(tmp_path, capsys, monkeypatch):
    def needs_tfds(config, run_dir):
        raise ImportError(
            "loading 'mnist' needs tensorflow-datasets: pip install 'lrrich[data]'",
            name="tensorflow_datasets",
        )

    _with_run(monkeypatch, needs_tfds)
    assert cli.main(["run", "toy", "--out", str(tmp_path / "r"), "--quiet"]) == 2
    assert "pip install 'lrrich[data]'" in _one_line_error(capsys)


def test_a_keyerror_bug_keeps_its_traceback(tmp_path, monkeypatch):
    def bug(config, run_dir):
        return {}["grid"]

    _with_run(monkeypatch, bug)
    with pytest.raises(KeyError, match="grid"):
        cli.main(["run", "toy", "--out", str(tmp_path / "r"), "--quiet"])


def test_unknown_experiment_is_one_line_and_debug_shows_the_traceback(capsys):
    assert cli.main(["run", "nope"]) == 2
    assert "unknown experiment 'nope'; valid:" in _one_line_error(capsys)
    with pytest.raises(KeyError, match="unknown experiment 'nope'"):
        cli.main(["run", "nope", "--debug"])


def test_damaged_checkpoint_is_one_line(tmp_path, capsys, monkeypatch):
    from nets.checkpoint import CheckpointError

    def damaged(config, run_dir):
        raise CheckpointError(f"checkpoint {run_dir}/checkpoints/8 is damaged: its content hash")

    _with_run(monkeypatch, damaged)
    assert cli.main(["run", "toy", "--out", str(tmp_path / "r"), "--quiet"]) == 2
    assert "checkpoints/8 is damaged" in _one_line_error(capsys)


def _cli_subprocess(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    script = textwrap.dedent(f"""
        import sys
        from lrrich import cli, registry
        from tests.lrrich import toy_experiment
        registry.register(toy_experiment)
        sys.exit(cli.main({args!r}))
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg"}
    env.pop("TQDM_DISABLE", None)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
        timeout=300,
    )  # fmt: skip


def test_redirected_output_has_no_progress_bars_and_quiet_is_quiet(tmp_path):
    """Pipes are not terminals: no carriage-return bar lines; --quiet drops the progress lines."""
    sweep = ["sweep", "toy", "--grid", "scale=1,2", "--set", "bar_steps=50"]
    proc = _cli_subprocess([*sweep, "--out", str(tmp_path / "s")], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "\r" not in proc.stdout
    assert "[2/2] scale=2,seed=0: finished" in proc.stderr  # plain log lines instead
    assert "| scale | n |" in proc.stdout  # the table itself
    quiet = _cli_subprocess([*sweep, "--out", str(tmp_path / "q"), "--quiet"], tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert quiet.stdout.strip() == str(tmp_path / "q" / "sweep.md")
