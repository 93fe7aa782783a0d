"""Given initial particles (paired_run(X0=...), [particles] positions = "X0.npy") and continuing a
finished run (meanfield.workflow.extend, meanfield run --extend DIR --t-final T): issue 14, item 5."""

import hashlib

import numpy as np
import pytest

from meanfield.core.densities import sample_particles, vmf_mixture_density
from meanfield.core.heads import scalar_heads
from meanfield.core.sphere import SphereGrid
from meanfield.workflow import paired
from meanfield.workflow.cli import main
from meanfield.workflow.config import RunConfig, load_config
from meanfield.workflow.extend import extend
from meanfield.workflow.paired import PDESettings
from meanfield.workflow.results import config_of, load
from meanfield.workflow.run import run
from meanfield.workflow.schema import ConfigError

SMALL = {"pde": {"lmax": 11}, "particles": {"n": 40}, "initial": {"kappas": [1.0]}, "seed": 3,
         "outputs": {"figures": False, "animation": False}}


def small(t_final, n_frames, **over):
    d = {k: dict(v) if isinstance(v, dict) else v for k, v in SMALL.items()}
    d["integrator"] = {"t_final": t_final, "n_frames": n_frames}
    for k, v in over.items():
        d[k] = v
    return RunConfig.from_dict(d)


# ---------------------------------------------------------------------------- given particles
def test_paired_run_with_given_particles_is_the_sampled_run():
    heads = scalar_heads([1.0], 3, beta=1.0, normalization="mean")
    grid = SphereGrid(11)
    rho = vmf_mixture_density(grid, np.array([[0.0, 0.0, 1.0]]), 1.0, None, 0.25)
    X0 = sample_particles(grid, rho, 30, method="iid", seed=5)
    a = paired.paired_run(heads, rho, 30, 0.2, seed=5, pde=PDESettings(lmax=11))
    b = paired.paired_run(heads, rho, 30, 0.2, seed=5, X0=X0, pde=PDESettings(lmax=11))
    # the same start and the same arithmetic: the same numbers, bit for bit (tolerance 0)
    np.testing.assert_array_equal(a.particle_states, b.particle_states)
    np.testing.assert_array_equal(a.w2, b.w2)
    assert b.config["sampling"] == "given"
    with pytest.raises(ValueError, match=r"X0 must hold n_particles = 31 tokens \(shape \(31, 3\)\); received shape"):
        paired.paired_run(heads, rho, 31, 0.2, X0=X0, pde=PDESettings(lmax=11))
    with pytest.raises(ValueError, match="X0 must be unit vectors"):
        paired.paired_run(heads, rho, 30, 0.2, X0=2 * X0, pde=PDESettings(lmax=11))


def _write_tokens(path, n, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, 3))
    np.save(path, X / np.linalg.norm(X, axis=1, keepdims=True))
    return np.load(path)


def test_positions_file_in_a_config(tmp_path):
    X = _write_tokens(tmp_path / "X0.npy", 25)
    base = "seed = 3\n[pde]\nlmax = 11\n[integrator]\nt_final = 0.2\nn_frames = 3\n[initial]\nkappas = [1.0]\n"
    (tmp_path / "a.toml").write_text(base + '[particles]\npositions = "X0.npy"\n')
    config = load_config(tmp_path / "a.toml")
    assert config.particles.n == 25 and config.particles.positions == str((tmp_path / "X0.npy").resolve())
    ds = run(config, progress=False)
    np.testing.assert_array_equal(ds["X"].values[0], X)       # the tokens of the file, as given (tolerance 0)
    assert config_of(ds) == config                            # the stored config reads back (checkpoints, extend)
    assert RunConfig.from_toml(config.to_toml()) == config
    (tmp_path / "b.toml").write_text(base + '[particles]\npositions = "X0.npy"\nn = 24\n')
    with pytest.raises(ConfigError, match=r"particles.n must equal the number of tokens in particles.positions "
                                          r"\(25\), or be omitted; received 24"):
        load_config(tmp_path / "b.toml")
    (tmp_path / "c.toml").write_text(base + '[particles]\npositions = "X0.npy"\nsampling = "stratified"\n')
    with pytest.raises(ConfigError, match="particles.positions gives the tokens, so particles.sampling does not "
                                          "apply"):
        load_config(tmp_path / "c.toml")
    (tmp_path / "d.toml").write_text(base + '[particles]\npositions = "missing.npy"\n')
    with pytest.raises(ConfigError, match="particles.positions must name a readable .npy file"):
        load_config(tmp_path / "d.toml")
    np.save(tmp_path / "bad.npy", np.ones((4, 3)))
    (tmp_path / "e.toml").write_text(base + '[particles]\npositions = "bad.npy"\n')
    with pytest.raises(ConfigError, match="particles.positions must be unit vectors"):
        load_config(tmp_path / "e.toml")


