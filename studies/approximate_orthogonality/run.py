"""Per-head monotonicity under approximately orthogonal heads (paper Thm 39; MODEL.md section 2).

Statement tested (the seed summary: per-head monotonicity is robust to approximate orthogonality,
``|M_h' M_h|_op <= delta``, when the perturbation is small relative to the self-energy).  Reading taken
(the summary gives no constant and no spherical form): for symmetric value-aligned heads, exp kernel,
mean normalization, the extra coupling obeys ``|<u_i^h, u_i^h'>| <= delta |A_i^h| |A_i^h'|``, so

* flat:   self term ``sum_i w_i |u_i^h|^2 > C delta sum_i w_i |A_i^h| |A_i^h'|``  implies ``dE_h/dt >= 0``;
* sphere: Condition 8 with a margin, ``sum_i w_i (|P u_i^h|^2 - a_i^h a_i^h') > C delta sum_i w_i |A_i^h||A_i^h'|``
  (exact reading; norm-bounded: ``|a_i^h| |u_i^h'|`` in place of ``a_i^h a_i^h'``) implies ``dE_h/dt >= 0``,

with ``C = 1`` from Cauchy-Schwarz (so "no decreasing configuration has margin above delta" is a consistency
check; the search measures how sharp the bound is).  Condition 8 holds token by token: whether it alone still
implies monotonicity for ``delta > 0`` is decided with the per-token margin ``min_i m_i`` (part A(iv)).  Raw per-head monotonicity on the sphere is not the statement: it
fails already at ``delta = 0`` (radial shadows, Thm 17).  Three parts:

A. Adversarial search (``adversarial.py``): two rank-2 heads, indefinite allowed, every
   ``|M_2 M_1|_op <= delta``, tokens free on the sphere; SLSQP with random restarts, ``n_seeds`` seeds.
   (i) the critical margin ``m*(delta)``: the largest margin of a configuration with ``dE_h/dt <= 0``
   (flat, exact and norm-bounded readings; random starts, then warm starts from the neighbouring deltas'
   best configurations, a sweep down and a sweep up); slope of ``log m*`` against ``log delta`` per seed and the
   sharp constant ``C* = m*/delta``, means with 95 % Student-t intervals over seeds; (ii) flat: the
   minimum of ``dE_h/dt / self term`` at a fixed margin ``m0`` (predicted ``>= 1 - delta/m0``), slope of
   ``log(1 - min)`` against ``log delta``; (iii) the unrestricted minimum of the sphere rate (normalized by
   the sum of its terms' absolute values) at ``delta = 0``; (iv) the per-token critical margin of the two
   Condition 8 readings (``kind="token"``: every token's margin ``>= m``, clustered starts, continuation), each
   optimum re-checked with ``diagnostics.radial_dominance``; :func:`run_token` writes it to ``token.npz`` /
   ``token.json`` on its own (``python -m studies.approximate_orthogonality.token``), the rest goes to ``data.*``.
B. The coupling at random tokens (``mf.approx_orthogonal_heads``, ``delta = alpha^2 cos(angle)``, angles
   70-90 degrees): ``max_h!=h' |sum_i w_i <u_i^h, u_i^h'>|`` at i.i.d. uniform and at von Mises-Fisher
   tokens, ``n_seeds`` draws each: per-draw log-log slope against delta, mean and 95 % interval.
C. Trajectories (dopri5) from the vMF draws, flat and sphere: per-head rates along the flow.

Cost: quick about 10-25 s CPU; full 1017 s wall on 2 worker processes at load ~4 on the 2 shared cores (parts
A(i-iii), B, C about 12 min, A(iv) about 5 min; A(iv) alone took 27 min at load 8-13); part-A tasks run on
``workers`` processes, and the numbers do not depend on it (the committed outputs are reproduced bit for bit).
Run from the repository root: ``python -m studies.approximate_orthogonality.run [--quick]``.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

import meanfield as mf
from meanfield import diagnostics as dg
from meanfield.core.options import SaveAt
from studies._common import blowup_horizon, fit_slope, main, save_json
from studies.approximate_orthogonality import adversarial as adv
from studies.approximate_orthogonality.report import report

KAPPA = 5.0      # vMF tokens around (1, ..., 1)/sqrt(d): every head sees a common mean (a favourable start)
SMALL_ANGLE = 85.0   # slopes are also fitted on angles >= this (delta <= 0.087), the asymptotic regime
NEG_REL = 1e-10   # a rate counts as negative below -NEG_REL * its scale (round-off guard)
FLAT_FRACTION = 0.5   # flat runs stop at this fraction of the detected blow-up time
TOKEN_READINGS = ("exact", "norm_bounded")   # A(iv): the Condition 8 readings, per token
FEAS_TOL = 1e-7   # adversarial: a configuration counts as "rate <= 0" when rate / sum|terms| <= this
#                   (SLSQP stops at iteration limits with violations ~1e-8; the margins it certifies move
#                   by less than ~1e-7 delta, far below the differences between readings)


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    config: dict      # B, C: heads and tokens (d, n_heads, alpha, rank, beta, n)
    angles: tuple     # B, C: principal angles between head subspaces [degrees]
    t_final: float
    n_eval: int
    seeds: tuple      # B, C: token draws; A: optimizer seeds
    adv: dict         # A: n, d, beta of the adversarial problem
    adv_deltas: tuple
    restarts: int     # A: random SLSQP starts per (seed, delta, reading), plus two warm starts
    maxiter: int
    ratio_margin: float   # A(ii): the fixed margin m0
    token_restarts: int   # A(i), per-token margin: clustered random starts (plus the summed optimum, continuation)
    token_spread: float   # ... spread of the tokens about their common point in those starts
    workers: int          # processes for the independent part-A tasks (1: serial); the numbers do not depend on it


QUICK = Settings(config=dict(d=6, n_heads=2, alpha=1.0, rank=2, beta=1.0, n=8),
                 angles=(70.0, 80.0, 86.0, 88.0, 89.9, 90.0), t_final=4.0, n_eval=9, seeds=(1, 2, 3),
                 adv=dict(n=4, d=5, beta=1.0), adv_deltas=(0.05, 0.2), restarts=2, maxiter=150, ratio_margin=1.0,
                 token_restarts=2, token_spread=0.1, workers=1)
FULL = Settings(config=dict(d=8, n_heads=3, alpha=1.0, rank=2, beta=1.0, n=24),
                angles=(70.0, 72.5, 75.0, 77.5, 80.0, 82.5, 85.0, 87.5, 89.0, 89.9, 90.0), t_final=8.0, n_eval=33,
                seeds=tuple(range(1, 11)), adv=dict(n=6, d=6, beta=1.0), adv_deltas=(0.02, 0.05, 0.1, 0.2, 0.34),
                restarts=6, maxiter=400, ratio_margin=1.0, token_restarts=4, token_spread=0.1, workers=2)


def ci95(x):
    """Mean and half-width of the 95 % Student-t interval of the mean of the finite entries of ``x``."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return [float("nan"), float("nan")]
    if x.size < 2:
        return [float(x.mean()), float("nan")]
    return [float(x.mean()), float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))]


