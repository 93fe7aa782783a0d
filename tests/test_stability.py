"""Linear stability of the uniform density (meanfield.analysis.stability, MODEL.md section 3):
Funk-Hecke coefficients against scipy's Bessel functions and independent quadratures, growth
rates sigma_l (mean vs softmax, noise shift, other dimensions), the most unstable degree, the
critical noise, and input errors.

The Funk-Hecke and growth-rate tests were moved here from test_theory.py unchanged (``T`` is the
stability module itself).  MODEL.md's reference values
sigma_1..4 = 9.34, 19.61, 23.35, 19.97 are a case of the closed-form table (tests/closed_forms.py).
"""

import numpy as np
import pytest
from scipy import integrate, special

import meanfield as mf
from meanfield.analysis import stability as T
from meanfield.analysis.stability import growth_rate, growth_rate_heads
from meanfield.core.heads import Head


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


# ------------------------------------------------------------------ added: independent checks
@pytest.mark.parametrize("d, area", [(1, 2.0), (2, 2 * np.pi), (3, 4 * np.pi), (4, 2 * np.pi ** 2),
                                     (5, 8 * np.pi ** 2 / 3)])
def test_sphere_area(d, area):
    # 2 pi^{d/2} / Gamma(d/2): a few roundings of O(1..10) numbers, 1e-15 relative
    assert abs(T.sphere_area(d) - area) <= 1e-15 * area


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")  # tolerance near round-off
@pytest.mark.parametrize("a", [0.5, 3.0, -2.0, 10.0])
def test_funk_hecke_exp_d3_quadrature(a):
    """d = 3 against 2 pi int_{-1}^{1} e^{a t} P_l(t) dt by adaptive quadrature (no Bessel function)."""
    c0 = 2 * np.pi * integrate.quad(lambda t: np.exp(a * t), -1, 1, epsabs=0, epsrel=1e-13)[0]
    for l in range(11):
        q = 2 * np.pi * integrate.quad(lambda t: np.exp(a * t) * special.eval_legendre(l, t), -1, 1,
                                       epsabs=1e-15, epsrel=1e-13, limit=200)[0]
        # Gauss-Kronrod at epsrel 1e-13 vs the Bessel closed form: 1e-10 relative, or relative to
        # the integrand's size c_0 where P_l cancels (small a, large l: c_l ~ a^l / (2l+1)!!)
        assert abs(T.funk_hecke_exp(l, a, 3) - q) <= 1e-10 * max(abs(q), 1e-3 * c0), (l, a)


@pytest.mark.parametrize("a", [0.2, 2.0, -4.0, 25.0])
def test_funk_hecke_exp_circle_is_bessel_iv(a):
    """MODEL.md: on the circle int exp(kappa cos(theta - phi)) e^{i k phi} dphi = 2 pi I_k(kappa) e^{i k theta}."""
    k = np.arange(16)
    ref = 2 * np.pi * special.iv(k, a)
    # scaled (ive * e^|a|) vs unscaled iv: both ~1e-15 relative, also for tiny high orders
    # (I_15(0.2) ~ 1e-27 is far above the float underflow)
    np.testing.assert_allclose(T.funk_hecke_exp(k, a, 2), ref, rtol=1e-13, atol=0)


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")  # tolerance near round-off
@pytest.mark.parametrize("power", [1, 2])
@pytest.mark.parametrize("a", [1.0, -0.6])
def test_funk_hecke_relu_d3_quadrature(power, a):
    """d = 3 against 2 pi int_{-1}^{1} max(a t, 0)^p P_l(t) dt, split at the kink t = 0."""
    for l in range(9):
        f = lambda t: max(a * t, 0.0) ** power * special.eval_legendre(l, t)  # noqa: E731
        q = 2 * np.pi * sum(integrate.quad(f, lo, hi, epsabs=1e-15, epsrel=1e-13)[0] for lo, hi in ((-1, 0), (0, 1)))
        # exact Gauss rule (a polynomial on each half) vs adaptive quadrature; absolute because odd
        # l >= 3 vanish
        assert abs(T.funk_hecke_relu(l, a, 3, power) - q) <= 1e-12, (l, a, power)


