"""The pure step with traced hyper-parameters: no recompilation, vmapped sweeps, NaN metrics."""

import copy
import dataclasses
import math
import pickle
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from nets import MLP, TrainConfig, TrainingDiverged, evaluate, load_digits, train, train_many
from nets.config import HParams
from nets.data import Dataset
from nets.loop import record_values
from nets.optim import learning_rate_schedule
from tests.same_run import assert_same_run

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"

# Tolerances of nets' training comparisons (float32 training; ε32 = 1.2e-7), and where they come from.
TOL = {
    # vmapped vs sequential runs: same arithmetic up to reassociation of float32 sums in the
    # batched GEMMs, ~ε32 per step amplified over 12 SGD steps with momentum 0.9
    "vmap_params": dict(rtol=2e-5, atol=2e-6),
    # logged losses/accuracies/D_LR of those runs: the same parameter differences through a
    # forward pass and D_LR's float32 Gram matrix
    "vmap_log": dict(rtol=1e-4, atol=1e-6),
    # bfloat16 compute vs float32: 8 mantissa bits, ε_bf16 = 7.8e-3 relative per product, over
    # 12 steps on parameters of size ~0.1–1
    "bf16_params": dict(rtol=0, atol=2e-2),
    # the same float32 forward pass computed twice (log point vs evaluate)
    "same_forward": dict(rtol=1e-6),
    # D_LR of the same float32 features, cached vs recomputed: float32 Gram and eigh round-off
    "same_dlr": dict(rtol=1e-5),
    # traced schedule factor × η vs optax's schedules: one float32 rounding each
    "schedule": dict(rtol=1e-6, atol=1e-9),
    # nets.xla_cpu's CPU options vs plain jax.jit: other convolution/reduction kernels, i.e.
    # reassociated float32 sums of ≤ 400 terms per output (~400·ε32 ≈ 5e-5 relative worst case,
    # ~1e-6 typical), through 5 SGD steps of LeNet-5
    "compiler_options": dict(rtol=1e-4, atol=1e-6),
}


@pytest.fixture(scope="module")
def small():
    d = load_digits()
    return d._replace(x_train=d.x_train[:384], y_train=d.y_train[:384])


def _mlp(seed=0, hidden=(16,)):
    return MLP(64, hidden, 10, rngs=nnx.Rngs(seed))


class _Compiles:
    """Counts XLA backend compilations while active."""

    def __init__(self):
        self.count, self.active = 0, False
        jax.monitoring.register_event_duration_secs_listener(self._listen)

    def _listen(self, name, _duration, **_kw):
        if self.active and name == BACKEND_COMPILE:
            self.count += 1


_COMPILES = _Compiles()


def test_new_lr_weight_decay_target_scale_reuse_the_compiled_program(small):
    cfg = TrainConfig(lr=0.05, momentum=0.9, batch_size=64, epochs=2, schedule="step")
    kw = dict(log_every=6, progress=False)
    train(_mlp(0), small, cfg, key=jax.random.key(0), **kw)  # compiles
    _COMPILES.active = True
    try:
        for change in (
            dict(lr=0.2),
            dict(weight_decay=1e-3),
            dict(target_scale=3.0, target_downscale=2.0),
            dict(momentum=0.5, output_scale=2.0, input_scale=0.5, step_factor=0.5),
        ):
            _COMPILES.count = 0
            new = dataclasses.replace(cfg, **change)
            train(_mlp(1), small, new, key=jax.random.key(1), **kw)
            assert _COMPILES.count == 0, f"{change} recompiled {_COMPILES.count} programs"
    finally:
        _COMPILES.active = False


