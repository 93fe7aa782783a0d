"""Critical noise from the particles: growth of the l = 1 mode under token noise vs sigma_1(nu) and nu_c.

Tokens ``x_i`` on S^2 (one mean exp head, ``lambda = 1``, ``beta = 1``) start from a tilted uniform
sample (``x <- (x + a e_z) / |.|``, so ``m_z = mean z`` is about ``2a/3``) and follow the noisy SDE
(``ParticleSystem(nu=...)``, ``geodesic_strang``) at ``nu = r nu_c`` for ratios ``r`` around 1.
The l = 1 moment ``m_z(t)``, averaged over seeds, grows like ``exp(sigma_1(nu) t)`` in the linear
regime, ``sigma_1(nu) = 2 (c_1 / beta - nu)`` (:func:`meanfield.theory.growth_rate`); the fitted
rates are compared with the closed form, and the particles' critical noise is the zero of a line
fitted to (nu, rate), compared with :func:`meanfield.theory.critical_noise` (the PDE's).  The
PDE side (ContinuumPDE(nu=...) from ``1/(4 pi) + eps Y_10``) is measured at the same nu.

Not yet here (issue 13, item 5): the noisy continuum limit (W2 / MMD distance against n at fixed nu).

Cost (2 shared cores): quick ~20 s, full ~3 min.  Run from the repo root::

    python -m studies.critical_noise.run [--quick]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield import theory
from studies._common import fit_slope, main, save_json

LAMBDAS, BETA = [1.0], 1.0


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    ratios: tuple       # nu / nu_c
    n: int              # tokens per run
    seeds: int          # runs averaged per nu
    steps: int          # SDE steps per run (dt = T / steps)
    tilt: float         # a of the tilted start


QUICK = Settings(ratios=(0.6, 0.9, 1.1, 1.4), n=600, seeds=4, steps=30, tilt=0.3)
FULL = Settings(ratios=(0.4, 0.6, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4, 1.6), n=3000, seeds=8, steps=60, tilt=0.3)


def particle_rate(nu, s: Settings):
    """Fitted growth rate of the seed-averaged ``m_z(t)`` over ``t in [0, 1 / max(|sigma_1|, 0.2)]``."""
    sigma = theory.growth_rate(1, LAMBDAS, BETA, nu=nu)
    T = 1.0 / max(abs(sigma), 0.2)
    t = np.linspace(0.0, T, 6)
    system = mf.ParticleSystem(mf.scalar_heads(LAMBDAS, 3, beta=BETA), nu=nu, summation="direct")
    mz = []
    for seed in range(s.seeds):
        X = mf.initial.uniform_sphere(s.n, 3, seed=100 + seed) + np.array([0.0, 0.0, s.tilt])
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        tr = mf.solve_particles(system, X, T, dt=T / s.steps, t_eval=t, seed=seed, observe=False)
        mz.append(tr.y[:, :, 2].mean(axis=1))
    m = np.mean(mz, axis=0)
    return float(fit_slope(t, m, log_y=True).slope), float(sigma), m.tolist()


def pde_rate(nu, lmax=8, eps=1e-6, T=1.0):
    """Growth rate of the (1, 0) coefficient of the PDE from ``1/(4 pi) + eps Y_10``."""
    pde = mf.ContinuumPDE(mf.scalar_heads(LAMBDAS, 3, beta=BETA), lmax=lmax, nu=nu, kernel_tol=1e-6)
    rho = mf.densities.uniform_density(pde.grid).astype(complex)
    k = int(np.flatnonzero((pde.grid.l_index == 1))[0])      # degree 1, m = 0 comes first
    rho[k] += eps
    tr = mf.solve_continuum(pde, rho, T, method="lawson_dopri5", rtol=1e-10, atol=1e-14,
                            t_eval=np.linspace(0, T, 5), observe=False, monitor=False, progress=False)
    c = np.array([abs(pde.coefficients(y)[k]) for y in tr.y])
    return float(fit_slope(tr.t, c, log_y=True).slope)


def run(out_dir: Path, quick: bool = False) -> dict:
    s = QUICK if quick else FULL
    nu_c = float(theory.critical_noise(LAMBDAS, BETA))
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
    save_json(out_dir / "data.json", {"summary": summary, "rows": rows})
    return summary


if __name__ == "__main__":
    from studies.critical_noise.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
