"""The "Paper vs measured" rows every paper experiment returns as ``results["comparison"]``.

Each row states one quantity the paper reports, the value it reports, the value this run
measured, the dataset and scale that produced it, the test that decides (``criterion``: the
paper's claim quoted with its place; ``tolerance``: a :data:`TOLERANCES` entry or the statistical
test, in words), the per-seed values behind the measurement, for a D_LR the random-feature
reference at the run's n, p and rank (:func:`rf_reference`), and a verdict:

* ``'reproduced'`` — the paper's value or outcome within the stated tolerance, in every seed;
* ``'direction reproduced'`` — the same ordering or sign of change, a different magnitude;
* ``'not reproduced'`` — neither;
* ``'inconclusive'`` — the seeds disagree about what would decide: some seeds inside the
  tolerance and some outside (:func:`within`), or an ordering that neither holds in every seed
  nor passes a one-sided Welch t test (:func:`ordered`).

``note`` says why, in a sentence. Every tolerance a verdict uses is named in :data:`TOLERANCES`,
with where its value comes from. One seed (n = 1) has no spread of its own: it decides a
tolerance or an ordering by itself, except that a single D_LR decides a boundary or an ordering
only when it is farther from it than ``dlr_seed_spread`` (``ordered(..., one_seed_spread=…)``,
:func:`below`); the row's ``n_seeds`` says how many seeds stand behind it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from sims.tolerances import CLOSED_FORM_VS_FLOW

VERDICTS = ("reproduced", "direction reproduced", "not reproduced", "inconclusive")


class Tolerance(NamedTuple):
    """How far a measured value may be from the paper's and still count as its value."""

    value: float  # the allowed difference
    relative: bool  # True: |measured / paper − 1| ≤ value; False: |measured − paper| < value
    source: str  # why this value


TOLERANCES: dict[str, Tolerance] = {
    "dlr": Tolerance(
        0.05,
        False,
        "D and S quote D_LR to two digits, and their rich and lazy networks differ by 0.3-0.6 "
        "(D Fig 1: 0.0087 vs 0.63): within 0.05 a run sits at the paper's value",
    ),
    "dlr_close_values": Tolerance(
        0.02,
        False,
        "S's ResNet18 learning rates give D_LR 0.053 / 0.025 / 0.039, closer to each other "
        "than 0.05: a match must tell them apart",
    ),
    "accuracy": Tolerance(
        0.05,
        False,
        "5 accuracy points: the papers report one seed, and runs of a seed differ by ~1-3 "
        "points here (resnet-lr's three seeds: sample std 0.2-1.0 points)",
    ),
    "train_accuracy": Tolerance(
        0.02,
        False,
        "training accuracy of a network that fits (D Fig 1: 100 % / 98.7 %): 2 points, as on "
        "chance accuracy, since a fit differs between seeds by a few images only",
    ),
    "chance_accuracy": Tolerance(
        0.02,
        False,
        "accuracy at chance (10 classes: 10 %); 2 points is about 3 binomial standard "
        "deviations on 1,000-10,000 test images",
    ),
    "constant": Tolerance(
        0.25,
        True,
        "T §5.2 quotes its calibrated constants (𝓑², D_c, N_c) to one or two digits, from its "
        "own calibration networks; also a predicted emergence step against the network's",
    ),
    "d_eff": Tolerance(
        0.2,
        True,
        "|D_eff − C| ≤ 0.2 C counts as D_eff ≈ C (T Table 2.2's MF-regime values are within "
        "4 % of C; five times that margin at the small scale's 10 classes)",
    ),
    "d_eff_loose": Tolerance(
        0.5,
        True,
        "resnet-lr's MF check, a looser reading of T Table 2.2's D_eff ≈ C for its small "
        "scale (k = 4, 1,024 images, C = 10); mf-regime's stricter reading is 'd_eff'",
    ),
    "dlr_seed_spread": Tolerance(
        0.02,
        False,
        "the seed-to-seed spread of a trained network's D_LR: resnet-lr's three seeds give a "
        "sample std of 0.012-0.021 (docs/findings/resnet_lr.md); a single seed closer than "
        "this to a boundary or to the value it is ordered against decides nothing",
    ),
    "closed_form": Tolerance(
        CLOSED_FORM_VS_FLOW[np.dtype("float64")],
        False,
        "a closed form against the float64 integration of the same gradient flow, relative to "
        "the target scale: sims.tolerances' closed_form_vs_flow (Dopri8 at rtol 1e-12 reaches "
        "~1e-10 on these flows)",
    ),
    "gd_discretisation": Tolerance(
        1e-2,
        False,
        "plain gradient descent against the gradient-flow closed form, in units of the mode "
        "strength (0 to 1): its discretisation error is O(lr·t), lr·t = 8e-3 at lambda-balanced's "
        "lr 1e-3 and t = 8",
    ),
    "exponent": Tolerance(
        0.02,
        False,
        "a power law fitted over a finite window of a closed-form loss curve against T Table "
        "4.1's asymptotic exponent (the scaling-laws config's `tolerance`); the fits land "
        "within 0.002",
    ),
    "fraction_of_init": Tolerance(
        0.05,
        False,
        "a measure normalised to 1.0 at initialisation (‖θ‖²/‖θ₀‖², 1 − S_init) against a "
        "paper value quoted to two digits (D Fig 2(a)'s 0.20): 5 points of the initial value",
    ),
    "invariant": Tolerance(
        0.1,
        True,
        "S's table calls S_init and ‖θ‖² 'invariant to α' without numbers; a measure counts as "
        "invariant when it stays within 10 % of its value at the smallest α over the α that fit "
        "their data (D_LR changes by more than 100 % over the same α)",
    ),
}
"""Named verdict tolerances (:func:`close`), one entry per kind of quantity."""

