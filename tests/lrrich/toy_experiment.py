"""A tiny experiment following the registry contract, for the front-door tests."""

import dataclasses
from pathlib import Path

import matplotlib.pyplot as plt

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


SCALES = {"paper": Config(scale=3.0)}


def run(config: Config, run_dir: Path) -> dict:
    if config.fail:
        raise RuntimeError("requested failure")
    return {"summary": {"y": config.scale * config.seed + config.offset, "tag": config.tag}}


def plot(results: dict, run_dir: Path) -> list[Path]:
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, results["summary"]["y"]])
    return [save_figure(fig, run_dir / "toy.png")]
