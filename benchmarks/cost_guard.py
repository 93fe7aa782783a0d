"""The cost guard's estimates (:mod:`meanfield.core.cost`) against measured time and peak memory.

For each guarded entry point, a few large-but-allowed cases: the estimate the entry point's guard
computes from sizes (``estimate_*`` next to it) and, in a fresh subprocess, the measured wall time and
the growth of the process's peak resident memory (everything, ducc0 and KD-trees included) of one call,
then the tracemalloc peak (numpy buffers) of a second, untimed call.  Writes ``benchmarks/RESULTS_cost_guard.md``.  Run from the repository
root, one thread (about 3 minutes on the shared 2-core machine)::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.cost_guard
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._report import provenance, table

PRELUDE = """
import json, resource, time, tracemalloc, warnings
import numpy as np
import meanfield as mf
warnings.simplefilter("ignore")
"""

MEASURE = """
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
run()                                  # timed without tracemalloc (it slows Python-heavy loops up to 10x)
el = time.perf_counter() - t0
rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024.0
tracemalloc.start()
run()                                  # the same call again, for the traced peak
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"bytes": est.bytes, "seconds": est.seconds, "measured_s": el, "traced": peak, "rss": rss}))
"""

# (entry point, case, setup defining est and run())
CASES = [
    ("CirclePDE", "kmax = 2e6, 1 head", """
from meanfield.models.circle import CirclePDE, estimate_circle
h = mf.scalar_heads([1.0], 2, beta=1.0); est = estimate_circle(2 * 10**6, 1)
run = lambda: CirclePDE(h, 2 * 10**6)"""),
    ("AxisymmetricPDE", "lmax = 3000, d = 16", """
from meanfield.models.axisymmetric import AxisymmetricPDE, estimate_axisymmetric
h = mf.scalar_heads([1.0], 16, beta=1.0); est = estimate_axisymmetric(3000, 16)
run = lambda: AxisymmetricPDE(h, 16, 3000)"""),
    ("BatchedSystem.velocity", "(1, 8000, 3), softmax", """
from meanfield.models.batched import BatchedSystem, estimate_batched
s = BatchedSystem(mf.scalar_heads([1.0], 3, beta=1.0)); X = mf.initial.uniform_sphere(8000, 3, seed=1)[None]
est = estimate_batched(1, 8000, 3, 1); run = lambda: s.velocity(X)"""),
    ("BatchedSystem.velocity", "(1, 6000, 3), softmax, causal", """
from meanfield.models.batched import BatchedSystem, estimate_batched
s = BatchedSystem(mf.scalar_heads([1.0], 3, beta=1.0), causal=True); X = mf.initial.uniform_sphere(6000, 3, seed=1)[None]
est = estimate_batched(1, 6000, 3, 1, causal=True); run = lambda: s.velocity(X)"""),
    ("BatchedSystem.velocity", "(2, 3000, 3), sinkhorn", """
from meanfield.models.batched import BatchedSystem, estimate_batched
s = BatchedSystem(mf.scalar_heads([1.0], 3, beta=1.0, normalization="sinkhorn"))
X = np.stack([mf.initial.uniform_sphere(3000, 3, seed=b) for b in range(2)])
est = estimate_batched(2, 3000, 3, 1, solved=1); run = lambda: s.velocity(X)"""),
    ("random_heads", "d = 2000, 2 heads, gaussian score and value", """
from meanfield.core.random_heads import estimate_random_heads, random_heads
est = estimate_random_heads(2000, 2, None, "gaussian", "gaussian")
run = lambda: random_heads(2000, 2, score="gaussian", value="gaussian", seed=0)"""),
    ("random_layers", "d = 500, 20 layers", """
from meanfield.core.random_heads import estimate_random_heads
from meanfield.core.schedules import random_layers
est = estimate_random_heads(500, 20); run = lambda: random_layers(500, 20, 0.1, seed=0)"""),
    ("step_rules.iterate", "(4, 32, 3), 20000 layers, states saved", """
