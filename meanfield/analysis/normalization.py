r"""Equiangular reduced dynamics of the transformer's normalization rules (continuous-time limits).

The rules are those of :mod:`meanfield.models.step_rules` (``post_ln``, ``projected_euler``, ``ngpt``,
``pre_ln``, ``peri_ln``), in their continuous-time limits (:func:`meanfield.models.step_rules.limit_rhs`).
Scalar heads ``M_h = V_h = lambda_h I`` with the exp kernel (softmax or mean normalization).  An
equiangular start ``<x_i, x_j> = rho`` (all ``i != j``) with equal radii ``r`` stays equiangular with
equal radii (the right-hand sides commute with permutations of the tokens, and the Gram matrix of the
directions with the radii obeys a closed ODE), so the state is the pair ``(rho, r)``.

On such a configuration, with ``S = sum_j x_j``, every head's field is ``u_i^h = A_h x_i + B_h (S - x_i)``:
softmax ``A_h = lambda_h / (1 + (n-1) e^{-beta lambda_h (1-rho)})``, ``B_h = lambda_h / (e^{beta lambda_h (1-rho)} + n-1)``;
mean ``A_h = lambda_h e^{beta lambda_h} / n``, ``B_h = lambda_h e^{beta lambda_h rho} / n``.  With ``A, B`` the
sums over heads and ``G = (1 - rho)(1 + (n-1) rho)``:

* ``<P_{x_i} u_i, x_j> = B G`` (the coefficient of :mod:`meanfield.analysis.theory`: ``B = C(rho)``),
* ``<x_i, u_i> = A + (n-1) B rho`` (the radial part), ``|u_i|^2 = A^2 + 2 (n-1) A B rho + (n-1) B^2 (1 + (n-2) rho)``.

The reduced ODEs (``x' = P_x u / r`` and ``r' = <x, u>`` for ``z' = u``):

=================================  =====================================  ==========================
rule                               ``rho'``                               ``r'``
=================================  =====================================  ==========================
``post_ln``, ``projected_euler``   ``2 B G``                              0
``ngpt``                           ``2 B G / |u|``                        0
``pre_ln``                         ``2 B G / r``                          ``A + (n-1) B rho``
``peri_ln``                        ``2 B G / (r |u|)``                    ``(A + (n-1) B rho) / |u|``
=================================  =====================================  ==========================

Near ``rho = 1`` (``K = sum_h A_h + (n-1) B_h`` at ``rho = 1``: ``sum lambda_h`` for softmax, ``sum lambda_h
e^{beta lambda_h}`` for mean; ``K > 0`` clusters): ``2 B G -> 2 K (1 - rho)``, ``|u| -> K``, ``r' -> K`` (pre-LN)
or ``1`` (peri-LN).  Hence (:func:`asymptotic_law`) ``1 - rho ~ C e^{-2 K t}`` (post-LN), ``~ C e^{-2 t}`` (nGPT)
and ``~ C t^{-2}`` (pre-LN: ``r ~ K t``, ``rho' ~ 2 (1 - rho) / t``; peri-LN: ``r ~ t``, the same).
"""

from __future__ import annotations

import numpy as np
from scipy import integrate

from ..core.kernels import NORMALIZATIONS
from ..core.validate import choice, real, real_array
from ..models.step_rules import RADIAL_RULES, STEP_RULES
from .stability import _common, _gamma

__all__ = ["equiangular_rule_rates", "solve_equiangular_rule", "asymptotic_law", "LAWS"]

LAWS = ("exponential", "power")
"""The two asymptotic laws of ``1 - rho``: ``C e^{-k t}`` and ``C t^{-k}``."""

_NORMALIZATIONS = ("softmax", "mean")


def _coefficients(q, lam, beta, n, normalization):
    """``(A, B)`` summed over heads (module docstring) at ``rho = 1 - q``; ``q`` any shape, ``lam`` (H,). No checks."""
    q = np.asarray(q, dtype=float)[..., None]
    if NORMALIZATIONS[normalization].uses_normalizer:       # row-normalized (softmax): the weights' closed form
        u = beta * lam * q
        A = lam / (1.0 + (n - 1) * np.exp(-u))
        B = lam / (np.exp(u) + (n - 1))
    else:
        A = lam * np.exp(beta * lam) / n + 0.0 * q
        B = lam * np.exp(beta * lam * (1.0 - q)) / n
    return A.sum(axis=-1), B.sum(axis=-1)


