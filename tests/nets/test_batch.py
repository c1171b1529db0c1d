"""nets.batch: train calls of threads stacked into one program, and its documented failure modes."""

import threading

import jax
import numpy as np
import pytest
from flax import nnx

import nets.loop
from nets import MLP, TrainConfig, load_digits, train
from nets.batch import TrainBatcher, batched_training
from tests.same_run import assert_same_records, assert_same_run

CFG = TrainConfig(lr=0.05, batch_size=64, epochs=1)
KW = dict(log_every=3, eval_size=64, metrics={}, progress=False)


@pytest.fixture(scope="module")
def small():
    d = load_digits()
    return d._replace(x_train=d.x_train[:256], y_train=d.y_train[:256])


def _mlp(seed, hidden=(8,)):
    return MLP(64, hidden, 10, rngs=nnx.Rngs(seed))


def _threads(workers, batcher):
    """Run each worker in its own thread under ``batcher``; returns {index: result or error}."""
    out = {}

    def go(i, work):
        try:
            with batched_training(batcher):
                out[i] = work()
        except Exception as e:  # noqa: BLE001 — the test inspects it
            out[i] = e

    threads = [threading.Thread(target=go, args=(i, w)) for i, w in enumerate(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread was held forever"
    return out


def _final_loss(result):
    return result[1].final["test_loss"]


def test_stacked_calls_equal_their_own_train(small, monkeypatch):
    stacked = []
    real = nets.loop.fit
    monkeypatch.setattr(
        nets.batch, "fit", lambda m, *a, **k: stacked.append(len(m)) or real(m, *a, **k)
    )
    batcher = TrainBatcher(2)
    work = [
        lambda s=s: batcher.train(_mlp(s), small, CFG, key=jax.random.key(s), **KW) for s in (0, 1)
    ]
    out = _threads(work, batcher)
    assert stacked == [2] and batcher.batched_runs == 2
    for s in (0, 1):  # the batcher steps the runs one after another (lax.map)
        _, ref = train(_mlp(s), small, CFG, key=jax.random.key(s), **KW)
        want = [{**r, **_times(out[s][1], j)} for j, r in enumerate(ref.records)]
        assert_same_records(out[s][1].records, want)


def test_vectorized_batcher_steps_the_group_as_one_vmap_close_to_own_train(small, monkeypatch):
    seen = []
    real = nets.loop.fit
    monkeypatch.setattr(
        nets.batch, "fit", lambda m, *a, **k: seen.append(k["vectorize"]) or real(m, *a, **k)
    )
    batcher = TrainBatcher(2, vectorize=True)
    work = [
        lambda s=s: batcher.train(_mlp(s), small, CFG, key=jax.random.key(s), **KW) for s in (0, 1)
    ]
    out = _threads(work, batcher)
    assert seen == [True] and batcher.batched_runs == 2
    for s in (0, 1):  # batched matmuls reorder float32 sums: close, not bitwise (a few steps)
        _, ref = train(_mlp(s), small, CFG, key=jax.random.key(s), **KW)
        for got, want in zip(out[s][1].records, ref.records, strict=True):
            np.testing.assert_allclose(got["test_loss"], want["test_loss"], rtol=1e-4)


def _times(hist, j):
    """The timing entries of record j of ``hist`` (they differ between any two runs)."""
    return {k: hist.records[j][k] for k in ("train_time", "log_time")}


def test_a_thread_that_never_trains_does_not_hold_the_others(small):
    batcher = TrainBatcher(3)
    work = [
        lambda: batcher.train(_mlp(0), small, CFG, key=jax.random.key(0), **KW),
        lambda: "no training here",
        lambda: batcher.train(_mlp(1), small, CFG, key=jax.random.key(1), **KW),
    ]
    out = _threads(work, batcher)
    assert out[1] == "no training here"
    assert batcher.batched_runs == 2 and _final_loss(out[0]) != _final_loss(out[2])


def test_a_thread_that_raises_leaves_and_errors_reach_their_own_caller(small):
    def raises_first():
        raise RuntimeError("before training")

    bad = TrainConfig(lr=1e8, batch_size=64, epochs=1)
    batcher = TrainBatcher(3)
    work = [
        raises_first,
        lambda: batcher.train(_mlp(0), small, bad, key=jax.random.key(0), **KW),
        lambda: batcher.train(_mlp(1), small, CFG, key=jax.random.key(1), **KW),
    ]
    out = _threads(work, batcher)
    assert isinstance(out[0], RuntimeError)
    assert isinstance(out[1], nets.TrainingDiverged)  # raised in its own thread only
    assert np.isfinite(_final_loss(out[2])) and batcher.batched_runs == 2


def test_mixed_shapes_run_in_their_own_groups(small):
    batcher = TrainBatcher(3)
    work = [
        lambda: batcher.train(_mlp(0), small, CFG, key=jax.random.key(0), **KW),
        lambda: batcher.train(
            _mlp(0, (4,)), small, CFG, key=jax.random.key(0), **KW
        ),  # another shape
        lambda: batcher.train(_mlp(1), small, CFG, key=jax.random.key(1), **KW),
    ]
    out = _threads(work, batcher)
    assert all(not isinstance(r, Exception) for r in out.values())
    assert batcher.batched_runs == 2  # the (4,) model ran alone
    assert out[1][0].head.kernel.shape == (4, 10)


def test_one_at_a_time_still_stacks_and_never_runs_two_workers_at_once(small):
    batcher = TrainBatcher(3, one_at_a_time=True)
    busy, most = [0], [0]
    guard = threading.Lock()

    def work(seed):
        def step(delta):
            with guard:
                busy[0] += delta
                most[0] = max(most[0], busy[0])

        step(1)  # outside train: this thread has the turn
        step(-1)
        result = batcher.train(_mlp(seed), small, CFG, key=jax.random.key(seed), **KW)
        step(1)
        step(-1)
        return result

    out = _threads([lambda s=s: work(s) for s in range(3)], batcher)
    assert batcher.batched_runs == 3 and most[0] == 1
    _, ref = train(_mlp(2), small, CFG, key=jax.random.key(2), **KW)
    assert_same_run(out[2][1].final["test_loss"], ref.final["test_loss"])


def test_bad_arguments_raise_in_the_calling_thread_before_it_waits(small):
    batcher = TrainBatcher(2)  # the second worker never comes: a wait would hang the test
    with pytest.raises(ValueError, match="metric_splits"):
        batcher.train(_mlp(0), small, CFG, key=jax.random.key(0), metric_splits=("val",))
    with pytest.raises(TypeError, match="unexpected keyword"):
        batcher.train(_mlp(0), small, CFG, key=jax.random.key(0), epochs=3)
    with pytest.raises(ValueError, match="workers"):
        TrainBatcher(0)
