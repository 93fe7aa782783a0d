"""Tests of meanfield.theory against MODEL.md section 2 and independent evaluations.

Reference values (c*(2), beta*, lambda_max, late rate, equiangular rate vs particles) are cases of the
closed-form table, tests/closed_forms.py; Funk-Hecke coefficients and growth rates are in
test_stability.py.
"""

import numpy as np
import pytest
from scipy import integrate

from meanfield import theory as T

GOLDEN = (1 + np.sqrt(5)) / 2


# --------------------------------------------------------------------------- c*, beta*
@pytest.mark.parametrize("H", range(2, 11))
def test_c_star_solves_quadratic(H):
    c = T.c_star(H)
    # residual of 1 - c^2 - (H-1) c with terms of size <= 1: a few ulps
    assert abs(1 - c * c - (H - 1) * c) <= 1e-15 * H
    assert 0 < c < 1


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
    (T.late_rate, ([1.0],), {"normalization": "mean"}, r"beta must be a positive finite number"),
]


@pytest.mark.parametrize("fn, args, kwargs, match", BAD)
def test_bad_input_raises(fn, args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fn(*args, **kwargs)
