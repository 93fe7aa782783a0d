"""Linear stability of the uniform density (MODEL.md section 3): Funk-Hecke coefficients and growth rates.

Pure functions (numpy and scipy only): :func:`funk_hecke_exp`, :func:`funk_hecke_relu`,
:func:`growth_rate` (the exact ``sigma_l``), :func:`most_unstable_degree`, :func:`critical_noise`.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from ..core import cost
from ..core.kernels import KERNELS, NORMALIZATIONS
from ..core.validate import choice, integer, integer_array, real, real_array

__all__ = ["sphere_area", "funk_hecke_exp", "funk_hecke_relu", "growth_rate", "most_unstable_degree",
           "critical_noise", "growth_rate_heads"]


# ------------------------------------------------------------------ arguments shared with theory.py
def _lambdas(x, name="lambdas"):
    """Head strengths: a non-empty 1-d float64 array of finite numbers (a scalar is one head)."""
    try:
        a = np.atleast_1d(real_array(name, x))
    except ValueError:
        a = None
    if a is None or a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence of finite head strengths; received {x!r}")
    return a


def _gamma(name, g, n):
    """Pairwise cosines of an equiangular configuration of ``n`` unit vectors, in [-1/(n-1), 1]."""
    g = real_array(name, g)
    lo = -1.0 / (n - 1)
    if np.any(g < lo) or np.any(g > 1):
        raise ValueError(f"{name} must lie in [-1/(n-1), 1] = [{lo:.6g}, 1] (an equiangular "
                         f"configuration of n = {n} unit vectors); received {np.asarray(g)!r}")
    return g


def _common(lambdas, beta, n, kernel, normalization):
    """The arguments every equiangular closed form takes, validated; the normalization as the one it equals on
    configurations with equal kernel row sums (:attr:`meanfield.core.kernels.Normalization.equal_rows_as`:
    Sinkhorn is softmax there)."""
    return (_lambdas(lambdas), real("beta", beta, positive=True), integer("n", n, 2),
            choice("kernel", kernel, KERNELS), _equal_rows(normalization))


def _equal_rows(normalization):
    """The validated ``normalization`` as the one it coincides with when every kernel row has the same sum."""
    return NORMALIZATIONS[choice("normalization", normalization, NORMALIZATIONS)].equal_rows_as


def sphere_area(d):
    """:math:`|S^{d-1}| = 2\\pi^{d/2}/\\Gamma(d/2)`.

    Parameters
    ----------
    d : int, >= 1

    Returns
    -------
    float
        (Underflows to 0 for very large ``d``.)

    Raises
    ------
    ValueError
        ``d`` not an integer ``>= 1``.
    """
    d = integer("d", d, 1)
    if d > 300:        # Gamma(d/2) overflows float64 near d = 344: the same value through logarithms (underflows to 0)
        return float(np.exp(np.log(2.0) + d / 2 * np.log(np.pi) - special.gammaln(d / 2)))
    return float(2.0 * np.pi ** (d / 2) / special.gamma(d / 2))


def _fh_exp_scaled(l, a, d):
    """``c_l(a) exp(-|a|)``; ``l`` int array, ``a`` float array (broadcast). No checks."""
    l, a = np.broadcast_arrays(l, a)
    b = np.abs(a)
    nu = l + d / 2.0 - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        val = (2 * np.pi) ** (d / 2) * b ** (1 - d / 2) * special.ive(nu, b)
    val = np.where(b == 0, np.where(l == 0, sphere_area(d), 0.0), val)
    return val * np.where((a < 0) & (l % 2 == 1), -1.0, 1.0)


def funk_hecke_exp(l, a, d=3):
    """Funk-Hecke coefficient of :math:`e^{a t}` on :math:`S^{d-1}`.

    .. math:: \\int_{S^{d-1}} e^{a\\langle x,y\\rangle} Y_l(y)\\,dy = c_l(a) Y_l(x),\\qquad
              c_l(a) = (2\\pi)^{d/2} a^{1-d/2} I_{l+d/2-1}(a)

    (``d = 3``: ``4 pi i_l(a)``).  Uses the exponentially scaled ``ive`` (overflow only when
    the value itself exceeds the float range), ``c_l(-a) = (-1)^l c_l(a)`` and
    ``c_0(0) = |S^{d-1}|``, ``c_l(0) = 0`` for ``l >= 1``.

    Parameters
    ----------
    l : array_like of int >= 0
    a : array_like of float (broadcast against ``l``)
    d : int >= 2

    Returns
    -------
    ndarray, broadcast shape of ``l`` and ``a``
    """
    l, a, d = integer_array("l", l, 0), real_array("a", a), integer("d", d, 2)
    with np.errstate(over="ignore"):
        return _fh_exp_scaled(l, a, d) * np.exp(np.abs(a))


def funk_hecke_relu(l, a, d=3, power=1):
    """Funk-Hecke coefficient of :math:`k(t) = \\max(a t, 0)^p` on :math:`S^{d-1}`.

    .. math:: c_l = |S^{d-2}|\\int_{-1}^{1} k(t) P_l(t) (1-t^2)^{(d-3)/2}\\,dt
              = |a|^p (\\pm 1)^l J_l,\\quad
              J_l = |S^{d-2}|\\int_0^1 t^p P_l(t)(1-t^2)^{(d-3)/2} dt,

    sign ``+`` for ``a > 0`` and ``(-1)^l`` for ``a < 0``; ``P_l`` is the Gegenbauer
    polynomial normalized to ``P_l(1) = 1`` (Chebyshev ``T_l`` for ``d = 2``, Legendre for
    ``d = 3``).  ``J_l`` by Gauss-Legendre in ``theta`` (``t = cos theta`` on ``[0, pi/2]``),
    where the integrand is a trigonometric polynomial: exact to round-off.  ``power = 1`` is
    the kernel (softmax row sums), ``power = 2`` gives the ReLU energy kernel ``relu^2``
    whose gradient is the mean-normalized ReLU velocity (up to the factor 1/2).

    Parameters
    ----------
    l : array_like of int >= 0
        Degrees.
    a : array_like
        Slopes (broadcast with ``l``).
    d : int, >= 2
    power : int, >= 1

    Returns
    -------
    ndarray, the broadcast shape of ``l`` and ``a``

    Raises
    ------
    ValueError
        ``l`` not integers ``>= 0``, ``a`` not finite reals, ``d`` below 2, ``power`` below 1, or degrees whose
        quadrature is above the memory or time limit.
    """
    l, a, d = integer_array("l", l, 0), real_array("a", a), integer("d", d, 2)
    p = integer("power", power, 1)
    lb, ab = np.broadcast_arrays(l, a)
    ls = np.unique(lb)
    nodes = int(lb.max(initial=0)) + d + p + 32
    # leggauss: an eigenproblem of a (nodes, nodes) matrix; then (degrees, nodes) polynomial values
    cost.guard(f"funk_hecke_relu(max(l)={int(lb.max(initial=0))}, d={d})", bytes=8.0 * nodes * (3 * nodes + ls.size),
               seconds=1e-9 * float(nodes) ** 3 + 1e-8 * nodes * ls.size,
               detail=f"a {nodes}-node Gauss-Legendre rule and {ls.size} degrees on it", fix="smaller degrees l")
    x, w = np.polynomial.legendre.leggauss(nodes)
    th = (x + 1.0) * np.pi / 4.0                     # [0, pi/2]
    t = np.cos(th)
    if d == 2:
        P = special.eval_chebyt(ls[:, None], t)
    else:
        al = (d - 2) / 2.0
        P = special.eval_gegenbauer(ls[:, None], al, t) / special.eval_gegenbauer(ls, al, 1.0)[:, None]
    J = sphere_area(d - 1) * (P * (t ** p * np.sin(th) ** (d - 2) * w * np.pi / 4.0)).sum(axis=1)
    Jl = J[np.searchsorted(ls, lb)]
    sign = np.where((ab < 0) & (lb % 2 == 1), -1.0, 1.0)
    return np.abs(ab) ** p * sign * Jl


def growth_rate(l, lambdas, beta, normalization="mean", nu=0.0, d=3):
    r"""Exact linear growth rate of ``eps Y_l`` about the uniform density (MODEL.md sections 3 and 6).

    Scalar value-aligned exp heads ``M_h = V_h = lambda_h I`` on :math:`S^{d-1}`:

    .. math::
        \sigma_l^{\rm mean} &= l(l+d-2)\Bigl[\frac1\beta\sum_h
            \frac{c_l(\beta\lambda_h)}{|S^{d-1}|} - \nu\Bigr],\\
        \sigma_l^{\rm softmax} &= l(l+d-2)\Bigl[\frac1\beta\sum_h
            \frac{c_l(\beta\lambda_h)}{c_0(\beta\lambda_h)} - \nu\Bigr],\\
        \sigma_l^{\rm sinkhorn} &= l(l+d-2)\Bigl[\frac1\beta\sum_h
            \frac{c_l(\beta\lambda_h)}{c_0(\beta\lambda_h) + c_l(\beta\lambda_h)} - \nu\Bigr],

    ``c_l`` from :func:`funk_hecke_exp` (``d = 3``: ``i_l``, ``i_l / i_0`` resp. ``i_l / (i_0 + i_l)``).

    Sinkhorn (derivation, one head; heads add): at ``rho_0 = 1/|S|`` the scaling of
    ``a K[a rho] = 1`` is the constant ``a_0`` with ``a_0^2 c_0 / |S| = 1``.  For
    ``rho = rho_0 + eps r Y_l``, ``a = a_0 + eps alpha Y_l`` the order-``eps`` part of the constraint,
    ``alpha a_0 (c_0 + c_l) / |S| + a_0^2 c_l r = 0``, gives ``alpha = -a_0 |S| c_l r / (c_0 + c_l)``; the
    velocity is a gradient, ``X = -(1/beta) grad log a`` (MODEL.md section 6), so
    ``delta X = |S| c_l r / (beta (c_0 + c_l)) grad Y_l`` and the linearized continuity equation
    ``d_t delta rho = -rho_0 div delta X + nu Lap delta rho`` (``Lap Y_l = -l(l+d-2) Y_l``,
    ``rho_0 |S| = 1``) gives ``sigma_l``.  ``c_0 + c_l > 0`` since ``|c_l| < c_0`` for ``l >= 1``.

    Parameters
    ----------
    l : array_like of int >= 0
    lambdas : array_like, shape (H,)
    beta : float, > 0
    normalization : a key of :data:`meanfield.core.kernels.NORMALIZATIONS` with a term in :data:`_TERMS`
        (``"mean"``, ``"softmax"``, ``"sinkhorn"``)
    nu : float, >= 0
        Token-noise (diffusion) coefficient.
    d : int, >= 2

    Returns
    -------
    ndarray, shape of ``l``

    Raises
    ------
    ValueError
        ``l`` not integers ``>= 0``, ``lambdas`` not a non-empty 1-d sequence of finite numbers, ``beta`` not
        positive and finite, an unknown normalization, a negative ``nu``, ``d`` below 2, or growth rates that
        overflow float64 (``beta max|lambda|`` near 700).
    NotImplementedError
        A normalization without a closed-form term (not mean, softmax or Sinkhorn).
    """
    l, lam = integer_array("l", l, 0), _lambdas(lambdas)
    beta = real("beta", beta, positive=True)
    normalization = choice("normalization", normalization, NORMALIZATIONS)
    nu, d = real("nu", nu, 0), integer("d", d, 2)
    with np.errstate(over="ignore", invalid="ignore"):
        sigma = l * (l + d - 2) * (_bracket(l, lam, beta, normalization, d) - nu)
    if not np.all(np.isfinite(sigma)):
        raise ValueError(f"beta * max|lambda| must be small enough for float64 growth rates (the Funk-Hecke "
                         f"coefficients grow like exp(beta |lambda|), overflowing near 700); received "
                         f"{beta * np.abs(lam).max():.4g} (use softmax normalization or a smaller beta)")
    return sigma


def growth_rate_heads(l, heads, nu=0.0):
    r""":func:`growth_rate` for heads with their own ``beta`` (and normalization): each head's own bracket.

    .. math:: \sigma_l = l(l+d-2)\Bigl[\sum_h \frac{1}{\beta_h} T_l(\beta_h\lambda_h) - \nu\Bigr],

    ``T_l = c_l / |S^{d-1}|`` for a mean-normalized head, ``c_l / c_0`` for a softmax one, ``c_l / (c_0 + c_l)``
    for a Sinkhorn one (the terms of :func:`growth_rate`, which is the case of one shared ``beta`` and
    normalization).

    Parameters
    ----------
    l : array_like of int >= 0
    heads : sequence of Head
        Zonal heads ``M = V = lambda I`` of a kernel with the closed form ``"growth_rate"`` (exp; e.g.
        :func:`meanfield.scalar_heads`, or the heads of a :class:`meanfield.ContinuumPDE`), any ``beta``
        and a normalization of :data:`_TERMS` each.
    nu : float, >= 0

    Returns
    -------
    ndarray, shape of ``l``

    Raises
    ------
    ValueError
        ``l`` not integers ``>= 0``, heads :func:`~meanfield.core.heads.check_heads` refuses, a head that is not
        zonal or has no closed-form term, a negative ``nu``, or growth rates that overflow float64.
    """
    from ..core.heads import check_heads

    l = integer_array("l", l, 0)
    heads = check_heads(heads)
    nu = real("nu", nu, 0)
    bracket = 0.0
    for i, h in enumerate(heads):
        if not h.is_zonal or "growth_rate" not in KERNELS[h.kernel].closed_forms or h.normalization not in _TERMS:
            have = [k for k, v in KERNELS.items() if "growth_rate" in v.closed_forms]
            raise ValueError(f"heads[{i}] must be a zonal {' or '.join(have)} head (M = V = lambda I) with "
                             f"normalization one of {sorted(_TERMS)} for a closed-form growth rate; received "
                             f"kernel {h.kernel!r}, normalization {h.normalization!r}, zonal {h.is_zonal}")
        bracket = bracket + _bracket(l, np.array([h.scalar]), h.beta, h.normalization, h.dim)
    d = heads[0].dim
    with np.errstate(over="ignore", invalid="ignore"):
        sigma = l * (l + d - 2) * (bracket - nu)
    if not np.all(np.isfinite(sigma)):
        raise ValueError(f"beta_h * |lambda_h| must be small enough for float64 growth rates (overflow near 700); "
                         f"received {max(h.beta * abs(h.scalar) for h in heads):.4g}")
    return sigma


LARGE_D = 100
"""Above this dimension the bracket uses the normalized multipliers of :mod:`meanfield.core.funk_hecke`
(logarithms): ``|S^{d-1}|`` and ``I_{l+d/2-1}`` under/overflow float64 from about ``d = 350``."""


def _bracket(l, lam, beta, normalization, d):
    """``(1/beta) sum_h T_l(beta lambda_h)`` with the term of :data:`_TERMS` (no checks but the table's)."""
    if normalization not in _TERMS:
        raise NotImplementedError(f"no closed-form growth rate for normalization {normalization!r}; "
                                  f"it exists for {sorted(_TERMS)}")
    term = _TERMS[normalization]
    l = np.asarray(l)
    if d > LARGE_D:
        from ..core.funk_hecke import funk_hecke_normalized

        out = []
        for a in beta * np.atleast_1d(lam):
            m = funk_hecke_normalized(int(l.max(initial=0)), d, exp_rate=float(a))
            out.append(term(m[l], m[0], 1.0))
        return np.sum(out, axis=0) / beta
    a = beta * lam
    cl = _fh_exp_scaled(l[..., None], a, d)
    c0 = _fh_exp_scaled(np.zeros_like(a, dtype=int), a, d)
    with np.errstate(over="ignore"):
        unscale = np.exp(np.abs(a)) / sphere_area(d)
    return term(cl, c0, unscale).sum(axis=-1) / beta


_TERMS = {"mean": lambda cl, c0, unscale: cl * unscale,
          "softmax": lambda cl, c0, unscale: cl / c0,
          "sinkhorn": lambda cl, c0, unscale: cl / (c0 + cl)}
"""Per normalization (the one place growth rates depend on it): the term ``T_l`` of the bracket from
multipliers ``cl``, ``c0`` known up to a common factor, ``unscale`` times them being the normalized
multipliers ``c_l / |S^{d-1}|``: ``c_l / |S^{d-1}|`` (mean), ``c_l / c_0`` (softmax), ``c_l / (c_0 + c_l)``
(Sinkhorn; :func:`growth_rate` derives it).  Keys are names of
:data:`meanfield.core.kernels.NORMALIZATIONS`."""


def _degrees(lambdas, beta, lmax):
    lam = _lambdas(lambdas)
    beta = real("beta", beta, positive=True)
    if lmax is None:   # c_l decays super-exponentially beyond l ~ e a / 2
        lmax = int(np.ceil(np.e * beta * np.abs(lam).max())) + 20
    lmax = integer("lmax", lmax, 1)
    cost.guard(f"growth rates of degrees 1..lmax = {lmax} for {lam.size} heads", bytes=64.0 * lmax * lam.size,
               seconds=1e-7 * lmax * lam.size, detail="a few (lmax, heads) float64 arrays",
               fix="a smaller lmax (or a smaller beta * max|lambda|, which sets the default lmax)")
    return lam, beta, np.arange(1, lmax + 1)


def most_unstable_degree(lambdas, beta, normalization="mean", nu=0.0, d=3, lmax=None):
    """Degree ``l >= 1`` maximizing :func:`growth_rate` over ``1..lmax``.

    ``lmax`` defaults to ``ceil(e beta max|lambda|) + 20``, beyond which ``c_l`` decays
    super-exponentially.  Returns the least stable degree also when every ``sigma_l <= 0``.

    Parameters
    ----------
    lambdas, beta, normalization, nu, d
        As for :func:`growth_rate`.
    lmax : int, optional
        Largest degree searched, ``>= 1``.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Arguments :func:`growth_rate` refuses, ``lmax`` below 1, or degrees above the memory or time limit.
    """
    lam, beta, ls = _degrees(lambdas, beta, lmax)
    return int(ls[np.argmax(growth_rate(ls, lam, beta, normalization, nu, d))])


def critical_noise(lambdas, beta, normalization="mean", d=3, lmax=None):
    """Critical noise ``nu_c = max_{l>=1} (1/beta) sum_h T_l(beta lambda_h)`` (the terms of :func:`growth_rate`).

    The uniform state is linearly stable iff ``nu >= nu_c`` (``T_l = c_l / |S^{d-1}|`` for mean, ``c_l / c_0``
    for softmax, ``c_l / (c_0 + c_l)`` for Sinkhorn).  For positive heads the maximum is at ``l = 1``.

    Parameters
    ----------
    lambdas, beta, normalization, d
        As for :func:`growth_rate`.
    lmax : int, optional
        Largest degree searched (default as in :func:`most_unstable_degree`).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Arguments :func:`growth_rate` refuses, ``lmax`` below 1, or degrees above the memory or time limit.
    NotImplementedError
        A normalization without a closed-form term.
    """
    lam, beta, ls = _degrees(lambdas, beta, lmax)
    normalization = choice("normalization", normalization, NORMALIZATIONS)
    d = integer("d", d, 2)
    return float(np.max(_bracket(ls, lam, beta, normalization, d)))
