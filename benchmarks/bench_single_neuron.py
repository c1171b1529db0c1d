"""Single-neuron closed form vs diffrax on the same trajectories; vmapped throughput (float64, CPU).

Targets (issue 3, Speed): ≥ 100× faster per trajectory than integrating the raw (a, w) flow at
1,000 time points; ≥ 1e5 trajectories × 100 time points in < 1 s after compilation.

Timings are best-of-N wall clock after compilation, with the process CPU time next to them (on a
shared machine the CPU time is the load-independent number; the load average is printed).

    python benchmarks/bench_single_neuron.py
"""

from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp


def _best_of(fn, reps: int) -> tuple[float, float]:
    """(best wall seconds, CPU seconds of that run) of ``fn()`` after one warm-up call."""
    jax.block_until_ready(fn())
    best = (float("inf"), float("inf"))
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn())
        best = min(best, (time.perf_counter() - w0, time.process_time() - c0))
    return best


def main() -> None:
    from sims import single_neuron as sn

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs, jax {jax.__version__}")
    X, y, beta_star, a0, w0, eta_a, eta_w = sn._random_cases(jax.random.key(0), 4, d=3)
    t = jnp.linspace(0.0, 30.0, 1000)

    closed = jax.jit(lambda a, w, ea, ew: sn.solve(a, w, beta_star, t, ea, ew).beta)
    flow = jax.jit(lambda a, w, ea, ew: sn._reference_flow(X, y, a, w, t, ea, ew))
    print("one trajectory, 1000 time points, d = 3 (cases: δ > 0, δ = 0, δ < 0 a flips, δ < 0):")
    ratios = []
    for i in range(4):
        args = (a0[i], w0[i], eta_a[i], eta_w[i])
        tc, _ = _best_of(lambda args=args: closed(*args), 50)
        tf, _ = _best_of(lambda args=args: flow(*args), 3)
        ratios.append(tf / tc)
        print(
            f"  case {i}: closed form {tc * 1e6:7.1f} µs   diffrax {tf * 1e3:7.2f} ms   ×{tf / tc:,.0f}"
        )
    print(
        f"  speed-up per call: min ×{min(ratios):,.0f}, mean ×{sum(ratios) / 4:,.0f} (target ≥ 100)"
    )
    # Amortised: a cache-sized batch of 32 closed-form trajectories vs the diffrax mean above.
    batch = jax.jit(
        jax.vmap(lambda a, w, ea, ew: sn.solve(a, w, beta_star, t, ea, ew).beta),
    )
    rep = lambda x: jnp.repeat(x, 8, axis=0)
    args = (rep(a0), rep(w0), rep(eta_a), rep(eta_w))
    tb, _ = _best_of(lambda: batch(*args), 5)
    tf_mean = sum(
        _best_of(lambda i=i: flow(a0[i], w0[i], eta_a[i], eta_w[i]), 3)[0] for i in range(4)
    )
    print(
        f"  amortised in a batch of 32: {tb / 32 * 1e6:.1f} µs/trajectory, "
        f"×{tf_mean / 4 / (tb / 32):,.0f} vs diffrax"
    )

    n, nt = 100_000, 100
    tt = jnp.linspace(0.0, 20.0, nt)
    print(f"vmapped throughput: {n:,} trajectories × {nt} times (target < 1 s):")
    for d in (2, 5):
        ka, kw = jax.random.split(jax.random.key(d))
        A0 = jax.random.normal(ka, (n,))
        W0 = jax.random.normal(kw, (n, d))
        bs = jnp.ones(d) / jnp.sqrt(d)
        one = lambda a, w, bs=bs: sn.solve(a, w, bs, tt)
        variants = {
            "vmap, all outputs": jax.jit(jax.vmap(one)),
            "vmap, (mu, phi)": jax.jit(jax.vmap(lambda a, w, one=one: one(a, w)[2:4])),
            "lax.map(batch 1024), all": jax.jit(
                lambda A, W, one=one: jax.lax.map(lambda x: one(*x), (A, W), batch_size=1024)
            ),
        }
        for name, f in variants.items():
            wall, cpu = _best_of(lambda f=f, A0=A0, W0=W0: f(A0, W0), 3)
            print(f"  d = {d}, {name:<26s} wall {wall:6.3f} s   cpu {cpu:6.3f} s")


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    main()
