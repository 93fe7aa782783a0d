r"""The causal continuum on ``S^1``: a density over the circle and the position ``s in [0, 1]``.

The mean-field limit of :class:`meanfield.models.causal.CausalSystem` on ``S^1`` (``d = 2``) with zonal heads
``M = V = lambda I``: token ``i`` of ``n`` sits at the position ``s = i / n``; the tokens near ``s`` have the law
``f(theta, s) dtheta / (2 pi)`` (densities relative to the normalized measure, as in
:class:`meanfield.models.circle.CirclePDE`; the uniform state is ``f = 1``).  Each position attends to the positions
before it (Castin, Ablin, Carrillo, Peyré, arXiv 2501.18322, masked attention; Karagodin, Polyanskiy, Rigollet,
arXiv 2411.04990, the particle system):

.. math::

    \partial_t f(\theta, s) + \partial_\theta\big(f X\big) = 0,\qquad
    X(\theta, s) = \sum_h \frac{\partial_\theta (m_h[K] * \bar f_s)(\theta)}{D_h(\theta, s)},\qquad
    \bar f_s = \frac1s \int_0^s f(\cdot, s')\, ds',

with ``D_h = m_h[k] * \bar f_s`` (softmax: ``v = int_0^s int k V y f / int_0^s int k f``) or the prefix-averaged mass
``int \bar f_s`` (mean), and at ``s = 0`` the limit ``\bar f_0 = f(\cdot, 0)`` (position 0 attends to itself).  The
convolutions are the Fourier multipliers of :class:`~meanfield.models.circle.CirclePDE` (``m[K]``, ``m[k]``: for exp
kernels ``I_k(beta lambda) / beta`` and ``I_k(beta lambda)``); the prefix integral commutes with them, so one
cumulative quadrature in ``s`` per step serves every head.

Discretization: Fourier modes ``c_0..c_K`` in ``theta`` (products on ``3K + 3`` nodes: the mass ``c_0`` of every
position is conserved to round-off) times ``Q`` positions with a cumulative rule (:data:`POSITION_RULES`):

* ``"gauss"``: Gauss-Legendre nodes on ``[0, 1]``; ``int_0^s`` of the degree ``Q - 1`` Legendre interpolant
  (spectral: exact for densities polynomial in ``s`` of degree ``< Q``; error ``O(rho^{-Q})`` for analytic ones);
* ``"trapezoid"``: ``Q`` equispaced nodes ``s_q = q / (Q - 1)``, the cumulative trapezoid rule (order 2).

:meth:`CausalCirclePDE.position_error` measures the velocity error of the rule at a state (trapezoid: Richardson
against every other node; gauss: the velocity's change when the top half of the position modes is dropped, an
upper estimate), and :meth:`CausalCirclePDE.check_positions` refuses a grid too coarse for a requested accuracy,
saying the measured error.

The state ``y`` has shape ``(Q, 2 (K + 1))``: per position the real view (re, im pairs) of ``c_0..c_K``.

:class:`CausalSpherePDE` is the same equation on ``S^2``: spherical-harmonic coefficients per position with the
Funk-Hecke multipliers and grid operators of :class:`meanfield.models.continuum.ContinuumPDE` for zonal heads (for a
density that does not depend on ``s`` both give the same velocity, checked to round-off), one dealiased grid
transform pair per position and evaluation; general heads (any ``M``, ``V``) through ContinuumPDE's bi-spherical
operators at the unit-mass prefix average of each position (checked against the quadrature sums to 1e-13).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.polynomial import legendre as npleg

from ..core import validate
from ..core.heads import check_heads
from ..core.kernels import NORMALIZATIONS
from .circle import CirclePDE
from .plans import density_plan

__all__ = ["CausalCirclePDE", "CausalSpherePDE", "POSITION_RULES", "position_rule"]

POSITION_RULES = {"gauss": "spectral (exact for degree < Q in s)", "trapezoid": "order 2"}
"""The cumulative rules in ``s`` and their order."""


def _legendre_values(m_max, x):
    """``P_m(x)`` for ``m = 0..m_max``, shape (m_max + 1, len(x))."""
    x = np.atleast_1d(np.asarray(x, float))
    P = np.empty((m_max + 2, x.size))
    P[0] = 1.0
    if m_max + 1 >= 1:
        P[1] = x
    for m in range(1, m_max + 1):
        P[m + 1] = ((2 * m + 1) * x * P[m] - m * P[m - 1]) / (m + 1)
    return P


class _Rule:
    """Nodes, interpolation and cumulative weights of one rule in ``s``."""

    def __init__(self, rule, Q):
        self.rule, self.Q = rule, Q
        if rule == "gauss":
            x, w = npleg.leggauss(Q)
            self.x, self.w = x, w
            self.s = 0.5 * (x + 1.0)
            Pk = _legendre_values(Q - 1, x)[:Q]                   # (Q modes, Q nodes)
            self._coef = (2 * np.arange(Q)[:, None] + 1) / 2.0 * Pk * w[None, :]   # mode m of node k
        else:
            self.s = np.linspace(0.0, 1.0, Q)

    def modes(self, s):
        """Gauss: the weights mapping node values to Legendre modes (Q, Q) (rows: modes)."""
        return self._coef

    def interpolation(self, s):
        """Weights (len(s), Q): values at ``s`` of the interpolant through the nodes."""
        s = np.atleast_1d(np.asarray(s, float))
        if self.rule == "gauss":
            P = _legendre_values(self.Q - 1, 2 * s - 1)[:self.Q]
            return P.T @ self._coef
        h = 1.0 / (self.Q - 1)
        return np.clip(1.0 - np.abs(s[:, None] - self.s[None, :]) / h, 0.0, None)

    def cumulative(self, s, top=None):
        """Weights (len(s), Q): ``int_0^s`` of the interpolant through the nodes; ``top`` (gauss only): keep the
        Legendre modes below ``top``."""
        s = np.atleast_1d(np.asarray(s, float))
        if self.rule == "gauss":
            Q = self.Q if top is None else top
            P = _legendre_values(Q, 2 * s - 1)                    # P_0..P_{Q+1}
            I = np.empty((Q, s.size))
            I[0] = 2 * s                                          # int_{-1}^x P_0 = x + 1
            for m in range(1, Q):
                I[m] = (P[m + 1] - P[m - 1]) / (2 * m + 1)
            return 0.5 * I.T @ self._coef[:Q]
        h = 1.0 / (self.Q - 1)
        a = self.s[None, :]
        up = np.clip(s[:, None] - (a - h), 0.0, h)                # rising half [s_k - h, s_k]
        down = np.clip(s[:, None] - a, 0.0, h)                    # falling half [s_k, s_k + h]
        W = up ** 2 / (2 * h) + down - down ** 2 / (2 * h)
        W[:, 0] -= h / 2.0                                        # node 0 has no rising half inside [0, 1]
        return W

    def received_weights(self, s):
        """Weights (len(s), Q): ``int_s^1 h(s') / s' ds'`` of the interpolant ``h`` of node values, for ``s > 0``
        (rows of ``s = 0`` are NaN): ``-h(0) log s`` plus the rule's integral of ``(h(s') - h(0)) / s'``."""
        s = np.atleast_1d(np.asarray(s, float))
        e0 = self.interpolation(np.zeros(1))[0]                   # h(0) from the node values
        Dq = np.eye(self.Q) - e0[None, :]                         # h(s_q) - h(0)
        pos = self.s > 0
        Dq[pos] /= self.s[pos, None]
        if not np.all(pos):                                       # trapezoid node 0: the one-sided difference
            Dq[~pos] = (np.eye(self.Q)[1] - np.eye(self.Q)[0]) / self.s[1]
        C = self.cumulative(np.concatenate([[1.0], s]))
        with np.errstate(divide="ignore", invalid="ignore"):
            W = -np.log(s)[:, None] * e0[None, :] + (C[0] - C[1:]) @ Dq
        W[s == 0] = np.nan
        return W

    def prefix_average(self, top=None):
        """(Q, Q): ``(1/s_q) int_0^{s_q}`` of the interpolant (the interpolant's value at ``s = 0``)."""
        W = self.cumulative(self.s, top)
        out = np.empty_like(W)
        pos = self.s > 0
        out[pos] = W[pos] / self.s[pos, None]
        if not np.all(pos):
            out[~pos] = self.interpolation(self.s[~pos])
        return out


