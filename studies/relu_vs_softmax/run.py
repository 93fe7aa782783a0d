"""ReLU versus softmax attention: clustering times against n and d (paper Thm 25, MODEL.md sec. 2).

One scalar head ``M = V = lambda I`` (``lambda = 1``, ``beta = 1``); the clustering time is the
first time the common / mean pairwise inner product reaches ``TARGET = 1/2``.  Four
kernel-normalization pairs: exp-softmax (transformers), exp-mean, ReLU-mean (the paper's
``O(n log d)`` claim) and ReLU-softmax.  Three levels of description:

1. **linearized equiangular ODE** (:func:`meanfield.analysis.theory.linearized_clustering_time`), the
   object of the paper's statement: ``T_softmax ~ n / (2 phi(lambda))`` from ``gamma0 = 0`` and
   ``T_relu,mean = (n / 2 lambda^2) log(gamma_target / gamma0)`` from ``gamma0 = 1/sqrt(d)``;
2. **nonlinear equiangular ODE** (:func:`meanfield.analysis.theory.clustering_time`), same starts;
3. **random initial tokens**: ``n`` i.i.d. uniform points on ``S^{d-1}`` evolved by
   :func:`meanfield.solve_particles`; time when ``clustering(X)['mean_inner']`` first
   reaches the target (linear interpolation between the two recorded states bracketing the crossing),
   ``inf`` when it is not reached before the horizon (ReLU tokens more than 90 degrees apart
   do not interact, so several clusters can persist).

Theory grids: n = 16..4096, d = 16..4096 (``gamma0 = 1/sqrt(d)``; d = 4 would start at the target).
Particle grids: full n in {16, 32, 64, 128}, d in {4, 16, 64}, 10 seeds; quick n in {16, 32},
d in {16, 64}, 1 seed.  Fitted scalings: log-log slope of T against n, slope of T against log n,
slope of T / n and of log T against log d; for the particles, one fit per seed and the mean with a
95 % t-interval over seeds (:func:`particle_seed_fits`, over the runs that reached the target).  The
report treats runs that never reach the target as censored instead: medians over all runs with
percentile-bootstrap intervals (:func:`median_summary`, :func:`grid_median_fits`) and, for d >> n,
local slopes and a curvature test in ln d (:func:`ln_d_analysis`).

4. **d >> n** (``Settings.hd_*``; full n in {8, 16, 32}, d in {256, ..., 16384}, 10 seeds): the regime
   ``sqrt(d) > n`` where a ``log d`` can show; run exactly in the span of the tokens
   (:func:`span_particle_time`) and written to ``data_highd.*`` by :func:`run_high_d` (about 1-2
   minutes on its own: ``python -c "from studies.relu_vs_softmax.run import run_high_d; run_high_d('studies/relu_vs_softmax/output')"``).

The softmax "linearized" time of level 1 is a frozen-force (zeroth-order) approximation; the
consistent first-order linearization (:func:`first_order_softmax_time`) grows like ``log n``.

Cost: quick ~10 s of CPU; full with 10 seeds: the particle grid took ~15 s per seed (measured
2026-11-30, lightly loaded shared 2-core machine), the d >> n grid 1-2 minutes; under heavy load
expect 2-3x that (particle runs dominate; on a loaded machine set ``OPENBLAS_NUM_THREADS=1``, multi-threaded BLAS on
these small matrices is several times slower).  Run from the repository root::

    python -m studies.relu_vs_softmax.run [--quick]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield.analysis.clustering import clustering
from meanfield.core.options import SaveAt, StepControl
from studies._common import fit_slope, main, mean_ci95, save_json

LAMBDA, BETA, TARGET = 1.0, 1.0, 0.5
COMBOS = (("exp", "softmax"), ("exp", "mean"), ("relu", "mean"), ("relu", "softmax"))
THEORY_N = np.array([16, 64, 256, 1024, 4096])
THEORY_D = np.array([16, 64, 256, 1024, 4096])
N_EVAL = 300


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode: the particle grid."""

    n: tuple       # token counts
    d: tuple       # dimensions
    seeds: tuple
    hd_n: tuple = ()      # high-dimension grid (d >> n, where log d can show): token counts
    hd_d: tuple = ()      # ... dimensions
    hd_seeds: tuple = ()  # ... seeds


