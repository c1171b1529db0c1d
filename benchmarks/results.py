"""The one results file of the benchmarks: ``benchmarks/results.md``, one section per script.

A benchmark run with ``--record`` passes the lines it printed to :func:`record`, which rewrites
that script's section ``## <name>`` and adds the command, and where and when the numbers were
measured. The other sections stay as they are, sorted by name.

    python benchmarks/bench_dlr.py --n 20000 --record

A script prints through :class:`Printed` (``say = Printed()``, then ``say(...)`` where it used
``print``) and ends with ``say.record(__file__)`` when ``--record`` is given.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["RESULTS", "Printed", "load_average", "record"]

RESULTS = Path(__file__).resolve().parent / "results.md"
_HEADER = (
    "# Benchmark results\n\n"
    "Written by the benchmarks' `--record` runs (`benchmarks/results.py`): one section per\n"
    "script, the lines it printed and where and when they were measured. Do not edit by hand;\n"
    "the findings behind the numbers are in `docs/findings/benchmarks.md`.\n"
)


def load_average() -> float:
    """The 1-minute load average (other jobs on the machine shift every timing)."""
    return os.getloadavg()[0]


class Printed:
    """``print`` that keeps the printed lines, and the load average when it was created."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.load_start = load_average()

    def __call__(self, text: str = "") -> None:
        print(text)
        self.lines.extend(text.splitlines() or [""])

    def record(self, script: str) -> Path:
        """:func:`record` the printed lines under the stem of ``script`` (pass ``__file__``)."""
        return record(
            Path(script).stem, self.lines, load_start=self.load_start, load_end=load_average()
        )


def record(
    name: str,
    lines: list[str],
    *,
    load_start: float | None = None,
    load_end: float | None = None,
) -> Path:
    """Rewrite the section ``## name`` of ``benchmarks/results.md`` with ``lines`` and provenance.

    Args:
      name: the section, the benchmark script's stem (``bench_dlr``).
      lines: what the benchmark printed (a markdown table or plain lines; plain lines are
        written as a code block so their alignment survives).
      load_start, load_end: the 1-minute load average at the start and end of the run.

    Returns:
      The path of the results file.
    """
    sections = _read_sections()
    body = "\n".join(lines) if _is_markdown(lines) else "```\n" + "\n".join(lines) + "\n```"
    sections[name] = f"{body}\n\n{_provenance(load_start, load_end)}\n"
    text = _HEADER + "".join(f"\n## {k}\n\n{sections[k]}" for k in sorted(sections))
    fd, tmp = tempfile.mkstemp(dir=RESULTS.parent, prefix=".results.", suffix=".md")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, RESULTS)
    print(f"recorded in {RESULTS}")
    return RESULTS


def _is_markdown(lines: list[str]) -> bool:
    return bool(lines) and all(s.startswith(("|", "- ", "* ")) or not s.strip() for s in lines)


def _read_sections() -> dict[str, str]:
    if not RESULTS.is_file():
        return {}
    sections: dict[str, str] = {}
    name = None
    for line in RESULTS.read_text().splitlines(keepends=True):
        if line.startswith("## "):
            name = line[3:].strip()
            sections[name] = ""
        elif name is not None:
            sections[name] += line
    return {k: v.strip("\n") + "\n" for k, v in sections.items()}


def _commit() -> str:
    root = RESULTS.parent.parent

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown commit"
    return commit + (" + uncommitted changes" if git("status", "--porcelain", "-uno") else "")


def _provenance(load_start: float | None, load_end: float | None) -> str:
    import jax

    device = jax.devices()[0]
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__} "
        f"{jax.default_backend()} ({device.device_kind})"
    )
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(RESULTS.parent.parent):
        script = script.relative_to(RESULTS.parent.parent)
    command = shlex.join(["python", str(script), *sys.argv[1:]])
    line = f"`{command}`: measured {date}, commit {_commit()}, on {machine}"
    loads = [f"{v:.1f} at the {when}" for v, when in ((load_start, "start"), (load_end, "end"))
             if v is not None]  # fmt: skip
    if loads:
        line += "; 1-minute load average " + ", ".join(loads)
    return line + "."
