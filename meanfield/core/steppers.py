r"""One-step methods as :func:`meanfield.core.integrate.integrate` drives them: the :class:`Stepper` interface.

A *stepper* advances ``y' = rhs(t, y)`` (explicit) or ``y' = L y + rhs(t, y)`` (split, with a
diagonal linear part ``L``, an array multiplied elementwise, e.g. ``-nu l (l + 1)`` for diffusion
in spherical harmonics) by one step of size ``dt``.  Every stepper declares its order, whether it
carries an embedded error estimate, whether it is first-same-as-last, and the reach of its
stability region along the imaginary and negative real axes (:class:`Tableau`); a split stepper
reports the region of the explicit scheme it reduces to when ``L = 0``.

* :class:`ExplicitRK`: the scheme of any :class:`Tableau` (:data:`SCHEMES`);
* split steppers: :class:`IMEXEuler` (order 1), :class:`ETDRK2` and :class:`ETDRK4`
  (exponential time differencing, orders 2 and 4, through :func:`phi_functions`), and the
  implicit-explicit Runge-Kutta pairs :class:`IMEXRK` ``"ars232"`` and ``"ars443"`` (Ascher, Ruuth
  and Spiteri 1997, orders 2 and 3; :data:`meanfield.core.tableaux.IMEX_TABLEAUX`);
* :class:`LawsonRK`, integrating-factor forms of explicit tableaux
  (``"lawson_dopri5"``, adaptive, and ``"lawson_rk4"``).

Every stepper declares its capabilities (:attr:`Stepper.explicit`, ``split``, ``exponential``,
``stochastic``, ``adaptive``, ``fsal``, ``order``); the named instances, stochastic schemes included,
are the one table :data:`meanfield.core.methods.METHODS`.

Which split scheme to use: ``"lawson_dopri5"`` is the only one with error control (no embedded
estimate is published for the ARS pairs, see :class:`IMEXRK`).  At fixed steps the ARS pairs'
implicit parts are L-stable: a stiff mode without transport decays (not oscillates) however large
``dt nu l (l + 1)`` is; under transport ARS(4,4,3) still damps it, ARS(2,3,2) does not (see
:class:`IMEXRK`).

Numpy only; nothing else of ``meanfield``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from . import validate
from .tableaux import SCHEMES, IMEXTableau, Tableau, rk_stages, rk_step

__all__ = ["Stepper", "ExplicitRK", "IMEXEuler", "ETDRK2", "ETDRK4", "IMEXRK", "LawsonRK", "phi_functions"]


# ----------------------------------------------------------------------------- the stepper interface
class Stepper(ABC):
    """A one-step method as :func:`meanfield.core.integrate.integrate` drives it.

    Subclasses are frozen dataclasses with a ``name`` and an ``order``.  A *split* stepper
    (``split = True``) advances ``y' = L y + rhs(t, y)`` and receives the diagonal ``L`` (an array
    broadcasting against ``y``) as ``linear``; an explicit stepper receives ``linear=None`` (the
    driver folds a given ``L`` into its right-hand side).
    """

    name: str
    order: int
    split: bool = False

    @property
    def explicit(self) -> bool:
        """True for an explicit scheme of ``y' = rhs(t, y)`` (neither split nor stochastic)."""
        return not (self.split or self.stochastic)

    @property
    def exponential(self) -> bool:
        """True when the linear part is integrated exactly (exponential or integrating-factor schemes)."""
        return False

    @property
    def stochastic(self) -> bool:
        """True for a scheme of a stochastic equation: :meth:`step` takes Brownian increments."""
        return False

    @property
    def adaptive(self) -> bool:
        """True when :meth:`step` returns an embedded error estimate."""
        return False

    @property
    def reuses_k0(self) -> bool:
        """True when :meth:`step` takes ``rhs(t, y)`` as ``k0`` (the driver evaluates it at the start);
        False for schemes that never do (stochastic schemes, step rules)."""
        return not self.stochastic

    @property
    def err_order(self) -> int | None:
        """Order of the embedded solution (None without one)."""
        return None

    @property
    def fsal(self) -> bool:
        """True when :meth:`step` returns ``rhs(t + dt, y_new)`` for reuse as the next ``k0``."""
        return False

    @property
    @abstractmethod
    def explicit_tableau(self) -> Tableau:
        """The explicit scheme this stepper is when ``L = 0`` (its stability region is reported)."""

    @property
    def imag_reach(self) -> float:
        """Reach of the (explicit part's) stability region along the imaginary axis, see :class:`Tableau`."""
        return self.explicit_tableau.imag_reach

    @property
    def real_reach(self) -> float:
        """Reach of the (explicit part's) stability region along the negative real axis."""
        return self.explicit_tableau.real_reach

    @abstractmethod
    def step(self, rhs, t, y, dt, k0=None, linear=None):
        """Advance from ``(t, y)`` by ``dt``.

        Parameters
        ----------
        rhs : callable ``rhs(t, y) -> ndarray`` of the shape of ``y`` (the nonlinear part ``N``
            for a split stepper)
        t : float
        y : ndarray, any shape
        dt : float
        k0 : ndarray, shape y.shape, optional
            ``rhs(t, y)`` if already known.
        linear : ndarray broadcasting against ``y``, optional
            Diagonal ``L`` of a split stepper (None: ``L = 0``); must be None for explicit ones.

        Returns
        -------
        y_new : ndarray, shape y.shape
        y_err : ndarray or None
            Local error estimate (None unless ``adaptive``).
        k_last : ndarray or None
            ``rhs(t + dt, y_new)`` when ``fsal``, else None.
        """


