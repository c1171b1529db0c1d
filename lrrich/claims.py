"""Claims as data, judged by one engine from per-seed values.

An experiment declares what the papers claim (``CLAIMS``, a tuple of :class:`Claim`) and its
``run`` returns the per-seed values the claims read (``results["measured"]``, a
:class:`Measured`-shaped dict). :func:`judge` turns one claim and one record into one verdict row;
the runner, ``lrrich table`` and the reports all call it, so a verdict has one source.

**A claim** names the paper and place, quotes the sentence, says which quantity it reads (result
fields) on which split (decided before running: the test split unless the paper's claim is about
the training data, and then stated), the relation that must hold (:class:`Value`,
:class:`Below`, :class:`Above`, :class:`Less`, :class:`Holds`, or :class:`All` of several),
the premise under which the paper's comparison means anything (e.g. "both networks fit their
training set", :class:`Premise`) and the seeds it needs.

**The rules** (every claim, every experiment):

1. *Premise.* A premise that fails in any seed makes the claim **not tested**; the row shows the
   premise and its measured value.
2. *Magnitude.* A :class:`Value` is the paper's number within a named tolerance
   (:data:`TOLERANCES`). Inside in every seed: the value matches. Outside in every seed: the
   magnitude is missed — **not reproduced**, or **direction reproduced** when the claim's
   direction check holds by rule 3; never inconclusive. Inside in some seeds only:
   **inconclusive**.
3. *Orderings and boundaries* (:class:`Less`, :class:`Below`, :class:`Above`): a one-sided
   **paired t test** at level :data:`ALPHA` = 0.05 on the per-seed differences (for a boundary,
   the one-sample test against it). It holds when the test rejects "no effect or the reverse";
   it is refuted when the reverse one-sided test rejects; otherwise the seeds leave it
   **inconclusive**. With n = 3 seeds the test passes only when the mean gap exceeds about 2.9
   of its standard errors (t₀.₉₅ with 2 degrees of freedom), so a small effect with seed-to-seed
   spread stays inconclusive: a claim whose ordering decides asks for ≥ 5 seeds
   (``Claim.seeds``). Identical gaps in every seed (zero spread) decide by their sign.
   :class:`Holds` reads a per-seed check that is itself decided (a test inside each seed, or an
   exact property): true in every seed holds, false in every seed is refuted, split is
   inconclusive.
4. *Seeds.* **reproduced** (and **direction reproduced**, and a refutation by rule 3) needs at
   least ``Claim.seeds`` seeds (3 by default), or one exact computation (``exact=True``: a closed
   form, which has no seed). Fewer seeds give **inconclusive** with the count in the reason, except
   the magnitude miss of rule 2, which one seed shows.

A D_LR claim carries two scales beside the paper's number: the **at-init baseline** — the D_LR of
the run's own features at initialisation with a least-squares readout of the targets
(:func:`metrics.fitted_readout_dlr`), what this network reads if its features never move — and
the **isotropic reference** (:func:`metrics.random_feature_dlr`), what Gaussian features read.
"Rich" is a distance below the first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

VERDICTS = ("reproduced", "direction reproduced", "not reproduced", "inconclusive", "not tested")
ALPHA = 0.05
"""Level of every one-sided test the engine runs (the conventional 5 %)."""

MIN_SEEDS = 3
"""Seeds a claim needs to be reproduced, unless it is one exact computation."""

MF_BOUNDARY = 0.1
"""D_LR below this is the minimum-feature (MF) regime: κ_CKA < ε with ε = 0.1 (T Definition 2)."""


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
        "training accuracy of a network that fits (D Fig 1: 100 % / 98.7 %): 2 points, since a "
        "fit differs between seeds by a few images only",
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
        "own calibration networks",
    ),
    "d_eff": Tolerance(
        0.2,
        True,
        "|D_eff − C| ≤ 0.2 C counts as D_eff ≈ C (T Table 2.2's MF-regime values are within "
        "4 % of C; five times that margin at the small scale's 10 classes)",
    ),
    "closed_form": Tolerance(
        1e-8,
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
        "4.1's asymptotic exponent; the fits land within 0.002",
    ),
    "fraction_of_init": Tolerance(
        0.05,
        False,
        "a measure normalised to 1.0 at initialisation (‖θ‖²/‖θ₀‖²) against a paper value "
        "quoted to two digits (D Fig 2(a)'s 0.20): 5 points of the initial value",
    ),
    "invariant": Tolerance(
        0.1,
        True,
        "S's table calls S_init and ‖θ‖² 'invariant to α' without numbers; a measure counts as "
        "invariant when it stays within 10 % of its value at the smallest α",
    ),
}
"""Named verdict tolerances, one entry per kind of quantity (the one tolerance table of claims)."""


# ---------------------------------------------------------------------------- the declarations


@dataclass(frozen=True)
class Premise:
    """A condition every seed must meet for the claim to be tested (``field op value``)."""

    field: str
    op: str  # ">=", ">", "<=", "<"
    value: float
    text: str  # in words, e.g. "the lazy network fits its training set (≥ 94 %)"

    def __post_init__(self):
        if self.op not in _OPS:
            raise ValueError(f"premise op must be one of {sorted(_OPS)}, got {self.op!r}")


_OPS = {">=": np.greater_equal, ">": np.greater, "<=": np.less_equal, "<": np.less}


class Check(NamedTuple):
    """The outcome of one relation over the seeds."""

    outcome: bool | None  # True holds, False refuted, None undecided
    test: str  # the test in words
    detail: str  # what decided it: the statistic, or which seeds
    seeds_needed: bool = True  # False: a magnitude miss, which one seed shows (rule 2)


@dataclass(frozen=True)
class Value:
    """``field`` equals the paper's ``paper`` within ``TOLERANCES[tolerance]`` (rule 2);
    ``direction`` (optional) is the weaker check that gives "direction reproduced"."""

    field: str
    paper: float
    tolerance: str
    direction: Any = None

    def fields(self) -> tuple[str, ...]:
        return (self.field,) + (self.direction.fields() if self.direction else ())

    def check(self, values: Mapping[str, np.ndarray], exact: bool) -> Check:
        tol = TOLERANCES[self.tolerance]
        v = values[self.field]
        hits = np.array([_close(x, self.paper, tol) for x in v])
        bound = (
            f"|{self.field} / {self.paper:g} − 1| ≤ {tol.value:g}"
            if tol.relative
            else f"|{self.field} − {self.paper:g}| < {tol.value:g}"
        )
        test = f"{self.tolerance}: {bound} in every seed"
        if hits.all():
            return Check(True, test, f"inside in every seed ({values_text(v)})")
        if not hits.any():
            return Check(
                False, test, f"outside in every seed ({values_text(v)})", seeds_needed=False
            )
        inside = [i for i, h in enumerate(hits) if h]
        return Check(None, test, f"inside in seed(s) {inside} only ({values_text(v)})")


@dataclass(frozen=True)
class Less:
    """``low`` < ``high`` − ``margin``, paired by seed: one-sided paired t test (rule 3)."""

    low: str
    high: str
    margin: float = 0.0

    def fields(self) -> tuple[str, ...]:
        return (self.low, self.high)

    def check(self, values: Mapping[str, np.ndarray], exact: bool) -> Check:
        gap = values[self.high] - self.margin - values[self.low]
        what = f"{self.low} < {self.high}" + (f" − {self.margin:g}" if self.margin else "")
        return _paired(gap, what, exact)


@dataclass(frozen=True)
class Below:
    """``field`` < ``bound`` (e.g. D_LR < 0.1, the MF regime): one-sample one-sided t test."""

    field: str
    bound: float

    def fields(self) -> tuple[str, ...]:
        return (self.field,)

    def check(self, values: Mapping[str, np.ndarray], exact: bool) -> Check:
        return _paired(self.bound - values[self.field], f"{self.field} < {self.bound:g}", exact)


@dataclass(frozen=True)
class Above:
    """``field`` > ``bound``: one-sample one-sided t test."""

    field: str
    bound: float

    def fields(self) -> tuple[str, ...]:
        return (self.field,)

    def check(self, values: Mapping[str, np.ndarray], exact: bool) -> Check:
        return _paired(values[self.field] - self.bound, f"{self.field} > {self.bound:g}", exact)


@dataclass(frozen=True)
class Holds:
    """A per-seed check that is decided within each seed (1 = holds, 0 = fails): every seed
    holds → True, none → False, split → undecided (rule 3)."""

    field: str
    test: str  # what the per-seed check is, in words

    def fields(self) -> tuple[str, ...]:
        return (self.field,)

    def check(self, values: Mapping[str, np.ndarray], exact: bool) -> Check:
        v = values[self.field]
        ok = np.isfinite(v) & (v > 0.5)
        if ok.all():
            return Check(True, self.test, f"holds in every seed ({len(v)})")
        if not ok.any() and np.isfinite(v).all():
            return Check(False, self.test, f"fails in every seed ({len(v)})")
        return Check(
            None, self.test, f"holds in seed(s) {[int(i) for i in np.flatnonzero(ok)]} only"
        )


@dataclass(frozen=True)
class All:
    """Several relations together: holds when all hold, refuted when any is refuted."""

    parts: tuple

    def fields(self) -> tuple[str, ...]:
        return tuple(f for p in self.parts for f in p.fields())

    def check(self, values: Mapping[str, np.ndarray], exact: bool) -> Check:
        checks = [p.check(values, exact) for p in self.parts]
        test = "; and ".join(c.test for c in checks)
        failed = [c for c in checks if c.outcome is False]
        if failed:
            return Check(False, test, failed[0].detail, failed[0].seeds_needed)
        if all(c.outcome for c in checks):
            return Check(True, test, "; ".join(c.detail for c in checks))
        return Check(None, test, "; ".join(c.detail for c in checks if c.outcome is None))


@dataclass(frozen=True)
class Claim:
    """One sentence of a paper, as data (module docstring).

    Attributes:
      key: unique within the experiment (a record's row key), e.g. ``"dlr-rich-lazy"``.
      source: paper key and place, e.g. ``"D Fig 1"``.
      quote: the paper's sentence (or table entry), quoted.
      quantity: what is compared, in words (``"test D_LR, rich vs lazy"``).
      split: ``"test"``, ``"train"`` (then say why in ``quote`` or ``note``) or ``"exact"``.
      relation: a :class:`Value`, :class:`Less`, :class:`Below`, :class:`Above`,
        :class:`Holds` or :class:`All`.
      paper: the paper's value or outcome as text for the tables.
      premise: the conditions every seed must meet (rule 1).
      seeds: seeds needed for a decision (rule 4; ≥ 5 where an ordering decides).
      dlr: the fields that are D_LR values (their at-init baseline and reference are shown).
      note: a deviation from the paper's protocol or a reading to disclose beside the verdict.
      exact: the claim reads one exact computation (a closed form) even in a record of seeds,
        e.g. a run that checks closed forms beside a trained network (rule 4).
    """

    key: str
    source: str
    quote: str
    quantity: str
    split: str
    relation: Any
    paper: str = ""
    premise: tuple[Premise, ...] = ()
    seeds: int = MIN_SEEDS
    dlr: tuple[str, ...] = ()
    note: str = ""
    exact: bool = False

    def __post_init__(self):
        if self.split not in ("test", "train", "exact", "test and train"):
            raise ValueError(
                f"claim {self.key!r}: split must be test/train/exact, got {self.split}"
            )
        if not self.source or not self.quote:
            raise ValueError(f"claim {self.key!r} needs its paper place and quoted sentence")
        if self.seeds < MIN_SEEDS:
            raise ValueError(
                f"claim {self.key!r}: seeds = {self.seeds} < {MIN_SEEDS}; a claim decided by "
                "one computation is exact=True"
            )
        unknown = [f for f in self.dlr if f not in self.fields()]
        if unknown:
            raise ValueError(f"claim {self.key!r}: dlr fields {unknown} are not read by it")

    def fields(self) -> tuple[str, ...]:
        """Every result field the claim reads (relation and premise)."""
        return tuple(dict.fromkeys(self.relation.fields() + tuple(p.field for p in self.premise)))


def quoting(source: str, quote: str, split: str = "test", **shared) -> Callable[..., Claim]:
    """The claims of one quoted passage or table of a paper, one call a row.

    Args:
      source, quote, split: the :class:`Claim` fields every row shares.
      shared: further Claim fields of every row (e.g. a ``premise``, a ``note``).

    Returns:
      ``row(key, quantity, relation, paper="", **kw) -> Claim``; ``kw`` (any Claim field,
      ``source`` and ``quote`` too) wins over the shared ones.

    Example::

        row = quoting("S's table; D Fig 4", "'... D_LR 0.51; after grokking ... 0.11'")
        CLAIMS = (row("dlr-before", "test D_LR at step 200", Value("dlr_before", 0.51, "dlr"),
                      "0.51", dlr=("dlr_before",)),)
    """

    def row(key: str, quantity: str, relation, paper: str = "", **kw) -> Claim:
        fields = {"source": source, "quote": quote, "split": split, **shared, **kw}
        return Claim(key, quantity=quantity, relation=relation, paper=paper, **fields)

    return row


# ---------------------------------------------------------------------------- the records


def measured(
    values: Mapping[str, Sequence[float]],
    *,
    seeds: Sequence[int] | None = None,
    exact: bool = False,
    dataset: str = "",
    scale: str = "",
    baseline: Mapping[str, Sequence[float]] | None = None,
    reference: Mapping[str, Mapping] | None = None,
    deviations: Sequence[str] = (),
) -> dict:
    """The ``results["measured"]`` record an experiment's ``run`` returns.

    Args:
      values: field → per-seed values (all the same length n; an exact computation has n = 1).
      seeds: the seeds behind the values (default 0 … n−1).
      exact: the values are one exact computation (a closed form), not seeds.
      dataset, scale: what produced the values, in words.
      baseline: D_LR field → per-seed at-init fitted-readout D_LR of the same features/split.
      reference: D_LR field → :func:`rf_reference` of its n, p and rank.
      deviations: departures from the paper's protocol, disclosed on every row.
    """
    out = {k: _jsonable(v) for k, v in values.items()}
    lengths = {len(v) for v in out.values()}
    if len(lengths) > 1 or 0 in lengths:
        raise ValueError(f"every field needs one value per seed, the same n; got {lengths}")
    n = lengths.pop() if lengths else 0
    return {
        "values": out,
        "seeds": list(seeds) if seeds is not None else list(range(n)),
        "exact": bool(exact),
        "dataset": dataset,
        "scale": scale,
        "baseline": {k: _jsonable(v) for k, v in (baseline or {}).items()},
        "reference": {k: dict(v) for k, v in (reference or {}).items()},
        "deviations": list(deviations),
    }


def rf_reference(n: int, p: int, rank: int, *, rank_source: str = "C") -> dict:
    """The isotropic random-feature D_LR (fitted readout) at a run's n, p and rank:
    :func:`metrics.random_feature_dlr`, ≈ 1 − √(r/p) for n ≫ p."""
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


# ---------------------------------------------------------------------------- the engine


def judge(claim: Claim, record: Mapping) -> dict | None:
    """One verdict row of ``claim`` from a ``measured`` record (None: a field is not measured).

    Returns a dict with the claim's declaration (``key, source, quote, quantity, split, paper``),
    ``n_seeds``, ``values`` (field → per-seed), ``measured`` (text), ``premise`` (text, values,
    whether it held), ``baseline`` / ``reference`` (for D_LR fields), ``verdict``, ``reason``
    (one line), ``deciding`` (the check and the seeds that decided), ``test``, ``dataset``,
    ``scale`` and ``deviations``; plus the keys of the older comparison rows (``criterion``,
    ``tolerance``, ``note``).
    """
    vals = record.get("values", {})
    if any(f not in vals for f in claim.fields()):
        return None
    values = {f: _floats(vals[f]) for f in claim.fields()}
    n = len(next(iter(values.values())))
    exact = bool(record.get("exact")) or claim.exact
    seeds = list(record.get("seeds") or range(n))
    row = _declaration(claim, record, values, n, exact)
    verdict, reason, deciding, test = _verdict(claim, values, n, exact, seeds, row)
    row.update(verdict=verdict, reason=reason, deciding=deciding, test=test, tolerance=test)
    row["note"] = "; ".join(x for x in (reason, claim.note, *row["deviations"]) if x)
    return row


def judge_all(claims: Sequence[Claim], record: Mapping) -> list[dict]:
    """:func:`judge` of every claim the record measures, in declaration order."""
    rows = [judge(c, record) for c in claims]
    return [r for r in rows if r is not None]


def _verdict(claim, values, n, exact, seeds, row) -> tuple[str, str, str, str]:
    failed = [p for p in row["premise"] if not p["holds"]]
    if failed:
        p = failed[0]
        bad = [f"seed {seeds[i]}: {v:.3g}" for i, v in enumerate(p["values"]) if not p["ok"][i]]
        return (
            "not tested",
            f"premise fails — {p['text']} ({', '.join(bad)})",
            f"premise {p['field']} {p['op']} {p['value']:g}",
            "premise",
        )
    rel = claim.relation
    check = rel.check(values, exact)
    enough = exact or n >= claim.seeds
    count = "one exact computation" if exact else f"n = {n}"
    if check.outcome is True:
        if enough:
            return "reproduced", f"{check.detail} ({count})", check.detail, check.test
        return (
            "inconclusive",
            f"holds, but on {n} of the {claim.seeds} seeds the claim needs ({check.detail})",
            check.detail,
            check.test,
        )
    if check.outcome is False:
        if isinstance(rel, Value) and rel.direction is not None:
            d = rel.direction.check(values, exact)
            if d.outcome is True and enough:
                return (
                    "direction reproduced",
                    f"magnitude missed, {check.detail}; direction holds: {d.detail} ({count})",
                    f"{check.detail}; direction: {d.detail}",
                    f"{check.test}; direction: {d.test}",
                )
            test = f"{check.test}; direction: {d.test}"
            return (
                "not reproduced",
                f"magnitude missed, {check.detail}; direction "
                + ("refuted" if d.outcome is False else "not established")
                + f": {d.detail}",
                check.detail,
                test,
            )
        if enough or not check.seeds_needed:
            return "not reproduced", f"{check.detail} ({count})", check.detail, check.test
        return (
            "inconclusive",
            f"fails, but on {n} of the {claim.seeds} seeds the claim needs ({check.detail})",
            check.detail,
            check.test,
        )
    return "inconclusive", f"the seeds leave it undecided: {check.detail}", check.detail, check.test


def _declaration(claim, record, values, n, exact) -> dict:
    base = record.get("baseline", {})
    ref = record.get("reference", {})
    premise = []
    for p in claim.premise:
        v = values[p.field]
        ok = _OPS[p.op](v, p.value) & np.isfinite(v)
        premise.append(
            {
                "text": p.text,
                "field": p.field,
                "op": p.op,
                "value": p.value,
                "values": v.tolist(),
                "ok": ok.tolist(),
                "holds": bool(ok.all()),
            }
        )
    rel = claim.relation
    shown = (rel.field,) if isinstance(rel, Value) else tuple(dict.fromkeys(rel.fields()))
    return {
        "key": claim.key,
        "source": claim.source,
        "quote": claim.quote,
        "quantity": claim.quantity,
        "split": claim.split,
        "paper": claim.paper,
        "criterion": f"{claim.source}: {claim.quote}",
        "n_seeds": n,
        "exact": exact,
        "seeds_needed": claim.seeds,
        "values": {f: _jsonable(values[f]) for f in claim.fields()},
        "measured": " vs ".join(_mean_std(values[f], f) for f in shown),
        "premise": premise,
        "baseline": {f: _jsonable(base[f]) for f in claim.dlr if f in base},
        "reference": {f: ref[f] for f in claim.dlr if f in ref},
        "dataset": record.get("dataset", ""),
        "scale": record.get("scale", ""),
        "deviations": list(record.get("deviations", [])),
    }


def _paired(gap: np.ndarray, what: str, exact: bool) -> Check:
    """One-sided paired t test that ``gap`` > 0 (rule 3), or its sign for one exact value."""
    test = f"{what}: one-sided paired t test at level {ALPHA:g} over the seeds"
    if not np.all(np.isfinite(gap)):
        return Check(None, test, "a seed has no value (NaN)")
    n = len(gap)
    if exact:
        return Check(bool(np.all(gap > 0)), f"{what} (exact)", f"gap {values_text(gap)}")
    if n == 1:
        return Check(None, test, f"one seed (gap {gap[0]:+.3g}) has no spread to test against")
    if np.ptp(gap) == 0:  # zero spread: every seed shows the same gap
        if gap[0] == 0:
            return Check(None, test, "zero gap in every seed")
        return Check(bool(gap[0] > 0), test, f"the same gap {gap[0]:+.3g} in every seed")
    t = float(np.mean(gap) / (np.std(gap, ddof=1) / math.sqrt(n)))
    from scipy import stats

    p_holds = float(stats.t.sf(t, n - 1))
    detail = f"mean gap {np.mean(gap):+.3g}, t = {t:.2f}, df = {n - 1}"
    if p_holds < ALPHA:
        return Check(True, test, f"{detail}, p = {p_holds:.3g}")
    if 1 - p_holds < ALPHA:
        return Check(False, test, f"{detail}, reverse p = {1 - p_holds:.3g}")
    return Check(None, test, f"{detail}, p = {p_holds:.3g} (reverse {1 - p_holds:.3g})")


def _close(x: float, paper: float, tol: Tolerance) -> bool:
    """Inside the tolerance (NaN never). An absolute bound is strict and decided on the decimal
    values: a gap equal to the bound up to float round-off is outside."""
    if not math.isfinite(x):
        return False
    if tol.relative:
        return abs(x / paper - 1) <= tol.value
    return abs(x - paper) < tol.value * (1 - 1e-9)


def _floats(v) -> np.ndarray:
    return np.array([np.nan if x is None else float(x) for x in np.atleast_1d(v)], float)


def _jsonable(v) -> list:
    return [
        None if (x is None or not math.isfinite(float(x))) else float(x) for x in np.atleast_1d(v)
    ]


def values_text(v) -> str:
    """Per-seed values as ``'0.078, 0.081, 0.075'`` (NaN or a missing value shown as NaN)."""
    v = _floats(v)
    return ", ".join("NaN" if not math.isfinite(x) else f"{x:.3g}" for x in np.atleast_1d(v))


def _mean_std(v: np.ndarray, name: str = "") -> str:
    """``'mean ± std'`` (sample std) of per-seed values, or the value alone for one seed;
    fields named ``*acc*`` as percentages."""
    pct = "acc" in name
    scale, unit = (100.0, " %") if pct else (1.0, "")
    v = v * scale
    if len(v) == 1:
        return f"{_num(v[0])}{unit}"
    if not np.all(np.isfinite(v)):
        return f"{values_text(v)}{unit}"
    return f"{_num(np.mean(v))} ± {_num(np.std(v, ddof=1))}{unit}"


def _num(x: float) -> str:
    if not math.isfinite(x):
        return "NaN"
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.2e}"
    return f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"


def baseline_text(row: Mapping) -> str:
    """The at-init fitted-readout D_LR of a row's D_LR fields (``'0.51 ± 0.01'``), or ``'—'``."""
    texts = {f: _mean_std(_floats(v)) for f, v in row.get("baseline", {}).items()}
    if len(set(texts.values())) == 1:  # one network's init behind every field
        return next(iter(texts.values()))
    return "; ".join(f"{t} ({f})" for f, t in texts.items()) or "—"


def reference_text(row: Mapping) -> str:
    """The isotropic random-feature D_LR of a row's D_LR fields with their n, p, r, or ``'—'``."""
    refs = {}
    for ref in row.get("reference", {}).values():
        refs[f"{ref['dlr']:.3f} (n {ref['n']}, p {ref['p']}, r {ref['rank']})"] = True
    return "; ".join(refs) or "—"


def premise_text(row: Mapping) -> str:
    """The premises of a row with their measured values (``'—'`` when the claim has none)."""
    out = []
    for p in row.get("premise", []):
        vals = values_text(p["values"])
        out.append(f"{p['text']}: {vals} ({'holds' if p['holds'] else 'fails'})")
    return "; ".join(out) or "—"


def verdict_counts(rows: Sequence[Mapping]) -> str:
    """``'3 reproduced, 1 not tested'`` in the order of :data:`VERDICTS`."""
    counts = {v: sum(r.get("verdict") == v for r in rows) for v in VERDICTS}
    return ", ".join(f"{k} {v}" for v, k in counts.items() if k) or "no rows"
