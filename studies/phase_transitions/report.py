"""Report of the phase_transitions study: the dichotomy, particle hysteresis against the PDE, beyond the papers.

Reads ``data.json`` and ``data.npz`` written by run.py; writes ``hysteresis.png``, ``windows.png``,
``escape.png``, ``beyond.png`` and ``report.md``.  Run from the repo root:
``python -m studies.phase_transitions.run``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

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

MR = "Mun-Rosenzweig (arXiv 2604.16288, d = 2; 2606.05140, any d)"
HYP = "one zonal exp head (lambda = 1), mean normalization, noise nu > 0, mean-field PDE on S^(d-1)"


def _upper(arrays):
    nu, r, k = arrays["branch_nu"], arrays["branch_r"], int(arrays["branch_fold_index"])
    return lambda x: np.interp(x, nu[k:][::-1], r[k:][::-1], right=np.nan)


def checks(data, arrays) -> dict:
    """The tests that decide the verdicts (each one could fail), from the study's data."""
    s, a = data["summary"], data["dichotomy"]
    nu_s, nu_f, nu_g = s["nu_sharp"], s["nu_fold"], s["nu_global"]
    out = {"beta_star_within_1e-6": all(r["rel_error"] < 1e-6 for r in a["rows"]),
           "type_flips": bool(s["type_flips_at_beta_star"]),
           "ordering": bool(s["ordering_holds"]) and any(w["ok"] for w in a["windows"])}
    # hysteresis: on the way down every seed is below half the upper branch at every stage with nu > nu_#; on
    # the way up every seed is above it at every stage with nu < nu_global (inside the window both states live)
    up = _upper(arrays)
    nd, rd, nup, ru = arrays["nu_down"], arrays["r_down"], arrays["nu_up"], arrays["r_up"]
    win_d = (nd > nu_s) & (nd < nu_f)
    win_u = (nup > nu_s) & (nup < nu_g)
    out["uniform_kept_in_window"] = bool(np.all(rd[:, win_d] < 0.5 * up(nd[win_d])))
    out["cluster_kept_in_window"] = bool(np.all(ru[:, win_u] > 0.5 * up(nup[win_u])))
    far = nup < nu_f - 0.03
    dev = ru[:, far].mean(axis=0) - up(nup[far])
    out["max_branch_deviation"] = float(np.nanmax(np.abs(dev))) if far.any() else float("nan")
    jd, ju = mean_ci95(arrays["jump_down"]), mean_ci95(arrays["jump_up"])
    out["jump_down"], out["jump_up"] = jd, ju
    cont = lambda m, h, x: bool(np.isfinite(h) and m - h <= x <= m + h)   # noqa: E731
    out["down_interval_contains_nu_sharp"] = cont(*jd, nu_s)
    out["up_interval_contains_nu_fold"] = cont(*ju, nu_f)
    # escape below nu_#: the l = 1 mode grows at sigma_1 = 2 (nu_# - nu) from fluctuations ~ n^-1/2, so from n1 to
    # n2 the escape time grows by ln(n2 / n1) / (2 sigma_1) (a Welch 95 % interval of the difference must hold it);
    # inside the window: the fraction escaped by t_max falls with n (Wilson intervals of the smallest and the
    # largest n disjoint)
    by = {}
    for e in data["escape"]["runs"]:
        by.setdefault(round(e["offset"], 6), {})[e["n"]] = np.array([np.inf if x is None else x for x in e["times"]])
    lin, cens = {}, {}
    for off, runs in by.items():
        ns = sorted(runs)
        if len(ns) < 2:
            continue
        n1, n2 = ns[0], ns[-1]
        t1, t2 = runs[n1], runs[n2]
        if off < 0 and np.isfinite(t1).all() and np.isfinite(t2).all():
            v1, v2 = t1.var(ddof=1) / t1.size, t2.var(ddof=1) / t2.size
            dof = (v1 + v2) ** 2 / (v1 ** 2 / (t1.size - 1) + v2 ** 2 / (t2.size - 1))
            half = float(stats.t.ppf(0.975, dof) * np.sqrt(v1 + v2))
            pred = float(np.log(n2 / n1) / (2 * 2 * -off))
            lin[off] = dict(n1=n1, n2=n2, diff=float(t2.mean() - t1.mean()), half=half, predicted=pred,
                            ok=bool(abs(t2.mean() - t1.mean() - pred) <= half))
        if off > 0:
            k1, k2 = int(np.isfinite(t1).sum()), int(np.isfinite(t2).sum())
            w1, w2 = wilson95(k1, t1.size), wilson95(k2, t2.size)
            cens[off] = dict(n1=n1, n2=n2, escaped1=k1, escaped2=k2, wilson1=w1, wilson2=w2, ok=bool(w2[1] < w1[0]))
    out["escape_linear"], out["escape_censoring"] = lin, cens
    out["linear_escape_ok"] = bool(lin) and all(v["ok"] for v in lin.values())
    out["metastable_scaling"] = bool(cens) and all(v["ok"] for v in cens.values())
    hold = data["fold_hold"]["rows"]
    out["fold_hold"] = bool(hold) and all((h["r_end"] > h["half_branch"]) if h["offset"] < 0 else
                                          (h["r_end"] < h["half_branch"]) for h in hold)
    out["loop_encloses_window"] = bool(np.isfinite(jd[0]) and np.isfinite(ju[0]) and jd[0] + jd[1] < nu_s + 0.005
                                       and ju[0] - ju[1] > nu_g)
    out.update(scale_checks(data))
    d3 = data["beyond"].get("degree_three")
    if d3 is not None:
        out["tetrahedral"] = bool(d3["solved"] == d3["asked"] and abs(d3["slope"] - 2.0) < 0.1
                                  and max(d3.get("symmetry_errors", [np.inf])) < 1e-9
                                  and all(r == 3 for r in d3["removed"]))
    return out


