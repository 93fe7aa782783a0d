"""Closed forms of MODEL.md sections 2-3: reduced equiangular ODEs, phi, beta*.

Pure functions of numbers and arrays (numpy and scipy only).  Two groups:

* **Equiangular reduced dynamics** (scalar heads ``M_h = V_h = lambda_h I``, all
  ``<x_i, x_j> = gamma``): :func:`equiangular_rate`, :func:`solve_equiangular`,
  :func:`clustering_time`, :func:`linearized_clustering_time`, :func:`late_rate`.
* **Early rate and critical temperature**: :func:`phi` and its derivatives,
  :func:`lambda_max`, :func:`phi_inflection`, :func:`early_rate`,
  :func:`heterogeneity_gain`, :func:`c_star`, :func:`beta_star`, :func:`radial_fraction`;
  unequal head strengths ``alpha_h``: :func:`radial_dominance_margins`,
  :func:`radial_dominance_threshold`.
* **One pre-LN layer at long context** (one head ``Q = K = V = I``, scores ``beta <y_i, y_j>``):
  :func:`equiangular_layer` (the cosine after the layer, exact at every ``n``) and
  :func:`critical_scaling_limit` (its limit under ``beta = gamma log n``, Chen-Lin-Polyanskiy-Rigollet
  arXiv 2510.05554).
* The **linear stability of the uniform density** (Funk-Hecke coefficients, growth rates
  ``sigma_l``, critical noise) is :mod:`meanfield.analysis.stability`.

Every reduced rate is written as

.. math:: \\dot\\gamma = F(\\gamma) = 2\\,C(\\gamma)\\,(1-\\gamma)\\,(1+(n-1)\\gamma),

because :math:`\\dot\\gamma = 2\\langle v_i, x_k\\rangle` and
:math:`\\langle P_{x_i}\\sum_{j\\ne i} x_j, x_k\\rangle = (1-\\gamma)(1+(n-1)\\gamma)`;
:math:`C(\\gamma)` is the coefficient of :math:`P_{x_i}\\sum_{j\\ne i}x_j` in the velocity.
"""

from __future__ import annotations

import numpy as np
from scipy import integrate, optimize, special

from ..core.kernels import KERNELS, NORMALIZATIONS
from ..core.validate import choice, integer, integer_array, real, real_array
from .stability import _common, _equal_rows, _gamma, _lambdas

__all__ = [
    "equiangular_rate", "solve_equiangular", "clustering_time", "linearized_clustering_time",
    "late_rate", "phi", "phi_derivative", "phi_second_derivative", "lambda_max",
    "phi_inflection", "early_rate", "heterogeneity_gain", "c_star", "beta_star",
    "radial_fraction", "radial_dominance_margins", "radial_dominance_threshold",
    "equiangular_layer", "critical_scaling_limit",
]


# ----------------------------------------------------------------------- equiangular dynamics
def _inv_exp_plus(u, m):
    """``1 / (exp(u) + m)`` without overflow, ``m >= 1``."""
    e = np.exp(-np.abs(u))
    return np.where(u > 0, e / (1.0 + m * e), 1.0 / (e + m))


def _c_exp_softmax(g, lam, beta, n):
    return lam * _inv_exp_plus(beta * lam * (1.0 - g), n - 1)


def _c_exp_mean(g, lam, beta, n):
    return lam * np.exp(beta * lam * g) / n


def _c_relu_mean(g, lam, beta, n):
    return lam * np.maximum(lam * g, 0.0) / n


def _c_relu_softmax(g, lam, beta, n):
    r = np.maximum(lam * g, 0.0)
    z = np.maximum(lam, 0.0) + (n - 1) * r
    return np.where(z > 0, lam * r / np.where(z > 0, z, 1.0), 0.0)


_COEFFICIENTS = {("exp", "softmax"): _c_exp_softmax, ("exp", "mean"): _c_exp_mean,
                 ("relu", "mean"): _c_relu_mean, ("relu", "softmax"): _c_relu_softmax}
"""``C(gamma)`` of one head per (kernel, normalization): the closed form ``"equiangular_rate"``."""


def _closed_form(form, kernel, normalization=None):
    """Refuse a kernel (or kernel and normalization) without the closed form ``form``."""
    if form not in KERNELS[kernel].closed_forms or (
            normalization is not None and (kernel, normalization) not in _COEFFICIENTS):
        have = [k for k, v in KERNELS.items() if form in v.closed_forms]
        raise NotImplementedError(f"theory has no closed form {form!r} for kernel {kernel!r}"
                                  + (f" with normalization {normalization!r}" if normalization else "")
                                  + f"; it exists for the kernels {have}")


def _coefficient(g, lam, beta, n, kernel, normalization):
    """``C(gamma)``, summed over heads; ``g`` any shape, ``lam`` shape (H,). No checks."""
    g = np.asarray(g, dtype=float)[..., None]
    return _COEFFICIENTS[kernel, normalization](g, lam, beta, n).sum(axis=-1)


