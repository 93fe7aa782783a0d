"""Figures and report.md of the normalization-speed study (reads data.npz / data.json of run.py)."""

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
    open_study_data,
    save_figure,
    style_axes,
    write_report,
)
from studies.normalization_speed.run import ALTERNATIVES  # noqa: E402

MIN_SEEDS = 10          # the study contract: 10 seeds or more where randomness enters
NAMES = {"post_ln": "post-LN", "ngpt": "nGPT", "pre_ln": "pre-LN", "peri_ln": "peri-LN"}
LAW_TEXT = {"exponential": "1 - rho ~ C e^{-%g t}", "power": "1 - rho ~ C t^{-%g}"}


def _scales(meta, rule):
    return meta["results"][rule]["scales"]


def _lam_tag(lam):
    return f"{float(lam):g}"


def _fig_decay(d, meta, path):
    """1 - rho(t) per rule at lambda = 1 (random starts, equiangular particles and reduced ODE) and the reduced ODE at
    the other head scales."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    one = _lam_tag(1.0)
    for ax, rule in zip(axes.ravel(), meta["rules"]):
        res = _scales(meta, rule)[one]
        tag = f"{rule}_lam{one}"
        t = d[f"{tag}_t"]
        ax.plot(t, d[f"{tag}_q_rand"], color="0.6", lw=0.6, alpha=0.7)
        ax.plot([], [], color="0.6", lw=0.8, label=f"lambda = 1: random starts ({d[f'{tag}_q_rand'].shape[1]} seeds)")
        ax.plot(t, d[f"{tag}_q_ode"], "k-", lw=1.5, label="lambda = 1: equiangular reduced ODE")
        ax.plot(t[::6], d[f"{tag}_q_eq"][::6], "o", mfc="none", color="C3", ms=5, label="lambda = 1: equiangular particles")
        for i, lam in enumerate(meta["lambdas"]):
            if np.isclose(lam, 1.0):
                continue
            tg = f"{rule}_lam{_lam_tag(lam)}"
            ax.plot(d[f"{tg}_t"], d[f"{tg}_q_ode"], "--", color=f"C{i}", lw=1.2,
                    label=f"lambda = {lam:g}: reduced ODE (predicted k = {_scales(meta, rule)[_lam_tag(lam)]['predicted']:g})")
        ax.axhline(meta["q_on"], color="C0", ls=":", lw=1, label="window start q_on")
        ax.set_yscale("log")
        ax.set_ylim(1e-24, 2)
        if res["law"] == "power":
            ax.set_xscale("log")
        ax.set_xlabel("t")
        ax.set_ylabel("1 - rho (mean pairwise cosine)")
        ax.set_title(f"{NAMES[rule]}: predicted " + LAW_TEXT[res["law"]] % res["predicted"] + " at lambda = 1",
                     fontsize=10)
        style_axes(ax, legend=7)
    save_figure(fig, path)


def _local(t, q, law):
    x = t if law == "exponential" else np.log(t)
    lq = np.log(q)
    local = -np.diff(lq, axis=0) / np.diff(x)[:, None] if q.ndim == 2 else -np.diff(lq) / np.diff(x)
    tm = np.sqrt(t[1:] * t[:-1]) if law == "power" else 0.5 * (t[1:] + t[:-1])
    return tm, local


def _fig_local(d, meta, path):
    """Local rates (exponential laws) and exponents (power laws) of the reduced ODE at every head scale, and of the
    random starts at lambda = 1: post-LN's rate follows 2 lambda, nGPT's stays 2."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    styles = {"post_ln": "-", "ngpt": "--", "pre_ln": "-", "peri_ln": "--"}
    for ax, law in zip(axes, ("exponential", "power")):
        for rule in (r for r in meta["rules"] if _scales(meta, r)[_lam_tag(1.0)]["law"] == law):
            for i, lam in enumerate(meta["lambdas"]):
                tg = f"{rule}_lam{_lam_tag(lam)}"
                t = d[f"{tg}_t"]
                if np.isclose(lam, 1.0):
                    tm, loc = _local(t, d[f"{tg}_q_rand"], law)
                    ax.plot(tm, loc, color=f"C{i}", lw=0.4, alpha=0.3)
                tm, loc = _local(t, d[f"{tg}_q_ode"], law)
                ax.plot(tm, loc, styles[rule], color=f"C{i}", lw=1.8, label=f"{NAMES[rule]}, lambda = {lam:g} (ODE)")
        for lam in meta["lambdas"]:
            ax.axhline(2.0 * lam if law == "exponential" else 2.0, color="k", ls=":", lw=0.8)
        ax.set_ylim(0, 5)
        if law == "power":
            ax.set_xscale("log")
            ax.set_ylabel("local exponent -d log(1-rho) / d log t")
        else:
            ax.set_ylabel("local rate -d log(1-rho) / dt")
        ax.set_xlabel("t")
        style_axes(ax, legend=7)
    save_figure(fig, path)


