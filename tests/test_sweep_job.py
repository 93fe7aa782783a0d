"""The sweep as a job of the one shape (:class:`meanfield.workflow.jobs.JobFolder`): its folder locked while it
runs, stale temporaries removed, and once every point is done the combined ``sweep.nc`` (what ``load_sweep``
returns, with provenance, atomic) then ``sweep.png``; none of them while a point failed; a re-run of a finished
sweep computes nothing and rewrites them."""

import pytest
import xarray as xr

from meanfield.workflow import sweep as sweep_module
from meanfield.workflow.cli import main
from meanfield.workflow.jobs import FolderInUse, FolderLock
from meanfield.workflow.sweep import SWEEP_FIGURE, SWEEP_FILE, SweepSpec, load_sweep, run_sweep

BASE = {"seed": 3, "pde": {"lmax": 11}, "particles": {"n": 40},
        "integrator": {"t_final": 0.3, "n_frames": 3}, "outputs": {"figures": False, "animation": False}}
PROVENANCE = ("meanfield_version", "git_commit", "python_version", "numpy_version", "command", "started_at",
              "ended_at", "history")
SWEEP_TOML = """
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
[parameters]
seed = [5, 6]
"""


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as c:
        yield c


@pytest.fixture
def in_process_sweep(monkeypatch, client):
    """``meanfield sweep`` on the in-process cluster (a LocalCluster of worker processes takes seconds to start)."""
    real = sweep_module.run_sweep
    monkeypatch.setattr(sweep_module, "run_sweep", lambda spec, out, **kw: real(
        spec, out, client=client, progress=False))


@pytest.fixture
def seed_5_fails(monkeypatch):
    """The point of seed 5 raises (in the in-process workers: they share this module's state)."""
    import meanfield.workflow.run as run_module

    real_run = run_module.run
    monkeypatch.setattr(run_module, "run", lambda c, progress=None: (_ for _ in ()).throw(
        RuntimeError("boom")) if c.seed == 5 else real_run(c, progress=progress))


def test_a_finished_sweep_writes_its_dataset_then_its_figure_and_a_rerun_rewrites_them(tmp_path, client):
    out = tmp_path / "sw"
    (out / "points").mkdir(parents=True)
    stale = [out / f".{SWEEP_FILE}.a1b2.tmp", out / ".index.json.123.tmp", out / "points" / ".p0000.nc.x9.tmp"]
    for f in stale:                                          # left by killed writes
        f.write_bytes(b"half a file")
    spec = SweepSpec(BASE, {"heads[0].beta": [0.5, 1.0]})    # one swept key, a grid
    rows = run_sweep(spec, out, client=client, progress=False)
    assert [r["status"] for r in rows] == ["done", "done"]
    assert not any(f.exists() for f in stale)
    assert (out / SWEEP_FIGURE).stat().st_mtime_ns >= (out / SWEEP_FILE).stat().st_mtime_ns   # figure after
    with xr.open_dataset(out / SWEEP_FILE) as f:
        written = f.load()
    assert [k for k in PROVENANCE if k not in written.attrs] == []
    assert written.attrs["kind"] == "sweep" and written.attrs["sweep_parameters"] == '["heads[0].beta"]'
    combined = load_sweep(out)
    assert written.equals(combined)                          # what load_sweep returns
    assert combined["w2"].dims == ("time", "heads[0].beta") and list(combined["heads[0].beta"].values) == [0.5, 1.0]
    # a re-run of the finished sweep: no point recomputed, no refusal, sweep.nc and its figure rewritten
    points = [(out / r["path"]).stat().st_mtime_ns for r in rows]
    first = (out / SWEEP_FILE).stat().st_mtime_ns
    again = run_sweep(spec, out, client=None, progress=False)      # nothing to do: no cluster needed
    assert [r["status"] for r in again] == ["done", "done"]
    assert [(out / r["path"]).stat().st_mtime_ns for r in again] == points
    assert (out / SWEEP_FILE).stat().st_mtime_ns > first and (out / SWEEP_FIGURE).is_file()
    with xr.open_dataset(out / SWEEP_FILE) as f:
        assert f.load().equals(combined)
    assert sorted(p.name for p in out.iterdir()) == [".meanfield.lock", "index.json", "points", SWEEP_FILE,
                                                      SWEEP_FIGURE]


