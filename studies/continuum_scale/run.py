"""Continuum limit at scale: n = 10^2 ... 10^6 particles against the mean-field PDE, through clustering.

The claim (MODEL.md section 4): for i.i.d. initial tokens, ``W2(mu_n(t), rho(t)) -> 0`` at rate
``n^{-1/2}`` up to logarithms, with a constant growing like ``e^{L t}``.

Setup (the continuum_limit study's, with beta raised so that the density clusters within the
window): two zonal mean-normalized exp heads ``lambda = (1.0, 0.5)``, ``beta = 3``; initial density
``0.05 * (0.6 vMF(north, kappa 4) + 0.4 vMF(+x, kappa 4)) + 0.95 uniform``, a small perturbation of
the uniform state, which is linearly unstable here (growth rates ``sigma_l`` of
:func:`meanfield.analysis.stability.growth_rate_heads`, largest ``sigma_2 ~ 2.54``): the density
concentrates into clusters and the PDE's resolution monitor (spectral tail > 1e-3) stops it.

1. The PDE is solved once, at lmax 63 and at lmax 127 (the comparison uses lmax 127; both stop
   times are recorded), with output every ``dt_out`` up to the lmax-127 stop.
2. The (n, seed) particle runs are farmed out to a dask LocalCluster (2 single-threaded workers)
   through the generic resumable runner :func:`meanfield.workflow.tasks.run_tasks` (one ``.npz``
   per task under ``<out>/tasks/``, ``index.json``; a re-run skips finished tasks).  Each task
   samples n i.i.d. tokens from the initial density, integrates them (spectral sums, dopri5) to the
   last comparison time and measures, at every output time, the MMD to the PDE density (Sobolev
   ``H^{-2}`` kernel, and the attention kernel ``e^{beta <x, y>}``; exact, O(n + L^2 log L)) and, at
   ``w2_times`` for ``n <= w2_max_n``, the semi-discrete geodesic W2 (no grid floor).  For the larger
   ``n`` in ``w2_extra_n`` (3e5 and 1e6) the W2 runs in tasks of their own (``<out>/tasks_w2/``),
   which re-run the same tokens (the same stream and integrator; their MMD must equal the particle
   task's to 1e-9 relative), so that adding them left the 120 finished particle tasks as they were.
3. Fits per time (over the per-n means): free slope of log D against log n (with standard error),
   and the one-parameter models ``C n^{-1/2}`` and ``C sqrt(log n / n)`` compared by residual sums
   and AIC; the time at which D crosses fixed levels, against log n (``e^{L t}/sqrt(n)`` predicts
   ``t_cross = log n / (2 L) + const``), compared with the measured growth rate ``L`` of D in time.

Cost (2 cores shared with other jobs): quick ~20-35 s; full about 3 h wall clock: the 120 particle
tasks 61 min (load 6-11; 7311 s summed task time, the semi-discrete W2 at n = 10^5 dominating at
70-270 s per evaluation), the 10 W2 tasks at 3e5 and 1e6 1 h 53 min (load ~2-3; a W2 evaluation at
3e5 72-280 s, at 1e6 315-2163 s, the clustered t = 1.2 the slowest).  Re-running skips finished tasks
(seconds).  Run from the repo root::

    nice -n 5 python -m studies.continuum_scale.run [--quick]
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield.analysis import stability
from meanfield.analysis.mmd import mmd_iid_expectation
from meanfield.core.options import SaveAt
from meanfield.workflow.tasks import NpzStore, run_tasks
from studies._common import fit_slope, main, mean_ci, save_json
from studies.continuum_scale.tasks import W2_KEYS, particle_task, w2_task

LAMBDAS = (1.0, 0.5)
MUS = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
KAPPA, BLOB_WEIGHTS = 4.0, (0.6, 0.4)
SEED = 20261


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode (saved as ``config`` in data.json)."""

    beta: float
    floor: float              # uniform fraction of the initial density
    lmax: int                 # PDE of the comparison
    lmax_low: int             # a lower-resolution PDE (its stop time is reported)
    t_max: float              # PDE end time if the monitor does not stop it first
    dt_out: float             # spacing of the comparison times
    n_values: tuple           # particle numbers
    seeds_small: int          # seeds for n <= n_many_seeds ...
    seeds_large: int          # ... and above
    n_many_seeds: int
    w2_times: tuple           # times of the semi-discrete W2 (rounded to the output grid)
    w2_max_n: int             # W2 inside the particle tasks up to this n ...
    w2_extra_n: tuple         # ... and at these larger n in separate W2 tasks (tasks_w2/: same tokens re-run)
    w2_tol: float             # semi-discrete cell-mass tolerance
    w2_fallback_max_n: int    # exact node-based W2 where the Newton solver fails, up to this n
    w2_fallback_nlat: int     # ... against the density on nlat x 2 nlat Gauss-Legendre nodes
    mmd_s: float              # Sobolev order of the MMD
    levels: tuple             # crossing levels of the Sobolev MMD
    tail_min_n: int           # the large-n fits use n >= tail_min_n
    rtol: float               # particle integrator
    atol: float
    spectral_tol: float
    n_workers: int            # dask LocalCluster workers


