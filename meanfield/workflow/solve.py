"""One entry point over the model protocols: ``solve(model, start, t_final, ...)``.

The solver is chosen by what the model can do (:mod:`meanfield.core.model`), first match wins:

============================================  ====================================================  ======================================
model                                         solver                                                its default observer
============================================  ====================================================  ======================================
a :class:`~meanfield.ParticleSystem`          :func:`~meanfield.workflow.simulate.solve_particles`  particle diagnostics
a :class:`~meanfield.ContinuumPDE`            :func:`~meanfield.workflow.simulate.solve_continuum`  field diagnostics, monitor
a ``ReducedDensityModel`` (circle, S^{d-1})   :func:`~meanfield.workflow.reduced.solve_reduced`     reduced observer, monitor
any other ``TokenModel`` (``BatchedSystem``)  :func:`~meanfield.core.integrate.integrate`           with its retraction, its start checked
any other ``Model`` (``rhs(t, y)``)           :func:`~meanfield.core.integrate.integrate`           none
============================================  ====================================================  ======================================

``solve_particles``, ``solve_continuum`` and ``solve_reduced`` stay as the names of their rows; every option
(``method``, ``step=StepControl``, ``save=SaveAt``, ``checkpointing=Checkpointing`` and the solver's own) is
passed on unchanged.
"""

from __future__ import annotations

from ..core import validate
from ..core.integrate import Trajectory, integrate
from ..core.model import Model, ReducedDensityModel, TokenModel, missing
from ..models.continuum import ContinuumPDE
from ..models.particles import ParticleSystem
from .reduced import solve_reduced
from .simulate import solve_continuum, solve_particles

__all__ = ["solve"]


def solve(model, start, t_final, **options) -> Trajectory:
    """Evolve ``model`` from ``start`` (tokens or coefficients) to ``t_final`` with the solver that fits it
    (module docstring); ``options`` go to that solver.

    Parameters
    ----------
    model : Model
        A :class:`~meanfield.ParticleSystem`, :class:`~meanfield.ContinuumPDE`, a reduced density model
        (:class:`~meanfield.CirclePDE`, :class:`~meanfield.AxisymmetricPDE`) or any object with ``rhs(t, y)``.
    start : array_like
        Tokens (n, d) for a token model, coefficients (or a real state vector) for a density model.
    t_final : float
        End time; the run covers ``[0, t_final]``.
    **options
        Passed on unchanged to the chosen solver (``method``, ``step``, ``save``, ``checkpointing``, ...).

    Returns
    -------
    Trajectory
        The chosen solver's.

    Raises
    ------
    ValueError
        ``model`` without ``rhs(t, y)`` (the message names what it lacks); for the generic rows a ``t_final``
        that is not positive and finite or a ``start`` the token model's ``check`` refuses; the chosen solver's
        own refusals otherwise.
    """
    if isinstance(model, ParticleSystem):
        return solve_particles(model, start, t_final, **options)
    if isinstance(model, ContinuumPDE):
        return solve_continuum(model, start, t_final, **options)
    if isinstance(model, ReducedDensityModel):
        return solve_reduced(model, start, t_final, **options)
    if not isinstance(model, Model):
        raise ValueError(f"model must implement rhs(t, y) (meanfield.core.model.Model); received "
                         f"{type(model).__name__}, missing {missing(model, Model)}")
    t_final = validate.real("t_final", t_final, positive=True)
    if isinstance(model, TokenModel):
        return integrate(model.rhs, model.check(start), (0.0, t_final), retraction=model.retraction, **options)
    return integrate(model.rhs, start, (0.0, t_final), **options)
