r"""The mean-field PDE on the circle ``S^1`` (``d = 2``) in Fourier modes (numpy FFT only).

Densities ``f(theta)`` relative to the normalized measure ``dtheta / (2 pi)`` (uniform state ``f = 1``),

.. math:: f(\theta) = \sum_{|k| \le K} c_k e^{i k\theta},\qquad
          \partial_t f + \partial_\theta (f X) = \nu\, \partial_\theta^2 f,\qquad
          X = \sum_h \frac{\partial_\theta N_h}{D_h}

(``X`` the velocity along ``e_theta = (-sin theta, cos theta)``).  Zonal heads ``M = V = lambda I`` are
diagonal (Funk-Hecke on the circle: ``(1/2pi) int exp(a cos(theta - phi)) e^{ik phi} dphi = I_k(a) e^{ik theta}``,
:func:`meanfield.core.funk_hecke.funk_hecke_normalized` with ``d = 2``): ``N_h = m[K_h] c``,
``Z_h = m[k_h] c``.  General 2 x 2 heads use the equispaced quadrature on the grid through the kernel
sums of the particle system (:func:`meanfield.core.sums.aggregate`).  Products are formed on
``N >= 3K + 1`` equispaced nodes (no aliasing into degrees ``<= K`` for mean zonal heads), so the
mass ``c_0`` is conserved to round-off (the ``k = 0`` row of a derivative is 0).

The state is the real view (re, im pairs) of ``c_0 .. c_K`` (``c_{-k} = conj(c_k)``), length ``2 (K+1)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core import cost, resolution, validate
from ..core.choices import CONTINUUM_SUMMATIONS
from ..core.field_forces import (
    LineSpace,
    ScalingCache,
    check_solved_heads,
    field_scalings,
    field_velocity,
    normalizers_and_errors,
)
from ..core.funk_hecke import resolved_multipliers
from ..core.heads import check_heads
from ..core.kernels import KERNELS, check_finite_multipliers
from ..core.methods import stable_step
from ..core.sinkhorn import SINKHORN_MAXITER, SINKHORN_TOL
from ..core.sums import aggregate, pair_sum
from .plans import ReducedPlans

__all__ = ["CirclePDE", "CircleResolutionWarning", "circle_multipliers"]


class CircleResolutionWarning(UserWarning):
    """``kmax`` truncates a zonal head's Fourier multipliers above the requested tolerance."""


CIRCLE_BYTES_PER_MODE = 144.0
"""Peak bytes of building a :class:`CirclePDE` per Fourier mode, plus :data:`CIRCLE_BYTES_PER_MODE_HEAD` per
zonal head (measured with tracemalloc: 176 and 208 bytes per mode for one and two heads, kmax = 1e5 and 1e6)."""
CIRCLE_BYTES_PER_MODE_HEAD = 32.0
CIRCLE_SECONDS_PER_MODE = 6e-7
"""Seconds of building a :class:`CirclePDE` per Fourier mode (measured 3.4e-7 to 5.5e-7, kmax = 1e5 and 1e6)."""


def estimate_circle(kmax, n_heads) -> cost.Cost:
    """Estimated peak memory and time of building ``CirclePDE(heads, kmax)`` (sizes only)."""
    modes = float(kmax) + 1
    return cost.Cost(f"CirclePDE(kmax={kmax})", modes * (CIRCLE_BYTES_PER_MODE + CIRCLE_BYTES_PER_MODE_HEAD * n_heads),
                     modes * CIRCLE_SECONDS_PER_MODE, f"{n_heads} head(s), grid of 3 kmax + 3 = {3 * kmax + 3} nodes")


