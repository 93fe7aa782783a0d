r"""The mean-field PDE on ``S^{d-1}`` (any ``d >= 2``) for axisymmetric densities and zonal heads.

A density that depends only on ``t = <x, e>`` (``e`` a fixed unit axis) stays so under zonal heads
``M_h = V_h = lambda_h I`` (MODEL.md "Other dimensions"), and the continuity equation becomes one
dimensional.  With densities ``f`` relative to the *normalized* uniform measure ``sigma``
(``sigma(S^{d-1}) = 1``, uniform state ``f = 1``) and the weight ``w(t) = (1 - t^2)^{(d-3)/2}``:

.. math:: \partial_t f = -\frac{1}{w}\,\partial_t\big[(1 - t^2)\, w\, f\, u\big] + \nu \Delta f,\qquad
          X = u(t)\,(e - t x),\quad u = \sum_h \frac{\phi_h'(t)}{D_h(t)},

``phi_h = K_h * f`` (the potential), ``D_h = 1`` (mean) or ``Z_h = k_h * f`` (softmax), and
``Delta R_l = -l (l + d - 2) R_l``.  ``f = sum_l b_l Q_l(t)`` in the orthonormal Gegenbauer basis
``Q_l = R_l / ||R_l||_{L^2(sigma)}`` (``R_l(1) = 1``, :func:`meanfield.core.funk_hecke.gegenbauer_normalized`);
convolutions are diagonal (Funk-Hecke, :func:`meanfield.core.funk_hecke.funk_hecke_normalized`), and the
Galerkin projection of the flux is formed by Gauss-Jacobi quadrature (weight ``w``) on
``ceil((3 lmax + 1) / 2)`` nodes, exact for mean heads:

.. math:: \dot b_l = \int_{-1}^{1} Q_l'(t)\,(1 - t^2)\, f\, u\; \frac{w\,dt}{\int w} - \nu\, l(l+d-2)\, b_l .

The degree-0 row vanishes (``Q_0' = 0``): the mass ``b_0`` is conserved exactly.  For ``d = 3`` the
state maps onto the ``m = 0`` coefficients of :class:`meanfield.ContinuumPDE` about ``e = e_3``:
``rho_l0 = b_l / sqrt(4 pi)`` (:meth:`AxisymmetricPDE.to_sphere_coefficients`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import roots_jacobi

from ..core import cost, resolution, validate
from ..core.field_forces import LineSpace, ScalingCache, field_scalings, field_velocity, normalizers_and_errors
from ..core.funk_hecke import gegenbauer_normalized, resolved_multipliers
from ..core.heads import check_heads
from ..core.kernels import KERNELS, check_finite_multipliers
from ..core.methods import stable_step
from ..core.sinkhorn import SINKHORN_MAXITER, SINKHORN_TOL
from .plans import ReducedPlans

__all__ = ["AxisymmetricPDE", "AxisymmetricResolutionWarning", "zonal_multipliers_d"]


class AxisymmetricResolutionWarning(UserWarning):
    """``lmax`` truncates a head's Funk-Hecke expansion above the requested tolerance."""


AXISYMMETRIC_BYTES_PER_ENTRY = 40.0
"""Peak bytes of building an :class:`AxisymmetricPDE` per entry of its (lmax + 1) x n_nodes basis (Q, Q' and
the flux matrix, with their temporaries; measured with tracemalloc: 40.0-40.3 for lmax = 500 to 2000, d = 3, 16)."""
AXISYMMETRIC_SECONDS_PER_ENTRY = 1.5e-7
"""Seconds of building an :class:`AxisymmetricPDE` per basis entry (measured 0.7e-7 to 1.4e-7, lmax = 500 to 2000)."""


def estimate_axisymmetric(lmax, d) -> cost.Cost:
    """Estimated peak memory and time of building ``AxisymmetricPDE(heads, d, lmax)`` (sizes only)."""
    nodes = (3 * lmax + 2) // 2
    entries = float(lmax + 1) * nodes
    return cost.Cost(f"AxisymmetricPDE(d={d}, lmax={lmax})", entries * AXISYMMETRIC_BYTES_PER_ENTRY,
                     entries * AXISYMMETRIC_SECONDS_PER_ENTRY,
                     f"Gegenbauer basis of (lmax + 1) x {nodes} Gauss-Jacobi nodes = {entries:.3g} entries")


