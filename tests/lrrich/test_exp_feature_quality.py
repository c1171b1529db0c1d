"""feature-quality (D Fig 7 / T Fig 7.7): a tiny real-digit run, its summary and comparison rows."""

import dataclasses

from lrrich import registry
from lrrich.experiments import _comparison, feature_quality
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
    rows = res["comparison"]
    assert [r["quantity"].split(",")[0].split("(")[1] for r in rows] == [
        "intensity",
        "final intensity",
        "initial intensity",
    ]
    for r in rows:
        assert r["criterion"].startswith("D §5") and "Spearman test" in r["tolerance"]
        assert r["n_seeds"] == 2 and r["reference"] is None and r["verdict"] in _comparison.VERDICTS
        assert set(r["values"]) == {"spearman", "p_value", "spearman_all_features"}
        assert all(len(v) == 2 for v in r["values"].values())
    assert (tmp_path / "run" / "feature_quality.png").exists()


def test_verdict_of_a_positive_correlation():
    v = feature_quality._verdict
    assert v([0.5, 0.6], [0.01, 0.02]) == "reproduced"
    assert v([0.5, 0.2], [0.01, 0.3]) == "direction reproduced"
    assert v([-0.1, -0.3], [0.6, 0.9]) == "not reproduced"
    assert v([0.4, -0.3], [0.2, 0.9]) == "inconclusive"


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
