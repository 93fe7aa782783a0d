"""Phase diagram of clustering over beta x t: the peer's diagram reproduced, against the equiangular curve.

The published diagram: borjanG/2023-transformers-rotf, ``phase-diagrams.py`` with its defaults and
``--use_softmax`` (the phase diagrams accompanying Geshkovski, Letrouit, Polyanskiy, Rigollet, "A mathematical
perspective on Transformers", 2023): d = 2, n = 32 tokens, softmax attention with ``Q^T K = V = I``,
post-LN steps ``x <- normalize(x + 0.1 u)``, ``t`` in [0, 30] (300 layers), beta in [0.1, 9]; the
colour is the density of pairs with ``<x_i, x_j> > 0.999``.  Here: the same settings with B = 256
random starts per beta (the peer uses 2048; the fraction's sampling error is <= 1/(2 sqrt(256)) ~ 3 %),
45 betas, by :func:`meanfield.workflow.phase_diagram.phase_diagram`, plus the other three measures.

Compared with the equiangular clustering curve of :func:`meanfield.analysis.theory.clustering_time`:
the time for the reduced ODE ``gamma' = F(gamma)`` (n = 32 equiangular tokens, one scalar softmax head)
to carry the common inner product from 0 (the mean of random starts) to 0.999.

Cost (one core, shared machine): quick ~2 s, full ~2 min.  Run from the repo root::

    python -m studies.phase_diagram.run [--quick]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from meanfield.workflow.phase_diagram import MEASURES, PhaseDiagramConfig, phase_diagram
from studies._common import main, save_json


@dataclass(frozen=True)
class Settings:
    betas: tuple
    batch: int
    t_final: float
    record_every: int


QUICK = Settings(betas=tuple(np.linspace(0.5, 3.5, 5)), batch=32, t_final=20.0, record_every=5)
FULL = Settings(betas=tuple(np.round(np.linspace(0.1, 9.0, 45), 10)), batch=256, t_final=30.0, record_every=5)


def first_crossing(t, y, level):
    """First recorded time with ``y >= level`` (NaN if never)."""
    hit = np.nonzero(np.asarray(y) >= level)[0]
    return float(t[hit[0]]) if hit.size else float("nan")


def run(out_dir: Path, quick: bool = False) -> dict:
    s = QUICK if quick else FULL
    cfg = PhaseDiagramConfig(betas=s.betas, t_final=s.t_final, dt=0.1, record_every=s.record_every, n=32, d=2,
                             batch=s.batch, rule="post_ln", normalization="softmax", seed=2023)
    ds = phase_diagram(cfg, progress=False)
    t = ds["t"].values
    t_half = np.array([first_crossing(t, ds["pair_density"].sel(beta=b).values, 0.5) for b in cfg.betas])
    t_one = np.array([first_crossing(t, ds["one_cluster"].sel(beta=b).values, 0.5) for b in cfg.betas])
    curve = ds["equiangular_time"].values
    ok = np.isfinite(t_half) & np.isfinite(curve)
    rho = stats.spearmanr(np.array(cfg.betas)[ok], t_half[ok]).statistic if ok.sum() > 2 else float("nan")
    ratio = t_half[ok] / curve[ok]
    summary = {
        "seconds": float(ds.attrs["seconds"]),
        "spearman_beta_t_half": float(rho),
        "ratio_t_half_to_equiangular": [float(ratio.min()), float(np.median(ratio)), float(ratio.max())]
        if ok.any() else None,
        "n_betas_reaching_half": int(np.isfinite(t_half).sum()),
        "one_cluster_final_small_beta": float(ds["one_cluster"].values[0, -1]),
        "one_cluster_final_large_beta": float(ds["one_cluster"].values[-1, -1]),
    }
    save_json(out_dir / "data.json", {
        "settings": {"betas": list(cfg.betas), "batch": s.batch, "t_final": s.t_final, "dt": cfg.dt, "n": cfg.n,
                     "d": cfg.d, "seed": cfg.seed, "pair_threshold": cfg.pair_threshold},
        "t": t, "measures": {m: ds[m].values for m in MEASURES}, "equiangular_time": curve,
        "t_half_pair_density": t_half, "t_half_one_cluster": t_one, "summary": summary})
    return summary


if __name__ == "__main__":
    from studies.phase_diagram.report import report

    main(run, report, Path(__file__).resolve().parent / "output", __doc__)
