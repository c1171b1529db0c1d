"""Data-parallel training over 4 forced host devices and vmapped multi-seed training."""

import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
from flax import nnx

from nets import MLP, TrainConfig, load_digits, train
from nets.parallel import train_seeds


def test_sharded_training_matches_single_device():
    script = textwrap.dedent("""
        import jax, numpy as np
        jax.config.update("jax_enable_x64", True)
        from flax import nnx
        from nets import MLP, TrainConfig, load_digits, train
        assert jax.local_device_count() == 4
        d = load_digits(dtype=np.float64)
        d = d._replace(x_train=d.x_train[:512], y_train=d.y_train[:512])
        cfg = TrainConfig(lr=0.05, momentum=0.9, batch_size=64, epochs=2)
        def run(dp):
            m = MLP(64, (32,), 10, rngs=nnx.Rngs(0))
            m = jax.tree.map(lambda a: a.astype(np.float64) if hasattr(a, "dtype") else a, m)
            out, _ = train(m, d, cfg, key=jax.random.key(3), metrics={}, progress=False, data_parallel=dp)
            return [np.asarray(x) for x in jax.tree.leaves(nnx.state(out, nnx.Param))]
        one, four = run(False), run(True)
        err = max(float(np.abs(a - b).max()) for a, b in zip(one, four))
        moved = max(float(np.abs(a).max()) for a in one)
        print("ERR", err, moved)
        assert err < 1e-12 * max(moved, 1.0), err
    """)
    env = dict(
        os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu"
    )
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert "ERR" in proc.stdout.decode()


def test_vmapped_seeds_match_separate_runs():
    d = load_digits()
    d = d._replace(x_train=d.x_train[:512], y_train=d.y_train[:512])
    cfg = TrainConfig(lr=0.05, momentum=0.9, batch_size=64, epochs=2)
    make = lambda rngs: MLP(64, (16,), 10, rngs=rngs)
    keys = jax.random.split(jax.random.key(0), 3)
    models, finals = train_seeds(make, d, cfg, keys, init_seeds=[0, 1, 2])
    assert finals["test_acc"].shape == (3,)
    for i in (0, 2):
        ref, hist = train(make(nnx.Rngs(i)), d, cfg, key=keys[i], metrics={}, progress=False)
        for a, b in zip(
            jax.tree.leaves(nnx.state(ref)), jax.tree.leaves(nnx.state(models[i])), strict=True
        ):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(finals["test_loss"][i], hist.final["test_loss"], rtol=1e-4)


def test_stacked_runs_split_over_devices_equal_one_device():
    """train_many over a runs mesh of forced host devices: each run's arithmetic is unchanged
    (bitwise on the CPU, vmapped or not), logs and models come back whole, and the mesh takes
    the largest device count that divides R."""
    script = textwrap.dedent("""
        import dataclasses, jax, numpy as np
        from flax import nnx
        from nets import MLP, TrainConfig, load_digits, train_many
        from nets.step import runs_mesh
        assert jax.local_device_count() == 4
        assert runs_mesh(8).devices.size == 4 and runs_mesh(6).devices.size == 3
        assert runs_mesh(6, 2).devices.size == 2
        assert runs_mesh(5) is None and runs_mesh(1) is None and runs_mesh(8, 1) is None
        for bad in (0, 5, 1.5, True):
            try:
                runs_mesh(4, bad)
                raise AssertionError(f"devices={bad!r} was accepted")
            except ValueError:
                continue
        d = load_digits()
        base = TrainConfig(lr=0.1, momentum=0.9, batch_size=64, epochs=2)
        cfgs = [dataclasses.replace(base, lr=0.02 * (i + 1)) for i in range(6)]
        keys = [jax.random.key(i) for i in range(6)]
        def run(devices, vectorize):
            models = [MLP(64, (8,), 10, rngs=nnx.Rngs(i)) for i in range(6)]
            out, hists = train_many(models, d, cfgs, keys, devices=devices,
                                    vectorize=vectorize, log_every=7)
            leaves = [np.asarray(a) for m in out for a in jax.tree.leaves(nnx.state(m))]
            places = {a.device for m in out for a in jax.tree.leaves(nnx.state(m))}
            assert len(places) == 1, places
            recs = [{k: v for k, v in r.items() if not k.endswith("_time")}
                    for h in hists for r in h.records]
            return leaves, recs
        for vectorize in (True, False):
            one, split = run(1, vectorize), run(None, vectorize)
            assert all(np.array_equal(a, b) for a, b in zip(one[0], split[0], strict=True))
            assert [sorted(r) for r in one[1]] == [sorted(r) for r in split[1]]
            for a, b in zip(one[1], split[1]):  # log points: a vmap over fewer runs, round-off
                np.testing.assert_allclose([a[k] for k in sorted(a)], [b[k] for k in sorted(a)],
                                           rtol=1e-6)
        print("OK")
    """)
    env = dict(
        os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu"
    )
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert "OK" in proc.stdout.decode()