def scale_rows(data):
    """Per (n, stage factor) of the hysteresis runs (the main one included): rate, jumps (mean, 95 % t half-width)."""
    s = data["summary"]
    rows = [dict(n=s["n"], stage_factor=1.0, ramp_rate=data["hysteresis"]["ramp_rate_slow_down"], seeds=s["seeds"],
                 down=tuple(s["jump_down"]), up=tuple(s["jump_up"]), main=True)]
    for r in (data.get("hysteresis_scale") or {}).get("rows", []):
        # a seed whose down ramp never jumps (uniform to the ramp's end: censored) has no up jump to read
        down = np.array([np.nan if x is None else x for x in r["jump_down"]], float)
        up = np.array([np.nan if x is None else x for x in r["jump_up"]], float)[np.isfinite(down)]
        rows.append(dict(n=r["n"], stage_factor=r["stage_factor"], ramp_rate=r["ramp_rate"], seeds=r["seeds"],
                         down=mean_ci95(down), up=mean_ci95(up), censored=int((~np.isfinite(down)).sum()),
                         main=False))
    return rows


def scale_checks(data) -> dict:
    """The loop narrows toward [nu_#, nu_fold] as the ramp slows, at each n with three or more rates: the lags
    ``nu_# - down`` and ``up - nu_fold`` of the seed means fall strictly with the rate, and the fastest and the
    slowest rate's intervals are disjoint (the decrease is larger than the seed scatter).  Seeds still uniform at
    the end of a down ramp are censored: left out of the down mean (that rate's lag is then a lower bound: at the
    fastest rate this only strengthens a falling lag, at a slower one it would bias the test toward passing, so the
    table names every censored seed) and of the up jumps (never clustered, no jump to read)."""
    s = data["summary"]
    by = {}
    for r in scale_rows(data):
        if not r["main"]:
            by.setdefault(r["n"], []).append(r)
    res = {}
    for n, rows in by.items():
        if len(rows) < 3:
            continue
        rows = sorted(rows, key=lambda r: -r["ramp_rate"])            # fastest first
        lag_d = [s["nu_sharp"] - r["down"][0] for r in rows]
        lag_u = [r["up"][0] - s["nu_fold"] for r in rows]
        fall = lambda x: bool(np.all(np.diff(x) < 0))                # noqa: E731
        apart = lambda a, b: bool(abs(a[0] - b[0]) > a[1] + b[1])    # noqa: E731
        lr = np.log([r["ramp_rate"] for r in rows])
        slopes = [float(np.polyfit(lr, np.log(lag), 1)[0]) if np.all(np.array(lag) > 0) else float("nan")
                  for lag in (lag_d, lag_u)]
        res[n] = dict(lag_down=lag_d, lag_up=lag_u, rates=[r["ramp_rate"] for r in rows], exponents=slopes,
                      down_falls=fall(lag_d), up_falls=fall(lag_u),
                      down_apart=apart(rows[0]["down"], rows[-1]["down"]), up_apart=apart(rows[0]["up"], rows[-1]["up"]))
    return {"scale": res, "loop_narrows": bool(res) and all(v["down_falls"] and v["up_falls"] and v["down_apart"]
                                                              and v["up_apart"] for v in res.values())}


def _fig_hysteresis(data, arrays, out):
    s = data["summary"]
    nu, r, k = arrays["branch_nu"], arrays["branch_r"], int(arrays["branch_fold_index"])
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    lo = min(arrays["nu_down"].min(), arrays["nu_up"].min())
    hi = max(arrays["nu_down"].max(), arrays["nu_up"].max())
    ax.plot([s["nu_sharp"], hi], [0, 0], "k-", lw=1.5, label="PDE: uniform (stable)")
    ax.plot([lo, s["nu_sharp"]], [0, 0], "k--", lw=1)
    ax.plot(nu[k:], r[k:], "k-", lw=1.5, label="PDE: clustered branch (stable)")
    ax.plot(nu[:k + 1], r[:k + 1], "k--", lw=1, label="PDE: unstable branch")
    for name, col, lab in (("down", "tab:blue", "particles, nu ramped down"), ("up", "tab:red", "particles, nu ramped up")):
        R = arrays[f"r_{name}"]
        for j in range(R.shape[0]):
            ax.plot(arrays[f"nu_{name}"], R[j], "-", color=col, lw=0.5, alpha=0.35)
        ax.plot(arrays[f"nu_{name}"], R.mean(axis=0), "o", color=col, ms=2.5, label=f"{lab} (mean of {R.shape[0]})")
    for key, ls, lab in (("nu_sharp", ":", "nu_#"), ("nu_global", "-.", "nu_global"), ("nu_fold", "--", "nu_fold")):
        ax.axvline(s[key], color="gray", ls=ls, lw=1, label=f"{lab} = {s[key]:.4f}")
    for key, col in (("jump_down", "tab:blue"), ("jump_up", "tab:red")):
        m, h = mean_ci95(arrays[key])
        if np.isfinite(m) and np.isfinite(h):
            ax.axvspan(m - h, m + h, color=col, alpha=0.15)
    ax.set_xlim(lo - 0.04, hi + 0.04)
    ax.set(xlabel="token noise nu", ylabel="order parameter |mean x|",
           title=f"Hysteresis on S^2, beta = 2 beta_* = {s['beta']:.4f}, n = {s['n']} (shaded: 95 % t-intervals of the jumps)")
    ax.title.set_fontsize(8)
    style_axes(ax, legend=6)
    save_figure(fig, out / "hysteresis.png")


