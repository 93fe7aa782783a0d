r"""Noisy particles under a piecewise-constant noise ramp: hysteresis loops and escape times (MODEL.md section 7).

:func:`noise_ramp` runs tokens through stages of constant noise ``nu_k``: each stage is a fresh
:class:`~meanfield.models.particles.ParticleSystem` with that ``nu``, started from the previous stage's final
tokens and integrated by :func:`meanfield.solve` (the particle system's SDE schemes, keywords
``method``, ``dt``, ``seed``, ``t_eval``, ``observe`` only) with its own Brownian stream (stage ``k`` of a run
with ``seed`` draws from ``numpy.random.SeedSequence([seed, k])``, so a run is reproducible bit for bit and no
two stages share increments).  The order parameter ``r = |(1/n) sum_i x_i|`` is recorded at ``samples``
equispaced times of every stage.  With ``stop_above`` the ramp ends after the first stage in which ``r``
exceeds that level (an escape from the uniform state); :func:`first_crossing` reads the escape time.

Before the first stage the ramp's cost is estimated from its sizes and refused above the cost guard's limits
(:func:`meanfield.core.cost.guard`; lifted with :func:`meanfield.core.cost.limits`): its memory (every stage's
``samples`` records of the (n, d) tokens, the (K, samples) clocks and order parameters) and its time (``K`` stages,
each the particle solver's own estimate of its steps and direct sums,
:meth:`~meanfield.models.particles.ParticleSystem.check_direct_run`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import validate
from ..core.cost import guard
from ..core.integrate import estimate_nfev
from ..core.methods import as_stepper
from ..core.options import SaveAt, StepControl
from ..models.particles import UNIT_NORM_TOL, ParticleSystem
from .solve import solve

__all__ = ["RampResult", "noise_ramp", "order_parameter", "stage_seed", "first_crossing"]

RECORD_COPIES = 2
"""Copies of a stage's recorded tokens counted by the memory estimate of :func:`noise_ramp`: the driver's list of
records and the (samples, n, d) array stacked from it."""


def order_parameter(X) -> float:
    """``|(1/n) sum_i x_i|`` of tokens ``X`` (n, d): at least one row, each a unit vector (``| |x_i|^2 - 1 | <=``
    :data:`~meanfield.models.particles.UNIT_NORM_TOL`; never renormalized).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Unit tokens.

    Returns
    -------
    float
        In ``[0, 1]``.

    Raises
    ------
    ValueError
        ``X`` not real and finite of shape (n, d) with ``n >= 1``, or rows not unit vectors.
    """
    X = validate.unit_vectors("X", X, min_rows=1, tol=UNIT_NORM_TOL)
    return float(np.linalg.norm(X.mean(axis=0)))


def stage_seed(seed, stage) -> int:
    """The integer seed of the Brownian increments of stage ``stage`` of a ramp with ``seed`` (both integers
    >= 0, Python or numpy; floats are refused, never floored).

    Parameters
    ----------
    seed : int
        The ramp's seed, ``>= 0``.
    stage : int
        The stage index, ``>= 0``.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        ``seed`` or ``stage`` not an integer ``>= 0``.
    """
    seed = validate.integer("seed", seed, 0)
    stage = validate.integer("stage", stage, 0)
    return int(np.random.SeedSequence([seed, stage]).generate_state(1)[0])


@dataclass(frozen=True)
class RampResult:
    """A ramp: ``nus`` (K,) of the stages run, ``times`` (K, samples) on the ramp's clock (stage ``k`` covers
    ``[k T, (k + 1) T]``), ``order`` (K, samples) the order parameter at those times, ``X`` the final tokens,
    ``stopped`` whether ``stop_above`` ended the ramp before its last stage.

    Parameters
    ----------
    nus : ndarray, shape (K,)
    times : ndarray, shape (K, samples)
    order : ndarray, shape (K, samples)
    X : ndarray, shape (n, d)
    stopped : bool
    """

    nus: np.ndarray
    times: np.ndarray
    order: np.ndarray
    X: np.ndarray
    stopped: bool

    @property
    def stage_end(self) -> np.ndarray:
        """The order parameter at the end of every stage (K,)."""
        return self.order[:, -1]

    @property
    def stage_mean(self) -> np.ndarray:
        """The order parameter averaged over the samples of the second half of every stage (K,)."""
        k = (self.order.shape[1] - 1) // 2
        return self.order[:, k:].mean(axis=1)


def noise_ramp(heads, X0, nus, stage_time, *, dt, seed, samples=5, method=None, summation="auto",
               stop_above=None) -> RampResult:
    """Run tokens ``X0`` (n, d) on the sphere through the stages of noise ``nus`` (each ``> 0``), ``stage_time``
    each, with the fixed SDE step ``dt`` (see the module docstring).

    ``samples`` (>= 2): recorded times per stage, the stage's start and end included.  ``method``: an SDE
    scheme of :func:`~meanfield.workflow.simulate.solve_particles` (None: its default).  ``summation``: of the
    systems (``"spectral"`` for zonal heads on S^2 at large n).  ``stop_above``: end the ramp after the first
    stage whose recorded order parameter exceeds it.

    Parameters
    ----------
    heads : Head or sequence of Head
        The heads of every stage's :class:`~meanfield.models.particles.ParticleSystem`.
    X0 : array_like, shape (n, d)
        Unit tokens.
    nus : array_like, shape (K,)
        Positive noise levels.
    stage_time : float
        Duration of each stage, ``> 0``.
    dt : float
        SDE step, ``> 0``.
    seed : int
        ``>= 0``; stage ``k`` draws from :func:`stage_seed` of it.
    samples : int
        ``>= 2``.
    method : str, optional
        An SDE scheme.
    summation : str
        The systems' summation.
    stop_above : float, optional
        ``> 0``.

    Returns
    -------
    RampResult

    Raises
    ------
    ValueError
        ``nus`` not a non-empty 1-d array of positive numbers, a ``stage_time``, ``dt`` or ``stop_above`` that is
        not positive, ``seed`` or ``samples`` out of range, heads or tokens the system refuses, a method or step
        the particle solver refuses, or a ramp above the memory or time limit.
    RuntimeError
        A stage that does not reach its end (its message given).
    """
    nus = validate.real_array("nus", nus)
    if nus.ndim != 1 or nus.size == 0 or not np.all(nus > 0):
        raise ValueError(f"nus must be a non-empty 1-d array of positive noise levels; received {nus!r}")
    stage_time = validate.real("stage_time", stage_time, positive=True)
    dt = validate.real("dt", dt, positive=True)
    seed = validate.integer("seed", seed, 0)
    samples = validate.integer("samples", samples, 2)
    if stop_above is not None:
        stop_above = validate.real("stop_above", stop_above, positive=True)
    first = ParticleSystem(heads, nu=float(nus[0]), summation=summation)
    X, _ = first.check(X0, name="X0")
    X = np.array(X, dtype=float, copy=True)
    t_eval, method = _check_cost(first, X.shape, nus.size, stage_time, dt, samples, method)
    times, order, stopped = [], [], False
    for k, nu in enumerate(nus):
        system = first if k == 0 else ParticleSystem(heads, nu=float(nu), summation=summation)
        tr = solve(system, X, stage_time, method=method, step=StepControl(dt=dt),
                   save=SaveAt(t_eval=t_eval, observe=False), seed=stage_seed(seed, k))
        if tr.status != 0:
            raise RuntimeError(f"noise_ramp: stage {k} (nu = {nu:g}) stopped: {tr.message}")
        Y = np.asarray(tr.y)
        order.append(np.linalg.norm(Y.mean(axis=1), axis=1))
        times.append(k * stage_time + np.asarray(tr.t))
        X = Y[-1]
        if stop_above is not None and order[-1].max() > stop_above:
            stopped = k < nus.size - 1
            break
    K = len(order)
    return RampResult(nus[:K].copy(), np.array(times), np.array(order), X, stopped)


def _check_cost(system, shape, K, stage_time, dt, samples, method):
    """Refuse a ramp of ``K`` stages above the cost guard's limits before anything runs (see the module
    docstring); returns the stage's output times and the resolved SDE method.

    Memory first, from the sizes alone (nothing of ``samples`` allocated yet): every stage's records
    (``RECORD_COPIES`` x samples x n x d floats), the ramp's clocks and order parameters (two (K, samples) arrays,
    in lists and stacked), the output times and the step count's temporaries (8 x samples floats), the sums' work
    space.  Then time: the stage's steps and direct sums as the particle solver counts them, times ``K``."""
    n, d = shape
    nbytes = 8.0 * samples * (RECORD_COPIES * n * d + 4 * K + 8) + system.direct_cost(n)["bytes"]
    what = f"noise_ramp(samples={samples}, len(nus) = {K} stage(s), n = {n} tokens in d = {d})"
    guard(what, bytes=nbytes, fix="fewer samples (or fewer stages in nus, or fewer tokens)",
          detail=f"{samples} samples x ({RECORD_COPIES} x {n} x {d} + 4 x {K} + 8) floats: each stage's records, "
                 f"the ramp's clocks and order parameters, the output times; + the sums' work space")
    t_eval = np.linspace(0.0, stage_time, samples)
    # the solver's own checks of one stage (method, dt) and its estimate, counted for all K stages; its own limit
    # of one stage (direct_limit_s, 1 h) is applied again by solve_particles before the first stage runs
    method = system.check_run(n, stage_time, t_eval=t_eval, method=method, dt=dt, direct_limit_s=float("inf"))
    steps = estimate_nfev("euler", (0.0, stage_time), dt=dt, t_eval=t_eval)["steps"]
    stage = system.check_direct_run(n, steps * as_stepper(method).n_drift, samples, 0, limit_s=float("inf"),
                                    steps=steps)
    guard(f"{what} of {steps} steps of {method} each", seconds=K * stage["seconds"],
          detail=f"{K} x {stage['seconds']:.3g} s per stage: its direct sums and per-step overhead, as "
                 f"solve_particles counts them",
          fix="fewer samples, a larger dt, a shorter stage_time or fewer stages in nus")
    return t_eval, method


