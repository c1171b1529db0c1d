"""Modular division mod p (the grokking task of D Fig 4 and Kunin et al. Fig 6d)."""

from __future__ import annotations

import numpy as np

from nets.data.base import Dataset


def modular_division(
    p: int = 97, train_fraction: float = 0.5, *, encoding: str = "tokens", seed: int = 0
) -> Dataset:
    r"""All equations :math:`a \circ b = c` with :math:`a \equiv b\,c \pmod p`, :math:`b \neq 0`.

    True modular division, :math:`c = a\,b^{-1} \bmod p` (not multiplication), over all
    p (p − 1) pairs, split at random into train/test (p = 97, fraction 1/2 gives the 4,656 training
    equations of D App. F). As tokens the input is the sequence ``[a, ∘, b, =]`` with
    ``∘ = p`` and ``= = p + 1`` (vocabulary p + 2) and the label is the answer token c.

    Args:
      p: a prime modulus.
      train_fraction: share of the p (p − 1) equations used for training, in (0, 1).
      encoding: ``'tokens'`` (int (n, 4), for the transformer) or ``'onehot'``
        (float (n, 2p): one-hot a ‖ one-hot b, for an MLP).
      seed: NumPy seed of the split.

    Returns:
      :class:`Dataset` with p classes.
    """
    if p < 3 or any(p % q == 0 for q in range(2, int(p**0.5) + 1)):
        raise ValueError(f"p must be a prime ≥ 3, got {p}")
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    if encoding not in ("tokens", "onehot"):
        raise ValueError(f"encoding must be 'tokens' or 'onehot', got {encoding!r}")
    a, b = np.meshgrid(np.arange(p), np.arange(1, p), indexing="ij")
    a, b = a.ravel(), b.ravel()
    inverse = np.array([pow(int(v), p - 2, p) for v in range(p)])  # Fermat: b^{p-2} = b^{-1}
    c = (a * inverse[b]) % p
    if encoding == "tokens":
        x = np.stack([a, np.full_like(a, p), b, np.full_like(a, p + 1)], axis=1).astype(np.int32)
    else:
        eye = np.eye(p, dtype=np.float32)
        x = np.concatenate([eye[a], eye[b]], axis=1)
    order = np.random.default_rng(seed).permutation(len(a))
    n_train = int(round(train_fraction * len(a)))
    tr, te = order[:n_train], order[n_train:]
    y = c.astype(np.int32)
    return Dataset(x[tr], y[tr], x[te], y[te], num_classes=p, name=f"mod{p}-division")
