"""Figures and report.md of the long-context study (reads data.npz / data.json of run.py)."""

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
    mean_ci,
    open_study_data,
    save_figure,
    style_axes,
    write_report,
)

MIN_SEEDS = 10
FWER = 0.05     # family-wise error rate of the annealed-law family (every (n, d) cell of part 2)


def annealed_family(cells, fwer=FWER):
    """Per cell of part 2: the Student-t interval of the mean quenched ``gamma*`` at level ``1 - fwer / m``
    (Bonferroni over the ``m`` cells, seeds - 1 dof) must contain the annealed crossing, up to the closed form's
    own approximation error (the Jensen-gap resolution, computed from the closed form before any sample).  Fixed
    after the referee of issue 33 (the earlier rule, 95 % per cell with 5 cells, had a ~23 % family-wise false
    disagreement rate), run on fresh seeds.  Returns one dict per cell (``ok``, ``ok_without_term``, ``half``)."""
    from scipy import stats

    m = len(cells)
    out = []
    for c in cells:
        g = np.asarray(c["gamma_star"], float)
        half = float(stats.t.ppf(1 - fwer / (2 * m), g.size - 1) * g.std(ddof=1) / np.sqrt(g.size))
        dev = abs(float(g.mean()) - c["gamma_star_annealed"])
        out.append({"n": c["n"], "d": c["d"], "mean": float(g.mean()), "half": half, "dev": dev,
                    "annealed": c["gamma_star_annealed"], "resolution": c["annealed_resolution"],
                    "ok": bool(dev <= half + c["annealed_resolution"]), "ok_without_term": bool(dev <= half),
                    "shift_ratio": float((g.mean() - 1.0) / c["finite_d_shift"])})
    return out


def _key(r):
    return f"rho{r['rho']:g}_alpha{r['alpha']:g}_kappa{r['kappa']:g}"


def _fig_layer(d, meta, path):
    rhos, alphas = meta["rhos"], meta["alphas"]
    fig, axes = plt.subplots(2, len(rhos) * len(alphas), figsize=(4.2 * len(rhos) * len(alphas), 8))
    ns = d["ns"]
    for c, (rho, alpha) in enumerate([(r, a) for r in rhos for a in alphas]):
        rows = [r for r in meta["layer"] if r["rho"] == rho and r["alpha"] == alpha]
        for i, r in enumerate(rows):
            v = d[_key(r)]
            axes[0, c].semilogx(ns, v, color=f"C{i}", label=f"kappa = {r['kappa']:g}")
            axes[0, c].axhline(r["limit"], color=f"C{i}", ls="--", lw=0.8)
            axes[1, c].loglog(ns, np.abs(v - r["limit"]), color=f"C{i}",
                              label=f"kappa={r['kappa']:g}: p={r['extrapolated_exponent']:.3f} "
                                    f"(derived {r['derived_exponent']:g})")
            nn = np.array(r["particles_n"], float)
            axes[0, c].plot(nn, r["particles_rho_new"], "o", mfc="none", color=f"C{i}", ms=5)
        axes[0, c].set_title(f"rho = {rho:g}, alpha = {alpha:g}" + (" (pre-LN, dt = 1)" if alpha == 1 else
                                                                      " (attention output)"), fontsize=10)
        axes[0, c].set_ylabel("rho' after one layer (o: library particles)")
        axes[1, c].set_ylabel("|rho'_n - rho'_inf|")
        for ax in axes[:, c]:
            ax.set_xlabel("n (beta = gamma log n, gamma = kappa / (1 - rho))")
            style_axes(ax, legend=7)
    save_figure(fig, path)


