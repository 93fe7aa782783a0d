"""Synchronization on the circle at negative temperature (Polyanskiy, Rigollet, Yao 2025); see run.py."""
