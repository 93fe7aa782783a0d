"""How each model is solved: the :class:`~meanfield.core.model.RunPlan` builders behind the models' ``plan`` methods.

:func:`meanfield.solve` asks the model for a plan (:class:`~meanfield.core.model.SolvableModel`) and hands it to
the one driver, :func:`meanfield.core.integrate.integrate`.  The rules live here, one function per kind of model,
and each model's ``plan`` method calls its row:

======================  ==========================================================================================
builder                 what it resolves and checks
======================  ==========================================================================================
:func:`particle_plan`   tokens and weights; ``dopri5``, or ``geodesic_strang`` with noise (``dt`` required); the
                        noise of ``seed``; the retraction; the memory guard and the whole-run time estimate
                        (:func:`check_particle_run`); default tolerances ``rtol = 1e-8``, ``atol = 1e-10``
:func:`token_plan`      tokens of another token model with a whole-run estimate, ``model.check_run(n, nfev,
                        records, steps=, limit_s=)`` (:class:`~meanfield.models.causal.CausalSystem`); ``dopri5``;
                        the retraction; split and stochastic schemes refused by name
:func:`density_plan`    a state of mass 1; the model's CFL step for a fixed-step scheme; the split part for a
                        split scheme, refused by name on a model without one; default tolerances
                        ``rtol = 1e-8``, ``atol = 1e-12``
======================  ==========================================================================================

Nothing here measures the run: the observers and resolution monitors are chosen by :func:`meanfield.solve` from the
analysis layer, above the models.
"""

from __future__ import annotations

import inspect
from dataclasses import replace

import numpy as np

from ..core import validate
from ..core.cost import guard
from ..core.integrate import estimate_nfev
from ..core.methods import as_stepper, method_names
from ..core.model import RunPlan, SplitModel
from ..core.options import StepControl, option
from ..core.sde import Noise

__all__ = ["particle_plan", "token_plan", "density_plan", "reduced_plan", "ReducedPlans", "check_particle_run", "output_times",
           "RUN_BYTES_PER_TOKEN"]

RUN_BYTES_PER_TOKEN = 600
"""Peak bytes per token of a particle run beyond its saved frames and per-head aggregates (``8 d`` bytes each):
the integrator's stages, the noise and the sums' per-token arrays.  Measured (peak resident memory over a
0.2-time run saving 3 frames, d = 3, spectral sums, n = 2e5 and 8e5): 380 to 480 bytes per token for zonal
heads with and without noise, 420 to 520 for the paper's two general heads, the 3 saved frames (72 bytes)
included."""


def output_times(t_final, t_eval):
    """The output times of a run: ``t_eval``, or 11 equispaced times in ``[0, t_final]``.

    Parameters
    ----------
    t_final : float
        End time.
    t_eval : array_like or None
        Output times.

    Returns
    -------
    numpy.ndarray
    """
    return np.linspace(0.0, t_final, 11) if t_eval is None else np.asarray(t_eval, dtype=float)


