"""One shape of a job (issue 32, item 3): every job's folder goes through :class:`meanfield.workflow.jobs.JobFolder`.

The jobs: ``meanfield run`` (the main job), ``meanfield equilibria``, ``meanfield equilibria --map`` (the transition
map) and ``meanfield phase-diagram``.  Each refuses a finished result without ``--force`` (naming it), is refused
while another writer holds the folder's lock, removes the hidden temporaries of a killed save and writes its dataset
with the provenance attributes, then its figures.  ``meanfield sweep`` has the same shape but is always resumable:
a re-run of a finished sweep is not refused and rewrites its ``sweep.nc`` (:func:`test_the_sweep_job`).
"""

import os

import pytest
import xarray as xr

from meanfield.workflow import equilibria_job, sweep, transition_map
from meanfield.workflow.cli import main
from meanfield.workflow.config import RunConfig
from meanfield.workflow.equilibria_config import EquilibriaConfig
from meanfield.workflow.jobs import FolderInUse, FolderLock, JobFolder, ResultExists

RUN = RunConfig.from_dict({"seed": 2, "pde": {"lmax": 15}, "particles": {"n": 60},
                           "integrator": {"t_final": 0.4, "n_frames": 5},
                           "outputs": {"figures": False, "animation": False}}).to_toml()
# the small config of test_equilibria_job (a few dozen points per branch), without the figure
EQUILIBRIA = EquilibriaConfig.from_dict({"geometry": {"lmax": 24}, "continuation": {"nu_range": [0.5, 1.6],
                                                                                   "step": 0.2},
                                         "outputs": {"figures": False}}).to_toml()
MAP = "[map]\nd = [2]\nbeta_ratio = [2.0]\nlmax = 24\n"
PHASE = "[phase_diagram]\nbetas = [1.0]\nt_final = 0.2\nbatch = 2\nn = 4\nrecord_every = 1\n"
SWEEP = ('mode = "list"\n[base_config]\nseed = 2\n[base_config.pde]\nlmax = 11\n[base_config.particles]\nn = 40\n'
         '[base_config.integrator]\nt_final = 0.3\nn_frames = 3\n[parameters]\nseed = [1]\n')

# job: (config text, the command line before --out, the result's file name)
JOBS = {"run": (RUN, ["run", "{cfg}", "--no-progress", "-q"], "result.nc"),
        "equilibria": (EQUILIBRIA, ["equilibria", "{cfg}", "--no-progress", "-q"], "equilibria.nc"),
        "map": (MAP, ["equilibria", "--map", "{cfg}", "--no-progress", "-q"], "transition_map.nc"),
        "phase-diagram": (PHASE, ["phase-diagram", "{cfg}", "--no-progress"], "phase_diagram.nc")}
PROVENANCE = ("meanfield_version", "git_commit", "python_version", "numpy_version", "command", "started_at",
              "ended_at", "history")


def argv(job, tmp_path, out, *more):
    text, args, _ = JOBS[job]
    cfg = tmp_path / f"{job}.toml"
    cfg.write_text(text)
    return [a.format(cfg=cfg) for a in args] + ["--out", str(out), *more]


@pytest.fixture
def in_process_map(monkeypatch):
    """The map's cells on an in-process cluster (a LocalCluster of worker processes takes seconds to start)."""
    from distributed import Client, LocalCluster

    real = transition_map.transition_map

    def run(config, out_dir, **kw):
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            return real(config, out_dir, client=client, progress=False)
    monkeypatch.setattr(transition_map, "transition_map", run)


