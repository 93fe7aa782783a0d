"""Clustering measures (meanfield.analysis.clustering): the measures themselves, the tree path against
the direct one, the auto rule and the refusals."""

import numpy as np
import pytest

from meanfield.analysis.clustering import CLUSTERING_TREE_MAX_D, CLUSTERING_TREE_MIN_N, clustering
from meanfield.core.initial import uniform_sphere, vmf_mixture
from meanfield.models.particles import retract_sphere


def test_clustering_measures():
    X = np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]])
    c = clustering(X, threshold=0.99)
    assert c["n_clusters"] == 3 and c["min_inner"] == 0.0
    assert c["mean_inner"] == pytest.approx(2 / 12, abs=1e-15)   # one coincident pair, counted twice
    Y = vmf_mixture(400, [[0, 0, 1.0], [0, 0, -1.0]], kappas=2000.0, seed=1)
    assert clustering(Y, threshold=0.9)["n_clusters"] == 2
    with pytest.raises(ValueError, match=r"threshold must be a finite number in \[-1, 1\]"):
        clustering(X, threshold=2)


# ------------------------------------------------------------------- clustering: direct vs tree
# Both paths return the same mean_inner (one formula, computed before the paths split) and the
# same graph; min_inner is the inner product of the same extreme pair, formed by the direct
# matrix product on one side and by einsum on the other: summation order differs by ~d eps
# (d <= 8: < 2e-15), and the antipode search may pick a pair within 2 max| |x|^2 - 1 | (< 1e-15
# for normalized tokens) of the minimum.  Hence 1e-14.
CLUSTER_TOL = 1e-14


def _clustering_cases(n, d):
    mus = uniform_sphere(3, d, seed=d)
    coincident = np.repeat(mus, -(-n // 3), axis=0)[:n]
    jitter = np.random.default_rng(d).standard_normal((n, d))
    yield "uniform", uniform_sphere(n, d, seed=n + d)
    yield "sparse", uniform_sphere(n // 25, d, seed=d)          # many components at high thresholds
    yield "vmf 1e3", vmf_mixture(n, mus, 1e3, seed=d)          # clusters wider than the threshold
    yield "vmf 1e8", vmf_mixture(n, mus, 1e8, seed=d)          # tight clusters (pairs at distance ~1e-4)
    yield "coincident", coincident                             # exact duplicates, O(n^2) linked pairs
    yield "retracted", retract_sphere(coincident + 1e-12 * jitter)   # near-duplicates, norms 1 +- eps


def _assert_same_clustering(X, threshold):
    a = clustering(X, threshold, method="direct")
    b = clustering(X, threshold, method="tree")
    assert a["n_clusters"] == b["n_clusters"]
    assert a["min_inner"] == pytest.approx(b["min_inner"], abs=CLUSTER_TOL)
    assert a["mean_inner"] == pytest.approx(b["mean_inner"], abs=CLUSTER_TOL)
    return a


@pytest.mark.parametrize("d", [2, 3, 8])
def test_clustering_tree_matches_direct(d):
    counts = set()
    for name, X in _clustering_cases(1500, d):
        for threshold in (0.999, 0.99, 0.9, 0.3, -0.5):
            counts.add(_assert_same_clustering(X, threshold)["n_clusters"])
    assert len(counts) >= 4      # the cases cover single, few and many components


@pytest.mark.parametrize("name", ["uniform", "coincident"])
def test_clustering_tree_matches_direct_large(name):
    """n = 2e4 in d = 3: the regime where the tree path is used by default."""
    X = dict(_clustering_cases(20_000, 3))[name]
    _assert_same_clustering(X, 0.99)


def test_clustering_pairs_exactly_at_threshold():
    """The 16 sign vectors (+-1/2)^4: inner products (4 - 2k)/4 are exact in floating point, k
    the number of differing signs.  At threshold 1/2 exactly the links are the edges of the
    4-cube (one component); just above it no pair is linked (16 components)."""
    X = 0.5 * np.array(np.meshgrid(*[[-1.0, 1.0]] * 4)).reshape(4, -1).T
    for method in ("direct", "tree"):
        assert clustering(X, 0.5, method=method) == {"min_inner": -1.0, "mean_inner": -1 / 15, "n_clusters": 1}
        assert clustering(X, np.nextafter(0.5, 1), method=method)["n_clusters"] == 16
        # orthogonal pairs (k = 2) at threshold 0 exactly: linked
        assert clustering(X[[0, 3, 15]], 0.0, method=method)["n_clusters"] == 1


def test_clustering_auto_rule():
    small = uniform_sphere(1000, 3, seed=1)                 # the default run: direct path, same numbers
    assert clustering(small) == clustering(small, method="direct")
    large = uniform_sphere(CLUSTERING_TREE_MIN_N, 3, seed=2)
    assert clustering(large) == clustering(large, method="tree")
    wide = uniform_sphere(CLUSTERING_TREE_MIN_N, CLUSTERING_TREE_MAX_D + 1, seed=3)
    assert clustering(wide) == clustering(wide, method="direct")
    # not unit (beyond 1e-8, but within the tree's 1e-12): auto falls back to the direct path
    near = large * np.sqrt(1 + 1e-10)
    assert clustering(near) == clustering(near, method="direct")
    with pytest.raises(ValueError, match=r"X rows must be unit vectors"):      # never renormalized silently
        clustering(1.5 * large)


def test_clustering_rejects():
    X = uniform_sphere(10, 3, seed=0)
    with pytest.raises(ValueError, match=r"method must be one of \('auto', 'direct', 'tree'\); received 'kd'"):
        clustering(X, method="kd")
    with pytest.raises(ValueError, match="chunk_rows must be an integer >= 1; received 0"):
        clustering(X, chunk_rows=0)
    with pytest.raises(ValueError, match=r"X must be a finite real array of shape \(n, d\)"):
        clustering(np.where(np.arange(30).reshape(10, 3) == 4, np.nan, X))
    with pytest.raises(ValueError, match="rows of X must be unit vectors"):
        clustering(X * np.sqrt(1 + 1e-10), method="tree")
    with pytest.raises(ValueError, match="threshold must be < 1"):
        clustering(X, 1.0, method="tree")
    assert clustering(X, 1.0, method="direct")["n_clusters"] == 10
    big = np.tile(X, (20_001, 1))                           # n = 200 010 > CLUSTERING_DIRECT_MAX_N
    with pytest.raises(ValueError, match=r"method='direct'\) of X with n = 200010 .* use method='tree'"):
        clustering(big, method="direct")
