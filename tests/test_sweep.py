"""Sweeps on dask.distributed: a killed worker loses nothing, every point is written exactly once,
results equal a serial run; re-running skips finished points; failed points are recorded."""

import os
import signal
import threading
import time

import numpy as np
import pytest

from meanfield.workflow.results import load
from meanfield.workflow.schema import ConfigError
from meanfield.workflow.sweep import SweepSpec, load_sweep, load_sweep_spec, run_point, run_sweep

BASE = {"seed": 3, "pde": {"lmax": 11}, "particles": {"n": 60},
        "integrator": {"t_final": 0.4, "n_frames": 3}, "outputs": {"figures": False, "animation": False}}


def spec(**params):
    return SweepSpec(BASE, params or {"heads[0].beta": [0.5, 1.0, 1.5], "particles.n": [40, 60]})


def test_spec_validation(tmp_path):
    assert len(spec().points) == 6
    with pytest.raises(ConfigError, match="mode must be one of"):
        SweepSpec(BASE, {"seed": [1]}, mode="random")
    with pytest.raises(ConfigError, match="equal length"):
        SweepSpec(BASE, {"seed": [1, 2], "particles.n": [10]}, mode="list")
    with pytest.raises(ConfigError, match=r"sweep point .*pde.lmax"):
        SweepSpec(BASE, {"pde.lmax": [11, 1]})
    with pytest.raises(ConfigError, match="head index 5 out of range"):
        SweepSpec(BASE, {"heads[5].beta": [1.0]})
    with pytest.raises(ConfigError, match="must list values that are numbers, strings, booleans or lists"):
        SweepSpec(BASE, {"initial.kappas": [{"a": 3.0}]})
    assert SweepSpec(BASE, {"initial.kappas": [[3.0, 2.0, 2.0], [1.0]]}).points[1] == {"initial.kappas": [1.0]}
    for text, match in [("parameters = 5\n", "parameters must be a table"), ('base = 5\n[parameters]\nseed = [1]\n',
                                                                             "base must be a config file name")]:
        f = tmp_path / "bad.toml"
        f.write_text(text)
        with pytest.raises(ConfigError, match=match):
            load_sweep_spec(f)
    f = tmp_path / "s.toml"
    f.write_text('mode = "list"\nbogus = 1\n[parameters]\nseed = [1, 2]\n')
    with pytest.raises(ConfigError, match=r"unknown key bogus; allowed top-level keys: \['base', 'base_config', 'mode', 'parameters'\]"):
        load_sweep_spec(f)
    f.write_text('mode = "list"\n[base_config.pde]\nlmax = 11\n[parameters]\nseed = [1, 2]\n')
    assert [p["seed"] for p in load_sweep_spec(f).points] == [1, 2]


def test_killed_worker_every_point_once_identical_to_serial(tmp_path):
    from distributed import Client, LocalCluster

    s = spec()
    out = tmp_path / "sweep"
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    killed = []

    def finished_tasks(dask_scheduler):
        return sum(ts.state == "memory" for ts in dask_scheduler.tasks.values())

    def killer():
        # once the first point is computed, kill (SIGKILL) a worker that is busy with another point
        # (the scheduler's view: the client writes a point's file only after its result arrives)
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            done = client.run_on_scheduler(finished_tasks) > 0
            busy = [w for w, keys in client.processing().items() if keys]
            if done and busy:
                pids = client.run(os.getpid, workers=[busy[0]])
                os.kill(pids[busy[0]], signal.SIGKILL)
                killed.append(busy[0])
            time.sleep(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        rows = run_sweep(s, out, client=client, retries=3, progress=False)
    finally:
        thread.join(timeout=5)
        client.close()
        cluster.close()
    assert killed, "the test never caught a busy worker to kill"
    assert [r["status"] for r in rows] == ["done"] * 6
    files = sorted(p.name for p in (out / "points").iterdir())
    assert files == [f"p{i:04d}.nc" for i in range(6)]        # exactly one file per point, no partials
    for i, point in enumerate(s.points):
        ref = tmp_path / f"serial{i}.nc"
        assert run_point(s.config(point).to_dict(), str(ref))["status"] == "done"
        a, b = load(out / "points" / f"p{i:04d}.nc"), load(ref)
        # same code and inputs in another process: deterministic to the last bit (tolerance 0)
        for name in ("w2", "X", "rho_lm_real", "pde_energy", "particle_energy"):
            np.testing.assert_array_equal(a[name].values, b[name].values)
    ds = load_sweep(out)
    assert ds["w2"].dims == ("time", "heads[0].beta", "particles.n")
    assert ds.sizes["heads[0].beta"] == 3 and ds.sizes["particles.n"] == 2


def test_rerun_skips_done_and_records_failures(tmp_path, monkeypatch):
    from distributed import Client, LocalCluster

    s = SweepSpec(BASE, {"seed": [1, 2]}, mode="list")
    out = tmp_path / "sw"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        rows = run_sweep(s, out, client=client, progress=False)
        assert [r["status"] for r in rows] == ["done", "done"]
        stamp = [(out / "points" / f"p{i:04d}.nc").stat().st_mtime_ns for i in range(2)]
        rows = run_sweep(s, out, client=client, progress=False)          # nothing left to do
        assert [(out / "points" / f"p{i:04d}.nc").stat().st_mtime_ns for i in range(2)] == stamp
        # a failing point is recorded with its error and does not stop the others
        bad = SweepSpec(BASE, {"particles.n": [40, 40], "seed": [5, 6]}, mode="list")
        import meanfield.workflow.run as run_module

        real_run = run_module.run
        monkeypatch.setattr(run_module, "run", lambda c, progress=None: (_ for _ in ()).throw(
            RuntimeError("boom")) if c.seed == 5 else real_run(c, progress=progress))
        rows = run_sweep(bad, tmp_path / "bad", client=client, progress=False)
    assert rows[0]["status"] == "failed" and "RuntimeError: boom" in rows[0]["error"]
    assert rows[1]["status"] == "done"
    assert not (tmp_path / "bad" / "points" / "p0000.nc").exists()      # no file posing as a result
