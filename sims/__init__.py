"""Exact gradient-flow dynamics of solvable networks, each checked against the raw-parameter flow.

**One contract.** Every model module exposes

* ``solve(init..., task..., t, *, eta...)`` — initial parameters first, then the task, then the
  times ``t`` (any shape T); learning rates and options are keyword-only, the rates named ``eta``
  (one rate) or ``eta_a``, ``eta_w`` (per layer). The order is never inferred from the values:
  a call in another order fails on a shape or sign check, or on a positional rate (TypeError).
  It returns a NamedTuple that always carries ``t`` and the network map under one name,
  ``network_map``: β = a w (single_neuron), u = ab (diagonal), W₂W₁ (saxe, lambda_balanced),
  θ (scalar_linear), the mode coefficients ⟨e_k|f⟩ (linear_model), the skill strengths R_k
  (skills, emergence), f(x_j) on the training inputs (piecewise_linear), β(∞)
  (``wide_deep.interpolant``). The former names stay as read-only aliases of that field:
  ``beta``, ``u``, ``network``, ``theta``, ``coeff``, ``R``. ``scaling_laws.solve`` answers the
  loss curve itself (it never stores its 10^5 skills), so its result has ``loss``, not
  ``network_map``.
* ``loss(params, task)`` — the raw-parameter ½-MSE that the flow θ̇ = −η∇L descends (the one
  :func:`gradient_flow` integrates and :func:`simulate` descends in discrete steps);
* ``verify(key, n_cases)`` — the closed form against :func:`gradient_flow` (``lrrich verify``).

Models whose answer is not a trajectory name their entry point for what it computes, with the
same argument order: ``wide_deep.interpolant(W0, A0, X, Y, V, U, *, eta_a, eta_w)`` is β(∞) of
the flow (K Theorem B.6). ``emergence.solve`` and ``scaling_laws.solve`` are the skill model's
trajectories with the extended rate (T Eq 5.2) and with power-law skills beside their time law
(T Table 4.1); ``piecewise_linear.solve`` integrates the ReLU-network flow with fixed steps.

**Theory over simulation.** :func:`simulate` runs gradient descent with step η on any ``loss`` and
returns it on the flow's time axis t = η·step; :func:`sims.plot.overlay` draws the exact solution
over a simulation or a logged training history (anything with ``.column(name)``).

**Float64 policy.** Importing sims changes no global JAX state. Solvers compute in the dtype of
their inputs (float64 in, float64 out; float32 in, float32 out). JAX turns float64 into float32
unless x64 is enabled, so a float64 input while x64 is off emits a :class:`Float64Warning` naming
the fix — ``with jax.enable_x64(True): ...`` (or ``jax.config.update("jax_enable_x64", True)`` in
an entry point; the CLI and the experiments do) — instead of silently answering in float32.
"""

from sims import (
    diagonal,
    emergence,
    lambda_balanced,
    linear_model,
    piecewise_linear,
    plot,
    saxe,
    scalar_linear,
    scaling_laws,
    single_neuron,
    skills,
    wide_deep,
)
from sims._checks import Float64Warning
from sims.gradient_descent import Simulation, simulate
from sims.gradient_flow import gradient_flow, vector_field_flow
from sims.tolerances import tolerance

__all__ = [
    "Float64Warning",
    "Simulation",
    "diagonal",
    "emergence",
    "gradient_flow",
    "lambda_balanced",
    "linear_model",
    "piecewise_linear",
    "plot",
    "saxe",
    "scalar_linear",
    "scaling_laws",
    "simulate",
    "single_neuron",
    "skills",
    "tolerance",
    "vector_field_flow",
    "wide_deep",
]