def circle_multipliers(head, kmax, *, where="head"):
    """Fourier multipliers (k = 0..kmax) of a zonal head on the circle: ``"potential"`` ``m[K(lambda cos)]``
    and ``"normalizer"`` ``m[k(lambda cos)]`` (exp: ``I_k(beta lambda) / beta`` and ``I_k(beta lambda)``);
    multipliers that overflow float64 are refused (:func:`meanfield.core.kernels.check_finite_multipliers`,
    the error starting with ``where``).

    Parameters
    ----------
    head : Head
        A zonal head of dimension 2.
    kmax : int
        Largest mode.
    where : str
        Names the head in an error message.

    Returns
    -------
    dict
        ``"potential"`` and ``"normalizer"``, each an ndarray of shape (kmax + 1,).

    Raises
    ------
    ValueError
        Multipliers that overflow float64.
    """
    return check_finite_multipliers(head, KERNELS[head.kernel].normalized_multipliers(head, kmax, 2), where)


@validate.renamed(method="summation")
@dataclass(frozen=True, eq=False)
class CirclePDE(ReducedPlans):
    """Multi-head continuity equation on ``S^1``.

    Parameters
    ----------
    heads : sequence of Head
        Heads of dimension 2 (zonal: spectral path; otherwise quadrature on the grid).
    kmax : int
        Largest Fourier mode ``K >= 2``.
    nu : float
        Noise ``nu >= 0``.
    kernel_tol : float
        Zonal heads: warn (:class:`CircleResolutionWarning`) when the first neglected potential multiplier,
        relative to the largest, exceeds this; raise above 1e-2.
    summation : {"auto", "spectral", "quadrature"}
        ``"auto"``: Fourier multipliers when every head is zonal, else direct sums over the grid nodes;
        ``"spectral"``: the multipliers (zonal heads only); ``"quadrature"``: the node sums (O(nodes^2), the reference).
    chunk_bytes : int
        Work space of the quadrature path.
    sinkhorn_tol, sinkhorn_maxiter :
        Marginal tolerance and iteration cap of the Sinkhorn scalings of Sinkhorn heads (zonal heads only;
        :meth:`scalings` reports the error reached).

    Raises
    ------
    ValueError
        ``kmax`` below 2; a negative ``nu`` or ``kernel_tol``; a non-positive ``chunk_bytes``, ``sinkhorn_tol``
        or ``sinkhorn_maxiter``; an unknown ``summation``; heads :func:`meanfield.core.heads.check_heads` refuses
        or of dimension other than 2; ``summation="spectral"`` with a non-zonal head; a ``kmax`` above the
        memory or time limit (:mod:`meanfield.core.cost`; on the quadrature path, the time of one evaluation);
        multipliers that overflow float64 or whose first neglected one is above ``1e-2`` of the largest.
    TypeError
        The keyword ``method`` of 0.2 (now ``summation``).
    """

    heads: tuple
    kmax: int
    nu: float = 0.0
    kernel_tol: float = 1e-10
    summation: str = "auto"
    chunk_bytes: int = 4 * 2**20        # not CHUNK_BYTES (8 MiB): see its docstring (the bits of the quadrature path)
    sinkhorn_tol: float = SINKHORN_TOL
    sinkhorn_maxiter: int = SINKHORN_MAXITER
    theta: np.ndarray = field(init=False, repr=False)
    zonal: bool = field(init=False)
    multipliers: tuple = field(init=False, repr=False)

    def __post_init__(self):
        K = validate.integer("kmax", self.kmax, 2)
        nu = validate.real("nu", self.nu, 0.0)
        tol = validate.real("kernel_tol", self.kernel_tol, 0.0)
        validate.integer("chunk_bytes", self.chunk_bytes, 1)
        validate.real("sinkhorn_tol", self.sinkhorn_tol, 0.0, lo_open=True)
        validate.integer("sinkhorn_maxiter", self.sinkhorn_maxiter, 1)
        summation = validate.choice("summation", self.summation, CONTINUUM_SUMMATIONS)
        heads = check_heads(self.heads)
        if heads[0].dim != 2:
            raise ValueError(f"heads must have dimension d = 2 (the PDE is on S^1); received d = {heads[0].dim}")
        all_zonal = all(h.is_zonal for h in heads)
        if summation == "spectral" and not all_zonal:
            raise ValueError("summation 'spectral' needs zonal heads (M = V = lambda I); received a non-zonal head")
        estimate_circle(K, len(heads)).check("a smaller kmax")         # before any (K,) array exists
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        for k, v in (("kmax", K), ("nu", nu), ("kernel_tol", tol), ("heads", heads), ("summation", summation)):
            set_(k, v)
        n = 3 * K + 3
        set_("theta", 2 * np.pi * np.arange(n) / n)
        set_("zonal", all_zonal and summation != "quadrature")
        check_solved_heads(heads, self.zonal)
        if not self.zonal:                     # quadrature: every evaluation sums over all (3K+3)^2 node pairs
            pairs = float(n) ** 2 * len(heads)
            cost.guard(f"CirclePDE(kmax={K}) on the quadrature path", seconds=pairs * cost.SECONDS_PER_PAIR,
                       detail=f"one evaluation: {n}^2 node pairs x {len(heads)} head(s)",
                       fix="a smaller kmax, or zonal heads (M = V = lambda I: the spectral path)")
        set_("_scaling_cache", ScalingCache())
        mults = []
        for i, h in enumerate(heads if self.zonal else ()):
            m = circle_multipliers(h, K + 1, where=f"heads[{i}]")
            mults.append(resolved_multipliers(m, i, "kmax", K, tol, CircleResolutionWarning))
        set_("multipliers", tuple(mults))
        set_("_dpotential", tuple(1j * np.arange(K + 1) * m["potential"] for m in mults))
        set_("_ik", 1j * np.arange(K + 1))
        set_("_k2", -np.arange(K + 1) ** 2.0)
        set_("_nodes", np.column_stack([np.cos(self.theta), np.sin(self.theta)]))

    # ------------------------------------------------------------------ state
    @property
    def n_state(self) -> int:
        """Length of the real state vector, ``2 (kmax + 1)``."""
        return 2 * (self.kmax + 1)

    def state(self, c, name="c"):
        """Real state vector (a copy) from Fourier coefficients ``c_0..c_K`` (complex, (kmax+1,));
        ``name`` names the argument in the message of a refusal.

        The density is real, so its mass ``c_0`` is: an imaginary part of ``c_0`` above
        :data:`meanfield.core.validate.MASS_TOL` (relative to ``max(1, |c_0|)``) is refused, never dropped; one
        below it (round-off) is set to 0.

        Parameters
        ----------
        c : array_like, shape (kmax + 1,)
            Fourier coefficients ``c_0..c_K``.
        name : str
            The argument's name in an error message.

        Returns
        -------
        ndarray, shape (n_state,)
            The re, im pairs of ``c``.

        Raises
        ------
        ValueError
            ``c`` not finite, not of shape ``(kmax + 1,)``, or with an imaginary mass above the tolerance.
        """
        c = self.check_coefficients(c, name)
        if abs(c[0].imag) > validate.MASS_TOL * max(1.0, abs(c[0])):
            raise ValueError(f"{name} must hold the Fourier coefficients of a real density, whose mass {name}[0] = c_0 "
                             f"is real (to {validate.MASS_TOL:g} relative); received {name}[0] = {complex(c[0])!r}, an "
                             f"imaginary mass {c[0].imag:.6g}")
        c = c.copy()
        c[0] = c[0].real
        return c.view(np.float64).copy()

    def check_coefficients(self, c, name="c"):
        """``c`` as complex128 (kmax+1,), checked finite (a named ValueError otherwise).

        Parameters
        ----------
        c : array_like, shape (kmax + 1,)
            Fourier coefficients.
        name : str
            The argument's name in an error message.

        Returns
        -------
        ndarray of complex128, shape (kmax + 1,)

        Raises
        ------
        ValueError
            Not numeric, not of shape ``(kmax + 1,)``, or not finite.
        """
        return validate.complex_array(name, c, (self.kmax + 1,))

    def coefficients(self, y):
        """Fourier coefficients ``c_0..c_K`` from a real state vector (a view; complex or non-numeric ``y`` refused).

        Parameters
        ----------
        y : array_like, shape (n_state,)
            Real state vector (re, im pairs).

        Returns
        -------
        ndarray of complex128, shape (kmax + 1,)

        Raises
        ------
        ValueError
            ``y`` a string, complex, not numeric, or not of shape ``(n_state,)``.
        """
        if isinstance(y, (str, bytes)) or np.iscomplexobj(y):
            raise ValueError(f"y must be a real state vector of shape ({self.n_state},) (the re, im pairs of "
                             f"c_0..c_K); received {type(y).__name__} {np.asarray(y).dtype}")
        try:
            y = np.ascontiguousarray(y, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"y must be a real state vector of shape ({self.n_state},); received {y!r}") from None
        if y.shape != (self.n_state,):
            raise ValueError(f"y must have shape ({self.n_state},) for kmax = {self.kmax}; received shape {y.shape}")
        return y.view(np.complex128)

    def uniform(self):
        """The uniform density ``f = 1``.

        Returns
        -------
        ndarray of complex128, shape (kmax + 1,)
            ``c_0 = 1``, every other coefficient 0.
        """
        c = np.zeros(self.kmax + 1, np.complex128)
        c[0] = 1.0
        return c

    def synthesis(self, c, n=None):
        """Values on ``n`` equispaced nodes (default the product grid).

        Parameters
        ----------
        c : array_like, shape (kmax + 1,)
            Fourier coefficients ``c_0..c_K``.
        n : int, optional
            Number of nodes ``theta_j = 2 pi j / n`` (default ``3 kmax + 3``, :attr:`theta`).

        Returns
        -------
        ndarray, shape (n,)
        """
        n = self.theta.size if n is None else n
        return np.fft.irfft(np.asarray(c), n) * n

    def analysis(self, values):
        """``c_0..c_K`` of real values on equispaced nodes (exact for trigonometric polynomials of degree < n/2);
        complex values are refused (their imaginary part would be dropped).

        Parameters
        ----------
        values : array_like, shape (n,)
            Real values on the nodes ``theta_j = 2 pi j / n``.

        Returns
        -------
        ndarray of complex128, shape (min(kmax + 1, n // 2 + 1),)

        Raises
        ------
        ValueError
            Complex ``values``.
        """
        if np.iscomplexobj(values):
            raise ValueError(f"values must be real (values of a density on equispaced nodes); received complex values "
                             f"of dtype {np.asarray(values).dtype}")
        values = np.asarray(values, dtype=float)
        return np.fft.rfft(values)[: self.kmax + 1] / values.size

    def project(self, profile):
        """Fourier coefficients of a function ``profile(theta)`` (vectorized), sampled on the product grid.

        ``profile(theta)`` must return finite real values of the shape of ``theta`` (``(3 kmax + 3,)``): any other
        shape, NaN, inf or complex values are refused by name, never projected.

        Parameters
        ----------
        profile : callable
            ``profile(theta) -> ndarray`` of the shape of ``theta``.

        Returns
        -------
        ndarray of complex128, shape (kmax + 1,)

        Raises
        ------
        ValueError
            ``profile`` not callable, or values that are not numeric, real, finite, of the shape of ``theta``.
        """
        if not callable(profile):
            raise ValueError(f"profile must be a callable of theta (ndarray); received {profile!r}")
        vals = profile(self.theta)
        what = f"profile must return finite real values of the shape of theta, {self.theta.shape}"
        try:
            raw = np.asarray(vals)
        except (TypeError, ValueError):
            raise ValueError(f"{what}; received {type(vals).__name__}") from None
        if raw.dtype.kind not in "iuf":
            raise ValueError(f"{what}; received values of dtype {raw.dtype}"
                             + (" (the imaginary part of a density is refused, never dropped)"
                                if raw.dtype.kind == "c" else ""))
        if raw.shape != self.theta.shape:
            raise ValueError(f"{what}; received shape {raw.shape}")
        if not np.all(np.isfinite(raw)):
            raise ValueError(f"{what}; received {int(np.sum(~np.isfinite(raw)))} non-finite value(s) (NaN or inf)")
        return self.analysis(raw)

    # ------------------------------------------------------------------ physics
    def fields(self, c):
        """On the grid: ``f``, the velocity ``X`` (along ``e_theta``), normalizers ``D`` (H, n; 1 for mean,
        ``Z`` for softmax, ``1 / a`` for Sinkhorn) and ``sinkhorn_error`` (H,; NaN for row-local heads).

        Parameters
        ----------
        c : array_like, shape (kmax + 1,)
            Fourier coefficients.

        Returns
        -------
        dict
            ``"f"`` and ``"X"`` of shape (n,), ``"D"`` of shape (H, n), ``"sinkhorn_error"`` of shape (H,), with
            ``n = 3 kmax + 3`` nodes.
        """
        c = np.asarray(c)
        f = self.synthesis(c)
        n = f.size
        D = np.ones((len(self.heads), n))
        err = np.full(len(self.heads), np.nan)
        if self.zonal:
            info = {}
            X = field_velocity(self.heads, self._mult, c, _FourierSpace(self), **self._solve_options(f),
                               details=info)[0]
            D, err = normalizers_and_errors(info, n)
            return {"f": f, "X": X, "D": D, "sinkhorn_error": err}
        X = np.zeros(n)
        w = f / n
        etheta = np.column_stack([-np.sin(self.theta), np.cos(self.theta)])
        for h, head in enumerate(self.heads):
            u, nrm = aggregate(head, self._nodes, self._nodes, w, self.chunk_bytes)
            X += (u * etheta).sum(axis=1)
            D[h] = nrm
        return {"f": f, "X": X, "D": D, "sinkhorn_error": err}

    def _mult(self, i, key):
        # the derivative i k is folded into the potential multipliers (_FourierSpace.gradient only synthesizes)
        return self._dpotential[i] if key == "potential" else self.multipliers[i][key]

    def _solve_options(self, f):
        return dict(rho=f, tol=self.sinkhorn_tol, maxiter=self.sinkhorn_maxiter, cache=self._scaling_cache)

    def scalings(self, c):
        """Per head: the Sinkhorn scaling ``a`` on the grid (a :class:`meanfield.core.sinkhorn.SinkhornResult`
        with the marginal error reached), None for heads with a row-local normalization.

        Parameters
        ----------
        c : array_like, shape (kmax + 1,)
            Fourier coefficients.

        Returns
        -------
        list of SinkhornResult or None
            One entry per head (all None on the quadrature path).
        """
        if not self.zonal:
            return [None] * len(self.heads)
        c = np.asarray(c)
        return field_scalings(self.heads, self._mult, c, _FourierSpace(self), **self._solve_options(self.synthesis(c)))

    def velocity(self, c):
        """Velocity ``X(theta)`` along ``e_theta`` on the grid.

        Parameters
        ----------
        c : array_like, shape (kmax + 1,)
            Fourier coefficients (checked: :meth:`check_coefficients`).

        Returns
        -------
        ndarray, shape (3 kmax + 3,)

        Raises
        ------
        ValueError
            ``c`` not finite or not of shape ``(kmax + 1,)``.
        """
        return self.fields(self.check_coefficients(c))["X"]

    def tendency(self, c):
        """``d c_k / dt = -i k (f X)_k - nu k^2 c_k``, shape (kmax+1,).

        Parameters
        ----------
        c : ndarray of complex, shape (kmax + 1,)
            Fourier coefficients.

        Returns
        -------
        ndarray of complex128, shape (kmax + 1,)
        """
        fl = self.fields(c)
        out = -self._ik * self.analysis(fl["f"] * fl["X"])
        if self.nu:
            out += self.nu * self._k2 * c
        return out

    def rhs(self, t, y):
        """Right-hand side ``rhs(t, y)`` on the real state vector.

        Parameters
        ----------
        t : float
            Time (unused: the equation is autonomous).
        y : array_like, shape (n_state,)
            Real state vector.

        Returns
        -------
        ndarray, shape (n_state,)
            The real view of :meth:`tendency`.

        Raises
        ------
        ValueError
            ``y`` not a real vector of shape ``(n_state,)`` (:meth:`coefficients`).
        """
        return self.tendency(self.coefficients(y)).view(np.float64)

    def mass(self, c) -> float:
        """``(1/2pi) int f = c_0``.

        Parameters
        ----------
        c : array_like, shape (kmax + 1,)
            Fourier coefficients.

        Returns
        -------
        float
            The real part of ``c_0``.
        """
        return float(np.real(c[0]))

    def energies(self, c):
        """Per-head energies ``1/2 int int K_h(<x, M_h y>) f f``, shape (H,); for a Sinkhorn head
        ``E_S = -(1/beta) int log a f`` (MODEL.md section 6).

        Parameters
        ----------
        c : array_like, shape (kmax + 1,)
            Fourier coefficients (checked: :meth:`check_coefficients`).

        Returns
        -------
        ndarray, shape (H,)

        Raises
        ------
        ValueError
            ``c`` not finite or not of shape ``(kmax + 1,)``.
        """
        c = self.check_coefficients(c)
        if self.zonal:
            p = np.abs(c) ** 2
            p[1:] *= 2
            scalings = self.scalings(c)
            f = self.synthesis(c)
            return np.array([0.5 * (m["potential"] * p).sum() if res is None else -(np.log(res.a) * f).mean() / h.beta
                             for h, m, res in zip(self.heads, self.multipliers, scalings)])
        w = self.synthesis(c) / self.theta.size
        return np.array([pair_sum(h, self._nodes, w, self.chunk_bytes) for h in self.heads])

    def entropy(self, c) -> float:
        """``-(1/2pi) int f log f`` on the grid (``nan`` where ``f <= 0`` somewhere).

        Parameters
        ----------
        c : array_like, shape (kmax + 1,)
            Fourier coefficients.

        Returns
        -------
        float
        """
        f = self.synthesis(c)
        return float("nan") if np.any(f <= 0) else float(-(f * np.log(f)).mean())

    def spectral_tail(self, c, fraction=2 / 3) -> float:
        """Relative L2 size of modes ``k > fraction kmax`` among ``k >= 1``.

        Parameters
        ----------
        c : array_like, shape (kmax + 1,)
            Fourier coefficients.
        fraction : float
            The tail starts above ``int(fraction kmax)``.

        Returns
        -------
        float
            In ``[0, 1]`` (:func:`meanfield.core.resolution.spectral_tail`).
        """
        return resolution.spectral_tail(np.abs(np.asarray(c)) ** 2, int(fraction * self.kmax))

    def negative_mass(self, c) -> float:
        """``-(1/2pi) int min(f, 0)`` on the grid (>= 0).

        Parameters
        ----------
        c : array_like, shape (kmax + 1,)
            Fourier coefficients.

        Returns
        -------
        float
        """
        return resolution.negative_mass(self.synthesis(c), np.mean)

    def cfl_dt(self, c, cfl=0.5, scheme="rk4") -> float:
        """A stable fixed step of ``scheme``, ``cfl / (K max|X| / I + nu K^2 / R)`` (``I``, ``R``: its
        stability reaches; :func:`meanfield.core.methods.stable_step`, the rule of every PDE here).

        Parameters
        ----------
        c : array_like, shape (kmax + 1,)
            Fourier coefficients.
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
            ``c`` refused by :meth:`check_coefficients`, an unknown ``scheme``, a non-positive ``cfl``, or a
            scheme stable nowhere on the imaginary axis while ``max|X| > 0``.
        """
        a = self.kmax * np.abs(self.velocity(c)).max()
        return stable_step(a, self.nu * self.kmax**2, scheme, cfl, what="the circle PDE")


class _FourierSpace(LineSpace):
    """The circle's space for :func:`meanfield.core.field_forces.field_velocity`: Fourier coefficients
    ``c_0..c_K`` and values on the product grid (velocities as (1, n) along ``e_theta``).  The derivative
    ``i k`` is in the potential multipliers (:meth:`CirclePDE._mult`): ``gradient`` only synthesizes."""

    def __init__(self, pde):
        super().__init__(pde, pde.theta.shape)

    def gradient(self, c, key):
        return self.pde.synthesis(c)[None, :]

    def evaluate(self, c, key):
        return self.pde.synthesis(c)

    def analysis(self, values):
        return self.pde.analysis(values)
