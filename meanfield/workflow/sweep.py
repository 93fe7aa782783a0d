"""Parameter sweeps of the main job on dask.distributed, resumable and failure-tolerant.

A sweep file (TOML) names a base config and the parameters to vary::

    base = "base.toml"              # optional: a config file (relative to the sweep file) ...
    mode = "grid"                   # "grid": Cartesian product; "list": zip of equal-length lists

    [base_config]                   # ... or the base config inline (any RunConfig keys)
    pde.lmax = 15

    [parameters]                    # dotted keys of RunConfig, heads by index
    "heads[0].beta" = [1.0, 2.0]
    "particles.n" = [100, 200]

:func:`run_sweep` executes every point as one task (a LocalCluster on this machine by
default, or an existing scheduler).  Each task returns its dataset to the client, which writes
it atomically (``points/<id>.nc`` in the sweep's folder, temporary name then rename; the folder
is resolved once, at the start, so workers started in other directories or on other machines
write nothing themselves) and keeps an index (``index.json``: parameters, status, path relative
to the sweep folder, error, seconds).  A point is marked done only once its file exists and loads.
Re-running skips finished points and starts no cluster when nothing is left to do.  Every point
is validated as a config before anything runs (an invalid point makes the sweep file an error);
a point that fails while running is recorded with its error and does not stop the sweep; a task
whose worker dies is re-run by the scheduler, and its point is still written exactly once.
Swept values are scalars or lists (``"initial.kappas" = [[3.0], [8.0]]``; a list value becomes a
string coordinate such as ``"[3.0]"``).  :func:`load_sweep` returns all results as one Dataset
along the swept dimensions, from any working directory.

A sweep is a job of the one shape (:class:`~meanfield.workflow.jobs.JobFolder`): its folder is locked
while it runs (a second runner is refused with :class:`~meanfield.workflow.jobs.FolderInUse`), the
hidden temporaries of killed writes are removed, and when every point is done the combined dataset
``sweep.nc`` (what :func:`load_sweep` returns, with the provenance attributes, written atomically)
and then its figure ``sweep.png`` (:func:`meanfield.workflow.plotting.sweep_figure`: the final
energy and W2 of each point) are written into the folder.  A sweep is always resumable, so a
finished one is never refused: a re-run rewrites ``sweep.nc`` and ``sweep.png`` (a point may have
been recomputed).  While points are pending or failed the folder holds neither: a previous
``sweep.nc`` is removed when a run starts, so the file is always the combination of the index's
points.

The machinery is generic and lives in :mod:`meanfield.workflow.tasks`: :func:`run_sweep` is
:func:`~meanfield.workflow.tasks.run_tasks` over main-job configs (one NetCDF file per point),
inside the sweep's ``JobFolder``.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core import validate
from ..core.choices import SWEEP_MODES
from .config import RunConfig, load_config
from .jobs import JobFolder
from .schema import ConfigError, check_keys, choice_check, read_toml_file
from .tasks import call_task, read_index, run_tasks

__all__ = ["SweepSpec", "load_sweep_spec", "run_sweep", "load_sweep", "run_point", "compute_point", "SWEEP_FILE",
           "SWEEP_FIGURE"]

SWEEP_FILE = "sweep.nc"
"""The combined dataset of a finished sweep in its folder (:func:`run_sweep`; what :func:`load_sweep` returns)."""

SWEEP_FIGURE = "sweep.png"
"""The figure of a finished sweep, written after :data:`SWEEP_FILE` (:func:`meanfield.workflow.plotting.sweep_figure`)."""

_KEY = re.compile(r"^(heads\[(\d+)\]\.\w+|\w+(\.\w+)?)$")


def _set(d: dict, key: str, value):
    """Set a dotted key (``pde.lmax``, ``heads[1].beta``, ``seed``) in a plain config dict."""
    m = re.match(r"^heads\[(\d+)\]\.(\w+)$", key)
    if m:
        heads = d.setdefault("heads", [h.to_dict() for h in RunConfig().heads])
        i = int(m.group(1))
        if i >= len(heads):
            raise ConfigError(f"parameters key {key}: head index {i} out of range; the base config has "
                              f"{len(heads)} heads")
        heads[i][m.group(2)] = value
    elif "." in key:
        section, name = key.split(".", 1)
        d.setdefault(section, {})[name] = value
    else:
        d[key] = value


def _sweepable(v, depth=0):
    if isinstance(v, (int, float, str, bool)):
        return True
    return isinstance(v, list) and depth < 2 and all(_sweepable(x, depth + 1) for x in v)


def _coordinate(v):
    """A swept value as a coordinate: scalars as they are, lists as their JSON text."""
    return json.dumps(v) if isinstance(v, list) else v


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep: base config dict, swept keys and their values, mode.

    Parameters
    ----------
    base : dict
        The base config (:meth:`~meanfield.workflow.config.RunConfig.to_dict`).
    parameters : dict
        Dotted :class:`~meanfield.workflow.config.RunConfig` keys (``"pde.lmax"``, ``"heads[0].beta"``) and
        non-empty lists of their values.
    mode : {"grid", "list"}
        Every combination, or the lists zipped (equal lengths).

    Raises
    ------
    ConfigError
        An unknown mode, no parameters, a key that is not dotted, an empty list or values that cannot be
        coordinates, lists of unequal length in ``"list"`` mode, or a point whose config is invalid.
    """

    base: dict
    parameters: dict
    mode: str = "grid"
    points: tuple = field(init=False)

    def __post_init__(self):
        choice_check(SWEEP_MODES)("mode", self.mode)
        if not isinstance(self.parameters, dict) or not self.parameters:
            raise ConfigError(f"parameters must be a table naming at least one key to sweep; received "
                              f"{self.parameters!r}")
        for key, values in self.parameters.items():
            if not _KEY.match(key):
                raise ConfigError(f"parameters key {key!r} must be a dotted RunConfig key such as 'pde.lmax' "
                                  f"or 'heads[0].beta'")
            if not isinstance(values, list) or not values:
                raise ConfigError(f"parameters.{key} must be a non-empty list of values; received {values!r}")
            if not all(_sweepable(v) for v in values):
                raise ConfigError(f"parameters.{key} must list values that are numbers, strings, booleans or lists "
                                  f"of them (each becomes a coordinate of the results); received {values!r}")
        if self.mode == "list" and len({len(v) for v in self.parameters.values()}) != 1:
            raise ConfigError(f"mode 'list' needs lists of equal length; received lengths "
                              f"{ {k: len(v) for k, v in self.parameters.items()} }")
        keys = list(self.parameters)
        combos = (itertools.product(*self.parameters.values()) if self.mode == "grid"
                  else zip(*self.parameters.values()))
        points = tuple(dict(zip(keys, c)) for c in combos)
        for p in points:                       # validate every point before anything runs
            self.config(p)
        object.__setattr__(self, "points", points)

    def config(self, point: dict) -> RunConfig:
        """The validated config of one point: the base with the point's keys set.

        Parameters
        ----------
        point : dict
            ``{dotted key: value}``.

        Returns
        -------
        RunConfig

        Raises
        ------
        ConfigError
            An invalid config (the message names the point).
        """
        d = json.loads(json.dumps(self.base))
        for key, value in point.items():
            _set(d, key, value)
        try:
            return RunConfig.from_dict(d)
        except ConfigError as err:
            raise ConfigError(f"sweep point {point}: {err}") from None


