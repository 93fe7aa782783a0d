"""Quick mode of the negative-temperature synchronization study (Polyanskiy-Rigollet-Yao, arXiv 2507.22857):
the model's mapping onto the library's heads, and the study's key numbers."""

import numpy as np
from _study_helpers import quick_study_fixture

import meanfield as mf
from meanfield.models.batched import BatchedSystem
from studies.negative_temperature.report import report
from studies.negative_temperature.run import (
    angular_velocity,
    paper_head,
    polygon_eigenvalues,
    polygon_threshold,
    tokens,
    triangle_rate,
)

quick = quick_study_fixture("negative_temperature")   # (out, summary, data.json)


def _theta_dot(system, theta):
    X = tokens(theta)
    V = system.velocity(X)
    return V[:, 1] * X[:, 0] - V[:, 0] * X[:, 1]          # component along e_theta = (-sin, cos)


def test_mapping_of_negative_beta_onto_heads():
    theta = np.random.default_rng(0).uniform(0, 2 * np.pi, 7)
    for beta in (-1.3, -0.4):
        want = angular_velocity(theta, beta)
        a = _theta_dot(mf.ParticleSystem([paper_head(beta)]), theta)
        b = _theta_dot(mf.ParticleSystem([mf.Head(M=-np.eye(2), V=np.eye(2), beta=abs(beta))]), theta)
        rep = _theta_dot(mf.ParticleSystem([mf.Head(M=-np.eye(2), V=-np.eye(2), beta=abs(beta))]), theta)
        # the same sums in a different order: round-off of O(1) velocities
        assert np.allclose(a, want, rtol=0, atol=1e-13) and np.allclose(b, want, rtol=0, atol=1e-13)
        # the zonal M = V = -I head is the time-reversed (repulsive) flow, not the paper's model
        assert np.allclose(rep, -want, rtol=0, atol=1e-13)
        # the batched sums are the ParticleSystem sums (one system): round-off
        X = tokens(theta)[None]
        bs = BatchedSystem([(paper_head(beta),)])
        assert np.allclose(bs.rhs(0.0, X)[0], mf.ParticleSystem([paper_head(beta)]).velocity(X[0]), rtol=0, atol=1e-13)


def test_triangle_eigenvalue_closed_form():
    # the polygon formula at k = 3 is -g'(2 pi/3): the same expression rearranged, round-off only
    for beta in (-1.5, -2 / 3, -0.2):
        assert abs(polygon_eigenvalues(3, beta)[0] - triangle_rate(beta)) < 1e-14
    # threshold located by Brent's method to xtol 1e-12
    assert abs(polygon_threshold(3) + 2 / 3) < 1e-10
    # the antipodal pair (k = 2) is never stable: its collective rate is e^{-beta} > 0
    assert np.isnan(polygon_threshold(2))


def test_report_written(quick):
    out, _, _ = quick
    text = report(out).read_text()
    assert "## Verdicts against the paper's hypotheses" in text and (out / "fractions.png").stat().st_size > 0


def test_synchronization_bounds_quick(quick):
    _, s, m = quick
    # exact counts (no tolerance): every run at beta >= -0.16 synchronizes, no run near the triangle does below -2/3
    assert s["all_sync_at_or_above_beta_high"] and s["near_none_sync_below_beta_low"]
    # the classification is the same at T and 2T (exact count)
    assert s["classification_changed_T_to_2T"] == 0
    # the criterion separates cleanly: synchronized spreads are tiny, non-synchronized ones O(1) rad
    assert m["sync_max_spread_T"] < 1e-6 and m["nonsync_min_spread_T"] > 0.5


def test_rates_against_closed_forms(quick):
    _, s, m = quick
    # fitted log-slopes over a 1e-11..1e-4 window: nonlinear corrections O(1e-4) on the unstable side
    assert s["triangle_rate_max_rel_err"] < 1e-3 and m["triangle_rate_fits_missing"] == 0
    # central difference at eps = 1e-4: O(eps^2) truncation and round-off, relative to the largest |sigma_k|
    assert s["pde_rate_max_rel_err_closed"] < 1e-8
    # the library's zonal growth_rate with the sign flipped is the same closed form: round-off
    assert m["pde_rate_max_rel_err_library"] < 1e-12
