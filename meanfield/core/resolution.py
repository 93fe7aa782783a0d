"""Whether a truncated density is still resolved: the measures every continuum model shares (numpy only).

One implementation each, used by the PDE on S^2 (:mod:`meanfield.analysis.field_diagnostics`), the circle
and axisymmetric PDEs (:mod:`meanfield.models.circle`, :mod:`meanfield.models.axisymmetric`,
:mod:`meanfield.analysis.axisymmetric`) and the sampling check of :mod:`meanfield.core.densities`:

* :func:`negative_mass` -- ``-int min(f, 0)`` of grid values by the geometry's own quadrature
* :func:`spectral_tail` -- relative L2 size of the top degrees (or modes) of a power spectrum
* :func:`resolution_monitor` -- the ``event(t, y)`` hook that stops a run once either exceeds its tolerance
"""

from __future__ import annotations

import numpy as np

from . import validate

__all__ = ["negative_mass", "spectral_tail", "resolution_monitor"]


def negative_mass(values, integrate) -> float:
    """``-int min(f, 0)`` (``>= 0``) of grid values ``f`` by ``integrate`` (the geometry's quadrature: a
    callable from grid values to their integral, e.g. :meth:`meanfield.sphere.SphereGrid.integrate`).

    Parameters
    ----------
    values : ndarray
        Grid values ``f`` (the shape ``integrate`` takes).
    integrate : callable
        Grid values -> their integral (a float).

    Returns
    -------
    float
        The negative mass.
    """
    return -float(integrate(np.minimum(values, 0.0)))


def spectral_tail(power, cut) -> float:
    """Relative L2 size of the degrees ``l > cut`` among ``l >= 1`` of the power spectrum ``power`` (L+1,):

    .. math:: \\Big(\\sum_{l > \\mathrm{cut}} S_l \\big/ \\sum_{l \\ge 1} S_l\\Big)^{1/2}\\quad (0 \\text{ when } S_l = 0,\\ l \\ge 1).

    Small (spectral decay) while the truncation resolves the density; it grows as the density concentrates
    below the grid scale.  Callers take ``cut = int(fraction * L)``.

    Parameters
    ----------
    power : ndarray, shape (L+1,)
        Power spectrum ``S_l >= 0`` by degree (or mode).
    cut : int
        Last degree counted as resolved.

    Returns
    -------
    float
        The relative tail in [0, 1].
    """
    total = power[1:].sum()
    return float(np.sqrt(power[cut + 1:].sum() / total)) if total > 0 else 0.0


def resolution_monitor(coefficients, tail, negative, tail_tol=1e-3, negative_tol=1e-4, where=""):
    """An ``event(t, y)`` hook stopping a run once the truncation no longer resolves the density.

    ``coefficients(y)``: the state's coefficients; ``tail(c)`` and ``negative(c)``: its :func:`spectral_tail`
    and :func:`negative_mass`.  Stops when the tail exceeds ``tail_tol`` or the negative mass exceeds
    ``negative_tol`` (each in ``[0, inf]``; ``inf`` never stops); the message names the criterion, its value
    and ``where`` (e.g. ``" at lmax = 31"``).

    Parameters
    ----------
    coefficients : callable
        ``coefficients(y)``: the state ``y`` -> its coefficients.
    tail : callable
        Coefficients -> their spectral tail (float).
    negative : callable
        Coefficients -> their negative mass (float).
    tail_tol : float, optional
        Largest allowed tail (default 1e-3).
    negative_tol : float, optional
        Largest allowed negative mass (default 1e-4).
    where : str, optional
        Appended to the message.

    Returns
    -------
    callable
        ``event(t, y)``: None while resolved, otherwise the message (a str) that stops the run.

    Raises
    ------
    ValueError
        ``tail_tol`` or ``negative_tol`` not a number ``>= 0`` (``inf`` allowed).
    """
    tail_tol = validate.real("tail_tol", tail_tol, 0, finite=False)
    negative_tol = validate.real("negative_tol", negative_tol, 0, finite=False)

    def event(t, y):
        c = coefficients(y)
        value = tail(c)
        if value > tail_tol:
            return f"density no longer resolved{where}: spectral tail {value:.2e} > {tail_tol:.0e}"
        neg = negative(c)
        if neg > negative_tol:
            return f"density no longer resolved{where}: negative mass {neg:.2e} > {negative_tol:.0e}"
        return None

    return event
