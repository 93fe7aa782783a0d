"""A sweep on a real cluster: a ``dask scheduler`` and a ``dask worker`` started as separate processes
in another directory (loopback only, bounded in time, stopped at the end).

The worker's working directory must stay empty of results, the results land in the sweep's folder,
the index holds paths relative to that folder (so the sweep loads from anywhere), and a re-run with
nothing left to do contacts no cluster at all.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from meanfield.workflow.cli import main
from meanfield.workflow.results import load
from meanfield.workflow.sweep import load_sweep

DASK = str(Path(sys.executable).parent / "dask")
SWEEP = """
mode = "list"
[base_config]
seed = 3
[base_config.pde]
lmax = 11
[base_config.particles]
n = 40
[base_config.integrator]
t_final = 0.3
n_frames = 3
[base_config.outputs]
figures = false
animation = false
[parameters]
"initial.kappas" = [[3.0, 2.0, 2.0], [1.0]]
"seed" = [1, 2]
"""


def _stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=20)


@pytest.mark.skipif(not Path(DASK).is_file(), reason="the dask command line is not installed")
def test_real_scheduler_and_worker_started_in_another_directory(tmp_path, monkeypatch, capsys):
    worker_home, client_home, elsewhere = (tmp_path / d for d in ("worker_home", "client_home", "elsewhere"))
    for d in (worker_home, client_home, elsewhere):
        d.mkdir()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    scheduler_file = tmp_path / "scheduler.json"
    scheduler = subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                  "--scheduler-file", str(scheduler_file)], cwd=worker_home, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        worker = subprocess.Popen([DASK, "worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                                   "--host", "127.0.0.1", "--death-timeout", "60"], cwd=worker_home, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        monkeypatch.chdir(client_home)
        (client_home / "sweep.toml").write_text(SWEEP)
        assert main(["sweep", "sweep.toml", "--scheduler", address, "--out", "results", "--no-progress"]) == 0
        assert "2 of 2 points done" in capsys.readouterr().out
    finally:
        for proc in (worker, scheduler):
            if proc is not None:
                _stop(proc)
    assert sorted(p.name for p in (client_home / "results" / "points").iterdir()) == ["p0000.nc", "p0001.nc"]
    assert [p for p in worker_home.rglob("*.nc")] == []            # the worker wrote nothing where it runs
    index = json.loads((client_home / "results" / "index.json").read_text())
    assert [r["path"] for r in index] == ["points/p0000.nc", "points/p0001.nc"]
    assert [r["status"] for r in index] == ["done", "done"]
    assert load(client_home / "results" / "points" / "p0001.nc").attrs["Conventions"].startswith("CF-")
    monkeypatch.chdir(elsewhere)
    ds = load_sweep(client_home / "results")                        # from another directory
    assert list(ds["initial.kappas"].values) == ["[3.0, 2.0, 2.0]", "[1.0]"]
    assert ds.sizes["point"] == 2 and np.all(np.isfinite(ds["w2"].values[:, 0]))   # both points, from t = 0
    # everything is done: a re-run contacts no cluster (this address has no scheduler; connecting would fail)
    monkeypatch.chdir(client_home)
    stamp = (client_home / "results" / "points" / "p0000.nc").stat().st_mtime_ns
    started = time.monotonic()
    assert main(["sweep", "sweep.toml", "--scheduler", "tcp://127.0.0.1:9", "--out", "results",
                 "--no-progress"]) == 0
    assert time.monotonic() - started < 20                          # no connection attempt (its timeout is 30 s)
    assert (client_home / "results" / "points" / "p0000.nc").stat().st_mtime_ns == stamp


def test_a_point_file_that_does_not_load_is_recomputed(tmp_path):
    from distributed import Client, LocalCluster

    from meanfield.workflow.sweep import SweepSpec, run_sweep

    spec = SweepSpec(json.loads(json.dumps({"seed": 3, "pde": {"lmax": 11}, "particles": {"n": 40},
                                            "integrator": {"t_final": 0.3, "n_frames": 3},
                                            "outputs": {"figures": False, "animation": False}})),
                     {"seed": [1, 2]}, mode="list")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        assert [r["status"] for r in run_sweep(spec, tmp_path / "s", client=client, progress=False)] == ["done"] * 2
        (tmp_path / "s" / "points" / "p0001.nc").write_bytes(b"truncated")   # a damaged result
        rows = run_sweep(spec, tmp_path / "s", client=client, progress=False)
    assert [r["status"] for r in rows] == ["done"] * 2
    assert load(tmp_path / "s" / "points" / "p0001.nc").sizes["particle"] == 40
