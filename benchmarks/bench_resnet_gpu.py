"""ResNet18 training images/s on CIFAR-shaped synthetic data: lrrich (JAX) vs the same PyTorch model.

Pre-activation ResNet18 (k = 64, 11.2 M parameters, Nakkiran et al.'s ``PreActResNet18``) on
random 32×32×3 images, cross-entropy, SGD with momentum 0.9, batch 256 by default. The JAX side is
the library's own compiled step (``nets.step.run_jit``: a ``lax.scan`` of the pure step) with
``TrainConfig.compute_dtype`` float32 or bfloat16 (bfloat16 matmuls/convolutions, float32
parameters, optimizer state and metrics); the PyTorch side is the same network in ``torch.nn``
(channels-last, ``torch.autocast`` to bfloat16 for ``--dtype bfloat16``). Target on a GPU: ratio
JAX/PyTorch ≥ 1.0.

    python benchmarks/bench_resnet_gpu.py --device gpu [--dtype bfloat16] [--batch 256]
    python benchmarks/bench_resnet_gpu.py --device cpu --batch 8 --steps 2   # smoke test

``--device gpu`` needs a CUDA build of jax (``pip install -U "jax[cuda12]"``) and of torch.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nets import ResNet18, TrainConfig
from nets.step import build, run_jit


def jax_images_per_s(device: str, dtype: str, batch: int, steps: int, rounds: int) -> float:
    dev = jax.devices("gpu" if device == "gpu" else "cpu")[0]
    with jax.default_device(dev):
        cfg = TrainConfig(loss="ce", lr=0.1, momentum=0.9, batch_size=batch, steps=steps,
                          compute_dtype=dtype)  # fmt: skip
        program, state, hp = build(
            ResNet18(rngs=nnx.Rngs(0)), cfg, num_classes=10, steps_per_epoch=1, total_steps=steps
        )
        rng = np.random.default_rng(0)
        x = jnp.asarray(rng.standard_normal((batch, 32, 32, 3), dtype=np.float32))
        y = jnp.asarray(rng.integers(0, 10, batch).astype(np.int32))
        idx = jnp.tile(jnp.arange(batch, dtype=jnp.int32), (steps, 1))
        key = jax.random.key(0)
        state, losses = run_jit(program, state, x, y, idx, key, hp)  # compile
        losses.block_until_ready()
        best = float("inf")
        for _ in range(rounds):
            t0 = time.perf_counter()
            state, losses = run_jit(program, state, x, y, idx, key, hp)
            losses.block_until_ready()
            best = min(best, time.perf_counter() - t0)
        assert np.all(np.isfinite(np.asarray(losses)))
    return steps * batch / best


def torch_images_per_s(device: str, dtype: str, batch: int, steps: int, rounds: int) -> float:
    import torch
    from torch import nn

    class Block(nn.Module):  # Nakkiran et al.'s PreActBlock
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.bn1, self.bn2 = nn.BatchNorm2d(cin), nn.BatchNorm2d(cout)
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.shortcut = (
                nn.Conv2d(cin, cout, 1, stride, bias=False) if stride != 1 or cin != cout else None
            )

        def forward(self, x):
            out = torch.relu(self.bn1(x))
            sc = self.shortcut(out) if self.shortcut is not None else x
            out = self.conv2(torch.relu(self.bn2(self.conv1(out))))
            return out + sc

    class Net(nn.Module):
        def __init__(self, k=64):
            super().__init__()
            self.conv1 = nn.Conv2d(3, k, 3, 1, 1, bias=False)
            layers, cin = [], k
            for stage in range(4):
                for b in range(2):
                    layers.append(Block(cin, k * 2**stage, 2 if stage and not b else 1))
                    cin = k * 2**stage
            self.layers, self.head = nn.Sequential(*layers), nn.Linear(8 * k, 10)

        def forward(self, x):
            out = torch.nn.functional.avg_pool2d(self.layers(self.conv1(x)), 4)
            return self.head(out.flatten(1))

    dev = torch.device("cuda" if device == "gpu" else "cpu")
    torch.manual_seed(0)
    model = Net().to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(batch, 3, 32, 32, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,), device=dev)
    low = dtype == "bfloat16"

    def one():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=low):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(2):
        one()
    sync()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = one()
        sync()
        best = min(best, time.perf_counter() - t0)
    assert torch.isfinite(loss)
    return steps * batch / best


def main() -> None:
    from nets.blas import limit_blas_threads

    limit_blas_threads()  # one OpenBLAS thread (nets/blas.py), as the CLI and the tests run
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (best is reported)")
    args = parser.parse_args()
    a = (args.device, args.dtype, args.batch, args.steps, args.rounds)
    jx = jax_images_per_s(*a)
    print(f"ResNet18 (PreAct, k=64), batch {args.batch}, SGD momentum, {args.dtype}, {args.device}")
    print(f"  lrrich (JAX {jax.__version__}): {jx:9.1f} images/s")
    try:
        th = torch_images_per_s(*a)
    except ImportError:
        print("  PyTorch not installed")
        return
    print(f"  PyTorch                : {th:9.1f} images/s")
    print(f"  ratio JAX / PyTorch = {jx / th:.2f}  (target ≥ 1.0)")


if __name__ == "__main__":
    main()
