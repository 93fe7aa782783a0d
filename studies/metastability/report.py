"""Report of the metastability study: staircase, merge times against beta, cluster counts, the closest pair.

Reads ``data.json`` and ``data.npz`` written by run.py; writes ``staircase.png``, ``merge_times.png``,
``counts.png``, ``closest_pair.png`` and ``report.md``.  Every verdict is computed from flags on the data
(:func:`verdicts`).  Run from the repo root: ``python -m studies.metastability.run``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from studies._common import (  # noqa: E402
    OUTSIDE,
    REFUTED,
    REPRODUCED,
    SHARPENED,
    fit_slope,
    markdown_table,
    mean_ci95,
    open_study_data,
    save_figure,
    style_axes,
    wilson95,
    write_report,
)

GKPR = "Geshkovski-Koubbi-Polyanskiy-Rigollet (arXiv 2410.06833)"
BPA = "Bruno-Pasqualotto-Agazzi (ICLR 2025, arXiv 2410.23228)"
STAIR_MIN_FRACTION = 0.8     # staircase: at least 80 % of the energy gained after formation is gained at merges ...
JUMP_TOL = 0.2               # ... and the jumps are m_a m_b / beta within 20 % (point clusters; the rest: the
                             # clusters' own width and the inter-cluster energy present before the merge)
SLOPE_SLACK = 0.02           # caps vs point clusters: secant slopes within the interval plus this (evidence only)
SPEED_TOL = 0.1              # caps speed ratio at tau = 10 = point clusters' at the measured geometry within 10 % (log);
                             # fixed after the referee round's quick run (the speed test's earlier form compared with
                             # the initial geometry's rate, which the caps leave by tau = 10): fresh cap seeds
CLOSEST_MIN = 0.8            # closest pair first: lower 95 % bound of the per-run fraction at least this
RATIO_BAND = (0.5, 1.5)      # S^2 count / maxima of a degree-l* field (evidence of an outside row)
FWER = 0.05                  # family-wise error rate of every family of tests below
# circle PDE, fixed after the referee of issue 33 and before the fresh runs: the claim (eps -> 0) is tested where the
# linear-phase selectivity eps^-(1 - s2/s1) is >= 10 at every beta; 2 was the former sharpened hypothesis (refuted by
# the earlier data at beta = 5, eps = 1e-3: selectivity 2.31, count 3.40 +- 0.37 vs k* = 3), now run at beta >= 10
SELECTIVITY_VERDICT = 10.0   # (run.py Settings.pde_sel_verdict, pde_sel_former)
SELECTIVITY_FORMER = 2.0


def _pm(ci, fmt="{:.3g}"):
    m, h = ci
    if m is None or not np.isfinite(m):
        return "n/a"
    return fmt.format(m) + ("" if h is None or not np.isfinite(h) else " +- " + fmt.format(h))


def _slope_fit(x, y):
    from scipy import stats

    f = fit_slope(x, y, log_y=True)
    half = float(stats.t.ppf(0.975, f.n_points - 2) * f.stderr) if f.n_points > 2 else np.nan
    return f.slope, half, f.n_points


def _h(h):
    return float(h) if h is not None and np.isfinite(h) else 0.0


def _contains(ci, k):
    """The 95 % t-interval ``(mean, half)`` contains ``k`` (half-width 0 for a constant count)."""
    m, h = ci
    return m is not None and bool(np.isfinite(m)) and abs(m - k) <= _h(h)


def _lower(ci):
    """Lower end of a ``(mean, half)`` interval (``-inf`` when undefined: a test resting on it fails)."""
    m, h = ci
    return float(m - h) if m is not None and h is not None and np.isfinite(m) and np.isfinite(h) else -np.inf


def family_interval(x, m, fwer=FWER):
    """``(mean, half)`` of the Student-t interval of ``x`` at level ``1 - fwer / m`` (Bonferroni over a family of
    ``m`` tests, ``len(x) - 1`` dof); the half-width is 0 for constant ``x`` and ``nan`` for fewer than 2 values."""
    from scipy import stats

    x = np.asarray(x, float)
    if x.size < 2:
        return (float(x.mean()) if x.size else np.nan), np.nan
    q = stats.t.ppf(1 - fwer / (2 * m), x.size - 1)
    return float(x.mean()), float(q * x.std(ddof=1) / np.sqrt(x.size))


def _pde_family(cells):
    """Per cell: passes iff every run reached 3x uniform and the Bonferroni interval (family = the cells) of the
    count contains k* (a constant count must equal k*)."""
    out = []
    for p in cells:
        ci = family_interval(p["counts"], len(cells))
        ok = p["formed"] == p["runs"] and bool(np.isfinite(ci[0])) and abs(ci[0] - p["k_star"]) <= _h(ci[1])
        out.append(dict(beta=p["beta"], eps=p["eps"], k_star=p["k_star"], selectivity=p["selectivity"], ci=ci,
                        ok=bool(ok), runs=p["runs"], formed=p["formed"], n_at_kstar=p["n_at_kstar"]))
    return out


def flags(data):
    """The booleans every verdict is computed from, and the numbers they rest on."""
    st, caps, circ = data["staircase"], data["caps"], data["circle"]
    out = {}
    # staircase (intersection-union: every beta must pass every test, each a one-sided 2.5 % test, so a false
    # "reproduced" has probability <= 2.5 %)
    pb = [p for p in st["per_beta"] if p["n_staircase"] >= 2]
    out["staircase"] = bool(pb) and all(
        _lower(p["frac_energy"]) >= STAIR_MIN_FRACTION and _lower(p["excess"]) > 0 for p in pb)
    jb = [p for p in st["per_beta"] if p["n_jump_runs"] >= 3]
    out["jumps"] = bool(jb) and all(abs(p["jump_ratio_runs"][0] - 1) + _h(p["jump_ratio_runs"][1]) <= JUMP_TOL
                                    for p in jb)
    out["jump_betas"] = [p["beta"] for p in jb]
    # caps: exponential against power law, per seed (the seed is the unit); both lower ends above 0
    # (intersection-union: a false "reproduced" has probability <= 2.5 %)
    out["caps_exp_beats_power"] = caps["fit"]["n"] >= 3 and _lower(caps["log_rss_ratio"]) > 0
    out["caps_rate_beyond_power"] = caps["fit"]["n"] >= 3 and _lower(caps["rate_joint"]) > 0
    out["caps_exponential"] = out["caps_exp_beats_power"] and out["caps_rate_beyond_power"]
    f, fp = caps["fit"], caps["fit_point"]
    out["caps_rate_matches_points"] = (f["slope"] is not None and fp is not None
                                       and abs(f["slope"] - fp["slope"]) <= _h(f["half"]) + SLOPE_SLACK)
    out["caps_closest_first"] = caps["closest_first"][0] == caps["closest_first"][1] > 0
    matches = []
    for p in circ["per_beta"]:
        m, h = p["count_formed"]
        matches.append(m is not None and (abs(m - p["k_star"]) <= max(h or 0.0, 0.5)))
    out["circle_matches"] = matches
    # particle matches that rest on the half-cluster floor only (evidence of an outside row)
    out["circle_floor_only"] = [p["beta"] for p in circ["per_beta"] if p["count_formed"][0] is not None
                                and (p["count_formed"][1] or 0.0) < abs(p["count_formed"][0] - p["k_star"]) <= 0.5]
    # circle PDE: the family of the verdict (selectivity >= SELECTIVITY_VERDICT, one cell per beta), Bonferroni over
    # its cells (false refutation <= FWER); the former hypothesis's family (selectivity = SELECTIVITY_FORMER) likewise
    pde = data["pde"]["per_beta"]
    sv, sf = data["settings"]["pde_sel_verdict"], data["settings"]["pde_sel_former"]
    ver = [p for p in pde if f"S={sv:g}" in p["roles"]]
    former = [p for p in pde if f"S={sf:g}" in p["roles"]]
    out["pde_verdict"] = _pde_family(ver)
    out["pde_former"] = _pde_family(former)
    out["pde_reproduced"] = bool(ver) and all(c["ok"] for c in out["pde_verdict"])
    out["pde_former_holds"] = bool(former) and all(c["ok"] for c in out["pde_former"])
    errs = [p["linear_error"] for p in pde if p["linear_error"] is not None]
    out["pde_linear_error"] = max(errs) if errs else None
    # the maxima count l*(l*+1)/(2 sqrt 3) is the large-l asymptotics: compared where l* >= 4 (evidence only)
    s2 = [p for p in st["per_beta"] if p["formed"] >= 2 and p["l_star"] >= 4]
    out["s2_ratio_in_band"] = bool(s2) and all(
        RATIO_BAND[0] <= p["count_over_maxima"][0] - p["count_over_maxima"][1]
        and p["count_over_maxima"][0] + p["count_over_maxima"][1] <= RATIO_BAND[1] for p in s2)
    out["s2_not_lstar"] = bool(s2) and any(abs(p["count_over_lstar"][0] - 1) > p["count_over_lstar"][1] for p in s2)
    k = sum(p["closest_first"][0] for p in st["per_beta"])
    m = sum(p["closest_first"][1] for p in st["per_beta"])
    out["closest_first"] = [k, m, *(wilson95(k, m) if m else (np.nan, np.nan))]   # merges pooled: descriptive only
    # merges of one run are not independent draws: the test is on the per-run fractions (each run its own seed),
    # a Student-t interval over the runs with merges after formation
    runs = [np.mean(r["merge_was_closest"]) for r in st["rows"] if r.get("merge_was_closest")]
    out["closest_first_runs"] = [len(runs), *(mean_ci95(runs) if runs else (np.nan, np.nan))]
    out["closest_first_ok"] = len(runs) >= 2 and _lower(out["closest_first_runs"][1:]) >= CLOSEST_MIN
    rows = [r for r in st["rows"] if r.get("plateau_speed_ratio")]
    if len({r["beta"] for r in rows}) >= 2 and len(rows) >= 3:
        out["speed_fit"] = _slope_fit([r["beta"] for r in rows], [r["plateau_speed_ratio"] for r in rows])
        out["speed_grows"] = bool(out["speed_fit"][0] - out["speed_fit"][1] > 0)
    else:
        out["speed_fit"], out["speed_grows"] = (np.nan, np.nan, len(rows)), False
    fs = caps["fit_speed"]
    res = fs["log_ratio_to_points"]
    # equivalence within SPEED_TOL (intersection-union: the whole 95 % interval inside, a false pass <= 2.5 %)
    out["caps_speed_rate"] = (fs["n"] >= 2 and res[0] is not None and np.isfinite(res[0])
                              and abs(res[0]) + _h(res[1]) <= SPEED_TOL)
    out["pair_check"] = max(r["rel_error"] for r in data["pair"]["rows"] if r["beta"] >= 10)
    return out


def _cells_text(cells):
    return "; ".join(f"beta {c['beta']:g} (k* = {c['k_star']}, eps = {c['eps']:.0e}, selectivity "
                     f"{c['selectivity']:.3g}): {_pm(c['ci'], '{:.2f}')}, k* in {c['n_at_kstar']}/{c['runs']} runs"
                     + ("" if c["ok"] else ", MISSES k*")
                     + ("" if c["formed"] == c["runs"] else f" ({c['formed']}/{c['runs']} reached 3x uniform)")
                     for c in cells)


def verdicts(data, fl):
    st, caps, circ = data["staircase"], data["caps"], data["circle"]
    n_seeds = data["settings"]["seeds"]
    rows = []
    pb = st["per_beta"]
    ev = "; ".join(f"beta {p['beta']:g}: energy at merges {_pm(p['frac_energy'], '{:.2f}')} vs log-time "
                   f"{_pm(p['frac_logtime'], '{:.2f}')}, jump / (m_a m_b / beta) per run "
                   f"{_pm(p['jump_ratio_runs'], '{:.2f}')} ({p['n_jump_runs']} runs, {p['n_jumps']} clean of "
                   f"{p['n_jumps_all']} isolated pair merges)" for p in pb)
    rows.append(["energy staircase: plateaus, jumps at merges (Sec. 'beyond metastability', numerics)",
                 "USA on S^{d-1}, beta large, i.i.d. uniform start, time rescaled (tau = e^beta t)",
                 REPRODUCED if fl["staircase"] and fl["jumps"] else REFUTED,
                 f"fresh seeds ({n_seeds} per beta, 1 500 000 + 1000 beta + s). Rules changed after data, disclosed: "
                 f"the window rule after the first full run failed it, and in this referee round the jump test, which "
                 f"on the seeds 1 000 000 + 1000 beta + s refuted the row (per-run jumps 1.06 +- 0.16, 1.11 +- 0.29, "
                 f"1.00 +- 0.00, 1.26 +- 0.73 at beta 4, 8, 16, 32; 25 of 28 merges within 5 % of m_a m_b / beta, three "
                 f"at 1.7-2.1, each with unclustered or sub-threshold mass joining inside its window), is now "
                 f"restricted to clean pair merges (nothing else changes in the tracked mass across the window); "
                 f"hence these seeds, never used before. 95 % t over runs: {ev}; test: at every beta "
                 f"the lower end of the energy share >= {STAIR_MIN_FRACTION:g} and above the log-time share: "
                 f"{fl['staircase']}; per-run mean jump within {JUMP_TOL:g} of m_a m_b / beta (|mean - 1| + "
                 f"half-width, betas {fl['jump_betas']} with >= 3 runs): {fl['jumps']}; every beta must pass every "
                 "test (intersection-union: a false 'reproduced' has probability <= 2.5 %)"])
    f, fp, fb = caps["fit"], caps["fit_point"], caps["fit_beta_tau"]
    loc = ", ".join(f"{b:g}: {_pm(c, '{:.3f}')}" for b, c in zip(caps["local_betas"], caps["local_slopes"]))
    rows.append(["first merge time grows exponentially in beta (metastability theorem)",
                 "k well-separated caps of small radius, separation fixed as beta grows, beta >= beta_0 "
                 "(here k = 3, closest centres 50 deg, USA)",
                 REPRODUCED if fl["caps_exponential"] else REFUTED,
                 f"fresh seeds, one cap draw per seed for every beta ({f['n']} seeds x "
                 f"{len(data['settings']['cap_betas'])} betas; 95 % t over the seeds, {f['n'] - 1} dof); test "
                 f"(fixed after the referee, before these runs): per seed, log tau_1 fitted against beta (exponential) "
                 f"and against log beta (power law): log(RSS_power / RSS_exp) = {_pm(caps['log_rss_ratio'], '{:.2f}')} "
                 f"(> 0: {fl['caps_exp_beats_power']}), and the rate b of log tau_1 = a + b beta + c log beta (any "
                 f"power-law prefactor allowed) = {_pm(caps['rate_joint'], '{:.3f}')} with c = "
                 f"{_pm(caps['prefactor_power'], '{:.2f}')} (b > 0: {fl['caps_rate_beyond_power']}); both lower ends "
                 f"must be > 0 (a false 'reproduced' <= 2.5 %). Descriptive: secant slope d log tau_1 / d beta = "
                 f"{_pm((f['slope'], f['half']), '{:.4f}')} over beta {data['settings']['cap_betas'][0]:g}.."
                 f"{data['settings']['cap_betas'][-1]:g}, local slopes (beta: slope) {loc}, rising toward "
                 f"1 - cos 50 deg = {caps['rate_large_beta']:.4f} (the -log beta prefactor of the two-point asymptotics "
                 f"lowers it by 1/beta); point clusters: "
                 + (f"secant {fp['slope']:.4f}, joint rate {fp['rate_joint']:.3f}" if fp else "n/a") + "; "
                 f"caps secant slope = point clusters' within the interval + {SLOPE_SLACK:g}: "
                 f"{fl['caps_rate_matches_points']}; "
                 f"d log(beta tau_1) / d beta = {_pm((fb['slope'], fb['half']), '{:.4f}')}"])
    fm = st["fit_first_merge"]
    rows.append(["first merge time exponential in beta, from a uniform start",
                 "not the theorem's: the uniform start forms ~l*^2 clusters at spacing ~ beta^(-1/2), not a fixed "
                 "separation", OUTSIDE,
                 f"slope {_pm((fm['slope'], fm['half']), '{:.3f}')} (95 % t, {fm['n']} runs, each its own seed) for "
                 f"beta in {[p['beta'] for p in pb]}"])
    pde = data["pde"]["per_beta"]
    byb = {}
    for q in pde:
        byb.setdefault(q["beta"], []).append(q)
    mapping = "; ".join(f"beta {b:g} (k* = {qs[0]['k_star']}, 1 - s2/s1 = {qs[0]['gap']:.3f}): "
                        + ", ".join(f"{_pm(q['count'], '{:.2f}')} at eps {q['eps']:.0e} (sel. {q['selectivity']:.3g})"
                                    for q in sorted(qs, key=lambda q: -q["eps"])) for b, qs in byb.items())
    lin = fl["pde_linear_error"]
    rows.append(["d = 2: the metastable periodicity is k* = argmax_k sigma_k (Thm. on the linear / quasi-linear "
                 "phase), the mean-field PDE",
                 "mean-field PDE, small perturbation of uniform (eps -> 0), beta fixed",
                 REPRODUCED if fl["pde_reproduced"] else REFUTED,
                 f"CirclePDE (K = {data['settings']['pde_kmax']}), {n_seeds} fresh random perturbations per beta (the "
                 f"same shape at every eps), density peaks at 3x uniform; test (fixed after the referee, before these "
                 f"runs): at eps = min(1e-9, {SELECTIVITY_VERDICT:g}^(-1/(1 - s2/s1))), i.e. linear-phase selectivity "
                 f"eps^-(1 - s2/s1) >= {SELECTIVITY_VERDICT:g} at every beta, the t-interval of the count at level "
                 f"1 - {FWER:g}/{len(fl['pde_verdict'])} (Bonferroni over the betas: a false refutation <= "
                 f"{FWER:.0%}) contains k*: " + _cells_text(fl["pde_verdict"])
                 + f". The former sharpened hypothesis 'selectivity >= {SELECTIVITY_FORMER:g} gives k*' is withdrawn "
                 "(it was fitted after the failures and the earlier data refuted it at beta 5, eps 1e-3: selectivity "
                 f"2.31, 3.40 +- 0.37 vs k* = 3); rerun at selectivity exactly {SELECTIVITY_FORMER:g} on the fresh "
                 f"seeds, the same family test: " + _cells_text(fl["pde_former"])
                 + f" (the interval test passes: {fl['pde_former_holds']}; a wide interval of a scattered count "
                 "passes it, the share of runs at k* is the telling number). All cells, 95 % t: "
                 f"{mapping}. Linear phase against "
                 f"c_k(0) e^(sigma_k t) at k* and the runner-up: largest relative error "
                 + ("n/a" if lin is None else f"{lin:.1e}")
                 + "; every run reached 3x uniform within its horizon: "
                 + str(all(p["reached_3"] == p["runs"] for p in pde))])
    cm = fl["circle_matches"]
    # n = 200 i.i.d. tokens are not the mean-field limit the claim is made for: outside its hypotheses whatever the
    # counts (reproduced-if-match / outside-if-miss could never fail); the match is evidence only
    ev = "; ".join(f"beta {p['beta']:g}: k* = {p['k_star']}, count {_pm(p['count_formed'], '{:.2f}')}"
                   for p in circ["per_beta"])
    holds = [p["beta"] for p, ok in zip(circ["per_beta"], cm) if ok]
    rows.append(["the same with particles", "not the mean-field limit: n = "
                 f"{data['settings']['circle_n']} i.i.d. tokens (white sampling noise of size n^-1/2 in every mode)",
                 OUTSIDE, f"n = {data['settings']['circle_n']} i.i.d. tokens, {n_seeds} seeds, 95 % t: {ev}"
                 + ("; within 0.5 or the interval of k* at every beta" if all(cm) else
                    f" (within 0.5 or the interval of k* for beta in {holds})")
                 + (f"; at beta {fl['circle_floor_only']} only by the half-cluster floor (|mean - k*| <= 0.5, the "
                    "95 % t-interval excludes k*)" if fl["circle_floor_only"] else "")])
    ev = "; ".join(f"beta {p['beta']:g}: l* = {p['l_star']}, count {_pm(p['count_formed'], '{:.1f}')}, / maxima "
                   f"{_pm(p['count_over_maxima'], '{:.2f}')}, / l* {_pm(p['count_over_lstar'], '{:.2f}')}" for p in pb)
    # n = 200 i.i.d. tokens are not the mean-field limit the claim is made for: outside its hypotheses whatever
    # the counts (as the circle-particles row); the band test is evidence only
    rows.append(["S^2: the metastable structure is set by the most unstable degree l*",
                 "not the claim's: the paper states it for the mean-field limit from a small perturbation of uniform "
                 f"(a symmetry class, degree-l* harmonics, not a count); here n = {data['settings']['stair_n']} i.i.d. "
                 "tokens (sampling noise n^-1/2 in every degree)", OUTSIDE,
                 f"particles (n = {data['settings']['stair_n']}, not the limit), count / maxima of a random degree-l* "
                 f"field l*(l*+1)/(2 sqrt 3) in {list(RATIO_BAND)} where l* >= 4: {fl['s2_ratio_in_band']}, count "
                 f"differs from l*: {fl['s2_not_lstar']} ({n_seeds} seeds, 95 % t): " + ev])
    k, m, lo, hi = fl["closest_first"]
    sf = fl["speed_fit"]
    fs = caps["fit_speed"]
    cs = caps["closest_first_seeds"]
    rows.append(["beta -> infinity: only the closest pair of clusters moves (merges come pairwise, closest first)",
                 "beta large, clusters well separated at a fixed geometry, rescaled time (the picture of Sec. "
                 "'beyond metastability')",
                 REPRODUCED if fl["closest_first_ok"] and fl["caps_speed_rate"] and fl["caps_closest_first"]
                 else REFUTED,
                 f"fresh seeds; two tests and a consistency check, all must pass (each an interval that must clear a "
                 f"bound: a false 'reproduced' <= 2.5 %): (1) consistency: caps at tau = 10, speed of the closest pair "
                 f"/ the third cap (up to "
                 f"{_pm((fs['largest_ratio'], None), '{:.2g}')}) against the same ratio of three point clusters at the "
                 f"measured centres and masses, exp(beta (cos a_pair - cos a_far)) x O(1): per seed the mean over betas "
                 f"{fs['betas']} of log(measured / points) = {_pm(fs['log_ratio_to_points'], '{:.4f}')} (95 % t over "
                 f"{fs['n']} seeds), inside +-{SPEED_TOL:g}: {fl['caps_speed_rate']}; the slope in beta "
                 f"{_pm((fs['slope'], fs['half']), '{:.3f}')} vs the points' {_pm((fs['predicted_slope'], fs['predicted_half']), '{:.3f}')} "
                 f"(pair angle {_pm((fs['pair_angle_range'][0], None), '{:.1f}')}-"
                 f"{_pm((fs['pair_angle_range'][1], None), '{:.1f}')} deg at tau = 10, drifting with beta) and "
                 f"cos 50 deg - cos 155 deg = {caps['speed_rate']:.3f} at the initial geometry; (2) the closest caps merge first in "
                 f"every run: {caps['closest_first'][0]}/{caps['closest_first'][1]} (per seed "
                 f"{_pm(cs[1:], '{:.2f}')}); (3) uniform starts, per run (runs independent): fraction of merges after "
                 f"formation that joined the closest pair {fl['closest_first_runs'][1]:.3f} +- "
                 f"{fl['closest_first_runs'][2]:.3f} over {fl['closest_first_runs'][0]} runs (95 % t), lower end >= "
                 f"{CLOSEST_MIN:g}: {fl['closest_first_ok']} (merges pooled, not independent, descriptive: {k}/{m}, "
                 f"Wilson {lo:.2f}-{hi:.2f})"])
    rows.append(["the same speed ratio from a uniform start, on the plateau after formation",
                 "not the picture's fixed geometry: the spacing of the formed clusters shrinks like beta^(-1/2)", OUTSIDE,
                 f"closest pair / median other grows like exp(beta x {sf[0]:.3f} +- {sf[1]:.3f}) ({sf[2]} runs, each "
                 "its own seed, 95 % t)"])
    return rows


# the verdict table before the referee of issue 33 (committed report of b0d1761), for the changes section
BEFORE = [
    ("energy staircase", REPRODUCED, "windows around merges after formation only at first; after the first full run "
     "failed it (beta 8: 0.85 +- 0.09, lower end below 0.8) every merge event opened a window and the same seeds "
     "passed (0.92 +- 0.07); jumps pooled over merges"),
    ("first merge exponential in beta (caps)", SHARPENED, "slope 0.2477 +- 0.0064 over 70 runs pooled (68 dof); "
     "'sharpened' when the caps' slope matched the point clusters', 'reproduced' when it did not (inverted, no "
     "sharpened hypothesis stated); slope > 0, which a power law also passes"),
    ("circle PDE: periodicity k*", SHARPENED, "k* at eps = 1e-9 for beta 2, 5; sharpened hypothesis 'selectivity >= 2' "
     "introduced after beta >= 10 failed, contradicted at beta 5, eps 1e-3 (selectivity 2.31, 3.40 +- 0.37) and "
     "untested at beta >= 10 (selectivity 1.2-1.6 there)"),
    ("closest pair moves first", REPRODUCED, "speed slope 1.500 +- 0.118 over 30 runs pooled; pooled merges and "
     "per-run fractions both required; speeds and the fixed-geometry filter redefined after the first full run"),
]


def _fig_staircase(A, data, out):
    betas = [p["beta"] for p in data["staircase"]["per_beta"]]
    fig, axes = plt.subplots(1, len(betas), figsize=(4.2 * len(betas), 3.6), squeeze=False)
    for ax, b in zip(axes[0], betas):
        tau, E = A[f"tau_{b:g}"], A[f"energy_{b:g}"]
        ax.semilogx(tau, E * b, "k-", lw=1.2, label="beta e^-beta E")
        for tm in A[f"merges_{b:g}"]:
            ax.axvline(tm, color="tab:red", lw=0.6, alpha=0.6)
        ax2 = ax.twinx()
        ax2.step(tau, A[f"clusters_{b:g}"], "tab:blue", where="post", lw=0.8)
        ax2.set_ylabel("clusters", color="tab:blue")
        ax.set(xlabel="tau = e^beta t", title=f"beta = {b:g} (seed 0; red: merges)")
        style_axes(ax)
    axes[0, 0].set_ylabel("beta e^-beta E (plateaus: sum m_k^2 / 2)")
    save_figure(fig, out / "staircase.png")


def _fig_merges(data, out):
    caps, st = data["caps"], data["staircase"]
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    ok = [r for r in caps["rows"] if r["tau_first_merge"] and r["clusters_start"] == 3]
    ax[0].semilogy([r["beta"] for r in ok], [r["tau_first_merge"] for r in ok], "o", ms=3, alpha=0.5,
                   label="3 caps, each seed")
    pts = [p for p in caps["points"] if p["tau_point"]]
    ax[0].semilogy([p["beta"] for p in pts], [p["tau_point"] for p in pts], "k^", label="3 point clusters")
    b = np.array(sorted({r["beta"] for r in ok}))
    f = caps["fit"]
    ax[0].semilogy(b, np.exp(f["intercept"] + f["slope"] * b), "r-", lw=1, label=f"fit: slope {f['slope']:.3f}")
    ax[0].set(xlabel="beta", ylabel="first merge time tau_1", title="well-separated caps (theorem's hypothesis)")
    style_axes(ax[0], legend=7)
    M = [r for r in st["rows"] if r.get("tau_first_merge")]
    ax[1].semilogy([r["beta"] for r in M], [r["tau_formed"] for r in M], "s", ms=3, alpha=0.5, label="formation")
    ax[1].semilogy([r["beta"] for r in M], [r["tau_first_merge"] for r in M], "o", ms=3, alpha=0.5,
                   label="first merge after formation")
    ax[1].set(xlabel="beta", ylabel="tau", title="uniform start on S^2 (outside the hypothesis)")
    style_axes(ax[1], legend=7)
    save_figure(fig, out / "merge_times.png")


def _fig_counts(data, out):
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    c = data["circle"]["per_beta"]
    ax[0].errorbar([p["beta"] for p in c], [p["count_formed"][0] for p in c], [p["count_formed"][1] for p in c],
                   fmt="o", capsize=3, label="count at formation (95 % t)")
    ax[0].plot([p["beta"] for p in c], [p["k_star"] for p in c], "k_", ms=14, mew=2, label="k* = argmax sigma_k")
    ax[0].set(xscale="log", xlabel="beta", ylabel="clusters", title="circle (d = 2)")
    style_axes(ax[0], legend=7)
    s = data["staircase"]["per_beta"]
    ax[1].errorbar([p["beta"] for p in s], [p["count_formed"][0] for p in s], [p["count_formed"][1] for p in s],
                   fmt="o", capsize=3, label="count at formation (95 % t)")
    ax[1].plot([p["beta"] for p in s], [p["l_star"] for p in s], "k_", ms=14, mew=2, label="l*")
    ax[1].plot([p["beta"] for p in s], [p["maxima_pred"] for p in s], "r_", ms=14, mew=2,
               label="l*(l*+1)/(2 sqrt 3): maxima of a degree-l* field")
    ax[1].set(xscale="log", xlabel="beta", ylabel="clusters", title="S^2")
    style_axes(ax[1], legend=7)
    save_figure(fig, out / "counts.png")


def _fig_pair(data, out):
    P = data["pair"]
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    b = [r["beta"] for r in P["rows"]]
    ax[0].semilogy(b, [r["ratio"] for r in P["rows"]], "o", label="4 point clusters: speed ratio")
    ax[0].semilogy(b, [r["predicted"] for r in P["rows"]], "k-", lw=1, label="exp(beta (cos a0 - cos a1)) sin a0/sin a1")
    ax[0].set(xlabel="beta", ylabel="closest pair speed / other", title="consistency check (no randomness)")
    style_axes(ax[0], legend=7)
    rows = [r for r in data["staircase"]["rows"] if r.get("plateau_speed_ratio")]
    ax[1].semilogy([r["beta"] for r in rows], [r["plateau_speed_ratio"] for r in rows], "o", ms=3, alpha=0.6)
    ax[1].set(xlabel="beta", ylabel="closest pair speed / median other", title="uniform start, plateau after formation")
    style_axes(ax[1])
    save_figure(fig, out / "closest_pair.png")


def changes_section(data, fl):
    """The section "Changes after referee (issue 33)": each changed row before and after, why, and whether a rule
    changed after data (then the fresh seeds)."""
    now = {r[0]: r[2] for r in verdicts(data, fl)}
    after = [now["energy staircase: plateaus, jumps at merges (Sec. 'beyond metastability', numerics)"],
             now["first merge time grows exponentially in beta (metastability theorem)"],
             now["d = 2: the metastable periodicity is k* = argmax_k sigma_k (Thm. on the linear / quasi-linear "
                 "phase), the mean-field PDE"],
             now["beta -> infinity: only the closest pair of clusters moves (merges come pairwise, closest first)"]]
    why = [
        "the window rule had been changed after the first full run failed it; jump ratios are now one per run "
        "(merges of a run are not independent). On fresh seeds 1 000 000 + 1000 beta + s this rule REFUTED the row "
        "(per-run jump 1.26 +- 0.73 at beta 32, 1.11 +- 0.29 at 8: three merges at 1.7-2.1 had untracked mass joining "
        "inside their window); the jump test was then restricted to clean pair merges and the verdict rerun on "
        "seeds 1 500 000 + 1000 beta + s. Rules changed after data: yes (twice), fresh seeds: yes",
        "the verdict logic was inverted and 'slope > 0' cannot tell an exponential from a power law; now per-seed "
        "fits in beta vs log beta and the rate of a + b beta + c log beta, the seed the unit (one cap draw per seed, "
        "2 500 000 + s, shared by the betas). Rule changed after data: yes (after the referee), fresh seeds: yes",
        f"the 'selectivity >= 2' hypothesis was fitted after the failures and contradicted by its own data; now the "
        f"claim itself (eps -> 0) at selectivity >= {SELECTIVITY_VERDICT:g} for every beta (eps down to 1e-100, "
        "carried exactly), Bonferroni over the betas; selectivity 2 rerun at beta >= 10. Rule changed after data: "
        "yes, fresh seeds: yes (4 000 000 + 1000 beta + s)",
        "pooled merges and pooled runs are not independent units: per-run fractions and per-seed statistics decide; "
        "the pooled speed slope (1.500 +- 0.118) hid that the caps leave the initial geometry by tau = 10 (the quick "
        "rerun with seeds as the unit gave 1.484 +- 0.006 vs 1.549), so the ratio is now compared with point "
        "clusters at the measured geometry (SPEED_TOL 10 %). Rule changed after data: yes (the speed test after this "
        "round's quick run), fresh seeds: yes (caps 2 500 000 + s, never run)",
    ]
    rows = [[name, f"**{v0}** ({ev})", f"**{v1}**", w] for (name, v0, ev), v1, w in zip(BEFORE, after, why)]
    rows.append(["other rows (uniform-start merge time, circle particles, S^2 counts, uniform-start speeds)",
                 f"**{OUTSIDE}**", f"**{OUTSIDE}**", "unchanged verdicts; their numbers now come from the fresh seeds "
                 "(3 000 000 + 1000 beta + s for the circle particles)"])
    return "\n".join(["## Changes after referee (issue 33)", "",
                      markdown_table(["row", "before", "after", "why / rule changed after data / seeds"], rows)])


def report(data_dir: Path, out_dir: Path | None = None) -> Path:
    out, A, data = open_study_data(data_dir, out_dir)
    fl = flags(data)
    _fig_staircase(A, data, out)
    _fig_merges(data, out)
    _fig_counts(data, out)
    _fig_pair(data, out)
    st, caps, circ, s = data["staircase"], data["caps"], data["circle"], data["settings"]
    claims = []
    for p in st["per_beta"]:
        claims.append([f"S^2 beta = {p['beta']:g}: staircase, formation, first merge",
                       f"{p['formed']}/{p['runs']} formed; log tau_formed {_pm(p['log_tau_formed'], '{:.2f}')}, "
                       f"log tau_1 {_pm(p['log_tau_first_merge'], '{:.2f}')}; energy at merges "
                       f"{_pm(p['frac_energy'], '{:.3f}')} vs log-time {_pm(p['frac_logtime'], '{:.3f}')}; "
                       f"energy monotone: {p['energy_monotone']} (largest relative decrease {p['max_rel_decrease']:.1e})",
                       "staircase" if fl["staircase"] else "no staircase"])
    for p in caps["per_beta"]:
        pt = next((q["tau_point"] for q in caps["points"] if q["beta"] == p["beta"]), None)
        claims.append([f"caps beta = {p['beta']:g}: first merge", f"log tau_1 = {_pm(p['log_tau'], '{:.3f}')} "
                       f"({p['n']} seeds, 95 % t); point clusters {np.log(pt) if pt else float('nan'):.3f}",
                       "see verdicts"])
    for p in data["pde"]["per_beta"]:
        R = [r for r in data["pde"]["rows"] if r["beta"] == p["beta"] and r["eps"] == p["eps"]]
        claims.append([f"circle PDE beta = {p['beta']:g}, eps = {p['eps']:.1e} ({', '.join(p['roles'])}; selectivity "
                       f"{p['selectivity']:.3g}): peaks vs k* = {p['k_star']}",
                       f"{_pm(p['count'], '{:.2f}')}, |count - k*| {_pm(p['abs_dev'], '{:.2f}')} ({p['reached_3']}/"
                       f"{p['runs']} reached 3x uniform, at sigma_max t = {min(r['t_reach_sigma'] for r in R):.1f}-"
                       f"{max(r['t_reach_sigma'] for r in R):.1f} vs ln(1/eps) = {np.log(1 / p['eps']):.1f}; Voronoi "
                       f"masses sum to the mass to {max(r['mass_error'] for r in R):.0e})", "see verdicts"])
    for p in circ["per_beta"]:
        claims.append([f"circle beta = {p['beta']:g}: count at formation vs k* = {p['k_star']}",
                       f"{_pm(p['count_formed'], '{:.2f}')} at formation, {_pm(p['count_3x'], '{:.2f}')} at 3x the "
                       f"formation time ({p['formed']}/{p['runs']} formed, 95 % t)", "see verdicts"])
    a1 = s["pair_angles"][1]
    claims.append(["static 4 point clusters: speed ratio = exp(beta (cos a0 - cos a1)) sin a0 / sin a1 (large beta)",
                   "relative error by beta: " + ", ".join(f"{r['beta']:g}: {r['rel_error']:.1e}" for r in data["pair"]["rows"])
                   + f" (max {fl['pair_check']:.1e} for beta >= 10); the corrections exp(-beta (1 - cos a)) fall with "
                   f"beta, the rise at the largest beta is round-off: the velocity's self term e^beta x_i leaves the "
                   f"tangent projection to eps e^(beta (1 - cos a1)) = "
                   f"{np.finfo(float).eps * np.exp(max(r['beta'] for r in data['pair']['rows']) * (1 - np.cos(a1))):.1e}"
                   f" of the slow pair's speed; fitted slope {data['pair']['slope']:.4f} vs "
                   f"{data['pair']['predicted_slope']:.4f}", "consistency check (the velocity formula)"])
    intro = f"""