def _rate(g, lam, beta, n, kernel, normalization):
    g = np.asarray(g, dtype=float)
    return 2.0 * _coefficient(g, lam, beta, n, kernel, normalization) * (1 - g) * (1 + (n - 1) * g)


def equiangular_rate(gamma, lambdas, beta, n, kernel="exp", normalization="softmax"):
    """Rate :math:`d\\gamma/dt` of an equiangular configuration under scalar heads.

    Heads ``M_h = V_h = lambda_h I``; ``F = 2 C (1-gamma)(1+(n-1)gamma)`` (module docstring) with

    .. math::
        C_{\\rm exp,softmax} &= \\sum_h \\frac{\\lambda_h}{e^{\\beta\\lambda_h(1-\\gamma)}+n-1},\\qquad
        C_{\\rm exp,mean} = \\frac1n\\sum_h \\lambda_h e^{\\beta\\lambda_h\\gamma},\\\\
        C_{\\rm relu,mean} &= \\frac1n\\sum_h \\lambda_h\\,(\\lambda_h\\gamma)_+,\\qquad
        C_{\\rm relu,softmax} = \\sum_h \\frac{\\lambda_h(\\lambda_h\\gamma)_+}
            {(\\lambda_h)_+ + (n-1)(\\lambda_h\\gamma)_+}.

    For ``lambda_h > 0`` the ReLU forms reduce to ``(1/n) lambda_h^2 max(gamma, 0)`` (MODEL.md)
    and ``max(gamma, 0) / (1 + (n-1) max(gamma, 0))``, so ReLU-softmax gives the logistic
    ``F = 2 lambda gamma (1 - gamma)`` for ``gamma > 0``.  A ReLU-softmax head whose row sum
    vanishes (``lambda_h < 0``, ``gamma >= 0``) attends to nothing and contributes 0; for
    ``lambda_h < 0``, ``gamma < 0`` it contributes ``lambda_h / (n - 1)`` to ``C``.
    ``beta`` is not used by the ReLU kernel.

    Parameters
    ----------
    gamma : array_like, any shape
        Common inner product, in ``[-1/(n-1), 1]``.
    lambdas : array_like, shape (H,)
        Head strengths (either sign).
    beta : float
        Inverse temperature, > 0.
    n : int
        Number of tokens, >= 2.
    kernel : {"exp", "relu"}
        A kernel of :data:`meanfield.core.kernels.KERNELS` with this closed form
        (``NotImplementedError`` naming the kernel otherwise, e.g. ``"sigmoid"``).
    normalization : {"mean", "softmax"}

    Returns
    -------
    ndarray, shape of ``gamma``
    """
    lam, beta, n, kernel, normalization = _common(lambdas, beta, n, kernel, normalization)
    _closed_form("equiangular_rate", kernel, normalization)
    g = _gamma("gamma", gamma, n)
    return _rate(g, lam, beta, n, kernel, normalization)


def solve_equiangular(gamma0, lambdas, beta, n, t, kernel="exp", normalization="softmax",
                      rtol=1e-12, atol=1e-14):
    """Solve :math:`\\dot\\gamma = F(\\gamma)`, ``gamma(0) = gamma0`` (scipy DOP853).

    Parameters
    ----------
    gamma0 : float
        Initial inner product, in ``[-1/(n-1), 1]``.
    lambdas, beta, n, kernel, normalization
        As in :func:`equiangular_rate`.
    t : array_like, shape (T,)
        Output times, non-decreasing, ``t[0] >= 0``.
    rtol, atol : float
        Tolerances passed to :func:`scipy.integrate.solve_ivp`.

    Returns
    -------
    ndarray, shape (T,)
        ``gamma(t)``.

    Raises
    ------
    ValueError
        Arguments :func:`equiangular_rate` refuses, ``gamma0`` outside ``[-1/(n-1), 1]``, ``t`` not a
        non-empty 1-d non-decreasing array with ``t[0] >= 0``, or non-positive tolerances.
    NotImplementedError
        A kernel and normalization without the closed form (e.g. ``"sigmoid"``).
    RuntimeError
        :func:`scipy.integrate.solve_ivp` failing.
    """
    lam, beta, n, kernel, normalization = _common(lambdas, beta, n, kernel, normalization)
    _closed_form("equiangular_rate", kernel, normalization)
    g0 = float(_gamma("gamma0", real("gamma0", gamma0, what="a finite real number"), n))
    t = real_array("t", t)
    if t.ndim != 1 or t.size == 0 or t[0] < 0 or np.any(np.diff(t) < 0):
        raise ValueError(f"t must be a non-empty 1-d non-decreasing array with t[0] >= 0; received {t!r}")
    rtol, atol = real("rtol", rtol, positive=True), real("atol", atol, positive=True)
    if t[-1] == 0:
        return np.full(t.shape, g0)
    sol = integrate.solve_ivp(lambda _t, y: _rate(y, lam, beta, n, kernel, normalization),
                              (0.0, t[-1]), [g0], method="DOP853", t_eval=t, rtol=rtol, atol=atol)
    if sol.status < 0:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    return sol.y[0]


