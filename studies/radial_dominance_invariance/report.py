"""Figures and report.md for the radial-dominance invariance study (reads data.npz / data.json)."""

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
    markdown_table,
    open_study_data,
    save_figure,
    style_axes,
    wilson95,
    write_report,
)
from studies.radial_dominance_invariance.run import equiangular_failure  # noqa: E402

LABEL = {"norm_bounded": "norm-bounded", "exact": "exact"}


def _fmt_ci(mc, digits=3):
    m, h = mc
    if m is None or not np.isfinite(m):
        return "-"
    if h is None or not np.isfinite(h):
        return f"{m:.{digits}g}"
    return f"{m:.{digits}g} +- {h:.2g}"


def _fig_equiangular(z, s, out):
    Hs, ns, bs = z["eq_H"], z["eq_n"], z["eq_betas"]
    gf, tf = z["eq_gamma_fail"], z["eq_t_fail"]
    fig, axes = plt.subplots(2, len(Hs), figsize=(5 * len(Hs), 8.2), squeeze=False)
    cmap = plt.get_cmap("viridis")
    for i, H in enumerate(Hs):
        for j, n in enumerate(ns):
            col = cmap(j / max(len(ns) - 1, 1))
            for r, (rd, ls) in enumerate((("norm_bounded", "-"), ("exact", "--"))):
                g = gf[r, i, j]
                axes[0, i].plot(bs, g, ls, color=col, lw=1.3, label=f"n={n}" if r == 0 else None)
                t = np.where(np.isfinite(tf[r, i, j]), tf[r, i, j], np.nan)
                axes[1, i].plot(bs, t, ls, color=col, lw=1.3)
            b_star = s["eq_threshold_ref"][0][i][j] if "eq_threshold_ref" in s else None
            if b_star is not None and b_star > 0:
                axes[0, i].plot([b_star], [0], "v", color=col, ms=6)
        lim = s["large_n_limits"][str(H)]
        axes[0, i].axhline(lim["norm_bounded"], color="r", lw=0.9, label=f"c*({H})^2 = {lim['norm_bounded']:.3f}")
        axes[0, i].axhline(lim["exact"], color="r", ls="--", lw=0.9, label=f"1/H = {lim['exact']:.3f}")
        axes[0, i].set(xlabel="beta", ylabel="gamma at first failure", ylim=(-0.02, 0.62),
                       title=f"H = {H}: solid norm-bounded, dashed exact, v beta*")
        axes[1, i].set(xlabel="beta", ylabel="time of first failure (0: fails at start)",
                       title=f"H = {H}: failure time (mean normalization)")
    style_axes(axes[0], legend=7)
    style_axes(axes[1])
    save_figure(fig, out / "equiangular.png")


