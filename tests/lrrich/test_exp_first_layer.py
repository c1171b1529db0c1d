"""first-layer (P §6.2) at a tiny size on real mnist5k digits: the three regimes train the
parameters they name, and the comparison rows state their test, seeds and reference."""

import dataclasses
import re

import numpy as np
import pytest
from flax import nnx

from lrrich.experiments import first_layer
from lrrich.runner import run_experiment

TINY = dict(n_train=128, width=16, epochs=1, log_points=1, eval_size=128, seeds=2)


def test_tiny_run_trains_the_named_layers_and_judges_over_seeds(tmp_path):
    cfg = dataclasses.replace(first_layer.Config(), **TINY)
    res = run_experiment(first_layer.NAME, cfg, tmp_path / "run")
    per_seed, s = res["per_seed"], res["summary"]
    assert [p["seed"] for p in per_seed] == [0, 1] and s["seeds"] == 2
    for p in per_seed:
        # last layer only: Φ is the initial one exactly; the other two move it
        assert p["last_s_init"] == pytest.approx(0.0, abs=1e-6)
        assert p["first_s_init"] > 1e-4 and p["all_s_init"] > 1e-4
        for regime in first_layer.REGIMES:
            assert 0 <= p[f"{regime}_dlr"] <= 1 and 0 <= p[f"{regime}_test_acc"] <= 1
    assert s["first_dlr"] == pytest.approx(np.mean([p["first_dlr"] for p in per_seed]))
    # random features on n = 1,000 test images, p = 16, C = 10 (metrics.random_feature_dlr)
    assert 0.1 < s["rf_dlr"] < 0.4
    rows = res["comparison"]
    assert [r["quantity"] for r in rows] == [
        "test D_LR first layer only / last layer only",
        "test D_LR all layers / last layer only",
    ]
    for r in rows:
        assert r["verdict"] in ("reproduced", "not reproduced", "inconclusive")
        assert re.search(r"P §6\.2: '", r["criterion"]) and "Welch" in r["tolerance"]
        assert r["n_seeds"] == 2 and len(r["values"]["last layer only"]) == 2
        assert r["reference"]["p"] == 16 and r["reference"]["dlr"] == s["rf_dlr"]
    assert (tmp_path / "run" / "first_layer.png").stat().st_size > 0


def test_first_layer_only_keeps_the_readout_and_refuses_deeper_nets(tmp_path):
    from nets.data import load

    data = load("mnist5k", layout="flat", n_train=64, seed=0)
    cfg = dataclasses.replace(first_layer.Config(), width=8)
    first = first_layer._model(cfg, data, 0, "first")
    last = first_layer._model(cfg, data, 0, "last")
    # the same initialisation in every regime; the readout of 'first' is no longer an nnx.Param
    np.testing.assert_array_equal(first.head.kernel.get_value(), last.head.kernel.get_value())
    assert not isinstance(first.head.kernel, nnx.Param)
    assert isinstance(first.layers[0].kernel, nnx.Param)
    with pytest.raises(ValueError, match="depth must be 1"):
        first_layer.run(dataclasses.replace(cfg, depth=2), tmp_path)
