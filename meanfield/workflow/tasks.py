"""A generic resumable task farm on dask.distributed: one result file per task, an index, a lock.

:func:`run_tasks` runs any picklable ``func(args) -> result`` over a list of JSON parameter dicts:
one task per point on a LocalCluster (or an existing scheduler), each result returned to the
client and written atomically (``points/<id><suffix>``; :class:`NpzStore` for dicts of arrays,
:class:`NetCDFStore` for datasets), an index ``index.json`` (parameters, status, path, error,
seconds, and the SHA-256 fingerprint of each task's input), finished points skipped on a re-run,
failures recorded without stopping the others, and the folder opened as the one shape of a job
(:class:`~meanfield.workflow.jobs.JobFolder` with the index as its result, always resumed: locked for the whole
run, a second runner refused, the temporaries of killed writes removed), or run inside the open ``JobFolder`` of
the job that calls it.  :func:`meanfield.workflow.sweep.run_sweep` is ``run_tasks`` over main-job configs inside
the sweep's folder (which then writes the combined ``sweep.nc``), and a study can farm its own tasks out the same way (e.g.
``studies/continuum_scale``: one PDE solve, then the (n, seed) particle runs on a LocalCluster).

Every task of the package is executed by :func:`iter_tasks`: on a client for :func:`run_tasks` (the sweep, the
transition map), in this process for :func:`compute_tasks` (a plain loop or a local dask scheduler of
:data:`EXECUTORS`: the phase diagram's cells, which keep no files) and for the equilibria branches
(:func:`meanfield.workflow.equilibria_branches.compute_branches`: the uniform branch, then one task per switched
branch, each kept as ``<name>.npz`` in the job's partial folder as it finishes).
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
from .jobs import JobFolder, remove_stale_temporaries

__all__ = ["run_tasks", "iter_tasks", "compute_tasks", "call_task", "NpzStore", "NetCDFStore", "STORES", "read_index",
           "EXECUTORS", "INDEX_NAME"]

INDEX_NAME = "index.json"
"""The index of a task folder (:func:`run_tasks`, :func:`read_index`)."""

EXECUTORS = ("threads", "processes", "synchronous")
"""The local dask schedulers of :func:`iter_tasks` / :func:`compute_tasks` (``dask.compute`` in this process;
None: a plain loop).  An existing scheduler's *address* is :func:`run_tasks`' ``scheduler`` instead."""


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


def _run_one(func, args, catch):
    """What one task runs: :func:`call_task` (``catch``) or ``func(args)`` itself (its exception propagates)."""
    return call_task(func, args) if catch else func(args)


def iter_tasks(func, inputs, *, executor=None, client=None, keys=None, retries=2, catch=True, progress=None,
               desc="tasks", done=0):
    """Run ``func`` on each of ``inputs`` and yield ``(i, outcome)`` as each task ends: where every task of the
    package is executed (:func:`run_tasks` on a dask.distributed client, :func:`compute_tasks` in this process).

    Three ways, one outcome: a plain loop here (``executor`` and ``client`` None), ``dask.compute`` on a local
    scheduler of :data:`EXECUTORS` (the outcomes in order once all have ended), or futures on a
    ``distributed.Client`` (as they complete; a task whose worker dies is re-run ``retries`` times).  The tasks
    are the same calls whatever runs them, so their results are the same, bit for bit.

    Parameters
    ----------
    func : callable
        ``func(x) -> result``; picklable (a module-level function or a ``functools.partial`` of one) for the
        ``"processes"`` executor and a client.
    inputs : sequence
        The argument of each task.
    executor : str, optional
        A local dask scheduler of :data:`EXECUTORS` (None: the loop, or the client).
    client : distributed.Client, optional
        Submit the tasks to this client (not with ``executor``).
    keys : sequence of str, optional
        Dask key prefixes of the client's tasks, one per input (a random run id is appended: a client never hands
        back a result it holds under the same key); default ``task-<i>``.
    retries : int
        Extra attempts (``>= 0``) of a client's task that raised inside dask (e.g. its worker died).
    catch : bool
        Outcomes are :func:`call_task` dicts (a raising task, or a lost worker, is a ``"failed"`` outcome and the
        others go on); False: the bare results, and the first exception propagates.
    progress : bool, optional
        Progress bar (None: only on a terminal).
    desc : str
        The progress bar's label.
    done : int
        Tasks finished earlier, counted on the bar (``>= 0``).

    Returns
    -------
    iterator of (int, object)
        The index of the input and its outcome, each once.

    Raises
    ------
    ValueError
        ``func`` not callable, an unknown ``executor``, both ``executor`` and ``client``, ``keys`` of another
        length, or bad ``retries``, ``catch``, ``progress`` or ``done``; checked before any task starts.
    """
    if not callable(func):
        raise ValueError(f"func must be callable; received {func!r}")
    if executor is not None:
        validate.choice("executor", executor, list(EXECUTORS))
        if client is not None:
            raise ValueError(f"executor (a local dask scheduler) and client exclude each other; received executor = "
                             f"{executor!r} and a client")
    retries, done = validate.integer("retries", retries, 0), validate.integer("done", done, 0)
    validate.boolean("catch", catch)
    if progress is not None:
        validate.boolean("progress", progress)
    inputs = list(inputs)
    keys = [f"task-{i}" for i in range(len(inputs))] if keys is None else list(keys)
    if len(keys) != len(inputs):
        raise ValueError(f"keys must have one entry per input ({len(inputs)}); received {len(keys)}")
    outcomes = _outcomes(func, inputs, executor, client, keys, retries, bool(catch))
    return _counted(outcomes, len(inputs), done, progress, desc)


def _outcomes(func, inputs, executor, client, keys, retries, catch):
    if client is not None:
        from distributed import as_completed

        # a key unique to this call: dask hands back a held future's result for a key it already has, so
        # two runs sharing a client (two folders, or one re-run) must never reuse ``<prefix>-p0000``
        run_id = uuid.uuid4().hex[:12]
        futures = {client.submit(_run_one, func, x, catch, key=f"{k}-{run_id}", retries=retries, pure=False): i
                   for i, (k, x) in enumerate(zip(keys, inputs))}
        for fut in as_completed(futures):
            try:
                outcome = fut.result()
            except Exception as err:  # noqa: BLE001 - e.g. KilledWorker after all retries
                if not catch:
                    raise
                outcome = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
            fut.release()
            yield futures[fut], outcome
    elif executor is not None:
        import dask

        yield from enumerate(dask.compute(*[dask.delayed(_run_one)(func, x, catch) for x in inputs],
                                          scheduler=executor))
    else:
        for i, x in enumerate(inputs):
            yield i, _run_one(func, x, catch)


def _counted(outcomes, total, done, progress, desc):
    """The outcomes, a progress bar advancing as each is handled (after the consumer is done with it)."""
    from tqdm import tqdm

    bar = tqdm(total=done + total, initial=done, desc=desc, disable=None if progress is None else not progress)
    try:
        for item in outcomes:
            yield item
            bar.update(1)
    finally:
        bar.close()


def compute_tasks(func, inputs, *, executor=None, progress=None, desc="tasks") -> list:
    """``[func(x) for x in inputs]`` through :func:`iter_tasks` in this process: a plain loop with a progress bar
    (``executor`` None) or ``dask.compute`` on a local scheduler; no folder, no index, nothing kept (the cells of
    :func:`meanfield.workflow.phase_diagram.phase_diagram`).

    Parameters
    ----------
    func : callable
        ``func(x) -> result`` (picklable for ``"processes"``).
    inputs : sequence
        The argument of each task.
    executor : str, optional
        A local dask scheduler of :data:`EXECUTORS` (None: the loop).
    progress : bool, optional
        Progress bar (None: only on a terminal).
    desc : str
        The progress bar's label.

    Returns
    -------
    list
        The results, in the order of ``inputs``.

    Raises
    ------
    ValueError
        What :func:`iter_tasks` refuses; a task's own exception propagates.
    """
    inputs = list(inputs)
    results = [None] * len(inputs)
    for i, result in iter_tasks(func, inputs, executor=executor, catch=False, progress=progress, desc=desc):
        results[i] = result
    return results


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
              progress=None, client=None, key_prefix="task", desc="tasks", folder=None) -> list[dict]:
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
    shared setup, as ``studies/continuum_scale`` does).  One runner per folder: the folder is a
    :class:`~meanfield.workflow.jobs.JobFolder` (``index.json`` its result, always resumed), locked for the whole
    run, and the temporaries of killed writes (of the index and of the points) are removed before the tasks start;
    a job that writes more into the folder after the tasks (the sweep's ``sweep.nc``) passes its own open
    ``folder`` instead.  A task that raises is recorded as failed with its error and
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
    folder : meanfield.workflow.jobs.JobFolder, optional
        The open folder of the calling job, of ``out_dir`` itself, whose lock covers the tasks (default: a
        ``JobFolder(out_dir, "index.json", resume=True)`` opened and closed here).

    Returns
    -------
    list of dict
        The index rows of every point (``id``, ``params``, ``status``, ``path``, ``error``, ``seconds``, ...).

    Raises
    ------
    ValueError
        Bad ``n_workers``, ``retries``, ``progress``, ``store``, ``points`` (not dicts, not JSON, or
        non-finite numbers), ``inputs`` or ``folder`` (not a JobFolder of ``out_dir``), before anything starts.
    FolderInUse
        Another process is running tasks (or a run) in ``out_dir``.
    RuntimeError
        A ``folder`` that is not open.
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
    if folder is not None and (not isinstance(folder, JobFolder) or folder.path.resolve() != out):
        got = (f"the JobFolder of {str(folder.path)!r}" if isinstance(folder, JobFolder)
               else f"{type(folder).__name__} {folder!r}")
        raise ValueError(f"folder must be the open JobFolder of out_dir {str(out)!r} (or None); received {got}")
    if folder is not None:                      # the calling job holds the lock
        folder.remove_temporaries(INDEX_NAME)   # (RuntimeError when it is not open)
        (out / "points").mkdir(exist_ok=True)
        return _run_tasks_locked(func, points, inputs, explicit, out, store, scheduler, n_workers, retries,
                                 progress, client, key_prefix, desc)
    with JobFolder(out, INDEX_NAME, what="task index", resume=True):   # one runner per folder, refused by name;
        (out / "points").mkdir(exist_ok=True)                          # the index's temporaries removed
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
    from distributed import Client, LocalCluster

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
        outcomes = iter_tasks(func, [args[r["id"]] for r in todo], client=client, retries=retries,
                              keys=[f"{key_prefix}-{r['id']}" for r in todo], progress=progress, desc=desc,
                              done=len(rows) - len(todo))
        for k, result in outcomes:               # call_task's dicts (a lost worker's is a failed one)
            row = todo[k]
            try:
                value = result.pop("result", None)
                if result["status"] == "done":     # the client writes, atomically, where the index says
                    store.save(value, out / row["path"])
                    if not store.loads(out / row["path"]):
                        result.update(status="failed", error=f"{row['path']} was written but does not load")
                row.update(result)
            except Exception as err:  # noqa: BLE001 - a result the store refuses is a failed point
                row.update(status="failed", error=f"{type(err).__name__}: {err}")
            _write_index(out, rows)
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
    """Delete temporary files of point writes killed mid-write (they never carry a result's name)."""
    remove_stale_temporaries(out / "points")


def _write_index(out: Path, rows: list):
    tmp = out / f".{INDEX_NAME}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(rows, indent=2))
    os.replace(tmp, out / INDEX_NAME)


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
    f = out / INDEX_NAME
    if not f.is_file():
        return {}
    rows = parse_json(f.read_text(), f"the task index {f} (remove it to start the points again)")
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "id" in r for r in rows):
        raise ValueError(f"the task index {f} must be a JSON list of point records with an 'id'; received "
                         f"{type(rows).__name__} (remove it to start the points again)")
    return {r["id"]: r for r in rows}
