"""Drivers: evolve particles or the continuum: :func:`solve_particles` and :func:`solve_continuum`, the names of
:func:`meanfield.solve` for a :class:`~meanfield.ParticleSystem` and a :class:`~meanfield.ContinuumPDE`.

The model checks and resolves its run (:meth:`ParticleSystem.plan`, :meth:`ContinuumPDE.plan`, in
:mod:`meanfield.models.plans`); :func:`meanfield.solve` wires the observe hook (and for the PDE the resolution
monitor) into :func:`meanfield.core.integrate.integrate` and returns its
:class:`~meanfield.core.integrate.Trajectory`.  For the PDE, ``Trajectory.y`` holds real state vectors;
:meth:`ContinuumPDE.coefficients` turns one into ``rho_lm``.
"""

from __future__ import annotations

from dataclasses import replace

from ..core.options import SaveAt, option
from ..models.continuum import ContinuumPDE
from ..models.particles import DIRECT_RUN_LIMIT_S, ParticleSystem
from .solve import solve

__all__ = ["solve_particles", "solve_continuum"]

_MOVED = {"check_particle_run": "ParticleSystem.check_run (meanfield.models.plans.check_particle_run)",
          "RUN_BYTES_PER_TOKEN": "meanfield.models.plans.RUN_BYTES_PER_TOKEN"}
"""The names of 0.2 that moved to the model's plan (issue 32, item 1), and their new homes."""


def __getattr__(name):
    """Module attribute fallback: the names of 0.2 (:data:`_MOVED`) raise an ``AttributeError`` naming their new
    home.

    Parameters
    ----------
    name : str
        The attribute looked up.

    Raises
    ------
    AttributeError
        Always (this is called only for names the module does not define).
    """
    if name in _MOVED:
        raise AttributeError(f"meanfield.workflow.simulate.{name} moved in 0.3: use {_MOVED[name]} (the model "
                             f"checks its own runs)")
    raise AttributeError(f"module 'meanfield.workflow.simulate' has no attribute {name!r}")


def solve_particles(system: ParticleSystem, X0, t_final, *, method=None, step=None, save=None, checkpointing=None,
                    w=None, seed=None, threshold=None, progress=None, direct_limit_s=DIRECT_RUN_LIMIT_S, **kw):
    """Evolve tokens ``X0`` (n, d) from ``t = 0`` to ``t_final``: :func:`meanfield.solve` for a particle system.

    ``save.observe=True`` (the default) records :func:`meanfield.analysis.diagnostics.observer` (energy, per-head
    energies, dissipation, Shannon and relative attention entropies, order parameter, clustering), with the
    system's sums (O(n) where it sums spectrally, any ``w``); pass a callable for your own hook or False for none.

    With token noise (``system.nu > 0``), or a ``stochastic`` method of :data:`meanfield.core.methods.METHODS`,
    the SDE is integrated by the same driver with the fixed step ``dt`` (required) and the Brownian increments of
    ``seed`` (``Noise(system.nu, seed, system.geometry)``; an integer: reproducible bit for bit; ``rtol`` and
    ``atol`` are not used).  Do not reuse the integer that drew ``X0`` (``initial.uniform_sphere(n, d, seed=s)``
    and ``seed=s`` read the same normal stream, so the first increments are the start's own coordinates, a bias
    of the noisy rates); pass another integer or ``numpy.random.default_rng([s, 1])``.

    A run whose sums and steps are estimated to take longer than ``direct_limit_s`` is refused before it starts
    (:meth:`ParticleSystem.check_run`: right-hand sides counted by :func:`meanfield.core.integrate.estimate_nfev`,
    a lower bound under error control, plus :func:`meanfield.diagnostics.observer_passes` per record of
    ``observe=True``: none where the system sums spectrally, whatever the weights; a callable hook's own cost is
    not counted).

    Parameters
    ----------
    system : ParticleSystem
        The model.
    X0 : array_like, shape (n, d)
        Start tokens.
    t_final : float
        End time.
    method : str, Tableau or Stepper, optional
        None: ``"dopri5"`` without noise, ``"geodesic_strang"`` with it.
    step : StepControl, optional
        Default ``rtol = 1e-8``, ``atol = 1e-10``; ``dt`` required with noise.
    save : SaveAt, optional
        Output times (default 11 equispaced) and the observer.
    checkpointing : Checkpointing, optional
        Saves and resume.
    w : array_like, optional
        Token weights (None: uniform).
    seed : int or numpy.random.Generator, optional
        The Brownian increments of a noisy run.
    threshold : float, optional
        Clustering threshold of the default observer (None: 0.99); the same as ``save=SaveAt(observe={"threshold":
        threshold})``, refused with an observer of one's own (a callable ``observe``) or none.
    progress : bool or str, optional
        Progress bar (labelled ``"particles"``; a string shows it with that label).
    direct_limit_s : float
        Time limit of the run's estimate (default :data:`meanfield.models.particles.DIRECT_RUN_LIMIT_S`, 1 h;
        ``inf`` switches it off).
    **kw
        Further options of :func:`meanfield.solve` (``event``, ``events``).

    Returns
    -------
    Trajectory
        ``y``: the tokens at the output times; ``observables``: the observer's records.

    Raises
    ------
    ValueError
        ``system`` not a :class:`ParticleSystem`, ``threshold`` with an observer of one's own (or none) or
        another one in ``save.observe``, and what
        :meth:`ParticleSystem.plan` or the driver refuses.
    """
    if not isinstance(system, ParticleSystem):
        raise ValueError(f"system must be a meanfield.ParticleSystem; received {type(system).__name__}")
    if threshold is not None:
        sv = option("save", save, SaveAt)
        if not (sv.observe is True or isinstance(sv.observe, dict)):
            raise ValueError(f"threshold is a setting of the default observer (save.observe = True); received "
                             f"threshold={threshold!r} with save.observe = {sv.observe!r}")
        given = sv.observe if isinstance(sv.observe, dict) else {}
        if "threshold" in given and given["threshold"] != threshold:
            raise ValueError(f"threshold given twice: threshold={threshold!r} and save.observe['threshold'] = "
                             f"{given['threshold']!r}; give one")
        save = replace(sv, observe={**given, "threshold": threshold})
    return solve(system, X0, t_final, method=method, step=step, save=save, checkpointing=checkpointing, w=w,
                 seed=seed, progress=progress, direct_limit_s=direct_limit_s, **kw)