def load_sweep_spec(path) -> SweepSpec:
    """Read a sweep TOML file (see the module docstring).

    Parameters
    ----------
    path : str or path-like
        The sweep file.

    Returns
    -------
    SweepSpec

    Raises
    ------
    ConfigError
        An unreadable file or invalid TOML, unknown keys, a ``base`` that is not a file name or
        ``base_config`` not a table, both of them, an invalid base config, or a spec :class:`SweepSpec`
        refuses.
    """
    path = Path(path)
    data = read_toml_file(path, "sweep")
    check_keys(data, ["base", "base_config", "mode", "parameters"])
    if "base" in data and not isinstance(data["base"], str):
        raise ConfigError(f"base must be a config file name (a string); received {data['base']!r}")
    if "base_config" in data and not isinstance(data["base_config"], dict):
        raise ConfigError(f"base_config must be a table; received {data['base_config']!r}")
    if "base" in data and "base_config" in data:
        raise ConfigError("give either base (a file) or [base_config] (inline), not both")
    base = (load_config(path.parent / data["base"]).to_dict() if "base" in data
            else RunConfig.from_dict(data.get("base_config", {})).to_dict())
    return SweepSpec(base, data.get("parameters", {}), data.get("mode", "grid"))


def run_point(config_dict: dict, path: str) -> dict:
    """Run one point and write its dataset atomically to ``path`` (made absolute first); errors are
    returned, not raised.

    Parameters
    ----------
    config_dict : dict
        The point's full config.
    path : str
        Its NetCDF file.

    Returns
    -------
    dict
        ``status``, ``error``, ``seconds`` (:func:`compute_point`, without the dataset).
    """
    from .results import save

    path = Path(path).resolve()
    out = compute_point(config_dict)
    if out["status"] == "done":
        save(out.pop("dataset"), path)
    return out


