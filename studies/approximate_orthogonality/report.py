"""Figures and report.md for the approximate-orthogonality study (reads data.npz / data.json)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from studies._common import (  # noqa: E402
    OUTSIDE,
    REFUTED,
    REPRODUCED,
    SHARPENED,
    fit_slope,
    open_study_data,
    save_figure,
    style_axes,
    write_report,
)

PASS, FAIL = "reproduced", "NOT reproduced"
READING_LABEL = {"flat": "flat (self-term margin)", "exact": "sphere, Condition 8 exact reading",
                 "norm_bounded": "sphere, Condition 8 norm-bounded reading"}
C_TOL = 1e-6   # C* = m*/delta <= 1 is Cauchy-Schwarz; SLSQP feasibility (1e-7 of the rate scale) moves m* by less


def _pm(x, fmt=".3f"):
    m, h = x
    if m is None or not np.isfinite(m):
        return "n/a"
    return f"{m:{fmt}} +- {h:{fmt}}" if h is not None and np.isfinite(h) else f"{m:{fmt}}"


def _ci_arrays(rows):
    m = np.array([np.nan if r[0] is None else r[0] for r in rows], float)
    h = np.array([np.nan if r[1] is None else r[1] for r in rows], float)
    return m, np.nan_to_num(h)


def _figure_adversarial(z, s, out):
    a = s["adversarial"]
    dl = z["adv_deltas"]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    ax = axes[0, 0]
    for r, mk in (("flat", "o"), ("exact", "s"), ("norm_bounded", "^")):
        M = z[f"adv_{r}_m_star"]
        ax.loglog(dl, np.nanmax(M, axis=0), mk + "-", label=f"{READING_LABEL[r]}: best of all seeds")
        m, h = _ci_arrays([[np.nanmean(M[:, j]) if np.isfinite(M[:, j]).any() else np.nan, 0] for j in range(len(dl))])
        ax.loglog(dl, m, mk + ":", color=ax.lines[-1].get_color(), alpha=0.6, label="   mean over seeds")
    ax.loglog(dl, dl, "k--", lw=1, label="m = delta (Cauchy-Schwarz, C = 1)")
    ax.set(xlabel="delta = |M_h' M_h|_op", ylabel="critical margin m*(delta)",
           title="largest margin with dE_h/dt <= 0 (adversarial)")
    bx = axes[0, 1]
    for r, mk in (("flat", "o"), ("exact", "s"), ("norm_bounded", "^")):
        m, h = _ci_arrays(a[r]["C_ci"])
        bx.errorbar(dl, m, yerr=h, fmt=mk + "-", capsize=3, label=f"{READING_LABEL[r]} (mean, 95 % CI over seeds)")
    bx.axhline(1, color="k", ls="--", lw=1, label="C = 1 (proved bound)")
    bx.set_xscale("log")
    bx.set(xlabel="delta", ylabel="C* = m*/delta", ylim=(0, 1.1), title="sharp constant in 'margin > C delta => monotone'")
    cx = axes[1, 0]
    rt = a["ratio"]
    m, h = _ci_arrays(rt["C_ci"])
    gap = 1 - z["adv_ratio_min_ratio"]
    cx.loglog(dl, np.nanmax(gap, axis=0), "o-", label="1 - min (dE_h/dt / self term), best of all seeds")
    cx.loglog(dl, dl / rt["margin"], "k--", lw=1, label=f"bound delta / m0 (m0 = {rt['margin']:g})")
    cx.set(xlabel="delta", ylabel="1 - min ratio", title=f"flat: worst rate / self term at margin m0 = {rt['margin']:g}")
    dx = axes[1, 1]
    names = [("flat", "m* flat"), ("exact", "m* exact"), ("norm_bounded", "m* norm-b."), ("ratio", "1-min ratio flat")]
    for k, (r, lab) in enumerate(names):
        sl = z[f"adv_{r}_slopes"]
        dx.plot(np.full(sl.size, k) + np.linspace(-0.15, 0.15, sl.size), sl, "o", ms=4, alpha=0.7)
        mm, hh = a[r]["slope_ci"]
        if mm is not None and np.isfinite(mm):
            dx.errorbar([k + 0.3], [mm], yerr=[0.0 if hh is None else np.nan_to_num(hh)], fmt="ks", capsize=4)
    dx.axhline(1, color="k", lw=0.8)
    dx.set_xticks(range(len(names)), [lab for _, lab in names])
    dx.set(ylabel="log-log slope against delta", title="per-seed slopes (dots) and mean with 95 % CI (squares)")
    style_axes(axes[:, 0], legend=7, which="both")
    style_axes([bx], legend=7)
    style_axes([dx])
    adv = s["adv_settings"]
    for axx in (ax, bx, cx):
        axx.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    fig.suptitle(f"Adversarial search: 2 rank-2 heads (indefinite allowed), d = {adv['d']}, n = {adv['n']}, "
                 f"beta = {adv['beta']}, {len(s['seeds'])} seeds x ({adv['restarts']} random + 2 warm) SLSQP starts")
    save_figure(fig, out / "adversarial.png")


def _figure_tokens(z, s, out):
    cfg = s["config"]
    dl, ang = z["deltas"], z["angles"]
    pos = dl > 0
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    f = s["flat"]
    for key, mk, lab in (("coupling_initial", "o", "vMF tokens, t = 0"), ("coupling_uniform", "^", "uniform tokens, t = 0"),
                         ("coupling_max", "s", "vMF, flat, max over t")):
        geom = "flat"
        Y = z[f"{geom}_{key}"][:, pos]
        name = {"coupling_initial": "initial", "coupling_uniform": "uniform", "coupling_max": "traj"}[key]
        axes[0, 0].loglog(dl[pos], np.median(Y, axis=0), mk + "-",
                          label=f"{lab}: median of {Y.shape[0]} draws (slope {_pm(f['slope_' + name], '.2f')})")
        axes[0, 0].fill_between(dl[pos], Y.min(axis=0), Y.max(axis=0), alpha=0.15)
    axes[0, 0].loglog(dl[pos], dl[pos] * np.median(z["flat_coupling_initial"][:, pos][:, 0]) / dl[pos][0], "k:", label="slope 1")
    axes[0, 0].set(xlabel="delta = |M_h' M_h|_op", ylabel="max_h!=h' |sum_i w_i <u_i^h, u_i^h'>|",
                   title="extra coupling between heads (band: min-max over draws)")
    for geom, mk in (("flat", "o"), ("sphere", "s")):
        m, h = _ci_arrays(s[geom]["frac_head_times_nonneg_ci"])
        axes[0, 1].errorbar(ang, m, yerr=h, fmt=mk + "-", capsize=3, label=f"{geom}: (time, head) with dE_h/dt >= 0")
        m, h = _ci_arrays(s[geom]["min_rate_over_self_ci"])
        axes[1, 0].errorbar(ang, m, yerr=h, fmt=mk + "-", capsize=3, label=geom)
    axes[0, 1].set(xlabel="principal angle (degrees)", ylabel="fraction (mean, 95 % CI)", ylim=(-0.03, 1.03),
                   title="per-head monotonicity along the flow (vMF starts)")
    axes[1, 0].axhline(0, color="k", lw=0.8)
    axes[1, 0].set(xlabel="principal angle (degrees)", ylabel="min over (t, h) of dE_h/dt / self term (mean, 95 % CI)",
                   title="worst per-head rate along the flow, normalized by the self term")
    for geom in ("flat", "sphere"):
        t, R = z[f"{geom}_first_t"], z[f"{geom}_first_rate"]
        for h in range(R.shape[1]):
            axes[1, 1].plot(t / t[-1], R[:, h] / np.abs(R).max(), label=f"{geom}, head {h}")
    axes[1, 1].axhline(0, color="k", lw=0.8)
    axes[1, 1].set(xlabel="t / t_final", ylabel="dE_h/dt / max|rate|", title=f"per-head rates at {ang[0]:g} degrees (first seed)")
    style_axes(axes, legend=7)
    fig.suptitle(f"approx_orthogonal_heads: d={cfg['d']}, H={cfg['n_heads']}, rank={cfg['rank']}, alpha={cfg['alpha']}, "
                 f"beta={cfg['beta']}, n={cfg['n']}, mean normalization, {len(s['seeds'])} token draws")
    save_figure(fig, out / "approx_orthogonality.png")


def _c_txt(a, r, dl):
    return ", ".join(f"{d:g}: {_pm(c, '.2f')}" for d, c in zip(dl, a[r]["C_ci"]))


def _best(z, r):
    """Best (largest) m*/delta over seeds at each delta, and the log-log slope of the best m* against delta."""
    C = z[f"adv_{r}_C"]
    ok = np.isfinite(C).any(axis=0)
    best = np.full(C.shape[1], np.nan)
    best[ok] = np.nanmax(C[:, ok], axis=0)
    dl = z["adv_deltas"]
    return best, fit_slope(dl, best * dl, log_x=True, log_y=True, drop_invalid=True).slope


def _range(x):
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    return f"{x.min():.2f}-{x.max():.2f}" if x.size else "n/a"


def _best_ratio(z, m0):
    """Best over seeds of (1 - min rate/self) m0 / delta at each delta."""
    g = (1 - z["adv_ratio_min_ratio"]) * m0 / z["adv_deltas"]
    return np.array([np.nanmax(c) if np.isfinite(c).any() else np.nan for c in g.T])


def _positive_txt(z):
    pos = all((_best(z, r)[0] > 0).all() for r in ("exact", "norm_bounded"))
    return ("The best m* is positive at every searched delta in both spherical readings, so" if pos else
            "The best m* is not positive at every searched delta (see the table); where it is,")


def _shape_txt(z):
    """What the best-over-seeds curves say about the order in delta (data-driven wording)."""
    parts = []
    dl = z["adv_deltas"]
    for r, name in (("flat", "flat"), ("exact", "exact reading"), ("norm_bounded", "norm-bounded reading")):
        best, slope = _best(z, r)
        drops = [(i, j) for i in range(len(dl)) for j in range(i + 1, len(dl))
                 if np.isfinite(best[i]) and np.isfinite(best[j]) and best[i] > best[j] + 0.1]
        if not np.isfinite(slope):
            parts.append(f"{name}: no slope (too few positive m*)")
        elif abs(slope - 1) <= 0.3:
            parts.append(f"{name}: m* linear in delta (slope {slope:.2f}), C* within {_range(best)} at every delta: "
                         "the constant 1 of the proof is close to sharp")
        elif drops:
            i, j = drops[0]
            parts.append(f"{name}: the best C* is not monotone in delta ({best[i]:.2f} at {dl[i]:g} but {best[j]:.2f} "
                         f"at {dl[j]:g}), so the search misses optima at some deltas and the slope of the best m* "
                         f"({slope:.2f}) describes the search, not the supremum; the largest C* found, "
                         f"{np.nanmax(best):.2f}, is the lower bound that stands")
        else:
            parts.append(f"{name}: m* ~ delta^{slope:.2f} over the searched range (C* {_range(best)}): the largest "
                         "decreasing margin found grows faster than linearly, so the proved O(delta) threshold is "
                         "approached only at the larger deltas, or the search misses rarer optima at the small ones")
    return "By reading: " + "; ".join(parts) + "."


def _best_txt(z, r):
    best, slope = _best(z, r)
    return ("best over seeds m*/delta at delta = " + ", ".join(f"{d:g}: {c:.2f}" for d, c in zip(z["adv_deltas"], best))
            + f" (slope of the best m* against delta {slope:.2f})")


def report(data_dir: Path, out_dir: Path | None = None) -> Path:
    out, z, s = open_study_data(data_dir, out_dir)
    _figure_adversarial(z, s, out)
    _figure_tokens(z, s, out)
    f, sp, a = s["flat"], s["sphere"], s["adversarial"]
    a0 = s["small_angle"]
    ns = len(s["seeds"])
    adv = s["adv_settings"]
    dl = adv["deltas"]
    ck = a["checks"]
    bound_ok = max(f["max_bound_ratio"], sp["max_bound_ratio"]) <= 1 + 1e-12
    c_ok = {r: a[r]["C_max"] is not None and a[r]["C_max"] <= 1 + C_TOL for r in ("flat", "exact", "norm_bounded")}
    rt = a["ratio"]
    ratio_ok = all(q is None or q >= 1 - d / rt["margin"] - C_TOL for q, d in zip(rt["min_ratio_best"], dl))
    raw = a["raw_sphere_delta0"]
    claims = [
        ["extra coupling <u^h, u^h'> = O(delta) (Thm 39): bounded by delta sum_i w_i |A_i^h||A_i^h'|",
         f"max coupling / bound {max(f['max_bound_ratio'], sp['max_bound_ratio']):.3f} over all deltas and {ns} draws "
         "(uniform and vMF tokens)", PASS if bound_ok else FAIL],
        [f"coupling linear in delta (log-log slope 1), angles >= {a0:g} deg",
         f"per-draw slopes, mean +- 95 % CI over {ns} draws: vMF t=0 {_pm(f['slope_initial_small'])}, vMF max over t "
         f"(flat) {_pm(f['slope_traj_small'])}, (sphere) {_pm(sp['slope_traj_small'])}, uniform t=0 "
         f"{_pm(f['slope_uniform_small'])}",
         PASS if abs(f["slope_initial_small"][0] - 1) < 0.15 else FAIL],
        ["... over the whole trained-head range 70-90 deg",
         f"vMF t=0 {_pm(f['slope_initial'])}, uniform t=0 {_pm(f['slope_uniform'])} (the uniform draws scatter: "
         "leading coefficient A_h . A_h' of either sign, see notes)", "linear with a c^(3/2) correction"],
        ["exact orthogonality (90 degrees): no coupling",
         f"max coupling at delta=0: flat {f['coupling_at_zero']:.1e}, sphere {sp['coupling_at_zero']:.1e}",
         PASS if max(f["coupling_at_zero"], sp["coupling_at_zero"]) < 1e-14 else FAIL],
        ["adversarial, flat: self-term margin m > delta implies dE_h/dt >= 0",
         f"{_best_txt(z, 'flat')}; per seed, mean +- 95 % CI over {ns} seeds: {_c_txt(a, 'flat', dl)}, slope "
         f"{_pm(a['flat']['slope_ci'])}; largest {a['flat']['C_max']:.3f} <= 1", PASS if c_ok["flat"] else FAIL],
        [f"adversarial, flat: min dE_h/dt / self term >= 1 - delta/m0 at margin m0 = {rt['margin']:g}",
         "best minima " + ", ".join(f"{d:g}: {q:.4f}" for d, q in zip(dl, rt["min_ratio_best"]) if q is not None)
         + f"; (1 - min) m0/delta {', '.join(_pm(c, '.2f') for c in rt['C_ci'])}; slope of log(1 - min) "
         f"{_pm(rt['slope_ci'])}", PASS if ratio_ok else FAIL],
        ["adversarial, sphere: Condition 8 (exact) with margin m > delta implies dE_h/dt >= 0",
         f"{_best_txt(z, 'exact')}; per seed (mean +- 95 % CI): {_c_txt(a, 'exact', dl)}, slope "
         f"{_pm(a['exact']['slope_ci'])}; largest {a['exact']['C_max']:.3f} <= 1", PASS if c_ok["exact"] else FAIL],
        ["adversarial, sphere: Condition 8 (norm-bounded) with margin m > delta implies dE_h/dt >= 0",
         f"{_best_txt(z, 'norm_bounded')}; per seed (mean +- 95 % CI): {_c_txt(a, 'norm_bounded', dl)}, slope "
         f"{_pm(a['norm_bounded']['slope_ci'])}; largest {a['norm_bounded']['C_max']:.3f} <= 1",
         PASS if c_ok["norm_bounded"] else FAIL],
        ["sphere without a margin: per-head monotone at delta = 0?",
         f"unrestricted minimum of dE_h/dt / sum|terms| at delta = 0: {_pm(raw[:2])} ({ns} seeds), lowest {raw[2]:.4f}; "
         f"along vMF trajectories min dE_h/dt / self term {sp['min_rate_over_self']:.2f}", "fails (radial shadows, Thm 17)"],
        ["own rate and margin code = meanfield (ParticleSystem.energy_rates, diagnostics.radial_dominance)",
         f"{ck['count']} optimal configurations: rate difference <= {ck['max_rate_diff']:.1e} of the rate scale, margins "
         f"<= {ck['max_margin_diff']:.1e}; |M_2 M_1|_op / delta <= {ck['max_op_delta_ratio']:.6f}",
         PASS if ck["max_rate_diff"] < 1e-9 and ck["max_margin_diff"] < 1e-9 and ck["max_op_delta_ratio"] <= 1 + 1e-9 else FAIL],
    ]
    hyp = ("symmetric, value-aligned (V_h = M_h), exp kernel, mean normalization, |M_h' M_h|_op <= delta "
           "(2 rank-2 heads, indefinite allowed)")
    verdicts = [
        ["Thm 39: extra coupling <u^h, u^h'> = O(delta)", hyp + "; flat and sphere", REPRODUCED if bound_ok else REFUTED,
         f"coupling / (delta sum_i w_i |A^h||A^h'|) <= {max(f['max_bound_ratio'], sp['max_bound_ratio']):.2f} over {ns} "
         f"draws x {len(s['angles'])} angles; slope near orthogonality (vMF) {_pm(f['slope_initial_small'])} "
         f"(95 % CI, {ns} draws)"],
        ["Thm 39 (flat): per-head monotone when delta is small against the self term", hyp + "; flat; reading: self term > "
         "C delta sum_i w_i |A_i^h||A_i^h'|", REPRODUCED if c_ok["flat"] and ratio_ok else REFUTED,
         f"adversarial ({ns} seeds x ({adv['restarts']} random + 2 warm) SLSQP starts per delta): no decreasing "
         f"configuration has margin above delta (largest m*/delta {a['flat']['C_max']:.2f}); best m*/delta per delta "
         f"{_range(_best(z, 'flat')[0])}; at fixed margin m0 = {rt['margin']:g} the worst rate / self term is "
         f"1 - C_r delta / m0 with C_r {_range(_best_ratio(z, rt['margin']))} and slope of log(1 - min) vs log delta "
         f"{_pm(rt['slope_ci'], '.2f')} (95 % CI over seeds). Without a margin the ratio to the self term is "
         "unbounded below"],
        ["Thm 39 on the sphere: per-head monotone under approximate orthogonality",
         hyp + "; sphere; Condition 8 with a margin > C delta (exact or norm-bounded reading)",
         SHARPENED if c_ok["exact"] and c_ok["norm_bounded"] else REFUTED,
         f"Condition 8 alone does not suffice for delta > 0: decreasing configurations reach margins of C* delta with "
         f"C* (best over {ns} seeds) {_range(_best(z, 'exact')[0])} (exact reading) and "
         f"{_range(_best(z, 'norm_bounded')[0])} (norm-bounded) over delta = {dl[0]:g}..{dl[-1]:g}; margin > delta "
         f"(C = 1) suffices and is never violated (largest {max(a['exact']['C_max'], a['norm_bounded']['C_max']):.2f})"],
        ["(same, without a radial-dominance margin)", hyp + "; sphere, no Condition 8", OUTSIDE,
         f"per-head rates negative already at delta = 0: unrestricted min of dE_h/dt / sum|terms| {_pm(raw[:2], '.4f')} "
         "(the radial shadows of Thm 17)"],
    ]
    notes = _notes(s, z)
    return write_report(out / "report.md", "Approximately orthogonal heads (paper Thm 39)",
                        "Per-head energy monotonicity when head subspaces are only approximately orthogonal "
                        "(|M_h' M_h|_op <= delta): an adversarial search over tokens and indefinite heads for the "
                        "smallest margin that guarantees monotonicity, flat and on the sphere, and the coupling at "
                        "random tokens along trajectories.", claims,
                        [("adversarial.png", "Adversarial critical margins m*(delta), the sharp constant C* = m*/delta, "
                                             "the flat rate/self minimum, per-seed slopes"),
                         ("approx_orthogonality.png", "Coupling against delta over token draws; per-head monotonicity "
                                                      "along trajectories against the angle")],
                        notes, verdicts=verdicts)


def _notes(s, z):
    adv = s["adv_settings"]
    a = s["adversarial"]
    dl = adv["deltas"]
    rows = "\n".join(
        f"| {d:g} | " + " | ".join(
            f"{np.nanmax(z[f'adv_{r}_m_star'][:, j]):.4g} ({int(np.isfinite(z[f'adv_{r}_m_star'][:, j]).sum())}/"
            f"{z[f'adv_{r}_m_star'].shape[0]})" if np.isfinite(z[f"adv_{r}_m_star"][:, j]).any() else "none"
            for r in ("flat", "exact", "norm_bounded")) + f" | {np.nanmin(z['adv_ratio_min_ratio'][:, j]):.4f} |"
        for j, d in enumerate(dl))
    return f"""