# ---------------------------------------------------------------------------- extending a run
def test_extend_continues_as_one_run_would():
    ds = run(small(0.4, 5), progress=False)
    ds2 = extend(ds, 0.8)
    full = run(small(0.8, 9), progress=False)
    np.testing.assert_allclose(ds2["time"].values, full["time"].values, rtol=0, atol=1e-15)  # frames 0.1 apart
    # both legs are controlled to rtol 1e-7, atol 1e-10 per step; the continuation restarts the step
    # sequence at t = 0.4, so it differs from one run by the global error (about 2e-10 here): 1e-6 is
    # far above that and far below any real change (W2 changes by 0.03 over the run)
    for v in ("X", "rho_lm_real", "rho_lm_imag", "w2", "pde_energy", "particle_energy", "pde_entropy"):
        np.testing.assert_allclose(ds2[v].values, full[v].values, rtol=0, atol=1e-6, err_msg=v)
    np.testing.assert_array_equal(ds2["X"].values[:5], ds["X"].values)  # the old frames are kept as they were
    assert ds2.attrs["extended_from"] == "[0.4]" and ds2.attrs["pde_status"] == 0
    assert RunConfig.from_dict(__import__("json").loads(ds2.attrs["config"])).integrator.t_final == 0.8


def test_extend_refuses_what_cannot_continue():
    ds = run(small(0.2, 3), progress=False)
    with pytest.raises(ValueError, match="t_final must be a number > 0.2, the last time of the run; received 0.2"):
        extend(ds, 0.2)
    stopped = ds.copy()
    stopped.attrs["pde_status"] = 1
    with pytest.raises(ValueError, match="only a run whose PDE and particles reached its last time"):
        extend(stopped, 0.4)
    with pytest.raises(ValueError, match="ds must be a run dataset"):
        extend({"time": [0.0]}, 0.4)


def test_extend_a_one_frame_dataset_uses_the_spacing_of_its_run():
    """A one-frame dataset (a run sliced to one time) has no spacing of its own: the new frames take that of the
    run it came from (its config: t_final / (n_frames - 1)); the count used to be (t_final - t1) / 0, an
    OverflowError."""
    ds = run(small(0.4, 5), progress=False)
    one = ds.isel(time=[2])                                              # t = 0.2 only
    ds2 = extend(one, 0.4)
    np.testing.assert_allclose(ds2["time"].values, [0.2, 0.3, 0.4], rtol=0, atol=1e-15)
    # the continuation from t = 0.2 against the run's own frames: the restart's global error (about 2e-10,
    # test_extend_continues_as_one_run_would), far below 1e-6
    for v in ("X", "rho_lm_real", "rho_lm_imag", "pde_energy", "particle_energy"):
        np.testing.assert_allclose(ds2[v].values, ds[v].values[2:], rtol=0, atol=1e-6, err_msg=v)
    assert ds2.attrs["extended_from"] == "[0.2]"


def test_extend_refuses_a_time_axis_it_cannot_continue():
    ds = run(small(0.2, 3), progress=False)
    for times in ([0.0, 0.2, 0.2], [0.0, np.nan, 0.2], [0.2, 0.1, 0.0]):
        with pytest.raises(ValueError, match=r"ds\['time'\] \(the dataset's time axis\) must be a non-empty, "
                                             r"finite, strictly increasing 1-d array of frame times; received \["):
            extend(ds.assign_coords(time=times), 0.4)
    with pytest.raises(ValueError, match=r"ds\['time'\] \(the dataset's time axis\) .*; received \[\]"):
        extend(ds.isel(time=slice(0, 0)), 0.4)
    with pytest.raises(ValueError, match=r"t_final must be reachable in frames of the run's spacing 0.1 .*"
                                         r"received 1e\+308"):
        extend(ds, 1e308)


def test_cli_extend_writes_a_new_file_and_keeps_the_result(tmp_path, capsys):
    cfg = tmp_path / "small.toml"
    cfg.write_text(small(0.2, 3).to_toml())
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--out", str(out), "--no-progress", "-q"]) == 0
    digest = hashlib.sha256((out / "result.nc").read_bytes()).hexdigest()
    assert main(["run", "--extend", str(out), "--t-final", "0.4", "--no-progress", "-q"]) == 0
    assert hashlib.sha256((out / "result.nc").read_bytes()).hexdigest() == digest     # untouched
    ds2 = load(out / "result_to_0.4.nc")
    np.testing.assert_allclose(ds2["time"].values, [0.0, 0.1, 0.2, 0.3, 0.4], rtol=0, atol=1e-15)
    capsys.readouterr()
    assert main(["run", "--extend", str(out), "--t-final", "0.4", "-q"]) == 2          # no silent overwrite
    assert "exists; pass --force" in capsys.readouterr().err
    assert main(["run", "--extend", str(out), "-q"]) == 2
    assert "needs --t-final T" in capsys.readouterr().err
    assert main(["run", "--extend", str(tmp_path / "nope"), "--t-final", "1", "-q"]) == 2
    assert "not a folder" in capsys.readouterr().err and not (tmp_path / "nope").exists()   # nothing created
