"""The experiment registry: one module per paper figure/table under ``lrrich/experiments/``.

An experiment module defines, at module level::

    NAME = "single-neuron"                 # CLI name
    DESCRIPTION = "K Fig 3: mu, phi, S vs t for several delta"
    PAPER = {"D_LR after": 0.11}           # optional: values the paper states (report shows them)

    @dataclasses.dataclass(frozen=True)
    class Config:                          # every hyper-parameter, with CPU-small defaults
        seed: int = 0
        ...

    SCALES = {"small": Config(), "paper": Config(...)}   # optional; "small" defaults to Config()

    def run(config: Config, run_dir: Path) -> dict: ...   # does the work, returns JSON-able results
    def plot(results: dict, run_dir: Path) -> list[Path]: ...   # optional; reads results only

Modules in ``lrrich.experiments`` are discovered automatically; :func:`register` adds others
(e.g. a user's own experiment module). ``run_experiment`` writes ``config.json``, ``results.json`` (atomically,
with timings) and the figures into the run directory, then ``report.md``.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Experiment:
    """A registered experiment (see the module docstring for the contract)."""

    name: str
    description: str
    config_cls: type
    run: Callable[[Any, Path], dict]
    plot: Callable[[dict, Path], list] | None = None
    scales: dict[str, Any] = field(default_factory=dict)
    paper: dict[str, Any] = field(default_factory=dict)
    module: str = ""

    def config(self, scale: str = "small", overrides: dict[str, str] | None = None):
        """The config at ``scale`` with ``key=value`` string overrides applied (types coerced)."""
        if scale not in self.scales:
            raise ValueError(
                f"unknown scale {scale!r} for {self.name}; choose one of {sorted(self.scales)}"
            )
        return apply_overrides(self.scales[scale], overrides or {})


class UnknownExperimentError(KeyError):
    """No experiment of that name is registered (the message lists the valid names)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


_REGISTRY: dict[str, Experiment] = {}
_DISCOVERED = False


def _from_module(mod: types.ModuleType) -> Experiment:
    cfg_cls = mod.Config
    scales = dict(getattr(mod, "SCALES", {}))
    scales.setdefault("small", cfg_cls())
    return Experiment(
        name=mod.NAME,
        description=mod.DESCRIPTION,
        config_cls=cfg_cls,
        run=mod.run,
        plot=getattr(mod, "plot", None),
        scales=scales,
        paper=dict(getattr(mod, "PAPER", {})),
        module=mod.__name__,
    )


def discover() -> dict[str, Experiment]:
    """Import every module of ``lrrich.experiments`` that defines ``NAME`` and register it."""
    global _DISCOVERED
    if not _DISCOVERED:
        import lrrich.experiments as pkg

        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
            if info.name.startswith("_"):
                continue
            mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
            if hasattr(mod, "NAME"):
                exp = _from_module(mod)
                if exp.name in _REGISTRY and _REGISTRY[exp.name].module != exp.module:
                    raise RuntimeError(f"experiment name {exp.name!r} registered twice")
                _REGISTRY[exp.name] = exp
        _DISCOVERED = True
    return _REGISTRY


def register(experiment: Experiment | types.ModuleType) -> Experiment:
    """Register an experiment (or a module following the contract) under its name."""
    exp = _from_module(experiment) if isinstance(experiment, types.ModuleType) else experiment
    discover()
    _REGISTRY[exp.name] = exp
    return exp


def names() -> list[str]:
    """Sorted names of all registered experiments."""
    return sorted(discover())


def get(name: str) -> Experiment:
    """The experiment called ``name``; a one-line error listing valid names otherwise."""
    reg = discover()
    if name not in reg:
        raise UnknownExperimentError(
            f"unknown experiment {name!r}; valid: {', '.join(sorted(reg))}"
        )
    return reg[name]


def _coerce(value: str, typ: Any, key: str):
    origin = typing.get_origin(typ)
    if typ is bool:
        low = value.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"--set {key}: expected a boolean, got {value!r}")
    if typ in (int, float, str):
        try:
            return typ(value)
        except ValueError:
            raise ValueError(f"--set {key}: expected {typ.__name__}, got {value!r}") from None
    if origin in (tuple, list):
        inner = typing.get_args(typ)
        parts = [p for p in value.replace(";", ",").split(",") if p != ""]
        elem = inner[0] if inner else str
        return origin(_coerce(p, elem, key) for p in parts)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(typ) if a is not type(None)]
        if value.lower() == "none":
            return None
        return _coerce(value, inner[0], key)
    if origin is typing.Literal:
        choices = typing.get_args(typ)
        if value not in choices:
            raise ValueError(f"--set {key}: choose one of {list(choices)}, got {value!r}")
        return value
    return value


def apply_overrides(config, overrides: dict[str, str]):
    """Return ``config`` with string ``overrides`` coerced to the dataclass field types."""
    hints = typing.get_type_hints(type(config))
    valid = [f.name for f in dataclasses.fields(config)]
    changes = {}
    for key, value in overrides.items():
        if key not in valid:
            raise ValueError(f"unknown config key {key!r}; valid: {', '.join(valid)}")
        changes[key] = value if not isinstance(value, str) else _coerce(value, hints[key], key)
    return dataclasses.replace(config, **changes)