class _TableauStepper(Stepper):
    """A stepper whose order, error pair, FSAL and stability region are those of its ``tableau`` field."""

    tableau: Tableau

    @property
    def order(self) -> int:
        return self.tableau.order

    @property
    def adaptive(self) -> bool:
        return self.tableau.adaptive

    @property
    def err_order(self) -> int | None:
        return self.tableau.err_order

    @property
    def fsal(self) -> bool:
        return self.tableau.fsal

    @property
    def explicit_tableau(self) -> Tableau:
        return self.tableau


@dataclass(frozen=True, eq=False)
class ExplicitRK(_TableauStepper):
    """The explicit Runge-Kutta scheme of a :class:`Tableau` (name, order, error pair, FSAL from it).

    Parameters
    ----------
    tableau : Tableau
        The Butcher tableau.
    """

    tableau: Tableau

    @property
    def name(self) -> str:
        return self.tableau.name


    def step(self, rhs, t, y, dt, k0=None, linear=None):
        """Advance from ``(t, y)`` by ``dt`` (:meth:`Stepper.step`).

        Parameters
        ----------
        rhs : callable
            ``rhs(t, y) -> ndarray`` of the shape of ``y``.
        t : float
        y : ndarray, any shape
        dt : float
        k0 : ndarray, shape y.shape, optional
            ``rhs(t, y)`` if already known.
        linear : None
            Must be None (an explicit scheme has no linear part).

        Returns
        -------
        y_new : ndarray, shape y.shape
        y_err : ndarray or None
            Embedded error estimate (None without an embedded pair).
        k_last : ndarray or None
            ``rhs(t + dt, y_new)`` for a FSAL tableau, else None.

        Raises
        ------
        ValueError
            ``linear`` given.
        """
        if linear is not None:
            raise ValueError(f"linear must be None for the explicit scheme {self.name!r} (fold L y into rhs); "
                             f"received an array")
        return rk_step(rhs, t, y, dt, self.tableau, k0)


# ----------------------------------------------------------------------------- split steppers
def phi_functions(z, n):
    r"""``phi_0(z), ..., phi_n(z)`` of exponential integrators, elementwise.

    .. math:: \varphi_0(z) = e^z,\quad \varphi_{k+1}(z) = \frac{\varphi_k(z) - 1/k!}{z},\quad
              \varphi_k(0) = 1/k!.

    Parameters
    ----------
    z : array_like, real or complex, any shape
    n : int >= 0

    Returns
    -------
    list of n + 1 ndarrays of the shape of ``z``
        The recurrence cancels for small ``|z|``; there (``|z| < 1``) the Taylor series
        :math:`\varphi_k(z) = \sum_j z^j / (j + k)!`, summed to ``j = 24`` (remainder below
        ``1 / 25!``), is used instead.  Measured relative error against exact rational sums:
        below ``1e-15`` for ``n <= 3``, ``1e-13`` for ``n <= 6`` (worst at ``z = 1``).

    Raises
    ------
    ValueError
        ``n`` not an integer ``>= 0``.
    """
    n = validate.integer("n", n, 0)
    z = np.asarray(z)
    dtype = np.result_type(z, float)
    small = np.abs(z) < 1.0
    zs, zb = z[small], z[~small]
    out = [np.empty(z.shape, dtype) for _ in range(n + 1)]
    phi, fact = np.exp(zb), 1.0
    for k in range(n + 1):
        series = np.zeros(zs.shape, dtype)
        for j in range(24, -1, -1):        # Taylor: sum_j z^j / (j + k)!, Horner from the top
            series = series * zs + 1.0 / math.factorial(j + k)
        out[k][small] = series
        out[k][~small] = phi
        phi = (phi - 1.0 / fact) / zb      # the recurrence, only where |z| >= 1
        fact *= k + 1
    return out


