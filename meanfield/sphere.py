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
pyshtools
    :meth:`SphereGrid.to_shcoeffs` gives real ``SHCoeffs`` with ``normalization='ortho'``,
    ``csphase=-1``: ``C_lm = sqrt(2) Re f_lm``, ``S_lm = -sqrt(2) Im f_lm`` (m > 0),
    ``C_l0 = Re f_l0``.
"""

from __future__ import annotations

from dataclasses import dataclass

import ducc0
import numpy as np

__all__ = ["SphereGrid", "to_real", "from_real", "cartesian_to_angles", "nalm_for"]

_SHT = ducc0.sht.experimental
_GEOM = "GL"


def nalm_for(lmax):
    """Number of stored coefficients ``(lmax+1)(lmax+2)/2`` of a real field of degree ``lmax``."""
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
    """
    a = np.asarray(f_lm)
    if a.ndim != 1 or not np.iscomplexobj(a):
        raise ValueError(f"f_lm must be a 1-d complex array; received dtype {a.dtype}, shape {a.shape}")
    return np.ascontiguousarray(a, dtype=np.complex128).view(np.float64)


def from_real(v):
    """Inverse of :func:`to_real`: float64 ``(2 nalm,)`` (re, im pairs) -> complex ``(nalm,)``.

    Returns a view when ``v`` is contiguous float64, else a copy.
    """
    a = np.asarray(v)
    if a.ndim != 1 or a.size % 2 or np.iscomplexobj(a):
        raise ValueError(f"v must be a real 1-d array of even length; received dtype {a.dtype}, shape {a.shape}")
    return np.ascontiguousarray(a, dtype=np.float64).view(np.complex128)


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
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"points must have shape (n, 3); received shape {x.shape}")
    r2 = np.einsum("ij,ij->i", x, x)
    if x.shape[0] and np.max(np.abs(r2 - 1.0)) > 1e-8:
        raise ValueError(f"points must be unit vectors (| |x|^2 - 1 | <= 1e-8); received max deviation "
                         f"{np.max(np.abs(r2 - 1.0)):.3g}")
    loc = np.empty((x.shape[0], 2))
    loc[:, 0] = np.arctan2(np.hypot(x[:, 0], x[:, 1]), x[:, 2])
    phi = np.arctan2(x[:, 1], x[:, 0])
    loc[:, 1] = np.where(phi < 0.0, phi + 2.0 * np.pi, phi)
    return loc


