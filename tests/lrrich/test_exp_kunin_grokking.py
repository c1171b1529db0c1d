"""kunin-grokking: the α / τ knobs against their definitions, and a tiny grid through the runner."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from lrrich import registry
from lrrich.experiments import kunin_grokking as exp
from lrrich.runner import run_experiment

TINY = dataclasses.replace(
    exp.Config(),
    p=23,
    width=64,
    alphas=(0.1, 10.0),
    taus=(0.5, 1.0),
    n_seeds=1,
    batch_size=128,
    steps=120,
    log_every=20,
    checkpoint_every=60,
    threshold=0.5,
)


def test_mlp_balance_divides_the_embedding_and_keeps_the_function():
    cfg = dataclasses.replace(TINY, model="mlp")
    base = exp.make_model(cfg, 1.0, 0, 2 * cfg.p, cfg.p)
    bal = exp.make_model(cfg, 10.0, 0, 2 * cfg.p, cfg.p)
    np.testing.assert_allclose(
        bal.layers[0].kernel[...] * 10, base.layers[0].kernel[...], rtol=1e-6
    )
    np.testing.assert_allclose(bal.head.kernel[...] / 10, base.head.kernel[...], rtol=1e-6)
    x = jnp.concatenate([jnp.eye(cfg.p), jnp.roll(jnp.eye(cfg.p), 3, axis=1)], axis=1)
    np.testing.assert_allclose(bal(x), base(x), rtol=1e-4, atol=1e-6)  # ReLU: f unchanged


def test_transformer_embeddings_are_torch_normal_divided_by_alpha():
    cfg = dataclasses.replace(TINY, model="transformer", d_model=16, num_heads=2)
    base = exp.make_model(cfg, 1.0, 3, 4, cfg.p)
    bal = exp.make_model(cfg, 4.0, 3, 4, cfg.p)
    for name in ("token_embed", "pos_embed"):
        e0 = getattr(base, name).embedding[...]
        np.testing.assert_allclose(getattr(bal, name).embedding[...] * 4, e0, rtol=1e-6)
        assert 0.8 < float(jnp.std(e0)) < 1.2  # nn.Embedding's N(0, 1) at α = 1
    np.testing.assert_array_equal(bal.head.kernel[...], base.head.kernel[...])
    assert bal(jnp.zeros((2, 4), jnp.int32)).shape == (2, cfg.p)


def test_tau_scales_the_logits_and_divides_the_lr_by_tau_squared():
    tc = exp.train_config(exp.Config(), 0.5)
    assert tc.output_scale == 0.5 and tc.lr == pytest.approx(3e-3 / 0.25)
    assert (tc.optimizer, tc.b2, tc.weight_decay, tc.loss) == ("adamw", 0.98, 1.0, "ce")
    paper = registry.get("kunin-grokking").config("paper")
    assert paper.model == "transformer" and paper.steps == 30000 and len(paper.alphas) == 5
    with pytest.raises(ValueError, match="tau"):
        exp.train_config(exp.Config(), 0.0)


def test_time_to_is_the_first_logged_crossing():
    steps = np.array([0, 50, 100])
    assert exp.time_to(steps, np.array([0.0, 0.995, 1.0]), 0.99) == 50.0
    assert np.isnan(exp.time_to(steps, np.array([0.0, 0.5, 0.9]), 0.99))


def test_tiny_grid_writes_heat_maps_and_report(tmp_path):
    res = run_experiment("kunin-grokking", TINY, tmp_path / "r")
    g = res["grid"]
    assert np.array(g["t_gen_mean"]).shape == (2, 2)
    assert np.array(g["t_fit"]).shape == (2, 2, 1)
    t_gen = np.array(g["t_gen_mean"], float)
    assert np.all((t_gen >= 0) & (t_gen <= TINY.steps))
    assert res["summary"]["fastest_grid_point"].startswith("α=")
    assert len(res["curves"]) == 4
    for name in ("kunin_grokking.png", "kunin_grokking_curves.png", "report.md"):
        assert (tmp_path / "r" / name).stat().st_size > 0
    assert "| fastest_grid_point |" in (tmp_path / "r" / "report.md").read_text()
    # one seed: neither the τ nor the α effect is resolved from seed noise
    rows = res["comparison"]
    assert len(rows) == 2 and all(r["n_seeds"] == 1 for r in rows)
    assert [r["verdict"] for r in rows] == ["inconclusive"] * 2
    assert all("one seed" in r["note"] and r["criterion"].startswith("K Fig 12") for r in rows)


def test_two_seeds_decide_the_ordering():
    # (n_alpha = 2, n_tau = 2, n_seeds = 2); α = (1, 10), τ = (0.5, 1.5); NaN: not within budget
    t_gen = np.array([[[1000, 1100], [5000, np.nan]], [[800, 900], [4000, 4200]]], float)
    cfg = exp.Config(alphas=(1.0, 10.0), taus=(0.5, 1.5), n_seeds=2, steps=6000)
    tau_row, alpha_row = exp.comparison(t_gen, cfg)
    assert tau_row["values"]["large tau"] == [4500.0, 5100.0]  # NaN counted at the budget
    assert tau_row["verdict"] == "reproduced" and alpha_row["verdict"] == "reproduced"
    t_gen[1, 0] = [1200, 850]  # α = 10 slower in one seed, faster in the other
    assert exp.comparison(t_gen, cfg)[1]["verdict"] == "inconclusive"
