"""The command line: main job output and argument errors."""

import pytest

from meanfield.cli import main


def test_run_small(capsys):
    assert main(["run", "--n", "30", "--t-final", "1.0"]) == 0
    out = capsys.readouterr().out
    assert "energy non-decreasing: True" in out and "entropy" in out


def test_theory_beta_star(capsys):
    assert main(["theory", "beta-star", "--H", "2", "--n", "32"]) == 0
    value = float(capsys.readouterr().out.splitlines()[1].split("=")[-1])
    assert value == pytest.approx(1.476388, abs=5e-7)     # MODEL.md reference value (6 decimals)


def test_bad_argument_exits_2(capsys):
    with pytest.raises(SystemExit) as err:
        main(["run", "--beta", "-1"])
    assert err.value.code == 2
    assert "must be a positive finite number; received -1" in capsys.readouterr().err
