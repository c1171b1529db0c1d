"""``lrrich`` command line: a thin shell over :mod:`lrrich.registry` and :mod:`lrrich.runner`."""

from __future__ import annotations

import argparse
import functools
import logging
import os
import shlex
import sys
from pathlib import Path


def _parse_sets(items: list[str], flag: str = "--set") -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{flag} expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _info(args, text: str) -> None:
    if not args.quiet:
        print(text, file=sys.stderr)


def _print_summary(results: dict) -> None:
    for k, v in results.get("summary", {}).items():
        print(f"  {k:<40s} {v:.6g}" if isinstance(v, float) else f"  {k:<40s} {v}")


def _cmd_list(args) -> int:
    from lrrich.registry import PAPERS, discover, paper_keys

    print(f"{'name':<22s} reproduces")
    for name, exp in sorted(discover().items()):
        print(f"{name:<22s} {exp.description}")
        for key in paper_keys(exp.description):
            print(f"{'':<25s}{key} = {PAPERS[key]}")
        print(f"{'':<25s}small scale: {exp.runtime or 'no recorded run'}")
    print(
        "\nsmall scale: wall time of the recorded `lrrich run NAME` at the default scale, with "
        "the machine and date that measured it (docs/records/NAME/small.json; `lrrich record` "
        "a run folder to add one); `--scale paper` is the paper's setting for an accelerator. "
        "Details: docs/experiments.md"
    )
    return 0


def _cmd_run(args) -> int:
    from lrrich import runfolder
    from lrrich.registry import get
    from lrrich.runner import default_run_dir, run_experiment

    if getattr(args, "dry_run", False):
        from lrrich.plan import format_plan, run_plan

        out = Path(args.out) if args.out else None
        plan = run_plan(args.name, args.scale, _parse_sets(args.set), out, resume=args.resume)
        print(format_plan(plan, args.command))
        return 0
    exp = get(args.name)
    config = exp.config(args.scale, _parse_sets(args.set), runnable=True)
    run_dir = Path(args.out) if args.out else default_run_dir(exp.name)
    args.folder = run_dir
    # The folder is checked before the "running" line; a finished --resume is answered from it.
    results = runfolder.finished_results(run_dir, exp, config, scale=args.scale, resume=args.resume)
    if results is not None:
        _info(args, f"{run_dir} holds this run, finished: nothing to recompute (shown below)")
    else:
        with runfolder.lock(run_dir):
            how = "continuing the unfinished run" if runfolder.is_run_folder(run_dir) else "running"
            _info(args, f"{how} {exp.name} ({args.scale}) -> {run_dir}")
            results = run_experiment(exp, config, run_dir, scale=args.scale, resume=args.resume)
    if results["status"] != "finished":
        print(f"lrrich: {exp.name} {results['status']}: {results.get('message')}", file=sys.stderr)
        print(f"report: {run_dir / 'report.md'}")
        return 1
    _print_summary(results)
    if exp.verdict is not None:
        print(exp.verdict(results))
    if results.get("comparison") and all("reason" in r for r in results["comparison"]):
        from lrrich.table import terminal_table

        print(terminal_table(results["comparison"]))
    print(f"report: {run_dir / 'report.md'}")
    return 0


def _cmd_table(args) -> int:
    from lrrich import table

    if args.check:
        if table.update_docs(check=True):
            print(f"{table.DOCS.name}: the verdict table matches docs/records")
            return 0
        print(
            f"lrrich: {table.DOCS}: the verdict table differs from what docs/records and the "
            "declared claims give; run `lrrich table` to regenerate it",
            file=sys.stderr,
        )
        return 1
    table.update_docs()
    print(f"wrote the verdict table of {table.DOCS} from {len(table.load_records())} records")
    return 0


def _cmd_record(args) -> int:
    from lrrich.table import record_run

    root = Path(args.records) if args.records else None
    path = record_run(args.run_dir, label=args.label, **({"root": root} if root else {}))
    print(f"recorded {args.run_dir} -> {path}")
    return 0


def _cmd_demo(args) -> int:
    args.name, args.scale = "demo", "small"
    return _cmd_run(args)


def _slurm_options(args):
    from lrrich.executors import SlurmOptions

    return SlurmOptions(
        partition=args.slurm_partition,
        time_min=args.slurm_time,
        gpus_per_node=args.slurm_gpus,
        cpus_per_task=args.slurm_cpus,
        mem_gb=args.slurm_mem_gb,
        array_parallelism=args.slurm_parallelism,
        cluster=args.slurm_cluster,
        wait=not args.no_wait,
        extra=_parse_sets(args.slurm_arg, flag="--slurm-arg"),
    )


