"""T Fig 4.2, 4.3 and C.1: time, data, parameter and compute scaling laws of the multilinear model.

The multilinear skill model is simulated in closed form (:mod:`sims.scaling_laws`) and power laws
are fitted in log-log over stated windows; the fitted exponents are compared with Table 4.1:
−α/(α+1) (time), −α/(α+1) (data), −α (parameters), −α/(α+2) (compute). Fig C.1 compares a
finite-N time curve (N = 50,000, α = 0.1) with the plain and the finite-N-corrected law (Eq C.2).
"Infinite" resources are exact: skills beyond the simulated ``n_sim`` contribute their untouched
loss analytically (Hurwitz ζ), so only the bottleneck resource is finite.

Command: ``lrrich run scaling-laws --out runs/scaling-laws`` (``--scale tiny`` for a quick look).
Expected: every fitted exponent within 0.02 of the theory for α ∈ {0.3, 0.6} (measured: within
0.002), the compute-optimal N* ∝ C^{1/(α+2)}, the corrected law tracking the N = 50,000 curve.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np

from lrrich import io
from lrrich.claims import TOLERANCES, Claim, Less, Value, measured
from sims import scaling_laws as sl

NAME = "scaling-laws"
DESCRIPTION = "T Fig 4.2-4.3, C.1: multilinear-model scaling laws in T, D, N, C vs Table 4.1"
PAPER = {"exponents": "time/data -a/(a+1), params -a, compute -a/(a+2)"}


@dataclasses.dataclass(frozen=True)
class Config:
    """Scaling-law simulations; fitting windows are inclusive ranges of the resource."""

    seed: int = 0  # PRNG seed of the sampled data sets
    alphas: tuple[float, ...] = (0.3, 0.6)  # skill-distribution exponents α (T Eq 4.1)
    S: float = 1.0  # target scale
    r0: float = 1e-3  # R_k(0) (balanced small initialisation)
    eta: float = 1.0  # learning rate η
    n_sim: int = 1_000_000  # skills simulated explicitly (the rest analytically)
    T_window: tuple[float, float] = (1e3, 1e6)  # fit window of the time law
    D_window: tuple[float, float] = (1e3, 1e6)  # fit window of the data law
    N_window: tuple[float, float] = (1e2, 1e5)  # fit window of the parameter law
    C_window: tuple[float, float] = (1e4, 1e9)  # fit window of the compute frontier
    data_draws: int = 2  # sampled data sets per D for the simulated data curve
    data_n_s: int = 1_000_000  # skills tracked in the sampled data sets (the rest analytically)
    c1_alpha: float = 0.1  # α of Fig C.1
    c1_N: int = 50_000  # the finite N of Fig C.1
    tolerance: float = TOLERANCES["exponent"].value  # the summary's "all within tolerance"


SCALES = {
    "small": Config(),
    "paper": Config(),
    "tiny": Config(
        n_sim=20_000, T_window=(1e2, 1e4), D_window=(1e2, 1e4), N_window=(1e1, 1e3),
        C_window=(1e3, 1e6), data_n_s=100_000, data_draws=4, c1_N=5_000, tolerance=0.05,
    ),
}  # fmt: skip

_LAWS = (
    # fit name, resource, Table 4.1's exponent in words
    ("time", "T", "-a/(a+1)"),
    ("data", "D", "-a/(a+1)"),
    ("data_sampled", "D (sampled data sets)", "-a/(a+1)"),
    ("params", "N", "-a"),
    ("compute", "C (compute-optimal frontier)", "-a/(a+2)"),
    ("compute_N", "N* vs C", "1/(a+2)"),
)


def run(config: Config, run_dir: Path) -> dict:
    """Simulate the four laws for each α, fit exponents, and the Fig C.1 correction."""
    windows = {"T": config.T_window, "D": config.D_window, "N": config.N_window}
    summary = {"windows": {**windows, "C": config.C_window}}
    out, max_dev = {}, 0.0
    for ia, a in enumerate(config.alphas):
        out[str(a)] = r = _laws(config, a, jax.random.fold_in(jax.random.key(config.seed), ia))
        for name, _, _ in _LAWS:
            e, theory = r["fits"][name]["exponent"], r["theory"][name]
            max_dev = max(max_dev, abs(e - theory))
            summary[f"a={a} {name} exponent"] = e
            summary[f"a={a} {name} theory"] = theory
    c1 = _finite_n(config)
    m = (c1["T"] >= 1e2) & (c1["T"] <= 1e5)
    for law, key in (("plain", "law"), ("corrected", "corrected")):
        log_err = np.abs(np.log(np.asarray(c1[key])[m] / np.asarray(c1["L"])[m]))
        summary[f"C1 max log-error, {law} law"] = float(np.max(log_err))
    summary["max |fitted - theory| exponent"] = max_dev
    summary["all within tolerance"] = bool(max_dev <= config.tolerance)
    return {"summary": summary, "alphas": out, "C1": c1, "measured": _measured(summary, config)}


def _grid(window, lo_pad=1.0, hi_pad=1.0, per_decade=10):
    lo, hi = np.log10(window[0]) - lo_pad, np.log10(window[1]) + hi_pad
    return np.logspace(lo, hi, int(round((hi - lo) * per_decade)) + 1)


def _laws(config: Config, a: float, key) -> dict:
    """One α: the time, data, parameter and compute curves, their fits and Table 4.1's laws."""
    S, r0, eta = config.S, config.r0, config.eta
    T, D = _grid(config.T_window, hi_pad=0.0), _grid(config.D_window, hi_pad=0.0)
    Ds = _grid(config.D_window, hi_pad=0.0, per_decade=3)
    N = np.unique(_grid(config.N_window).astype(int))
    C = _grid(config.C_window, per_decade=10)
    Nc = np.unique(np.logspace(1, np.log10(config.C_window[1]) / 2 + 1, 81).astype(int))
    # keep the analytic tail exact: skill n_sim must not have started at the largest T
    L_T = sl.time_curve(T, a, S, r0, eta, n_sim=config.n_sim)
    L_D = sl.expected_data_loss(D, a, S, n_sim=config.n_sim)
    L_Ds = sl.data_curve(key, Ds, a, S, n_sim=config.data_n_s, n_draws=config.data_draws)
    L_N = sl.parameter_curve(N, a, S)
    L_C = sl.compute_curves(C, Nc, a, S, r0, eta)
    L_star, N_star = sl.compute_frontier(C, Nc, L_C)
    fit = sl.fit_power_law
    fits = {"time": fit(T, L_T, config.T_window), "data": fit(D, L_D, config.D_window),
            "data_sampled": fit(Ds, L_Ds, config.D_window),
            "params": fit(N, L_N, config.N_window), "compute": fit(C, L_star, config.C_window),
            "compute_N": fit(C, N_star, config.C_window)}  # fmt: skip
    ex, pf = sl.exponents(a), sl.prefactors(a, S, r0, eta)
    table = {name: name.removesuffix("_sampled") for name in fits}  # Table 4.1's field
    return {
        "T": T, "L_T": L_T, "D": D, "L_D": L_D, "D_sampled": Ds, "L_D_sampled": L_Ds,
        "N": N, "L_N": L_N, "C": C, "N_compute": Nc, "L_C": L_C, "L_star": L_star,
        "N_star": N_star,
        "fits": {k: {"exponent": v[0], "prefactor": v[1]} for k, v in fits.items()},
        "theory": {k: float(getattr(ex, f)) for k, f in table.items()},
        "theory_prefactor": {k: float(getattr(pf, f)) for k, f in table.items()},
    }  # fmt: skip


