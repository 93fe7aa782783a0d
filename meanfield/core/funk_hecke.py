r"""Funk-Hecke multipliers of zonal kernels on S^2 (numpy and scipy only).

A zonal kernel ``g(<x, y>)`` acts on spherical harmonics degree by degree:

.. math:: \int_{S^2} g(\langle x, y\rangle)\, Y_{lm}(y)\, dy = c_l[g]\, Y_{lm}(x),\qquad
          c_l[g] = 2\pi \int_{-1}^{1} g(t) P_l(t)\, dt .

:func:`funk_hecke_multipliers` computes ``c_l[g]`` for one profile (closed form ``4 pi i_l(a)`` for
``exp(a t)``, Gauss-Legendre otherwise).  Each kernel of :data:`meanfield.core.kernels.KERNELS`
builds its multipliers from it; :func:`meanfield.core.zonal.zonal_multipliers` gives the sequences a
zonal head needs (potential, normalizer, normal part, entropy), and
:class:`meanfield.core.zonal.ZonalOperator` applies them for the PDE, the spectral particle sums and
the entropies.  This module imports nothing of the package but :mod:`~meanfield.core.validate` (the
kernel registry is built on it).  :mod:`meanfield.analysis.stability` keeps independent closed forms
(``funk_hecke_exp``, ``funk_hecke_relu``) that the tests compare against.
"""

from __future__ import annotations

import numpy as np
from scipy.special import roots_legendre, spherical_in

from . import validate

__all__ = ["funk_hecke_multipliers", "gegenbauer_normalized", "funk_hecke_normalized",
           "resolved_multipliers"]


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

    Raises
    ------
    ValueError
        ``lmax`` not an integer ``>= 0``, both or neither of ``g`` and ``exp_rate``, a non-finite ``exp_rate``,
        ``g`` not callable, or ``n_nodes`` below ``lmax + 1``.
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


# ---------------------------------------------------------------------------------------- any dimension
def gegenbauer_normalized(lmax, d, t, derivative=False):
    r"""Gegenbauer polynomials of ``S^{d-1}`` normalized to ``R_l(1) = 1``, l = 0..lmax, at ``t``.

    ``R_l = C_l^{(\lambda)} / C_l^{(\lambda)}(1)``, ``\lambda = (d-2)/2`` (Chebyshev ``T_l`` for
    ``d = 2``, Legendre ``P_l`` for ``d = 3``), by the three-term recurrence

    .. math:: (l + 2\lambda) R_{l+1} = 2 (l + \lambda)\, t R_l - l R_{l-1},\qquad R_0 = 1,\ R_1 = t,

    orthogonal for the weight ``(1 - t^2)^{(d-3)/2}`` on ``[-1, 1]``; ``R_l(<x, e>)`` is the zonal
    harmonic of degree ``l`` about ``e``.

    Parameters
    ----------
    lmax : int, >= 0
    d : int, >= 2
    t : array_like, shape (n,)
    derivative : bool
        Also return ``R_l'(t)``.

    Returns
    -------
    ndarray, shape (lmax + 1, n)
        ``R_l(t)``; with ``derivative``, the pair ``(R, dR)`` of two such arrays.

    Raises
    ------
    ValueError
        ``lmax`` not an integer ``>= 0`` or ``d`` not an integer ``>= 2``.
    """
    from . import validate

    lmax, d = validate.integer("lmax", lmax, 0), validate.integer("d", d, 2)
    t = np.asarray(t, dtype=float).reshape(-1)
    lam = (d - 2) / 2.0
    R, dR = np.empty((lmax + 1, t.size)), np.zeros((lmax + 1, t.size))
    R[0] = 1.0
    if lmax >= 1:
        R[1], dR[1] = t, 1.0
    for ell in range(1, lmax):
        c = 1.0 / (ell + 2 * lam)
        R[ell + 1] = c * (2 * (ell + lam) * t * R[ell] - ell * R[ell - 1])
        dR[ell + 1] = c * (2 * (ell + lam) * (R[ell] + t * dR[ell]) - ell * dR[ell - 1])
    return (R, dR) if derivative else R


