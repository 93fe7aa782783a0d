"""Tests of meanfield.core.sphere: conventions (locked against scipy and pyshtools), transforms,
calculus identities, point evaluation and its adjoint, dealiasing, spectral convergence, input checks.

Tolerances: transforms are exact in exact arithmetic here (band-limited data, exact quadrature),
so the bounds are a few hundred ulps of the data's scale unless stated otherwise.
"""

import numpy as np
import pytest
from scipy.special import gamma, sph_harm_y, spherical_in

from meanfield.core.sphere import SphereGrid, cartesian_to_angles, from_real, nalm_for, to_real


def random_alm(grid, rng, decay=0.0):
    """Random coefficients of a real field (m = 0 entries real), optionally decaying like l^-decay."""
    a = rng.standard_normal(grid.nalm) + 1j * rng.standard_normal(grid.nalm)
    a[grid.m_index == 0] = a[grid.m_index == 0].real
    return a / (1.0 + grid.l_index) ** decay


def random_points(rng, n):
    x = rng.standard_normal((n, 3))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def grid16():
    return SphereGrid(16)


# ----------------------------------------------------------------------------- conventions
@pytest.mark.parametrize("l, m", [(0, 0), (1, 0), (1, 1), (2, 1), (3, 2), (5, 5), (7, 3)])
def test_convention_matches_scipy_sph_harm_y(grid16, l, m):
    g = grid16
    T, P = np.meshgrid(g.theta, g.phi, indexing="ij")
    Y = sph_harm_y(l, m, T, P)  # orthonormal, Condon-Shortley phase included
    a = np.zeros(g.nalm, complex)
    a[g.index(l, m)] = 1.0
    f1 = g.synthesis(a)
    a[g.index(l, m)] = 1j
    fi = g.synthesis(a)
    # A real field stores m > 0 only: f = a Y_lm + conj(a Y_lm) = 2 Re(a Y_lm); m = 0 gives Y_l0.
    # Values are O(1); 1e-13 is ~500 ulps of the Legendre recursions (scipy and ducc0 differ there).
    if m == 0:
        assert np.max(np.abs(f1 - Y.real)) < 1e-13
        assert np.max(np.abs(fi)) < 1e-13  # imaginary part of an m = 0 coefficient is ignored
    else:
        assert np.max(np.abs(f1 - 2 * Y.real)) < 1e-13
        assert np.max(np.abs(fi + 2 * Y.imag)) < 1e-13


def test_grid_layout(grid16):
    g = grid16
    # GL rings north to south, equispaced longitudes from 0; exact layout facts, so 1e-15 / equality.
    assert g.theta.shape == (17,) and g.phi.shape == (34,) and np.all(np.diff(g.theta) > 0)
    x, w = np.polynomial.legendre.leggauss(17)
    assert np.max(np.abs(np.cos(g.theta) - x[::-1])) < 1e-15
    assert np.max(np.abs(g.ring_weights * g.nlon / (2 * np.pi) - w[::-1])) < 1e-15
    assert g.nalm == nalm_for(16) == 17 * 18 // 2
    assert g.index(3, 2) == int(np.flatnonzero((g.l_index == 3) & (g.m_index == 2))[0])
    # frames are orthonormal and tangent: pure geometry, rounding only
    n, et, ep = g.nodes, g.e_theta, g.e_phi
    for u, v, val in [(n, n, 1), (et, et, 1), (ep, ep, 1), (n, et, 0), (n, ep, 0), (et, ep, 0)]:
        assert np.max(np.abs(np.einsum("ijk,ijk->ij", u, v) - val)) < 1e-15
    # e_theta x e_phi = outward normal (right-handed frame)
    assert np.max(np.abs(np.cross(et, ep) - n)) < 1e-15


def test_real_vector_view(grid16):
    a = random_alm(grid16, np.random.default_rng(1))
    v = to_real(a)
    assert v.dtype == np.float64 and v.shape == (2 * grid16.nalm,)
    assert np.array_equal(v[0::2], a.real) and np.array_equal(v[1::2], a.imag)  # exact: a view
    assert np.array_equal(from_real(v), a) and np.shares_memory(from_real(v), a)
    with pytest.raises(ValueError, match="v must be a real 1-d array of even length"):
        from_real(np.zeros(5))


# ----------------------------------------------------------------------------- transforms, quadrature
@pytest.mark.parametrize("lmax", [7, 32, 63])
def test_analysis_inverts_synthesis(lmax):
    g = SphereGrid(lmax)
    a = random_alm(g, np.random.default_rng(lmax))
    back = g.analysis(g.synthesis(a))
    # O(1) coefficients, exact quadrature: rounding grows ~ sqrt(nalm) ulps; 1e-13 at lmax 63.
    assert np.max(np.abs(back - a)) < 1e-13
    assert np.all(back[g.m_index == 0].imag == 0)  # real field: m = 0 stays real exactly


