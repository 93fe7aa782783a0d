"""Research inputs in configs: initial densities from coefficient files and zonal profiles."""

import numpy as np
import pytest

from meanfield.core.sphere import SphereGrid
from meanfield.workflow.cli import main
from meanfield.workflow.config import RunConfig, load_config
from meanfield.workflow.inputs import density_from_coefficients, zonal_density
from meanfield.workflow.results import density_coefficients, load
from meanfield.workflow.schema import ConfigError

SMALL = """
seed = 2
[pde]
lmax = 11
[particles]
n = 50
[integrator]
t_final = 0.2
n_frames = 3
[outputs]
figures = false
animation = false
"""


def test_zonal_density_from_legendre_and_from_a_profile_is_the_closed_form():
    grid = SphereGrid(15)
    rho = zonal_density(grid, legendre=[1.0, 0.5])
    mu = np.cos(grid.theta)[:, None] * np.ones(grid.shape)
    # (1 + mu/2) / (4 pi) has mass 1: synthesis of exact coefficients, round-off only (1e-15)
    np.testing.assert_allclose(grid.synthesis(rho), (1 + mu / 2) / (4 * np.pi), rtol=0, atol=1e-15)
    nodes = np.linspace(-1, 1, 7)
    # a linear profile is its own interpolant and the per-interval Gauss rule is exact: round-off (1e-15)
    np.testing.assert_allclose(zonal_density(grid, mu=nodes, rho=3 * (1 + nodes / 2)), rho, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="profile.mu must increase strictly from -1 to 1"):
        zonal_density(grid, mu=[0.0, 1.0], rho=[1.0, 1.0])
    with pytest.raises(ValueError, match="either mu and rho"):
        zonal_density(grid)


def test_coefficients_of_another_degree_are_truncated_or_padded():
    fine, coarse = SphereGrid(15), SphereGrid(7)
    rho = zonal_density(fine, legendre=[1.0, 0.5, 0.25])
    down = density_from_coefficients(coarse, rho)
    up = density_from_coefficients(fine, down)
    # degrees <= 7 carry the whole density (it has degree 2): the round trip is exact to round-off (1e-16)
    np.testing.assert_allclose(up, rho, rtol=0, atol=1e-16)
    with pytest.raises(ValueError, match="length \\(L\\+1\\)\\(L\\+2\\)/2"):
        density_from_coefficients(fine, np.ones(4, complex))


def test_a_run_starts_from_the_last_density_of_an_earlier_run(tmp_path, capsys):
    first = tmp_path / "first.toml"
    first.write_text(SMALL)
    assert main(["run", str(first), "--out", str(tmp_path / "a"), "-q"]) == 0
    ds = load(tmp_path / "a" / "result.nc")
    last = density_coefficients(ds, -1)
    (tmp_path / "cfg").mkdir()
    np.save(tmp_path / "cfg" / "start.npy", last)
    second = tmp_path / "cfg" / "second.toml"
    second.write_text(SMALL + '[initial]\ncoefficients = "start.npy"\n')     # relative to the config file
    config = load_config(second)
    assert config.initial.kind == "coefficients" and config.initial.coefficients == str(tmp_path / "cfg" / "start.npy")
    assert main(["run", str(second), "--out", str(tmp_path / "b"), "-q"]) == 0
    again = load(tmp_path / "b" / "result.nc")
    # the same degree: the start is the file's coefficients, rescaled to mass 1 (mass conserved to 1e-12)
    np.testing.assert_allclose(density_coefficients(again, 0), last, rtol=0, atol=1e-12)


def test_profile_in_a_config_and_exclusive_choices(tmp_path):
    cfg = RunConfig.from_dict({"initial": {"profile": {"legendre": [1.0, 0.9]}}})
    assert cfg.initial.kind == "profile" and RunConfig.from_toml(cfg.to_toml()) == cfg
    with pytest.raises(ConfigError, match="replaces the vMF mixture: remove \\['initial.kappas'\\]"):
        RunConfig.from_dict({"initial": {"profile": {"legendre": [1.0]}, "kappas": [3.0]}})
    with pytest.raises(ConfigError, match="one of coefficients or profile"):
        RunConfig.from_dict({"initial": {"profile": {"legendre": [1.0]}, "coefficients": "a.npy"}})
    with pytest.raises(ConfigError, match="initial.profile must be a table"):
        RunConfig.from_dict({"initial": {"profile": {"mu": [0.0]}}})
    bad = tmp_path / "missing.toml"
    bad.write_text('[initial]\ncoefficients = "nowhere.npy"\n')
    assert main(["config", "check", str(bad)]) == 2


def test_general_heads_inline_and_from_npy(tmp_path, capsys):
    from meanfield.workflow.run import build_heads

    M = [[1.0, 0.2, 0.0], [0.2, 0.8, 0.0], [0.0, 0.0, 0.5]]
    np.save(tmp_path / "V.npy", np.diag([0.6, 0.6, 0.9]))
    cfg = tmp_path / "general.toml"
    cfg.write_text(SMALL
                   + f'[[heads]]\nM = {M}\nV = "V.npy"\n[[heads]]\nlam = 0.5\n')
    config = load_config(cfg)
    heads = build_heads(config)
    # the matrices are taken as given (no arithmetic): exact equality
    np.testing.assert_array_equal(heads[0].M, M)
    np.testing.assert_array_equal(heads[0].V, np.diag([0.6, 0.6, 0.9]))
    assert heads[1].is_zonal and not heads[0].is_zonal
    assert RunConfig.from_toml(config.to_toml()) == config
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    assert "general M, V" in capsys.readouterr().out
    ds = load(tmp_path / "o" / "result.nc")
    assert np.isnan(ds["head_lambda"].values[0]) and ds["head_lambda"].values[1] == 0.5
    with pytest.raises(ConfigError, match="must be given together"):
        RunConfig.from_dict({"heads": [{"M": M}]})
    with pytest.raises(ConfigError, match="lam does not apply to a general head"):
        RunConfig.from_dict({"heads": [{"M": M, "V": M, "lam": 2.0}]})
    with pytest.raises(ConfigError, match="must be a 3x3 matrix"):
        RunConfig.from_dict({"heads": [{"M": [[1.0]], "V": M}]})


def test_malformed_json_is_refused_naming_where_it_came_from(tmp_path, capsys):
    """A corrupt sweep index or config attribute gave JSON's own words ("Expecting property name ...") as the CLI's
    message: now the file or attribute, where the text breaks, and the way out."""
    from meanfield.workflow.cli import main
    from meanfield.workflow.inputs import parse_json

    assert parse_json('{"a": 1}', "x") == {"a": 1}
    with pytest.raises(ValueError, match=r"the attribute is not valid JSON \(Expecting property name .*line 1 column 2"):
        parse_json("{bad", "the attribute")
    with pytest.raises(ValueError, match="the attribute must be JSON text"):
        parse_json(None, "the attribute")
    sweep = tmp_path / "sw.toml"
    sweep.write_text('mode = "grid"\n[parameters]\n"heads[0].beta" = [1.0]\n')
    (tmp_path / "sw").mkdir()
    (tmp_path / "sw" / "index.json").write_text("{bad")
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "sw"), "--workers", "1", "-q"]) == 2
    err = capsys.readouterr().err
    assert "index.json" in err and "not valid JSON" in err and "remove it" in err and "Traceback" not in err
