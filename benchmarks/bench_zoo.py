"""Training steps/s on CPU: LeNet-5 and the grokking transformer, Flax NNX vs PyTorch.

Same model (PyTorch defaults on both sides), batch 512, AdamW, cross-entropy, float32; the
JAX step is one jitted function on split (graphdef, params, rest) state with donated buffers.
Rounds alternate between the two frameworks so machine-load swings hit both; the median step
time per framework is reported with the ratio JAX/PyTorch in steps/s (> 1: JAX faster).

    python benchmarks/bench_zoo.py [--steps 20] [--rounds 3]

Needs ``torch`` (benchmark-only dependency: ``pip install torch==2.13.0``, the CPU wheel).

Target: ratio ≥ 1.0 for both; every number idle on the 2-core CPU unless stated.
Each JAX model is timed twice: one jitted step per call (synchronised every step, like PyTorch's
``loss.item()``), and a ``lax.scan`` of ``--steps`` steps per call, which is how ``nets.train``
runs the steps between log points.

**Current (2026-11-24, commit cdc3f2e; jax 0.10.2, torch 2.13.0 CPU, 5 rounds, three runs): LeNet-5 43.5–47.5 steps/s
vs PyTorch 39.5–41.3, ratio 1.10–1.16 (scanned 1.13–1.20); transformer 15.9–25.0 vs 17.6–22.1,
ratio 0.78–1.13 per step, 1.11–1.22 scanned.** The per-step transformer ratio swings with the
~3–5 ms of Python dispatch per call (its 270 parameter and optimizer leaves); the scan pays it
once per 20 steps. History: LeNet-5 0.17 / transformer 0.82 when the target was set (2026-11-24, commit
cf519a7, under load); 0.45–0.51 / 0.62–0.66 with the compile options (2026-11-24, commit cc95a17). The MLP of bench_training.py: 1.15× PyTorch.

What moved them on 2026-11-24 (commits 3e75ab6, 6c8cc77), each kept because it measured faster and gives the same values:

* LeNet-5 0.47 → 1.1: conv → ReLU → 2×2 max-pool as *one* convolution on the pooling windows
  (:mod:`nets.models.conv_pool`: space-to-depth of the image, the kernel scattered into a
  blocked (K, K, b²C, b²O) kernel, the pool a max over channel groups). XLA:CPU's im2col GEMM for
  C = 1 → O = 6 (inner size 25, width 6) is too thin; the blocked one is 36 × 24 (conv1) and
  216 × 64 (conv2) at 1.44× the multiply-adds. Step 44–46 → 24.5 ms; applying bias and ReLU after
  the max (they commute with it) → 21.4 ms. Forward + gradient: conv1 22.3 → 9.4 ms, conv2 20.1
  → 11.8 ms. Explicit im2col + one GEMM (the patches materialised) was slower: 20 vs 9 ms for
  conv1. Tested against Flax's conv + reduce_window pooling and PyTorch's LeNet-5 (float64).
* Transformer 0.62 → ~0.9 per step: the last block computes only the last position, the one
  the readout reads (its attention still reads every key and value): ~31 % fewer FLOPs.
* **Scanned steps of conv nets were ~18× slower than these jitted ones** before that change:
  XLA:CPU leaves jax's convolution gradients (permuted dimension numbers) as naive loop nests
  inside a ``while`` body — LeNet-5 ~400 ms per step in ``nets.train``, one 3×3 stride-2 ResNet
  kernel gradient 4.4 s instead of 47 ms. :func:`nets.xla_cpu.loop_friendly` writes both gradients
  in NHWC/HWIO form (``custom_vjp``, CPU only), and nets trains a copy with it
  (``loop_friendly``). This benchmark's steps now use that copy too, as nets does.

What moved LeNet-5 from 0.20 to ~0.47 (2026-11-24, commit 23e766b) — the XLA:CPU compile options of :mod:`nets.compiler`. jaxlib
0.10 hands single dots, single convolutions *and* reductions to YNNPACK by default. Keeping it for
the dots only (``xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT``), LeNet-5
step 108–117 → 44–46 ms: conv1 (512×32×32×1 → 6) forward + weight gradient 68 → 19 ms, conv2
(14×14×6 → 16) 15 → 6.1 ms, the pool gradient 9.9 → 1.4 ms. Dropping only the convolution left
61 ms, only the reduction ~60 ms. The options are passed per program (``jax.jit(...,
compiler_options=...)``; this script's step takes them as nets does, for convolutional models
only), so nothing global is set. Same results to float32 round-off (tests/nets/test_compiler.py).
MLP (bench_training.py, bench_vmap_sweep.py) and transformer steps: unchanged within 3 % with
them, while D_LR's small reductions get slower (1.5 → 1.9 ms at 384 × 512), hence conv only.

Flags measured idle on 2026-11-24 (LeNet-5 / transformer ms per step, best of 5×10 steps): none
108 / 68; ``--xla_cpu_use_onednn=true`` 110 / 67; ``xnn_fusion_type=dot`` 110 / 68,
``=dot,eltwise,reduce`` 112 / 70; ``xnn_graph_fusion_mode=GREEDY`` 113 / 68; ``onednn_fusion_type=dot``
110 / 67; ``prefer_vector_width=512`` 111 / 67; ``use_xnnpack=false`` 111 / 68; ``ynn_fusion_type``
``=individual_dot`` 44–48 / 67, ``=dot`` 46 / 68, ``=dot,eltwise`` 65 / 120. (The first measurement,
2026-11-24, commit cf519a7, tried flags under a load average of 10–13 and found no consistent win: that load hid the effect.)
With the options, for the transformer: ``multi_thread_eigen=false`` 73, ``use_fusion_emitters=
false`` 74, ``enable_concurrency_optimized_scheduler=false`` 73 ms against 67–70: no help.

Tried for LeNet-5 after the options, not kept:

* conv1 (one input channel) as a sum of 25 shifted, scaled copies with ``lax``'s gradients
  (``custom_vjp``): forward 1.2 ms vs 14 ms alone, but XLA:CPU fuses the sum into the ReLU/pool
  consumers and recomputes it there (forward + ReLU + pool 13 ms, with gradient 35 vs 23 ms).
  ``optimization_barrier`` does not stop the fusion; a stack + sum is simplified back to the adds.
* conv1 as one GEMM with a Toeplitz matrix per kernel row ((n·32, 32) × (32, 5·28·6), then 5
  shifted adds): forward 19.5 vs 13.8 ms (the K = 32 GEMM does 5× the convolution's FLOPs).
* conv2's input gradient as one GEMM + 25 shifted adds (col2im): 8.5 vs 12.3 ms alone, ~4 ms of the
  44 ms step, not worth its own convolution code.
* First measurement (2026-11-24, under load): im2col and ``conv_general_dilated_patches`` + GEMM (slower); max-pooling
  as reshape + max (:func:`nets.models.layers.pool2d`, elementwise gradient) — **kept**.

Transformer: the GEMMs are not the gap — (2048, 128) × (128, 512) and the other step shapes run
at 206–214 GFLOP/s in XLA and 189–205 in PyTorch, i.e. ~23 ms of the 67 ms step for its ~4.8
GFLOP. The rest is ~40 ms of elementwise work and small kernels. Ablations, ms per step:
base 67, exact GELU → ReLU 62, tanh GELU 65, no LayerNorm 64, no attention core (qkv/softmax/
weighted sum) 51. Attention as broadcast-multiply-reduce instead of two einsums: 0.40 vs 0.67 ms
forward and 0.9 vs 2.0 ms gradient per layer alone, but the whole step is the same within noise
(65–70 vs 66–67 ms), so the einsums stay.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch
from flax import nnx
from torch import nn

from nets.models import LeNet5, Transformer
from nets.xla_cpu import has_convolution, jit, loop_friendly

BATCH = 512
P = 97  # modular division mod 97: tokens "a ∘ b =", vocabulary p + 2
ADAMW = dict(lr=1e-3, betas=(0.9, 0.98), weight_decay=1.0)  # teddykoker/grokking's optimiser


# ----------------------------------------------------------------------------------- PyTorch


class TorchLeNet5(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 6, 5), nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.head = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2).flatten(1)
        return self.head(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class TorchDecoderBlock(nn.Module):  # teddykoker/grokking ``DecoderBlock``
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d, heads)
        self.self_attn_norm = nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.ffn_norm = nn.LayerNorm(d)

    def forward(self, x):
        mask = torch.triu(torch.full((len(x), len(x)), -float("inf")), diagonal=1)
        a, _ = self.self_attn(x, x, x, attn_mask=mask, need_weights=False)
        a = self.self_attn_norm(x + a)
        return self.ffn_norm(a + self.ffn(a))


class TorchTransformer(nn.Module):  # teddykoker/grokking ``Transformer``
    def __init__(self, vocab: int, d: int = 128, heads: int = 4, layers: int = 2, max_len: int = 5):
        super().__init__()
        self.token_embeddings = nn.Embedding(vocab, d)
        self.position_embeddings = nn.Embedding(max_len, d)
        blocks = [TorchDecoderBlock(d, heads) for _ in range(layers)]
        self.model = nn.Sequential(*blocks, nn.LayerNorm(d), nn.Linear(d, vocab))

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1])
        x = self.token_embeddings(tokens) + self.position_embeddings(pos)[None]
        return self.model(x.transpose(0, 1))[-1]


def torch_stepper(model: nn.Module, x: np.ndarray, y: np.ndarray):
    opt = torch.optim.AdamW(model.parameters(), **ADAMW)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        return loss.item()

    return step


# --------------------------------------------------------------------------------------- JAX


def jax_stepper(model: nnx.Module, x: np.ndarray, y: np.ndarray, chunk: int = 1):
    """A callable running ``chunk`` AdamW steps per call and returning the last loss.

    ``chunk = 1``: one jitted step per call, synchronised like PyTorch's ``loss.item()``.
    ``chunk > 1``: a ``lax.scan`` of ``chunk`` steps per call, as ``nets.train`` runs its
    steps between log points. Both compile as nets does: the training copy from
    :func:`nets.xla_cpu.loop_friendly`, :func:`nets.compiler.jit` with the CPU options
    for convolutional models.
    """
    conv = has_convolution(model)
    graphdef, params, rest = nnx.split(loop_friendly(model), nnx.Param, ...)
    opt = optax.adamw(ADAMW["lr"], *ADAMW["betas"], weight_decay=ADAMW["weight_decay"])
    opt_state = opt.init(params)
    xj, yj = jnp.asarray(x), jnp.asarray(y)

    def one_step(carry, _):
        params, opt_state = carry

        def loss_fn(p):
            logits = nnx.merge(graphdef, p, rest)(xj)
            return optax.softmax_cross_entropy_with_integer_labels(logits, yj).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    def train_steps(params, opt_state):
        if chunk == 1:
            return one_step((params, opt_state), None)
        carry, losses = jax.lax.scan(one_step, (params, opt_state), None, length=chunk)
        return carry, losses[-1]

    train_steps = jit(train_steps, donate_argnums=(0, 1), options_if=lambda *a, **k: conv)
    state = [(params, opt_state)]

    def step():
        state[0], loss = train_steps(*state[0])
        return float(loss)

    return step


def _time(step, n: int, chunk: int = 1) -> float:
    t0 = time.perf_counter()
    for _ in range(n // chunk):
        loss = step()  # float(loss) / loss.item() synchronise every call
    assert np.isfinite(loss)
    return (time.perf_counter() - t0) / n


def compare(name: str, model_fn, torch_step, x, y, steps: int, rounds: int) -> tuple[float, float]:
    """Median steps/s of JAX per step, JAX scanned (``steps`` per call) and PyTorch, alternating."""
    jax_step, jax_scan = jax_stepper(model_fn(), x, y), jax_stepper(model_fn(), x, y, steps)
    for s in (jax_step, jax_scan, torch_step):  # compile / warm up
        s(), s()
    tj, ts, tt = [], [], []
    for _ in range(rounds):
        tj.append(_time(jax_step, steps))
        ts.append(_time(jax_scan, steps, steps))
        tt.append(_time(torch_step, steps))
    sj, ss, st = (1 / statistics.median(t) for t in (tj, ts, tt))
    print(
        f"{name:<24s} jax {sj:6.1f} steps/s (scan {ss:6.1f})   torch {st:6.1f} steps/s   "
        f"ratio {sj / st:5.2f} (scan {ss / st:5.2f})"
    )
    return sj / st, ss / st


def main() -> None:
    from nets.blas import limit_blas_threads

    limit_blas_threads()  # one OpenBLAS thread (nets/blas.py), as the CLI and the tests run
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per framework")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(
        f"jax {jax.__version__} ({jax.devices()[0].platform}), torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), batch {BATCH}, AdamW"
    )

    images = rng.standard_normal((BATCH, 32, 32, 1), dtype=np.float32)
    labels = rng.integers(0, 10, BATCH)
    torch.manual_seed(0)
    compare(
        "LeNet-5 (32x32x1)",
        lambda: LeNet5(rngs=nnx.Rngs(0)),
        torch_stepper(TorchLeNet5(), np.ascontiguousarray(images.transpose(0, 3, 1, 2)), labels),
        images,
        labels,
        args.steps,
        args.rounds,
    )

    a, b = rng.integers(0, P, BATCH), rng.integers(1, P, BATCH)
    tokens = np.stack([a, np.full(BATCH, P), b, np.full(BATCH, P + 1)], axis=1)
    answers = rng.integers(0, P, BATCH)
    compare(
        "transformer (2L, d=128)",
        lambda: Transformer(P + 2, rngs=nnx.Rngs(0)),
        torch_stepper(TorchTransformer(P + 2), tokens, answers),
        tokens,
        answers,
        args.steps,
        args.rounds,
    )


if __name__ == "__main__":
    main()
