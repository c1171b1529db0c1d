"""Sweeps: a grid of ``key=value`` overrides × seeds, run here, in processes, or as a SLURM array.

Each point gets its own run folder ``<sweep_dir>/<k1=v1,k2=v2,seed=s>``. A point ends
``finished`` or ``diverged`` (``results.json``) or ``failed`` (``status.json`` with the error);
one failing point never stops the others. Re-running the same command runs only the points that
have not finished (failed ones are retried), so an interrupted sweep resumes, and says what it
kept and what it runs. The sweep folder records its sweep in ``sweep_config.json`` and grows
(:func:`grown_sweep`): new values of its grid axes and a larger ``seeds`` run only the new
points; another experiment, scale, ``--set`` value or set of axes is refused. Each command that
ran it is one line of ``sweep_runs.jsonl`` (executor, jobs, command).

While a sweep runs, its folder is locked against a second writer (:func:`lrrich.runfolder.lock`;
the shards of one sweep share it), and its worker processes end with it (:func:`_die_with`).

:func:`aggregate` reduces the numeric ``summary`` entries of the finished points of *this*
sweep to mean, sample standard deviation (ddof = 1) and n per grid point, lists the points that
did not finish, and writes ``sweep.json``, ``sweep.md`` and ``sweep.png``.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import math
import multiprocessing
import os
import signal
import sys
import textwrap
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lrrich import io, runfolder
from lrrich.registry import did_you_mean, get, register

if TYPE_CHECKING:
    from lrrich.executors import SlurmOptions

SWEEP_CONFIG = "sweep_config.json"
SWEEP_RUNS = "sweep_runs.jsonl"  # one line per command that ran the sweep: how it ran
# What defines a sweep's points (sweep_config.json); a folder may hold one such sweep.
_SWEEP_KEYS = ("experiment", "scale", "grid", "seeds", "set", "per_point")
STATUS = "status.json"
FINISHED, DIVERGED, FAILED, PENDING = "finished", "diverged", "failed", "pending"
DONE = (FINISHED, DIVERGED)  # final: not run again
EXECUTORS = ("local", "slurm", "local-submitit")
_STD_LABEL = "sample standard deviation over seeds (ddof = 1)"
_MAX_PANEL_COLUMNS = 4
_MESSAGE_CHARS = 300  # of an error message in sweep.md (sweep.json keeps it whole)


def parse_grid(items: list[str]) -> dict[str, list[str]]:
    """``["lr=0.1,0.2", "depth=2,3"]`` → ``{"lr": ["0.1", "0.2"], "depth": ["2", "3"]}``.

    Raises:
      ValueError: an item without ``=``, an empty value (``lr=0.1,,0.2``), a value listed twice,
        or a key given twice; the message names ``--grid``.
    """
    grid = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--grid expects key=v1,v2,..., got {item!r}")
        k, vs = (part.strip() for part in item.split("=", 1))
        values = [v.strip() for v in vs.split(",")]
        if not k:
            raise ValueError(f"--grid {item}: no key before '='")
        if not vs:
            raise ValueError(f"--grid {k}=: {k} has no values; list them as {k}=V1,V2,...")
        if "" in values:
            raise ValueError(f"--grid {k}={vs}: empty value (two commas, or one at an end)")
        if len(set(values)) < len(values):
            raise ValueError(f"--grid {k}={vs}: a value is listed twice")
        if k in grid:
            raise ValueError(f"--grid {k} is given twice; list all its values in one --grid")
        grid[k] = values
    return grid


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` → ``(i, N)``; ``"slurm"`` reads the SLURM array task id and count.

    Raises:
      ValueError: not of the form ``i/N`` with ``0 <= i < N``, or ``"slurm"`` outside a SLURM
        array task.
    """
    if text == "slurm":
        env = os.environ
        if "SLURM_ARRAY_TASK_ID" not in env or "SLURM_ARRAY_TASK_COUNT" not in env:
            raise ValueError(
                "--shard slurm needs SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT "
                "(run it inside an sbatch --array job)"
            )
        first = int(env.get("SLURM_ARRAY_TASK_MIN", "0"))
        return int(env["SLURM_ARRAY_TASK_ID"]) - first, int(env["SLURM_ARRAY_TASK_COUNT"])
    try:
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard expects i/N (e.g. 0/4) or 'slurm', got {text!r}") from None
    if not 0 <= i < n:
        raise ValueError(f"--shard i/N needs 0 <= i < N, got {text!r}")
    return i, n


def grid_points(grid: dict[str, list[str]], seeds: int) -> list[dict[str, str]]:
    """All override dicts of the grid × ``range(seeds)`` (seed added as the ``seed`` key).

    Raises:
      ValueError: ``seeds < 1``, or a ``seed`` grid axis together with ``seeds > 1``.
    """
    if seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {seeds}")
    if "seed" in grid and seeds > 1:
        raise ValueError(f"--grid seed=... and --seeds {seeds} both set the seed; use one of them")
    keys = list(grid)
    points = []
    for values in itertools.product(*(grid[k] for k in keys)):
        for s in range(seeds):
            pt = dict(zip(keys, values, strict=True))
            if seeds > 1 or "seed" not in pt:
                pt.setdefault("seed", str(s))
            points.append(pt)
    return points


def point_dir(sweep_dir: str | Path, point: dict[str, str]) -> Path:
    """The run folder of ``point``: ``<sweep_dir>/k1=v1,k2=v2,seed=s``."""
    return Path(sweep_dir) / ",".join(f"{k}={v}" for k, v in point.items()).replace("/", "_")


