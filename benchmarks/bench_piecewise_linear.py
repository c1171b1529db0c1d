"""Piecewise-linear integrator throughput: jitted lax.scan RK4, vmapped over seeds, vs a Python loop.

Baseline: one RK4 step of the same public solver (``solve`` over one step of length dt), jitted,
called once per step from a Python loop for one trajectory (the usual research-notebook
pattern). Both in float64, measured in this run after compilation.
Problems: h = 50, d = 20, n = 200 (the teacher–student small config) and a small h = 8, d = 3, n = 16
network (where per-step dispatch dominates); 2,000 steps per trajectory, 16 seeds.

Run: ``python benchmarks/bench_piecewise_linear.py [--record]``.

Results: ``benchmarks/results.md`` (``python benchmarks/bench_piecewise_linear.py --record``).
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
from results import Printed

from sims import piecewise_linear as pl

STEPS, SEEDS = 2000, 16
DT = 1e-3
say = Printed()


def _problem(key, H, D, N):
    k = jax.random.split(key, 4)
    return (
        jax.random.normal(k[0], (H,)) * 0.3,
        jax.random.normal(k[1], (H, D)) / jnp.sqrt(D),
        jax.random.normal(k[2], (N, D)) / jnp.sqrt(N),
        jax.random.normal(k[3], (N,)) / jnp.sqrt(N),
    )


def _timed(fn, repeat=3):
    jax.block_until_ready(fn())  # compile / warm up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return best


def bench(H: int, D: int, N: int) -> None:
    """Time both integrators on one problem size and print steps/s, trajectories/s and the ratio."""
    keys = jax.random.split(jax.random.PRNGKey(0), SEEDS)
    a0, W0, X, y = jax.vmap(lambda k: _problem(k, H, D, N))(keys)
    t = jnp.array([STEPS * DT])

    batched = jax.jit(
        jax.vmap(lambda a, W, Xs, ys: pl.solve(a, W, Xs, ys, t, n_substeps=STEPS).W[-1])
    )
    t_scan = _timed(lambda: batched(a0, W0, X, y))

    dt = jnp.array([DT])
    step = jax.jit(lambda a, W, Xs, ys: pl.solve(a, W, Xs, ys, dt, n_substeps=1))  # one RK4 step

    def loop():
        a, W = a0[0], W0[0]
        for _ in range(STEPS):
            traj = step(a, W, X[0], y[0])
            a, W = traj.a[-1], traj.W[-1]
        return W

    t_loop = _timed(loop, repeat=1)
    ref = batched(a0, W0, X, y)[0]
    err = float(jnp.abs(loop() - ref).max())
    scan_tps, loop_tps = SEEDS / t_scan, 1 / t_loop
    say(f"h={H} d={D} n={N}, {STEPS} RK4 steps/trajectory, float64, {jax.default_backend()}")
    say(
        f"jitted scan, vmapped over {SEEDS} seeds: {t_scan:.3f} s -> {scan_tps:.2f} traj/s, "
        f"{scan_tps * STEPS:.3g} steps/s"
    )
    say(
        f"python loop of jitted steps, 1 seed:    {t_loop:.3f} s -> {loop_tps:.2f} traj/s, "
        f"{loop_tps * STEPS:.3g} steps/s"
    )
    say(f"speed-up (trajectories/s): {scan_tps / loop_tps:.1f}x   (max |W| difference {err:.1e})")


def main() -> None:
    from nets.xla_cpu import limit_blas_threads

    limit_blas_threads()  # one OpenBLAS thread (nets.xla_cpu), as the CLI and the tests run
    jax.config.update("jax_enable_x64", True)
    bench(50, 20, 200)
    bench(8, 3, 16)
    if "--record" in sys.argv[1:]:
        say.record(__file__)


if __name__ == "__main__":
    main()