def _fig_random(s, out):
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for n in sorted({r["n"] for r in s["scalar"]}):
        rows = [r for r in s["scalar"] if r["n"] == n]
        x = np.array([r["beta_over_beta_star"] for r in rows])
        for rd, mk in (("norm_bounded", "o-"), ("exact", "s--")):
            p = np.array([r[f"holds0_{rd}"] for r in rows])
            ci = np.array([r[f"holds0_{rd}_ci"] for r in rows]).T
            axes[0].errorbar(x, p, yerr=np.maximum(0, [p - ci[0], ci[1] - p]), fmt=mk, capsize=3,
                             label=f"n={n}, {LABEL[rd]}")
            g = np.array([np.nan if r[f"gamma_fail_{rd}"][0] is None else r[f"gamma_fail_{rd}"][0] for r in rows])
            e = np.array([np.nan if r[f"gamma_fail_{rd}"][1] is None else r[f"gamma_fail_{rd}"][1] for r in rows])
            axes[1].errorbar(x, g, yerr=e, fmt=mk, capsize=3, label=f"n={n}, {LABEL[rd]}")
    axes[0].axvline(1, color="k", lw=0.8)
    axes[0].set(xlabel="beta / beta*(2, n)", ylabel="fraction of seeds (Wilson 95 %)", ylim=(-0.05, 1.05),
                title="scalar heads, random start (d = 4n): holds at t = 0")
    axes[1].axvline(1, color="k", lw=0.8)
    axes[1].set(xlabel="beta / beta*(2, n)", ylabel="mean inner product at failure (95 % t)",
                title="scalar heads: gamma where it fails (runs holding at t = 0)")
    for k, n in enumerate(sorted({r["n"] for r in s["blocks"]})):
        rows = [r for r in s["blocks"] if r["n"] == n]
        b = np.array([r["beta"] for r in rows]) * (1 + 0.04 * k)      # small offset: error bars apart
        for key, mk, what in (("t_fail_exact", "s--", "exact reading fails (runs holding at t = 0)"),
                              ("t_neg", "o-", "first dE_h/dt < 0")):
            m = np.array([np.nan if r[key][0] is None else r[key][0] for r in rows])
            e = np.array([np.nan if r[key][1] is None else r[key][1] for r in rows])
            axes[2].errorbar(b, m, yerr=e, fmt=mk, capsize=3, label=f"n={n}: {what}")
    betas = sorted({r["beta"] for r in s["blocks"]})
    axes[2].set(xlabel="beta", ylabel="time (mean, 95 % t)", xscale="log",
                title="block heads (d = 8, H = 2): failure, then dE_h/dt < 0", ylim=(0, None))
    axes[2].set_xticks(betas, [f"{b:g}" for b in betas], minor=False)
    axes[2].minorticks_off()
    style_axes(axes, legend=7)
    save_figure(fig, out / "random_starts.png")


def _unequal_table(s):
    return [[r["n"], f"{r['beta_over_beta_star']:g}", f"{r['beta']:.3f}",
             f"{r['holds0_norm_bounded']:.1f} / {r['holds0_exact']:.1f}", _fmt_ci(r["t_fail_norm_bounded"]),
             _fmt_ci(r["gamma_fail_norm_bounded"]), _fmt_ci(r["t_fail_exact"]), _fmt_ci(r["gamma_fail_exact"]),
             f"{r['runs_with_negative_rate']}/{r['runs']}"] for r in s["scalar_unequal"]]


def _reentry_beta_ratio(z):
    """Range of beta / (t = 0 threshold of the same reading) over the re-entrant points of the scan."""
    re = z["eq_reentrant"]
    if not re.any():
        return (np.nan, np.nan)
    ratio = z["eq_betas"][None, None, None, :] / z["eq_threshold_ref"][..., None]
    return float(ratio[re].min()), float(ratio[re].max())


def _neg_before_exact(run):
    return run["t_neg"] is not None and (run["t_fail_exact"] is None or run["t_neg"] < run["t_fail_exact"])


def _fig_example(z, s, out):
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5))
    for k, name in enumerate(("equiangular", "blocks")):
        t, meta = z[f"ex_{name}_t"], s["example"][name]
        for rd, ls in (("norm_bounded", "-"), ("exact", "--")):
            axes[0, k].plot(t, z[f"ex_{name}_{rd}"], ls, label=f"{LABEL[rd]}: worst relative margin")
            tf = meta[f"t_fail_{rd}"]
            if tf is not None and 0 < tf < t[-1]:
                axes[0, k].axvline(tf, color="k", ls=ls, lw=0.8)
        axes[0, k].plot(t, z[f"ex_{name}_gamma"], ":", color="gray", label="mean inner product")
        axes[0, k].axhline(0, color="k", lw=0.6)
        R = z[f"ex_{name}_rates"]
        for h in range(R.shape[1]):
            axes[1, k].plot(t, R[:, h], label=f"head {h}: dE_h/dt / max |rate|")
        axes[1, k].axhline(0, color="k", lw=0.6)
        axes[1, k].set(xlabel="t", ylabel="per-head rate")
    e, b = s["example"]["equiangular"], s["example"]["blocks"]
    axes[0, 0].set(title=f"equiangular start, scalar heads: H = {e['H']}, n = d = {e['n']}, beta = {e['beta']:.3f}",
                   ylabel="margin (Condition 8 holds where >= 0)")
    axes[0, 1].set(title=f"random start, block heads: d = 8, n = {b['n']}, beta = {b['beta']:g}", ylabel="margin")
    style_axes(axes, legend=7)
    save_figure(fig, out / "example.png")


