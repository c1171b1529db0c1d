"""scalar-regression (D Fig 12 / T Fig 3.6): a tiny real-digit run, its summary and comparison rows."""

import dataclasses

import pytest

from lrrich import registry
from lrrich.experiments import _comparison
from lrrich.runner import run_experiment


def _tiny(exp, **fields):
    return dataclasses.replace(
        exp.config("small"),
        dataset="digits",
        n_train=200,
        width=16,
        depth=1,
        epochs=1,
        batch_size=50,
        log_points=2,
        seeds=2,
        **fields,
    )


def test_tiny_regression_rows_carry_seeds_tests_and_reference(tmp_path):
    exp = registry.get("scalar-regression")
    res = run_experiment(exp, _tiny(exp, classification=False), tmp_path / "run")
    assert res["summary"]["seeds"] == 2 and res["summary"]["dlr_rank_regression"] == 1
    dlr_row, rho_row, util_row = res["comparison"]
    assert dlr_row["criterion"].startswith("D App. D.3") and "below 0.1" in dlr_row["tolerance"]
    assert dlr_row["reference"]["rank"] == 1 and dlr_row["reference"]["rank_source"] == "measured"
    assert dlr_row["n_seeds"] == 2 and len(dlr_row["values"]) == 2
    for r in (rho_row, util_row):
        assert r["paper"].startswith("2") and "d_eff" in r["tolerance"] and r["n_seeds"] == 2
        assert r["values"]["classification"] == [None, None]  # not trained (NaN is stored as None)
        assert all(v >= 1 for v in r["values"]["regression"])  # D_eff ≥ 1
    assert all(r["verdict"] in _comparison.VERDICTS for r in res["comparison"])


@pytest.mark.slow
def test_tiny_run_rows_carry_seeds_reference_and_both_tasks(tmp_path):
    exp = registry.get("scalar-regression")
    res = run_experiment(exp, _tiny(exp), tmp_path / "run")
    s = res["summary"]
    assert s["seeds"] == 2 and s["dlr_rank_regression"] == 1 and s["dlr_rank_classification"] == 10
    assert len(res["per_seed"]) == 2 and set(res["points"]) == {"regression", "classification"}
    dlr_row, rho_row, util_row = res["comparison"]
    assert dlr_row["criterion"].startswith("D App. D.3") and "below 0.1" in dlr_row["tolerance"]
    assert dlr_row["reference"]["rank"] == 1 and dlr_row["reference"]["rank_source"] == "measured"
    assert dlr_row["n_seeds"] == 2 and len(dlr_row["values"]) == 2
    for r in (rho_row, util_row):
        assert r["paper"].startswith("2") and "d_eff" in r["tolerance"]
        assert set(r["values"]) == {"regression", "classification"} and r["n_seeds"] == 2
    assert all(r["verdict"] in _comparison.VERDICTS for r in res["comparison"])
    assert {"scalar_regression_dlr.png", "scalar_regression_features.png"} <= {
        p.name for p in (tmp_path / "run").glob("*.png")
    }


def test_paper_scale_is_resnet18_on_mnist():
    c = registry.get("scalar-regression").config("paper")
    assert (c.dataset, c.model, c.optimizer, c.lr, c.epochs, c.schedule) == (
        "mnist",
        "resnet18",
        "sgd",
        0.05,
        200,
        "step",
    )
