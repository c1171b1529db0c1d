"""nets.init: the padded, flat draws give the exact values of a plain draw of the layer's size."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nets import init

# Below and above the smallest padded length (1024), and a conv kernel, in both float widths;
# each plain draw of the comparison compiles its own sampler (~0.3 s), so the list is short.
CASES = [((10,), jnp.float32), ((1025,), jnp.bfloat16), ((3, 3, 6, 16), jnp.float32)]


@pytest.mark.parametrize(("shape", "dtype"), CASES)
def test_initialisers_equal_a_plain_draw_of_their_size(shape, dtype):
    # A longer draw cut to n values must be the n-value draw itself, bit for bit.
    key, n = jax.random.key(7), math.prod(shape)
    bound = 1 / math.sqrt(9)
    got_u = init.torch_uniform(9)(key, shape, dtype)
    want_u = jax.random.uniform(key, (n,), dtype, -bound, bound).reshape(shape)
    got_n = init.scaled_normal(0.5)(key, shape, dtype)
    want_n = 0.5 * jax.random.normal(key, (n,), dtype).reshape(shape)
    for got, want in ((got_u, want_u), (got_n, want_n)):
        assert got.shape == shape and got.dtype == dtype
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))


def test_sizes_share_one_padded_sampler():
    requested = []

    def sample(key, shape, dtype, *args):
        requested.append(shape)
        return jnp.zeros(shape, dtype)

    key = jax.random.key(0)
    for shape in [(10,), (6, 5, 5), (1000,), (1025,), (2048,), (3, 3, 64, 64)]:
        out = init._draw(sample, key, shape, jnp.float32)
        assert out.shape == shape
    assert requested == [(1024,), (1024,), (1024,), (2048,), (2048,), (65536,)]


def test_other_keys_and_settings_draw_exactly_their_size():
    # Where a cut longer draw would differ (rbg keys; threefry without the partitionable
    # setting), the draw is exactly n values, so the values are the plain draw's there too.
    shape = (5, 7)
    rbg = jax.random.key(0, impl="rbg")
    np.testing.assert_array_equal(
        init.torch_uniform(4)(rbg, shape), jax.random.uniform(rbg, (35,), jnp.float32, -0.5, 0.5)
        .reshape(shape)
    )  # fmt: skip
    assert not init._prefix_stable(rbg) and init._prefix_stable(jax.random.key(0))
    with jax.threefry_partitionable(False):
        key = jax.random.key(1)
        assert not init._prefix_stable(key)
        np.testing.assert_array_equal(
            init.scaled_normal(2.0)(key, shape, jnp.float32),
            2.0 * jax.random.normal(key, (35,), jnp.float32).reshape(shape),
        )
