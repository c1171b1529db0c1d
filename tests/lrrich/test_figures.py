"""Every figure labels itself: the figures of a few cheap runs, checked before they are saved.

Each axes has x and y labels; an axes with several series has a legend (or the figure a colour
bar saying what the colours mean); every colour bar has a label; titles do not overlap; and no
line is too light to see on white.
"""

import itertools

import matplotlib.colors as mcolors
import pytest

from lrrich import io, registry
from lrrich.runner import run_experiment
from lrrich.sweep import parse_grid, run_sweep
from tests.lrrich import toy_experiment

_toy = toy_experiment.autouse_fixture()
# Relative luminance (WCAG) above which a line on a white background is hard to see; the
# light grey of the old δ = 0 line (coolwarm's middle) is 0.74, matplotlib's "0.6" grey 0.32.
_MAX_LUMINANCE = 0.6


@pytest.fixture
def figures(monkeypatch):
    """The matplotlib figures the code under test saves, kept open for inspection."""
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


def _luminance(colour) -> float:
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in
               mcolors.to_rgb(colour))  # fmt: skip
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _problems(name: str, fig) -> list[str]:
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
                and _luminance(line.get_color()) > _MAX_LUMINANCE
            ):
                out.append(f"{where}: line {line.get_label()!r} too light on white")
    renderer = fig.canvas.get_renderer()
    titles = [t for t in [fig._suptitle, *(ax.title for ax in fig.axes)] if t and t.get_text()]
    for a, b in itertools.combinations(titles, 2):
        if a.get_window_extent(renderer).overlaps(b.get_window_extent(renderer)):
            out.append(f"{name}: titles {a.get_text()!r} and {b.get_text()!r} overlap")
    return out


def _check(figures, expected: set[str]) -> None:
    assert {name for name, _ in figures} == expected
    problems = [p for name, fig in figures for p in _problems(name, fig)]
    assert not problems, "\n".join(problems)


def test_kunin_single_neuron_figures_label_themselves(tmp_path, figures):
    exp = registry.get("kunin-single-neuron")
    small = {"deltas": "-2,0,2", "n_times": "20", "t_max": "20", "bias_deltas": "-1,0,1"}
    run_experiment(exp, exp.config("small", small), tmp_path)
    _check(figures, {"fig3_mu_phi_S.png", "fig4_beta_implicit_bias.png"})


def test_demo_figures_label_themselves(tmp_path, figures, caplog):
    exp = registry.get("demo")
    tiny = {"epochs": "1", "n_train": "256", "width": "16", "eval_size": "64", "n_times": "20"}
    with caplog.at_level("INFO", logger="lrrich"):
        res = run_experiment(exp, exp.config("small", tiny), tmp_path)
    phases = [r.getMessage()[:10] for r in caplog.records if r.name == "lrrich.experiments.demo"]
    assert phases == ["demo [1/3]", "demo [2/3]", "demo [3/3]"]  # a progress line per phase
    _check(figures, {"modes.png", "rich_vs_lazy.png"})
    # the curves use a subset of the test set, the summary all of it: the legend says which
    legend = [t.get_text() for t in dict(figures)["rich_vs_lazy.png"].axes[0].get_legend().texts]
    assert "rich: 64 fixed test images" in legend
    assert "rich: final, all 1,000 test images" in legend
    assert "exact modes match gradient flow" in exp.verdict(res)


def test_sweep_figure_labels_itself(tmp_path, figures):
    run_sweep("toy", parse_grid(["scale=1,2,4", "offset=0,1"]), tmp_path, progress=False)
    _check(figures, {"sweep.png"})


def test_the_checks_catch_the_old_faults(figures):
    """A figure with the faults the checks exist for fails them (the checks are not vacuous)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    axes[0].plot([0, 1], [0, 1], color=(0.87, 0.86, 0.86))  # coolwarm's middle grey
    axes[0].plot([0, 1], [1, 0])
    axes[0].set_title("left panel title that is long enough to reach the other one")
    axes[1].set_title("right panel title that is long enough to reach the other one")
    fig.canvas.draw()
    problems = "\n".join(_problems("bad.png", fig))
    plt.close(fig)
    assert "x label ''" in problems and "neither a legend nor a colour bar" in problems
    assert "too light on white" in problems and "overlap" in problems
