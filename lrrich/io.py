"""Run directories and atomic writes: nothing half-written survives an interruption."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


def to_jsonable(obj: Any) -> Any:
    """``obj`` with dataclasses, tuples, paths, arrays and NumPy scalars made JSON-native.

    NaN becomes ``null`` and ±inf ±1e308 (strict JSON has neither).
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "__array__") and not isinstance(obj, str):
        arr = np.asarray(obj)
        return to_jsonable(arr.item() if arr.ndim == 0 else arr.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else (1e308 if obj > 0 else -1e308)
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    return obj


_jsonable = to_jsonable  # the name nets.train imports


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same directory, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_json(path: str | Path, obj: Any) -> Path:
    """Atomically write ``obj`` (dataclasses, arrays and NumPy scalars allowed) as indented JSON."""
    text = json.dumps(to_jsonable(obj), indent=2, sort_keys=False)
    return atomic_write_bytes(path, (text + "\n").encode())


def read_json(path: str | Path) -> Any:
    """Read a JSON file written by :func:`write_json`.

    Raises:
      FileNotFoundError: ``path`` does not exist.
      ValueError: ``path`` is not valid JSON (the message names the file and the position).
    """
    with open(path) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{path} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
                "it was damaged or edited — restore or delete it"
            ) from None


def save_figure(fig, path: str | Path, dpi: int = 110) -> Path:
    """Save a matplotlib figure atomically as PNG and close it."""
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())
