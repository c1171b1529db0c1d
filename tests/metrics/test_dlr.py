"""D_LR against the naive n×n CKA definition, its invariances, extremes and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from metrics import dlr, dlr_streaming


def naive_dlr(phi, f, rank=None):
    """1 − CKA(HΦΦᵀH, P) with n×n matrices; P = projection onto col(HF) from NumPy's SVD."""
    phi = np.asarray(phi, np.float64)
    f = np.asarray(f, np.float64)
    n = phi.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    k = h @ phi @ phi.T @ h
    u, s, _ = np.linalg.svd(h @ f, full_matrices=False)
    r = int(np.sum(s > 1e-9 * s[0])) if rank is None else rank
    p_f = u[:, :r] @ u[:, :r].T
    kc = h @ k @ h  # centring the already-centred kernels is a no-op, kept to mirror Eq. 2.9
    pc = h @ p_f @ h
    return 1.0 - np.sum(kc * pc) / (np.linalg.norm(kc) * np.linalg.norm(pc))


def _problem(seed, n, p, c, noise=0.3):
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(n, p)) + rng.normal(size=p) * 3.0  # features with a large mean
    f = phi @ rng.normal(size=(p, c)) + noise * rng.normal(size=(n, c)) + rng.normal(size=c)
    return phi, f


@pytest.mark.parametrize(
    "n,p,c",
    [(150, 40, 10), (60, 90, 5), (120, 8, 1), (100, 3, 7)],  # p > n, C = 1, C > p
)
def test_matches_naive_n_by_n_cka(n, p, c):
    phi, f = _problem(n + p + c, n, p, c)
    got = float(dlr(phi, f))
    assert got == pytest.approx(naive_dlr(phi, f), abs=1e-12)
    assert 0.0 <= got <= 1.0


def test_numpy_and_jax_float32_inputs():
    phi, f = _problem(1, 150, 40, 10)  # shapes of test_matches_naive_n_by_n_cka: compiled once
    ref = naive_dlr(phi, f)
    for conv in (np.float32, lambda a: jnp.asarray(a, jnp.float32)):
        got = dlr(conv(phi), conv(f))
        assert got.dtype == jnp.float32
        assert float(got) == pytest.approx(ref, abs=2e-5)
    mixed = dlr(np.float32(phi), jnp.asarray(f))  # float32 + float64 → float64 explicitly
    assert mixed.dtype == jnp.float64
    assert float(dlr(jnp.asarray(phi), jnp.asarray(f))) == pytest.approx(ref, abs=1e-12)


def test_invariances():
    rng = np.random.default_rng(2)
    phi, f = _problem(3, 250, 15, 5)
    base = float(dlr(phi, f))
    a = rng.normal(size=(5, 5)) + 3 * np.eye(5)  # invertible map of the outputs
    o, _ = np.linalg.qr(rng.normal(size=(15, 15)))  # orthogonal map of the features
    assert float(dlr(1e3 * phi, f)) == pytest.approx(base, abs=1e-12)
    assert float(dlr(1e-3 * phi, f)) == pytest.approx(base, abs=1e-12)
    assert float(dlr(phi, f @ a + 7.0)) == pytest.approx(base, abs=1e-10)
    assert float(dlr(phi @ o + 5.0, f)) == pytest.approx(base, abs=1e-12)


def test_extremes():
    rng = np.random.default_rng(4)
    n, c = 400, 4
    f = rng.normal(size=(n, c))
    fc = f - f.mean(0)
    q, _ = np.linalg.qr(fc)
    rot, _ = np.linalg.qr(rng.normal(size=(c, c)))
    # features spanning [1, outputs] isotropically (an MP operator): D_LR = 0
    phi = np.concatenate([5.0 * np.ones((n, 1)), 2.0 * q @ rot], axis=1)
    assert float(dlr(phi, f)) == pytest.approx(0.0, abs=1e-13)
    # anisotropic span of the same space: strictly positive
    aniso = np.concatenate([np.ones((n, 1)), q * np.array([1.0, 1.0, 1.0, 3.0])], axis=1)
    assert float(dlr(aniso, f)) > 0.05
    # random wide features unrelated to the outputs: close to 1 (≈ 1 − √(rp)/n)
    wide = rng.normal(size=(2000, 500))
    assert float(dlr(wide, rng.normal(size=(2000, 5)))) > 0.95
    # features orthogonal to the learned-function space: exactly 1
    perp = rng.normal(size=(n, 6))
    perp -= perp.mean(0)
    perp -= q @ (q.T @ perp)
    assert float(dlr(perp, f)) == pytest.approx(1.0, abs=1e-12)


