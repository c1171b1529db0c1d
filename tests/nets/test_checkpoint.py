"""Checkpoints: exact resume after an interruption, corrupt checkpoints, NaN stop."""

import dataclasses
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from flax import nnx

from nets import MLP, TrainConfig, TrainingDiverged, load_digits, train
from nets.checkpoint import CheckpointError


@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    return d._replace(x_train=d.x_train[:512], y_train=d.y_train[:512])


CFG = TrainConfig(optimizer="adam", lr=3e-3, batch_size=64, epochs=6)  # 8 steps/epoch, 48 steps


def _model():
    return MLP(64, (32,), 10, rngs=nnx.Rngs(0))


def _leaves(model):
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(model))]


class _Stop(Exception):
    """An interruption injected into a training run."""


def test_resume_after_exception_gives_identical_parameters(digits, tmp_path):
    kw = dict(key=jax.random.key(7), metrics={}, progress=False, log_every=4)
    ref, ref_hist = train(_model(), digits, CFG, run_dir=tmp_path / "a", checkpoint_every=12, **kw)

    def interrupt(rec, model):
        if rec["step"] == 28:
            raise _Stop

    with pytest.raises(_Stop):
        train(
            _model(),
            digits,
            CFG,
            run_dir=tmp_path / "b",
            checkpoint_every=12,
            callback=interrupt,
            **kw,
        )
    resumed, hist = train(
        _model(), digits, CFG, run_dir=tmp_path / "b", checkpoint_every=12, resume=True, **kw
    )
    assert hist.resumed_from == 24
    for a, b in zip(_leaves(ref), _leaves(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    assert [r["step"] for r in hist.records] == [r["step"] for r in ref_hist.records]
    np.testing.assert_array_equal(hist.column("test_loss"), ref_hist.column("test_loss"))
    lines = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == len(ref_hist.records)


@pytest.mark.slow
def test_resume_after_killed_process(digits, tmp_path):
    """A subprocess SIGKILLs itself mid-run; resuming reproduces the uninterrupted parameters."""
    script = textwrap.dedent(f"""
        import os, signal, jax
        jax.config.update("jax_enable_x64", True)  # as tests/conftest.py
        from flax import nnx
        from nets import MLP, TrainConfig, load_digits, train
        d = load_digits(); d = d._replace(x_train=d.x_train[:512], y_train=d.y_train[:512])
        def kill(rec, model):
            if rec["step"] == 28:
                os.kill(os.getpid(), signal.SIGKILL)
        train(MLP(64, (32,), 10, rngs=nnx.Rngs(0)), d, TrainConfig(**{CFG.__dict__!r}),
              key=jax.random.key(7), metrics={{}}, progress=False, log_every=4,
              run_dir={str(tmp_path / "b")!r}, checkpoint_every=12, callback=kill)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=600)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    kw = dict(key=jax.random.key(7), metrics={}, progress=False, log_every=4, checkpoint_every=12)
    resumed, hist = train(_model(), digits, CFG, run_dir=tmp_path / "b", resume=True, **kw)
    ref, _ = train(_model(), digits, CFG, run_dir=tmp_path / "a", **kw)
    assert hist.resumed_from == 24
    for a, b in zip(_leaves(ref), _leaves(resumed), strict=True):
        np.testing.assert_array_equal(a, b)


def test_corrupt_checkpoint_is_a_clear_error(digits, tmp_path):
    cfg = TrainConfig(batch_size=64, steps=8)
    train(
        _model(),
        digits,
        cfg,
        key=jax.random.key(0),
        metrics={},
        progress=False,
        run_dir=tmp_path,
        checkpoint_every=8,
    )
    for root, _, files in os.walk(tmp_path / "checkpoints" / "8"):
        for f in files:
            with open(os.path.join(root, f), "wb") as fh:
                fh.write(b"garbage")
    with pytest.raises(CheckpointError, match="unreadable"):
        train(
            _model(),
            digits,
            cfg,
            key=jax.random.key(0),
            metrics={},
            progress=False,
            run_dir=tmp_path,
            checkpoint_every=8,
            resume=True,
        )


def test_nan_loss_stops_and_keeps_last_good_checkpoint(digits, tmp_path):
    cfg = TrainConfig(lr=1e6, warmup_steps=10**6, batch_size=64, epochs=20)
    with pytest.raises(TrainingDiverged, match="last good checkpoint: step") as err:
        train(
            _model(),
            digits,
            cfg,
            key=jax.random.key(0),
            metrics={},
            progress=False,
            run_dir=tmp_path,
            checkpoint_every=8,
            log_every=8,
        )
    good = int(str(err.value).split("last good checkpoint: step ")[1].split()[0])
    assert good >= 8 and (tmp_path / "checkpoints" / str(good)).is_dir()
    with pytest.raises(TrainingDiverged, match="no checkpoint"):
        train(
            _model(),
            digits,
            TrainConfig(lr=1e8, batch_size=64, epochs=3),
            key=jax.random.key(0),
            metrics={},
            progress=False,
        )


def test_resume_without_checkpointing_trains_from_scratch(tmp_path):
    """resume=True with checkpoint_every=0 and no checkpoint: a plain run, no crash."""
    from flax import nnx

    from nets import MLP, TrainConfig, load_digits, train

    data = load_digits()
    cfg = TrainConfig(lr=0.1, epochs=1, batch_size=256)
    model = MLP(64, (16,), 10, rngs=nnx.Rngs(0))
    _, hist = train(model, data, cfg, key=jax.random.key(0), run_dir=tmp_path, resume=True,
                    progress=False)  # fmt: skip
    assert hist.resumed_from is None and hist.steps == len(data.x_train) // 256


def _flip_one_byte_of_largest_file(step_dir):
    files = [os.path.join(r, f) for r, _, fs in os.walk(step_dir) for f in fs]
    path = max(files, key=os.path.getsize)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01
    with open(path, "wb") as fh:
        fh.write(data)


def test_byte_flipped_checkpoint_is_refused_not_restored(tmp_path):
    """Orbax alone restores a flipped data byte as different weights; the content hash refuses it."""
    from nets.checkpoint import Checkpointer

    state = {"w": np.random.default_rng(0).normal(size=(200, 300)), "k": jax.random.key(3)}
    ckpt = Checkpointer(tmp_path)
    ckpt.save(5, state)
    step, back = ckpt.restore(state)
    assert step == 5
    np.testing.assert_array_equal(back["w"], state["w"])
    _flip_one_byte_of_largest_file(tmp_path / "5")
    with pytest.raises(CheckpointError, match="damaged|unreadable"):
        Checkpointer(tmp_path).restore(state)


def test_checkpoint_without_recorded_hash_is_refused(tmp_path):
    from nets.checkpoint import HASHES, Checkpointer

    state = {"w": np.arange(6.0)}
    Checkpointer(tmp_path).save(1, state)
    (tmp_path / HASHES).write_text("{}")
    with pytest.raises(CheckpointError, match="no content hash"):
        Checkpointer(tmp_path).restore(state)


def test_content_hash_sees_every_bit_dtype_and_shape():
    from nets.checkpoint import content_hash

    a = np.arange(12.0).reshape(3, 4)
    flipped = a.copy()
    flipped.reshape(-1).view(np.uint8)[17] ^= 0x01
    base = content_hash({"a": a})
    assert base == content_hash({"a": a.copy(order="F")})  # same values, another memory layout
    assert content_hash({"a": flipped}) != base
    assert content_hash({"a": a.astype(np.float32)}) != base
    assert content_hash({"a": a.reshape(4, 3)}) != base
    assert content_hash({"b": a}) != base


def test_only_process_zero_writes_the_log_and_hashes(digits, tmp_path, monkeypatch):
    """Multi-host: every process runs the same loop on a shared run_dir; processes other than 0
    keep their History and take part in orbax's save, but write neither metrics.jsonl nor the
    checkpoint hash file (the single-host run writes both)."""
    cfg = dataclasses.replace(CFG, epochs=1)
    kw = {"key": jax.random.key(0), "checkpoint_every": 4}
    monkeypatch.setattr(jax, "process_index", lambda *a, **k: 1)
    _, hist = train(_model(), digits, cfg, run_dir=tmp_path / "p1", **kw)
    assert hist.records and not (tmp_path / "p1" / "metrics.jsonl").exists()
    assert not (tmp_path / "p1" / "checkpoints" / "sha256.json").exists()
    monkeypatch.undo()
    _, hist = train(_model(), digits, cfg, run_dir=tmp_path / "p0", **kw)
    assert len((tmp_path / "p0" / "metrics.jsonl").read_text().splitlines()) == len(hist.records)
    assert (tmp_path / "p0" / "checkpoints" / "sha256.json").exists()
