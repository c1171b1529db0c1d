"""Decoder-only transformer for "a ∘ b =" sequences (grokking; Power et al. 2022)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from nets.init import scaled_normal, torch_uniform, torch_xavier_uniform
from nets.models.layers import gelu, layer_norm, linear

NORMS = ("post", "pre")


class CausalSelfAttention(nnx.Module):
    r"""Multi-head causal self-attention, ``torch.nn.MultiheadAttention`` with a causal mask.

    .. math::
        \mathrm{head}_j = \mathrm{softmax}\Big(\frac{Q_j K_j^\top}{\sqrt{d/h}} + M\Big) V_j,
        \qquad M_{st} = -\infty \text{ for } t > s,

    with [Q, K, V] = x W_in + b_in one fused projection d → 3d and output ``out`` d → d.
    torch_defaults: W_in ~ xavier-uniform U(±√(6/(d + 3d))), b_in = 0, W_out ~ U(±1/√d),
    b_out = 0 (``MultiheadAttention._reset_parameters``).
    """

    def __init__(
        self, d_model: int, num_heads: int, *, torch_defaults: bool, param_dtype, rngs: nnx.Rngs
    ):
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        zeros = nnx.initializers.zeros_init()
        kw = dict(torch_defaults=torch_defaults, param_dtype=param_dtype, rngs=rngs)
        if torch_defaults:
            qkv_init = dict(kernel_init=torch_xavier_uniform(d_model, 3 * d_model), bias_init=zeros)
            out_init = dict(kernel_init=torch_uniform(d_model), bias_init=zeros)
        else:
            qkv_init, out_init = {}, {}
        self.qkv = linear(d_model, 3 * d_model, **kw, **qkv_init)
        self.out = linear(d_model, d_model, **kw, **out_init)

    def __call__(self, x: jax.Array, *, last_only: bool = False) -> jax.Array:
        """Attention output, shape (n, L, d), from x of shape (n, L, d).

        ``last_only``: the output at the last position only, shape (n, 1, d) — the same values
        as ``self(x)[:, -1:]``, with the queries, the softmax and ``out`` of one position.
        """
        n, length, d = x.shape
        h = self.num_heads
        q, k, v = jnp.split(self.qkv(x).reshape(n, length, 3 * h, d // h), 3, axis=2)
        if last_only:
            q = q[:, -1:]
        queries = q.shape[1]
        scores = jnp.einsum("nshc,nthc->nhst", q, k) / math.sqrt(d // h)
        causal = jnp.tril(jnp.ones((length, length), dtype=bool))[length - queries :]
        weights = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1)
        return self.out(jnp.einsum("nhst,nthc->nshc", weights, v).reshape(n, queries, d))


class DecoderBlock(nnx.Module):
    """Transformer decoder block: attention and MLP d → 4d → d (GELU), each with a residual.

    ``norm='post'`` (teddykoker/grokking, the code the D_LR paper used):
    x ← LN₁(x + Attn(x)); x ← LN₂(x + MLP(x)). ``norm='pre'`` (GPT-2):
    x ← x + Attn(LN₁(x)); x ← x + MLP(LN₂(x)).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        mlp_ratio: int,
        *,
        norm: str,
        torch_defaults: bool,
        param_dtype,
        rngs: nnx.Rngs,
    ):
        kw = dict(torch_defaults=torch_defaults, param_dtype=param_dtype, rngs=rngs)
        self.norm = norm
        self.exact_gelu = torch_defaults
        self.attn = CausalSelfAttention(d_model, num_heads, **kw)
        self.ln1 = layer_norm(d_model, **kw)
        self.fc1 = linear(d_model, mlp_ratio * d_model, **kw)
        self.fc2 = linear(mlp_ratio * d_model, d_model, **kw)
        self.ln2 = layer_norm(d_model, **kw)

    def _mlp(self, x: jax.Array) -> jax.Array:
        return self.fc2(gelu(self.fc1(x), exact=self.exact_gelu))

    def __call__(self, x: jax.Array, *, last_only: bool = False) -> jax.Array:
        """Block output, shape (n, L, d), from x of shape (n, L, d).

        ``last_only``: the output at the last position only, shape (n, 1, d), the same values
        as ``self(x)[:, -1:]``: attention still reads every position, but its query, the
        residuals, the LayerNorms and the MLP run on one position (the last block of
        :class:`Transformer`, whose other positions nothing reads).
        """
        last = x[:, -1:] if last_only else x
        if self.norm == "post":
            x = self.ln1(last + self.attn(x, last_only=last_only))
            return self.ln2(x + self._mlp(x))
        x = last + self.attn(self.ln1(x), last_only=last_only)
        return x + self._mlp(self.ln2(x))


