"""Benchmarks of the equilibria issue (23): stationary states, branches and the phase transition's numbers.

Measured in one run, every ratio formed from numbers of this run:

1. one stationary state on S^2 (a perturbed cluster at ``beta = 2 beta_*^(3)``, upper branch) by
   Newton-Krylov: Newton steps x Krylov iterations (target <= 100), wall time, and the time-stepping of the
   same PDE (``lawson_dopri5`` with the diffusion split, rtol 1e-10) from the same start until its
   self-consistency residual reaches the Newton solve's (target: Newton >= 100x faster);
2. a 200-point branch on the full S^2 at lmax 31 (amplitude-held Newton-Krylov solves; target < 120 s);
3. the axisymmetric classification and a 200-point branch at d = 64 (target: seconds);
4. ``beta_*^(d)`` from the branch curvature against the Bessel root, d = 2, 3, 4, 8, 64 (target 1e-6 relative);
5. ``nu_#``, ``nu_fold``, ``nu_global`` at ``beta = 2 beta_*^(d)``, d = 2, 3;
6. the eigenvalues of the linearized PDE at uniform (ARPACK on S^2) against ``sigma_l``.

Run from the repository root::

    .venv/bin/python -m benchmarks.equilibria            # lmax 63 for 1.; about 2-4 min (time-stepping dominates)
    .venv/bin/python -m benchmarks.equilibria --quick    # lmax 31, shorter time-stepping; ~30 s
    .venv/bin/python -m benchmarks.equilibria --write    # also writes benchmarks/RESULTS_equilibria.md
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

import meanfield as mf
from benchmarks._report import finish, provenance, table
from meanfield.analysis import equilibria as eq
from meanfield.analysis import phase_transition as pt
from meanfield.analysis import sphere_states as ss
from meanfield.analysis.stability import growth_rate
from meanfield.core.options import SaveAt, StepControl

PATH = Path(__file__).with_name("RESULTS_equilibria.md")
SECTION = "## Equilibria (issue 23)"
DIMS = (2, 3, 4, 8, 64)


def _cluster_start(lmax):
    beta = 2 * pt.beta_star_bessel(3)
    ax = pt.phase_transition_model(3, beta, lmax=48)
    s = eq.degree_one_state(ax, 1.5)
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta), lmax=lmax, nu=s.nu)
    g = pde.grid
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    exact = g.analysis(ax.evaluate(s.b, np.clip(g.nodes @ axis, -1, 1).ravel()).reshape(g.shape) / (4 * np.pi))
    bump = g.analysis(0.02 * np.cos(3 * g.nodes[..., 0]) * np.sin(2 * g.nodes[..., 1]) / (4 * np.pi))
    bump[0] = 0.0
    return pde, exact + bump, s.nu


def newton_vs_time_stepping(lmax, t_max):
    pde, rho0, nu = _cluster_start(lmax)
    t0 = time.perf_counter()
    st = ss.solve_sphere_state(eq.at_noise(pde, nu), rho0)
    t_newton = time.perf_counter() - t0
    y = pde.state(pde.grid._alm(rho0))
    t0 = time.perf_counter()
    for _ in range(20):
        pde.rhs(0.0, y)
    t_rhs = (time.perf_counter() - t0) / 20
    # time-stepping from the same start, residual checked at 0.5 time units
    times = np.arange(0.0, t_max + 1e-9, 0.5)
    t0 = time.perf_counter()
    traj = mf.solve_continuum(pde, rho0, t_max, step=StepControl(rtol=1e-10, atol=1e-13),
                              save=SaveAt(t_eval=times, observe=False), method="lawson_dopri5", monitor=False,
                              progress=False)
    t_steps = time.perf_counter() - t0
    res = []
    for row in traj.y:
        rho = pde.coefficients(row)
        res.append(float(np.abs(rho - ss.gibbs_map(eq.at_noise(pde, nu), rho)).max() / np.abs(rho).max()))
    res = np.array(res)
    reached = np.nonzero(res <= max(st.residual, 1e-10))[0]
    if reached.size:
        t_reach = float(times[reached[0]])
        frac = t_reach / t_max
        cost = t_steps * frac                               # the integration time spent until there
        how = "reached"
    else:                                                   # extrapolate the exponential decay of the residual
        k = res > 0
        slope = np.polyfit(times[k][len(times) // 2:], np.log(res[k][len(times) // 2:]), 1)[0]
        t_reach = float(times[-1] + np.log(max(st.residual, 1e-10) / res[-1]) / slope) if slope < 0 else np.inf
        cost = t_steps * t_reach / t_max
        how = f"extrapolated (decay rate {slope:.3f})"
    return dict(lmax=lmax, newton=st.newton, krylov=st.krylov, products=st.products, residual=st.residual,
                t_newton=t_newton, t_rhs=t_rhs, rhs_equiv=t_newton / t_rhs, t_reach=t_reach, cost=cost, how=how,
                nfev=traj.nfev, ratio=cost / t_newton, message=st.message)


def sphere_branch_time(lmax=31, points=200):
    beta = 2 * pt.beta_star_bessel(3)
    ax = pt.phase_transition_model(3, beta, lmax=48)
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta), lmax=lmax)
    s0 = eq.degree_one_state(ax, 0.05)
    amps = np.linspace(0.05, 1.6, points)
    t0 = time.perf_counter()
    br = ss.sphere_branch(eq.at_noise(pde, s0.nu), amps / np.sqrt(4 * np.pi), ax.to_sphere_coefficients(s0.b, pde.grid))
    el = time.perf_counter() - t0
    ref = [eq.degree_one_state(ax, a).nu for a in amps[::20]]
    err = max(abs(s.nu - r) / r for s, r in zip(br[::20], ref))
    return dict(points=len(br), ok=all(s.success for s in br), time=el, krylov=sum(s.krylov for s in br),
                err=err, nu_fold=max(s.nu for s in br))


def axisymmetric_d64():
    beta = 2 * pt.beta_star_bessel(64)
    t0 = time.perf_counter()
    out = pt.phase_transition(64, beta).to_dict()          # a typed Transition since issue 32
    t_class = time.perf_counter() - t0
    pde = pt.phase_transition_model(64, beta, lmax=out["lmax"])
    t0 = time.perf_counter()
    br = eq.branch_states(pde, np.linspace(0.01, 0.95, 200) * 8.0)
    return dict(t_class=t_class, t_branch=time.perf_counter() - t0, points=len(br),
                ok=all(s.success for s in br), **out)


def beta_star_rows():
    rows = []
    for d in DIMS:
        t0 = time.perf_counter()
        bc = pt.beta_star_continuation(d)
        el = time.perf_counter() - t0
        bb = pt.beta_star_bessel(d)
        rows.append((d, f"{bc:.12f}", f"{bb:.12f}", f"{abs(bc - bb) / bb:.1e}", f"{el:.2f}"))
    return rows


def critical_rows():
    rows = []
    for d in (2, 3):
        beta = 2 * pt.beta_star_bessel(d)
        r = pt.phase_transition(d, beta).to_dict()
        rows.append((d, f"{beta:.10f}", f"{r['nu_sharp']:.10f}", f"{r['nu_fold']:.10f}", f"{r['nu_global']:.10f}",
                     r["transition"], r["lmax"]))
    return rows


def uniform_spectrum_rows(lmax=31, beta=6.0, nu=0.5, k=12):
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta), lmax=lmax)
    uni = np.zeros(pde.grid.nalm, complex)
    uni[0] = 1 / np.sqrt(4 * np.pi)
    vals, _ = ss.sphere_spectrum(eq.at_noise(pde, nu), uni, k=k)
    sigma = {ell: growth_rate(ell, [1.0], beta, "mean", nu) for ell in range(1, lmax + 1)}
    rows = []
    for v in np.unique(np.round(vals.real, 9))[::-1]:
        ell = min(sigma, key=lambda e: abs(sigma[e] - v))
        count = int(np.sum(np.abs(vals.real - v) < 1e-6))
        rows.append((ell, f"{sigma[ell]:.10f}", f"{v:.10f}", f"{abs(v - sigma[ell]) / abs(sigma[ell]):.1e}",
                     f"{count} of {2 * ell + 1}"))
    return rows


def run(quick=False, write=False, path=PATH):
    load0 = os.getloadavg()[0]
    t_all = time.perf_counter()
    nt = newton_vs_time_stepping(31 if quick else 63, 8.0 if quick else 30.0)
    sb = sphere_branch_time(31, 50 if quick else 200)
    d64 = axisymmetric_d64()
    bs = beta_star_rows()
    cr = critical_rows()
    us = uniform_spectrum_rows()
    total = time.perf_counter() - t_all
    targets = [
        ("stationary state on S^2: Newton steps x Krylov iterations", "<= 100", f"{nt['krylov']} (lmax {nt['lmax']})",
         "met" if nt["krylov"] <= 100 else "MISSED"),
        ("Newton-Krylov vs time-stepping to the same residual", ">= 100x", f"{nt['ratio']:.0f}x ({nt['how']})",
         "met" if nt["ratio"] >= 100 else "MISSED"),
        (f"{sb['points']}-point branch on S^2, lmax 31", "< 120 s", f"{sb['time']:.1f} s",
         "met" if sb["time"] < 120 and sb["ok"] else "MISSED"),
        ("axisymmetric classification + 200-point branch, d = 64", "seconds",
         f"{d64['t_class']:.2f} s + {d64['t_branch']:.2f} s", "met" if d64["t_class"] + d64["t_branch"] < 10 else
         "MISSED"),
        ("beta_* from the branch vs the Bessel root", "1e-6 relative", max(r[3] for r in bs),
         "met" if max(float(r[3]) for r in bs) <= 1e-6 else "MISSED"),
    ]
    md = "\n\n".join([
        SECTION,
        provenance(load0, os.getloadavg()[0], total,
                   "python -m benchmarks.equilibria" + (" --quick" if quick else "")),
        "### Targets", table(("target", "wanted", "measured", ""), targets),
        "### 1. One stationary state on S^2 (Newton-Krylov) against time-stepping",
        table(("lmax", "Newton", "Krylov", "products", "residual", "Newton-Krylov s", "rhs s", "= rhs evaluations",
               "time-stepping reaches it at t", "its cost s", "ratio"),
              [(nt["lmax"], nt["newton"], nt["krylov"], nt["products"], f"{nt['residual']:.1e}",
                f"{nt['t_newton']:.3f}", f"{nt['t_rhs']:.2e}", f"{nt['rhs_equiv']:.0f}",
                f"{nt['t_reach']:.1f} ({nt['how']})", f"{nt['cost']:.1f}", f"{nt['ratio']:.0f}x")]),
        "Products: Jacobian products plus residual evaluations, each one synthesis and one analysis of the grid.",
        "### 2. A branch on the full S^2 (lmax 31)",
        table(("points", "all converged", "time s", "Krylov iterations", "max nu (fold)", "vs axisymmetric nu"),
              [(sb["points"], sb["ok"], f"{sb['time']:.1f}", sb["krylov"], f"{sb['nu_fold']:.10f}",
                f"{sb['err']:.1e}")]),
        "### 3. d = 64 (axisymmetric)",
        table(("beta", "transition", "nu_sharp", "nu_fold", "nu_global", "lmax", "classification s", "200-point branch s"),
              [(f"{2 * pt.beta_star_bessel(64):.6f}", d64["transition"], f"{d64['nu_sharp']:.10g}",
                f"{d64['nu_fold']:.10g}", f"{d64['nu_global']:.10g}", d64["lmax"], f"{d64['t_class']:.2f}",
                f"{d64['t_branch']:.2f}")]),
        "### 4. beta_*^(d): branch curvature's sign change against the Bessel root",
        table(("d", "from the branch", "Bessel root", "relative difference", "time s"), bs),
        "### 5. Critical noises at beta = 2 beta_*^(d)",
        table(("d", "beta", "nu_sharp", "nu_fold", "nu_global", "transition", "lmax"), cr),
        "### 6. Eigenvalues at uniform (ARPACK on S^2, lmax 31, beta 6, nu 0.5) against sigma_l",
        table(("l", "sigma_l", "eigenvalue", "relative difference", "copies found"), us),
    ])
    summary = [f"{t[0]}: {t[2]} ({t[1]}) {t[3]}" for t in targets]
    finish(summary, SECTION, md, write, path)
    return dict(targets=targets, newton=nt, branch=sb, d64=d64, beta_star=bs, critical=cr, spectrum=us, md=md)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="lmax 31, short time-stepping, 50-point S^2 branch")
    ap.add_argument("--write", action="store_true", help=f"write {PATH.name}")
    args = ap.parse_args(argv)
    run(args.quick, args.write)


if __name__ == "__main__":
    main()
