"""Fit of the cost model of the causal spectral velocity (``meanfield.models.causal.CAUSAL_SPECTRAL_SECONDS``).

Measures ``CausalSystem(summation="spectral").velocity`` at n = 2 10^4 (best of 3, one thread) on S^1 (kmax 10, 53;
one and eight heads) and S^2 (lmax 13, 22; one, three and eight heads) with blocks of 1 to 256 tokens, fits ``n
(c_token + H (D c_feature + B c_block_pair)) + (n / B) D (c_block_feature + H c_block_head_feature)`` by non-negative
least squares on relative residuals, and prints the fit and the ratio of the package's estimate (the doubled fit) to
each measurement.  Run from the repository root::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.causal_cost     # about a minute
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import nnls

CASES = [(2, 1.0, [1.0]), (2, 64.0, [1.0]), (2, 64.0, [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]), (3, 2.0, [1.0]),
         (3, 8.0, [1.0]), (3, 2.0, [1.0, 0.5, 0.3]), (3, 2.0, [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])]
BLOCKS = (1, 4, 16, 64, 256)
N = 20_000


def main():
    import meanfield as mf
    from meanfield.models.causal import CAUSAL_SPECTRAL_SECONDS, CausalSystem

    rows, ratios = [], []
    for d, beta, lams in CASES:
        heads = mf.scalar_heads(lams, d=d, beta=beta, normalization="softmax")
        X = mf.initial.uniform_sphere(N, d, seed=1)
        for B in BLOCKS:
            cs = CausalSystem(heads, summation="spectral", kernel_tol=1e-10, block=B)
            cs.velocity(X[:300])                                   # compiled and warm
            best = np.inf
            for _ in range(3):
                t0 = time.perf_counter()
                cs.velocity(X)
                best = min(best, time.perf_counter() - t0)
            D = cs._spectral["D"]
            rows.append((len(lams), D, B, best))
            ratios.append(cs.evaluation_seconds(N) / best)
            print(f"d = {d}, beta = {beta:g}, H = {len(lams)}, D = {D}, block = {B}: {best:.4f} s, estimate / "
                  f"measured {ratios[-1]:.2f}", flush=True)
    H, D, B, t = np.array(rows, float).T
    A = np.stack([N * np.ones_like(t), N * H * D, N * H * B, N / B * D, N / B * H * D], axis=1)
    c, _ = nnls(A / t[:, None], np.ones_like(t))
    fit = (A @ c) / t
    names = ("token", "feature", "block_pair", "block_feature", "block_head_feature")
    print("fit:", ", ".join(f"{k} {v:.2g}" for k, v in zip(names, c)), f"(fit / measured {fit.min():.2f}-{fit.max():.2f})")
    print("package:", CAUSAL_SPECTRAL_SECONDS, f"(estimate / measured {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
