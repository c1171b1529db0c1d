"""The pieces every experiment shares: training sub-configs, paper presets, tolerances, read_json."""

import dataclasses
import json

import numpy as np
import pytest

from lrrich import io, registry
from lrrich.experiments import _plots, _presets, _seeds


def test_step_training_fields_reach_train_config_and_overrides_win():
    cfg = _presets.StepTraining(
        optimizer="adam", lr=3e-4, momentum=0.5, b1=0.8, b2=0.95, eps=1e-6, weight_decay=0.1,
        warmup_steps=7, batch_size=64, steps=123,
    )  # fmt: skip
    tc = _presets.train_config(cfg, loss="ce", output_scale=2.0)
    for k in ("optimizer", "lr", "momentum", "b1", "b2", "eps", "weight_decay", "warmup_steps",
              "batch_size", "steps"):  # fmt: skip
        assert getattr(tc, k) == getattr(cfg, k), k
    assert (tc.loss, tc.output_scale) == ("ce", 2.0)
    assert _presets.train_config(cfg, lr=1.0).lr == 1.0
    # a plain Training config sets only the optimizer: the run length stays TrainConfig's
    plain = _presets.train_config(_presets.Training(lr=0.3))
    assert (plain.lr, plain.steps, plain.batch_size) == (0.3, None, 128)


def test_one_train_config_for_every_sub_config():
    """A field named like a TrainConfig field is that field; n_train caps the batch and an image
    config must give it (the old image signature, config and n_train, still reads the same)."""
    cfg = _presets.ImageTraining(batch_size=64, epochs=3, output_scale=0.5, augment="cifar")
    tc = _presets.train_config(cfg, 50, schedule="step")
    assert (tc.batch_size, tc.epochs, tc.output_scale, tc.augment) == (50, 3, 0.5, "cifar")
    assert tc.schedule == "step" and tc.momentum == 0.9
    with pytest.raises(TypeError, match="n_train"):
        _presets.train_config(cfg)
    step = _presets.StepTraining(batch_size=512)
    assert _presets.train_config(step, 100).batch_size == 100
    assert _presets.train_config(step).batch_size == 512


def test_seed_mean_averages_every_number_but_the_seed():
    runs = [{"seed": 0, "dlr": 0.1, "rank": 3, "ok": True, "h": [1]}, {"seed": 1, "dlr": 0.3}]
    assert _seeds.seed_mean(runs) == pytest.approx({"dlr": 0.2, "rank": np.nan}, nan_ok=True)
    assert _seeds.seed_mean(runs, ["dlr"]) == pytest.approx({"dlr": 0.2})
    # a seed whose value is undefined (None, read back from JSON) makes the mean NaN
    assert np.isnan(_seeds.seed_mean([{"fit": None}, {"fit": 3.0}])["fit"])


def test_grokking_experiments_share_the_step_training_fields():
    """The TrainConfig each experiment builds is the one its (shared) config fields state."""
    from lrrich.experiments import grokking_mlp, grokking_transformer, kunin_grokking

    for mod in (grokking_mlp, grokking_transformer, kunin_grokking):
        assert issubclass(mod.Config, _presets.StepTraining), mod.NAME
    kg = kunin_grokking.Config(lr=2e-3, b2=0.9, warmup_steps=3, batch_size=32, steps=40)
    tc = kunin_grokking.tau_train_config(kg, 2.0)  # logits × τ, lr ÷ τ² (K App. D.3)
    assert (tc.lr, tc.output_scale, tc.loss) == (pytest.approx(5e-4), 2.0, "ce")
    assert (tc.b2, tc.warmup_steps, tc.batch_size, tc.steps) == (0.9, 3, 32, 40)
    gm = grokking_mlp.variant_train_config(grokking_mlp.Config(eps=1e-5, steps=50), "default")
    assert (gm.optimizer, gm.eps, gm.steps, gm.warmup_steps) == ("adam", 1e-5, 50, 0)
    # teddykoker/grokking's AdamW, which D used: the transformer's defaults are the base's
    gt = grokking_transformer.Config()
    assert (gt.optimizer, gt.lr, gt.b1, gt.b2, gt.weight_decay, gt.warmup_steps) == (
        "adamw",
        1e-3,
        0.9,
        0.98,
        1.0,
        10,
    )
    assert (gt.batch_size, gt.steps) == (512, 3000)


