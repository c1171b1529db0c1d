"""Lazy/rich knobs that act on a model's parameters or on a dataset (applied before training).

Knobs acting during training (target/input/output scale, target downscaling, last-layer-only)
are fields of :class:`nets.config.TrainConfig`; the ones here change the initial parameters or the
data once:

* :func:`scale_weights` — weight scale w (thesis Table 6.1: θ₀ → w θ₀).
* :func:`balance_layers` — layer balance α (Kunin et al. App. D.3: first layer ÷α, readout ×α;
  the function at initialisation is unchanged for positively homogeneous networks).
* :func:`shuffle_labels` — a fraction of training labels permuted among themselves.
* :func:`encode_labels` — D App. F.4.1: one-hot labels written into the first pixels,
  true labels at train time, random labels at test time.
* :func:`as_regression` — MNIST as scalar regression (target = the digit value).
"""

from __future__ import annotations

import numpy as np
from flax import nnx

from nets.data.base import Dataset

_HOMOGENEOUS = ("relu", "leaky_relu", "linear")


def _map_params(model: nnx.Module, fn) -> nnx.Module:
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    flat = nnx.to_flat_state(params)
    new = nnx.from_flat_state(
        [(path, var.replace(fn(path, var.get_value()))) for path, var in flat]
    )
    return nnx.merge(graphdef, new, rest)


def scale_weights(model: nnx.Module, scale: float) -> nnx.Module:
    r"""Multiply every parameter by the weight scale w: :math:`\theta_0 \to w\,\theta_0` (T Table 6.1).

    Args:
      model: an NNX model (not modified).
      scale: w > 0.

    Returns:
      a new model with scaled parameters (kernels and biases).
    """
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    return _map_params(model, lambda path, v: v * scale)


def _path(spec: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in spec.split("."))


def balance_layers(model: nnx.Module, alpha: float, *, first: str = "layers.0") -> nnx.Module:
    r"""Layer balance α (Kunin et al. 2024, App. D.3): first layer ÷α, readout weights ×α.

    For a positively homogeneous network (ReLU, leaky ReLU, linear; max-pooling allowed)
    :math:`f(x) = A\,\sigma(W_L\cdots\sigma(W_1x+b_1)\cdots+b_L)+a` the map
    :math:`(W_1, b_1) \to (W_1, b_1)/\alpha`, :math:`b_l \to b_l/\alpha` (l ≥ 2),
    :math:`A \to \alpha A` leaves f unchanged: every hidden activation is divided by α and the
    readout multiplies it back. The hidden biases must be divided too when they exist, otherwise
    the map is not function-preserving for depth > 2. α > 1 is *upstream* (first layer learns
    faster, δ > 0), α < 1 downstream.

    Args:
      model: an NNX model with a readout attribute ``head`` (not modified).
      alpha: α > 0.
      first: dotted path of the first layer, ``'layers.0'`` for :class:`nets.MLP`.

    Returns:
      a new model with rebalanced parameters.
    """
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    act = getattr(model, "activation", None)
    if isinstance(act, str) and act not in _HOMOGENEOUS:
        raise ValueError(
            f"balance_layers keeps the function only for homogeneous activations {_HOMOGENEOUS}; "
            f"the model uses {act!r}"
        )
    first_path = _path(first)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    paths = [p for p, _ in nnx.to_flat_state(params)]
    if not any(p[: len(first_path)] == first_path for p in paths):
        raise ValueError(f"first={first!r} names no parameters; model parameters: {paths}")

    def fn(path, v):
        if path[: len(first_path)] == first_path:
            return v / alpha
        if path[0] == "head":
            return v * alpha if path[-1] == "kernel" else v
        return v / alpha if path[-1] == "bias" else v

    return _map_params(model, fn)


def shuffle_labels(data: Dataset, fraction: float, *, seed: int = 0) -> Dataset:
    """Permute the training labels of a random ``fraction`` of examples among themselves.

    The class histogram is unchanged; the test set is untouched.

    Args:
      data: a classification dataset.
      fraction: share of training examples whose labels are permuted, in [0, 1].
      seed: NumPy seed of the choice and the permutation.

    Returns:
      a new :class:`Dataset`.
    """
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    rng = np.random.default_rng(seed)
    y = data.y_train.copy()
    idx = rng.choice(len(y), size=round(fraction * len(y)), replace=False)
    y[idx] = y[rng.permutation(idx)]
    return data._replace(y_train=y)


def encode_labels(data: Dataset, *, value: float = 1.0, seed: int = 0) -> Dataset:
    """Encoded-label images (D App. F.4.1): one-hot labels in the first C pixels.

    Training images carry their true label, test images a uniformly random label, so a network
    can fit the training set through the code alone yet must read the image to generalise.

    Args:
      data: a classification dataset with at least C input entries per example.
      value: pixel value of the "hot" entry (others are set to 0).
      seed: NumPy seed of the random test labels.

    Returns:
      a new :class:`Dataset` (shapes unchanged).
    """
    if data.task != "classification" or not np.issubdtype(
        np.asarray(data.y_train).dtype, np.integer
    ):
        raise ValueError(
            f"encode_labels writes one-hot class labels into the inputs, so it needs a "
            f"classification dataset with int labels; got task={data.task!r} "
            f"(y_train {np.asarray(data.y_train).dtype}); encode the labels before as_regression"
        )
    c = data.num_classes
    if int(np.prod(data.input_shape)) < c:
        raise ValueError(f"inputs of shape {data.input_shape} have fewer than C={c} entries")
    rng = np.random.default_rng(seed)

    def write(x, labels):
        flat = x.reshape(len(x), -1).copy()
        flat[:, :c] = 0
        flat[np.arange(len(x)), labels] = value
        return flat.reshape(x.shape)

    fake = rng.integers(0, c, size=len(data.y_test))
    return data._replace(x_train=write(data.x_train, data.y_train), x_test=write(data.x_test, fake))


def as_regression(data: Dataset) -> Dataset:
    """The classification labels as a scalar regression target y = label (float, shape (n,))."""
    if data.task != "classification":
        raise ValueError("as_regression needs a classification dataset")
    dt = data.x_train.dtype if np.issubdtype(data.x_train.dtype, np.floating) else np.float32
    return data._replace(
        y_train=data.y_train.astype(dt),
        y_test=data.y_test.astype(dt),
        num_classes=1,
        task="regression",
    )
