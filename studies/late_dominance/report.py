"""Figures and report.md for the late-dominance study (reads data.npz / data.json)."""

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
    markdown_table,
    mean_ci95,
    open_study_data,
    save_figure,
    style_axes,
    wilson95,
    write_report,
)

COLOURS = {"softmax b=1": "C0", "softmax b=4": "C1", "relu-mean": "C2", "relu-softmax": "C3"}


def _ci(mc, digits=3):
    m, h = mc
    if m is None or not np.isfinite(m):
        return "-"
    return f"{m:.{digits}g}" if h is None or not np.isfinite(h) else f"{m:.{digits}g} +- {h:.2g}"


def _fig_ode(z, s, out):
    ns, bs, g = z["ode_n"], z["ode_betas"], z["ratio_gamma"]
    R = z["ratio_curves"]                      # (relu rule, n, beta, gamma)
    T = z["ode_T"]                             # (rule, n, beta, 1 + segments)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    cmap = plt.get_cmap("plasma")
    jn = len(ns) // 2
    for j, b in enumerate(bs):
        col = cmap(j / max(len(bs) - 1, 0.8) * 0.85)
        axes[0].plot(g, R[1, jn, j], color=col, label=f"relu-softmax, beta={b:g}")
        axes[0].plot(g, R[0, jn, j], "--", color=col, label=f"relu-mean, beta={b:g}")
        gx = s["gamma_x_closed_form"][f"beta={b:g}"]
        if gx is not None:
            axes[0].plot([gx], [1], "o", color=col, ms=6)
    axes[0].axhline(1, color="k", lw=0.8)
    axes[0].set(xlabel="gamma", ylabel="F_relu / F_softmax", yscale="log",
                title=f"equiangular rate ratio, n = {ns[jn]} (dots: gamma_x, Lambert W)")
    for i, n in enumerate(ns):
        col = plt.get_cmap("viridis")(i / max(len(ns) - 1, 1))
        axes[1].plot(bs, T[0, i, :, 3] / T[2, i, :, 3], "o-", color=col, label=f"n={n}")
        axes[2].plot(bs, T[0, i, :, 3] / T[1, i, :, 3], "o-", color=col, label=f"n={n}")
    for ax, other in ((axes[1], "relu-softmax"), (axes[2], "relu-mean")):
        ax.axhline(1, color="k", lw=0.8)
        ax.set(xlabel="beta (softmax)", xscale="log", ylabel="T_softmax / T_" + other,
               title=f"late segment gamma 1/2 -> 0.99: softmax / {other}\n(> 1: ReLU faster late)")
        ax.set_xticks(list(bs), [f"{b:g}" for b in bs])
        ax.minorticks_off()
    style_axes(axes, legend=7)
    save_figure(fig, out / "equiangular.png")


def _fig_curves(z, s, out, which, fname, ylabel):
    ns, ds = s["settings"]["n"], s["settings"]["d"]
    labels = s["labels"]
    fig, axes = plt.subplots(len(ns), len(ds), figsize=(4.6 * len(ds), 3.4 * len(ns)), squeeze=False)
    for i, n in enumerate(ns):
        for j, d in enumerate(ds):
            t, cv = z[f"t_n{n}_d{d}"], z[f"curves_n{n}_d{d}"]       # (rule, seed, 3, time)
            ax = axes[i, j]
            for c, lab in enumerate(labels):
                y = cv[c, :, which]
                m = y.mean(axis=0)
                half = 1.96 * y.std(axis=0, ddof=1) / np.sqrt(y.shape[0]) if y.shape[0] > 1 else 0 * m
                ax.plot(t, m, color=COLOURS.get(lab), label=lab)
                low = np.maximum(m - half, 1.0) if which == 2 else m - half     # at least one cluster
                ax.fill_between(t, low, m + half, color=COLOURS.get(lab), alpha=0.2)
            ax.set(title=f"n = {n}, d = {d}", xlabel="t", ylabel=ylabel)
            if which == 2:
                ax.set_yscale("log")
            else:
                ax.set_xscale("symlog", linthresh=10)
    style_axes(axes[0, :1], legend=7)
    style_axes(axes)
    save_figure(fig, out / fname)


def _particle_rows(s):
    rows = []
    for rec in s["particles"]:
        for key in [k for k in rec if " / " in k]:
            v = rec[key]
            rows.append([rec["n"], rec["d"], key, _ci(v["early_ratio"]), _ci(v["late_ratio"]),
                         f"{v['relu_faster_late']}/{v['late_ratio_runs']}", _ci(v["tmin_ratio"]),
                         f"{v['relu_never_099']} / {v['softmax_never_099']}"])
    return rows