Tokens on S^2 (and the circle) under one mean-normalized exp head `M = V = I`: the USA model of {GKPR},
the gradient ascent of `E = (1/(2 beta n^2)) sum exp(beta <x_i, x_j>)` (energy non-decreasing along every run:
checked).  Times are `tau = e^beta t`; clusters are tracked along each trajectory with
`meanfield.analysis.cluster_tracking.track_particle_clusters` (connected components of `<x_i, x_j> >= cos 0.05`,
`cos 0.005` on the circle; clusters of mass >= {s['min_mass']}; identities by token membership; merge events with
their frames); a run has *formed* when at most 10 % of the mass is outside clusters.

Claims (as the papers state them, read via their abstracts and summaries): {GKPR} prove that particles started
in k well-separated caps stay trapped near k clusters for a time exponentially long in beta before coalescing
(also in the mean-field regime), and illustrate beyond metastability that under a time rescaling the energy has a
staircase profile (saddle-to-saddle).  {BPA} study the mean-field PDE near the uniform state: the solution stays
near a metastable manifold whose structure (on the circle the periodicity) is the index maximizing a rescaling of
Gegenbauer polynomials, i.e. the most unstable mode of the linearization (here `sigma_l` of
`meanfield.analysis.stability.growth_rate`, d = 2 and 3).  Seeds: {s['seeds']} per beta in every random part.
"""
    chg = changes_section(data, fl)
    notes = f"""
