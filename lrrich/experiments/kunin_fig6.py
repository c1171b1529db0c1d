"""K Fig 6(a–c): upstream initialisations change activation patterns more, smooth CNN filters
and lower the sample complexity of the Random Hierarchy Model.

The knob is K's layer balance α (K App. D.3, :func:`nets.balance_layers`): first layer ÷α,
readout ×α; α > 1 upstream, α = 1 balanced, α < 1 downstream. (a) LeNet-5 on MNIST digits: the
Hamming distance of its binarised hidden ReLU activations, init → end; (b) K Eq 128's smoothness
of its first-layer filters; (c) a ReLU MLP on K's RHM: test accuracy vs training-set size.

Command: ``lrrich run kunin-fig6`` (α = 0.1, 1, 10; three seeds); ``--scale paper`` is K's setting.
Expected (seeds 0 / 1 / 2 at α = 10; α = 1; α = 0.1), every ordering in every seed: Hamming
distance 0.49 / 0.34 / 0.32; 0.16 / 0.16 / 0.13; 0.09 / 0.09 / 0.10. Smoothness 0.37 / 0.35 /
0.32; 1.48 / 1.33 / 1.22; 1.97 / 1.82 / 1.61 (1.83 at init). RHM mean test accuracy 0.55 / 0.62 /
0.74; 0.52 / 0.60 / 0.71; 0.33 / 0.37 / 0.55. Findings: ``docs/findings/kunin_fig6.md``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jax
import numpy as np
from flax import nnx

import metrics
from lrrich.claims import All, Claim, Less, measured
from lrrich.experiments import _data, _plots, _presets
from lrrich.io import save_figure
from nets import MLP, TrainConfig, balance_layers, train_many
from nets.data.hierarchy import num_data, random_hierarchy
from nets.models.layers import pool2d

NAME = "kunin-fig6"
DESCRIPTION = (
    "K Fig 6(a-c): layer balance alpha vs activation-pattern change (LeNet-5), first-layer "
    "filter smoothness, RHM sample complexity"
)


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """K App. D.3 (``SCALES["paper"]``: LeNet-5 on MNIST, 500 epochs at lr 1e-4, batch 512; the
    RHM MLP: SGD, momentum 0.9, batch 128, 250 epochs, cosine schedule, CE, 6 seeds). The small
    scale: mnist5k, PyTorch's default init instead of He, Adam (K names a learning rate only)."""

    optimizer: str = "adam"  # LeNet-5's optimizer (panels a, b)
    lr: float = 1e-3  # its learning rate
    momentum: float = 0.0  # its momentum
    epochs: int = 4  # its epochs
    alphas: tuple[float, ...] = (0.1, 1.0, 10.0)  # layer balances α: 1 and values on both sides
    probe_size: int = 400  # training images on which the ReLU patterns are compared (panel a)
    rhm_classes: int = 8  # the RHM's classes n_c
    rhm_m: int = 4  # its synonyms per class m
    rhm_s: int = 2  # its patch size s
    rhm_v: int = 8  # its vocabulary size v
    rhm_levels: int = 3  # its depth L
    rhm_train_sizes: tuple[int, ...] = (1000, 2000, 4000, 8000)  # increasing; nested per seed
    rhm_test: int = 4000  # held-out test samples per seed
    rhm_width: int = 64  # the MLP's hidden width
    rhm_depth: int = 3  # its hidden layers
    rhm_lr: float = 0.2  # its SGD learning rate (cosine schedule, CE loss)
    rhm_momentum: float = 0.9  # its SGD momentum
    rhm_batch: int = 128  # its minibatch size
    rhm_steps: int = 1200  # SGD steps per run, the same at every training size (K: 250 epochs)
    rhm_threshold: float = 0.5  # the test accuracy that defines the sample complexity n*


