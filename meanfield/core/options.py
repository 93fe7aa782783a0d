"""The driver's options in frozen parameter objects (in the manner of diffrax's ``SaveAt`` /
``StepSizeController``): what to save, how to step, how to checkpoint, when a density is no longer resolved.

* :class:`SaveAt`: the recorded times, whether states are kept, the observer (or its settings), dense output;
* :class:`StepControl`: the step size or the tolerances of error control, their limits;
* :class:`Checkpointing`: the checkpoint callback, its period, and the state to resume from;
* :class:`Monitor`: the tolerances of the density models' resolution monitor (``monitor=`` of
  :func:`meanfield.solve`).

:func:`meanfield.core.integrate.integrate` and the entry points over it (``solve_particles``,
``solve_continuum``, ``solve_reduced``) take them as ``save=``, ``step=`` and ``checkpointing=``; None
is the default object.  Each object checks the type and range of its own fields when built (named
``ValueError`` s, as for any argument); each entry point checks what depends on the run (``t_eval``
inside ``t_span``, a ``dt`` that the method needs).  Numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from . import validate

__all__ = ["SaveAt", "StepControl", "Checkpointing", "Monitor", "option"]


@dataclass(frozen=True, eq=False)
class SaveAt:
    """What a run records.

    Attributes
    ----------
    t_eval : array_like or None
        Strictly increasing times at which states and observables are recorded (every step lands
        on them); None: the entry point's default (``[t0, t1]`` for :func:`integrate`, 11 equispaced
        times for the solvers).
    states : bool
        Keep the recorded states in ``Trajectory.y``.
    observe : True, False, None, dict or callable ``observe(t, y) -> dict``
        True: the entry point's default observer (the model's diagnostics in the solvers; none in
        :func:`integrate`); a dict: that default observer with these settings (the solvers only, e.g.
        ``{"threshold": 0.95}``, the clustering threshold of the particles' diagnostics); False or None: none; a
        callable: that one.
    dense : bool
        Keep the dense output ``Trajectory.dense`` (cubic Hermite through the step points).

    Raises
    ------
    ValueError
        ``t_eval`` not a non-empty 1-d strictly increasing array of finite reals; ``states`` or ``dense`` not
        a boolean; ``observe`` not True, False, None, a dict with string keys or a callable.
    """

    t_eval: object = None
    states: bool = True
    observe: object = True
    dense: bool = False

    def __post_init__(self):
        if self.t_eval is not None:
            t = validate.real_array("t_eval", self.t_eval, (None,))
            if t.size == 0 or np.any(np.diff(t) <= 0):
                raise ValueError(f"t_eval must be a non-empty 1-d strictly increasing array; received {self.t_eval!r}")
        validate.boolean("states", self.states)
        validate.boolean("dense", self.dense)
        if isinstance(self.observe, dict):
            if not all(isinstance(k, str) for k in self.observe):
                raise ValueError(f"observe as a dict holds the default observer's settings by name; received "
                                 f"{self.observe!r}")
        elif not (self.observe is None or isinstance(self.observe, (bool, np.bool_)) or callable(self.observe)):
            raise ValueError(f"observe must be True, False, None, a dict of the default observer's settings or a "
                             f"callable observe(t, y); received {self.observe!r}")


@dataclass(frozen=True, eq=False)
class StepControl:
    """How a run steps.

    Attributes
    ----------
    dt : float or None
        The fixed step (required by fixed-step schemes unless the entry point derives one, e.g. a
        PDE's CFL step); the initial step of adaptive ones.
    rtol, atol : float or None
        Error control of adaptive schemes; None: the entry point's defaults (:func:`integrate`:
        1e-6, 1e-9; the solvers: their documented ones).
    dt_max : float
        Largest adaptive step.
    max_steps : int
        Most step attempts before the run fails.
    adaptive : bool or None
        None: error control when the scheme has an embedded pair; False: fixed ``dt`` with the main weights.
    cfl : float or None
        PDE solvers only: the fraction of the scheme's stable step taken when ``dt`` is None
        (default 0.5); :func:`integrate` refuses it.

    Raises
    ------
    ValueError
        ``dt``, ``rtol`` or ``cfl`` given and not positive and finite; ``atol`` given and negative or not
        finite; ``dt_max`` not positive (``inf`` allowed); ``max_steps`` not an integer ``>= 1``.
    """

    dt: float | None = None
    rtol: float | None = None
    atol: float | None = None
    dt_max: float = np.inf
    max_steps: int = 10_000_000
    adaptive: bool | None = None
    cfl: float | None = None

    def __post_init__(self):
        for name in ("dt", "rtol"):
            if getattr(self, name) is not None:
                validate.real(name, getattr(self, name), positive=True)
        if self.atol is not None:
            validate.real("atol", self.atol, 0)
        validate.real("dt_max", self.dt_max, positive=True, finite=False)
        validate.integer("max_steps", self.max_steps, 1)      # adaptive: checked by the driver, against the method
        if self.cfl is not None:
            validate.real("cfl", self.cfl, positive=True)

    def with_defaults(self, rtol, atol) -> "StepControl":
        """This object with ``rtol`` / ``atol`` filled in where they are None.

        Parameters
        ----------
        rtol, atol : float
            The defaults.

        Returns
        -------
        StepControl
            A copy (validated again); the object's own tolerances are kept when set.
        """
        return replace(self, rtol=rtol if self.rtol is None else self.rtol,
                       atol=atol if self.atol is None else self.atol)


@dataclass(frozen=True, eq=False)
class Checkpointing:
    """How a run saves and resumes its state.

    Attributes
    ----------
    save : callable ``save(state: dict)`` or None
        Called every ``every`` units of simulated time and when the run is interrupted (Ctrl-C).
    every : float or None
    resume : dict or None
        A state ``save`` received from a run with the same settings: the run continues from it, bit
        for bit as an uninterrupted one.

    Raises
    ------
    ValueError
        ``save`` neither None nor callable; ``every`` given and not positive and finite; ``resume`` neither
        None nor a dict.
    """

    save: object = None
    every: float | None = None
    resume: dict | None = None

    def __post_init__(self):
        if self.save is not None and not callable(self.save):
            raise ValueError(f"save must be None or a callable save(state); received {self.save!r}")
        if self.every is not None:
            validate.real("every", self.every, positive=True)
        if self.resume is not None and not isinstance(self.resume, dict):
            raise ValueError(f"resume must be None or a state dict received by a checkpoint save; "
                             f"received {self.resume!r}")


@dataclass(frozen=True)
class Monitor:
    """The tolerances of the density models' resolution monitor: a run stops (status 1, with the time and the
    reason) once the truncation no longer resolves the density.

    ``monitor=`` of :func:`meanfield.solve` (and of ``solve_continuum`` / ``solve_reduced``) takes one (None or
    True: the defaults below; False: no monitor).  The monitors themselves are
    :func:`meanfield.analysis.field_diagnostics.field_resolution_monitor` (S^2) and
    :func:`meanfield.analysis.axisymmetric.reduced_resolution_monitor` (the circle, the axisymmetric S^{d-1}).

    Attributes
    ----------
    tail_tol : float
        Largest admitted spectral tail (:func:`meanfield.core.resolution.resolution_monitor`), ``> 0`` or ``inf``
        (that criterion never stops).
    negative_tol : float
        Largest admitted negative mass of the density, ``> 0`` or ``inf``.

    Raises
    ------
    ValueError
        ``tail_tol`` or ``negative_tol`` not a number ``> 0`` or ``inf`` (0 would stop a run at any tail or
        negative mass, round-off included).
    """

    tail_tol: float = 1e-3
    negative_tol: float = 1e-4

    def __post_init__(self):
        what = "a number > 0 or inf (never stop; 0 stops at any tail or negative mass, round-off included)"
        for name in ("tail_tol", "negative_tol"):
            object.__setattr__(self, name, validate.real(name, getattr(self, name), 0, lo_open=True, finite=False,
                                                         what=what))


def option(name, value, cls):
    """``value`` if it is a ``cls``, ``cls()`` for None, else a ValueError naming ``name``.

    Parameters
    ----------
    name : str
        The argument's name (``"save"``, ``"step"``, ``"checkpointing"``).
    value : object
        The argument.
    cls : type
        :class:`SaveAt`, :class:`StepControl` or :class:`Checkpointing`.

    Returns
    -------
    object
        An instance of ``cls``.

    Raises
    ------
    ValueError
        ``value`` neither None nor an instance of ``cls``.
    """
    if value is None:
        return cls()
    if not isinstance(value, cls):
        raise ValueError(f"{name} must be None or a {cls.__name__}(...); received {value!r}")
    return value
