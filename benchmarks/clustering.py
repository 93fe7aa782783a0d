"""Benchmark of :func:`meanfield.analysis.clustering.clustering`: direct (all n^2 inner products)
vs tree path (KD-tree + grid of clique cells), time and peak memory against n.

Configurations (d = 3, threshold 0.99, the default): ``uniform`` tokens; ``clusters``: three vMF
clusters with kappa = 1e8 (angular spread ~1e-4); ``collapsed``: three points, each repeated n/3
times with 1e-12 jitter and retracted (near-coincident tokens: O(n^2) linked pairs).

Each measurement runs in a fresh subprocess that loads the tokens from a .npy file: "peak MiB"
is the growth of the process's peak resident memory during the call (KD-trees included, which
tracemalloc does not see).  Times are the minimum over ``repeats`` calls (one for slow calls).
A direct call predicted (n^2 from the largest measured n) to take longer than 60 s is skipped.
Prints a markdown table.  Run from the repository root, one thread::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.clustering           # about 5 minutes
    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.clustering --quick   # about 1 minute
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DIRECT_BUDGET_S = 60.0
KINDS = ("uniform", "clusters", "collapsed")


def tokens(kind, n, d=3, seed=0):
    from meanfield.core.initial import uniform_sphere, vmf_mixture
    from meanfield.models.particles import retract_sphere

    mus = uniform_sphere(3, d, seed=seed + 1)
    if kind == "uniform":
        return uniform_sphere(n, d, seed=seed)
    if kind == "clusters":
        return vmf_mixture(n, mus, 1e8, seed=seed)
    jitter = np.random.default_rng(seed).standard_normal((n, d))
    return retract_sphere(np.repeat(mus, -(-n // 3), axis=0)[:n] + 1e-12 * jitter)


def measure_one(path, method, repeats):
    """Child process: time and peak-memory growth of ``clustering`` on the tokens in ``path``."""
    from meanfield.analysis.clustering import clustering

    X = np.load(path)
    clustering(X[:64], method=method)                      # imports and first-call costs
    Path("/proc/self/clear_refs").write_text("5")         # reset the peak resident memory (Linux)
    rss0 = _status_kib("VmRSS")
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = clustering(X, method=method)
        best = min(best, time.perf_counter() - t0)
        if best > 5:
            break
    peak = (_status_kib("VmHWM") - rss0) / 1024
    print(json.dumps({"time": best, "peak_mib": peak, **out}))


def _status_kib(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def run_child(path, method, repeats):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "benchmarks.clustering", "--child", str(path), method, str(repeats)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n up to 1e5")
    parser.add_argument("--dims", action="store_true", help="only the dimension table (n = 1e4, d = 3..64)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        measure_one(args.child[0], args.child[1], int(args.child[2]))
        return
    if args.dims:
        dims_table()
        return
    sizes = [1000, 2000, 4000, 10**4, 3 * 10**4, 10**5] + ([] if args.quick else [3 * 10**5, 10**6])
    header = ["tokens", "n", "direct (s)", "direct peak MiB", "tree (s)", "tree peak MiB", "speedup",
              "n_clusters", "|min_inner diff|"]
    rows = []
    t_start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for kind in KINDS:
            last_direct = None                              # (n, seconds) of the largest direct run
            for n in sizes:
                path = Path(tmp) / f"{kind}_{n}.npy"
                np.save(path, tokens(kind, n))
                repeats = 5 if n <= 10**4 else 1
                tree = run_child(path, "tree", repeats)
                predicted = None if last_direct is None else last_direct[1] * (n / last_direct[0]) ** 2
                direct = None
                if predicted is None or predicted < DIRECT_BUDGET_S:
                    direct = run_child(path, "direct", repeats)
                    last_direct = (n, direct["time"])
                    assert direct["n_clusters"] == tree["n_clusters"], (kind, n, direct, tree)
                rows.append([kind, f"{n:.0e}",
                             f"{direct['time']:.3g}" if direct else f"skipped (~{predicted:.0f} s)",
                             f"{direct['peak_mib']:.0f}" if direct else "",
                             f"{tree['time']:.3g}", f"{tree['peak_mib']:.0f}",
                             f"{direct['time'] / tree['time']:.1f}" if direct else "",
                             tree["n_clusters"],
                             f"{abs(direct['min_inner'] - tree['min_inner']):.1e}" if direct else ""])
                print(" | ".join(str(c) for c in rows[-1]), flush=True)
    load = os.getloadavg()[0]
    print(f"\nd = 3, threshold 0.99, one thread; total {time.time() - t_start:.0f} s, load average {load:.1f} "
          "(the machine is shared: absolute times can be inflated)\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")


def dims_table(n=10**4):
    """Where the tree path stops paying: both paths at fixed n against d."""
    header = ["tokens", "d", "direct (s)", "tree (s)", "direct / tree", "n_clusters"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("uniform", "clusters"):
            for d in (3, 8, 12, 16, 24, 32, 64):
                path = Path(tmp) / f"{kind}_{d}.npy"
                np.save(path, tokens(kind, n, d))
                direct, tree = run_child(path, "direct", 3), run_child(path, "tree", 3)
                assert direct["n_clusters"] == tree["n_clusters"], (kind, d, direct, tree)
                rows.append([kind, d, f"{direct['time']:.3g}", f"{tree['time']:.3g}",
                             f"{direct['time'] / tree['time']:.2f}", tree["n_clusters"]])
                print(" | ".join(str(c) for c in rows[-1]), flush=True)
    print(f"\nn = {n}, threshold 0.99, one thread\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")


if __name__ == "__main__":
    main()
