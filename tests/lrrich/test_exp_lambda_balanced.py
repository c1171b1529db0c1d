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
    m = res["measured"]  # one exact computation: one value per field
    assert m["exact"] and all(len(v) == 1 for v in m["values"].values())
    gd, kernel = res["comparison"]
    assert gd["key"] == "gd-vs-closed-form" and gd["test"].startswith("gd_discretisation")
    assert kernel["verdict"] == "reproduced"  # λ = 0 moves the kernel more than |λ| = 4
    v = kernel["values"]
    assert v["kernel_distance_balanced"][0] > v["kernel_distance_unbalanced"][0]


def test_verdicts_of_the_one_computation():
    from lrrich import claims
    from lrrich.experiments import lambda_balanced as lb_exp

    def verdicts(**values):
        record = claims.measured({k: [v] for k, v in values.items()}, exact=True)
        return {r["key"]: r["verdict"] for r in claims.judge_all(lb_exp.CLAIMS, record)}

    # the small run: GD within 3.6e-3 of the closed form; kernel distance 0.27 vs 7.7e-4
    recorded = dict(
        gd_error=3.6e-3, kernel_distance_balanced=0.27, kernel_distance_unbalanced=7.7e-4
    )
    assert set(verdicts(**recorded).values()) == {"reproduced"}
    assert verdicts(**{**recorded, "gd_error": 0.02})["gd-vs-closed-form"] == "not reproduced"
    swapped = {**recorded, "kernel_distance_unbalanced": 0.3}
    assert verdicts(**swapped)["rich-to-lazy"] == "not reproduced"
