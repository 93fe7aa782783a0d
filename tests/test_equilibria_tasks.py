"""The equilibria branches on the package's task runner (workflow/equilibria_branches.compute_branches through
tasks.iter_tasks): the uniform branch first, then one task per switched branch; the same records bit for bit on
every executor, a resumed job takes the finished records, bad executors are refused by name, and
``meanfield equilibria --executor``; the same for general heads (workflow/equilibria_general.general_branches: the
primary branch, then one task per switched branch)."""

import dataclasses
import shutil
import threading

import numpy as np
import pytest

from meanfield.analysis import sphere_states as ss
from meanfield.workflow import equilibria_branches as branches
from meanfield.workflow import equilibria_general as general
from meanfield.workflow import equilibria_job as job
from meanfield.workflow import tasks
from meanfield.workflow.cli import build_parser, main
from meanfield.workflow.equilibria_config import EquilibriaConfig

# the small model of test_equilibria_job (d = 3, beta = 2 beta_*^(3), lmax 24) with both sides of degrees 1 and 2:
# four switched branches (about 0.15 s each)
FOUR = {"geometry": {"lmax": 24}, "continuation": {"nu_range": [0.5, 1.6], "step": 0.2, "degrees": [1, 2],
                                                   "sides": [1, -1]}}
NAMES = ["uniform", "degree1_plus", "degree1_minus", "degree2_plus", "degree2_minus"]


def _assert_same(a, b):
    """Two lists of BranchRecord: every field equal, arrays bit for bit (NaN where NaN) with their dtypes."""
    assert len(a) == len(b)
    for k, (x, y) in enumerate(zip(a, b)):
        for f in dataclasses.fields(branches.BranchRecord):
            u, v = getattr(x, f.name), getattr(y, f.name)
            if isinstance(u, np.ndarray):
                assert isinstance(v, np.ndarray) and u.dtype == v.dtype, (k, f.name)
                assert np.array_equal(u, v, equal_nan=u.dtype.kind in "fc"), (k, f.name)
            elif isinstance(u, float) and np.isnan(u):
                assert np.isnan(v), (k, f.name)
            else:
                assert u == v, (k, f.name)


@pytest.fixture(scope="module")
def config():
    return EquilibriaConfig.from_dict(FOUR)


@pytest.fixture(scope="module")
def loop(config):
    return branches.compute_branches(config, progress=False)


def test_the_loop_gives_the_uniform_branch_then_the_switched_ones_in_order(loop):
    assert [(r.degree, r.side) for r in loop] == [(0, 0), (1, 1), (1, -1), (2, 1), (2, -1)]
    assert all(r.n_points > 1 for r in loop)


@pytest.mark.parametrize("executor", ["threads", "synchronous", "processes"])
def test_every_executor_gives_the_loop_records_bit_for_bit(config, loop, executor):
    _assert_same(branches.compute_branches(config, progress=False, executor=executor), loop)


def test_each_switched_branch_is_one_task_of_iter_tasks(config, loop, monkeypatch):
    seen = []
    real = tasks.iter_tasks

    def spy(func, inputs, **kw):
        seen.append((len(list(inputs)), kw["executor"], kw["done"], kw["desc"]))
        return real(func, inputs, **kw)
    monkeypatch.setattr(branches, "iter_tasks", spy)
    _assert_same(branches.compute_branches(config, progress=False, executor="threads"), loop)
    assert seen == [(4, "threads", 1, "equilibria (branches)")]       # one bar over the five branches


def test_a_resumed_run_takes_the_finished_records(config, loop, tmp_path, monkeypatch):
    folder = tmp_path / "partial"
    folder.mkdir()
    _assert_same(branches.compute_branches(config, folder, progress=False, executor="threads"), loop)
    assert sorted(p.stem for p in folder.glob("*.npz")) == sorted(NAMES)
    assert not list(folder.glob(".*.tmp"))
    # everything finished: nothing is computed again, every branch is told to log as taken from the folder
    lines = []
    with monkeypatch.context() as m:
        m.setattr(branches, "_uniform", lambda *a: pytest.fail("the finished uniform branch was computed again"))
        m.setattr(branches, "_switched", lambda *a: pytest.fail("a finished switched branch was computed again"))
        again = branches.compute_branches(config, folder, progress=False, log=lines.append, executor="threads")
    _assert_same(again, loop)
    assert [line.split(":")[0] for line in lines] == NAMES and all("finished earlier" in line for line in lines)
    # one switched branch missing (interrupted there): only that one is computed, by its task
    (folder / "degree2_plus.npz").unlink()
    calls, lock = [], threading.Lock()
    real = branches._switched

    def counted(prob, point, side):
        with lock:
            calls.append(side)
        return real(prob, point, side)
    with monkeypatch.context() as m:
        m.setattr(branches, "_switched", counted)
        lines.clear()
        again = branches.compute_branches(config, folder, progress=False, log=lines.append, executor="threads")
    _assert_same(again, loop)
    assert len(calls) == 1 and (folder / "degree2_plus.npz").is_file()
    assert [line.split(":")[0] for line in lines] == [n for n in NAMES if n != "degree2_plus"]