def test_program_hash_is_cached_and_agrees_with_equality():
    from nets.step import build

    def program(seed, **kw):
        cfg = TrainConfig(**kw)
        return build(_mlp(seed), cfg, num_classes=10, steps_per_epoch=4, total_steps=8)[0]

    a, b = program(0), program(1)  # other weights, the same structure and static config
    assert a == b and hash(a) == hash(b)
    assert hash(a) == hash(a)  # the cached value is returned on the second call
    # the cache does not travel: str hashes differ between processes
    for twin in (pickle.loads(pickle.dumps(a)), copy.copy(a)):
        assert "_hash" not in vars(twin) and twin == a and hash(twin) == hash(a)
    for other in (
        dataclasses.replace(a, total_steps=9),
        dataclasses.replace(a, num_classes=3),
        program(0, last_layer_only=True),
    ):
        assert other != a and hash(other) != hash(a)


def _leaves(model):
    return [np.asarray(a) for a in jax.tree.leaves(nnx.state(model, nnx.Param))]


def test_train_many_equals_sequential_train_per_run(small):
    """4 runs (2 seeds × 2 learning rates) vmapped = 4 separate ``train`` calls, to float32."""
    base = TrainConfig(lr=0.05, momentum=0.9, batch_size=64, epochs=2, weight_decay=1e-4)
    runs = [(s, lr) for s in (0, 1) for lr in (0.02, 0.1)]
    configs = [dataclasses.replace(base, lr=lr) for _, lr in runs]
    keys = [jax.random.key(10 + s) for s, _ in runs]
    models, hists = train_many(
        [_mlp(s) for s, _ in runs], small, configs, keys, log_every=6, eval_size=100
    )
    for i, (s, _) in enumerate(runs):
        ref, ref_hist = train(
            _mlp(s), small, configs[i], key=keys[i], log_every=6, eval_size=100, progress=False
        )
        for a, b in zip(_leaves(ref), _leaves(models[i]), strict=True):
            np.testing.assert_allclose(b, a, **TOL["vmap_params"])
        assert [r["step"] for r in hists[i].records] == [r["step"] for r in ref_hist.records]
        for key in ("test_loss", "train_acc", "dlr_test", "lr", "loss"):
            np.testing.assert_allclose(
                hists[i].column(key), ref_hist.column(key), **TOL["vmap_log"]
            )
    assert not np.allclose(_leaves(models[0])[0], _leaves(models[1])[0])


def test_train_many_unvectorized_equals_train_bitwise(small):
    """vectorize=False steps the runs one after another in one program: train's exact values on
    the CPU (tests/same_run.py; it held bitwise on an H200 too, 2026-11-27)."""
    base = TrainConfig(lr=0.05, optimizer="adam", batch_size=64, epochs=2, weight_decay=1e-4)
    configs = [dataclasses.replace(base, lr=lr) for lr in (0.02, 0.1)]
    keys = [jax.random.key(10), jax.random.key(11)]
    kw = dict(log_every=6, eval_size=100)
    models, hists = train_many([_mlp(0), _mlp(1)], small, configs, keys, vectorize=False, **kw)
    for i in range(2):
        ref, ref_hist = train(_mlp(i), small, configs[i], key=keys[i], progress=False, **kw)
        for a, b in zip(_leaves(ref), _leaves(models[i]), strict=True):
            assert_same_run(b, a)
        for key in ("loss", "test_loss", "train_acc", "dlr_test", "dlr_train", "lr"):
            assert_same_run(hists[i].column(key), ref_hist.column(key), err_msg=key)


