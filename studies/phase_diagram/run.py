"""Phase diagram of clustering over beta x t: the peer's diagram reproduced, against the equiangular curve.

The published diagram: borjanG/2023-transformers-rotf, ``phase-diagrams.py`` with its defaults and
``--use_softmax`` (the phase diagrams accompanying Geshkovski, Letrouit, Polyanskiy, Rigollet, "A mathematical
perspective on Transformers", 2023): d = 2, n = 32 tokens, softmax attention with ``Q^T K = V = I``,
post-LN steps ``x <- normalize(x + 0.1 u)``, ``t`` in [0, 30] (300 layers), beta in [0.1, 9]; the
colour is the density of pairs with ``<x_i, x_j> > 0.999`` (the pair threshold).  Here: the same settings
with B = 256 random starts per beta (the peer uses 2048), 45 betas, the same seeded starts for every beta,
plus the other three measures of :mod:`meanfield.workflow.phase_diagram` every 5 layers.

The time ``t_half`` at which the pair density (mean over the starts) first reaches 0.5 is read from the
density at every layer (linear interpolation between layers) and bootstrapped over the starts (the same
resampled starts for every beta: paired).  Where the density plateaus near 0.5 (two clusters of about 16
tokens have density 0.48) that time is ill-conditioned; a crossing is *clean* when every bootstrap replicate
crosses before ``t_final`` and the 95 % interval is at most ``clean_width`` of ``t_half`` wide.  The trend
(Spearman of beta against ``t_half``, with its bootstrap interval) uses the clean betas only.  As a check of
the bootstrap, ``check_seeds`` independent batches of B starts (other seeds) are run at every
``check_every``-th beta of the clean range.

Compared with the equiangular clustering curve of :func:`meanfield.analysis.theory.clustering_time`:
the time for the reduced ODE ``gamma' = F(gamma)`` (n = 32 equiangular tokens, one scalar softmax head)
to carry the common inner product from 0 (the mean of random starts) to 0.999.

Cost: quick ~5 s; full ~2.5 min of CPU (one core; 9 min of wall time on a shared machine).  Run from the repo root::

    python -m studies.phase_diagram.run [--quick]
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy import stats

from meanfield.analysis import ensembles
from meanfield.models.batched import BatchedSystem
from meanfield.models.step_rules import iterate
from meanfield.workflow.phase_diagram import MEASURES, PhaseDiagramConfig, equiangular_curve
from studies._common import main, save_json, wilson95


@dataclass(frozen=True)
class Settings:
    betas: tuple
    batch: int
    t_final: float
    record_every: int       # layers between records of the four measures (the figure)
    n_boot: int             # bootstrap replicates over the starts
    clean_width: float      # largest (95 % interval width) / t_half of a clean crossing
    other_widths: tuple     # the trend recomputed with these clean_width (sensitivity)
    check_seeds: tuple      # seeds of the independent batches (the check of the bootstrap)
    check_every: int        # the check runs at every check_every-th beta up to the last clean one


QUICK = Settings(betas=tuple(np.linspace(0.5, 3.5, 5)), batch=32, t_final=20.0, record_every=5, n_boot=400,
                 clean_width=0.2, other_widths=(0.1, 0.3), check_seeds=tuple(range(3000, 3010)), check_every=2)
FULL = Settings(betas=tuple(np.round(np.linspace(0.1, 9.0, 45), 10)), batch=256, t_final=30.0, record_every=5,
                n_boot=2000, clean_width=0.2, other_widths=(0.1, 0.3), check_seeds=tuple(range(3000, 3010)),
                check_every=4)
LEVEL = 0.5                 # the pair density whose first crossing is t_half
SEED = 2023                 # the main batch of starts
BOOT_SEED = 7               # the bootstrap's resampling
SLOPE_HALF_WINDOW = 0.5     # the density's slope at the crossing is taken over t_half +- this


def first_crossing(t, y, level):
    """First time ``y`` reaches ``level``, by linear interpolation between the samples; ``y`` may be (T,) or
    (T, R) (R curves); NaN where never reached."""
    y = np.asarray(y, dtype=float)
    y2 = y[:, None] if y.ndim == 1 else y
    hit = y2 >= level
    k = np.argmax(hit, axis=0)
    out = np.full(y2.shape[1], np.nan)
    ok = hit.any(axis=0)
    at0 = ok & (k == 0)
    out[at0] = t[0]
    mid = ok & (k > 0)
    km = k[mid]
    cols = np.nonzero(mid)[0]
    y0, y1 = y2[km - 1, cols], y2[km, cols]
    out[mid] = t[km - 1] + (level - y0) / (y1 - y0) * (t[km] - t[km - 1])
    return out[0] if y.ndim == 1 else out


def _observer(cfg):
    """Per layer: every start's pair density; every ``record_every`` layers (and the last): the four
    batch measures of :func:`meanfield.analysis.ensembles.ensemble_observer` (NaN between)."""
    full = ensembles.ensemble_observer(cfg.pair_threshold, cfg.cluster_threshold, cfg.rank_tol)
    blank = {m: np.nan for m in MEASURES}

    def observe(t, X):
        k = int(round(t / cfg.dt))
        out = {"systems": ensembles.pair_density(X, cfg.pair_threshold)}
        out.update(full(t, X) if (k % cfg.record_every == 0 or k == cfg.n_steps) else blank)
        return out

    return observe


def _cell(cfg, beta, measures=True):
    """Per-start pair density at every layer, shape (n_steps + 1, batch), and the four measures."""
    observe = _observer(cfg) if measures else (lambda t, X: {"systems": ensembles.pair_density(X, cfg.pair_threshold)})
    tr = iterate(BatchedSystem(cfg.heads(beta), causal=cfg.causal), cfg.starts(), cfg.dt, cfg.n_steps, cfg.rule,
                 observe=observe, every=1, save_states=False)
    return tr.observables


def _interval(x, level=0.95):
    """Percentile interval of the replicates ``x`` (never-crossing replicates are +inf: the nearest order
    statistic, never an interpolation with inf)."""
    with np.errstate(invalid="ignore"):              # numpy forms inf - inf on the way; "nearest" never uses it
        return np.quantile(x, [(1 - level) / 2, (1 + level) / 2], axis=-1, method="nearest")


def run(out_dir: Path, quick: bool = False) -> dict:
    s = QUICK if quick else FULL
    cfg = PhaseDiagramConfig(betas=s.betas, t_final=s.t_final, dt=0.1, record_every=s.record_every, n=32, d=2,
                             batch=s.batch, rule="post_ln", normalization="softmax", seed=SEED)
    started = time.perf_counter()
    betas = np.array(cfg.betas)
    t_layer = np.arange(cfg.n_steps + 1) * cfg.dt
    coarse = np.isin(np.round(t_layer / cfg.dt).astype(int), np.round(cfg.times / cfg.dt).astype(int))
    cells = [_cell(cfg, b) for b in cfg.betas]
    systems = np.stack([c["systems"] for c in cells])                          # (beta, layer, start)
    measures = {m: np.stack([np.asarray(c[m])[coarse] for c in cells]) for m in MEASURES}
    curve = equiangular_curve(cfg)

    # bootstrap over the starts: the same resampled starts for every beta (they share their starts)
    rng = np.random.default_rng(BOOT_SEED)
    idx = rng.integers(0, s.batch, size=(s.n_boot, s.batch))
    weights = np.zeros((s.batch, s.n_boot))
    for r in range(s.n_boot):
        weights[:, r] = np.bincount(idx[r], minlength=s.batch) / s.batch
    density = systems.mean(axis=2)                                             # (beta, layer)
    t_half = np.array([first_crossing(t_layer, density[i], LEVEL) for i in range(len(betas))])
    boot = np.stack([first_crossing(t_layer, systems[i] @ weights, LEVEL) for i in range(len(betas))])
    boot = np.where(np.isfinite(boot), boot, np.inf)                           # (beta, replicate)
    lo, hi = _interval(boot)
    with np.errstate(invalid="ignore"):              # inf - inf where no replicate crosses: never clean
        width = hi - lo
    clean = np.isfinite(t_half) & np.isfinite(hi) & (width <= s.clean_width * t_half)
    # slope of the density at the crossing: per unit time, centred difference over t_half +- SLOPE_HALF_WINDOW
    slope = np.full(len(betas), np.nan)
    w = int(round(SLOPE_HALF_WINDOW / cfg.dt))
    for i in np.nonzero(np.isfinite(t_half))[0]:
        k = int(np.searchsorted(t_layer, t_half[i]))
        a, b = max(k - w, 0), min(k + w, len(t_layer) - 1)
        slope[i] = (density[i, b] - density[i, a]) / (t_layer[b] - t_layer[a])

    # the trend over the clean betas: Spearman with its bootstrap interval, and the paired rise
    sel = np.nonzero(clean)[0]
    sensitivity = []                                 # the trend under other definitions of "clean"
    for w in s.other_widths:
        sw = np.nonzero(np.isfinite(t_half) & np.isfinite(hi) & (width <= w * t_half))[0]
        if sw.size > 2:
            rb = np.array([stats.spearmanr(betas[sw], boot[sw, r]).statistic for r in range(s.n_boot)])
            sensitivity.append({"clean_width": w, "n_clean": int(sw.size), "last_clean_beta": float(betas[sw[-1]]),
                                "spearman": float(stats.spearmanr(betas[sw], t_half[sw]).statistic),
                                "spearman_ci": [float(v) for v in _interval(rb)]})
    if sel.size > 2:
        rho = float(stats.spearmanr(betas[sel], t_half[sel]).statistic)
        rho_boot = np.array([stats.spearmanr(betas[sel], boot[sel, r]).statistic for r in range(s.n_boot)])
        rho_ci = [float(v) for v in _interval(rho_boot)]
        rise_boot = boot[sel[-1]] - boot[sel[0]]
        rise = [float(t_half[sel[-1]] - t_half[sel[0]])] + [float(v) for v in _interval(rise_boot)]
        ratio = t_half[sel] / curve[sel]
        ratio_lo, ratio_hi = lo[sel] / curve[sel], hi[sel] / curve[sel]
        drift_boot = boot[sel[-1]] / curve[sel[-1]] - boot[sel[0]] / curve[sel[0]]
        drift = [float(ratio[-1] - ratio[0])] + [float(v) for v in _interval(drift_boot)]
    else:
        rho, rho_ci, rise, drift = float("nan"), [float("nan")] * 2, [float("nan")] * 3, [float("nan")] * 3
        ratio = ratio_lo = ratio_hi = np.array([])

    # check of the bootstrap: independent batches (other seeds) at every check_every-th clean beta, and at the
    # largest beta that crosses if that crossing is not clean (how far apart independent batches put it)
    check_idx = sel[::s.check_every] if sel.size else sel
    crossing = np.nonzero(np.isfinite(t_half))[0]
    if crossing.size and not clean[crossing[-1]]:
        check_idx = np.append(check_idx, crossing[-1])
    check = np.full((len(check_idx), len(s.check_seeds)), np.nan)
    for j, seed in enumerate(s.check_seeds):
        c2 = replace(cfg, seed=seed)
        for a, i in enumerate(check_idx):
            check[a, j] = first_crossing(t_layer, _cell(c2, betas[i], measures=False)["systems"].mean(axis=1), LEVEL)
    boot_sd = np.array([np.std(boot[i][np.isfinite(boot[i])], ddof=1) for i in check_idx])
    seed_sd = np.array([np.std(row[np.isfinite(row)], ddof=1) if np.isfinite(row).sum() > 1 else np.nan
                        for row in check])
    k_seeds = np.isfinite(check).sum(axis=1)
    seed_mean = np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan for row in check])
    seconds = time.perf_counter() - started

    n_one_small = int(round(measures["one_cluster"][0, -1] * s.batch))
    n_one_large = int(round(measures["one_cluster"][-1, -1] * s.batch))
    summary = {
        "seconds": seconds,
        "n_clean": int(clean.sum()),
        "n_betas_reaching_half": int(np.isfinite(t_half).sum()),
        "last_clean_beta": float(betas[sel[-1]]) if sel.size else None,
        "spearman_beta_t_half": rho,
        "spearman_ci": rho_ci,
        "rise_t_half": rise,                       # t_half(last clean) - t_half(first clean), 95 % interval
        "ratio_range": [float(ratio.min()), float(ratio.max())] if ratio.size else None,
        "ratio_first": [float(ratio[0]), float(ratio_lo[0]), float(ratio_hi[0])] if ratio.size else None,
        "ratio_last": [float(ratio[-1]), float(ratio_lo[-1]), float(ratio_hi[-1])] if ratio.size else None,
        "ratio_drift": drift,                      # ratio(last clean) - ratio(first clean), 95 % interval
        "ratio_min_lower": float(ratio_lo.min()) if ratio.size else None,
        "boot_sd_over_seed_sd": [float(v) for v in boot_sd / seed_sd],     # at the check betas
        "one_cluster_final_small_beta": [n_one_small, *wilson95(n_one_small, s.batch)],
        "one_cluster_final_large_beta": [n_one_large, *wilson95(n_one_large, s.batch)],
        "sensitivity": sensitivity,
    }
    save_json(out_dir / "data.json", {
        "settings": {"betas": list(cfg.betas), "batch": s.batch, "t_final": s.t_final, "dt": cfg.dt, "n": cfg.n,
                     "d": cfg.d, "seed": cfg.seed, "pair_threshold": cfg.pair_threshold,
                     "cluster_threshold": cfg.cluster_threshold, "rank_tol": cfg.rank_tol, "level": LEVEL,
                     "n_boot": s.n_boot, "boot_seed": BOOT_SEED, "clean_width": s.clean_width,
                     "other_widths": list(s.other_widths),
                     "check_seeds": list(s.check_seeds), "check_every": s.check_every},
        "t": cfg.times, "measures": measures, "equiangular_time": curve,
        "t_layer": t_layer, "pair_density_layer": density,
        "t_half": t_half, "t_half_lo": lo, "t_half_hi": hi, "t_half_clean": clean, "density_slope": slope,
        "boot_never": (~np.isfinite(boot)).mean(axis=1),
        "check": {"betas": betas[check_idx], "clean": clean[check_idx], "t_half": check, "boot_sd": boot_sd, "seed_sd": seed_sd,
                  "seed_mean": seed_mean, "k": k_seeds, "main": t_half[check_idx]},
        "summary": summary})
    return summary


if __name__ == "__main__":
    from studies.phase_diagram.report import report

    main(run, report, Path(__file__).resolve().parent / "output", __doc__)
