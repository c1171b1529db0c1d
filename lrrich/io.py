"""Results on disk: atomic writes, JSON and figures (the writes themselves live in :mod:`nets.io`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nets.io import atomic_write_bytes, jsonable, write_json

__all__ = ["atomic_write_bytes", "jsonable", "read_json", "save_figure", "write_json"]


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