def _endpoints(gamma0, gamma_target, n):
    """Validated start and target of a clustering time, as floats."""
    return (float(_gamma("gamma0", real("gamma0", gamma0, what="a finite real number"), n)),
            float(_gamma("gamma_target", real("gamma_target", gamma_target, what="a finite real number"), n)))


def clustering_time(gamma0, gamma_target, lambdas, beta, n, kernel="exp", normalization="softmax",
                    rtol=1e-12, atol=1e-14):
    """Time for the nonlinear reduced ODE to carry ``gamma`` from ``gamma0`` to ``gamma_target``.

    The scalar ODE is monotone, so the target is reached iff ``F`` has the sign of
    ``gamma_target - gamma0`` everywhere on the closed segment between them (checked on 4097
    points); then

    .. math:: T = \\int_{\\gamma_0}^{\\gamma_{\\rm target}} \\frac{d\\gamma}{F(\\gamma)},

    computed by integrating the ODE (DOP853) up to a terminal event ``gamma = gamma_target``.
    Otherwise ``inf`` (e.g. ``gamma_target = 1``, reached only as ``t -> inf``; ReLU from
    ``gamma0 = 0``, a fixed point).

    Parameters
    ----------
    gamma0, gamma_target : float
        Start and target inner products, in ``[-1/(n-1), 1]``.
    lambdas, beta, n, kernel, normalization
        As in :func:`equiangular_rate`.
    rtol, atol : float
        Tolerances passed to :func:`scipy.integrate.solve_ivp`.

    Returns
    -------
    float
        ``T >= 0``; 0 when ``gamma_target == gamma0``, ``inf`` when the target is not reached.

    Raises
    ------
    ValueError
        Arguments :func:`equiangular_rate` refuses, or ``gamma0`` / ``gamma_target`` outside ``[-1/(n-1), 1]``.
    NotImplementedError
        A kernel and normalization without the closed form.
    RuntimeError
        :func:`scipy.integrate.solve_ivp` failing, or the target not reached within the (growing) horizon.
    """
    lam, beta, n, kernel, normalization = _common(lambdas, beta, n, kernel, normalization)
    _closed_form("equiangular_rate", kernel, normalization)
    g0, g1 = _endpoints(gamma0, gamma_target, n)
    if g1 == g0:
        return 0.0
    grid = np.linspace(g0, g1, 4097)
    f = _rate(grid, lam, beta, n, kernel, normalization) * np.sign(g1 - g0)
    if np.any(f <= 0):
        return np.inf

    def event(_t, y):
        return y[0] - g1
    event.terminal = True
    horizon = 2.0 * abs(g1 - g0) / f.min() + 1.0
    for _ in range(8):
        sol = integrate.solve_ivp(lambda _t, y: _rate(y, lam, beta, n, kernel, normalization),
                                  (0.0, horizon), [g0], method="DOP853", events=event,
                                  rtol=rtol, atol=atol)
        if sol.status < 0:
            raise RuntimeError(f"solve_ivp failed: {sol.message}")
        if sol.t_events[0].size:
            return float(sol.t_events[0][0])
        horizon *= 4.0
    raise RuntimeError("clustering_time: target not reached although F keeps its sign")


def linearized_clustering_time(gamma0, gamma_target, lambdas, beta, n, kernel="exp",
                               normalization="softmax"):
    """Clustering time of the reduced ODE linearized at ``gamma = 0`` (MODEL.md, Thm 25).

    * exp kernel (softmax or mean): ``F`` frozen at its value at 0, a constant rate
      ``F(0)`` (softmax: ``F(0) = sum_h phi(lambda_h)``; mean: ``(2/n) sum_h lambda_h``), so
      ``T = (gamma_target - gamma0) / F(0)``.
    * ReLU, mean: ``F(gamma) ~ k gamma`` with ``k = (2/n) sum lambda_h^2`` over the heads with
      ``lambda_h gamma0 > 0``, so ``T = log(gamma_target / gamma0) / k``.
    * ReLU, softmax: for ``gamma0 > 0``, ``F ~ k gamma`` with ``k = 2 sum_{lambda_h > 0}
      lambda_h`` (no ``1/n``); for ``gamma0 < 0`` the negative heads give a constant rate
      ``2 sum_{lambda_h < 0} lambda_h / (n - 1)``.

    ``inf`` when the linearized flow never reaches the target (wrong direction, zero rate,
    ``gamma0 = 0`` for ReLU); 0 when ``gamma_target == gamma0``.

    Parameters
    ----------
    gamma0, gamma_target : float
        Start and target inner products, in ``[-1/(n-1), 1]``.
    lambdas, beta, n, kernel, normalization
        As in :func:`equiangular_rate`.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Arguments :func:`equiangular_rate` refuses, or ``gamma0`` / ``gamma_target`` outside ``[-1/(n-1), 1]``.
    NotImplementedError
        A kernel without the closed form (e.g. ``"sigmoid"``).
    """
    lam, beta, n, kernel, normalization = _common(lambdas, beta, n, kernel, normalization)
    _closed_form("linearized_clustering_time", kernel, normalization)
    g0, g1 = _endpoints(gamma0, gamma_target, n)
    if g1 == g0:
        return 0.0
    return _LINEARIZED[kernel](g0, g1, lam, beta, n, normalization)


