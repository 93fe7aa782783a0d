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
    load_json,
    open_study_data,
    save_figure,
    style_axes,
    write_report,
)

PASS, FAIL = "checked", "FAILED"
READING_LABEL = {"flat": "flat (self-term margin)", "exact": "sphere, Cond. 8 exact, summed",
                 "norm_bounded": "sphere, Cond. 8 norm-bounded, summed",
                 "exact_token": "sphere, Cond. 8 exact, per token",
                 "norm_bounded_token": "sphere, Cond. 8 norm-bounded, per token"}
MARGINS = tuple(READING_LABEL)          # the summed margins (flat, exact, norm-bounded), then the per-token ones
MARKER = {"flat": "o", "exact": "s", "norm_bounded": "^", "exact_token": "D", "norm_bounded_token": "v"}
SLOPE_TOL = 0.15   # |slope - 1| below this reads as "linear in delta" (the c^(3/2) term moves single draws ~0.1)
CONSISTENCY = "consistency check"   # a proved inequality or an identity: it cannot fail but for a bug
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
    fig, axes = plt.subplots(2, 2, figsize=(13, 10))
    ax = axes[0, 0]
    for r in MARGINS:
        M = z[f"adv_{r}_m_star"]
        best = np.array([np.nanmax(c) if np.isfinite(c).any() else np.nan for c in M.T])
        ax.loglog(dl, best, MARKER[r] + "-", label=f"{READING_LABEL[r]}: best of all seeds")
        mean = np.array([np.nanmean(c) if np.isfinite(c).any() else np.nan for c in M.T])
        ax.loglog(dl, mean, MARKER[r] + ":", color=ax.lines[-1].get_color(), alpha=0.5, ms=3)
    ax.plot([], [], "k:", alpha=0.5, label="dotted: mean over seeds")
    ax.loglog(dl, dl, "k--", lw=1, label="m = delta (Cauchy-Schwarz, C = 1)")
    ax.set(xlabel="delta = |M_h' M_h|_op", ylabel="critical margin m*(delta)",
           title="largest margin with dE_h/dt <= 0 (adversarial)")
    bx = axes[0, 1]
    for r in MARGINS:
        best = z[f"adv_{r}_C"]
        best = np.array([np.nanmax(c) if np.isfinite(c).any() else np.nan for c in best.T])
        bx.semilogx(dl, best, MARKER[r] + "-", label=f"{READING_LABEL[r]}: best of all seeds")
        m, h = _ci_arrays(a[r]["C_ci"])
        bx.errorbar(dl * 1.03, m, yerr=h, fmt=MARKER[r] + ":", color=bx.lines[-1].get_color(), alpha=0.5, ms=3,
                    capsize=2)
    bx.plot([], [], "k:", alpha=0.5, label="dotted: mean over seeds, 95 % CI")
    bx.axhline(1, color="k", ls="--", lw=1, label="C = 1 (Cauchy-Schwarz bound)")
    bx.set_xscale("log")
    bx.set(xlabel="delta", ylabel="C* = m*/delta", ylim=(-0.05, 1.1),
           title="how close decreasing configurations get to the bound C = 1")
    cx = axes[1, 0]
    rt = a["ratio"]
    m, h = _ci_arrays(rt["C_ci"])
    gap = 1 - z["adv_ratio_min_ratio"]
    cx.loglog(dl, np.nanmax(gap, axis=0), "o-", label="1 - min (dE_h/dt / self term), best of all seeds")
    cx.loglog(dl, dl / rt["margin"], "k--", lw=1, label=f"bound delta / m0 (m0 = {rt['margin']:g})")
    cx.set(xlabel="delta", ylabel="1 - min ratio", title=f"flat: worst rate / self term at margin m0 = {rt['margin']:g}")
    dx = axes[1, 1]
    names = [("flat", "m* flat"), ("exact", "exact\nsum"), ("norm_bounded", "norm-b.\nsum"),
             ("exact_token", "exact\ntoken"), ("norm_bounded_token", "norm-b.\ntoken"), ("ratio", "1-min\nratio flat")]
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
                 f"beta = {adv['beta']}, {len(s['seeds'])} seeds\nper delta: summed margins {adv['restarts']} random "
                 f"+ 2 warm SLSQP starts, per-token {adv['token_restarts']} clustered + 2 warm")
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
    pos = {r: bool((_best(z, r)[0] > 0).all()) for r in ("exact_token", "norm_bounded_token")}
    if all(pos.values()):
        return ("The best per-token m* is positive at every searched delta in both readings: there are configurations "
                "with Condition 8 holding at every token, with a margin, whose head-0 energy decreases, so")
    return ("The best per-token m* is not positive at every searched delta (" + ", ".join(
        f"{r}: {'yes' if v else 'no'}" for r, v in pos.items()) + "); where it is,")


