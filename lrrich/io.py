"""Results on disk: atomic writes, JSON and figures (writes and reads live in :mod:`nets.io`)."""

from __future__ import annotations

from pathlib import Path

from nets.io import atomic_write_bytes, jsonable, read_json, write_json

__all__ = ["atomic_write_bytes", "jsonable", "read_json", "save_figure", "write_json"]


def save_figure(fig, path: str | Path, dpi: int = 110) -> Path:
    """Save a matplotlib figure atomically as PNG and close it."""
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())