@pytest.mark.parametrize("varied", ["lr", "input_scale"])
def test_stacked_log_point_with_shared_hparams_equals_each_runs_own(small, varied):
    """A vmapped log point passes the hyper-parameters common to all runs unbatched (the input
    scale once, the first layer one GEMM for all runs): each run's values equal its own
    ``log_values`` to float32 round-off, whether the varied field is shared or not."""
    from nets.evaluate import default_metric, log_values, log_values_many, shared_fields
    from nets.loop import _build_runs, _unstack

    base = TrainConfig(batch_size=64, epochs=1, input_scale=0.5, output_scale=2.0,
                       target_scale=3.0)  # fmt: skip
    configs = [dataclasses.replace(base, **{varied: v}) for v in (0.25, 0.5, 1.0)]
    flags = dict(zip(HParams._fields, shared_fields(configs), strict=True))
    assert [f for f, same in flags.items() if not same] == [varied]
    runs, _ = _build_runs([_mlp(i) for i in range(3)], small, configs,
                          [jax.random.key(i) for i in range(3)], stacked=True, mesh=None)  # fmt: skip
    fit, held = (small.x_train[:200], small.y_train[:200]), (small.x_test[:90], small.y_test[:90])
    metric = (("dlr", default_metric),)
    args = (runs.program, runs.state, runs.hp, fit, held, metric, 128, ("train", "test"))
    got = log_values_many(*args, None, None, shared_fields(configs))
    for i in range(3):
        own = log_values(runs.program, _unstack(runs.state, i), _unstack(runs.hp, i), fit, held,
                         metric, 128)  # fmt: skip
        for key, value in own.items():
            np.testing.assert_allclose(got[key][i], value, **TOL["vmap_log"], err_msg=key)


def test_batched_log_point_metrics_equal_the_looped_ones(small):
    """The accelerators' form of a stacked log point (the metrics of the R runs as one ``vmap``,
    :func:`nets.evaluate.batched_log_points`) gives each run the values of the CPU's looped form
    (``lax.map``), to float32 round-off; checked here on the CPU with small subsets (larger
    vmapped pairs of D_LRs can hang XLA:CPU: ``benchmarks/xla_cpu_hangs.py``)."""
    import importlib

    from nets.loop import _build_runs

    ev = importlib.import_module("nets.evaluate")  # the module (nets.evaluate is also a function)
    configs = [TrainConfig(batch_size=64, epochs=1, lr=lr) for lr in (0.05, 0.1, 0.2)]
    runs, _ = _build_runs([_mlp(i) for i in range(3)], small, configs,
                          [jax.random.key(i) for i in range(3)], stacked=True, mesh=None)  # fmt: skip
    fit, held = (small.x_train[:200], small.y_train[:200]), (small.x_test[:90], small.y_test[:90])
    args = (runs.program, runs.state, runs.hp, fit, held, (("dlr", ev.default_metric),), 128,
            ("train", "test"), None, None, ev.shared_fields(configs))  # fmt: skip
    looped, batched = (ev.log_values_many(*args, form) for form in (False, True))
    assert set(batched) == set(looped) and "dlr_test_rank" in batched
    for key, value in looped.items():
        np.testing.assert_allclose(batched[key], value, **TOL["vmap_log"], err_msg=key)


def test_train_many_refuses_runs_that_need_another_program(small):
    cfgs = [TrainConfig(epochs=1, batch_size=64), TrainConfig(epochs=1, batch_size=32)]
    keys = [jax.random.key(0)] * 2
    with pytest.raises(ValueError, match="batch_size"):
        train_many([_mlp(0), _mlp(1)], small, cfgs, keys)
    with pytest.raises(ValueError, match="structure"):
        train_many([_mlp(0), _mlp(1, (8,))], small, [cfgs[0]] * 2, keys)
    with pytest.raises(ValueError, match="same length"):
        train_many([_mlp(0)], small, cfgs, keys)


@pytest.mark.parametrize("other", [dict(epochs=2), dict(steps=7), dict(epochs=2, steps=5)], ids=str)
def test_train_many_refuses_runs_of_another_length(small, other):
    """Runs of other lengths cannot share a program: a ValueError naming the lengths."""
    base = TrainConfig(lr=0.05, batch_size=64, epochs=5)
    cfgs = [base, dataclasses.replace(base, **other)]
    with pytest.raises(ValueError, match="configs\\[1\\] trains .* steps"):
        train_many([_mlp(0), _mlp(1)], small, cfgs, [jax.random.key(0)] * 2, metrics={})


def test_train_many_accepts_one_length_spelled_two_ways(small):
    """epochs=2 and steps=12 (6 steps per epoch) are the same run length."""
    base = TrainConfig(lr=0.05, batch_size=64, epochs=2)
    cfgs = [base, dataclasses.replace(base, steps=12)]
    _, hists = train_many([_mlp(0), _mlp(1)], small, cfgs, [jax.random.key(0)] * 2, metrics={})
    assert [h.steps for h in hists] == [12, 12] and hists[1].final["step"] == 12