def _run_config(config_dict: dict):
    """The dataset of one main-job point (what a sweep task computes)."""
    from .results import add_provenance
    from .run import run

    wall = time.time()
    config = RunConfig.from_dict(config_dict)
    ds = run(config, progress=False)
    add_provenance(ds, command=f"meanfield sweep point {json.dumps(config_dict, sort_keys=True)}", started=wall)
    return ds


def compute_point(config_dict: dict) -> dict:
    """Run one point and return ``{"status", "error", "seconds"}`` plus ``dataset`` when it succeeded.

    What a sweep task runs on a worker: it writes nothing; the client saves the dataset.

    Parameters
    ----------
    config_dict : dict
        The point's full config.

    Returns
    -------
    dict
    """
    out = call_task(_run_config, config_dict)
    if "result" in out:
        out["dataset"] = out.pop("result")
    return out


def _point_path(out: Path, row: dict) -> Path:
    """Where a row's file is: relative to the sweep folder (or as written by older versions)."""
    p = Path(row["path"])
    if p.is_absolute():
        return p
    return out / p if (out / p).exists() or not p.exists() else p


def run_sweep(spec: SweepSpec, out_dir, *, scheduler=None, n_workers=2, retries=2, progress=None,
              client=None, combine=True) -> list[dict]:
    """Run every point of ``spec`` not already finished in ``out_dir``; when all are done, write ``sweep.nc`` and
    ``sweep.png``; return the index rows.

    The sweep's folder is a :class:`~meanfield.workflow.jobs.JobFolder` (``sweep.nc`` its result, always resumed):
    locked for the whole sweep, the temporaries of killed writes removed, a previous ``sweep.nc`` and ``sweep.png``
    removed once the arguments are checked.  The points run through :func:`run_tasks` inside it (one main-job run
    per point, results as NetCDF files; each point's full config is its fingerprinted input, so editing the base
    config recomputes the points it changes).  When every point is done (and ``combine``), the combined dataset
    (:func:`load_sweep`) is saved as :data:`SWEEP_FILE` with the provenance attributes, atomically, then its figure
    :data:`SWEEP_FIGURE` (:func:`meanfield.workflow.plotting.sweep_figure`).  A re-run of a finished sweep
    computes nothing and rewrites both (a point may have been recomputed since).  When a point failed, neither is
    written (re-run the sweep to retry the failed points).

    Parameters
    ----------
    spec : SweepSpec
        The sweep.
    out_dir : str or path-like
        The sweep folder.
    scheduler, n_workers, retries, progress, client
        As for :func:`run_tasks`.
    combine : bool
        Write ``sweep.nc`` and ``sweep.png`` when every point is done (False: the points and the index only).

    Returns
    -------
    list of dict
        The index rows.

    Raises
    ------
    ValueError
        ``spec`` not a :class:`SweepSpec`, bad ``n_workers``, ``retries``, ``progress`` or ``combine``, or an empty
        ``out_dir``, before anything starts (a previous ``sweep.nc`` is kept); what :func:`run_tasks` refuses.
    FolderInUse
        Another process runs in ``out_dir`` (:class:`meanfield.workflow.jobs.FolderInUse`).
    """
    validate.integer("n_workers", n_workers, 1)             # run_tasks' checks, before the folder is touched
    validate.integer("retries", retries, 0)
    if progress is not None:
        validate.boolean("progress", progress)
    combine = bool(validate.boolean("combine", combine))
    if not isinstance(spec, SweepSpec):
        raise ValueError(f"spec must be a SweepSpec (meanfield.workflow.sweep.load_sweep_spec); received "
                         f"{type(spec).__name__}")
    inputs = [spec.config(p).to_dict() for p in spec.points]     # every point's config, before the folder is touched
    with JobFolder(out_dir, SWEEP_FILE, what="sweep", outputs=(SWEEP_FIGURE,), resume=True) as folder:
        folder.remove_previous()                 # sweep.nc is only ever the combination of the index's points
        rows = run_tasks(_run_config, spec.points, folder.path, inputs=inputs,
                         store="netcdf", scheduler=scheduler, n_workers=n_workers, retries=retries,
                         progress=progress, client=client, key_prefix="point", desc="sweep points", folder=folder)
        if combine and all(r["status"] == "done" for r in rows):
            from .plotting import sweep_figure  # matplotlib only once there is a sweep to draw

            ds = load_sweep(folder.path)
            folder.save(ds)
            folder.save_figure(sweep_figure(ds), SWEEP_FIGURE, dpi=110)
    return rows


