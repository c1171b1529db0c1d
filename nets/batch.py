"""Batched ``train`` calls: the runs of several threads trained as one vmapped program.

A sweep runs each point's experiment code in its own thread inside :func:`batched_training`;
there the point trains through :meth:`TrainBatcher.train` (``nets.train``'s signature) instead of
:func:`nets.train`. Every call then waits until each live thread has either called ``train`` or
left the batcher; the waiting calls are grouped — same data, model structure,
static config, run length, logging and metrics — and each group of two or more runs as one
stacked :func:`nets.loop.fit` whose runs step one after another inside one program
(``vectorize=False``, the default) or as one ``jax.vmap`` (``TrainBatcher(vectorize=True)``); the
rest run alone as usual. Each call returns (or raises, e.g. :class:`nets.TrainingDiverged`) what
its own ``train`` would — bitwise on the CPU unless vectorized — and writes ``run_dir/metrics.jsonl`` the
same way. Calls that checkpoint, resume, shard over devices or take a callback run alone.

Failure modes (tests/nets/test_batch.py):

* a thread that never calls ``train`` leaves the batcher when its block ends, so the others are
  not held for it; one that raises, before or inside ``train``, leaves the same way (an error of
  a stacked group is raised in every thread of the group, an error of a lone call in its own);
* calls of other shapes (model structure, data, static config, length) form their own groups;
* a thread that blocks forever without calling ``train`` or leaving holds every other thread's
  ``train`` call with it: the batcher has no timeout, so worker code must not wait on other
  workers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
from flax import nnx

from nets import checks
from nets.config import static_part
from nets.loop import check_metric_splits, fit, train

_ALONE_KWARGS = ("checkpoint_every", "resume", "data_parallel", "callback")


@dataclasses.dataclass
class _Call:
    model: Any
    data: Any
    config: Any
    kwargs: dict
    done: bool = False
    result: Any = None
    error: BaseException | None = None


def _fingerprint(data) -> str:
    h = hashlib.blake2b(digest_size=16)
    for a in (data.x_train, data.y_train, data.x_test, data.y_test):
        a = np.ascontiguousarray(a)
        h.update(f"{a.shape}{a.dtype}".encode())
        h.update(a.tobytes())
    h.update(f"{data.num_classes}{data.task}".encode())
    return h.hexdigest()


def _metrics_signature(metrics) -> Any:
    """Functions from the same source with the same captured objects count as equal."""
    if metrics is None:
        return None
    sig = []
    for name, fn in sorted(metrics.items()):
        cells = tuple(id(c.cell_contents) for c in (getattr(fn, "__closure__", None) or ()))
        sig.append((name, getattr(fn, "__code__", fn), cells))
    return tuple(sig)


class TrainBatcher:
    """Collects the ``train`` calls of ``workers`` threads and runs compatible ones together.

    Args:
      workers: the number of threads that will run under this batcher; each must call
        :meth:`leave` when it has finished (see :func:`batched_training`).
      one_at_a_time: the threads' own work outside ``train`` runs one thread at a time (a turn
        that a thread gives up while its ``train`` call waits): on a machine with few cores, the
        points' evaluation, figures and reports then run as they would one after another,
        instead of competing for the cores and the interpreter lock.
      vectorize: a group's runs step as one ``jax.vmap`` (batched matmuls: faster where the
        model is small, but each run then equals its own ``train`` to round-off per step, not
        bitwise); False (default): one after another inside the program, bitwise on the CPU.
    """

    def __init__(self, workers: int, *, one_at_a_time: bool = False, vectorize: bool = False):
        if workers < 1:
            raise ValueError(f"workers must be ≥ 1, got {workers}")
        self._turn = threading.Lock() if one_at_a_time else None
        self.vectorize = bool(vectorize)
        self._cond = threading.Condition()
        self._active = workers
        self._pending: list[_Call] = []
        self._fingerprints: dict[int, str] = {}
        self.batched_runs = 0  # runs trained inside a vmapped group (for reports and tests)

    def train(self, model, data, config, **kwargs):
        """:func:`nets.train` through the batcher: run alone or stacked with other threads' calls.

        Same arguments, return value and errors as :func:`nets.train`; bad arguments raise in the
        calling thread before it waits for the others.
        """
        bound = inspect.signature(train).bind(model, data, config, **kwargs)
        bound.apply_defaults()
        kwargs = {k: v for k, v in bound.arguments.items() if k not in ("model", "data", "config")}
        kwargs["metric_splits"] = check_metric_splits(kwargs["metric_splits"])
        checks.check_dataset(data)
        checks.check_config(config)
        checks.check_key(kwargs["key"])
        return self._submit(_Call(model, data, config, kwargs))

    def _submit(self, call: _Call):
        """Wait for the call's group to run; return its result or raise its error."""
        if self._turn is not None:  # another thread may work while this call waits
            self._turn.release()
        try:
            with self._cond:
                self._pending.append(call)
                self._maybe_flush()
                while not call.done:
                    self._cond.wait()
        finally:
            if self._turn is not None:
                self._turn.acquire()
        if call.error is not None:
            raise call.error
        return call.result

    def leave(self) -> None:
        """A worker thread finished: it makes no more ``train`` calls."""
        with self._cond:
            self._active -= 1
            self._maybe_flush()

    def _maybe_flush(self) -> None:
        if not self._pending or len(self._pending) < self._active:
            return
        calls, self._pending = self._pending, []
        for group in self._groups(calls):
            self._run(group)
        self._cond.notify_all()

    def _groups(self, calls: list[_Call]) -> list[list[_Call]]:
        groups: dict[Any, list[_Call]] = {}
        for i, c in enumerate(calls):
            if any(c.kwargs.get(k) for k in _ALONE_KWARGS):
                groups[("alone", i)] = [c]
                continue
            if id(c.data) not in self._fingerprints:  # hash each dataset object once
                self._fingerprints[id(c.data)] = _fingerprint(c.data)
            key_data = self._fingerprints[id(c.data)]
            key = (
                key_data,
                nnx.graphdef(c.model),
                static_part(c.config),
                c.config.epochs,
                c.config.steps,
                c.kwargs.get("log_every"),
                c.kwargs.get("eval_size", 2048),
                _metrics_signature(c.kwargs.get("metrics")),
                tuple(c.kwargs.get("metric_splits", ("train", "test"))),
            )
            groups.setdefault(key, []).append(c)
        return list(groups.values())

    def _run(self, group: list[_Call]) -> None:
        if len(group) == 1:
            c = group[0]
            try:
                c.result = train(c.model, c.data, c.config, **c.kwargs)
            except Exception as e:  # delivered to the calling thread
                c.error = e
            finally:
                c.done = True
            return
        kw = group[0].kwargs
        try:  # vectorize=False: each run bitwise its own train, however the sweep ran it
            models, hists = fit(
                [c.model for c in group], group[0].data, [c.config for c in group],
                [c.kwargs["key"] for c in group], stacked=True, log_every=kw["log_every"],
                eval_size=kw["eval_size"], metrics=kw["metrics"],
                metric_splits=kw["metric_splits"], run_dirs=[c.kwargs["run_dir"] for c in group],
                vectorize=self.vectorize,
            )  # fmt: skip
        except Exception as e:
            for c in group:
                c.error, c.done = e, True
            return
        self.batched_runs += len(group)
        for c, model, hist in zip(group, models, hists, strict=True):
            if hist.diverged is not None:
                c.error = hist.diverged
            else:
                c.result = (model, hist)
            c.done = True


@contextlib.contextmanager
def batched_training(batcher: TrainBatcher) -> Iterator[TrainBatcher]:
    """The calling thread works under ``batcher``: it trains with ``batcher.train`` in this block.

    The thread leaves the batcher on exit (also when the block raises), so the other threads'
    calls are no longer held for it. With ``one_at_a_time``, the block waits for its turn first.
    """
    if batcher._turn is not None:
        batcher._turn.acquire()
    try:
        yield batcher
    finally:
        if batcher._turn is not None:
            batcher._turn.release()
        batcher.leave()
