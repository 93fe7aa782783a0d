"""The equilibria job (workflow/equilibria_job.py, ``meanfield equilibria``) and the (d, beta) transition map
(workflow/transition_map.py): dataset against the analysis functions it is built on, resume, --force, bad input."""

import numpy as np
import pytest

from meanfield.analysis import equilibria as eq
from meanfield.analysis import phase_transition as pt
from meanfield.workflow import equilibria_branches as branches
from meanfield.workflow import equilibria_job as job
from meanfield.workflow.cli import main
from meanfield.workflow.equilibria_config import EquilibriaConfig
from meanfield.workflow.schema import ConfigError

# d = 3, beta = 2 beta_*^(3) (the default head): a discontinuous transition; lmax 24 resolves the branch down to
# nu = 0.5 (test_continuation uses the same model); step 0.2 gives a few dozen points per branch
SMALL = {"geometry": {"lmax": 24}, "continuation": {"nu_range": [0.5, 1.6], "step": 0.2}}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("eq") / "job"
    res = job.equilibria_job(EquilibriaConfig.from_dict(SMALL), out, progress=False)
    return out, res


def test_default_config_round_trips_and_is_the_printed_one(capsys):
    cfg = EquilibriaConfig()
    assert EquilibriaConfig.from_toml(cfg.to_toml()) == cfg
    assert cfg.heads[0].beta == 2 * pt.beta_star_bessel(3)           # exactly the float 2 beta_*^(3)
    assert main(["equilibria", "--print-default"]) == 0
    assert EquilibriaConfig.from_toml(capsys.readouterr().out) == cfg


def test_job_writes_dataset_and_figure(small):
    out, res = small
    assert [p.name for p in res["paths"]] == ["equilibria.nc", "bifurcation.png"]
    assert (out / "bifurcation.png").stat().st_size > 10_000 and not (out / job.PARTIAL).exists()
    assert res["failures"] == []
    ds = job.load_equilibria(out / "equilibria.nc")
    assert job.equilibria_config_of(ds) == EquilibriaConfig.from_dict(SMALL)      # the job can be rebuilt
    with pytest.raises(ValueError, match="not an equilibria dataset"):
        from meanfield.workflow.results import save
        save(ds.assign_attrs(kind="run"), out.parent / "other.nc")
        job.load_equilibria(out.parent / "other.nc")
    assert list(ds.branch_degree.values) == [0, 1] and list(ds.branch_status.values) == [0, 0]
    assert ds.sizes["point"] >= 24 and ds.sizes["l"] == 25              # "a few dozen" points per branch
    n = int(ds.branch_n_points[1])
    # the written file holds what was computed (NetCDF float64 round trip: exact)
    np.testing.assert_array_equal(ds.coefficients.values, res["dataset"].coefficients.values)
    # every point of the switched branch is a stationary state (residual at the corrector's 1e-12 tolerance,
    # relative to max |b|, which stays below 10 here) and its order parameter is |b_1| / sqrt(3)
    pde = branches.build_model(EquilibriaConfig.from_dict(SMALL))
    b, nu = ds.coefficients.values[1, :n], ds.nu.values[1, :n]
    res_max = max(np.abs(eq.self_consistency_residual(eq.at_noise(pde, nk), bk)).max() for bk, nk in zip(b, nu))
    assert res_max <= 1e-10
    np.testing.assert_allclose(ds.order_parameter.values[1, :n], np.abs(b[:, 1]) / np.sqrt(3), rtol=0, atol=0)
    # the amplitude |b_l| / Q_l(1) of a degree-1 branch is the order parameter (Q_1(1) = sqrt(3) from the basis:
    # round-off)
    np.testing.assert_allclose(ds.amplitude.values[1, :n], ds.order_parameter.values[1, :n], rtol=1e-14)
    # stability: the uniform state is stable exactly above nu_# (its leading eigenvalue is sigma_1 > 0 below)
    m = int(ds.branch_n_points[0])
    nus, stable = ds.nu.values[0, :m], ds.stable.values[0, :m]
    np.testing.assert_array_equal(stable == 1, nus > eq.nu_sharp(pde, 1))
    # on the clustered branch: unstable between the branch point and the fold, stable beyond it
    # (the points next to the branch point and the fold, where the eigenvalue crosses 0, are left out)
    kfold = int(np.argmax(nu))
    assert kfold > 4 and (ds.stable.values[1, 1:kfold - 1] == 0).all()
    assert (ds.stable.values[1, kfold + 2:n] == 1).all()