FULL = Settings(beta=3.0, floor=0.95, lmax=127, lmax_low=63, t_max=2.0, dt_out=0.05,
                n_values=tuple(int(round(10 ** e)) for e in np.arange(2.0, 6.01, 0.5)),
                seeds_small=20, seeds_large=5, n_many_seeds=10_000,
                w2_times=(0.0, 0.6, 1.2), w2_max_n=100_000,
                w2_extra_n=(316_228, 1_000_000), w2_tol=1e-6, w2_fallback_max_n=4096,
                w2_fallback_nlat=64, mmd_s=2.0, levels=(0.001, 0.002, 0.004, 0.008, 0.016, 0.032), tail_min_n=10_000,
                rtol=1e-6, atol=1e-8, spectral_tol=1e-10, n_workers=2)
QUICK = Settings(beta=3.0, floor=0.95, lmax=47, lmax_low=31, t_max=1.0, dt_out=0.1,
                 n_values=(100, 316, 1000), seeds_small=4, seeds_large=4, n_many_seeds=1000,
                 w2_times=(0.0, 0.5), w2_max_n=316, w2_extra_n=(1000,), w2_tol=1e-6, w2_fallback_max_n=1000,
                 w2_fallback_nlat=24, mmd_s=2.0, levels=(0.01, 0.02), tail_min_n=100,
                 rtol=1e-6, atol=1e-8, spectral_tol=1e-10, n_workers=2)


def heads(cfg):
    return mf.scalar_heads(LAMBDAS, 3, beta=cfg.beta)


def initial_density(grid, cfg):
    return mf.densities.vmf_mixture_density(grid, MUS, KAPPA, BLOB_WEIGHTS, floor=cfg.floor)


def solve_pde(cfg, lmax):
    """The PDE at ``lmax`` on the output grid ``0, dt_out, ...`` up to ``t_max`` or the monitor's stop."""
    pde = mf.ContinuumPDE(heads(cfg), lmax)
    rho0 = initial_density(pde.grid, cfg)
    t = np.round(np.arange(0.0, cfg.t_max + 1e-9, cfg.dt_out), 9)
    tr = mf.solve_continuum(pde, rho0, cfg.t_max, save=SaveAt(t_eval=t), progress=False)
    return pde, rho0, tr


