"""Research inputs of the main job: initial densities from files or profiles.

* :func:`density_from_coefficients` -- spherical-harmonic coefficients of any degree (the layout of
  :mod:`meanfield.core.sphere`, e.g. ``results.density_coefficients(ds, -1)`` of an earlier run), put
  on a grid of degree ``lmax`` (truncated or zero-padded);
* :func:`zonal_density` -- a zonal density ``rho(mu)``, ``mu = cos(theta)`` about the north pole,
  from a tabulated profile (linear interpolation) or from Legendre coefficients ``a_l`` of
  ``rho(mu) = sum_l a_l P_l(mu)``;
* :func:`load_positions` -- initial tokens (n, 3) from a ``.npy`` file (``particles.positions``; a
  config's ``particles.n`` is taken from it by :func:`meanfield.workflow.config.resolve_positions`);
* :func:`load_array` -- a ``.npy`` file, with a message naming the config key when it is unusable.

Both densities are returned with mass 1 (``rho_00 = 1/sqrt(4 pi)``), rescaled from what was given:
the main job compares particles and PDE as probability measures.

>>> from meanfield.core.sphere import SphereGrid
>>> rho = zonal_density(SphereGrid(15), legendre=[1.0, 0.5])     # (1 + mu/2) / (4 pi)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core import validate
from ..core.densities import normalize
from ..core.sphere import SphereGrid, from_lm_table, lm_indices, to_lm_table

__all__ = ["density_from_coefficients", "zonal_density", "load_array", "load_positions", "parse_json"]


def load_array(path, name="path") -> np.ndarray:
    """The array of a ``.npy`` file; a missing or unreadable file raises ``ValueError`` naming ``name``.

    Parameters
    ----------
    path : str or path-like
        The file.
    name : str
        The config key (or argument) the message names.

    Returns
    -------
    ndarray
        As stored (object arrays refused: no pickles are loaded).

    Raises
    ------
    ValueError
        A missing, unreadable, truncated or pickled file.
    """
    p = Path(path)
    try:
        return np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise ValueError(f"{name} must name a readable .npy file; received {str(p)!r} "
                         f"({getattr(err, 'strerror', None) or err})") from None


def load_positions(path, name="positions") -> np.ndarray:
    """Initial tokens (n, 3) from a ``.npy`` file: finite unit vectors (to 1e-8, not renormalized), n >= 2.

    Parameters
    ----------
    path : str or path-like
        The file.
    name : str
        The config key the message names.

    Returns
    -------
    ndarray, shape (n, 3)

    Raises
    ------
    ValueError
        An unreadable file (:func:`load_array`), or an array that is not ``n >= 2`` finite unit vectors of
        length 3.
    """
    return validate.unit_vectors(name, load_array(path, name), 3, min_rows=2)


def _check_grid(grid):
    if not isinstance(grid, SphereGrid):
        raise ValueError(f"grid must be a meanfield.SphereGrid; received {type(grid).__name__}")
    return grid


def _degree_of(nalm):
    lmax = int(round((np.sqrt(8 * nalm + 1) - 3) / 2))
    return lmax if (lmax + 1) * (lmax + 2) // 2 == nalm else None


def density_from_coefficients(grid: SphereGrid, coefficients, name="coefficients") -> np.ndarray:
    """Coefficients (nalm,) on ``grid`` from coefficients of any degree ``L`` (mass rescaled to 1).

    Parameters
    ----------
    grid : SphereGrid
    coefficients : array_like
        Complex, either a vector of length ``(L+1)(L+2)/2`` in the layout of :mod:`meanfield.core.sphere`
        or an ``(L+1, L+1)`` table ``c[l, m]`` (entries with ``m > l`` ignored).  Degrees above
        ``grid.lmax`` are dropped, missing ones are zero.
    name : str
        The argument's name in the errors.

    Returns
    -------
    ndarray of complex128, shape (grid.nalm,)
        Mass 1 (``rho_00 = 1/sqrt(4 pi)``).

    Raises
    ------
    ValueError
        ``grid`` not a :class:`~meanfield.SphereGrid`; coefficients not a non-empty float or complex vector or
        table, a vector whose length is no ``(L+1)(L+2)/2``, a table that is not square, non-finite entries
        (the unused ``m > l`` half of a table excepted), or a mass that is not positive.
    """
    _check_grid(grid)
    a = np.asarray(coefficients)
    if a.dtype.kind not in "fc" or a.ndim not in (1, 2) or a.size == 0:
        raise ValueError(f"{name} must be a complex vector in the meanfield.core.sphere layout or an (L+1, L+1) table; "
                         f"received an array of dtype {a.dtype} and shape {a.shape}")
    if a.ndim == 1:
        L = _degree_of(a.size)
        if L is None:
            raise ValueError(f"{name} must have length (L+1)(L+2)/2 for some degree L; received length {a.size}")
        re, im = to_lm_table(a, L)
    else:
        if a.shape[0] != a.shape[1]:
            raise ValueError(f"{name} as a table must be square (L+1, L+1); received shape {a.shape}")
        re, im = np.real(a).astype(float), np.imag(a).astype(float)
    re, im = np.nan_to_num(re), np.nan_to_num(im)       # the m > l half of a table may hold NaN
    l_index, m_index = lm_indices(re.shape[0] - 1)
    if not (np.all(np.isfinite(a[..., :])) if a.ndim == 1 else
            np.all(np.isfinite(a[l_index, m_index]))):
        raise ValueError(f"{name} must be finite; received non-finite values")
    n = grid.lmax + 1
    full_re, full_im = np.zeros((n, n)), np.zeros((n, n))
    k = min(n, re.shape[0])
    full_re[:k, :k], full_im[:k, :k] = re[:k, :k], im[:k, :k]
    return normalize(grid, from_lm_table(full_re, full_im), name)


def zonal_density(grid: SphereGrid, mu=None, rho=None, legendre=None, name="profile") -> np.ndarray:
    """A zonal density about the north pole, rescaled to mass 1: from a profile or Legendre coefficients.

    Parameters
    ----------
    grid : SphereGrid
    mu, rho : array_like, optional
        A tabulated profile ``rho(mu)``: ``mu`` increasing from -1 to 1 (at least 2 values),
        ``rho >= 0``; linearly interpolated, projected on degrees ``<= grid.lmax`` by Gauss-Legendre
        quadrature.
    legendre : array_like, optional
        ``a_l`` of ``rho(mu) = sum_l a_l P_l(mu)`` (instead of ``mu``/``rho``); degrees above
        ``grid.lmax`` are dropped.
    name : str
        The input's name in the errors (``"profile"``; ``profile.mu``, ``profile.rho``, ``profile.legendre``).

    Returns
    -------
    ndarray of complex128, shape (grid.nalm,)
        Only ``m = 0`` coefficients nonzero; mass 1.

    Raises
    ------
    ValueError
        Both or neither of (``mu``, ``rho``) and ``legendre``; ``grid`` not a :class:`~meanfield.SphereGrid`;
        an empty or non-finite ``legendre``; ``mu`` and ``rho`` of different lengths or fewer than 2 values,
        ``mu`` not strictly increasing from -1 to 1, a negative ``rho``; or a mass that is not positive.
    """
    if (legendre is None) == (mu is None and rho is None):
        raise ValueError(f"{name} needs either mu and rho (a profile) or legendre (coefficients); "
                         f"received {'both' if legendre is not None else 'neither'}")
    lmax = _check_grid(grid).lmax
    ell = np.arange(lmax + 1)
    if legendre is not None:
        a = validate.real_array(f"{name}.legendre", legendre, (None,))
        if a.size == 0:
            raise ValueError(f"{name}.legendre must hold at least one coefficient; received an empty list")
        a_l = np.zeros(lmax + 1)
        a_l[:min(a.size, lmax + 1)] = a[:lmax + 1]
    else:
        mu = validate.real_array(f"{name}.mu", mu, (None,))
        rho = validate.real_array(f"{name}.rho", rho, (None,))
        if mu.size < 2 or mu.shape != rho.shape:
            raise ValueError(f"{name}.mu and {name}.rho must have the same length >= 2; received lengths "
                             f"{mu.size} and {rho.size}")
        if not (np.all(np.diff(mu) > 0) and abs(mu[0] + 1) <= 1e-12 and abs(mu[-1] - 1) <= 1e-12):
            raise ValueError(f"{name}.mu must increase strictly from -1 to 1; received {mu[0]!r} .. {mu[-1]!r}")
        if np.any(rho < 0):
            raise ValueError(f"{name}.rho must be >= 0; received a minimum {rho.min()!r}")
        # exact for the piecewise-linear interpolant: q Gauss nodes on each interval integrate degree lmax + 1
        t, wt = np.polynomial.legendre.leggauss((lmax + 3) // 2 + 1)
        half = np.diff(mu)[:, None] / 2
        x = ((mu[:-1] + mu[1:])[:, None] / 2 + half * t).ravel()
        w = (half * wt).ravel()
        f = np.interp(x, mu, rho)
        P = np.polynomial.legendre.legvander(x, lmax)                      # (nodes, lmax+1)
        a_l = (2 * ell + 1) / 2.0 * (P.T @ (w * f))                         # a_l = (2l+1)/2 int f P_l
    # rho = sum_l a_l P_l = sum_l a_l sqrt(4 pi / (2l+1)) Y_l0
    re = np.zeros((lmax + 1, lmax + 1))
    re[:, 0] = a_l * np.sqrt(4 * np.pi / (2 * ell + 1))
    return normalize(grid, from_lm_table(re, np.zeros_like(re)), f"{name}.legendre" if legendre is not None
                     else f"{name}.rho")


def parse_json(text, what):
    """The value of JSON ``text``; malformed text raises ``ValueError`` naming ``what`` (a file, an attribute) and
    where the text breaks, not only the decoder's words.

    Parameters
    ----------
    text : str or bytes
        JSON text.
    what : str
        What holds the text, for the message.

    Returns
    -------
    object
        The decoded value.

    Raises
    ------
    ValueError
        ``text`` not a str or bytes, or not valid JSON (line and column given).
    """
    import json

    if not isinstance(text, (str, bytes)):
        raise ValueError(f"{what} must be JSON text (str); received {type(text).__name__}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{what} is not valid JSON ({err.msg}, line {err.lineno} column {err.colno}): "
                         f"{str(text)[:80]!r}") from None
