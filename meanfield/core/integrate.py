"""The time-stepping driver: ``integrate(rhs, y0, t_span, ...) -> Trajectory``.

:func:`integrate` advances ``y' = rhs(t, y)`` (or ``y' = L y + rhs(t, y)`` with a diagonal
``linear`` part ``L``) for a state ``y`` of any shape, with fixed steps or embedded error control,
an optional retraction after every accepted step (e.g. back onto the sphere), an ``observe`` hook
called at the requested times, and an ``event`` hook that can stop the run.  It returns one
:class:`Trajectory`.  The schemes are :mod:`meanfield.core.steppers`; every scheme is an entry of
:data:`meanfield.core.methods.METHODS` (explicit, split, stochastic; a Stepper of one's own too).  The
options come grouped (:mod:`meanfield.core.options`: ``step=StepControl``, ``save=SaveAt``,
``checkpointing=Checkpointing``).  A :class:`Piecewise` right-hand side (layer schedules) has
breakpoints the driver steps onto; ``SaveAt(dense=True)`` and ``events`` give dense output and
root-located events (:mod:`meanfield.core.dense`).  The driver is put together from small parts, each
owning its share of the state a checkpoint saves:

* :class:`~meanfield.core.controllers.FixedGrid` / :class:`~meanfield.core.controllers.ErrorControl`
  choose the next step (grid index / step size),
* :mod:`meanfield.core.driver_parts`: the recorder, the checkpoint schedule, the progress bar, the
  Brownian stream of a stochastic scheme,
* :class:`~meanfield.core.dense.EventTracker`: the dense points and the events' roots.

Numpy and its siblings in ``core``; nothing else of ``meanfield``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from . import validate
from .controllers import ErrorControl, FixedGrid, initial_step
from .dense import DenseOutput, EventTracker
from .driver_parts import (
    _check_events,
    _check_linear,
    _check_noise,
    _check_resume,
    _Checkpoints,
    _Counted,
    _fail,
    _Position,
    _Progress,
    _Recorder,
)
from .methods import as_stepper, method_names
from .options import Checkpointing, SaveAt, StepControl, option
from .sde import generator_from_state
from .steppers import ExplicitRK

__all__ = ["Trajectory", "integrate", "estimate_nfev", "Piecewise"]


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Outcome of :func:`integrate`.

    Attributes
    ----------
    t : ndarray, shape (T,)
        Recorded times: the ``t_eval`` times reached, plus the stopping time if an event fired.
    y : ndarray, shape (T,) + y0.shape, or None
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
    dense : DenseOutput or None
        The state at any time of the run (``dense=True``): cubic Hermite through the step points.
    t_events, y_events : tuple of ndarray, one per event, or None
        The located roots of each :class:`Event` (``events=``) and the interpolated states there.
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
    dense: DenseOutput | None = None
    t_events: tuple | None = None
    y_events: tuple | None = None

    @property
    def success(self) -> bool:
        """True when the run ended normally: reached the end or stopped by its event."""
        return self.status in (0, 1)


@dataclass(frozen=True, eq=False)
class Piecewise:
    """A right-hand side that changes at breakpoints, for :func:`integrate` (e.g. a layer schedule).

    Piece ``k`` holds on ``[starts[k], starts[k + 1])`` (the last one to any later time);
    ``piece(k)`` returns ``(rhs, retraction)`` of piece ``k`` (``retraction`` may be None).  The driver
    steps onto every breakpoint inside ``t_span`` (no step straddles one) and starts the next piece
    afresh there: its own first derivative and a new step controller (the grid restarts at the
    breakpoint), as if each piece were its own run from the state the previous one reached.

    Parameters
    ----------
    starts : sequence of float
        Non-empty, strictly increasing start times of the pieces (stored as a tuple of floats).
    piece : callable
        ``piece(k) -> (rhs, retraction)``.

    Raises
    ------
    ValueError
        ``starts`` not a non-empty strictly increasing sequence of finite numbers, or ``piece`` not callable.
    """

    starts: tuple
    piece: object

    def __post_init__(self):
        starts = validate.real_array("starts", self.starts, (None,))
        if starts.size == 0 or np.any(np.diff(starts) <= 0):
            _fail("starts", "a non-empty strictly increasing sequence of times", self.starts)
        if not callable(self.piece):
            _fail("piece", "a callable index -> (rhs, retraction)", self.piece)
        object.__setattr__(self, "starts", tuple(float(s) for s in starts))

    def index_at(self, t) -> int:
        """The piece in force at ``t`` (the first before the first start).

        Parameters
        ----------
        t : float
            A time.

        Returns
        -------
        int
            The index ``k`` with ``starts[k] <= t < starts[k + 1]`` (0 before ``starts[0]``).
        """
        return max(int(np.searchsorted(self.starts, t, side="right")) - 1, 0)

    def segments(self, t0, t1):
        """``[(a, b, index), ...]`` covering ``[t0, t1]``, cut at the starts inside it.

        Parameters
        ----------
        t0, t1 : float
            The span, ``t0 < t1``.

        Returns
        -------
        list of (float, float, int)
            Consecutive intervals ``(a, b)`` and the piece in force on each (:meth:`index_at` of ``a``).
        """
        bounds = [t0] + [s for s in self.starts if t0 < s < t1] + [t1]
        return [(a, b, self.index_at(a)) for a, b in zip(bounds[:-1], bounds[1:])]


def integrate(rhs, y0, t_span, *, method="rk4", step=None, save=None, checkpointing=None, retraction=None,
              event=None, events=(), linear=None, noise=None, progress=None, progress_label=None) -> Trajectory:
    """Integrate ``y' = rhs(t, y)`` (or ``y' = L y + rhs(t, y)``) over ``t_span`` with a one-step scheme.

    Parameters
    ----------
    rhs : callable ``rhs(t, y) -> ndarray`` of shape ``y0.shape``, or a :class:`Piecewise`
    y0 : array_like, any shape (e.g. ``(n, d)`` particles or ``(K,)`` coefficients), real and finite (a complex
        state is refused: integrate its re, im pairs, ``y.view(float)``, as the PDE models do)
    t_span : (float, float)
        ``(t0, t1)`` with ``t1 > t0``.
    method : str, Tableau or Stepper
        A name of :data:`meanfield.core.methods.METHODS` (explicit Runge-Kutta, split schemes for
        ``linear``, stochastic schemes for ``noise``), a :class:`Tableau` or a :class:`Stepper`.
    step : StepControl, optional
        :class:`~meanfield.core.options.StepControl`: ``dt`` (required for fixed-step integration;
        initial step for adaptive schemes; fixed steps lie on the grid ``t0 + k dt``, shortened to
        land on ``t_eval``), ``rtol``, ``atol`` (default 1e-6, 1e-9: the scaled error
        :math:`\\|e / (atol + rtol \\max(|y|, |y_{new}|))\\|_{RMS}` must be at most 1), ``dt_max``,
        ``max_steps`` (most step attempts before failing with status -1), ``adaptive`` (None: error
        control when the scheme has an embedded pair; False: any scheme at fixed ``dt`` with its
        main weights).
    save : SaveAt, optional
        :class:`~meanfield.core.options.SaveAt`: ``t_eval`` (strictly increasing times in
        ``[t0, t1]``, default ``[t0, t1]``; every step lands on them exactly), ``states`` (keep the
        recorded states in ``Trajectory.y``), ``observe`` (a callable ``observe(t, y) -> dict``
        called at each recorded time, stacked in ``Trajectory.observables``; True/None/False: none),
        ``dense`` (keep ``Trajectory.dense``: the cubic Hermite interpolant through every accepted
        step point, with the right-hand side as derivative; Runge-Kutta schemes evaluate it as their
        first stage anyway: one evaluation more in all, the same numbers otherwise).
    checkpointing : Checkpointing, optional
        :class:`~meanfield.core.options.Checkpointing`: ``save(state)`` is called every ``every``
        units of simulated time and when the run is interrupted (Ctrl-C: status 2, the work so far
        is returned, not lost); ``state`` holds everything needed to continue: pass it back as
        ``resume`` of a run with the same scheme, ``t_span``, ``t_eval`` and step settings, which
        gives the same numbers, bit for bit, as an uninterrupted run (the rhs, and ``linear``, must
        be the same).
    retraction : callable ``retraction(y) -> ndarray``, optional
        Applied after every accepted step (e.g. normalizing rows onto the unit sphere).
    event : callable ``event(t, y) -> None or str``, optional
        Checked at ``t0`` and after every accepted step; a string stops the run (status 1)
        and the stopping state is recorded.
    events : sequence of Event (or callables ``fn(t, y) -> float``)
        Root-located events: a sign change of ``fn`` between step points is located on the dense
        interpolant (:func:`meanfield.core.dense.locate_root`) and recorded in ``Trajectory.t_events``
        / ``y_events``; a ``terminal`` one stops the run there (status 1).  Not with stochastic
        schemes or step rules, nor with checkpointing.
    linear : array_like broadcasting to ``y0.shape``, optional
        Diagonal linear part ``L`` (elementwise product ``L * y``), e.g. ``-nu l (l + 1)`` for
        diffusion in spherical harmonics.  A split scheme treats it implicitly or exactly; an
        explicit scheme integrates ``L * y + rhs(t, y)``.  None: ``L = 0``.
    noise : Noise, optional
        The noise of a stochastic method (required for one, refused for the others): ``nu``, the
        seed of the Brownian increments (the driver owns the generator; its state is in the
        checkpoint, so a resumed run continues the same stream) and the geometry.  ``rhs`` is then the
        drift; the scheme retracts onto the sphere itself, ``retraction`` is refused.
    progress : bool or None
        tqdm bar over simulated time; None shows it only when stderr is a terminal.
    progress_label : str, optional
        The bar's label (e.g. ``"PDE"``, ``"particles"``); default the scheme's name.

    Returns
    -------
    Trajectory
        Its ``status`` says how the run ended (0 reached ``t1``, 1 stopped by an event, 2 interrupted,
        -1 failed: step limit, step size underflow or a non-finite stage, with ``message``).

    Raises
    ------
    ValueError
        Before the run starts, for any refused argument: ``step``, ``save`` or ``checkpointing`` of the wrong
        type, ``step.cfl`` given, an unknown ``method`` or one that does not fit the run (``adaptive`` without
        an embedded pair, a fixed-step scheme without ``dt``, a stochastic scheme without ``noise`` or a
        deterministic one with it), a ``linear`` that is not real, finite and of a shape broadcasting to ``y0``,
        ``y0`` not real and finite, ``t_span`` not
        ``t0 < t1``, ``t_eval`` outside it, non-callable ``rhs`` / ``retraction`` / ``event`` / observer,
        ``events`` with a stochastic scheme or checkpointing, a ``retraction`` with a :class:`Piecewise` rhs
        or with ``noise``, checkpointing across pieces, a ``resume`` state of other settings, an
        ``rhs`` returning another shape, or an invalid ``progress`` / ``progress_label``.
    """
    sc, sv, ck = (option("step", step, StepControl), option("save", save, SaveAt),
                  option("checkpointing", checkpointing, Checkpointing))
    if sc.cfl is not None:
        _fail("step.cfl", "None for integrate (the CFL fraction is a PDE solver's setting)", sc.cfl)
    sc = sc.with_defaults(1e-6, 1e-9)
    dt, rtol, atol, dt_max, max_steps, adaptive = sc.dt, sc.rtol, sc.atol, sc.dt_max, sc.max_steps, sc.adaptive
    t_eval, save_states, dense = sv.t_eval, sv.states, sv.dense
    if isinstance(sv.observe, dict):
        _fail("save.observe", "True, False, None or a callable for integrate (a dict holds the settings of a "
              "solver's default observer: meanfield.solve; integrate has none)", sv.observe)
    observe = None if sv.observe is True or sv.observe is False else sv.observe
    checkpoint, checkpoint_every, resume = ck.save, ck.every, ck.resume
    stepper, adaptive = _resolve_method(method, adaptive)
    if progress is not None:
        validate.boolean("progress", progress)               # None: a bar only when stderr is a terminal
    if progress_label is not None and not (isinstance(progress_label, str) and progress_label.strip()):
        raise ValueError(f"progress_label must be a non-empty string or None; received {progress_label!r}")
    y, t0, t1, t_eval, L = _check_arguments(stepper, adaptive, rhs, y0, t_span, t_eval, dt, rtol, atol, dt_max,
                                            max_steps, retraction, observe, event, checkpoint, checkpoint_every,
                                            linear)
    stream = _check_noise(stepper, noise, y, dt, retraction, resume)
    events = _check_events(stepper, dense, events, checkpoint, resume)
    if isinstance(rhs, Piecewise) and retraction is not None:
        _fail("retraction", "None with a Piecewise rhs (each piece brings its own)", retraction)
    rhs_all = rhs
    pieces = rhs.segments(t0, t1) if isinstance(rhs, Piecewise) else [(t0, t1, None)]
    if len(pieces) > 1 and (resume is not None or checkpoint is not None):
        _fail("checkpoint", "None for a Piecewise rhs with breakpoints inside t_span (no resume across pieces)",
              checkpoint if resume is None else "a resume state", True)
    i_piece = 0
    if pieces[0][2] is not None:
        rhs, retraction = rhs.piece(pieces[0][2])
    f = _Counted(rhs, None if stepper.split else L)
    settings = {"rtol": float(rtol), "atol": float(atol)} if adaptive else {"dt": float(dt)}
    if stream is not None:
        settings.update(noise.settings)
    rec = _Recorder(t_eval, t1, observe, save_states, [b for _, b, _ in pieces[:-1]])
    status, message = 0, f"reached t = {t1}"

    def start_piece(a, b, y):
        """The first derivative and the controller of a run (or of one piece of a Piecewise rhs) on [a, b]."""
        k0 = np.array(f(a, y)) if stepper.reuses_k0 else None     # a copy: an rhs may reuse its output buffer
        if k0 is not None and k0.shape != y.shape:
            _fail("rhs", f"a callable returning arrays of the shape of y0, {y.shape}", k0.shape)
        if adaptive:
            h = dt if dt is not None else initial_step(f, a, y, k0, b - a, stepper.err_order, rtol, atol)
            return k0, ErrorControl(min(h, dt_max), False, stepper.err_order, rtol, atol, dt_max, b - a)
        return k0, FixedGrid(a, b, dt)

    if resume is None:
        k0, ctl = start_piece(t0, pieces[0][1], y)
        pos = _Position(t0, y, k0)
        started = rec.start(t0, y, event)
        if started is not None:
            status, message = started
    else:
        _check_resume(resume, stepper.name, (t0, t1), t_eval, y.shape, settings, stream is not None)
        pos = _Position(resume["t"], np.array(resume["y"]), resume["k0"], resume["n_steps"], resume["n_rejected"],
                        resume["max_retraction"])
        f.nfev = resume["nfev"]
        rec.restore(resume)
        ctl = (ErrorControl(resume["h"], resume["rejected_last"], stepper.err_order, rtol, atol, dt_max, t1 - t0)
               if adaptive else FixedGrid(t0, t1, dt, resume["k_grid"]))
        if stream is not None:
            stream.rng = generator_from_state(resume["rng_state"])

    tracker = None
    if dense or events:
        derivative = (lambda y_, k_: k_ + L * y_) if stepper.split and L is not None else (lambda y_, k_: k_)
        tracker = EventTracker(events, bool(dense), derivative, pos.t, pos.y, pos.k0)

    def state():
        """Everything needed to continue bit for bit (see ``resume``)."""
        c = ctl.state()
        return {"method": stepper.name, "t_span": (t0, t1), "t_eval": t_eval, "t": pos.t, "y": pos.y, "k0": pos.k0,
                "h": c["h"], "i_target": rec.i_target, "n_steps": pos.n_steps, "n_rejected": pos.n_rejected,
                "k_grid": c["k_grid"], "max_retraction": pos.max_retraction, "rejected_last": c["rejected_last"],
                "nfev": f.nfev, **rec.state(), "settings": settings,
                **({"rng_state": stream.rng.bit_generator.state} if stream is not None else {})}

    bar = _Progress(t0, t1, pos.t, progress, stepper.name if progress_label is None else progress_label)
    checkpoints = _Checkpoints(checkpoint, checkpoint_every, pos.t)
    try:
        while True:
            outcome = _march(stepper, f, L if stepper.split else None, pos, ctl, rec, max_steps, retraction, event,
                             lambda: checkpoints.after_step(pos.t, not rec.done, state), bar, stream, noise,
                             pieces[i_piece][1], tracker)
            if outcome is not None or rec.done or status != 0:
                break
            i_piece += 1                     # landed on a breakpoint: the next piece starts afresh there
            a, b, index = pieces[i_piece]
            f.rhs, retraction = rhs_all.piece(index)
            pos.k0, ctl = start_piece(a, b, pos.y)
            if tracker is not None:                  # the derivative jumps: the new piece's, at the same point
                tracker.last = (a, pos.y, tracker.derivative(pos.y, pos.k0))
        status, message = outcome or (status, message)
    except KeyboardInterrupt:
        status, message = 2, f"interrupted at t = {pos.t}"
    if status == 2:
        checkpoints.interrupted(state)
    bar.close(pos.t)
    if stream is not None and resume is None and isinstance(noise.seed, np.random.Generator):
        noise.seed.bit_generator.state = stream.rng.bit_generator.state   # a Generator passed in is advanced
    t_rec, y_rec, obs = rec.arrays(pos.y)
    extra = {}
    if tracker is not None:
        t_ev, y_ev = tracker.events_found(pos.y.shape, pos.y.dtype)
        extra = {"dense": tracker.dense(), "t_events": t_ev if events else None, "y_events": y_ev if events else None}
    return Trajectory(t=t_rec, y=y_rec, observables=obs, y_final=pos.y, t_final=float(pos.t), status=status,
                      message=message, method=stepper.name, nfev=f.nfev, n_steps=pos.n_steps,
                      n_rejected=pos.n_rejected, max_retraction=pos.max_retraction, **extra)


def estimate_nfev(method, t_span, *, dt=None, t_eval=None, adaptive=None) -> dict:
    """Right-hand-side evaluations a run of :func:`integrate` will make, counted before it starts.

    Fixed steps (a scheme without error control, or ``adaptive=False``): the grid times
    ``t0 + k dt`` inside the span plus the ``t_eval`` times (and ``t1``) off that grid are the steps;
    each costs the scheme's stages, the first one reusing the initial evaluation.  Exact for schemes
    without FSAL (checked against :attr:`Trajectory.nfev` in the tests); for a FSAL scheme an upper
    bound (a stage is reused where the retraction leaves the state unchanged).  Error control: the
    step sizes are not known before the run, so the count is a lower bound: one step per output
    interval (the stages less the reused one), plus the first evaluation and the initial-step probe.

    Parameters
    ----------
    method : str, Tableau or Stepper
        As for :func:`integrate`.
    t_span : (float, float)
        ``(t0, t1)`` with ``t1 > t0``.
    dt : float, optional
        The fixed step (required for fixed steps; the initial step under error control, which saves the probe).
    t_eval : array_like, optional
        Recorded times (default ``[t0, t1]``).
    adaptive : bool or None
        As ``StepControl.adaptive``.

    Returns
    -------
    dict
        ``nfev`` (int), ``steps`` (int) and ``lower_bound`` (bool: True under error control).

    Raises
    ------
    ValueError
        An unknown ``method`` or ``adaptive`` with a scheme without an embedded pair; ``t_span`` not two finite
        numbers with ``t1 > t0``; ``t_eval`` not finite reals; fixed steps without a positive finite ``dt``.
    """
    stepper, adaptive = _resolve_method(method, adaptive)
    t0, t1 = (float(v) for v in validate.real_array("t_span", t_span, (2,)))
    if not t1 > t0:
        _fail("t_span", "a pair (t0, t1) of finite numbers with t1 > t0", t_span)
    t_eval = np.array([t0, t1]) if t_eval is None else validate.real_array("t_eval", t_eval, (None,))
    targets = np.unique(np.append(t_eval[t_eval > t0], t1))
    stages = int(np.size(stepper.explicit_tableau.b))
    if adaptive:
        return {"nfev": 1 + (dt is None) + (stages - 1) * targets.size, "steps": int(targets.size),
                "lower_bound": True}
    if dt is None:
        _fail("dt", f"a positive number for the fixed-step method {stepper.name!r}", dt)
    dt = validate.real("dt", dt, positive=True)
    inside = int(np.ceil((t1 - t0) / dt - 1e-6)) - 1            # grid times t0 + k dt before t1 (FixedGrid's snap)
    k = (targets - t0) / dt
    on_grid = (np.abs(k - np.round(k)) <= 1e-6) & (np.round(k) >= 1) & (np.round(k) <= inside)
    steps = inside + int(targets.size - on_grid.sum())
    return {"nfev": stages * steps, "steps": steps, "lower_bound": False}


def _march(stepper, f, linear, pos, ctl, rec, max_steps, retraction, event, after_step, bar, stream, noise, t_end,
           tracker=None):
    """Step until every target up to ``t_end`` is reached (returns None), the event fires or the run
    fails (returns ``(status, message)``).

    ``pos``, ``ctl`` and ``rec`` change only when a step is committed (after the hooks ran), so an
    interrupt at any point leaves a state from which a resumed run redoes the same steps exactly.
    """
    while not rec.done and pos.t < t_end:
        t, y = pos.t, pos.y
        if pos.n_steps + pos.n_rejected >= max_steps:
            return -1, f"max_steps = {max_steps} step attempts exceeded at t = {t}"
        t_new, land = ctl.propose(t, rec.targets[rec.i_target])
        step = t_new - t
        if stream is None:
            y_new, y_err, k_last = stepper.step(f, t, y, step, pos.k0, linear)
        else:
            y_new, y_err, k_last = stepper.step(f, t, y, step, dW=stream.draw(stepper, y.shape, step), noise=noise)
        bad = not np.all(np.isfinite(y_new))
        if ctl.adaptive:
            err = ctl.error(y, y_new, y_err)
            bad = bad or not np.isfinite(err)
            if not bad and err > 1.0:
                pos.n_rejected += 1
                if ctl.reject(t, step, err):
                    return -1, f"step size underflow at t = {t}: dt = {ctl.h:.3g}"
                continue
            if not bad:
                ctl.accept(step, err, land)
        if bad:
            return -1, f"non-finite state or derivative in the step from t = {t} to t = {t_new} (dt = {step:.3g})"
        if retraction is not None:
            y_ret = np.asarray(retraction(y_new))
            if y_ret.shape != y.shape:
                _fail("retraction", f"a callable returning arrays of the shape of y0, {y.shape}", y_ret.shape)
            drift = float(np.max(np.abs(y_ret - y_new))) if y_ret.size else 0.0
            if not np.isfinite(drift):
                return -1, f"non-finite state after retraction at t = {t_new}"
            pos.max_retraction = max(pos.max_retraction, drift)
            k_last = k_last if drift == 0.0 else None
            y_new = y_ret
        if tracker is not None:
            if k_last is None:               # the derivative at the step's end (the next step's first stage)
                k_last = np.array(f(t_new, y_new))
            located = tracker.step(t_new, y_new, k_last)
            if located is not None:          # a terminal event inside the step: stop at its root
                t_root, y_root, i_event = located
                obs = rec.observe_at(t_root, y_root)
                ctl.commit()
                tracker.commit()
                pos.n_steps += 1
                pos.t, pos.y, pos.k0 = t_root, y_root, None
                rec.append(t_root, y_root, obs)
                return 1, f"event {i_event} at t = {t_root}: terminal root located"
        # the hooks run before the commit: an interrupt inside them leaves the previous state,
        # and a resumed run redoes this step exactly
        obs, stop = rec.hooks(t_new, y_new, land, event)
        # commit the step (nothing above changed the state, so an interrupt there loses nothing)
        ctl.commit()
        if stream is not None:
            stream.commit()
        if tracker is not None:
            tracker.commit()
        pos.n_steps += 1
        pos.t, pos.y, pos.k0 = t_new, y_new, k_last
        rec.commit(t_new, y_new, land, obs)
        if stop is not None:
            return 1, f"event at t = {t_new}: {stop}"
        after_step()
        bar.update(t_new)
    return None


def _resolve_method(method, adaptive):
    """The stepper of ``method`` and whether it runs with error control."""
    stepper = as_stepper(method)
    given = adaptive
    if adaptive is None:
        adaptive = stepper.adaptive
    else:
        try:
            adaptive = validate.boolean("adaptive", adaptive)       # 1, 0.0, "yes" refused (were accepted)
        except ValueError:
            adaptive = None                                         # refused below, with the allowed values
    if adaptive is None or (adaptive and not stepper.adaptive):
        _fail("adaptive", f"None, False, or True for the adaptive schemes {method_names(adaptive=True)}",
              f"{given!r} with method {stepper.name!r}", True)
    if not adaptive and stepper.adaptive and isinstance(stepper, ExplicitRK):
        stepper = ExplicitRK(replace(stepper.tableau, b_err=None, err_order=None))   # main weights only
    return stepper, adaptive


def _check_arguments(stepper, adaptive, rhs, y0, t_span, t_eval, dt, rtol, atol, dt_max, max_steps, retraction,
                     observe, event, checkpoint, checkpoint_every, linear):
    """Named ValueErrors for bad inputs; returns ``(y, t0, t1, t_eval, L)`` as the driver uses them."""
    if not (callable(rhs) or isinstance(rhs, Piecewise)):
        _fail("rhs", "a callable rhs(t, y) or a Piecewise", rhs)
    for name, fn in (("retraction", retraction), ("observe", observe), ("event", event)):
        if fn is not None and not callable(fn):
            _fail(name, "None or a callable", fn)
    y = np.array(y0, copy=True)
    if np.iscomplexobj(y):      # the models' states are real (a complex field is stored as re, im pairs)
        _fail("y0", "a real array (complex states: their re, im pairs, e.g. y.view(float))", f"complex values of "
              f"shape {y.shape}", True)
    if not np.issubdtype(y.dtype, np.inexact):
        y = y.astype(float) if np.issubdtype(y.dtype, np.number) else _fail("y0", "a numeric array", y0)
    if not np.all(np.isfinite(y)):
        _fail("y0", "a finite array", "an array containing NaN or inf", True)
    ts = validate.real_array("t_span", t_span, (2,))
    if not ts[1] > ts[0]:
        _fail("t_span", "a pair (t0, t1) of finite numbers with t1 > t0", t_span)
    t0, t1 = float(ts[0]), float(ts[1])
    t_eval = np.array([t0, t1]) if t_eval is None else validate.real_array("t_eval", t_eval, (None,))
    if t_eval.size == 0 or np.any(np.diff(t_eval) <= 0):
        _fail("t_eval", "a non-empty 1-d strictly increasing array", t_eval)
    if t_eval[0] < t0 or t_eval[-1] > t1:
        _fail("t_eval", f"inside t_span [{t0}, {t1}]", t_eval)
    if dt is None and not adaptive:
        _fail("dt", f"a positive number for the fixed-step method {stepper.name!r}", dt)
    if dt is not None:
        dt = validate.real("dt", dt, positive=True)
    validate.real("rtol", rtol, positive=True)
    validate.real("atol", atol, 0)
    validate.real("dt_max", dt_max, positive=True, finite=False)
    max_steps = validate.integer("max_steps", max_steps, 1)
    if not adaptive and (t1 - t0) / dt > max_steps:
        _fail("dt", f"at least (t1 - t0) / max_steps = {(t1 - t0) / max_steps:.3g} (fixed steps would need "
              f"{(t1 - t0) / dt:.3g} > max_steps = {max_steps} steps)", dt)
    if checkpoint is not None and not callable(checkpoint):
        _fail("checkpoint", "None or a callable checkpoint(state)", checkpoint)
    if checkpoint_every is not None:
        validate.real("checkpoint_every", checkpoint_every, positive=True)
    return y, t0, t1, t_eval, _check_linear(linear, y)
