"""Speed of the λ-balanced and scalar-in/out closed forms (issue 3, items 1–2).

1. Closed form vs diffrax integration of the raw parameters, same trajectory, 1,000 time points
   (target ≥ 100× per trajectory), both jitted and timed after compilation.
2. Vmapped throughput of :func:`sims.scalar_linear.solve`, p = 64, float64: 10⁵ trajectories × 100
   time points (target < 1 s after compilation) — for the network output θ(t) (XLA drops the
   p-wide weights when only θ is used) and, on 10⁴ trajectories, with all weights a_i(t), b_i(t).

Run: ``python benchmarks/bench_sims_issue3a.py``.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp


def _time(fn, *args, repeat=3):
    jax.block_until_ready(fn(*args))  # compile
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    jax.config.update("jax_enable_x64", True)
    from sims import gradient_flow
    from sims import lambda_balanced as lb
    from sims import scalar_linear as sl

    # 1a. λ-balanced, d = 4, h = 3, c = 3, 1,000 times on [0, 40].
    sig = jax.random.normal(jax.random.key(0), (3, 4))
    W1, W2 = lb.balanced_init(jax.random.key(1), 4, 3, 3, 0.1, 0.5)
    t = jnp.linspace(0.0, 40.0, 1000)
    closed = jax.jit(lambda a, b: lb.solve(a, b, sig, t).network)
    flow = jax.jit(
        lambda a, b: (lambda y: y["W2"] @ y["W1"])(
            gradient_flow(lb._loss, {"W1": a, "W2": b}, t, sig)
        )
    )
    tc, tf = _time(closed, W1, W2), _time(flow, W1, W2)
    err = float(jnp.max(jnp.abs(closed(W1, W2) - flow(W1, W2))))
    print(
        f"lambda_balanced  closed {tc * 1e3:8.2f} ms  diffrax {tf * 1e3:8.2f} ms  "
        f"speed-up {tf / tc:7.1f}x  (max diff {err:.1e})"
    )

    # 1b. scalar-in/out, p = 64, 1,000 times.
    ab = 0.01 * jax.random.normal(jax.random.key(2), (2, 64))
    ts = jnp.linspace(0.0, 20.0, 1000)
    closed = jax.jit(lambda a, b: sl.solve(a, b, 2.0, ts).a)
    flow = jax.jit(
        lambda a, b: gradient_flow(
            sl._loss, {"a": a, "b": b}, ts, (jnp.asarray(2.0), jnp.asarray(1.0))
        )["a"]
    )
    tc, tf = _time(closed, ab[0], ab[1]), _time(flow, ab[0], ab[1])
    err = float(jnp.max(jnp.abs(closed(ab[0], ab[1]) - flow(ab[0], ab[1]))))
    print(
        f"scalar_linear    closed {tc * 1e3:8.2f} ms  diffrax {tf * 1e3:8.2f} ms  "
        f"speed-up {tf / tc:7.1f}x  (max diff {err:.1e})"
    )

    # 2. Throughput, p = 64, 100 time points.
    t100 = jnp.linspace(0.0, 10.0, 100)
    for n, what in ((100_000, "theta"), (10_000, "a, b, theta")):
        keys = jax.random.split(jax.random.key(3), 2)
        a0 = 0.1 * jax.random.normal(keys[0], (n, 64))
        b0 = 0.1 * jax.random.normal(keys[1], (n, 64))
        S = jnp.linspace(0.5, 2.0, n)
        if what == "theta":
            fn = jax.jit(jax.vmap(lambda a, b, s: sl.solve(a, b, s, t100).theta))
        else:
            fn = jax.jit(
                jax.vmap(lambda a, b, s: (lambda r: (r.a, r.b, r.theta))(sl.solve(a, b, s, t100)))
            )
        dt = _time(fn, a0, b0, S)
        print(
            f"scalar_linear    {n:>7,d} traj x 100 times, p=64 ({what}): {dt:.3f} s  "
            f"({n / dt:,.0f} traj/s; target 1e5 in < 1 s)"
        )
    # λ-balanced throughput for reference.
    n = 1_000
    inits = jax.vmap(lambda k: lb.balanced_init(k, 4, 3, 3, 0.1, 0.5))(
        jax.random.split(jax.random.key(4), n)
    )
    fn = jax.jit(jax.vmap(lambda a, b: lb.solve(a, b, sig, t100).network))
    dt = _time(fn, *inits, repeat=1)
    print(f"lambda_balanced  {n:>7,d} traj x 100 times (d=4,h=3,c=3): {dt:.3f} s")


if __name__ == "__main__":
    main()