def point_status(run_dir: str | Path) -> dict:
    """``{"status", "message"}`` of a point folder: finished, diverged, failed or pending."""
    run_dir = Path(run_dir)
    if (run_dir / STATUS).exists():  # written on failure, removed when the point runs again
        return io.read_json(run_dir / STATUS)
    if (run_dir / runfolder.RESULTS).exists():
        res = io.read_json(run_dir / runfolder.RESULTS)
        return {"status": res.get("status", FINISHED), "message": res.get("message")}
    return {"status": PENDING, "message": None}


def _experiment(name: str, module: str):
    """The experiment ``name``, registering ``module`` first when this process lacks it."""
    try:
        return get(name)
    except KeyError:
        return register(importlib.import_module(module))


def run_point(
    name: str,
    module: str,
    scale: str,
    point: dict[str, str],
    run_dir: str,
    share_device: bool = False,
) -> dict:
    """Run one sweep point into ``run_dir``; any failure becomes ``status.json``, not an exception.

    Args:
      name: experiment name.
      module: the module defining it (imported and registered in a fresh worker process).
      scale: config preset.
      point: its ``key=value`` overrides (seed included).
      run_dir: the point's run folder.
      share_device: this process shares its accelerator with other points' processes: JAX
        allocates memory on demand (read when JAX first uses the device, so set before that).

    Returns:
      ``{"status": "finished" | "diverged" | "failed", "message": str | None}``.
    """
    if share_device:
        _worker_init()
    run_dir = Path(run_dir)
    try:
        with runfolder.lock(run_dir):
            (run_dir / STATUS).unlink(missing_ok=True)  # a retried failure starts clean
            try:
                exp = _experiment(name, module)
                results = _run_resumable(exp, scale, point, run_dir)
                out = {"status": results["status"], "message": results.get("message")}
            except Exception as e:
                out = {
                    "status": FAILED,
                    "message": f"{type(e).__name__}: {e}",
                    "traceback": traceback.format_exc(),
                }
                io.write_json(run_dir / STATUS, out)
    except runfolder.FolderInUse as e:  # another process runs this point: leave its folder alone
        out = {"status": FAILED, "message": str(e)}
    return out


def _run_resumable(exp, scale: str, point: dict[str, str], run_dir: Path) -> dict:
    from lrrich.runner import run_experiment

    config = exp.config(scale, point)
    resume = runfolder.is_run_folder(run_dir)
    return run_experiment(exp, config, run_dir, scale=scale, resume=resume)


def _worker_init(parent: int | None = None) -> None:
    """Set up a worker process of a parallel sweep.

    Processes sharing one accelerator allocate memory on demand instead of 75% each; a worker
    started by the sweep process ``parent`` ends when that process ends (:func:`_die_with`).
    """
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if parent is not None:
        _die_with(parent)


_PR_SET_PDEATHSIG = 1  # prctl(2) option: the signal sent when the parent thread ends
_WATCH_PARENT_S = 1.0  # how often a worker without prctl looks for its parent


def _die_with(parent: int) -> None:
    """End this process when ``parent`` ends, however it ends (``kill -9`` included).

    Linux sends the parent-death signal (``prctl(PR_SET_PDEATHSIG)``, see prctl(2)) when the
    thread that started the worker ends; that is the thread calling ``run_sweep``, which waits for
    every worker. Elsewhere a daemon thread polls the parent's PID. Either way a killed sweep
    leaves no worker writing into its folder (each point's results are written atomically, so a
    killed point is simply unfinished).
    """
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    else:
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # the parent ended before the signal was armed
        os._exit(1)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_WATCH_PARENT_S)
    os._exit(1)


def _stored_sweep(sweep_dir: Path) -> dict | None:
    """The sweep recorded in ``sweep_dir``; None for an absent or empty folder.

    Raises:
      FileExistsError: a non-empty folder that is not a sweep folder.
    """
    if sweep_dir.exists() and not sweep_dir.is_dir():
        raise FileExistsError(f"{sweep_dir} is a file, not a sweep folder; choose another --out")
    if runfolder.is_empty(sweep_dir):
        return None
    path = sweep_dir / SWEEP_CONFIG
    if not path.exists():
        raise FileExistsError(
            f"{sweep_dir} is not empty and is not a sweep folder (no {SWEEP_CONFIG}); "
            "nothing was written — choose another --out"
        )
    return io.read_json(path)


def _sweep_keys(meta: dict) -> dict:
    """The part of a sweep record that defines its points (:data:`_SWEEP_KEYS`)."""
    return {"set": {}, **{k: meta[k] for k in _SWEEP_KEYS if k in meta}}


def _fixed_values(meta: dict) -> dict[str, str]:
    """Every override a point gets besides its grid values and seed: ``--set`` and ``seeds=1``."""
    return {**meta.get("set", {}), **meta.get("per_point", {})}


