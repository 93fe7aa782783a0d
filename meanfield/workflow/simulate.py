"""Drivers: evolve particles or the continuum with the shared integrators and diagnostics hooks.

:func:`solve_particles` and :func:`solve_continuum` validate the start, wire the observe hook
(and for the PDE the resolution monitor) into :func:`meanfield.integrate.integrate` and return
its :class:`~meanfield.integrate.Trajectory`.  For the PDE, ``Trajectory.y`` holds real state
vectors; :meth:`ContinuumPDE.coefficients` turns one into ``rho_lm``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..analysis import diagnostics, field_diagnostics
from ..core import validate
from ..core.cost import guard
from ..core.densities import check_density
from ..core.densities import normalize as normalize_density
from ..core.integrate import estimate_nfev, integrate
from ..core.methods import as_stepper, method_names
from ..core.options import SaveAt, StepControl, option
from ..core.sde import Noise
from ..models.continuum import ContinuumPDE
from ..models.particles import DIRECT_RUN_LIMIT_S, ParticleSystem

__all__ = ["solve_particles", "solve_continuum", "check_particle_run", "RUN_BYTES_PER_TOKEN"]


def _times(t_final, t_eval):
    return np.linspace(0.0, t_final, 11) if t_eval is None else np.asarray(t_eval, dtype=float)


def solve_particles(system: ParticleSystem, X0, t_final, *, method=None, step=None, save=None, checkpointing=None,
                    w=None, seed=None, threshold=0.99, progress=None, direct_limit_s=DIRECT_RUN_LIMIT_S, **kw):
    """Evolve tokens ``X0`` (n, d) from ``t = 0`` to ``t_final``.

    ``step``, ``save``, ``checkpointing``: the driver's option objects
    (:class:`~meanfield.core.options.StepControl`, default ``rtol=1e-8``, ``atol=1e-10``;
    :class:`~meanfield.core.options.SaveAt`, default 11 equispaced times; and
    :class:`~meanfield.core.options.Checkpointing`).  ``save.observe=True`` (the default) records
    :func:`meanfield.analysis.diagnostics.observer` (energy, per-head energies, dissipation, Shannon and
    relative attention entropies, order parameter, clustering), with the system's sums (O(n) where it sums
    spectrally, any ``w``); pass a callable for your own hook or False for none.

    ``method`` None means ``"dopri5"`` without noise and ``"geodesic_strang"`` with it.  With
    token noise (``system.nu > 0``), or a ``stochastic`` method of :data:`meanfield.core.methods.METHODS`,
    the SDE is integrated by the same driver with the fixed step ``dt`` (required) and the Brownian
    increments of ``seed`` (``Noise(system.nu, seed, system.geometry)``; an integer: reproducible bit
    for bit; ``rtol`` and ``atol`` are not used).  Do not reuse the integer that drew ``X0``
    (``initial.uniform_sphere(n, d, seed=s)`` and ``seed=s`` read the same normal stream, so the first
    increments are the start's own coordinates, a bias of the noisy rates); pass another integer or
    ``numpy.random.default_rng([s, 1])``.  Other keywords go to the integrator
    (:func:`meanfield.integrate.integrate`); the progress bar is labelled ``"particles"`` unless
    ``progress_label`` says otherwise.

    ``direct_limit_s``: a run whose direct O(n^2) sums (where the system does not sum spectrally) are
    estimated to take longer is refused before it starts (:meth:`ParticleSystem.check_direct_run`:
    right-hand sides counted by :func:`meanfield.core.integrate.estimate_nfev`, a lower bound under
    error control, plus :func:`meanfield.diagnostics.observer_passes` per record of ``observe=True``:
    none where the system sums spectrally, whatever the weights; a callable hook's own cost is not
    counted).  Default :data:`meanfield.particles.DIRECT_RUN_LIMIT_S` (1 h); ``inf`` switches it off.
    """
    if not isinstance(system, ParticleSystem):
        raise ValueError(f"system must be a meanfield.ParticleSystem; received {type(system).__name__}")
    t_final = validate.real("t_final", t_final, positive=True)
    direct_limit_s = validate.real("direct_limit_s", direct_limit_s, positive=True, finite=False)
    sc = option("step", step, StepControl).with_defaults(1e-8, 1e-10)
    sv = option("save", save, SaveAt)
    dt, t_eval, observe = sc.dt, sv.t_eval, sv.observe
    X0, w = system.check(X0, w, name="X0")
    rhs = system.rhs if w is None or np.all(w == w[0]) else system.weighted_rhs(w)
    hook = diagnostics.observer(system, w, threshold) if observe is True else (observe or None)
    times = _times(t_final, t_eval)
    n = X0.shape[0]
    passes = diagnostics.observer_passes(system, n, w) if observe is True else 0   # 0 when spectral, any w
    method = check_particle_run(system, n, t_final, t_eval=times, method=method, dt=dt, record_passes=passes,
                                direct_limit_s=direct_limit_s, adaptive=sc.adaptive)
    kw.setdefault("progress_label", "particles")
    if as_stepper(method).stochastic:
        kw.update(noise=Noise(system.nu, seed, system.geometry))
    else:
        kw.update(retraction=system.retraction)
    return integrate(rhs, X0, (0.0, float(t_final)), method=method, step=sc,
                     save=replace(sv, t_eval=_times(t_final, t_eval), observe=hook), checkpointing=checkpointing,
                     progress=progress, **kw)


RUN_BYTES_PER_TOKEN = 600
"""Peak bytes per token of a particle run beyond its saved frames and per-head aggregates (``8 d`` bytes each):
the integrator's stages, the noise and the sums' per-token arrays.  Measured (peak resident memory over a
0.2-time run saving 3 frames, d = 3, spectral sums, n = 2e5 and 8e5): 380 to 480 bytes per token for zonal
heads with and without noise, 420 to 520 for the paper's two general heads, the 3 saved frames (72 bytes)
included."""


def check_particle_run(system: ParticleSystem, n, t_final, *, t_eval=None, method=None, dt=None, record_passes=0,
                       direct_limit_s=DIRECT_RUN_LIMIT_S, adaptive=None):
    """The up-front checks of :func:`solve_particles` without running it; returns the resolved method.

    ``method`` None resolves to ``"dopri5"`` (no noise) or ``"geodesic_strang"`` (``system.nu > 0``);
    a noisy run needs ``dt``.  A run whose direct O(n^2) sums (right-hand sides counted by
    :func:`meanfield.core.integrate.estimate_nfev`, plus ``record_passes`` per output time) are
    estimated above ``direct_limit_s`` raises ``ValueError`` (:meth:`ParticleSystem.check_direct_run`).
    :func:`meanfield.paired.paired_run` calls it before its PDE phase, so a refused particle run
    costs nothing.
    """
    n = validate.integer("n", n, 1)
    if not isinstance(system, ParticleSystem):
        raise ValueError(f"system must be a meanfield.ParticleSystem; received {type(system).__name__}")
    t_final = validate.real("t_final", t_final, positive=True)
    direct_limit_s = validate.real("direct_limit_s", direct_limit_s, positive=True, finite=False)
    times = _times(t_final, t_eval)
    per_token = RUN_BYTES_PER_TOKEN + 8.0 * system.d * (np.size(times) + system.n_heads)
    guard(f"solve_particles with n = {n} tokens in d = {system.d}, {np.size(times)} saved times",
          bytes=float(n) * per_token, fix="fewer tokens or fewer saved times (save=SaveAt(t_eval=...); in a config: particles.n, "
              "integrator.n_frames)",
          detail=f"{per_token:.0f} bytes per token: the integrator's stages and sums, "
                 f"{np.size(times)} saved frames of (n, {system.d}) float64")
    stochastic = method is not None and as_stepper(method).stochastic
    if system.nu > 0 or stochastic:
        method = "geodesic_strang" if method is None else method
        if not stochastic and method != "geodesic_strang":
            raise ValueError(f"method must be one of {method_names(stochastic=True)} (or None) for tokens with "
                             f"noise (nu = {system.nu}); received {method!r}")
        if dt is None:
            raise ValueError(f"dt must be a positive number for the stochastic scheme {method!r}; received None")
        steps = estimate_nfev("euler", (0.0, float(t_final)), dt=dt, t_eval=times)["steps"]   # the same grid
        system.check_direct_run(n, steps * as_stepper(method).n_drift, np.size(times), record_passes,
                                limit_s=direct_limit_s, how=f" ({steps} steps of {method})", steps=steps)
        return method
    method = "dopri5" if method is None else method
    est = estimate_nfev(method, (0.0, float(t_final)), dt=dt, t_eval=times, adaptive=adaptive)
    # every run is estimated: direct sums, spectral sums (O(n) a token and evaluation) and the steps' overhead
    name = getattr(method, "name", method)
    system.check_direct_run(n, est["nfev"], np.size(times), record_passes, lower_bound=est["lower_bound"],
                            limit_s=direct_limit_s, steps=est["steps"],
                            how=f" ({'at least one step per output interval, ' if est['lower_bound'] else ''}"
                                f"{est['steps']} steps of {name})")
    return method


def solve_continuum(pde: ContinuumPDE, rho_lm0, t_final, *, method="dopri5", step=None, save=None,
                    checkpointing=None, monitor=True, tail_tol=1e-3, negative_tol=1e-4, normalize=False,
                    progress=None, **kw):
    """Evolve the density with coefficients ``rho_lm0`` from ``t = 0`` to ``t_final``.

    Parameters
    ----------
    rho_lm0 : ndarray, shape (nalm,)
        Initial coefficients; must be finite with mass 1 unless ``normalize=True``.
    method, step
        Integrator settings (:class:`~meanfield.core.options.StepControl`, default ``rtol=1e-8``,
        ``atol=1e-12``).  A fixed-step method without ``step.dt`` takes the CFL step
        ``pde.cfl_dt(rho_lm0, cfl, method)`` (``step.cfl`` default 0.5) at the initial state: the
        scheme's own stability reach, see :meth:`ContinuumPDE.cfl_dt`.
    save, checkpointing
        :class:`~meanfield.core.options.SaveAt` (default 11 equispaced times, ``observe=True``: the
        :func:`meanfield.field_diagnostics.field_observer` of the PDE) and
        :class:`~meanfield.core.options.Checkpointing`.
        Split schemes (``"etdrk4"``, ``"lawson_dopri5"`` with error control, ...) take the
        diffusion ``nu Lap`` as their linear part (:meth:`ContinuumPDE.split`): its stable step
        does not depend on ``nu lmax^2``.
    monitor : bool
        Stop (status 1, with the time and the reason) once the density is no longer resolved:
        :func:`meanfield.field_diagnostics.field_resolution_monitor` with ``tail_tol``, ``negative_tol``.
    progress : bool or None
        tqdm bar labelled ``"PDE"`` (another ``progress_label`` may be passed); None: only on a terminal.
    """
    if not isinstance(pde, ContinuumPDE):
        raise ValueError(f"pde must be a meanfield.ContinuumPDE (solve_reduced takes the circle and axisymmetric "
                         f"PDEs); received {type(pde).__name__}")
    t_final = validate.real("t_final", t_final, positive=True)
    rho_lm0 = normalize_density(pde.grid, rho_lm0) if normalize else check_density(pde.grid, rho_lm0, "rho_lm0")
    sc = option("step", step, StepControl).with_defaults(1e-8, 1e-12)
    sv = option("save", save, SaveAt)
    dt, t_eval, observe = sc.dt, sv.t_eval, sv.observe
    stepper = as_stepper(method)
    fixed = sc.adaptive is False or not stepper.adaptive
    if fixed and dt is None:
        dt = pde.cfl_dt(rho_lm0, 0.5 if sc.cfl is None else sc.cfl, stepper)
    hook = field_diagnostics.field_observer(pde) if observe is True else (observe or None)
    event = field_diagnostics.field_resolution_monitor(pde, tail_tol, negative_tol) if monitor else None
    rhs = pde.rhs
    if stepper.split:                      # diffusion as the split scheme's linear part (implicit / exact)
        kw["linear"], rhs = pde.split()
    kw.setdefault("progress_label", "PDE")
    return integrate(rhs, pde.state(rho_lm0), (0.0, float(t_final)), method=method,
                     step=replace(sc, dt=dt, cfl=None), save=replace(sv, t_eval=_times(t_final, t_eval), observe=hook),
                     checkpointing=checkpointing, event=event, progress=progress, **kw)