@pytest.mark.parametrize("d", [3, 4, 6])
@pytest.mark.parametrize("lam", [1.0, -0.8, 3.0])
def test_growth_rate_mean_vs_softmax(d, lam):
    """One head: the softmax rate is the mean rate rescaled by |S^{d-1}| / c_0(beta lambda)."""
    beta, l = 2.0, np.arange(0, 20)
    mean = T.growth_rate(l, [lam], beta, "mean", d=d)
    soft = T.growth_rate(l, [lam], beta, "softmax", d=d)
    ratio = T.sphere_area(d) / special.iv(d / 2 - 1, abs(beta * lam)) / (2 * np.pi) ** (d / 2) \
        * abs(beta * lam) ** (d / 2 - 1)
    # c_0 from unscaled iv (independent path); round-off ~1e-15 per factor, products of ~6
    np.testing.assert_allclose(soft, mean * ratio, rtol=1e-13, atol=1e-15 * np.abs(mean).max())


@pytest.mark.parametrize("d", [2, 3, 5])
@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_growth_rate_noise_shift(d, normalization):
    """sigma_l(nu) = sigma_l(0) - nu l (l + d - 2): the Laplace-Beltrami eigenvalue times nu."""
    l = np.arange(0, 30)
    lam, beta, nu = [1.5, -0.5], 3.0, 0.37
    shift = T.growth_rate(l, lam, beta, normalization, nu, d) - T.growth_rate(l, lam, beta, normalization, 0.0, d)
    eig = l * (l + d - 2)
    # one subtraction inside the bracket: round-off relative to the larger of the two terms
    scale = np.maximum(np.abs(T.growth_rate(l, lam, beta, normalization, 0.0, d)), nu * eig)
    np.testing.assert_allclose(shift, -nu * eig, rtol=0, atol=1e-13 * scale.max())
    assert T.growth_rate(0, lam, beta, normalization, nu, d) == 0.0     # mass mode: l (l + d - 2) = 0


@pytest.mark.parametrize("d", [2, 4, 5])
def test_growth_rate_general_d_bessel(d):
    """sigma_l = l(l+d-2) [ (1/beta) sum_h c_l(beta lambda_h) / |S^{d-1}| ] with
    c_l(a) = (2 pi)^{d/2} a^{1-d/2} I_{l+d/2-1}(a) evaluated by unscaled scipy iv."""
    l = np.arange(0, 16)
    lam, beta = np.array([1.2, 0.4]), 2.5
    c = sum((2 * np.pi) ** (d / 2) * (beta * x) ** (1 - d / 2) * special.iv(l + d / 2 - 1, beta * x) for x in lam)
    ref = l * (l + d - 2) * c / (beta * T.sphere_area(d))
    # two Bessel implementations (scaled vs unscaled), ~1e-14 relative each
    np.testing.assert_allclose(T.growth_rate(l, lam, beta, "mean", d=d), ref, rtol=1e-12, atol=0)


def _sigma_d3(l, lam, beta, normalization, nu):
    """Independent d = 3 growth rates from scipy's spherical_in (MODEL.md section 3)."""
    il = sum(special.spherical_in(l, beta * x) / (special.spherical_in(0, beta * x)
                                                  if normalization == "softmax" else 1.0) for x in lam)
    return l * (l + 1) * (il / beta - nu)


@pytest.mark.parametrize("lam, beta, normalization, nu", [
    ([1.0], 6.0, "mean", 0.0), ([1.0], 20.0, "softmax", 0.0), ([1.0, 0.5], 8.0, "mean", 0.3),
    ([2.0, -1.0], 3.0, "softmax", 0.05), ([1.0], 2.0, "mean", 5.0),
])
def test_most_unstable_degree_is_argmax(lam, beta, normalization, nu):
    ls = np.arange(1, 80)
    ref = int(ls[np.argmax(_sigma_d3(ls, lam, beta, normalization, nu))])
    # an integer argmax of exact rates: exact comparison (also when every sigma_l <= 0: the least
    # stable degree, here l = 1 in the last case)
    assert T.most_unstable_degree(lam, beta, normalization, nu) == ref


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_critical_noise_closed_form(normalization):
    """Positive heads: the maximum is at l = 1, nu_c = (1/beta) sum_h i_1(beta lambda_h) [/ i_0]."""
    lam, beta = np.array([1.0, 0.5, 2.0]), 3.0
    i1 = special.spherical_in(1, beta * lam)
    ref = np.sum(i1 / (special.spherical_in(0, beta * lam) if normalization == "softmax" else 1.0)) / beta
    # spherical_in vs scaled ive, ~1e-15 relative each
    assert abs(T.critical_noise(lam, beta, normalization) - ref) <= 1e-13 * ref


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
@pytest.mark.parametrize("d", [3, 4])
def test_critical_noise_mixed_heads(normalization, d):
    """A negative head makes even degrees the least stable; still sigma_l <= 0 for all l at nu_c and
    some sigma_l > 0 just below."""
    lam, beta = [0.3, -2.0], 2.0
    nuc = T.critical_noise(lam, beta, normalization, d)
    ls = np.arange(1, 60)
    sig = T.growth_rate(ls, lam, beta, normalization, nuc, d)
    # at nu_c the largest sigma vanishes up to round-off of l (l + d - 2) nu_c
    # (the top degree is l = 2, l (l + d - 2) <= 8: 1e-12 * 100 nu_c is a wide margin over 8 eps nu_c)
    assert abs(sig.max()) <= 1e-12 * nuc * 100
    assert ls[np.argmax(sig)] % 2 == 0                         # the top degree is even (the l = 2 mode)
    assert T.growth_rate(ls, lam, beta, normalization, (1 - 1e-6) * nuc, d).max() > 0


