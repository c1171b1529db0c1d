"""Test-suite settings: float64 on (sims are float64 by design), non-interactive plotting."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
