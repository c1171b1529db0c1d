"""``lrrich sweep --vmap``: the points of a sweep trained as one vmapped program per step.

Each point runs its unchanged experiment code through :func:`lrrich.runner.run_experiment` (so its
``config.json``, ``results.json``, figures and report are exactly those of a normal run), each in
its own thread under one :class:`nets.batch.TrainBatcher`. Experiments train through
:func:`lrrich.trainer.train`, which in those threads hands its calls to the batcher; the calls
that can share a compiled program (same data, model structure, static config and run length —
points differing in seed, learning rate, momentum, weight decay, target / input / output scale,
weight scale or layer balance) are trained together as one stacked :func:`nets.loop.fit` (one
compilation, one dispatch per chunk for all runs, the runs stepped one after another inside it);
the others run alone.
The points' own work outside ``train`` (data, evaluation, figures, reports) runs one point at a
time, as with ``--jobs 1``, so the threads do not compete for the cores. A point
that trains no network simply runs in its thread. Figures are drawn one point at a time
(matplotlib's pyplot is not thread-safe).

Timings: a stacked run's ``History`` times are its share, 1/R, of the program's time
(``History.runs_in_program`` = R), so a point's ``*_train_seconds`` is per run; ``timing.wall_s`` is
its thread's wall time, which overlaps the other points' (``timing.vmap_points`` says how many).

Agreement with ``--jobs``: on the CPU the results are bitwise those of separate runs
(:data:`VMAP_RTOL`); on a GPU to round-off (:data:`nets.step.MODES`).
``--vectorize`` (``run_points(vectorize=True)``) steps a group's runs as one ``jax.vmap`` instead:
batched matmuls, faster training steps for small models (``benchmarks/bench_vmap_sweep.py``). Each
run then equals its own ``train`` to float32 round-off per step (the sums are reordered), which
training amplifies where it is chaotic (large learning rates); no tolerance is promised.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lrrich import runfolder
from lrrich.registry import Experiment

_PLOT_LOCK = threading.Lock()

#: Relative tolerance between a ``--vmap`` sweep's results and the same points run as processes:
#: none. The stacked program steps its runs one after another (``lax.map``, ``vectorize=False`` of
#: :func:`nets.loop.fit`), so each run does its own ``train``'s arithmetic bitwise (XLA:CPU is
#: deterministic). A ``jax.vmap`` of the step would not: XLA:CPU then computes Adam's
#: bias-corrected update and the bias gradients' batch sums in another order (1 ulp per step),
#: which training amplifies — measured on ``lrrich sweep encoded-labels --grid
#: lr=0.0003,0.001,0.003,0.01 --seeds 4 --set epochs=5``: rich D_LR 1.2 % apart at lr 0.001, test
#: accuracy 0.444 vs 0.381 at lr 0.01. For those wide layers the sequential form is also faster.
VMAP_RTOL = 0.0


class VmapUnsupported(RuntimeError):
    """The experiment or its points cannot be vmapped; the sweep runs them as processes."""


def run_points(
    exp: Experiment,
    configs: Sequence[Any],
    run_dirs: Sequence[str | Path],
    *,
    scale: str = "small",
    vectorize: bool = False,
) -> list[dict]:
    """Run one sweep point per (config, run_dir), their ``nets.train`` calls batched by vmap.

    Args:
      exp: the registered experiment.
      configs: its Config objects, one per point × seed.
      run_dirs: one run folder per config (an existing run folder is resumed, as a sweep does).
      scale: the preset the configs were derived from (recorded in ``config.json``).
      vectorize: step each group's runs as one ``jax.vmap`` (``TrainBatcher(vectorize=True)``):
        faster steps for small models, equal to separate runs to round-off (module docstring)
        instead of bitwise; recorded as ``timing.vmap_vectorized`` in each point's results.

    Returns:
      the results dicts, as written to each ``results.json`` (a point whose run raised has no
      ``results.json`` and is absent from the list; the sweep retries it as a process).

    Raises:
      VmapUnsupported: fewer than two points.
      ValueError: ``configs`` and ``run_dirs`` of different lengths.
    """
    from lrrich import trainer
    from lrrich.runner import run_experiment
    from nets.batch import TrainBatcher

    if len(configs) != len(run_dirs):
        raise ValueError(
            f"configs and run_dirs must have the same length, got {len(configs)} and "
            f"{len(run_dirs)}"
        )
    if len(configs) < 2:
        raise VmapUnsupported(f"{len(configs)} point(s): nothing to vmap")
    n = len(configs)

    def run(config, run_dir):
        results = exp.run(config, run_dir)
        results.setdefault("timing", {}).update(vmap_points=n, vmap_vectorized=vectorize)
        return results

    def plot(results, run_dir):
        with _PLOT_LOCK:
            return exp.plot(results, run_dir)

    locked = dataclasses.replace(exp, run=run, plot=plot if exp.plot is not None else None)
    batcher = TrainBatcher(len(configs), one_at_a_time=True, vectorize=vectorize)
    results: list[dict | None] = [None] * len(configs)

    def work(i: int) -> None:
        run_dir = Path(run_dirs[i])
        with trainer.batched(batcher):
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
