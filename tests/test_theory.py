"""Tests of meanfield.theory against MODEL.md sections 2-3 and independent evaluations."""

import numpy as np
import pytest
from scipy import integrate, optimize, special

from meanfield import theory as T

GOLDEN = (1 + np.sqrt(5)) / 2


# --------------------------------------------------------------------------- c*, beta*
def test_c_star_golden():
    # same arithmetic up to one rounding: 1e-15 is a couple of ulps of 0.618
    assert abs(T.c_star(2) - 1 / GOLDEN) <= 1e-15


@pytest.mark.parametrize("H", range(2, 11))
def test_c_star_solves_quadratic(H):
    c = T.c_star(H)
    # residual of 1 - c^2 - (H-1) c with terms of size <= 1: a few ulps
    assert abs(1 - c * c - (H - 1) * c) <= 1e-15 * H
    assert 0 < c < 1


BETA_STAR_REF = [(2, 8, 0.732349), (2, 32, 1.476388), (2, 128, 2.181488),
                 (3, 8, 0.185695), (3, 32, 0.929733), (4, 32, 0.570306)]


@pytest.mark.parametrize("H, n, ref", BETA_STAR_REF)
def test_beta_star_reference_values(H, n, ref):
    # MODEL.md gives six decimals: half a unit of the last digit plus round-off
    assert abs(T.beta_star(H, n) - ref) <= 5e-7


@pytest.mark.parametrize("H, n, alpha", [(2, 8, 1.0), (3, 32, 0.5), (5, 1000, 2.0), (3, 4, 1.0)])
def test_beta_star_forms_and_radial_fraction(H, n, alpha):
    c = T.c_star(H)
    b = T.beta_star(H, n, alpha)
    first = np.log(c ** 2 * (n - 1) / (1 - c ** 2)) / (2 * alpha)
    # two algebraically equal forms; logs of O(1..1e3) numbers agree to ~1e-15 absolute
    assert abs(b - first) <= 1e-13
    # exp(-2 beta* alpha) round trip: relative round-off ~1e-15
    assert abs(T.radial_fraction(b, alpha, n) - c) <= 1e-13


def test_beta_star_sign_and_single_head():
    # n < 1 + (H-1)/c*: formula value negative (returned, not clipped); exact comparison
    assert T.beta_star(3, 4) < 0 < T.beta_star(3, 8)
    assert T.beta_star(1, 8) == np.inf
    # vectorized over n: same values as scalar calls to round-off
    np.testing.assert_allclose(T.beta_star(2, [8, 32]), [T.beta_star(2, 8), T.beta_star(2, 32)],
                               rtol=0, atol=1e-15)


# ------------------------------------------------------------------------------- phi
@pytest.mark.parametrize("beta, n", [(1.0, 2), (1.0, 8), (0.5, 64), (3.0, 1024)])
def test_lambda_max_is_argmax(beta, n):
    lm = T.lambda_max(beta, n)
    res = optimize.minimize_scalar(lambda x: -T.phi(x, beta, n), bounds=(0, 5 * lm + 10 / beta),
                                   method="bounded", options={"xatol": 1e-10})
    # argmax of a smooth max is located only to ~sqrt(eps) relative (flat top)
    assert abs(res.x - lm) <= 1e-6 * lm
    # phi'(lambda_max) vanishes: phi' is O(1/n) nearby, so 1e-14 absolute is round-off
    assert abs(T.phi_derivative(lm, beta, n)) <= 1e-14


@pytest.mark.parametrize("beta, n", [(1.0, 2), (1.0, 8), (2.0, 100)])
def test_phi_derivatives_and_inflection(beta, n):
    lam = np.linspace(-3, 10, 27) / beta
    h = 1e-4 / beta
    fd1 = (T.phi(lam + h, beta, n) - T.phi(lam - h, beta, n)) / (2 * h)
    fd2 = (T.phi(lam + h, beta, n) - 2 * T.phi(lam, beta, n) + T.phi(lam - h, beta, n)) / h ** 2
    # central differences: truncation O(h^2) ~ 1e-8, round-off eps/h^2 ~ 1e-8 (scaled by beta)
    np.testing.assert_allclose(T.phi_derivative(lam, beta, n), fd1, rtol=0, atol=1e-8)
    np.testing.assert_allclose(T.phi_second_derivative(lam, beta, n), fd2, rtol=0, atol=1e-6 * beta)
    lc = T.phi_inflection(beta, n)
    assert lc > T.lambda_max(beta, n)
    # sign change straddling the root (brentq located to ~1e-15 relative)
    assert T.phi_second_derivative(lc * (1 - 1e-6), beta, n) < 0 < T.phi_second_derivative(lc * (1 + 1e-6), beta, n)
    # convex beyond: phi'' > 0 (exact sign) and midpoint Jensen holds
    right = lc + np.linspace(1e-3, 40, 400) / beta
    assert np.all(T.phi_second_derivative(right, beta, n) > 0)
    a, b = right[:200], right[200:]
    assert np.all(T.phi((a + b) / 2, beta, n) <= (T.phi(a, beta, n) + T.phi(b, beta, n)) / 2)


