r"""The update rules of real transformers as discrete maps, and their continuous-time limits.

A layer of step ``dt`` acting on tokens with the attention field ``u(x) = sum_h u^h(x)`` (the
unprojected sums of :class:`~meanfield.models.batched.BatchedSystem` or of any object with a
``field(X)`` method and a leading batch axis) is one of (``normalize`` divides each row by its norm,
``P_x u = u - <u, x> x``):

``"projected_euler"``
    ``x <- normalize(x + dt P_x u(x))``: explicit Euler with retraction for the projected ODE
    ``x' = P_x u(x)`` (what :func:`meanfield.core.integrate.integrate` does with ``method="euler"``).  Order 1.
``"post_ln"``
    ``x <- normalize(x + dt u(x))`` (post-LayerNorm, the step of borjanG/2023-transformers-rotf).
    ``x + dt u = (1 + dt <x, u>) (x + dt P_x u / (1 + dt <x, u>))``: after normalization it is the
    Euler step of the same projected ODE with the clock slowed by ``1 + dt <x, u>``; limit
    ``x' = P_x u(x)`` at order 1.
``"ngpt"``
    ``x <- normalize(x + dt (normalize(u(x)) - x))`` (nGPT's normalized step with step size
    ``alpha = dt``).  Limit ``x' = P_x (u / |u|)``: the projected ODE of the unit-length field, at
    order 1 (the speed of every token is ``|P_x u| / |u| <= 1``).
``"pre_ln"``
    ``z <- z + dt u(z / |z|)`` on the unnormalized residual stream ``z`` (pre-LayerNorm); the state
    is ``z = r x`` with a radius ``r`` per token.  Limit ``z' = u(z/|z|)``, i.e. ``x' = P_x u(x) / r``
    and ``r' = <x, u(x)>`` (the projected ODE with the clock slowed by the growing radius), at order 1.
``"peri_ln"``
    ``z <- z + dt normalize(u(z / |z|))`` (peri-LN: the block's output normalized as well).  Limit
    ``z' = u/|u|`` at ``x = z/|z|``, at order 1.

:func:`iterate` runs a rule (every token set of a batch at once) through the one driver
:func:`meanfield.core.integrate.integrate`: a rule is the fixed-step method :class:`StepRule` whose step
is the rule's update and whose right-hand side is the attention field.  :func:`limit_rhs` is the
right-hand side of the rule's continuous-time limit, for :func:`meanfield.core.integrate.integrate`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import cost, validate
from ..core.integrate import Trajectory, integrate
from ..core.options import SaveAt, StepControl
from ..core.steppers import Stepper
from ..core.tableaux import SCHEMES
from .batched import BatchedSystem, estimate_batched, project_tangent_batched, retract_batched

__all__ = ["STEP_RULES", "RADIAL_RULES", "StepRule", "step", "iterate", "limit_rhs", "directions", "check_state"]

STEP_RULES = ("post_ln", "projected_euler", "ngpt", "pre_ln", "peri_ln")
"""The discrete maps of this module (``rule``)."""

RADIAL_RULES = ("pre_ln", "peri_ln")
"""Rules whose state is the unnormalized stream ``z = r x`` (a radius per token)."""


def _unit(U):
    norm = np.linalg.norm(U, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norm > 0, U / np.where(norm > 0, norm, 1.0), 0.0)    # u = 0: no direction, no move


def directions(y, rule):
    """The tokens on the sphere of a state ``y`` (B, n, d) of ``rule`` (``z / |z|`` for the radial rules);
    ``y`` must be finite and real (nonzero rows for the radial rules).

    Parameters
    ----------
    y : array_like, shape (B, n, d)
        A state of ``rule``.
    rule : str
        One of :data:`STEP_RULES`.

    Returns
    -------
    ndarray, shape (B, n, d)
        Unit rows (``y`` itself for the sphere rules).

    Raises
    ------
    ValueError
        An unknown ``rule``, ``y`` not real and finite of shape (B, n, d), or a zero row for a radial rule.
    """
    validate.choice("rule", rule, STEP_RULES)
    y = validate.real_array("y", y, ("B", "n", "d"))
    if rule in RADIAL_RULES and not np.all(np.einsum("...d,...d->...", y, y) > 0):
        raise ValueError(f"y rows must be nonzero for rule {rule!r} (the state z = r x has a radius r > 0 per token); "
                         f"received a zero row")
    return _directions(y, rule)


def _directions(y, rule):
    return retract_batched(y) if rule in RADIAL_RULES else y


def _check_system(system, scheduled_ok=True):
    """Refuse a ``system`` without the methods the rules call (``field``, ``check``) by name."""
    if not (callable(getattr(system, "check", None)) and (callable(getattr(system, "field", None))
                                                          or (scheduled_ok and callable(getattr(system, "at", None))))):
        raise ValueError(f"system must be a BatchedSystem or ScheduledSystem (an object with field(X) and check(X)); "
                         f"received {type(system).__name__}")
    return system


def check_state(system, y, rule, name="y"):
    """A state ``y`` (B, n, d) of ``rule`` for ``system``, validated (never renormalized).

    The sphere rules need unit rows on a spherical system (``system.check``); the radial rules
    (:data:`RADIAL_RULES`) need finite rows ``z = r x`` with ``r > 0`` whose directions ``system.check`` accepts.

    Parameters
    ----------
    system : BatchedSystem
        The system (its ``check``).
    y : array_like, shape (B, n, d)
        The state.
    rule : str
        One of :data:`STEP_RULES`.
    name : str
        The state's name in the messages.

    Returns
    -------
    ndarray, shape (B, n, d)

    Raises
    ------
    ValueError
        An unknown ``rule``, a state ``system.check`` refuses, or (radial rules) a zero row.
    """
    validate.choice("rule", rule, STEP_RULES)
    if rule not in RADIAL_RULES:
        return system.check(y, name)
    y = validate.real_array(name, y, ("B", "n", "d"))
    r = np.linalg.norm(y, axis=-1)
    if not np.all(r > 0):
        raise ValueError(f"{name} rows must be nonzero for rule {rule!r} (the state z = r x has a radius r > 0 per "
                         f"token); received {int(np.sum(~(r > 0)))} zero rows")
    system.check(y / r[..., None], name)
    return y


def step(system, y, dt, rule="post_ln"):
    """One layer of ``rule`` with step ``dt`` from state ``y`` (B, n, d); returns the new state.

    ``dt`` must be a positive finite number (a layer moves forward); ``y`` is checked by :func:`check_state`
    (unit tokens for the sphere rules, nonzero rows for the radial ones; never renormalized).

    Parameters
    ----------
    system : BatchedSystem
        An object with ``field(X)`` and ``check(X)``.
    y : array_like, shape (B, n, d)
        The state.
    dt : float
        Step, ``> 0``.
    rule : str
        One of :data:`STEP_RULES`.

    Returns
    -------
    ndarray, shape (B, n, d)

    Raises
    ------
    ValueError
        An unknown ``rule``, a ``dt`` that is not positive and finite, a ``system`` without ``field`` and
        ``check``, or a state :func:`check_state` refuses.
    """
    validate.choice("rule", rule, STEP_RULES)
    dt = validate.real("dt", dt, positive=True)
    _check_system(system, scheduled_ok=False)
    return _update(system.field, check_state(system, y, rule), dt, rule)


def _update(field, y, dt, rule):
    """The rule's map ``y -> y_new`` with the attention field ``field(x)`` of tokens on the sphere."""
    if rule in RADIAL_RULES:
        x = retract_batched(y)
        u = field(x)
        return y + dt * (_unit(u) if rule == "peri_ln" else u)
    u = field(y)
    if rule == "post_ln":
        return retract_batched(y + dt * u)
    if rule == "projected_euler":
        return retract_batched(y + dt * project_tangent_batched(y, u))
    return retract_batched(y + dt * (_unit(u) - y))          # ngpt


