"""Shared fixtures: seeded random configurations."""

import sys
from pathlib import Path

import numpy as np
import pytest

# studies/ is a package at the repository root (not installed): make it importable in tests
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@pytest.fixture
def rng():
    return np.random.default_rng(20261129)


def random_tokens(rng, n, d):
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)
