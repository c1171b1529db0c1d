"""lrrich: the front door — CLI, experiment registry, results on disk, reports.

The science lives in the sibling packages :mod:`sims`, :mod:`metrics` and :mod:`nets`.
"""

__version__ = "0.1.0"
