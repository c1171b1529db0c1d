"""Running a sweep again: it says what it did, it grows by seeds and grid values, and what it
records (settings, executor, n) says how each number was made."""

import dataclasses
import types

import pytest

from lrrich import cli, io, registry, sweep
from lrrich.sweep import parse_grid, run_sweep
from tests.lrrich import toy_experiment

_toy = toy_experiment.autouse_fixture()


def _mtimes(folder):
    return {p.parent.name: p.stat().st_mtime_ns for p in folder.glob("*/results.json")}


def test_more_seeds_run_only_the_new_seeds_and_say_so(tmp_path, capsys):
    run_sweep("toy", parse_grid(["scale=1,2"]), tmp_path, seeds=2)
    before = _mtimes(tmp_path)
    capsys.readouterr()
    out = run_sweep("toy", parse_grid(["scale=1,2"]), tmp_path, seeds=3)
    after = _mtimes(tmp_path)
    assert {k: after[k] for k in before} == before  # the finished seeds were not run again
    assert sorted(set(after) - set(before)) == ["scale=1,seed=2", "scale=2,seed=2"]
    assert [r["n"] for r in out["rows"]] == [3, 3]
    assert io.read_json(tmp_path / "sweep_config.json")["seeds"] == 3
    err = capsys.readouterr().err
    assert (
        f"{tmp_path}: the sweep grows (seeds 2 → 3): 4 of 6 points finished earlier (kept); "
        "2 to run (2 new or not started)" in err
    )


def test_a_wider_grid_runs_only_the_new_points(tmp_path, capsys):
    run_sweep("toy", parse_grid(["scale=1,2", "offset=0"]), tmp_path, progress=False)
    before = _mtimes(tmp_path)
    out = run_sweep("toy", parse_grid(["scale=1,2,3", "offset=0,1"]), tmp_path)
    after = _mtimes(tmp_path)
    assert {k: after[k] for k in before} == before
    assert len(after) == 6 and [p["status"] for p in out["points"]] == ["finished"] * 6
    assert io.read_json(tmp_path / "sweep_config.json")["grid"] == {
        "scale": ["1", "2", "3"],
        "offset": ["0", "1"],
    }
    assert (
        "the sweep grows (scale gains 3; offset gains 1): 2 of 6 points" in capsys.readouterr().err
    )


def test_a_narrower_rerun_keeps_the_folders_sweep_and_says_so(tmp_path, capsys):
    run_sweep("toy", parse_grid(["scale=1,2"]), tmp_path, seeds=2, progress=False)
    out = run_sweep("toy", parse_grid(["scale=1"]), tmp_path)
    assert [r["n"] for r in out["rows"]] == [2, 2]
    err = capsys.readouterr().err
    assert "scale=2 kept from before (not in this command)" in err
    assert "2 seeds kept from before (this command asks 1)" in err
    assert "4 of 4 points finished earlier (kept); nothing to run" in err


def test_the_same_sweep_again_says_it_ran_nothing(tmp_path, capsys):
    run_sweep("toy", parse_grid(["scale=1"]), tmp_path, progress=False)
    run_sweep("toy", parse_grid(["scale=1"]), tmp_path)
    assert (
        f"{tmp_path}: this sweep again: 1 of 1 points finished earlier (kept); nothing to run"
        in capsys.readouterr().err
    )


def test_a_changed_set_or_scale_is_refused_naming_the_keys(tmp_path):
    run_sweep("toy", parse_grid(["scale=1"]), tmp_path, fixed={"offset": "1"}, progress=False)
    with pytest.raises(ValueError) as info:
        run_sweep("toy", parse_grid(["scale=1"]), tmp_path, fixed={"offset": "2", "tag": "b"})
    assert "--set offset: offset=1 in the folder, offset=2 now" in str(info.value)
    assert "--set tag: unset in the folder, tag=b now" in str(info.value)
    with pytest.raises(ValueError, match="scale: 'small' in the folder, 'paper' now"):
        run_sweep("toy", parse_grid(["scale=1"]), tmp_path, fixed={"offset": "1"}, scale="paper")
    with pytest.raises(ValueError, match="--grid axes: scale in the folder, scale, tag now"):
        run_sweep("toy", parse_grid(["scale=1", "tag=a"]), tmp_path, fixed={"offset": "1"})


def _multi_seed_toy():
    """An experiment with a ``seeds`` field, as the multi-seed image experiments have."""
    mod = types.ModuleType("toy_seeds")

    @dataclasses.dataclass(frozen=True)
    class Config:
        seed: int = 0
        seeds: int = 3
        offset: float = 0.0

    def run(config, run_dir):
        return {"summary": {"first_seed": config.seed, "seeds_trained": config.seeds}}

    mod.NAME, mod.DESCRIPTION, mod.Config, mod.run = "toy-seeds", "multi-seed fixture", Config, run
    return mod


@pytest.fixture
def toy_seeds():
    registry.register(_multi_seed_toy())
    yield "toy-seeds"
    registry._REGISTRY.pop("toy-seeds", None)