def test_heterogeneity_gain_sign_by_region():
    beta, n = 1.0, 8
    lc = T.phi_inflection(beta, n)
    # Jensen: strictly convex region -> split gains, concave region -> split loses (exact signs)
    assert T.heterogeneity_gain([lc + 0.5, lc + 3.0], beta, n) > 0
    assert T.heterogeneity_gain([0.5, 1.5], beta, n) < 0
    # equal heads: identical evaluations, difference exactly representable as ~0
    assert abs(T.heterogeneity_gain([2.0, 2.0, 2.0], beta, n)) <= 1e-15


def test_phi_no_overflow():
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        v = T.phi(np.array([-800.0, 800.0]), 1.0, 8)
    # phi(-800) = -1600 / (e^-800 + 7) exactly to double precision; phi(800) underflows to ~0
    assert abs(v[0] + 1600 / 7) <= 1e-12 and 0 <= v[1] < 1e-300


# ------------------------------------------------------------------------ reduced ODE
def _particle_rate(gamma, lambdas, beta, n, kernel, normalization):
    """dgamma/dt from the finite-n velocity of MODEL.md section 1 on an explicit configuration."""
    G = (1 - gamma) * np.eye(n) + gamma * np.ones((n, n))
    w, U = np.linalg.eigh(G)
    X = U * np.sqrt(np.clip(w, 0, None))              # rows x_i, X X^T = G
    v = np.zeros_like(X)
    for lam in lambdas:
        S = lam * X @ X.T
        K = np.exp(beta * S) if kernel == "exp" else np.maximum(S, 0.0)
        f = K @ (lam * X)
        if normalization == "mean":
            v += f / n
        else:
            Z = K.sum(axis=1, keepdims=True)
            v += np.where(Z > 0, f / np.where(Z > 0, Z, 1), 0.0)
    dX = v - np.sum(v * X, axis=1, keepdims=True) * X
    return dX[0] @ X[1] + X[0] @ dX[1]


@pytest.mark.parametrize("kernel", ["exp", "relu"])
@pytest.mark.parametrize("normalization", ["mean", "softmax"])
@pytest.mark.parametrize("gamma", [-0.15, 0.3, 0.9])
def test_equiangular_rate_matches_particles(kernel, normalization, gamma):
    lambdas, beta, n = [1.3, -0.7], 1.5, 6
    ref = _particle_rate(gamma, lambdas, beta, n, kernel, normalization)
    # explicit configuration built by eigh: round-off ~1e-15 in X, O(n) sums
    assert abs(T.equiangular_rate(gamma, lambdas, beta, n, kernel, normalization) - ref) <= 1e-13


