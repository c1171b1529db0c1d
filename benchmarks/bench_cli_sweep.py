"""``lrrich sweep`` end to end: ``--vmap`` and ``--vectorize`` against ``--jobs 1``, one run each.

Times the same sweep of small points three times, each from a fresh process (imports, data,
compilation, training, figures, reports and the sweep table included): with ``--jobs 1`` (the
points one after the other in one process, the baseline), with ``--vmap`` (the points in
threads, their ``nets.train`` calls stacked into one program) and with ``--vectorize`` (the
stacked runs as one ``jax.vmap``). Prints the three wall times, their ratios to ``--jobs 1``,
the largest difference of each mode's results from ``--jobs 1`` (against the documented
tolerance ``lrrich.sweep_vmap.VMAP_RTOL``) and the 1-minute load average before and after. Each
run writes into its own temporary folder.

    python benchmarks/bench_cli_sweep.py [--lrs 0.0003,0.001,0.003,0.01] [--seeds 4] [--epochs 5]
        [--set KEY=VALUE ...] [--record]
    python benchmarks/bench_cli_sweep.py --set dataset=digits --set width=64 --epochs 20

Default: encoded-labels (MLP 784-256x3-10, Adam, 4,000 MNIST images), 4 learning rates × 4
seeds = 16 points of 5 epochs (155 steps each for the rich and the lazy network); the second
command sweeps 16 small digits points (220 steps per network).

Results: ``benchmarks/results.md`` (``python benchmarks/bench_cli_sweep.py --record``); where a
point's time goes and why no mode reaches 3×: ``docs/findings/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import Printed

ROOT = Path(__file__).resolve().parent.parent


def _sweep(out: Path, mode: list[str], args) -> float:
    cmd = [
        sys.executable, "-m", "lrrich.cli", "sweep", args.experiment, "--quiet",
        "--grid", f"lr={args.lrs}", "--seeds", str(args.seeds), "--set", f"epochs={args.epochs}",
        *[a for kv in args.set for a in ("--set", kv)], "--out", str(out), *mode,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _summaries(folder: Path) -> dict[str, dict]:
    return {
        p.parent.name: json.loads(p.read_text())["summary"] for p in folder.glob("*/results.json")
    }


def _worst_difference(a: dict, b: dict) -> tuple[float, str]:
    worst, where = 0.0, ""
    for point, sa in a.items():
        for key, va in sa.items():
            vb = b[point].get(key)
            if key.endswith(("_seconds", "_s")) or not isinstance(va, float) or vb is None:
                continue
            if math.isfinite(va) and math.isfinite(vb):
                rel = abs(va - vb) / max(abs(vb), 1e-12)
                if rel > worst:
                    worst, where = rel, f"{point} {key}: {va:.6g} vs {vb:.6g}"
    return worst, where


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", default="encoded-labels")
    ap.add_argument("--lrs", default="0.0003,0.001,0.003,0.01")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="more config overrides for every point (e.g. dataset=digits)",
    )
    ap.add_argument("--record", action="store_true", help="write benchmarks/results.md")
    args = ap.parse_args()
    say = Printed()
    from lrrich.sweep_vmap import VMAP_RTOL

    points = len(args.lrs.split(",")) * args.seeds
    extra = " ".join(args.set)
    say(
        f"{args.experiment}: {points} points, {args.epochs} epochs {extra}; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    modes = {"--jobs 1": ["--jobs", "1"], "--vmap": ["--vmap"], "--vectorize": ["--vectorize"]}
    times, summaries = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for k, (label, flags) in enumerate(modes.items()):
            times[label] = _sweep(Path(tmp) / str(k), flags, args)
            summaries[label] = _summaries(Path(tmp) / str(k))
    base = times["--jobs 1"]
    say("   ".join(f"{label}: {t:.1f} s ({base / t:.2f}x)" for label, t in times.items()))
    for label in ("--vmap", "--vectorize"):
        worst, where = _worst_difference(summaries[label], summaries["--jobs 1"])
        say(f"{label} vs --jobs 1: largest relative difference {worst:.2g} ({where})")
    say(f"VMAP_RTOL = {VMAP_RTOL:g} (--vmap); --vectorize agrees to round-off only")
    say(f"load after: {os.getloadavg()[0]:.1f} (1-minute average)")
    if args.record:
        say.record(__file__)


if __name__ == "__main__":
    main()