def _linearized_exp(g0, g1, lam, beta, n, normalization):
    rate = float(_rate(0.0, lam, beta, n, "exp", normalization))       # constant rate F(0)
    T = (g1 - g0) / rate if rate != 0 else np.inf
    return float(T) if T > 0 else np.inf


def _linearized_relu(g0, g1, lam, beta, n, normalization):
    normalized = NORMALIZATIONS[normalization].uses_normalizer          # softmax (mean: False)
    if normalized and g0 < 0:        # the negative heads: a constant rate
        rate = 2.0 * lam[lam < 0].sum() / (n - 1)
        T = (g1 - g0) / rate if rate != 0 else np.inf
        return float(T) if T > 0 else np.inf
    same = lam * g0 > 0
    k = 2.0 * lam[same].sum() if normalized else (2.0 / n) * np.sum(lam[same] ** 2)
    if g0 == 0 or k == 0 or g1 / g0 <= 1:
        return np.inf
    return float(np.log(g1 / g0) / k)


_LINEARIZED = {"exp": _linearized_exp, "relu": _linearized_relu}
"""The closed form ``"linearized_clustering_time"`` per kernel."""


def late_rate(lambdas, beta=None, kernel="exp", normalization="softmax"):
    """Exponential rate of ``eps = 1 - gamma -> 0``: ``eps ~ C exp(-r t)``, ``r = -F'(1) = 2 n C(1)``.

    .. math:: r_{\\rm exp,softmax} = 2\\sum_h \\lambda_h,\\quad
              r_{\\rm exp,mean} = 2\\sum_h\\lambda_h e^{\\beta\\lambda_h},\\quad
              r_{\\rm relu,mean} = 2\\sum_{\\lambda_h>0}\\lambda_h^2,\\quad
              r_{\\rm relu,softmax} = 2\\sum_{\\lambda_h>0}\\lambda_h.

    Independent of ``n``; ``beta`` (``> 0``) is needed only for exp + mean (checked whenever given).  A
    negative value means ``gamma = 1`` is unstable.

    Parameters
    ----------
    lambdas : array_like, shape (H,)
        Head strengths (either sign).
    beta : float, optional
        Inverse temperature, ``> 0``; required for exp + mean.
    kernel : {"exp", "relu"}
        A kernel of :data:`meanfield.core.kernels.KERNELS` with this closed form.
    normalization : {"mean", "softmax"}
        (Sinkhorn counts as softmax: equal row sums.)

    Returns
    -------
    float
        The rate ``r``.

    Raises
    ------
    ValueError
        ``lambdas`` not a non-empty 1-d sequence of finite numbers, a given ``beta`` not positive and finite
        (or missing for exp + mean), or an unknown kernel or normalization.
    NotImplementedError
        A kernel without the closed form.
    """
    lam = _lambdas(lambdas)
    if beta is not None:
        beta = real("beta", beta, positive=True)
    kernel = choice("kernel", kernel, KERNELS)
    normalization = _equal_rows(normalization)
    _closed_form("late_rate", kernel, normalization)
    return _LATE_RATES[kernel, normalization](lam, beta)


def _late_exp_mean(lam, beta):
    beta = real("beta", beta, positive=True)
    return 2.0 * np.sum(lam * np.exp(beta * lam))


_LATE_RATES = {("exp", "softmax"): lambda lam, beta: 2.0 * lam.sum(), ("exp", "mean"): _late_exp_mean,
               ("relu", "mean"): lambda lam, beta: 2.0 * np.sum(lam[lam > 0] ** 2),
               ("relu", "softmax"): lambda lam, beta: 2.0 * np.sum(lam[lam > 0])}
"""The closed form ``"late_rate"`` per (kernel, normalization)."""


# ----------------------------------------------------------------------------- phi, beta*
def phi(lam, beta, n):
    """Early softmax rate of one head at ``gamma = 0``.

    .. math:: \\varphi(\\lambda) = \\frac{2\\lambda}{e^{\\beta\\lambda} + n - 1}

    Parameters
    ----------
    lam : array_like, any shape
    beta : float, > 0
    n : int, >= 2

    Returns
    -------
    ndarray, shape of ``lam``
    """
    lam = real_array("lam", lam)
    beta, n = real("beta", beta, positive=True), integer("n", n, 2)
    return 2.0 * lam * _inv_exp_plus(beta * lam, n - 1)


def phi_derivative(lam, beta, n):
    """:math:`\\varphi'(\\lambda) = 2\\,\\frac{e^{u}(1-u) + n - 1}{(e^{u}+n-1)^2}`, ``u = beta lam``.

    Parameters
    ----------
    lam : array_like, any shape
    beta : float, > 0
    n : int, >= 2

    Returns
    -------
    ndarray, shape of ``lam``

    Raises
    ------
    ValueError
        ``lam`` not finite reals, ``beta`` not positive and finite, or ``n`` not an integer ``>= 2``.
    """
    lam = real_array("lam", lam)
    beta, n = real("beta", beta, positive=True), integer("n", n, 2)
    u = beta * lam
    q = _inv_exp_plus(u, n - 1)                       # 1/(e^u+m)
    return 2.0 * q * (1.0 - u * (1.0 - (n - 1) * q))  # e^u q = 1 - m q