def grown_sweep(stored: dict | None, meta: dict, sweep_dir: Path) -> tuple[dict, list[str]]:
    """The sweep ``sweep_dir`` holds once this command's sweep ``meta`` is added to ``stored``.

    A sweep folder grows: new values of its grid axes and a larger ``seeds`` add points; the
    points already there are kept. Anything else would mix two sweeps' points in one table.

    Returns:
      the folder's sweep (the recorded one grown by ``meta``; ``meta`` for a new folder) and what
      this command changes or leaves out, in words (empty for the same sweep again).

    Raises:
      ValueError: ``stored`` has another experiment, scale, fixed value (``--set``) or other grid
        axes; the message names each differing key with both values.
    """
    if stored is None:
        return meta, []
    diffs = [
        f"{key}: {stored.get(key)!r} in the folder, {meta[key]!r} now"
        for key in ("experiment", "scale")
        if stored.get(key) != meta[key]
    ]
    old_set, new_set = _fixed_values(stored), _fixed_values(meta)
    for k in sorted(set(old_set) | set(new_set)):
        if old_set.get(k) != new_set.get(k):
            was, now = (f"{k}={d[k]}" if k in d else "unset" for d in (old_set, new_set))
            diffs.append(f"--set {k}: {was} in the folder, {now} now")
    old_grid, new_grid = stored["grid"], meta["grid"]
    if set(old_grid) != set(new_grid):
        diffs.append(
            f"--grid axes: {', '.join(old_grid) or 'none'} in the folder, "
            f"{', '.join(new_grid) or 'none'} now"
        )
    if diffs:
        raise ValueError(
            f"{sweep_dir} holds another sweep ({'; '.join(diffs)}); its points would mix with "
            "this one's. A sweep folder grows only by new --grid values or more --seeds: repeat "
            "its other settings, or choose another --out"
        )
    grid = {k: old_grid[k] + [v for v in new_grid[k] if v not in old_grid[k]] for k in old_grid}
    notes = []
    for k in old_grid:
        added = [v for v in new_grid[k] if v not in old_grid[k]]
        left = [v for v in old_grid[k] if v not in new_grid[k]]
        if added:
            notes.append(f"{k} gains {','.join(added)}")
        if left:
            notes.append(f"{k}={','.join(left)} kept from before (not in this command)")
    if meta["seeds"] > stored["seeds"]:
        notes.append(f"seeds {stored['seeds']} → {meta['seeds']}")
    elif meta["seeds"] < stored["seeds"]:
        notes.append(
            f"{stored['seeds']} seeds kept from before (this command asks {meta['seeds']})"
        )
    return {**stored, "grid": grid, "seeds": max(stored["seeds"], meta["seeds"])}, notes


def check_sweep_folder(sweep_dir: Path, meta: dict) -> dict:
    """Refuse a ``sweep_dir`` that may not hold ``meta``'s sweep; returns the sweep it will hold.

    Raises:
      FileExistsError: a non-empty folder that is not a sweep folder.
      ValueError: a sweep folder that cannot grow into this one (:func:`grown_sweep`).
    """
    return grown_sweep(_stored_sweep(Path(sweep_dir)), meta, Path(sweep_dir))[0]


def _lines(progress: bool) -> Callable[[str], None]:
    if not progress:
        return lambda _: None
    return lambda s: print(s, file=sys.stderr, flush=True)


def one_seed_per_point(name, valid, fixed, grid, seeds, log) -> dict[str, str]:
    """``fixed`` with ``seeds=1`` for an experiment that repeats every run over its own seeds.

    Such an experiment (a ``seeds`` field) trains ``seed, …, seed + seeds − 1`` in every run. In a
    sweep the sweep's seeds replace the experiment's, for every ``--seeds N``: each point trains
    one seed, so N seeds per grid point are N runs and the table's n counts the seeds behind each
    mean (points of different seeds never share a run).

    Raises:
      ValueError: ``seeds`` set through ``--set`` (other than 1) or ``--grid``.
    """
    if "seeds" not in valid:
        return fixed
    if "seeds" in grid or fixed.get("seeds", "1").strip() != "1":
        typed = "--grid seeds=..." if "seeds" in grid else f"--set seeds={fixed['seeds']}"
        raise ValueError(
            f"{name} repeats each run over seeds (its 'seeds' field); in a sweep --seeds N sets "
            f"them: each point trains one seed and the table averages N. Use --seeds instead of "
            f"{typed}"
        )
    if "seeds" not in fixed:
        log(
            f"{name}: each point trains one seed (seeds=1); --seeds {seeds} gives {seeds} per grid point"
        )
    return {**fixed, "seeds": "1"}


def check_sweep_keys(name: str, grid: dict, fixed: dict, seeds: int) -> list[str]:
    """The config fields of experiment ``name``, after checking the sweep's keys against them:
    grid keys must be fields, a key is set by ``--set`` or ``--grid`` (not both), the seed is the
    sweep's (``--seeds``), and ``--seeds`` > 1 needs a ``seed`` field.

    Raises:
      ValueError: naming the offending key and what to pass instead.
    """
    valid = [f.name for f in dataclasses.fields(get(name).config_cls)]
    for k in grid:
        if k not in valid:
            hint = did_you_mean(k, valid)
            raise ValueError(
                f"unknown grid key {k!r} for {name}; {hint + ' ' if hint else ''}"
                f"valid: {', '.join(valid)}"
            )
    both = sorted(set(fixed) & set(grid))
    if both:
        raise ValueError(f"--set and --grid both set {both}; use one of them")
    if "seed" in fixed:
        raise ValueError(
            f"--set seed={fixed['seed']}: a sweep sets each point's seed (--seeds N: 0..N-1); "
            f"for other seeds use --grid seed={fixed['seed']}"
        )
    if seeds > 1 and "seed" not in valid:
        raise ValueError(f"{name}'s config has no 'seed' field; --seeds needs one")
    return valid


