"""Registered experiments, one module per paper figure/table (discovered by :mod:`lrrich.registry`)."""
