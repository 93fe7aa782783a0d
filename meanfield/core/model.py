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
  split schemes of :data:`meanfield.core.methods.METHODS` treat exactly or implicitly.

:func:`missing` names the methods an object lacks for a protocol (for the error messages).  No imports
of ``meanfield``.
"""

from __future__ import annotations

from typing import Generic, Protocol, runtime_checkable

__all__ = ["Model", "TokenModel", "DensityModel", "ReducedDensityModel", "SplitModel", "missing"]


@runtime_checkable
class Model(Protocol):
    """A state ``y`` and its right-hand side ``y' = rhs(t, y)``."""

    def rhs(self, t, y): ...


@runtime_checkable
class TokenModel(Model, Protocol):
    """Tokens ``X`` (n, d) on the sphere: start checks and the retraction applied after every step."""

    def check(self, X, *args, **kwargs): ...

    @property
    def retraction(self): ...


@runtime_checkable
class DensityModel(Model, Protocol):
    """A density in a truncated basis: coefficients ``c`` <-> state vectors ``y``."""

    def state(self, c): ...

    def coefficients(self, y): ...

    def energies(self, c): ...

    def cfl_dt(self, c, cfl=0.5, scheme="rk4"): ...


@runtime_checkable
class ReducedDensityModel(DensityModel, Protocol):
    """A density model whose observer and resolution monitor read mass, entropy, tail and negative mass."""

    def mass(self, c): ...

    def entropy(self, c): ...

    def spectral_tail(self, c, fraction=2 / 3): ...

    def negative_mass(self, c): ...


@runtime_checkable
class SplitModel(Model, Protocol):
    """A model with a linear diagonal part: ``split() -> (L, rhs_nonlinear)``, ``y' = L y + rhs_nonlinear``."""

    def split(self): ...


def missing(obj, protocol) -> list[str]:
    """The members of ``protocol`` (and of the protocols it extends) that ``obj`` lacks."""
    names = {n for base in protocol.__mro__ if base not in (object, Protocol, Generic)
             for n in vars(base) if not n.startswith("_")}
    return sorted(n for n in names if not hasattr(obj, n))