def test_fold_and_maxwell_point_equal_classify_transition(small):
    _, res = small
    ds = res["dataset"]
    ref = pt.classify_transition(branches.build_model(EquilibriaConfig.from_dict(SMALL)))
    kinds = list(ds.special_kind.values)
    fold = float(ds.special_parameter.values[kinds.index("fold")])
    maxwell = float(ds.special_parameter.values[kinds.index("maxwell")])
    # the same fold by Brent on t_p(s) (continuation, tol_s 1e-10 in arclength; nu is quadratic there) and by
    # Brent on nu(b_1): 1e-10 relative is loose; the Maxwell point by Brent on the amplitude (xtol 1e-13) in both
    assert fold == pytest.approx(ref.nu_fold, rel=1e-10)
    assert maxwell == pytest.approx(ref.nu_global, rel=1e-10)
    assert ds.attrs["transition"] == "discontinuous" and ds.attrs["nu_fold"] == ref.nu_fold
    # G of the clustered state equals G of uniform there (the free-energy gap is round-off, ~1e-15)
    assert abs(float(ds.special_free_energy_gap.values[kinds.index("maxwell")])) <= 1e-12


def test_branch_points_are_the_zeros_of_sigma_l(small):
    _, res = small
    ds = res["dataset"]
    pde = branches.build_model(EquilibriaConfig.from_dict(SMALL))
    bp = ds.special_kind.values == "branch_point"
    # nu_1 and nu_2 lie in [0.5, 1.6]; Brent on the signed smallest singular value: 1e-8 relative
    found = sorted(zip(ds.special_degree.values[bp], ds.special_parameter.values[bp]))
    assert [d for d, _ in found] == [1, 2]
    assert [p for _, p in found] == pytest.approx([eq.nu_sharp(pde, 1), eq.nu_sharp(pde, 2)], rel=1e-8)


def test_resume_after_an_interruption_gives_identical_arrays(small, tmp_path, monkeypatch):
    _, res = small
    out = tmp_path / "resumed"
    cfg = EquilibriaConfig.from_dict(SMALL)

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    with monkeypatch.context() as m:
        m.setattr(branches, "_switched", interrupted)           # Ctrl-C after the uniform branch was saved
        with pytest.raises(KeyboardInterrupt):
            job.equilibria_job(cfg, out, progress=False)
    assert (out / job.PARTIAL / "uniform.npz").is_file() and not (out / "equilibria.nc").exists()
    with monkeypatch.context() as m:
        m.setattr(branches, "_uniform", lambda *a: pytest.fail("the finished uniform branch was computed again"))
        again = job.equilibria_job(cfg, out, progress=False)["dataset"]
    for name in res["dataset"].data_vars:
        np.testing.assert_array_equal(again[name].values, res["dataset"][name].values, err_msg=name)


def test_branch_record_round_trips_through_npz(tmp_path):
    """A branch is a typed frozen record (issue 32): to_npz / from_npz give back every field, its scalars as int,
    str and float, the fields of another job kind None; a file that is no record is refused by name."""
    n, lmax = 3, 4
    rec = branches.BranchRecord(
        u=np.arange(n * lmax, dtype=float).reshape(n, lmax), p=np.linspace(1, 2, n), t_p=np.ones(n), degree=1,
        side=-1, status=2, message="not resolved", n_newton=7, eig=np.ones((n, 2)) * (1 - 2j),
        stable=np.array([True, False, True]), resolution=np.full(n, 1e-12),
        special_kind=np.array(["fold", "maxwell"], dtype="<U16"), special_p=np.array([1.2, 1.5]),
        special_u=np.zeros((2, lmax)), special_phi=np.full((2, lmax), np.nan), special_index=np.array([1, 2]),
        order=np.full(n, 0.5), gap=np.full(n, -1e-3))
    rec.to_npz(tmp_path / "b.npz")
    back = branches.BranchRecord.from_npz(tmp_path / "b.npz")
    assert not list(tmp_path.glob(".*.tmp")) and back.n_points == n and back.kind is None and back.sphere_eig is None
    assert (type(back.degree), type(back.status), type(back.message)) == (int, int, str)
    for f in ("u", "p", "eig", "stable", "special_kind", "special_phi", "special_index", "order", "gap"):
        np.testing.assert_array_equal(getattr(back, f), getattr(rec, f), err_msg=f)
        assert getattr(back, f).dtype == getattr(rec, f).dtype, f
    assert (back.degree, back.side, back.status, back.message, back.n_newton) == (1, -1, 2, "not resolved", 7)
    np.savez(tmp_path / "other.npz", u=np.zeros(2), velocity=np.ones(2))
    with pytest.raises(ValueError, match="not a branch record: unknown fields"):
        branches.BranchRecord.from_npz(tmp_path / "other.npz")
    np.savez(tmp_path / "short.npz", u=np.zeros(2))
    with pytest.raises(ValueError, match="not a branch record"):
        branches.BranchRecord.from_npz(tmp_path / "short.npz")