def _block_table(s):
    rows = []
    for r in s["blocks"]:
        runs = [q for q in s["block_runs"] if q["n"] == r["n"] and abs(q["beta"] - r["beta"]) < 1e-12]
        rows.append([r["n"], f"{r['beta']:g}", f"{r['holds0_exact']:.1f} / {r['holds0_norm_bounded']:.1f}",
                     _fmt_ci(r["t_fail_exact"]), f"{r['runs_with_negative_rate']}/{r['runs']}",
                     _fmt_ci(r["t_neg"]), sum(_neg_before_exact(q) for q in runs),
                     _fmt_ci(r["frac_time_neg_after_fail"], 2),
                     _fmt_ci(r["gamma_end"])])
    return rows


def _scalar_table(s):
    rows = []
    for r in s["scalar"]:
        rows.append([r["n"], f"{r['beta_over_beta_star']:g}", f"{r['beta']:.3f}",
                     f"{r['holds0_norm_bounded']:.1f} / {r['holds0_exact']:.1f}",
                     _fmt_ci(r["t_fail_norm_bounded"]), _fmt_ci(r["gamma_fail_norm_bounded"]),
                     f"{equiangular_failure('norm_bounded', [1.0, 1.0], r['beta'], r['n'])[0]:.3f}",
                     _fmt_ci(r["t_fail_exact"]), _fmt_ci(r["gamma_fail_exact"]),
                     f"{equiangular_failure('exact', [1.0, 1.0], r['beta'], r['n'])[0]:.3f}",
                     f"{r['reentrant_norm_bounded']} / {r['reentrant_exact']}"])
    return rows


