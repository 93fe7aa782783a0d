r"""One-step methods: explicit Runge-Kutta tableaux in a registry, and split (exponential, IMEX) steppers.

A *stepper* advances ``y' = rhs(t, y)`` (explicit) or ``y' = L y + rhs(t, y)`` (split, with a
diagonal linear part ``L``, an array multiplied elementwise, e.g. ``-nu l (l + 1)`` for diffusion in
spherical harmonics) by one step of size ``dt``; :func:`meanfield.core.integrate.integrate` drives it.
Every stepper declares its order, whether it carries an embedded error estimate, whether it is
first-same-as-last, and the reach of its stability region

.. math:: R(z) = 1 + z\, b^T (I - z A)^{-1} \mathbf 1
          = 1 + \sum_{k \ge 1} (b^T A^{k-1} \mathbf 1)\, z^k

along the imaginary axis (advection: eigenvalues ``i omega``) and the negative real axis
(diffusion), which a CFL bound divides by (:meth:`meanfield.models.continuum.ContinuumPDE.cfl_dt`).
A split stepper reports the region of the explicit scheme it reduces to when ``L = 0``.
Numpy only; nothing else of ``meanfield``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["Tableau", "SCHEMES", "rk_step", "Stepper", "ExplicitRK", "IMEXEuler", "ETDRK2", "ETDRK4", "SPLIT_SCHEMES",
           "phi_functions", "as_stepper"]


# ----------------------------------------------------------------------------- stability regions
def _first_unstable(q, scale):
    """Largest ``r >= 0`` with ``q(u) <= 0`` on ``[0, r]``.

    ``q`` holds ascending polynomial coefficients in ``u >= 0``; ``scale[k]`` bounds the terms summed
    into ``q[k]``, so a ``|q[k]|`` within round-off of it is an exact zero that float arithmetic missed
    (e.g. the cancelling low orders of ``|R(iy)|^2 - 1`` of a high-order scheme).
    """
    q = np.where(np.abs(q) <= 64 * np.finfo(float).eps * scale, 0.0, q)
    nz = np.flatnonzero(q)
    if nz.size == 0:
        return np.inf
    q = q[nz[0]:nz[-1] + 1]               # q(u) = u^m * q~(u) with q~(0) != 0
    if q[0] > 0:
        return 0.0                         # unstable arbitrarily close to 0
    roots = np.roots(q[::-1])
    real = np.sort(roots.real[(np.abs(roots.imag) <= 1e-9 * np.abs(roots)) & (roots.real > 0)])
    P = np.polynomial.Polynomial(q)
    for r in real:                         # the first root where q~ turns positive (not a touch)
        if P(r * (1 + 1e-7)) > 0:
            for _ in range(3):             # polish the eigenvalue root to the last few ulps
                dP = P.deriv()(r)
                r = r - P(r) / dP if dP != 0 else r
            return float(r)
    return np.inf


def _imag_reach(g):
    """Reach along the imaginary axis of ``R(z) = sum g_k z^k``: ``|R(iy)|^2 - 1`` in ``u = y^2``."""
    n = 2 * (len(g) - 1)
    coef, scale = np.zeros(n // 2 + 1), np.zeros(n // 2 + 1)
    for j, gj in enumerate(g):
        for k, gk in enumerate(g):
            if (j + k) % 2 == 0:           # odd powers of y cancel exactly (conjugate pairs)
                sign = -1.0 if ((j - k) // 2) % 2 else 1.0       # Re(i^j (-i)^k) = (-1)^((j-k)/2)
                coef[(j + k) // 2] += sign * gj * gk
                scale[(j + k) // 2] += abs(gj * gk)
    coef[0] -= 1.0
    return float(np.sqrt(_first_unstable(coef, scale)))


def _real_reach(g):
    """Reach along the negative real axis: ``|R(-u)| <= 1``, i.e. ``R(-u) - 1 <= 0`` and ``-R(-u) - 1 <= 0``."""
    gm = np.asarray(g, dtype=float) * (-1.0) ** np.arange(len(g))       # R(-u) in powers of u
    above, below = gm.copy(), -gm
    above[0] -= 1.0
    below[0] -= 1.0
    scale = np.abs(gm) + np.eye(1, len(g))[0]
    return min(_first_unstable(above, scale), _first_unstable(below, scale))


# ----------------------------------------------------------------------------- tableaux
@dataclass(frozen=True, eq=False)
class Tableau:
    """Butcher tableau of an explicit Runge-Kutta scheme with ``s`` stages.

    Attributes
    ----------
    name : str
    A : ndarray, shape (s, s)
        Stage coefficients, strictly lower triangular.
    b : ndarray, shape (s,)
        Weights of the solution of order ``order``.
    c : ndarray, shape (s,)
        Stage times, ``c = A.sum(1)``.
    order : int
    b_err : ndarray, shape (s,), optional
        Weights of the embedded solution of order ``err_order``; the local error estimate is
        :math:`\\Delta t \\sum_i (b_i - b^{err}_i) k_i`.
    err_order : int, optional
    """

    name: str
    A: np.ndarray
    b: np.ndarray
    c: np.ndarray
    order: int
    b_err: np.ndarray | None = None
    err_order: int | None = None

    @property
    def adaptive(self) -> bool:
        """True when an embedded error estimate is available."""
        return self.b_err is not None

    @cached_property
    def fsal(self) -> bool:
        """First-same-as-last: the last stage is ``rhs(t + dt, y_new)``."""
        return bool(self.c[-1] == 1.0 and np.array_equal(self.A[-1], self.b) and self.b[-1] == 0.0)

    @cached_property
    def stability_polynomial(self) -> np.ndarray:
        """Ascending coefficients ``g`` of ``R(z) = sum_k g_k z^k``: ``g_0 = 1``, ``g_k = b^T A^(k-1) 1``.

        ``R`` is the factor one step multiplies ``y`` by on ``y' = lambda y`` (``z = lambda dt``);
        trailing exact zeros are dropped (e.g. ``bs32``'s last weight is 0: degree 3).
        """
        g, v = [1.0], np.ones(len(self.b))
        for _ in range(len(self.b)):
            g.append(float(self.b @ v))
            v = self.A @ v
        while len(g) > 1 and g[-1] == 0.0:
            g.pop()
        return np.array(g)

    def stability_function(self, z):
        """``R(z)``, complex array of the shape of ``z``."""
        return np.polynomial.polynomial.polyval(np.asarray(z, dtype=complex), self.stability_polynomial)

    @cached_property
    def imag_reach(self) -> float:
        """Largest ``r`` with ``|R(iy)| <= 1`` for ``|y| <= r`` (0: advection is never stable).

        RK4: ``2 sqrt(2)``; every 2-stage scheme of order 2, and Euler: 0.
        """
        return _imag_reach(self.stability_polynomial)

    @cached_property
    def real_reach(self) -> float:
        """Largest ``r`` with ``|R(x)| <= 1`` for ``-r <= x <= 0``: the real stability interval ``[-r, 0]``.

        Euler and 2-stage order 2: 2; RK4: 2.785...
        """
        return _real_reach(self.stability_polynomial)


def _tableau(name, A, b, c, order, b_err=None, err_order=None):
    arrays = [np.array(x, dtype=float) for x in (A, b, c)]
    for x in arrays:
        x.setflags(write=False)
    if b_err is not None:
        b_err = np.array(b_err, dtype=float)
        b_err.setflags(write=False)
    return Tableau(name, *arrays, order, b_err, err_order)


def _dopri5():
    A = [[0, 0, 0, 0, 0, 0, 0],
         [1 / 5, 0, 0, 0, 0, 0, 0],
         [3 / 40, 9 / 40, 0, 0, 0, 0, 0],
         [44 / 45, -56 / 15, 32 / 9, 0, 0, 0, 0],
         [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0, 0],
         [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0, 0],
         [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0]]
    b_err = [5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40]
    return _tableau("dopri5", A, A[-1], [0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1], 5, b_err, 4)


SCHEMES: dict[str, Tableau] = {
    "euler": _tableau("euler", [[0]], [1], [0], 1),
    "heun": _tableau("heun", [[0, 0], [1, 0]], [1 / 2, 1 / 2], [0, 1], 2),
    "midpoint": _tableau("midpoint", [[0, 0], [1 / 2, 0]], [0, 1], [0, 1 / 2], 2),
    "rk3": _tableau("rk3", [[0, 0, 0], [1 / 2, 0, 0], [-1, 2, 0]], [1 / 6, 2 / 3, 1 / 6], [0, 1 / 2, 1], 3),
    "rk4": _tableau("rk4", [[0, 0, 0, 0], [1 / 2, 0, 0, 0], [0, 1 / 2, 0, 0], [0, 0, 1, 0]],
                    [1 / 6, 1 / 3, 1 / 3, 1 / 6], [0, 1 / 2, 1 / 2, 1], 4),
    "bs32": _tableau("bs32", [[0, 0, 0, 0], [1 / 2, 0, 0, 0], [0, 3 / 4, 0, 0], [2 / 9, 1 / 3, 4 / 9, 0]],
                     [2 / 9, 1 / 3, 4 / 9, 0], [0, 1 / 2, 3 / 4, 1], 3, [7 / 24, 1 / 4, 1 / 3, 1 / 8], 2),
    "dopri5": _dopri5(),
}
"""Explicit Runge-Kutta schemes by name (the ``method`` of :func:`meanfield.integrate.integrate`)."""


def rk_step(rhs, t, y, dt, tableau, k0=None):
    """One explicit Runge-Kutta step.

    Parameters
    ----------
    rhs : callable ``rhs(t, y) -> ndarray`` of the shape of ``y``
    t : float
    y : ndarray, any shape
    dt : float
    tableau : Tableau
    k0 : ndarray, shape y.shape, optional
        ``rhs(t, y)`` if already known (saves one evaluation).

    Returns
    -------
    y_new : ndarray, shape y.shape
    y_err : ndarray, shape y.shape, or None
        Local error estimate (None when the tableau has no embedded pair).
    k_last : ndarray, shape y.shape, or None
        ``rhs(t + dt, y_new)`` when the tableau is FSAL, else None; pass it as the next ``k0``.
    """
    A, b, c, s = tableau.A, tableau.b, tableau.c, len(tableau.b)
    K = np.empty((s,) + y.shape, dtype=np.result_type(y.dtype, float))
    Kf = K.reshape(s, -1)  # flat view: combinations of stages are one small matmul

    def combine(w, n):
        return (w[:n] @ Kf[:n]).reshape(y.shape)

    K[0] = rhs(t, y) if k0 is None else k0
    yi = y
    for i in range(1, s):
        yi = y + dt * combine(A[i], i)
        K[i] = rhs(t + c[i] * dt, yi)
    fsal = tableau.fsal
    y_new = yi if fsal else y + dt * combine(b, s)
    y_err = None if tableau.b_err is None else dt * combine(b - tableau.b_err, s)
    return y_new, y_err, (K[-1] if fsal else None)


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
    def adaptive(self) -> bool:
        """True when :meth:`step` returns an embedded error estimate."""
        return False

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


@dataclass(frozen=True, eq=False)
class ExplicitRK(Stepper):
    """The explicit Runge-Kutta scheme of a :class:`Tableau` (name, order, error pair, FSAL from it)."""

    tableau: Tableau

    @property
    def name(self) -> str:
        return self.tableau.name

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

    def step(self, rhs, t, y, dt, k0=None, linear=None):
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
        ``1 / 25!``), is used instead.
    """
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


def _check_linear(linear, y):
    return np.zeros((), dtype=y.dtype) if linear is None else linear


@dataclass(frozen=True, eq=False)
class IMEXEuler(Stepper):
    r"""IMEX Euler: explicit in ``rhs``, implicit in the diagonal ``L`` (order 1).

    .. math:: y_{n+1} = \frac{y_n + \Delta t\, N(t_n, y_n)}{1 - \Delta t\, L}

    Unconditionally stable for ``L <= 0``; Euler when ``L = 0``.
    """

    name: str = "imex_euler"
    order: int = 1
    split: bool = True

    @property
    def explicit_tableau(self) -> Tableau:
        return SCHEMES["euler"]

    def step(self, rhs, t, y, dt, k0=None, linear=None):
        L = _check_linear(linear, y)
        N0 = rhs(t, y) if k0 is None else k0
        return (y + dt * N0) / (1.0 - dt * L), None, None


class _Exponential(Stepper):
    """Split steppers whose coefficients are phi functions of ``dt L``: the last set is kept, since
    fixed steps reuse it (a step shortened to land on ``t_eval`` computes its own)."""

    def _coefficients(self, dt, L):
        cache = self.__dict__.setdefault("_cache", [None])   # per instance; frozen fields untouched
        hit = cache[0]
        if hit is not None and hit[0] == dt and hit[1].shape == L.shape and hit[1].dtype == L.dtype \
                and np.array_equal(hit[1], L):
            return hit[2]
        coef = self._compute(dt, L)
        for c in coef:
            c.setflags(write=False)
        cache[0] = (dt, np.array(L, copy=True), coef)       # one assignment: readers see old or new
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
    """

    name: str = "etdrk2"
    order: int = 2
    split: bool = True

    @property
    def explicit_tableau(self) -> Tableau:
        return SCHEMES["heun"]

    def step(self, rhs, t, y, dt, k0=None, linear=None):
        e, p1, p2 = self._coefficients(dt, _check_linear(linear, y))
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
    """

    name: str = "etdrk4"
    order: int = 4
    split: bool = True

    @property
    def explicit_tableau(self) -> Tableau:
        return SCHEMES["rk4"]

    def step(self, rhs, t, y, dt, k0=None, linear=None):
        e2, P, e, f1, f2, f3 = self._coefficients(dt, _check_linear(linear, y))
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


SPLIT_SCHEMES: dict[str, Stepper] = {"imex_euler": IMEXEuler(), "etdrk2": ETDRK2(), "etdrk4": ETDRK4()}
"""Split steppers for ``y' = L y + rhs(t, y)`` with a diagonal ``L`` (``integrate(..., linear=L)``)."""


def as_stepper(method) -> Stepper:
    """The :class:`Stepper` of a name (in :data:`SCHEMES` or :data:`SPLIT_SCHEMES`), a Tableau or a Stepper."""
    if isinstance(method, Stepper):
        return method
    if isinstance(method, Tableau):
        return ExplicitRK(method)
    if isinstance(method, str) and method in SCHEMES:
        return ExplicitRK(SCHEMES[method])
    if isinstance(method, str) and method in SPLIT_SCHEMES:
        return SPLIT_SCHEMES[method]
    raise ValueError(f"method must be one of {sorted(SCHEMES) + sorted(SPLIT_SCHEMES)}, a Tableau or a Stepper; "
                     f"received {method!r}")
