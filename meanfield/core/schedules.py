"""Heads that change with time: a piecewise-constant schedule ``[(t_start, heads), ...]`` (depth-dependent layers).

On ``[t_k, t_{k+1})`` the heads are ``heads_k`` (the last entry holds to any later time).  A
schedule is integrated segment by segment (:func:`integrate_schedule`): one system per entry, built
by a ``make_system(heads)`` factory (``ParticleSystem``, ``BatchedSystem``, ``ContinuumPDE`` for
zonal schedules, ...), one :func:`meanfield.core.integrate.integrate` run over a piecewise right-hand
side whose breakpoints the driver steps onto, each piece started from the state the previous one
reached, so that no Runge-Kutta step straddles a switch.  The discrete step
rules (:func:`meanfield.models.step_rules.iterate`) take a :class:`ScheduledSystem` and use the heads
in force at the start of each layer.

Random layers: :func:`random_layers` redraws :func:`~meanfield.core.random_heads.random_heads` for
every layer (the peer's ``--regen_period``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import cost, validate
from .heads import Head, check_heads
from .integrate import Piecewise, Trajectory, integrate
from .random_heads import estimate_random_heads, random_heads

__all__ = ["HeadSchedule", "ScheduledSystem", "random_layers", "integrate_schedule"]


def _check_entry_heads(i, heads):
    name = f"schedule[{i}] heads"
    if isinstance(heads, Head) or (isinstance(heads, (tuple, list)) and heads and isinstance(heads[0], Head)):
        return check_heads(heads)
    if isinstance(heads, (tuple, list)) and heads and all(isinstance(h, (tuple, list)) for h in heads):
        return [check_heads(h) for h in heads]                    # per-system heads (BatchedSystem)
    raise ValueError(f"{name} must be a sequence of Head or a list of per-system sequences of Head; "
                     f"received {heads!r}")


@dataclass(frozen=True, eq=False)
class HeadSchedule:
    """A sorted list of ``(t_start, heads)``: the heads in force from ``t_start`` to the next start.

    Parameters
    ----------
    entries : sequence of (float, heads)
        Start times strictly increasing (no two layers start together, none out of order); heads a
        sequence of :class:`~meanfield.core.heads.Head` or per-system sequences.

    Raises
    ------
    ValueError
        Not a non-empty sequence of pairs, start times that are not finite or not strictly increasing,
        heads that are neither a sequence of Head nor per-system sequences (or refused by
        :func:`~meanfield.core.heads.check_heads`), or entries of different dimensions.
    """

    entries: tuple

    def __post_init__(self):
        try:
            entries = tuple(tuple(e) for e in self.entries)
        except TypeError:
            entries = None
        if not entries or any(len(e) != 2 for e in entries):
            raise ValueError(f"schedule must be a non-empty sequence of (t_start, heads) pairs; received "
                             f"{self.entries!r}")
        starts = [validate.real(f"schedule[{i}] t_start", e[0]) for i, e in enumerate(entries)]
        for i in range(1, len(starts)):
            if starts[i] <= starts[i - 1]:
                kind = "overlapping (equal)" if starts[i] == starts[i - 1] else "unsorted"
                raise ValueError(f"schedule start times must be strictly increasing (allowed: t_0 < t_1 < ...); "
                                 f"received {kind} times schedule[{i - 1}] t_start = {starts[i - 1]} and "
                                 f"schedule[{i}] t_start = {starts[i]}")
        heads = [_check_entry_heads(i, e[1]) for i, e in enumerate(entries)]
        dims = [(h[0] if isinstance(h[0], Head) else h[0][0]).dim for h in heads]
        for i, dim in enumerate(dims):
            if dim != dims[0]:                  # one token dimension through every layer
                raise ValueError(f"schedule[{i}] heads must have dimension d = {dims[0]} like schedule[0] heads "
                                 f"(the tokens keep their dimension across layers); received d = {dim}")
        object.__setattr__(self, "entries", tuple(zip(starts, heads)))

    @property
    def starts(self) -> np.ndarray:
        return np.array([e[0] for e in self.entries])

    @property
    def zonal(self) -> bool:
        """Every head of every entry is zonal (``M = V = lambda I``): a schedule the continuum PDE accepts."""
        def flat(h):
            return h if isinstance(h[0], Head) else [x for hs in h for x in hs]
        return all(x.is_zonal for _, h in self.entries for x in flat(h))

    def index_at(self, t) -> int:
        """Index of the entry in force at time ``t`` (``t >= t_0``).

        Parameters
        ----------
        t : float
            A time, at or after the first start.

        Returns
        -------
        int

        Raises
        ------
        ValueError
            ``t`` not finite or before the first start.
        """
        t = validate.real("t", t)
        if t < self.entries[0][0]:
            raise ValueError(f"t must be >= the schedule's first start {self.entries[0][0]}; received {t}")
        return int(np.searchsorted(self.starts, t, side="right") - 1)

    def heads_at(self, t):
        """The heads in force at time ``t``.

        Parameters
        ----------
        t : float
            A time, at or after the first start.

        Returns
        -------
        tuple of Head or list of tuples of Head
            The entry's heads (per system for a batched schedule).

        Raises
        ------
        ValueError
            As for :meth:`index_at`.
        """
        return self.entries[self.index_at(t)][1]

    def segments(self, t0, t1):
        """``[(a, b, index), ...]`` covering ``[t0, t1]``, cut at the start times inside it.

        Parameters
        ----------
        t0, t1 : float
            The span; ``t0`` at or after the first start.

        Returns
        -------
        list of (float, float, int)

        Raises
        ------
        ValueError
            ``t0`` before the first start (:meth:`index_at`).
        """
        cuts = [s for s in self.starts if t0 < s < t1]
        bounds = [t0] + cuts + [t1]
        return [(a, b, self.index_at(a)) for a, b in zip(bounds[:-1], bounds[1:])]


@dataclass(frozen=True, eq=False)
class ScheduledSystem:
    """A schedule with one system per entry (``make_system(heads)``, built on first use).

    Parameters
    ----------
    schedule : HeadSchedule
        The entries.
    make_system : callable
        ``make_system(heads) -> system`` (a model with ``rhs``; ``check`` and ``retraction`` when it has them).

    Raises
    ------
    ValueError
        ``schedule`` not a :class:`HeadSchedule`, or ``make_system`` not callable.
    """

    schedule: HeadSchedule
    make_system: object

    def __post_init__(self):
        if not isinstance(self.schedule, HeadSchedule):
            raise ValueError(f"schedule must be a HeadSchedule; received {type(self.schedule).__name__}")
        if not callable(self.make_system):
            raise ValueError(f"make_system must be a callable heads -> system; received {self.make_system!r}")
        object.__setattr__(self, "_systems", {})

    def system(self, index):
        """The system of entry ``index`` (built by ``make_system`` on first use, then kept).

        Parameters
        ----------
        index : int
            An entry's index.

        Returns
        -------
        object
            What ``make_system`` returned.
        """
        if index not in self._systems:
            self._systems[index] = self.make_system(self.schedule.entries[index][1])
        return self._systems[index]

    def at(self, t):
        """The system in force at time ``t``.

        Parameters
        ----------
        t : float
            A time, at or after the first start.

        Returns
        -------
        object
            :meth:`system` of the entry in force.
        """
        return self.system(self.schedule.index_at(t))

    def check(self, X, name="X"):
        """Tokens checked as the first entry's system checks them.

        Parameters
        ----------
        X : array_like
            Tokens.
        name : str
            Their name in the message.

        Returns
        -------
        ndarray
            As the first system's ``check`` returns them.
        """
        return self.system(0).check(X, name)


def random_layers(d, n_layers, layer_time, *, t0=0.0, **kwargs) -> HeadSchedule:
    """A schedule of ``n_layers`` independent :func:`~meanfield.core.random_heads.random_heads` draws,
    layer ``k`` from ``t0 + k * layer_time`` (keywords go to ``random_heads``; one ``seed`` drives them all).

    Parameters
    ----------
    d : int
        Dimension, ``>= 2``.
    n_layers : int
        Number of layers, ``>= 1``.
    layer_time : float
        Duration of each layer, ``> 0``.
    t0 : float
        Start of the first layer.
    **kwargs
        Keywords of :func:`~meanfield.core.random_heads.random_heads` (``n_heads``, ``score``, ``value``,
        ``systems``, ``seed``, ...).

    Returns
    -------
    HeadSchedule

    Raises
    ------
    ValueError
        A size out of range, a ``layer_time`` that is not positive and finite, a non-finite ``t0``, the layers'
        matrices above the memory or time limit, or keywords :func:`random_heads` refuses.
    """
    n_layers = validate.integer("n_layers", n_layers, 1)
    layer_time = validate.real("layer_time", layer_time, positive=True)
    t0 = validate.real("t0", t0)
    n_heads = validate.integer("n_heads", kwargs.get("n_heads", 1), 1)
    systems = kwargs.get("systems")
    systems = None if systems is None else validate.integer("systems", systems, 1, what="None or a positive integer")
    d = validate.integer("d", d, 2)
    layers = estimate_random_heads(d, n_heads * n_layers, systems, kwargs.get("score", "gaussian"),
                                   kwargs.get("value", "identity"))
    cost.guard(f"random_layers(d={d}, n_layers={n_layers}, n_heads={n_heads}, systems={systems})",
               bytes=layers.bytes, seconds=layers.seconds, detail=layers.detail, fix="fewer n_layers, a smaller d, "
               "fewer n_heads or systems")                       # before the first layer is drawn
    rng = validate.rng(kwargs.pop("seed", None))
    return HeadSchedule(tuple((t0 + k * layer_time, random_heads(d, seed=rng, **kwargs)) for k in range(n_layers)))


def integrate_schedule(schedule, make_system, y0, t_span, **kw) -> Trajectory:
    """Integrate across a :class:`HeadSchedule`: one :func:`integrate` run over a
    :class:`~meanfield.core.integrate.Piecewise` right-hand side, one piece per entry.

    ``make_system(heads)`` returns an object with ``rhs(t, y)`` (and a ``retraction`` attribute, used
    when present).  The driver steps onto every start time inside ``t_span`` and starts the next
    piece afresh there (its first derivative, a new step controller), so the numbers are those of
    one run per segment from the state the previous one reached.  Other keywords go to
    :func:`integrate` (``save=SaveAt(t_eval=...)``, ``step=StepControl(...)``, ...; not ``checkpointing``:
    a scheduled run is not resumable here).

    Parameters
    ----------
    schedule : HeadSchedule or ScheduledSystem
        The layers (a ScheduledSystem brings its own ``make_system``).
    make_system : callable
        ``make_system(heads) -> system`` (ignored for a ScheduledSystem).
    y0 : array_like
        Start state (checked by the first system's ``check`` when it has one).
    t_span : (float, float)
        The span, starting at or after the first start.
    **kw
        Keywords of :func:`integrate` except ``checkpointing`` and ``retraction``.

    Returns
    -------
    Trajectory

    Raises
    ------
    ValueError
        ``checkpointing`` or ``retraction`` given, ``t_span`` not two finite numbers or starting before the
        schedule, a ``y0`` the first system refuses, or what :func:`integrate` refuses.
    """
    system = schedule if isinstance(schedule, ScheduledSystem) else ScheduledSystem(schedule, make_system)
    for bad in ("checkpointing", "retraction"):
        if bad in kw:
            raise ValueError(f"{bad} is not supported by integrate_schedule (allowed: integrate's other keywords); "
                             f"received {bad}={kw[bad]!r}")
    ts = validate.real_array("t_span", t_span, (2,))
    t0 = system.schedule.entries[0][0]
    if ts[0] < t0:                                                       # refused before the first start
        raise ValueError(f"t_span must start at or after the schedule's first start {t0}; received {t_span!r}")
    first = system.at(float(ts[0]))
    if callable(getattr(first, "check", None)):      # the tokens as the first piece's system takes them (unit rows)
        first.check(y0, name="y0")

    def piece(k):
        sys_k = system.system(k)
        return sys_k.rhs, getattr(sys_k, "retraction", None)

    return integrate(Piecewise(tuple(system.schedule.starts), piece), y0, t_span, **kw)
