"""Particle diagnostics: entropies, per-head energy terms, radial shadows, clustering.

The entropy identity (MODEL.md section 1) is a case of the closed-form table, tests/closed_forms.py.
"""

import numpy as np
import pytest

from meanfield.analysis.diagnostics import (attention_entropy, attention_entropy_rate, clustering, dissipation,
                                   energy_rate_terms, radial_dominance, radial_shadows)
from meanfield.core.heads import orthogonal_block_heads, random_symmetric_heads, scalar_heads
from meanfield.core.initial import equiangular, uniform_sphere, vmf_mixture
from meanfield.models.particles import ParticleSystem, retract_sphere



def test_entropy_relative_vs_shannon():
    system = ParticleSystem(random_symmetric_heads(3, 2, seed=2, beta=3.0))
    X = uniform_sphere(20, 3, seed=3)
    H = attention_entropy(system, X)
    # relative entropy = Shannon - log n for uniform weights: an exact rewriting, round-off only
    np.testing.assert_allclose(attention_entropy(system, X, relative=True), H - np.log(20), atol=1e-13)
    # Shannon entropy of a distribution on n points lies in [0, log n]
    assert np.all(H >= 0) and np.all(H <= np.log(20) + 1e-12)


def test_entropy_equiangular_tends_to_log_n():
    """All tokens nearly merged: attention is uniform, so H -> log n (scalar head)."""
    n = 6
    system = ParticleSystem(scalar_heads([1.0], 8, beta=2.0))
    X = equiangular(n, 8, gamma=1 - 1e-8)
    # p_ij = exp(beta s_ij)/Z with s_ij within 1e-8 of each other: H = log n - O(beta^2 1e-16)
    assert attention_entropy(system, X) == pytest.approx(np.log(n), abs=1e-10)
    # equiangular, scalar heads: the covariance is <= 0 so the rate is >= 0 (MODEL.md section 1)
    X = equiangular(n, 8, gamma=0.2)
    assert np.all(attention_entropy_rate(system, X) >= -1e-14)


@pytest.mark.parametrize("geometry", ["sphere", "flat"])
def test_energy_rate_terms(geometry):
    """Row sums of C[h, h'] are the exact dE_h/dt for symmetric value-aligned mean heads."""
    system = ParticleSystem(random_symmetric_heads(4, 3, seed=4), geometry)
    X = uniform_sphere(15, 4, seed=5)
    C = energy_rate_terms(system, X)
    # two exact formulas for the same sums (round-off only)
    np.testing.assert_allclose(C.sum(axis=1), system.energy_rates(X), rtol=1e-12)
    assert C.sum() == pytest.approx(dissipation(system, X), rel=1e-12)


def test_cross_terms_are_minus_radial_products():
    """Orthogonal blocks: <u^h, u^h'> = 0, so C[h, h'] = -sum_i w_i a^h a^h' on the sphere, 0 flat."""
    heads = orthogonal_block_heads(6, 3, strengths=[1.0, 1.5, 2.0], beta=1.3)
    X = uniform_sphere(25, 6, seed=6)
    w = np.full(25, 1 / 25)
    a = radial_shadows(ParticleSystem(heads), X)["a"]
    C = energy_rate_terms(ParticleSystem(heads), X)
    expected = -np.einsum("n,hn,kn->hk", w, a, a)
    off = ~np.eye(3, dtype=bool)
    # exact identity: matmul round-off relative to the largest term
    np.testing.assert_allclose(C[off], expected[off], atol=1e-13 * np.abs(C).max())
    Cflat = energy_rate_terms(ParticleSystem(heads, "flat"), X)
    assert np.abs(Cflat[off]).max() < 1e-15 * np.abs(Cflat).max() + 1e-300   # disjoint blocks: exact zeros
    # flat dynamics: per-head energies monotone (rates = self terms >= 0)
    assert np.all(ParticleSystem(heads, "flat").energy_rates(X) >= 0)


def test_condition8_readings():
    heads = orthogonal_block_heads(6, 2, strengths=1.0, beta=0.5)
    system = ParticleSystem(heads)
    X = uniform_sphere(40, 6, seed=7)
    c8 = radial_dominance(system, X)
    # the norm-bounded reading implies the exact one (|a| sum|u| >= a sum a)
    assert np.all(c8["exact"][c8["norm_bounded"]])
    r = radial_shadows(system, X)
    # |P u|^2 = |u|^2 - a^2 (Pythagoras), round-off only
    np.testing.assert_allclose(r["tangential"] ** 2, r["norm"] ** 2 - r["a"] ** 2, atol=1e-14)


def test_clustering_measures():
    X = np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]])
    c = clustering(X, threshold=0.99)
    assert c["n_clusters"] == 3 and c["min_inner"] == 0.0
    assert c["mean_inner"] == pytest.approx(2 / 12, abs=1e-15)   # one coincident pair, counted twice
    Y = vmf_mixture(400, [[0, 0, 1.0], [0, 0, -1.0]], kappas=2000.0, seed=1)
    assert clustering(Y, threshold=0.9)["n_clusters"] == 2
    with pytest.raises(ValueError, match="threshold must lie in"):
        clustering(X, threshold=2)


def test_entropy_rate_rejects_relu():
    system = ParticleSystem(scalar_heads([1.0], 3, kernel="relu"))
    with pytest.raises(ValueError, match="needs kernels with k > 0"):
        attention_entropy_rate(system, uniform_sphere(5, 3, seed=0))


def test_entropy_of_a_row_without_attention_mass_is_nan():
    """ReLU: a token whose weighted scores are all <= 0 attends to nothing; its entropy is undefined."""
    system = ParticleSystem(scalar_heads([1.0], 3, kernel="relu", normalization="softmax"))
    X = np.array([[0, 0, 1.0], [0, 0, -1.0], [0, 1.0, 0]])
    H = attention_entropy(system, X, np.array([0.5, 0.5, 0.0]))
    assert np.isnan(H[0, 2]) and np.all(np.isfinite(H[0, :2]))


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
    from meanfield.analysis.diagnostics import CLUSTERING_TREE_MAX_D, CLUSTERING_TREE_MIN_N
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
    with pytest.raises(ValueError, match="X must be finite; received 1 non-finite"):
        clustering(np.where(np.arange(30).reshape(10, 3) == 4, np.nan, X))
    with pytest.raises(ValueError, match="rows of X must be unit vectors"):
        clustering(X * np.sqrt(1 + 1e-10), method="tree")
    with pytest.raises(ValueError, match="threshold must be < 1"):
        clustering(X, 1.0, method="tree")
    assert clustering(X, 1.0, method="direct")["n_clusters"] == 10
    big = np.tile(X, (20_001, 1))                           # n = 200 010 > CLUSTERING_DIRECT_MAX_N
    with pytest.raises(ValueError, match=r"method='direct'\) of X with n = 200010 .* use method='tree'"):
        clustering(big, method="direct")
