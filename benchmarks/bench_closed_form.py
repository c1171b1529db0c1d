"""Closed-form gradient-flow solutions vs diffrax integration of the same trajectories.

For every solvable model in :mod:`sims` (diagonal, Saxe, λ-balanced, scalar-in/out, single
neuron) both sides are jitted and timed after compilation, on the same initialisations, at 1,000
time points, float64:

* **single**: one trajectory per call (includes the per-call dispatch of a few µs);
* **vmap 64**: one call on a batch of 64 trajectories (``jax.vmap`` of the same function, for the
  closed form *and* for diffrax), divided by 64: the per-trajectory compute cost.

The baseline, measured in the same run, is the reference integrator :func:`sims.gradient_flow`
(Dopri8, rtol 1e-12, the one the tests use). "max |Δ|" is the largest difference between the two
on the vmapped batch. Then the throughput targets: 10⁵ trajectories × 100 time points after
compilation, for the single neuron (d = 3, all outputs) and the scalar-in/out network with
p = 64 (θ, γ and the mode sums; all weights a_i(t), b_i(t) on 10⁴ trajectories, since
10⁵ × 100 × 64 × 2 doubles is 10 GB). Targets: ratio ≥ 100× per trajectory (``lambda_balanced``
≥ 30×); throughput < 1 s. Timings are the best of ~0.05 s of repeated calls on each side (the
least disturbed by other load); the load average is printed at the start and the end. The
scalar_linear vmapped row writes 65 MB of fresh output per call: read it as a memory-bandwidth
figure.

    python benchmarks/bench_closed_form.py [--record]   # the table
    python benchmarks/bench_closed_form.py --hang       # the XLA:CPU hang reproducer

``--hang`` runs the former per-time ``lambda_balanced`` pipeline (a batched LAPACK QR and
triangular solve per time, vmapped over 32 trajectories × 1,000 times) in a subprocess and
reports whether it finished in 60 s (``xla_cpu_hangs.py``, which holds every XLA:CPU hang
reproducer of the project).

Results: ``benchmarks/results.md`` (``python benchmarks/bench_closed_form.py --record``); the fast
paths, the bimodal scalar_linear row and the hang: ``docs/findings/benchmarks.md``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
from results import Printed

N_TIMES = 1000
BATCH = 64


def _best(fn: Callable, *args, repeats: int) -> float:
    """Best-of-``repeats`` wall time of ``fn(*args)`` after a compiling call."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best


def _row(name: str, closed: Callable, flow: Callable, batch: tuple) -> dict:
    """Time one model: single trajectory (the first of the batch) and the vmapped batch."""
    one = tuple(x[0] for x in batch)
    c1, f1 = jax.jit(closed), jax.jit(flow)
    fb = jax.jit(jax.vmap(flow))
    cb = jax.jit(jax.vmap(closed))
    err = max(
        float(jnp.max(jnp.abs(a - b)))
        for a, b in zip(jax.tree.leaves(cb(*batch)), jax.tree.leaves(fb(*batch)), strict=True)
    )
    return {
        "name": name,
        # Best of ~0.05 s of calls on each side: a 100 µs call needs hundreds of tries to
        # find an undisturbed one on a 2-core machine, a 2 ms call a few dozen.
        "cf1": _best(c1, *one, repeats=500),
        "df1": _best(f1, *one, repeats=20),
        "cfb": _best(cb, *batch, repeats=20) / BATCH,
        "dfb": _best(fb, *batch, repeats=3) / BATCH,
        "err": err,
    }


def _diagonal(key):
    from sims import diagonal, gradient_flow

    d = 8
    ka, kb, ks = jax.random.split(key, 3)
    sigma2 = jnp.logspace(0.0, -1.0, d)
    S = jax.random.uniform(ks, (d,), minval=0.5, maxval=2.0)
    t = jnp.linspace(0.0, 200.0, N_TIMES)
    batch = (1e-3 * jax.random.normal(ka, (BATCH, d)), 1e-3 * jax.random.normal(kb, (BATCH, d)))

    def closed(a0, b0):
        return diagonal.solve(a0, b0, sigma2, S, t).u

    def flow(a0, b0):
        p = gradient_flow(diagonal.loss, {"a": a0, "b": b0}, t, (sigma2, S), atol=1e-30)
        return p["a"] * p["b"]

    return _row("diagonal (d=8)", closed, flow, batch)


def _saxe(key):
    from sims import gradient_flow, saxe

    sigma_yx = jax.random.normal(jax.random.key(1), (3, 4))
    t = jnp.linspace(0.0, 40.0, N_TIMES)
    scales = 10 ** jax.random.uniform(key, (BATCH,), minval=-4.0, maxval=-1.0)
    inits = [saxe.aligned_init(sigma_yx, 5, float(s)) for s in scales]
    batch = (jnp.stack([i.w1 for i in inits]), jnp.stack([i.w2 for i in inits]))

    def closed(w1, w2):
        return saxe.solve(w1, w2, sigma_yx, t).network_map

    def flow(w1, w2):
        p = gradient_flow(saxe.loss, saxe.SaxeInit(w1, w2), t, sigma_yx, atol=1e-30)
        return p.w2 @ p.w1

    return _row("saxe (c=3,d=4,h=5)", closed, flow, batch)


