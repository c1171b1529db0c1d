"""The λ-balanced experiment on a tiny grid: GD tracks the closed form; figures and report exist."""

from lrrich.registry import get
from lrrich.runner import run_experiment


def test_lambda_balanced_tiny(tmp_path):
    exp = get("lambda-balanced")
    cfg = exp.config(
        "small",
        {"lams": "0,16", "t_end": "4", "lr": "0.01", "n_points": "20",
         "grid_lams": "-4,0,4", "grid_scales": "0.01,1"},
    )  # fmt: skip
    res = run_experiment(exp, cfg, tmp_path)
    errs = {k: v for k, v in res["summary"].items() if "theory - GD" in k}
    assert errs and max(errs.values()) < 0.1, errs  # GD with lr 0.01 vs gradient flow
    assert len(list(tmp_path.glob("*.png"))) >= 2 and (tmp_path / "report.md").exists()
    gd, kernel = res["comparison"]
    assert gd["criterion"].startswith("P App. G") and "gd_discretisation" in gd["tolerance"]
    assert kernel["verdict"] == "reproduced"  # λ = 0 moves the kernel more than |λ| = 4
    assert kernel["values"]["lambda 0"][0] > kernel["values"]["max |lambda|"][0]
