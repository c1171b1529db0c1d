"""D_LR of a cross-entropy network on three choices of its outputs: logits, centred logits, softmax.

D_LR (T Eq. 2.8–2.9, D Eq. 7; :func:`metrics.dlr_with_rank`) reads the span Ĥ of the learned
outputs F. Under MSE the outputs are the fitted function itself; under cross-entropy the loss sees
the logits z only through softmax(z), which is unchanged by z_i → z_i + m_i 1 for any per-sample
shift m_i, so the logits carry a direction the loss never fits (D App. E, Fig 17: "the
mathematical interpretation is less straightforward"). The three choices, for logits z (n, C):

* ``logits``: F = z;
* ``centred_logits``: F = z (I − 11ᵀ/C), each sample's logits minus their mean over the C classes
  (the part of z that softmax sees; rank ≤ C − 1);
* ``probabilities``: F_ic = softmax(z_i / τ)_c at temperature τ (rows sum to 1, so the
  sample-centred outputs also have rank ≤ C − 1). As τ → ∞, softmax(z/τ) = 1/C + (z − z̄1)/(Cτ)
  + O(τ⁻²) spans the centred logits; as τ → 0 it tends to the one-hot argmax.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from metrics._validate import as_matrix, is_concrete
from metrics.dlr import DLR, dlr_with_rank

OUTPUT_CHOICES = ("logits", "centred_logits", "probabilities")
"""The outputs D_LR can be computed on for a cross-entropy network (module docstring)."""


class OutputChoiceDLR(NamedTuple):
    """D_LR (with its rank) on each choice of outputs of :data:`OUTPUT_CHOICES`.

    Attributes:
      logits: :class:`~metrics.DLR` of F = z.
      centred_logits: :class:`~metrics.DLR` of F = z − z̄1ᵀ.
      probabilities: :class:`~metrics.DLR` of F = softmax(z / τ).
    """

    logits: DLR
    centred_logits: DLR
    probabilities: DLR


def centred_logits(logits: jax.Array) -> jax.Array:
    r"""Logits minus their per-sample mean over classes: :math:`z_{ic} - \frac1C\sum_{c'} z_{ic'}`.

    Args:
      logits: (n, C) logits z.

    Returns:
      (n, C) centred logits; each row sums to 0.
    """
    z = as_matrix(logits, "logits", what="(n, C)")
    return z - jnp.mean(z, axis=1, keepdims=True)


def probabilities(logits: jax.Array, temperature: float | jax.Array = 1.0) -> jax.Array:
    r"""Softmax at temperature τ: :math:`\mathrm{softmax}(z_i/\tau)_c`.

    Args:
      logits: (n, C) logits z.
      temperature: () τ > 0 (traced; 1 is the softmax the cross-entropy was trained through).

    Returns:
      (n, C) probabilities; each row sums to 1.
    """
    z = as_matrix(logits, "logits", what="(n, C)")
    if is_concrete(temperature) and not float(temperature) > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return jax.nn.softmax(z / jnp.asarray(temperature, z.dtype), axis=1)


def output_choice(
    logits: jax.Array, choice: str, temperature: float | jax.Array = 1.0
) -> jax.Array:
    """The outputs F of ``choice`` (one of :data:`OUTPUT_CHOICES`) for ``logits`` (n, C)."""
    if choice == "logits":
        return as_matrix(logits, "logits", what="(n, C)")
    if choice == "centred_logits":
        return centred_logits(logits)
    if choice == "probabilities":
        return probabilities(logits, temperature)
    raise ValueError(f"unknown output choice {choice!r}; choose one of {list(OUTPUT_CHOICES)}")


def dlr_by_output(
    features: jax.Array, logits: jax.Array, *, temperature: float | jax.Array = 1.0
) -> OutputChoiceDLR:
    """D_LR of ``features`` against each output choice of ``logits`` (traceable).

    Args:
      features: (n, p) last-layer features Φ.
      logits: (n, C) logits z (the network outputs the cross-entropy was trained on).
      temperature: () softmax temperature τ of the ``probabilities`` choice.

    Returns:
      :class:`OutputChoiceDLR`; under ``jit`` an undefined D_LR is NaN (constant outputs).
    """
    return OutputChoiceDLR(
        *(dlr_with_rank(features, output_choice(logits, c, temperature)) for c in OUTPUT_CHOICES)
    )
