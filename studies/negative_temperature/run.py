r"""Synchronization on the circle at negative temperature (Polyanskiy, Rigollet, Yao, arXiv 2507.22857).

The paper's model (its abstract: "synchronization for all beta >= -0.16 ... does not occur when beta < -2/3";
the full text was not available to us, the model is the self-attention dynamics on S^1 of Geshkovski et al.
and Criscitiello et al. that the abstract names): n particles on the circle,

.. math:: \dot\theta_i = \frac1n \sum_j e^{\beta\cos(\theta_j - \theta_i)} \sin(\theta_j - \theta_i),

i.e. ``dx_i/dt = P_{x_i} (1/n) sum_j exp(beta <x_i, x_j>) x_j`` (mean normalization, value V = I) with
``beta < 0``; global synchronization = all particles converge to one point from almost every start.

**Mapping onto the library** (``Head`` requires ``beta > 0``): the kernel sees only ``beta <x, M y>``, so

    Head(M = beta_p I, V = I, beta = 1)   ==   Head(M = -I, V = I, beta = |beta_p|)

both give weights ``exp(beta_p <x_i, x_j>)`` and the value ``+x_j`` (no 1/beta: the mean-normalized
velocity of MODEL.md section 1 has none).  The zonal head ``M = V = -I`` is *not* the paper's model: its
value is ``-x_j``, the velocity is the negative (time reversal).  ``tests/test_study_negative_temperature.py``
checks all three forms against the closed-form angular velocity above.

Parts:

1. *Random starts*: i.i.d. uniform angles, n in ``ns``, a beta grid in [-2.5, 2] finer near -2/3 and -0.16 (the
   positive-temperature side beta >= 0 included, issue 33); synchronized at time T iff every particle lies within
   ``SYNC_TOL`` rad of the circular mean direction (``spread``); the classification is repeated at 2T (must not
   change).
2. *Near three equal clusters* (n a multiple of 3): clusters at 120 degrees (n = 3: the equilateral triangle), each
   angle perturbed by N(0, sigma^2): a start set of positive measure.  The triangle's non-rotational eigenvalue is
   ``lambda_3(beta) = -g'(2 pi / 3) = e^{-beta/2} (1/2 + 3 beta / 4)`` (``g(x) = e^{beta cos x} sin x``), negative iff
   ``beta < -2/3``: the paper's bound.
3. *Near three unequal clusters* (issue 33; n = 4, 5, 8, 11, not multiples of 3): sizes ``(a, a, c)`` as equal as
   possible, at the symmetric equilibrium ``(psi, -psi, 0)`` with ``a g(2 psi) + c g(psi) = 0`` when a linearly stable
   one exists (:func:`unequal_state`), else at 120 degrees; perturbed by N(0, sigma^2).  Derived here: such a stable
   state exists only for ``beta < beta_u(n) < -2/3`` (:func:`unequal_threshold`); the runs test that prediction
   (sync iff no stable unequal state, at every beta whose leading rate exceeds ``RATE_MIN``) and, with the i.i.d.
   starts of the same n and beta, the reading "no global synchronization below -2/3 for every n".
4. *Linear rate at the triangle*: the decay/growth rate of the gap deviations of a perturbed triangle,
   fitted, against ``lambda_3``; and the regular k-gon thresholds (k = 2..10 equal clusters).
5. *Circle PDE* (:class:`meanfield.CirclePDE`, quadrature path: the head is not zonal): Fourier growth
   rates at the uniform density against ``sigma_k = k^2 I_k(beta) / beta`` (= ``-growth_rate(k, [-1],
   |beta|, d=2)``: the zonal V = M = -I rates with the sign flipped), and runs from a randomly perturbed
   uniform density until the resolution monitor stops them.

Seeds (issue 33): every particle run has its own start, ``np.random.default_rng((SEED_TAG, part, n, i_beta, k))``
(fresh: issue 24's run used integer seeds shared across beta), so runs are independent and counts pool.

Run from the repo root: ``python -m studies.negative_temperature.run [--quick]``.  Quick: 29 s wall.
Full (7 n x 27 beta random-start grid, near-equal 2 x 2 x 19 x 20 and near-unequal 4 x 13 x 20 runs to 2T = 4000,
PDE kmax 128): measured 1120 s wall (704 s CPU) on the shared 2-core machine under load average ~5
(``OPENBLAS_NUM_THREADS=1``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize, special, stats

import meanfield as mf
from meanfield.analysis import stability
from meanfield.core.options import SaveAt, StepControl
from meanfield.models.batched import BatchedSystem
from studies._common import main, mean_ci95, save_json

SYNC_TOL = 1e-3          # rad: largest angle to the circular mean of a synchronized configuration
RTOL, ATOL = 1e-9, 1e-12
BETA_LOW, BETA_HIGH = -2.0 / 3.0, -0.16     # the paper's bounds
SEED_TAG = 33            # issue 33: fresh seeds, one start per (part, n, beta, k)
RATE_MIN = 0.01          # unequal-cluster prediction tested where the leading rate is >= this (e-folds in T_near: >= 10)
FWER = 0.05              # family-wise rate of the Wilson intervals quoted in the verdict table (Bonferroni)


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    random_ns: tuple          # (n, seeds) pairs of the random-start part
    random_betas: tuple
    T: float                  # classification time (checked again at 2T)
    near_ns: tuple            # particle counts of the 3-cluster starts (multiples of 3)
    near_seeds: int
    near_betas: tuple
    near_sigmas: tuple       # perturbation sizes (rad) of the 3-cluster starts: a ball, and a basin probe
    T_near: float
    unequal_ns: tuple         # particle counts of the unequal 3-cluster starts (not multiples of 3)
    unequal_betas: tuple      # its betas below -2/3 must be in random_betas (the two start laws are combined there)
    unequal_seeds: int
    rate_betas: tuple         # triangle linear-rate check
    rate_seeds: int
    pde_betas: tuple
    pde_seeds: int
    pde_kmax: int
    pde_t: float


_GRID = (-2.5, -2.0, -1.5, -1.3, -1.1, -1.0, -0.9, -0.8, -0.75, -0.7, -0.68, -0.65, -0.6, -0.5, -0.4, -0.3, -0.2,
         -0.17, -0.16, -0.15, -0.1, -0.05, -0.02, 0.0, 0.5, 1.0, 2.0)
_NEAR = (-1.5, -1.0, -0.8, -0.72, -0.7, -0.68, -0.67, -0.66, -0.65, -0.63, -0.6, -0.5, -0.3, -0.16, -0.1,
         0.0, 0.5, 1.0, 2.0)
_UNEQ = (-2.5, -2.0, -1.5, -1.3, -1.1, -1.0, -0.9, -0.8, -0.7, -0.5, -0.16, 0.0, 1.0)
QUICK = Settings(random_ns=((3, 20), (4, 10), (5, 10), (8, 10)),
                 random_betas=(-2.0, -1.5, -0.8, -0.5, -0.16, -0.05, 0.0, 1.0), T=200.0,
                 near_ns=(3,), near_seeds=10, near_betas=(-1.0, -0.7, -0.6, -0.16, 0.0, 1.0), near_sigmas=(1e-3, 0.05),
                 T_near=1000.0, unequal_ns=(4, 5), unequal_betas=(-2.0, -1.5, -0.8, -0.16, 1.0), unequal_seeds=10,
                 rate_betas=(-1.2, -0.9, -0.5), rate_seeds=10, pde_betas=(-1.0, -0.16), pde_seeds=10, pde_kmax=48,
                 pde_t=40.0)
FULL = Settings(random_ns=((3, 100), (4, 40), (5, 40), (8, 40), (11, 40), (32, 20), (128, 10)), random_betas=_GRID,
                T=400.0, near_ns=(3, 30), near_seeds=20, near_betas=_NEAR, near_sigmas=(1e-3, 0.05), T_near=2000.0,
                unequal_ns=(4, 5, 8, 11), unequal_betas=_UNEQ, unequal_seeds=20,
                rate_betas=(-1.5, -1.2, -1.0, -0.9, -0.8, -0.75, -0.6, -0.5, -0.4, -0.3), rate_seeds=10,
                pde_betas=(-1.5, -1.0, -0.8, -2.0 / 3.0, -0.5, -0.3, -0.16, -0.05), pde_seeds=10, pde_kmax=128,
                pde_t=60.0)


def start_rng(part, n, i_beta, k):
    """The generator of one particle run's start (issue 33: a start per run, fresh)."""
    return np.random.default_rng((SEED_TAG, part, n, i_beta, k))