def phi_second_derivative(lam, beta, n):
    """Closed-form second derivative of :func:`phi`.

    .. math:: \\varphi''(\\lambda) = 2\\beta\\,\\frac{e^{u}\\,[(u-2)e^{u} - (u+2)(n-1)]}
              {(e^{u}+n-1)^3},\\qquad u = \\beta\\lambda .

    Parameters
    ----------
    lam : array_like, any shape
    beta : float, > 0
    n : int, >= 2

    Returns
    -------
    ndarray, shape of ``lam``

    Raises
    ------
    ValueError
        ``lam`` not finite reals, ``beta`` not positive and finite, or ``n`` not an integer ``>= 2``.
    """
    lam = real_array("lam", lam)
    beta, n = real("beta", beta, positive=True), integer("n", n, 2)
    u, m = beta * lam, n - 1
    q = _inv_exp_plus(u, m)
    s = 1.0 - m * q                                    # e^u / (e^u + m), in (0, 1)
    return 2.0 * beta * q * s * ((u - 2.0) * s - (u + 2.0) * m * q)


def lambda_max(beta, n):
    """Maximizer of :func:`phi`: :math:`\\lambda_{\\max} = (1 + W((n-1)/e))/\\beta`.

    From ``phi' = 0``: ``(u - 1) e^u = n - 1``; ``W`` is the principal real branch of
    Lambert W.

    Parameters
    ----------
    beta : float, > 0
    n : int, >= 2

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``beta`` not positive and finite (or so small that ``1/beta`` overflows), or ``n`` not an integer ``>= 2``.
    """
    beta, n = real("beta", beta, positive=True), integer("n", n, 2)
    return _finite_over_beta(1.0 + special.lambertw((n - 1) / np.e, 0).real, beta)


def _finite_over_beta(u, beta):
    """``u / beta`` (a strength from a dimensionless root), refusing a beta so small it overflows."""
    with np.errstate(over="ignore"):
        out = float(np.float64(u) / beta)
    if not np.isfinite(out):
        raise ValueError(f"beta must be large enough that 1/beta is finite in float64; received {beta!r}")
    return out


def phi_inflection(beta, n):
    """Inflection point ``lambda_c > lambda_max`` beyond which :func:`phi` is convex.

    Root of ``h(u) = (u - 2) e^u - (u + 2)(n - 1)`` (the sign of ``phi''``), ``u = beta lam``.
    ``h' = (u-1) e^u - (n-1)`` vanishes at ``u_max = beta lambda_max``, so ``h`` increases on
    ``(u_max, inf)`` from ``h(u_max) < 0``: one root there, found by brentq.  (``phi`` has a
    second inflection at negative ``lambda``, not returned.)

    Parameters
    ----------
    beta : float, > 0
    n : int, >= 2

    Returns
    -------
    float
        ``lambda_c``.

    Raises
    ------
    ValueError
        ``beta`` not positive and finite (or so small that ``1/beta`` overflows), or ``n`` not an integer ``>= 2``.
    """
    beta, n = real("beta", beta, positive=True), integer("n", n, 2)
    m = n - 1.0

    def h(u):   # divided by e^u to stay finite
        return (u - 2.0) - (u + 2.0) * m * np.exp(-u)
    lo = beta * lambda_max(beta, n)
    hi = max(lo, 2.0) + 1.0
    while h(hi) <= 0:
        hi *= 2.0
    return _finite_over_beta(optimize.brentq(h, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps), beta)


def early_rate(lambdas, beta, n):
    """Softmax :math:`d\\gamma/dt` at ``gamma = 0``: :math:`\\sum_h \\varphi(\\lambda_h)`.

    Parameters
    ----------
    lambdas : array_like, shape (H,)
        Head strengths.
    beta : float, > 0
    n : int, >= 2

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``lambdas`` not a non-empty 1-d sequence of finite numbers, or ``beta`` / ``n`` refused by :func:`phi`.
    """
    return float(np.sum(phi(_lambdas(lambdas), beta, n)))


def heterogeneity_gain(lambdas, beta, n):
    """``early_rate(lambdas) - H phi(Lambda / H)``, ``Lambda = sum lambdas`` (> 0: split helps).

    Parameters
    ----------
    lambdas : array_like, shape (H,)
        Head strengths.
    beta : float, > 0
    n : int, >= 2

    Returns
    -------
    float

    Raises
    ------
    ValueError
        As :func:`early_rate`.
    """
    lam = _lambdas(lambdas)
    return early_rate(lam, beta, n) - lam.size * float(phi(lam.sum() / lam.size, beta, n))


