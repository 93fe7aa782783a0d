"""The generic resumable task farm (meanfield.workflow.tasks: run_tasks, stores, lock) on its own (was
test_task_runner.py)."""

import functools
import json

import numpy as np
import pytest

from meanfield.workflow.tasks import NpzStore, call_task, run_tasks


def square(offset, p):
    """A picklable task: arrays from the parameters; raises for ``x < 0``."""
    if p["x"] < 0:
        raise ValueError(f"negative x {p['x']}")
    return {"y": np.arange(3) * p["x"] + offset, "x": p["x"]}


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as c:
        yield c


def test_results_written_once_and_rerun_skips(tmp_path, client):
    points = [{"x": 1}, {"x": 2}, {"x": 3}]
    func = functools.partial(square, 10)
    rows = run_tasks(func, points, tmp_path / "t", client=client, progress=False)
    assert [r["status"] for r in rows] == ["done"] * 3
    for r, p in zip(rows, points):
        d = NpzStore.load(tmp_path / "t" / r["path"])
        np.testing.assert_array_equal(d["y"], np.arange(3) * p["x"] + 10)   # integers: exact
    assert sorted(f.name for f in (tmp_path / "t" / "points").iterdir()) == ["p0000.npz", "p0001.npz", "p0002.npz"]
    stamps = [(tmp_path / "t" / r["path"]).stat().st_mtime_ns for r in rows]
    # a re-run with the same points computes nothing (no client needed: none is started)
    rows2 = run_tasks(func, points, tmp_path / "t", client=None, progress=False)
    assert [(tmp_path / "t" / r["path"]).stat().st_mtime_ns for r in rows2] == stamps
    # changed parameters of one point: only that point is recomputed
    rows3 = run_tasks(func, [{"x": 1}, {"x": 5}, {"x": 3}], tmp_path / "t", client=client, progress=False)
    new = [(tmp_path / "t" / r["path"]).stat().st_mtime_ns for r in rows3]
    assert new[0] == stamps[0] and new[2] == stamps[2] and new[1] != stamps[1]
    assert NpzStore.load(tmp_path / "t" / rows3[1]["path"])["x"] == 5
    assert json.loads((tmp_path / "t" / "index.json").read_text())[1]["params"] == {"x": 5}


def test_failures_recorded_damaged_files_recomputed(tmp_path, client):
    rows = run_tasks(functools.partial(square, 0), [{"x": -1}, {"x": 2}], tmp_path / "f", client=client,
                     progress=False)
    assert rows[0]["status"] == "failed" and "ValueError: negative x -1" in rows[0]["error"]
    assert rows[1]["status"] == "done"
    assert not (tmp_path / "f" / "points" / "p0000.npz").exists()          # no file posing as a result
    (tmp_path / "f" / "points" / "p0001.npz").write_bytes(b"truncated")   # a damaged result
    (tmp_path / "f" / "points" / ".p0001.npz.123.tmp").write_bytes(b"x")  # a killed attempt's partial
    rows = run_tasks(functools.partial(square, 0), [{"x": 1}, {"x": 2}], tmp_path / "f", client=client,
                     progress=False)
    assert [r["status"] for r in rows] == ["done", "done"]
    np.testing.assert_array_equal(NpzStore.load(tmp_path / "f" / "points" / "p0001.npz")["y"], [0, 2, 4])
    assert not list((tmp_path / "f" / "points").glob(".*.tmp"))


def test_inputs_differ_from_recorded_params(tmp_path, client):
    rows = run_tasks(functools.partial(square, 0), [{"id": "a"}], tmp_path / "i", inputs=[{"x": 7}], client=client,
                     progress=False)
    assert rows[0]["params"] == {"id": "a"}
    assert NpzStore.load(tmp_path / "i" / rows[0]["path"])["x"] == 7


