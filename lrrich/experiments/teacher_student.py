"""K Fig 1(b): scale τ × geometry δ sweep of a ReLU student learning a ReLU teacher.

Setup (K App. D.1): teacher f*(x) = Σ_{i≤k} a*_i relu(w*_iᵀx), x ~ Unif(S^{d−1}); student of width h
from the symmetrised base init (f ≡ 0 at t = 0) rescaled per (τ, δ): w_i → (τ/α) w_i, a_i → τα a_i,
δ = τ²(α² − α^{−2}); full-batch GD on ½·(1/n)Σ(f − y)² at lr ``lr_scale/τ²``. Paper: lazy at large
τ, rich at small τ; the smallest test loss at small τ and δ > 0 (upstream).

Command: ``lrrich run teacher-student`` (d = 20, h = 50, n = 200, 6 τ × 5 δ, 3 seeds, 4,000 GD
steps). ``--scale paper`` is K's size (d = 100, k = 3, n = 1000, 16 seeds); choices where K is
silent: 10⁵ GD steps and a 10 τ × 11 δ grid.
Expected (seeds 0–2): the lowest test loss, 2.0e-4, at τ = 0.1, δ = 0.5 in every seed
(downstream 4.2e-3, lazy τ = 2 6.4e-3); kernel distance 0.224 upstream vs 4.0e-4 lazy.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from lrrich import io
from lrrich.claims import All, Holds, Less, measured, quoting
from sims import piecewise_linear as pl

NAME = "teacher-student"
DESCRIPTION = "K Fig 1(b): test loss and kernel distance over scale tau x geometry delta (ReLU)"


@dataclasses.dataclass(frozen=True)
class Config:
    """K App. D.1; the defaults are a CPU-small K Fig 1(b)."""

    seed: int = 0  # PRNG seed split into the n_seeds draws
    d: int = 20  # input dimension
    h: int = 50  # student width (even: symmetrised init)
    k: int = 3  # teacher width
    n_train: int = 200  # training points n
    n_test: int = 2000  # held-out test points
    taus: tuple[float, ...] = (0.1, 0.18, 0.33, 0.6, 1.1, 2.0)  # scales τ, log-spaced in [0.1, 2]
    deltas: tuple[float, ...] = (-1.0, -0.5, 0.0, 0.5, 1.0)  # geometries δ
    n_seeds: int = 3  # teacher / data / init draws, vmapped together
    steps: int = 4000  # gradient-descent steps
    lr_scale: float = 5e-3  # learning rate lr_scale / τ²
    n_save: int = 20  # saved points along each trajectory


SCALES = {
    "small": Config(),
    "paper": Config(d=100, h=50, k=3, n_train=1000, n_test=10000,
                    taus=tuple(float(v) for v in np.geomspace(0.1, 2.0, 10)),
                    deltas=tuple(float(v) for v in np.linspace(-1.0, 1.0, 11)),
                    n_seeds=16, steps=100_000, n_save=100),
}  # fmt: skip


def _sphere(key, shape):
    x = jax.random.normal(key, shape)
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


def _problem(key, cfg: Config):
    """Teacher, train/test data and the symmetrised base student initialisation for one seed."""
    kt, ka, kx, kxt, kw, ks = jax.random.split(key, 6)
    w_t = _sphere(kt, (cfg.k, cfg.d))
    a_t = jnp.where(jax.random.bernoulli(ka, 0.5, (cfg.k,)), 1.0, -1.0)
    X = _sphere(kx, (cfg.n_train, cfg.d))
    Xt = _sphere(kxt, (cfg.n_test, cfg.d))
    y, yt = (pl.network(a_t, w_t, x) for x in (X, Xt))
    w = _sphere(kw, (cfg.h // 2, cfg.d))
    a = jnp.where(jax.random.bernoulli(ks, 0.5, (cfg.h // 2,)), 1.0, -1.0)
    return X, y, Xt, yt, jnp.concatenate([a, -a]), jnp.concatenate([w, w])


def _train(tau, delta, X, y, Xt, yt, a_base, W_base, cfg: Config):
    """One student at (τ, δ): GD trajectory → test loss, kernel & Hamming distance, train loss."""
    r = delta / tau**2
    alpha = jnp.sqrt((r + jnp.sqrt(r**2 + 4.0)) / 2.0)  # δ = τ²(α² − α^{−2})
    a0, W0 = tau * alpha * a_base, (tau / alpha) * W_base
    t = cfg.lr_scale / tau**2 * (cfg.steps // cfg.n_save) * jnp.arange(cfg.n_save + 1)
    # Mean loss ½(1/n)Σρ² = the sum-convention flow of sims.piecewise_linear on (X, y)/√n.
    s = 1.0 / jnp.sqrt(jnp.asarray(X.shape[0], X.dtype))
    traj = pl.solve(a0, W0, X * s, y * s, t, n_substeps=cfg.steps // cfg.n_save, method="euler")
    test = jax.vmap(lambda a, W: 0.5 * jnp.mean((pl.network(a, W, Xt) - yt) ** 2))(traj.a, traj.W)
    K = jax.vmap(lambda a, W: pl.ntk(a, W, X))(traj.a, traj.W)
    C = jax.vmap(lambda W: pl.activation_pattern(W, X))(traj.W)
    return {"time": t, "test_loss": test, "train_loss": traj.loss,
            "kernel_distance": pl.kernel_distance(K[0], K),
            "hamming_distance": pl.hamming_distance(C[0], C)}  # fmt: skip


def run(config: Config, run_dir: Path) -> dict:
    """Sweep (seed, τ, δ) with vmaps; per-(τ, δ) curves averaged over seeds."""
    cfg = config
    if cfg.h % 2:
        raise ValueError(f"h must be even for the symmetrised initialisation, got {cfg.h}")
    if cfg.steps % cfg.n_save:
        raise ValueError(f"steps ({cfg.steps}) must be a multiple of n_save ({cfg.n_save})")
    grid = jnp.meshgrid(jnp.asarray(cfg.taus), jnp.asarray(cfg.deltas), indexing="ij")
    tt, dd = (v.ravel() for v in grid)

    def per_seed(key):
        X, y, Xt, yt, a_b, W_b = _problem(key, cfg)
        return jax.vmap(lambda ta, de: _train(ta, de, X, y, Xt, yt, a_b, W_b, cfg))(tt, dd)

    keys = jax.random.split(jax.random.PRNGKey(cfg.seed), cfg.n_seeds)
    out = jax.jit(lambda ks: jax.lax.map(per_seed, ks))(keys)
    shape = (len(cfg.taus), len(cfg.deltas), cfg.n_save + 1)
    mean = {k: np.asarray(v).mean(axis=0).reshape(shape) for k, v in out.items()}
    final = {k: v[..., -1] for k, v in mean.items() if k != "time"}
    loss = final["test_loss"]
    i, j = np.unravel_index(np.argmin(loss), loss.shape)
    summary = {"best_test_loss": float(loss[i, j]), "best_tau": float(cfg.taus[i]),
               "best_delta": float(cfg.deltas[j]),
               **{k: float(v) for k, v in _read(loss, final["kernel_distance"], cfg).items()},
               "max_final_train_loss": float(final["train_loss"].max())}  # fmt: skip
    seeds_final = {k: np.asarray(out[k])[..., -1].reshape(cfg.n_seeds, *shape[:2])
                   for k in ("test_loss", "kernel_distance")}  # fmt: skip
    return {"summary": summary, "taus": list(cfg.taus), "deltas": list(cfg.deltas),
            "time_over_tau2": (np.asarray(out["time"])[0, 0] * cfg.taus[0] ** 2).tolist(),
            "final": {k: v.tolist() for k, v in final.items()},
            "curves": {k: v.tolist() for k, v in mean.items() if k != "time"},
            "measured": _measured(seeds_final, cfg)}  # fmt: skip


def _read(loss, kd, cfg: Config) -> dict:
    """Final test loss and kernel distance (…, n_tau, n_delta) at the first τ and the largest and
    smallest δ, and at the last τ and the middle δ."""
    mid = len(cfg.deltas) // 2
    return {"test_loss_small_tau_upstream": loss[..., 0, -1],
            "test_loss_small_tau_downstream": loss[..., 0, 0],
            "test_loss_large_tau_balanced": loss[..., -1, mid],
            "kernel_distance_small_tau_upstream": kd[..., 0, -1],
            "kernel_distance_large_tau_balanced": kd[..., -1, mid]}  # fmt: skip


def _measured(final: dict, cfg: Config) -> dict:
    """Per seed: is the lowest test loss at the smallest τ with δ > 0; the :func:`_read` values."""
    loss = np.asarray(final["test_loss"])
    best_at = [np.unravel_index(np.argmin(x), x.shape) for x in loss]
    i_small = int(np.argmin(cfg.taus))
    best = [float(i == i_small and cfg.deltas[j] > 0) for i, j in best_at]
    read = _read(loss, np.asarray(final["kernel_distance"]), cfg)
    return measured(
        {"best_is_small_tau_upstream": best, **read},
        seeds=list(range(cfg.n_seeds)),  # the draws of jax.random.split(PRNGKey(seed))
        dataset=f"ReLU teacher (k = {cfg.k}) on the sphere, d = {cfg.d}, {cfg.n_train} train / "
        f"{cfg.n_test} test",
        scale=f"student h = {cfg.h}, tau {min(cfg.taus):g}-{max(cfg.taus):g}, delta "
        f"{min(cfg.deltas):g}-{max(cfg.deltas):g}, {cfg.steps} GD steps, the {cfg.n_seeds} draws "
        f"of seed {cfg.seed}",
    )


_row = quoting("K Fig 1(b)", "Lazy learning happens when τ is large, rich learning happens when "
               "τ is small, and rapid rich learning happens when both τ is small and δ is large "
               "– an upstream initialization. This initialization also leads to the smallest "
               "test loss")  # fmt: skip
_UP = "test_loss_small_tau_upstream"
CLAIMS = (
    _row("lowest-test-loss",
         "the grid's lowest final test loss: at the smallest τ with δ > 0 (upstream)",
         Holds("best_is_small_tau_upstream", "the grid minimum of the seed's test loss"),
         "small τ, δ > 0"),
    _row("test-loss-order",
         "final test loss: small-τ upstream below small-τ downstream and below large-τ balanced",
         All((Less(_UP, "test_loss_small_tau_downstream"), Less(_UP, "test_loss_large_tau_balanced"))),
         "upstream smallest"),
    _row("kernel-distance",
         "kernel distance S(0, t) of the training-set NTK (the paper's measure of rich learning "
         "is read on the training inputs): small-τ upstream (rich) above large-τ balanced (lazy)",
         Less("kernel_distance_large_tau_balanced", "kernel_distance_small_tau_upstream"),
         "rich (moves) vs lazy (stays)", split="train"),
)  # fmt: skip
"""K Fig 1(b) over the ``n_seeds`` teacher / data / init draws."""


def plot(results: dict, run_dir: Path) -> list[Path]:
    """Heat maps over (δ, τ) of final test loss, kernel distance, Hamming distance (K Fig 1b, 10)."""
    import matplotlib.pyplot as plt

    taus, deltas = results["taus"], results["deltas"]
    panels = {"test_loss": "log10 test loss", "kernel_distance": "kernel distance S(0, T)",
              "hamming_distance": "Hamming distance"}  # fmt: skip
    fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), 3.8), layout="constrained")
    for ax, (key, title) in zip(axes, panels.items(), strict=True):
        val = np.asarray(results["final"][key])
        img = np.log10(np.maximum(val, 1e-300)) if key == "test_loss" else val
        fig.colorbar(ax.imshow(img, origin="lower", aspect="auto", cmap="viridis"), ax=ax)
        ax.set(xticks=range(len(deltas)), xticklabels=[f"{v:g}" for v in deltas],
               yticks=range(len(taus)), yticklabels=[f"{v:.2g}" for v in taus],
               xlabel="δ (geometry)", ylabel="τ (scale)", title=title)  # fmt: skip
    fig.suptitle("ReLU teacher–student (K Fig 1b, reduced size)")
    return [io.save_figure(fig, Path(run_dir) / "teacher_student_heatmaps.png")]