def _shape_txt(z):
    """What the best-over-seeds curves say about the order in delta (data-driven wording)."""
    parts = []
    dl = z["adv_deltas"]
    for r in MARGINS:
        name = READING_LABEL[r]
        best, slope = _best(z, r)
        drops = [(i, j) for i in range(len(dl)) for j in range(i + 1, len(dl))
                 if np.isfinite(best[i]) and np.isfinite(best[j]) and best[i] > best[j] + 0.1]
        if not np.isfinite(slope):
            parts.append(f"{name}: no slope (too few positive m*)")
        elif abs(slope - 1) <= 0.3:
            parts.append(f"{name}: m* linear in delta (slope {slope:.2f}), C* within {_range(best)} at every delta: "
                         f"a threshold of order delta, and the search gets within a factor {np.nanmax(best):.2f} of "
                         "the constant 1 of the proof")
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


def _token_beats_sum(z):
    """Where the best per-token m* exceeds the best summed m* of the same reading (the summed search missed it)."""
    dl = z["adv_deltas"]
    out = []
    for r in ("exact", "norm_bounded"):
        bs, bt = _best(z, r)[0], _best(z, f"{r}_token")[0]
        hit = [f"{d:g}" for d, x, y in zip(dl, bs, bt) if np.isfinite(y) and not y <= x]
        out.append(f"{READING_LABEL[r].split(', summed')[0]}: delta = {', '.join(hit)}" if hit else
                   f"{READING_LABEL[r].split(', summed')[0]}: no delta")
    return "; ".join(out)


def _best_txt(z, r):
    best, slope = _best(z, r)
    return ("best over seeds m*/delta at delta = " + ", ".join(f"{d:g}: {c:.2f}" for d, c in zip(z["adv_deltas"], best))
            + f" (slope of the best m* against delta {slope:.2f})")


def _with_token_part(data_dir, z, s):
    """Merge part A(iv) (``token.npz`` / ``token.json``, written by ``run_token``) into the arrays and summary."""
    data_dir = Path(data_dir)
    t = load_json(data_dir / "token.json")
    zt = dict(np.load(data_dir / "token.npz"))
    if not np.array_equal(zt.pop("adv_deltas"), z["adv_deltas"]) or t["seeds"] != s["seeds"]:
        raise ValueError(f"token.npz in {data_dir} was run with other deltas or seeds than data.npz; rerun one of them")
    z |= zt
    s["adversarial"] |= {f"{r}_token": t[f"{r}_token"] for r in t["readings"]}
    s["adversarial"]["token_checks"] = t["checks"]
    s["adv_settings"] |= {k: t["settings"][k] for k in ("token_restarts", "token_spread")}
    return z, s


