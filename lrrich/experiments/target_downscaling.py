"""D Fig 2(b,c): target downscaling y → y/α tunes laziness; only D_LR follows α.

Chizat et al.'s target downscaling (T §6.2.2: α ≫ √p gives the lazy regime at finite width)
trains the same MLP, from the same initialisation, on targets one_hot(y)/α for a grid of α
(``TrainConfig.target_downscale``); larger α = lazier. After training, on the test images (the
training-set values are kept beside them), D_LR (D Eq. 7) is compared with the prior measures of
D §4: S_init = 1 − CKA(K₀, K), ‖θ‖² and NC1 = Tr(Σ_W Σ_B^†)/C, over the α whose runs fit every
training image (D Fig 2(b)'s runs all do). A measure of laziness should rise (D_LR) or fall
(S_init) monotonically with α.

Command: ``lrrich run target-downscaling --out runs/target-downscaling`` (three seeds, the whole
α grid); ``--scale paper`` draws the 1,000 images from the full MNIST (TFDS).
Expected (seeds 0 / 1 / 2, test images): D_LR rises strictly 0.08 → 0.93 / 0.89 / 0.93 from
α = 1 to 1000 (random features: 0.824); the runs fit every training image up to α = 100 / 300 /
100. Over those α, S_init falls 0.65 → 0.47 / 0.61 → 0.50 / 0.62 → 0.35, ‖θ‖² falls to ~0.72 of
its value at α = 1, and NC1 rises 0.18 → 0.87 / 1.96 / 0.90. Findings (NC1 on other inputs
and α ranges, the S_init turn): ``docs/findings/target_downscaling.md``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from lrrich import io
from lrrich.claims import Claim, Holds, Premise, Value, measured
from lrrich.experiments import _data, _measure, _plots, _presets, _seeds

NAME = "target-downscaling"
DESCRIPTION = "D Fig 2b,c: target downscaling alpha sweep, D_LR vs S_init, |theta|^2, NC1"
PAPER = {"dlr_monotone": True}


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """Target-downscaling sweep settings (D App. F.4, Fig 2(b,c) rows).

    Paper: 1,000 MNIST training images, batch 128, Adam, 100 epochs, no schedule, MSE on
    one_hot(y)/α; the learning rate, the α grid and the MLP are not legible. We use lr 1e-3,
    α ∈ {1, 3, …, 1000} (α/√p from 1/16 to 60) and the thesis's 4-layer FCN (3 hidden ReLU
    layers, width 256; T Fig 6.3), on 1,000 class-balanced images of ``mnist5k``.

    Choices where D is silent: the last partial batch — 100 epochs are 800 steps of full
    batches, PyTorch's 100 · ⌈1,000 / 128⌉ (``_presets.paper_steps``); raw [0, 1] pixels;
    initialisation: PyTorch's default; the claims read the measures on the test images.
    """

    dataset: str = "mnist5k"
    n_train: int | None = 1000
    width: int = 256
    depth: int = 3
    optimizer: str = "adam"
    lr: float = 1e-3
    epochs: int = 100
    alphas: tuple[float, ...] = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)  # targets one_hot(y)/α
    log_points: int = 10  # log points per α (D_LR and accuracy curves)
    eval_size: int = 256  # fixed train / test images per log point (256 = p: logging under 5 %)


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
    n = len(data.x_train)
    steps = _presets.paper_steps(n, config.batch_size, config.epochs)

    def probe(seed, model0):  # each trained network measured against its initialisation
        return None, lambda model: {"row": _row(data, model0, model)}

    tables, histories = [[] for _ in seeds], {}  # per seed, per α: the final measures
    for alpha in config.alphas:
        tc = _presets.train_config(config, n, target_downscale=float(alpha), steps=steps)
        runs = _seeds.train_seeds(
            "mlp", data, tc, seeds=seeds, width=config.width, depth=config.depth, probe=probe,
            run_dir=Path(run_dir) / f"alpha_{alpha:g}", eval_size=config.eval_size,
            log_every=max(steps // config.log_points, 1),
        )  # fmt: skip
        for table, r in zip(tables, runs, strict=True):
            table.append({"alpha": float(alpha), **r["row"], "train_seconds": r["train_seconds"]})
        curves = ("step", "dlr_train", "dlr_test", "test_acc")  # of the first seed
        histories[f"{alpha:g}"] = {k: runs[0]["history"][k] for k in curves}
    mean_table = [_seeds.seed_mean(rows) for rows in zip(*tables, strict=True)]
    for i, r in enumerate(mean_table):  # an α fits only if it does in every seed
        r["train_acc"] = min(t[i]["train_acc"] for t in tables)
    per_seed = [
        {"seed": s, **_summary(t, config.alphas)} for s, t in zip(seeds, tables, strict=True)
    ]
    return {"summary": _summary(mean_table, config.alphas) | {"seeds": len(seeds)},
            "table": tables[0], "tables": tables, "per_seed": per_seed, "histories": histories,
            "measured": _measured(tables, seeds, config, data)}  # fmt: skip


def _row(data, model0, model) -> dict:
    """The final measures of one trained network against its initialisation ``model0``."""
    m = _measure.prior_measures(model, model0, data.x_train, data.y_train)
    m_test = _measure.prior_measures(model, model0, data.x_test, data.y_test)
    phi_tr, out_tr = _measure.forward(model, data.x_train)
    return {
        **{k: v for k, v in m.items() if k != "acc"},
        # the NC1 variants the paper's Fig 2(b) could have plotted
        "nc1_test": m_test["nc1"], "s_init_test": m_test["s_init"],
        "nc1_outputs": _measure.nc1(out_tr, data.y_train, out_tr.shape[1]), "train_acc": m["acc"],
        "dlr_test": m_test["dlr"], "test_acc": m_test["acc"], "n_features": int(phi_tr.shape[1]),
    }  # fmt: skip


def _summary(rows: list[dict], alphas) -> dict:
    """Headline numbers of one α sweep: the ends of each measure, whether D_LR rises strictly,
    and each measure's Spearman correlation with α over the grid and over the fitted α."""
    summary = {"dlr_monotone": bool(np.all(np.diff([r["dlr"] for r in rows]) > 0))}
    for key in ("dlr", "dlr_test", "s_init", "s_init_test", "param_norm", "nc1", "test_acc"):
        summary[f"{key}_alpha_min"] = rows[0][key]
        summary[f"{key}_alpha_max"] = rows[-1][key]
    alphas, fitted = np.array(alphas), _fitted(rows)
    # NC1 is a terminal-phase measure (D §4): every Spearman also over the α that fit
    summary["alpha_max_fitted"] = float(alphas[fitted].max()) if fitted.any() else math.nan
    for key in ("dlr", "dlr_test", "s_init", "s_init_test", "param_norm", "nc1", "nc1_test"):
        vals = np.array([r[key] for r in rows])
        summary[f"{key}_spearman_vs_alpha"] = _measure.spearman(alphas, vals)
        summary[f"{key}_spearman_vs_alpha_fitted"] = _measure.spearman(alphas[fitted], vals[fitted])
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
    "n_alpha_fitted", ">=", 3,
    "at least three α fit every training image (D Fig 2(b)'s runs all reach 100 %)",
)  # fmt: skip
_OVER_FITTED = "over the α whose runs fit every training image, within each seed"
ALIGNED = 0.99
"""A Spearman correlation with α above this (in the direction of laziness) is monotone: aligned."""
PRIOR = (("s_init_test", "S_init", -1), ("param_norm", "‖θ‖²", +1))
"""S's 'invariant' prior measures: field, label, the sign of a change that follows laziness."""


