"""Shared fixtures: seeded random configurations."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(20261129)


def random_tokens(rng, n, d):
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)
