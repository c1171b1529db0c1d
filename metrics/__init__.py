"""Richness measures: D_LR, the feature decomposition and the prior measures."""
