r"""Stacks of 2-layer ReLU MLPs trained on multitask sparse parity (T §5.2, App. C.3).

A network of hidden width N maps an encoded input (i, x) ∈ {0, 1}^{n_s + n_b}
(:mod:`nets.data.sparse_parity`) to

.. math:: f(i, x) = a^\top \mathrm{ReLU}(W (i, x) + b) + c,
          \qquad W \in \mathbb{R}^{N \times (n_s + n_b)},\ a, b \in \mathbb{R}^N,

trained on T Eq 4.5's ½-MSE :math:`L = \tfrac12 \mathbb{E}[(f - f^*)^2]` with
:math:`f^* = S \sum_k g_k` (T Eq 4.4), and read out by its skill strengths (T Eq 4.7)

.. math:: R_k / S = \mathbb{E}_x[g_k(k, x)\, f(k, x)] / S = \mathbb{E}_x[f \cdot S g_k] / S^2.

:func:`train_skills` trains G streams × K widths as one jitted program: a vmap over them of
:func:`nets.step.run_batches` (the library step, data drawn on device) inside a scan over the
evaluations. :func:`init_networks` draws the stack, :func:`skill_trainer` gives its
:mod:`nets.step` program.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from nets.config import HParams, TrainConfig, hparams
from nets.data import sparse_parity as sp
from nets.models import MLP
from nets.step import Batch, Program, build, run_batches

__all__ = ["train_skills", "init_networks", "skill_trainer"]


def train_skills(
    task: sp.SparseParityTask,
    widths: Sequence[int],
    key: jax.Array,
    *,
    steps: int,
    eval_every: int,
    batch: int,
    train: TrainConfig,
    init_std: float,
    n_eval: int,
    n_streams: int = 1,
    data: tuple[jax.Array, jax.Array, jax.Array] | None = None,
    init_bias: bool = False,
) -> np.ndarray:
    """G = ``n_streams`` × K = len(``widths``) networks on ½-MSE; R_k/S every ``eval_every`` steps.

    A stream feeds its K networks the same minibatch each step: fresh samples of ``task``
    (``data=None``, D → ∞) or draws from a fixed set ``data = (x, y, D)`` of shapes
    (G, D_pad, n_s + n_b), (G, D_pad), (G,) — full-batch (padding masked out) where D ≤
    ``batch``, else ``batch`` samples drawn with replacement.

    Args:
      task: the sparse-parity task (n_s skills, scale S).
      widths: (K,) hidden widths N; key: PRNG key of the inits, minibatches and held-out set.
      steps: optimizer steps, a positive multiple of ``eval_every``; batch: minibatch size B.
      train: the optimizer part of a :class:`nets.TrainConfig` (one step is one epoch of its
        ``schedule``); init_std: σ of the N(0, σ²) weights; init_bias: biases drawn too.
      n_eval: held-out samples per skill for R_k.

    Returns:
      (G, K, steps // eval_every + 1, n_s) skill strengths R_k/S (T Eq 4.7), index 0 at init.
    """
    if steps < 1 or eval_every < 1 or steps % eval_every:
        raise ValueError(
            f"steps ({steps}) must be a positive multiple of eval_every ({eval_every})"
        )
    G, K = int(n_streams), len(widths)
    if data is not None and (data[0].shape[0] != G or data[0].shape[1] < batch):
        raise ValueError(
            f"data x must have shape (n_streams={G}, D_pad >= batch={batch}, n_s + n_b), "
            f"got {data[0].shape}"
        )
    k_init, k_train, k_eval = jax.random.split(key, 3)
    graphdef, params = init_networks(task, list(widths) * G, init_std, k_init, init_bias)
    program, hp = skill_trainer(task, max(int(w) for w in widths), init_std, train, steps)
    # one program (eagerly, the vmapped init compiled each of its primitives separately)
    state = jax.jit(jax.vmap(lambda p: program.init(nnx.merge(graphdef, p), hp)))(params)
    state = jax.tree.map(lambda a: a.reshape(G, K, *a.shape[1:]), state)
    measure = _skill_readout(program, task, k_eval, n_eval, (G, K))

    def stream(st_g, keys_g, set_g):  # the K networks of one stream, len(keys_g) steps
        def batch_of(_, k):
            x, y, w = _minibatch(k, task, batch, set_g)
            return Batch(x, y, k_train, w)  # no augmentation: the key is unused

        return jax.vmap(lambda st: run_batches(program, st, batch_of, keys_g, hp)[0])(st_g)

    @jax.jit
    def run(st, sets):  # training sets are arguments, not constants baked into the program
        def chunk(carry, i):
            keys = jax.random.split(jax.random.fold_in(k_train, i), eval_every)
            per_stream = jax.vmap(lambda k: jax.random.split(k, G))(keys)  # (eval_every, G)
            carry = jax.vmap(stream, in_axes=(0, 1, 0))(carry, per_stream, sets)
            return carry, measure(carry)

        _, R = jax.lax.scan(chunk, st, jnp.arange(steps // eval_every))
        return jnp.concatenate([measure(st)[None], R])  # (n_points, G, K, n_s)

    return np.moveaxis(np.asarray(run(state, data)), 0, 2)


def init_networks(
    task: sp.SparseParityTask,
    widths: Sequence[int],
    init_std: float,
    key: jax.Array,
    init_bias: bool = False,
) -> tuple[nnx.GraphDef, nnx.State]:
    """A stack of 2-layer ReLU MLPs, one per width: W, a ~ N(0, σ²), b, c = 0 (or N(0, σ²)).

    Every network has H = max(widths) hidden units; those beyond its own width start at zero
    (in- and out-weights, bias) and stay there under SGD/Adam(W) (ReLU'(0) = 0), so all widths
    share one compiled program.

    Args:
      task: gives the input width n_s + n_b; widths: (R,) hidden widths N ≥ 1;
      init_std: σ; key: PRNG key (network r draws from ``fold_in(key, r)``);
      init_bias: biases from N(0, σ²) too, from a key of their own (the weights stay those of
        ``init_bias=False``).

    Returns:
      (graphdef, params): the MLP structure and its ``nnx.State`` stacked on axis 0 (R, …).
    """
    if len(widths) == 0 or min(widths) < 1:
        raise ValueError(f"widths must be a non-empty sequence of integers >= 1, got {widths}")
    H = max(int(w) for w in widths)

    def make(k, w=H):
        model = MLP(task.in_dim, (H,), 1, activation="relu", init="normal", init_std=init_std,
                    rngs=nnx.Rngs(params=k))  # fmt: skip
        if init_bias:
            k1, k2 = jax.random.split(jax.random.fold_in(k, 1))
            for layer, kb in ((model.layers[0], k1), (model.head, k2)):
                b = layer.bias[...]
                layer.bias[...] = init_std * jax.random.normal(kb, b.shape, b.dtype)
        mask = (jnp.arange(H) < w).astype(model.head.kernel[...].dtype)
        model.layers[0].kernel[...] = model.layers[0].kernel[...] * mask
        model.layers[0].bias[...] = model.layers[0].bias[...] * mask
        model.head.kernel[...] = model.head.kernel[...] * mask[:, None]
        return nnx.split(model)

    graphdef = nnx.eval_shape(lambda: make(key))[0]  # structure only, no compute
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(len(widths)))
    params = jax.jit(jax.vmap(lambda k, w: make(k, w)[1]))(keys, jnp.asarray(widths))
    return graphdef, params


def skill_trainer(
    task: sp.SparseParityTask, width: int, init_std: float, train: TrainConfig, steps: int
) -> tuple[Program, HParams]:
    r"""The :mod:`nets.step` program and hyper-parameters of width-``width`` skill networks.

    T Eq 4.5's ½-MSE is the library's MSE with output and target scale 1/√2:
    :math:`\tfrac12 (f - y)^2 = (f/\sqrt2 - y/\sqrt2)^2`, the same gradient; R_k reads the
    unscaled f. The schedule's clock is one epoch per step over ``steps`` steps.
    """
    half = 1 / np.sqrt(2.0)
    cfg = dataclasses.replace(train, loss="mse", output_scale=half, target_scale=half)
    built = []

    def structure():  # traced only: the program needs shapes, no parameter is drawn
        model = MLP(task.in_dim, (width,), 1, activation="relu", init="normal",
                    init_std=init_std, rngs=nnx.Rngs(0))  # fmt: skip
        program, _, hp = build(model, cfg, num_classes=1, steps_per_epoch=1, total_steps=steps)
        built.append(program)
        return hp

    dtype = jax.eval_shape(structure).lr.dtype
    return built[0], hparams(cfg, dtype)


def _skill_readout(program: Program, task, key, n_eval: int, stack: tuple[int, int]):
    """R_k/S = E[f · S g_k]/S² (T Eq 4.7) of (G, K) stacked networks, on ``n_eval`` held-out
    samples of each skill drawn from ``key``."""
    x, y = jax.jit(
        jax.vmap(lambda k: sp.sample_skill(jax.random.fold_in(key, k), task, k, n_eval)[:2])
    )(jnp.arange(task.n_s))
    x = x.reshape(task.n_s * n_eval, task.in_dim)  # y: (n_s, n_eval), y = S g_k

    def f(s):  # the unscaled network output f(x)
        return nnx.merge(program.graphdef_eval, s.trainable, s.rest)(x)[:, 0]

    def measure(st):
        out = jax.vmap(jax.vmap(f))(st).reshape(*stack, task.n_s, n_eval)
        return jnp.mean(out * y, -1) / task.S**2

    return measure


def _minibatch(k, task, batch: int, data):
    """(x, y, weights) of one step: fresh samples, or drawn from a fixed set (x, y, D)."""
    if data is None:
        b = sp.sample_sparse_parity(k, task, batch)
        return b.x, b.y, jnp.ones_like(b.y)
    x, y, size = data
    full = size <= batch
    idx = jnp.where(full, jnp.arange(batch), jax.random.randint(k, (batch,), 0, size))
    w = jnp.where(full, jnp.arange(batch) < size, True).astype(y.dtype)
    return x[idx], y[idx], w
