"""Phase diagrams over beta x t (workflow/phase_diagram.py) and ``meanfield phase-diagram``."""

import numpy as np
import pytest
import xarray as xr

from meanfield.analysis import ensembles, theory
from meanfield.core.heads import scalar_heads
from meanfield.models.batched import BatchedSystem
from meanfield.models.step_rules import iterate
from meanfield.workflow.cli import main
from meanfield.workflow.phase_diagram import MEASURES, PhaseDiagramConfig, load_phase_config, phase_diagram

SMALL = dict(betas=(1.0, 6.0), t_final=2.0, dt=0.1, record_every=5, n=8, batch=6, seed=3)


def test_cells_are_the_batched_runs_they_describe():
    cfg = PhaseDiagramConfig(**SMALL)
    ds = phase_diagram(cfg, progress=False)
    assert ds["one_cluster"].dims == ("beta", "t") and ds.sizes == {"beta": 2, "t": 5}
    np.testing.assert_allclose(ds["t"], [0.0, 0.5, 1.0, 1.5, 2.0], rtol=0, atol=1e-15)   # k dt to an ulp
    X0 = np.random.default_rng(3).standard_normal((6, 8, 2))
    X0 /= np.linalg.norm(X0, axis=-1, keepdims=True)
    tr = iterate(BatchedSystem(scalar_heads([1.0], 2, beta=6.0, normalization="softmax")), X0, 0.1, 20,
                 "post_ln", observe=ensembles.ensemble_observer(), every=5)
    for m in MEASURES:     # the same computation in the same order: exactly equal
        np.testing.assert_array_equal(ds[m].sel(beta=6.0).values, tr.observables[m])
    expect = [theory.clustering_time(0.0, ensembles.PAIR_THRESHOLD, [1.0], b, 8) for b in (1.0, 6.0)]
    np.testing.assert_array_equal(ds["equiangular_time"].values, expect)


def test_dask_cells_equal_the_loop():
    cfg = PhaseDiagramConfig(**SMALL, score="goe", value="plus", per_system=True)
    loop = phase_diagram(cfg, progress=False)
    threaded = phase_diagram(cfg, scheduler="threads")
    for m in MEASURES:     # same cells, same seeds: identical numbers whatever runs them
        np.testing.assert_array_equal(loop[m].values, threaded[m].values)
    assert np.all(np.isnan(loop["equiangular_time"].values))      # no closed form for random heads


def test_config_errors_name_the_argument(tmp_path):
    with pytest.raises(ValueError, match=r"^t_final must be a whole number of steps"):
        PhaseDiagramConfig(t_final=1.05, dt=0.1)
    with pytest.raises(ValueError, match=r"^betas must be a non-empty list of positive numbers"):
        PhaseDiagramConfig(betas=(1.0, -2.0))
    with pytest.raises(ValueError, match=r"^score must be one of"):
        PhaseDiagramConfig(score="wishart")
    bad = tmp_path / "bad.toml"
    bad.write_text("[phase_diagram]\nbetaz = [1.0]\n")
    with pytest.raises(ValueError, match=r"unknown key phase_diagram\.betaz; allowed keys in phase_diagram: \['betas'"):
        load_phase_config(bad)


def test_cli_writes_netcdf_and_figure(tmp_path, capsys):
    cfg = tmp_path / "pd.toml"
    cfg.write_text("[phase_diagram]\nbeta_range = [1.0, 4.0, 2]\nt_final = 1.0\nbatch = 4\nn = 6\n"
                   "record_every = 5\n")
    assert main(["phase-diagram", str(cfg), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    ds = xr.open_dataset(tmp_path / "out" / "phase_diagram.nc").load()
    np.testing.assert_array_equal(ds["beta"].values, [1.0, 4.0])
    assert (tmp_path / "out" / "phase_diagram.png").stat().st_size > 1000
    (tmp_path / "bad.toml").write_text("[phase_diagram]\nrule = 'pre-ln'\n")
    assert main(["phase-diagram", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "o2")]) == 2
    assert "rule must be one of" in capsys.readouterr().err


def test_figure_states_the_thresholds():
    from meanfield.workflow.plotting import phase_diagram_figure

    ds = phase_diagram(PhaseDiagramConfig(**SMALL), progress=False)
    titles = [ax.get_title() for ax in phase_diagram_figure(ds).axes]
    # the default thresholds of ensembles, written as the measures used them (text: no tolerance)
    assert "pair density: fraction of pairs with <x_i, x_j> > 0.999" in titles
    assert any("0.9999" in t for t in titles)
    labels = [ax.get_ylabel() for ax in phase_diagram_figure(ds, pair_threshold=0.99).axes]
    assert "pair density (> 0.99)" in labels                      # the colour bar of the pair density
    with pytest.raises(ValueError, match=r"^pair_threshold must be"):
        phase_diagram_figure(ds, pair_threshold=1.5)


def test_cli_executor_and_one_meaning_of_scheduler(tmp_path, capsys):
    """--scheduler is an existing dask scheduler's ADDRESS in every command (issue 32); the phase diagram's local
    dask executors are --executor, and --scheduler there is refused by name (exit 2, no traceback)."""
    cfg = tmp_path / "pd.toml"
    cfg.write_text("[phase_diagram]\nbetas = [1.0]\nt_final = 0.2\nbatch = 2\nn = 4\nrecord_every = 1\n")
    assert main(["phase-diagram", str(cfg), "--out", str(tmp_path / "a"), "--no-progress", "--executor", "threads"]) == 0
    assert (tmp_path / "a" / "phase_diagram.nc").exists()
    assert main(["phase-diagram", str(cfg), "--out", str(tmp_path / "b"), "--scheduler", "threads"]) == 2
    err = capsys.readouterr().err
    assert "--executor" in err and "ADDRESS" in err and "Traceback" not in err
