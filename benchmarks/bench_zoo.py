"""Training steps/s on CPU: LeNet-5 and the grokking transformer, Flax NNX vs PyTorch.

Same model (PyTorch defaults on both sides), batch 512, AdamW, cross-entropy, float32; the
JAX step is one jitted function on split (graphdef, params, rest) state with donated buffers,
compiled as nets compiles it (:func:`nets.xla_cpu.loop_friendly`, the CPU options for
convolutional models). The baseline is PyTorch in the same run: rounds alternate between the
two frameworks so machine-load swings hit both; the median step time per framework is reported
with the ratio JAX/PyTorch in steps/s (> 1: JAX faster). Each JAX model is timed twice: one
jitted step per call (synchronised every step, like PyTorch's ``loss.item()``), and a
``lax.scan`` of ``--steps`` steps per call, which is how ``nets.train`` runs the steps between
log points. Target: ratio ≥ 1.0 for both.

    python benchmarks/bench_zoo.py [--steps 20] [--rounds 3] [--record]

Needs ``torch`` (benchmark-only dependency: ``pip install torch==2.13.0``, the CPU wheel).

Results: ``benchmarks/results.md`` (``python benchmarks/bench_zoo.py --record``); what moved the
ratios and what was tried: ``docs/findings/benchmarks.md``.
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
from results import Printed
from torch import nn

from nets.models import LeNet5, Transformer
from nets.xla_cpu import has_convolution, jit, loop_friendly

BATCH = 512
P = 97  # modular division mod 97: tokens "a ∘ b =", vocabulary p + 2
ADAMW = dict(lr=1e-3, betas=(0.9, 0.98), weight_decay=1.0)  # teddykoker/grokking's optimiser
say = Printed()


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
    say(
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
    parser.add_argument("--record", action="store_true", help="write benchmarks/results.md")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    say(
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
    if args.record:
        say.record(__file__)


if __name__ == "__main__":
    main()
