"""The geodesic bracket of semi-discrete W2 in the paired result and the main job's dataset
(w2_geodesic_lower / w2_geodesic_upper: bounds where the semi-discrete path ran, NaN elsewhere)."""

import numpy as np
import pytest
from _helpers import spied_run

from meanfield.workflow import results
from meanfield.workflow import run as run_module
from meanfield.workflow.config import RunConfig

NEW = ("w2_geodesic_lower", "w2_geodesic_upper")


def config(**outputs):
    return RunConfig.from_dict({"seed": 3, "pde": {"lmax": 15}, "particles": {"n": 300},
                                "integrator": {"t_final": 0.3, "n_frames": 3}, "outputs": outputs})


def test_semidiscrete_run_carries_the_bracket(monkeypatch, tmp_path):
    ds, res = spied_run(monkeypatch, config(w2_method="semidiscrete"))
    assert set(res.w2_methods) == {"semidiscrete"}
    lo, hi, w2 = ds["w2_geodesic_lower"].values, ds["w2_geodesic_upper"].values, ds["w2"].values
    # the engine's bracket, copied unchanged (tolerance 0)
    np.testing.assert_array_equal(np.stack([lo, hi], axis=1),
                                  np.array([info["geodesic_bracket"] for info in res.w2_info]))
    assert np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))
    # w2 = sqrt((lo^2 + hi^2) / 2) lies inside its bracket (round-off of the square root: 1e-15)
    assert np.all(lo <= w2 + 1e-15) and np.all(w2 <= hi + 1e-15)
    # the bracket is narrow (measured 1.6e-3 relative at n = 1000; n = 300 has larger cells: 1e-2 margin)
    assert np.all((hi - lo) / w2 < 1e-2)
    for name in NEW:
        assert ds[name].attrs["units"] == "rad" and "geodesic W2" in ds[name].attrs["long_name"]
    back = results.load(results.save(ds, tmp_path / "sd.nc"))
    for name in NEW:                                           # NetCDF keeps float64 exactly
        np.testing.assert_array_equal(back[name].values, ds[name].values)
    assert "W2 geodesic bracket" in run_module.run_summary(ds)


def test_node_based_run_has_nan_bracket_and_unchanged_variables(monkeypatch):
    ds, res = spied_run(monkeypatch, config())                 # default w2_method "auto": exact at this size
    assert set(res.w2_methods) == {"exact"}
    for name in NEW:
        assert np.all(np.isnan(ds[name].values)) and ds[name].dims == ("time",)
    assert np.all(np.isnan(res.w2_geodesic_bracket)) and res.w2_geodesic_bracket.shape == (3, 2)
    # the variables the dataset had before the bracket, with the engine's numbers (tolerance 0)
    before = {"X", "rho", "rho_lm_real", "rho_lm_imag", "w2", "w2_negative_mass", "w2_grid_floor"}
    assert before | set(NEW) <= set(ds.data_vars)
    np.testing.assert_array_equal(ds["w2"].values, res.w2)
    assert "W2 geodesic bracket" not in run_module.run_summary(ds)


@pytest.mark.parametrize("infos, expected", [(({}, {"geodesic_bracket": (0.1, 0.2)}),
                                              [[np.nan, np.nan], [0.1, 0.2]]), ((), np.empty((0, 2)))])
def test_bracket_property_shape(infos, expected):
    from meanfield.workflow.paired import PairedResult

    res = PairedResult(times=np.arange(len(infos)), w2=np.zeros(len(infos)), w2_methods=("",) * len(infos),
                       w2_negative_mass=np.zeros(len(infos)), w2_info=infos, particle_times=np.zeros(0),
                       particles={}, particle_states=np.zeros((0, 2, 3)), pde_times=np.zeros(0), pde={},
                       pde_coefficients=np.zeros((0, 1)), pde_status=0, pde_message="", pde_t_stop=0.0,
                       particle_status=0, particle_message="")
    np.testing.assert_array_equal(res.w2_geodesic_bracket, np.array(expected, dtype=float).reshape(-1, 2))
