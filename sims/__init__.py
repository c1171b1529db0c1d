"""Exact gradient-flow dynamics of solvable networks, each checked against the raw-parameter flow.

Every model lives in its own module with one entry point ``solve(...)`` returning a named pytree,
and a ``verify(key, n_cases)`` that checks it against :func:`gradient_flow` (``lrrich verify``).
Solvers never enable float64 themselves: wrap calls in ``jax.enable_x64(True)`` (the CLI and the
experiments do) for reference-quality answers.
"""

from sims import (
    diagonal,
    emergence,
    lambda_balanced,
    linear_model,
    piecewise_linear,
    saxe,
    scalar_linear,
    scaling_laws,
    single_neuron,
    skills,
    wide_deep,
)
from sims.gradient_flow import gradient_flow, vector_field_flow
from sims.tolerances import tolerance

__all__ = [
    "diagonal",
    "emergence",
    "gradient_flow",
    "lambda_balanced",
    "linear_model",
    "piecewise_linear",
    "saxe",
    "scalar_linear",
    "scaling_laws",
    "single_neuron",
    "skills",
    "tolerance",
    "vector_field_flow",
    "wide_deep",
]
