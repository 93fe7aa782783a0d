"""Figures and report.md of the linear_stability study (reads data.json written by run.py)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from meanfield.analysis import stability  # noqa: E402
from studies._common import REPRODUCED, SHARPENED, open_study_data, save_figure, write_report  # noqa: E402


def _fig_pde(d, out):
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name in dict.fromkeys(r["case"] for r in d["pde"]):
        rows = [r for r in d["pde"] if r["case"] == name]
        ls = [r["l"] for r in rows]
        line, = ax.plot(ls, [r["sigma"] for r in rows], "-", lw=1)
        ax.plot(ls, [r["measured"] for r in rows], "o", color=line.get_color(), ms=4, label=name)
        bx.semilogy(ls, [abs(r["measured"] / r["sigma"] - 1) for r in rows], "o-", color=line.get_color(), ms=4)
    ax.axhline(0, color="k", lw=0.5)
    ax.set(xlabel="degree l", ylabel="growth rate sigma_l",
           title="PDE: measured (dots) vs exact sigma_l (lines)")
    ax.legend(fontsize=7)
    bx.axhline(1e-4, color="r", ls="--", lw=1, label="claimed tolerance 1e-4")
    bx.axhline(SIGMA_DT ** 4 / 120, color="gray", ls=":", lw=1, label="RK4 error (sigma dt)^4/120")
    bx.set(xlabel="degree l", ylabel="|measured / exact - 1|",
           title=f"PDE rate error (eps = {d['settings']['pde_eps']:g})")
    bx.legend(fontsize=8)
    save_figure(fig, out / "pde_rates.png")


def _fig_particles(d, out):
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ls = np.arange(1, 7)
    ax.plot(ls, stability.growth_rate(ls, [1.0], 6.0), "k-", lw=1, label="exact sigma_l")
    big = d["particle_big"]
    if big:
        ax.plot([r["l"] for r in big], [r["measured"] for r in big], "o", ms=5, mfc="none",
                label=f"n = 20000, perturbed (eps = {d['settings']['particle_eps']:g}), 2 seeds, t <= 2/sigma_max")
    for p in d["particle_power"]:
        ax.plot(p["degrees"], p["measured"], "x", ms=6, label=f"n = {p['n']}, uniform sample, degree power")
    dr = d["particle_direct"]
    ax.plot([r["l"] for r in dr], [r["measured"] for r in dr], "s", ms=6, mfc="none",
            label=f"n = {dr[0]['n']}, solve_particles (direct), {len(dr)} runs")
    ax.set(xlabel="degree l", ylabel="growth rate", title="Particles, d = 3, beta = 6, one mean head")
    ax.legend(fontsize=7)
    save_figure(fig, out / "particle_rates.png")


def _fig_clusters(d, out):
    cl = d["clusters"]
    b = np.array([c["beta"] for c in cl])
    lstar = np.array([c["l_star"] for c in cl])
    ns = len(cl[0]["seeds"])

    def band(ax, key, fmt, label, **kw):
        m = np.array([c[key][0] for c in cl])
        h = np.nan_to_num(np.array([c[key][1] for c in cl], float))
        ax.errorbar(b, m, yerr=h, fmt=fmt, capsize=3, label=label, **kw)
        return m

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.4))
    band(ax, "final", "o-", f"clusters at t = 14/sigma_max (n = {cl[0]['n']}, {ns} seeds, 95 % CI)")
    band(ax, "early", ".:", "clusters at t = 4/sigma_max")
    band(ax, "linear_maxima_positive", "v:", "maxima of linearly evolved sample", ms=4)
    ax.plot(b, lstar, "s-", label="l* (most unstable degree)")
    bb = np.linspace(b.min(), b.max(), 200)
    ax.plot(bb, np.sqrt(2 * bb), "k--", lw=1, label="sqrt(2 beta)")
    ax.plot(b, lstar * (lstar + 1) / (2 * np.sqrt(3)), "^-", ms=4,
            label="l*(l*+1)/(2 sqrt 3): maxima of degree-l* field")
    mc = [(c["beta"], *c["mc_maxima"]) for c in cl if "mc_maxima" in c]
    if mc:
        mb, mm, mh = np.array(mc).T
        ax.errorbar(mb, mm, yerr=np.nan_to_num(mh), fmt="x", capsize=3, color="gray",
                    label=f"Monte Carlo maxima of degree-l* field ({d['random_maxima'].get('samples', '?')} fields)")
    ax.set(xlabel="beta", ylabel="count", title="Clusters from a uniform start vs l* (one mean head, lambda = 1)")
    ax.legend(fontsize=7)
    band(bx, "ratio_pred", "o-", "count / (l*(l*+1)/(2 sqrt 3))")
    band(bx, "ratio_lstar", "s--", "count / l*", ms=4)
    band(bx, "ratio_linear", "v:", "count / maxima of linearly evolved sample", ms=4)
    bx.axhline(1, color="k", lw=0.8)
    bx.set(xlabel="beta", ylabel="ratio (mean over seeds, 95 % CI)", title="Cluster count against the predictions")
    bx.legend(fontsize=7)
    for a in (ax, bx):
        a.grid(True, alpha=0.3)
    save_figure(fig, out / "clusters.png")


def _fig_critical(d, out):
    fig, axes = plt.subplots(1, len(d["critical"]), figsize=(4.2 * len(d["critical"]), 3.8), squeeze=False)
    for ax, cc in zip(axes[0], d["critical"]):
        for l in sorted({r["l"] for r in cc["rows"]}):
            rows = [r for r in cc["rows"] if r["l"] == l]
            r_ = [r["ratio"] for r in rows]
            line, = ax.plot(r_, [r["sigma"] / (l * (l + 1)) for r in rows], "-", lw=1)
            ax.plot(r_, [r["measured"] / (l * (l + 1)) for r in rows], "o", color=line.get_color(),
                    ms=4, label=f"l = {l}" + (" (critical)" if l == cc["l_c"] else ""))
        ax.axhline(0, color="k", lw=0.5)
        ax.axvline(1, color="r", ls="--", lw=0.8)
        ax.set(xlabel="nu / nu_c", ylabel="sigma_l / (l(l+1))  (= b_l - nu)",
               title=f"{cc['name']}\nnu_c = {cc['nu_c']:.4g}")
        ax.legend(fontsize=7)
    fig.suptitle("Critical noise: measured (dots) vs exact (lines); stable iff all below 0", fontsize=10)
    save_figure(fig, out / "critical_noise.png")


SIGMA_DT = 0.05


def report(data_dir: Path, out_dir: Path | None = None) -> Path:
    out, _, d = open_study_data(data_dir, out_dir)
    _fig_pde(d, out)
    _fig_particles(d, out)
    _fig_clusters(d, out)
    _fig_critical(d, out)

    pde_err = max(abs(r["measured"] / r["sigma"] - 1) for r in d["pde"])
    rk4_err = max(abs(r["measured"] / r["rk4"] - 1) for r in d["pde"])
    ref = [r for r in d["pde"] if r["case"] == "mean, 1 head"]
    ref_txt = ", ".join(f"{r['measured']:.2f}" for r in ref[:4])
    dr = d["particle_direct"]
    direct_txt = "; ".join(f"n = {r['n']}, l = {r['l']}: {r['measured']:.3f} vs {r['sigma']:.3f} "
                           f"({100 * (r['measured'] / r['sigma'] - 1):+.1f} %)" for r in dr)
    claims = [
        ["PDE growth rates equal sigma_l (mean/softmax, nu = 0 and > 0, 1-3 heads, lambda of both signs), "
         "to relative 1e-4",
         f"{len(d['pde'])} runs; max relative error {pde_err:.1e}; vs the RK4 discrete rate {rk4_err:.1e}; "
         f"beta = 6 mean: sigma_1..4 = {ref_txt}", "confirmed" if pde_err < 1e-4 else "NOT confirmed"],
        ["Particles with many tokens reproduce sigma_l (MODEL.md: 9.34, 19.61, 23.35, 19.97)",
         direct_txt + _big_txt(d), _particle_verdict(d)],
        ["spectral (Funk-Hecke) evaluation of the particle velocity = ParticleSystem.velocity",
         f"max relative difference: mean {d['rhs_check']['mean']:.1e}, softmax {d['rhs_check']['softmax']:.1e}",
         "confirmed"],
    ]
    claims += _cluster_claims(d)
    claims += _critical_claims(d)
    figures = [("pde_rates.png", "PDE-measured growth rates vs exact sigma_l and their relative error"),
               ("particle_rates.png", "Particle-measured growth rates (beta = 6, one mean head)"),
               ("clusters.png", "Cluster count from a uniform start vs l*, sqrt(2 beta) and maxima counts"),
               ("critical_noise.png", "Growth rates across the critical noise nu_c (measured dots, exact lines)")]
    intro = (f"Mode {'quick' if d['quick'] else 'full'}. The uniform density is perturbed by eps Y_lm and "
             "the growth rate of the perturbation is measured from actual PDE runs (slope of log|rho_lm(t)|) "
             "and particle runs (slope of the empirical moment), then compared with the exact "
             "sigma_l of MODEL.md section 3 (`stability.growth_rate`). Then the number of metastable clusters "
             "formed from a nearly uniform start is compared with the most unstable degree l*, and the "
             "critical noise nu_c with PDE runs just below and above it.")
    verdicts = [
        ["sigma_l (MODEL.md 3; mean and softmax, any number of zonal heads, noise nu)",
         "zonal scalar heads, exp kernel, S^2, linearization at the uniform density", REPRODUCED,
         f"PDE rates to {pde_err:.0e} relative; particles: {_particle_evidence(d)}"],
        ["l* sets the number of metastable clusters", "one mean head, nearly uniform start, large beta", SHARPENED,
         _cluster_evidence(d)],
        ["critical noise nu_c: uniform state stable iff nu >= nu_c", "zonal heads, S^2, linearization", REPRODUCED,
         "growth-rate sign flips across nu_c in PDE runs (deterministic)"],
    ]
    return write_report(out / "report.md", "Linear stability of the uniform state", intro, claims, figures,
                        _notes(d), verdicts=verdicts)


def _particle_evidence(d):
    big = d["particle_big"]
    if not big:
        dr = d["particle_direct"]
        return f"n = {dr[0]['n']} (direct sums), worst {100 * max(abs(r['measured'] / r['sigma'] - 1) for r in dr):.1f} %"
    seeds = sorted({r["seed"] for r in big})
    return (f"n = {big[0]['n']}, l = 1..{max(r['l'] for r in big)}, {len(seeds)} seeds per degree (below the 10 of the "
            f"statistics rule: a deterministic tolerance check, each run within 2 %), worst "
            f"{100 * max(abs(r['measured'] / r['sigma'] - 1) for r in big):.2f} %")


def _cluster_evidence(d):
    big = [c for c in d["clusters"] if c["l_star"] >= 4]
    if not big:
        return "not tested (needs l* >= 4)"
    c = max(big, key=lambda c: c["beta"])
    return (f"the count follows the maxima of a random degree-l* field (~ l*(l*+1)/(2 sqrt 3)), not l* itself: "
            f"{len(c['seeds'])} seeds per beta, beta = {c['beta']:g} (l* = {c['l_star']}): count "
            f"{_pm(c['final'], '.1f')} (95 % CI), count / l* = {_pm(c['ratio_lstar'])}, count / "
            f"(l*(l*+1)/(2 sqrt 3)) = {_pm(c['ratio_pred'])}; over l* >= 4 the count / l* intervals span "
            f"{min(x['ratio_lstar'][0] - np.nan_to_num(x['ratio_lstar'][1]) for x in big):.2f}-"
            f"{max(x['ratio_lstar'][0] + np.nan_to_num(x['ratio_lstar'][1]) for x in big):.2f}")


def _particle_verdict(d):
    direct = max(abs(r["measured"] / r["sigma"] - 1) for r in d["particle_direct"])
    big = max([abs(r["measured"] / r["sigma"] - 1) for r in d["particle_big"]], default=0.0)
    ok = direct <= 0.05 and big <= 0.02
    return (f"{'confirmed' if ok else 'NOT confirmed'} to sampling accuracy (tolerances: 5 % at n <= 2000, "
            f"2 % at n = 20000; worst {100 * direct:.1f} % and {100 * big:.1f} %)")


def _big_txt(d):
    if not d["particle_big"]:
        return ""
    errs = {}
    for r in d["particle_big"]:
        errs.setdefault(r["l"], []).append(100 * (r["measured"] / r["sigma"] - 1))
    txt = "; n = 20000 (spectral sums), l = 1..6, 2 seeds: errors " + ", ".join(
        f"l={l}: " + "/".join(f"{e:+.2f}" for e in v) + " %" for l, v in errs.items())
    for p in d["particle_power"]:
        e = [100 * (m / s - 1) for m, s in zip(p["measured"], p["sigma"])]
        txt += f"; uniform i.i.d. sample n = {p['n']} (degree power): " + ", ".join(f"{x:+.1f}" for x in e) + " %"
    return txt


def _pm(x, fmt=".2f"):
    """``mean +- half-width`` of a (mean, 95 % half-width) pair."""
    m, h = x
    return f"{m:{fmt}} +- {h:{fmt}}" if h is not None and np.isfinite(h) else f"{m:{fmt}}"


def _cluster_claims(d):
    cl = d["clusters"]
    ns = len(cl[0]["seeds"])
    rows = ", ".join(f"beta {c['beta']:g}: l* = {c['l_star']}, clusters {_pm(c['final'], '.1f')}" for c in cl)
    m = d["random_maxima"]
    mx = ", ".join(f"l={l}: {_pm((v, h), '.1f')}" for l, v, h in zip(m["degrees"], m["mean"], m.get("ci", [None] * 99)))
    return [
        ["l* ~ sqrt(2 beta) for large beta (single head)",
         ", ".join(f"beta {c['beta']:g}: l* = {c['l_star']} vs {np.sqrt(2 * c['beta']):.2f}" for c in cl),
         _lstar_verdict(cl)],
        ["l* sets the number of metastable clusters from a nearly uniform start",
         f"{ns} seeds per beta, mean +- 95 % CI half-width: " + rows +
         f". Maxima of a random degree-l field (Monte Carlo, {m.get('samples', '?')} fields, 95 % CI): {mx}",
         _cluster_verdict(cl)],
    ]


def _cluster_verdict(cl):
    big = [c for c in cl if c["l_star"] >= 4]
    if not big:
        return "not tested (needs l* >= 4)"
    lo = lambda key: min(c[key][0] - np.nan_to_num(c[key][1]) for c in big)  # noqa: E731
    hi = lambda key: max(c[key][0] + np.nan_to_num(c[key][1]) for c in big)  # noqa: E731
    return (f"partly: for l* >= 4 the 95 % intervals of count / l* span {lo('ratio_lstar'):.2f}-"
            f"{hi('ratio_lstar'):.2f} (grows with l*), of count / (l*(l*+1)/(2 sqrt 3)) "
            f"{lo('ratio_pred'):.2f}-{hi('ratio_pred'):.2f}: l* sets the count through the number of maxima of "
            "a degree-l* field (~ l*^2/3.5), not as 'count = l*' (see notes)")


def _lstar_verdict(cl):
    dev = max(abs(c["l_star"] - np.sqrt(2 * c["beta"])) for c in cl)
    return f"{'confirmed' if dev <= 1 else 'NOT confirmed'}: max |l* - sqrt(2 beta)| = {dev:.2f} (an integer vs a real)"


def _critical_claims(d):
    out = []
    for cc in d["critical"]:
        lc = [r for r in cc["rows"] if r["l"] == cc["l_c"]]
        txt = ", ".join(f"nu/nu_c = {r['ratio']:g}: sigma_{cc['l_c']} = {r['measured']:+.4g} "
                        f"(exact {r['sigma']:+.4g})" for r in lc)
        above = [r for r in cc["rows"] if r["ratio"] > 1]
        ok = all((r["measured"] > 0) == (r["ratio"] < 1) for r in lc) and all(r["measured"] < 0 for r in above)
        out.append([f"{cc['name']}: uniform state stable iff nu >= nu_c = {cc['nu_c']:.5g} (critical degree "
                    f"{cc['l_c']})", txt + f"; all {len(above)} degree rates above nu_c negative: "
                    f"{all(r['measured'] < 0 for r in above)}", "confirmed" if ok else "NOT confirmed"])
    return out


def _mc(d):
    m = d["random_maxima"]
    return ", ".join(f"{v:.1f}" for v in m["mean"][:5]) + f" for l = 1..{min(5, len(m['mean']))}"


def _c40(d):
    c = max(d["clusters"], key=lambda c: c["beta"])
    return (f"at beta = {c['beta']:g} (l* = {c['l_star']}) we count {_pm(c['early'], '.1f')} clusters at "
            f"t = 4/sigma_max and {_pm(c['final'], '.1f')} at t = 14/sigma_max ({len(c['seeds'])} seeds, 95 % CI)")


def _lin(d):
    return ", ".join(f"{_pm(c['linear_maxima_positive'], '.1f')} (beta {c['beta']:g})" for c in d["clusters"][-3:])


def _lin_ratio(d):
    r = [c["ratio_linear"] for c in d["clusters"] if c["l_star"] >= 3]
    if not r:
        return "not measured: needs l* >= 3"
    return (f"count / linear maxima, 95 % intervals over l* >= 3: {min(m - np.nan_to_num(h) for m, h in r):.2f}-"
            f"{max(m + np.nan_to_num(h) for m, h in r):.2f}")


def _ratio_table(d):
    rows = "\n".join(
        f"| {c['beta']:g} | {c['l_star']} | {_pm(c['final'], '.1f')} | {_pm(c['early'], '.1f')} | "
        f"{_pm(c['linear_maxima_positive'], '.1f')} | {_pm(c['ratio_lstar'])} | {_pm(c['ratio_pred'])} | "
        f"{_pm(c['ratio_mc']) if 'ratio_mc' in c else '-'} | {_pm(c['ratio_linear'])} |" for c in d["clusters"])
    return ("| beta | l* | clusters (14/sigma_max) | clusters (4/sigma_max) | linear maxima | count / l* | "
            "count / (l*(l*+1)/(2 sqrt 3)) | count / MC maxima (degree l*) | count / linear maxima |\n"
            "|---|---|---|---|---|---|---|---|---|\n" + rows)


def _notes(d):
    return f"""