def wilson(k, m, z=1.959963984540054):
    """Wilson score interval ``(low, high)`` of ``k / m`` at normal quantile ``z`` (``wilson95`` for z = 1.96)."""
    if m < 1:
        raise ValueError(f"m must be >= 1; received {m!r}")
    p = k / m
    centre = (p + z * z / (2 * m)) / (1 + z * z / m)
    half = z * np.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / (1 + z * z / m)
    return float(max(centre - half, 0.0)), float(min(centre + half, 1.0))


# ------------------------------------------------------------------ the model
def paper_head(beta):
    """The paper's head at inverse temperature ``beta`` (any sign, nonzero): ``M = beta I, V = I, beta = 1``."""
    return mf.Head(M=float(beta) * np.eye(2), V=np.eye(2), beta=1.0)


def angular_velocity(theta, beta):
    """Closed form ``(1/n) sum_j exp(beta cos(theta_j - theta_i)) sin(theta_j - theta_i)``."""
    D = theta[None, :] - theta[:, None]
    return (np.exp(beta * np.cos(D)) * np.sin(D)).mean(axis=1)


def tokens(theta):
    return np.stack([np.cos(theta), np.sin(theta)], axis=-1)


def spread(X):
    """Largest angle (rad) between a particle and the circular mean direction, per system (B,)."""
    m = X.mean(axis=1)
    r = np.linalg.norm(m, axis=-1)
    m = m / np.where(r > 0, r, 1.0)[:, None]
    return np.arccos(np.clip((X * m[:, None, :]).sum(-1), -1.0, 1.0)).max(axis=1)


