"""The main job: a continuum run and a particle run from the same start, compared by W2.

:func:`run` turns a :class:`~meanfield.config.RunConfig` into an xarray Dataset (schema in
:mod:`meanfield.results`): it builds the heads and the initial vMF-mixture density from the
config and hands them to :func:`meanfield.paired.paired_run`, the one paired engine (the PDE on
S^2, ``n`` particles sampled from the same density, the particle observer, checkpoints, and at
every recorded time the 2-Wasserstein distance between the particles and the density, carried by
the Gauss-Legendre nodes of degree ``lmax``), then converts its
:class:`~meanfield.paired.PairedResult` (:func:`to_dataset`).  :func:`main_job` also writes the
dataset and the figures into a folder; :func:`summary` is the text the command line prints.

>>> from meanfield.config import RunConfig
>>> ds = run(RunConfig.from_dict({"pde": {"lmax": 15}, "particles": {"n": 200}}), progress=False)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import xarray as xr

from ..core.densities import sample_particles, vmf_mixture_density
from ..core.heads import Head
from ..core.sphere import SphereGrid, to_lm_table
from .checkpoint import Checkpointer, RunInterrupted
from .config import RunConfig, load_config
from .paired import PairedResult, align_times, paired_run, transport_grid
from .results import SCHEMA_VERSION, observables_to_variables, save

__all__ = ["build_heads", "initial_density", "initial_state", "run", "to_dataset", "summary", "main_job", "resume_job",
           "RunInterrupted", "SPECTRAL_TOL"]


def build_heads(config: RunConfig) -> tuple[Head, ...]:
    """Zonal heads ``M = V = lam I`` in d = 3 from ``config.heads``."""
    return tuple(Head(h.lam * np.eye(3), h.lam * np.eye(3), **h.head_kwargs()) for h in config.heads)


def initial_density(config: RunConfig, grid: SphereGrid):
    """Initial coefficients ``rho_lm0`` (nalm,) on ``grid``: the config's vMF mixture."""
    ic = config.initial
    return vmf_mixture_density(grid, np.array(ic.mus), np.array(ic.kappas) if len(ic.kappas) > 1 else ic.kappas[0],
                               None if ic.weights is None else np.array(ic.weights), ic.floor)


def initial_state(config: RunConfig, grid: SphereGrid):
    """Initial coefficients ``rho_lm0`` (nalm,) on ``grid`` and particles ``X0`` (n, 3) sampled from them
    (the draw :func:`run` makes inside :func:`~meanfield.paired.paired_run`)."""
    rho_lm0 = initial_density(config, grid)
    X0 = sample_particles(grid, rho_lm0, config.particles.n, method=config.particles.sampling, seed=config.seed)
    return rho_lm0, X0


SPECTRAL_TOL = 1e-10
"""Accuracy of spectral particle sums in the main job (``ParticleSystem``'s default tolerance, as since 0.1)."""


def run(config: RunConfig | None = None, progress=None, checkpoints=None) -> xr.Dataset:
    """Run the main job and return its dataset (nothing is written but checkpoints).

    Parameters
    ----------
    config : RunConfig, optional
        Default: ``RunConfig()``, the built-in demonstration.
    progress : bool or None
        tqdm bars (None: only when stderr is a terminal).
    checkpoints : Checkpointer, optional
        Save integrator states every ``config.outputs.checkpoint_every`` (simulated time) and on
        Ctrl-C, and continue from the states found there: a resumed run gives the same numbers,
        bit for bit, as an uninterrupted one.  An interrupt raises :class:`RunInterrupted`.

    Returns
    -------
    xarray.Dataset
        Dimensions ``time`` (``integrator.n_frames``), ``particle`` (n), ``dim`` (3), ``head`` (H),
        ``lat``, ``lon`` (display grid ``2 (lmax+1) x 4 (lmax+1)``), ``l``, ``m`` (lmax+1 each).
    """
    config = RunConfig() if config is None else config
    if not isinstance(config, RunConfig):
        raise ValueError(f"config must be a RunConfig; received {type(config).__name__}")
    started = time.perf_counter()
    ic, lmax = config.integrator, config.pde.lmax
    times = np.linspace(0.0, ic.t_final, ic.n_frames)
    result = paired_run(                 # samples the particles from the density (as initial_state does)
        build_heads(config), lambda grid: initial_density(config, grid), config.particles.n, ic.t_final, times,
        lmax, sampling=config.particles.sampling, seed=config.seed, nu=config.pde.nu, particle_sums="auto",
        particle_method=ic.method, particle_dt=ic.dt, particle_rtol=ic.rtol, particle_atol=ic.atol,
        spectral_tol=SPECTRAL_TOL, pde_method=ic.method, pde_dt=ic.dt, pde_rtol=ic.rtol, pde_atol=ic.atol,
        monitor=True, tail_tol=config.pde.tail_tol, negative_tol=config.pde.negative_tol,
        transport_grid=transport_grid(lmax + 1), w2_method=config.outputs.w2_method, metric="geodesic",
        negative="drop", progress=progress, checkpoints=checkpoints,
        checkpoint_every=config.outputs.checkpoint_every)
    return to_dataset(result, config, elapsed_s=time.perf_counter() - started)


