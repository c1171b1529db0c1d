"""Seed 000 Fig 2(b,c): target downscaling y → y/α tunes laziness; only D_LR follows α.

Chizat et al.'s target downscaling (thesis §6.2.2: α ≫ √p gives the lazy regime at finite
width) trains the same MLP, from the same initialisation, on targets one_hot(y)/α for a grid of
α (``TrainConfig.target_downscale``). Larger α = lazier. After training, on the training set,
we compare D_LR (seed 000 Eq. 7) with the prior measures of seed 000 §4: S_init (feature-kernel
distance from initialisation, 1 − CKA(K₀, K)), ‖θ‖² and NC1 = Tr(Σ_W Σ_B^†)/C. A measure of
laziness should rise (D_LR) or fall (S_init) monotonically with α.

Command (CPU, offline digits, the whole α grid in one run)::

    lrrich run target-downscaling --out runs/target-downscaling

Runtime: 94 s wall (27 s CPU) on the shared 2-core CPU (7 α values). Paper scale (MNIST 1k):
``--scale paper``.
Expected outcome (small scale, seed 0, measured): D_LR rises monotonically 0.11 → 0.78 from
α = 1 to 1000 (``dlr_monotone``); S_init falls 0.42 → 0.16 up to α = 100 then rises again (0.19
at α = 1000, not monotone); ‖θ‖² falls 407 → 264 (towards ‖θ₀‖² = 263: "smaller norm = richer"
would call the lazy runs richer); NC1 rises 0.0065 → 1.2 — on digits it agrees with α, unlike the
paper's MNIST finding. Test accuracy 98.9% → 51% (α = 1000 fits only 79% of the training set in
100 epochs).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np

from lrrich.experiments import _seed000

NAME = "target-downscaling"
DESCRIPTION = "seed 000 Fig 2b,c: target downscaling alpha sweep, D_LR vs S_init, |theta|^2, NC1"
PAPER = {"dlr_monotone": True}
MEASURES = ("dlr", "s_init", "param_norm", "nc1")


@dataclasses.dataclass(frozen=True)
class Config:
    """Target-downscaling sweep settings (seed 000 App. F.4, Fig 2(b,c) rows).

    Paper: 1,000 MNIST training images, batch 128, Adam, 100 epochs, no schedule, MSE on
    one_hot(y)/α. The learning rate, the α grid and the MLP's size are not legible in seed 000;
    we use Adam's lr 1e-3, α ∈ {1, 3, …, 1000} (α/√p from 1/16 to 60 for p = 256) and the
    thesis's 4-layer FCN (3 hidden ReLU layers, width 256; T Fig 6.3).

    Small-scale deviations: 1,000 of the 1,437 scikit-learn digits training images instead of
    MNIST; everything else as the paper scale.

    Attributes:
      seed: PRNG seed of the (shared) initialisation, the training subset and the data order.
      dataset: ``'digits'`` (offline) or ``'mnist'``.
      n_train: training-set size (seed 000: 1,000).
      alphas: the target-downscaling constants α (targets one_hot(y)/α).
      width: hidden width p of the MLP.
      depth: number of hidden layers.
      optimizer: ``'adam'`` (paper) or ``'sgd'``.
      lr: learning rate.
      epochs: training epochs.
      batch_size: minibatch size.
      log_points: log points per α (D_LR and accuracy curves).
    """

    seed: int = 0
    dataset: str = "digits"
    n_train: int = 1000
    alphas: tuple[float, ...] = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
    width: int = 256
    depth: int = 3
    optimizer: str = "adam"
    lr: float = 1e-3
    epochs: int = 100
    batch_size: int = 128
    log_points: int = 10


SCALES = {"small": Config(), "paper": Config(dataset="mnist")}


def run(config: Config, run_dir: Path) -> dict:
    """Train one network per α from the same init; summary: final measures per α."""
    from nets import TrainConfig, train

    if not config.alphas or min(config.alphas) <= 0:
        raise ValueError(
            f"alphas must be a non-empty tuple of positive numbers, got {config.alphas}"
        )
    data = _seed000.load_data(config.dataset, n_train=config.n_train, seed=config.seed)
    spe = len(data.x_train) // config.batch_size
    log_every = max(spe * config.epochs // config.log_points, 1)
    rows, histories = [], {}
    for alpha in config.alphas:
        model0 = _seed000.make_mlp(data, width=config.width, depth=config.depth, seed=config.seed)
        tc = TrainConfig(
            optimizer=config.optimizer,
            lr=config.lr,
            epochs=config.epochs,
            batch_size=config.batch_size,
            target_downscale=float(alpha),
        )
        model, hist = train(
            model0,
            data,
            tc,
            key=jax.random.key(config.seed),
            log_every=log_every,
            run_dir=run_dir / f"alpha_{alpha:g}",
            progress=True,
        )
        m = _seed000.measures(model, model0, data.x_train, data.y_train)
        train_acc = m.pop("acc")
        phi_te, out_te = _seed000.forward(model, data.x_test)
        rows.append(
            {
                "alpha": float(alpha),
                **m,
                "train_acc": train_acc,
                "dlr_test": _seed000.safe_dlr(phi_te, out_te),
                "test_acc": float(np.mean(out_te.argmax(1) == data.y_test)),
                "train_seconds": hist.train_time,
            }
        )
        histories[f"{alpha:g}"] = {
            k: hist.column(k).tolist() for k in ("step", "dlr_train", "dlr_test", "test_acc")
        }
    dlrs = np.array([r["dlr"] for r in rows])
    summary = {"dlr_monotone": bool(np.all(np.diff(dlrs) > 0))}
    for key in ("dlr", "s_init", "param_norm", "nc1", "test_acc"):
        summary[f"{key}_alpha_min"] = rows[0][key]
        summary[f"{key}_alpha_max"] = rows[-1][key]
    for key in ("s_init", "param_norm", "nc1"):
        vals = np.array([r[key] for r in rows])
        summary[f"{key}_spearman_vs_alpha"] = _spearman(np.array(config.alphas), vals)
    summary["dlr_spearman_vs_alpha"] = _spearman(np.array(config.alphas), dlrs)
    return {"summary": summary, "table": rows, "histories": histories}


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation of two 1-D arrays without ties (NaN-safe: NaN → NaN)."""
    if len(a) < 2 or not np.all(np.isfinite(b)):
        return float("nan")
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``measures_vs_alpha.png`` (each measure vs α, log-x) and ``dlr_curves.png`` (vs step)."""
    import matplotlib.pyplot as plt

    from lrrich.io import save_figure

    rows = results["table"]
    alphas = [r["alpha"] for r in rows]
    labels = {
        "dlr": "D_LR (train) ↑ lazier",
        "s_init": "S_init = 1 − CKA(K₀, K) ↓ lazier",
        "param_norm": "‖θ‖²",
        "nc1": "NC1",
        "test_acc": "test accuracy",
    }
    fig, axes = plt.subplots(1, len(labels), figsize=(16, 3.2))
    for ax, (key, lab) in zip(axes, labels.items(), strict=True):
        ax.plot(alphas, [r[key] for r in rows], "o-")
        if key == "dlr":
            ax.plot(alphas, [r["dlr_test"] for r in rows], "s--", ms=3, label="test")
            ax.legend(fontsize=7)
        ax.set(xscale="log", xlabel="α (targets y/α)", title=lab)
        if key == "nc1":
            ax.set_yscale("log")
    fig.suptitle("target downscaling: larger α = lazier; which measure follows α?", fontsize=9)
    paths = [save_figure(fig, run_dir / "measures_vs_alpha.png")]

    fig, ax = plt.subplots(figsize=(5, 3.4))
    cmap = plt.get_cmap("viridis")
    hs = results["histories"]
    for i, (a, h) in enumerate(hs.items()):
        ax.plot(h["step"], h["dlr_train"], color=cmap(i / max(len(hs) - 1, 1)), label=f"α={a}")
    ax.set(xlabel="step", ylabel="D_LR (train)", ylim=(0, 1), title="D_LR during training")
    ax.legend(fontsize=7)
    paths.append(save_figure(fig, run_dir / "dlr_curves.png"))
    return paths
