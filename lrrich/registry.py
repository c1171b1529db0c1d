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
    def check(config: Config) -> None: ...   # optional; raise ValueError for a config that cannot run
    def verdict(results: dict) -> str: ...   # optional; lines the CLI prints after the summary
    CLAIMS = (lrrich.claims.Claim(...), ...)   # the papers' claims, judged from results["measured"]

:meth:`Experiment.config` builds and checks a whole config before anything is written: every
override is coerced to its field's type, NaN is refused, image-training configs
(:class:`lrrich.experiments._presets.ImageTraining`) build and validate their
``nets.TrainConfig``, the module's ``check`` runs, and (with ``runnable=True``, as ``lrrich run``
and ``sweep`` ask) a dataset that needs an extra that is not installed is refused. An error names
what the user typed (``--set epochs=-3: ...``, ``--grid lr: ...``, ``--scale paper: ...``).

Modules in ``lrrich.experiments`` are discovered automatically; :func:`register` adds others
(e.g. a user's own experiment module). ``run_experiment`` writes ``config.json``, ``results.json`` (atomically,
with timings) and the figures into the run directory, then ``report.md``.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.util
import math
import pkgutil
import re
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
    check: Callable[[Any], None] | None = None
    verdict: Callable[[dict], str] | None = None
    claims: tuple = ()
    runtime: str = ""

    def config(
        self,
        scale: str = "small",
        overrides: dict[str, str] | None = None,
        *,
        flags: dict[str, str] | None = None,
        runnable: bool = False,
    ):
        """The config at ``scale`` with ``key=value`` string overrides applied, checked whole.

        Args:
          scale: the preset name (a key of ``scales``).
          overrides: ``{field: value}``; strings are coerced to the field's type.
          flags: the command-line flag each override came from (``{"lr": "--grid"}``), for the
            error messages; ``--set`` when absent.
          runnable: also require the optional extras the config needs to run here (what ``lrrich
            run`` / ``sweep`` ask before writing); off, a paper-scale config can be inspected
            on a machine without them.

        Raises:
          ValueError: an unknown scale or key, a value of the wrong type, NaN, or a config that
            cannot run (see the module docstring); the message names the override responsible.
          ImportError: with ``runnable``, the config needs an optional extra that is not
            installed.
        """
        if scale not in self.scales:
            raise ValueError(
                f"unknown scale {scale!r} for {self.name}; choose one of {sorted(self.scales)}"
            )
        overrides, flags = dict(overrides or {}), dict(flags or {})
        base = self.scales[scale]
        config = apply_overrides(base, overrides, flags=flags)
        error = self._problem(config, runnable)
        if error is None:
            return config
        # Name what the user typed: the one override that breaks a sound preset, else the preset.
        base_error = self._problem(base, runnable)
        source = ", ".join(f"{flags.get(k, '--set')} {k}={v}" for k, v in overrides.items())
        if base_error is not None and str(base_error) == str(error):
            source = f"--scale {scale}"
        elif base_error is None:
            for key, value in overrides.items():
                if self._problem(apply_overrides(base, {key: value}), runnable):
                    source = f"{flags.get(key, '--set')} {key}={value}"
                    break
        if isinstance(error, ImportError):
            raise ImportError(f"{source}: {error}", name=error.name) from None
        raise ValueError(f"{source}: {error}") from None

    def _problem(self, config, runnable: bool) -> ValueError | ImportError | None:
        """The error of :func:`check_config` (and :func:`check_extras`) and the module's
        ``check``, if any."""
        try:
            check_config(config)
            if runnable:
                check_extras(config)
            if self.check is not None:
                self.check(config)
        except (ValueError, ImportError) as err:
            return err
        return None


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
        check=getattr(mod, "check", None),
        verdict=getattr(mod, "verdict", None),
        runtime=recorded_runtime(mod.NAME),
        claims=tuple(getattr(mod, "CLAIMS", ())),
    )


