"""Does ReLU attention dominate late?  (the remark after paper Thm 25: softmax over-concentrates)

One scalar head ``M = V = lambda I`` (``lambda = 1``), three attention rules:

* ``softmax``      -- exp kernel, softmax normalization (transformers; the softmax of Thm 25), at
  ``beta = 1`` and ``beta = 4``;
* ``relu-mean``    -- ReLU kernel, mean normalization (the ReLU of Thm 25, ``T = O(n log d)``);
* ``relu-softmax`` -- ReLU kernel, row-normalized like softmax (isolates the kernel from the normalization).

**Reading of "dominates late"** (the summaries do not pin it down): once the tokens have half
clustered (mean inner product ``gamma >= 1/2``), ReLU brings them together faster: the *late*
segment times ``T(1/2 -> 0.9)``, ``T(0.9 -> 0.99)``, ``T(1/2 -> 0.99)`` are shorter for ReLU, and its
instantaneous rate ``F_relu(gamma) / F_softmax(gamma) > 1``.  Segment times from ``gamma = 1/2``
do not depend on the start (the early phase is Thm 25 proper, studies/relu_vs_softmax).  The
asymptotic rate of ``eps = 1 - gamma`` is ``mf.theory.late_rate``: ``2 lambda`` (softmax, any beta),
``2 lambda^2`` (relu-mean), ``2 lambda`` (relu-softmax).

A. **Equiangular ODE** (``mf.theory``): segment times and effective rates
   ``ln(eps_1 / eps_2) / T`` over n and beta; the rate ratio
   ``F_relu-softmax / F_softmax = gamma (e^{beta lambda (1-gamma)} + n - 1) / (1 + (n-1) gamma)``
   equals 1 where ``gamma e^{beta lambda (1-gamma)} = 1``, i.e. at
   ``gamma_x = -W_0(-beta lambda e^{-beta lambda}) / (beta lambda)`` (Lambert W, independent of n),
   which lies in (0, 1) iff ``beta lambda > 1``: beyond ``gamma_x`` ReLU is faster.  Its cause is the
   self-weight of softmax attention, ``p_ii = e^{beta lambda} / (e^{beta lambda} + (n-1) e^{beta lambda gamma})``,
   against ``1 / (1 + (n-1) gamma)`` for ReLU: softmax over-concentrates attention on the token itself.
   For relu-mean, ``F_relu-mean / F_softmax = lambda gamma (e^{beta lambda (1-gamma)} + n - 1) / n``
   (roots found numerically).
B. **Random starts**: ``n`` uniform tokens on ``S^{d-1}``, the same draw for all rules (paired
   comparisons), 10 seeds per (n, d); dense output (``studies._common.dense_particle_run``), times
   at which the mean inner product reaches 0.5, 0.9, 0.99 and the smallest one (all tokens
   within) 0.9, 0.99 found as roots on the interpolant; clustering curves (mean and min inner
   product, clusters at 0.99) on a common grid.  Runs stop once every pair has ``<x_i, x_j> >= 0.9999``.

Cost: quick ~6 s; full 5.3 min wall on the shared 2-core machine under load (``OPENBLAS_NUM_THREADS=1``).
Run from the repository root: ``python -m studies.late_dominance.run [--quick]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize, special

import meanfield as mf
from meanfield.analysis.clustering import clustering
from meanfield.core.dense import Event
from studies._common import dense_particle_run, main, mean_ci95, save_json, wilson95

LAMBDA = 1.0
RULES = ("softmax", "relu-mean", "relu-softmax")
KERNELS = {"softmax": ("exp", "softmax"), "relu-mean": ("relu", "mean"), "relu-softmax": ("relu", "softmax")}
MEAN_TARGETS = (0.5, 0.9, 0.99)
MIN_TARGETS = (0.9, 0.99)
SEGMENTS = ((0.5, 0.9), (0.9, 0.99), (0.5, 0.99), (0.99, 0.999))
STOP_MIN_INNER = 0.9999
CLUSTER_THRESHOLD = 0.99


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    ode_n: tuple          # A
    ode_betas: tuple      # A
    ode_gamma0: float     # A: start of the early phase (gamma0 -> 1/2)
    n: tuple              # B: token counts
    d: tuple              # B: dimensions
    betas: tuple          # B: softmax inverse temperatures (ReLU does not use beta)
    seeds: tuple          # B
    curve_points: int     # B: common time grid of the curves
    per_step: int         # B: dense samples per accepted step


QUICK = Settings(ode_n=(8, 128), ode_betas=(1.0, 4.0), ode_gamma0=0.05, n=(16,), d=(16,), betas=(1.0, 4.0),
                 seeds=(0, 1, 2), curve_points=60, per_step=2)
FULL = Settings(ode_n=(8, 32, 128, 512, 2048), ode_betas=(0.5, 1.0, 2.0, 4.0, 8.0), ode_gamma0=0.05,
                n=(16, 32, 64), d=(4, 16, 64), betas=(1.0, 4.0), seeds=tuple(range(10)), curve_points=200, per_step=2)


def rule_label(rule, beta):
    return f"softmax b={beta:g}" if rule == "softmax" else rule


# ----------------------------------------------------------------------------- A: equiangular ODE
def crossover_relu_softmax(beta, lam=LAMBDA):
    """``gamma_x`` in (0, 1) with ``F_relu-softmax = F_softmax``: ``-W_0(-b e^{-b}) / b``, ``b = beta lam``;
    ``nan`` when ``b <= 1`` (softmax is faster on all of (0, 1))."""
    b = beta * lam
    if b <= 1:
        return np.nan
    return float(-special.lambertw(-b * np.exp(-b), 0).real / b)


def rate_ratio(gamma, rule, beta, n, lam=LAMBDA):
    """``F_rule(gamma) / F_softmax(gamma)`` from the library's equiangular rates."""
    if rule not in KERNELS:
        raise ValueError(f"rule must be one of {RULES}; received {rule!r}")
    k, z = KERNELS[rule]
    return (mf.theory.equiangular_rate(gamma, [lam], beta, n, k, z)
            / mf.theory.equiangular_rate(gamma, [lam], beta, n, "exp", "softmax"))


