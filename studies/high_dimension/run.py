"""High dimension: the continuum limit and the linear stability of the uniform state on S^{d-1} against d.

Two parts (MODEL.md "Other dimensions"; the paper's tokens live on S^{d-1} with d a transformer's width):

A. Continuum limit.  One mean exp head ``M = V = I``, ``beta = 1``; i.i.d. tokens from the axisymmetric
   density ``f(t) propto exp(sqrt(d) (t - 1))``, ``t = <x, e_d>`` (a von Mises-Fisher law whose polar-angle
   shift stays comparable to its ``1/sqrt(d)`` spread in every ``d``), evolved by ``ParticleSystem``
   (pairwise sums, RK4, ``dt = 0.025``) for ``d = 2, 3, 16, 128, 512``; the PDE is
   :class:`meanfield.models.axisymmetric.AxisymmetricPDE` (``lmax = 48``, dopri5 at rtol 1e-11, resolution
   monitored).  Particles and PDE are compared by the exact 1-D ``W2`` of the polar-angle marginals
   (a lower bound of the sphere's geodesic ``W2``), divided by the PDE's own displacement
   ``W2(rho(0), rho(T))`` so that the numbers are comparable across ``d``.  Several seeds per ``(d, n)``:
   means with 95 % confidence intervals (Student t).
B. Linear stability against d.  ``sigma_l(d)``, the most unstable degree ``l*`` and the critical noise
   ``nu_c`` for one head (``beta = 6``, mean and softmax) for ``d = 2 .. 512``, checked against the
   linearized PDEs (:class:`~meanfield.models.circle.CirclePDE` for ``d = 2``, ``AxisymmetricPDE`` otherwise)
   and the ``d -> infinity`` limit ``sigma_1 -> lambda`` (mean: ``l (l+d-2) m_l(a) / beta`` with
   ``m_l ~ (a/d)^l``).

Cost (one core): quick ~15 s, full ~7 min (10 seeds; 662 s measured on the loaded shared machine).  Run from the repo root::

    python -m studies.high_dimension.run [--quick]
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

import meanfield as mf
from meanfield.analysis import stability
from meanfield.analysis.axisymmetric import resolution_monitor, w2_marginal
from meanfield.core.axisymmetric import angle_quantiles, sample_axisymmetric
from meanfield.core.options import SaveAt, StepControl
from meanfield.models.axisymmetric import AxisymmetricPDE
from meanfield.models.circle import CirclePDE
from studies._common import fit_slope, main, save_json

LMAX = 48          # Gegenbauer degree of the PDE: spectral tail < 1e-3 up to T for every d (monitored)
DT = 0.025         # particle RK4 step: RK4 error (dt * |rate| ~ 0.05)^4 ~ 1e-5, far below the W2 measured
BETA_A, LAMBDA_A = 1.0, 1.0
BETA_B = 6.0
EPS = 1e-5         # central-difference amplitude of the measured growth rates (error O(eps^2) + round-off/eps)


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    dims: tuple          # A: dimensions
    ns: tuple            # A: token counts
    seeds: tuple         # A: seeds per (d, n)
    times: tuple         # A: comparison times (the last is T)
    theory_dims: tuple   # B: dimensions of the growth-rate table
    degrees: int         # B: degrees 1..degrees


QUICK = Settings(dims=(2, 3, 16), ns=(200,), seeds=(1, 2), times=(0.0, 0.25, 0.5), theory_dims=(2, 3, 8, 64),
                 degrees=8)
FULL = Settings(dims=(2, 3, 16, 128, 512), ns=(250, 1000), seeds=tuple(range(1, 11)), times=(0.0, 0.25, 0.5, 0.75),
                theory_dims=(2, 3, 4, 8, 16, 32, 64, 128, 256, 512), degrees=12)


def profile_for(d):
    kappa = np.sqrt(d)
    return lambda t: np.exp(kappa * (np.asarray(t) - 1.0))


def ci95(x):
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return float(x.mean()), float("nan")
    return float(x.mean()), float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))


def w2_profiles(p, q, d, m=20000):
    """Exact 1-D W2 between the polar-angle marginals of two axisymmetric densities (quantiles)."""
    levels = (np.arange(m) + 0.5) / m
    return float(np.sqrt(np.mean((angle_quantiles(p, d, levels) - angle_quantiles(q, d, levels)) ** 2)))


def continuum_limit(d, ns, seeds, times):
    heads = mf.scalar_heads([LAMBDA_A], d, beta=BETA_A)
    pde = AxisymmetricPDE(heads, d, LMAX)
    prof = profile_for(d)
    b0 = pde.project_profile(prof)
    b0 /= b0[0]
    T = times[-1]
    tr = mf.integrate(pde.rhs, pde.state(b0), (0.0, T), step=StepControl(rtol=1e-11, atol=1e-13),
                      save=SaveAt(t_eval=list(times)), method="dopri5", event=resolution_monitor(pde))
    if tr.status != 0:
        raise RuntimeError(f"d = {d}: PDE not resolved up to T = {T}: {tr.message}")
    dens = [lambda t, y=y: np.maximum(pde.evaluate(y, t), 0.0) for y in tr.y]
    neg = max(pde.negative_mass(y) for y in tr.y)
    tails = [pde.spectral_tail(y) for y in tr.y]
    disp = w2_profiles(dens[0], dens[-1], d)
    system = mf.ParticleSystem(heads, summation="direct")
    rows = []
    for n in ns:
        for seed in seeds:
            X0 = sample_axisymmetric(prof, n, d, seed=1000 * d + seed)
            pt = mf.solve_particles(system, X0, T, step=StepControl(dt=DT),
                                    save=SaveAt(t_eval=list(times), observe=False), method="rk4")
            w = [w2_marginal(X, dens[i]) for i, X in enumerate(pt.y)]
            rows.append(dict(d=d, n=n, seed=seed, w2=w, rel=[x / disp for x in w]))
    return dict(d=d, T=T, displacement=disp, negative_mass=neg, spectral_tail=tails, rows=rows,
                axis_moment_pde=[float(pde.evaluate(y, pde.nodes) @ (pde.weights * pde.nodes)) for y in tr.y])


def summarize_limit(parts, ns):
    out = []
    for p in parts:
        for n in ns:
            rows = [r for r in p["rows"] if r["n"] == n]
            rel = np.array([r["rel"] for r in rows])          # seeds x times
            growth = rel[:, -1] / rel[:, 0]
            out.append(dict(d=p["d"], n=n, rel_T=ci95(rel[:, -1]), rel_0=ci95(rel[:, 0]), growth=ci95(growth),
                            sqrt_d_w2_T=ci95(np.sqrt(p["d"]) * np.array([r["w2"][-1] for r in rows]))))
    return out


def theory_table(dims, degrees):
    ell = np.arange(1, degrees + 1)
    table = []
    for d in dims:
        row = dict(d=d)
        for norm in ("mean", "softmax"):
            sigma = stability.growth_rate(ell, [1.0], BETA_B, norm, d=d)
            heads = mf.scalar_heads([1.0], d, beta=BETA_B, normalization=norm)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pde = CirclePDE(heads, degrees + 30) if d == 2 else AxisymmetricPDE(heads, d, degrees + 30)
            u = pde.uniform()
            meas = []
            for k in ell:
                v = u.copy()
                v[k] = EPS
                meas.append(float(np.real(pde.tendency(v)[k] - pde.tendency(2 * u - v)[k])) / (2 * EPS))
            row[norm] = dict(sigma=sigma.tolist(), measured=meas,
                             rel_err=float(np.max(np.abs(np.array(meas) - sigma) / np.abs(sigma).max())),
                             l_star=stability.most_unstable_degree([1.0], BETA_B, norm, d=d),
                             nu_c=stability.critical_noise([1.0], BETA_B, norm, d=d))
        table.append(row)
    return table


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = QUICK if quick else FULL
    parts = [continuum_limit(d, cfg.ns, cfg.seeds, cfg.times) for d in cfg.dims]
    limit = summarize_limit(parts, cfg.ns)
    slopes = {}
    if len(cfg.ns) > 1:
        for p in parts:
            ws = [[r["w2"][-1] for r in p["rows"] if r["n"] == n] for n in cfg.ns]
            fit = fit_slope(np.repeat(cfg.ns, len(cfg.seeds)), np.concatenate(ws), log_x=True, log_y=True)
            slopes[p["d"]] = dict(slope=fit.slope, stderr=fit.stderr)
    table = theory_table(cfg.theory_dims, cfg.degrees)
    data = dict(quick=quick, parts=parts, limit=limit, n_slopes=slopes, theory=table,
                settings=dict(dims=cfg.dims, ns=cfg.ns, seeds=cfg.seeds, times=cfg.times, lmax=LMAX, dt=DT,
                              beta_a=BETA_A, lambda_a=LAMBDA_A, beta_b=BETA_B, eps=EPS))
    save_json(out_dir / "data.json", data)
    nmax = max(cfg.ns)
    big = [r for r in limit if r["n"] == nmax]
    return dict(rel_w2_T={r["d"]: r["rel_T"][0] for r in big}, growth={r["d"]: r["growth"][0] for r in big},
                n_slopes={d: s["slope"] for d, s in slopes.items()},
                l_star_mean={r["d"]: r["mean"]["l_star"] for r in table},
                sigma1_mean={r["d"]: r["mean"]["sigma"][0] for r in table},
                theory_max_rel_err=max(max(r["mean"]["rel_err"], r["softmax"]["rel_err"]) for r in table),
                max_spectral_tail=max(max(p["spectral_tail"]) for p in parts),
                max_negative_mass=max(p["negative_mass"] for p in parts))


if __name__ == "__main__":
    from studies.high_dimension.report import report

    main(run, report, Path(__file__).parent / "output", __doc__)
