"""Run folders: what a run records about itself, and when a folder may be (re)used.

A run folder holds ``config.json``::

    {"experiment": NAME, "scale": SCALE, "config": {...every field...},
     "provenance": {"git_commit", "git_dirty", "command", "packages", "python", "host", "started"}}

then ``results.json`` (with ``status``: ``finished`` or ``diverged``), figures and the report.
The rules, enforced by :func:`prepare`:

- an empty or absent folder starts a new run;
- a non-empty folder without ``config.json`` is not a run folder and is refused (nothing of the
  user's is overwritten);
- a run folder of another experiment is refused;
- continuing a run folder (finished or interrupted) requires ``resume=True`` *and* the same scale and
  config; otherwise the differing keys are listed.

:func:`lock` holds a run or sweep folder against a second ``lrrich`` process writing into it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lrrich import io

try:
    import fcntl
except ImportError:  # Windows has no flock: folders are not locked there
    fcntl = None

CONFIG = "config.json"
RESULTS = "results.json"
LOCK = ".lock"  # flock-ed by the process writing the folder; holds its PID
# Distributions whose versions decide a result; recorded in every run folder.
PACKAGES = ("lrrich", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "diffrax", "numpy")
_GIT_TIMEOUT_S = 10  # a hung network filesystem must not stall a run


def _git(*args: str) -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


def command_line() -> str:
    """This process's command line as a shell would take it (``lrrich sweep demo --grid ...``)."""
    return shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else ""