def c_star(H):
    """Positive root of :math:`1 - c^2 = (H-1) c`: :math:`c^* = (\\sqrt{(H-1)^2+4} - (H-1))/2`.

    Evaluated as ``2 / (sqrt((H-1)^2 + 4) + H - 1)`` (no cancellation).  ``H`` integer(s) >= 1.

    Parameters
    ----------
    H : int or array_like of int
        Number(s) of heads, ``>= 1``.

    Returns
    -------
    ndarray, shape of ``H``
        In ``(0, 1]`` (1 for ``H = 1``).

    Raises
    ------
    ValueError
        ``H`` not integer(s) ``>= 1``.
    """
    h = integer_array("H", H, 1) - 1.0
    return 2.0 / (np.sqrt(h * h + 4.0) + h)


def beta_star(H, n, alpha=1.0):
    """Critical inverse temperature of radial dominance (MODEL.md section 2, paper Thm 19).

    .. math:: \\beta^* = \\frac{1}{2\\alpha}\\ln\\frac{c^{*2}(n-1)}{1-c^{*2}}
              = \\frac{1}{2\\alpha}\\ln\\frac{c^*(n-1)}{H-1}

    (second form used).  The value is returned as the formula gives it: negative when
    ``n < 1 + (H-1)/c*`` (no positive beta satisfies the condition's threshold), and
    ``inf`` for ``H = 1`` (a single head has no cross-head coupling).  Broadcasts over
    ``H`` and ``n``.

    Parameters
    ----------
    H : int or array_like of int
        Number(s) of heads, ``>= 1``.
    n : int or array_like of int
        Number(s) of tokens, ``>= 2``.
    alpha : float
        Head strength, ``> 0``.

    Returns
    -------
    float or ndarray
        A float for scalar ``H`` and ``n``, else the broadcast array.

    Raises
    ------
    ValueError
        ``H`` not integer(s) ``>= 1``, ``n`` not integer(s) ``>= 2``, or ``alpha`` not positive and finite.
    """
    Hi = integer_array("H", H, 1)
    ni = integer_array("n", n, 2)
    alpha = real("alpha", alpha, positive=True)
    c = c_star(Hi)
    with np.errstate(divide="ignore"):
        out = np.log(c * (ni - 1) / (Hi - 1.0)) / (2.0 * alpha)
    return out if out.ndim else float(out)


def radial_fraction(beta, alpha, n):
    """Radial fraction ``a_i / |f_i|`` of a scalar head of strength ``alpha`` at orthogonal tokens.

    .. math:: c = \\frac{e^{\\beta\\alpha}}{\\sqrt{e^{2\\beta\\alpha} + n - 1}}
              = \\bigl(1 + (n-1)e^{-2\\beta\\alpha}\\bigr)^{-1/2}

    ``beta`` may be any finite real (array) so that ``radial_fraction(beta_star(H, n)) ==
    c_star(H)`` holds also where ``beta*`` is negative.

    Parameters
    ----------
    beta : float or array_like
        Inverse temperature(s), finite.
    alpha : float
        Head strength, ``> 0``.
    n : int, >= 2

    Returns
    -------
    ndarray, shape of ``beta``
        In ``(0, 1)``.

    Raises
    ------
    ValueError
        ``beta`` not finite reals, ``alpha`` not positive and finite, or ``n`` not an integer ``>= 2``.
    """
    beta = real_array("beta", beta)
    alpha, n = real("alpha", alpha, positive=True), integer("n", n, 2)
    return 1.0 / np.sqrt(1.0 + (n - 1) * np.exp(-2.0 * beta * alpha))


READINGS = ("norm_bounded", "exact")
"""The two readings of Condition 8 (MODEL.md section 1), as in :func:`meanfield.analysis.diagnostics.radial_dominance`."""


def _dominance_args(alphas, n, normalization, reading):
    a = _lambdas(alphas, "alphas")
    if np.any(a <= 0):
        raise ValueError(f"alphas must be positive head strengths (Thm 19's scalar heads); received {alphas!r}")
    return (a, integer("n", n, 2), _equal_rows(normalization),
            choice("reading", reading, READINGS))


def _dominance_terms(beta, a, n, normalization):
    """Per head at orthogonal tokens (no checks): ``|P u|^2``, ``|P u|^2 / a``, radial shadow ``a``, norm ``|u|``.

    Written with ``q = exp(-|beta alpha|)`` (softmax) so that no ``exp`` overflows; mean-normalized
    terms that are themselves beyond float64 come out as ``inf``.
    """
    m = n - 1.0
    u = beta * a
    with np.errstate(over="ignore", divide="ignore"):
        if not NORMALIZATIONS[normalization].uses_normalizer:         # mean
            E = np.exp(u)
            return a * a * m / (n * n), a * m / (n * E), a * E / n, a * np.sqrt(E * E + m) / n
        q = np.exp(-np.abs(u))
        pos = u > 0                                   # u > 0: E = 1/q, N = (1 + m q)/q; else E = q, N = q + m
        D = np.where(pos, 1 + m * q, q + m)
        tan2 = a * a * m * np.where(pos, q * q, 1.0) / (D * D)
        ratio = np.where(pos, a * m * q * q / (1 + m * q), a * m / np.where(pos, 1.0, q * (q + m)))
        rad = a * np.where(pos, 1.0, q) / D
        nrm = a * np.where(pos, np.sqrt(1 + m * q * q), np.sqrt(q * q + m)) / D
    return tan2, ratio, rad, nrm


