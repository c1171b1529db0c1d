"""D_LR by the O(np² + nC²) formula vs the naive n×n CKA formula, in one run.

    python benchmarks/bench_dlr.py [--n 4000 --p 256 --c 10]

Target (issue 2): ≥ 20× faster at n = 4000. Both sides are jitted float32 JAX on the same data;
times are medians of repeated runs after compilation.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from metrics import dlr


@jax.jit
def naive_dlr(phi, f):
    """1 − ⟨HKH, P⟩/(‖HKH‖‖P‖) with the n×n kernel K = ΦΦᵀ and projection P onto col(HF)."""
    k = phi @ phi.T
    k = k - k.mean(0) - k.mean(1)[:, None] + k.mean()
    fc = f - f.mean(0)
    u, s, _ = jnp.linalg.svd(fc, full_matrices=False)
    q = jnp.where(s > 100 * f.shape[1] * jnp.finfo(f.dtype).eps * s[0], u, 0.0)
    proj = q @ q.T
    return 1 - jnp.sum(k * proj) / (jnp.linalg.norm(k) * jnp.linalg.norm(proj))


def _time(fn, *args, repeats=5):
    jax.block_until_ready(fn(*args))
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main(n: int, p: int, c: int) -> None:
    rng = np.random.default_rng(0)
    phi = jnp.asarray(np.maximum(rng.normal(size=(n, p)), 0), jnp.float32)
    f = phi @ jnp.asarray(rng.normal(size=(p, c)), jnp.float32)
    t_fast = _time(dlr, phi, f)
    t_naive = _time(naive_dlr, phi, f)
    d_fast, d_naive = float(dlr(phi, f)), float(naive_dlr(phi, f))
    print(f"n={n} p={p} C={c} float32, {jax.devices()[0].platform}")
    print(f"dlr (O(np²))      : {t_fast * 1e3:9.2f} ms   D_LR = {d_fast:.6f}")
    print(f"naive n×n CKA     : {t_naive * 1e3:9.2f} ms   D_LR = {d_naive:.6f}")
    print(f"|difference|      : {abs(d_fast - d_naive):.2e}")
    print(f"speed-up          : {t_naive / t_fast:9.1f}×  (target ≥ 20×)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--p", type=int, default=256)
    ap.add_argument("--c", type=int, default=10)
    a = ap.parse_args()
    main(a.n, a.p, a.c)
