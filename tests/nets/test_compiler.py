"""nets.xla_cpu's compiler options: per-program XLA:CPU options, passed through, rejected gracefully, same results."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from nets import xla_cpu as compiler
from nets.models import LeNet5
from tests.nets.test_step import TOL

_PROBE = compiler._accepted  # the cached probe, even while a test patches it out


@pytest.fixture
def fresh_probe():
    _PROBE.cache_clear()
    yield
    _PROBE.cache_clear()


def test_options_on_cpu_are_the_table_when_xla_accepts_them():
    options = compiler.compiler_options("cpu")
    accepted = compiler._accepted(tuple(sorted(compiler.CPU_OPTIONS.items())))
    assert options == (compiler.CPU_OPTIONS if accepted else None)
    assert compiler.compiler_options("gpu") is None and compiler.compiler_options("tpu") is None


def test_an_option_xla_rejects_falls_back_to_plain_jit(monkeypatch, fresh_probe):
    monkeypatch.setattr(compiler, "CPU_OPTIONS", {"xla_cpu_no_such_option": "1"})
    assert compiler.compiler_options("cpu") is None
    f = compiler.jit(lambda x: 2 * x)
    np.testing.assert_array_equal(f(jnp.arange(3.0)), [0.0, 2.0, 4.0])


def test_the_wrapper_hands_its_options_to_xla(monkeypatch, fresh_probe):
    """With the probe bypassed, a bogus option must reach XLA and be refused there."""
    if jax.default_backend() != "cpu":
        pytest.skip("the options apply on the CPU backend only")
    monkeypatch.setattr(compiler, "CPU_OPTIONS", {"xla_cpu_no_such_option": "1"})
    monkeypatch.setattr(compiler, "_accepted", lambda options: True)
    with pytest.raises(Exception, match="xla_cpu_no_such_option"):
        compiler.jit(lambda x: x + 1)(jnp.ones(2))


def test_nested_in_jit_and_vmap_and_static_arguments_work():
    f = compiler.jit(lambda x, k: x * k, static_argnums=1)
    x = jnp.arange(4.0)
    np.testing.assert_array_equal(f(x, 3), 3 * x)
    np.testing.assert_array_equal(jax.jit(lambda x: f(x, 2))(x), 2 * x)
    np.testing.assert_array_equal(jax.vmap(lambda x: f(x, 2))(x[:, None])[:, 0], 2 * x)
    decorated = compiler.jit(static_argnums=1)(lambda x, k: x + k)
    np.testing.assert_array_equal(decorated(x, 1), x + 1)


def test_lenet5_training_is_the_same_with_and_without_the_options():
    """5 SGD steps of LeNet-5 (convolutions, max-pool reductions) agree to float32 round-off."""
    model = LeNet5(rngs=nnx.Rngs(0))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((32, 32, 32, 1), dtype=np.float32))
    y = jnp.asarray(rng.integers(0, 10, 32))

    def sgd_step(p):
        def loss(p):
            logits = nnx.merge(graphdef, p, rest)(x)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        value, g = jax.value_and_grad(loss)(p)
        return jax.tree.map(lambda a, b: a - 0.1 * b, p, g), value

    tuned, plain = compiler.jit(sgd_step), jax.jit(sgd_step)
    pa, pb = params, params
    for _ in range(5):
        (pa, la), (pb, lb) = tuned(pa), plain(pb)
        np.testing.assert_allclose(la, lb, **TOL["compiler_options"])
    for a, b in zip(jax.tree.leaves(pa), jax.tree.leaves(pb), strict=True):
        np.testing.assert_allclose(a, b, **TOL["compiler_options"])
    assert not np.allclose(jax.tree.leaves(pa)[0], jax.tree.leaves(params)[0])  # it trained


def test_options_if_decides_per_call_and_nets_applies_them_to_convolutional_models(monkeypatch):
    from nets import MLP, TrainConfig
    from nets.step import build

    # a stand-in jax.jit whose compiled "program" reports the options it was built with
    monkeypatch.setattr(compiler, "compiler_options", lambda backend=None: {"probe": "1"})
    monkeypatch.setattr(
        compiler.jax, "jit", lambda f, **kw: lambda *a, **k: kw.get("compiler_options")
    )
    f = compiler.jit(lambda flag, x: x, options_if=lambda flag, x: flag)
    assert f(True, 1.0) == {"probe": "1"}
    assert f(False, 1.0) is None
    assert f(True, 1.0) == {"probe": "1"}
    monkeypatch.undo()

    def program(model):
        return build(model, TrainConfig(), num_classes=10, steps_per_epoch=1, total_steps=1)[0]

    lenet, mlp = program(LeNet5(rngs=nnx.Rngs(0))), program(MLP(64, (8,), 10, rngs=nnx.Rngs(0)))
    assert lenet.cpu_options and not mlp.cpu_options


def test_program_jit_takes_the_options_the_program_carries(monkeypatch):
    """program_jit decides from Program.cpu_options alone (set once, by xla_cpu.tune in build)."""
    import dataclasses

    monkeypatch.setattr(compiler, "compiler_options", lambda backend=None: {"probe": "1"})
    monkeypatch.setattr(
        compiler.jax, "jit", lambda f, **kw: lambda *a, **k: kw.get("compiler_options")
    )

    @dataclasses.dataclass(frozen=True)
    class Stub:
        cpu_options: bool

    f = compiler.program_jit(lambda program, x: x, static_argnums=0)
    assert f(Stub(True), 1.0) == {"probe": "1"} and f(Stub(False), 1.0) is None


def test_aliases_keep_the_documented_names():
    from nets import blas
    from nets import compiler as alias

    assert alias.jit is compiler.jit and alias.CPU_OPTIONS is compiler.CPU_OPTIONS
    assert alias.compiler_options is compiler.compiler_options
    assert blas.one_blas_thread is compiler.one_blas_thread
    assert blas.limit_blas_threads is compiler.limit_blas_threads
