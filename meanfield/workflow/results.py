"""Results of the main job as xarray Datasets, saved to NetCDF with their config and schema version.

Dimensions (:data:`DIMS`): ``time``, ``particle``, ``dim``, ``head``, ``lat``, ``lon``, ``l``, ``m``.
A run dataset holds

* ``X`` (time, particle, dim): particle positions; ``rho`` (time, lat, lon): the density on a
  display grid (latitude/longitude in degrees); ``rho_lm_real``, ``rho_lm_imag`` (time, l, m):
  its spherical-harmonic coefficients (:mod:`meanfield.core.sphere` convention, NaN where ``m > l``);
* per-run observables prefixed ``pde_`` and ``particle_`` (time) or (time, head), and ``w2``;
* attributes ``schema_version``, ``meanfield_version``, ``seed``, ``config`` (the full
  :class:`~meanfield.workflow.config.RunConfig` as JSON) and the status of each run.

Times a run did not reach (the PDE stops once ``lmax`` no longer resolves the density) hold NaN.
:func:`save` writes atomically (temporary name, then rename); :func:`load` refuses files of an
unknown schema version; :func:`config_of` rebuilds the config, so a run can be repeated from its file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

from .._version import __version__
from ..core.sphere import from_lm_table, lm_indices, to_lm_table
from .config import RunConfig
from .inputs import parse_json

__all__ = ["SCHEMA_VERSION", "DIMS", "SchemaError", "coefficients_to_lm", "lm_to_coefficients",
           "observables_to_variables", "VARIABLE_NAMES", "save", "load", "config_of", "density_coefficients", "describe",
           "provenance", "add_provenance", "CONVENTIONS", "INTEGER_COUNTS", "RUN_LAYOUT", "check_dims", "check_axis",
           "check_run_layout"]

SCHEMA_VERSION = 1
REQUIRED_VARIABLES = ("X", "rho", "rho_lm_real", "rho_lm_imag", "w2", "pde_energy", "particle_energy")
DIMS = ("time", "particle", "dim", "head", "lat", "lon", "l", "m")
ENGINE = "netcdf4"


class SchemaError(ValueError):
    """A results file has no or an unknown schema version."""


def coefficients_to_lm(rho_lm, l_index, m_index, lmax):
    """Coefficient vectors (..., nalm) -> real and imaginary parts (..., lmax+1, lmax+1), NaN for m > l.

    The layout is :mod:`meanfield.core.sphere`'s (:func:`~meanfield.core.sphere.to_lm_table`); ``l_index`` and
    ``m_index`` must be that layout's (:func:`~meanfield.core.sphere.lm_indices`), as a grid of degree
    ``lmax`` gives them.

    Parameters
    ----------
    rho_lm : array_like, shape (..., nalm)
        Coefficients.
    l_index, m_index : array_like, shape (nalm,)
        The layout's degrees and orders.
    lmax : int
        The degree.

    Returns
    -------
    re, im : ndarray, shape (..., lmax+1, lmax+1)

    Raises
    ------
    ValueError
        ``l_index`` / ``m_index`` not the layout of degree ``lmax``, or ``rho_lm`` of another length.
    """
    _check_layout(l_index, m_index, lmax)
    return to_lm_table(rho_lm, lmax)


def lm_to_coefficients(re, im, l_index, m_index):
    """Inverse of :func:`coefficients_to_lm`: (..., l, m) parts -> complex vectors (..., nalm).

    Parameters
    ----------
    re, im : array_like, shape (..., lmax+1, lmax+1)
        Real and imaginary parts.
    l_index, m_index : array_like, shape (nalm,)
        The layout's degrees and orders.

    Returns
    -------
    ndarray, shape (..., nalm), complex

    Raises
    ------
    ValueError
        ``l_index`` / ``m_index`` not the layout of the tables' degree, or tables of unequal or non-square shapes.
    """
    _check_layout(l_index, m_index, np.shape(re)[-1] - 1 if np.ndim(re) else -1)
    return from_lm_table(re, im)


def _check_layout(l_index, m_index, lmax):
    ref = lm_indices(lmax) if lmax >= 0 else (None, None)
    if not (np.array_equal(l_index, ref[0]) and np.array_equal(m_index, ref[1])):
        raise ValueError(f"l_index and m_index must be the coefficient layout of meanfield.core.sphere for lmax = "
                         f"{lmax} (SphereGrid(lmax).l_index, .m_index); received arrays of shapes "
                         f"{np.shape(l_index)} and {np.shape(m_index)} with another order")


VARIABLE_NAMES = {"relative_entropy": "entropy", "entropy": None}
"""Observer keys stored under another variable name (None: not stored).  Schema 1 names the relative
attention entropy (MODEL.md section 3, the quantity particles and PDE share; the observers'
``relative_entropy``) ``pde_entropy`` / ``particle_entropy``; the particles' Shannon entropy (observer
key ``entropy``, ``= relative + log n`` for the run's uniform tokens) is not stored."""