def zonal_multipliers_d(head, lmax, d, *, where="head"):
    r"""Normalized-measure Funk-Hecke multipliers of a zonal head on ``S^{d-1}``, each (lmax+1,).

    ``"potential"``: ``m[K(lambda t)]``; ``"normalizer"``: ``m[k(lambda t)]`` (exp: ``m(beta lambda) / beta``
    and ``m(beta lambda)``, closed form; other kernels of :data:`meanfield.core.kernels.KERNELS` by
    quadrature of their profiles).

    Parameters
    ----------
    head : Head
        A zonal head of dimension ``d``.
    lmax : int
        Largest degree.
    d : int
        Ambient dimension, ``>= 2``.
    where : str
        Names the head in an error message.

    Returns
    -------
    dict
        ``"potential"`` and ``"normalizer"``, each an ndarray of shape (lmax + 1,).

    Raises
    ------
    ValueError
        Multipliers that overflow float64 (:func:`meanfield.core.kernels.check_finite_multipliers`).
    """
    return check_finite_multipliers(head, KERNELS[head.kernel].normalized_multipliers(head, lmax, d), where)


@dataclass(frozen=True, eq=False)
class AxisymmetricPDE(ReducedPlans):
    """Continuity equation on ``S^{d-1}`` for densities that depend on ``t = <x, axis>`` only.

    Parameters
    ----------
    heads : sequence of Head
        Zonal heads (``M = V = lambda I``) of dimension ``d``, any kernel and normalization.
    d : int
        Ambient dimension, ``>= 2`` (``d = 2``: even densities on the circle).
    lmax : int
        Largest Gegenbauer degree, ``>= 2``.
    nu : float
        Noise ``nu >= 0``.
    axis : array_like, shape (d,), optional
        The unit axis ``e`` (default the last basis vector, the north pole for ``d = 3``).
    kernel_tol : float
        Warn (:class:`AxisymmetricResolutionWarning`) when the first neglected potential multiplier,
        relative to the largest, exceeds this; raise above 1e-2.
    sinkhorn_tol, sinkhorn_maxiter :
        Marginal tolerance and iteration cap of the Sinkhorn scalings of Sinkhorn heads, solved on the
        Gauss-Jacobi nodes (:meth:`scalings` reports the error reached).

    Raises
    ------
    ValueError
        ``d`` or ``lmax`` below 2; a negative ``nu`` or ``kernel_tol``; a non-positive ``sinkhorn_tol`` or
        ``sinkhorn_maxiter``; heads :func:`meanfield.core.heads.check_heads` refuses, of another dimension
        than ``d``, or not zonal; an ``axis`` that is not a unit vector of length ``d``; an ``lmax`` above
        the memory or time limit (:mod:`meanfield.core.cost`); multipliers that overflow float64 or whose
        first neglected one is above ``1e-2`` of the largest.
    """

    heads: tuple
    d: int
    lmax: int
    nu: float = 0.0
    axis: np.ndarray | None = None
    kernel_tol: float = 1e-10
    sinkhorn_tol: float = SINKHORN_TOL
    sinkhorn_maxiter: int = SINKHORN_MAXITER
    nodes: np.ndarray = field(init=False, repr=False)
    weights: np.ndarray = field(init=False, repr=False)
    multipliers: tuple = field(init=False, repr=False)

    def __post_init__(self):
        d = validate.integer("d", self.d, 2)
        lmax = validate.integer("lmax", self.lmax, 2)
        nu = validate.real("nu", self.nu, 0.0)
        tol = validate.real("kernel_tol", self.kernel_tol, 0.0)
        validate.real("sinkhorn_tol", self.sinkhorn_tol, 0.0, lo_open=True)
        validate.integer("sinkhorn_maxiter", self.sinkhorn_maxiter, 1)
        heads = check_heads(self.heads)
        if heads[0].dim != d:
            raise ValueError(f"heads must have dimension d = {d}; received heads of dimension {heads[0].dim}")
        bad = [i for i, h in enumerate(heads) if not h.is_zonal]
        if bad:
            raise ValueError(f"heads must all be zonal (M = V = lambda I: the only heads that keep densities of "
                             f"<x, e> axisymmetric); received non-zonal heads at positions {bad}")
        axis = np.eye(d)[-1] if self.axis is None else validate.unit_vector("axis", self.axis, d)
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        for k, v in (("d", d), ("lmax", lmax), ("nu", nu), ("kernel_tol", tol), ("heads", heads), ("axis", axis)):
            set_(k, v)
        estimate_axisymmetric(lmax, d).check("a smaller lmax")         # before the nodes and the basis
        alpha = (d - 3) / 2.0
        t, w = roots_jacobi((3 * lmax + 2) // 2, alpha, alpha)
        set_("nodes", t)
        set_("weights", w / w.sum())
        R, dR = gegenbauer_normalized(lmax, d, t, derivative=True)
        norm = np.sqrt((R**2) @ self.weights)               # ||R_l|| in L^2(sigma), exact (degree 2 lmax)
        set_("_Q", R / norm[:, None])
        set_("_dQ", dR / norm[:, None])
        set_("_dQ_flux", self._dQ * ((1 - t * t) * self.weights)[None, :])
        set_("_norm", norm)
        ell = np.arange(lmax + 1)
        set_("_lap", -ell * (ell + d - 2.0))
        mults = []
        for i, h in enumerate(heads):
            m = zonal_multipliers_d(h, lmax + 1, d, where=f"heads[{i}]")
            mults.append(resolved_multipliers(m, i, "lmax", lmax, tol, AxisymmetricResolutionWarning,
                                              "Funk-Hecke multiplier"))
        set_("multipliers", tuple(mults))
        set_("_scaling_cache", ScalingCache())

    # ------------------------------------------------------------------ state
    @property
    def n_state(self) -> int:
        """Length of the state vector, ``lmax + 1``."""
        return self.lmax + 1

    def state(self, b):
        """State vector (a copy) from orthonormal coefficients ``b`` (lmax+1,).

        Parameters
        ----------
        b : array_like, shape (lmax + 1,)
            Orthonormal Gegenbauer coefficients.

        Returns
        -------
        ndarray, shape (lmax + 1,)

        Raises
        ------
        ValueError
            ``b`` not real, finite, of shape ``(lmax + 1,)``.
        """
        return validate.real_array("b", b, (self.lmax + 1,)).copy()

    def coefficients(self, y):
        """Orthonormal coefficients ``b`` (lmax+1,) from a state vector (the same array).

        Parameters
        ----------
        y : array_like, shape (lmax + 1,)
            State vector.

        Returns
        -------
        ndarray, shape (lmax + 1,)

        Raises
        ------
        ValueError
            ``y`` not real, finite, of shape ``(lmax + 1,)``.
        """
        return validate.real_array("y", y, (self.lmax + 1,))

    def uniform(self):
        """The uniform density (``f = 1``).

        Returns
        -------
        ndarray, shape (lmax + 1,)
            ``b_0 = 1``, every other coefficient 0.
        """
        b = np.zeros(self.lmax + 1)
        b[0] = 1.0
        return b

    def basis(self, t):
        """Orthonormal basis ``Q_l(t)``, shape (lmax+1, n).

        Parameters
        ----------
        t : array_like
            Values of ``<x, axis>`` in ``[-1, 1]`` (flattened to ``n`` values).

        Returns
        -------
        ndarray, shape (lmax + 1, n)

        Raises
        ------
        ValueError
            ``t`` not real and finite, or outside ``[-1, 1]``.
        """
        t = validate.real_array("t", t).reshape(-1)
        if np.any(np.abs(t) > 1):
            raise ValueError(f"t must lie in [-1, 1]; received values up to {np.abs(t).max():.6g}")
        return gegenbauer_normalized(self.lmax, self.d, t) / self._norm[:, None]

    def evaluate(self, b, t):
        """Density ``f(t)`` (relative to ``sigma``) at ``t``.

        Parameters
        ----------
        b : array_like, shape (lmax + 1,)
            Orthonormal coefficients.
        t : array_like
            Values in ``[-1, 1]`` (flattened to ``n`` values).

        Returns
        -------
        ndarray, shape (n,)

        Raises
        ------
        ValueError
            ``t`` refused by :meth:`basis`.
        """
        return np.asarray(b, dtype=float) @ self.basis(t)

    def project_profile(self, profile):
        """Coefficients of a function of ``t``: ``b_l = int profile(t) Q_l(t) dsigma`` by Gauss-Jacobi.

        Exact for polynomial profiles of degree ``<= 2 nodes - 1 - lmax``; spectrally accurate for smooth ones.

        Parameters
        ----------
        profile : callable
            ``profile(t) -> ndarray`` of the shape of ``t`` (the Gauss-Jacobi nodes :attr:`nodes`).

        Returns
        -------
        ndarray, shape (lmax + 1,)

        Raises
        ------
        ValueError
            ``profile`` not callable, or values not finite or not of the nodes' shape.
        """
        if not callable(profile):
            raise ValueError(f"profile must be a callable of t (ndarray in [-1, 1]); received {profile!r}")
        vals = np.asarray(profile(self.nodes), dtype=float)
        if vals.shape != self.nodes.shape or not np.all(np.isfinite(vals)):
            raise ValueError(f"profile must return finite values of the shape of t, {self.nodes.shape}; received "
                             f"shape {vals.shape}")
        return self._Q @ (self.weights * vals)

    def project(self, rho, seed=0, tol=1e-10):
        """Coefficients of a density ``rho(X)`` given on points ``X`` (n, d) of the sphere.

        ``rho`` must be a function of ``<x, axis>``: it is evaluated at random points of each node's
        slice ``{x : <x, axis> = t}``, and a spread above ``tol`` (relative to ``max |rho|``) is refused.

        Parameters
        ----------
        rho : callable
            ``rho(X) -> ndarray`` of shape (n,) for points ``X`` of shape (n, d).
        seed : None, int or numpy.random.Generator
            The random points on the slices (three per node).
        tol : float
            Allowed relative spread of ``rho`` on a slice.

        Returns
        -------
        ndarray, shape (lmax + 1,)

        Raises
        ------
        ValueError
            ``rho`` not callable, an invalid ``seed``, or ``rho`` not axisymmetric to ``tol``.
        """
        if not callable(rho):
            raise ValueError(f"rho must be a callable of points X (n, d); received {rho!r}")
        gen = validate.rng(seed)
        t = self.nodes
        pts = []
        for _ in range(3):
            v = gen.standard_normal((t.size, self.d))
            v -= np.outer(v @ self.axis, self.axis)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            pts.append(t[:, None] * self.axis + np.sqrt(1 - t * t)[:, None] * v)
        vals = np.array([np.asarray(rho(X), dtype=float).reshape(-1) for X in pts])
        spread = np.abs(vals - vals[0]).max()
        scale = max(np.abs(vals).max(), 1e-300)
        if spread > tol * scale:
            raise ValueError(f"rho must be a function of <x, axis> only (axisymmetric); received a function varying "
                             f"by {spread / scale:.2e} (relative) on a slice <x, axis> = const (allowed {tol:.0e})")
        return self._Q @ (self.weights * vals[0])

    def to_sphere_coefficients(self, b, grid):
        """``d = 3``: the ``rho_lm`` of :class:`meanfield.ContinuumPDE` (surface density) about ``e_3``.

        Parameters
        ----------
        b : array_like, shape (lmax + 1,)
            Orthonormal coefficients.
        grid : SphereGrid
            The target grid; degrees above ``min(lmax, grid.lmax)`` are dropped.

        Returns
        -------
        ndarray of complex128, shape (grid.nalm,)
            Only the ``m = 0`` coefficients are nonzero.

        Raises
        ------
        ValueError
            ``d != 3`` or an axis other than ``e_3``.
        """
        if self.d != 3 or not np.array_equal(self.axis, np.eye(3)[-1]):
            raise ValueError(f"d must be 3 and the axis e_3 for spherical-harmonic coefficients; received d = "
                             f"{self.d}, axis {self.axis}")
        out = np.zeros(grid.nalm, np.complex128)
        L = min(self.lmax, grid.lmax)
        out[:L + 1] = np.asarray(b, dtype=float)[:L + 1] / np.sqrt(4 * np.pi)   # m = 0 block comes first
        return out

    # ------------------------------------------------------------------ physics
    def fields(self, b):
        """On the nodes: ``f``, the velocity factor ``u`` (``X = u (e - t x)``), the normalizers ``D`` (H, n;
        1 for mean, ``Z`` for softmax, ``1 / a`` for Sinkhorn) and ``sinkhorn_error`` (H,; NaN for row-local
        heads).

        Parameters
        ----------
        b : array_like, shape (lmax + 1,)
            Orthonormal coefficients.

        Returns
        -------
        dict
            ``"f"`` and ``"u"`` of shape (n,), ``"D"`` of shape (H, n), ``"sinkhorn_error"`` of shape (H,), ``n``
            the number of Gauss-Jacobi nodes.
        """
        b = np.asarray(b, dtype=float)
        f = b @ self._Q
        info = {}
        u = field_velocity(self.heads, self._mult, b, _GegenbauerSpace(self), **self._solve_options(f),
                           details=info)[0]
        D, err = normalizers_and_errors(info, f.size)
        return {"f": f, "u": u, "D": D, "sinkhorn_error": err}

    def _mult(self, i, key):
        return self.multipliers[i][key]

    def _solve_options(self, f):
        return dict(rho=f, tol=self.sinkhorn_tol, maxiter=self.sinkhorn_maxiter, cache=self._scaling_cache)

    def scalings(self, b):
        """Per head: the Sinkhorn scaling ``a`` on the nodes (a :class:`meanfield.core.sinkhorn.SinkhornResult`
        with the marginal error reached), None for heads with a row-local normalization.

        Parameters
        ----------
        b : array_like, shape (lmax + 1,)
            Orthonormal coefficients.

        Returns
        -------
        list of SinkhornResult or None
            One entry per head.
        """
        b = np.asarray(b, dtype=float)
        return field_scalings(self.heads, self._mult, b, _GegenbauerSpace(self), **self._solve_options(b @ self._Q))

    def velocity(self, b):
        """Tangential speed ``u(t) sqrt(1 - t^2)`` at the nodes (signed: > 0 towards the axis).

        Parameters
        ----------
        b : array_like, shape (lmax + 1,)
            Orthonormal coefficients.

        Returns
        -------
        ndarray, shape (n,)
            At the Gauss-Jacobi nodes :attr:`nodes`.

        Raises
        ------
        ValueError
            ``b`` not real, finite, of shape ``(lmax + 1,)``.
        """
        return self.fields(validate.real_array("b", b, (self.lmax + 1,)))["u"] * np.sqrt(1 - self.nodes**2)

    def tendency(self, b):
        """``d b / dt``, shape (lmax+1,).

        Parameters
        ----------
        b : ndarray, shape (lmax + 1,)
            Orthonormal coefficients.

        Returns
        -------
        ndarray, shape (lmax + 1,)
        """
        fl = self.fields(b)
        out = self._dQ_flux @ (fl["f"] * fl["u"])
        if self.nu:
            out += self.nu * self._lap * b
        return out

    def rhs(self, t, y):
        """Right-hand side ``rhs(t, y)``; ``y`` real of shape (lmax+1,) (a NaN state is left to the driver, which
        stops on it).

        Parameters
        ----------
        t : float
            Time (unused: the equation is autonomous).
        y : array_like, shape (lmax + 1,)
            State vector.

        Returns
        -------
        ndarray, shape (lmax + 1,)
            :meth:`tendency` of ``y``.

        Raises
        ------
        ValueError
            ``y`` a string, complex, not numeric, or not of shape ``(lmax + 1,)``.
        """
        a = None if isinstance(y, (str, bytes)) or np.iscomplexobj(y) else np.asarray(y)
        if a is None or a.shape != (self.lmax + 1,) or a.dtype.kind not in "fiu":
            raise ValueError(f"y must be a real state vector of shape ({self.lmax + 1},) for lmax = {self.lmax}; "
                             f"received {type(y).__name__} of shape {np.shape(y)}")
        return self.tendency(a)

    def mass(self, b) -> float:
        """``int f dsigma = b_0``.

        Parameters
        ----------
        b : array_like, shape (lmax + 1,)
            Orthonormal coefficients.

        Returns
        -------
        float
        """
        return float(b[0])

    def energies(self, b):
        """Per-head energies ``E_h = 1/2 int int K_h(lambda <x, y>) f(x) f(y) dsigma dsigma``, shape (H,); for a
        Sinkhorn head ``E_S = -(1/beta) int log a f dsigma`` (MODEL.md section 6).

        Parameters
        ----------
        b : array_like, shape (lmax + 1,)
            Orthonormal coefficients.

        Returns
        -------
        ndarray, shape (H,)

        Raises
        ------
        ValueError
            ``b`` not real, finite, of shape ``(lmax + 1,)``.
        """
        b = validate.real_array("b", b, (self.lmax + 1,))
        f = b @ self._Q
        return np.array([0.5 * (m["potential"] * b) @ b if res is None
                         else -(self.weights * np.log(res.a) * f).sum() / h.beta
                         for h, m, res in zip(self.heads, self.multipliers, self.scalings(b))])

    def entropy(self, b) -> float:
        """Boltzmann entropy ``-int f log f dsigma`` (relative to ``sigma``; ``nan`` if ``f <= 0`` somewhere).

        Parameters
        ----------
        b : array_like, shape (lmax + 1,)
            Orthonormal coefficients.

        Returns
        -------
        float
        """
        f = np.asarray(b, dtype=float) @ self._Q
        if np.any(f <= 0):
            return float("nan")
        return float(-(self.weights * f * np.log(f)).sum())

    def spectral_tail(self, b, fraction=2 / 3) -> float:
        """Relative L2 size of degrees ``l > fraction lmax`` among ``l >= 1``.

        Parameters
        ----------
        b : array_like, shape (lmax + 1,)
            Orthonormal coefficients.
        fraction : float
            The tail starts above ``int(fraction lmax)``.

        Returns
        -------
        float
            In ``[0, 1]`` (:func:`meanfield.core.resolution.spectral_tail`).
        """
        return resolution.spectral_tail(np.asarray(b, dtype=float) ** 2, int(fraction * self.lmax))

    def negative_mass(self, b) -> float:
        """``-int min(f, 0) dsigma`` on the nodes (>= 0).

        Parameters
        ----------
        b : array_like, shape (lmax + 1,)
            Orthonormal coefficients.

        Returns
        -------
        float
        """
        return resolution.negative_mass(np.asarray(b, dtype=float) @ self._Q, lambda g: (self.weights * g).sum())

    def cfl_dt(self, b, cfl=0.5, scheme="rk4") -> float:
        """A stable fixed step of ``scheme``: ``cfl / (lmax max|u sqrt(1-t^2)| / I + nu lmax (lmax + d - 2) / R)``
        (``I``, ``R``: its stability reaches; :func:`meanfield.core.methods.stable_step`).

        Parameters
        ----------
        b : array_like, shape (lmax + 1,)
            Orthonormal coefficients.
        cfl : float
            Safety factor, positive and finite.
        scheme : str, Tableau or Stepper
            A ``method`` of :func:`meanfield.core.integrate.integrate`.

        Returns
        -------
        float

        Raises
        ------
        ValueError
            ``b`` refused by :meth:`velocity`, an unknown ``scheme``, a non-positive ``cfl``, or a scheme stable
            nowhere on the imaginary axis while the speed is nonzero.
        """
        a = self.lmax * np.abs(self.velocity(b)).max()
        return stable_step(a, self.nu * self.lmax * (self.lmax + self.d - 2), scheme, cfl,
                           what="the axisymmetric PDE")


class _GegenbauerSpace(LineSpace):
    """The axisymmetric space for :func:`meanfield.core.field_forces.field_velocity`: orthonormal Gegenbauer
    coefficients and values on the Gauss-Jacobi nodes (the velocity factor ``u`` as (1, n))."""

    def __init__(self, pde):
        super().__init__(pde, pde.nodes.shape)

    def gradient(self, c, key):
        return (c @ self.pde._dQ)[None, :]

    def evaluate(self, c, key):
        return c @ self.pde._Q

    def analysis(self, values):
        return self.pde._Q @ (self.pde.weights * values)
