"""Linear stability of the uniform density on S^2: measured growth rates vs the exact sigma_l.

Four parts (MODEL.md section 3, "Exact linear stability of the uniform state"):

A. PDE rates.  ``ContinuumPDE`` started from ``1/(4 pi) + eps Y_lm`` (``eps = 1e-7``, one degree per
   run), integrated with fixed-step RK4 (``|sigma_l| dt <= 0.05``); the slope of ``log|rho_lm(t)|``
   is compared with :func:`meanfield.analysis.stability.growth_rate` for mean/softmax heads, with and without
   noise ``nu``, one and several heads (``lambda`` of either sign).
B. Particle rates.  Tokens sampled (stratified) from ``1/(4 pi) + eps Y_l0`` (``eps = 1e-3``), evolved
   for ``t = 2/sigma_l``; the slope of the empirical moment ``(1/n) sum_j conj(Y_l0(x_j))`` is compared
   with ``sigma_l`` (d = 3, beta = 6, one mean head: 9.34, 19.61, 23.35, 19.97, ...).  Small ``n`` runs
   use pairwise sums (``summation="direct"``); ``n = 20000`` (and i.i.d. uniform samples up to
   ``n = 1e5``) evaluate the *same* particle velocity by its Funk-Hecke expansion
   (``ParticleSystem(summation="spectral")``, O(n + lmax^2 log lmax); checked against the pairwise
   sums to ~1e-12).
C. Cluster count vs the most unstable degree ``l*`` for beta = 2..40: i.i.d. uniform tokens evolved
   until metastable clusters have formed; the count of macroscopic clusters is compared with ``l*``,
   ``sqrt(2 beta)``, the number of maxima of a random degree-``l*`` field (Monte Carlo) and the
   number of maxima of the linearly evolved initial empirical measure.  Every beta is run with
   ``cluster_seeds`` independent token draws (full: 10); counts and ratios are reported as means
   with 95 % Student-t confidence intervals over the seeds (the Monte Carlo maxima too, over fields).
D. Critical noise.  PDE runs at ``nu = r nu_c`` (``r`` just below/above 1): the critical degree grows
   below ``nu_c`` and every degree decays above it.

Cost (2 shared cores): quick ~15-25 s, full ~5-8 min (load-dependent; part C is 100 runs of ~2 s).  Run from the repo root::

    python -m studies.linear_stability.run [--quick]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

import meanfield as mf
from meanfield.analysis import stability
from meanfield.analysis.clustering import clustering
from meanfield.core.options import SaveAt, StepControl
from studies._common import fit_slope, main, save_json

SIGMA_DT = 0.05        # |sigma| dt per RK4 step: RK4 rate error (sigma dt)^4 / 120 = 5e-8
PDE_EPS = 1e-7         # PDE perturbation of (l, m = l // 2): products of Y_lm have orders 0 and 2m, so
#                        feedback into (l, m) is cubic, O(eps^2 e^{2 sigma T}) ~ 1e-11; round-off ~1e-17/eps
PARTICLE_EPS = 1e-3    # particle perturbation (n = 20000): >> stratified sampling error, << 1/sqrt(4 pi)
SPECTRAL_TOL = 1e-10  # accuracy of the spectral particle sums, relative to the aggregates (fastsum)
DIRECT_EPS = {1: 1e-2, 2: 3e-3}   # small-n direct runs: larger eps beats the larger sampling error;
#                                   odd l has no quadratic self-feedback (Y_l0^2 has even degrees only)
PDE_CASES = [
    dict(name="mean, 1 head", lambdas=[1.0], beta=6.0, normalization="mean", nu=0.0),
    dict(name="softmax, 1 head", lambdas=[1.0], beta=6.0, normalization="softmax", nu=0.0),
    dict(name="mean, 1 head, nu=0.5", lambdas=[1.0], beta=6.0, normalization="mean", nu=0.5),
    dict(name="softmax, 1 head, nu=0.06", lambdas=[1.0], beta=6.0, normalization="softmax", nu=0.06),
    dict(name="mean, 3 heads (1, -0.6, 0.4)", lambdas=[1.0, -0.6, 0.4], beta=5.0, normalization="mean", nu=0.0),
    dict(name="softmax, 2 heads (1.2, -0.8), nu=0.02", lambdas=[1.2, -0.8], beta=4.0, normalization="softmax",
         nu=0.02),
]
CRIT_CASES = [
    dict(name="mean, 1 head, beta=3", lambdas=[1.0], beta=3.0, normalization="mean"),
    dict(name="softmax, 1 head, beta=6", lambdas=[1.0], beta=6.0, normalization="softmax"),
    dict(name="mean, heads (1, -1.5), beta=3", lambdas=[1.0, -1.5], beta=3.0, normalization="mean"),
]


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    pde_cases: tuple        # A: indices into PDE_CASES ...
    pde_degrees: tuple      # ... and the degrees l measured in each
    rhs_check_n: int        # B: tokens of the spectral-vs-pairwise velocity check
    direct: tuple           # B: pairwise-sum runs, one (l, n, seed) each (eps = DIRECT_EPS[l])
    big_degrees: tuple      # B: spectral-sum runs at n = big_n: degrees x seeds
    big_seeds: tuple
    big_n: int
    power_ns: tuple         # B: i.i.d. uniform runs (degree powers), one per n
    cluster_betas: tuple    # C: cluster runs at each beta ...
    cluster_seeds: int      # ... with this many token draws (seeds) per beta ...
    cluster_n: int          # ... of this many tokens
    maxima_degrees: tuple   # C: random single-degree fields (degrees, samples per degree)
    maxima_samples: int
    crit_cases: tuple       # D: indices into CRIT_CASES, noise ratios nu / nu_c, degrees
    crit_ratios: tuple
    crit_degrees: tuple


QUICK = Settings(pde_cases=(0, 2, 4), pde_degrees=(1, 3, 5), rhs_check_n=300, direct=((1, 1000, 1),),
                 big_degrees=(), big_seeds=(11, 12), big_n=20000, power_ns=(), cluster_betas=(8.0,), cluster_seeds=10,
                 cluster_n=600,
                 maxima_degrees=tuple(range(1, 6)), maxima_samples=5, crit_cases=(0,), crit_ratios=(0.98, 1.02),
                 crit_degrees=(1, 2))
FULL = Settings(pde_cases=tuple(range(len(PDE_CASES))), pde_degrees=tuple(range(1, 7)), rhs_check_n=1000,
                direct=((1, 2000, 1), (1, 2000, 2), (1, 2000, 3), (2, 2000, 4)),
                big_degrees=tuple(range(1, 7)), big_seeds=(11, 12), big_n=20000, power_ns=(20000, 100000),
                cluster_betas=(2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 40.0), cluster_seeds=10,
                cluster_n=2000,
                maxima_degrees=tuple(range(1, 11)), maxima_samples=40, crit_cases=tuple(range(len(CRIT_CASES))),
                crit_ratios=(0.9, 0.98, 1.02, 1.1), crit_degrees=(1, 2, 3, 4))


# ----------------------------------------------------------------------------- helpers
def kernel_lmax(lambdas, beta, tol=1e-10):
    """Smallest lmax for which ``ContinuumPDE`` accepts every head at ``kernel_tol = tol``
    (the PDE's own rule: :func:`meanfield.required_lmax` with ``criterion="pde"``)."""
    return mf.required_lmax(mf.scalar_heads(lambdas, 3, beta=beta), tol, criterion="pde")


def rk4_rate(sigma, dt):
    """Rate ``log R(sigma dt) / dt`` that fixed-step RK4 gives a mode of exact rate ``sigma``."""
    z = sigma * dt
    return np.log(1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24) / dt


def slope(t, a):
    """Least-squares slope of ``log|a|`` against ``t``."""
    return fit_slope(t, np.abs(a), log_y=True).slope


def pde_rate(lambdas, beta, normalization, nu, l, m, t_cap=2.0):
    """Measured and exact growth rate of the degree-``l`` mode ``(l, m)`` in one PDE run."""
    sigma = float(stability.growth_rate(l, lambdas, beta, normalization, nu))
    lmax = max(kernel_lmax(lambdas, beta), l + 2)
    pde = mf.ContinuumPDE(mf.scalar_heads(lambdas, 3, beta=beta, normalization=normalization), lmax, nu=nu)
    # horizon: 3 e-folds of the mode, but also of the fastest unstable degree, whose round-off
    # seeds (1e-17) would otherwise grow and feed the measured mode through the nonlinearity
    s_all = stability.growth_rate(np.arange(1, lmax + 1), lambdas, beta, normalization, nu).max()
    T = min(3.0 / abs(sigma), 3.0 / s_all if s_all > 0 else np.inf, t_cap)
    dt = min(SIGMA_DT / abs(sigma), 2.5 / (nu * lmax * (lmax + 1)) if nu else np.inf)
    steps = int(np.ceil(T / dt))
    t = np.linspace(0.0, T, 11)
    rho0 = mf.densities.perturbed_uniform(pde.grid, {(l, m): PDE_EPS})
    tr = mf.solve_continuum(pde, rho0, T, step=StepControl(dt=T / steps), save=SaveAt(t_eval=t, observe=False),
                            method="rk4", monitor=False)
    a = np.array([pde.coefficients(y)[pde.grid.index(l, m)] for y in tr.y])
    return dict(l=l, m=m, sigma=sigma, measured=slope(t, a), rk4=float(rk4_rate(sigma, T / steps)), T=T,
                lmax=lmax)


def ci95(x):
    """Mean and half-width of the 95 % Student-t confidence interval of the mean of ``x`` (nan for < 2)."""
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return float(x.mean()), float("nan")
    return float(x.mean()), float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))