def test_softmax_and_biased_head_have_centred_rank_c_minus_1():
    rng = np.random.default_rng(5)
    n, p, c = 500, 30, 10
    phi = np.maximum(rng.normal(size=(n, p)), 0.0)
    probs = np.asarray(jax.nn.softmax(jnp.asarray(phi @ rng.normal(size=(p, c))), axis=1))
    ref = naive_dlr(phi, probs, rank=c - 1)
    assert naive_dlr(phi, probs, rank=c) != pytest.approx(ref, abs=1e-3)  # the rank matters
    assert float(dlr(phi, probs)) == pytest.approx(ref, abs=1e-12)
    assert float(dlr(np.float32(phi), np.float32(probs))) == pytest.approx(ref, abs=5e-5)
    # least-squares head with a bias on p = 3 < C − 1 features: centred rank 3
    small = phi[:, :3]
    head = small @ rng.normal(size=(3, c)) + rng.normal(size=c)
    ref = naive_dlr(small, head, rank=3)
    assert float(dlr(small, head)) == pytest.approx(ref, abs=1e-12)
    assert float(dlr(np.float32(small), np.float32(head))) == pytest.approx(ref, abs=5e-5)


def test_streaming_matches_in_memory():
    phi, f = _problem(6, 600, 25, 8)  # batch shapes shared with test_moments (compiled once)
    ref = float(dlr(phi, f))
    batches = [(phi[i : i + 100], f[i : i + 100]) for i in range(0, 600, 100)]
    assert float(dlr_streaming(batches)) == pytest.approx(ref, abs=1e-12)


@pytest.mark.slow
def test_streaming_float32():
    phi, f = _problem(6, 600, 25, 8)
    ref = float(dlr(phi, f))
    batches32 = [
        (np.float32(phi[i : i + 100]), np.float32(f[i : i + 100])) for i in range(0, 600, 100)
    ]
    assert float(dlr_streaming(iter(batches32))) == pytest.approx(ref, abs=5e-5)


@pytest.mark.slow
def test_jit_and_vmap():
    phi, f = _problem(7, 100, 6, 3)
    ref = float(dlr(phi, f))
    assert float(jax.jit(dlr)(phi, f)) == pytest.approx(ref, abs=1e-12)
    stacked = jax.vmap(dlr)(jnp.stack([phi, 2 * phi]), jnp.stack([f, f]))
    np.testing.assert_allclose(np.asarray(stacked), [ref, ref], atol=1e-12)


@pytest.mark.parametrize(
    "phi,f,match",
    [
        (np.ones(10), np.ones((10, 2)), "features must be a 2-D"),
        (np.ones((10, 3)), np.ones(10), "outputs must be a 2-D"),
        (np.ones((10, 3)), np.ones((9, 2)), "same number of rows"),
        (np.ones((1, 3)), np.ones((1, 1)), "n ≥ 2"),
        (np.ones((3, 3)), np.ones((3, 4)), "C ≤ n"),
    ],
)
def test_bad_shapes(phi, f, match):
    with pytest.raises(ValueError, match=match):
        dlr(phi, f)


def test_bad_values():
    rng = np.random.default_rng(8)
    phi, f = rng.normal(size=(20, 4)), rng.normal(size=(20, 2))
    for bad, name in ((np.nan, "features"), (np.inf, "features")):
        p2 = phi.copy()
        p2[3, 1] = bad
        with pytest.raises(ValueError, match=f"{name} contains NaN or inf"):
            dlr(p2, f)
    f2 = f.copy()
    f2[0, 0] = -np.inf
    with pytest.raises(ValueError, match="outputs contains NaN or inf"):
        dlr(phi, f2)
    with pytest.raises(ValueError, match="zero numerical rank"):
        dlr(phi, np.ones((20, 2)) * 3.0)
    with pytest.raises(ValueError, match="zero numerical rank"):
        dlr(phi, np.zeros((20, 2)))
    with pytest.raises(ValueError, match="constant over samples"):
        dlr(np.ones((20, 4)), f)
    with pytest.raises(ValueError, match="empty"):
        dlr_streaming([])


