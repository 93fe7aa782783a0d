"""Quick mode of the critical-temperature study (paper Thm 19): run, report and its key numbers."""

import numpy as np
import pytest
from _study_helpers import quick_study_fixture

import meanfield as mf
from studies.critical_temperature.report import report
from studies.critical_temperature.run import make_system, margins, split_norm_bounded_closed_form, threshold

quick = quick_study_fixture("critical_temperature")   # (out, summary, data.json)


def test_report_written(quick):
    out, _, _ = quick
    text = report(out).read_text()
    assert "| claim |" in text and (out / "thresholds.png").stat().st_size > 0


def test_norm_bounded_threshold_is_beta_star(quick):
    _, s, m = quick
    # Brent refinement to 1e-12 plus a 1e-12 round-off guard on the margin: 1e-6 is the brief's bar
    assert s["max_err_shared_norm_bounded_vs_beta_star"] < 1e-6
    assert m["shared_norm_bounded_fails_everywhere_where_beta_star_negative"]
    # exact reading: c^2 <= 1/H, threshold ln((n-1)/(H-1))/(2 alpha), same accuracy
    assert s["max_err_shared_exact_vs_closed_form"] < 1e-6
    assert s["max_err_split_norm_bounded_vs_closed_form"] < 1e-6
    assert m["split_norm_bounded_zero_where_closed_form_nonpositive"]


def test_golden_ratio_and_radial_fraction(quick):
    _, _, m = quick
    # closed forms evaluated in double precision: round-off only
    assert abs(m["golden"]["c_star_2"] - (np.sqrt(5) - 1) / 2) < 1e-15
    for H, cs in m["c_at_beta_star_n32"].items():
        # measured a/|u| on the particle system at beta*: a few ulps of accumulated round-off
        assert np.allclose(cs, mf.theory.c_star(int(H)), rtol=1e-12, atol=0)


def test_direction_holds_below_fails_above():
    b = mf.theory.beta_star(2, 32)
    for nz in ("mean", "softmax"):
        # 1e-3 away from beta* the relative margin is of order 1e-3, far above round-off
        assert margins("shared", 2, 32, b * (1 - 1e-3), normalization=nz)["norm_bounded"] > 0
        assert margins("shared", 2, 32, b * (1 + 1e-3), normalization=nz)["norm_bounded"] < 0


def test_identical_heads_never_lose_energy():
    system, X = make_system("shared", 3, 16, 5.0)
    rates = system.energy_rates(X)
    # identical heads: dE_h/dt = dE/dt / H exactly, up to round-off
    assert np.all(rates > 0) and np.allclose(rates, rates.mean(), rtol=1e-12, atol=0)


def test_threshold_grid_edges():
    grid = np.linspace(0.02, 2.0, 5)
    assert threshold("split", 3, 8, "exact", "mean", grid) == (np.inf, False)
    assert threshold("shared", 4, 8, "norm_bounded", "mean", grid) == (0.0, False)
    assert split_norm_bounded_closed_form(3, 8) < 0


def test_bad_config():
    with pytest.raises(ValueError, match="config must be one of"):
        make_system("mixed", 2, 8, 1.0)
