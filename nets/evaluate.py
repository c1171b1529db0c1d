"""Evaluation on device: features, outputs, loss, accuracy and metrics of a training state.

Everything a log point needs is one jitted function of the state (:func:`log_values`): the
forward pass over the fixed fit/eval subsets in chunks, the loss as trained
(:func:`nets.step.loss_value`), the accuracy (:func:`nets.losses.accuracy`) and the metrics
(default D_LR, :func:`metrics.dlr_with_rank`), so a log point costs one dispatch and one small
device-to-host copy. Loss and accuracy are accumulated in the widest enabled float
(``jnp.result_type(float)``: float64 under x64).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import metrics
from nets.config import HParams, TrainConfig
from nets.data.base import Dataset, validate
from nets.losses import accuracy
from nets.step import Program, TrainState, build, forward, loss_value, over_runs
from nets.xla_cpu import program_jit

EVAL_CHUNK = 1024  # rows per forward call: bounds activation memory of the conv nets

if not hasattr(metrics, "dlr_with_rank"):  # nets needs the project's metrics package, no fallback
    raise ImportError(
        f"'import metrics' found {getattr(metrics, '__file__', None) or metrics!r}, which is not "
        "lrrich's metrics package (it has no dlr_with_rank): a module or folder named 'metrics' "
        "earlier on sys.path shadows it; rename that file or remove its folder from sys.path"
    )


def forward_all(
    program: Program, state: TrainState, x: jax.Array, hp, chunk: int = EVAL_CHUNK
) -> tuple[jax.Array, jax.Array]:
    """Features (n, p) and outputs (n, C) of all n rows of x, at most ``chunk`` rows at a time.

    The rows are cut into ⌈n/chunk⌉ equal blocks (the last one padded by fewer rows than a block
    has), so padding costs less than one row per block. Traceable.
    """
    n = x.shape[0]
    if n <= chunk:
        return forward(program, state, x, hp)
    chunk = -(-n // -(-n // chunk))  # ⌈n / ⌈n / chunk⌉⌉
    pad = -n % chunk
    xp = jnp.concatenate([x, jnp.repeat(x[:1], pad, axis=0)]) if pad else x
    blocks = xp.reshape(-1, chunk, *x.shape[1:])
    feats, outs = jax.lax.map(lambda b: forward(program, state, b, hp), blocks)
    return feats.reshape(-1, feats.shape[-1])[:n], outs.reshape(-1, outs.shape[-1])[:n]


def loss_and_accuracy(program: Program, outputs: jax.Array, y: jax.Array, hp) -> dict:
    """``{"loss"}`` as trained, plus ``"acc"`` for integer labels; in the widest enabled float."""
    wide = jnp.result_type(float)
    hp_wide = jax.tree.map(lambda a: a.astype(wide), hp)
    out = {"loss": loss_value(program, outputs.astype(wide), y, hp_wide)}
    if jnp.issubdtype(y.dtype, jnp.integer):
        out["acc"] = accuracy(outputs, y)
    return out


def default_metric(features: jax.Array, outputs: jax.Array):
    """D_LR with the rank it used (:func:`metrics.dlr_with_rank`; NaN when undefined)."""
    return metrics.dlr_with_rank(features, outputs)


SPLITS = ("train", "test")  # the fit and held-out subsets of a log point


@program_jit(static_argnums=(0, 5, 6), static_argnames="metric_splits")
def log_values(
    program: Program,
    state: TrainState,
    hp,
    fit: tuple[jax.Array, jax.Array],
    held: tuple[jax.Array, jax.Array],
    metric_fns: tuple[tuple[str, Callable], ...],
    chunk: int = EVAL_CHUNK,
    features: tuple[jax.Array, jax.Array] | None = None,
    frozen: tuple[metrics.FrozenFeatures, metrics.FrozenFeatures] | None = None,
    *,
    metric_splits: tuple[str, ...] = SPLITS,
) -> dict:
    """Loss, accuracy and the traceable metrics on the fit (train) and held-out (test) subsets.

    Args:
      program, state, hp: the run (see :mod:`nets.step`).
      fit, held: (x, y) of the fixed train and test subsets.
      metric_fns: ``((name, fn(features, outputs)), ...)``, traceable; fn returns a () value or
        a NamedTuple with ``value`` and ``rank`` (:class:`metrics.DLR`).
      chunk: rows per forward call.
      features: the features Φ of the fit and held-out inputs when they cannot have changed
        since they were computed (last-layer-only training of a model without batch
        statistics): only the readout ``head`` is then evaluated.
      frozen: with ``features``, their :func:`metrics.freeze_features`; the default metric
        (:func:`default_metric`) then reuses their Φ_cᵀΦ_c (:func:`metrics.dlr_with_rank_frozen`,
        O(npC) per log point instead of O(np²)).
      metric_splits: the subsets on which ``metric_fns`` are computed (loss and accuracy: both).

    Returns:
      ``{"train_loss", "train_acc", "test_loss", ..., "<name>_train": value,
      "<name>_train_rank": rank, ...}`` of () device arrays.
    """
    passes = _forward_splits(program, state, hp, fit, held, chunk, features)
    out = _loss_values(program, passes, fit, held, hp)
    return out | _metric_values(metric_fns, passes, frozen, metric_splits)


def _forward_splits(program, state, hp, fit, held, chunk, features) -> tuple:
    """((Φ, F) of the fit subset, (Φ, F) of the held-out one); only ``head`` where Φ is known."""
    passes = []
    for (x, _), feats in zip((fit, held), (None, None) if features is None else features,
                             strict=True):  # fmt: skip
        if feats is None:
            passes.append(forward_all(program, state, x, hp, chunk))
        else:
            model = nnx.merge(program.graphdef_eval, state.trainable, state.rest)
            passes.append((feats, hp.output_scale.astype(feats.dtype) * model.head(feats)))
    return tuple(passes)


def _loss_values(program, passes, fit, held, hp) -> dict:
    out = {}
    for split, (_, outs), (_, y) in zip(SPLITS, passes, (fit, held), strict=True):
        out.update({f"{split}_{k}": v for k, v in loss_and_accuracy(program, outs, y, hp).items()})
    return out


def _metric_values(metric_fns, passes, frozen, metric_splits) -> dict:
    out = {}
    for split, (feats, outs), fixed in zip(SPLITS, passes, frozen or (None, None), strict=True):
        for name, fn in metric_fns if split in metric_splits else ():
            if fn is default_metric and fixed is not None:
                value = metrics.dlr_with_rank_frozen(fixed, outs)
            else:
                value = fn(feats, outs)
            if hasattr(value, "rank"):
                out[f"{name}_{split}_rank"] = value.rank
                value = value.value
            out[f"{name}_{split}"] = value
    return out


def batched_log_points(backend: str | None = None) -> bool:
    """Whether the metrics of R runs' log points (D_LR) run as one ``vmap`` or one after another.

    The forward passes and losses are always one ``vmap``. The metrics follow
    :func:`metrics.batched_by_default`: batched on GPUs and TPUs, looped (``lax.map``) on the
    CPU, where XLA:CPU's batched QR and SVD are no faster than the loop (docs/findings/
    benchmarks.md; ``benchmarks/bench_vmap_sweep.py --breakdown`` times the whole log point) and
    a vmapped pair of D_LRs can hang (``benchmarks/xla_cpu_hangs.py dlr_pair``).
    """
    return metrics.batched_by_default(backend)


def _each_run(fn, args, batched: bool | None = None):
    """``fn`` over the leading axis of ``args``: batched or looped (default
    :func:`batched_log_points`)."""
    batched = batched_log_points() if batched is None else batched
    return jax.vmap(fn)(args) if batched else jax.lax.map(fn, args)


def shared_fields(configs) -> tuple[bool, ...]:
    """Per :class:`~nets.config.HParams` field, whether ``configs`` all give it one value."""
    return tuple(len({getattr(c, f) for c in configs}) == 1 for f in HParams._fields)


def _split_shared(hps: HParams, shared: tuple[bool, ...] | None) -> tuple[HParams, HParams]:
    """(stacked hps with None for the shared fields, run 0's values of the shared fields)."""
    shared = shared or (False,) * len(hps)
    per_run = HParams(*(None if s else h for h, s in zip(hps, shared, strict=True)))
    return per_run, HParams(*(h[0] if s else None for h, s in zip(hps, shared, strict=True)))


def _join_shared(per_run: HParams, common: HParams) -> HParams:
    return HParams(*(c if p is None else p for p, c in zip(per_run, common, strict=True)))


@program_jit(static_argnums=(0, 5, 6, 7, 9, 10, 11))
def log_values_many(
    program, states, hps, fit, held, metric_fns, chunk, metric_splits, known=None, mesh=None,
    shared=None, batched=None,
):  # fmt: skip
    """:func:`log_values` of R runs stacked along axis 0 (``known``: their :func:`freeze_many`).

    The forward passes, losses and accuracies of the R runs are one ``vmap`` (batched GEMMs);
    the metrics (D_LR's QR and SVD) are batched on an accelerator and run one run after another
    on the CPU (:func:`batched_log_points`; ``batched``, static, forces either form). With a
    runs ``mesh`` (:func:`nets.step.runs_mesh`) each device evaluates its share of the runs.

    ``shared`` (static, one bool per :class:`~nets.config.HParams` field, from
    :func:`shared_fields`): fields with one value for all runs enter the ``vmap`` unbatched, so
    an input scale common to the runs scales the subsets once and the first layer is one GEMM
    for all runs instead of R (values then equal each run's own :func:`log_values` to float32
    round-off, not bitwise; None batches every field).

    Returns:
      the dict of :func:`log_values` with a leading axis R on every entry.
    """

    def local(states, hps, fit, held, known):
        feats, frozen = (None, None) if known is None else known
        per_run, common = _split_shared(hps, shared)

        def forward(state, hp, f):
            return _forward_splits(program, state, _join_shared(hp, common), fit, held, chunk, f)

        passes = jax.vmap(forward)(states, per_run, feats)

        def losses(p, hp):
            return _loss_values(program, p, fit, held, _join_shared(hp, common))

        out = jax.vmap(losses)(passes, per_run)
        return out | _each_run(
            lambda a: _metric_values(metric_fns, a[0], a[1], metric_splits), (passes, frozen),
            batched,
        )  # fmt: skip

    split = over_runs(local, mesh, (True, True, False, False, True))
    return split(states, hps, fit, held, known)


def _freeze(program, state, hp, x_fit, x_held, chunk):
    feats = tuple(forward_all(program, state, x, hp, chunk)[0] for x in (x_fit, x_held))
    return feats, tuple(metrics.freeze_features(f) for f in feats)


#: (features Φ of the fit and held-out inputs, their :func:`metrics.freeze_features`) of one run:
#: what :func:`log_values` reuses while Φ cannot change (:func:`frozen_features`).
freeze = program_jit(_freeze, static_argnums=(0, 5))


@program_jit(static_argnums=(0, 5, 6))
def freeze_many(program, states, hps, x_fit, x_held, chunk, mesh=None):
    """:func:`freeze` of R runs stacked along axis 0 (batched or looped and split over a runs
    ``mesh``, as :func:`log_values_many`)."""

    def local(states, hps, x_fit, x_held):
        return _each_run(lambda a: _freeze(program, *a, x_fit, x_held, chunk), (states, hps))

    return over_runs(local, mesh, (True, True, False, False))(states, hps, x_fit, x_held)


@program_jit(static_argnums=(0, 4))
def _features_outputs(program, state, hp, x, chunk):
    return forward_all(program, state, x, hp, chunk)


def frozen_features(program: Program, state: TrainState) -> bool:
    """Whether Φ(x) stays fixed during training: only ``head`` trains and no batch statistics."""
    stats = nnx.merge(program.graphdef_eval, state.trainable, state.rest)
    return program.config.last_layer_only and not jax.tree.leaves(nnx.state(stats, nnx.BatchStat))


def features_and_outputs(
    program: Program, state: TrainState, hp, x: np.ndarray, chunk: int = EVAL_CHUNK
) -> tuple[jax.Array, jax.Array]:
    """Jitted :func:`forward_all` (features (n, p), outputs (n, C)) for host-side metrics."""
    return _features_outputs(program, state, hp, jnp.asarray(x), chunk)


@program_jit(static_argnums=(0, 5))
def _split_stats(program, state, hp, x, y, chunk):
    _, outs = forward_all(program, state, x, hp, chunk)
    return loss_and_accuracy(program, outs, y, hp)


def evaluate(model: nnx.Module, data: Dataset, config: TrainConfig | None = None) -> dict:
    """Loss and accuracy of ``model`` on the full train and test sets of ``data``.

    Args:
      model: a model following the :mod:`nets` contract.
      data: the dataset.
      config: the training config whose loss and scales define the loss (default
        ``TrainConfig()``); its ``weight_scale`` / ``layer_balance`` are not applied.

    Returns:
      ``{"train_loss", "test_loss"}`` plus ``"train_acc", "test_acc"`` for classification.
    """
    import dataclasses

    config = (config or TrainConfig()).validate()
    validate(data)
    config = dataclasses.replace(config, weight_scale=1.0, layer_balance=1.0)
    program, state, hp = build(
        model, config, num_classes=data.num_classes, steps_per_epoch=1, total_steps=1
    )
    out = {}
    for split in ("train", "test"):
        x, y = getattr(data, f"x_{split}"), getattr(data, f"y_{split}")
        stats = _split_stats(program, state, hp, jnp.asarray(x), jnp.asarray(y), EVAL_CHUNK)
        out.update({f"{split}_{k}": float(v) for k, v in stats.items()})
    return out
