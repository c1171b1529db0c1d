"""The reference integrator refuses, in one sentence, inputs diffrax would fail on deep inside."""

import jax.numpy as jnp
import numpy as np
import pytest

from sims import gradient_flow, single_neuron, vector_field_flow

BETA = np.array([1.0, 2.0])
P0 = {"a": jnp.asarray(0.1), "w": jnp.asarray([0.1, 0.1])}


@pytest.mark.parametrize(
    ("t", "match"),
    [
        (
            np.array([0.0, 2.0, 1.0]),
            r"non-decreasing, but t\[2\] = 1.0 < t\[1\] = 2.0; pass np.sort",
        ),
        (np.array([-1.0, 1.0]), r"t\[0\] >= 0"),
        (np.array([0.0, np.nan]), "finite"),
    ],
    ids=["unsorted", "negative", "nan"],
)
def test_bad_save_times_are_refused(t, match):
    with pytest.raises(ValueError, match=match):
        gradient_flow(single_neuron.loss, P0, t, BETA)
    with pytest.raises(ValueError, match=match):
        vector_field_flow(lambda p, a: p, 1.0, t)


def test_a_one_tuple_task_names_the_fix():
    """(beta,) is a tuple, which single_neuron.loss reads as (X, y): the error says pass beta."""
    with pytest.raises(ValueError, match=r"1-tuple .* pass x itself"):
        gradient_flow(single_neuron.loss, P0, np.linspace(0, 1, 3), (BETA,))


def test_a_non_scalar_loss_is_refused():
    with pytest.raises(ValueError, match=r"loss must return a scalar, got \(2,\)"):
        gradient_flow(lambda p, b: p["a"] * p["w"] - b, P0, np.linspace(0, 1, 3), BETA)