def particle_system(lambdas, beta, normalization="mean", direct=False):
    """Tokens on S^2 with heads ``lambda_h I``: pairwise sums, or spectral (Funk-Hecke) sums to
    ``SPECTRAL_TOL`` (the same velocity, O(n + lmax^2 log lmax))."""
    heads = mf.scalar_heads(list(lambdas), 3, beta=beta, normalization=normalization)
    return mf.ParticleSystem(heads, summation="direct" if direct else "spectral", kernel_tol=SPECTRAL_TOL)


def moments(grid, Xs):
    """Empirical moments ``(1/n) sum_j conj(Y_lm(x_j))`` of each configuration, shape (T, nalm)."""
    return np.array([grid.adjoint_at(X, np.full(X.shape[0], 1.0 / X.shape[0])) for X in Xs])


# ----------------------------------------------------------------------------- part B
def particle_rate(l, n, seed, eps=PARTICLE_EPS, lambdas=(1.0,), beta=6.0, direct=False, lmax_sample=24,
                  T=None):
    """Growth rate of ``mu_l0`` from tokens sampled from ``1/(4 pi) + eps Y_l0`` (mean normalization).

    Evolved up to ``T`` (default ``2 / sigma_l``); ``init_error = |mu_l0(0) - eps| / eps`` is the
    relative sampling error of the initial moment.
    """
    sigma = float(stability.growth_rate(l, list(lambdas), beta))
    grid = mf.SphereGrid(lmax_sample)
    X0 = mf.densities.sample_particles(grid, mf.densities.perturbed_uniform(grid, {(l, 0): eps}), n,
                                       method="stratified", seed=seed)
    T = 2.0 / sigma if T is None else T
    t = np.linspace(0.0, T, 9)
    tr = mf.solve_particles(particle_system(lambdas, beta, direct=direct), X0, T, step=StepControl(dt=T / 8),
                            save=SaveAt(t_eval=t, observe=False), method="rk4")
    A = moments(grid, tr.y)
    a = A[:, grid.index(l, 0)]
    return dict(l=l, n=n, seed=seed, eps=eps, direct=direct, sigma=sigma, measured=slope(t, a.real),
                init_error=float(abs(a[0] - eps) / eps))


