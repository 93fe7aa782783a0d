"""Radial shadows and per-head energies of heads on orthogonal coordinate blocks (paper Thms 16-17).

Heads ``M_h = V_h = alpha_h P_h`` on disjoint coordinate blocks (``mf.orthogonal_block_heads``,
exp kernel, mean normalization), so ``M_h' M_h = 0``.

A. **Flat dynamics**: ``<u^h, u^h'> = 0``, every per-head rate ``dE_h/dt = sum_i w_i |u_i^h|^2 >= 0``.
B. **Cross terms on the sphere**: ``C[h, h'] = sum_i w_i <P u^h, P u^h'>`` (``diagnostics.
   energy_rate_terms``) equals ``-sum_i w_i a_i^h a_i^h'`` (``diagnostics.radial_shadows``) for
   ``h != h'``, and the row sums of ``C`` equal the exact ``ParticleSystem.energy_rates``.
C. **Condition 8 along spherical trajectories**, over a scan of beta, strengths, n, d, H: how often
   each reading (``diagnostics.radial_dominance``: exact, norm-bounded) holds per (time, token,
   head); whether norm-bounded => exact ever fails; whether a head whose condition holds for all
   tokens ever has ``dE_h/dt < 0``; and how often ``dE_h/dt < 0`` occurs at all.

Cost: quick about 5 s, full about 2-4 minutes on 2 cores.
Run from the repository root: ``python -m studies.radial_shadows.run [--quick]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield import diagnostics as dg
from meanfield.core.options import SaveAt
from studies._common import blowup_horizon, main, save_json
from studies.radial_shadows.report import report

NEG_REL = 1e-10   # a per-head rate counts as negative below -NEG_REL * max|rate| of its run
FLAT_FRACTION = 0.5   # flat runs stop at this fraction of the detected blow-up time


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    flat_cases: tuple   # part A, one (d, H, n) per flat run
    scan: tuple         # parts B-C, one (d, H, strengths, beta, n) per spherical run
    t_final: float      # spherical runs
    n_eval: int


QUICK = Settings(flat_cases=((4, 2, 8),), scan=tuple((4, 2, (1.0, 1.5), beta, 8) for beta in (0.5, 2.0)),
                 t_final=6.0, n_eval=13)
FULL = Settings(flat_cases=((4, 2, 16), (6, 3, 16), (8, 2, 32)),
                scan=tuple((d, H, st[:H], beta, n)
                           for d, H in ((4, 2), (6, 3), (8, 2))
                           for st in ((1.0, 1.0, 1.0), (1.0, 1.5, 0.75))
                           for beta in (0.25, 0.5, 1.0, 2.0, 3.0)
                           for n in (8, 32)),
                t_final=8.0, n_eval=21)


def observe_heads(system):
    """Observe hook: per-head rates, rate-term matrix, radial shadows and Condition 8 (both readings)."""
    def observe(t, X):
        r = dg.radial_shadows(system, X)
        cond = dg.radial_dominance(system, X)
        n = X.shape[0]
        return {"rate": system.energy_rates(X), "C": dg.energy_rate_terms(system, X),
                "aa": np.einsum("hn,kn->hk", r["a"], r["a"]) / n, "energy": system.energies(X),
                "exact": cond["exact"], "norm_bounded": cond["norm_bounded"]}
    return observe


def trajectory(d, n_heads, strengths, beta, n, geometry, t_final, n_eval, seed):
    """One orthogonal-block run; returns times and the observables of :func:`observe_heads`."""
    heads = mf.orthogonal_block_heads(d, n_heads, strengths, beta)
    system = mf.ParticleSystem(heads, geometry)
    X0 = mf.initial.uniform_sphere(n, d, seed=seed)
    if geometry == "flat":   # finite-time blow-up: stop at half of it
        t_final, _ = blowup_horizon(system, X0, t_final, FLAT_FRACTION)
    tr = mf.solve_particles(system, X0, t_final,
                            save=SaveAt(t_eval=np.linspace(0, t_final, n_eval), observe=observe_heads(system)),
                            progress=False)
    return {"t": tr.t, "status": tr.status, **tr.observables}


def cross_term_errors(o):
    """Max relative errors of the cross-term identity and of the row-sum identity."""
    C, aa, R = o["C"], o["aa"], o["rate"]
    H = C.shape[1]
    off = ~np.eye(H, dtype=bool)
    scale = np.abs(C).max()
    return (float(np.abs(C[:, off] + aa[:, off]).max() / scale),
            float(np.abs(C.sum(axis=2) - R).max() / np.abs(R).max()))


def condition_stats(o):
    """Frequencies of Condition 8 readings and of negative per-head rates along one run."""
    R, ex, nb = o["rate"], o["exact"], o["norm_bounded"]          # (T, H), (T, H, n)
    neg = R < -NEG_REL * np.abs(R).max()
    all_ex, all_nb = ex.all(axis=2), nb.all(axis=2)
    both = all_ex & all_nb
    return {"frac_exact": float(ex.mean()), "frac_norm_bounded": float(nb.mean()),
            "implication_failures": int(np.sum(nb & ~ex)),
            "frac_head_times_all_exact": float(all_ex.mean()), "frac_head_times_all_nb": float(all_nb.mean()),
            "frac_negative_rate": float(neg.mean()), "n_head_times": int(neg.size),
            "both_hold_count": int(both.sum()), "both_hold_but_negative": int(np.sum(both & neg)),
            "exact_hold_but_negative": int(np.sum(all_ex & neg)),
            "negative_without_condition": int(np.sum(neg)),
            "min_rel_rate": float(R.min() / np.abs(R).max())}


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = QUICK if quick else FULL
    flat_cases, scan, t_final, n_eval = cfg.flat_cases, cfg.scan, cfg.t_final, cfg.n_eval
    arrays, flat_rows, rows = {}, [], []
    for k, (d, H, n) in enumerate(flat_cases):
        o = trajectory(d, H, 1.0, 1.0, n, "flat", 2.0, n_eval, seed=k)
        R = o["rate"]
        off = ~np.eye(H, dtype=bool)
        flat_rows.append({"d": d, "H": H, "n": n, "t_final": float(o["t"][-1]), "status": o["status"],
                          "min_rel_rate": float(R.min() / np.abs(R).max()),
                          "max_rel_cross": float(np.abs(o["C"][:, off]).max() / np.abs(o["C"]).max())})
        arrays[f"flat{k}_t"], arrays[f"flat{k}_rate"] = o["t"], R
    cross_err, rowsum_err, example = [], [], None
    for k, (d, H, st, beta, n) in enumerate(scan):
        o = trajectory(d, H, st, beta, n, "sphere", t_final, n_eval, seed=100 + k)
        ce, re = cross_term_errors(o)
        cross_err.append(ce)
        rowsum_err.append(re)
        s = condition_stats(o)
        rows.append({"d": d, "H": H, "strengths": list(st), "beta": beta, "n": n, "status": o["status"], **s})
        if example is None or s["min_rel_rate"] < example[1]:
            example = (k, s["min_rel_rate"], o)
    k, _, o = example
    for key in ("t", "rate", "energy", "C", "aa"):
        arrays[f"example_{key}"] = o[key]
    arrays["example_frac_exact"] = o["exact"].mean(axis=2)
    arrays["example_frac_nb"] = o["norm_bounded"].mean(axis=2)
    tot = lambda key: int(sum(r[key] for r in rows))   # noqa: E731
    summary = {
        "quick": quick, "t_final": t_final, "n_eval": n_eval, "neg_rel_threshold": NEG_REL,
        "flat": flat_rows, "scan": rows, "example_index": k, "example": rows[k],
        "max_cross_term_error": max(cross_err), "max_rowsum_error": max(rowsum_err),
        "flat_min_rel_rate": min(r["min_rel_rate"] for r in flat_rows),
        "flat_max_rel_cross": max(r["max_rel_cross"] for r in flat_rows),
        "implication_failures": tot("implication_failures"),
        "both_hold_count": tot("both_hold_count"), "both_hold_but_negative": tot("both_hold_but_negative"),
        "exact_hold_but_negative": tot("exact_hold_but_negative"),
        "frac_runs_with_negative": float(np.mean([r["frac_negative_rate"] > 0 for r in rows])),
        "frac_head_times_negative": float(np.mean([r["frac_negative_rate"] for r in rows])),
        "frac_exact": float(np.mean([r["frac_exact"] for r in rows])),
        "frac_norm_bounded": float(np.mean([r["frac_norm_bounded"] for r in rows])),
    }
    np.savez_compressed(out_dir / "data.npz", **arrays)
    save_json(out_dir / "data.json", summary)
    keys = ("flat_min_rel_rate", "flat_max_rel_cross", "max_cross_term_error", "max_rowsum_error",
            "implication_failures", "both_hold_count", "both_hold_but_negative", "frac_runs_with_negative",
            "frac_head_times_negative", "frac_exact", "frac_norm_bounded")
    return {key: summary[key] for key in keys}


if __name__ == "__main__":
    main(run, report, Path(__file__).parent / "output", __doc__)
