"""Run a registered experiment into a run folder: config and provenance, results, figures, report."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import jax

from lrrich import io, runfolder
from lrrich.registry import Experiment, check_config, check_extras, get

FINISHED, DIVERGED = "finished", "diverged"


def default_run_dir(name: str, root: str | Path = "runs") -> Path:
    """``runs/<name>-<YYYYmmdd-HHMMSS>``."""
    return Path(root) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _is_divergence(err: BaseException) -> bool:
    """Whether ``err`` is ``nets.TrainingDiverged`` (imported lazily: sims-only runs skip Flax)."""
    try:
        from nets import TrainingDiverged
    except ImportError:  # nets itself is broken: the original error is the one to show
        return False
    return isinstance(err, TrainingDiverged)


def run_experiment(
    experiment: str | Experiment,
    config: Any = None,
    run_dir: str | Path | None = None,
    *,
    scale: str = "small",
    resume: bool = False,
) -> dict:
    """Run ``experiment`` with ``config`` (default: its ``scale`` config) into ``run_dir``.

    Writes ``config.json`` first (config, git commit and dirty flag, command line, package
    versions; see :mod:`lrrich.runfolder`), then ``results.json`` (atomically, with ``status``,
    ``timing`` and ``environment``), figures and ``report.md``. A training run that diverges
    (``nets.TrainingDiverged``) ends with ``status: "diverged"`` and the message instead of an
    exception; any other exception of the run propagates and leaves no ``results.json``. A figure
    that fails to draw does not lose the results: the error is kept as ``plot_error`` and
    ``lrrich report --replot`` draws the figures again.

    Float64 is enabled for the duration of the run (sims are float64 by design); models in ``nets``
    choose their own dtypes explicitly.

    Args:
      experiment: a registered experiment or its name.
      config: its config dataclass instance (default: ``experiment.config(scale)``).
      run_dir: the run folder (default ``runs/<name>-<timestamp>``).
      scale: the preset name recorded with the run.
      resume: continue the run folder (its checkpoints); it must hold the same experiment,
        scale and config.

    Returns:
      the results dict, as written to ``results.json``.

    Raises:
      FileExistsError, ValueError: ``run_dir`` may not hold this run (see
        :func:`lrrich.runfolder.prepare`), or ``config`` cannot run
        (:func:`lrrich.registry.check_config`); nothing is written then.
      ImportError: ``config`` needs an optional extra that is not installed.
    """
    exp = get(experiment) if isinstance(experiment, str) else experiment
    config = config if config is not None else exp.config(scale)
    run_dir = Path(run_dir) if run_dir is not None else default_run_dir(exp.name)
    check_config(config)  # before anything is written (the CLI has checked it already)
    check_extras(config)
    if runfolder.prepare(run_dir, exp, config, scale=scale, resume=resume):
        record = io.read_json(run_dir / runfolder.CONFIG)
        record.setdefault("resumed", []).append(runfolder.provenance())
        io.write_json(run_dir / runfolder.CONFIG, record)
    else:
        runfolder.write_run_record(run_dir, exp, config, scale)
    t0 = time.perf_counter()
    try:
        with jax.enable_x64(True):
            results = {**exp.run(config, run_dir), "status": FINISHED}
    except Exception as err:
        if not _is_divergence(err):
            raise
        results = {"status": DIVERGED, "message": str(err), "summary": {}}
    if results.get("measured") and exp.claims:
        from lrrich.claims import judge_all

        results["comparison"] = judge_all(exp.claims, results["measured"])
    results.setdefault("timing", {})["wall_s"] = time.perf_counter() - t0
    results["environment"] = runfolder.environment()
    io.write_json(run_dir / runfolder.RESULTS, results)
    results = io.read_json(run_dir / runfolder.RESULTS)
    if exp.plot is not None and results["status"] == FINISHED:
        try:
            exp.plot(results, run_dir)
        except Exception as err:  # the results stand; `lrrich report --replot` retries the figures
            results["plot_error"] = f"{type(err).__name__}: {err}"
            io.write_json(run_dir / runfolder.RESULTS, results)
            print(
                f"lrrich: warning: {run_dir}: figures failed ({results['plot_error']}); the "
                "results are saved — fix the plot and run `lrrich report --replot`",
                file=sys.stderr,
            )
    from lrrich.report import write_report

    write_report(run_dir)
    return results
