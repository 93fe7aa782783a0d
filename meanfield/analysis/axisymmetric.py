r"""Measurements for the axisymmetric and circle PDEs, and particles compared with them through ``t = <x, e>``.

* :func:`reduced_observer`, :func:`reduced_resolution_monitor`: hooks for :func:`meanfield.core.integrate.integrate` with
  :class:`~meanfield.models.axisymmetric.AxisymmetricPDE` or :class:`~meanfield.models.circle.CirclePDE`
  (mass, energies, Boltzmann entropy, negative mass, spectral tail: the S^2 observer's keys).
* :func:`w2_marginal`: the exact 1-D 2-Wasserstein distance between the law of ``theta = arccos <x_i, e>`` of
  particles and that of an axisymmetric density (quantile functions).  Since ``x -> arccos <x, e>`` is
  1-Lipschitz for the geodesic distance (and ``x -> <x, e>`` for the chordal one), the angle (``cost="angle"``)
  and ``t`` (``cost="t"``) versions bound the sphere's geodesic resp. chordal ``W2`` from below, with
  equality-type behaviour for axisymmetric measures as ``n -> infinity`` (both -> 0 together).
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from ..core import cost as _cost
from ..core import resolution, validate
from ..core.axisymmetric import angle_quantiles

__all__ = ["reduced_observer", "reduced_resolution_monitor", "w2_marginal", "w2_marginal_samples", "COSTS"]

_RENAMED = {"observer": "reduced_observer", "resolution_monitor": "reduced_resolution_monitor"}
"""The names of 0.2 and their replacements (one public name, one meaning: issue 32)."""


def __getattr__(name):
    """Module attribute fallback: the names of 0.2 (:data:`_RENAMED`) raise an ``AttributeError`` naming their
    replacement.

    Parameters
    ----------
    name : str
        The attribute looked up.

    Raises
    ------
    AttributeError
        Always (this is called only for names the module does not define).
    """
    if name in _RENAMED:
        raise AttributeError(f"meanfield.analysis.axisymmetric.{name} was renamed {_RENAMED[name]} in 0.3 (the "
                             f"reduced models' hook; one public name, one meaning)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

COSTS = ("angle", "t")
"""Ground costs of :func:`w2_marginal`: ``|theta - theta'|^2`` or ``|t - t'|^2``."""


def _check_pde(pde):
    missing = [m for m in ("coefficients", "energies", "mass", "entropy", "negative_mass", "spectral_tail")
               if not callable(getattr(pde, m, None))]
    if missing:
        raise ValueError(f"pde must be an AxisymmetricPDE or CirclePDE; received {type(pde).__name__} (no "
                         f"{', '.join(missing)})")
    return pde


def reduced_observer(pde):
    """An ``observe(t, y)`` hook on an axisymmetric or circle PDE state, with the keys of the PDE on S^2
    (:func:`meanfield.field_diagnostics.field_observer`) that these models have: ``mass``, ``energy`` (sum over
    heads), ``energy_head`` (H,), ``boltzmann_entropy`` (``-int rho log rho`` relative to the surface measure,
    the meaning the key has on S^2: ``pde.entropy`` (relative to the normalized measure) plus ``log |S^{d-1}|``, so
    that the uniform state has ``log |S^{d-1}|`` on every model, ``log 4 pi`` on S^2; NaN where ``f <= 0``
    somewhere), ``negative_mass``, ``spectral_tail``.

    Parameters
    ----------
    pde : AxisymmetricPDE or CirclePDE
        Any model with ``coefficients``, ``energies``, ``mass``, ``entropy``, ``negative_mass`` and
        ``spectral_tail`` (the :class:`~meanfield.core.model.ReducedDensityModel` protocol).

    Returns
    -------
    callable
        ``observe(t, y) -> dict`` of the keys above.

    Raises
    ------
    ValueError
        If ``pde`` lacks one of those methods (the message names them).
    """
    _check_pde(pde)
    d = int(getattr(pde, "d", 2))                       # the circle is S^1
    log_area = float(np.log(2.0) + (d / 2) * np.log(np.pi) - gammaln(d / 2))

    def observe(t, y):
        c = pde.coefficients(y)
        E = pde.energies(c)
        return {"mass": pde.mass(c), "energy": float(E.sum()), "energy_head": E,
                "boltzmann_entropy": pde.entropy(c) + log_area,
                "negative_mass": pde.negative_mass(c), "spectral_tail": pde.spectral_tail(c)}

    return observe


def _positive_tolerances(tail_tol, negative_tol):
    """The two tolerances of a resolution monitor, each checked to be ``> 0`` or ``inf`` (never stop), as
    ``pde.tail_tol`` and ``pde.negative_tol`` of a run config: a zero tolerance would stop a run at the first
    state with any tail or negative mass at all, round-off included."""
    what = "a number > 0 or inf (never stop; 0 stops at any tail or negative mass, round-off included)"
    return (validate.real("tail_tol", tail_tol, 0, lo_open=True, finite=False, what=what),
            validate.real("negative_tol", negative_tol, 0, lo_open=True, finite=False, what=what))


def reduced_resolution_monitor(pde, tail_tol=1e-3, negative_tol=1e-4):
    """An ``event(t, y)`` hook stopping the run once the truncation no longer resolves the density
    (spectral tail above ``tail_tol`` or negative mass above ``negative_tol``, each ``> 0`` or ``inf``: never);
    the message says which (:func:`meanfield.core.resolution.resolution_monitor`, the rule of the PDE on S^2 too).

    Parameters
    ----------
    pde : AxisymmetricPDE or CirclePDE
        A :class:`~meanfield.core.model.ReducedDensityModel`.
    tail_tol, negative_tol : float
        Stop once the spectral tail or the negative mass exceeds it (``> 0``, or ``inf``: never).

    Returns
    -------
    callable
        ``event(t, y) -> str | None``: the reason to stop, or None.

    Raises
    ------
    ValueError
        If ``pde`` lacks a protocol method, or a tolerance is not ``> 0`` (NaN, zero, negative, not a number).
    """
    _check_pde(pde)
    tail_tol, negative_tol = _positive_tolerances(tail_tol, negative_tol)
    return resolution.resolution_monitor(pde.coefficients, pde.spectral_tail, pde.negative_mass, tail_tol,
                                         negative_tol)


def _particle_angles(X, axis, name="X"):
    X = validate.unit_vectors(name, X, min_rows=1)
    d = X.shape[1]
    e = np.eye(d)[-1] if axis is None else validate.unit_vector("axis", axis, d)
    return np.arccos(np.clip(X @ e, -1.0, 1.0)), d


W2_MARGINAL_BYTES_PER_LEVEL = 40.0
"""Peak bytes per quantile level of :func:`w2_marginal` (``n ceil(n_sub / n)`` levels: the levels, both
quantiles and their difference in float64; measured with tracemalloc 40.0 at 1e5 to 4e6 levels)."""
W2_MARGINAL_SECONDS_PER_LEVEL = 2e-8
"""Seconds per quantile level (measured 0.9e-8 to 2.8e-8 at 1e5 to 4e6 levels, untraced)."""


def _w2_quantiles(a_sorted, quantile_fn, cost, n_sub):
    n = a_sorted.size
    m = max(1, int(np.ceil(n_sub / n)))
    levels = float(n) * m
    _cost.guard(f"w2_marginal(n_sub={n_sub}) of n = {n} particles", bytes=levels * W2_MARGINAL_BYTES_PER_LEVEL,
                seconds=levels * W2_MARGINAL_SECONDS_PER_LEVEL, fix="a smaller n_sub",
                detail=f"n ceil(n_sub / n) = {levels:.3g} quantile levels x {W2_MARGINAL_BYTES_PER_LEVEL:.0f} bytes")
    q = (np.arange(n * m) + 0.5) / (n * m)                  # midpoints: m per particle bin
    b = quantile_fn(q)
    a = np.repeat(a_sorted, m)
    if cost == "t":
        a, b = np.cos(a), np.cos(b)
    return float(np.sqrt(np.mean((a - b) ** 2)))


def w2_marginal(X, profile, axis=None, cost="angle", n_sub=200_000):
    r"""Exact 1-D ``W2`` between the ``theta``-marginal of particles ``X`` and that of the density ``profile(t)``.

    .. math:: W_2^2 = \int_0^1 |F_n^{-1}(q) - G^{-1}(q)|^2\, dq

    (``F_n`` the particles' empirical distribution of ``theta_i = arccos <x_i, axis>``, ``G`` the density's),
    by the midpoint rule with ``n_sub`` levels (``ceil(n_sub / n)`` per particle).  A lower bound of the
    geodesic (``cost="angle"``) or chordal (``cost="t"``) ``W2`` on the sphere.

    Parameters
    ----------
    X : ndarray, shape (n, d)
    profile : callable
        ``f(t) >= 0``, the density relative to ``sigma`` (need not be normalized); e.g.
        ``lambda t: pde.evaluate(b, t)``.
    axis : array_like, shape (d,), optional
    cost : {"angle", "t"}
    n_sub : int

    Returns
    -------
    float

    Raises
    ------
    ValueError
        An unknown ``cost``, ``n_sub`` not an integer ``>= 1``, ``profile`` not callable or refused by
        :func:`~meanfield.core.axisymmetric.angle_marginal` (negative, not finite, zero everywhere), ``X``
        not finite unit vectors (n >= 1), ``axis`` not a unit vector of length d, or quantile levels
        above the cost guard's limits (:func:`meanfield.core.cost.guard`).
    """
    cost = validate.choice("cost", cost, COSTS)
    n_sub = validate.integer("n_sub", n_sub, 1)
    if not callable(profile):
        raise ValueError(f"profile must be a callable f(t) >= 0; received {profile!r}")
    theta, d = _particle_angles(X, axis)
    return _w2_quantiles(np.sort(theta), lambda q: angle_quantiles(profile, d, q), cost, n_sub)


def w2_marginal_samples(X, Y, axis=None, cost="angle"):
    """Exact 1-D ``W2`` between the ``theta``-marginals of two particle sets of the same shape (n, d).

    Parameters
    ----------
    X, Y : array_like, shape (n, d)
        Unit vectors (the same ``n`` and ``d``).
    axis : array_like, shape (d,), optional
        Unit axis of ``theta = arccos <x, axis>`` (default the last basis vector).
    cost : {"angle", "t"}
        ``W2`` of the angles ``theta`` or of ``t = cos theta``.

    Returns
    -------
    float
        ``sqrt(mean((a_(i) - b_(i))^2))`` over the sorted marginals.

    Raises
    ------
    ValueError
        An unknown ``cost``, ``X`` or ``Y`` not finite unit vectors (n >= 1), ``axis`` not a unit vector of
        length d, or ``X`` and ``Y`` of different shapes.
    """
    cost = validate.choice("cost", cost, COSTS)
    a, _ = _particle_angles(X, axis)
    b, _ = _particle_angles(Y, axis, "Y")
    if np.shape(X) != np.shape(Y):
        raise ValueError(f"X and Y must have the same shape (n, d) (the same number of tokens on the same sphere); "
                         f"received X of shape {np.shape(X)} and Y of shape {np.shape(Y)}")
    a, b = np.sort(a), np.sort(b)
    if cost == "t":
        a, b = np.cos(a), np.cos(b)
    return float(np.sqrt(np.mean((a - b) ** 2)))
