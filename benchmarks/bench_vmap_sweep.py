"""A sweep as one program: 16 digits-MLP runs (4 seeds × 4 learning rates), vmapped vs sequential.

``nets.train_many`` trains the 16 runs as one ``jax.vmap``-ed program (stacked states and traced
hyper-parameters). Three ways to run the same sweep, each logging the same 11 points per run
(with D_LR), wall clock:

* one process per point (what ``lrrich sweep`` does without ``--vmap``, and what every call paid
  before the hyper-parameters were traced): 16 × a fresh first call (compilation + run), measured
  as the first ``train`` call of this process;
* 16 sequential ``train`` calls in one process: since lr is traced they share one compiled
  program, so only the first compiles;
* ``train_many``: one compilation, one program for the 16 runs.

The final parameters agree to float32 round-off (printed; ``tests/nets/test_step.py`` checks it).
Measured on the shared 2-core CPU under heavy load (hidden 32): one process per point
16 × 8.3 s = 133 s, train_many 9.8 s first call (13.6×); warm, sequential in-process 0.71 s vs
train_many 0.82 s (0.9×): on XLA:CPU a single small run already keeps the cores busy, and the vmapped
(batched) GEMMs and ``eigh`` of the log points are no faster per run than the unbatched ones,
so in one process the gain over warm sequential calls is the compile sharing. On an accelerator
a single small run leaves the device idle and the vmapped program is where the gain lies.

    python benchmarks/bench_vmap_sweep.py [--hidden 32] [--epochs 10]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import jax
import numpy as np
from flax import nnx

from nets import MLP, TrainConfig, load_digits, train, train_many

SEEDS = (0, 1, 2, 3)
LRS = (0.02, 0.05, 0.1, 0.2)


def main() -> None:
    from nets.blas import limit_blas_threads

    limit_blas_threads()  # one OpenBLAS thread (nets/blas.py), as the CLI and the tests run
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=32, help="hidden width of the 1-layer MLP")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
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
    print(
        f"{len(runs)} runs: MLP 64-{args.hidden}-10, {args.epochs} epochs of batch {args.batch} "
        f"on digits, {len(hists[0].records)} log points each, {jax.default_backend()}"
    )
    R = len(runs)
    print(f"  one process per point : {R * t_first:7.2f} s  ({R} x {t_first:.2f} s first call)")
    print(f"  sequential, in-process: {t_seq:7.2f} s  (compiled program reused)")
    print(f"  train_many, first call: {t_vmap_first:7.2f} s  (warm: {t_vmap:.2f} s)")
    print(f"  ratio per-process / train_many = {R * t_first / t_vmap_first:.1f}x  (target ≥ 5)")
    print(f"  ratio sequential in-process / warm train_many = {t_seq / t_vmap:.1f}x")
    print(f"  max |Δθ| between the two = {diff:.2e}; test acc {min(acc):.3f}–{max(acc):.3f}")


if __name__ == "__main__":
    main()