def _linear_or_zero(linear, y):
    return np.zeros((), dtype=y.dtype) if linear is None else linear


def _last_step_cache(stepper, dt, L, compute):
    """``compute(dt, L)``, kept for the last ``(dt, L)`` on the stepper instance (fixed steps reuse it)."""
    cache = stepper.__dict__.setdefault("_cache", [None])   # per instance; frozen fields untouched
    hit = cache[0]
    if hit is not None and hit[0] == dt and hit[1].shape == L.shape and hit[1].dtype == L.dtype \
            and np.array_equal(hit[1], L):
        return hit[2]
    value = compute(dt, L)
    cache[0] = (dt, np.array(L, copy=True), value)          # one assignment: readers see old or new
    return value


@dataclass(frozen=True, eq=False)
class IMEXEuler(Stepper):
    r"""IMEX Euler: explicit in ``rhs``, implicit in the diagonal ``L`` (order 1).

    .. math:: y_{n+1} = \frac{y_n + \Delta t\, N(t_n, y_n)}{1 - \Delta t\, L}

    Unconditionally stable for ``L <= 0``; Euler when ``L = 0``.

    Parameters
    ----------
    name : str
        The scheme's name in :data:`meanfield.core.methods.METHODS`.
    order : int
        Its order (1).
    split : bool
        True: a split scheme (``linear`` is its ``L``).
    """

    name: str = "imex_euler"
    order: int = 1
    split: bool = True

    @property
    def explicit_tableau(self) -> Tableau:
        return SCHEMES["euler"]

    def step(self, rhs, t, y, dt, k0=None, linear=None):
        L = _linear_or_zero(linear, y)
        N0 = rhs(t, y) if k0 is None else k0
        return (y + dt * N0) / (1.0 - dt * L), None, None


class _Exponential(Stepper):
    """Split steppers whose coefficients are phi functions of ``dt L``: the last set is kept, since
    fixed steps reuse it (a step shortened to land on ``t_eval`` computes its own)."""

    @property
    def exponential(self) -> bool:
        return True

    def _coefficients(self, dt, L):
        return _last_step_cache(self, dt, L, self._read_only_coefficients)

    def _read_only_coefficients(self, dt, L):
        coef = self._compute(dt, L)
        for c in coef:
            c.setflags(write=False)
        return coef

    @abstractmethod
    def _compute(self, dt, L):
        """The arrays the step multiplies by, from ``dt`` and ``L``."""


@dataclass(frozen=True, eq=False)
class ETDRK2(_Exponential):
    r"""Exponential time differencing RK2 (Cox and Matthews 2002), order 2; ``L`` integrated exactly.

    .. math:: a = e^{\Delta t L} y_n + \Delta t\, \varphi_1(\Delta t L)\, N(t_n, y_n),\qquad
              y_{n+1} = a + \Delta t\, \varphi_2(\Delta t L)\, \big(N(t_n + \Delta t, a) - N(t_n, y_n)\big)

    Heun's method when ``L = 0``.

    Parameters
    ----------
    name : str
        The scheme's name in :data:`meanfield.core.methods.METHODS`.
    order : int
        Its order (2).
    split : bool
        True: a split scheme (``linear`` is its ``L``).
    """

    name: str = "etdrk2"
    order: int = 2
    split: bool = True

    @property
    def explicit_tableau(self) -> Tableau:
        return SCHEMES["heun"]

    def step(self, rhs, t, y, dt, k0=None, linear=None):
        e, p1, p2 = self._coefficients(dt, _linear_or_zero(linear, y))
        N0 = rhs(t, y) if k0 is None else k0
        a = e * y + dt * p1 * N0
        return a + dt * p2 * (rhs(t + dt, a) - N0), None, None

    def _compute(self, dt, L):
        return phi_functions(dt * L, 2)


