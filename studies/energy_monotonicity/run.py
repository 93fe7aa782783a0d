"""Energy monotonicity of multi-head self-attention (paper Thms 11-12; MODEL.md section 1).

Three parts:

A. **Identity.** Random symmetric value-aligned heads (``mf.random_symmetric_heads``, exp
   kernel, mean normalization), flat and spherical dynamics (dopri5).  At every observed time
   we compare the exact rate ``dE_multi/dt`` (``ParticleSystem.energy_rates``) with the
   dissipation ``(1/n) sum_i |dx_i/dt|^2`` (``diagnostics.dissipation``), and check the recorded
   energy itself: central finite differences and the cumulative Simpson integral of the
   dissipation, at sampling steps ``h`` (their errors must fall like ``h^2`` and ``h^4``).
B. **Defect.** ``V_h = M_h + Delta_h`` (``mf.perturbed_value_heads``, one fixed direction scaled
   to ``|Delta_h|_op = eps``): the defect ``|dE/dt - (1/n) sum |dx/dt|^2|`` against ``eps``, at
   the initial tokens and as a maximum along a spherical trajectory; log-log slope (expected 1).
   Repeated over independent draws of heads, perturbation direction and tokens (``defect_seeds``:
   10 in the full mode); slopes reported as mean and 95 % t-interval over draws.
C. **Softmax search.** Random symmetric heads with *softmax* normalization, H = 1..4, random
   tokens, several seeds and strengths on the sphere: fraction of runs and of observed times
   with ``dE_multi/dt < 0`` and the most negative example.  One softmax head must stay
   monotone (weighted identity ``dE/dt = sum_i w_i N_i |dx_i/dt|^2``, ``N_i = (1/n) sum_j k_ij``).

B'. **Decrease.** With the same perturbation, along a long spherical run sampled densely: the most
   negative ``dE/dt`` and the largest energy drop against eps (Thm 12 bounds the defect, it does not
   give monotonicity: near equilibrium the O(eps |v|) defect beats the O(|v|^2) dissipation; the
   drop is superlinear in eps, heuristically eps^2).  Same draws as B; a drop counts as resolved above
   ``DROP_REL * max|E|`` (round-off floor); the drop exponent is fitted per draw with >= 3 resolved
   drops and reported as mean and 95 % t-interval over those draws.

Part C observes the rate on a dense grid and repeats its statistics on a coarse subgrid, so the
"% of runs that decrease" is shown not to depend on the output grid.

Cost: quick about 5 s, full about 5-7 minutes on 2 cores with 10 search seeds (890 s measured on the loaded shared machine)
plus ~20 s per draw of parts B and B' (10 draws; the decrease runs at rtol 1e-10 dominate).
Run from the repository root: ``python -m studies.energy_monotonicity.run [--quick]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.integrate import cumulative_simpson

import meanfield as mf
from meanfield import diagnostics as dg
from meanfield.core.options import SaveAt, StepControl
from studies._common import blowup_horizon, fit_slope, main, mean_ci95, save_json
from studies.energy_monotonicity.report import report

FLAT_FRACTION = 0.6   # flat runs stop at this fraction of the detected blow-up time
NEG_REL = 1e-8   # a rate counts as negative below -NEG_REL * max|rate| of its run (round-off guard)
# an energy drop (part B') counts as resolved above DROP_REL * max|E| of its run: E sums n^2 = 1024 O(1) terms,
# and on plateaus the recorded drops of non-decreasing runs sit at 1e-15..3e-15 (a few ulps); 1e-13 is ~30x above
DROP_REL = 1e-13


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    identity_cases: tuple   # part A, one (d, n, H, geometry, t_final, n_eval) per trajectory
    defect_eps: tuple       # part B, |Delta_h|_op values
    defect: dict            # part B: d, n, n_heads, t_final, n_eval
    search: dict            # part C: dims, head_counts, scales, seeds, n, t_final, n_eval, coarse_every
    decrease: dict          # part B': d, n, n_heads, t_final, n_eval (energy decrease near equilibrium vs eps)
    defect_seeds: tuple     # parts B and B': one independent draw (heads, Delta direction, tokens) per seed


QUICK = Settings(
    identity_cases=((3, 12, 3, "sphere", 3.0, 97), (3, 12, 3, "flat", 2.0, 97)),
    defect_eps=tuple(np.logspace(-4, -1, 4)),
    defect=dict(d=3, n=12, n_heads=3, t_final=1.0, n_eval=6),
    search=dict(dims=(3,), head_counts=(1, 2), scales=(1.0,), seeds=(0, 1), n=12, t_final=4.0, n_eval=161,
                coarse_every=8),
    decrease=dict(d=3, n=12, n_heads=3, t_final=6.0, n_eval=121),
    defect_seeds=(3, 13, 23))
FULL = Settings(
    identity_cases=((3, 32, 3, "sphere", 8.0, 1601), (3, 32, 3, "flat", 2.0, 1601),
                    (8, 32, 3, "sphere", 8.0, 801), (8, 32, 3, "flat", 2.0, 801)),
    defect_eps=tuple(np.logspace(-5, 0, 11)),
    defect=dict(d=3, n=32, n_heads=3, t_final=4.0, n_eval=21),
    search=dict(dims=(3, 6), head_counts=(1, 2, 3, 4), scales=(1.0, 3.0), seeds=tuple(range(10)), n=16,
                t_final=10.0, n_eval=2001, coarse_every=50),
    decrease=dict(d=3, n=32, n_heads=3, t_final=20.0, n_eval=2001),
    defect_seeds=tuple(3 + 10 * k for k in range(10)))   # seed, seed + 1, seed + 2 are used per draw: step 10


def _slope(x, y):
    """Least-squares slope of log y against log x."""
    return fit_slope(x, y, log_x=True, log_y=True).slope


def identity_run(d, n, n_heads, geometry, t_final, n_eval, seed):
    """Energy, exact rate, dissipation and per-head rates along one value-aligned trajectory."""
    heads = mf.random_symmetric_heads(d, n_heads, seed=seed)
    system = mf.ParticleSystem(heads, geometry)

    def observe(t, X):
        rates = system.energy_rates(X)
        return {"energy": system.energy(X), "rate": rates.sum(), "rate_head": rates,
                "dissipation": dg.dissipation(system, X), "max_norm": np.linalg.norm(X, axis=1).max()}

    X0 = mf.initial.uniform_sphere(n, d, seed=seed + 1)
    t_blowup = None
    if geometry == "flat":   # flat exp dynamics blows up in finite time: stop at a fraction of it
        t_final, t_blowup = blowup_horizon(system, X0, t_final, FLAT_FRACTION)
    tr = mf.solve_particles(system, X0, t_final, save=SaveAt(t_eval=np.linspace(0, t_final, n_eval), observe=observe),
                            progress=False)
    o, t = tr.observables, tr.t
    E, D, R = o["energy"], o["dissipation"], o["rate"]
    steps, fd_err, simpson_err = [], [], []
    for s in (1, 2, 4, 8, 16, 32):
        tt, EE, DD = t[::s], E[::s], D[::s]
        if tt.size < 5:
            break
        fd = (EE[2:] - EE[:-2]) / (tt[2:] - tt[:-2])
        steps.append(tt[1] - tt[0])
        fd_err.append(np.abs(fd - DD[1:-1]).max() / DD.max())
        simpson_err.append(np.abs(EE - EE[0] - cumulative_simpson(DD, x=tt, initial=0)).max() / (EE[-1] - EE[0]))
    return {
        "t": t, "energy": E, "rate": R, "dissipation": D, "rate_head": o["rate_head"], "max_norm": o["max_norm"],
        "status": tr.status, "n_steps": tr.n_steps, "t_final": t_final, "t_blowup": t_blowup,
        "pointwise_residual": float(np.abs(R - D).max() / D.max()),
        "min_dissipation": float(D.min()),
        "min_energy_increment": float(np.diff(E).min() / (E[-1] - E[0])),
        "steps": np.array(steps), "fd_error": np.array(fd_err), "simpson_error": np.array(simpson_err),
        "fd_order": _slope(steps, fd_err), "simpson_order": _slope(steps, simpson_err),
    }


def defect_scan(d, n, n_heads, eps_values, t_final, n_eval, seed, eps_fit_max=0.1):
    """Identity defect against the value-alignment perturbation ``eps = |Delta_h|_op``."""
    base = mf.random_symmetric_heads(d, n_heads, seed=seed)
    X0 = mf.initial.uniform_sphere(n, d, seed=seed + 1)
    inst, inst_rel, traj, traj_rel = [], [], [], []
    for eps in eps_values:
        heads = mf.perturbed_value_heads(base, eps, seed=seed + 2)   # same Delta direction for every eps
        system = mf.ParticleSystem(heads, "sphere")
        D0 = dg.dissipation(system, X0)
        defect0 = abs(system.energy_rates(X0).sum() - D0)
        inst.append(defect0)
        inst_rel.append(defect0 / D0)

        def observe(t, X, system=system):
            D = dg.dissipation(system, X)
            return {"defect": abs(system.energy_rates(X).sum() - D), "dissipation": D}

        tr = mf.solve_particles(system, X0, t_final,
                                save=SaveAt(t_eval=np.linspace(0, t_final, n_eval), observe=observe), progress=False)
        traj.append(tr.observables["defect"].max())
        traj_rel.append((tr.observables["defect"] / tr.observables["dissipation"]).max())
    eps_values = np.asarray(eps_values, dtype=float)
    fit = eps_values <= eps_fit_max
    inst, traj = np.array(inst), np.array(traj)
    return {"eps": eps_values, "defect_initial": inst, "defect_initial_rel": np.array(inst_rel),
            "defect_traj_max": traj, "defect_traj_rel_max": np.array(traj_rel), "eps_fit_max": eps_fit_max,
            "slope_initial": _slope(eps_values[fit], inst[fit]), "slope_traj": _slope(eps_values[fit], traj[fit])}


def decrease_scan(d, n, n_heads, eps_values, t_final, n_eval, seed):
    """How much ``E_multi`` *decreases* with ``V_h = M_h + Delta_h`` (``|Delta_h|_op = eps``).

    Thm 12 only bounds the defect ``|dE/dt - (1/n) sum |dx/dt|^2| <= C eps |dx/dt|``; the dissipation is
    quadratic in the velocity, the defect linear, so near an equilibrium (``|dx/dt| < C eps``) the
    energy can decrease.  Per eps: the most negative exact rate, the fraction of observed times with
    ``dE/dt < 0`` (dense grid) and the largest energy drop below its running maximum,
    ``max_t (max_{s <= t} E(s) - E(t))``; heuristically ``O(eps^2)`` (a rate ``O(eps |v|)`` over the
    ``O(eps)`` neighbourhood where it can be negative), measured superlinear (exponent 1.5-2).
    """
    base = mf.random_symmetric_heads(d, n_heads, seed=seed)
    X0 = mf.initial.uniform_sphere(n, d, seed=seed + 1)
    min_rate, frac_neg, drop, rise, scale = [], [], [], [], []
    for eps in eps_values:
        heads = mf.perturbed_value_heads(base, eps, seed=seed + 2)
        system = mf.ParticleSystem(heads, "sphere")
        tr = mf.solve_particles(system, X0, t_final, step=StepControl(rtol=1e-10, atol=1e-12),
                                save=SaveAt(t_eval=np.linspace(0, t_final, n_eval),
                                            observe=lambda t, X, system=system: {"energy": system.energy(X),
                                                                                 "rate": system.energy_rates(X).sum()}),
                                progress=False)
        E, R = tr.observables["energy"], tr.observables["rate"]
        min_rate.append(float(R.min()))
        frac_neg.append(float(np.mean(R < -NEG_REL * np.abs(R).max())))
        drop.append(float((np.maximum.accumulate(E) - E).max()))
        rise.append(float(E.max() - E[0]))
        scale.append(float(np.abs(E).max()))
    return {"eps": np.asarray(eps_values, dtype=float), "min_rate": np.array(min_rate),
            "frac_negative": np.array(frac_neg), "energy_drop": np.array(drop), "energy_rise": np.array(rise),
            "energy_scale": np.array(scale)}


def softmax_run(d, n, n_heads, scale, seed, t_final, n_eval, coarse_every=1):
    """One softmax multi-head run: exact ``dE_multi/dt`` and the weighted-identity residual (H = 1)."""
    heads = mf.random_symmetric_heads(d, n_heads, seed=1000 * n_heads + seed, scale=scale, normalization="softmax")
    system = mf.ParticleSystem(heads, "sphere")

    def observe(t, X):
        v = system.velocity(X)
        _, N = system.forces(X)
        w = np.full(X.shape[0], 1.0 / X.shape[0])
        weighted = np.einsum("n,hn,nd,nd->", w, N, v, v) if n_heads == 1 else np.nan
        return {"energy": system.energy(X), "rate": system.energy_rates(X).sum(),
                "dissipation": w @ np.einsum("nd,nd->n", v, v), "weighted": weighted}

    X0 = mf.initial.uniform_sphere(n, d, seed=seed)
    tr = mf.solve_particles(system, X0, t_final, save=SaveAt(t_eval=np.linspace(0, t_final, n_eval), observe=observe),
                            progress=False)
    o = tr.observables
    R, E = o["rate"], o["energy"]
    scale_r = np.abs(R).max()
    drop = np.maximum.accumulate(E) - E
    negative = R < -NEG_REL * scale_r
    return {"t": tr.t, "energy": E, "rate": R, "status": tr.status,
            "negative": negative, "negative_coarse": negative[::coarse_every], "min_rel_rate": float(R.min() / scale_r),
            "energy_drop_rel": float(drop.max() / max(E.max() - E.min(), 1e-300)),
            "weighted_residual": float(np.abs(R - o["weighted"]).max() / scale_r) if n_heads == 1 else np.nan}


def softmax_search(dims, head_counts, scales, seeds, n, t_final, n_eval, coarse_every=1):
    """Search random softmax configurations for decreasing ``E_multi``; summary per head count.

    The rate is observed on a dense grid of ``n_eval`` times; ``*_coarse`` repeats the statistics on
    every ``coarse_every``-th of them (the former output grid), so the dependence of "% of runs that
    decrease" on the output grid is measured, not assumed."""
    rows, worst = [], None
    for d in dims:
        for H in head_counts:
            for scale in scales:
                for seed in seeds:
                    r = softmax_run(d, n, H, scale, seed, t_final, n_eval, coarse_every)
                    rows.append({"d": d, "H": H, "scale": scale, "seed": seed, "status": r["status"],
                                 "any_negative": bool(r["negative"].any()),
                                 "any_negative_coarse": bool(r["negative_coarse"].any()),
                                 "frac_negative_times": float(r["negative"].mean()),
                                 "min_rel_rate": r["min_rel_rate"], "energy_drop_rel": r["energy_drop_rel"],
                                 "weighted_residual": r["weighted_residual"]})
                    if H > 1 and (worst is None or r["min_rel_rate"] < worst["min_rel_rate"]):
                        worst = {**r, "d": d, "H": H, "scale": scale, "seed": seed}
    per_H = {}
    for H in head_counts:
        sel = [r for r in rows if r["H"] == H]
        per_H[H] = {"runs": len(sel), "frac_runs_negative": float(np.mean([r["any_negative"] for r in sel])),
                    "frac_times_negative": float(np.mean([r["frac_negative_times"] for r in sel])),
                    "frac_runs_negative_coarse": float(np.mean([r["any_negative_coarse"] for r in sel])),
                    "min_rel_rate": float(min(r["min_rel_rate"] for r in sel)),
                    "max_energy_drop_rel": float(max(r["energy_drop_rel"] for r in sel))}
    return rows, per_H, worst


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = QUICK if quick else FULL
    id_cases, eps, dscan, search = cfg.identity_cases, cfg.defect_eps, cfg.defect, cfg.search
    arrays, summary = {}, {"identity": [], "quick": quick}
    for k, (d, n, H, geom, T, n_eval) in enumerate(id_cases):
        r = identity_run(d, n, H, geom, T, n_eval, seed=10 + k)
        for key in ("t", "energy", "rate", "dissipation", "rate_head", "steps", "fd_error", "simpson_error"):
            arrays[f"id{k}_{key}"] = r[key]
        summary["identity"].append({"d": d, "n": n, "H": H, "geometry": geom, "n_eval": n_eval,
                                    **{key: r[key] for key in ("status", "n_steps", "t_final", "t_blowup", "pointwise_residual",
                                                               "min_dissipation", "min_energy_increment",
                                                               "fd_order", "simpson_order")},
                                    "fd_error_min": float(r["fd_error"].min()),
                                    "simpson_error_min": float(r["simpson_error"].min()),
                                    "max_norm_final": float(r["max_norm"][-1])})
    seeds = cfg.defect_seeds
    scans = [defect_scan(eps_values=eps, seed=sd, **dscan) for sd in seeds]
    for key in ("defect_initial", "defect_initial_rel", "defect_traj_max", "defect_traj_rel_max"):
        arrays[f"defect_{key}"] = np.array([ds[key] for ds in scans])          # (draw, eps)
    arrays["defect_eps"] = scans[0]["eps"]
    eps_fit_max = scans[0]["eps_fit_max"]
    slopes = {q: np.array([ds[f"slope_{q}"] for ds in scans]) for q in ("initial", "traj")}
    ci = {q: mean_ci95(v) for q, v in slopes.items()}
    summary["defect"] = {**dscan, "seeds": list(seeds), "eps_fit_max": eps_fit_max,
                         **{f"slope_{q}": ci[q][0] for q in ci}, **{f"slope_{q}_ci95": ci[q][1] for q in ci},
                         **{f"slopes_{q}": slopes[q].tolist() for q in slopes}}
    decs = [decrease_scan(eps_values=eps, seed=sd, **cfg.decrease) for sd in seeds]
    for key in ("min_rate", "frac_negative", "energy_drop", "energy_rise", "energy_scale"):
        arrays[f"decrease_{key}"] = np.array([dec[key] for dec in decs])        # (draw, eps)
    arrays["decrease_eps"] = decs[0]["eps"]
    drop_fits = []
    for dec in decs:
        fit = (dec["eps"] <= eps_fit_max) & (dec["energy_drop"] > DROP_REL * dec["energy_scale"])
        drop_fits.append(fit_slope(dec["eps"][fit], dec["energy_drop"][fit], log_x=True, log_y=True, min_points=3))
    drop_mean, drop_ci = mean_ci95([f.slope for f in drop_fits])
    resolved = arrays["decrease_energy_drop"] > DROP_REL * arrays["decrease_energy_scale"]
    summary["decrease"] = {**cfg.decrease, "seeds": list(seeds), "drop_floor_rel": DROP_REL,
                           "draws_decreasing": int(resolved.any(axis=1).sum()),
                           "draws_decreasing_every_eps": int(resolved.all(axis=1).sum()), "drop_slope": drop_mean, "drop_slope_ci95": drop_ci,
                           "drop_slopes": [f.slope for f in drop_fits], "drop_slope_stderrs": [f.stderr for f in drop_fits],
                           "drop_fit_points": [f.n_points for f in drop_fits]}
    rows, per_H, worst = softmax_search(**search)
    summary["softmax"] = {**{k: list(v) if isinstance(v, tuple) else v for k, v in search.items()},
                          "neg_rel_threshold": NEG_REL, "per_H": per_H, "runs": rows}
    if worst is not None:
        summary["softmax"]["worst"] = {k: worst[k] for k in ("d", "H", "scale", "seed", "min_rel_rate",
                                                            "energy_drop_rel")}
        for key in ("t", "energy", "rate"):
            arrays[f"worst_{key}"] = worst[key]
    np.savez_compressed(out_dir / "data.npz", **arrays)
    save_json(out_dir / "data.json", summary)
    single = [r for r in rows if r["H"] == 1]
    multi = [r for r in rows if r["H"] > 1]
    return {
        "max_pointwise_residual": max(c["pointwise_residual"] for c in summary["identity"]),
        "min_energy_increment": min(c["min_energy_increment"] for c in summary["identity"]),
        "fd_orders": [c["fd_order"] for c in summary["identity"]],
        "simpson_orders": [c["simpson_order"] for c in summary["identity"]],
        "defect_slope_initial": summary["defect"]["slope_initial"], "defect_slope_traj": summary["defect"]["slope_traj"],
        "defect_slopes_initial": slopes["initial"].tolist(), "defect_slopes_traj": slopes["traj"].tolist(),
        "defect_slope_ci95": [ci["initial"][1], ci["traj"][1]],
        "single_head_negative_runs": int(sum(r["any_negative"] for r in single)),
        "single_head_max_weighted_residual": float(max(r["weighted_residual"] for r in single)),
        "multi_head_frac_runs_negative": float(np.mean([r["any_negative"] for r in multi])) if multi else None,
        "most_negative_rel_rate": summary["softmax"].get("worst", {}).get("min_rel_rate"),
        "decrease_drop_slope": drop_mean, "decrease_drop_slope_ci95": drop_ci,
        "decrease_drop_slopes": summary["decrease"]["drop_slopes"],
        "decrease_energy_drop": arrays["decrease_energy_drop"].ravel().tolist(),
        "decrease_draws_decreasing": summary["decrease"]["draws_decreasing"],
        "softmax_runs_negative_dense_vs_coarse": [[v["frac_runs_negative"], v["frac_runs_negative_coarse"]]
                                                  for v in per_H.values()],
    }


if __name__ == "__main__":
    main(run, report, Path(__file__).parent / "output", __doc__)