FULL = Settings(n=(16, 32, 64, 128), d=(4, 16, 64), seeds=tuple(range(10)),
                hd_n=(8, 16, 32), hd_d=(256, 1024, 4096, 16384), hd_seeds=tuple(range(10)))
QUICK = Settings(n=(16, 32), d=(16, 64), seeds=(0,), hd_n=(8,), hd_d=(256, 4096), hd_seeds=(0, 1, 2))


def combo_name(kernel, normalization):
    """Label of a kernel-normalization pair, e.g. ``"relu-mean"``."""
    return f"{kernel}-{normalization}"


def gamma0_of(kernel, d):
    """Start of the equiangular ODE: 0 for exp kernels, ``1/sqrt(d)`` for ReLU (zero force at 0)."""
    return 0.0 if kernel == "exp" else 1.0 / np.sqrt(d)


def theory_times(ns, ds):
    """Linearized and nonlinear equiangular clustering times.

    Returns
    -------
    ndarray, shape (len(COMBOS), 2, len(ns), len(ds))
        ``[combo, 0]`` linearized, ``[combo, 1]`` nonlinear time from ``gamma0_of(kernel, d)``
        to ``TARGET``.
    """
    out = np.empty((len(COMBOS), 2, len(ns), len(ds)))
    for c, (kernel, norm) in enumerate(COMBOS):
        for i, n in enumerate(ns):
            for j, d in enumerate(ds):
                g0 = gamma0_of(kernel, d)
                args = (g0, TARGET, [LAMBDA], BETA, int(n), kernel, norm)
                out[c, 0, i, j] = mf.theory.linearized_clustering_time(*args)
                out[c, 1, i, j] = mf.theory.clustering_time(*args)
    return out


def particle_time(kernel, normalization, n, d, seed, horizon):
    """Clustering time of ``n`` random tokens in ``R^d`` under one scalar head.

    Returns
    -------
    dict with ``T`` (inf if the target is not reached by ``horizon``), ``gamma0`` (initial mean
    inner product), ``final_mean_inner``, ``final_clusters`` (threshold 0.99) and ``n_steps``.
    """
    system = mf.ParticleSystem(mf.scalar_heads([LAMBDA], d, beta=BETA, kernel=kernel,
                                               normalization=normalization))
    X0 = mf.initial.uniform_sphere(n, d, seed)
    T, tr = _time_to_target(system, X0, horizon, f"{kernel}-{normalization}, n={n}, d={d}")
    final = clustering(tr.y_final)
    return {"T": T, "gamma0": float(tr.observables["mean_inner"][0]), "final_mean_inner": final["mean_inner"],
            "final_clusters": final["n_clusters"], "n_steps": tr.n_steps}


def _time_to_target(system, X0, horizon, label):
    """``(T, trajectory)``: the time the mean inner product of the tokens reaches ``TARGET`` (inf if
    not before ``horizon``), by an event and linear interpolation within the last step interval."""

    def observe(t, X):
        return {"mean_inner": clustering(X)["mean_inner"]}

    def event(t, X):
        return "target reached" if observe(t, X)["mean_inner"] >= TARGET else None

    t_eval = np.concatenate([[0.0], np.geomspace(1e-2, horizon, N_EVAL)])
    tr = mf.solve_particles(system, X0, horizon, step=StepControl(rtol=1e-7, atol=1e-9),
                            save=SaveAt(t_eval=t_eval, observe=observe, states=False), event=event, progress=False)
    if tr.status < 0:
        raise RuntimeError(f"particle run failed ({label}): {tr.message}")
    m = tr.observables["mean_inner"]
    T = np.inf
    if tr.status == 1:
        # m[-2] < TARGET <= m[-1]: linear interpolation within the last step interval
        T = float(tr.t[-1]) if len(m) < 2 else float(np.interp(TARGET, m[-2:], tr.t[-2:]))
    return T, tr


