"""What a training run measured: :class:`History`, its JSON-lines log, :class:`TrainingDiverged`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import numpy as np

from nets.io import atomic_write_bytes, jsonable


class TrainingDiverged(FloatingPointError):
    """The training loss became NaN or infinite.

    Attributes:
      step: the optimizer step whose minibatch loss was first non-finite.
      loss: that loss (NaN or ±inf).
    """

    def __init__(self, message: str, *, step: int, loss: float):
        super().__init__(message)
        self.step = step
        self.loss = loss


@dataclasses.dataclass
class History:
    """What :func:`nets.train` measured.

    Attributes:
      records: one dict per log point (``step``, ``epoch``, ``lr``, ``loss`` = mean training
        minibatch loss since the previous point, ``train_loss``/``train_acc`` and
        ``test_loss``/``test_acc`` on the fixed fit/eval subsets, one entry per metric, e.g.
        ``dlr_train``/``dlr_test`` (NaN where undefined, with the reason under ``undefined``:
        ``{"dlr_test": "outputs are constant over samples (rank 0)"}``), and the cumulative
        ``train_time``/``log_time`` in seconds).
      train_time: seconds spent in training steps (excluding compilation of the first call).
      log_time: seconds spent computing the log records (excluding the compilation of the
        first one, which counts in ``compile_time``).
      compile_time: seconds of the first (compiling) training and logging calls.
      checkpoint_time: seconds spent writing checkpoints.
      steps: total optimizer steps.
      resumed_from: step restored from a checkpoint, or None.
      diverged: for a run of :func:`nets.train_many` whose loss became non-finite, the
        :class:`TrainingDiverged` that :func:`nets.train` raises; None otherwise.
      runs_in_program: R, the runs trained together in one compiled program (1 for
        :func:`nets.train`); the times above are this run's share, 1/R, of the program's.
    """

    records: list[dict]
    train_time: float = 0.0
    log_time: float = 0.0
    compile_time: float = 0.0
    checkpoint_time: float = 0.0
    steps: int = 0
    resumed_from: int | None = None
    diverged: TrainingDiverged | None = None
    runs_in_program: int = 1

    def column(self, key: str) -> np.ndarray:
        """The values of ``key`` over the log points, shape (n_records,) (NaN where missing)."""
        return np.array(
            [np.nan if r.get(key) is None else r[key] for r in self.records], dtype=float
        )

    @property
    def final(self) -> dict:
        """The last log record."""
        return self.records[-1]

    @property
    def log_seconds(self) -> float:
        """Seconds spent logging (``log_time``)."""
        return self.log_time

    @property
    def log_fraction(self) -> float:
        """Share of the (compiled) run time spent logging: log / (train + log); 0 if nothing ran."""
        total = self.train_time + self.log_time
        return self.log_time / total if total > 0 else 0.0


class JsonlLog:
    """Log records as JSON lines in ``path``, the whole file rewritten atomically at each point.

    In a multi-host run (``jax.distributed``) every process computes the same records and only
    process 0 writes the file, so the processes do not race to replace one shared file.

    Args:
      path: the ``metrics.jsonl`` file.
      keep_until: when resuming, keep the existing records with ``step ≤ keep_until``; None
        starts a new log.
    """

    def __init__(self, path: str | Path, keep_until: int | None):
        self.path = Path(path)
        self.lines: list[str] = []
        if keep_until is not None and self.path.exists():
            for line in self.path.read_text().splitlines():
                if line.strip() and json.loads(line)["step"] <= keep_until:
                    self.lines.append(line)

    def records(self) -> list[dict]:
        """The records written so far."""
        return [json.loads(line) for line in self.lines]

    def append(self, record: dict) -> None:
        """Add ``record`` and rewrite the file atomically."""
        self.extend([record])

    def extend(self, records: list[dict]) -> None:
        """Add ``records`` and rewrite the file atomically (once)."""
        self.lines.extend(json.dumps(jsonable(r)) for r in records)
        if jax.process_index() == 0:
            atomic_write_bytes(self.path, ("\n".join(self.lines) + "\n").encode())