def test_force_and_refusals(small, tmp_path, capsys):
    out, _ = small
    cfg_file = tmp_path / "small.toml"
    cfg_file.write_text(EquilibriaConfig.from_dict(SMALL).to_toml())
    assert main(["equilibria", str(cfg_file), "--out", str(out), "-q"]) == 2
    assert "already holds a finished result" in capsys.readouterr().err
    before = (out / "equilibria.nc").stat().st_mtime_ns
    assert main(["equilibria", str(cfg_file), "--out", str(out), "--force", "-q", "--no-progress"]) == 0
    assert (out / "equilibria.nc").stat().st_mtime_ns > before
    assert "maxwell on branch 1" in capsys.readouterr().out
    # the unfinished branches of another config are not mixed in
    other = tmp_path / "other"
    (other / job.PARTIAL).mkdir(parents=True)
    (other / job.PARTIAL / "config.toml").write_text("# another config\n")
    assert main(["equilibria", str(cfg_file), "--out", str(other), "-q"]) == 2
    assert "unfinished branches of another config" in capsys.readouterr().err


@pytest.mark.parametrize("text, key", [
    ("[geometry]\nlmax = 2\n", "geometry.lmax"),
    ("[geometry]\nd = 1\n", "geometry.d"),
    ("[continuation]\nnu_range = [1.0, 0.5]\n", "continuation.nu_range"),
    ("[continuation]\nparameter = \"lambda\"\n", "continuation.parameter"),
    ("[continuation]\nsides = [2]\n", "continuation.sides"),
    ("[continuation]\nparameter = \"beta\"\nbeta_range = [1.0, 4.0]\nnu = 1.0\n[[heads]]\nbeta = 2.0\n",
     "heads[0].beta"),
    ("[[heads]]\nlam = 0.0\n", "heads[0].lam"),
    ("[[heads]]\nnormalization = \"bogus\"\n", "heads[0].normalization"),
    ("[outputs]\nfigure = false\n", "outputs.figure"),
])
def test_bad_configs_exit_2_naming_the_key(tmp_path, capsys, text, key):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    assert main(["equilibria", str(f), "--out", str(tmp_path / "o"), "-q"]) == 2
    err = capsys.readouterr().err
    assert key in err and "Traceback" not in err and not (tmp_path / "o" / "equilibria.nc").exists()


