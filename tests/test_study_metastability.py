"""Quick mode of the metastability study: staircase, merge times against beta, counts, closest pair."""

import copy

import numpy as np
from _study_helpers import quick_study_fixture

from studies._common import OUTSIDE, REFUTED, REPRODUCED, SHARPENED, VERDICTS
from studies.metastability.report import _contains, family_interval, flags, report, verdicts
from studies.metastability.run import QUICK, pde_eps_cells, seed_fits

quick = quick_study_fixture("metastability")   # (out, summary, data.json)

CAPS_ROW = "first merge time grows exponentially in beta (metastability theorem)"
PDE_ROW = ("d = 2: the metastable periodicity is k* = argmax_k sigma_k (Thm. on the linear / quasi-linear phase), "
           "the mean-field PDE")


def _rows(data):
    return {r[0]: r for r in verdicts(data, flags(data))}


def test_energy_climbs_and_jumps_at_merges(quick):
    _, _, data = quick
    for p in data["staircase"]["per_beta"]:
        # USA is the gradient ascent of E: non-decreasing to round-off along every run (1e-9 relative)
        assert p["energy_monotone"] and p["runs"] == 10 and p["formed"] >= 8
        # most of the energy gained after formation is gained at merges (quick: 10 seeds, n = 100);
        # the lower 95 % bound is above the log-time the windows cover
        assert p["frac_energy"][0] - p["frac_energy"][1] > p["frac_logtime"][0]
    p = data["staircase"]["per_beta"][0]
    # an isolated pair merge of point clusters raises e^-beta E by m_a m_b / beta; one mean ratio per run (the merges of
    # a run are not independent); 25 %: the clusters' width at n = 100 and the inter-cluster energy before the merge
    assert p["n_jump_runs"] >= 3 and p["n_jump_runs"] <= p["n_jumps"]
    assert abs(p["jump_ratio_runs"][0] - 1) < 0.25, p["jump_ratio_runs"]


def test_cap_merge_time_exponential_not_power_law(quick):
    _, summary, data = quick
    caps = data["caps"]
    assert caps["n_ok"] == caps["n_runs"] == 40          # 4 betas x 10 seeds, every run starts with 3 caps
    # the seed is the unit: one cap draw per seed shared by the betas, one fit per seed
    assert caps["fit"]["unit"] == "seeds" and caps["fit"]["n"] == 10 and len(caps["per_seed"]) == 10
    # the verdict's statistics (quick measured 2.02 +- 0.03 and 0.372 +- 0.004): the exponential fit's residual is
    # e^2 smaller than the power law's, and the joint fit's rate b (any power-law prefactor) is near 1 - cos 50 deg
    # = 0.357 (the two-point asymptotics; 0.30-0.45 leaves room for the finite betas 6-22)
    r, b, c = caps["log_rss_ratio"], caps["rate_joint"], caps["prefactor_power"]
    assert r[0] - r[1] > 1.0 and 0.30 < b[0] - b[1] and b[0] + b[1] < 0.45
    assert c[0] + c[1] < 0                                 # a decreasing prefactor (asymptotics: beta^-1)
    fl = flags(data)
    assert fl["caps_exponential"] and _rows(data)[CAPS_ROW][2] == REPRODUCED
    # the secant slope is the point clusters' within its interval plus 0.02 (evidence, quick measured ~0.001 apart)
    assert abs(summary["first_merge_slope_caps"][0] - summary["first_merge_slope_points"]) <= (
        summary["first_merge_slope_caps"][1] + 0.02)
    assert caps["closest_first"][0] == caps["closest_first"][1] == 40


def test_exponential_test_refuses_a_power_law():
    # synthetic power law tau = beta^3 (noise 1e-3 in log tau): the exponential fit does worse, the joint rate ~ 0
    rng = np.random.default_rng(0)
    betas = np.array([6.0, 9.0, 12.0, 15.0, 18.0, 21.0, 24.0])
    f = seed_fits(betas, 3 * np.log(betas) + 1e-3 * rng.standard_normal(betas.size))
    assert f["log_rss_ratio"] < 0 and abs(f["rate_joint"]) < 0.01
    # and the exponential with the two-point prefactor, tau = e^(0.357 beta) / beta: both statistics positive
    f = seed_fits(betas, 0.357 * betas - np.log(betas))
    assert f["log_rss_ratio"] > 0 and abs(f["rate_joint"] - 0.357) < 1e-9 and abs(f["prefactor_power"] + 1) < 1e-9


def test_caps_verdict_follows_its_test(quick):
    _, _, data = quick
    bad = copy.deepcopy(data)
    bad["caps"]["log_rss_ratio"] = [-0.5, 0.1]            # a power law fits better: refuted, never sharpened
    assert _rows(bad)[CAPS_ROW][2] == REFUTED
    assert all(r[2] != SHARPENED for r in verdicts(data, flags(data)))


