"""Check every closed form in :mod:`sims` against the reference gradient-flow integrator.

Each solver module with a closed form defines ``verify(key, n_cases) -> float``: the max abs error
of ``solve`` against :func:`sims.gradient_flow` on random cases, relative to the target scale.
:func:`verify_all` runs them (in float64) and compares with :mod:`sims.tolerances`.
"""

from __future__ import annotations

import importlib
import time
from typing import NamedTuple

import jax
import numpy as np

from sims.tolerances import tolerance

#: Modules checked by :func:`verify_all`, in reading order (those not importable are skipped).
MODULES = (
    "linear_model",
    "diagonal",
    "saxe",
    "lambda_balanced",
    "scalar_linear",
    "single_neuron",
    "wide_deep",
    "skills",
)


class Check(NamedTuple):
    """One row of the verification table."""

    model: str
    max_error: float  # max |closed form − integrator| / target scale
    tolerance: float
    seconds: float

    @property
    def ok(self) -> bool:
        return bool(np.isfinite(self.max_error) and self.max_error <= self.tolerance)


def available() -> list[str]:
    """Names in :data:`MODULES` whose module exists and defines ``verify``."""
    out = []
    for name in MODULES:
        try:
            mod = importlib.import_module(f"sims.{name}")
        except ModuleNotFoundError:
            continue
        if hasattr(mod, "verify"):
            out.append(name)
    return out


def verify_all(
    seed: int = 0, n_cases: int = 8, models: list[str] | None = None, progress: bool = True
) -> list[Check]:
    """Run every module's ``verify`` in float64; return one :class:`Check` per model."""
    names = available() if models is None else list(models)
    unknown = sorted(set(names) - set(available()))
    if unknown:
        raise ValueError(f"unknown model(s) {unknown}; valid: {', '.join(available())}")
    rows = []
    with jax.enable_x64(True):
        key = jax.random.key(seed)
        it = names
        if progress:
            from tqdm.auto import tqdm

            it = tqdm(names, desc="verify", leave=False)
        for i, name in enumerate(it):
            mod = importlib.import_module(f"sims.{name}")
            t0 = time.perf_counter()
            err = float(mod.verify(jax.random.fold_in(key, i), n_cases))
            rows.append(Check(name, err, tolerance(np.float64), time.perf_counter() - t0))
    return rows