def test_a_seed_sweep_of_a_multi_seed_experiment_trains_disjoint_seeds(tmp_path, toy_seeds):
    """Each point of `--seeds N` over an experiment that repeats its runs over seeds trains one
    seed, so no two points share a run (seed, …, seed + seeds − 1 would overlap)."""
    out = run_sweep(toy_seeds, {}, tmp_path, seeds=3, progress=False)
    trained = [io.read_json(tmp_path / p["dir"] / "results.json")["summary"] for p in out["points"]]
    assert sorted(s["first_seed"] for s in trained) == [0, 1, 2]
    assert all(s["seeds_trained"] == 1 for s in trained)
    with pytest.raises(ValueError, match="Use --seeds instead of --set seeds=3"):
        run_sweep(toy_seeds, {}, tmp_path / "b", seeds=2, fixed={"seeds": "3"})
    assert not (tmp_path / "b").exists()  # refused before anything is written


@pytest.mark.parametrize("n", [1, 2])
def test_seeds_n_trains_n_seeds_per_grid_point_for_every_n(tmp_path, toy_seeds, n):
    out = run_sweep(toy_seeds, parse_grid(["offset=0,1"]), tmp_path, seeds=n, progress=False)
    summaries = [
        io.read_json(tmp_path / p["dir"] / "results.json")["summary"] for p in out["points"]
    ]
    assert [s["seeds_trained"] for s in summaries] == [1] * 2 * n  # one seed per point
    assert sorted(s["first_seed"] for s in summaries) == sorted(list(range(n)) * 2)
    assert [r["n"] for r in out["rows"]] == [n, n]  # n counts the seeds behind each mean
    assert "every point also sets seeds=1" in (tmp_path / "sweep.md").read_text()


def test_the_refusal_shows_only_what_was_typed(tmp_path, toy_seeds, capsys):
    assert (
        cli.main(["sweep", toy_seeds, "--set", "offset=1", "--out", str(tmp_path), "--quiet"]) == 0
    )
    args = ["sweep", toy_seeds, "--set", "offset=2", "--seeds", "2", "--out", str(tmp_path)]
    assert cli.main([*args, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--set offset: offset=1 in the folder, offset=2 now" in err
    assert "seeds" not in err.split("(", 1)[1].split(")")[0]  # no seeds=1 nobody typed


def test_vmap_on_a_finished_sweep_says_it_went_unused(tmp_path, capsys):
    run_sweep("toy", parse_grid(["scale=1"]), tmp_path, progress=False)
    run_sweep("toy", parse_grid(["scale=1"]), tmp_path, vmap=True)
    assert "--vmap went unused: no point is left to run" in capsys.readouterr().err


def test_sweep_md_records_every_setting_and_the_executor(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["lrrich", "sweep", "toy", "--grid", "scale=1,2"])
    grid = parse_grid(["scale=1,2"])
    run_sweep("toy", grid, tmp_path, seeds=2, fixed={"offset": "10"}, progress=False)
    md = (tmp_path / "sweep.md").read_text()
    assert "- experiment toy, --scale small" in md
    assert "- --grid scale=1,2" in md
    assert "- --seeds 2 (seeds 0..1 per grid point)" in md
    assert "- fixed: --set offset=10" in md
    assert "--executor local, 4 points run: `lrrich sweep toy --grid scale=1,2`" in md
    run_sweep("toy", grid, tmp_path, seeds=2, fixed={"offset": "10"}, vmap=True, progress=False)
    assert "--executor local --vmap, 0 points run" in (tmp_path / "sweep.md").read_text()


def test_compared_quantities_share_a_panel():
    names = ["dlr", "lazy_dlr", "lazy_test_acc", "n_train", "rich_dlr", "rich_test_acc", "y"]
    assert sweep._panels(names) == {
        "dlr": [("dlr", "dlr"), ("lazy_dlr", "lazy"), ("rich_dlr", "rich")],
        "test_acc": [("lazy_test_acc", "lazy"), ("rich_test_acc", "rich")],
        "n_train": [("n_train", "")],
        "y": [("y", "")],
    }


def test_the_sweep_figure_draws_compared_quantities_on_one_axis(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(sweep.io, "save_figure", lambda fig, path: figures.append(fig) or path)
    run_sweep("toy", parse_grid(["offset=1,2"]), tmp_path, progress=False)
    axes = {ax.get_ylabel(): ax for ax in figures[-1].axes if ax.get_visible()}
    assert sorted(axes) == ["odd_seeds_only", "y", "y_squared"]
    labels = [t.get_text() for t in axes["y"].get_legend().get_texts()]
    assert labels == ["half", "minus", "twice", "y"]  # half_y, minus_y, twice_y, y on one axis


def test_the_terminal_table_fits_100_columns_and_keeps_every_metric(tmp_path):
    out = run_sweep(
        "toy", parse_grid(["scale=1,2", "tag=aaaa,bbbb"]), tmp_path, seeds=2, progress=False
    )
    text = sweep.text_table(out)
    assert max(len(line) for line in text.splitlines()) <= 100
    for metric in ("half_y", "minus_y", "twice_y", "y_squared", "odd_seeds_only", "train_seconds"):
        assert metric in text
    headers = [line for line in text.splitlines() if line.split()[:3] == ["scale", "tag", "n"]]
    assert len(headers) >= 2  # the metric columns split into blocks, each with the grid and n
