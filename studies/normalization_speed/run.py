"""Speed of convergence to one cluster under post-LN, nGPT, pre-LN and peri-LN (issue 24).

Claim (Rigollet, arXiv 2512.01868, equiangular reduction; Karagodin, Ge, Polyanskiy, Rigollet,
arXiv 2510.22026, normalization as speed regulation): near the single cluster ``1 - rho`` decays
like ``e^{-2t}`` under post-LN (and nGPT) but only like ``1/t^2`` under pre-LN (and peri-LN), whose
growing residual radius ``r ~ t`` slows the directions down (``x' = P_x u / r``).

Setting (the papers' hypotheses): continuous-time limits of the rules of
:mod:`meanfield.models.step_rules` (:func:`~meanfield.models.step_rules.limit_rhs`), one head
``Q = K = V = I`` (``M = V = I``), exp kernel, softmax normalization, ``beta = 1``, on the sphere,
radial rules started at radius 1.  **Head scale** (issue 33): at ``M = V = I`` post-LN's rate ``2 K``
(``K = lambda``, :func:`meanfield.analysis.normalization.asymptotic_law`) equals nGPT's ``2``, so the rules are
also run with ``M = V = lambda I``, ``lambda`` in ``LAMBDAS = (0.5, 1, 2)``: there post-LN's ``2 lambda`` and
nGPT's ``2`` differ, and each rule's fit must also *reject* the other rule's value (the separation test; for the
power laws the exponent a wrong radius growth would give, :data:`ALTERNATIVES`).
The discrete layers (a different model: the claim is about continuous time) are run at ``lambda = 1`` only.
``rho(t)`` is the mean pairwise cosine of the directions and ``q = 1 - rho`` is computed without cancellation as ``n/(n-1) * mean_i |x_i - xbar|^2``.

* **Equiangular start** (``n = d`` tokens, ``rho(0) = RHO0``): deterministic; the particles (the
  library's batched sums, dopri5 at tight tolerances) are compared with the reduced ODE of
  :mod:`meanfield.analysis.normalization` (derivation in its docstring and in the report).
* **Random starts** (uniform on S^2, ``n`` tokens, ``seeds`` seeds integrated as one batch).

Fits of the law, per run: on the late window (``q <= Q_ON``; exponential laws also ``q >= Q_OFF``,
where the adaptive steps' absolute tolerance would start to dominate ``q``) the local rate
``-d log q / dt`` (exponential) or the local exponent ``-d log q / d log t`` (power) between consecutive
samples is regressed on a polynomial of degree ``ORDER`` = 2 in its correction variable and the intercept is
the fitted rate/exponent.  The corrections, also for a random start: exponential laws, ``q``: every deviation
``e_i = x_i - xbar`` obeys ``e_i' = -mu e_i (1 + O(q))`` (``mu = K`` post-LN, 1 nGPT; softmax weights
``1/n + O(|x_i - x_j|^2)``), so its shape freezes and the local rate is ``k + a q + b q^2 + ...``; power laws, ``1/t``:
token ``i``'s radius is ``r_i = K t + c_i + O(1/t)`` (pre-LN; ``t + c_i`` peri-LN) and ``q = sum_i w_i / r_i^2 (1 + O(1/t^2))``, so the local exponent is
``2 - 2 c_w / t + b / t^2 + ...`` (``c_w`` a weighted mean of the ``c_i``).  The plain least-squares slope of
``log q`` on the window is reported beside it.

**Acceptance** (no free resolution): the fitted value has three deterministic biases besides the spread over
seeds, each bounded from the run itself: (i) *truncation* -- the neglected corrections, bounded by the change
the last included one makes, ``|fit(ORDER) - fit(ORDER - 1)|`` (mean over seeds): the corrections are a series
in a small variable on the window (``q <= 1e-4`` resp. ``1/t <~ 1e-2``), so what the next terms leave is smaller
than what the last one removed (checked on the reduced ODE: 1.8e-5 removed, 1.3e-7 left, pre-LN quick); (ii) *integration* -- dopri5 steps land on every
sample, so each step ``h`` is at most the sample spacing, and on the linear decay near the cluster a step
multiplies a deviation of rate ``mu`` by ``R(-mu h)`` (``R`` the scheme's stability function,
``R(z) = e^z + z^6/3600 + O(z^7)``) instead of ``e^{-mu h}``: the fitted value is low by at most
``k (1 + log R(-x) / x)`` with ``x = mu h_max`` (``mu = k/2``, ``h_max`` the time spacing, for the
exponential laws; ``x = max dt / t`` for the power laws, deviation rate ``1/r ~ 1/t``).  The discrete layers
have no integrator: (i) only.  (iii) *round-off* of ``q`` at the window's end (:func:`roundoff_bound`).  A run (equiangular) or the Student-t interval over seeds (random starts;
fitted seeds - 1 degrees of freedom, level below) is accepted when it meets the prediction band
``[k - integration - truncation - round-off, k + truncation + round-off]``.

**Family** (issue 33): the random-start t intervals of the study (``len(LAMBDAS) x 4`` continuum rules plus the
4 layer rules) are one family judged at family-wise rate ``FWER`` = 5 % (Bonferroni: each interval at level
``1 - FWER / FAMILY``, ``seeds - 1`` degrees of freedom); the random starts are fresh seeds
(``SEED_BASE + 1000 i + k`` for the ``i``-th lambda, ``+ 500`` in quick mode; issue 24's run used seeds
``0 .. seeds - 1``).

Run from the repo root: ``python -m studies.normalization_speed.run [--quick]``.  Measured on the shared
2-core machine (issue 33 version: 3 head scales, 30 seeds each, 4 rules, continuum and dt = 0.1 layers): quick
21 s wall, full 64 s wall under a load average of ~2.5 (``OPENBLAS_NUM_THREADS=1``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield.analysis import normalization as nz
from meanfield.core.integrate import integrate
from meanfield.core.options import SaveAt, StepControl
from meanfield.core.tableaux import SCHEMES
from meanfield.models.batched import BatchedSystem, retract_batched
from meanfield.models.step_rules import RADIAL_RULES, iterate, limit_rhs
from studies._common import main, mean_ci, save_json

RULES = ("post_ln", "ngpt", "pre_ln", "peri_ln")
BETA = 1.0
LAMBDAS = (0.5, 1.0, 2.0)  # head scales M = V = lambda I (issue 33: lambda != 1 separates post-LN's 2 lambda from nGPT's 2)
LAYER_LAMBDA = 1.0        # the discrete layers (outside the continuous-time hypotheses) at M = V = I only
SEED_BASE = 33_000        # fresh random starts (issue 33): seed SEED_BASE + 1000 i + k for LAMBDAS[i]; issue 24 used 0..seeds-1
FWER = 0.05               # family-wise error rate of the random-start t intervals (Bonferroni over FAMILY intervals)
FAMILY = len(LAMBDAS) * 4 + 4
LEVEL = 1 - FWER / FAMILY
RHO0 = 0.0                # equiangular start: orthonormal tokens
Q_ON = 1e-4               # window start: 1 - rho below this (the cluster's neighbourhood)
Q_OFF = 1e-13             # exponential laws: window end (|x_i - xbar| ~ 3e-7, still 1e6 x the absolute tolerance)
RTOL, ATOL = 1e-11, 1e-15
ORDER = 2                 # degree of the correction polynomial of the fits (the leading and the next correction)
METHOD = "dopri5"         # the integrator of the continuous-time runs (its stability function bounds its bias)
EQ_ODE_TOL = 1e-5         # equiangular particles against the reduced ODE: largest relative error of 1 - rho


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    n_eq: int             # equiangular: tokens (= d)
    n_rand: int           # random starts: tokens on S^2
    d_rand: int
    seeds: int            # random starts (>= 10)
    t_exp: float          # horizon of the exponential-law rules at rate 2 (rate k: t_exp * 2 / k)
    t_pow: float          # horizon of the power-law rules (pre-LN, peri-LN)
    samples: int          # recorded times per run (linear grid for exp, geometric from 1 for power)
    dt: float             # discrete layers: step of every rule
    layers_exp: int       # discrete layers of post-LN and nGPT
    layers_pow: int       # discrete layers of pre-LN and peri-LN
    every_pow: int        # record every this many layers (pre-LN, peri-LN)


QUICK = Settings(n_eq=8, n_rand=16, d_rand=3, seeds=10, t_exp=18.0, t_pow=1e4, samples=121,
                 dt=0.1, layers_exp=200, layers_pow=10000, every_pow=50)
FULL = Settings(n_eq=16, n_rand=32, d_rand=3, seeds=30, t_exp=26.0, t_pow=1e5, samples=241,
                dt=0.1, layers_exp=280, layers_pow=40000, every_pow=100)


def discrete_law(rule, dt):
    """``(law, k)`` of the discrete layers of step ``dt`` near the cluster (a derivation of this study, module
    docstring): post-LN shrinks deviations by ``1/(1 + dt)`` per layer (rate ``2 log(1 + dt)/dt``), nGPT by
    ``1 - dt`` (``-2 log(1 - dt)/dt``); pre-LN and peri-LN by ``r_k / (r_k + dt)`` with ``r_k ~ k dt`` (exponent 2)."""
    if rule in RADIAL_RULES:
        return "power", 2.0
    return "exponential", 2 * np.log1p(dt) / dt if rule == "post_ln" else -2 * np.log1p(-dt) / dt


def gap(X):
    """``1 - rho`` of each system of directions ``X`` (B, n, d): ``n/(n-1) mean_i |x_i - xbar|^2``."""
    x = retract_batched(X)
    n = x.shape[1]
    return n / (n - 1) * np.sum((x - x.mean(axis=1, keepdims=True)) ** 2, axis=(1, 2)) / n


def times(rule, s, k=2.0):
    """Sample times: geometric from 1 to ``t_pow`` (power laws, every head scale); linear to ``t_exp * 2 / k`` for an
    exponential law of rate ``k`` (the same decades of ``1 - rho``, ending near 1e-22 where deviations are still 1e5
    times the round-off of the coordinates, and the same ``k h`` per spacing, hence the same integration bound, at every
    head scale).  A start that is slower to reach the cluster (metastable clusters at ``beta lambda = 2``) may not
    reach the window: it is counted and left out (fewer than 10 fitted seeds: outside the hypotheses)."""
    if rule in RADIAL_RULES:
        return np.geomspace(1.0, s.t_pow, s.samples)
    return np.linspace(0.0, s.t_exp * 2.0 / k, s.samples)[1:]


def seeds_of(s, i, quick):
    """Seeds of the random starts of the ``i``-th head scale: ``SEED_BASE + 1000 i + k`` (full) and ``+ 500`` (quick),
    so the full run is on seeds that no quick run has shown (issue 33: fresh seeds)."""
    return [SEED_BASE + 1000 * i + (500 if quick else 0) + k for k in range(s.seeds)]


def random_starts(s, i, quick=False):
    """The random starts of the ``i``-th head scale (:func:`seeds_of`), shape (seeds, n, d)."""
    return np.stack([mf.initial.uniform_sphere(s.n_rand, s.d_rand, seed=seed) for seed in seeds_of(s, i, quick)])


def simulate(rule, X0, t, lam=1.0):
    """``1 - rho`` (T, B) at times ``t`` of the continuous-time limit of ``rule`` (head ``M = V = lam I``) from ``X0``."""
    system = BatchedSystem(mf.scalar_heads([lam], X0.shape[-1], BETA, normalization="softmax"))
    traj = integrate(limit_rhs(system, rule), X0, (0.0, float(t[-1])), method=METHOD,
                     step=StepControl(dt=1e-2, rtol=RTOL, atol=ATOL),
                     save=SaveAt(t_eval=np.r_[0.0, t], states=False, observe=lambda _t, y: {"q": gap(y)}),
                     retraction=None if rule in RADIAL_RULES else retract_batched, progress=False)
    if traj.status != 0:
        raise RuntimeError(f"{rule}: integration stopped ({traj.message})")
    return np.asarray(traj.observables["q"])[1:]


def simulate_layers(rule, X0, s):
    """``(t, 1 - rho)`` of the discrete layers of ``rule`` (step ``s.dt``) from tokens ``X0``."""
    system = BatchedSystem(mf.scalar_heads([LAYER_LAMBDA], X0.shape[-1], BETA, normalization="softmax"))
    radial = rule in RADIAL_RULES
    traj = iterate(system, X0, s.dt, s.layers_pow if radial else s.layers_exp, rule,
                   observe=lambda _t, x: {"q": gap(x)}, every=s.every_pow if radial else 1, save_states=False)
    t, q = np.asarray(traj.t)[1:], np.asarray(traj.observables["q"])[1:]
    return t, q


def _window(t, q, law):
    """The fitting window of one run: ``(t, log q)`` on ``q <= Q_ON`` from the last exceedance on (exponential
    laws: down to ``Q_OFF``)."""
    outside = np.flatnonzero(q > Q_ON)
    start = 0 if outside.size == 0 else int(outside[-1]) + 1             # q stays <= Q_ON from here on
    stop = q.size
    if law == "exponential":
        below = np.flatnonzero(q[start:] < Q_OFF)
        stop = stop if below.size == 0 else start + int(below[0])
    return t[start:stop], np.log(q[start:stop])


def fit_law(t, q, law, order=ORDER):
    """``(extrapolated, plain, points)`` of one run (module docstring): the intercept of the local rate/exponent
    regressed on a polynomial of degree ``order`` in its correction variable; NaN with fewer than ``order + 3``
    window points."""
    tw, lq = _window(t, q, law)
    if tw.size < order + 3:
        return np.nan, np.nan, int(tw.size)
    x = tw if law == "exponential" else np.log(tw)
    local = -np.diff(lq) / np.diff(x)
    corr = np.exp(0.5 * (lq[1:] + lq[:-1])) if law == "exponential" else 1.0 / np.sqrt(tw[1:] * tw[:-1])
    return float(np.polyfit(corr, local, order)[-1]), float(-np.polyfit(x, lq, 1)[0]), int(tw.size)


def roundoff_bound(t, q, law, d):
    """Round-off of the fitted value: ``q = |e|^2`` with deviations ``|e| ~ sqrt(q)`` stored to ``eps`` per coordinate
    (``d`` of them), so ``log q`` of one sample is off by ``2 sqrt(d) eps / sqrt(q)`` and a local rate/exponent by
    that over the sample spacing; bounded at the window's smallest ``q`` and smallest spacing (no averaging over the
    window's points credited).  NaN for an empty window."""
    tw, lq = _window(t, q, law)
    if tw.size < 2:
        return np.nan
    x = tw if law == "exponential" else np.log(tw)
    return float(2 * np.sqrt(d) * np.finfo(float).eps / np.exp(0.5 * lq.min()) / np.diff(x).min())


