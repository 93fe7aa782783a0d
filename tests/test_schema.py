"""The one config schema (meanfield.workflow.schema) on every config type: unknown keys, wrong types and values
out of range are refused by name (the key, the allowed values, what was received), and TOML round-trips."""

from dataclasses import dataclass

import pytest

from meanfield.workflow import schema
from meanfield.workflow.config import RunConfig, load_config
from meanfield.workflow.equilibria_config import EquilibriaConfig, load_equilibria_config
from meanfield.workflow.phase_diagram import PhaseDiagramConfig, load_phase_config
from meanfield.workflow.schema import ConfigError, Section, check_keys, config_field, integer_check
from meanfield.workflow.transition_map import TransitionMapConfig, load_map_config

# (name, loader of a TOML text, a valid text, unknown key, wrong type, out of range): each bad text is the valid one
# plus one line, and the message must name the dotted key and say what it received (text: no tolerance)
CASES = {
    "run": (load_config, "[pde]\nlmax = 11\n",
            ("[pde]\nlmax = 11\nlmx = 3\n", "unknown key pde.lmx; allowed keys in pde: ['lmax'"),
            ("[pde]\nlmax = 'big'\n", "pde.lmax must be an integer >= 2 and <= "),
            ("[integrator]\nn_frames = 1\n", "integrator.n_frames must be an integer >= 2 and <= 10000; received 1")),
    "equilibria": (load_equilibria_config, "[geometry]\nlmax = 16\n",
                   ("[geometry]\nlmax = 16\ndim = 3\n", "unknown key geometry.dim; allowed keys in geometry: ['d', "
                                                        "'lmax']"),
                   ("[outputs]\nfigures = 1\n", "outputs.figures must be true or false; received 1"),
                   ("[continuation]\nmax_points = 2\n", "continuation.max_points must be an integer >= 3 and <= "
                                                        "100000; received 2")),
    "phase_diagram": (load_phase_config, "[phase_diagram]\nbetas = [1.0]\nn = 4\nbatch = 2\nt_final = 0.2\n",
                      ("[phase_diagram]\nbetas = [1.0]\nnn = 4\n", "unknown key phase_diagram.nn; allowed keys in "
                                                                   "phase_diagram: ['betas', 't_final'"),
                      ("[phase_diagram]\nrule = 3\n", "phase_diagram.rule must be one of ['post_ln', "),
                      ("[phase_diagram]\npair_threshold = 1.5\n", "phase_diagram.pair_threshold must be a finite "
                                                                  "number >= -1 and <= 1; received 1.5")),
    "map": (load_map_config, "[map]\nd = [3]\nbeta = [2.0]\n",
            ("[map]\nd = [3]\nbetas = [2.0]\n", "unknown key map.betas; allowed keys in map: ['d', 'beta', "
                                                "'beta_ratio', 'normalization', 'lmax']"),
            ("[map]\nd = [3]\nnormalization = 1\n", "map.normalization must be one of ['mean', 'softmax', "
                                                    "'sinkhorn']; received 1"),
            ("[map]\nd = [3]\nlmax = 4\n", "map.lmax must be an integer >= 8 and <= 512; received 4")),
}


