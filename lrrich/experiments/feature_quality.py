"""D Fig 7 / T Fig 7.7: higher-intensity features have higher quality; larger ones improve faster.

An MLP trained on real MNIST digits (MSE on one-hot targets) is decomposed at every log point
(T Alg. 1: Nyström on 1,000 fixed training images S_fit, inner products on the 1,000 test images
S_eval): per feature k its intensity ρ_k (T Eq. 1.29) and quality Q*_k (T Eq. 2.3, H* = span of
the one-hot targets). :func:`metrics.feature_trajectories` follows the features through training
(eigenfunctions matched between log points by their largest squared overlap on S_fit, named by
their intensity order at the end). Per seed, over features 2–20 (T §7.3 follows "the first 20";
the first, ≈ constant eigenfunction is left out, D App. D.2), one-sided Spearman tests at level
0.05: intensity ↔ quality at the end, and the intensity (final, and initial) against the rate of
quality gain over the first quarter of training.

Command: ``lrrich run feature-quality`` (3 seeds). ``--scale paper`` is D's Fig 7 setting
(ResNet18 k = 64 on CIFAR-100, SGD 0.9, 400 epochs, × 0.2 every 60).
Expected (seeds 0 / 1 / 2): Spearman(ρ_k, Q*_k) at the end +0.94 / +0.91 / +0.95; final
intensity vs early quality-gain rate +0.81 / +0.70 / +0.79; initial intensity vs that rate
+0.61 / +0.69 / +0.57 (every one-sided p < 0.01). Over all 127 non-constant features the two
rate correlations are ≈ 0: ``docs/findings/feature_quality.md``.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np

from lrrich import io
from lrrich.claims import Above, All, Claim, Holds, measured
from lrrich.experiments import _data, _measure, _presets, _seeds

NAME = "feature-quality"
DESCRIPTION = "D Fig 7 / T Fig 7.7: per-feature intensity vs quality over training, 3 seeds"
EARLY_FRACTION = 0.25
"""The window "early in training" of the quality-gain rate: the first quarter of the run (D's
Fig 7 epochs are not legible; a quarter keeps early log points inside it at every scale)."""
FIRST_FEATURES = 20
"""The correlations run over the first 20 features in intensity order (T §7.3: 'In Fig. 7.7, we
observe the evolution of the first 20 features'), less the first (≈ constant)."""
SIGNIFICANCE = 0.05
"""Level of the one-sided Spearman test of each correlation (the conventional 5 %)."""
_CORRELATIONS = ("end_intensity_quality", "final_intensity_rate", "initial_intensity_rate")


@dataclasses.dataclass(frozen=True)
class Config(_presets.ImageTraining, _presets.Seeds):
    """Feature-quality settings (D Fig 7: ResNet18 on CIFAR-100; D App. F.4). Small scale: a ReLU
    MLP 784-128-128-10 on the 4,000 mnist5k digits, SGD 0.9, lr 0.05, 30 epochs, no schedule."""

    dataset: str = "mnist5k"
    model: str = "mlp"  # or another _data.MODELS entry
    width: int = 128
    depth: int = 2
    lr: float = 0.05
    epochs: int = 30
    log_points: int = 20  # log points after initialisation (the decomposition also at step 0)
    n_fit: int = 1000  # training images of S_fit (Nyström; ≥ the feature width p)
    n_eval: int = 1000  # test images of S_eval (inner products with the targets)
    schedule: str = "constant"  # or 'step' (× 0.2 every step_every_epochs, D's Fig 7)
    step_every_epochs: int = 60


SCALES = {
    "small": Config(),
    "paper": _presets.paper_scale(
        Config, "cifar100", model="resnet18", epochs=400, schedule="step", step_every_epochs=60,
        output_scale=0.1, weight_decay=1e-3, n_fit=5000, n_eval=5000,
    ),
}  # fmt: skip


def run(config: Config, run_dir: Path) -> dict:
    """Train one network per seed, decompose it at every log point, follow the features."""
    if config.n_fit < 2 or config.n_eval < 2 or config.log_points < 1:
        got = f"{config.n_fit}, {config.n_eval}, {config.log_points}"
        raise ValueError(f"n_fit and n_eval must be ≥ 2 and log_points ≥ 1, got {got}")
    data = _data.load_data(config, config.model)
    tc = _presets.train_config(config, len(data.x_train))
    total = (len(data.x_train) // tc.batch_size) * config.epochs
    seeds = _presets.seed_list(config)
    runs = _seeds.train_seeds(
        config.model, data, tc, seeds=seeds, width=config.width, depth=config.depth,
        run_dir=run_dir, log_every=max(total // config.log_points, 1),
        eval_size=min(256, len(data.x_test)), probe=functools.partial(_probe, config, data, total),
    )  # fmt: skip
    runs = [r["trajectory"] for r in runs]
    stats = [_statistics(r) for r in runs]
    means = _seeds.seed_mean(stats, [k for k in stats[0] if not k.endswith("_p")])
    summary = {"seeds": len(seeds), "n_features": runs[0]["n_features"],
               "test_acc_final": float(np.mean([r["test_acc"][-1] for r in runs])),
               "e1_constant_overlap_final": float(np.mean([r["e1_overlap"] for r in runs])),
               **means}  # fmt: skip
    return {"summary": summary,
            "per_seed": [{"seed": s, **st} for s, st in zip(seeds, stats, strict=True)],
            "trajectories": runs[0],
            "measured": _measured(stats, seeds, config, len(data.x_train))}  # fmt: skip


def _probe(config: Config, data, total: int, seed: int, model0):
    """One seed's (on_log, finish) for :func:`~lrrich.experiments._seeds.train_seeds`: the
    features on S_fit / S_eval at each log point; at the end, the features followed through
    training (:func:`metrics.feature_trajectories`) and the decomposition of the last point."""
    from metrics import feature_decomposition, feature_trajectories

    rng = np.random.default_rng(seed)
    fit = np.sort(rng.permutation(len(data.x_train))[: min(config.n_fit, len(data.x_train))])
    x_fit = data.x_train[fit]
    x_ev, y_ev = data.x_test[: config.n_eval], data.y_test[: config.n_eval]
    snaps: dict[str, list] = {"step": [], "phi_fit": [], "phi_ev": [], "out_ev": [], "acc": []}

    def log(record: dict, model) -> None:
        phi_ev, out_ev = _measure.forward(model, x_ev, config.output_scale)
        phi_fit = _measure.forward(model, x_fit, config.output_scale)[0]
        acc = float(np.mean(out_ev.argmax(1) == y_ev))
        for key, v in zip(snaps, (int(record["step"]), phi_fit, phi_ev, out_ev, acc), strict=True):
            snaps[key].append(v)

    def finish(model) -> dict:
        p = snaps["phi_fit"][0].shape[1]
        if len(fit) < p:
            raise ValueError(
                f"n_fit = {len(fit)} images < the feature width p = {p}: Nyström needs n ≥ p"
            )
        targets = np.eye(data.num_classes)[y_ev]
        phis = (snaps["phi_fit"], snaps["phi_ev"], snaps["out_ev"])
        traj = feature_trajectories(*phis, targets)
        end = feature_decomposition(*(phi[-1] for phi in phis), targets)
        order = np.argsort(traj.tracks.rank, axis=1)  # by intensity position at each time
        arrays = dict(
            rho=traj.rho, quality=traj.quality, utilization=traj.utilization,
            match_overlap=traj.tracks.overlap, rank=traj.tracks.rank,
            rho_by_rank=np.take_along_axis(traj.rho, order, axis=1),
            quality_by_rank=np.take_along_axis(traj.quality, order, axis=1),
        )  # fmt: skip
        return {"trajectory": {
            "step": snaps["step"], "epoch": [s / (total / config.epochs) for s in snaps["step"]],
            "test_acc": snaps["acc"], "n_features": int(p),
            **{k: v.tolist() for k, v in arrays.items()},
            "e1_overlap": float(end.e1_constant_overlap), "dlr_final": float(end.dlr),
        }}  # fmt: skip

    return log, finish


def _statistics(r: dict) -> dict:
    """One seed's correlations over features 2…:data:`FIRST_FEATURES` (tracked j = 1 … 19;
    ``*_all``: over all p − 1 non-constant features) and their one-sided p values."""
    from scipy import stats

    rho, q = np.asarray(r["rho"]), np.asarray(r["quality"])
    steps = np.asarray(r["step"], float)
    early = max(int(np.searchsorted(steps, EARLY_FRACTION * steps[-1], side="right")) - 1, 1)
    rate = (q[early] - q[0]) / (steps[early] - steps[0])
    out, pairs = {}, ((rho[-1], q[-1]), (rho[-1], rate), (rho[0], rate))
    for key, (a, b) in zip(_CORRELATIONS, pairs, strict=True):
        for suffix, sel in (("", slice(1, FIRST_FEATURES)), ("_all", slice(1, None))):
            res = stats.spearmanr(a[sel], b[sel], alternative="greater")
            out[f"{key}{suffix}"], out[f"{key}{suffix}_p"] = float(res.statistic), float(res.pvalue)
    out["early_step"] = float(steps[early])
    out["quality_top10_final"] = float(np.sum(q[-1, 1:11]))
    overlap = np.asarray(r["match_overlap"])[:, 1:FIRST_FEATURES]
    out["match_overlap_median"] = float(np.median(overlap))
    return out


_NOTE = (
    "quality on the test images, intensity from the training images (Nyström, T Alg. 1); the "
    "first eigenfunction (≈ constant, D App. D.2) is left out"
)
_TRACKED = (
    "; features named by their intensity order at the end and matched back through the log "
    "points by their largest total squared overlap (metrics.feature_trajectories)"
)


def _correlation_claim(key: str, source: str, quote: str, quantity: str, note: str) -> Claim:
    """The correlation ``key`` is significant in every seed (one-sided Spearman test) and
    positive over the seeds."""
    significant = (
        f"one-sided Spearman test (H1: correlation > 0) at level {SIGNIFICANCE:g} over features "
        f"2-{FIRST_FEATURES} (intensity order at the end), within each seed"
    )
    relation = All((Holds(f"{key}_significant", significant), Above(key, 0.0)))
    return Claim(
        key.replace("end_", "").replace("_", "-"), source, quote, quantity, "test", relation,
        paper="> 0 (positive correlation)", note=note,
    )  # fmt: skip


CLAIMS = (
    _correlation_claim("end_intensity_quality", "D §5 Fig 7; T Fig 7.7",
        "'feature quality correlates with feature intensity during training' (D §5); 'features "
        "with higher intensity also exhibit higher quality' (T Fig 7.7)",
        "Spearman(ρ_k, Q*_k) at the end of training, features 2-20 (T §7.3's 'first 20')", _NOTE),
    _correlation_claim("final_intensity_rate", "D §5 Fig 7; T §7.4.1",
        "'... with larger features improving faster' (D §5); 'larger features gain better "
        "quality faster' (T §7.4.1)",
        "Spearman(final ρ_j, rate of quality gain over the first quarter of training)",
        _NOTE + _TRACKED),
    _correlation_claim("initial_intensity_rate", "D §5 Fig 7",
        "'... with larger features improving faster' (D §5), read with the intensity at "
        "initialisation",
        "Spearman(ρ_j at initialisation, rate of quality gain over the first quarter)",
        _NOTE + _TRACKED),
)  # fmt: skip
"""D §5 / T §7's correlations: significant within every seed (a one-sided Spearman test), and
positive over the seeds."""


def _measured(stats: list[dict], seeds: list[int], config: Config, n_train: int) -> dict:
    """The per-seed record the claims read (:func:`lrrich.claims.measured`): each correlation,
    its one-sided p, whether it is significant, and the same over all non-constant features."""
    values = {}
    for key in _CORRELATIONS:
        for suffix in ("", "_p", "_all"):
            values[f"{key}{suffix}"] = [s[f"{key}{suffix}"] for s in stats]
        significant = [s[key] > 0 and s[f"{key}_p"] < SIGNIFICANCE for s in stats]
        values[f"{key}_significant"] = [float(v) for v in significant]
    net = f"{config.model.upper()} width {config.width}"
    net += f" x{config.depth}" if config.model == "mlp" else ""
    deviations = _presets.partial_batch_deviation(n_train, config.batch_size)
    if config.model != "resnet18":
        deviations.append(f"an MLP on {config.dataset} instead of D's ResNet18 on CIFAR-100")
    return measured(
        values, seeds=seeds, deviations=deviations,
        dataset=f"{config.dataset} (S_fit {config.n_fit} train / S_eval {config.n_eval} test)",
        scale=f"{net}, {config.optimizer} lr {config.lr:g}, {config.epochs} epochs, "
        f"{config.log_points} log points",
    )  # fmt: skip


_NULL = 1e-10
"""ρ_k/ρ_1 below this is a numerically null mode (dead ReLU units; float32 round-off of a zero
singular value is ≈ 1e-7·s₁, i.e. 1e-14 in ρ): left out of the figure."""


def plot(results: dict, run_dir: Path) -> list[Path]:
    """``feature_quality.png``: D Fig 7's panels for the first seed."""
    import matplotlib.pyplot as plt

    r = results["trajectories"]
    epochs = np.asarray(r["epoch"])
    q_rank, rho_rank = np.asarray(r["quality_by_rank"]), np.asarray(r["rho_by_rank"])
    q = np.asarray(r["quality"])
    n_t, p = q.shape
    k = np.arange(1, p + 1)
    shown = np.unique(np.round(np.geomspace(1, n_t, 6)).astype(int) - 1)
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.6))
    for t in shown:
        c, lab = plt.get_cmap("viridis")(t / max(n_t - 1, 1)), f"epoch {epochs[t]:.3g}"
        live = rho_rank[t] / rho_rank[t, 0] > _NULL  # dead units give null modes: not shown
        axes[0].plot(k[live], q_rank[t, live], "o-", ms=2, color=c, label=lab)
        axes[1].plot(k[live], rho_rank[t, live] / rho_rank[t, 0], "o-", ms=2, color=c)
        live[0] = False  # the constant mode
        axes[2].scatter(rho_rank[t, live], q_rank[t, live], s=6, color=c, label=lab)
    axes[0].set(xscale="log", xlabel="feature k (intensity order)", ylabel="quality Q*_k",
                title="(a) quality per feature")  # fmt: skip
    axes[1].set(xscale="log", yscale="log", xlabel="feature k", ylabel="ρ_k / ρ_1",
                title="(b) relative intensity")  # fmt: skip
    axes[2].set(xscale="log", xlabel="intensity ρ_k", ylabel="quality Q*_k",
                title="(c) intensity vs quality (k ≥ 2)")  # fmt: skip
    axes[0].legend(fontsize=6)
    top = min(20, p)
    for j in range(1, top):
        axes[3].plot(epochs, q[:, j], color=plt.get_cmap("plasma")(j / top), lw=1)
    title = f"(d) features 2-{top} followed in time\n(colour: final intensity order)"
    axes[3].set(xlabel="epoch", ylabel="quality Q*_j(t)", title=title)
    fig.suptitle("feature quality vs intensity over training (D Fig 7, T Fig 7.7)", fontsize=9)
    fig.tight_layout()
    return [io.save_figure(fig, run_dir / "feature_quality.png")]
