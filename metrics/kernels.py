"""Prior richness measures on kernels and parameters: feature-kernel distance, NTK distance, norms.

D §4 (kernel distance from initialisation S_init, parameter norm ‖θ‖²) and Kunin et al. (K)
§1 (NTK kernel distance S(t₁, t₂) = 1 − ⟨K₁, K₂⟩/(‖K₁‖_F‖K₂‖_F), Fatras/Fort et al. 2020).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from metrics._numerics import centre, mm, pow2_scale
from metrics._validate import as_float, as_matrix, check_finite, common_dtype, is_concrete, same_n


@jax.jit
def _linear_cka(a: jax.Array, b: jax.Array) -> jax.Array:
    _, a_c = centre(pow2_scale(a))  # CKA is scale invariant: keep the Grams in range
    _, b_c = centre(pow2_scale(b))
    cross = jnp.linalg.norm(mm(a_c.T, b_c)) ** 2
    return cross / (jnp.linalg.norm(mm(a_c.T, a_c)) * jnp.linalg.norm(mm(b_c.T, b_c)))


def feature_kernel_distance(features_init, features) -> jax.Array:
    r"""Kernel distance from initialisation, 1 − centred CKA of the two feature kernels.

    .. math:: S_{init} = 1 - \frac{\lVert \Phi_{0,c}^\top \Phi_c\rVert_F^2}
              {\lVert \Phi_{0,c}^\top\Phi_{0,c}\rVert_F\,\lVert \Phi_c^\top\Phi_c\rVert_F}

    (D §4, Kornblith et al. 2019 linear CKA), using ⟨HK₀H, HKH⟩_F = ‖Φ₀ᶜᵀΦᶜ‖_F² for
    K = ΦΦᵀ: O(n p₀ p) with p₀×p matrices only, never n×n, GEMMs at full float32 precision,
    inputs rescaled by exact powers of two. Widths may differ.

    Args:
      features_init: (n, p₀) features Φ₀ at initialisation on n inputs.
      features: (n, p) features Φ now, on the same inputs.

    Returns:
      () S_init ∈ [0, 1]; 0 = kernel unchanged (up to scale and rotation of Φ).

    Raises:
      ValueError: shape mismatch, NaN/inf, constant features.
    """
    a = as_matrix(features_init, "features_init", what="(n, p0)")
    b = as_matrix(features, "features", what="(n, p)")
    same_n(a, b, "features_init", "features")
    dtype = common_dtype(a, b)
    cka = _linear_cka(a.astype(dtype), b.astype(dtype))
    if is_concrete(cka) and not np.isfinite(float(cka)):
        raise ValueError(
            "features_init or features are constant over samples at working precision: "
            "their centred kernel vanishes and CKA is undefined"
        )
    return jnp.clip(1.0 - cka, 0.0, 1.0)


def _leaves(params, name: str) -> list[jax.Array]:
    """Real floating leaves of a parameter pytree, checked for NaN/inf."""
    leaves = jax.tree.leaves(params)
    if not leaves:
        raise ValueError(f"{name} has no array leaves")
    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        where = f"{name}{jax.tree_util.keystr(path)}"
        x = as_float(leaf, where)
        check_finite(x, where)
        out.append(x)
    return out


def parameter_norm(params) -> jax.Array:
    """Squared parameter norm ‖θ‖² = Σ over all leaves of the pytree (D §4, Lyu et al.).

    Args:
      params: any pytree of real arrays (Flax ``nnx.State``, dict, list).

    Returns:
      () ‖θ‖².

    Raises:
      ValueError: no leaves, complex leaves, NaN/inf entries (on concrete input).
    """
    return sum(jnp.sum(jnp.square(x)) for x in _leaves(params, "params"))


def parameter_distance(params_init, params) -> jax.Array:
    """L2 distance ‖θ − θ₀‖ between two parameter pytrees of the same structure (K App. D.1).

    Args:
      params_init: pytree θ₀.
      params: pytree θ with the same structure and the same shape in every leaf (no
        broadcasting).

    Returns:
      () ‖θ − θ₀‖₂.

    Raises:
      ValueError: different structures or leaf shapes, complex leaves, NaN/inf.
    """
    if jax.tree.structure(params_init) != jax.tree.structure(params):
        raise ValueError("params_init and params must have the same pytree structure")
    a, b = _leaves(params_init, "params_init"), _leaves(params, "params")
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
    for x, y, path in zip(a, b, paths, strict=True):
        if x.shape != y.shape:
            raise ValueError(
                f"params_init{path} and params{path} must have the same shape, got {x.shape} "
                f"and {y.shape}"
            )
    return jnp.sqrt(sum(jnp.sum(jnp.square(y - x)) for x, y in zip(a, b, strict=True)))


@partial(jax.jit, static_argnames=("apply",))
def _ntk_columns(apply: Callable, params, x: jax.Array, ids: jax.Array) -> jax.Array:
    """NTK columns ``ids`` (flattened (sample, output) indices): J (Jᵀ e_j) by vjp then jvp."""
    n = x.shape[0]
    f = lambda p: apply(p, x).reshape(n, -1)
    c = jax.eval_shape(f, params).shape[1]

    def column(idx):
        i, k = idx // c, idx % c
        xi = jax.lax.dynamic_slice_in_dim(x, i, 1, axis=0)
        _, pullback = jax.vjp(lambda p: apply(p, xi).reshape(-1)[k], params)
        (v,) = pullback(jnp.ones((), jax.eval_shape(f, params).dtype))
        return jax.jvp(f, (params,), (v,))[1].reshape(-1)

    return jax.vmap(column)(ids)


def empirical_ntk(apply: Callable, params, x, *, chunk: int = 32) -> jax.Array:
    r"""Empirical NTK matrix Θ(x_i, x_j) = Σ_θ ∂_θ f(x_i) ∂_θ f(x_j)ᵀ on a (sub)sample.

    Computed as implicit Jacobian–vector products (K §1): for each (sample, output) column,
    v = Jᵀe_j by a single-sample ``jax.vjp`` and then Jv by ``jax.jvp`` over the whole
    subsample, ``chunk`` columns at a time under ``vmap``. Memory O(chunk·|θ| + (nC)²); the n×|θ|
    Jacobian is never materialised. Cost O((nC)²·cost(f)/n).

    Args:
      apply: ``apply(params, x) -> (n, C)`` (or (n,)) network outputs; pure function.
      params: pytree θ.
      x: (n, ...) inputs of the subsample.
      chunk: number of NTK columns computed at once.

    Returns:
      (nC, nC) NTK matrix, rows/columns ordered (sample, output).
    """
    x = jnp.asarray(x)
    n = x.shape[0]
    c = int(np.prod(jax.eval_shape(lambda p: apply(p, x), params).shape[1:], dtype=int))
    total = n * c
    chunk = max(1, min(int(chunk), total))
    ids = np.arange(-(-total // chunk) * chunk).clip(max=total - 1)  # pad the last block
    blocks = [_ntk_columns(apply, params, x, jnp.asarray(b)) for b in ids.reshape(-1, chunk)]
    return jnp.concatenate(blocks, axis=0)[:total].T


def ntk_kernel_distance(apply: Callable, params_a, params_b, x, *, chunk: int = 32) -> jax.Array:
    r"""NTK kernel distance S(t₁, t₂) = 1 − ⟨K₁, K₂⟩_F / (‖K₁‖_F ‖K₂‖_F) on a subsample.

    .. math:: S(t_1, t_2) = 1 - \frac{\langle K_{t_1}, K_{t_2}\rangle_F}
              {\lVert K_{t_1}\rVert_F \lVert K_{t_2}\rVert_F}

    (Kunin et al. 2024 §1; Fort et al. 2020), with the empirical NTK of :func:`empirical_ntk`
    (uncentred, all outputs). Invariant to the scale of either kernel; 0 in the lazy regime.

    Args:
      apply: ``apply(params, x) -> (n, C)`` network outputs, any architecture.
      params_a: θ at t₁ (e.g. initialisation).
      params_b: θ at t₂, same structure.
      x: (n, ...) subsample of inputs (cost grows as n²).
      chunk: NTK columns per vmapped block.

    Returns:
      () S ∈ [0, 1].
    """
    if jax.tree.structure(params_a) != jax.tree.structure(params_b):
        raise ValueError("params_a and params_b must have the same pytree structure")
    k1 = empirical_ntk(apply, params_a, x, chunk=chunk)
    k2 = empirical_ntk(apply, params_b, x, chunk=chunk)
    s = 1.0 - jnp.sum(k1 * k2) / (jnp.linalg.norm(k1) * jnp.linalg.norm(k2))
    if is_concrete(s) and not np.isfinite(float(s)):
        raise ValueError("an NTK is identically zero on x: kernel distance undefined")
    return s
