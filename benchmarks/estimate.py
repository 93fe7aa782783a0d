"""Benchmark: the main job's time estimate against the measured time of the whole job.

For each config, :func:`meanfield.workflow.preflight.estimate_cost` (what ``meanfield run`` and
``config check`` print) is computed, then the job is run as ``meanfield run`` runs it
(:func:`meanfield.workflow.jobs.main_job`: PDE, particles, W2, dataset, figures, GIF) and timed.
The target (issue 25) is estimate / actual within a factor of 3 on every config.  Writes
``benchmarks/RESULTS_estimate.md``.

    .venv/bin/python -m benchmarks.estimate            # about 5 minutes on 2 cores
    .venv/bin/python -m benchmarks.estimate --quick    # one tiny config, about 10 s

The time of the estimate itself (its pilot: a full PDE run where that is cheap, one particle velocity,
one W2) is reported too; it is included in the measured job (the job's preflight computes it).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from meanfield.workflow import preflight
from meanfield.workflow.config import RunConfig
from meanfield.workflow.jobs import main_job

from ._report import finish, provenance, table

HERE = Path(__file__).resolve().parent

CONFIGS = {
    "default": {},
    "n 3000, t_final 6 (issue 25)": {"particles": {"n": 3000}, "integrator": {"t_final": 6.0}},
    "n 300": {"particles": {"n": 300}},
    "n 5000, semidiscrete W2": {"particles": {"n": 5000}, "outputs": {"w2_method": "semidiscrete"}},
    "lmax 47, n 2000": {"pde": {"lmax": 47}, "particles": {"n": 2000}},
    "noisy nu 0.05, dt 0.01": {"pde": {"nu": 0.05}, "integrator": {"dt": 0.01}},
    "no figures, n 1000, t_final 3": {"integrator": {"t_final": 3.0}, "outputs": {"figures": False,
                                                                                  "animation": False}},
    "tiny (quick mode)": {"pde": {"lmax": 15}, "particles": {"n": 200},
                          "integrator": {"t_final": 0.5, "n_frames": 5}},
}
QUICK = ("tiny (quick mode)",)


def measure(name, table_):
    config = RunConfig.from_dict(table_)
    preflight._CACHE.clear()
    tic = time.perf_counter()
    est = preflight.estimate_cost(config)
    est_s = time.perf_counter() - tic
    preflight._CACHE.clear()                       # the job computes its own (as meanfield run does)
    with tempfile.TemporaryDirectory() as out:
        tic = time.perf_counter()
        main_job(config, out_dir=Path(out) / "o", progress=False)
        actual = time.perf_counter() - tic
    ratio = est["seconds"] / actual
    print(f"{name:34s} estimate {est['seconds']:7.1f} s  actual {actual:7.1f} s  ratio {ratio:5.2f}  "
          f"(estimate took {est_s:.1f} s; {est['notes']})", flush=True)
    return [name, f"{est['seconds']:.1f}", f"{actual:.1f}", f"{ratio:.2f}", f"{est_s:.1f}",
            "yes" if est["piloted"] else "no", f"{est['pde_t_stop']:.3g}", est["frames"]]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    names = QUICK if args.quick else tuple(CONFIGS)
    rows = [measure(name, CONFIGS[name]) for name in names]
    ratios = [float(r[3]) for r in rows]
    worst = max(max(ratios), 1 / min(ratios))
    header = ["config", "estimate (s)", "actual (s)", "estimate / actual", "estimate took (s)", "PDE piloted",
              "PDE stops at t", "W2 frames"]
    md = "\n".join([
        "## Time estimate of the main job (`benchmarks/estimate.py`)", "",
        provenance(load0, os.getloadavg()[0], time.perf_counter() - t0,
                   "python -m benchmarks.estimate" + (" --quick" if args.quick else "")), "",
        table(header, rows), "",
        f"Worst factor either way: {worst:.2f} (target: within 3). The actual time is the whole job as "
        f"`meanfield run` runs it (preflight with its estimate, PDE, particles, W2, dataset, figures, GIF)."])
    finish([f"worst factor {worst:.2f}"], "## Time estimate", md, not args.no_write and not args.quick,
           HERE / "RESULTS_estimate.md")
    return worst


if __name__ == "__main__":
    main()
