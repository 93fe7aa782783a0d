r"""Funk-Hecke multipliers of zonal kernels on S^2 (numpy and scipy only).

A zonal kernel ``g(<x, y>)`` acts on spherical harmonics degree by degree:

.. math:: \int_{S^2} g(\langle x, y\rangle)\, Y_{lm}(y)\, dy = c_l[g]\, Y_{lm}(x),\qquad
          c_l[g] = 2\pi \int_{-1}^{1} g(t) P_l(t)\, dt .

:func:`funk_hecke_multipliers` computes ``c_l[g]`` for one profile (closed form ``4 pi i_l(a)`` for
``exp(a t)``, Gauss-Legendre otherwise); :func:`zonal_multipliers` gives the three sequences a zonal
head needs (potential, normalizer, normal part).  Used by :mod:`meanfield.continuum` (the PDE) and
:mod:`meanfield.fastsum` (spectral particle sums); :mod:`meanfield.stability` keeps independent
closed forms (``funk_hecke_exp``, ``funk_hecke_relu``) that the tests compare against.
"""

from __future__ import annotations

import numpy as np
from scipy.special import roots_legendre, spherical_in

__all__ = ["funk_hecke_multipliers", "zonal_multipliers"]


def funk_hecke_multipliers(lmax, g=None, exp_rate=None):
    r"""Funk-Hecke multipliers ``c_l = 2 pi int_{-1}^1 g(t) P_l(t) dt``, l = 0..lmax.

    ``int_{S^2} g(<x, y>) Y_lm(y) dy = c_l Y_lm(x)``.  With ``exp_rate = a`` the profile is
    ``exp(a t)`` and the exact ``4 pi i_l(a)`` is returned; otherwise ``g`` (a vectorized callable,
    smooth on ``[-1, 0]`` and ``[0, 1]``) is integrated by Gauss-Legendre with ``lmax + 8`` nodes on
    each half (exact for piecewise polynomials of degree ``< 2 (lmax + 8)``), ``P_l`` by the
    three-term recurrence (O(lmax^2)).

    Parameters
    ----------
    lmax : int
        Largest degree, ``>= 0``.
    g : callable, optional
        Profile ``g(t)`` for ``t`` an ndarray in ``[-1, 1]``; exactly one of ``g``, ``exp_rate``.
    exp_rate : float, optional
        ``a`` of the profile ``exp(a t)``.

    Returns
    -------
    ndarray, shape (lmax + 1,)
    """
    if isinstance(lmax, bool) or not isinstance(lmax, (int, np.integer)) or lmax < 0:
        raise ValueError(f"lmax must be an integer >= 0; received {lmax!r}")
    if (g is None) == (exp_rate is None):
        raise ValueError(f"give exactly one of g (a callable) and exp_rate (a number); received "
                         f"g={g!r}, exp_rate={exp_rate!r}")
    if exp_rate is not None:
        return 4 * np.pi * spherical_in(np.arange(lmax + 1), exp_rate)
    t, wt = roots_legendre(lmax + 8)
    s = np.concatenate([(t - 1) / 2, (t + 1) / 2])
    f = np.pi * np.concatenate([wt, wt]) * g(s)         # 2 pi * (half-interval weight wt / 2) * g
    out = np.empty(lmax + 1)
    p_prev, p = np.zeros_like(s), np.ones_like(s)
    for ell in range(lmax + 1):
        out[ell] = f @ p
        p_prev, p = p, ((2 * ell + 1) * s * p - ell * p_prev) / (ell + 1)
    return out


def zonal_multipliers(head, lmax):
    r"""Funk-Hecke multipliers of one zonal head ``M = V = lambda I``, each of shape (lmax+1,).

    With ``s = lambda t``, ``k`` the head's kernel and ``K`` its antiderivative: exp kernel
    ``c[K] = 4 pi i_l(a) / beta``, ``c[k] = 4 pi i_l(a)``, ``c[k s] = 4 pi lambda i_l'(a)``
    (``a = beta lambda``); ReLU kernel ``c[K] = c[relu(s)^2 / 2]``, ``c[k] = c[relu(s)]``,
    ``c[k s] = 2 c[K]`` (quadrature of :func:`funk_hecke_multipliers`, exact).

    Parameters
    ----------
    head : Head
        A zonal head (``head.is_zonal``) of dimension 3.
    lmax : int
        Largest degree.

    Returns
    -------
    dict with ``"potential"`` (``c[K(lambda t)]``), ``"normalizer"`` (``c[k(lambda t)]``) and
    ``"normal"`` (``c[k(lambda t) lambda t]``, the radial part of the aggregate).
    """
    if not head.is_zonal:
        raise ValueError("head must be zonal (M = V = lambda I) for spectral summation; received a non-zonal head")
    lam = head.scalar
    if head.kernel == "exp":
        a = head.beta * lam
        z = funk_hecke_multipliers(lmax, exp_rate=a)
        r = 4 * np.pi * lam * spherical_in(np.arange(lmax + 1), a, derivative=True)
        out = {"potential": z / head.beta, "normalizer": z, "normal": r}
    else:
        pot = funk_hecke_multipliers(lmax, g=lambda t: 0.5 * np.maximum(lam * t, 0.0) ** 2)
        out = {"potential": pot, "normalizer": funk_hecke_multipliers(lmax, g=lambda t: np.maximum(lam * t, 0.0)),
               "normal": 2.0 * pot}
    for k, v in out.items():
        if not np.all(np.isfinite(v)):
            raise ValueError(f"beta * |lambda| = {head.beta * abs(lam):.4g} overflows the {k} multipliers in "
                             f"float64; spectral summation needs beta * |lambda| below about 700")
    return out
