"""Test-suite settings: float64 on (sims are float64 by design), non-interactive plotting, one
OpenBLAS thread (:mod:`nets.blas`), XLA:CPU's older fusion emitter (:func:`compile_faster`)."""

import os
import subprocess
import sys

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # nets/blas.py: LAPACK ~100× faster on 2 cores

#: The XLA flag the suite runs under, and the variable that turns it off (any non-empty value).
FAST_COMPILE_FLAG = "--xla_cpu_use_fusion_emitters=false"
DEFAULT_XLA_VARIABLE = "LRRICH_TEST_DEFAULT_XLA"


def compile_faster() -> str:
    """Add :data:`FAST_COMPILE_FLAG` to ``XLA_FLAGS`` for this process and its children; say what.

    The suite's time is mostly XLA:CPU compiling programs that run once, and jaxlib 0.10's
    default fusion emitters take about twice as long to compile the solvers' programs as the older
    emitter (lambda-balanced's gradient 4.7 → 2.4 s; docs/test_speed.md). Both emitters compile the same optimised HLO: the
    flag changes how XLA writes the fused element-wise loops, not which operations run, and every
    test passes under both. ``tests/test_default_emitters.py`` compiles the solvers, D_LR and a
    training run with each emitter and asks for the same answers, so the build users get (jax's
    defaults) stays checked; ``LRRICH_TEST_DEFAULT_XLA=1 pytest`` runs the whole suite under it.

    Nothing is changed when ``XLA_FLAGS`` already names the option (the caller chose), when
    :data:`DEFAULT_XLA_VARIABLE` is set, or when this jaxlib does not know the flag: XLA aborts the
    process on an unknown flag, so a child Python tries it first (~2 s, once: pytest-xdist's
    workers inherit the variable). Set before any backend starts: XLA reads ``XLA_FLAGS`` once.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_use_fusion_emitters" in flags:
        return "XLA_FLAGS already sets xla_cpu_use_fusion_emitters"
    if os.environ.get(DEFAULT_XLA_VARIABLE):
        return f"{DEFAULT_XLA_VARIABLE} is set: jax's default XLA flags"
    trial = f"{flags} {FAST_COMPILE_FLAG}".strip()
    probe = subprocess.run(
        [sys.executable, "-c", "import jax; jax.jit(lambda x: x + 1)(1.0).block_until_ready()"],
        env={**os.environ, "XLA_FLAGS": trial, "JAX_PLATFORMS": "cpu"},
        capture_output=True, timeout=300,
    )  # fmt: skip
    if probe.returncode != 0:
        return f"this jaxlib rejects {FAST_COMPILE_FLAG}: jax's default XLA flags"
    os.environ["XLA_FLAGS"] = trial
    return f"XLA_FLAGS={trial}"


COMPILE_SETTING = compile_faster()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

from nets.blas import limit_blas_threads  # noqa: E402

limit_blas_threads()  # in case NumPy's OpenBLAS was loaded before this file set the variable

import pytest  # noqa: E402


@pytest.fixture
def full_float32():
    """Float32 matmuls and convolutions at full precision inside the test.

    For tests that compare two formulations of one function to float32 rounding (1e-5 to 1e-4).
    JAX's default precision on a GPU rounds float32 products to TF32 (10 mantissa bits, 2⁻¹¹
    relative), and two formulations run different kernels; on an H200 (2026-11-27) such tests
    failed at the default precision. On the CPU the setting changes nothing.
    """
    with jax.default_matmul_precision("highest"):
        yield


# Thresholds for dropping the caches: well under Linux's default 65,530 memory mappings per
# process, and a few GB of the machine's memory per xdist worker.
_MAX_MAPPINGS = 20_000
_MAX_RSS_BYTES = 3 * 2**30


def _process_is_large() -> bool:
    """True when this process holds many memory mappings or much memory (Linux's /proc); True
    where /proc cannot be read, so other systems drop the caches after every module."""
    try:
        with open("/proc/self/maps") as f:
            mappings = sum(1 for _ in f)
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return True
    return mappings > _MAX_MAPPINGS or rss > _MAX_RSS_BYTES


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after a test module once the process has grown large.

    The suite compiles thousands of XLA:CPU programs in one process and each keeps its code mapped
    in memory; one CI run segfaulted inside the XLA compiler after ~500 tests, late in the
    session, when the caches were never dropped. Dropping them after every module cost about 4 %
    of the suite's time in recompilations (programs such as model initialisers recur across
    modules), so they are dropped only when the process nears the limits above (the test
    directory nets/ alone grows a worker to ~17,000 mappings and ~3.3 GB).
    """
    yield
    if _process_is_large():
        jax.clear_caches()


# The modules that take a minute or more of the suite's time, longest first. pytest-xdist hands out
# whole modules (--dist loadfile) in collection order; by default it orders them by their number
# of tests, which put the one-test notebook module (65 s) last, with one worker alone on it. Packing
# the measured module times onto two workers in each order gives a 1,036 s run by test count and
# 1,013 s with these five first. A module missing from this list merely runs in xdist's order.
RUN_FIRST = (
    "tests/sims/test_contract.py",
    "tests/sims/test_lambda_balanced.py",
    "tests/lrrich/test_exp_paper_scale_configs.py",
    "tests/test_notebooks.py",
    "tests/nets/test_step.py",
)


def pytest_report_header(config):
    return f"XLA:CPU compile setting: {COMPILE_SETTING}"


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist >= 3.6
        config.option.loadscopereorder = False  # keep the order set below


def pytest_collection_modifyitems(config, items):
    """Modules in :data:`RUN_FIRST` first (in its order), then by number of tests, most first
    (pytest-xdist's own order); tests keep their order within a module."""

    def module(item):
        return item.nodeid.split("::")[0]

    counts: dict[str, int] = {}
    for item in items:
        counts[module(item)] = counts.get(module(item), 0) + 1

    def rank(item):
        name = module(item)
        first = RUN_FIRST.index(name) if name in RUN_FIRST else len(RUN_FIRST)
        return first, -counts[name]

    items.sort(key=rank)  # stable: modules of equal rank keep collection order
