"""Numerical policy: full-precision GEMMs in the lowered programs, exact rescaling, bad input."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

import metrics
from metrics import (
    accumulate_moments,
    activation_hamming_distance,
    dlr,
    dlr_streaming,
    feature_decomposition,
    feature_kernel_distance,
    filter_smoothness,
    merge_moments,
    moments,
    neural_collapse,
    parameter_distance,
    parameter_norm,
)

HIGHEST = jax.lax.Precision.HIGHEST


def _dot_precisions(jaxpr):
    """Precision of every dot_general / conv in a closed jaxpr, sub-jaxprs (jit, vmap) included."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("dot_general", "conv_general_dilated"):
            found.append(eqn.params["precision"])
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            found += _dot_precisions(sub)
    return found


def _is_highest(precision):
    if precision is None:
        return False
    parts = precision if isinstance(precision, tuple) else (precision, precision)
    return all(p == HIGHEST for p in parts)


def _data(n=40, p=6, c=3, dtype=np.float32):
    rng = np.random.default_rng(0)
    phi = rng.normal(size=(n, p)).astype(dtype)
    return phi, (phi @ rng.normal(size=(p, c))).astype(dtype)


def test_every_gemm_in_the_lowered_programs_requests_highest_precision():
    phi, f = _data()
    labels = np.arange(40) % 3
    m = moments(phi, f)
    programs = {
        "dlr": (lambda a, b: dlr(a, b), (phi, f)),
        "dlr_with_rank": (lambda a, b: metrics.dlr_with_rank(a, b).value, (phi, f)),
        "dlr_many": (lambda a, b: metrics.dlr_many(a[None], b[None]).value, (phi, f)),
        "moments": (lambda a, b: moments(a, b, feature_factor=True), (phi, f)),
        "merge_moments": (merge_moments, (m, m)),
        "dlr_from_moments": (lambda s: metrics.dlr_from_moments(s), (m,)),
        "feature_decomposition": (lambda a, b: feature_decomposition(a, a, b).dlr, (phi, f)),
        "neural_collapse": (
            lambda a, y: neural_collapse(a, y, num_classes=3, outputs=a[:, :3]).nc1,
            (phi, labels),
        ),
        "feature_kernel_distance": (feature_kernel_distance, (phi, f)),
        "filter_smoothness": (filter_smoothness, (np.ones((3, 3, 1, 2), np.float32),)),
    }
    for name, (fn, args) in programs.items():
        found = _dot_precisions(jax.make_jaxpr(fn)(*args).jaxpr)
        assert found, f"{name}: no GEMM found, the inspection is broken"
        assert all(_is_highest(p) for p in found), f"{name}: precisions {found}"


def test_default_precision_would_be_caught():
    found = _dot_precisions(jax.make_jaxpr(lambda a: a.T @ a)(jnp.ones((3, 2))).jaxpr)
    assert found and not any(_is_highest(p) for p in found)


def test_huge_tiny_and_offset_magnitudes_give_the_scaled_answer():
    phi, f = _data(dtype=np.float64)
    ref = float(dlr(phi, f))
    for s_phi, s_f in ((1e20, 1.0), (1e-30, 1.0), (1.0, 1e20), (1e-30, 1e-30), (1e30, 1e-25)):
        got = dlr(np.float32(phi * s_phi), np.float32(f * s_f))
        assert np.isfinite(float(got)) and float(got) == pytest.approx(ref, abs=1e-5)
    big = [
        (np.float32(phi[i : i + 10] * 1e20), np.float32(f[i : i + 10])) for i in range(0, 40, 10)
    ]
    assert float(dlr_streaming(big)) == pytest.approx(ref, abs=1e-5)
    # offset data are not "constant": float64 features 1e6 + N(0, 1)
    assert float(dlr(phi + 1e6, f - 3e5)) == pytest.approx(ref, abs=1e-8)
    # huge features also work for the decomposition and neural collapse (scale invariant)
    res = feature_decomposition(np.float32(phi * 1e20), np.float32(phi * 1e20), np.float32(f))
    assert np.all(np.isfinite(np.asarray(res.cum_utilization)))
    nc = neural_collapse(np.float32(phi * 1e20), np.arange(40) % 3)
    assert float(nc.nc1) == pytest.approx(float(neural_collapse(phi, np.arange(40) % 3).nc1), 1e-4)