def uniform_power_rates(n, seed, degrees, beta=6.0):
    """Rates of the degree power ``sum_m |mu_lm|^2`` (half its log-slope) from i.i.d. uniform tokens."""
    lmax = kernel_lmax([1.0], beta)
    sig = stability.growth_rate(degrees, [1.0], beta)
    T = 1.5 / sig.max()
    t = np.linspace(0.0, T, 9)
    tr = mf.solve_particles(particle_system([1.0], beta), mf.initial.uniform_sphere(n, 3, seed=seed), T,
                            step=StepControl(dt=T / 8), save=SaveAt(t_eval=t, observe=False), method="rk4")
    grid = mf.SphereGrid(lmax)
    A = moments(grid, tr.y)
    out = []
    for l in degrees:
        sel = grid.l_index == l
        P = (np.abs(A[:, sel]) ** 2 * np.where(grid.m_index[sel] > 0, 2.0, 1.0)).sum(axis=1)
        out.append(fit_slope(t, 0.5 * np.log(P)).slope)
    return dict(n=n, seed=seed, degrees=list(degrees), sigma=sig, measured=out)


def rhs_check(n, seed, lambdas=(1.0, -0.5), beta=6.0):
    """Largest relative difference between the spectral and the pairwise particle velocity."""
    X = mf.initial.vmf_mixture(n, [[0, 0, 1.0], [1.0, 0, 0]], [4.0, 8.0], seed=seed)
    out = {}
    for norm in ("mean", "softmax"):
        v0 = particle_system(lambdas, beta, norm, direct=True).velocity(X)
        v1 = particle_system(lambdas, beta, norm).velocity(X)
        out[norm] = float(np.abs(v1 - v0).max() / np.abs(v0).max())
    return out


