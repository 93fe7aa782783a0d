"""Driver for the reduced PDEs (the circle and axisymmetric S^{d-1}): :func:`solve_reduced`, the name of
:func:`meanfield.solve` for a :class:`~meanfield.core.model.ReducedDensityModel`.

The model checks its start (finite, mass 1) and resolves its run (:func:`meanfield.models.plans.reduced_plan`);
:func:`meanfield.solve` wires :func:`meanfield.analysis.axisymmetric.reduced_observer` and
:func:`~meanfield.analysis.axisymmetric.reduced_resolution_monitor` into :func:`meanfield.core.integrate.integrate`
(checkpoints and resume pass through) and returns its :class:`~meanfield.core.integrate.Trajectory`;
``Trajectory.y`` holds state vectors, ``pde.coefficients(y)`` the coefficients.
"""

from __future__ import annotations

from ..core.model import ReducedDensityModel, missing
from .solve import solve

__all__ = ["solve_reduced"]


def solve_reduced(pde, c0, t_final, *, method="dopri5", step=None, save=None, checkpointing=None, monitor=True,
                  **kw):
    """Evolve a circle or axisymmetric PDE from coefficients ``c0`` to ``t_final``.

    Parameters
    ----------
    pde : CirclePDE, AxisymmetricPDE or any :class:`~meanfield.core.model.ReducedDensityModel`
        The model.
    c0 : ndarray
        Coefficients (``pde.uniform()``-shaped) of a density of mass 1 (relative to the normalized measure).
    t_final : float
        End time.
    method : str, Tableau or Stepper
        An explicit scheme: the reduced models have no split part, a split scheme is refused by name.
    step : StepControl, optional
        Default ``rtol = 1e-8``, ``atol = 1e-12``; a fixed-step method without ``step.dt`` takes
        ``pde.cfl_dt(c0, step.cfl)`` (``cfl`` default 0.5).
    save : SaveAt, optional
        Default 11 equispaced times; ``observe=True``: mass, energy, energy_head, boltzmann_entropy,
        negative_mass, spectral_tail.
    checkpointing : Checkpointing, optional
        Saves and resume.
    monitor : bool or Monitor
        Stop (status 1, with the reason) once the truncation no longer resolves the density, with the tolerances
        of a :class:`~meanfield.core.options.Monitor` (True: ``Monitor()``; False: no monitor).
    **kw
        Further options of :func:`meanfield.solve` (``progress``, ``event``, ``events``).

    Returns
    -------
    Trajectory
        ``y``: state vectors (``pde.coefficients(y)``: the coefficients).

    Raises
    ------
    ValueError
        ``pde`` lacking a method of the protocol (named), and what its plan, the monitor or the driver refuses.
    """
    if not isinstance(pde, ReducedDensityModel):        # the capability, not a closed list of types
        raise ValueError(f"pde must be a CirclePDE or an AxisymmetricPDE (any model implementing "
                         f"meanfield.core.model.ReducedDensityModel); received {type(pde).__name__}, missing "
                         f"{missing(pde, ReducedDensityModel)}")
    return solve(pde, c0, t_final, method=method, step=step, save=save, checkpointing=checkpointing,
                 monitor=monitor, **kw)
