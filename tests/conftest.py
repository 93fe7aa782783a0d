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


# The marked tier (``-m extended``): the studies' quick modes, the benchmarks' quick modes and the doc
# snippets. They test research scripts and documents, not the library, and take most of the suite's time:
# the default ``pytest`` runs the library tier only; README's test command (= .ci/run) runs both tiers.
# "test_docs.py" in full: tests/test_docstrings.py (the numpydoc sections of the API) is of the library tier
EXTENDED_PREFIXES = ("test_study_", "test_benchmarks_", "test_docs.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name.startswith(EXTENDED_PREFIXES):
            item.add_marker(pytest.mark.extended)
