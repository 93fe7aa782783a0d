"""Report of the orthogonal-heads study: figures, ``report.md`` and the verdicts from the data of ``run.py``.

Decision rules (fixed before the full run's data were seen; every interval is a Student-t interval on the stated
degrees of freedom, and a family of times is judged with a Bonferroni level 0.05 / K):

* **Interference (the radial shadows' coupling persists under exact orthogonality)**, value-aligned cases: reproduced
  if the continuum's off-diagonal rate term ``|C[h, h']| / C[h, h]`` exceeds ``INTERFERENCE_MIN`` = 1e-6 (10^4 times
  the sums' tolerance) at some output time, refuted otherwise.
* **Total energy non-decreasing (Thm 11)**, value-aligned cases: a consistency check (a proved identity): reproduced if
  no increment of the PDE's or of any particle run's total energy falls below ``-ENERGY_TOL`` (relative), refuted
  otherwise.
* **The continuum limit at rate n^-1/2** (MODEL.md section 4; i.i.d. start, smooth kernels, a finite horizon): the
  slope of log MMD (Sobolev H^-2, exact) against log n over the per-n means, at each output time: reproduced if every
  Bonferroni interval (dof = #n - 2) contains -1/2, refuted if one excludes it.  The W2 slope (semi-discrete, n <=
  w2_max_n, seeds where the solver converged) is reported with its interval against the band [-1/2, -0.4] (the
  logarithm of W2 in dimension 2 flattens the slope by up to ~0.1 over these n).
* **The particles' per-head rate terms converge to the continuum's**: the slope of log of the mean |C_n - C| (over
  seeds, at the last output time) against log n must have its 95 % upper bound below 0 (reproduced), else refuted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import stats

from studies._common import OUTSIDE, REFUTED, REPRODUCED, load_json, save_figure, style_axes, write_report

INTERFERENCE_MIN = 1e-6
ENERGY_TOL = 1e-8          # relative decrease of a total energy between output times counted as a decrease
ALIGNED = ("plane_axis", "three_lines")
LABELS = {"plane_axis": "plane + axis, V = M", "plane_axis_rotated": "plane + axis, V_1 = lam (P_xy + J_z / 2)",
          "three_lines": "three lines, V = M"}
HYP_ORTH = "M_h' M_h = 0 (orthogonal subspaces of R^3), exp kernel, mean normalization, spherical dynamics"


SUBSPACES = {"plane_axis": "the xy plane or the z axis, within 0.05", "plane_axis_rotated": "the xy plane or the z axis, "
             "within 0.05", "three_lines": "a coordinate axis, within 0.05"}


def _on_subspace(name, c):
    """Per seed the cluster mass whose centre lies on a head's range (within 0.05), and the cluster counts."""
    X, w, seed = c["centres"], c["masses"], c["seed"]
    if name == "three_lines":
        on = np.abs(X).max(axis=1) > 1 - 0.05 ** 2 / 2                 # within 0.05 of an axis (chordal)
    else:
        on = (np.abs(X[:, 2]) < 0.05) | (np.abs(X[:, 2]) > 1 - 0.05 ** 2 / 2)
    seeds = np.unique(seed)
    return np.array([w[(seed == s) & on].sum() for s in seeds]), [int((seed == s).sum()) for s in seeds]


def _load(data_dir):
    cases = {}
    for p in sorted(Path(data_dir).glob("case_*.npz")):
        cases[p.stem[5:]] = dict(np.load(p, allow_pickle=True))
    return cases


def _per_n(d, key, k):
    """Per-n means over seeds (finite values) of ``d[key][:, k]``: (n values, means, counts)."""
    ns = d["n_values"]
    vals = d[key][:, k]
    means, counts = [], []
    for n in ns:
        v = vals[(d["n"] == n) & np.isfinite(vals)]
        means.append(v.mean() if v.size else np.nan)
        counts.append(v.size)
    return ns, np.array(means), np.array(counts)


def _slope(x, y, level):
    ok = np.isfinite(y) & (y > 0)
    X, Y = np.log(x[ok]), np.log(y[ok])
    m = X.size
    if m < 3:
        return np.nan, np.nan, m
    res = stats.linregress(X, Y)
    half = stats.t.ppf(0.5 + level / 2, m - 2) * res.stderr
    return res.slope, half, m


