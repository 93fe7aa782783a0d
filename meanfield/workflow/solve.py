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

from ..analysis import diagnostics, field_diagnostics
from ..analysis.axisymmetric import reduced_observer, reduced_resolution_monitor
from ..core import validate
from ..core.integrate import Trajectory, integrate
from ..core.model import Model, ReducedDensityModel, SolvableModel, TokenModel, missing
from ..core.options import SaveAt, option
from ..models.continuum import ContinuumPDE
from ..models.particles import ParticleSystem
from ..models.plans import reduced_plan

__all__ = ["solve"]


_DENSITY_OPTIONS = {"monitor": True, "tail_tol": 1e-3, "negative_tol": 1e-4}
_PARTICLE_OPTIONS = {"threshold": 0.99}


def _own_options(model, given):
    """Solve's own options resolved for ``model``: the density models' monitor settings and the particles'
    clustering threshold take their defaults where not given; given to a model that has no use for them, they are
    refused by name (never silently dropped)."""
    density = isinstance(model, (ContinuumPDE, ReducedDensityModel))
    particles = isinstance(model, ParticleSystem)
    for table, applies, what in ((_DENSITY_OPTIONS, density, "the models with a resolution monitor (ContinuumPDE, "
                                                               "CirclePDE, AxisymmetricPDE, a ReducedDensityModel)"),
                                 (_PARTICLE_OPTIONS, particles, "a ParticleSystem (its observer's clustering)")):
        for key in table:
            if given[key] is not None and not applies:
                raise ValueError(f"solve: {key} applies to {what}; received {key}={given[key]!r} for "
                                 f"{type(model).__name__}")
    return {k: (table[k] if given[k] is None else given[k])
            for table in (_DENSITY_OPTIONS, _PARTICLE_OPTIONS) for k in table}


def _takes(fn, name):
    """Whether ``fn`` accepts the keyword ``name``."""
    params = inspect.signature(fn).parameters
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _measures(model, threshold, monitor, tail_tol, negative_tol):
    """The analysis layer's default observer, the direct passes of one of its records (for the model's cost
    estimate) and the resolution monitor of ``model``: ``(observer, passes, event)``."""
    if isinstance(model, ParticleSystem):
        return (lambda w: diagnostics.observer(model, w, threshold)), \
            (lambda n, w: diagnostics.observer_passes(model, n, w)), None
    if isinstance(model, ContinuumPDE):
        event = field_diagnostics.field_resolution_monitor(model, tail_tol, negative_tol) if monitor else None
        return (lambda w: field_diagnostics.field_observer(model)), 0, event
    if isinstance(model, ReducedDensityModel):
        event = reduced_resolution_monitor(model, tail_tol, negative_tol) if monitor else None
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
                         f"tail_tol, negative_tol, threshold, progress, progress_label, event, events")


def solve(model, start, t_final, *, method=None, step=None, save=None, checkpointing=None, monitor=None,
          tail_tol=None, negative_tol=None, threshold=None, progress=None, progress_label=None, event=None,
          events=(), **options) -> Trajectory:
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
        model's diagnostics (the list above), a callable its own, False none.
    checkpointing : Checkpointing, optional
        Saves and resume (:class:`~meanfield.core.options.Checkpointing`).
    monitor : bool, optional
        Density models: stop (status 1, with the reason) once the truncation no longer resolves the density
        (None: True).
    tail_tol, negative_tol : float, optional
        Density models: the monitor's tolerances on the spectral tail and the negative mass (None: 1e-3, 1e-4).
    threshold : float, optional
        Particles: the clustering threshold of the default observer (None: 0.99).  These four are refused by name
        when given for a model they do not apply to.
    progress : bool, optional
        Progress bar (None: only on a terminal).
    progress_label : str, optional
        The bar's label (None: the model's: ``"particles"``, ``"PDE"``).
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
        (its plan's options, or ``monitor``/``tail_tol``/``negative_tol``/``threshold`` given where they do not apply),
        and whatever the model's ``plan`` or the driver refuses (a bad start, a method that does not fit the
        model, a run above the cost limits).
    """
    if not isinstance(model, Model):
        raise ValueError(f"model must implement rhs(t, y) (meanfield.core.model.Model); received "
                         f"{type(model).__name__}, missing {missing(model, Model)}")
    sv = option("save", save, SaveAt)
    own = _own_options(model, {"monitor": monitor, "tail_tol": tail_tol, "negative_tol": negative_tol,
                               "threshold": threshold})
    observer, passes, event_m = _measures(model, own["threshold"], own["monitor"], own["tail_tol"],
                                          own["negative_tol"])
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
                         noise=plan.noise, progress=progress,
                         progress_label=plan.label if progress_label is None else progress_label)
    t_final = validate.real("t_final", t_final, positive=True)
    y0 = model.check(start) if isinstance(model, TokenModel) else start
    if isinstance(model, TokenModel):
        options.setdefault("retraction", model.retraction)
    return integrate(model.rhs, y0, (0.0, t_final), method="rk4" if method is None else method, step=step,
                     save=sv, checkpointing=checkpointing, event=event, events=events, progress=progress,
                     progress_label=progress_label, **options)   # a bare model: the driver's own options
