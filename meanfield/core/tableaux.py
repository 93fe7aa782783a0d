r"""Explicit Runge-Kutta schemes as Butcher tableaux in a registry, with their stability regions.

:data:`SCHEMES` holds the tableaux by name; :func:`rk_step` takes one step with one.  A
:class:`Tableau` knows its order, embedded pair, FSAL property and stability function

.. math:: R(z) = 1 + z\, b^T (I - z A)^{-1} \mathbf 1
          = 1 + \sum_{k \ge 1} (b^T A^{k-1} \mathbf 1)\, z^k,

the factor one step multiplies ``y`` by on ``y' = lambda y`` (``z = lambda dt``), and from it the
reach of its stability region along the imaginary axis (advection: eigenvalues ``i omega``) and
the negative real axis (diffusion), which a CFL bound divides by
(:meth:`meanfield.models.continuum.ContinuumPDE.cfl_dt`).

:data:`IMEX_TABLEAUX` holds implicit-explicit pairs (:class:`IMEXTableau`: an explicit tableau for
the transport and a diagonally implicit one for a stiff linear part), with the joint stability
function of both.  Numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["Tableau", "SCHEMES", "rk_step", "rk_stages", "IMEXTableau", "IMEX_TABLEAUX"]


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
        """``R(z)``, complex array of the shape of ``z``.

        Parameters
        ----------
        z : array_like
            ``lambda dt`` (complex).

        Returns
        -------
        ndarray of complex, shape of ``z``
        """
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
"""Explicit Runge-Kutta schemes by name (the ``method`` of :func:`meanfield.core.integrate.integrate`)."""


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
    s = len(tableau.b)
    K = np.empty((s,) + y.shape, dtype=np.result_type(y.dtype, float))
    Kf = K.reshape(s, -1)  # flat view: combinations of stages are one small matmul

    def combine(tau, w, n, with_y):
        dy = dt * (w[:n] @ Kf[:n]).reshape(y.shape)
        return y + dy if with_y else dy

    return rk_stages(rhs, t, y, dt, tableau, k0, K, combine)


def rk_stages(rhs, t, y, dt, tableau, k0, K, combine):
    """The stage loop of an explicit Runge-Kutta step, shared by :func:`rk_step` and the Lawson steppers.

    Parameters
    ----------
    rhs, t, y, dt, tableau, k0
        As in :func:`rk_step`.
    K : sequence of ``len(tableau.b)`` slots (list or array), written in place
        The stages ``K[j] = rhs(t + c_j dt, Y_j)``.
    combine : callable ``combine(tau, w, n, with_y) -> ndarray``
        The combination of the first ``n`` stages with weights ``w`` ending at ``t + tau dt``:
        ``Y_i`` (``tau = c_i``, ``w = A[i]``, ``n = i``), ``y_new`` (``tau = 1``, ``w = b``) with
        ``with_y`` True; the error estimate (``w = b - b_err``, no ``y`` term) with ``with_y`` False.
        It fixes the floating-point order of the sums.

    Returns
    -------
    y_new, y_err, k_last
        As in :func:`rk_step`.
    """
    A, b, s = tableau.A, tableau.b, len(tableau.b)
    c = [float(x) for x in tableau.c]
    K[0] = rhs(t, y) if k0 is None else k0
    yi = y
    for i in range(1, s):
        yi = combine(c[i], A[i], i, True)
        K[i] = rhs(t + c[i] * dt, yi)
    fsal = tableau.fsal
    y_new = yi if fsal else combine(1.0, b, s, True)
    y_err = None if tableau.b_err is None else combine(1.0, b - tableau.b_err, s, False)
    return y_new, y_err, (K[-1] if fsal else None)


# ----------------------------------------------------------------------------- implicit-explicit pairs
@dataclass(frozen=True, eq=False)
class IMEXTableau:
    r"""An implicit-explicit Runge-Kutta pair for ``y' = L y + N(t, y)``: ``N`` explicit, ``L`` diagonally implicit.

    Both tableaux have ``s`` stages and the same stage times ``c`` (the first stage is ``y_n`` itself,
    ``A[0] = 0``); with :math:`\hat A, \hat b` the explicit part (:attr:`explicit`) and
    :math:`A, b` the implicit one,

    .. math:: Y_i = y_n + \Delta t \sum_{j<i} \hat a_{ij} N_j + \Delta t \sum_{j\le i} a_{ij} L Y_j,\qquad
              y_{n+1} = y_n + \Delta t \sum_j \hat b_j N_j + \Delta t \sum_j b_j L Y_j,

    ``N_j = N(t_n + c_j dt, Y_j)``.  Each stage solves one diagonal system ``(1 - dt a_ii L) Y_i = ...``.

    Attributes
    ----------
    name : str
    explicit : Tableau
        :math:`\hat A, \hat b, c` (its stability region is the pair's when ``L = 0``).
    A : ndarray, shape (s, s)
        Implicit stage coefficients, lower triangular, ``A[0] = 0`` and ``A.sum(1) = c``.
    b : ndarray, shape (s,)
    order : int
        Order of the pair (explicit, implicit and coupling conditions).
    reference : str
    """

    name: str
    explicit: Tableau
    A: np.ndarray
    b: np.ndarray
    order: int
    reference: str = ""

    @property
    def c(self) -> np.ndarray:
        return self.explicit.c

    @cached_property
    def stiffly_accurate(self) -> bool:
        """Both parts end on their last stage (``b`` the last row of ``A``, ``b_hat`` of ``A_hat``): ``y_{n+1} = Y_s``."""
        return bool(np.array_equal(self.A[-1], self.b) and np.array_equal(self.explicit.A[-1], self.explicit.b))

    @cached_property
    def fsal(self) -> bool:
        """``y_{n+1} = Y_s`` at ``c_s = 1`` with no weight on ``N_s``: ``N_s = N(t + dt, y_{n+1})`` serves the next step."""
        return self.stiffly_accurate and self.explicit.fsal

    def stability_function(self, z_implicit, z_explicit):
        r"""``R(z_L, z_N)``: the factor one step multiplies ``y`` by on ``y' = lambda_L y + lambda_N y``
        (``z_L = lambda_L dt`` taken implicitly, ``z_N = lambda_N dt`` explicitly), broadcasting:

        .. math:: R = 1 + (z_N \hat b + z_L b)^T (I - z_N \hat A - z_L A)^{-1} \mathbf 1.

        Parameters
        ----------
        z_implicit, z_explicit : array_like
            ``z_L`` and ``z_N`` (complex; broadcast together).

        Returns
        -------
        ndarray of complex, the broadcast shape
        """
        zl, zn = np.broadcast_arrays(np.asarray(z_implicit, dtype=complex), np.asarray(z_explicit, dtype=complex))
        s = len(self.b)
        Mat = np.eye(s) - zn[..., None, None] * self.explicit.A - zl[..., None, None] * self.A
        Y = np.linalg.solve(Mat, np.ones(zl.shape + (s, 1)))[..., 0]
        w = zn[..., None] * self.explicit.b + zl[..., None] * self.b
        return 1.0 + np.sum(w * Y, axis=-1)

    @cached_property
    def imag_reach(self) -> float:
        """Largest ``r`` with ``|R(-x, iy)| <= 1`` for every ``x >= 0`` and ``|y| <= r``: transport at
        any diffusion rate, however stiff (at most the explicit part's reach, ``x = 0``).

        Measured by bisection in ``y`` over ``x`` in ``{0} U [1e-6, 1e15]`` (2000 log-spaced points; the
        far end is the stiff limit).  ARS(2,3,2): ``3 / (2 sqrt 2) = 1.0607`` (the stiff limit, where the
        step tends to ``-delta z_N``), below its explicit part's ``sqrt 3``; ARS(4,4,3): its explicit part's.
        """
        xs = np.concatenate([[0.0], np.logspace(-6, 15, 2000)])

        def stable(y):
            return bool(np.all(np.abs(self.stability_function(-xs, 1j * y)) <= 1.0 + 1e-12))

        hi = self.explicit.imag_reach
        if stable(hi):
            return hi
        lo = 0.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if stable(mid) else (lo, mid)
        return lo


def _ars232():
    g = 1.0 - np.sqrt(0.5)                 # gamma = (2 - sqrt 2) / 2, the L-stable SDIRK diagonal
    delta = -2.0 * np.sqrt(2.0) / 3.0      # ARS's choice: the explicit part is third order on y' = lambda y
    A_hat = [[0, 0, 0], [g, 0, 0], [delta, 1 - delta, 0]]
    b = [0, 1 - g, g]
    explicit = _tableau("ars232_explicit", A_hat, b, [0, g, 1], 2)
    A = np.array([[0, 0, 0], [0, g, 0], [0, 1 - g, g]])
    return _imex("ars232", explicit, A, b, 2, "Ascher, Ruuth & Spiteri (1997), Appl. Numer. Math. 25, 151: "
                                              "the (2,3,2) scheme")


def _ars443():
    A_hat = [[0, 0, 0, 0, 0], [1 / 2, 0, 0, 0, 0], [11 / 18, 1 / 18, 0, 0, 0], [5 / 6, -5 / 6, 1 / 2, 0, 0],
             [1 / 4, 7 / 4, 3 / 4, -7 / 4, 0]]
    explicit = _tableau("ars443_explicit", A_hat, A_hat[-1], [0, 1 / 2, 2 / 3, 1 / 2, 1], 3)
    A = [[0, 0, 0, 0, 0], [0, 1 / 2, 0, 0, 0], [0, 1 / 6, 1 / 2, 0, 0], [0, -1 / 2, 1 / 2, 1 / 2, 0],
         [0, 3 / 2, -3 / 2, 1 / 2, 1 / 2]]
    return _imex("ars443", explicit, A, A[-1], 3, "Ascher, Ruuth & Spiteri (1997), Appl. Numer. Math. 25, 151: "
                                                  "the (4,4,3) scheme")


def _imex(name, explicit, A, b, order, reference):
    A, b = np.array(A, dtype=float), np.array(b, dtype=float)
    A.setflags(write=False)
    b.setflags(write=False)
    return IMEXTableau(name, explicit, A, b, order, reference)


IMEX_TABLEAUX: dict[str, IMEXTableau] = {"ars232": _ars232(), "ars443": _ars443()}
"""Implicit-explicit Runge-Kutta pairs by name (Ascher, Ruuth & Spiteri 1997: ARS(2,3,2), order 2, and
ARS(4,4,3), order 3; both L-stable in the implicit part).  Neither publishes an embedded pair."""
