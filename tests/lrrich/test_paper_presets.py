"""Each paper preset of the D / T / K experiments against a table of the papers' stated values.

Every entry of :data:`STATED` is one value a paper states: the experiment, its scale, what the
value is read from the preset (a field, or a function of the preset such as the step count of
the paper's epochs), the value, the words of the paper and the place. Three kinds of entry:

* ``value`` given — the preset must hold it;
* ``value=None`` — the paper's cell cannot be read (D's tables lost their math cells in the text
  extraction): listed so the gap is visible, never compared;
* ``stated`` given — the preset deliberately differs (the papers disagree, or one seed per run
  with the paper's seed count reached by ``lrrich sweep --seeds``): the module docstring, which
  every report prints under "About this experiment", must say so in these words.

Values the papers leave open (the last partial batch, input normalisation, initialisation, which
split D_LR is read on) are named as choices in each module docstring:
:data:`OPEN_CHOICES` checks that they are.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Callable
from typing import Any

import pytest

from lrrich.experiments import _presets


@dataclasses.dataclass(frozen=True)
class Stated:
    """One value a paper states for an experiment's paper preset."""

    experiment: str  # module name under lrrich.experiments
    scale: str  # key of the module's SCALES
    what: str  # a Config field, or a label when ``read`` computes the value
    value: Any  # the paper's value; None: the paper's cell cannot be read
    quote: str  # the paper's words
    place: str  # paper key and place
    read: Callable | None = None  # preset -> the value compared (default: the field ``what``)
    stated: str | None = None  # the preset differs; the module docstring says it in these words


def _torch_steps(n: int, batch: int, epochs: int) -> int:
    """Steps of PyTorch epochs with the short last batch kept, counted naively."""
    steps = 0
    for _ in range(epochs):
        left = n
        while left > 0:
            left -= batch
            steps += 1
    return steps


_D_F4 = "D App. F.4, dataset table"
_D_F4_OPT = "D App. F.4, optimizer table"
_T_C3 = "T App. C.3"
_T_643 = "T §6.4.3"
_T_24 = "T §2.4"

