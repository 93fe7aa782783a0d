"""Explicit Runge-Kutta integrators: schemes as Butcher tableaux in a registry, one driver.

:func:`integrate` advances ``y' = rhs(t, y)`` for a state ``y`` of any shape, with fixed steps
or embedded error control, an optional retraction after every accepted step (e.g. back onto
the sphere), an ``observe`` hook called at the requested times, and an ``event`` hook that can
stop the run.  It returns one :class:`Trajectory`.  Numpy only; nothing else of ``meanfield``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from tqdm import tqdm

__all__ = ["Tableau", "SCHEMES", "Trajectory", "rk_step", "integrate"]


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


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Outcome of :func:`integrate`.

    Attributes
    ----------
    t : ndarray, shape (T,)
        Recorded times: the ``t_eval`` times reached, plus the stopping time if an event fired.
    y : ndarray, shape (T, *y0.shape), or None
        Recorded states (None when ``save_states=False``).
    observables : dict of str to ndarray, each of shape (T, ...)
        Values returned by ``observe`` at the recorded times, stacked along axis 0.
    y_final : ndarray, shape y0.shape
        Last (finite) state reached, at time ``t_final``.
    t_final : float
    status : int
        0: reached ``t_span[1]``; 1: stopped by ``event``; 2: interrupted (KeyboardInterrupt);
        -1: failed (non-finite state, step-size underflow, ``max_steps`` exceeded).
    message : str
    method : str
    nfev, n_steps, n_rejected : int
        Right-hand-side evaluations, accepted steps, rejected steps.
    max_retraction : float
        Largest ``max|retraction(y) - y|`` over accepted steps; 0 without a retraction.
    """

    t: np.ndarray
    y: np.ndarray | None
    observables: dict[str, np.ndarray]
    y_final: np.ndarray
    t_final: float
    status: int
    message: str
    method: str
    nfev: int
    n_steps: int
    n_rejected: int
    max_retraction: float

    @property
    def success(self) -> bool:
        """True when the run ended normally: reached the end or stopped by its event."""
        return self.status in (0, 1)


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


def _fail(name, allowed, received, as_text=False):
    raise ValueError(f"{name} must be {allowed}; received {received if as_text else repr(received)}")


def _check_positive(name, x, allow_inf=False, allow_zero=False):
    ok = isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)
    if not ok or not (x >= 0 if allow_zero else x > 0) or not (allow_inf or np.isfinite(x)):
        _fail(name, "a " + ("non-negative" if allow_zero else "positive") + (" " if allow_inf else " finite ") + "number", x)


def _rms(x):
    return float(np.sqrt(np.mean(np.square(np.abs(x))))) if x.size else 0.0


def _initial_step(f, t0, y0, f0, span, order, rtol, atol):
    """Hairer-Wanner starting step (as scipy's ``select_initial_step``)."""
    scale = atol + rtol * np.abs(y0)
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    h0 = min(h0, span)
    d2 = _rms((f(t0 + h0, y0 + h0 * f0) - f0) / scale) / h0
    h1 = max(1e-6, 1e-3 * h0) if max(d1, d2) <= 1e-15 else (0.01 / max(d1, d2)) ** (1 / (order + 1))
    return min(100 * h0, h1, span)


