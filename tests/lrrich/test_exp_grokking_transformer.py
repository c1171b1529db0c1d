"""The grokking-transformer experiment at a tiny scale: structure, figures, report, resume."""

import dataclasses
import json

import numpy as np
import pytest

from lrrich import registry
from lrrich.experiments import grokking_transformer as gt
from lrrich.runner import run_experiment

TINY = gt.Config(
    p=11,
    train_fraction=0.5,
    num_layers=1,
    d_model=32,
    num_heads=2,
    batch_size=32,
    lr=3e-3,
    steps=40,
    log_every=10,
    decomposition_steps=(10, 40),
    checkpoint_every=20,
)


def test_registered_with_paper_values_and_the_paper_setting():
    exp = registry.get("grokking-transformer")
    assert exp.paper == {
        "dlr_before": 0.51,
        "dlr_after": 0.11,
        "test_acc_before": 0.052,
        "test_acc_after": 0.998,
    }
    small = exp.config("small")
    # D App. F: p = 97, 50 % (4,656 equations), batch 512, AdamW (0.9, 0.98).
    assert (small.p, small.train_fraction, small.batch_size) == (97, 0.5, 512)
    assert (small.lr, small.b1, small.b2, small.warmup_steps) == (1e-3, 0.9, 0.98, 10)
    assert (small.num_layers, small.d_model, small.num_heads) == (2, 128, 4)
    # D App. F.4: MSE on one-hot targets; the paper scale keeps its target scale 1.
    assert small.loss == "mse" and exp.config("paper").target_scale == 1.0
    assert small.decomposition_steps[0] == 200 and small.steps <= 10_000


def test_tiny_run_writes_results_figures_report(tmp_path):
    res = run_experiment("grokking-transformer", TINY, tmp_path / "r")
    s = res["summary"]
    for key in gt.PAPER:
        assert 0.0 <= s[key] <= 1.0
    assert s["n_train"] == 55  # half of the 11·10 equations
    c = res["curves"]
    assert c["step"] == [0, 10, 20, 30, 40]
    assert all(len(c[k]) == 5 for k in c)
    # Headline numbers are read off the logged curves at the decomposition steps.
    assert s["dlr_before"] == c["dlr_test"][1] and s["dlr_after"] == c["dlr_test"][4]
    assert s["test_acc_after"] == c["test_acc"][4]
    rows = {r["quantity"]: r for r in res["comparison"]}
    # steps 200 / 3,000 (the paper's reading) are not logged here: the run's own steps, and
    # the values are not compared (not the paper's protocol)
    row = rows["test D_LR at steps 10 / 40"]
    assert row["measured"] == f"{s['dlr_before']:.2f} / {s['dlr_after']:.2f}"
    assert row["verdict"] != "reproduced" and "not the paper's protocol" in row["criterion"]
    assert (row["reference"]["n"], row["reference"]["p"], row["reference"]["rank"]) == (55, 32, 11)
    assert all(r["dataset"].startswith("a / b mod 11") for r in rows.values())
    # read off the paper's protocol: the accuracy row names the grid that decided why
    assert gt.S1_GRID in rows["test accuracy at steps 10 / 40"]["note"]
    # The decomposition's D_LR (full test set) is the logged one (eval subset = full set here).
    d = res["decomposition"]
    assert set(d) == {"10", "40"}
    np.testing.assert_allclose(d["40"]["dlr"], c["dlr_test"][4], rtol=1e-4, atol=1e-6)
    rel = np.asarray(d["40"]["relative_intensity"])
    assert rel.shape == (32,) and rel[0] == pytest.approx(1.0) and np.all(np.diff(rel) <= 1e-6)
    # Q̂_k ≥ 0, so Π̂(k) is non-decreasing (it exceeds 1 only because S_fit ≠ S_eval here).
    assert np.all(np.diff(np.asarray(d["40"]["cum_utilization"])) >= -1e-6)
    # The network fits its 55 training equations better than at step 10 (memorisation starts).
    assert s["train_acc_after"] > s["train_acc_before"]
    for name in ("grokking.png", "decomposition.png", "report.md"):
        assert (tmp_path / "r" / name).stat().st_size > 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert "dlr_before" in md and "0.51" in md

    # An interrupted run resumes from its checkpoints and saved decompositions.
    (tmp_path / "r" / "results.json").unlink()
    again = run_experiment("grokking-transformer", TINY, tmp_path / "r", resume=True)
    assert again["curves"] == res["curves"]
    assert again["decomposition"] == res["decomposition"]
    saved = json.loads((tmp_path / "r" / "decomposition" / "step10.json").read_text())
    assert saved["dlr"] == res["decomposition"]["10"]["dlr"]


def test_accuracy_row_at_the_papers_protocol_compares_values():
    """At S = 1, read at steps 200 / 3,000, the values are judged and the grid note is absent."""
    cfg = gt.SCALES["paper"]
    steps = list(range(0, 3001, 100))
    curves = {
        "step": steps,
        "dlr_test": [0.5 if t <= 200 else 0.12 for t in steps],
        "test_acc": [0.05 if t <= 200 else 0.99 for t in steps],
    }
    s = {"step_before": 200, "step_after": 3000, "dlr_before": 0.5, "dlr_after": 0.12}
    s |= {"test_acc_before": 0.05, "test_acc_after": 0.99}
    rows = {r["quantity"]: r for r in gt.comparison(s, cfg, 4656, 4656, curves)}
    acc = rows["test accuracy at steps 200 / 3000"]
    assert acc["verdict"] == "reproduced" and gt.S1_GRID not in acc["note"]
    assert rows["test D_LR at steps 200 / 3000"]["verdict"] == "reproduced"


def test_bad_decomposition_steps_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="multiple of log_every"):
        gt.run(dataclasses.replace(TINY, decomposition_steps=(15, 40)), tmp_path)
    with pytest.raises(ValueError, match="two steps"):
        gt.run(dataclasses.replace(TINY, decomposition_steps=(10,)), tmp_path)