def simulate(betas, X0, times):
    """Integrate B systems (``betas[b]`` with start ``X0[b]``) together; states at ``times`` (len(times), B, n, 2)."""
    system = BatchedSystem([(paper_head(b),) for b in betas])
    times = np.asarray(times, float)
    tr = mf.integrate(system.rhs, X0, (0.0, float(times[-1])), method="dopri5",
                      step=StepControl(dt=0.05, rtol=RTOL, atol=ATOL),
                      save=SaveAt(t_eval=np.concatenate([[0.0], times]), states=True), retraction=system.retraction)
    if tr.status != 0:
        raise RuntimeError(f"particle integration stopped: {tr.message}")
    return np.asarray(tr.y)[1:]


def triangle_rate(beta):
    """Non-rotational eigenvalue of the equilateral triangle (n = 3), ``-g'(2 pi / 3)``."""
    return np.exp(-beta / 2) * (0.5 + 0.75 * beta)


def _gprime(x, beta):
    return np.exp(beta * np.cos(x)) * (np.cos(x) - beta * np.sin(x) ** 2)


def polygon_eigenvalues(k, beta):
    """Largest collective eigenvalue (modes q = 1..k-1) of k equal clusters on a regular k-gon, and the
    intra-cluster rate ``-(1/k) sum_j g'(2 pi j / k)`` (relevant when clusters hold several particles)."""
    x = 2 * np.pi * np.arange(k) / k
    collective = max(float(np.real((_gprime(x[1:], beta) * (np.exp(1j * q * x[1:]) - 1)).sum() / k))
                     for q in range(1, k))
    return collective, float(-_gprime(x, beta).sum() / k)


def polygon_threshold(k, lo=-6.0, hi=-1e-3, points=1200):
    """Largest beta in [lo, hi] where the k-gon of equal clusters is linearly stable (all rates < 0), or nan."""
    bs = np.linspace(lo, hi, points)
    worst = np.array([max(polygon_eigenvalues(k, b)) for b in bs])
    ok = worst < 0
    if not ok.any():
        return np.nan
    i = np.nonzero(ok)[0].max()
    if i == points - 1:
        return float(hi)
    return float(optimize.brentq(lambda b: max(polygon_eigenvalues(k, b)), bs[i], bs[i + 1], xtol=1e-12))


def cluster_sizes(n):
    """Three cluster sizes ``(a, a, c)`` as equal as possible (two equal, the odd one ``c``); ``a = c`` iff ``3 | n``."""
    q, r = divmod(int(n), 3)
    return (q, q, q + 1) if r == 1 else (q + 1, q + 1, q) if r == 2 else (q, q, q)


