"""Results of the main job as xarray Datasets, saved to NetCDF with their config and schema version.

Dimensions (:data:`DIMS`): ``time``, ``particle``, ``dim``, ``head``, ``lat``, ``lon``, ``l``, ``m``.
A run dataset holds

* ``X`` (time, particle, dim): particle positions; ``rho`` (time, lat, lon): the density on a
  display grid (latitude/longitude in degrees); ``rho_lm_real``, ``rho_lm_imag`` (time, l, m):
  its spherical-harmonic coefficients (:mod:`meanfield.sphere` convention, NaN where ``m > l``);
* per-run observables prefixed ``pde_`` and ``particle_`` (time) or (time, head), and ``w2``;
* attributes ``schema_version``, ``meanfield_version``, ``seed``, ``config`` (the full
  :class:`~meanfield.config.RunConfig` as JSON) and the status of each run.

Times a run did not reach (the PDE stops once ``lmax`` no longer resolves the density) hold NaN.
:func:`save` writes atomically (temporary name, then rename); :func:`load` refuses files of an
unknown schema version; :func:`config_of` rebuilds the config, so a run can be repeated from its file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

from ..core.sphere import from_lm_table, lm_indices, to_lm_table
from .config import RunConfig
from .paired import align_times  # noqa: F401  (public here since 0.1; the one time alignment lives in paired)

__all__ = ["SCHEMA_VERSION", "DIMS", "SchemaError", "align_times", "coefficients_to_lm", "lm_to_coefficients",
           "observables_to_variables", "save", "load", "config_of", "density_coefficients"]

SCHEMA_VERSION = 1
REQUIRED_VARIABLES = ("X", "rho", "rho_lm_real", "rho_lm_imag", "w2", "pde_energy", "particle_energy")
DIMS = ("time", "particle", "dim", "head", "lat", "lon", "l", "m")
ENGINE = "netcdf4"


class SchemaError(ValueError):
    """A results file has no or an unknown schema version."""


def coefficients_to_lm(rho_lm, l_index, m_index, lmax):
    """Coefficient vectors (..., nalm) -> real and imaginary parts (..., lmax+1, lmax+1), NaN for m > l.

    The layout is :mod:`meanfield.sphere`'s (:func:`~meanfield.sphere.to_lm_table`); ``l_index`` and
    ``m_index`` must be that layout's (:func:`~meanfield.sphere.lm_indices`), as a grid of degree
    ``lmax`` gives them.
    """
    _check_layout(l_index, m_index, lmax)
    return to_lm_table(rho_lm, lmax)


def lm_to_coefficients(re, im, l_index, m_index):
    """Inverse of :func:`coefficients_to_lm`: (..., l, m) parts -> complex vectors (..., nalm)."""
    _check_layout(l_index, m_index, np.shape(re)[-1] - 1 if np.ndim(re) else -1)
    return from_lm_table(re, im)


def _check_layout(l_index, m_index, lmax):
    ref = lm_indices(lmax) if lmax >= 0 else (None, None)
    if not (np.array_equal(l_index, ref[0]) and np.array_equal(m_index, ref[1])):
        raise ValueError(f"l_index and m_index must be the coefficient layout of meanfield.sphere for lmax = "
                         f"{lmax} (SphereGrid(lmax).l_index, .m_index); received arrays of shapes "
                         f"{np.shape(l_index)} and {np.shape(m_index)} with another order")


def observables_to_variables(observables, prefix, rows, cols, n_times, n_heads):
    """``Trajectory.observables`` -> {name: (dims, values)} on the full time axis (NaN where not reached).

    Scalars per time become (time,), per-head arrays (T, H) become (time, head).
    """
    out = {}
    for name, val in observables.items():
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
    """Complex coefficients ``rho_lm`` (nalm,) of the density at ``ds.time[time_index]``."""
    return from_lm_table(ds["rho_lm_real"].values[time_index], ds["rho_lm_imag"].values[time_index])


def config_of(ds: xr.Dataset) -> RunConfig:
    """The validated :class:`~meanfield.config.RunConfig` stored in a dataset's ``config`` attribute."""
    if "config" not in ds.attrs:
        raise SchemaError("the dataset has no 'config' attribute; it was not written by meanfield.results")
    return RunConfig.from_dict(json.loads(ds.attrs["config"]))


def save(ds: xr.Dataset, path) -> Path:
    """Write ``ds`` to NetCDF (netCDF4 engine) atomically: a temporary file in the same folder, then rename.

    Boolean attributes are stored as 0/1 integers (NetCDF has no boolean type).
    """
    path = Path(path)
    if ds.attrs.get("schema_version") != SCHEMA_VERSION:
        raise SchemaError(f"ds.attrs['schema_version'] must be {SCHEMA_VERSION} to be saved; "
                          f"received {ds.attrs.get('schema_version')!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    ds = ds.copy()
    ds.attrs = {k: int(v) if isinstance(v, (bool, np.bool_)) else v for k, v in ds.attrs.items()}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        ds.to_netcdf(tmp, engine=ENGINE)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)          # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(path) -> xr.Dataset:
    """Read a results file into memory; a missing file or an unknown schema version raises ``ValueError``."""
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
    ds.attrs["schema_version"] = int(version)
    return ds
