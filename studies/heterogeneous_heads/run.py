"""Heterogeneous head strengths and the speed of clustering (paper Thm 22, MODEL.md section 2).

Softmax scalar heads ``M_h = V_h = lambda_h I`` (exp kernel), ``H = 2`` heads of strengths
``lambda_bar (1 + s)`` and ``lambda_bar (1 - s)`` (total ``Lambda = 2 lambda_bar`` fixed) against two
equal heads ``lambda_bar``, equiangular tokens starting orthonormal (``gamma0 = 0``), ``n = 32``,
``beta = 1``.  Computed:

* ``phi``, ``lambda_max`` (Lambert W) and the inflection point ``lambda_c`` (``mf.theory``);
* the early gain ``G = sum_h phi(lambda_h) - 2 phi(lambda_bar)`` (``theory.heterogeneity_gain``,
  i.e. the difference of ``dgamma/dt`` at ``gamma = 0``) on a (lambda_bar, s) grid;
* whole-run clustering times ``T(gamma = 0.5)`` and ``T(0.9)`` of the nonlinear softmax
  equiangular ODE, by Gauss-Legendre quadrature of ``int dgamma / F(gamma)``
  (``theory.equiangular_rate``) on the grid, checked against ``theory.clustering_time``;
* particle runs (``mf.solve_particles``, n = d = 32 orthonormal tokens) at a few grid points:
  ``gamma(t)`` against ``theory.solve_equiangular``, and the late rate (slope of
  ``log(1 - gamma)``) against ``2 Lambda`` from both the ODE and the particles.
* the two readings of Thm 22 (:func:`readings`): *universal* (every split with ``lambda_bar > lambda_c``
  helps; refuted by a grid point whose gain lies below minus its round-off bound) and *existential* (for every
  ``lambda_bar > lambda_c`` some split helps), and whether the counterexamples are numerical artefacts
  (:func:`counterexample_check`: round-off bound, particle vector field, short particle runs).

Run from the repo root: ``python -m studies.heterogeneous_heads.run [--quick]``.
Quick mode (coarse grid, one particle run): ~6 s CPU.  Full mode: measured 6 min wall on the shared
2-core machine under load average ~12 (much less when idle).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield.core.options import SaveAt, StepControl
from studies._common import fit_slope, main, save_json

N, BETA = 32, 1.0
TARGETS = (0.5, 0.9)
N_QUAD = 256                    # Gauss-Legendre nodes for T = int dgamma / F(gamma)
LATE_WINDOW = (1e-9, 1e-4)      # 1 - gamma range of the late-rate fit
# Round-off bound of the closed-form gain G = sum_h phi(lambda_h) - H phi(lambda_bar): each phi is computed to a
# few ulp and G sums 2H of them, so |G_float - G| <= ROUND_OFF * (sum_h phi(lambda_h) + H phi(lambda_bar)) with a
# generous factor; a grid point counts as a counterexample (resp. as helping) only when G < -bound (G > bound)
ROUND_OFF = 64 * np.finfo(float).eps
CHECK_RTOL, CHECK_ATOL = 1e-10, 1e-13   # short particle runs at the counterexamples (solver tolerances)
CHECK_GAMMA = 0.01                      # ... run to t1 = CHECK_GAMMA / (early rate of the equal heads)


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    n_lbar: int           # (lambda_bar, s) map: lambda_bar points on [0.25, 10] ...
    n_s: int              # ... and spread points on [0, 0.99]
    n_checks: int         # map points where the quadrature is checked against theory.clustering_time
    cases: tuple          # particle runs, one (lambda_bar, s) each ...
    particle_n_t: int     # ... recorded at this many times
    scan_n_lbar: int      # necessity scan: lambda_bar and s grid sizes
    scan_n_s: int


QUICK = Settings(n_lbar=14, n_s=12, n_checks=3, cases=((3.0, 0.5),), particle_n_t=200, scan_n_lbar=100, scan_n_s=500)
FULL = Settings(n_lbar=79, n_s=67, n_checks=12,
                cases=((1.0, 0.5), (3.0, 0.5), (6.0, 0.0), (6.0, 0.5), (6.0, 0.95), (8.0, 0.8)),
                particle_n_t=400, scan_n_lbar=400, scan_n_s=2000)


def split(lambda_bar, s):
    """Head strengths ``[lambda_bar (1 + s), lambda_bar (1 - s)]``, shape (2,)."""
    if not (lambda_bar > 0 and 0 <= s <= 1):
        raise ValueError(f"need lambda_bar > 0 and s in [0, 1]; received lambda_bar={lambda_bar!r}, s={s!r}")
    return np.array([lambda_bar * (1 + s), lambda_bar * (1 - s)])


def quad_time(lambdas, target, beta=BETA, n=N):
    """Clustering time ``int_0^target dgamma / F(gamma)`` (softmax, exp) by Gauss-Legendre."""
    x, w = np.polynomial.legendre.leggauss(N_QUAD)
    g = 0.5 * target * (x + 1.0)
    F = mf.theory.equiangular_rate(g, lambdas, beta, n, "exp", "softmax")
    return float(0.5 * target * np.sum(w / F))


def late_slope(t, eps, window=LATE_WINDOW):
    """Least-squares slope of ``log eps`` against ``t`` over ``window[0] <= eps <= window[1]``."""
    m = (eps >= window[0]) & (eps <= window[1])
    if m.sum() < 3:
        raise ValueError(f"fewer than 3 samples with eps in {window}; received {int(m.sum())}")
    return fit_slope(t[m], eps[m], log_y=True).slope


def _pair_eps(X):
    """Mean over pairs of ``1 - <x_i, x_j> = |x_i - x_j|^2 / 2`` (accurate when tokens are close)."""
    n = X.shape[0]
    diff = X[:, None, :] - X[None, :, :]
    D = np.einsum("ijk,ijk->ij", diff, diff)
    return float(D[~np.eye(n, dtype=bool)].mean() / 2)


def particle_run(lambdas, t_final, n_t=400, beta=BETA, n=N):
    """Softmax scalar heads on ``n`` orthonormal tokens in ``d = n``: ``gamma(t)`` and ``1 - gamma``.

    Returns
    -------
    dict with ``t`` (T,), ``gamma`` (T,) (mean pairwise inner product), ``eps`` (T,)
    (``1 - gamma`` from pair distances), ``gamma_spread`` (T,) (max - min pairwise inner
    product: 0 while the configuration stays equiangular).
    """
    system = mf.ParticleSystem(mf.scalar_heads(lambdas, n, beta, normalization="softmax"))
    X0 = mf.initial.orthonormal(n, n, seed=3)

    def observe(t, X):
        G = X @ X.T
        off = G[~np.eye(n, dtype=bool)]
        return {"gamma": off.mean(), "spread": off.max() - off.min(), "eps": _pair_eps(X)}

    t = np.linspace(0.0, t_final, n_t)
    traj = mf.solve_particles(system, X0, t_final, step=StepControl(rtol=1e-10, atol=1e-13),
                              save=SaveAt(t_eval=t, observe=observe))
    if not traj.success:
        raise RuntimeError(f"particle run failed: {traj.message}")
    ob = traj.observables
    return {"t": traj.t, "gamma": ob["gamma"], "eps": ob["eps"], "gamma_spread": ob["spread"],
            "max_retraction": traj.max_retraction}


def gain_bound(lambdas, beta=BETA, n=N):
    """Round-off bound of the closed-form gain of the split ``lambdas`` (shape (..., H)), see ``ROUND_OFF``."""
    lam = np.asarray(lambdas, dtype=float)
    H = lam.shape[-1]
    return ROUND_OFF * (mf.theory.phi(lam, beta, n).sum(axis=-1) + H * mf.theory.phi(lam.mean(axis=-1), beta, n))


def early_rate_particles(lambdas, beta=BETA, n=N):
    """``dgamma/dt`` at ``n`` orthonormal tokens from the library's particle vector field (no closed form, no
    solver): ``2 mean_{i != j} <v_i, x_j>``."""
    system = mf.ParticleSystem(mf.scalar_heads(list(lambdas), n, beta, normalization="softmax"))
    X = mf.initial.orthonormal(n, n, seed=3)
    M = system.velocity(X) @ X.T
    return float(2 * M[~np.eye(n, dtype=bool)].mean())


def short_run_gamma(lambdas, t1, beta=BETA, n=N):
    """``gamma(t1)`` of the particle system from orthonormal tokens (``CHECK_RTOL``, ``CHECK_ATOL``)."""
    system = mf.ParticleSystem(mf.scalar_heads(list(lambdas), n, beta, normalization="softmax"))
    X0 = mf.initial.orthonormal(n, n, seed=3)

    def observe(t, X):
        G = X @ X.T
        return {"gamma": G[~np.eye(n, dtype=bool)].mean()}

    traj = mf.solve_particles(system, X0, t1, step=StepControl(rtol=CHECK_RTOL, atol=CHECK_ATOL),
                              save=SaveAt(t_eval=np.array([0.0, t1]), observe=observe), progress=False)
    if not traj.success:
        raise RuntimeError(f"short particle run failed: {traj.message}")
    return float(traj.observables["gamma"][-1])


def counterexample_check(splits, beta=BETA, n=N):
    """Are the counterexamples (splits of ``lambda_bar > lambda_c`` with ``G < 0``) numerical artefacts?

    ``splits``: array (m, H) of the counterexample splits (their mean is lambda_bar).  Three checks:
    the loss ``-G`` against the round-off bound of the closed form (:func:`gain_bound`); the gain recomputed
    from the particle vector field at orthonormal tokens (:func:`early_rate_particles`, split minus equal
    heads) against the closed form; and, at the counterexample with the smallest and the largest relative
    loss, two short particle runs (split and equal heads, ``CHECK_RTOL``) to ``t1`` where the equal heads
    would reach ``gamma = CHECK_GAMMA`` at their early rate: the split must be behind, by much more than the solver tolerance
    (``CHECK_RTOL * gamma``).
    """
    splits = np.asarray(splits, dtype=float)
    if splits.ndim != 2 or splits.shape[0] == 0:
        return {"points": 0}
    H = splits.shape[1]
    lbar = splits.mean(axis=1)
    G = np.array([mf.theory.heterogeneity_gain(lam, beta, n) for lam in splits])
    base = H * mf.theory.phi(lbar, beta, n)
    rel = -G / base
    Gp = np.array([early_rate_particles(lam, beta, n) - early_rate_particles(np.full(H, lb), beta, n)
                   for lam, lb in zip(splits, lbar)])
    runs = []
    for k in sorted({int(np.argmin(rel)), int(np.argmax(rel))}):
        t1 = CHECK_GAMMA / base[k]
        gs, ge = short_run_gamma(splits[k], t1, beta, n), short_run_gamma(np.full(H, lbar[k]), t1, beta, n)
        runs.append({"lambdas": splits[k], "lambda_bar": lbar[k], "relative_loss": rel[k], "t1": t1,
                     "gamma_split": gs, "gamma_equal": ge, "split_behind": bool(gs < ge),
                     "lag_over_solver_tol": float((ge - gs) / (CHECK_RTOL * max(ge, gs)))})
    return {"points": int(splits.shape[0]), "min_relative_loss": float(rel.min()), "max_relative_loss": float(rel.max()),
            "min_loss_over_roundoff_bound": float((-G / gain_bound(splits, beta, n)).min()),
            "particle_field_all_negative": bool(np.all(Gp < 0)),
            "particle_field_max_rel_diff": float(np.max(np.abs(Gp - G) / base)),
            "short_runs": runs, "solver_rtol": CHECK_RTOL, "solver_atol": CHECK_ATOL}


def readings(lbar, s, gain, splits, lam_c, beta=BETA, n=N):
    """The two readings of Thm 22 on a grid of splits (``gain``, ``splits``: (lbar, s[, H]); ``s[0] = 0``).

    universal: every split with ``lambda_bar > lambda_c`` (``s > 0``) helps -- refuted iff some grid point with
    ``lambda_bar > lambda_c`` has ``G < -bound`` (a counterexample beyond round-off); existential: for every
    ``lambda_bar > lambda_c`` some split helps -- holds on the grid iff every such ``lambda_bar`` has a point
    with ``G > bound``.  Returns the counts and the counterexample splits (m, H).
    """
    pos = s > 0
    g, lam = gain[:, pos], splits[:, pos]
    bound = gain_bound(lam, beta, n)
    region = np.broadcast_to((lbar > lam_c)[:, None], g.shape)
    counter = region & (g < -bound)
    helps_row = (g > bound).any(axis=1)
    above = lbar > lam_c
    return {"region_points": int(region.sum()), "counterexamples": int(counter.sum()),
            "lose_or_tie": int((region & ~(g > bound)).sum()),
            "lambda_bar_above_lambda_c": int(above.sum()),
            "lambda_bar_with_helping_split": int((helps_row & above).sum()),
            "universal_refuted": bool(counter.any()),
            "existential_holds": bool(above.any() and helps_row[above].all())}, lam[counter]


def necessity_scan(ns, beta=BETA, n_lbar=400, n_s=2000):
    """For each ``n``: the smallest ``lambda_bar`` (fine grid on ``[0.3, 1.5] lambda_c``) at which some
    spread ``s in (0, 1]`` gives a positive early gain, next to ``lambda_c``.

    Returns
    -------
    ndarray, shape (len(ns), 2): columns ``lambda_c``, smallest helping ``lambda_bar`` (nan if none).
    """
    sg = np.linspace(0.0, 1.0, n_s + 1)[1:]
    out = []
    for n in ns:
        lc = mf.theory.phi_inflection(beta, int(n))
        lb = np.linspace(0.3, 1.5, n_lbar) * lc
        G = (mf.theory.phi(lb[:, None] * (1 + sg), beta, int(n)) + mf.theory.phi(lb[:, None] * (1 - sg), beta, int(n))
             - 2 * mf.theory.phi(lb, beta, int(n))[:, None])
        helps = (G > 0).any(axis=1)
        out.append([lc, lb[helps].min() if helps.any() else np.nan])
    return np.array(out)


def _first_time(t, g, target):
    k = int(np.argmax(g >= target))
    return float(np.interp(target, g[k - 1:k + 1], t[k - 1:k + 1]))


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    cfg = QUICK if quick else FULL
    lam_max, lam_c = mf.theory.lambda_max(BETA, N), mf.theory.phi_inflection(BETA, N)
    lam_line = np.linspace(0.0, 14.0, 701)
    lbar = np.linspace(0.25, 10.0, cfg.n_lbar)
    s = np.linspace(0.0, 0.99, cfg.n_s)
    gain = np.array([[mf.theory.heterogeneity_gain(split(lb, x), BETA, N) for x in s] for lb in lbar])
    T = np.array([[[quad_time(split(lb, x), tg) for x in s] for lb in lbar] for tg in TARGETS])
    # quadrature against theory.clustering_time (ODE with terminal event) at a few points
    rng = np.random.default_rng(0)
    pts = [(int(i), int(j)) for i, j in zip(rng.integers(0, lbar.size, cfg.n_checks),
                                            rng.integers(0, s.size, cfg.n_checks))]
    quad_check = max(abs(T[k, i, j] / mf.theory.clustering_time(0.0, tg, split(lbar[i], s[j]), BETA, N) - 1)
                     for k, tg in enumerate(TARGETS) for i, j in pts)
    # particle runs: gamma(t) against the ODE, clustering times, late rate
    runs = []
    for lb, x in cfg.cases:
        lam = split(lb, x)
        t_final = quad_time(lam, 0.9) + np.log(0.1 / LATE_WINDOW[0]) / (2 * lam.sum()) + 0.5
        pr = particle_run(lam, t_final, n_t=cfg.particle_n_t)
        ode = mf.theory.solve_equiangular(0.0, lam, BETA, N, pr["t"])
        runs.append({"lambda_bar": lb, "s": x, "Lambda": lam.sum(), "t": pr["t"], "gamma": pr["gamma"],
                     "gamma_ode": ode, "max_abs_gamma_diff": float(np.abs(pr["gamma"] - ode).max()),
                     "max_spread": float(pr["gamma_spread"].max()),
                     "T_particles": [_first_time(pr["t"], pr["gamma"], tg) for tg in TARGETS],
                     "T_theory": [mf.theory.clustering_time(0.0, tg, lam, BETA, N) for tg in TARGETS],
                     "late_slope_particles": late_slope(pr["t"], pr["eps"]),
                     "late_slope_ode": late_slope(pr["t"], 1.0 - ode),
                     "late_rate_theory": mf.theory.late_rate(lam), "eps": pr["eps"],
                     "max_retraction": pr["max_retraction"]})
    # mean normalization: early rate (2/n) sum lambda_h is additive -> no heterogeneity effect
    mean_gain = max(abs(float(mf.theory.equiangular_rate(0.0, split(lb, x), BETA, N, "exp", "mean")
                              - mf.theory.equiangular_rate(0.0, split(lb, 0.0), BETA, N, "exp", "mean")))
                    for lb in lbar[::7] for x in s[::7])
    scan_ns = np.array([4, 8, 32, 128, 1024, 10**5])
    scan = necessity_scan(scan_ns, n_lbar=cfg.scan_n_lbar, n_s=cfg.scan_n_s)
    np.savez_compressed(out_dir / "data.npz", scan_ns=scan_ns, scan=scan, lbar=lbar, s=s, gain=gain, T=T, targets=np.array(TARGETS),
                        lam_line=lam_line, phi=mf.theory.phi(lam_line, BETA, N),
                        phi2=mf.theory.phi_second_derivative(lam_line, BETA, N),
                        **{f"run{k}_{key}": np.asarray(r[key]) for k, r in enumerate(runs)
                           for key in ("t", "gamma", "gamma_ode", "eps")})
    summary = _summaries(lbar, s, gain, T, lam_c)
    splits = np.array([[split(lb, x) for x in s] for lb in lbar])              # (lbar, s, 2)
    read, counter = readings(lbar, s, gain, splits, lam_c)
    read["check"] = counterexample_check(counter)
    meta = {"n": N, "beta": BETA, "H": 2, "targets": TARGETS, "lambda_max": lam_max, "lambda_c": lam_c,
            "phi_max": float(mf.theory.phi(lam_max, BETA, N)), "quick": quick, "n_quad": N_QUAD,
            "late_window": LATE_WINDOW, "quad_vs_clustering_time_max_rel": quad_check,
            "mean_normalization_max_early_gain": mean_gain,
            "runs": [{k: v for k, v in r.items() if k not in ("t", "gamma", "gamma_ode", "eps")} for r in runs],
            "readings": read, "round_off": ROUND_OFF, **summary}
    save_json(out_dir / "data.json", meta)
    return {k: meta[k] for k in ("lambda_max", "lambda_c", "paper_condition_fails_fraction",
                                 "gain_positive_below_lambda_c_fraction", "jensen_region_all_positive",
                                 "min_lambda_bar_with_early_gain", "quad_vs_clustering_time_max_rel")}


def _summaries(lbar, s, gain, T, lam_c):
    """Where heterogeneity helps, against the paper's condition and the Jensen-sufficient one."""
    pos = s > 0
    helps = gain[:, pos] > 0
    paper = np.broadcast_to((lbar > lam_c)[:, None], helps.shape)
    jensen = lbar[:, None] * (1 - s[None, pos]) >= lam_c
    first_fail = [float(s[pos][np.argmax(~row)]) if (~row).any() else None
                  for row, lb in zip(helps, lbar) if lb > lam_c]
    out = {"paper_condition_fails_fraction": float((paper & ~helps).sum() / max(paper.sum(), 1)),
           "gain_positive_below_lambda_c_fraction": float((helps & ~paper).sum() / max(helps.sum(), 1)),
           "jensen_region_all_positive": bool(np.all(helps[jensen])),
           "jensen_region_points": int(jensen.sum()),
           "min_lambda_bar_with_early_gain": float(lbar[helps.any(axis=1)].min()) if helps.any() else None,
           "small_s_sign_matches_convexity": bool(np.all((gain[:, 1] > 0) == (lbar > lam_c))),
           "first_failing_s_above_lambda_c": first_fail}
    for k, tg in enumerate(TARGETS):
        faster = T[k][:, pos] < T[k][:, :1]
        out[f"T{tg}_split_faster_fraction"] = float(faster.mean())
        out[f"T{tg}_agree_with_early_gain_fraction"] = float((faster == helps).mean())
        out[f"T{tg}_faster_without_early_gain"] = int((faster & ~helps).sum())
        out[f"T{tg}_early_gain_but_slower"] = int((helps & ~faster).sum())
        out[f"T{tg}_min_lambda_bar_faster"] = float(lbar[faster.any(axis=1)].min()) if faster.any() else None
        out[f"T{tg}_max_speedup"] = float((T[k][:, :1] / T[k][:, pos]).max())
        out[f"T{tg}_max_slowdown"] = float((T[k][:, pos] / T[k][:, :1]).max())
    return out


if __name__ == "__main__":
    from studies.heterogeneous_heads.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