def test_quadrature_weights_and_polynomials():
    g = SphereGrid(8)  # exact for polynomials of degree <= min(2 nlat - 1, nlon - 1) = 17
    assert abs(g.weights.sum() - 4 * np.pi) < 1e-13  # 16 ulps of 4 pi
    assert g.weights.shape == g.shape
    x, y, z = np.moveaxis(g.nodes, -1, 0)
    moment = lambda a, b, c: 2 * gamma(a + 0.5) * gamma(b + 0.5) * gamma(c + 0.5) / gamma(a + b + c + 1.5)
    for a, b, c in [(0, 0, 0), (1, 0, 0), (0, 0, 4), (2, 2, 2), (4, 2, 0)]:
        exact = moment(a, b, c)
        # degree-12 monomials are integrated exactly; 1e-14 relative = rounding of the sum
        assert abs(g.integrate(x ** (2 * a) * y ** (2 * b) * z ** (2 * c)) - exact) < 1e-14 * exact
    assert abs(g.integrate(x * y**3 * z**5)) < 1e-15  # odd monomial: 0 by symmetry, exactly integrated


def test_power_spectrum_and_inner_are_parseval(grid16):
    rng = np.random.default_rng(3)
    a, b = random_alm(grid16, rng), random_alm(grid16, rng)
    f, h = grid16.synthesis(a), grid16.synthesis(b)
    # int f^2 and int f h by exact quadrature vs coefficient sums: rounding of O(1e2) sums
    assert abs(grid16.power_spectrum(a).sum() - grid16.integrate(f * f)) < 1e-12 * grid16.integrate(f * f)
    assert abs(grid16.inner(a, b) - grid16.integrate(f * h)) < 1e-11
    assert grid16.power_spectrum(a).shape == (17,)


# ----------------------------------------------------------------------------- calculus
def test_laplacian_eigenvalues(grid16):
    g = grid16
    a = random_alm(g, np.random.default_rng(4))
    lap = g.laplacian(a)
    l = g.l_index
    assert np.array_equal(lap, -(l * (l + 1.0)) * a)  # exact by construction
    mult = np.arange(17.0) ** 2
    assert np.array_equal(g.multiply_degree(a, mult), mult[l] * a)


@pytest.mark.parametrize("lmax", [7, 32])
def test_divergence_of_gradient_is_laplacian(lmax):
    g = SphereGrid(lmax)
    a = random_alm(g, np.random.default_rng(5))
    lap = g.laplacian(a)
    v = g.gradient(a)
    div = g.divergence(v)
    scale = np.max(np.abs(lap))  # up to lmax(lmax+1) ~ 1e3; rounding relative to it
    assert np.max(np.abs(div - lap)) < 1e-12 * scale  # sign pinned: div grad = +Lap
    rot = np.stack([-v[1], v[0]])  # n x grad f: divergence-free
    assert np.max(np.abs(g.divergence(rot))) < 1e-12 * scale
    # divergence theorem: the l = 0 coefficient is multiplied by sqrt(0 * 1) = 0, so exactly 0
    w = np.random.default_rng(6).standard_normal((2,) + g.shape)
    assert abs(g.divergence(w)[0]) < 1e-15 and abs(div[0]) < 1e-15


def test_gradient_of_coordinates_on_grid(grid16):
    g = grid16
    T, P = np.meshgrid(g.theta, g.phi, indexing="ij")
    x, y, z = np.moveaxis(g.nodes, -1, 0)
    # grad z = -sin(theta) e_theta; grad x = cos(theta) cos(phi) e_theta - sin(phi) e_phi.
    # Degree-1 fields; analysis and deriv1 are exact, so rounding only: the analysis sums
    # ~600 O(1) terms and deriv1 recurses to lmax 16 (measured ~6e-14), hence 1e-13.
    gz = g.gradient(g.analysis(z))
    assert np.max(np.abs(gz[0] + np.sin(T))) < 1e-13 and np.max(np.abs(gz[1])) < 1e-13
    gx = g.gradient(g.analysis(x))
    assert np.max(np.abs(gx[0] - np.cos(T) * np.cos(P))) < 1e-13
    assert np.max(np.abs(gx[1] + np.sin(P))) < 1e-13
    # Cartesian form: grad_S x = e_x - x n
    ex = np.array([1.0, 0.0, 0.0])
    assert np.max(np.abs(g.to_cartesian(gx) - (ex - x[..., None] * g.nodes))) < 1e-13
    # from_cartesian is the tangent projection: adding a normal part changes nothing
    V = g.to_cartesian(gx) + 3.0 * g.nodes
    assert np.max(np.abs(g.from_cartesian(V) - gx)) < 1e-14


