"""ResNet18 training images/s on CIFAR-shaped synthetic data: lrrich (JAX) vs the same PyTorch model.

Pre-activation ResNet18 (k = 64, 11.2 M parameters, Nakkiran et al.'s ``PreActResNet18``,
``nets/models/resnet.py``) on random 32×32×3 images with random labels, cross-entropy, SGD with
momentum 0.9, batch 256 by default.

* JAX: ``nets.train`` of ``nets.get_model("resnet18")``, as a user runs it, with
  ``TrainConfig.compute_dtype`` float32 or bfloat16 (bfloat16 matmuls/convolutions; parameters,
  optimizer state and metrics float32). One epoch is one timed round of ``--steps`` steps (one
  compiled ``lax.scan``); the rate comes from ``History.records[i]["train_time"]``, which leaves
  out the first (compiling) round and the log points.
* PyTorch, the standard fast recipe: the same network in ``torch.nn`` with ``channels_last``
  memory, ``cudnn.benchmark``, ``torch.autocast`` to bfloat16 for ``bfloat16`` (AMP), eager and,
  as a second reference, ``torch.compile`` (default mode). Float32 keeps PyTorch's defaults
  (TF32 convolutions on GPU, as JAX's default precision). On a CPU the images stay NCHW
  (``channels_last`` crashed torch 2.13.0+cpu's oneDNN convolutions; see
  ``docs/findings/benchmarks.md``).

Both sides report the best round (least disturbed by other load; the median is kept beside it).
Goals on a GPU: JAX / PyTorch AMP ≥ 1.0 at the same precision, and the bfloat16 step's model FLOP
utilisation ≥ 30 % of the card's dense bfloat16 peak (:func:`resnet18_train_flops` per image ×
images/s against :data:`BF16_PEAK_TFLOPS`, or ``--peak-tflops``).

    python benchmarks/bench_resnet_gpu.py                        # both sides, both dtypes
    python benchmarks/bench_resnet_gpu.py --side torch --compile --dtype bfloat16
    JAX_PLATFORMS=cpu python benchmarks/bench_resnet_gpu.py --device cpu --batch 8 --steps 2 --width 4

``benchmarks/gpu_check.py`` runs these functions as its ResNet phases.

Results: ``benchmarks/results.md`` (``python benchmarks/bench_resnet_gpu.py --record``).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import numpy as np
from flax import nnx
from results import Printed

from nets import TrainConfig, get_model, train
from nets.data import Dataset

DTYPES = ("float32", "bfloat16")
LR = 0.01  # small enough that random labels never diverge; the rate does not depend on it

#: Dense bfloat16 tensor-core peaks in TFLOP/s (no sparsity), from NVIDIA's datasheets (SXM
#: forms unless named), matched in this order against the start of jax's ``device_kind`` with
#: its "NVIDIA " prefix removed. ``--peak-tflops`` gives any other card's.
BF16_PEAK_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H200 NVL", 835.0),
    ("H100", 989.0),
    ("H200", 989.0),
    ("GH200", 989.0),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
)


def resnet18_train_flops(width: int = 64, num_classes: int = 10, size: int = 32) -> float:
    """Model FLOPs of one training image through PreAct ResNet18-``width`` on size×size×3 inputs.

    3 × the forward pass's 2·(multiply-adds) of the convolutions (every tap of the padded
    window, as the kernels compute them) and the readout: the backward pass costs two forward
    passes (the model-FLOP convention of PaLM, Chowdhery et al. 2022, App. B). Batch norm, ReLU,
    pooling and the optimizer are left out. ``tests/test_device.py`` checks the forward count
    against the convolutions and GEMMs of the traced ``nets`` model.
    """
    if min(width, num_classes) < 1 or size < 8 or size % 8:
        raise ValueError(
            f"need width, num_classes ≥ 1 and a size divisible by 8 (three stride-2 stages), "
            f"got {width=}, {num_classes=}, {size=}"
        )
    forward = 2 * size * size * 9 * 3 * width  # the stem, 3 → k channels
    cin = width
    for stage in range(4):
        planes, r = width * 2**stage, size // 2**stage  # output resolution of the stage
        for block in range(2):
            forward += 2 * r * r * 9 * (cin + planes) * planes  # conv1 (cin → planes), conv2
            if cin != planes or (stage and not block):  # the 1×1 shortcut convolution
                forward += 2 * r * r * cin * planes
            cin = planes
    return 3.0 * (forward + 2 * 8 * width * num_classes)


def bf16_peak_tflops(device_kind: str) -> float | None:
    """The dense bfloat16 peak of a card named ``device_kind`` (:data:`BF16_PEAK_TFLOPS`), or None."""
    name = device_kind.removeprefix("NVIDIA ").strip()
    return next((peak for kind, peak in BF16_PEAK_TFLOPS if name.startswith(kind)), None)


def model_flop_utilisation(
    images_per_s: float, flops_per_image: float, peak_tflops: float | None
) -> dict:
    """``{"model_tflop_s", "peak_tflop_s", "mfu"}``: the model FLOP rate and its share of the
    peak (None where the peak is unknown)."""
    if peak_tflops is not None and not peak_tflops > 0:
        raise ValueError(f"the peak must be a positive TFLOP/s, got {peak_tflops!r}")
    rate = images_per_s * flops_per_image / 1e12
    return {
        "model_tflop_s": rate,
        "peak_tflop_s": peak_tflops,
        "mfu": None if peak_tflops is None else rate / peak_tflops,
    }


def synthetic_cifar(n: int, seed: int = 0) -> Dataset:
    """n random NHWC 32×32×3 float32 images with random labels in 10 classes (train = test)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, n).astype(np.int32)
    return Dataset(x, y, x[:256], y[:256], 10, name="synthetic-cifar")


