"""One entry point over the model protocol: ``solve(model, start, t_final, ...)``.

The model says how it is solved (:class:`~meanfield.core.model.SolvableModel`): ``model.plan(start, t_final, ...)``
checks the start, resolves the method, the tolerances and the step, gives its split part or refuses a split
scheme, draws its noise and refuses a run above its cost limits, all before anything runs
(:mod:`meanfield.models.plans`).  :func:`solve` adds what is measured along the run, which lives in the analysis
layer above the models, and hands everything to the one driver, :func:`meanfield.core.integrate.integrate`:

* a :class:`~meanfield.ParticleSystem`: its ``plan`` (tokens, weights, noise, the method, the whole-run cost); the
  particle diagnostics (:func:`meanfield.analysis.diagnostics.observer`, their direct passes counted in the cost);
* a :class:`~meanfield.ContinuumPDE`: its ``plan`` (mass 1, the CFL step, the split part); the field diagnostics
  and the resolution monitor;
* the circle, the axisymmetric S^{d-1} or any ``ReducedDensityModel``: its ``plan`` (or
  :func:`~meanfield.models.plans.reduced_plan` for a model of one's own); the reduced observer and the resolution
  monitor;
* any other :class:`~meanfield.core.model.SolvableModel` (:class:`~meanfield.models.causal.CausalSystem`): its
  ``plan``, and its own ``observer()`` where it has one (one velocity a record, counted in the cost);
* any other ``TokenModel`` (``BatchedSystem``): its ``check`` and ``retraction``, no observer;
* any other ``Model`` (``rhs(t, y)``): the state as given, the driver's own options.

``solve_particles``, ``solve_continuum`` and ``solve_reduced`` are names of :func:`solve` that also check the
model's type.
"""

from __future__ import annotations

import inspect
from dataclasses import replace

import numpy as np

from ..analysis import diagnostics, field_diagnostics
from ..analysis.axisymmetric import reduced_observer, reduced_resolution_monitor
from ..core import validate
from ..core.integrate import Trajectory, integrate
from ..core.model import Model, ReducedDensityModel, SolvableModel, TokenModel, missing
from ..core.options import Monitor, SaveAt, option
from ..models.continuum import ContinuumPDE
from ..models.particles import ParticleSystem
from ..models.plans import reduced_plan

__all__ = ["solve"]


_MOVED = {"tail_tol": "a field of monitor: monitor=Monitor(tail_tol=...)",
          "negative_tol": "a field of monitor: monitor=Monitor(negative_tol=...)",
          "threshold": "a setting of the default observer: save=SaveAt(observe={'threshold': ...})",
          "progress_label": "part of progress (a label is shown): progress='label'"}
"""The options of 0.2 that joined an option object (issue 32, item 1), and where they are now."""


def _monitor(model, monitor):
    """The resolution monitor's settings for ``model`` (a :class:`~meanfield.core.options.Monitor`, or None for
    none): None or True give the defaults on the density models, False none; given to a model without a
    resolution monitor (anything but True/False/None/Monitor refused), it is refused by name, never dropped."""
    if not (monitor is None or isinstance(monitor, (bool, np.bool_, Monitor))):
        raise ValueError(f"monitor must be None, True, False or a meanfield.Monitor(tail_tol, negative_tol); "
                         f"received {monitor!r}")
    if not isinstance(model, (ContinuumPDE, ReducedDensityModel)):
        if monitor is not None:
            raise ValueError(f"solve: monitor applies to the models with a resolution monitor (ContinuumPDE, "
                             f"CirclePDE, AxisymmetricPDE, a ReducedDensityModel); received monitor={monitor!r} "
                             f"for {type(model).__name__}")
        return None
    if isinstance(monitor, Monitor):
        return monitor
    return Monitor() if monitor is None or bool(monitor) else None


def _progress(progress):
    """``(show, label)`` of solve's ``progress``: None, a boolean, or a label (shown)."""
    if isinstance(progress, str):
        if not progress.strip():
            raise ValueError(f"progress must be None, True, False or a non-empty label; received {progress!r}")
        return True, progress
    if progress is not None:
        validate.boolean("progress", progress)
    return progress, None