def test_bad_input_refused_before_anything_runs(tmp_path):
    f = functools.partial(square, 0)
    with pytest.raises(ValueError, match="store must be one of"):
        run_tasks(f, [{"x": 1}], tmp_path / "b", store="csv")
    with pytest.raises(ValueError, match="n_workers"):
        run_tasks(f, [{"x": 1}], tmp_path / "b", n_workers=0)
    with pytest.raises(ValueError, match="JSON-serializable"):
        run_tasks(f, [{"x": np.zeros(2)}], tmp_path / "b")
    with pytest.raises(ValueError, match="sequence of dicts"):
        run_tasks(f, [1, 2], tmp_path / "b")
    with pytest.raises(ValueError, match="one entry per point"):
        run_tasks(f, [{"x": 1}], tmp_path / "b", inputs=[])
    with pytest.raises(ValueError, match="func must be callable"):
        run_tasks(3, [{"x": 1}], tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_call_task_and_npz_store(tmp_path):
    ok = call_task(functools.partial(square, 1), {"x": 2})
    assert ok["status"] == "done" and ok["error"] == "" and ok["seconds"] >= 0
    bad = call_task(functools.partial(square, 1), {"x": -2})
    assert bad["status"] == "failed" and bad["error"] == "ValueError: negative x -2" and "result" not in bad
    with pytest.raises(TypeError, match="dict with string keys"):
        NpzStore.save([1, 2], tmp_path / "a.npz")
    assert not NpzStore.loads(tmp_path / "missing.npz")



def test_damaged_zip_changed_inputs_second_runner_and_nan_points(tmp_path, client):
    """A half-written (really damaged) npz is recomputed; changed inputs recompute their point; a second
    runner on the same folder is refused; non-dict and non-finite points are refused by name."""
    import zipfile

    from meanfield.workflow.jobs import FolderInUse, FolderLock

    out, func = tmp_path / "t", functools.partial(square, 0)
    pts = [{"k": 0}, {"k": 1}]
    rows = run_tasks(func, pts, out, inputs=[{"x": 2}, {"x": 3}], client=client, progress=False)
    assert [r["status"] for r in rows] == ["done", "done"] and all(len(r["inputs_sha256"]) == 64 for r in rows)
    f = out / rows[0]["path"]
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])                 # a real zip cut in half
    with pytest.raises(zipfile.BadZipFile):               # the error the old `except` tuple let through
        NpzStore.load(f)
    stamp1 = (out / rows[1]["path"]).stat().st_mtime_ns
    rows2 = run_tasks(func, pts, out, inputs=[{"x": 2}, {"x": 3}], client=client, progress=False)
    np.testing.assert_array_equal(NpzStore.load(out / rows2[0]["path"])["y"], [0, 2, 4])   # recomputed
    assert (out / rows2[1]["path"]).stat().st_mtime_ns == stamp1                        # kept
    # same params, another input for point 1: that point (only) is recomputed
    stamp0 = (out / rows2[0]["path"]).stat().st_mtime_ns
    rows3 = run_tasks(func, pts, out, inputs=[{"x": 2}, {"x": 5}], client=client, progress=False)
    np.testing.assert_array_equal(NpzStore.load(out / rows3[1]["path"])["y"], [0, 5, 10])
    assert (out / rows3[0]["path"]).stat().st_mtime_ns == stamp0
    with FolderLock(out):                                 # another runner holds the folder
        with pytest.raises(FolderInUse, match="in use"):
            run_tasks(func, pts, out, client=client, progress=False)
    with pytest.raises(ValueError, match=r"points must be JSON-serializable with finite numbers"):
        run_tasks(func, [{"x": float("nan")}], tmp_path / "u", client=client, progress=False)
    with pytest.raises(ValueError, match=r"received element 1 of type int"):
        run_tasks(func, [{"x": 1}, 3], tmp_path / "v", client=client, progress=False)


def test_runs_sharing_a_client_never_reuse_a_held_key(tmp_path, client):
    """dask returns a held future's result for a key it already has: a run whose task keys repeated an
    earlier run's (``task-p0000``) got that run's result (seen in the suite as an order-dependent
    'failed').  Each call's keys are unique now, so a held future of the same id changes nothing."""
    held = client.submit(square, 0, {"x": -5}, key="task-p0000", pure=False)       # fails, and stays held
    assert isinstance(held.exception(), ValueError)
    rows = run_tasks(functools.partial(square, 0), [{"k": 0}], tmp_path / "t", inputs=[{"x": 2}], client=client,
                     progress=False)
    assert rows[0]["status"] == "done", rows
    np.testing.assert_array_equal(NpzStore.load(tmp_path / "t" / rows[0]["path"])["y"], [0, 2, 4])
    del held


