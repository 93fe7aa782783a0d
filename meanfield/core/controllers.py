"""Step-size control of :func:`meanfield.core.integrate.integrate`: where the next step ends.

A controller proposes ``(t_new, land)`` from the current time and the next target (a ``t_eval``
time or the end), is told about the outcome of the step, applies its update on :meth:`commit`
(only when the driver commits the step, so an interrupt never leaves it half-updated), and
reports its share of a checkpoint (``h``, ``k_grid``, ``rejected_last``) through :meth:`state`.

* :class:`FixedGrid`: steps on the grid ``t0 + k dt``, shortened to land on targets;
* :class:`ErrorControl`: embedded error estimates, scaled RMS error at most 1.

Numpy only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FixedGrid", "ErrorControl", "initial_step", "rms"]


def rms(x):
    """Root mean square of ``|x|`` (0 for an empty array).

    Parameters
    ----------
    x : ndarray
        Real or complex, any shape.

    Returns
    -------
    float
    """
    return float(np.sqrt(np.mean(np.square(np.abs(x))))) if x.size else 0.0


def initial_step(f, t0, y0, f0, span, order, rtol, atol):
    """Hairer-Wanner starting step (as scipy's ``select_initial_step``).

    Parameters
    ----------
    f : callable
        ``f(t, y)``, the right-hand side (called once).
    t0 : float
        Start time.
    y0, f0 : ndarray
        Start state and ``f(t0, y0)``.
    span : float
        Length of the interval (the step's upper bound).
    order : int
        Error order of the scheme's embedded pair.
    rtol, atol : float
        Tolerances.

    Returns
    -------
    float
        The first step, at most ``span``.
    """
    scale = atol + rtol * np.abs(y0)
    d0, d1 = rms(y0 / scale), rms(f0 / scale)
    h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    h0 = min(h0, span)
    d2 = rms((f(t0 + h0, y0 + h0 * f0) - f0) / scale) / h0
    h1 = max(1e-6, 1e-3 * h0) if max(d1, d2) <= 1e-15 else (0.01 / max(d1, d2)) ** (1 / (order + 1))
    return min(100 * h0, h1, span)


class FixedGrid:
    """Fixed steps on the grid ``t0 + k dt``, shortened (without leaving the grid) to land on a target.

    Parameters
    ----------
    t0, t1 : float
        The run's span (``t1`` sizes the landing tolerance).
    dt : float
        The grid step.
    k_grid : int
        Index of the last grid time reached (a resumed run's).
    """

    adaptive = False

    def __init__(self, t0, t1, dt, k_grid=0):
        self.t0, self.dt, self.k_grid = t0, dt, k_grid
        self.snap = 1e-6 * dt + 8 * np.spacing(max(abs(t0), abs(t1)))   # a grid time this close is the target

    def propose(self, t, T):
        """``(t_new, land)``: the next time, and whether it is the target ``T``.

        Parameters
        ----------
        t : float
            Current time (unused: the grid index decides).
        T : float
            The next target.

        Returns
        -------
        t_new : float
        land : bool
        """
        t_grid = self.t0 + (self.k_grid + 1) * self.dt
        land = t_grid >= T - self.snap
        self._k_next = self.k_grid + (1 if (not land or abs(t_grid - T) <= self.snap) else 0)
        return (T if land else t_grid), land

    def commit(self):
        self.k_grid = self._k_next

    def state(self):
        """The controller's part of a checkpoint.

        Returns
        -------
        dict
            ``h`` (None), ``k_grid`` and ``rejected_last`` (False).
        """
        return {"h": None, "k_grid": self.k_grid, "rejected_last": False}


class ErrorControl:
    """Adaptive steps: accept when the scaled RMS error is at most 1; the next step is scaled by
    ``0.9 err^(-1/(q+1))`` (``q`` the embedded order) within ``[0.2, 5]``, not grown after a rejection.

    Parameters
    ----------
    h : float
        The next step.
    rejected_last : bool
        Whether the last attempt was rejected (the next step then does not grow).
    err_order : int
        Order ``q`` of the embedded error estimate.
    rtol, atol : float
        Tolerances.
    dt_max : float
        Largest step.
    span : float
        Length of the run's interval (sizes the underflow test).
    """

    adaptive = True

    def __init__(self, h, rejected_last, err_order, rtol, atol, dt_max, span):
        self.h, self.rejected_last = h, rejected_last
        self.expo, self.rtol, self.atol, self.dt_max, self.span = 1.0 / (err_order + 1), rtol, atol, dt_max, span

    def propose(self, t, T):
        """``(t_new, land)``: ``t + h``, or the target ``T`` when it lies within the step.

        Parameters
        ----------
        t : float
            Current time.
        T : float
            The next target.

        Returns
        -------
        t_new : float
        land : bool
        """
        land = t + self.h >= T - 1e-6 * self.h
        return (T if land else t + self.h), land

    def error(self, y, y_new, y_err):
        """:math:`\\|e / (atol + rtol \\max(|y|, |y_{new}|))\\|_{RMS}`.

        Parameters
        ----------
        y, y_new : ndarray
            State before and after the step.
        y_err : ndarray
            The embedded error estimate ``e``.

        Returns
        -------
        float
        """
        sc = self.atol + self.rtol * np.maximum(np.abs(y), np.abs(y_new))
        return rms(y_err / sc)

    def reject(self, t, step, err) -> bool:
        """Shrink the step after a rejection; True when it underflowed (no progress possible).

        Parameters
        ----------
        t : float
            Current time.
        step : float
            The rejected step.
        err : float
            Its scaled error (``> 1``).

        Returns
        -------
        bool
        """
        self.h = step * max(0.2, 0.9 * err ** -self.expo)
        self.rejected_last = True
        return self.h < 16 * np.finfo(float).eps * max(abs(t), self.span)

    def accept(self, step, err, land):
        """Prepare the next step after an accepted one (applied by :meth:`commit`).

        Parameters
        ----------
        step : float
            The accepted step.
        err : float
            Its scaled error (``<= 1``).
        land : bool
            Whether it was shortened to land on a target (the next step then does not shrink).
        """
        factor = 5.0 if err == 0 else min(5.0, 0.9 * err ** -self.expo)
        factor = min(1.0, factor) if self.rejected_last else factor
        # a step shortened to land on a target does not shrink the next one
        self._h_next = min(max(step * factor, self.h) if land else step * factor, self.dt_max)

    def commit(self):
        self.h, self.rejected_last = self._h_next, False

    def state(self):
        """The controller's part of a checkpoint.

        Returns
        -------
        dict
            ``h``, ``k_grid`` (0) and ``rejected_last``.
        """
        return {"h": self.h, "k_grid": 0, "rejected_last": self.rejected_last}