def observables_to_variables(observables, prefix, rows, cols, n_times, n_heads):
    """``Trajectory.observables`` -> {name: (dims, values)} on the full time axis (NaN where not reached).

    Scalars per time become (time,), per-head arrays (T, H) become (time, head); keys are renamed
    (or left out) by :data:`VARIABLE_NAMES`.

    Parameters
    ----------
    observables : dict of str to array_like
        A trajectory's observables, each (T', ...) over the times reached.
    prefix : str
        Prefix of the variable names (``"pde_"``, ``"particle_"``).
    rows, cols : index arrays
        Which observable rows go to which positions of the full time axis.
    n_times : int
        Length of the full time axis.
    n_heads : int
        Number of heads (the ``head`` dimension).

    Returns
    -------
    dict
        ``{name: (dims, values)}``; per-token records left out.
    """
    out = {}
    for key, val in observables.items():
        name = VARIABLE_NAMES.get(key, key)
        if name is None:
            continue
        val = np.asarray(val, dtype=float)
        if val.ndim == 1:
            dims, shape = ("time",), (n_times,)
        elif val.ndim == 2 and val.shape[1] == n_heads:
            dims, shape = ("time", "head"), (n_times, n_heads)
        else:
            continue  # per-token records are not part of the schema
        full = np.full(shape, np.nan)
        full[cols] = val[rows]
        out[f"{prefix}{name}"] = (dims, full)
    return out


def density_coefficients(ds: xr.Dataset, time_index: int):
    """Complex coefficients ``rho_lm`` (nalm,) of the density at ``ds.time[time_index]``.

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset.
    time_index : int
        Index along ``time`` (negative counts from the end).

    Returns
    -------
    ndarray, shape (nalm,), complex
    """
    return from_lm_table(ds["rho_lm_real"].values[time_index], ds["rho_lm_imag"].values[time_index])


def config_of(ds: xr.Dataset) -> RunConfig:
    """The validated :class:`~meanfield.workflow.config.RunConfig` stored in a dataset's ``config`` attribute.

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset.

    Returns
    -------
    RunConfig

    Raises
    ------
    SchemaError
        No ``config`` attribute.
    ValueError
        An attribute that is not valid JSON, or a config :meth:`RunConfig.from_dict` refuses
        (:class:`~meanfield.workflow.config.ConfigError`).
    """
    if "config" not in ds.attrs:
        raise SchemaError("the dataset has no 'config' attribute; it was not written by meanfield.workflow.results")
    return RunConfig.from_dict(parse_json(ds.attrs["config"], "the dataset's 'config' attribute"))


CONVENTIONS = "CF-1.10"
"""The NetCDF conventions run datasets follow (``Conventions`` attribute)."""

_DESCRIPTIONS = {                                   # name: (long_name, units); "1": dimensionless
    "time": ("time (dimensionless model time)", "1"),
    "particle": ("token index", "1"), "dim": ("Cartesian component", "1"), "head": ("attention head index", "1"),
    "l": ("spherical-harmonic degree", "1"), "m": ("spherical-harmonic order", "1"),
    "lat": ("latitude", "degrees_north"), "lon": ("longitude", "degrees_east"),
    "head_lambda": ("head strength lambda (M = V = lambda I)", "1"),
    "head_beta": ("head inverse temperature beta", "1"),
    "X": ("particle positions (unit vectors in R^3)", "1"),
    "rho": ("density with respect to the surface measure of the unit sphere", "sr-1"),
    "rho_lm_real": ("real part of the density's spherical-harmonic coefficients (NaN for m > l)", "1"),
    "rho_lm_imag": ("imaginary part of the density's spherical-harmonic coefficients (NaN for m > l)", "1"),
    "w2": ("2-Wasserstein distance between particles and PDE density, geodesic cost", "rad"),
    "w2_negative_mass": ("negative mass of the PDE density dropped before W2", "1"),
    "w2_grid_floor": ("W2 between the density's node measure and the density itself (the node-based W2's floor)",
                      "rad"),
    "w2_geodesic_lower": ("lower bound of the geodesic W2 (semi-discrete transport; NaN for node-based methods)",
                          "rad"),
    "w2_geodesic_upper": ("upper bound of the geodesic W2 (semi-discrete transport; NaN for node-based methods)",
                          "rad"),
}
_OBSERVABLES = {
    "mass": ("total mass", "1"), "energy": ("interaction energy", "1"),
    "energy_head": ("interaction energy per head", "1"), "dissipation": ("energy dissipation rate", "1"),
    "boltzmann_entropy": ("Boltzmann entropy -int rho log rho", "1"), "negative_mass": ("negative mass", "1"),
    "spectral_tail": ("relative L2 size of the top third of degrees", "1"),
    "max_density": ("maximum density", "sr-1"), "order_parameter": ("order parameter |mean of x|", "1"),
    "second_moment": ("second moment", "1"), "entropy": ("relative attention entropy per head", "1"),
    "min_inner": ("smallest inner product between tokens", "1"),
    "mean_inner": ("mean inner product between tokens", "1"),
    "n_clusters": ("number of clusters", "1"),
    "free_energy_dissipation": ("free-energy dissipation rate", "1"),
}
_PREFIXES = {"pde_": "PDE", "particle_": "particles"}