def report(data_dir, out_dir=None) -> Path:
    out, z, s = open_study_data(data_dir, out_dir)
    s["eq_threshold_ref"] = z["eq_threshold_ref"].tolist()
    _fig_equiangular(z, s, out)
    _fig_random(s, out)
    _fig_example(z, s, out)
    conv = s["large_n_convergence"]
    lo, hi = s["eq_fail_gamma_range_below_threshold"]
    n_max = s["largest_n"]
    slopes = ", ".join(f"{k} {v['slope']:.2f}" for k, v in conv.items())
    eqp = s["eq_particles"]
    blocks_neg, nblocks = s["block_runs_negative"], s["block_run_count"]
    lo_neg, hi_neg = wilson95(blocks_neg, nblocks)
    seeds = len(s["settings"]["seeds"])
    neg_before_exact = sum(_neg_before_exact(r) for r in s["block_runs"])
    fails_at_0 = int((z["eq_gamma_fail"] == 0).sum())
    re_ratio = _reentry_beta_ratio(z)
    fracs = ", ".join(sorted({f"{r['beta_over_beta_star']:g}" for r in s["eq_particles"]}))
    # Thm 19 at t = 0: the norm-bounded reading's threshold is beta* (the agreement that identifies this reading in
    # MODEL.md: a consistency check); the exact reading's threshold could have been below beta* (a test)
    thr, ref = z["eq_threshold_at_0"], z["eq_threshold_ref"]
    exact_gap = float(np.nanmin(thr[1] - ref[0]))          # min over (H, n) of exact threshold - beta*
    # invariance, from random starts: of the runs that start with the condition holding, how many lose it later
    # (t_fail is inf -> None in data.json when it never fails)
    runs_all = s["scalar_runs"] + s["scalar_unequal_runs"] + s["block_runs"]
    inv = {}
    for rd in ("norm_bounded", "exact"):
        started = [r for r in runs_all if r[f"holds0_{rd}"]]
        k = sum(r[f"t_fail_{rd}"] is not None for r in started)
        inv[rd] = f"{k}/{len(started)} ({LABEL[rd]}; Wilson 95 %: " + "-".join(
            f"{x:.2f}" for x in wilson95(k, len(started))) + ")" if started else f"no run ({LABEL[rd]})"
    n_unequal = len(s["scalar_unequal_runs"])
    lo_u, hi_u = wilson95(s["scalar_unequal_runs_negative"], n_unequal)
    fracs_u = sorted({r["beta_over_beta_star"] for r in s["scalar_unequal_runs"]})
    # within the hypotheses (equal heads, beta < beta*) the rates are positive by an identity: its check failing
    # refutes; the unequal heads (the test that could have failed) only decide between sharpened and reproduced
    eq_ok = s["eq_particles_min_rel_rate"] > 0
    unequal_ok = s["scalar_unequal_runs_negative"] == 0
    v_mono = (SHARPENED if unequal_ok else REPRODUCED) if eq_ok else REFUTED
    verdicts = [
        ("Thm 19: radial dominance (Condition 8) holds for beta < beta* at orthogonal tokens",
         "positive scalar heads M_h = V_h = alpha I, exp, mean, sphere, orthogonal tokens (t = 0)",
         REPRODUCED if exact_gap > 0 else REFUTED,
         f"threshold in beta of each reading at gamma = 0 (root of the closed form, itself checked against "
         f"diagnostics.radial_dominance in the tests; deterministic): norm-bounded = beta*(H, n) to "
         f"{s['threshold_at_0_max_err']:.1e} (a consistency check: MODEL.md identifies this reading by this "
         f"agreement); the test that could have failed: the exact reading's threshold ln((n-1)/(H-1))/(2 alpha) lies "
         f"above beta* for every (H, n) scanned (smallest gap {exact_gap:.3f}), so both readings hold below beta*"),
        ("(open in the paper) is Condition 8 invariant along trajectories?",
         "Thm 19's hypotheses hold only at t = 0; along the flow the tokens are no longer orthogonal",
         OUTSIDE,
         f"answer: no (an invariant condition would have held along every run that starts in it). Along the "
         f"equiangular flow from orthogonal tokens it fails at a finite time for every beta "
         f"below its t = 0 threshold, at gamma_fail in [{lo:.3f}, {hi:.3f}]; gamma_fail -> c*(H)^2 "
         f"(norm-bounded; 0.382 for H = 2) and 1/H (exact) as n -> inf, error ~ n^(slope): {slopes} "
         f"(deterministic). Random starts ({seeds} seeds per setting; scalar, unequal scalar and block heads, "
         f"{len(runs_all)} runs): of the runs that start with the condition holding it fails later in "
         f"{inv['norm_bounded']} and {inv['exact']}"),
        ("Thm 19: per-head monotonicity for beta < beta*, and beyond the failure of the condition",
         "positive scalar heads, exp, mean, sphere, equiangular (orthogonal at t = 0)",
         v_mono,
         f"equal heads on the equiangular flow: every P u_i^h is a positive multiple of P sum_(j != i) x_j, so every "
         f"dE_h/dt > 0 at any beta, before and after Condition 8 fails (an identity; consistency check: min rate / "
         f"max |rate| = {s['eq_particles_min_rel_rate']:.3f} on {len(eqp)} particle runs at beta / beta* = {fracs}). "
         f"The test that could have failed: unequal scalar heads (1, 1/2) from random starts (the P u^h no longer "
         f"parallel), beta / beta* = {fracs_u[0]:g}-{fracs_u[-1]:g}: "
         f"{s['scalar_unequal_runs_negative']}/{n_unequal} runs with a negative rate (Wilson 95 %: {lo_u:.2f}-"
         f"{hi_u:.2f}; min rate / max |rate| {s['scalar_unequal_min_rel_rate']:.1e}) although the condition fails in "
         f"all: for positive scalar heads neither beta < beta* nor Condition 8 is needed. Not beyond scalar heads: "
         f"with orthogonal block heads the rates do turn negative after the condition fails, {blocks_neg}/{nblocks} "
         f"runs (Wilson 95 %: {lo_neg:.2f}-{hi_neg:.2f})"),
    ]
    claims = [
        ["equiangular closed form of both readings = library on equiangular tokens",
         "tests: relative 1e-12 (mean and softmax, equal and unequal strengths)", "checked"],
        ["failure time on particles (dense output, Brent) = closed form t(gamma_fail)",
         f"max relative error {s['eq_particles_max_t_fail_rel_err']:.1e} over {len(eqp)} runs "
         f"(d = n, orthonormal start)", "checked"],
        ["threshold in beta at gamma = 0 = beta* (norm-bounded), ln((n-1)/(H-1))/2 (exact)",
         f"{s['threshold_at_0_max_err']:.1e}", "consistency check (the agreement that identifies the norm-bounded reading)"],
        ["Condition 8 fails along the equiangular flow for every beta below its threshold",
         f"{s['eq_always_fails_below_threshold']}; gamma_fail in [{lo:.3f}, {hi:.3f}]",
         "new (answer to the open question)"],
        ["large-n limit of gamma_fail: c*(H)^2 (norm-bounded), 1/H (exact)",
         f"at n = {n_max}, beta < 0.5: max error " + ", ".join(f"{k} {v:.1e}"
                                                             for k, v in s["large_n_limit_err_beta_lt_0.5"].items())
         + f"; log-log slope in n: {slopes}", "new"],
        ["re-entry: fails at t = 0 but holds again later",
         f"{s['eq_reentrant_count']} of the {fails_at_0} (reading, H, n, beta) points of the equiangular scan "
         f"that fail "
         f"at t = 0, at beta / (t = 0 threshold) "
         f"in [{re_ratio[0]:.3f}, {re_ratio[1]:.3f}] (r = |P u|^2 / a^2 first rises with gamma)", "new"],
        ["random starts, scalar heads: fails in every run (at t = 0 or later)",
         f"(1, 1): {s['scalar_all_fail']}; (1, 1/2): {s['scalar_unequal_all_fail']}", "new"],
        ["random starts, scalar heads (1, 1/2): per-head rates stay >= 0 past the failure",
         f"{s['scalar_unequal_runs_negative']}/{len(s['scalar_unequal_runs'])} runs negative; min rate / max |rate| "
         f"{s['scalar_unequal_min_rel_rate']:.1e}", "new"],
        ["Thm 17 sufficiency along block-head trajectories (no verdict: an identity)",
         f"{s['block_sufficiency_violations']} violations in {s['block_sufficiency_checked']} (head, time) pairs where the "
         f"exact reading held at every token ({nblocks} runs, {seeds} seeds per (n, beta)); runs whose first negative "
         f"dE_h/dt precedes the first failure of the exact reading: {neg_before_exact} of {nblocks}",
         "consistency check (identity: with M_h' M_h = 0, dE_h/dt = (1/n^3) sum_i of the exact margins of head h, so "
         "this checks energy_rates against radial_dominance, not Thm 17)"
         if s["block_sufficiency_violations"] == 0 and neg_before_exact == 0 else "FAILED (a bug)"],
        ["integrator", f"max | |x| - 1 | at the step times {s['max_drift']:.1e} (dopri5, rtol 1e-11)", "-"],
    ]
    table_s = markdown_table(["n", "beta/beta*", "beta", "holds at t=0 (nb / exact)", "t_fail nb", "gamma_fail nb",
                              "equiangular gamma_fail nb", "t_fail exact", "gamma_fail exact",
                              "equiangular gamma_fail exact", "re-entries (nb / exact)"], _scalar_table(s))
    table_u = markdown_table(["n", "beta/beta*", "beta", "holds at t=0 (nb / exact)", "t_fail nb", "gamma_fail nb",
                              "t_fail exact", "gamma_fail exact", "runs with dE_h/dt < 0"], _unequal_table(s))
    table_b = markdown_table(["n", "beta", "holds at t=0 (exact / nb)", "t_fail exact", "runs with dE_h/dt < 0",
                              "first negative time", "negative before exact failure",
                              "fraction of time negative after failure", "gamma at t_final"], _block_table(s))
    notes = f"""
**Why it cannot be invariant (equiangular flow).** With ``r = |P u^h|^2 / (a^h)^2`` (equal heads) the
readings are ``r >= H - 1`` (exact) and ``r >= (H - 1)/c*(H)`` (norm-bounded, equivalently the radial
fraction ``c = a / |u| <= c*(H)``).  As the tokens merge the tangential force vanishes like
``sqrt(1 - gamma)`` while the radial shadow stays of order one, so ``r -> 0`` and both readings fail
before ``gamma = 1`` for every beta; for ``n -> inf`` at fixed ``gamma > 0``, ``r -> (1 - gamma)/gamma``,
whence the limits ``gamma_fail -> 1/H`` and ``c*(H)^2`` (``c*(H)^2 = 1 - (H - 1) c*(H)``; the golden
ratio again for H = 2: ``1/phi^2 = 0.382``).  At finite n, beta enters only through ``e^(beta)`` against
``n``; below the t = 0 threshold the first failure moves to smaller gamma as beta grows.  Just above the
threshold ``r`` first *rises* with gamma (``dr/dgamma > 0`` at 0 when ``2 beta alpha + n - 2 > 2 (n-1)
e^(-beta alpha)``), so the condition can fail at t = 0 and hold again later: the set where it holds is
neither forward- nor backward-invariant.

**Monotonicity persists beyond the failure** in the scalar-head regime (all ``P u_i^h`` parallel), so
there Condition 8 marks where a sufficient condition stops applying, not a change of behaviour (as
studies/critical_temperature found at t = 0).  With orthogonal block heads (Thms 16-17's setting) the
per-head rates do turn negative, always after the condition has failed, as Thm 17 requires. That is no
evidence for Thm 17: with ``M_h' M_h = 0`` the cross terms ``<f^h, f^h'>`` vanish and ``dE_h/dt`` is
``(1/n^3)`` times the sum over tokens of the exact-reading margins ``|P f_i^h|^2 - a_i^h sum_(h' != h) a_i^h'``
(MODEL.md section 1), so "the exact reading at every token implies dE_h/dt >= 0" holds by algebra, and the
0 violations only check ``energy_rates`` against ``radial_dominance`` (the claims table; no verdict rests on it).

**Random starts, scalar heads** (H = 2, lambda = 1, d = 4n, {seeds} seeds; mean +- 95 % t half-width over
the runs that hold at t = 0; nb = norm-bounded):

{table_s}

At small n the random start is far from orthogonal (``|gamma_ij| ~ 1/sqrt(d)``) and the norm-bounded
reading often fails already at t = 0 below beta*.  Where it holds at t = 0 it fails later, at a mean
inner product well below the equiangular gamma_fail of the same (n, beta) (columns "equiangular"): the
spread of the pairwise inner products makes the worst token fail first.

Unequal strengths (1, 1/2), same settings (beta / beta* refers to beta*(2, n) at alpha = 1):

{table_u}

**Random starts, orthogonal block heads** (d = 8, H = 2, alpha = 1, {seeds} seeds):

{table_b}

Failure times are roots of the worst relative margin (continuous in t) on the integrator's dense
output: sampled {s['settings']['per_step']} times per accepted step, refined by Brent's method, so they
do not depend on an output grid (checked against the closed form to {s['eq_particles_max_t_fail_rel_err']:.1e} on the equiangular runs).
"""
    intro = """Paper: Condition 8 (radial dominance) is a sufficient condition for per-head monotonicity of
the energies on the sphere (Thms 16-17), and holds at orthogonal tokens for beta < beta* (Thm 19).  Whether
it is invariant along trajectories is left open.  We follow it along the equiangular flow (closed form,
checked on particles) and from random starts (scalar heads; orthogonal block heads), in both readings of
MODEL.md, with failure times found on dense output, and check whether per-head monotonicity persists
beyond the failure."""
    figures = [("equiangular.png", "Equiangular flow from orthogonal tokens: gamma and time at the first failure "
                "of Condition 8 against beta (solid norm-bounded, dashed exact; red: the n -> inf limits)"),
               ("example.png", "Two runs on dense output: worst relative margins of both readings (vertical "
                "lines: their first zeros) and per-head rates; scalar heads stay monotone after the failure, block "
                "heads do not"),
               ("random_starts.png", "Random starts: whether Condition 8 holds at t = 0, gamma at its failure "
                "(scalar heads), and how often per-head rates turn negative (block heads)")]
    return write_report(out / "report.md", "Is radial dominance invariant along trajectories?", intro, claims,
                        figures, notes, verdicts)
