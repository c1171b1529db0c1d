"""vgg-batchnorm and resnet-lr judged over seeds, on made-up per-seed numbers (no training):
the deciding rows (both networks fit; rates past 0.2 up to divergence) give the verdicts their
docstrings state."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from lrrich.experiments import _comparison, resnet_lr, vgg_batchnorm

DATA = SimpleNamespace(
    name="mnist5k", x_train=np.zeros((1024, 1)), x_test=np.zeros((1000, 1)), num_classes=10
)
NAN = math.nan


def _resnet_rows(dlrs: dict, *, seeds=3):
    cfg = resnet_lr.Config(lrs=tuple(dlrs), seeds=seeds)
    per_seed = {
        f"lr={lr:g}": [
            {
                "dlr": d,
                "test_acc": 0.9,
                "train_acc": 1.0,
                "n_features": 32,
                "diverged": math.isnan(d),
            }
            for d in vals
        ]
        for lr, vals in dlrs.items()
    }
    rows = resnet_lr.comparison(per_seed, cfg, DATA)
    return {r["quantity"]: r for r in rows}


@pytest.mark.parametrize(
    ("dlrs", "verdict"),
    [
        # an interior richest rate: the next stable rate above it is lazier in every seed
        ({0.2: [0.10, 0.11, 0.10], 0.4: [0.07, 0.08, 0.07], 0.8: [0.12, 0.13, 0.12]}, "reproduced"),
        # D_LR falls with every doubling up to the largest stable rate; 1.6 diverges in a seed
        (
            {0.2: [0.12, 0.13, 0.12], 0.4: [0.09, 0.10, 0.09], 1.6: [0.05, NAN, 0.05]},
            "not reproduced",
        ),
        # the largest stable rate within the seed spread of the one below: undecided
        ({0.2: [0.10, 0.11, 0.10], 0.4: [0.10, 0.10, 0.11]}, "inconclusive"),
    ],
)
def test_rates_past_0_2_decide_whether_a_too_large_rate_is_lazier(dlrs, verdict):
    row = _resnet_rows(dlrs)["a too large lr is lazier (rates past 0.2)"]
    assert row["verdict"] == verdict
    assert row["n_seeds"] == 3 and "D App. E (Fig 15)" in row["criterion"]
    assert row["reference"]["p"] == 32 and 0.4 < row["reference"]["dlr"] < 0.5
    if any(math.isnan(d) for v in dlrs.values() for d in v):
        assert "diverged: 1.6" in row["measured"]


def test_resnet_rows_carry_every_seed_and_the_reference():
    rows = _resnet_rows(
        {0.005: [0.33, 0.31, 0.35], 0.05: [0.12, 0.11, 0.13], 0.2: [0.10, 0.09, 0.11]}
    )
    assert "a too large lr is lazier (rates past 0.2)" not in rows  # no rate above 0.2
    row = rows["test D_LR at lr 0.05"]
    assert row["values"] == [0.12, 0.11, 0.13] and row["measured"] == "0.120 ± 0.010"
    assert row["reference"]["dlr"] == pytest.approx(_comparison.rf_reference(1000, 32, 10)["dlr"])
    # lr 0.2 richer in every seed: lr 0.05 is not the richest
    assert rows["lr 0.05 richest / most accurate"]["verdict"] == "not reproduced"


def _vgg_rows(off: dict, on: dict):
    def seeds(d):
        return [{k: v[i] for k, v in d.items()} | {"n_features": 32} for i in range(3)]

    cfg = vgg_batchnorm.Config(seeds=3)
    rows = vgg_batchnorm.comparison({"without BN": seeds(off), "with BN": seeds(on)}, cfg, DATA)
    return {
        r["quantity"].split(" when ")[0] + (" at fit" if " when " in r["quantity"] else ""): r
        for r in rows
    }


def test_vgg_at_equal_fit_decides_only_when_both_networks_fit():
    fitted = dict(train_acc=[0.97, 0.96, 0.98], test_acc=[0.9] * 3, fit_epoch=[150.0] * 3)
    off = fitted | dict(dlr=[0.40, 0.42, 0.41], dlr_at_fit=[0.45, 0.44, 0.46])
    on = fitted | dict(dlr=[0.10, 0.11, 0.12], dlr_at_fit=[0.15, 0.16, 0.14])
    rows = _vgg_rows(off, on)
    assert rows["test D_LR without / with BN at fit"]["verdict"] == "reproduced"
    assert rows["train accuracy without / with BN (both fit)"]["verdict"] == "reproduced"
    assert "epoch 150 ± 0 / 150 ± 0" in rows["test D_LR without / with BN at fit"]["measured"]
    # the ordering gone at equal fit (without BN richer): not reproduced
    rows = _vgg_rows(off | dict(dlr_at_fit=[0.10, 0.09, 0.11]), on)
    assert rows["test D_LR without / with BN at fit"]["verdict"] == "not reproduced"
    # a seed of the network without BN never passes 94 %: under-trained, undecided
    unfit = off | dict(train_acc=[0.97, 0.60, 0.98], fit_epoch=[150.0, None, 150.0])
    rows = _vgg_rows(unfit | dict(dlr_at_fit=[0.45, None, 0.46]), on)
    assert rows["test D_LR without / with BN at fit"]["verdict"] == "inconclusive"
    assert rows["train accuracy without / with BN (both fit)"]["verdict"] == "inconclusive"
    for r in rows.values():
        assert r["n_seeds"] == 3 and r["criterion"] and r["tolerance"]


def test_first_fit_reads_the_first_log_point_past_the_level():
    hist = {
        "epoch": [0, 10, 20, 30],
        "train_acc": [0.1, 0.5, 0.95, 0.99],
        "dlr_test": [0.6, 0.5, 0.3, 0.2],
    }
    assert vgg_batchnorm._first_fit(hist, 0.94) == {"fit_epoch": 20.0, "dlr_at_fit": 0.3}
    assert vgg_batchnorm._first_fit(hist, 0.995) == {"fit_epoch": None, "dlr_at_fit": None}
