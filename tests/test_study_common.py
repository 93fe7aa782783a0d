"""The shared numerics of studies/_common.py: fit_slope and blowup_horizon."""

import numpy as np
import pytest
from scipy import stats

import meanfield as mf
from meanfield.core.options import SaveAt
from studies._common import SlopeFit, blowup_horizon, fit_slope


def test_fit_slope_recovers_a_power_law():
    x = np.geomspace(1.0, 1e4, 9)
    fit = fit_slope(x, 3.0 * x ** -0.5, log_x=True, log_y=True)
    # an exact power law: only round-off of logs and least squares (values O(10)) separates the fit
    # from slope -1/2, intercept log 3 and zero scatter
    assert isinstance(fit, SlopeFit) and fit.n_points == 9
    assert abs(fit.slope + 0.5) < 1e-12 and abs(fit.intercept - np.log(3.0)) < 1e-12
    assert fit.stderr < 1e-12


def test_fit_slope_is_polyfit_bit_for_bit():
    rng = np.random.default_rng(3)
    x, y = np.geomspace(0.1, 10.0, 7), np.exp(rng.standard_normal(7))
    # the same np.polyfit call on the same logs: equality, no tolerance (the studies' numbers must not change)
    assert fit_slope(x, y, log_x=True, log_y=True).slope == float(np.polyfit(np.log(x), np.log(y), 1)[0])
    assert fit_slope(x, np.log(y)).slope == float(np.polyfit(x, np.log(y), 1)[0])


def test_fit_slope_standard_error_matches_linregress():
    rng = np.random.default_rng(5)
    x = np.linspace(0.0, 1.0, 12)
    y = 2.0 * x + 0.1 * rng.standard_normal(12)
    fit, ref = fit_slope(x, y), stats.linregress(x, y)
    # two implementations of the same closed-form estimates in double precision: round-off only
    assert abs(fit.slope - ref.slope) < 1e-12 and abs(fit.intercept - ref.intercept) < 1e-12
    assert abs(fit.stderr / ref.stderr - 1) < 1e-10
    # two points: a line through both, no degree of freedom left for the scatter
    assert np.isnan(fit_slope([1.0, 2.0], [1.0, 3.0]).stderr)


def test_fit_slope_masks_explicitly():
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    y = np.array([1.0, np.inf, 4.0, 0.0, 16.0])        # inf and a non-positive value on a log axis
    fit = fit_slope(x, y, log_x=True, log_y=True, drop_invalid=True)
    # the three valid points lie on y = x exactly: slope 1 up to round-off of the logs
    assert fit.n_points == 3 and abs(fit.slope - 1) < 1e-12
    # on a linear y axis, 0 is valid and only inf is dropped
    assert fit_slope(x, y, drop_invalid=True).n_points == 4
    with pytest.raises(ValueError, match="drop_invalid=True; received 2 invalid of 5 points"):
        fit_slope(x, y, log_x=True, log_y=True)
    with pytest.raises(ValueError, match="finite unless drop_invalid=True; received 1 invalid"):
        fit_slope(x, y)
    # fewer than min_points usable points: a nan fit that still counts them
    few = fit_slope([1.0, 2.0, 3.0], [np.nan, np.nan, 1.0], drop_invalid=True)
    assert few.n_points == 1 and np.isnan(few.slope) and np.isnan(few.intercept)
    assert np.isnan(fit_slope(x[:3], x[:3], min_points=4).slope)


def test_fit_slope_input_checks():
    with pytest.raises(ValueError, match=r"same length; received shapes \(3,\) and \(2,\)"):
        fit_slope([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="min_points must be an integer >= 2"):
        fit_slope([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], min_points=1)


def test_blowup_horizon_stops_flat_runs_before_the_blowup():
    # the flat case of the energy-monotonicity quick mode: it blows up near t = 0.3
    system = mf.ParticleSystem(mf.random_symmetric_heads(3, 3, seed=11), "flat")
    X0 = mf.initial.uniform_sphere(12, 3, seed=12)
    t_end, t_blowup = blowup_horizon(system, X0, 2.0, 0.6)
    assert 0 < t_blowup < 2.0
    assert t_end == 0.6 * t_blowup          # the exact product the studies used before (no tolerance)
    assert mf.solve_particles(system, X0, t_end, save=SaveAt(observe=False), progress=False).status == 0
    # the same tokens on the sphere do not blow up: the intended end time comes back unchanged
    sphere = mf.ParticleSystem(system.heads, "sphere")
    assert blowup_horizon(sphere, X0, 2.0, 0.6) == (2.0, None)
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="fraction must be in"):
            blowup_horizon(system, X0, 2.0, bad)
