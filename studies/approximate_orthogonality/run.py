"""Per-head monotonicity under approximately orthogonal heads (paper Thm 39; MODEL.md section 2).

Heads ``M_h = V_h = alpha U_h U_h^T`` on rank-``r`` subspaces with principal angle ``theta``
between any two of them (``mf.approx_orthogonal_heads``), so ``delta = |M_h' M_h|_op =
alpha^2 cos(theta)``; angles 70-90 degrees (trained heads sit at about 70-85).  For each delta,
in flat and spherical dynamics (dopri5, exp kernel, mean normalization, random tokens):

* the extra coupling (initial tokens: von Mises-Fisher, kappa 5, around ``(1, ..., 1)/sqrt(d)``; the
  initial coupling is also measured at i.i.d. uniform tokens) ``<u^h, u^h'> = sum_i w_i <u_i^h, u_i^h'>`` (zero for exactly orthogonal heads)
  at the initial tokens and as a maximum along the trajectory; log-log slope against delta (expected 1);
* per-head monotonicity: fraction of (time, head) with ``dE_h/dt >= 0``, fraction of (time, token,
  head) with a non-negative token contribution ``w_i <u_i^h, dx_i/dt>``, and the minimum of
  ``dE_h/dt`` normalized by the self term ``sum_i w_i |P u_i^h|^2``.

Cost: quick about 5 s, full about 1-2 minutes on 2 cores.
Run from the repository root: ``python -m studies.approximate_orthogonality.run [--quick]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield import diagnostics as dg
from studies._common import blowup_horizon, fit_slope, main, save_json
from studies.approximate_orthogonality.report import report

KAPPA = 5.0      # initial tokens: vMF around (1, ..., 1)/sqrt(d), so every head sees a common mean
SMALL_ANGLE = 85.0   # slopes are also fitted on angles >= this (delta <= 0.087), the asymptotic regime
NEG_REL = 1e-10   # a rate counts as negative below -NEG_REL * its scale (round-off guard)
FLAT_FRACTION = 0.5   # flat runs stop at this fraction of the detected blow-up time


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    config: dict      # heads and tokens: d, n_heads, alpha, rank, beta, n
    angles: tuple     # principal angles between head subspaces [degrees]
    t_final: float
    n_eval: int


QUICK = Settings(config=dict(d=6, n_heads=2, alpha=1.0, rank=2, beta=1.0, n=8),
                 angles=(70.0, 80.0, 86.0, 88.0, 89.9, 90.0), t_final=4.0, n_eval=9)
FULL = Settings(config=dict(d=8, n_heads=3, alpha=1.0, rank=2, beta=1.0, n=24),
                angles=(70.0, 72.5, 75.0, 77.5, 80.0, 82.5, 85.0, 87.5, 89.0, 89.9, 90.0), t_final=8.0, n_eval=33)


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
    delta = max(np.linalg.norm(heads[k].M @ heads[h].M, 2) for h in range(len(heads)) for k in range(len(heads)) if k != h)
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
    """One (delta, geometry) run: initial coupling and monotonicity statistics along the flow."""
    heads = mf.approx_orthogonal_heads(d, n_heads, delta, alpha, rank, beta)
    system = mf.ParticleSystem(heads, geometry)
    X0 = mf.initial.von_mises_fisher(n, np.ones(d) / np.sqrt(d), KAPPA, seed=seed)
    U0, _ = system.forces(X0)
    w0 = np.full(n, 1.0 / n)
    Xu = mf.initial.uniform_sphere(n, d, seed=seed)
    Uu, _ = system.forces(Xu)
    if geometry == "flat":   # finite-time blow-up: stop at half of it
        t_final, _ = blowup_horizon(system, X0, t_final, FLAT_FRACTION)
    tr = mf.solve_particles(system, X0, t_final, t_eval=np.linspace(0, t_final, n_eval),
                            observe=observe_heads(system), progress=False)
    o = tr.observables
    R, S = o["rate"], o["self"]
    ratio = R / np.where(S > 0, S, np.inf)
    c0 = _coupling(U0, w0)
    bound0 = _bound(system, X0, w0)
    return {"coupling_initial": c0, "coupling_uniform": _coupling(Uu, w0), "coupling_max": float(o["coupling"].max()),
            "bound_ratio": c0 / bound0 if bound0 > 0 else 0.0,
            "frac_head_times_nonneg": float(np.mean(R >= -NEG_REL * np.abs(R).max())),
            "frac_tokens_nonneg": float(o["token_nonneg"].mean()),
            "min_rate_over_self": float(ratio.min()), "t_final": float(tr.t[-1]), "status": tr.status,
            "t": tr.t, "rate": R, "self_term": S}


def _slope(x, y):
    """Least-squares slope of log y against log x."""
    return fit_slope(x, y, log_x=True, log_y=True).slope


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = QUICK if quick else FULL
    cfg, t_final, n_eval = settings.config, settings.t_final, settings.n_eval
    angles = np.array(settings.angles)
    deltas = cfg["alpha"] ** 2 * np.cos(np.radians(angles))
    deltas[angles == 90.0] = 0.0   # exact orthogonality (cos(pi/2) is 6e-17 in floating point)
    arrays = {"angles": angles, "deltas": deltas}
    summary = {"quick": quick, "config": cfg, "kappa": KAPPA, "small_angle": SMALL_ANGLE, "t_final": t_final, "n_eval": n_eval, "neg_rel_threshold": NEG_REL}
    for geom in ("flat", "sphere"):
        rows = [one_case(delta=dl, geometry=geom, t_final=t_final, n_eval=n_eval, seed=5, **cfg) for dl in deltas]
        for key in ("coupling_initial", "coupling_uniform", "bound_ratio", "coupling_max", "frac_head_times_nonneg", "frac_tokens_nonneg",
                    "min_rate_over_self", "t_final", "status"):
            arrays[f"{geom}_{key}"] = np.array([r[key] for r in rows])
        for key in ("t", "rate", "self_term"):      # the most coupled (70 degree) run
            arrays[f"{geom}_first_{key}"] = rows[0][key]
        pos = deltas > 0
        small = pos & (angles >= SMALL_ANGLE)
        summary[geom] = {
            "slope_initial": _slope(deltas[pos], arrays[f"{geom}_coupling_initial"][pos]),
            "slope_traj": _slope(deltas[pos], arrays[f"{geom}_coupling_max"][pos]),
            "slope_uniform": _slope(deltas[pos], arrays[f"{geom}_coupling_uniform"][pos]),
            "slope_initial_small": _slope(deltas[small], arrays[f"{geom}_coupling_initial"][small]),
            "slope_traj_small": _slope(deltas[small], arrays[f"{geom}_coupling_max"][small]),
            "slope_uniform_small": _slope(deltas[small], arrays[f"{geom}_coupling_uniform"][small]),
            "max_bound_ratio": float(arrays[f"{geom}_bound_ratio"].max()),
            "coupling_at_zero": float(arrays[f"{geom}_coupling_max"][~pos].max()) if (~pos).any() else None,
            "min_frac_head_times_nonneg": float(arrays[f"{geom}_frac_head_times_nonneg"].min()),
            "min_rate_over_self": float(arrays[f"{geom}_min_rate_over_self"].min()),
            "rows": [{k: r[k] for k in r if k not in ("t", "rate", "self_term")} | {"delta": dl, "angle": a}
                     for r, dl, a in zip(rows, deltas, angles)],
        }
    np.savez_compressed(out_dir / "data.npz", **arrays)
    save_json(out_dir / "data.json", summary)
    return {f"{g}_{k}": summary[g][k] for g in ("flat", "sphere")
            for k in ("slope_initial", "slope_traj", "slope_initial_small", "slope_uniform_small", "max_bound_ratio",
                      "coupling_at_zero", "min_frac_head_times_nonneg",
                      "min_rate_over_self")}


if __name__ == "__main__":
    main(run, report, Path(__file__).parent / "output", __doc__)