def _cmd_sweep(args) -> int:
    from lrrich.sweep import parse_grid, parse_shard, run_sweep, text_table

    out = Path(args.out) if args.out else Path("runs") / f"sweep-{args.name}"
    grid = parse_grid(args.grid)
    # What the plan and the run read alike; each adds its own view of --shard and SLURM.
    common = {
        "seeds": args.seeds,
        "scale": args.scale,
        "fixed": _parse_sets(args.set),
        "jobs": args.jobs,
        "executor": args.executor,
        "vmap": args.vmap or args.vectorize,
        "vectorize": args.vectorize,
        "max_runs": args.max_runs,
        "yes": args.yes,
    }
    if args.dry_run:
        from lrrich.plan import format_plan, sweep_plan

        plan = sweep_plan(
            args.name, grid, out, slurm_gpus=args.slurm_gpus, shard=args.shard, **common
        )
        print(format_plan(plan, "sweep"))
        return 0
    args.folder = out
    result = run_sweep(
        args.name,
        grid,
        out,
        progress=not args.quiet,
        slurm=_slurm_options(args) if args.executor != "local" else None,
        shard=parse_shard(args.shard) if args.shard else None,
        **common,
    )
    if not args.quiet:
        print(text_table(result))
    for f in result["failures"]:
        first = (f["message"] or "").strip().splitlines()
        print(f"lrrich: {f['dir']}: {f['status']}: {first[0] if first else ''}", file=sys.stderr)
    print(out / "sweep.md")
    return 1 if any(f["status"] == "failed" for f in result["failures"]) else 0


def _cmd_report(args) -> int:
    from lrrich.report import write_report
    from lrrich.runfolder import is_run_folder
    from lrrich.sweep import SWEEP_CONFIG, aggregate

    run_dir = Path(args.run_dir)
    if not run_dir.exists():
        raise ValueError(f"{run_dir} does not exist")
    if (run_dir / SWEEP_CONFIG).exists():
        aggregate(run_dir)
        print(run_dir / "sweep.md")
        return 0
    if not is_run_folder(run_dir):
        raise ValueError(f"{run_dir} is neither a run folder nor a sweep folder")
    print(write_report(run_dir, replot=args.replot))
    return 0


def _cmd_verify(args) -> int:
    import json

    from sims.verify import verify_all

    models = args.models.split(",") if args.models else None
    rows = verify_all(seed=args.seed, n_cases=args.cases, models=models, progress=not args.json)
    if args.json:
        print(json.dumps([{**r._asdict(), "ok": r.ok} for r in rows], indent=1))
    else:
        print(f"{'model':<18s} {'max error':>11s} {'tolerance':>10s} {'seconds':>8s}  ok")
        for r in rows:
            print(
                f"{r.model:<18s} {r.max_error:11.2e} {r.tolerance:10.0e} {r.seconds:8.1f}  "
                f"{'yes' if r.ok else 'NO'}"
            )
    return 0 if all(r.ok for r in rows) else 1


def _cmd_info(args) -> int:
    import json

    from lrrich.info import environment, format_environment

    env = environment()
    print(json.dumps(env, indent=1) if args.json else format_environment(env))
    return 0


_DRY_RUN_HELP = (
    "check the command and print its plan (points, runs, steps, model, dataset, devices, "
    "executor, extras needed); write nothing"
)


def _add_run_folder(s: argparse.ArgumentParser, default_out: str) -> None:
    """The overrides, run folder, resume and dry-run arguments of ``run`` and ``demo``."""
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override")
    s.add_argument("--out", default=None, help=f"run folder (default {default_out})")
    s.add_argument(
        "--resume", action="store_true", help="continue the run folder --out (same config only)"
    )
    s.add_argument("--dry-run", action="store_true", help=_DRY_RUN_HELP)


