"""The plots take results, not models, and return figures with the expected panels."""

import numpy as np
import pytest

from metrics import feature_decomposition
from metrics.plots import plot_feature_decomposition, plot_metric_history


def test_plots():
    rng = np.random.default_rng(0)
    phi = rng.normal(size=(400, 8))  # shapes of test_decomposition: compiled once
    y = np.eye(3)[rng.integers(0, 3, 400)]
    res = feature_decomposition(phi, phi, phi @ rng.normal(size=(8, 4)), y)
    as_dict = {"cum_quality": None, "cum_utilization": [0.5, 1.0], "relative_intensity": [1, 0.1]}
    fig = plot_feature_decomposition({"rich": res, "lazy": as_dict})
    assert len(fig.axes) == 3 and fig.axes[0].get_xscale() == "log"
    assert "D_{LR}" in fig.axes[1].get_legend().get_texts()[0].get_text()
    fig2 = plot_metric_history(
        [0, 1, 2], {"dlr": {"a": [1, 0.5, 0.2]}, "nc1": [3, 2, 1]}, logy=["nc1"]
    )
    assert len(fig2.axes) == 2 and fig2.axes[1].get_yscale() == "log"
    with pytest.raises(ValueError, match="shape"):
        plot_metric_history([0, 1], {"dlr": [1, 2, 3]})
