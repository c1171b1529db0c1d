"""nets.xla_cpu.loop_friendly: loop-friendly convolution gradients, checked against jax's own rules.

The reference gradients are jax's transpose rules of ``lax.conv_general_dilated`` (independent
code: they permute dimension numbers, ours transpose the arrays). float64 tolerance 1e-12
relative to the largest entry (the same products summed in another order; observed ≤ 1e-13).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax import lax

from nets.models import LeNet5, ResNet18
from nets.xla_cpu import conv_general_dilated, loop_friendly
from tests.draws import normal

NHWC = ("NHWC", "HWIO", "NHWC")

# image (h, w), in, out, kernel (kh, kw), strides, padding
CASES = [
    ((8, 8), 3, 4, (3, 3), (1, 1), "VALID"),
    ((9, 7), 2, 5, (3, 3), (2, 2), ((1, 1), (1, 1))),  # ResNet's stride-2 3×3, odd sizes
    ((10, 10), 3, 2, (1, 1), (2, 2), "VALID"),  # ResNet's 1×1 shortcut: rows never read
    ((11, 11), 2, 3, (5, 5), (2, 2), "SAME"),
    ((7, 9), 2, 3, (3, 2), (3, 1), ((2, 0), (0, 1))),  # asymmetric everything
    ((32, 32), 1, 6, (5, 5), (1, 1), ((2, 2), (2, 2))),  # LeNet-5 conv1 on 28×28 + padding
]


def _loss(conv):
    def loss(x, w, strides, padding, cotangent):
        return jnp.sum(cotangent * conv(x, w, strides, padding, dimension_numbers=NHWC))

    return loss


@pytest.mark.parametrize("case", CASES, ids=[f"k{c[3]}-s{c[4]}" for c in CASES])
def test_values_and_gradients_match_jax_transpose_rules(case):
    (h, w), c, o, kernel, strides, padding = case
    x = normal(0, (2, h, w, c), jnp.float64)
    k = normal(1, (*kernel, c, o), jnp.float64)
    y = lax.conv_general_dilated(x, k, strides, padding, dimension_numbers=NHWC)
    np.testing.assert_array_equal(
        conv_general_dilated(x, k, strides, padding, dimension_numbers=NHWC), y
    )
    cotangent = normal(2, y.shape, jnp.float64)
    ours = jax.jit(jax.grad(_loss(conv_general_dilated), (0, 1)), static_argnums=(2, 3))
    ref = jax.jit(jax.grad(_loss(lax.conv_general_dilated), (0, 1)), static_argnums=(2, 3))
    for a, b in zip(ours(x, k, strides, padding, cotangent), ref(x, k, strides, padding, cotangent),
                    strict=True):  # fmt: skip
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * float(np.abs(b).max()))
    # the rewrite is taken (a custom_vjp in the program), not silently forwarded to lax
    assert "custom_vjp" in str(jax.make_jaxpr(_loss(conv_general_dilated), static_argnums=(2, 3))(
        x, k, strides, padding, cotangent))  # fmt: skip


def test_other_convolutions_are_forwarded_to_lax():
    x = jnp.ones((1, 6, 6, 2))
    k = jnp.ones((3, 3, 2, 4))
    dilated = lambda x: conv_general_dilated(  # noqa: E731
        x, k, (1, 1), "VALID", rhs_dilation=(2, 2), dimension_numbers=NHWC
    )
    nchw = lambda x: conv_general_dilated(x, k.transpose(3, 2, 0, 1), (1, 1), "VALID")  # noqa: E731
    for fn, arg in ((dilated, x), (nchw, x.transpose(0, 3, 1, 2))):
        assert "custom_vjp" not in str(jax.make_jaxpr(fn)(arg))


def test_loop_friendly_copies_the_model_and_keeps_forward_mode():
    model = LeNet5(rngs=nnx.Rngs(0))
    fast = loop_friendly(model)
    assert fast.conv1.conv_general_dilated is conv_general_dilated
    assert model.conv1.conv_general_dilated is lax.conv_general_dilated  # model untouched
    x = normal(1, (3, 32, 32, 1))
    np.testing.assert_array_equal(fast(x), model(x))
    # forward mode still works on the model itself (a custom_vjp has none)
    tangent = jax.tree.map(jnp.ones_like, nnx.state(model, nnx.Param))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    jax.jvp(lambda p: nnx.merge(graphdef, p, rest)(x), (params,), (tangent,))


def test_training_scan_is_not_the_naive_loop():
    """In a ``lax.scan`` the kernel gradient of jax's rules runs ~20× slower on XLA:CPU (module
    docstring); ours keeps the jitted speed. Loose bound (4×) for noisy CI machines."""
    if jax.default_backend() != "cpu":
        pytest.skip("an XLA:CPU property")
    x = normal(0, (128, 16, 16, 4))
    k = normal(1, (3, 3, 4, 24))

    def timed(conv):
        grad = jax.grad(lambda k: jnp.sum(conv(x, k, (1, 1), "VALID", dimension_numbers=NHWC) ** 2))
        run = jax.jit(lambda k: lax.scan(lambda k, _: (k - 1e-6 * grad(k), None), k, None, 4)[0])
        jax.block_until_ready(run(k))
        start = time.perf_counter()
        jax.block_until_ready(run(k))
        return time.perf_counter() - start

    ours = min(timed(conv_general_dilated) for _ in range(2))
    jaxs = min(timed(lax.conv_general_dilated) for _ in range(2))
    assert jaxs > 4 * ours, (ours, jaxs)


def test_resnet18_gradients_match_through_the_training_graph():
    """Whole-model check: ResNet18 (stride-2 convs, 1×1 shortcuts, BatchNorm) gradients of the
    loop-friendly copy equal the stock model's (float64, 1e-10 relative)."""
    model = ResNet18(num_classes=3, k=4, param_dtype=jnp.float64, rngs=nnx.Rngs(0))
    model.eval()  # BatchNorm with its running statistics: a pure function of the parameters
    x = normal(2, (2, 32, 32, 3), jnp.float64)

    def grads(m):
        graphdef, params, rest = nnx.split(m, nnx.Param, ...)
        return jax.jit(jax.grad(lambda p: jnp.sum(nnx.merge(graphdef, p, rest)(x) ** 2)))(params)

    for a, b in zip(jax.tree.leaves(grads(loop_friendly(model))), jax.tree.leaves(grads(model)),
                    strict=True):  # fmt: skip
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10 * max(float(np.abs(b).max()), 1e-30))