def check_particle_run(system, n, t_final, *, direct_limit_s, t_eval=None, method=None, dt=None, record_passes=0,
                       adaptive=None):
    """The up-front checks of a particle run without running it; returns the resolved method.

    ``method`` None resolves to ``"dopri5"`` (no noise) or ``"geodesic_strang"`` (``system.nu > 0``); a noisy run
    needs ``dt``.  The run's memory is guarded (:data:`RUN_BYTES_PER_TOKEN` and the saved frames) and its time
    estimated (:meth:`ParticleSystem.check_direct_run`: right-hand sides counted by
    :func:`meanfield.core.integrate.estimate_nfev`, plus ``record_passes`` direct passes per output time).
    :func:`meanfield.paired.paired_run` and :func:`meanfield.workflow.ramp.noise_ramp` call it before their own
    work, so a refused particle run costs nothing.

    Parameters
    ----------
    system : ParticleSystem
        The model.
    n : int
        Tokens (>= 1).
    t_final : float
        End time (positive, finite).
    t_eval : array_like, optional
        Output times (None: 11 equispaced).
    method : str, Tableau or Stepper, optional
        The scheme (None: the default above).
    dt : float, optional
        Fixed step (required with noise).
    record_passes : int
        Direct O(n^2) passes of one observer record (:func:`meanfield.analysis.diagnostics.observer_passes`).
    direct_limit_s : float
        Seconds allowed (``inf``: no limit; the models' default is
        :data:`meanfield.models.particles.DIRECT_RUN_LIMIT_S`).
    adaptive : bool, optional
        ``StepControl.adaptive`` of the run.

    Returns
    -------
    str, Tableau or Stepper
        The resolved method.

    Raises
    ------
    ValueError
        ``n``, ``t_final`` or ``direct_limit_s`` out of range, a method that does not fit the noise, a noisy run
        without ``dt``, or a run above the memory guard or the time limit (named, with what to change).
    """
    n = validate.integer("n", n, 1)
    if not hasattr(system, "check_direct_run"):
        raise ValueError(f"system must be a meanfield.ParticleSystem; received {type(system).__name__}")
    t_final = validate.real("t_final", t_final, positive=True)
    direct_limit_s = validate.real("direct_limit_s", direct_limit_s, positive=True, finite=False)
    times = output_times(t_final, t_eval)
    per_token = RUN_BYTES_PER_TOKEN + 8.0 * system.d * (np.size(times) + system.n_heads)
    guard(f"solve_particles with n = {n} tokens in d = {system.d}, {np.size(times)} saved times",
          bytes=float(n) * per_token, fix="fewer tokens or fewer saved times (save=SaveAt(t_eval=...); in a config: "
          "particles.n, integrator.n_frames)",
          detail=f"{per_token:.0f} bytes per token: the integrator's stages and sums, "
                 f"{np.size(times)} saved frames of (n, {system.d}) float64")
    stochastic = method is not None and as_stepper(method).stochastic
    if system.nu > 0 or stochastic:
        method = "geodesic_strang" if method is None else method
        if not stochastic and method != "geodesic_strang":
            raise ValueError(f"method must be one of {method_names(stochastic=True)} (or None) for tokens with "
                             f"noise (nu = {system.nu}); received {method!r}")
        if dt is None:
            raise ValueError(f"dt must be a positive number for the stochastic scheme {method!r}; received None")
        steps = estimate_nfev("euler", (0.0, float(t_final)), dt=dt, t_eval=times)["steps"]   # the same grid
        system.check_direct_run(n, steps * as_stepper(method).n_drift, np.size(times), record_passes,
                                limit_s=direct_limit_s, how=f" ({steps} steps of {method})", steps=steps)
        return method
    method = "dopri5" if method is None else method
    est = estimate_nfev(method, (0.0, float(t_final)), dt=dt, t_eval=times, adaptive=adaptive)
    # every run is estimated: direct sums, spectral sums (O(n) a token and evaluation) and the steps' overhead
    name = getattr(method, "name", method)
    system.check_direct_run(n, est["nfev"], np.size(times), record_passes, lower_bound=est["lower_bound"],
                            limit_s=direct_limit_s, steps=est["steps"],
                            how=f" ({'at least one step per output interval, ' if est['lower_bound'] else ''}"
                                f"{est['steps']} steps of {name})")
    return method


def particle_plan(system, X0, t_final, *, direct_limit_s, method=None, step=None, t_eval=None, w=None, seed=None,
                  record_passes=0):
    """The run of a :class:`~meanfield.models.particles.ParticleSystem` from tokens ``X0`` (its ``plan``).

    Parameters
    ----------
    system : ParticleSystem
        The model.
    X0 : array_like, shape (n, d)
        Start tokens (unit rows on the sphere).
    t_final : float
        End time.
    method, step, t_eval
        See :meth:`meanfield.core.model.SolvableModel.plan`; ``step`` defaults ``rtol = 1e-8``, ``atol = 1e-10``.
    w : array_like, optional
        Token weights (None: uniform).
    seed : int or numpy.random.Generator, optional
        Brownian increments of a noisy run (``Noise(system.nu, seed, system.geometry)``).
    record_passes : int or callable
        Direct passes of one observer record, or ``record_passes(n, w) -> int``.
    direct_limit_s : float
        Time limit of the run's estimate (:func:`check_particle_run`).

    Returns
    -------
    RunPlan

    Raises
    ------
    ValueError
        Bad tokens or weights (named ``X0``, ``w``), or what :func:`check_particle_run` refuses.
    """
    t_final = validate.real("t_final", t_final, positive=True)
    direct_limit_s = validate.real("direct_limit_s", direct_limit_s, positive=True, finite=False)
    sc = option("step", step, StepControl).with_defaults(1e-8, 1e-10)
    X0, w = system.check(X0, w, name="X0")
    rhs = system.rhs if w is None or np.all(w == w[0]) else system.weighted_rhs(w)
    times = output_times(t_final, t_eval)
    n = X0.shape[0]
    passes = record_passes(n, w) if callable(record_passes) else record_passes
    method = check_particle_run(system, n, t_final, t_eval=times, method=method, dt=sc.dt, record_passes=passes,
                                direct_limit_s=direct_limit_s, adaptive=sc.adaptive)
    stochastic = as_stepper(method).stochastic
    return RunPlan(rhs, X0, method, sc, times, label="particles", weights=w,
                   noise=Noise(system.nu, seed, system.geometry) if stochastic else None,
                   retraction=None if stochastic else system.retraction)


