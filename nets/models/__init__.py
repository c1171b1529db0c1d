"""Flax NNX models; each exposes ``features(x)`` (penultimate Φ) and a final layer ``head``."""

from nets.models.mlp import MLP

__all__ = ["MLP"]