def funk_hecke_normalized(lmax, d, g=None, exp_rate=None, n_nodes=None):
    r"""Funk-Hecke multipliers on ``S^{d-1}`` for the *normalized* uniform measure ``sigma``.

    .. math:: \int_{S^{d-1}} g(\langle x, y\rangle)\, Y_l(y)\, d\sigma(y) = m_l\, Y_l(x),\qquad
              m_l = \frac{\int_{-1}^{1} g(t) R_l(t) (1-t^2)^{(d-3)/2} dt}{\int_{-1}^{1} (1-t^2)^{(d-3)/2} dt},

    ``sigma(S^{d-1}) = 1`` (so ``m_l = c_l / |S^{d-1}|`` with ``c_l`` the multipliers of the surface
    measure; the normalized form stays in float range for any ``d``, while ``|S^{d-1}|`` underflows
    near ``d = 350``).  For ``g = exp(a t)``:

    .. math:: m_l(a) = \Gamma(d/2) (2/a)^{d/2-1} I_{l+d/2-1}(a)
              = \frac{(a/2)^l\,\Gamma(d/2)}{\Gamma(l + d/2)}\, {}_0F_1(;\, l + d/2;\, a^2/4)

    (``d = 2``: ``I_l(a)``; ``d = 3``: ``i_l(a)``), computed in logarithms; ``m_l(-a) = (-1)^l m_l(a)``.
    Otherwise ``g`` is integrated in ``theta = arccos t`` by Gauss-Legendre on ``[0, pi/2]`` and
    ``[pi/2, pi]`` (a kink of ``g`` at ``t = 0``, as for ReLU, costs no accuracy).

    Parameters
    ----------
    lmax : int, >= 0
    d : int, >= 2
    g : callable, optional
        Vectorized profile ``g(t)``; exactly one of ``g``, ``exp_rate``.
    exp_rate : float, optional
        ``a`` of ``exp(a t)``.
    n_nodes : int, optional
        Gauss-Legendre nodes per half (quadrature only); default ``lmax + d + 32``.

    Returns
    -------
    ndarray, shape (lmax + 1,)

    Raises
    ------
    ValueError
        ``lmax`` not an integer ``>= 0``, ``d`` not an integer ``>= 2``, both or neither of ``g`` and
        ``exp_rate``, a non-finite ``exp_rate``, or ``n_nodes`` below ``lmax + 1``.
    """
    from scipy.special import gammaln, hyp0f1

    from . import validate

    lmax, d = validate.integer("lmax", lmax, 0), validate.integer("d", d, 2)
    if (g is None) == (exp_rate is None):
        raise ValueError(f"give exactly one of g (a callable) and exp_rate (a number); received "
                         f"g={g!r}, exp_rate={exp_rate!r}")
    ell = np.arange(lmax + 1)
    if exp_rate is not None:
        a = validate.real("exp_rate", exp_rate)
        if a == 0:
            return (ell == 0).astype(float)
        b = abs(a)
        with np.errstate(over="ignore", divide="ignore"):
            log_m = (ell * np.log(b / 2) + gammaln(d / 2) - gammaln(ell + d / 2)
                     + np.log(hyp0f1(ell + d / 2, b * b / 4)))
            m = np.exp(log_m)
        return m * np.where((a < 0) & (ell % 2 == 1), -1.0, 1.0)
    n_nodes = lmax + d + 32 if n_nodes is None else validate.integer("n_nodes", n_nodes, lmax + 1)
    x, w = roots_legendre(int(n_nodes))
    th = np.concatenate([(x + 1) * np.pi / 4, (x + 3) * np.pi / 4])
    wt = np.concatenate([w, w]) * np.pi / 4
    t = np.cos(th)
    log_s = (d - 2) * np.log(np.sin(th))
    ws = wt * np.exp(log_s - log_s.max())
    ws /= ws.sum()
    return gegenbauer_normalized(lmax, d, t) @ (ws * g(t))


def resolved_multipliers(m, i, size_name, size, tol, warning, what="multiplier"):
    """Multipliers ``m`` (dict of sequences with one extra, neglected entry) of ``heads[i]``, truncated.

    The first neglected ``m["potential"]`` relative to the largest is the truncation level: above
    ``1e-2`` a ``ValueError`` (``size_name`` does not resolve the head), above ``tol`` a ``warning``
    (a Warning subclass, attributed to the caller of the caller's ``__init__``).

    Parameters
    ----------
    m : dict of str to ndarray
        Multipliers with one extra entry (``"potential"`` required).
    i : int
        The head's index, for the messages.
    size_name : str
        The truncation's name (``"lmax"``, ``"kmax"``).
    size : int
        Its value.
    tol : float
        The warning's threshold (``kernel_tol``).
    warning : type
        The Warning subclass to issue.
    what : str
        What the multipliers are called in the error.

    Returns
    -------
    dict
        The sequences without their last entry.

    Raises
    ------
    ValueError
        A first neglected potential multiplier above ``1e-2`` of the largest.
    """
    import warnings

    tail = abs(m["potential"][-1]) / np.abs(m["potential"]).max()
    if tail > 1e-2:
        raise ValueError(f"{size_name} must resolve heads[{i}] (first neglected {what} at most 1e-2 of the "
                         f"largest); received {size_name} = {size}, at which it is {tail:.1e}")
    if tail > tol:
        warnings.warn(f"{size_name} = {size} truncates heads[{i}] at relative level {tail:.1e} > kernel_tol = "
                      f"{tol:.0e}", warning, stacklevel=validate.outside_stacklevel())
    return {k: v[:-1] for k, v in m.items()}
