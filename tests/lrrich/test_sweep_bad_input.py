"""The sweep front door (``lrrich sweep`` and :func:`lrrich.sweep.run_sweep`) against bad input.

Each case is the right answer or one clear error that names what was wrong, with nothing written.
:func:`outcome` sorts a case into ``right`` (the expected answer or error), ``unclear`` (an error
that does not say what was wrong: a traceback, or another message) or ``silent`` (no error, and a
wrong answer); every case must be ``right``.
"""

import contextlib
import io as _io
from pathlib import Path

import pytest

from lrrich import cli, io, registry
from lrrich.sweep import run_sweep
from tests.lrrich import toy_experiment

_toy = toy_experiment.autouse_fixture()


def _cli(*argv):
    """A ``lrrich sweep toy ...`` case (``--out`` and ``--quiet`` are added)."""
    return ("cli", ["sweep", *argv])


def _api(**kwargs):
    """A ``run_sweep("toy", ...)`` case (``sweep_dir`` and ``progress=False`` are added)."""
    return ("api", {"name": "toy", "grid": {"scale": ["1"]}, **kwargs})


def _rows(out: Path) -> dict:
    return {tuple(r["point"].values()): r for r in io.read_json(out / "sweep.json")["rows"]}


# (case id, call, expected): expected is a substring of the one-line error, or a check of a
# finished sweep folder for the inputs that have a right answer.
CASES = [
    ("grid-no-values", _cli("toy", "--grid", "scale="), "scale has no values"),
    ("grid-blank-values", _cli("toy", "--grid", "scale= "), "scale has no values"),
    ("grid-second-axis-empty", _cli("toy", "--grid", "scale=1", "--grid", "offset="), "offset has no values"),
    ("grid-empty-value", _cli("toy", "--grid", "scale=1,,2"), "--grid scale=1,,2: empty value"),
    ("grid-no-equals", _cli("toy", "--grid", "scale"), "--grid expects key=v1,v2"),
    ("grid-no-key", _cli("toy", "--grid", "=1"), "--grid =1: no key"),
    ("grid-duplicate-value", _cli("toy", "--grid", "scale=1,1"), "a value is listed twice"),
    ("grid-axis-twice", _cli("toy", "--grid", "scale=1", "--grid", "scale=2"), "--grid scale is given twice"),
    ("grid-unknown-key", _cli("toy", "--grid", "scal=1,2"), "unknown grid key 'scal' for toy; did you mean 'scale'?"),
    ("grid-bad-value", _cli("toy", "--grid", "scale=1,abc"), "--grid scale: expected float, got 'abc'"),
    ("grid-nan-value", _cli("toy", "--grid", "scale=1,nan"), "scale must be a number, got nan"),
    ("grid-spaces", _cli("toy", "--grid", "scale=1, 2"), lambda out: sorted(_rows(out)) == [("1",), ("2",)]),
    ("seeds-zero", _cli("toy", "--grid", "scale=1", "--seeds", "0"), "--seeds must be a whole number ≥ 1"),
    ("seeds-negative", _cli("toy", "--grid", "scale=1", "--seeds", "-1"), "--seeds must be a whole number ≥ 1"),
    ("seeds-text", _cli("toy", "--grid", "scale=1", "--seeds", "abc"), "argument --seeds: invalid int value: 'abc'"),
    ("seeds-and-seed-grid", _cli("toy", "--grid", "seed=1,2", "--seeds", "2"), "--grid seed=... and --seeds 2 both set the seed"),
    ("set-seed", _cli("toy", "--grid", "scale=1", "--set", "seed=5"), "--set seed=5: a sweep sets each point's seed"),
    ("set-and-grid", _cli("toy", "--grid", "scale=1", "--set", "scale=2"), "--set and --grid both set ['scale']"),
    ("set-unknown-key", _cli("toy", "--grid", "scale=1", "--set", "ofset=1"), "unknown config key 'ofset'; did you mean 'offset'?"),
    ("set-no-equals", _cli("toy", "--grid", "scale=1", "--set", "offset"), "--set expects key=value"),
    ("no-grid", _cli("toy", "--seeds", "2"), lambda out: [r["n"] for r in _rows(out).values()] == [2]),
    ("jobs-zero", _cli("toy", "--grid", "scale=1", "--jobs", "0"), "--jobs must be a whole number ≥ 1"),
    ("jobs-negative", _cli("toy", "--grid", "scale=1", "--jobs", "-2"), "--jobs must be a whole number ≥ 1"),
    ("executor-unknown", _cli("toy", "--grid", "scale=1", "--executor", "mpi"), "argument --executor: invalid choice: 'mpi'"),
    ("shard-out-of-range", _cli("toy", "--grid", "scale=1", "--shard", "2/2"), "--shard i/N needs 0 <= i < N"),
    ("shard-text", _cli("toy", "--grid", "scale=1", "--shard", "half"), "--shard expects i/N"),
    ("max-runs", _cli("toy", "--grid", "scale=1,2", "--max-runs", "1"), "would launch 2 runs (> --max-runs 1); pass --yes"),
    ("experiment-typo", _cli("toyy", "--grid", "scale=1"), "unknown experiment 'toyy'; did you mean 'toy'?"),
    ("scale-unknown", _cli("toy", "--grid", "scale=1", "--scale", "huge"), "unknown scale 'huge' for toy"),
    ("slurm-time-zero", _cli("toy", "--grid", "scale=1", "--executor", "slurm", "--slurm-time", "0"), "--slurm-time must be at least 1 minute"),
    ("slurm-arg-no-equals", _cli("toy", "--grid", "scale=1", "--executor", "slurm", "--slurm-arg", "qos"), "--slurm-arg expects key=value"),
    ("out-is-a-file", ("file", ["sweep", "toy", "--grid", "scale=1"]), "is a file, not a sweep folder"),
    ("api-executor-unknown", _api(executor="mpi"), "--executor must be one of"),
    ("api-vectorize-without-vmap", _api(vectorize=True), "--vectorize applies to --vmap sweeps"),
    ("api-grid-values-a-string", _api(grid={"scale": "1,2"}), "grid axis 'scale' must be a list of values"),
    ("api-grid-values-empty", _api(grid={"scale": []}), "scale has no values"),
    ("api-seeds-fraction", _api(seeds=2.5), "--seeds must be a whole number ≥ 1"),
    ("api-jobs-text", _api(jobs="2"), "--jobs must be a whole number ≥ 1"),
    ("api-grid-numbers", _api(grid={"scale": [1, 2]}), lambda out: sorted(_rows(out)) == [("1",), ("2",)]),
]  # fmt: skip


