"""Tests for meanfield.densities: constructors against closed forms, sampling against exact laws."""

import numpy as np
import pytest
from scipy.special import sph_harm_y
from scipy.stats import kstest

from meanfield import densities as D
from meanfield.core.sphere import SphereGrid, cartesian_to_angles

MU = np.array([0.0, 0.6, 0.8])
Z = np.array([0.0, 0.0, 1.0])


@pytest.fixture(scope="module")
def grid():
    return SphereGrid(48)


def _tokens(rng, n):
    X = rng.standard_normal((n, 3))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _vmf_z_cdf(k):
    """Exact CDF of t = cos(theta) for a vMF about z: density k e^{k t} / (2 sinh k) on [-1, 1]."""
    return lambda t: np.expm1(k * (t + 1.0)) / np.expm1(2.0 * k)


def test_mass_one_for_every_constructor(grid, rng):
    X = _tokens(rng, 50)
    w = rng.uniform(size=50)
    w /= w.sum()
    rhos = [D.uniform_density(grid), D.perturbed_uniform(grid, {(1, 0): 0.1, (3, 2): 0.02 - 0.01j}),
            D.vmf_density(grid, MU, 3.0), D.vmf_density(grid, MU, 0.0), D.vmf_density(grid, MU, 1e4),
            D.vmf_mixture_density(grid, [MU, Z], [2.0, 30.0], [0.3, 0.7], floor=0.1),
            D.density_from_particles(grid, X), D.density_from_particles(grid, X, w, kappa=np.inf),
            D.normalize(grid, 3.0 * D.vmf_density(grid, MU, 5.0))]
    for rho in rhos:
        # rho_00 is set exactly to 1/sqrt(4 pi); 1e-14 allows one rounding of the product
        assert abs(rho[0] * np.sqrt(4 * np.pi) - 1.0) < 1e-14
        assert np.array_equal(D.check_density(grid, rho), rho)


@pytest.mark.parametrize("kappa", [2.0, 10.0])
def test_vmf_matches_closed_form(grid, kappa):
    # the Funk-Hecke coefficients a_l = i_l/i_0 at l = 49 are < 1e-25 for kappa <= 10, so the
    # truncation tail is far below 1e-12; ducc0 point evaluation is accurate to 1e-13 relative
    rho = grid.synthesis(D.vmf_density(grid, MU, kappa))
    exact = kappa / (4 * np.pi * np.sinh(kappa)) * np.exp(kappa * grid.nodes @ MU)
    assert np.max(np.abs(rho - exact)) < 1e-12 * np.max(exact)


def test_vmf_large_kappa_finite():
    g = SphereGrid(64)
    for kappa in [2000.0, 1e4]:
        a = D.vmf_density(g, MU, kappa)
        assert np.all(np.isfinite(a))  # exp-scaled Bessel ratios cannot overflow
        assert abs(a[0] * np.sqrt(4 * np.pi) - 1.0) < 1e-14  # rho_00 set exactly
    # for large kappa a_l ~ exp(-l(l+1)/(2 kappa)): at l = 64, kappa = 2000 that is 0.353 (+-2%)
    assert abs(D.vmf_multiplier(64, 2000.0)[64] / np.exp(-64 * 65 / 4000) - 1.0) < 0.02


def test_perturbed_uniform_synthesis(grid):
    pert = {(1, 0): 0.05, (2, 1): 0.03 - 0.02j, (5, 3): 0.01j}
    rho = grid.synthesis(D.perturbed_uniform(grid, pert))
    loc = cartesian_to_angles(grid.nodes.reshape(-1, 3))
    exact = np.full(loc.shape[0], 1.0 / (4 * np.pi))
    for (l, m), eps in pert.items():
        y = eps * sph_harm_y(l, m, loc[:, 0], loc[:, 1])
        exact += (y + np.conj(y)).real if m > 0 else y.real
    # exact synthesis of a band-limited field; 1e-13 is a few hundred roundings of O(1) terms
    assert np.max(np.abs(rho.ravel() - exact)) < 1e-13


def test_density_from_particles(grid, rng):
    g = SphereGrid(12)
    X = _tokens(rng, 40)
    w = rng.uniform(size=40)
    w /= w.sum()
    a = D.density_from_particles(g, X, w, kappa=np.inf)
    loc = cartesian_to_angles(X)
    direct = np.array([np.sum(w * np.conj(sph_harm_y(l, m, loc[:, 0], loc[:, 1])))
                       for l, m in zip(g.l_index, g.m_index)])
    # ducc0's adjoint synthesis is accurate to epsilon = 1e-13 relative; 1e-12 leaves margin
    assert np.max(np.abs(a - direct)) < 1e-12
    b = D.density_from_particles(g, X, w, kappa=20.0)
    # finite kappa multiplies by a_l = i_l/i_0 (a_0 = 1): mass 1 exactly and same direction
    assert abs(b[0] * np.sqrt(4 * np.pi) - 1.0) < 1e-14
    assert np.allclose(b, D.vmf_multiplier(12, 20.0)[g.l_index] * a, rtol=0, atol=1e-15)
    # the default kernel is resolved (a_lmax ~ 1e-14), so the KDE is nonnegative to roundoff, even
    # for a single point (the worst case: measured <= 1.3e-14 for lmax <= 256); 1e-12 = sampling limit
    for Y in (X, Z[None]):
        assert D.oversampled_negative_mass(grid, D.density_from_particles(grid, Y)) <= 1e-12