def test_circle_pde_peaks_are_k_star_at_selectivity_10(quick):
    _, _, data = quick
    P = data["pde"]["per_beta"]
    cells = {(p["beta"], p["eps"]): p for p in P}
    # quick: beta 5 (k* = 3, 1 - s2/s1 = 0.121) and 10 (k* = 4, 0.010); the verdict's eps is min(1e-9, 10^(-1/gap)):
    # 1e-9 (selectivity 12.3) and ~8e-102 (selectivity 10); the former hypothesis at selectivity exactly 2
    ver = [p for p in P if "S=10" in p["roles"]]
    assert [p["beta"] for p in ver] == [5.0, 10.0] and ver[0]["eps"] == 1e-9 and ver[1]["eps"] < 1e-90
    assert all(p["selectivity"] >= 10 - 1e-9 for p in ver)
    assert all(abs(p["selectivity"] - 2) < 1e-9 for p in P if "S=2" in p["roles"])
    assert all(p["reached_3"] == p["runs"] == 10 for p in P)
    # at selectivity >= 10 the runner-up wins a run only if its initial amplitude is >= 10x k*'s (probability ~1-2 %
    # per run): k* in at least 8 of 10 runs, and the Bonferroni family test passes
    assert all(p["n_at_kstar"] >= 8 for p in ver), [(p["beta"], p["counts"]) for p in ver]
    fl = flags(data)
    assert fl["pde_reproduced"] and _rows(data)[PDE_ROW][2] == REPRODUCED
    # eps down to 1e-101 is carried exactly: the linear phase matches c_k(0) e^(sigma_k t) at k* and the runner-up to
    # the nonlinear correction O(1e-6) (quick measured 8e-6)
    assert fl["pde_linear_error"] < 1e-4
    assert (5.0, 1e-3) in cells and max(r["mass_error"] for r in data["pde"]["rows"]) < 1e-12


def test_pde_cells_and_family_interval():
    # beta = 10: gap ~ 0.010, so the verdict's eps is far below 1e-9 and the former (S = 2) eps is ~4e-31;
    # beta = 2 (gap 0.305): S = 2 would need eps = 0.10, not a small perturbation, and is left out
    cells = dict((e, r) for e, r in pde_eps_cells(QUICK, 0.0100))
    assert any("S=10" in r and e < 1e-90 for e, r in cells.items())
    assert any(r == ["S=2"] and 1e-32 < e < 1e-29 for e, r in cells.items())
    cells = dict((e, r) for e, r in pde_eps_cells(QUICK, 0.305))
    assert cells[1e-9] == ["fixed", "S=10"] and not any("S=2" in r for r in cells.values())
    # the reviewed case: 3.40 +- 0.37 excludes k* = 3 (the old half-cluster rule passed it); Bonferroni widens
    assert not _contains((3.40, 0.37), 3)
    assert _contains((3.0, 0.0), 3) and not _contains((4.0, 0.0), 3) and not _contains((float("nan"), 0.1), 3)
    x = [3, 3, 4, 3, 4, 3, 4, 3, 4, 3]
    m1, h1 = family_interval(x, 1)
    m5, h5 = family_interval(x, 5)
    assert m1 == m5 == 3.4 and h5 > 1.3 * h1 and family_interval([4] * 10, 5) == (4.0, 0.0)


def test_s2_and_particle_rows_are_outside(quick):
    _, _, data = quick
    rows = _rows(data)
    # n = 200 (quick: 100) i.i.d. particles, the claims are for the mean-field limit
    assert rows["S^2: the metastable structure is set by the most unstable degree l*"][2] == OUTSIDE
    assert rows["the same with particles"][2] == OUTSIDE


def test_closest_pair_and_static_check(quick):
    _, _, data = quick
    fl = flags(data)
    # merges after formation, per run (runs independent): the merging pair is the closest pair of centres at the
    # frame before; lower 95 % bound >= 0.8
    assert fl["closest_first_runs"][0] >= 10 and fl["closest_first_ok"], fl["closest_first_runs"]
    # caps at tau = 10: the speed ratio equals three point clusters' at the measured geometry (quick: 2e-5 in log,
    # the caps' width ~1e-2 e^-3 gives O(beta w^2) ~ 1e-5); the ratio grows more slowly than cos 50 - cos 155 = 1.549
    # because the pair closes in by tau = 10 (more at smaller beta): the measured geometry is what is compared
    fs = data["caps"]["fit_speed"]
    assert fl["caps_speed_rate"] and abs(fs["log_ratio_to_points"][0]) < 1e-3 and fs["n"] == 10
    assert abs(fs["slope"] - fs["predicted_slope"]) < 0.01
    # static point clusters: the velocity formula's ratio to the large-beta prediction (a consistency check;
    # exp(-beta (1 - cos a)) corrections: 7e-4 at beta = 5, 4e-7 at beta = 10)
    assert fl["pair_check"] < 1e-5
    assert np.isclose(data["pair"]["slope"], data["pair"]["predicted_slope"], rtol=1e-3)


def test_report_has_verdicts(quick):
    out, _, _ = quick
    text = report(out).read_text()
    sec = text.split("## Verdicts against the paper's hypotheses")[1].split("## Claims and verdicts")[0]
    assert sum(f"**{v}**" in sec for v in VERDICTS) >= 2 and "outside the hypotheses" in sec
    assert f"**{SHARPENED}**" not in sec
    chg = text.split("## Changes after referee (issue 33)")[1]
    assert "fresh seeds: yes" in chg and chg.count("| ") >= 5
    for name in ("staircase.png", "merge_times.png", "counts.png", "closest_pair.png"):
        assert (out / name).stat().st_size > 1000