STATED: list[Stated] = [
    # grokking-transformer: D Fig 4, S's table
    Stated("grokking_transformer", "paper", "p", 97, "Mod 97 | 2-layer Transformer", "S, table"),
    Stated("grokking_transformer", "paper", "num_layers", 2, "2-layer Transformer", "S, table"),
    Stated(
        "grokking_transformer",
        "paper",
        "n_train",
        4656,
        "Fig. 4 | mod-p division | 4,656 | 1 | 512",
        _D_F4,
        read=lambda c: round(c.train_fraction * c.p * (c.p - 1)),
    ),
    Stated(
        "grokking_transformer",
        "paper",
        "batch_size",
        512,
        "Fig. 4 | mod-p division | 4,656 | 1 | 512",
        _D_F4,
    ),
    Stated(
        "grokking_transformer",
        "paper",
        "target_scale",
        1.0,
        "Fig. 4 | mod-p division | 4,656 | 1 | 512 (the scaling constant of the one-hot targets)",
        _D_F4,
    ),
    Stated(
        "grokking_transformer",
        "paper",
        "loss",
        "mse",
        "we only trained ours models on MSE loss where the targets are one-hot vectors",
        "D App. F.4",
    ),
    Stated(
        "grokking_transformer",
        "paper",
        "optimizer",
        "adam",
        "Fig. 4 | Adam | 0 | 4000 | None",
        _D_F4_OPT,
    ),
    Stated(
        "grokking_transformer",
        "paper",
        "weight_decay",
        0.0,
        "Fig. 4 | Adam | 0 | 4000 | None (the surviving '0' sits in the weight-decay column; "
        "the learning-rate and β cells are lost)",
        _D_F4_OPT,
    ),
    Stated(
        "grokking_transformer",
        "paper",
        "lr",
        None,
        "the learning-rate cell of Fig. 4's row is lost in extraction",
        _D_F4_OPT,
    ),
    Stated(
        "grokking_transformer",
        "paper",
        "b2",
        None,
        "the momentum / beta cell of Fig. 4's row is lost in extraction",
        _D_F4_OPT,
    ),
    Stated(
        "grokking_transformer",
        "paper",
        "steps (4,000 epochs)",
        _torch_steps(4656, 512, 4000),
        "Fig. 4 | Adam | 0 | 4000 | None (epochs), batch 512, 4,656 samples",
        _D_F4_OPT,
        read=lambda c: c.steps,
    ),
    Stated(
        "grokking_transformer",
        "paper",
        "decomposition_steps",
        (200, 3000),
        "Before grokking (step 200) ... After grokking (step 3000)",
        "S, table",
    ),
    Stated(
        "grokking_transformer",
        "paper",
        "seeds",
        3,
        "all error bars in the plots represent one standard deviation over at least three runs",
        "D App. F.1",
        stated="lrrich sweep grokking-transformer --scale paper --seeds 3",
    ),
    # grokking-mlp: T §6.4.3, Table 6.1
    Stated(
        "grokking_mlp",
        "paper",
        "n_train",
        1000,
        "trained on 1000 datapoints of flattened (vectorized) MNIST dataset",
        _T_643,
    ),
    Stated(
        "grokking_mlp", "paper", "dataset", "mnist", "flattened (vectorized) MNIST dataset", _T_643
    ),
    Stated("grokking_mlp", "paper", "depth", 4, "a grokking depth 4, width 512 MLPs", _T_643),
    Stated("grokking_mlp", "paper", "width", 512, "a grokking depth 4, width 512 MLPs", _T_643),
    Stated("grokking_mlp", "paper", "activation", "tanh", "MLPs with tanh activation", _T_643),
    Stated(
        "grokking_mlp",
        "paper",
        "optimizer",
        "adam",
        "Adam with learning ratio of 10^{-3} and weight decay of 10^{-4} was used",
        _T_643,
    ),
    Stated(
        "grokking_mlp",
        "paper",
        "lr",
        1e-3,
        "Adam with learning ratio of 10^{-3} and weight decay of 10^{-4} was used",
        _T_643,
    ),
    Stated(
        "grokking_mlp",
        "paper",
        "weight_decay",
        1e-4,
        "Adam with learning ratio of 10^{-3} and weight decay of 10^{-4} was used",
        _T_643,
    ),
    Stated("grokking_mlp", "paper", "batch_size", 128, "Batch size was 128", _T_643),
    Stated(
        "grokking_mlp",
        "paper",
        "steps (2,000 epochs)",
        _torch_steps(1000, 128, 2000),
        "Batch size was 128 and the model was trained for 2000 epochs",
        _T_643,
        read=lambda c: c.steps,
    ),
    Stated(
        "grokking_mlp",
        "paper",
        "weight_scale",
        5.0,
        "the weights of the layers were multiplied by factor of 5 compared to LeCun "
        "initialization; Table 6.1 Default (a): weight scale 5",
        _T_643,
    ),
    Stated(
        "grokking_mlp", "paper", "target_scale", 3.0, "Default | (a) | 5 | 3 | 1 | 1", "T Table 6.1"
    ),
    Stated(
        "grokking_mlp",
        "paper",
        "fixed_weight_scale",
        1.0,
        "Weight downscaling | (b) | 1 | 3 | 1 | 1",
        "T Table 6.1",
    ),
    Stated(
        "grokking_mlp",
        "paper",
        "fixed_target_scale",
        30.0,
        "Target upscaling | (c) | 5 | 30 | 1 | 1",
        "T Table 6.1",
    ),
    Stated(
        "grokking_mlp",
        "paper",
        "fixed_input_scale",
        0.01,
        "Input downscaling | (d) | 5 | 3 | 0.01 | 1",
        "T Table 6.1",
    ),
    Stated(
        "grokking_mlp",
        "paper",
        "fixed_output_scale",
        0.1,
        "Output downscaling | (e) | 5 | 3 | 1 | 0.1",
        "T Table 6.1",
    ),
    Stated(
        "grokking_mlp",
        "paper",
        "seeds",
        3,
        "all error bars in the plots represent one standard deviation over at least three "
        "runs (T §6.4.3 states no seed count)",
        "D App. F.1",
        stated="lrrich sweep grokking-mlp --scale paper --seeds",
    ),
    # target-downscaling: D Fig 2(b,c)
    Stated(
        "target_downscaling",
        "paper",
        "dataset",
        "mnist",
        "Fig. 2(b,c) | MNIST | 1,000 | 128",
        _D_F4,
    ),
    Stated(
        "target_downscaling", "paper", "n_train", 1000, "Fig. 2(b,c) | MNIST | 1,000 | 128", _D_F4
    ),
    Stated(
        "target_downscaling", "paper", "batch_size", 128, "Fig. 2(b,c) | MNIST | 1,000 | 128", _D_F4
    ),
    Stated(
        "target_downscaling",
        "paper",
        "optimizer",
        "adam",
        "Fig. 2(b,c) | Adam | 0 | 100 | None",
        _D_F4_OPT,
    ),
    Stated(
        "target_downscaling",
        "paper",
        "weight_decay",
        0.0,
        "Fig. 2(b,c) | Adam | 0 | 100 | None (the surviving '0' in the weight-decay column)",
        _D_F4_OPT,
    ),
    Stated(
        "target_downscaling",
        "paper",
        "lr",
        None,
        "the learning-rate cell of Fig. 2(b,c)'s row is lost in extraction",
        _D_F4_OPT,
    ),
    Stated(
        "target_downscaling",
        "paper",
        "epochs",
        100,
        "Fig. 2(b,c) | Adam | 0 | 100 | None",
        _D_F4_OPT,
    ),
    Stated(
        "target_downscaling",
        "paper",
        "steps (100 epochs)",
        _torch_steps(1000, 128, 100),
        "Fig. 2(b,c) | Adam | 0 | 100 | None; 1,000 samples, batch 128",
        _D_F4_OPT,
        read=lambda c: _presets.paper_steps(c.n_train, c.batch_size, c.epochs),
    ),
    Stated("target_downscaling", "paper", "seeds", 3, "over at least three runs", "D App. F.1"),
    Stated(
        "target_downscaling",
        "paper",
        "alphas",
        None,
        "the α values of Fig 2(b) are math cells, lost in extraction",
        "D Fig 2(b)",
    ),
    # mf-regime: T §2.4, Table 2.2 (+ D App. F.4's output scales)
    *[
        Stated("mf_regime", scale, field, value, quote, _T_24)
        for scale in ("paper", "paper-cifar10", "paper-cifar100")
        for field, value, quote in (
            (
                "momentum",
                0.9,
                "All models are trained with SGD with momentum 0.9 and weight decay of 10^{-3}",
            ),
            ("weight_decay", 1e-3, "SGD with momentum 0.9 and weight decay of 10^{-3}"),
            ("lr", 0.05, "The learning rate is 0.05 for ResNet18 and 0.01 for VGG16."),
            ("vgg_lr", 0.01, "The learning rate is 0.05 for ResNet18 and 0.01 for VGG16."),
        )
    ],
    *[
        Stated(
            "mf_regime",
            scale,
            field,
            value,
            "Models were trained for 200 epochs for MNIST and CIFAR10 with learning rate "
            "scheduling that decays by a factor of 0.2 every 60 epochs",
            _T_24,
        )
        for scale in ("paper", "paper-cifar10")
        for field, value in (("epochs", 200), ("schedule", "step"), ("step_every_epochs", 60))
    ],
    *[
        Stated(
            "mf_regime",
            "paper-cifar100",
            field,
            value,
            "When trained on CIFAR100, the models were trained for 600 epochs without "
            "learning rate scheduling.",
            _T_24,
        )
        for field, value in (("epochs", 600), ("schedule", "constant"))
    ],
    Stated(
        "mf_regime",
        "paper",
        "augment",
        "none",
        "CIFAR10 and CIFAR100 used the standard data augmentation ..., and MNIST was padded "
        "to the size of CIFAR10 images",
        _T_24,
    ),
    Stated(
        "mf_regime",
        "paper-cifar10",
        "augment",
        "cifar",
        "CIFAR10 and CIFAR100 used the standard data augmentation (random crops and "
        "horizontal flips)",
        _T_24,
    ),
    Stated(
        "mf_regime",
        "paper-cifar100",
        "augment",
        "cifar",
        "CIFAR10 and CIFAR100 used the standard data augmentation",
        _T_24,
    ),
    Stated(
        "mf_regime",
        "paper-cifar10",
        "output_scale",
        1 / 3,
        "Fig. 3 | CIFAR-10 | 10,000 | 1/3 | 128 (T §2.4 states no output scale)",
        _D_F4,
    ),
    Stated(
        "mf_regime",
        "paper-cifar100",
        "output_scale",
        1 / 10,
        "Fig. 6 | CIFAR-100 | 50,000 (all) | 1/10 | 128 (T §2.4 states no output scale)",
        _D_F4,
    ),
    Stated(
        "mf_regime",
        "paper-cifar100",
        "batch_size",
        128,
        "Fig. 6 | CIFAR-100 | 50,000 (all) | 1/10 | 128",
        _D_F4,
    ),
    Stated(
        "mf_regime",
        "paper",
        "seeds",
        3,
        "over at least three runs",
        "D App. F.1",
        stated="lrrich sweep mf-regime --scale paper --grid models=resnet18,vgg16_bn --seeds",
    ),
    # emergence: T App. C.3, Fig 5.1
    *[
        Stated("emergence", "paper", field, 1000, "width | 1000", f"{_T_C3}, table")
        for field in ("time_width", "data_width")
    ],
    Stated("emergence", "paper", "lr", 0.05, "learning rate | 0.05", f"{_T_C3}, table"),
    Stated(
        "emergence",
        "paper",
        "optimizer",
        "sgd",
        "The model was trained with SGD without momentum and no weight decay",
        _T_C3,
    ),
    Stated("emergence", "paper", "momentum", 0.0, "SGD without momentum", _T_C3),
    Stated("emergence", "paper", "weight_decay", 0.0, "SGD ... and no weight decay", _T_C3),
    Stated(
        "emergence",
        "paper",
        "init_std",
        0.01,
        "initialization standard deviation | 0.01 (the text says 'a standard deviation of "
        "0.001': the table is followed)",
        f"{_T_C3}, table",
    ),
    Stated(
        "emergence",
        "paper",
        "init_bias",
        True,
        "All parameters of the MLP were initialized with a Gaussian distribution",
        _T_C3,
    ),
    Stated("emergence", "paper", "S", 5.0, "The target scale was S = 5", _T_C3),
    Stated("emergence", "paper", "n_b", 32, "number of skill bits | 32", f"{_T_C3}, table"),
    Stated(
        "emergence", "paper", "m", 3, "Each skill has m = 3 mutually exclusive sparse bits", _T_C3
    ),
    Stated("emergence", "paper", "n_s", 5, "number of skills | 5", f"{_T_C3}, table"),
    Stated(
        "emergence",
        "paper",
        "alpha",
        0.6,
        "the multitask sparse parity problem with data power-law exponent α = 0.6",
        "T Fig 5.1 caption",
    ),
    *[
        Stated(
            "emergence",
            "paper",
            field,
            4000,
            "each step had the batch size of 4000 (2000 for the data emergence experiment)",
            _T_C3,
        )
        for field in ("time_batch", "width_batch")
    ],
    Stated(
        "emergence",
        "paper",
        "data_batch",
        2000,
        "each step had the batch size of 4000 (2000 for the data emergence experiment)",
        _T_C3,
    ),
    *[
        Stated(
            "emergence",
            "paper",
            field,
            value,
            "we trained for 5×10^5 steps (3×10^4 steps for time emergence)",
            _T_C3,
        )
        for field, value in (
            ("time_steps", 30_000),
            ("time_steps_1", 30_000),
            ("data_steps", 500_000),
            ("data_steps_1", 500_000),
            ("width_steps", 500_000),
            ("width_steps_1", 500_000),
        )
    ],
    Stated(
        "emergence",
        "paper",
        "data_lr_halving_every",
        50_000,
        "For the data emergence experiment, the learning rate was halved every 50,000 step.",
        _T_C3,
    ),
    Stated(
        "emergence",
        "paper",
        "width_optimizer",
        "adam",
        "the parameter emergence experiment where Adam with learning rate 0.001 and weight "
        "decay of 5×10^{-5} was used",
        _T_C3,
    ),
    Stated("emergence", "paper", "width_lr", 1e-3, "Adam with learning rate 0.001", _T_C3),
    Stated("emergence", "paper", "width_weight_decay", 5e-5, "weight decay of 5×10^{-5}", _T_C3),
    Stated(
        "emergence",
        "paper",
        "n_eval",
        20_000,
        "measured using 20,000 i.i.d samples from the k^{th} skill",
        _T_C3,
    ),
    Stated(
        "emergence",
        "paper",
        "time_eval_every",
        50,
        "For the time emergence, the skill strengths were measured every 50 steps",
        _T_C3,
    ),
    Stated(
        "emergence",
        "paper",
        "n_seeds",
        10,
        "shaded area indicate 1-standard deviation over at least 10 runs",
        "T Fig 5.1 caption",
    ),
    # kunin-grokking: K App. D (Grokking), Fig 12
    Stated(
        "kunin_grokking",
        "paper",
        "model",
        "transformer",
        "We are training a one layer transformer model on the modular arithmetic task",
        "K App. D",
    ),
    Stated(
        "kunin_grokking",
        "paper",
        "num_layers",
        1,
        "we use a single transformer layer (instead of the default 2-layer model)",
        "K App. D",
    ),
    Stated(
        "kunin_grokking",
        "paper",
        "taus",
        (0.5, 0.75, 1.0, 1.25, 1.5),
        "we sample scaling τ ∈ {0.5, 0.75, 1.0, 1.25, 1.5}",
        "K Fig 12 caption",
    ),
    Stated(
        "kunin_grokking",
        "paper",
        "alphas",
        (0.1, 0.3, 1.0, 3.0, 10.0),
        "balance α ∈ {0.1, 0.3, 1.0, 3.0, 10}",
        "K Fig 12 caption",
    ),
    Stated(
        "kunin_grokking",
        "paper",
        "n_seeds",
        5,
        "over n = 5 random initializations",
        "K Fig 12 caption",
    ),
    Stated(
        "kunin_grokking",
        "paper",
        "steps",
        30_000,
        "a maximal computational budget of m = 30,000 training steps",
        "K Fig 12 caption",
    ),
    Stated(
        "kunin_grokking",
        "paper",
        "threshold",
        0.99,
        "grokking time (defined as ≥ 0.99 accuracy on the validation data)",
        "K App. D",
    ),
    # teacher-student: K App. D.1, Fig 1(b)
    Stated(
        "teacher_student",
        "paper",
        "d",
        100,
        "Here the setting is: d = 100, m = 50, k = 3, and n = 1000",
        "K App. D.1, Fig 1(b)",
    ),
    Stated(
        "teacher_student",
        "paper",
        "h",
        50,
        "d = 100, m = 50, k = 3, and n = 1000",
        "K App. D.1, Fig 1(b)",
    ),
    Stated(
        "teacher_student",
        "paper",
        "k",
        3,
        "d = 100, m = 50, k = 3, and n = 1000",
        "K App. D.1, Fig 1(b)",
    ),
    Stated(
        "teacher_student",
        "paper",
        "n_train",
        1000,
        "d = 100, m = 50, k = 3, and n = 1000",
        "K App. D.1, Fig 1(b)",
    ),
    Stated(
        "teacher_student",
        "paper",
        "n_test",
        10_000,
        "Test error is computed as mean square error over a held-out set of 10,000 datapoints",
        "K App. D.1, Fig 1(b)",
    ),
    Stated(
        "teacher_student",
        "paper",
        "lr_scale",
        5e-3,
        "Training is performed with learning rate of 5e-3/τ^2",
        "K App. D.1, Fig 1(b)",
    ),
    Stated(
        "teacher_student",
        "paper",
        "n_seeds",
        16,
        "We average over 16 random seeds",
        "K App. D.1, Fig 1(b)",
    ),
    Stated(
        "teacher_student",
        "paper",
        "tau range",
        (0.1, 2.0),
        "We sweep over τ over a logarithmic scale in the range [0.1, 2]",
        "K App. D.1, Fig 1(b)",
        read=lambda c: (min(c.taus), max(c.taus)),
    ),
    Stated(
        "teacher_student",
        "paper",
        "delta range",
        (-1.0, 1.0),
        "δ over a linear scale in the range [−1, 1]",
        "K App. D.1, Fig 1(b)",
        read=lambda c: (min(c.deltas), max(c.deltas)),
    ),
]

