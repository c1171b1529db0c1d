"""Training steps/s of the MLP: lrrich (JAX/Flax, scanned jitted steps) vs the same model in PyTorch.

Same architecture (784 → 512 → 512 → 10, ReLU, PyTorch init), batch 128, SGD with momentum 0.9,
MSE on one-hot targets, float32, random MNIST-shaped data held in memory. PyTorch is a
benchmark-only dependency (``pip install torch==2.13.0``). Run::

    python benchmarks/bench_training.py [--steps 600] [--record]

Results: ``benchmarks/results.md`` (``python benchmarks/bench_training.py --record``).
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np
from flax import nnx
from results import Printed

from nets import MLP, TrainConfig, train
from nets.data import Dataset

SIZES = (784, (512, 512), 10)


def _data(n: int = 6400, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    x = rng.random((n, SIZES[0]), dtype=np.float32)
    y = rng.integers(0, SIZES[2], n).astype(np.int32)
    return Dataset(x, y, x[:256], y[:256], num_classes=SIZES[2])


def jax_steps_per_s(data: Dataset, steps: int, batch: int) -> float:
    cfg = TrainConfig(lr=0.01, momentum=0.9, batch_size=batch, steps=steps)
    model = MLP(*SIZES, rngs=nnx.Rngs(0))
    spe = len(data.x_train) // batch
    # log at epoch ends only: the first epoch (compilation) is excluded from train_time
    _, hist = train(
        model,
        data,
        cfg,
        key=jax.random.key(0),
        log_every=spe,
        metrics={},
        progress=False,
        eval_size=256,
    )
    return (steps - spe) / hist.train_time


def torch_steps_per_s(data: Dataset, steps: int, batch: int) -> float:
    import torch

    torch.manual_seed(0)
    d_in, hidden, d_out = SIZES
    dims = [d_in, *hidden]
    layers = []
    for a, b in zip(dims[:-1], dims[1:], strict=True):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(dims[-1], d_out))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.from_numpy(data.x_train)
    t = torch.nn.functional.one_hot(torch.from_numpy(data.y_train).long(), d_out).float()
    n, spe = len(x), len(x) // batch
    loss_fn = torch.nn.MSELoss()

    def epoch_steps(count: int, seed: int) -> None:
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        for j in range(count):
            idx = perm[(j % spe) * batch : (j % spe + 1) * batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx]), t[idx])
            loss.backward()
            opt.step()

    epoch_steps(spe, 0)  # warm-up, as the JAX compile epoch
    t0 = time.perf_counter()
    done = 0
    while done < steps - spe:
        k = min(spe, steps - spe - done)
        epoch_steps(k, done + 1)
        done += k
    return done / (time.perf_counter() - t0)


def main() -> None:
    from nets.blas import limit_blas_threads

    limit_blas_threads()  # one OpenBLAS thread (nets/blas.py), as the CLI and the tests run
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--record", action="store_true", help="write benchmarks/results.md")
    args = parser.parse_args()
    say = Printed()
    data = _data()
    jx = jax_steps_per_s(data, args.steps, args.batch)
    try:
        import torch

        # best of 1 thread and all cores: OpenMP spinning can collapse on a loaded machine
        rates = {}
        for threads in sorted({1, os.cpu_count() or 1}):
            torch.set_num_threads(threads)
            rates[threads] = torch_steps_per_s(data, args.steps, args.batch)
        best = max(rates, key=rates.get)
        th = rates[best]
    except ImportError:
        say(f"MLP {SIZES}, batch {args.batch}: lrrich {jx:.0f} steps/s; torch not installed")
        if args.record:
            say.record(__file__)
        return
    say(f"MLP {SIZES}, batch {args.batch}, SGD momentum, MSE, float32, {jax.devices()[0].platform}")
    say(f"  lrrich (JAX) : {jx:8.1f} steps/s")
    for threads, rate in rates.items():
        say(f"  PyTorch {torch.__version__}, {threads} thread(s): {rate:8.1f} steps/s")
    say(f"  ratio JAX / best PyTorch = {jx / th:.2f}  (target ≥ 1.0)")
    if args.record:
        say.record(__file__)


if __name__ == "__main__":
    main()
