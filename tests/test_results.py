"""Run datasets: schema, NetCDF round trip, and a run rebuilt from its file reproduces the numbers."""

import numpy as np
import pytest
import xarray as xr

import meanfield
from meanfield.core.sphere import SphereGrid
from meanfield.workflow import paired, results
from meanfield.workflow.config import RunConfig
from meanfield.workflow.run import run

# The default run at a reduced size: lmax 15, 200 particles, t in [0, 0.5] (seconds, not minutes).
SMALL = {"pde": {"lmax": 15}, "particles": {"n": 200}, "integrator": {"t_final": 0.5, "n_frames": 6},
         "outputs": {"figures": False, "animation": False}, "seed": 3}


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    ds = run(RunConfig.from_dict(SMALL), progress=False)
    path = results.save(ds, tmp_path_factory.mktemp("run") / "result.nc")
    return ds, path


def test_dataset_schema_and_attributes(small_run):
    ds, _ = small_run
    assert dict(ds.sizes) == {"time": 6, "particle": 200, "dim": 3, "head": 2, "lat": 32, "lon": 64, "l": 16, "m": 16}
    assert ds.attrs["schema_version"] == results.SCHEMA_VERSION
    assert ds.attrs["meanfield_version"] == meanfield.__version__ and ds.attrs["seed"] == 3
    assert results.config_of(ds) == RunConfig.from_dict(SMALL)
    for name in ("pde_energy", "particle_energy", "pde_boltzmann_entropy", "w2"):
        assert ds[name].dims == ("time",)
    assert ds["pde_entropy"].dims == ds["particle_entropy"].dims == ("time", "head")
    assert ds.attrs["pde_status"] == 0 and ds.attrs["particle_status"] == 0   # both reached t_final


def test_small_run_physics(small_run):
    ds, _ = small_run
    # mass is conserved by the spectral scheme to round-off (degree 0 is untouched by div)
    np.testing.assert_allclose(ds["pde_mass"].values, 1.0, rtol=0, atol=1e-12)
    # mean, value-aligned heads: energy is non-decreasing; 1e-10 absorbs integrator round-off at rtol 1e-7
    for name in ("pde_energy", "particle_energy"):
        assert np.all(np.diff(ds[name].values) >= -1e-10), name
    # the particles start as 200 samples of rho_0 and follow it: their energies agree to the sampling
    # error O(n^-1/2) ~ 7 %, and W2 stays of the order of its t = 0 value (< 0.5 rad)
    np.testing.assert_allclose(ds["particle_energy"].values, ds["pde_energy"].values, rtol=0.1)
    assert np.all(ds["w2"].values > 0) and np.all(ds["w2"].values < 0.5)
    # the stored coefficients synthesize to the stored display-grid density (same transform, round-off)
    grid = SphereGrid(15, nlat=32, nlon=64)
    np.testing.assert_allclose(grid.synthesis(results.density_coefficients(ds, 5)), ds["rho"].values[5],
                               rtol=0, atol=1e-12)


def test_rebuilt_from_file_reproduces_the_numbers(small_run, tmp_path):
    ds, path = small_run
    loaded = results.load(path)
    # NetCDF stores float64 as is: the file holds exactly the in-memory numbers
    xr.testing.assert_identical(loaded.drop_attrs(), ds.drop_attrs())
    again = run(results.config_of(loaded), progress=False)
    # same config and seed, same code, one process: deterministic up to floating-point
    # reassociation, so 1e-10 relative is far above any legitimate difference and far below a real change
    for name in ("X", "rho_lm_real", "pde_energy", "particle_energy", "pde_entropy", "particle_entropy", "w2"):
        np.testing.assert_allclose(again[name].values, loaded[name].values, rtol=1e-10, atol=1e-14, err_msg=name)


def test_unknown_schema_version_is_a_clear_error(small_run, tmp_path):
    ds, _ = small_run
    odd = ds.isel(particle=slice(0, 2)).copy()
    odd.attrs["schema_version"] = 99
    odd.to_netcdf(tmp_path / "odd.nc", engine="netcdf4")
    with pytest.raises(results.SchemaError, match="schema_version 99; this meanfield reads schema_version 1"):
        results.load(tmp_path / "odd.nc")
    with pytest.raises(results.SchemaError, match="must be 1 to be saved; received 99"):
        results.save(odd, tmp_path / "x.nc")
    with pytest.raises(ValueError, match="does not exist"):
        results.load(tmp_path / "missing.nc")


