"""cross-entropy (D Fig 17): a tiny run end to end, its rows per output choice and their verdicts."""

import dataclasses

import pytest

from lrrich import registry
from lrrich.experiments import cross_entropy as exp
from lrrich.runner import run_experiment


@pytest.mark.slow  # two train_many programs (CE, MSE): 12 s at load ~1
def test_tiny_run_writes_a_row_per_output_choice(tmp_path):
    e = registry.get("cross-entropy")
    cfg = dataclasses.replace(
        e.config("small"),
        seeds=2,
        n_train=256,
        width=16,
        epochs=2,
        log_points=2,
        eval_size=200,
        temperatures=(0.1, 10.0),
    )
    res = run_experiment(e, cfg, tmp_path / "run")
    s = res["summary"]
    assert s["seeds"] == 2 and 0 <= s["ce_test_acc"] <= 1
    for choice in exp.CHOICES:
        assert 0 <= s[f"ce_{choice}_end"] <= 1
    assert [len(p["ce_dlr_by_temperature"]) for p in res["per_seed"]] == [2, 2]
    rows = res["comparison"]
    assert [r["quantity"].split(" (")[0] for r in rows] == [
        "test D_LR on logits, init -> end",
        "test D_LR on centred logits, init -> end",
        "test D_LR on probabilities, init -> end",
    ]
    for r in rows:
        assert r["criterion"].startswith("D App. E (Fig 17)") and r["n_seeds"] == 2
        assert set(r["values"]) == {"start", "end", "mse_end"}
        assert all(len(v) == 2 for v in r["values"].values())
        assert "dlr" in r["tolerance"] and "Welch" in r["tolerance"]
        # the reference is at the logged n, the MLP's p and the rank the D_LR used
        assert (r["reference"]["n"], r["reference"]["p"]) == (200, 16)
    assert [r["reference"]["rank"] for r in rows] == [10, 9, 9]  # softmax / centring drop one
    assert (tmp_path / "run" / "cross_entropy.png").exists()


def _seed(start, end, mse_end):
    one = {f"ce_{c}_{k}": v for c in exp.CHOICES for k, v in (("start", start), ("end", end))}
    return {**one, **{f"ce_{c}_rank": 9 for c in exp.CHOICES}, "mse_logits_end": mse_end,
            "ce_test_acc": 0.9}  # fmt: skip


@pytest.mark.parametrize(
    "start,end,mse_end,verdict",
    [
        ((0.6, 0.6, 0.6), (0.15, 0.16, 0.14), (0.14, 0.15, 0.13), "reproduced"),
        ((0.6, 0.6, 0.6), (0.30, 0.31, 0.29), (0.14, 0.15, 0.13), "direction reproduced"),
        ((0.4, 0.4, 0.4), (0.60, 0.61, 0.59), (0.14, 0.15, 0.13), "not reproduced"),
        ((0.6, 0.3, 0.6), (0.3, 0.6, 0.31), (0.14, 0.15, 0.13), "inconclusive"),
    ],
)
def test_verdicts(start, end, mse_end, verdict):
    from nets.data import load_digits

    per_seed = [_seed(*x) for x in zip(start, end, mse_end, strict=True)]
    rows = exp.comparison(per_seed, exp.Config(), load_digits(), n_eval=1000, p=256)
    assert {r["verdict"] for r in rows} == {verdict}
    for r in rows:
        assert r["criterion"].startswith("D App. E (Fig 17)") and "Welch" in r["tolerance"]
        assert r["n_seeds"] == 3 and r["values"]["mse_end"] == list(mse_end)
        assert (r["reference"]["n"], r["reference"]["p"], r["reference"]["rank"]) == (1000, 256, 9)


def test_grokking_preset_reads_the_mf_boundary_without_a_control():
    cfg = registry.get("cross-entropy").config("grokking")
    assert (cfg.task, cfg.optimizer, cfg.weight_decay, cfg.mse_twin) == (
        "modular",
        "adamw",
        1.0,
        False,
    )
    per_seed = [_seed(0.5, 0.05, None) for _ in range(3)]
    rows = exp.comparison(per_seed, cfg, _modular(), n_eval=4656, p=128)
    assert {r["verdict"] for r in rows} == {"reproduced"}
    assert all(set(r["values"]) == {"start", "end"} for r in rows)


def _modular():
    from nets.data import load

    return load("modular_division", p=7)


def test_bad_config():
    with pytest.raises(ValueError, match="task must be one of"):
        exp.run(dataclasses.replace(exp.Config(), task="text"), None)
    with pytest.raises(ValueError, match="temperatures must be > 0"):
        exp.run(dataclasses.replace(exp.Config(), temperatures=(0.0,)), None)
