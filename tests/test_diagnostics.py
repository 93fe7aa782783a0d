"""Particle diagnostics: entropies, per-head energy terms, radial shadows (clustering: test_clustering.py).

The entropy identity (MODEL.md section 1) is a case of the closed-form table, tests/closed_forms.py.
"""

import numpy as np
import pytest

from meanfield.analysis.diagnostics import (
    attention_entropy,
    attention_entropy_rate,
    dissipation,
    energy_rate_terms,
    radial_dominance,
    radial_shadows,
)
from meanfield.core.heads import orthogonal_block_heads, random_symmetric_heads, scalar_heads
from meanfield.core.initial import equiangular, uniform_sphere
from meanfield.models.particles import ParticleSystem


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