def load_sweep(out_dir):
    """All finished points of a sweep as one Dataset along the swept dimensions.

    Points that fill the grid of the swept values (every grid sweep, and a list sweep that does,
    e.g. one over a single key) are unstacked into one dimension per swept key (named by the key);
    other list sweeps keep a ``point`` dimension with the keys as coordinates.  Points that failed or are
    missing are NaN (grid) or absent (list).  The attributes are those the points share, with
    ``kind = "sweep"`` and ``sweep_parameters`` (the swept keys in order, as JSON).  A finished
    sweep also holds this dataset as ``sweep.nc`` (:func:`run_sweep`).

    Parameters
    ----------
    out_dir : str or path-like
        The sweep folder.

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    ValueError
        No finished points, an unreadable index, or a point file :func:`meanfield.workflow.results.load`
        refuses.
    """
    import xarray as xr

    from .results import load

    out = Path(out_dir).resolve()
    rows = [r for r in read_index(out).values() if r["status"] == "done"]
    if not rows:
        raise ValueError(f"out_dir {str(out)!r} holds no finished sweep points")
    keys = list(rows[0]["params"])
    parts = []
    for r in rows:
        ds = load(_point_path(out, r))
        parts.append(ds.expand_dims(point=[r["id"]]).assign_coords(
            {k: ("point", [_coordinate(r["params"][k])]) for k in keys}))
    ds = xr.concat(parts, dim="point", data_vars="all", coords="different", compat="equals", join="outer",
                   combine_attrs="drop_conflicts")
    spec_grid = len(rows) > 1 and np.prod([len(set(_coordinate(r["params"][k]) for r in rows))
                                           for k in keys]) == len(rows)
    if spec_grid and len(keys) == 1:            # one key: its values are the dimension (no multi-index to unstack),
        ds = ds.swap_dims(point=keys[0]).drop_vars("point").transpose(..., keys[0])   # last, as unstack puts it
    elif spec_grid:
        ds = ds.set_index(point=keys).unstack("point")
    ds.attrs.update(kind="sweep", sweep_parameters=json.dumps(keys))
    return ds
