"""kunin-fig6: the hidden activations, the verdict rules, and a tiny run through the runner."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from lrrich.claims import judge_all
from lrrich.experiments import kunin_fig6 as exp
from lrrich.runner import run_experiment
from nets import LeNet5, balance_layers

TINY = dataclasses.replace(
    exp.Config(),
    seeds=1,
    n_train=200,
    epochs=1,
    batch_size=50,
    probe_size=40,
    rhm_classes=4,
    rhm_m=4,
    rhm_levels=2,
    rhm_train_sizes=(60, 120),
    rhm_test=100,
    rhm_steps=20,
    rhm_batch=30,
)


@pytest.mark.usefixtures("full_float32")  # the fused conv-pool path vs the plain one
def test_hidden_preactivations_are_the_networks_units():
    model = LeNet5(10, image_size=28, rngs=nnx.Rngs(0))
    x = np.random.default_rng(0).normal(size=(3, 28, 28, 1)).astype(np.float32)
    z = exp.hidden_preactivations(model, x)
    assert [a.shape for a in z] == [(3, 28, 28, 6), (3, 10, 10, 16), (3, 120), (3, 84)]
    # the last hidden layer through ReLU is the network's penultimate Φ (fused conv-pool path)
    np.testing.assert_allclose(jnp.maximum(z[-1], 0), model.features(x), rtol=1e-4, atol=1e-5)
    # rebalancing divides every hidden pre-activation by α: the pattern at init is α-free
    z10 = exp.hidden_preactivations(balance_layers(model, 10.0, first="conv1"), x)
    for a, b in zip(z, z10, strict=True):
        np.testing.assert_allclose(b * 10, a, rtol=1e-4, atol=1e-5)


def test_n_star_interpolates_in_log_n():
    sizes = np.array([100, 1000, 10000])
    assert exp._n_star(sizes, np.array([0.2, 0.4, 0.6]), 0.5) == pytest.approx(np.sqrt(1e3 * 1e4))
    assert exp._n_star(sizes, np.array([0.6, 0.7, 0.8]), 0.5) == 100.0
    assert np.isnan(exp._n_star(sizes, np.array([0.1, 0.2, 0.3]), 0.5))


def _verdicts(hamming, smooth, rhm) -> list[str]:
    """Verdicts of the three claims from (seeds, α = 0.1 / 1 / 10) arrays."""
    cfg = exp.Config(alphas=(0.1, 1.0, 10.0))
    m = exp._measured(np.array(hamming), np.array(smooth), np.array(rhm), cfg, {"dataset": "x"},
                      [0, 1, 2])  # fmt: skip
    return [r["verdict"] for r in judge_all(exp.CLAIMS, m)]


def test_verdicts_follow_the_orderings_over_seeds():
    up = np.array([[0.1, 0.2, 0.5], [0.1, 0.21, 0.45], [0.12, 0.2, 0.4]])  # (seeds, alpha)
    assert _verdicts(up, up[:, ::-1], up) == ["reproduced"] * 3  # smoothness: upstream smallest
    flat = up.copy()
    flat[:, 1] = flat[:, 2] + [0.01, 0.02, 0.015]  # balanced above upstream in every seed
    assert _verdicts(flat, up[:, ::-1], up)[0] == "not reproduced"
    mixed = up.copy()
    mixed[:, 2] = [0.6, 0.05, 0.15]  # upstream first, last, in between
    assert _verdicts(mixed, up[:, ::-1], up)[0] == "inconclusive"


def test_panel_b_discloses_its_network_and_the_partial_batch():
    cfg = exp.Config(alphas=(0.1, 1.0, 10.0))
    v = np.ones((1, 3))
    m = exp._measured(v, v, v, cfg, {"dataset": "mnist5k", "n_train": 4000}, [0])
    text = " ".join(m["deviations"])
    assert "ResNet on CIFAR-10" in text and "no weight decay" in text
    assert "LeNet-5: the last partial batch" in text and "RHM: the last partial batch" in text


def test_config_refuses_an_alpha_grid_without_both_sides(tmp_path):
    with pytest.raises(ValueError, match="alphas"):
        exp.run(dataclasses.replace(TINY, alphas=(1.0, 3.0, 10.0)), tmp_path)
    with pytest.raises(ValueError, match="rhm_train_sizes"):
        exp.run(dataclasses.replace(TINY, rhm_train_sizes=(100, 50)), tmp_path)


def _measured(seed: int, hamming, smooth, rhm_acc) -> tuple[dict, dict]:
    cnn = {"dataset": "mnist5k (4,000 train / 1,000 test)", "hamming": hamming,
           "smoothness": smooth, "smoothness_init": [1.8] * 3, "smoothness_zero_sum": smooth,
           "test_acc": [0.95] * 3, "train_acc": [0.96] * 3, "filters": [[[[0.0]]]] * 3}  # fmt: skip
    return cnn, {"test_acc": rhm_acc, "train_acc": rhm_acc, "num_data": 131072}


def test_collect_summarises_seeds_and_records_every_panel():
    cfg = exp.Config(seeds=2, rhm_train_sizes=(1000, 2000, 4000), rhm_threshold=0.5)
    acc = [[0.2, 0.3, 0.45], [0.3, 0.5, 0.8], [0.3, 0.6, 0.9]]  # alpha 0.1 / 1 / 10 × sizes
    acc1 = [[0.25, 0.35, 0.45], [0.35, 0.55, 0.85], [0.35, 0.65, 0.95]]
    runs = [
        _measured(0, [0.09, 0.15, 0.4], [1.9, 1.3, 0.4], acc),
        _measured(1, [0.1, 0.16, 0.3], [1.7, 1.2, 0.3], acc1),
    ]
    res = exp.collect(cfg, [0, 1], [c for c, _ in runs], [r for _, r in runs])
    s = res["summary"]
    assert s["seeds"] == 2 and s["hamming_alpha=10"] == pytest.approx(0.35)
    assert s["smoothness_alpha=0.1"] == pytest.approx(1.8)
    assert s["rhm_mean_test_acc_alpha=1"] == pytest.approx((1.6 / 3 + 1.75 / 3) / 2)
    # 0.5 is crossed 2/3 and 1/2 of the way from 1,000 to 2,000 in log n (seeds 0, 1)
    assert s["rhm_n_star_alpha=10"] == pytest.approx((1000 * 2 ** (2 / 3) + 1000 * 2**0.5) / 2)
    assert np.isnan(s["rhm_n_star_alpha=0.1"]) and s["rhm_seeds_reaching_threshold_alpha=0.1"] == 0
    m = res["measured"]
    assert m["seeds"] == [0, 1] and m["values"]["hamming_up"] == pytest.approx([0.4, 0.3])
    assert m["values"]["rhm_acc_down"] == pytest.approx([0.95 / 3, 1.05 / 3])
    assert all(len(v) == 2 for v in m["values"].values())


@pytest.mark.slow  # ~20 s CPU: LeNet-5 and two RHM programs compile
def test_tiny_run_writes_the_figure_summary_and_record(tmp_path):
    res = run_experiment("kunin-fig6", TINY, tmp_path / "r")
    s = res["summary"]
    assert s["seeds"] == 1
    for a in ("0.1", "1", "10"):
        assert 0 <= s[f"hamming_alpha={a}"] <= 1
        assert s[f"smoothness_alpha={a}"] > 0
        assert 0 <= s[f"rhm_mean_test_acc_alpha={a}"] <= 1
    assert np.array(res["rhm"]["test_acc"]).shape == (1, 3, 2)  # (seeds, alphas, sizes)
    assert set(res["measured"]["values"]) == {
        f"{k}_{side}" for k in ("hamming", "smoothness", "rhm_acc")
        for side in ("up", "balanced", "down")
    }  # fmt: skip
    rows = res["comparison"]
    assert [r["key"] for r in rows] == ["hamming", "smoothness", "rhm"]
    assert all(r["n_seeds"] == 1 and r["verdict"] == "inconclusive" for r in rows)  # one seed
    for name in ("kunin_fig6.png", "report.md"):
        assert (tmp_path / "r" / name).stat().st_size > 0
