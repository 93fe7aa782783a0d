"""Critical inverse temperature of radial dominance (paper Thm 19, MODEL.md section 2).

Compares the closed form ``beta*(H, n, alpha)`` and ``c*(H)`` of :mod:`meanfield.analysis.theory` with
thresholds found numerically on the particle system at t = 0, for three readings of "per-head
monotonicity holds":

* ``norm_bounded`` -- Condition 8, norm-bounded reading, for all tokens and heads;
* ``exact``        -- Condition 8, exact reading, for all tokens and heads;
* ``energy``       -- every exact per-head ``dE_h/dt`` (``ParticleSystem.energy_rates``) >= 0.

Token/head configurations (``d = n``, all heads of strength ``alpha``):

* ``shared``  -- n orthonormal tokens ``e_1..e_n``; H scalar heads ``M_h = V_h = alpha I`` all
  acting on the whole token span (``mf.scalar_heads``).  MODEL.md's derivation of beta*.
* ``split``   -- the same tokens; heads on disjoint coordinate blocks
  (``mf.orthogonal_block_heads``), so each token lies in exactly one head's block.
* ``rotated`` -- the block heads of ``split`` with a randomly rotated orthonormal basis as
  tokens (``mf.initial.orthonormal(n, n, seed)``): every token is seen by every head.

For each (configuration, normalization, H, n, reading) the predicate is scanned on a beta grid;
the first failure is refined by Brent's method (to ~1e-12) between the last grid point where it holds
and the first where it fails; ``inf`` means it never failed on the grid, ``0`` that it already
failed at the first grid point.  Round-off guard: a margin counts as >= 0 when it is >= -1e-12
times the largest term it compares.

Run from the repo root: ``python -m studies.critical_temperature.run [--quick]``.
Quick mode (H = 2..4, n = 8, 32, coarse grid): ~7 s CPU.  Full mode (H = 2..8,
n = 8, 16, 32, 64, 128, both normalizations): measured 10 min wall on the shared 2-core machine
under load average ~12 (much less when idle); set ``OPENBLAS_NUM_THREADS=1`` on a busy machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy import optimize

import meanfield as mf
from studies._common import main, save_json

CONFIGS = ("shared", "split", "rotated")
READINGS = ("norm_bounded", "exact", "energy")
NORMALIZATIONS = ("mean", "softmax")
ALPHA = 1.0
SEED = 7
REL_TOL = 1e-12          # round-off guard on margins (relative to the largest compared term)
BISECT_TOL = 1e-12


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    H_values: tuple          # head counts
    n_values: tuple          # token counts (d = n)
    beta_grid: tuple         # scan grid of each threshold search
    curve_points: int        # beta points of the margin curves (H = 2, n = 32) on [0.02, 5]
    skip_rotated_softmax: bool


QUICK = Settings(H_values=tuple(range(2, 5)), n_values=(8, 32), beta_grid=tuple(np.linspace(0.02, 6.0, 25)),
                 curve_points=30, skip_rotated_softmax=True)
FULL = Settings(H_values=tuple(range(2, 9)), n_values=(8, 16, 32, 64, 128), beta_grid=tuple(np.linspace(0.02, 8.0, 41)),
                curve_points=200, skip_rotated_softmax=False)


def make_system(config, H, n, beta, alpha=ALPHA, normalization="mean"):
    """Particle system and tokens of one configuration (module docstring); ``d = n``.

    Returns
    -------
    system : ParticleSystem
    X : ndarray, shape (n, n)
    """
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {CONFIGS}; received {config!r}")
    if config == "shared":
        heads = mf.scalar_heads([alpha] * H, n, beta, normalization=normalization)
    else:
        heads = mf.orthogonal_block_heads(n, H, alpha, beta, normalization=normalization)
    return mf.ParticleSystem(heads), _tokens(n, config == "rotated")


@lru_cache(maxsize=None)
def _tokens(n, rotated):
    X = mf.initial.orthonormal(n, n, seed=SEED if rotated else None)
    X.setflags(write=False)
    return X


def margins(config, H, n, beta, alpha=ALPHA, normalization="mean", readings=READINGS):
    """Relative worst margins of the readings at ``beta`` (>= 0: the reading holds).

    Each margin is divided by the largest term it compares, so ``-REL_TOL`` is round-off.

    Returns
    -------
    dict reading -> float, plus ``c`` (the largest radial fraction ``|a_i^h| / |u_i^h|``).
    """
    system, X = make_system(config, H, n, beta, alpha, normalization)
    out = {}
    if "energy" in readings:
        rates = system.energy_rates(X)
        out["energy"] = float(rates.min() / np.abs(rates).max())
        if set(readings) == {"energy"}:
            return out
    rd = mf.diagnostics.radial_dominance(system, X)
    sh = mf.diagnostics.radial_shadows(system, X)
    a, nrm, tan2 = sh["a"], sh["norm"], sh["tangential"] ** 2
    scale_nb = np.maximum(tan2, np.abs(a) * (nrm.sum(0) - nrm)).max()
    scale_ex = np.maximum(tan2, np.abs(a * (a.sum(0) - a))).max()
    out.update({"norm_bounded": float(rd["norm_bounded_margin"].min() / scale_nb),
                "exact": float(rd["exact_margin"].min() / scale_ex),
                "c": float((np.abs(a) / nrm).max())})
    return out


def _margin(config, H, n, beta, reading, normalization):
    return margins(config, H, n, beta, normalization=normalization, readings=(reading,))[reading] + REL_TOL


def threshold(config, H, n, reading, normalization, grid):
    """First beta where ``reading`` fails: grid scan, then Brent's method on the margin.

    The worst margin is continuous in beta, so the sign change between the last grid point
    where the reading holds and the first where it fails is refined by ``brentq`` to
    ``BISECT_TOL``.

    Returns
    -------
    beta_c : float
        ``inf`` if it holds on the whole grid, ``0.0`` if it fails at ``grid[0]``.
    reentrant : bool
        True if the reading holds again somewhere on the grid after its first failure.
    """
    m = np.array([_margin(config, H, n, b, reading, normalization) for b in grid])
    ok = m >= 0
    if ok.all():
        return np.inf, False
    k = int(np.argmin(ok))
    if k == 0:
        return 0.0, bool(ok.any())
    root = optimize.brentq(lambda b: _margin(config, H, n, b, reading, normalization), grid[k - 1], grid[k],
                           xtol=BISECT_TOL, rtol=4 * np.finfo(float).eps)
    return float(root), bool(ok[k:].any())


def split_norm_bounded_closed_form(H, n, alpha=ALPHA, normalization="mean"):
    """Derived threshold of the norm-bounded reading for ``split`` (blocks of sizes ``m_h``).

    A token ``x_i`` in block ``h`` (size ``m``) sees its own head with the radial fraction of
    MODEL.md and every other head purely tangentially (``a = 0``, ``|u^{h'}| = alpha sqrt(m_h') / n``
    in both normalizations, since all out-of-block scores are 0 and the softmax row sum is then
    1).  With ``E = exp(beta alpha)`` and ``S = sum_{h' != h} sqrt(m_h') / n`` the condition at
    that token reads

    mean: ``(m - 1) / n >= E S``;   softmax: ``(m - 1) / n >= E (E + n - 1) S / n``.

    The threshold is the smallest over blocks; ``<= 0`` means it fails for every beta > 0.
    """
    sizes = np.array([len(b) for b in np.array_split(np.arange(n), H)], dtype=float)
    out = []
    for h, m in enumerate(sizes):
        others = np.delete(sizes, h)
        if m <= 1:
            out.append(-np.inf)
            continue
        S = np.sqrt(others).sum() / n
        if normalization == "mean":
            E = (m - 1) / n / S
        else:   # S E^2 + (n-1) S E - (m-1) = 0
            E = (-(n - 1) * S + np.sqrt(((n - 1) * S) ** 2 + 4 * S * (m - 1))) / (2 * S)
        out.append(np.log(E) / alpha)
    return float(min(out))


def run(out_dir: Path, quick: bool = False) -> dict:
    out_dir = Path(out_dir)
    settings = QUICK if quick else FULL
    Hs, ns, grid = np.array(settings.H_values), np.array(settings.n_values), np.array(settings.beta_grid)
    norms = NORMALIZATIONS
    thr = np.full((len(CONFIGS), len(norms), len(READINGS), len(Hs), len(ns)), np.nan)
    reent = np.zeros(thr.shape, dtype=bool)
    for ci, cfg in enumerate(CONFIGS):
        for ni, nz in enumerate(norms):
            for ri, rd in enumerate(READINGS):
                if cfg == "rotated" and nz == "softmax" and settings.skip_rotated_softmax:
                    continue
                for hi, H in enumerate(Hs):
                    for ki, n in enumerate(ns):
                        thr[ci, ni, ri, hi, ki], reent[ci, ni, ri, hi, ki] = threshold(
                            cfg, int(H), int(n), rd, nz, grid)
    bstar = mf.theory.beta_star(Hs[:, None], ns[None, :], ALPHA)
    exact_cf = np.log((ns[None, :] - 1) / (Hs[:, None] - 1.0)) / (2 * ALPHA)
    split_cf = np.array([[[split_norm_bounded_closed_form(int(H), int(n), ALPHA, nz) for n in ns]
                          for H in Hs] for nz in norms])
    # margin curves (H = 2, n = 32) for the figure, and the radial fraction at beta*
    bcurve = np.linspace(0.02, 5.0, settings.curve_points)
    curves = np.array([[[[margins(cfg, 2, 32, b, normalization=nz)[k] for b in bcurve]
                         for k in READINGS + ("c",)] for nz in norms] for cfg in CONFIGS])
    c_at_bstar = {}
    for H in Hs:
        b = float(mf.theory.beta_star(int(H), 32, ALPHA))
        if b > 0:
            c_at_bstar[int(H)] = [margins("shared", int(H), 32, b, normalization=nz)["c"] for nz in norms]
    np.savez_compressed(out_dir / "data.npz", thresholds=thr, reentrant=reent, Hs=Hs, ns=ns, grid=grid,
                        beta_star=bstar, exact_closed_form=exact_cf, split_closed_form=split_cf,
                        beta_curve=bcurve, curves=curves, c_star=mf.theory.c_star(Hs))
    sh = CONFIGS.index("shared")
    pos = bstar > 0
    err_nb = np.abs(thr[sh, :, 0][:, pos] - bstar[pos]).max()
    err_ex = np.abs(thr[sh, :, 1] - exact_cf).max()
    meta = {"configs": CONFIGS, "readings": READINGS, "normalizations": norms, "alpha": ALPHA,
            "seed": SEED, "rel_tol": REL_TOL, "bisect_tol": BISECT_TOL, "quick": quick,
            "c_at_beta_star_n32": c_at_bstar,
            "golden": {"c_star_2": float(mf.theory.c_star(2)), "inverse_golden_ratio": (np.sqrt(5) - 1) / 2},
            "max_err_shared_norm_bounded_vs_beta_star": float(err_nb),
            "max_err_shared_exact_vs_closed_form": float(err_ex),
            "shared_norm_bounded_fails_everywhere_where_beta_star_negative":
                bool(np.all(thr[sh, :, 0][:, ~pos] == 0.0)),
            "max_err_split_norm_bounded_vs_closed_form": float(np.nanmax(np.abs(
                np.where(split_cf > 0, thr[CONFIGS.index("split"), :, 0] - split_cf, 0.0)))),
            "split_norm_bounded_zero_where_closed_form_nonpositive":
                bool(np.all(thr[CONFIGS.index("split"), :, 0][split_cf <= 0] == 0.0)),
            "any_reentrant": bool(reent.any())}
    save_json(out_dir / "data.json", meta)
    return {k: meta[k] for k in ("max_err_shared_norm_bounded_vs_beta_star",
                                 "max_err_shared_exact_vs_closed_form",
                                 "max_err_split_norm_bounded_vs_closed_form", "any_reentrant", "golden")}


if __name__ == "__main__":
    from studies.critical_temperature.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
