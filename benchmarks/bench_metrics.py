"""Speed of the metrics at scale, as ratios measured in one run.

    python benchmarks/bench_metrics.py [--n 50000 --p 512 --c 100 --stream-n 1000000] [--record]

1. D_LR + the full feature decomposition (Nyström fit and evaluation on n samples, outputs and
   one-hot targets) at n = 50,000, p = 512, C = 100, float32.
2. The naive n×n centred-CKA D_LR at the largest n that fits comfortably (the n×n kernel and
   projection: 2·n² float32), extrapolated to n as O(n³) (the n×n GEMMs), and the ratio.
3. The NTK kernel distance (:func:`metrics.ntk_kernel_distance`) of a small CNN on a subsample,
   extrapolated to n as O(n²) (one NTK column per sample and output), and the ratio.
4. The GEMM-rate ratios of D_LR itself are printed by ``benchmarks/bench_dlr.py``.
5. Scale: streaming D_LR at n = ``--stream-n`` (default 10⁶), p = ``--stream-p`` (default 4096),
   C = 10, batches of ``--stream-batch``: time, and peak resident memory after the first batches
   and at the end (memory O(p²): it must not grow with n). The default is 2·n·p² = 3.4·10¹³
   flop of GEMMs (hours on a small CPU); ``--stream-n 65536`` is a quick check of the same shapes.
Times are medians of repeats after compilation (compile time reported separately).

Results: ``benchmarks/results.md`` (``python benchmarks/bench_metrics.py --record``).
"""

from __future__ import annotations

import argparse
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np
from bench_dlr import naive_dlr  # the n×n reference formula, shared with bench_dlr.py
from results import Printed

from metrics import dlr, dlr_streaming, feature_decomposition, ntk_kernel_distance


def _time(fn, *args, repeats=3):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), first


def _cnn_init(key, c):
    """A small CNN on 8×8×1 inputs: conv 3×3×8 → relu → conv 3×3×16 → relu → mean-pool → dense C."""
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "c1": jax.random.normal(k1, (3, 3, 1, 8)) / 3.0,
        "c2": jax.random.normal(k2, (3, 3, 8, 16)) / np.sqrt(72.0),
        "w": jax.random.normal(k3, (16, c)) / 4.0,
    }


def _cnn(params, x):
    dn = ("NHWC", "HWIO", "NHWC")
    h = jax.nn.relu(
        jax.lax.conv_general_dilated(x, params["c1"], (1, 1), "SAME", dimension_numbers=dn)
    )
    h = jax.nn.relu(
        jax.lax.conv_general_dilated(h, params["c2"], (1, 1), "SAME", dimension_numbers=dn)
    )
    return h.mean(axis=(1, 2)) @ params["w"]


