"""The XLA:CPU hangs met in this project, as reproducers run in a child process with a time-out.

Each reproducer is a self-contained program that, with jax/jaxlib 0.10.2 on the 2-core CPU,
never returns from some call (0 % CPU: every XLA worker waits for work while the caller waits
for the result; ``gdb`` shows ``CpuPjRtRawLoadedExecutable::Execute`` blocked in
``tsl::BlockUntilReady``). ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`` does not help, nor
does ``jax_cpu_enable_async_dispatch`` off. The project avoids both programs; run this after a
jax upgrade to see whether the avoidance is still needed:

* ``lambda_balanced``: the former per-time evaluation of ``sims.lambda_balanced`` (a batched
  LAPACK QR and triangular solve per time and a ``jnp.where`` between two forms, vmapped over
  32 trajectories × 1,000 times; float64). Hangs in some runs (2 of 3). The solver now uses an
  elementwise Householder instead (``sims/lambda_balanced.py``).
* ``dlr_pair``: one jitted ``jax.vmap`` of two D_LRs (a log point's fit and held-out subsets),
  16 runs of 360 × 8 features and 360 × 10 outputs. The first call returns, the second never.
  Two vmapped :func:`metrics.moments` (the first half of D_LR) already hang; a pair of batched
  QRs or of batched SVDs alone does not; 2 runs, or 100 and 50 rows, do not hang. This is why
  ``nets.evaluate.batched_log_points`` keeps the metrics of stacked runs looped on the CPU
  (they are faster looped there too).

    python benchmarks/xla_cpu_hangs.py [lambda_balanced|dlr_pair ...] [--timeout 60]

Exit status 1 if any reproducer hung. Findings: ``docs/findings/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

REPRODUCERS = {
    "lambda_balanced": r"""
import sys, time, jax, jax.numpy as jnp, jax.scipy.linalg as jsl
jax.config.update("jax_enable_x64", True)
B, N, n, h = 32, 1000, 7, 3
f = jnp.sort(jax.random.normal(jax.random.key(0), (B, n)))[:, ::-1]
Wm = jnp.linalg.qr(jax.random.normal(jax.random.key(1), (B, h, h)))[0]
L0 = jnp.tril(jax.random.normal(jax.random.key(2), (B, n, h)))
t = jnp.linspace(0.0, 40.0, N)

def at(f, Wm, L0, t):
    x = 2.0 * jnp.abs(f) * t
    small = x < 1e-8
    xs = jnp.where(small, 1.0, x)
    log_h = jnp.where(small, -0.5 * x, jnp.log(-jnp.expm1(-xs) / xs))
    ell = 0.5 * (2.0 * jnp.maximum(f, 0.0) * t + jnp.log(t) + log_h)
    tri = jnp.arange(n)[:, None] >= jnp.arange(h)[None, :]
    a = jnp.abs(L0)
    log_l = jnp.where(tri & (a > 0), ell[:, None] + jnp.log(jnp.where(a > 0, a, 1.0)), -jnp.inf)
    m = jnp.maximum(jnp.max(log_l, axis=0), 0.0)
    H = jnp.concatenate([Wm * jnp.exp(-m)[None], jnp.sign(L0) * jnp.exp(log_l - m[None])], 0)
    omega, R = jnp.linalg.qr(H)
    z_omega = jnp.exp(f * t - ell)[:, None] * omega[h:]
    rhs = (L0 * jnp.exp(-m)[None, :]).T
    z_tri = jnp.exp(jnp.minimum(f * t, 0.5))[:, None] * jsl.solve_triangular(R.T, rhs, lower=True).T
    return jnp.where((f * t > 0.5)[:, None], z_omega, z_tri)

g = jax.jit(jax.vmap(lambda f, W, L: jax.vmap(lambda s: at(f, W, L, s))(t)))
start = time.perf_counter()
g(f, Wm, L0).block_until_ready()
print(f"finished in {time.perf_counter() - start:.2f} s")
""",
    "dlr_pair": r"""
import time, jax, jax.numpy as jnp
import metrics
runs, rows = 16, 360
key = jax.random.key(0)
def sample(i):
    a, b = jax.random.split(jax.random.fold_in(key, i))
    return jax.random.normal(a, (runs, rows, 8)), jax.random.normal(b, (runs, rows, 10))
(p1, f1), (p2, f2) = sample(1), sample(2)
pair = jax.jit(jax.vmap(lambda p, f, q, g: (metrics.dlr_with_rank(p, f),
                                            metrics.dlr_with_rank(q, g))))
start = time.perf_counter()
for i in range(20):
    jax.block_until_ready(pair(p1, f1, p2, f2))
    print(f"call {i} returned", flush=True)
print(f"finished in {time.perf_counter() - start:.2f} s")
""",
}


def run(name: str, timeout: float = 60.0) -> bool:
    """Run reproducer ``name`` in a child process; print what it did; False if it hung."""
    if name not in REPRODUCERS:
        raise ValueError(f"unknown reproducer {name!r}; choose from {sorted(REPRODUCERS)}")
    if not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    cmd = [sys.executable, "-c", REPRODUCERS[name]]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        done = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        calls = done.count(" returned")
        where = f" after {calls} call(s) returned" if calls else ""
        print(f"  {name}: HUNG{where}: no result after {timeout:g} s (killed)")
        return False
    print(f"  {name}: " + (out.stdout.strip().splitlines() or [out.stderr.strip()[-2000:]])[-1])
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(REPRODUCERS), help="reproducers to run")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before 'HUNG'")
    args = parser.parse_args()
    import jax

    print(f"jax {jax.__version__}, {jax.default_backend()}; started {time.strftime('%H:%M:%S')}")
    try:
        ok = [run(name, args.timeout) for name in args.names]
    except ValueError as e:
        parser.error(str(e))
    sys.exit(0 if all(ok) else 1)


if __name__ == "__main__":
    main()