def analyse(cases):
    out = {}
    for name, d in cases.items():
        t = d["t"]
        K = len(t)
        C = d["pde_C"]                                    # (K, H, H)
        H = C.shape[1]
        off = np.array([[abs(C[k, h, g]) / C[k, h, h] for h in range(H) for g in range(H) if g != h] for k in range(K)])
        rates = C.sum(axis=2)
        E = d["pde_energy"].sum(axis=1)
        dE_pde = np.diff(E) / np.abs(E[:-1])
        Ep = d["energy"].sum(axis=2)                      # (runs, K)
        dE_p = np.diff(Ep, axis=1) / np.abs(Ep[:, :-1])
        level = 1 - 0.05 / max(K - 1, 1)
        mmd = [_slope(*_per_n(d, "mmd", k)[:2], level) for k in range(1, K)]
        w2_idx = [k for k in range(K) if np.any(np.isfinite(d["w2"][:, k]))]
        lev_w2 = 1 - 0.05 / max(len(w2_idx), 1)
        w2 = {float(t[k]): _slope(*_per_n(d, "w2", k)[:2], lev_w2) + (_per_n(d, "w2", k)[2].tolist(),) for k in w2_idx}
        dC = np.abs(d["C"][:, -1] - C[-1][None]).max(axis=(1, 2)) / np.abs(C[-1]).max()
        ns = d["n_values"]
        dC_mean = np.array([dC[d["n"] == n].mean() for n in ns])
        s_dc, h_dc, _ = _slope(ns.astype(float), dC_mean, 0.95)
        out[name] = {"K": K, "t": t, "off_max": float(off.max()), "off_min": float(off.min()),
                     "rate_over_self_min": float((rates / np.einsum("khh->kh", C)).min()),
                     "pde_cond_min": d["pde_cond"].min(axis=0), "pde_dE_min": float(dE_pde.min()),
                     "particle_dE_min": float(np.nanmin(dE_p)), "mmd": mmd, "mmd_level": level, "w2": w2,
                     "w2_failed": int(d["w2_failed"].sum()), "dC_slope": (s_dc, h_dc), "dC_mean": dC_mean,
                     "pde_message": str(d["pde_message"]), "long": {k: d[k] for k in d if k.startswith("long_")}}
    return out


def _fig_rates(cases, out):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 3.8), squeeze=False)
    for ax, (name, d) in zip(axes[0], cases.items()):
        t, C = d["t"], d["pde_C"]
        H = C.shape[1]
        big = d["n"] == d["n_values"].max()
        rate = "dE_{}/dt" if name in ALIGNED else "sum_h' C[{},h']"      # the row sums are dE_h/dt only for V = M
        for h in range(H):
            ax.plot(t, C[:, h, h], "-", label=f"self C[{h},{h}] (PDE)")
            ax.plot(t, C[:, h].sum(axis=1), "--", label=f"{rate.format(h)} (PDE)")
            ax.plot(t, d["C"][big][:, :, h].sum(axis=2).mean(axis=0), ":", lw=2,
                    label=f"{rate.format(h)} (n = {d['n_values'].max():.0e})")
        for h in range(H):
            for g in range(h + 1, H):
                ax.plot(t, C[:, h, g], "-.", label=f"interference C[{h},{g}] = -int a^{h} a^{g} rho")
        ax.axhline(0, color="0.3", lw=0.6)
        ax.set_title(LABELS.get(name, name), fontsize=9)
        ax.set_xlabel("t")
        style_axes(ax, legend=6)
    axes[0][0].set_ylabel("per-head rate terms")
    save_figure(fig, out / "rates.png")
    return "rates.png"


def _fig_rates_n(cases, out):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, d in cases.items():
        K = len(d["t"])
        ns, m, _ = _per_n(d, "mmd", K - 1)
        axes[0].loglog(ns, m, "o-", label=f"{LABELS.get(name, name)} (t = {d['t'][-1]:g})")
        for k in range(K):
            if np.any(np.isfinite(d["w2"][:, k])) and d["t"][k] > 0:
                ns2, m2, _ = _per_n(d, "w2", k)
                axes[1].loglog(ns2, m2, "o-", label=f"{LABELS.get(name, name)}, t = {d['t'][k]:g}")
    for ax, what in zip(axes, ("MMD (Sobolev H^-2) to the PDE density", "W2 (semi-discrete, geodesic) to the PDE")):
        xs = np.array([1e2, 1e6 if "MMD" in what else 1e4])
        ref = ax.get_lines()[0].get_ydata()[0] if ax.get_lines() else 1.0
        ax.loglog(xs, ref * (xs / xs[0]) ** -0.5, "k:", label="n^-1/2")
        ax.set_xlabel("n (tokens)")
        ax.set_ylabel(what)
        style_axes(ax, legend=6, which="both")
    axes[1].set_title("W2 against n (means over seeds)", fontsize=9)
    axes[0].set_title("MMD against n (means over seeds)", fontsize=9)
    save_figure(fig, out / "rate_n.png")
    return "rate_n.png"