def _rule_rows(s):
    rows = []
    for rec in s["particles"]:
        for lab, st in rec["rules"].items():
            reached = st["T_mean_0.99_reached"]
            runs = [r for r in s["runs"] if r["rule"] == lab and r["n"] == rec["n"] and r["d"] == rec["d"]]
            rate = [np.log(10) / (r["T_mean_0.99"] - r["T_mean_0.9"]) for r in runs if r["T_mean_0.99"] is not None]
            rows.append([rec["n"], rec["d"], lab, _ci(st["T_mean_0.5"]), _ci(st["T_mean_0.9"]), _ci(st["T_mean_0.99"]),
                         f"{reached[2]}/{st['runs']}", _ci(st["late_0.5_0.99"]), _ci(mean_ci95(rate)),
                         _ci(st["final_clusters"])])
    return rows


def _pooled(s, pair):
    """All seeds of all (n, d): runs where both reached 0.99, and how many of them ReLU was faster late."""
    both = faster = never = total = 0
    for rec in s["particles"]:
        v = rec[pair]
        both += v["late_ratio_runs"]
        faster += v["relu_faster_late"]
        never += v["relu_never_099"]
        total += rec["rules"][pair.split(" / ")[1]]["runs"]
    return both, faster, never, total


def overconcentrated(n, beta, lam=1.0):
    """Softmax over-concentrates at the start of the late phase: the self-weight at ``gamma = 1/2``,
    ``p_ii = e^b / (e^b + (n-1) e^(b/2))`` (``b = beta lam``), exceeds the weight on all the others together,
    i.e. ``b > 2 ln(n - 1)`` (our reading: the paper gives no threshold)."""
    return beta * lam > 2 * np.log(n - 1)


def paper_pair_readings(z, lam=1.0):
    """The remark after Thm 25 for the paper's pair (softmax against relu-mean) in the equiangular reduction.

    ``dominates late`` (run.py's reading): ``T_relu-mean(1/2 -> 0.99) < T_softmax(1/2 -> 0.99)``.  Universal:
    at every (n, beta) where softmax over-concentrates (:func:`overconcentrated`) -- refuted iff one of them on the
    grid has ``T_softmax / T_relu-mean <= 1``; existential: at some such (n, beta) -- holds iff one has the ratio > 1.
    Returns the flags and the points (n, beta, ratio) in and out of the region.
    """
    ns, bs = [int(n) for n in z["ode_n"]], [float(b) for b in z["ode_betas"]]
    ratio = z["ode_T"][0, :, :, 3] / z["ode_T"][1, :, :, 3]          # softmax / relu-mean, segment 1/2 -> 0.99
    inside = [(n, b, float(ratio[i, j])) for i, n in enumerate(ns) for j, b in enumerate(bs) if overconcentrated(n, b, lam)]
    outside = [(n, b, float(ratio[i, j])) for i, n in enumerate(ns) for j, b in enumerate(bs)
               if not overconcentrated(n, b, lam)]
    counter = [p for p in inside if not p[2] > 1]
    helping = [p for p in inside if p[2] > 1]
    return {"inside": inside, "outside": outside, "counterexamples": counter, "dominating": helping,
            "outside_dominating": [p for p in outside if p[2] > 1],
            "universal_refuted": bool(counter), "existential_holds": bool(helping)}


def censored_pairs(s, softmax_label, relu_label="relu-mean"):
    """Paired random starts (same tokens): who is faster on the late segment 1/2 -> 0.99.

    A pair is *decided* when both rules reached 1/2 and either both reached 0.99 (compare the segment times) or
    only one did and its segment is shorter than the other run's censored lower bound ``horizon - T(1/2)`` (both
    ways: a censored pair may be decided for either rule).
    Returns ``(decided, relu_faster, both_reached, censored, relu_never_half, undecided)``.
    """
    inf = lambda x: np.inf if x is None else x  # noqa: E731
    runs = {(r["rule"], r["n"], r["d"], r["seed"]): r for r in s["runs"]}
    dec = fast = both = cens = never = und = 0
    for (rule, n, d, seed), r in runs.items():
        if rule != relu_label:
            continue
        a = runs[(softmax_label, n, d, seed)]
        r5, r99, a5, a99 = (inf(x) for x in (r["T_mean_0.5"], r["T_mean_0.99"], a["T_mean_0.5"], a["T_mean_0.99"]))
        if not (np.isfinite(r5) and np.isfinite(a5)):
            never += not np.isfinite(r5)
            und += np.isfinite(r5)
        elif np.isfinite(r99) and np.isfinite(a99):
            dec, both, fast = dec + 1, both + 1, fast + int(r99 - r5 < a99 - a5)
        elif np.isfinite(a99) and a99 - a5 < r["horizon"] - r5:
            dec, cens = dec + 1, cens + 1
        elif np.isfinite(r99) and r99 - r5 < a["horizon"] - a5:
            dec, cens, fast = dec + 1, cens + 1, fast + 1
        else:
            und += 1
    return dec, fast, both, cens, never, und


