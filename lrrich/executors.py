"""Where sweep points run beyond this process: SLURM job arrays through submitit.

``submitit.AutoExecutor.map_array`` submits one SLURM job array (one task per point) with a cap
on the tasks running at once; its ``cluster="local"`` executor runs the same array as local
subprocesses (what the tests use, offline; ``lrrich sweep --executor local-submitit``) and
``cluster="debug"`` runs it in this process. Those two run only when asked for by name: SLURM
(``cluster`` None or ``"slurm"``) without ``sbatch`` on the PATH is refused by :func:`check_available`
before anything is written, never replaced by local processes behind the user's back.
Each array task writes its stdout/stderr under ``<sweep>/logs/<job id>_*``; ``logs/jobs.json``
maps every point folder to its job id and log files, and lets a re-run skip the points whose job
is still queued or running.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lrrich import io

JOBS = "jobs.json"
# sacct states of a SLURM job that may still write its point's results.
ACTIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"}
)


@dataclasses.dataclass(frozen=True)
class SlurmOptions:
    """Resources of every array task.

    Attributes:
      partition: SLURM partition (None: the cluster's default).
      time_min: wall-clock limit of one point, minutes.
      gpus_per_node: GPUs per point (0 for CPU-only points).
      cpus_per_task: CPU cores per point.
      mem_gb: memory per point in GB (None: the partition's default).
      array_parallelism: most array tasks running at once (``%N`` of ``sbatch --array``).
      cluster: None or ``"slurm"`` (SLURM; refused without ``sbatch``), ``"local"`` (local
        subprocesses, for tests) or ``"debug"`` (in this process).
      wait: wait for the array to finish (then aggregate) instead of returning after submission.
      extra: further ``slurm_*`` parameters of submitit without the prefix (e.g. ``account``,
        ``qos``, ``constraint``).
    """

    partition: str | None = None
    time_min: int = 60
    gpus_per_node: int = 0
    cpus_per_task: int = 2
    mem_gb: float | None = None
    array_parallelism: int = 16
    cluster: str | None = None
    wait: bool = True
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.time_min < 1:
            raise ValueError(f"--slurm-time must be at least 1 minute, got {self.time_min}")
        if self.gpus_per_node < 0 or self.cpus_per_task < 1:
            raise ValueError(
                f"--slurm-gpus must be >= 0 and --slurm-cpus >= 1, got {self.gpus_per_node} "
                f"and {self.cpus_per_task}"
            )
        if self.array_parallelism < 1:
            raise ValueError(
                f"--slurm-parallelism must be at least 1, got {self.array_parallelism}"
            )
        if self.cluster not in (None, "slurm", "local", "debug"):
            raise ValueError(
                f"cluster must be None, 'slurm', 'local' or 'debug', got {self.cluster!r}"
            )


def check_available(options: SlurmOptions) -> None:
    """Refuse, before anything is written, a job array that cannot run as asked.

    Raises:
      ImportError: submitit is not installed (the ``[slurm]`` extra).
      ValueError: SLURM was asked for (``cluster`` None or ``"slurm"``) and ``sbatch`` is not on
        the PATH; the message names the local alternatives.
    """
    try:
        import submitit  # noqa: F401
    except ImportError as e:
        raise ImportError(
            '--executor slurm needs submitit: pip install -e ".[slurm]" (in the lrrich checkout)',
            name="submitit",
        ) from e
    if options.cluster in (None, "slurm") and shutil.which("sbatch") is None:
        raise ValueError(
            "--executor slurm: no SLURM here (sbatch is not on the PATH); use --executor local "
            "(this machine) or --executor local-submitit (the same job array as local processes)"
        )


def _executor(folder: Path, name: str, options: SlurmOptions):
    check_available(options)
    import submitit

    ex = submitit.AutoExecutor(folder=folder, cluster=options.cluster or "slurm")
    params: dict[str, Any] = {
        "name": name,
        "timeout_min": options.time_min,
        "gpus_per_node": options.gpus_per_node,
        "cpus_per_task": options.cpus_per_task,
        "tasks_per_node": 1,
        "nodes": 1,
        "slurm_array_parallelism": options.array_parallelism,
    }
    if options.mem_gb is not None:
        params["mem_gb"] = options.mem_gb
    if options.partition is not None:
        params["slurm_partition"] = options.partition
    params.update({f"slurm_{k}": v for k, v in options.extra.items()})
    ex.update_parameters(**params)
    return ex


def job_state(folder: Path, job_id: str) -> str:
    """The SLURM state of ``job_id`` as sacct reports it (``UNKNOWN`` when it cannot tell)."""
    try:
        from submitit.slurm.slurm import SlurmJob

        return str(SlurmJob(folder=folder, job_id=job_id).state)
    except Exception:  # no sacct on this machine, or an unknown job: treat it as gone
        return "UNKNOWN"


def active_points(log_dir: str | Path, state: Callable[[Path, str], str] = job_state) -> set[str]:
    """Point folders whose recorded SLURM job is still queued or running.

    Args:
      log_dir: the sweep's ``logs`` folder holding ``jobs.json``.
      state: ``(log_dir, job_id) -> sacct state`` (replaceable in tests).

    Returns:
      the point folder names not to submit again.
    """
    path = Path(log_dir) / JOBS
    if not path.exists():
        return set()
    record = io.read_json(path)
    if record.get("cluster") != "slurm":
        return set()
    return {
        point
        for point, job in record["points"].items()
        if state(Path(log_dir), job["job_id"]) in ACTIVE_STATES
    }


def run_array(
    fn: Callable[..., dict],
    args: Sequence[tuple],
    point_names: Sequence[str],
    log_dir: str | Path,
    options: SlurmOptions,
    *,
    name: str = "lrrich",
    log: Callable[[str], None] = print,
) -> list[dict] | None:
    """Run ``fn(*a)`` for every ``a`` in ``args`` as one submitit job array.

    Args:
      fn: a picklable top-level function returning a JSON-able dict (one sweep point).
      args: one argument tuple per array task.
      point_names: the point folder name of every task (for ``jobs.json`` and messages).
      log_dir: folder of the per-task logs and ``jobs.json``.
      options: the resources and the cluster.
      name: the SLURM job name.
      log: where progress lines go.

    Returns:
      the task results in order when ``options.wait``; None after submission otherwise. A task
      that dies outside ``fn`` (time limit, node failure, out of memory) gives
      ``{"status": "failed", "message": ...}``.
    """
    if len(args) != len(point_names):
        raise ValueError(f"args has {len(args)} entries but point_names {len(point_names)}")
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    ex = _executor(log_dir, name, options)
    jobs = ex.map_array(fn, *zip(*args, strict=True)) if args else []
    record = {
        "cluster": ex.cluster,
        "points": {
            p: {
                "job_id": str(j.job_id),
                "stdout": str(j.paths.stdout),
                "stderr": str(j.paths.stderr),
            }
            for p, j in zip(point_names, jobs, strict=True)
        },
    }
    previous = io.read_json(log_dir / JOBS)["points"] if (log_dir / JOBS).exists() else {}
    io.write_json(log_dir / JOBS, {**record, "points": {**previous, **record["points"]}})
    if jobs:
        first = jobs[0].job_id.split("_")[0]
        log(f"submitted {len(jobs)} points as {ex.cluster} job {first} (logs: {log_dir})")
    if not options.wait:
        return None
    out = []
    for point, job in zip(point_names, jobs, strict=True):
        try:
            out.append(job.result())
        except Exception as e:  # the job died outside fn: submitit's message names the cause
            msg = str(e).strip().splitlines()
            out.append(
                {
                    "status": "failed",
                    "message": f"{type(e).__name__}: {msg[0] if msg else ''} (log: "
                    f"{job.paths.stderr})",
                }
            )
        log(f"{point}: {out[-1]['status']}")
    return out
