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
    mean_ci,
    open_study_data,
    save_figure,
    style_axes,
    write_report,
)

MIN_SEEDS = 10


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
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
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
    for ax, title in zip(axes[1:], ("self-attention row: query = one of the n tokens",
                                    "query not among the n keys")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n")
        ax.set_ylabel("effective keys 1 / sum p^2 (mean, 95% t)")
        ax.set_title(title, fontsize=10)
    for ax in axes:
        style_axes(ax, legend=7)
    save_figure(fig, path)


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
    # part 2a: the self-attention row
    last = q[-1]
    ratio = (last["gamma_star_mean"] - 1.0) / last["finite_d_shift"]
    agree = all(r["annealed_agrees"] for r in q)
    # the test: every n's interval meets the annealed closed form (gamma_c = 1 plus its finite-d shift, run.py);
    # refuted if one does not; sharpened if the shift away from 1 is resolved at the largest n (gamma* - 1 above
    # its 95 % half-width: the threshold is 1 only for d >> log n), reproduced if it is not
    resolved = (last["gamma_star_mean"] - 1.0) > last["gamma_star_half95"]
    if s["seeds"] < MIN_SEEDS:
        v2 = OUTSIDE
    elif not agree:
        v2 = REFUTED
    else:
        v2 = SHARPENED if resolved else REPRODUCED
    verdicts.append(("the transition of the self-weight sits at gamma_c = 1/(1-rho) (= 1 for nearly orthogonal "
                     "random tokens, rho ~ 0)",
                     f"random tokens uniform on S^{s['d_query'] - 1} (cosines concentrated near rho = 0, within "
                     f"~sqrt(2 log n / d): closest to the paper's 'almost-simplex' Assumption 2 and its numerical "
                     f"experiments); one attention row, the query one of the n tokens; "
                     f"beta = gamma log n; {s['seeds']} seeds",
                     v2,
                     "; ".join(f"n={r['n']:.0e}: gamma* = {r['gamma_star_mean']:.5f} +- {r['gamma_star_half95']:.1e} "
                               f"(annealed {r['gamma_star_annealed']:.5f})" for r in q)
                     + f"; gamma* - 1 = {ratio:.2f} x log(n)/(2d) at n = {last['n']:.0e}: the threshold is 1 only "
                       f"for d >> log n (finite-d shift from log M_d(beta) ~ beta^2/(2d))"))
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
    for r in q:
        claims.append([f"self row, n = {r['n']:.0e}: gamma* = annealed crossing (closed form with M_d)",
                       f"{r['gamma_star_mean']:.6f} +- {r['gamma_star_half95']:.1e} (95% t, {s['seeds'] - 1} df) vs "
                       f"{r['gamma_star_annealed']:.6f} (annealed resolution {r['annealed_resolution']:.1e}); "
                       f"10-90 width of 1/(1+n^(1-gamma)): {r['width_10_90']:.3f}",
                       "agrees" if r["annealed_agrees"] else "disagrees"])
    claims.append([f"explicit tokens (uniform_sphere, n = {tok['n']}) = sampled exact score law",
                   f"gamma* {tok['tokens_mean']:.5f} +- {tok['tokens_half95']:.1e} vs {tok['beta_mean']:.5f} +- "
                   f"{tok['beta_half95']:.1e}", "agrees" if tok["agree"] else "disagrees"])
    gi = {g: i for i, g in enumerate(s["gammas"])}
    neff = np.asarray(d["q_neff"])
    neff_txt = "; ".join(f"gamma={g:g}: " + ", ".join(f"{mean_ci(neff[i, gi[g]])[0]:.3g}" for i in range(len(q)))
                         for g in (0.5, 1.0, 1.5) if g in gi)
    intro = f"""
Claim (Chen, Lin, Polyanskiy, Rigollet, arXiv 2510.05554, "Critical attention scaling in long-context transformers";
read through its abstract and public summaries, the theorem statements themselves were not available to this study):
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
exact `gamma*` where the self-weight crosses 1/2 (monotone in gamma: brentq).
"""
    notes = f"""
* Effective number of keys `1/sum p^2` of the self-attention row (mean over seeds, n = {', '.join(f'{r["n"]:.0e}' for r in q)}):
  {neff_txt}.  Below criticality it grows with n, above it tends to 1 (the token attends to itself: identity), at
  `gamma = 1` it stays near 4 (self-weight 1/2, the rest spread thin: `1/(1/2)^2`), slightly above because of the
  finite-d shift.
* The finite-d shift: the sum over the other keys is `(n-1) M_d(beta)` with `log M_d(beta) ~ beta^2/(2d)`, so the
  crossing solves `gamma log n = log(n-1) + log M_d(gamma log n)`: `gamma* ~ 1 + log(n)/(2d)`.  The paper's
  threshold is the `d >> log n` limit; at fixed d and n -> inf it drifts (sharpened hypothesis).
* A query that is not a key (the literal "fixed query against n uniform keys") has no distinguished key: at
  `beta = gamma log n` the weights spread over a fraction of all n keys for every gamma on the grid; selectivity
  there needs a different scale (the nearest keys, `beta ~ n^(2/(d-1))` in fixed d), outside this paper's model.
* The annealed curves replace sums by expectations; their resolution (the Jensen gap over the slope of the crossing
  equation, printed per n) is added to the t-interval when comparing `gamma*`.  `M_d` is computed by quadrature
  of `e^(beta t) (1-t^2)^((d-3)/2)` (Bessel functions of order d/2 - 1 underflow at d = {s['d_query']}).
* Mode: {"QUICK" if meta['quick'] else "FULL"}; seeds 1000 i + k (n index i, seed k), explicit tokens 5000 + k.
"""
    return write_report(out / "report.md", "Critical attention scaling at long context (beta = gamma log n)",
                        intro, claims,
                        figures=[("layer.png", "one layer on an equiangular start: rho' against n at beta = gamma log n "
                                  "(dashed: limits; circles: library particles) and the distance to the limit"),
                                 ("query.png", "one attention row against uniform keys: self-weight against gamma, "
                                  "effective keys against n (self row and a query outside the keys)")],
                        notes=notes, verdicts=verdicts)