def report(data_dir, out_dir=None) -> Path:
    out, z, s = open_study_data(data_dir, out_dir)
    _fig_ode(z, s, out)
    _fig_curves(z, s, out, 0, "mean_inner.png", "mean inner product")
    _fig_curves(z, s, out, 2, "clusters.png", "clusters at 0.99")
    ns, bs = list(z["ode_n"]), list(z["ode_betas"])
    T = z["ode_T"]
    rs = T[0, :, :, 3] / T[2, :, :, 3]       # softmax / relu-softmax, late segment
    rm = T[0, :, :, 3] / T[1, :, :, 3]       # softmax / relu-mean
    b1 = bs.index(1.0) if 1.0 in bs else 0
    bmax = len(bs) - 1
    seeds = len(s["settings"]["seeds"])
    pools = {p: _pooled(s, p) for p in s["particles"][0] if " / " in p}
    pool_txt = "; ".join(f"{p}: ReLU faster late in {f}/{b} paired runs where both reached 0.99"
                         f" (Wilson {wilson95(f, b)[0]:.2f}-{wilson95(f, b)[1]:.2f}), ReLU never reached 0.99 in"
                         f" {nv}/{tot}" if b else f"{p}: no pair reached 0.99; ReLU never reached it in {nv}/{tot}"
                         for p, (b, f, nv, tot) in pools.items())
    i32 = ns.index(32) if 32 in ns else 0
    seg = np.array([z["ode_segment_rates_" + rule][i32, :, 1] for rule in s["rules"]])
    seg_spread = float(seg.max() / seg.min())
    # JSON stores the times of runs that never reached a target (inf) as null
    never = {lab: sum(r["T_mean_0.99"] is None for r in s["runs"] if r["rule"] == lab) for lab in s["labels"]}
    never_d4 = {lab: sum((r["T_mean_0.99"] is None) for r in s["runs"] if r["rule"] == lab and r["d"] == min(
        s["settings"]["d"])) for lab in s["labels"]}
    total = sum(r["rule"] == s["labels"][0] for r in s["runs"])
    pr = paper_pair_readings(z, s["lambda"])
    pts = lambda ps: ", ".join(f"(n={n}, beta={b:g}): {r:.3f}" for n, b, r in ps) or "none"  # noqa: E731
    hyp = (f"one scalar head M = V = lambda I (lambda = {s['lambda']:g}), equiangular tokens, sphere; softmax = exp "
           "kernel + softmax normalization (inverse temperature beta), ReLU = relu kernel + mean normalization (the "
           "pair of Thm 25); 'late' = from gamma = 1/2, 'dominates' = shorter T(1/2 -> 0.99) (run.py's reading); "
           "'softmax over-concentrates' read as self-weight p_ii > 1/2 at gamma = 1/2, i.e. beta lambda > 2 ln(n - 1) "
           "(the paper gives no threshold, no proof)")
    grid = f"grid n = {[int(n) for n in ns]}, beta = {[float(b) for b in bs]}"
    cens = {lab: censored_pairs(s, lab) for lab in s["labels"] if lab.startswith("softmax")}
    cens_txt = "; ".join(
        f"{lab}: ReLU faster late in {f}/{dec} decided pairs (Wilson 95 % {wilson95(f, dec)[0]:.2f}-"
        f"{wilson95(f, dec)[1]:.2f}; {b} with both at 0.99, {c} where only one rule reached 0.99 and its segment is "
        f"shorter than the other's censored bound horizon - T(1/2)); ReLU never reached 1/2 in {nv}, undecided {u}"
        if dec else f"{lab}: no decided pair" for lab, (dec, f, b, c, nv, u) in cens.items())
    verdicts = [
        ("remark after Thm 25, paper's pair, universal reading: when softmax over-concentrates, ReLU (relu-mean) "
         "dominates late", hyp + "; for every such (n, beta)", REFUTED if pr["universal_refuted"] else REPRODUCED,
         f"{grid} (equiangular ODE, deterministic): over-concentrated points {len(pr['inside'])}, counterexamples "
         f"(T_softmax / T_relu-mean <= 1) {len(pr['counterexamples'])}/{len(pr['inside'])}: {pts(pr['counterexamples'])}; "
         f"late rates 2 lambda (softmax) and 2 lambda^2 (relu-mean) tie at lambda = 1, so the 1/n of the mean "
         f"normalization and the self-weight decide"),
        ("remark after Thm 25, paper's pair, existential reading: ReLU (relu-mean) may dominate late when softmax "
         "over-concentrates", hyp + "; for some such (n, beta)", REPRODUCED if pr["existential_holds"] else REFUTED,
         f"{grid}: ReLU faster late at {len(pr['dominating'])}/{len(pr['inside'])} over-concentrated points: "
         f"{pts(pr['dominating'])}; at the {len(pr['outside'])} other points ReLU faster at "
         f"{len(pr['outside_dominating'])} (softmax / relu-mean {min(p[2] for p in pr['outside']):.3f}.."
         f"{max(p[2] for p in pr['outside']):.3f}) (deterministic)"),
        ("remark after Thm 25, paper's pair, from random tokens", "not equiangular: outside the reduction the remark "
         "is made in; else as above", OUTSIDE,
         f"{seeds} seeds per (n, d) in n = {s['settings']['n']}, d = {s['settings']['d']}, paired (same tokens for "
         f"every rule): {cens_txt}. Read as a claim about random tokens it would fail: ReLU does not attract tokens "
         "more than 90 degrees apart and freezes several clusters"),
    ]
    claims = [
        ["crossover gamma_x (Lambert W) = root of F_relu-softmax = F_softmax (library rates)",
         f"max error {s['gamma_x_max_err']:.1e} over n and beta", REPRODUCED],
        ["late rates (mf.theory.late_rate) = effective rate of the last ODE segment 0.99 -> 0.999",
         "relative deviation " + ", ".join(f"{k} {v:.1e}" for k, v in s["ode_last_segment_rate_err"].items())
         + " (the segment is not yet asymptotic: O(1 - gamma))", "checked"],
        ["effective rate ln 10 / T(0.9 -> 0.99) of the equiangular ODE (late rate 2 at lambda = 1)",
         "; ".join(f"{rule}: " + ", ".join(f"{z['ode_segment_rates_' + rule][i, j, 1]:.3f}" for j in range(len(bs)))
                   for rule in s["rules"] for i in [ns.index(32) if 32 in ns else 0])
         + f" (n = {32 if 32 in ns else ns[0]}, beta = {', '.join(f'{b:g}' for b in bs)})",
         f"largest / smallest over rules and beta: {seg_spread:.3f}"],
        ["late segment 1/2 -> 0.99, softmax / relu-softmax (> 1: ReLU faster)",
         "; ".join(f"beta={b:g}: " + ", ".join(f"{rs[i, j]:.3f}" for i in range(len(ns))) for j, b in enumerate(bs))
         + f" (n = {', '.join(map(str, ns))})", "ReLU faster iff beta lambda > 1, by O(e^(beta lambda)/n)"],
        ["late segment 1/2 -> 0.99, softmax / relu-mean",
         "; ".join(f"beta={b:g}: " + ", ".join(f"{rm[i, j]:.3f}" for i in range(len(ns))) for j, b in enumerate(bs)),
         "softmax faster except small n, large beta"],
        ["(new result, not the paper's pair) relu-softmax dominates late iff beta lambda > 1 (equiangular), "
         "Lambert-W crossover gamma_x = -W0(-b e^-b)/b, advantage O(e^(beta lambda)/n)",
         f"late-segment ratio softmax / relu-softmax {rs[0, bmax]:.3f} (n = {ns[0]}, beta = {bs[bmax]:g}) down to "
         f"{rs[-1, bmax]:.4f} (n = {ns[-1]}), {rs[:, b1].min():.3f}..{rs[:, b1].max():.3f} at beta = {bs[b1]:g} (rows "
         "above); random starts (paired): " + "; ".join(x for x in pool_txt.split("; ") if "relu-softmax" in x),
         "new (derived and measured here; the paper's remark compares softmax with relu-mean)"],
        ["random starts: paired late ratio and freezing", pool_txt, "see table"],
        ["integrator", f"max | |x| - 1 | at the step times {s['max_drift']:.1e} (dopri5, rtol 1e-8)", "-"],
    ]
    table_p = markdown_table(["n", "d", "softmax / ReLU", "T(0.5) ratio", "late ratio T(0.5 -> 0.99)",
                              "ReLU faster late", "T_min(0.99) ratio", "never 0.99 (ReLU / softmax)"],
                             _particle_rows(s))
    table_r = markdown_table(["n", "d", "rule", "T(0.5)", "T(0.9)", "T(0.99)", "reached 0.99", "T(0.5 -> 0.99)",
                              "rate ln 10 / T(0.9 -> 0.99)", "final clusters"], _rule_rows(s))
    notes = f"""
**Reading taken.** The summaries say only that ReLU "may dominate late, when softmax over-concentrates"
(no statement, no proof).  We read "late" as the phase after the tokens have half clustered (mean inner
product ``gamma >= 1/2``) and "dominates" as: ReLU reaches 0.9 and 0.99 from 1/2 in less time, with a
larger instantaneous rate ``F(gamma)``; segment times from 1/2 do not depend on the start, so they
isolate the late phase from Thm 25's early one.  Why: the asymptotic rates alone cannot decide it
(equal at lambda = 1) and "dominates" must be a comparison at equal gamma, not at equal time.

**Why ReLU can win late: the self-weight.** In the equiangular reduction the softmax row of token i puts
``p_ii = e^(beta lambda) / (e^(beta lambda) + (n-1) e^(beta lambda gamma))`` on itself and the rest on the
others; ReLU with row normalization puts ``1 / (1 + (n-1) gamma)``.  The pull towards the others is
``1 - p_ii`` times the same geometric factor, so the rate ratio is
``F_relu-softmax / F_softmax = gamma (e^(beta lambda (1-gamma)) + n - 1) / (1 + (n-1) gamma)``, which exceeds 1
iff ``gamma e^(beta lambda (1-gamma)) > 1``, i.e. beyond ``gamma_x = -W0(-b e^(-b))/b`` (``b = beta lambda``), a point
that exists iff ``b > 1``: this is the over-concentration (softmax attends to the token itself).  But
as ``n -> inf`` both rates tend to the logistic ``2 lambda gamma (1 - gamma)``, so the advantage is
``O(e^(beta lambda) / n)``: visible only when ``e^(beta lambda)`` is comparable with ``n``.  With the paper's
mean-normalized ReLU the late rate is ``2 lambda^2`` against ``2 lambda``: it dominates asymptotically iff
``lambda > 1``; at lambda = 1 the 1/n of the mean normalization makes it slower late unless beta is large
against ln n.

**Random starts** ({seeds} seeds per (n, d), the same tokens for every rule, times on dense output;
ratios softmax / ReLU over the seeds where both reached the target, mean +- 95 % t):

{table_p}

Per rule (mean +- 95 % t over the seeds that reached each target):

{table_r}

From random tokens ReLU has a second, qualitative handicap the equiangular reduction hides: tokens whose
inner product is negative do not interact at all, so groups more than 90 degrees apart never merge (the
clusters figure): relu-mean did not reach 0.99 in {never['relu-mean']}/{total} runs, relu-softmax in
{never['relu-softmax']}/{total} ({never_d4['relu-softmax']} of them in d = 4).  Softmax at beta = 1 reached 0.99 in
{total - never['softmax b=1']}/{total} runs; at beta = 4 it did not in {never['softmax b=4']}/{total}
({never_d4['softmax b=4']} in d = 4), held on metastable plateaus of several clusters up to the horizon: its own,
slower form of
over-concentration (the figures), consistent with the paired random-start ratios against relu-softmax at
beta = 4 exceeding the equiangular ones most in low d.
"""
    intro = """Paper (remark after Thm 25): softmax clusters faster early, but ReLU may dominate late, when softmax
attention over-concentrates; no proof is given.  We pin down a reading (late = after gamma = 1/2;
dominates = shorter segment times and larger rates at equal gamma), derive where it holds in the
equiangular reduction (a Lambert-W crossover), and measure it from random tokens for several n and d."""
    figures = [("equiangular.png", "Equiangular reduction: rate ratio ReLU / softmax against gamma (dots: the "
                "Lambert-W crossover), and the late-segment time ratios against beta"),
               ("mean_inner.png", "Random starts: mean inner product against time (mean and 95 % band over seeds)"),
               ("clusters.png", "Random starts: clusters at threshold 0.99 against time (mean and 95 % band)")]
    return write_report(out / "report.md", "Does ReLU attention dominate late?", intro, claims, figures, notes,
                        verdicts)