def test_a_missing_branch_point_is_refused_before_any_switched_branch_starts(config, loop, tmp_path, monkeypatch):
    # a uniform branch that found the degree-1 branch point only: the degree-2 request is refused by name, and
    # no switched branch (not even degree 1's, requested first) was computed or saved
    uni = loop[0]
    keep = np.array([not (k == "branch_point" and branches.degree_of(phi) == 2)
                     for k, phi in zip(uni.special_kind, uni.special_phi)])
    assert (~keep).sum() == 1
    cut = dataclasses.replace(uni, special_kind=uni.special_kind[keep], special_p=uni.special_p[keep],
                              special_u=uni.special_u[keep], special_phi=uni.special_phi[keep],
                              special_index=uni.special_index[keep])
    folder = tmp_path / "partial"
    folder.mkdir()
    cut.to_npz(folder / "uniform.npz")
    monkeypatch.setattr(branches, "_switched", lambda *a: pytest.fail("a switched branch started"))
    with pytest.raises(ValueError, match="holds no branch point of degree 2"):
        branches.compute_branches(config, folder, progress=False, executor="threads")
    assert [p.name for p in folder.iterdir()] == ["uniform.npz"]


@pytest.mark.parametrize("bad", ["dask", "Threads", "", 1, True])
def test_an_unknown_executor_is_refused_by_name_before_anything_runs(config, tmp_path, monkeypatch, bad):
    monkeypatch.setattr(branches, "_uniform", lambda *a: pytest.fail("the uniform branch started"))
    with pytest.raises(ValueError, match="executor must be one of"):
        branches.compute_branches(config, tmp_path, progress=False, executor=bad)
    with pytest.raises(ValueError, match="executor must be one of"):
        job.equilibria_job(config, tmp_path / "out", progress=False, executor=bad)
    assert not (tmp_path / "out").exists() and not list(tmp_path.iterdir())


# general heads (test_equilibria_general's paper heads) at lmax 18, the cheapest resolved there, both sides and four
# points per switched branch: the primary (about 8 s, most of it locating its branch point) and two switched branches
# (about 1 s each)
P1, P2 = np.diag([1.0, 1.0, 0.0]), np.diag([0.0, 0.0, 1.0])
GENERAL = {"heads": [{"M": (2 * P1).tolist(), "V": P1.tolist()}, {"M": (2 * P2).tolist(), "V": P2.tolist()}],
           "geometry": {"d": "sphere", "lmax": 18},
           "continuation": {"nu_range": [0.39, 0.5], "step": 0.08, "n_eigenvalues": 1, "sides": [1, -1],
                            "max_points": 4}}


@pytest.fixture(scope="module")
def gconfig():
    cfg = EquilibriaConfig.from_dict(GENERAL)
    assert cfg.general
    return cfg


@pytest.fixture(scope="module")
def gloop(gconfig, tmp_path_factory):
    """The loop's records and a folder holding its primary branch only (stage 1, the same code on every executor:
    the executors' runs start from it, so that each computes its switched branches only)."""
    folder = tmp_path_factory.mktemp("gloop")
    recs = general.general_branches(gconfig, folder, progress=False)
    for p in folder.glob("switched*.npz"):
        p.unlink()
    assert [p.name for p in folder.iterdir()] == ["primary.npz"]
    return recs, folder / "primary.npz"


def _gnames(recs):
    first = recs[0]
    (j,) = [j for j in np.flatnonzero(first.special_kind == "branch_point") if first.special_located[j]]
    return ["primary", f"switched{j}_plus", f"switched{j}_minus"]


def test_general_heads_loop_gives_the_primary_then_its_switched_branches(gloop):
    recs, _ = gloop
    assert [(str(r.kind), r.side) for r in recs] == [("primary", 0), ("switched", 1), ("switched", -1)]
    assert all(r.n_points > 1 for r in recs) and len(_gnames(recs)) == 3


