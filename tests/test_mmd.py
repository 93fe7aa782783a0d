"""Exact kernel distance (analysis/mmd.py): the i.i.d. closed form of MODEL.md section 4, the kernel
double sum, weights and input checks."""

import numpy as np
import pytest

from meanfield.analysis.mmd import mmd_iid_expectation, mmd_particles_field, mmd_weights
from meanfield.core import densities as dn
from meanfield.core.sphere import SphereGrid


def bumps(lmax):
    grid = SphereGrid(lmax)
    return grid, dn.vmf_mixture_density(grid, [[0, 0, 1], [0, 1, 0]], [3, 6], floor=0.3)


@pytest.mark.parametrize("kernel", ["sobolev", "exp"])
def test_iid_expectation_closed_form(kernel):
    # E MMD^2 = (1/n) sum_l a_l [(2l+1)/(4 pi) - sum_m |rho_lm|^2]; 400 seeds of n = 200 i.i.d.
    # samples; the mean must lie within 3 standard errors of the closed form (fails ~0.3 % of the
    # time for a Gaussian mean; the seeds are fixed, so the test is deterministic).
    grid, rho = bumps(12)
    n, seeds = 200, 400
    vals = np.array([mmd_particles_field(dn.sample_particles(grid, rho, n, seed=s), rho, grid,
                                         kernel=kernel, s=1.5, beta=2.0).cost for s in range(seeds)])
    expected = mmd_iid_expectation(grid, rho, n, kernel=kernel, s=1.5, beta=2.0)
    se = vals.std(ddof=1) / np.sqrt(seeds)
    assert abs(vals.mean() - expected) < 3 * se
    assert se < 0.1 * expected       # the test has power: the standard error is small against the mean


def test_exp_kernel_equals_the_double_sum():
    # For K(x, y) = exp(beta <x, y>) the spectral MMD^2 truncated at L = 40 equals
    # sum_ij w_i w_j K(x_i, x_j) - 2 sum_i w_i (K rho)(x_i) + <rho, K rho>, where the two density terms
    # are exact spectrally (rho has degree 10).  The truncated tail is sum_{l>40} 4 pi i_l(1)(2l+1)/pi
    # ~ 1e-50, so only round-off (~1e-15 relative on O(1) terms) separates them: 1e-12 absolute.
    grid = SphereGrid(40)
    rho = dn.vmf_mixture_density(grid, [[1, 0, 0]], [3], floor=0.5)
    rho[grid.l_index > 10] = 0.0
    X = dn.sample_particles(grid, rho, 60, seed=0)
    w = np.random.default_rng(0).random(60) + 0.2
    w /= w.sum()
    res = mmd_particles_field(X, rho, grid, w, kernel="exp", beta=1.0)
    a_l = mmd_weights(40, "exp", beta=1.0)
    k_rho = grid.multiply_degree(rho, a_l)
    direct = w @ np.exp(X @ X.T) @ w - 2 * w @ grid.evaluate(k_rho, X) + grid.inner(rho, k_rho)
    assert abs(res.cost - direct) < 1e-12
    assert res.method == "mmd" and res.metric == "exp" and res.info["truncation_bound"] < 1e-40


def test_zero_for_the_measure_itself_and_weights():
    # A measure whose low modes equal rho's: the 4 vertices of a regular tetrahedron, equal weights,
    # reproduce the uniform density's degree-1 coefficients exactly (their mean is 0), and
    # MMD^2 is the l >= 2 part only: sum_{l>=2} a_l sum_m |mu_lm|^2 (a closed form for l = 2: 0 too,
    # a tetrahedron is a spherical 2-design).
    grid = SphereGrid(2)
    rho = dn.uniform_density(grid)
    T = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) / np.sqrt(3)
    res = mmd_particles_field(T, rho, grid)
    assert res.cost < 1e-28              # round-off of the adjoint transform, squared
    assert mmd_weights(3, "sobolev", s=2)[1] == pytest.approx(1 / 9, rel=1e-15)  # (1 + 2)^-2


def test_bad_inputs():
    grid, rho = bumps(6)
    X = dn.sample_particles(grid, rho, 20, seed=0)
    with pytest.raises(ValueError, match="kernel must be one of"):
        mmd_particles_field(X, rho, grid, kernel="gauss")
    with pytest.raises(ValueError, match="s must be a finite number > 1"):
        mmd_particles_field(X, rho, grid, s=1.0)
    with pytest.raises(ValueError, match="beta must be"):
        mmd_particles_field(X, rho, grid, kernel="exp", beta=-1.0)
    with pytest.raises(ValueError, match="mass 1"):
        mmd_particles_field(X, rho * 2, grid)
    with pytest.raises(ValueError, match="shape \\(n, 3\\)"):
        mmd_particles_field(np.eye(4), rho, grid)
    with pytest.raises(ValueError, match="n must be an integer"):
        mmd_iid_expectation(grid, rho, 0)
