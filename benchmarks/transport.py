"""Benchmark: W2 between n particles and a density on S^2 by method, and the exact MMD.

The density: two von Mises-Fisher bumps (kappa = 4) plus a 20 % uniform floor at lmax = 31
(``DEPENDENCIES.md`` "Large-n transport"); the particles: n i.i.d. samples of it.  For each n one
run (no repeats) of

* ``semidiscrete``: :func:`meanfield.analysis.transport.w2_particles_field` (chordal cost; the continuous density);
* ``exact``: ``ot.emd2`` against the density's node measure on ``SphereGrid(31)`` (2048 nodes), with
  that node measure's own grid floor (semi-discrete W2 between nodes and density), where
  ``n * 2048 <= 8000**2``;
* ``exact, extrapolated``: exact W2 against the node measures of GL grids with 8192 / 18432 / 32768
  nodes, extrapolated in h^2 (``W2^2 ~ A + B h^2``, last two grids), at n = 1000 only;
* ``sliced``: Euclidean sliced W2 (200 projections; a lower bound, a different quantity);
* ``mmd``: :func:`meanfield.analysis.mmd.mmd_particles_field` (H^-2 Sobolev kernel) and its i.i.d.
  expectation.

Run from the repository root::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.transport            # n = 1e3, 1e4, 1e5: ~3 min
    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.transport --n 1000000  # ~15 min, ~2.5 GB

It prints a table and writes ``benchmarks/TRANSPORT.md``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from pathlib import Path

import numpy as np

from meanfield.analysis import mmd, transport
from meanfield.core import densities as dn
from meanfield.core.sphere import SphereGrid

HERE = Path(__file__).resolve().parent
LMAX = 31


def density():
    grid = SphereGrid(LMAX)
    return grid, dn.vmf_mixture_density(grid, [[0, 0, 1], [1, 0, 0]], [4, 4], floor=0.2)


def node_measure(rho, L):
    g = SphereGrid(LMAX, nlat=L + 1, nlon=2 * L + 2)
    w = (g.synthesis(rho) * g.weights).ravel()
    return g, g.nodes.reshape(-1, 3), w / w.sum()


def timed(f):
    t0 = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t0


def rows_for(n, grid, rho):
    X = dn.sample_particles(grid, rho, n, seed=1)
    rows = []
    sd, t = timed(lambda: transport.w2_particles_field(X, rho, grid, metric="chordal"))
    rows.append([n, "semidiscrete", f"{sd.distance:.6f}", "-", f"{t:.2f}",
                 f"Newton {sd.info['newton_iterations']}, n_quad {sd.info['n_quad']}, flips {sd.info['flips']}"])
    g, nodes, w = node_measure(rho, LMAX)
    if n * w.size <= 8000**2:
        ex, t = timed(lambda: transport.w2_particles_density(X, nodes, w, grid=g, metric="chordal", method="exact"))
        rows.append([n, f"exact vs {w.size} nodes", f"{ex.distance:.6f}", f"{ex.distance / sd.distance - 1:+.2e}",
                     f"{t:.2f}", f"grid floor {ex.info['grid_floor']:.5f}"])
    if n <= 1000:
        costs, h2, t_all = [], [], 0.0
        for L in (63, 95, 127):
            g2, nodes2, w2 = node_measure(rho, L)
            r, t = timed(lambda: transport.w2_particles_density(X, nodes2, w2, grid=g2, grid_floor=False,
                                                                metric="chordal", method="exact"))
            costs.append(r.cost)
            h2.append(4 * np.pi / w2.size)
            t_all += t
        A = costs[2] - (costs[1] - costs[2]) / (h2[1] - h2[2]) * h2[2]
        rows.append([n, "exact, extrapolated h->0", f"{np.sqrt(A):.6f}", f"{np.sqrt(A) / sd.distance - 1:+.2e}",
                     f"{t_all:.2f}", "8192/18432/32768 nodes, A + B h^2 from the last two"])
    sl, t = timed(lambda: transport.w2_particles_density(X, nodes, w, grid=g, grid_floor=False, metric="chordal",
                                                         method="sliced", seed=0))
    rows.append([n, "sliced (200 proj.)", f"{sl.distance:.6f}", f"{sl.distance / sd.distance - 1:+.2e}",
                 f"{t:.2f}", "a lower bound on chordal W2"])
    mm, t = timed(lambda: mmd.mmd_particles_field(X, rho, grid, kernel="sobolev", s=2.0))
    e = mmd.mmd_iid_expectation(grid, rho, n, kernel="sobolev", s=2.0)
    rows.append([n, "mmd (H^-2)", f"{mm.distance:.6f}", "-", f"{t:.3f}", f"sqrt(E MMD^2 iid) = {np.sqrt(e):.6f}"])
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[1000, 10000, 100000])
    args = p.parse_args(argv)
    grid, rho = density()
    header = ["n", "method", "W2 (chordal) / MMD", "vs semidiscrete", "time [s]", "notes"]
    rows = []
    for n in args.n:
        rows += rows_for(n, grid, rho)
        print("\n".join(" | ".join(map(str, r)) for r in rows[-5:]), flush=True)
    lines = ["# Transport benchmark (benchmarks/transport.py)", "",
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.processor() or 'cpu'}, "
             f"{os.cpu_count()} cores (shared), load average {os.getloadavg()[0]:.1f}; one run per row.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    out = HERE / "TRANSPORT.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