def test_compute_tasks_in_process_and_iter_tasks_refusals():
    """The in-process runner (the phase diagram's cells): the same results in order by a loop and every local dask
    executor; an exception propagates (catch=False); bad arguments are refused by name before any task starts."""
    from meanfield.workflow.tasks import EXECUTORS, compute_tasks, iter_tasks

    func = functools.partial(square, 1)
    points = [{"x": x} for x in (3, 1, 2)]
    loop = compute_tasks(func, points, progress=False)
    assert [r["x"] for r in loop] == [3, 1, 2]
    for executor in ("threads", "synchronous"):          # integers: exactly equal
        again = compute_tasks(func, points, executor=executor, progress=False)
        assert all(np.array_equal(a["y"], b["y"]) for a, b in zip(loop, again))
    with pytest.raises(ValueError, match="negative x -1"):
        compute_tasks(func, [{"x": -1}], progress=False)
    outcomes = dict(iter_tasks(func, [{"x": -1}, {"x": 2}], progress=False))     # catch: a failed outcome
    assert outcomes[0]["status"] == "failed" and outcomes[1]["status"] == "done"
    assert EXECUTORS == ("threads", "processes", "synchronous")
    for kw, name in ((dict(executor="thread"), "executor"), (dict(retries=-1), "retries"), (dict(catch=1), "catch"),
                     (dict(progress="yes"), "progress"), (dict(keys=["a"]), "keys"), (dict(done=-1), "done"),
                     (dict(executor="threads", client=object()), "executor")):
        with pytest.raises(ValueError, match=rf"^{name}"):
            iter_tasks(func, points, **kw)
    with pytest.raises(ValueError, match="^func must be callable"):
        iter_tasks(3, points)
    from meanfield.workflow import phase_diagram

    with pytest.raises(AttributeError, match="moved to meanfield.workflow.tasks.EXECUTORS"):
        phase_diagram.PHASE_SCHEDULERS


def test_the_folder_is_a_job_folder_or_the_callers_open_one(tmp_path, client):
    """run_tasks opens its folder as a JobFolder (index.json its result, always resumed): the temporaries of a killed
    index write are removed.  A job's own open JobFolder of the same folder is used as it is (its lock covers the
    tasks, as the sweep's does); another folder's or a closed one is refused."""
    from meanfield.workflow.jobs import FolderInUse, JobFolder

    out, func = tmp_path / "t", functools.partial(square, 0)
    out.mkdir()
    (out / ".index.json.999.tmp").write_text("[")                 # a killed index write
    rows = run_tasks(func, [{"x": 1}], out, client=client, progress=False)
    assert rows[0]["status"] == "done" and not list(out.glob(".*.tmp"))
    with JobFolder(out, "combined.nc", resume=True) as folder:
        (out / ".index.json.998.tmp").write_text("[")
        rows = run_tasks(func, [{"x": 1}, {"x": 2}], out, client=client, progress=False, folder=folder)
        assert [r["status"] for r in rows] == ["done", "done"] and not list(out.glob(".*.tmp"))
        with pytest.raises(FolderInUse, match="in use"):        # without the job's folder: a second runner
            run_tasks(func, [{"x": 1}], out, client=client, progress=False)
        with pytest.raises(ValueError, match="folder must be the open JobFolder of out_dir") as err:
            run_tasks(func, [{"x": 1}], tmp_path / "other", folder=folder)
        assert f"received the JobFolder of {str(out)!r}" in str(err.value) and " at 0x" not in str(err.value)
        with pytest.raises(ValueError, match="folder must be the open JobFolder of out_dir.*received str '"):
            run_tasks(func, [{"x": 1}], out, folder=str(out))
    assert not (tmp_path / "other").exists()
    with pytest.raises(RuntimeError, match="not open"):
        run_tasks(func, [{"x": 1}], out, folder=folder)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")          # os.fork with threads (Python >= 3.12)
def test_a_dataset_loads_right_after_its_save_while_another_thread_forks(tmp_path):
    """HDF5 takes an flock on each file it opens, and a process forked by another thread while the file being saved
    was open kept it until it closed its descriptors: reading the file back failed with 'NetCDF: HDF error' (the
    sweep's points, whose worker thread runs ``git`` for the provenance in an in-process cluster; here forked
    children that keep the descriptors 20 ms).  ``results.save`` renames a copy of the file HDF5 wrote, on which no
    HDF5 lock was ever taken; with the old save most of these loads failed."""
    import os
    import threading
    import time

    from meanfield.workflow.config import RunConfig
    from meanfield.workflow.run import run
    from meanfield.workflow.tasks import NetCDFStore

    ds = run(RunConfig.from_dict({"pde": {"lmax": 9}, "particles": {"n": 10}, "integrator": {"t_final": 0.1,
                                  "n_frames": 2}, "outputs": {"figures": False, "animation": False}}), progress=False)
    stop = threading.Event()

    def fork():
        while not stop.is_set():
            pid = os.fork()
            if pid == 0:                        # the child: holds every inherited descriptor, then ends
                time.sleep(0.02)
                os._exit(0)
            os.waitpid(pid, 0)

    thread = threading.Thread(target=fork, daemon=True)
    thread.start()
    try:
        failed = []
        for i in range(12):
            NetCDFStore.save(ds, tmp_path / f"p{i}.nc")
            if not NetCDFStore.loads(tmp_path / f"p{i}.nc"):      # read back at once, as run_tasks does
                failed.append(i)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert failed == []