# ----------------------------------------------------------------------------- part C
def local_maxima(grid, f):
    """Number of grid nodes strictly above their 8 neighbours (rings wrap in phi and across the poles)."""
    half = grid.nlon // 2
    up = np.vstack([np.roll(f[:1], half, axis=1), f[:-1]])
    down = np.vstack([f[1:], np.roll(f[-1:], half, axis=1)])
    ok = np.ones(f.shape, dtype=bool)
    for row in (up, f, down):
        for s in (-1, 0, 1):
            nb = np.roll(row, s, axis=1)
            if row is f and s == 0:
                continue
            ok &= f > nb
    return int(ok.sum())


def random_field_maxima(degrees, samples, seed):
    """Number of local maxima of isotropic Gaussian fields of a single degree ``l``: per degree, the
    mean and the half-width of its 95 % confidence interval over ``samples`` fields."""
    rng = np.random.default_rng(seed)
    out = []
    for l in degrees:
        grid = mf.SphereGrid(max(6 * l, 12))
        sel = grid.l_index == l
        counts = []
        for _ in range(samples):
            a = np.zeros(grid.nalm, dtype=complex)
            a[sel] = rng.standard_normal(sel.sum()) + 1j * rng.standard_normal(sel.sum())
            a[sel & (grid.m_index == 0)] = a[sel & (grid.m_index == 0)].real * np.sqrt(2)
            counts.append(local_maxima(grid, grid.synthesis(a)))
        out.append(ci95(counts))
    return out


def macro_clusters(X, cos_threshold=0.99, min_fraction=0.01):
    """Connected components of ``<x_i, x_j> >= cos_threshold`` holding at least ``min_fraction`` of tokens."""
    G = X @ X.T >= cos_threshold
    _, labels = connected_components(csr_matrix(G), directed=False)
    sizes = np.bincount(labels)
    return int(np.sum(sizes >= min_fraction * X.shape[0]))