MF_BOUNDARY = 0.1
"""D_LR below this is the minimum-feature (MF) regime: κ_CKA < ε with ε = 0.1 (T Definition 2)."""


ORDER_ALPHA = 0.05
"""Level of the one-sided Welch t test :func:`ordered` falls back on when an ordering does not
hold in every seed (the conventional 5 %)."""

ORDER_TEST = (
    "the ordering in every seed, else a one-sided Welch t test at level 0.05 over the seeds; "
    "inconclusive otherwise"
)
"""The test :func:`ordered` applies, in words, for a row's ``tolerance``."""


_ROUND_OFF = 1e-9  # relative: far above float64 round-off of a difference, far below any tolerance


def close(measured: float, paper: float, kind: str) -> bool:
    """Whether ``measured`` is the paper's value within ``TOLERANCES[kind]`` (NaN: never).

    An absolute bound is strict and decided on the decimal values: a gap that equals the bound up
    to float round-off (15.0 % against 10.0 % with 5 points: 0.15 − 0.1 = 0.04999…) is not inside.
    """
    tol = TOLERANCES[kind]
    if tol.relative:
        return bool(abs(measured / paper - 1) <= tol.value)
    return bool(abs(measured - paper) < tol.value * (1 - _ROUND_OFF))


def tolerance(kind: str) -> str:
    """``TOLERANCES[kind]`` in words for a row's ``tolerance``: the bound and its source."""
    if kind not in TOLERANCES:
        raise ValueError(f"unknown tolerance {kind!r}; choose one of {list(TOLERANCES)}")
    tol = TOLERANCES[kind]
    bound = (
        f"|measured / paper - 1| <= {tol.value:g}"
        if tol.relative
        else f"|measured - paper| < {tol.value:g}"
    )
    return f"{kind}: {bound} in every seed ({tol.source})"


def within(values, paper: float, kind: str) -> bool | None:
    """Whether the per-seed ``values`` are the paper's value within ``TOLERANCES[kind]``.

    Args:
      values: (n_seeds,) measured values, one per seed (NaN is never close).
      paper: the paper's value.
      kind: a :data:`TOLERANCES` key.

    Returns:
      True when every seed is within the tolerance, False when none is, None (inconclusive)
      when the seeds straddle the bound.
    """
    hits = [close(float(v), paper, kind) for v in _seed_values(values)]
    if all(hits):
        return True
    return False if not any(hits) else None