def _log_rates(q, r, lam, beta, n, normalization, rule):
    """``(d log(1-rho)/dt, d log r/dt)`` at ``rho = 1 - q``, written in ``q`` (no cancellation as ``q -> 0``)."""
    A, B = _coefficients(q, lam, beta, n, normalization)
    rho = 1.0 - q
    radial = A + (n - 1) * B * rho
    if rule in ("ngpt", "peri_ln"):
        # the unit field u / |u|, written in (A, B) / m with m = max(|A|, |B|) so that |u| cannot underflow (the
        # rates are invariant under scaling (A, B)); u = 0 (m = 0, e.g. every lambda_h = 0) has no direction and
        # does not move, as the discrete rules' normalize (step_rules._unit): rho' = r' = 0, rho and r constant
        m = np.maximum(np.abs(A), np.abs(B))
        moving = m > 0
        a, b = A / np.where(moving, m, 1.0), B / np.where(moving, m, 1.0)
        unit = np.sqrt(np.maximum(a * a + 2 * (n - 1) * a * b * rho + (n - 1) * b * b * (1 + (n - 2) * rho), 0.0))
        scale = np.where(moving & (unit > 0), 1.0 / np.where(moving & (unit > 0), m * unit, 1.0), 0.0)
        A, B, radial = A * scale, B * scale, radial * scale
    tang = 2.0 * B * (n - (n - 1) * q)            # rho' / (1 - rho): G = q (n - (n-1) q)
    if rule in RADIAL_RULES:
        return -tang / r, radial / r
    return -tang, 0.0 * q


def _args(rule, lambdas, beta, n, normalization):
    rule = choice("rule", rule, STEP_RULES)
    normalization = choice("normalization", normalization, _NORMALIZATIONS)
    lam, beta, n, _, _ = _common(lambdas, beta, n, "exp", normalization)
    return rule, lam, beta, n, normalization


def equiangular_rule_rates(rho, r, rule, lambdas, beta, n, normalization="softmax"):
    """``(rho', r')`` of an equiangular configuration with radius ``r`` under ``rule`` (module docstring).

    Parameters
    ----------
    rho : array_like, any shape
        Common cosine, in ``[-1/(n-1), 1]``.
    r : array_like, broadcasting with ``rho``
        Common radius ``|z_i|`` (> 0; unused by the sphere rules, whose ``r'`` is 0).
    rule : str
        One of :data:`meanfield.models.step_rules.STEP_RULES`.
    lambdas : array_like, shape (H,)
    beta : float
        Inverse temperature, > 0.
    n : int
        Tokens, >= 2.
    normalization : {"softmax", "mean"}

    Returns
    -------
    (ndarray, ndarray)

    Raises
    ------
    ValueError
        An unknown ``rule`` or normalization, ``lambdas`` / ``beta`` / ``n`` refused, ``rho`` outside
        ``[-1/(n-1), 1]``, or a radius that is not positive.
    """
    rule, lam, beta, n, normalization = _args(rule, lambdas, beta, n, normalization)
    rho = _gamma("rho", rho, n)
    r = real_array("r", r)
    if np.any(r <= 0):
        raise ValueError(f"r must be positive (a radius |z| > 0); received {r!r}")
    q = 1.0 - rho
    lq, lr = _log_rates(q, r, lam, beta, n, normalization, rule)
    return -q * lq, r * lr