def jacobian(theta, beta):
    """Jacobian of the angular velocities (symmetric: ``g'`` is even; the flow is a gradient flow)."""
    n = theta.size
    J = _gprime(theta[None, :] - theta[:, None], beta) / n
    np.fill_diagonal(J, 0.0)
    J[np.diag_indices(n)] = -J.sum(axis=1)
    return J


def leading_rate(theta, beta):
    """Largest eigenvalue of the Jacobian off the rotation mode (the constant vector)."""
    n = theta.size
    Q = np.linalg.qr(np.column_stack([np.ones(n), np.eye(n)[:, :n - 1]]))[0][:, 1:]     # basis of 1-perp
    return float(np.linalg.eigvalsh(Q.T @ jacobian(theta, beta) @ Q).max())


def unequal_roots(a, c, beta, points=2000):
    """Angles ``psi`` in (pi/2, pi) of the symmetric 3-cluster equilibria ``(psi x a, -psi x a, 0 x c)``:
    roots of ``a g(2 psi) + c g(psi)`` (the velocity of the cluster at ``psi``, times ``-n``)."""
    F = lambda p: a * np.exp(beta * np.cos(2 * p)) * np.sin(2 * p) + c * np.exp(beta * np.cos(p)) * np.sin(p)  # noqa: E731
    ps = np.linspace(np.pi / 2 + 1e-9, np.pi - 1e-9, points)
    v = F(ps)
    return [float(optimize.brentq(F, ps[i], ps[i + 1], xtol=1e-14)) for i in range(points - 1) if v[i] * v[i + 1] < 0]


def cluster_angles(sizes, psi):
    a, _, c = sizes
    return np.concatenate([np.full(a, psi), np.full(a, -psi), np.zeros(c)])


def unequal_state(n, beta):
    """``(psi, rate)``: the symmetric unequal 3-cluster equilibrium of ``n`` particles with the smallest leading rate
    (stable iff ``rate < 0``); ``(nan, nan)`` if none exists."""
    sizes = cluster_sizes(n)
    best = (np.nan, np.nan)
    for psi in unequal_roots(sizes[0], sizes[2], beta):
        rate = leading_rate(cluster_angles(sizes, psi), beta)
        if not rate >= best[1]:
            best = (psi, rate)
    return best


def _unequal_stable(n, beta):
    rate = unequal_state(n, beta)[1]
    return bool(np.isfinite(rate) and rate < 0)


def unequal_threshold(n, lo=-4.0, hi=-0.6, points=341):
    """``beta_u(n)``: the largest beta in [lo, hi] with a linearly stable symmetric unequal 3-cluster state (scan, then
    bisection to 1e-10 on stability itself: roots appear and vanish, the rate is not continuous); nan if none."""
    bs = np.linspace(lo, hi, points)
    ok = np.array([_unequal_stable(n, b) for b in bs])
    if not ok.any():
        return np.nan
    i = int(np.nonzero(ok)[0].max())
    if i == points - 1:
        return float(hi)
    a, b = bs[i], bs[i + 1]
    while b - a > 1e-10:
        m = 0.5 * (a + b)
        a, b = (m, b) if _unequal_stable(n, m) else (a, m)
    return float(a)


# ------------------------------------------------------------------ parts
def random_starts(s: Settings):
    out = []
    for n, seeds in s.random_ns:
        betas = np.repeat(s.random_betas, seeds)
        X0 = np.stack([tokens(start_rng(1, n, i, k).uniform(0, 2 * np.pi, n))
                       for i in range(len(s.random_betas)) for k in range(seeds)])
        Y = simulate(betas, X0, [s.T, 2 * s.T])
        sp = np.stack([spread(Y[0]), spread(Y[1])]).reshape(2, len(s.random_betas), seeds)
        out.append({"n": n, "seeds": seeds, "spread_T": sp[0], "spread_2T": sp[1]})
    return out


