"""Inputs that used to train silently wrong, or fail deep in a compiled program, are refused
with one sentence before anything compiles (integer pixels, token ids, output width, huge inputs)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nets import MLP, TrainConfig, TrainingDiverged, Transformer, load_digits, train, train_many
from nets.data import load, modular_division

KW = dict(key=jax.random.key(0), metrics={}, progress=False)
CFG = TrainConfig(batch_size=64, steps=2)


@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    return d._replace(x_train=d.x_train[:128], y_train=d.y_train[:128])


def _mlp(out=10):
    return MLP(64, (8,), out, rngs=nnx.Rngs(0))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, bool, "int64"])
def test_image_loaders_refuse_integer_dtypes(dtype):
    """Pixels in [0, 1] cast to an integer dtype would be 0/1; the loaders say so."""
    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        load_digits(dtype=dtype)
    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        load("mnist5k", dtype=dtype)
    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        load("fashion_mnist", data_dir="/nonexistent", dtype=dtype)
    assert load_digits(dtype=np.float64).x_train.dtype == np.float64


def test_input_scale_with_integer_images_is_refused(digits):
    """input_scale scales float inputs only: with uint8 pixels it used to be ignored."""
    u8 = digits._replace(
        x_train=np.round(digits.x_train * 16).astype(np.uint8),
        x_test=np.round(digits.x_test * 16).astype(np.uint8),
    )
    with pytest.raises(ValueError, match=r"input_scale=0\.5 .*scales float inputs only.*uint8"):
        train(_mlp(), u8, TrainConfig(batch_size=64, steps=2, input_scale=0.5), **KW)
    with pytest.raises(ValueError, match=r"input_scale=0\.5 \(configs\[1\]\)"):
        train_many([_mlp(), _mlp()], u8, [CFG, TrainConfig(batch_size=64, steps=2, input_scale=0.5)],
                   [jax.random.key(0)] * 2, metrics={})  # fmt: skip
    train(_mlp(), u8, CFG, **KW)  # input_scale = 1 trains on integer pixels as before


def test_token_ids_outside_the_vocabulary_are_refused():
    data = modular_division(p=7, train_fraction=0.5)
    model = Transformer(9, num_layers=1, d_model=8, num_heads=2, rngs=nnx.Rngs(0))
    for bad in (-1, 9):
        x = data.x_train.copy()
        x[3, 0] = bad
        with pytest.raises(ValueError, match=r"x_train holds token ids in \[.*vocabulary \[0, 9\)"):
            train(model, data._replace(x_train=x), TrainConfig(batch_size=8, steps=1), **KW)
        with pytest.raises(ValueError, match=r"token ids must lie in \[0, 9\)"):
            model(jnp.asarray(x[:4]))  # eagerly: refused
        logits = jax.jit(lambda t: model(t))(jnp.asarray(x[:4]))  # noqa: B023
        assert np.isnan(logits[3]).all() and np.isfinite(logits[:3]).all()  # under jit: NaN


def test_model_output_width_must_match_num_classes(digits):
    with pytest.raises(ValueError, match="model answers 7 outputs per example but the dataset"):
        train(_mlp(7), digits, CFG, **KW)
    with pytest.raises(ValueError, match=r"cannot read inputs of shape \(64,\)"):
        train(MLP(32, (8,), 10, rngs=nnx.Rngs(0)), digits, CFG, **KW)


def test_train_many_with_a_list_of_datasets_says_one_dataset(digits):
    with pytest.raises(TypeError, match="data must be a nets.Dataset.*call once per dataset"):
        train_many([_mlp(), _mlp()], [digits, digits], [CFG, CFG], [jax.random.key(0)] * 2)


def test_huge_inputs_name_the_inputs_not_the_learning_rate(digits):
    huge = digits._replace(x_train=digits.x_train * 1e30, x_test=digits.x_test * 1e30)
    with pytest.raises(TrainingDiverged, match="at step 0, before any update.*inputs are huge"):
        train(_mlp(), huge, CFG, **KW)


def test_encode_labels_needs_a_classification_dataset(digits):
    from nets import as_regression, encode_labels

    with pytest.raises(ValueError, match="needs a classification dataset.*task='regression'"):
        encode_labels(as_regression(digits))