def crossovers(rule, beta, n, lam=LAMBDA, points=20001):
    """All ``gamma`` in (0, 1) where ``rate_ratio`` crosses 1 (grid scan + Brent), sorted."""
    g = np.linspace(1e-6, 1 - 1e-6, points)
    f = rate_ratio(g, rule, beta, n, lam) - 1
    idx = np.nonzero(np.sign(f[:-1]) * np.sign(f[1:]) < 0)[0]
    return [float(optimize.brentq(lambda x: float(rate_ratio(x, rule, beta, n, lam)) - 1, g[i], g[i + 1],
                                  xtol=1e-14)) for i in idx]


def ode_times(settings):
    """Part A: early time and late segment times per (rule, n, beta), shape (rule, n, beta, 1 + segments)."""
    ns, bs = settings.ode_n, settings.ode_betas
    T = np.full((len(RULES), len(ns), len(bs), 1 + len(SEGMENTS)), np.nan)
    for r, rule in enumerate(RULES):
        k, z = KERNELS[rule]
        for i, n in enumerate(ns):
            for j, b in enumerate(bs):
                T[r, i, j, 0] = mf.theory.clustering_time(settings.ode_gamma0, 0.5, [LAMBDA], b, n, k, z)
                for s, (g1, g2) in enumerate(SEGMENTS):
                    T[r, i, j, 1 + s] = mf.theory.clustering_time(g1, g2, [LAMBDA], b, n, k, z)
    return T


# ----------------------------------------------------------------------------- B: particles
def _mean_inner(X):
    return clustering(X, CLUSTER_THRESHOLD)["mean_inner"]


def _min_inner(X):
    G = X @ X.T
    np.fill_diagonal(G, 1.0)
    return float(G.min())


def particle_run(rule, beta, X0, horizon, t_grid, per_step):
    """One run: target times (dense output) and the curves on ``t_grid``."""
    n, d = X0.shape
    k, z = KERNELS[rule]
    system = mf.ParticleSystem(mf.scalar_heads([LAMBDA], d, beta, kernel=k, normalization=z))

    def merged(t, X):
        return _min_inner(X / np.linalg.norm(X, axis=1, keepdims=True)) - STOP_MIN_INNER
    # dopri5 (Dormand-Prince 5(4), scipy's RK45): the ReLU kernel's kink at s = 0 makes higher orders reject
    # many steps; the terminal event is located on the dense interpolant
    run = dense_particle_run(system, X0, horizon, rtol=1e-8, atol=1e-10, method="dopri5",
                             event=Event(merged, terminal=True))
    out = {"t_end": run.t_final, "merged": run.t_final < horizon, "drift": run.max_drift}
    ts = run.sample_times(per_step)
    states = [run.state(t) for t in ts]
    samples = {"mean": np.array([_mean_inner(X) for X in states]), "min": np.array([_min_inner(X) for X in states])}
    fns = {"mean": _mean_inner, "min": _min_inner}
    for kind, targets in (("mean", MEAN_TARGETS), ("min", MIN_TARGETS)):
        for g in targets:
            out[f"T_{kind}_{g}"] = _first_reach(run, ts, samples[kind], fns[kind], g)
    curves = np.full((3, t_grid.size), np.nan)
    for m, t in enumerate(t_grid):
        X = run.state(min(t, run.t_final))
        c = clustering(X, CLUSTER_THRESHOLD)
        curves[:, m] = c["mean_inner"], c["min_inner"], c["n_clusters"]
    out["final_clusters"] = int(curves[2, -1])
    return out, curves


