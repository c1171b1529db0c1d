"""conv_pool: one blocked convolution = conv → activation → pooling, values and gradients.

The reference is Flax's own composition — ``nnx.Conv`` then ``nnx.max_pool`` / ``nnx.avg_pool``
(XLA's reduce_window) — so nothing here compares the function with itself. Tolerances: float64
1e-12 (the two sum the same ≤ 150 products in a different order; observed ≤ 2e-13 relative),
float32 2e-5 relative to the largest entry (observed ≤ 2e-6).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nets.models import LeNet5, layers
from nets.models.conv_pool import blocked_kernel_index, conv_pool
from tests.draws import normal

ACTS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "gelu": jax.nn.gelu, "none": None}


def _reference(conv, x, size, kind, act):
    z = conv(x)
    z = z if act is None else act(z)
    pool = nnx.max_pool if kind == "max" else nnx.avg_pool
    return pool(z, (size, size), strides=(size, size))


# in_ch, out_ch, kernel, padding, image (h, w), pool size, kind, activation, monotone, torch init
CASES = [
    (1, 6, 5, 0, (32, 32), 2, "max", "relu", True, True),  # LeNet-5 conv1
    (1, 6, 5, 2, (28, 28), 2, "max", "relu", True, True),  # LeNet-5 conv1 on 28×28
    (6, 16, 5, 0, (14, 14), 2, "max", "tanh", True, True),  # LeNet-5 conv2
    (6, 16, 5, 0, (14, 14), 2, "avg", "tanh", False, True),  # the 1998 network
    (3, 4, 3, 1, (11, 13), 3, "max", "gelu", False, True),  # odd sizes: rows dropped
    (2, 5, 3, "SAME", (9, 9), 2, "max", "relu", True, False),  # Flax padding strings
    (2, 5, 4, "VALID", (12, 10), 4, "avg", "none", False, False),  # K = 2 blocks, b = k
    (3, 2, 3, 0, (7, 7), 1, "max", "relu", True, True),  # b = 1: the convolution itself
    (2, 3, 2, 0, (6, 6), 5, "max", "tanh", True, True),  # one window, kernel < block
]


def _conv(c, o, k, padding, torch_defaults, dtype):
    if isinstance(padding, str):
        return nnx.Conv(c, o, (k, k), padding=padding, param_dtype=dtype, rngs=nnx.Rngs(1))
    kw = dict(padding=padding, torch_defaults=torch_defaults, param_dtype=dtype)
    return layers.conv(c, o, k, rngs=nnx.Rngs(1), **kw)


def _values_and_gradients(case, dtype):
    """(conv_pool, reference) outputs and gradients w.r.t. (params, x), in one jitted program."""
    c, o, k, padding, (h, w), size, kind, act_name, monotone, torch_defaults = case
    conv = _conv(c, o, k, padding, torch_defaults, dtype)
    graphdef, params, rest = nnx.split(conv, nnx.Param, ...)
    x = normal(0, (3, h, w, c), dtype)
    act = ACTS[act_name]
    fns = (
        lambda m, x: conv_pool(m, x, size=size, kind=kind, act=act, monotone=monotone),
        lambda m, x: _reference(m, x, size, kind, act),
    )

    @jax.jit
    def run(params, x):
        out = []
        for fn in fns:
            y, vjp = jax.vjp(lambda p, x, fn=fn: fn(nnx.merge(graphdef, p, rest), x), params, x)
            cotangent = normal(2, y.shape, dtype)
            out.append((y, vjp(cotangent)))
        return out

    return run(params, x)


@pytest.mark.parametrize(
    "case,dtype",
    [(case, jnp.float64) for case in CASES] + [(case, jnp.float32) for case in CASES[:4]],
    ids=[f"f64-{c[0]}-{c[1]}-k{c[2]}-b{c[5]}" for c in CASES]
    + [f"f32-{c[0]}-{c[1]}-k{c[2]}-b{c[5]}" for c in CASES[:4]],
)
@pytest.mark.usefixtures("full_float32")  # two formulations to float32 rounding, TF32 off
def test_values_and_gradients_match_flax_composition(case, dtype):
    (got, got_grads), (ref, ref_grads) = _values_and_gradients(case, dtype)
    assert got.shape == ref.shape and got.dtype == ref.dtype == dtype
    tol = 1e-12 if dtype == jnp.float64 else 2e-5
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol * float(np.abs(ref).max()))
    leaves = zip(jax.tree.leaves(got_grads), jax.tree.leaves(ref_grads), strict=True)
    for a, b in leaves:  # kernel, bias, x
        np.testing.assert_allclose(a, b, rtol=0, atol=tol * max(float(np.abs(b).max()), 1.0))


def test_monotone_activation_gives_the_same_values_and_gradients():
    """max_w act(z_w + β) = act(max_w z_w + β) for ReLU and tanh, gradients included."""
    conv = layers.conv(2, 3, 3, torch_defaults=True, param_dtype=jnp.float64, rngs=nnx.Rngs(0))
    x = normal(0, (2, 10, 10, 2), jnp.float64)
    for act in (jax.nn.relu, jnp.tanh):
        fns = [
            lambda x, m=m, act=act: conv_pool(conv, x, size=2, act=act, monotone=m) for m in (0, 1)
        ]
        np.testing.assert_allclose(fns[1](x), fns[0](x), rtol=1e-14, atol=1e-15)
        grads = [jax.grad(lambda x, f=f: jnp.sum(f(x) ** 2))(x) for f in fns]
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-13, atol=1e-14)


def test_blocked_kernel_index_is_the_definition():
    """W̃[P, Q, (r, s, c), (u, v, o)] = W[bP + r − u, bQ + s − v, c, o], zero outside the kernel."""
    kh, kw, c, o, b = 3, 2, 2, 3, 2
    w = np.arange(1, kh * kw * c * o + 1, dtype=np.float64).reshape(kh, kw, c, o)
    blocked = np.concatenate([w.ravel(), [0.0]])[blocked_kernel_index(kh, kw, c, o, b)]
    big_h, big_w = blocked.shape[:2]
    assert (big_h, big_w) == (2, 2)  # ⌈(2 + 3 − 1)/2⌉, ⌈(2 + 2 − 1)/2⌉
    blocked = blocked.reshape(big_h, big_w, b, b, c, b, b, o)
    ranges = (range(big_h), range(big_w), range(b), range(b), range(b), range(b))
    for p, q, r, s, u, v in itertools.product(*ranges):
        a, d = b * p + r - u, b * q + s - v
        want = w[a, d] if (0 <= a < kh and 0 <= d < kw) else np.zeros((c, o))
        np.testing.assert_array_equal(blocked[p, q, r, s, :, u, v, :], want)
    # every kernel entry appears exactly b² times (once per position (u, v) of the window)
    counts = np.bincount(blocked_kernel_index(kh, kw, c, o, b).ravel(), minlength=w.size + 1)
    np.testing.assert_array_equal(counts[:-1], b * b)


@pytest.mark.parametrize(
    "kwargs", [dict(strides=2, padding=1), dict(padding="CIRCULAR"), dict(kernel_dilation=2)]
)
def test_other_convolutions_fall_back_to_the_composition(kwargs):
    conv = nnx.Conv(2, 3, (3, 3), param_dtype=jnp.float64, rngs=nnx.Rngs(0), **kwargs)
    x = normal(0, (2, 12, 12, 2), jnp.float64)
    got = conv_pool(conv, x, size=2, act=jax.nn.relu)
    np.testing.assert_allclose(got, _reference(conv, x, 2, "max", jax.nn.relu), rtol=1e-14)


@pytest.mark.usefixtures("full_float32")
def test_lenet5_matches_flax_composition_under_jit():
    """The model's features (two conv_pool blocks) = conv → ReLU → max_pool by Flax, jitted."""
    model = LeNet5(rngs=nnx.Rngs(0))
    x = normal(1, (4, 32, 32, 1))

    @nnx.jit
    def reference(m, x):
        for conv in (m.conv1, m.conv2):
            x = _reference(conv, x, 2, "max", jax.nn.relu)
        x = x.reshape(x.shape[0], -1)
        return jax.nn.relu(m.fc2(jax.nn.relu(m.fc1(x))))

    got = nnx.jit(lambda m, x: m.features(x))(model, x)
    np.testing.assert_allclose(got, reference(model, x), rtol=2e-5, atol=2e-6)


def test_bad_input():
    conv = layers.conv(2, 3, 3, torch_defaults=True, param_dtype=jnp.float32, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="kind"):
        conv_pool(conv, jnp.ones((1, 8, 8, 2)), size=2, kind="min")
    with pytest.raises(ValueError, match="NHWC"):
        conv_pool(conv, jnp.ones((1, 8, 8, 3)), size=2)
    with pytest.raises(ValueError, match="NHWC"):
        conv_pool(conv, jnp.ones((8, 8, 2)), size=2)
    with pytest.raises(ValueError, match="pool size"):
        conv_pool(conv, jnp.ones((1, 8, 8, 2)), size=7)  # conv output 6×6
    with pytest.raises(ValueError, match="integer ≥ 1"):
        conv_pool(conv, jnp.ones((1, 8, 8, 2)), size=0)
    with pytest.raises(ValueError, match="integer ≥ 1"):
        conv_pool(conv, jnp.ones((1, 8, 8, 2)), size=1.5)
    with pytest.raises(ValueError, match="≥ 1"):
        blocked_kernel_index(3, 3, 0, 2, 2)