def test_save_is_atomic_and_replaces(small_run, tmp_path):
    ds, _ = small_run
    target = tmp_path / "r.nc"
    target.write_text("old")
    results.save(ds, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.nc"]          # no temporary file left
    assert results.load(target).sizes["particle"] == 200


def test_coefficient_layout_round_trip_and_time_alignment():
    grid = SphereGrid(6)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, grid.nalm)) + 1j * rng.standard_normal((4, grid.nalm))
    re, im = results.coefficients_to_lm(a, grid.l_index, grid.m_index, 6)
    assert re.shape == (4, 7, 7) and np.isnan(re[0, 2, 3])                # m > l is NaN
    assert re[1, 4, 2] == a[1, grid.index(4, 2)].real                       # (l, m) lands at [l, m]
    np.testing.assert_array_equal(results.lm_to_coefficients(re, im, grid.l_index, grid.m_index), a)
    rows, cols = paired.align_times(np.linspace(0, 1, 5), [0.0, 0.25, 0.5, 0.61])   # stopped at 0.61
    assert rows.tolist() == [0, 1, 2] and cols.tolist() == [0, 1, 2]


def test_file_without_run_variables_is_a_schema_error(tmp_path):
    import xarray as xr

    from meanfield.workflow.results import SchemaError, load

    path = tmp_path / "other.nc"
    xr.Dataset({"a": ("x", [1.0])}, attrs={"schema_version": 1, "config": "{}"}).to_netcdf(path)
    with pytest.raises(SchemaError, match=r"lacks the variables \['X', 'rho'"):
        load(path)


def test_cf_attributes_provenance_and_integer_counts(small_run, tmp_path):
    ds, _ = small_run
    ds = results.add_provenance(ds.copy(), command="meanfield run test.toml", started=0.0)
    path = results.save(ds, tmp_path / "cf.nc")
    raw = xr.open_dataset(path, mask_and_scale=False)                # as stored on disk
    for name in raw.variables:
        assert raw[name].attrs.get("long_name") and raw[name].attrs.get("units"), name
    assert raw.attrs["Conventions"] == results.CONVENTIONS
    assert raw["lat"].attrs["units"] == "degrees_north" and raw["lat"].attrs["standard_name"] == "latitude"
    assert raw["lon"].attrs["units"] == "degrees_east" and raw["lon"].attrs["standard_name"] == "longitude"
    assert raw["particle_n_clusters"].dtype.kind == "i"                  # counts stored as integers
    for key in ("numpy_version", "scipy_version", "ducc0_version", "pot_version", "git_commit", "command",
                "started_at", "ended_at"):
        assert key in raw.attrs, key
    assert raw.attrs["command"] == "meanfield run test.toml" and raw.attrs["started_at"].startswith("1970-01-01")
    back = results.load(path)
    # what was written reads back: the integer encoding is exact for counts, NaN where not reached (tolerance 0)
    np.testing.assert_array_equal(back["particle_n_clusters"].values, ds["particle_n_clusters"].values)


@pytest.mark.parametrize("mutate, message", [
    (lambda ds: ds.assign(X=ds["X"].transpose("time", "dim", "particle")),
     r"X must have the dims \('time', 'particle', 'dim'\).*received dims \('time', 'dim', 'particle'\)"),
    (lambda ds: ds.drop_vars("X").assign(X=("time", np.ones(ds.sizes["time"]))), r"X must have the dims .*\('time',\)"),
    (lambda ds: ds.assign(w2=(("time", "particle"), np.ones((ds.sizes["time"], ds.sizes["particle"])))),
     r"w2 must have the dims \('time',\) or \('time', 'head'\)"),
])
def test_a_results_file_in_another_layout_is_refused_by_name(small_run, tmp_path, capsys, mutate, message):
    """``meanfield plot`` trusted the file's layout: transposed tokens, 1-d tokens and a W2 curve over the
    particles ended in numpy's words ("axis 1 is out of bounds", "matmul: ... mismatch", "truth value of an
    array").  results.load now checks the layout (one contract for every reader): exit 2 naming the variable."""
    from meanfield.workflow.cli import main

    ds = results.load(small_run[1])
    f = tmp_path / "bad.nc"
    mutate(ds).to_netcdf(f)
    with pytest.raises(ValueError, match=message):
        results.load(f)
    assert main(["plot", str(f), "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"results file {f}" in err