def truncation_bound(t, q, law):
    """Bias bound of the neglected corrections: ``|fit(ORDER) - fit(ORDER - 1)|``, the change the last included
    correction makes (module docstring)."""
    return abs(fit_law(t, q, law, ORDER)[0] - fit_law(t, q, law, ORDER - 1)[0])


def integration_bound(t, law, k, method=METHOD):
    """Largest low bias of a fitted rate/exponent ``k`` from the integrator's truncation on the linear decay near
    the cluster (module docstring): ``k (1 + log R(-x) / x)``, ``x = (k/2) max dt`` (exponential) or ``max dt/t``
    (power), ``R`` the stability function of ``method``; steps land on every sample, so ``h <= dt``."""
    dt = np.diff(np.asarray(t, dtype=float))
    x = 0.5 * k * dt.max() if law == "exponential" else float((dt / np.asarray(t)[:-1]).max())
    R = float(np.real(SCHEMES[method].stability_function(np.array(-x))))
    return float(k * (1 + np.log(R) / x))


def accepted(mean, half, k, trunc, integ, rnd):
    """Does ``[mean - half, mean + half]`` meet the prediction band ``[k - integ - trunc - rnd, k + trunc + rnd]``?"""
    return bool(mean + half >= k - integ - trunc - rnd and mean - half <= k + trunc + rnd)


