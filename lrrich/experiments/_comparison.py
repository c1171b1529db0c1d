"""The "Paper vs measured" rows every paper experiment returns as ``results["comparison"]``.

Each row states one quantity the paper reports, the value it reports, the value this run
measured, the dataset and scale that produced it, and a verdict: ``'reproduced'`` (the paper's
value or outcome within the stated tolerance), ``'direction reproduced'`` (the same ordering or
sign of change, different magnitude) or ``'not reproduced'``. ``note`` says why, in a sentence.
"""

from __future__ import annotations

from typing import Any

import numpy as np

VERDICTS = ("reproduced", "direction reproduced", "not reproduced")


def row(
    quantity: str,
    paper: Any,
    measured: Any,
    *,
    dataset: str,
    scale: str,
    verdict: str,
    note: str = "",
) -> dict:
    """One comparison row (keys ``quantity, paper, measured, dataset, scale, verdict, note``).

    Args:
      quantity: what is compared, e.g. ``'D_LR rich / lazy'``.
      paper: the paper's value (number or short text).
      measured: this run's value (number or short text).
      dataset: the data that produced ``measured``, e.g. ``'mnist5k (4,000 / 1,000)'``.
      scale: the run's size, e.g. ``'MLP 784-256³-10, 100 epochs'``.
      verdict: one of :data:`VERDICTS`.
      note: why the verdict (one sentence).
    """
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {list(VERDICTS)}, got {verdict!r}")
    return {
        "quantity": quantity,
        "paper": paper,
        "measured": measured,
        "dataset": dataset,
        "scale": scale,
        "verdict": verdict,
        "note": note,
    }


def judge(same_value: bool, same_direction: bool) -> str:
    """The verdict from two checks: the value matches, or at least the direction does."""
    if same_value:
        return "reproduced"
    return "direction reproduced" if same_direction else "not reproduced"


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