def cluster_run(beta, n, seed, t_mult=(4, 6, 8, 10, 12, 14)):
    """Evolve i.i.d. uniform tokens (one mean head) and count clusters at ``t = k / sigma_max``."""
    lmax = kernel_lmax([1.0], beta)
    ls = np.arange(1, lmax + 1)
    sig = stability.growth_rate(ls, [1.0], beta)
    lstar, smax = int(stability.most_unstable_degree([1.0], beta)), float(sig.max())
    X0 = mf.initial.uniform_sphere(n, 3, seed=seed)
    t = np.concatenate([[0.0], np.asarray(t_mult, float) / smax])
    tr = mf.solve_particles(particle_system([1.0], beta), X0, t[-1], step=StepControl(rtol=1e-6, atol=1e-9),
                            save=SaveAt(t_eval=t, observe=False), method="dopri5")
    counts = [macro_clusters(X) for X in tr.y[1:]]
    # linear prediction: the part grown since t = 0, sum_lm (e^{sigma_l t} - 1) mu_lm(0) Y_lm
    # (the static sampling noise mu_lm(0) is left out), taken when it first reaches the uniform
    # level 1/(4 pi); its local maxima (all, and those above uniform) are counted
    grid = mf.SphereGrid(lmax)
    mu0 = moments(grid, [X0])[0]
    rate = np.concatenate([[0.0], sig])

    def pert(tt):
        return grid.synthesis(grid.multiply_degree(mu0, np.expm1(rate * tt)))
    lo, hi = 0.0, 1.0 / smax
    while np.abs(pert(hi)).max() < 1 / (4 * np.pi):
        lo, hi = hi, 2.0 * hi
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.abs(pert(mid)).max() < 1 / (4 * np.pi) else (lo, mid)
    p = pert(hi)
    is_max = local_maxima(grid, p)
    above = local_maxima(grid, np.where(p > 0, p, p.min()))
    return dict(beta=beta, n=n, seed=seed, lmax=lmax, l_star=lstar, sigma_max=smax, t=t[1:], counts=counts,
                final=counts[-1], all_components=clustering(tr.y[-1], 0.99)["n_clusters"],
                t_linear=hi, linear_maxima=is_max, linear_maxima_positive=above, status=tr.status)


def cluster_stats(beta, n, seeds, maxima):
    """``cluster_run`` at one beta for each seed, and the statistics over seeds.

    ``maxima`` maps a degree to the (mean, half-width) Monte Carlo count of maxima of a random field of
    that degree, or lacks it.  Every statistic is a mean with the half-width of its 95 % Student-t
    confidence interval over the seeds: the final count (t = 14/sigma_max), the count at 4/sigma_max,
    the maxima of the linearly evolved sample, and the ratios of the final count to ``l*``, to the
    asymptotic maxima count ``l*(l*+1)/(2 sqrt 3)`` of a degree-``l*`` field and to the sample's linear
    maxima.  ``ratio_mc`` divides the mean count by the Monte Carlo maxima of degree ``l*``, with the
    two relative half-widths added in quadrature (independent samples).
    """
    runs = [cluster_run(beta, n, s) for s in seeds]
    lstar = runs[0]["l_star"]
    final = np.array([r["final"] for r in runs], float)
    early = np.array([r["counts"][0] for r in runs], float)
    lin = np.array([r["linear_maxima_positive"] for r in runs], float)
    pred = lstar * (lstar + 1) / (2 * np.sqrt(3))
    out = dict(beta=beta, n=n, seeds=list(seeds), l_star=lstar, sigma_max=runs[0]["sigma_max"],
               lmax=runs[0]["lmax"], t=runs[0]["t"], predicted=pred, runs=runs,
               final=ci95(final), early=ci95(early), linear_maxima_positive=ci95(lin),
               ratio_lstar=ci95(final / lstar), ratio_pred=ci95(final / pred), ratio_linear=ci95(final / lin),
               status_ok=all(r["status"] == 0 for r in runs))
    if lstar in maxima:
        m, hm = maxima[lstar]
        c, hc = out["final"]
        out["mc_maxima"] = [m, hm]
        out["ratio_mc"] = [c / m, c / m * float(np.hypot(hc / c if c else 0.0, hm / m))]
    return out


