"""Quick mode of the heterogeneous-heads study (paper Thm 22): run, report and its key numbers."""

import numpy as np
import pytest
from _study_helpers import quick_study_fixture

import meanfield as mf
from studies.heterogeneous_heads.report import report
from studies.heterogeneous_heads.run import late_slope, readings, split

quick = quick_study_fixture("heterogeneous_heads")   # (out, summary, data.json)


def test_report_written(quick):
    out, _, _ = quick
    path = report(out)
    text = path.read_text()
    assert "| claim |" in text and (out / "maps.png").stat().st_size > 0


def test_lambda_max_is_argmax_and_inflection_beyond(quick):
    _, _, m = quick
    lam = np.linspace(0.01, 10, 200001)
    phi = mf.theory.phi(lam, m["beta"], m["n"])
    # grid spacing 5e-5: the argmax on the grid is within one spacing of the true maximizer
    assert abs(lam[np.argmax(phi)] - m["lambda_max"]) < 1e-4
    assert m["lambda_c"] > m["lambda_max"]


def test_paper_condition_not_sufficient_but_jensen_is(quick):
    _, s, m = quick
    # exact statements on the grid, no tolerance needed beyond the sign: for lambda_bar > lambda_c some
    # large-spread points lose (phi(2 lambda_bar) < 2 phi(lambda_bar)), Jensen's region never loses
    assert s["paper_condition_fails_fraction"] > 0.05
    assert s["jensen_region_all_positive"] and m["jensen_region_points"] > 0
    assert s["gain_positive_below_lambda_c_fraction"] == 0.0
    assert m["small_s_sign_matches_convexity"]


def test_particles_follow_ode_and_late_rate(quick):
    _, _, m = quick
    r = m["runs"][0]
    # rtol 1e-10 particle integration vs DOP853 at rtol 1e-12: differences of ~1e-11 expected
    assert r["max_abs_gamma_diff"] < 1e-8
    # the late-rate fit over 1-gamma in [1e-9, 1e-4] is a clean exponential: 1e-3 relative
    assert abs(-r["late_slope_particles"] / r["late_rate_theory"] - 1) < 1e-3
    assert abs(-r["late_slope_ode"] / r["late_rate_theory"] - 1) < 1e-3
    # crossing times from linear interpolation between 200 samples: 1e-3 relative
    assert np.allclose(r["T_particles"], r["T_theory"], rtol=1e-3, atol=0)
    # quadrature of dgamma/F with 256 nodes against the event-based ODE time: smooth integrand
    assert m["quad_vs_clustering_time_max_rel"] < 1e-8


def test_readings_universal_refuted_existential_reproduced(quick):
    out, _, m = quick
    r = m["readings"]
    # flags from the grid: some split with lambda_bar > lambda_c loses beyond round-off, and every
    # lambda_bar > lambda_c on the grid has a helping split (exact sign statements, no tolerance)
    assert r["universal_refuted"] and 0 < r["counterexamples"] <= r["region_points"]
    assert r["existential_holds"] and r["lambda_bar_with_helping_split"] == r["lambda_bar_above_lambda_c"] > 0
    c = r["check"]
    assert c["points"] == r["counterexamples"]
    # the losses are far above the closed form's round-off bound (64 eps of the rates; measured >= 3e12 x)
    assert c["min_loss_over_roundoff_bound"] > 1e6
    # the particle vector field gives the same gain: two computations agree to round-off (measured 3e-14)
    assert c["particle_field_all_negative"] and c["particle_field_max_rel_diff"] < 1e-10
    # short particle runs at rtol 1e-10: the split is behind by far more than the solver tolerance (measured 1e9 x)
    assert all(x["split_behind"] and x["lag_over_solver_tol"] > 1e3 for x in c["short_runs"])
    text = report(out).read_text()
    assert "universal reading" in text and "existential reading" in text and "**refuted**" in text


def test_readings_flags_follow_the_signs():
    # a synthetic grid (lambda_c = 4): the flags are computed from the gains, not fixed
    lbar, s = np.array([1.0, 5.0, 6.0]), np.array([0.0, 0.5])
    splits = np.array([[split(lb, x) for x in s] for lb in lbar])
    gain = np.array([[0.0, -1.0], [0.0, 1e-3], [0.0, 1e-3]])
    read, counter = readings(lbar, s, gain, splits, 4.0)
    assert not read["universal_refuted"] and read["existential_holds"] and counter.shape == (0, 2)
    gain[2, 1] = -1e-3                     # a loss above lambda_c: universal refuted, existential fails at 6.0
    read, counter = readings(lbar, s, gain, splits, 4.0)
    assert read["universal_refuted"] and not read["existential_holds"] and counter.shape == (1, 2)
    gain[2, 1] = -1e-20                    # below the round-off bound: neither a counterexample nor a help
    read, counter = readings(lbar, s, gain, splits, 4.0)
    assert not read["universal_refuted"] and not read["existential_holds"] and read["lose_or_tie"] == 1


def test_input_checks():
    with pytest.raises(ValueError, match="lambda_bar"):
        split(-1.0, 0.5)
    with pytest.raises(ValueError, match="eps in"):
        late_slope(np.arange(3.0), np.ones(3))