def test_emergence_time_and_data_panels_train_with_the_shared_optimizer_fields():
    from lrrich.experiments import emergence

    cfg = emergence.Config()
    assert isinstance(cfg, _presets.Training)
    tc = _presets.train_config(cfg)
    assert (tc.optimizer, tc.lr, tc.momentum, tc.weight_decay) == ("sgd", 0.05, 0.0, 0.0)  # T C.3


def test_paper_scale_presets_are_the_papers_common_setting():
    # resnet-lr and vgg-batchnorm as written out before the helper (D App. F.4, T §2.4)
    rl = registry.get("resnet-lr")
    want = rl.config_cls(
        dataset="cifar100", n_train=None, width=64, epochs=600, output_scale=0.1,
        augment="cifar", checkpoint_every=2_000, normalize="channel",
    )  # fmt: skip
    assert rl.config("paper") == want
    vgg = registry.get("vgg-batchnorm")
    want = vgg.config_cls(
        dataset="cifar100", n_train=None, width=64, lr=0.01, output_scale=0.1, epochs=400,
        augment="cifar", checkpoint_every=2_000, normalize="channel", head="torchvision",
    )  # fmt: skip
    assert vgg.config("paper") == want
    # the experiment's own fields win, and MNIST rows are not augmented
    assert registry.get("label-shuffling").config("paper").n_train == 10_000
    assert registry.get("mf-regime").config("paper").augment == "none"
    # D App. F.4.2 normalises CIFAR per channel; the MNIST rows keep raw pixels
    assert registry.get("mf-regime").config("paper").normalize == "none"
    assert registry.get("mf-regime").config("paper-cifar10").normalize == "channel"
    assert registry.get("mf-regime").config("paper-cifar10").augment == "cifar"


def test_grid_summary_suffixes_points_and_keeps_plain_keys_for_one_point():
    a = {"dlr": 0.1, "test_acc": 0.9, "history": {}}
    b = {"dlr": 0.2, "test_acc": 0.8}
    assert _seeds.grid_summary({"_x": a, "_y": b}) == {
        "dlr_x": 0.1, "test_acc_x": 0.9, "dlr_y": 0.2, "test_acc_y": 0.8,
    }  # fmt: skip
    assert _seeds.grid_summary({"_x": a}) == {"dlr": 0.1, "test_acc": 0.9}


def test_tolerances_are_named_with_their_source_and_value_checks_read_them():
    from lrrich import claims

    assert claims.TOLERANCES["dlr"].value == 0.05
    for name, tol in claims.TOLERANCES.items():
        assert tol.value > 0 and len(tol.source) > 20, name

    def inside(x, paper, kind):
        return claims.Value("v", paper, kind).check({"v": np.array([x])}, True).outcome

    # absolute: strictly within; relative: |measured / paper − 1| ≤ value
    assert not inside(0.53, 0.59, "dlr") and inside(0.55, 0.59, "dlr")
    assert inside(1000.0, 800.0, "constant")  # +25 %
    assert not inside(1001.0, 800.0, "constant")
    assert inside(12.0, 10.0, "d_eff") and not inside(12.1, 10.0, "d_eff")
    # a gap equal to the bound is outside, also where float round-off makes it 0.04999…
    assert 0.15 - 0.10 < 0.05 and not inside(0.15, 0.10, "accuracy")


def test_one_read_json_with_a_clear_error(tmp_path):
    import nets.io

    assert io.read_json is nets.io.read_json
    good = tmp_path / "a.json"
    io.write_json(good, {"x": np.float32(1.5)})
    assert nets.io.read_json(good) == {"x": 1.5}
    bad = tmp_path / "b.json"
    bad.write_text('{"x": ')
    with pytest.raises(ValueError, match=r"b\.json is not valid JSON \(line 1"):
        nets.io.read_json(bad)
    with pytest.raises(FileNotFoundError):
        nets.io.read_json(tmp_path / "absent.json")
    assert json.loads(good.read_text()) == {"x": 1.5}


def test_set_overrides_still_reach_the_shared_fields():
    exp = registry.get("grokking-transformer")
    cfg = exp.config("small", {"lr": "0.002", "b2": "0.99", "steps": "100"})
    assert (cfg.lr, cfg.b2, cfg.steps) == (0.002, 0.99, 100)
    fields = {f.name for f in dataclasses.fields(registry.get("emergence").config_cls)}
    assert {"seed", "lr", "width_lr", "width_optimizer"} <= fields


