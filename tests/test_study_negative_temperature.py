"""Quick mode of the negative-temperature synchronization study (Polyanskiy-Rigollet-Yao, arXiv 2507.22857):
the model's mapping onto the library's heads, the derived cluster states, the verdict rules (issue 33) and the
study's key numbers."""

import re

import numpy as np
import pytest
from _study_helpers import quick_study_fixture

import meanfield as mf
from meanfield.models.batched import BatchedSystem
from studies._common import REFUTED, REPRODUCED, SHARPENED, wilson95
from studies.negative_temperature.report import report, verdict_equal, verdict_every_n
from studies.negative_temperature.run import (
    FULL,
    QUICK,
    angular_velocity,
    cluster_angles,
    cluster_sizes,
    leading_rate,
    paper_head,
    polygon_eigenvalues,
    polygon_threshold,
    start_rng,
    tokens,
    triangle_rate,
    unequal_roots,
    unequal_state,
    unequal_threshold,
    wilson,
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
    # beta = 0 (the positive-temperature side starts there): M = 0, the Kuramoto-type mean of sin(theta_j - theta_i)
    want = np.sin(theta[None, :] - theta[:, None]).mean(axis=1)
    assert np.allclose(_theta_dot(mf.ParticleSystem([paper_head(0.0)]), theta), want, rtol=0, atol=1e-13)


def test_triangle_eigenvalue_closed_form():
    # the polygon formula at k = 3 is -g'(2 pi/3): the same expression rearranged, round-off only
    for beta in (-1.5, -2 / 3, -0.2):
        assert abs(polygon_eigenvalues(3, beta)[0] - triangle_rate(beta)) < 1e-14
        # the particle Jacobian off the rotation mode at the triangle: the same number (round-off)
        assert abs(leading_rate(2 * np.pi * np.arange(3) / 3, beta) - triangle_rate(beta)) < 1e-13
    # threshold located by Brent's method to xtol 1e-12
    assert abs(polygon_threshold(3) + 2 / 3) < 1e-10
    # the antipodal pair (k = 2) is never stable: its collective rate is e^{-beta} > 0
    assert np.isnan(polygon_threshold(2))


def test_unequal_cluster_states():
    assert [cluster_sizes(n) for n in (3, 4, 5, 8, 11, 30)] == [(1, 1, 1), (1, 1, 2), (2, 2, 1), (3, 3, 2), (4, 4, 3),
                                                                 (10, 10, 10)]
    # equal sizes: the 120-degree root is among the equilibria (brentq to 1e-14)
    assert min(abs(p - 2 * np.pi / 3) for p in unequal_roots(3, 3, -1.0)) < 1e-12
    # the symmetric unequal states are equilibria: every angular velocity vanishes (round-off of O(1) terms)
    for n, beta in ((4, -2.5), (5, -2.0), (8, -1.5), (11, -1.5)):
        psi, rate = unequal_state(n, beta)
        assert rate < 0, (n, beta)                                         # stable there (derived)
        assert np.abs(angular_velocity(cluster_angles(cluster_sizes(n), psi), beta)).max() < 1e-12
    # and none is stable just below -2/3 for n not a multiple of 3
    for n in (4, 5, 8, 11):
        rate = unequal_state(n, -0.7)[1]
        assert np.isnan(rate) or rate > 0.5, n
    # the thresholds lie below -2/3 and approach it as n grows (n = 2 mod 3): -1.443, -1.222, -1.119, -1.056;
    # bisection to 1e-10 on a 0.01 scan
    thr = [unequal_threshold(n) for n in (5, 8, 11, 14)]
    assert all(np.diff(thr) > 0) and thr[-1] < -2 / 3 and thr[0] == pytest.approx(-1.4429046, abs=1e-6)
    assert unequal_threshold(4) == pytest.approx(-2.2124281, abs=1e-6)


def test_fresh_independent_starts():
    # one start per (part, n, beta index, k): two betas of one row do not share a start (issue 24 did)
    a = start_rng(1, 8, 0, 3).uniform(0, 2 * np.pi, 8)
    b = start_rng(1, 8, 1, 3).uniform(0, 2 * np.pi, 8)
    assert not np.allclose(a, b)
    # unequal betas below -2/3 have i.i.d. starts of the same (n, beta) (the verdict combines the two start laws)
    for s in (QUICK, FULL):
        ns = dict(s.random_ns)
        assert all(n in ns and b in s.random_betas for n in s.unequal_ns for b in s.unequal_betas if b < -2 / 3)
        assert any(b >= 0 for b in s.random_betas)                       # the positive-temperature side is run


def test_wilson_family():
    # z = 1.96 reproduces the library's Wilson interval; a larger z (Bonferroni) widens it
    assert wilson(3, 20) == pytest.approx(wilson95(3, 20), abs=1e-12)
    lo, hi = wilson(0, 80, 2.498)
    assert lo == 0.0 and wilson95(0, 80)[1] < hi < 0.08


def test_verdict_rules():
    """Decided before the issue-33 runs: equal clusters that never synchronize below -2/3 give 'sharpened' when the
    every-n reading is refuted (some (n, beta) where every start synchronized), 'reproduced' when it is not."""
    cell = {"n": 4, "beta": -1.0, "unequal": [20, 20], "iid": [40, 40], "global_sync": True}
    m = {"near_none_sync_below_beta_low": True, "unequal_global_sync_cells": [cell]}
    assert verdict_equal(m) == SHARPENED and verdict_every_n(m) == REFUTED
    m = {"near_none_sync_below_beta_low": True, "unequal_global_sync_cells": []}
    assert verdict_equal(m) == REPRODUCED and verdict_every_n(m) == REPRODUCED
    m = {"near_none_sync_below_beta_low": False, "unequal_global_sync_cells": []}
    assert verdict_equal(m) == REFUTED


def test_report_written(quick):
    out, _, _ = quick
    text = report(out).read_text()
    assert "## Verdicts against the paper's hypotheses" in text and (out / "fractions.png").stat().st_size > 0
    assert "Changes after the referee (issue 33)" in text
    section = text.split("## Verdicts against the paper's hypotheses")[1].split("## Claims and verdicts")[0]
    # quick data: both sides of -0.16 synchronize, equal clusters hold below -2/3 but n = 4 near three unequal
    # clusters synchronizes at beta = -2, -1.5, -0.8 (no stable unequal state above beta_u(4) = -2.21)
    assert re.findall(r"\*\*([^*]+)\*\*", section) == [REPRODUCED, REPRODUCED, SHARPENED, REFUTED]
    assert "n a multiple of 3" in section and "any n (tested" in section


def test_synchronization_bounds_quick(quick):
    _, s, m = quick
    # exact counts (no tolerance): every run at beta >= -0.16 synchronizes (both sides of 0), no run near three
    # equal clusters does below -2/3
    assert s["all_sync_negative_side"] and s["all_sync_positive_side"] and s["near_none_sync_below_beta_low"]
    assert m["count_positive_side"][1] > 0 and m["count_negative_side"][1] > 0
    # the classification is the same at T and 2T (exact count)
    assert s["classification_changed_T_to_2T"] == 0
    # the criterion separates cleanly: synchronized spreads are tiny, non-synchronized ones O(1) rad
    assert m["sync_max_spread_T"] < 1e-6 and m["nonsync_min_spread_T"] > 0.5


def test_unequal_clusters_quick(quick):
    _, s, m = quick
    # the derived prediction (synchronize iff no stable unequal 3-cluster state) holds at every decidable (n, beta)
    assert s["unequal_prediction_mismatches"] == []
    n5 = next(r for r in m["unequal"] if r["n"] == 5)
    betas = m["unequal_betas"]
    # n = 5: a stable state exists at beta = -2, -1.5 (beta_u(5) = -1.443): those starts stay unsynchronized
    assert [fr["k"] for b, fr in zip(betas, n5["fractions"]) if b <= -1.5] == [0, 0]
    assert n5["start"][betas.index(-1.5)] == "equilibrium" and n5["start"][betas.index(-0.8)] == "120 deg"
    # the every-n reading fails: below -2/3, at n = 4, every start of both laws synchronizes
    cells = {(c["n"], c["beta"]) for c in m["unequal_global_sync_cells"]}
    assert {(4, -2.0), (4, -1.5), (4, -0.8)} <= cells
    assert all(c["unequal"][0] == c["unequal"][1] and c["iid"][0] == c["iid"][1] for c in m["unequal_global_sync_cells"])


def test_rates_against_closed_forms(quick):
    _, s, m = quick
    # fitted log-slopes over a 1e-11..1e-4 window: nonlinear corrections O(1e-4) on the unstable side
    assert s["triangle_rate_max_rel_err"] < 1e-3 and m["triangle_rate_fits_missing"] == 0
    # central difference at eps = 1e-4: O(eps^2) truncation and round-off, relative to the largest |sigma_k|
    assert s["pde_rate_max_rel_err_closed"] < 1e-8
    # the library's zonal growth_rate with the sign flipped is the same closed form: round-off
    assert m["pde_rate_max_rel_err_library"] < 1e-12
