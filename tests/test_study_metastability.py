"""Quick mode of the metastability study: staircase, merge times against beta, counts, closest pair."""

import numpy as np
from _study_helpers import quick_study_fixture

from studies._common import VERDICTS
from studies.metastability.report import flags, report

quick = quick_study_fixture("metastability")   # (out, summary, data.json)


def test_energy_climbs_and_jumps_at_merges(quick):
    _, _, data = quick
    for p in data["staircase"]["per_beta"]:
        # USA is the gradient ascent of E: non-decreasing to round-off along every run (1e-12 relative)
        assert p["energy_monotone"] and p["runs"] == 10 and p["formed"] >= 8
        # most of the energy gained after formation is gained at merges (quick: 10 seeds, n = 100);
        # the lower 95 % bound is above the log-time the windows cover
        assert p["frac_energy"][0] - p["frac_energy"][1] > p["frac_logtime"][0]
    p = data["staircase"]["per_beta"][0]
    # an isolated pair merge of point clusters raises e^-beta E by m_a m_b / beta; 25 %: the clusters' width
    # and the inter-cluster energy before the merge (quick mode: few isolated merges)
    assert p["n_jumps"] >= 3 and abs(p["jump_ratio"][0] - 1) < 0.25, p["jump_ratio"]


def test_cap_merge_time_exponential_in_beta(quick):
    _, summary, data = quick
    caps = data["caps"]
    assert caps["n_ok"] == caps["n_runs"] == 40          # 4 betas x 10 seeds, every run starts with 3 caps
    slope, half = summary["first_merge_slope_caps"]
    # exponential growth: the 95 % interval excludes 0 by far; and it is the point clusters' rate within the
    # interval plus 0.02 (the caps' width; measured difference ~0.004)
    assert slope - half > 0.1
    assert abs(slope - summary["first_merge_slope_points"]) <= half + 0.02
    # log(beta tau_1) grows slower than the large-beta rate 1 - cos 50 deg at these betas, but within 25 %
    fb = caps["fit_beta_tau"]["slope"]
    assert 0.75 * summary["rate_large_beta"] < fb <= summary["rate_large_beta"] + caps["fit_beta_tau"]["half"]
    # the closest pair (caps 0 and 1, 50 deg apart; the third at 155 deg) merges first in every run
    assert caps["closest_first"][0] == caps["closest_first"][1] == 40
    # while the geometry is fixed (pair angle within 1 deg of 50 at tau = 10: beta >= 18), the pair's speed over the
    # third cap's grows like exp(beta (cos 50 - cos 155)): the slope's 95 % interval plus 0.02 holds 1.549
    f = caps["fit_speed"]
    assert f["n"] >= 15 and abs(f["slope"] - caps["speed_rate"]) <= f["half"] + 0.02, f


def test_circle_count_is_k_star(quick):
    _, _, data = quick
    p = data["circle"]["per_beta"][0]
    # beta = 5: k* = 3 (sigma_k ~ k^2 I_k(5): 24, 70, 93, 72 for k = 1..4); the count at formation over 10 seeds
    # lies within its 95 % interval (or 0.5) of k*
    assert p["k_star"] == 3 and p["formed"] == 10
    m, h = p["count_formed"]
    assert abs(m - 3) <= max(h, 0.5), p


def test_circle_pde_peaks_are_k_star(quick):
    _, _, data = quick
    P = data["pde"]["per_beta"]
    # the mean-field PDE from 1 + eps x (random low modes), eps = 1e-3, 1e-6, 1e-9: every run reached 3x uniform
    # within its horizon (the linear phase resolved down to eps = 1e-9, round-off 1e-16 far below it)
    assert sorted(p["eps"] for p in P) == [1e-9, 1e-6, 1e-3]
    assert all(p["k_star"] == 3 and p["reached_3"] == 10 for p in P), P
    assert max(p["roundoff_over_eps"] for p in P) < 1e-6
    # the claim's limit: at eps = 1e-9 (selectivity eps^-(1 - s2/s1) = 12 at beta = 5) the 95 % t-interval of the
    # peak count over 10 perturbations contains k* = 3 (no half-cluster floor: half-width 0 if the count is constant)
    p = min(P, key=lambda p: p["eps"])
    m, h = p["count"]
    assert abs(m - 3) <= h, p
    # the Voronoi masses partition the quadrature mass 1 (round-off, m = 1024 nodes)
    assert max(r["mass_error"] for r in data["pde"]["rows"]) < 1e-12


def test_interval_test_has_no_floor():
    from studies.metastability.report import _contains

    # the reviewed case: 3.40 +- 0.37 excludes k* = 3 (the old half-cluster rule passed it)
    assert not _contains((3.40, 0.37), 3)
    assert _contains((3.0, 0.0), 3) and not _contains((4.0, 0.0), 3) and not _contains((float("nan"), 0.1), 3)


def test_s2_and_particle_rows_are_outside(quick):
    from studies._common import OUTSIDE
    from studies.metastability.report import verdicts

    _, _, data = quick
    rows = {r[0]: r for r in verdicts(data, flags(data))}
    # n = 200 (quick: 100) i.i.d. particles, the claims are for the mean-field limit
    assert rows["S^2: the metastable structure is set by the most unstable degree l*"][2] == OUTSIDE
    assert rows["the same with particles"][2] == OUTSIDE


def test_closest_pair_and_static_check(quick):
    _, _, data = quick
    fl = flags(data)
    # merges after formation: the merging pair is the closest pair of centres at the frame before (Wilson 95 %
    # lower bound >= 0.8)
    assert fl["closest_first"][1] >= 10 and fl["closest_first_ok"], fl["closest_first"]
    # static point clusters: the velocity formula's ratio to the large-beta prediction (a consistency check;
    # exp(-beta (1 - cos a)) corrections: 7e-4 at beta = 5, 4e-7 at beta = 10)
    assert fl["pair_check"] < 1e-5
    assert np.isclose(data["pair"]["slope"], data["pair"]["predicted_slope"], rtol=1e-3)


def test_report_has_verdicts(quick):
    out, _, _ = quick
    text = report(out).read_text()
    sec = text.split("## Verdicts against the paper's hypotheses")[1].split("## Claims and verdicts")[0]
    assert sum(f"**{v}**" in sec for v in VERDICTS) >= 2 and "outside the hypotheses" in sec
    for name in ("staircase.png", "merge_times.png", "counts.png", "closest_pair.png"):
        assert (out / name).stat().st_size > 1000
