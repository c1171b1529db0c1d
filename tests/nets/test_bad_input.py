"""Bad inputs to every public ``nets`` function and every ``TrainConfig`` field.

Each case is a call with one wrong argument (type, range, shape, NaN/inf, empty) and what it must
give: either the right answer, or a ``ValueError``/``TypeError`` whose message names the argument.
The calls fail before anything compiles, so the whole matrix runs in seconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest
from flax import nnx

import nets
from nets import (
    MLP,
    TrainConfig,
    Transformer,
    as_regression,
    balance_layers,
    encode_labels,
    get_model,
    hparams,
    load_digits,
    scale_weights,
    shuffle_labels,
    train,
    train_many,
)
from nets.data import load, modular_division


@dataclasses.dataclass(frozen=True)
class Case:
    """One bad call: ``call()`` must raise ValueError/TypeError naming ``names`` (any of them),
    or, when ``names`` is empty, return a value that ``check`` accepts."""

    id: str
    call: Callable[[], Any]
    names: tuple[str, ...] = ()
    check: Callable[[Any], bool] | None = None


_DIGITS = load_digits()
DATA = _DIGITS._replace(x_train=_DIGITS.x_train[:128], y_train=_DIGITS.y_train[:128])
KEY = jax.random.key(0)
CFG = TrainConfig(batch_size=64, steps=2)
KW = dict(key=KEY, metrics={}, progress=False)


def _mlp(out: int = 10, d: int = 64) -> MLP:
    return MLP(d, (8,), out, rngs=nnx.Rngs(0))


def _train(data=DATA, config=CFG, model=None, **kw):
    return lambda: train(model or _mlp(), data, config, **{**KW, **kw})


def _config(**fields):
    return lambda: TrainConfig(**fields).validate()


NAN, INF = float("nan"), float("inf")

CONFIG_CASES = [
    Case("lr-str", _config(lr="0.1"), ("lr",)),
    Case("lr-negative", _config(lr=-0.1), ("lr",)),
    Case("lr-nan", _config(lr=NAN), ("lr",)),
    Case("lr-inf", _config(lr=INF), ("lr",)),
    Case("lr-none", _config(lr=None), ("lr",)),
    Case("lr-numpy-float32", _config(lr=np.float32(0.1)), (), lambda c: c.lr == np.float32(0.1)),
    Case("momentum-one", _config(momentum=1.0), ("momentum",)),
    Case("momentum-str", _config(momentum="0.9"), ("momentum",)),
    Case("nesterov-int", _config(nesterov=1, momentum=0.9), ("nesterov",)),
    Case("nesterov-no-momentum", _config(nesterov=True), ("nesterov",)),
    Case("nesterov-adam", _config(nesterov=True, momentum=0.9, optimizer="adam"), ("nesterov",)),
    Case("weight-decay-negative", _config(weight_decay=-1e-4), ("weight_decay",)),
    Case("weight-decay-nan", _config(weight_decay=NAN), ("weight_decay",)),
    Case("batch-size-float", _config(batch_size=64.5), ("batch_size",)),
    Case("batch-size-zero", _config(batch_size=0), ("batch_size",)),
    Case("batch-size-bool", _config(batch_size=True), ("batch_size",)),
    Case("batch-size-str", _config(batch_size="64"), ("batch_size",)),
    Case(
        "batch-size-numpy-int", _config(batch_size=np.int64(64)), (), lambda c: c.batch_size == 64
    ),
    Case("epochs-negative", _config(epochs=-1), ("epochs",)),
    Case("epochs-float", _config(epochs=2.5), ("epochs",)),
    Case("steps-negative", _config(steps=-1), ("steps",)),
    Case("steps-float", _config(steps=10.0), ("steps",)),
    Case("warmup-negative", _config(warmup_steps=-1), ("warmup_steps",)),
    Case("step-every-zero", _config(step_every_epochs=0), ("step_every_epochs",)),
    Case("step-factor-negative", _config(step_factor=-0.1), ("step_factor",)),
    Case("step-factor-nan", _config(step_factor=NAN), ("step_factor",)),
    Case("b1-one", _config(b1=1.0), ("b1",)),
    Case("b2-negative", _config(b2=-0.1), ("b2",)),
    Case("eps-negative", _config(eps=-1e-8), ("eps",)),
    Case("target-scale-zero", _config(target_scale=0.0), ("target_scale",)),
    Case("target-scale-inf", _config(target_scale=INF), ("target_scale",)),
    Case("target-downscale-negative", _config(target_downscale=-1.0), ("target_downscale",)),
    Case("input-scale-nan", _config(input_scale=NAN), ("input_scale",)),
    Case("output-scale-zero", _config(output_scale=0.0), ("output_scale",)),
    Case("weight-scale-negative", _config(weight_scale=-1.0), ("weight_scale",)),
    Case("layer-balance-zero", _config(layer_balance=0.0), ("layer_balance",)),
    Case("loss-unknown", _config(loss="l2"), ("loss",)),
    Case("loss-none", _config(loss=None), ("loss",)),
    Case("optimizer-unknown", _config(optimizer="rmsprop"), ("optimizer",)),
    Case("schedule-unknown", _config(schedule="linear"), ("schedule",)),
    Case("augment-unknown", _config(augment="mixup"), ("augment",)),
    Case("compute-dtype-float16", _config(compute_dtype="float16"), ("compute_dtype",)),
    Case("last-layer-only-str", _config(last_layer_only="yes"), ("last_layer_only",)),
    Case("balance-first-int", _config(balance_first=0), ("balance_first",)),
    Case("hparams-bad-config", lambda: hparams(TrainConfig(lr="0.1")), ("lr",)),
]


def _rows(data, **arrays):
    return data._replace(**arrays)


_TOKENS = modular_division(p=7, train_fraction=0.5)
_BAD_TOKENS = _TOKENS._replace(x_train=np.where(np.arange(4) == 0, -1, _TOKENS.x_train))
_U8 = DATA._replace(
    x_train=(DATA.x_train * 16).astype(np.uint8), x_test=(DATA.x_test * 16).astype(np.uint8)
)

TRAIN_CASES = [
    Case("data-list", _train(data=[DATA, DATA]), ("data",)),
    Case("data-none", _train(data=None), ("data",)),
    Case("data-tuple-arrays", _train(data=(DATA.x_train, DATA.y_train)), ("data",)),
    Case("config-dict", _train(config={"lr": 0.1}), ("config",)),
    Case("key-int", _train(key=0), ("key",)),
    Case("key-none", _train(key=None), ("key",)),
    Case(
        "batch-size-above-n", _train(config=TrainConfig(batch_size=129, steps=1)), ("batch_size",)
    ),
    Case(
        "x-train-nan",
        _train(data=_rows(DATA, x_train=np.full_like(DATA.x_train, NAN))),
        ("x_train",),
    ),  # fmt: skip
    Case(
        "x-test-inf", _train(data=_rows(DATA, x_test=np.full_like(DATA.x_test, INF))), ("x_test",)
    ),  # fmt: skip
    Case(
        "y-train-out-of-range", _train(data=_rows(DATA, y_train=DATA.y_train + 10)), ("y_train",)
    ),  # fmt: skip
    Case(
        "y-train-float", _train(data=_rows(DATA, y_train=DATA.y_train.astype(float))), ("y_train",)
    ),  # fmt: skip
    Case("rows-mismatch", _train(data=_rows(DATA, y_train=DATA.y_train[:-1])), ("y_train",)),
    Case(
        "x-train-empty",
        _train(data=_rows(DATA, x_train=DATA.x_train[:0], y_train=DATA.y_train[:0])),
        ("x_train",),
    ),  # fmt: skip
    Case("x-test-other-shape", _train(data=_rows(DATA, x_test=DATA.x_test[:, :32])), ("x_test",)),
    Case("task-unknown", _train(data=_rows(DATA, task="ranking")), ("task",)),
    Case("model-output-width", _train(model=_mlp(out=7)), ("num_classes",)),
    Case("model-input-width", _train(model=_mlp(d=32)), ("inputs",)),
    Case(
        "ce-on-regression",
        _train(
            data=as_regression(DATA),
            model=_mlp(out=1),
            config=TrainConfig(loss="ce", batch_size=64, steps=1),
        ),
        ("loss",),
    ),  # fmt: skip
    Case(
        "input-scale-on-uint8",
        _train(data=_U8, config=TrainConfig(batch_size=64, steps=1, input_scale=0.5)),
        ("input_scale",),
    ),  # fmt: skip
    Case(
        "token-negative",
        _train(
            data=_BAD_TOKENS,
            config=TrainConfig(batch_size=8, steps=1),
            model=Transformer(9, num_layers=1, d_model=8, num_heads=2, rngs=nnx.Rngs(0)),
        ),
        ("token",),
    ),  # fmt: skip
    Case("log-every-zero", _train(log_every=0), ("log_every",)),
    Case("eval-size-one", _train(eval_size=1), ("eval_size",)),
    Case("metric-splits-str", _train(metric_splits="test"), ("metric_splits",)),
    Case("metric-splits-empty", _train(metric_splits=()), ("metric_splits",)),
    Case("metric-splits-unknown", _train(metric_splits=("val",)), ("metric_splits",)),
    Case("checkpoint-without-run-dir", _train(checkpoint_every=1), ("run_dir",)),
    Case("resume-without-run-dir", _train(resume=True), ("run_dir",)),
]

_TWO = [_mlp(), _mlp()]
TRAIN_MANY_CASES = [
    Case(
        "many-data-list", lambda: train_many(_TWO, [DATA, DATA], [CFG, CFG], [KEY, KEY]), ("data",)
    ),  # fmt: skip
    Case("many-lengths", lambda: train_many(_TWO, DATA, [CFG], [KEY, KEY]), ("configs",)),
    Case("many-empty", lambda: train_many([], DATA, [], []), ("models",)),
    Case("many-one-key", lambda: train_many(_TWO, DATA, [CFG, CFG], KEY), ("keys",)),
    Case("many-key-int", lambda: train_many(_TWO, DATA, [CFG, CFG], [0, 1]), ("keys",)),
    Case(
        "many-static-field",
        lambda: train_many(
            _TWO, DATA, [CFG, dataclasses.replace(CFG, optimizer="adam")], [KEY, KEY]
        ),
        ("optimizer",),
    ),  # fmt: skip
    Case(
        "many-lengths-differ",
        lambda: train_many(_TWO, DATA, [CFG, dataclasses.replace(CFG, steps=3)], [KEY, KEY]),
        ("steps",),
    ),
    Case(
        "many-config-none", lambda: train_many(_TWO, DATA, [CFG, None], [KEY, KEY]), ("configs",)
    ),  # fmt: skip
]

DATA_CASES = [
    Case("digits-int-dtype", lambda: load_digits(dtype=np.int32), ("dtype",)),
    Case("digits-bool-dtype", lambda: load_digits(dtype=bool), ("dtype",)),
    Case("digits-str-dtype", lambda: load_digits(dtype="pixels"), ("dtype",)),
    Case(
        "digits-float64",
        lambda: load_digits(dtype=np.float64),
        (),
        lambda d: d.x_train.dtype == np.float64 and d.x_train.max() == 1.0,
    ),  # fmt: skip
    Case("mnist5k-uint8-dtype", lambda: load("mnist5k", dtype=np.uint8), ("dtype",)),
    Case("load-unknown", lambda: load("cifar11"), ("dataset",)),
    Case("mnist5k-n-train-zero", lambda: load("mnist5k", n_train=0), ("n_train",)),
    Case("mnist5k-n-train-too-many", lambda: load("mnist5k", n_train=4001), ("n_train",)),
    Case("mnist5k-layout", lambda: load("mnist5k", layout="grid"), ("layout",)),
    Case(
        "fashion-int-dtype",
        lambda: load("fashion_mnist", data_dir="/nonexistent", dtype=np.int8),
        ("dtype",),
    ),  # fmt: skip
]

MODEL_CASES = [
    Case("get-model-unknown", lambda: get_model("resnet"), ("resnet",)),
    Case("mlp-zero-width", lambda: MLP(64, (0,), 10, rngs=nnx.Rngs(0)), ("hidden",)),
    Case("mlp-zero-out", lambda: MLP(64, (8,), 0, rngs=nnx.Rngs(0)), ("out",)),
    Case("mlp-wrong-input", lambda: _mlp()(np.zeros((2, 32), np.float32)), ("input",)),
    Case("transformer-zero-vocab", lambda: Transformer(0, rngs=nnx.Rngs(0)), ("vocab_size",)),
    Case(
        "transformer-heads",
        lambda: Transformer(10, d_model=10, num_heads=4, rngs=nnx.Rngs(0)),
        ("num_heads",),
    ),  # fmt: skip
    Case("transformer-norm", lambda: Transformer(10, norm="mid", rngs=nnx.Rngs(0)), ("norm",)),
    Case(
        "transformer-token-too-big",
        lambda: Transformer(9, num_layers=1, d_model=8, num_heads=2, rngs=nnx.Rngs(0))(
            np.full((1, 4), 9)
        ),
        ("token",),
    ),  # fmt: skip
    Case(
        "transformer-float-tokens",
        lambda: Transformer(9, num_layers=1, d_model=8, num_heads=2, rngs=nnx.Rngs(0))(
            np.zeros((1, 4))
        ),
        ("token",),
    ),  # fmt: skip
]

KNOB_CASES = [
    Case("scale-weights-zero", lambda: scale_weights(_mlp(), 0.0), ("scale",)),
    Case("scale-weights-nan", lambda: scale_weights(_mlp(), NAN), ("scale",)),
    Case("balance-layers-negative", lambda: balance_layers(_mlp(), -1.0), ("alpha",)),
    Case("shuffle-fraction-above-one", lambda: shuffle_labels(DATA, 1.5), ("fraction",)),
    Case("shuffle-fraction-nan", lambda: shuffle_labels(DATA, NAN), ("fraction",)),
    Case(
        "encode-labels-regression", lambda: encode_labels(as_regression(DATA)), ("classification",)
    ),
    Case("as-regression-twice", lambda: as_regression(as_regression(DATA)), ("classification",)),
]

CASES = CONFIG_CASES + TRAIN_CASES + TRAIN_MANY_CASES + DATA_CASES + MODEL_CASES + KNOB_CASES


def outcome(case: Case) -> str:
    """``'right'``, ``'clear'``, ``'unclear'`` (another exception, or one not naming the argument)
    or ``'silent'`` (no error where one was due, or a wrong answer)."""
    try:
        value = case.call()
    except (ValueError, TypeError) as e:
        if not case.names:
            return "unclear"
        return "clear" if any(n in str(e) for n in case.names) else "unclear"
    except Exception:  # noqa: BLE001 — any other exception is an unclear answer
        return "unclear"
    if case.names:
        return "silent"
    return "right" if case.check(value) else "silent"


def test_the_matrix_covers_every_public_function():
    public = {"train", "train_many", "hparams", "load_digits", "get_model", "scale_weights",
              "balance_layers", "shuffle_labels", "encode_labels", "as_regression"}  # fmt: skip
    assert public <= set(nets.__all__)
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case):
    got = outcome(case)
    if got in ("unclear", "silent"):
        try:
            case.call()
        except Exception as e:  # noqa: BLE001
            detail = f"{type(e).__name__}: {e}"
        else:
            detail = "returned without an error"
        pytest.fail(f"{case.id}: {got} ({detail}); expected a message naming {case.names}")
    assert got == ("right" if not case.names else "clear")
