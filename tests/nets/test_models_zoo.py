"""Model zoo: shapes, the features/head contract, PyTorch numerics, parameter counts, bad input.

Every PyTorch default is checked against an independent computation: init bounds and stds from
samples, padding against a naive NumPy convolution, BatchNorm/LayerNorm/GELU/attention against
NumPy formulas, parameter counts against the numbers torchvision / the papers' models report.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from nets.models import (
    MODELS,
    VGG16,
    BatchNorm,
    LeNet5,
    ResNet18,
    Transformer,
    count_params,
    get_model,
    layers,
)
from nets.models.transformer import DecoderBlock
from tests.draws import normal

P = 97  # modular division mod p: vocabulary p + 2 ("a ∘ b =")


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x)


def _images(n: int, size: int, channels: int, seed: int = 0) -> jax.Array:
    return normal(seed, (n, size, size, channels))


def _tokens(n: int) -> jax.Array:
    return jax.random.randint(jax.random.key(1), (n, 4), 0, P + 2)


TINY = {
    "lenet5_32": (lambda r: LeNet5(rngs=r), _images(2, 32, 1), 84),
    "lenet5_28": (lambda r: LeNet5(image_size=28, rngs=r), _images(2, 28, 1), 84),
    "vgg16_cifar": (lambda r: VGG16(width=2, rngs=r), _images(2, 32, 3), 16),
    "vgg16_bn_tv": (
        lambda r: VGG16(batch_norm=True, head="torchvision", width=2, hidden=8, rngs=r),
        _images(2, 32, 3),
        8,
    ),
    "resnet18_k4": (lambda r: ResNet18(k=4, rngs=r), _images(2, 32, 3), 32),
    "transformer": (lambda r: Transformer(P + 2, rngs=r), _tokens(2), 128),
}


@nnx.jit
def _outputs(model, x):
    """(logits, Φ, head(Φ)) in one compiled call, shared by the tests (one compile per mode)."""
    phi = model.features(x)
    return model(x), phi, model.head(phi)


@pytest.fixture(scope="module")
def tiny_models():
    return {name: make(nnx.Rngs(0)) for name, (make, _, _) in TINY.items()}


@pytest.mark.parametrize("name", list(TINY))
def test_shapes_and_head_is_last_layer(tiny_models, name):
    model = tiny_models[name]
    _, x, p = TINY[name]
    model.eval()
    logits, phi, head_phi = _outputs(model, x)
    n_out = P + 2 if name == "transformer" else 10
    assert logits.shape == (2, n_out)
    assert phi.shape == (2, p)
    np.testing.assert_array_equal(logits, head_phi)
    assert np.all(np.isfinite(logits))


# ---------------------------------------------------------------- parameter counts (abstract)


def _transformer_count(vocab, d=128, layers_=2, max_len=5):
    # independent count of teddykoker/grokking's model: embeddings, per block MHA (in_proj 3d×d +
    # 3d, out_proj d×d + d), 2 LayerNorms, MLP d→4d→d; final LayerNorm; unembedding d→vocab
    block = (3 * d * d + 3 * d) + (d * d + d) + 2 * 2 * d + (d * 4 * d + 4 * d) + (4 * d * d + d)
    return vocab * d + max_len * d + layers_ * block + 2 * d + d * vocab + vocab


@pytest.mark.parametrize(
    ("name", "kwargs", "expected"),
    [
        ("resnet18", {}, 11_171_146),  # Nakkiran et al. PreActResNet18, k = 64, CIFAR-10
        ("vgg16_bn", {}, 14_728_266),  # torchvision cfg D + BN, CIFAR head 512 → 10
        ("vgg16", {}, 14_719_818),
        ("vgg16", dict(head="torchvision", num_classes=1000), 138_357_544),  # torchvision vgg16
        ("vgg16_bn", dict(head="torchvision", num_classes=1000), 138_365_992),  # vgg16_bn
        ("lenet5", {}, 61_706),
        ("lenet5", dict(image_size=28), 61_706),
        ("transformer", dict(vocab_size=P + 2), _transformer_count(P + 2)),
    ],
)
def test_parameter_counts_match_pytorch(name, kwargs, expected):
    abstract = nnx.eval_shape(lambda: get_model(name, rngs=nnx.Rngs(0), **kwargs))
    assert count_params(abstract) == expected


def test_full_size_feature_dimensions():
    resnet = nnx.eval_shape(lambda: ResNet18(rngs=nnx.Rngs(0)))
    vgg = nnx.eval_shape(lambda: VGG16(batch_norm=True, rngs=nnx.Rngs(0)))
    assert resnet.head.kernel.shape == (512, 10)
    assert vgg.head.kernel.shape == (512, 10)
    tv = nnx.eval_shape(lambda: VGG16(head="torchvision", rngs=nnx.Rngs(0)))
    assert tv.fc1.kernel.shape == (512 * 49, 4096) and tv.head.kernel.shape == (4096, 10)


# ---------------------------------------------------------------------- PyTorch initialisation


def _assert_uniform(w, bound, *, check_std=True):
    w = np.asarray(w).ravel()
    assert np.abs(w).max() <= bound * (1 + 1e-6)
    if check_std:  # U(−b, b): std b/√3; relative sampling error ≈ √(0.8/(4N)) < 1% here
        assert w.size >= 2000
        assert abs(w.std() / (bound / math.sqrt(3)) - 1) < 0.04
        assert np.abs(w).max() > 0.95 * bound


def test_torch_init_conv_and_linear():
    r = nnx.Rngs(0)
    c = layers.conv(16, 32, 3, padding=1, torch_defaults=True, param_dtype=jnp.float32, rngs=r)
    bound = 1 / math.sqrt(16 * 3 * 3)  # conv fan_in = in_ch·k·k
    _assert_uniform(c.kernel[...], bound)
    _assert_uniform(c.bias[...], bound, check_std=False)
    assert np.asarray(c.bias[...]).std() > 0  # torch biases are not zero
    lin = layers.linear(120, 84, torch_defaults=True, param_dtype=jnp.float32, rngs=r)
    _assert_uniform(lin.kernel[...], 1 / math.sqrt(120))
    _assert_uniform(lin.bias[...], 1 / math.sqrt(120), check_std=False)
    flax_lin = layers.linear(120, 84, torch_defaults=False, param_dtype=jnp.float32, rngs=r)
    np.testing.assert_array_equal(flax_lin.bias[...], 0.0)


def test_models_use_torch_init(tiny_models):
    resnet = tiny_models["resnet18_k4"]
    block = resnet.blocks[6]  # stage 4, 16 → 32 channels
    _assert_uniform(block.conv2.kernel[...], 1 / math.sqrt(32 * 9))
    _assert_uniform(resnet.conv1.kernel[...], 1 / math.sqrt(3 * 9), check_std=False)
    _assert_uniform(resnet.head.bias[...], 1 / math.sqrt(32), check_std=False)
    lenet = tiny_models["lenet5_32"]
    _assert_uniform(lenet.fc1.kernel[...], 1 / math.sqrt(400))
    _assert_uniform(lenet.conv2.kernel[...], 1 / math.sqrt(6 * 25))


def test_transformer_torch_init(tiny_models):
    model = tiny_models["transformer"]
    emb = np.asarray(model.token_embed.embedding[...])  # nn.Embedding: N(0, 1)
    assert abs(emb.std() - 1) < 0.03 and abs(emb.mean()) < 0.03
    attn = model.blocks[0].attn
    d = 128
    _assert_uniform(attn.qkv.kernel[...], math.sqrt(6 / (d + 3 * d)))  # xavier_uniform_
    np.testing.assert_array_equal(attn.qkv.bias[...], 0.0)
    _assert_uniform(attn.out.kernel[...], 1 / math.sqrt(d))
    np.testing.assert_array_equal(attn.out.bias[...], 0.0)
    _assert_uniform(model.blocks[1].fc2.kernel[...], 1 / math.sqrt(4 * d))
    small = Transformer(P + 2, num_layers=1, embed_std=0.1, rngs=nnx.Rngs(3))
    assert abs(np.asarray(small.token_embed.embedding[...]).std() - 0.1) < 0.005


def test_torchvision_vgg_init(tiny_models):
    model = tiny_models["vgg16_bn_tv"]  # width 2: last convs are 16 → 16
    kernel = np.asarray(model.convs[-1].kernel[...])
    assert abs(kernel.std() / math.sqrt(2 / (16 * 9)) - 1) < 0.05  # N(0, 2/fan_out)
    np.testing.assert_array_equal(model.convs[-1].bias[...], 0.0)
    fc1 = np.asarray(model.fc1.kernel[...])  # N(0, 0.01²)
    assert abs(fc1.std() / 0.01 - 1) < 0.05
    np.testing.assert_array_equal(model.head.bias[...], 0.0)


# ------------------------------------------------------------------------------------ padding


def _naive_conv(x, w, b, stride, pad):
    """NHWC cross-correlation with explicit ((top, bottom), (left, right)) zero padding."""
    (pt, pb), (pl, pr) = pad
    x = np.pad(np.asarray(x, np.float64), ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    w = np.asarray(w, np.float64)
    k = w.shape[0]
    ho = (x.shape[1] - k) // stride + 1
    wo = (x.shape[2] - k) // stride + 1
    out = np.zeros((x.shape[0], ho, wo, w.shape[3]))
    for i in range(ho):
        for j in range(wo):
            patch = x[:, i * stride : i * stride + k, j * stride : j * stride + k, :]
            out[:, i, j, :] = np.einsum("nhwc,hwco->no", patch, w)
    return out + np.asarray(b, np.float64)


@pytest.mark.parametrize("size", [6, 7])
def test_stride2_conv_pads_symmetrically(size):
    x = _images(2, size, 2, seed=4)
    kw = dict(stride=2, padding=1, param_dtype=jnp.float32, rngs=nnx.Rngs(5))
    torch_conv = layers.conv(2, 3, 3, torch_defaults=True, **kw)
    w, b = torch_conv.kernel[...], torch_conv.bias[...]
    expected = _naive_conv(x, w, b, 2, ((1, 1), (1, 1)))  # nn.Conv2d(padding=1)
    np.testing.assert_allclose(torch_conv(x), expected, rtol=1e-5, atol=1e-5)
    flax_conv = layers.conv(2, 3, 3, torch_defaults=False, **kw)
    flax_conv.kernel.set_value(w)
    flax_conv.bias.set_value(b)
    if size % 2 == 0:  # Flax 'SAME' pads (0, 1) on even inputs: a shifted grid
        same = _naive_conv(x, w, b, 2, ((0, 1), (0, 1)))
        np.testing.assert_allclose(flax_conv(x), same, rtol=1e-5, atol=1e-5)
        assert np.abs(np.asarray(flax_conv(x)) - expected).max() > 1e-2


def test_resnet_stride2_convs_use_padding_one(tiny_models):
    resnet = tiny_models["resnet18_k4"]
    strided = [b for b in resnet.blocks if b.shortcut is not None]
    assert len(strided) == 3
    for block in strided:
        assert block.conv1.strides == (2, 2) and block.conv1.padding == ((1, 1), (1, 1))
        assert block.shortcut.padding == ((0, 0), (0, 0))


# ------------------------------------------------------------------------- BatchNorm numerics


def test_batchnorm_matches_torch_update_rule():
    x = np.asarray(_images(8, 3, 4, seed=6), np.float64) * 2.0 + 1.0
    bn = BatchNorm(4, param_dtype=jnp.float64)
    bn.scale.set_value(jnp.asarray([1.0, 2.0, 0.5, -1.0]))
    bn.bias.set_value(jnp.asarray([0.0, 0.1, -0.2, 0.3]))
    y = np.asarray(bn(jnp.asarray(x)))
    mu = x.mean(axis=(0, 1, 2))
    var_b = x.var(axis=(0, 1, 2))  # normalisation: biased variance, ε = 1e-5
    y_ref = (x - mu) / np.sqrt(var_b + 1e-5) * np.asarray(bn.scale[...]) + np.asarray(bn.bias[...])
    np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-12)
    # torch: running ← (1 − 0.1)·running + 0.1·batch, with the unbiased (ddof = 1) variance
    np.testing.assert_allclose(bn.mean[...], 0.1 * mu, rtol=1e-12)
    var_u = x.reshape(-1, 4).var(axis=0, ddof=1)
    np.testing.assert_allclose(bn.var[...], 0.9 + 0.1 * var_u, rtol=1e-12)
    bn.eval()
    y_eval = np.asarray(bn(jnp.asarray(x)))
    run_m, run_v = np.asarray(bn.mean[...]), np.asarray(bn.var[...])
    np.testing.assert_allclose(bn.mean[...], 0.1 * mu, rtol=1e-12)  # eval does not update
    ref = (x - run_m) / np.sqrt(run_v + 1e-5) * np.asarray(bn.scale[...])
    np.testing.assert_allclose(y_eval, ref + np.asarray(bn.bias[...]), rtol=1e-12)


def test_batchnorm_flax_defaults():
    x = np.asarray(_images(4, 2, 3, seed=7), np.float64)
    bn = layers.batch_norm(3, torch_defaults=False, param_dtype=jnp.float64)
    bn(jnp.asarray(x))
    var_b = x.reshape(-1, 3).var(axis=0)
    np.testing.assert_allclose(bn.var[...], 0.99 + 0.01 * var_b, rtol=1e-12)


def test_bn_train_eval_modes(tiny_models):
    model = tiny_models["resnet18_k4"]
    x, other = _images(2, 32, 3, seed=8), _images(2, 32, 3, seed=18)
    x2 = x.at[1].set(other[1])  # same first image, different batch-mate
    model.eval()
    before = np.asarray(model.blocks[0].bn1.mean[...])
    np.testing.assert_allclose(_outputs(model, x)[0][0], _outputs(model, x2)[0][0], rtol=1e-6)
    np.testing.assert_array_equal(model.blocks[0].bn1.mean[...], before)  # eval: frozen stats
    model.train()
    train_x = _outputs(model, x)[0][0]
    assert not np.allclose(model.blocks[0].bn1.mean[...], before)  # train: stats updated
    assert not np.allclose(train_x, _outputs(model, x2)[0][0], atol=1e-4)  # batch statistics
    model.eval()


def test_dropout_train_eval(tiny_models):
    model = tiny_models["vgg16_bn_tv"]
    x = _images(2, 32, 3, seed=9)
    model.eval()
    np.testing.assert_array_equal(_outputs(model, x)[1], _outputs(model, x)[1])
    model.train()
    phi = np.asarray(_outputs(model, x)[1])
    assert (phi == 0).mean() > 0.3  # ReLU zeros plus p = 0.5 dropout
    assert not np.array_equal(phi, np.asarray(_outputs(model, x)[1]))  # fresh masks
    model.eval()


# --------------------------------------------------------- LayerNorm, GELU, attention (numpy)


def test_layernorm_torch_eps():
    x = np.asarray(normal(10, (3, 8), np.float64)) * 3e-3
    ln = layers.layer_norm(8, torch_defaults=True, param_dtype=jnp.float64, rngs=nnx.Rngs(0))
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln(jnp.asarray(x)), ref, rtol=1e-10)
    flax_ln = layers.layer_norm(8, torch_defaults=False, param_dtype=jnp.float64, rngs=nnx.Rngs(0))
    ref6 = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(flax_ln(jnp.asarray(x)), ref6, rtol=1e-6)


@pytest.fixture(scope="module")
def block64():
    return DecoderBlock(
        8, 2, 4, norm="post", torch_defaults=True, param_dtype=jnp.float64, rngs=nnx.Rngs(0)
    )


def test_decoder_mlp_uses_exact_gelu(block64):
    block = block64
    x = np.asarray(normal(11, (2, 3, 8), np.float64)) * 3
    h = x @ np.asarray(block.fc1.kernel[...]) + np.asarray(block.fc1.bias[...])
    g = 0.5 * h * (1 + _erf(h / math.sqrt(2)))  # exact GELU, torch nn.GELU()
    ref = g @ np.asarray(block.fc2.kernel[...]) + np.asarray(block.fc2.bias[...])
    np.testing.assert_allclose(block._mlp(jnp.asarray(x)), ref, rtol=1e-10, atol=1e-12)


def test_causal_attention_matches_naive(block64):
    d, h, n, length = 8, 2, 2, 4
    attn = block64.attn
    attn.qkv.bias.set_value(normal(13, (3 * d,), jnp.float64))
    x = np.asarray(normal(14, (n, length, d), np.float64))
    qkv = x @ np.asarray(attn.qkv.kernel[...]) + np.asarray(attn.qkv.bias[...])
    q, k, v = qkv[..., :d], qkv[..., d : 2 * d], qkv[..., 2 * d :]
    out = np.zeros_like(x)
    dh = d // h
    for b in range(n):
        for j in range(h):
            sl = slice(j * dh, (j + 1) * dh)
            for s in range(length):
                logits = np.array([q[b, s, sl] @ k[b, t, sl] / math.sqrt(dh) for t in range(s + 1)])
                w = np.exp(logits - logits.max())
                w /= w.sum()
                out[b, s, sl] = sum(w[t] * v[b, t, sl] for t in range(s + 1))
    ref = out @ np.asarray(attn.out.kernel[...]) + np.asarray(attn.out.bias[...])
    np.testing.assert_allclose(attn(jnp.asarray(x)), ref, rtol=1e-10, atol=1e-12)
    # the last block of a Transformer computes the last position only: the naive last row
    last = attn(jnp.asarray(x), last_only=True)
    assert last.shape == (n, 1, d)
    np.testing.assert_allclose(last, ref[:, -1:], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_block_last_only_is_the_last_row(norm):
    block = DecoderBlock(
        8, 2, 4, norm=norm, torch_defaults=True, param_dtype=jnp.float64, rngs=nnx.Rngs(3)
    )
    x = normal(15, (3, 5, 8), jnp.float64)
    full = block(x)
    np.testing.assert_allclose(block(x, last_only=True), full[:, -1:], rtol=1e-12, atol=1e-13)
    # and a change at an earlier position still reaches the last one through attention
    moved = block(x.at[:, 0].set(x[:, 1]), last_only=True)  # not a shift: LayerNorm removes it
    assert not np.allclose(moved, full[:, -1:])


def test_transformer_features_see_the_whole_prompt(tiny_models):
    model = tiny_models["transformer"]
    tokens = _tokens(2)
    changed = tokens.at[:, 0].set((tokens[:, 0] + 1) % (P + 2))
    assert not np.allclose(_outputs(model, tokens)[1], _outputs(model, changed)[1])


# ------------------------------------------------------------------------------- misc. pieces


def test_adaptive_avg_pool():
    x = _images(1, 14, 2, seed=15)
    ref = np.asarray(x).reshape(1, 7, 2, 7, 2, 2).mean(axis=(2, 4))  # 14 → 7: 2×2 average
    np.testing.assert_allclose(layers.adaptive_avg_pool(x, 7), ref, rtol=1e-6, atol=1e-6)
    one = _images(1, 1, 3, seed=16)  # VGG16 on 32×32: the 1×1 map is replicated
    np.testing.assert_array_equal(
        layers.adaptive_avg_pool(one, 7), jnp.broadcast_to(one, (1, 7, 7, 3))
    )
    # 5 → 3: torch's overlapping bins rows/cols [0, 2), [1, 4), [3, 5), written out by hand
    x = np.arange(25.0).reshape(1, 5, 5, 1)
    bins = ((0, 2), (1, 4), (3, 5))
    ref = np.array([[x[0, a:b, c:d, 0].mean() for c, d in bins] for a, b in bins])
    np.testing.assert_allclose(
        layers.adaptive_avg_pool(jnp.asarray(x), 3)[0, :, :, 0], ref, rtol=1e-6
    )
    np.testing.assert_allclose(ref[1, 1], np.mean([6, 7, 8, 11, 12, 13, 16, 17, 18]))
    with pytest.raises(ValueError, match="NHWC"):
        layers.adaptive_avg_pool(jnp.ones((5, 5, 1)), 3)


# ---------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("lenet5_32", _images(2, 28, 1)),
        ("lenet5_28", _images(2, 28, 3)),
        ("vgg16_cifar", _images(2, 64, 3)),
        ("vgg16_cifar", jnp.zeros((2, 32, 32))),
        ("resnet18_k4", _images(2, 32, 1)),
        ("transformer", jnp.zeros((2, 6), jnp.int32)),
        ("transformer", jnp.zeros((2, 4), jnp.float32)),
        ("transformer", jnp.zeros((8,), jnp.int32)),
    ],
)
def test_bad_input_shapes(tiny_models, name, bad):
    with pytest.raises(ValueError, match="expects"):
        tiny_models[name](bad)


def test_bad_names_and_options():
    with pytest.raises(ValueError, match="resnet18") as err:
        get_model("resnet19", rngs=nnx.Rngs(0))
    assert all(name in str(err.value) for name in MODELS)
    with pytest.raises(ValueError, match="head"):
        VGG16(head="imagenet", rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="image_size"):
        LeNet5(image_size=64, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="divisible"):
        Transformer(10, d_model=10, num_heads=4, rngs=nnx.Rngs(0))


# ------------------------------------------------- PyTorch parity (optional: needs torch, slow)


def _bench_zoo():
    """benchmarks/bench_zoo.py as a module (its PyTorch models)."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[2] / "benchmarks" / "bench_zoo.py"
    spec = importlib.util.spec_from_file_location("bench_zoo", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.slow
def test_lenet5_matches_pytorch_model_values_and_gradients():
    """Same weights in bench_zoo's PyTorch LeNet-5 give the same logits and gradients (float64).

    Checks the blocked conv → ReLU → max-pool of :mod:`nets.models.conv_pool` against
    ``nn.Conv2d`` + ``max_pool2d``; torch flattens (C, H, W), nets (H, W, C), hence fc1's rows.
    """
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = _bench_zoo().TorchLeNet5().double()
    model = LeNet5(param_dtype=jnp.float64, rngs=nnx.Rngs(0))

    def hwio(t):  # (O, C, kh, kw) → (kh, kw, C, O)
        return t.detach().numpy().transpose(2, 3, 1, 0)

    fc1 = ref.fc1.weight.detach().numpy().reshape(120, 16, 5, 5).transpose(2, 3, 1, 0)
    for ours, value in (
        (model.conv1.kernel, hwio(ref.conv1.weight)),
        (model.conv2.kernel, hwio(ref.conv2.weight)),
        (model.fc1.kernel, fc1.reshape(400, 120)),
        (model.fc2.kernel, ref.fc2.weight.detach().numpy().T),
        (model.head.kernel, ref.head.weight.detach().numpy().T),
    ):
        ours.set_value(jnp.asarray(value))
    for ours, theirs in zip(
        (model.conv1, model.conv2, model.fc1, model.fc2, model.head),
        (ref.conv1, ref.conv2, ref.fc1, ref.fc2, ref.head),
        strict=True,
    ):
        ours.bias.set_value(jnp.asarray(theirs.bias.detach().numpy()))
    x = np.random.default_rng(0).normal(size=(6, 32, 32, 1))
    y = np.arange(6) % 10
    logits = ref(torch.from_numpy(x.transpose(0, 3, 1, 2)))
    torch.nn.functional.cross_entropy(logits, torch.from_numpy(y)).backward()
    np.testing.assert_allclose(
        model(jnp.asarray(x)), logits.detach().numpy(), rtol=1e-10, atol=1e-12
    )

    def loss(m):
        logp = jax.nn.log_softmax(m(jnp.asarray(x)))
        return -jnp.mean(logp[jnp.arange(6), y])

    grads = nnx.grad(loss)(model)
    np.testing.assert_allclose(grads.conv1.kernel[...], hwio(ref.conv1.weight.grad), atol=1e-12)
    np.testing.assert_allclose(grads.conv2.kernel[...], hwio(ref.conv2.weight.grad), atol=1e-12)
    np.testing.assert_allclose(grads.conv2.bias[...], ref.conv2.bias.grad.numpy(), atol=1e-12)


@pytest.mark.slow
def test_transformer_matches_teddykoker_pytorch_model():
    """Same weights in teddykoker/grokking's PyTorch model give the same logits (float64)."""
    torch = pytest.importorskip("torch")
    TorchTransformer = _bench_zoo().TorchTransformer

    torch.manual_seed(0)
    ref = TorchTransformer(P + 2).double().eval()
    model = Transformer(P + 2, param_dtype=jnp.float64, rngs=nnx.Rngs(0))

    def put(var, tensor, transpose=False):
        t = tensor.detach().numpy()
        var.set_value(jnp.asarray(t.T if transpose else t))

    put(model.token_embed.embedding, ref.token_embeddings.weight)
    put(model.pos_embed.embedding, ref.position_embeddings.weight)
    for block, tb in zip(model.blocks, ref.model[:2], strict=True):
        put(block.attn.qkv.kernel, tb.self_attn.in_proj_weight, transpose=True)
        put(block.attn.qkv.bias, tb.self_attn.in_proj_bias)
        put(block.attn.out.kernel, tb.self_attn.out_proj.weight, transpose=True)
        put(block.attn.out.bias, tb.self_attn.out_proj.bias)
        for ln, tln in ((block.ln1, tb.self_attn_norm), (block.ln2, tb.ffn_norm)):
            put(ln.scale, tln.weight)
            put(ln.bias, tln.bias)
        for lin, tlin in ((block.fc1, tb.ffn[0]), (block.fc2, tb.ffn[2])):
            put(lin.kernel, tlin.weight, transpose=True)
            put(lin.bias, tlin.bias)
    put(model.ln_f.scale, ref.model[2].weight)
    put(model.ln_f.bias, ref.model[2].bias)
    put(model.head.kernel, ref.model[3].weight, transpose=True)
    put(model.head.bias, ref.model[3].bias)
    tokens = np.asarray(_tokens(8))
    expected = ref(torch.from_numpy(tokens)).detach().numpy()
    np.testing.assert_allclose(model(jnp.asarray(tokens)), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "kind,shape,size",
    [("max", (3, 28, 28, 6), 2), ("max", (2, 10, 11, 4), 2), ("avg", (2, 8, 9, 3), 4)],
)
def test_pool2d_matches_windowed_reduction_values_and_gradients(kind, shape, size):
    """Reshape pooling = flax's reduce_window pooling (values; gradients on untied inputs)."""
    from nets.models.layers import pool2d

    x = normal(0, shape)
    ref_fn = nnx.max_pool if kind == "max" else nnx.avg_pool
    ref = lambda x: ref_fn(x, (size, size), strides=(size, size))  # noqa: E731
    np.testing.assert_allclose(pool2d(x, size, kind), ref(x), rtol=1e-6, atol=1e-7)
    w = normal(1, ref(x).shape)
    g = jax.grad(lambda x: jnp.sum(w * pool2d(jax.nn.relu(x), size, kind)))(x)
    g_ref = jax.grad(lambda x: jnp.sum(w * ref(jax.nn.relu(x))))(x)
    np.testing.assert_allclose(g, g_ref, rtol=1e-6, atol=1e-7)


def test_pool2d_bad_input():
    from nets.models.layers import pool2d

    with pytest.raises(ValueError, match="kind"):
        pool2d(jnp.ones((1, 4, 4, 1)), 2, "min")
    with pytest.raises(ValueError, match="NHWC"):
        pool2d(jnp.ones((4, 4)), 2)
    with pytest.raises(ValueError, match="pool size"):
        pool2d(jnp.ones((1, 4, 4, 1)), 5)