def _invariant_claim(field: str, label: str, lazier: int) -> Claim:
    misaligned = f"Spearman(α, {label}) × {lazier:+d} ≤ {ALIGNED} {_OVER_FITTED}"
    return Claim(
        f"{field.removesuffix('_test')}-invariant", "S's table; D §4 Fig 2(b)", _QUOTE,
        f"{label} over the fitted α: its value furthest from the smallest α's, as a ratio to it "
        "(S: 'invariant'); direction: not monotone in the direction of laziness (D: 'misalign')",
        "test",
        Value(f"{field}_worst_ratio", 1.0, "invariant",
              direction=Holds(f"{field}_misaligned", misaligned)),
        paper="invariant to α", premise=(_FITS,),
        note="S_init on the test images; ‖θ‖² has no split" if field == "s_init_test" else "",
    )  # fmt: skip


CLAIMS = (
    Claim("dlr-aligns", "D §4 Fig 2(b); S's table", _QUOTE,
          "test D_LR strictly increasing in α over the fitted α", "test",
          Holds("dlr_test_rises", f"test D_LR strictly increasing in α {_OVER_FITTED}"),
          paper="increases with α (aligned)", premise=(_FITS,)),
    *(_invariant_claim(*p) for p in PRIOR),
    Claim("nc1-opposite", "S's table; D §4 Fig 2(b)", _QUOTE,
          "NC1 of the test features against α over the fitted α (S: 'opposite direction')",
          "test", Holds("nc1_test_opposite", f"Spearman(α, NC1) < −{ALIGNED} {_OVER_FITTED}"),
          paper="opposite direction", premise=(_FITS,)),
)  # fmt: skip
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
        rho = _measure.spearman(alphas, vals)
        ratios = vals / vals[0] if len(vals) else np.array([math.nan])
        out[f"{field}_spearman"] = rho
        out[f"{field}_worst_ratio"] = float(ratios[np.argmax(np.abs(ratios - 1))])
        finite = np.isfinite(rho)
        out[f"{field}_misaligned"] = float(rho * lazier <= ALIGNED) if finite else math.nan
        out[f"{field}_opposite"] = float(rho * lazier < -ALIGNED) if finite else math.nan
    return out