def _poly(X):
    """Cubic F(x) = x y z + x^2 - 3 y + z^3 and its Euclidean gradient, X shape (..., 3)."""
    x, y, z = np.moveaxis(X, -1, 0)
    F = x * y * z + x**2 - 3 * y + z**3
    dF = np.stack([y * z + 2 * x, x * z - 3, x * y + 3 * z**2], axis=-1)
    return F, dF


def test_gradient_at_points_is_projected_euclidean_gradient(grid16):
    g = grid16
    a = g.analysis(_poly(g.nodes)[0])  # degree-3 field, exactly represented
    X = random_points(np.random.default_rng(7), 500)
    X = np.vstack([X, [[0, 0, 1.0], [0, 0, -1.0], [1.0, 0, 0]]])  # poles and phi = 0 included
    F, dF = _poly(X)
    expected = dF - np.sum(dF * X, axis=1, keepdims=True) * X  # P_x grad F
    # epsilon = 1e-13 (relative to the coefficient norm) in the NUFFT; values O(1)-O(10)
    assert np.max(np.abs(g.gradient_at(a, X) - expected)) < 1e-11
    assert np.max(np.abs(g.evaluate(a, X) - F)) < 1e-11
    # matches the grid gradient at the nodes
    v3 = g.to_cartesian(g.gradient(a)).reshape(-1, 3)
    assert np.max(np.abs(g.gradient_at(a, g.nodes.reshape(-1, 3)) - v3)) < 1e-11


def test_evaluate_and_adjoint(grid16):
    g = grid16
    rng = np.random.default_rng(8)
    a = random_alm(g, rng)
    # at the nodes evaluate == synthesis; NUFFT accuracy ~ epsilon * ||a|| (~ 1e-13 * 20)
    assert np.max(np.abs(g.evaluate(a, g.nodes.reshape(-1, 3)) - g.synthesis(a).ravel())) < 1e-11
    X, w = random_points(rng, 300), rng.standard_normal(300)
    b = g.adjoint_at(X, w)
    lhs = np.dot(g.evaluate(a, X), w)
    # <evaluate(a), w> = Re sum c_m a_lm conj(b_lm) (c_0 = 1, c_m = 2); sums of ~300 O(10) terms
    assert abs(lhs - g.inner(a, b)) < 1e-11 * max(1.0, abs(lhs))
    # b_lm = sum_j w_j conj(Y_lm(x_j)) directly
    loc = cartesian_to_angles(X)
    Y = sph_harm_y(4, 3, loc[:, 0], loc[:, 1])
    assert abs(b[g.index(4, 3)] - np.sum(w * np.conj(Y))) < 1e-11