def ordered(
    low,
    high,
    *,
    margin: float = 0.0,
    alpha: float = ORDER_ALPHA,
    one_seed_spread: str | None = None,
) -> bool | None:
    """Whether ``low < high − margin`` holds over the seeds (test: :data:`ORDER_TEST`).

    The ordering holds when it holds in every seed (``low[i] < high[i] − margin``, paired by
    seed) or when a one-sided Welch t test rejects ``mean(low) ≥ mean(high) − margin`` at level
    ``alpha``; it is refuted when the reverse (``low[i] ≥ high[i] − margin``) holds in every
    seed or passes the reverse test; otherwise it is undecided. One seed has no spread of its
    own: with ``one_seed_spread`` (a :data:`TOLERANCES` key, e.g. ``'dlr_seed_spread'``) a
    single seed decides only when its gap is larger than that spread.

    Args:
      low, high: (n_seeds,) per-seed values of the quantity claimed smaller and larger (the
        same seeds in the same order; a scalar is one seed).
      margin: the gap the claim needs (e.g. 0.3 for "lower by more than 30 points").
      alpha: level of the Welch t test.
      one_seed_spread: the spread a single seed's gap must exceed (None: any gap decides).

    Returns:
      True (holds), False (refuted) or None (inconclusive). NaN in any seed: None.
    """
    a, b = _seed_values(low), _seed_values(high)
    if a.shape != b.shape:
        raise ValueError(f"low and high need one value per seed each, got {a.shape} and {b.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return None
    gap = b - margin - a  # > 0 where the ordering holds
    if len(a) == 1 and one_seed_spread is not None:
        spread = TOLERANCES[one_seed_spread].value
        if abs(gap[0]) < spread:
            return None
    if np.all(gap > 0):
        return True
    if np.all(gap <= 0):
        return False
    if len(a) < 2:
        return None
    from scipy import stats

    if stats.ttest_ind(a, b - margin, equal_var=False, alternative="less").pvalue < alpha:
        return True
    if stats.ttest_ind(a, b - margin, equal_var=False, alternative="greater").pvalue < alpha:
        return False
    return None


def below(values, bound: float, *, one_seed_spread: str | None = "dlr_seed_spread") -> bool | None:
    """Whether per-seed ``values`` lie below ``bound`` (e.g. D_LR < 0.1, the MF regime):
    :func:`ordered` against the constant bound, a single seed deciding only outside
    ``TOLERANCES[one_seed_spread]`` of it."""
    v = _seed_values(values)
    return ordered(v, np.full_like(v, bound), one_seed_spread=one_seed_spread)


def threshold_test(bound: float, *, one_seed_spread: str = "dlr_seed_spread") -> str:
    """:func:`below`'s test in words, for a row's ``tolerance``."""
    return (
        f"below {bound:g} in every seed, else a one-sided Welch t test at level "
        f"{ORDER_ALPHA:g}; one seed decides only farther than "
        f"{TOLERANCES[one_seed_spread].value:g} from {bound:g} ({one_seed_spread}); "
        "inconclusive otherwise"
    )


ORDER_TEST_ONE_SEED = (
    ORDER_TEST + "; one seed decides only when the gap exceeds dlr_seed_spread (0.02)"
)
""":data:`ORDER_TEST` for D_LR orderings (``ordered(..., one_seed_spread='dlr_seed_spread')``)."""


def judge(same_value: bool | None, same_direction: bool | None) -> str:
    """The verdict from two checks (True / False / None = undecided over the seeds): the value
    matches (reproduced), or at least the direction does (direction reproduced); undecided
    checks give 'inconclusive'."""
    if same_value is None:
        return "inconclusive"
    if same_value:
        return "reproduced"
    if same_direction is None:
        return "inconclusive"
    return "direction reproduced" if same_direction else "not reproduced"


def holds(check: bool | None) -> str:
    """The verdict of a claim with no magnitude to match: reproduced, not reproduced, or
    inconclusive when the seeds leave it undecided (None)."""
    if check is None:
        return "inconclusive"
    return "reproduced" if check else "not reproduced"


def in_every_seed(checks) -> bool | None:
    """A per-seed check over the seeds: True when it holds in every seed, False when in none,
    None (inconclusive) when the seeds split."""
    checks = [bool(c) for c in checks]
    if all(checks):
        return True
    return False if not any(checks) else None


def every(checks) -> bool | None:
    """Several checks together: True when all hold, False when any fails, else None."""
    checks = list(checks)
    if any(c is not None and not c for c in checks):
        return False
    return True if all(c is not None for c in checks) else None


def rf_reference(n: int, p: int, rank: int, *, rank_source: str = "C") -> dict:
    """The D_LR of isotropic random features at a run's n, p and rank (fitted readout).

    :func:`metrics.random_feature_dlr` (≈ 1 − √(r/p) for n ≫ p): what a network that learned
    nothing in its features would read, the scale a measured D_LR is read against.

    Args:
      n: samples the measured D_LR used.
      p: feature width of the readout.
      rank: rank r of the centred outputs the D_LR used (capped at min(n − 1, p)).
      rank_source: where ``rank`` comes from: ``'measured'`` (``metrics.dlr_with_rank``) or
        ``'C'`` (the number of output columns, when the run does not keep the rank).

    Returns:
      ``{"dlr", "n", "p", "rank", "rank_source"}``.
    """
    from metrics import random_feature_dlr

    if rank_source not in ("measured", "C"):
        raise ValueError(f"rank_source must be 'measured' or 'C', got {rank_source!r}")
    r = int(min(rank, n - 1, p))
    return {
        "dlr": float(random_feature_dlr(int(n), int(p), r)),
        "n": int(n),
        "p": int(p),
        "rank": r,
        "rank_source": rank_source,
    }


def row(
    quantity: str,
    paper: Any,
    measured: Any,
    *,
    dataset: str,
    scale: str,
    verdict: str,
    criterion: str,
    tolerance: str,
    values,
    reference: dict | None = None,
    note: str = "",
) -> dict:
    """One comparison row.

    Keys ``quantity, paper, measured, dataset, scale, verdict, note`` (as before) and
    ``criterion, tolerance, values, n_seeds, reference``.

    Args:
      quantity: what is compared, e.g. ``'D_LR rich / lazy'``.
      paper: the paper's value (number or short text).
      measured: this run's value (number or short text; over seeds, their mean ± std).
      dataset: the data that produced ``measured``, e.g. ``'mnist5k (4,000 / 1,000)'``.
      scale: the run's size, e.g. ``'MLP 784-256³-10, 100 epochs'``.
      verdict: one of :data:`VERDICTS`.
      criterion: the paper's claim the row tests, quoted with its place (``"T §7.1: '…'"``), and
        how it is read here.
      tolerance: :func:`tolerance` of a :data:`TOLERANCES` key, :data:`ORDER_TEST`, or the test in
        words.
      values: the per-seed measurements: a sequence (one value per seed) or a dict of such
        sequences, one per measured quantity, all of the same length n_seeds.
      reference: :func:`rf_reference` of the run, for a row that reads a D_LR (None otherwise).
      note: why the verdict (one sentence).
    """
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {list(VERDICTS)}, got {verdict!r}")
    if not criterion or not tolerance:
        raise ValueError(f"row {quantity!r} needs a criterion and a tolerance or test")
    per_seed = (
        {k: _jsonable_seeds(v) for k, v in values.items()} if isinstance(values, dict) else None
    )
    if per_seed is None:
        per_seed_list = _jsonable_seeds(values)
        lengths = {len(per_seed_list)}
    else:
        lengths = {len(v) for v in per_seed.values()}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError(f"row {quantity!r}: values need one entry per seed, the same n for all")
    return {
        "quantity": quantity,
        "paper": paper,
        "measured": measured,
        "dataset": dataset,
        "scale": scale,
        "verdict": verdict,
        "note": note,
        "criterion": criterion,
        "tolerance": tolerance,
        "n_seeds": lengths.pop(),
        "values": per_seed_list if per_seed is None else per_seed,
        "reference": reference,
    }


def mean_std(values, spec: str = ".3g") -> str:
    """``'mean ± std'`` (sample std) of per-seed values, or the value alone for one seed."""
    v = _seed_values(values)
    if len(v) == 1:
        return format(float(v[0]), spec)
    std = float(np.std(v, ddof=1))
    return f"{format(float(np.mean(v)), spec)} ± {format(std, spec.replace('+', ''))}"


def _seed_values(values) -> np.ndarray:
    """(n_seeds,) float array of per-seed values (a scalar is one seed; None is NaN)."""
    v = np.atleast_1d(np.asarray(values, dtype=object))
    return np.array([np.nan if x is None else float(x) for x in v], float)


def _jsonable_seeds(values) -> list:
    """Per-seed values as a JSON-ready list: numbers as floats, text and None kept."""
    out = []
    for x in np.atleast_1d(np.asarray(values, dtype=object)).tolist():
        out.append(x if x is None or isinstance(x, str) else float(x))
    return out


def dataset_text(data) -> str:
    """``'<name> (<n_train> train / <n_test> test)'`` of a :class:`nets.data.Dataset`."""
    return f"{data.name} ({len(data.x_train):,} train / {len(data.x_test):,} test)"


def spearman(a, b) -> float:
    """Spearman rank correlation of two 1-D sequences without ties (NaN if any value is not
    finite or there are fewer than two)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("nan")
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])
