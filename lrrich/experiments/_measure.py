"""The one way the experiments measure a network: :func:`forward`, then D_LR and the rest.

:func:`forward` gives the features Φ(x) and outputs s_out·f(x); on them :func:`measure` reads
accuracy, D_LR (D Eq. 7) and the feature decomposition (T Alg. 1, Eq. 2.3–2.6),
:func:`init_baseline` the at-init baseline of a D_LR claim, :func:`prior_measures` D §4's prior
richness measures (S_init, ‖θ‖², NC1).
"""

from __future__ import annotations

import functools
import math

import jax
import numpy as np

CHUNK = 512
"""Examples per compiled forward pass (a fixed shape: one compile per architecture)."""


def forward(model, x: np.ndarray, output_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Φ (n, p) and s_out·f(x) (n, C) of ``model`` (``features``, ``head``) on the (n, …)
    inputs ``x``, as float64 host arrays: computed in the model's dtype (floating inputs cast to
    it), in chunks of :data:`CHUNK` (the last one padded) by one jitted program for every call;
    ``output_scale`` s_out is traced."""
    from flax import nnx

    x = np.asarray(x)
    if np.issubdtype(x.dtype, np.floating):
        x = x.astype(jax.tree.leaves(nnx.state(model, nnx.Param))[0].dtype)
    chunk = min(CHUNK, len(x))
    feats, outs = [], []
    for i in range(0, len(x), chunk):
        xb = x[i : i + chunk]
        pad = chunk - len(xb)
        if pad:
            xb = np.concatenate([xb, np.repeat(xb[:1], pad, axis=0)])
        f, o = _jitted()(model, jax.numpy.asarray(xb), float(output_scale))
        feats.append(np.asarray(f, np.float64)[: chunk - pad])
        outs.append(np.asarray(o, np.float64)[: chunk - pad])
    return np.concatenate(feats), np.concatenate(outs)


def safe_dlr(features, outputs) -> float:
    """D_LR (D Eq. 7), or NaN where it is undefined (outputs constant over the samples)."""
    from metrics import dlr

    try:
        return float(dlr(features, outputs))
    except ValueError:
        return float("nan")


def measure(model, data, output_scale: float) -> dict:
    """Accuracies, D_LR on the train and test sets, and the feature decomposition (T Alg. 1) fit
    on the training features (n_train ≥ p) and read on the test set against the one-hot labels:
    ``d_eff_rho`` the adjusted 1 + D_eff(ρ₂…ρ_p) (T Eq. 2.6), ``d_eff_util`` D_eff(Q̂)."""
    from metrics import feature_decomposition

    phi_tr, out_tr = forward(model, data.x_train, output_scale)
    phi_te, out_te = forward(model, data.x_test, output_scale)
    res = {"train_acc": float(np.mean(out_tr.argmax(1) == data.y_train)),
           "test_acc": float(np.mean(out_te.argmax(1) == data.y_test)),
           "dlr_train": safe_dlr(phi_tr, out_tr), "dlr": safe_dlr(phi_te, out_te),
           "n_features": int(phi_tr.shape[1])}  # fmt: skip
    if phi_tr.shape[0] >= phi_tr.shape[1] and np.isfinite(res["dlr"]):
        targets = np.eye(data.num_classes, dtype=phi_te.dtype)[data.y_test]
        fd = feature_decomposition(phi_tr, phi_te, out_te, targets)
        res.update(d_eff_rho=float(fd.d_eff_rho_adjusted), d_eff_util=float(fd.d_eff_utilization),
                   d_eff_quality=float(fd.d_eff_quality),
                   e1_constant_overlap=float(fd.e1_constant_overlap),
                   decomposition=decomposition(fd))  # fmt: skip
    return res


def decomposition(fd) -> dict:
    """The curves Π*(k), Π̂(k), ρ_k/ρ_1 and the D_LR of a :func:`metrics.feature_decomposition`,
    as JSON lists (what :func:`metrics.plot_feature_decomposition` draws)."""
    curves = ("cum_quality", "cum_utilization", "relative_intensity")
    return {**{k: np.asarray(getattr(fd, k)).tolist() for k in curves}, "dlr": float(fd.dlr)}


def init_baseline(model, data, split: str = "test") -> float:
    """The at-init baseline of a D_LR claim: :func:`metrics.fitted_readout_dlr` of the untrained
    ``model``'s features on ``split`` with the least-squares readout of its one-hot labels
    (regression targets as they are); NaN where undefined."""
    from metrics import fitted_readout_dlr

    x, y = (data.x_test, data.y_test) if split == "test" else (data.x_train, data.y_train)
    phi, _ = forward(model, x)
    y = np.asarray(y)
    targets = np.eye(data.num_classes)[y] if data.task == "classification" else y
    try:
        return float(fitted_readout_dlr(phi, targets).value)
    except ValueError:
        return float("nan")


def prior_measures(model, model0, x, y, output_scale: float = 1.0) -> dict:
    """D_LR and D §4's prior richness measures of ``model`` on inputs ``x`` with labels ``y``.

    ``s_init`` = 1 − CKA(K₀, K) of the feature kernels now and at initialisation (``model0``);
    ``param_norm`` ‖θ‖², ``param_norm_ratio`` ‖θ‖²/‖θ₀‖²; ``nc1`` (T Eq. D.6) of the features;
    ``acc`` the accuracy.
    """
    from flax import nnx

    from metrics import feature_kernel_distance, parameter_norm

    phi, out = forward(model, x, output_scale)
    phi0, _ = forward(model0, x, output_scale)
    norm = float(parameter_norm(nnx.state(model, nnx.Param)))
    norm0 = float(parameter_norm(nnx.state(model0, nnx.Param)))
    return {"dlr": safe_dlr(phi, out), "s_init": float(feature_kernel_distance(phi0, phi)),
            "param_norm": norm, "param_norm_ratio": norm / norm0, "nc1": nc1(phi, y, out.shape[1]),
            "acc": float(np.mean(out.argmax(1) == y))}  # fmt: skip


def nc1(vectors: np.ndarray, y: np.ndarray, num_classes: int) -> float:
    """NC1 = Tr(Σ_W Σ_B^†)/C (T Eq. D.6) of (n, d) ``vectors`` with labels ``y``; NaN where it is
    undefined (Σ_B = 0), an error for bad input (mismatched shapes, an empty class)."""
    from metrics import neural_collapse

    try:
        return float(neural_collapse(vectors, y, num_classes=num_classes).nc1)
    except ValueError as e:
        if "undefined" not in str(e):
            raise
        return math.nan


def cast_model(model, dtype):
    """A copy of ``model`` with every floating parameter and state cast to ``dtype``."""
    from flax import nnx

    graphdef, state = nnx.split(model)
    state = jax.tree.map(
        lambda a: a.astype(dtype) if np.issubdtype(a.dtype, np.floating) else a, state
    )
    return nnx.merge(graphdef, state)


def scaled_model(model, c: float):
    """A copy of ``model`` with every parameter multiplied by ``c``: θ₀ shrunk to c·θ₀."""
    from flax import nnx

    graphdef, state = nnx.split(model)
    return nnx.merge(graphdef, jax.tree.map(lambda a: a * c, state))


def first_step(steps: np.ndarray, values: np.ndarray, threshold: float) -> float | None:
    """The first of the (K,) logged ``steps`` whose value (K,) reaches ``threshold`` (NaN never
    does), or None."""
    hit = np.flatnonzero(np.nan_to_num(np.asarray(values, float), nan=-np.inf) >= threshold)
    return float(steps[hit[0]]) if hit.size else None


def spearman(a, b) -> float:
    """Spearman's rank correlation of two (K,) sequences without ties: the Pearson correlation
    of their ranks; NaN where K < 2 or a value is not finite."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("nan")
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def _features_and_outputs(m, xb, output_scale):
    phi = m.features(xb)
    return phi, output_scale * m.head(phi)


@functools.cache
def _jitted():
    """``nnx.jit(_features_and_outputs)``, made once so every :func:`forward` shares its cache."""
    from flax import nnx

    return nnx.jit(_features_and_outputs)