def _others(w):
    """``sum_{h' != h} w_h'`` per head, without ``inf - inf``."""
    return np.array([np.delete(w, h).sum() for h in range(w.size)])


def radial_dominance_margins(beta, alphas, n, normalization="mean", reading="norm_bounded"):
    """Condition 8 at orthogonal tokens under scalar heads of unequal strengths (any ``H``).

    Heads ``M_h = V_h = alpha_h I`` (exp kernel, all heads on the whole span), tokens
    ``x_1..x_n`` orthonormal.  With ``E_h = exp(beta alpha_h)``, ``S_i = sum_{j != i} x_j``
    (``|S_i|^2 = n - 1``, ``S_i`` orthogonal to ``x_i``) the force of head ``h`` at every token is
    ``u_i^h = alpha_h (E_h x_i + S_i) / N_h``, ``N_h = n`` (mean) or ``E_h + n - 1`` (softmax), so

    .. math::
        |P u^h|^2 = \\frac{\\alpha_h^2 (n-1)}{N_h^2},\\quad
        a^h = \\frac{\\alpha_h E_h}{N_h},\\quad
        |u^h| = \\frac{\\alpha_h\\sqrt{E_h^2 + n - 1}}{N_h},

    and the margin (left minus right side) of head ``h`` is ``|P u^h|^2 - a^h sum_{h' != h} a^{h'}``
    (``"exact"``) or ``|P u^h|^2 - |a^h| sum_{h' != h} |u^{h'}|`` (``"norm_bounded"``): the same at
    every token, and the same numbers as :func:`meanfield.analysis.diagnostics.radial_dominance`.  For equal
    strengths the norm-bounded margin changes sign at :func:`beta_star`.

    Parameters
    ----------
    beta : float
        Inverse temperature (any finite real).
    alphas : array_like, shape (H,)
        Positive head strengths.
    n : int, >= 2
    normalization : {"mean", "softmax"}
    reading : {"norm_bounded", "exact"}

    Returns
    -------
    ndarray, shape (H,)
    """
    a, n, normalization, reading = _dominance_args(alphas, n, normalization, reading)
    beta = real("beta", beta)
    tan2, _, rad, nrm = _dominance_terms(beta, a, n, normalization)
    return tan2 - rad * _others(rad if reading == "exact" else nrm)


def radial_dominance_threshold(alphas, n, normalization="mean", reading="norm_bounded"):
    """First ``beta >= 0`` at which Condition 8 fails at orthogonal tokens, unequal strengths.

    The general-``H``, unequal-``alpha_h`` form of :func:`beta_star` (paper Thm 19, whose formula
    has one ``alpha``).  Dividing the margin of head ``h`` (:func:`radial_dominance_margins`) by
    ``a^h > 0`` gives

    .. math:: g_h(\\beta) = \\frac{\\alpha_h (n-1)}{N_h E_h} - \\sum_{h' \\ne h} w_{h'},
              \\qquad w = a \\ (\\text{exact})\\ \\text{or}\\ |u|\\ (\\text{norm-bounded}),

    strictly decreasing in ``beta >= 0`` for both normalizations (``E/N`` and ``sqrt(E^2+n-1)/N``
    grow with ``E >= 1``; ``1/(N_h E_h)`` shrinks) and eventually negative (mean: ``-> -inf``;
    softmax: ``-> -sum_{h' != h} alpha_h'``): each head has one root ``beta_h`` (brentq, to
    ~1e-14 in ``beta``), and the threshold is ``min_h beta_h``.

    Parameters
    ----------
    alphas : array_like, shape (H,)
        Positive head strengths.
    n : int, >= 2
    normalization : {"mean", "softmax"}
        (Sinkhorn counts as softmax: equal row sums.)
    reading : {"norm_bounded", "exact"}

    Returns
    -------
    float
        ``0.0`` when the condition already fails at ``beta = 0`` (where :func:`beta_star` would be
        ``<= 0`` for equal strengths), ``inf`` for one head (no cross-head coupling).
    """
    a, n, normalization, reading = _dominance_args(alphas, n, normalization, reading)
    if a.size == 1:
        return np.inf

    def g(beta, h):
        _, ratio, rad, nrm = _dominance_terms(beta, a, n, normalization)
        return ratio[h] - _others(rad if reading == "exact" else nrm)[h]

    roots = []
    for h in range(a.size):
        if g(0.0, h) < 0:
            return 0.0
        hi = 1.0 / a.max()
        while g(hi, h) >= 0:
            hi *= 2.0
        roots.append(optimize.brentq(g, 0.0, hi, args=(h,), xtol=1e-14, rtol=4 * np.finfo(float).eps))
    return float(min(roots))


