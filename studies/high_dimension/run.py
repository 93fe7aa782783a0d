"""High dimension: the continuum limit and the linear stability of the uniform state on S^{d-1} against d.

Two parts (MODEL.md "Other dimensions"; the paper's tokens live on S^{d-1} with d a transformer's width):

A. Continuum limit.  One mean exp head ``M = V = I``, ``beta = 1``; i.i.d. tokens from the axisymmetric
   density ``f(t) propto exp(sqrt(d) (t - 1))``, ``t = <x, e_d>`` (a von Mises-Fisher law whose polar-angle
   shift stays comparable to its ``1/sqrt(d)`` spread in every ``d``), evolved by ``ParticleSystem``
   (pairwise sums, RK4, ``dt = 0.025``) for ``d = 2, 3, 16, 128, 512``; the PDE is
   :class:`meanfield.models.axisymmetric.AxisymmetricPDE` (``lmax = 48``, dopri5 at rtol 1e-11, resolution
   monitored).  Particles and PDE are compared by the exact 1-D ``W2`` of the polar-angle marginals
   (a lower bound of the sphere's geodesic ``W2``), divided by the PDE's own displacement
   ``W2(rho(0), rho(T))`` so that the numbers are comparable across ``d``.  Ten seeds per ``(d, n)`` (a fresh
   draw for every ``(d, n, seed)``: no sample is a prefix of another), ``n = 125 .. 1000`` (four values,
   factor 2 apart).  Three tests, each of which could fail: the slope of ``log W2(T)`` against ``log n`` in
   every ``d`` (least squares over all runs, 95 % Student-t interval with ``runs - 2`` degrees of
   freedom: it must exclude 0 and contain -1/2); equal levels across ``d`` (the mean of
   ``log W2(T)/displacement`` over the runs of each ``d``, i.e. each ``d``'s fitted line at the geometric
   mean of the ``n``; an F-test against the pooled residual variance of the per-``d`` lines, ``k - 1`` and
   ``N - 2k`` degrees of freedom); and no trend of the amplification ``W2(T)/W2(0)`` with ``d`` (slope of its
   logarithm against ``log d`` at the largest ``n``, 95 % t-interval).  A cheap replicate of the ``t = 0``
   sampling error alone (40 fresh seeds per ``(d, n)``, no flow) tells a property of ``d`` from one of the draw.
B. Linear stability against d.  ``sigma_l(d)``, the most unstable degree ``l*`` and the critical noise
   ``nu_c`` for one head (``beta = 6``, mean and softmax) for ``d = 2 .. 512``, checked against the
   linearized PDEs (:class:`~meanfield.models.circle.CirclePDE` for ``d = 2``, ``AxisymmetricPDE`` otherwise)
   and against an independent quadrature of the Funk-Hecke integral (:func:`sigma_quadrature`: Gauss-Jacobi
   in ``t`` with weight ``(1 - t^2)^{(d-3)/2}``, scipy's ``eval_gegenbauer``; above ``d = 100`` the closed
   form and the PDE share ``funk_hecke_normalized``, so only the quadrature checks the multipliers there),
   and the ``d -> infinity`` limit ``sigma_1 -> lambda`` (mean: ``l (l+d-2) m_l(a) / beta`` with
   ``m_l ~ (a/d)^l``).

Cost (one core): quick ~15 s; full ~3 min of CPU (175 s), 10-12 min wall measured on the loaded shared machine
(d = 512 at n = 1000 is ~11 s a run; n = 2000 would be ~75 s a run, 12 min for its ten seeds alone, hence n <= 1000).  Run from the repo root::

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
from meanfield.analysis.axisymmetric import reduced_resolution_monitor, w2_marginal
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
QUAD_NODES = 80    # Gauss-Jacobi nodes of the independent Funk-Hecke quadrature (exact for degree < 160; exp(6 t)
                   # truncated there at 6^160 / 160! ~ 1e-160): measured agreement ~1e-13 of max|sigma_l|
TOL_PDE = 1e-8     # linearized PDE vs closed form, relative to max|sigma_l|: O(eps^2) = 1e-10 plus round-off/eps ~ 1e-11
TOL_QUAD = 1e-10   # quadrature vs closed form, relative to max|sigma_l|: round-off of sum exp(a t) R_l(t) w with
                   # e^a = e^6 ~ 400 (~1e-13), 1000x margin; a wrong factor (d, l + d - 2, a/2) is O(1)
ALPHA = 0.05       # level of every test (95 % intervals)


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    dims: tuple          # A: dimensions
    ns: tuple            # A: token counts
    seeds: tuple         # A: seeds per (d, n)
    times: tuple         # A: comparison times (the last is T)
    theory_dims: tuple   # B: dimensions of the growth-rate table
    degrees: int         # B: degrees 1..degrees
    replicate_seeds: tuple  # A: fresh seeds of the t = 0 replicate (i.i.d. sampling error only, no flow)


QUICK = Settings(dims=(2, 3, 16), ns=(100, 200, 400), seeds=(1, 2, 3), times=(0.0, 0.25, 0.5),
                 theory_dims=(2, 3, 8, 64, 128), degrees=8, replicate_seeds=(11, 12, 13))
FULL = Settings(dims=(2, 3, 16, 128, 512), ns=(125, 250, 500, 1000), seeds=tuple(range(1, 11)),
                times=(0.0, 0.25, 0.5, 0.75),
                theory_dims=(2, 3, 4, 8, 16, 32, 64, 128, 256, 512), degrees=12, replicate_seeds=tuple(range(11, 51)))


def profile_for(d):
    kappa = np.sqrt(d)
    return lambda t: np.exp(kappa * (np.asarray(t) - 1.0))


def ci95(x):
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return float(x.mean()), float("nan")
    return float(x.mean()), float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))


def t_half(stderr, dof):
    """Half-width of the two-sided ``1 - ALPHA`` Student-t interval of an estimate with ``dof`` degrees of freedom."""
    return float(stats.t.ppf(1 - ALPHA / 2, dof) * stderr) if dof > 0 else float("nan")


def slope_ci(x, y):
    """Least-squares slope of ``log y`` against ``log x`` over all points, with its t-interval (``m - 2`` dof)."""
    fit = fit_slope(x, y, log_x=True, log_y=True)
    dof = fit.n_points - 2
    return dict(slope=fit.slope, stderr=fit.stderr, dof=dof, half=t_half(fit.stderr, dof))


def level_test(parts, ns):
    """Equal levels of ``log(W2(T) / displacement)`` across ``d`` (ANCOVA with one line per ``d``).

    Every ``d`` has the same design (each ``n`` with the same seeds), so the mean of ``Y = log rel_T`` over its
    runs is its fitted line at the mean ``log n`` (the geometric mean of ``ns``).  The residual variance
    ``s^2`` is pooled over the per-``d`` lines (``N - 2k`` dof); ``F = [sum_d N_d (Ybar_d - Ybar)^2 / (k - 1)] / s^2``.
    """
    ys, xs = [], []
    for p in parts:
        rows = [r for r in p["rows"] if r["n"] in ns]
        ys.append(np.log([r["rel"][-1] for r in rows]))
        xs.append(np.log([r["n"] for r in rows]))
    k, big_n = len(ys), sum(y.size for y in ys)
    ss = 0.0
    for x, y in zip(xs, ys):
        b, a = np.polyfit(x, y, 1)
        ss += float(np.sum((y - (a + b * x)) ** 2))
    dof = big_n - 2 * k
    s2 = ss / dof
    means = np.array([y.mean() for y in ys])
    grand = np.concatenate(ys).mean()
    f = float(sum(y.size * (m - grand) ** 2 for y, m in zip(ys, means)) / (k - 1) / s2) if k > 1 else float("nan")
    p_value = float(stats.f.sf(f, k - 1, dof)) if k > 1 else float("nan")
    half = [t_half(np.sqrt(s2 / y.size), dof) for y in ys]
    return dict(dims=[p["d"] for p in parts], n_ref=float(np.exp(np.mean(np.log(ns)))),
                level=[float(np.exp(m)) for m in means], low=[float(np.exp(m - h)) for m, h in zip(means, half)],
                high=[float(np.exp(m + h)) for m, h in zip(means, half)], F=f, dof=(k - 1, dof), p=p_value)


def level_tests(parts, ns):
    """:func:`level_test` over all ``d``, then over ``d >= d0`` for each larger ``d0`` (at least two ``d``)."""
    return [dict(d0=parts[i]["d"], **level_test(parts[i:], ns)) for i in range(len(parts) - 1)]


def growth_trend(parts, n):
    """Slope of ``log(W2(T) / W2(0))`` against ``log d`` over the runs at ``n`` (t-interval, ``runs - 2`` dof)."""
    dd, g = [], []
    for p in parts:
        for r in p["rows"]:
            if r["n"] == n:
                dd.append(p["d"])
                g.append(r["w2"][-1] / r["w2"][0])
    return dict(n=n, **slope_ci(dd, g))


def sigma_quadrature(ell, lam, beta, d, normalization, nodes=QUAD_NODES):
    """``sigma_l`` from the Funk-Hecke integral by Gauss-Jacobi quadrature, independent of ``meanfield``.

    ``m_l(a) = int exp(a t) R_l(t) (1 - t^2)^((d-3)/2) dt / int (1 - t^2)^((d-3)/2) dt`` with ``a = beta lambda``,
    ``R_l = C_l^((d-2)/2) / C_l^((d-2)/2)(1)`` (scipy's ``eval_gegenbauer``; ``T_l``, ``eval_chebyt``, for
    ``d = 2``), nodes and weights from scipy's ``roots_jacobi`` (alpha = beta = (d-3)/2); then
    ``sigma_l = l (l + d - 2) m_l / beta`` (mean) or ``l (l + d - 2) m_l / (beta m_0)`` (softmax), no noise.
    """
    from scipy.special import eval_chebyt, eval_gegenbauer, roots_jacobi

    ell = np.asarray(ell)
    t, w = roots_jacobi(nodes, (d - 3) / 2, (d - 3) / 2)
    w = w / w.sum()
    degrees = np.arange(int(ell.max()) + 1)
    if d == 2:
        R = np.array([eval_chebyt(k, t) for k in degrees])
    else:
        g = (d - 2) / 2
        R = np.array([eval_gegenbauer(k, g, t) / eval_gegenbauer(k, g, 1.0) for k in degrees])
    m = R @ (w * np.exp(beta * lam * t))
    term = m[ell] if normalization == "mean" else m[ell] / m[0]
    return ell * (ell + d - 2) * term / beta


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
                      save=SaveAt(t_eval=list(times)), method="dopri5", event=reduced_resolution_monitor(pde))
    if tr.status != 0:
        raise RuntimeError(f"d = {d}: PDE not resolved up to T = {T}: {tr.message}")
    dens = [lambda t, y=y: np.maximum(pde.evaluate(y, t), 0.0) for y in tr.y]
    neg = max(pde.negative_mass(y) for y in tr.y)
    tails = [pde.spectral_tail(y) for y in tr.y]
    disp = w2_profiles(dens[0], dens[-1], d)
    system = mf.ParticleSystem(heads, summation="direct")
    rows = []
    for i, n in enumerate(ns):
        for seed in seeds:   # a fresh draw per (d, n, seed): the n-samples are independent, not prefixes
            X0 = sample_axisymmetric(prof, n, d, seed=1000 * d + 100 * i + seed)
            pt = mf.solve_particles(system, X0, T, step=StepControl(dt=DT),
                                    save=SaveAt(t_eval=list(times), observe=False), method="rk4")
            w = [w2_marginal(X, dens[i]) for i, X in enumerate(pt.y)]
            rows.append(dict(d=d, n=n, seed=seed, w2=w, rel=[x / disp for x in w]))
    return dict(d=d, T=T, displacement=disp, negative_mass=neg, spectral_tail=tails, rows=rows,
                axis_moment_pde=[float(pde.evaluate(y, pde.nodes) @ (pde.weights * pde.nodes)) for y in tr.y])


def sampling_replicate(d, ns, seeds):
    """Slope of ``log W2`` against ``log n`` of i.i.d. samples against their own density (``t = 0``, no flow).

    An independent replicate of the sampling error that the flow carries to ``T``: fresh draws (seeds disjoint
    from the particle runs'), the exact profile instead of its Gegenbauer projection; cheap (no dynamics), so
    with more seeds than the runs.
    """
    prof = profile_for(d)
    x, y = [], []
    for i, n in enumerate(ns):
        for seed in seeds:
            x.append(n)
            y.append(w2_marginal(sample_axisymmetric(prof, n, d, seed=5_000_000 + 1000 * d + 100 * i + seed), prof))
    return dict(d=d, seeds=len(seeds), **slope_ci(x, y))


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
            quad = sigma_quadrature(ell, 1.0, BETA_B, d, norm)
            row[norm] = dict(sigma=sigma.tolist(), measured=meas, quadrature=quad.tolist(),
                             rel_err=float(np.max(np.abs(np.array(meas) - sigma) / np.abs(sigma).max())),
                             quad_err=float(np.max(np.abs(quad - sigma) / np.abs(sigma).max())),
                             l_star_quad=int(ell[np.argmax(quad)]),
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
    for p in parts:   # log W2 against log n over all runs of this d, at T and (the i.i.d. sampling) at t = 0
        ns_runs = [r["n"] for r in p["rows"]]
        slopes[p["d"]] = dict(T=slope_ci(ns_runs, [r["w2"][-1] for r in p["rows"]]),
                              t0=slope_ci(ns_runs, [r["w2"][0] for r in p["rows"]]))
    table = theory_table(cfg.theory_dims, cfg.degrees)
    replicate = [sampling_replicate(d, cfg.ns, cfg.replicate_seeds) for d in cfg.dims]
    data = dict(quick=quick, parts=parts, limit=limit, n_slopes=slopes, levels=level_tests(parts, cfg.ns),
                replicate=replicate,
                growth_trend=growth_trend(parts, max(cfg.ns)), theory=table,
                settings=dict(dims=cfg.dims, ns=cfg.ns, seeds=cfg.seeds, times=cfg.times, lmax=LMAX, dt=DT,
                              beta_a=BETA_A, lambda_a=LAMBDA_A, beta_b=BETA_B, eps=EPS, quad_nodes=QUAD_NODES,
                              tol_pde=TOL_PDE, tol_quad=TOL_QUAD, alpha=ALPHA))
    save_json(out_dir / "data.json", data)
    nmax = max(cfg.ns)
    big = [r for r in limit if r["n"] == nmax]
    return dict(rel_w2_T={r["d"]: r["rel_T"][0] for r in big}, growth={r["d"]: r["growth"][0] for r in big},
                n_slopes={d: s["T"]["slope"] for d, s in slopes.items()},
                n_slope_half={d: s["T"]["half"] for d, s in slopes.items()},
                replicate_slopes={r["d"]: r["slope"] for r in replicate}, level_p=data["levels"][0]["p"], growth_slope=data["growth_trend"]["slope"],
                quad_max_rel_err=max(max(r["mean"]["quad_err"], r["softmax"]["quad_err"]) for r in table),
                l_star_quad={r["d"]: r["mean"]["l_star_quad"] for r in table},
                l_star_mean={r["d"]: r["mean"]["l_star"] for r in table},
                sigma1_mean={r["d"]: r["mean"]["sigma"][0] for r in table},
                theory_max_rel_err=max(max(r["mean"]["rel_err"], r["softmax"]["rel_err"]) for r in table),
                max_spectral_tail=max(max(p["spectral_tail"]) for p in parts),
                max_negative_mass=max(p["negative_mass"] for p in parts))


if __name__ == "__main__":
    from studies.high_dimension.report import report

    main(run, report, Path(__file__).parent / "output", __doc__)
