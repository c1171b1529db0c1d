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
    if hasattr(simulated, "column"):
        if column is None:
            raise ValueError("column must name the history column to plot")
        values = np.asarray(simulated.column(column), dtype=float)
        sim_t = np.asarray(simulated.column(time_column), dtype=float) * float(time_scale)
    else:
        if sim_t is None:
            raise ValueError("sim_t must give the times of the simulated values")
        values = np.asarray(simulated, dtype=float)
        sim_t = np.asarray(sim_t, dtype=float)
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
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    n_curves = exact2.shape[1]
    for k in range(n_curves):
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