def test_equiangular_rate_model_formulas():
    g = np.linspace(-1 / 7, 1, 41)
    lam, beta, n = np.array([0.5, 2.0, -1.0]), 1.7, 8
    shape = 2 * (1 - g) * (1 + (n - 1) * g)
    B = sum(l / (np.exp(beta * l * (1 - g)) + n - 1) for l in lam)
    A = sum(l * np.exp(beta * l * g) for l in lam) / n
    # same formulas, differently arranged: relative round-off
    np.testing.assert_allclose(T.equiangular_rate(g, lam, beta, n), B * shape, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(T.equiangular_rate(g, lam, beta, n, normalization="mean"), A * shape,
                               rtol=1e-13, atol=1e-15)
    pos = np.array([0.5, 2.0])
    relu = (2 / n) * np.sum(pos ** 2) * np.maximum(g, 0) * (1 - g) * (1 + (n - 1) * g)
    np.testing.assert_allclose(T.equiangular_rate(g, pos, beta, n, "relu", "mean"), relu, rtol=1e-13, atol=1e-15)
    # softmax at gamma = 0 is the early rate sum phi: the same floating-point operations
    lam2 = [0.3, 1.0, 4.0]
    assert abs(T.equiangular_rate(0.0, lam2, 1.0, 16) - T.early_rate(lam2, 1.0, 16)) <= 1e-15 * T.early_rate(lam2, 1.0, 16)


def test_solve_equiangular_logistic_exact():
    # ReLU + softmax, lambda > 0: F = 2 Lambda gamma (1 - gamma), exact logistic solution
    t = np.linspace(0, 5, 11)
    lam, g0 = [0.4, 0.8], 0.05
    e = np.exp(2 * 1.2 * t)
    exact = g0 * e / (1 - g0 + g0 * e)
    # DOP853 at rtol 1e-12 on a smooth problem: global error well below 1e-10
    np.testing.assert_allclose(T.solve_equiangular(g0, lam, 1.0, 10, t, "relu", "softmax"), exact,
                               rtol=1e-10, atol=0)


@pytest.mark.parametrize("normalization", ["softmax", "mean"])
def test_late_rate_slope(normalization):
    lam, beta, n = [1.0, 0.5], 1.0, 8
    t = np.linspace(0, 14, 281)
    eps = 1 - T.solve_equiangular(0.0, lam, beta, n, t, normalization=normalization)
    r = T.late_rate(lam, beta, normalization=normalization)
    win = (eps < 1e-5) & (eps > 1e-9)
    assert win.sum() >= 10
    slope = np.polyfit(t[win], np.log(eps[win]), 1)[0]
    # d log eps / dt = -r (1 + O(eps)) and integrator error atol/eps <= 1e-5: far below 1e-3
    assert abs(slope + r) <= 1e-3 * r


# ------------------------------------------------------------------- clustering times
@pytest.mark.parametrize("n, ref", [(16, 1.5), (64, 2.1), (256, 2.8), (1024, 3.5), (4096, 4.2)])
def test_clustering_time_model_values(n, ref):
    # MODEL.md quotes one decimal ("about"): allow half a unit of the last digit
    assert abs(T.clustering_time(0.0, 0.5, [1.0], 1.0, n) - ref) <= 0.05


@pytest.mark.parametrize("args", [
    (0.0, 0.5, [1.0], 1.0, 64, "exp", "softmax"),
    (0.1, 0.9, [0.5, 2.0], 2.0, 8, "exp", "mean"),
    (0.01, 0.5, [1.0, 0.3], 1.0, 16, "relu", "mean"),
    (-0.05, -0.15, [-1.0], 1.0, 6, "relu", "softmax"),
])
def test_clustering_time_equals_quadrature(args):
    g0, g1, lam, beta, n, kernel, norm = args
    q = integrate.quad(lambda g: 1 / T.equiangular_rate(g, lam, beta, n, kernel, norm), g0, g1,
                       epsabs=0, epsrel=1e-12, limit=200)[0]
    # ODE event (rtol 1e-12) vs adaptive quadrature of dgamma/F (epsrel 1e-12)
    assert abs(T.clustering_time(g0, g1, lam, beta, n, kernel, norm) - q) <= 1e-9 * q


def test_clustering_time_unreachable_and_linearized():
    # exact outcomes: fixed points are never reached
    assert T.clustering_time(0.0, 1.0, [1.0], 1.0, 8) == np.inf
    assert T.clustering_time(0.0, 0.5, [1.0], 1.0, 8, "relu", "mean") == np.inf
    assert T.linearized_clustering_time(0.0, 0.5, [1.0], 1.0, 8, "relu", "mean") == np.inf
    assert T.clustering_time(0.3, 0.3, [1.0], 1.0, 8) == 0.0
    lam, n = [1.0, 2.0], 64
    # closed forms of the linearizations, same arithmetic up to a few roundings
    assert abs(T.linearized_clustering_time(0.0, 0.5, lam, 1.0, n) - 0.5 / T.early_rate(lam, 1.0, n)) <= 1e-14
    ref = n / (2 * 5.0) * np.log(0.5 / 0.01)
    assert abs(T.linearized_clustering_time(0.01, 0.5, lam, 1.0, n, "relu", "mean") - ref) <= 1e-12 * ref
    # nonlinear ReLU-mean time matches its linearization when gamma stays << 1/n:
    # F = k gamma (1 + O(n gamma)), n gamma <= 8e-5 here, so relative agreement 1e-3
    lin = T.linearized_clustering_time(1e-7, 1e-5, lam, 1.0, 8, "relu", "mean")
    assert abs(T.clustering_time(1e-7, 1e-5, lam, 1.0, 8, "relu", "mean") - lin) <= 1e-3 * lin


# ------------------------------------------------------------------------ Funk-Hecke
@pytest.mark.parametrize("a", [0.1, 1.0, 6.0, 30.0, -6.0])
def test_funk_hecke_exp_d3_is_spherical_in(a):
    l = np.arange(41)
    ref = 4 * np.pi * special.spherical_in(l, a)
    # two independent Bessel implementations, both accurate to ~1e-14 relative
    np.testing.assert_allclose(T.funk_hecke_exp(l, a, 3), ref, rtol=1e-13, atol=0)


def _gegenbauer_normalized(l, d, t):
    if d == 2:
        return special.eval_chebyt(l, t)
    al = (d - 2) / 2
    return special.eval_gegenbauer(l, al, t) / special.eval_gegenbauer(l, al, 1.0)


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")  # tolerance near round-off
@pytest.mark.parametrize("d", [2, 4, 5])
@pytest.mark.parametrize("a", [0.5, 3.0, -2.0])
def test_funk_hecke_exp_general_d_quadrature(d, a):
    area = T.sphere_area(d - 1)
    for l in range(7):
        w = dict(weight="alg", wvar=((d - 3) / 2, (d - 3) / 2), epsabs=1e-15, epsrel=1e-13, limit=200)
        q = area * integrate.quad(lambda t: np.exp(a * t) * _gegenbauer_normalized(l, d, t), -1, 1, **w)[0]
        scale = area * integrate.quad(lambda t: np.exp(a * t), -1, 1, **w)[0]   # = c_0 >= |c_l|
        # algebraic-weight Gauss-Kronrod vs Bessel closed form: 1e-10 relative, or relative to
        # the integrand's size c_0 where P_l cancels (small a, large l: c_l ~ a^l)
        assert abs(T.funk_hecke_exp(l, a, d) - q) <= 1e-10 * max(abs(q), 1e-3 * scale)


def test_funk_hecke_exp_limits_and_parity():
    # a = 0: exact values |S^{d-1}| and 0
    assert T.funk_hecke_exp(0, 0.0, 4) == T.sphere_area(4) and T.funk_hecke_exp(3, 0.0, 4) == 0.0
    # small a continuous with a = 0: c_0(a) = |S| (1 + O(a^2)), a^2 = 1e-16
    assert abs(T.funk_hecke_exp(0, 1e-8, 5) / T.sphere_area(5) - 1) <= 1e-14
    l = np.arange(8)
    # parity is applied exactly, so equality up to sign
    np.testing.assert_array_equal(T.funk_hecke_exp(l, -2.5, 4), (-1.0) ** l * T.funk_hecke_exp(l, 2.5, 4))
    assert np.isfinite(T.funk_hecke_exp(0, 700.0))


def _relu_legendre_closed(l):
    """2 pi int_0^1 t P_l(t) dt (d = 3)."""
    if l == 0:
        return np.pi
    if l == 1:
        return 2 * np.pi / 3
    if l % 2:
        return 0.0
    k = l // 2
    return 2 * np.pi * (-1) ** (k + 1) * special.factorial(l - 2) / (
        2 ** l * special.factorial(k - 1) * special.factorial(k + 1))


def test_funk_hecke_relu_d3_closed_form():
    l = np.arange(21)
    ref = np.array([_relu_legendre_closed(k) for k in l])
    # Gauss-Legendre on a trigonometric polynomial is exact up to round-off
    np.testing.assert_allclose(T.funk_hecke_relu(l, 1.7), 1.7 * ref, rtol=0, atol=1e-13)
    np.testing.assert_allclose(T.funk_hecke_relu(l, -1.7), 1.7 * (-1.0) ** l * ref, rtol=0, atol=1e-13)


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")  # tolerance near round-off
@pytest.mark.parametrize("d", [2, 4, 5])
@pytest.mark.parametrize("power", [1, 2])
def test_funk_hecke_relu_general_d_quadrature(d, power):
    area = T.sphere_area(d - 1)
    for l in range(7):
        q = area * integrate.quad(lambda t: t ** power * (1 + t) ** ((d - 3) / 2) * _gegenbauer_normalized(l, d, t),
                                  0, 1, weight="alg", wvar=(0, (d - 3) / 2), epsabs=1e-15, epsrel=1e-13)[0]
        # exact Gauss rule vs adaptive quadrature; absolute because odd l can vanish
        assert abs(T.funk_hecke_relu(l, 1.0, d, power) - q) <= 1e-12


# ------------------------------------------------------------------------ growth rates
def test_growth_rate_model_values():
    sig = T.growth_rate([1, 2, 3, 4], [1.0], 6.0, "mean")
    # MODEL.md quotes two decimals: half a unit of the last digit plus margin
    np.testing.assert_allclose(sig, [9.34, 19.61, 23.35, 19.97], rtol=0, atol=0.006)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_growth_rate_spherical_in(normalization):
    l = np.arange(0, 25)
    lam, beta, nu = np.array([1.0, -0.4, 2.5]), 3.0, 0.2
    il = sum(special.spherical_in(l, beta * x) / (special.spherical_in(0, beta * x)
                                                  if normalization == "softmax" else 1.0) for x in lam)
    ref = l * (l + 1) * (il / beta - nu)
    # independent Bessel evaluation; relative round-off 1e-13 (absolute near cancellation)
    np.testing.assert_allclose(T.growth_rate(l, lam, beta, normalization, nu), ref, rtol=1e-12, atol=1e-12)


def test_most_unstable_degree_and_critical_noise():
    # sigma_1..4 at beta = 6 peak at l = 3 (values above); large beta: l* ~ sqrt(2 beta) exactly here
    assert T.most_unstable_degree([1.0], 6.0) == 3
    assert T.most_unstable_degree([1.0], 50.0) == 10
    lam, beta = [1.0, 0.5], 4.0
    for norm in ["mean", "softmax"]:
        nuc = T.critical_noise(lam, beta, norm)
        ls = np.arange(1, 40)
        # at nu_c the largest sigma is zero up to round-off of l(l+1) * nu_c ~ 1e-13 relative
        assert abs(T.growth_rate(ls, lam, beta, norm, nuc).max()) <= 1e-12 * nuc
        assert T.growth_rate(1, lam, beta, norm, 0.99 * nuc) > 0
        assert np.all(T.growth_rate(ls, lam, beta, norm, 1.01 * nuc) < 0)
    # huge beta*lambda: softmax ratio i_l/i_0 -> 1 stays finite (no overflow)
    assert abs(T.growth_rate(1, [1.0], 2000.0, "softmax") - 2 / 2000 * (1 - 1 / 2000)) <= 1e-9


# --------------------------------------------------------------------------- bad input
BAD = [
    (T.equiangular_rate, (0.0, [1.0], 1.0, 1), {}, r"n must be an integer >= 2; received 1"),
    (T.equiangular_rate, (0.0, [1.0], 0.0, 8), {}, r"beta must be a positive finite number"),
    (T.equiangular_rate, (0.0, [1.0], 1.0, 8), {"kernel": "gauss"}, r"kernel must be one of .*'gauss'"),
    (T.equiangular_rate, (0.0, [1.0], 1.0, 8), {"normalization": "sum"}, r"normalization must be one of"),
    (T.equiangular_rate, (1.5, [1.0], 1.0, 8), {}, r"gamma must lie in"),
    (T.equiangular_rate, (0.0, [], 1.0, 8), {}, r"lambdas must be a non-empty"),
    (T.equiangular_rate, (0.0, [np.nan], 1.0, 8), {}, r"lambdas must be"),
    (T.solve_equiangular, (0.0, [1.0], 1.0, 8, [1.0, 0.5]), {}, r"t must be"),
    (T.clustering_time, (0.0, -0.5, [1.0], 1.0, 8), {}, r"gamma_target must lie in"),
    (T.c_star, (0,), {}, r"H must be integer\(s\) >= 1; received 0"),
    (T.beta_star, (2, 8), {"alpha": -1.0}, r"alpha must be a positive"),
    (T.phi, (1.0, 1.0, 2.5), {}, r"n must be an integer >= 2; received 2.5"),
    (T.funk_hecke_exp, (-1, 1.0), {}, r"l must be integer"),
    (T.funk_hecke_exp, (1, 1.0), {"d": 1}, r"d must be an integer >= 2; received 1"),
    (T.funk_hecke_relu, (1, 1.0), {"power": 0}, r"power must be an integer >= 1"),
    (T.growth_rate, (1, [1.0], 1.0), {"nu": -0.1}, r"nu must be a finite number >= 0"),
    (T.most_unstable_degree, ([1.0], 1.0), {"lmax": 0}, r"lmax must be an integer >= 1"),
    (T.late_rate, ([1.0],), {"normalization": "mean"}, r"beta must be a positive finite number"),
]


@pytest.mark.parametrize("fn, args, kwargs, match", BAD)
def test_bad_input_raises(fn, args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fn(*args, **kwargs)
