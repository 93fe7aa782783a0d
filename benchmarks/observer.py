"""Benchmark of the default particle observer (issue 22): its cost against the dynamics it observes.

The README's system: two zonal heads on S^2 (``mf.scalar_heads([1.0, 0.5], d=3, beta=2.0)``, default
``ParticleSystem``: spectral sums from n = 2000 on), uniform tokens.  In one run:

1. one call of the default observer (``diagnostics.observer(system, w)`` with the explicit uniform
   weights ``solve_particles`` passes it) divided by one right-hand side (``system.rhs``), at n = 2e4;
   calls interleaved, minimum of several repeats; the observer without the KD-tree clustering too;
2. the whole default ``solve_particles(system, X0, t_final=5.0)`` with ``observe=True`` divided by
   ``observe=False`` at n = 2e4 (target <= 2x), runs interleaved;
3. the default ``solve_particles`` at n = 2e5 (``t_final`` small, < 2 min): that it runs, and its time
   (a ``ValueError`` refusal is reported as such: what the same script measures on a tree before the fix).

Run from the repository root::

    .venv/bin/python -m benchmarks.observer            # about 2-4 minutes on a 2-core machine
    .venv/bin/python -m benchmarks.observer --quick    # about 15 s (n = 3000 / 2e4)
    .venv/bin/python -m benchmarks.observer --write    # also add a dated row to benchmarks/RESULTS_scale.md

Speed is measured here, never asserted by a test (``tests/test_benchmarks_observer.py`` runs the quick mode).
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from pathlib import Path

import numpy as np

from meanfield.core.options import SaveAt

HERE = Path(__file__).resolve().parent
LAMBDAS, BETA = [1.0, 0.5], 2.0          # the README's heads
FULL = {"n": 20_000, "t_final": 5.0, "big_n": 200_000, "big_t_final": 5.0, "repeats": 5, "solve_repeats": 2}
QUICK = {"n": 3000, "t_final": 0.5, "big_n": 20_000, "big_t_final": 0.05, "repeats": 3, "solve_repeats": 1}


def _setup(n, seed=0):
    import meanfield as mf

    system = mf.ParticleSystem(mf.scalar_heads(LAMBDAS, d=3, beta=BETA))
    return mf, system, mf.initial.uniform_sphere(n, 3, seed=seed)


def _best_interleaved(fns, repeats):
    """Minimum wall time of each callable over ``repeats`` rounds, calls interleaved (same machine load)."""
    best = [np.inf] * len(fns)
    for _ in range(repeats):
        for k, f in enumerate(fns):
            t0 = time.perf_counter()
            f()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def observer_call(n, repeats):
    """Row 1: one default observer record over one right-hand side, at n tokens."""
    mf, system, X = _setup(n)
    from meanfield.analysis import diagnostics

    _, w = system.check(X)                               # the explicit uniform weights solve_particles passes
    full, lean = diagnostics.observer(system, w), diagnostics.observer(system, w, clustering=False)
    full(0.0, X), lean(0.0, X), system.rhs(0.0, X)       # first-call costs (plans, trees) outside the timing
    t_rhs, t_full, t_lean = _best_interleaved([lambda: system.rhs(0.0, X), lambda: full(0.0, X),
                                               lambda: lean(0.0, X)], repeats)
    return {"n": n, "spectral": system.uses_spectral(n), "rhs_s": t_rhs, "observer_s": t_full,
            "observer_no_clustering_s": t_lean, "ratio": t_full / t_rhs, "ratio_no_clustering": t_lean / t_rhs}


def solve_ratio(n, t_final, repeats):
    """Row 2: the default solve_particles with the observer over the same run without it."""
    mf, system, X0 = _setup(n)
    out = {}

    def run(observe):
        t0 = time.perf_counter()
        tr = mf.solve_particles(system, X0, t_final, save=SaveAt(observe=observe), progress=False)
        out[observe] = (time.perf_counter() - t0, tr)

    best = {True: np.inf, False: np.inf}
    for _ in range(repeats):
        for observe in (False, True):
            run(observe)
            best[observe] = min(best[observe], out[observe][0])
    on, off = out[True][1], out[False][1]
    return {"n": n, "t_final": t_final, "with_s": best[True], "without_s": best[False],
            "ratio": best[True] / best[False], "nfev": off.nfev, "steps": off.n_steps,
            "records": len(on.t), "status": (on.status, off.status),
            "energy": (float(on.observables["energy"][0]), float(on.observables["energy"][-1]))}


def big_run(n, t_final):
    """Row 3: the default solve_particles at large n: does it run, and how long does it take."""
    mf, system, X0 = _setup(n)
    t0 = time.perf_counter()
    try:
        tr = mf.solve_particles(system, X0, t_final, progress=False)
    except ValueError as err:
        return {"n": n, "t_final": t_final, "ran": False, "wall_s": time.perf_counter() - t0,
                "message": str(err).split(";")[0]}
    wall = time.perf_counter() - t0
    return {"n": n, "t_final": t_final, "ran": True, "wall_s": wall, "status": tr.status, "nfev": tr.nfev,
            "records": len(tr.t), "message": tr.message,
            "entropy": [float(v) for v in tr.observables["entropy"][-1]],
            "relative_entropy": [float(v) for v in tr.observables["relative_entropy"][-1]]
            if "relative_entropy" in tr.observables else None}


def run(quick=False):
    cfg = QUICK if quick else FULL
    load0, tic = os.getloadavg()[0], time.perf_counter()
    obs = observer_call(cfg["n"], cfg["repeats"])
    print(f"observer call / rhs at n = {obs['n']}: {obs['ratio']:.1f}x ({obs['observer_s'] * 1e3:.1f} ms / "
          f"{obs['rhs_s'] * 1e3:.2f} ms); without clustering {obs['ratio_no_clustering']:.1f}x", flush=True)
    sol = solve_ratio(cfg["n"], cfg["t_final"], cfg["solve_repeats"])
    print(f"solve_particles observe=True / False at n = {sol['n']}, t = {sol['t_final']}: {sol['ratio']:.2f}x "
          f"({sol['with_s']:.2f} s / {sol['without_s']:.2f} s, {sol['nfev']} rhs, {sol['records']} records)",
          flush=True)
    big = big_run(cfg["big_n"], cfg["big_t_final"])
    print(f"solve_particles at n = {big['n']}, t = {big['t_final']}: "
          + (f"ran in {big['wall_s']:.1f} s ({big['nfev']} rhs, status {big['status']})" if big["ran"]
             else f"refused: {big['message']}"), flush=True)
    return {"observer": obs, "solve": sol, "big": big, "load": (load0, os.getloadavg()[0]),
            "total_s": time.perf_counter() - tic, "quick": quick}


def markdown_row(res, label):
    """A dated row of the Targets table of ``RESULTS_scale.md`` (wanted, measured, met?, by how much)."""
    o, s, b = res["observer"], res["solve"], res["big"]
    big = (f"n = {b['n']:.0e} to t = {b['t_final']}: ran, {b['wall_s']:.1f} s ({b['nfev']} rhs)" if b["ran"]
           else f"n = {b['n']:.0e}: refused ({b['message']})")
    measured = (f"solve_particles observe=True / False {s['ratio']:.2f}x ({s['with_s']:.1f} vs {s['without_s']:.1f} s, "
                f"{s['nfev']} rhs, {s['records']} records); one observer record / one rhs {o['ratio']:.1f}x "
                f"({o['observer_s'] * 1e3:.0f} vs {o['rhs_s'] * 1e3:.1f} ms; {o['ratio_no_clustering']:.1f}x without "
                f"the KD-tree clustering); {big}")
    met = "met" if s["ratio"] <= 2.0 and b["ran"] else "MISSED"
    return (f"| note {datetime.datetime.now():%Y-%m-%d %H:%M} ({label}, load {res['load'][0]:.1f} / "
            f"{res['load'][1]:.1f}; `benchmarks.observer`, README heads beta 2, n = {s['n']:.0e}, t = {s['t_final']}): "
            f"default observer cost | <= 2x the run without it; n = 2e5 runs | {measured} | {met} | "
            f"{s['ratio'] / 2.0:.2f}x the target |")


def add_target_row(path: Path, row: str) -> None:
    """Append ``row`` to the Targets table of ``path`` (after its last row)."""
    lines = path.read_text().split("\n")
    start = lines.index("## Targets")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("|")
               and (i + 1 == len(lines) or not lines[i + 1].startswith("|")))
    lines.insert(end + 1, row)
    path.write_text("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (checks the script), about 15 s")
    ap.add_argument("--write", action="store_true", help="add a dated row to benchmarks/RESULTS_scale.md")
    ap.add_argument("--label", default="this tree", help="what was measured (e.g. a branch), for the row")
    args = ap.parse_args()
    res = run(quick=args.quick)
    row = markdown_row(res, args.label)
    print("\n" + row)
    if args.write:
        add_target_row(HERE / "RESULTS_scale.md", row)


if __name__ == "__main__":
    main()
