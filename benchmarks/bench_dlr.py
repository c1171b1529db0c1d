"""D_LR speed against one ΦᵀΦ GEMM, and against the naive n×n CKA, in one run.

    python benchmarks/bench_dlr.py                  # n = 200,000, p = 256, C = 10, float32
    python benchmarks/bench_dlr.py --n 20000        # quick run

Prints, all measured in this run on the same float32 data (best of 7 repeats after compilation):

1. ``dlr`` / one ``x.T @ x`` GEMM of Φ (target ≤ 2×): D_LR adds the centring, the QR of the
   outputs and one n×C×p product to the Gram.
2. The rate of the ΦᵀΦ step as :mod:`metrics` runs it (mean, full-precision Gram with the centring
   folded in, ΦᵀΦ − nμμᵀ) as a fraction of the machine's plain ``x.T @ x`` rate (target ≥ 50%).
3. ``dlr`` against the naive n×n centred-CKA formula at ``--n-naive`` (the formula D_LR is
   defined by; O(n²) memory, O(n³) time) and the difference of the two values.

Results: ``benchmarks/results.md`` (``python benchmarks/bench_dlr.py --record``).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from results import Printed

from metrics import dlr

HIGHEST = jax.lax.Precision.HIGHEST


@jax.jit
def naive_dlr(phi, f):
    """1 − ⟨HKH, P⟩/(‖HKH‖‖P‖) with the n×n kernel K = ΦΦᵀ and the projection P onto col(HF)."""
    k = jnp.matmul(phi, phi.T, precision=HIGHEST)
    k = k - k.mean(0) - k.mean(1)[:, None] + k.mean()
    u, s, _ = jnp.linalg.svd(f - f.mean(0), full_matrices=False)
    tol = 2 * jnp.finfo(f.dtype).eps * (np.sqrt(f.shape[0]) + np.sqrt(f.shape[1]))
    q = jnp.where(s > tol * s[0], u, 0.0)
    proj = jnp.matmul(q, q.T, precision=HIGHEST)
    return 1 - jnp.sum(k * proj) / (jnp.linalg.norm(k) * jnp.linalg.norm(proj))


@jax.jit
def plain_gram(x):
    """The machine's GEMM rate: ``x.T @ x`` as a user would write it."""
    return x.T @ x


@jax.jit
def metrics_gram(x):
    """The ΦᵀΦ step of :mod:`metrics.moments`: mean, full-precision Gram, centring folded in."""
    mu = jnp.mean(x, axis=0)
    return jnp.matmul(x.T, x, precision=HIGHEST) - x.shape[0] * jnp.outer(mu, mu)


def _time(fn, *args, repeats=7):
    jax.block_until_ready(fn(*args))
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        ts.append(time.perf_counter() - t0)
    return float(np.min(ts))  # best of the repeats: least disturbed by other load (timeit)


def main(n: int, p: int, c: int, n_naive: int, record: bool = False) -> None:
    from nets.blas import limit_blas_threads

    limit_blas_threads()  # one OpenBLAS thread (nets/blas.py), as the CLI and the tests run
    say = Printed()
    rng = np.random.default_rng(0)
    phi = jnp.asarray(np.maximum(rng.normal(size=(n, p)), 0), jnp.float32)  # post-ReLU features
    logits = np.asarray(phi) @ rng.normal(size=(p, c)).astype(np.float32) / np.sqrt(p)
    f = jnp.asarray(jax.nn.softmax(jnp.asarray(logits), axis=1))  # softmax outputs, rank C − 1
    say(f"{jax.devices()[0].platform}, {jax.device_count()} device(s); float32, n={n} p={p} C={c}")

    t_dlr = _time(dlr, phi, f)
    t_plain = _time(plain_gram, phi)
    t_step = _time(metrics_gram, phi)
    flops = 2.0 * n * p * p
    say(f"[1] dlr                : {t_dlr * 1e3:9.1f} ms")
    say(f"    one x.T @ x GEMM   : {t_plain * 1e3:9.1f} ms  ({flops / t_plain / 1e9:.1f} GFLOP/s)")
    say(f"    ratio dlr / GEMM   : {t_dlr / t_plain:9.2f}×   (target ≤ 2×)")
    say(f"[2] ΦᵀΦ step (metrics) : {t_step * 1e3:9.1f} ms  ({flops / t_step / 1e9:.1f} GFLOP/s)")
    say(f"    rate / x.T @ x rate: {t_plain / t_step:9.0%}    (target ≥ 50%)")

    m = min(n_naive, n)
    t_fast = _time(dlr, phi[:m], f[:m])
    t_naive = _time(naive_dlr, phi[:m], f[:m], repeats=3)
    d_fast, d_naive = float(dlr(phi[:m], f[:m])), float(naive_dlr(phi[:m], f[:m]))
    say(f"[3] n={m}: dlr {t_fast * 1e3:.1f} ms, naive n×n CKA {t_naive * 1e3:.1f} ms")
    say(
        f"    speed-up           : {t_naive / t_fast:9.1f}×   |ΔD_LR| = {abs(d_fast - d_naive):.1e}"
    )
    if record:
        say.record(__file__)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--p", type=int, default=256)
    ap.add_argument("--c", type=int, default=10)
    ap.add_argument("--n-naive", type=int, default=4000)
    ap.add_argument("--record", action="store_true", help="write benchmarks/results.md")
    a = ap.parse_args()
    main(a.n, a.p, a.c, a.n_naive, a.record)