def test_divergence_carries_step_and_loss_and_spares_other_runs(small):
    cfg = TrainConfig(lr=0.05, batch_size=64, epochs=2)
    bad = dataclasses.replace(cfg, lr=1e8)
    with pytest.raises(TrainingDiverged) as err:
        train(_mlp(0), small, bad, key=jax.random.key(0), metrics={}, progress=False)
    assert err.value.step >= 0 and not math.isfinite(err.value.loss)
    assert f"at step {err.value.step}" in str(err.value)
    _, hists = train_many(
        [_mlp(0), _mlp(0)], small, [cfg, bad], [jax.random.key(0)] * 2, metrics={}
    )
    assert hists[0].diverged is None and hists[0].final["step"] == 12
    assert hists[1].diverged.step == err.value.step


def test_undefined_metrics_are_nan_with_reason_and_training_goes_on(small):
    """Constant outputs (rank 0) and constant features give NaN D_LR with the reason."""
    model = _mlp(0)
    model.head.kernel[...] = jnp.zeros_like(model.head.kernel[...])
    cfg = TrainConfig(lr=0.0, batch_size=64, epochs=1)

    def refuses(f, o):
        raise ValueError("this metric is undefined here")

    host = {"host": lambda f, o: float(np.asarray(f).sum()), "bad": refuses}
    _, hist = train(model, small, cfg, key=jax.random.key(0), progress=False, eval_size=64)
    rec = hist.final
    assert math.isnan(rec["dlr_test"]) and "rank 0" in rec["undefined"]["dlr_test"]
    _, hist = train(
        _mlp(0), small, cfg, key=jax.random.key(0), progress=False, eval_size=64, metrics=host
    )
    assert (
        math.isnan(hist.final["bad_test"])
        and "undefined here" in hist.final["undefined"]["bad_test"]
    )
    assert math.isfinite(hist.final["host_test"])
    flat = small._replace(x_test=np.zeros_like(small.x_test))
    _, hist = train(_mlp(0), flat, cfg, key=jax.random.key(0), progress=False, eval_size=64)
    assert math.isnan(hist.final["dlr_test"]) and "rank 0" in hist.final["undefined"]["dlr_test"]
    assert math.isfinite(hist.final["dlr_train"]) and "dlr_train" not in hist.final["undefined"]
    # rank > 0 with a NaN value: constant features (metrics.dlr_with_rank's other undefined case)
    rec = record_values({"dlr_test": np.nan, "dlr_test_rank": 3, "x": 1.0})
    assert rec == {"dlr_test": rec["dlr_test"], "x": 1.0, "undefined": rec["undefined"]}
    assert "features are constant" in rec["undefined"]["dlr_test"]


def test_log_fraction_is_the_share_of_logging_time(small):
    cfg = TrainConfig(lr=0.05, batch_size=64, epochs=3)
    _, hist = train(_mlp(0), small, cfg, key=jax.random.key(0), log_every=3, progress=False)
    assert hist.log_seconds == hist.log_time > 0
    assert hist.log_fraction == pytest.approx(hist.log_time / (hist.log_time + hist.train_time))


def test_bfloat16_compute_keeps_float32_parameters_and_metrics(small):
    cfg = TrainConfig(lr=0.05, batch_size=64, epochs=2)
    low = dataclasses.replace(cfg, compute_dtype="bfloat16")
    ref, _ = train(_mlp(0), small, cfg, key=jax.random.key(0), metrics={}, progress=False)
    got, hist = train(_mlp(0), small, low, key=jax.random.key(0), progress=False, eval_size=5000)
    assert all(a.dtype == np.float32 for a in _leaves(got))
    for a, b in zip(_leaves(ref), _leaves(got), strict=True):
        np.testing.assert_allclose(b, a, **TOL["bf16_params"])
    full = evaluate(got, small, cfg)  # float32 forward of the same parameters
    np.testing.assert_allclose(hist.final["test_loss"], full["test_loss"], **TOL["same_forward"])
    with pytest.raises(ValueError, match="compute_dtype"):
        train(_mlp(0), small, dataclasses.replace(cfg, compute_dtype="fp8"), key=jax.random.key(0))


