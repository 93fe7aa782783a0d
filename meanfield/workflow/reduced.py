"""Driver for the reduced PDEs (the circle and axisymmetric S^{d-1}): integrator + observer + resolution monitor.

:func:`solve_reduced` is :func:`meanfield.solve_continuum` for :class:`~meanfield.models.circle.CirclePDE` and
:class:`~meanfield.models.axisymmetric.AxisymmetricPDE`: it checks the start (finite, mass 1), wires
:func:`meanfield.analysis.axisymmetric.reduced_observer` and
:func:`~meanfield.analysis.axisymmetric.reduced_resolution_monitor`
into :func:`meanfield.core.integrate.integrate` (checkpoints and resume pass through) and returns its
:class:`~meanfield.core.integrate.Trajectory`; ``Trajectory.y`` holds state vectors, ``pde.coefficients(y)`` the
coefficients.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..analysis.axisymmetric import reduced_observer, reduced_resolution_monitor
from ..core import validate
from ..core.integrate import integrate
from ..core.methods import as_stepper, method_names
from ..core.model import ReducedDensityModel, missing
from ..core.options import SaveAt, StepControl, option

__all__ = ["solve_reduced"]


def solve_reduced(pde, c0, t_final, *, method="dopri5", step=None, save=None, checkpointing=None, monitor=True,
                  tail_tol=1e-3, negative_tol=1e-4, **kw):
    """Evolve a circle or axisymmetric PDE from coefficients ``c0`` to ``t_final``.

    Parameters
    ----------
    pde : CirclePDE, AxisymmetricPDE or any :class:`~meanfield.core.model.ReducedDensityModel`
    c0 : ndarray
        Coefficients (``pde.uniform()``-shaped) of a density of mass 1 (relative to the normalized measure).
    t_final : float
    method, step
        Integrator settings (:class:`~meanfield.core.options.StepControl`, default ``rtol=1e-8``,
        ``atol=1e-12``); a fixed-step method without ``step.dt`` takes ``pde.cfl_dt(c0, step.cfl)``
        (``cfl`` default 0.5).
    save, checkpointing
        :class:`~meanfield.core.options.SaveAt` (default 11 equispaced times; ``observe=True``: mass, energy,
        energy_head, boltzmann_entropy, negative_mass, spectral_tail) and
        :class:`~meanfield.core.options.Checkpointing`.
    monitor : bool
        Stop (status 1, with the reason) once the truncation no longer resolves the density.
    """
    if not isinstance(pde, ReducedDensityModel):        # the capability, not a closed list of types
        raise ValueError(f"pde must be a CirclePDE or an AxisymmetricPDE (any model implementing "
                         f"meanfield.core.model.ReducedDensityModel); received {type(pde).__name__}, missing "
                         f"{missing(pde, ReducedDensityModel)}")
    t_final = validate.real("t_final", t_final, positive=True)
    try:
        y0 = pde.state(c0)
    except ValueError as err:                           # the model names its own argument (c, b): say which one
        raise ValueError(f"c0 (the initial coefficients): {err}") from None
    mass = pde.mass(pde.coefficients(y0))
    validate.unit_mass("c0", mass)
    sc = option("step", step, StepControl).with_defaults(1e-8, 1e-12)
    sv = option("save", save, SaveAt)
    dt, t_eval, observe = sc.dt, sv.t_eval, sv.observe
    cfl = 0.5 if sc.cfl is None else sc.cfl
    stepper = as_stepper(method)
    if stepper.split:          # the reduced models have no split part: the scheme would silently run explicitly
        raise ValueError(f"method must be an explicit scheme for {type(pde).__name__}, one of "
                         f"{method_names(split=False, stochastic=False)}: the reduced models have no split part "
                         f"(their diffusion is in the right-hand side); received the split scheme {method!r}")
    if (sc.adaptive is False or not stepper.adaptive) and dt is None:
        dt = pde.cfl_dt(pde.coefficients(y0), cfl, stepper)
    t_eval = np.linspace(0.0, t_final, 11) if t_eval is None else t_eval
    hook = reduced_observer(pde) if observe is True else (observe or None)
    event = reduced_resolution_monitor(pde, tail_tol, negative_tol) if monitor else None
    return integrate(pde.rhs, y0, (0.0, t_final), method=method, step=replace(sc, dt=dt, cfl=None),
                     save=replace(sv, t_eval=t_eval, observe=hook), checkpointing=checkpointing, event=event, **kw)