def solve_continuum(pde: ContinuumPDE, rho_lm0, t_final, *, method="dopri5", step=None, save=None,
                    checkpointing=None, monitor=True, normalize=False, progress=None, **kw):
    """Evolve the density with coefficients ``rho_lm0`` from ``t = 0`` to ``t_final``: :func:`meanfield.solve`
    for the continuum on S^2.

    Parameters
    ----------
    pde : ContinuumPDE
        The model.
    rho_lm0 : ndarray, shape (nalm,)
        Initial coefficients; must be finite with mass 1 unless ``normalize=True``.
    t_final : float
        End time.
    method : str, Tableau or Stepper
        The scheme.  A fixed-step method without ``step.dt`` takes the CFL step ``pde.cfl_dt(rho_lm0, cfl,
        method)`` (``step.cfl`` default 0.5) at the initial state: the scheme's own stability reach, see
        :meth:`ContinuumPDE.cfl_dt`.  Split schemes (``"etdrk4"``, ``"lawson_dopri5"`` with error control, ...)
        take the diffusion ``nu Lap`` as their linear part (:meth:`ContinuumPDE.split`): its stable step does
        not depend on ``nu lmax^2``.
    step : StepControl, optional
        Default ``rtol = 1e-8``, ``atol = 1e-12``.
    save : SaveAt, optional
        Default 11 equispaced times, ``observe=True``: the :func:`meanfield.field_diagnostics.field_observer` of
        the PDE.
    checkpointing : Checkpointing, optional
        Saves and resume.
    monitor : bool or Monitor
        Stop (status 1, with the time and the reason) once the density is no longer resolved:
        :func:`meanfield.field_diagnostics.field_resolution_monitor` with the tolerances of a
        :class:`~meanfield.core.options.Monitor` (True: ``Monitor()``; False: no monitor).
    normalize : bool
        Scale ``rho_lm0`` to mass 1 rather than refusing another mass.
    progress : bool, str or None
        tqdm bar labelled ``"PDE"`` (a string: shown with that label); None: only on a terminal.
    **kw
        Further options of :func:`meanfield.solve` (``event``, ``events``).

    Returns
    -------
    Trajectory
        ``y``: real state vectors (``pde.coefficients(y)``: the coefficients).

    Raises
    ------
    ValueError
        ``pde`` not a :class:`ContinuumPDE`, and what :meth:`ContinuumPDE.plan`, the monitor or the driver refuses.
    """
    if not isinstance(pde, ContinuumPDE):
        raise ValueError(f"pde must be a meanfield.ContinuumPDE (solve_reduced takes the circle and axisymmetric "
                         f"PDEs); received {type(pde).__name__}")
    return solve(pde, rho_lm0, t_final, method=method, step=step, save=save, checkpointing=checkpointing,
                 monitor=monitor, normalize=normalize, progress=progress, **kw)
