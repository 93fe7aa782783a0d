r"""Stochastic time stepping for tokens with noise: Brownian motion on ``S^{d-1}`` (or in ``R^d``).

The SDE (MODEL.md section 3, "Token noise on the particle side"), in Ito form for tokens on the sphere,

.. math:: dx_i = v_i\,dt - \nu (d - 1)\, x_i\,dt + \sqrt{2\nu}\,(I - x_i x_i^T)\, dW_i,

i.e. ``dx = v dt`` plus Brownian motion of generator ``nu Lap_S``; in flat geometry
``dx = v dt + sqrt(2 nu) dW``.  Without drift ``E <x(t), x(0)> = exp(-nu (d - 1) t)``.

Schemes (the ``stochastic`` entries of :data:`meanfield.core.methods.METHODS`), each a function of the
Brownian increments of the two halves of the step (``dW`` of shape ``(2, *X.shape)``), so that coarse
and fine runs can share one path:

* ``"euler_maruyama"``: projected Euler-Maruyama with retraction
  ``x <- (x + dt v + sqrt(2 nu) P_x dW) / | . |``; the retraction supplies the Ito drift
  ``-nu (d - 1) x dt``.  Strong order 1/2, weak order 1; one drift evaluation per step.
* ``"geodesic_strang"``: Strang splitting ``noise(dt/2) . drift(dt) . noise(dt/2)``: the drift by
  Heun's method (with retraction), each noise half-step a geodesic step
  ``x <- Exp_x(sqrt(2 nu c(h)) P_x dW_half)`` with ``c(h) = 1 - nu (d - 2) h / 3``, the factor that
  makes the second and fourth moments of the geodesic angle match the heat kernel's to ``O(h^3)``
  (the plain geodesic random walk, ``c = 1``, is weak order 1 except on the circle).  Strong order
  1/2, weak order 2; two drift evaluations per step.  Flat: the noise halves are exact.

Step-size range: a step is refused when ``nu (d - 2) dt / 6 >= 1`` (``c(dt/2) <= 0``: the
geodesic scheme is undefined) and warned about (:class:`NoiseStepWarning`) beyond
:func:`noise_dt_bound` ``= 0.5 / (nu (d - 1))``, where the noise moves a token by about a radian
per step and no asymptotic order holds.

:class:`EulerMaruyama` and :class:`GeodesicStrang` are steppers of the one driver
:func:`meanfield.core.integrate.integrate` (``stochastic`` is True; their names are in
:data:`meanfield.core.methods.METHODS`): ``integrate(drift, X0, t_span, method="geodesic_strang",
step=StepControl(dt=dt), noise=Noise(nu, seed, geometry))``.  The driver owns the random generator made
from ``Noise.seed``, draws each step's increments from it (:meth:`StochasticStepper.increments`) and
keeps its state in the checkpoint, so a resumed run equals an uninterrupted one bit for bit.  Numpy
only (and the :class:`~meanfield.core.steppers.Stepper` interface).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from . import validate
from .choices import GEOMETRIES
from .steppers import Stepper
from .tableaux import SCHEMES

__all__ = ["Noise", "StochasticStepper", "EulerMaruyama", "GeodesicStrang", "NoiseStepWarning", "noise_dt_bound",
           "sde_step", "brownian_increments", "geodesic_noise", "check_noise_step"]


class NoiseStepWarning(UserWarning):
    """A fixed step beyond the noise scheme's documented range (:func:`noise_dt_bound`)."""


@dataclass(frozen=True, eq=False)
class Noise:
    """The noise of a stochastic run of :func:`meanfield.core.integrate.integrate`.

    Attributes
    ----------
    nu : float >= 0
        Noise strength: Brownian motion of generator ``nu Lap_S`` (``sqrt(2 nu) dW`` in flat geometry).
    seed : None, int >= 0 or numpy.random.Generator
        The Brownian increments: an integer makes the run reproducible bit for bit; a Generator is
        advanced by the run (numpy's convention).
    geometry : {"sphere", "flat"}

    Raises
    ------
    ValueError
        ``nu`` negative or not finite, an unknown ``geometry``, or a ``seed`` that is not None, an integer
        ``>= 0`` or a Generator.
    """

    nu: float
    seed: object = None
    geometry: str = "sphere"

    def __post_init__(self):
        object.__setattr__(self, "nu", validate.real("nu", self.nu, 0.0))
        object.__setattr__(self, "geometry", validate.choice("geometry", self.geometry, GEOMETRIES))
        if self.seed is not None and not isinstance(self.seed, np.random.Generator):
            validate.rng(self.seed)                      # refuse a bad seed here (an integer draws nothing)

    def generator(self) -> np.random.Generator:
        """The generator of ``seed`` (the Generator itself when one was given).

        Returns
        -------
        numpy.random.Generator
            A new one for None (fresh entropy) or an integer, the given one otherwise.

        Raises
        ------
        ValueError
            An invalid ``seed`` (refused already by the constructor).
        """
        return validate.rng(self.seed)

    @property
    def settings(self) -> dict:
        """What a checkpoint of a run with this noise must match to be resumed."""
        return {"nu": float(self.nu), "geometry": self.geometry}