STABILITY_BAD = [
    (T.funk_hecke_exp, (1.5, 1.0), {}, r"l must be integer\(s\) >= 0; received 1.5"),
    (T.funk_hecke_exp, (1, np.nan), {}, r"a must be finite real number\(s\); received nan"),
    (T.funk_hecke_exp, (1, "big"), {}, r"a must be finite real number\(s\); received 'big'"),
    (T.funk_hecke_relu, (1, 1.0), {"d": 1}, r"d must be an integer >= 2; received 1"),
    (T.funk_hecke_relu, (-2, 1.0), {}, r"l must be integer\(s\) >= 0; received -2"),
    (T.growth_rate, (1, [1.0], 0.0), {}, r"beta must be a positive finite number; received 0.0"),
    (T.growth_rate, (1, [1.0], 1.0), {"normalization": "sum"},
     r"normalization must be one of \('mean', 'softmax', 'sinkhorn'\); received 'sum'"),
    (T.growth_rate, (1, [], 1.0), {}, r"lambdas must be a non-empty 1-d sequence"),
    (T.growth_rate, (1, [1.0], 1.0), {"nu": np.nan}, r"nu must be a finite number >= 0; received nan"),
    (T.growth_rate, (1, [1.0], 1.0), {"d": 1.0}, r"d must be an integer >= 2; received 1.0"),
    (T.growth_rate, (3, [1.0], 1000.0), {}, r"beta \* max\|lambda\| must be small enough .* received 1000"),
    (T.most_unstable_degree, ([1.0], 1.0), {"nu": -1.0}, r"nu must be a finite number >= 0"),
    (T.critical_noise, ([1.0], 1.0), {"normalization": "max"}, r"normalization must be one of"),
    (T.critical_noise, ([1.0], -1.0), {}, r"beta must be a positive finite number; received -1.0"),
    (T.critical_noise, ([1.0], 1.0), {"lmax": 2.5}, r"lmax must be an integer >= 1; received 2.5"),
    (T.sphere_area, (0,), {}, r"d must be an integer >= 1; received 0"),
]
# moved unchanged from test_theory.py's BAD list
STABILITY_BAD += [
    (T.funk_hecke_exp, (-1, 1.0), {}, r"l must be integer"),
    (T.funk_hecke_exp, (1, 1.0), {"d": 1}, r"d must be an integer >= 2; received 1"),
    (T.funk_hecke_relu, (1, 1.0), {"power": 0}, r"power must be an integer >= 1"),
    (T.growth_rate, (1, [1.0], 1.0), {"nu": -0.1}, r"nu must be a finite number >= 0"),
    (T.most_unstable_degree, ([1.0], 1.0), {"lmax": 0}, r"lmax must be an integer >= 1"),
]


@pytest.mark.parametrize("fn, args, kwargs, match", STABILITY_BAD)
def test_bad_input_raises(fn, args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fn(*args, **kwargs)


# ------------------------------------------- moved from test_api_friction.py (issue 14, item 9), unchanged
# growth rates of heads with their own beta / normalization
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
    from meanfield.analysis import stability
    assert "growth_rate_heads" in stability.__all__          # public, in its one home