def _rates(round_seconds: list[float], images: int) -> dict:
    return {
        "images_per_s": images / min(round_seconds),
        "median_images_per_s": images / statistics.median(round_seconds),
        "rounds": len(round_seconds),
        "round_s": round_seconds,
    }


def jax_images_per_s(
    dtype: str,
    *,
    batch: int,
    steps: int,
    rounds: int,
    width: int = 64,
    device: str = "auto",
    peak_tflops: float | None = None,
) -> dict:
    """Images/s of ``nets.train`` on ResNet18-``width``: best and median of ``rounds`` epochs.

    Returns:
      ``{"images_per_s", "median_images_per_s", "rounds", "round_s", "compile_s", "wall_s",
      "backend", "device_kind", "train_flops_per_image"}``, and for bfloat16 the model FLOP
      utilisation of the best round (:func:`model_flop_utilisation`; the card's peak from
      :func:`bf16_peak_tflops` unless ``peak_tflops`` is given); ``compile_s`` is History's
      first (compiling) round and log point.
    """
    data = synthetic_cifar(batch * steps)
    cfg = TrainConfig(loss="ce", lr=LR, momentum=0.9, batch_size=batch, epochs=rounds + 1,
                      compute_dtype=dtype)  # fmt: skip
    dev = jax.devices()[0] if device == "auto" else jax.devices(device)[0]
    t0 = time.perf_counter()
    with jax.default_device(dev):
        model = get_model("resnet18", num_classes=10, k=width, rngs=nnx.Rngs(0))
        _, hist = train(model, data, cfg, key=jax.random.key(0), log_every=steps, eval_size=batch,
                        metrics={}, progress=False)  # fmt: skip
    wall = time.perf_counter() - t0
    cumulative = [r["train_time"] for r in hist.records]  # a record after every epoch
    per_round = [b - a for a, b in zip(cumulative[1:], cumulative[2:], strict=False)]
    out = _rates(per_round, batch * steps)
    out.update(compile_s=hist.compile_time, wall_s=wall, backend=dev.platform,
               device_kind=dev.device_kind, train_flops_per_image=resnet18_train_flops(width))  # fmt: skip
    peak = peak_tflops if peak_tflops is not None else bf16_peak_tflops(dev.device_kind)
    if dtype == "bfloat16":  # the peak is bfloat16's; float32 runs at another one
        out.update(model_flop_utilisation(out["images_per_s"], out["train_flops_per_image"], peak))
    return out


def torch_resnet18(width: int = 64, num_classes: int = 10):
    """Nakkiran et al.'s ``PreActResNet18`` in ``torch.nn``, layer for layer ``nets.ResNet18``."""
    import torch
    from torch import nn

    class Block(nn.Module):  # PreActBlock: y = conv(relu(bn(conv(relu(bn(x)))))) + shortcut
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
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
            layers, cin = [], width
            for stage in range(4):
                for b in range(2):
                    layers.append(Block(cin, width * 2**stage, 2 if stage and not b else 1))
                    cin = width * 2**stage
            self.layers, self.head = nn.Sequential(*layers), nn.Linear(8 * width, num_classes)

        def forward(self, x):
            out = torch.nn.functional.avg_pool2d(self.layers(self.conv1(x)), 4)
            return self.head(out.flatten(1))

    return Net()