@pytest.mark.parametrize("job", list(JOBS))
def test_every_job_refuses_a_finished_result_without_force(job, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    result = out / JOBS[job][2]
    result.write_bytes(b"a finished result")                  # refused before anything is computed
    assert main(argv(job, tmp_path, out)) == 2
    err = capsys.readouterr().err
    assert "already holds a finished" in err and "--force" in err and "Traceback" not in err
    assert result.read_bytes() == b"a finished result"


@pytest.mark.parametrize("job", list(JOBS))
def test_a_second_writer_is_refused_by_the_lock(job, tmp_path, capsys):
    out = tmp_path / "out"
    with FolderLock(out):                                     # another writer holds the folder
        assert main(argv(job, tmp_path, out)) == 2
    err = capsys.readouterr().err
    assert f"is in use by process {os.getpid()}" in err and "Traceback" not in err
    assert not (out / JOBS[job][2]).exists()


@pytest.mark.parametrize("job", list(JOBS))
def test_stale_temporaries_removed_provenance_written_force_replaces(job, tmp_path, capsys, in_process_map):
    out = tmp_path / "out"
    out.mkdir()
    name = JOBS[job][2]
    stale = out / f".{name}.x1y2.tmp"
    stale.write_bytes(b"half a file")                         # left by a killed save
    assert main(argv(job, tmp_path, out)) == 0
    assert not stale.exists() and not list(out.glob(".*.tmp"))
    with xr.open_dataset(out / name) as ds:
        missing = [k for k in PROVENANCE if k not in ds.attrs]
    assert missing == [], f"{job}: provenance attributes missing: {missing}"
    capsys.readouterr()
    assert main(argv(job, tmp_path, out)) == 2                # finished: refused ...
    assert "--force" in capsys.readouterr().err
    first = (out / name).stat().st_mtime_ns
    assert main(argv(job, tmp_path, out, "--force")) == 0     # ... unless --force
    assert (out / name).stat().st_mtime_ns > first


def test_the_sweep_job(tmp_path, capsys, monkeypatch):
    """The sweep: refused while another writer holds the lock, stale temporaries removed, ``sweep.nc`` with the
    provenance then ``sweep.png``; finished, it is resumed (rewritten), not refused."""
    from distributed import Client, LocalCluster

    real = sweep.run_sweep
    cfg, out = tmp_path / "sweep.toml", tmp_path / "out"
    cfg.write_text(SWEEP)
    args = ["sweep", str(cfg), "--out", str(out), "--no-progress", "-q"]
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        monkeypatch.setattr(sweep, "run_sweep", lambda spec, out_dir, **kw: real(spec, out_dir, client=client,
                                                                                progress=False))
        with FolderLock(out):
            assert main(args) == 2
        assert f"is in use by process {os.getpid()}" in capsys.readouterr().err
        stale = out / ".sweep.nc.x1y2.tmp"
        stale.write_bytes(b"half a file")
        assert main(args) == 0
        assert not stale.exists() and not list(out.glob(".*.tmp")) and (out / "sweep.png").is_file()
        with xr.open_dataset(out / "sweep.nc") as ds:
            assert [k for k in PROVENANCE if k not in ds.attrs] == []
        first = (out / "sweep.nc").stat().st_mtime_ns
        assert main(args) == 0                                # finished: resumed, not refused
    assert (out / "sweep.nc").stat().st_mtime_ns > first


def test_equilibria_force_keeps_the_result_when_the_checks_refuse(tmp_path, capsys):
    """--force removes the previous result only once the job's checks have passed (the main job's rule)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "equilibria.nc").write_bytes(b"previous")
    f = tmp_path / "miss.toml"
    f.write_text("[continuation]\nnu_range = [1.1, 1.6]\n")            # refused: nu_# = 1.0394 lies below
    assert main(["equilibria", str(f), "--out", str(out), "--force", "-q"]) == 2
    assert "never reaches nu_#" in capsys.readouterr().err
    assert (out / "equilibria.nc").read_bytes() == b"previous"


def test_job_folder_lifecycle(tmp_path):
    out = tmp_path / "job"
    with JobFolder(out, "r.nc", outputs=("fig.png",)) as folder:
        assert (out / ".meanfield.lock").is_file()
        with pytest.raises(FolderInUse, match="in use"):
            JobFolder(out, "r.nc").open()
        ds = xr.Dataset({"x": ("i", [1.0, 2.0])}, attrs={"schema_version": 1})
        with pytest.raises(RuntimeError, match="after its dataset"):
            folder.save_figures(lambda path: [])              # figures come after the dataset
        assert folder.save(ds) == out / "r.nc"
        assert "git_commit" in ds.attrs and "started_at" in ds.attrs
        assert folder.save_figures(lambda path: [path / "fig.png"]) == [out / "fig.png"]
        (out / ".index.json.7.tmp").write_bytes(b"")        # a killed save of another file of the job
        assert folder.remove_temporaries("index.json") == [out / ".index.json.7.tmp"]
    assert folder.paths == [out / "r.nc", out / "fig.png"]
    with pytest.raises(RuntimeError, match="not open"):
        folder.save(ds)
    with pytest.raises(RuntimeError, match="not open"):
        folder.remove_temporaries("index.json")
    with pytest.raises(ResultExists, match="--force to replace it and its figure$"):
        JobFolder(out, "r.nc", outputs=("fig.png",)).open()
    (out / "fig.png").write_bytes(b"")
    with JobFolder(out, "r.nc", force=True, outputs=("fig.png",)) as again:
        assert (out / "r.nc").exists()                        # nothing removed before the job's checks
        assert again.remove_previous() == [out / "r.nc", out / "fig.png"]
    with JobFolder(out, "r.nc", resume=True) as resumed:        # a resumed job is not refused
        assert resumed.remove_previous() == []


@pytest.mark.parametrize("kw, match", [
    (dict(out_dir="", result_name="r.nc"), "out_dir must name a folder"),
    (dict(out_dir="o", result_name="a/r.nc"), "result_name must be a file name"),
    (dict(out_dir="o", result_name=""), "result_name must be a file name"),
    (dict(out_dir="o", result_name="r.nc", force="yes"), "force"),
    (dict(out_dir="o", result_name="r.nc", resume=1.5), "resume"),
])
def test_job_folder_refuses_bad_arguments_by_name(kw, match):
    with pytest.raises(ValueError, match=match):
        JobFolder(kw.pop("out_dir"), kw.pop("result_name"), **kw)


def test_the_equilibria_refusal_is_the_one_result_exists():
    with pytest.raises(AttributeError, match="ResultExists"):
        equilibria_job.EquilibriaExists  # noqa: B018