def _add_sweep(s: argparse.ArgumentParser) -> None:
    """The arguments of ``lrrich sweep`` (grid, seeds, executors, SLURM options)."""
    s.add_argument("name")
    s.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2", help="grid axis")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="fixed override")
    s.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 per grid point")
    s.add_argument("--scale", default="small")
    s.add_argument("--jobs", type=int, default=1, help="parallel processes (--executor local)")
    s.add_argument("--max-runs", type=int, default=64, help="refuse larger sweeps without --yes")
    s.add_argument("--yes", action="store_true")
    s.add_argument("--out", default=None, help="sweep folder (default runs/sweep-NAME)")
    s.add_argument(
        "--executor",
        choices=["local", "slurm", "local-submitit"],
        default="local",
        help="local: this machine; slurm: one SLURM job array through submitit (refused without "
        "sbatch); local-submitit: the same array as local processes, to try it on a laptop",
    )
    s.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="run points I, I+N, ... only ('slurm': "
        "from SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT)",
    )
    s.add_argument(
        "--vmap", action="store_true", help="run the points as one vmapped program when possible"
    )
    s.add_argument(
        "--vectorize",
        action="store_true",
        help="with --vmap (implied): step the stacked runs as one jax.vmap — batched matmuls, "
        "faster for small models, equal to separate runs to round-off instead of bitwise",
    )
    s.add_argument("--dry-run", action="store_true", help=_DRY_RUN_HELP)
    g = s.add_argument_group("slurm (with --executor slurm)")
    g.add_argument("--slurm-partition", default=None)
    g.add_argument("--slurm-time", type=int, default=60, help="minutes per point")
    g.add_argument("--slurm-gpus", type=int, default=0, help="GPUs per point")
    g.add_argument("--slurm-cpus", type=int, default=2, help="CPU cores per point")
    g.add_argument("--slurm-mem-gb", type=float, default=None, help="memory per point")
    g.add_argument(
        "--slurm-parallelism", type=int, default=16, help="most array tasks running at once"
    )
    g.add_argument(
        "--slurm-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other submitit slurm_* parameter (account=..., qos=..., constraint=...)",
    )
    g.add_argument(
        "--slurm-cluster",
        choices=["slurm", "local", "debug"],
        default=None,
        help="submitit cluster (default slurm, refused without sbatch; local: local processes, "
        "as --executor local-submitit; debug: this process)",
    )
    g.add_argument(
        "--no-wait", action="store_true", help="return after submitting; re-run to aggregate"
    )
    s.set_defaults(func=_cmd_sweep)


def build_parser() -> argparse.ArgumentParser:
    """The ``lrrich`` argument parser."""
    p = argparse.ArgumentParser(
        prog="lrrich",
        description="Lazy vs rich training: exact solutions, the D_LR measure, paper reproductions.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--quiet", action="store_true", help="no progress bars or progress lines; errors only"
    )
    common.add_argument("--debug", action="store_true", help="show the traceback of every error")

    s = sub.add_parser("list", parents=[common], help="list registered experiments")
    s.set_defaults(func=_cmd_list)

    s = sub.add_parser("run", parents=[common], help="run a registered experiment")
    s.add_argument("name", help="experiment name (see `lrrich list`)")
    s.add_argument("--scale", default="small", help="config preset: small (CPU) or paper")
    _add_run_folder(s, "runs/NAME-TIMESTAMP")
    s.set_defaults(func=_cmd_run)

    s = sub.add_parser(
        "demo",
        parents=[common],
        help="the main job: exact modes vs gradient flow, rich vs lazy MLP",
    )
    _add_run_folder(s, "runs/demo-TIMESTAMP")
    s.set_defaults(func=_cmd_demo)

    _add_sweep(sub.add_parser(
        "sweep", parents=[common], help="run an experiment over a grid of overrides and seeds"
    ))  # fmt: skip

    s = sub.add_parser(
        "verify", parents=[common], help="check every closed form in sims against gradient flow"
    )
    s.add_argument("--cases", type=int, default=8, help="random cases per model")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--models", default=None, help="comma-separated subset")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.set_defaults(func=_cmd_verify)

    s = sub.add_parser(
        "report", parents=[common], help="(re)render report.md/.html of a run or sweep folder"
    )
    s.add_argument("run_dir")
    s.add_argument(
        "--replot", action="store_true", help="redraw the figures from results.json first"
    )
    s.set_defaults(func=_cmd_report)

    s = sub.add_parser(
        "info", parents=[common], help="what JAX sees: devices, versions, precision, memory"
    )
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s.set_defaults(func=_cmd_info)

    s = sub.add_parser(
        "table",
        parents=[common],
        help="write docs/experiments.md's verdict table from docs/records (judged by the claims)",
    )
    s.add_argument(
        "--check", action="store_true", help="write nothing; fail when the table is out of date"
    )
    s.set_defaults(func=_cmd_table)

    s = sub.add_parser(
        "record",
        parents=[common],
        help="keep a finished run's per-seed values as docs/records/<experiment>/<label>.json",
    )
    s.add_argument("run_dir")
    s.add_argument("--label", default=None, help="the record's name (default: the run's scale)")
    s.add_argument("--records", default=None, help="records folder (default: docs/records)")
    s.set_defaults(func=_cmd_record)
    return p


# Optional dependencies whose absence is a setup problem, not a bug (the message says what to install).
_OPTIONAL_MODULES = ("tensorflow_datasets", "tensorflow", "submitit", "torch", "mlxtend")