def _slope(x, y):
    """Least-squares slope of log y against log x (points with y <= 0 or nan left out)."""
    return fit_slope(x, y, log_x=True, log_y=True, drop_invalid=True).slope


# ----------------------------------------------------------------------------- part A
def _continue(reading, kind, deltas, M, F, best, settings):
    """Continuation (in place): the parameters do not depend on delta (c_k = delta sin q_k), so each delta's
    best configuration is a warm start at its neighbours: one sweep down, one sweep up."""
    n, d, beta = settings.adv["n"], settings.adv["d"], settings.adv["beta"]
    for order in (range(len(deltas) - 2, -1, -1), range(1, len(deltas))):
        for j in order:
            nb = best[j + 1] if order.step < 0 else best[j - 1]
            if nb is None:
                continue
            m, th, f = adv.critical_margin(reading, deltas[j], n, d, beta, None, 0, kind=kind, maxiter=settings.maxiter,
                                           feas_tol=FEAS_TOL, starts=[nb])
            F[j] += f
            if th is not None and not m <= M[j]:
                M[j], best[j] = m, th


def _critical_task(settings, k, seed, kind="sum"):
    """A(i) for one reading and seed: the summed margin from i.i.d. random starts (``kind="sum"``) or the
    per-token margin from clustered starts (``kind="token"``, the two Condition 8 readings), then the
    continuation sweeps; the library checks of every optimum."""
    n, d, beta = settings.adv["n"], settings.adv["d"], settings.adv["beta"]
    reading = adv.READINGS[k]
    deltas = np.array(settings.adv_deltas)
    checks, cond8 = [], []
    M, F, best = np.full(len(deltas), np.nan), np.zeros(len(deltas), dtype=int), [None] * len(deltas)
    for j, dl in enumerate(deltas):
        if kind == "sum":
            rng, R, spread = np.random.default_rng([seed, k, j]), settings.restarts, None
        else:
            rng, R, spread = np.random.default_rng([seed, k, j, 1]), settings.token_restarts, settings.token_spread
        M[j], best[j], F[j] = adv.critical_margin(reading, dl, n, d, beta, rng, R, kind=kind, maxiter=settings.maxiter,
                                                  feas_tol=FEAS_TOL, spread=spread)
    _continue(reading, kind, deltas, M, F, best, settings)
    for j, dl in enumerate(deltas):
        th = best[j]
        if th is None:
            continue
        own, lib = adv.library_rates(th, dl, n, d, beta, adv.geometry_of(reading))
        scale = adv.Problem(reading, dl, n, d, beta).values(th)["rate_scale"][0]
        checks.append(dict(rate_diff=abs(own - lib) / scale, op_delta_ratio=adv.op_delta(th, dl, n, d) / dl,
                           margin_diff=adv.library_margins(th, dl, n, d, beta)))
        if kind == "token" and M[j] > 0:
            holds, rate = adv.library_condition8(th, dl, n, d, beta, reading)
            cond8.append(dict(holds=holds, rate=rate / scale))
    return dict(m_star=M, feasible=F, checks=checks, cond8=cond8)