@dataclass(frozen=True, eq=False)
class StepRule(Stepper):
    """A step rule as a fixed-step method of :func:`meanfield.core.integrate.integrate`.

    The right-hand side the driver hands it is the attention field ``rhs(t, x)`` of tokens ``x`` on
    the sphere (one evaluation per step, at the step's start); :meth:`step` applies the rule's update
    (its own normalization included).  ``order`` 1: the order of every rule's continuous-time limit.
    ``layer_dt``, when given, is the step every layer takes (the driver's step ``t_new - t`` on the
    grid ``k dt`` equals it up to rounding; a layer is one update of exactly ``dt``).

    Parameters
    ----------
    name : str
        The rule, one of :data:`STEP_RULES`.
    order : int
        1.
    layer_dt : float, optional
        The step of every layer, ``> 0``.

    Raises
    ------
    ValueError
        An unknown rule, an ``order`` other than 1, or a ``layer_dt`` that is not positive and finite.
    """

    name: str = "post_ln"
    order: int = 1
    layer_dt: float | None = None

    def __post_init__(self):
        validate.choice("rule", self.name, STEP_RULES)
        validate.integer("order", self.order, 1, 1, what="1 (the order of every rule's continuous-time limit)")
        if self.layer_dt is not None:
            validate.real("layer_dt", self.layer_dt, positive=True)

    @property
    def reuses_k0(self) -> bool:
        return False

    @property
    def explicit_tableau(self):
        return SCHEMES["euler"]

    def step(self, rhs, t, y, dt, k0=None, linear=None):
        return _update(lambda x: rhs(t, x), y, dt if self.layer_dt is None else self.layer_dt, self.name), None, None


