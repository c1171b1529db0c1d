"""Seconds per training step of the grokking transformer on the CPU (target: about 0.1 s).

The model of the ``grokking-transformer`` experiment (2 layers, d = 128, 4 heads, p = 97, batch
512, AdamW, cross-entropy, float32). Measured in the same run:

* baseline: a hand-written ``jax.jit`` step (``nnx.split`` state, ``value_and_grad``, optax
  AdamW), called once per step;
* ``nets.train``: the library's scanned, donated training loop (what the experiment runs);
* one log point of the experiment: forward pass over the 4,656 train and 4,656 test equations
  plus D_LR of both (``metrics.dlr``), in units of the baseline step.

Run::

    python benchmarks/bench_grokking_step.py [--steps 40] [--record]

Results: ``benchmarks/results.md`` (``python benchmarks/bench_grokking_step.py --record``).
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from results import Printed

from metrics import dlr
from nets import TrainConfig, Transformer, train
from nets.data import load

P, BATCH = 97, 512


def _model() -> Transformer:
    return Transformer(P + 2, num_classes=P, rngs=nnx.Rngs(0))


def baseline_seconds_per_step(data, steps: int) -> float:
    """Plain jitted step, one dispatch per step."""
    graphdef, params = nnx.split(_model())
    tx = optax.adamw(1e-3, b1=0.9, b2=0.98, weight_decay=1.0)
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state, xb, yb):
        def loss(pr):
            logits = nnx.merge(graphdef, pr)(xb)
            return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()

        value, grads = jax.value_and_grad(loss)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    rng = np.random.default_rng(0)
    batches = [rng.choice(len(data.x_train), BATCH, replace=False) for _ in range(steps + 1)]
    x, y = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
    params, opt_state, v = step(params, opt_state, x[batches[0]], y[batches[0]])  # compile
    v.block_until_ready()
    t0 = time.perf_counter()
    for idx in batches[1:]:
        params, opt_state, v = step(params, opt_state, x[idx], y[idx])
    v.block_until_ready()
    return (time.perf_counter() - t0) / steps


def library_seconds_per_step(data, steps: int) -> float:
    """``nets.train`` as the experiment calls it (no logging in between)."""
    spe = len(data.x_train) // BATCH
    total = spe * (1 + max(steps // spe, 1))
    cfg = TrainConfig(
        loss="ce",
        optimizer="adamw",
        lr=1e-3,
        b1=0.9,
        b2=0.98,
        weight_decay=1.0,
        warmup_steps=10,
        batch_size=BATCH,
        steps=total,
    )
    # The first epoch (compilation) is excluded from train_time.
    _, hist = train(
        _model(),
        data,
        cfg,
        key=jax.random.key(0),
        log_every=spe,
        metrics={},
        progress=False,
        eval_size=256,
    )
    return hist.train_time / (total - spe)


def log_point_seconds(data) -> float:
    """Features/outputs of the full train and test sets and their D_LR."""
    model = _model()
    forward = nnx.jit(lambda m, x: (lambda f: (f, m.head(f)))(m.features(x)))
    xs = (jnp.asarray(data.x_train), jnp.asarray(data.x_test))
    for x in xs:  # compile
        f, o = forward(model, x)
        float(dlr(f, o))
    t0 = time.perf_counter()
    for x in xs:
        f, o = forward(model, x)
        float(dlr(f, o))
    return time.perf_counter() - t0


def main() -> None:
    from nets.blas import limit_blas_threads

    limit_blas_threads()  # one OpenBLAS thread (nets/blas.py), as the CLI and the tests run
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--record", action="store_true", help="write benchmarks/results.md")
    args = ap.parse_args()
    say = Printed()
    data = load("modular_division", p=P, train_fraction=0.5)
    base = baseline_seconds_per_step(data, args.steps)
    lib = library_seconds_per_step(data, args.steps)
    log = log_point_seconds(data)
    say(f"CPU cores visible: {os.cpu_count()}, backend {jax.default_backend()}")
    say(f"baseline jitted step      : {base:.4f} s/step")
    say(f"nets.train scanned step   : {lib:.4f} s/step   ratio {lib / base:.2f}x baseline")
    say(f"one log point (2×4656+D_LR): {log:.3f} s        = {log / base:.1f} baseline steps")
    say(f"3,000 steps ≈ {3000 * lib / 60:.1f} min of training (+ log points)")
    if args.record:
        say.record(__file__)


if __name__ == "__main__":
    main()
