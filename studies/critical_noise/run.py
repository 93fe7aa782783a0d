"""Critical noise from the particles: growth of the l = 1 mode under token noise vs sigma_1(nu) and nu_c.

Tokens ``x_i`` on S^2 (one mean exp head, ``lambda = 1``, ``beta = 1``) start from a tilted uniform
sample (``x <- (x + a e_z) / |.|``, so ``m_z = mean z`` is about ``2a/3``) and follow the noisy SDE
(``ParticleSystem(nu=...)``, ``geodesic_strang``) at ``nu = r nu_c`` for ratios ``r`` around 1.
The l = 1 moment ``m_z(t)``, averaged over seeds, grows like ``exp(sigma_1(nu) t)`` in the linear
regime, ``sigma_1(nu) = 2 (c_1 / beta - nu)`` (:func:`meanfield.analysis.stability.growth_rate`); the fitted
rates are compared with the closed form, and the particles' critical noise is the zero of a line
fitted to (nu, rate), compared with :func:`meanfield.analysis.stability.critical_noise` (the PDE's).  The
PDE side (ContinuumPDE(nu=...) from ``1/(4 pi) + eps Y_10``) is measured at the same nu.

Second part, the noisy continuum limit (:mod:`studies.critical_noise.continuum`): particles with
token noise against the PDE with the same ``nu`` (``paired_run(nu=...)``), by W2 and MMD, against
``n`` with several seeds per ``n`` at fixed ``nu`` (and ``nu = 0`` from the same starts), fitted
to ``C n^{-1/2}``.

Cost (2 shared cores): quick ~45 s, full ~8 min idle with 10 seeds (934 s measured on the loaded machine, next to another full run).  Run from the repo root::

    python -m studies.critical_noise.run [--quick]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield.analysis import stability
from meanfield.core.options import SaveAt, StepControl
from studies._common import fit_slope, main, save_json
from studies.critical_noise.continuum import run_limit

LAMBDAS, BETA = [1.0], 1.0


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    ratios: tuple       # nu / nu_c
    n: int              # tokens per run
    seeds: int          # runs averaged per nu
    steps: int          # SDE steps per run (dt = T / steps)
    tilt: float         # a of the tilted start
    # the noisy continuum limit (continuum.py)
    limit_nus: tuple    # noise levels nu > 0 (nu = 0 is added as the noiseless reference)
    limit_n: tuple      # particle numbers
    limit_seeds: int    # runs per (nu, n): seeds of the sampling and of the Brownian increments
    limit_times: tuple  # times of W2 / MMD (the first is 0)
    limit_lmax: int     # PDE degree (every nu: resolves the noiseless run over limit_times)
    limit_dt: float     # SDE step
    limit_dt_refine: int    # step check: the largest n again with dt / limit_dt_refine


QUICK = Settings(ratios=(0.6, 0.9, 1.1, 1.4), n=600, seeds=4, steps=30, tilt=0.3,
                 limit_nus=(0.1, 0.5), limit_n=(100, 400, 1600), limit_seeds=3, limit_times=(0.0, 0.4, 0.8),
                 limit_lmax=63, limit_dt=0.02, limit_dt_refine=4)
FULL = Settings(ratios=(0.4, 0.6, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4, 1.6), n=3000, seeds=10, steps=60, tilt=0.3,
                limit_nus=(0.1, 0.5), limit_n=(250, 500, 1000, 2000, 4000, 8000), limit_seeds=10,
                limit_times=(0.0, 0.4, 0.8), limit_lmax=63, limit_dt=0.02, limit_dt_refine=4)


def particle_rate(nu, s: Settings):
    """Fitted growth rate of the seed-averaged ``m_z(t)`` over ``t in [0, 1 / max(|sigma_1|, 0.2)]``."""
    sigma = stability.growth_rate(1, LAMBDAS, BETA, nu=nu)
    T = 1.0 / max(abs(sigma), 0.2)
    t = np.linspace(0.0, T, 6)
    system = mf.ParticleSystem(mf.scalar_heads(LAMBDAS, 3, beta=BETA), nu=nu, summation="direct")
    mz = []
    for seed in range(s.seeds):
        X = mf.initial.uniform_sphere(s.n, 3, seed=100 + seed) + np.array([0.0, 0.0, s.tilt])
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        tr = mf.solve_particles(system, X, T, step=StepControl(dt=T / s.steps), save=SaveAt(t_eval=t, observe=False),
                                seed=seed)
        mz.append(tr.y[:, :, 2].mean(axis=1))
    m = np.mean(mz, axis=0)
    return float(fit_slope(t, m, log_y=True).slope), float(sigma), m.tolist()


def pde_rate(nu, lmax=8, eps=1e-6, T=1.0):
    """Growth rate of the (1, 0) coefficient of the PDE from ``1/(4 pi) + eps Y_10``."""
    pde = mf.ContinuumPDE(mf.scalar_heads(LAMBDAS, 3, beta=BETA), lmax=lmax, nu=nu, kernel_tol=1e-6)
    rho = mf.densities.uniform_density(pde.grid).astype(complex)
    k = int(np.flatnonzero((pde.grid.l_index == 1))[0])      # degree 1, m = 0 comes first
    rho[k] += eps
    tr = mf.solve_continuum(pde, rho, T, method="lawson_dopri5", step=StepControl(rtol=1e-10, atol=1e-14),
                            save=SaveAt(t_eval=np.linspace(0, T, 5), observe=False), monitor=False, progress=False)
    c = np.array([abs(pde.coefficients(y)[k]) for y in tr.y])
    return float(fit_slope(tr.t, c, log_y=True).slope)


def run(out_dir: Path, quick: bool = False) -> dict:
    s = QUICK if quick else FULL
    nu_c = float(stability.critical_noise(LAMBDAS, BETA))
    rows = []
    for r in s.ratios:
        nu = r * nu_c
        rate, sigma, m = particle_rate(nu, s)
        rows.append(dict(ratio=r, nu=nu, sigma=sigma, particle_rate=rate, pde_rate=pde_rate(nu), m_z=m))
    nus = np.array([row["nu"] for row in rows])
    rates = np.array([row["particle_rate"] for row in rows])
    a, b = np.polyfit(nus, rates, 1)
    summary = {"nu_c": nu_c, "nu_c_particles": float(-b / a), "rate_slope_in_nu": float(a),
               "max_abs_rate_error_particles": float(np.max(np.abs(rates - [row["sigma"] for row in rows]))),
               "max_abs_rate_error_pde": float(max(abs(row["pde_rate"] - row["sigma"]) for row in rows)),
               "n": s.n, "seeds": s.seeds}
    arrays, limit = run_limit(s)
    np.savez_compressed(Path(out_dir) / "data.npz", **arrays)
    f_last = {k: v for k, v in limit["fits"].items() if v["t"] == s.limit_times[-1]}
    summary["limit"] = {"slopes_w2_last_time": {k: [v["w2_slope"], v["w2_stderr"]] for k, v in f_last.items()},
                        "t0_identical_across_nu": limit["t0_identical_across_nu"],
                        "wall_seconds": limit["wall_seconds"]}
    save_json(out_dir / "data.json", {"summary": summary, "rows": rows, "limit": limit})
    return summary


if __name__ == "__main__":
    from studies.critical_noise.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
