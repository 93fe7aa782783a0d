"""The main job's dataset (meanfield.workflow.run): run() is paired_run converted by run_dataset, and
run_dataset refuses a result made from another config.  Moved unchanged from test_engine.py (0.2.0:
test files named after what they test)."""

import numpy as np
import pytest
from _helpers import PAIRED_HEADS as HEADS
from _helpers import paired_blobs as blobs
from _helpers import spied_run

from meanfield.workflow import paired, results
from meanfield.workflow import run as run_module
from meanfield.workflow.config import RunConfig
from meanfield.workflow.paired import PDESettings, TransportSettings


def test_main_job_is_paired_run_converted(monkeypatch):
    config = RunConfig.from_dict({"seed": 5, "pde": {"lmax": 15}, "particles": {"n": 80},
                                  "integrator": {"t_final": 1.0, "n_frames": 5}})
    ds, res = spied_run(monkeypatch, config)
    # the dataset holds the engine's numbers unchanged (copies, tolerance 0)
    np.testing.assert_array_equal(ds["w2"].values, res.w2)
    np.testing.assert_array_equal(ds["particle_order_parameter"].values, res.particles["order_parameter"])
    assert ds.attrs["w2_grid_nlat"] == 16 and ds.attrs["w2_grid_nlon"] == 32      # the degree-lmax GL grid
    assert ds.attrs["particle_sums"] == res.config["particle_sums"] == "direct"
    # lmax 15 stops the PDE before t = 1 (resolution monitor): NaN exactly where it did not reach
    assert res.pde_stopped_early and ds.attrs["pde_status"] == 1
    reached = np.isin(res.times, res.pde_times)
    assert np.array_equal(np.isfinite(ds["pde_energy"].values), reached)
    assert np.array_equal(np.isfinite(ds["w2"].values), reached)
    assert np.all(np.isnan(ds["rho"].values[~reached])) and np.all(np.isfinite(ds["X"].values))
    k = int(np.flatnonzero(reached)[-1])
    np.testing.assert_array_equal(results.density_coefficients(ds, k), res.pde_coefficients[k])


def test_to_dataset_refuses_a_result_of_another_config():
    res = paired.paired_run(HEADS, blobs, 30, 0.1, [0.0, 0.1], seed=0, pde=PDESettings(lmax=15),
                            transport=TransportSettings(grid=paired.transport_grid(8)))
    config = RunConfig.from_dict({"pde": {"lmax": 15}, "particles": {"n": 31}})
    with pytest.raises(ValueError, match=r"made from config \(lmax, n_particles, heads\) = \(15, 31, 2\); "
                                         r"received a run with \(15, 30, 2\)"):
        run_module.run_dataset(res, config)


def test_run_takes_the_configs_checkpoint_period_and_keeps_the_callers_checkpointer(tmp_path, monkeypatch):
    """``run(config, checkpoints=Checkpointer(folder))``: the period is ``checkpoints.every`` or, when None, the
    config's ``outputs.checkpoint_every``, on a copy (the caller's object unchanged); not a Checkpointer: named."""
    import meanfield.workflow.run as run_module
    from meanfield.workflow.checkpoint import Checkpointer
    from meanfield.workflow.config import RunConfig

    seen = []

    def fake(*args, checkpoints=None, **kw):
        seen.append(None if checkpoints is None else checkpoints.every)
        raise RuntimeError("stop here")

    monkeypatch.setattr(run_module, "paired_run", fake)
    config = RunConfig.from_dict({"outputs": {"checkpoint_every": 0.25, "figures": False, "animation": False}})
    mine = Checkpointer(tmp_path / "ck")
    for ck in (mine, Checkpointer(tmp_path / "ck2", every=0.1)):
        with pytest.raises(RuntimeError, match="stop here"):
            run_module.run(config, progress=False, checkpoints=ck)
    assert seen == [0.25, 0.1] and mine.every is None
    with pytest.raises(ValueError, match="^checkpoints must be a Checkpointer or None; received str"):
        run_module.run(config, progress=False, checkpoints="ck")
