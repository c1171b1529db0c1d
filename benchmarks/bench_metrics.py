"""Speed of the metrics at scale, as ratios measured in one run (issue 5 "Speed").

    python benchmarks/bench_metrics.py [--n 50000 --p 512 --c 100]

1. D_LR + the full feature decomposition (Nyström fit and evaluation on n samples, outputs and
   one-hot targets) at n = 50,000, p = 512, C = 100, float32.
2. The naive n×n centred-CKA D_LR at the largest n that fits comfortably (the n×n kernel and
   projection: 2·n² float32), extrapolated to n as O(n³) (the n×n GEMMs), and the ratio.
3. The NTK kernel distance (:func:`metrics.ntk_kernel_distance`) of a small CNN on a subsample,
   extrapolated to n as O(n²) (one NTK column per sample and output), and the ratio.
4. The fraction of the machine's GEMM rate reached by the ΦᵀΦ step (target ≥ 50%): plain
   ``jnp.dot`` of the same shapes, measured in the same run.
5. Scale: streaming D_LR with p = 4096 (a few batches) and n = 10⁶ (p = 32), timed.
Times are medians of repeats after compilation (compile time reported separately).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from metrics import dlr, dlr_streaming, feature_decomposition, ntk_kernel_distance
from metrics.moments import _centre


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


def main(n: int, p: int, c: int, n_naive: int, n_ntk: int) -> None:
    rng = np.random.default_rng(0)
    print(f"device: {jax.devices()[0].platform}, {jax.device_count()} device(s); float32")
    phi = jnp.asarray(np.maximum(rng.normal(size=(n, p)), 0.0), jnp.float32)
    f = phi @ jnp.asarray(rng.normal(size=(p, c)) / np.sqrt(p), jnp.float32)
    y = jnp.asarray(np.eye(c)[rng.integers(0, c, n)], jnp.float32)

    # 1. D_LR + full decomposition (fit and evaluation sample both n)
    t_dlr, c_dlr = _time(dlr, phi, f)
    t_dec, c_dec = _time(lambda a, b, d: feature_decomposition(a, a, b, d), phi, f, y)
    print(
        f"[1] n={n} p={p} C={c}: dlr {t_dlr:.2f} s (first call {c_dlr:.1f} s); "
        f"full decomposition with targets {t_dec:.2f} s (first call {c_dec:.1f} s)"
    )
    t_ours = t_dlr + t_dec

    # 4. GEMM rate: ΦᵀΦ inside the metric vs plain jnp.dot of the same shapes
    centred = jax.jit(lambda x: _centre(x)[1])(phi)
    gram = jax.jit(lambda x: x.T @ x)
    dot = jax.jit(lambda a, b: jnp.dot(a, b))
    t_gram, _ = _time(gram, centred, repeats=5)
    phi_t = jnp.asarray(np.asarray(centred).T.copy())
    t_dot, _ = _time(dot, phi_t, centred, repeats=5)
    flops = 2.0 * n * p * p
    moments_step = jax.jit(lambda x: (lambda pc: pc.T @ pc)(_centre(x)[1]))
    t_step, _ = _time(moments_step, phi, repeats=5)
    print(
        f"[4] GEMM rate jnp.dot({p}×{n}, {n}×{p}): {flops / t_dot / 1e9:.1f} GFLOP/s; "
        f"ΦᵀΦ as in metrics (centre + Φ_cᵀΦ_c): {flops / t_step / 1e9:.1f} GFLOP/s = "
        f"{t_dot / t_step:.0%} of it (Φ_cᵀΦ_c alone {t_dot / t_gram:.0%}; target ≥ 50%)"
    )

    # 2. naive n×n CKA at n_naive, extrapolated O(n³)
    t_naive, _ = _time(naive_dlr, phi[:n_naive], f[:n_naive], repeats=1)
    d_fast, d_naive = (
        float(dlr(phi[:n_naive], f[:n_naive])),
        float(naive_dlr(phi[:n_naive], f[:n_naive])),
    )
    t_naive_n = t_naive * (n / n_naive) ** 3
    print(
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
    print(
        f"[3] NTK kernel distance, CNN (conv8-conv16-dense{c}), n={n_ntk} (nC = {n_ntk * c} "
        f"columns): {t_ntk:.2f} s; extrapolated to n={n} (O(n²)): {t_ntk_n:.0f} s → "
        f"{t_ntk_n / t_dlr:.0f}× dlr, {t_ntk_n / t_ours:.0f}× dlr + decomposition"
    )

    # 5. scale: streaming at p = 4096 and at n = 10⁶
    b4, p4 = 2048, 4096
    big = [
        (
            jnp.asarray(np.maximum(rng.normal(size=(b4, p4)), 0), jnp.float32),
            jnp.asarray(rng.normal(size=(b4, 10)), jnp.float32),
        )
        for _ in range(4)
    ]
    t0 = time.perf_counter()
    v = float(dlr_streaming(big))
    print(
        f"[5] streaming dlr p={p4}, 4 batches of {b4} (n={4 * b4}): {time.perf_counter() - t0:.1f} s "
        f"incl. compile, D_LR = {v:.4f}; state {(p4 * p4 + p4 * 10) * 4 / 2**20:.0f} MiB"
    )
    w = rng.normal(size=(32, 10)).astype(np.float32)

    def million():
        r = np.random.default_rng(1)
        for _ in range(100):
            a = np.maximum(r.normal(size=(10_000, 32)), 0).astype(np.float32)
            yield a, a @ w

    t0 = time.perf_counter()
    v = float(dlr_streaming(million()))
    print(
        f"    streaming dlr n=10⁶, p=32, C=10, 100 batches of 10⁴: "
        f"{time.perf_counter() - t0:.1f} s incl. data generation, D_LR = {v:.4f}"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--p", type=int, default=512)
    ap.add_argument("--c", type=int, default=100)
    ap.add_argument("--n-naive", type=int, default=8_000)
    ap.add_argument("--n-ntk", type=int, default=64)
    a = ap.parse_args()
    main(a.n, a.p, a.c, a.n_naive, a.n_ntk)
