"""Benchmark: multilinear skill-model simulation and the jitted sparse-parity MLP training step.

Prints (1) the loss curve of N = 10^5 skills at 10^3 times (target < 1 s on CPU) against a
baseline that materialises the full (T, N) array, and (2) MLP training steps/s with batches
generated on device, against a baseline that samples each batch eagerly and feeds it in.

    python benchmarks/bench_skills.py [--record]

Results: ``benchmarks/results.md`` (``python benchmarks/bench_skills.py --record``).
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from results import Printed

from nets.data.sparse_parity import make_sparse_parity, sample_sparse_parity
from nets.models import MLP
from sims import skills

say = Printed()


def _best(f, n=3):
    f()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def bench_skill_model():
    P = skills.skill_frequencies(0.5, 100_000)
    t = jnp.logspace(0, 6, 1000)
    streamed = jax.jit(lambda t: skills.loss_curve(1e-3, 1.0, P, t))
    full = jax.jit(lambda t: skills.solve(1e-3, 1.0, P, t).loss)
    a = _best(lambda: streamed(t).block_until_ready())
    b = _best(lambda: full(t).block_until_ready())
    say(
        f"skill model N=1e5 x T=1e3: loss_curve {a:.3f} s, solve (full (T,N) array) {b:.3f} s, "
        f"ratio {b / a:.2f}x"
    )


def bench_mlp(width=1000, batch=4000, steps=50):
    task = make_sparse_parity(jax.random.key(0), 5, 32, 3, 0.6, 5.0, dtype=jnp.float32)
    model = MLP(
        task.in_dim, (width,), 1, activation="relu", init="normal", init_std=0.01, rngs=nnx.Rngs(0)
    )
    graphdef, params = nnx.split(model)
    opt = optax.sgd(0.05)
    state = opt.init(params)

    def grad_step(p, s, x, y):
        g = jax.grad(lambda q: 0.5 * jnp.mean((nnx.merge(graphdef, q)(x)[:, 0] - y) ** 2))(p)
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s

    @jax.jit
    def on_device(p, s, key):
        def body(c, k):
            b = sample_sparse_parity(k, task, batch)
            return grad_step(*c, b.x, b.y), None

        return jax.lax.scan(body, (p, s), jax.random.split(key, steps))[0]

    fed = jax.jit(grad_step)

    def host_loop(p, s):
        for i in range(steps):
            b = sample_sparse_parity(jax.random.key(i), task, batch)  # eager, dispatched per step
            p, s = fed(p, s, b.x, b.y)
        return jax.block_until_ready(p)

    a = _best(lambda: jax.block_until_ready(on_device(params, state, jax.random.key(1))), 2)
    b = _best(lambda: host_loop(params, state), 2)
    say(
        f"MLP width {width} batch {batch}: on-device data {steps / a:.1f} steps/s, "
        f"per-step eager sampling {steps / b:.1f} steps/s, ratio {b / a:.2f}x"
    )


if __name__ == "__main__":
    bench_skill_model()
    bench_mlp()
    bench_mlp(width=512, batch=2000, steps=100)
    if "--record" in sys.argv[1:]:
        say.record(__file__)