def recorded_runtime(name: str) -> str:
    """The wall time of ``name``'s recorded small-scale run, with the machine and date that
    measured it (``docs/records/<name>/small.json``, written by ``lrrich record``), or ``""``."""
    path = Path(__file__).resolve().parents[1] / "docs" / "records" / name / "small.json"
    try:
        import json

        rec = json.loads(path.read_text())
        wall = float(rec["wall_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    took = f"{wall:.0f} s" if wall < 120 else f"{wall / 60:.1f} min"
    return f"{took} ({rec.get('machine', '?')}, {rec.get('date', '?')})"


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


PAPERS = {
    "D": 'the D_LR paper, "Disentangling Rich Dynamics from Feature Learning"',
    "S": "the D_LR paper's ICLR 2026 summary (the headline tables)",
    "T": "Y. Nam's thesis",
    "K": 'Kunin et al. 2024, "Get rich quick"',
    "P": 'the position paper "Solve layerwise linear models first"',
}
"""The papers an experiment reproduces, by the one-letter key its description starts with."""


def paper_keys(description: str) -> list[str]:
    """The keys of :data:`PAPERS` that ``description`` cites (``"K Fig 3-4: ..."`` → ``["K"]``)."""
    found = re.findall(r"(?:^|[\s/(])([DSTKP])(?=\s*(?:Fig|Table|Eq|Thm|App|§|/|:))", description)
    return list(dict.fromkeys(found))


def names() -> list[str]:
    """Sorted names of all registered experiments."""
    return sorted(discover())


def did_you_mean(word: str, choices) -> str:
    """``"did you mean 'lr'?"`` for the closest of ``choices`` to a mistyped ``word``, else ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=2, cutoff=0.6)
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def get(name: str) -> Experiment:
    """The experiment called ``name``; a one-line error with the closest names (or all) otherwise."""
    reg = discover()
    if name not in reg:
        hint = did_you_mean(name, reg)
        if hint:
            raise UnknownExperimentError(
                f"unknown experiment {name!r}; {hint} (`lrrich list` shows all {len(reg)})"
            )
        raise UnknownExperimentError(
            f"unknown experiment {name!r}; valid: {', '.join(sorted(reg))}"
        )
    return reg[name]


def _coerce(value: str, typ: Any, key: str, flag: str = "--set"):
    origin = typing.get_origin(typ)
    if typ is bool:
        low = value.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{flag} {key}: expected a boolean, got {value!r}")
    if typ in (int, float, str):
        try:
            return typ(value)
        except ValueError:
            raise ValueError(f"{flag} {key}: expected {typ.__name__}, got {value!r}") from None
    if origin in (tuple, list):
        inner = typing.get_args(typ)
        parts = [p for p in value.replace(";", ",").split(",") if p != ""]
        elem = inner[0] if inner else str
        return origin(_coerce(p, elem, key, flag) for p in parts)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(typ) if a is not type(None)]
        if value.lower() == "none":
            return None
        return _coerce(value, inner[0], key, flag)
    if origin is typing.Literal:
        choices = typing.get_args(typ)
        if value not in choices:
            raise ValueError(f"{flag} {key}: choose one of {list(choices)}, got {value!r}")
        return value
    return value


def apply_overrides(config, overrides: dict[str, str], *, flags: dict[str, str] | None = None):
    """Return ``config`` with string ``overrides`` coerced to the dataclass field types.

    Args:
      config: a config dataclass instance.
      overrides: ``{field: value}``; string values are coerced to the field's type.
      flags: the command-line flag of each key (``--set`` or ``--grid``) for error messages.
    """
    hints = typing.get_type_hints(type(config))
    valid = [f.name for f in dataclasses.fields(config)]
    flags = flags or {}
    changes = {}
    for key, value in overrides.items():
        if key not in valid:
            hint = did_you_mean(key, valid)
            raise ValueError(
                f"unknown config key {key!r}; {hint + ' ' if hint else ''}valid: {', '.join(valid)}"
            )
        if isinstance(value, str):
            value = _coerce(value, hints[key], key, flags.get(key, "--set"))
        changes[key] = value
    try:
        return dataclasses.replace(config, **changes)
    except ValueError as err:  # the config's own __post_init__ check: name what was typed
        typed = ", ".join(f"{flags.get(k, '--set')} {k}={overrides[k]}" for k in changes)
        raise ValueError(f"{typed}: {err}" if typed else str(err)) from None


# Datasets read through tensorflow-datasets (the ``[data]`` extra); the rest ship offline.
_TFDS_DATASETS = ("mnist", "cifar10", "cifar100")


def check_config(config) -> None:
    """The checks every config gets before a run writes anything (module docstring).

    Raises:
      ValueError: a NaN field, or an image-training config whose ``nets.TrainConfig`` is invalid.
    """
    for f in dataclasses.fields(config):
        values = getattr(config, f.name)
        for v in values if isinstance(values, tuple | list) else (values,):
            if isinstance(v, float) and math.isnan(v):
                raise ValueError(f"{f.name} must be a number, got nan")
    from lrrich.experiments import _presets

    if isinstance(config, _presets.ImageTraining):
        if config.n_train is not None and config.n_train < 1:
            raise ValueError(f"n_train must be ≥ 1 (or none: all), got {config.n_train}")
        n_train = config.n_train if config.n_train is not None else max(config.batch_size, 1)
        _presets.train_config(config, n_train).validate()


def check_extras(config) -> None:
    """Refuse a config that needs an optional extra this environment lacks.

    Raises:
      ImportError: a TFDS dataset (``mnist``, ``cifar10``, ``cifar100``) without
        tensorflow-datasets installed (the ``[data]`` extra).
    """
    dataset = getattr(config, "dataset", None)
    if dataset in _TFDS_DATASETS and importlib.util.find_spec("tensorflow_datasets") is None:
        raise ImportError(
            f'dataset {dataset!r} needs tensorflow-datasets: pip install -e ".[data]" '
            "(or choose dataset=mnist5k, shipped offline)",
            name="tensorflow_datasets",
        )
