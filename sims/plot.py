"""Theory over simulation: the exact solution drawn as lines, a simulation or training log as markers.

Matplotlib is imported inside :func:`overlay` only, so importing :mod:`sims` never needs it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["overlay"]


def overlay(
    t: Any,
    exact: Any,
    simulated: Any,
    sim_t: Any = None,
    *,
    column: str | None = None,
    time_column: str = "step",
    time_scale: float = 1.0,
    ax: Any = None,
    labels: tuple[str, str] = ("exact", "simulation"),
    xlabel: str = "t",
    ylabel: str = "",
    logx: bool = False,
    logy: bool = False,
) -> Any:
    """Plot ``exact(t)`` as lines and ``simulated`` as markers on the same time axis.

    ``simulated`` is either an array of values at the times ``sim_t`` (e.g. an observable of a
    :class:`sims.gradient_descent.Simulation` at ``sim.t``) or a logged training history: anything with a
    ``.column(name)`` method, whose ``column`` values are plotted at ``time_column × time_scale``
    (``time_scale`` = learning rate maps gradient-descent steps to flow time, t = η·step).

    Args:
      t: (T,) times of the exact solution.
      exact: (T,) or (T, k) exact values (k curves).
      simulated: (K,) or (K, k) values, or an object with ``.column(name)``.
      sim_t: (K,) times of ``simulated`` (arrays only).
      column: the history column to plot (histories only).
      time_column: the history column counting steps (histories only).
      time_scale: flow time per unit of ``time_column`` (histories only).
      ax: matplotlib Axes to draw on (default: a new figure).
      labels: legend labels of the exact and simulated curves.
      xlabel, ylabel: axis labels.
      logx, logy: logarithmic axes.

    Returns:
      The matplotlib Axes.

    Raises:
      ValueError: a history without ``column``, arrays without ``sim_t``, or mismatched shapes.
    """
    sim_t, values = _simulated(simulated, sim_t, column, time_column, time_scale)
    exact2, values2 = _curves(t, exact, sim_t, values)
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    t = np.asarray(t, dtype=float)
    for k in range(exact2.shape[1]):
        (line,) = ax.plot(t, exact2[:, k], lw=1.5, label=labels[0] if k == 0 else None)
        ax.plot(
            sim_t,
            values2[:, k],
            "o",
            ms=3,
            mfc="none",
            color=line.get_color(),
            label=labels[1] if k == 0 else None,
        )
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False)
    return ax


def _simulated(simulated, sim_t, column, time_column, time_scale) -> tuple[np.ndarray, np.ndarray]:
    """(times, values) of an array with its ``sim_t`` or of a history's ``column``."""
    if hasattr(simulated, "column"):
        if column is None:
            raise ValueError("column must name the history column to plot")
        values = np.asarray(simulated.column(column), dtype=float)
        return np.asarray(simulated.column(time_column), dtype=float) * float(time_scale), values
    if sim_t is None:
        raise ValueError("sim_t must give the times of the simulated values")
    return np.asarray(sim_t, dtype=float), np.asarray(simulated, dtype=float)


def _curves(t, exact, sim_t: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``exact`` (T, k) and ``values`` (K, k) as 2-D arrays, their shapes checked."""
    t = np.asarray(t, dtype=float)
    exact = np.asarray(exact, dtype=float)
    if exact.shape[:1] != t.shape or exact.ndim > 2:
        raise ValueError(
            f"exact must have shape (T,) or (T, k) with T = {t.shape}, got {exact.shape}"
        )
    if values.shape[:1] != sim_t.shape or values.ndim > 2:
        raise ValueError(
            f"simulated values must have shape (K,) or (K, k) with K = {sim_t.shape}, "
            f"got {values.shape}"
        )
    exact2, values2 = exact.reshape(len(t), -1), values.reshape(len(sim_t), -1)
    if exact2.shape[1] != values2.shape[1]:
        raise ValueError(f"exact has {exact2.shape[1]} curves but simulated has {values2.shape[1]}")
    return exact2, values2