def _finite_n(config: Config) -> dict:
    """Fig C.1: the time curve at N = ``c1_N`` with the plain and the corrected law (Eq C.2)."""
    a, S, r0, eta = config.c1_alpha, config.S, config.r0, config.eta
    T = np.logspace(0, 6, 61)
    return {"T": T, "L": sl.time_curve(T, a, S, r0, eta, n_s=config.c1_N),
            "law": sl.prefactors(a, S, r0, eta).time * T ** float(sl.exponents(a).time),
            "corrected": sl.finite_n_time_law(T, a, config.c1_N, S, r0, eta)}  # fmt: skip


def _exponent_claim(name: str, resource: str, law: str) -> Claim:
    return Claim(
        f"{name}-exponent", "T Table 4.1 (§4.3), Fig 4.2-4.3",
        f"the loss scales as a power law of the bottleneck resource {resource} with exponent "
        f"{law} (a + 1 the exponent of the skill distribution, Eq 4.1)",
        f"{resource} exponent: largest |fitted − theory| over the α values", "exact",
        Value(f"{name}_exponent_error", 0.0, "exponent"), paper=law,
    )  # fmt: skip


CLAIMS = (
    *(_exponent_claim(*law) for law in _LAWS),
    Claim(
        "finite-N-correction", "T App. C Fig C.1, Eq C.2",
        "at finite N the time law bends away from the power law and the finite-N correction "
        "tracks it",
        "max log-error against the finite-N time curve, corrected (Eq C.2) vs plain law", "exact",
        Less("c1_corrected_log_error", "c1_plain_log_error"),
        paper="the corrected law tracks the finite-N curve",
    ),
)  # fmt: skip
"""T Table 4.1 and Fig C.1 as one exact computation (closed-form curves)."""


