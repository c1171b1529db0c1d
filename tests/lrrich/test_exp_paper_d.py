"""D's MLP experiments (encoded labels, target downscaling, weight decay + tiny lr) on
small slices of the real mnist5k digits: results structure, figures, report, the per-seed
record the claims read, and the verdicts the rules give recorded values."""

import dataclasses
import math
import re

import numpy as np
import pytest

from lrrich import io
from lrrich.claims import VERDICTS, judge_all, measured
from lrrich.experiments import (
    _data,
    _measure,
    encoded_labels,
    target_downscaling,
    weight_decay_tiny_lr,
)
from lrrich.runner import run_experiment

PAPER_PLACE = re.compile(r"\b[DSTKP] (§|Fig|Table|Eq|App)|S's table")
"""A claim names the paper's place: "D Fig 1", "T §7.1", "S's table"."""


def _rows_ok(res, n_seeds, dataset="mnist5k"):
    """The runner judged the record by the declared claims: every row names its place, split
    and per-seed values; the record holds one value per seed for every field."""
    rec = res["measured"]
    assert all(len(v) == n_seeds for v in rec["values"].values())
    assert rec["dataset"].startswith(dataset)
    rows = res["comparison"]
    assert rows
    for r in rows:
        assert r["verdict"] in VERDICTS and PAPER_PLACE.search(r["source"])
        assert r["split"] in ("test", "test and train") and r["n_seeds"] == n_seeds
        for ref in r["reference"].values():
            assert 0 < ref["dlr"] < 1
    return {r["key"]: r for r in rows}


def _report_prints_every_row(run_dir, rows):
    """report.md states, for every row, its verdict and its per-seed values."""
    md = (run_dir / "report.md").read_text()
    for r in rows:
        assert f"** — {r['verdict']}\n" in md
        assert f"  - per-seed values (n = {r['n_seeds']}): " in md


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
    rows = _rows_ok(res, 1)
    # one seed, and a lazy readout that does not fit its training set here: never reproduced
    assert rows["dlr-order"]["verdict"] in ("inconclusive", "not tested")
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
    rows = _rows_ok(res, 3)
    ref = res["measured"]["reference"]["rich_dlr"]
    assert (ref["n"], ref["p"], ref["rank_source"]) == (1000, 16, "measured")
    assert ref["rank"] == max(p[f"{m}_dlr_rank"] for p in res["per_seed"] for m in ("rich", "lazy"))
    assert len(res["measured"]["baseline"]["rich_dlr"]) == 3
    _report_prints_every_row(tmp_path, rows.values())


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
    for key in ("dlr_test", "s_init_test"):
        assert all(math.isfinite(r[key]) for r in table)
    rows = _rows_ok(res, 1)
    assert set(rows) == {c.key for c in target_downscaling.CLAIMS}
    # two α cannot make the premise of three fitted α: not tested
    assert {r["verdict"] for r in rows.values()} == {"not tested"}
    _report_prints_every_row(tmp_path, rows.values())


def _table(alphas, s_init, norm, nc1, fit=None, dlr=None):
    """A hand-written α sweep of one seed (the measures the claims read)."""
    fit = fit or [1.0] * len(alphas)
    dlr = dlr or list(np.linspace(0.1, 0.9, len(alphas)))
    return [
        dict(alpha=a, s_init_test=si, param_norm=pn, nc1_test=n1, train_acc=f, dlr_test=d)
        for a, si, pn, n1, f, d in zip(alphas, s_init, norm, nc1, fit, dlr, strict=True)
    ]


def _judge_tables(tables, alphas):
    per_seed = [target_downscaling._seed_fields(t, alphas) for t in tables]
    values = {k: [s[k] for s in per_seed] for k in per_seed[0]}
    return {r["key"]: r for r in judge_all(target_downscaling.CLAIMS, measured(values))}