**Why 1e-4 for the PDE rates.** The spectral scheme is exactly diagonal for zonal heads, so a
single-degree perturbation evolves as exp(sigma_l t) up to (i) the RK4 truncation: the discrete rate is
log R(sigma dt)/dt with relative error (sigma dt)^4/120 = {SIGMA_DT ** 4 / 120:.1e} at sigma dt =
{SIGMA_DT} (the table's "vs RK4" column removes it, leaving round-off), (ii) nonlinear feedback: the
perturbed mode is (l, m = l // 2) and products of Y_lm have orders 0 and 2m, so the feedback into (l, m) is
cubic, O(eps^2 e^(2 sigma T)) ~ 1e-11 with eps = {d['settings']['pde_eps']:g} and growth e^3, and (iii)
round-off of the coefficients, ~1e-17/eps relative, and (iv) round-off seeds (~1e-17) in the unstable
degrees, which grow like e^(sigma_max t) and feed the measured mode nonlinearly: every run stops after 3
e-folds of the fastest unstable degree (a decaying degree measured over 2 time units next to sigma_max =
17 picked up a 60 % error from this). 1e-4 leaves a wide margin above these and is still
far below any modelling error (a wrong factor of l(l+1), 4 pi or beta would be O(1)).
Measuring several degrees in one run is much worse (we saw up to 1e-2 for slow degrees): products of
fast modes feed slow degrees at O(eps e^(2 sigma_fast T)); hence one degree per run.

**Particles.** The empirical moment of n tokens carries sampling noise; stratified sampling
(`sample_particles(method="stratified")`) makes it far smaller than the i.i.d. n^(-1/2)
(measured initial moment errors are in data.json, `init_error`). Two error sources remain: the noise
in all other degrees, which grows at its own rates and couples to the signal (relative error of order
noise/eps), and the nonlinearity O(eps) (even degrees: Y_l0^2 contains Y_l0, so the quadratic term
biases even l by O(eps e^(sigma T)), seen as a positive bias at l = 2, 4). With eps = {d['settings']['particle_eps']:g}
and n = 20000 the rates agree with sigma_l to about 1 % or better, provided every degree is measured over
the same short horizon 2/sigma_max: over 2/sigma_l the products of the sampling noise in the fastest
degrees (growing like e^(2 sigma_max t)) swamp the slow degrees (a first full run gave -70 %/+50 % at l = 6).
The i.i.d. uniform sample (no deliberate perturbation; rate of the degree power sum_m |mu_lm|^2) has
signal = noise ~ n^(-1/2), so the same coupling is relatively n^(1/2) times stronger: it is at the
percent level for l <= 4 and fails for the slow degrees l = 5, 6 unless n is much larger.
Large-n runs evaluate the particle velocity through its Funk-Hecke
expansion (`ParticleSystem(summation="spectral", kernel_tol=1e-10)`, i.e. `meanfield.models.fastsum`): the same
ODE as the pairwise sums, checked against them to ~1e-11, but O(n) instead of O(n^2).

**Clusters vs l*.** The uniform state amplifies a band of degrees around l*; when the perturbation becomes
O(1) the density's peaks become clusters. A random field of a single degree l has about
l(l+1)/(2 sqrt 3) local maxima (asymptotics of Cammarota-Marinucci-Wigman, matched by our Monte Carlo:
{_mc(d)}), so a degree-l* instability should give ~ l*^2/3.5 clusters, not l* clusters; e.g. {_c40(d)},
against 20.8 maxima for a degree-8 field.
The count is not sharp: the amplified band has a width (sigma_l is flat near l*, increasingly so for large
beta), so the linearly evolved sample has more maxima than a pure degree-l* field when the growth time
before saturation (set by the initial noise, i.e. by n) is short: counting the maxima (above uniform) of
sum_lm (e^(sigma_l t) - 1) mu_lm(0) Y_lm when it first reaches 1/(4 pi) gives {_lin(d)}, about twice the
cluster count ({_lin_ratio(d)}). Many of those maxima merge during the nonlinear collapse, and clusters keep merging on much
longer (metastable) time scales (see the decrease from t = 4 to 14/sigma_max). At beta = 2, sigma_1 and
sigma_2 are nearly equal and a single cluster remains. The statement "l* sets the number of clusters" is
therefore right as a scaling, count ~ l*(l*+1)/(2 sqrt 3) ~ 2 beta / 3.5 (see the ratios below:
{len(d['clusters'][0]['seeds'])} seeds per beta, n = {d['clusters'][0]['n']}), while "number of clusters = l*" would be wrong
for l* >= 5. Clusters are counted as connected components of <x_i, x_j> >= 0.99 holding >= 1 % of the tokens (one
mean head lambda = 1, i.i.d. uniform start; seeds 1000 (i + 1) + k for the i-th beta, k = 0..).
Every entry is the mean over seeds +- the half-width of its 95 % Student-t interval; the MC ratio divides the
mean count by the Monte Carlo maxima of a degree-l* field, relative half-widths added in quadrature.

{_ratio_table(d)}

**Critical noise.** nu_c = max_l (1/beta) sum_h c_l / norm (`stability.critical_noise`); for positive heads the
critical degree is l = 1, for the mixed-sign pair (1, -1.5) it is an even degree. The measured rates
change sign at nu_c to the precision of the runs (rates are +-2 % of l(l+1) nu_c away from 0 at
nu = (1 -+ 0.02) nu_c and are measured to ~1e-7 relative).
"""
