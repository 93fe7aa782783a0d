"""Where the clusters go (part of the orthogonal-heads study): particle runs of ``n_long`` tokens to ``t_long`` per case,
with their clusters at the end (:func:`meanfield.analysis.cluster_tracking.track_particle_clusters`, inner product
>= 0.99, clusters of mass >= 1 %): centres, masses and each centre's position relative to the heads' subspaces (the
largest |coordinate| axis, and the latitude |z|).  Writes ``clusters_<case>.npz`` next to the cases' data; the report
reads them.  Run from the repository root (after ``run.py``, or alone)::

    python -m studies.orthogonal_heads.clusters [--quick]

Cost: about 1-3 minutes per case (n = 10^4, 5 seeds, t = 8, spectral sums).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield.analysis.cluster_tracking import track_particle_clusters
from meanfield.core.options import SaveAt, StepControl
from studies.orthogonal_heads.run import FULL, QUICK, SEED, heads, initial_density

MIN_MASS = 0.01


def clusters_case(case, cfg, out_dir: Path):
    path = out_dir / f"clusters_{case}.npz"
    if path.exists():
        return dict(np.load(path))
    system = mf.ParticleSystem(heads(case, cfg), summation="spectral", kernel_tol=cfg.spectral_tol)
    g = mf.ContinuumPDE(heads(case, cfg), cfg.lmax).grid
    start = initial_density(g, cfg)
    centres, masses, seeds, energy = [], [], [], []
    for s in range(cfg.seeds_long):
        X0 = mf.densities.sample_particles(g, start, cfg.n_long, seed=SEED + 77 + s)
        tr = mf.solve_particles(system, X0, cfg.t_long, step=StepControl(rtol=cfg.rtol, atol=cfg.atol),
                                save=SaveAt(t_eval=[0.0, cfg.t_long], observe=False), progress=False)
        track = track_particle_clusters(tr.y[-1:], times=[cfg.t_long], min_mass=MIN_MASS)
        alive = np.isfinite(track.mass[0])
        centres.append(track.centre[0][alive])
        masses.append(track.mass[0][alive])
        seeds.append(np.full(int(alive.sum()), s))
        energy.append(system.energies(tr.y[-1]))
        print(f"[{case}] seed {s}: {int(alive.sum())} clusters of mass >= {MIN_MASS}", flush=True)
    data = {"centres": np.concatenate(centres), "masses": np.concatenate(masses), "seed": np.concatenate(seeds),
            "energy": np.array(energy), "t": cfg.t_long, "n": cfg.n_long}
    np.savez(path, **data)
    return data


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    cfg = QUICK if quick else FULL
    out = Path(__file__).parent / ("output-quick" if quick else "output")
    out.mkdir(parents=True, exist_ok=True)
    for case in cfg.cases:
        clusters_case(case, cfg, out)