def _takes(fn, name):
    """Whether ``fn`` accepts the keyword ``name``."""
    params = inspect.signature(fn).parameters
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _measures(model, settings, monitor):
    """The analysis layer's default observer (``settings``: its keyword settings), the direct passes of one of its
    records (for the model's cost estimate) and the resolution monitor of ``model``: ``(observer, passes,
    event)``."""
    if isinstance(model, ParticleSystem):
        unknown = sorted(set(settings) - {"threshold"})
        if unknown:
            raise ValueError(f"save.observe: the particles' default observer takes the setting 'threshold' (its "
                             f"clustering threshold); received {unknown}")
        threshold = settings.get("threshold", 0.99)
        return (lambda w: diagnostics.observer(model, w, threshold)), \
            (lambda n, w: diagnostics.observer_passes(model, n, w)), None
    if settings:
        raise ValueError(f"save.observe: the default observer of {type(model).__name__} takes no settings; "
                         f"received {sorted(settings)}")
    if isinstance(model, ContinuumPDE):
        event = None if monitor is None else field_diagnostics.field_resolution_monitor(model, monitor.tail_tol,
                                                                                          monitor.negative_tol)
        return (lambda w: field_diagnostics.field_observer(model)), 0, event
    if isinstance(model, ReducedDensityModel):
        event = None if monitor is None else reduced_resolution_monitor(model, monitor.tail_tol, monitor.negative_tol)
        return (lambda w: reduced_observer(model)), 0, event
    if isinstance(model, SolvableModel) and callable(getattr(model, "observer", None)):
        return (lambda w: model.observer()), 1, None      # the model's own (CausalSystem: one velocity a record)
    return None, 0, None


def _first_of(a, b):
    """One stop hook of two (either may be None): the first message wins."""
    if a is None or b is None:
        return b if a is None else a
    return lambda t, y: a(t, y) or b(t, y)


_SET_BY_SOLVE = ("method", "step", "t_eval", "record_passes")   # plan arguments solve sets itself


def _check_options(plan, options):
    """Options that ``plan`` does not take are refused by name, with the ones it takes."""
    params = inspect.signature(plan).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    allowed = sorted(k for k, p in params.items() if p.kind is p.KEYWORD_ONLY and k not in _SET_BY_SOLVE)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"solve: unknown option(s) {unknown} for {type(plan.__self__).__name__}; the model's run "
                         f"options are {allowed}, and solve's own: method, step, save, checkpointing, monitor, "
                         f"progress, event, events")