OPEN_CHOICES = {
    # module -> words its docstring must contain, one per value the papers leave open
    "grokking_transformer": ("last partial batch", "initialisation", "no normalisation",
                             "D_LR is read on the test"),
    "grokking_mlp": ("last partial batch", "initialisation", "raw [0, 1] pixels",
                     "D_LR is read on the test"),
    "target_downscaling": ("last partial batch", "initialisation", "raw [0, 1] pixels",
                           "measures on the test images"),
    "mf_regime": ("last partial batch", "initialisation", "input normalisation", "VGG16's head",
                  "read on the test set"),
    "emergence": ("init std is the table's 0.01", "raw {0, 1} bits", "sampled with replacement"),
}  # fmt: skip


def _module(name: str):
    return importlib.import_module(f"lrrich.experiments.{name}")


def _id(s: Stated) -> str:
    return f"{s.experiment}-{s.scale}-{s.what}"


def _equal(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-12)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(
    "s", [s for s in STATED if s.stated is None and s.value is not None], ids=_id
)
def test_preset_holds_the_papers_value(s):
    config = _module(s.experiment).SCALES[s.scale]
    got = s.read(config) if s.read else getattr(config, s.what)
    assert _equal(got, s.value), (
        f"{s.experiment} --scale {s.scale}: {s.what} = {got!r}, the paper states {s.value!r} "
        f"({s.place}: '{s.quote}')"
    )


