"""The one way to train the seeds of a config, :func:`train_seeds` (resumable, cached), the seed
means and summaries read from its results, and :func:`claims_record`, the record the claims read.

Seed s initialises its network from ``nnx.Rngs(s)`` and orders its minibatches by
``jax.random.key(s)``; the data are the same for every seed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from lrrich import io
from lrrich.experiments._data import build_model, dataset_text, flat
from lrrich.experiments._measure import measure
from lrrich.experiments._presets import partial_batch_deviation, seed_list

HEADLINE = ("dlr", "dlr_train", "test_acc", "train_acc", "d_eff_rho", "d_eff_util")
"""The headline numbers of a trained point (:func:`point_summary`)."""
_HISTORY = ("step", "epoch", "loss", "train_acc", "test_acc", "dlr_train", "dlr_test")


def train_seeds(
    model_name: str,
    data,
    train_config,
    *,
    seeds,
    width: int,
    depth: int = 2,
    run_dir: Path,
    checkpoint_every: int = 0,
    log_every: int | None = None,
    eval_size: int | None = None,
    extra: Callable[[object, object], dict] | None = None,
    probe: Callable[[int, object], tuple[Callable | None, Callable]] | None = None,
    **model_kw,
) -> list[dict]:
    """Train and measure one network per seed of ``seeds``; each cached in ``run_dir/seed_<s>``.

    The seeds share one program (:func:`nets.train_many`, one after another inside it: on the CPU
    bitwise equal to each seed's own ``train``), so they cost one compilation. With
    ``checkpoint_every`` > 0 or one seed, each seed is one :func:`lrrich.trainer.train` writing
    its ``metrics.jsonl`` and checkpoints into its folder and resuming from them (``--resume``);
    it raises :class:`nets.TrainingDiverged` where its loss turns non-finite.

    Args:
      model_name, width, depth, model_kw: the network
        (:func:`~lrrich.experiments._data.build_model`).
      data, train_config: the :class:`nets.data.Dataset` and every seed's :class:`nets.TrainConfig`.
      log_every, eval_size: ``train``'s log period and log-point subset (None: its default).
      extra: ``extra(model, data) -> dict`` of further measures of each trained network.
      probe: ``probe(seed, model0) -> (on_log, finish)`` per seed, given its initial network
        model0: ``on_log(record, model)`` is called after each log point (None: no callback;
        with one, each seed trains alone and, resumed from a checkpoint, sees the later log
        points only) and ``finish(model) -> dict`` gives further measures of the trained network.

    Returns:
      per seed: the :func:`~lrrich.experiments._measure.measure` numbers, ``extra``'s and
      ``finish``'s, ``history`` (per log point: step, epoch, loss, accuracies, D_LR) and
      ``train_seconds``.
    """
    seeds, run_dir = list(seeds), Path(run_dir)
    net = dict(model_name=model_name, width=width, depth=depth, **model_kw)
    log = {k: v for k, v in (("log_every", log_every), ("eval_size", eval_size)) if v is not None}
    dirs = [run_dir / f"seed_{s}" for s in seeds]
    keys = [_point_key(net, data, train_config, s, log) for s in seeds]
    out = [_cached(d, k) for d, k in zip(dirs, keys, strict=True)]
    todo = [i for i, res in enumerate(out) if res is None]
    if todo:
        data = flat(data) if model_name == "mlp" else data
        runs = [(_build(net, data, seeds[i]), seeds[i], dirs[i]) for i in todo]
        hooks = [probe(s, m) if probe else (None, None) for m, s, _ in runs]
        trained = _train(runs, data, train_config, checkpoint_every, log, [h[0] for h in hooks])
        for i, (model, hist), (_, finish) in zip(todo, trained, hooks, strict=True):
            res = _result(model, hist, data, train_config, extra)
            out[i] = _save(dirs[i], keys[i], res | (finish(model) if finish else {}))
    return out


def point_summary(res: dict, suffix: str = "") -> dict:
    """The :data:`HEADLINE` numbers of one point, keys suffixed (e.g. ``dlr_lr0.05``)."""
    return {f"{k}{suffix}": res[k] for k in HEADLINE if k in res}


def grid_summary(results: dict[str, dict]) -> dict:
    """:func:`point_summary` per point, keys suffixed by the point's key (``{"_lr0.05": res}`` →
    ``dlr_lr0.05``, …); the plain keys when the grid has one point."""
    if len(results) == 1:
        return point_summary(next(iter(results.values())))
    return {k: v for suffix, res in results.items() for k, v in point_summary(res, suffix).items()}


def seed_mean(results: list[dict], keys=None, *, skip_nan: bool = False) -> dict:
    """The mean over the per-seed dicts ``results`` of each of ``keys`` (default: every number
    any seed has, but ``seed``); NaN where a seed lacks it or holds None, or with ``skip_nan``
    the mean over the seeds where it is defined (NaN where it is in none)."""
    if keys is None:
        number = lambda v: isinstance(v, int | float) and not isinstance(v, bool)
        keys = dict.fromkeys(k for r in results for k, v in r.items() if k != "seed" and number(v))
    with warnings.catch_warnings():  # skip_nan: a key undefined in every seed is NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean if skip_nan else np.mean
        return {k: float(mean([_nan(r.get(k)) for r in results])) for k in keys}


def seed_curves(results: list[dict]) -> list[dict]:
    """The training curves of each seed's result, for :func:`~lrrich.experiments._plots.plot_points`."""
    return [{k: r["history"][k] for k in _HISTORY[1:] if k in r["history"]} for r in results]


