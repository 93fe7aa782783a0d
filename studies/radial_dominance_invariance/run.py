"""Is radial dominance (Condition 8) invariant along trajectories?  (paper Thms 16-19; open in the paper)

Condition 8 in both readings of MODEL.md (``mf.diagnostics.radial_dominance``), for every token
``i`` and head ``h`` (``u^h`` the per-head forces, ``a^h = <u^h, x>``):

* ``exact``:        ``|P u_i^h|^2 >= a_i^h sum_{h' != h} a_i^{h'}``
* ``norm_bounded``: ``|P u_i^h|^2 >= |a_i^h| sum_{h' != h} |u_i^{h'}|``  (reproduces beta*, Thm 19)

"Holds" means: at every token and head.  The worst relative margin (each margin divided by the
largest term it compares, as in studies/critical_temperature) is a continuous function of time;
its first zero is found on the dense output of the integrator (``studies._common.
dense_particle_run`` / ``first_sign_change``: samples inside every accepted step, then Brent's
method), so failure times do not depend on an output grid.

A. **Equiangular flow** (Thm 19's regime: scalar heads ``M_h = V_h = lambda_h I``, exp kernel, mean
   normalization, start at orthogonal tokens ``gamma = 0``).  All tokens are alike, so both readings
   are closed forms in ``gamma`` (:func:`equiangular_terms`, checked against the library on
   ``mf.initial.equiangular`` tokens in the tests): ``a^h = lambda_h (e^{beta lambda_h} + (n-1) gamma
   e^{beta lambda_h gamma}) / n``, ``|P u^h|^2 = lambda_h^2 e^{2 beta lambda_h gamma} (n-1)(1-gamma)
   (1+(n-1)gamma) / n^2``.  The first failing ``gamma_fail(beta, n, H)`` (Brent on the closed form)
   and its time along the reduced ODE (``mf.theory.clustering_time``) over a beta grid; large-n
   limits ``gamma_fail -> c*(H)^2`` (norm-bounded) and ``1/H`` (exact): with ``r = |P u|^2 / a^2 ->
   (1 - gamma)/gamma`` the readings are ``r >= (H-1)/c*`` and ``r >= H - 1``.  Checked against particle
   runs from orthonormal tokens (``d = n``) with dense output.  Per-head monotonicity: at an
   equiangular configuration every ``P u_i^h`` is a positive multiple of ``P sum_{j != i} x_j``, so
   every ``dE_h/dt > 0`` before and after the failure (measured on the particle runs).
B. **Random starts, scalar heads** (``H = 2``, ``lambda = (1, 1)`` and ``(1, 1/2)``; ``n`` uniform tokens
   on ``S^{d-1}``, ``d = 4 n``; beta as fractions of ``beta*(2, n)``): whether it holds at t = 0, first
   failure time and mean inner product ``gamma`` there (10 seeds, 95 % intervals); with unequal
   strengths the ``P u^h`` are no longer parallel, so whether ``dE_h/dt >= 0`` persists is a real question.
   Runs end at 1.5 times the equiangular time to ``gamma = max(gamma_fail, 0.6)``.
C. **Random starts, orthogonal block heads** (Thms 16-17's hypotheses: ``M_h = V_h = P_h`` on disjoint
   coordinate blocks, ``M_h' M_h = 0``, exp, mean; ``d = 8``, ``H = 2``): as B, plus the exact per-head
   rates ``dE_h/dt`` (``ParticleSystem.energy_rates``): first time one is negative, the fraction of
   time after the failure with a negative rate, and whether a head whose exact reading holds at
   every token ever has ``dE_h/dt < 0`` (it must not: Thm 17's sufficiency, since
   ``dE_h/dt = sum_i (|P u^h|^2 - a^h sum_{h'} a^{h'})`` here).

Cost: quick ~5 s; full 38 min wall at load 8-13 on the shared 2-core machine, about 4 min CPU
(``OPENBLAS_NUM_THREADS=1``; dense output by dopri5 at rtol 1e-11).
Run from the repository root: ``python -m studies.radial_dominance_invariance.run [--quick]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize

import meanfield as mf
from meanfield.analysis.clustering import clustering
from studies._common import dense_particle_run, first_sign_change, fit_slope, main, mean_ci95, save_json, wilson95

READINGS = ("norm_bounded", "exact")
REL_TOL = 1e-12       # round-off guard on relative margins (as studies/critical_temperature)
NEG_REL = 1e-9        # a per-head rate counts as negative below -NEG_REL * max |rate| of its run
GAMMA_GRID = 4001     # scan of gamma in [0, 1) before Brent's method
SCALAR_STRENGTHS = {"scalar": (1.0, 1.0), "scalar_unequal": (1.0, 0.5)}


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    eq_H: tuple            # A: head counts
    eq_n: tuple            # A: token counts
    eq_betas: tuple        # A: beta grid
    eq_particle: tuple     # A: (H, n, beta / beta*) checked on particle runs
    scalar_n: tuple        # B: token counts (d = 4 n)
    scalar_fracs: tuple    # B: beta / beta*(2, n)
    block_n: tuple         # C: token counts (d = 8)
    block_betas: tuple     # C: betas
    seeds: tuple           # B, C
    block_t_final: float   # C
    per_step: int          # dense samples per accepted step


QUICK = Settings(eq_H=(2, 3), eq_n=(8, 32, 512), eq_betas=tuple(np.linspace(0.05, 3.0, 25)),
                 eq_particle=((2, 8, 0.5),), scalar_n=(8,), scalar_fracs=(0.5, 1.5), block_n=(8,),
                 block_betas=(0.5, 2.0), seeds=(0, 1, 2), block_t_final=4.0, per_step=3)
FULL = Settings(eq_H=(2, 3, 4), eq_n=(8, 16, 32, 64, 128, 512, 2048, 8192),
                eq_betas=tuple(np.linspace(0.02, 4.0, 200)),
                eq_particle=((2, 8, 0.5), (2, 32, 0.5), (2, 32, 0.9), (3, 32, 0.5)),
                scalar_n=(8, 32), scalar_fracs=(0.25, 0.5, 0.75, 0.9, 1.1, 1.5), block_n=(8, 32),
                block_betas=(0.25, 0.5, 1.0, 2.0, 4.0), seeds=tuple(range(10)), block_t_final=8.0, per_step=3)


# ----------------------------------------------------------------------------- A: closed forms
def equiangular_terms(gamma, lambdas, beta, n, normalization="mean"):
    """Radial shadow ``a^h``, tangential ``|P u^h|^2`` and ``|u^h|`` at an equiangular configuration.

    Scalar heads ``M_h = V_h = lambda_h I``, exp kernel; every token alike.  ``u^h = f^h / n`` (mean)
    or ``f^h / Z^h`` (softmax, ``Z^h = e^{beta lambda_h} + (n-1) e^{beta lambda_h gamma}``).

    Returns
    -------
    a, tan2, norm : ndarrays, shape (H, *gamma.shape)
    """
    g = np.asarray(gamma, dtype=float)[None]
    lam = np.asarray(lambdas, dtype=float).reshape((-1,) + (1,) * (g.ndim - 1))
    e_self, e_other = np.exp(beta * lam), np.exp(beta * lam * g)
    scale = 1.0 / n if normalization == "mean" else 1.0 / (e_self + (n - 1) * e_other)
    a = lam * (e_self + (n - 1) * g * e_other) * scale
    tan2 = (lam * e_other * scale) ** 2 * (n - 1) * (1 - g) * (1 + (n - 1) * g)
    return a, tan2, np.sqrt(a * a + tan2)


def relative_margins(a, tan2, norm):
    """Worst relative margin of each reading over the heads (axis 0), shape ``a.shape[1:]`` (per token
    when a token axis follows).  Each margin is divided by the largest term it compares (over the
    heads); ``>= -REL_TOL`` counts as holding."""
    others_a = a.sum(axis=0, keepdims=True) - a
    others_n = norm.sum(axis=0, keepdims=True) - norm
    rhs_ex, rhs_nb = a * others_a, np.abs(a) * others_n
    out = {}
    for name, rhs in (("exact", rhs_ex), ("norm_bounded", rhs_nb)):
        scale = np.maximum(tan2, np.abs(rhs)).max(axis=0)
        out[name] = ((tan2 - rhs).min(axis=0) / np.where(scale > 0, scale, 1.0))
    return out


def equiangular_margin(gamma, reading, lambdas, beta, n, normalization="mean"):
    """Worst relative margin of ``reading`` (+ REL_TOL) at an equiangular configuration."""
    return relative_margins(*equiangular_terms(gamma, lambdas, beta, n, normalization))[reading] + REL_TOL


def equiangular_failure(reading, lambdas, beta, n, gamma0=0.0, normalization="mean"):
    """First ``gamma >= gamma0`` where ``reading`` fails along the equiangular flow.

    Returns
    -------
    gamma_fail : float (``gamma0`` if it fails at the start, ``1.0`` if it holds on all of [gamma0, 1))
    reentrant : bool (it holds again somewhere after the first failure)
    """
    g = np.linspace(gamma0, 1.0, GAMMA_GRID)[:-1]
    m = equiangular_margin(g, reading, lambdas, beta, n, normalization)
    neg = m < 0
    if not neg.any():
        return 1.0, False
    k = int(np.argmax(neg))
    re = bool((~neg[k:]).any())
    if k == 0:
        return float(gamma0), re
    root = optimize.brentq(lambda x: float(equiangular_margin(x, reading, lambdas, beta, n, normalization)),
                           g[k - 1], g[k], xtol=1e-14)
    return float(root), re


def large_n_limit(H):
    """``n -> inf`` limits of ``gamma_fail`` for ``beta`` fixed: ``{"norm_bounded": c*(H)^2, "exact": 1/H}``."""
    return {"norm_bounded": float(mf.theory.c_star(H)) ** 2, "exact": 1.0 / H}


def equiangular_scan(settings):
    """Part A: gamma_fail, t_fail and re-entry over (reading, H, n, beta)."""
    Hs, ns, bs = settings.eq_H, settings.eq_n, np.array(settings.eq_betas)
    shape = (len(READINGS), len(Hs), len(ns), len(bs))
    gf, tf, re = np.full(shape, np.nan), np.full(shape, np.nan), np.zeros(shape, dtype=bool)
    for r, rd in enumerate(READINGS):
        for i, H in enumerate(Hs):
            for j, n in enumerate(ns):
                for k, b in enumerate(bs):
                    g, e = equiangular_failure(rd, [1.0] * H, b, n)
                    gf[r, i, j, k], re[r, i, j, k] = g, e
                    tf[r, i, j, k] = mf.theory.clustering_time(0.0, g, [1.0] * H, b, n, normalization="mean") \
                        if g < 1 else np.inf
    # threshold in beta of "holds at gamma = 0": must be beta* (norm-bounded) and ln((n-1)/(H-1))/2 (exact)
    thr = np.array([[[_threshold_at_zero(rd, H, n, bs) for n in ns] for H in Hs] for rd in READINGS])
    ref = np.array([[[mf.theory.beta_star(H, n), np.log((n - 1) / (H - 1)) / 2] for n in ns] for H in Hs])
    ref = np.moveaxis(ref, 2, 0)
    return {"gamma_fail": gf, "t_fail": tf, "reentrant": re, "threshold_at_0": thr, "threshold_ref": ref}


def _threshold_at_zero(reading, H, n, betas):
    m = np.array([equiangular_margin(0.0, reading, [1.0] * H, b, n) for b in betas])
    if (m >= 0).all() or m[0] < 0:
        return np.nan
    k = int(np.argmax(m < 0))
    return optimize.brentq(lambda b: float(equiangular_margin(0.0, reading, [1.0] * H, b, n)), betas[k - 1],
                           betas[k], xtol=1e-13)


# ----------------------------------------------------------------------------- particle runs
def condition_margin(system, reading):
    """``X -> worst relative margin (+ REL_TOL)`` of ``reading`` over all tokens and heads (library readings)."""
    def fun(X):
        sh = mf.diagnostics.radial_shadows(system, X)
        return float(relative_margins(sh["a"], sh["tangential"] ** 2, sh["norm"])[reading].min()) + REL_TOL
    return fun


def analyse_run(system, X0, t_final, per_step):
    """Failure times of both readings, gamma there, per-head rates along one dense run."""
    run = dense_particle_run(system, X0, t_final)
    out = {"drift": run.max_drift}
    for rd in READINGS:
        fun = condition_margin(system, rd)
        t, re, (ts, vals) = first_sign_change(fun, run, per_step)
        out[f"t_fail_{rd}"], out[f"reentrant_{rd}"] = t, re
        out[f"holds0_{rd}"] = bool(vals[0] >= 0)
        out[f"gamma_fail_{rd}"] = (clustering(run.state(t))["mean_inner"] if np.isfinite(t)
                                   else np.nan)
    ts = run.sample_times(per_step)
    rates = np.array([system.energy_rates(run.state(t)) for t in ts])          # (T, H)
    scale = np.abs(rates).max()
    rel = rates / scale
    neg = (rel < -NEG_REL).any(axis=1)
    out["min_rel_rate"] = float(rel.min())
    out["gamma_end"] = clustering(run.state(run.t_final))["mean_inner"]
    if neg.any():
        t_neg, _, _ = first_sign_change(lambda X: float(system.energy_rates(X).min() / scale) + NEG_REL, run, per_step)
    else:
        t_neg = np.inf
    out["t_neg"] = t_neg
    tf = out["t_fail_norm_bounded"]
    after = ts >= tf
    w = np.gradient(ts)          # time weights of the samples
    out["frac_time_neg_after_fail"] = float((w * neg)[after].sum() / w[after].sum()) if after.sum() > 1 else np.nan
    # Thm 17 sufficiency: a head whose exact reading holds at all tokens has dE_h/dt >= 0
    viol, checked = 0, 0
    for t, r in zip(ts, rel):
        ok = mf.diagnostics.radial_dominance(system, run.state(t))["exact"].all(axis=1)
        checked += int(ok.sum())
        viol += int(np.sum(ok & (r < -NEG_REL)))
    out["sufficiency_checked"], out["sufficiency_violations"] = checked, viol
    return out


def equiangular_particles(settings):
    """Part A on particles: orthonormal tokens (d = n), scalar heads, dense output."""
    rows = []
    for H, n, frac in settings.eq_particle:
        beta = frac * mf.theory.beta_star(H, n)
        system = mf.ParticleSystem(mf.scalar_heads([1.0] * H, n, beta))
        gf = {rd: equiangular_failure(rd, [1.0] * H, beta, n)[0] for rd in READINGS}
        t_cf = {rd: mf.theory.clustering_time(0.0, gf[rd], [1.0] * H, beta, n, normalization="mean") for rd in READINGS}
        t_end = 1.5 * max(t_cf.values())
        o = analyse_run(system, mf.initial.orthonormal(n, n), t_end, settings.per_step)
        rows.append({"H": H, "n": n, "beta": beta, "beta_over_beta_star": frac, **o,
                     **{f"gamma_fail_cf_{rd}": gf[rd] for rd in READINGS},
                     **{f"t_fail_cf_{rd}": t_cf[rd] for rd in READINGS},
                     "max_t_fail_rel_err": max(abs(o[f"t_fail_{rd}"] / t_cf[rd] - 1) for rd in READINGS)})
    return rows


def random_scan(kind, settings):
    """Parts B (``kind="scalar"``: strengths (1, 1); ``"scalar_unequal"``: (1, 1/2)) and C (``"blocks"``):
    one row per (n, beta, seed)."""
    rows = []
    lams = SCALAR_STRENGTHS.get(kind)
    if lams is not None:
        cases = [(n, f * mf.theory.beta_star(2, n), f) for n in settings.scalar_n for f in settings.scalar_fracs]
    else:
        cases = [(n, b, b / mf.theory.beta_star(2, n)) for n in settings.block_n for b in settings.block_betas]
    for n, beta, frac in cases:
        if lams is not None:
            d = 4 * n
            system = mf.ParticleSystem(mf.scalar_heads(list(lams), d, beta))
            g_nb = equiangular_failure("norm_bounded", list(lams), beta, n)[0]
            t_final = 1.5 * mf.theory.clustering_time(0.0, max(g_nb, 0.6), list(lams), beta, n, normalization="mean")
        else:
            d = 8
            system = mf.ParticleSystem(mf.orthogonal_block_heads(d, 2, 1.0, beta))
            t_final = settings.block_t_final
        for s in settings.seeds:
            X0 = mf.initial.uniform_sphere(n, d, seed=1000 * n + s)
            o = analyse_run(system, X0, t_final, settings.per_step)
            rows.append({"kind": kind, "n": n, "d": d, "beta": float(beta), "beta_over_beta_star": float(frac),
                         "seed": s, "t_final": t_final,
                         "gamma0": clustering(X0)["mean_inner"], **o})
    return rows


def example_series(settings):
    """Time series for the figure: worst relative margins of both readings and per-head rates on the dense
    samples of one equiangular particle run and one block-head run, with their failure times."""
    H, n, frac = settings.eq_particle[-1]
    beta = frac * mf.theory.beta_star(H, n)
    cases = {"equiangular": (mf.ParticleSystem(mf.scalar_heads([1.0] * H, n, beta)), mf.initial.orthonormal(n, n),
                             1.5 * mf.theory.clustering_time(0.0, equiangular_failure("exact", [1.0] * H, beta, n)[0],
                                                             [1.0] * H, beta, n, normalization="mean")),
             "blocks": (mf.ParticleSystem(mf.orthogonal_block_heads(8, 2, 1.0, settings.block_betas[0])),
                        mf.initial.uniform_sphere(settings.block_n[0], 8, seed=1000 * settings.block_n[0]),
                        settings.block_t_final)}
    arrays, meta = {}, {"equiangular": {"H": H, "n": n, "beta": beta},
                        "blocks": {"n": settings.block_n[0], "beta": settings.block_betas[0], "seed": 0}}
    for name, (system, X0, t_final) in cases.items():
        run = dense_particle_run(system, X0, t_final)
        ts = run.sample_times(settings.per_step)
        arrays[f"ex_{name}_t"] = ts
        for rd in READINGS:
            fun = condition_margin(system, rd)
            arrays[f"ex_{name}_{rd}"] = np.array([fun(run.state(t)) for t in ts])
            meta[name][f"t_fail_{rd}"] = first_sign_change(fun, run, settings.per_step)[0]
        rates = np.array([system.energy_rates(run.state(t)) for t in ts])
        arrays[f"ex_{name}_rates"] = rates / np.abs(rates).max()
        arrays[f"ex_{name}_gamma"] = np.array([clustering(run.state(t))["mean_inner"] for t in ts])
    return {"arrays": arrays, "meta": meta}


def aggregate(rows, key):
    """Per (n, beta) statistics of the random runs: Wilson and t intervals over seeds."""
    groups = {}
    for r in rows:
        groups.setdefault((r["n"], round(r["beta"], 12)), []).append(r)
    out = []
    for (n, beta), rs in sorted(groups.items()):
        m = len(rs)
        rec = {"n": n, "beta": beta, "beta_over_beta_star": rs[0]["beta_over_beta_star"], "runs": m}
        for rd in READINGS:
            k0 = sum(r[f"holds0_{rd}"] for r in rs)
            rec[f"holds0_{rd}"] = k0 / m
            rec[f"holds0_{rd}_ci"] = wilson95(k0, m)
            fail_later = [r for r in rs if r[f"holds0_{rd}"]]
            tf = [r[f"t_fail_{rd}"] for r in fail_later]
            rec[f"failed_later_{rd}"] = int(sum(np.isfinite(tf)))
            rec[f"t_fail_{rd}"] = mean_ci95(tf)
            rec[f"gamma_fail_{rd}"] = mean_ci95([r[f"gamma_fail_{rd}"] for r in fail_later])
            rec[f"reentrant_{rd}"] = int(sum(r[f"reentrant_{rd}"] for r in rs))
        kneg = sum(np.isfinite(r["t_neg"]) for r in rs)
        rec["runs_with_negative_rate"] = int(kneg)
        rec["negative_rate_ci"] = wilson95(kneg, m)
        rec["t_neg"] = mean_ci95([r["t_neg"] for r in rs])
        rec["neg_before_fail"] = int(sum(r["t_neg"] < r["t_fail_norm_bounded"] for r in rs))
        rec["frac_time_neg_after_fail"] = mean_ci95([r["frac_time_neg_after_fail"] for r in rs])
        rec["gamma_end"] = mean_ci95([r["gamma_end"] for r in rs])
        out.append(rec)
    return out


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = QUICK if quick else FULL
    eq = equiangular_scan(settings)
    limits = {H: large_n_limit(H) for H in settings.eq_H}
    eq_rows = equiangular_particles(settings)
    scalar = random_scan("scalar", settings)
    unequal = random_scan("scalar_unequal", settings)
    example = example_series(settings)
    blocks = random_scan("blocks", settings)
    np.savez_compressed(out_dir / "data.npz", eq_H=np.array(settings.eq_H), eq_n=np.array(settings.eq_n),
                        eq_betas=np.array(settings.eq_betas), **{f"eq_{k}": v for k, v in eq.items()},
                        **example["arrays"])
    jn = settings.eq_n.index(max(settings.eq_n))
    bs = np.array(settings.eq_betas)
    lim_err = {}
    for r, rd in enumerate(READINGS):
        for i, H in enumerate(settings.eq_H):
            ok = (bs < 0.5) & (eq["gamma_fail"][r, i, jn] > 0)
            lim_err[f"{rd}/H={H}"] = float(np.abs(eq["gamma_fail"][r, i, jn][ok] - limits[H][rd]).max())
    # approach to the limit: |gamma_fail(n) - limit| at the smallest beta, log-log slope in n
    conv = {}
    for r, rd in enumerate(READINGS):
        for i, H in enumerate(settings.eq_H):
            err = np.abs(eq["gamma_fail"][r, i, :, 0] - limits[H][rd])
            f = fit_slope(np.array(settings.eq_n, dtype=float), err, log_x=True, log_y=True, drop_invalid=True)
            conv[f"{rd}/H={H}"] = {"slope": f.slope, "stderr": f.stderr, "err": err}
    thr_err = float(np.nanmax(np.abs(eq["threshold_at_0"] - eq["threshold_ref"])))
    below = bs[None, None, :] < eq["threshold_ref"][..., None] - 1e-9       # (reading, H, n, beta)
    summary = {
        "quick": quick, "readings": READINGS, "rel_tol": REL_TOL, "neg_rel": NEG_REL,
        "settings": {k: getattr(settings, k) for k in Settings.__dataclass_fields__},
        "large_n_limits": limits, "largest_n": max(settings.eq_n), "large_n_limit_err_beta_lt_0.5": lim_err,
        "large_n_convergence": conv,
        "threshold_at_0_max_err": thr_err,
        "eq_always_fails_below_threshold": bool(np.all(eq["gamma_fail"][below] < 1)),
        "eq_fail_gamma_range_below_threshold": [float(eq["gamma_fail"][below].min()),
                                                float(eq["gamma_fail"][below].max())],
        "eq_reentrant_count": int(eq["reentrant"].sum()),
        "eq_particles": eq_rows,
        "eq_particles_max_t_fail_rel_err": max(r["max_t_fail_rel_err"] for r in eq_rows),
        "eq_particles_min_rel_rate": min(r["min_rel_rate"] for r in eq_rows),
        "scalar_runs": scalar, "block_runs": blocks,
        "scalar": aggregate(scalar, "scalar"), "blocks": aggregate(blocks, "blocks"),
        "scalar_unequal_runs": unequal, "scalar_unequal": aggregate(unequal, "scalar_unequal"),
        "scalar_unequal_runs_negative": int(sum(np.isfinite(r["t_neg"]) for r in unequal)),
        "scalar_unequal_min_rel_rate": float(min(r["min_rel_rate"] for r in unequal)),
        "scalar_unequal_all_fail": bool(all(np.isfinite(r["t_fail_norm_bounded"]) for r in unequal)),
        "example": example["meta"],
        "block_sufficiency_violations": int(sum(r["sufficiency_violations"] for r in blocks)),
        "block_sufficiency_checked": int(sum(r["sufficiency_checked"] for r in blocks)),
        "max_drift": float(max(r["drift"] for r in eq_rows + scalar + unequal + blocks)),
    }
    summary["scalar_all_fail"] = bool(all(np.isfinite(r["t_fail_norm_bounded"]) for r in scalar))
    summary["block_neg_before_fail"] = int(sum(r["t_neg"] < r["t_fail_norm_bounded"] for r in blocks))
    summary["block_runs_negative"] = int(sum(np.isfinite(r["t_neg"]) for r in blocks))
    summary["block_run_count"] = len(blocks)
    save_json(out_dir / "data.json", summary)
    keys = ("threshold_at_0_max_err", "large_n_limit_err_beta_lt_0.5", "eq_always_fails_below_threshold",
            "eq_particles_max_t_fail_rel_err", "eq_particles_min_rel_rate", "scalar_all_fail",
            "scalar_unequal_runs_negative", "scalar_unequal_min_rel_rate",
            "block_sufficiency_violations", "block_sufficiency_checked", "block_runs_negative",
            "block_neg_before_fail", "max_drift")
    return {k: summary[k] for k in keys}


if __name__ == "__main__":
    from studies.radial_dominance_invariance.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
