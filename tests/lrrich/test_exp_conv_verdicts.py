"""The image experiments' claims judged on made-up and recorded per-seed numbers (no training):
label-shuffling, vgg-batchnorm, resnet-lr and learning-curve give the verdicts the rules of
``lrrich.claims`` put them at, premises first."""

import math

import numpy as np
import pytest

from lrrich.claims import judge_all, measured
from lrrich.experiments import label_shuffling, learning_curve, resnet_lr, vgg_batchnorm

NAN = math.nan


def _verdicts(claims, values: dict) -> dict:
    return {r["key"]: r["verdict"] for r in judge_all(claims, measured(values))}


def test_resnet_lr_recorded_seed_misses_the_magnitudes():
    """Seed 0 of the small scale (docs/findings/resnet_lr.md): D_LR 0.3125 / 0.1136 / 0.1133 at
    lr 0.005 / 0.05 / 0.2 against S's 0.053 / 0.025 / 0.039: every magnitude is missed, which
    one seed shows; the orderings need three seeds."""
    got = _verdicts(
        resnet_lr.CLAIMS,
        {
            "dlr_lr0.005": [0.3125], "dlr_lr0.05": [0.1136], "dlr_lr0.2": [0.1133],
            "test_acc_lr0.005": [0.673], "test_acc_lr0.05": [0.759], "test_acc_lr0.2": [0.777],
            "d_eff_rho_per_c_lr0.05": [0.99], "d_eff_util_per_c_lr0.05": [1.68],
        },
    )  # fmt: skip
    assert got["dlr-lr0.05"] == got["dlr-lr0.2"] == got["dlr-lr0.005"] == "not reproduced"
    assert got["richest-lr0.05"] == got["best-lr0.05"] == "inconclusive"
    assert got["mf-lr0.05"] == "not reproduced"  # D_eff(Q̂) 1.7 C: outside in the one seed
    assert "too-large-lazier" not in got  # no lr 1.6 in the grid


def test_resnet_lr_accuracy_optimum_refuted_over_three_seeds():
    acc = {"test_acc_lr0.005": [0.67, 0.672, 0.674], "test_acc_lr0.05": [0.751, 0.743, 0.759]}
    acc["test_acc_lr0.2"] = [0.787, 0.777, 0.797]  # lr 0.2 more accurate in every seed
    dlr = {"dlr_lr0.005": [0.33, 0.31, 0.35], "dlr_lr0.05": [0.12, 0.11, 0.13]}
    dlr["dlr_lr0.2"] = [0.10, 0.09, 0.12]
    got = _verdicts(resnet_lr.CLAIMS, acc | dlr)
    assert got["best-lr0.05"] == "not reproduced"
    assert got["dlr-lr0.05"] == "not reproduced"  # magnitude missed in every seed


def test_resnet_lr_too_large_rate_needs_fitted_networks():
    """The GPU seeds of --scale past-0.2: lr 1.6 lazier in every seed, but it fits 79-93 %."""
    values = {
        "dlr_lr0.2": [0.121, 0.100, 0.084], "dlr_lr1.6": [0.293, 0.222, 0.274],
        "train_acc_lr0.2": [0.999, 1.0, 1.0], "train_acc_lr1.6": [0.786, 0.823, 0.932],
    }  # fmt: skip
    assert _verdicts(resnet_lr.CLAIMS, values)["too-large-lazier"] == "not tested"
    values["train_acc_lr1.6"] = [0.99, 0.98, 0.97]
    assert _verdicts(resnet_lr.CLAIMS, values)["too-large-lazier"] == "reproduced"


def _vgg(off_train, on_train=(1.0, 1.0, 1.0), off_dlr=(0.40, 0.42, 0.41)) -> dict:
    return {
        "dlr_no_bn": list(off_dlr), "dlr_bn": [0.10, 0.11, 0.12],
        "test_acc_no_bn": [0.80, 0.81, 0.80], "test_acc_bn": [0.90, 0.91, 0.92],
        "train_acc_no_bn": list(off_train), "train_acc_bn": list(on_train),
        "dlr_at_fit_no_bn": [0.45, 0.44, 0.46], "dlr_at_fit_bn": [0.15, 0.16, 0.14],
    }  # fmt: skip


