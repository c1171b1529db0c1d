"""One tolerance table for every closed-form-vs-integrator comparison (tests and ``lrrich verify``).

Errors are max-abs errors relative to the target scale of the model (e.g. ``max|f − f_ref| / |S|``).
"""

from __future__ import annotations

import numpy as np

#: Max error of a closed form against the reference gradient-flow integrator, relative to the target scale.
CLOSED_FORM_VS_FLOW = {np.dtype("float64"): 1e-8, np.dtype("float32"): 1e-4}


def tolerance(dtype) -> float:
    """The closed-form-vs-flow tolerance for ``dtype`` (float32 or float64)."""
    dt = np.dtype(dtype)
    if dt not in CLOSED_FORM_VS_FLOW:
        raise ValueError(f"no tolerance for dtype {dt}; expected float32 or float64")
    return CLOSED_FORM_VS_FLOW[dt]
