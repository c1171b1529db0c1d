"""The experiment contract of docs/architecture.md, for every registered experiment, and the
page's complete example experiment run at tiny size."""

import dataclasses
import importlib
import inspect
import re
import types
from pathlib import Path

import pytest

from lrrich import claims, registry
from lrrich.runner import run_experiment

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
_EXPERIMENTS = sorted(n for n in registry.discover() if n != "toy")


def _module(name: str):
    return importlib.import_module(registry.get(name).module)


@pytest.mark.parametrize("name", _EXPERIMENTS)
def test_registered_experiment_follows_the_contract(name):
    exp, mod = registry.get(name), _module(name)
    if name != "demo":  # the main job spans several papers
        assert registry.paper_keys(exp.description), f"{name}: DESCRIPTION cites a paper key"
    assert dataclasses.is_dataclass(exp.config_cls) and exp.config_cls.__dataclass_params__.frozen
    exp.config_cls()  # a default for every field
    assert "small" in exp.scales
    for scale in exp.scales:
        exp.config(scale)  # every preset is a valid config
    assert "measured" in inspect.getsource(mod.run), f"{name}: run() returns results['measured']"
    assert exp.plot is not None, f"{name}: plot(results, run_dir)"
    assert exp.claims and all(isinstance(c, claims.Claim) for c in exp.claims), name
    keys = [c.key for c in exp.claims]
    assert len(keys) == len(set(keys)), f"{name}: claim keys repeat: {keys}"
    for c in exp.claims:
        assert re.search(r"\b[DSTKP]\b", c.source), f"{name}/{c.key}: source names a paper key"
        assert c.quote.strip(), f"{name}/{c.key}: the paper's sentence is quoted"
    # a --vmap sweep stacks the runs it sees through lrrich.trainer.train, never nets.train
    by_hand = re.search(r"nets\.train\(|from nets import[^\n]*\btrain\b", inspect.getsource(mod))
    assert not by_hand, f"{name}: trains through lrrich.trainer.train, not {by_hand.group(0)!r}"


def test_the_architecture_page_example_runs(tmp_path):
    text = ARCHITECTURE.read_text()
    block = text.split("<!-- example experiment: run by tests/lrrich/test_contract.py -->")[1]
    source = block.split("```python\n", 1)[1].split("\n```", 1)[0]
    assert 50 <= len(source.splitlines()) <= 100, "the example stays short"
    mod = types.ModuleType("width_dlr_example")
    exec(compile(source, str(ARCHITECTURE), "exec"), mod.__dict__)  # noqa: S102
    exp = registry.register(mod)
    try:
        cfg = exp.config("small", {"widths": "16,32", "epochs": "2", "n_train": "300"})
        res = run_experiment(exp, cfg, tmp_path / "run")
    finally:
        registry._REGISTRY.pop(exp.name, None)
    assert res["status"] == "finished"
    (row,) = res["comparison"]
    assert row["key"] == "richer-than-init" and row["n_seeds"] == 3
    assert row["verdict"] in claims.VERDICTS and row["baseline"]["dlr"]
    assert (tmp_path / "run" / "width_dlr.png").is_file()
    assert "## Paper vs measured" in (tmp_path / "run" / "report.md").read_text()