def competing(t, q, law):
    """The other law's local rate at the end of the run: ``-d log q / dt`` for a power law (-> 0 like 2/t),
    ``-d log q / d log t`` for an exponential one (grows like 2t)."""
    x = np.log(t[-2:]) if law == "exponential" else t[-2:]
    return float(-(np.log(q[-1]) - np.log(q[-2])) / (x[1] - x[0]))


ALTERNATIVES = {"post_ln": "nGPT's rate 2 (the update normalized)", "ngpt": "post-LN's rate 2K (the update not normalized)",
                "pre_ln": "exponent 2K (a radius growing like t, not K t)",
                "peri_ln": "exponent 2/K (a radius growing like K t, not t)"}


def alternative(rule, lam):
    """The value the separation test must reject at head scale ``lam`` (:data:`ALTERNATIVES`): the other exponential
    rule's rate (post-LN ``2 K`` against nGPT ``2``, ``K = lam``), or the exponent a wrong radius growth would give
    (pre-LN ``2 K``, peri-LN ``2 / K``); ``None`` where it equals the prediction (``lam = 1``)."""
    K = float(lam)           # softmax, one head M = V = lam I: K = lam (meanfield.analysis.normalization)
    alt = {"post_ln": 2.0, "ngpt": 2.0 * K, "pre_ln": 2.0 * K, "peri_ln": 2.0 / K}[rule]
    return None if np.isclose(alt, nz.asymptotic_law(rule, [lam], BETA, 2)[1]) else float(alt)


