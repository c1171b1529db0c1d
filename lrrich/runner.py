"""Run a registered experiment into a run directory: config, results, figures, report."""

from __future__ import annotations

import dataclasses
import platform
import time
from pathlib import Path

import jax

from lrrich import io
from lrrich.registry import Experiment, get


def default_run_dir(name: str, root: str | Path = "runs") -> Path:
    """``runs/<name>-<YYYYmmdd-HHMMSS>``."""
    return Path(root) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_experiment(
    experiment: str | Experiment,
    config=None,
    run_dir: str | Path | None = None,
    *,
    scale: str = "small",
    resume: bool = False,
) -> dict:
    """Run ``experiment`` with ``config`` (default: its ``scale`` config) into ``run_dir``.

    Writes ``config.json`` first, then ``results.json`` (atomically, with ``timing``), figures and
    ``report.md``. With ``resume=True`` an existing run directory is reused (the experiment picks
    up its checkpoints); it must belong to the same experiment.

    Float64 is enabled for the duration of the run (sims are float64 by design); models in ``nets``
    choose their own dtypes explicitly.

    Returns:
      the results dict, as written to ``results.json``.
    """
    exp = get(experiment) if isinstance(experiment, str) else experiment
    config = config if config is not None else exp.config(scale)
    run_dir = Path(run_dir) if run_dir is not None else default_run_dir(exp.name)
    cfg_path = run_dir / "config.json"
    if cfg_path.exists():
        prev = io.read_json(cfg_path)
        if prev.get("experiment") != exp.name:
            raise ValueError(
                f"{run_dir} holds a run of {prev.get('experiment')!r}, not {exp.name!r}; "
                "choose another --out"
            )
        if not resume and (run_dir / "results.json").exists():
            raise FileExistsError(
                f"{run_dir} already holds finished results; pass --resume to reuse it or another --out"
            )
    run_dir.mkdir(parents=True, exist_ok=True)
    io.write_json(
        cfg_path, {"experiment": exp.name, "scale": scale, "config": dataclasses.asdict(config)}
    )
    t0 = time.perf_counter()
    with jax.enable_x64(True):
        results = exp.run(config, run_dir)
    wall = time.perf_counter() - t0
    results = dict(results)
    results.setdefault("timing", {})["wall_s"] = wall
    results["environment"] = {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    io.write_json(run_dir / "results.json", results)
    results = io.read_json(run_dir / "results.json")
    if exp.plot is not None:
        exp.plot(results, run_dir)
    from lrrich.report import write_report

    write_report(run_dir)
    return results
