"""Sinkhorn attention on the particle side: the velocity's cost against mean and softmax heads.

Two zonal heads (``lambda = 1, 0.5``, ``beta = 5``) on S^2, uniform tokens; the direct velocity at n = 2000
and the spectral one at n = 2*10^5, for each normalization, calls interleaved (minimum of repeats), and the
kernel applications of the Sinkhorn solve (``ParticleSystem.sinkhorn_scalings``) at the default tolerance.
Writes ``benchmarks/RESULTS_sinkhorn.md``.  About a minute on the 2-core reference machine::

    .venv/bin/python -m benchmarks.sinkhorn
"""

from __future__ import annotations

import datetime
import platform
from pathlib import Path

import numpy as np

from meanfield.core.heads import scalar_heads
from meanfield.models.particles import ParticleSystem

from .run import best, tokens

HERE = Path(__file__).resolve().parent
NORMALIZATIONS = ("mean", "softmax", "sinkhorn")
CASES = (("direct", 2000, 5), ("spectral", 200_000, 2))


def main():
    rows = []
    for summation, n, repeats in CASES:
        X = tokens(n)
        systems = {z: ParticleSystem(scalar_heads([1.0, 0.5], 3, beta=5.0, normalization=z), summation=summation)
                   for z in NORMALIZATIONS}
        times = dict.fromkeys(NORMALIZATIONS, np.inf)
        for _ in range(repeats):                              # interleaved: every normalization sees the same load
            for z, s in systems.items():
                times[z] = min(times[z], best(lambda: s.velocity(X), 1))
        res = systems["sinkhorn"].sinkhorn_scalings(X)
        rows.append((summation, n, times, [r.n_apply for r in res], max(r.error for r in res)))
        print(summation, n, {z: f"{t:.4f} s" for z, t in times.items()}, [r.n_apply for r in res], flush=True)
    lines = ["# Sinkhorn attention: particle velocity cost", "",
             f"{datetime.date.today()}, {platform.machine()}, `python -m benchmarks.sinkhorn`; two zonal heads "
             f"(lambda = 1, 0.5, beta = 5), uniform tokens, minimum of interleaved repeats.", "",
             "| sums | n | mean | softmax | sinkhorn | sinkhorn / softmax | applications per head | error |",
             "|---|---|---|---|---|---|---|---|"]
    for summation, n, t, apps, err in rows:
        lines.append(f"| {summation} | {n} | {t['mean']:.4f} s | {t['softmax']:.4f} s | {t['sinkhorn']:.4f} s | "
                     f"{t['sinkhorn'] / t['softmax']:.1f} | {apps} | {err:.1e} |")
    (HERE / "RESULTS_sinkhorn.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
