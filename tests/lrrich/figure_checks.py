"""Checks that a figure labels itself, shared by the tests that run an experiment (no tests here).

Each axes has x and y labels; an axes with several series has a legend (or the figure a colour
bar saying what the colours mean); every colour bar has a label; titles do not overlap; and no
line is too light to see on white. ``figures = figure_checks.saved_figures_fixture()`` in a test
module gives its tests a ``figures`` fixture: the figures the code under test saves, kept open.
"""

import itertools

import matplotlib.colors as mcolors
import pytest

from lrrich import io

MAX_LUMINANCE = 0.6
"""Relative luminance (WCAG) above which a line on a white background is hard to see; the
light grey of the old δ = 0 line (coolwarm's middle) is 0.74, matplotlib's "0.6" grey 0.32."""


def saved_figures_fixture():
    """A ``figures`` fixture: the (file name, figure) pairs saved through ``io.save_figure``."""

    @pytest.fixture
    def figures(monkeypatch):
        import matplotlib.pyplot as plt

        saved = []

        def keep(fig, path, dpi=40):
            fig.canvas.draw()  # lay out before the checks read positions
            fig.savefig(path, dpi=dpi)
            saved.append((path.name, fig))
            return path

        monkeypatch.setattr(io, "save_figure", keep)
        yield saved
        for _, fig in saved:
            plt.close(fig)

    return figures


def luminance(colour) -> float:
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in
               mcolors.to_rgb(colour))  # fmt: skip
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def problems(name: str, fig) -> list[str]:
    """What keeps ``fig`` (saved as ``name``) from labelling itself; empty when nothing does."""
    out = []
    colourbars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    for k, ax in enumerate(fig.axes):
        where = f"{name} axes {k} ({ax.get_title() or ax.get_ylabel()!r})"
        if not ax.get_visible():
            continue
        if ax in colourbars:
            if not (ax.get_ylabel() or ax.get_xlabel()):
                out.append(f"{where}: colour bar without a label")
            continue
        if not ax.get_xlabel() or not ax.get_ylabel():
            out.append(f"{where}: x label {ax.get_xlabel()!r}, y label {ax.get_ylabel()!r}")
        series = [line for line in ax.lines if len(line.get_xdata()) > 0] + list(ax.containers)
        if len(series) > 1 and ax.get_legend() is None and not colourbars:
            out.append(f"{where}: {len(series)} series and neither a legend nor a colour bar")
        if ax.images and not colourbars:
            out.append(f"{where}: a colour map without a colour bar")
        for line in ax.lines:
            if (
                line.get_linestyle() not in ("None", "")
                and luminance(line.get_color()) > MAX_LUMINANCE
            ):
                out.append(f"{where}: line {line.get_label()!r} too light on white")
    renderer = fig.canvas.get_renderer()
    titles = [t for t in [fig._suptitle, *(ax.title for ax in fig.axes)] if t and t.get_text()]
    for a, b in itertools.combinations(titles, 2):
        if a.get_window_extent(renderer).overlaps(b.get_window_extent(renderer)):
            out.append(f"{name}: titles {a.get_text()!r} and {b.get_text()!r} overlap")
    return out


def check(figures, expected: set[str]) -> None:
    """The saved figures are exactly ``expected`` and each labels itself."""
    assert {name for name, _ in figures} == expected
    found = [p for name, fig in figures for p in problems(name, fig)]
    assert not found, "\n".join(found)
