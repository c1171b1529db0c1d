"""grokking-mlp: a tiny run through the runner, the delay bookkeeping, and the Table 6.1 knobs."""

import dataclasses

import numpy as np
import pytest

from lrrich import io, registry
from lrrich.experiments import grokking_mlp as exp
from lrrich.runner import run_experiment

TINY = dataclasses.replace(
    exp.Config(),
    n_train=256,
    width=64,
    batch_size=32,
    steps=160,
    log_every=20,
    checkpoint_every=80,
    variants=("default", "weight_downscaling", "output_downscaling"),
)


def test_first_step_matches_a_naive_scan():
    steps = np.array([0, 10, 20, 30])
    vals = np.array([0.1, np.nan, 0.95, 0.99])
    assert exp.first_step(steps, vals, 0.9) == 20.0
    assert exp.first_step(steps, vals, 0.99) == 30.0
    assert exp.first_step(steps, vals, 0.999) is None


def test_variants_move_exactly_the_table_6_1_knob():
    cfg = exp.Config()
    rows = {
        v: tuple(
            getattr(exp.train_config(cfg, v), k)
            for k in ("weight_scale", "target_scale", "input_scale", "output_scale")
        )
        for v in exp.VARIANTS
    }
    # T Table 6.1, rows (a)-(e).
    assert rows == {
        "default": (5, 3, 1, 1),
        "weight_downscaling": (1, 3, 1, 1),
        "target_upscaling": (5, 30, 1, 1),
        "input_downscaling": (5, 3, 0.01, 1),
        "output_downscaling": (5, 3, 1, 0.1),
    }
    tc = exp.train_config(cfg, "default")
    assert (tc.optimizer, tc.lr, tc.weight_decay, tc.batch_size) == ("adam", 1e-3, 1e-4, 128)
    with pytest.raises(ValueError, match="unknown variant"):
        exp.train_config(cfg, "nope")


def test_registered_with_small_and_paper_scales():
    e = registry.get("grokking-mlp")
    assert e.config("paper").dataset == "mnist" and e.config("small").dataset == "mnist5k"
    assert e.config("small").n_train == 1000  # T §6.4.3: 1,000 MNIST images


def test_tiny_run_writes_results_and_fixes_generalise_first(tmp_path):
    res = run_experiment("grokking-mlp", TINY, tmp_path / "r")
    s = res["summary"]
    assert set(exp.PAPER) <= set(s)
    for v in TINY.variants:
        assert len(res["curves"][v]["step"]) == TINY.steps // TINY.log_every + 1
        assert 0 <= s[f"dlr_final_{v}"] <= 1
    # Large init (w = 5, S = 3) fits without generalising; both fixes generalise as they fit.
    acc = {v: res["curves"][v]["test_acc"][-1] for v in TINY.variants}
    assert acc["weight_downscaling"] > acc["default"] + 0.15
    assert acc["output_downscaling"] > acc["default"] + 0.15
    rows = {r["quantity"]: r for r in res["comparison"]}
    assert set(rows) == {
        "generalisation delay, default (w = 5, S = 3)",
        "generalisation delay, weight downscaling",
        "generalisation delay, output downscaling",
    }
    assert all(r["dataset"] == "mnist5k (256 train / 1,000 test)" for r in rows.values())
    if s["max_delay_fixes"] is not None:
        assert s["delay_default"] is None or s["delay_default"] > s["max_delay_fixes"]
    for name in ("grokking_mlp.png", "grokking_mlp_dlr.png", "report.md"):
        assert (tmp_path / "r" / name).stat().st_size > 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| delay_default |" in md and "Paper vs measured" in md
    assert io.read_json(tmp_path / "r" / "config.json")["config"]["width"] == 64
