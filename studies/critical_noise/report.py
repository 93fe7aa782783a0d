"""Report of the critical_noise study: the l = 1 rates and nu_c (part 1), the noisy continuum limit (part 2).

Reads ``data.json`` (and ``data.npz``, the arrays of part 2) written by run.py; writes ``rates.png``,
``noisy_limit.png`` and ``report.md``.  Run from the repo root: ``python -m studies.critical_noise.run``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from studies._common import (  # noqa: E402
    REFUTED,
    REPRODUCED,
    fit_slope,
    markdown_table,
    mean_ci,  # noqa: E402
    open_study_data,
    save_figure,
    style_axes,
    write_report,
)

COLORS = {0: "k", 1: "tab:blue", 2: "tab:red", 3: "tab:green"}


def _fig_rates(data, out):
    rows, s = data["rows"], data["summary"]
    nu = np.array([r["nu"] for r in rows])
    sig = np.array([r["sigma"] for r in rows])
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    grid = np.linspace(0, nu.max() * 1.05, 50)
    ax[0].plot(grid, 2 * (s["nu_c"] - grid), "k-", lw=1, label="sigma_1(nu) = 2 (c_1 / beta - nu)")
    series = [("particle_rate", "ci95", "o", "tab:blue", 0.0,
               f"particles, tilt {s['tilt']:g} (n = {s['n']}, {s['seeds']} pairs, 95 % CI)"),
              ("tilt_check_rate", "tilt_check_ci95", "s", "tab:orange", 0.004, f"particles, tilt {s['tilt_check']:g}"),
              ("extrapolated_rate", "extrapolated_ci95", "D", "tab:purple", -0.004,
               "particles, extrapolated to tilt 0 (a^2 law)")]
    for key, ci, fmt, c, dx, label in series:
        y, h = np.array([r[key] for r in rows]), [r[ci] for r in rows]
        ax[0].errorbar(nu + dx, y, h, fmt=fmt, ms=4, mfc="none", capsize=3, color=c, label=label)
        ax[1].errorbar(nu + dx, y - sig, h, fmt=fmt, ms=4, mfc="none", capsize=3, color=c, label=label)
    ax[0].plot(nu, [r["pde_rate"] for r in rows], "x", ms=8, color="tab:green", label="PDE (lmax 8, eps Y_10)")
    for a in ax:
        a.axvline(s["nu_c"], color="gray", ls="--", lw=0.8)
        a.axhline(0, color="gray", lw=0.5)
    ax[0].set(xlabel="token noise nu", ylabel="growth rate of m_z", title="l = 1 growth under noise (one head)")
    ax[1].set(xlabel="token noise nu", ylabel="rate - sigma_1(nu)", title="deviation from the closed form (95 % CI)")
    style_axes(ax, legend=7)
    save_figure(fig, out / "rates.png")


def _fig_limit(d, L, out):
    nus, ns, t = d["limit_nus"], d["limit_n"], d["limit_times"]
    w2, w2i, m2, m2i = d["limit_w2"], d["limit_w2_iid"], d["limit_mmd2"], d["limit_mmd2_iid"]
    j = len(t) - 1
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.6))
    for a, nu in enumerate(nus):
        c = COLORS.get(a, None)
        m, h = mean_ci(w2[a, :, :, j])
        f = L["fits"][f"nu={nu:g},t={t[j]:g}"]
        ax[0].errorbar(ns, m, h, fmt="o", color=c, capsize=3,
                       label=f"nu = {nu:g}: slope {f['w2_slope']:.2f} +- {f['w2_stderr']:.2f}")
        ax[0].plot(ns, f["w2_C"] * ns ** f["w2_slope"], "-", color=c, lw=0.8)
        ax[0].plot(ns, w2i[a, :, :, j].mean(axis=-1), "s", mfc="none", color=c, ms=7,
                   label=f"nu = {nu:g}: i.i.d. sample of rho(t)")
        k_seeds = m2.shape[2]
        ax[1].plot(np.repeat(ns, k_seeds) * (1 + 0.03 * (a - 1)), np.sqrt(m2[a, :, :, j]).ravel(), ".", color=c,
                   alpha=0.4, ms=4)
        ax[1].plot(ns, np.sqrt(m2[a, :, :, j].mean(axis=-1)), "o", color=c,
                   label=f"nu = {nu:g}: slope {f['mmd_slope']:.2f} +- {f['mmd_stderr']:.2f}")
        ax[1].plot(ns, np.sqrt(m2i[a, :, 0, j]), "--", color=c, lw=0.8, label=f"nu = {nu:g}: sqrt(E_iid MMD^2)")
        amp = [mean_ci((m2[a, :, :, k] / m2i[a, :, :, k]).ravel()) for k in range(len(t))]
        ax[2].errorbar(t + 0.01 * a, [x[0] for x in amp], [x[1] for x in amp], fmt="o-", color=c, capsize=3,
                       label=f"MMD^2 / E_iid, nu = {nu:g}")
        wr = [w2[a, :, :, k].mean() / w2i[a, :, :, k].mean() for k in range(1, len(t))]
        ax[2].plot(t[1:] + 0.01 * a, wr, "s--", color=c, mfc="none", label=f"W2 / W2_iid, nu = {nu:g}")
    ax[0].plot(ns, w2[0, 0, :, 0].mean() * np.sqrt(ns[0] / ns), "k:", lw=1, label="n^(-1/2)")
    ax[0].set(xscale="log", yscale="log", xlabel="n", ylabel=f"W2(mu_n(t), rho(t)) [rad], t = {t[j]:g}",
              title=f"semi-discrete W2, mean and 95 % CI over {w2.shape[2]} seeds")
    ax[1].set(xscale="log", yscale="log", xlabel="n", ylabel=f"rms MMD (Sobolev s = 2), t = {t[j]:g}",
              title="MMD: rms (large) and per seed (dots); dashed: i.i.d.")
    ax[2].axhline(1, color="gray", lw=0.8)
    ax[2].set(yscale="log", xlabel="time t", ylabel="distance relative to i.i.d. sampling",
              title="relative to i.i.d. sampling (pooled over n, seeds)")
    style_axes(ax, legend=6.5, which="both")
    fig.suptitle("Noisy particles vs the noisy PDE (heads lambda = (1, 0.5), beta = 1); nu = 0: the noiseless pair")
    save_figure(fig, out / "noisy_limit.png")


def _band(ns):
    """Local slope of sqrt(log n / n) over ``ns``: W2 of i.i.d. samples decays between it and -1/2."""
    return fit_slope(ns, 0.5 * np.log(np.log(ns) / ns), log_x=True).slope


def _limit_claims(d, L):
    nus, ns, t = d["limit_nus"], d["limit_n"], d["limit_times"]
    w2, w2i, m2, m2i = d["limit_w2"], d["limit_w2_iid"], d["limit_mmd2"], d["limit_mmd2_iid"]
    later = [k for k in range(len(t)) if t[k] > 0]
    noisy = [a for a in range(len(nus)) if nus[a] > 0]
    band = _band(ns)
    fits = L["fits"]

    def fit(a, k):
        return fits[f"nu={nus[a]:g},t={t[k]:g}"]

    slopes = "; ".join(f"nu = {nus[a]:g}, t = {t[k]:g}: {fit(a, k)['w2_slope']:.3f} +- {fit(a, k)['w2_stderr']:.3f}"
                       for a in noisy for k in later)
    # the fits are through len(ns) per-n means: 95 % Student-t quantile on len(ns) - 2 degrees of freedom
    q = float(stats.t.ppf(0.975, len(ns) - 2))
    in_band = all(-0.5 - q * fit(a, k)["w2_stderr"] <= fit(a, k)["w2_slope"] <= band + q * fit(a, k)["w2_stderr"]
                  for a in noisy for k in later)
    mmd_sl = "; ".join(f"nu = {nus[a]:g}, t = {t[k]:g}: {fit(a, k)['mmd_slope']:.3f} +- {fit(a, k)['mmd_stderr']:.3f}"
                       for a in noisy for k in later)
    mmd_ok = all(abs(fit(a, k)["mmd_slope"] + 0.5) <= q * fit(a, k)["mmd_stderr"] for a in noisy for k in later)
    # amplification of the sampling error, MMD^2 / E_iid pooled over n and seeds, and its trend in n
    j = len(t) - 1
    amp = {a: mean_ci((m2[a, :, :, j] / m2i[a, :, :, j]).ravel()) for a in range(len(nus))}
    amp0 = mean_ci((m2[0, :, :, 0] / m2i[0, :, :, 0]).ravel())
    trend = {a: fit_slope(ns, (m2[a, :, :, j] / m2i[a, :, :, j]).mean(axis=-1), log_x=True, log_y=True)
             for a in range(len(nus))}
    amp_txt = "; ".join(f"nu = {nus[a]:g}: {amp[a][0]:.2f} +- {amp[a][1]:.2f} (trend in n: slope "
                        f"{trend[a].slope:+.2f} +- {trend[a].stderr:.2f})" for a in range(len(nus)))
    wr = {a: w2[a, :, :, j].mean() / w2i[a, :, :, j].mean() for a in range(len(nus))}
    rat = L["w2_ratio_to_noiseless"]
    raw = "; ".join(f"nu = {nus[a]:g}: " + ", ".join(f"{rat['mean'][a - 1][i][j]:.2f} +- {rat['ci95'][a - 1][i][j]:.2f}"
                                                     for i in range(len(ns))) for a in noisy)
    rm, rh = np.asarray(rat["mean"])[:, :, j], np.asarray(rat["ci95"])[:, :, j]     # (noisy nu, n)
    below, above = int(np.sum(rm + rh < 1)), int(np.sum(rm - rh > 1))
    amp_dec = all(amp[noisy[q]][0] < amp[0][0] for q in range(len(noisy)))
    amp_iid = [a for a in noisy if abs(amp[a][0] - 1) <= amp[a][1]]
    inflated = any(m - h > 1 for m, h in amp.values())
    flat = all(abs(trend[a].slope) <= q * trend[a].stderr for a in noisy)
    hyp = ("hypotheses: i.i.d. start from a smooth density, two zonal mean exp heads, beta = 1, nu < nu_c = "
           f"{L['nu_c']:.3f}, t <= {t[-1]:g}, the PDE resolved (lmax {L['lmax']}), SDE step {L['dt']:g}")
    claims = [
        ("H1 + H2 (MODEL.md 3-4): the PDE with nu > 0 is the mean-field limit of the noisy particles, and "
         f"W2(mu_n(t), rho(t)) ~ C n^(-1/2) up to logs ({hyp}; verdict: every slope in [-1/2, {band:.2f}] within "
         f"the 95 % t-interval ({len(ns) - 2} dof), the upper end the local slope of sqrt(log n / n))",
         f"slope of log mean W2 vs log n, n = {int(ns[0])}..{int(ns[-1])}, {w2.shape[2]} seeds per n (+- standard "
         f"error of the fit): {slopes}", "reproduced" if in_band else "refuted"),
        ("The same rate in the kernel distance (MMD, Sobolev s = 2; E MMD^2 = C / n exactly for i.i.d. samples)",
         f"slope of log rms MMD vs log n: {mmd_sl}",
         "reproduced" if mmd_ok else "refuted"),
        ("The constant C: noisy particles are as close to rho(t) as n i.i.d. samples of rho(t) (propagation "
         "of chaos taken literally)",
         f"MMD^2 / E_iid MMD^2 at t = 0 (i.i.d. by construction): {amp0[0]:.2f} +- {amp0[1]:.2f}; at t = {t[j]:g}, "
         f"pooled over n and seeds (95 % CI): {amp_txt}; W2 / W2 of a fresh i.i.d. sample at t = {t[j]:g}: "
         + ", ".join(f"nu = {nus[a]:g}: {wr[a]:.2f}" for a in range(len(nus))),
         ("refuted as stated (the i.i.d. value 1 lies below the 95 % CI at "
          + ", ".join(f"nu = {nus[a]:g}" for a in range(len(nus)) if amp[a][0] - amp[a][1] > 1)
          + "): the rate is n^(-1/2) but C is larger than the i.i.d. one by a " if inflated else
          "reproduced: the i.i.d. value 1 is inside every 95 % CI; the measured C relative to the i.i.d. one is a ")
         + (f"factor independent of n (no trend beyond the 95 % t-interval, {len(ns) - 2} dof)" if flat else
            "factor that still varies with n over this range (trend slopes above)")
         + " that shrinks as nu grows: the finite-n fluctuation is amplified by the unstable modes of the flow, "
           "which the noise damps (sigma_l falls by nu l (l+1))"
         + (f"; at nu = {', '.join(f'{nus[a]:g}' for a in amp_iid)} the i.i.d. value is inside the CI"
            if amp_iid else "")),
        ("Does noise bring the particles closer to their PDE? (same n, same starting tokens, each against its "
         "own PDE)",
         f"paired ratio W2(nu) / W2(nu = 0) at t = {t[j]:g} per n = {[int(x) for x in ns]} (mean +- 95 % CI "
         f"over seeds): {raw}",
         ("in MMD relative to i.i.d. sampling, yes: " if amp_dec else "in MMD relative to i.i.d. sampling, no: ")
         + ", ".join(f"{amp[a][0]:.1f}" for a in range(len(nus)))
         + f" for nu = {', '.join(f'{x:g}' for x in nus)}; in raw W2, of {len(noisy) * len(ns)} paired ratios "
           f"{below} are below 1 and {above} above 1 beyond their 95 % CI (W2 is dominated by the small-scale "
           "sampling error, which the noise does not remove, and the noisy density is smoother)"),
    ]
    return claims


def _limit_notes(d, L):
    dt = L["dt_check"]
    lines = [f"* Step check on paired Brownian paths (n = {v['n']}, t = {v['t']:g}, {v['seeds']} seeds; the "
             f"dt = {v['dt_fine']:g} increments sum to the dt = {v['dt']:g} ones; mean +- 95 % t): nu = {v['nu']:g}: "
             f"W2 {v['w2'][0]:.4f} +- {v['w2'][1]:.4f} vs {v['w2_fine'][0]:.4f} +- {v['w2_fine'][1]:.4f}, paired "
             f"difference {v['w2_diff'][0]:+.4f} +- {v['w2_diff'][1]:.4f}; MMD^2 / E_iid {v['mmd2_over_iid'][0]:.2f} +- "
             f"{v['mmd2_over_iid'][1]:.2f} vs {v['mmd2_over_iid_fine'][0]:.2f} +- {v['mmd2_over_iid_fine'][1]:.2f}, "
             f"paired difference {v['mmd2_over_iid_diff'][0]:+.2f} +- {v['mmd2_over_iid_diff'][1]:.2f}; the coarse "
             f"path replays the main run (largest token difference {v['replay_max_diff']:.1e})" for v in dt.values()]
    lines += [f"* Method check (n = {m['n']}, one seed, t = {m['t']:g}, nu = {m['nu']:g}): exact W2 with the density "
              f"on the PDE's {m['nodes']} nodes {m['exact']:.4f}, semi-discrete {m['semidiscrete']:.4f} "
              f"(geodesic bracket [{m['bracket'][0]:.4f}, {m['bracket'][1]:.4f}]); relative difference "
              f"{m['rel_diff']:.1e}" for m in L["method_checks"]]
    lines.append("* PDE resolution: largest spectral tail " + ", ".join(
        f"nu = {k}: {v['max_spectral_tail']:.1e}" for k, v in L["pde"].items())
        + " (monitor threshold 1e-3); largest relative width of the geodesic W2 bracket "
        + f"{L['max_bracket_rel_width']:.1e}.")
    lines.append(f"* t = 0 distances identical at every nu (same tokens, same density): {L['t0_identical_across_nu']}.")
    ns, t, w2 = d["limit_n"], d["limit_times"], d["limit_w2"]
    rows = []
    for a, nu in enumerate(d["limit_nus"]):
        for i, n in enumerate(ns):
            cells = []
            for k in range(len(t)):
                m, h = mean_ci(w2[a, i, :, k])
                cells.append(f"{m:.4f} +- {h:.4f}")
            rows.append([f"{nu:g}", str(int(n))] + cells)
    table = markdown_table(["nu", "n"] + [f"W2 at t = {x:g}" for x in t], rows)
    return "\n".join(lines) + f"\n\nMean W2 and 95 % CI over {w2.shape[2]} seeds:\n\n{table}\n"


def _coverage(rows, key, ci):
    """``(k, p)``: how many rates lie within their 95 % interval of sigma_1, and P(at most k of m) if all are honest."""
    k = sum(abs(r[key] - r["sigma"]) <= r[ci] for r in rows)
    return int(k), float(stats.binom.cdf(k, len(rows), 0.95))


def _rate_claims(s, rows):
    """Part 1: the rates, the slope in nu and nu_c, each against the closed form with its interval.

    The verdicts use the rates extrapolated to tilt 0 (the ``a^2`` nonlinearity removed, run.extrapolate);
    the raw rates at the small tilt are shown next to them.
    """
    m = s["n_rates"]
    k_ext, p_ext = _coverage(rows, "extrapolated_rate", "extrapolated_ci95")
    k_raw, p_raw = _coverage(rows, "particle_rate", "ci95")
    k_big, p_big = _coverage(rows, "tilt_check_rate", "tilt_check_ci95")
    le, lr, lc = s["line_extrapolated"], s["line"], s["line_tilt_check"]

    def ok_slope(ln):
        return abs(ln["slope"] - s["slope_closed_form"]) <= ln["slope_ci95"]

    def ok_nuc(ln):
        return abs(ln["nu_c"] - s["nu_c"]) <= ln["nu_c_ci95"]

    def sl(ln):
        return f"{ln['slope']:.3f} +- {ln['slope_ci95']:.3f}"

    def zc(ln):
        return f"{ln['nu_c']:.4f} +- {ln['nu_c_ci95']:.4f}"

    cover_ok = p_ext >= 0.05
    a, ac = s["tilt"], s["tilt_check"]
    setup = (f"n = {s['n']}, {s['seeds']} antithetic pairs per nu (independent seeds per nu, the same at both tilts), "
             f"{s['steps']} SDE steps over one e-fold")
    claims = [
        ("sigma_1(nu) = 2 (c_1 / beta - nu) at every nu from the noisy particles (one mean exp head, beta = 1, "
         "tilted uniform start in the linear regime)",
         f"rates extrapolated to tilt 0 (a^2 law from tilts {a:g} and {ac:g}, per seed): {k_ext} of {m} inside their 95 % "
         f"t-interval around sigma_1 (P(<= {k_ext} of {m}) = {p_ext:.2f} if every interval is honest), largest "
         f"|rate - sigma_1| {s['max_abs_rate_error_extrapolated']:.4f}; raw at tilt {a:g}: {k_raw} of {m} (P = "
         f"{p_raw:.2f}), largest {s['max_abs_rate_error_particles']:.4f}; raw at tilt {ac:g}: {k_big} of {m} (P = "
         f"{p_big:.2f}); {setup}",
         "reproduced" if cover_ok else "refuted"),
        ("d sigma_1 / d nu = -l (l + 1) = -2 on S^2 (MODEL.md 3)",
         f"slope of the least-squares line through the {m} (nu, rate) points (95 % t-interval, {le['dof']} dof): "
         f"extrapolated {sl(le)}; raw tilt {a:g}: {sl(lr)}; raw tilt {ac:g}: {sl(lc)}",
         "reproduced" if ok_slope(le) else "refuted"),
        ("nu_c = c_1 / beta (the zero of sigma_1)",
         f"closed form {s['nu_c']:.4f}; zero of the line (95 %, delta method): extrapolated {zc(le)}; raw tilt {a:g}: "
         f"{zc(lr)}; raw tilt {ac:g}: {zc(lc)}",
         "reproduced" if ok_nuc(le) else "refuted"),
        (f"Why the earlier runs (tilt {ac:g}) were 7-10 % below sigma_1",
         f"at tilt {ac:g} the rates miss sigma_1 beyond their interval at {m - k_big} of {m} nu, by "
         + ", ".join(f"{r['tilt_check_rate'] - r['sigma']:+.4f}" for r in rows)
         + f"; at tilt {a:g} by " + ", ".join(f"{r['particle_rate'] - r['sigma']:+.4f}" for r in rows)
         + " (nu / nu_c = " + ", ".join(f"{r['ratio']:g}" for r in rows) + ")",
         f"the nonlinearity of the tilted start, of order a^2 (amplitude equation A' = sigma A - c A^3, and the "
         f"a^2 harmonics of the tilt): removing it by the a^2 law leaves {k_ext} of {m} rates inside their intervals. "
         "The former numbers (n = 3000, the plain seed mean of m_z, the same 10 starts at every nu) also carried "
         "sampling error common to every nu, which that estimator could not separate from a bias (not re-measured)"),
    ]
    return claims, ok_slope(le) and ok_nuc(le) and cover_ok, p_ext


def _verdicts(s, L, d, part1_ok, p_cover, limit_claims):
    ln = s["line_extrapolated"]
    hyp1 = ("uniform state on S^2, one value-aligned mean exp head (lambda = 1, beta = 1), token noise of generator "
            "nu Lap_S (the Ito SDE of MODEL.md 3), linear regime (small perturbation), n -> infinity")
    dt = L["dt_check"]
    step = "; ".join(f"nu = {v['nu']:g}: MMD^2 / E_iid {v['mmd2_over_iid'][0]:.2f} (dt {v['dt']:g}) - "
                     f"{v['mmd2_over_iid_fine'][0]:.2f} (dt {v['dt_fine']:g}) = {v['mmd2_over_iid_diff'][0]:+.2f} +- "
                     f"{v['mmd2_over_iid_diff'][1]:.2f}" for v in dt.values())
    hyp2 = (f"i.i.d. start from a smooth density, two zonal mean exp heads, beta = 1, nu < nu_c = {L['nu_c']:.3f}, "
            f"t <= {L['times'][-1]:g}, PDE resolved (lmax {L['lmax']})")
    w2_claim, _, const_claim, _ = limit_claims
    moved = [f"{v['nu']:g}" for v in dt.values() if abs(v["mmd2_over_iid_diff"][0]) > v["mmd2_over_iid_diff"][1]]
    rel_step = max((abs(v["mmd2_over_iid_diff"][0]) + v["mmd2_over_iid_diff"][1]) / v["mmd2_over_iid_fine"][0]
                   for v in dt.values())      # upper end of the paired difference, relative to the fine value
    m2, m2i, j = d["limit_mmd2"], d["limit_mmd2_iid"], len(L["times"]) - 1
    amp = [mean_ci((m2[a, :, :, j] / m2i[a, :, :, j]).ravel()) for a in range(len(L["nus"]))]
    inflated = any(m - h > 1 for m, h in amp)   # the literal reading fails where 1 lies below a 95 % CI
    return [
        ["sigma_1(nu) = sigma_1(0) - 2 nu (d sigma_1 / d nu = -l (l+1) = -2) and nu_c = c_1 / beta (MODEL.md 3)", hyp1,
         REPRODUCED if part1_ok else REFUTED,
         f"slope {ln['slope']:.3f} +- {ln['slope_ci95']:.3f} (95 % t, {ln['dof']} dof) vs -2; nu_c {ln['nu_c']:.4f} +- "
         f"{ln['nu_c_ci95']:.4f} vs {s['nu_c']:.4f}; {s['extrapolated_inside_ci']} of {s['n_rates']} rates inside their "
         f"95 % interval (binomial P = {p_cover:.2f}); rates extrapolated to tilt 0 from tilts {s['tilt']:g} and "
         f"{s['tilt_check']:g} (raw tilt {s['tilt']:g}: slope {s['line']['slope']:.3f} +- {s['line']['slope_ci95']:.3f}, "
         f"{s['rates_inside_ci']} of {s['n_rates']} inside); n = {s['n']}, {s['seeds']} antithetic pairs per nu"],
        ["The noisy PDE is the mean-field limit of the noisy particles, W2 ~ C n^(-1/2) up to logs (H1 + H2, "
         "MODEL.md 3-4)", hyp2, REPRODUCED if w2_claim[2] == "reproduced" else REFUTED,
         f"{w2_claim[1]}; SDE step {L['dt']:g}"],
        ["Propagation of chaos taken literally: C equals the i.i.d. constant", hyp2,
         REFUTED if inflated else REPRODUCED,   # no hypothesis is named under which C would be the i.i.d. one
         f"{const_claim[1]}; step check on paired Brownian paths (n = {int(L['n_values'][-1])}, t = "
         f"{L['times'][-1]:g}, {L['seeds']} seeds, paired difference +- 95 % t): {step}: "
         + (f"the step changes the amplification beyond its interval at nu = {', '.join(moved)}, by at most "
            f"{rel_step:.1%} of it: the amplification is not a discretization effect" if moved else
            "no discretization effect beyond the intervals")],
    ]


def report(data_dir: Path, out_dir: Path | None = None) -> Path:
    out, d, data = open_study_data(data_dir, out_dir)
    s, rows, L = data["summary"], data["rows"], data["limit"]
    _fig_rates(data, out)
    _fig_limit(d, L, out)
    rate_claims, part1_ok, p_cover = _rate_claims(s, rows)
    pde_claim = ("The PDE with nu > 0 has the same rates", f"largest |PDE rate - sigma_1| {s['max_abs_rate_error_pde']:.1e}",
                 "reproduced" if s["max_abs_rate_error_pde"] < 1e-5 else "refuted")
    limit_claims = _limit_claims(d, L)
    claims = rate_claims + [pde_claim] + limit_claims
    verdicts = _verdicts(s, L, d, part1_ok, p_cover, limit_claims)
    table = markdown_table(["nu / nu_c", "nu", "sigma_1 (closed form)", f"particles, tilt {s['tilt']:g} (95 % CI)",
                            "inside CI", f"particles, tilt {s['tilt_check']:g} (95 % CI)",
                            "extrapolated to tilt 0 (95 % CI)", "inside CI", "PDE"],
                           [[f"{r['ratio']:.2f}", f"{r['nu']:.4f}", f"{r['sigma']:.4f}",
                             f"{r['particle_rate']:.4f} +- {r['ci95']:.4f}",
                             "yes" if abs(r["particle_rate"] - r["sigma"]) <= r["ci95"] else "no",
                             f"{r['tilt_check_rate']:.4f} +- {r['tilt_check_ci95']:.4f}",
                             f"{r['extrapolated_rate']:.4f} +- {r['extrapolated_ci95']:.4f}",
                             "yes" if abs(r["extrapolated_rate"] - r["sigma"]) <= r["extrapolated_ci95"] else "no",
                             f"{r['pde_rate']:.4f}"]
                            for r in rows])
    intro = (f"Part 1: the growth of the l = 1 moment under token noise, particles and PDE, against sigma_1(nu) "
             f"and nu_c (antithetic pairs of tilts +-a on one sample and one Brownian path; run time "
             f"{s['part1_wall_seconds']:.0f} s wall). Part 2: the noisy continuum limit: particles ``ParticleSystem(nu=...)`` "
             f"(geodesic_strang, dt = {L['dt']:g}) against ``ContinuumPDE(nu=...)`` (lawson_dopri5) from the "
             f"same i.i.d. start (paired_run), nu = {', '.join(f'{x:g}' for x in L['nus'])} (nu_c = {L['nu_c']:.3f}), "
             f"n = {', '.join(str(int(x)) for x in L['n_values'])}, {L['seeds']} seeds per n, t = "
             f"{', '.join(f'{x:g}' for x in L['times'])}; W2 (geodesic, semi-discrete against the continuous "
             f"density) and the spectral MMD. Part 2 run time {L['wall_seconds']:.0f} s wall, {L['cpu_seconds']:.0f} s "
             "CPU.")
    notes = f"Part 1 rates:\n\n{table}\n\nPart 2:\n\n{_limit_notes(d, L)}"
    return write_report(out / "report.md", "Critical noise and the noisy continuum limit", intro, claims,
                        figures=[("rates.png", "l = 1 growth rates against nu: particles, PDE, closed form"),
                                 ("noisy_limit.png", "noisy particles vs noisy PDE: W2 and MMD against n, and the "
                                                     "amplification of the sampling error against t")],
                        notes=notes, verdicts=verdicts)
