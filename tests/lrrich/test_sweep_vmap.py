"""``lrrich.sweep_vmap.run_points``: vmapped sweep points write what ``run_experiment`` writes."""

import dataclasses
from pathlib import Path

import jax
import pytest
from flax import nnx

import nets.batch
from lrrich import io
from lrrich.registry import Experiment, get
from lrrich.runner import run_experiment
from lrrich.sweep_vmap import VMAP_RTOL, VmapUnsupported, run_points
from lrrich.trainer import train
from nets import MLP, TrainConfig, load_digits
from tests.same_run import assert_same_run


@dataclasses.dataclass(frozen=True)
class Config:
    seed: int = 0
    lr: float = 0.05
    weight_decay: float = 0.0
    width: int = 16


def _run(config: Config, run_dir: Path) -> dict:
    data = load_digits()
    data = data._replace(x_train=data.x_train[:256], y_train=data.y_train[:256])
    cfg = TrainConfig(lr=config.lr, weight_decay=config.weight_decay, batch_size=64, epochs=2)
    model = MLP(64, (config.width,), 10, rngs=nnx.Rngs(config.seed))
    _, hist = train(
        model, data, cfg, key=jax.random.key(config.seed), run_dir=run_dir, progress=False,
        eval_size=64, log_every=4,
    )  # fmt: skip
    keys = ("test_acc", "test_loss", "dlr_test", "loss")
    times = {k: getattr(hist, k) for k in ("train_time", "compile_time", "log_time")}
    return {
        "summary": {k: hist.final[k] for k in keys},
        "steps": hist.column("step").tolist(),
        "times": {**times, "runs_in_program": hist.runs_in_program},
    }


EXP = Experiment("vmap-probe", "probe for run_points", Config, _run, module=__name__)
POINTS = [Config(seed=0, lr=0.05), Config(seed=1, lr=0.1, weight_decay=1e-3), Config(width=8)]


def test_points_match_run_experiment_and_are_batched(tmp_path, monkeypatch):
    calls = []
    real = nets.batch.fit
    monkeypatch.setattr(nets.batch, "fit", lambda *a, **k: calls.append(len(a[0])) or real(*a, **k))
    dirs = [tmp_path / "vmap" / str(i) for i in range(len(POINTS))]
    got = run_points(EXP, POINTS, dirs)
    assert calls == [2]  # the width-8 point needs another program and runs alone
    assert len(got) == len(POINTS)
    for i, config in enumerate(POINTS):
        ref = run_experiment(EXP, config, tmp_path / "ref" / str(i))
        res = io.read_json(dirs[i] / "results.json")
        assert res["status"] == ref["status"] == "finished" and res == got[i]
        assert set(res) == set(ref) and res["steps"] == ref["steps"]
        assert VMAP_RTOL == 0.0  # the documented --vmap / --jobs agreement (bitwise on the CPU)
        for k, v in ref["summary"].items():
            assert_same_run(res["summary"][k], v, err_msg=k)
        assert res["timing"]["vmap_points"] == len(POINTS)
        cfg, ref_cfg = (
            io.read_json(d / "config.json") for d in (dirs[i], tmp_path / "ref" / str(i))
        )
        assert cfg["config"] == ref_cfg["config"] and set(cfg) == set(ref_cfg)
        lines = (dirs[i] / "metrics.jsonl").read_text().splitlines()
        assert len(lines) == len(res["steps"]) == 3


def test_stacked_points_report_their_share_of_the_program_time(tmp_path):
    """Two stacked runs: each History holds 1/2 of the program's time, not all of it."""
    import time

    dirs = [tmp_path / str(i) for i in range(2)]
    t0 = time.perf_counter()
    got = run_points(EXP, POINTS[:2], dirs)
    wall = time.perf_counter() - t0
    times = [r["times"] for r in got]
    assert [t["runs_in_program"] for t in times] == [2, 2]
    spent = [t["train_time"] + t["compile_time"] + t["log_time"] for t in times]
    assert spent[0] == pytest.approx(spent[1]) and sum(spent) < wall


def test_points_that_train_nothing_run_in_their_threads(tmp_path):
    """No source text is read: a sims experiment's points just run (nothing is batched)."""
    # teacher-student integrates sims.piecewise_linear and trains nothing; the tiny grid of
    # test_exp_teacher_student.py: the threads run what a point of any size runs
    sims_only = get("teacher-student")
    tiny = {"d": "4", "h": "6", "n_train": "20", "n_test": "50", "taus": "0.1,2.0",
            "deltas": "-1,1", "n_seeds": "1", "steps": "200", "n_save": "4"}  # fmt: skip
    dirs = [tmp_path / "b", tmp_path / "c"]
    got = run_points(sims_only, [sims_only.config("small", tiny)] * 2, dirs)
    assert [r["status"] for r in got] == ["finished"] * 2
    assert all((d / "results.json").exists() for d in dirs)


def test_bad_arguments(tmp_path):
    with pytest.raises(VmapUnsupported, match="nothing to vmap"):
        run_points(EXP, POINTS[:1], [tmp_path / "a"])
    with pytest.raises(ValueError, match="same length"):
        run_points(EXP, POINTS, [tmp_path / "d"])
