r"""Funk-Hecke multipliers of zonal kernels on S^2 (numpy and scipy only).

A zonal kernel ``g(<x, y>)`` acts on spherical harmonics degree by degree:

.. math:: \int_{S^2} g(\langle x, y\rangle)\, Y_{lm}(y)\, dy = c_l[g]\, Y_{lm}(x),\qquad
          c_l[g] = 2\pi \int_{-1}^{1} g(t) P_l(t)\, dt .

:func:`funk_hecke_multipliers` computes ``c_l[g]`` for one profile (closed form ``4 pi i_l(a)`` for
``exp(a t)``, Gauss-Legendre otherwise).  Each kernel of :data:`meanfield.core.kernels.KERNELS`
builds its multipliers from it; :func:`zonal_multipliers` (defined in :mod:`meanfield.core.zonal`,
importable from here) gives the sequences a zonal head needs (potential, normalizer, normal part,
entropy), and :class:`meanfield.core.zonal.ZonalOperator` applies them for the PDE, the spectral
particle sums and the entropies.  :mod:`meanfield.stability` keeps independent closed forms
(``funk_hecke_exp``, ``funk_hecke_relu``) that the tests compare against.
"""

from __future__ import annotations

import numpy as np
from scipy.special import roots_legendre, spherical_in

from . import validate

__all__ = ["funk_hecke_multipliers", "zonal_multipliers"]


def funk_hecke_multipliers(lmax, g=None, exp_rate=None, n_nodes=None):
    r"""Funk-Hecke multipliers ``c_l = 2 pi int_{-1}^1 g(t) P_l(t) dt``, l = 0..lmax.

    ``int_{S^2} g(<x, y>) Y_lm(y) dy = c_l Y_lm(x)``.  With ``exp_rate = a`` the profile is
    ``exp(a t)`` and the exact ``4 pi i_l(a)`` is returned; otherwise ``g`` (a vectorized callable,
    smooth on ``[-1, 0]`` and ``[0, 1]``) is integrated by Gauss-Legendre with ``n_nodes`` (default
    ``lmax + 8``) nodes on each half (exact for piecewise polynomials of degree ``< 2 n_nodes``),
    ``P_l`` by the three-term recurrence (O(lmax n_nodes)).

    Parameters
    ----------
    lmax : int
        Largest degree, ``>= 0``.
    g : callable, optional
        Profile ``g(t)`` for ``t`` an ndarray in ``[-1, 1]``; exactly one of ``g``, ``exp_rate``.
    exp_rate : float, optional
        ``a`` of the profile ``exp(a t)``.
    n_nodes : int, optional
        Gauss-Legendre nodes per half interval (quadrature only), ``>= lmax + 1``; default ``lmax + 8``.

    Returns
    -------
    ndarray, shape (lmax + 1,)
    """
    lmax = validate.integer("lmax", lmax, 0)
    if (g is None) == (exp_rate is None):
        raise ValueError(f"give exactly one of g (a callable) and exp_rate (a number); received "
                         f"g={g!r}, exp_rate={exp_rate!r}")
    if exp_rate is not None:
        exp_rate = validate.real("exp_rate", exp_rate)
        return 4 * np.pi * spherical_in(np.arange(lmax + 1), exp_rate)
    if n_nodes is None:
        n_nodes = lmax + 8
    if not callable(g):
        raise ValueError(f"g must be a callable g(t) on [-1, 1]; received {g!r}")
    n_nodes = validate.integer("n_nodes", n_nodes, lmax + 1, what=f"an integer >= lmax + 1 = {lmax + 1}")
    t, wt = roots_legendre(int(n_nodes))
    s = np.concatenate([(t - 1) / 2, (t + 1) / 2])
    f = np.pi * np.concatenate([wt, wt]) * g(s)         # 2 pi * (half-interval weight wt / 2) * g
    out = np.empty(lmax + 1)
    p_prev, p = np.zeros_like(s), np.ones_like(s)
    for ell in range(lmax + 1):
        out[ell] = f @ p
        p_prev, p = p, ((2 * ell + 1) * s * p - ell * p_prev) / (ell + 1)
    return out


def __getattr__(name):
    # zonal_multipliers needs the kernel registry, which needs this module: imported on first use
    if name == "zonal_multipliers":
        from .zonal import zonal_multipliers
        return zonal_multipliers
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
