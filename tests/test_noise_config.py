"""[pde] nu is the noise of both sides of the main job; a different [particles] nu is refused."""

import pytest

from meanfield.workflow.config import ConfigError, RunConfig


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
