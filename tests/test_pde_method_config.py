"""``[pde] method``: the main job's PDE can take a split scheme (Lawson, ETD, ARS IMEX) whose stable step
does not shrink like 1/(nu lmax^2); unset, the PDE takes ``integrator.method`` as before."""

import numpy as np
import pytest

from meanfield.workflow.config import PDE_METHODS, RunConfig
from meanfield.workflow.schema import ConfigError


def test_pde_method_choices_and_errors():
    assert {"dopri5", "lawson_dopri5", "etdrk4", "ars443", "ars232"} <= set(PDE_METHODS)
    assert RunConfig().pde.method is None                      # default: the integrator's scheme
    cfg = RunConfig.from_dict({"pde": {"method": "lawson_dopri5", "nu": 0.5}, "integrator": {"dt": 0.01}})
    assert RunConfig.from_toml(cfg.to_toml()).pde.method == "lawson_dopri5"      # TOML round trip
    with pytest.raises(ConfigError, match=r"pde.method.*lawson_dopri5.*received 'implicit'"):
        RunConfig.from_dict({"pde": {"method": "implicit"}})
    # a fixed-step split scheme needs a step (the particles' fixed step is the same integrator.dt)
    with pytest.raises(ConfigError, match=r"integrator.dt must be a number > 0 for the fixed-step PDE method "
                                          r"pde.method = 'ars443'"):
        RunConfig.from_dict({"pde": {"method": "ars443"}})
    assert RunConfig.from_dict({"pde": {"method": "lawson_dopri5"}}).pde.method == "lawson_dopri5"  # adaptive


def test_pde_method_is_sweepable():
    from meanfield.workflow.sweep import SweepSpec
    spec = SweepSpec(base={"integrator": {"dt": 0.01}, "pde": {"nu": 0.5}},
                     parameters={"pde.method": ["dopri5", "lawson_dopri5"]})
    assert [spec.config(p).pde.method for p in spec.points] == ["dopri5", "lawson_dopri5"]


def test_noisy_main_job_with_a_split_pde_step_agrees_with_the_explicit_one():
    from meanfield.workflow.run import run
    base = {"pde": {"lmax": 15, "nu": 0.5}, "particles": {"n": 100},
            "integrator": {"t_final": 0.2, "n_frames": 3, "dt": 0.02, "rtol": 1e-9, "atol": 1e-12}}
    explicit = run(RunConfig.from_dict(base), progress=False)
    split = run(RunConfig.from_dict({**base, "pde": {**base["pde"], "method": "lawson_dopri5"}}), progress=False)
    assert explicit.attrs["pde_method"] == "dopri5" and split.attrs["pde_method"] == "lawson_dopri5"
    # same PDE, two adaptive schemes at rtol 1e-9: densities agree to the tolerance (1e-6 leaves a 1000x margin
    # over the local tolerance for error accumulation over the run and the synthesis to the display grid)
    drho = np.nanmax(np.abs(explicit["rho"].values - split["rho"].values)) / np.nanmax(np.abs(explicit["rho"].values))
    assert drho < 1e-6
    # the particles do not depend on the PDE's scheme: bit for bit
    assert np.array_equal(explicit["X"].values, split["X"].values)