def test_point_set_reused_for_several_fields(grid16):
    """A PointSet (angles and Cartesian frame computed once) serves several fields and weightings:
    values and gradients of exactly represented polynomials, adjoint against scipy's Y_lm, equality
    with the one-off SphereGrid methods, ``out=`` into a strided view; poles, a signed-zero axis
    point and points 1e-9 off the axis included (where a trigonometric frame would be ill-conditioned)."""
    g = grid16
    rng = np.random.default_rng(9)
    near = np.array([[1e-9, 0.0, 1.0], [0.0, -1e-9, -1.0]])
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    X = np.vstack([random_points(rng, 300), [[0, 0, 1.0], [0, 0, -1.0], [-0.0, 0.0, 1.0], [0, 1.0, 0]], near])
    pts = g.prepare_points(X, epsilon=1e-14)
    assert pts.n == X.shape[0] and pts.loc.shape == (X.shape[0], 2) and not pts.points.flags.writeable
    # ducc0 loc: exact same angles as cartesian_to_angles (same code path), so equality
    assert np.array_equal(pts.loc, cartesian_to_angles(X))
    F, dF = _poly(X)
    a_poly = g.analysis(_poly(g.nodes)[0])
    a_lin = g.analysis(g.nodes[..., 0] - 2 * g.nodes[..., 2])       # f = x - 2 z, grad = (1, 0, -2)
    U = np.zeros((2, X.shape[0], 3))
    for i, (a, f, df) in enumerate(((a_poly, F, dF), (a_lin, X[:, 0] - 2 * X[:, 2],
                                                       np.broadcast_to([1.0, 0.0, -2.0], X.shape)))):
        expected = df - np.sum(df * X, axis=1, keepdims=True) * X   # P_x grad f
        # epsilon = 1e-14 relative to the coefficient norm; values O(1)-O(10): 1e-12 is ~100x margin
        assert np.max(np.abs(pts.evaluate(a) - f)) < 1e-12
        out = U[i]                                                   # a view into U, as fastsum uses it
        assert pts.gradient(a, out=out) is out
        assert np.max(np.abs(U[i] - expected)) < 1e-12
        # the one-off methods are the same transforms at the same epsilon: equal to round-off
        assert np.max(np.abs(g.gradient_at(a, X, 1e-14) - U[i])) < 1e-14 * np.abs(U[i]).max()
    for w in (np.full(X.shape[0], 1.0 / X.shape[0]), rng.standard_normal(X.shape[0])):
        b = pts.adjoint(w)
        Y = sph_harm_y(5, 2, pts.loc[:, 0], pts.loc[:, 1])
        # b_lm = sum_j w_j conj(Y_lm(x_j)) against scipy: sums of ~300 O(1) terms, 1e-12
        assert abs(b[g.index(5, 2)] - np.sum(w * np.conj(Y))) < 1e-12
        assert np.max(np.abs(g.adjoint_at(X, w, 1e-14) - b)) < 1e-14 * np.abs(b).max()
    with pytest.raises(ValueError, match=r"epsilon must be a number in \[1e-14, 1\).*received 1e-15"):
        g.prepare_points(X, epsilon=1e-15)
    with pytest.raises(ValueError, match=r"out must be a float64 array of shape \(n, 3\) = \(306, 3\)"):
        pts.gradient(a_lin, out=np.zeros((306, 2)))
    with pytest.raises(ValueError, match=r"weights must be real with shape \(n,\) = \(306,\)"):
        pts.adjoint(np.ones(305))
    with pytest.raises(ValueError, match=r"f_lm must have shape \(nalm,\) = \(153,\)"):
        pts.evaluate(np.zeros(152, complex))


# ----------------------------------------------------------------------------- pyshtools
def test_pyshtools_round_trip_and_conventions(grid16):
    pysh = pytest.importorskip("pyshtools")
    g = grid16
    a = random_alm(g, np.random.default_rng(9))
    c = g.to_shcoeffs(a)
    assert c.normalization == "ortho" and c.csphase == -1 and c.lmax == 16
    assert np.max(np.abs(g.from_shcoeffs(c) - a)) < 1e-15  # scalings by sqrt(2) only
    # pyshtools evaluates the same field: at points (its own Legendre code) ...
    X = random_points(np.random.default_rng(10), 50)
    loc = np.degrees(cartesian_to_angles(X))
    vals = c.expand(lat=90.0 - loc[:, 0], lon=loc[:, 1])
    assert np.max(np.abs(vals - g.evaluate(a, X))) < 1e-12  # O(10) values, two independent codes
    # ... and on its GLQ grid through to_shgrid
    grid = g.to_shgrid(g.synthesis(a))
    lat, lon = np.radians(grid.lats()), np.radians(grid.lons())
    T, P = np.meshgrid(np.pi / 2 - lat, lon, indexing="ij")
    pts = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), np.cos(T)], -1).reshape(-1, 3)
    assert np.max(np.abs(grid.data.ravel() - g.evaluate(a, pts))) < 1e-12
    # other normalization / phase are converted by pyshtools
    c4 = c.convert(normalization="4pi", csphase=1)
    assert np.max(np.abs(g.from_shcoeffs(c4) - a)) < 1e-13
    with pytest.raises(ValueError, match="coeffs.lmax must equal lmax = 16; received 8"):
        g.from_shcoeffs(pysh.SHCoeffs.from_zeros(8))


# ----------------------------------------------------------------------------- dealiasing
@pytest.mark.parametrize("lmax", [15, 16])
def test_dealiased_product_is_exact_projection(lmax):
    g = SphereGrid.dealiased(lmax)
    assert g.nlat >= (3 * lmax + 1) / 2 and g.nlon >= 3 * lmax + 1
    fine = SphereGrid(lmax, nlat=3 * lmax, nlon=6 * lmax)  # exact to far higher degree
    rng = np.random.default_rng(lmax)
    a, b = random_alm(g, rng), random_alm(g, rng)
    exact = fine.analysis(fine.synthesis(a) * fine.synthesis(b))
    got = g.analysis(g.synthesis(a) * g.synthesis(b))
    scale = np.max(np.abs(exact))
    assert np.max(np.abs(got - exact)) < 1e-12 * scale  # rounding only: both quadratures exact
    coarse = SphereGrid(lmax)  # control: the default grid aliases the product
    assert np.max(np.abs(coarse.analysis(coarse.synthesis(a) * coarse.synthesis(b)) - exact)) > 1e-3 * scale


