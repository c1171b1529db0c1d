"""weight-decay (T Fig 7.2(b)): a tiny run end to end, its three rows and their verdicts."""

import dataclasses

import pytest

from lrrich import registry
from lrrich.experiments import weight_decay as exp
from lrrich.runner import run_experiment


@pytest.mark.slow  # 4 MLPs in one train_many program and 4 measures: 14 s at load ~1
def test_tiny_run_writes_the_three_rows(tmp_path):
    e = registry.get("weight-decay")
    cfg = dataclasses.replace(
        e.config("small"),
        model="mlp",  # the ResNet18 compiles for a minute: the tiny run uses the MLP
        width=16,
        depth=1,
        seeds=2,
        n_train=128,
        n_test=100,
        epochs=2,
        step_every_epochs=1,
        weight_decays=(0.0, 0.1),
    )
    res = run_experiment(e, cfg, tmp_path / "run")
    assert len(res["points"]) == 4 and res["summary"]["seeds"] == 2
    assert {"dlr_wd0", "dlr_wd0.1", "test_acc_wd0", "test_acc_wd0.1"} <= set(res["summary"])
    rows = res["comparison"]
    assert [r["quantity"] for r in rows] == [
        "test D_LR, wd 0.1 vs 0",
        "test accuracy, wd 0.1 vs 0",
        "test D_LR at wd 0",
    ]
    assert all(r["criterion"].startswith("T §7.3") and r["n_seeds"] == 2 for r in rows)
    assert set(rows[0]["values"]) == {"wd=0", "wd=0.1"}
    assert "Welch" in rows[1]["tolerance"] and rows[1]["reference"] is None
    assert (rows[0]["reference"]["n"], rows[0]["reference"]["p"]) == (100, 16)
    assert (tmp_path / "run" / "weight_decay.png").exists()


def _points(dlr0, dlr1, acc0, acc1):
    pts = {}
    for wd, dlrs, accs in ((0.0, dlr0, acc0), (0.37, dlr1, acc1)):
        for seed, (d, a) in enumerate(zip(dlrs, accs, strict=True)):
            pts[f"{wd},{seed}"] = dict(
                weight_decay=wd, seed=seed, dlr=d, test_acc=a, train_acc=1.0, n_features=32
            )
    return pts


def test_verdicts():
    from nets.data import load_digits

    cfg = dataclasses.replace(exp.Config(), weight_decays=(0.0, 0.37))
    rows = exp.comparison(
        _points((0.09, 0.08, 0.085), (0.05, 0.04, 0.045), (0.90, 0.91, 0.9), (0.92, 0.93, 0.92)),
        cfg,
        load_digits(),
    )
    assert [r["verdict"] for r in rows] == ["reproduced"] * 3
    assert all(r["criterion"].startswith("T §7.3") and r["n_seeds"] == 3 for r in rows)
    assert rows[0]["values"] == {"wd=0": [0.09, 0.08, 0.085], "wd=0.37": [0.05, 0.04, 0.045]}
    assert rows[1]["reference"] is None and rows[2]["values"] == [0.09, 0.08, 0.085]
    assert (rows[0]["reference"]["p"], rows[0]["reference"]["rank"]) == (32, 10)
    rows = exp.comparison(
        _points((0.2, 0.2, 0.2), (0.3, 0.31, 0.3), (0.9, 0.9, 0.9), (0.88, 0.91, 0.87)),
        cfg,
        load_digits(),
    )
    assert [r["verdict"] for r in rows] == ["not reproduced", "inconclusive", "not reproduced"]


def test_paper_scale_is_the_thesis_setting():
    c = registry.get("weight-decay").config("paper")
    assert (c.dataset, c.model, c.width, c.epochs, c.lr) == ("cifar10", "resnet18", 64, 200, 0.05)
    assert c.weight_decays == (0.0, 1e-4, 5e-4, 1e-3)
    with pytest.raises(ValueError, match="increasing"):
        exp.run(dataclasses.replace(c, weight_decays=(1e-3, 0.0)), None)