def run_sweep(
    name: str,
    grid: dict[str, list[str]],
    sweep_dir: str | Path,
    *,
    seeds: int = 1,
    scale: str = "small",
    jobs: int = 1,
    max_runs: int = 64,
    yes: bool = False,
    progress: bool = True,
    executor: str = "local",
    slurm: SlurmOptions | None = None,
    shard: tuple[int, int] | None = None,
    vmap: bool = False,
    fixed: dict[str, str] | None = None,
    vectorize: bool = False,
) -> dict:
    """Run experiment ``name`` over ``grid`` × seeds into ``sweep_dir``, then :func:`aggregate`.

    Args:
      name: experiment name.
      grid: axis → values (strings, coerced to the config's field types).
      sweep_dir: the sweep folder.
      seeds: seeds per grid point (``seed = 0..seeds-1``); an experiment that repeats its runs
        over a ``seeds`` field trains one seed per point (:func:`one_seed_per_point`).
      scale: config preset.
      jobs: parallel processes (``executor="local"``).
      max_runs: refuse a larger sweep unless ``yes``.
      yes: allow more than ``max_runs`` runs.
      progress: print one line per point to stderr (a progress bar on a terminal).
      executor: ``"local"`` (this machine), ``"slurm"`` (a submitit job array on SLURM; refused
        when ``sbatch`` is not on the PATH) or ``"local-submitit"`` (the same array as local
        processes through submitit, for trying the path on a laptop).
      slurm: :class:`lrrich.executors.SlurmOptions` for ``executor="slurm"``.
      shard: ``(i, N)``: run only points ``i, i+N, i+2N, ...`` of the grid (any scheduler).
      vmap: run the unfinished points as one vmapped program when the experiment supports it.
      fixed: ``key=value`` overrides applied to every point (``--set``), not grid axes.
      vectorize: with ``vmap``, step the stacked runs as one ``jax.vmap`` (batched matmuls,
        faster for small models; equal to separate runs to round-off, not bitwise).

    Returns:
      the :func:`aggregate` of the sweep folder.

    Raises:
      ValueError: unknown grid keys or values (checked before anything runs), a grid that is
        not lists of values, ``seeds`` or ``jobs`` not a whole number ≥ 1, ``seed`` both in the
        grid and through ``seeds`` or set through ``fixed``, more than ``max_runs`` runs without
        ``yes``, an unknown executor, or a folder holding another sweep (:func:`grown_sweep`).
      FileExistsError: ``sweep_dir`` is a file, or a non-empty folder that is not a sweep folder.
      lrrich.runfolder.FolderInUse: another process is writing into ``sweep_dir``.
    """
    check_sweep_options(vectorize=vectorize, vmap=vmap, executor=executor, jobs=jobs, seeds=seeds)
    grid = _checked_grid(grid)
    settings = _run_settings(executor, jobs, vmap, vectorize, shard)
    executor, slurm = _executor(executor, slurm)
    exp, log, sweep_dir = get(name), _lines(progress), Path(sweep_dir)
    asked, fixed = command_sweep(name, grid, dict(fixed or {}), seeds, scale, log)
    stored = _stored_sweep(sweep_dir)
    meta, notes = grown_sweep(stored, asked, sweep_dir)
    points, overrides, configs = _checked_points(exp, scale, meta, fixed, grid, max_runs, yes)
    # The shards of one sweep (--shard i/N, each its own points) may run at once; nothing else.
    with runfolder.lock(sweep_dir, shared=shard is not None):
        _refuse_a_changed_folder(sweep_dir, stored, asked, meta)
        before, todo = _points_to_run(sweep_dir, points, shard, executor == "slurm", log)
        _record_command(sweep_dir, _sweep_keys(meta), {**settings, "points_run": len(todo)})
        log(_what_this_run_does(name, sweep_dir, stored, notes, points, before, todo))
        if vmap:
            todo = _run_vmapped(exp, scale, configs, points, todo, sweep_dir, log, vectorize)
        runs = [(overrides[i], point_dir(sweep_dir, points[i])) for i in todo]
        _run_points(exp, scale, runs, sweep_dir, executor, slurm, jobs, log, progress)
        return aggregate(sweep_dir)


def command_sweep(
    name: str, grid: dict, fixed: dict[str, str], seeds: int, scale: str, log
) -> tuple[dict, dict[str, str]]:
    """The sweep this command asks for, checked, and the overrides every one of its points gets.

    Returns:
      the sweep as ``sweep_config.json`` records it (``experiment``, ``scale``, ``grid``,
      ``seeds``, ``set``: ``fixed`` as typed, and ``per_point``: what the sweep adds to it, the
      ``seeds=1`` of :func:`one_seed_per_point`), and ``fixed`` with those additions.

    Raises:
      ValueError: the refusals of :func:`check_sweep_keys`, :func:`one_seed_per_point` and
        :func:`grid_points`.
    """
    valid = check_sweep_keys(name, grid, fixed, seeds)
    every_point = one_seed_per_point(name, valid, fixed, grid, seeds, log)
    grid_points(grid, seeds)  # the command's own seed requests, checked as typed
    meta = {"experiment": name, "scale": scale, "grid": grid, "seeds": seeds, "set": dict(fixed)}
    if every_point != fixed:
        meta["per_point"] = {k: v for k, v in every_point.items() if k not in fixed}
    return meta, every_point


def point_flags(grid: dict) -> dict[str, str]:
    """The option that set each swept key (``--grid``, or ``--seeds`` for the seed), which a
    refused value names."""
    return {**{k: "--grid" for k in grid}, **({"seed": "--seeds"} if "seed" not in grid else {})}


def check_max_runs(runs: int, max_runs: int, yes: bool) -> None:
    """Refuse a sweep of more than ``max_runs`` runs unless ``yes`` (``--yes``)."""
    if runs > max_runs and not yes:
        raise ValueError(
            f"the sweep would launch {runs} runs (> --max-runs {max_runs}); pass --yes"
        )


def shard_indices(n: int, shard: tuple[int, int] | None) -> range:
    """The indices of the ``n`` points that shard ``(i, N)`` runs: ``i, i+N, …`` (all without)."""
    return range(n) if shard is None else range(shard[0], n, shard[1])


def _checked_points(exp, scale: str, meta: dict, fixed: dict, grid: dict, max_runs, yes):
    """The points of the folder's sweep ``meta``, the overrides of each and its checked config.

    Every point's whole config is built and checked before anything is written or run.

    Raises:
      ValueError: a point whose config cannot run, or more than ``max_runs`` runs without ``yes``.
    """
    points = grid_points(meta["grid"], meta["seeds"])
    overrides = [{**fixed, **p} for p in points]
    flags = point_flags(grid)
    configs = [exp.config(scale, o, flags=flags, runnable=True) for o in overrides]
    check_max_runs(len(points), max_runs, yes)
    return points, overrides, configs