def to_dataset(result: PairedResult, config: RunConfig, elapsed_s=float("nan")) -> xr.Dataset:
    """The run dataset (schema of :mod:`meanfield.results`) of a paired run made from ``config``.

    States and observables are placed on the time axis ``result.times`` by
    :func:`~meanfield.paired.align_times` (NaN where a run did not reach a time); the density is
    also synthesized on the display grid ``2 (lmax+1) x 4 (lmax+1)``.
    """
    times, H, lmax = result.times, len(config.heads), config.pde.lmax
    rc = result.config
    made = (rc.get("lmax"), rc.get("n_particles"), len(rc.get("heads", ())))
    if made != (lmax, config.particles.n, H):
        raise ValueError(f"result must be a paired run made from config (lmax, n_particles, heads) = "
                         f"{(lmax, config.particles.n, H)}; received a run with {made}")
    T, n = times.size, result.particle_states.shape[1]
    rows, cols = align_times(times, result.pde_times)
    rho_lm = np.full((T, result.pde_coefficients.shape[1]), np.nan + 0j)
    rho_lm[cols] = result.pde_coefficients[rows]
    prow, pcol = align_times(times, result.particle_times)
    X = np.full((T, n, 3), np.nan)
    X[pcol] = result.particle_states[prow]

    display = SphereGrid(lmax, nlat=2 * (lmax + 1), nlon=4 * (lmax + 1))
    rho = np.full((T,) + display.shape, np.nan)
    rho[cols] = [display.synthesis(c) for c in rho_lm[cols]]
    re, im = to_lm_table(rho_lm, lmax)
    data = {"X": (("time", "particle", "dim"), X), "rho": (("time", "lat", "lon"), rho),
            "rho_lm_real": (("time", "l", "m"), re), "rho_lm_imag": (("time", "l", "m"), im),
            "w2": (("time",), result.w2), "w2_negative_mass": (("time",), result.w2_negative_mass)}
    data.update(observables_to_variables(result.pde, "pde_", rows, cols, T, H))
    data.update(observables_to_variables(result.particles, "particle_", prow, pcol, T, H))
    coords = {"time": times, "particle": np.arange(n), "dim": ["x", "y", "z"], "head": np.arange(H),
              "lat": 90.0 - np.degrees(display.theta), "lon": np.degrees(display.phi),
              "l": np.arange(lmax + 1), "m": np.arange(lmax + 1),
              "head_lambda": ("head", [h.lam for h in config.heads]),
              "head_beta": ("head", [h.beta for h in config.heads])}
    from .. import __version__
    tg = rc["transport_grid"]
    attrs = {"schema_version": SCHEMA_VERSION, "meanfield_version": __version__, "seed": config.seed,
             "config": json.dumps(config.to_dict(), sort_keys=True),
             "pde_status": result.pde_status, "pde_message": result.pde_message, "pde_t_final": result.pde_t_stop,
             "pde_nfev": rc["pde_nfev"], "particle_status": result.particle_status,
             "particle_message": result.particle_message, "particle_t_final": result.particle_t_stop,
             "particle_nfev": rc["particle_nfev"], "particle_max_retraction": result.particle_max_retraction,
             "particle_sums": rc["particle_sums"],
             "w2_metric": rc["metric"], "w2_method": config.outputs.w2_method,
             "w2_grid_nlat": tg["nlat"], "w2_grid_nlon": tg["nlon"],
             "elapsed_s": elapsed_s}
    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    for name, text in (("X", "particle positions (unit vectors)"), ("rho", "density w.r.t. surface measure"),
                       ("w2", "2-Wasserstein distance, geodesic cost, radians"), ("lat", "latitude, degrees"),
                       ("lon", "longitude, degrees"), ("time", "time")):
        ds[name].attrs["long_name"] = text
    return ds


def _span(ds, name, k, reduce=None):
    a = ds[name].values[[0, k]]          # only the two reported times (later ones may be NaN)
    a = a if reduce is None else np.nanmean(a, axis=1)
    return f"{a[0]:.6g} -> {a[1]:.6g}"