def span_particle_time(kernel, normalization, n, d, seed, horizon):
    """:func:`particle_time` for ``d >> n``, run in the ``n``-dimensional span of the tokens.

    Scalar heads ``M = V = lambda I`` make the velocity of every token a combination of the tokens
    (the projection ``I - x x^T`` included), so the tokens never leave the span of ``X0`` and the
    whole run depends only on the initial Gram matrix.  We draw ``X0`` uniform on ``S^{d-1}``
    (same draw as :func:`particle_time`), take coordinates in an orthonormal basis of its span
    (``X0^T = Q R``, coordinates ``R^T``, rows renormalized against round-off) and run in
    ``R^n``: exact up to the integrator tolerance, and independent of ``d`` in cost (a run in
    ``R^4096`` with ``d x d`` head matrices takes minutes).  Checked against :func:`particle_time`
    in ``tests/test_study_relu_vs_softmax.py``.
    """
    X0 = mf.initial.uniform_sphere(n, d, seed)
    _, R = np.linalg.qr(X0.T)
    Y0 = R.T / np.linalg.norm(R.T, axis=1, keepdims=True)
    system = mf.ParticleSystem(mf.scalar_heads([LAMBDA], n, beta=BETA, kernel=kernel, normalization=normalization))
    T, tr = _time_to_target(system, Y0, horizon, f"{kernel}-{normalization}, n={n}, d={d}")
    return {"T": T, "gamma0": float(tr.observables["mean_inner"][0])}


def first_order_softmax_time(n, gamma0=0.0, target=TARGET, lam=LAMBDA, beta=BETA):
    """Clustering time of the *first-order* linearization of the softmax equiangular ODE.

    ``dgamma/dt = F(gamma) = 2 B(gamma) (1 - gamma) (1 + (n-1) gamma)``, ``B = lam / (exp(beta lam (1-gamma)) + n - 1)``,
    replaced by ``F(0) + F'(0) gamma = a + b gamma`` with ``a = 2 B(0)`` and
    ``b = 2 (B'(0) + (n - 2) B(0))``, ``B'(0) = beta lam^2 e^(beta lam) / (e^(beta lam) + n - 1)^2``; the time from
    ``gamma0`` to ``target`` is ``(1/b) ln((a + b target) / (a + b gamma0))``.  For large n, ``a ~ 2 lam / n`` and
    ``b ~ 2 lam``, so ``T ~ ln(1 + n target) / (2 lam)``: already logarithmic in n.  (The "linearized" time of
    :func:`meanfield.analysis.theory.linearized_clustering_time` keeps only ``a``: a frozen-force, zeroth-order
    approximation, ``T = target / a = O(n)``.)
    """
    e = np.exp(beta * lam)
    B0 = lam / (e + n - 1)
    dB0 = beta * lam ** 2 * e / (e + n - 1) ** 2
    a, b = 2 * B0, 2 * (dB0 + (n - 2) * B0)
    return float(np.log((a + b * target) / (a + b * gamma0)) / b)