@dataclass(frozen=True, eq=False)
class ETDRK4(_Exponential):
    r"""Exponential time differencing RK4 (Cox and Matthews 2002, Krogstad's weights), order 4 for
    non-stiff ``L`` (fixed steps; it may lose orders when ``|dt L|`` is large); classic RK4 when ``L = 0``.

    With :math:`E = e^{\Delta t L/2}`, :math:`P = \frac{\Delta t}{2}\varphi_1(\Delta t L/2)`,
    :math:`N_u = N(t_n, y_n)`:

    .. math:: a = E y_n + P N_u,\quad b = E y_n + P N_a,\quad c = E a + P (2 N_b - N_u),

              y_{n+1} = e^{\Delta t L} y_n + \Delta t \big(f_1 N_u + 2 f_2 (N_a + N_b) + f_3 N_c\big),

    :math:`f_1 = \varphi_1 - 3\varphi_2 + 4\varphi_3`, :math:`f_2 = \varphi_2 - 2\varphi_3`,
    :math:`f_3 = 4\varphi_3 - \varphi_2` at :math:`\Delta t L`; ``N_a``, ``N_b`` at ``t_n + dt/2``,
    ``N_c`` at ``t_n + dt``.

    Parameters
    ----------
    name : str
        The scheme's name in :data:`meanfield.core.methods.METHODS`.
    order : int
        Its order (4).
    split : bool
        True: a split scheme (``linear`` is its ``L``).
    """

    name: str = "etdrk4"
    order: int = 4
    split: bool = True

    @property
    def explicit_tableau(self) -> Tableau:
        return SCHEMES["rk4"]

    def step(self, rhs, t, y, dt, k0=None, linear=None):
        e2, P, e, f1, f2, f3 = self._coefficients(dt, _linear_or_zero(linear, y))
        Nu = rhs(t, y) if k0 is None else k0
        a = e2 * y + P * Nu
        Na = rhs(t + 0.5 * dt, a)
        b = e2 * y + P * Na
        Nb = rhs(t + 0.5 * dt, b)
        c = e2 * a + P * (2.0 * Nb - Nu)
        Nc = rhs(t + dt, c)
        return e * y + dt * (f1 * Nu + 2.0 * f2 * (Na + Nb) + f3 * Nc), None, None

    def _compute(self, dt, L):
        e2, p_half = phi_functions(0.5 * dt * L, 1)
        e, p1, q2, q3 = phi_functions(dt * L, 3)
        return e2, 0.5 * dt * p_half, e, p1 - 3.0 * q2 + 4.0 * q3, q2 - 2.0 * q3, 4.0 * q3 - q2


@dataclass(frozen=True, eq=False)
class IMEXRK(Stepper):
    r"""The implicit-explicit Runge-Kutta pair of an :class:`~meanfield.core.tableaux.IMEXTableau`: ``N``
    explicit, the diagonal ``L`` diagonally implicit (one elementwise division per stage).

    .. math:: Y_i = \frac{y_n + \Delta t \sum_{j<i} (\hat a_{ij} N_j + a_{ij} L Y_j)}{1 - \Delta t\, a_{ii} L},\qquad
              y_{n+1} = y_n + \Delta t \sum_j (\hat b_j N_j + b_j L Y_j)

    (``y_{n+1} = Y_s`` for a stiffly accurate pair such as ARS(4,4,3), whose last ``N`` is then
    first-same-as-last).  The explicit tableau when ``L = 0``.  Orders 2 (``ars232``) and 3
    (``ars443``) hold while ``dt L`` is moderate; for stiff ``L`` the implicit parts are L-stable (the
    amplification of a mode tends to 0 as ``dt L -> -inf``), so the step is bounded by transport only:
    :attr:`imag_reach` is the pair's joint reach (:attr:`IMEXTableau.imag_reach`, for transport
    at any diffusion rate; ARS(2,3,2): ``1.06``, below its explicit part's ``sqrt 3``).  ARS(4,4,3) is
    stiffly accurate: a stiff mode is damped whatever its transport (``R(z_L, z_N) -> 0`` as
    ``z_L -> -inf``); ARS(2,3,2)'s is not (``R -> -delta z_N``), so its step stays bound by transport at
    the highest degree.

    No error control: Ascher, Ruuth and Spiteri publish no embedded pair for these schemes, and an
    estimate made up here (e.g. the difference to a lower-order combination of the same stages)
    would have no proven order or stiff behaviour; ``"lawson_dopri5"`` is the adaptive split scheme.

    Parameters
    ----------
    tableau : IMEXTableau
        The pair of tableaux (explicit for ``N``, diagonally implicit for ``L``).
    split : bool
        True (a split scheme).
    """

    tableau: IMEXTableau
    split: bool = True

    @property
    def name(self) -> str:
        return self.tableau.name

    @property
    def order(self) -> int:
        return self.tableau.order

    @property
    def fsal(self) -> bool:
        return self.tableau.fsal

    @property
    def explicit_tableau(self) -> Tableau:
        return self.tableau.explicit

    @property
    def imag_reach(self) -> float:
        return self.tableau.imag_reach

    def _inverses(self, dt, L):
        """``{a_ii: 1 / (1 - dt a_ii L)}`` for the nonzero diagonal entries (cached for one ``dt`` and ``L``)."""
        return _last_step_cache(self, dt, L, self._compute_inverses)

    def _compute_inverses(self, dt, L):
        out = {}
        for a in {float(x) for x in np.diag(self.tableau.A) if x != 0}:
            inv = 1.0 / (1.0 - (dt * a) * L)
            inv.setflags(write=False)
            out[a] = inv
        return out

    def step(self, rhs, t, y, dt, k0=None, linear=None):
        tab = self.tableau
        Ae, be, c = tab.explicit.A, tab.explicit.b, [float(x) for x in tab.c]
        Ai, bi = tab.A, tab.b
        L = np.asarray(_linear_or_zero(linear, y))
        inv = self._inverses(dt, L)
        s = len(be)
        N, LY = [None] * s, [None] * s
        N[0] = rhs(t, y) if k0 is None else k0
        LY[0] = L * y
        Y = y
        for i in range(1, s):
            r = y
            for j in range(i):
                if Ae[i, j] != 0:
                    r = r + (dt * Ae[i, j]) * N[j]
                if Ai[i, j] != 0:
                    r = r + (dt * Ai[i, j]) * LY[j]
            Y = r * inv[float(Ai[i, i])] if Ai[i, i] != 0 else r
            LY[i] = L * Y
            if i < s - 1 or be[i] != 0 or tab.fsal:
                N[i] = rhs(t + c[i] * dt, Y)
        if tab.stiffly_accurate:
            y_new = Y
        else:
            y_new = y
            for j in range(s):
                if be[j] != 0:
                    y_new = y_new + (dt * be[j]) * N[j]
                if bi[j] != 0:
                    y_new = y_new + (dt * bi[j]) * LY[j]
        return y_new, None, (N[-1] if tab.fsal else None)


