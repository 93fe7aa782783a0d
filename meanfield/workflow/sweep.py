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
default, or an existing scheduler).  Each point writes its own result atomically
(``points/<id>.nc``, temporary name then rename) and the client keeps an index
(``index.json``: parameters, status, path, error, seconds).  Re-running skips finished points;
a failed point is recorded with its error and does not stop the sweep; a task whose worker
dies is re-run by the scheduler, and its point is still written exactly once.
:func:`load_sweep` returns all results as one Dataset along the swept dimensions.
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

__all__ = ["SweepSpec", "load_sweep_spec", "run_sweep", "load_sweep", "run_point"]

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
            if not all(isinstance(v, (int, float, str, bool)) for v in values):
                raise ConfigError(f"parameters.{key} must list scalar values (numbers or strings: each becomes a "
                                  f"coordinate of the results); received {values!r}")
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
    """Run one point and write its dataset atomically; errors are returned, not raised."""
    from .results import save
    from .run import run

    started = time.perf_counter()
    try:
        config = RunConfig.from_dict(config_dict)
        save(run(config, progress=False), path)
    except Exception as err:  # noqa: BLE001 - a failed point is recorded, the sweep goes on
        return {"status": "failed", "error": f"{type(err).__name__}: {err}",
                "seconds": time.perf_counter() - started}
    return {"status": "done", "error": "", "seconds": time.perf_counter() - started}


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
    out = Path(out_dir)
    (out / "points").mkdir(parents=True, exist_ok=True)
    _remove_partials(out)
    index = _read_index(out)
    rows = []
    for i, point in enumerate(spec.points):
        pid = f"p{i:04d}"
        path = out / "points" / f"{pid}.nc"
        old = index.get(pid)
        keep = old and old["status"] == "done" and old["params"] == point and path.is_file()
        rows.append(old if keep else {"id": pid, "params": point, "status": "pending", "path": str(path),
                                      "error": "", "seconds": None})
    _write_index(out, rows)
    todo = [r for r in rows if r["status"] != "done"]
    own = client is None
    if own:
        client = (Client(scheduler) if scheduler else
                  Client(LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True)))
    try:
        futures = {client.submit(run_point, spec.config(r["params"]).to_dict(), r["path"], key=f"point-{r['id']}",
                                 retries=retries, pure=False): r for r in todo}
        bar = tqdm(total=len(rows), initial=len(rows) - len(todo), desc="sweep points",
                   disable=None if progress is None else not progress)
        for fut in as_completed(futures):
            row = futures[fut]
            try:
                row.update(fut.result())
            except Exception as err:  # noqa: BLE001 - e.g. KilledWorker after all retries
                row.update(status="failed", error=f"{type(err).__name__}: {err}")
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

    out = Path(out_dir)
    rows = [r for r in _read_index(out).values() if r["status"] == "done"]
    if not rows:
        raise ValueError(f"out_dir {str(out)!r} holds no finished sweep points")
    keys = list(rows[0]["params"])
    parts = []
    for r in rows:
        ds = load(r["path"])
        parts.append(ds.expand_dims(point=[r["id"]]).assign_coords(
            {k: ("point", [r["params"][k]]) for k in keys}))
    ds = xr.concat(parts, dim="point", data_vars="all", coords="different", compat="equals", join="outer",
                   combine_attrs="drop_conflicts")
    spec_grid = len(rows) > 1 and np.prod([len(set(r["params"][k] for r in rows)) for k in keys]) == len(rows)
    if spec_grid:
        ds = ds.set_index(point=keys).unstack("point")
    return ds