def limit_rhs(system, rule="post_ln"):
    """``rhs(t, y)`` of the continuous-time limit of ``rule`` (see the module docstring).

    Parameters
    ----------
    system : BatchedSystem
        An object with ``field(X, checked=True)`` and ``check(X)``.
    rule : str
        One of :data:`STEP_RULES`.

    Returns
    -------
    callable
        ``rhs(t, y) -> ndarray`` of the shape of ``y``.

    Raises
    ------
    ValueError
        An unknown ``rule``, or a ``system`` without ``field`` and ``check``.
    """
    validate.choice("rule", rule, STEP_RULES)
    _check_system(system, scheduled_ok=False)

    def rhs(t, y):
        if rule in RADIAL_RULES:
            u = system.field(retract_batched(y), checked=True)
            return _unit(u) if rule == "peri_ln" else u
        x = retract_batched(y)
        u = system.field(x, checked=True)
        return project_tangent_batched(x, _unit(u) if rule == "ngpt" else u)

    return rhs


ITERATE_BYTES_PER_RECORD = 700.0
"""Bytes of bookkeeping per recorded layer of :func:`iterate` beyond the states (time, index, the driver's
lists; measured with tracemalloc: 123 bytes without states, 672 beside (2, 4, 3) states, 20000 layers)."""


def estimate_iterate(system, shape, n_steps, every=1, save_states=True) -> cost.Cost:
    """Estimated peak memory and time of :func:`iterate` on tokens of ``shape`` (B, n, d) (sizes only).

    Memory: the saved states (twice: the list of records and the stacked array) and the per-record
    bookkeeping; time: per layer :data:`meanfield.core.cost.STEP_OVERHEAD_S` plus one field evaluation
    (:func:`~meanfield.models.batched.estimate_batched` for a direct :class:`BatchedSystem`; spectral sums
    and other systems count the overhead only).
    """
    B, n, d = shape
    records = n_steps // every + 2
    mem = records * (ITERATE_BYTES_PER_RECORD + (16.0 * B * n * d if save_states else 0.0))
    field = 0.0
    sys0 = system.system(0) if hasattr(system, "at") else system
    if isinstance(sys0, BatchedSystem) and sys0._spectral is None:
        field = estimate_batched(B, n, d, sys0.n_heads, causal=sys0.causal, solved=len(sys0._solved),
                                 chunk_bytes=sys0.chunk_bytes).seconds
    secs = n_steps * (cost.STEP_OVERHEAD_S + field)
    return cost.Cost(f"iterate(n_steps={n_steps}, every={every}, save_states={save_states}) on X0 of shape {shape}",
                     mem, secs, f"{records} records, {cost.time_text(cost.STEP_OVERHEAD_S + field)} per layer")


