"""The figures of trained grid points: training curves as seed bands, the feature decomposition."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np


def plot_points(
    points: dict[str, dict],
    run_dir: Path,
    stem: str,
    title: str,
    seed_histories: dict[str, list[dict]] | None = None,
) -> list[Path]:
    """``<stem>_training.png`` (D_LR, accuracy and loss vs epoch per point) and
    ``<stem>_features.png`` (Π*(k), Π̂(k), ρ_k/ρ_1 per point, T Fig. 2.3 style).

    With ``seed_histories`` (point → one history per seed,
    :func:`~lrrich.experiments._seeds.seed_curves`) every curve is the seed mean as a line and
    the range over the seeds as a band.
    """
    import matplotlib.pyplot as plt

    from lrrich.io import save_figure
    from metrics import plot_feature_decomposition

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), constrained_layout=True)
    for label, r in points.items():
        runs = (seed_histories or {}).get(label) or [r["history"]]
        n = f" ({len(runs)} seeds)" if len(runs) > 1 else ""
        color = band(axes[0], runs, "dlr_test", f"{label}{n}", marker="o")
        band(axes[0], runs, "dlr_train", None, color=color, ls=":")
        band(axes[1], runs, "train_acc", None, color=color, ls=":")
        band(axes[1], runs, "test_acc", None, color=color, marker="o")
        band(axes[2], runs, "loss", None, color=color)
    axes[0].axhline(0.1, color="grey", lw=0.8, ls="--")
    axes[0].set(xlabel="epoch", ylabel="D_LR (test; dotted: train)", ylim=(0, 1), title=title)
    axes[1].set(xlabel="epoch", ylabel="accuracy (test; dotted: train)", ylim=(0, 1.02))
    axes[2].set(xlabel="epoch", ylabel="training loss", yscale="log")
    axes[0].legend(fontsize=8)
    paths = [save_figure(fig, Path(run_dir) / f"{stem}_training.png")]
    decomp = {k: r["decomposition"] for k, r in points.items() if "decomposition" in r}
    if decomp:
        fig = plot_feature_decomposition(decomp)
        paths.append(save_figure(fig, Path(run_dir) / f"{stem}_features.png"))
    return paths


def band(ax, runs: list[dict], key: str, label, *, x="epoch", color=None, ls="-", marker=None):
    """The seed mean of ``key`` vs ``x`` as a line, the range over the seeds as a band; returns
    the line's colour."""
    length = min(len(h[key]) for h in runs)
    xs = np.asarray(runs[0][x][:length], float)
    v = np.array([[np.nan if y is None else y for y in h[key][:length]] for h in runs], float)
    with warnings.catch_warnings():  # a log point with no value in any seed (loss at step 0)
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, low, high = np.nanmean(v, 0), np.nanmin(v, 0), np.nanmax(v, 0)
    (line,) = ax.plot(xs, mean, ls=ls, marker=marker, ms=3, color=color, label=label)
    if len(runs) > 1:
        ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.2)
    return line.get_color()


def seed_dots(ax, xs, values, fmt: str = "s-", *, color="C0", label=None, skip_nan=False) -> None:
    """Every seed's value at each x as a grey dot and their mean as ``fmt``; ``values`` holds
    one list of per-seed values per x (None, an undefined value read back from JSON, is NaN;
    ``skip_nan``: the mean of the defined values, so one diverged seed does not blank it)."""
    vals = [np.asarray([np.nan if v is None else v for v in vs], float) for vs in values]
    for x, vs in zip(xs, vals, strict=True):
        ax.plot([x] * len(vs), vs, "o", color="grey", ms=3)
    with warnings.catch_warnings():  # skip_nan: an x undefined in every seed has no mean
        warnings.simplefilter("ignore", RuntimeWarning)
        means = [np.nanmean(vs) if skip_nan else vs.mean() for vs in vals]
    ax.plot(xs, means, fmt, color=color, label=label)


def step_figure(
    panels: dict, *, log: bool = True, cmap: str | None = None, size=(4.0, 3.4), **axis
):
    """(figure, its axes) of logged values against the optimizer step: a panel per ``title →
    lines`` of ``panels``, a line per ``(curve, key, label)`` (``curve``: a run's logged columns,
    ``"step"`` among them), the legend on the first panel; ``log``: a log step axis (step 0 at
    1); ``cmap``: a panel's lines in order along this colour map (default: the colour cycle);
    ``size``: (width, height) of a panel; ``axis``: every panel's ``ax.set`` (``ylabel``, …)."""
    import matplotlib as mpl
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(size[0] * len(panels), size[1]),
                             squeeze=False, layout="constrained")  # fmt: skip
    for ax, (title, lines) in zip(axes[0], panels.items(), strict=True):
        for n, (curve, key, label) in enumerate(lines):
            steps = np.asarray(curve["step"], float)
            color = mpl.colormaps[cmap](n / max(len(lines) - 1, 1)) if cmap else None
            ax.plot(np.maximum(steps, 1.0) if log else steps, curve[key], color=color, label=label)
        ax.set(xscale="log" if log else "linear", xlabel="step", title=title, **axis)
    axes[0, 0].legend(fontsize=7)
    return fig, axes[0]
