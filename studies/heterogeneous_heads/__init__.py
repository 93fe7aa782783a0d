"""Heterogeneous head strengths and clustering speed (paper Thm 22); see run.py."""
