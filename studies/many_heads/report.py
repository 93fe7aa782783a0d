"""Figures and report.md of the many-heads study (reads data.npz / data.json of run.py)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import TwoSlopeNorm  # noqa: E402

from studies._common import (  # noqa: E402
    OUTSIDE,
    REFUTED,
    REPRODUCED,
    SHARPENED,
    open_study_data,
    save_figure,
    style_axes,
    write_report,
)
from studies.heterogeneous_heads.report import artefact_text  # noqa: E402

HYP_22 = ("scalar heads M_h = V_h = lambda_h I (lambda_h >= 0), exp kernel, softmax normalization, sphere, "
          "orthogonal tokens (gamma = 0, early rate), fixed total Lambda = H lambda_bar")
HYP_25 = "scalar heads M_h = V_h = lambda_h I (lambda_h > 0), sphere, equiangular start, linearized at gamma ~ 0"
HYP_19 = ("scalar heads M_h = V_h = alpha I (one alpha > 0), exp kernel, orthogonal tokens (t = 0), sphere, "
          "mean or softmax normalization")


def _f(x, p=4):
    return "n/a" if x is None else (f"{x:.{p}g}" if isinstance(x, float) else str(x))


def _pct(lo_hi):
    lo, hi = lo_hi
    return f"{lo:.0%}" if lo == hi else f"{lo:.0%}..{hi:.0%}"


def _fig_best(d, meta, path):
    A = meta["part_A"]
    lbar, best = d["A_lbar"], d["A_best"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    ax = axes[0]
    for h, H in enumerate(meta["Hs"]):
        ax.plot(lbar, best[h], color=f"C{h}", label=f"H = {H}: max over all splits of sum phi - H phi(lambda_bar)")
    ax.axvline(A["lambda_max"], color="k", ls="--", lw=1, label=f"lambda_max = {A['lambda_max']:.3f}")
    ax.axvline(A["lambda_c"], color="C3", ls=":", lw=1.5, label=f"lambda_c = {A['lambda_c']:.3f} (paper's condition)")
    ax.set_xlim(lbar.min(), lbar.max())
    ax.set_xlabel("mean strength lambda_bar")
    ax.set_ylabel("best early gain G*")
    ax.set_title(f"Best split of a fixed total, n = {meta['n']}, beta = {meta['beta']}", fontsize=10)
    style_axes(ax, legend=7)
    ax = axes[1]
    ns = d["A_nec_ns"]
    ref = d["A_nec_ref"]
    for h, H in enumerate(meta["Hs"]):
        pos = (d["A_nec"][h] - ref[:, 0]) / (ref[:, 1] - ref[:, 0])
        ax.semilogx(ns, pos, "o-", color=f"C{h}", label=f"H = {H}")
    ax.axhline(1, color="C3", ls=":", label="lambda_c (paper)")
    ax.axhline(0, color="k", ls="--", lw=1, label="lambda_max")
    ax.set_xlabel("tokens n")
    ax.set_ylabel("(lambda_bar_min - lambda_max) / (lambda_c - lambda_max)")
    ax.set_title("Smallest mean strength at which some split helps", fontsize=10)
    style_axes(ax, legend=8)
    save_figure(fig, path)


def _fig_maps(d, meta, path):
    lbar, s, gain, T = d["A_lbar"], d["A_s"], d["A_gain"], d["A_T"]
    lam_c = meta["part_A"]["lambda_c"]
    Hs, fams = meta["Hs"], meta["families"]
    rows = [h for h, H in enumerate(Hs) if H > 2]
    fig, axes = plt.subplots(len(rows), len(fams), figsize=(17, 4.6 * len(rows)), squeeze=False)
    for r, h in enumerate(rows):
        for f, fam in enumerate(fams):
            ax = axes[r, f]
            g = gain[h, f].T
            lim = np.abs(g).max()
            im = ax.pcolormesh(lbar, s, g, cmap="RdBu", norm=TwoSlopeNorm(0, -lim, lim), shading="auto")
            ax.contour(lbar, s[1:], g[1:], levels=[0], colors="k", linewidths=1.5)
            tr = np.log(T[h, f, 1] / T[h, f, 1][:, :1]).T
            ax.contour(lbar, s[1:], tr[1:], levels=[0], colors="y", linewidths=1.2, linestyles="--")
            ax.axvline(lam_c, color="C3", ls=":", lw=1.5, label="paper: lambda_bar = lambda_c")
            lb = np.linspace(lam_c, lbar.max(), 200)
            ax.plot(lb, 1 - lam_c / lb, "C2--", lw=1.5, label="Jensen: min lambda_h = lambda_c")
            ax.set_ylim(s.min(), s.max())
            fig.colorbar(im, ax=ax, label="early gain G")
            ax.set_xlabel("mean strength lambda_bar")
            ax.set_ylabel("spread s (smallest head lambda_bar (1 - s))")
            ax.set_title(f"H = {Hs[h]}, {fam}: blue = split faster early; black G = 0, yellow T(0.9) equal", fontsize=8)
            ax.legend(fontsize=7, loc="lower right")
    save_figure(fig, path)


def _fig_runs(d, meta, path):
    runs = meta["part_A"]["runs"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    for k, r in enumerate(runs):
        t, g, go, eps = (d[f"A_run{k}_{key}"] for key in ("t", "gamma", "gamma_ode", "eps"))
        lab = f"H={r['H']} {r['family']}, lambda={np.round(r['lambdas'], 2).tolist()}"
        axes[0].plot(t, g, color=f"C{k}", label=lab)
        axes[0].plot(t, go, "k:", lw=1)
        axes[1].semilogy(t, eps, color=f"C{k}", label=f"fit {-r['late_slope_particles']:.3f}, 2 Lambda = {r['late_rate_theory']:.1f}")
        axes[1].semilogy(t, 1 - go, "k:", lw=1)
    axes[0].set_xlabel("time t")
    axes[0].set_ylabel("gamma(t): particles (colour), equiangular ODE (dotted)")
    axes[1].set_xlabel("time t")
    axes[1].set_ylabel("1 - gamma (pair distances)")
    axes[1].set_ylim(1e-12, 1.5)
    style_axes(axes, legend=7)
    save_figure(fig, path)


def _fig_times(d, meta, path):
    B = meta["part_B"]
    hs, hn, hd = B["hd_headsets"], d["B_hn"], d["B_hd"]
    fig, axes = plt.subplots(1, 3, figsize=(18, 4.8))
    mk = "osd^v"
    for a, k in enumerate(hs):
        sq = B["sum_sq"][k]
        for i, n in enumerate(hn):
            fits = B["fits"][f"{k}/relu-mean/n={int(n)}"]["mean_T_ci"]
            m = np.array([f[0] for f in fits], dtype=float) * sq
            ci = np.array([np.nan if f[1] is None else f[1] for f in fits], dtype=float) * sq
            axes[0].errorbar(hd * (1 + 0.04 * a), m, yerr=ci, fmt=mk[a] + "-", color=f"C{i}", ms=4, capsize=2,
                             label=f"{k}, n = {int(n)}")
            sf = B["fits"][f"{k}/exp-softmax/n={int(n)}"]["mean_T_ci"]
            axes[1].errorbar(hd * (1 + 0.04 * a), [f[0] for f in sf], yerr=[np.nan if f[1] is None else f[1] for f in sf],
                             fmt=mk[a] + "-", color=f"C{i}", ms=4, capsize=2, label=f"{k}, n = {int(n)}")
            rt = B["relu_over_softmax"][f"{k}/n={int(n)}"]
            axes[2].errorbar(hd * (1 + 0.04 * a), [f[0] for f in rt], yerr=[np.nan if f[1] is None else f[1] for f in rt],
                             fmt=mk[a] + "-", color=f"C{i}", ms=4, capsize=2, label=f"{k}, n = {int(n)}")
    for i, n in enumerate(hn):
        lin = d["B_theory_hd"][0, 1, 0, i]        # one head, relu-mean, linearized
        axes[0].plot(hd, lin, ":", color=f"C{i}", lw=1)
    axes[0].set_title("ReLU (mean): T x sum lambda_h^2 (markers: head sets; dotted: linearized, 1 head)", fontsize=9)
    axes[0].set_ylabel("T(mean inner product = 1/2) x sum lambda_h^2")
    axes[1].set_title("exp-softmax: T (flat in d); heads speed it up by ~ sum phi(lambda_h) / phi(1)", fontsize=9)
    axes[1].set_ylabel("T")
    axes[1].set_yscale("log")
    axes[2].set_title("separation T_relu-mean / T_exp-softmax (same tokens)", fontsize=9)
    axes[2].set_ylabel("ratio")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("dimension d (random tokens, d >> n; 95 % CIs over seeds)")
    style_axes(axes, legend=6)
    save_figure(fig, path)


def _fig_thresholds(d, meta, path):
    s, ns, th, naive = d["C_s"], d["C_ns"], d["C_thresholds"], d["C_naive"]
    Hs = meta["Hs"]
    show = [i for i, n in enumerate(ns) if int(n) in (32, 128)] or [len(ns) - 1]
    fig, axes = plt.subplots(len(show), len(Hs), figsize=(16, 4.3 * len(show)), squeeze=False)
    for r, i in enumerate(show):
        for h, H in enumerate(Hs):
            ax = axes[r, h]
            ax.plot(s, th[0, 0, h, i], "C0-", lw=2, label="derived, norm-bounded, mean")
            ax.plot(s, th[0, 1, h, i], "C1--", lw=1.5, label="derived, norm-bounded, softmax")
            ax.plot(s, th[1, 0, h, i], "C2-", lw=1.5, label="derived, exact reading, mean")
            for k, (name, st) in enumerate((("mean alpha", "k:"), ("max alpha", "C3:"), ("min alpha", "C4:"))):
                ax.plot(s, naive[k, h, i], st, lw=1.5, label=f"paper's beta*(H, n, {name})")
            top = np.nanmax(np.where(np.isfinite(th[:, :, h, i]), th[:, :, h, i], np.nan)) * 1.3
            ax.set_ylim(0, top)
            ax.set_xlabel("spread s (alpha_h = 1 + s t_h, t_h equispaced on [-1, 1])")
            ax.set_ylabel("beta where Condition 8 first fails")
            ax.set_title(f"H = {H}, n = {int(ns[i])}", fontsize=10)
    style_axes(axes, legend=7)
    save_figure(fig, path)


def _verdicts(meta):
    A, B, C = meta["part_A"], meta["part_B"], meta["part_C"]
    big = [h for h in meta["Hs"] if h > 2]
    late = [r for r in A["runs"]]
    late_err = max(abs(-r["late_slope_particles"] / r["late_rate_theory"] - 1) for r in late)
    tf = B["theory_fits"]
    seeds = len(meta["seeds"])
    hs = [k for k in B["hd_headsets"] if k != "1 head"]
    relu_slopes = "; ".join(
        f"{k}, n={n}: {B['fits'][f'{k}/relu-mean/n={n}']['slope_T_vs_lnd']:.2f} +- {B['fits'][f'{k}/relu-mean/n={n}']['ci95']:.2f}"
        f" (linearized {B['fits'][f'{k}/relu-mean/n={n}']['linearized_slope']:.2f})" for k in hs for n in meta["hd_n"])
    soft_slopes = ", ".join(f"{B['fits'][f'{k}/exp-softmax/n={n}']['slope_T_vs_lnd']:+.3f} +- {B['fits'][f'{k}/exp-softmax/n={n}']['ci95']:.3f}"
                            for k in hs for n in meta["hd_n"])
    resc = "; ".join(f"{k}: {_f(B['rescale'][k]['relu_T_times_sumsq_over_one_head_max_rel_dev'], 2)}" for k in hs
                     if k in B["rescale"])
    Cs = C["C"]
    keys = [f"H{H}/{nz}" for H in meta["Hs"] for nz in ("mean", "softmax")]
    rng = lambda name: (min(Cs[f"{k}/{name}"] for k in keys), max(Cs[f"{k}/{name}"] for k in keys))  # noqa: E731
    mean_over, mean_under = rng("mean_alpha_overestimates_fraction"), rng("mean_alpha_max_underestimate")
    max_over, max_under = rng("max_alpha_overestimates_fraction"), rng("max_alpha_underestimates_fraction")
    min_over = rng("min_alpha_overestimates_fraction")
    out = C["outside"]
    ci = out["negative_fraction_ci95"]
    rows = [
        *_thm22_rows(meta, big),
        ("late rate 1 - gamma ~ C exp(-2 Lambda t) for H = 3, 4", HYP_22.replace("orthogonal tokens (gamma = 0, early rate)",
                                                                           "equiangular, gamma -> 1"),
         REPRODUCED, f"fitted slopes within {late_err:.1e} of 2 Lambda ({len(late)} particle runs, n = d = 32; deterministic)"),
        ("Thm 25, H = 3, 4: T_softmax = O(n)", HYP_25 + ", exp kernel, softmax normalization, start gamma0 = 0", SHARPENED,
         "zeroth-order (frozen-force) linearization: rate sum_h phi(lambda_h), log-log slope vs n "
         + ", ".join(f"{k} {tf[f'{k}/exp-softmax']['loglog_slope_vs_n_linearized']:.3f}" for k in meta["part_B"]["headset_order"])
         + "; the nonlinear ODE grows like log n (slopes " + ", ".join(
             f"{tf[f'{k}/exp-softmax']['loglog_slope_vs_n_nonlinear']:.2f}" for k in meta["part_B"]["headset_order"])
         + f"), as for one head: O(n) holds as an upper bound only; random tokens flat in d (slopes of T vs ln d {soft_slopes}; "
         f"{seeds} seeds, 95 % CIs)"),
        ("Thm 25, H = 3, 4: T_relu = O(n log d) (mean-normalized ReLU)", HYP_25 + ", ReLU kernel, mean normalization, "
         "start gamma0 ~ 1/sqrt(d), regime sqrt(d) > n", REPRODUCED,
         "positive ReLU-mean heads are exactly one head of strength sqrt(sum lambda_h^2) (equiangular ODE times x sum "
         f"lambda_h^2 = one-head time to {B['relu_identity_max_rel']:.1e}; random tokens, same seeds: {resc}, the crossing "
         f"interpolation), so the one-head verdict carries over; slopes of T vs ln d ({seeds} seeds, 95 % CI): {relu_slopes}"),
        ("Thm 19 with unequal alpha_h: beta*(H, n, alpha) with alpha = mean / max / min strength", HYP_19
         + "; unequal alpha_h are outside the statement (one alpha)", OUTSIDE,
         "the derived threshold (theory.radial_dominance_threshold; = beta* for equal strengths to "
         f"{max(Cs[f'H{H}/s0_vs_beta_star_max_abs'] for H in meta['Hs']):.0e}; particle thresholds on "
         f"{len(meta['c_seeds'])} random rotations agree to {C['particle_vs_theory_max_abs_err']:.1e}) is tracked by no "
         f"single-alpha substitution (H = {meta['Hs']}, n = {meta['part_C_ns']}, s in (0, 0.9], both normalizations): "
         + ("beta*(mean alpha) lies strictly above the threshold at every point (an upper bound, never attained for "
            "s > 0)" if mean_under[1] < 0 and mean_over[0] == 1.0 else
            f"beta*(mean alpha) overestimates at {_pct(mean_over)} of the points and underestimates by up to {mean_under[1]:.2g}")
         + f"; beta*(max alpha) overestimates at {_pct(max_over)} and underestimates at {_pct(max_under)} of the points "
         f"(per H and normalization: no bound); beta*(min alpha) overestimates at {_pct(min_over)}; the weakest head fails first "
         f"({C['weakest_head_fails_first_fraction']:.0%} of cases) (deterministic)"),
        ("Thm 19 with unequal alpha_h: per-head monotonicity holds for beta below the threshold", HYP_19
         + ", alpha_h > 0 unequal (shared span)", SHARPENED,
         f"holds for every beta: min_h dE_h/dt / max |dE_h/dt| = {C['min_per_head_rate_ratio_t0']:.3g} > 0 at t = 0 "
         f"(beta <= {max(meta_grid(meta)):.0f}) and {C['min_per_head_rate_ratio_along_flow']:.3g} > 0 along the equiangular flow, "
         "since P u_i^h = (positive) P sum_{j != i} x_j for every head; Condition 8 is only sufficient (deterministic)"),
        ("(same, block heads alpha_h P_h in general position)", "heads on orthogonal blocks (not scalar), unequal "
         f"alpha = {np.round(out['alphas'], 2).tolist()}, random orthonormal tokens, H = {out['H']}, n = {out['n']}", OUTSIDE,
         f"some dE_h/dt < 0 on the beta grid for {out['negative_fraction']:.0%} of {len(out['first_negative_beta'])} seeds "
         f"(95 % Wilson CI {ci[0]:.2f}..{ci[1]:.2f}); not scalar heads, so Thm 19 does not speak to it"),
    ]
    return rows


def _merged_check(checks):
    """One ``counterexample_check`` summary over several families (worst case of each number)."""
    cs = [c for c in checks if c.get("points")]
    if not cs:
        return {"points": 0}
    return {"points": sum(c["points"] for c in cs), "min_relative_loss": min(c["min_relative_loss"] for c in cs),
            "max_relative_loss": max(c["max_relative_loss"] for c in cs),
            "min_loss_over_roundoff_bound": min(c["min_loss_over_roundoff_bound"] for c in cs),
            "particle_field_all_negative": all(c["particle_field_all_negative"] for c in cs),
            "particle_field_max_rel_diff": max(c["particle_field_max_rel_diff"] for c in cs),
            "solver_rtol": cs[0]["solver_rtol"],
            "short_runs": [{"split_behind": all(r["split_behind"] for c in cs for r in c["short_runs"]),
                            "lag_over_solver_tol": min(r["lag_over_solver_tol"] for c in cs for r in c["short_runs"])}]}


def _thm22_rows(meta, big):
    """Thm 22 for H = 3, 4: the universal and the existential reading, verdicts from the flags of run.py's
    ``readings`` (pooled over the three split families, per family in the evidence)."""
    A = meta["part_A"]["A"]
    keys = [f"H{H}/{f}" for H in big for f in meta["families"]]
    rd = {k: A[k]["readings"] for k in keys}
    k, m = sum(r["counterexamples"] for r in rd.values()), sum(r["region_points"] for r in rd.values())
    a, b = (sum(r["lambda_bar_with_helping_split"] for r in rd.values()),
            sum(r["lambda_bar_above_lambda_c"] for r in rd.values()))
    ex = [A[f"H{H}/best_split_existential"] for H in big]
    ea, eb = sum(e["lambda_bar_with_helping_split"] for e in ex), sum(e["lambda_bar_above_lambda_c"] for e in ex)
    jensen_ok = all(A[key]["jensen_region_all_positive"] for key in keys)
    jpts = sum(A[key]["jensen_points"] for key in keys)
    hyp = (HYP_22 + f"; H = {big} (n = {meta['n']}, beta = {meta['beta']}); reading: lambda_bar = Lambda/H, "
           "splits of the same total in three families (linear, one strong, one weak), spread s in (0, 0.99]")
    check = _merged_check([r["check"] for r in rd.values()])
    lag = check["short_runs"][0]["lag_over_solver_tol"] if check.get("points") else float("nan")
    return [
        ("Thm 22, H = 3, 4, universal reading: every split with lambda_bar > lambda_c has a larger early rate",
         hyp + "; for all s", REFUTED if any(r["universal_refuted"] for r in rd.values()) else REPRODUCED,
         f"counterexamples (lambda_bar > lambda_c, G < -round-off bound): {k}/{m} grid points = {k / m:.1%} (fractions of "
         f"deterministic (lambda_bar, s) grids, not of random samples: no binomial interval); per family "
         + ", ".join(f"{key} {r['counterexamples']}/{r['region_points']}" for key, r in rd.items()) + "; "
         + artefact_text(check).replace(" by " + f"{lag:.1e}", f" by at least {lag:.1e}")
         + f"; holds under the sharpened hypothesis min_h lambda_h >= lambda_c (Jensen: G > 0 at all {jpts} such grid "
         f"points: {jensen_ok}; a consistency check of a proved inequality) (deterministic: closed-form rates, no seeds)"),
        ("Thm 22, H = 3, 4, existential reading: for every lambda_bar > lambda_c some heterogeneous split has a larger "
         "early rate", hyp.split("; reading:")[0] + "; there exists a split of the total (any lambda_h >= 0)",
         REPRODUCED if all(e["holds"] for e in ex) else REFUTED,
         f"best split over the whole simplex (one-parameter scan): G* > 1e-12 phi_max at {ea}/{eb} (H, lambda_bar > "
         f"lambda_c) grid points (smallest G* {min(e['min_best_gain_above'] for e in ex):.2g}); within the three families "
         f"{a}/{b} (family, lambda_bar) columns have a grid spread with G > round-off bound"
         + (" (the others: lambda_bar just above lambda_c, where the helping spreads lie below the smallest grid spread; "
            "small spreads help since phi'' > 0 there)" if a < b else "")
         + "; for H >= 3 lambda_bar > lambda_c is not necessary (claims table) (deterministic)"),
    ]


def meta_grid(meta):
    return meta.get("_c_grid", [8.0])


def _claims(meta):
    A, B, C = meta["part_A"], meta["part_B"], meta["part_C"]
    nec = A["smallest_helping_lambda_bar"]
    ref = A["lambda_max_c_by_n"]
    nec_txt = "; ".join(f"n={n}: " + ", ".join(f"H={H} {nec[str(H)][n]:.4f}" for H in meta["Hs"])
                        + f" (lambda_max {ref[n][0]:.4f}, lambda_c {ref[n][1]:.4f})" for n in sorted(ref, key=int))
    fam_below = ", ".join(f"H{H}/{f} {A['A'][f'H{H}/{f}']['helping_below_lambda_c_fraction']:.1%}"
                          for H in meta["Hs"] for f in meta["families"] if H > 2 or f == "linear")
    bs = A["best_split_below_lambda_c"]
    bs_txt = "; ".join(f"H={H}: G* = {bs[H]['gain']:.3g} at {np.round(bs[H]['lambdas'], 3).tolist()}" for H in bs)
    big = [h for h in meta["Hs"] if h > 2]
    run_rows = []
    for key in [f"H{H}/{f}" for H in big for f in meta["families"]]:
        r = A["A"][key]
        run_rows.append(f"{key}: faster at {r['T0.9_split_faster_fraction']:.0%}, faster without early gain "
                        f"{r['T0.9_faster_without_early_gain']}, early gain but slower {r['T0.9_early_gain_but_slower']}")
    runs = A["runs"]
    Cs = C["C"]
    soft_dev = max(abs(v["softmax_speedup_linearized"] / m - 1) for v in B["rescale"].values()
                   for m, _ in v["softmax_speedup_vs_one_head"][0])      # n = hd_n[0], where the linearized one is taken
    soft_dev_ode = max(abs(v["softmax_speedup_nonlinear_ode"] / m - 1) for v in B["rescale"].values()
                       for m, _ in v["softmax_speedup_vs_one_head"][0])
    checks = C["particle_checks"]
    rows = [
        ("(our H = 2 finding) lambda_bar > lambda_c is also necessary for some split to help",
         f"smallest lambda_bar with a helping split over the whole simplex (best-split scan, bisection): {nec_txt}; "
         f"on the family grids (n = {meta['n']}), share of helping points with lambda_bar <= lambda_c: {fam_below}",
         "holds for H = 2 (= lambda_c to the 1e-6 bracket); fails for H >= 3: heterogeneity helps from below lambda_c"),
        ("mechanism below lambda_c (H >= 3)", f"best split at lambda_bar = {bs['2']['lambda_bar']:.4f} = 0.97 lambda_c: {bs_txt}: "
         "H - 1 heads moved down towards lambda_max (where phi peaks) and one strong head carried far into the convex tail; "
         "the gain grows with H", "new for H >= 3"),
        ("best-split scan is the maximum over all splits", f"uniform random splits (Dirichlet(1), seeds fixed) never beat "
         f"it: largest excess {A['dirichlet_max_excess_over_scan']:.1e} phi_max; closest approach "
         f"{A['dirichlet_max_relative_shortfall']:.1e} phi_max", "agrees"),
        ("whole run (H = 3, 4): the early advantage carries over to T(0.9)", "; ".join(run_rows), "partly (as for H = 2)"),
        ("particles reproduce the equiangular ODE (H = 3, 4)",
         f"max |gamma_particles - gamma_ODE| = {max(r['max_abs_gamma_diff'] for r in runs):.1e}; pairwise spread <= "
         f"{max(r['max_spread'] for r in runs):.1e}; quadrature T vs theory.clustering_time "
         f"{A['quad_vs_clustering_time_max_rel']:.1e}", "agrees"),
        ("softmax with equal heads: H heads = one head at H times the speed",
         f"equiangular times x H = one-head time to {B['softmax_equal_heads_identity_max_rel']:.1e}", "exact identity"),
        ("softmax with unequal heads: speed-up over one head (random tokens, same seeds)",
         "; ".join(f"{k}: linearized sum phi(lambda_h)/phi(1) = {v['softmax_speedup_linearized']:.3f}, nonlinear ODE "
                   f"{v['softmax_speedup_nonlinear_ode']:.3f}, measured (n={meta['hd_n'][0]}, d = {list(meta['hd_d'])}) "
                   + ", ".join(f"{m:.3f}+-{c:.3f}" for m, c in v['softmax_speedup_vs_one_head'][0])
                   for k, v in B["rescale"].items()),
         f"linearized within {soft_dev:.1%} of the measured speed-up, the nonlinear ODE within {soft_dev_ode:.1%}"),
        ("ReLU-mean: random-token slopes of T vs ln d against the linearized n / (4 sum lambda^2)",
         "measured / linearized: " + "; ".join(
             f"{k}: " + ", ".join(f"n={n} {B['fits'][f'{k}/relu-mean/n={n}']['slope_T_vs_lnd'] / B['fits'][f'{k}/relu-mean/n={n}']['linearized_slope']:.2f}"
                                  for n in meta["hd_n"]) for k in B["hd_headsets"])
         + "; slope x sum lambda^2 / one-head slope: " + "; ".join(
             f"{k}: " + ", ".join(f"{x:.3f}" for x in v["relu_slope_x_sumsq_over_one_head"]) for k, v in B["rescale"].items()),
         "the same fraction of the linearized slope for every head set (exact rescaling); below 1 because the "
         "linearization holds only while (n - 1) gamma << 1"),
        ("Thm 19 closed form: unequal-alpha threshold reduces to beta* at s = 0",
         ", ".join(f"H={H}: {Cs[f'H{H}/s0_vs_beta_star_max_abs']:.1e}" for H in meta["Hs"]), "agrees"),
        ("derived threshold = threshold found on the particle system",
         f"{len(checks)} (H, n, s, normalization, reading) cases x {len(meta['c_seeds'])} rotations: max |diff| "
         f"{C['particle_vs_theory_max_abs_err']:.1e}", "agrees"),
        ("mean vs softmax normalization (unequal alpha_h)",
         ", ".join(f"H={H}: up to {Cs[f'H{H}/mean_softmax_max_diff']:.3f}" for H in meta["Hs"]),
         "differ (the row sums Z^h differ per head); equal for equal alpha_h"),
    ]
    return rows


def report(data_dir: Path, out_dir: Path | None = None) -> Path:
    out, d, meta = open_study_data(data_dir, out_dir)
    meta["_c_grid"] = list(d["C_grid"])
    meta["part_C_ns"] = [int(n) for n in d["C_ns"]]
    _fig_best(d, meta, out / "best_split.png")
    _fig_maps(d, meta, out / "gain_maps.png")
    _fig_runs(d, meta, out / "runs.png")
    _fig_times(d, meta, out / "times.png")
    _fig_thresholds(d, meta, out / "thresholds.png")
    A = meta["part_A"]
    intro = f"""
