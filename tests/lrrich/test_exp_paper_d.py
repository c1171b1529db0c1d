"""D's MLP experiments (encoded labels, target downscaling, weight decay + tiny lr) on
small slices of the real mnist5k digits: results structure, figures, report, the paper-vs-measured
rows and — where a tiny run shows it — the direction."""

import dataclasses
import math
import re

import numpy as np
import pytest

from lrrich import io
from lrrich.experiments import (
    _comparison,
    _paper_d,
    encoded_labels,
    target_downscaling,
    weight_decay_tiny_lr,
)
from lrrich.experiments import _image_runs as common
from lrrich.runner import run_experiment

PAPER_PLACE = re.compile(r"\b[DSTKP] (§|Fig|Table|Eq|App)|S's table")
"""A criterion quotes the paper's claim with its place: "D Fig 1", "T §7.1", "S's table"."""
ROW_KEYS = {"quantity", "paper", "measured", "dataset", "scale", "verdict", "note"} | {
    "criterion",
    "tolerance",
    "values",
    "n_seeds",
    "reference",
}


def _comparison_ok(res, dataset="mnist5k"):
    rows = res["comparison"]
    assert rows
    for r in rows:
        assert set(r) == ROW_KEYS
        assert r["verdict"] in _comparison.VERDICTS and r["dataset"].startswith(dataset)
        assert PAPER_PLACE.search(r["criterion"]) and r["tolerance"]
        if "D_LR" in r["quantity"]:
            assert 0 < r["reference"]["dlr"] < 1
    return {r["quantity"]: r for r in rows}


def _report_prints_every_rows_test(run_dir, rows, n_seeds):
    """report.md states, for every comparison row, its criterion, tolerance / test, n and, for
    a D_LR, the random-feature reference."""
    md = (run_dir / "report.md").read_text()
    for r in rows:
        assert f"  - criterion: {r['criterion']}" in md
        assert f"  - tolerance / test: {r['tolerance']}" in md
        plural = "s" if n_seeds != 1 else ""
        assert f"** ({r['verdict']})\n" in md
        assert f"  - per-seed values (n = {n_seeds} seed{plural}): " in md
        if r["reference"]:
            ref = r["reference"]
            assert f"{ref['dlr']:.3f} (n {ref['n']}, p {ref['p']}, r {ref['rank']}" in md


def _report_ok(run_dir, figures):
    for name in figures:
        assert (run_dir / name).stat().st_size > 0
    md = (run_dir / "report.md").read_text()
    for name in figures:
        assert f"({name})" in md


def test_encoded_labels_rich_follows_the_code(tmp_path):
    cfg = encoded_labels.Config(n_train=2000, width=64, depth=2, epochs=50, log_points=2, seeds=1)
    res = run_experiment(encoded_labels.NAME, cfg, tmp_path)
    s = res["summary"]
    _report_ok(tmp_path, ["encoded_labels.png"])
    for mode in ("rich", "lazy"):
        assert 0 <= s[f"{mode}_dlr"] <= 1
        assert len(res["histories"][mode]["step"]) >= 2
    # Full backprop fits the training set through the code and follows the random test code;
    # the lazy network still reads the image (D Fig 1 direction; measured on this
    # 750-step slice: 88 % code-following, test accuracy 22 % vs 56 %).
    assert s["rich_train_acc"] == 1.0
    assert s["rich_test_follows_code"] > 0.7
    assert s["lazy_test_acc"] > s["rich_test_acc"] + 0.2
    assert s["rich_dlr"] < s["lazy_dlr"]
    rows = _comparison_ok(res)
    assert rows["test D_LR rich / lazy"]["verdict"] != "not reproduced"
    assert res["dataset"] == {"name": "mnist5k", "n_train": 2000, "n_test": 1000}


def test_encoded_labels_three_seeds_report_every_rows_test(tmp_path):
    """The default three seeds, tiny: each row is judged over three per-seed values and the
    report prints criterion, tolerance, n and the random-feature reference for every row."""
    cfg = encoded_labels.Config(n_train=256, width=16, depth=1, epochs=4, log_points=1)
    assert cfg.seeds == 3
    res = run_experiment(encoded_labels.NAME, cfg, tmp_path)
    assert [p["seed"] for p in res["per_seed"]] == [0, 1, 2]
    assert len({p["rich_dlr"] for p in res["per_seed"]}) == 3  # the seeds differ
    assert res["summary"]["rich_dlr"] == pytest.approx(
        np.mean([p["rich_dlr"] for p in res["per_seed"]])
    )
    rows = _comparison_ok(res)
    for r in rows.values():
        assert r["n_seeds"] == 3 and all(len(v) == 3 for v in r["values"].values())
    ref = rows["test D_LR rich / lazy"]["reference"]
    assert (ref["n"], ref["p"], ref["rank_source"]) == (1000, 16, "measured")
    assert ref["rank"] == max(p[f"{m}_dlr_rank"] for p in res["per_seed"] for m in ("rich", "lazy"))
    _report_prints_every_rows_test(tmp_path, rows.values(), 3)