def _first_reach(run, ts, values, fun, target):
    """First time ``fun(X(t)) >= target``: first sample at or above it, then Brent's method on the
    dense interpolant (``studies._common.first_sign_change`` with the samples computed once)."""
    up = values >= target
    if not up.any():
        return np.inf
    k = int(np.argmax(up))
    if k == 0:
        return 0.0
    return float(optimize.brentq(lambda t: fun(run.state(t)) - target, ts[k - 1], ts[k], xtol=1e-12))


def horizon_for(n, d):
    """Time budget: twice the relu-mean equiangular time from ``1/sqrt(d)`` to 0.999, at least 100
    (random starts are slower than the equiangular reduction: pairs with negative inner products
    do not interact under ReLU)."""
    T = mf.theory.clustering_time(1 / np.sqrt(d), 0.999, [LAMBDA], 1.0, n, "relu", "mean")
    return float(max(100.0, 2.0 * T))


def particle_scan(settings):
    cases = [(rule, b) for rule in RULES for b in (settings.betas if rule == "softmax" else (1.0,))]
    labels = [rule_label(*c) for c in cases]
    rows, curves = [], {}
    for n in settings.n:
        for d in settings.d:
            horizon = horizon_for(n, d)
            t_grid = np.linspace(0, horizon, settings.curve_points)
            curves[(n, d)] = (t_grid, np.full((len(cases), len(settings.seeds), 3, t_grid.size), np.nan))
            for s_i, s in enumerate(settings.seeds):
                X0 = mf.initial.uniform_sphere(n, d, seed=10_000 + 100 * n + d + 7919 * s)
                for c_i, (rule, b) in enumerate(cases):
                    o, cv = particle_run(rule, b, X0, horizon, t_grid, settings.per_step)
                    curves[(n, d)][1][c_i, s_i] = cv
                    rows.append({"rule": labels[c_i], "n": n, "d": d, "seed": s, "horizon": horizon, **o})
    return labels, rows, curves


def _segment(r, g1, g2):
    return r[f"T_mean_{g2}"] - r[f"T_mean_{g1}"]


def _ratio(a, b):
    """``a / b`` where both times are finite (both runs reached the target), else nan."""
    return a / b if np.isfinite(a) and np.isfinite(b) else np.nan