* Staircase test: after formation, the energy increments between frames are split into those within
  +-{s['window_dec']} decades of tau of a merge event and the rest; the staircase holds if, at every beta, the lower
  95 % bound of the fraction of energy gained in the windows is >= {STAIR_MIN_FRACTION} and exceeds the fraction of
  log-time the windows cover.  The jump of an isolated pair merge is compared with the point-cluster value
  `m_a m_b / beta` (plateau energy `sum_k m_k^2 / (2 beta)` in `e^-beta E` units), one mean ratio per run, over
  clean merges: across the window the unclustered mass is unchanged, the child's mass is `m_a + m_b` and
  `sum_k m_k^2` changes by exactly `2 m_a m_b` (a merge that absorbs stragglers or a sub-threshold cluster in its
  window gains more than `m_a m_b / beta`: the pair prediction does not describe it).
* First merge, caps: `{s['cap_n']}` tokens per cap (vMF kappa = {s['cap_kappa']:g}), centres at 50 deg (closest
  pair) and 155 deg; one draw per seed used at every beta; frames log-spaced (relative step
  {caps['rows'][0]['frame_dt_rel']:.3f}), so each merge time is resolved to that fraction.  Point clusters: three
  weighted tokens at the centres, the same detection.  The two-point asymptotics
  `tau_1 ~ e^(beta (1 - cos a)) / (beta sin^2 a (m_a + m_b))` is exponential with a `1/beta` prefactor: the joint fit
  `a + b beta + c log beta` measures b with c free (the asymptotics: b -> 1 - cos a, c = -1).  A pure power law
  `tau ~ beta^p` would give b ~ 0 and a smaller residual for the fit in log beta than in beta.
