"""A sweep as one program: 16 digits-MLP runs (4 seeds × 4 learning rates), vmapped vs sequential.

``nets.train_many`` trains the 16 runs as one ``jax.vmap``-ed program (stacked states and traced
hyper-parameters). Three ways to run the same sweep, each logging the same 11 points per run
(with D_LR), wall clock, all measured in this run:

* one process per point (what ``lrrich sweep`` does without ``--vmap``): 16 × a fresh first call
  (compilation + run), measured as the first ``train`` call of this process;
* 16 sequential ``train`` calls in one process: since lr is traced they share one compiled
  program, so only the first compiles;
* ``train_many``: one compilation, one program for the 16 runs.

The final parameters agree to float32 round-off (printed; ``tests/nets/test_step.py`` checks it).

``--breakdown`` (16 tiny runs, 64-8-10 on the digits, 6 epochs, against one): where a warm
stacked program's time goes — steps, log points, the first chunk (the first log point and step
chunk, which a History counts as compile time) and host (building and stacking the runs, the
per-epoch permutations, unstacking the models) — for R = 1 and R = 16, the best of several
repeats (and the medians, whose distance from the best shows how noisy the machine was), with
the load average at the start and end. It prints the ratio R = 16 / R = 1 beside
:data:`BEFORE_RATIO`, the ratio measured before the runs were built as one stacked build, and
its floor: the R = 16 steps and log points alone (arithmetic that grows with R), and with the
host time of one run added, against one ``train()``.
``--profile`` also traces one more R = 16 program (``jax.profiler``, kept in
``bench_vmap_sweep_trace`` of the temporary folder) and prints its busiest operations.
``--per-core`` gives jax one CPU device per core (``jax_num_cpu_devices``, set at start), so
``train_many`` splits the 16 runs over the cores; one run uses one device either way.

    python benchmarks/bench_vmap_sweep.py [--hidden 32] [--epochs 10] [--batch 64] [--record]
    python benchmarks/bench_vmap_sweep.py --breakdown [--per-core] [--profile] [--record]  # 16 vs one

Results: ``benchmarks/results.md`` (``python benchmarks/bench_vmap_sweep.py --record``); where the
time goes and the one-BLAS-thread measurements: ``docs/findings/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import jax
import numpy as np
from flax import nnx
from results import Printed

from nets import MLP, TrainConfig, load_digits, train, train_many

SEEDS = (0, 1, 2, 3)
#: --breakdown's R = 16 / R = 1 before one stacked build per fit and one permutation per epoch,
#: recorded in docs/findings/benchmarks.md (bench_vmap_sweep).
BEFORE_RATIO = 5.0
LRS = (0.02, 0.05, 0.1, 0.2)


def main() -> None:
    from nets.blas import limit_blas_threads

    limit_blas_threads()  # one OpenBLAS thread (nets/blas.py), as the CLI and the tests run
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=32, help="hidden width of the 1-layer MLP")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--record", action="store_true", help="write benchmarks/results.md")
    args = parser.parse_args()
    data = load_digits()
    base = TrainConfig(lr=0.1, momentum=0.9, batch_size=args.batch, epochs=args.epochs)
    runs = [(s, lr) for s in SEEDS for lr in LRS]
    configs = [dataclasses.replace(base, lr=lr) for _, lr in runs]
    keys = [jax.random.key(s) for s, _ in runs]

    def model(seed):
        return MLP(64, (args.hidden,), 10, rngs=nnx.Rngs(seed))

    t0 = time.perf_counter()
    train(model(99), data, configs[0], key=keys[0], progress=False)
    t_first = time.perf_counter() - t0  # a fresh process pays this for every point

    t0 = time.perf_counter()
    seq = [
        train(model(s), data, c, key=k, progress=False)
        for (s, _), c, k in zip(runs, configs, keys, strict=True)
    ]
    t_seq = time.perf_counter() - t0

    t0 = time.perf_counter()
    many, hists = train_many([model(s) for s, _ in runs], data, configs, keys)
    t_vmap_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    train_many([model(s + 50) for s, _ in runs], data, configs, keys)
    t_vmap = time.perf_counter() - t0

    diff = max(
        float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
        for (m, _), v in zip(seq, many, strict=True)
        for a, b in zip(jax.tree.leaves(nnx.state(m)), jax.tree.leaves(nnx.state(v)), strict=True)
    )
    acc = [h.final["test_acc"] for h in hists]
    say = Printed()
    say(
        f"{len(runs)} runs: MLP 64-{args.hidden}-10, {args.epochs} epochs of batch {args.batch} "
        f"on digits, {len(hists[0].records)} log points each, {jax.default_backend()}"
    )
    R = len(runs)
    say(f"  one process per point : {R * t_first:7.2f} s  ({R} x {t_first:.2f} s first call)")
    say(f"  sequential, in-process: {t_seq:7.2f} s  (compiled program reused)")
    say(f"  train_many, first call: {t_vmap_first:7.2f} s  (warm: {t_vmap:.2f} s)")
    say(f"  ratio per-process / train_many = {R * t_first / t_vmap_first:.1f}x  (target ≥ 5)")
    say(f"  ratio sequential in-process / warm train_many = {t_seq / t_vmap:.1f}x")
    say(f"  max |Δθ| between the two = {diff:.2e}; test acc {min(acc):.3f}–{max(acc):.3f}")
    if args.record:
        say.record(__file__)


def breakdown(repeats: int = 7, record: bool = False, profile: str | None = None) -> None:
    """Where a warm stacked program's time goes, R = 1 and 16 tiny runs, best of ``repeats``.

    64-8-10 MLP on the 8×8 digits, 6 epochs of batch 64, the default log points (D_LR each):
    steps, log points and the first chunk (compile time, here the first log point and step
    chunk) from each History's share (summed over the runs), host = the rest of the wall time
    (building and stacking the runs, permutations, unstacking the models). Ratios are taken
    within this process, so a loaded machine shifts both sides. ``profile``: a folder for a
    ``jax.profiler`` trace of one more R = 16 program, whose busiest operations are printed
    (:mod:`trace_summary`).
    """
    data = load_digits()
    base = TrainConfig(lr=0.1, momentum=0.9, batch_size=64, epochs=6)

    def once(R: int, offset: int) -> tuple[float, float, float, float]:
        configs = [dataclasses.replace(base, lr=0.05 + 0.01 * i) for i in range(R)]
        keys = [jax.random.key(i) for i in range(R)]
        models = [MLP(64, (8,), 10, rngs=nnx.Rngs(offset + i)) for i in range(R)]
        t0 = time.perf_counter()
        _, hists = train_many(models, data, configs, keys)
        wall = time.perf_counter() - t0
        times = [sum(getattr(h, k) for h in hists) for k in ("train_time", "log_time")]
        return wall, *times, sum(h.compile_time for h in hists)

    def one_train(offset: int) -> float:
        model = MLP(64, (8,), 10, rngs=nnx.Rngs(offset))
        t0 = time.perf_counter()
        train(model, data, base, key=jax.random.key(0), progress=False)
        return time.perf_counter() - t0

    say = Printed()
    load_before = os.getloadavg()[0]
    once(1, 0), once(16, 0), one_train(0)  # compile
    best = {1: (np.inf,) * 4, 16: (np.inf,) * 4}
    walls: dict = {1: [], 16: [], "train": []}  # every repeat, for the medians
    for rep in range(repeats):
        for R in (1, 16):
            r = once(R, 100 * R + rep)
            best[R] = min(best[R], r)
            walls[R].append(r[0])
        walls["train"].append(one_train(rep))
    t_one = min(walls["train"])
    say(
        f"stacked program, 64-8-10 MLP, digits, 6 epochs, {jax.default_backend()} with "
        f"{jax.local_device_count()} device(s) (best of {repeats}):"
    )
    for R, (wall, steps, logs, first) in best.items():
        say(
            f"  R = {R:2d}: {wall * 1e3:6.1f} ms = steps {steps * 1e3:5.1f} + log points "
            f"{logs * 1e3:5.1f} + first chunk {first * 1e3:4.1f} + host "
            f"{(wall - steps - logs - first) * 1e3:5.1f}"
        )
    say(f"  one train() call: {t_one * 1e3:.1f} ms")
    say(
        f"  16 runs / one run: {best[16][0] / t_one:.2f}x against train(), "
        f"{best[16][0] / best[1][0]:.2f}x against train_many of one (goal ≤ 2.5x; "
        f"before: {BEFORE_RATIO:.1f}x idle)"
    )
    med = {k: float(np.median(v)) for k, v in walls.items()}
    say(
        f"  medians of the {repeats} repeats: R = 16 {med[16] * 1e3:.1f} ms, one train() "
        f"{med['train'] * 1e3:.1f} ms, {med[16] / med['train']:.2f}x (R = 16 median "
        f"{med[16] / best[16][0] - 1:+.0%} over its best: how noisy the machine was)"
    )
    grow = [b - a for a, b in zip(best[1], best[16], strict=True)]
    say(
        f"  grows with R (R = 16 − R = 1): steps {grow[1] * 1e3:+.1f}, log points "
        f"{grow[2] * 1e3:+.1f}, first chunk {grow[3] * 1e3:+.1f}, host "
        f"{(grow[0] - sum(grow[1:])) * 1e3:+.1f} ms; time that does not grow with R cannot "
        "lower the ratio"
    )
    work = sum(best[16][1:])  # the 16 runs' steps and log points, no host time
    host_one = best[1][0] - sum(best[1][1:])
    say(
        f"  floor: the 16 runs' steps + log points alone take {work * 1e3:.1f} ms = "
        f"{work / t_one:.2f}x one train(); with one run's host time added (the loop waits at "
        f"each stop, so host work and device work add up), {(work + host_one) / t_one:.2f}x"
    )
    say(
        f"  16 sequential train() calls ≈ 16 × {t_one * 1e3:.1f} ms = {16 * t_one * 1e3:.0f} ms: "
        f"the stacked program is {16 * t_one / best[16][0]:.1f}x faster"
    )
    load = f"{load_before:.1f} → {os.getloadavg()[0]:.1f}"
    busy = "" if max(load_before, os.getloadavg()[0]) < 1 else " (not idle: ratios shift)"
    say(f"  1-minute load average {load} on {os.cpu_count()} cores{busy}")
    if profile:  # after the timings, so the profiler's overhead touches none of them
        from trace_summary import print_top_ops, top_ops

        configs = [dataclasses.replace(base, lr=0.05 + 0.01 * i) for i in range(16)]
        models = [MLP(64, (8,), 10, rngs=nnx.Rngs(900 + i)) for i in range(16)]
        keys = [jax.random.key(i) for i in range(16)]
        say("  busiest operations of one more R = 16 program (jax.profiler):")
        print_top_ops(top_ops(lambda: train_many(models, data, configs, keys), profile), say)
    if record:
        say.record(__file__)


if __name__ == "__main__":
    import sys

    if "--breakdown" in sys.argv:
        if "--per-core" in sys.argv:  # one CPU device per core, before jax starts
            jax.config.update("jax_num_cpu_devices", os.cpu_count() or 1)
        from nets.blas import limit_blas_threads

        limit_blas_threads()
        import tempfile

        trace = os.path.join(tempfile.gettempdir(), "bench_vmap_sweep_trace")
        profile = trace if "--profile" in sys.argv else None
        breakdown(record="--record" in sys.argv, profile=profile)
    else:
        main()
