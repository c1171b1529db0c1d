"""``lrrich info``: what JAX sees, as text and as JSON."""

import json

import jax

from lrrich.cli import main
from lrrich.info import METRICS_PRECISION, environment, format_environment


def test_info_prints_devices_versions_precision_and_flags(capsys, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"jax         {jax.__version__}" in out
    assert f"devices     {len(jax.local_devices())}" in out
    assert "matmul      default precision:" in out
    assert "Precision.HIGHEST" in out
    assert "XLA_FLAGS=--xla_cpu_use_fusion_emitters=false" in out
    assert "x64" in out


def test_info_json_is_the_environment(capsys):
    assert main(["info", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["jax"] == jax.__version__
    assert env["backend"] == jax.default_backend()
    assert [d["id"] for d in env["devices"]] == [d.id for d in jax.local_devices()]
    assert env["x64"] == bool(jax.config.jax_enable_x64)


def test_metrics_precision_is_what_metrics_requests():
    from metrics._numerics import HIGHEST

    assert HIGHEST == getattr(jax.lax.Precision, METRICS_PRECISION)


def test_device_memory_is_printed_where_the_backend_reports_it():
    env = environment()
    env["backend"] = "gpu"
    env["plugins"] = {"jax-cuda12-plugin": "0.10.2"}
    env["devices"] = [
        {
            "id": 0,
            "platform": "gpu",
            "kind": "NVIDIA H200",
            "memory": {"bytes_limit": 140 * 2**30, "bytes_in_use": 2**30},
        }
    ]
    text = format_environment(env)
    assert "gpu:0   NVIDIA H200   memory: limit 140.0 GiB, in use 1.0 GiB" in text
    assert "jax-cuda12-plugin 0.10.2" in text
    assert "TF32" in text  # float32 GEMMs on a GPU default to reduced precision