def _verdict(ok, fitted_seeds, word=REPRODUCED):
    """``word`` if the fit passed, ``refuted`` if not; fewer than 10 seeds in the window (near the cluster, where the
    law is claimed) is outside the hypotheses."""
    if fitted_seeds < MIN_SEEDS:
        return OUTSIDE
    return word if ok else REFUTED


def _scale_verdict(rows, eq_tol):
    """Verdict of a rule at the head scales lambda != 1 (decided before the data, issue 33): refuted if any test that
    ran fails (equiangular particles against the reduced ODE, the equiangular or random-start fit against the band of
    the predicted value, or the separation: the alternative value accepted); outside the hypotheses if none failed but
    fewer than 10 random starts reached the window at some scale (that part untested); reproduced otherwise."""
    failed, untested = False, False
    for r in rows:
        failed |= not (r["eq_max_rel_err_vs_ode"] <= eq_tol and r["eq_accepted"]) or bool(r["eq_alt_accepted"])
        if r["rand_fitted_seeds"] < MIN_SEEDS:
            untested = True
        else:
            failed |= not r["rand_accepted"] or bool(r["rand_alt_accepted"])
    return REFUTED if failed else OUTSIDE if untested else REPRODUCED


def _fmt_ci(mean, half):
    return f"{mean:.6f} +- {half:.1e}"


def _band(k, trunc, integ, rnd):
    """The prediction band ``[k - integ - trunc - rnd, k + trunc + rnd]`` (run.py's acceptance) as text."""
    return f"[{k - integ - trunc - rnd:.9f}, {k + trunc + rnd:.9f}]"


def _competing_fitted(r):
    """The competing law's local rate at the end, over the seeds that reached the window (min, max)."""
    v = [c for c, f in zip(r["rand_competing_at_end"], r["rand_fitted"]) if f]
    return (min(v), max(v)) if v else (np.nan, np.nan)


