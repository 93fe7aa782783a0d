"""Every check the main job makes before it computes, and the estimate of its time and memory.

:func:`estimate_cost` is calibrated from the rates of the solvers the run will call, measured on
the run's own sizes when they are cheap to measure:

* **PDE**: one right-hand side of the run's :class:`~meanfield.ContinuumPDE` is timed; when the
  whole PDE run is then modelled below :data:`PILOT_LIMIT_S` it is *run* (the pilot), which tells
  its right-hand-side count and where its resolution monitor stops it (the PDE stops early when
  the density concentrates beyond ``lmax``, and W2 is computed only up to there: a model cannot
  know that time, the pilot does).  Without the pilot, the count is modelled
  (:data:`PDE_NFEV_PER_TIME` per unit time at ``lmax`` 31 and ``rtol`` 1e-7, linear in ``lmax + 1``,
  ``rtol^(-1/5)`` for a fifth-order scheme) and the PDE is assumed to reach ``t_final``, an upper bound.
* **particles**: one velocity of the run's :class:`~meanfield.ParticleSystem` on ``n`` tokens
  sampled from the start is timed (or the direct-sum model where that alone exceeds the pilot
  limit); its evaluation count is the PDE's per unit time (the same heads and tolerances) over
  ``t_final`` (the particles always run to the end), or the exact count of a fixed-step scheme;
  plus the observer's records and :data:`meanfield.core.cost.STEP_OVERHEAD_S` per step.
* **W2**: the exact W2 of a frame from a fit over whole runs (its cost depends on the particles' distance to
  the density, which changes along the run), other methods' first frame timed; times the frames both runs
  reach; the output figures and animation add :data:`OUTPUT_S_PER_FRAME` per frame.

``benchmarks/estimate.py`` records estimate / actual over several configs (target: within a factor 3).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np

from ..core import validate
from ..core.cost import STEP_OVERHEAD_S
from ..core.densities import sample_particles
from ..core.integrate import estimate_nfev
from ..core.methods import as_stepper
from ..core.sphere import SphereGrid
from ..models.continuum import ContinuumPDE
from ..models.particles import ParticleSystem
from .config import RunConfig, resolve_positions
from .paired import density_measure, resolve_transport_grid
from .run import SPECTRAL_TOL, build_heads, initial_density, initial_particles, paired_settings

__all__ = ["estimate_cost", "available_memory", "preflight", "PILOT_LIMIT_S", "MEASURE_LMAX", "PDE_NFEV_PER_TIME",
           "PDE_RHS_S", "SPECTRAL_VELOCITY_S", "W2_EXACT_S", "W2_FLOOR_S", "W2_REFERENCE_NODES", "W2_SEMIDISCRETE_S_PER_POINT",
           "OUTPUT_S_PER_FRAME", "FIGURES_S"]

PILOT_LIMIT_S = 5.0
"""The PDE run is piloted (run in full by the estimate) when modelled below this many seconds."""

PDE_NFEV_PER_TIME = 170.0
"""Right-hand sides per unit time of the adaptive PDE run at lmax 31, rtol 1e-7 (the default run:
200 evaluations to t = 1.2, measured), for the model used without a pilot."""

OUTPUT_S_PER_FRAME = 0.35
"""The GIF animation per recorded frame (matplotlib; measured 0.2-0.45 s on the default run, idle to loaded)."""

MEASURE_LMAX = 255
"""Above this ``lmax`` building the PDE alone takes seconds: its rates are modelled, not measured."""

PDE_RHS_S = (1.0e-3, 1.6e-9)
"""Model of one PDE right-hand side, ``a + b (lmax + 1)^3 H`` seconds (measured: 1.3 ms at lmax 31
with the monitor's share, 1.7 s at lmax 1023, two heads)."""

SPECTRAL_VELOCITY_S = (5.0e-4, 2.0e-7)
"""Model of one spectral particle velocity, ``a + b n`` seconds (0.6 ms measured at n = 3000)."""

W2_EXACT_S = 3.5e-14
W2_FLOOR_S = 0.45
W2_REFERENCE_NODES = 2178
"""Model of one exact W2 of the main job per frame, ``W2_FLOOR_S (G / 2178)^3 + W2_EXACT_S n G^3`` seconds for n
particles and G transport nodes (the node measure's grid floor, then the network simplex), fitted to the mean time
per frame of whole runs (lmax 31, n = 300 to 5000: 0.47-1.7 s; lmax 47, n = 2000: 16 s); one frame is not timed
because the simplex's cost depends on how far the particles are from the density, which changes along the run."""

W2_SEMIDISCRETE_S_PER_POINT = 2.0e-4
"""Model of one semi-discrete W2 per frame, ``W2_SEMIDISCRETE_S_PER_POINT * n`` seconds for n particles (measured
on the default start at lmax 31: 0.98 s at n = 5000, 24 s at n = 10^5 at load 2); timed instead where the model
says under a second."""

FIGURES_S = 4.0
"""The PNG figures of a run (matplotlib; measured 2-4.2 s), whatever its size."""

_CACHE: dict = {}


def _best(f, repeats=2):
    t = np.inf
    for _ in range(repeats):
        tic = time.perf_counter()
        f()
        t = min(t, time.perf_counter() - tic)
    return t


def _nfev_adaptive(rate_per_time, t_final, rtol):
    return max(20.0, rate_per_time * t_final * (1e-7 / rtol) ** 0.2)


def estimate_cost(config: RunConfig, *, pilot=True) -> dict:
    """The run's peak memory (bytes) and wall time (seconds), estimated before it starts.

    Parameters
    ----------
    config : RunConfig
    pilot : bool
        Measure the solvers' rates on the run's own sizes (and run the PDE where that is cheap,
        see the module docstring); False: sizes and constants only (no computation).

    Returns
    -------
    dict
        ``memory_bytes`` and ``seconds`` (floats), the parts ``pde_s``, ``particles_s``, ``w2_s``,
        ``outputs_s``, the predicted ``pde_t_stop`` and ``frames`` (reached by both runs), and
        ``piloted`` (whether the PDE was run) and ``notes`` (str: what the estimate assumed).

    Raises
    ------
    ValueError
        ``config`` not a RunConfig, a non-boolean ``pilot``, or a positions file the config cannot use.
    """
    if not isinstance(config, RunConfig):
        raise ValueError(f"config must be a RunConfig; received {type(config).__name__}")
    pilot = validate.boolean("pilot", pilot)
    config = resolve_positions(config)
    key = (config.to_toml(), pilot)
    if key not in _CACHE:
        _CACHE.clear()                                 # one config (and pilot flag) at a time
        _CACHE[key] = _estimate(config, pilot)
    return dict(_CACHE[key])


def _memory(config):
    L, n, T = config.pde.lmax + 1, config.particles.n, config.integrator.n_frames
    nodes = (L + 1) * 2 * (L + 1)                          # transport_grid(lmax + 1): nlat x 2 nlat
    dataset = T * (L * L * 16 + 8 * L * L * 8 + n * 3 * 8)  # coefficients, display map (2L x 4L), particles
    working = 40 * (2 * L) * (4 * L) * 8                   # stages and grids of the PDE integrator
    method = config.outputs.w2_method
    if method == "auto":                                   # transport's rule for the density side
        method = "exact" if n * nodes <= 8000 ** 2 else "semidiscrete"
    w2 = 3 * n * nodes * 8 if method in ("exact", "sinkhorn") else 40 * (n + nodes) * 8
    return dataset + working + w2 + 200e6, method, nodes   # + the interpreter and its libraries


def _estimate(config, pilot):
    from ..analysis import diagnostics, transport
    from .simulate import solve_continuum

    memory, method, nodes = _memory(config)
    ic, lmax, n, nu = config.integrator, config.pde.lmax, config.particles.n, config.pde.nu
    # the output times (their count only, where a leg of extend asks for billions)
    times = np.linspace(0.0, ic.t_final, ic.n_frames) if ic.n_frames <= 10**5 else None
    settings = paired_settings(config)
    ps, qs, tr = settings["particles"], settings["pde"], settings["transport"]
    measure = pilot and lmax <= MEASURE_LMAX
    notes, measured = [], []
    heads = build_heads(config)

    # PDE: one right-hand side timed (or modelled), the run piloted where cheap
    if measure:
        pde = ContinuumPDE(heads, lmax, nu=nu)
        rho0 = initial_density(config, pde.grid)
        y0 = pde.state(rho0)
        t_rhs = _best(lambda: pde.rhs(0.0, y0))
    else:
        t_rhs = PDE_RHS_S[0] + PDE_RHS_S[1] * (lmax + 1) ** 3 * len(heads)
    if qs.step.dt is not None and not as_stepper(qs.method).adaptive:
        nfev_pde = estimate_nfev(qs.method, (0.0, ic.t_final), dt=qs.step.dt, t_eval=times, adaptive=False)["nfev"]
    else:
        nfev_pde = _nfev_adaptive(PDE_NFEV_PER_TIME * (lmax + 1) / 32.0, ic.t_final, ic.rtol)
    pde_s, t_stop, rate = nfev_pde * t_rhs, float(ic.t_final), None
    piloted = measure and pde_s < PILOT_LIMIT_S
    if piloted:
        tic = time.perf_counter()
        traj = solve_continuum(pde, rho0, ic.t_final, method=qs.method, step=qs.step, monitor=qs.monitor,
                               progress=False)
        pde_s = time.perf_counter() - tic
        t_stop, rate = float(traj.t_final), traj.nfev / max(float(traj.t_final), 1e-12)
        measured.append(f"PDE {pde_s:.2g} s (run in full)")
        if t_stop < ic.t_final:
            notes.append(f"the PDE stops at t = {t_stop:.3g} on its resolution monitor, W2 only to there")
    else:
        notes.append("the PDE is assumed to reach t_final (it stops earlier if its resolution monitor trips)")

    # particles: one velocity timed (or the sums' model), the evaluation count of the run
    system = ParticleSystem(heads, summation=ps.sums, kernel_tol=SPECTRAL_TOL, nu=nu)
    spectral = system.uses_spectral(n)
    t_vel = SPECTRAL_VELOCITY_S[0] + SPECTRAL_VELOCITY_S[1] * n if spectral else system.direct_cost(n)["seconds"]
    X0 = None
    if measure:
        X0 = initial_particles(config)
        if X0 is None:
            X0 = sample_particles(pde.grid, rho0, n, method=ps.sampling, seed=config.seed)
    if measure and t_vel < PILOT_LIMIT_S / 10:
        t_vel = _best(lambda: system.velocity(X0))
        measured.append(f"one particle velocity {t_vel:.2g} s")
    stepper = as_stepper(ps.method or ("geodesic_strang" if nu > 0 else "dopri5"))
    if stepper.stochastic or not stepper.adaptive:
        steps = estimate_nfev("euler", (0.0, ic.t_final), dt=ps.step.dt, t_eval=times)["steps"]
        nfev_p = steps * (stepper.n_drift if stepper.stochastic else int(np.size(stepper.explicit_tableau.b)))
    else:
        # the pilot's rate was measured at this rtol already; the model's is for rtol 1e-7
        nfev_p = (max(20.0, rate * ic.t_final) if rate is not None
                  else _nfev_adaptive(PDE_NFEV_PER_TIME, ic.t_final, ic.rtol))
        steps = nfev_p / 6.0
    records = ic.n_frames * max(1, diagnostics.observer_passes(system, n))
    particles_s = (nfev_p + records) * t_vel + steps * STEP_OVERHEAD_S

    # W2 at every frame both runs reach: one timed (or modelled from sizes)
    frames = (int(np.sum(times <= t_stop + 1e-12)) if times is not None else
              min(ic.n_frames, int(t_stop / ic.t_final * (ic.n_frames - 1)) + 1))
    exact = method in ("exact", "sinkhorn")
    if exact:          # network simplex and the grid floor: data-dependent, a fit over whole runs (not one frame)
        w2_frame = W2_FLOOR_S * (nodes / W2_REFERENCE_NODES) ** 3 + W2_EXACT_S * n * float(nodes) ** 3
    else:
        w2_frame = W2_SEMIDISCRETE_S_PER_POINT * n
    if measure and not exact and w2_frame < 1.0:
        nodes_, weights = density_measure(pde, rho0, resolve_transport_grid(pde, tr.grid))
        w2_frame = _best(lambda: transport.w2_particles_density(X0, nodes_, weights, method=tr.method,
                                                                 metric=tr.metric, negative=tr.negative,
                                                                 seed=config.seed), repeats=1)
        measured.append(f"one W2 {w2_frame:.2g} s")
    w2_s = frames * w2_frame
    out = config.outputs
    outputs_s = ic.n_frames * (OUTPUT_S_PER_FRAME * out.animation + FIGURES_S * out.figures / ic.n_frames)
    seconds = 2 * pde_s * piloted + pde_s * (not piloted) + particles_s + w2_s + outputs_s   # the run repeats a pilot
    if not all(h.is_zonal for h in heads):       # general heads: their operators, built once by each model
        ops = [(pde if measure else ContinuumPDE(heads, lmax, nu=nu)).general]
        if getattr(system.spectral, "operator", None) is not None and hasattr(system.spectral.operator, "estimate"):
            ops.append(system.spectral.operator)
        setups = [op.estimate() for op in ops]
        seconds += sum(c.seconds for c in setups)
        memory += sum(c.bytes for c in setups)
        notes.append("general heads: bispherical operators of degree "
                     + ", ".join(f"{op.lmax} ({who})" for op, who in zip(ops, ("PDE", "particles")))
                     + f" (setup about {sum(c.seconds for c in setups):.2g} s, "
                       f"{sum(c.bytes for c in setups) / 2**20:.2g} MiB)")
    if measured:
        notes.append("measured here: " + ", ".join(measured))
    else:
        notes.append("from sizes only (nothing measured)")
    return {"memory_bytes": float(memory), "seconds": float(seconds), "pde_s": float(pde_s),
            "particles_s": float(particles_s), "w2_s": float(w2_s), "outputs_s": float(outputs_s),
            "pde_t_stop": t_stop, "frames": frames, "piloted": bool(piloted), "notes": "; ".join(notes)}


def available_memory() -> float | None:
    """Bytes of memory available to a new run (``MemAvailable`` of /proc/meminfo), or None if unknown.

    Returns
    -------
    float or None
    """
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    try:
        import os
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def preflight(config: RunConfig, force=False) -> list[str]:
    """Every check the main job makes before computing; raises ``ValueError`` naming the keys to change.

    * each head's kernel stays finite in float64 (``exp`` heads with mean normalization: ``beta |lam|``);
    * the initial density is resolved at ``pde.lmax``: its spectral tail is below ``pde.tail_tol`` and
      its negative mass below ``pde.negative_tol`` (otherwise the PDE would stop at t = 0);
    * the estimated peak memory (:func:`estimate_cost`) fits in the available memory, unless ``force``.

    Parameters
    ----------
    config : RunConfig
        The run.
    force : bool
        Skip the memory check.

    Returns
    -------
    list of str
        Lines to print: the estimate of time and memory, and the values checked.

    Raises
    ------
    ValueError
        ``config`` not a RunConfig, a non-boolean ``force``, a kernel that overflows, an initial density not
        resolved at ``pde.lmax``, or a run above the available memory (each naming the keys to change).
    """
    from ..analysis.field_diagnostics import field_negative_mass, field_spectral_tail
    from ..core.heads import check_exp_range

    if not isinstance(config, RunConfig):
        raise ValueError(f"config must be a RunConfig; received {type(config).__name__}")
    force = validate.boolean("force", force)
    config = resolve_positions(config)
    heads = build_heads(config)
    try:
        check_exp_range(heads)                      # names heads[i] as the config does
    except ValueError as err:
        raise ValueError(f"{err}; in the config: lower that head's beta or lam, or set its normalization = "
                         f"\"softmax\"") from None
    lmax = config.pde.lmax
    grid = SphereGrid(lmax)
    rho_lm0 = initial_density(config, grid)
    probe = SimpleNamespace(grid=grid, lmax=lmax)
    tail, neg = field_spectral_tail(probe, rho_lm0), max(0.0, field_negative_mass(probe, rho_lm0))
    if tail > config.pde.tail_tol:
        raise ValueError(f"the initial density is not resolved at pde.lmax = {lmax}: its spectral tail {tail:.2e} "
                         f"exceeds pde.tail_tol = {config.pde.tail_tol:g}, so the PDE would stop at t = 0; raise "
                         f"pde.lmax, lower initial.kappas, or raise pde.tail_tol")
    if neg > config.pde.negative_tol:
        raise ValueError(f"the initial density truncated at pde.lmax = {lmax} has negative mass {neg:.2e} > "
                         f"pde.negative_tol = {config.pde.negative_tol:g}, so the PDE would stop at t = 0; raise "
                         f"pde.lmax, lower initial.kappas, or raise initial.floor")
    cost, avail = estimate_cost(config), available_memory()
    mem, secs = cost["memory_bytes"], cost["seconds"]
    parts = (f"PDE {_duration(cost['pde_s'])}, particles {_duration(cost['particles_s'])}, W2 "
             f"{_duration(cost['w2_s'])} over {cost['frames']} frames, outputs {_duration(cost['outputs_s'])}")
    lines = [f"estimate: about {_duration(secs)} and {mem / 1e9:.2g} GB of memory ({parts})"
             + ("" if avail is None else f"; {avail / 1e9:.3g} GB available")]
    if cost["notes"]:
        lines.append(f"estimate: {cost['notes']}")
    lines.append(f"start resolved at lmax {lmax}: spectral tail {tail:.1e} <= {config.pde.tail_tol:g}, "
                 f"negative mass {neg:.1e} <= {config.pde.negative_tol:g}")
    if avail is not None and mem > avail and not force:
        raise ValueError(f"the run needs about {mem / 1e9:.3g} GB of memory and {avail / 1e9:.3g} GB are available "
                         f"(pde.lmax = {lmax}, particles.n = {config.particles.n}, outputs.w2_method = "
                         f"{config.outputs.w2_method!r}); lower them, use outputs.w2_method = \"sliced\", or pass "
                         f"--force to try anyway")
    return lines


def _duration(seconds):
    if seconds < 10:
        return f"{seconds:.1g} s" if seconds >= 0.05 else "< 0.1 s"
    return f"{seconds:.0f} s" if seconds < 120 else (f"{seconds / 60:.0f} min" if seconds < 7200
                                                      else f"{seconds / 3600:.1f} h")
