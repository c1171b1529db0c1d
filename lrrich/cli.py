"""``lrrich`` command line: a thin shell over :mod:`lrrich.registry` and :mod:`lrrich.runner`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _parse_sets(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--set expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _print_summary(results: dict) -> None:
    for k, v in results.get("summary", {}).items():
        print(f"  {k:<40s} {v:.6g}" if isinstance(v, float) else f"  {k:<40s} {v}")


def _cmd_list(args) -> int:
    from lrrich.registry import discover

    for name, exp in sorted(discover().items()):
        print(f"{name:<28s} {exp.description}")
    return 0


def _cmd_run(args) -> int:
    from lrrich.registry import get
    from lrrich.runner import default_run_dir, run_experiment

    exp = get(args.name)
    config = exp.config(args.scale, _parse_sets(args.set))
    run_dir = Path(args.out) if args.out else default_run_dir(exp.name)
    print(f"running {exp.name} ({args.scale}) -> {run_dir}", file=sys.stderr)
    results = run_experiment(exp, config, run_dir, scale=args.scale, resume=args.resume)
    _print_summary(results)
    print(f"report: {run_dir / 'report.md'}")
    return 0


def _cmd_demo(args) -> int:
    args.name, args.scale, args.set, args.resume = "demo", "small", args.set, False
    return _cmd_run(args)


def _cmd_sweep(args) -> int:
    from lrrich.sweep import parse_grid, run_sweep

    out = Path(args.out) if args.out else Path("runs") / f"sweep-{args.name}"
    run_sweep(
        args.name,
        parse_grid(args.grid),
        out,
        seeds=args.seeds,
        scale=args.scale,
        jobs=args.jobs,
        max_runs=args.max_runs,
        yes=args.yes,
    )
    print(out / "sweep.md")
    return 0


def _cmd_report(args) -> int:
    from lrrich.report import write_report
    from lrrich.sweep import aggregate

    run_dir = Path(args.run_dir)
    if (run_dir / "sweep_config.json").exists():
        aggregate(run_dir)
        print(run_dir / "sweep.md")
        return 0
    if not (run_dir / "config.json").exists():
        raise ValueError(f"{run_dir} is neither a run directory nor a sweep directory")
    print(write_report(run_dir))
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


def build_parser() -> argparse.ArgumentParser:
    """The ``lrrich`` argument parser."""
    p = argparse.ArgumentParser(
        prog="lrrich",
        description="Lazy vs rich training: exact solutions, the D_LR measure, paper reproductions.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("list", help="list registered experiments")
    s.set_defaults(func=_cmd_list)

    s = sub.add_parser("run", help="run a registered experiment")
    s.add_argument("name", help="experiment name (see `lrrich list`)")
    s.add_argument("--scale", default="small", help="config preset: small (CPU) or paper")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override")
    s.add_argument("--out", default=None, help="run directory (default runs/NAME-TIMESTAMP)")
    s.add_argument("--resume", action="store_true", help="continue the run in --out")
    s.set_defaults(func=_cmd_run)

    s = sub.add_parser("demo", help="the main job: exact modes vs gradient flow, rich vs lazy MLP")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override")
    s.add_argument("--out", default=None, help="run directory (default runs/demo-TIMESTAMP)")
    s.set_defaults(func=_cmd_demo)

    s = sub.add_parser("sweep", help="run an experiment over a grid of overrides and seeds")
    s.add_argument("name")
    s.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2", help="grid axis")
    s.add_argument("--seeds", type=int, default=1)
    s.add_argument("--scale", default="small")
    s.add_argument("--jobs", type=int, default=1, help="parallel processes")
    s.add_argument("--max-runs", type=int, default=64, help="refuse larger sweeps without --yes")
    s.add_argument("--yes", action="store_true")
    s.add_argument("--out", default=None, help="sweep directory (default runs/sweep-NAME)")
    s.set_defaults(func=_cmd_sweep)

    s = sub.add_parser("verify", help="check every closed form in sims against gradient flow")
    s.add_argument("--cases", type=int, default=8, help="random cases per model")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--models", default=None, help="comma-separated subset")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.set_defaults(func=_cmd_verify)

    s = sub.add_parser("report", help="(re)render report.md/.html for a run directory")
    s.add_argument("run_dir")
    s.set_defaults(func=_cmd_report)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lrrich`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (KeyError, ValueError, FileExistsError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        print(f"lrrich: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