def _fig_query(d, meta, path):
    ns, G = d["q_ns"], d["q_gammas"]
    fig, axes = plt.subplots(1, 4, figsize=(21, 4.8))
    for i, n in enumerate(ns):
        m, h = mean_ci(d["q_self"][i], axis=-1)
        axes[0].errorbar(G, m, yerr=h, fmt="o", ms=3, color=f"C{i}", label=f"n = {n:.0e}")
        axes[0].plot(G, d["q_annealed"][i, :, 0], "-", lw=0.8, color=f"C{i}")
    axes[0].axvline(1.0, color="k", ls=":", lw=1, label="paper: gamma_c = 1/(1-rho) = 1")
    axes[0].axhline(0.5, color="0.5", lw=0.6)
    axes[0].set_xlabel("gamma (beta = gamma log n)")
    axes[0].set_ylabel("self-weight p_ii (mean, 95% t; lines: annealed)")
    for j, g in enumerate(G):
        if g not in (0.5, 0.8, 1.0, 1.2, 1.5, 2.0):
            continue
        m, h = mean_ci(d["q_neff"][:, j], axis=-1)
        axes[1].errorbar(ns, m, yerr=h, fmt="o-", ms=3, label=f"gamma = {g:g}")
        m, h = mean_ci(d["q_neff_free"][:, j], axis=-1)
        axes[2].errorbar(ns, m, yerr=h, fmt="o-", ms=3, label=f"gamma = {g:g}")
    axes[1].axhline(4.0, color="k", ls=":", lw=1, label="critical limit 4 (d -> inf)")
    axes[2].plot(ns, ns, "k:", lw=1, label="n")
    cells = meta["cells"]
    for k, dd in enumerate(sorted({c["d"] for c in cells})):
        C = [c for c in cells if c["d"] == dd]
        x = np.array([c["finite_d_shift"] for c in C])
        axes[3].errorbar(x, [c["gamma_star_mean"] - 1 for c in C], yerr=[c["gamma_star_half95"] for c in C], fmt="o",
                         ms=4, color=f"C{k}", label=f"d = {dd}: mean gamma* - 1 (95% t)")
        axes[3].plot(x, [c["gamma_star_annealed"] - 1 for c in C], "-", lw=0.8, color=f"C{k}")
    xs = np.array([c["finite_d_shift"] for c in cells])
    axes[3].plot([xs.min(), xs.max()], [xs.min(), xs.max()], "k:", lw=1, label="log(n)/(2d)")
    axes[3].set(xscale="log", yscale="log", xlabel="log(n) / (2d)", ylabel="gamma* - 1 (lines: annealed)",
                title="threshold shift against log(n)/(2d), n = 1e2..; d varied")
    for ax, title in zip(axes[1:3], ("self-attention row: query = one of the n tokens",
                                     "query not among the n keys")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n")
        ax.set_ylabel("effective keys 1 / sum p^2 (mean, 95% t)")
        ax.set_title(title, fontsize=10)
    for ax in axes:
        style_axes(ax, legend=7)
    save_figure(fig, path)


def changes_table(fam_ok, via_term, d_values):
    rows = [["self-attention row: transition at gamma_c = 1/(1-rho) (random keys)",
             f"**{SHARPENED}** (refuted iff one of 5 per-n 95 % intervals missed the annealed value, ~23 % family-wise "
             "false refutation; 'sharpened' iff gamma* - 1 was resolved at the largest n; rule set after the data "
             "(commit ea4b129); n = 1e4 passed only through the added resolution term, by 0.1 %; d never varied)",
             f"**{OUTSIDE}**",
             "'sharpened' asserted the paper's hypotheses insufficient without its theorems read; random keys at fixed "
             "d are not the (almost-)simplex configuration as n -> inf, so the row is outside whatever the numbers. The "
             f"annealed law is now one Bonferroni family over every (n, d) cell, d varied {tuple(d_values)}, on "
             f"fresh seeds; it agrees: {fam_ok}"
             + (f" (cells needing the resolution term: {via_term})" if via_term else " (no cell needs the resolution "
                "term)") + ". Rule changed after data: yes; fresh seeds: yes (1 000 000 + 100 000 j + 1000 i + k)"],
            ["free query; every part-1 row (equiangular start)", "unchanged", "unchanged",
             "the free-query numbers now come from the fresh seeds; part 1 is deterministic"]]
    return markdown_table(["row", "before", "after", "why / rule changed after data / seeds"], rows)


def report(data_dir: Path, out_dir: Path | None = None) -> Path:
    out, d, meta = open_study_data(data_dir, out_dir)
    _fig_layer(d, meta, out / "layer.png")
    _fig_query(d, meta, out / "query.png")
    s, rows, q, tok = meta["settings"], meta["layer"], meta["query"], meta["tokens_check"]
    nmax = s["n_max"]
    verdicts, claims = [], []
    hyp = ("one attention layer with scores beta <y_i, y_j>, y = x/|x| (pre-LN), Q = K = V = I, softmax; "
           "n unit tokens with all pairwise cosines rho (Assumption 1, 'simplex'); beta = gamma log n, n -> inf")

    def ok_rows(sel):
        return all(r["exponent_ok"] and r["exponent_converges"] and r["particles_ok"] for r in sel)

    def lim_text(sel):
        return "; ".join(f"rho={r['rho']:g}, kappa={r['kappa']:g}: limit {r['limit']:.4f}, at n={nmax:.0e} "
                         f"{r['rho_new_at_nmax']:.6f}, p = {r['extrapolated_exponent']:.4f} (derived "
                         f"{r['derived_exponent']:g})" for r in sel)

    for regime, test, word_alpha0 in [
            ("subcritical gamma < 1/(1-rho): all tokens collapse to one direction", lambda k: k < 1, "collapse"),
            ("critical gamma = 1/(1-rho): a nontrivial interaction (neither collapse nor identity)", lambda k: k == 1,
             "critical"),
            ("supercritical gamma > 1/(1-rho): attention reduces to the identity", lambda k: k > 1, "identity")]:
        sel0 = [r for r in rows if test(r["kappa"]) and r["alpha"] == 0]
        sel1 = [r for r in rows if test(r["kappa"]) and r["alpha"] > 0]
        if word_alpha0 == "collapse":
            match0 = all(abs(r["limit"] - 1.0) < 1e-15 for r in sel0)
            match1 = all(r["limit"] < 1.0 for r in sel1)
        elif word_alpha0 == "identity":
            match0 = all(abs(r["limit"] - r["rho"]) < 1e-15 for r in sel0 + sel1)
            match1 = match0
        else:
            match0 = all(r["rho"] < r["limit"] < 1.0 for r in sel0 + sel1)
            match1 = match0
        # within the hypotheses: a failed numerical check (exponent, convergence, particles) is a failed test, refuted
        v0 = REPRODUCED if match0 and ok_rows(sel0) else REFUTED
        verdicts.append((f"{regime} (the attention output, alpha = 0: the paper's numerical setting)",
                         hyp + "; no residual", v0,
                         lim_text(sel0) + f"; library particles = scalar map to <= "
                         f"{max(r['particles_max_err'] for r in sel0):.1e} (deterministic, no seeds)"))
        if word_alpha0 == "collapse":
            # the paper's model has no residual: this row is outside its hypotheses whatever the numbers; the limit
            # below (a new result, checked by match1 and the numerical checks) is evidence only
            v1 = OUTSIDE
            extra = ("; outside the hypotheses: the paper's model has no residual; with it the tokens do not "
                     "collapse: the attention part becomes the mean token and the limit is rho'_inf = rho (1+alpha)^2 "
                     f"/ (alpha^2 + rho (1 + 2 alpha)) < 1 (a new result; limits < 1: {match1}, numerical checks "
                     f"pass: {ok_rows(sel1)})")
        else:
            # likewise outside the paper's model (no residual); whether the regime survives the residual is a new
            # result, reported with its test
            v1 = OUTSIDE
            extra = (f"; outside the hypotheses: the paper's model has no residual; the same {word_alpha0} regime "
                     f"with it (a new result): limits as stated {match1}, numerical checks pass {ok_rows(sel1)}")
        verdicts.append((f"{regime} (the library's pre-LN layer z <- z + dt u(z/|z|), dt = 1, i.e. residual alpha = 1)",
                         hyp + "; x' = ATT(y) + alpha x from unit tokens", v1, lim_text(sel1) + extra))
    # part 2a: the self-attention row.  Random keys at fixed d are not the paper's (almost-)simplex configuration as
    # n -> inf (the largest cosine to the query grows like sqrt(2 log n / d)), and the statement of its Assumption 2
    # was not read: outside the hypotheses whatever the numbers; the annealed family test and the d scan are evidence
    fam = annealed_family(meta["cells"])
    fam_ok = all(c["ok"] for c in fam)
    via_term = [(c["n"], c["d"]) for c in fam if c["ok"] and not c["ok_without_term"]]
    big = [c for c in fam if c["n"] == max(x["n"] for x in fam)]
    verdicts.append(("the transition of the self-weight sits at gamma_c = 1/(1-rho) (= 1 for nearly orthogonal "
                     "random tokens, rho ~ 0)",
                     "the paper: n tokens in the simplex configuration (Assumption 1) or an almost-simplex one "
                     "(Assumption 2, statement not read), beta = gamma log n, n -> inf; here: random keys uniform on "
                     f"S^{{d-1}} at fixed d ({', '.join(str(x) for x in s['d_values'])}), whose largest cosine to the "
                     "query grows like sqrt(2 log n / d) instead of staying near one rho: not that configuration as "
                     f"n -> inf; one attention row, the query one of the n tokens; {s['seeds']} fresh seeds per cell",
                     OUTSIDE,
                     f"d = {s['d_query']}: " + "; ".join(
                         f"n={r['n']:.0e}: gamma* = {r['gamma_star_mean']:.5f} +- {r['gamma_star_half95']:.1e} "
                         f"(annealed {r['gamma_star_annealed']:.5f})" for r in q)
                     + f"; at n = {big[0]['n']:.0e}, gamma* - 1 = " + ", ".join(
                         f"{c['mean'] - 1:.4f} (d = {c['d']})" for c in big)
                     + " = (" + ", ".join(f"{c['shift_ratio']:.2f}" for c in big) + ") x log(n)/(2d): the threshold "
                     "tends to the paper's 1 as d / log n grows (a public summary of the paper reports sharp "
                     "transitions in large dimension and a middle phase at intermediate ones). The annealed crossing "
                     "gamma log n = log(n-1) + log M_d(gamma log n) (derived here, not the paper's) agrees with every "
                     f"cell: {fam_ok} ({len(fam)} cells, Bonferroni: t-intervals at level 1 - {FWER:g}/{len(fam)}, a "
                     f"false disagreement <= {FWER:.0%}, plus the closed form's Jensen-gap resolution"
                     + (f"; needed at {via_term}" if via_term else "; no cell needs it") + ")"))
    # part 2b: the free query
    j = [i for i, g in enumerate(s["gammas"]) if g >= 1.0]
    neff_free = np.asarray(d["q_neff_free"]).mean(axis=-1)        # (L, G)
    grows = bool(np.all(neff_free[-1, j] > 10 * neff_free[0, j]))
    # the simplex hypothesis does not hold for a query outside the keys (stated in the row): outside whatever the
    # growth (outside-if-grows / reproduced-if-not could never fail); the growth is evidence only
    v3 = OUTSIDE
    verdicts.append(("attention becomes selective once beta = gamma log n with gamma above the critical value "
                     "(asked for a fixed query against n uniform keys)",
                     f"a fixed query that is NOT among the keys, n keys uniform on S^{s['d_query'] - 1}: no key is "
                     f"distinguished, so the paper's simplex hypothesis (a self-score 1 against cosines rho) does "
                     f"not hold; {s['seeds']} seeds",
                     v3,
                     f"effective keys 1/sum p^2 at gamma = {s['gammas'][j[0]]:g} .. {s['gammas'][j[-1]]:g}: "
                     f"{neff_free[0, j[0]]:.3g} .. {neff_free[0, j[-1]]:.3g} at n = {s['ns_query'][0]:.0e}, "
                     f"{neff_free[-1, j[0]]:.3g} .. {neff_free[-1, j[-1]]:.3g} at n = {s['ns_query'][-1]:.0e} "
                     f"(annealed n M(beta)^2/M(2 beta): {d['q_annealed'][-1, j[0], 2]:.3g} .. "
                     f"{d['q_annealed'][-1, j[-1], 2]:.3g}): "
                     + ("more than 10x larger at the largest n at every gamma >= 1: growing with n, never selective "
                        "at log n scaling" if grows else "not 10x larger at the largest n at some gamma >= 1: "
                        "selective there")))
    # claims table
    for r in rows:
        claims.append([f"rho={r['rho']:g}, alpha={r['alpha']:g}, kappa = gamma(1-rho) = {r['kappa']:g}: "
                       f"rho' -> {r['limit']:.4f} like n^-{r['derived_exponent']:g} (derived here)",
                       f"n = {nmax:.0e}: {r['rho_new_at_nmax']:.6f} (error {r['err_at_nmax']:.1e}); exponent "
                       f"extrapolated {r['extrapolated_exponent']:.4f}, plain last decade {r['fitted_exponent']:.4f}, "
                       f"first decade {r['fitted_exponent_first']:.4f}; particles n = {r['particles_n']}: "
                       f"max |err| {r['particles_max_err']:.1e}",
                       "consistency check: " + ("passed" if r["exponent_ok"] and r["exponent_converges"]
                                                and r["particles_ok"] else "FAILED")])
    for c, r in zip(fam, meta["cells"]):
        claims.append([f"self row, d = {c['d']}, n = {c['n']:.0e}: gamma* = annealed crossing (closed form with M_d, "
                       "derived here)",
                       f"{c['mean']:.6f} +- {c['half']:.1e} (Bonferroni t over {len(fam)} cells, {s['seeds'] - 1} dof) "
                       f"vs {c['annealed']:.6f}: |diff| {c['dev']:.1e}, resolution {c['resolution']:.1e}; gamma* - 1 "
                       f"= {c['shift_ratio']:.3f} x log(n)/(2d); largest cosine ~ {r['max_cosine_typical']:.2f}; "
                       f"10-90 width of 1/(1+n^(1-gamma)): {r['width_10_90']:.3f}",
                       ("agrees" + ("" if c["ok_without_term"] else " (only with the resolution term)")) if c["ok"]
                       else "disagrees"])
    claims.append([f"explicit tokens (uniform_sphere, n = {tok['n']}) = sampled exact score law",
                   f"gamma* {tok['tokens_mean']:.5f} +- {tok['tokens_half95']:.1e} vs {tok['beta_mean']:.5f} +- "
                   f"{tok['beta_half95']:.1e}", "agrees" if tok["agree"] else "disagrees"])
    gi = {g: i for i, g in enumerate(s["gammas"])}
    neff = np.asarray(d["q_neff"])
    neff_txt = "; ".join(f"gamma={g:g}: " + ", ".join(f"{mean_ci(neff[i, gi[g]])[0]:.3g}" for i in range(len(q)))
                         for g in (0.5, 1.0, 1.5) if g in gi)
    intro = f"""
Claim (Chen, Lin, Polyanskiy, Rigollet, arXiv 2510.05554, "Critical attention scaling in long-context transformers";
read through its abstract and public summaries, the theorem statements themselves were not available to this study,
so no verdict below asserts that its hypotheses are insufficient):
with attention scores `beta_n <y_i, y_j>` (pre-LN, `y = x/|x|`, `Q = K = V = I`) on `n` tokens of pairwise cosine
`rho`, the scaling `beta_n = gamma log n` has a phase transition at `gamma = 1/(1-rho)`: "insufficient scaling
collapses all tokens to a single direction, while excessive scaling reduces attention to identity"; at the critical
scaling attention stays sparse and content-adaptive.

**Closed forms** (`meanfield.theory.equiangular_layer`, `critical_scaling_limit`, derived in their docstrings).  One
layer `x_i' = ATT(y_i) + alpha x_i` keeps the equiangular set equiangular; with the self-weight
`w = 1/(1 + (n-1) e^{{-beta(1-rho)}})` the new cosine is an explicit rational function of `w`.  At
`beta = gamma log n`, `w = n^kappa / (n^kappa + n - 1)` with `kappa = gamma(1-rho)`, so `w -> 0, 1/2, 1` for
`kappa <, =, > 1` and `rho' -> rho (1+alpha)^2 / ((w+alpha)^2 + rho (1-w)(1+w+2 alpha))`: without residual
**1** (collapse), **4 rho/(1+3 rho)** (critical), **rho** (identity).  Rates (derived here): `n^-(1-kappa)`,
`1/n`, `n^-(kappa-1)`, and `n^-2(1-kappa)` below criticality without residual.

**Tests.**  (1) The scalar map on `n = 10^2 .. {nmax:.0e}` ({s['n_points']} points) for `rho` in {meta['rhos']},
`kappa` in {meta['kappas']}, `alpha` in {meta['alphas']} (`alpha = 1` is the library's pre-LN layer with `dt = 1`);
the exponent is extrapolated from the local exponents on `n >= n_max/100` regressed on their leading correction
`n^-q` and accepted within {meta['exponent_tol']:g} of the derived one; the plain last-decade slope must be closer to
it than the first-decade slope (convergence).  The library's particles (`BatchedSystem.field`, `step_rules.step(...,
rule="pre_ln")` on `mf.initial.equiangular(n, n, rho)`, n = {s['n_particles']}) must equal the map to
{meta['particle_tol']:g} and stay equiangular.  A wrong limit, a wrong exponent (0.25 vs 0.5 vs 1) or a library
layer that differs from the formula would be refused.  (2) One attention row against keys uniform on
S^{s['d_query'] - 1} (the exact law of one score, Beta-distributed, sampled up to n = {s['ns_query'][-1]:.0e};
explicit tokens at n = {tok['n']}), {s['seeds']} seeds, Student-t 95 % intervals ({s['seeds'] - 1} df); per seed the
exact `gamma*` where the self-weight crosses 1/2 (monotone in gamma: brentq); the same for d in {s['d_values']}
at every n, each (n, d) cell against the annealed crossing as one Bonferroni family.
"""
    notes = f"""
* Effective number of keys `1/sum p^2` of the self-attention row (mean over seeds, n = {', '.join(f'{r["n"]:.0e}' for r in q)}):
  {neff_txt}.  Below criticality it grows with n, above it tends to 1 (the token attends to itself: identity), at
  `gamma = 1` it stays near 4 (self-weight 1/2, the rest spread thin: `1/(1/2)^2`), slightly above because of the
  finite-d shift.
* The finite-d shift: the sum over the other keys is `(n-1) M_d(beta)` with `log M_d(beta) ~ beta^2/(2d)`, so the
  crossing solves `gamma log n = log(n-1) + log M_d(gamma log n)`: `gamma* ~ 1 + log(n)/(2d)`, tending to 1 as
  `d / log n` grows (measured for d = {', '.join(str(x) for x in s['d_values'])}).  At fixed d and n -> inf it drifts:
  random keys at fixed d are not an (almost-)simplex configuration in that limit, so the row is outside the
  hypotheses; whether some d(n) puts random keys inside the paper's Assumption 2 is not decided here (its statement
  was not read).
* A query that is not a key (the literal "fixed query against n uniform keys") has no distinguished key: at
  `beta = gamma log n` the weights spread over a fraction of all n keys for every gamma on the grid; selectivity
  there needs a different scale (the nearest keys, `beta ~ n^(2/(d-1))` in fixed d), outside this paper's model.
* The annealed curves replace sums by expectations; their resolution (the Jensen gap over the slope of the crossing
  equation, printed per n) is added to the t-interval when comparing `gamma*`.  `M_d` is computed by quadrature
  of `e^(beta t) (1-t^2)^((d-3)/2)` (Bessel functions of order d/2 - 1 underflow at d = {s['d_query']}).
* Mode: {"QUICK" if meta['quick'] else "FULL"}; fresh seeds (issue 33): scores 1 000 000 + 100 000 j + 1000 i + k
  (d index j, n index i, seed k), explicit tokens 2 000 000 + k, their sampled twin 3 000 000 + k (before: 1000 i + k,
  5000 + k, 7000 + k).

## Changes after referee (issue 33)

{changes_table(fam_ok, via_term, s['d_values'])}
"""
    return write_report(out / "report.md", "Critical attention scaling at long context (beta = gamma log n)",
                        intro, claims,
                        figures=[("layer.png", "one layer on an equiangular start: rho' against n at beta = gamma log n "
                                  "(dashed: limits; circles: library particles) and the distance to the limit"),
                                 ("query.png", "one attention row against uniform keys: self-weight against gamma, "
                                  "effective keys against n (self row and a query outside the keys)")],
                        notes=notes, verdicts=verdicts)