def test_target_downscaling_dlr_grows_with_alpha(tmp_path):
    cfg = target_downscaling.Config(
        n_train=500, alphas=(1.0, 1000.0), width=32, depth=2, epochs=60, log_points=2, seeds=1
    )
    res = run_experiment(target_downscaling.NAME, cfg, tmp_path)
    # the papers' epochs: 60 · ⌈500 / 128⌉ = 240 steps (drop-last epochs would be 180)
    assert res["histories"]["1"]["step"][-1] == 240
    _report_ok(tmp_path, ["measures_vs_alpha.png", "dlr_curves.png"])
    table = res["table"]
    assert [r["alpha"] for r in table] == [1.0, 1000.0] and res["tables"] == [table]
    for key in ("dlr", "s_init", "param_norm", "nc1", "nc1_test", "nc1_outputs", "test_acc"):
        assert all(math.isfinite(r[key]) for r in table)
    assert res["summary"]["dlr_monotone"] is True
    rows = _comparison_ok(res)
    assert rows["D_LR vs alpha (Spearman)"]["verdict"] == "reproduced"
    ref = rows["D_LR vs alpha (Spearman)"]["reference"]
    assert (ref["n"], ref["p"], ref["rank"], ref["rank_source"]) == (500, 32, 10, "C")
    assert "on the test features" in rows["NC1 vs alpha, fitted alpha"]["note"]
    _report_prints_every_rows_test(tmp_path, rows.values(), 1)


def _table(alphas, s_init, norm, nc1, fit=None, dlr=None):
    """A hand-written α sweep of one seed (the measures the comparison reads)."""
    fit = fit or [1.0] * len(alphas)
    dlr = dlr or list(np.linspace(0.1, 0.9, len(alphas)))
    return [
        dict(
            alpha=a,
            s_init=si,
            param_norm=pn,
            nc1=n1,
            train_acc=f,
            dlr=d,
            test_acc=0.9,
            nc1_test=n1,
            nc1_outputs=n1,
            n_features=256,
        )
        for a, si, pn, n1, f, d in zip(alphas, s_init, norm, nc1, fit, dlr, strict=True)
    ]


def test_target_downscaling_judges_the_prior_measures_by_s_table_over_fitted_alpha():
    data = common.load_task("mnist5k", n_train=1000)
    cfg = target_downscaling.Config(alphas=(1.0, 10.0, 100.0, 1000.0))
    a = cfg.alphas
    # S_init falls monotonically while the runs fit (aligned with laziness), turns only at the
    # α that does not fit; ‖θ‖² stays within 10 % (invariant); NC1 falls (opposite direction)
    one = _table(a, [0.7, 0.6, 0.5, 0.65], [300, 310, 290, 200], [4, 3, 2, 5], [1, 1, 1, 0.8])
    rows = {r["quantity"]: r for r in target_downscaling.comparison([one], cfg, data)}
    assert rows["D_LR vs alpha (Spearman)"]["verdict"] == "reproduced"
    assert rows["S_init vs alpha, fitted alpha"]["verdict"] == "not reproduced"
    assert rows["‖θ‖² vs alpha, fitted alpha"]["verdict"] == "reproduced"
    assert rows["NC1 vs alpha, fitted alpha"]["verdict"] == "reproduced"
    # ‖θ‖² falling by 30 % is not invariant, but misaligned (a lazier run would have it rise):
    # direction; NC1 rising is aligned: not reproduced
    two = _table(a, [0.7, 0.6, 0.5, 0.65], [300, 250, 210, 200], [1, 2, 3, 5], [1, 1, 1, 0.8])
    rows = {r["quantity"]: r for r in target_downscaling.comparison([two], cfg, data)}
    assert rows["‖θ‖² vs alpha, fitted alpha"]["verdict"] == "direction reproduced"
    assert rows["‖θ‖² vs alpha, fitted alpha"]["values"]["ratio_to_alpha_min"] == [0.7]
    assert rows["NC1 vs alpha, fitted alpha"]["verdict"] == "not reproduced"
    # two seeds that disagree about NC1's direction: inconclusive, n = 2
    rows = {r["quantity"]: r for r in target_downscaling.comparison([one, two], cfg, data)}
    assert rows["NC1 vs alpha, fitted alpha"]["verdict"] == "inconclusive"
    assert rows["NC1 vs alpha, fitted alpha"]["n_seeds"] == 2
    # fewer than two α fit: the claim cannot be judged
    none = _table(a, [0.7, 0.6, 0.5, 0.65], [300] * 4, [1, 2, 3, 5], [1, 0.9, 0.9, 0.8])
    rows = {r["quantity"]: r for r in target_downscaling.comparison([none], cfg, data)}
    assert rows["S_init vs alpha, fitted alpha"]["verdict"] == "inconclusive"


