"""The command line: the main job, configs, plots, studies, closed forms and argument errors."""

import tomllib

import pytest

from meanfield.workflow.cli import available_studies, main
from meanfield.workflow.config import RunConfig
from meanfield.workflow.results import config_of, load

SMALL_TOML = """
seed = 2
[pde]
lmax = 15
[particles]
n = 150
[integrator]
t_final = 0.4
n_frames = 3
[outputs]
figures = false
animation = false
"""


def test_run_with_a_config_writes_the_dataset_and_a_summary(tmp_path, capsys):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL_TOML)
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "W2(particles, PDE)" in text and "energy" in text and "wrote 1 files" in text
    ds = load(out / "result.nc")
    assert config_of(ds) == RunConfig.from_toml(SMALL_TOML) and ds.sizes["particle"] == 150


def test_config_default_prints_the_default_toml(capsys):
    assert main(["config", "--default"]) == 0
    assert RunConfig.from_dict(tomllib.loads(capsys.readouterr().out)) == RunConfig()


def test_config_validates_a_file(tmp_path, capsys):
    good = tmp_path / "good.toml"
    good.write_text(SMALL_TOML)
    assert main(["config", str(good)]) == 0
    assert "valid" in capsys.readouterr().out
    assert main(["config"]) == 2
    assert "exactly one of --default or FILE" in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ("[pde]\nlmx = 31\n", "unknown key pde.lmx; allowed keys in pde: ['lmax',"),
    ("[particles]\nn = \"many\"\n", "particles.n must be an integer >= 2 and <= 1000000; received 'many'"),
    ("[[heads]]\nbeta = 0.0\n", "heads[0].beta must be a finite number > 0; received 0.0"),
    ("[pde\n", "invalid TOML"),
])
@pytest.mark.parametrize("command", ["run", "config"])
def test_bad_config_exits_2_with_the_key_and_no_traceback(tmp_path, capsys, text, message, command):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    assert main([command, str(cfg)] + (["--out", str(tmp_path / "o")] if command == "run" else [])) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.startswith("meanfield: error:")
    assert not (tmp_path / "o").exists()                    # nothing ran, nothing was written


def test_missing_config_file_exits_2(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.toml")]) == 2
    err = capsys.readouterr().err
    assert "cannot read config file" in err and "nope.toml" in err and "Traceback" not in err


def test_unwritable_output_folder_exits_2(tmp_path, capsys):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL_TOML)
    (tmp_path / "afile").write_text("")
    assert main(["run", str(cfg), "--out", str(tmp_path / "afile"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "afile" in err and "Traceback" not in err


def test_unknown_study_lists_the_available_ones(capsys):
    assert main(["study", "no_such_study"]) == 2
    err = capsys.readouterr().err
    assert "unknown study 'no_such_study'; available studies:" in err
    for name in available_studies():
        assert name in err


def test_study_runs_the_study_module_from_the_repository(tmp_path, monkeypatch, capsys):
    root = tmp_path / "studies"
    (root / "fake").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "fake" / "__init__.py").write_text("")
    (root / "fake" / "run.py").write_text("import sys\nsys.exit(0 if sys.argv[1:] == ['--quick'] else 5)\n")
    monkeypatch.setattr("meanfield.workflow.cli.studies_root", lambda: root)
    assert available_studies(root) == ["fake"]
    assert main(["study", "fake", "--quick"]) == 0          # the module saw --quick
    assert "studies.fake.run --quick" in capsys.readouterr().err
    assert main(["study", "fake"]) == 2                     # a full run would replace the committed outputs
    assert "pass --out DIR for another folder, or --force" in capsys.readouterr().err
    assert main(["study", "fake", "--force"]) == 5          # its exit status is passed on
    assert main(["study", "--list"]) == 0
    assert capsys.readouterr().out.split() == ["fake"]


def test_theory_beta_star(capsys):
    assert main(["theory", "beta-star", "--H", "2", "--n", "32"]) == 0
    value = float(capsys.readouterr().out.splitlines()[1].split("=")[-1])
    assert value == pytest.approx(1.476388, abs=5e-7)     # MODEL.md reference value (6 decimals)


def test_theory_growth_rates(capsys):
    assert main(["theory", "growth-rates", "--beta", "6", "--lmax", "4"]) == 0
    rates = [float(line.split("=")[1]) for line in capsys.readouterr().out.splitlines()]
    assert rates == pytest.approx([9.34, 19.61, 23.35, 19.97], abs=5e-3)   # MODEL.md section 3, 2 decimals


def test_bad_argument_exits_2(capsys):
    with pytest.raises(SystemExit) as err:
        main(["theory", "lambda-max", "--beta", "-1"])
    assert err.value.code == 2
    assert "must be a positive finite number; received -1" in capsys.readouterr().err


# ------------------------------------------------------------------- issue 26: config values never give a traceback
@pytest.mark.parametrize("text, message", [
    ("[phase_diagram]\nbeta_range = 5\n", "beta_range must be a list [beta_min, beta_max, count]; received 5"),
    ("[phase_diagram]\nbeta_range = [\"a\", 2, 3]\n", "beta_range[0] must be a positive finite number; received 'a'"),
    ("[phase_diagram]\nbeta_range = [2.0, 1.0, 3]\n", "beta_range[1] must be a finite number >= beta_range[0] = 2"),
    ("[phase_diagram]\nbeta_range = [1.0, 2.0, 2.5]\n", "beta_range[2] must be an integer >= 1; received 2.5"),
    ("[phase_diagram]\nbetas = [1.0]\nbeta_range = [1.0, 2.0, 3]\n",
     "phase_diagram takes one of betas (a list) and beta_range ([beta_min, beta_max, count]); received both"),
    ("phase_diagram = 3\n", "phase_diagram must be a table of keys ['betas', 't_final'"),   # the schema's words
    ("[phase_diagram]\nn = \"32\"\n", "n must be an integer >= 2; received '32'"),
    ("[phase_diagram]\ndt = true\n", "dt must be a positive finite number; received True"),
])
def test_phase_diagram_config_errors_exit_2_naming_the_key(tmp_path, capsys, text, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    assert main(["phase-diagram", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("meanfield: error:") and message in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", [["config", "check"], ["config"], ["run"]])
def test_complex_npy_for_positions_exits_2_naming_the_key(tmp_path, capsys, command):
    import numpy as np

    X = np.random.default_rng(0).standard_normal((10, 3))
    np.save(tmp_path / "X.npy", (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(complex))
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL_TOML.replace("n = 150", "positions = \"X.npy\""))
    out = ["--out", str(tmp_path / "o"), "--no-progress"] if command == ["run"] else []
    assert main(command + [str(cfg)] + out) == 2
    err = capsys.readouterr().err
    assert "particles.positions must be an array of real unit vectors of shape (n, 3), n >= 2; received complex " \
           "values of shape (10, 3)" in err and "Traceback" not in err


@pytest.mark.parametrize("which", ["M", "V"])
def test_complex_npy_for_a_head_matrix_exits_2_naming_the_key(tmp_path, capsys, which):
    import numpy as np

    np.save(tmp_path / "A.npy", np.eye(3) * (1 + 1j))
    np.save(tmp_path / "B.npy", np.eye(3))
    files = {"M": "B.npy", "V": "B.npy", which: "A.npy"}
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL_TOML + f"[[heads]]\nM = \"{files['M']}\"\nV = \"{files['V']}\"\n")
    assert main(["config", "check", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert f"heads[0].{which} must be finite real number(s); received complex values" in err
    assert "Traceback" not in err