def test_jit_entry_points_and_nan_for_constant_outputs_under_jit():
    from metrics import dlr_with_rank

    phi, f = _problem(9, 80, 6, 3)
    ref = naive_dlr(phi, f)
    assert float(jax.jit(dlr)(phi, f)) == pytest.approx(ref, abs=1e-12)
    got = jax.jit(dlr_with_rank)(phi, f)
    assert float(got.value) == pytest.approx(ref, abs=1e-12) and int(got.rank) == 3
    const = np.full((80, 3), 2.0)
    assert np.isnan(float(jax.jit(dlr)(phi, const)))
    assert int(jax.jit(dlr_with_rank)(phi, const).rank) == 0
    with pytest.raises(ValueError, match="zero numerical rank"):
        dlr_with_rank(phi, const)
    # the moments path inside a jitted step (statistics merged on device)
    from metrics import dlr_from_moments, merge_moments, moments

    step = jax.jit(lambda a, b: dlr_from_moments(merge_moments(moments(a, b), moments(a, b))))
    assert float(step(phi, f)) == pytest.approx(
        float(dlr(np.tile(phi, (2, 1)), np.tile(f, (2, 1))))
    )
    assert np.isnan(float(step(phi, const)))


# ------------------------------------------------------------- frozen features (reused Φ_cᵀΦ_c)


def _graded(seed, n, p, c, decay):
    """Features with column scales 10^(−decay·j/p) around a large mean (ill-conditioned Gram)."""
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(n, p)) * 10.0 ** (-decay * np.arange(p) / p) + 4.0
    f = phi @ rng.normal(size=(p, c)) + 0.1 * rng.normal(size=(n, c))
    return phi, f


@pytest.mark.parametrize(
    "phi,f",
    [
        _problem(20, 150, 40, 10),  # large feature mean
        _problem(21, 60, 90, 5),  # p > n
        _graded(22, 200, 30, 4, decay=6.0),  # graded spectrum, κ(Φ_c) ~ 10⁶
        (  # near-collapse: rank-one features plus 1e-7 noise
            np.outer(np.linspace(-1, 1, 120), np.ones(12))
            + 1e-7 * np.random.default_rng(23).normal(size=(120, 12)),
            np.random.default_rng(24).normal(size=(120, 3)),
        ),
    ],
)
def test_frozen_features_match_dlr_and_the_naive_definition(phi, f):
    from metrics import dlr_with_rank, dlr_with_rank_frozen, freeze_features

    frozen = freeze_features(phi)
    got, ref = dlr_with_rank_frozen(frozen, f), dlr_with_rank(phi, f)
    assert got.value.dtype == jnp.float64
    assert int(got.rank) == int(ref.rank)
    assert float(got.value) == pytest.approx(naive_dlr(phi, f), abs=1e-10)
    assert float(got.value) == pytest.approx(float(ref.value), abs=1e-10)
    # float32 in, float32 out, within float32 rounding of the float64 answer
    got32 = dlr_with_rank_frozen(freeze_features(np.float32(phi)), np.float32(f))
    assert got32.value.dtype == jnp.float32
    assert float(got32.value) == pytest.approx(float(ref.value), abs=5e-5)


def test_frozen_features_are_reused_across_outputs_and_under_jit():
    from metrics import dlr_with_rank_frozen, freeze_features

    phi, f = _problem(25, 100, 20, 4)
    frozen = freeze_features(phi)
    rng = np.random.default_rng(26)
    step = jax.jit(dlr_with_rank_frozen)
    for head in (f, f @ rng.normal(size=(4, 4)), rng.normal(size=(100, 2))):
        assert float(step(frozen, head).value) == pytest.approx(naive_dlr(phi, head), abs=1e-10)
    assert np.isnan(float(step(frozen, np.full((100, 2), 3.0)).value))  # undefined → NaN
    # extreme magnitudes: Φ·2⁻ᵉ keeps the Gram in range (float32 ~1e20 and ~1e-30)
    for scale in (1e20, 1e-30):
        big = freeze_features(np.float32(phi * scale))
        assert float(dlr_with_rank_frozen(big, np.float32(f)).value) == pytest.approx(
            naive_dlr(phi, f), abs=5e-5
        )


def test_frozen_features_bad_input():
    from metrics import dlr_with_rank_frozen, freeze_features

    phi, f = _problem(27, 30, 5, 2)
    frozen = freeze_features(phi)
    with pytest.raises(ValueError, match="frozen features 30"):
        dlr_with_rank_frozen(frozen, f[:20])
    with pytest.raises(ValueError, match="C ≤ n"):
        dlr_with_rank_frozen(freeze_features(phi[:3]), np.ones((3, 4)))
    with pytest.raises(ValueError, match="zero numerical rank"):
        dlr_with_rank_frozen(frozen, np.zeros((30, 2)))
    with pytest.raises(ValueError, match="constant over samples"):
        dlr_with_rank_frozen(freeze_features(np.ones((30, 5))), f)
    with pytest.raises(ValueError, match="features must be a 2-D"):
        freeze_features(np.ones(30))


