r"""Axisymmetric densities on ``S^{d-1}``: the law of ``t = <x, e>`` and sampling particles from it.

A density ``f(<x, e>)`` relative to the normalized uniform measure ``sigma`` has the polar-angle marginal

.. math:: p(\theta) \propto f(\cos\theta)\, \sin^{d-2}\theta,\qquad \theta = \arccos\langle x, e\rangle \in [0, \pi]

(equivalently ``t`` has density ``propto f(t) (1 - t^2)^{(d-3)/2}``), and given ``t`` the point is uniform on
the slice ``{x : <x, e> = t}``, a sphere ``S^{d-2}`` of radius ``sqrt(1 - t^2)``.  The marginal is tabulated
on a fine grid in ``theta`` in logarithms (``sin^{d-2}`` underflows for large ``d``) and inverted by
interpolation.
"""

from __future__ import annotations

import numpy as np

from . import cost, validate

__all__ = ["angle_marginal", "angle_quantiles", "sample_axisymmetric"]

N_GRID = 20001
"""Default number of ``theta`` nodes of the tabulated marginal (spacing ``pi / 20000``)."""

SAMPLE_BYTES_PER_ENTRY = 32.0
"""Peak bytes of :func:`sample_axisymmetric` per entry ``n d`` of the sample (the directions ``v``, the terms
of ``X`` and the result; measured with tracemalloc: 25 to 36 bytes per entry for ``n d`` from 3e5 to 8e6, d = 2
to 512), plus :data:`SAMPLE_BYTES_PER_POINT` per point and :data:`SAMPLE_BYTES_PER_NODE` per node of the
tabulated marginal."""
SAMPLE_BYTES_PER_POINT = 40.0
SAMPLE_BYTES_PER_NODE = 48.0
SAMPLE_SECONDS_PER_ENTRY = 3e-7
"""Seconds of :func:`sample_axisymmetric` per entry ``n d`` and per node (measured 1.4e-7 to 2.3e-7 per entry,
d = 2 to 512, on the shared 2-core development machine)."""


def estimate_sample(n, d, n_grid=N_GRID) -> cost.Cost:
    """Estimated peak memory and time of ``sample_axisymmetric(profile, n, d, n_grid=n_grid)`` (sizes only)."""
    entries = float(n) * float(d)
    return cost.Cost(f"sample_axisymmetric(n={n}, d={d}, n_grid={n_grid})",
                     SAMPLE_BYTES_PER_ENTRY * entries + SAMPLE_BYTES_PER_POINT * n + SAMPLE_BYTES_PER_NODE * n_grid,
                     SAMPLE_SECONDS_PER_ENTRY * (entries + n_grid),
                     f"an {n} x {d} sample with its temporaries, the marginal on {n_grid} nodes")


def angle_marginal(profile, d, n_grid=N_GRID):
    """Tabulated law of ``theta = arccos <x, e>`` for the density ``profile(t)`` (relative to ``sigma``).

    Parameters
    ----------
    profile : callable
        ``f(t)`` for ``t`` an ndarray in ``[-1, 1]``, finite and ``>= 0``.
    d : int, >= 2
    n_grid : int, >= 101

    Returns
    -------
    theta : ndarray, shape (n_grid,)
        Equispaced nodes of ``[0, pi]``.
    cdf : ndarray, shape (n_grid,)
        Cumulative distribution (trapezoid rule), from 0 to 1.

    Raises
    ------
    ValueError
        ``d`` below 2, ``n_grid`` below 101, ``profile`` not callable, values not finite, of another shape,
        negative, or zero on the whole grid.
    """
    d = validate.integer("d", d, 2)
    n_grid = validate.integer("n_grid", n_grid, 101)
    if not callable(profile):
        raise ValueError(f"profile must be a callable of t (ndarray in [-1, 1]); received {profile!r}")
    theta = np.linspace(0.0, np.pi, n_grid)
    f = np.asarray(profile(np.cos(theta)), dtype=float)
    if f.shape != theta.shape or not np.all(np.isfinite(f)):
        raise ValueError(f"profile must return finite values of the shape of t, {theta.shape}; received shape {f.shape}")
    if np.any(f < 0):
        raise ValueError(f"profile must be >= 0 to be sampled (a density); received a minimum of {f.min():.3g}")
    with np.errstate(divide="ignore"):
        logp = np.log(f) + ((d - 2) * np.log(np.sin(theta)) if d > 2 else 0.0)
    if not np.any(np.isfinite(logp)):
        raise ValueError("profile must have positive mass; received a profile that is 0 on the whole grid")
    p = np.exp(logp - logp[np.isfinite(logp)].max())
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (p[1:] + p[:-1]))])
    return theta, cdf / cdf[-1]