def report(data_dir: Path, out_dir: Path | None = None) -> Path:
    out, d, meta = open_study_data(data_dir, out_dir)
    _fig_decay(d, meta, out / "decay.png")
    _fig_local(d, meta, out / "local_rates.png")
    s, res = meta["settings"], meta["results"]
    level = 100 * meta["level"]
    ci = f"Bonferroni {level:.2f} % t, {{df}} df; family of {meta['family']} intervals, family-wise {100 * meta['fwer']:g} %"
    hyp_common = ("continuous-time limit of the rule; one head, exp kernel, softmax, beta = {beta:g}; sphere (directions "
                  "x = z/|z|; radial rules from |z| = 1)").format(beta=meta["beta"])
    one = _lam_tag(1.0)
    others = [lam for lam in meta["lambdas"] if not np.isclose(lam, 1.0)]
    verdicts, claims = [], []
    # ---- lambda = 1: the papers' setting M = V = I
    for rule in meta["rules"]:
        r = _scales(meta, rule)[one]
        law = LAW_TEXT[r["law"]] % r["predicted"]
        ok_eq = r["eq_max_rel_err_vs_ode"] <= meta["eq_ode_tol"] and r["eq_accepted"]
        ok_rand = r["rand_accepted"]
        band = _band(r["predicted"], r["rand_truncation_bound"], r["integration_bound"], r["rand_roundoff_bound"])
        hyp_eq = f"{hyp_common}, M = V = I (lambda = 1); equiangular start rho(0) = {meta['rho0']:g}, n = d = {s['n_eq']}"
        hyp_rand = (f"{hyp_common}, M = V = I (lambda = 1); uniform random starts on S^{s['d_rand'] - 1}, n = {s['n_rand']}, "
                    f"{r['rand_seeds']} fresh seeds")
        other = ("local exponent -dlog(1-rho)/dlog t at the end " if r["law"] == "exponential"
                 else "local rate -dlog(1-rho)/dt at the end ")
        cmin, cmax = _competing_fitted(r)
        verdicts.append((f"{NAMES[rule]}: {law} (equiangular start)", hyp_eq, REPRODUCED if ok_eq else REFUTED,
                         f"particles = reduced ODE to {r['eq_max_rel_err_vs_ode']:.1e} (tol {meta['eq_ode_tol']:g}; "
                         f"deterministic); fitted {r['eq_fit']:.9f} (leading correction only "
                         f"{r['eq_fit_leading_only']:.9f}; ODE curve {r['ode_fit']:.9f}) against the band "
                         f"{_band(r['predicted'], r['eq_truncation_bound'], r['integration_bound'], r['eq_roundoff_bound'])}: accepted "
                         f"{r['eq_accepted']}"
                         + (f" (the integration bound alone covers the deviation: "
                            f"{r['eq_fit'] - r['predicted'] >= -r['integration_bound'] - r['eq_truncation_bound']})"
                            if r["law"] == "exponential" else "")
                         + f"; competing law: {other}{r['eq_competing_at_end']:.3g}; at lambda = 1 post-LN's 2K = nGPT's 2: "
                           "the rules are separated at lambda != 1 (rows below)"))
        verdicts.append((f"{NAMES[rule]}: {law} (random starts)", hyp_rand, _verdict(ok_rand, r["rand_fitted_seeds"]),
                         f"fitted {_fmt_ci(r['rand_fit_mean'], r['rand_fit_half'])} "
                         f"({ci.format(df=r['rand_fitted_seeds'] - 1)}; {r['rand_fitted_seeds']}/{r['rand_seeds']} seeds "
                         f"reached the window; contains {r['predicted']:g} itself: {r['rand_t_interval_contains_prediction']}) "
                         f"against the band {band} (truncation {r['rand_truncation_bound']:.1e}, integration "
                         f"{r['integration_bound']:.1e}, round-off {r['rand_roundoff_bound']:.1e}): meets it "
                         f"{r['rand_accepted']}; leading correction only {r['rand_fit_leading_only_mean']:.7f}; plain slope "
                         f"{_fmt_ci(r['rand_plain_mean'], r['rand_plain_half'])}; competing law: {other}{cmin:.3g} .. {cmax:.3g}"))
    # ---- lambda != 1: the normalization sets the speed (post-LN 2 lambda, nGPT 2, pre-/peri-LN exponent 2)
    for rule in meta["rules"]:
        rows = [_scales(meta, rule)[_lam_tag(lam)] for lam in others]
        word = _scale_verdict(rows, meta["eq_ode_tol"])
        laws = "; ".join(f"lambda = {r['lambda']:g}: " + LAW_TEXT[r["law"]] % r["predicted"] for r in rows)
        parts = []
        for r in rows:
            alt = r["alternative"]
            parts.append(
                f"lambda = {r['lambda']:g}: equiangular {r['eq_fit']:.9f} (particles = ODE to {r['eq_max_rel_err_vs_ode']:.1e}; "
                f"band {_band(r['predicted'], r['eq_truncation_bound'], r['integration_bound'], r['eq_roundoff_bound'])}: "
                f"accepted {r['eq_accepted']}), random {_fmt_ci(r['rand_fit_mean'], r['rand_fit_half'])} "
                f"({ci.format(df=r['rand_fitted_seeds'] - 1)}; {r['rand_fitted_seeds']}/{r['rand_seeds']} seeds reached "
                f"the window; band {_band(r['predicted'], r['rand_truncation_bound'], r['integration_bound'], r['rand_roundoff_bound'])}: "
                f"meets it {r['rand_accepted']})"
                + ("" if alt is None else f"; separation: {ALTERNATIVES[rule]} = {alt:g} accepted by the same test: "
                                          f"equiangular {r['eq_alt_accepted']}, random {r['rand_alt_accepted']}"))
        verdicts.append((f"{NAMES[rule]}: the normalization sets the speed at head scale lambda != 1: {laws}",
                         f"{hyp_common}, M = V = lambda I with lambda = {', '.join(f'{x:g}' for x in others)} (K = lambda; "
                         f"the papers' statement is M = V = I, where post-LN's 2K and nGPT's 2 coincide); equiangular "
                         f"n = d = {s['n_eq']} and uniform random starts on S^{s['d_rand'] - 1}, n = {s['n_rand']}, "
                         f"{s['seeds']} fresh seeds per lambda",
                         word, "; ".join(parts)))
    for rule in meta["rules"]:
        for lam in meta["lambdas"]:
            r = _scales(meta, rule)[_lam_tag(lam)]
            if np.isclose(lam, 1.0):
                word = _verdict(r["eq_max_rel_err_vs_ode"] <= meta["eq_ode_tol"] and r["eq_accepted"] and r["rand_accepted"],
                                r["rand_fitted_seeds"])
            else:
                word = _scale_verdict([r], meta["eq_ode_tol"])
            claims.append([f"{NAMES[rule]}, lambda = {lam:g}: " + LAW_TEXT[r["law"]] % r["predicted"],
                           f"equiangular fit {r['eq_fit']:.6f}, plain {r['eq_plain']:.6f}; random "
                           f"{_fmt_ci(r['rand_fit_mean'], r['rand_fit_half'])} ({r['rand_fitted_seeds']}/{r['rand_seeds']} "
                           f"seeds); 1 - rho at the end {min(r['rand_q_end']):.1e} .. {max(r['rand_q_end']):.1e}"
                           + ("" if r["alternative"] is None else
                              f"; alternative {r['alternative']:g} rejected: "
                              f"{not r['eq_alt_accepted'] and not r['rand_alt_accepted']}"),
                           word])
    # ---- the discrete layers: another model (dt > 0), outside the continuous-time claim whatever the data
    for rule in meta["rules"]:
        L = res[rule]["layers"]
        law = LAW_TEXT[L["law"]] % round(L["predicted"], 6)
        cont = LAW_TEXT[res[rule]["scales"][one]["law"]] % L["continuum_predicted"]
        verdicts.append((f"{NAMES[rule]}, discrete layers dt = {s['dt']:g}: the continuum law {cont}",
                         f"the claim is about the continuous-time limit; here the real layer map of step_rules "
                         f"(x <- normalize(x + dt u) etc.), dt = {s['dt']:g}, M = V = I; equiangular and "
                         f"{L['rand_seeds']} random starts",
                         OUTSIDE,
                         f"derived layer law {law} (a prediction of this study): fitted {L['eq_fit']:.9f} (equiangular, "
                         f"band {_band(L['predicted'], L['eq_truncation_bound'], 0.0, L['eq_roundoff_bound'])}: accepted "
                         f"{L['eq_accepted']}), {_fmt_ci(L['rand_fit_mean'], L['rand_fit_half'])} "
                         f"({ci.format(df=L['rand_fitted_seeds'] - 1)}; {L['rand_fitted_seeds']}/{L['rand_seeds']} seeds "
                         f"reached the window; band {_band(L['predicted'], L['rand_truncation_bound'], 0.0, L['rand_roundoff_bound'])}: "
                         f"meets it {L['rand_accepted']}; no integrator); the continuum value {L['continuum_predicted']:g} "
                         + ("accepted" if L["continuum_prediction_accepted"] else "rejected") + " by the same test"))
        claims.append([f"{NAMES[rule]} layers, dt = {s['dt']:g}: {law}",
                       f"equiangular {L['eq_fit']:.7f}; random {_fmt_ci(L['rand_fit_mean'], L['rand_fit_half'])}; derived "
                       f"layer law accepted {L['eq_accepted'] and L['rand_accepted']}",
                       OUTSIDE])
    intro = f"""
Claim (Rigollet, arXiv 2512.01868, "exact clustering rates" of the equiangular reduction and "how commonly used
normalization schemes alter contraction speeds"; Karagodin, Ge, Polyanskiy, Rigollet, arXiv 2510.22026,
normalization as speed regulation): near the single cluster, post-LN (tokens on the sphere) contracts like
`1 - rho ~ C e^{{-2t}}`, pre-LN (unnormalized residual stream `z = r x`) only like `1 - rho ~ C / t^2`.  Only the
abstracts of the two papers were available to this study; the rates are those of issue 24 and are derived below
for each rule (they are a prediction of this study, tested on the particles).  The claim is about the
continuous-time dynamics with one head `M = V = I`; at that head scale post-LN's rate `2K` (`K` the field's
radial part at the cluster, `K = lambda` for `M = V = lambda I`) equals nGPT's `2`, so the rules are also run at
`lambda = {', '.join(f'{x:g}' for x in others)}`, where the normalization sets different speeds (issue 33).

**Derivation** (`meanfield/analysis/normalization.py`).  One head `M = V = lambda I`, softmax: on an equiangular
configuration (`<x_i, x_j> = rho`, equal radii `r`) the field is `u_i = A x_i + B (S - x_i)` with
`A = lambda/(1 + (n-1) e^{{-beta lambda (1-rho)}})`, `B = lambda/(e^{{beta lambda (1-rho)}} + n - 1)`, `S = sum_j x_j`, so
`<P_x u_i, x_j> = B (1-rho)(1+(n-1)rho)`, `<x_i, u_i> = A + (n-1) B rho`.  The equiangular set is invariant
(permutation symmetry), and `rho' = 2 B (1-rho)(1+(n-1)rho) / (r s)` with `s = 1` (post-LN, pre-LN) or
`s = |u|` (nGPT, peri-LN), `r = 1` on the sphere, `r' = <x, u>/s` for the radial rules.  As `rho -> 1`:
`B (1+(n-1)rho) -> K = lambda`, `|u| -> K`, `<x, u> -> K`, hence `1 - rho ~ C e^{{-2Kt}}` (post-LN), `~ C e^{{-2t}}`
(nGPT: the unit update removes K) and, with `r = K t + c + o(1)` (pre-LN) or `r = t + c + o(1)` (peri-LN),
`(1 - rho)' ~ -2 (1 - rho)/t`: `1 - rho ~ C t^{{-2}}` (pre-LN, peri-LN) whatever K.  Random starts: near a cluster the
softmax weights are `1/n + O(|x_i - x_j|^2)`, so every deviation from the mean decays at rate K (nGPT 1; `1/t` for
the radial rules) and `1 - rho` at the same laws.

**Test.**  Particles (the library's `BatchedSystem` sums through `step_rules.limit_rhs`, dopri5, rtol
{meta['rtol']:g}, atol {meta['atol']:g}); `1 - rho = n/(n-1) mean_i |x_i - xbar|^2` (no cancellation).  On the
window `1 - rho <= {meta['q_on']:g}` (exponential laws down to {meta['q_off']:g}) the local rate (exponential) or
local exponent (power) between samples is regressed on a polynomial of degree {meta['order']} in its correction
variable (`1 - rho`, resp. `1/t`: the leading and the next correction; for a random start the deviations
`e_i = x_i - xbar` all decay at one rate up to relative `O(1 - rho)` (`1/r_i`, `r_i = K t + c_i + O(1/t)` for the
radial rules), so the local rate is `k + a (1 - rho) + b (1 - rho)^2 + ...` and the local exponent
`2 - 2 c_w / t + b / t^2 + ...`, with constants of the start) and the intercept is the fitted rate/exponent; the
plain least-squares slope is shown beside it (for pre-LN it is biased by `c/t`: the ODE predicts the same bias).  A
test that could fail: a rate other than the derived `k`, an exponent 1 or 3, or the other law (the competing local
rate is printed: it goes to 0 like `2/t` for the power laws, grows like `k t` for the exponential ones) would all
be refused.  **Separation** (issue 33): at `lambda != 1` each fit must also reject a value the wrong mechanism would
give -- post-LN nGPT's `2`, nGPT post-LN's `2 lambda`, pre-LN `2 lambda` (a radius growing like `t`), peri-LN
`2 / lambda` (a radius growing like `lambda t`) -- by the same band test.

**Acceptance band, from stated bounds (no free tolerance).**  The t-interval covers the spread over seeds
only; the fit has deterministic biases, each bounded from the run: *truncation*, the neglected
corrections, bounded by the change the last included one makes (degree {meta['order']} against
{meta['order'] - 1}; mean over seeds; the corrections decrease on the window);
*integration*: {meta['method']} steps land on every sample, so each step is at most the sample spacing, and on the
linear decay near the cluster one step multiplies a deviation of rate mu by `R(-mu h)` (the scheme's
stability function, `R(z) = e^z + z^6/3600 + O(z^7)`: its z^6 coefficient is 1/600 against 1/720) instead of `e^(-mu h)`,
so the fitted value is low by at most `k (1 + log R(-x)/x)`, `x = mu h_max` (`mu = k/2`, `h_max` = time
spacing, exponential laws; `x = max dt/t` for the power laws); *round-off*: deviations `|e| ~ (1 - rho)^(1/2)`
stored to eps per coordinate put `2 sqrt(d) eps / (1 - rho)^(1/2)` on one sample's `log(1 - rho)`, over the sample
spacing on a local rate (at the window's end; no averaging credited).  Accepted when the interval meets
`[k - integration - truncation - round-off, k + truncation + round-off]`; the discrete layers have no integrator.  (This replaces a band
+- 1e-3 chosen after a first run.)  **Family** (issue 33): the {meta['family']} random-start intervals of the study
({len(meta['lambdas'])} head scales x 4 rules, and the 4 layer rules) are judged as one family at family-wise rate
{100 * meta['fwer']:g} % (Bonferroni: each a {level:.2f} % t interval on the fitted seeds' degrees of freedom); runs of the
four rules share their starts (the same seeds), which Bonferroni does not need to be independent.
"""
    changes = f"""
**Changes after the referee (issue 33).**  Rows before -> after, and why:

* `post-LN / nGPT, discrete layers dt = 0.1`: **reproduced with sharpened hypotheses** -> **outside the
  hypotheses**.  The claim is about the continuous-time limit; a layer map with `dt > 0` is another model.  The
  derived layer rates (`2 log(1 + dt)/dt`, `-2 log(1 - dt)/dt`) are still tested and reported as this study's
  prediction, but no verdict on the papers' claim follows from them.
* `pre-LN / peri-LN, discrete layers dt = 0.1`: **reproduced** -> **outside the hypotheses** (the same reason).
* New rows `... at head scale lambda != 1` (lambda = {', '.join(f'{x:g}' for x in others)}), one per rule: at `lambda = 1`
  (the only scale run before) post-LN's `2K` equals nGPT's `2`, so a fit could not tell the two normalizations
  apart; at `lambda != 1` each rule must meet its own band and reject the other mechanism's value.
* The eight `lambda = 1` rows keep their words, but two decision rules changed after their data had been seen: the
  random-start intervals are now one Bonferroni family ({meta['family']} intervals, family-wise {100 * meta['fwer']:g} %; they were
  95 % each), and the verdict of a rule at lambda != 1 includes the separation.  So the whole study was rerun on fresh
  seeds ({', '.join(f'lambda = {k}: {v[0]}..{v[-1]}' for k, v in meta['seeds'].items())}; issue 24 used 0..29, the
  quick mode uses another fresh range), and the verdicts above are those of the fresh run.  The quick run (other
  seeds) was looked at while choosing the exponential horizons at lambda = 2 (kept at `t_exp * 2/k`: a longer one
  drives 1 - rho into round-off, 1e-31); no verdict rule was changed after the full run.
"""
    notes = f"""
{changes}
* The equiangular comparison particles vs reduced ODE is a test of the derivation (two independent
  computations: pairwise sums of the library against a scalar ODE), deterministic: no seeds.
* Seeds: {s['seeds']} random starts per head scale (fresh seeds, listed above), one batch per rule; intervals are over the
  seeds that reached the window (counts in the table and `rand_fitted_seeds` in data.json; fewer than 10 would
  make the verdict "outside the hypotheses").  At lambda = 2 (softmax at beta lambda = 2) some starts linger in
  metastable multi-cluster states and do not reach the window within the horizon: they are counted and left out.
* Discrete layers (`step_rules.iterate`, the layer maps themselves, lambda = {meta['layer_lambda']:g}): near the cluster
  post-LN shrinks each deviation from the mean by `1/(1 + dt)` per layer (`x_i + dt u_i = (1 + dt) xbar + e_i +
  O(e^2)`), nGPT by `1 - dt`, so `1 - rho` decays at `2 log(1 + dt)/dt` resp. `-2 log(1 - dt)/dt` per unit depth, not
  2; pre-LN and peri-LN shrink it by `r_k/(r_k + dt)` with `r_k ~ k dt`: the exponent 2 is dt-independent.  These are
  statements about another model: outside the claim's hypotheses.
* Mode: {"QUICK" if meta['quick'] else "FULL"}; horizons t = {s['t_exp']:g} x 2/k (exponential laws of rate k) and
  {s['t_pow']:g} (power laws).
"""
    return write_report(out / "report.md", "Normalization and the speed of clustering (post-LN, nGPT, pre-LN, peri-LN)",
                        intro, claims, figures=[("decay.png", "1 - rho(t) at lambda = 1: equiangular particles against "
                                                 "the reduced ODE, and random starts; dashed: the reduced ODE at the other "
                                                 "head scales"),
                                                ("local_rates.png", "local rates (exponential laws: post-LN -> 2 lambda, "
                                                 "nGPT -> 2) and local exponents (power laws -> 2) at lambda = 0.5, 1, 2")],
                        notes=notes, verdicts=verdicts)