def provenance() -> dict[str, Any]:
    """Where a result comes from: git commit and dirty flag, command line, package versions.

    Returns:
      ``{"git_commit": str | None, "git_dirty": bool | None, "command": str, "packages": {name:
      version}, "python": str, "host": str, "started": ISO time}``; git fields are None outside a
      git checkout (an installed wheel).
    """
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            packages[name] = None
    return {
        "git_commit": commit.strip() if commit else None,
        "git_dirty": bool(status.strip()) if status is not None else None,
        "command": command_line(),
        "packages": packages,
        "python": platform.python_version(),
        "host": platform.node(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def config_dict(config: Any) -> dict[str, Any]:
    """A config dataclass as the JSON-normal dict stored in ``config.json`` (tuples → lists)."""
    return json.loads(json.dumps(io.jsonable(dataclasses.asdict(config))))


def write_run_record(
    run_dir: str | Path, experiment: Any, config: Any, scale: str = "small"
) -> Path:
    """Write ``config.json`` (experiment, scale, config, :func:`provenance`) into ``run_dir``.

    Args:
      run_dir: the run folder (created if absent).
      experiment: the :class:`lrrich.registry.Experiment` (or its name).
      config: the experiment's config dataclass instance.
      scale: the preset the config was derived from.

    Returns:
      the path of ``config.json``.
    """
    name = experiment if isinstance(experiment, str) else experiment.name
    record = {
        "experiment": name,
        "scale": scale,
        "config": config_dict(config),
        "provenance": provenance(),
    }
    return io.write_json(Path(run_dir) / CONFIG, record)


def config_differences(stored: dict, current: dict) -> list[str]:
    """``key: stored → current`` for every key whose value differs (or exists on one side only)."""
    out = []
    for key in sorted(set(stored) | set(current), key=lambda k: (k not in current, k)):
        a, b = stored.get(key, "(absent)"), current.get(key, "(absent)")
        if a != b:
            out.append(f"{key}: {a!r} in the folder, {b!r} now")
    return out


class FolderInUse(OSError):
    """Another process holds the folder's lock (the message names the folder and its PID)."""


@contextlib.contextmanager
def lock(folder: str | Path, *, shared: bool = False) -> Iterator[Path]:
    """Hold ``folder`` (created if absent) against a second ``lrrich`` writer inside the block.

    An exclusive ``flock`` on ``folder/.lock``, which records the holder's PID. The operating
    system drops the lock when the holder's file is closed, so a process that dies in any way
    (``kill -9`` included) leaves no stale lock behind. The lock belongs to this open of the file:
    the same process locking the same folder twice is refused too.

    Args:
      folder: the run or sweep folder.
      shared: a shared lock, which other shared holders may hold at once (the shards of one
        sweep, ``--shard i/N``, each writing its own points) but an exclusive one may not.

    Raises:
      FolderInUse: another process holds the lock (or, for ``shared``, holds it exclusively).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = path.read_text().strip() or "unknown"
                raise FolderInUse(
                    f"{folder} is in use by another lrrich process (PID {holder}); two writers "
                    "would mix their runs — wait for it to end (or stop it), or choose another --out"
                ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield folder
    finally:
        os.close(fd)


def is_empty(path: str | Path) -> bool:
    """Whether ``path`` is absent or holds nothing but its :data:`LOCK` file."""
    path = Path(path)
    return not path.exists() or all(p.name == LOCK for p in path.iterdir())


def is_run_folder(path: str | Path) -> bool:
    """Whether ``path`` holds a ``config.json`` naming an experiment."""
    cfg = Path(path) / CONFIG
    if not cfg.is_file():
        return False
    data = io.read_json(cfg)
    return isinstance(data, dict) and "experiment" in data


def prepare(run_dir: str | Path, experiment: Any, config: Any, *, scale: str, resume: bool) -> bool:
    """Check that ``run_dir`` may hold this run; returns whether it continues an earlier one.

    Args:
      run_dir: the run folder.
      experiment: the experiment (or its name).
      config: the config dataclass instance of this run.
      scale: its preset name.
      resume: whether the user asked to continue the folder (``--resume``).

    Returns:
      True when ``run_dir`` is a run folder of the same experiment, scale and config and
      ``resume`` is set (the experiment picks up its checkpoints); False for a fresh folder.

    Raises:
      FileExistsError: ``run_dir`` is a non-empty folder that is not a run folder, or a run folder
        and ``resume`` is not set.
      ValueError: a run folder of another experiment, or of another scale or config (the
        message lists the differing keys).
    """
    run_dir = Path(run_dir)
    name = experiment if isinstance(experiment, str) else experiment.name
    if run_dir.exists() and not run_dir.is_dir():
        raise FileExistsError(f"{run_dir} is a file, not a run folder; choose another --out")
    if is_empty(run_dir):
        return False
    if not is_run_folder(run_dir):
        raise FileExistsError(
            f"{run_dir} is not empty and is not a run folder (no {CONFIG}); nothing was "
            "written — choose another --out"
        )
    stored = io.read_json(run_dir / CONFIG)
    if stored["experiment"] != name:
        raise ValueError(
            f"{run_dir} holds a run of {stored['experiment']!r}, not {name!r}; choose another --out"
        )
    state = "finished results" if (run_dir / RESULTS).exists() else "an unfinished run"
    if not resume:
        raise FileExistsError(
            f"{run_dir} already holds {state}; pass --resume to continue it (same config) "
            "or choose another --out"
        )
    diffs = config_differences(stored.get("config", {}), config_dict(config))
    if stored.get("scale", scale) != scale:
        diffs.insert(0, f"scale: {stored.get('scale')!r} in the folder, {scale!r} now")
    if diffs:
        raise ValueError(
            f"{run_dir} holds {state} with another config; --resume continues only the same "
            f"config. Differences: {'; '.join(diffs)}. Choose another --out"
        )
    return True


def finished_results(
    run_dir: str | Path, experiment: Any, config: Any, *, scale: str, resume: bool
) -> dict | None:
    """The results of ``run_dir`` if ``resume`` asks to continue a run of this config that has
    finished (nothing is left to compute); None when the run is new or unfinished.

    Raises:
      FileExistsError, ValueError: ``run_dir`` may not hold this run (:func:`prepare`).
    """
    if not prepare(run_dir, experiment, config, scale=scale, resume=resume):
        return None
    path = Path(run_dir) / RESULTS
    results = io.read_json(path) if path.exists() else None
    return results if results is not None and results.get("status") == "finished" else None


def environment() -> dict[str, Any]:
    """The JAX backend and devices a run used (recorded in ``results.json``)."""
    import jax

    return {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "python": platform.python_version(),
        "machine": platform.machine(),
        "pid": os.getpid(),
    }