@pytest.mark.parametrize("method", ["iid", "stratified"])
def test_sampling_matches_vmf(grid, method):
    kappa, n = 10.0, 4000
    for mu in (Z, MU):
        X = D.sample_particles(grid, D.vmf_density(grid, mu, kappa), n, method, seed=7)
        assert X.shape == (n, 3)
        assert np.max(np.abs(np.linalg.norm(X, axis=1) - 1.0)) < 1e-14  # unit by construction
        # E x = (coth k - 1/k) mu; per-coordinate variance <= E|x - Ex|^2 = 1 - |Ex|^2: 4 std errors
        mean = 1.0 / np.tanh(kappa) - 1.0 / kappa
        se = np.sqrt((1.0 - mean ** 2) / n)
        assert np.max(np.abs(X.mean(axis=0) - mean * mu)) < 4 * se
    # Kolmogorov-Smirnov against the exact law of cos(theta); p > 1e-3 fails by chance 0.1%
    # (seed fixed, so the test is deterministic)
    assert kstest(X @ MU, _vmf_z_cdf(kappa)).pvalue > 1e-3


def test_stratified_has_lower_variance():
    g = SphereGrid(16)
    rho = D.vmf_density(g, Z, 4.0)
    n, seeds = 200, range(50)
    var = {m: np.var([D.sample_particles(g, rho, n, m, seed=s)[:, 2].mean() for s in seeds])
           for m in ("iid", "stratified")}
    # systematic allocation over ~1000 cells removes the between-cell part of the variance
    # (for a smooth density nearly all of it); 0.5 is far above the expected ratio (~0.01)
    # and far below 1, the value for no gain, given the ~20% noise of a 50-sample variance
    assert var["stratified"] / var["iid"] < 0.5


def test_negative_density_raises_and_clips():
    g = SphereGrid(8)
    eps = 0.3  # rho = A + B z with A = 1/(4 pi), B = eps sqrt(3/(4 pi)) > A: negative near z = -1
    rho = D.perturbed_uniform(g, {(1, 0): eps})
    A, B = 1 / (4 * np.pi), eps * np.sqrt(3 / (4 * np.pi))
    exact = 2 * np.pi * B * (1 - A / B) ** 2 / 2  # 2 pi int_{-1}^{-A/B} -(A + B z) dz
    neg = D.oversampled_negative_mass(g, rho)
    # quadrature of a kinked function on the 2x oversampled grid: ~1e-3 relative accuracy
    assert abs(neg - exact) < 1e-2 * exact
    with pytest.raises(ValueError, match=f"negative mass {neg:.3e}"):
        D.sample_particles(g, rho, 10)
    with pytest.warns(RuntimeWarning, match="clipping negative mass"):
        X = D.sample_particles(g, rho, 500, "stratified", seed=0, negative="clip")
    # clipped law lives where A + B z > 0, i.e. z > -A/B (exact support; tolerance 0)
    assert np.all(X[:, 2] > -A / B)


def test_bad_inputs(grid):
    rho = D.vmf_density(grid, MU, 2.0)
    bad = [
        (lambda: D.vmf_density(grid, [1.0, 1.0, 0.0], 1.0), "mu"),
        (lambda: D.vmf_density(grid, MU, -1.0), "kappa"),
        (lambda: D.vmf_density(grid, MU, np.nan), "kappa"),
        (lambda: D.vmf_density(grid, MU, np.inf), "kappa"),
        (lambda: D.vmf_mixture_density(grid, [MU, Z], 1.0, [0.5, 0.6]), "weights"),
        (lambda: D.vmf_mixture_density(grid, [MU, Z], 1.0, floor=1.5), "floor"),
        (lambda: D.vmf_mixture_density(grid, [MU, Z], [1.0, 2.0, 3.0]), "kappas"),
        (lambda: D.perturbed_uniform(grid, {(0, 0): 0.1}), "perturbations"),
        (lambda: D.perturbed_uniform(grid, {(2, 3): 0.1}), "perturbations"),
        (lambda: D.perturbed_uniform(grid, {(2, 0): 0.1j}), "perturbations"),
        (lambda: D.density_from_particles(grid, np.ones((3, 2))), "X"),
        (lambda: D.density_from_particles(grid, np.eye(3), [0.5, 0.5, 0.5]), "w"),
        (lambda: D.density_from_particles(grid, np.eye(3), kappa=-2.0), "kappa"),
        (lambda: D.sample_particles(grid, rho, 0), "n"),
        (lambda: D.sample_particles(grid, rho, 5, method="sobol"), "method"),
        (lambda: D.sample_particles(grid, rho, 5, negative="ignore"), "negative"),
        (lambda: D.sample_particles(grid, 2 * rho, 5), "rho_lm"),
        (lambda: D.check_density(grid, rho[:-1], name="rho0_lm"), "rho0_lm"),
        (lambda: D.check_density(grid, np.full_like(rho, np.nan)), "rho_lm"),
        (lambda: D.oversampled_negative_mass(grid, rho, oversample=0), "oversample"),
        (lambda: D.normalize(grid, -rho), "rho_lm"),
    ]
    for call, name in bad:
        with pytest.raises(ValueError, match=name):
            call()
    # normalize=True rescales explicitly instead of raising (2 rho has mass 2)
    X = D.sample_particles(grid, 2 * rho, 5, seed=0, normalize=True)
    assert X.shape == (5, 3)
