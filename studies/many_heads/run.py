"""Beyond H = 2: heterogeneous heads (Thm 22) and clustering times (Thm 25) with H = 3, 4; Thm 19 with
unequal head strengths alpha_h (issue 15, item 9; MODEL.md section 2).

Scalar heads ``M_h = V_h = lambda_h I`` (exp kernel unless stated) throughout.  Three parts:

**A. Thm 22 (super-additivity), H = 2, 3, 4** (softmax, n = 32, beta = 1, orthogonal start).  Splits of a
fixed total ``Lambda = H lambda_bar``, all with smallest head ``lambda_bar (1 - s)``:
``linear`` (``lambda_bar (1 + s t_h)``, ``t_h`` equispaced on [-1, 1]), ``one_strong`` (one head
``lambda_bar (1 + (H-1) s)``, the others ``lambda_bar (1 - s)``) and ``one_weak`` (one head
``lambda_bar (1 - s)``, the others ``lambda_bar (1 + s/(H-1))``); for H = 2 the three coincide.
Early gain ``G = sum_h phi(lambda_h) - H phi(lambda_bar)`` (``theory.heterogeneity_gain``, any H) on
a (lambda_bar, s) grid, whole-run times T(0.5), T(0.9) of the nonlinear equiangular ODE (Gauss-Legendre
quadrature of ``dgamma / F``), and the *best* split over the whole simplex ``{lambda_h >= 0, sum = Lambda}``:
at a maximum of ``sum phi`` every positive head has the same ``phi'``, which ``phi`` (concave below
``lambda_c``, convex above) takes at most twice, and at most one head sits in the convex part; so the
maximum is over ``k`` heads at 0, ``H - k - 1`` heads at ``a`` and one at ``Lambda - (H-k-1) a``: a
one-parameter scan (:func:`best_split`), checked against random Dirichlet splits.  From it the smallest
``lambda_bar`` at which *some* split helps, against ``lambda_c`` (for H = 2 they coincide).
Particle runs (n = d = 32, orthonormal start): gamma(t) against the ODE, late rate against 2 Lambda.
The two readings of Thm 22 per family (``heterogeneous_heads.run.readings``: universal -- every split with
``lambda_bar > lambda_c`` helps, refuted by any grid point with ``G`` below minus its round-off bound;
existential -- for every such ``lambda_bar`` some split helps, decided on the best split of the simplex), and
the counterexamples checked against round-off, the particle vector field and short particle runs
(``heterogeneous_heads.run.counterexample_check``).

**B. Thm 25 (ReLU versus softmax clustering times), H = 1, 3, 4**, exp-softmax against ReLU-mean, head
sets ``[1]``, ``[0.5, 1, 1.5]``, ``[0.25, 0.75, 1.25, 1.75]`` (mean strength 1) and equal heads.
Linearized, first-order and nonlinear equiangular times on n, d = 16..4096; random tokens in the regime
``sqrt(d) > n`` where ``log d`` can show (n = 8, 16, 32; d = 256..16384; 10 seeds; run in the n-dim span
of the tokens, exact for scalar heads), slopes of T against ln d with 95 % CIs.  Identity used and
checked: positive ReLU-mean heads act as one head of strength ``sqrt(sum lambda_h^2)`` (same
trajectory, time divided by ``sum lambda_h^2``).

**C. Thm 19 with unequal alpha_h**, H = 2, 3, 4, ``alpha_h = 1 + s t_h`` (``t_h`` as above), orthogonal
tokens, shared span: the derived threshold ``theory.radial_dominance_threshold`` (both readings of
Condition 8, both normalizations) against the paper's formula with alpha replaced by the mean, the
largest or the smallest strength; the threshold found independently on the particle system
(``diagnostics.radial_dominance``, beta grid + brentq) on 10 random rotations of the orthonormal
tokens; the exact per-head rates ``dE_h/dt`` (``ParticleSystem.energy_rates``) at t = 0 and along the
equiangular flow; and, outside the hypotheses, block heads with unequal strengths in general position
(10 random token bases).

Run from the repo root: ``nice -n 5 python -m studies.many_heads.run [--quick]``.
Quick mode: ~10 s CPU.  Full mode: see ``data.json['elapsed_s']`` (measured 4-6 min wall, 240-350 s, on the shared
2-core machine; 1072 s under a load average of ~15).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize, stats

import meanfield as mf
from meanfield.core.options import SaveAt, StepControl
from studies._common import fit_slope, main, save_json

# H = 2's particle run, late-rate fit and crossing time, shared with the study of Thm 22 at H = 2
from studies.heterogeneous_heads.run import (
    LATE_WINDOW,
    _first_time,
    counterexample_check,
    late_slope,
    particle_run,
    readings,
)

N, BETA = 32, 1.0
HS = (2, 3, 4)
FAMILIES = ("linear", "one_strong", "one_weak")
TARGETS = (0.5, 0.9)
N_QUAD = 256
HEADSETS = {"1 head": (1.0,), "H=3 unequal": (0.5, 1.0, 1.5), "H=4 unequal": (0.25, 0.75, 1.25, 1.75),
            "H=3 equal": (1.0, 1.0, 1.0), "H=4 equal": (1.0, 1.0, 1.0, 1.0)}
COMBOS = (("exp", "softmax"), ("relu", "mean"))
CLUSTER_TARGET = 0.5
THEORY_N = np.array([16, 64, 256, 1024, 4096])
THEORY_D = np.array([16, 64, 256, 1024, 4096])
REL_TOL = 1e-12


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    n_lbar: int                # part A: lambda_bar grid on [0.25, 10] ...
    n_s: int                   # ... and spread grid on [0, 0.99]
    necessity_ns: tuple        # n values of the smallest-helping-lambda_bar scan
    n_scan_a: int              # points of the one-parameter best-split scan
    n_dirichlet: int           # random splits per (H, lambda_bar) checked against the best split
    particle_cases: tuple      # (H, family, lambda_bar, s)
    hd_n: tuple                # part B: token counts ...
    hd_d: tuple                # ... dimensions ...
    seeds: tuple               # ... seeds (random tokens)
    hd_headsets: tuple         # keys of HEADSETS run on random tokens
    c_ns: tuple                # part C: token counts
    c_n_s: int                 # spread points on [0, 0.9]
    c_check: tuple             # (H, n, s) checked on the particle system ...
    c_seeds: tuple             # ... on these random rotations
    c_beta_grid: tuple         # beta grid of the particle threshold scans and per-head rate scans
    theory_n: tuple = tuple(THEORY_N)   # part B: equiangular-ODE grids
    theory_d: tuple = tuple(THEORY_D)


QUICK = Settings(n_lbar=8, n_s=6, necessity_ns=(32,), n_scan_a=401, n_dirichlet=2000,
                 particle_cases=((3, "linear", 6.0, 0.5),), hd_n=(8,), hd_d=(256, 4096), seeds=(0, 1),
                 hd_headsets=("1 head", "H=3 unequal"), c_ns=(16, 64), c_n_s=4, c_check=((3, 64, 0.3),),
                 c_seeds=(0, 1), c_beta_grid=tuple(np.linspace(1e-6, 6.0, 13)), theory_n=(16, 256), theory_d=(16, 1024))
FULL = Settings(n_lbar=79, n_s=67, necessity_ns=(4, 8, 32, 128, 1024, 100000), n_scan_a=4001, n_dirichlet=200000,
                particle_cases=((3, "linear", 6.0, 0.5), (4, "linear", 6.0, 0.5), (3, "one_strong", 4.0, 0.5),
                                (4, "one_weak", 8.0, 0.8), (3, "linear", 1.0, 0.5)),
                hd_n=(8, 16, 32), hd_d=(256, 1024, 4096, 16384), seeds=tuple(range(10)),
                hd_headsets=("1 head", "H=3 unequal", "H=4 unequal"), c_ns=(8, 16, 32, 64, 128), c_n_s=46,
                c_check=((2, 16, 0.3), (3, 64, 0.3), (3, 128, 0.6), (4, 128, 0.3)), c_seeds=tuple(range(10)),
                c_beta_grid=tuple(np.linspace(1e-6, 8.0, 25)))


# ------------------------------------------------------------------------------ part A (Thm 22)
def split(H, family, lambda_bar, s):
    """Head strengths of a split of ``Lambda = H lambda_bar`` with smallest head ``lambda_bar (1 - s)``.

    Returns
    -------
    ndarray, shape (H,)
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}; received {family!r}")
    if not (isinstance(H, (int, np.integer)) and H >= 2):
        raise ValueError(f"H must be an integer >= 2; received {H!r}")
    if not (lambda_bar > 0 and 0 <= s <= 1):
        raise ValueError(f"need lambda_bar > 0 and s in [0, 1]; received lambda_bar={lambda_bar!r}, s={s!r}")
    if family == "linear":
        return lambda_bar * (1 + s * np.linspace(-1.0, 1.0, H))
    if family == "one_strong":
        return lambda_bar * np.r_[1 + (H - 1) * s, np.full(H - 1, 1 - s)]
    return lambda_bar * np.r_[1 - s, np.full(H - 1, 1 + s / (H - 1))]