def test_no_sweep_nc_while_a_point_failed_and_the_retry_writes_it(tmp_path, client, seed_5_fails, monkeypatch):
    out = tmp_path / "sw"
    out.mkdir()
    (out / SWEEP_FILE).write_bytes(b"a previous sweep")     # not the combination of these points: removed
    (out / SWEEP_FIGURE).write_bytes(b"its figure")
    spec = SweepSpec(BASE, {"seed": [5, 6], "particles.n": [40, 30]}, mode="list")
    rows = run_sweep(spec, out, client=client, progress=False)
    assert [r["status"] for r in rows] == ["failed", "done"] and "RuntimeError: boom" in rows[0]["error"]
    assert not (out / SWEEP_FILE).exists() and not (out / SWEEP_FIGURE).exists()
    monkeypatch.undo()                                       # the failure is gone: the re-run retries the point
    rows = run_sweep(spec, out, client=client, progress=False)
    assert [r["status"] for r in rows] == ["done", "done"]
    with xr.open_dataset(out / SWEEP_FILE) as f:
        written = f.load()
    assert written.equals(load_sweep(out)) and written.sizes["point"] == 2
    assert list(written["particles.n"].values) == [40, 30] and (out / SWEEP_FIGURE).is_file()


def test_a_second_runner_is_refused_while_the_folder_is_locked(tmp_path, client):
    out = tmp_path / "sw"
    with FolderLock(out):                                   # another runner holds the folder
        with pytest.raises(FolderInUse, match="in use by process"):
            run_sweep(SweepSpec(BASE, {"seed": [1]}), out, client=client, progress=False)
    assert sorted(p.name for p in out.iterdir()) == [".meanfield.lock"]      # nothing run, nothing written


def test_combine_false_and_bad_arguments_refused_before_the_folder_is_touched(tmp_path, client):
    spec = SweepSpec(BASE, {"seed": [1]})
    for kw, match in ((dict(n_workers=0), "n_workers"), (dict(retries=-1), "retries"), (dict(progress="no"), "progress"),
                      (dict(combine="yes"), "combine")):
        with pytest.raises(ValueError, match=f"^{match}"):
            run_sweep(spec, tmp_path / "bad", **kw)
    assert not (tmp_path / "bad").exists()
    rows = run_sweep(spec, tmp_path / "c", client=client, progress=False, combine=False)
    assert rows[0]["status"] == "done" and not (tmp_path / "c" / SWEEP_FILE).exists()


def test_the_command_line_names_the_combined_dataset_or_why_there_is_none(tmp_path, capsys, in_process_sweep,
                                                                        monkeypatch):
    f = tmp_path / "s.toml"
    f.write_text(SWEEP_TOML)
    out = tmp_path / "out"
    with FolderLock(out):
        assert main(["sweep", str(f), "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert "is in use by process" in err and "Traceback" not in err
    import meanfield.workflow.run as run_module

    real_run = run_module.run
    with monkeypatch.context() as m:
        m.setattr(run_module, "run", lambda c, progress=None: (_ for _ in ()).throw(
            RuntimeError("boom")) if c.seed == 5 else real_run(c, progress=progress))
        assert main(["sweep", str(f), "--out", str(out), "-q"]) == 1
    text = capsys.readouterr().out
    assert "1 of 2 points done" in text and f"no {SWEEP_FILE} written (1 point not done)" in text
    assert not (out / SWEEP_FILE).exists()
    assert main(["sweep", str(f), "--out", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    assert "2 of 2 points done" in text and f"wrote {out / SWEEP_FILE}" in text
    assert (out / SWEEP_FILE).is_file() and (out / SWEEP_FIGURE).is_file()


def test_sweep_figure_draws_list_and_grid_sweeps_and_refuses_other_datasets(tmp_path, client):
    import numpy as np

    from meanfield.workflow.plotting import sweep_figure

    spec = SweepSpec(BASE, {"initial.kappas": [[3.0], [1.0]], "seed": [1, 2]})      # a 2 x 2 grid, lists as text
    run_sweep(spec, tmp_path / "g", client=client, progress=False, combine=False)
    ds = load_sweep(tmp_path / "g")
    assert ds["w2"].dims == ("time", "initial.kappas", "seed")
    fig = sweep_figure(ds)
    energy, w2 = fig.axes
    assert len(w2.lines) == 2 and [t.get_text() for t in w2.get_xticklabels()] == list(ds["initial.kappas"].values)
    assert len(energy.lines) == 4 and all(np.all(np.isfinite(line.get_ydata())) for line in fig.axes[1].lines)
    with pytest.raises(ValueError, match="sweep_parameters"):
        sweep_figure(ds.drop_attrs())
    with pytest.raises(ValueError, match="must be the xarray.Dataset of a sweep"):
        sweep_figure(ds["w2"])


def test_a_refused_spec_keeps_the_previous_sweep_nc(tmp_path, client):
    """A bad ``spec`` is refused by name before the folder is touched: the finished sweep's files stay."""
    out = tmp_path / "sw"
    run_sweep(SweepSpec(BASE, {"seed": [1]}), out, client=client, progress=False)
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert SWEEP_FILE in before and SWEEP_FIGURE in before
    with pytest.raises(ValueError, match="^spec must be a SweepSpec .*; received dict"):
        run_sweep({"base": {}}, out, client=client, progress=False)
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