def test_target_downscaling_judges_the_prior_measures_by_s_table_over_fitted_alpha():
    a = (1.0, 3.0, 10.0, 100.0, 1000.0)
    fit = [1, 1, 1, 1, 0.8]
    # S_init falls monotonically while the runs fit (aligned with laziness), turns only at the
    # α that does not fit; ‖θ‖² stays within 10 % (invariant); NC1 falls (opposite direction)
    one = _table(a, [0.7, 0.6, 0.5, 0.45, 0.65], [300, 310, 290, 295, 200], [4, 3, 2, 1, 5], fit)
    rows = _judge_tables([one] * 3, a)
    assert rows["dlr-aligns"]["verdict"] == "reproduced"
    # S_init 36 % off its first value in every seed, and aligned: not reproduced
    assert rows["s_init-invariant"]["verdict"] == "not reproduced"
    assert rows["param_norm-invariant"]["verdict"] == "reproduced"
    assert rows["nc1-opposite"]["verdict"] == "reproduced"
    # ‖θ‖² falling by 30 % is not invariant, but misaligned (a lazier run would have it rise):
    # direction; NC1 rising is aligned: not reproduced
    two = _table(a, [0.7, 0.6, 0.5, 0.45, 0.65], [300, 250, 220, 210, 200], [1, 2, 3, 4, 5], fit)
    rows = _judge_tables([two] * 3, a)
    assert rows["param_norm-invariant"]["verdict"] == "direction reproduced"
    assert rows["param_norm-invariant"]["values"]["param_norm_worst_ratio"] == [0.7] * 3
    assert rows["nc1-opposite"]["verdict"] == "not reproduced"
    # seeds that disagree about NC1's direction: inconclusive
    assert _judge_tables([one, two, one], a)["nc1-opposite"]["verdict"] == "inconclusive"
    # fewer than three α fit: the premise fails, not tested
    few = _table(a, [0.7, 0.6, 0.5, 0.45, 0.65], [300] * 5, [1, 2, 3, 4, 5], [1, 1, 0.9, 0.9, 0.8])
    rows = _judge_tables([one, few, one], a)
    assert {r["verdict"] for r in rows.values()} == {"not tested"}
    assert "seed 1: 2" in rows["dlr-aligns"]["reason"]


def test_target_downscaling_recorded_spearman_reads_as_the_rules_say():
    # the training-set S_init of the first run's seeds (docs/findings): Spearman −1 / −0.94 /
    # −1 over the fitted α, 0.70 → 0.49 / 0.68 → 0.48 / 0.67 → 0.37: a magnitude missed in
    # every seed is not reproduced, whatever its direction (the seeds split on it)
    values = {
        "n_alpha_fitted": [5, 6, 5],
        "s_init_test_worst_ratio": [0.70, 0.71, 0.55],
        "s_init_test_misaligned": [0.0, 1.0, 0.0],
    }
    (row,) = [
        r
        for r in judge_all(target_downscaling.CLAIMS, measured(values))
        if r["key"] == "s_init-invariant"
    ]
    assert row["verdict"] == "not reproduced" and "not established" in row["reason"]


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
    rows = _rows_ok(res, 2)
    assert rows["chance-accuracy"]["verdict"] != "not reproduced"
    finite = [v for v in res["curves"]["dlr"] if math.isfinite(v)]
    assert first["dlr_last_defined"] == finite[-1]  # the curves are the first seed's
    # NC1 of θ₀ shrunk to the same norm (nothing learned) starts at the network's own NC1
    assert res["curves"]["nc1_shrink"][0] == pytest.approx(first["nc1_f64_init"], rel=1e-9)
    # both readings of D Fig 2(a)'s second row (1.0 -> 0.20) are claims, each per seed
    norm, kernel = rows["second-row-param-norm"], rows["second-row-kernel"]
    assert norm["paper"] == kernel["paper"] == "1.0 → 0.20"
    assert norm["values"]["param_norm_ratio_final"] == [
        p["param_norm_ratio_final"] for p in res["per_seed"]
    ]
    assert kernel["values"]["kernel_similarity_final"] == [
        1 - p["s_init_final"] for p in res["per_seed"]
    ]
    assert "not judged there" in norm["note"]  # the configured weight decay, not a tuned one
    assert len(res["measured"]["baseline"]["dlr_init"]) == 2
    _report_prints_every_row(tmp_path, rows.values())