def test_target_downscaling_rejects_bad_alphas(tmp_path):
    with pytest.raises(ValueError, match="alphas"):
        target_downscaling.run(target_downscaling.Config(alphas=(1.0, 0.0)), tmp_path)


def test_wd_tiny_lr_shrinks_without_learning(tmp_path):
    cfg = weight_decay_tiny_lr.Config(
        n_train=1000, width=64, depth=2, epochs=40, weight_decay=3.0, log_points=4, seeds=2
    )
    res = run_experiment(weight_decay_tiny_lr.NAME, cfg, tmp_path)
    s, first = res["summary"], res["per_seed"][0]
    _report_ok(tmp_path, ["measures_vs_step.png"])
    assert [p["seed"] for p in res["per_seed"]] == [0, 1] and s["seeds"] == 2
    assert s["train_acc_final"] < 0.2  # nothing learned
    # ‖θ‖² follows the pure decay (1 − ηλ)^{2t} up to the tiny gradient steps, in every seed.
    expected = (1 - cfg.lr * cfg.weight_decay) ** (2 * res["steps_total"])
    for p in res["per_seed"]:
        assert p["param_norm_ratio_f64_final"] == pytest.approx(expected, rel=0.05)
    assert s["param_norm_ratio_f64_final"] == pytest.approx(
        np.mean([p["param_norm_ratio_f64_final"] for p in res["per_seed"]])
    )
    assert s["s_init_f64_final"] > 0.01  # the kernel moved: "richer" by S_init
    assert len(res["curves"]["step"]) == 5
    assert io.read_json(tmp_path / "results.json")["summary"]["dlr_init"] == s["dlr_init"]
    rows = _comparison_ok(res)
    assert rows["train / test accuracy final"]["verdict"] != "not reproduced"
    assert all(r["n_seeds"] == 2 for r in rows.values())
    finite = [v for v in res["curves"]["dlr"] if math.isfinite(v)]
    assert first["dlr_last_defined"] == finite[-1]  # the curves are the first seed's
    # NC1 of θ₀ shrunk to the same norm (nothing learned) starts at the network's own NC1
    assert res["curves"]["nc1_shrink"][0] == pytest.approx(first["nc1_f64_init"], rel=1e-9)
    assert "shrunk uniformly" in rows["NC1 init -> final"]["note"]
    # both readings of D Fig 2(a)'s second row (1.0 -> 0.20) are compared, each per seed
    norm = rows["‖θ‖² / ‖θ₀‖² init -> final (second row read as the parameter norm)"]
    kernel = rows["kernel similarity 1 - S_init final (second row read as the kernel similarity)"]
    assert norm["paper"] == kernel["paper"] == "1.0 -> 0.20"
    assert norm["values"] == [p["param_norm_ratio_final"] for p in res["per_seed"]]
    assert kernel["values"] == [1 - p["s_init_final"] for p in res["per_seed"]]
    _report_prints_every_rows_test(tmp_path, rows.values(), 2)


def test_encoded_labels_trains_one_mode_when_asked(tmp_path):
    cfg = encoded_labels.Config(n_train=256, width=16, depth=1, epochs=2, log_points=1, seeds=1)
    res = run_experiment(
        encoded_labels.NAME, dataclasses.replace(cfg, modes=("rich",)), tmp_path / "rich"
    )
    assert "rich_dlr" in res["summary"] and "lazy_dlr" not in res["summary"]
    assert res["comparison"] == []  # the rows compare rich with lazy
    with pytest.raises(ValueError, match="modes"):
        run_experiment(
            encoded_labels.NAME, dataclasses.replace(cfg, modes=("richer",)), tmp_path / "bad"
        )


