"""Batched particle systems (models/batched.py) and the batch clustering measures (analysis/ensembles.py)."""

import numpy as np
import pytest

import meanfield as mf
from meanfield.analysis import ensembles
from meanfield.core.heads import random_symmetric_heads, scalar_heads
from meanfield.core.options import StepControl
from meanfield.models.batched import BatchedSystem
from meanfield.models.particles import ParticleSystem


def _tokens(rng, B, n, d):
    X = rng.standard_normal((B, n, d))
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


# The batched sums are the same sums as ParticleSystem's, in another order of floating-point operations
# (batched matmul vs row chunks): agreement to a few ulps of velocities of size O(1); 1e-13 leaves margin.
SAME_SUMS = 1e-13


@pytest.mark.parametrize("kernel", ["exp", "relu", "sigmoid"])
@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_shared_heads_match_particle_system(rng, kernel, normalization):
    heads = random_symmetric_heads(4, 2, seed=3, beta=3.0, kernel=kernel, normalization=normalization)
    X = _tokens(rng, 5, 9, 4)
    V = BatchedSystem(heads).velocity(X)
    ps = ParticleSystem(heads, summation="direct")
    for b in range(5):
        np.testing.assert_allclose(V[b], ps.velocity(X[b]), rtol=0, atol=SAME_SUMS)


def test_large_beta_softmax_is_shifted_and_finite(rng):
    # beta = 650 is past the shift limit (600): the log-sum-exp shift keeps it finite and equal to the direct sums
    heads = scalar_heads([1.0], 3, beta=650.0, normalization="softmax")
    X = _tokens(rng, 3, 6, 3)
    V = BatchedSystem(heads).velocity(X)
    assert np.all(np.isfinite(V))
    ps = ParticleSystem(heads, summation="direct")
    for b in range(3):
        np.testing.assert_allclose(V[b], ps.velocity(X[b]), rtol=0, atol=SAME_SUMS)


def test_per_system_heads_match_particle_system(rng):
    per = [random_symmetric_heads(3, 2, seed=s, beta=2.0, normalization="softmax") for s in range(4)]
    X = _tokens(rng, 4, 7, 3)
    V = BatchedSystem(per).velocity(X)
    for b in range(4):
        np.testing.assert_allclose(V[b], ParticleSystem(per[b], summation="direct").velocity(X[b]),
                                   rtol=0, atol=SAME_SUMS)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_causal_token_moves_as_in_its_prefix_system(rng, normalization):
    heads = random_symmetric_heads(3, 2, seed=5, beta=2.0, normalization=normalization)
    X = _tokens(rng, 2, 8, 3)
    V = BatchedSystem(heads, causal=True).velocity(X)
    for b in range(2):
        for i in range(1, 8):                       # ParticleSystem needs n >= 2: prefixes of 2..8 tokens
            prefix = ParticleSystem(heads, summation="direct").velocity(X[b, :i + 1])
            np.testing.assert_allclose(V[b, i], prefix[i], rtol=0, atol=SAME_SUMS)


def test_integrate_drives_the_batch_like_each_system(rng):
    heads = scalar_heads([1.0, 0.5], 3, beta=2.0, normalization="softmax")
    X = _tokens(rng, 3, 10, 3)
    bs = BatchedSystem(heads)
    tr = mf.integrate(bs.rhs, X, (0.0, 1.0), method="rk4", step=StepControl(dt=0.05), retraction=bs.retraction)
    ps = ParticleSystem(heads, summation="direct")
    for b in range(3):
        one = mf.integrate(ps.rhs, X[b], (0.0, 1.0), method="rk4", step=StepControl(dt=0.05),
                           retraction=ps.retraction)
        # 20 RK4 steps of the same sums: round-off grows by a modest factor per step; 1e-12 is ~100 ulps
        np.testing.assert_allclose(tr.y_final[b], one.y_final, rtol=0, atol=1e-12)