def outcome(call, expected, folder: Path) -> tuple[str, str]:
    """``(right | unclear | silent, what happened)`` of one case run against ``folder``."""
    kind, spec = call
    out = folder / "o"
    err = _io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            if kind == "api":
                run_sweep(sweep_dir=out, progress=False, **spec)
                code = 0
            else:
                if kind == "file":
                    out.write_text("not a folder")
                try:
                    code = cli.main([*spec, "--out", str(out), "--quiet"])
                except SystemExit as e:  # argparse's own refusal: usage line, then the error
                    code = e.code
    except Exception as e:  # an API refusal, or a bug's traceback from the CLI
        message = f"{type(e).__name__}: {e}"
        if kind == "api" and isinstance(expected, str) and expected in str(e):
            return ("right" if not out.exists() else "unclear"), message
        return "unclear", message
    text = err.getvalue().strip()
    if callable(expected):
        if code == 0 and expected(out):
            return "right", "the expected answer"
        return ("silent" if code == 0 else "unclear"), text or f"exit {code}"
    if code == 0:
        return "silent", "no error"
    wrote = out.is_dir() and any(out.iterdir())
    return ("right" if expected in text and not wrote else "unclear"), text


@pytest.mark.parametrize(("call", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_sweep_input_is_answered_or_refused_clearly(tmp_path, call, expected):
    verdict, what = outcome(call, expected, tmp_path)
    assert verdict == "right", what


def tally(root: Path) -> dict[str, int]:
    """The counts of :func:`outcome` over :data:`CASES` (each in its own folder under ``root``)."""
    registry.register(toy_experiment)
    counts = {"cases": len(CASES), "right": 0, "unclear": 0, "silent": 0}
    for name, call, expected in CASES:
        (root / name).mkdir(parents=True)
        counts[outcome(call, expected, root / name)[0]] += 1
    return counts