def _refuse_a_changed_folder(sweep_dir: Path, stored, asked: dict, meta: dict) -> None:
    """Refuse to run when another process recorded a different sweep in ``sweep_dir`` since it was
    read (``stored``); another shard of the same sweep may have recorded it, which is fine."""
    now = _stored_sweep(sweep_dir)
    if now != stored and _sweep_keys(grown_sweep(now, asked, sweep_dir)[0]) != _sweep_keys(meta):
        raise ValueError(
            f"{sweep_dir} changed while this sweep started (another process wrote to it); "
            "nothing was run — run the command again"
        )


def _run_points(exp, scale: str, runs, sweep_dir: Path, executor, slurm, jobs, log, progress):
    """Run each ``(overrides, run folder)`` of ``runs`` as a point, on SLURM or here.

    Processes that share one accelerator (``jobs > 1``, or a submitit array run locally) allocate
    its memory on demand (:func:`run_point`'s ``share_device``).
    """
    shared = jobs > 1 or (executor == "slurm" and slurm is not None and slurm.cluster == "local")
    args = [(exp.name, exp.module, scale, o, str(d), shared) for o, d in runs]
    labels = [d.name for _, d in runs]
    if executor == "slurm":
        _run_slurm(args, labels, sweep_dir, slurm, exp.name, log)
    else:
        _run_local(args, labels, jobs, log, progress)


def _points_to_run(sweep_dir: Path, points: list, shard, on_slurm: bool, log):
    """(status of this command's points, the indices still to run): this shard's points that are
    not done, less those still queued or running on SLURM."""
    mine = shard_indices(len(points), shard)
    before = {i: point_status(point_dir(sweep_dir, points[i]))["status"] for i in mine}
    todo = [i for i in mine if before[i] not in DONE]
    if on_slurm:
        from lrrich.executors import active_points

        busy = active_points(sweep_dir / "logs")
        queued = [i for i in todo if point_dir(sweep_dir, points[i]).name in busy]
        if queued:
            log(f"{len(queued)} points are still queued or running on SLURM; not submitted again")
        todo = [i for i in todo if i not in queued]
    return before, todo


def _run_settings(executor: str, jobs: int, vmap: bool, vectorize: bool, shard) -> dict:
    """How this command runs the sweep, as :data:`SWEEP_RUNS` records it (and ``sweep.md`` shows)."""
    shard_text = f"{shard[0]}/{shard[1]}" if shard else None
    return {
        "executor": executor,
        "jobs": jobs,
        "vmap": vmap,
        "vectorize": vectorize,
        "shard": shard_text,
    }


def _record_command(sweep_dir: Path, keys: dict, settings: dict) -> None:
    """Write the sweep's keys and append how this command runs it (start time, command line,
    ``settings``) to :data:`SWEEP_RUNS`."""
    run = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": runfolder.command_line(),
        **settings,
    }
    io.write_json(sweep_dir / SWEEP_CONFIG, keys)
    with open(sweep_dir / SWEEP_RUNS, "a") as f:  # one short append: shards do not collide
        f.write(json.dumps(run) + "\n")


def check_sweep_options(*, vectorize: bool, vmap: bool, executor: str, jobs, seeds) -> None:
    """Refuse sweep options that cannot run (``--vectorize`` without ``--vmap``, an unknown
    executor, ``--jobs`` or ``--seeds`` not a whole number ≥ 1), before anything is read."""
    if vectorize and not vmap:
        raise ValueError("--vectorize applies to --vmap sweeps; add --vmap")
    if executor not in EXECUTORS:
        raise ValueError(f"--executor must be one of {list(EXECUTORS)}, got {executor!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"--jobs must be a whole number ≥ 1, got {jobs!r}")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(
            f"--seeds must be a whole number ≥ 1 (seeds per grid point), got {seeds!r}"
        )


def _executor(executor: str, slurm):
    """``("local", slurm)``, or ``("slurm", options)`` for the submitit executors, whose
    cluster is checked to be reachable before anything is written."""
    if executor == "local":
        return executor, slurm
    from lrrich.executors import SlurmOptions, check_available

    slurm = slurm or SlurmOptions()
    if executor == "local-submitit":
        slurm = dataclasses.replace(slurm, cluster="local")
    check_available(slurm)
    return "slurm", slurm


def _run_slurm(args: list, labels: list[str], sweep_dir: Path, slurm, name: str, log) -> None:
    """The points as one submitit job array; a job that died before its point could write its
    status is recorded as failed."""
    from lrrich.executors import SlurmOptions, run_array

    outs = run_array(
        run_point, args, labels, sweep_dir / "logs", slurm or SlurmOptions(), name=name, log=log
    )
    for a, out in zip(args, outs or [], strict=False):
        if out["status"] == FAILED and not (Path(a[4]) / STATUS).exists():
            io.write_json(Path(a[4]) / STATUS, out)


def _checked_grid(grid) -> dict[str, list[str]]:
    """``grid`` as :func:`parse_grid` gives it (values as strings), refusing what is not a grid.

    Raises:
      ValueError: not a dict of lists, an axis with no values or a value listed twice.
    """
    if not isinstance(grid, dict):
        raise ValueError(f"grid must be a dict of axis → list of values, got {grid!r}")
    out = {}
    for k, values in grid.items():
        if isinstance(values, str) or not isinstance(values, list | tuple):
            raise ValueError(
                f"grid axis {k!r} must be a list of values, got {values!r} "
                f"(parse_grid(['{k}=V1,V2']) makes one from text)"
            )
        if not values:
            raise ValueError(f"--grid {k}=: {k} has no values; list them as {k}=V1,V2,...")
        values = [str(v) for v in values]
        if len(set(values)) < len(values):
            raise ValueError(f"--grid {k}={','.join(values)}: a value is listed twice")
        out[str(k)] = values
    return out