def model_comparison(ns, d):
    """Fits of per-n mean distances ``d`` against ``n`` in log space: free slope (2 parameters),
    ``C n^{-1/2}`` and ``C sqrt(log n / n)`` (1 parameter each); residual sums and AIC
    (``m log(RSS / m) + 2 k``, Gaussian errors in log D)."""
    ns, d = np.asarray(ns, float), np.asarray(d, float)
    ok = np.isfinite(d) & (d > 0)
    ns, d = ns[ok], d[ok]
    m = ns.size
    out = {"n_points": int(m), "n_range": [float(ns.min()), float(ns.max())] if m else None}
    if m < 3:
        return out
    y, x = np.log(d), np.log(ns)
    fit = fit_slope(ns, d, log_x=True, log_y=True)
    r_free = y - (fit.slope * x + fit.intercept)
    out.update(slope=fit.slope, slope_stderr=fit.stderr, C_free=float(np.exp(fit.intercept)))
    models = {"n^-1/2": -0.5 * x, "sqrt(log n / n)": 0.5 * np.log(np.log(ns) / ns)}
    for name, shape in models.items():
        logc = float(np.mean(y - shape))
        r = y - (logc + shape)
        rss = float(np.sum(r * r))
        out[name] = {"C": float(np.exp(logc)), "rss": rss, "aic": float(m * np.log(max(rss, 1e-300) / m) + 2)}
    rss_free = float(np.sum(r_free ** 2))
    out["free"] = {"rss": rss_free, "aic": float(m * np.log(max(rss_free, 1e-300) / m) + 4)}
    a1, a2 = out["n^-1/2"]["aic"], out["sqrt(log n / n)"]["aic"]
    out["preferred"] = "n^-1/2" if a1 < a2 else "sqrt(log n / n)"
    out["aic_difference"] = float(abs(a1 - a2))
    out["local_slope_sqrt_log"] = fit_slope(ns, np.sqrt(np.log(ns) / ns), log_x=True, log_y=True).slope
    return out


def crossing_time(t, d, level):
    """First time where ``d(t)`` reaches ``level`` (log-linear interpolation between output times);
    NaN if it starts above the level or never reaches it."""
    d = np.asarray(d, float)
    if not np.isfinite(d[0]) or d[0] >= level:
        return np.nan
    above = np.flatnonzero(d >= level)
    if not above.size:
        return np.nan
    k = above[0]
    l0, l1 = np.log(d[k - 1]), np.log(d[k])
    return float(t[k - 1] + (np.log(level) - l0) / (l1 - l0) * (t[k] - t[k - 1]))


def _fingerprint(setup: dict) -> str:
    h = hashlib.sha1()
    for k in sorted(setup):
        v = setup[k]
        h.update(k.encode())
        h.update(np.ascontiguousarray(v).tobytes() if isinstance(v, np.ndarray) else json.dumps(v).encode())
    return h.hexdigest()[:16]


