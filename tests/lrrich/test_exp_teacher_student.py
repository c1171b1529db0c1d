"""The K Fig 1 teacher–student experiment on a tiny grid: structure, figures and report."""

import numpy as np

from lrrich.registry import get
from lrrich.runner import run_experiment


def test_teacher_student_tiny(tmp_path):
    exp = get("teacher-student")
    cfg = exp.config(
        "small",
        {"d": "4", "h": "6", "n_train": "20", "n_test": "50", "taus": "0.1,2.0",
         "deltas": "-1,1", "n_seeds": "1", "steps": "200", "n_save": "4"},
    )  # fmt: skip
    res = run_experiment(exp, cfg, tmp_path)
    assert res["summary"] and all(
        np.isfinite(v) for v in res["summary"].values() if isinstance(v, float)
    )
    assert list(tmp_path.glob("*.png")) and (tmp_path / "report.md").exists()
    rows = res["comparison"]
    assert [r["n_seeds"] for r in rows] == [1, 1]
    assert all(r["criterion"].startswith("K Fig 1(b)") for r in rows)
    # the per-seed final values are the seed-mean grid's (one seed)
    final = res["final"]
    assert rows[1]["values"]["large tau balanced"] == [final["kernel_distance"][-1][1]]
