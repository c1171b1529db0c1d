"""Every figure labels itself: the figures of a few cheap runs, checked before they are saved.

Each axes has x and y labels; an axes with several series has a legend (or the figure a colour
bar saying what the colours mean); every colour bar has a label; titles do not overlap; and no
line is too light to see on white (the checks: figure_checks.py). kunin-single-neuron's figures
are checked on its tiny run in test_exp_single_neuron.py.
"""

from lrrich import registry
from lrrich.runner import run_experiment
from lrrich.sweep import parse_grid, run_sweep
from tests.lrrich import figure_checks, toy_experiment

_toy = toy_experiment.autouse_fixture()
figures = figure_checks.saved_figures_fixture()
_check, _problems = figure_checks.check, figure_checks.problems


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
