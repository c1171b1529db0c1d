"""XLA:CPU's default fusion emitters give the suite's answers.

The suite compiles with the older emitter (``--xla_cpu_use_fusion_emitters=false``,
tests/conftest.py: about half the compile time); users get jax's default. Here one program is
compiled twice in this process, once per emitter (per-program compiler options override the
process flag), and both must give the same answer: every sims solver's trajectory at its contract
point, D_LR on graded, nearly collapsed and p > n spectra in float64 and float32, and a short MLP
training run. The rest of the suite checks these programs against independent references (the
gradient flow, the naive n×n definition, the papers' outcomes); equal answers carry those checks
over to the default build.

A per-program option does reach the compiler: in a process without the suite's flag,
lambda-balanced's trajectory (d, h, c) = (3, 2, 2) compiled in 0.84 s with the older emitter and
1.54 s with the default one (2026-11-27).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from metrics import dlr
from sims.tolerances import tolerance
from tests.metrics.test_accuracy import _case
from tests.nets.test_step import TOL
from tests.sims.test_contract import IDS, MODELS_UNDER_TEST, _grid, _run

OPTION = "xla_cpu_use_fusion_emitters"

pytestmark = pytest.mark.skipif(
    jax.default_backend() != "cpu", reason="the emitter option is XLA:CPU's"
)


@functools.cache
def _accepts_option() -> bool:
    try:
        jax.jit(lambda x: x + 1, compiler_options={OPTION: False}).lower(1.0).compile()
    except Exception:  # noqa: BLE001 — an XLA without the option rejects it
        return False
    return True


def _both(fun, *args):
    """``fun(*args)`` compiled with the older emitter and with jax's default one (host arrays)."""
    if not _accepts_option():
        pytest.skip(f"this jaxlib has no {OPTION}")
    older, default = (jax.jit(fun, compiler_options={OPTION: on})(*args) for on in (False, True))
    return jax.tree.map(np.asarray, older), jax.tree.map(np.asarray, default)


@pytest.mark.parametrize("model", MODELS_UNDER_TEST, ids=IDS)
def test_every_solver_gives_the_same_trajectory(model):
    t = _grid(model)
    older, default = _both(lambda x: _run(model, tuple(x), t), jnp.asarray(model.generic))
    assert np.all(np.isfinite(older))
    scale = max(1.0, float(np.max(np.abs(older))))
    np.testing.assert_allclose(
        default, older, rtol=0, atol=tolerance(np.float64, "rounding") * scale
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["head1e12", "collapsed", "p>n"])
def test_dlr_is_the_same_on_ill_conditioned_spectra(name, dtype):
    phi, f = (np.asarray(a, dtype) for a in _case(name))
    older, default = _both(dlr, phi, f)
    # A value in [0, 1] computed two ways: float64 within the table's rounding row (a few
    # thousand ulps); float32 within ~100 ulps of ε32 = 1.2e-7
    atol = tolerance(np.float64, "rounding") if dtype == np.float64 else 1e-5
    assert 0.0 <= older <= 1.0
    assert abs(float(default) - float(older)) <= atol


def test_a_short_training_run_is_the_same():
    """Twelve SGD steps of a digits MLP (nets.step.run, the scan every training run compiles)."""
    from flax import nnx

    from nets import MLP, TrainConfig, load_digits
    from nets.step import build, run

    d = load_digits()
    x, y = jnp.asarray(d.x_train[:384]), jnp.asarray(d.y_train[:384])
    cfg = TrainConfig(lr=0.1, momentum=0.9, batch_size=32, epochs=1)
    program, state, hp = build(
        MLP(64, (16,), 10, rngs=nnx.Rngs(0)), cfg, num_classes=10, steps_per_epoch=12,
        total_steps=12,
    )  # fmt: skip
    idx = jnp.arange(384).reshape(12, 32)
    older, default = _both(lambda s, h: run(program, s, x, y, idx, jax.random.key(0), h), state, hp)
    losses = older[1]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    # float32 sums possibly reassociated by other loop code, ~ε32 per step through 12 momentum
    # steps: the rule of test_step.py's vmapped-vs-sequential runs
    for a, b in zip(jax.tree.leaves(default), jax.tree.leaves(older), strict=True):
        if np.issubdtype(a.dtype, np.floating):
            np.testing.assert_allclose(a, b, **TOL["vmap_params"])