def run_high_d(out_dir: Path, quick: bool = False) -> dict:
    """The d >> n particle grid (``Settings.hd_*``) via :func:`span_particle_time`; writes
    ``data_highd.npz`` / ``data_highd.json`` (separate from the main data, so it can be computed on its own)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    grid = QUICK if quick else FULL
    hn, hd, seeds = np.array(grid.hd_n), np.array(grid.hd_d), np.array(grid.hd_seeds)
    T = np.empty((len(COMBOS), len(hn), len(hd), len(seeds)))
    g0 = np.empty_like(T)
    for c, (kernel, norm) in enumerate(COMBOS):
        for i, n in enumerate(hn):
            for j, d in enumerate(hd):
                for k, s in enumerate(seeds):
                    r = span_particle_time(kernel, norm, int(n), int(d), int(s), horizon_for(n, d))
                    T[c, i, j, k], g0[c, i, j, k] = r["T"], r["gamma0"]
    theory = theory_times(hn, hd)
    first = np.array([first_order_softmax_time(int(n)) for n in hn])
    fitsd = {}
    for c, (kernel, norm) in enumerate(COMBOS):
        for i, n in enumerate(hn):
            x = np.repeat(np.log(hd), len(seeds))
            y = T[c, i].ravel()
            f = fit_slope(x, y, drop_invalid=True, min_points=3)
            lin = theory[c, 0, i]
            fitsd[f"{combo_name(kernel, norm)}/n={int(n)}"] = {
                "slope_T_vs_lnd": f.slope, "stderr": f.stderr, "points": f.n_points,
                "linearized_slope": _slope(hd, lin, log_y=False) if np.all(np.isfinite(lin)) else None,
                "nonlinear_ode_slope": _slope(hd, theory[c, 1, i], log_y=False),
                "reached_fraction": float(np.isfinite(T[c, i]).mean())}
    np.savez_compressed(out_dir / "data_highd.npz", T=T, gamma0=g0, n=hn, d=hd, seeds=seeds, theory=theory,
                        first_order_softmax=first)
    summary = {"quick": quick, "fits": fitsd, "combos": [combo_name(*c) for c in COMBOS],
               "first_order_softmax_times": dict(zip(map(int, hn), first))}
    save_json(out_dir / "data_highd.json", summary)
    return summary


def horizon_for(n, d):
    """Time budget of a particle run: well beyond the ReLU-mean linearized time ``(n/2) log(sqrt(d)/2)``."""
    return float(max(100.0, 1.5 * n * np.log(max(d, 4))))




def _slope(x, y, log_y):
    """Least-squares slope of ``y`` (or ``log y``) against ``log x``; times that are inf (target not
    reached) or nan (no seed reached it) are left out; nan if fewer than 2 remain."""
    return fit_slope(x, y, log_x=True, log_y=log_y, drop_invalid=True).slope


def _scalings(T, nn, dd):
    """The four fitted scalings of one time table ``T[n, d]`` (see :func:`fits`)."""
    return {"loglog_n": _slope(nn, T[:, -1], log_y=True), "vs_logn": _slope(nn, T[:, -1], log_y=False),
            "Tn_vs_logd": _slope(dd, T[-1, :] / nn[-1], log_y=False), "loglog_d": _slope(dd, T[-1, :], log_y=True)}


def particle_seed_fits(particles, pn, pd):
    """Per-seed fitted scalings of the particle times and their mean with a 95 % t-interval over seeds.

    Each seed's times ``particles[c, :, :, k]`` are fitted on their own (times not reached are left
    out; a seed with fewer than 2 usable points gives no slope).  Returns a dict keyed
    ``"<combo>/<quantity>"`` of ``{"mean", "ci95", "seeds"}`` (``ci95`` the half-width, nan for
    fewer than 2 seeds; ``seeds`` the number of seeds with a slope).
    """
    out = {}
    for c, (kernel, norm) in enumerate(COMBOS):
        per_seed = [_scalings(particles[c, :, :, k], pn, pd) for k in range(particles.shape[-1])]
        for q in per_seed[0]:
            vals = np.array([p[q] for p in per_seed])
            m, h = mean_ci95(vals)
            out[f"{combo_name(kernel, norm)}/{q}"] = {"mean": m, "ci95": h, "seeds": int(np.isfinite(vals).sum())}
    return out


def fits(theory, ns, ds, particles, pn, pd):
    """Fitted scalings of the theory and particle times (see module docstring).

    Returns
    -------
    dict of floats keyed ``"<level>/<combo>/<quantity>"``: ``loglog_n`` (slope of log T vs log n,
    at the largest d), ``vs_logn`` (slope of T vs ln n), ``Tn_vs_logd`` (slope of T / n vs ln d,
    at the largest n), ``loglog_d`` (slope of log T vs log d).  Particle entries are the mean over
    seeds of the per-seed slopes (:func:`particle_seed_fits`, which also gives their 95 % intervals).
    """
    out = {}
    for c, (kernel, norm) in enumerate(COMBOS):
        name = combo_name(kernel, norm)
        for level, T in (("linearized", theory[c, 0]), ("nonlinear", theory[c, 1])):
            for q, v in _scalings(T, ns, ds).items():
                out[f"{level}/{name}/{q}"] = v
    for key, v in particle_seed_fits(particles, pn, pd).items():
        out[f"particles/{key}"] = v["mean"]
    return out


def run(out_dir: Path, quick: bool = False) -> dict:
    """Compute theory and particle clustering times; write ``data.npz`` and ``data.json``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    grid = QUICK if quick else FULL
    pn, pd, seeds = np.array(grid.n), np.array(grid.d), np.array(grid.seeds)
    theory = theory_times(THEORY_N, THEORY_D)
    shape = (len(COMBOS), len(pn), len(pd), len(seeds))
    T, g0, final_m, final_k, steps = (np.empty(shape) for _ in range(5))
    for c, (kernel, norm) in enumerate(COMBOS):
        for i, n in enumerate(pn):
            for j, d in enumerate(pd):
                for k, s in enumerate(seeds):
                    r = particle_time(kernel, norm, int(n), int(d), int(s), horizon_for(n, d))
                    idx = (c, i, j, k)
                    T[idx], g0[idx], final_m[idx] = r["T"], r["gamma0"], r["final_mean_inner"]
                    final_k[idx], steps[idx] = r["final_clusters"], r["n_steps"]
    theory_p = theory_times(pn, pd)   # theory at the particle grid (same start convention), to compare
    f = fits(theory, THEORY_N, THEORY_D, T, pn, pd)
    seed_fits = particle_seed_fits(T, pn, pd)
    np.savez_compressed(out_dir / "data.npz", theory=theory, theory_n=THEORY_N, theory_d=THEORY_D,
                        particle_T=T, particle_gamma0=g0, particle_final_mean_inner=final_m,
                        particle_final_clusters=final_k, particle_steps=steps, particle_n=pn,
                        particle_d=pd, seeds=seeds, theory_at_particles=theory_p)
    reached = np.isfinite(T)
    summary = {
        "quick": quick, "lambda": LAMBDA, "beta": BETA, "target": TARGET,
        "combos": [combo_name(*c) for c in COMBOS], "fits": f,
        "particle_seed_fits": seed_fits, "particle_seeds": len(seeds),
        "nonlinear_softmax_times": dict(zip(map(int, THEORY_N), theory[0, 1, :, 0])),
        "linearized_softmax_times": dict(zip(map(int, THEORY_N), theory[0, 0, :, 0])),
        "relu_mean_linear_over_nlogd": float(np.median(theory[2, 0] / (THEORY_N[:, None] * np.log(THEORY_D)))),
        "particles_reached_fraction": {combo_name(*c): float(reached[i].mean()) for i, c in enumerate(COMBOS)},
    }
    summary["first_order_softmax_times"] = {int(n): first_order_softmax_time(int(n)) for n in THEORY_N}
    save_json(out_dir / "data.json", summary)
    if grid.hd_n:
        summary["high_d"] = run_high_d(out_dir, quick)
    return summary


