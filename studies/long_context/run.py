"""Critical attention scaling at long context: ``beta = gamma log n`` (issue 24).

Claim (Chen, Lin, Polyanskiy, Rigollet, arXiv 2510.05554, "Critical attention scaling in long-context
transformers"): in one pre-LN attention layer with scores ``beta_n <y_i, y_j>`` (``y = x/|x|``,
``Q = K = V = I``) on tokens of pairwise cosine ``rho`` (the "simplex" configuration), ``beta_n = gamma log n``
has a phase transition at ``gamma = 1/(1 - rho)``: below it all tokens collapse to one direction, above it the
layer is the identity, at it attention is sparse and content-adaptive.

Part 1 (deterministic): the equiangular start reduces the layer to a scalar map
(:func:`meanfield.theory.equiangular_layer`, exact at every ``n``) whose ``n -> inf`` limit is
:func:`meanfield.theory.critical_scaling_limit` (derived there).  For ``rho`` in ``RHOS``, ``kappa = gamma (1 - rho)``
in ``KAPPAS`` (``kappa = 1`` is the paper's critical ``gamma``) and residual weights ``alpha`` in ``ALPHAS``
(``alpha = 0``: the attention output alone, the paper's numerical setting; ``alpha = 1``: the library's pre-LN
layer ``z <- z + dt u(z/|z|)`` with ``dt = 1`` from unit tokens) the map is evaluated on ``n = 10^2 .. 10^6`` and
the distance to the limit is fitted as ``C n^{-p}`` on the last decade.  Derived rates (this study): the
self-weight ``w = n^kappa / (n^kappa + n - 1)`` tends to 0, 1/2, 1 like ``n^{-(1-kappa)}``, ``1/n``,
``n^{-(kappa-1)}``; the cosine inherits that rate linearly, except below criticality without residual where
``1 - rho' ~ w^2 (1-rho)/rho`` (``p = 2(1 - kappa)``).  Actual particles: the library's
:class:`~meanfield.models.batched.BatchedSystem` field (``alpha = 0``) and :func:`meanfield.models.step_rules.step`
with ``rule="pre_ln"`` (``alpha = 1/dt``) on ``mf.initial.equiangular(n, n, rho)`` for ``n`` in ``n_particles``.

Part 2 (random): one attention row at long context, scores of a query against ``n`` keys uniform on
``S^{d-1}``; the exact law of one score is ``t = 2 B - 1``, ``B ~ Beta((d-1)/2, (d-1)/2)``, sampled directly for
``n`` up to ``10^6`` (and checked against explicit tokens of ``mf.initial.uniform_sphere`` at ``n_tokens``).
(a) *Self-attention row*: the query is one of the tokens (score 1 with itself), the other ``n - 1`` are
uniform: in high dimension their scores concentrate at ``rho = 0``, so the paper's critical ``gamma`` is 1.  Per
seed the exact ``gamma*`` where the self-weight crosses 1/2 (it increases with ``gamma`` for a fixed sample;
brentq), the self-weight, the effective number of keys ``1 / sum p^2`` and ``exp(entropy)`` on a ``gamma`` grid,
against the annealed closed form (sums replaced by ``(n-1) M_d(beta)``, ``M_d(beta) = E e^{beta t}``).  (b) *A
query that is not a key*: no key is distinguished; ``1 / sum p^2`` against the annealed ``n M_d(beta)^2 / M_d(2 beta)``.
(c) *The dimension varied*: ``gamma*`` of the self row for every ``d`` in ``d_values`` and every ``n``, against the
annealed crossing ``gamma log n = log(n-1) + log M_d(gamma log n)`` (``gamma* ~ 1 + log(n)/(2d)``): the threshold
approaches the paper's ``1/(1-rho) = 1`` as ``d / log n`` grows.

Seeds: part 2 was drawn afresh after the referee of issue 33 (``SEED_*`` below; before: ``1000 i + k``,
``5000 + k``, ``7000 + k``), because its test was changed after the earlier data had been seen.

Run from the repo root: ``python -m studies.long_context.run [--quick]``.  Measured on the shared 2-core machine
(``OPENBLAS_NUM_THREADS=1``, nice): quick ~20 s, full ~2 min wall.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import integrate as sint
from scipy import optimize, special

import meanfield as mf
from meanfield import theory as T
from meanfield.models.batched import BatchedSystem
from meanfield.models.step_rules import step
from studies._common import fit_slope, main, mean_ci, save_json

RHOS = (0.25, 0.5)
KAPPAS = (0.5, 0.75, 1.0, 1.25, 1.5)       # gamma (1 - rho); 1 is the paper's critical gamma = 1/(1 - rho)
ALPHAS = (0.0, 1.0)                        # residual weight: 0 = attention output alone, 1 = pre-LN layer dt = 1
EXPONENT_TOL = 0.02    # extrapolated exponent vs derived (the next corrections after n^{-q} are O(n^{-2q}))
PARTICLE_TOL = 1e-12   # library particles vs the scalar map (round-off of n-term sums)
# fresh seeds of part 2 (issue 33): scores of cell (d index j, n index i), seed k at SEED_SCORES + 100000 j + 1000 i + k;
# explicit tokens SEED_TOKENS + k and their sampled-law twin SEED_TWIN + k (all above every seed used before, < 8000)
SEED_SCORES, SEED_TOKENS, SEED_TWIN = 1_000_000, 2_000_000, 3_000_000


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    n_max: int                 # part 1: n = 10^2 .. n_max (geometric, integers)
    n_points: int
    n_particles: tuple         # part 1: library particles, d = n
    ns_query: tuple            # part 2: context lengths
    d_query: int               # part 2: dimension of the sphere S^{d-1} (rows (a), (b))
    d_values: tuple            # part 2 (c): the dimensions of the gamma* family (d_query among them)
    gammas: tuple              # part 2: grid of gamma for the curves
    seeds: int                 # part 2 (>= 10)
    n_tokens: int              # part 2: explicit tokens (uniform_sphere) at this n, same seeds


QUICK = Settings(n_max=10**4, n_points=17, n_particles=(8, 32), ns_query=(10**2, 10**3, 10**4), d_query=256,
                 d_values=(64, 256, 1024), gammas=(0.5, 0.75, 1.0, 1.25, 1.5, 2.0), seeds=10, n_tokens=500)
FULL = Settings(n_max=10**6, n_points=41, n_particles=(8, 32, 128, 512), ns_query=(10**2, 10**3, 10**4, 10**5, 10**6),
                d_query=512, d_values=(64, 512, 4096),
                gammas=(0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0), seeds=20, n_tokens=2000)


# ------------------------------------------------------------------------------------ part 1
def derived_exponent(kappa, alpha):
    """The rate ``p`` of ``|rho'_n - rho'_inf| ~ C n^{-p}`` (module docstring)."""
    if abs(kappa - 1.0) <= 1e-12:
        return 1.0
    if kappa < 1.0:
        return (2.0 if alpha == 0 else 1.0) * (1.0 - kappa)
    return kappa - 1.0


def correction_order(kappa):
    """Order ``q`` of the leading relative correction ``n^{-q}`` to ``C n^{-p}``: ``min(kappa, 1 - kappa)`` below
    criticality (``w`` and ``b/w``), ``kappa - 1`` above (``1 - w``), 1 at it (``w = 1/2 + O(1/n)``)."""
    if abs(kappa - 1.0) <= 1e-12:
        return 1.0
    return min(kappa, 1.0 - kappa) if kappa < 1.0 else min(kappa - 1.0, 1.0)


def extrapolated_exponent(ns, err, q):
    """Intercept of the local exponents ``-d log err / d log n`` regressed on ``n^{-q}`` (their leading correction)."""
    loc = -np.diff(np.log(err)) / np.diff(np.log(ns))
    nm = np.sqrt(ns[1:] * ns[:-1].astype(float))
    return float(np.polyfit(nm ** (-q), loc, 1)[1])


def particles_layer(rho, beta, n, alpha):
    """``(mean, spread)`` of the off-diagonal cosines after one layer of the library on ``equiangular(n, n, rho)``."""
    X = mf.initial.equiangular(n, n, rho, seed=n)[None]
    system = BatchedSystem(mf.scalar_heads([1.0], n, beta, normalization="softmax"))
    Z = (system.field(X) if alpha == 0 else step(system, X, 1.0 / alpha, rule="pre_ln"))[0]
    Y = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    off = (Y @ Y.T)[~np.eye(n, dtype=bool)]
    return float(off.mean()), float(off.max() - off.min())


def part1(s):
    ns = np.unique(np.round(np.geomspace(100, s.n_max, s.n_points)).astype(int))
    last = ns >= s.n_max / 10
    first = ns <= 1000
    rows, arrays = [], {"ns": ns}
    for rho in RHOS:
        for alpha in ALPHAS:
            for kappa in KAPPAS:
                gamma = kappa / (1.0 - rho)
                lim = T.critical_scaling_limit(rho, gamma, alpha)
                r = np.array([T.equiangular_layer(rho, gamma * np.log(n), int(n), alpha) for n in ns])
                err = np.abs(r - lim)
                p = derived_exponent(kappa, alpha)
                fit = fit_slope(ns[last], err[last], log_x=True, log_y=True)
                fit0 = fit_slope(ns[first], err[first], log_x=True, log_y=True)
                window = ns >= s.n_max / 100
                ext = extrapolated_exponent(ns[window], err[window], correction_order(kappa))
                parts = [particles_layer(rho, gamma * np.log(n), n, alpha) for n in s.n_particles]
                scal = [T.equiangular_layer(rho, gamma * np.log(n), n, alpha) for n in s.n_particles]
                key = f"rho{rho:g}_alpha{alpha:g}_kappa{kappa:g}"
                arrays[key] = r
                rows.append({"rho": rho, "alpha": alpha, "kappa": kappa, "gamma": gamma, "limit": lim,
                             "rho_new_at_nmax": float(r[-1]), "err_at_nmax": float(err[-1]),
                             "angle_ratio_limit": float(np.arccos(min(lim, 1.0)) / np.arccos(rho)),
                             "angle_ratio_at_nmax": float(np.arccos(min(r[-1], 1.0)) / np.arccos(rho)),
                             "derived_exponent": p, "fitted_exponent": -fit.slope, "fitted_exponent_first": -fit0.slope,
                             "extrapolated_exponent": ext,
                             "exponent_ok": bool(abs(ext - p) <= EXPONENT_TOL),
                             "exponent_converges": bool(abs(-fit.slope - p) <= abs(-fit0.slope - p) + 1e-9),
                             "particles_n": list(s.n_particles), "particles_rho_new": [q[0] for q in parts],
                             "particles_spread": [q[1] for q in parts], "scalar_rho_new": scal,
                             "particles_max_err": float(max(abs(q[0] - v) for q, v in zip(parts, scal))),
                             "particles_ok": bool(max(abs(q[0] - v) for q, v in zip(parts, scal)) <= PARTICLE_TOL
                                                  and max(q[1] for q in parts) <= PARTICLE_TOL)})
    return rows, arrays


# ------------------------------------------------------------------------------------ part 2
def log_mgf(beta, d):
    """``log E e^{beta t}`` for ``t = <q, x>``, ``x`` uniform on ``S^{d-1}`` (density ``~ (1-t^2)^{(d-3)/2}``), by
    quadrature around the maximum of the log-integrand (no Bessel function of large order to underflow)."""
    m = (d - 3) / 2.0
    f = lambda t: beta * t + (m * np.log1p(-t * t) if m else 0.0)                  # noqa: E731  (d = 3: flat)
    ts = (-(d - 3) + np.sqrt((d - 3) ** 2 + 4 * beta * beta)) / (2 * beta) if beta > 0 else 0.0
    fmax = f(ts)
    inner = [ts] if -1.0 < ts < 1.0 else None
    val, _ = sint.quad(lambda t: np.exp(f(t) - fmax), -1.0, 1.0, points=inner, limit=200, epsabs=0, epsrel=1e-12)
    return float(np.log(val) + fmax - special.betaln(0.5, (d - 1) / 2.0))


def annealed_self(gamma, n, d):
    """Annealed self-weight, ``1/sum p^2`` (self row) and ``1/sum p^2`` (query not a key) at ``beta = gamma log n``."""
    beta = gamma * np.log(n)
    m1 = np.exp(log_mgf(beta, d) - beta)                 # M(beta) e^{-beta}
    m2 = np.exp(log_mgf(2 * beta, d) - 2 * beta)         # M(2 beta) e^{-2 beta}
    z = 1.0 + (n - 1) * m1
    return 1.0 / z, z * z / (1.0 + (n - 1) * m2), n * np.exp(2 * log_mgf(beta, d) - log_mgf(2 * beta, d))


def annealed_gamma_star(n, d):
    """``gamma`` at which the annealed self-weight is 1/2: ``(n-1) M_d(beta) e^{-beta} = 1``."""
    g = lambda gam: np.log(n - 1.0) + log_mgf(gam * np.log(n), d) - gam * np.log(n)     # noqa: E731
    return float(optimize.brentq(g, 0.2, 5.0, xtol=1e-12))


def annealed_resolution(n, d, gamma):
    """How far the annealed ``gamma*`` may sit from the mean quenched one: the Jensen gap
    ``E log sum - log E sum ~ -Var(sum) / (2 (E sum)^2) = -M(2 beta) / (2 (n-1) M(beta)^2)`` divided by the slope
    ``|d/dgamma [log(n-1) + log M(gamma log n) - gamma log n]|`` of the annealed crossing equation."""
    beta = gamma * np.log(n)
    gap = 0.5 * np.exp(log_mgf(2 * beta, d) - 2 * log_mgf(beta, d)) / (n - 1)
    h = 1e-5
    g = lambda gam: log_mgf(gam * np.log(n), d) - gam * np.log(n)     # noqa: E731
    return float(gap / abs((g(gamma + h) - g(gamma - h)) / (2 * h)))


def sample_scores(n, d, seed):
    """``n`` scores ``<q, x_j>`` of a fixed query against keys uniform on ``S^{d-1}`` (exact law)."""
    rng = np.random.default_rng(seed)
    return 2.0 * rng.beta((d - 1) / 2.0, (d - 1) / 2.0, size=n) - 1.0


def row_stats(scores, beta, self_score):
    """Self-weight (or NaN), ``1/sum p^2`` and ``exp(entropy)`` of ``softmax(beta * scores)`` (+ the self key)."""
    a = beta * scores
    if self_score is not None:
        a = np.r_[beta * self_score, a]
    a = a - a.max()
    e = np.exp(a)
    p = e / e.sum()
    ent = -np.sum(p[p > 0] * np.log(p[p > 0]))
    return (float(p[0]) if self_score is not None else np.nan), float(1.0 / np.sum(p * p)), float(np.exp(ent))


def gamma_star(others, n):
    """Exact ``gamma`` where the self-weight ``1 / (1 + sum_j n^{gamma (t_j - 1)})`` crosses 1/2 (increasing in gamma)."""
    dt = others - 1.0
    g = lambda gam: np.log(np.sum(np.exp(gam * np.log(n) * dt)))     # noqa: E731  log sum = 0 at the crossing
    return float(optimize.brentq(g, 1e-3, 20.0, xtol=1e-12))


def part2(s):
    d, G, S = s.d_query, np.array(s.gammas), s.seeds
    L = len(s.ns_query)
    self_w, neff, expH = (np.empty((L, len(G), S)) for _ in range(3))
    neff_free = np.empty((L, len(G), S))
    cells = []
    for j, dd in enumerate(s.d_values):
        for i, n in enumerate(s.ns_query):
            g = np.empty(S)
            for k in range(S):
                t = sample_scores(n, dd, seed=SEED_SCORES + 100_000 * j + 1000 * i + k)
                others = t[: n - 1]                         # self row: n - 1 other keys + the query itself
                g[k] = gamma_star(others, n)
                if dd != d:
                    continue
                for jj, gam in enumerate(G):
                    beta = gam * np.log(n)
                    self_w[i, jj, k], neff[i, jj, k], expH[i, jj, k] = row_stats(others, beta, 1.0)
                    neff_free[i, jj, k] = row_stats(t, beta, None)[1]
            ann = annealed_gamma_star(n, dd)
            m, h = mean_ci(g)
            # the annealed value's own approximation error (Jensen gap over the crossing's slope), computed from the
            # closed form alone, before any sample
            cells.append({"n": int(n), "d": int(dd), "gamma_star": g.tolist(), "gamma_star_mean": float(m),
                          "gamma_star_half95": float(h), "gamma_star_annealed": ann,
                          "annealed_resolution": annealed_resolution(n, dd, ann),
                          "finite_d_shift": float(np.log(n) / (2 * dd)),
                          "max_cosine_typical": float(np.sqrt(2 * np.log(n) / dd)),
                          "width_10_90": float(2 * np.log(9.0) / np.log(n))})
    ann = np.array([[annealed_self(g, n, d) for g in G] for n in s.ns_query])            # (L, G, 3)
    rows = [c for c in cells if c["d"] == d]
    gstar = np.array([c["gamma_star"] for c in rows])
    # explicit tokens at n_tokens: the same statistics from mf.initial.uniform_sphere (query = token 0)
    tok_gstar = []
    for k in range(S):
        X = mf.initial.uniform_sphere(s.n_tokens, d, seed=SEED_TOKENS + k)
        tok_gstar.append(gamma_star(X[1:] @ X[0], s.n_tokens))
    beta_gstar = [gamma_star(sample_scores(s.n_tokens - 1, d, seed=SEED_TWIN + k), s.n_tokens) for k in range(S)]
    tm, th = mean_ci(np.array(tok_gstar))
    bm, bh = mean_ci(np.array(beta_gstar))
    arrays = {"q_ns": np.array(s.ns_query), "q_gammas": G, "q_self": self_w, "q_neff": neff, "q_exp_entropy": expH,
              "q_neff_free": neff_free, "q_gamma_star": gstar, "q_annealed": ann,
              "q_gamma_star_annealed": np.array([c["gamma_star_annealed"] for c in rows])}
    tokens = {"n": s.n_tokens, "tokens_mean": float(tm), "tokens_half95": float(th), "beta_mean": float(bm),
              "beta_half95": float(bh), "agree": bool(abs(tm - bm) <= np.hypot(th, bh))}
    return rows, cells, tokens, arrays


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    s = QUICK if quick else FULL
    rows1, arrays = part1(s)
    rows2, cells, tokens, arrays2 = part2(s)
    arrays.update(arrays2)
    np.savez_compressed(out_dir / "data.npz", **arrays)
    meta = {"quick": quick, "settings": s.__dict__, "rhos": RHOS, "kappas": KAPPAS, "alphas": ALPHAS,
            "exponent_tol": EXPONENT_TOL, "particle_tol": PARTICLE_TOL, "layer": rows1, "query": rows2, "cells": cells,
            "tokens_check": tokens}
    save_json(out_dir / "data.json", meta)
    crit = [r for r in rows1 if r["kappa"] == 1.0 and r["alpha"] == 0.0]
    return {"critical_limit_alpha0": {f"rho={r['rho']:g}": (r["limit"], r["rho_new_at_nmax"]) for r in crit},
            "exponents_ok": all(r["exponent_ok"] for r in rows1),
            "particles_ok": all(r["particles_ok"] for r in rows1),
            "gamma_star": {r["n"]: (r["gamma_star_mean"], r["gamma_star_half95"], r["gamma_star_annealed"])
                           for r in rows2}}


if __name__ == "__main__":
    from studies.long_context.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
