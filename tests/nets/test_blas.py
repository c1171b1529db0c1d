"""nets.blas: one BLAS thread inside train()/the context manager, settings restored after."""

import jax
import numpy as np
import scipy.linalg  # noqa: F401  (loads SciPy's OpenBLAS, the one jax's LAPACK kernels use)
from threadpoolctl import threadpool_info, threadpool_limits

from nets import MLP, TrainConfig, load_digits, train
from nets.blas import one_blas_thread


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_context_limits_and_restores_blas_threads():
    assert _blas_threads(), "no BLAS library loaded: the test would check nothing"
    with threadpool_limits(limits=2, user_api="blas"):  # what an unlimited 2-core process has
        before = _blas_threads()
        assert max(before) == 2
        with one_blas_thread():
            assert _blas_threads() == [1] * len(before)
        assert _blas_threads() == before


def test_train_runs_with_one_blas_thread_and_restores(monkeypatch):
    from flax import nnx

    import nets.loop

    seen = []
    real = nets.loop.log_values

    def spy(*args, **kwargs):
        seen.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(nets.loop, "log_values", spy)
    data = load_digits()
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        train(
            MLP(64, (8,), 10, rngs=nnx.Rngs(0)),
            data,
            TrainConfig(epochs=1),
            key=jax.random.key(0),
            progress=False,
        )
        assert _blas_threads() == before
    assert seen and all(np.all(np.array(s) == 1) for s in seen)
