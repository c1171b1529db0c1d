"""The emergence experiment (T Fig 5.1–5.2) at a tiny scale: structure, figures, report, resume."""

import numpy as np

from lrrich import registry
from lrrich.experiments import emergence as em_exp
from lrrich.runner import run_experiment


def test_registered_with_thesis_constants_and_paper_setting():
    exp = registry.get("emergence")
    assert exp.paper == {"B2": 1 / 22, "D_c": 800, "N_c": 4}
    paper = exp.config("paper")
    # T App. C.3: width 1000, η = 0.05, σ = 0.01, batch 4000 (2000 for data), S = 5, n_b = 32, m = 3
    assert (paper.time_width, paper.data_width, paper.lr, paper.init_std) == (
        1000,
        1000,
        0.05,
        0.01,
    )
    assert (paper.time_batch, paper.data_batch, paper.width_batch) == (4000, 2000, 4000)
    assert (paper.S, paper.n_b, paper.m, paper.n_s, paper.alpha) == (5.0, 32, 3, 5, 0.6)
    assert (paper.width_lr, paper.width_weight_decay, paper.n_eval) == (1e-3, 5e-5, 20_000)


def test_tiny_run_structure_figures_report_and_resume(tmp_path):
    cfg = em_exp.SCALES["tiny"]
    res = run_experiment("emergence", cfg, tmp_path / "run", scale="tiny")
    s = res["summary"]
    for k in ("B2", "D_c", "N_c"):
        assert np.isfinite(s[k]) and s[k] > 0
    assert len(s["emergence_step_net"]) == len(s["emergence_step_model"]) == cfg.n_s
    n_t = cfg.time_steps // cfg.time_eval_every + 1
    assert np.asarray(res["time"]["R_net"]).shape == (cfg.n_seeds, n_t, cfg.n_s)
    assert np.asarray(res["time"]["R_model"]).shape == (n_t, cfg.n_s)
    assert np.asarray(res["data"]["R_net"]).shape == (cfg.n_seeds, len(cfg.data_D), cfg.n_s)
    assert np.asarray(res["width"]["R_net"]).shape == (cfg.n_seeds, len(cfg.widths), cfg.n_s)
    # the model curves: R(0) from the init (σ²/S), monotone in T, ordered by skill frequency
    Rm = np.asarray(res["time"]["R_model"])
    np.testing.assert_allclose(Rm[0], cfg.init_std**2 / cfg.S, rtol=1e-12)
    assert np.all(np.diff(Rm, axis=0) >= 0) and np.all(np.diff(Rm, axis=1) <= 0)
    run_dir = tmp_path / "run"
    for name in ("emergence.png", "emergence_calibration.png", "report.md", "results.json"):
        assert (run_dir / name).stat().st_size > 0
    report = (run_dir / "report.md").read_text()
    assert "Paper vs measured" in report and "| D_c | 800 |" in report
    # resume: finished parts are read back from run_dir/parts, no retraining, same numbers
    again = em_exp.run(cfg, run_dir)
    assert again["summary"] == s