def _what_this_run_does(name, sweep_dir, stored, notes, points, before, todo) -> str:
    """One line: a new sweep, the same one again, or a grown one; what is kept and what runs."""
    mine = len(before)
    if stored is None:
        return f"{name}: {mine} points -> {sweep_dir}"
    kept = sum(s in DONE for s in before.values())
    head = f"{sweep_dir}: " + (
        f"the sweep grows ({'; '.join(notes)})" if notes else "this sweep again"
    )
    reasons = {
        PENDING: "new or not started",
        FAILED: "failed earlier, run again",
    }
    counts = {}
    for i in todo:
        state = before[i]
        if state == PENDING and point_dir(sweep_dir, points[i]).is_dir():
            label = "interrupted, continued"
        else:
            label = reasons.get(state, state)
        counts[label] = counts.get(label, 0) + 1
    run = ", ".join(f"{v} {k}" for k, v in counts.items())
    return f"{head}: {kept} of {mine} points finished earlier (kept); " + (
        f"{len(todo)} to run ({run})" if todo else "nothing to run"
    )


def _run_local(args, labels, jobs: int, log, progress: bool) -> None:
    bar = None
    if progress and sys.stderr.isatty():
        from tqdm.auto import tqdm

        bar = tqdm(total=len(args), desc="sweep", unit="point")

    def done(k: int, label: str, out: dict) -> None:
        if bar is not None:
            bar.update()
        msg = f": {out['message']}" if out["status"] != FINISHED else ""
        text = f"[{k}/{len(args)}] {label}: {out['status']}{msg}"
        (bar.write if bar is not None else log)(text.splitlines()[0])

    if jobs <= 1:
        for k, (a, label) in enumerate(zip(args, labels, strict=True), 1):
            done(k, label, run_point(*a))
    else:
        ctx = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(
            max_workers=jobs, mp_context=ctx, initializer=_worker_init, initargs=(os.getpid(),)
        )
        try:
            futs = [pool.submit(run_point, *a) for a in args]
            for k, (f, label) in enumerate(zip(futs, labels, strict=True), 1):
                done(k, label, f.result())
        except KeyboardInterrupt:  # Ctrl-C: start no further point; the folders stay resumable
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
    if bar is not None:
        bar.close()


def _run_vmapped(
    exp, scale: str, configs, points, todo, sweep_dir, log, vectorize: bool = False
) -> list[int]:
    """Run the points ``todo`` (indices into ``points`` and their ``configs``) through
    ``lrrich.sweep_vmap``; returns the points left for processes."""
    if not todo:
        log("--vmap went unused: no point is left to run")
        return todo
    try:
        from lrrich import sweep_vmap
    except ImportError as e:
        log(f"--vmap unavailable ({e}); running the points as processes")
        return todo
    dirs = [point_dir(sweep_dir, points[i]) for i in todo]
    todo_configs = [configs[i] for i in todo]
    try:
        sweep_vmap.run_points(exp, todo_configs, dirs, scale=scale, vectorize=vectorize)
    except sweep_vmap.VmapUnsupported as e:
        log(f"--vmap: {e}; running the points as processes")
        return todo
    except Exception as e:  # one vmapped program failed: the points still run, one by one
        log(f"--vmap failed ({type(e).__name__}: {e}); running the points as processes")
        return todo
    return [i for i, d in zip(todo, dirs, strict=True) if point_status(d)["status"] not in DONE]


def _is_timing(key: str) -> bool:
    """Summary entries that are durations (``*_seconds``, ``*_s``), not results."""
    return key.endswith(("_seconds", "_s"))


def _stats(values: list[float]) -> dict:
    vals = np.asarray(values, dtype=float)
    std = float(vals.std(ddof=1)) if len(vals) > 1 else None
    return {"mean": float(vals.mean()), "std": std, "n": len(vals)}


def aggregate(sweep_dir: str | Path) -> dict:
    """Mean, sample std (ddof = 1) and n over seeds of the finished points of this sweep.

    Only the points of the grid recorded in ``sweep_config.json`` are read (other folders in
    ``sweep_dir`` are ignored). Writes ``sweep.json``, ``sweep.md`` and ``sweep.png``.

    Returns:
      ``{"experiment", "grid", "seeds", "std", "rows", "points", "failures"}``: ``rows`` holds one
      entry per grid point, ``{"point": {key: value}, "n": finished seeds, metric: {"mean", "std",
      "n"}}`` (``std`` None when n < 2; the metric None when it was NaN for every seed); ``points`` the status of every point; ``failures`` the
      points that diverged or failed, with their messages.
    """
    sweep_dir = Path(sweep_dir)
    meta = io.read_json(sweep_dir / SWEEP_CONFIG)
    grid_keys = [k for k in meta["grid"] if k != "seed"]
    points = grid_points(meta["grid"], meta["seeds"])
    groups: dict[tuple, list[dict]] = {}
    statuses = []
    for p in points:
        d = point_dir(sweep_dir, p)
        st = point_status(d)
        statuses.append(
            {"point": p, "dir": d.name, "status": st["status"], "message": st["message"]}
        )
        key = tuple(p[k] for k in grid_keys)
        summaries = groups.setdefault(key, [])
        if st["status"] == FINISHED:
            summaries.append(io.read_json(d / runfolder.RESULTS).get("summary", {}))
    rows = []
    for key, summaries in groups.items():
        row = {"point": dict(zip(grid_keys, key, strict=True)), "n": len(summaries)}
        # None is a metric stored as NaN (undefined at that point): a column, with no value
        names = {k for s in summaries for k, v in s.items() if _is_number(v) or v is None}
        for m in sorted(names):
            vals = [s[m] for s in summaries if _is_number(s.get(m))]
            row[m] = _stats(vals) if vals else None
        rows.append(row)
    failures = [s for s in statuses if s["status"] in (DIVERGED, FAILED)]
    out = {
        "experiment": meta["experiment"],
        "grid": meta["grid"],
        "seeds": meta["seeds"],
        "scale": meta.get("scale"),
        "set": meta.get("set", {}),
        "per_point": meta.get("per_point", {}),
        "runs": _runs(sweep_dir),
        "std": _STD_LABEL,
        "rows": rows,
        "points": statuses,
        "failures": failures,
    }
    io.write_json(sweep_dir / "sweep.json", out)
    figure = _plot_sweep(rows, grid_keys, sweep_dir / "sweep.png")
    md = _markdown(out, grid_keys, figure)
    io.atomic_write_bytes(sweep_dir / "sweep.md", md.encode())
    return out


