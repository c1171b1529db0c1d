"""The training sub-configs the experiments share, and the one map from them to ``TrainConfig``.

An experiment's ``Config`` extends one of these dataclasses (big_vision's configs share their
training block the same way), so each training field is declared and documented once; a
subclass restates a field only to change its default. The fields stay top-level, so
``--set lr=…`` and the ``config.json`` keys are those of the experiment's own ``Config``.

* :class:`Training` — seed and optimizer (every trained experiment).
* :class:`Seeds` — the number of seeds an experiment repeats each run over (mixed into the
  ``Config`` of the experiments whose verdicts are judged over seeds).
* :class:`StepTraining` — plus a run measured in optimizer steps: warm-up, batch, steps, log
  and checkpoint periods (the grokking experiments).
* ``_image_runs.ImageTraining`` — plus data, model size and epochs (the image experiments).
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Training:
    """Seed and optimizer of an experiment's networks (defaults: :class:`nets.TrainConfig`'s).

    Attributes:
      seed: PRNG seed of the initialisation and the data order.
      optimizer: ``'sgd'`` (heavy-ball momentum), ``'adam'`` (coupled L2, PyTorch's
        ``Adam(weight_decay=…)``) or ``'adamw'`` (decoupled weight decay; torch semantics).
      lr: learning rate η.
      momentum: SGD momentum μ; unused by Adam.
      b1, b2: Adam's β₁, β₂; unused by SGD.
      eps: Adam's ε (PyTorch's default 1e-8); unused by SGD.
      weight_decay: weight decay λ (coupled for sgd / adam, decoupled for adamw).
    """

    seed: int = 0
    optimizer: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0


@dataclasses.dataclass(frozen=True)
class StepTraining(Training):
    """A run measured in optimizer steps (defaults: teddykoker/grokking's AdamW, which D used).

    Attributes:
      warmup_steps: linear learning-rate warm-up from 0 over this many steps.
      batch_size: minibatch size B.
      steps: optimizer steps per run.
      log_every: steps between logged accuracy / D_LR points (also at step 0 and the end).
      checkpoint_every: steps between orbax checkpoints (0: none), for ``--resume``.
    """

    optimizer: str = "adamw"
    lr: float = 1e-3
    b2: float = 0.98
    weight_decay: float = 1.0
    warmup_steps: int = 10
    batch_size: int = 512
    steps: int = 3000
    log_every: int = 50
    checkpoint_every: int = 500


@dataclasses.dataclass(frozen=True)
class Seeds:
    """Repeat every run over seeds ``seed, seed + 1, …, seed + seeds − 1`` (D averages its
    experiments over at least three runs); each comparison row is judged over the seeds
    (:mod:`lrrich.claims`) from their per-seed values.

    Attributes:
      seeds: number of seeds n (≥ 1).
    """

    seeds: int = 3


def seed_list(config) -> list[int]:
    """The seeds of ``config``: ``seed, …, seed + seeds − 1`` (one seed without :class:`Seeds`)."""
    n = getattr(config, "seeds", 1)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"seeds must be a whole number ≥ 1, got {n!r}")
    return [config.seed + i for i in range(n)]


_OPTIMIZER_FIELDS = tuple(f.name for f in dataclasses.fields(Training) if f.name != "seed")
_STEP_FIELDS = ("warmup_steps", "batch_size", "steps")


def train_config(config: Training, **overrides):
    """The :class:`nets.TrainConfig` of ``config``'s shared training fields.

    Args:
      config: the experiment's config (a :class:`Training`; a :class:`StepTraining` also sets
        ``warmup_steps``, ``batch_size`` and ``steps``).
      overrides: any other TrainConfig field (the loss, a swept ``lr``, the scales, …); they win
        over the config's fields.

    Returns:
      the :class:`nets.TrainConfig`.
    """
    from nets import TrainConfig

    names = _OPTIMIZER_FIELDS + (_STEP_FIELDS if isinstance(config, StepTraining) else ())
    return TrainConfig(**{**{k: getattr(config, k) for k in names}, **overrides})


def paper_steps(n_train: int, batch_size: int, epochs: int) -> int:
    """Optimizer steps of ``epochs`` epochs of PyTorch's ``DataLoader`` (``drop_last=False``).

    The papers trained PyTorch, whose data loader keeps the short last minibatch: an epoch of
    n examples in batches of B is ⌈n/B⌉ steps. ``nets`` batches are drop-last (⌊n/B⌋ full
    batches per epoch), so a run given the papers' epochs would take fewer steps (1,000 images
    in batches of 128: 7 instead of 8 per epoch, 12.5 % short). Training ``epochs · ⌈n/B⌉`` steps
    of full batches keeps the papers' step count; **choice:** every step sees a full batch, so
    the run sees up to B − 1 more examples per epoch than the papers' (the papers leave the last
    batch to PyTorch's default).

    Args:
      n_train: training-set size n ≥ 1.
      batch_size: minibatch size B ≥ 1 (capped at n, as the loaders do).
      epochs: epochs E ≥ 0.

    Returns:
      E · ⌈n / min(B, n)⌉.
    """
    for name, v, low in (
        ("n_train", n_train, 1),
        ("batch_size", batch_size, 1),
        ("epochs", epochs, 0),
    ):
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise ValueError(f"{name} must be a whole number ≥ {low}, got {v!r}")
    return epochs * -(-n_train // min(batch_size, n_train))


def first_step(steps: np.ndarray, values: np.ndarray, threshold: float) -> float | None:
    """The first logged step whose value reaches ``threshold`` (None if it never does).

    Args:
      steps: (K,) logged steps, increasing.
      values: (K,) the logged quantity (e.g. test accuracy); NaN never counts as reached.
      threshold: the level to reach.

    Returns:
      the step as a float, or None.
    """
    hit = np.flatnonzero(np.nan_to_num(np.asarray(values, float), nan=-np.inf) >= threshold)
    return float(steps[hit[0]]) if hit.size else None
