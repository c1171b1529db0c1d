"""float64 inputs while x64 is off: the metrics warn that the answer is float32 (as sims does)."""

import warnings

import jax
import numpy as np
import pytest

from metrics import (
    Float64Warning,
    dlr,
    feature_decomposition,
    filter_smoothness,
    moments,
    neural_collapse,
)

RNG = np.random.default_rng(0)
PHI = RNG.normal(size=(64, 8)) + 1e6  # float64; a large offset makes float32 visibly worse
F = RNG.normal(size=(64, 3))


@pytest.mark.parametrize(
    "call",
    [
        lambda: dlr(PHI, F),
        lambda: moments(PHI, F),
        lambda: feature_decomposition(PHI[:32], PHI[32:], F[32:]),
        lambda: neural_collapse(PHI, np.arange(64) % 3),
        lambda: filter_smoothness(RNG.normal(size=(3, 3, 2, 2))),
    ],
    ids=["dlr", "moments", "feature_decomposition", "neural_collapse", "filter_smoothness"],
)
def test_float64_input_with_x64_off_warns(call):
    with jax.enable_x64(False), pytest.warns(Float64Warning, match="enable_x64"):
        call()


def test_no_warning_for_float32_input_or_with_x64_on():
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error", Float64Warning)
        value32 = float(dlr(PHI.astype(np.float32), F.astype(np.float32)))
        filter_smoothness(RNG.normal(size=(3, 3, 2, 2)).astype(np.float32))  # default Laplacian
    with warnings.catch_warnings():
        warnings.simplefilter("error", Float64Warning)
        value64 = float(dlr(PHI, F))
    assert np.isfinite(value32) and np.isfinite(value64)


def test_the_warning_is_a_user_warning_exported_by_metrics():
    import metrics

    assert issubclass(metrics.Float64Warning, UserWarning) and "Float64Warning" in metrics.__all__
