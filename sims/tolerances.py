"""One tolerance table for every check of a sims solver (tests and ``lrrich verify``), keyed by dtype.

Errors are max-abs errors relative to the target scale of the model (e.g. ``max|f − f_ref| / |S|``).

=====================  ========  ========  ==================================================
kind                   float64   float32   where it comes from
=====================  ========  ========  ==================================================
closed_form_vs_flow    1e-8      1e-4      Dopri8 at rtol 1e-12 reaches ~1e-10 on these flows;
                                           float32 closed forms keep ~1e-5 up to t = 1e4
initial_value          1e-13     1e-5      t = 0 reproduces the init up to a few hundred ulps
finite_difference      1e-6      —         central differences with step 1e-5: O(h²) ≈ 1e-10
                                           truncation plus O(eps/h) ≈ 1e-11 rounding, with
                                           headroom for curvature of fast modes
fixed_point            1e-8      1e-4      t → ∞ (here ηt = 1e3–1e4) reaches the minimiser
gradient_descent       5e-2      5e-2      sims.simulate at step η vs the flow: O(η) with η = 1e-2
fixed_step             2e-6      —         piecewise_linear.solve at its default 100 RK4 steps
                                           per interval (dt ≈ 5e-3, kinks located) vs Dopri8:
                                           ≈7e-7 measured, fourth order (7e-12 at 1,600)
rounding               1e-12     —         one formula evaluated two ways (closed form vs a
                                           naive sum): a few thousand ulps of cancellation
=====================  ========  ========  ==================================================
"""

from __future__ import annotations

import numpy as np

_F64, _F32 = np.dtype("float64"), np.dtype("float32")

#: Max error of a closed form against the reference gradient-flow integrator, relative to the target scale.
CLOSED_FORM_VS_FLOW = {_F64: 1e-8, _F32: 1e-4}

TOLERANCES = {
    "closed_form_vs_flow": CLOSED_FORM_VS_FLOW,
    "initial_value": {_F64: 1e-13, _F32: 1e-5},
    "finite_difference": {_F64: 1e-6},
    "fixed_point": {_F64: 1e-8, _F32: 1e-4},
    "gradient_descent": {_F64: 5e-2, _F32: 5e-2},
    "fixed_step": {_F64: 2e-6},
    "rounding": {_F64: 1e-12},
}


def tolerance(dtype, kind: str = "closed_form_vs_flow") -> float:
    """The tolerance of check ``kind`` (a row of the module table) for ``dtype``.

    Args:
      dtype: float32 or float64.
      kind: one of the table's kinds (default: closed form vs the integrator).

    Returns:
      The tolerance (relative to the model's target scale).
    """
    if kind not in TOLERANCES:
        raise ValueError(f"kind must be one of {sorted(TOLERANCES)}, got {kind!r}")
    dt = np.dtype(dtype)
    if dt not in TOLERANCES[kind]:
        raise ValueError(
            f"no {kind} tolerance for dtype {dt}; expected one of "
            f"{sorted(str(d) for d in TOLERANCES[kind])}"
        )
    return TOLERANCES[kind][dt]
