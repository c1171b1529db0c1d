"""Data augmentation inside the jitted step (keys derived from the step, so runs are exact)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

AUGMENTATIONS = ("none", "cifar")


def random_crop_flip(x: jax.Array, key: jax.Array, *, pad: int = 4) -> jax.Array:
    """Standard CIFAR augmentation: zero-pad by ``pad``, random crop back, flip with p = 1/2.

    As torchvision's ``RandomCrop(32, padding=4)`` + ``RandomHorizontalFlip()`` (D
    App. F.4.2); the padding is zeros in the stored (normalised) pixel space.

    Args:
      x: images (B, H, W, C).
      key: PRNG key.
      pad: padding on each side.

    Returns:
      augmented images (B, H, W, C).
    """
    if x.ndim != 4:
        raise ValueError(f"random_crop_flip needs images (B, H, W, C), got shape {x.shape}")
    b, h, w, c = x.shape
    k_off, k_flip = jax.random.split(key)
    offsets = jax.random.randint(k_off, (b, 2), 0, 2 * pad + 1)
    flips = jax.random.bernoulli(k_flip, 0.5, (b,))
    padded = jnp.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))

    def one(img, off, flip):
        crop = jax.lax.dynamic_slice(img, (off[0], off[1], 0), (h, w, c))
        return jnp.where(flip, crop[:, ::-1], crop)

    return jax.vmap(one)(padded, offsets, flips)


def augment_batch(kind: str, x: jax.Array, key: jax.Array) -> jax.Array:
    """Apply augmentation ``kind`` (one of ``AUGMENTATIONS``) to a batch ``x``."""
    if kind == "none":
        return x
    if kind == "cifar":
        return random_crop_flip(x, key)
    raise ValueError(f"unknown augmentation {kind!r}; choose one of {AUGMENTATIONS}")
