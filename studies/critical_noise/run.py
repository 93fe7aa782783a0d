"""Critical noise from the particles: growth of the l = 1 mode under token noise vs sigma_1(nu) and nu_c.

Tokens ``x_i`` on S^2 (one mean exp head, ``lambda = 1``, ``beta = 1``) start from a tilted uniform
sample (``x <- (x + a e_z) / |.|``, so ``m_z = mean z`` is about ``2a/3``) and follow the noisy SDE
(``ParticleSystem(nu=...)``, ``geodesic_strang``) at ``nu = r nu_c`` for ratios ``r`` around 1.
The l = 1 moment ``m_z(t)`` grows like ``exp(sigma_1(nu) t)`` in the linear regime,
``sigma_1(nu) = 2 (c_1 / beta - nu)`` (MODEL.md 3: ``sigma_l = l (l+1) (c_l / beta - nu)``, so
``d sigma_1 / d nu = -2`` on S^2; :func:`meanfield.analysis.stability.growth_rate`).

The estimator (variance reduction, no bias): every seed runs the tilts ``+a`` and ``-a`` of the same
uniform sample with the same Brownian increments, and ``A(t) = (m_z^+(t) - m_z^-(t)) / 2`` is its
amplitude; by the symmetry ``z -> -z`` of the law, ``E A(t) = E m_z^+(t)``, while the sampling
fluctuation of the uniform sample (the ``n^{-1/2}`` floor, about ``1 / sqrt(3 n)`` per seed) cancels
to first order, and so does every even order of the tilt.  The rate of a seed is the least-squares
slope of ``log A`` over ``t in [0, 1 / max(|sigma_1|, 0.2)]`` (one e-fold); the rates are averaged
over seeds with a Student-t interval.  Seeds differ between ratios (independent errors, so the
residuals of the line through ``(nu, rate)`` measure the scatter and its slope has an honest
t-interval).  The same is done at the earlier, larger tilt ``a = 0.3`` (``tilt_check``) to show the
nonlinearity it carries.  The particles' critical noise is the zero of that line, compared with
:func:`meanfield.analysis.stability.critical_noise`.  The PDE side (ContinuumPDE(nu=...) from
``1/(4 pi) + eps Y_10``) is measured at the same nu.

Second part, the noisy continuum limit (:mod:`studies.critical_noise.continuum`): particles with
token noise against the PDE with the same ``nu`` (``paired_run(nu=...)``), by W2 and MMD, against
``n`` with several seeds per ``n`` at fixed ``nu`` (and ``nu = 0`` from the same starts), fitted
to ``C n^{-1/2}``.

Cost (2 shared cores): quick ~1 min idle; full ~9 min of CPU (part 1: 360 runs with spectral sums at n = 10^4,
~2 min; part 2: 385 s), measured 1332 s wall at a load average of 10-15 on the 2 cores.  Run from the repo root::

    python -m studies.critical_noise.run [--quick]
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield.analysis import stability
from meanfield.core.options import SaveAt, StepControl
from studies._common import fit_slope, main, mean_ci, save_json
from studies.critical_noise.continuum import run_limit

LAMBDAS, BETA = [1.0], 1.0


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    ratios: tuple       # nu / nu_c
    n: int              # tokens per run
    seeds: int          # antithetic pairs (+a, -a) per nu
    steps: int          # SDE steps per run (dt = T / steps)
    tilt: float         # a of the tilted start (small: the linear regime)
    tilt_check: float   # a larger tilt, the same estimator: its nonlinearity
    # the noisy continuum limit (continuum.py)
    limit_nus: tuple    # noise levels nu > 0 (nu = 0 is added as the noiseless reference)
    limit_n: tuple      # particle numbers
    limit_seeds: int    # runs per (nu, n): seeds of the sampling and of the Brownian increments
    limit_times: tuple  # times of W2 / MMD (the first is 0)
    limit_lmax: int     # PDE degree (every nu: resolves the noiseless run over limit_times)
    limit_dt: float     # SDE step
    limit_dt_refine: int    # step check: the largest n again with dt / limit_dt_refine on the same paths


QUICK = Settings(ratios=(0.6, 0.9, 1.1, 1.4), n=3000, seeds=4, steps=30, tilt=0.1, tilt_check=0.3,
                 limit_nus=(0.1, 0.5), limit_n=(100, 400, 1600), limit_seeds=3, limit_times=(0.0, 0.4, 0.8),
                 limit_lmax=63, limit_dt=0.02, limit_dt_refine=4)
FULL = Settings(ratios=(0.4, 0.6, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4, 1.6), n=10000, seeds=10, steps=60, tilt=0.1,
                tilt_check=0.3, limit_nus=(0.1, 0.5), limit_n=(250, 500, 1000, 2000, 4000, 8000), limit_seeds=10,
                limit_times=(0.0, 0.4, 0.8), limit_lmax=63, limit_dt=0.02, limit_dt_refine=4)


def particle_rate(nu, s: Settings, tilt, i_ratio):
    """Per-seed rates of the antithetic amplitude ``A(t)`` over ``t in [0, 1 / max(|sigma_1|, 0.2)]``.

    Seed ``k`` of ratio ``i_ratio``: uniform sample ``seed = 100 + 1000 i_ratio + k``, Brownian stream
    ``default_rng([seed, 1])`` (independent of the sample's; the same for both signs of the tilt).  Returns a dict: ``rates`` (per seed), their mean and
    95 % t half-width, ``sigma``, the times and the seed-mean amplitude.
    """
    sigma = stability.growth_rate(1, LAMBDAS, BETA, nu=nu)
    T = 1.0 / max(abs(sigma), 0.2)
    t = np.linspace(0.0, T, 6)
    system = mf.ParticleSystem(mf.scalar_heads(LAMBDAS, 3, beta=BETA), nu=nu)   # spectral sums from n = 2000
    amps = []
    for k in range(s.seeds):
        seed = 100 + 1000 * i_ratio + k
        X = mf.initial.uniform_sphere(s.n, 3, seed=seed)
        m = []
        for sign in (1.0, -1.0):
            Y = X + np.array([0.0, 0.0, sign * tilt])
            Y /= np.linalg.norm(Y, axis=1, keepdims=True)
            tr = mf.solve_particles(system, Y, T, step=StepControl(dt=T / s.steps),
                                    save=SaveAt(t_eval=t, observe=False), seed=np.random.default_rng([seed, 1]))
            m.append(tr.y[:, :, 2].mean(axis=1))
        amps.append(0.5 * (m[0] - m[1]))
    amps = np.array(amps)
    rates = np.array([fit_slope(t, A, log_y=True).slope for A in amps])
    mean, half = mean_ci(rates)
    return {"sigma": float(sigma), "rates": rates.tolist(), "rate": float(mean), "ci95": float(half),
            "t": t.tolist(), "amplitude": amps.mean(axis=0).tolist(), "min_amplitude": float(amps.min())}


def extrapolate(small, large, s: Settings):
    """The rate at tilt 0 from the two tilts, per seed (the same starts and paths at both tilts).

    The nonlinearity enters the fitted rate at order ``a^2`` (amplitude equation ``A' = sigma A - c A^3``
    over a window fixed by ``sigma``, and the ``O(a^2)`` harmonics of the tilted start), so
    ``(a_c^2 r(a) - a^2 r(a_c)) / (a_c^2 - a^2)`` removes it up to ``O(a^2 a_c^2)``; averaged over seeds
    with a t-interval (the pairing by seed carries the correlation of the two tilts).
    """
    a2, c2 = s.tilt**2, s.tilt_check**2
    per = (c2 * np.asarray(small["rates"]) - a2 * np.asarray(large["rates"])) / (c2 - a2)
    mean, half = mean_ci(per)
    return {"extrapolated_rate": float(mean), "extrapolated_ci95": float(half), "extrapolated_rates": per.tolist()}


def line_fit(nus, rates, level=0.95):
    """Least-squares line ``rate = slope nu + b``: slope, its t-interval and the zero ``nu_c`` with its
    delta-method t-interval (``m - 2`` degrees of freedom; the slope and the mean rate are uncorrelated)."""
    from scipy import stats

    nus, rates = np.asarray(nus, float), np.asarray(rates, float)
    f = fit_slope(nus, rates)
    m = nus.size
    q = stats.t.ppf(0.5 + level / 2, m - 2)
    resid = rates - (f.slope * nus + f.intercept)
    s2 = float(resid @ resid / (m - 2))
    ybar, xbar = rates.mean(), nus.mean()
    x0 = xbar - ybar / f.slope
    se_x0 = np.sqrt(s2 / m / f.slope**2 + ybar**2 * f.stderr**2 / f.slope**4)
    return {"slope": float(f.slope), "slope_ci95": float(q * f.stderr), "stderr": float(f.stderr),
            "intercept": float(f.intercept), "nu_c": float(x0), "nu_c_ci95": float(q * se_x0), "dof": m - 2}


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
    tic = time.perf_counter()
    rows = []
    for i, r in enumerate(s.ratios):
        nu = r * nu_c
        small, large = particle_rate(nu, s, s.tilt, i), particle_rate(nu, s, s.tilt_check, i)
        rows.append(dict(ratio=r, nu=nu, sigma=small["sigma"], particle_rate=small["rate"], ci95=small["ci95"],
                         rates=small["rates"], amplitude=small["amplitude"], t=small["t"],
                         min_amplitude=small["min_amplitude"], tilt_check_rate=large["rate"],
                         tilt_check_ci95=large["ci95"], tilt_check_rates=large["rates"],
                         tilt_check_amplitude=large["amplitude"], **extrapolate(small, large, s),
                         pde_rate=pde_rate(nu)))
        print(f"  nu / nu_c = {r}: sigma_1 {small['sigma']:+.4f}, particles {small['rate']:+.4f} +- "
              f"{small['ci95']:.4f} (tilt {s.tilt}), {large['rate']:+.4f} +- {large['ci95']:.4f} "
              f"(tilt {s.tilt_check})")
    nus = np.array([row["nu"] for row in rows])
    rates = np.array([row["particle_rate"] for row in rows])
    sig = np.array([row["sigma"] for row in rows])
    line = line_fit(nus, rates)
    line_check = line_fit(nus, [row["tilt_check_rate"] for row in rows])
    line_ext = line_fit(nus, [row["extrapolated_rate"] for row in rows])
    inside = [abs(row["particle_rate"] - row["sigma"]) <= row["ci95"] for row in rows]
    inside_ext = [abs(row["extrapolated_rate"] - row["sigma"]) <= row["extrapolated_ci95"] for row in rows]
    summary = {"nu_c": nu_c, "nu_c_particles": line["nu_c"], "nu_c_particles_ci95": line["nu_c_ci95"],
               "rate_slope_in_nu": line["slope"], "rate_slope_ci95": line["slope_ci95"], "line": line,
               "line_tilt_check": line_check, "line_extrapolated": line_ext, "slope_closed_form": -2.0,
               "rates_inside_ci": int(sum(inside)), "extrapolated_inside_ci": int(sum(inside_ext)), "n_rates": len(rows),
               "max_abs_rate_error_extrapolated": float(max(abs(row["extrapolated_rate"] - row["sigma"])
                                                            for row in rows)),
               "max_abs_rate_error_particles": float(np.max(np.abs(rates - sig))),
               "max_abs_rate_error_pde": float(max(abs(row["pde_rate"] - row["sigma"]) for row in rows)),
               "n": s.n, "seeds": s.seeds, "tilt": s.tilt, "tilt_check": s.tilt_check, "steps": s.steps,
               "part1_wall_seconds": time.perf_counter() - tic}
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