def near_cluster_starts(s: Settings):
    out = []
    for j, sigma in enumerate(s.near_sigmas):
        for n in s.near_ns:
            centres = np.repeat(2 * np.pi * np.arange(3) / 3, n // 3)
            betas = np.repeat(s.near_betas, s.near_seeds)
            X0 = np.stack([tokens(centres + sigma * start_rng(2 + 10 * j, n, i, k).standard_normal(n))
                           for i in range(len(s.near_betas)) for k in range(s.near_seeds)])
            Y = simulate(betas, X0, [s.T_near, 2 * s.T_near])
            sp = np.stack([spread(Y[0]), spread(Y[1])]).reshape(2, len(s.near_betas), s.near_seeds)
            out.append({"n": n, "sigma": sigma, "spread_T": sp[0], "spread_2T": sp[1]})
    return out


def unequal_cluster_starts(s: Settings, sigma):
    """Starts within ``sigma`` of three unequal clusters (part 3 of the module docstring), per n: spreads at T_near and
    2 T_near, the start used per beta ("equilibrium" or "120 deg"), its leading rate and the prediction."""
    out = []
    for n in s.unequal_ns:
        sizes = cluster_sizes(n)
        states = [unequal_state(n, b) for b in s.unequal_betas]
        stable = [bool(np.isfinite(r) and r < 0) for _, r in states]
        centres = [cluster_angles(sizes, psi if st else 2 * np.pi / 3) for (psi, _), st in zip(states, stable)]
        betas = np.repeat(s.unequal_betas, s.unequal_seeds)
        X0 = np.stack([tokens(centres[i] + sigma * start_rng(3, n, i, k).standard_normal(n))
                       for i in range(len(s.unequal_betas)) for k in range(s.unequal_seeds)])
        Y = simulate(betas, X0, [s.T_near, 2 * s.T_near])
        sp = np.stack([spread(Y[0]), spread(Y[1])]).reshape(2, len(s.unequal_betas), s.unequal_seeds)
        rates = [r for _, r in states]
        # the rate that decides how fast the start leaves or returns: the stable state's, else that of the 120-degree
        # placement's nearest equilibrium if any (slow escape near a saddle-node), else none (decidable)
        decidable = [not (np.isfinite(r) and abs(r) < RATE_MIN) for r in rates]
        out.append({"n": n, "sizes": sizes, "sigma": sigma, "spread_T": sp[0], "spread_2T": sp[1],
                    "start": ["equilibrium" if st else "120 deg" for st in stable],
                    "psi": [float(psi) for psi, _ in states], "leading_rate": [float(r) for r in rates],
                    "expected_sync": [not st for st in stable], "decidable": decidable})
    return out


def gap_deviation(X):
    """Largest |gap - 2 pi / 3| of sorted angles, per system (three particles each)."""
    th = np.sort(np.mod(np.arctan2(X[..., 1], X[..., 0]), 2 * np.pi), axis=-1)
    gaps = np.diff(np.concatenate([th, th[..., :1] + 2 * np.pi], axis=-1), axis=-1)
    return np.abs(gaps - 2 * np.pi / 3).max(axis=-1)


def triangle_rates(s: Settings, eps=1e-5, window=(1e-11, 1e-4)):
    """Fitted log-slope of the gap deviation of a perturbed triangle, per (beta, seed), over the window."""
    betas = np.repeat(s.rate_betas, s.rate_seeds)
    base = 2 * np.pi * np.arange(3) / 3
    X0 = np.stack([tokens(base + eps * np.random.default_rng(30_000 + k).standard_normal(3))
                   for _ in s.rate_betas for k in range(s.rate_seeds)])
    t_end = np.max(np.log(window[1] / window[0]) / np.abs(triangle_rate(np.array(s.rate_betas)))) * 1.2
    times = np.linspace(t_end / 400, t_end, 400)
    Y = simulate(betas, X0, times)
    dev = np.stack([gap_deviation(y) for y in Y], axis=1)           # (B, times)
    rates = np.full(len(betas), np.nan)
    for b in range(len(betas)):
        use = (dev[b] > window[0]) & (dev[b] < window[1])
        if use.sum() >= 5:
            rates[b] = np.polyfit(times[use], np.log(dev[b, use]), 1)[0]
    return rates.reshape(len(s.rate_betas), s.rate_seeds)


def pde_rates(betas, kmax, ks=(1, 2, 3, 4, 5, 6), eps=1e-4):
    """Growth rates at the uniform density from the PDE's tendency (central difference in eps)."""
    meas = np.zeros((len(betas), len(ks)))
    for i, b in enumerate(betas):
        pde = mf.CirclePDE((paper_head(b),), kmax=kmax)
        for j, k in enumerate(ks):
            c_plus, c_minus = pde.uniform(), pde.uniform()
            c_plus[k], c_minus[k] = eps, -eps
            meas[i, j] = np.real(pde.tendency(c_plus)[k] - pde.tendency(c_minus)[k]) / (2 * eps)
    ks_a = np.array(ks, float)
    closed = np.array([[k * k * special.iv(k, b) / b for k in ks] for b in betas])
    library = np.array([[-stability.growth_rate(int(k), [-1.0], abs(b), d=2) for k in ks] for b in betas])
    return ks_a, meas, closed, library


def count_peaks(f, level=1.5):
    """Local maxima of a periodic sampled density above ``level``."""
    return int(np.sum((f > np.roll(f, 1)) & (f >= np.roll(f, -1)) & (f > level)))


def pde_runs(s: Settings, amp=1e-3, modes=8):
    """From ``1 + amp * (random modes 1..modes)`` until ``pde_t`` or the resolution monitor's stop."""
    res = {"t_stop": np.zeros((len(s.pde_betas), s.pde_seeds)), "r_stop": np.zeros((len(s.pde_betas), s.pde_seeds)),
           "peaks": np.zeros((len(s.pde_betas), s.pde_seeds), int), "c1_growth": np.zeros((len(s.pde_betas), s.pde_seeds))}
    for i, b in enumerate(s.pde_betas):
        pde = mf.CirclePDE((paper_head(b),), kmax=s.pde_kmax)
        for k in range(s.pde_seeds):
            rng = np.random.default_rng(40_000 + k)
            c0 = pde.uniform()
            c0[1:modes + 1] = amp * (rng.standard_normal(modes) + 1j * rng.standard_normal(modes)) / np.sqrt(2)
            tr = mf.solve_reduced(pde, c0, s.pde_t, save=SaveAt(t_eval=np.linspace(0, s.pde_t, 61), states=True))
            c = pde.coefficients(np.asarray(tr.y)[-1])
            res["t_stop"][i, k] = tr.t[-1]
            res["r_stop"][i, k] = abs(c[1])
            res["peaks"][i, k] = count_peaks(pde.synthesis(c))
            # early growth of |c_1| (t in [0, 4], linear regime): against sigma_1
            c4 = pde.coefficients(np.asarray(tr.y)[4])
            res["c1_growth"][i, k] = np.log(abs(c4[1]) / abs(c0[1])) / tr.t[4]
    return res


def _fractions(sync, z=1.959963984540054):
    """Per row: synchronized count, total, Wilson interval (95 % unless ``z`` says otherwise)."""
    k, m = sync.sum(axis=1), sync.shape[1]
    return [{"k": int(a), "m": int(m), "wilson": wilson(int(a), int(m), z)} for a in k]


VERDICT_ROWS = 4          # intervals quoted in the verdict table (one per row): the Bonferroni family


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    s = QUICK if quick else FULL
    missing = [(n, b) for n in s.unequal_ns for b in s.unequal_betas if b < BETA_LOW
               and (b not in s.random_betas or n not in dict(s.random_ns))]
    if missing:
        raise ValueError(f"every unequal (n, beta < -2/3) needs i.i.d. starts of the same n and beta; missing {missing}")
    rnd = random_starts(s)
    near = near_cluster_starts(s)
    uneq = unequal_cluster_starts(s, min(s.near_sigmas))
    rates = triangle_rates(s)
    ks, meas, closed, library = pde_rates(s.pde_betas, s.pde_kmax)
    pde = pde_runs(s)
    polys = {k: polygon_threshold(k) for k in range(2, 11)}
    uneq_thr = {n: unequal_threshold(n) for n in s.unequal_ns}

    rb, nb, ub = np.array(s.random_betas), np.array(s.near_betas), np.array(s.unequal_betas)
    z_family = float(stats.norm.ppf(1 - FWER / (2 * VERDICT_ROWS)))
    meta = {"quick": quick, "sync_tol": SYNC_TOL, "T": s.T, "T_near": s.T_near, "near_sigmas": list(s.near_sigmas),
            "random_betas": list(rb), "near_betas": list(nb), "unequal_betas": list(ub), "rate_betas": list(s.rate_betas),
            "pde_betas": list(s.pde_betas), "pde_kmax": s.pde_kmax, "pde_t": s.pde_t, "seed_tag": SEED_TAG,
            "rate_min": RATE_MIN, "fwer": FWER, "family_size": VERDICT_ROWS, "family_z": z_family,
            "beta_low": BETA_LOW, "beta_high": BETA_HIGH, "polygon_thresholds": polys,
            "unequal_thresholds": uneq_thr}
    arrays = {}
    changed, sync_max_spread, nonsync_min_spread = 0, 0.0, np.inf
    meta["random"], meta["near"], meta["unequal"] = [], [], []
    for part, key in ((rnd, "random"), (near, "near"), (uneq, "unequal")):
        for r in part:
            syncT, sync2T = r["spread_T"] < SYNC_TOL, r["spread_2T"] < SYNC_TOL
            changed += int((syncT != sync2T).sum())
            if syncT.any():
                sync_max_spread = max(sync_max_spread, float(r["spread_T"][syncT].max()))
            if (~syncT).any():
                nonsync_min_spread = min(nonsync_min_spread, float(r["spread_T"][~syncT].min()))
            tag = f"n{r['n']}" + (f"_sigma{r['sigma']:g}" if "sigma" in r else "")
            entry = {"n": r["n"], "sigma": r.get("sigma"), "tag": tag, "fractions": _fractions(syncT)}
            if key == "unequal":
                entry.update({k: r[k] for k in ("sizes", "start", "psi", "leading_rate", "expected_sync", "decidable")})
            meta[key].append(entry)
            arrays[f"{key}_spread_T_{tag}"] = r["spread_T"]
            arrays[f"{key}_spread_2T_{tag}"] = r["spread_2T"]

    def count(mask_fn, parts=("random", "near", "unequal"), sigma=None):
        """Pooled (synchronized, total) over the runs of ``parts`` whose beta passes ``mask_fn`` (independent starts)."""
        k = m = 0
        for key in parts:
            betas = {"random": rb, "near": nb, "unequal": ub}[key]
            for r in meta[key]:
                if sigma is not None and key != "random" and r["sigma"] != sigma:
                    continue
                for b, fr in zip(betas, r["fractions"]):
                    if mask_fn(b):
                        k, m = k + fr["k"], m + fr["m"]
        return k, m

    sig0 = min(s.near_sigmas)
    neg_side = count(lambda b: BETA_HIGH - 1e-12 <= b < 0)
    pos_side = count(lambda b: b >= 0)
    equal_low = count(lambda b: b < BETA_LOW, parts=("near",), sigma=sig0)
    # the unequal cells below -2/3: near-unequal and i.i.d. counts of the same (n, beta)
    cells = []
    for r in meta["unequal"]:
        rr = next(x for x in meta["random"] if x["n"] == r["n"])
        for b, fr in zip(ub, r["fractions"]):
            if b < BETA_LOW:
                fi = rr["fractions"][int(np.flatnonzero(np.isclose(rb, b))[0])]
                cells.append({"n": r["n"], "beta": float(b), "unequal": [fr["k"], fr["m"]], "iid": [fi["k"], fi["m"]],
                              "global_sync": fr["k"] == fr["m"] and fi["k"] == fi["m"]})
    gs = [c for c in cells if c["global_sync"]]
    gs_runs = sum(c["unequal"][1] + c["iid"][1] for c in gs)
    # the derived unequal-state prediction, at every decidable (n, beta) of the unequal grid
    mismatches = []
    for r in meta["unequal"]:
        for b, fr, exp, dec in zip(ub, r["fractions"], r["expected_sync"], r["decidable"]):
            if dec and fr["k"] != (fr["m"] if exp else 0):
                mismatches.append({"n": r["n"], "beta": float(b), "k": fr["k"], "m": fr["m"], "expected_sync": exp})

    # where the near-cluster fraction switches (largest tested beta with 0 synchronized, smallest with all)
    switch = {}
    for key, betas in (("near", nb), ("unequal", ub)):
        for r in meta[key]:
            k = np.array([fr["k"] for fr in r["fractions"]])
            m = r["fractions"][0]["m"]
            below = betas[k == 0]
            above = betas[k == m]
            switch[f"{key}_{r['tag']}"] = [float(below.max()) if below.size else None,
                                           float(above.min()) if above.size else None]
    rnd_fail = {r["n"]: (float(rb[[fr["k"] < fr["m"] for fr in r["fractions"]]].max())
                         if any(fr["k"] < fr["m"] for fr in r["fractions"]) else None) for r in meta["random"]}
    rate_rel = np.abs(rates - triangle_rate(np.array(s.rate_betas))[:, None]) / np.abs(
        triangle_rate(np.array(s.rate_betas)))[:, None]
    meta.update({
        "classification_changed_T_to_2T": changed,
        "sync_max_spread_T": sync_max_spread, "nonsync_min_spread_T": nonsync_min_spread,
        "count_negative_side": list(neg_side), "count_positive_side": list(pos_side), "count_equal_below": list(equal_low),
        "wilson_family": {"negative_side": wilson(*neg_side, z_family), "positive_side": wilson(*pos_side, z_family),
                          "equal_below": wilson(*equal_low, z_family),
                          "unequal_global_sync": wilson(0, gs_runs, z_family) if gs_runs else None},
        "all_sync_negative_side": neg_side[0] == neg_side[1],
        "all_sync_positive_side": pos_side[0] == pos_side[1],
        "all_sync_at_or_above_beta_high": neg_side[0] == neg_side[1] and pos_side[0] == pos_side[1],
        "all_sync_above_beta_low": count(lambda b: b > BETA_LOW)[0] == count(lambda b: b > BETA_LOW)[1],
        "near_none_sync_below_beta_low": equal_low[0] == 0,
        "unequal_cells_below_beta_low": cells, "unequal_global_sync_cells": gs, "unequal_global_sync_runs": gs_runs,
        "unequal_prediction_mismatches": mismatches,
        "near_switch": switch, "random_largest_failing_beta": rnd_fail,
        "triangle_rate_fit": [mean_ci95(r) for r in rates],
        "triangle_rate_closed": list(triangle_rate(np.array(s.rate_betas))),
        "triangle_rate_max_rel_err": float(np.nanmax(rate_rel)),
        "triangle_rate_fits_missing": int(np.isnan(rates).sum()),
        # errors relative to the largest |sigma_k| at the same beta (high modes are ~1e-8 at small |beta|)
        "pde_rate_max_rel_err_closed": float(np.max(np.abs(meas - closed) / np.abs(closed).max(axis=1, keepdims=True))),
        "pde_rate_max_rel_err_library": float(np.max(np.abs(library - closed) / np.abs(closed).max(axis=1, keepdims=True))),
        "pde_sigma1_all_positive": bool(np.all(closed[:, 0] > 0)),
        "pde_t_stop": [mean_ci95(x) for x in pde["t_stop"]],
        "pde_r_stop": [mean_ci95(x) for x in pde["r_stop"]],
        "pde_peaks": [sorted(set(int(p) for p in x)) for x in pde["peaks"]],
        "pde_c1_growth": [mean_ci95(x) for x in pde["c1_growth"]],
    })
    np.savez_compressed(out_dir / "data.npz", random_betas=rb, near_betas=nb, unequal_betas=ub,
                        rate_betas=np.array(s.rate_betas), triangle_rates=rates, pde_betas=np.array(s.pde_betas),
                        pde_ks=ks, pde_rates_measured=meas, pde_rates_closed=closed, pde_rates_library=library,
                        pde_t_stop=pde["t_stop"], pde_r_stop=pde["r_stop"], pde_peaks=pde["peaks"],
                        pde_c1_growth=pde["c1_growth"], **arrays)
    save_json(out_dir / "data.json", meta)
    return {k: meta[k] for k in ("all_sync_negative_side", "all_sync_positive_side", "all_sync_at_or_above_beta_high",
                                 "all_sync_above_beta_low", "near_none_sync_below_beta_low",
                                 "unequal_global_sync_cells", "unequal_prediction_mismatches", "unequal_thresholds",
                                 "near_switch", "random_largest_failing_beta", "classification_changed_T_to_2T",
                                 "triangle_rate_max_rel_err", "pde_rate_max_rel_err_closed")}


if __name__ == "__main__":
    from studies.negative_temperature.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
