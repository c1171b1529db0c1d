"""Where a program's time goes: the busiest operations of a ``jax.profiler`` trace, per process.

``top_ops(fn, folder)`` runs ``fn()`` under ``jax.profiler.trace(folder)`` and sums the complete
events of the trace (``trace.json.gz``) by name within each process of the trace: on a GPU the
device's kernels (process ``/device:GPU:0``) apart from the host's work; on the CPU XLA's
operations (fusions, GEMMs, LAPACK calls such as ``geqrf``) beside jax's Python frames (names
starting with ``$``, left out). Nested events are summed as they are (a ``while`` loop and the
operations inside it both count), so shares of a process's total overlap.

    from trace_summary import top_ops, print_top_ops
    print_top_ops(top_ops(lambda: jax.block_until_ready(f(x)), "/tmp/trace"))
"""

from __future__ import annotations

import collections
import gzip
import json
from collections.abc import Callable
from pathlib import Path

import jax


def top_ops(fn: Callable[[], object], folder: str | Path, top: int = 12) -> dict:
    """Run ``fn()`` under the profiler; ``{process: {"events_ms", "ops": [[name, ms, n], ...]}}``.

    Args:
      fn: the work to trace (block on its result inside, e.g. ``jax.block_until_ready``).
      folder: where jax writes the trace (kept, for Perfetto or TensorBoard).
      top: operations kept per process, the busiest first.

    Returns:
      per process that recorded operations, the summed duration of its events in ms and its
      ``top`` busiest operations with their total ms and call count; ``{}`` when jax wrote no
      trace file (a profiler that is not available).
    """
    folder = Path(folder)
    with jax.profiler.trace(str(folder)):
        fn()
    files = sorted(folder.glob("plugins/profile/*/*.trace.json.gz"))
    if not files:
        return {}
    with gzip.open(files[-1]) as f:
        events = json.load(f)["traceEvents"]
    names = {
        e["pid"]: e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    busy: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    calls: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for e in events:
        if e.get("ph") != "X" or e["name"].startswith("$"):
            continue
        process = names.get(e["pid"], str(e["pid"]))
        busy[process][e["name"]] += e.get("dur", 0) / 1e3
        calls[process][e["name"]] += 1
    return {
        process: {
            "events_ms": round(sum(ops.values()), 3),
            "ops": [
                [name, round(ms, 3), calls[process][name]] for name, ms in ops.most_common(top)
            ],
        }
        for process, ops in busy.items()
    }


def print_top_ops(summary: dict, say: Callable[[str], object] = print) -> None:
    """The :func:`top_ops` summary as lines: per process, each operation's ms and calls."""
    for process, info in summary.items():
        say(f"  {process}: events {info['events_ms']:.1f} ms (nested events overlap)")
        for name, ms, n in info["ops"]:
            say(f"    {ms:9.3f} ms  ×{n:<5d} {name[:90]}")
