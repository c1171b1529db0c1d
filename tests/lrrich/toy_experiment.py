"""A tiny experiment following the registry contract, for the front-door tests."""

import dataclasses
import os
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from lrrich import registry
from lrrich.io import save_figure

NAME = "toy"
DESCRIPTION = "y = scale * seed + offset (front-door test fixture)"
PAPER = {"y": 3.0}


@dataclasses.dataclass(frozen=True)
class Config:
    seed: int = 0
    scale: float = 1.0
    offset: float = 0.5
    tag: str = "a"
    fail: bool = False
    diverge: bool = False
    bar_steps: int = 0
    dataset: str = "toyset"


SCALES = {"paper": Config(scale=3.0, dataset="paperset")}


def run(config: Config, run_dir: Path) -> dict:
    if config.fail:
        raise RuntimeError("requested failure")
    if config.diverge:
        from nets import TrainingDiverged

        raise TrainingDiverged(
            "training loss became nan at step 3 (lr=1e9); lower the lr", step=3, loss=float("nan")
        )
    if config.bar_steps:
        from tqdm.auto import tqdm

        for _ in tqdm(range(config.bar_steps), desc="toy", mininterval=0):
            pass
    y = config.scale * config.seed + config.offset
    return {
        "summary": {
            "y": y,
            "y_squared": y**2,
            "minus_y": -y,
            "half_y": y / 2,
            "twice_y": 2 * y,
            "odd_seeds_only": y if config.seed % 2 else float("nan"),
            "train_seconds": 0.25,
            "num_classes": 10,  # a setting echoed into the summary, the same in every run
            "tag": config.tag,
            "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "unset"),
        },
        "measured": {"values": {"y": [y]}, "seeds": [config.seed], "exact": False},
    }


def plot(results: dict, run_dir: Path) -> list[Path]:
    if results["summary"]["tag"] == "plot-fails":
        raise TypeError("unsupported format string passed to NoneType.__format__")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, results["summary"]["y"]])
    return [save_figure(fig, run_dir / "toy.png")]


def autouse_fixture():
    """A pytest fixture registering this module as experiment ``toy`` around every test."""

    @pytest.fixture(autouse=True)
    def _toy():
        registry.register(sys.modules[__name__])
        yield
        registry._REGISTRY.pop(NAME, None)

    return _toy