SCALES = {
    "small": Config(),
    "paper": Config(dataset="mnist", lr=1e-4, batch_size=512, epochs=500, probe_size=6000,
                    alphas=(0.03, 0.1, 0.3, 1.0, 3.0, 10.0), rhm_test=20000, seeds=6,
                    rhm_train_sizes=(2000, 4000, 8000, 16000, 32000, 64000),
                    rhm_steps=250 * 64000 // 128),
}  # fmt: skip


def run(config: Config, run_dir: Path) -> dict:
    """A LeNet-5 per (seed, α), an MLP per (seed, α, size); summary, panels, ``measured``."""
    alphas, sizes = np.asarray(config.alphas, float), np.asarray(config.rhm_train_sizes)
    if alphas.size < 3 or 1.0 not in alphas or not alphas.min() < 1 < alphas.max():
        raise ValueError(f"alphas need 1 and values below and above it, got {config.alphas}")
    if sizes.size < 2 or np.any(np.diff(sizes) <= 0) or sizes[0] < 1:
        raise ValueError(f"rhm_train_sizes must increase, ≥ 2 sizes, got {config.rhm_train_sizes}")
    seeds = _presets.seed_list(config)
    return collect(config, seeds, _cnn_runs(config, seeds), [_rhm_seed(config, s) for s in seeds])


def collect(config: Config, seeds: list[int], cnn: list[dict], rhm: list[dict]) -> dict:
    """Summary (seed means per α), panels and the claims' record from the per-seed measures:
    ``cnn`` per seed :func:`_lenet_measures`' keys as per-α lists, ``dataset`` and ``n_train``;
    ``rhm`` per seed ``test_acc``, ``train_acc`` (n_alpha, n_sizes) and ``num_data``."""
    sizes = np.asarray(config.rhm_train_sizes)
    names = ("hamming", "smoothness", "smoothness_zero_sum_laplacian", "cnn_test_acc")
    fields = ("hamming", "smoothness", "smoothness_zero_sum", "test_acc")  # of cnn, per name
    means = {n: np.array([c[k] for c in cnn]) for n, k in zip(names, fields, strict=True)}
    acc = np.array([r["test_acc"] for r in rhm])  # (n_seeds, n_alpha, n_sizes)
    means["rhm_mean_test_acc"] = auc = acc.mean(axis=2)
    n_star = np.array([[_n_star(sizes, a, config.rhm_threshold) for a in s] for s in acc])
    summary = {"seeds": len(seeds)}
    for i, a in enumerate(config.alphas):
        summary |= {f"{k}_alpha={a:g}": float(v[:, i].mean()) for k, v in means.items()}
        reached = n_star[:, i][np.isfinite(n_star[:, i])]
        summary[f"rhm_n_star_alpha={a:g}"] = float(reached.mean()) if reached.size else math.nan
        summary[f"rhm_seeds_reaching_threshold_alpha={a:g}"] = int(reached.size)
    summary["smoothness_init"] = float(np.mean([c["smoothness_init"] for c in cnn]))
    panel_c = {"train_sizes": sizes.tolist(), "test_acc": acc.tolist(),
               "train_acc": [r["train_acc"] for r in rhm], "n_star": n_star.tolist(),
               "num_data": rhm[0]["num_data"]}  # fmt: skip
    record = _measured(means["hamming"], means["smoothness"], auc, config, cnn[0], seeds)
    return {"summary": summary, "alphas": list(config.alphas), "seeds": seeds, "cnn": cnn,
            "rhm": panel_c, "measured": record}  # fmt: skip


@nnx.jit
def hidden_preactivations(model, x: jax.Array) -> list[jax.Array]:
    """LeNet-5's hidden pre-activations on images x (n, 28, 28, 1): conv1 (n, 28, 28, 6) before
    pooling, conv2 (n, 10, 10, 16), fc1 (n, 120), fc2 (n, 84) — every ReLU unit of the network
    (K App. D.3 binarises 'the hidden activation with 1 representing an active neuron')."""
    z1 = model.conv1(x)
    z2 = model.conv2(pool2d(jax.nn.relu(z1), 2, model.pool))
    z3 = model.fc1(pool2d(jax.nn.relu(z2), 2, model.pool).reshape(x.shape[0], -1))
    return [z1, z2, z3, model.fc2(jax.nn.relu(z3))]


def _cnn_runs(config: Config, seeds: list[int]) -> list[dict]:
    """Panels (a, b): a LeNet-5 per (seed, α), rebalanced from the seed's init, all stacked."""
    data = _data.load_data(config, "lenet5")
    bases = [_data.build_model("lenet5", data, width=config.width, seed=s) for s in seeds]
    models0 = [balance_layers(b, float(a), first="conv1") for b in bases for a in config.alphas]
    keys = [jax.random.key(s) for s in seeds for _ in config.alphas]
    tc = _presets.train_config(config, len(data.x_train))
    models, hists = train_many(models0, data, [tc] * len(models0), keys, metrics={},
                               log_every=10**9)  # fmt: skip
    order = np.random.default_rng(config.seed).permutation(len(data.x_train))
    probe = data.x_train[order[: config.probe_size]]
    out, n_alpha = [], len(config.alphas)
    for s in range(len(seeds)):
        at = slice(s * n_alpha, (s + 1) * n_alpha)
        runs = zip(models0[at], models[at], hists[at], strict=True)
        per_alpha = [_lenet_measures(m0, m, h, probe) for m0, m, h in runs]
        res = {"dataset": _data.dataset_text(data), "n_train": len(data.x_train)}
        out.append(res | {k: [v[k] for v in per_alpha] for k in per_alpha[0]})
    return out


def _lenet_measures(model0, model, hist, probe: np.ndarray) -> dict:
    """Panels (a, b) of one trained LeNet-5 (``model``, from ``model0``; ``hist`` its history)."""

    def smoothness(m, **kw) -> float:
        return float(np.mean(metrics.filter_smoothness(np.asarray(m.conv1.kernel[...]), **kw)))

    pre0, pre = (hidden_preactivations(m, jax.numpy.asarray(probe)) for m in (model0, model))
    kernel = np.asarray(model.conv1.kernel[...])[:, :, 0, :].transpose(2, 0, 1)  # (6, 5, 5)
    return {"hamming": float(metrics.activation_hamming_distance(pre0, pre)),
            "smoothness": smoothness(model), "smoothness_init": smoothness(model0),
            "smoothness_zero_sum": smoothness(model, laplacian=metrics.ZERO_SUM_LAPLACIAN),
            "filters": kernel.tolist(), "test_acc": float(hist.final["test_acc"]),
            "train_acc": float(hist.final["train_acc"])}  # fmt: skip


def _rhm_seed(config: Config, seed: int) -> dict:
    """One seed of panel (c): this seed's RHM; an MLP per (α, training size), stacked over α."""
    shape = dict(num_classes=config.rhm_classes, m=config.rhm_m, s=config.rhm_s,
                 levels=config.rhm_levels)  # fmt: skip
    sizes = config.rhm_train_sizes
    full = random_hierarchy(max(sizes), config.rhm_test, **shape, v=config.rhm_v, seed=seed)
    hidden = (config.rhm_width,) * config.rhm_depth
    base = MLP(full.x_train.shape[1], hidden, config.rhm_classes, activation="relu", bias=False,
               rngs=nnx.Rngs(seed))  # fmt: skip
    models0 = [balance_layers(base, float(a)) for a in config.alphas]
    keys = [jax.random.key(seed)] * len(models0)
    acc = {split: np.zeros((len(models0), len(sizes))) for split in ("test", "train")}
    for j, n in enumerate(sizes):
        data = full._replace(x_train=full.x_train[:n], y_train=full.y_train[:n])
        tc = TrainConfig(loss="ce", optimizer="sgd", lr=config.rhm_lr, momentum=config.rhm_momentum,
                         schedule="cosine", batch_size=min(config.rhm_batch, n),
                         steps=config.rhm_steps)  # fmt: skip
        _, hists = train_many(models0, data, [tc] * len(models0), keys, metrics={},
                              log_every=10**9, eval_size=config.rhm_test)  # fmt: skip
        for split, a in acc.items():
            a[:, j] = [h.final[f"{split}_acc"] for h in hists]
    out = {f"{split}_acc": a.tolist() for split, a in acc.items()}
    return {**out, "num_data": num_data(**shape)}


def _n_star(sizes: np.ndarray, acc: np.ndarray, threshold: float) -> float:
    """The training size where the test accuracy first reaches ``threshold``, interpolated
    linearly in log n between the grid sizes around the crossing (NaN if never reached)."""
    hit = np.flatnonzero(np.asarray(acc) >= threshold)
    if not hit.size or hit[0] == 0:
        return float(sizes[0]) if hit.size else math.nan
    k = int(hit[0])
    t = (threshold - acc[k - 1]) / (acc[k] - acc[k - 1])
    return float(np.exp(np.log(sizes[k - 1]) + t * (np.log(sizes[k]) - np.log(sizes[k - 1]))))


def _ordering(key, place, field, quote, what, split, pairs, paper, **kw) -> Claim:
    """K's ordering of ``field`` over the α grid: ``Less(field_a, field_b)`` for each (a, b) of
    ``pairs`` (up: the largest α, balanced: α = 1, down: the smallest α)."""
    order = All(tuple(Less(f"{field}_{a}", f"{field}_{b}") for a, b in pairs))
    return Claim(key, place, quote, what, split, order, paper=paper, **kw)


_DOWNHILL = (("balanced", "up"), ("down", "balanced"))  # upstream > balanced > downstream
CLAIMS = (
    _ordering("hamming", "K Fig 6(a)", "hamming",
        "K Fig 6(a) / §5: an upstream initialization 'drives feature learning through "
        "changing activation patterns'; 'Adjusting the initialization variance of the first and "
        "last layers can amplify or diminish this movement' (Hamming distance, K App. D.3)",
        "Hamming distance of the ReLU patterns init → end: upstream > balanced > downstream",
        "train", _DOWNHILL, "upstream > balanced > downstream",
        note="read on a probe of training images, as K App. D.3 measures it"),
    _ordering("smoothness", "K Fig 6(b)", "smoothness",
        "K Fig 6(b) / §5: an upstream initialization 'promotes interpretability of early layers "
        "in CNNs'; 'adjusting the learning speed of the first layer can enhance or degrade this "
        "alignment' (with edge detectors; smoothness K Eq 128, smaller = smoother)",
        "first-layer filter smoothness (K Eq 128, smaller = smoother): upstream < balanced < "
        "downstream",
        "train", (("up", "balanced"), ("balanced", "down")), "upstream smoothest",
        note="a property of the weights trained on the training images (no data is read)"),
    _ordering("rhm", "K Fig 6(c)", "rhm_acc",
        "K Fig 6(c) / §5: an upstream initialization 'reduces the sample complexity of learning "
        "hierarchical data'; 'modifying the initialization geometry can decrease or increase the "
        "sample complexity of learning' (Random Hierarchy Model)",
        "RHM test accuracy, mean over the training sizes: upstream > balanced > downstream",
        "test", _DOWNHILL, "upstream needs fewer samples"),
)  # fmt: skip


def _measured(hamming, smooth, auc, config: Config, cnn: dict, seeds) -> dict:
    """The per-seed record the claims read; ``hamming``, ``smooth``, ``auc``: (n_seeds,
    n_alpha) Hamming distance, mean first-layer smoothness, RHM mean test accuracy."""
    alphas = list(config.alphas)
    cols = {"up": int(np.argmax(alphas)), "balanced": alphas.index(1.0)}
    cols["down"] = int(np.argmin(alphas))
    fields = (("hamming", hamming), ("smoothness", smooth), ("rhm_acc", auc))
    values = {f"{name}_{side}": v[:, i] for name, v in fields for side, i in cols.items()}
    deviations = ["panel (b) reads LeNet-5's first-layer filters after the panel (a) training on "
                  "MNIST digits; K used a small ResNet on CIFAR-10 (DAWN benchmark) with every "
                  "convolution's filters ÷α and no weight decay"]  # fmt: skip
    if cnn.get("n_train"):
        partial = _presets.partial_batch_deviation(cnn["n_train"], config.batch_size)
        deviations += [f"LeNet-5: {d}" for d in partial]
    dropped = ", ".join(f"{n:,}" for n in config.rhm_train_sizes if n % min(config.rhm_batch, n))
    if dropped:
        deviations.append("RHM: the last partial batch of each epoch is dropped where the batch "
                          f"does not divide n (n = {dropped})")  # fmt: skip
    return measured(
        values, seeds=seeds, deviations=deviations,
        dataset=f"{cnn['dataset']}; RHM L={config.rhm_levels}, n_c={config.rhm_classes}, "
        f"m={config.rhm_m}, s={config.rhm_s}, v={config.rhm_v}",
        scale=f"α {alphas[cols['up']]:g} / 1 / {alphas[cols['down']]:g}; LeNet-5 "
        f"{config.optimizer} lr {config.lr:g}, {config.epochs} epochs; RHM MLP "
        f"{config.rhm_width}x{config.rhm_depth}, {config.rhm_steps} SGD steps",
    )  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``kunin_fig6.png``: (a) Hamming distance and (b) smoothness per α (seeds as dots, their
    mean as a line), seed 0's first-layer filters, (c) RHM test accuracy against the
    training-set size per α (seed mean ± std)."""
    import matplotlib.pyplot as plt

    alphas, cnn = np.asarray(results["alphas"]), results["cnn"]
    fig = plt.figure(figsize=(15, 4.2), layout="constrained")
    grid = fig.add_gridspec(1, 4, width_ratios=(1, 1, 1.1, 1.2))
    panels = ("(a) Hamming distance (init → end)", "(b) filter smoothness (K Eq 128) ↓ smoother")
    for i, (key, label) in enumerate(zip(("hamming", "smoothness"), panels, strict=True)):
        ax = fig.add_subplot(grid[i])
        _plots.seed_dots(ax, alphas, np.array([c[key] for c in cnn]).T, "o-", color="k")
        ax.axvline(1.0, ls=":", color="0.5")
        ax.set(xscale="log", xlabel="α (first layer ÷α, readout ×α)", title=label)
    init = np.mean([c["smoothness_init"] for c in cnn])  # on panel (b), the last of the loop
    ax.axhline(init, ls="--", color="0.5", lw=1)
    ax.text(alphas.min(), init, "init", fontsize=7)
    sub = grid[2].subgridspec(len(alphas), 6, wspace=0.05, hspace=0.1)
    for r, i in enumerate(np.argsort(-alphas)):  # seed 0's conv1 filters, upstream on top
        for k, f in enumerate(np.asarray(cnn[0]["filters"][i])[:6]):
            ax = fig.add_subplot(sub[r, k])
            ax.imshow(f, cmap="gray", vmin=-np.abs(f).max(), vmax=np.abs(f).max())
            ax.set(xticks=[], yticks=[])
            ax.set_ylabel(f"α={alphas[i]:g}" if k == 0 else "", fontsize=7)
            ax.set_title("conv1 filters, seed 0" if r == k == 0 else "", fontsize=8, loc="left")
    ax, rhm = fig.add_subplot(grid[3]), results["rhm"]
    sizes, acc = np.asarray(rhm["train_sizes"]), np.asarray(rhm["test_acc"])
    for i, a in enumerate(alphas):  # blue downstream, black balanced, red upstream
        color = "tab:blue" if a < 1 else "k" if a == 1 else "tab:red"
        ax.errorbar(sizes, acc[:, i].mean(0), yerr=acc[:, i].std(0), fmt="o-", color=color,
                    capsize=3, label=f"α={a:g}")  # fmt: skip
    ax.set(xscale="log", xlabel="training samples", ylabel="test accuracy",
           title=f"(c) RHM (P_max = {rhm['num_data']:,})", ylim=(0, 1.02))  # fmt: skip
    ax.legend(fontsize=7)
    return [save_figure(fig, run_dir / "kunin_fig6.png")]