def token_plan(model, start, t_final, *, limit_s, method=None, step=None, t_eval=None, record_passes=0,
               label=None):
    """The run of a token model with a whole-run estimate (``check``, ``retraction``, ``check_run``), its ``plan``.

    The tokens are checked (``model.check(start, name="X0")``), the method resolved (None: ``"dopri5"``; split and
    stochastic schemes are refused by name: such a model has neither a linear part nor noise), the right-hand
    sides counted by :func:`meanfield.core.integrate.estimate_nfev` and the run refused above ``limit_s`` by
    ``model.check_run(n, nfev, records, steps=..., limit_s=...)`` before anything runs.

    Parameters
    ----------
    model : TokenModel
        With ``check_run``.
    start : array_like, shape (n, d)
        Start tokens.
    t_final : float
        End time.
    limit_s : float
        Seconds allowed (``inf``: no limit).
    method, step, t_eval
        See :meth:`meanfield.core.model.SolvableModel.plan`; ``step`` defaults ``rtol = 1e-8``, ``atol = 1e-10``.
    record_passes : int
        Right-hand-side evaluations of one observer record (records: one per output time).
    label : str, optional
        The progress bar's label.

    Returns
    -------
    RunPlan
        With the model's estimate (``model.check_run``'s return) in ``estimate``.

    Raises
    ------
    ValueError
        Bad tokens, ``t_final``, a split or stochastic scheme, or a run above ``limit_s``.
    """
    t_final = validate.real("t_final", t_final, positive=True)
    limit_s = validate.real("direct_limit_s", limit_s, positive=True, finite=False)   # the name solve takes
    sc = option("step", step, StepControl).with_defaults(1e-8, 1e-10)
    X0 = model.check(start, name="X0")
    method = "dopri5" if method is None else method
    stepper = as_stepper(method)
    if stepper.split or stepper.stochastic:
        raise ValueError(f"method must be an explicit scheme for {type(model).__name__}, one of "
                         f"{method_names(split=False, stochastic=False)} (it has no split part and no noise); "
                         f"received {method!r}")
    times = output_times(t_final, t_eval)
    est = estimate_nfev(method, (0.0, float(t_final)), dt=sc.dt, t_eval=times, adaptive=sc.adaptive)
    estimate = model.check_run(X0.shape[0], est["nfev"], int(record_passes) * np.size(times), steps=est["steps"],
                               limit_s=limit_s)
    return RunPlan(model.rhs, X0, method, sc, times, label=label, retraction=model.retraction, estimate=estimate)