def summary(ds: xr.Dataset) -> str:
    """A few lines describing a run dataset: setup, how far each run got, energies, entropies, W2."""
    cfg = json.loads(ds.attrs["config"])
    heads = ", ".join(f"lambda {h['lam']:g} beta {h['beta']:g} {h['kernel']}/{h['normalization']}"
                      for h in cfg["heads"])
    t = ds.time.values
    ok = np.flatnonzero(np.isfinite(ds["pde_energy"].values) & np.isfinite(ds["particle_energy"].values))
    k = ok[-1]
    w2 = ds["w2"].values
    monotone = [bool(np.all(np.diff(ds[f"{p}_energy"].values[:k + 1]) >= -1e-10)) for p in ("pde", "particle")]
    lines = [f"meanfield run: {len(cfg['heads'])} head(s) [{heads}]; PDE lmax {cfg['pde']['lmax']}; "
             f"n = {ds.sizes['particle']} particles; t in [0, {t[-1]:g}]; seed {ds.attrs['seed']}",
             f"PDE:       {ds.attrs['pde_message']} ({int(ds.attrs['pde_nfev'])} evaluations)",
             f"particles: {ds.attrs['particle_message']} ({int(ds.attrs['particle_nfev'])} evaluations)",
             f"from t = 0 to t = {t[k]:.3g}:",
             f"  energy              PDE {_span(ds, 'pde_energy', k)}, particles {_span(ds, 'particle_energy', k)}"
             f" (non-decreasing: {monotone[0]}, {monotone[1]})",
             f"  attention entropy   PDE {_span(ds, 'pde_entropy', k, 1)}, particles "
             f"{_span(ds, 'particle_entropy', k, 1)} (mean over heads; relative, 0 = clustered)",
             f"  max density         {_span(ds, 'pde_max_density', k)} (uniform: {1 / (4 * np.pi):.4g})",
             f"  W2(particles, PDE)  {w2[0]:.4f} -> {w2[k]:.4f} radians (t = 0: sampling error of "
             f"{ds.sizes['particle']} points)"]
    return "\n".join(lines)


def main_job(config: RunConfig | None = None, out_dir="meanfield-output", progress=None) -> dict:
    """Run, then write the dataset, the figures and the animation into ``out_dir``.

    Integrator states are checkpointed in ``out_dir/checkpoint/`` (every
    ``outputs.checkpoint_every`` and on Ctrl-C); :func:`resume_job` continues an interrupted run.
    The checkpoint folder is removed once the dataset is written.

    Returns
    -------
    dict with ``dataset`` (the xarray Dataset), ``paths`` (list of written files) and ``summary`` (str).
    """
    config = RunConfig() if config is None else config
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)       # fail before the run if the folder cannot be made
    checkpoints = Checkpointer(out / "checkpoint")
    if checkpoints.folder.exists():
        raise ValueError(f"out_dir {str(out)!r} holds the checkpoint of an unfinished run; continue it with "
                         f"'meanfield run --resume {out}' or remove {checkpoints.folder}")
    checkpoints.start(config.to_toml())
    try:
        return _finish(config, out, checkpoints, progress)
    except (RunInterrupted, KeyboardInterrupt):
        raise                                   # keep the checkpoint: the run can be resumed
    except BaseException:
        if not checkpoints.has_states():        # failed before any state was saved: nothing to resume
            checkpoints.clear()
        raise


def resume_job(out_dir, progress=None) -> dict:
    """Continue the interrupted run whose checkpoint is in ``out_dir/checkpoint/``."""
    out = Path(out_dir)
    checkpoints = Checkpointer(out / "checkpoint")
    if not (checkpoints.folder / "config.toml").is_file():
        raise ValueError(f"out_dir {str(out)!r} holds no checkpoint of an unfinished run "
                         f"(expected {checkpoints.folder / 'config.toml'})")
    return _finish(load_config(checkpoints.folder / "config.toml"), out, checkpoints, progress)


def _finish(config, out, checkpoints, progress):
    ds = run(config, progress=progress, checkpoints=checkpoints)
    paths = [save(ds, out / config.outputs.dataset)]
    checkpoints.clear()
    if config.outputs.figures or config.outputs.animation:
        from . import plotting  # matplotlib only when figures are asked for

        paths += plotting.save_figures(ds, out, dpi=config.outputs.dpi, figures=config.outputs.figures,
                                       animation=config.outputs.animation)
    return {"dataset": ds, "paths": paths, "summary": summary(ds)}
