"""Flax models and optax training with the lazy/rich knobs."""

from nets.models import MLP

__all__ = ["MLP"]