if __name__ == "__main__":
    from studies.relu_vs_softmax.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)


# ---------------------------------------------------------------- censored clustering times
# A run that never reaches the target within the horizon (ReLU tokens more than 90 degrees apart
# never merge) has no finite clustering time: T = inf.  Dropping such runs biases the mean low, and
# their mean is infinite, so the summaries below are medians over *all* runs (inf included), which
# exist while fewer than half are censored; every censored run's horizon lies beyond every reached
# time, so this median is the Kaplan-Meier median.  Intervals: percentile bootstrap over seeds.
N_BOOT = 2000


def censored_median(T):
    """Median of the times ``T`` (last axis = seeds; inf = not reached): the mean of the middle two
    order statistics, inf when half or more of the runs are censored."""
    s = np.sort(np.asarray(T, float), axis=-1)
    k = s.shape[-1]
    lo, hi = s[..., (k - 1) // 2], s[..., k // 2]
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(hi), np.inf, 0.5 * (lo + hi))


def _boot_medians(T, rng, n_boot=N_BOOT):
    """Bootstrap medians (n_boot, ...) resampling the seeds (last axis) of each cell independently."""
    T = np.asarray(T, float)
    k = T.shape[-1]
    idx = rng.integers(0, k, size=(n_boot,) + T.shape)
    return censored_median(np.take_along_axis(np.broadcast_to(T, (n_boot,) + T.shape), idx, axis=-1))