# ----------------------------------------------------------------------------- part D
def critical_runs(case, ratios, degrees):
    lam, beta, norm = case["lambdas"], case["beta"], case["normalization"]
    nu_c = stability.critical_noise(lam, beta, norm)
    rows = []
    for r in ratios:
        for l in degrees:
            res = pde_rate(lam, beta, norm, r * nu_c, l, l // 2)
            rows.append(dict(ratio=r, nu=r * nu_c, **res))
    bracket = stability.growth_rate(np.arange(1, 9), lam, beta, norm) / (np.arange(1, 9) * np.arange(2, 10))
    return dict(name=case["name"], nu_c=nu_c, l_c=int(np.argmax(bracket) + 1), rows=rows)


# ----------------------------------------------------------------------------- driver
def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = QUICK if quick else FULL
    # A. PDE rates
    cases = [PDE_CASES[i] for i in cfg.pde_cases]
    pde = []
    for c in cases:
        for l in cfg.pde_degrees:
            pde.append(dict(case=c["name"], **pde_rate(c["lambdas"], c["beta"], c["normalization"], c["nu"],
                                                        l, l // 2)))
    rel = [abs(r["measured"] / r["sigma"] - 1) for r in pde]
    rel_rk4 = [abs(r["measured"] / r["rk4"] - 1) for r in pde]
    # B. particle rates (d = 3, beta = 6, one mean head)
    check = rhs_check(cfg.rhs_check_n, 0)
    direct = [particle_rate(l, n, seed, DIRECT_EPS[l], direct=True) for l, n, seed in cfg.direct]
    # a common short horizon 2/sigma_max: products of the sampling noise in the fastest degrees
    # grow like e^{2 sigma_max t} and would swamp the slow degrees over 2/sigma_l
    s_max = float(stability.growth_rate(np.arange(1, 30), [1.0], 6.0).max())
    big = [particle_rate(l, cfg.big_n, seed, T=2.0 / s_max) for l in cfg.big_degrees for seed in cfg.big_seeds]
    power = [uniform_power_rates(n, 5, list(range(1, 7))) for n in cfg.power_ns]
    # C. clusters vs l*
    maxima_degrees = list(cfg.maxima_degrees)
    maxima = random_field_maxima(maxima_degrees, cfg.maxima_samples, 7)
    clusters = [cluster_stats(b, cfg.cluster_n, [1000 * (i + 1) + k for k in range(cfg.cluster_seeds)],
                              dict(zip(maxima_degrees, maxima))) for i, b in enumerate(cfg.cluster_betas)]
    # D. critical noise
    crit = [critical_runs(CRIT_CASES[i], cfg.crit_ratios, cfg.crit_degrees) for i in cfg.crit_cases]

    data = dict(quick=quick, pde=pde, pde_cases=cases, rhs_check=check, particle_direct=direct,
                particle_big=big, particle_power=power, clusters=clusters,
                random_maxima=dict(degrees=maxima_degrees, mean=[m for m, _ in maxima],
                                               ci=[h for _, h in maxima], samples=cfg.maxima_samples), critical=crit,
                settings=dict(sigma_dt=SIGMA_DT, pde_eps=PDE_EPS, particle_eps=PARTICLE_EPS))
    save_json(out_dir / "data.json", data)
    switch = all((row["measured"] > 0) == (row["ratio"] < 1) for cc in crit for row in cc["rows"]
                 if row["l"] == cc["l_c"]) and all(row["measured"] < 0 for cc in crit for row in cc["rows"]
                                                   if row["ratio"] > 1)
    return dict(pde_max_rel_error=max(rel), pde_max_rel_error_vs_rk4=max(rel_rk4),
                particle_direct_sigma1_rel_error=direct[0]["measured"] / direct[0]["sigma"] - 1,
                particle_big_max_rel_error=max([abs(r["measured"] / r["sigma"] - 1) for r in big], default=None),
                rhs_check=check, critical_switch=switch,
                clusters={c["beta"]: dict(l_star=c["l_star"], final=c["final"], ratio_pred=c["ratio_pred"])
                          for c in clusters})


if __name__ == "__main__":
    from studies.linear_stability.report import report

    main(run, report, Path(__file__).parent / "output", __doc__)
