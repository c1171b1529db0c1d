"""Test-suite settings: float64 on (sims are float64 by design), non-interactive plotting."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module.

    The suite compiles thousands of XLA:CPU programs in one process and each keeps its code mapped
    in memory; one CI run segfaulted inside the XLA compiler after ~500 tests, late in the
    session. Modules share no jitted state that matters for speed, so freeing the caches between
    modules costs a few recompilations and keeps the process small.
    """
    yield
    jax.clear_caches()
