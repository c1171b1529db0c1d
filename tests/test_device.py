"""What depends on the device: metrics' full-precision GEMMs on a GPU, data-parallel training over
the local devices, and the prepared GPU check script (``benchmarks/gpu_check.py``).

The GPU tests are skipped elsewhere; ``benchmarks/gpu_check.sh`` runs this module on a GPU.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from metrics import dlr, moments
from nets import MLP, TrainConfig, load_digits, train

ROOT = Path(__file__).resolve().parent.parent
on_gpu = pytest.mark.skipif(
    jax.default_backend() != "gpu",
    reason="JAX's reduced-precision (TF32) default matmuls exist on GPUs only; "
    "benchmarks/gpu_check.sh runs these tests on one",
)

# Relative Frobenius errors of a float32 Gram (n = 4096, p = 256, centred post-ReLU features)
# against float64, simulated on the CPU by rounding the inputs to TF32's 10-bit mantissa: full
# float32 1.2e-6, TF32 1.0e-4. The bounds keep a factor of 5-10 from each.
GRAM_TOL = {"float32": 1e-5, "tf32_at_least": 2e-5}
# D_LR of the test's data in float32 against float64: 6e-8 on the CPU. Rounding Φ and F to
# bfloat16 before the GEMMs moves it by 3.9e-6 (to TF32: 4.7e-7; simulated in float64).
DLR_TOL = 1e-6


def _relu_features(n: int, p: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.maximum(rng.standard_normal((n, p)), 0).astype(np.float32)


def _rel(a, ref) -> float:
    return float(np.linalg.norm(np.asarray(a, np.float64) - ref) / np.linalg.norm(ref))


@on_gpu
def test_metrics_gram_is_full_float32_where_the_default_matmul_is_tf32():
    phi = _relu_features(4096, 256, 0)
    out = np.random.default_rng(1).standard_normal((4096, 3)).astype(np.float32)
    centred = phi.astype(np.float64) - phi.astype(np.float64).mean(0)
    ref = centred.T @ centred
    stats = moments(jnp.asarray(phi), jnp.asarray(out))
    assert stats.phi_css.dtype == jnp.float32
    err_metrics = _rel(stats.phi_css, ref)
    x = jnp.asarray(centred.astype(np.float32))
    err_default = _rel(jax.jit(lambda a: a.T @ a)(x), ref)  # JAX's default precision
    assert err_metrics < GRAM_TOL["float32"], err_metrics
    assert err_default > max(GRAM_TOL["tf32_at_least"], 10 * err_metrics), (
        f"the default-precision Gram is as accurate as metrics' ({err_default:.1e} vs "
        f"{err_metrics:.1e}): this GPU/JAX does not round float32 matmuls to TF32 by default"
    )


def _dlr_float64(phi: np.ndarray, f: np.ndarray) -> float:
    """1 − ‖QᵀΦ_c‖_F² / (‖Φ_cᵀΦ_c‖_F √r), Q an orthonormal basis of col(F_c) (T Eq. 2.8-2.9)."""
    pc = phi - phi.mean(0)
    fc = f - f.mean(0)
    u, s, _ = np.linalg.svd(fc, full_matrices=False)
    q = u[:, s > 1e-10 * s[0]]
    return 1 - np.linalg.norm(q.T @ pc) ** 2 / (np.linalg.norm(pc.T @ pc) * np.sqrt(q.shape[1]))


@on_gpu
@pytest.mark.parametrize("default_precision", [None, "bfloat16"])
def test_dlr_on_the_gpu_matches_float64_whatever_the_default_precision(default_precision):
    phi = _relu_features(4096, 128, 2)
    head = np.random.default_rng(3).standard_normal((128, 10)) / np.sqrt(128)
    f = (phi.astype(np.float64) @ head).astype(np.float32)  # logits: rank C = 10, no null direction
    ref = _dlr_float64(phi.astype(np.float64), f.astype(np.float64))
    with jax.default_matmul_precision(default_precision):  # None: JAX's default (TF32)
        got = float(dlr(jnp.asarray(phi), jnp.asarray(f)))
    assert abs(got - ref) < DLR_TOL, (got, ref)


def test_data_parallel_over_the_local_devices_matches_one_device():
    d = load_digits()
    d = d._replace(x_train=d.x_train[:256], y_train=d.y_train[:256])
    cfg = TrainConfig(lr=0.05, momentum=0.9, batch_size=64, epochs=2)

    def run(data_parallel):
        model = MLP(64, (32,), 10, rngs=nnx.Rngs(0))
        out, hist = train(model, d, cfg, key=jax.random.key(3), metrics={}, eval_size=256,
                          progress=False, data_parallel=data_parallel)  # fmt: skip
        return [np.asarray(a) for a in jax.tree.leaves(nnx.state(out, nnx.Param))], hist

    (one, h1), (all_devices, h2) = run(False), run(True)
    # Two compiled programs whose float32 GEMMs may round differently (TF32 on a GPU: 2⁻¹¹
    # relative per product) over 8 steps; parameters are O(0.1-1).
    for a, b in zip(one, all_devices, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)
    assert h2.final["test_acc"] == pytest.approx(h1.final["test_acc"], abs=0.01)


def _check_script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--quick", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_gpu_check_quick_script_plans_runs_a_phase_and_refuses_unknown_phases(tmp_path):
    plan = _check_script(tmp_path, "--dry-run", "--out", str(tmp_path / "plan"))
    assert plan.returncode == 0, plan.stderr
    report = json.loads((tmp_path / "plan" / "gpu_check.json").read_text())
    names = [p["phase"] for p in report["plan"]]
    assert names == ["env", "tests", "resnet_jax", "resnet_torch", "sweep", "dlr", "experiment"]
    assert report["dry_run"] and report["quick"] and report["tests"]

    run = _check_script(tmp_path, "--phases", "dlr", "--out", str(tmp_path / "dlr"))
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((tmp_path / "dlr" / "gpu_check.json").read_text())
    rec = report["phases"]["dlr"]
    assert rec["status"] == "ok", rec
    assert rec["dlr_s"] > 0 and rec["gemm_highest_s"] > 0
    assert report["summary"]["dlr_over_gemm"] == pytest.approx(rec["dlr_s"] / rec["gemm_highest_s"])
    assert 0 < rec["dlr_value"] < 1
    assert (tmp_path / "dlr" / "gpu_check.log").read_text().count("===== phase dlr") == 1

    bad = _check_script(tmp_path, "--phases", "dlr,nope", "--out", str(tmp_path / "bad"))
    assert bad.returncode != 0 and "unknown phase(s) ['nope']" in bad.stderr

    suite = _check_script(tmp_path, "--dry-run", "--phases", "suite", "--out", str(tmp_path / "s"))
    assert suite.returncode == 0, suite.stderr
    assert [
        p["phase"] for p in json.loads((tmp_path / "s" / "gpu_check.json").read_text())["plan"]
    ] == ["suite"]


def test_failures_plugin_writes_each_failure_once_as_it_happens(tmp_path):
    """``-p tests.gpu_failures`` appends a failing test's traceback to $GPU_CHECK_FAILURES,
    once under pytest-xdist too (the controller writes, the worker does not), nothing for a pass."""
    (tmp_path / "test_two.py").write_text(
        "def test_passes():\n    assert True\n\n"
        "def test_fails():\n    assert 1 + 1 == 3, 'arithmetic'\n"
    )
    for workers in ("0", "1"):
        out = tmp_path / f"failures_{workers}.txt"
        env = dict(os.environ, GPU_CHECK_FAILURES=str(out), PYTHONPATH=str(ROOT))
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
             "-n", workers, "-p", "tests.gpu_failures", "test_two.py"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stdout + proc.stderr
        text = out.read_text()
        assert text.count("=====") == 1 and "test_two.py::test_fails (call)" in text, text
        assert "arithmetic" in text and "test_passes" not in text


def test_value_checks_reduce_on_either_side_and_catch_nan():
    # On the CPU NumPy reads a zero-copy view; on an accelerator the reduction runs on the device
    # (one bool comes back, never the array). Both must still catch a single NaN or inf.
    phi = jnp.asarray(_relu_features(512, 16, 3))
    f = phi @ jnp.ones((16, 3), phi.dtype)
    assert np.isfinite(float(dlr(phi, f)))
    for bad in (jnp.nan, jnp.inf):
        with pytest.raises(ValueError, match="NaN or inf"):
            dlr(phi.at[7, 5].set(bad), f)


def _nominal_flops(jaxpr) -> int:
    """2·(multiply-adds) of every convolution (all taps of the padded window) and dot in
    ``jaxpr``, nested programs included: the count :func:`resnet18_train_flops` states."""
    from jax.extend import core as jcore

    total = 0
    for eqn in jaxpr.eqns:
        out = eqn.outvars[0].aval if eqn.outvars else None
        if eqn.primitive.name == "conv_general_dilated":
            rhs, spec = eqn.invars[1].aval, eqn.params["dimension_numbers"].rhs_spec
            taps = np.prod([rhs.shape[i] for i in spec[2:]]) * rhs.shape[spec[1]]
            total += 2 * np.prod(out.shape) * taps
        elif eqn.primitive.name == "dot_general":
            (contracted, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval
            total += 2 * np.prod(out.shape) * np.prod([lhs.shape[i] for i in contracted])
        for param in eqn.params.values():
            for sub in param if isinstance(param, list | tuple) else [param]:
                if isinstance(sub, jcore.ClosedJaxpr):
                    total += _nominal_flops(sub.jaxpr)
                elif isinstance(sub, jcore.Jaxpr):
                    total += _nominal_flops(sub)
    return int(total)


@pytest.mark.parametrize("width,classes", [(4, 10), (8, 7)])
def test_resnet18_model_flops_are_the_traced_models_convolutions_and_readout(width, classes):
    """bench_resnet_gpu's ResNet18 model FLOPs = 3 × the convolutions and GEMMs of the traced
    ``nets`` forward pass (counted from its jaxpr), exactly; the peak table and the utilisation
    arithmetic."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_resnet_gpu import bf16_peak_tflops, model_flop_utilisation, resnet18_train_flops

    from nets import get_model

    model = get_model("resnet18", num_classes=classes, k=width, rngs=nnx.Rngs(0))
    model.eval()
    graphdef, state = nnx.split(model)
    batch = 2
    jaxpr = jax.make_jaxpr(lambda s, x: nnx.merge(graphdef, s)(x))(
        state, jnp.zeros((batch, 32, 32, 3))
    )
    assert resnet18_train_flops(width, classes) == 3 * _nominal_flops(jaxpr.jaxpr) / batch
    assert bf16_peak_tflops("NVIDIA H200") == 989.0
    assert bf16_peak_tflops("NVIDIA H100 PCIe") == 756.0 and bf16_peak_tflops("cpu") is None
    got = model_flop_utilisation(1000.0, 2e9, 4.0)
    assert got == {"model_tflop_s": 2.0, "peak_tflop_s": 4.0, "mfu": 0.5}
    assert model_flop_utilisation(1000.0, 2e9, None)["mfu"] is None
    with pytest.raises(ValueError, match="positive"):
        model_flop_utilisation(1000.0, 2e9, 0.0)
    with pytest.raises(ValueError, match="divisible by 8"):
        resnet18_train_flops(width, classes, size=20)