def main(
    n: int,
    p: int,
    c: int,
    n_naive: int,
    n_ntk: int,
    stream_n: int,
    stream_p: int,
    stream_batch: int,
    record: bool = False,
) -> None:
    from nets.blas import limit_blas_threads

    limit_blas_threads()  # one OpenBLAS thread (nets/blas.py), as the CLI and the tests run
    say = Printed()
    rng = np.random.default_rng(0)
    say(f"device: {jax.devices()[0].platform}, {jax.device_count()} device(s); float32")
    phi = jnp.asarray(np.maximum(rng.normal(size=(n, p)), 0.0), jnp.float32)
    f = phi @ jnp.asarray(rng.normal(size=(p, c)) / np.sqrt(p), jnp.float32)
    y = jnp.asarray(np.eye(c)[rng.integers(0, c, n)], jnp.float32)

    # 1. D_LR + full decomposition (fit and evaluation sample both n)
    t_dlr, c_dlr = _time(dlr, phi, f)
    t_dec, c_dec = _time(lambda a, b, d: feature_decomposition(a, a, b, d), phi, f, y)
    say(
        f"[1] n={n} p={p} C={c}: dlr {t_dlr:.2f} s (first call {c_dlr:.1f} s); "
        f"full decomposition with targets {t_dec:.2f} s (first call {c_dec:.1f} s)"
    )
    t_ours = t_dlr + t_dec

    # 2. naive n×n CKA at n_naive, extrapolated O(n³)
    t_naive, _ = _time(naive_dlr, phi[:n_naive], f[:n_naive], repeats=1)
    d_fast, d_naive = (
        float(dlr(phi[:n_naive], f[:n_naive])),
        float(naive_dlr(phi[:n_naive], f[:n_naive])),
    )
    t_naive_n = t_naive * (n / n_naive) ** 3
    say(
        f"[2] naive n×n CKA at n={n_naive} ({2 * n_naive**2 * 4 / 2**30:.2f} GiB of n×n): "
        f"{t_naive:.2f} s, |ΔD_LR| = {abs(d_fast - d_naive):.1e}; extrapolated to n={n} "
        f"(O(n³)): {t_naive_n:.0f} s ({2 * n**2 * 4 / 2**30:.0f} GiB) → "
        f"{t_naive_n / t_dlr:.0f}× slower than dlr, {t_naive_n / t_ours:.0f}× dlr + decomposition"
    )

    # 3. NTK kernel distance of a small CNN on n_ntk samples, extrapolated O(n²)
    x = jnp.asarray(rng.normal(size=(n_ntk, 8, 8, 1)), jnp.float32)
    p0 = _cnn_init(jax.random.PRNGKey(0), c)
    p1 = jax.tree.map(lambda a: a * 1.1, _cnn_init(jax.random.PRNGKey(1), c))
    t_ntk, _ = _time(lambda a, b: ntk_kernel_distance(_cnn, a, b, x, chunk=100), p0, p1, repeats=1)
    t_ntk_n = t_ntk * (n / n_ntk) ** 2
    say(
        f"[3] NTK kernel distance, CNN (conv8-conv16-dense{c}), n={n_ntk} (nC = {n_ntk * c} "
        f"columns): {t_ntk:.2f} s; extrapolated to n={n} (O(n²)): {t_ntk_n:.0f} s → "
        f"{t_ntk_n / t_dlr:.0f}× dlr, {t_ntk_n / t_ours:.0f}× dlr + decomposition"
    )

    # 5. scale: streaming at n = stream_n, p = stream_p; memory must stay O(p²)
    w = rng.normal(size=(stream_p, 10)).astype(np.float32) / np.sqrt(stream_p)

    def batches():
        r = np.random.default_rng(1)
        for start in range(0, stream_n, stream_batch):
            a = np.maximum(r.normal(size=(min(stream_batch, stream_n - start), stream_p)), 0)
            a = a.astype(np.float32)
            yield a, a @ w
            if start == 2 * stream_batch:
                early.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10)

    early: list[float] = []
    t0 = time.perf_counter()
    v = float(dlr_streaming(batches()))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    state = (stream_p * stream_p + 2 * stream_p * 10) * 4 / 2**20
    say(
        f"[5] streaming dlr n={stream_n} p={stream_p} C=10, batches of {stream_batch}: "
        f"{time.perf_counter() - t0:.1f} s incl. data generation, D_LR = {v:.4f}; "
        f"statistics {state:.0f} MiB; peak RSS after 3 batches "
        f"{early[0] if early else peak:.0f} MiB, at the end {peak:.0f} MiB"
    )
    if record:
        say.record(__file__)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--p", type=int, default=512)
    ap.add_argument("--c", type=int, default=100)
    ap.add_argument("--n-naive", type=int, default=8_000)
    ap.add_argument("--n-ntk", type=int, default=64)
    ap.add_argument("--stream-n", type=int, default=1_000_000)
    ap.add_argument("--stream-p", type=int, default=4096)
    ap.add_argument("--stream-batch", type=int, default=8192)
    ap.add_argument("--record", action="store_true", help="write benchmarks/results.md")
    a = ap.parse_args()
    main(a.n, a.p, a.c, a.n_naive, a.n_ntk, a.stream_n, a.stream_p, a.stream_batch, a.record)
