"""Checks of a training call's arguments on the host, before anything is compiled.

Each check turns an input that would otherwise train silently wrong, or fail deep inside a
compiled program, into one sentence: what was wrong and what to pass instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
from flax import nnx

from nets.config import TrainConfig
from nets.data.base import Dataset
from nets.step import forward


def check_dataset(data, what: str = "data") -> Dataset:
    """``data`` if it is one :class:`~nets.data.base.Dataset`; a ``TypeError`` otherwise."""
    if isinstance(data, Dataset):
        return data
    hint = ""
    if isinstance(data, list | tuple) and data and all(isinstance(d, Dataset) for d in data):
        hint = (
            f"; the runs of one call share one dataset: call once per dataset ({len(data)} "
            "calls here)"
        )
    raise TypeError(
        f"{what} must be a nets.Dataset (e.g. nets.load_digits()), got {type(data).__name__}{hint}"
    )


def check_key(key, what: str = "key") -> None:
    """``key`` is one JAX PRNG key (typed, or a raw uint32 (2,) key); a ``TypeError`` otherwise."""
    dtype = getattr(key, "dtype", None)
    typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    raw = isinstance(key, jax.Array | np.ndarray) and key.dtype == np.uint32 and key.shape == (2,)
    if not ((typed and key.shape == ()) or raw):
        shape = getattr(key, "shape", None)
        got = f"{type(key).__name__}" + (f" of shape {shape}" if shape is not None else "")
        raise TypeError(f"{what} must be one JAX PRNG key, e.g. jax.random.key(0); got {got}")


def check_config(config) -> None:
    """``config`` is a :class:`TrainConfig` (``TypeError`` naming what was passed if not)."""
    if not isinstance(config, TrainConfig):
        raise TypeError(
            f"config must be a nets.TrainConfig, got {type(config).__name__} "
            "(e.g. TrainConfig(lr=0.1, epochs=10))"
        )


def check_configs(configs: Sequence) -> None:
    """Every element of ``configs`` is a validated :class:`TrainConfig` (``TypeError`` if not)."""
    for i, c in enumerate(configs):
        if not isinstance(c, TrainConfig):
            raise TypeError(
                f"configs[{i}] must be a nets.TrainConfig, got {type(c).__name__} "
                "(e.g. TrainConfig(lr=0.1, epochs=10))"
            )
        c.validate()


def check_inputs(model: nnx.Module, data: Dataset, configs: Sequence[TrainConfig]) -> None:
    """The inputs fit the model and the configs: integer inputs, token ids.

    Raises:
      ValueError: an ``input_scale`` ≠ 1 with integer inputs (it scales float inputs only), or
        token ids outside ``[0, vocab_size)`` for a model with a ``vocab_size``.
    """
    x = np.asarray(data.x_train)
    if np.issubdtype(x.dtype, np.integer) or x.dtype == bool:
        for i, c in enumerate(configs):
            if c.input_scale != 1:
                raise ValueError(
                    f"input_scale={c.input_scale} (configs[{i}]) scales float inputs only, but "
                    f"x_train is {x.dtype}; convert the images to float first (e.g. "
                    "x.astype(np.float32) / 255) or leave input_scale at 1"
                )
    vocab = getattr(model, "vocab_size", None)
    if isinstance(vocab, int):
        for split in ("x_train", "x_test"):
            tokens = np.asarray(getattr(data, split))
            if tokens.size and np.issubdtype(tokens.dtype, np.integer):
                lo, hi = int(tokens.min()), int(tokens.max())
                if lo < 0 or hi >= vocab:
                    raise ValueError(
                        f"{split} holds token ids in [{lo}, {hi}], outside the model's vocabulary "
                        f"[0, {vocab}); build the model with vocab_size > {hi} or map the ids "
                        "into range"
                    )


def check_output_width(program, state, hp, data: Dataset) -> None:
    """The model reads the dataset's inputs and answers ``num_classes`` outputs (``ValueError``).

    Args:
      program, state, hp: one run as built by :func:`nets.step.build`; data: the dataset.
    """
    try:
        _, outputs = jax.eval_shape(
            lambda s, h, xs: forward(program, s, xs, h), state, hp, data.x_train[:1]
        )
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"the model cannot read inputs of shape {data.input_shape} ({data.x_train.dtype}): "
            f"{type(e).__name__}: {e}; build the model for these inputs"
        ) from e
    if outputs.ndim != 2 or outputs.shape[1] != data.num_classes:
        got = f"{outputs.shape[1]} outputs" if outputs.ndim == 2 else f"shape {outputs.shape}"
        name = f" {data.name!r}" if data.name else ""
        raise ValueError(
            f"the model answers {got} per example but the dataset{name} has "
            f"num_classes={data.num_classes}; build the model with {data.num_classes} outputs "
            f"(e.g. MLP(d_in, widths, {data.num_classes}))"
        )