def noise_dt_bound(nu, d) -> float:
    """Largest step of the documented range, ``0.5 / (nu (d - 1))`` (inf without noise).

    Parameters
    ----------
    nu : float
        Noise strength, ``>= 0``.
    d : int
        Ambient dimension, ``>= 2``.

    Returns
    -------
    float
    """
    return np.inf if nu == 0 else 0.5 / (nu * (d - 1))


def _retract(X):
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def _project(X, V):
    return V - np.einsum("...d,...d->...", V, X)[..., None] * X


def geodesic_noise(X, dW, nu, h):
    r"""One geodesic noise step of size ``h`` on the sphere: ``Exp_x(sqrt(2 nu c) P_x dW)``.

    ``c = 1 - nu (d - 2) h / 3`` (see the module docstring); rows of ``X`` (n, d) are unit vectors,
    ``dW`` (n, d) Brownian increments over ``h``.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Unit vectors (not checked).
    dW : ndarray, shape (n, d)
        Brownian increments over ``h``.
    nu : float
        Noise strength.
    h : float
        Step size.

    Returns
    -------
    ndarray, shape (n, d)
        Unit vectors.
    """
    d = X.shape[-1]
    c = 1.0 - nu * (d - 2) * h / 3.0
    xi = np.sqrt(2.0 * nu * c) * _project(X, dW)
    theta = np.linalg.norm(xi, axis=-1, keepdims=True)
    sinc = np.where(theta > 0, np.sin(theta) / np.where(theta > 0, theta, 1.0), 1.0)
    return _retract(np.cos(theta) * X + sinc * xi)     # the retraction only removes round-off


class StochasticStepper(Stepper):
    """A fixed-step scheme of the noisy token dynamics (``stochastic`` is True).

    :meth:`step` takes the Brownian increments ``dW`` of the two halves of the step (shape
    ``(2, *y.shape)``, drawn by the driver with :meth:`increments`) and the run's :class:`Noise`.
    ``order`` is the strong order; ``weak_order`` and ``n_drift`` (drift evaluations per step) are
    declared too.  The retraction onto the sphere is part of each scheme.
    """

    weak_order: int
    n_drift: int

    @property
    def stochastic(self) -> bool:
        return True

    @property
    def strong_order(self) -> float:
        return self.order

    def increments(self, rng, shape, dt):
        """The step's Brownian increments, drawn from ``rng`` (:func:`brownian_increments`).

        Parameters
        ----------
        rng : numpy.random.Generator
            The run's generator (advanced).
        shape : tuple of int
            The state's shape.
        dt : float
            The step.

        Returns
        -------
        ndarray, shape (2, \\*shape)
        """
        return brownian_increments(rng, shape, dt)


@dataclass(frozen=True, eq=False)
class EulerMaruyama(StochasticStepper):
    """Projected Euler-Maruyama with retraction (see the module docstring); Euler for the drift.

    Parameters
    ----------
    name : str
        The scheme's name in :data:`meanfield.core.methods.METHODS`.
    order : float
        Strong order (1/2).
    weak_order : int
        Weak order (1).
    n_drift : int
        Drift evaluations per step (1).
    """

    name: str = "euler_maruyama"
    order: float = 0.5
    weak_order: int = 1
    n_drift: int = 1

    @property
    def explicit_tableau(self):
        return SCHEMES["euler"]

    def step(self, rhs, t, y, dt, k0=None, linear=None, *, dW, noise):
        s = np.sqrt(2.0 * noise.nu)
        dWs = dW[0] + dW[1]
        if noise.geometry == "sphere":
            return _retract(y + dt * rhs(t, y) + s * _project(y, dWs)), None, None
        return y + dt * rhs(t, y) + s * dWs, None, None