def report(data_dir: Path, out_dir: Path | None = None) -> Path:
    out, z, s = open_study_data(data_dir, out_dir)
    z, s = _with_token_part(data_dir, z, s)
    _figure_adversarial(z, s, out)
    _figure_tokens(z, s, out)
    f, sp, a = s["flat"], s["sphere"], s["adversarial"]
    a0 = s["small_angle"]
    ns = len(s["seeds"])
    adv = s["adv_settings"]
    dl = adv["deltas"]
    ck, tk = a["checks"], a["token_checks"]
    bound_ok = max(f["max_bound_ratio"], sp["max_bound_ratio"]) <= 1 + 1e-12
    c_ok = {r: a[r]["C_max"] is not None and not a[r]["C_max"] > 1 + C_TOL for r in MARGINS}
    rt = a["ratio"]
    ratio_ok = all(q is None or q >= 1 - d / rt["margin"] - C_TOL for q, d in zip(rt["min_ratio_best"], dl))
    raw = a["raw_sphere_delta0"]
    token_pos = {r: bool((_best(z, r)[0] > 0).all()) for r in ("exact_token", "norm_bounded_token")}
    # decided on the 95 % intervals (value, half-width), not on the point estimates: "linear" if the interval meets
    # [1 - SLOPE_TOL, 1 + SLOPE_TOL]; "weaker" if it lies entirely above 1 + SLOPE_TOL
    sl, sl_h = f["slope_initial_small"][0], f["slope_initial_small"][1]
    slope_lin = abs(sl - 1) < SLOPE_TOL + sl_h
    r_slope = rt["slope_ci"][0] if rt["slope_ci"][0] is not None else float("nan")
    r_half = rt["slope_ci"][1] if rt["slope_ci"][1] is not None else float("nan")
    ratio_lin = abs(r_slope - 1) < SLOPE_TOL + r_half
    ratio_weaker = r_slope - r_half - 1 >= SLOPE_TOL   # coupling o(delta) at fixed margin: a weaker hypothesis would do
    cs = CONSISTENCY

    def cs_row(r):      # the Cauchy-Schwarz bound C* <= 1 as a consistency check: how close the search gets
        return (f"{cs}: largest m*/delta {a[r]['C_max']:.3f} <= 1 (the search gets within that factor of the bound)"
                if c_ok[r] else f"bound VIOLATED (m*/delta {a[r]['C_max']:.3f} > 1: a bug)")

    claims = [
        ["extra coupling <u^h, u^h'> = O(delta) (Thm 39): bounded by delta sum_i w_i |A_i^h||A_i^h'|",
         f"max coupling / bound {max(f['max_bound_ratio'], sp['max_bound_ratio']):.3f} over all deltas and {ns} draws "
         "(uniform and vMF tokens)", f"{cs} (Cauchy-Schwarz)" if bound_ok else "bound VIOLATED (a bug)"],
        [f"coupling linear in delta (log-log slope 1), angles >= {a0:g} deg",
         f"per-draw slopes, mean +- 95 % CI over {ns} draws: vMF t=0 {_pm(f['slope_initial_small'])}, vMF max over t "
         f"(flat) {_pm(f['slope_traj_small'])}, (sphere) {_pm(sp['slope_traj_small'])}, uniform t=0 "
         f"{_pm(f['slope_uniform_small'])}",
         f"linear (|slope - 1| < {SLOPE_TOL:g})" if slope_lin else f"not linear (|slope - 1| >= {SLOPE_TOL:g})"],
        ["... over the whole trained-head range 70-90 deg",
         f"vMF t=0 {_pm(f['slope_initial'])}, uniform t=0 {_pm(f['slope_uniform'])} (the uniform draws scatter: "
         "leading coefficient A_h . A_h' of either sign, see notes)", "linear with a c^(3/2) correction"],
        ["exact orthogonality (90 degrees): no coupling",
         f"max coupling at delta=0: flat {f['coupling_at_zero']:.1e}, sphere {sp['coupling_at_zero']:.1e}",
         f"{cs} (identity: M_h M_h' = 0)" if max(f["coupling_at_zero"], sp["coupling_at_zero"]) < 1e-14 else FAIL],
        ["adversarial, flat: self-term margin m > delta implies dE_h/dt >= 0 (Cauchy-Schwarz)",
         f"{_best_txt(z, 'flat')}; per seed, mean +- 95 % CI over {ns} seeds: {_c_txt(a, 'flat', dl)}, slope "
         f"{_pm(a['flat']['slope_ci'])}", cs_row("flat")],
        [f"adversarial, flat: min dE_h/dt / self term = 1 - C_r delta/m0 at margin m0 = {rt['margin']:g}: C_r <= 1 "
         "(Cauchy-Schwarz) and how close to 1",
         "best minima " + ", ".join(f"{d:g}: {q:.4f}" for d, q in zip(dl, rt["min_ratio_best"]) if q is not None)
         + f"; C_r = (1 - min) m0/delta per seed {', '.join(_pm(c, '.2f') for c in rt['C_ci'])}, best "
         f"{_range(_best_ratio(z, rt['margin']))}; slope of log(1 - min) {_pm(rt['slope_ci'])}",
         (f"{cs} (C_r <= 1); order delta attained (|slope - 1| < {SLOPE_TOL:g})" if ratio_lin else
          f"{cs} (C_r <= 1); slope {'not measurable' if not np.isfinite(r_slope) else 'off 1'}") if ratio_ok
         else "bound VIOLATED (a bug)"],
        ["adversarial, sphere: summed Condition 8 margin (exact) m > delta implies dE_h/dt >= 0 (Cauchy-Schwarz)",
         f"{_best_txt(z, 'exact')}; per seed (mean +- 95 % CI): {_c_txt(a, 'exact', dl)}, slope "
         f"{_pm(a['exact']['slope_ci'])}", cs_row("exact")],
        ["adversarial, sphere: summed Condition 8 margin (norm-bounded) m > delta implies dE_h/dt >= 0",
         f"{_best_txt(z, 'norm_bounded')}; per seed (mean +- 95 % CI): {_c_txt(a, 'norm_bounded', dl)}, slope "
         f"{_pm(a['norm_bounded']['slope_ci'])}", cs_row("norm_bounded")],
        ["adversarial, sphere: Condition 8 (exact) at every token, margin m_i >= m > 0, and dE_h/dt <= 0?",
         f"{_best_txt(z, 'exact_token')}; per seed (mean +- 95 % CI): {_c_txt(a, 'exact_token', dl)}, slope "
         f"{_pm(a['exact_token']['slope_ci'])}",
         ("yes at every delta: Condition 8 alone is not enough" if token_pos["exact_token"] else
          "not found at every delta") + "; " + cs_row("exact_token")],
        ["adversarial, sphere: Condition 8 (norm-bounded) at every token, margin m_i >= m > 0, and dE_h/dt <= 0?",
         f"{_best_txt(z, 'norm_bounded_token')}; per seed (mean +- 95 % CI): {_c_txt(a, 'norm_bounded_token', dl)}, "
         f"slope {_pm(a['norm_bounded_token']['slope_ci'])}",
         ("yes at every delta: Condition 8 alone is not enough" if token_pos["norm_bounded_token"] else
          "not found at every delta") + "; " + cs_row("norm_bounded_token")],
        ["sphere without a margin: per-head monotone at delta = 0?",
         f"unrestricted minimum of dE_h/dt / sum|terms| at delta = 0: {_pm(raw[:2])} ({ns} seeds), lowest {raw[2]:.4f}; "
         f"along vMF trajectories min dE_h/dt / self term {sp['min_rate_over_self']:.2f}", "fails (radial shadows, Thm 17)"],
        ["own rate and margin code = meanfield (ParticleSystem.energy_rates, diagnostics.radial_dominance)",
         f"{ck['count'] + tk['count']} optimal configurations: rate difference <= "
         f"{max(ck['max_rate_diff'], tk['max_rate_diff']):.1e} of the rate scale, margins <= "
         f"{max(ck['max_margin_diff'], tk['max_margin_diff']):.1e}; |M_2 M_1|_op / delta <= "
         f"{max(ck['max_op_delta_ratio'], tk['max_op_delta_ratio']):.6f}; per-token optima with m* > 0: "
         f"radial_dominance finds Condition 8 at every token in {tk['library_holds']}/{tk['positive']}, "
         f"energy_rates / rate scale <= {tk['max_library_rate']:.1e}",
         PASS if max(ck["max_rate_diff"], tk["max_rate_diff"]) < 1e-9 and max(ck["max_margin_diff"], tk["max_margin_diff"])
         < 1e-9 and max(ck["max_op_delta_ratio"], tk["max_op_delta_ratio"]) <= 1 + 1e-9
         and tk["library_holds"] == tk["positive"] and not tk["max_library_rate"] > 10 * adv["feas_tol"] else FAIL],
    ]
    hyp = ("symmetric, value-aligned (V_h = M_h), exp kernel, mean normalization, |M_h' M_h|_op <= delta "
           "(2 rank-2 heads, indefinite allowed)")
    tok = "best over seeds, per delta"
    verdicts = [
        ["Thm 39: extra coupling <u^h, u^h'> = O(delta) (an upper bound proved by Cauchy-Schwarz: a consistency "
         "check; the slope shows whether the order is attained)", hyp + "; flat and sphere",
         REPRODUCED if bound_ok else REFUTED,
         f"the bound |<u_i^h, u_i^h'>| <= delta |A_i^h||A_i^h'| is Cauchy-Schwarz: {cs}, coupling / bound <= "
         f"{max(f['max_bound_ratio'], sp['max_bound_ratio']):.2f} over {ns} draws x {len(s['angles'])} angles. "
         f"That the order delta is attained (not o(delta)): slope near orthogonality (vMF) "
         f"{_pm(f['slope_initial_small'])} (95 % CI, {ns} draws; {'within' if slope_lin else 'outside'} "
         f"{SLOPE_TOL:g} of 1)"],
        ["Thm 39 (flat): per-head monotone when delta is small against the self term",
         hyp + "; flat; reading: self term > C delta sum_i w_i |A_i^h||A_i^h'|",
         (SHARPENED if ratio_weaker else REPRODUCED) if c_ok["flat"] and ratio_ok else REFUTED,
         f"sufficiency with C = 1 is Cauchy-Schwarz ({cs}: no decreasing configuration with margin above delta, largest "
         f"m*/delta {a['flat']['C_max']:.2f}). The test that could have failed, whether the hypothesis is needed at "
         f"order delta: at fixed margin m0 = {rt['margin']:g} the worst rate / self term is 1 - C_r delta / m0 with C_r "
         f"({tok}) {_range(_best_ratio(z, rt['margin']))} and slope of log(1 - min) vs log delta "
         f"{_pm(rt['slope_ci'], '.2f')} (95 % CI over {ns} seeds; a slope above 1 + {SLOPE_TOL:g} would have meant "
         f"that a weaker hypothesis suffices). Without a margin the ratio to the self term is unbounded below"],
        ["Thm 39 on the sphere: per-head monotone under approximate orthogonality",
         hyp + "; sphere; delta small against the self-energy (no spherical form given); read with Condition 8 "
         "(per token, both readings) as at delta = 0 (Thm 17)",
         (SHARPENED if all(token_pos.values()) else REPRODUCED) if c_ok["exact_token"] and c_ok["norm_bounded_token"]
         else REFUTED,
         f"Condition 8 at every token is not enough once delta > 0 (the test: an adversarial search for decreasing "
         f"configurations satisfying it at every token, {ns} seeds): found at every delta = {dl[0]:g}..{dl[-1]:g} "
         + ("in both readings" if all(token_pos.values()) else
            f"in the exact reading: {'yes' if token_pos['exact_token'] else 'NO'}, in the norm-bounded one: "
            f"{'yes' if token_pos['norm_bounded_token'] else 'NO'}") + f", with per-token margins up to C* delta, C* ({tok}) "
         f"{_range(_best(z, 'exact_token')[0])} (exact) and {_range(_best(z, 'norm_bounded_token')[0])} "
         f"(norm-bounded). Sharpened hypothesis: Condition 8 with a margin > C delta, C <= 1 (Cauchy-Schwarz, "
         f"{cs}: largest per-token m*/delta "
         f"{max(a['exact_token']['C_max'], a['norm_bounded_token']['C_max']):.2f})"],
        ["(same, without a radial-dominance margin)", hyp + "; sphere, no Condition 8", OUTSIDE,
         f"per-head rates negative already at delta = 0: unrestricted min of dE_h/dt / sum|terms| {_pm(raw[:2], '.4f')} "
         f"({ns} seeds, 95 % CI; the radial shadows of Thm 17)"],
    ]
    notes = _notes(s, z)
    return write_report(out / "report.md", "Approximately orthogonal heads (paper Thm 39)",
                        "Per-head energy monotonicity when head subspaces are only approximately orthogonal "
                        "(|M_h' M_h|_op <= delta): an adversarial search over tokens and indefinite heads for the "
                        "smallest margin that guarantees monotonicity, flat and on the sphere, and the coupling at "
                        "random tokens along trajectories.", claims,
                        [("adversarial.png", "Adversarial critical margins m*(delta) (summed and per-token), how close "
                                             "C* = m*/delta gets to the bound C = 1 (best over seeds solid, mean and 95 % "
                                             "CI dotted), the flat rate/self minimum, per-seed slopes"),
                         ("approx_orthogonality.png", "Coupling against delta over token draws; per-head monotonicity "
                                                      "along trajectories against the angle")],
                        notes, verdicts=verdicts)


