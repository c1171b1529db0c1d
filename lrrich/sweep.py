"""Sweeps: a grid of ``key=value`` overrides × seeds, run sequentially or in parallel processes.

Each grid point gets its own run directory ``<sweep_dir>/<k1=v1,k2=v2,seed=s>``; finished runs
(``results.json`` present) are skipped, so an interrupted sweep resumes. :func:`aggregate` reduces the
numeric ``summary`` entries to mean ± std over seeds in ``sweep.json`` / ``sweep.md`` and a figure.
"""

from __future__ import annotations

import dataclasses
import itertools
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from lrrich import io
from lrrich.registry import get


def parse_grid(items: list[str]) -> dict[str, list[str]]:
    """``["lr=0.1,0.2", "depth=2,3"]`` → ``{"lr": ["0.1", "0.2"], "depth": ["2", "3"]}``."""
    grid = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--grid expects key=v1,v2,..., got {item!r}")
        k, vs = item.split("=", 1)
        values = [v.strip() for v in vs.split(",") if v.strip()]
        if not values:
            raise ValueError(f"--grid {k}: no values")
        grid[k.strip()] = values
    return grid


def grid_points(grid: dict[str, list[str]], seeds: int) -> list[dict[str, str]]:
    """All override dicts of the grid × ``range(seeds)`` (seed added as the ``seed`` key)."""
    keys = list(grid)
    points = []
    for values in itertools.product(*(grid[k] for k in keys)):
        for s in range(seeds):
            pt = dict(zip(keys, values, strict=True))
            if seeds > 1 or "seed" not in pt:
                pt.setdefault("seed", str(s))
            points.append(pt)
    return points


def _point_dir(sweep_dir: Path, point: dict[str, str]) -> Path:
    return sweep_dir / ",".join(f"{k}={v}" for k, v in point.items()).replace("/", "_")


def _run_point(name: str, scale: str, point: dict[str, str], run_dir: str) -> str:
    from lrrich.runner import run_experiment

    exp = get(name)
    run_experiment(exp, exp.config(scale, point), run_dir, scale=scale, resume=True)
    return run_dir


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
) -> dict:
    """Run experiment ``name`` over ``grid`` × seeds into ``sweep_dir``, then :func:`aggregate`.

    Raises:
      ValueError: unknown grid keys (checked before anything runs), or more than ``max_runs``
        runs without ``yes=True``.
    """
    exp = get(name)
    valid = [f.name for f in dataclasses.fields(exp.config_cls)]
    for k in grid:
        if k not in valid:
            raise ValueError(f"unknown grid key {k!r} for {name}; valid: {', '.join(valid)}")
    if seeds > 1 and "seed" not in valid:
        raise ValueError(f"{name}'s config has no 'seed' field; --seeds needs one")
    points = grid_points(grid, seeds)
    for p in points:  # type-check every value before launching anything
        exp.config(scale, p)
    if len(points) > max_runs and not yes:
        raise ValueError(
            f"the sweep would launch {len(points)} runs (> --max-runs {max_runs}); pass --yes"
        )
    sweep_dir = Path(sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    io.write_json(
        sweep_dir / "sweep_config.json",
        {"experiment": name, "scale": scale, "grid": grid, "seeds": seeds},
    )
    todo = [p for p in points if not (_point_dir(sweep_dir, p) / "results.json").exists()]
    from tqdm.auto import tqdm

    bar = tqdm(total=len(points), initial=len(points) - len(todo), desc=name, disable=not progress)
    if jobs <= 1:
        for p in todo:
            _run_point(name, scale, p, str(_point_dir(sweep_dir, p)))
            bar.update()
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futs = [
                pool.submit(_run_point, name, scale, p, str(_point_dir(sweep_dir, p))) for p in todo
            ]
            for f in futs:
                f.result()
                bar.update()
    bar.close()
    return aggregate(sweep_dir)


def aggregate(sweep_dir: str | Path) -> dict:
    """Mean ± std over seeds of every numeric summary entry; writes sweep.json, sweep.md, sweep.png."""
    sweep_dir = Path(sweep_dir)
    meta = io.read_json(sweep_dir / "sweep_config.json")
    grid_keys = [k for k in meta["grid"] if k != "seed"]
    groups: dict[tuple, list[dict]] = {}
    for res_path in sorted(sweep_dir.glob("*/results.json")):
        cfg = io.read_json(res_path.parent / "config.json")["config"]
        key = tuple(str(cfg[k]) for k in grid_keys)
        groups.setdefault(key, []).append(io.read_json(res_path).get("summary", {}))
    rows = []
    for key, summaries in groups.items():
        metrics = sorted({k for s in summaries for k, v in s.items() if isinstance(v, int | float)})
        row = {"point": dict(zip(grid_keys, key, strict=True)), "n": len(summaries)}
        for m in metrics:
            vals = np.array([s[m] for s in summaries if isinstance(s.get(m), int | float)], float)
            row[m] = {"mean": float(vals.mean()), "std": float(vals.std())}
        rows.append(row)
    out = {"experiment": meta["experiment"], "grid": meta["grid"], "rows": rows}
    io.write_json(sweep_dir / "sweep.json", out)
    metric_names = sorted({m for r in rows for m in r if m not in ("point", "n")})
    lines = [f"# sweep: {meta['experiment']}", ""]
    lines.append("| " + " | ".join([*grid_keys, "seeds", *metric_names]) + " |")
    lines.append("|" + " --- |" * (len(grid_keys) + 1 + len(metric_names)))
    for r in rows:
        cells = [r["point"][k] for k in grid_keys] + [str(r["n"])]
        for m in metric_names:
            cells.append(f"{r[m]['mean']:.4g} ± {r[m]['std']:.2g}" if m in r else "—")
        lines.append("| " + " | ".join(cells) + " |")
    if rows and metric_names and grid_keys:
        _plot_sweep(rows, grid_keys[0], metric_names, sweep_dir / "sweep.png")
        lines += ["", "![sweep](sweep.png)"]
    io.atomic_write_bytes(sweep_dir / "sweep.md", ("\n".join(lines) + "\n").encode())
    return out


def _plot_sweep(rows, xkey, metric_names, path) -> None:
    import matplotlib.pyplot as plt

    try:
        xs = [float(r["point"][xkey]) for r in rows]
        numeric = True
    except ValueError:
        xs, numeric = list(range(len(rows))), False
    order = np.argsort(xs)
    n = len(metric_names)
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n, 2.8), squeeze=False)
    for ax, m in zip(axes[0], metric_names, strict=True):
        x = [xs[i] for i in order if m in rows[i]]
        y = [rows[i][m]["mean"] for i in order if m in rows[i]]
        e = [rows[i][m]["std"] for i in order if m in rows[i]]
        ax.errorbar(x, y, yerr=e, marker="o", capsize=3)
        ax.set_xlabel(xkey)
        ax.set_title(m, fontsize=9)
        if numeric and min(x) > 0 and max(x) / min(x) > 50:
            ax.set_xscale("log")
        if not numeric:
            ax.set_xticks(x, [rows[i]["point"][xkey] for i in order if m in rows[i]])
    fig.tight_layout()
    io.save_figure(fig, path)