@pytest.mark.parametrize(
    "kw",
    [
        dict(schedule="step", step_every_epochs=3, step_factor=0.3),
        dict(schedule="cosine", warmup_steps=7),
        dict(schedule="constant", warmup_steps=5),
    ],
)
def test_traced_schedules_match_optax_schedules(kw):
    """Our traced η(s) = η·factor(s) against optax's own schedule implementations."""
    cfg = TrainConfig(lr=0.3, **kw)
    spe, total = 10, 100
    warm = cfg.warmup_steps
    if cfg.schedule == "step":
        ref = optax.exponential_decay(0.3, 30, 0.3, staircase=True)
    elif cfg.schedule == "cosine":
        ref = optax.cosine_decay_schedule(0.3, total - warm)
    else:
        ref = optax.constant_schedule(0.3)
    if warm:
        ref = optax.join_schedules([optax.linear_schedule(0.0, 0.3, warm), ref], [warm])
    ours = learning_rate_schedule(cfg, spe, total)
    for s in range(0, total + 1):
        np.testing.assert_allclose(float(ours(s)), float(ref(s)), **TOL["schedule"])


def test_nets_imports_neither_lrrich_nor_a_shadowing_metrics(tmp_path):
    code = "import sys, nets; assert not any(m.split('.')[0] == 'lrrich' for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)
    (tmp_path / "metrics.py").write_text("value = 1\n")
    shadowed = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import nets
    """)
    proc = subprocess.run([sys.executable, "-c", shadowed], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr and str(tmp_path / "metrics.py") in proc.stderr


def test_regression_targets_log_loss_without_accuracy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    y = x[:, 0].astype(np.float32)
    data = Dataset(x, y, x[:32], y[:32], num_classes=1, task="regression")
    cfg = TrainConfig(lr=0.05, batch_size=32, epochs=1, target_scale=2.0)
    model = MLP(64, (16,), 1, rngs=nnx.Rngs(0))
    _, hist = train(model, data, cfg, key=jax.random.key(0), progress=False, metrics={})
    out = np.asarray(model(jnp.asarray(x[:32])), np.float64)[:, 0]
    np.testing.assert_allclose(hist.records[0]["test_loss"], np.mean((out - 2 * y[:32]) ** 2),
                               rtol=1e-5)  # fmt: skip
    assert "test_acc" not in hist.final


def test_lazy_log_points_reuse_features_and_match_an_independent_evaluation(small):
    """Last-layer-only without batch statistics: Φ and Φ_cᵀΦ_c are cached, the records stay exact."""
    import metrics

    cfg = TrainConfig(lr=0.05, momentum=0.9, batch_size=64, epochs=2, last_layer_only=True)
    model, hist = train(_mlp(0), small, cfg, key=jax.random.key(0), progress=False, eval_size=5000)
    x = jnp.asarray(small.x_test)
    full = evaluate(model, small, cfg)
    np.testing.assert_allclose(hist.final["test_loss"], full["test_loss"], **TOL["same_forward"])
    assert hist.final["test_acc"] == full["test_acc"]
    dlr = float(metrics.dlr(model.features(x), model(x)))
    np.testing.assert_allclose(hist.final["dlr_test"], dlr, **TOL["same_dlr"])
    assert hist.records[0]["test_loss"] != hist.final["test_loss"]  # the head did train


def test_metric_splits_restrict_the_metrics_not_loss_and_accuracy(small):
    cfg = TrainConfig(lr=0.05, momentum=0.9, batch_size=64, epochs=2)
    kw = dict(key=jax.random.key(3), log_every=6, eval_size=100, progress=False)
    _, both = train(_mlp(0), small, cfg, **kw)
    _, test_only = train(_mlp(0), small, cfg, metric_splits=("test",), **kw)
    assert "dlr_train" not in test_only.final and "dlr_train" in both.final
    assert np.all(np.isnan(test_only.column("dlr_train")))
    for key in ("dlr_test", "test_loss", "train_loss", "train_acc"):
        np.testing.assert_allclose(test_only.column(key), both.column(key), **TOL["same_dlr"])
    # the vmapped trainer takes the same option
    _, hists = train_many(
        [_mlp(0), _mlp(1)], small, [cfg, cfg], [jax.random.key(3)] * 2, log_every=6,
        eval_size=100, metric_splits=["train"],
    )  # fmt: skip
    assert "dlr_train" in hists[0].final and "dlr_test" not in hists[0].final
    np.testing.assert_allclose(hists[0].column("dlr_train"), both.column("dlr_train"),
                               **TOL["vmap_log"])  # fmt: skip
    for bad in (("val",), "test", ()):
        with pytest.raises(ValueError, match="metric_splits"):
            train(_mlp(0), small, cfg, metric_splits=bad, **kw)


def test_train_many_lazy_runs_cache_features_and_match_train(small):
    """Last-layer-only runs in train_many reuse Φ and Φ_cᵀΦ_c like train: same records."""
    cfg = TrainConfig(lr=0.05, momentum=0.9, batch_size=64, epochs=2, last_layer_only=True)
    keys = [jax.random.key(5), jax.random.key(6)]
    kw = dict(log_every=6, eval_size=100)
    _, hists = train_many([_mlp(0), _mlp(1)], small, [cfg, cfg], keys, **kw)
    for i, seed in enumerate((0, 1)):
        _, ref = train(_mlp(seed), small, cfg, key=keys[i], progress=False, **kw)
        for key in ("dlr_train", "dlr_test", "test_loss", "train_acc"):
            np.testing.assert_allclose(hists[i].column(key), ref.column(key), **TOL["vmap_log"])
    assert hists[0].records[0]["test_loss"] != hists[0].final["test_loss"]  # the heads trained


@pytest.mark.parametrize(("n", "chunk"), [(1437, 1024), (7, 3), (9, 3), (5, 8)])
def test_chunked_forward_equals_one_forward_pass(n, chunk):
    from nets.evaluate import forward_all
    from nets.step import build, forward

    model = MLP(6, (5,), 3, rngs=nnx.Rngs(0))
    program, state, hp = build(
        model, TrainConfig(), num_classes=3, steps_per_epoch=1, total_steps=1
    )
    x = jax.random.normal(jax.random.key(1), (n, 6))
    feats, outs = forward_all(program, state, x, hp, chunk)
    ref_feats, ref_outs = forward(program, state, x, hp)
    assert feats.shape == (n, 5) and outs.shape == (n, 3)
    np.testing.assert_allclose(feats, ref_feats, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(outs, ref_outs, rtol=1e-6, atol=1e-6)


def test_advance_refuses_an_unknown_mode(small):
    from nets.step import advance, build, epoch_order

    program, state, hp = build(
        MLP(64, (8,), 10, rngs=nnx.Rngs(0)), TrainConfig(), num_classes=10,
        steps_per_epoch=2, total_steps=2,
    )  # fmt: skip
    order = epoch_order(jax.random.key(0), 100, 2, 8)
    with pytest.raises(ValueError, match="mode must be one of"):
        advance(program, state, small.x_train, small.y_train, order, 0, jax.random.key(1), hp,
                length=1, mode="pmap")  # fmt: skip


def test_advance_takes_a_traced_count_of_steps_in_one_compiled_loop(small):
    """``count`` ≤ ``length`` steps equal ``count`` steps of :func:`nets.step.run` on the same
    slice of the epoch (bitwise on the CPU), the losses past ``count`` are NaN, one compilation
    serves every count, and counts outside the epoch are refused."""
    from nets.step import advance, build, epoch_order, run

    def fresh():
        return build(
            MLP(64, (8,), 10, rngs=nnx.Rngs(0)), TrainConfig(lr=0.1, momentum=0.9),
            num_classes=10, steps_per_epoch=6, total_steps=12,
        )  # fmt: skip

    x, y = jnp.asarray(small.x_train), jnp.asarray(small.y_train)
    order, aug = epoch_order(jax.random.key(0), len(x), 6, 16), jax.random.key(1)
    program, state, hp = fresh()
    _COMPILES.count = 0
    try:
        for start, count in ((0, 1), (1, 3), (4, 2)):
            _COMPILES.active = start > 0  # the first call compiles
            state, losses = advance(program, state, x, y, order, start, aug, hp, length=4,
                                    count=count)  # fmt: skip
            losses = np.asarray(losses)
            assert losses.shape == (4,) and np.isnan(losses[count:]).all()
            assert np.isfinite(losses[:count]).all()
    finally:
        _COMPILES.active = False
    assert _COMPILES.count == 0, f"another count compiled {_COMPILES.count} programs"
    # the same six steps as one scan of nets.step.run
    _, ref, _ = fresh()
    ref, ref_losses = run(program, ref, x, y, order, aug, hp)
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(ref), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for start, count in ((0, 5), (5, 2), (-1, 1)):
        with pytest.raises(ValueError, match="do not lie in the epoch"):
            advance(program, state, x, y, order, start, aug, hp, length=4, count=count)


def test_where_a_run_stops_does_not_change_its_training(small):
    """Log points every 5 steps (co-prime with the 24 steps of an epoch), every epoch or only at
    the end split the same steps into other chunks: the final parameters are bitwise equal."""
    cfg = TrainConfig(lr=0.1, momentum=0.9, batch_size=16, epochs=3)
    finals = []
    for every in (5, 24, 72):
        model, hist = train(MLP(64, (8,), 10, rngs=nnx.Rngs(0)), small, cfg,
                            key=jax.random.key(2), log_every=every, metrics={}, progress=False)  # fmt: skip
        finals.append([np.asarray(a) for a in jax.tree.leaves(nnx.state(model))])
        assert hist.records[-1]["step"] == 72
    for other in finals[1:]:
        for a, b in zip(finals[0], other, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n", [1, 7, 1437, 1626, 4000])
def test_epoch_orders_are_jax_permutations_of_the_folded_keys(n):
    """nets.step.epoch_orders (on the CPU: jax's random sort keys, sorted stably by NumPy) gives
    exactly ``jax.random.permutation(fold_in(key, epoch), n)``, cut into minibatches, for one
    and two sort rounds (n ≤ 1,625 < n); the device path gives the same."""
    from nets.step import _device_orders, _sort_rounds, epoch_orders

    assert _sort_rounds(1437) == 1 and _sort_rounds(1626) == 2
    keys = jax.random.split(jax.random.key(5), 3)
    batch = max(n // 4, 1)
    spe = n // batch
    got = np.asarray(epoch_orders(keys, 2, n, spe, batch))
    assert got.shape == (3, spe, batch) and got.dtype == np.int32
    for k, order in zip(keys, got, strict=True):
        perm = np.asarray(jax.random.permutation(jax.random.fold_in(k, 2), n))
        np.testing.assert_array_equal(order.ravel(), perm[: spe * batch])
    np.testing.assert_array_equal(np.asarray(_device_orders(keys, 2, n, spe, batch)), got)


def test_stable_argsort_rows_breaks_ties_in_index_order():
    """The packed-key sort equals NumPy's stable argsort row by row, on keys with many ties
    (random uint32 keys of the permutations rarely tie) and on the extreme keys 0 and 2³² − 1."""
    from nets.step import _stable_argsort_rows

    rng = np.random.default_rng(0)
    keys = np.concatenate(
        [rng.integers(0, 4, (5, 300)), rng.choice([0, 2**32 - 1], (3, 300))]
    ).astype(np.uint32)
    want = np.stack([np.argsort(row, kind="stable") for row in keys])
    np.testing.assert_array_equal(_stable_argsort_rows(keys), want)