* Uniform start: first merge = first merge event after formation.  Its slope in beta is not the theorem's: the
  clusters' spacing is set by `l* ~ sqrt(2 beta)`, so `beta (1 - cos spacing)` stays O(1).
* Circle counts: k* from `growth_rate(k, [1], beta, d=2)`; n = {s['circle_n']} i.i.d. tokens (not the mean-field
  limit: the white sampling noise excites all modes).  S^2 counts compare with studies/linear_stability, which
  found the count ~ maxima of a random degree-l* field at n = 2000.
* Closest pair: at the frame before each merge (after formation, >= 3 clusters), the merging pair is compared
  with the pair of centres with the largest inner product.  Plateau speeds are centre-of-mass speeds of the pull
  of the tokens outside each cluster (the velocity splits exactly by source) at the geometric middle between
  formation and the first merge; for the caps at tau = 10 while the pair is within 1 deg of 50 deg.
* Circle PDE: peaks above the uniform level at the first frame where the density reaches 3 (the pattern formed,
  still resolved: the monitor stops the run when the spectral tail exceeds 1e-3, which happens soon after).  Tiny
  eps (down to {min(p['eps'] for p in data['pde']['per_beta']):.0e}) are exact in double precision: the
  perturbation is carried by its own Fourier coefficients, the mean mode's tendency is exactly 0 and the products
  are formed from O(eps) values, so round-off is relative to eps; the earlier limit "eps >> 1e-16" was not a
  limit of the scheme.  The integrator's atol follows the perturbation (1e-8 of its size, segments of the linear
  phase), and the linear phase is checked against `c_k(0) e^(sigma_k t)`.