def _runs(sweep_dir: Path) -> list[dict]:
    """The commands that ran the sweep (:data:`SWEEP_RUNS`), oldest first."""
    path = sweep_dir / SWEEP_RUNS
    if not path.exists():
        return []
    runs = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        try:
            runs.append(json.loads(line))
        except json.JSONDecodeError:
            raise ValueError(f"{path}: line {i} is damaged (not JSON); delete that line") from None
    return runs


def _is_number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _metric_names(rows: list[dict]) -> tuple[list[str], list[str]]:
    names = sorted({m for r in rows for m in r if m not in ("point", "n")})
    return [m for m in names if not _is_timing(m)], [m for m in names if _is_timing(m)]


_CONSTANT_RTOL = 1e-12  # mean/std round-off of identical float values, far below any result


def _constant_metrics(rows: list[dict]) -> dict[str, float]:
    """Result metrics that took one value in every finished run of the sweep (at least two runs).

    Such entries are settings echoed into the summary (``num_classes``, ``n_train``, …), not
    results: ``sweep.md`` states them once above the table instead of as "10 ± 0" columns, and
    the figure leaves them out. ``sweep.json`` keeps them in every row.
    """
    out = {}
    for m in _metric_names(rows)[0]:
        stats = [r.get(m) for r in rows]
        if any(s is None for s in stats) or sum(s["n"] for s in stats) < 2:
            continue
        means = [s["mean"] for s in stats]
        tol = _CONSTANT_RTOL * max(1.0, max(abs(v) for v in means))
        if max(means) - min(means) <= tol and all((s["std"] or 0.0) <= tol for s in stats):
            out[m] = means[0]
    return out


def _cell(stats: dict | None, n: int) -> str:
    """``mean ± std``; ``(n=k)`` when the metric was defined for fewer seeds than finished."""
    if stats is None:
        return "—"
    text = f"{stats['mean']:.4g}"
    if stats["std"] is not None:
        text += f" ± {stats['std']:.2g}"
    return text if stats["n"] == n else f"{text} (n={stats['n']})"


def _table(out: dict, grid_keys: list[str]) -> tuple[list[str], list[str], list[list[str]]]:
    """What ``sweep.md`` and the terminal show: note lines, column names, cell rows."""
    rows = out["rows"]
    results, timings = _metric_names(rows)
    constant = _constant_metrics(rows)
    results = [m for m in results if m not in constant]
    counts = {
        s: sum(p["status"] == s for p in out["points"])
        for s in (FINISHED, DIVERGED, FAILED, PENDING)
    }
    notes = [
        f"{len(out['points'])} points: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v),
        f"Cells: mean ± {out['std']}; n = finished seeds of the row (a single seed shows no ±; "
        "(n=k): the metric was defined, not NaN, for k of them).",
    ]
    if constant:
        same = ", ".join(f"{k} = {v:.6g}" for k, v in constant.items())
        notes.append(f"The same in every finished run (not tabulated): {same}.")
    cols = [*grid_keys, "n", *results, *timings]
    cells = []
    for r in rows:
        line = [r["point"][k] for k in grid_keys] + [str(r["n"])]
        cells.append(line + [_cell(r.get(m), r["n"]) for m in [*results, *timings]])
    return notes, cols, cells


def _settings(out: dict) -> list[str]:
    """What the sweep ran, for ``sweep.md``: every setting, and how each command ran it."""
    grid = " ".join(f"{k}={','.join(v)}" for k, v in out["grid"].items()) or "none"
    fixed = " ".join(f"--set {k}={v}" for k, v in out["set"].items()) or "none"
    lines = [
        f"- experiment {out['experiment']}, --scale {out['scale']}",
        f"- --grid {grid}",
        f"- --seeds {out['seeds']} (seeds 0..{out['seeds'] - 1} per grid point)",
        f"- fixed: {fixed}",
    ]
    if out["per_point"]:
        each = ", ".join(f"{k}={v}" for k, v in out["per_point"].items())
        lines.append(f"- every point also sets {each} (the sweep's seeds replace the experiment's)")
    for r in out["runs"]:
        how = f"--executor {r['executor']}" + (f" --jobs {r['jobs']}" if r["jobs"] > 1 else "")
        how += " --vmap" * bool(r["vmap"]) + " --vectorize" * bool(r["vectorize"])
        how += f" --shard {r['shard']}" if r["shard"] else ""
        lines.append(f"- {r['started']}: {how}, {r['points_run']} points run: `{r['command']}`")
    return lines


