"""A run folder holds one run: ``run.json`` says which, and a resume must be that run.

A training run is fixed by its config, its PRNG key, its data and its model's initial state.
:func:`nets.train` writes these (the data and the initial state as SHA-256 hashes) to
``run_dir/run.json`` next to ``metrics.jsonl`` and ``checkpoints/``. A call that finds checkpoints
in its folder checks them against its own identity and refuses another run's, naming what differs,
so ``resume=True`` never continues someone else's run and a fresh run never leaves another run's
checkpoints behind under its own name. A fresh run in a folder without checkpoints starts a new
log (``metrics.jsonl`` is rewritten from step 0).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import numpy as np
from flax import nnx

from nets.checkpoint import content_hash, tree_hash
from nets.config import TrainConfig
from nets.data.base import Dataset
from nets.io import atomic_write_bytes, jsonable

RUN_FILE = "run.json"
CHECKPOINTS = "checkpoints"


def run_identity(model: nnx.Module, data: Dataset, config: TrainConfig, key: jax.Array) -> dict:
    """What makes a run: its config, key, data and initial state, as JSON values.

    Args:
      model: the model as passed to :func:`nets.train` (before the config's knobs).
      data: the dataset; config: the training config; key: the data-order/augmentation key.

    Returns:
      ``{"config": {field: value}, "key": [...], "data": sha256, "initial parameters": sha256}``.
    """
    key_data = (
        jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    )
    arrays = {f: np.asarray(getattr(data, f)) for f in ("x_train", "y_train", "x_test", "y_test")}
    arrays["meta"] = np.frombuffer(f"{data.num_classes}|{data.task}".encode(), np.uint8)
    return json.loads(
        json.dumps(
            jsonable(
                {
                    "config": dataclasses.asdict(config),
                    "key": np.asarray(key_data),
                    "data": content_hash(arrays),
                    "initial parameters": tree_hash(nnx.state(model)),
                }
            )
        )
    )


def has_checkpoints(run_dir: Path) -> bool:
    """True when ``run_dir/checkpoints`` holds a saved step (a folder named by a number)."""
    folder = Path(run_dir) / CHECKPOINTS
    return folder.is_dir() and any(p.name.isdigit() for p in folder.iterdir())


def differences(recorded: dict, identity: dict) -> list[str]:
    """The keys of ``identity`` whose values differ from ``recorded``'s (config fields by name).

    A config field missing from ``recorded`` (written before the field existed) counts as its
    default value.
    """
    out = []
    defaults = jsonable({f.name: f.default for f in dataclasses.fields(TrainConfig)})
    old, new = recorded.get("config", {}), identity["config"]
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name, defaults.get(name)), new.get(name, defaults.get(name))
        if a != b:
            out.append(f"config.{name} ({a!r} there, {b!r} here)")
    out += [k for k in identity if k != "config" and recorded.get(k) != identity[k]]
    return out


def check_folder(run_dir: Path, identity: dict) -> None:
    """Refuse ``run_dir`` when it holds checkpoints of another run (or of an unrecorded one).

    Raises:
      ValueError: naming the differing keys, or saying that ``run.json`` is missing.
    """
    run_dir = Path(run_dir)
    if not has_checkpoints(run_dir):
        return
    path = run_dir / RUN_FILE
    if not path.exists():
        raise ValueError(
            f"{run_dir} holds checkpoints but no {RUN_FILE} saying which run wrote them (config, "
            f"key, data); delete {run_dir / CHECKPOINTS} to start over, or pass another run_dir"
        )
    try:
        recorded = json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path} is not valid JSON ({e}); delete {run_dir} to start over") from e
    diff = differences(recorded, identity)
    if diff:
        raise ValueError(
            f"{run_dir} holds another run (its checkpoints differ from this call in "
            f"{', '.join(diff)}); call with the same model, data, config and key to resume it, "
            "or pass another run_dir"
        )


def record(run_dir: Path, identity: dict) -> None:
    """Write ``run_dir/run.json`` (process 0 only in a multi-host run)."""
    if jax.process_index() == 0:
        text = json.dumps(identity, indent=1, sort_keys=True) + "\n"
        atomic_write_bytes(Path(run_dir) / RUN_FILE, text.encode())