def first_crossing(times, values, level) -> float:
    """The first time ``values`` exceeds ``level``, linearly interpolated between the samples (``inf`` if it
    never does: a censored observation).

    ``times``: finite, non-decreasing in C order (ties allowed: a ramp's stage boundaries are recorded twice), any
    shape (a ramp's (K, samples) ``times``); ``values``: finite, of the same shape; ``level``: a finite number.

    Parameters
    ----------
    times : array_like
        Sample times.
    values : array_like
        Values, the shape of ``times``.
    level : float
        The level.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Non-finite entries, no samples, shapes that differ, or ``times`` decreasing somewhere (in C order).
    """
    t = validate.real_array("times", times)
    v = validate.real_array("values", values)
    level = validate.real("level", level)
    if t.size == 0:
        raise ValueError(f"times must hold at least one sample; received shape {t.shape}")
    if t.shape != v.shape:
        raise ValueError(f"times and values must have the same shape; received {t.shape} and {v.shape}")
    t, v = t.ravel(), v.ravel()
    if np.any(np.diff(t) < 0):
        i = int(np.argmax(np.diff(t) < 0))
        raise ValueError(f"times must be non-decreasing (sorted, ties allowed); received times[{i}] = {float(t[i])!r} > "
                         f"times[{i + 1}] = {float(t[i + 1])!r} (in C order)")
    above = np.nonzero(v > level)[0]
    if above.size == 0:
        return float("inf")
    j = int(above[0])
    if j == 0:
        return float(t[0])
    return float(t[j - 1] + (level - v[j - 1]) / (v[j] - v[j - 1]) * (t[j] - t[j - 1]))