def continuum(rule, lam, X_eq, X_rand, s):
    """Equiangular and random-start runs of the continuous-time limit of ``rule`` at head scale ``lam``:
    ``(results, arrays)``."""
    law, k = nz.asymptotic_law(rule, [lam], BETA, s.n_eq)
    t = times(rule, s, k)
    q_eq = simulate(rule, X_eq, t, lam)[:, 0]
    q_ode, r_ode = nz.solve_equiangular_rule(RHO0, rule, [lam], BETA, s.n_eq, t)
    q_rand = simulate(rule, X_rand, t, lam)
    seeds = X_rand.shape[0]
    fits = np.array([fit_law(t, q_rand[:, b], law) for b in range(seeds)])
    ok = np.isfinite(fits[:, 0])
    ext_mean, ext_half = mean_ci(fits[ok, 0], level=LEVEL) if ok.sum() >= 2 else (np.nan, np.nan)
    plain_mean, plain_half = mean_ci(fits[ok, 1], level=LEVEL) if ok.sum() >= 2 else (np.nan, np.nan)
    lead = np.array([fit_law(t, q_rand[:, b], law, 1)[0] for b in range(seeds)])
    trunc = float(np.mean([truncation_bound(t, q_rand[:, b], law) for b in np.flatnonzero(ok)])) if ok.any() else np.nan
    integ = integration_bound(t, law, k)
    rnd = float(np.nanmax([roundoff_bound(t, q_rand[:, b], law, X_rand.shape[-1]) for b in range(seeds)]))
    eq_fit, ode_fit = fit_law(t, q_eq, law), fit_law(t, q_ode, law)
    eq_trunc = truncation_bound(t, q_eq, law)
    eq_rnd = roundoff_bound(t, q_eq, law, s.n_eq)
    alt = alternative(rule, lam)
    res = {
        "lambda": lam, "law": law, "predicted": k, "alternative": alt, "t_end": float(t[-1]),
        "eq_max_rel_err_vs_ode": float(np.max(np.abs(q_eq / q_ode - 1))),
        "eq_fit": eq_fit[0], "eq_plain": eq_fit[1], "eq_points": eq_fit[2],
        "eq_fit_leading_only": fit_law(t, q_eq, law, 1)[0], "eq_truncation_bound": eq_trunc,
        "ode_fit": ode_fit[0], "ode_plain": ode_fit[1],
        "eq_competing_at_end": competing(t, q_eq, law),
        "integration_bound": integ,
        "eq_roundoff_bound": eq_rnd, "rand_roundoff_bound": rnd,
        "eq_accepted": accepted(eq_fit[0], 0.0, k, eq_trunc, integ, eq_rnd),
        "eq_alt_accepted": None if alt is None else accepted(eq_fit[0], 0.0, alt, eq_trunc, integ, eq_rnd),
        "rand_seeds": seeds, "rand_fitted_seeds": int(ok.sum()),
        "rand_fit_mean": ext_mean, "rand_fit_half": ext_half,
        "rand_fit_leading_only_mean": float(np.mean(lead[ok])) if ok.any() else np.nan,
        "rand_truncation_bound": trunc,
        "rand_t_interval_contains_prediction": bool(abs(ext_mean - k) <= ext_half),
        "rand_accepted": accepted(ext_mean, ext_half, k, trunc, integ, rnd),
        "rand_alt_accepted": None if alt is None else accepted(ext_mean, ext_half, alt, trunc, integ, rnd),
        "rand_plain_mean": plain_mean, "rand_plain_half": plain_half,
        "rand_min_points": int(fits[:, 2].min()),
        "rand_fitted": [bool(v) for v in ok],
        "rand_competing_at_end": [competing(t, q_rand[:, b], law) for b in range(seeds)],
        "rand_q_end": [float(v) for v in q_rand[-1]]}
    tag = f"{rule}_lam{lam:g}"
    arrays = {f"{tag}_t": t, f"{tag}_q_eq": q_eq, f"{tag}_q_ode": q_ode, f"{tag}_r_ode": r_ode,
              f"{tag}_q_rand": q_rand, f"{tag}_fits_rand": fits}
    return res, arrays


