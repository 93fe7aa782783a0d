"""What the driver and the solvers need of a model, as structural protocols (``typing.Protocol``).

A model is anything with the methods below; no base class is needed and the solvers check the
capability, not the type:

* :class:`Model`: ``rhs(t, y)``, the right-hand side of its state (every model here);
* :class:`TokenModel`: tokens on the sphere, ``check(X)`` (start checks) and ``retraction``
  (:class:`~meanfield.models.particles.ParticleSystem`, :class:`~meanfield.models.batched.BatchedSystem`);
* :class:`DensityModel`: a density in a truncated basis, ``state(c)`` / ``coefficients(y)`` (density
  <-> state), ``energies(c)`` and ``cfl_dt(c, cfl, scheme)`` (:class:`~meanfield.models.continuum.ContinuumPDE`,
  :class:`~meanfield.models.circle.CirclePDE`, :class:`~meanfield.models.axisymmetric.AxisymmetricPDE`);
* :class:`ReducedDensityModel`: a density model with ``mass``, ``entropy``, ``spectral_tail`` and
  ``negative_mass`` of coefficients, what :func:`meanfield.solve_reduced`'s observer and resolution
  monitor read (the circle and axisymmetric PDEs, or a model of one's own);
* :class:`SplitModel`: an optional linear diagonal part, ``split() -> (L, rhs_nonlinear)``, which the
  split schemes of :data:`meanfield.core.methods.METHODS` treat exactly or implicitly;
* :class:`SolvableModel`: a model that says how it is solved, ``plan(start, t_final, ...) -> RunPlan``: its
  start checked (and its measure convention: mass 1, unit tokens), its default method and tolerances, its
  step-size rule (the CFL step of a fixed-step scheme), its split part or the refusal of a split scheme, its
  noise, and its run checks and cost estimate, refused before anything runs.  :func:`meanfield.solve` is one
  loop over it (every model of the package implements it); what is *measured* along the run (the observer,
  the resolution monitor) lives in the analysis layer above the models and is chosen there.

:func:`missing` names the methods an object lacks for a protocol (for the error messages).  No imports
of ``meanfield``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, runtime_checkable

__all__ = ["Model", "TokenModel", "DensityModel", "ReducedDensityModel", "SplitModel", "SolvableModel", "RunPlan",
           "missing"]


@dataclass(frozen=True)
class RunPlan:
    """What a model hands the one driver for a run: the arguments of :func:`meanfield.core.integrate.integrate`
    resolved and checked by the model (:meth:`SolvableModel.plan`).

    Parameters
    ----------
    rhs : callable
        ``rhs(t, y)``: the right-hand side to integrate (the nonlinear part when ``linear`` is given).
    y0 : ndarray
        The checked start state.
    method : str, Tableau or Stepper
        The resolved scheme (a model's default where the caller gave None).
    step : StepControl
        Step settings with the model's default tolerances, and ``dt`` resolved where the scheme steps at a fixed
        size (the model's step-size rule).
    t_eval : ndarray
        Output times.
    label : str
        The progress bar's label.
    linear : ndarray, optional
        The diagonal linear part of a split scheme (the model's split part).
    retraction : callable, optional
        Applied after every accepted step (tokens onto the sphere).
    noise : Noise, optional
        The Brownian increments of a stochastic scheme.
    weights : ndarray, optional
        Checked token weights (None: uniform), for the observer.
    estimate : object, optional
        The model's cost estimate of the run where the plan keeps it (:class:`~meanfield.models.causal.CausalSystem`:
        a :class:`meanfield.core.cost.Cost`).
    """

    rhs: Any
    y0: Any
    method: Any
    step: Any
    t_eval: Any
    label: str = "solve"
    linear: Any = None
    retraction: Any = None
    noise: Any = None
    weights: Any = None
    estimate: Any = None


@runtime_checkable
class Model(Protocol):
    """A state ``y`` and its right-hand side ``y' = rhs(t, y)``."""

    def rhs(self, t, y):
        """The right-hand side.

        Parameters
        ----------
        t : float
            Time.
        y : ndarray
            The state.

        Returns
        -------
        ndarray
            ``y'``, of the shape of ``y``.
        """
        ...


@runtime_checkable
class TokenModel(Model, Protocol):
    """Tokens ``X`` (n, d) on the sphere: start checks and the retraction applied after every step."""

    def check(self, X, *args, **kwargs):
        """Tokens validated as a start of this model.

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens.
        *args, **kwargs
            The model's own options.

        Returns
        -------
        ndarray, shape (n, d)
        """
        ...

    @property
    def retraction(self): ...


@runtime_checkable
class DensityModel(Model, Protocol):
    """A density in a truncated basis: coefficients ``c`` <-> state vectors ``y``."""

    def state(self, c):
        """The state vector of coefficients ``c``.

        Parameters
        ----------
        c : array_like
            Coefficients.

        Returns
        -------
        ndarray
        """
        ...

    def coefficients(self, y):
        """The coefficients of a state vector ``y``.

        Parameters
        ----------
        y : ndarray
            A state vector.

        Returns
        -------
        ndarray
        """
        ...

    def energies(self, c):
        """Per-head energies.

        Parameters
        ----------
        c : array_like
            Coefficients.

        Returns
        -------
        ndarray, shape (H,)
        """
        ...

    def cfl_dt(self, c, cfl=0.5, scheme="rk4"):
        """A stable fixed step of ``scheme``.

        Parameters
        ----------
        c : array_like
            Coefficients.
        cfl : float
            Safety factor.
        scheme : str, Tableau or Stepper
            A ``method`` of :func:`meanfield.core.integrate.integrate`.

        Returns
        -------
        float
        """
        ...


@runtime_checkable
class ReducedDensityModel(DensityModel, Protocol):
    """A density model whose observer and resolution monitor read mass, entropy, tail and negative mass."""

    def mass(self, c):
        """The mass of the density.

        Parameters
        ----------
        c : array_like
            Coefficients.

        Returns
        -------
        float
        """
        ...

    def entropy(self, c):
        """The entropy of the density (NaN where it is not positive).

        Parameters
        ----------
        c : array_like
            Coefficients.

        Returns
        -------
        float
        """
        ...

    def spectral_tail(self, c, fraction=2 / 3):
        """Relative L2 size of the modes above ``fraction`` of the truncation.

        Parameters
        ----------
        c : array_like
            Coefficients.
        fraction : float
            Where the tail starts, relative to the truncation.

        Returns
        -------
        float
        """
        ...

    def negative_mass(self, c):
        """The mass of the density's negative part (``>= 0``).

        Parameters
        ----------
        c : array_like
            Coefficients.

        Returns
        -------
        float
        """
        ...


@runtime_checkable
class SplitModel(Model, Protocol):
    """A model with a linear diagonal part: ``split() -> (L, rhs_nonlinear)``, ``y' = L y + rhs_nonlinear``."""

    def split(self): ...


@runtime_checkable
class SolvableModel(Model, Protocol):
    """A model that resolves and checks its own runs: ``plan(start, t_final, ...) -> RunPlan``."""

    def plan(self, start, t_final, *, method=None, step=None, t_eval=None, **options):
        """The driver's arguments for a run of this model, checked (the start, the method, the cost).

        Parameters
        ----------
        start : array_like
            Tokens or coefficients, as the model takes them.
        t_final : float
            End time (positive, finite).
        method : str, Tableau or Stepper, optional
            The scheme (None: the model's default).
        step : StepControl, optional
            Step settings (None: the model's defaults).
        t_eval : array_like, optional
            Output times (None: 11 equispaced times in ``[0, t_final]``).
        **options
            The model's own run options.

        Returns
        -------
        RunPlan

        Raises
        ------
        ValueError
            A start, method, step or option the model refuses, or a run above its cost limits.
        """
        ...


def missing(obj, protocol) -> list[str]:
    """The members of ``protocol`` (and of the protocols it extends) that ``obj`` lacks.

    Parameters
    ----------
    obj : object
        Any object.
    protocol : type
        One of this module's protocols.

    Returns
    -------
    list of str
        The missing public member names, sorted.
    """
    names = {n for base in protocol.__mro__ if base not in (object, Protocol, Generic)
             for n in vars(base) if not n.startswith("_")}
    return sorted(n for n in names if not hasattr(obj, n))
