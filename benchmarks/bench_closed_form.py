"""Closed-form gradient-flow solutions vs diffrax integration of the same trajectories.

For the diagonal linear network (d = 8 modes) and the Saxe task-aligned network (c = 3, d = 4,
h = 5), both evaluated at 1,000 time points, jitted, timed after compilation. The baseline is the
reference integrator :func:`sims.gradient_flow` (Dopri8, rtol 1e-12) and a looser rtol 1e-8 run.
Target: closed form ≥ 100× faster per trajectory.

    python benchmarks/bench_closed_form.py
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from sims import diagonal, gradient_flow, saxe


def _time(fn, *args, repeats: int) -> float:
    """Best-of-``repeats`` wall time of one call (the best run is the least disturbed by other load)."""
    jax.block_until_ready(fn(*args))  # compile
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best


def _report(name: str, t_cf: float, t_flows: dict, err: float) -> None:
    print(
        f"{name}: closed form {t_cf * 1e6:9.1f} µs/trajectory  (max |Δ| vs rtol=1e-12 flow {err:.1e})"
    )
    for label, t_flow in t_flows.items():
        print(
            f"  diffrax {label:>10}: {t_flow * 1e3:9.2f} ms/trajectory   ratio {t_flow / t_cf:9.0f}×"
        )


def bench_diagonal(n_times: int = 1000) -> None:
    key = jax.random.key(0)
    ka, kb, ks = jax.random.split(key, 3)
    d = 8
    a0 = 1e-3 * jax.random.normal(ka, (d,))
    b0 = 1e-3 * jax.random.normal(kb, (d,))
    sigma2 = jnp.logspace(0.0, -1.0, d)
    S = jax.random.uniform(ks, (d,), minval=0.5, maxval=2.0)
    t = jnp.linspace(0.0, 200.0, n_times)
    cf = jax.jit(lambda a0, b0, t: diagonal.solve(a0, b0, sigma2, S, t).u)
    flows = {}
    for rtol in (1e-12, 1e-8):
        flows[f"rtol={rtol:.0e}"] = jax.jit(
            lambda a0, b0, t, rtol=rtol: (lambda p: p["a"] * p["b"])(
                gradient_flow(
                    diagonal.loss, {"a": a0, "b": b0}, t, (sigma2, S), rtol=rtol, atol=1e-30
                )
            )
        )
    t_cf = _time(cf, a0, b0, t, repeats=50)
    t_flows = {k: _time(f, a0, b0, t, repeats=5) for k, f in flows.items()}
    err = float(jnp.max(jnp.abs(cf(a0, b0, t) - flows["rtol=1e-12"](a0, b0, t))))
    _report("diagonal network (d = 8, 1000 times)", t_cf, t_flows, err)
    # A sweep: 64 initialisations at once (vmap), time per trajectory.
    n = 64
    A0 = 1e-3 * jax.random.normal(ka, (n, d))
    B0 = 1e-3 * jax.random.normal(kb, (n, d))
    cf_b = jax.jit(jax.vmap(cf, in_axes=(0, 0, None)))
    flow_b = jax.jit(jax.vmap(flows["rtol=1e-12"], in_axes=(0, 0, None)))
    t_cf = _time(cf_b, A0, B0, t, repeats=20) / n
    t_flow = _time(flow_b, A0, B0, t, repeats=2) / n
    err = float(jnp.max(jnp.abs(cf_b(A0, B0, t) - flow_b(A0, B0, t))))
    _report(f"diagonal network, vmapped sweep of {n} inits", t_cf, {"rtol=1e-12": t_flow}, err)


def bench_saxe(n_times: int = 1000) -> None:
    sigma_yx = jax.random.normal(jax.random.key(1), (3, 4))
    init = saxe.aligned_init(sigma_yx, 5, 1e-3)
    t = jnp.linspace(0.0, 40.0, n_times)
    cf = jax.jit(lambda w1, w2, t: saxe.solve(sigma_yx, w1, w2, t).network_map)
    flows = {}
    for rtol in (1e-12, 1e-8):
        flows[f"rtol={rtol:.0e}"] = jax.jit(
            lambda w1, w2, t, rtol=rtol: (lambda p: p.w2 @ p.w1)(
                gradient_flow(saxe.loss, saxe.SaxeInit(w1, w2), t, sigma_yx, rtol=rtol, atol=1e-30)
            )
        )
    t_cf = _time(cf, init.w1, init.w2, t, repeats=50)
    t_flows = {k: _time(f, init.w1, init.w2, t, repeats=5) for k, f in flows.items()}
    err = float(
        jnp.max(jnp.abs(cf(init.w1, init.w2, t) - flows["rtol=1e-12"](init.w1, init.w2, t)))
    )
    _report("Saxe network (c = 3, d = 4, h = 5, 1000 times)", t_cf, t_flows, err)


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    print(f"backend: {jax.default_backend()}, float64")
    bench_diagonal()
    bench_saxe()
