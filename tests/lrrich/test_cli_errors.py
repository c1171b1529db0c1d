"""One error policy: expected failures are one line and exit 2; bugs keep their traceback."""

import errno
import functools
import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lrrich import cli, io, registry
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
            "loading 'mnist' needs tensorflow-datasets: pip install -e \".[data]\"",
            name="tensorflow_datasets",
        )

    _with_run(monkeypatch, needs_tfds)
    assert cli.main(["run", "toy", "--out", str(tmp_path / "r"), "--quiet"]) == 2
    assert 'pip install -e ".[data]"' in _one_line_error(capsys)


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
        from lrrich import cli, io, registry
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


def test_redirected_output_has_no_progress_bars_and_quiet_is_quiet(tmp_path, capsys, monkeypatch):
    """Pipes are not terminals: no carriage-return bar lines; --quiet drops the progress lines
    (the quiet run in this process, its output captured: not a terminal either)."""
    sweep = ["sweep", "toy", "--grid", "scale=1,2", "--set", "bar_steps=50"]
    proc = _cli_subprocess([*sweep, "--out", str(tmp_path / "s")], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "\r" not in proc.stdout
    assert "[2/2] scale=2,seed=0: finished" in proc.stderr  # plain log lines instead
    assert any(line.split()[:2] == ["scale", "n"] for line in proc.stdout.splitlines() if line)
    assert "![sweep]" not in proc.stdout and "| --- |" not in proc.stdout
    monkeypatch.delenv("TQDM_DISABLE", raising=False)  # as in the subprocess
    # tqdm imported before the command, without the variable (as after other work in a session;
    # tqdm reads it at import, so the variable alone comes too late): bars on by default.
    import tqdm.std

    shown = functools.partialmethod(tqdm.std.tqdm.__init__, disable=False)
    monkeypatch.setattr(tqdm.std.tqdm, "__init__", shown)  # restored after the test
    capsys.readouterr()
    assert cli.main([*sweep, "--out", str(tmp_path / "q"), "--quiet"]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == ""
    assert quiet.out.strip() == str(tmp_path / "q" / "sweep.md")


def _lrrich(args: list[str], cwd, **kw) -> subprocess.CompletedProcess:
    """The real ``lrrich`` command (``python -m lrrich.cli``) in a subprocess."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg", **kw.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-m", "lrrich.cli", *args], capture_output=True, text=True, env=env,
        cwd=cwd, timeout=300, **kw,
    )  # fmt: skip


def _lrrich_here(args: list[str], cwd, capsys, monkeypatch) -> tuple[int, str]:
    """``lrrich ARGS`` run from ``cwd`` in this process: what ``python -m lrrich.cli`` does
    (``sys.exit(cli.main())``) without starting Python again; (exit status, stderr)."""
    monkeypatch.chdir(cwd)
    status = cli.main(args)
    return status, capsys.readouterr().err


def test_the_real_command_refuses_a_config_in_one_line(tmp_path):
    """The ``lrrich`` process as users start it: exit status 2, one stderr line (nothing else
    printed on the way, imports included) and no folder; the cases below run in-process."""
    proc = _lrrich(["run", "target-downscaling", "--set", "epochs=-3", "--out", "o4"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "lrrich: error: --set epochs=-3: epochs must be ≥ 0, got -3\n"
    assert not (tmp_path / "o4").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "epochs=-3"], "--set epochs=-3: epochs must be ≥ 0, got -3"),
        (["--set", "lr=nan"], "--set lr=nan: lr must be a number, got nan"),
        (["--scale", "paper"], "--scale paper: dataset 'mnist' needs tensorflow-datasets"),
    ],
    ids=["negative-epochs", "nan-lr", "paper-without-data-extra"],
)
def test_a_refused_config_writes_nothing_and_names_the_key(
    tmp_path, args, message, capsys, monkeypatch
):
    """`lrrich run` checks the whole config before it creates the folder, so the corrected
    command runs into the same --out without --resume."""
    if "--scale" in args and importlib.util.find_spec("tensorflow_datasets") is not None:
        pytest.skip("tensorflow-datasets is installed: --scale paper is a valid config here")
    args = ["run", "target-downscaling", *args, "--out", "o4"]
    status, err = _lrrich_here(args, tmp_path, capsys, monkeypatch)
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"lrrich: error: {message}"), err
    assert not (tmp_path / "o4").exists()


def test_a_sweep_with_an_invalid_point_runs_none(tmp_path, capsys, monkeypatch):
    args = ["sweep", "demo", "--grid", "epochs=1,-3", "--out", "s", "--quiet"]
    status, err = _lrrich_here(args, tmp_path, capsys, monkeypatch)
    assert status == 2
    assert err.startswith("lrrich: error: --grid epochs=-3: epochs must be ≥ 0, got -3")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ("lr=0.1,,0.2", "--grid lr=0.1,,0.2: empty value"),
        ("lr=abc", "--grid lr: expected float, got 'abc'"),
    ],
)
def test_bad_grid_values_are_refused_by_name(tmp_path, grid, message, capsys, monkeypatch):
    args = ["sweep", "demo", "--grid", grid, "--out", "s"]
    status, err = _lrrich_here(args, tmp_path, capsys, monkeypatch)
    assert status == 2 and err.startswith(f"lrrich: error: {message}")
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "s").exists()


_BLOCKING = '''
"""An experiment that waits while the file ``block`` exists (for the interrupt tests)."""
import dataclasses, time
from pathlib import Path

NAME = "blocking"
DESCRIPTION = "waits while a file exists"


@dataclasses.dataclass(frozen=True)
class Config:
    seed: int = 0
    block: str = ""


def run(config, run_dir):
    (Path(run_dir) / "started").write_text("yes")
    while config.block and Path(config.block).exists():
        time.sleep(0.02)
    return {"summary": {"y": 1.0 + config.seed}}
'''


def _interrupt_then_resume(tmp_path, args: list[str], started: Path) -> tuple[str, str]:
    """Start ``lrrich ARGS``, send SIGINT once ``started`` exists, then run the printed command."""
    (tmp_path / "blocking.py").write_text(_BLOCKING)
    (tmp_path / "block").touch()
    script = textwrap.dedent("""
        import sys
        from lrrich import cli, io, registry
        import blocking
        registry.register(blocking)
        sys.exit(cli.main(sys.argv[1:]))
    """)
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}", "MPLBACKEND": "Agg"}
    cmd = [sys.executable, "-c", script]
    proc = subprocess.Popen(
        [*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        cwd=tmp_path,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err and last.startswith("lrrich: interrupted; "), err
    resume = shlex.split(last.split("continue with: ")[1])
    assert resume[0] == "lrrich"
    (tmp_path / "block").unlink()
    again = subprocess.run(
        [*cmd, *resume[1:]], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert again.returncode == 0, again.stderr
    return last, again.stdout


def test_ctrl_c_during_run_prints_the_resume_command_and_the_folder_resumes(tmp_path):
    last, out = _interrupt_then_resume(
        tmp_path, ["run", "blocking", "--set", "block=block", "--out", "r"], tmp_path / "r/started"
    )
    assert last == (
        "lrrich: interrupted; r keeps the unfinished run — continue with: "
        "lrrich run blocking --set block=block --out r --resume"
    )
    assert io.read_json(tmp_path / "r" / "results.json")["status"] == "finished"


def test_ctrl_c_during_sweep_names_the_folder_and_the_rerun_continues(tmp_path):
    args = ["sweep", "blocking", "--set", "block=block", "--seeds", "2", "--out", "s"]
    last, out = _interrupt_then_resume(tmp_path, args, tmp_path / "s/seed=0/started")
    assert last.endswith(f"continue with: lrrich {shlex.join(args)}")
    assert [p["status"] for p in io.read_json(tmp_path / "s" / "sweep.json")["points"]] == [
        "finished",
        "finished",
    ]


def test_report_on_a_missing_folder_says_it_does_not_exist(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "nope")]) == 2
    assert _one_line_error(capsys) == f"lrrich: error: {tmp_path / 'nope'} does not exist"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["run", "toyy"],
            "unknown experiment 'toyy'; did you mean 'toy'? (`lrrich list` shows all",
        ),
        (["run", "toy", "--set", "scal=2"], "unknown config key 'scal'; did you mean 'scale'?"),
        (
            ["sweep", "toy", "--grid", "ofset=1,2"],
            "unknown grid key 'ofset' for toy; did you mean 'offset'?",
        ),
        (["sweep", "toy", "--grid", "scale="], "--grid scale=: scale has no values"),
    ],
)
def test_mistyped_names_get_a_suggestion_and_empty_grids_say_so(tmp_path, capsys, argv, message):
    assert cli.main([*argv, "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert message in _one_line_error(capsys)
    assert not (tmp_path / "o").exists()
