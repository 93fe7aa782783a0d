r"""Dense output and root-located events of :func:`meanfield.core.integrate.integrate`.

:class:`DenseOutput` is the piecewise cubic Hermite interpolant through the accepted step points
``(t_k, y_k, y'_k)`` (the derivatives are the right-hand side there, which the Runge-Kutta schemes
evaluate as their first stage anyway).  On a step of size ``h`` it interpolates a smooth solution
to ``O(h^4)`` (the Hermite remainder ``h^4 max|y''''| / 384``), so with a scheme of order ``p >= 3``
the dense values are accurate to ``O(h^min(p, 4))``; the tests measure the order 4.

:class:`Event` is a continuous scalar ``fn(t, y)``; a sign change between two accepted step points
(in the chosen ``direction``) is located on the dense interpolant by :func:`locate_root` (the
Illinois variant of regula falsi, bracketing, with bisection steps that guarantee the bracket
shrinks) to ``xtol``.  A ``terminal`` event stops the run at its root.

Numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DenseOutput", "Event", "locate_root", "hermite", "hermite_derivative", "EventTracker"]


def hermite(t, t0, y0, d0, t1, y1, d1):
    """The cubic Hermite interpolant on ``[t0, t1]`` through values ``y0, y1`` and derivatives ``d0, d1``.

    Parameters
    ----------
    t : float or ndarray
        Time(s), usually inside ``[t0, t1]``.
    t0, t1 : float
        The interval, ``t0 != t1``.
    y0, d0, y1, d1 : ndarray
        Values and derivatives at its ends (one shape, broadcast with ``t``).

    Returns
    -------
    ndarray
        The interpolated value(s).
    """
    h = t1 - t0
    s = (t - t0) / h
    s1 = 1.0 - s
    return (1.0 + 2.0 * s) * s1 * s1 * y0 + s * s1 * s1 * h * d0 + s * s * (3.0 - 2.0 * s) * y1 \
        + s * s * (s - 1.0) * h * d1


def hermite_derivative(t, t0, y0, d0, t1, y1, d1):
    """The time derivative of :func:`hermite`.

    Parameters
    ----------
    t, t0, y0, d0, t1, y1, d1
        As for :func:`hermite`.

    Returns
    -------
    ndarray
    """
    h = t1 - t0
    s = (t - t0) / h
    return (6.0 * s * s - 6.0 * s) * (y0 - y1) / h + (3.0 * s * s - 4.0 * s + 1.0) * d0 + (3.0 * s * s - 2.0 * s) * d1


@dataclass(frozen=True, eq=False)
class DenseOutput:
    """The states of a run at any time in ``[t[0], t[-1]]`` (``Trajectory.dense``).

    Attributes
    ----------
    t : ndarray, shape (m,)
        The accepted step points (strictly increasing; the last one is the stopping time).
    y, dy : ndarray, shape (m,) + state shape
        The states and the derivatives ``y'`` there.
    """

    t: np.ndarray
    y: np.ndarray
    dy: np.ndarray

    def __call__(self, t) -> np.ndarray:
        """The interpolated state at the time ``t`` (a float inside ``[t[0], t[-1]]``)."""
        t = float(t)
        if not self.t[0] <= t <= self.t[-1]:
            raise ValueError(f"t must be inside the dense output's span [{self.t[0]}, {self.t[-1]}]; received {t}")
        if self.t.size == 1:
            return self.y[0].copy()
        k = min(int(np.searchsorted(self.t, t, side="right")) - 1, self.t.size - 2)
        return hermite(t, self.t[k], self.y[k], self.dy[k], self.t[k + 1], self.y[k + 1], self.dy[k + 1])


@dataclass(frozen=True, eq=False)
class Event:
    """A root-located event: the sign changes of the continuous scalar ``fn(t, y)``.

    Attributes
    ----------
    fn : callable ``fn(t, y) -> float``
    terminal : bool
        Stop the run at the first root (status 1, ``y_final`` the interpolated state there).
    direction : float
        0: every sign change; > 0: only from negative to positive; < 0: only from positive to negative.
    xtol : float
        Width of the final bracket of the root in ``t``.

    Raises
    ------
    ValueError
        ``fn`` not callable, ``terminal`` not a boolean, ``direction`` or ``xtol`` not finite numbers, or
        ``xtol`` not positive.
    """

    fn: object
    terminal: bool = False
    direction: float = 0.0
    xtol: float = 1e-12

    def __post_init__(self):
        if not callable(self.fn):
            raise ValueError(f"fn must be a callable fn(t, y) -> float; received {self.fn!r}")
        if not isinstance(self.terminal, (bool, np.bool_)):
            raise ValueError(f"terminal must be True or False; received {self.terminal!r}")
        for name in ("direction", "xtol"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not np.isfinite(v):
                raise ValueError(f"{name} must be a finite number; received {v!r}")
        if not self.xtol > 0:
            raise ValueError(f"xtol must be a positive finite number; received {self.xtol!r}")

    def value(self, t, y) -> float:
        """``fn(t, y)`` as a float, checked finite.

        Parameters
        ----------
        t : float
            Time.
        y : ndarray
            State.

        Returns
        -------
        float

        Raises
        ------
        ValueError
            ``fn`` returning NaN or inf.
        """
        g = float(self.fn(t, y))
        if not np.isfinite(g):
            raise ValueError(f"event fn must return finite numbers; received {g!r} at t = {t}")
        return g

    def crosses(self, g0, g1) -> bool:
        """A sign change from ``g0`` (at the previous point) to ``g1`` in the event's direction.

        Parameters
        ----------
        g0, g1 : float
            Values of ``fn`` at the previous and the new point.

        Returns
        -------
        bool
            False when ``g0 == 0`` (a root already recorded).
        """
        if g0 == 0.0 or not ((g0 < 0.0 <= g1) or (g0 > 0.0 >= g1)):
            return False
        return self.direction == 0 or (self.direction > 0) == (g1 > g0)


def locate_root(g, a, b, ga, gb, xtol=1e-12, max_iter=200) -> float:
    """A root of the continuous ``g`` in ``[a, b]`` with ``ga = g(a)``, ``gb = g(b)`` of opposite signs
    (or ``gb == 0``): Illinois regula falsi, every third step a bisection; the bracket is at most
    ``xtol`` wide (plus round-off) at the end and its end where ``g`` has taken the new sign is returned.

    Parameters
    ----------
    g : callable
        ``g(t) -> float``, continuous on ``[a, b]``.
    a, b : float
        The bracket, ``a < b``.
    ga, gb : float
        ``g(a)`` and ``g(b)``, of opposite signs (or ``gb == 0``).
    xtol : float
        Final bracket width.
    max_iter : int
        Most evaluations of ``g``.

    Returns
    -------
    float
        The root's bracket end on the new sign's side (``b`` itself when ``gb == 0``).
    """
    if gb == 0.0:
        return float(b)
    side = 0
    for it in range(max_iter):
        if b - a <= xtol + 4 * np.spacing(max(abs(a), abs(b))):
            break
        c = 0.5 * (a + b) if it % 3 == 2 else (a * gb - b * ga) / (gb - ga)
        if not a < c < b:
            c = 0.5 * (a + b)
        gc = g(c)
        if gc == 0.0:
            return float(c)
        if (gc > 0) == (gb > 0):
            b, gb = c, gc
            if side == -1:
                ga *= 0.5
            side = -1
        else:
            a, ga = c, gc
            if side == 1:
                gb *= 0.5
            side = 1
    return float(b)


class EventTracker:
    """The driver's part that keeps the dense points and locates the events' roots step by step.

    :meth:`step` works out what an accepted step adds (nothing changes until :meth:`commit`, so an
    interrupt leaves the tracker as it was); it returns ``(t_root, y_root, index)`` of the first
    terminal root inside the step, else None.

    Parameters
    ----------
    events : sequence of Event
        The run's events.
    keep_dense : bool
        Keep every step point for :meth:`dense`.
    derivative : callable
        ``derivative(y, k) -> y'`` at a step point (``k`` the scheme's first stage there, or None).
    t0 : float
        Start time.
    y0 : ndarray
        Start state.
    k0 : ndarray or None
        The right-hand side at the start, if known.
    """

    def __init__(self, events, keep_dense, derivative, t0, y0, k0):
        self.events, self.keep_dense, self.derivative = list(events), keep_dense, derivative
        d0 = derivative(y0, k0)
        self.t, self.y, self.dy = [t0], [y0], [d0]
        self.g = [e.value(t0, y0) for e in self.events]
        self.t_events = [[] for _ in self.events]
        self.y_events = [[] for _ in self.events]
        self.last = (t0, y0, d0)
        self.pending = None

    def step(self, t1, y1, k1):
        """What the accepted step to ``(t1, y1)`` adds (kept until :meth:`commit`).

        Parameters
        ----------
        t1 : float
            The step's end.
        y1 : ndarray
            The state there.
        k1 : ndarray or None
            The right-hand side there, if known.

        Returns
        -------
        tuple or None
            ``(t_root, y_root, index)`` of the first terminal root inside the step, else None.
        """
        t0, y0, d0 = self.last
        d1 = self.derivative(y1, k1)
        seg = (t0, y0, d0, t1, y1, d1)
        g1 = [e.value(t1, y1) for e in self.events]
        roots = []
        for i, e in enumerate(self.events):
            if e.crosses(self.g[i], g1[i]):
                r = locate_root(lambda s, e=e: e.value(s, hermite(s, *seg)), t0, t1, self.g[i], g1[i], e.xtol)
                roots.append((r, i))
        roots.sort()
        stop = next(((r, i) for r, i in roots if self.events[i].terminal), None)
        found = [(r, i, hermite(r, *seg)) for r, i in roots if stop is None or r <= stop[0]]
        if stop is None:
            point = (t1, y1, d1)
        else:
            point = (stop[0], hermite(stop[0], *seg), hermite_derivative(stop[0], *seg))
        self.pending = (point, g1, found)
        return None if stop is None else (point[0], point[1], stop[1])

    def commit(self):
        point, g1, found = self.pending
        if self.keep_dense:
            self.t.append(point[0])
            self.y.append(point[1])
            self.dy.append(point[2])
        for r, i, yr in found:
            self.t_events[i].append(r)
            self.y_events[i].append(yr)
        self.last, self.g, self.pending = point, g1, None

    def dense(self):
        """The dense output of the steps committed so far.

        Returns
        -------
        DenseOutput or None
            None unless ``keep_dense``.
        """
        return DenseOutput(np.array(self.t, dtype=float), np.stack(self.y), np.stack(self.dy)) \
            if self.keep_dense else None

    def events_found(self, shape, dtype):
        """The recorded roots per event.

        Parameters
        ----------
        shape : tuple of int
            The state's shape (for events without roots).
        dtype : numpy.dtype
            The state's dtype.

        Returns
        -------
        t_events : tuple of ndarray
            Per event, the root times, shape (k,).
        y_events : tuple of ndarray
            Per event, the states there, shape (k,) + ``shape``.
        """
        t = tuple(np.array(ts, dtype=float) for ts in self.t_events)
        y = tuple(np.stack(ys) if ys else np.empty((0,) + shape, dtype=dtype) for ys in self.y_events)
        return t, y
