"""[pde] nu is the noise of both sides of the main job; a different [particles] nu is refused."""

import pytest

from meanfield.workflow.config import RunConfig
from meanfield.workflow.schema import ConfigError


def test_one_nu_for_both_sides():
    cfg = RunConfig.from_dict({"pde": {"nu": 0.1}, "integrator": {"dt": 0.01}})
    assert cfg.pde.nu == 0.1 and cfg.particles.nu is None
    same = RunConfig.from_dict({"pde": {"nu": 0.1}, "particles": {"nu": 0.1}, "integrator": {"dt": 0.01}})
    assert same.particles.nu == 0.1
    assert RunConfig.from_toml(cfg.to_toml()).pde.nu == 0.1        # round trip through TOML
    with pytest.raises(ConfigError, match="particles.nu must equal pde.nu = 0.1"):
        RunConfig.from_dict({"pde": {"nu": 0.1}, "particles": {"nu": 0.2}, "integrator": {"dt": 0.01}})
    with pytest.raises(ConfigError, match="integrator.dt must be a number > 0 when pde.nu"):
        RunConfig.from_dict({"pde": {"nu": 0.1}})
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="pde.nu"):
            RunConfig.from_dict({"pde": {"nu": bad}, "integrator": {"dt": 0.01}})
    assert RunConfig().pde.nu == 0.0


def test_nu_is_sweepable():
    from meanfield.workflow.sweep import SweepSpec
    spec = SweepSpec(base={"integrator": {"dt": 0.01}}, parameters={"pde.nu": [0.0, 0.2]})
    assert [spec.config(p).pde.nu for p in spec.points] == [0.0, 0.2]
    with pytest.raises(ConfigError, match="particles.nu must equal pde.nu"):
        SweepSpec(base={"integrator": {"dt": 0.01}, "particles": {"nu": 0.2}}, parameters={"pde.nu": [0.0, 0.2]})


def test_noisy_main_job_runs_and_is_reproducible():
    from meanfield.workflow.run import run
    cfg = RunConfig.from_dict({"pde": {"lmax": 15, "nu": 0.1}, "particles": {"n": 100},
                               "integrator": {"t_final": 0.2, "n_frames": 3, "dt": 0.02}})
    a, b = run(cfg, progress=False), run(cfg, progress=False)
    assert (a["X"].values == b["X"].values).all()              # the seed fixes the noise: bit for bit
    # W2 at the end is finite and of the size of the n = 100 sampling error (0.29 measured; < 1 rad)
    assert 0 < float(a["w2"].values[-1]) < 1.0