def tag(value: float) -> str:
    """A short, stable text for a grid value in summary keys: 0.05 → '0.05', 1e-3 → '0.001'."""
    return f"{value:g}"


def claims_record(values: dict, config, data, *, p, baseline, scale: str, deviations=()) -> dict:
    """:func:`lrrich.claims.measured` of an image experiment's per-seed ``values``: each field
    starting with ``dlr`` (a test-set D_LR) gets its at-init ``baseline`` and the isotropic
    reference at (n_test, ``p``, C) (``p``, ``baseline``: a value, or a function field → it); the
    dropped partial batch leads the ``deviations``; the seeds are the config's."""
    from lrrich.claims import measured, rf_reference

    def of(v, field):
        return v(field) if callable(v) else v

    dlr = [f for f in values if f.startswith("dlr")]
    return measured(
        values, seeds=seed_list(config), dataset=dataset_text(data), scale=scale,
        baseline={f: of(baseline, f) for f in dlr},
        reference={f: rf_reference(len(data.x_test), of(p, f), data.num_classes) for f in dlr},
        deviations=[*partial_batch_deviation(len(data.x_train), config.batch_size), *deviations],
    )  # fmt: skip


def train_run(model, data, train_config, config, run_dir: Path, *, seed: int | None = None, **kw):
    """(trained model, history) of one resumable :func:`lrrich.trainer.train` of ``model``:
    minibatches ordered by ``jax.random.key(seed)`` (default ``config.seed``), a log point every
    ``config.log_every`` steps and a checkpoint every ``config.checkpoint_every`` (a
    :class:`~lrrich.experiments._presets.StepTraining`'s fields) into ``run_dir``, resumed from
    the last; ``kw``: ``train``'s other arguments (``eval_size``, ``metrics``, ``callback``, …)."""
    from lrrich.trainer import train

    key = jax.random.key(config.seed if seed is None else seed)
    return train(model, data, train_config, key=key, log_every=config.log_every,
                 run_dir=Path(run_dir), checkpoint_every=config.checkpoint_every, resume=True,
                 progress=True, **kw)  # fmt: skip


def _nan(v):
    return np.nan if v is None else v


def _train(runs: list, data, train_config, checkpoint_every: int, log: dict, on_log: list) -> list:
    """(model, history) of each (model, seed, folder) of ``runs``: one :func:`nets.train_many`
    program, or one resumable ``train`` each (one run, checkpoints or ``on_log`` callbacks)."""
    from lrrich.trainer import train
    from nets import train_many

    if len(runs) > 1 and checkpoint_every == 0 and not any(on_log):
        models, seeds, _ = zip(*runs, strict=True)
        rngs = [jax.random.key(s) for s in seeds]
        ts = [train_config] * len(runs)
        trained = train_many(list(models), data, ts, rngs, progress=True, vectorize=False, **log)
        return list(zip(*trained, strict=True))
    kw = dict(checkpoint_every=checkpoint_every, resume=checkpoint_every > 0, progress=True, **log)
    return [train(m, data, train_config, key=jax.random.key(s), run_dir=d, callback=cb, **kw)
            for (m, s, d), cb in zip(runs, on_log, strict=True)]  # fmt: skip


def _build(net: dict, data, seed: int):
    """The network of ``net`` (name, size, constructor arguments) for ``data`` at ``seed``."""
    kw = {k: v for k, v in net.items() if k != "model_name" and v is not None}
    return build_model(net["model_name"], data, seed=seed, **kw)


def _result(model, hist, data, train_config, extra) -> dict:
    """The measures, ``extra``'s, the history and the training time of a trained network."""
    res = measure(model, data, train_config.output_scale)
    if extra is not None:
        res.update(extra(model, data))
    res["history"] = {k: hist.column(k).tolist() for k in _HISTORY}
    res["train_seconds"] = hist.train_time + hist.compile_time
    return res


def _point_key(net: dict, data, train_config, seed: int, log: dict) -> dict:
    """What a cached point must match: network, seed, data (labels' hash), training, logging."""
    model_kw = {k: v for k, v in net.items() if k not in ("model_name", "width", "depth", "init")}
    return {
        "model": net["model_name"], "width": net["width"], "depth": net["depth"], "seed": seed,
        "init": net.get("init"),
        **{k: v for k, v in model_kw.items() if v is not None},  # e.g. VGG16's head
        # the labels' hash tells shuffled from clean labels and subsets apart
        "data": [data.name, len(data.x_train), hashlib.sha1(data.y_train.tobytes()).hexdigest()],
        "train": dataclasses.asdict(train_config), **log,
    }  # fmt: skip


def _cached(run_dir: Path, key: dict) -> dict | None:
    """The result cached in ``run_dir/point.json`` when its key matches ``key`` (else None)."""
    cache = Path(run_dir) / "point.json"
    if cache.exists():
        cached = io.read_json(cache)
        if cached.get("key") == json.loads(json.dumps(key)):
            return cached["result"]
    return None


def _save(run_dir: Path, key: dict, res: dict) -> dict:
    """``res``, written with its ``key`` to ``run_dir/point.json``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    io.write_json(run_dir / "point.json", {"key": key, "result": res})
    return res