def _markdown(out: dict, grid_keys: list[str], figure: bool) -> str:
    notes, cols, cells = _table(out, grid_keys)
    lines = [f"# sweep: {out['experiment']}", "", *_settings(out), ""]
    for note in notes:
        lines += [note, ""]
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + " --- |" * len(cols))
    lines += ["| " + " | ".join(c) + " |" for c in cells]
    if figure:
        lines += ["", "![sweep](sweep.png)"]
    if out["failures"]:
        lines += ["", "## Points that did not finish", "", "| point | status | message |"]
        lines.append("| --- | --- | --- |")
        for f in out["failures"]:
            msg = (f["message"] or "").replace("|", "/").replace("\n", " ")[:_MESSAGE_CHARS]
            lines.append(f"| {f['dir']} | {f['status']} | {msg} |")
    return "\n".join(lines) + "\n"


_TERMINAL_COLUMNS = 100  # the width the terminal table keeps to


def text_table(out: dict, width: int = _TERMINAL_COLUMNS) -> str:
    """The sweep's table as aligned plain text for a terminal (:func:`aggregate`'s result).

    The same notes and cells as ``sweep.md``; no markdown syntax, no image link. Lines keep to
    ``width`` characters: the metric columns are split over several tables, each repeating the
    grid columns and n. The points that did not finish are not repeated here (the CLI prints one
    line per point to stderr).
    """
    grid_keys = [k for k in out["grid"] if k != "seed"]
    notes, cols, cells = _table(out, grid_keys)
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(cols)]
    lead = len(grid_keys) + 1  # the grid columns and n, repeated in every block
    blocks, block = [], []
    for i in range(lead, len(cols)):
        used = sum(widths[j] + 2 for j in [*range(lead), *block, i]) - 2
        if block and used > width:
            blocks.append(block)
            block = []
        block.append(i)
    blocks.append(block)
    lines = [f"sweep: {out['experiment']}"]
    lines += [line for note in notes for line in textwrap.wrap(note, width)]
    for block in blocks:
        idx = [*range(lead), *block]
        lines.append("")
        lines.append("  ".join(cols[i].ljust(widths[i]) for i in idx).rstrip())
        lines.append("  ".join("-" * widths[i] for i in idx))
        for row in cells:
            lines.append("  ".join(row[i].ljust(widths[i]) for i in idx).rstrip())
    return "\n".join(lines) + "\n"


_DECADE = 10.0  # a positive grid spanning at least this ratio may be drawn on a log axis


def _log_spaced(xs: list[float]) -> bool:
    """Whether grid values belong on a log axis: positive, spanning at least a decade, and (with
    three or more values) spaced more evenly in log x than in x (0.001, 0.01, 0.1 but not 1..20).
    """
    x = np.unique(np.asarray(xs, dtype=float))
    if len(x) < 2 or x[0] <= 0 or x[-1] / x[0] < _DECADE:
        return False
    if len(x) == 2:
        return True

    def unevenness(v):
        steps = np.diff(v)
        return steps.std() / steps.mean()

    return bool(unevenness(np.log(x)) <= unevenness(x))


def _panels(metrics: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Metrics grouped into figure panels: ``{panel: [(metric, line label), ...]}``.

    Quantities whose names differ only in their first word (``rich_dlr`` and ``lazy_dlr``,
    ``train_loss`` and ``test_loss``) are compared on one axis, one line each labelled by that
    word, and so is a metric named as their common rest (``dlr``); any other metric has a panel
    of its own.
    """
    rest = {m: m.split("_", 1)[1] for m in metrics if "_" in m}
    shared = {r for r in rest.values() if list(rest.values()).count(r) > 1}
    panels: dict[str, list[tuple[str, str]]] = {}
    for m in metrics:
        if rest.get(m) in shared:
            panels.setdefault(rest[m], []).append((m, m.split("_", 1)[0]))
        elif m in shared:
            panels.setdefault(m, []).append((m, m))
        else:
            panels[m] = [(m, "")]
    return panels


def _plot_sweep(rows: list[dict], grid_keys: list[str], path: Path) -> bool:
    """A grid of panels (:func:`_panels`), mean ± sample std vs the first grid key."""
    constant = _constant_metrics(rows)
    results = [m for m in _metric_names(rows)[0] if m not in constant]
    if not rows or not results or not grid_keys:
        return False
    import matplotlib.pyplot as plt

    xkey, rest = grid_keys[0], grid_keys[1:]
    try:
        xs = [float(r["point"][xkey]) for r in rows]
        numeric = True
    except ValueError:
        labels = sorted({r["point"][xkey] for r in rows})
        xs, numeric = [labels.index(r["point"][xkey]) for r in rows], False
    series: dict[tuple, list[int]] = {}
    for i, r in enumerate(rows):
        series.setdefault(tuple(r["point"][k] for k in rest), []).append(i)
    panels = _panels(results)
    ncols = min(_MAX_PANEL_COLUMNS, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.8 * nrows), squeeze=False)
    for ax, (panel, members) in zip(axes.flat, panels.items(), strict=False):
        for m, word in members:
            for label, idx in series.items():
                idx = sorted((i for i in idx if rows[i].get(m)), key=lambda i: xs[i])
                y = [rows[i][m]["mean"] for i in idx]
                e = [rows[i][m]["std"] or 0.0 for i in idx]
                parts = [word] * bool(word)
                parts += [f"{k}={v}" for k, v in zip(rest, label, strict=True)]
                name = ", ".join(parts) or None
                ax.errorbar([xs[i] for i in idx], y, yerr=e, marker="o", capsize=3, label=name)
        ax.set_xlabel(xkey)
        ax.set_ylabel(panel, fontsize=8)
        if numeric and _log_spaced(xs):
            ax.set_xscale("log")
        if not numeric:
            ax.set_xticks(range(len(labels)), labels)
        if rest or len(members) > 1:
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle("mean ± sample std over seeds (ddof = 1)", fontsize=9)
    fig.tight_layout()
    io.save_figure(fig, path)
    return True