from meanfield.models.batched import BatchedSystem
from meanfield.models.step_rules import estimate_iterate, iterate
s = BatchedSystem(mf.scalar_heads([1.0], 3, beta=1.0))
X = np.stack([mf.initial.uniform_sphere(32, 3, seed=b) for b in range(4)])
est = estimate_iterate(s, X.shape, 20000); run = lambda: iterate(s, X, 0.01, 20000)"""),
    ("phase_diagram", "3 betas x 100 layers x 64 systems of 32 tokens", """
from meanfield.workflow.phase_diagram import PhaseDiagramConfig, estimate_phase_diagram, phase_diagram
c = PhaseDiagramConfig(betas=(1.0, 3.0, 9.0), t_final=10.0, dt=0.1, batch=64, n=32)
est = estimate_phase_diagram(c); run = lambda: phase_diagram(c, progress=False)"""),
    ("clustering(method='tree')", "2000 tokens in d = 200, threshold 0", """
from meanfield.analysis import clustering as C
X = mf.initial.uniform_sphere(2000, 200, seed=1); m = 2000
est = type("E", (), {"bytes": m * (m - 1) / 2 * C._CELL_PAIR_BYTES, "seconds": float("nan")})()
run = lambda: C.clustering(X, 0.0, method="tree")"""),
    ("w2_particles_field", "n = 2000, n_quad = 40", """
from meanfield.analysis.semidiscrete import estimate_semidiscrete
from meanfield.analysis.transport import w2_particles_field
g = mf.SphereGrid(15); rho = np.zeros(g.nalm, complex); rho[0] = 1 / np.sqrt(4 * np.pi)
X = mf.initial.uniform_sphere(2000, 3, seed=1); est = estimate_semidiscrete(2000, 40)
run = lambda: w2_particles_field(X, rho, g, n_quad=40)"""),
    ("SphereGrid", "lmax = 1500", """
from meanfield.core.sphere import estimate_grid
est = estimate_grid(1500, 1501, 3002); run = lambda: mf.SphereGrid(1500)"""),
    ("solve_particles (noisy, fixed steps)", "10 tokens, dt = 1e-4 to t = 1 (1e4 steps)", """
from meanfield.core.options import StepControl
s = mf.ParticleSystem(mf.scalar_heads([1.0], 3, beta=2.0), summation="direct", nu=0.1)
X0 = mf.initial.uniform_sphere(10, 3, seed=1)
c = s.check_direct_run(10, 2 * 10**4, 11, 3, steps=10**4)
est = type("E", (), {"bytes": float("nan"), "seconds": c["seconds"]})()
run = lambda: mf.solve_particles(s, X0, 1.0, step=StepControl(dt=1e-4), seed=1, progress=False)"""),
    ("solve_particles (rk4, fixed steps)", "10 tokens, dt = 1e-4 to t = 1 (1e4 steps)", """
from meanfield.core.options import StepControl
s = mf.ParticleSystem(mf.scalar_heads([1.0], 3, beta=2.0), summation="direct")
X0 = mf.initial.uniform_sphere(10, 3, seed=1)
c = s.check_direct_run(10, 4 * 10**4, 11, 3, steps=10**4)
est = type("E", (), {"bytes": float("nan"), "seconds": c["seconds"]})()
run = lambda: mf.solve_particles(s, X0, 1.0, method="rk4", step=StepControl(dt=1e-4), progress=False)"""),
    ("solve_particles (spectral, noisy)", "10^5 tokens, dt = 0.01 to t = 0.5 (50 steps; issue 33)", """
from meanfield.core.options import SaveAt, StepControl
s = mf.ParticleSystem(mf.scalar_heads([1.0], 3, beta=2.0), summation="spectral", nu=0.1)
X0 = mf.initial.uniform_sphere(10**5, 3, seed=1)
c = s.check_direct_run(10**5, 2 * 50, 2, 0, steps=50)
est = type("E", (), {"bytes": float("nan"), "seconds": c["seconds"]})()
run = lambda: mf.solve_particles(s, X0, 0.5, step=StepControl(dt=0.01), seed=1, progress=False,
                                 save=SaveAt(t_eval=[0.0, 0.5], observe=False))"""),
    ("ParticleSystem.velocity (direct, d = 384)", "n = 2000, 2 dense softmax heads (issue 33: width)", """