def torch_images_per_s(
    dtype: str,
    *,
    batch: int,
    steps: int,
    rounds: int,
    width: int = 64,
    compiled: bool = False,
    device: str = "auto",
) -> dict:
    """Images/s of PyTorch's recipe on the same network: best and median of ``rounds`` rounds.

    Returns:
      ``{"images_per_s", "median_images_per_s", "rounds", "round_s", "warmup_s", "device",
      "memory_format", "cudnn_allow_tf32", "matmul_allow_tf32"}``; ``warmup_s`` holds ``torch.compile``'s
      compilation when ``compiled``.
    """
    import torch
    from torch import nn

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device("cuda" if device == "gpu" else device)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    layout = torch.channels_last if dev.type == "cuda" else torch.contiguous_format  # docstring
    model = torch_resnet18(width).to(dev, memory_format=layout)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    net = torch.compile(model) if compiled else model
    data = synthetic_cifar(batch)
    x = torch.from_numpy(data.x_train).permute(0, 3, 1, 2).to(dev)
    x = x.contiguous(memory_format=layout)
    y = torch.from_numpy(data.y_train).long().to(dev)
    low = dtype == "bfloat16"

    def one():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=low):
            loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    for _ in range(3):  # cudnn autotuning, and torch.compile's compilation
        one()
    sync()
    warmup = time.perf_counter() - t0
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = one()
        sync()
        times.append(time.perf_counter() - t0)
    if not torch.isfinite(loss):
        raise FloatingPointError(f"PyTorch loss became {float(loss)}")
    out = _rates(times, batch * steps)
    out.update(
        warmup_s=warmup,
        device=str(dev),
        memory_format=str(layout).removeprefix("torch."),
        cudnn_allow_tf32=bool(torch.backends.cudnn.allow_tf32),
        matmul_allow_tf32=bool(torch.backends.cuda.matmul.allow_tf32),
    )
    return out


def main() -> None:
    from nets.blas import limit_blas_threads

    limit_blas_threads()  # one OpenBLAS thread (nets/blas.py), as the CLI and the tests run
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    parser.add_argument("--dtype", choices=(*DTYPES, "both"), default="both")
    parser.add_argument("--side", choices=("jax", "torch", "both"), default="both")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (best is reported)")
    parser.add_argument("--width", type=int, default=64, help="k of ResNet18-k")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="the card's dense bfloat16 peak (default: BF16_PEAK_TFLOPS)")  # fmt: skip
    parser.add_argument("--record", action="store_true", help="write benchmarks/results.md")
    args = parser.parse_args()
    say = Printed()
    size = dict(batch=args.batch, steps=args.steps, rounds=args.rounds, width=args.width)
    dtypes = DTYPES if args.dtype == "both" else (args.dtype,)
    say(f"ResNet18 (PreAct, k={args.width}), batch {args.batch}, SGD momentum, images/s (best)")
    for dtype in dtypes:
        rates = {}
        if args.side in ("jax", "both"):
            rates["lrrich (JAX)"] = jax_images_per_s(
                dtype, device=args.device, peak_tflops=args.peak_tflops, **size
            )
        if args.side in ("torch", "both"):
            try:
                rates["PyTorch eager"] = torch_images_per_s(dtype, device=args.device, **size)
                if args.compile:
                    rates["PyTorch compiled"] = torch_images_per_s(
                        dtype, device=args.device, compiled=True, **size
                    )
            except ImportError:
                say("  PyTorch not installed")
        for name, r in rates.items():
            say(f"  {dtype:9s} {name:17s}: {r['images_per_s']:9.1f}")
        jx = rates.get("lrrich (JAX)", {})
        if "model_tflop_s" in jx:
            share = (
                f"{jx['mfu']:.1%} of the {jx['peak_tflop_s']:.0f} TFLOP/s dense bfloat16 peak"
                if jx["mfu"] is not None
                else f"peak of {jx['device_kind']!r} unknown (--peak-tflops)"
            )
            say(f"  {dtype:9s} model FLOPs: {jx['model_tflop_s']:.1f} TFLOP/s = {share} "
                "(goal ≥ 30 %)")  # fmt: skip
        if "lrrich (JAX)" in rates and "PyTorch eager" in rates:
            ratio = rates["lrrich (JAX)"]["images_per_s"] / rates["PyTorch eager"]["images_per_s"]
            say(f"  {dtype:9s} ratio JAX / PyTorch eager = {ratio:.2f}  (goal ≥ 1.0)")
    if args.record:
        say.record(__file__)


if __name__ == "__main__":
    main()