Issue 15, item 9: paper Thms 22, 25 and 19 beyond H = 2 heads (MODEL.md section 2). Scalar heads
M_h = V_h = lambda_h I (alpha_h in Thm 19's notation), exp kernel unless stated. Seeds: part B random
tokens {len(meta['seeds'])} seeds per (head set, n, d); part C particle thresholds {len(meta['c_seeds'])} random rotations;
everything else is deterministic (closed forms, ODEs, orthonormal starts). Full-mode cost:
{meta['elapsed_s']['total']:.0f} s.

**Readings taken.** The summaries state Thm 22 for H heads with lambda_bar the mean strength and the
split of a fixed total Lambda = sum lambda_h; we read "heterogeneous" as any unequal split of the same
total and scan three one-parameter families (linear, one strong, one weak; for H = 2 they coincide) plus
the best split over the whole simplex. Thm 25 is stated for the linearized dynamics with one rate
constant; with H heads the rates add (softmax: sum_h phi(lambda_h); ReLU-mean: (2/n) sum_h lambda_h^2),
so we read the claim as the same O(n) / O(n log d) with those constants. Thm 19's formula has one alpha;
with unequal alpha_h we derive the threshold of Condition 8 from MODEL.md's radial-fraction computation
(new library function `theory.radial_dominance_threshold`), and test the natural substitutions
alpha -> mean / max / min strength against it.

**Library closed forms and H > 2.** `theory.equiangular_rate`, `solve_equiangular`, `clustering_time`,
`linearized_clustering_time`, `late_rate`, `early_rate` and `heterogeneity_gain` take any number of head
strengths (checked here for H = 3, 4 against particle runs and, for the equal-head and ReLU-mean
identities, against H = 1); `beta_star(H, n, alpha)` and `c_star(H)` take any H but one alpha. The
unequal-alpha form was missing and is added: `theory.radial_dominance_margins` (closed-form Condition 8
margins at orthogonal tokens) and `theory.radial_dominance_threshold` (their first root; tests in
tests/test_theory_many_heads.py against the particle diagnostics and against beta*).

**Headlines.** (1) For H >= 3 the condition lambda_bar > lambda_c (= {A['lambda_c']:.4f} at n = 32) is no longer
necessary: some split helps already from lambda_bar = {A['smallest_helping_lambda_bar']['3'].get('32', float('nan')):.4f} (H = 3),
{A['smallest_helping_lambda_bar']['4'].get('32', float('nan')):.4f} (H = 4); for H = 2 the threshold is lambda_c. (2) ReLU-mean
with any positive heads is one head of strength sqrt(sum lambda_h^2), so Thm 25's O(n log d) carries over
verbatim. (3) With unequal alpha_h no single-alpha beta* gives the threshold; per-head monotonicity
nevertheless holds at every beta under Thm 19's scalar-head hypotheses.
"""
    figures = [("best_split.png", "Best split of a fixed total over the simplex, and where heterogeneity starts to help, H = 2, 3, 4"),
               ("gain_maps.png", "Early gain of three split families, H = 3, 4; black: G = 0, yellow: equal T(0.9)"),
               ("runs.png", "Particles (n = d = 32) against the equiangular ODE; late rate 2 Lambda"),
               ("times.png", "Random tokens, d >> n: ReLU-mean T x sum lambda^2 collapses; softmax flat in d; separation"),
               ("thresholds.png", "Condition 8 threshold with unequal alpha_h against beta* with alpha = mean / max / min")]
    notes = """
* **Why H >= 3 differs from H = 2 (Thm 22).** phi is concave on [0, lambda_c] and convex beyond, and
  phi' takes each value at most twice, so at the best split all positive heads but one share one value a
  (in the concave part) and at most one head sits in the convex tail. With lambda_max < lambda_bar < lambda_c,
  moving H - 1 heads down towards lambda_max raises each of their rates, and the one head that absorbs the
  difference loses at most phi(lambda_bar): the gain is (H - 1)(phi(a) - phi(lambda_bar)) + phi(b) - phi(lambda_bar),
  positive for H >= 3 close enough to lambda_c, and the threshold moves down from lambda_c as H grows (at
  0.88-0.92 and 0.76-0.81 of the way from lambda_max to lambda_c for H = 3, 4, n from 4 to 1e5; see
  best_split.png). For H = 2 the single moved head cannot pay for the strong one.
* **Sufficiency** fails for every H for the same reason as H = 2: at large spreads the weakest head falls
  into the concave part (down to phi(0) = 0). Jensen (all lambda_h >= lambda_c) is sufficient for every family.
* **Thm 25 with H heads.** Mean-normalized ReLU with lambda_h > 0: relu(lambda_h s) = lambda_h relu(s), so the
  velocity is (sum_h lambda_h^2) times the one-head velocity at lambda = 1: an exact time rescaling (the
  particle times agree to the crossing interpolation). Softmax with equal heads is likewise H times one
  head; with unequal heads it is not, and the speed-up over one head is measured against the linearized
  sum_h phi(lambda_h)/phi(1) and the nonlinear equiangular ODE (claims table). ReLU-mean slopes of T
  against ln d fall below the linearized n / (4 sum lambda^2) by the same factor for every head set, as the
  exact rescaling demands (the linearization holds only while (n-1) gamma << 1).
* **Thm 19 with unequal alpha_h.** At orthogonal tokens every head's force is alpha_h (E_h x_i + S_i)/N_h
  (E_h = exp(beta alpha_h), N_h = n or E_h + n - 1), so Condition 8 for head h reads
  alpha_h (n-1)/(N_h E_h) >= sum_{h' != h} |u^{h'}| (norm-bounded): decreasing in beta, one root per head; the
  weakest head fails first. With a weak head the condition can fail already at beta = 0
  ((n-1) alpha_min < sqrt(n) sum of the others), where beta*(mean alpha) still predicts a positive threshold.
* The seed summary says that for general H "c*(H) is related to Lambert W"; the formula it gives,
  c*(H) = (sqrt((H-1)^2 + 4) - (H-1))/2, is the root of a quadratic, and Lambert W enters only lambda_max
  (Thm 22). We use the quadratic root (as `theory.c_star` does); for unequal alpha_h no closed form is
  claimed, the threshold is the first root of explicit margins.
* The rotated block-head case (outside the hypotheses) shows negative per-head rates exist once the heads
  are not scalar: the sharpened statement needs P u_i^h parallel across heads.
"""
    return write_report(out / "report.md", "Beyond H = 2: Thms 22, 25 with H = 3, 4 and Thm 19 with unequal alpha_h",
                        intro, _claims(meta), figures, notes, verdicts=_verdicts(meta))