INTEGER_COUNTS = ("particle_n_clusters",)
"""Variables holding counts: stored as integers in NetCDF (fill value -1 where a run did not reach a
time); they read back as floats with NaN there, equal to what was written."""


def describe(ds: xr.Dataset) -> xr.Dataset:
    """Add CF attributes (``long_name`` and ``units`` on every variable, latitude/longitude standard
    names, ``Conventions``) to a run dataset, in place; values are untouched.  Returns ``ds``.

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset (with ``lat``, ``lon`` and ``time``).

    Returns
    -------
    xarray.Dataset
        ``ds`` itself.
    """
    for name in ds.variables:
        text = _DESCRIPTIONS.get(name)
        if text is None:
            prefix = next((p for p in _PREFIXES if name.startswith(p)), None)
            obs = _OBSERVABLES.get(name[len(prefix):]) if prefix else None
            text = ((f"{obs[0]} ({_PREFIXES[prefix]})", obs[1]) if obs else
                    (name.replace("_", " "), "1"))
        ds[name].attrs.setdefault("long_name", text[0])
        ds[name].attrs["units"] = text[1]
    ds["lat"].attrs.update(standard_name="latitude", axis="Y")
    ds["lon"].attrs.update(standard_name="longitude", axis="X")
    ds["time"].attrs.update(axis="T")
    ds.attrs["Conventions"] = CONVENTIONS
    ds.attrs.setdefault("title", "meanfield run: multi-head self-attention dynamics, particles and mean-field PDE")
    ds.attrs.setdefault("source", f"meanfield {__version__}")
    return ds