def _lambda_balanced(key):
    from sims import gradient_flow
    from sims import lambda_balanced as lb

    d, h, c = 4, 3, 3
    sig = jax.random.normal(jax.random.key(0), (c, d))
    t = jnp.linspace(0.0, 40.0, N_TIMES)
    lam = jnp.linspace(-2.0, 2.0, BATCH)
    batch = jax.vmap(lambda k, la: lb.balanced_init(k, d, h, c, 0.1, la))(
        jax.random.split(key, BATCH), lam
    )

    def closed(W1, W2):
        return lb.solve(W1, W2, sig, t).network

    def flow(W1, W2):
        p = gradient_flow(lb.loss, {"W1": W1, "W2": W2}, t, sig)
        return p["W2"] @ p["W1"]

    return _row("lambda_balanced (d=4,h=3,c=3)", closed, flow, batch)


def _scalar_linear(key):
    from sims import gradient_flow
    from sims import scalar_linear as sl

    p = 64
    t = jnp.linspace(0.0, 20.0, N_TIMES)
    ab = 0.01 * jax.random.normal(key, (2, BATCH, p))
    batch = (ab[0], ab[1])
    args = (jnp.asarray(2.0), jnp.asarray(1.0))

    def closed(a0, b0):
        r = sl.solve(a0, b0, 2.0, t)
        return r.a, r.b

    def flow(a0, b0):
        y = gradient_flow(sl.loss, {"a": a0, "b": b0}, t, args)
        return y["a"], y["b"]

    return _row("scalar_linear (p=64)", closed, flow, batch)


def _single_neuron(key):
    from sims import single_neuron as sn

    X, y, beta_star, a0, w0, eta_a, eta_w = sn._random_cases(key, BATCH, d=3)
    t = jnp.linspace(0.0, 30.0, N_TIMES)

    def closed(a, w, ea, ew):
        r = sn.solve(a, w, beta_star, t, eta_a=ea, eta_w=ew)
        return r.a, r.w

    def flow(a, w, ea, ew):
        r = sn._reference_flow(X, y, a, w, t, ea, ew)
        return r["a"], r["w"]

    return _row("single_neuron (d=3, all δ)", closed, flow, (a0, w0, eta_a, eta_w))


def _throughput() -> list[tuple[str, float]]:
    from sims import scalar_linear as sl
    from sims import single_neuron as sn

    out = []
    n, nt = 100_000, 100
    tt = jnp.linspace(0.0, 20.0, nt)
    ka, kw = jax.random.split(jax.random.key(5))
    A0, W0 = jax.random.normal(ka, (n,)), jax.random.normal(kw, (n, 3))
    bs = jnp.ones(3) / jnp.sqrt(3.0)
    fn = jax.jit(jax.vmap(lambda a, w: sn.solve(a, w, bs, tt)))
    out.append(
        (f"single_neuron d=3, {n:,} traj x {nt} times, all outputs", _best(fn, A0, W0, repeats=3))
    )
    k1, k2 = jax.random.split(jax.random.key(6))
    S = jnp.linspace(0.5, 2.0, n)
    a0, b0 = 0.1 * jax.random.normal(k1, (n, 64)), 0.1 * jax.random.normal(k2, (n, 64))

    def sums(a, b, s):
        r = sl.solve(a, b, s, tt)
        return r.theta, r.gamma, r.theta_aligned, r.theta_antialigned

    fn = jax.jit(jax.vmap(sums))
    out.append(
        (
            f"scalar_linear p=64, {n:,} traj x {nt} times, θ, γ, mode sums",
            _best(fn, a0, b0, S, repeats=3),
        )
    )
    m = 10_000
    fn = jax.jit(jax.vmap(lambda a, b, s: sl.solve(a, b, s, tt)))
    out.append(
        (
            f"scalar_linear p=64, {m:,} traj x {nt} times, all outputs (×10 for 1e5)",
            _best(fn, a0[:m], b0[:m], S[:m], repeats=3),
        )
    )
    return out


def main() -> None:
    from nets.blas import limit_blas_threads

    limit_blas_threads()  # one OpenBLAS thread (nets/blas.py), as the CLI and the tests run
    import sys

    if "--hang" in sys.argv[1:]:
        from xla_cpu_hangs import run

        print(
            f"jax {jax.__version__}: former lambda_balanced per-time pipeline, 32 × 1000, vmapped"
        )
        run("lambda_balanced")
        return
    jax.config.update("jax_enable_x64", True)
    say = Printed()
    say(
        f"jax {jax.__version__} ({jax.default_backend()}), float64, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}; {N_TIMES} time points per trajectory"
    )
    key = jax.random.key(0)
    rows = [
        f(k)
        for f, k in zip(
            (_diagonal, _saxe, _lambda_balanced, _scalar_linear, _single_neuron),
            jax.random.split(key, 5),
            strict=True,
        )
    ]
    head = (
        f"{'model':<30} {'closed µs':>10} {'diffrax µs':>11} {'ratio':>7}   "
        f"{'closed µs':>10} {'diffrax µs':>11} {'ratio':>7}   {'max |Δ|':>8}"
    )
    say(f"{'':<30} {'----- single trajectory -----':>30}   {'--- vmap 64, per trajectory ---':>30}")
    say(head)
    for r in rows:
        say(
            f"{r['name']:<30} {r['cf1'] * 1e6:10.1f} {r['df1'] * 1e6:11.0f} "
            f"{r['df1'] / r['cf1']:6.0f}×   {r['cfb'] * 1e6:10.1f} {r['dfb'] * 1e6:11.0f} "
            f"{r['dfb'] / r['cfb']:6.0f}×   {r['err']:8.1e}"
        )
    say("throughput after compilation (target < 1 s):")
    for name, sec in _throughput():
        say(f"  {name:<66} {sec:7.3f} s")
    say(f"load average at the end {os.getloadavg()[0]:.1f}")
    if "--record" in sys.argv[1:]:
        say.record(__file__)


if __name__ == "__main__":
    main()