# ----------------------------------------------------------------------------- Lawson (integrating factor) schemes
@dataclass(frozen=True, eq=False)
class LawsonRK(_TableauStepper):
    r"""Lawson's integrating-factor form of an explicit Runge-Kutta tableau, for ``y' = L y + N(t, y)``.

    The tableau is applied to ``v = e^{-(t - t_n) L} y``, so the diagonal ``L`` is integrated exactly:
    with :math:`E(\tau) = e^{\tau \Delta t L}`,

    .. math:: Y_i = E(c_i)\, y_n + \Delta t \sum_{j<i} a_{ij} E(c_i - c_j)\, N_j,\qquad
              y_{n+1} = E(1)\, y_n + \Delta t \sum_j b_j E(1 - c_j)\, N_j,

    ``N_j = N(t_n + c_j dt, Y_j)``; the embedded weights give the error estimate
    :math:`\Delta t \sum_j (b_j - \hat b_j) E(1 - c_j) N_j`, so an embedded pair (``dopri5``) gets
    adaptive error control, FSAL included.  The tableau's order holds when ``L`` is not stiff; for
    diffusion ``L = -nu l (l + 1)`` every factor is at most 1, so the stable step is the tableau's
    transport bound, independent of ``nu lmax^2``.  The tableau itself when ``L = 0``.

    Parameters
    ----------
    tableau : Tableau
        The explicit Runge-Kutta tableau.
    split : bool
        True (a split scheme).
    """

    tableau: Tableau
    split: bool = True

    @property
    def name(self) -> str:
        return "lawson_" + self.tableau.name

    @property
    def exponential(self) -> bool:
        return True

    def _factors(self, dt, L):
        """``{tau: exp(tau dt L)}`` for every difference ``c_i - c_j`` the step uses (cached for one ``dt``)."""
        return _last_step_cache(self, dt, L, self._compute_factors)

    def _compute_factors(self, dt, L):
        c = [float(x) for x in self.tableau.c]
        taus = {ci - cj for i, ci in enumerate(c) for cj in c[:i]} | set(c) | {1.0 - cj for cj in c}
        return {tau: np.exp(tau * dt * L) for tau in taus}

    def step(self, rhs, t, y, dt, k0=None, linear=None):
        tab = self.tableau
        if linear is None:
            return rk_step(rhs, t, y, dt, tab, k0)
        E = self._factors(dt, np.asarray(linear))
        c = [float(x) for x in tab.c]
        K = [None] * len(tab.b)

        def combine(tau, w, n, with_y):        # term by term, each stage carried by E(tau - c_j)
            out = E[tau] * y if with_y else np.zeros_like(y)
            for j in range(n):
                if w[j] != 0:
                    out = out + (dt * w[j]) * (E[tau - c[j]] * K[j])
            return out

        return rk_stages(rhs, t, y, dt, tab, k0, K, combine)
