"""One (n, seed) particle task of the continuum-scale study (run on a dask worker).

Kept in its own module so that workers import it by name (``studies.continuum_scale.tasks``): the
fixed inputs (heads, initial and PDE coefficients, times, distance settings) come in a
``functools.partial`` and each task's parameters are ``{"n": ..., "seed": ...}``.
"""

from __future__ import annotations

import time

import numpy as np

import meanfield as mf
from meanfield.analysis import transport
from meanfield.analysis.mmd import mmd_particles_field
from meanfield.analysis.transport import w2_particles_field
from meanfield.core.options import SaveAt, StepControl
from meanfield.workflow import paired


def _particles(setup: dict, n: int, seed: int):
    """The tokens' run of task ``(n, seed)``: the PDE grid, the output times and the trajectory."""
    heads = tuple(mf.Head.from_dict(h) for h in setup["heads"])
    pde = mf.ContinuumPDE(heads, int(setup["lmax"]))
    times = np.asarray(setup["times"], float)
    X0 = mf.densities.sample_particles(pde.grid, np.asarray(setup["rho0"]), n,
                                       seed=np.random.default_rng([int(setup["base_seed"]), n, seed]))
    system = mf.ParticleSystem(heads, summation="spectral", kernel_tol=float(setup["spectral_tol"]))
    traj = mf.solve_particles(system, X0, times[-1],
                              step=StepControl(rtol=float(setup["rtol"]), atol=float(setup["atol"])),
                              save=SaveAt(t_eval=times, observe=False), progress=False)
    if traj.status != 0 or traj.y.shape[0] != times.size:
        raise RuntimeError(f"particle run n = {n}, seed = {seed} stopped at t = {traj.t_final}: {traj.message}")
    return pde, times, traj


def _w2(setup: dict, pde, X, coeffs, n: int, out: dict, k: int) -> None:
    """The semi-discrete geodesic W2 of tokens ``X`` to the density ``coeffs`` into ``out[...][k]``
    (with the exact node-based fallback for ``n <= w2_fallback_max_n``; left NaN beyond it)."""
    tic = time.perf_counter()
    try:
        res = w2_particles_field(X, coeffs, pde.grid, metric="geodesic", tol=float(setup["w2_tol"]))
        out["w2"][k] = res.distance
        out["w2_lower"][k], out["w2_upper"][k] = res.info["geodesic_bracket"]
        out["w2_method"][k] = 0
    except RuntimeError:
        # the damped Newton step can fail when the tokens are far more concentrated than the
        # density (small n late in the run); then exact OT against the density on nodes,
        # with its grid floor as the bracket (|W2(nodes) - W2(field)| <= floor)
        if n > int(setup["w2_fallback_max_n"]):
            return
        tg = paired.transport_grid(int(setup["w2_fallback_nlat"]))
        nodes, w = paired.density_measure(pde, coeffs, tg)
        res = transport.w2_particles_density(X, nodes, w, method="exact", negative="drop", grid=tg)
        floor = res.info.get("grid_floor") or np.nan
        out["w2"][k] = res.distance
        out["w2_lower"][k], out["w2_upper"][k] = res.distance - floor, res.distance + floor
        out["w2_method"][k] = 1
    out["w2_seconds"][k] = time.perf_counter() - tic


W2_KEYS = ("w2", "w2_lower", "w2_upper", "w2_seconds", "w2_method")


def particle_task(setup: dict, params: dict) -> dict:
    """Sample ``n`` tokens from the PDE's initial density (stream ``default_rng([base_seed, n, seed])``),
    run them to the last comparison time and measure MMD (H^-s and exp kernels) at every time and the
    semi-discrete geodesic W2 at ``w2_times`` when ``n <= w2_max_n``.

    ``setup`` keys: ``heads`` (dicts), ``lmax``, ``rho0`` (coefficients), ``times`` (T,),
    ``coeffs`` (T, nalm) of the PDE at those times, ``rtol``, ``atol``, ``spectral_tol``,
    ``mmd_s``, ``mmd_beta``, ``w2_times``, ``w2_max_n``, ``w2_tol``, ``w2_fallback_max_n``,
    ``w2_fallback_nlat``, ``base_seed``.  ``w2_method``: 0 semi-discrete, 1 exact against nodes (fallback).
    Returns arrays over the times (NaN where not computed) and timings.
    """
    n, seed = int(params["n"]), int(params["seed"])
    tic = time.perf_counter()
    pde, times, traj = _particles(setup, n, seed)
    grid, coeffs = pde.grid, np.asarray(setup["coeffs"])
    t_particles = time.perf_counter() - tic
    T = times.size
    out = {k: np.full(T, np.nan) for k in ("mmd_sobolev", "mmd_exp", "order") + W2_KEYS}
    w2_at = np.isin(np.round(times, 9), np.round(np.asarray(setup["w2_times"], float), 9))
    tic = time.perf_counter()
    for k in range(T):
        X = traj.y[k]
        out["order"][k] = float(np.linalg.norm(X.mean(axis=0)))
        out["mmd_sobolev"][k] = mmd_particles_field(X, coeffs[k], grid, kernel="sobolev", s=setup["mmd_s"]).distance
        out["mmd_exp"][k] = mmd_particles_field(X, coeffs[k], grid, kernel="exp", beta=setup["mmd_beta"]).distance
    t_mmd = time.perf_counter() - tic
    if n <= int(setup["w2_max_n"]):
        for k in np.flatnonzero(w2_at):
            _w2(setup, pde, traj.y[k], coeffs[k], n, out, k)
    return dict(out, n=n, seed=seed, particle_seconds=t_particles, mmd_seconds=t_mmd, nfev=int(traj.nfev))


def w2_task(setup: dict, params: dict) -> dict:
    """The semi-discrete W2 at ``w2_times`` for a task ``(n, seed)`` beyond ``w2_max_n``.

    Re-runs exactly :func:`particle_task`'s tokens (same stream, same integrator) and measures W2 at
    ``w2_times`` whatever ``n`` (``setup`` as there; ``w2_max_n`` ignored), and the H^-s MMD at the
    same times, so that the caller can check the re-run against the particle task's MMD (the same
    trajectory up to the summation's floating-point order).  Arrays over all the times, NaN elsewhere.
    """
    n, seed = int(params["n"]), int(params["seed"])
    tic = time.perf_counter()
    pde, times, traj = _particles(setup, n, seed)
    coeffs = np.asarray(setup["coeffs"])
    t_particles = time.perf_counter() - tic
    out = {k: np.full(times.size, np.nan) for k in ("mmd_sobolev",) + W2_KEYS}
    for k in np.flatnonzero(np.isin(np.round(times, 9), np.round(np.asarray(setup["w2_times"], float), 9))):
        out["mmd_sobolev"][k] = mmd_particles_field(traj.y[k], coeffs[k], pde.grid, kernel="sobolev",
                                                    s=setup["mmd_s"]).distance
        _w2(setup, pde, traj.y[k], coeffs[k], n, out, k)
    return dict(out, n=n, seed=seed, particle_seconds=t_particles, nfev=int(traj.nfev))