def test_training_defaults_are_train_configs():
    """`Training` restates TrainConfig's optimizer fields so `--set` sees them at the top level of
    every experiment config; their defaults must stay TrainConfig's (no silent drift)."""
    import dataclasses

    from nets import TrainConfig

    base = TrainConfig()
    for f in dataclasses.fields(_presets.Training):
        if f.name != "seed":
            assert f.default == getattr(base, f.name), f.name


def test_training_figure_draws_every_seed_as_a_band(tmp_path, monkeypatch):
    from lrrich import io as lrrich_io

    figures = []
    save = lrrich_io.save_figure
    monkeypatch.setattr(
        lrrich_io, "save_figure", lambda fig, path: figures.append(fig) or save(fig, path)
    )

    def history(shift):
        return {
            "epoch": [0, 1, 2],
            "loss": [None, 0.5 + shift, 0.2 + shift],
            "train_acc": [0.1, 0.8, 0.99],
            "test_acc": [0.1, 0.7, 0.9 - shift],
            "dlr_train": [0.6, 0.3, 0.1],
            "dlr_test": [0.6, 0.35 + shift, 0.2 + shift],
        }

    seeds = [history(0.0), history(0.05), history(0.1)]
    paths = _plots.plot_points({"a": {"history": seeds[0]}}, tmp_path, "t", "title", {"a": seeds})
    assert [p.name for p in paths] == ["t_training.png"] and paths[0].stat().st_size > 0
    dlr_ax = figures[0].axes[0]
    (band, *_) = dlr_ax.collections  # the range over the three seeds
    ys = band.get_paths()[0].vertices[:, 1]
    assert min(ys) == pytest.approx(0.2) and max(ys) == pytest.approx(0.6)
    mean = dlr_ax.lines[0].get_ydata()
    assert list(mean) == pytest.approx([0.6, 0.4, 0.25])  # the seed mean
    assert dlr_ax.get_legend_handles_labels()[1][0] == "a (3 seeds)"
    # one run: a line, no band
    figures.clear()
    _plots.plot_points({"a": {"history": seeds[0]}}, tmp_path, "u", "title")
    assert not figures[0].axes[0].collections


def test_seed_mean_can_skip_undefined_seeds():
    runs = [{"dlr": 0.2, "nc1": None}, {"dlr": np.nan, "nc1": None}, {"dlr": 0.4, "nc1": None}]
    assert np.isnan(_seeds.seed_mean(runs)["dlr"])
    got = _seeds.seed_mean(runs, ["dlr", "nc1"], skip_nan=True)
    assert got["dlr"] == pytest.approx(0.3) and np.isnan(got["nc1"])  # undefined in every seed


def test_seed_dots_mean_skips_a_diverged_seed_when_asked():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    _plots.seed_dots(ax, [1, 2], [[0.2, 0.4], [0.3, None]], "s-", skip_nan=True)
    _plots.seed_dots(ax, [1, 2], [[0.2, 0.4], [0.3, None]], "o-")
    skipped, plain = ax.lines[2], ax.lines[5]  # each call: a dot line per x, then the mean
    assert list(skipped.get_ydata()) == pytest.approx([0.3, 0.3])
    assert np.isnan(plain.get_ydata()[1])
    plt.close(fig)


def test_spearman_against_scipy():
    from scipy.stats import spearmanr

    from lrrich.experiments._measure import spearman

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=12), rng.normal(size=12)
    assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
    assert spearman([1, 2, 3], [5, 7, 9]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [9, 7, 5]) == pytest.approx(-1.0)
    assert np.isnan(spearman([1, 2], [1, float("nan")]))
    assert np.isnan(spearman([1], [1]))


