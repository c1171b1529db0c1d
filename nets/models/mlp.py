"""Multi-layer perceptron with exposed penultimate features."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from nets.init import scaled_normal, torch_uniform

ACTIVATIONS = {
    "relu": jax.nn.relu,
    "tanh": jnp.tanh,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "sigmoid": jax.nn.sigmoid,
    "linear": lambda x: x,
    "leaky_relu": jax.nn.leaky_relu,
}


def _linear(fan_in: int, fan_out: int, init: str, std: float | None, rngs: nnx.Rngs, bias: bool):
    if init == "torch":
        kw = dict(kernel_init=torch_uniform(fan_in), bias_init=torch_uniform(fan_in))
    elif init == "normal":
        if std is None:
            raise ValueError("init='normal' needs init_std")
        kw = dict(kernel_init=scaled_normal(std), bias_init=nnx.initializers.zeros_init())
    elif init == "flax":
        kw = {}
    else:
        raise ValueError(f"unknown init {init!r}; choose 'torch', 'flax' or 'normal'")
    return nnx.Linear(fan_in, fan_out, use_bias=bias, rngs=rngs, **kw)


class MLP(nnx.Module):
    """MLP x ↦ head(Φ(x)), Φ = σ(W_L … σ(W_1 x)) the penultimate features.

    Every model in :mod:`nets` follows the same contract: ``model(x)`` returns logits (n, C),
    ``model.features(x)`` returns the input of the final linear layer Φ(x) (n, p), and the final
    layer is the attribute ``head`` (so last-layer-only training selects ``nnx.PathContains('head')``).

    Args:
      in_dim: input dimension (inputs are flattened).
      hidden: widths of the hidden layers, e.g. ``(512, 512)``; p = ``hidden[-1]``.
      out_dim: number of outputs C.
      activation: one of ``ACTIVATIONS``.
      init: ``'torch'`` (U(±1/√fan_in), default, as the papers), ``'flax'`` (LeCun normal) or
        ``'normal'`` (N(0, init_std²) weights, zero biases).
      init_std: std for ``init='normal'``.
      bias: use biases.
      rngs: ``nnx.Rngs`` with a ``params`` stream.
    """

    def __init__(
        self,
        in_dim: int,
        hidden: Sequence[int],
        out_dim: int,
        *,
        activation: str = "relu",
        init: str = "torch",
        init_std: float | None = None,
        bias: bool = True,
        rngs: nnx.Rngs,
    ):
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown activation {activation!r}; choose one of {list(ACTIVATIONS)}"
            )
        if len(hidden) == 0 or min(hidden) <= 0 or in_dim <= 0 or out_dim <= 0:
            raise ValueError(f"need positive sizes, got in={in_dim} hidden={hidden} out={out_dim}")
        self.in_dim = in_dim
        self.activation = activation
        dims = [in_dim, *hidden]
        self.layers = nnx.List(
            [
                _linear(a, b, init, init_std, rngs, bias)
                for a, b in zip(dims[:-1], dims[1:], strict=True)
            ]
        )
        self.head = _linear(dims[-1], out_dim, init, init_std, rngs, bias)

    def features(self, x: jax.Array) -> jax.Array:
        """Penultimate features Φ(x), shape (n, hidden[-1])."""
        x = x.reshape(x.shape[0], -1)
        if x.shape[1] != self.in_dim:
            raise ValueError(f"MLP expects {self.in_dim} input features, got {x.shape[1]}")
        act = ACTIVATIONS[self.activation]
        for layer in self.layers:
            x = act(layer(x))
        return x

    def __call__(self, x: jax.Array) -> jax.Array:
        """Logits, shape (n, out_dim)."""
        return self.head(self.features(x))
