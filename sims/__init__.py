"""Exact gradient-flow dynamics of solvable networks, each checked against the raw-parameter flow.

Every model lives in its own module with one entry point ``solve(...)`` returning a named pytree.
Solvers never enable float64 themselves: wrap calls in ``jax.enable_x64(True)`` (the CLI and the
experiments do) for reference-quality answers.
"""

from sims.gradient_flow import gradient_flow, vector_field_flow
from sims.tolerances import tolerance

__all__ = ["gradient_flow", "vector_field_flow", "tolerance"]