def paired_stats(rows, labels, settings):
    """Per (n, d): per rule the target times (mean, 95 % CI, fraction reached), and paired ratios
    softmax / ReLU of the late segment ``T(0.5 -> 0.99)`` and of ``T_min(0.99)`` over seeds."""
    out = []
    for n in settings.n:
        for d in settings.d:
            rec = {"n": n, "d": d, "rules": {}}
            by = {lab: sorted((r for r in rows if r["rule"] == lab and r["n"] == n and r["d"] == d),
                              key=lambda r: r["seed"]) for lab in labels}
            for lab, rs in by.items():
                m = len(rs)
                st = {"runs": m}
                for key in [f"T_mean_{g}" for g in MEAN_TARGETS] + [f"T_min_{g}" for g in MIN_TARGETS]:
                    v = np.array([r[key] for r in rs])
                    st[key] = mean_ci95(v)
                    st[key + "_reached"] = wilson95(int(np.isfinite(v).sum()), m) + (int(np.isfinite(v).sum()),)
                st["late_0.5_0.99"] = mean_ci95([_segment(r, 0.5, 0.99) for r in rs])
                st["final_clusters"] = mean_ci95([r["final_clusters"] for r in rs])
                rec["rules"][lab] = st
            for sm in [lab for lab in labels if lab.startswith("softmax")]:
                for rl in ("relu-mean", "relu-softmax"):
                    late = np.array([_ratio(_segment(a, 0.5, 0.99), _segment(b, 0.5, 0.99))
                                     for a, b in zip(by[sm], by[rl])])
                    tmin = [_ratio(a["T_min_0.99"], b["T_min_0.99"]) for a, b in zip(by[sm], by[rl])]
                    early = [_ratio(a["T_mean_0.5"], b["T_mean_0.5"]) for a, b in zip(by[sm], by[rl])]
                    rec[f"{sm} / {rl}"] = {
                        "late_ratio": mean_ci95(late), "late_ratio_runs": int(np.isfinite(late).sum()),
                        "relu_faster_late": int(np.sum(late > 1)),
                        "relu_never_099": int(sum(not np.isfinite(b["T_mean_0.99"]) for b in by[rl])),
                        "softmax_never_099": int(sum(not np.isfinite(a["T_mean_0.99"]) for a in by[sm])),
                        "tmin_ratio": mean_ci95(tmin), "early_ratio": mean_ci95(early)}
            out.append(rec)
    return out


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = QUICK if quick else FULL
    T = ode_times(settings)
    ns, bs = settings.ode_n, settings.ode_betas
    eff = {}      # effective rates ln(eps1/eps2) / T per segment, vs late_rate
    for r, rule in enumerate(RULES):
        k, z = KERNELS[rule]
        eff[rule] = {"late_rate": float(mf.theory.late_rate([LAMBDA], 1.0, k, z)),
                     "segment_rates": (np.log((1 - np.array([s[0] for s in SEGMENTS]))
                                              / (1 - np.array([s[1] for s in SEGMENTS])))[None, None, :]
                                       / T[r, :, :, 1:])}
    cross = {rule: {f"n={n}": {f"beta={b:g}": crossovers(rule, b, n) for b in bs} for n in ns}
             for rule in ("relu-mean", "relu-softmax")}
    gx = {f"beta={b:g}": crossover_relu_softmax(b) for b in bs}
    gx_err = max((abs(c[0] - gx[f"beta={b:g}"]) if c else (0.0 if np.isnan(gx[f"beta={b:g}"]) else np.inf))
                 for n in ns for b, c in ((b, cross["relu-softmax"][f"n={n}"][f"beta={b:g}"]) for b in bs))
    labels, rows, curves = particle_scan(settings)
    stats = paired_stats(rows, labels, settings)
    arrays = {"ode_T": T, "ode_n": np.array(ns), "ode_betas": np.array(bs)}
    for rule in RULES:
        arrays[f"ode_segment_rates_{rule}"] = eff[rule]["segment_rates"]
    for (n, d), (tg, cv) in curves.items():
        arrays[f"t_n{n}_d{d}"], arrays[f"curves_n{n}_d{d}"] = tg, cv
    g = np.linspace(0.01, 0.999, 400)
    arrays["ratio_gamma"] = g
    arrays["ratio_curves"] = np.array([[[rate_ratio(g, rule, b, n) for b in bs] for n in ns]
                                       for rule in ("relu-mean", "relu-softmax")])
    np.savez_compressed(out_dir / "data.npz", **arrays)
    summary = {"quick": quick, "lambda": LAMBDA, "rules": RULES, "labels": labels, "segments": SEGMENTS,
               "mean_targets": MEAN_TARGETS, "min_targets": MIN_TARGETS,
               "settings": {k: getattr(settings, k) for k in Settings.__dataclass_fields__},
               "late_rates": {rule: eff[rule]["late_rate"] for rule in RULES},
               "crossovers": cross, "gamma_x_closed_form": gx, "gamma_x_max_err": float(gx_err),
               "ode_late_ratio_softmax_over_relu_softmax": (T[0, :, :, 3] / T[2, :, :, 3]),
               "ode_late_ratio_softmax_over_relu_mean": (T[0, :, :, 3] / T[1, :, :, 3]),
               "ode_last_segment_rate_err": {rule: float(np.abs(eff[rule]["segment_rates"][..., -1]
                                                                / eff[rule]["late_rate"] - 1).max()) for rule in RULES},
               "particles": stats, "runs": rows,
               "max_drift": float(max(r["drift"] for r in rows))}
    save_json(out_dir / "data.json", summary)
    return {k: summary[k] for k in ("late_rates", "gamma_x_closed_form", "gamma_x_max_err",
                                    "ode_late_ratio_softmax_over_relu_softmax", "ode_last_segment_rate_err",
                                    "max_drift")}


if __name__ == "__main__":
    from studies.late_dominance.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
