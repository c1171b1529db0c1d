"""D Fig 12 / T Fig 3.6: MNIST as scalar regression reaches the rich regime with two features.

The same network trains on MNIST as a scalar regression (one output, MSE to the digit value;
digit i is correct when i − 0.5 < f(x) < i + 0.5, T Fig 3.6) and as 10-way classification (MSE on
one-hot targets). Read on the test images (Nyström fit on the training images, T Alg. 1): D_LR
(D Eq. 7; C = 1), the adjusted D_eff(ρ) (D Eq. 9, T Eq. 2.6) and D_eff(Q̂) (T Eq. 2.5).

Command: ``lrrich run scalar-regression`` (3 seeds × 2 networks). ``--scale paper``: D's ResNet18
k = 64 on the full MNIST, SGD 0.9, lr 0.05, 200 epochs, × 0.2 every 60 (an accelerator).
Expected (seeds 0 / 1 / 2): regression test D_LR 0.0003 / 0.0002 / 0.0028; adjusted D_eff(ρ)
10.7 / 7.0 / 6.9 against classification's 11.6 / 11.4 / 11.5; D_eff(Q̂) about 3 against about
36 on the test images (1.00 against 10.4 on the training sample): fewer features than
classification, but not two. Findings: ``docs/findings/scalar_regression.md``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np

from lrrich import io
from lrrich.claims import MF_BOUNDARY, Below, Less, Value, measured, quoting, rf_reference
from lrrich.experiments import _data, _measure, _presets, _seeds

NAME = "scalar-regression"
DESCRIPTION = "D Fig 12 / T Fig 3.6: scalar-output MNIST regression, D_LR and D_eff = 2, 3 seeds"


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """D Fig 12, T Fig 3.6. Small scale: a ReLU MLP 784-256-256-256 (T Fig 6.3) instead of
    ResNet18, 4,000 mnist5k digits instead of 60,000; Adam lr 1e-3, 30 epochs."""

    dataset: str = "mnist5k"
    model: str = "mlp"  # or another _data.MODELS entry
    width: int = 256
    depth: int = 3
    optimizer: str = "adam"
    lr: float = 1e-3
    epochs: int = 30
    log_points: int = 10  # D_LR log points during training
    schedule: str = "constant"  # or 'step' (× 0.2 every step_every_epochs)
    step_every_epochs: int = 60
    classification: bool = True  # also train the 10-way classifier (T Fig 3.6's orange)


SCALES = {
    "small": Config(),
    "paper": _presets.paper_scale(Config, "mnist", model="resnet18", augment="none",
                                  optimizer="sgd", lr=0.05, momentum=0.9, epochs=200,
                                  schedule="step", step_every_epochs=60),
}  # fmt: skip


def run(config: Config, run_dir: Path) -> dict:
    """Train regression (and classification) per seed; measure D_LR and D_eff on the test set."""
    seeds = _presets.seed_list(config)
    tasks = ("regression", "classification") if config.classification else ("regression",)
    per_seed = []
    for seed in seeds:
        cfg = dataclasses.replace(config, seed=seed)
        sub = run_dir if len(seeds) == 1 else run_dir / f"seed_{seed}"
        per_seed.append({task: _train(cfg, task, sub / task) for task in tasks})
    means = {t: _seeds.seed_mean([r[t] for r in per_seed], _SUMMARY) for t in tasks}
    summary = {"seeds": len(seeds)} | {f"{k}_{t}": v for t in tasks for k, v in means[t].items()}
    rows = [{"seed": s, **{f"{k}_{t}": r[t][k] for t in tasks for k in _SCALARS}}
            for s, r in zip(seeds, per_seed, strict=True)]  # fmt: skip
    return {"summary": summary, "per_seed": rows, "points": per_seed[0],
            "measured": _measured(per_seed, config)}  # fmt: skip


_SUMMARY = ("dlr", "d_eff_rho", "d_eff_util", "test_acc", "dlr_rank")
_SCALARS = ("dlr dlr_rank d_eff_rho d_eff_util d_eff_rho_all d_eff_util_train cum_util_2 rho2_rel "
            "rho3_rel test_acc e1_constant_overlap").split()  # fmt: skip


def _train(config: Config, task: str, run_dir: Path) -> dict:
    """One network on ``task``; the final measures on the test images and its D_LR curve."""
    from lrrich.trainer import train
    from metrics import dlr_with_rank, feature_decomposition
    from nets import as_regression

    data = _data.load_data(config, config.model)
    data = as_regression(data) if task == "regression" else data
    net = dict(width=config.width, depth=config.depth, seed=config.seed)
    model = _data.build_model(config.model, data, **net)
    init_dlr = _measure.init_baseline(model, data)
    tc = _presets.train_config(config, len(data.x_train))
    total = (len(data.x_train) // tc.batch_size) * config.epochs
    model, hist = train(
        model, data, tc, key=jax.random.key(config.seed),
        log_every=max(total // config.log_points, 1), eval_size=min(1024, len(data.x_test)),
        metric_splits=("test",), run_dir=run_dir, progress=True,
    )  # fmt: skip
    phi_tr, out_tr = _measure.forward(model, data.x_train, config.output_scale)
    phi_te, out_te = _measure.forward(model, data.x_test, config.output_scale)
    if task == "regression":
        targets = data.y_test[:, None].astype(phi_te.dtype)  # f*(x) = the digit value
        correct = np.abs(out_te[:, 0] - data.y_test) < 0.5  # T Fig 3.6
    else:
        targets = np.eye(data.num_classes, dtype=phi_te.dtype)[data.y_test]
        correct = out_te.argmax(1) == data.y_test
    fd = feature_decomposition(phi_tr, phi_te, out_te, targets)
    # the same on the training sample (S_eval = S_fit: the e_k are exactly orthonormal there, so
    # the utilization has no finite-sample floor of ≈ 1/m per feature; findings)
    fd_tr = feature_decomposition(phi_tr, phi_tr, out_tr)
    value = dlr_with_rank(phi_te, out_te)
    rel = np.asarray(fd.relative_intensity)
    return {
        "dlr": float(value.value), "dlr_rank": int(value.rank), "init_dlr": init_dlr,
        "d_eff_rho": float(fd.d_eff_rho_adjusted), "d_eff_util": float(fd.d_eff_utilization),
        "d_eff_rho_all": float(fd.d_eff_rho), "d_eff_util_train": float(fd_tr.d_eff_utilization),
        "cum_util_2": float(np.asarray(fd.cum_utilization)[min(1, rel.size - 1)]),
        **{f"rho{k + 1}_rel": float(rel[k]) if rel.size > k else 0.0 for k in (1, 2)},
        "e1_constant_overlap": float(fd.e1_constant_overlap), "test_acc": float(np.mean(correct)),
        "n_train": int(len(data.x_train)), "n_test": int(len(data.x_test)),
        "n_features": int(phi_te.shape[1]),
        "num_outputs": int(out_te.shape[1]), "decomposition": _measure.decomposition(fd),
        "history": {k: hist.column(k).tolist() for k in ("epoch", "dlr_test")},
    }  # fmt: skip


_row = quoting("D App. D.3 Fig 12", "'Unlike C-way classification, which typically uses C "
               "features, the regression model reaches the rich regime with just two — one of "
               "which is constant' (D App. D.3); 'both models are in the MF regime' (T Fig 3.6)",
               )  # fmt: skip
_NYSTROM = (
    "the decomposition is fit on the training features (Nyström, T Alg. 1) and read on the "
    "test images"
)


def _two(d: str, what: str, note: str, also: str = ""):
    """The claim that the scalar regression's ``d_eff_<d>`` is 2, fewer than classification's."""
    f = f"d_eff_{d}_regression"
    less = Less(f, f"d_eff_{d}_classification")
    return _row(f"d-eff-{d}-two", f"{what}, scalar regression: 2{also}; direction: fewer than "
                "classification's", Value(f, 2.0, "d_eff", direction=less), "2", note=note)  # fmt: skip


CLAIMS = (
    _row("dlr-rich", "test D_LR, scalar regression (C = 1): the MF regime",
         Below("dlr_regression", MF_BOUNDARY), f"rich (< {MF_BOUNDARY:g}, T Definition 2)",
         dlr=("dlr_regression",)),
    _two("rho", "adjusted D_eff(ρ)", _NYSTROM, " (the constant and one more)"),
    _two("util", "D_eff(Q̂) of the utilization",
         f"{_NYSTROM}; each of the p features adds a floor of ~1/m there "
         "(docs/findings/scalar_regression.md: on the training sample it reads 1.00)"),
)  # fmt: skip
"""D App. D.3's claim about the scalar-regression network, read on the test images."""


