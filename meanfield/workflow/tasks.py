"""A generic resumable task farm on dask.distributed: one result file per task, an index, a lock.

:func:`run_tasks` runs any picklable ``func(args) -> result`` over a list of JSON parameter dicts:
one task per point on a LocalCluster (or an existing scheduler), each result returned to the
client and written atomically (``points/<id><suffix>``; :class:`NpzStore` for dicts of arrays,
:class:`NetCDFStore` for datasets), an index ``index.json`` (parameters, status, path, error,
seconds, and the SHA-256 fingerprint of each task's input), finished points skipped on a re-run,
failures recorded without stopping the others, and the folder locked for the whole run
(:class:`~meanfield.workflow.jobs.FolderLock`).  :func:`meanfield.workflow.sweep.run_sweep` is
``run_tasks`` over main-job configs, and a study can farm its own tasks out the same way (e.g.
``studies/continuum_scale``: one PDE solve, then the (n, seed) particle runs on a LocalCluster).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from pathlib import Path

import numpy as np

from ..core import validate
from .inputs import parse_json
from .jobs import FolderLock

__all__ = ["run_tasks", "call_task", "NpzStore", "NetCDFStore", "STORES", "read_index"]


def call_task(func, args) -> dict:
    """``func(args)`` timed, as ``{"status": "done", "error": "", "seconds", "result"}`` or, if it
    raised, ``{"status": "failed", "error": "Type: message", "seconds"}`` (what a worker runs).

    Parameters
    ----------
    func : callable
        The task.
    args : object
        Its argument.

    Returns
    -------
    dict
    """
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
        """Write a dataset (:func:`meanfield.workflow.results.save`).

        Parameters
        ----------
        result : xarray.Dataset
            A dataset of the package's schema.
        path : pathlib.Path
            The file.
        """
        from .results import save

        save(result, path)

    @staticmethod
    def loads(path: Path) -> bool:
        """Whether the file reads as a results dataset.

        Parameters
        ----------
        path : pathlib.Path
            The file.

        Returns
        -------
        bool
        """
        return _loads(path)


class NpzStore:
    """Task results that are dicts of arrays (or numbers), one ``.npz`` file each, written atomically
    (a temporary ``.<name>.<pid>.tmp`` in the same folder, then rename); :meth:`load` returns a dict."""

    suffix = ".npz"

    @staticmethod
    def save(result, path: Path):
        """Write a dict of arrays atomically.

        Parameters
        ----------
        result : dict of str to array_like
            The task's result.
        path : pathlib.Path
            The file.

        Raises
        ------
        TypeError
            ``result`` not a dict with string keys.
        """
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
        """The arrays of a result file.

        Parameters
        ----------
        path : str or path-like
            The file.

        Returns
        -------
        dict of str to ndarray
        """
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}

    @classmethod
    def loads(cls, path: Path) -> bool:
        """Whether the file reads (:meth:`load` raising anything counts as no).

        Parameters
        ----------
        path : pathlib.Path
            The file.

        Returns
        -------
        bool
        """
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
    (:class:`~meanfield.workflow.jobs.FolderLock`) for the whole run.  A task that raises is recorded as failed with its error and
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

    Returns
    -------
    list of dict
        The index rows of every point (``id``, ``params``, ``status``, ``path``, ``error``, ``seconds``, ...).

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
    index = read_index(out)
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


def _remove_partials(out: Path):
    """Delete temporary files of attempts killed mid-write (they never carry a result's name)."""
    for stale in (out / "points").glob(".*.tmp"):
        stale.unlink(missing_ok=True)


def _write_index(out: Path, rows: list):
    tmp = out / f".index.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(rows, indent=2))
    os.replace(tmp, out / "index.json")


def read_index(out: Path) -> dict:
    """The rows of ``out/index.json`` by point id (empty when there is none).

    Parameters
    ----------
    out : pathlib.Path
        The task folder.

    Returns
    -------
    dict
        ``{id: row}``.

    Raises
    ------
    ValueError
        An index that is not valid JSON or not a list of records with an ``id``.
    """
    f = out / "index.json"
    if not f.is_file():
        return {}
    rows = parse_json(f.read_text(), f"the task index {f} (remove it to start the points again)")
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "id" in r for r in rows):
        raise ValueError(f"the task index {f} must be a JSON list of point records with an 'id'; received "
                         f"{type(rows).__name__} (remove it to start the points again)")
    return {r["id"]: r for r in rows}