def run(out_dir: Path, quick: bool = False, client=None) -> dict:
    cfg = QUICK if quick else FULL
    out_dir = Path(out_dir)
    tic, cpu = time.perf_counter(), time.process_time()
    hs = heads(cfg)

    # 1. the PDE, once (and at a lower lmax, for its stop time)
    pde_low, _, tr_low = solve_pde(cfg, cfg.lmax_low)
    pde, rho0, tr = solve_pde(cfg, cfg.lmax)
    # comparison times: the output times strictly before the monitor's stop (at the stop itself the
    # spectral tail has just passed its tolerance: the density is no longer resolved there)
    keep = tr.t < tr.t_final - 1e-9 if tr.status != 0 else np.ones(tr.t.size, bool)
    times = np.round(tr.t[keep], 9)
    coeffs = np.array([pde.coefficients(y) for y, k in zip(tr.y, keep) if k], dtype=np.complex128)
    t_pde = time.perf_counter() - tic
    print(f"  PDE lmax {cfg.lmax}: stop {tr.t_final:.4f} ({tr.message}); lmax {cfg.lmax_low}: stop "
          f"{tr_low.t_final:.4f}; {times.size} comparison times to {times[-1]:g} ({t_pde:.1f} s)", flush=True)

    # 2. the particle tasks on dask, through the generic resumable runner
    setup = {"heads": [h.to_dict() for h in hs], "lmax": cfg.lmax, "rho0": rho0, "times": times, "coeffs": coeffs,
             "rtol": cfg.rtol, "atol": cfg.atol, "spectral_tol": cfg.spectral_tol, "mmd_s": cfg.mmd_s,
             "mmd_beta": cfg.beta, "w2_times": list(cfg.w2_times), "w2_max_n": cfg.w2_max_n, "w2_tol": cfg.w2_tol,
             "w2_fallback_max_n": cfg.w2_fallback_max_n, "w2_fallback_nlat": cfg.w2_fallback_nlat,
             "base_seed": SEED}
    key = _fingerprint(setup)
    ns = np.asarray(cfg.n_values)
    seeds = {int(n): cfg.seeds_small if n <= cfg.n_many_seeds else cfg.seeds_large for n in ns}
    bad = [n for n in cfg.w2_extra_n if n not in seeds or n <= cfg.w2_max_n]
    if bad:     # refused before any task runs
        raise ValueError(f"w2_extra_n must be n values above w2_max_n = {cfg.w2_max_n}; received {bad}")
    # the largest first: the long tasks start at once and the short ones fill in around them
    points = [{"n": int(n), "seed": s, "setup": key} for n in sorted(ns, reverse=True) for s in range(seeds[int(n)])]
    tic_tasks = time.perf_counter()
    wall_file = out_dir / "tasks" / "wall_seconds.json"     # the task phase's wall time, summed over runs
    previous = json.loads(wall_file.read_text())["wall_seconds"] if wall_file.is_file() else 0.0
    rows = run_tasks(functools.partial(particle_task, setup), points, out_dir / "tasks", store="npz",
                     n_workers=cfg.n_workers, client=client, progress=False, desc="particle tasks")
    # W2 beyond w2_max_n: the same tokens re-run in tasks of their own (the particle tasks' setup key,
    # and so their finished files, stay as they were); the smaller n first, so that a run stopped
    # early leaves whole n values done
    w2_points = [{"n": int(n), "seed": s, "setup": key} for n in sorted(cfg.w2_extra_n) for s in range(seeds[int(n)])]
    w2_rows = run_tasks(functools.partial(w2_task, setup), w2_points, out_dir / "tasks_w2", store="npz",
                        n_workers=cfg.n_workers, client=client, progress=False, desc="W2 tasks") if w2_points else []
    wall_tasks = previous + time.perf_counter() - tic_tasks
    wall_file.write_text(json.dumps({"wall_seconds": wall_tasks}))
    failed = [r for r in rows + w2_rows if r["status"] != "done"]
    if failed:
        raise RuntimeError(f"{len(failed)} particle or W2 tasks failed, e.g. {failed[0]['params']}: {failed[0]['error']}")

    # 3. gather: arrays (n, seed, time), NaN-padded to the largest seed count
    S, T = max(seeds.values()), times.size
    names = ("mmd_sobolev", "mmd_exp", "w2", "w2_lower", "w2_upper", "w2_seconds", "w2_method", "order")
    arr = {k: np.full((ns.size, S, T), np.nan) for k in names}
    secs = {k: np.full((ns.size, S), np.nan) for k in ("particle_seconds", "mmd_seconds", "task_seconds")}
    for r in rows:
        d = NpzStore.load(out_dir / "tasks" / r["path"])
        i, s = int(np.flatnonzero(ns == r["params"]["n"])[0]), int(r["params"]["seed"])
        for k in names:
            arr[k][i, s] = d[k]
        secs["particle_seconds"][i, s], secs["mmd_seconds"][i, s] = d["particle_seconds"], d["mmd_seconds"]
        secs["task_seconds"][i, s] = r["seconds"]
    # the W2 tasks: their re-run must be the particle task's trajectory (MMD equal to the summation's
    # rounding: measured ~1e-15 relative; refused above 1e-9, the W2 would belong to other tokens)
    rerun_diff = 0.0
    for r in w2_rows:
        d = NpzStore.load(out_dir / "tasks_w2" / r["path"])
        i, s = int(np.flatnonzero(ns == r["params"]["n"])[0]), int(r["params"]["seed"])
        at = np.isfinite(d["mmd_sobolev"])
        rerun_diff = max(rerun_diff, float(np.max(np.abs(d["mmd_sobolev"][at] / arr["mmd_sobolev"][i, s, at] - 1))))
        for k in W2_KEYS:
            arr[k][i, s, at] = d[k][at]
        secs["task_seconds"][i, s] += r["seconds"]
    if rerun_diff > 1e-9:
        raise RuntimeError(f"the W2 tasks' re-run tokens differ from the particle tasks' (MMD relative difference "
                           f"{rerun_diff:.2e} > 1e-9): delete {out_dir / 'tasks_w2'} and re-run")
    mmd_iid = np.array([[mmd_iid_expectation(pde.grid, rho0, int(n), kernel="sobolev", s=cfg.mmd_s)] for n in ns])[:, 0]

    def stat(x):     # mean and 95 % CI half-width over the seeds of each n (NaN seeds left out)
        m, h = np.full(x.shape[::2], np.nan), np.full(x.shape[::2], np.nan)
        for i in range(x.shape[0]):
            for k in range(x.shape[2]):
                v = x[i, :, k][np.isfinite(x[i, :, k])]
                if v.size >= 2:
                    m[i, k], h[i, k] = mean_ci(v)
        return m, h

    means = {k: stat(arr[k]) for k in ("mmd_sobolev", "mmd_exp", "w2", "order")}
    fits = {}
    for k, t in enumerate(times):
        tail = ns >= cfg.tail_min_n
        entry = {"mmd_sobolev": model_comparison(ns, means["mmd_sobolev"][0][:, k]),
                 "mmd_exp": model_comparison(ns, means["mmd_exp"][0][:, k]),
                 "mmd_sobolev_tail": model_comparison(ns[tail], means["mmd_sobolev"][0][tail, k])}
        if np.any(np.isfinite(means["w2"][0][:, k])):
            entry["w2"] = model_comparison(ns, means["w2"][0][:, k])
            # W2's large-n fit: the largest n where it was computed and the two values below
            w2n = ns[np.isfinite(means["w2"][0][:, k])]
            top = ns >= (w2n[-3] if w2n.size >= 3 else w2n[0])
            entry["w2_tail"] = model_comparison(ns[top], means["w2"][0][top, k])
        fits[f"t={t:g}"] = entry
    # growth in time of the distance at fixed n: slope of log mean MMD against t (over the window)
    growth = {}
    for i, n in enumerate(ns):
        f = fit_slope(times, means["mmd_sobolev"][0][i], log_y=True, drop_invalid=True)
        growth[str(int(n))] = {"rate": f.slope, "stderr": f.stderr}
    # crossing times of fixed levels (per seed), against log n
    cross = np.full((len(cfg.levels), ns.size, S), np.nan)
    for a, level in enumerate(cfg.levels):
        for i in range(ns.size):
            for s in range(seeds[int(ns[i])]):
                cross[a, i, s] = crossing_time(times, arr["mmd_sobolev"][i, s], level)
    crossing = {}
    for a, level in enumerate(cfg.levels):
        full = [i for i in range(ns.size) if np.all(np.isfinite(cross[a, i, :seeds[int(ns[i])]]))]
        m = np.array([cross[a, i, :seeds[int(ns[i])]].mean() for i in full])
        f = fit_slope(ns[full], m, log_x=True) if len(full) >= 2 else None
        crossing[f"{level:g}"] = {"n": ns[full].tolist(), "mean": m.tolist(),
                                  "ci95": [mean_ci(cross[a, i, :seeds[int(ns[i])]])[1] for i in full],
                                  "slope_vs_log_n": f.slope if f else np.nan,
                                  "slope_stderr": f.stderr if f else np.nan,
                                  "implied_L": 1.0 / (2 * f.slope) if f and f.slope > 0 else np.nan}
    # the pooled slope of crossing time vs log n (all levels share it under D = C e^{Lt} / sqrt(n)):
    # a common slope with one intercept per level, least squares
    X, Y, G = [], [], []
    for a, level in enumerate(cfg.levels):
        c = crossing[f"{level:g}"]
        X += list(np.log(c["n"]))
        Y += list(c["mean"])
        G += [a] * len(c["n"])
    pooled = {"slope": np.nan, "stderr": np.nan, "implied_L": np.nan, "n_points": len(X)}
    if len(X) >= len(set(G)) + 2:
        X, Y, G = np.array(X), np.array(Y), np.array(G)
        levels_used = sorted(set(G.tolist()))
        A = np.column_stack([X] + [(G == g).astype(float) for g in levels_used])
        coef, *_ = np.linalg.lstsq(A, Y, rcond=None)
        r = Y - A @ coef
        dof = len(Y) - A.shape[1]
        cov = np.linalg.inv(A.T @ A) * (r @ r) / dof if dof > 0 else np.full((A.shape[1],) * 2, np.nan)
        pooled.update(slope=float(coef[0]), stderr=float(np.sqrt(cov[0, 0])),
                      implied_L=float(1 / (2 * coef[0])) if coef[0] > 0 else np.nan)
    sigma = [float(stability.growth_rate_heads(l, hs)) for l in range(1, 11)]
    # pooled growth rate over the largest n (tasks with the least sampling noise): mean of per-n rates
    big = [str(int(n)) for n in ns[-3:]]
    summary = {
        "quick": quick, "config": asdict(cfg), "heads": [h.to_dict() for h in hs],
        "initial_density": {"mus": MUS.tolist(), "kappa": KAPPA, "weights": BLOB_WEIGHTS, "floor": cfg.floor},
        "seeds": {str(k): v for k, v in seeds.items()}, "setup_key": key,
        "pde": {"lmax": cfg.lmax, "t_stop": tr.t_final, "status": tr.status, "message": tr.message,
                "lmax_low": cfg.lmax_low, "t_stop_low": tr_low.t_final, "status_low": tr_low.status,
                "message_low": tr_low.message, "t_last_comparison": float(times[-1]), "seconds": t_pde},
        "linear_growth_rates_sigma_l": sigma, "sigma_max": max(sigma), "l_max_growth": int(np.argmax(sigma) + 1),
        "fits": fits, "growth_in_time": growth,
        "growth_rate_large_n": float(np.mean([growth[b]["rate"] for b in big])),
        "crossing": crossing, "crossing_pooled": pooled,
        "mmd_t0_over_iid": [float(np.nanmean(arr["mmd_sobolev"][i, :, 0] ** 2) / mmd_iid[i]) for i in range(ns.size)],
        "w2_fallback_count": int(np.nansum(arr["w2_method"] == 1)),
        "w2_failed_count": int(sum(np.sum(~np.isfinite(arr["w2"][i, :seeds[int(n)]][:, np.isin(times, np.round(
            cfg.w2_times, 9))])) for i, n in enumerate(ns) if n <= cfg.w2_max_n or n in cfg.w2_extra_n)),
        "w2_n_values": [int(n) for n in ns if n <= cfg.w2_max_n or n in cfg.w2_extra_n],
        "w2_rerun_mmd_max_rel_diff": rerun_diff,
        "task_wall_seconds": wall_tasks, "task_cpu_seconds_sum": float(np.nansum(secs["task_seconds"])),
        "wall_seconds": time.perf_counter() - tic, "cpu_seconds_client": time.process_time() - cpu,
    }
    pde_order = np.asarray(tr.observables["order_parameter"])[:T]
    np.savez_compressed(out_dir / "data.npz", n_values=ns, times=times, levels=np.asarray(cfg.levels),
                        mmd_iid=mmd_iid, cross=cross, pde_order=pde_order,
                        pde_max_density=np.asarray(tr.observables["max_density"])[:T],
                        pde_tail=np.asarray(tr.observables["spectral_tail"])[:T],
                        **{k: v for k, v in arr.items()}, **secs,
                        **{f"{k}_mean": v[0] for k, v in means.items()}, **{f"{k}_ci": v[1] for k, v in means.items()})
    save_json(out_dir / "data.json", summary)
    head = fits[f"t={times[0]:g}"]
    return {"pde_t_stop": tr.t_final, "pde_t_stop_low": tr_low.t_final, "mmd_t0": head["mmd_sobolev"],
            "w2_t0": head.get("w2"), "crossing_pooled": pooled, "growth_rate_large_n": summary["growth_rate_large_n"],
            "sigma_max": max(sigma), "wall_seconds": summary["wall_seconds"]}


if __name__ == "__main__":
    from studies.continuum_scale.report import report

    main(run, report, Path(__file__).parent / "output", __doc__)
