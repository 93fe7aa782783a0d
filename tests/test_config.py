"""Run configs: defaults, TOML round trips and errors that name the key, the allowed values and the input."""

import dataclasses
import tomllib

import pytest

from meanfield.workflow.config import HeadConfig, RunConfig, load_config, to_toml
from meanfield.workflow.schema import ConfigError


def test_default_round_trips_through_dict_and_toml():
    cfg = RunConfig()
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
    assert RunConfig.from_toml(cfg.to_toml()) == cfg


def test_nondefault_values_round_trip():
    d = {"seed": 7, "heads": [{"lam": -0.5, "beta": 2.0, "kernel": "relu", "normalization": "softmax"}],
         "initial": {"mus": [[0.0, 0.6, 0.8]], "kappas": [5.0], "weights": [1.0], "floor": 0.0},
         "integrator": {"method": "rk4", "dt": 0.01, "t_final": 0.5, "n_frames": 3},
         "outputs": {"figures": False, "w2_method": "sliced", "dataset": "x.nc"}}
    cfg = RunConfig.from_dict(d)
    assert cfg.heads == (HeadConfig(-0.5, 2.0, "relu", "softmax"),)
    assert RunConfig.from_toml(to_toml(cfg.to_dict())) == cfg
    assert cfg.to_dict()["integrator"]["dt"] == 0.01


def test_missing_keys_take_defaults_and_config_is_frozen():
    cfg = RunConfig.from_dict({"pde": {"lmax": 15}})
    assert cfg.pde.lmax == 15 and cfg.particles == RunConfig().particles
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 3


BAD = [
    ({"bogus": 1}, "unknown key bogus", "allowed top-level keys"),
    ({"pde": {"lmx": 31}}, "unknown key pde.lmx", "'lmax'"),
    ({"heads": [{"lam": 1.0}, {"lam": 1.0, "temperature": 2}]}, "unknown key heads[1].temperature", "'beta'"),
    ({"pde": {"lmax": "31"}}, "pde.lmax must be an integer >= 2", "received '31'"),
    ({"particles": {"n": 1.5}}, "particles.n must be an integer >= 2", "received 1.5"),
    ({"heads": [{"lam": 1.0}, {"beta": True}]}, "heads[1].beta must be a finite number > 0", "received True"),
    ({"heads": [{"beta": -1.0}]}, "heads[0].beta must be a finite number > 0", "received -1.0"),
    ({"pde": {"lmax": 1}}, "pde.lmax must be an integer >= 2", "received 1"),
    ({"initial": {"floor": 1.5}}, "initial.floor must be a finite number >= 0.0 and <= 1.0", "received 1.5"),
    ({"heads": [{"kernel": "gauss"}]}, "heads[0].kernel must be one of ['exp', 'relu'", "received 'gauss'"),
    ({"integrator": {"method": "rk9"}}, "integrator.method must be one of", "received 'rk9'"),
    ({"integrator": {"method": "rk4"}}, "integrator.dt must be a number > 0", "'rk4'"),
    ({"initial": {"mus": [[1.0, 1.0, 0.0]]}}, "initial.mus[0] must be a unit vector", "|x|^2 = 2.0"),
    ({"initial": {"kappas": [1.0, 2.0]}}, "initial.kappas must have 1 or len(initial.mus) = 3", "received 2"),
    ({"initial": {"weights": [0.5, 0.5, 0.5]}}, "initial.weights must be 3 finite weights >= 0 summing to 1", "1.5"),
    ({"heads": []}, "heads must be a non-empty list", "received []"),
    ({"outputs": {"dataset": "a/b.nc"}}, "outputs.dataset must be a plain NetCDF file name", "'a/b.nc'"),
    ({"outputs": {"dataset": "checkpoint"}}, "outputs.dataset must be a plain NetCDF file name", "'checkpoint'"),
    ({"outputs": {"dataset": "w2.png"}}, "outputs.dataset must be a plain NetCDF file name", "'w2.png'"),
    ({"outputs": {"dataset": "a\rb.nc"}}, "control characters", "'a\\rb.nc'"),
    ({"seed": -1}, "seed must be an integer >= 0", "received -1"),
]


@pytest.mark.parametrize("data, key_text, received_text", BAD)
def test_bad_values_name_key_allowed_and_received(data, key_text, received_text):
    with pytest.raises(ConfigError) as err:
        RunConfig.from_dict(data)
    assert key_text in str(err.value) and received_text in str(err.value)


def test_load_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file .*nope.toml"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[pde\nlmax = 3")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(bad)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("[pde]\nlmax = 2.5\n")
    with pytest.raises(ConfigError, match=r"wrong.toml: pde.lmax must be an integer >= 2 .*received 2.5"):
        load_config(wrong)


def test_toml_writer_escapes_and_refuses_unknown_types():
    text = to_toml({"outputs": {"dataset": 'a"b\\c\nd'}, "seed": 3})
    assert tomllib.loads(text) == {"outputs": {"dataset": 'a"b\\c\nd'}, "seed": 3}
    with pytest.raises(TypeError, match="cannot write"):
        to_toml({"x": object()})


def test_non_utf8_config_file(tmp_path):
    from meanfield.workflow.config import load_config
    from meanfield.workflow.schema import ConfigError

    f = tmp_path / "bad.toml"
    f.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(f)


def test_kernel_params_round_trip_and_are_validated_by_the_kernel():
    d = {"heads": [{"lam": 1.0, "kernel": "sigmoid", "kernel_params": {"bias": -1.0}}, {"lam": 0.5}]}
    cfg = RunConfig.from_dict(d)
    assert cfg.heads[0].kernel_params == {"bias": -1.0} and cfg.heads[1].kernel_params is None
    text = to_toml(cfg.to_dict())
    assert "kernel_params = {bias = -1.0}" in text                    # a TOML inline table
    assert RunConfig.from_toml(text) == cfg
    assert cfg.heads[0].head_kwargs()["kernel_params"] == {"bias": -1.0}
    for params, message in [({"slope": 1.0}, "heads[0].kernel_params for kernel 'sigmoid' allows the keys ['bias']"),
                            ({"bias": "x"}, "heads[0].kernel_params['bias'] must be a finite real number"),
                            (3.0, "heads[0].kernel_params must be a table of kernel parameters")]:
        with pytest.raises(ConfigError) as err:
            RunConfig.from_dict({"heads": [{"kernel": "sigmoid", "kernel_params": params}]})
        assert message in str(err.value)
    with pytest.raises(ConfigError, match=r"kernel 'exp' allows the keys \[\]"):
        RunConfig.from_dict({"heads": [{"kernel_params": {"bias": 1.0}}]})
