"""``lrrich sweep --vmap``: the points of a sweep trained as one vmapped program per step.

Each point runs its unchanged experiment code through :func:`lrrich.runner.run_experiment` (so its
``config.json``, ``results.json``, figures and report are exactly those of a normal run), each in
its own thread under one :class:`nets.batch.TrainBatcher`: whenever the points call
``nets.train``, the calls that can share a compiled program (same data, model structure, static
config and run length — points differing in seed, learning rate, momentum, weight decay, target /
input / output scale, weight scale or layer balance) are trained together by
:func:`nets.train_many`, one ``jax.vmap``-ed program; the others run alone. Figures are drawn
one point at a time (matplotlib's pyplot is not thread-safe).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lrrich import runfolder
from lrrich.registry import Experiment

_PLOT_LOCK = threading.Lock()


class VmapUnsupported(RuntimeError):
    """The experiment or its points cannot be vmapped; the sweep runs them as processes."""


def _trains_networks(exp: Experiment) -> bool:
    """Whether the experiment's module calls ``nets.train`` (the call the batcher intercepts)."""
    import importlib

    try:
        source = inspect.getsource(importlib.import_module(exp.module))
    except (ImportError, OSError, TypeError):
        return False
    return "nets" in source and "train(" in source


def run_points(
    exp: Experiment,
    configs: Sequence[Any],
    run_dirs: Sequence[str | Path],
    *,
    scale: str = "small",
) -> list[dict]:
    """Run one sweep point per (config, run_dir), their ``nets.train`` calls batched by vmap.

    Args:
      exp: the registered experiment.
      configs: its Config objects, one per point × seed.
      run_dirs: one run folder per config (an existing run folder is resumed, as a sweep does).
      scale: the preset the configs were derived from (recorded in ``config.json``).

    Returns:
      the results dicts, as written to each ``results.json`` (a point whose run raised has no
      ``results.json`` and is absent from the list; the sweep retries it as a process).

    Raises:
      VmapUnsupported: fewer than two points, or an experiment that does not train networks
        with ``nets.train``.
      ValueError: ``configs`` and ``run_dirs`` of different lengths.
    """
    from lrrich.runner import run_experiment
    from nets.batch import TrainBatcher, batched_training

    if len(configs) != len(run_dirs):
        raise ValueError(
            f"configs and run_dirs must have the same length, got {len(configs)} and "
            f"{len(run_dirs)}"
        )
    if len(configs) < 2:
        raise VmapUnsupported(f"{len(configs)} point(s): nothing to vmap")
    if not _trains_networks(exp):
        raise VmapUnsupported(f"experiment {exp.name!r} does not train networks with nets.train")

    def plot(results, run_dir):
        with _PLOT_LOCK:
            return exp.plot(results, run_dir)

    locked = dataclasses.replace(exp, plot=plot if exp.plot is not None else None)
    batcher = TrainBatcher(len(configs))
    results: list[dict | None] = [None] * len(configs)

    def work(i: int) -> None:
        run_dir = Path(run_dirs[i])
        with batched_training(batcher):
            try:
                resume = runfolder.is_run_folder(run_dir)
                results[i] = run_experiment(locked, configs[i], run_dir, scale=scale, resume=resume)
            except Exception as e:  # the sweep runs this point again, as a process
                print(
                    f"lrrich: --vmap point {run_dir} raised {type(e).__name__}: {e}; "
                    "it runs again as a process",
                    file=sys.stderr,
                )

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(configs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]
