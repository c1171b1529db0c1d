"""The K Fig 3/4 experiment on a tiny config: theory matches simulation, figures and report exist,
and the figures label themselves (figure_checks.py)."""

from lrrich import claims
from lrrich.experiments import single_neuron
from lrrich.registry import get
from lrrich.runner import run_experiment
from tests.lrrich import figure_checks

figures = figure_checks.saved_figures_fixture()


def test_single_neuron_experiment_tiny(tmp_path, figures):
    exp = get("kunin-single-neuron")
    cfg = exp.config(
        "small",
        {"deltas": "-2,0,2", "n_times": "20", "t_max": "20", "bias_deltas": "-1,0,1"},
    )
    res = run_experiment(exp, cfg, tmp_path)
    errs = {k: v for k, v in res["summary"].items() if "err" in k}
    assert errs and max(errs.values()) < 1e-8, errs
    assert list(tmp_path.glob("*.png")) and (tmp_path / "report.md").exists()
    figure_checks.check(figures, {"fig3_mu_phi_S.png", "fig4_beta_implicit_bias.png"})
    m = res["measured"]  # one exact computation: one value per field
    assert m["exact"] and all(len(v) == 1 for v in m["values"].values())
    rows = {r["key"]: r for r in res["comparison"]}
    assert rows["theory-flow"]["verdict"] == "reproduced"
    assert rows["implicit-bias"]["verdict"] == "reproduced"
    s_row = rows["kernel-distance-vs-delta"]
    assert s_row["verdict"] == "reproduced"  # upstream lazy < balanced < downstream
    assert "at δ = -2" in m["scale"] and "at δ = 2" in m["scale"]
    # an error above the closed_form tolerance is a miss of the one computation
    bad = claims.measured({**m["values"], "eq72_error": [2e-8]}, exact=True)
    assert {r["key"]: r["verdict"] for r in claims.judge_all(single_neuron.CLAIMS, bad)}[
        "implicit-bias"
    ] == "not reproduced"