def density_plan(model, y0, c0, t_final, *, method=None, step=None, t_eval=None, label="PDE"):
    """The run of a density model from the state ``y0`` (coefficients ``c0``), checked by the caller's model.

    A fixed-step scheme without ``step.dt`` takes the model's CFL step ``model.cfl_dt(c0, cfl, scheme)``
    (``step.cfl`` default 0.5) at the start.  A split scheme takes ``model.split()`` as its linear part; a model
    without one (:class:`~meanfield.core.model.SplitModel`) refuses it by name, where it would otherwise run as its
    explicit tableau with the diffusion explicit.

    Parameters
    ----------
    model : DensityModel
        The model (``cfl_dt``, and ``split`` where it has one).
    y0 : ndarray
        The start state vector.
    c0 : ndarray
        Its coefficients (for the CFL step).
    t_final : float
        End time (already checked).
    method, step, t_eval
        See :meth:`meanfield.core.model.SolvableModel.plan` (``method`` None: ``"dopri5"``); ``step`` defaults
        ``rtol = 1e-8``, ``atol = 1e-12``.
    label : str or None
        The progress bar's label (None: the driver's).

    Returns
    -------
    RunPlan

    Raises
    ------
    ValueError
        A split scheme on a model without a split part, or a bad ``step``.
    """
    sc = option("step", step, StepControl).with_defaults(1e-8, 1e-12)
    method = "dopri5" if method is None else method
    stepper = as_stepper(method)
    linear, rhs = None, model.rhs
    if stepper.split:
        if not isinstance(model, SplitModel):   # it would silently run as its explicit tableau
            raise ValueError(f"method must be an explicit scheme for {type(model).__name__}, one of "
                             f"{method_names(split=False, stochastic=False)}: {type(model).__name__} has no split "
                             f"part (its diffusion is in the right-hand side); received the split scheme {method!r}")
        linear, rhs = model.split()        # the diffusion as the split scheme's linear part (implicit / exact)
    dt = sc.dt
    if (sc.adaptive is False or not stepper.adaptive) and dt is None:
        cfl = 0.5 if sc.cfl is None else sc.cfl
        # the scheme's own stability reach where the model's rule takes one (a rule of cfl alone otherwise)
        takes_scheme = len(inspect.signature(model.cfl_dt).parameters) >= 3
        dt = model.cfl_dt(c0, cfl, stepper) if takes_scheme else model.cfl_dt(c0, cfl)
    return RunPlan(rhs, y0, method, replace(sc, dt=dt, cfl=None), output_times(t_final, t_eval), label=label,
                   linear=linear)


def reduced_plan(model, start, t_final, *, method=None, step=None, t_eval=None):
    """The run of a reduced density model (circle, axisymmetric S^{d-1}, or any
    :class:`~meanfield.core.model.ReducedDensityModel`) from coefficients ``start`` (their ``plan``).

    The start is the model's state of ``start`` (its own checks, the error prefixed with ``c0``) and must have
    mass 1 relative to the normalized measure; then :func:`density_plan`.

    Parameters
    ----------
    model : ReducedDensityModel
        The model.
    start : array_like
        Coefficients (``model.uniform()``-shaped).
    t_final : float
        End time.
    method, step, t_eval
        See :func:`density_plan`.

    Returns
    -------
    RunPlan

    Raises
    ------
    ValueError
        ``t_final`` not positive and finite, coefficients the model refuses or of mass other than 1, or what
        :func:`density_plan` refuses.
    """
    t_final = validate.real("t_final", t_final, positive=True)
    try:
        y0 = model.state(start)
    except ValueError as err:                           # the model names its own argument (c, b): say which one
        raise ValueError(f"c0 (the initial coefficients): {err}") from None
    c0 = model.coefficients(y0)
    validate.unit_mass("c0", model.mass(c0))
    return density_plan(model, y0, c0, t_final, method=method, step=step, t_eval=t_eval, label=None)


class ReducedPlans:
    """The ``plan`` method of the reduced density models (:class:`~meanfield.models.circle.CirclePDE`,
    :class:`~meanfield.models.axisymmetric.AxisymmetricPDE`): one definition, :func:`reduced_plan`."""

    def plan(self, start, t_final, *, method=None, step=None, t_eval=None):
        """The driver's arguments for a run from coefficients ``start`` (:class:`~meanfield.core.model.SolvableModel`).

        :func:`meanfield.models.plans.reduced_plan`: a start of mass 1, ``"dopri5"`` by default, tolerances
        ``rtol = 1e-8``, ``atol = 1e-12`` unless given, the CFL step (:meth:`cfl_dt`) of a fixed-step scheme; a split
        scheme is refused by name (no split part: the diffusion is in :meth:`rhs`).

        Parameters
        ----------
        start : array_like
            Coefficients (named ``c0`` in errors).
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
            What :func:`~meanfield.models.plans.reduced_plan` refuses.
        """
        return reduced_plan(self, start, t_final, method=method, step=step, t_eval=t_eval)
