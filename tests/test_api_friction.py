"""API friction met while scripting as a researcher (issue 14, item 9): per-head growth rates, continuum
accessors, zonal densities at the top level, ParticleSystem(lmax=...), SpectralSum default weights,
the KernelResolutionWarning's text and location, the Xdot check."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

import meanfield as mf
from meanfield.analysis.stability import growth_rate, growth_rate_heads
from meanfield.core.heads import Head
from meanfield.models.continuum import KernelResolutionWarning
from meanfield.models.fastsum import SpectralSum
from meanfield.core.options import SaveAt


def _heads(betas, lambdas, normalization="mean"):
    return tuple(Head(l * np.eye(3), l * np.eye(3), beta=b, normalization=normalization)
                 for b, l in zip(betas, lambdas))


def test_growth_rate_heads_is_growth_rate_for_one_beta():
    l = np.arange(0, 8)
    for norm in ("mean", "softmax"):
        # the same formula term by term: equal to round-off (1e-13 relative)
        np.testing.assert_allclose(growth_rate_heads(l, mf.scalar_heads([1.0, -0.5], 3, 2.0, normalization=norm),
                                                     nu=0.1),
                                   growth_rate(l, [1.0, -0.5], 2.0, norm, nu=0.1), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_growth_rate_heads_with_per_head_beta_matches_the_linearized_pde(normalization):
    heads = _heads([0.5, 3.0], [1.0, 0.7], normalization)
    pde = mf.ContinuumPDE(heads, lmax=24, kernel_tol=1e-6)
    grid, eps = pde.grid, 1e-7
    for l in (1, 2, 3):
        rho = np.zeros(grid.nalm, complex)
        rho[(grid.l_index == 0)] = 1 / np.sqrt(4 * np.pi)
        k = np.flatnonzero((grid.l_index == l) & (grid.m_index == 0))[0]
        rho[k] = eps
        rate = pde.coefficients(pde.rhs(0.0, pde.state(rho)))[k].real / eps
        # linearization error O(eps) relative (1e-7) plus quadrature round-off / eps (~1e-9): 1e-5 relative
        np.testing.assert_allclose(rate, growth_rate_heads(l, heads), rtol=1e-5)


def test_growth_rate_heads_refuses_what_has_no_closed_form():
    relu = Head(np.eye(3), np.eye(3), kernel="relu")
    with pytest.raises(ValueError, match=r"heads\[1\] must be a zonal exp head"):
        growth_rate_heads([1], (mf.scalar_heads([1.0], 3)[0], relu))
    assert "growth_rate_heads" in mf.theory.__all__


def test_continuum_accessors_from_a_trajectory():
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta=1.0), lmax=12, kernel_tol=1e-6)
    rho0 = mf.zonal_density(pde.grid, legendre=[1.0, 0.5])            # (1 + mu / 2) / (4 pi)
    tr = mf.solve_continuum(pde, rho0, 0.1, save=SaveAt(observe=False))
    C = pde.trajectory_coefficients(tr)
    assert C.shape == (tr.t.size, pde.grid.nalm)
    np.testing.assert_array_equal(C[0], rho0)                          # the start as recorded (tolerance 0)
    pts = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])
    # ducc0 point synthesis at epsilon 1e-13: values to 1e-12
    np.testing.assert_allclose(pde.density_at(tr.y[0], pts), np.array([1.5, 0.5, 1.0]) / (4 * np.pi), atol=1e-12)
    np.testing.assert_allclose(pde.density_at(C[-1], pts), pde.density_at(tr.y[-1], pts), rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match=r"traj must be a Trajectory of this PDE"):
        pde.trajectory_coefficients(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="points must be unit vectors"):
        pde.density_at(C[0], 2 * pts)


def test_relu_heads_use_spectral_sums_with_lmax():
    heads = (Head(np.eye(3), np.eye(3), kernel="relu"),)
    with pytest.raises(ValueError, match="pass lmax"):
        mf.ParticleSystem(heads, summation="spectral")
    system = mf.ParticleSystem(heads, summation="spectral", lmax=64)
    assert system.spectral_lmax == 64
    direct = mf.ParticleSystem(heads, summation="direct")
    assert direct.spectral_lmax is None
    X = mf.initial.uniform_sphere(200, 3, seed=1)
    v, ref = system.velocity(X), direct.velocity(X)
    # ReLU multipliers decay like l^-3: at lmax 64 the velocity is good to about 1e-3 of its size
    # (benchmarks/RESULTS.md measures the algebraic convergence); 1e-2 checks the sums are the same field
    assert np.max(np.abs(v - ref)) <= 1e-2 * np.max(np.abs(ref))
    with pytest.raises(ValueError, match="lmax must be an integer >= 2 or None"):
        mf.ParticleSystem(heads, summation="spectral", lmax=1)
    assert mf.ParticleSystem(mf.scalar_heads([1.0], 3), summation="spectral").spectral_lmax >= 2


def test_spectral_sum_velocity_weights_default_to_uniform():
    heads = mf.scalar_heads([1.0], 3, beta=2.0)
    s = SpectralSum(heads, 1e-10)
    X = mf.initial.uniform_sphere(50, 3, seed=2)
    # the same call with the weights written out: identical (tolerance 0)
    np.testing.assert_array_equal(s.velocity(X), s.velocity(X, np.full(50, 1 / 50)))


def test_kernel_resolution_warning_says_what_it_measures_and_where():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta=3.0), lmax=8)
    (w,) = [c for c in caught if c.category is KernelResolutionWarning]
    assert "first neglected Funk-Hecke multiplier (degree lmax + 1)" in str(w.message)
    assert w.filename == __file__                       # this test's line, not <string> or the package
    code = "import meanfield as mf\nmf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta=3.0), lmax=8)\n"
    err = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True,
                         timeout=120).stderr
    assert err.startswith("<string>:2: KernelResolutionWarning"), err


def test_energy_rates_checks_xdot():
    system = mf.ParticleSystem(mf.scalar_heads([1.0], 3))
    X = mf.initial.uniform_sphere(10, 3, seed=0)
    with pytest.raises(ValueError, match=r"Xdot must be a finite real array of shape \(10, 3\); received shape \(9, 3\)"):
        system.energy_rates(X, np.zeros((9, 3)))
    bad = np.zeros((10, 3))
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="Xdot must be a finite real array"):
        system.energy_rates(X, bad)
