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

The machinery is generic: :func:`run_tasks` runs any picklable ``func(args) -> result`` over a list
of JSON parameter dicts with the same index, atomic per-point files (:class:`NpzStore` for dicts of
arrays, :class:`NetCDFStore` for datasets), skipping and failure handling; :func:`run_sweep` is
``run_tasks`` over main-job configs, and a study can farm its own tasks out the same way (e.g.
``studies/continuum_scale``: one PDE solve, then the (n, seed) particle runs on a LocalCluster).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import time
import tomllib
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core import validate
from ..core.choices import SWEEP_MODES
from .checkpoint import FolderLock
from .config import ConfigError, RunConfig, load_config

__all__ = ["SweepSpec", "load_sweep_spec", "run_sweep", "load_sweep", "run_point", "compute_point", "run_tasks",
           "call_task", "NpzStore", "NetCDFStore", "STORES"]

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
    """
    out = call_task(_run_config, config_dict)
    if "result" in out:
        out["dataset"] = out.pop("result")
    return out


# ----------------------------------------------------------------------------------------------
# The generic resumable task runner (used by run_sweep and by studies that farm tasks out)
# ----------------------------------------------------------------------------------------------

def call_task(func, args) -> dict:
    """``func(args)`` timed, as ``{"status": "done", "error": "", "seconds", "result"}`` or, if it
    raised, ``{"status": "failed", "error": "Type: message", "seconds"}`` (what a worker runs)."""
    started = time.perf_counter()
    try:
        result = func(args)
    except Exception as err:  # noqa: BLE001 - a failed task is recorded, the others go on
        return {"status": "failed", "error": f"{type(err).__name__}: {err}", "seconds": time.perf_counter() - started}
    return {"status": "done", "error": "", "seconds": time.perf_counter() - started, "result": result}


class NetCDFStore:
    """Task results that are ``xarray.Dataset`` s with the package's schema, one ``.nc`` file each
    (:func:`meanfield.workflow.results.save`, atomic)."""

    suffix = ".nc"

    @staticmethod
    def save(result, path: Path):
        from .results import save

        save(result, path)

    @staticmethod
    def loads(path: Path) -> bool:
        return _loads(path)


class NpzStore:
    """Task results that are dicts of arrays (or numbers), one ``.npz`` file each, written atomically
    (a temporary ``.<name>.<pid>.tmp`` in the same folder, then rename); :meth:`load` returns a dict."""

    suffix = ".npz"

    @staticmethod
    def save(result, path: Path):
        if not isinstance(result, dict) or not all(isinstance(k, str) for k in result):
            raise TypeError(f"an NpzStore task must return a dict with string keys; received {type(result).__name__}")
        path = Path(path)
        tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as fh:
                np.savez(fh, **{k: np.asarray(v) for k, v in result.items()})
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    @staticmethod
    def load(path) -> dict:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}

    @classmethod
    def loads(cls, path: Path) -> bool:
        try:
            cls.load(path)
        except Exception:  # noqa: BLE001 - a damaged file raises anything from ValueError to zipfile.BadZipFile
            return False
        return True


STORES = {"netcdf": NetCDFStore, "npz": NpzStore}


def run_tasks(func, points, out_dir, *, inputs=None, store="npz", scheduler=None, n_workers=2, retries=2,
              progress=None, client=None, key_prefix="task", desc="tasks") -> list[dict]:
    """Run ``func`` on every point not already finished in ``out_dir``, resumably; return the index rows.

    The folder holds ``index.json`` (one row per point: ``id``, ``params``, ``status``, ``path``
    relative to the folder, ``error``, ``seconds``) and ``points/<id><suffix>``, one result file per
    point.  Each task runs ``func(inputs[i])`` on a dask worker and returns its result to the client,
    which writes it atomically (the folder is resolved once, here, so workers in other directories or
    on other machines write nothing); a point is marked done only once its file exists and loads.
    Re-running skips points marked done with the same ``params`` (and, when ``inputs`` are given and
    JSON-serializable, the same SHA-256 of their input, kept as ``inputs_sha256``) whose file loads,
    and starts no cluster when nothing is left to do.  Fixed arguments in a ``functools.partial`` are
    not compared: put everything a result depends on into ``params`` or ``inputs`` (e.g. a hash of a
    shared setup, as ``studies/continuum_scale`` does).  One runner per folder: the folder is locked
    (:class:`~meanfield.workflow.checkpoint.FolderLock`) for the whole run.  A task that raises is recorded as failed with its error and
    does not stop the others; a task whose worker dies is re-run by the scheduler (``retries``), and
    its file is still written exactly once.

    Parameters
    ----------
    func : callable
        Picklable (a module-level function or a ``functools.partial`` of one); ``func(args) -> result``.
    points : sequence of dict
        JSON-serializable parameters of each task, recorded in the index and compared on re-runs.
    out_dir : path
    inputs : sequence, optional
        What ``func`` receives for each point (default: the point itself), e.g. a full config built
        from the swept keys.  Fixed inputs shared by all tasks go into a ``functools.partial``.
    store : {"npz", "netcdf"} or a store object
        How results are written and checked (:class:`NpzStore`: dicts of arrays;
        :class:`NetCDFStore`: schema datasets); an object needs ``suffix``, ``save(result, path)``
        and ``loads(path) -> bool``.
    scheduler : str, optional
        Address of an existing dask scheduler; default: a LocalCluster of ``n_workers``
        single-threaded worker processes on this machine.
    n_workers : int
        Worker processes of the LocalCluster, ``>= 1``.
    retries : int
        Extra attempts (``>= 0``) of a task that raised inside dask (e.g. its worker died).
    progress : bool, optional
        Show a progress bar (None: only on a terminal).
    client : distributed.Client, optional
        Use this client; otherwise one is created and closed here.
    key_prefix, desc : str
        Dask key of a task (``<key_prefix>-<id>-<random run id>``) and the progress bar's label.

    Raises
    ------
    ValueError
        Bad ``n_workers``, ``retries``, ``progress``, ``store``, ``points`` (not dicts, not JSON, or
        non-finite numbers) or ``inputs``, before anything starts.
    FolderInUse
        Another process is running tasks (or a run) in ``out_dir``.
    """
    n_workers, retries = validate.integer("n_workers", n_workers, 1), validate.integer("retries", retries, 0)
    if progress is not None:
        validate.boolean("progress", progress)
    if isinstance(store, str):
        validate.choice("store", store, list(STORES))
        store = STORES[store]
    elif not all(hasattr(store, a) for a in ("suffix", "save", "loads")):
        raise ValueError(f"store must be one of {sorted(STORES)} or an object with suffix, save and loads; "
                         f"received {store!r}")
    if not callable(func):
        raise ValueError(f"func must be callable; received {func!r}")
    points = list(points)
    for i, p in enumerate(points):
        if not isinstance(p, dict):
            raise ValueError(f"points must be a sequence of dicts (the parameters of each task); received "
                             f"element {i} of type {type(p).__name__}: {p!r}")
    for p in points:
        try:
            json.dumps(p, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise ValueError(f"points must be JSON-serializable with finite numbers (they are recorded in "
                             f"index.json and compared on a re-run); received {p!r}: {err}") from None
    explicit = inputs is not None
    inputs = points if inputs is None else list(inputs)
    if len(inputs) != len(points):
        raise ValueError(f"inputs must have one entry per point ({len(points)}); received {len(inputs)}")

    out = Path(out_dir).resolve()              # once: workers may run in any directory
    (out / "points").mkdir(parents=True, exist_ok=True)
    with FolderLock(out):                       # one runner per folder: a second one is refused by name
        return _run_tasks_locked(func, points, inputs, explicit, out, store, scheduler, n_workers, retries,
                                 progress, client, key_prefix, desc)


def _fingerprint(value):
    """SHA-256 of a JSON-serializable task input (None when it is not JSON: then only ``params`` count)."""
    try:
        text = json.dumps(value, sort_keys=True, allow_nan=True)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def _run_tasks_locked(func, points, inputs, explicit, out, store, scheduler, n_workers, retries, progress, client,
                      key_prefix, desc):
    from distributed import Client, LocalCluster, as_completed
    from tqdm import tqdm

    _remove_partials(out)
    index = _read_index(out)
    rows, args = [], {}
    for i, point in enumerate(json.loads(json.dumps(points))):   # as index.json will hold them
        pid = f"p{i:04d}"
        rel = f"points/{pid}{store.suffix}"
        old = index.get(pid)
        fp = _fingerprint(inputs[i]) if explicit else None
        same_input = fp is None or old is None or old.get("inputs_sha256", fp) == fp
        keep = (old and old["status"] == "done" and old["params"] == point and same_input and (out / rel).is_file()
                and store.loads(out / rel))
        row = dict(old, path=rel) if keep else {"id": pid, "params": point, "status": "pending", "path": rel,
                                                "error": "", "seconds": None}
        if fp is not None:
            row["inputs_sha256"] = fp
        rows.append(row)
        args[pid] = inputs[i]
    _write_index(out, rows)
    todo = [r for r in rows if r["status"] != "done"]
    if not todo:                                # nothing left to do: no cluster
        return rows
    own = client is None
    if own:
        client = (Client(scheduler) if scheduler else
                  Client(LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True)))
    try:
        # a key unique to this call: dask hands back a held future's result for a key it already has, so
        # two runs sharing a client (two folders, or one re-run) must never reuse ``<prefix>-p0000``
        run_id = uuid.uuid4().hex[:12]
        futures = {client.submit(call_task, func, args[r["id"]], key=f"{key_prefix}-{r['id']}-{run_id}",
                                 retries=retries, pure=False): r for r in todo}
        bar = tqdm(total=len(rows), initial=len(rows) - len(todo), desc=desc,
                   disable=None if progress is None else not progress)
        for fut in as_completed(futures):
            row = futures[fut]
            try:
                result = fut.result()
                value = result.pop("result", None)
                if result["status"] == "done":     # the client writes, atomically, where the index says
                    store.save(value, out / row["path"])
                    if not store.loads(out / row["path"]):
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

    The points run through :func:`run_tasks` (one main-job run per point, results as NetCDF files;
    each point's full config is its fingerprinted input, so editing the base config recomputes the
    points it changes).  ``scheduler``, ``n_workers``, ``retries``, ``progress`` and ``client`` are
    :func:`run_tasks`'s, and so are the errors (``ValueError`` before anything starts,
    ``FolderInUse`` when another process runs in ``out_dir``).
    """
    return run_tasks(_run_config, spec.points, out_dir, inputs=[spec.config(p).to_dict() for p in spec.points],
                     store="netcdf", scheduler=scheduler, n_workers=n_workers, retries=retries, progress=progress,
                     client=client, key_prefix="point", desc="sweep points")


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
