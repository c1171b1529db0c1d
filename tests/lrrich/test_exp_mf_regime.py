"""mf-regime (T Table 2.2): the paper rows and the MF verdicts.

Its tiny real-digit run is in test_exp_paper_scale_configs.py, where it reuses the compiled
ResNet18 and VGG16-BN programs of the resnet-lr and vgg-batchnorm tiny runs.
"""

import dataclasses

import pytest

from lrrich import registry
from lrrich.experiments import mf_regime


def test_paper_scales_are_the_thesis_setting():
    exp = registry.get("mf-regime")
    for scale, dataset, epochs, schedule in (
        ("paper", "mnist", 200, "step"),
        ("paper-cifar10", "cifar10", 200, "step"),
        ("paper-cifar100", "cifar100", 600, "constant"),
    ):
        c = exp.config(scale)
        assert (c.dataset, c.epochs, c.schedule, c.width) == (dataset, epochs, schedule, 64)
        assert (c.lr, c.vgg_lr, c.momentum, c.weight_decay, c.batch_size) == (
            0.05,
            0.01,
            0.9,
            1e-3,
            128,
        )
        assert c.augment == ("none" if dataset == "mnist" else "cifar")
    small = exp.config("small")
    assert small.step_every_epochs / small.epochs == 60 / 200  # the thesis's schedule shape


def test_mf_verdicts():
    c = 10
    mf = dict(dlr=0.02, d_eff_rho=10.4, d_eff_util=9.1, test_acc=0.99, train_acc=1.0, n_features=32)
    assert mf_regime.in_mf_regime(mf, c)
    cases = [
        (mf, "reproduced"),
        ({**mf, "d_eff_util": 16.0}, "direction reproduced"),  # D_LR < 0.1, D_eff(Q̂) ≠ C
        ({**mf, "dlr": 0.15}, "not reproduced"),
        # one seed within the seed spread (0.02) of the boundary decides nothing
        ({**mf, "dlr": 0.1}, "inconclusive"),
        ({**mf, "dlr": 0.085}, "inconclusive"),
    ]
    cfg = mf_regime.Config()
    for res, verdict in cases:
        (row,) = mf_regime.comparison({"resnet18": res}, cfg, "mnist5k", c, n_test=1000)
        assert row["verdict"] == verdict, res
    fashion = dataclasses.replace(cfg, dataset="fashion_mnist")
    (row,) = mf_regime.comparison({"vgg16_bn": mf}, fashion, "fashion_mnist", c, n_test=1000)
    assert row["paper"] == "approx. C, approx. C, < 0.1"  # no Table 2.2 row for Fashion-MNIST
    (row,) = mf_regime.comparison({"vgg16_bn": mf}, cfg, "mnist5k", c, n_test=1000)
    assert row["paper"] == "10.0, 10.0, 1.8e-02"  # T Table 2.2's VGG16 on MNIST
    (row,) = mf_regime.comparison({"vgg16": mf}, cfg, "mnist5k", c, n_test=1000)
    assert row["paper"] == "approx. C, approx. C, < 0.1"  # Table 2.2's VGG16 has BatchNorm
    with pytest.raises(ValueError, match="models must be"):
        mf_regime.run(dataclasses.replace(cfg, models=("lenet5",)), None)
