r"""Noisy particles under a piecewise-constant noise ramp: hysteresis loops and escape times (MODEL.md section 7).

:func:`noise_ramp` runs tokens through stages of constant noise ``nu_k``: each stage is a fresh
:class:`~meanfield.models.particles.ParticleSystem` with that ``nu``, started from the previous stage's final
tokens and integrated by :func:`~meanfield.workflow.simulate.solve_particles` (its SDE schemes, keywords
``method``, ``dt``, ``seed``, ``t_eval``, ``observe`` only) with its own Brownian stream (stage ``k`` of a run
with ``seed`` draws from ``numpy.random.SeedSequence([seed, k])``, so a run is reproducible bit for bit and no
two stages share increments).  The order parameter ``r = |(1/n) sum_i x_i|`` is recorded at ``samples``
equispaced times of every stage.  With ``stop_above`` the ramp ends after the first stage in which ``r``
exceeds that level (an escape from the uniform state); :func:`first_crossing` reads the escape time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import validate
from ..core.options import SaveAt, StepControl
from ..models.particles import ParticleSystem
from .simulate import solve_particles

__all__ = ["RampResult", "noise_ramp", "order_parameter", "stage_seed", "first_crossing"]


def order_parameter(X) -> float:
    """``|(1/n) sum_i x_i|`` of tokens ``X`` (n, d)."""
    return float(np.linalg.norm(np.asarray(X, dtype=float).mean(axis=0)))


def stage_seed(seed, stage) -> int:
    """The integer seed of the Brownian increments of stage ``stage`` of a ramp with ``seed``."""
    return int(np.random.SeedSequence([int(seed), int(stage)]).generate_state(1)[0])


@dataclass(frozen=True)
class RampResult:
    """A ramp: ``nus`` (K,) of the stages run, ``times`` (K, samples) on the ramp's clock (stage ``k`` covers
    ``[k T, (k + 1) T]``), ``order`` (K, samples) the order parameter at those times, ``X`` the final tokens,
    ``stopped`` whether ``stop_above`` ended the ramp before its last stage."""

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
    X = np.array(X0, dtype=float, copy=True)
    t_eval = np.linspace(0.0, stage_time, samples)
    times, order, stopped = [], [], False
    for k, nu in enumerate(nus):
        system = ParticleSystem(heads, nu=float(nu), summation=summation)
        tr = solve_particles(system, X, stage_time, method=method, step=StepControl(dt=dt),
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


def first_crossing(times, values, level) -> float:
    """The first time ``values`` exceeds ``level``, linearly interpolated between the samples (``inf`` if it
    never does: a censored observation)."""
    t = np.ravel(np.asarray(times, dtype=float))
    v = np.ravel(np.asarray(values, dtype=float))
    if t.shape != v.shape:
        raise ValueError(f"times and values must have the same size; received {t.size} and {v.size}")
    above = np.nonzero(v > level)[0]
    if above.size == 0:
        return float("inf")
    j = int(above[0])
    if j == 0:
        return float(t[0])
    return float(t[j - 1] + (level - v[j - 1]) / (v[j] - v[j - 1]) * (t[j] - t[j - 1]))
