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
"""

from __future__ import annotations

import itertools
import json
import os
import re
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core import validate
from ..core.choices import SWEEP_MODES
from .config import ConfigError, RunConfig, load_config

__all__ = ["SweepSpec", "load_sweep_spec", "run_sweep", "load_sweep", "run_point", "compute_point"]

MODES = SWEEP_MODES          # core.choices
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
    """A validated sweep: base config dict, swept keys and their values, mode."""

    base: dict
    parameters: dict
    mode: str = "grid"
    points: tuple = field(init=False)

    def __post_init__(self):
        try:
            validate.choice("mode", self.mode, list(MODES))
        except ValueError as err:
            raise ConfigError(str(err)) from None
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
        d = json.loads(json.dumps(self.base))
        for key, value in point.items():
            _set(d, key, value)
        try:
            return RunConfig.from_dict(d)
        except ConfigError as err:
            raise ConfigError(f"sweep point {point}: {err}") from None


def load_sweep_spec(path) -> SweepSpec:
    """Read a sweep TOML file (see the module docstring)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except (FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read sweep file {str(path)!r}: {getattr(err, 'strerror', None) or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"invalid TOML in {path}: {err}") from None
    unknown = set(data) - {"base", "base_config", "mode", "parameters"}
    if unknown:
        raise ConfigError(f"unknown sweep keys {sorted(unknown)}; allowed: base, base_config, mode, parameters")
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
    returned, not raised."""
    from .results import save

    path = Path(path).resolve()
    out = compute_point(config_dict)
    if out["status"] == "done":
        save(out.pop("dataset"), path)
    return out


def compute_point(config_dict: dict) -> dict:
    """Run one point and return ``{"status", "error", "seconds"}`` plus ``dataset`` when it succeeded.

    What a sweep task runs on a worker: it writes nothing; the client saves the dataset.
    """
    from .results import add_provenance
    from .run import run

    started, wall = time.perf_counter(), time.time()
    try:
        config = RunConfig.from_dict(config_dict)
        ds = run(config, progress=False)
        add_provenance(ds, command=f"meanfield sweep point {json.dumps(config_dict, sort_keys=True)}",
                       started=wall)
    except Exception as err:  # noqa: BLE001 - a failed point is recorded, the sweep goes on
        return {"status": "failed", "error": f"{type(err).__name__}: {err}",
                "seconds": time.perf_counter() - started}
    return {"status": "done", "error": "", "seconds": time.perf_counter() - started, "dataset": ds}


def _loads(path: Path) -> bool:
    """Whether ``path`` is a results file that loads."""
    from .results import load

    try:
        load(path)
    except (ValueError, OSError):
        return False
    return True


def _point_path(out: Path, row: dict) -> Path:
    """Where a row's file is: relative to the sweep folder (or as written by older versions)."""
    p = Path(row["path"])
    if p.is_absolute():
        return p
    return out / p if (out / p).exists() or not p.exists() else p


def _remove_partials(out: Path):
    """Delete temporary files of attempts killed mid-write (they never carry a result's name)."""
    for stale in (out / "points").glob(".*.tmp"):
        stale.unlink(missing_ok=True)


def _write_index(out: Path, rows: list):
    tmp = out / f".index.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(rows, indent=2))
    os.replace(tmp, out / "index.json")


def _read_index(out: Path) -> dict:
    f = out / "index.json"
    return {r["id"]: r for r in json.loads(f.read_text())} if f.is_file() else {}


def run_sweep(spec: SweepSpec, out_dir, *, scheduler=None, n_workers=2, retries=2, progress=None,
              client=None) -> list[dict]:
    """Run every point of ``spec`` not already finished in ``out_dir``; return the index rows.

    Parameters
    ----------
    scheduler : str, optional
        Address of an existing dask scheduler; default: a LocalCluster of ``n_workers``
        single-threaded worker processes on this machine.
    n_workers : int
        Worker processes of the LocalCluster, ``>= 1``.
    retries : int
        Extra attempts (``>= 0``) of a point whose task raised inside dask (e.g. its worker died).
    progress : bool, optional
        Show a progress bar (None: only on a terminal).
    client : distributed.Client, optional
        Use this client (tests); otherwise one is created and closed here.

    Raises
    ------
    ValueError
        ``n_workers``, ``retries`` or ``progress`` out of range, before anything starts.
    """
    from distributed import Client, LocalCluster, as_completed
    from tqdm import tqdm

    n_workers, retries = validate.integer("n_workers", n_workers, 1), validate.integer("retries", retries, 0)
    if progress is not None:
        validate.boolean("progress", progress)
    from .results import save

    out = Path(out_dir).resolve()              # once: workers may run in any directory
    (out / "points").mkdir(parents=True, exist_ok=True)
    _remove_partials(out)
    index = _read_index(out)
    rows = []
    for i, point in enumerate(spec.points):
        pid = f"p{i:04d}"
        rel = f"points/{pid}.nc"
        old = index.get(pid)
        keep = (old and old["status"] == "done" and old["params"] == point and (out / rel).is_file()
                and _loads(out / rel))
        rows.append(dict(old, path=rel) if keep else {"id": pid, "params": point, "status": "pending", "path": rel,
                                                      "error": "", "seconds": None})
    _write_index(out, rows)
    todo = [r for r in rows if r["status"] != "done"]
    if not todo:                                # nothing left to do: no cluster
        return rows
    own = client is None
    if own:
        client = (Client(scheduler) if scheduler else
                  Client(LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True)))
    try:
        futures = {client.submit(compute_point, spec.config(r["params"]).to_dict(), key=f"point-{r['id']}",
                                 retries=retries, pure=False): r for r in todo}
        bar = tqdm(total=len(rows), initial=len(rows) - len(todo), desc="sweep points",
                   disable=None if progress is None else not progress)
        for fut in as_completed(futures):
            row = futures[fut]
            try:
                result = fut.result()
                ds = result.pop("dataset", None)
                if ds is not None:                 # the client writes, atomically, where the sweep says
                    save(ds, out / row["path"])
                    if not _loads(out / row["path"]):
                        result.update(status="failed", error=f"{row['path']} was written but does not load")
                row.update(result)
            except Exception as err:  # noqa: BLE001 - e.g. KilledWorker after all retries
                row.update(status="failed", error=f"{type(err).__name__}: {err}")
            fut.release()
            _write_index(out, rows)
            bar.update(1)
        bar.close()
        _remove_partials(out)                    # every task has ended: any temporary file is a killed attempt's
    finally:
        if own:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
    return rows


def load_sweep(out_dir):
    """All finished points of a sweep as one Dataset along the swept dimensions.

    Grid sweeps are unstacked into one dimension per swept key (named by the key); list
    sweeps keep a ``point`` dimension with the keys as coordinates.  Points that failed or are
    missing are NaN (grid) or absent (list).
    """
    import xarray as xr

    from .results import load

    out = Path(out_dir).resolve()
    rows = [r for r in _read_index(out).values() if r["status"] == "done"]
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
    if spec_grid:
        ds = ds.set_index(point=keys).unstack("point")
    return ds
