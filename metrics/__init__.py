"""Richness measures: D_LR, the feature decomposition and the prior measures.

Every function takes arrays (NumPy or JAX, float32/float64) of last-layer features Φ (n, p) and
outputs F (n, C); the ``*_streaming`` variants take iterators of batches with O(p² + pC) memory.
Every GEMM requests full float32 precision (``Precision.HIGHEST``), so GPU/TPU results match CPU;
tolerances and their sources are tabled in :mod:`metrics._numerics`.
"""

from metrics._validate import Float64Warning
from metrics.activations import (
    KUNIN_LAPLACIAN,
    ZERO_SUM_LAPLACIAN,
    activation_hamming_distance,
    filter_smoothness,
)
from metrics.collapse import NeuralCollapse, neural_collapse
from metrics.decomposition import (
    FeatureDecomposition,
    Nystrom,
    effective_dimension,
    feature_decomposition,
    feature_decomposition_from_moments,
    feature_decomposition_streaming,
    nystrom,
)
from metrics.dlr import (
    DLR,
    FrozenFeatures,
    batched_by_default,
    dlr,
    dlr_from_moments,
    dlr_many,
    dlr_streaming,
    dlr_with_rank,
    dlr_with_rank_frozen,
    freeze_features,
)
from metrics.feature_tracking import (
    FeatureTracks,
    FeatureTrajectories,
    eigenfunction_overlap,
    feature_trajectories,
    match_features,
    track_features,
)
from metrics.fitted_readout import fitted_readout, fitted_readout_dlr
from metrics.kernels import (
    empirical_ntk,
    feature_kernel_distance,
    ntk_kernel_distance,
    parameter_distance,
    parameter_norm,
)
from metrics.moments import Moments, accumulate_moments, merge_moments, moments
from metrics.output_choices import (
    OUTPUT_CHOICES,
    OutputChoiceDLR,
    centred_logits,
    dlr_by_output,
    output_choice,
    probabilities,
)
from metrics.plots import plot_feature_decomposition, plot_metric_history
from metrics.reference import ReferenceSample, random_feature_dlr, random_feature_dlr_mc

__all__ = [
    "fitted_readout",
    "fitted_readout_dlr",
    "track_features",
    "match_features",
    "feature_trajectories",
    "eigenfunction_overlap",
    "FeatureTrajectories",
    "FeatureTracks",
    "DLR",
    "batched_by_default",
    "dlr_many",
    "Float64Warning",
    "KUNIN_LAPLACIAN",
    "ZERO_SUM_LAPLACIAN",
    "FeatureDecomposition",
    "FrozenFeatures",
    "Moments",
    "NeuralCollapse",
    "OUTPUT_CHOICES",
    "OutputChoiceDLR",
    "Nystrom",
    "ReferenceSample",
    "accumulate_moments",
    "activation_hamming_distance",
    "centred_logits",
    "dlr",
    "dlr_by_output",
    "dlr_from_moments",
    "dlr_streaming",
    "dlr_with_rank",
    "dlr_with_rank_frozen",
    "effective_dimension",
    "empirical_ntk",
    "feature_decomposition",
    "feature_decomposition_from_moments",
    "feature_decomposition_streaming",
    "feature_kernel_distance",
    "filter_smoothness",
    "freeze_features",
    "merge_moments",
    "moments",
    "neural_collapse",
    "ntk_kernel_distance",
    "nystrom",
    "output_choice",
    "parameter_distance",
    "parameter_norm",
    "plot_feature_decomposition",
    "plot_metric_history",
    "probabilities",
    "random_feature_dlr",
    "random_feature_dlr_mc",
]
