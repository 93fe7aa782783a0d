"""The equilibria branches on the package's task runner (workflow/equilibria_branches.compute_branches through
tasks.iter_tasks): the uniform branch first, then one task per switched branch; the same records bit for bit on
every executor, a resumed job takes the finished records, bad executors are refused by name, and
``meanfield equilibria --executor``."""

import dataclasses
import threading

import numpy as np
import pytest

from meanfield.workflow import equilibria_branches as branches
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


def test_general_heads_refuse_an_executor_by_name(tmp_path):
    P1, P2 = np.diag([1.0, 1.0, 0.0]), np.diag([0.0, 0.0, 1.0])
    cfg = EquilibriaConfig.from_dict({
        "heads": [{"M": (2 * P1).tolist(), "V": P1.tolist()}, {"M": (2 * P2).tolist(), "V": P2.tolist()}],
        "geometry": {"d": "sphere", "lmax": 20}, "continuation": {"nu_range": [0.39, 0.5], "step": 0.08}})
    assert cfg.general
    for call in (lambda: job.equilibria(cfg, executor="threads"),
                 lambda: job.equilibria_job(cfg, tmp_path / "out", executor="threads")):
        with pytest.raises(ValueError, match="executor applies to the branches of axisymmetric heads"):
            call()
    assert not (tmp_path / "out").exists()


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