def test_a_range_that_misses_nu_sharp_is_reported(tmp_path, capsys):
    f = tmp_path / "miss.toml"
    f.write_text("[continuation]\nnu_range = [1.1, 1.6]\n")            # nu_# = 1.0394 lies below
    assert main(["equilibria", str(f), "--out", str(tmp_path / "o"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "never reaches nu_# = 1.039405085" in err and not list((tmp_path / "o").glob("*.png"))


def test_unresolved_branch_stops_with_status_2_and_the_command_exits_1(tmp_path, capsys):
    # lmax 12 cannot resolve the clustered states: the switched branch stops at the resolution monitor
    f = tmp_path / "coarse.toml"
    f.write_text("[geometry]\nlmax = 12\n[continuation]\nnu_range = [0.6, 1.6]\nstep = 0.2\n")
    with pytest.warns(UserWarning, match="truncates"):
        rc = main(["equilibria", str(f), "--out", str(tmp_path / "o"), "-q"])
    assert rc == 1
    assert "branch failed: degree 1 (b_1 > 0): status 2: state not resolved at lmax = 12" in capsys.readouterr().err
    ds = job.load_equilibria(tmp_path / "o" / "equilibria.nc")
    assert list(ds.branch_status.values) == [0, 2] and "not resolved" in ds.branch_message.values[1]


def test_transition_map_through_run_tasks_equals_phase_transition(tmp_path):
    from distributed import Client, LocalCluster

    from meanfield.workflow import transition_map as tm

    cfg = tm.TransitionMapConfig(d=(2, 3), beta_ratio=(0.5, 2.0), lmax=24)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        ds = tm.transition_map(cfg, tmp_path / "map", client=client, progress=False)
        again = tm.transition_map(cfg, tmp_path / "map", client=client, progress=False)   # all cells kept
    for i, d in enumerate(cfg.d):
        for j, ratio in enumerate(cfg.beta_ratio):
            ref = pt.phase_transition(d, ratio * pt.beta_star_bessel(d), "mean", 24)
            for k in ("nu_sharp", "nu_fold", "nu_global"):
                # the same deterministic computation on a worker: equal to round-off (the pickled floats exactly)
                assert ds[k].values[i, j] == getattr(ref, k)
            assert ds.discontinuous.values[i, j] == (ref.transition == "discontinuous")
    assert list(ds.discontinuous.values[:, 0]) == [0, 0] and list(ds.discontinuous.values[:, 1]) == [1, 1]
    np.testing.assert_array_equal(again.nu_fold.values, ds.nu_fold.values)
    from meanfield.workflow.plotting import transition_map_figure
    transition_map_figure(ds).savefig(tmp_path / "map.png")


def test_bad_map_file_exits_2(tmp_path, capsys):
    f = tmp_path / "map.toml"
    f.write_text("[map]\nd = [1, 3]\nbeta_ratio = [2.0]\n")
    assert main(["equilibria", "--map", str(f), "--out", str(tmp_path / "m"), "-q"]) == 2
    assert "map.d[0]" in capsys.readouterr().err
    f.write_text("[map]\nd = [3]\nbeta = [2.0]\nbeta_ratio = [2.0]\n")
    assert main(["equilibria", "--map", str(f), "--out", str(tmp_path / "m"), "-q"]) == 2
    assert "exactly one of beta" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="unknown key map.betas"):
        from meanfield.workflow.transition_map import load_map_config
        f.write_text("[map]\nd = [3]\nbetas = [2.0]\n")
        load_map_config(f)


def test_the_guide_examples_are_valid_configs():
    import re
    import tomllib
    from pathlib import Path

    from meanfield.workflow.transition_map import TransitionMapConfig

    guide = (Path(__file__).resolve().parents[1] / "docs" / "guide.md").read_text()
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", guide, re.S)]
    eq_blocks = [b for b in blocks if "geometry" in b]
    map_blocks = [b for b in blocks if "map" in b]
    assert len(eq_blocks) == 1 and len(map_blocks) == 1
    assert EquilibriaConfig.from_dict(eq_blocks[0]) == EquilibriaConfig()     # the guide shows the default
    assert TransitionMapConfig(**map_blocks[0]["map"]).d == (2, 3, 4)


def test_sphere_geometry_solves_every_state_on_the_full_sphere(tmp_path):
    # lmax 16 resolves the clustered branch up to nu ~ 1.16 (then the resolution monitor stops it: status 2)
    cfg = EquilibriaConfig.from_dict({"geometry": {"d": "sphere", "lmax": 16},
                                      "continuation": {"nu_range": [1.0, 1.3], "step": 0.3}})
    assert EquilibriaConfig.from_toml(cfg.to_toml()) == cfg
    ds = job.equilibria(cfg, progress=False)
    assert ds.attrs["geometry"] == "sphere" and list(ds.branch_status.values) == [0, 2]
    n = int(ds.branch_n_points[1])
    assert n >= 4 and (ds.sphere_status.values[1, :n] == 0).all()
    # the degree-1 branch holds rho_10 and solves for nu: the S^2 Newton-Krylov state is the axisymmetric one
    # (two bases and quadratures; their residuals are 1e-13): nu to 1e-10
    np.testing.assert_allclose(ds.sphere_nu.values[1, :n], ds.nu.values[1, :n], rtol=1e-10)
    # a cluster's orbit is 2-dimensional: two neutral rotation modes, removed and left out of the verdict; the
    # m = 0 eigenvalue of the axisymmetric block is among the full sphere's (ARPACK, tol 1e-12: 1e-8 relative)
    assert (ds.sphere_removed.values[1, 1:n] == 2).all()
    np.testing.assert_array_equal(ds.sphere_stable.values[1, :n], ds.stable.values[1, :n])
    for k in range(1, n):
        ev = ds.sphere_eigenvalue_real.values[1, k]
        rot = ds.sphere_rotation.values[1, k]
        assert ((rot > 1 - 1e-6) & (np.abs(ev) < 1e-8)).sum() == 2
        lead = ds.eigenvalue_real.values[1, k, 0]
        assert np.abs(ev - lead).min() <= 1e-8 * abs(lead)


def test_a_failed_corrector_is_recorded_and_the_command_exits_1(tmp_path, capsys, monkeypatch):
    # the switched branch's corrector fails after a few points (status 1, as continue_branch reports it)
    from meanfield.analysis import continuation as ct

    real = ct.switch_branch

    def failing(*a, **k):
        br = real(*a, **{**k, "max_steps": 4})
        return ct.Branch(br.u, br.p, br.t_p, br.special, 1, "the corrector failed at the smallest step ds = 1e-07")
    monkeypatch.setattr(ct, "switch_branch", failing)
    f = tmp_path / "small.toml"
    f.write_text(EquilibriaConfig.from_dict(SMALL).to_toml())
    assert main(["equilibria", str(f), "--out", str(tmp_path / "o"), "-q"]) == 1
    assert "branch failed: degree 1 (b_1 > 0): status 1: the corrector failed" in capsys.readouterr().err
    ds = job.load_equilibria(tmp_path / "o" / "equilibria.nc")
    assert list(ds.branch_status.values) == [0, 1] and int(ds.branch_n_points[1]) == 4


def test_continuation_in_beta_at_fixed_noise():
    # every head's beta is the parameter; at nu = 1.1 the uniform state loses stability where nu_#(beta) = 1.1 and
    # the clustered branch turns at the beta whose nu_fold is 1.1 (F_beta by central differences, step 1e-6 beta:
    # 1e-7 and 1e-8 relative, as in test_continuation)
    cfg = EquilibriaConfig.from_dict({"geometry": {"lmax": 24}, "continuation": {
        "parameter": "beta", "beta_range": [2.5, 4.5], "nu": 1.1, "step": 0.2}})
    ds = job.equilibria(cfg, progress=False)
    assert list(ds.branch_status.values) == [0, 0] and "classification_message" in ds.attrs
    kinds = list(ds.special_kind.values)
    bp = float(ds.special_parameter.values[kinds.index("branch_point")])
    fold = float(ds.special_parameter.values[kinds.index("fold")])
    assert eq.nu_sharp(pt.phase_transition_model(3, bp, lmax=24)) == pytest.approx(1.1, rel=1e-7)
    ref = pt.classify_transition(pt.phase_transition_model(3, fold, lmax=24))
    assert ref.nu_fold == pytest.approx(1.1, rel=1e-8)
    np.testing.assert_array_equal(ds.nu.values[np.isfinite(ds.parameter.values)], 1.1)


def test_long_equilibria_jobs_and_maps_are_refused_by_their_estimate(tmp_path, capsys):
    """No cost estimate used to stand before ``meanfield equilibria`` (lmax 512 on the sphere started hours of
    work) or ``--map`` (10^6 cells started a cluster): both are refused by the one cost guard before anything
    starts, naming the keys to change; the default job's estimate is about a second."""
    from meanfield.core import cost

    f = tmp_path / "big.toml"
    f.write_text('[geometry]\nd = "sphere"\nlmax = 512\n')
    assert main(["equilibria", str(f), "--out", str(tmp_path / "e"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "would take an estimated" in err and "geometry.lmax" in err and "Traceback" not in err
    assert not (tmp_path / "e" / "partial").exists()
    assert branches.estimate_job(EquilibriaConfig()).seconds < 0.1 * cost.TIME_LIMIT_S
    m = tmp_path / "map.toml"
    m.write_text(f"[map]\nd = {list(range(2, 1002))}\nbeta_ratio = {[round(0.5 + i / 400, 4) for i in range(1000)]}\n")
    assert main(["equilibria", "--map", str(m), "--out", str(tmp_path / "m"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "--map of 1000000 cells" in err and "map.d" in err and not (tmp_path / "m" / "tasks").exists()
