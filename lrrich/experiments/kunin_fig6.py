"""K Fig 6(a–c): upstream initialisations change activation patterns more, smooth CNN filters
and lower the sample complexity of the Random Hierarchy Model.

The knob is K's layer balance α (K App. D.3, :func:`nets.balance_layers`): the first layer ÷α,
the readout ×α, the function at initialisation unchanged; α > 1 is *upstream* (the first layer
learns fastest), α = 1 balanced (standard initialisation), α < 1 *downstream*. Three panels:

* (a) LeNet-5 on real MNIST digits: the normalised Hamming distance between the binarised
  hidden ReLU activations (every conv and dense unit) at initialisation and after training, on a
  fixed probe of training images (K App. D.3; :func:`metrics.activation_hamming_distance`).
* (b) the same networks' first-layer 5×5 filters: K Eq 128–129's smoothness
  ‖w/‖w‖ ∗ Δ‖² (smaller is smoother; :func:`metrics.filter_smoothness`), averaged over filters.
* (c) a 3-hidden-layer ReLU MLP (width 64, no biases) on K's RHM (L = 3, n_c = 8, m = 4, s = 2,
  v = 8; :mod:`nets.data.hierarchy`): test accuracy against the number of training samples;
  the sample-complexity summary is the mean test accuracy over the log-spaced sizes (higher =
  fewer samples needed) and the size n* where the accuracy first reaches ``rhm_threshold``.

Each panel is one claim (``CLAIMS``): K's ordering upstream > balanced > downstream (Hamming
distance, RHM accuracy; for smoothness upstream < balanced < downstream) over the seeds.

Command: ``lrrich run kunin-fig6`` (α = 0.1, 1, 10; 3 seeds; LeNet-5 on the 4,000 mnist5k
digits for 4 Adam epochs; RHM sizes 1,000–8,000, 1,200 SGD steps each). Runtime: ``lrrich
list`` shows the recorded run's wall time and machine. ``--scale paper`` is K's
setting (LeNet-5 on full MNIST for 500 epochs at lr 1e-4, batch 512; RHM α ∈ {0.03 … 10}, sizes
up to 64,000, 6 seeds) for an accelerator.
Expected (seeds 0 / 1 / 2, α = 10 / 1 / 0.1): Hamming distance 0.49 / 0.34 / 0.32 upstream,
0.16 / 0.16 / 0.13 balanced, 0.09 / 0.09 / 0.10 downstream; smoothness 0.37 / 0.35 / 0.32
upstream, 1.48 / 1.33 / 1.22 balanced, 1.97 / 1.82 / 1.61 downstream (1.83 at init); RHM mean
test accuracy 0.55 / 0.62 / 0.74 upstream, 0.52 / 0.60 / 0.71 balanced, 0.33 / 0.37 / 0.55
downstream (both orderings in every seed). Findings, K's two α
conventions and the RHM sampling fix: ``docs/findings/kunin_fig6.md``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path

import jax
import numpy as np

from lrrich.claims import All, Claim, Less, measured
from lrrich.experiments import _data, _presets

NAME = "kunin-fig6"
DESCRIPTION = (
    "K Fig 6(a-c): layer balance alpha vs activation-pattern change (LeNet-5), first-layer "
    "filter smoothness, RHM sample complexity"
)
PAPER = {
    "hamming": "upstream > balanced > downstream",
    "smoothness": "upstream < balanced < downstream (smoother)",
    "rhm": "upstream needs fewer samples",
}


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """Settings of the three panels (K App. D.3, 'Kernel Distance', 'Gabor Filters', 'Random
    Hierarchy Model').

    Paper: (a) LeNet-5 with ReLU and max-pooling on MNIST, He initialisation, first layer ÷α and
    last layer ×α, 500 epochs at lr 1e-4, batch 512, Hamming distance on 10 % of MNIST, 8 runs;
    (b) a small ResNet on CIFAR-10 (DAWN benchmark, no weight decay), the convolution filters
    ÷α, K Eq 128 smoothness; (c) an MLP of width 64 with three hidden layers, no biases, on the
    RHM L = 3, n_c = 8, m = 4, s = 2, v = 8, SGD momentum 0.9, batch 128, 250 epochs, cosine
    schedule, CE loss, α ∈ {0.03, 0.1, 0.3, 1, 3, 10}, 6 seeds, test on 20,000 held-out samples.
    **Decisions / deviations at small scale:** (a) and (b) are the *same* LeNet-5 runs on the
    4,000 mnist5k digits (real MNIST; PyTorch's default init, the network's own, instead of He),
    Adam (K names a learning rate only; 1e-4 suggests Adam) at lr 1e-3 for 8 epochs of batch 128,
    the Hamming distance on 400 training images (10 %), the filters of LeNet-5's first layer (6
    filters of 5×5) for (b) with K's Δ as printed (Eq 129); (c) the paper's RHM and MLP with
    PyTorch's default init, lr 0.05 (K's 6.4 belongs to Petrini et al.'s mean-field scaling),
    24 epochs, 5 training sizes and 4,000 test samples, disjoint from the training samples.
    Every seed draws its own network, data order and (c) RHM rules and samples.

    The LeNet-5 training fields are :class:`~lrrich.experiments._presets.ImageTraining`'s
    (``optimizer``, ``lr``, ``batch_size``, ``epochs``, ``dataset``, ``n_train``); ``seeds`` is
    :class:`~lrrich.experiments._presets.Seeds`'.

    Attributes:
      alphas: layer balances α (first layer ÷α, readout ×α); must contain 1 and values on both
        sides of it.
      probe_size: training images on which activation patterns are compared (panel a).
      rhm_classes, rhm_m, rhm_s, rhm_v, rhm_levels: the RHM's n_c, m, s, v, L.
      rhm_train_sizes: training-set sizes (increasing; each seed's sets are nested prefixes).
      rhm_test: held-out test samples per seed.
      rhm_width, rhm_depth: the MLP's hidden width and number of hidden layers.
      rhm_lr, rhm_momentum, rhm_batch: its SGD (cosine schedule, CE loss).
      rhm_steps: SGD steps per run, the same at every training size (K trains 250 epochs).
      rhm_threshold: test accuracy that defines the sample complexity n*.
    """

    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.0
    epochs: int = 4
    alphas: tuple[float, ...] = (0.1, 1.0, 10.0)
    probe_size: int = 400
    rhm_classes: int = 8
    rhm_m: int = 4
    rhm_s: int = 2
    rhm_v: int = 8
    rhm_levels: int = 3
    rhm_train_sizes: tuple[int, ...] = (1000, 2000, 4000, 8000)
    rhm_test: int = 4000
    rhm_width: int = 64
    rhm_depth: int = 3
    rhm_lr: float = 0.2
    rhm_momentum: float = 0.9
    rhm_batch: int = 128
    rhm_steps: int = 1200
    rhm_threshold: float = 0.5


SCALES = {
    "small": Config(),
    "paper": Config(
        dataset="mnist",
        lr=1e-4,
        batch_size=512,
        epochs=500,
        probe_size=6000,
        alphas=(0.03, 0.1, 0.3, 1.0, 3.0, 10.0),
        rhm_train_sizes=(2000, 4000, 8000, 16000, 32000, 64000),
        rhm_test=20000,
        rhm_steps=250 * 64000 // 128,
        seeds=6,
    ),
}


def run(config: Config, run_dir: Path) -> dict:
    """Panels (a, b): one LeNet-5 per (seed, α); panel (c): one MLP per (seed, α, size).

    Returns :func:`collect`'s results: the summary, the panels' data and the per-seed record
    of the claims (``measured``)."""
    alphas = np.asarray(config.alphas, float)
    if alphas.size < 3 or np.any(alphas <= 0) or 1.0 not in alphas:
        raise ValueError(f"alphas need 1 and values on both sides of it, got {config.alphas}")
    if not (alphas.min() < 1 < alphas.max()):
        raise ValueError(f"alphas need values below and above 1, got {config.alphas}")
    sizes = np.asarray(config.rhm_train_sizes)
    if sizes.size < 2 or np.any(np.diff(sizes) <= 0) or sizes[0] < 1:
        raise ValueError(
            f"rhm_train_sizes must increase and hold ≥ 2 sizes, got {config.rhm_train_sizes}"
        )
    seeds = _presets.seed_list(config)
    cnn = _cnn_runs(config, seeds)
    rhm = [_rhm_seed(config, seed) for seed in seeds]
    return collect(config, seeds, cnn, rhm)


def collect(config: Config, seeds: list[int], cnn: list[dict], rhm: list[dict]) -> dict:
    """The results of a run from its per-seed measurements: summary (seed means), the panels'
    data and the per-seed record of the claims.

    Args:
      config: the run's config.
      seeds: the seeds, in order.
      cnn: per seed, panels (a, b): ``dataset`` (text) and per-α lists ``hamming``,
        ``smoothness``, ``smoothness_init``, ``smoothness_zero_sum``, ``test_acc``,
        ``train_acc``, ``filters``.
      rhm: per seed, panel (c): ``test_acc`` and ``train_acc`` (n_alpha, n_sizes), ``num_data``.
    """
    sizes = np.asarray(config.rhm_train_sizes)
    hamming = np.array([c["hamming"] for c in cnn])  # (n_seeds, n_alpha)
    smooth = np.array([c["smoothness"] for c in cnn])
    smooth0 = np.array([c["smoothness_init"] for c in cnn])
    acc = np.array([r["test_acc"] for r in rhm])  # (n_seeds, n_alpha, n_sizes)
    auc = acc.mean(axis=2)
    n_star = np.array([[_n_star(sizes, a, config.rhm_threshold) for a in s] for s in acc])
    summary = {"seeds": len(seeds)}
    for i, a in enumerate(config.alphas):
        summary[f"hamming_alpha={a:g}"] = float(hamming[:, i].mean())
        summary[f"smoothness_alpha={a:g}"] = float(smooth[:, i].mean())
        summary[f"smoothness_zero_sum_laplacian_alpha={a:g}"] = float(
            np.mean([c["smoothness_zero_sum"][i] for c in cnn])
        )
        summary[f"cnn_test_acc_alpha={a:g}"] = float(np.mean([c["test_acc"][i] for c in cnn]))
        summary[f"rhm_mean_test_acc_alpha={a:g}"] = float(auc[:, i].mean())
        reached = n_star[:, i][np.isfinite(n_star[:, i])]
        summary[f"rhm_n_star_alpha={a:g}"] = float(reached.mean()) if reached.size else math.nan
        summary[f"rhm_seeds_reaching_threshold_alpha={a:g}"] = int(reached.size)
    summary["smoothness_init"] = float(smooth0.mean())
    return {
        "summary": summary,
        "alphas": list(config.alphas),
        "seeds": seeds,
        "cnn": cnn,
        "rhm": {
            "train_sizes": sizes.tolist(),
            "test_acc": acc.tolist(),  # (n_seeds, n_alpha, n_sizes)
            "train_acc": [r["train_acc"] for r in rhm],
            "n_star": n_star.tolist(),
            "num_data": rhm[0]["num_data"],
        },
        "measured": _measured(hamming, smooth, auc, config, cnn[0], seeds),
    }


def _cnn_runs(config: Config, seeds: list[int]) -> list[dict]:
    """Panels (a, b): LeNet-5 at every (seed, α), one stacked program; per seed its measures.

    Every α of a seed starts from the same initialisation, rebalanced; the training images are
    the same for every seed (the whole ``n_train`` subset), the data order is the seed's.
    """
    import metrics
    from nets import balance_layers, train_many

    data = _data.load_data(config, "lenet5")
    models0, keys = [], []
    for seed in seeds:
        base = _data.build_model("lenet5", data, width=config.width, seed=seed)
        models0 += [balance_layers(base, float(a), first="conv1") for a in config.alphas]
        keys += [jax.random.key(seed)] * len(config.alphas)
    tc = _presets.train_config(config, len(data.x_train))
    models, hists = train_many(
        models0, data, [tc] * len(models0), keys, metrics={}, log_every=10**9
    )
    order = np.random.default_rng(config.seed).permutation(len(data.x_train))
    probe = data.x_train[order[: config.probe_size]]
    out = []
    for s in range(len(seeds)):
        res = {"dataset": _data.dataset_text(data), "n_train": len(data.x_train)}
        res.update(hamming=[], smoothness=[])
        res.update(smoothness_init=[], smoothness_zero_sum=[], test_acc=[], train_acc=[])
        res["filters"] = []
        at = slice(s * len(config.alphas), (s + 1) * len(config.alphas))
        for m0, m, h in zip(models0[at], models[at], hists[at], strict=True):
            pre0, pre = hidden_preactivations(m0, probe), hidden_preactivations(m, probe)
            res["hamming"].append(float(metrics.activation_hamming_distance(pre0, pre)))
            kernel = np.asarray(m.conv1.kernel[...])
            res["smoothness"].append(float(np.mean(metrics.filter_smoothness(kernel))))
            zero_sum = metrics.filter_smoothness(kernel, laplacian=metrics.ZERO_SUM_LAPLACIAN)
            res["smoothness_zero_sum"].append(float(np.mean(zero_sum)))
            k0 = np.asarray(m0.conv1.kernel[...])
            res["smoothness_init"].append(float(np.mean(metrics.filter_smoothness(k0))))
            res["filters"].append(kernel[:, :, 0, :].transpose(2, 0, 1).tolist())  # (6, 5, 5)
            res["test_acc"].append(float(h.final["test_acc"]))
            res["train_acc"].append(float(h.final["train_acc"]))
        out.append(res)
    return out


def hidden_preactivations(model, x: np.ndarray) -> list[jax.Array]:
    """LeNet-5's hidden pre-activations on images x (n, 28, 28, 1): conv1 (n, 28, 28, 6) before
    pooling, conv2 (n, 10, 10, 16), fc1 (n, 120), fc2 (n, 84) — every ReLU unit of the network
    (K App. D.3 binarises 'the hidden activation with 1 representing an active neuron')."""
    return _jitted_preactivations()(model, jax.numpy.asarray(x))


def _lenet_preactivations(model, x: jax.Array) -> list[jax.Array]:
    from nets.models.layers import pool2d

    z1 = model.conv1(x)
    z2 = model.conv2(pool2d(jax.nn.relu(z1), 2, model.pool))
    h2 = pool2d(jax.nn.relu(z2), 2, model.pool).reshape(x.shape[0], -1)
    z3 = model.fc1(h2)
    z4 = model.fc2(jax.nn.relu(z3))
    return [z1, z2, z3, z4]


@functools.cache
def _jitted_preactivations():
    from flax import nnx  # imported on first use: `lrrich list` does not load Flax

    return nnx.jit(_lenet_preactivations)


def _rhm_seed(config: Config, seed: int) -> dict:
    """One seed of panel (c): this seed's RHM; an MLP per (α, training size), stacked over α."""
    from flax import nnx

    from nets import MLP, TrainConfig, balance_layers, train_many
    from nets.data.hierarchy import num_data, random_hierarchy

    sizes = dict(
        num_classes=config.rhm_classes,
        m=config.rhm_m,
        s=config.rhm_s,
        v=config.rhm_v,
        levels=config.rhm_levels,
    )
    full = random_hierarchy(max(config.rhm_train_sizes), config.rhm_test, **sizes, seed=seed)
    base = MLP(
        full.x_train.shape[1],
        (config.rhm_width,) * config.rhm_depth,
        config.rhm_classes,
        activation="relu",
        bias=False,
        rngs=nnx.Rngs(seed),
    )
    models0 = [balance_layers(base, float(a)) for a in config.alphas]
    test_acc = np.zeros((len(config.alphas), len(config.rhm_train_sizes)))
    train_acc = np.zeros_like(test_acc)
    for j, n in enumerate(config.rhm_train_sizes):
        data = full._replace(x_train=full.x_train[:n], y_train=full.y_train[:n])
        tc = TrainConfig(
            loss="ce",
            optimizer="sgd",
            lr=config.rhm_lr,
            momentum=config.rhm_momentum,
            schedule="cosine",
            batch_size=min(config.rhm_batch, n),
            steps=config.rhm_steps,
        )
        _, hists = train_many(
            models0,
            data,
            [tc] * len(models0),
            [jax.random.key(seed)] * len(models0),
            metrics={},
            log_every=10**9,
            eval_size=config.rhm_test,
        )
        for i, h in enumerate(hists):
            test_acc[i, j] = h.final["test_acc"]
            train_acc[i, j] = h.final["train_acc"]
    return {
        "test_acc": test_acc.tolist(),
        "train_acc": train_acc.tolist(),
        "num_data": num_data(
            num_classes=config.rhm_classes, m=config.rhm_m, s=config.rhm_s, levels=config.rhm_levels
        ),
    }


def _n_star(sizes: np.ndarray, acc: np.ndarray, threshold: float) -> float:
    """The training size where the test accuracy first reaches ``threshold``, interpolated
    linearly in log n between the grid sizes around the crossing (NaN if never reached)."""
    hit = np.flatnonzero(np.asarray(acc) >= threshold)
    if not hit.size:
        return math.nan
    k = int(hit[0])
    if k == 0:
        return float(sizes[0])
    a0, a1 = acc[k - 1], acc[k]
    t = (threshold - a0) / (a1 - a0)
    return float(np.exp(np.log(sizes[k - 1]) + t * (np.log(sizes[k]) - np.log(sizes[k - 1]))))


_QUOTES = {
    "hamming": "K Fig 6(a) / §5: an upstream initialization 'drives feature learning through "
    "changing activation patterns'; 'Adjusting the initialization variance of the first and last "
    "layers can amplify or diminish this movement' (Hamming distance, K App. D.3)",
    "smoothness": "K Fig 6(b) / §5: an upstream initialization 'promotes interpretability of "
    "early layers in CNNs'; 'adjusting the learning speed of the first layer can enhance or "
    "degrade this alignment' (with edge detectors; smoothness K Eq 128, smaller = smoother)",
    "rhm": "K Fig 6(c) / §5: an upstream initialization 'reduces the sample complexity of "
    "learning hierarchical data'; 'modifying the initialization geometry can decrease or "
    "increase the sample complexity of learning' (Random Hierarchy Model)",
}
CLAIMS = (
    Claim(
        "hamming",
        "K Fig 6(a)",
        _QUOTES["hamming"],
        "Hamming distance of the ReLU patterns init → end: upstream > balanced > downstream",
        "train",
        All((Less("hamming_balanced", "hamming_up"), Less("hamming_down", "hamming_balanced"))),
        paper="upstream > balanced > downstream",
        note="read on a probe of training images, as K App. D.3 measures it",
    ),
    Claim(
        "smoothness",
        "K Fig 6(b)",
        _QUOTES["smoothness"],
        "first-layer filter smoothness (K Eq 128, smaller = smoother): upstream < balanced < "
        "downstream",
        "train",
        All(
            (
                Less("smoothness_up", "smoothness_balanced"),
                Less("smoothness_balanced", "smoothness_down"),
            )
        ),
        paper="upstream smoothest",
        note="a property of the weights trained on the training images (no data is read)",
    ),
    Claim(
        "rhm",
        "K Fig 6(c)",
        _QUOTES["rhm"],
        "RHM test accuracy, mean over the training sizes: upstream > balanced > downstream",
        "test",
        All((Less("rhm_acc_balanced", "rhm_acc_up"), Less("rhm_acc_down", "rhm_acc_balanced"))),
        paper="upstream needs fewer samples",
    ),
)
"""K Fig 6's three orderings over the α grid: upstream is the largest α, balanced α = 1,
downstream the smallest α. Panel (a) is about the training dynamics (K measures the patterns on
training images), panel (b) about the weights."""


def _measured(
    hamming: np.ndarray, smooth: np.ndarray, auc: np.ndarray, config: Config, cnn: dict, seeds
) -> dict:
    """The per-seed record the claims read; ``hamming``, ``smooth``, ``auc``: (n_seeds,
    n_alpha) Hamming distance, mean first-layer smoothness, RHM mean test accuracy."""
    alphas = list(config.alphas)
    cols = {"up": int(np.argmax(alphas)), "balanced": alphas.index(1.0)}
    cols["down"] = int(np.argmin(alphas))
    values = {
        f"{name}_{side}": v[:, i]
        for name, v in (("hamming", hamming), ("smoothness", smooth), ("rhm_acc", auc))
        for side, i in cols.items()
    }
    deviations = [
        "panel (b) reads LeNet-5's first-layer filters after the panel (a) training on MNIST "
        "digits; K used a small ResNet on CIFAR-10 (DAWN benchmark) with every convolution's "
        "filters ÷α and no weight decay"
    ]
    n_train = cnn.get("n_train")
    if n_train:
        deviations += [
            f"LeNet-5: {d}" for d in _presets.partial_batch_deviation(n_train, config.batch_size)
        ]
    dropped = [n for n in config.rhm_train_sizes if n % min(config.rhm_batch, n)]
    if dropped:
        deviations.append(
            "RHM: the last partial batch of each epoch is dropped where the batch does not "
            f"divide n (n = {', '.join(f'{n:,}' for n in dropped)})"
        )
    return measured(
        values,
        seeds=seeds,
        dataset=f"{cnn['dataset']}; RHM L={config.rhm_levels}, n_c={config.rhm_classes}, "
        f"m={config.rhm_m}, s={config.rhm_s}, v={config.rhm_v}",
        scale=f"α {alphas[cols['up']]:g} / 1 / {alphas[cols['down']]:g}; LeNet-5 "
        f"{config.optimizer} lr {config.lr:g}, {config.epochs} epochs; RHM MLP "
        f"{config.rhm_width}x{config.rhm_depth}, {config.rhm_steps} SGD steps",
        deviations=deviations,
    )


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``kunin_fig6.png``: (a) Hamming distance, (b) smoothness and the learned first-layer
    filters, (c) RHM test accuracy against the training-set size, per α (seed mean ± std)."""
    import matplotlib.pyplot as plt

    from lrrich.io import save_figure

    alphas = np.asarray(results["alphas"])
    cnn = results["cnn"]
    # blue downstream, black balanced, red upstream
    colors = ["tab:blue" if a < 1 else "k" if a == 1 else "tab:red" for a in alphas]
    fig = plt.figure(figsize=(15, 4.2), layout="constrained")
    grid = fig.add_gridspec(1, 4, width_ratios=(1, 1, 1.1, 1.2))
    ax_a, ax_b = fig.add_subplot(grid[0]), fig.add_subplot(grid[1])
    for ax, key, label in (
        (ax_a, "hamming", "Hamming distance (init → end)"),
        (ax_b, "smoothness", "filter smoothness (K Eq 128) ↓ smoother"),
    ):
        vals = np.array([c[key] for c in cnn])
        for v in vals:
            ax.plot(alphas, v, "o", color="0.7", ms=3)
        ax.errorbar(alphas, vals.mean(0), yerr=vals.std(0), fmt="o-", color="k", capsize=3)
        ax.axvline(1.0, ls=":", color="0.5")
        ax.set(xscale="log", xlabel="α (first layer ÷α, readout ×α)", title=label)
    ax_b.axhline(np.mean([c["smoothness_init"] for c in cnn]), ls="--", color="0.5", lw=1)
    ax_b.text(alphas.min(), np.mean([c["smoothness_init"] for c in cnn]), "init", fontsize=7)
    ax_a.set_title("(a) " + ax_a.get_title())
    ax_b.set_title("(b) " + ax_b.get_title())

    # learned first-layer filters of seed 0, one row per α (upstream on top)
    sub = grid[2].subgridspec(len(alphas), 6, wspace=0.05, hspace=0.1)
    order = np.argsort(-alphas)
    for r, i in enumerate(order):
        filters = np.asarray(cnn[0]["filters"][i])
        for k in range(min(6, len(filters))):
            ax = fig.add_subplot(sub[r, k])
            f = filters[k]
            ax.imshow(f, cmap="gray", vmin=-np.abs(f).max(), vmax=np.abs(f).max())
            ax.set_xticks([])
            ax.set_yticks([])
            if k == 0:
                ax.set_ylabel(f"α={alphas[i]:g}", fontsize=7)
            if r == 0 and k == 0:
                ax.set_title("conv1 filters, seed 0", fontsize=8, loc="left")

    ax_c = fig.add_subplot(grid[3])
    rhm = results["rhm"]
    sizes, acc = np.asarray(rhm["train_sizes"]), np.asarray(rhm["test_acc"])
    for i, a in enumerate(alphas):
        ax_c.errorbar(sizes, acc[:, i].mean(0), yerr=acc[:, i].std(0), fmt="o-",
                      color=colors[i], capsize=3, label=f"α={a:g}")  # fmt: skip
    ax_c.set(xscale="log", xlabel="training samples", ylabel="test accuracy",
             title=f"(c) RHM (P_max = {rhm['num_data']:,})", ylim=(0, 1.02))  # fmt: skip
    ax_c.legend(fontsize=7)
    return [save_figure(fig, run_dir / "kunin_fig6.png")]