def _measured(summary: dict, config: Config) -> dict:
    """The one exact computation the claims read: per law the largest |fitted − theory| over
    the α values, and the Fig C.1 log-errors."""
    error = lambda name, a: abs(summary[f"a={a} {name} exponent"] - summary[f"a={a} {name} theory"])
    values = {f"{n}_exponent_error": [max(error(n, a) for a in config.alphas)] for n, _, _ in _LAWS}
    values["c1_plain_log_error"] = [summary["C1 max log-error, plain law"]]
    values["c1_corrected_log_error"] = [summary["C1 max log-error, corrected law"]]
    return measured(
        values, exact=True, dataset="multilinear skill model, closed form (Hurwitz zeta tail)",
        scale=f"alphas {', '.join(f'{a:g}' for a in config.alphas)}; windows T {config.T_window}, "
        f"D {config.D_window}, N {config.N_window}, C {config.C_window}; Fig C.1: N = "
        f"{config.c1_N:,}, alpha {config.c1_alpha:g}, T from 1e2 to 1e5",
    )  # fmt: skip


def plot(results: dict, run_dir: Path) -> list[Path]:
    """Fig 4.2 (T, D, N), Fig 4.3 (compute) and Fig C.1; simulation solid, laws dotted."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for a, r in results["alphas"].items():
        panels = (("T", "L_T", "time", "time T"), ("D", "L_D", "data", "data D"),
                  ("N", "L_N", "params", "parameters N"))  # fmt: skip
        for ax, (x, y, name, lab) in zip(axes, panels, strict=True):
            xx, theory = np.asarray(r[x]), r["theory"][name]
            (line,) = ax.loglog(xx, r[y], "-", label=f"α={a} model")
            fit = r["fits"][name]["exponent"]
            ax.loglog(xx, r["theory_prefactor"][name] * xx**theory, ":", color=line.get_color(),
                      label=f"α={a}: theory {theory:.3f}, fit {fit:.3f}")  # fmt: skip
            ax.set(xlabel=lab, ylabel="loss")
            ax.legend(fontsize=7)
        axes[1].loglog(r["D_sampled"], r["L_D_sampled"], "o", ms=3, color="k")
    paths = [io.save_figure(fig, Path(run_dir) / "scaling_laws_TDN.png")]

    fig, axes = plt.subplots(1, len(results["alphas"]), figsize=(6 * len(results["alphas"]), 4))
    for ax, (a, r) in zip(np.atleast_1d(axes), results["alphas"].items(), strict=True):
        C, L, theory = np.asarray(r["C"]), np.asarray(r["L_C"]), r["theory"]["compute"]
        cols = plt.cm.viridis(np.linspace(0, 1, L.shape[0]))
        for i in range(0, L.shape[0], max(1, L.shape[0] // 12)):
            ax.loglog(C, L[i], "-", color=cols[i], lw=0.8)
        ax.loglog(C, r["L_star"], "k-", lw=2, label="compute-optimal")
        fit = r["fits"]["compute"]["exponent"]
        ax.loglog(C, r["theory_prefactor"]["compute"] * C**theory, "r:",
                  label=f"theory {theory:.3f}, fit {fit:.3f}")  # fmt: skip
        ax.set(xlabel="compute C = T N", ylabel="loss", title=f"α = {a}")
        ax.legend(fontsize=7)
    paths.append(io.save_figure(fig, Path(run_dir) / "scaling_laws_compute.png"))

    c1 = results["C1"]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(c1["T"], c1["L"], "-", label="model, N = n_s finite")
    ax.loglog(c1["T"], c1["law"], ":", label="law −α/(α+1)")
    corrected = np.clip(c1["corrected"], 1e-6, None)
    ax.loglog(c1["T"], corrected, "--", label="finite-N corrected (Eq C.2)")
    ax.set(xlabel="time T", ylabel="loss")
    ax.legend()
    paths.append(io.save_figure(fig, Path(run_dir) / "scaling_laws_C1.png"))
    return paths