def integrate(rhs, y0, t_span, *, method="rk4", dt=None, t_eval=None, rtol=1e-6, atol=1e-9,
              dt_max=np.inf, retraction=None, observe=None, event=None, save_states=True,
              progress=None, max_steps=10_000_000, adaptive=None, checkpoint=None, checkpoint_every=None,
              resume=None) -> Trajectory:
    """Integrate ``y' = rhs(t, y)`` over ``t_span`` with an explicit Runge-Kutta scheme.

    Parameters
    ----------
    rhs : callable ``rhs(t, y) -> ndarray`` of shape ``y0.shape``
    y0 : array_like, any shape (e.g. ``(n, d)`` particles or ``(K,)`` coefficients)
    t_span : (float, float)
        ``(t0, t1)`` with ``t1 > t0``.
    method : str or Tableau
        A key of :data:`SCHEMES` or a :class:`Tableau`.
    dt : float, optional
        Step size (required for fixed-step integration); initial step for adaptive schemes.
        Fixed steps lie on the grid ``t0 + k dt``; steps are shortened to land on ``t_eval``.
    t_eval : array_like, shape (T,), optional
        Strictly increasing times in ``[t0, t1]`` at which states and observables are
        recorded; default ``[t0, t1]``.  Every step is clipped to land on them exactly.
    rtol, atol : float
        Error control of adaptive schemes: the scaled error
        :math:`\\|e / (atol + rtol \\max(|y|, |y_{new}|))\\|_{RMS}` must be at most 1.
    dt_max : float
        Largest step of adaptive schemes.
    retraction : callable ``retraction(y) -> ndarray``, optional
        Applied after every accepted step (e.g. normalizing rows onto the unit sphere).
    observe : callable ``observe(t, y) -> dict[str, array_like]``, optional
        Called at each recorded time; results are stacked in ``Trajectory.observables``.
    event : callable ``event(t, y) -> None or str``, optional
        Checked at ``t0`` and after every accepted step; a string stops the run (status 1)
        and the stopping state is recorded.
    save_states : bool
        Keep recorded states in ``Trajectory.y`` (otherwise only observables and ``y_final``).
    progress : bool or None
        tqdm bar over simulated time; None shows it only when stderr is a terminal.
    max_steps : int
        Most step attempts (accepted and rejected) before failing with status -1.
    adaptive : bool or None
        None uses error control when the scheme has an embedded pair; False runs any scheme
        at fixed ``dt`` with its main weights.
    checkpoint : callable ``checkpoint(state: dict)``, optional
        Called every ``checkpoint_every`` units of simulated time and when the run is
        interrupted (Ctrl-C: status 2, the work so far is returned, not lost).  ``state`` holds
        everything needed to continue: pass it back as ``resume``.
    checkpoint_every : float, optional
    resume : dict, optional
        A checkpoint state of a run with the same scheme, ``t_span`` and ``t_eval``; the run
        continues from it and gives the same numbers, bit for bit, as an uninterrupted run
        (same step sequence; the rhs must be deterministic).

    Returns
    -------
    Trajectory
    """
    tab = SCHEMES.get(method) if isinstance(method, str) else method
    if not isinstance(tab, Tableau):
        _fail("method", f"one of {sorted(SCHEMES)} or a Tableau", method)
    if adaptive is None:
        adaptive = tab.adaptive
    elif adaptive not in (True, False) or (adaptive and not tab.adaptive):
        _fail("adaptive", f"None, False, or True for the adaptive schemes "
              f"{sorted(k for k, v in SCHEMES.items() if v.adaptive)}", f"{adaptive!r} with method {tab.name!r}", True)
    if not adaptive and tab.adaptive:
        tab = replace(tab, b_err=None, err_order=None)
    if not callable(rhs):
        _fail("rhs", "a callable rhs(t, y)", rhs)
    for name, fn in (("retraction", retraction), ("observe", observe), ("event", event)):
        if fn is not None and not callable(fn):
            _fail(name, "None or a callable", fn)
    y = np.array(y0, copy=True)
    if not np.issubdtype(y.dtype, np.inexact):
        y = y.astype(float) if np.issubdtype(y.dtype, np.number) else _fail("y0", "a numeric array", y0)
    if not np.all(np.isfinite(y)):
        _fail("y0", "a finite array", "an array containing NaN or inf", True)
    ts = np.asarray(t_span, dtype=float) if np.size(t_span) == 2 else None
    if ts is None or ts.shape != (2,) or not np.all(np.isfinite(ts)) or not ts[1] > ts[0]:
        _fail("t_span", "a pair (t0, t1) of finite numbers with t1 > t0", t_span)
    t0, t1 = float(ts[0]), float(ts[1])
    t_eval = np.array([t0, t1]) if t_eval is None else np.asarray(t_eval, dtype=float)
    if t_eval.ndim != 1 or t_eval.size == 0 or np.any(np.diff(t_eval) <= 0):
        _fail("t_eval", "a non-empty 1-d strictly increasing array", t_eval)
    if t_eval[0] < t0 or t_eval[-1] > t1:
        _fail("t_eval", f"inside t_span [{t0}, {t1}]", t_eval)
    if dt is None and not adaptive:
        _fail("dt", f"a positive number for the fixed-step method {tab.name!r}", dt)
    if dt is not None:
        _check_positive("dt", dt)
    _check_positive("rtol", rtol)
    _check_positive("atol", atol, allow_zero=True)
    _check_positive("dt_max", dt_max, allow_inf=True)
    if not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        _fail("max_steps", "a positive integer", max_steps)
    if not adaptive and (t1 - t0) / dt > max_steps:
        _fail("dt", f"at least (t1 - t0) / max_steps = {(t1 - t0) / max_steps:.3g} (fixed steps would need "
              f"{(t1 - t0) / dt:.3g} > max_steps = {max_steps} steps)", dt)

    if checkpoint is not None and not callable(checkpoint):
        _fail("checkpoint", "None or a callable checkpoint(state)", checkpoint)
    if checkpoint_every is not None:
        _check_positive("checkpoint_every", checkpoint_every)

    nfev = 0

    def f(t, y):
        nonlocal nfev
        nfev += 1
        return rhs(t, y)

    targets = t_eval if t_eval[-1] == t1 else np.append(t_eval, t1)
    is_eval = np.ones(len(targets), dtype=bool)
    is_eval[len(t_eval):] = False
    rec_t, rec_y, rec_obs = [], [], {}

    def observe_at(t, y):
        return {key: np.asarray(val) for key, val in (observe(t, y) if observe is not None else {}).items()}

    def append(t, y, obs):
        rec_t.append(t)
        if save_states:
            rec_y.append(y)
        for key, val in obs.items():
            rec_obs.setdefault(key, []).append(val)

    def record(t, y):
        append(t, y, observe_at(t, y))

    status, message = 0, f"reached t = {t1}"
    if resume is None:
        k0 = np.array(f(t0, y))          # a copy: an rhs may reuse its output buffer
        if k0.shape != y.shape:
            _fail("rhs", f"a callable returning arrays of the shape of y0, {y.shape}", k0.shape)
        t, i_target, n_steps, n_rejected, k_grid, max_retraction, rejected_last = t0, 0, 0, 0, 0, 0.0, False
        if targets[0] == t0:
            record(t0, y)
            i_target = 1
        h = None
        if adaptive:
            h = min(dt if dt is not None else _initial_step(f, t0, y, k0, t1 - t0, tab.err_order, rtol, atol), dt_max)
        stop = event(t0, y) if event is not None else None
        if stop is not None:
            status, message = 1, f"event at t = {t0}: {stop}"
            if not rec_t:
                record(t0, y)
            i_target = len(targets)
    else:
        _check_resume(resume, tab.name, (t0, t1), t_eval, y.shape)
        t, y, k0, h = resume["t"], np.array(resume["y"]), resume["k0"], resume["h"]
        i_target, n_steps, n_rejected, k_grid = resume["i_target"], resume["n_steps"], resume["n_rejected"], resume["k_grid"]
        max_retraction, rejected_last, nfev = resume["max_retraction"], resume["rejected_last"], resume["nfev"]
        rec_t, rec_y = list(resume["rec_t"]), list(resume["rec_y"])
        rec_obs = {k: list(v) for k, v in resume["rec_obs"].items()}
    span = t1 - t0
    expo = 1.0 / (tab.err_order + 1) if adaptive else None
    snap = None if adaptive else 1e-6 * dt + 8 * np.spacing(max(abs(t0), abs(t1)))
    next_checkpoint = t + checkpoint_every if checkpoint_every is not None else np.inf

    def state():
        """Everything needed to continue bit for bit (see ``resume``)."""
        return {"method": tab.name, "t_span": (t0, t1), "t_eval": t_eval, "t": t, "y": y, "k0": k0, "h": h,
                "i_target": i_target, "n_steps": n_steps, "n_rejected": n_rejected, "k_grid": k_grid,
                "max_retraction": max_retraction, "rejected_last": rejected_last, "nfev": nfev,
                "rec_t": list(rec_t), "rec_y": list(rec_y), "rec_obs": {k: list(v) for k, v in rec_obs.items()}}

    bar = tqdm(total=span, initial=t - t0, disable=None if progress is None else not progress, desc=tab.name,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.4g}/{total:.4g} [{elapsed}<{remaining}]")
    shown, last_draw = t, time.monotonic()
    try:
        while i_target < len(targets):
            T = targets[i_target]
            if n_steps + n_rejected >= max_steps:
                status, message = -1, f"max_steps = {max_steps} step attempts exceeded at t = {t}"
                break
            if adaptive:
                land = t + h >= T - 1e-6 * h
                t_new = T if land else t + h
            else:
                t_grid = t0 + (k_grid + 1) * dt
                land = t_grid >= T - snap
                k_grid_new = k_grid + (1 if (not land or abs(t_grid - T) <= snap) else 0)
                t_new = T if land else t_grid
            step = t_new - t
            y_new, y_err, k_last = rk_step(f, t, y, step, tab, k0)
            bad = not np.all(np.isfinite(y_new))
            if adaptive:
                sc = atol + rtol * np.maximum(np.abs(y), np.abs(y_new))
                err = _rms(y_err / sc)
                bad = bad or not np.isfinite(err)
                if not bad and err > 1.0:
                    n_rejected += 1
                    h = step * max(0.2, 0.9 * err ** -expo)
                    rejected_last = True
                    if h < 16 * np.finfo(float).eps * max(abs(t), span):
                        status, message = -1, f"step size underflow at t = {t}: dt = {h:.3g}"
                        break
                    continue
                factor = 5.0 if err == 0 else min(5.0, 0.9 * err ** -expo)
                factor = min(1.0, factor) if rejected_last else factor
                h_next = min(max(step * factor, h) if land else step * factor, dt_max)
            if bad:
                status, message = -1, f"non-finite state or derivative in the step from t = {t} to t = {t_new} (dt = {step:.3g})"
                break
            if retraction is not None:
                y_ret = np.asarray(retraction(y_new))
                if y_ret.shape != y.shape:
                    _fail("retraction", f"a callable returning arrays of the shape of y0, {y.shape}", y_ret.shape)
                drift = float(np.max(np.abs(y_ret - y_new))) if y_ret.size else 0.0
                if not np.isfinite(drift):
                    status, message = -1, f"non-finite state after retraction at t = {t_new}"
                    break
                max_retraction = max(max_retraction, drift)
                k_last = k_last if drift == 0.0 else None
                y_new = y_ret
            # the hooks run before the commit: an interrupt inside them leaves the previous state,
            # and a resumed run redoes this step exactly
            keep = land and is_eval[i_target]
            obs = observe_at(t_new, y_new) if keep else None
            stop = event(t_new, y_new) if event is not None else None
            if stop is not None and not keep:
                obs = observe_at(t_new, y_new)
            # commit the step (nothing above changed the state, so an interrupt there loses nothing)
            if adaptive:
                h, rejected_last = h_next, False
            else:
                k_grid = k_grid_new
            n_steps += 1
            t, y, k0 = t_new, y_new, k_last
            if keep or stop is not None:
                append(t, y, obs)
            if land:
                i_target += 1
            if stop is not None:
                status, message = 1, f"event at t = {t}: {stop}"
                break
            if checkpoint is not None and t >= next_checkpoint and i_target < len(targets):
                checkpoint(state())
                next_checkpoint = t + checkpoint_every
            if time.monotonic() - last_draw > 0.1:
                bar.update(t - shown)
                shown, last_draw = t, time.monotonic()
    except KeyboardInterrupt:
        status, message = 2, f"interrupted at t = {t}"
    if status == 2 and checkpoint is not None:
        checkpoint(state())
    bar.update(t - shown)
    bar.close()
    return Trajectory(
        t=np.array(rec_t, dtype=float),
        y=(np.stack(rec_y) if rec_y else np.empty((0,) + y.shape, dtype=y.dtype)) if save_states else None,
        observables={key: np.stack(vals) for key, vals in rec_obs.items()},
        y_final=y, t_final=float(t), status=status, message=message, method=tab.name,
        nfev=nfev, n_steps=n_steps, n_rejected=n_rejected, max_retraction=max_retraction)


def _check_resume(state, method, t_span, t_eval, shape):
    """A checkpoint continues only the run it came from: same scheme, span, times and shape."""
    need = {"method", "t_span", "t_eval", "t", "y", "k0", "h", "i_target", "n_steps", "n_rejected", "k_grid",
            "max_retraction", "rejected_last", "nfev", "rec_t", "rec_y", "rec_obs"}
    if not isinstance(state, dict) or need - set(state):
        missing = sorted(need - set(state)) if isinstance(state, dict) else "not a dict"
        _fail("resume", "a checkpoint state from integrate(checkpoint=...)", f"missing {missing}", True)
    if state["method"] != method:
        _fail("resume", f"a checkpoint of method {method!r}", f"one of method {state['method']!r}", True)
    if tuple(map(float, state["t_span"])) != tuple(t_span) or not np.array_equal(state["t_eval"], t_eval):
        _fail("resume", f"a checkpoint of the same t_span {t_span} and t_eval",
              f"t_span {tuple(state['t_span'])}", True)
    if np.shape(state["y"]) != shape:
        _fail("resume", f"a checkpoint with states of shape {shape}", np.shape(state["y"]), True)