def report(data_dir: Path, out_dir: Path | None = None) -> Path:
    data_dir = Path(data_dir)
    out = Path(out_dir) if out_dir is not None else data_dir
    out.mkdir(parents=True, exist_ok=True)
    cases = _load(data_dir)
    s = load_json(data_dir / "data.json") if (data_dir / "data.json").exists() else {"config": {}}
    cfg = s["config"]
    a = analyse(cases)
    figs = [(_fig_rate_n := _fig_rates_n(cases, out), "MMD and W2 between the particles and the PDE against n (the "
             "dotted line n^-1/2)"),
            (_fig_rates(cases, out), "Per-head rate terms C[h,h'] = int <P u^h, P u^h'> rho along the flow: self terms, "
             "row sums (dE_h/dt for the value-aligned cases; continuum and the largest n), and the interference terms "
             "-int a^h a^h' rho")]
    verdicts, claims = [], []
    for name in [c for c in ALIGNED if c in a]:
        r = a[name]
        ok = r["off_max"] > INTERFERENCE_MIN
        verdicts.append([f"[{LABELS[name]}] on the sphere, the radial shadows keep a coupling -a^h a^h' in dE_h/dt under "
                         f"exact orthogonality (interference)", HYP_ORTH + "; V_h = M_h symmetric",
                         REPRODUCED if ok else REFUTED,
                         f"continuum |C[h,h']| / C[h,h] between {r['off_min']:.3f} and {r['off_max']:.3f} over "
                         f"t in [0, {r['t'][-1]:g}] (rule: > {INTERFERENCE_MIN:g} at some time); smallest "
                         f"dE_h/dt / C[h,h] = {r['rate_over_self_min']:.3f}"])
        ok = r["pde_dE_min"] >= -ENERGY_TOL and r["particle_dE_min"] >= -ENERGY_TOL
        verdicts.append([f"[{LABELS[name]}] total energy non-decreasing (Thm 11; consistency check: an identity)",
                         "symmetric M_h, V_h = M_h, exp, mean", REPRODUCED if ok else REFUTED,
                         f"smallest relative increment: PDE {r['pde_dE_min']:.2e}, particles {r['particle_dE_min']:.2e} "
                         f"(rule: >= -{ENERGY_TOL:g})"])
    if "plane_axis_rotated" in a:
        r = a["plane_axis_rotated"]
        verdicts.append([f"[{LABELS['plane_axis_rotated']}] interference and per-head monotonicity",
                         "the paper's coupling identity needs V_h = M_h (here V_1 is not symmetric)", OUTSIDE,
                         f"measured anyway: |C[h,h']| / C[h,h] up to {r['off_max']:.3f}; smallest row sum of C / C[h,h] "
                         f"{r['rate_over_self_min']:.3f} (not dE_h/dt here: V_1 != M_1)"])
    for name, r in a.items():
        inside = all(np.isfinite(sl) and abs(sl + 0.5) <= h for sl, h, _ in r["mmd"])
        refuted = any(np.isfinite(sl) and abs(sl + 0.5) > h for sl, h, _ in r["mmd"])
        slopes = ", ".join(f"{sl:.3f} +- {h:.3f}" for sl, h, _ in r["mmd"][::max(1, len(r["mmd"]) // 4)])
        verdicts.append([f"[{LABELS.get(name, name)}] the particles converge to the continuum at rate n^-1/2 (MMD)",
                         "i.i.d. start, smooth (exp) interaction, finite horizon (MODEL.md section 4)",
                         REPRODUCED if inside else (REFUTED if refuted else OUTSIDE),
                         f"slopes of log MMD against log n at {r['K'] - 1} times (Bonferroni "
                         f"{100 * r['mmd_level']:.2f} % intervals, {r['mmd'][0][2] - 2} dof), e.g. {slopes}"])
        sl, h = r["dC_slope"]
        ok = np.isfinite(sl) and sl + h < 0
        verdicts.append([f"[{LABELS.get(name, name)}] the particles' per-head rate terms (shadows, interference) converge "
                         f"to the continuum's", "as above", REPRODUCED if ok else REFUTED,
                         f"slope of log mean |C_n - C| / max|C| against log n at t = {r['t'][-1]:g}: {sl:.3f} +- {h:.3f} "
                         f"(95 %; rule: upper bound < 0)"])
        for tk, (s2, h2, m2, counts) in r["w2"].items():
            if tk == 0.0:
                continue
            band = np.isfinite(s2) and (s2 - h2 <= -0.4) and (s2 + h2 >= -0.5)
            claims.append([f"[{LABELS.get(name, name)}] W2 slope at t = {tk:g} (n <= {cfg.get('w2_max_n', '?')})",
                           f"{s2:.3f} +- {h2:.3f} over {m2} n values (seeds per n {counts}; {r['w2_failed']} W2 solves "
                           f"failed in this case, left out)",
                           "within [-1/2, -0.4]" if band else "outside [-1/2, -0.4]"])
    data_dir = Path(data_dir)
    for name in cases:
        path = data_dir / f"clusters_{name}.npz"
        if not path.exists():
            continue
        c = np.load(path)
        on, counts = _on_subspace(name, c)
        m, h = (np.mean(on), stats.t.ppf(0.975, len(on) - 1) * np.std(on, ddof=1) / np.sqrt(len(on))) \
            if len(on) > 1 else (float(on[0]), np.nan)
        claims.append([f"[{LABELS.get(name, name)}] clusters at t = {float(c['t']):g} (particles, n = {int(c['n'])}; new: "
                       f"no claim of the paper)",
                       f"clusters of mass >= 1 % per seed {counts}; mass on a head's subspace ({SUBSPACES[name]}) "
                       f"{m:.3f} +- {h:.3f} (95 % t, {len(on)} seeds); centres (|x|, |y|, |z|, mass) "
                       f"{[tuple(np.round(np.r_[np.abs(x), w], 2).tolist()) for x, w in zip(c['centres'], c['masses'])][:12]}",
                       "measured"])
    for name, r in a.items():
        lg = r["long"]
        if "long_peaks" in lg:
            claims.append([f"[{LABELS.get(name, name)}] the density's peaks (new: no claim of the paper)",
                           f"PDE (lmax {cfg.get('lmax_long', '?')}) to t = {float(lg['long_t'][-1]):g} (its resolution "
                           f"monitor): density peaks "
                           f"{lg['long_peaks'].tolist()} (every {cfg.get('dt_long', '?')}); final peaks at "
                           f"{np.round(lg['long_final_centres'], 2).tolist()} with masses "
                           f"{np.round(lg['long_final_masses'], 3).tolist()}",
                           "measured"])
    intro = f"""
The seed paper's own setting: heads that attend inside orthogonal subspaces of R^3, in the mean-field limit, which the
general-head operators (MODEL.md section 8) make computable.  Cases: {', '.join(LABELS.get(c, c) for c in cases)};
beta = {cfg.get('beta')}, lam = {cfg.get('lam')}; PDE at lmax {cfg.get('lmax')} to t = {cfg.get('t_max')} from three vMF
bumps (kappa {cfg.get('kappa')}) over a uniform floor {cfg.get('floor')}; particles n = {cfg.get('n_values')}
({cfg.get('seeds_small')} seeds up to {cfg.get('n_many_seeds')}, {cfg.get('seeds_large')} above), spectral sums at
tolerance {cfg.get('spectral_tol')}.  Decision rules: see the module docstring of report.py (fixed before the data)."""
    notes = "\n".join(f"- {LABELS.get(n, n)}: PDE {r['pde_message']}; Condition 8 (exact) holds on at least "
                      f"{np.round(r['pde_cond_min'], 3).tolist()} of the mass per head along the flow." for n, r in a.items())
    return write_report(out / "report.md", "Heads on orthogonal subspaces in the continuum limit", intro, claims,
                        figures=figs, notes=notes, verdicts=verdicts)
