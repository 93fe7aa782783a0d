"""Benchmarks of issue 13 (noise): the PDE's Lawson step against explicit dopri5 with diffusion, and
particle steps per second with and without noise.  Prints a table; every ratio is formed from
numbers measured in this one run.

Run from the repository root::

    .venv/bin/python -m benchmarks.noise                 # lmax 127, t = 1 (explicit dopri5 at nu = 0.5
                                                         # takes minutes on a busy 2-core machine)
    .venv/bin/python -m benchmarks.noise --lmax 63       # about half a minute

Accuracy: both PDE runs use rtol 1e-7, atol 1e-9; their max coefficient difference against a tight
Lawson reference (rtol 1e-11) is printed next to the time, so the comparison is at the same accuracy.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import meanfield as mf
from meanfield.core.densities import vmf_density
from meanfield.core.heads import scalar_heads
from meanfield.core.options import SaveAt, StepControl

RUN = dict(save=SaveAt(observe=False), monitor=False, progress=False)


def pde_rows(lmax, nus, t_final=1.0):
    heads = scalar_heads([1.0], 3, beta=2.0)
    rows = []
    for nu in nus:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pde = mf.ContinuumPDE(heads, lmax=lmax, nu=nu, kernel_tol=1e-6)
        rho = vmf_density(pde.grid, [0.0, 0.6, 0.8], 3.0)
        ref = mf.solve_continuum(pde, rho, t_final, method="lawson_dopri5", step=StepControl(rtol=1e-11, atol=1e-13),
                                 **RUN).y_final
        out = {}
        for method in ("dopri5", "lawson_dopri5"):
            tic = time.perf_counter()
            tr = mf.solve_continuum(pde, rho, t_final, method=method, step=StepControl(rtol=1e-7, atol=1e-9), **RUN)
            out[method] = (time.perf_counter() - tic, tr.n_steps, np.abs(tr.y_final - ref).max())
        rows.append((nu, out))
    return rows


def particle_rows(n=2000, d=3, steps=50, dt=0.01):
    system = mf.ParticleSystem(scalar_heads([1.0], d, beta=2.0), summation="direct")
    noisy = mf.ParticleSystem(scalar_heads([1.0], d, beta=2.0), summation="direct", nu=0.1)
    X = np.random.default_rng(0).standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    out = {}
    for name, sysm, method in (("noiseless rk4", system, "rk4"), ("noiseless heun", system, "heun"),
                               ("noise euler_maruyama", noisy, "euler_maruyama"),
                               ("noise geodesic_strang", noisy, "geodesic_strang")):
        tic = time.perf_counter()
        mf.solve_particles(sysm, X, steps * dt, step=StepControl(dt=dt),
                           save=SaveAt(observe=False, t_eval=[0, steps * dt]), method=method, seed=1)
        out[name] = steps / (time.perf_counter() - tic)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lmax", type=int, default=127)
    args = ap.parse_args(argv)
    print(f"PDE to t = 1 at lmax {args.lmax} (rtol 1e-7): time [s], steps, max error vs reference")
    for nu, out in pde_rows(args.lmax, (0.05, 0.5)):
        (te, se, ee), (tl, sl, el) = out["dopri5"], out["lawson_dopri5"]
        print(f"  nu = {nu}: dopri5 {te:.2f} s, {se} steps, err {ee:.1e} | lawson_dopri5 {tl:.2f} s, {sl} steps, "
              f"err {el:.1e} | speed-up {te / tl:.1f}x")
    print("Particle steps per second (n = 2000, d = 3, direct sums):")
    for name, rate in particle_rows().items():
        print(f"  {name}: {rate:.1f} steps/s")


if __name__ == "__main__":
    main()