def _expected(err: BaseException) -> bool:
    """Whether ``err`` is a user-facing failure (bad input, files, setup) rather than a bug."""
    from lrrich.registry import UnknownExperimentError

    if isinstance(err, UnknownExperimentError | ValueError | OSError):
        return True
    if isinstance(err, ImportError):
        root = (getattr(err, "name", None) or "").split(".")[0]
        return root in _OPTIONAL_MODULES or "pip install" in str(err)
    try:
        from nets import TrainingDiverged
        from nets.checkpoint import CheckpointError
    except ImportError:
        return False
    return isinstance(err, TrainingDiverged | CheckpointError)


def _one_line(err: BaseException) -> str:
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        return f"{err.filename}: {err.strerror}"
    text = " ".join(str(err).split())
    return text or type(err).__name__


def _quiet_progress_bars(quiet: bool) -> None:
    """No tqdm bars when asked, or when output is redirected (carriage returns fill log files).

    tqdm reads ``TQDM_*`` variables once, when it is imported: the variable reaches worker
    processes and a tqdm imported later, so this runs before any command does. A tqdm this
    process imported already (``main`` called in-process after other work) gets ``disable=True``
    as its default instead.
    """
    if quiet or not (sys.stdout.isatty() and sys.stderr.isatty()):
        os.environ["TQDM_DISABLE"] = "1"
        std = sys.modules.get("tqdm.std")
        if std is not None and not getattr(vars(std.tqdm).get("__init__"), "lrrich_quiet", False):
            quiet_init = functools.partialmethod(std.tqdm.__init__, disable=True)
            quiet_init.lrrich_quiet = True  # installed once per process
            std.tqdm.__init__ = quiet_init


def _log_progress(quiet: bool) -> None:
    """Progress lines of the experiments (``logging.getLogger("lrrich...")``, INFO) go to stderr
    as plain lines, unless ``--quiet``."""
    logger = logging.getLogger("lrrich")
    if not any(isinstance(h, _StderrLines) for h in logger.handlers):
        logger.addHandler(_StderrLines())
    logger.setLevel(logging.WARNING if quiet else logging.INFO)


class _StderrLines(logging.Handler):
    """The message alone, on whatever ``sys.stderr`` is when it is emitted."""

    def emit(self, record: logging.LogRecord) -> None:
        print(record.getMessage(), file=sys.stderr, flush=True)


def _one_blas_thread() -> None:
    """One OpenBLAS thread for this process and its workers (:mod:`nets.blas`: the LAPACK calls of
    the metrics run ~100× faster on small CPUs than with OpenBLAS's default threads)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from nets.blas import limit_blas_threads

    limit_blas_threads()


def _continue_command(args, argv: list[str]) -> str:
    """The command that continues ``args.folder``: the same arguments with ``--out`` spelled out
    and, for ``run`` / ``demo``, ``--resume`` (a sweep continues by running it again)."""
    words = list(argv)
    if args.out is None:
        words += ["--out", str(args.folder)]
    if args.command in ("run", "demo") and "--resume" not in words:
        words.append("--resume")
    return shlex.join(["lrrich", *words])


def _interrupted(args, argv: list[str]) -> int:
    """One line for Ctrl-C: what was kept and how to continue it; exit status 130 (128 + SIGINT)."""
    folder = getattr(args, "folder", None)
    if folder is not None and Path(folder).is_dir() and any(Path(folder).iterdir()):
        kept = "the finished points" if args.command == "sweep" else "the unfinished run"
        print(
            f"lrrich: interrupted; {folder} keeps {kept} — continue with: "
            f"{_continue_command(args, argv)}",
            file=sys.stderr,
        )
    else:
        print("lrrich: interrupted; nothing was written", file=sys.stderr)
    return _SIGINT_STATUS


_SIGINT_STATUS = 130  # the shell's status for a process ended by SIGINT (128 + 2)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lrrich`` console script.

    Expected failures (bad arguments or config values, unknown experiments, unreadable or
    unwritable files, a full disk, corrupt JSON, damaged checkpoints, a missing optional extra)
    print one line ``lrrich: error: ...`` and return 2; anything else is a bug and keeps its
    traceback (``--debug`` shows the traceback always). Ctrl-C prints one line naming the folder
    and the command that continues it, and returns 130.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    _quiet_progress_bars(args.quiet)
    _one_blas_thread()
    _log_progress(args.quiet)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        if args.debug:
            raise
        return _interrupted(args, argv)
    except Exception as e:
        if args.debug or not _expected(e):
            raise
        print(f"lrrich: error: {_one_line(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