def test_spectral_batch_matches_direct(rng):
    heads = scalar_heads([1.0], 3, beta=2.0)
    X = _tokens(rng, 2, 40, 3)
    direct = BatchedSystem(heads).velocity(X)
    spectral = BatchedSystem(heads, summation="spectral", kernel_tol=1e-12).velocity(X)
    # the spectral sums are accurate to `tolerance` relative to the aggregates (size ~ e^2); 1e-9 absolute
    # is that tolerance with the aggregate's scale and a margin for the transforms' round-off
    np.testing.assert_allclose(spectral, direct, rtol=0, atol=1e-9)


def test_bad_input_is_refused_by_name(rng):
    per = [random_symmetric_heads(3, 1, seed=s) for s in range(3)]
    with pytest.raises(ValueError, match=r"^X must have B = 3"):
        BatchedSystem(per).velocity(_tokens(rng, 4, 5, 3))
    with pytest.raises(ValueError, match=r"^X must have d = 3"):
        BatchedSystem(per).velocity(_tokens(rng, 3, 5, 4))
    with pytest.raises(ValueError, match=r"^causal must be False with summation='spectral'"):
        BatchedSystem(scalar_heads([1.0], 3), causal=True, summation="spectral")
    with pytest.raises(ValueError, match=r"^causal must be"):
        BatchedSystem(scalar_heads([1.0], 3), causal=1)
    mixed = [scalar_heads([1.0], 3, beta=1.0), scalar_heads([1.0], 3, beta=2.0)]
    with pytest.raises(ValueError, match=r"^heads\[1\]\[0\] must share beta"):
        BatchedSystem(mixed)
    with pytest.raises(ValueError, match=r"^summation must be one of"):
        BatchedSystem(scalar_heads([1.0], 3), summation="auto")
    with pytest.raises(ValueError, match=r"^X rows must be unit vectors"):
        BatchedSystem(scalar_heads([1.0], 3)).velocity(2 * _tokens(rng, 2, 4, 3))


def test_cluster_measures_on_known_configurations():
    e = np.eye(3)
    one = np.stack([np.tile(e[0], (6, 1)), np.concatenate([np.tile(e[0], (3, 1)), np.tile(e[1], (3, 1))])])
    # exact 0/1 configurations: the measures are exact counts, compared exactly (tolerance 0 is meaningful)
    np.testing.assert_array_equal(ensembles.one_cluster(one), [True, False])
    np.testing.assert_allclose(ensembles.pair_density(one), [1.0, 12 / 30], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(ensembles.cluster_counts(one), [1, 2])
    np.testing.assert_array_equal(ensembles.gram_rank(one), [1, 2])
    obs = ensembles.ensemble_observer()(0.0, one)
    assert obs["one_cluster"] == 0.5 and obs["median_clusters"] == 1.5


def test_flat_geometry_matches_particle_system(rng):
    heads = random_symmetric_heads(3, 2, seed=8, beta=0.5, normalization="softmax")
    X = 1.5 * rng.standard_normal((3, 7, 3))               # tokens off the sphere: flat dynamics, no projection
    bs = BatchedSystem(heads, geometry="flat")
    assert bs.retraction is None
    ps = ParticleSystem(heads, geometry="flat", summation="direct")
    for b in range(3):
        np.testing.assert_allclose(bs.velocity(X)[b], ps.velocity(X[b]), rtol=0, atol=SAME_SUMS)


def test_ensemble_measures_refuse_gram_matrices_beyond_the_limit(monkeypatch):
    from meanfield.analysis import ensembles
    X = np.tile(np.eye(3)[:2], (4, 1, 1))                 # B = 4 systems of n = 2 tokens
    monkeypatch.setattr(ensembles, "GRAM_MAX_BYTES", 8 * 4 * 2 * 2 - 1)
    with pytest.raises(ValueError, match="GRAM_MAX_BYTES"):
        ensembles.pair_density(X)
    monkeypatch.setattr(ensembles, "GRAM_MAX_BYTES", 8 * 4 * 2 * 2)
    assert ensembles.pair_density(X).tolist() == [0.0] * 4     # orthogonal pairs: exact zeros