* Revisions before the referee (disclosed in earlier reports; all decided after data, hence all random parts are
  now rerun on fresh seeds): (1) staircase windows around every merge event (was: merges after formation only);
  (2) cluster speeds split by source, caps speeds at a fixed geometry; (3) the S^2 band where l* >= 4; (4)-(6) the
  circle claim tested by the PDE (particles outside), the half-cluster floor removed, eps down to 1e-9.
* This referee round, disclosed: in its first quick run the selectivity-2 cells were capped at eps = 1e-9 by a
  coding slip (beta 5 then ran at selectivity 12, not 2); fixed before any full run (evidence cells, not the
  verdict's).  The first full run of the round (staircase seeds 1 000 000 + 1000 beta + s) gave the same caps,
  PDE and circle numbers as the committed one (same seeds, deterministic) and the refuted staircase quoted above.
* Flags: {({k: v for k, v in fl.items() if k not in ('speed_fit', 'pde_verdict', 'pde_former')})}
* Wall time (s): {data['summary']['wall_s']}.

{chg}
"""
    figures = [("staircase.png", "Energy (beta e^-beta E) and cluster count along one trajectory per beta; red: merges"),
               ("merge_times.png", "First merge times against beta: caps (left), uniform start (right)"),
               ("counts.png", "Cluster counts at formation against the most unstable mode"),
               ("closest_pair.png", "Speed of the closest pair against the others")]
    return write_report(out / "report.md", "Metastability: staircase, merge times, cluster counts", intro, claims,
                        figures, notes, verdicts=verdicts(data, fl))