import numpy as np
r = np.random.default_rng(0)
G = [r.standard_normal((384, 384)) / 384 for _ in range(2)]
s = mf.ParticleSystem([mf.Head(g, g.T.copy(), normalization="softmax") for g in G], summation="direct")
X0 = mf.initial.uniform_sphere(2000, 384, seed=1)
s.velocity(X0[:10])                    # the heads' |M|_2, kept on them, is not the sums' cost
c = s.direct_cost(2000)
est = type("E", (), {"bytes": float("nan"), "seconds": c["seconds"]})()
run = lambda: s.velocity(X0)"""),
]


NOTE = ("Reading (written with the run of 2026-12-03, load 1-3 on 2 cores, other work running): every time estimate is "
        "within a factor of 2.2 of its measurement except three that are generous (Sinkhorn batched sums 4.7x, random "
        "heads and the field W2 3.3x); the two cases of issue 33 are new: a spectral noisy run of 10^5 tokens (estimate "
        "1.26x the measured time; before it counted only the 50 steps' overhead, 0.01 s) and a direct velocity of two "
        "d = 384 heads (0.70x: the width-dependent pair rate, cost.pair_seconds; at the flat 1e-8 s a pair it was "
        "0.12x).  Memory estimates are within 0.85-1.10 of the measured peak wherever the case is large.")


def mib(b):
    return "-" if b != b else f"{b / 2**20:.0f}"


def main():
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(root))
    load0, started, rows = os.getloadavg()[0], time.perf_counter(), []
    for entry, case, setup in CASES:
        out = subprocess.run([sys.executable, "-c", PRELUDE + setup + MEASURE], capture_output=True, text=True,
                             env=env, timeout=600, cwd=root)
        if out.returncode != 0:
            print(entry, case, "FAILED", out.stderr[-2000:])
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        peak = max(r["traced"], r["rss"])
        ratio_m = "-" if r["bytes"] != r["bytes"] else f"{r['bytes'] / peak:.2f}"
        ratio_t = "-" if r["seconds"] != r["seconds"] else f"{r['seconds'] / r['measured_s']:.2f}"
        est_s = "-" if r["seconds"] != r["seconds"] else f"{r['seconds']:.3g}"
        rows.append((entry, case, mib(r["bytes"]), mib(r["traced"]), mib(r["rss"]), ratio_m, est_s,
                     f"{r['measured_s']:.3g}", ratio_t))
        print(" | ".join(str(c) for c in rows[-1]), flush=True)
    total = time.perf_counter() - started
    md = "\n".join([
        "# The cost guard: estimates against measurements", "",
        provenance(load0, os.getloadavg()[0], total, "OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.cost_guard"),
        "",
        "Each case is allowed (below MEMORY_LIMIT_BYTES = 4 GiB and TIME_LIMIT_S = 1 h) and runs in a fresh "
        "subprocess. Memory ratio: estimate / max(tracemalloc peak, peak-RSS growth); time ratio: estimate / "
        "measured. The guard needs the right order of magnitude (it refuses at 4 GiB / 1 h, and the refused cases "
        "of issue 26 are 10-10^6 times over); '-' where an entry point's guard estimates only one of the two. "
        "The tree clustering's estimate is the worst case before counting (every cell pair a candidate); here "
        "every pair is one (threshold 0 in d = 200).", "",
        NOTE, "",
        table(("entry point", "case", "estimate MiB", "traced MiB", "RSS growth MiB", "memory ratio", "estimate s",
               "measured s", "time ratio"), rows), ""])
    (root / "benchmarks" / "RESULTS_cost_guard.md").write_text(md)
    print(f"\ntotal {total:.0f} s; wrote benchmarks/RESULTS_cost_guard.md")


if __name__ == "__main__":
    main()
