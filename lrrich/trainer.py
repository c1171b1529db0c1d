"""The ``train`` an experiment calls: :func:`nets.train`, or the batcher of its ``--vmap`` sweep.

``lrrich sweep --vmap`` (:mod:`lrrich.sweep_vmap`) runs each point's experiment in a thread of
its own under one :class:`nets.batch.TrainBatcher`, inside :func:`batched`. There :func:`train`
hands the thread's calls to that batcher, which trains the compatible calls of several points as
one stacked program; everywhere else it is :func:`nets.train`. Experiments train through this
function so that a sweep can stack their runs without changing their code.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_THREAD = threading.local()


def train(model, data, config, **kwargs):
    """:func:`nets.train` (same arguments and result), or the current thread's sweep batcher."""
    batcher = getattr(_THREAD, "batcher", None)
    if batcher is None:
        from nets import train as train_one

        return train_one(model, data, config, **kwargs)
    return batcher.train(model, data, config, **kwargs)


@contextlib.contextmanager
def batched(batcher) -> Iterator[None]:
    """Within this block the calling thread trains through ``batcher`` (and leaves it on exit)."""
    from nets.batch import batched_training

    with batched_training(batcher):
        _THREAD.batcher = batcher
        try:
            yield
        finally:
            _THREAD.batcher = None