def test_train_seeds_probe_sees_every_log_point_and_the_initial_network(tmp_path):
    """A probe's callback runs at every log point of every seed, its finish reads the initial
    network, and the numbers equal a plain train_seeds run (the callback changes no step)."""
    from flax import nnx

    from lrrich.experiments import _data

    data = _data.load_task("digits")
    tc = _presets.train_config(_presets.ImageTraining(lr=0.05, epochs=2), len(data.x_train))
    seen = {}

    def probe(seed, model0):
        steps = seen.setdefault(seed, [])
        w0 = np.asarray(nnx.state(model0, nnx.Param)["head"]["kernel"][...])

        def finish(model):
            w = np.asarray(nnx.state(model, nnx.Param)["head"]["kernel"][...])
            return {"steps": list(steps), "moved": float(np.abs(w - w0).max())}

        return (lambda record, model: steps.append(record["step"])), finish

    kw = dict(seeds=[0, 1], width=8, depth=1, log_every=5)
    got = _seeds.train_seeds("mlp", data, tc, run_dir=tmp_path / "a", probe=probe, **kw)
    plain = _seeds.train_seeds("mlp", data, tc, run_dir=tmp_path / "b", **kw)
    assert sorted(seen) == [0, 1]
    for g, p in zip(got, plain, strict=True):
        assert g["steps"] == g["history"]["step"] and g["moved"] > 0
        assert (g["dlr"], g["test_acc"]) == (p["dlr"], p["test_acc"])
    # cached: the probe's results come back without training again
    seen.clear()
    again = _seeds.train_seeds("mlp", data, tc, run_dir=tmp_path / "a", probe=probe, **kw)
    assert not seen and [a["steps"] for a in again] == [g["steps"] for g in got]


def test_train_run_is_one_resumable_logged_checkpointed_train(tmp_path):
    """_seeds.train_run is nets.train with the config's log and checkpoint periods, the seed's
    data order, and resumption from its folder."""
    import jax
    from flax import nnx

    from nets import MLP, train
    from nets.data import load

    data = load("modular_division", p=5, train_fraction=0.5, encoding="onehot")
    cfg = _presets.StepTraining(batch_size=4, steps=6, log_every=2, checkpoint_every=3, seed=1)
    tc = _presets.train_config(cfg)

    def model():
        return MLP(10, (8,), 5, rngs=nnx.Rngs(0))

    def direct(seed, folder):
        return train(model(), data, tc, key=jax.random.key(seed), log_every=2, metrics={},
                     run_dir=tmp_path / folder, checkpoint_every=3)[1].column("loss")  # fmt: skip

    _, hist = _seeds.train_run(model(), data, tc, cfg, tmp_path / "a", seed=7, metrics={})
    assert list(hist.column("step")) == [0, 2, 4, 6]
    assert (tmp_path / "a" / "checkpoints").is_dir()
    np.testing.assert_array_equal(hist.column("loss"), direct(7, "direct7"))
    # a second call resumes from the finished run; the default seed is the config's
    _, again = _seeds.train_run(model(), data, tc, cfg, tmp_path / "a", seed=7, metrics={})
    np.testing.assert_array_equal(again.column("loss"), hist.column("loss"))
    _, own = _seeds.train_run(model(), data, tc, cfg, tmp_path / "b", metrics={})
    np.testing.assert_array_equal(own.column("loss"), direct(1, "direct1"))
    assert not np.array_equal(own.column("loss")[1:], hist.column("loss")[1:])


def test_step_figure_draws_a_panel_per_title_and_a_line_per_curve():
    import matplotlib.pyplot as plt

    run = {"step": [0, 10, 100], "train_acc": [0.1, 0.5, 1.0], "test_acc": [0.1, 0.2, 0.9]}
    panels = {"accuracy": [(run, "train_acc", "train"), (run, "test_acc", "test")],
              "test": [(run, "test_acc", "a"), (run, "test_acc", "b"), (run, "test_acc", "c")]}  # fmt: skip
    fig, axes = _plots.step_figure(panels, cmap="viridis", ylabel="accuracy")
    assert [ax.get_title() for ax in axes] == ["accuracy", "test"]
    assert [len(ax.lines) for ax in axes] == [2, 3]
    assert axes[0].get_xscale() == "log" and list(axes[0].lines[0].get_xdata()) == [1, 10, 100]
    assert list(axes[0].lines[1].get_ydata()) == [0.1, 0.2, 0.9]
    assert axes[0].get_legend() is not None and axes[1].get_ylabel() == "accuracy"
    # cmap: the first and last line of a panel at the two ends of the map
    ends = [axes[1].lines[i].get_color() for i in (0, -1)]
    assert np.allclose(ends, [plt.get_cmap("viridis")(0.0), plt.get_cmap("viridis")(1.0)])
    plt.close(fig)
    fig, (ax,) = _plots.step_figure({"t": [(run, "train_acc", "x")]}, log=False)
    assert ax.get_xscale() == "linear" and list(ax.lines[0].get_xdata()) == [0, 10, 100]
    plt.close(fig)