def _measured(per_seed: list[dict], config: Config) -> dict:
    """The per-seed record the claims read; D_LR's reference at the measured rank."""
    tasks = list(per_seed[0])
    keys = ("dlr", "d_eff_rho", "d_eff_util", "d_eff_util_train", "test_acc")
    reg = [r["regression"] for r in per_seed]
    rank = max(r["dlr_rank"] for r in reg)
    ref = rf_reference(reg[0]["n_test"], reg[0]["n_features"], rank, rank_source="measured")
    mlp = [f"an MLP on {config.dataset} instead of D's ResNet18 on the full MNIST"]
    net = f"{config.model.upper()} width {config.width}"
    net += f" x{config.depth}" if config.model == "mlp" else ""
    return measured(
        {f"{k}_{t}": [r[t][k] for r in per_seed] for t in tasks for k in keys},
        seeds=_presets.seed_list(config),
        dataset=f"{config.dataset} ({reg[0]['n_test']:,} test images)",
        scale=f"{net}, {config.optimizer} lr {config.lr:g}, {config.epochs} epochs",
        baseline={"dlr_regression": [r["init_dlr"] for r in reg]},
        reference={"dlr_regression": ref},
        deviations=[*_presets.partial_batch_deviation(reg[0].get("n_train", 0), config.batch_size),
                    *([] if config.model == "resnet18" else mlp)],
    )  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``scalar_regression_dlr.png`` (D_LR vs epoch) and ``scalar_regression_features.png``
    (Π*(k), Π̂(k), ρ_k/ρ_1, D Fig 12 / T Fig 3.6 style), first seed."""
    import matplotlib.pyplot as plt

    from metrics import plot_feature_decomposition

    points = results["points"]
    fig, ax = plt.subplots(figsize=(4.5, 3.3), constrained_layout=True)
    for task, r in points.items():
        h = r["history"]
        ax.plot(h["epoch"], h["dlr_test"], "o-", ms=3, label=f"{task} (C = {r['num_outputs']})")
    ax.axhline(MF_BOUNDARY, color="grey", lw=0.8, ls="--")
    ax.set(xlabel="epoch", ylabel="D_LR (test)", ylim=(0, 1), title="scalar vs classification")
    ax.legend(fontsize=8)
    paths = [io.save_figure(fig, run_dir / "scalar_regression_dlr.png")]
    fig = plot_feature_decomposition({t: r["decomposition"] for t, r in points.items()})
    paths.append(io.save_figure(fig, run_dir / "scalar_regression_features.png"))
    return paths