# ----------------------------------------------------------------------- one layer at long context
def _layer_cosine(rho, w, b, n, alpha):
    """Cosine of ``x_i' = c y_i + b S`` (``c = w - b + alpha``, ``S = sum_j y_j``) on an equiangular set."""
    c = w - b + alpha
    K = (2.0 * c * b + b * b * n) * (1.0 + (n - 1) * rho)
    return (c * c * rho + K) / (c * c + K)


def equiangular_layer(rho, beta, n, alpha=0.0):
    """Cosine ``rho'`` after one pre-LN attention layer on ``n`` unit tokens of pairwise cosine ``rho``.

    The layer of arXiv 2510.05554 (one head ``Q = K = V = I``): ``x_i' = ATT(y_i) + alpha x_i`` with
    ``y_i = x_i / |x_i|`` and ``ATT(y_i) = sum_j A_ij y_j``, ``A_ij = softmax_j(beta <y_i, y_j>)``; unit tokens,
    so the library's pre-LN layer ``z <- z + dt u(z/|z|)`` from ``|z| = 1`` is ``alpha = 1/dt`` (up to the
    factor ``dt``, which no cosine sees) and ``alpha = 0`` is the attention output alone.  The set stays
    equiangular.  With the self-weight ``w = A_ii = 1 / (1 + (n-1) e^{-beta (1-rho)})`` and ``b = A_ij =
    (1-w)/(n-1)``, ``x_i' = c y_i + b S`` with ``c = w - b + alpha`` and ``S = sum_j y_j``; from
    ``<y_i, S> = 1 + (n-1) rho`` and ``|S|^2 = n (1 + (n-1) rho)``:

    .. math:: \\rho' = \\frac{c^2 \\rho + K}{c^2 + K}, \\qquad K = (2 c b + n b^2)(1 + (n-1)\\rho).

    Parameters
    ----------
    rho : float in [-1/(n-1), 1)
    beta : float > 0
    n : int >= 2
    alpha : float >= 0
        Residual weight.

    Returns
    -------
    float
    """
    n = integer("n", n, 2)
    rho = real("rho", rho, -1.0 / (n - 1), 1.0, hi_open=True)
    beta = real("beta", beta, positive=True)
    alpha = real("alpha", alpha, 0.0)
    w = float(special.expit(beta * (1.0 - rho) - np.log(n - 1.0)))
    return float(_layer_cosine(rho, w, (1.0 - w) / (n - 1), n, alpha))


def critical_scaling_limit(rho, gamma, alpha=0.0):
    """``lim_{n -> inf}`` of :func:`equiangular_layer` at ``beta = gamma log n`` (the three regimes).

    The self-weight is ``w = n^k / (n^k + n - 1)``, ``k = gamma (1 - rho)``: it tends to ``w_inf = 0``
    (``k < 1``, subcritical), ``1/2`` (``k = 1``, the critical ``gamma = 1/(1-rho)`` of arXiv 2510.05554)
    or ``1`` (``k > 1``), while ``(n-1) b = 1 - w`` and ``n b^2 -> 0``.  Then ``K -> rho (1-w)(1+w+2 alpha)``
    and the numerator of ``rho'`` sums to ``rho (1 + alpha)^2``:

    .. math:: \\rho'_\\infty = \\frac{\\rho (1+\\alpha)^2}{(w_\\infty + \\alpha)^2 + \\rho (1-w_\\infty)(1+w_\\infty+2\\alpha)},

    i.e. ``1`` (collapse, ``alpha = 0``), ``4 rho / (1 + 3 rho)`` (critical, ``alpha = 0``) and ``rho``
    (identity) for the attention output alone.  ``k`` within ``1e-12`` (relative) of 1 counts as critical.

    Orthogonal tokens without residual (``rho = 0``, ``alpha = 0``, ``k = gamma < 1``) make that formula
    ``0/0``: there ``c^2 ~ w^2 ~ n^(2(k-1))`` competes with ``K ~ 1/n``, so ``rho' -> 1`` for ``gamma < 1/2``,
    ``1/2`` at ``gamma = 1/2`` and ``0`` for ``gamma > 1/2`` (returned as such).

    Parameters
    ----------
    rho : float in [0, 1)
        An equiangular set of unboundedly many unit tokens needs ``rho >= 0``.
    gamma : float > 0
    alpha : float >= 0

    Returns
    -------
    float
    """
    rho = real("rho", rho, 0.0, 1.0, hi_open=True)
    gamma = real("gamma", gamma, positive=True)
    alpha = real("alpha", alpha, 0.0)
    k = gamma * (1.0 - rho)
    if rho == 0.0 and alpha == 0.0 and k < 1.0 - 1e-12:
        return 0.5 if abs(gamma - 0.5) <= 1e-12 * 0.5 else (1.0 if gamma < 0.5 else 0.0)
    w = 0.5 if abs(k - 1.0) <= 1e-12 else (0.0 if k < 1.0 else 1.0)
    return float(rho * (1.0 + alpha) ** 2 / ((w + alpha) ** 2 + rho * (1.0 - w) * (1.0 + w + 2.0 * alpha)))
