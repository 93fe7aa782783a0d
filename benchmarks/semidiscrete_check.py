"""An independent Monte-Carlo check of the semi-discrete W2 at large n (where no exact OT can run).

The solver (:func:`meanfield.analysis.semidiscrete.solve_semidiscrete`) returns the dual weights
``psi`` and the chordal cost ``sum_i int_{L_i} |x_i - y|^2 rho`` assembled from its own arc
quadrature (a difference of near-equal terms, ``2 G_i - 2 x_i . m_i``, the point worth checking at
large n).  Here ``m`` points ``y ~ rho`` (i.i.d., :func:`meanfield.core.densities.sample_particles`) are sent
to their power-nearest particle ``argmin_j |x_j - y|^2 - psi_j``, found *exactly* as the Euclidean
nearest neighbour of ``(y, 0)`` among the lifted points ``(x_j, sqrt(max psi - psi_j))`` of R^4 (a
k-d tree; no neighbour limit), which gives, with no quadrature of the solver's:

1. the cost of the power plan of ``psi``: the mean of ``|x_j(y) - y|^2``, with its standard error;
   it must equal the solver's cost to a few standard errors;
2. the masses of the power cells: counts ``c_j`` against ``m b_j``; for correct masses the Pearson
   statistic ``sum (c_j - m b_j)^2 / (m b_j)`` is ``n - 1 +- sqrt(2 (n - 1))`` (multinomial), and mass
   errors of relative size ``delta`` add ``m delta^2``.

Case: ``benchmarks/semidiscrete_big.py``'s (two vMF bumps, kappa 4, 20 % floor, lmax 31; particles its
i.i.d. samples, seed 1), the solver's defaults (``tol = 1e-8``).  Writes the section "Independent
check" of ``benchmarks/RESULTS_semidiscrete.md``.  Run from the repository root::

    OPENBLAS_NUM_THREADS=1 nice -n 5 .venv/bin/python -m benchmarks.semidiscrete_check           # n = 1e6, ~16 min, ~4 GB
    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.semidiscrete_check --quick --no-write  # n = 2e4, ~10 s
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.spatial import cKDTree

from ._report import finish, provenance, table
from .semidiscrete_big import HERE, case, load

FULL = dict(n=10**6, m=4 * 10**6, chunk=250_000)
QUICK = dict(n=2 * 10**4, m=10**6, chunk=250_000)
SECTION = "## Independent check: Monte Carlo over the power cells"


def lifted_tree(X, psi):
    """k-d tree of the lifted particles ``(x_j, sqrt(max psi - psi_j))`` of R^4."""
    return cKDTree(np.column_stack([X, np.sqrt(psi.max() - psi)]))


def power_plan(tree, X, Y):
    """Index of the power-nearest particle of each ``y`` (exact: nearest neighbour of ``(y, 0)`` in the
    R^4 lifting ``tree``) and the squared chordal distance to it."""
    _, j = tree.query(np.column_stack([Y, np.zeros(len(Y))]))
    d = Y - X[j]
    return j, np.einsum("nk,nk->n", d, d)


def check(n, m, chunk, seed=7):
    """Solve at ``n``, then ``m`` Monte-Carlo points in chunks; returns a dict of the numbers."""
    from meanfield.analysis.semidiscrete import solve_semidiscrete
    from meanfield.core import densities as dn

    grid, rho, X = case(n)
    b = np.full(n, 1.0 / n)
    t0 = time.perf_counter()
    sol = solve_semidiscrete(X, b, grid, rho, tol=1e-8)
    t_solve = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    counts, s1, s2, done = np.zeros(n), 0.0, 0.0, 0
    t0 = time.perf_counter()
    tree = lifted_tree(X, sol.psi)
    while done < m:
        k = min(chunk, m - done)
        j, c = power_plan(tree, X, dn.sample_particles(grid, rho, k, seed=rng))
        counts += np.bincount(j, minlength=n)
        s1, s2, done = s1 + c.sum(), s2 + (c * c).sum(), done + k
    mean = s1 / m
    se = np.sqrt(max(s2 / m - mean * mean, 0.0) / (m - 1))
    expected = m * b
    pearson = float(np.sum((counts - expected) ** 2 / expected))
    return {"n": n, "m": m, "solver_cost": sol.cost, "mc_cost": mean, "mc_se": se,
            "z": (sol.cost - mean) / se, "rel_diff": (sol.cost - mean) / sol.cost,
            "pearson": pearson, "pearson_z": (pearson - (n - 1)) / np.sqrt(2 * (n - 1)),
            "newton_iterations": sol.info["newton_iterations"], "residual": sol.info["residual"],
            "solve_s": t_solve, "mc_s": time.perf_counter() - t0}


def run(quick=False, write=True):
    p = QUICK if quick else FULL
    start, load0 = time.perf_counter(), load()
    r = check(**p)
    total, load1 = time.perf_counter() - start, load()
    rows = [[f"{r['n']:.0e}", f"{r['m']:.0e}", f"{r['solver_cost']:.8e}", f"{r['mc_cost']:.8e} +- {r['mc_se']:.1e}",
             f"{r['z']:+.2f}", f"{r['rel_diff']:+.1e}", f"{r['pearson_z']:+.2f}",
             f"{r['newton_iterations']} ({r['residual']:.1e})", f"{r['solve_s']:.0f} / {r['mc_s']:.0f}"]]
    cmd = "python -m benchmarks.semidiscrete_check" + (" --quick" if quick else "")
    md = "\n".join([SECTION, "", provenance(load0, load1, total, cmd), "",
                    "Monte-Carlo points y ~ rho sent to their power-nearest particle (exact, R^4 lifting): the cost "
                    "of the power plan of the solver's psi against the solver's own cost, and the power cells' "
                    "masses against b (Pearson statistic as a z-score: ~N(0, 1) for correct masses).", "",
                    table(["n", "MC points", "solver W2^2 (chordal)", "MC cost of the power plan", "z (solver - MC)",
                           "relative difference", "Pearson z (masses)", "Newton iterations (residual)",
                           "solve / MC (s)"], rows)])
    finish([f"n = {r['n']}: solver {r['solver_cost']:.6e}, MC {r['mc_cost']:.6e} +- {r['mc_se']:.1e} "
            f"(z {r['z']:+.2f}); masses Pearson z {r['pearson_z']:+.2f}"],
           SECTION, md, write, HERE / "RESULTS_semidiscrete.md")
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n = 2e4 (checks the script, ~10 s)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS_semidiscrete.md as it is")
    a = ap.parse_args(argv)
    run(quick=a.quick, write=not a.no_write)


if __name__ == "__main__":
    main()