def _fig_windows(data, out):
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    for d in sorted({w["d"] for w in data["dichotomy"]["windows"]}):
        ws = [w for w in data["dichotomy"]["windows"] if w["d"] == d and w["ok"]]
        x = np.array([w["ratio"] for w in ws]) - 1
        wf = np.array([w["nu_fold"] / w["nu_sharp"] - 1 for w in ws])
        wg = np.array([w["nu_global"] / w["nu_sharp"] - 1 for w in ws])
        l, = ax[0].loglog(x, wf, "o-", label=f"d = {d}: nu_fold / nu_# - 1")
        ax[0].loglog(x, wg, "s--", color=l.get_color(), mfc="none", label=f"d = {d}: nu_global / nu_# - 1")
        ax[1].semilogx(x, wg / wf, "o-", color=l.get_color(), label=f"d = {d}")
    ax[1].axhline(0.75, color="gray", ls=":", lw=1, label="3/4 (sextic Landau expansion)")
    ax[0].set(xlabel="beta / beta_*^(d) - 1", ylabel="relative window width",
              title="Window of the discontinuous transition")
    ax[1].set(xlabel="beta / beta_*^(d) - 1", ylabel="(nu_global - nu_#) / (nu_fold - nu_#)",
              title="Where the Maxwell point sits in the window")
    style_axes(ax, legend=6, which="both")
    save_figure(fig, out / "windows.png")


def landau(data) -> dict:
    """Near beta_*: the window widths against ``beta / beta_* - 1`` (slope of the two smallest ratios, log-log;
    a sextic Landau expansion gives 2) and the Maxwell fraction at the smallest ratio (it gives 3/4)."""
    out = {}
    for d in sorted({w["d"] for w in data["dichotomy"]["windows"]}):
        ws = sorted([w for w in data["dichotomy"]["windows"] if w["d"] == d and w["ok"]], key=lambda w: w["ratio"])
        if len(ws) < 2:
            continue
        (a, b) = ws[:2]
        slope = np.log((b["nu_fold"] - b["nu_sharp"]) / (a["nu_fold"] - a["nu_sharp"])) / np.log(
            (b["ratio"] - 1) / (a["ratio"] - 1))
        frac = (a["nu_global"] - a["nu_sharp"]) / (a["nu_fold"] - a["nu_sharp"])
        out[d] = dict(ratios=(a["ratio"], b["ratio"]), slope=float(slope), maxwell_fraction=float(frac))
    return out


def _fig_escape(data, out):
    es, s = data["escape"]["runs"], data["settings"]
    ns = sorted({e["n"] for e in es})
    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    for j, n in enumerate(ns):
        col = f"C{j}"
        dx = 0.004 * (j - (len(ns) - 1) / 2)
        first = True
        for e in (e for e in es if e["n"] == n):
            t = np.array([np.inf if x is None else x for x in e["times"]], float)
            ok = np.isfinite(t)
            ax.plot(np.full(ok.sum(), e["nu"] + dx), t[ok], "o", color=col, ms=4, alpha=0.7,
                    label=f"n = {n}" if first else None)
            first = False
            if (~ok).any():
                ax.plot([e["nu"] + dx], [s["esc_t_max"]], "^", color=col, ms=8)
                ax.annotate(f"{int((~ok).sum())}", (e["nu"] + dx, s["esc_t_max"]), fontsize=7, color=col,
                            textcoords="offset points", xytext=(-3, 6))
    sm = data["summary"]
    for key, ls in (("nu_sharp", ":"), ("nu_global", "-.")):
        ax.axvline(sm[key], color="gray", ls=ls, lw=1, label=key)
    ax.set(xlabel="token noise nu", ylabel="escape time from uniform",
           title=f"Escape from uniform tokens ({s['esc_seeds']} seeds each; triangles: censored at t = "
                 f"{s['esc_t_max']:g}, count above)")
    ax.title.set_fontsize(9)
    style_axes(ax, legend=7)
    save_figure(fig, out / "escape.png")


def _fig_beyond(data, out):
    b = data["beyond"]
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for key, marker in (("softmax", "o-"), ("sinkhorn", "s--")):
        rows = [r for r in b[key]["rows"] if r["ok"]]
        ax[0].plot([r["beta"] for r in rows], [r["nu_2"] for r in rows], marker, label=f"{key}, d = 3: nu_2")
    ax[0].legend(fontsize=8)
    ax[0].axhline(0, color="gray", lw=0.8)
    ax[0].set(xlabel="beta", ylabel="branch curvature nu_2 (> 0: discontinuous)", title="Softmax and Sinkhorn: the sign of nu_2")
    th = [r for r in b["two_heads"]["rows"] if r["ok"]]
    x = [r["beta"] for r in th]
    ax[1].plot(x, [r["nu_fold"] - r["nu_sharp"] for r in th], "o-", label="nu_fold - nu_#")
    ax[1].plot(x, [r["nu_global"] - r["nu_sharp"] for r in th], "s--", label="nu_global - nu_#")
    ax[1].set(xlabel="beta", ylabel="window width", title=f"two heads lambda = {b['two_heads']['lambdas']}, d = 3")
    style_axes(ax, legend=7)
    save_figure(fig, out / "beyond.png")


def _f(x, digits=6):
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{digits}g}"