_GL = np.polynomial.legendre.leggauss(N_QUAD)


def quad_time(lambdas, target, beta=BETA, n=N):
    """Clustering time ``int_0^target dgamma / F(gamma)`` (softmax, exp) by Gauss-Legendre quadrature."""
    x, w = _GL
    g = 0.5 * target * (x + 1.0)
    F = mf.theory.equiangular_rate(g, lambdas, beta, n, "exp", "softmax")
    return float(0.5 * target * np.sum(w / F))


def _phi(lam, beta, n):
    return mf.theory.phi(lam, beta, n)


def best_split(H, lambda_bar, beta=BETA, n=N, n_scan=4001):
    """Largest early gain over all splits of ``Lambda = H lambda_bar`` into ``H`` heads ``>= 0``.

    One-parameter scan (module docstring): ``k`` heads at 0, ``H - k - 1`` at ``a``, one at
    ``Lambda - (H-k-1) a``, for ``k = 0..H-1`` and ``a`` on ``n_scan`` points, then refined by a
    bounded scalar maximization around the best grid point.

    Returns
    -------
    gain : float
        ``max sum phi(lambda_h) - H phi(lambda_bar)`` (>= 0: the equal split is a candidate).
    lambdas : ndarray, shape (H,)
        The maximizing split (descending).
    """
    Lam = H * lambda_bar
    base = H * float(_phi(lambda_bar, beta, n))
    best = (-np.inf, None)
    for k in range(H):
        p = H - k - 1
        if p == 0:
            lam = np.r_[np.zeros(k), Lam]
            val = float(_phi(lam, beta, n).sum())
            best = max(best, (val, tuple(lam)), key=lambda b: b[0])
            continue
        a = np.linspace(0.0, Lam / p, n_scan)
        vals = p * _phi(a, beta, n) + _phi(Lam - p * a, beta, n)
        j = int(np.argmax(vals))
        lo, hi = a[max(j - 1, 0)], a[min(j + 1, n_scan - 1)]
        res = optimize.minimize_scalar(lambda x: -(p * _phi(x, beta, n) + _phi(Lam - p * x, beta, n)),
                                       bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
        x, v = (res.x, -res.fun) if -res.fun >= vals[j] else (a[j], vals[j])
        lam = np.r_[np.zeros(k), np.full(p, x), Lam - p * x]
        best = max(best, (float(v), tuple(lam)), key=lambda b: b[0])
    return best[0] - base, np.sort(np.array(best[1]))[::-1]


def dirichlet_check(H, lambda_bar, n_samples, seed, beta=BETA, n=N):
    """Largest gain of ``n_samples`` uniformly random splits (Dirichlet(1)) of ``Lambda = H lambda_bar``."""
    rng = np.random.default_rng(seed)
    lam = H * lambda_bar * rng.dirichlet(np.ones(H), size=n_samples)
    return float((_phi(lam, beta, n).sum(axis=1) - H * _phi(lambda_bar, beta, n)).max())


def smallest_helping_lambda_bar(H, n, beta=BETA, n_scan=4001):
    """Smallest ``lambda_bar`` at which some split has a positive early gain (bisection on [lambda_max, lambda_c]).

    Below ``lambda_max`` no split helps (``phi`` concave and increasing there: a head moved off the mean
    loses more than the others gain), at ``lambda_c`` small spreads already help.  ``gain > tol`` with
    ``tol = 1e-12 phi(lambda_max)`` (round-off of the equal split) decides.
    """
    lam_max, lam_c = mf.theory.lambda_max(beta, n), mf.theory.phi_inflection(beta, n)
    tol = 1e-12 * float(_phi(lam_max, beta, n))
    helps = lambda lb: best_split(H, lb, beta, n, n_scan)[0] > tol  # noqa: E731
    lo, hi = lam_max, lam_c * (1 + 1e-6)
    if helps(lo) or not helps(hi):
        raise RuntimeError(f"smallest_helping_lambda_bar: no sign change on [lambda_max, lambda_c] (H={H}, n={n})")
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if helps(mid) else (mid, hi)
        if hi - lo < 1e-10 * hi:
            break
    return hi


def part_a(cfg):
    lbar = np.linspace(0.25, 10.0, cfg.n_lbar)
    s = np.linspace(0.0, 0.99, cfg.n_s)
    lam_max, lam_c = mf.theory.lambda_max(BETA, N), mf.theory.phi_inflection(BETA, N)
    gain = np.array([[[[mf.theory.heterogeneity_gain(split(H, f, lb, x), BETA, N) for x in s] for lb in lbar]
                      for f in FAMILIES] for H in HS])                       # (H, family, lbar, s)
    T = np.array([[[[[quad_time(split(H, f, lb, x), tg) for x in s] for lb in lbar] for tg in TARGETS]
                   for f in FAMILIES] for H in HS])                          # (H, family, target, lbar, s)
    qc = max(abs(T[h, 0, k, i, j] / mf.theory.clustering_time(0.0, tg, split(H, "linear", lbar[i], s[j]), BETA, N) - 1)
             for h, H in enumerate(HS) for k, tg in enumerate(TARGETS)
             for i, j in ((len(lbar) // 3, len(s) // 2), (2 * len(lbar) // 3, len(s) - 1)))
    best = np.array([[best_split(H, lb, n_scan=cfg.n_scan_a)[0] for lb in lbar] for H in HS])     # (H, lbar)
    # random splits never beat the scan (to round-off) and come close to it
    dir_excess, dir_shortfall = [], []            # relative to phi(lambda_max), the largest one-head rate
    phi_max = float(mf.theory.phi(lam_max, BETA, N))
    for h, H in enumerate(HS):
        for i in (len(lbar) // 3, len(lbar) // 2, 2 * len(lbar) // 3):
            d = dirichlet_check(H, lbar[i], cfg.n_dirichlet, seed=100 * H + i)
            dir_excess.append((d - best[h, i]) / phi_max)
            dir_shortfall.append((best[h, i] - d) / phi_max)
    nec = np.array([[smallest_helping_lambda_bar(H, int(n), n_scan=cfg.n_scan_a) for n in cfg.necessity_ns]
                    for H in HS])
    nec_ref = np.array([[mf.theory.lambda_max(BETA, int(n)), mf.theory.phi_inflection(BETA, int(n))]
                        for n in cfg.necessity_ns])
    lb_show = 0.97 * lam_c                            # below lambda_c: no split of H = 2 helps, some of H = 3, 4 do
    best_at = {H: best_split(H, lb_show, n_scan=cfg.n_scan_a) for H in HS}
    runs = []
    for H, fam, lb, x in cfg.particle_cases:
        lam = split(H, fam, lb, x)
        t_final = quad_time(lam, 0.9) + np.log(0.1 / LATE_WINDOW[0]) / (2 * lam.sum()) + 0.5
        pr = particle_run(lam, t_final)
        ode = mf.theory.solve_equiangular(0.0, lam, BETA, N, pr["t"])
        runs.append({"H": H, "family": fam, "lambda_bar": lb, "s": x, "lambdas": lam, "Lambda": lam.sum(),
                     "t": pr["t"], "gamma": pr["gamma"], "gamma_ode": ode, "eps": pr["eps"],
                     "max_abs_gamma_diff": float(np.abs(pr["gamma"] - ode).max()),
                     "max_spread": float(pr["gamma_spread"].max()),
                     "T_particles": [_first_time(pr["t"], pr["gamma"], tg) for tg in TARGETS],
                     "T_theory": [mf.theory.clustering_time(0.0, tg, lam, BETA, N) for tg in TARGETS],
                     "late_slope_particles": late_slope(pr["t"], pr["eps"]),
                     "late_slope_ode": late_slope(pr["t"], 1.0 - ode), "late_rate_theory": mf.theory.late_rate(lam)})
    arrays = {"A_lbar": lbar, "A_s": s, "A_gain": gain, "A_T": T, "A_best": best, "A_nec": nec, "A_nec_ref": nec_ref,
              "A_nec_ns": np.array(cfg.necessity_ns),
              **{f"A_run{k}_{key}": np.asarray(r[key]) for k, r in enumerate(runs) for key in ("t", "gamma", "gamma_ode", "eps")}}
    summary = _summaries_a(lbar, s, gain, T, best, lam_c)
    # the two readings of Thm 22 per (H, family), and whether the counterexamples are numerical artefacts
    for h, H in enumerate(HS):
        for f, fam in enumerate(FAMILIES):
            if H == 2 and fam != "linear":
                continue                                  # for H = 2 the three families coincide
            splits = np.array([[split(H, fam, lb, x) for x in s] for lb in lbar])     # (lbar, s, H)
            read, counter = readings(lbar, s, gain[h, f], splits, lam_c)
            read["check"] = counterexample_check(counter)
            summary["A"][f"H{H}/{fam}"]["readings"] = read
        # existential reading over all splits of the total (the best split of the simplex), per lambda_bar > lambda_c
        # G* counts as a help above 1e-12 phi_max: the round-off bound of a gain (heterogeneous_heads.run.ROUND_OFF =
        # 64 eps times sum_h phi(lambda_h) + H phi(lambda_bar) <= 2 H phi_max) is at most 1.1e-13 phi_max for H = 4
        tol = 1e-12 * mf.theory.phi(lam_max, BETA, N)
        above = lbar > lam_c
        summary["A"][f"H{H}/best_split_existential"] = {
            "lambda_bar_above_lambda_c": int(above.sum()), "lambda_bar_with_helping_split": int((best[h][above] > tol).sum()),
            "holds": bool(above.any() and np.all(best[h][above] > tol)), "min_best_gain_above": float(best[h][above].min())}
    meta = {"lambda_max": lam_max, "lambda_c": lam_c, "quad_vs_clustering_time_max_rel": qc,
            "dirichlet_max_excess_over_scan": float(max(dir_excess)),
            "dirichlet_max_relative_shortfall": float(max(dir_shortfall)),
            "smallest_helping_lambda_bar": {str(H): dict(zip(map(str, cfg.necessity_ns), nec[h])) for h, H in enumerate(HS)},
            "lambda_max_c_by_n": {str(n): list(r) for n, r in zip(cfg.necessity_ns, nec_ref)},
            "necessity_ns": cfg.necessity_ns,
            "best_split_below_lambda_c": {str(H): {"lambda_bar": lb_show, "gain": g, "lambdas": lam}
                                  for H, (g, lam) in best_at.items()},
            "runs": [{k: v for k, v in r.items() if k not in ("t", "gamma", "gamma_ode", "eps")} for r in runs],
            **summary}
    return arrays, meta


def _summaries_a(lbar, s, gain, T, best, lam_c):
    pos = s > 0
    out = {}
    for h, H in enumerate(HS):
        for f, fam in enumerate(FAMILIES):
            g = gain[h, f][:, pos]
            helps = g > 0
            paper = np.broadcast_to((lbar > lam_c)[:, None], helps.shape)
            jensen = lbar[:, None] * (1 - s[None, pos]) >= lam_c
            key = f"H{H}/{fam}"
            r = {"paper_condition_fails_fraction": float((paper & ~helps).sum() / max(paper.sum(), 1)),
                 "helping_below_lambda_c_fraction": float((helps & ~paper).sum() / max(helps.sum(), 1)),
                 "jensen_region_all_positive": bool(np.all(helps[jensen])), "jensen_points": int(jensen.sum())}
            for k, tg in enumerate(TARGETS):
                faster = T[h, f, k][:, pos] < T[h, f, k][:, :1]
                r[f"T{tg}_split_faster_fraction"] = float(faster.mean())
                r[f"T{tg}_faster_without_early_gain"] = int((faster & ~helps).sum())
                r[f"T{tg}_early_gain_but_slower"] = int((helps & ~faster).sum())
                r[f"T{tg}_max_speedup"] = float((T[h, f, k][:, :1] / T[h, f, k][:, pos]).max())
            out[key] = r
        tol = 1e-12 * mf.theory.phi(mf.theory.lambda_max(BETA, N), BETA, N)
        hb = best[h] > tol
        out[f"H{H}/best_split_min_lambda_bar_grid"] = float(lbar[hb].min()) if hb.any() else None
    return {"A": out}


# ------------------------------------------------------------------------------ part B (Thm 25)
def first_order_time(lambdas, n, gamma0=0.0, target=CLUSTER_TARGET, beta=BETA):
    """Softmax equiangular ODE linearized to first order at 0, ``F ~ a + b gamma``; time to ``target``.

    ``a = F(0) = 2 B(0)``, ``b = F'(0) = 2 (B'(0) + (n - 2) B(0))`` with ``B = sum_h lambda_h / (e^{beta lambda_h (1 -
    gamma)} + n - 1)``, ``B'(0) = sum_h beta lambda_h^2 e^{beta lambda_h} / (e^{beta lambda_h} + n - 1)^2``.
    """
    lam = np.asarray(lambdas, dtype=float)
    e = np.exp(beta * lam)
    B0 = np.sum(lam / (e + n - 1))
    dB0 = np.sum(beta * lam ** 2 * e / (e + n - 1) ** 2)
    a, b = 2 * B0, 2 * (dB0 + (n - 2) * B0)
    return float(np.log((a + b * target) / (a + b * gamma0)) / b)


def theory_times(lambdas, ns=THEORY_N, ds=THEORY_D):
    """Equiangular times to ``CLUSTER_TARGET``: shape (combo, level, n, d); level 0 linearized (zeroth order),
    1 nonlinear, 2 first-order (softmax only; nan for ReLU).  ReLU starts at ``1/sqrt(d)``, softmax at 0."""
    out = np.full((len(COMBOS), 3, len(ns), len(ds)), np.nan)
    for c, (kernel, norm) in enumerate(COMBOS):
        for i, n in enumerate(ns):
            for j, d in enumerate(ds):
                g0 = 0.0 if kernel == "exp" else 1.0 / np.sqrt(d)
                args = (g0, CLUSTER_TARGET, list(lambdas), BETA, int(n), kernel, norm)
                out[c, 0, i, j] = mf.theory.linearized_clustering_time(*args)
                out[c, 1, i, j] = mf.theory.clustering_time(*args)
                if kernel == "exp":
                    out[c, 2, i, j] = first_order_time(lambdas, int(n))
    return out


def _mean_inner(X):
    n = X.shape[0]
    s = X.sum(axis=0)
    return float((s @ s - n) / (n * (n - 1)))


def span_time(lambdas, kernel, normalization, n, d, seed, horizon):
    """Time for the mean pairwise inner product of ``n`` random tokens in ``R^d`` to reach ``CLUSTER_TARGET``.

    Scalar heads keep the tokens in the span of ``X0``; the run is done in coordinates of an orthonormal
    basis of that span (``X0^T = Q R``, tokens ``R^T``), exact and independent of ``d`` in cost.  ``inf``
    if not reached by ``horizon``.

    Returns
    -------
    (T, gamma0) : floats
    """
    X0 = mf.initial.uniform_sphere(n, d, seed)
    _, R = np.linalg.qr(X0.T)
    Y0 = R.T / np.linalg.norm(R.T, axis=1, keepdims=True)
    system = mf.ParticleSystem(mf.scalar_heads(list(lambdas), n, beta=BETA, kernel=kernel, normalization=normalization))

    def observe(t, X):
        return {"m": _mean_inner(X)}

    def event(t, X):
        return "target reached" if _mean_inner(X) >= CLUSTER_TARGET else None

    t_eval = np.concatenate([[0.0], np.geomspace(1e-2, horizon, 300)])
    tr = mf.solve_particles(system, Y0, horizon, step=StepControl(rtol=1e-7, atol=1e-9),
                            save=SaveAt(t_eval=t_eval, observe=observe, states=False), event=event, progress=False)
    if tr.status < 0:
        raise RuntimeError(f"particle run failed ({kernel}-{normalization}, n={n}, d={d}): {tr.message}")
    m = tr.observables["m"]
    T = np.inf
    if tr.status == 1:
        T = float(tr.t[-1]) if len(m) < 2 else float(np.interp(CLUSTER_TARGET, m[-2:], tr.t[-2:]))
    return T, float(m[0])


def mean_ci(x):
    """Mean of the finite entries of ``x`` and the half-width of its 95 % t-interval (nan below 2 values)."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return (float(x.mean()) if x.size else np.nan), np.nan
    return float(x.mean()), float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))


def part_b(cfg):
    names = list(HEADSETS)
    tn, td = np.array(cfg.theory_n), np.array(cfg.theory_d)
    theory = np.array([theory_times(HEADSETS[k], tn, td) for k in names])   # (set, combo, level, n, d)
    sq = {k: float(np.sum(np.square(HEADSETS[k]))) for k in names}
    # identities: ReLU-mean times * sum lambda^2 = one-head time; softmax equal heads: times * H = one-head time
    one = names.index("1 head")
    relu_id = max(float(np.nanmax(np.abs(theory[s, 1, :2] * sq[k] / theory[one, 1, :2] - 1)))
                  for s, k in enumerate(names))
    soft_eq = max(float(np.nanmax(np.abs(theory[names.index(k), 0, :2] * len(HEADSETS[k]) / theory[one, 0, :2] - 1)))
                  for k in ("H=3 equal", "H=4 equal"))
    theory_fits = {}
    for s, k in enumerate(names):
        for c, (kernel, norm) in enumerate(COMBOS):
            key = f"{k}/{kernel}-{norm}"
            j = len(td) - 1
            theory_fits[key] = {
                "loglog_slope_vs_n_linearized": fit_slope(tn, theory[s, c, 0, :, j], log_x=True, log_y=True).slope,
                "loglog_slope_vs_n_nonlinear": fit_slope(tn, theory[s, c, 1, :, j], log_x=True, log_y=True).slope,
                "slope_T_over_n_vs_lnd_linearized": fit_slope(np.log(td), theory[s, c, 0, 0] / tn[0]).slope}
            if kernel == "exp":
                theory_fits[key]["first_order_T"] = list(theory[s, c, 2, :, 0])
    # random tokens, d >> n
    hs = list(cfg.hd_headsets)
    hn, hd, seeds = np.array(cfg.hd_n), np.array(cfg.hd_d), np.array(cfg.seeds)
    T = np.full((len(hs), len(COMBOS), len(hn), len(hd), len(seeds)), np.nan)
    g0 = np.full_like(T, np.nan)
    for a, k in enumerate(hs):
        lam = HEADSETS[k]
        for c, (kernel, norm) in enumerate(COMBOS):
            for i, n in enumerate(hn):
                for j, d in enumerate(hd):
                    horizon = max(100.0, 1.5 * n * np.log(d)) / (sq[k] if kernel == "relu" else 1.0)
                    for q, seed in enumerate(seeds):
                        T[a, c, i, j, q], g0[a, c, i, j, q] = span_time(lam, kernel, norm, int(n), int(d), int(seed), horizon)
    th_hd = np.array([theory_times(HEADSETS[k], hn, hd) for k in hs])     # (set, combo, level, n, d)
    fits = {}
    for a, k in enumerate(hs):
        for c, (kernel, norm) in enumerate(COMBOS):
            for i, n in enumerate(hn):
                f = fit_slope(np.repeat(np.log(hd), len(seeds)), T[a, c, i].ravel(), drop_invalid=True, min_points=3)
                lin = th_hd[a, c, 0, i]
                fits[f"{k}/{kernel}-{norm}/n={int(n)}"] = {
                    "slope_T_vs_lnd": f.slope, "ci95": 1.96 * f.stderr, "points": f.n_points,
                    "linearized_slope": fit_slope(np.log(hd), lin).slope if np.all(np.isfinite(lin)) else None,
                    "nonlinear_ode_slope": fit_slope(np.log(hd), th_hd[a, c, 1, i]).slope,
                    "reached_fraction": float(np.isfinite(T[a, c, i]).mean()),
                    "mean_T_ci": [mean_ci(T[a, c, i, j]) for j in range(len(hd))]}
    # ratios: ReLU (mean) / softmax time per seed, and H-head / 1-head (same seeds)
    ratio = {}
    for a, k in enumerate(hs):
        for i, n in enumerate(hn):
            ratio[f"{k}/n={int(n)}"] = [mean_ci(T[a, 1, i, j] / T[a, 0, i, j]) for j in range(len(hd))]
    rescale = {}
    if "1 head" in hs:
        o = hs.index("1 head")
        for a, k in enumerate(hs):
            if k == "1 head":
                continue
            both = np.isfinite(T[a, 1]) & np.isfinite(T[o, 1])
            rescale[k] = {"relu_T_times_sumsq_over_one_head_max_rel_dev":
                          float(np.abs(T[a, 1][both] * sq[k] / T[o, 1][both] - 1).max()) if both.any() else None,
                          "relu_reached_same_runs": bool(np.array_equal(np.isfinite(T[a, 1]), np.isfinite(T[o, 1]))),
                          "softmax_speedup_vs_one_head": [[mean_ci(T[o, 0, i, j] / T[a, 0, i, j]) for j in range(len(hd))]
                                                          for i in range(len(hn))],
                          "softmax_speedup_linearized": float(mf.theory.early_rate(HEADSETS[k], BETA, int(hn[0]))
                                                              / mf.theory.early_rate([1.0], BETA, int(hn[0]))),
                          "softmax_speedup_nonlinear_ode": float(th_hd[o, 0, 1, 0, 0] / th_hd[a, 0, 1, 0, 0]),
                          "relu_slope_x_sumsq_over_one_head": [
                              fits[f"{k}/relu-mean/n={int(n)}"]["slope_T_vs_lnd"] * sq[k]
                              / fits[f"1 head/relu-mean/n={int(n)}"]["slope_T_vs_lnd"] for n in hn]}
    arrays = {"B_theory": theory, "B_theory_n": tn, "B_theory_d": td, "B_T": T, "B_gamma0": g0, "B_hn": hn, "B_hd": hd, "B_seeds": seeds, "B_theory_hd": th_hd}
    meta = {"headsets": {k: list(v) for k, v in HEADSETS.items()}, "headset_order": names, "hd_headsets": hs,
            "sum_sq": sq, "relu_identity_max_rel": relu_id, "softmax_equal_heads_identity_max_rel": soft_eq,
            "theory_fits": theory_fits, "fits": fits, "relu_over_softmax": ratio, "rescale": rescale}
    return arrays, meta


# ------------------------------------------------------------------------------ part C (Thm 19)
def alphas_of(H, s):
    """Head strengths ``1 + s t_h``, ``t_h`` equispaced on [-1, 1] (mean 1)."""
    return 1.0 + s * np.linspace(-1.0, 1.0, H)


def particle_margin(beta, alphas, n, normalization, reading, X):
    """Worst relative margin of Condition 8 on the particle system (``>= -REL_TOL``: holds)."""
    system = mf.ParticleSystem(mf.scalar_heads(list(alphas), n, beta, normalization=normalization))
    sh = mf.diagnostics.radial_shadows(system, X)
    a, nrm, tan2 = sh["a"], sh["norm"], sh["tangential"] ** 2
    other = (a.sum(0) - a) if reading == "exact" else (nrm.sum(0) - nrm)
    rhs = np.abs(a) * other if reading == "norm_bounded" else a * other
    return float((tan2 - rhs).min() / np.maximum(tan2, np.abs(rhs)).max())


def particle_threshold(alphas, n, normalization, reading, X, grid):
    """First beta on ``grid`` where the particle condition fails, refined by brentq (0.0: fails at grid[0])."""
    f = lambda b: particle_margin(b, alphas, n, normalization, reading, X) + REL_TOL  # noqa: E731
    m = np.array([f(b) for b in grid])
    ok = m >= 0
    if ok.all():
        return np.inf
    k = int(np.argmin(ok))
    if k == 0:
        return 0.0
    return float(optimize.brentq(f, grid[k - 1], grid[k], xtol=1e-13, rtol=4 * np.finfo(float).eps))


def min_rate_ratio(system, X):
    """``min_h dE_h/dt / max_h |dE_h/dt|`` (exact per-head rates)."""
    r = system.energy_rates(X)
    return float(r.min() / np.abs(r).max())


def part_c(cfg):
    s = np.linspace(0.0, 0.9, cfg.c_n_s)
    ns = np.array(cfg.c_ns)
    th = np.array([[[[[mf.theory.radial_dominance_threshold(alphas_of(H, x), int(n), nz, rd) for x in s] for n in ns]
                     for H in HS] for nz in ("mean", "softmax")] for rd in ("norm_bounded", "exact")])  # (rd, nz, H, n, s)
    naive = np.array([[[mf.theory.beta_star(H, int(n), float(f(alphas_of(H, x)))) for x in s] for n in ns]
                      for f in (np.mean, np.max, np.min) for H in HS]).reshape(3, len(HS), len(ns), len(s))
    naive = np.maximum(naive, 0.0)
    # which head fails first (norm-bounded, mean): weakest?
    weakest_first = []
    for h, H in enumerate(HS):
        for i, n in enumerate(ns):
            for x in s[1:]:
                b = mf.theory.radial_dominance_threshold(alphas_of(H, x), int(n))
                if 0 < b < np.inf:
                    m = mf.theory.radial_dominance_margins(b + 1e-7, alphas_of(H, x), int(n))
                    weakest_first.append(int(np.argmin(m)) == 0)
    # particle thresholds on random rotations of the orthonormal tokens
    grid = np.array(cfg.c_beta_grid)
    checks, errs = [], []
    for H, n, x in cfg.c_check:
        al = alphas_of(H, x)
        for nz in ("mean", "softmax"):
            for rd in ("norm_bounded", "exact"):
                ref = mf.theory.radial_dominance_threshold(al, n, nz, rd)
                got = [particle_threshold(al, n, nz, rd, mf.initial.orthonormal(n, n, seed=int(q)), grid) for q in cfg.c_seeds]
                err = float(np.max(np.abs(np.array(got) - ref))) if np.isfinite(ref) else float(np.all(np.isinf(got)) - 1)
                errs.append(err)
                checks.append({"H": H, "n": n, "s": x, "normalization": nz, "reading": rd, "theory": ref,
                               "particles_min": float(min(got)), "particles_max": float(max(got)), "max_abs_err": err})
    # exact per-head rates: shared scalar heads (hypotheses) at t = 0 over beta, and along the flow
    min_ratio_t0 = min(min_rate_ratio(mf.ParticleSystem(mf.scalar_heads(list(alphas_of(H, x)), int(n), b,
                                                                         normalization=nz)), mf.initial.orthonormal(int(n), int(n)))
                       for H in HS for n in ns[:2] for x in (0.3, 0.9) for b in grid[::4] for nz in ("mean", "softmax"))
    flow_min, flow_t = [], []
    for H in HS:
        for nz in ("mean", "softmax"):
            system = mf.ParticleSystem(mf.scalar_heads(list(alphas_of(H, 0.6)), 16, 3.0, normalization=nz))
            tr = mf.solve_particles(system, mf.initial.orthonormal(16, 16, seed=1), 3.0,
                                    save=SaveAt(t_eval=np.r_[0.0, np.geomspace(1e-3, 3.0, 60)],
                                                observe=lambda t, X, sy=system: {"r": sy.energy_rates(X)}),
                                    progress=False)
            r = tr.observables["r"]                              # (T, H)
            # once the tokens have merged the rates are round-off: judge only while max_h |rate| > 1e-8 of its start
            live = np.abs(r).max(axis=1) > 1e-8 * np.abs(r[0]).max()
            flow_min.append(float((r[live].min(axis=1) / np.abs(r[live]).max(axis=1)).min()))
            flow_t.append(float(tr.t[live][-1]))
    # outside the hypotheses: block heads (unequal strengths) in general position, random orthonormal tokens
    out_H, out_n = 3, 32
    neg_beta = []
    for q in cfg.c_seeds:
        X = mf.initial.orthonormal(out_n, out_n, seed=1000 + int(q))
        first = np.inf
        for b in grid[1:]:
            sy = mf.ParticleSystem(mf.orthogonal_block_heads(out_n, out_H, alphas_of(out_H, 0.6), b))
            if min_rate_ratio(sy, X) < -REL_TOL:
                first = float(b)
                break
        neg_beta.append(first)
    neg = np.isfinite(neg_beta)
    arrays = {"C_s": s, "C_ns": ns, "C_thresholds": th, "C_naive": naive, "C_grid": grid}
    meta = {"particle_checks": checks, "particle_vs_theory_max_abs_err": float(max(errs)),
            "weakest_head_fails_first_fraction": float(np.mean(weakest_first)),
            "min_per_head_rate_ratio_t0": min_ratio_t0, "min_per_head_rate_ratio_along_flow": float(min(flow_min)),
            "flow_judged_until_t_min": float(min(flow_t)),
            "outside": {"H": out_H, "n": out_n, "alphas": list(alphas_of(out_H, 0.6)), "first_negative_beta": neg_beta,
                        "negative_fraction": float(neg.mean()),
                        "negative_fraction_ci95": _wilson(int(neg.sum()), len(neg))},
            **_summaries_c(th, naive, s, ns)}
    return arrays, meta


def _wilson(k, m, z=1.96):
    """95 % Wilson score interval of a proportion ``k / m``."""
    p = k / m
    c = (p + z * z / (2 * m)) / (1 + z * z / m)
    h = z * np.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / (1 + z * z / m)
    return [float(max(c - h, 0.0)), float(min(c + h, 1.0))]


def _summaries_c(th, naive, s, ns):
    nb = th[0]                                   # (nz, H, n, s)
    out = {}
    for h, H in enumerate(HS):
        for k, name in enumerate(("mean_alpha", "max_alpha", "min_alpha")):
            for z, nz in enumerate(("mean", "softmax")):
                d = (naive[k, h] - nb[z, h])[:, 1:]           # > 0: the formula claims more than holds; s > 0
                live = np.maximum(naive[k, h], nb[z, h])[:, 1:] > 0     # leave out points where both are 0
                out[f"H{H}/{nz}/{name}_overestimates_fraction"] = float((d[live] > 1e-9).mean())
                out[f"H{H}/{nz}/{name}_underestimates_fraction"] = float((d[live] < -1e-9).mean())
                out[f"H{H}/{nz}/{name}_max_overestimate"] = float(d[live].max())
                out[f"H{H}/{nz}/{name}_max_underestimate"] = float(-d[live].min())
        eq = nb[:, h, :, 0]
        out[f"H{H}/s0_vs_beta_star_max_abs"] = float(np.max(np.abs(eq - np.maximum(
            mf.theory.beta_star(H, ns, 1.0), 0.0))))
        out[f"H{H}/mean_softmax_max_diff"] = float(np.max(np.abs(nb[0, h] - nb[1, h])))
    return {"C": out}


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    cfg = QUICK if quick else FULL
    t0 = time.perf_counter()
    arrays, meta = {}, {"n": N, "beta": BETA, "Hs": HS, "families": FAMILIES, "targets": TARGETS, "quick": quick,
                        "n_quad": N_QUAD, "late_window": LATE_WINDOW, "cluster_target": CLUSTER_TARGET,
                        "combos": [f"{k}-{z}" for k, z in COMBOS], "seeds": cfg.seeds, "c_seeds": cfg.c_seeds,
                        "hd_n": cfg.hd_n, "hd_d": cfg.hd_d, "c_check": cfg.c_check}
    timings = {}
    for name, part in (("A", part_a), ("B", part_b), ("C", part_c)):
        t1 = time.perf_counter()
        a, m = part(cfg)
        arrays.update(a)
        meta[f"part_{name}"] = m
        timings[name] = time.perf_counter() - t1
    meta["elapsed_s"] = {**timings, "total": time.perf_counter() - t0}
    np.savez_compressed(out_dir / "data.npz", **arrays)
    save_json(out_dir / "data.json", meta)
    A, B, C = meta["part_A"], meta["part_B"], meta["part_C"]
    return {"smallest_helping_lambda_bar": A["smallest_helping_lambda_bar"], "lambda_c": A["lambda_c"],
            "relu_identity_max_rel": B["relu_identity_max_rel"],
            "particle_vs_theory_max_abs_err": C["particle_vs_theory_max_abs_err"],
            "min_per_head_rate_ratio_t0": C["min_per_head_rate_ratio_t0"], "elapsed_s": meta["elapsed_s"]}


if __name__ == "__main__":
    from studies.many_heads.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