def test_wd_tiny_lr_recorded_values_are_judged_at_the_configured_weight_decay():
    # ‖θ‖²/‖θ₀‖² at the configured weight decay 0.85 (docs/findings/wd_tiny_lr.md: 4.0e-5 in
    # every seed): far from 0.20, below half: direction reproduced
    values = {"param_norm_ratio_final": [4.1e-5, 3.9e-5, 4.0e-5]}
    (row,) = judge_all(weight_decay_tiny_lr.CLAIMS, measured(values))
    assert row["verdict"] == "direction reproduced"
    # the D_LR that rises in float32 but falls in float64 (findings: 0.55 -> 0.96 / 0.48)
    values = {
        "dlr_init": [0.55, 0.54, 0.56],
        "dlr_last_defined": [0.97, 0.91, 0.99],
        "dlr_f64_init": [0.55, 0.54, 0.56],
        "dlr_f64_final": [0.47, 0.50, 0.47],
    }
    rows = {r["key"]: r for r in judge_all(weight_decay_tiny_lr.CLAIMS, measured(values))}
    assert rows["dlr-init"]["verdict"] == "inconclusive"  # 0.54 is 0.05 from 0.59: outside
    assert rows["dlr-final-float32"]["verdict"] == "inconclusive"  # 0.97, 0.99 inside, 0.91 not
    assert rows["dlr-final-float64"]["verdict"] == "not reproduced"


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

    data = _data.load_task("mnist5k", n_train=300)
    x, y = data.x_train, data.y_train
    one = _measure.cast_model(_data.build_model("mlp", data, width=32, depth=1), jnp.float64)
    nc1_one = _measure.nc1(_measure.forward(one, x)[0], y, 10)
    for c in (0.1, 1e-4):
        phi = _measure.forward(_measure.scaled_model(one, c), x)[0]
        assert _measure.nc1(phi, y, 10) == pytest.approx(nc1_one, rel=1e-9)
    two = _measure.cast_model(_data.build_model("mlp", data, width=32, depth=2), jnp.float64)
    (k1, b1), (k2, b2) = [
        (np.asarray(lin.kernel[...]), np.asarray(lin.bias[...])) for lin in two.layers
    ]
    limit = (np.maximum(x @ k1 + b1, 0.0) @ k2) * (b2 > 0)  # written out, no model code
    shrunk = _measure.forward(_measure.scaled_model(two, 1e-5), x)[0]
    assert _measure.nc1(shrunk, y, 10) == pytest.approx(_measure.nc1(limit, y, 10), rel=1e-4)
    assert _measure.nc1(limit, y, 10) != pytest.approx(
        _measure.nc1(_measure.forward(two, x)[0], y, 10), rel=1e-2
    )  # the limit is another value: the shrinkage moves NC1


def test_measures_against_direct_formulas():
    """S_init, ‖θ‖² and D_LR of _measure.prior_measures against naive n×n kernel computations."""
    data = _data.load_task("mnist5k", n_train=200)
    m0 = _data.build_model("mlp", data, width=16, depth=1, seed=0)
    m1 = _data.build_model("mlp", data, width=16, depth=1, seed=1)
    x, y = data.x_train, data.y_train
    got = _measure.prior_measures(m1, m0, x, y)
    phi0, _ = _measure.forward(m0, x)
    phi, out = _measure.forward(m1, x)
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
    assert math.isnan(_measure.safe_dlr(phi, np.ones_like(out)))
    assert math.isnan(_measure.nc1(np.ones_like(phi), y, 10))  # identical class means
    with pytest.raises(ValueError):  # bad input is an error, not a NaN
        _measure.nc1(phi[:-1], y, 10)
    assert _measure.nc1(phi, y, 10) == got["nc1"] > 0