@pytest.mark.parametrize("s", [s for s in STATED if s.stated is not None], ids=_id)
def test_a_preset_that_differs_says_so(s):
    doc = _flat(_module(s.experiment).__doc__ + (_module(s.experiment).Config.__doc__ or ""))
    assert s.stated in doc, f"{s.experiment}'s docstring does not state: {s.stated!r}"


@pytest.mark.parametrize("name", sorted(OPEN_CHOICES))
def test_open_values_are_named_as_choices(name):
    doc = _flat(_module(name).__doc__ + (_module(name).Config.__doc__ or ""))
    missing = [w for w in OPEN_CHOICES[name] if w not in doc]
    assert not missing, f"{name}'s docstring names no choice for {missing}"


def test_table_is_well_formed():
    """Every entry has a quote and a place, names a real scale, and unreadable cells say so."""
    for s in STATED:
        assert s.quote and s.place, _id(s)
        assert s.scale in _module(s.experiment).SCALES, _id(s)
        if s.value is None:
            assert "lost" in s.quote, f"{_id(s)}: an unreadable value must say the cell is lost"


def test_paper_steps_counts_pytorch_epochs():
    """The papers' step count (short last batch kept) against a naive count of batches."""
    for n, b, e in ((1000, 128, 100), (4656, 512, 7), (1024, 128, 3), (5, 128, 2), (1, 1, 0)):
        assert _presets.paper_steps(n, b, e) == _torch_steps(n, min(b, n), e)
    with pytest.raises(ValueError, match="batch_size"):
        _presets.paper_steps(1000, 0, 1)
    with pytest.raises(ValueError, match="epochs"):
        _presets.paper_steps(1000, 128, -1)
