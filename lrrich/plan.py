"""What ``lrrich run`` / ``lrrich sweep`` would do, checked and printed, with nothing written.

``--dry-run`` builds every config exactly as the real command does (the same ``--set`` /
``--grid`` / ``--scale`` checks, the same refusals, exit status 2 on a bad value), then prints the
plan: the points and runs, the training length, model and dataset of each, the devices JAX sees,
the executor, and the optional extras the command needs with whether they are installed here. A
missing extra or an absent SLURM is reported, not refused, so a paper-scale or cluster command
can be checked on a laptop before it is copied to the machine that runs it. No folder is created.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import shutil
from pathlib import Path

from lrrich import runfolder
from lrrich.registry import get
from lrrich.sweep import (
    DONE,
    check_max_runs,
    check_sweep_folder,
    check_sweep_options,
    command_sweep,
    grid_points,
    parse_shard,
    point_dir,
    point_flags,
    point_status,
    shard_indices,
)

__all__ = ["Plan", "format_plan", "run_plan", "sweep_plan"]

# Optional extras of pyproject.toml: the module each one provides.
_EXTRA_MODULES = {"data": "tensorflow_datasets", "slurm": "submitit"}
# Datasets read through tensorflow-datasets (``lrrich.registry.check_extras``).
_TFDS_DATASETS = ("mnist", "cifar10", "cifar100")
# Config fields that describe the model, in the order they are printed.
_MODEL_FIELDS = ("model", "models", "width", "depth", "widths", "d_model", "num_layers")


@dataclasses.dataclass(frozen=True)
class Plan:
    """A checked command, not yet run.

    Attributes:
      experiment: the experiment name.
      scale: the config preset.
      points: one ``{key: value}`` of overrides per run folder (``[{}]`` for ``lrrich run``).
      runs_per_point: trainings or seeds each point repeats (its ``seeds`` / ``n_seeds``), 1
        when the experiment has no such field.
      steps: the training length of one run, in words.
      model: the model fields of the config, in words.
      dataset: the dataset (and training-set size) of the config, in words.
      devices: the devices JAX sees on this machine, in words.
      executor: where the points would run, in words.
      extras: ``(extra, why, installed)`` for every optional extra the command needs.
      out: the folder the command would write.
      out_state: what is in ``out`` now, in words.
    """

    experiment: str
    scale: str
    points: list[dict[str, str]]
    runs_per_point: int
    steps: str
    model: str
    dataset: str
    devices: str
    executor: str
    extras: list[tuple[str, str, bool]]
    out: Path
    out_state: str


def run_plan(
    name: str, scale: str, sets: dict[str, str], out: Path | None, *, resume: bool = False
) -> Plan:
    """The plan of ``lrrich run NAME --scale SCALE --set … [--out OUT] [--resume]``.

    Raises:
      ValueError, FileExistsError: the same refusals as ``lrrich run`` (an unknown experiment,
        scale, key or value; an ``--out`` that may not hold this run), except a missing optional
        extra, which the plan lists instead.
    """
    exp = get(name)
    config = _config(exp, scale, sets, {})
    if out is None:
        out_state = "a new folder"
        out = Path("runs") / f"{exp.name}-TIMESTAMP"
    elif runfolder.prepare(out, exp, config, scale=scale, resume=resume):
        out_state = "a run folder of this config: continued from its checkpoints"
    else:
        out_state = _folder_state(out)
    return Plan(
        experiment=exp.name,
        scale=scale,
        points=[dict(sets)],
        runs_per_point=_runs_per_point(config),
        steps=_steps(config),
        model=_model(config),
        dataset=_dataset(config),
        devices=_devices(),
        executor="this process",
        extras=_extras([config], executor="local"),
        out=out,
        out_state=out_state,
    )


def sweep_plan(
    name: str,
    grid: dict[str, list[str]],
    out: Path,
    *,
    seeds: int = 1,
    scale: str = "small",
    fixed: dict[str, str] | None = None,
    jobs: int = 1,
    executor: str = "local",
    slurm_gpus: int = 0,
    shard: str | None = None,
    vmap: bool = False,
    vectorize: bool = False,
    max_runs: int = 64,
    yes: bool = False,
) -> Plan:
    """The plan of ``lrrich sweep NAME --grid … --seeds N …`` (arguments as ``run_sweep``).

    ``shard`` is the text of ``--shard`` (``"i/N"`` or ``"slurm"``); ``"slurm"`` outside an array
    task plans the whole grid, which the array's tasks share.

    Raises:
      ValueError: the same refusals as ``lrrich sweep`` (grid keys and values, seeds, ``--set``
        against ``--grid``, ``--max-runs``, ``--jobs``, ``--vectorize`` without ``--vmap``),
        except a missing optional extra or an absent SLURM, which the plan lists instead.
    """
    check_sweep_options(vectorize=vectorize, vmap=vmap, executor=executor, jobs=jobs, seeds=seeds)
    shard_text, shard = shard, _planned_shard(shard)
    exp = get(name)
    meta, fixed = command_sweep(name, grid, dict(fixed or {}), seeds, scale, lambda _: None)
    points = _folder_points(out, meta)
    flags = point_flags(grid)
    configs = [_config(exp, scale, {**fixed, **p}, flags) for p in points]
    check_max_runs(len(points), max_runs, yes)
    mine, out_state = _sweep_folder_state(out, points, shard)
    return Plan(
        experiment=exp.name,
        scale=scale,
        points=[points[i] for i in mine],
        runs_per_point=_runs_per_point(configs[0]),
        steps=_distinct(_steps(c) for c in configs),
        model=_distinct(_model(c) for c in configs),
        dataset=_distinct(_dataset(c) for c in configs),
        devices=_devices(),
        executor=_executor(executor, jobs, slurm_gpus, shard_text, vmap, vectorize, len(mine)),
        extras=_extras(configs, executor=executor),
        out=out,
        out_state=out_state,
    )


def _planned_shard(shard: str | None) -> tuple[int, int] | None:
    """``(i, N)`` of ``--shard``; None for the whole grid, which ``--shard slurm`` outside an
    array task plans (the array's tasks share it)."""
    if shard == "slurm" and "SLURM_ARRAY_TASK_ID" not in os.environ:
        return None
    return parse_shard(shard) if shard else None


def _folder_points(out: Path, meta: dict) -> list[dict[str, str]]:
    """The points of the sweep ``out`` will hold: an existing sweep folder may grow by grid
    values or seeds (:func:`lrrich.sweep.check_sweep_folder`)."""
    meta = check_sweep_folder(out, meta)
    return grid_points(meta["grid"], meta["seeds"])


def _sweep_folder_state(out: Path, points, shard) -> tuple[range, str]:
    """The indices of this command's points (its shard) and, in words, what ``out`` holds of them."""
    mine = shard_indices(len(points), shard)
    if not (out.is_dir() and any(out.iterdir())):
        return mine, _folder_state(out)
    done = sum(point_status(point_dir(out, points[i]))["status"] in DONE for i in mine)
    return mine, f"exists: {done} of {len(mine)} points of this command finished, not run again"


def format_plan(plan: Plan, command: str) -> str:
    """The plan as text lines, ending with the line that says nothing was written."""
    n, each = len(plan.points), plan.runs_per_point
    runs = f"{n} × {each} seeds each = {n * each}" if each > 1 else f"{n}"
    lines = [
        f"dry run of lrrich {command}: {plan.experiment} --scale {plan.scale}",
        f"  points      {n} (run folders); runs {runs}",
    ]
    for p in plan.points[:_SHOWN_POINTS]:
        lines.append(
            f"                {', '.join(f'{k}={v}' for k, v in p.items()) or '(defaults)'}"
        )
    if n > _SHOWN_POINTS:
        lines.append(f"                … and {n - _SHOWN_POINTS} more")
    lines += [
        f"  steps/run   {plan.steps}",
        f"  model       {plan.model}",
        f"  dataset     {plan.dataset}",
        f"  devices     {plan.devices}",
        f"  executor    {plan.executor}",
    ]
    if not plan.extras:
        lines.append("  extras      none beyond `pip install -e .`")
    for i, (extra, why, installed) in enumerate(plan.extras):
        state = "installed" if installed else f"MISSING here: pip install -e '.[{extra}]'"
        lines.append(f"  {'extras' if i == 0 else '':<12s}[{extra}] for {why}: {state}")
    lines += [
        f"  out         {plan.out} ({plan.out_state})",
        "nothing was written (--dry-run)",
    ]
    return "\n".join(lines)


_SHOWN_POINTS = 8  # points listed by name; the rest are counted


def _config(exp, scale: str, overrides: dict[str, str], flags: dict[str, str]):
    """The checked config; a missing extra is left for :func:`_extras` to report."""
    try:
        return exp.config(scale, overrides, flags=flags, runnable=True)
    except ImportError:
        return exp.config(scale, overrides, flags=flags, runnable=False)


def _folder_state(out: Path) -> str:
    if not out.exists():
        return "does not exist: would be created"
    if out.is_dir() and not any(out.iterdir()):
        return "empty"
    return "exists"


def _runs_per_point(config) -> int:
    for name in ("seeds", "n_seeds"):
        if isinstance(getattr(config, name, None), int):
            return getattr(config, name)
    return 1


def _steps(config) -> str:
    steps, epochs = getattr(config, "steps", None), getattr(config, "epochs", None)
    batch = getattr(config, "batch_size", None)
    of_batch = f" of batch {batch}" if batch else ""
    if isinstance(steps, int) and steps > 0:  # 0: the length is given in epochs
        return f"{steps} steps{of_batch}"
    if isinstance(epochs, int):
        n_train = getattr(config, "n_train", None)
        if isinstance(n_train, int) and batch:
            per_epoch = math.ceil(n_train / batch)
            return f"{epochs} epochs × {per_epoch} batches of {batch} = {epochs * per_epoch} steps"
        return f"{epochs} epochs{of_batch} over the whole training set"
    return "no training loop of its own (closed forms, gradient flow or the config's own counts)"


def _model(config) -> str:
    parts = [f"{f}={getattr(config, f)}" for f in _MODEL_FIELDS if hasattr(config, f)]
    return ", ".join(parts) or "set by the experiment (no model fields in its config)"


def _dataset(config) -> str:
    dataset = getattr(config, "dataset", None)
    if dataset is None:
        return "generated by the experiment"
    n_train = getattr(config, "n_train", None)
    return f"{dataset}, n_train={'all' if n_train is None else n_train}"


def _distinct(texts) -> str:
    seen = list(dict.fromkeys(texts))
    return seen[0] if len(seen) == 1 else " | ".join(seen)


def _devices() -> str:
    import jax

    devices = jax.devices()
    kinds = list(dict.fromkeys(d.device_kind for d in devices))
    return f"{len(devices)} × {', '.join(kinds)} ({jax.default_backend()}; `lrrich info` for more)"


def _executor(executor, jobs, slurm_gpus, shard, vmap, vectorize, n) -> str:
    if executor == "slurm":
        here = (
            "sbatch found" if shutil.which("sbatch") else "no sbatch here: refused on this machine"
        )
        text = f"one SLURM job array of {n} tasks, {slurm_gpus} GPU(s) each ({here})"
    elif executor == "local-submitit":
        text = f"a submitit job array of {n} tasks as local processes"
    elif jobs > 1:
        text = f"{jobs} processes on this machine"
    else:
        text = "this process, one point after another"
    if vmap:
        text += "; compatible points as one stacked program" + (
            " (jax.vmap, round-off agreement)" if vectorize else " (bitwise equal on a CPU)"
        )
    if shard == "slurm":
        text += "; each SLURM array task runs its slice (SLURM_ARRAY_TASK_ID of _COUNT)"
    elif shard is not None:
        text += f"; shard {shard} of the grid"
    return text


def _extras(configs, executor: str) -> list[tuple[str, str, bool]]:
    needed = {}
    datasets = sorted({c.dataset for c in configs if getattr(c, "dataset", None) in _TFDS_DATASETS})
    if datasets:
        needed["data"] = f"dataset {', '.join(datasets)} (tensorflow-datasets)"
    if executor in ("slurm", "local-submitit"):
        needed["slurm"] = f"--executor {executor} (submitit)"
    return [
        (extra, why, importlib.util.find_spec(_EXTRA_MODULES[extra]) is not None)
        for extra, why in needed.items()
    ]
