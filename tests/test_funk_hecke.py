"""Funk-Hecke multipliers (meanfield.core.funk_hecke) and the zonal operator (meanfield.core.zonal)."""

import numpy as np
import pytest
from scipy.special import spherical_in

import meanfield as mf
from meanfield.core.densities import vmf_mixture_density
from meanfield.core.funk_hecke import funk_hecke_multipliers
from meanfield.core.heads import Head, scalar_heads
from meanfield.core.sphere import SphereGrid
from meanfield.core.zonal import GridSpace, ZonalOperator, zonal_multipliers


def test_exp_closed_form_vs_quadrature():
    a = 2.5
    closed = funk_hecke_multipliers(25, exp_rate=a)
    np.testing.assert_array_equal(closed, 4 * np.pi * spherical_in(np.arange(26), a))
    quad = funk_hecke_multipliers(25, g=lambda t: np.exp(a * t), n_nodes=60)
    # 60 Gauss-Legendre nodes per half for an entire function of modest type: round-off (~1e-16)
    np.testing.assert_allclose(quad, closed, rtol=0, atol=1e-14 * closed.max())


def test_quadrature_is_exact_for_polynomials():
    """c_l[P_j] = 4 pi / (2 l + 1) delta_lj: the default rule (lmax + 8 nodes per half) is exact for
    polynomials of degree < 2 (lmax + 8), and for piecewise ones with a kink at 0."""
    lmax = 12
    for j in (0, 3, 12):
        c = funk_hecke_multipliers(lmax, g=lambda t: np.polynomial.legendre.legval(t, np.eye(lmax + 1)[j]))
        ref = np.where(np.arange(lmax + 1) == j, 4 * np.pi / (2 * j + 1), 0.0)
        np.testing.assert_allclose(c, ref, rtol=0, atol=1e-14)        # exact quadrature: round-off only
    # relu(t): c_l = 2 pi int_0^1 t P_l; c_0 = pi, c_1 = 2 pi / 3, c_3 = 0 (known values)
    c = funk_hecke_multipliers(4, g=lambda t: np.maximum(t, 0.0))
    np.testing.assert_allclose(c[[0, 1, 3]], [np.pi, 2 * np.pi / 3, 0.0], rtol=0, atol=1e-14)


def test_funk_hecke_theorem_on_a_grid():
    """int g(<x, y>) Y_lm(y) dy = c_l Y_lm(x), by grid quadrature (the coefficient convention of
    SphereGrid), for a sigmoid profile."""
    grid = SphereGrid(60)
    nodes, w = grid.nodes.reshape(-1, 3), grid.weights.reshape(-1)
    g = lambda t: 1.0 / (1.0 + np.exp(-(2.0 * t - 0.3)))          # noqa: E731
    c = funk_hecke_multipliers(6, g=g, n_nodes=80)
    x = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    for ell, m in [(0, 0), (2, 1), (5, 3), (6, 0)]:
        f_lm = np.zeros(grid.nalm, complex)
        f_lm[grid.index(ell, m)] = 1.0
        Y = grid.synthesis(f_lm).reshape(-1)                             # a real harmonic of degree l
        lhs = w @ (g(nodes @ x) * Y)
        rhs = c[ell] * grid.evaluate(f_lm, x[None, :])[0]
        # the grid integrates degree <= 2 * 60 exactly; the profile's Legendre tail there is ~1e-40:
        # round-off of a 7000-node sum, 1e-13
        assert abs(lhs - rhs) <= 1e-13, (ell, m, lhs, rhs)


def test_argument_checks():
    with pytest.raises(ValueError, match="lmax must be an integer >= 0; received -1"):
        funk_hecke_multipliers(-1, exp_rate=1.0)
    with pytest.raises(ValueError, match="exactly one of g"):
        funk_hecke_multipliers(3)
    with pytest.raises(ValueError, match="n_nodes must be an integer >= lmax \\+ 1 = 4; received 2"):
        funk_hecke_multipliers(3, g=np.cos, n_nodes=2)
    with pytest.raises(ValueError, match="zonal"):
        zonal_multipliers(Head(np.diag([1.0, 2.0, 3.0]), np.eye(3)), 4)
    with pytest.raises(ValueError, match="overflows"):
        zonal_multipliers(scalar_heads([1.0], 3, beta=900.0, normalization="softmax")[0], 4)


def test_operator_groups_heads_by_normalization():
    heads = scalar_heads([1.0, -0.5], 3, beta=2.0) + scalar_heads([0.7], 3, beta=3.0, normalization="softmax")
    op = ZonalOperator(heads, 10)
    assert op.normalized == (2,)
    # the mean heads' potentials summed once (exact: two additions of the same numbers)
    np.testing.assert_array_equal(op.linear_potential, op.multipliers[0]["potential"] + op.multipliers[1]["potential"])
    assert ZonalOperator(heads[2:], 10).linear_potential is None
    with pytest.raises(ValueError, match="zonal"):
        ZonalOperator((Head(np.diag([1.0, 2.0, 3.0]), np.eye(3)),), 4)
    with pytest.raises(ValueError, match="d = 3"):
        ZonalOperator(scalar_heads([1.0], 4), 4)