def median_summary(T, seed=0, n_boot=N_BOOT):
    """Per cell (all axes but the last): median, 95 % percentile-bootstrap interval and censored fraction.

    Returns a dict of arrays ``median``, ``lo``, ``hi`` (inf where the median is not reached) and ``censored``."""
    T = np.asarray(T, float)
    b = _boot_medians(T, np.random.default_rng(seed), n_boot)
    # order statistics without interpolation (an interval open above keeps hi = inf, no inf - inf)
    return {"median": censored_median(T), "lo": np.quantile(b, 0.025, axis=0, method="lower"),
            "hi": np.quantile(b, 0.975, axis=0, method="higher"),
            "censored": np.mean(~np.isfinite(T), axis=-1)}


def _quantiles(v):
    """(2.5, 97.5) percentiles of the finite bootstrap values and the fraction that were not finite."""
    v = np.asarray(v, float)
    ok = np.isfinite(v)
    if not ok.any():
        return np.nan, np.nan, 1.0
    return float(np.percentile(v[ok], 2.5)), float(np.percentile(v[ok], 97.5)), float(1 - ok.mean())


def ln_d_analysis(T, d, seed=0, n_boot=N_BOOT):
    """Clustering time against ln d for one (combo, n): ``T`` (len(d), seeds), inf = not reached.

    On the medians: the slope over all d, the local slopes between neighbouring d and the quadratic
    coefficient of ``median T = a + b ln d + c (ln d)^2`` over every run of >= 3 consecutive d, each with
    a 95 % percentile-bootstrap interval (seeds resampled per d).  ``linear_range``: the widest such run
    of d whose curvature interval contains 0 (None if none does).  Where no run is censored also the
    ordinary least squares on every run with the quadratic term's Student-t interval (df = runs - 3).
    """
    T, x = np.asarray(T, float), np.log(np.asarray(d, float))
    med = censored_median(T)
    b = _boot_medians(T, np.random.default_rng(seed), n_boot)          # (n_boot, len(d))

    def slope(y, xs):
        return np.polyfit(xs, y, 1)[0] if np.all(np.isfinite(y)) else np.nan

    def curv(y, xs):
        return np.polyfit(xs, y, 2)[0] if np.all(np.isfinite(y)) else np.nan

    out = {"median": med.tolist(), "censored": np.mean(~np.isfinite(T), axis=-1).tolist()}
    lo, hi, bad = _quantiles([slope(r, x) for r in b])
    out["slope"] = {"value": float(slope(med, x)), "lo": lo, "hi": hi, "boot_undefined": bad}
    out["local"] = []
    for j in range(len(x) - 1):
        lo, hi, bad = _quantiles([slope(r[j:j + 2], x[j:j + 2]) for r in b])
        out["local"].append({"d": [int(d[j]), int(d[j + 1])], "value": float(slope(med[j:j + 2], x[j:j + 2])),
                             "lo": lo, "hi": hi, "boot_undefined": bad})
    out["curvature"] = []
    for w in range(len(x), 2, -1):
        for j in range(len(x) - w + 1):
            sl = slice(j, j + w)
            lo, hi, bad = _quantiles([curv(r[sl], x[sl]) for r in b])
            slo, shi, _ = _quantiles([slope(r[sl], x[sl]) for r in b])
            out["curvature"].append({"d": [int(d[j]), int(d[j + w - 1])], "points": w, "value": float(curv(med[sl], x[sl])),
                                     "lo": lo, "hi": hi, "boot_undefined": bad,
                                     "slope": float(slope(med[sl], x[sl])), "slope_lo": slo, "slope_hi": shi})
    def flat(c):
        return np.isfinite(c["lo"]) and c["lo"] <= 0 <= c["hi"] and c["boot_undefined"] < 0.025

    def inside(a, b):
        return b["d"][0] >= a["d"][0] and b["d"][1] <= a["d"][1]

    # a range of d is linear when its curvature interval and that of every >= 3-point range inside it contain 0
    lin = [c for c in out["curvature"] if all(flat(e) for e in out["curvature"] if inside(c, e))]
    widest = max((c["points"] for c in lin), default=0)
    out["linear_ranges"] = [c for c in lin if c["points"] == widest]
    if np.all(np.isfinite(T)) and len(x) >= 3:      # a quadratic needs three d
        from scipy import stats

        X = np.repeat(x, T.shape[1])
        A = np.column_stack([np.ones_like(X), X, X ** 2])
        coef, *_ = np.linalg.lstsq(A, T.ravel(), rcond=None)
        r = T.ravel() - A @ coef
        df = X.size - 3
        cov = np.linalg.inv(A.T @ A) * (r @ r) / df
        out["ols_quadratic"] = {"value": float(coef[2]), "ci95": float(stats.t.ppf(0.975, df) * np.sqrt(cov[2, 2])),
                                "df": int(df)}
    return out


