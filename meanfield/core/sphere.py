r"""Spherical-harmonic grid on S^2: transforms, calculus, point evaluation (the only SH-library user).

Every other module sees coefficient vectors and grid arrays only; the conventions below are
fixed here and locked by ``tests/test_sphere.py``.

Conventions
-----------
Coefficients ``f_lm``
    ducc0 ``alm`` arrays of a *real* field: complex128, shape ``(nalm,)`` with
    ``nalm = (lmax+1)(lmax+2)/2``, only ``m >= 0`` stored, ordered ``m = 0, 1, ...`` and within
    each ``m`` by ``l = m..lmax`` (ducc0/healpy default layout, index
    ``m (2 lmax + 1 - m) / 2 + l``, see :attr:`SphereGrid.mstart`).  The field is

    .. math:: f(x) = \sum_l \Big[ f_{l0} Y_{l0}(x) + 2 \,\mathrm{Re} \sum_{m>0} f_{lm} Y_{lm}(x) \Big],
              \qquad f_{lm} = \int_{S^2} f \,\overline{Y_{lm}}\, dx,

    with orthonormal complex ``Y_lm`` (``int |Y_lm|^2 = 1``) *including* the Condon-Shortley
    phase ``(-1)^m``, i.e. ``Y_lm = scipy.special.sph_harm_y(l, m, theta, phi)``.  ``f_l0`` is
    real (its imaginary part is ignored by synthesis).  The L2 inner product of two real fields
    is ``Re sum_lm c_m f_lm conj(g_lm)`` with ``c_0 = 1``, ``c_m = 2`` (:meth:`SphereGrid.inner`).
    :func:`to_real` / :func:`from_real` view ``f_lm`` as ``2 nalm`` float64 (re, im pairs) for
    ODE integrators.
Grid
    Gauss-Legendre rings north to south: colatitude ``theta`` (nlat,) increasing from near 0 to
    near pi (no pole rings), longitude ``phi_k = 2 pi k / nlon`` (nlon,); grid arrays have shape
    ``(nlat, nlon)``; ``weights`` (nlat, nlon) are per-pixel quadrature weights summing to 4 pi.
Tangent vectors
    Grid vector fields have shape ``(2, nlat, nlon)`` holding the components on
    ``(e_theta, e_phi)``, ``e_theta = (cos t cos p, cos t sin p, -sin t)``,
    ``e_phi = (-sin p, cos p, 0)``, so ``grad f = (d f/d theta, (1/sin theta) d f/d phi)``
    (ducc0 ``DERIV1``).  Cartesian tangent vectors have shape ``(..., 3)``.
    ``div`` is the surface divergence, ``div grad = Lap``, ``Lap Y_lm = -l(l+1) Y_lm``; it is
    computed by the adjoint of the gradient (weak form), so for a spin-1 field of spin-1
    E-mode coefficients ``E_lm`` (``grad f`` has ``E_lm = +sqrt(l(l+1)) f_lm``),
    ``(div v)_lm = -sqrt(l(l+1)) E_lm`` and ``(div v)_00 = 0`` exactly.
Arbitrary points
    Unit vectors ``(n, 3)``, never renormalized.  :meth:`SphereGrid.prepare_points` returns a
    :class:`PointSet` (angles and frame computed once) whose ``adjoint`` / ``evaluate`` /
    ``gradient`` run ducc0's NUFFT-based ``*_general`` transforms at relative accuracy
    ``epsilon``; ``SphereGrid.adjoint_at`` / ``evaluate`` / ``gradient_at`` are one-off calls of them.
pyshtools
    :meth:`SphereGrid.to_shcoeffs` gives real ``SHCoeffs`` with ``normalization='ortho'``,
    ``csphase=-1``: ``C_lm = sqrt(2) Re f_lm``, ``S_lm = -sqrt(2) Im f_lm`` (m > 0),
    ``C_l0 = Re f_l0``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import ducc0
import numpy as np

from . import cost, validate

__all__ = ["SphereGrid", "PointSet", "NodeTransforms", "to_real", "from_real", "cartesian_to_angles", "nalm_for",
           "lm_indices", "to_lm_table", "from_lm_table", "to_real_basis", "from_real_basis", "resize_coefficients",
           "legendre_table", "rotate_coefficients"]

_SHT = ducc0.sht.experimental
_GEOM = "GL"


def nalm_for(lmax):
    """Number of stored coefficients ``(lmax+1)(lmax+2)/2`` of a real field of degree ``lmax``.

    Parameters
    ----------
    lmax : int
        Degree, ``>= 0`` (not checked).

    Returns
    -------
    int
    """
    return (lmax + 1) * (lmax + 2) // 2


def to_real(f_lm):
    """View complex coefficients as a float64 vector of (re, im) pairs.

    Parameters
    ----------
    f_lm : ndarray, shape (nalm,), complex128

    Returns
    -------
    ndarray, shape (2 nalm,), float64
        A view of ``f_lm`` when it is contiguous complex128 (writes go through), else a copy.

    Raises
    ------
    ValueError
        ``f_lm`` not a 1-d complex array.
    """
    a = np.asarray(f_lm)
    if a.ndim != 1 or not np.iscomplexobj(a):
        raise ValueError(f"f_lm must be a 1-d complex array; received dtype {a.dtype}, shape {a.shape}")
    return np.ascontiguousarray(a, dtype=np.complex128).view(np.float64)


def from_real(v):
    """Inverse of :func:`to_real`: float64 ``(2 nalm,)`` (re, im pairs) -> complex ``(nalm,)``.

    Returns a view when ``v`` is contiguous float64, else a copy.

    Parameters
    ----------
    v : array_like, shape (2 nalm,)
        Real (re, im) pairs.

    Returns
    -------
    ndarray, shape (nalm,), complex128

    Raises
    ------
    ValueError
        ``v`` not a real 1-d array of even length.
    """
    a = np.asarray(v)
    if a.ndim != 1 or a.size % 2 or np.iscomplexobj(a):
        raise ValueError(f"v must be a real 1-d array of even length; received dtype {a.dtype}, shape {a.shape}")
    return np.ascontiguousarray(a, dtype=np.float64).view(np.complex128)


def to_real_basis(f_lm, lmax):
    r"""Coefficients (..., nalm) -> their coordinates (..., (lmax+1)^2) in the real orthonormal basis.

    The basis is ``Y_l0``, ``sqrt 2 Re Y_lm`` and ``-sqrt 2 Im Y_lm`` (``m > 0``); the coordinates are
    ``(f_l0, sqrt 2 Re f_lm, sqrt 2 Im f_lm)``: the layout's ``nalm`` real parts (scaled) followed by the
    imaginary parts of the ``m > 0`` entries.  Both a field's coefficients (:meth:`SphereGrid.analysis`) and
    the coefficients of a weighted measure (:meth:`PointSet.adjoint`, ``sum_j w_j conj(Y_lm(x_j))``) map to
    the coordinates in that basis, so a real matrix acting on them is an operator between real fields
    (:mod:`meanfield.core.bispherical`).

    Parameters
    ----------
    f_lm : array_like, shape (..., nalm)
        Coefficients in this module's layout.
    lmax : int
        Their degree.

    Returns
    -------
    ndarray, shape (..., (lmax+1)^2), float64

    Raises
    ------
    ValueError
        A last axis other than ``nalm``.
    """
    a = np.asarray(f_lm)
    nalm = nalm_for(lmax)
    if a.shape[-1:] != (nalm,):
        raise ValueError(f"f_lm must have shape (..., {nalm}) for lmax = {lmax}; received shape {a.shape}")
    s = np.full(nalm, np.sqrt(2.0))
    s[:lmax + 1] = 1.0                                  # m = 0 comes first in the layout
    return np.concatenate([a.real * s, np.sqrt(2.0) * a.imag[..., lmax + 1:]], axis=-1)


def from_real_basis(r, lmax):
    """Inverse of :func:`to_real_basis`: real coordinates (..., (lmax+1)^2) -> complex coefficients (..., nalm).

    Parameters
    ----------
    r : array_like, shape (..., (lmax+1)^2)
        Real coordinates.
    lmax : int
        Degree.

    Returns
    -------
    ndarray, shape (..., nalm), complex128

    Raises
    ------
    ValueError
        A last axis other than ``(lmax+1)^2``.
    """
    r = np.asarray(r, dtype=np.float64)
    nalm = nalm_for(lmax)
    if r.shape[-1:] != ((lmax + 1) ** 2,):
        raise ValueError(f"r must have shape (..., {(lmax + 1) ** 2}) for lmax = {lmax}; received shape {r.shape}")
    out = np.empty(r.shape[:-1] + (nalm,), np.complex128)
    out.real[..., :lmax + 1] = r[..., :lmax + 1]
    out.real[..., lmax + 1:] = r[..., lmax + 1:nalm] / np.sqrt(2.0)
    out.imag[..., :lmax + 1] = 0.0
    out.imag[..., lmax + 1:] = r[..., nalm:] / np.sqrt(2.0)
    return out


def resize_coefficients(f_lm, lmax_from, lmax_to):
    """Coefficients (..., nalm) of degree ``lmax_from`` truncated or zero-padded to degree ``lmax_to``.

    Parameters
    ----------
    f_lm : array_like, shape (..., nalm_for(lmax_from))
        Coefficients.
    lmax_from, lmax_to : int
        Their degree and the new one.

    Returns
    -------
    ndarray, shape (..., nalm_for(lmax_to))
        ``f_lm`` itself (as an array) when the degrees are equal, else a new complex128 array.

    Raises
    ------
    ValueError
        ``lmax_from`` not an integer ``>= 0`` (:func:`lm_indices`).
    """
    a = np.asarray(f_lm)
    if lmax_from == lmax_to:
        return a
    lf, mf = lm_indices(lmax_from)
    keep = lf <= lmax_to
    out = np.zeros(a.shape[:-1] + (nalm_for(lmax_to),), np.complex128)
    out[..., (mf[keep] * (2 * lmax_to + 1 - mf[keep])) // 2 + lf[keep]] = a[..., keep]
    return out


def rotate_coefficients(f_lm, lmax, psi, theta, phi, nthreads=1):
    """Coefficients (..., nalm) of the field rotated actively by ``R = R_z(phi) R_y(theta) R_z(psi)``:
    ``f_rot(x) = f(R^T x)`` (ducc0's ``rotate_alm``; measures' coefficients rotate the same way).

    Parameters
    ----------
    f_lm : array_like, shape (..., nalm)
        Coefficients of degree ``lmax``.
    lmax : int
        Degree.
    psi, theta, phi : float
        Euler angles (radians) of ``R``.
    nthreads : int
        Threads of ducc0.

    Returns
    -------
    ndarray, shape (..., nalm), complex128

    Raises
    ------
    ValueError
        A last axis other than ``nalm``.
    """
    a = np.ascontiguousarray(f_lm, dtype=np.complex128)
    if a.shape[-1:] != (nalm_for(lmax),):
        raise ValueError(f"f_lm must have shape (..., {nalm_for(lmax)}) for lmax = {lmax}; received shape {a.shape}")
    flat = a.reshape(-1, a.shape[-1])
    out = np.stack([ducc0.sht.rotate_alm(row, int(lmax), float(psi), float(theta), float(phi), nthreads=nthreads)
                    for row in flat])
    return out.reshape(a.shape)


def legendre_table(lmax, theta):
    """``Y_lm(theta, 0)`` (real: the normalized associated Legendre functions with the Condon-Shortley
    phase), shape (nalm, len(theta)), in this module's layout (scipy's ``sph_harm_y``).

    Parameters
    ----------
    lmax : int
        Degree, ``>= 0``.
    theta : array_like, shape (k,)
        Colatitudes (radians).

    Returns
    -------
    ndarray, shape (nalm, k), float64

    Raises
    ------
    ValueError
        ``lmax`` not an integer ``>= 0``.
    """
    from scipy.special import sph_harm_y

    l_index, m_index = lm_indices(lmax)
    theta = np.asarray(theta, dtype=np.float64)
    return sph_harm_y(l_index[:, None], m_index[:, None], theta[None, :], 0.0).real


def lm_indices(lmax):
    """Degree and order of each stored coefficient, ``(l_index, m_index)``, each of shape (nalm,).

    The layout of the module docstring (``m = 0, 1, ...``, within each ``m`` ``l = m..lmax``); equal
    to :attr:`SphereGrid.l_index` and :attr:`SphereGrid.m_index` of any grid of degree ``lmax``.

    Parameters
    ----------
    lmax : int
        Degree, ``>= 0``.

    Returns
    -------
    l_index, m_index : ndarray of int, shape (nalm,)

    Raises
    ------
    ValueError
        ``lmax`` not an integer ``>= 0``.
    """
    lmax = validate.integer("lmax", lmax, 0)
    l_index = np.concatenate([np.arange(m, lmax + 1) for m in range(lmax + 1)])
    m_index = np.concatenate([np.full(lmax + 1 - m, m) for m in range(lmax + 1)])
    return l_index, m_index


def to_lm_table(f_lm, lmax):
    """Coefficient vectors -> their real and imaginary parts in an ``(l, m)`` table.

    Parameters
    ----------
    f_lm : array_like, shape (..., nalm), complex
        Coefficients in this module's layout (any leading dimensions, e.g. time).
    lmax : int
        Degree; ``nalm = (lmax+1)(lmax+2)/2``.

    Returns
    -------
    re, im : ndarray, shape (..., lmax+1, lmax+1), float64
        ``re[..., l, m] = Re f_lm``, ``im[..., l, m] = Im f_lm`` for ``m <= l``; NaN where ``m > l``.

    Raises
    ------
    ValueError
        ``lmax`` not an integer ``>= 0``, or a last axis other than ``nalm``.
    """
    a = np.asarray(f_lm)
    l_index, m_index = lm_indices(lmax)
    if a.ndim < 1 or a.shape[-1] != l_index.size:
        raise ValueError(f"f_lm must have shape (..., nalm) with nalm = {l_index.size} for lmax = {lmax}; "
                         f"received shape {a.shape}")
    re = np.full(a.shape[:-1] + (lmax + 1, lmax + 1), np.nan)
    im = re.copy()
    re[..., l_index, m_index] = a.real
    im[..., l_index, m_index] = a.imag
    return re, im


def from_lm_table(re, im):
    """Inverse of :func:`to_lm_table`: ``(l, m)`` tables (..., lmax+1, lmax+1) -> complex (..., nalm).

    ``lmax`` is read from the table's shape; entries with ``m > l`` are ignored.

    Parameters
    ----------
    re, im : array_like, shape (..., lmax+1, lmax+1)
        Real and imaginary parts, ``[..., l, m]``.

    Returns
    -------
    ndarray, shape (..., nalm), complex

    Raises
    ------
    ValueError
        Tables that are not square in their last two axes, empty, or of different shapes.
    """
    re, im = np.asarray(re), np.asarray(im)
    if re.ndim < 2 or re.shape[-1] != re.shape[-2] or re.shape[-1] < 1 or im.shape != re.shape:
        raise ValueError(f"re and im must have the same shape (..., lmax+1, lmax+1); received shapes "
                         f"{re.shape} and {im.shape}")
    l_index, m_index = lm_indices(re.shape[-1] - 1)
    return re[..., l_index, m_index] + 1j * im[..., l_index, m_index]


def _check_points(points):
    """``points`` as float64 (n, 3), checked to be unit vectors (| |x|^2 - 1 | <= 1e-8)."""
    return validate.unit_vectors("points", points, 3)


_SCRATCH = threading.local()     # per-thread buffers of PointSet._directions(..., scratch=True)


def _buffers(n):
    """Float64 buffers for :func:`_polar` and one gradient synthesis over ``n`` points (fresh)."""
    return {"xyz": np.empty((3, n)), "r": np.empty(n), "n2": np.empty(n), "t": np.empty(n),
            "loc": np.empty((n, 2)), "g": np.empty((2, n))}


def _scratch(n):
    """This thread's buffers for ``n`` points, reused from the last call with the same ``n``.

    Fresh multi-megabyte arrays cost page faults on every call (at n = 10^6 the angle pass took 22 ms
    with fresh arrays, ~13 ms in reused ones); the velocity's transient point set lives here instead.
    About 88 bytes per point stay allocated per thread (the last ``n`` only).
    """
    w = getattr(_SCRATCH, "buffers", None)
    if w is None or w["r"].shape[0] != n:
        w = _SCRATCH.buffers = _buffers(n)
    return w


def _polar(x, norm2=None, work=None):
    """Angles ``loc`` (n, 2) of rows ``x`` (n, 3) and the pieces ``r = sin theta``, ``z = cos theta``,
    ``cos phi``, ``sin phi`` (each (n,)) of the tangent frame, from Cartesian coordinates (no trig beyond
    the two ``arctan2``; ``phi = 0`` on the axis), and ``norm2``.

    ``norm2`` None: ``x`` are unit rows.  Otherwise ``norm2 = |x_i|^2 > 0`` (``True``: computed here, in
    the same pass) and everything is that of the directions ``x / |x|`` (the angles are scale-free; ``r``
    and ``z`` are divided by ``|x|``): the radial projection costs no extra pass over the points.
    Every operation runs on contiguous coordinate rows (a C-ordered copy of ``x.T``: numpy's SIMD loops;
    on the strided rows of an F-ordered copy, or with ``np.hypot``, the same arithmetic is 5-10x slower).
    ``work``: the buffers to compute in (:func:`_buffers`; the results are views of them), default fresh.
    """
    w = work if work is not None else _buffers(x.shape[0])
    np.copyto(w["xyz"], x.T)                   # contiguous coordinate rows (a copy: modified in place)
    cx, cy, z = w["xyz"]
    tmp = w["t"]
    r = np.multiply(cx, cx, out=w["r"])
    r += np.multiply(cy, cy, out=tmp)
    if norm2 is True:                          # |x|^2 from the same pass
        norm2 = np.multiply(z, z, out=w["n2"])
        norm2 += r
    np.sqrt(r, out=r)                          # r = sqrt(x^2 + y^2) of the rows as given
    on_axis = bool(r.min(initial=np.inf) == 0.0)
    if on_axis:
        on_axis = r == 0.0
        inv_r = np.divide(1.0, np.where(on_axis, 1.0, r), out=tmp)
    else:
        inv_r = np.divide(1.0, r, out=tmp)
    cp, sp = cx, cy
    cp *= inv_r                                # cos phi, sin phi
    sp *= inv_r
    if on_axis is not False:
        cp[on_axis] = 1.0
    loc = w["loc"]
    phi = np.arctan2(sp, cp, out=inv_r)        # inv_r no longer needed: its buffer is reused
    np.add(phi, 2.0 * np.pi, out=phi, where=phi < 0.0)   # longitude in [0, 2 pi), no temporary product
    np.add(phi, 0.0, out=loc[:, 1])            # the copy into loc, with -0.0 -> +0.0 (as phi + 0 * 2 pi did)
    np.arctan2(r, z, out=loc[:, 0])            # colatitude (scale-free)
    if norm2 is not None:
        inv = np.sqrt(norm2, out=phi)          # phi is in loc now: its buffer is reused again
        np.divide(1.0, inv, out=inv)
        r *= inv                               # sin theta, cos theta of the direction
        z *= inv
    return loc, r, z, cp, sp, norm2


def cartesian_to_angles(points):
    """Colatitude and longitude of unit vectors (vectorized).

    Parameters
    ----------
    points : array_like, shape (n, 3)
        Unit vectors (checked: ``| |x|^2 - 1 | <= 1e-8``).

    Returns
    -------
    ndarray, shape (n, 2)
        ``[:, 0]`` colatitude in [0, pi], ``[:, 1]`` longitude in [0, 2 pi) (ducc0's ``loc``).
    """
    return _polar(_check_points(points))[0]


def _frame(theta, phi):
    """Tangent frame ``e_theta, e_phi``, each of shape ``theta.shape + (3,)`` (broadcast)."""
    ct, st, cp, sp = np.cos(theta), np.sin(theta), np.cos(phi), np.sin(phi)
    e_theta = np.stack(np.broadcast_arrays(ct * cp, ct * sp, -st), axis=-1)
    e_phi = np.stack(np.broadcast_arrays(-sp, cp, np.zeros_like(cp)), axis=-1)
    return e_theta, e_phi


GRID_BYTES_PER_NODE = 120.0
"""Peak bytes of building a :class:`SphereGrid` per grid node (nodes, frames, weights and temporaries;
measured with tracemalloc: 116 at lmax = 500 and 1000)."""
GRID_SECONDS_PER_NODE = 1e-6
"""Seconds of building a :class:`SphereGrid` per node (measured 3.5e-7 and 7.5e-7 at lmax = 500 and 1000)."""


def estimate_grid(lmax, nlat, nlon) -> cost.Cost:
    """Estimated peak memory and time of building ``SphereGrid(lmax, nlat, nlon)`` (sizes only)."""
    nodes = float(nlat) * nlon
    return cost.Cost(f"SphereGrid(lmax={lmax}, nlat={nlat}, nlon={nlon})",
                     nodes * GRID_BYTES_PER_NODE + 40.0 * (lmax + 1) * (lmax + 2) / 2, nodes * GRID_SECONDS_PER_NODE,
                     f"{nodes:.3g} grid nodes")


@dataclass(frozen=True, eq=False)
class SphereGrid:
    """Gauss-Legendre grid and spectral operators for real fields of degree ``<= lmax``.

    Parameters
    ----------
    lmax : int
        Maximum degree, an integer ``>= 2``.
    nlat : int, optional
        Number of GL rings, ``>= lmax + 1`` (default ``lmax + 1``: exact analysis of
        degree-``lmax`` fields).
    nlon : int, optional
        Points per ring, ``>= 2 lmax + 1`` (default ``2 lmax + 2``).
    nthreads : int
        Threads for every ducc0 call (1 is fastest below lmax ~ 127).

    Attributes
    ----------
    theta : ndarray (nlat,)
    phi : ndarray (nlon,)
    ring_weights : ndarray (nlat,)
        GL weights times ``2 pi / nlon`` (weight of each pixel of a ring).
    weights : ndarray (nlat, nlon)
        Per-pixel quadrature weights, summing to 4 pi.
    nodes : ndarray (nlat, nlon, 3)
        Unit vectors of the pixels.
    e_theta, e_phi : ndarray (nlat, nlon, 3)
        Tangent frame at the pixels.
    l_index, m_index : ndarray (nalm,)
        Degree and order of each coefficient.
    mstart : ndarray (lmax+1,), uintp
        ducc0 layout: index of the (hypothetical) entry ``(l=0, m)``.

    Notes
    -----
    Analysis is exact for band-limited fields of degree ``<= min(2 nlat - 1, nlon - 1) - lmax``.

    Raises
    ------
    ValueError
        ``lmax`` below 2, ``nlat`` below ``lmax + 1``, ``nlon`` below ``2 lmax + 1``, ``nthreads`` below 1 (any
        of them not an integer), or a grid above the memory or time limit (:mod:`meanfield.core.cost`).
    """

    lmax: int
    nlat: int | None = None
    nlon: int | None = None
    nthreads: int = 1

    def __post_init__(self):
        lmax = validate.integer("lmax", self.lmax, 2)
        nlat = validate.integer("nlat", lmax + 1 if self.nlat is None else self.nlat, lmax + 1,
                                what=f"an integer >= lmax + 1 = {lmax + 1}")
        nlon = validate.integer("nlon", 2 * lmax + 2 if self.nlon is None else self.nlon, 2 * lmax + 1,
                                what=f"an integer >= 2 lmax + 1 = {2 * lmax + 1}")
        nt = validate.integer("nthreads", self.nthreads, 1)
        estimate_grid(lmax, nlat, nlon).check("a smaller lmax (or nlat, nlon)")     # before the (nlat, nlon) arrays
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("lmax", lmax)
        set_("nlat", int(nlat))
        set_("nlon", int(nlon))
        set_("nthreads", int(nt))
        theta = ducc0.misc.GL_thetas(self.nlat)
        phi = 2.0 * np.pi * np.arange(self.nlon) / self.nlon
        ring_w = _SHT.get_gridweights(_GEOM, self.nlat) / self.nlon
        m_index = np.concatenate([np.full(lmax + 1 - m, m) for m in range(lmax + 1)])
        l_index = np.concatenate([np.arange(m, lmax + 1) for m in range(lmax + 1)])
        mstart = np.array([m * (2 * lmax + 1 - m) // 2 for m in range(lmax + 1)], dtype=np.uintp)
        T, P = np.meshgrid(theta, phi, indexing="ij")
        e_theta, e_phi = _frame(T, P)
        nodes = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), np.cos(T)], axis=-1)
        ll1 = (l_index * (l_index + 1.0))
        arrays = dict(theta=theta, phi=phi, ring_weights=ring_w,
                      weights=np.repeat(ring_w[:, None], self.nlon, axis=1), nodes=nodes,
                      e_theta=e_theta, e_phi=e_phi, l_index=l_index, m_index=m_index, mstart=mstart,
                      _lap=-ll1, _mweight=np.where(m_index > 0, 2.0, 1.0))
        for k, v in arrays.items():
            v.setflags(write=False)
            set_(k, v)
        set_("_kw", dict(lmax=lmax, mmax=lmax, mstart=mstart, nthreads=self.nthreads))

    # ------------------------------------------------------------------ constructors, sizes
    @classmethod
    def dealiased(cls, lmax, nthreads=1):
        """Grid on which the product of two degree-``lmax`` fields is analysed exactly.

        ``nlat = ceil((3 lmax + 1) / 2)`` (GL is exact to polynomial degree ``2 nlat - 1 >= 3 lmax``)
        and ``nlon = ducc0.fft.good_size(3 lmax + 1)``.

        Parameters
        ----------
        lmax : int
            Degree of the fields, ``>= 2``.
        nthreads : int
            Threads for every ducc0 call.

        Returns
        -------
        SphereGrid

        Raises
        ------
        ValueError
            ``lmax`` not an integer ``>= 2``, or as for the constructor.
        """
        lmax = validate.integer("lmax", lmax, 2)
        return cls(lmax, nlat=(3 * lmax + 2) // 2, nlon=int(ducc0.fft.good_size(3 * lmax + 1, True)),
                   nthreads=nthreads)

    @property
    def nalm(self):
        """Number of stored coefficients, ``(lmax+1)(lmax+2)/2``."""
        return nalm_for(self.lmax)

    @property
    def shape(self):
        """Grid shape ``(nlat, nlon)``."""
        return (self.nlat, self.nlon)

    def index(self, l, m):
        """Position of ``(l, m)``, ``0 <= m <= l <= lmax``, in a coefficient vector.

        Parameters
        ----------
        l, m : int
            Degree and order.

        Returns
        -------
        int

        Raises
        ------
        ValueError
            Not ``0 <= m <= l <= lmax``.
        """
        if not 0 <= m <= l <= self.lmax:
            raise ValueError(f"(l, m) must satisfy 0 <= m <= l <= lmax = {self.lmax}; received ({l}, {m})")
        return int(self.mstart[m]) + l

    # ------------------------------------------------------------------ checks
    def _alm(self, f_lm, name="f_lm"):
        a = np.asarray(f_lm)
        if a.shape != (self.nalm,):
            raise ValueError(f"{name} must have shape (nalm,) = ({self.nalm},) for lmax = {self.lmax}; "
                             f"received shape {a.shape}")
        return a.astype(np.complex128, copy=False)

    def _grid(self, f, name="f", lead=()):
        a = np.asarray(f)
        shape = lead + self.shape
        if a.shape != shape:
            raise ValueError(f"{name} must have shape {shape} for this grid; received shape {a.shape}")
        if np.iscomplexobj(a):
            raise ValueError(f"{name} must be real; received dtype {a.dtype}")
        return a.astype(np.float64, copy=False)

    # ------------------------------------------------------------------ transforms
    def analysis(self, f, out=None):
        """Grid values -> coefficients by GL quadrature.

        Parameters
        ----------
        f : ndarray, shape (nlat, nlon), real
        out : ndarray, shape (nalm,), complex128, optional

        Returns
        -------
        f_lm : ndarray, shape (nalm,), complex128
        """
        f = self._grid(f)
        out = np.empty(self.nalm, np.complex128) if out is None else out
        _SHT.analysis_2d(map=f[None], spin=0, geometry=_GEOM, alm=out[None], **self._kw)
        return out

    def synthesis(self, f_lm, out=None):
        """Coefficients -> grid values, shape (nlat, nlon).

        Parameters
        ----------
        f_lm : array_like, shape (nalm,)
            Coefficients.
        out : ndarray, shape (nlat, nlon), float64, optional
            Written and returned.

        Returns
        -------
        ndarray, shape (nlat, nlon), float64

        Raises
        ------
        ValueError
            ``f_lm`` not of shape ``(nalm,)``.
        """
        a = self._alm(f_lm)
        out = np.empty(self.shape) if out is None else out
        _SHT.synthesis_2d(alm=a[None], spin=0, geometry=_GEOM, map=out[None], **self._kw)
        return out

    def gradient(self, f_lm, out=None):
        """Surface gradient on the grid.

        Parameters
        ----------
        f_lm : array_like, shape (nalm,)
            Coefficients.
        out : ndarray, shape (2, nlat, nlon), float64, optional
            Written and returned.

        Returns
        -------
        ndarray, shape (2, nlat, nlon)
            ``(d f/d theta, (1/sin theta) d f/d phi)``: components on ``(e_theta, e_phi)``.
        """
        a = self._alm(f_lm)
        out = np.empty((2,) + self.shape) if out is None else out
        _SHT.synthesis_2d_deriv1(alm=a[None], geometry=_GEOM, map=out, **self._kw)
        return out

    def divergence(self, v, out=None):
        """Coefficients of the surface divergence of a tangent field (weak form, exact for
        band-limited ``v`` within the quadrature's degree).

        Parameters
        ----------
        v : ndarray, shape (2, nlat, nlon)
            Components on ``(e_theta, e_phi)``.

        Returns
        -------
        ndarray, shape (nalm,), complex128
            ``-sqrt(l(l+1)) E_lm(v)``; the ``l = 0`` entry is exactly 0.
        """
        v = self._grid(v, "v", (2,))
        out = np.empty(self.nalm, np.complex128) if out is None else out
        _SHT.adjoint_synthesis_2d(map=v, spin=1, geometry=_GEOM, mode="DERIV1", alm=out[None],
                                  ringfactor=self.ring_weights, **self._kw)
        np.negative(out, out=out)
        return out

    def laplacian(self, f_lm):
        """Coefficients of ``Lap_S f``: ``-l(l+1) f_lm``.

        Parameters
        ----------
        f_lm : array_like, shape (nalm,)
            Coefficients.

        Returns
        -------
        ndarray, shape (nalm,), complex128

        Raises
        ------
        ValueError
            ``f_lm`` not of shape ``(nalm,)``.
        """
        return self._lap * self._alm(f_lm)

    def multiply_degree(self, f_lm, mult):
        """Apply a per-degree multiplier (e.g. Funk-Hecke): ``mult[l] f_lm``; ``mult`` shape (lmax+1,).

        Parameters
        ----------
        f_lm : array_like, shape (nalm,)
            Coefficients.
        mult : array_like, shape (lmax + 1,)
            One factor per degree.

        Returns
        -------
        ndarray, shape (nalm,)

        Raises
        ------
        ValueError
            ``mult`` not of shape ``(lmax + 1,)`` or ``f_lm`` not of shape ``(nalm,)``.
        """
        mult = np.asarray(mult)
        if mult.shape != (self.lmax + 1,):
            raise ValueError(f"mult must have shape (lmax + 1,) = ({self.lmax + 1},); received shape {mult.shape}")
        return mult[self.l_index] * self._alm(f_lm)

    def integrate(self, f):
        """Quadrature ``int_{S^2} f dx`` of grid values (nlat, nlon).

        Parameters
        ----------
        f : array_like, shape (nlat, nlon)
            Real grid values.

        Returns
        -------
        float

        Raises
        ------
        ValueError
            ``f`` complex or not of the grid's shape.
        """
        return float(self.ring_weights @ self._grid(f).sum(axis=1))

    def inner(self, f_lm, g_lm):
        """L2 inner product ``int f g dx`` of two real fields from their coefficients.

        Parameters
        ----------
        f_lm, g_lm : array_like, shape (nalm,)
            Coefficients.

        Returns
        -------
        float

        Raises
        ------
        ValueError
            Either not of shape ``(nalm,)``.
        """
        a, b = self._alm(f_lm), self._alm(g_lm, "g_lm")
        return float(np.sum(self._mweight * (a.real * b.real + a.imag * b.imag)))

    def power_spectrum(self, f_lm):
        """``S_l = sum_{m=-l}^{l} |f_lm|^2`` (m > 0 counted twice), shape (lmax+1,); ``sum S_l = int f^2``.

        Parameters
        ----------
        f_lm : array_like, shape (nalm,)
            Coefficients.

        Returns
        -------
        ndarray, shape (lmax + 1,)

        Raises
        ------
        ValueError
            ``f_lm`` not of shape ``(nalm,)``.
        """
        a = self._alm(f_lm)
        return np.bincount(self.l_index, weights=self._mweight * np.abs(a) ** 2, minlength=self.lmax + 1)

    # ------------------------------------------------------------------ tangent vectors
    def to_cartesian(self, v):
        """Components (2, nlat, nlon) on ``(e_theta, e_phi)`` -> 3-vectors (nlat, nlon, 3).

        Parameters
        ----------
        v : array_like, shape (2, nlat, nlon)
            Real tangent components.

        Returns
        -------
        ndarray, shape (nlat, nlon, 3)

        Raises
        ------
        ValueError
            ``v`` complex or not of shape ``(2, nlat, nlon)``.
        """
        v = self._grid(v, "v", (2,))
        return v[0, ..., None] * self.e_theta + v[1, ..., None] * self.e_phi

    def from_cartesian(self, V):
        """3-vectors (nlat, nlon, 3) -> components (2, nlat, nlon).

        This is the *tangent projection* ``P_x V``: the normal part ``<V, x> x`` is dropped.

        Parameters
        ----------
        V : array_like, shape (nlat, nlon, 3)
            Vectors at the grid nodes.

        Returns
        -------
        ndarray, shape (2, nlat, nlon)

        Raises
        ------
        ValueError
            ``V`` not of shape ``(nlat, nlon, 3)``.
        """
        V = np.asarray(V, dtype=np.float64)
        if V.shape != self.shape + (3,):
            raise ValueError(f"V must have shape {self.shape + (3,)}; received shape {V.shape}")
        return np.stack([np.einsum("ijk,ijk->ij", V, self.e_theta), np.einsum("ijk,ijk->ij", V, self.e_phi)])

    # ------------------------------------------------------------------ arbitrary points
    def prepare_points(self, points, epsilon=1e-13):
        """Unit vectors ``points`` (n, 3) prepared once for repeated transforms (:class:`PointSet`).

        Use it when several fields are evaluated at, or several weightings summed over, the same
        points: angles and tangent frame are computed here only (at n = 10^6 they cost twice the
        transforms).  ``epsilon`` in ``[1e-14, 1)`` is the transforms' relative accuracy.

        Parameters
        ----------
        points : array_like, shape (n, 3)
            Unit vectors.
        epsilon : float
            Relative accuracy, in ``[1e-14, 1)``.

        Returns
        -------
        PointSet

        Raises
        ------
        ValueError
            As for :class:`PointSet`.
        """
        return PointSet(self, points, epsilon)

    def evaluate(self, f_lm, points, epsilon=1e-13):
        """Field values at unit vectors ``points`` (n, 3) -> (n,), ducc0 ``synthesis_general``
        with relative accuracy ``epsilon`` (one-off :meth:`PointSet.evaluate`).

        Parameters
        ----------
        f_lm : array_like, shape (nalm,)
            Coefficients.
        points : array_like, shape (n, 3)
            Unit vectors.
        epsilon : float
            Relative accuracy, in ``[1e-14, 1)``.

        Returns
        -------
        ndarray, shape (n,)

        Raises
        ------
        ValueError
            As for :class:`PointSet` and :meth:`PointSet.evaluate`.
        """
        return self.prepare_points(points, epsilon).evaluate(f_lm)

    def gradient_at(self, f_lm, points, epsilon=1e-13):
        """Cartesian surface gradient (n, 3) at unit vectors ``points`` (n, 3) (one-off
        :meth:`PointSet.gradient`).

        Parameters
        ----------
        f_lm : array_like, shape (nalm,)
            Coefficients.
        points : array_like, shape (n, 3)
            Unit vectors.
        epsilon : float
            Relative accuracy, in ``[1e-14, 1)``.

        Returns
        -------
        ndarray, shape (n, 3)
            Tangent vectors.

        Raises
        ------
        ValueError
            As for :class:`PointSet` and :meth:`PointSet.gradient`.
        """
        return self.prepare_points(points, epsilon).gradient(f_lm)

    def adjoint_at(self, points, weights, epsilon=1e-13):
        """Adjoint of :meth:`evaluate`: ``b_lm = sum_j w_j conj(Y_lm(x_j))`` (one-off :meth:`PointSet.adjoint`).

        ``sum_j w_j evaluate(f_lm)_j == inner(f_lm, b_lm)``; with ``w_j = 1/n`` it gives the
        coefficients of the empirical measure ``(1/n) sum_j delta_{x_j}``.

        Parameters
        ----------
        points : ndarray, shape (n, 3)
        weights : ndarray, shape (n,), real
        epsilon : float
            Relative accuracy, in ``[1e-14, 1)``.

        Returns
        -------
        ndarray, shape (nalm,), complex128

        Raises
        ------
        ValueError
            As for :class:`PointSet` and :meth:`PointSet.adjoint`.
        """
        return self.prepare_points(points, epsilon).adjoint(weights)

    # ------------------------------------------------------------------ pyshtools containers
    def to_shcoeffs(self, f_lm):
        """Real pyshtools ``SHCoeffs`` (``normalization='ortho'``, ``csphase=-1``) of the same field.

        Parameters
        ----------
        f_lm : array_like, shape (nalm,)
            Coefficients.

        Returns
        -------
        pyshtools.SHCoeffs

        Raises
        ------
        ValueError
            ``f_lm`` not of shape ``(nalm,)``.
        """
        import pyshtools

        a = self._alm(f_lm)
        c = np.zeros((2, self.lmax + 1, self.lmax + 1))
        s = np.where(self.m_index > 0, np.sqrt(2.0), 1.0)
        c[0, self.l_index, self.m_index] = s * a.real
        c[1, self.l_index, self.m_index] = np.where(self.m_index > 0, -s * a.imag, 0.0)
        return pyshtools.SHCoeffs.from_array(c, normalization="ortho", csphase=-1, copy=False)

    def from_shcoeffs(self, coeffs):
        """Coefficients (nalm,) from real pyshtools ``SHCoeffs`` of degree ``lmax`` (any normalization
        or phase; converted by pyshtools).

        Parameters
        ----------
        coeffs : pyshtools.SHCoeffs
            Real coefficients of degree ``lmax``.

        Returns
        -------
        ndarray, shape (nalm,), complex128

        Raises
        ------
        ValueError
            Not a real ``SHCoeffs``, or of another degree.
        """
        if getattr(coeffs, "kind", None) != "real" or not hasattr(coeffs, "convert"):
            raise ValueError(f"coeffs must be a real pyshtools SHCoeffs; received {type(coeffs).__name__}")
        if coeffs.lmax != self.lmax:
            raise ValueError(f"coeffs.lmax must equal lmax = {self.lmax}; received {coeffs.lmax}")
        c = coeffs.convert(normalization="ortho", csphase=-1).coeffs
        s = np.where(self.m_index > 0, 1.0 / np.sqrt(2.0), 1.0)
        return s * (c[0, self.l_index, self.m_index] - 1j * c[1, self.l_index, self.m_index])

    def to_shgrid(self, f):
        """pyshtools ``SHGrid`` on its own GLQ grid of degree ``lmax`` ((lmax+1) x (2 lmax+1)),
        holding the degree-``lmax`` projection of ``f`` (nlat, nlon) (equal to ``f`` if band-limited).

        Parameters
        ----------
        f : array_like, shape (nlat, nlon)
            Real grid values.

        Returns
        -------
        pyshtools.SHGrid

        Raises
        ------
        ValueError
            ``f`` complex or not of the grid's shape.
        """
        return self.to_shcoeffs(self.analysis(f)).expand(grid="GLQ", extend=False, backend="ducc",
                                                        nthreads=self.nthreads)


class PointSet:
    """Unit vectors prepared for repeated ducc0 point transforms on one :class:`SphereGrid`'s layout.

    Made by :meth:`SphereGrid.prepare_points` (unit vectors, checked) or :meth:`PointSet.directions`
    (any nonzero rows, radially projected in the same pass); the angles (ducc0 ``loc``) and the tangent frame are
    computed once, the frame from Cartesian coordinates without trigonometry:
    ``e_theta = (z cos p, z sin p, -r)``, ``e_phi = (-sin p, cos p, 0)`` with ``r = sqrt(x^2 + y^2)``,
    ``cos p = x / r``, ``sin p = y / r`` (``p = 0`` on the axis), the frame of the module docstring.

    Parameters
    ----------
    grid : SphereGrid
        Fixes ``lmax``, the coefficient layout and the threads.
    points : array_like, shape (n, 3)
        Unit vectors (checked: ``| |x|^2 - 1 | <= 1e-8``; never renormalized).
    epsilon : float
        Relative accuracy of ducc0's NUFFT-based transforms, in ``[1e-14, 1)``.

    Attributes
    ----------
    grid : SphereGrid
    points : ndarray, shape (n, 3), read-only
    loc : ndarray, shape (n, 2), read-only
        Colatitude and longitude (:func:`cartesian_to_angles`).
    epsilon : float
    n : int

    Raises
    ------
    ValueError
        ``grid`` not a :class:`SphereGrid`, ``epsilon`` outside ``[1e-14, 1)``, or ``points`` not unit vectors of
        shape (n, 3).
    """

    def __init__(self, grid, points, epsilon=1e-13):
        if not isinstance(grid, SphereGrid):
            raise ValueError(f"grid must be a SphereGrid; received {type(grid).__name__}")
        epsilon = validate.real("epsilon", epsilon, 1e-14, 1, hi_open=True,
                                what="a number in [1e-14, 1) (ducc0's reachable accuracy)")
        x = _check_points(points).view()
        x.setflags(write=False)
        self._setup(grid, x, None, epsilon)

    @classmethod
    def directions(cls, grid, X, epsilon=1e-13):
        """The points ``x_i / |x_i|`` of nonzero finite rows ``X`` (n, 3), radial projection included.

        The angles are scale-free, so the projection is folded into the angle and frame arithmetic (one
        pass, no normalized copy of ``X``); ``points`` (``X / |X|``) is formed only when read.  This is
        the constructor of the particle velocity (:class:`meanfield.models.fastsum.SpectralSum`), whose
        Runge-Kutta stages lie off the sphere.

        Parameters
        ----------
        grid : SphereGrid
        X : array_like, shape (n, 3)
            Finite rows with ``|x_i| > 0`` (any length); referenced, not copied (do not modify it while
            the point set is in use).
        epsilon : float
            As for the constructor.

        Returns
        -------
        PointSet

        Raises
        ------
        ValueError
            ``X`` not of shape (n, 3), a zero or non-finite row, ``grid`` not a :class:`SphereGrid`, or ``epsilon``
            outside ``[1e-14, 1)``.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != 3:
            raise ValueError(f"X must have shape (n, 3); received shape {X.shape}")
        pts = cls._directions(grid, X, epsilon)
        if pts is None:
            norm2 = np.einsum("ij,ij->i", X, X)
            raise ValueError(f"X must have finite nonzero rows (directions x / |x|); received "
                             f"{int(np.sum(~np.isfinite(norm2)))} non-finite and {int(np.sum(norm2 == 0))} zero rows")
        return pts

    @classmethod
    def _directions(cls, grid, X, epsilon, scratch=False):
        """:meth:`directions` of a float64 (n, 3) array, or None when a row is not finite or zero.

        ``scratch=True``: the point set lives in this thread's reused buffers (:func:`_scratch`), which
        the next such call overwrites: for a transient point set used at once and dropped (the velocity).
        """
        if not isinstance(grid, SphereGrid):
            raise ValueError(f"grid must be a SphereGrid; received {type(grid).__name__}")
        epsilon = validate.real("epsilon", epsilon, 1e-14, 1, hi_open=True,
                                what="a number in [1e-14, 1) (ducc0's reachable accuracy)")
        self = cls.__new__(cls)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            self._setup(grid, X, True, epsilon, _scratch(X.shape[0]) if scratch else None)
        norm2 = self._norm2
        if X.shape[0] and not (np.isfinite(np.sum(norm2)) and norm2.min() > 0.0):
            return None
        return self

    def _setup(self, grid, x, norm2, epsilon, work=None):
        loc, self._r, self._z, self._cp, self._sp, norm2 = _polar(x, norm2, work)
        loc = loc.view()                       # read-only view (the buffer itself may be reused)
        loc.setflags(write=False)
        self._g = None if work is None else work["g"]    # the gradient synthesis' output buffer
        self._raw, self._norm2 = x, norm2
        self._points = x if norm2 is None else None
        self.grid, self.loc, self.epsilon, self.n = grid, loc, float(epsilon), x.shape[0]
        self._kw = dict(grid._kw, loc=loc, epsilon=float(epsilon))

    @property
    def norms2(self):
        """``|x_i|^2`` of the rows given to :meth:`directions` (n,), read-only; None for unit points
        (the constructor)."""
        if self._norm2 is None:
            return None
        v = self._norm2.view()
        v.setflags(write=False)
        return v

    @property
    def points(self):
        """The unit vectors, shape (n, 3), read-only (``X / |X|`` for :meth:`directions`, formed on first use)."""
        if self._points is None:
            p = self._raw / np.sqrt(self._norm2)[:, None]
            p.setflags(write=False)
            self._points = p
        return self._points

    def adjoint(self, weights):
        """``b_lm = sum_j w_j conj(Y_lm(x_j))`` (adjoint of :meth:`evaluate`).

        Parameters
        ----------
        weights : ndarray, shape (n,), real

        Returns
        -------
        ndarray, shape (nalm,), complex128

        Raises
        ------
        ValueError
            ``weights`` complex or not of shape ``(n,)``.
        """
        w = np.asarray(weights)
        if w.shape != (self.n,) or np.iscomplexobj(w):
            raise ValueError(f"weights must be real with shape (n,) = ({self.n},); received dtype "
                             f"{w.dtype}, shape {w.shape}")
        w = w.astype(np.float64, copy=False)
        return _SHT.adjoint_synthesis_general(map=w[None], spin=0, **self._kw)[0]

    def evaluate(self, f_lm):
        """Values of the field ``f_lm`` (nalm,) at the points, shape (n,).

        Parameters
        ----------
        f_lm : array_like, shape (nalm,)
            Coefficients on the grid's layout.

        Returns
        -------
        ndarray, shape (n,)

        Raises
        ------
        ValueError
            ``f_lm`` not of shape ``(nalm,)``.
        """
        a = self.grid._alm(f_lm)
        return _SHT.synthesis_general(alm=a[None], spin=0, **self._kw)[0]

    def gradient(self, f_lm, out=None):
        """Cartesian surface gradient of ``f_lm`` (nalm,) at the points, shape (n, 3).

        Parameters
        ----------
        f_lm : array_like, shape (nalm,)
            Coefficients on the grid's layout.
        out : ndarray, shape (n, 3), float64, optional
            Written into (rows may be a strided view) and returned.

        Returns
        -------
        ndarray, shape (n, 3)
            Tangent vectors (a transposed view of a (3, n) buffer when ``out`` is None).

        Raises
        ------
        ValueError
            ``f_lm`` not of shape ``(nalm,)``, or ``out`` not a float64 array of shape (n, 3).
        """
        a = self.grid._alm(f_lm)
        gt, gp = _SHT.synthesis_general(alm=a[None], spin=1, mode="DERIV1", map=self._g, **self._kw)
        if out is None:
            buf = np.empty((3, self.n))        # contiguous components; returned as the (n, 3) view buf.T
            out_x, out_y, out_z = buf
            out = buf.T
        elif not (isinstance(out, np.ndarray) and out.shape == (self.n, 3) and out.dtype == np.float64):
            raise ValueError(f"out must be a float64 array of shape (n, 3) = ({self.n}, 3); received "
                             f"{getattr(out, 'dtype', type(out).__name__)}, shape {np.shape(out)}")
        else:
            out_x, out_y, out_z = out[:, 0], out[:, 1], out[:, 2]
        # e_theta = (z cp, z sp, -r), e_phi = (-sp, cp, 0); gt, gp are ducc0's fresh output, used as scratch
        np.multiply(gt, self._r, out=out_z)
        np.negative(out_z, out=out_z)
        gt *= self._z                         # a = gt z
        np.multiply(gp, self._sp, out=out_y)  # scratch
        np.multiply(gt, self._cp, out=out_x)
        out_x -= out_y                        # a cp - gp sp
        np.multiply(gt, self._sp, out=out_y)
        gp *= self._cp
        out_y += gp                           # a sp + gp cp
        return out


class NodeTransforms:
    """Transforms of degree ``lmax`` (any, unrelated to the grid's own) on the nodes of a :class:`SphereGrid`.

    ``adjoint(f)`` is the quadrature ``sum_nodes w f conj(Y_lm)`` (the coefficients of ``f`` when the
    integrand is within the grid's exactness, and otherwise exactly the node sum a quadrature path forms);
    ``synthesis(f_lm)`` the values of a degree-``lmax`` field at the nodes.  The sources and outputs of the
    bi-spherical operators of general heads on a PDE grid (:mod:`meanfield.core.bispherical`).

    Parameters
    ----------
    grid : SphereGrid
        The nodes, weights and threads.
    lmax : int
        Degree of the transforms, ``>= 0``.

    Raises
    ------
    ValueError
        ``grid`` not a :class:`SphereGrid`, or ``lmax`` not an integer ``>= 0``.
    """

    def __init__(self, grid, lmax):
        if not isinstance(grid, SphereGrid):
            raise ValueError(f"grid must be a SphereGrid; received {type(grid).__name__}")
        self.grid, self.lmax = grid, validate.integer("lmax", lmax, 0)
        self.nalm = nalm_for(self.lmax)
        mstart = np.array([m * (2 * self.lmax + 1 - m) // 2 for m in range(self.lmax + 1)], dtype=np.uintp)
        self._kw = dict(lmax=self.lmax, mmax=self.lmax, mstart=mstart, nthreads=grid.nthreads)

    def adjoint(self, f):
        """``sum_nodes w f conj(Y_lm)`` of grid values ``f`` (nlat, nlon), shape (nalm,).

        Parameters
        ----------
        f : array_like, shape (nlat, nlon)
            Real grid values.

        Returns
        -------
        ndarray, shape (nalm,), complex128
            ``nalm`` of this object's ``lmax``.

        Raises
        ------
        ValueError
            ``f`` complex or not of the grid's shape.
        """
        f = self.grid._grid(f)
        out = np.empty(self.nalm, np.complex128)
        _SHT.adjoint_synthesis_2d(map=f[None], spin=0, geometry=_GEOM, alm=out[None],
                                  ringfactor=self.grid.ring_weights, **self._kw)
        return out

    def synthesis(self, f_lm):
        """Values of a degree-``lmax`` field (nalm,) at the nodes, shape (nlat, nlon).

        Parameters
        ----------
        f_lm : array_like, shape (nalm,)
            Coefficients of this object's degree.

        Returns
        -------
        ndarray, shape (nlat, nlon)

        Raises
        ------
        ValueError
            ``f_lm`` not of shape ``(nalm,)``.
        """
        a = np.asarray(f_lm, dtype=np.complex128)
        if a.shape != (self.nalm,):
            raise ValueError(f"f_lm must have shape ({self.nalm},) for lmax = {self.lmax}; received shape {a.shape}")
        out = np.empty(self.grid.shape)
        _SHT.synthesis_2d(alm=a[None], spin=0, geometry=_GEOM, map=out[None], **self._kw)
        return out