def test_operator_entropy_of_the_uniform_density():
    """Uniform rho: Z = c_0 / (4 pi), Q = c_0[k log k] / (4 pi) everywhere, so H = log Z - Q / Z is a
    constant; for exp it is log i_0(a) - a i_1(a) / i_0(a) (a = beta lambda)."""
    heads = scalar_heads([1.0, 0.5], 3, beta=2.0) + scalar_heads([1.0], 3, beta=2.0, kernel="sigmoid",
                                                                  kernel_params={"bias": -0.5})
    grid = SphereGrid(8)
    op = ZonalOperator(heads, 8, l_index=grid.l_index)
    rho_lm = np.zeros(grid.nalm, complex)
    rho_lm[0] = 1.0 / np.sqrt(4 * np.pi)
    H = op.entropies(rho_lm, GridSpace(grid))
    a = np.array([2.0, 1.0])
    exact = np.log(spherical_in(0, a)) - a * spherical_in(1, a) / spherical_in(0, a)
    # closed forms through two transforms: round-off, 1e-13
    np.testing.assert_allclose(H[:2], exact[:, None, None] * np.ones((2,) + grid.shape), rtol=1e-13)
    t, wt = np.polynomial.legendre.leggauss(200)
    k = 1.0 / (1.0 + np.exp(-(2.0 * t - 0.5)))
    Z, Q = 0.5 * wt @ k, 0.5 * wt @ (k * np.log(k))               # int over S^2 / (4 pi) = mean over t
    np.testing.assert_allclose(H[2], np.log(Z) - Q / Z, rtol=1e-13)   # quadratures at round-off


def test_operator_velocity_in_two_spaces_agree():
    """The same operator on the grid (vectors first) and at points (vectors last) gives one field."""
    heads = scalar_heads([1.0, -0.4], 3, beta=2.0) + scalar_heads([0.8], 3, beta=1.5, kernel="sigmoid",
                                                                   normalization="softmax")
    grid = SphereGrid(16)
    op = ZonalOperator(heads, 16, l_index=grid.l_index)
    rho_lm = vmf_mixture_density(grid, np.eye(3)[:2], 3.0, floor=0.2)
    v_grid = grid.to_cartesian(op.velocity(rho_lm, GridSpace(grid))).reshape(-1, 3)
    from meanfield.core.zonal import PointSpace
    pts = grid.prepare_points(grid.nodes.reshape(-1, 3), 1e-14)
    v_pts = op.velocity(rho_lm, PointSpace(pts))
    # two band-limited evaluations of the same field (ducc0 at 1e-14 accuracy): 1e-12 of the largest
    np.testing.assert_allclose(v_pts, v_grid, rtol=0, atol=1e-12 * np.abs(v_grid).max())


def test_truncation_level_and_the_resolution_warning():
    """The PDE's check (first neglected potential multiplier / largest) for every kernel: it warns
    for a sigmoid head whose kernel lmax cannot resolve, and refuses a far too small lmax."""
    import warnings

    from meanfield.core.zonal import truncation_level
    from meanfield.models.continuum import ContinuumPDE, KernelResolutionWarning

    h = scalar_heads([1.0], 3, beta=20.0, kernel="sigmoid", kernel_params={"bias": 0.5})[0]   # b = 0: odd l vanish
    levels = [truncation_level(h, L) for L in (10, 30, 60)]
    # exponential decay (measured 6e-4, 1e-5, 7e-8): each step of 20-30 degrees gains > 10x
    assert levels[0] > 10 * levels[1] > 100 * levels[2] > 0
    with pytest.warns(KernelResolutionWarning, match="truncates the sigmoid kernel"):
        ContinuumPDE((h,), lmax=30)
    with pytest.raises(ValueError, match="far too small"):
        ContinuumPDE((h,), lmax=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelResolutionWarning)
        ContinuumPDE(scalar_heads([1.0], 3, beta=1.0, kernel="sigmoid"), lmax=40)   # resolved: silent


@pytest.mark.parametrize("lambdas, beta", [([1.0], 6.0), ([1.0, -0.4], 3.0), ([2.0], 10.0)])
def test_required_lmax_pde_criterion_is_where_the_pde_stops_warning(lambdas, beta):
    import warnings

    from meanfield.core.zonal import required_lmax, truncation_level
    from meanfield.models.continuum import KernelResolutionWarning

    heads = mf.scalar_heads(lambdas, 3, beta=beta)
    L = required_lmax(heads, 1e-10, criterion="pde")
    # exact statement of the rule: resolved at L, not at L - 1 (levels are plain ratios: no tolerance)
    assert max(truncation_level(h, L) for h in heads) <= 1e-10 < max(truncation_level(h, L - 1) for h in heads)
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelResolutionWarning)
        mf.ContinuumPDE(heads, L, kernel_tol=1e-10)                  # accepted silently
    with pytest.warns(KernelResolutionWarning):
        mf.ContinuumPDE(heads, L - 1, kernel_tol=1e-10)
    with pytest.raises(ValueError, match="criterion must be one of"):
        required_lmax(heads, 1e-10, criterion="grid")