@pytest.mark.parametrize("kind", sorted(CASES))
@pytest.mark.parametrize("which", ["unknown key", "wrong type", "out of range"])
def test_every_config_refuses_by_name(tmp_path, kind, which):
    load, valid, *bad = CASES[kind]
    f = tmp_path / "c.toml"
    f.write_text(valid)
    load(f)                                                          # the valid text loads
    text, message = bad[["unknown key", "wrong type", "out of range"].index(which)]
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load(f)
    assert str(err.value).startswith(f"{f}: ") and message in str(err.value)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_missing_file_and_invalid_toml_are_config_errors(tmp_path, kind):
    load = CASES[kind][0]
    with pytest.raises(ConfigError, match="cannot read .*file .*nothing.toml.*No such file"):
        load(tmp_path / "nothing.toml")
    (tmp_path / "bad.toml").write_text("= =\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load(tmp_path / "bad.toml")


def test_round_trips(tmp_path):
    # each config written as TOML and read back is the same object (== on frozen dataclasses: exact)
    run = RunConfig.from_dict({"pde": {"lmax": 15}, "heads": [{"lam": -1.0, "beta": 2.5}]})
    assert RunConfig.from_toml(run.to_toml(all_keys=True)) == run
    eq = EquilibriaConfig.from_dict({"continuation": {"parameter": "beta", "beta_range": [1.0, 3.0], "nu": 0.5}})
    assert EquilibriaConfig.from_toml(eq.to_toml()) == eq
    for cfg, load in ((PhaseDiagramConfig(betas=(1.0, 2.5), n=6, batch=3, t_final=0.4, causal=True), load_phase_config),
                      (TransitionMapConfig(d=(2, 5), beta=(1.5,), beta_ratio=None, lmax=24), load_map_config),
                      (TransitionMapConfig(), load_map_config), (PhaseDiagramConfig(), load_phase_config)):
        f = tmp_path / "c.toml"
        f.write_text(cfg.to_toml())
        assert load(f) == cfg
        assert type(cfg).from_dict(cfg.to_dict()) == cfg


def test_phase_diagram_beta_range_and_the_constructor_agree(tmp_path):
    f = tmp_path / "pd.toml"
    f.write_text("beta_range = [1.0, 4.0, 3]\nn = 6\nbatch = 3\nt_final = 0.4\n")      # top-level keys
    assert load_phase_config(f) == PhaseDiagramConfig(betas=(1.0, 2.5, 4.0), n=6, batch=3, t_final=0.4)
    f.write_text("betas = [1.0]\nbeta_range = [1.0, 2.0, 3]\n")
    with pytest.raises(ConfigError, match=r"phase_diagram takes one of betas .* received both"):
        load_phase_config(f)
    f.write_text("beta_range = [1.0, 2.0]\n")
    with pytest.raises(ConfigError, match=r"phase_diagram.beta_range must be a list \[beta_min, beta_max, count\]"):
        load_phase_config(f)
    # an integer threshold is kept as written (the dataset's config attribute is what it was before the schema)
    f.write_text("betas = [1.0]\npair_threshold = 1\n")
    assert type(load_phase_config(f).pair_threshold) is int
    # across fields: the constructor's own check, the same through the file
    f.write_text("t_final = 1.05\n")
    with pytest.raises(ValueError, match=r"^t_final must be a whole number of steps"):
        load_phase_config(f)


def test_transition_map_from_dict_equals_the_constructor():
    assert TransitionMapConfig.from_dict({"d": [3], "beta": [2.0]}) == TransitionMapConfig(d=(3,), beta=(2.0,),
                                                                                          beta_ratio=None)
    with pytest.raises(ConfigError, match=r"^map needs exactly one of beta .* received beta = \(2.0,\)"):
        TransitionMapConfig.from_dict({"d": [3], "beta": [2.0], "beta_ratio": [1.0]})
    with pytest.raises(ConfigError, match=r"^map.d must not repeat a value; received \[3, 3\]"):
        TransitionMapConfig(d=(3, 3))


def test_section_machinery_on_its_own():
    @dataclass(frozen=True)
    class Grid(Section):
        _path = "grid"
        n: int = config_field(integer_check(2), 8, "points per axis")
        label: str | None = config_field(schema.optional_check(schema.choice_check(["a", "b"])), None, "a label")

    assert Grid.from_dict({"n": 16}) == Grid(n=16) and Grid.from_dict({}, "g") == Grid()
    assert Grid(n=3, label="a").to_dict() == {"n": 3, "label": "a"} and Grid().to_dict() == {"n": 8}
    with pytest.raises(ConfigError, match=r"^unknown key g.m; allowed keys in g: \['n', 'label'\]$"):
        Grid.from_dict({"m": 1}, "g")
    with pytest.raises(ConfigError, match=r"^grid must be a table of keys \['n', 'label'\]; received 3$"):
        Grid.from_dict(3)
    with pytest.raises(ConfigError, match=r"^grid.label must be one of \['a', 'b'\]; received 'c'$"):
        Grid.from_dict({"label": "c"})
    with pytest.raises(ConfigError, match=r"^grid.n must be an integer >= 2; received True$"):
        Grid.from_dict({"n": True})                                   # a bool is no integer
    lines = schema.toml_table("grid", Grid(label="b").to_dict(), Grid)
    assert lines == ["[grid]", "n = 8    # points per axis", 'label = "b"    # a label']
    # the top level of a file
    with pytest.raises(ConfigError, match=r"^unknown key x; allowed top-level keys: \['a'\]$"):
        check_keys({"x": 1}, ["a"])
    with pytest.raises(ConfigError, match=r"^the config must be a table \(dict\); received list$"):
        check_keys([], ["a"])


def test_checkers_and_toml_values():
    assert schema.real_list_check(0, lo_open=True)("b", [1, 2.5]) == (1.0, 2.5)
    with pytest.raises(ConfigError, match=r"^b\[1\] must be a finite number > 0; received -1$"):
        schema.real_list_check(0, lo_open=True)("b", [1, -1])
    with pytest.raises(ConfigError, match=r"^b must be a non-empty list; received \[\]$"):
        schema.unique_list("b", [], integer_check(0))
    with pytest.raises(ConfigError, match=r"^o.dataset must be a plain NetCDF file name ending in .nc"):
        schema.filename_check("o.dataset", "../x.nc")
    assert schema.boolean_check("f", False) is False
    assert schema.toml_value([1, 2.5, float("inf"), "a\"b", True, {"k": -1.0}]) == \
        '[1, 2.5, inf, "a\\"b", true, {k = -1.0}]'
    with pytest.raises(TypeError, match="cannot write NoneType"):
        schema.toml_value(None)
    assert schema.parse_toml("a = 1\n") == {"a": 1}
    with pytest.raises(ConfigError, match=r"^invalid TOML in here.toml: "):
        schema.parse_toml("= =", "here.toml")


def test_one_config_error_for_every_config():
    # every loader raises the schema's ConfigError, a ValueError (the command line's exit 2)
    from meanfield.workflow import config, equilibria_config, transition_map

    for module in (config, equilibria_config, transition_map):
        assert module.ConfigError is schema.ConfigError
    assert issubclass(ConfigError, ValueError)


def test_sweep_files_use_the_same_refusals(tmp_path):
    from meanfield.workflow.sweep import load_sweep_spec

    f = tmp_path / "s.toml"
    f.write_text('mode = "list"\nbogus = 1\n[parameters]\nseed = [1, 2]\n')
    with pytest.raises(ConfigError, match=r"^unknown key bogus; allowed top-level keys: \['base', 'base_config', "):
        load_sweep_spec(f)
    f.write_text('mode = "zip"\n[parameters]\nseed = [1, 2]\n')
    with pytest.raises(ConfigError, match=r"^mode must be one of \['grid', 'list'\]; received 'zip'$"):
        load_sweep_spec(f)
    f.write_text('[base_config.pde]\nlmax = 1\n[parameters]\nseed = [1, 2]\n')
    with pytest.raises(ConfigError, match=r"^pde.lmax must be an integer >= 2"):
        load_sweep_spec(f)