def _measured(tables: list[list[dict]], seeds: list[int], config: Config, data) -> dict:
    """The per-seed record the claims read (:func:`lrrich.claims.measured`)."""
    per_seed = [_seed_fields(t, config.alphas) for t in tables]
    subset = f"the {len(data.x_train):,} images from {data.name}, not the full MNIST"
    return measured(
        {k: [s[k] for s in per_seed] for k in per_seed[0]}, seeds=seeds,
        dataset=_data.dataset_text(data),
        scale=f"MLP 784-{config.width}x{config.depth}-10, {config.optimizer} lr {config.lr:g}, "
        f"{config.epochs} epochs, α {min(config.alphas):g}-{max(config.alphas):g}",
        deviations=[] if config.dataset == "mnist" else [subset],
    )  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``measures_vs_alpha.png`` (each measure vs α, log-x) and ``dlr_curves.png`` (vs step)."""
    import matplotlib.pyplot as plt

    rows = results["table"]
    alphas = [r["alpha"] for r in rows]
    labels = {
        "dlr": "D_LR (train) ↑ lazier", "s_init": "S_init = 1 − CKA(K₀, K) ↓ lazier",
        "param_norm": "‖θ‖²", "nc1": "NC1", "test_acc": "test accuracy",
    }  # fmt: skip
    fig, axes = plt.subplots(1, len(labels), figsize=(16, 3.2))
    for ax, (key, lab) in zip(axes, labels.items(), strict=True):
        ax.plot(alphas, [r[key] for r in rows], "o-")
        ax.set(xscale="log", xlabel="α (targets y/α)", title=lab)
    axes[0].plot(alphas, [r["dlr_test"] for r in rows], "s--", ms=3, label="test")
    axes[0].legend(fontsize=7)
    axes[3].set_yscale("log")
    fig.suptitle("target downscaling: larger α = lazier; which measure follows α?", fontsize=9)
    paths = [io.save_figure(fig, run_dir / "measures_vs_alpha.png")]

    lines = [(h, "dlr_train", f"α={a}") for a, h in results["histories"].items()]
    fig, _ = _plots.step_figure({"D_LR during training": lines}, log=False, cmap="viridis",
                                size=(5.0, 3.4), ylabel="D_LR (train)", ylim=(0, 1))  # fmt: skip
    paths.append(io.save_figure(fig, run_dir / "dlr_curves.png"))
    return paths
