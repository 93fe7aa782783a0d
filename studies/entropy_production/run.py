"""Attention entropy production (paper Thm 27, MODEL.md sections 1 and 3).

Four parts, all with exp kernels:

1. **identity**: along solved particle trajectories, the covariance formula
   ``dH_i^h/dt = -beta^2 Cov_p(s, ds/dt)`` (:func:`meanfield.analysis.diagnostics.attention_entropy_rate`)
   against central finite differences (2nd and 4th order) of
   :func:`meanfield.analysis.diagnostics.attention_entropy`, for random symmetric value-aligned heads (mean
   and softmax normalization) and general random heads; the error against the sampling step
   shows the finite-difference orders.
2. **equiangular**: scalar heads ``M_h = V_h = lambda_h I`` (``lambda = 1, 2``) from an
   equiangular start (:func:`meanfield.core.initial.equiangular`, ``n = d = 8``): every ``H_i^h`` is
   non-decreasing and tends to ``log n``; the particle entropies are checked against the closed
   form ``H(gamma(t))`` with ``gamma(t)`` from :func:`meanfield.analysis.theory.solve_equiangular`.
3. **failures**: how often ``dH_i^h/dt < 0`` for random tokens and random heads (fraction over
   tokens, heads, times and seeds), for mean and softmax normalization and three head families
   (scalar, random symmetric value-aligned, general random ``M``, ``V``).
4. **continuum**: a zonal two-head softmax PDE on S^2 (:class:`meanfield.ContinuumPDE`,
   :func:`meanfield.analysis.field_diagnostics.field_attention_entropy`) against particles sampled from the same
   initial density (:func:`meanfield.core.densities.sample_particles`), compared as
   ``H_discrete - log n`` (``attention_entropy(..., relative=True)``): sampling error at t = 0
   against n, then both evolved over a short run.

Cost: quick ~10 s of CPU; full ~5 min wall on the shared 2-core machine under heavy load, 16 s when idle (parts
3 and 4 dominate; on a loaded machine set ``OPENBLAS_NUM_THREADS=1``).  Run from the repository root::

    python -m studies.entropy_production.run [--quick]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield import diagnostics as dg
from meanfield.analysis.clustering import clustering
from meanfield.core.options import SaveAt, StepControl
from studies._common import fit_slope, main, save_json

BETA = 1.0
FAMILIES = ("scalar", "symmetric", "general")
NORMS = ("mean", "softmax")


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    identity_n: int          # part 1: tokens per trajectory
    equiangular_n_t: int     # part 2: recorded times
    failure_n: int           # part 3: tokens, recorded times and seeds
    failure_n_t: int
    failure_seeds: tuple
    lmax: int                # part 4: PDE degree, horizon and recorded times,
    continuum_t_final: float
    continuum_n_t: int
    sample_ns: tuple         # t = 0 samples (sizes, seeds),
    sample_seeds: tuple
    run_ns: tuple            # particle runs along the flow (sizes, seeds)
    run_seeds: tuple


QUICK = Settings(identity_n=16, equiangular_n_t=51, failure_n=16, failure_n_t=7, failure_seeds=(0,),
                 lmax=32, continuum_t_final=0.5, continuum_n_t=6, sample_ns=(100, 400), sample_seeds=tuple(range(4)),
                 run_ns=(300,), run_seeds=tuple(range(1)))
FULL = Settings(identity_n=32, equiangular_n_t=101, failure_n=32, failure_n_t=16, failure_seeds=tuple(range(10)),
                lmax=48, continuum_t_final=1.5, continuum_n_t=16, sample_ns=(100, 200, 400, 800, 1600, 3200),
                sample_seeds=tuple(range(10)), run_ns=(250, 1000), run_seeds=tuple(range(10)))


# ------------------------------------------------------------------------------ heads
def random_heads(family, d, n_heads, normalization, seed, scale=2.0):
    """Heads of one family: ``scalar`` (``lambda_h`` uniform in [0.5, 2]), ``symmetric`` (random
    symmetric value-aligned, :func:`meanfield.random_symmetric_heads`) or ``general`` (independent
    Gaussian ``M``, ``V`` with entries of variance ``scale^2 / d``)."""
    rng = np.random.default_rng(seed)
    if family == "scalar":
        return mf.scalar_heads(rng.uniform(0.5, 2.0, n_heads), d, beta=BETA, normalization=normalization)
    if family == "symmetric":
        return mf.random_symmetric_heads(d, n_heads, seed=rng, scale=scale, beta=BETA, normalization=normalization)
    if family == "general":
        return tuple(mf.Head(scale * rng.standard_normal((d, d)) / np.sqrt(d),
                             scale * rng.standard_normal((d, d)) / np.sqrt(d), BETA, "exp", normalization)
                     for _ in range(n_heads))
    raise ValueError(f"family must be one of {FAMILIES}; received {family!r}")


def entropy_observer(system):
    """``observe(t, X)`` recording per-token entropies ``H`` and covariance rates ``rate``, (H, n) each."""
    def observe(t, X):
        return {"H": dg.attention_entropy(system, X), "rate": dg.attention_entropy_rate(system, X)}
    return observe


# ---------------------------------------------------------------------------- part 1
def finite_difference(H, dt, order):
    """Central difference of ``H`` (T, ...) along axis 0 at the interior points.

    ``order=2``: ``(H[k+1] - H[k-1]) / (2 dt)`` at ``k = 2..T-3``;
    ``order=4``: ``(-H[k+2] + 8 H[k+1] - 8 H[k-1] + H[k-2]) / (12 dt)`` at the same points.
    """
    if order == 2:
        return (H[3:-1] - H[1:-3]) / (2 * dt)
    if order == 4:
        return (-H[4:] + 8 * H[3:-1] - 8 * H[1:-3] + H[:-4]) / (12 * dt)
    raise ValueError(f"order must be one of (2, 4); received {order!r}")


def identity_case(family, normalization, n, d, t_final, n_t, seed, strides):
    """Solve one trajectory and compare the covariance rate with finite differences.

    Returns
    -------
    dict with ``t`` (T,), ``H`` and ``rate`` (T, H, n) and, per stride in ``strides`` (sampling
    step ``dt = stride * t_final / (n_t - 1)``), the max relative error (max over times, heads,
    tokens of ``|FD - rate| / max|rate|``) of the 2nd and 4th order differences.
    """
    system = mf.ParticleSystem(random_heads(family, d, 2, normalization, seed))
    X0 = mf.initial.uniform_sphere(n, d, seed + 1000)
    t = np.linspace(0.0, t_final, n_t)
    tr = mf.solve_particles(system, X0, t_final, step=StepControl(rtol=1e-12, atol=1e-13),
                            save=SaveAt(t_eval=t, observe=entropy_observer(system), states=False), progress=False)
    if tr.status != 0:
        raise RuntimeError(f"identity run failed ({family}, {normalization}): {tr.message}")
    H, rate = tr.observables["H"], tr.observables["rate"]
    scale = np.abs(rate).max()
    errs = {2: [], 4: []}
    for s in strides:
        Hs, rs, dt = H[::s], rate[::s], s * (t[1] - t[0])
        for order in (2, 4):
            errs[order].append(np.abs(finite_difference(Hs, dt, order) - rs[2:-2]).max() / scale)
    return {"t": t, "H": H, "rate": rate, "err2": np.array(errs[2]), "err4": np.array(errs[4]),
            "dt": np.array(strides) * (t[1] - t[0]), "rate_scale": scale}


# ---------------------------------------------------------------------------- part 2
def equiangular_entropy(gamma, lam, beta, n):
    """Attention entropy of one scalar head in an equiangular configuration, shape of ``gamma``.

    ``p_self = 1 / (1 + (n-1) e^{-u})``, ``p_other = e^{-u} p_self``, ``u = beta lam (1 - gamma)``.
    """
    u = beta * lam * (1.0 - np.asarray(gamma, dtype=float))
    log_self = -np.log1p((n - 1) * np.exp(-u))
    log_other = log_self - u
    return -(np.exp(log_self) * log_self + (n - 1) * np.exp(log_other) * log_other)


def equiangular_case(normalization, n, d, gamma0, lambdas, t_final, n_t):
    """Particles from an equiangular start under scalar heads, with the closed-form entropies.

    Returns
    -------
    dict with ``t`` (T,), ``H`` and ``rate`` (T, H, n), ``gamma`` (T,) from the reduced ODE,
    ``H_theory`` (T, H) and ``gamma_particles`` (T,) (mean pairwise inner product).
    """
    system = mf.ParticleSystem(mf.scalar_heads(lambdas, d, beta=BETA, normalization=normalization))
    X0 = mf.initial.equiangular(n, d, gamma0, seed=3)
    t = np.linspace(0.0, t_final, n_t)
    obs = entropy_observer(system)

    def observe(tt, X):
        return {**obs(tt, X), "gamma": clustering(X)["mean_inner"]}

    tr = mf.solve_particles(system, X0, t_final, step=StepControl(rtol=1e-11, atol=1e-12),
                            save=SaveAt(t_eval=t, observe=observe, states=False), progress=False)
    gamma = mf.theory.solve_equiangular(gamma0, lambdas, BETA, n, t, normalization=normalization)
    H_th = np.stack([equiangular_entropy(gamma, lam, BETA, n) for lam in lambdas], axis=1)
    return {"t": t, "H": tr.observables["H"], "rate": tr.observables["rate"], "gamma": gamma,
            "H_theory": H_th, "gamma_particles": tr.observables["gamma"]}


# ---------------------------------------------------------------------------- part 3
def failure_fractions(n, d, n_heads, t_final, n_t, seeds):
    """Fraction of (token, head, time) with ``dH_i^h/dt < -1e-12 max|rate|``, per family,
    normalization and seed.

    Returns
    -------
    dict with ``frac`` (families, norms, seeds), ``frac_t0`` (same, at t = 0 only),
    ``neg_weight`` (same: ``sum max(-rate, 0) / sum |rate|``, the share of entropy production that
    is negative, insensitive to near-zero rates of a converged state) and ``frac_time``
    (families, norms, n_t): the fraction at each time pooled over seeds.
    """
    t = np.linspace(0.0, t_final, n_t)
    shape = (len(FAMILIES), len(NORMS), len(seeds))
    frac, frac0, negw = np.empty(shape), np.empty(shape), np.empty(shape)
    frac_time = np.zeros((len(FAMILIES), len(NORMS), n_t))
    for a, fam in enumerate(FAMILIES):
        for b, norm in enumerate(NORMS):
            for k, s in enumerate(seeds):
                system = mf.ParticleSystem(random_heads(fam, d, n_heads, norm, 100 + s))
                X0 = mf.initial.uniform_sphere(n, d, 200 + s)
                tr = mf.solve_particles(system, X0, t_final, step=StepControl(rtol=1e-8, atol=1e-10),
                                        save=SaveAt(t_eval=t, states=False, observe=lambda tt, X, sy=system: {
                                            "rate": dg.attention_entropy_rate(sy, X)}),
                                        progress=False)
                r = tr.observables["rate"]
                neg = r < -1e-12 * np.abs(r).max()
                frac[a, b, k], frac0[a, b, k] = neg.mean(), neg[0].mean()
                negw[a, b, k] = np.maximum(-r, 0).sum() / np.abs(r).sum()
                frac_time[a, b] += neg.mean(axis=(1, 2)) / len(seeds)
    return {"t": t, "frac": frac, "frac_t0": frac0, "neg_weight": negw, "frac_time": frac_time}


# ---------------------------------------------------------------------------- part 4
def continuum_setup(lmax):
    """Two zonal softmax heads (lambda = 0.5, 1), a three-component vMF mixture start on S^2."""
    heads = mf.scalar_heads([0.5, 1.0], 3, beta=BETA, normalization="softmax")
    pde = mf.ContinuumPDE(heads, lmax)
    mus = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, -0.6, -0.8]])
    rho0 = mf.densities.vmf_mixture_density(pde.grid, mus, [3.0, 4.0, 2.0], [0.4, 0.35, 0.25])
    return heads, pde, rho0


def continuum_comparison(lmax, t_final, n_t, sample_ns, sample_seeds, run_ns, run_seeds):
    """Continuum vs particle attention entropies (relative form, <= 0).

    Returns
    -------
    dict with ``t`` (T,), ``H_pde`` (T, H); ``H0_samples`` (len(sample_ns), len(sample_seeds), H) at
    t = 0; ``H_particles`` (len(run_ns), len(run_seeds), T, H) along the flow; PDE health
    (``spectral_tail``, ``negative_mass``, ``status``).
    """
    heads, pde, rho0 = continuum_setup(lmax)
    system = mf.ParticleSystem(heads)
    t = np.linspace(0.0, t_final, n_t)
    tr = mf.solve_continuum(pde, rho0, t_final, step=StepControl(rtol=1e-9, atol=1e-12), save=SaveAt(t_eval=t),
                            progress=False)
    if tr.status != 0:
        raise RuntimeError(f"PDE run stopped before t_final = {t_final}: {tr.message}")
    H0 = np.empty((len(sample_ns), len(sample_seeds), len(heads)))
    for i, n in enumerate(sample_ns):
        for k, s in enumerate(sample_seeds):
            X = mf.densities.sample_particles(pde.grid, rho0, int(n), seed=1000 * i + s)
            H0[i, k] = dg.attention_entropy(system, X, relative=True).mean(axis=1)
    Hp = np.empty((len(run_ns), len(run_seeds), n_t, len(heads)))
    for i, n in enumerate(run_ns):
        for k, s in enumerate(run_seeds):
            X = mf.densities.sample_particles(pde.grid, rho0, int(n), seed=77 + 1000 * i + s)
            trp = mf.solve_particles(system, X, t_final, step=StepControl(rtol=1e-8, atol=1e-10),
                                     save=SaveAt(t_eval=t, states=False, observe=lambda tt, Y: {
                                         "H": dg.attention_entropy(system, Y, relative=True).mean(axis=1)}),
                                     progress=False)
            Hp[i, k] = trp.observables["H"]
    obs = tr.observables
    return {"t": t, "H_pde": obs["relative_entropy"], "H0_samples": H0, "H_particles": Hp,
            "spectral_tail": obs["spectral_tail"], "negative_mass": obs["negative_mass"],
            "mass": obs["mass"]}


# ------------------------------------------------------------------------------- run
def run(out_dir: Path, quick: bool = False) -> dict:
    """Run the four parts; write ``data.npz`` and ``data.json``; return the headline numbers."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = QUICK if quick else FULL
    strides = [1, 2, 4, 8]
    id_cases = [("symmetric", "mean"), ("symmetric", "softmax"), ("general", "softmax")]
    ident = [identity_case(f, nm, cfg.identity_n, 6, 1.0, 201, 11, strides) for f, nm in id_cases]
    eq = [equiangular_case(nm, 8, 8, 0.0, [1.0, 2.0], 2.5, cfg.equiangular_n_t) for nm in NORMS]
    fail = failure_fractions(cfg.failure_n, 6, 2, 3.0, cfg.failure_n_t, cfg.failure_seeds)
    lmax, sample_ns, run_ns = cfg.lmax, cfg.sample_ns, cfg.run_ns
    cont = continuum_comparison(lmax=lmax, t_final=cfg.continuum_t_final, n_t=cfg.continuum_n_t,
                                sample_ns=sample_ns, sample_seeds=cfg.sample_seeds, run_ns=run_ns,
                                run_seeds=cfg.run_seeds)
    n_eq = 8
    data = {"strides": np.array(strides), "id_cases": np.array([f"{f}-{n}" for f, n in id_cases]),
            "fail_t": fail["t"], "fail_frac": fail["frac"], "fail_frac_t0": fail["frac_t0"],
            "fail_frac_time": fail["frac_time"], "fail_neg_weight": fail["neg_weight"]}
    for i, c in enumerate(ident):
        for key in ("t", "H", "rate", "err2", "err4", "dt"):
            data[f"id{i}_{key}"] = c[key]
    for nm, c in zip(NORMS, eq):
        for key, val in c.items():
            data[f"eq_{nm}_{key}"] = val
    for key, val in cont.items():
        data[f"cont_{key}"] = val
    np.savez_compressed(out_dir / "data.npz", **data)

    H0 = cont["H0_samples"]
    diff0 = H0 - cont["H_pde"][0]                          # (ns, seeds, H)
    se = H0.std(axis=1, ddof=1) / np.sqrt(H0.shape[1])     # standard error of the seed mean
    track = np.abs(cont["H_particles"].mean(axis=1) - cont["H_pde"][None]).max(axis=(1, 2))
    # sampling std of one draw at the run sizes (log-log interpolation of the t = 0 table), then of
    # the seed mean: the yardstick for "tracks within sampling error"
    sd1 = np.exp(np.interp(np.log(run_ns), np.log(sample_ns), np.log(H0.std(axis=1, ddof=1).max(axis=1))))
    track_z = track / (sd1 / np.sqrt(cont["H_particles"].shape[1]))
    summary = {
        "quick": quick, "beta": BETA,
        "identity": {f"{f}-{nm}": {"max_rel_err_fd2": c["err2"][0], "max_rel_err_fd4": c["err4"][0],
                                   "fd2_order": _order(c["dt"][:3], c["err2"][:3]),
                                   "fd4_order": _order(c["dt"][:3], c["err4"][:3]),
                                   "dt": c["dt"][0]}
                     for (f, nm), c in zip(id_cases, ident)},
        "equiangular": {nm: {"min_rate": float(c["rate"].min()), "max_rate": float(c["rate"].max()),
                             "min_increment": float(np.diff(c["H"], axis=0).min()),
                             "final_gap_to_log_n": float(np.abs(np.log(n_eq) - c["H"][-1]).max()),
                             "max_err_vs_closed_form": float(np.abs(c["H"] - c["H_theory"][:, :, None]).max()),
                             "gamma_final": float(c["gamma"][-1])}
                        for nm, c in zip(NORMS, eq)},
        "failure_fraction": {f"{fam}-{nm}": {"all_times": float(fail["frac"][a, b].mean()),
                                              "t0": float(fail["frac_t0"][a, b].mean()),
                                              "negative_share": float(fail["neg_weight"][a, b].mean()),
                                              "per_seed": fail["frac"][a, b]}
                             for a, fam in enumerate(FAMILIES) for b, nm in enumerate(NORMS)},
        "continuum": {"lmax": lmax, "H_pde_t0": cont["H_pde"][0], "H_pde_final": cont["H_pde"][-1],
                      "sample_ns": sample_ns,
                      "t0_mean_diff": diff0.mean(axis=1), "t0_std": H0.std(axis=1, ddof=1),
                      "t0_z": diff0.mean(axis=1) / se,
                      "run_ns": run_ns, "track_max_abs_diff": track, "track_z": track_z,
                      "pde_max_spectral_tail": float(cont["spectral_tail"].max()),
                      "pde_max_negative_mass": float(np.abs(cont["negative_mass"]).max()),
                      "pde_mass_drift": float(np.abs(cont["mass"] - 1).max())},
    }
    save_json(out_dir / "data.json", summary)
    return summary


def _order(dt, err):
    """Fitted order: slope of log error against log dt."""
    return fit_slope(dt, err, log_x=True, log_y=True).slope


if __name__ == "__main__":
    from studies.entropy_production.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
