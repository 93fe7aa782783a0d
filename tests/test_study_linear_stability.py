"""Quick mode of the linear_stability study: measured growth rates vs the exact sigma_l."""

import numpy as np
from _study_helpers import quick_study_fixture

from studies.linear_stability.report import report

quick = quick_study_fixture("linear_stability")   # (out, summary, data.json)


def test_pde_rates_match_theory(quick):
    _, summary, data = quick
    assert len(data["pde"]) >= 9
    for r in data["pde"]:
        # 1e-4: the measured rate differs from sigma_l only by the RK4 truncation
        # (sigma dt)^4/120 = 5e-8, cubic nonlinear feedback O(eps^2 e^6) ~ 1e-11 and round-off ~1e-9;
        # any modelling error (a factor l(l+1), 4 pi, 1/beta, a sign of lambda) would be O(1)
        assert abs(r["measured"] / r["sigma"] - 1) < 1e-4, r
    # the MODEL.md reference values (d = 3, beta = 6, one mean head), printed to 2 decimals there
    ref = {r["l"]: r["measured"] for r in data["pde"] if r["case"] == "mean, 1 head"}
    assert np.allclose([ref[1], ref[3]], [9.34, 23.35], atol=0.006)
    assert summary["pde_max_rel_error"] < 1e-4


def test_decaying_and_negative_head_modes_present(quick):
    _, _, data = quick
    # the quick cases include decaying degrees (noise) so the sign of sigma is tested too
    assert any(r["sigma"] < 0 for r in data["pde"])
    assert all(np.sign(r["measured"]) == np.sign(r["sigma"]) for r in data["pde"])


def test_critical_noise_switch(quick):
    _, summary, data = quick
    cc = data["critical"][0]
    for r in cc["rows"]:
        if r["l"] == cc["l_c"]:
            # nu = (1 -+ 0.02) nu_c: the critical degree grows below and decays above, exact rate
            # +-0.02 l(l+1) nu_c, measured to ~1e-7 relative, so the sign is unambiguous
            assert (r["measured"] > 0) == (r["ratio"] < 1), r
            assert abs(r["measured"] / r["sigma"] - 1) < 1e-4, r
        if r["ratio"] > 1:
            assert r["measured"] < 0, r
    assert summary["critical_switch"]


def test_particle_sigma1_within_sampling_tolerance(quick):
    _, summary, data = quick
    r = data["particle_direct"][0]
    assert r["direct"] and r["l"] == 1 and r["n"] == 1000
    # 5 %: with n = 1000 stratified tokens and eps = 1e-2 the initial moment mu_10 carries a
    # sampling error of 2-4 % of eps (recorded as init_error); the measured rate over six seeds
    # deviated by at most 2.4 % (study notes); 5 % is about twice that spread
    assert r["init_error"] < 0.1
    assert abs(r["measured"] / r["sigma"] - 1) < 0.05, r
    # the O(n) spectral evaluation used for large n is the same velocity as ParticleSystem
    assert summary["rhs_check"]["mean"] < 1e-8 and summary["rhs_check"]["softmax"] < 1e-8


def test_clusters_and_report(quick):
    out, _, data = quick
    c = data["clusters"][0]
    # beta = 8: l* = 4 (sqrt(2 beta) = 4)
    assert c["l_star"] == 4 and c["status_ok"]
    # ten independent token draws, each counted, and the statistics are their mean and t-interval
    assert len(c["runs"]) == len(set(c["seeds"])) == 10
    finals = np.array([r["final"] for r in c["runs"]], float)
    assert np.isclose(c["final"][0], finals.mean(), rtol=1e-12)
    # half-width t_{0.975, 9} s / sqrt(10) = 2.262 s / sqrt(10) exactly (round-off only)
    assert np.isclose(c["final"][1], 2.2621571627 * finals.std(ddof=1) / np.sqrt(10), rtol=1e-9)
    # the count of macroscopic clusters from a uniform start lies between 2 and the ~6 maxima of a random
    # degree-4 field (n = 600: ~3.6 +- 0.5 over 10 seeds), plus a margin for sampling
    assert 2 <= c["final"][0] <= 8, c["final"]
    # count / (l*(l*+1)/(2 sqrt 3)) = count / 5.77: its mean lies in (0.3, 1.2) and its 95 % interval is
    # informative (half-width < 0.3), i.e. the count is of the order of the maxima of a degree-l* field
    assert 0.3 < c["ratio_pred"][0] < 1.2 and 0 < c["ratio_pred"][1] < 0.3, c["ratio_pred"]
    # the Monte Carlo maxima of random fields carry intervals too (5 fields per degree in quick mode)
    assert len(data["random_maxima"]["ci"]) == len(data["random_maxima"]["mean"])
    path = report(out)
    text = path.read_text()
    assert path.exists() and "confirmed" in text and "95 % CI" in text
    for name in ("pde_rates.png", "particle_rates.png", "clusters.png", "critical_noise.png"):
        assert (out / name).stat().st_size > 1000
