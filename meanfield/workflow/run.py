"""The main job: a continuum run and a particle run from the same start, compared by W2.

:func:`run` turns a :class:`~meanfield.workflow.config.RunConfig` into an xarray Dataset (schema in
:mod:`meanfield.workflow.results`): it builds the heads and the initial vMF-mixture density from the
config and hands them to :func:`meanfield.workflow.paired.paired_run`, the one paired engine (the PDE on
S^2, ``n`` particles sampled from the same density, the particle observer, checkpoints, and at
every recorded time the 2-Wasserstein distance between the particles and the density, carried by
the Gauss-Legendre nodes of degree ``lmax``), then converts its
:class:`~meanfield.workflow.paired.PairedResult` (:func:`run_dataset`).  :func:`run_summary` is the text the
command line prints; :mod:`meanfield.workflow.preflight` holds every check made before computing
and the estimate of time and memory.  Writing the dataset and the figures into a job folder (locking, resume, markers) is
:mod:`meanfield.workflow.jobs`; continuing a finished run is :mod:`meanfield.workflow.extend`.

>>> from meanfield.workflow.config import RunConfig
>>> ds = run(RunConfig.from_dict({"pde": {"lmax": 15}, "particles": {"n": 200}}), progress=False)  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import json
import time

import numpy as np
import xarray as xr

from .._version import __version__
from ..core import validate
from ..core.densities import vmf_mixture_density
from ..core.heads import Head
from ..core.options import Monitor, StepControl
from ..core.sphere import SphereGrid, to_lm_table
from .checkpoint import Checkpointer
from .config import RunConfig, resolve_positions
from .inputs import parse_json
from .paired import PairedResult, ParticleSettings, PDESettings, TransportSettings, align_times, paired_run, transport_grid
from .results import SCHEMA_VERSION, describe, observables_to_variables

__all__ = ["build_heads", "initial_density", "run", "run_dataset", "run_summary",
           "SPECTRAL_TOL", "initial_particles", "paired_settings"]


_RENAMED = {"to_dataset": "run_dataset", "summary": "run_summary"}
"""The names of 0.2 and their replacements (one public name, one meaning: issue 32)."""


def __getattr__(name):
    """Module attribute fallback: the names of 0.2 (:data:`_RENAMED`) raise an ``AttributeError`` naming their
    replacement.

    Parameters
    ----------
    name : str
        The attribute looked up.

    Raises
    ------
    AttributeError
        Always (this is called only for names the module does not define).
    """
    if name in _RENAMED:
        raise AttributeError(f"meanfield.workflow.run.{name} was renamed {_RENAMED[name]} in 0.3 (the equilibria job's are equilibria_dataset and equilibria_summary)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_heads(config: RunConfig) -> tuple[Head, ...]:
    """Heads in d = 3 from ``config.heads``: zonal ``M = V = lam I``, or general ``M``, ``V`` (inline or .npy).

    Parameters
    ----------
    config : RunConfig
        A config (or any object whose ``heads`` are :class:`~meanfield.workflow.config.HeadConfig` s, such as an
        :class:`~meanfield.workflow.equilibria_config.EquilibriaConfig`).

    Returns
    -------
    tuple of Head

    Raises
    ------
    ValueError
        A matrix file that does not load, a matrix that is not a finite real 3x3 one (named ``heads[i].M`` /
        ``.V``), or what :class:`~meanfield.core.heads.Head` refuses.
    """
    def matrix(h, i, which):
        value = getattr(h, which)
        if isinstance(value, str):
            from .inputs import load_array

            value = load_array(value, f"heads[{i}].{which}")
        return validate.real_array(f"heads[{i}].{which}", value)       # complex or NaN: refused by the key

    heads = []
    for i, h in enumerate(config.heads):
        if h.M is None:
            heads.append(Head(h.lam * np.eye(3), h.lam * np.eye(3), **h.head_kwargs()))
            continue
        M, V = matrix(h, i, "M"), matrix(h, i, "V")
        for which, A in (("M", M), ("V", V)):
            if A.shape != (3, 3):
                raise ValueError(f"heads[{i}].{which} must be a 3x3 matrix; received shape {A.shape}")
        heads.append(Head(M, V, **h.head_kwargs()))
    return tuple(heads)


def initial_density(config: RunConfig, grid: SphereGrid):
    """Initial coefficients ``rho_lm0`` (nalm,) on ``grid``: the config's vMF mixture, or its
    ``initial.coefficients`` file or ``initial.profile`` (:mod:`meanfield.workflow.inputs`).

    Parameters
    ----------
    config : RunConfig
        The run.
    grid : SphereGrid
        The grid of the coefficients.

    Returns
    -------
    ndarray, shape (nalm,)
        The coefficients, mass 1.
    """
    ic = config.initial
    if ic.coefficients is not None:
        from .inputs import density_from_coefficients, load_array

        return density_from_coefficients(grid, load_array(ic.coefficients, "initial.coefficients"),
                                         "initial.coefficients")
    if ic.profile is not None:
        from .inputs import zonal_density

        return zonal_density(grid, **ic.profile, name="initial.profile")
    return vmf_mixture_density(grid, np.array(ic.mus), np.array(ic.kappas) if len(ic.kappas) > 1 else ic.kappas[0],
                               None if ic.weights is None else np.array(ic.weights), ic.floor)


def initial_particles(config: RunConfig):
    """The tokens (n, 3) of ``particles.positions``, or None when they are sampled from the density.

    Parameters
    ----------
    config : RunConfig
        The run.

    Returns
    -------
    ndarray, shape (n, 3), or None
    """
    if config.particles.positions is None:
        return None
    from .inputs import load_positions

    return load_positions(config.particles.positions, "particles.positions")


SPECTRAL_TOL = 1e-10
"""Accuracy of spectral particle sums in the main job (``ParticleSystem``'s default tolerance, as since 0.1)."""


@validate.moved(checkpoint_every="the period of the checkpointer: checkpoints=Checkpointer(folder, every=...)")
def run(config: RunConfig | None = None, progress=None, checkpoints=None) -> xr.Dataset:
    """Run the main job and return its dataset (nothing is written but checkpoints).

    Parameters
    ----------
    config : RunConfig, optional
        Default: ``RunConfig()``, the built-in demonstration.
    progress : bool or None
        tqdm bars (None: only when stderr is a terminal).
    checkpoints : meanfield.workflow.checkpoint.Checkpointer, optional
        Save integrator states every ``checkpoints.every`` (simulated time; None: every
        ``config.outputs.checkpoint_every``) and on Ctrl-C, and continue from the states found there: a resumed
        run gives the same numbers, bit for bit, as an uninterrupted one (the period says when saves happen,
        never the numbers).  An interrupt raises :class:`~meanfield.workflow.checkpoint.RunInterrupted`.

    Returns
    -------
    xarray.Dataset
        Dimensions ``time`` (``integrator.n_frames``), ``particle`` (n), ``dim`` (3), ``head`` (H),
        ``lat``, ``lon`` (display grid ``2 (lmax+1) x 4 (lmax+1)``), ``l``, ``m`` (lmax+1 each).

    Raises
    ------
    ValueError
        ``config`` not a RunConfig, a non-boolean ``progress``, ``checkpoints`` not a ``Checkpointer``, a positions
        file the config cannot use, or what
        the paired run refuses (heads, sizes above the cost limits).
    TypeError
        ``checkpoint_every`` of 0.2: the message says where the period is now (``Checkpointer(folder, every=)``).
    """
    config = RunConfig() if config is None else config
    if not isinstance(config, RunConfig):
        raise ValueError(f"config must be a RunConfig; received {type(config).__name__}")
    if progress is not None:
        validate.boolean("progress", progress)       # refused before the run starts
    started = time.perf_counter()
    config = resolve_positions(config)               # particles.n from particles.positions, if given
    ic = config.integrator
    times = np.linspace(0.0, ic.t_final, ic.n_frames)
    if checkpoints is not None and not isinstance(checkpoints, Checkpointer):
        raise ValueError(f"checkpoints must be a Checkpointer or None; received {type(checkpoints).__name__}")
    if checkpoints is not None and checkpoints.every is None:      # the config's period (the caller's object kept)
        checkpoints = copy.copy(checkpoints)
        checkpoints.every = config.outputs.checkpoint_every
    result = paired_run(                 # samples the particles from the density
        build_heads(config), lambda grid: initial_density(config, grid), config.particles.n, ic.t_final, times,
        **paired_settings(config), progress=progress, checkpoints=checkpoints,
        **({} if config.particles.positions is None else {"X0": initial_particles(config)}))
    return run_dataset(result, config, elapsed_s=time.perf_counter() - started)


def paired_settings(config: RunConfig) -> dict:
    """Keywords of :func:`~meanfield.workflow.paired.paired_run` the main job takes from ``config`` (besides the heads,
    the start, the sizes and the times): sampling, seed, noise, integrators, monitor, transport grid, W2.

    Parameters
    ----------
    config : RunConfig
        The run.

    Returns
    -------
    dict
        ``particles``, ``pde``, ``transport`` (the settings objects of :mod:`meanfield.workflow.paired`), ``seed``
        and ``nu``.
    """
    ic, lmax = config.integrator, config.pde.lmax
    step = StepControl(dt=ic.dt, rtol=ic.rtol, atol=ic.atol)
    return dict(particles=ParticleSettings(sampling=config.particles.sampling, sums="auto", spectral_tol=SPECTRAL_TOL,
                                           method=ic.method if not config.pde.nu else None,   # noisy: the SDE default
                                           step=step),
                pde=PDESettings(lmax=lmax, method=config.pde.method or ic.method, step=step,
                                monitor=Monitor(config.pde.tail_tol, config.pde.negative_tol)),
                transport=TransportSettings(grid=transport_grid(lmax + 1), method=config.outputs.w2_method,
                                            metric="geodesic", negative="drop"),
                seed=config.seed, nu=config.pde.nu)


def run_dataset(result: PairedResult, config: RunConfig, elapsed_s=float("nan")) -> xr.Dataset:
    """The run dataset (schema of :mod:`meanfield.workflow.results`) of a paired run made from ``config``.

    States and observables are placed on the time axis ``result.times`` by
    :func:`~meanfield.workflow.paired.align_times` (NaN where a run did not reach a time); the density is
    also synthesized on the display grid ``2 (lmax+1) x 4 (lmax+1)``.  (Named ``to_dataset`` in 0.2; the
    equilibria job's is :func:`meanfield.workflow.equilibria_job.equilibria_dataset`.)

    Parameters
    ----------
    result : PairedResult
        A paired run made from ``config`` (:func:`meanfield.workflow.paired.paired_run`).
    config : RunConfig
    elapsed_s : float
        Wall time of the run, stored as the attribute ``elapsed_s``.

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    ValueError
        If ``result`` was made from another config (its ``lmax``, ``n_particles`` or number of heads differ).
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
            "w2": (("time",), result.w2), "w2_negative_mass": (("time",), result.w2_negative_mass),
            "w2_grid_floor": (("time",), np.array([np.nan if info.get("grid_floor") is None else info["grid_floor"]
                                                   for info in result.w2_info])),
            "w2_geodesic_lower": (("time",), result.w2_geodesic_bracket[:, 0]),
            "w2_geodesic_upper": (("time",), result.w2_geodesic_bracket[:, 1])}
    data.update(observables_to_variables(result.pde, "pde_", rows, cols, T, H))
    data.update(observables_to_variables(result.particles, "particle_", prow, pcol, T, H))
    coords = {"time": times, "particle": np.arange(n), "dim": ["x", "y", "z"], "head": np.arange(H),
              "lat": 90.0 - np.degrees(display.theta), "lon": np.degrees(display.phi),
              "l": np.arange(lmax + 1), "m": np.arange(lmax + 1),
              "head_lambda": ("head", [h.lam if h.M is None else np.nan for h in config.heads]),
              "head_beta": ("head", [h.beta for h in config.heads])}
    tg = rc["transport_grid"]
    attrs = {"schema_version": SCHEMA_VERSION, "meanfield_version": __version__, "seed": config.seed,
             "config": json.dumps(config.to_dict(), sort_keys=True),
             "pde_status": result.pde_status, "pde_message": result.pde_message, "pde_t_final": result.pde_t_stop,
             "pde_nfev": rc["pde_nfev"], "pde_method": str(rc["pde_method"]), "particle_status": result.particle_status,
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
    return describe(ds)                 # CF attributes (units, long_name, Conventions); values untouched


def _span(ds, name, k, reduce=None):
    a = ds[name].values[[0, k]]          # only the two reported times (later ones may be NaN)
    a = a if reduce is None else np.nanmean(a, axis=1)
    return f"{a[0]:.6g} -> {a[1]:.6g}"


def run_summary(ds: xr.Dataset) -> str:
    """A few lines describing a run dataset: setup, how far each run got, energies, entropies, W2 (the text
    ``meanfield run`` prints; named ``summary`` in 0.2, the equilibria job's is
    :func:`meanfield.workflow.equilibria_job.equilibria_summary`).

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset (:func:`run`, :func:`run_dataset`, or one loaded from a file).

    Returns
    -------
    str

    Raises
    ------
    KeyError
        If ``ds`` lacks a variable or attribute of the run schema (``config``, ``pde_energy``, ...).
    """
    cfg = parse_json(ds.attrs["config"], "the dataset's 'config' attribute")
    heads = ", ".join(("general M, V" if "M" in h else f"lambda {h.get('lam', 1.0):g}")
                      + f" beta {h['beta']:g} {h['kernel']}/{h['normalization']}" for h in cfg["heads"])
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
    if "w2_grid_floor" in ds and np.isfinite(ds["w2_grid_floor"].values[[0, k]]).all():
        floor = ds["w2_grid_floor"].values
        lines.append(f"  W2 grid floor       {floor[0]:.4f} -> {floor[k]:.4f} radians (the density carried by "
                     f"{ds.attrs.get('w2_grid_nlat', '?')} x {ds.attrs.get('w2_grid_nlon', '?')} nodes; a node-based "
                     f"W2 cannot resolve less)")
    if "w2_geodesic_lower" in ds and np.isfinite(ds["w2_geodesic_lower"].values[[0, k]]).all():
        lo, hi = ds["w2_geodesic_lower"].values, ds["w2_geodesic_upper"].values
        lines.append(f"  W2 geodesic bracket [{lo[0]:.4f}, {hi[0]:.4f}] -> [{lo[k]:.4f}, {hi[k]:.4f}] radians "
                     f"(semi-discrete: chordal W2 exact, geodesic bracketed; w2 is the midpoint of the squares)")
    return "\n".join(lines)