# ----------------------------------------------------------------------------- spectral convergence
def test_spectral_convergence_exp():
    u = np.array([0.3, -0.5, 0.8])
    u /= np.linalg.norm(u)
    tu, pu = cartesian_to_angles(u[None])[0]
    errs, lmaxs = [], [6, 10, 14, 18, 24]
    for L in lmaxs:
        g = SphereGrid(L)
        f = np.exp(3.0 * g.nodes @ u)
        # Funk-Hecke: exp(3 <x, u>) has f_lm = 4 pi i_l(3) conj(Y_lm(u))
        exact = 4 * np.pi * spherical_in(g.l_index, 3.0) * np.conj(sph_harm_y(g.l_index, g.m_index, tu, pu))
        errs.append(np.max(np.abs(g.analysis(f) - exact)))
    errs = np.array(errs)
    assert errs[-1] < 1e-12  # i_l(3) ~ 1.5^l / (2l+1)!! : aliasing below rounding by lmax 24
    # faster than any power: log(err) vs log(lmax) slope steepens; vs lmax it is strongly negative
    slope = np.polyfit(lmaxs[:4], np.log(errs[:4]), 1)[0]
    assert slope < -1.5  # about -2 per degree here (factorial decay); a power law would be ~ -p/l
    assert np.all(np.diff(np.log(errs[:4])) < -5)


# ----------------------------------------------------------------------------- input checks
def test_bad_inputs(grid16):
    g = grid16
    with pytest.raises(ValueError, match=r"lmax must be an integer >= 2; received 1"):
        SphereGrid(1)
    with pytest.raises(ValueError, match=r"lmax must be an integer >= 2; received 2.5"):
        SphereGrid(2.5)
    with pytest.raises(ValueError, match=r"lmax must be an integer >= 2; received 1"):
        SphereGrid.dealiased(1)
    with pytest.raises(ValueError, match=r"nlat must be an integer >= lmax \+ 1 = 9; received 8"):
        SphereGrid(8, nlat=8)
    with pytest.raises(ValueError, match=r"nlon must be an integer >= 2 lmax \+ 1 = 17; received 16"):
        SphereGrid(8, nlon=16)
    with pytest.raises(ValueError, match=r"nthreads must be an integer >= 1; received 0"):
        SphereGrid(8, nthreads=0)
    with pytest.raises(ValueError, match=r"f must have shape \(17, 34\) for this grid; received shape \(17, 33\)"):
        g.analysis(np.zeros((17, 33)))
    with pytest.raises(ValueError, match=r"f must be real"):
        g.analysis(np.zeros(g.shape, complex))
    with pytest.raises(ValueError, match=r"v must have shape \(2, 17, 34\)"):
        g.divergence(np.zeros(g.shape))
    with pytest.raises(ValueError, match=r"f_lm must have shape \(nalm,\) = \(153,\) for lmax = 16; received shape \(152,\)"):
        g.synthesis(np.zeros(152, complex))
    with pytest.raises(ValueError, match=r"mult must have shape \(lmax \+ 1,\) = \(17,\); received shape \(16,\)"):
        g.multiply_degree(np.zeros(g.nalm, complex), np.ones(16))
    with pytest.raises(ValueError, match=r"points must be unit vectors"):
        g.evaluate(np.zeros(g.nalm, complex), np.array([[1.0, 1.0, 0.0]]))
    with pytest.raises(ValueError, match=r"points must have shape \(n, 3\); received shape \(4,\)"):
        g.gradient_at(np.zeros(g.nalm, complex), np.zeros(4))
    with pytest.raises(ValueError, match=r"weights must be real with shape \(n,\) = \(2,\)"):
        g.adjoint_at(np.eye(3)[:2], np.ones(3))
    with pytest.raises(ValueError, match=r"V must have shape \(17, 34, 3\)"):
        g.from_cartesian(np.zeros((17, 34, 2)))
    with pytest.raises(ValueError, match=r"\(l, m\) must satisfy 0 <= m <= l <= lmax = 16; received \(2, 3\)"):
        g.index(2, 3)


def test_nan_points_are_refused():
    grid = SphereGrid(4)
    with pytest.raises(ValueError, match="points must be finite unit vectors; received 1 rows with NaN"):
        grid.evaluate(np.zeros(grid.nalm, complex), np.array([[0, 0, 1.0], [np.nan, 0, 0]]))