def position_rule(rule, positions):
    """Nodes ``s_q`` and the prefix-average matrix of a rule in ``s``.

    Parameters
    ----------
    rule : {"gauss", "trapezoid"}
    positions : int
        Number of nodes ``Q`` (``>= 2``; ``>= 3`` for the trapezoid rule).

    Returns
    -------
    s : ndarray, shape (Q,)
    A : ndarray, shape (Q, Q)
        ``(A f)_q = (1 / s_q) int_0^{s_q} f(s) ds`` for the rule's interpolant of node values ``f``.

    Raises
    ------
    ValueError
        An unknown rule or too few positions.
    """
    rule = validate.choice("rule", rule, tuple(POSITION_RULES))
    Q = validate.integer("positions", positions, 3 if rule == "trapezoid" else 2, 512,
                         what="an integer in [2, 512] (gauss) or [3, 512] (trapezoid)")
    r = _Rule(rule, Q)
    return r.s, r.prefix_average()


class _CausalContinuum:
    """What :class:`CausalCirclePDE` and :class:`CausalSpherePDE` share: the checks of the heads and of the rule in
    ``s``, the real state, the rule's measurements (windows, interpolation, the position error and its refusal) and
    the attention received.  A subclass supplies its coefficients' layout (``_ncoef``, ``_size_text``), grid
    transforms (``_to_grid``, ``_from_grid``), kernel convolutions (``_convolve``), the inner product of two fields
    (``_inner``) and the velocity ``_velocity(c, avg)``."""

    def _setup(self, heads, d, convolution, zonal_only=True):
        """Check the heads (``d``, row-local, zonal unless not ``zonal_only``) and the rule; set ``heads, rule,
        positions, _rule, s, _avg, _softmax``.  ``convolution`` names the zonal operator in the error message."""
        heads = check_heads(heads)
        if heads[0].dim != d:
            raise ValueError(f"heads must have dimension d = {d} (the causal continuum on S^{d - 1}); received d = "
                             f"{heads[0].dim}")
        for i, h in enumerate(heads):
            if not NORMALIZATIONS[h.normalization].row_local:
                raise ValueError(f"heads[{i}].normalization must be one of ['mean', 'softmax'] under a causal mask "
                                 f"(a doubly stochastic scaling of a causal kernel has no positive solution); "
                                 f"received {h.normalization!r}")
            if zonal_only and not h.is_zonal:
                raise ValueError(f"heads[{i}] must be zonal (M = V = lambda I: {convolution}); received a non-zonal "
                                 f"head")
        rule = validate.choice("rule", self.rule, tuple(POSITION_RULES))
        Q = validate.integer("positions", self.positions, 3 if rule == "trapezoid" else 2, 512,
                             what="an integer in [2, 512] (gauss) or [3, 512] (trapezoid)")
        r = _Rule(rule, Q)
        for k, v in (("heads", heads), ("rule", rule), ("positions", Q), ("_rule", r), ("s", r.s),
                     ("_avg", r.prefix_average()),
                     ("_softmax", tuple(NORMALIZATIONS[h.normalization].uses_normalizer for h in heads))):
            object.__setattr__(self, k, v)
        return heads

    # ------------------------------------------------------------------ state
    @property
    def shape(self):
        """Shape of the real state, ``(Q, 2 x coefficients per position)``."""
        return (self.positions, 2 * self._ncoef)

    def state(self, c):
        """The real state (per position the re, im pairs) of coefficients ``c``.

        Parameters
        ----------
        c : array_like of complex, shape (Q, coefficients per position)

        Returns
        -------
        ndarray, shape :attr:`shape`

        Raises
        ------
        ValueError
            Wrong shape or non-finite values.
        """
        c = validate.complex_array("c", c, (self.positions, self._ncoef))
        return np.ascontiguousarray(c, dtype=np.complex128).view(np.float64).copy()

    def plan(self, start, t_final, *, method=None, step=None, t_eval=None):
        """The driver's arguments for a run from coefficients ``start`` (:class:`~meanfield.core.model.SolvableModel`).

        :func:`meanfield.models.plans.density_plan` on :meth:`state`: ``"dopri5"`` by default, tolerances
        ``rtol = 1e-8``, ``atol = 1e-12`` unless given, the :meth:`cfl_dt` step of a fixed-step scheme without
        ``dt``; a split scheme is refused by name (no split part).

        Parameters
        ----------
        start : array_like of complex, shape (Q, coefficients per position)
            Coefficients (:meth:`uniform`-shaped).
        t_final : float
            End time.
        method : str, Tableau or Stepper, optional
            The scheme.
        step : StepControl, optional
            Step settings.
        t_eval : array_like, optional
            Output times.

        Returns
        -------
        RunPlan

        Raises
        ------
        ValueError
            ``t_final`` not positive and finite, coefficients of another shape or not finite, a split scheme.
        """
        t_final = validate.real("t_final", t_final, positive=True)
        y0 = self.state(start)
        return density_plan(self, y0, self.coefficients(y0), t_final, method=method, step=step, t_eval=t_eval,
                            label="causal PDE")

    def coefficients(self, y):
        """The coefficients (a complex view, one row per position) of a real state ``y``.

        Parameters
        ----------
        y : array_like, shape :attr:`shape`

        Returns
        -------
        ndarray of complex128, shape (Q, coefficients per position)

        Raises
        ------
        ValueError
            ``y`` complex, not numeric or of another shape.
        """
        if isinstance(y, (str, bytes)) or np.iscomplexobj(y):
            raise ValueError(f"y must be a real state of shape {self.shape} (per position the re, im pairs of the "
                             f"coefficients); received {type(y).__name__}")
        try:
            y = np.ascontiguousarray(y, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"y must be a real state of shape {self.shape}; received {y!r}") from None
        if y.shape != self.shape:
            raise ValueError(f"y must have shape {self.shape} (positions = {self.positions}, {self._size_text}); "
                             f"received shape {y.shape}")
        return y.view(np.complex128)

    def rhs(self, t, y):
        """Right-hand side for :func:`meanfield.core.integrate.integrate` on the real state.

        Parameters
        ----------
        t : float
            Unused (autonomous).
        y : array_like, shape :attr:`shape`

        Returns
        -------
        ndarray, shape :attr:`shape`

        Raises
        ------
        ValueError
            ``y`` of another shape or type (:meth:`coefficients`).
        """
        return np.ascontiguousarray(self.tendency(self.coefficients(y))).view(np.float64)

    # ------------------------------------------------------------------ positions
    def density_at(self, c, s):
        """Coefficients of the density at positions ``s`` (interpolated by the rule), one row per position.

        Parameters
        ----------
        c : array_like of complex, shape (Q, coefficients per position)
        s : array_like of float in [0, 1]

        Returns
        -------
        ndarray of complex128, shape (len(s), coefficients per position)

        Raises
        ------
        ValueError
            Positions outside ``[0, 1]`` or not finite.
        """
        s = self._positions_arg("s", s)
        return self._rule.interpolation(s) @ np.asarray(c)

    def window(self, c, s_lo, s_hi):
        """Coefficients of the average density over the positions ``[s_lo, s_hi]``.

        Parameters
        ----------
        c : array_like of complex, shape (Q, coefficients per position)
        s_lo, s_hi : float
            ``0 <= s_lo < s_hi <= 1``.

        Returns
        -------
        ndarray of complex128, shape (coefficients per position,)

        Raises
        ------
        ValueError
            Bounds outside ``[0, 1]`` or not increasing.
        """
        lo = validate.real("s_lo", s_lo, 0.0, 1.0)
        hi = validate.real("s_hi", s_hi, 0.0, 1.0)
        if not hi > lo:
            raise ValueError(f"s_hi must be larger than s_lo (a window of positions); received s_lo = {lo}, "
                             f"s_hi = {hi}")
        W = self._rule.cumulative(np.array([lo, hi]))
        return (W[1] - W[0]) @ np.asarray(c) / (hi - lo)

    def _positions_arg(self, name, s):
        s = validate.real_array(name, np.atleast_1d(s), (None,))
        if np.any(s < 0) or np.any(s > 1):
            raise ValueError(f"{name} must lie in [0, 1] (positions); received values in [{s.min()}, {s.max()}]")
        return s

    def position_error(self, c):
        """Measured error of the velocity from the rule in ``s`` at state ``c`` (max over the grid).

        Trapezoid: Richardson, ``max |X_h - X_2h| / 3`` at the nodes of the half grid (the rule on every other
        node; the first ``Q - 1`` nodes when ``Q - 1`` is odd).  Gauss: ``max |X - X'|`` where ``X'`` keeps only
        the Legendre modes in ``s`` below ``Q / 2`` in the prefix integrals (the change from dropping the top half
        of the modes: an upper estimate of the error of the degree ``Q - 1`` rule for densities whose modes decay).

        Parameters
        ----------
        c : array_like of complex, shape (Q, coefficients per position)

        Returns
        -------
        float
        """
        c = np.asarray(c)
        X = self._velocity(c, self._avg)
        if self.rule == "gauss":
            top = max(1, self.positions // 2)
            return float(np.abs(X - self._velocity(c, self._rule.prefix_average(top))).max())
        Q = self.positions if (self.positions - 1) % 2 == 0 else self.positions - 1
        coarse = _Rule("trapezoid", (Q - 1) // 2 + 1)
        sub = c[:Q:2]
        Xc = self._velocity(sub, coarse.prefix_average())
        return float(np.abs(X[:Q:2] - Xc).max() / 3.0)

    def check_positions(self, c, accuracy):
        """Refuse a position grid too coarse for ``accuracy`` at state ``c``, with the measured error.

        Parameters
        ----------
        c : array_like of complex, shape (Q, coefficients per position)
        accuracy : float
            Largest acceptable velocity error (:meth:`position_error`), positive.

        Returns
        -------
        float
            The measured error (when within ``accuracy``).

        Raises
        ------
        ValueError
            The measured error is above ``accuracy`` (said, with the rule and the number of positions).
        """
        accuracy = validate.real("accuracy", accuracy, 0.0, lo_open=True, what="a positive number")
        err = self.position_error(c)
        if not err <= accuracy:
            raise ValueError(f"positions = {self.positions} (rule {self.rule!r}, {POSITION_RULES[self.rule]}) is too "
                             f"coarse for accuracy = {accuracy:.3g}: the measured velocity error at this state is "
                             f"{err:.3g}; use more positions (or rule 'gauss' for smooth densities in s)")
        return err

    # ------------------------------------------------------------------ attention received
    def attention_received(self, c, s=None):
        r"""The attention received by position ``s`` from the positions after it, per head, shape (H, len(s)).

        The mean-field limit of :meth:`meanfield.models.causal.CausalSystem.attention_received` (``R_j`` at ``s =
        (j + 1/2) / n``): position ``s'`` gives the tokens at ``y`` and position ``s <= s'`` the weight
        ``k(<x', y>) / (s' D(x', s'))`` (``D`` the prefix-averaged normalizer: softmax ``k * \bar f_{s'}``, mean the
        prefix-averaged mass), so

        .. math::

            r(s) = \int f(y, s) \Big(k * \int_s^1 \frac{f(\cdot, s')}{s' D(\cdot, s')}\, ds'\Big)(y)\, dy,

        which integrates to 1 over ``[0, 1]`` for softmax heads and unit masses (every position distributes one unit
        of attention).  The ``1/s'`` singularity is integrated exactly: with ``h = f / D`` interpolated by the rule,
        ``int_s^1 h / s' = -h(0) log s + int_s^1 (h(s') - h(0)) / s'`` (the second integrand a polynomial of degree
        ``Q - 2`` for the Gauss rule; for the trapezoid rule its value at ``s = 0`` is the one-sided difference).
        With all scores equal (``lambda = 0``) and unit masses ``r(s) = -log s``.  ``r(0)`` is ``+inf`` (the first
        position is attended by every later one; the particles' ``R_0`` grows like ``log n``).

        Parameters
        ----------
        c : array_like of complex, shape (Q, coefficients per position)
        s : array_like of float in [0, 1], optional
            Positions (default the nodes :attr:`s`).

        Returns
        -------
        ndarray, shape (H, len(s))

        Raises
        ------
        ValueError
            Positions outside ``[0, 1]`` or not finite.
        """
        s = self.s if s is None else self._positions_arg("s", s)
        c = np.asarray(c)
        pos = s > 0
        W = self._rule.received_weights(s[pos])                      # (S, Q): int_s^1 (.) / s' ds'
        F = self._rule.interpolation(s[pos]) @ c                     # densities at s
        f = self._to_grid(c)                                         # (Q, grid)
        A = self._avg @ c
        out = np.full((len(self.heads), s.size), np.inf)
        for h in range(len(self.heads)):
            G = np.tensordot(W, f / self._normalizer(A, h, f.ndim), axes=1)   # (S, grid)
            out[h, pos] = self._inner(F, self._received(G, h))
        return out

    def _normalizer(self, A, h, ndim):
        """``D_h`` on the grid at every position of the prefix averages ``A`` (zonal heads: the convolution); ``ndim``
        the number of dimensions of a stack of grid fields."""
        if self._softmax[h]:
            return self._to_grid(self._convolve(A, h))
        return self.mass(A).reshape((-1,) + (1,) * (ndim - 1))

    def _received(self, G, h):
        """Coefficients of ``int k_h(<x', M_h y>) G(x') dx'`` (as functions of ``y``) of grid fields ``G`` (rows)."""
        return self._convolve(self._from_grid(G), h)


@dataclass(frozen=True, eq=False)
class CausalCirclePDE(_CausalContinuum):
    """The causal continuity equation on ``S^1 x [0, 1]`` (circle x position).

    Parameters
    ----------
    heads : sequence of Head
        Zonal heads of dimension 2 (``M = V = lambda I``), normalization ``"mean"`` or ``"softmax"``.
    kmax : int
        Largest Fourier mode ``K >= 2``.
    positions : int
        Number of positions ``Q``.
    rule : {"gauss", "trapezoid"}
        The cumulative rule in ``s`` (:data:`POSITION_RULES`).
    kernel_tol : float
        Truncation tolerance of the Fourier multipliers (as for :class:`~meanfield.models.circle.CirclePDE`).

    Raises
    ------
    ValueError
        Non-zonal or Sinkhorn heads (named), dimension other than 2, ``kmax`` below 2, an unknown rule, too few
        positions, multipliers the ``kmax`` does not resolve.
    """

    heads: tuple
    kmax: int
    positions: int = 32
    rule: str = "gauss"
    kernel_tol: float = 1e-10
    s: np.ndarray = field(init=False, repr=False)
    theta: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        heads = self._setup(self.heads, 2, "Fourier multipliers on the circle")
        circle = CirclePDE(heads, self.kmax, kernel_tol=self.kernel_tol, summation="spectral")
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("kmax", circle.kmax)
        set_("_circle", circle)
        set_("theta", circle.theta)
        k = np.arange(circle.kmax + 1)
        set_("_ik", 1j * k)
        set_("_dpot", tuple(1j * k * m["potential"] for m in circle.multipliers))
        set_("_norm", tuple(m["normalizer"] for m in circle.multipliers))

    # ------------------------------------------------------------------ what the shared methods need
    @property
    def _ncoef(self):
        return self.kmax + 1

    @property
    def _size_text(self):
        return f"kmax = {self.kmax}"

    def _to_grid(self, c):
        return self.synthesis(c)

    def _from_grid(self, g):
        return np.fft.rfft(g, axis=-1)[..., :self.kmax + 1] / self.theta.size

    def _convolve(self, c, h):
        return c * self._norm[h]

    def _inner(self, F, G):
        """Rows of ``int F G dtheta / 2 pi`` of real fields from their coefficients (modes 0..kmax)."""
        p = (F * np.conj(G)).real
        return p[:, 0] + 2.0 * p[:, 1:].sum(axis=1)

    def uniform(self):
        """The uniform state ``f = 1`` at every position, coefficients (Q, kmax + 1).

        Returns
        -------
        ndarray of complex128, shape (Q, kmax + 1)
        """
        c = np.zeros((self.positions, self.kmax + 1), np.complex128)
        c[:, 0] = 1.0
        return c

    def project(self, profile):
        """Coefficients (Q, kmax + 1) of ``profile(theta, s)`` (vectorized over both, broadcast as ``theta[None, :]``,
        ``s[:, None]``), sampled on the product grid.

        Parameters
        ----------
        profile : callable
            ``profile(theta, s) -> ndarray`` of shape (Q, 3 kmax + 3): finite real values.

        Returns
        -------
        ndarray of complex128, shape (Q, kmax + 1)

        Raises
        ------
        ValueError
            ``profile`` not callable, or values of another shape, complex or not finite.
        """
        if not callable(profile):
            raise ValueError(f"profile must be a callable profile(theta, s); received {profile!r}")
        vals = np.asarray(profile(self.theta[None, :], self.s[:, None]))
        want = (self.positions, self.theta.size)
        if vals.shape != want or np.iscomplexobj(vals) or not np.all(np.isfinite(vals)):
            raise ValueError(f"profile(theta, s) must return finite real values of shape {want}; received "
                             f"{vals.dtype} values of shape {vals.shape}")
        return np.fft.rfft(vals.astype(float), axis=1)[:, :self.kmax + 1] / self.theta.size

    def synthesis(self, c, n=None):
        """Values (Q, n) on ``n`` equispaced angles (default the product grid).

        Parameters
        ----------
        c : array_like, shape (..., kmax + 1)
        n : int, optional

        Returns
        -------
        ndarray, shape (..., n)
        """
        n = self.theta.size if n is None else int(n)
        return np.fft.irfft(np.asarray(c), n, axis=-1) * n

    # ------------------------------------------------------------------ dynamics
    def _velocity(self, c, avg):
        A = avg @ c                                                # prefix averages (Q, K+1)
        n = self.theta.size
        X = np.zeros((c.shape[0], n))
        for dp, nm, soft in zip(self._dpot, self._norm, self._softmax):
            dN = np.fft.irfft(A * dp, n, axis=1) * n
            if soft:
                D = np.fft.irfft(A * nm, n, axis=1) * n
            else:
                D = A[:, :1].real
            X += dN / D
        return X

    def velocity(self, c):
        """Velocity ``X(theta, s_q)`` along ``e_theta`` on the grid, shape (Q, 3 kmax + 3).

        Parameters
        ----------
        c : array_like of complex, shape (Q, kmax + 1)

        Returns
        -------
        ndarray, shape (Q, 3 kmax + 3)
        """
        return self._velocity(np.asarray(c), self._avg)

    def tendency(self, c):
        """``dc/dt`` (Q, kmax + 1): ``-i k`` times the coefficients of ``f X``.

        Parameters
        ----------
        c : array_like of complex, shape (Q, kmax + 1)

        Returns
        -------
        ndarray of complex128, shape (Q, kmax + 1)
        """
        c = np.asarray(c)
        n = self.theta.size
        f = np.fft.irfft(c, n, axis=1) * n
        flux = np.fft.rfft(f * self._velocity(c, self._avg), axis=1)[:, :self.kmax + 1] / n
        return -self._ik * flux

    # ------------------------------------------------------------------ measurements
    def mass(self, c):
        """Mass of every position, ``c_0`` (relative to ``dtheta / 2 pi``), shape (Q,).

        Parameters
        ----------
        c : array_like of complex, shape (Q, kmax + 1)

        Returns
        -------
        ndarray, shape (Q,)
        """
        return np.asarray(c)[:, 0].real.copy()

    def observer(self):
        """An ``observe(t, y) -> dict`` hook: ``mass_min``, ``mass_max`` (per-position masses, conserved),
        ``order_parameter_mean`` / ``_first`` / ``_last`` (``|c_1|`` over positions / at the first / last node: 1 for
        a point mass), ``speed_max`` (largest ``|X|`` on the grid), ``negative_mass`` (largest over positions of the
        mass where ``f < 0`` on the grid, relative to ``dtheta / 2 pi``).  No energy: the flow is not a gradient flow.

        Returns
        -------
        callable
        """
        def observe(t, y):
            c = self.coefficients(y)
            f = self.synthesis(c)
            r = np.abs(c[:, 1]) if self.kmax >= 1 else np.zeros(self.positions)
            m = self.mass(c)
            return {"mass_min": float(m.min()), "mass_max": float(m.max()), "order_parameter_mean": float(r.mean()),
                    "order_parameter_first": float(r[0]), "order_parameter_last": float(r[-1]),
                    "speed_max": float(np.abs(self.velocity(c)).max()),
                    "negative_mass": float(np.clip(-f, 0, None).mean(axis=1).max())}
        return observe

    def cfl_dt(self, c, cfl=0.5):
        """A stable explicit step estimate ``cfl * (2 pi / n) / max |X|`` (n the product grid), for fixed steps.

        Parameters
        ----------
        c : array_like of complex, shape (Q, kmax + 1)
        cfl : float

        Returns
        -------
        float
        """
        v = float(np.abs(self.velocity(c)).max())
        h = 2 * math.pi / self.theta.size
        return cfl * h / max(v, 1e-12)


@dataclass(frozen=True, eq=False)
class CausalSpherePDE(_CausalContinuum):
    r"""The causal continuity equation on ``S^2 x [0, 1]`` (sphere x position), zonal or general heads.

    The same equation as :class:`CausalCirclePDE` on ``S^2``: densities ``rho(x, s)`` relative to the surface measure
    (``int rho(., s) dx`` the mass of position ``s``), spherical-harmonic coefficients ``rho_lm(s)`` up to ``lmax`` per
    position (products on :meth:`meanfield.core.sphere.SphereGrid.dealiased`), the same rules in ``s``, and

    .. math:: X(x, s) = \sum_h \frac{\nabla_S (c_h[K] \bar\rho_s)(x)}{D_h(x, s)},\qquad
              D_h = c_h[k] \bar\rho_s \ (\text{softmax}) \text{ or } \int \bar\rho_s \ (\text{mean}),

    with the Funk-Hecke multipliers of :func:`meanfield.core.zonal.zonal_multipliers` when every head is zonal (those
    of :class:`meanfield.models.continuum.ContinuumPDE`: for a density that does not depend on ``s`` the velocity is
    ContinuumPDE's).  General heads (any ``M``, ``V``; MODEL.md section 8) go through the bi-spherical operators of
    a :class:`~meanfield.models.continuum.ContinuumPDE` (:attr:`operators`): the prefix average commutes with the
    kernel sums, and the causal normalizations (softmax ``Z_h[\bar\rho_s]``, mean the prefix-averaged mass) are
    the non-causal ones at the unit-mass density ``\bar\rho_s / m_s``, so position ``s`` moves with ContinuumPDE's
    velocity at ``\bar\rho_s / m_s``.  The mass of every position is conserved to round-off (the divergence has no
    degree 0).

    Parameters
    ----------
    heads : sequence of Head
        Heads of dimension 3 (zonal or general), normalization ``"mean"`` or ``"softmax"``.
    lmax : int
        Degree ``>= 2``.
    positions : int
    rule : {"gauss", "trapezoid"}
    kernel_tol : float
        Zonal heads (every head zonal): refuse heads whose first neglected potential multiplier exceeds
        ``max(kernel_tol, 1e-2)`` of the largest.
    operator_tol : float
        General heads (any head not zonal): the tolerance of the operators, ``kernel_tol`` of
        :class:`~meanfield.models.continuum.ContinuumPDE` (its warnings and refusals name ``kernel_tol``: here it is
        this field).

    Raises
    ------
    ValueError
        Sinkhorn heads, dimension other than 3, an unknown rule, too few positions, a negative ``kernel_tol`` or
        ``operator_tol``, a degree that does not resolve zonal heads, general heads ContinuumPDE refuses, a general
        head whose kernel has no operator degree rule (ReLU).
    """

    heads: tuple
    lmax: int
    positions: int = 16
    rule: str = "gauss"
    kernel_tol: float = 1e-2
    operator_tol: float = 1e-10
    s: np.ndarray = field(init=False, repr=False)
    operators: object = field(init=False, repr=False)

    def __post_init__(self):
        from ..core.sphere import NodeTransforms, SphereGrid
        from ..core.zonal import truncation_level, zonal_multipliers

        heads = self._setup(self.heads, 3, "Funk-Hecke multipliers", zonal_only=False)
        L = validate.integer("lmax", self.lmax, 2, 256, what="an integer in [2, 256]")
        validate.real("kernel_tol", self.kernel_tol, 0.0)
        validate.real("operator_tol", self.operator_tol, 0.0)
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        if not all(h.is_zonal for h in heads):
            from ..core.kernels import KERNELS
            from .continuum import ContinuumPDE

            for i, h in enumerate(heads):
                if not h.is_zonal and not KERNELS[h.kernel].has_lmax_rule:
                    raise ValueError(f"heads[{i}] is a general head with kernel {h.kernel!r}, which has no operator "
                                     f"degree rule; general heads need one of "
                                     f"{[k for k in KERNELS if KERNELS[k].has_lmax_rule]} here")

            ops = ContinuumPDE(heads, L, kernel_tol=self.operator_tol, summation="spectral")
            set_("lmax", L)
            set_("grid", ops.grid)
            set_("operators", ops)
            set_("_node_transforms", NodeTransforms(ops.grid, ops.general.lmax))
            return
        set_("operators", None)
        tol = max(validate.real("kernel_tol", self.kernel_tol, 0.0), 1e-2)
        for i, h in enumerate(heads):
            level = truncation_level(h, L, where=f"heads[{i}]")
            if level > tol:
                raise ValueError(f"lmax = {L} does not resolve heads[{i}]: its first neglected potential multiplier is "
                                 f"{level:.2e} of the largest (allowed {tol:.0e}); use a larger lmax")
        set_("lmax", L)
        set_("grid", SphereGrid.dealiased(L))
        mults = [zonal_multipliers(h, L, where=f"heads[{i}]") for i, h in enumerate(heads)]
        set_("_pot", tuple(m["potential"] for m in mults))
        set_("_norm", tuple(m["normalizer"] for m in mults))

    # ------------------------------------------------------------------ what the shared methods need
    @property
    def _ncoef(self):
        return self.grid.nalm

    @property
    def _size_text(self):
        return f"lmax = {self.lmax}"

    def _to_grid(self, c):
        return np.stack([self.grid.synthesis(row) for row in np.asarray(c)])

    def _from_grid(self, g):
        return np.stack([self.grid.analysis(row) for row in g])

    def _convolve(self, c, h):
        return np.stack([self.grid.multiply_degree(row, self._norm[h]) for row in c])

    def _inner(self, F, G):
        """Rows of ``int F G dx`` over S^2 of real fields from their coefficients."""
        return np.array([self.grid.inner(a, b) for a, b in zip(F, G)])

    def _velocity(self, c, avg):
        A = avg @ np.asarray(c)
        return np.stack([self._velocity_q(A[q]) for q in range(A.shape[0])])

    def uniform(self):
        """The uniform state of unit mass at every position, coefficients (Q, nalm).

        Returns
        -------
        ndarray of complex128, shape (Q, nalm)
        """
        c = np.zeros((self.positions, self.grid.nalm), np.complex128)
        c[:, 0] = 1.0 / math.sqrt(4 * math.pi)
        return c

    def project(self, profile):
        """Coefficients (Q, nalm) of ``profile(X, s)`` (``X`` the grid nodes (nlat, nlon, 3), ``s`` a float).

        Parameters
        ----------
        profile : callable
            ``profile(X, s) -> ndarray`` of shape (nlat, nlon): finite real values.

        Returns
        -------
        ndarray of complex128, shape (Q, nalm)

        Raises
        ------
        ValueError
            ``profile`` not callable, or values of another shape, complex or not finite.
        """
        if not callable(profile):
            raise ValueError(f"profile must be a callable profile(X, s); received {profile!r}")
        out = np.empty((self.positions, self.grid.nalm), np.complex128)
        for q, s in enumerate(self.s):
            v = np.asarray(profile(self.grid.nodes, float(s)))
            if v.shape != self.grid.shape or np.iscomplexobj(v) or not np.all(np.isfinite(v)):
                raise ValueError(f"profile(X, s) must return finite real values of shape {self.grid.shape}; "
                                 f"received {v.dtype} values of shape {v.shape}")
            out[q] = self.grid.analysis(v.astype(float))
        return out

    def mass(self, c):
        """Mass of every position, ``sqrt(4 pi) Re rho_00``, shape (Q,).

        Parameters
        ----------
        c : array_like of complex, shape (Q, nalm)

        Returns
        -------
        ndarray, shape (Q,)
        """
        return math.sqrt(4 * math.pi) * np.asarray(c)[:, 0].real

    def _unit(self, A):
        """General heads: the unit-mass density ``A / m`` of prefix-averaged coefficients ``A`` and its mass ``m``
        (a non-positive mass gives NaN coefficients: the driver rejects the stage)."""
        m = math.sqrt(4 * math.pi) * float(np.real(A[0]))
        return (A / m if m > 0 else np.full_like(A, np.nan)), m

    def _normalizer(self, A, h, ndim):
        if self.operators is None:
            return super()._normalizer(A, h, ndim)
        if not self._softmax[h]:
            return super()._normalizer(A, h, ndim)                      # the prefix-averaged mass
        from ..core.bispherical import NodeSources

        out = np.empty((A.shape[0],) + self.grid.shape)
        for q in range(A.shape[0]):                                      # Z_h[A] = int k_h(<x, M_h y>) A(y) dy
            space = NodeSources(self._node_transforms, self.grid.synthesis(A[q]))
            out[q] = np.reshape(self.operators.general.head_sums(h, space).apply(None), self.grid.shape)
        return out

    def _received(self, G, h):
        if self.operators is None:
            return super()._received(G, h)
        from ..core.bispherical import NodeSources

        out = []
        for row in G:                  # int k_h(<x', M_h y>) G(x') dx' at the nodes y: G as the sources, transposed
            sums = self.operators.general.head_sums(h, NodeSources(self._node_transforms, np.asarray(row)))
            T = (sums.apply_t or sums.apply)(None)                    # apply_t is None for a symmetric M
            out.append(self.grid.analysis(np.reshape(T, self.grid.shape)))
        return np.stack(out)

    def _velocity_q(self, A):
        if self.operators is not None:
            unit, _ = self._unit(A)
            return self.operators.fields(unit)["X"]
        g = self.grid
        X = np.zeros((2,) + g.shape)
        for pot, nm, soft in zip(self._pot, self._norm, self._softmax):
            grad = g.gradient(g.multiply_degree(A, pot))
            D = g.synthesis(g.multiply_degree(A, nm)) if soft else math.sqrt(4 * math.pi) * A[0].real
            X += grad / D
        return X

    def velocity(self, c):
        """Velocity at the grid nodes per position, components on ``(e_theta, e_phi)``, shape (Q, 2, nlat, nlon).

        Parameters
        ----------
        c : array_like of complex, shape (Q, nalm)

        Returns
        -------
        ndarray, shape (Q, 2, nlat, nlon)
        """
        return self._velocity(c, self._avg)

    def cfl_dt(self, c, cfl=0.5, scheme="rk4"):
        """A stable fixed step of ``scheme`` for transport of degree ``lmax`` at the largest speed of every position:
        ``cfl / (a / I)`` with ``a = lmax max|X|`` (:meth:`meanfield.models.continuum.ContinuumPDE.cfl_dt` without
        diffusion).

        Parameters
        ----------
        c : array_like of complex, shape (Q, nalm)
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
            An unknown ``scheme``, a bad ``cfl``, or a scheme whose stability region reaches no part of the imaginary
            axis while ``max|X| > 0`` (:func:`meanfield.core.methods.stable_step`).
        """
        from ..core.methods import stable_step

        X = self.velocity(c)
        speed = float(np.sqrt((X ** 2).sum(axis=1)).max())
        return stable_step(self.lmax * speed, 0.0, scheme, cfl, what=f"at speed max|X| = {speed:.3g}")

    def tendency(self, c):
        """``d rho_lm / dt = -div(rho X)`` per position, shape (Q, nalm).

        Parameters
        ----------
        c : array_like of complex, shape (Q, nalm)

        Returns
        -------
        ndarray of complex128, shape (Q, nalm)
        """
        c = np.asarray(c)
        A = self._avg @ c
        g = self.grid
        out = np.empty((self.positions, g.nalm), np.complex128)
        for q in range(self.positions):
            out[q] = -g.divergence(g.synthesis(c[q]) * self._velocity_q(A[q]))
        return out