@dataclass(frozen=True, eq=False)
class GeodesicStrang(StochasticStepper):
    """Strang splitting noise(dt/2) . Heun drift(dt) . noise(dt/2) (see the module docstring).

    Parameters
    ----------
    name : str
        The scheme's name in :data:`meanfield.core.methods.METHODS`.
    order : float
        Strong order (1/2).
    weak_order : int
        Weak order (2).
    n_drift : int
        Drift evaluations per step (2).
    """

    name: str = "geodesic_strang"
    order: float = 0.5
    weak_order: int = 2
    n_drift: int = 2

    @property
    def explicit_tableau(self):
        return SCHEMES["heun"]

    def step(self, rhs, t, y, dt, k0=None, linear=None, *, dW, noise):
        nu, s, h = noise.nu, np.sqrt(2.0 * noise.nu), 0.5 * dt
        sphere = noise.geometry == "sphere"
        Y = geodesic_noise(y, dW[0], nu, h) if sphere else y + s * dW[0]
        k1 = rhs(t, Y)
        Z = Y + dt * k1
        Y = Y + 0.5 * dt * (k1 + rhs(t + dt, Z))
        if sphere:
            Y = _retract(Y)
        return (geodesic_noise(Y, dW[1], nu, h) if sphere else Y + s * dW[1]), None, None


STOCHASTIC_STEPPERS = (EulerMaruyama(), GeodesicStrang())
"""The stochastic steppers (their names are entries of :data:`meanfield.core.methods.METHODS`)."""


def sde_step(scheme, drift, t, X, dt, dW, nu, geometry="sphere"):
    """One step of the stochastic scheme named ``scheme`` from ``(t, X)`` with the increments ``dW``.

    Parameters
    ----------
    drift : callable ``drift(t, X) -> ndarray`` of the shape of ``X`` (tangent on the sphere)
    X : ndarray, shape (n, d)
    dt : float
    dW : ndarray, shape (2, n, d)
        Brownian increments over the two halves ``[t, t + dt/2]``, ``[t + dt/2, t + dt]``.
    nu : float
    geometry : {"sphere", "flat"}

    Returns
    -------
    X_new : ndarray, shape (n, d)

    Raises
    ------
    ValueError
        An unknown ``scheme`` (allowed: ``"euler_maruyama"``, ``"geodesic_strang"``), a negative ``nu`` or an
        unknown ``geometry``.
    """
    for stepper in STOCHASTIC_STEPPERS:
        if stepper.name == scheme:
            return stepper.step(drift, t, X, dt, dW=dW, noise=Noise(nu, None, geometry))[0]
    raise ValueError(f"scheme must be one of {[s.name for s in STOCHASTIC_STEPPERS]}; received {scheme!r}")


def brownian_increments(rng, shape, dt):
    """Increments over the two halves of a step: ``sqrt(dt/2) N(0, 1)`` of shape ``(2, *shape)``.

    Parameters
    ----------
    rng : numpy.random.Generator
        The source (advanced).
    shape : tuple of int
        The state's shape.
    dt : float
        The step, ``>= 0``.

    Returns
    -------
    ndarray, shape (2, \\*shape)
    """
    return np.sqrt(0.5 * dt) * rng.standard_normal((2,) + tuple(shape))


def generator_from_state(state):
    """A Generator continuing the stream of a ``bit_generator.state`` dict (as a checkpoint holds it)."""
    bitgen = getattr(np.random, state["bit_generator"])()
    bitgen.state = state
    return np.random.Generator(bitgen)


def check_noise_step(nu, d, dt, scheme, geometry="sphere"):
    """Refuse (``ValueError``) or warn (:class:`NoiseStepWarning`) a step outside the scheme's range.

    Parameters
    ----------
    nu : float
        Noise strength (0: nothing is checked).
    d : int
        Ambient dimension.
    dt : float
        The fixed step.
    scheme : str
        The stochastic scheme's name.
    geometry : {"sphere", "flat"}
        Flat geometry is checked as ``d = 2``.

    Raises
    ------
    ValueError
        ``"geodesic_strang"`` on the sphere with ``nu (d - 2) dt / 6 >= 1``.

    Warns
    -----
    NoiseStepWarning
        ``dt`` above :func:`noise_dt_bound`.
    """
    if nu == 0:
        return
    if geometry == "sphere" and scheme == "geodesic_strang" and nu * (d - 2) * dt / 6.0 >= 1.0:
        raise ValueError(f"dt must be < 6 / (nu (d - 2)) = {6.0 / (nu * (d - 2)):.4g} for the scheme "
                         f"'geodesic_strang' (nu = {nu}, d = {d}); received {dt!r}")
    bound = noise_dt_bound(nu, d if geometry == "sphere" else 2)
    if dt > bound:
        warnings.warn(f"dt = {dt:.4g} exceeds the documented range dt <= 0.5 / (nu (d - 1)) = {bound:.4g} of the "
                      f"noise scheme {scheme!r}: no order of accuracy holds there", NoiseStepWarning, stacklevel=3)
