"""ReLU versus softmax attention: clustering times against n and d (paper Thm 25, MODEL.md sec. 2).

One scalar head ``M = V = lambda I`` (``lambda = 1``, ``beta = 1``); the clustering time is the
first time the common / mean pairwise inner product reaches ``TARGET = 1/2``.  Four
kernel-normalization pairs: exp-softmax (transformers), exp-mean, ReLU-mean (the paper's
``O(n log d)`` claim) and ReLU-softmax.  Three levels of description:

1. **linearized equiangular ODE** (:func:`meanfield.theory.linearized_clustering_time`), the
   object of the paper's statement: ``T_softmax ~ n / (2 phi(lambda))`` from ``gamma0 = 0`` and
   ``T_relu,mean = (n / 2 lambda^2) log(gamma_target / gamma0)`` from ``gamma0 = 1/sqrt(d)``;
2. **nonlinear equiangular ODE** (:func:`meanfield.theory.clustering_time`), same starts;
3. **random initial tokens**: ``n`` i.i.d. uniform points on ``S^{d-1}`` evolved by
   :func:`meanfield.solve_particles`; time when ``diagnostics.clustering(X)['mean_inner']`` first
   reaches the target (linear interpolation between the two recorded states bracketing the crossing),
   ``inf`` when it is not reached before the horizon (ReLU tokens more than 90 degrees apart
   do not interact, so several clusters can persist).

Theory grids: n = 16..4096, d = 16..4096 (``gamma0 = 1/sqrt(d)``; d = 4 would start at the target).
Particle grids: full n in {16, 32, 64, 128}, d in {4, 16, 64}, 3 seeds; quick n in {16, 32},
d in {16, 64}, 1 seed.  Fitted scalings: log-log slope of T against n, slope of T against log n,
slope of T / n and of log T against log d.

Cost: quick ~10 s of CPU; full ~6 min wall on the shared 2-core machine under heavy load
(particle runs dominate; on a loaded machine set ``OPENBLAS_NUM_THREADS=1``, multi-threaded BLAS on
these small matrices is several times slower).  Run from the repository root::

    python -m studies.relu_vs_softmax.run [--quick]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from studies._common import fit_slope, main, save_json

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


FULL = Settings(n=(16, 32, 64, 128), d=(4, 16, 64), seeds=(0, 1, 2))
QUICK = Settings(n=(16, 32), d=(16, 64), seeds=(0,))


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

    def observe(t, X):
        return {"mean_inner": mf.diagnostics.clustering(X)["mean_inner"]}

    def event(t, X):
        return "target reached" if observe(t, X)["mean_inner"] >= TARGET else None

    t_eval = np.concatenate([[0.0], np.geomspace(1e-2, horizon, N_EVAL)])
    tr = mf.solve_particles(system, X0, horizon, t_eval=t_eval, observe=observe, event=event,
                            rtol=1e-7, atol=1e-9, save_states=False, progress=False)
    if tr.status < 0:
        raise RuntimeError(f"particle run failed ({kernel}-{normalization}, n={n}, d={d}): {tr.message}")
    m = tr.observables["mean_inner"]
    T = np.inf
    if tr.status == 1:
        # m[-2] < TARGET <= m[-1]: linear interpolation within the last step interval
        T = float(tr.t[-1]) if len(m) < 2 else float(np.interp(TARGET, m[-2:], tr.t[-2:]))
    final = mf.diagnostics.clustering(tr.y_final)
    return {"T": T, "gamma0": float(m[0]), "final_mean_inner": final["mean_inner"],
            "final_clusters": final["n_clusters"], "n_steps": tr.n_steps}


def horizon_for(n, d):
    """Time budget of a particle run: well beyond the ReLU-mean linearized time ``(n/2) log(sqrt(d)/2)``."""
    return float(max(100.0, 1.5 * n * np.log(max(d, 4))))




def _slope(x, y, log_y):
    """Least-squares slope of ``y`` (or ``log y``) against ``log x``; times that are inf (target not
    reached) or nan (no seed reached it) are left out; nan if fewer than 2 remain."""
    return fit_slope(x, y, log_x=True, log_y=log_y, drop_invalid=True).slope


def fits(theory, ns, ds, particles, pn, pd):
    """Fitted scalings of the theory and particle times (see module docstring).

    Returns
    -------
    dict of floats keyed ``"<level>/<combo>/<quantity>"``: ``loglog_n`` (slope of log T vs log n,
    at the largest d), ``vs_logn`` (slope of T vs ln n), ``Tn_vs_logd`` (slope of T / n vs ln d,
    at the largest n), ``loglog_d`` (slope of log T vs log d).  Particle fits use the median
    over seeds of the runs that reached the target.
    """
    out = {}
    med = _median_finite(particles)
    for c, (kernel, norm) in enumerate(COMBOS):
        name = combo_name(kernel, norm)
        for level, T, nn, dd in (("linearized", theory[c, 0], ns, ds), ("nonlinear", theory[c, 1], ns, ds),
                                 ("particles", med[c], pn, pd)):
            out[f"{level}/{name}/loglog_n"] = _slope(nn, T[:, -1], log_y=True)
            out[f"{level}/{name}/vs_logn"] = _slope(nn, T[:, -1], log_y=False)
            out[f"{level}/{name}/Tn_vs_logd"] = _slope(dd, T[-1, :] / nn[-1], log_y=False)
            out[f"{level}/{name}/loglog_d"] = _slope(dd, T[-1, :], log_y=True)
    return out


def _median_finite(particles):
    """Median over the seed axis (last) of the finite times; nan where no seed reached the target."""
    P = np.where(np.isfinite(particles), particles, np.nan)
    ok = np.isfinite(P).any(axis=-1)
    return np.where(ok, np.nanmedian(np.where(ok[..., None], P, 0.0), axis=-1), np.nan)


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
    np.savez_compressed(out_dir / "data.npz", theory=theory, theory_n=THEORY_N, theory_d=THEORY_D,
                        particle_T=T, particle_gamma0=g0, particle_final_mean_inner=final_m,
                        particle_final_clusters=final_k, particle_steps=steps, particle_n=pn,
                        particle_d=pd, seeds=seeds, theory_at_particles=theory_p)
    reached = np.isfinite(T)
    summary = {
        "quick": quick, "lambda": LAMBDA, "beta": BETA, "target": TARGET,
        "combos": [combo_name(*c) for c in COMBOS], "fits": f,
        "nonlinear_softmax_times": dict(zip(map(int, THEORY_N), theory[0, 1, :, 0])),
        "linearized_softmax_times": dict(zip(map(int, THEORY_N), theory[0, 0, :, 0])),
        "relu_mean_linear_over_nlogd": float(np.median(theory[2, 0] / (THEORY_N[:, None] * np.log(THEORY_D)))),
        "particles_reached_fraction": {combo_name(*c): float(reached[i].mean()) for i, c in enumerate(COMBOS)},
    }
    save_json(out_dir / "data.json", summary)
    return summary


if __name__ == "__main__":
    from studies.relu_vs_softmax.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