# ------------------------------------------------------------------ R runs at once (dlr_many)


def _runs():
    """Four runs of one shape: a plain one, a large feature mean, a graded spectrum and
    near-collapsed features (the ill-conditioned cases of the frozen-feature test)."""
    rng = np.random.default_rng(30)
    n, p, c = 120, 12, 3
    graded = _graded(31, n, p, c, decay=6.0)
    collapsed = np.outer(np.linspace(-1, 1, n), np.ones(p)) + 1e-7 * rng.normal(size=(n, p))
    runs = [_problem(32, n, p, c), _problem(33, n, p, c, noise=3.0), graded,
            (collapsed, rng.normal(size=(n, c)))]  # fmt: skip
    return np.stack([r[0] for r in runs]), np.stack([r[1] for r in runs])


@pytest.mark.parametrize("batched", [False, True], ids=["looped", "vmapped"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dlr_many_gives_each_runs_dlr(batched, dtype):
    """Each run's value and rank equal its own ``dlr_with_rank`` (float64: and the naive n×n
    definition), looped (the CPU's default) and vmapped (the accelerators')."""
    from metrics import dlr_many, dlr_with_rank

    phi, f = (a.astype(dtype) for a in _runs())
    got = dlr_many(phi, f, batched=batched)
    assert got.value.dtype == dtype and got.value.shape == got.rank.shape == (4,)
    # the same operations per run: equal to a few ulps (bitwise on the CPU)
    tol = 1e-12 if dtype == np.float64 else 1e-6
    for i in range(4):
        own = dlr_with_rank(phi[i], f[i])
        assert float(got.value[i]) == pytest.approx(float(own.value), abs=tol)
        assert int(got.rank[i]) == int(own.rank)
        if dtype == np.float64:
            assert float(got.value[i]) == pytest.approx(naive_dlr(phi[i], f[i]), abs=1e-9)


def test_dlr_many_keeps_the_other_runs_when_one_is_undefined():
    from metrics import batched_by_default, dlr_many

    phi, f = _runs()
    f[1] = 2.0  # constant outputs: zero centred rank
    phi[2] = 5.0  # constant features
    for batched in (False, True):
        got = jax.tree.map(
            np.asarray, jax.jit(lambda a, b, v=batched: dlr_many(a, b, batched=v))(phi, f)
        )
        assert np.isnan(got.value[1]) and int(got.rank[1]) == 0
        assert np.isnan(got.value[2]) and int(got.rank[2]) == 3
        assert np.isfinite(got.value[[0, 3]]).all()
        ref = np.asarray(dlr_many(phi[[0, 3]], f[[0, 3]], batched=batched).value)
        np.testing.assert_allclose(got.value[[0, 3]], ref, atol=1e-12)
    assert batched_by_default("cpu") is False
    assert batched_by_default("gpu") is True and batched_by_default("tpu") is True


@pytest.mark.parametrize(
    "phi,f,match",
    [
        (np.ones((10, 3)), np.ones((10, 2)), "features must be a 3-D"),
        (np.ones((2, 10, 3)), np.ones((2, 10)), "outputs must be a 3-D"),
        (np.ones((2, 10, 0)), np.ones((2, 10, 2)), "features must be a 3-D"),
        (np.ones((2, 10, 3)), np.ones((3, 10, 2)), "same runs R and rows n"),
        (np.ones((2, 10, 3)), np.ones((2, 9, 2)), "same runs R and rows n"),
        (np.ones((2, 1, 3)), np.ones((2, 1, 1)), "n ≥ 2"),
        (np.ones((2, 3, 3)), np.ones((2, 3, 4)), "C ≤ n"),
        (np.full((2, 5, 3), np.nan), np.ones((2, 5, 2)), "features contains NaN"),
        (np.ones((2, 5, 3)), np.ones((2, 5, 2)) + 1j, "outputs must be real"),
    ],
)
def test_dlr_many_bad_input(phi, f, match):
    from metrics import dlr_many

    with pytest.raises(ValueError, match=match):
        dlr_many(phi, f)