def grid_median_fits(T, pn, pd, seed=0, n_boot=N_BOOT):
    """Scalings of the particle grid on medians (:func:`_scalings`'s four), with bootstrap intervals.

    ``T``: (len(COMBOS), n, d, seeds).  A cell whose median is not reached (half or more censored)
    leaves that fit (its point dropped; listed in ``dropped``).  Returns ``"<combo>/<quantity>"`` ->
    ``{"value", "lo", "hi", "dropped"}``."""
    out = {}
    rng = np.random.default_rng(seed)
    for c, (kernel, norm) in enumerate(COMBOS):
        med = censored_median(T[c])
        boot = _boot_medians(T[c], rng, n_boot)
        boot[:, ~np.isfinite(med)] = np.inf     # a cell dropped from the fit stays dropped in every resample
        fits = _scalings(med, pn, pd)
        bfits = [_scalings(bm, pn, pd) for bm in boot]
        for q, v in fits.items():
            cells = ([(int(n), int(pd[-1])) for n in pn] if q in ("loglog_n", "vs_logn")
                     else [(int(pn[-1]), int(dd)) for dd in pd])
            dropped = [f"n={a}, d={b}" for (a, b), m in zip(cells, med[:, -1] if q in ("loglog_n", "vs_logn")
                                                           else med[-1, :]) if not np.isfinite(m)]
            lo, hi, _ = _quantiles([bf[q] for bf in bfits])
            out[f"{combo_name(kernel, norm)}/{q}"] = {"value": float(v), "lo": lo, "hi": hi, "dropped": dropped}
    return out