def test_vgg_claims_need_both_networks_fitted():
    fitted = _verdicts(vgg_batchnorm.CLAIMS, _vgg([0.97, 0.96, 0.98]))
    assert fitted == {
        "dlr-no-bn": "direction reproduced",  # 0.41 vs 0.66: magnitude missed, BN richer
        "dlr-bn": "reproduced",  # 0.11 vs 0.073 within 0.05
        "dlr-at-fit": "reproduced",
        "test-acc-order": "reproduced",
    }
    # the small scale's recorded seed: without BN at 13 % / 40 % training accuracy
    unfit = _verdicts(vgg_batchnorm.CLAIMS, _vgg([0.13, 0.40, 0.97], off_dlr=(0.66, 0.5, 0.4)))
    assert set(unfit.values()) == {"not tested"}


def test_vgg_measured_leaves_out_the_at_fit_value_of_a_seed_that_never_fits():
    from types import SimpleNamespace

    seed = dict(dlr=0.3, test_acc=0.5, train_acc=0.6, n_features=32)
    per_seed = {
        "without BN": [seed | dict(dlr_at_fit=None)],
        "with BN": [seed | dict(dlr_at_fit=0.2)],
    }
    data = SimpleNamespace(
        name="mnist5k", x_train=np.zeros((1024, 1)), x_test=np.zeros((1000, 1)), num_classes=10
    )
    cfg = vgg_batchnorm.Config(seeds=1)
    m = vgg_batchnorm._measured(per_seed, cfg, data, {"no_bn": [0.6], "bn": [0.6]})
    assert "dlr_at_fit_no_bn" not in m["values"] and m["values"]["dlr_no_bn"] == [0.3]
    assert m["reference"]["dlr_bn"]["p"] == 32 and m["baseline"]["dlr_bn"] == [0.6]


def test_label_shuffling_reads_test_and_needs_a_fit():
    values = {
        "dlr_shuffle0": [0.151], "dlr_shuffle100": [0.0991],
        "test_acc_shuffle0": [0.666], "test_acc_shuffle100": [0.097],
        "train_acc_shuffle0": [1.0], "train_acc_shuffle100": [1.0],
    }  # fmt: skip
    got = _verdicts(label_shuffling.CLAIMS, values)  # --scale conv, seed 0
    assert got["dlr-shuffle0"] == got["dlr-shuffle100"] == "not reproduced"  # magnitude missed
    assert got["test-acc-shuffle100"] == "inconclusive"  # at chance, but one seed
    assert all(c.split == "test" for c in label_shuffling.CLAIMS)
    values["train_acc_shuffle100"] = [0.3]  # random labels not memorised
    got = _verdicts(label_shuffling.CLAIMS, values)
    assert got["dlr-shuffle100"] == got["test-acc-shuffle100"] == "not tested"


@pytest.mark.parametrize(
    ("dlr", "crosses"),
    [
        ([0.19, 0.17, 0.13, 0.12, 0.099, 0.084, 0.082], 1.0),  # ResNet18 seed 0: from n = 1,000
        ([0.215, 0.181, 0.176, 0.181, 0.169, 0.176, 0.176], 0.0),  # the MLP: never below 0.1
        ([0.09, 0.08, 0.07, 0.06, 0.05, 0.04, 0.03], 0.0),  # rich from the smallest n
        ([0.2, 0.09, 0.2, 0.2, 0.2, 0.2, 0.09], 1.0),  # only the last n: a crossing
        ([0.2, 0.09, 0.09, 0.2, 0.2, 0.2, 0.2], 0.0),  # back above 0.1 at the largest n
    ],
)
def test_learning_curve_crossing_is_decided_per_seed(dlr, crosses):
    n = np.array([50, 100, 200, 500, 1000, 2000, 4000])
    got = learning_curve.curve_checks(n, np.array(dlr))
    assert got["ef_to_mf"] == crosses and -1 <= got["spearman_n_dlr"] <= 1


def test_learning_curve_one_seed_weight_decay_is_inconclusive():
    """The MLP's recorded seed 0 at n = 4,000: D_LR 0.176 (λ = 0) vs 0.117 (λ = 1e-3)."""
    got = _verdicts(learning_curve.CLAIMS, {"dlr_wd_smallest": [0.176], "dlr_wd_largest": [0.117]})
    assert got == {"wd-richer": "inconclusive"}
    fcn = _verdicts(learning_curve.CLAIMS, {"dlr_largest_n": [0.117, 0.112, 0.117]})
    assert fcn == {"mf-largest-n": "not reproduced"}


def test_learning_curve_paper_preset_trains_200_epochs_at_every_n():
    from lrrich import registry

    exp = registry.get("learning-curve")
    paper, small = exp.config("paper"), exp.config("small")
    assert (paper.epochs, paper.matched_steps) == (200, False)
    assert small.matched_steps and "matched_steps" in learning_curve.Config.__doc__