def _ratio_task(settings, seed):
    """A(ii) for one seed: flat min dE_h/dt / self term at the fixed margin m0, per delta."""
    n, d, beta = settings.adv["n"], settings.adv["d"], settings.adv["beta"]
    return np.array([adv.min_rate_ratio("flat", dl, n, d, beta, np.random.default_rng([seed, 7, j]), settings.restarts,
                                        margin=settings.ratio_margin, maxiter=settings.maxiter, feas_tol=FEAS_TOL)[0]
                     for j, dl in enumerate(settings.adv_deltas)])


def _raw_task(settings, seed):
    """A(iii) for one seed: the raw sphere minimum at delta = 0 (normalized by the sum of |terms|)."""
    n, d, beta = settings.adv["n"], settings.adv["d"], settings.adv["beta"]
    return adv.min_rate_ratio("exact", 0.0, n, d, beta, np.random.default_rng([seed, 9]), max(settings.restarts // 2, 1),
                              maxiter=settings.maxiter)[0]


def _summarize(M, F, deltas):
    C = M / deltas
    slopes = np.array([_slope(deltas, row) for row in M])
    return dict(m_star=M, feasible=F, C=C, slopes=slopes, slope_ci=ci95(slopes),
                C_ci=[ci95(C[:, j]) for j in range(len(deltas))],
                C_max=float(np.nanmax(C)) if np.isfinite(C).any() else float("nan"),
                m_star_best=np.array([np.nanmax(c) if np.isfinite(c).any() else np.nan for c in M.T]))


def _submitter(pool):
    return (lambda f, *a: pool.submit(f, *a)) if pool is not None else (lambda f, *a: _Done(f(*a)))


def _checks(checks):
    return dict(max_rate_diff=max(c["rate_diff"] for c in checks), max_margin_diff=max(c["margin_diff"] for c in checks),
                max_op_delta_ratio=max(c["op_delta_ratio"] for c in checks), count=len(checks))


def adversarial(settings, pool=None):
    """A(i) summed margins, A(ii) flat ratio minima, A(iii) the raw sphere minimum, over seeds (see the
    docstring).  ``pool``: an executor for the independent (reading, seed) tasks (every task seeds its own
    generators, so the numbers do not depend on it)."""
    deltas = np.array(settings.adv_deltas)
    seeds = settings.seeds
    submit = _submitter(pool)
    crit = {(k, s): submit(_critical_task, settings, k, seed) for k in range(len(adv.READINGS))
            for s, seed in enumerate(seeds)}
    ratio = [submit(_ratio_task, settings, seed) for seed in seeds]
    raw = [submit(_raw_task, settings, seed) for seed in seeds]
    crit = {key: f.result() for key, f in crit.items()}
    out, checks = {}, []
    for k, reading in enumerate(adv.READINGS):
        rows = [crit[(k, s)] for s in range(len(seeds))]
        checks += [c for r in rows for c in r["checks"]]
        out[reading] = _summarize(np.array([r["m_star"] for r in rows]), np.array([r["feasible"] for r in rows]), deltas)
    m0 = settings.ratio_margin
    Q = np.array([f.result() for f in ratio])
    gap = 1 - Q
    gslopes = np.array([_slope(deltas, row) for row in gap])
    out["ratio"] = dict(margin=m0, min_ratio=Q, gap=gap, slopes=gslopes, slope_ci=ci95(gslopes),
                        C=gap * m0 / deltas, C_ci=[ci95(gap[:, j] * m0 / deltas[j]) for j in range(len(deltas))])
    raw = np.array([f.result() for f in raw])
    out["raw_sphere_delta0"] = dict(values=raw, ci=ci95(raw))
    out["checks"] = _checks(checks)
    return deltas, out


def token_margins(settings, pool=None):
    """A(iv): per-token critical margins of the two Condition 8 readings over seeds, with the library checks
    (``diagnostics.radial_dominance`` must find Condition 8 at every token of each optimum with ``m* > 0``)."""
    deltas = np.array(settings.adv_deltas)
    submit = _submitter(pool)
    ks = [adv.READINGS.index(r) for r in TOKEN_READINGS]
    crit = {(k, s): submit(_critical_task, settings, k, seed, "token") for k in ks
            for s, seed in enumerate(settings.seeds)}
    crit = {key: f.result() for key, f in crit.items()}
    out, checks, cond8 = {}, [], []
    for k, reading in zip(ks, TOKEN_READINGS):
        rows = [crit[(k, s)] for s in range(len(settings.seeds))]
        checks += [c for r in rows for c in r["checks"]]
        cond8 += [c for r in rows for c in r["cond8"]]
        out[f"{reading}_token"] = _summarize(np.array([r["m_star"] for r in rows]),
                                             np.array([r["feasible"] for r in rows]), deltas)
    out["checks"] = _checks(checks) | dict(
        positive=len(cond8), library_holds=int(sum(c["holds"] for c in cond8)),
        max_library_rate=max((c["rate"] for c in cond8), default=float("nan")))
    return deltas, out


def run_token(out_dir: Path, quick: bool = False) -> dict:
    """Part A(iv) alone: writes ``token.npz`` / ``token.json`` next to ``data.npz`` / ``data.json`` (the other
    parts), so that it can be rerun without them (``python -m studies.approximate_orthogonality.token``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = QUICK if quick else FULL
    if settings.workers > 1:
        with ProcessPoolExecutor(settings.workers) as pool:
            deltas, T = token_margins(settings, pool)
    else:
        deltas, T = token_margins(settings)
    arrays = {"adv_deltas": deltas}
    for r in T:
        if r != "checks":
            for key in ("m_star", "feasible", "C", "slopes"):
                arrays[f"adv_{r}_{key}"] = T[r][key]
    summary = {"quick": quick, "seeds": list(settings.seeds), "readings": list(TOKEN_READINGS),
               "settings": dict(settings.adv, deltas=list(deltas), token_restarts=settings.token_restarts,
                                token_spread=settings.token_spread, maxiter=settings.maxiter, feas_tol=FEAS_TOL),
               "checks": T["checks"]}
    summary |= {r: {k: T[r][k] for k in ("slope_ci", "C_ci", "C_max", "m_star_best")}
                | {"feasible_total": int(T[r]["feasible"].sum()), "no_feasible_seed_delta": int(np.isnan(T[r]["m_star"]).sum())}
                for r in T if r != "checks"}
    np.savez_compressed(out_dir / "token.npz", **arrays)
    save_json(out_dir / "token.json", summary)
    head = {f"adv_{r}_C_max": T[r]["C_max"] for r in T if r != "checks"}
    head |= {f"adv_{r}_C_best_min": float(np.nanmin(T[r]["m_star_best"] / deltas)) for r in T if r != "checks"}
    head |= {f"adv_{r}_slope": T[r]["slope_ci"] for r in T if r != "checks"}
    head["adv_token_checks"] = T["checks"]
    return head


class _Done:
    """A finished result with the ``Future.result()`` interface (the serial path of :func:`adversarial`)."""

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


# ----------------------------------------------------------------------------- parts B, C
def _coupling(U, w):
    """Largest |sum_i w_i <u_i^h, u_i^h'>| over pairs h != h'; U shape (H, n, d)."""
    G = np.einsum("n,hnd,knd->hk", w, U, U)
    return float(np.abs(G[~np.eye(len(G), dtype=bool)]).max())


def _bound(system, X, w):
    """Thm 39 bound ``delta * max_h!=h' sum_i w_i |A_i^h| |A_i^h'|``, ``A_i^h = sum_j w_j k_ij^h x_j``
    (the aggregate with ``V = I``), so ``<u_i^h, u_i^h'> = <A_i^h, M_h M_h' A_i^h'>``."""
    heads = system.heads
    plain = mf.ParticleSystem([mf.Head(h.M, np.eye(h.dim), h.beta) for h in heads], system.geometry)
    A, _ = plain.forces(X, w)
    nA = np.linalg.norm(A, axis=2)
    H = len(heads)
    delta = max(np.linalg.norm(heads[k].M @ heads[h].M, 2) for h in range(H) for k in range(H) if k != h)
    G = np.einsum("n,hn,kn->hk", w, nA, nA)
    return delta * G[~np.eye(len(G), dtype=bool)].max()


def observe_heads(system):
    """Observe hook: per-head rates, self terms, coupling, per-token contributions."""
    def observe(t, X):
        n = X.shape[0]
        w = np.full(n, 1.0 / n)
        U, _ = system.forces(X)
        v = system.velocity(X)
        token = np.einsum("n,hnd,nd->hn", w, U, v)            # dE_h/dt = sum_i token[h, i]
        return {"rate": system.energy_rates(X), "self": np.diag(dg.energy_rate_terms(system, X)),
                "coupling": _coupling(U, w), "token_nonneg": token >= -NEG_REL * np.abs(token).max()}
    return observe


def one_case(d, n_heads, delta, alpha, rank, beta, n, geometry, t_final, n_eval, seed):
    """One (delta, geometry, seed) run: initial coupling and monotonicity statistics along the flow."""
    heads = mf.approx_orthogonal_heads(d, n_heads, delta, alpha, rank, beta)
    system = mf.ParticleSystem(heads, geometry)
    X0 = mf.initial.von_mises_fisher(n, np.ones(d) / np.sqrt(d), KAPPA, seed=seed)
    U0, _ = system.forces(X0)
    w0 = np.full(n, 1.0 / n)
    Xu = mf.initial.uniform_sphere(n, d, seed=seed)
    Uu, _ = system.forces(Xu)
    if geometry == "flat":   # finite-time blow-up: stop at half of it
        t_final, _ = blowup_horizon(system, X0, t_final, FLAT_FRACTION)
    tr = mf.solve_particles(system, X0, t_final,
                            save=SaveAt(t_eval=np.linspace(0, t_final, n_eval), observe=observe_heads(system)),
                            progress=False)
    o = tr.observables
    R, S = o["rate"], o["self"]
    ratio = R / np.where(S > 0, S, np.inf)
    c0 = _coupling(U0, w0)
    bound0, boundu = _bound(system, X0, w0), _bound(system, Xu, w0)
    cu = _coupling(Uu, w0)
    return {"coupling_initial": c0, "coupling_uniform": cu, "coupling_max": float(o["coupling"].max()),
            "bound_ratio": max(c0 / bound0 if bound0 > 0 else 0.0, cu / boundu if boundu > 0 else 0.0),
            "frac_head_times_nonneg": float(np.mean(R >= -NEG_REL * np.abs(R).max())),
            "frac_tokens_nonneg": float(o["token_nonneg"].mean()),
            "min_rate_over_self": float(ratio.min()), "t_final": float(tr.t[-1]), "status": tr.status,
            "t": tr.t, "rate": R, "self_term": S}


def random_tokens(settings, deltas, angles):
    """Parts B and C over all seeds: arrays (seed, angle) per quantity and geometry, and their summaries."""
    cfg = settings.config
    arrays, summary = {}, {}
    keys = ("coupling_initial", "coupling_uniform", "bound_ratio", "coupling_max", "frac_head_times_nonneg",
            "frac_tokens_nonneg", "min_rate_over_self", "t_final", "status")
    pos = deltas > 0
    small = pos & (angles >= SMALL_ANGLE)
    for geom in ("flat", "sphere"):
        rows = [[one_case(delta=dl, geometry=geom, t_final=settings.t_final, n_eval=settings.n_eval, seed=seed, **cfg)
                 for dl in deltas] for seed in settings.seeds]
        for key in keys:
            arrays[f"{geom}_{key}"] = np.array([[r[key] for r in row] for row in rows])
        for key in ("t", "rate", "self_term"):      # the most coupled (70 degree) run of the first seed
            arrays[f"{geom}_first_{key}"] = rows[0][0][key]
        sl = {}
        for name, key, mask in (("initial", "coupling_initial", pos), ("traj", "coupling_max", pos),
                                ("uniform", "coupling_uniform", pos), ("initial_small", "coupling_initial", small),
                                ("traj_small", "coupling_max", small), ("uniform_small", "coupling_uniform", small)):
            per_seed = np.array([_slope(deltas[mask], row[mask]) for row in arrays[f"{geom}_{key}"]])
            arrays[f"{geom}_slopes_{name}"] = per_seed
            sl[f"slope_{name}"] = ci95(per_seed)
        fr = arrays[f"{geom}_frac_head_times_nonneg"]
        summary[geom] = sl | {
            "max_bound_ratio": float(arrays[f"{geom}_bound_ratio"].max()),
            "coupling_at_zero": float(arrays[f"{geom}_coupling_max"][:, ~pos].max()) if (~pos).any() else None,
            "min_frac_head_times_nonneg": float(fr.min()),
            "frac_head_times_nonneg_ci": [ci95(fr[:, j]) for j in range(len(deltas))],
            "min_rate_over_self": float(arrays[f"{geom}_min_rate_over_self"].min()),
            "min_rate_over_self_ci": [ci95(arrays[f"{geom}_min_rate_over_self"][:, j]) for j in range(len(deltas))],
            "t_final": arrays[f"{geom}_t_final"].mean(axis=0),
        }
    return arrays, summary


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = QUICK if quick else FULL
    cfg = settings.config
    angles = np.array(settings.angles)
    deltas = cfg["alpha"] ** 2 * np.cos(np.radians(angles))
    deltas[angles == 90.0] = 0.0   # exact orthogonality (cos(pi/2) is 6e-17 in floating point)
    if settings.workers > 1:
        with ProcessPoolExecutor(settings.workers) as pool:
            tokens = pool.submit(random_tokens, settings, deltas, angles)
            adv_deltas, A = adversarial(settings, pool)
            arrays, rt = tokens.result()
    else:
        arrays, rt = random_tokens(settings, deltas, angles)
        adv_deltas, A = adversarial(settings)
    arrays |= {"angles": angles, "deltas": deltas}
    arrays["adv_deltas"] = adv_deltas
    for reading in adv.READINGS:
        for key in ("m_star", "feasible", "C", "slopes"):
            arrays[f"adv_{reading}_{key}"] = A[reading][key]
    for key in ("min_ratio", "slopes"):
        arrays[f"adv_ratio_{key}"] = A["ratio"][key]
    arrays["adv_raw_sphere_delta0"] = A["raw_sphere_delta0"]["values"]
    summary = {"quick": quick, "config": cfg, "kappa": KAPPA, "small_angle": SMALL_ANGLE, "t_final": settings.t_final,
               "n_eval": settings.n_eval, "neg_rel_threshold": NEG_REL, "seeds": list(settings.seeds),
               "adv_settings": dict(settings.adv, deltas=list(adv_deltas), restarts=settings.restarts,
                                    maxiter=settings.maxiter, feas_tol=FEAS_TOL, ratio_margin=settings.ratio_margin),
               "angles": angles, "deltas": deltas} | rt
    summary["adversarial"] = {r: {k: A[r][k] for k in ("slope_ci", "C_ci", "C_max", "m_star_best")}
                              | {"feasible_total": int(A[r]["feasible"].sum()),
                                 "no_feasible_seed_delta": int(np.isnan(A[r]["m_star"]).sum())}
                              for r in adv.READINGS}
    summary["adversarial"]["ratio"] = {k: A["ratio"][k] for k in ("margin", "slope_ci", "C_ci")} | {
        "min_ratio_best": np.nanmin(A["ratio"]["min_ratio"], axis=0),
        "no_feasible_seed_delta": int(np.isnan(A["ratio"]["min_ratio"]).sum())}
    raw = A["raw_sphere_delta0"]
    summary["adversarial"]["raw_sphere_delta0"] = raw["ci"] + [float(raw["values"].min())]
    summary["adversarial"]["checks"] = A["checks"]
    np.savez_compressed(out_dir / "data.npz", **arrays)
    save_json(out_dir / "data.json", summary)
    head = {f"{g}_{k}": rt[g][k] for g in ("flat", "sphere")
            for k in ("slope_initial", "slope_initial_small", "slope_uniform", "max_bound_ratio", "coupling_at_zero",
                      "min_frac_head_times_nonneg", "min_rate_over_self")}
    for r in adv.READINGS:
        head[f"adv_{r}_C_max"] = A[r]["C_max"]
        head[f"adv_{r}_slope"] = A[r]["slope_ci"]
    head["adv_ratio_slope"] = A["ratio"]["slope_ci"]
    head["adv_raw_sphere_delta0_min"] = float(A["raw_sphere_delta0"]["values"].min())
    head["adv_checks"] = A["checks"]
    return head | run_token(out_dir, quick)


if __name__ == "__main__":
    main(run, report, Path(__file__).parent / "output", __doc__)