def solve_equiangular_rule(rho0, rule, lambdas, beta, n, t, normalization="softmax", r0=1.0,
                           rtol=1e-12, atol=1e-14):
    """Solve the reduced ODE of ``rule`` from ``(rho0, r0)`` (scipy DOP853) at times ``t``.

    The unknowns are ``(log(1 - rho), log r)``, so ``1 - rho`` keeps its relative accuracy however small
    it gets (``d log(1-rho)/dt = -rho' / (1 - rho)``, ``d log r/dt = r'/r``).

    Parameters
    ----------
    rho0 : float
        Initial cosine, in ``[-1/(n-1), 1)``.
    rule, lambdas, beta, n, normalization
        As for :func:`equiangular_rule_rates`.
    t : array_like, shape (T,)
        Increasing output times, ``t[0] >= 0``.
    r0 : float
        Initial radius, ``> 0``.
    rtol, atol : float
        Tolerances of :func:`scipy.integrate.solve_ivp`.

    Returns
    -------
    q : ndarray, shape (T,)
        ``1 - rho(t)``.
    r : ndarray, shape (T,)
        ``r(t)`` (``r0`` throughout for the sphere rules).

    Raises
    ------
    ValueError
        Arguments :func:`equiangular_rule_rates` refuses, ``rho0 >= 1``, ``r0`` not positive, ``t`` not a
        non-empty increasing array from ``t[0] >= 0``, non-positive tolerances, or a non-finite rate along
        the solution.
    RuntimeError
        :func:`scipy.integrate.solve_ivp` failing.
    """
    rule, lam, beta, n, normalization = _args(rule, lambdas, beta, n, normalization)
    g0 = float(_gamma("rho0", real("rho0", rho0, what="a finite real number"), n))
    if g0 >= 1:
        raise ValueError(f"rho0 must be < 1 (rho0 = 1 is the cluster itself); received {rho0!r}")
    r0 = real("r0", r0, positive=True)
    t = real_array("t", t)
    if t.ndim != 1 or t.size == 0 or t[0] < 0 or np.any(np.diff(t) <= 0):
        raise ValueError(f"t must be a non-empty 1-d increasing array with t[0] >= 0; received {t!r}")

    def rhs(_t, y):
        rates = [float(v) for v in _log_rates(np.exp(y[0]), np.exp(y[1]), lam, beta, n, normalization, rule)]
        if not np.all(np.isfinite(rates)):          # solve_ivp would shrink its step forever on a NaN rate
            raise ValueError(f"the reduced ODE of rule {rule!r} has a non-finite rate (d log(1-rho)/dt, d log r/dt) "
                             f"= {rates} at t = {_t:.6g}, rho = {-np.expm1(y[0]):.17g}, r = {np.exp(y[1]):.6g}; "
                             f"received lambdas = {lam.tolist()}, beta = {beta!r}, n = {n}")
        return rates

    t_span = (0.0, float(t[-1]))
    if t_span[1] == 0:
        return np.full(t.shape, 1.0 - g0), np.full(t.shape, r0)
    rhs(0.0, [np.log1p(-g0), np.log(r0)])            # a named refusal before the solver starts
    sol = integrate.solve_ivp(rhs, t_span, [np.log1p(-g0), np.log(r0)], method="DOP853", t_eval=t,
                              rtol=real("rtol", rtol, positive=True), atol=real("atol", atol, positive=True))
    if sol.status < 0:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    return np.exp(sol.y[0]), np.exp(sol.y[1])


def asymptotic_law(rule, lambdas, beta, n, normalization="softmax"):
    """``(law, k)``: ``1 - rho ~ C e^{-k t}`` (``"exponential"``) or ``~ C t^{-k}`` (``"power"``) near the cluster.

    Post-LN (and projected Euler): ``k = 2 K`` with ``K`` the field's radial part at ``rho = 1`` (module
    docstring; ``sum lambda_h`` for softmax); nGPT: ``k = 2``; pre-LN and peri-LN: a power law with ``k = 2``.
    ``K <= 0`` (no contraction to the cluster) is refused by name.

    Parameters
    ----------
    rule, lambdas, beta, n, normalization
        As for :func:`equiangular_rule_rates`.

    Returns
    -------
    law : {"exponential", "power"}
    k : float

    Raises
    ------
    ValueError
        Arguments :func:`equiangular_rule_rates` refuses, or ``K <= 0``.
    """
    rule, lam, beta, n, normalization = _args(rule, lambdas, beta, n, normalization)
    A, B = _coefficients(0.0, lam, beta, n, normalization)
    K = float(A + (n - 1) * B)
    if not K > 0:
        raise ValueError(f"lambdas must give a positive radial field at the cluster (K = {K:.6g} here), the "
                         f"hypothesis of every asymptotic law; received lambdas = {lam.tolist()}")
    if rule in RADIAL_RULES:
        return "power", 2.0
    return "exponential", 2.0 if rule == "ngpt" else 2.0 * K