def _notes(s, z):
    adv = s["adv_settings"]
    a = s["adversarial"]
    dl = adv["deltas"]
    def cell(r, j):
        M = z[f"adv_{r}_m_star"][:, j]
        return f"{np.nanmax(M):.4g} ({int(np.isfinite(M).sum())}/{M.size})" if np.isfinite(M).any() else "none"

    rows = "\n".join(f"| {d:g} | " + " | ".join(cell(r, j) for r in MARGINS)
                     + f" | {np.nanmin(z['adv_ratio_min_ratio'][:, j]):.4f} |" for j, d in enumerate(dl))
    return f"""
**Reading of Thm 39.** The seed summary says only that per-head monotonicity is robust to approximate
orthogonality, |M_h' M_h|_op <= delta, "when the perturbation is small relative to the self-energy"; it
gives no constant and no spherical form. For symmetric value-aligned heads <u_i^h, u_i^h'> =
<A_i^h, M_h M_h' A_i^h'> (A_i^h = sum_j w_j exp(beta <x_i, M_h x_j>) x_j), so |<u^h, u^h'>| <= delta |A^h| |A^h'|
token by token. We read "small relative to the self-energy" as a margin in these units:
flat, m = sum_i w_i |u_i^h|^2 / sum_i w_i |A_i^h||A_i^h'|; sphere, m = sum_i w_i mu_i / sum_i w_i |A_i^h||A_i^h'| with
mu_i the Condition 8 margin of token i (exact: |P u_i^h|^2 - a_i^h a_i^h'; norm-bounded: |P u_i^h|^2 - |a_i^h| |u_i^h'|).
Then dE_h/dt >= (m - delta) sum_i w_i |A_i^h||A_i^h'|, so "margin > C delta implies monotone" holds with C = 1:
Cauchy-Schwarz, a proved inequality, so every "C* <= 1" below is a consistency check (it can fail only through a
bug); what it measures is how sharp the bound is, i.e. the largest m*/delta among decreasing configurations.
The token-summed margin is a weighted mean of the per-token margins m_i, so "summed margin > delta implies
monotone" is the stronger statement, but Condition 8 (Thm 17's hypothesis) holds token by token: whether
Condition 8 alone still implies monotonicity for delta > 0 is decided by the per-token margin
m = min_i m_i (a decreasing configuration with min_i m_i > 0 satisfies Condition 8 at every token). Why a margin at all: without one, tokens
almost orthogonal to head h's subspace make the self term vanish quadratically and the coupling only linearly,
so min dE_h/dt / self term is unbounded below for every delta > 0 (tokens at distance eps from the complement
of head h's range: self term O(eps^2), coupling O(delta eps) of either sign); raw monotonicity on the sphere fails even at delta = 0 (radial shadows).

**Adversarial search.** Two heads M_h = alpha U_h B_h U_h^T, rank 2, |B_h| < 1 with eigenvalues of either sign
(indefinite heads), U_1^T U_2 = diag(c_1, c_2) with |c_k| <= delta (every pair of rank-2 subspaces, up to a
rotation absorbed by the tokens), alpha = 1, beta = {adv['beta']:g}, n = {adv['n']} tokens free on S^{adv['d'] - 1}
(flat rates are evaluated at such configurations). For each delta and seed, {adv['restarts']} SLSQP runs
(maxiter {adv['maxiter']}, central finite-difference Jacobians from one batched evaluation) from random starts
maximise the margin subject to dE_h/dt <= 0 (feasible: rate <= {adv['feas_tol']:g} x the sum of the absolute values
of its terms); the seed's m* is the best feasible end point. Per-token margins (maximise m subject to m_i >= m at
every token and dE_h/dt <= 0): {adv['token_restarts']} starts with the tokens clustered about a random point
(spread {adv['token_spread']:g}; i.i.d. starts mostly end infeasible here). Each delta's best configuration then
warm-starts its neighbours (a sweep down and up: 2 warm starts). This part (token.npz / token.json) runs on its
own (`python -m studies.approximate_orthogonality.token`); the other parts are in data.npz / data.json.
Seeds {s['seeds'][0]}..{s['seeds'][-1]} ({len(s['seeds'])}).
m* is a lower bound on the true supremum (local optimizer): the mean over seeds measures how reliably the
search finds it, the best over seeds is the sharpest lower bound. The optimum's rate and margins are
recomputed with meanfield (ParticleSystem.energy_rates, diagnostics.radial_dominance) as an independent check.

| delta | m* flat (feasible seeds) | m* exact, summed | m* norm-bounded, summed | m* exact, per token | m* norm-bounded, per token | min rate/self, flat, m0 = {adv['ratio_margin']:g} |
|---|---|---|---|---|---|---|
{rows}

Reading the numbers: the best-over-seeds C* = m*/delta across delta = {dl[0]:g}..{dl[-1]:g} is
{'; '.join(f"{READING_LABEL[r]} {_range(_best(z, r)[0])} (best m* ~ delta^{_best(z, r)[1]:.2f})" for r in MARGINS)}.
C* never exceeds 1, the constant of the proof (the consistency check). {_shape_txt(z)}
A per-token optimum is feasible for the summed problem with a summed margin >= its m*, so the summed supremum is at
least the per-token one; the per-token search (clustered starts) finds more than the summed one (i.i.d. starts) at
{_token_beats_sum(z)}.
The per-seed values scatter (intervals in the claims table): the landscape has many local optima and a
single SLSQP start often ends in a poor one, so per-seed means and slopes measure the search as much as the
problem, and the best over seeds is the estimate (a lower bound) of the supremum. {_positive_txt(z)}
Condition 8 alone (margin >= 0 at every token, Thm 17's hypothesis) does not imply monotonicity once the heads
are only approximately orthogonal: the margin must exceed C* delta. At a fixed margin m0 (flat) the worst rate / self
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
