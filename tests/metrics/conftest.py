"""metrics tests run under strict dtype promotion: no silent float32/float64 mixing."""

import jax
import pytest


@pytest.fixture(autouse=True)
def _strict_promotion():
    with jax.numpy_dtype_promotion("strict"):
        yield