def report(data_dir: Path, out_dir: Path | None = None) -> Path:
    out, arrays, data = open_study_data(data_dir, out_dir)
    s, a, b, st = data["summary"], data["dichotomy"], data["beyond"], data["settings"]
    c = checks(data, arrays)
    _fig_hysteresis(data, arrays, out)
    _fig_windows(data, out)
    _fig_escape(data, out)
    _fig_beyond(data, out)

    # ---- tables
    bstar = markdown_table(["d", "beta_* (Bessel root)", "beta_* (continuation)", "rel. difference",
                            "type at 0.9 beta_* (nu_2)", "type at 1.1 beta_* (nu_2)"],
                           [[r["d"], f"{r['beta_star_bessel']:.10f}", f"{r['beta_star_continuation']:.10f}",
                             f"{r['rel_error']:.1e}",
                             f"{r['types']['0.9']['transition']} ({r['types']['0.9']['nu_2']:.3g})",
                             f"{r['types']['1.1']['transition']} ({r['types']['1.1']['nu_2']:.3g})"]
                            for r in a["rows"]])
    wrows = []
    for w in a["windows"]:
        if w["ok"]:
            wrows.append([w["d"], w["ratio"], f"{w['beta']:.5g}", f"{w['nu_sharp']:.9g}", f"{w['nu_global']:.9g}",
                          f"{w['nu_fold']:.9g}", f"{w['nu_fold'] - w['nu_sharp']:.4g}",
                          f"{(w['nu_global'] - w['nu_sharp']) / (w['nu_fold'] - w['nu_sharp']):.3f}", w["lmax"]])
        else:
            wrows.append([w["d"], w["ratio"], f"{w['beta']:.5g}", "not resolved", "", "", "", "", w["error"][:120]])
    lan = landau(data)
    lan_rows = [[d, f"{v['ratios'][0]:g}, {v['ratios'][1]:g}", f"{v['slope']:.3f}", f"{v['maxwell_fraction']:.4f}"]
                for d, v in lan.items()]
    lan_table = markdown_table(["d", "beta / beta_* used", "slope of log(nu_fold - nu_#) vs log(beta/beta_* - 1)",
                                "(nu_global - nu_#) / (nu_fold - nu_#) at the smallest"], lan_rows)
    windows = markdown_table(["d", "beta/beta_*", "beta", "nu_#", "nu_global", "nu_fold", "nu_fold - nu_#",
                              "(nu_global - nu_#)/(nu_fold - nu_#)", "lmax"], wrows)
    jd, ju = c["jump_down"], c["jump_up"]
    esc_rows = []
    for e in data["escape"]["runs"]:
        t = np.array([np.inf if x is None else x for x in e["times"]], float)
        k, m = int(np.isfinite(t).sum()), t.size
        lo, hi = wilson95(k, m)
        mt = mean_ci95(t[np.isfinite(t)])
        esc_rows.append([e["n"], f"{e['offset']:+.2f}", f"{e['nu']:.4f}", f"{e['level']:.3f}", f"{k}/{m} ({lo:.2f}-{hi:.2f})",
                         "n/a" if not k else (f"{mt[0]:.1f} +- {mt[1]:.1f}" if np.isfinite(mt[1]) else f"{mt[0]:.1f}"),
                         f"{np.median(t):.1f}" if k > m / 2 else f"> {st['esc_t_max']:g} (censored)"])
    escape = markdown_table(["n", "nu - nu_#", "nu", "threshold (half the upper branch)",
                             f"escaped by t = {st['esc_t_max']:g} (Wilson 95 %)", "mean escape time of the escaped (95 % t)",
                             "median"], esc_rows)
    sm = b["softmax"]
    smrows = [[r["beta"], f"{r['nu_sharp']:.7g}", f"{r['nu_2']:.4g}", r["transition"],
               f"{r['nu_fold']:.7g}", r["lmax"]] if r["ok"] else [r["beta"], "not resolved", "", "", "", r["error"][:100]]
              for r in sm["rows"]]
    softmax = markdown_table(["beta", "nu_#", "nu_2", "type", "nu_fold", "lmax"], smrows)
    sk = b["sinkhorn"]
    skrows = [[r["beta"], f"{r['nu_sharp']:.7g}", f"{r['sigma_1_at_nu_sharp'] / r['sigma_1_scale']:.1e}",
               f"{r['nu_2']:.4g}", r["transition"], f"{r['nu_fold']:.7g}", f"{r['nu_global']:.7g}", r["lmax"]]
              if r["ok"] else [r["beta"], "not resolved", "", "", "", "", "", r["error"][:100]] for r in sk["rows"]]
    sinkhorn = markdown_table(["beta", "nu_#", "sigma_1(nu_#) / sigma_1(0)", "nu_2", "type", "nu_fold", "nu_global",
                               "lmax"], skrows)
    th = b["two_heads"]
    throws = [[r["beta"], f"{r['nu_sharp']:.7g}", f"{r['nu_2']:.4g}", r["transition"], f"{r['nu_global']:.7g}",
               f"{r['nu_fold']:.7g}"] if r["ok"] else [r["beta"], "failed", "", "", "", r["error"][:100]]
              for r in th["rows"]]
    twoh = markdown_table(["beta", "nu_#", "nu_2", "type", "nu_global", "nu_fold"], throws)
    dg = b["degree_two"]
    drows = []
    for x in dg["states"]:
        if not x["ok"]:
            drows.append([x["amplitude"], "failed", x["message"], "", "", ""])
            continue
        sp = x["sphere"]
        if sp["ok"]:
            ev, rot = np.array(sp["eigenvalues_re"]), np.array(sp["rotation"])
            neutral = int(np.sum((rot > 0.99) & (np.abs(ev) < 1e-6)))
            unstable = int(np.sum((ev > 1e-6) & (rot < 0.5)))
            sph = (f"top {', '.join(f'{v:.3g}' for v in ev[:5])}; {unstable} unstable, {neutral} neutral rotation "
                   f"modes (removed by the solve: {sp['removed']})")
        else:
            sph = sp["message"]
        drows.append([x["amplitude"], f"{x['nu']:.6g}", "two antipodal clusters" if x["amplitude"] > 0 else "equatorial band",
                      ", ".join(f"{v:.3g}" for v in x["axisym_top"][:3]), sph, ""])
    ref = dg["degree_one_reference"]
    if ref is not None:
        sp = ref["sphere"]
        sph = (f"top {', '.join(f'{v:.3g}' for v in np.array(sp['eigenvalues_re'])[:5])}; rotation parts "
               f"{', '.join(f'{v:.2f}' for v in np.array(sp['rotation'])[:5])}" if sp["ok"] else sp["message"])
        drows.append(["degree 1, r = 0.85", f"{ref['nu']:.6g}", "one cluster (reference)",
                      ", ".join(f"{v:.3g}" for v in ref["axisym_top"][:3]), sph, ""])
    deg2 = markdown_table(["b_2", "nu", "shape", "axisymmetric block: top eigenvalues", "full S^2 (ARPACK): top eigenvalues",
                           ""], drows)
    deg2_unstable = all(x["ok"] and x["axisym_top"][0] > 0 for x in dg["states"])

    srows = [[r["n"], f"{r['stage_factor']:g}", f"{r['ramp_rate']:.3g}", r["seeds"],
              f"{_f(r['down'][0], 4)} +- {_f(r['down'][1], 2)}", f"{s['nu_sharp'] - r['down'][0]:.4f}",
              f"{_f(r['up'][0], 4)} +- {_f(r['up'][1], 2)}", f"{r['up'][0] - s['nu_fold']:+.4f}",
              "main run above" if r["main"] else
              (f"{r['censored']} seed(s) still uniform at the down ramp's end (censored: lag larger; no up jump)"
               if r["censored"] else "")] for r in scale_rows(data)]
    scale_table = markdown_table(["n", "stage time x", "dnu/dt (slow part)", "seeds", "down jump (95 % t)",
                                  "nu_# - down", "up jump (95 % t)", "up - nu_fold", ""], srows)
    scale_text = "; ".join(f"n = {n}: lags down {', '.join(f'{x:.4f}' for x in v['lag_down'])}, up "
                           f"{', '.join(f'{x:+.4f}' for x in v['lag_up'])} at dnu/dt = "
                           f"{', '.join(f'{x:.3g}' for x in v['rates'])} (falling: {v['down_falls']}, {v['up_falls']}; "
                           f"fastest vs slowest intervals disjoint: {v['down_apart']}, {v['up_apart']}); log-log "
                           f"slope of the lag against the rate (three points: an observation, no interval): down "
                           f"{v['exponents'][0]:.2f}, up {v['exponents'][1]:.2f} (passage through a fold's ghost: 2/3 "
                           f"for the up lag; a delayed pitchfork: about 1/2, up to logs, for the down lag)"
                           for n, v in c["scale"].items()) or "fewer than three ramp rates at one n in this mode"
    d3 = b.get("degree_three")
    if d3 is not None and d3["solved"]:
        d3_text = (f"from nu_3 = {d3['nu_3']:.9f} (sigma_3 = 0) along `Im rho_32` (the xyz pattern), "
                   f"{d3['solved']} of {d3['asked']} amplitude-held Newton-Krylov solves converged ({d3['seconds']:.1f} s, "
                   f"{int(np.mean(d3['newton']))} Newton steps and {int(np.mean(d3['krylov']))} Krylov iterations per "
                   f"state on average); pitchfork slope of log |nu - nu_3| against log a: {d3['slope']:.3f} (2 for an odd "
                   f"degree, no quadratic term); rotation modes fixed per state: {sorted(set(d3['removed']))}; the last "
                   f"state (a = {d3['amplitudes'][-1]:.3g}, nu = {d3['nu'][-1]:.6f}): T_d symmetry errors "
                   f"{', '.join(f'{x:.1e}' for x in d3['symmetry_errors'])}, density at the four cluster vertices "
                   f"{d3['at_clusters'][0]:.4f} (uniform {1 / (4 * np.pi):.4f}), at the opposite vertices "
                   f"{d3['between'][0]:.4f}; the branch turns back in nu at a fold, nu = {d3['nu_fold_3']:.8f} "
                   + (f"(located: Brent's maximization of nu over the amplitude-held solves, at a = {d3['a_fold_3']:.6f}; "
                      f"the largest of the samples, state {d3['fold_index']}, is {d3['nu_fold_3_sampled']:.8f})"
                      if d3.get("fold_located") else f"(not located: the largest sample, state {d3['fold_index']})")
                   + f"; top eigenvalues of the last state {', '.join(f'{x:.3g}' for x in d3['top_eigenvalues'][:4])} "
                   f"(unstable, as it must be below nu_# where uniform itself is unstable to degree 1)")
    else:
        d3_text = "not computed"

    # ---- verdicts
    hold_text = ", ".join(f"seed {h['seed']} at nu_fold {h['offset']:+g}: {h['r_start']:.3f} -> {h['r_end']:.3f} "
                          f"(half branch {h['half_branch']:.3f})" for h in data["fold_hold"]["rows"])
    lin_text = "; ".join(f"nu_# {k:+g}, n = {v['n1']} -> {v['n2']}: {v['diff']:.1f} +- {v['half']:.1f} against "
                         f"{v['predicted']:.1f} ({v['ok']})" for k, v in c["escape_linear"].items()) or "no data"
    cens_text = "; ".join(f"nu_# {k:+g}: {v['escaped1']}/{st['esc_seeds']} at n = {v['n1']} "
                          f"({v['wilson1'][0]:.2f}-{v['wilson1'][1]:.2f}), {v['escaped2']}/{st['esc_seeds']} at n = "
                          f"{v['n2']} ({v['wilson2'][0]:.2f}-{v['wilson2'][1]:.2f}) ({v['ok']})"
                          for k, v in c["escape_censoring"].items()) or "no data"
    t_flip = "passed" if c["type_flips"] else "FAILED"
    ws = data.get("window_spectra")
    verdicts = [
        ("beta_*^(d) is the root of I_{d/2+1}/I_{d/2} = 1/d, where the branch turns from super- to subcritical",
         f"{MR}: {HYP}; axisymmetric degree-1 branch",
         REPRODUCED if c["beta_star_within_1e-6"] else REFUTED,
         f"test: continuation's beta_* within 1e-6 (relative) of the Bessel root for d = 2, 3, 4, 8, 64: largest "
         f"difference {s['beta_star_max_rel_error']:.1e}"),
        ("continuous for beta <= beta_*, discontinuous above", f"{MR}: {HYP}",
         REPRODUCED if c["type_flips"] else REFUTED,
         f"test: type at 0.9 beta_* continuous and at 1.1 beta_* discontinuous in all five d ({t_flip})"),
        ("above beta_*: nu_# < nu_global < nu_fold", f"{MR}: {HYP}, beta > beta_*",
         REPRODUCED if c["ordering"] else REFUTED,
         f"test: the ordering at every resolved (d, beta/beta_*) of the window table "
         f"({sum(w['ok'] for w in a['windows'])} points)"),
        ("hysteresis: uniform and clustered both locally stable for nu_# < nu < nu_fold (the continuum)",
         f"{MR}: {HYP}, beta = 2 beta_*, d = 3; the continuum's linearization in the axisymmetric block (the "
         f"cluster's m >= 1 modes: the S^2 check below)",
         (REPRODUCED if ws["both_stable"] else REFUTED) if ws else "not computed",
         (f"test: sigma_1 of uniform < 0 and the leading eigenvalue of every solved upper-branch state < 0 at the "
          f"{len(ws['nu'])} states with nu_# < nu < nu_fold: largest {max(ws['uniform_sigma_1']):.3g} and "
          f"{max(ws['cluster_leading_eigenvalue']):.3g}" if ws and ws["nu"] else "no state in the window")),
        ("hysteresis seen on noisy particles: both states kept through a ramp across the window",
         f"{MR}: {HYP}; here noisy particles (n = {s['n']}, {s['seeds']} seeds, d = 3, beta = 2 beta_*), finite n "
         f"and a finite ramp rate: not the paper's setting (until the referee this row read reproduced)",
         OUTSIDE,
         f"observed: every seed stays uniform (below half the upper branch) at every down-ramp stage in (nu_#, "
         f"nu_fold) ({c['uniform_kept_in_window']}) and clustered at every up-ramp stage in (nu_#, nu_global) "
         f"({c['cluster_kept_in_window']}); up-ramp order parameter within {c['max_branch_deviation']:.3f} of the "
         f"PDE branch below nu_fold - 0.03"),
        ("the jumps of the loop sit at nu_# (down) and nu_fold (up)",
         f"quasi-static limit (ramp rate -> 0, n -> inf) of the above; here dnu/dt = {data['hysteresis']['ramp_rate_slow_down']:.2g}, "
         f"n = {s['n']}",
         OUTSIDE,   # a finite-rate ramp is not the quasi-static limit: informative either way, no verdict on the claim
         f"down jump {_f(jd[0], 4)} +- {_f(jd[1], 2)} (95 % t, {s['seeds']} seeds): contains nu_# = {s['nu_sharp']:.4f}: "
         f"{c['down_interval_contains_nu_sharp']}; up jump {_f(ju[0], 4)} +- {_f(ju[1], 2)}: contains nu_fold = "
         f"{s['nu_fold']:.4f}: {c['up_interval_contains_nu_fold']} (a finite-rate ramp lags both bifurcations; see notes)"),
        ("the fold: the clustered state exists up to nu_fold and not beyond",
         f"{MR}: {HYP}; here noisy particles held at fixed nu (n = {s['n']}, {st['hold_seeds']} seeds, t = "
         f"{st['hold_time']:g}), no ramp (rerun on 10 fresh seeds after the referee, the rule unchanged; the first "
         f"run had 3)",
         REPRODUCED if c["fold_hold"] else REFUTED,
         f"test: every seed stays clustered (above half the branch) at nu_fold {min(st['hold_offsets']):+g} and "
         f"dissolves (below half the fold's value) at nu_fold {max(st['hold_offsets']):+g}: {c['fold_hold']}; end "
         f"values {hold_text}"),
        ("below nu_# uniform is linearly unstable at the rate sigma_1 = 2 (nu_# - nu)",
         f"{MR}, MODEL.md section 3: {HYP}; here the escape of noisy particles from i.i.d. uniform tokens "
         f"({st['esc_seeds']} seeds per n)",
         REPRODUCED if c["linear_escape_ok"] else REFUTED,
         f"test: the escape time grows from n1 to n2 by ln(n2/n1) / (2 sigma_1) (Welch 95 % interval): {lin_text}"),
        ("in (nu_#, nu_global) uniform is linearly stable: its escapes are finite-n fluctuations",
         f"{MR}: {HYP}; here the escape of noisy particles from i.i.d. uniform tokens (finite n, "
         f"{st['esc_seeds']} seeds per n, censored at t = {st['esc_t_max']:g}); that uniform is only metastable there "
         f"(a clustered state of larger G) is nu_global's definition, a consistency check, not this test (until the "
         f"referee this row claimed metastability from it)",
         REPRODUCED if c["metastable_scaling"] else REFUTED,
         f"test: the fraction escaped by t = {st['esc_t_max']:g} falls with n (Wilson 95 % intervals of the smallest "
         f"and largest n disjoint): {cens_text}"),
        ("softmax normalization: type of the transition (no paper)", "one zonal exp head, softmax, d = 3: no free energy",
         OUTSIDE,
         f"nu_2 < 0 (continuous) at every beta scanned ({', '.join(str(r['beta']) for r in sm['rows'] if r['ok'])}): "
         f"{sm['all_continuous']}; largest nu_2 {sm['max_nu_2']:.3g}"),
        ("Sinkhorn normalization: type of the transition (no paper)",
         "one zonal exp head, Sinkhorn, d = 3: free energy G = E_S - nu int rho log rho",
         OUTSIDE,
         f"nu_# is the zero of the closed-form Sinkhorn sigma_1 (1e-12): {sk['nu_sharp_is_the_zero_of_sigma_1']}; "
         f"nu_2 < 0 (continuous) at every beta scanned ({', '.join(str(r['beta']) for r in sk['rows'] if r['ok'])}): "
         f"{sk['all_continuous']}; largest nu_2 {sk['max_nu_2']:.3g}"),
        ("two heads of opposite signs (no paper)", f"lambda = {th['lambdas']}, mean, d = 3",
         OUTSIDE,
         f"test: the type flips from continuous (0.9 beta_*) to discontinuous (1.1 beta_*): {th['type_flips']}; "
         f"nu_# < nu_global < nu_fold at every discontinuous beta: {th['ordering_holds']}; beta_* from the continuation = "
         f"{th['beta_star_continuation'] if isinstance(th['beta_star_continuation'], str) else format(th['beta_star_continuation'], '.8f')} "
         f"(one head: {a['rows'][1]['beta_star_bessel']:.6f})"),
        ("degree-2 (two-cluster / band) axisymmetric states (no paper)", "one mean head, d = 3, beta = 2 beta_*",
         OUTSIDE,
         f"all examined states unstable in the axisymmetric block: {deg2_unstable}; S^2 spectra in the table"),
        ("full-S^2 branches beyond degree 1: the tetrahedral four-cluster branch from the degree-3 bifurcation "
         "(no paper)", f"one mean head, d = 3, beta = 2 beta_*, S^2 at lmax {st['sphere_lmax']}",
         OUTSIDE,
         f"test: pitchfork slope within 0.1 of 2, T_d symmetry of the last state to 1e-9, three rotation modes fixed "
         f"at every state: "
         f"{c.get('tetrahedral', 'not computed')}"),
        ("the hysteresis loop narrows toward [nu_#, nu_fold] as the ramp slows (no paper states a rate law)",
         "noisy particles, d = 3, beta = 2 beta_*, three ramp rates at one n", OUTSIDE,
         f"test: at each n with three rates the lags of both jumps fall strictly with the rate and the fastest and "
         f"slowest 95 % intervals are disjoint: {c['loop_narrows']}"),
    ]
    claims = [
        ["beta_*^(d), d = 2, 3, 4, 8, 64", f"continuation vs Bessel root to {s['beta_star_max_rel_error']:.1e}", verdicts[0][2]],
        ["type flips at beta_*", f"0.9 / 1.1 beta_*: {t_flip}", verdicts[1][2]],
        ["nu_# < nu_global < nu_fold", f"d = 3, beta = 2 beta_*: {s['nu_sharp']:.9f} < {s['nu_global']:.9f} < "
                                        f"{s['nu_fold']:.9f}", verdicts[2][2]],
        ["both states locally stable in (nu_#, nu_fold) (continuum)",
         (f"largest sigma_1 {max(ws['uniform_sigma_1']):.3g}, largest cluster eigenvalue "
          f"{max(ws['cluster_leading_eigenvalue']):.3g} over {len(ws['nu'])} states" if ws and ws["nu"] else
          "not computed"), verdicts[3][2]],
        ["hysteresis (particles)", f"loop test {c['uniform_kept_in_window'] and c['cluster_kept_in_window']}; jumps "
                                   f"{_f(jd[0], 4)} +- {_f(jd[1], 2)} (down), {_f(ju[0], 4)} +- {_f(ju[1], 2)} (up)",
         verdicts[4][2]],
        ["Sinkhorn normalization", f"continuous at every beta scanned: {sk['all_continuous']} (largest nu_2 "
                                   f"{sk['max_nu_2']:.3g})", OUTSIDE],
    ]
    w = s["wall_seconds"]
    intro = f"""
Stationary states and phase transitions of the noisy mean-field model (MODEL.md section 7, issue 23 items 5
and 7), against {MR}. Everything on the PDE side comes from the stationary solvers
(`meanfield.analysis.equilibria`, `phase_transition`, `sphere_states`): Newton on the self-consistency
equation, no time stepping. The particle side is `meanfield.workflow.ramp.noise_ramp` (piecewise-constant
`nu`, each stage a new `ParticleSystem(heads, nu=...)` continued from the last tokens, spectral sums,
`solve_particles(method=None -> geodesic_strang, dt, seed, t_eval, observe=False)`).

Wall time of this run: {', '.join(f'{k} {v:.0f} s' for k, v in w.items())} (total {sum(w.values()):.0f} s).

Tests and consistency checks: every verdict below is decided by a test that could fail (named in its row).
Consistency checks, identities that hold by construction and are reported, not counted as tests: `nu_#`
equals `c_1(beta) / beta` (the solver reads it from the model's own multipliers), the neutral rotation modes
of the S^2 spectra (rotations map stationary states to stationary states), `nu_fold = nu_global = nu_#` for a
continuous transition (set so by `classify_transition`).
"""
    notes = f"""
### Changes after the third referee (issue 33)

- Hysteresis: the particle row read **reproduced** while saying "not the paper's setting"; it is now **outside the
  hypotheses** (an observation), and the claim is decided in the paper's setting, the continuum: both states'
  linearizations are stable at every solved upper-branch state inside the window (a test that could fail).
- "Uniform only metastable in (nu_#, nu_global)": the escape fraction falling with n tests linear stability (escapes
  are finite-n fluctuations), not global optimality; the row now claims what it tests, and metastability (a state of
  larger G) is nu_global's definition, a consistency check.
- The fold at fixed nu: 3 seeds became 10, on fresh seeds (`run.HOLD_SEED_BASE`); the rule (every seed clustered at
  nu_fold - 0.02 and dissolved at + 0.02) was not changed.
- The tetrahedral fold is located (Brent on the amplitude-held solves), not the largest of 50 samples.

### (a) The dichotomy

{bstar}

`beta_*` from the continuation is where the curvature `nu_2` of `nu(b_1) = nu_# + nu_2 b_1^2 + ...` changes
sign, found by Brent's method on Newton-solved branch states; it uses no Bessel function, so agreement with
the Bessel root is a test. The identity `nu_# = c_1(beta)/beta` (the solver's `nu_sharp` from the model's own
multipliers) is a consistency check, not a test. Window widths against `beta / beta_*`
(`phase_transition`, every entry checked on two degrees of the lmax ladder to 1e-9):

{windows}

Near `beta_*` (a tricritical point: the quartic coefficient of the reduced free energy changes sign there)
a sextic Landau expansion `G ~ a (nu_# - nu) b^2 - c b^4 + e b^6` with `c ~ beta - beta_*` gives window widths
`~ c^2 ~ (beta - beta_*)^2` and the Maxwell point at `c^2 / (4 e)` against the fold's `c^2 / (3 e)`: 3/4 of
the way to the fold. Measured (this is an observation, not a claim of the papers):

{lan_table} `beta_*^(64)` =
{a['rows'][-1]['beta_star_bessel']:.6f}, on its way to 1 (d -> inf).

### (b) Hysteresis and escape from the particles

d = 3, beta = 2 beta_* = {s['beta']:.6f}, n = {s['n']}, {s['seeds']} seeds (ramps from i.i.d. uniform tokens,
seeds 500 + k), SDE step dt = {st['dt']}, stages: down {st['down']}, up {st['up']} (start, stop, step, stage time).
The order parameter is read at the end of each stage. A jump is the first stage whose order parameter crosses
half the PDE's upper branch at that nu (past the fold: half of its value at the fold).

- PDE: nu_# = {s['nu_sharp']:.9f}, nu_global = {s['nu_global']:.9f}, nu_fold = {s['nu_fold']:.9f}.
- Down jump: {_f(jd[0], 5)} +- {_f(jd[1], 2)} (95 % Student t, {s['seeds'] - 1} d.o.f.; per seed
  {', '.join(f'{x:.3f}' for x in arrays['jump_down'])}).
- Up jump: {_f(ju[0], 5)} +- {_f(ju[1], 2)} (per seed {', '.join(f'{x:.3f}' for x in arrays['jump_up'])}).
- Up-ramp order parameter against the PDE's clustered branch (stages below nu_fold - 0.03): largest
  deviation of the seed mean {c['max_branch_deviation']:.4f}.

Jumps against n and the ramp rate (the stage time at each nu multiplied by a factor, the same stages; the
ramps of a factor at one n are `scale.hysteresis_scale`, one cached task per seed):

{scale_table}

{scale_text}.

Why the jumps are not at the PDE points: with a ramp rate `q = dnu/dt` the uniform state only starts to grow
below `nu_#`, at the rate `sigma_1 = 2 (nu_# - nu)`, so the jump comes when `(nu_# - nu)^2 / q` reaches the
few e-foldings needed to grow from the `1/sqrt(n)` fluctuations (delayed bifurcation): a lag `~ sqrt(q log
sqrt(n))` below `nu_#`; the critical fluctuations of a finite n (variance `~ 1/(n (nu - nu_#))`) act the other
way, above `nu_#`. On the way up the clustered state survives past `nu_fold` for the passage time of the fold's
ghost (`~ q^(2/3)` in nu) and is shaken off before it by noise at finite n. The SDE step biases the clustered
state too: at nu = 1.15 (n = 4000/10000, T = 20) the stationary order parameter was 0.653 (dt = 0.1), 0.811
(0.05), 0.861 (0.025), 0.877 (0.0125) against the PDE's 0.881 (weak order ~2, a large constant), which is why
the ramps use dt = {st['dt']}. This run's step check (n = {s['n']}, one seed, nu = {data['dt_check']['nu']},
second half of t in [0, {st['dt_check_time']:g}] from a concentrated start; PDE {data['dt_check']['pde_r']:.4f}):
{', '.join(f"dt = {x['dt']:g}: {x['r']:.4f}" for x in data['dt_check']['rows'])}.

Fold without a ramp (clustered tokens relaxed at nu_fold - 0.05 for t = 5, then held for t = {st['hold_time']:g}
at fixed nu; the order parameter over the last tenth): {hold_text}.

Escape from i.i.d. uniform tokens at fixed nu ({st['esc_seeds']} seeds each, dt =
{st['esc_dt']}, censored at t = {st['esc_t_max']:g}; the order parameter is read every
{st['esc_chunk'] / 8:g} time units):

{escape}

Below nu_# the uniform state is linearly unstable: every run leaves, and the escape time is the time for the
degree-1 mode to grow from its `n^(-1/2)` fluctuations, `(1/sigma_1) ln(level sqrt(n))` up to a constant, so it
grows with n by `ln(n2/n1) / (2 sigma_1)` only ({lin_text}). Inside (nu_#, nu_global) the uniform state is
linearly stable and only finite-n fluctuations carry it over the barrier of the unstable branch (`G` barrier
`~ (nu - nu_#)^2 / nu_2`, escape time growing like `exp(n * barrier / nu)`): at these n the barrier is still
small (the unstable branch sits at r ~ 0.18 for nu_# + 0.03, against fluctuations ~ n^(-1/2) enhanced near
nu_#), so escapes are common at n = 1000, and the censored fraction rises with n ({cens_text}).

### (c) Beyond the papers

**Softmax** (d = 3; no free energy, so no nu_global; stability from the spectrum):

{softmax}

**Two heads of opposite signs**, lambda = {th['lambdas']} (d = 3, mean): `beta_*` from the continuation
{th['beta_star_continuation'] if isinstance(th['beta_star_continuation'], str) else format(th['beta_star_continuation'], '.10f')}:

{twoh}

**Degree-2 branches** (d = 3, beta = 2 beta_*, nu_#^(2) = {dg['nu_sharp_2']:.6f}): axisymmetric states
`branch_state(pde, b_2, 2)`, their axisymmetric spectrum (`linear_spectrum`) and the full S^2 spectrum
(`sphere_spectrum`, lmax {st['sphere_lmax']}, after a Newton-Krylov polish on S^2) with the part of each
eigenvector along the rotation orbit (1: neutral rotation mode). The neutral modes at ~0 are a consistency
check (rotations map states to states), not a test.

{deg2}

**Degree 3 on the full S^2: the tetrahedral branch** (`sphere_branch(..., mode=(3, 2, "im"))`): {d3_text}.

**Sinkhorn** (d = 3; the velocity is `-(1/beta) grad log a`, a gradient, and `G = E_S - nu int rho log rho`
ascends; `nu_#` against the zero of the closed-form Sinkhorn growth rate `sigma_1 = (d - 1) [(1/beta) c_1 /
(c_0 + c_1) - nu]`, two independent derivations):

{sinkhorn}
"""
    figures = [("hysteresis.png", "Order parameter against nu: particles ramped down and up, the PDE branch"),
               ("windows.png", "nu_fold - nu_# and nu_global - nu_# against beta / beta_* for d = 2 ... 64"),
               ("escape.png", "Escape times from uniform tokens near nu_# (triangles: censored runs)"),
               ("beyond.png", "Softmax and Sinkhorn branch curvatures and the two-head window")]
    return write_report(out / "report.md", "Phase transitions of the noisy model", intro, claims, figures, notes,
                        verdicts)


if __name__ == "__main__":
    import sys

    report(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "output")
