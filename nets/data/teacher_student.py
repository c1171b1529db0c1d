"""Teacher–student regression with a narrow two-layer ReLU teacher (Kunin et al. Fig 1, Chizat et al.)."""

from __future__ import annotations

import numpy as np

from nets.data.base import Dataset


def teacher_student(
    n_train: int, n_test: int, *, dim: int = 100, teacher_width: int = 3, seed: int = 0
) -> Dataset:
    r"""Inputs on the unit sphere, targets :math:`y = \sum_{j=1}^{k} a_j \max(0, w_j^\top x)`.

    Teacher neurons :math:`w_j` uniform on :math:`\mathbb{S}^{d-1}`, :math:`a_j = \pm 1`
    (alternating signs), inputs :math:`x` uniform on :math:`\mathbb{S}^{d-1}`.

    Args:
      n_train, n_test: numbers of samples.
      dim: input dimension d.
      teacher_width: number of teacher neurons k.
      seed: NumPy seed.

    Returns:
      regression :class:`Dataset` with scalar float32 targets (n,).
    """
    if min(n_train, n_test, dim, teacher_width) < 1:
        raise ValueError("n_train, n_test, dim and teacher_width must be ≥ 1")
    rng = np.random.default_rng(seed)

    def sphere(n):
        z = rng.standard_normal((n, dim))
        return z / np.linalg.norm(z, axis=1, keepdims=True)

    w = sphere(teacher_width)
    a = np.where(np.arange(teacher_width) % 2 == 0, 1.0, -1.0)
    x_tr, x_te = sphere(n_train), sphere(n_test)
    f = lambda x: (np.maximum(x @ w.T, 0.0) @ a).astype(np.float32)
    return Dataset(
        x_tr.astype(np.float32),
        f(x_tr),
        x_te.astype(np.float32),
        f(x_te),
        num_classes=1,
        task="regression",
        name="teacher-student",
    )