@pytest.mark.parametrize("executor", ["threads", "synchronous", "processes"])
def test_general_heads_every_executor_gives_the_loop_records_bit_for_bit(gconfig, gloop, executor, tmp_path,
                                                                         monkeypatch):
    recs, primary = gloop
    shutil.copy(primary, tmp_path / "primary.npz")
    seen, lines = [], []
    real = tasks.iter_tasks

    def spy(func, inputs, **kw):
        seen.append((len(list(inputs)), kw["executor"], kw["done"], kw["desc"]))
        return real(func, inputs, **kw)
    monkeypatch.setattr(general, "iter_tasks", spy)
    _assert_same(general.general_branches(gconfig, tmp_path, progress=False, log=lines.append, executor=executor),
                 recs)
    assert seen == [(2, executor, 1, "equilibria (general heads, branches)")]   # one task per switched branch
    assert sorted(p.stem for p in tmp_path.glob("*.npz")) == sorted(_gnames(recs)) and not list(tmp_path.glob(".*"))
    assert [line.split(":")[0] for line in lines] == ["primary"]


def test_general_heads_a_resumed_run_takes_every_record(gconfig, gloop, tmp_path, monkeypatch):
    recs, primary = gloop
    shutil.copy(primary, tmp_path / "primary.npz")
    _assert_same(general.general_branches(gconfig, tmp_path, progress=False, executor="threads"), recs)
    assert sorted(p.stem for p in tmp_path.glob("*.npz")) == sorted(_gnames(recs))
    lines = []
    with monkeypatch.context() as m:
        m.setattr(ss.GibbsProblem, "solve", lambda *a, **k: pytest.fail("the primary branch was computed again"))
        m.setattr(general.ct, "continue_branch", lambda *a, **k: pytest.fail("a branch was computed again"))
        m.setattr(general.ct, "switch_branch", lambda *a, **k: pytest.fail("a switched branch was computed again"))
        again = general.general_branches(gconfig, tmp_path, progress=False, log=lines.append, executor="threads")
    _assert_same(again, recs)
    assert [line.split(":")[0] for line in lines] == _gnames(recs)
    assert all("finished earlier" in line for line in lines)


@pytest.mark.parametrize("bad", ["dask", "Threads", "", 1, True])
def test_general_heads_refuse_an_unknown_executor_before_anything_runs(gconfig, tmp_path, monkeypatch, bad):
    monkeypatch.setattr(general, "check_general", lambda *a: pytest.fail("the primary branch started"))
    with pytest.raises(ValueError, match="executor must be one of"):
        general.general_branches(gconfig, tmp_path, progress=False, executor=bad)
    assert not list(tmp_path.iterdir())


def test_the_job_passes_the_executor_to_the_general_branches(gconfig, tmp_path, monkeypatch):
    seen = []

    class Stop(Exception):
        pass

    def spy(config, folder=None, progress=None, log=None, executor=None):
        seen.append(executor)
        raise Stop
    monkeypatch.setattr(general, "general_branches", spy)
    for call in (lambda: job.equilibria(gconfig, executor="threads"),
                 lambda: job.equilibria_job(gconfig, tmp_path / "out", progress=False, executor="processes")):
        with pytest.raises(Stop):
            call()
    assert seen == ["threads", "processes"]


def test_the_cli_runs_the_branches_on_an_executor(tmp_path, capsys):
    small = {"geometry": {"lmax": 24}, "continuation": {"nu_range": [0.5, 1.6], "step": 0.2},
             "outputs": {"figures": False}}
    f = tmp_path / "small.toml"
    f.write_text(EquilibriaConfig.from_dict(small).to_toml())
    assert main(["equilibria", str(f), "--out", str(tmp_path / "loop"), "-q"]) == 0
    assert main(["equilibria", str(f), "--out", str(tmp_path / "threads"), "-q", "--executor", "threads"]) == 0
    a, b = (job.load_equilibria(tmp_path / d / "equilibria.nc") for d in ("loop", "threads"))
    assert list(a.data_vars) == list(b.data_vars)
    for name in a.data_vars:
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)
    capsys.readouterr()
    # the choices are the task runner's executors; a bad one and --executor with --map exit 2, no traceback
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["equilibria"]
    assert tuple(next(a for a in sub._actions if a.dest == "executor").choices) == tasks.EXECUTORS
    with pytest.raises(SystemExit) as exc:
        main(["equilibria", str(f), "--out", str(tmp_path / "bad"), "--executor", "dask"])
    assert exc.value.code == 2 and "--executor" in capsys.readouterr().err
    assert main(["equilibria", "--map", str(f), "--out", str(tmp_path / "map"), "--executor", "threads", "-q"]) == 2
    err = capsys.readouterr().err
    assert "--executor applies to the branches of one config" in err and "Traceback" not in err