def _git_commit():
    """The commit of the checkout the package runs from (``+dirty`` if modified), or ''."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return ""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return commit + ("+dirty" if commit and dirty else "")


def provenance(command=None, started=None, ended=None) -> dict:
    """Attributes saying what made a dataset: versions, git commit, command line, start and end times.

    ``command`` (str; default ``sys.argv`` joined), ``started`` and ``ended`` (Unix times; default
    now) are ISO 8601 UTC strings in the result.

    Parameters
    ----------
    command : str, optional
        The command line.
    started, ended : float, optional
        Unix times.

    Returns
    -------
    dict of str to str
    """
    import platform
    import sys
    from datetime import datetime, timezone
    from importlib import metadata

    def version(dist):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    def iso(t):
        return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")

    import time as _time
    now = _time.time()
    return {"meanfield_version": __version__, "git_commit": _git_commit(),
            "python_version": platform.python_version(),
            **{f"{d.lower()}_version": version(d) for d in ("numpy", "scipy", "ducc0", "POT", "xarray", "netCDF4")},
            "command": " ".join(sys.argv) if command is None else str(command),
            "started_at": iso(now if started is None else started), "ended_at": iso(now if ended is None else ended),
            "history": f"{iso(now if ended is None else ended)}: "
                       f"{' '.join(sys.argv) if command is None else command}"}


def add_provenance(ds: xr.Dataset, command=None, started=None, ended=None) -> xr.Dataset:
    """Add :func:`provenance` and the CF attributes (:func:`describe`) to ``ds`` in place; returns ``ds``.

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset.
    command, started, ended
        As for :func:`provenance`.

    Returns
    -------
    xarray.Dataset
        ``ds`` itself.
    """
    describe(ds)
    ds.attrs.update(provenance(command, started, ended))
    return ds


def save(ds: xr.Dataset, path) -> Path:
    """Write ``ds`` to NetCDF (netCDF4 engine) atomically: a temporary file in the same folder, then rename.

    Boolean attributes are stored as 0/1 integers (NetCDF has no boolean type).  HDF5 writes a first temporary
    file, which is then copied by Python into the one renamed to ``path``, so the file HDF5 held open is never the
    result: HDF5 takes an ``flock`` on each file it opens, a process forked by another thread meanwhile (e.g. for
    the ``git`` of :func:`provenance` in the worker thread of an in-process dask cluster) keeps that lock until it
    closes its inherited descriptors, and reading the file back right after the save then failed with
    ``NetCDF: HDF error``.

    Parameters
    ----------
    ds : xarray.Dataset
        A dataset with ``schema_version`` = :data:`SCHEMA_VERSION`.
    path : str or path-like
        The file (its folder is created).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    SchemaError
        Another (or no) ``schema_version``.
    OSError
        The folder or file cannot be written (the temporary file is removed).
    """
    path = Path(path)
    if ds.attrs.get("schema_version") != SCHEMA_VERSION:
        raise SchemaError(f"ds.attrs['schema_version'] must be {SCHEMA_VERSION} to be saved; "
                          f"received {ds.attrs.get('schema_version')!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    ds = ds.copy()
    ds.attrs = {k: int(v) if isinstance(v, (bool, np.bool_)) else v for k, v in ds.attrs.items()}
    for name in INTEGER_COUNTS:                 # counts as integers on disk, -1 where not reached
        if name in ds.data_vars:
            v = ds[name].values
            ok = np.isfinite(v)
            if np.array_equal(v[ok], np.round(v[ok])) and (v[ok].size == 0 or np.abs(v[ok]).max() < 2**31):
                ds[name].encoding.update(dtype="int32", _FillValue=np.int32(-1))
    temporaries = []
    try:
        for _ in range(2):
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
            temporaries.append(tmp)
        written, result = temporaries
        ds.to_netcdf(written, engine=ENGINE)
        shutil.copyfile(written, result)        # a file HDF5 never opened: no inherited lock can hold it
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(result, 0o666 & ~umask)       # mkstemp creates 0600; give the usual permissions
        os.replace(result, path)
    finally:
        for tmp in temporaries:
            Path(tmp).unlink(missing_ok=True)
    return path


RUN_LAYOUT = {"X": ("time", "particle", "dim"), "rho_lm_real": ("time", "l", "m"), "rho_lm_imag": ("time", "l", "m")}
"""Dimensions (in order) of the run variables whose layout :func:`load` checks (:func:`check_run_layout`; the
figures and ``meanfield view`` draw them)."""


def _array(a):
    return np.array2string(np.asarray(a), threshold=8, edgeitems=3, precision=4, separator=", ")


def check_dims(where, ds, layout):
    """Refuse a variable of ``layout`` ({name: dims}) stored with other dims, by name.

    Parameters
    ----------
    where : str
        Names the dataset in the message.
    ds : xarray.Dataset
        The dataset.
    layout : dict of str to tuple of str
        Variable names and their dims, in order.

    Raises
    ------
    ValueError
        A variable stored with other dims.
    KeyError
        A variable of ``layout`` missing from ``ds``.
    """
    for name, dims in layout.items():
        if ds[name].dims != dims:
            raise ValueError(f"{where}: {name} must have the dims {dims} (the layout of meanfield.workflow."
                             f"{'results' if name in RUN_LAYOUT else 'phase_diagram'}); received dims "
                             f"{ds[name].dims} of shape {ds[name].shape}")


def check_axis(where, ds, name, ordered=True):
    """Refuse a coordinate that is not finite (and, if ``ordered``, non-decreasing), by name.

    Parameters
    ----------
    where : str
        Names the dataset in the message.
    ds : xarray.Dataset
        The dataset.
    name : str
        The coordinate.
    ordered : bool
        Also require it non-decreasing.

    Raises
    ------
    ValueError
        A coordinate that is not a 1-d array of finite real numbers (non-decreasing when ``ordered``).
    """
    a = np.asarray(ds[name].values)
    ok = a.ndim == 1 and np.issubdtype(a.dtype, np.number) and not np.iscomplexobj(a)
    ok = ok and bool(np.all(np.isfinite(a)))
    ok = ok and (not ordered or bool(np.all(np.diff(a) >= 0)))
    if not ok:
        need = "finite and non-decreasing" if ordered else "finite"
        raise ValueError(f"{where}: the coordinate {name!r} must be a 1-d array of {need} real numbers; "
                         f"received {_array(a)} (dtype {a.dtype})")


def check_run_layout(where, ds):
    """Refuse a run dataset whose variables are not in this module's layout (``X`` as (time, particle, dim) with 3
    components, the (time, l, m) coefficient tables with NaN or 0 where ``m > l``, a finite non-decreasing ``time``,
    the curves over ``time``), naming the variable, the layout expected and what was received; ``where`` names the
    dataset in the message.

    Parameters
    ----------
    where : str
        Names the dataset in the messages.
    ds : xarray.Dataset
        The dataset.

    Raises
    ------
    ValueError
        Each departure from the layout above, named.
    """
    missing = [v for v in (*RUN_LAYOUT, "time") if v not in ds.variables]
    if missing:
        raise ValueError(f"{where} is not a meanfield run dataset: it lacks the variables {missing}")
    check_dims(where, ds, RUN_LAYOUT)
    for name in RUN_LAYOUT:
        if not np.issubdtype(ds[name].dtype, np.number) or np.issubdtype(ds[name].dtype, np.complexfloating):
            raise ValueError(f"{where}: {name} must hold real numbers; received dtype {ds[name].dtype}")
    missing = [v for v in ("rho_lm_real", "rho_lm_imag", "X", "time") if ds[v].size == 0]
    if missing or ds.sizes["time"] < 1:
        raise ValueError(f"{where} is a truncated run dataset: {missing or ['time']} are empty")
    if ds.sizes["dim"] != 3:
        raise ValueError(f"{where}: X must have dims ('time', 'particle', 'dim') with 3 components along dim "
                         f"(tokens on S^2); received dims {ds['X'].dims} of shape {ds['X'].shape}")
    if ds.sizes["l"] != ds.sizes["m"] or ds.sizes["l"] < 3:
        raise ValueError(f"{where}: rho_lm_real and rho_lm_imag must be (time, l, m) tables with l = m = lmax + 1 "
                         f">= 3; received dims {ds['rho_lm_real'].dims} of shape {ds['rho_lm_real'].shape}")
    check_axis(where, ds, "time")
    upper = np.triu(np.ones((ds.sizes["l"],) * 2, dtype=bool), k=1)         # [l, m] with m > l
    for name in ("rho_lm_real", "rho_lm_imag"):
        v = np.asarray(ds[name].values)[:, upper]
        bad = np.argwhere(~np.isnan(v) & (v != 0))
        if bad.size:
            k, j = bad[0]
            l, m = (int(i[j]) for i in np.nonzero(upper))
            raise ValueError(f"{where}: {name} must hold NaN (or 0) where m > l (the (time, l, m) table of meanfield."
                             f"workflow.results); received {name}[time={k}, l={l}, m={m}] = {v[k, j]:.6g} and "
                             f"{len(bad) - 1} more such values: are its l and m swapped?")
    for name in ("pde_energy", "particle_energy", "pde_entropy", "particle_entropy", "w2"):
        if name in ds.variables and ds[name].dims not in (("time",), ("time", "head")):
            raise ValueError(f"{where}: {name} must have the dims ('time',) or ('time', 'head'); received dims "
                             f"{ds[name].dims} of shape {ds[name].shape}")


def load(path) -> xr.Dataset:
    """Read a results file into memory; a missing file, an unknown schema version or another layout of its
    variables (:func:`check_run_layout`) raises ``ValueError`` naming what is wrong.

    Parameters
    ----------
    path : str or path-like
        A results file.

    Returns
    -------
    xarray.Dataset
        Loaded into memory (the file closed).

    Raises
    ------
    ValueError
        A missing or unreadable file, or variables not in the layout.
    SchemaError
        No or another schema version, or required variables missing.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"results file {str(path)!r} does not exist")
    try:
        with xr.open_dataset(path, engine=ENGINE) as f:
            ds = f.load()
    except OSError as err:
        raise ValueError(f"cannot read results file {str(path)!r} as NetCDF: {err}") from None
    version = ds.attrs.get("schema_version")
    version = version.item() if isinstance(version, np.generic) else version
    if version is None or version != SCHEMA_VERSION:
        raise SchemaError(f"{path} has schema_version {version!r}; this meanfield reads schema_version "
                          f"{SCHEMA_VERSION} only")
    missing = [v for v in REQUIRED_VARIABLES if v not in ds.variables]
    if missing:
        raise SchemaError(f"{path} is not a meanfield run dataset: it lacks the variables {missing}")
    check_run_layout(f"results file {path}", ds)
    ds.attrs["schema_version"] = int(version)
    return ds
