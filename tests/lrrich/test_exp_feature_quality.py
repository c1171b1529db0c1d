"""feature-quality (D Fig 7 / T Fig 7.7): a tiny real-digit run, its summary and per-seed record."""

import dataclasses

from lrrich import registry
from lrrich.claims import judge_all, measured
from lrrich.experiments import feature_quality
from lrrich.runner import run_experiment


def test_tiny_run_rows_carry_seeds_tests_and_values(tmp_path):
    exp = registry.get("feature-quality")
    cfg = dataclasses.replace(
        exp.config("small"),
        dataset="digits",
        n_train=200,
        width=24,
        depth=1,
        epochs=1,
        batch_size=50,
        log_points=2,
        n_fit=100,
        n_eval=100,
        seeds=2,
    )
    res = run_experiment(exp, cfg, tmp_path / "run")
    s = res["summary"]
    assert s["seeds"] == 2 and s["n_features"] == 24
    assert -1 <= s["end_intensity_quality"] <= 1 and 0 < s["early_step"] <= 200 // 50
    traj = res["trajectories"]
    n_t = len(traj["step"])
    assert traj["step"][0] == 0 and n_t >= 3
    assert [len(traj["quality"]), len(traj["quality"][0])] == [n_t, 24]
    rec = res["measured"]
    assert rec["seeds"] == [0, 1]
    for key in ("end_intensity_quality", "final_intensity_rate", "initial_intensity_rate"):
        for suffix in ("", "_p", "_all", "_significant"):
            assert len(rec["values"][key + suffix]) == 2
    assert [r["key"] for r in res["comparison"]] == [c.key for c in feature_quality.CLAIMS]
    assert all(r["verdict"] != "reproduced" for r in res["comparison"])  # two seeds
    assert (tmp_path / "run" / "feature_quality.png").exists()


def test_recorded_correlations_are_judged_within_each_seed():
    def judged(significant):
        values = {f"{k}_significant": significant for k in feature_quality._CORRELATIONS}
        values |= {k: [0.9 + 0.01 * i for i in range(len(significant))] for k in feature_quality._CORRELATIONS}  # fmt: skip
        return {r["verdict"] for r in judge_all(feature_quality.CLAIMS, measured(values))}

    # seeds 0-2 of docs/findings/feature_quality.md: every one-sided p < 0.01
    assert judged([1.0, 1.0, 1.0]) == {"reproduced"}
    assert judged([1.0, 0.0, 1.0]) == {"inconclusive"}
    assert judged([0.0, 0.0, 0.0]) == {"not reproduced"}
    assert judged([1.0, 1.0]) == {"inconclusive"}  # two seeds


def test_paper_scale_is_d_fig7_setting():
    c = registry.get("feature-quality").config("paper")
    assert (c.dataset, c.model, c.epochs, c.schedule, c.step_every_epochs) == (
        "cifar100",
        "resnet18",
        400,
        "step",
        60,
    )
    assert (c.momentum, c.batch_size, c.output_scale) == (0.9, 128, 0.1)