def layers(rule, X_eq, X_rand, s):
    """The discrete layers (step ``s.dt``, head ``M = V = LAYER_LAMBDA I``): ``(results, arrays)``."""
    k_cont = nz.asymptotic_law(rule, [LAYER_LAMBDA], BETA, s.n_eq)[1]
    dlaw, dk = discrete_law(rule, s.dt)
    td, qd_eq = simulate_layers(rule, X_eq, s)
    _, qd_rand = simulate_layers(rule, X_rand, s)
    seeds = X_rand.shape[0]
    dfits = np.array([fit_law(td, qd_rand[:, b], dlaw) for b in range(seeds)])
    dok = np.isfinite(dfits[:, 0])
    dm, dh = mean_ci(dfits[dok, 0], level=LEVEL) if dok.sum() >= 2 else (np.nan, np.nan)
    dtr = float(np.mean([truncation_bound(td, qd_rand[:, b], dlaw) for b in np.flatnonzero(dok)])) if dok.any() else np.nan
    deq = fit_law(td, qd_eq[:, 0], dlaw)
    deq_tr = truncation_bound(td, qd_eq[:, 0], dlaw)
    deq_rnd = roundoff_bound(td, qd_eq[:, 0], dlaw, s.n_eq)
    drnd = float(np.nanmax([roundoff_bound(td, qd_rand[:, b], dlaw, X_rand.shape[-1]) for b in range(seeds)]))
    res = {
        "lambda": LAYER_LAMBDA, "law": dlaw, "predicted": float(dk), "continuum_predicted": float(k_cont),
        "eq_fit": deq[0], "eq_points": deq[2], "eq_truncation_bound": deq_tr,
        "eq_roundoff_bound": deq_rnd, "rand_roundoff_bound": drnd,
        "eq_accepted": accepted(deq[0], 0.0, dk, deq_tr, 0.0, deq_rnd),
        "rand_seeds": seeds, "rand_fitted_seeds": int(dok.sum()), "rand_fit_mean": dm, "rand_fit_half": dh,
        "rand_truncation_bound": dtr,
        "rand_t_interval_contains_prediction": bool(abs(dm - dk) <= dh),
        "rand_accepted": accepted(dm, dh, dk, dtr, 0.0, drnd),
        "continuum_prediction_accepted": accepted(dm, dh, k_cont, dtr, 0.0, drnd)}
    return res, {f"{rule}_layers_t": td, f"{rule}_layers_q_eq": qd_eq[:, 0], f"{rule}_layers_q_rand": qd_rand}


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    s = QUICK if quick else FULL
    arrays, results = {}, {rule: {"scales": {}} for rule in RULES}
    X_eq = mf.initial.equiangular(s.n_eq, s.n_eq, RHO0, seed=0)[None]
    starts = {lam: random_starts(s, i, quick) for i, lam in enumerate(LAMBDAS)}
    for rule in RULES:
        for lam in LAMBDAS:
            res, arr = continuum(rule, lam, X_eq, starts[lam], s)
            results[rule]["scales"][f"{lam:g}"] = res
            arrays.update(arr)
        res, arr = layers(rule, X_eq, starts[LAYER_LAMBDA], s)
        results[rule]["layers"] = res
        arrays.update(arr)
    np.savez_compressed(out_dir / "data.npz", **arrays)
    meta = {"quick": quick, "rules": RULES, "beta": BETA, "lambdas": LAMBDAS, "layer_lambda": LAYER_LAMBDA,
            "seed_base": SEED_BASE, "seeds": {f"{lam:g}": seeds_of(s, i, quick) for i, lam in enumerate(LAMBDAS)}, "fwer": FWER, "family": FAMILY, "level": LEVEL, "rho0": RHO0, "q_on": Q_ON,
            "q_off": Q_OFF, "order": ORDER, "method": METHOD, "eq_ode_tol": EQ_ODE_TOL, "rtol": RTOL, "atol": ATOL,
            "settings": s.__dict__, "results": results}
    save_json(out_dir / "data.json", meta)
    keys = ("law", "predicted", "alternative", "eq_max_rel_err_vs_ode", "eq_fit", "rand_fit_mean", "rand_fit_half")
    return {rule: {f"{lam:g}": {k: results[rule]["scales"][f"{lam:g}"][k] for k in keys} for lam in LAMBDAS}
            for rule in RULES}


if __name__ == "__main__":
    from studies.normalization_speed.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