def _frame(theta, phi):
    """Tangent frame ``e_theta, e_phi``, each of shape ``theta.shape + (3,)`` (broadcast)."""
    ct, st, cp, sp = np.cos(theta), np.sin(theta), np.cos(phi), np.sin(phi)
    e_theta = np.stack(np.broadcast_arrays(ct * cp, ct * sp, -st), axis=-1)
    e_phi = np.stack(np.broadcast_arrays(-sp, cp, np.zeros_like(cp)), axis=-1)
    return e_theta, e_phi


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
    """

    lmax: int
    nlat: int | None = None
    nlon: int | None = None
    nthreads: int = 1

    def __post_init__(self):
        lmax = self.lmax
        if isinstance(lmax, bool) or not isinstance(lmax, (int, np.integer)) or lmax < 2:
            raise ValueError(f"lmax must be an integer >= 2; received {lmax!r}")
        lmax = int(lmax)
        nlat = lmax + 1 if self.nlat is None else self.nlat
        nlon = 2 * lmax + 2 if self.nlon is None else self.nlon
        if isinstance(nlat, bool) or not isinstance(nlat, (int, np.integer)) or nlat < lmax + 1:
            raise ValueError(f"nlat must be an integer >= lmax + 1 = {lmax + 1}; received {nlat!r}")
        if isinstance(nlon, bool) or not isinstance(nlon, (int, np.integer)) or nlon < 2 * lmax + 1:
            raise ValueError(f"nlon must be an integer >= 2 lmax + 1 = {2 * lmax + 1}; received {nlon!r}")
        nt = self.nthreads
        if isinstance(nt, bool) or not isinstance(nt, (int, np.integer)) or nt < 1:
            raise ValueError(f"nthreads must be an integer >= 1; received {nt!r}")
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
        """
        if isinstance(lmax, bool) or not isinstance(lmax, (int, np.integer)) or lmax < 2:
            raise ValueError(f"lmax must be an integer >= 2; received {lmax!r}")
        return cls(int(lmax), nlat=(3 * int(lmax) + 2) // 2,
                   nlon=int(ducc0.fft.good_size(3 * int(lmax) + 1, True)), nthreads=nthreads)

    @property
    def nalm(self):
        """Number of stored coefficients, ``(lmax+1)(lmax+2)/2``."""
        return nalm_for(self.lmax)

    @property
    def shape(self):
        """Grid shape ``(nlat, nlon)``."""
        return (self.nlat, self.nlon)

    def index(self, l, m):
        """Position of ``(l, m)``, ``0 <= m <= l <= lmax``, in a coefficient vector."""
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
        """Coefficients -> grid values, shape (nlat, nlon)."""
        a = self._alm(f_lm)
        out = np.empty(self.shape) if out is None else out
        _SHT.synthesis_2d(alm=a[None], spin=0, geometry=_GEOM, map=out[None], **self._kw)
        return out

    def gradient(self, f_lm, out=None):
        """Surface gradient on the grid.

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
        """Coefficients of ``Lap_S f``: ``-l(l+1) f_lm``."""
        return self._lap * self._alm(f_lm)

    def multiply_degree(self, f_lm, mult):
        """Apply a per-degree multiplier (e.g. Funk-Hecke): ``mult[l] f_lm``; ``mult`` shape (lmax+1,)."""
        mult = np.asarray(mult)
        if mult.shape != (self.lmax + 1,):
            raise ValueError(f"mult must have shape (lmax + 1,) = ({self.lmax + 1},); received shape {mult.shape}")
        return mult[self.l_index] * self._alm(f_lm)

    def integrate(self, f):
        """Quadrature ``int_{S^2} f dx`` of grid values (nlat, nlon)."""
        return float(self.ring_weights @ self._grid(f).sum(axis=1))

    def inner(self, f_lm, g_lm):
        """L2 inner product ``int f g dx`` of two real fields from their coefficients."""
        a, b = self._alm(f_lm), self._alm(g_lm, "g_lm")
        return float(np.sum(self._mweight * (a.real * b.real + a.imag * b.imag)))

    def power_spectrum(self, f_lm):
        """``S_l = sum_{m=-l}^{l} |f_lm|^2`` (m > 0 counted twice), shape (lmax+1,); ``sum S_l = int f^2``."""
        a = self._alm(f_lm)
        return np.bincount(self.l_index, weights=self._mweight * np.abs(a) ** 2, minlength=self.lmax + 1)

    # ------------------------------------------------------------------ tangent vectors
    def to_cartesian(self, v):
        """Components (2, nlat, nlon) on ``(e_theta, e_phi)`` -> 3-vectors (nlat, nlon, 3)."""
        v = self._grid(v, "v", (2,))
        return v[0, ..., None] * self.e_theta + v[1, ..., None] * self.e_phi

    def from_cartesian(self, V):
        """3-vectors (nlat, nlon, 3) -> components (2, nlat, nlon).

        This is the *tangent projection* ``P_x V``: the normal part ``<V, x> x`` is dropped.
        """
        V = np.asarray(V, dtype=np.float64)
        if V.shape != self.shape + (3,):
            raise ValueError(f"V must have shape {self.shape + (3,)}; received shape {V.shape}")
        return np.stack([np.einsum("ijk,ijk->ij", V, self.e_theta), np.einsum("ijk,ijk->ij", V, self.e_phi)])

    # ------------------------------------------------------------------ arbitrary points
    def evaluate(self, f_lm, points, epsilon=1e-13):
        """Field values at unit vectors ``points`` (n, 3) -> (n,), ducc0 ``synthesis_general``
        with relative accuracy ``epsilon``."""
        a = self._alm(f_lm)
        loc = cartesian_to_angles(points)
        return _SHT.synthesis_general(alm=a[None], spin=0, loc=loc, epsilon=epsilon, **self._kw)[0]

    def gradient_at(self, f_lm, points, epsilon=1e-13):
        """Cartesian surface gradient (n, 3) at unit vectors ``points`` (n, 3)."""
        a = self._alm(f_lm)
        loc = cartesian_to_angles(points)
        g = _SHT.synthesis_general(alm=a[None], spin=1, mode="DERIV1", loc=loc, epsilon=epsilon, **self._kw)
        e_theta, e_phi = _frame(loc[:, 0], loc[:, 1])
        return g[0][:, None] * e_theta + g[1][:, None] * e_phi

    def adjoint_at(self, points, weights, epsilon=1e-13):
        """Adjoint of :meth:`evaluate`: ``b_lm = sum_j w_j conj(Y_lm(x_j))``.

        ``sum_j w_j evaluate(f_lm)_j == inner(f_lm, b_lm)``; with ``w_j = 1/n`` it gives the
        coefficients of the empirical measure ``(1/n) sum_j delta_{x_j}``.

        Parameters
        ----------
        points : ndarray, shape (n, 3)
        weights : ndarray, shape (n,), real
        """
        loc = cartesian_to_angles(points)
        w = np.asarray(weights)
        if w.shape != (loc.shape[0],) or np.iscomplexobj(w):
            raise ValueError(f"weights must be real with shape (n,) = ({loc.shape[0]},); received dtype "
                             f"{w.dtype}, shape {w.shape}")
        w = w.astype(np.float64, copy=False)
        return _SHT.adjoint_synthesis_general(map=w[None], spin=0, loc=loc, epsilon=epsilon, **self._kw)[0]

    # ------------------------------------------------------------------ pyshtools containers
    def to_shcoeffs(self, f_lm):
        """Real pyshtools ``SHCoeffs`` (``normalization='ortho'``, ``csphase=-1``) of the same field."""
        import pyshtools

        a = self._alm(f_lm)
        c = np.zeros((2, self.lmax + 1, self.lmax + 1))
        s = np.where(self.m_index > 0, np.sqrt(2.0), 1.0)
        c[0, self.l_index, self.m_index] = s * a.real
        c[1, self.l_index, self.m_index] = np.where(self.m_index > 0, -s * a.imag, 0.0)
        return pyshtools.SHCoeffs.from_array(c, normalization="ortho", csphase=-1, copy=False)

    def from_shcoeffs(self, coeffs):
        """Coefficients (nalm,) from real pyshtools ``SHCoeffs`` of degree ``lmax`` (any normalization
        or phase; converted by pyshtools)."""
        if getattr(coeffs, "kind", None) != "real" or not hasattr(coeffs, "convert"):
            raise ValueError(f"coeffs must be a real pyshtools SHCoeffs; received {type(coeffs).__name__}")
        if coeffs.lmax != self.lmax:
            raise ValueError(f"coeffs.lmax must equal lmax = {self.lmax}; received {coeffs.lmax}")
        c = coeffs.convert(normalization="ortho", csphase=-1).coeffs
        s = np.where(self.m_index > 0, 1.0 / np.sqrt(2.0), 1.0)
        return s * (c[0, self.l_index, self.m_index] - 1j * c[1, self.l_index, self.m_index])

    def to_shgrid(self, f):
        """pyshtools ``SHGrid`` on its own GLQ grid of degree ``lmax`` ((lmax+1) x (2 lmax+1)),
        holding the degree-``lmax`` projection of ``f`` (nlat, nlon) (equal to ``f`` if band-limited)."""
        return self.to_shcoeffs(self.analysis(f)).expand(grid="GLQ", extend=False, backend="ducc",
                                                        nthreads=self.nthreads)
