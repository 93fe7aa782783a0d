"""Continuum limit: particles vs the mean-field PDE by optimal transport (MODEL.md section 4)."""
