"""Attention entropy production (paper Thm 27); see run.py."""