def angle_quantiles(profile, d, q, n_grid=N_GRID):
    """Quantiles of ``theta = arccos <x, e>`` at levels ``q`` in ``[0, 1]`` (inverse of :func:`angle_marginal`).

    Parameters
    ----------
    profile : callable
        As for :func:`angle_marginal`.
    d : int, >= 2
    q : array_like
        Levels in ``[0, 1]``.
    n_grid : int, >= 101

    Returns
    -------
    ndarray, shape of ``q``
        Angles in ``[0, pi]`` (linear interpolation of the tabulated law).

    Raises
    ------
    ValueError
        Arguments :func:`angle_marginal` refuses, or ``q`` not finite reals in ``[0, 1]``.
    """
    theta, cdf = angle_marginal(profile, d, n_grid)
    q = validate.real_array("q", q)
    if np.any((q < 0) | (q > 1)):
        raise ValueError(f"q must lie in [0, 1]; received values in [{q.min():.3g}, {q.max():.3g}]")
    keep = np.concatenate([[True], np.diff(cdf) > 0])           # strictly increasing for the inverse
    return np.interp(q, cdf[keep], theta[keep])


def sample_axisymmetric(profile, n, d, axis=None, seed=None, n_grid=N_GRID):
    """``n`` i.i.d. points of ``S^{d-1}`` from the axisymmetric density ``profile(<x, axis>)``.

    Parameters
    ----------
    profile : callable
        ``f(t) >= 0`` (relative to ``sigma``; need not be normalized).
    n : int, >= 1
    d : int, >= 2
    axis : array_like, shape (d,), optional
        Unit axis (default the last basis vector).
    seed : int or numpy Generator, optional

    n_grid : int, >= 101
        Nodes of the tabulated law (:func:`angle_marginal`).

    Returns
    -------
    ndarray, shape (n, d)
        Unit vectors.

    Raises
    ------
    ValueError
        ``n`` below 1, ``d`` below 2, ``n_grid`` below 101, sizes above the memory or time limit, an ``axis``
        that is not a unit vector of length ``d``, an invalid ``seed``, or a profile :func:`angle_marginal`
        refuses.
    """
    n, d = validate.integer("n", n, 1), validate.integer("d", d, 2)
    n_grid = validate.integer("n_grid", n_grid, 101)
    estimate_sample(n, d, n_grid).check("a smaller n (points), d or n_grid")      # before any (n,) or (d,) array
    if axis is None:
        e = np.zeros(d)
        e[-1] = 1.0
    else:
        e = validate.unit_vector("axis", axis, d)
    gen = validate.rng(seed)
    theta = angle_quantiles(profile, d, gen.random(n), n_grid)
    if d == 2:                                   # the slice is two points: a fair sign
        theta = theta * np.where(gen.random(n) < 0.5, -1.0, 1.0)
    v = gen.standard_normal((n, d))
    v -= np.outer(v @ e, e)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    if d == 2:                                   # one fixed perpendicular direction, sign carried by theta
        perp = np.array([-e[1], e[0]])
        v = np.tile(perp, (n, 1))
    X = np.cos(theta)[:, None] * e + np.sin(theta)[:, None] * v
    return X / np.linalg.norm(X, axis=1, keepdims=True)