def test_shrinking_a_relu_mlp_sends_nc1_to_its_bias_masked_linear_limit():
    """The mechanism of docs/findings/wd_tiny_lr.md, checked in float64 on real digits.

    One hidden layer: NC1 is invariant under θ → cθ (positive homogeneity). Two: as c → 0 the
    centred features tend to c²·(relu(x W₁ + b₁) W₂) masked to the units with b₂ > 0.
    """
    import jax.numpy as jnp

    data = common.load_task("mnist5k", n_train=300)
    x, y = data.x_train, data.y_train
    one = _paper_d.cast_model(common.build_model("mlp", data, width=32, depth=1), jnp.float64)
    nc1_one = _paper_d.nc1(_paper_d.forward(one, x)[0], y, 10)
    for c in (0.1, 1e-4):
        phi = _paper_d.forward(_paper_d.scaled_model(one, c), x)[0]
        assert _paper_d.nc1(phi, y, 10) == pytest.approx(nc1_one, rel=1e-9)
    two = _paper_d.cast_model(common.build_model("mlp", data, width=32, depth=2), jnp.float64)
    (k1, b1), (k2, b2) = [
        (np.asarray(lin.kernel[...]), np.asarray(lin.bias[...])) for lin in two.layers
    ]
    limit = (np.maximum(x @ k1 + b1, 0.0) @ k2) * (b2 > 0)  # written out, no model code
    shrunk = _paper_d.forward(_paper_d.scaled_model(two, 1e-5), x)[0]
    assert _paper_d.nc1(shrunk, y, 10) == pytest.approx(_paper_d.nc1(limit, y, 10), rel=1e-4)
    assert _paper_d.nc1(limit, y, 10) != pytest.approx(
        _paper_d.nc1(_paper_d.forward(two, x)[0], y, 10), rel=1e-2
    )  # the limit is another value: the shrinkage moves NC1


def test_comparison_rows_reject_unknown_verdicts():
    with pytest.raises(ValueError, match="verdict must be one of"):
        _comparison.row(
            "q",
            1,
            2,
            dataset="d",
            scale="s",
            verdict="almost",
            criterion="c",
            tolerance="t",
            values=[2],
        )
    assert _comparison.judge(True, False) == "reproduced"
    assert _comparison.judge(False, True) == "direction reproduced"
    assert _comparison.judge(False, False) == "not reproduced"


def test_spearman_against_scipy():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=12), rng.normal(size=12)
    assert _comparison.spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
    assert _comparison.spearman([1, 2, 3], [5, 7, 9]) == pytest.approx(1.0)
    assert math.isnan(_comparison.spearman([1, 2], [1, float("nan")]))
    assert math.isnan(_comparison.spearman([1], [1]))


def test_measures_against_direct_formulas():
    """S_init, ‖θ‖² and D_LR of _paper_d.measures against naive n×n kernel computations."""
    data = common.load_task("mnist5k", n_train=200)
    m0 = common.build_model("mlp", data, width=16, depth=1, seed=0)
    m1 = common.build_model("mlp", data, width=16, depth=1, seed=1)
    x, y = data.x_train, data.y_train
    got = _paper_d.measures(m1, m0, x, y)
    phi0, _ = _paper_d.forward(m0, x)
    phi, out = _paper_d.forward(m1, x)
    h = np.eye(len(x)) - 1.0 / len(x)
    k0, k = h @ phi0 @ phi0.T @ h, h @ phi @ phi.T @ h
    cka = np.sum(k0 * k) / (np.linalg.norm(k0) * np.linalg.norm(k))
    assert got["s_init"] == pytest.approx(1 - cka, rel=1e-6, abs=1e-6)
    q, _ = np.linalg.qr(h @ out)  # out has full column rank C = 10 here
    proj = q @ q.T
    d = 1 - np.sum(k * proj) / (np.linalg.norm(k) * np.linalg.norm(proj))
    assert got["dlr"] == pytest.approx(d, rel=1e-6, abs=1e-6)
    layers = [*m1.layers, m1.head]
    naive = sum(
        np.sum(np.asarray(lin.kernel[...], np.float64) ** 2)
        + np.sum(np.asarray(lin.bias[...], np.float64) ** 2)
        for lin in layers
    )
    assert got["param_norm"] == pytest.approx(naive, rel=1e-5)
    assert math.isnan(_paper_d.safe_dlr(phi, np.ones_like(out)))
    assert math.isnan(_paper_d.nc1(np.ones_like(phi), y, 10))  # identical class means
    with pytest.raises(ValueError):  # bad input is an error, not a NaN
        _paper_d.nc1(phi[:-1], y, 10)
    assert _paper_d.nc1(phi, y, 10) == got["nc1"] > 0
