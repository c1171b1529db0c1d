"""grokking-mlp: a tiny run, the delay bookkeeping, the Table 6.1 knobs,
and the verdicts of recorded delays."""

import dataclasses

import numpy as np
import pytest

from lrrich import registry
from lrrich.claims import judge_all, measured
from lrrich.experiments import _measure
from lrrich.experiments import grokking_mlp as exp

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
    assert _measure.first_step(steps, vals, 0.9) == 20.0
    assert _measure.first_step(steps, vals, 0.99) == 30.0
    assert _measure.first_step(steps, vals, 0.999) is None


def test_variants_move_exactly_the_table_6_1_knob():
    cfg = exp.Config()
    rows = {
        v: tuple(
            getattr(exp.variant_train_config(cfg, v), k)
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
    tc = exp.variant_train_config(cfg, "default")
    assert (tc.optimizer, tc.lr, tc.weight_decay, tc.batch_size) == ("adam", 1e-3, 1e-4, 128)
    with pytest.raises(ValueError, match="unknown variant"):
        exp.variant_train_config(cfg, "nope")


def test_registered_with_small_and_paper_scales():
    e = registry.get("grokking-mlp")
    assert e.config("paper").dataset == "mnist" and e.config("small").dataset == "mnist5k"
    assert e.config("small").n_train == 1000  # T §6.4.3: 1,000 MNIST images


def test_tiny_run_writes_results_and_fixes_generalise_first(tmp_path):
    # exp.run, not the runner: this tiny default never fits, and its NaN delay is what the
    # record holds (a report of NaN per-seed values is the engine's to render)
    res = exp.run(TINY, tmp_path / "r")
    exp.plot(res, tmp_path / "r")
    s = res["summary"]
    assert {"delay_default", "max_delay_fixes"} <= set(s)
    for v in TINY.variants:
        assert len(res["curves"][v]["step"]) == TINY.steps // TINY.log_every + 1
        assert 0 <= s[f"dlr_final_{v}"] <= 1
    # Large init (w = 5, S = 3) fits without generalising; both fixes generalise as they fit.
    acc = {v: res["curves"][v]["test_acc"][-1] for v in TINY.variants}
    assert acc["weight_downscaling"] > acc["default"] + 0.15
    assert acc["output_downscaling"] > acc["default"] + 0.15
    rec = res["measured"]
    assert rec["seeds"] == [0] and rec["dataset"] == "mnist5k (256 train / 1,000 test)"
    assert {f"delay_{v}" for v in TINY.variants} <= set(rec["values"])
    rows = judge_all(exp.CLAIMS, rec)
    assert [r["key"] for r in rows] == [
        "default-groks",
        "no-delay-weight-downscaling",
        "no-delay-output-downscaling",
    ]
    assert all(r["verdict"] != "reproduced" for r in rows)  # one seed
    if s["max_delay_fixes"] is not None:
        assert s["delay_default"] is None or s["delay_default"] > s["max_delay_fixes"]
    for name in ("grokking_mlp.png", "grokking_mlp_dlr.png"):
        assert (tmp_path / "r" / name).stat().st_size > 0


def _judged(finished=1.0, **delays):
    values = {f"delay_{v}": d for v, d in delays.items()}
    n = len(next(iter(values.values())))
    values["every_variant_finished"] = [finished] * n
    return {r["key"]: r for r in judge_all(exp.CLAIMS, measured(values))}


def test_recorded_delays_are_judged_by_the_rules():
    nan = float("nan")
    # seeds 0-2 on a GPU (docs/findings/grokking_mlp.md): seed 2 of the default has not
    # generalised; input downscaling did not start in seed 0. The run was cut short, so its
    # t_gen threshold came from the finished variants only, not the protocol's: not tested
    gpu = dict(
        default=[7400, 7300, nan],
        weight_downscaling=[0, 0, 0],
        target_upscaling=[100, 100, 100],
        input_downscaling=[nan, 0, 0],
    )
    cut_short = _judged(finished=0.0, **gpu)
    assert {r["verdict"] for r in cut_short.values()} == {"not tested"}
    assert "threshold is the protocol's" in cut_short["no-delay-target-upscaling"]["reason"]
    # the same delays under the protocol's threshold
    rows = _judged(**gpu)
    assert rows["default-groks"]["verdict"] == "inconclusive"
    assert rows["no-delay-weight-downscaling"]["verdict"] == "reproduced"
    assert rows["no-delay-target-upscaling"]["verdict"] == "reproduced"
    assert rows["no-delay-input-downscaling"]["verdict"] == "inconclusive"
    # seed 0 on the CPU: output downscaling's delay is the bound itself, one seed
    row = _judged(output_downscaling=[200])["no-delay-output-downscaling"]
    assert row["verdict"] == "inconclusive"
    assert _judged(default=[7700, 7300, 7400])["default-groks"]["verdict"] == "reproduced"