def test_messages_say_what_is_wrong():
    phi, f = _data(dtype=np.float64)
    # values that do not vary beyond their rounding: constant at working precision
    flat = np.full_like(phi, 1e6) + 1e-12 * phi
    with pytest.raises(ValueError, match="constant over samples at working precision"):
        dlr(flat, f)
    with pytest.raises(ValueError, match="zero numerical rank .* do not vary"):
        dlr(phi, np.full_like(f, 7.0))


def test_low_precision_and_complex_inputs():
    phi, f = _data(dtype=np.float64)
    got = dlr(jnp.asarray(phi, jnp.float16), jnp.asarray(f, jnp.bfloat16))
    assert got.dtype == jnp.float32  # upcast, documented
    assert float(got) == pytest.approx(float(dlr(phi, f)), abs=2e-2)
    with pytest.raises(ValueError, match="features must be real, got complex"):
        dlr(phi + 1j, f)
    with pytest.raises(ValueError, match="outputs must be real"):
        dlr(phi, f.astype(np.complex64))
    with pytest.raises(ValueError, match="features_fit must be real"):
        feature_decomposition(phi + 0j, phi, f)
    with pytest.raises(ValueError, match="features must be real"):
        neural_collapse(phi + 0j, np.arange(40) % 3)
    with pytest.raises(ValueError, match="kernel must be real"):
        filter_smoothness(np.ones((3, 3, 1, 1)) + 1j)
    with pytest.raises(ValueError, match="features must be real"):
        accumulate_moments([(phi + 1j, f)])


def test_empty_widths_and_mismatched_trees():
    phi, f = _data(dtype=np.float64)
    with pytest.raises(ValueError, match="features must have at least one column"):
        dlr(phi[:, :0], f)
    with pytest.raises(ValueError, match="outputs must have at least one column"):
        dlr(phi, f[:, :0])
    with pytest.raises(
        ValueError, match=r"params_init\['w'\] and params\['w'\] must have the same"
    ):
        parameter_distance({"w": np.ones(3)}, {"w": np.ones((2, 3))})
    with pytest.raises(ValueError, match="same pytree structure"):
        parameter_distance({"w": np.ones(3)}, {"v": np.ones(3)})
    with pytest.raises(ValueError, match=r"params\['b'\] contains NaN"):
        parameter_norm({"w": np.ones(3), "b": np.array([np.nan])})
    with pytest.raises(ValueError, match="no array leaves"):
        parameter_norm({})
    with pytest.raises(ValueError, match="hold no activations"):
        activation_hamming_distance([np.ones((0, 3))], [np.ones((0, 3))])
    assert float(parameter_distance({"w": np.zeros(3)}, {"w": np.ones(3)})) == pytest.approx(
        np.sqrt(3.0)
    )


def test_prior_measures_are_jittable():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 4, 60)
    phi = rng.normal(size=(60, 8)) + np.eye(4)[labels] @ rng.normal(size=(4, 8))
    eager = neural_collapse(phi, labels, num_classes=4, outputs=phi[:, :4])
    nc = jax.jit(lambda a, y: neural_collapse(a, y, num_classes=4, outputs=a[:, :4]))
    got = nc(phi, labels)
    for a, b in zip(got, eager, strict=True):
        if b is not None:
            assert float(a) == pytest.approx(float(b), rel=1e-12, abs=1e-14)
    # identical class means under jit: NaN instead of an error
    same = np.concatenate([phi[:30], phi[:30]])
    assert np.isnan(float(nc(same, np.repeat([0, 1], 30)).nc1))
    w = rng.normal(size=(5, 5, 2, 3))
    np.testing.assert_allclose(jax.jit(filter_smoothness)(w), filter_smoothness(w), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("top", [2.0**-125, 1e-30, 0.75, 1.0, 1e30, 3e38])
def test_pow2_scale_is_an_exact_power_of_two_into_half_to_one(dtype, top):
    from metrics._numerics import pow2_scale

    if dtype == np.float64 and not jax.config.jax_enable_x64:
        pytest.skip("float64 needs jax_enable_x64")
    info = np.finfo(dtype)
    rng = np.random.default_rng(0)
    x = (rng.uniform(-1, 1, (40, 3)) * top).astype(dtype)
    x[0, 0] = dtype(top)
    x = x[np.abs(x) >= info.tiny] if top > info.tiny else x  # normal numbers only
    got = np.asarray(pow2_scale(jnp.asarray(x)))
    _, e = np.frexp(np.max(np.abs(x)))
    assert got.dtype == x.dtype and 0.5 <= np.max(np.abs(got)) < 1.0
    # the naive definition, in numpy: x·2⁻ᵉ by ldexp, exact
    np.testing.assert_array_equal(got, np.ldexp(x, -e))
