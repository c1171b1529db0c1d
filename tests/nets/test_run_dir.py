"""A run folder holds one run: a new run replaces the log, a resume must be the same run."""

import dataclasses
import json

import jax
import numpy as np
import pytest
from flax import nnx

from nets import MLP, TrainConfig, load_digits, train


@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    return d._replace(x_train=d.x_train[:256], y_train=d.y_train[:256])


CFG = TrainConfig(lr=0.1, batch_size=64, epochs=2)  # 4 steps/epoch, 8 steps
KW = dict(metrics={}, progress=False, log_every=2)


def _model(seed=0):
    return MLP(64, (16,), 10, rngs=nnx.Rngs(seed))


def _steps(path):
    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


def test_a_second_run_in_a_folder_starts_a_clean_log(digits, tmp_path):
    """Seed 1 after seed 0 in one run_dir: its History and metrics.jsonl are its own."""
    train(_model(0), digits, CFG, key=jax.random.key(0), run_dir=tmp_path, **KW)
    _, hist = train(_model(1), digits, CFG, key=jax.random.key(1), run_dir=tmp_path, **KW)
    _, alone = train(_model(1), digits, CFG, key=jax.random.key(1), **KW)
    assert [r["step"] for r in hist.records] == [0, 2, 4, 6, 8]
    assert _steps(tmp_path / "metrics.jsonl") == [0, 2, 4, 6, 8]
    assert hist.records[0]["train_loss"] == alone.records[0]["train_loss"]


def test_resume_without_a_checkpoint_does_not_repeat_step_zero(digits, tmp_path):
    """A run killed before its first checkpoint leaves a step-0 record; resuming starts over."""
    train(_model(), digits, dataclasses.replace(CFG, steps=1), key=jax.random.key(0),
          run_dir=tmp_path, **KW)  # fmt: skip
    _, hist = train(_model(), digits, CFG, key=jax.random.key(0), run_dir=tmp_path, resume=True,
                    checkpoint_every=4, **KW)  # fmt: skip
    assert [r["step"] for r in hist.records] == [0, 2, 4, 6, 8]
    assert _steps(tmp_path / "metrics.jsonl") == [0, 2, 4, 6, 8]


@pytest.mark.parametrize(
    ("change", "names"),
    [
        (dict(config=dataclasses.replace(CFG, lr=0.5, epochs=4)), ["config.epochs", "config.lr"]),
        (dict(key=jax.random.key(1)), ["key"]),
        (dict(model=_model(1)), ["initial parameters"]),
        (dict(data="other"), ["data"]),
    ],
    ids=["config", "key", "init", "data"],
)
def test_resume_refuses_another_runs_checkpoint(digits, tmp_path, change, names):
    """resume=True in a folder whose checkpoint another run wrote names what differs."""
    train(_model(), digits, CFG, key=jax.random.key(0), run_dir=tmp_path, checkpoint_every=4,
          **KW)  # fmt: skip
    call = dict(model=_model(), data=digits, config=CFG, key=jax.random.key(0))
    call.update(change)
    if call["data"] == "other":
        call["data"] = digits._replace(y_train=digits.y_train[::-1].copy())
    before = _steps(tmp_path / "metrics.jsonl")
    with pytest.raises(ValueError, match="holds another run") as err:
        train(call["model"], call["data"], call["config"], key=call["key"], run_dir=tmp_path,
              checkpoint_every=4, resume=True, **KW)  # fmt: skip
    for name in names:
        assert name in str(err.value)
    assert _steps(tmp_path / "metrics.jsonl") == before  # nothing of the old run was touched


def test_a_fresh_run_over_another_runs_checkpoints_is_refused(digits, tmp_path):
    """Without resume, a run may not leave another run's checkpoints under its own record."""
    train(_model(), digits, CFG, key=jax.random.key(0), run_dir=tmp_path, checkpoint_every=4,
          **KW)  # fmt: skip
    with pytest.raises(ValueError, match="holds another run.*key"):
        train(_model(), digits, CFG, key=jax.random.key(1), run_dir=tmp_path, **KW)


def test_resume_of_the_same_run_goes_on(digits, tmp_path):
    """The same call resumes (here from the final checkpoint: nothing left to train)."""
    kw = dict(key=jax.random.key(0), run_dir=tmp_path, checkpoint_every=4, **KW)
    m1, h1 = train(_model(), digits, CFG, **kw)
    m2, h2 = train(_model(), digits, CFG, resume=True, **kw)
    assert h2.resumed_from == 8
    for k in ("step", "train_loss", "test_acc"):
        np.testing.assert_array_equal(h2.column(k), h1.column(k))
    for a, b in zip(jax.tree.leaves(nnx.state(m1)), jax.tree.leaves(nnx.state(m2)), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="already holds checkpoints of this run; pass resume"):
        train(_model(), digits, CFG, **kw)  # checkpoints are never overwritten by a new start


def test_a_full_disk_is_one_sentence(tmp_path, monkeypatch):
    """A checkpoint write that fails for lack of space is one CheckpointError, not orbax's
    worker tracebacks chained under it."""
    from nets.checkpoint import Checkpointer, CheckpointError

    def no_space(*args, **kwargs):
        raise ValueError("RESOURCE_EXHAUSTED: Failed to write: No space left on device [28]")

    ckpt = Checkpointer(tmp_path / "checkpoints")
    monkeypatch.setattr(ckpt._manager, "save", no_space)
    with pytest.raises(CheckpointError, match="could not write checkpoint step 4 .*disk is full"):
        ckpt.save(4, {"w": np.zeros(3)})
    try:
        ckpt.save(4, {"w": np.zeros(3)})
    except CheckpointError as err:
        assert err.__suppress_context__ and "resume=True" in str(err)
    ckpt.close()
