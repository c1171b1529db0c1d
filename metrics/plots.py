"""Figures of the feature metrics; they take results (arrays, dicts, named tuples), never models."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure


def _get(res, name):
    value = res[name] if isinstance(res, Mapping) else getattr(res, name)
    return None if value is None else np.asarray(value)


def plot_feature_decomposition(
    results: Mapping[str, object], *, max_k: int | None = None
) -> Figure:
    """Three-panel figure of thesis T Fig. 2.3: Π*(k), Π̂(k) and ρ_k/ρ_1 against k (log-x).

    Args:
      results: label → :class:`~metrics.decomposition.FeatureDecomposition` or a dict with keys
        ``cum_quality`` (may be None), ``cum_utilization``, ``relative_intensity`` and optionally
        ``dlr`` (shown in the legend in square brackets, as in the thesis).
      max_k: plot only k ≤ max_k (the thesis stops at k ~ 10³ ≪ n_eval).

    Returns:
      The matplotlib Figure (1×3 axes).
    """
    if not results:
        raise ValueError("results is empty: pass at least one label → decomposition")
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), constrained_layout=True)
    titles = (
        "cumulative quality $\\Pi^*(k)$",
        "cumulative utilization $\\hat\\Pi(k)$",
        "relative intensity $\\rho_k/\\rho_1$",
    )
    keys = ("cum_quality", "cum_utilization", "relative_intensity")
    for label, res in results.items():
        d = (
            _get(res, "dlr")
            if (isinstance(res, Mapping) and "dlr" in res) or hasattr(res, "dlr")
            else None
        )
        name = f"{label} [$D_{{LR}}$={float(d):.3g}]" if d is not None else str(label)
        for ax, key in zip(axes, keys, strict=True):
            y = _get(res, key)
            if y is None:
                continue
            y = y[:max_k] if max_k else y
            ax.plot(np.arange(1, len(y) + 1), y, label=name)
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("k (feature index, by intensity)")
        ax.set_title(title)
    axes[0].set_ylim(0, 1.02)
    axes[1].set_ylim(0, 1.02)
    axes[2].set_yscale("log")
    axes[1].legend(fontsize=8)
    return fig


def plot_metric_history(
    epochs: Sequence[float], metrics: Mapping[str, Sequence[float]], *, logy: Sequence[str] = ()
) -> Figure:
    """Metric-vs-epoch figure, one panel per metric (e.g. D_LR, S_init, ‖θ‖², NC1, accuracy).

    Args:
      epochs: (T,) epochs (or steps) at which the metrics were logged.
      metrics: name → (T,) values, or name → {run label → (T,) values} to overlay several runs.
      logy: names of metrics drawn on a log y-axis (e.g. ``("nc1", "param_norm")``).

    Returns:
      The matplotlib Figure.
    """
    if not metrics:
        raise ValueError("metrics is empty: pass at least one name → values")
    x = np.asarray(epochs)
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(3.6 * len(metrics), 3.2), constrained_layout=True, squeeze=False
    )
    for ax, (name, series) in zip(axes[0], metrics.items(), strict=True):
        runs = series if isinstance(series, Mapping) else {None: series}
        for label, y in runs.items():
            y = np.asarray(y)
            if y.shape != x.shape:
                raise ValueError(f"metric {name!r}: shape {y.shape} != epochs shape {x.shape}")
            ax.plot(x, y, marker="o", ms=3, label=label)
        if name in logy:
            ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_title(name)
        if any(k is not None for k in runs):
            ax.legend(fontsize=8)
    return fig