def iterate(system, X0, dt, n_steps, rule="post_ln", *, observe=None, every=1, save_states=True):
    """Run ``n_steps`` layers of ``rule`` from tokens ``X0`` (B, n, d) on the sphere.

    Parameters
    ----------
    system : BatchedSystem or ScheduledSystem
        A :class:`~meanfield.core.schedules.ScheduledSystem` uses the heads in force at the start of each
        layer, ``(k - 1) dt`` for layer ``k``.
    X0 : array_like, shape (B, n, d)
        Unit tokens (the radial rules start from radius 1).
    dt : float
        Step (layer) size; the clock advances by ``dt`` per layer.
    n_steps : int
    rule : str
        One of :data:`STEP_RULES`.
    observe : callable ``observe(t, x) -> dict``, optional
        Called with the tokens on the sphere (``directions``) at every recorded step.
    every : int
        Record every ``every`` steps (and the last one).
    save_states : bool

    Returns
    -------
    Trajectory
        ``y`` holds the rule's states (``z`` for the radial rules), ``method`` the rule, ``nfev`` the
        field evaluations (one per layer).  A non-finite state stops the run (status -1, the last
        finite state in ``y_final``), as in any run of the driver.

    Raises
    ------
    ValueError
        An unknown ``rule``, a ``dt`` that is not positive and finite, ``n_steps`` below 0, ``every`` below 1,
        a non-boolean ``save_states``, a non-callable ``observe``, a ``system`` without ``field``/``at`` and
        ``check``, tokens ``system.check`` refuses, or records above the memory or time limit.
    """
    rule = validate.choice("rule", rule, STEP_RULES)
    dt = validate.real("dt", dt, positive=True)
    n_steps = validate.integer("n_steps", n_steps, 0)
    every = validate.integer("every", every, 1)
    validate.boolean("save_states", save_states)
    if observe is not None and not callable(observe):
        raise ValueError(f"observe must be None or a callable observe(t, x) -> dict; received {observe!r}")
    y = _check_system(system).check(X0, "X0")
    estimate_iterate(system, y.shape, n_steps, every, save_states).check(
        "fewer n_steps, a larger every or save_states=False")              # before the records are laid out
    y = y.copy()
    hook = None if observe is None else (lambda t, y: observe(t, _directions(y, rule)))
    if n_steps == 0:                                     # nothing to step: the start alone
        obs = {} if hook is None else {k: np.asarray(v)[None] for k, v in hook(0.0, y).items()}
        return Trajectory(t=np.zeros(1), y=y[None].copy() if save_states else None, observables=obs, y_final=y,
                          t_final=0.0, status=0, message=f"0 layers of {rule}", method=rule, nfev=0, n_steps=0,
                          n_rejected=0, max_retraction=0.0)
    scheduled = hasattr(system, "at")                    # ScheduledSystem: the heads in force at the layer's start

    def field(t, x):
        return (system.at(t) if scheduled else system).field(x)

    ks = [k for k in range(n_steps + 1) if k % every == 0 or k == n_steps]
    return integrate(field, y, (0.0, n_steps * dt), method=StepRule(rule, layer_dt=dt),
                     step=StepControl(dt=dt, max_steps=n_steps + 1),
                     save=SaveAt(t_eval=[k * dt for k in ks], states=save_states, observe=hook), progress=False)
