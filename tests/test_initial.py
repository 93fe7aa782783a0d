"""Initial conditions: shapes, unit norms, Gram structure, seeding, input checks."""

import numpy as np
import pytest

from meanfield.core.initial import equiangular, orthonormal, uniform_sphere, vmf_mixture, von_mises_fisher


@pytest.mark.parametrize("n, d, gamma", [(5, 5, 0.0), (5, 4, -0.25), (3, 7, 0.6), (10, 10, 0.9)])
def test_equiangular_gram(n, d, gamma):
    X = equiangular(n, d, gamma, seed=3)
    G = X @ X.T
    # eigen-decomposition of a small Gram matrix: round-off ~1e-15
    np.testing.assert_allclose(G, (1 - gamma) * np.eye(n) + gamma, atol=1e-13)


def test_equiangular_needs_dimension():
    with pytest.raises(ValueError, match="needs d >= 5"):
        equiangular(5, 4, 0.0)
    with pytest.raises(ValueError, match="gamma must lie in"):
        equiangular(5, 5, -0.5)


def test_vmf_mean_and_seeding():
    mu = np.array([0, 0.6, 0.8])
    X = von_mises_fisher(20000, mu, 10.0, seed=1)
    # E<x, mu> = coth(k) - 1/k for the vMF law on S^2; std of the sample mean ~ 0.1/sqrt(2e4) ~ 7e-4
    assert np.mean(X @ mu) == pytest.approx(1 / np.tanh(10) - 0.1, abs=4e-3)
    np.testing.assert_array_equal(von_mises_fisher(5, mu, 3.0, seed=2), von_mises_fisher(5, mu, 3.0, seed=2))
    assert np.abs(np.linalg.norm(uniform_sphere(50, 6, seed=0), axis=1) - 1).max() < 1e-15
    with pytest.raises(ValueError, match="mu must be a unit vector"):
        von_mises_fisher(5, [0, 0, 2.0], 1.0)
    with pytest.raises(ValueError, match="kappa must be"):
        von_mises_fisher(5, mu, -1.0)
    with pytest.raises(ValueError, match="weights must be 2"):
        vmf_mixture(5, [[0, 0, 1.0], [1.0, 0, 0]], 1.0, weights=[0.5, 0.6])


def test_orthonormal():
    X = orthonormal(3, 5, seed=1)
    np.testing.assert_allclose(X @ X.T, np.eye(3), atol=1e-14)  # QR round-off
    with pytest.raises(ValueError, match="n must be <= d"):
        orthonormal(6, 5)