**Reading of Thm 39.** The seed summary says only that per-head monotonicity is robust to approximate
orthogonality, |M_h' M_h|_op <= delta, "when the perturbation is small relative to the self-energy"; it
gives no constant and no spherical form. For symmetric value-aligned heads <u_i^h, u_i^h'> =
<A_i^h, M_h M_h' A_i^h'> (A_i^h = sum_j w_j exp(beta <x_i, M_h x_j>) x_j), so |<u^h, u^h'>| <= delta |A^h| |A^h'|
token by token. We read "small relative to the self-energy" as a margin in these units:
flat, m = sum_i w_i |u_i^h|^2 / sum_i w_i |A_i^h||A_i^h'|; sphere, m = sum_i w_i mu_i / sum_i w_i |A_i^h||A_i^h'| with
mu_i the Condition 8 margin of token i (exact: |P u_i^h|^2 - a_i^h a_i^h'; norm-bounded: |P u_i^h|^2 - |a_i^h| |u_i^h'|).
Then dE_h/dt >= (m - delta) sum_i w_i |A_i^h||A_i^h'|, so "margin > C delta implies monotone" holds with C = 1. The
token-summed margin is a weaker hypothesis than the same margin at every token (it is a weighted mean of the
per-token margins), so the statement tested here is the stronger one. Why a margin at all: without one, tokens
almost orthogonal to head h's subspace make the self term vanish quadratically and the coupling only linearly,
so min dE_h/dt / self term is unbounded below for every delta > 0 (tokens at distance eps from the complement
of head h's range: self term O(eps^2), coupling O(delta eps) of either sign); raw monotonicity on the sphere fails even at delta = 0 (radial shadows).

**Adversarial search.** Two heads M_h = alpha U_h B_h U_h^T, rank 2, |B_h| < 1 with eigenvalues of either sign
(indefinite heads), U_1^T U_2 = diag(c_1, c_2) with |c_k| <= delta (every pair of rank-2 subspaces, up to a
rotation absorbed by the tokens), alpha = 1, beta = {adv['beta']:g}, n = {adv['n']} tokens free on S^{adv['d'] - 1}
(flat rates are evaluated at such configurations). For each delta and seed, {adv['restarts']} SLSQP runs
(maxiter {adv['maxiter']}, central finite-difference Jacobians from one batched evaluation) from random starts
maximise the margin subject to dE_h/dt <= 0 (feasible: rate <= {adv['feas_tol']:g} x the sum of the absolute values
of its terms); the seed's m* is the best feasible end point. Seeds {s['seeds'][0]}..{s['seeds'][-1]} ({len(s['seeds'])}).
m* is a lower bound on the true supremum (local optimizer): the mean over seeds measures how reliably the
search finds it, the best over seeds is the sharpest lower bound. The optimum's rate and margins are
recomputed with meanfield (ParticleSystem.energy_rates, diagnostics.radial_dominance) as an independent check.

| delta | m* flat (feasible seeds) | m* exact | m* norm-bounded | min rate/self, flat, m0 = {adv['ratio_margin']:g} |
|---|---|---|---|---|
{rows}

Reading the numbers: the best-over-seeds C* = m*/delta is {_range(_best(z, 'flat')[0])} (flat),
{_range(_best(z, 'exact')[0])} (exact) and {_range(_best(z, 'norm_bounded')[0])} (norm-bounded) across delta =
{dl[0]:g}..{dl[-1]:g}; the best m* grows like delta^{_best(z, 'flat')[1]:.2f} / delta^{_best(z, 'exact')[1]:.2f} /
delta^{_best(z, 'norm_bounded')[1]:.2f}. C* never exceeds 1, the constant of the proof. {_shape_txt(z)}
The per-seed values scatter (intervals in the claims table): the landscape has many local optima and a
single SLSQP start often ends in a poor one, so per-seed means and slopes measure the search as much as the
problem, and the best over seeds is the estimate (a lower bound) of the supremum. {_positive_txt(z)}
Condition 8 alone (margin >= 0, Thm 17's hypothesis) does not imply monotonicity once the heads are
only approximately orthogonal: the margin must exceed C* delta. At a fixed margin m0 (flat) the worst rate / self
term is 1 - C_r delta / m0 with C_r (best over seeds) {_range(_best_ratio(z, adv['ratio_margin']))} and a linear
dependence on delta (slope of log(1 - min) {_pm(a['ratio']['slope_ci'], '.2f')}, 95 % CI over seeds): at a fixed
margin the coupling comes within that factor of its Cauchy-Schwarz bound.

**Random tokens (parts B, C).** With c = cos(angle), <u_i^h, u_i^h'> = alpha^2 c (U_h^T A_i^h) . (U_h'^T A_i^h') and
U_h^T A = sqrt(1-c) A_h + sqrt(c) A_0 (A_0: the shared-block component), so the coupling is c (A_h . A_h') +
c^(3/2) (...) + c^2 (A_0 . A_0'). The O(delta) of Thm 39 is an upper bound (coupling / bound <= 1 above); the local
exponent is 1 only when the leading coefficient A_h . A_h' is not small. For i.i.d. uniform tokens the block
aggregates are nearly uncorrelated and partly cancel, so the per-draw exponent scatters widely (the interval
above); tokens with a common mean direction (vMF, kappa {s['kappa']:g}) give exponent 1 as delta -> 0, with the
c^(3/2) term visible as a steeper fit over 70-90 degrees. Along vMF trajectories the flat per-head rates stay
positive at every angle (a favourable start, not an adversarial one: see part A for the worst case); on the
sphere they turn negative at every angle including 90 degrees (radial shadows). Flat runs stop at half the
finite-time blow-up (mean end times {[round(x, 3) for x in s['flat']['t_final']]}).
"""