class Transformer(nnx.Module):
    """Decoder-only transformer reading token sequences, predicting from the last position.

    For modular arithmetic the input is the 4 tokens "a ∘ b =" (a, b ∈ {0…p−1}, ∘ = p, "=" = p+1,
    vocabulary p + 2) and the label is the answer token; the model is teddykoker/grokking's:
    learned token + position embeddings, ``num_layers`` :class:`DecoderBlock`, a final LayerNorm,
    and the unembedding ``head`` read at the last position. Φ(x) ∈ ℝ^d is the final (normalised)
    residual stream at the last position, the input of ``head``.

    Args:
      vocab_size: number of token ids (p + 2 for "a ∘ b =" mod p).
      num_layers: number of blocks (2 in the D_LR paper, 1 in Kunin et al. Fig. 6d).
      d_model: d (128).
      num_heads: h (4).
      mlp_ratio: hidden width of the MLP in units of d (4).
      max_len: number of position embeddings (5 as in teddykoker/grokking; inputs use 4).
      num_classes: width of ``head``; ``None`` → ``vocab_size`` (logits over all tokens).
      norm: ``'post'`` (default, teddykoker/grokking) or ``'pre'`` LayerNorm placement.
      embed_std: std of the token and position embeddings; ``None`` → 1 with torch_defaults
        (``nn.Embedding`` draws N(0, 1)), Flax's default otherwise. Kunin et al. Fig. 6d shrink it.
      torch_defaults: PyTorch numerics — U(±1/√fan_in) linear init, N(0, 1) embeddings,
        ``MultiheadAttention`` init, LayerNorm ε = 1e-5, exact (erf) GELU; ``False`` uses Flax's
        defaults (LeCun normal, ε = 1e-6, tanh-approximate GELU).
      param_dtype: dtype of the parameters.
      rngs: ``nnx.Rngs`` with a ``params`` stream.
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        num_layers: int = 2,
        d_model: int = 128,
        num_heads: int = 4,
        mlp_ratio: int = 4,
        max_len: int = 5,
        num_classes: int | None = None,
        norm: str = "post",
        embed_std: float | None = None,
        torch_defaults: bool = True,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        if norm not in NORMS:
            raise ValueError(f"unknown norm {norm!r}; choose one of {list(NORMS)}")
        num_classes = vocab_size if num_classes is None else num_classes
        if min(vocab_size, num_layers, d_model, num_heads, mlp_ratio, max_len, num_classes) <= 0:
            raise ValueError(
                f"need positive sizes, got {vocab_size=}, {num_layers=}, {d_model=}, "
                f"{num_heads=}, {mlp_ratio=}, {max_len=}, {num_classes=}"
            )
        self.vocab_size = vocab_size
        self.max_len = max_len
        kw = dict(torch_defaults=torch_defaults, param_dtype=param_dtype, rngs=rngs)
        if embed_std is None and torch_defaults:
            embed_std = 1.0
        emb = {} if embed_std is None else dict(embedding_init=scaled_normal(embed_std))
        self.token_embed = nnx.Embed(vocab_size, d_model, param_dtype=param_dtype, rngs=rngs, **emb)
        self.pos_embed = nnx.Embed(max_len, d_model, param_dtype=param_dtype, rngs=rngs, **emb)
        self.blocks = nnx.List(
            [
                DecoderBlock(d_model, num_heads, mlp_ratio, norm=norm, **kw)
                for _ in range(num_layers)
            ]
        )
        self.ln_f = layer_norm(d_model, **kw)
        self.head = linear(d_model, num_classes, **kw)

    def features(self, tokens: jax.Array) -> jax.Array:
        """Φ: final residual stream at the last position after the final LayerNorm, shape (n, d).

        Args:
          tokens: integer token ids in [0, vocab_size), shape (n, L) with 1 ≤ L ≤ max_len. An
            id out of range is a ``ValueError``; under ``jax.jit`` its example's Φ is NaN.
        """
        if tokens.ndim != 2 or not 1 <= tokens.shape[1] <= self.max_len:
            raise ValueError(
                f"Transformer expects tokens of shape (n, L) with 1 <= L <= {self.max_len}, "
                f"got {tuple(tokens.shape)}"
            )
        if not jnp.issubdtype(tokens.dtype, jnp.integer):
            raise ValueError(f"Transformer expects integer token ids, got dtype {tokens.dtype}")
        if not isinstance(tokens, jax.core.Tracer) and tokens.size:
            lo, hi = int(tokens.min()), int(tokens.max())
            if lo < 0 or hi >= self.vocab_size:
                raise ValueError(
                    f"token ids must lie in [0, {self.vocab_size}) (vocab_size), got ids in "
                    f"[{lo}, {hi}]; build the model with a larger vocab_size or map the ids "
                    "into range"
                )
        # An id outside [0, vocab) would read another token's row (−1 wraps to the last one):
        # under jit, where it cannot be refused, its embedding is NaN.
        valid = (tokens >= 0) & (tokens < self.vocab_size)
        embedded = jnp.where(valid[..., None], self.token_embed(tokens), jnp.nan)
        x = embedded + self.pos_embed(jnp.arange(tokens.shape[1]))[None]
        for i, block in enumerate(self.blocks):
            # Φ reads the last position only: the last block computes nothing else
            x = block(x, last_only=i == len(self.blocks) - 1)
        return self.ln_f(x[:, -1])

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """Logits at the last position, shape (n, num_classes)."""
        return self.head(self.features(tokens))