@validate.moved(**_MOVED)
def solve(model, start, t_final, *, method=None, step=None, save=None, checkpointing=None, monitor=None,
          progress=None, event=None, events=(), **options) -> Trajectory:
    """Evolve ``model`` from ``start`` (tokens or coefficients) to ``t_final`` (module docstring).

    Parameters
    ----------
    model : Model
        A :class:`~meanfield.ParticleSystem`, :class:`~meanfield.ContinuumPDE`, a reduced density model
        (:class:`~meanfield.CirclePDE`, :class:`~meanfield.AxisymmetricPDE`), any
        :class:`~meanfield.core.model.SolvableModel`, or any object with ``rhs(t, y)``.
    start : array_like
        Tokens (n, d) for a token model, coefficients for a density model (a real state vector for a bare
        ``Model``).
    t_final : float
        End time; the run covers ``[0, t_final]``.
    method : str, Tableau or Stepper, optional
        The scheme (None: the model's default: ``"dopri5"``, or ``"geodesic_strang"`` for noisy tokens; ``"rk4"``
        for a bare ``Model``).
    step : StepControl, optional
        Step settings (None: the model's default tolerances; particles ``rtol = 1e-8``, ``atol = 1e-10``,
        densities ``atol = 1e-12``).
    save : SaveAt, optional
        Output times (default 11 equispaced) and the observer: ``observe=True`` (the default) records the
        model's diagnostics (the list above); a dict, those diagnostics with these settings (particles:
        ``{"threshold": 0.95}``, the clustering threshold, default 0.99; the other models' take none); a callable
        its own; False none.
    checkpointing : Checkpointing, optional
        Saves and resume (:class:`~meanfield.core.options.Checkpointing`).
    monitor : bool or Monitor, optional
        Density models: stop (status 1, with the reason) once the truncation no longer resolves the density,
        with the tolerances of a :class:`~meanfield.core.options.Monitor` (None or True: ``Monitor()``, tails
        ``1e-3``, negative mass ``1e-4``; False: no monitor).  Refused by name for a model without one.
    progress : bool or str, optional
        Progress bar (None: only on a terminal) labelled by the model (``"particles"``, ``"PDE"``); a string
        shows it with that label.
    event : callable, optional
        ``event(t, y) -> None or str``: a string stops the run (status 1); checked after the model's resolution
        monitor.
    events : sequence of Event
        Root-located events of the driver.
    **options
        The model's own run options, passed to its ``plan``: particles ``w``, ``seed``, ``direct_limit_s``
        (:meth:`ParticleSystem.plan`); the continuum ``normalize`` (:meth:`ContinuumPDE.plan`).  A model without
        ``plan`` passes them to the driver (``retraction``, ``linear``, ``noise``).

    Returns
    -------
    Trajectory
        ``y``: tokens, or the density models' real state vectors (``model.coefficients(y)``).

    Raises
    ------
    ValueError
        ``model`` without ``rhs(t, y)`` (the message names what it lacks), an option the model does not take
        (its plan's options, ``monitor`` or observer settings given where they do not apply), and whatever the
        model's ``plan`` or the driver refuses (a bad start, a method that does not fit the model, a run above
        the cost limits).
    TypeError
        An option of 0.2 that joined an option object (``tail_tol``, ``negative_tol``, ``threshold``,
        ``progress_label``): the message says where it is now.
    """
    if not isinstance(model, Model):
        raise ValueError(f"model must implement rhs(t, y) (meanfield.core.model.Model); received "
                         f"{type(model).__name__}, missing {missing(model, Model)}")
    sv = option("save", save, SaveAt)
    show, label = _progress(progress)
    settings = sv.observe if isinstance(sv.observe, dict) else {}
    observer, passes, event_m = _measures(model, settings, _monitor(model, monitor))
    if isinstance(sv.observe, dict):
        sv = replace(sv, observe=True)                 # the default observer, with these settings (or none)
    if isinstance(model, SolvableModel) or isinstance(model, ReducedDensityModel):
        plan_of = model.plan if isinstance(model, SolvableModel) else (
            lambda start, t_final, **kw: reduced_plan(model, start, t_final, **kw))
        if isinstance(model, SolvableModel):
            _check_options(model.plan, options)
        if passes and sv.observe is True and _takes(plan_of, "record_passes"):   # a plan may not count records
            options["record_passes"] = passes
        plan = plan_of(start, t_final, method=method, step=step, t_eval=sv.t_eval, **options)
        if sv.observe is True:
            hook = None if observer is None else observer(plan.weights)
        else:
            hook = sv.observe or None
        return integrate(plan.rhs, plan.y0, (0.0, float(t_final)), method=plan.method, step=plan.step,
                         save=replace(sv, t_eval=plan.t_eval, observe=hook), checkpointing=checkpointing,
                         retraction=plan.retraction, event=_first_of(event_m, event), events=events, linear=plan.linear,
                         noise=plan.noise, progress=show, progress_label=plan.label if label is None else label)
    t_final = validate.real("t_final", t_final, positive=True)
    y0 = model.check(start) if isinstance(model, TokenModel) else start
    if isinstance(model, TokenModel):
        options.setdefault("retraction", model.retraction)
    return integrate(model.rhs, y0, (0.0, t_final), method="rk4" if method is None else method, step=step,
                     save=sv, checkpointing=checkpointing, event=event, events=events, progress=show,
                     progress_label=label, **options)   # a bare model: the driver's own options
