"""Heads on orthogonal subspaces of R^3 in the continuum limit: the seed paper's own setting, particles against the PDE.

The paper (seed summary, section 3): heads attend inside subspaces; with ``M_h' M_h = 0`` the per-head energies are
monotone in flat space, while on the sphere the radial shadows ``a^h = <u^h, x>`` keep a coupling ``-a^h a^h'`` in
``dE_h/dt`` even under exact orthogonality (interference), which Condition 8 (radial dominance) controls.  No
computation of this setting in the continuum existed: the general-head operators (MODEL.md section 8) make it one.

Cases (exp kernel, mean normalization, ``beta``, strength ``lam``; ``P_xy = diag(1, 1, 0)``, ``P_z = diag(0, 0, 1)``):

* ``plane_axis``: ``M_1 = V_1 = lam P_xy``, ``M_2 = V_2 = lam P_z`` (value-aligned: a gradient flow);
* ``plane_axis_rotated``: the same scores, non-aligned values ``V_1 = lam (P_xy + J_z / 2)`` (``J_z`` the rotation
  generator of the plane: a non-symmetric value matrix, no energy structure), ``V_2 = lam P_z``;
* ``three_lines``: three heads ``M_h = V_h = lam e_h e_h^T`` (h = x, y, z).

For each case the PDE (lmax ``lmax``) runs from a perturbed uniform density (three vMF bumps over a uniform floor) up
to ``t_max`` or its resolution monitor; its per-head energies, the rate terms ``C[h, h'] = int <P u^h, P u^h'> rho``
(row sums: ``dE_h/dt``), the interference ``-int a^h a^h' rho`` and Condition 8 (exact reading, the fraction of the
mass where it holds) are recorded at the output times.  Particles: ``n`` i.i.d. samples of the start for
``n = 10^2 .. 10^6`` (``seeds_small`` seeds up to ``n_many_seeds``, ``seeds_large`` above), integrated with the
spectral sums (dopri5); at every output time the Sobolev MMD (``H^-2``, exact, O(n)) to the PDE density, the
per-head energies, rate terms and Condition 8 fractions, and at ``w2_times`` the semi-discrete W2 for ``n <=
w2_max_n``.  The clusters at the last time: the particles' (inner product >= 0.99) and the density's peaks.

Cost (2 cores): quick about 30 s; full about 40-60 min (the 10^6-token runs dominate).  Run from the repository
root (``--case NAME`` runs one case only, resumable: a finished case's ``case_<name>.npz`` is kept)::

    python -m studies.orthogonal_heads.run [--quick] [--case NAME]
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield.analysis import diagnostics as dg
from meanfield.analysis import field_diagnostics as fd
from meanfield.analysis.cluster_tracking import density_peaks
from meanfield.analysis.clustering import clustering
from meanfield.analysis.mmd import mmd_iid_expectation, mmd_particles_field
from meanfield.analysis.transport import w2_particles_field
from meanfield.core.heads import Head
from meanfield.core.options import SaveAt, StepControl
from studies._common import main, save_json

P_XY = np.diag([1.0, 1.0, 0.0])
P_Z = np.diag([0.0, 0.0, 1.0])
J_Z = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
MUS = np.array([[0.3, 0.2, 0.93], [0.9, -0.3, 0.3], [-0.4, 0.8, -0.45]])
SEED = 3131


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode (saved as ``config``)."""

    cases: tuple
    beta: float
    lam: float
    floor: float              # uniform fraction of the start
    kappa: float
    lmax: int
    t_max: float
    dt_out: float
    n_values: tuple
    seeds_small: int
    seeds_large: int
    n_many_seeds: int
    w2_times: tuple
    w2_max_n: int
    rtol: float
    atol: float
    spectral_tol: float
    lmax_long: int            # where the clusters go: a longer PDE run at this degree ...
    t_long: float             # ... up to this time or its resolution monitor,
    dt_long: float
    n_long: int               # ... and particle runs of n_long tokens to t_long (clusters.py)
    seeds_long: int


FULL = Settings(cases=("plane_axis", "plane_axis_rotated", "three_lines"), beta=1.0, lam=1.5, floor=0.7, kappa=6.0,
                lmax=47, t_max=1.2, dt_out=0.1,
                n_values=(100, 316, 1000, 3162, 10_000, 31_623, 100_000, 316_228, 1_000_000),
                seeds_small=10, seeds_large=5, n_many_seeds=10_000, w2_times=(0.0, 0.6, 1.2), w2_max_n=10_000,
                rtol=1e-6, atol=1e-8, spectral_tol=1e-10, lmax_long=95, t_long=8.0, dt_long=0.5, n_long=10_000,
                seeds_long=5)
QUICK = Settings(cases=("plane_axis", "plane_axis_rotated"), beta=1.0, lam=1.5, floor=0.7, kappa=6.0, lmax=23,
                 t_max=0.4, dt_out=0.2, n_values=(100, 316, 1000), seeds_small=3, seeds_large=2, n_many_seeds=316,
                 w2_times=(0.0, 0.4), w2_max_n=1000, rtol=1e-6, atol=1e-8, spectral_tol=1e-10, lmax_long=31,
                 t_long=1.0, dt_long=0.5, n_long=1000, seeds_long=2)


def heads(case, cfg):
    lam, beta = cfg.lam, cfg.beta
    if case == "plane_axis":
        return [Head(lam * P_XY, lam * P_XY, beta=beta), Head(lam * P_Z, lam * P_Z, beta=beta)]
    if case == "plane_axis_rotated":
        return [Head(lam * P_XY, lam * (P_XY + 0.5 * J_Z), beta=beta), Head(lam * P_Z, lam * P_Z, beta=beta)]
    if case == "three_lines":
        return [Head(lam * np.outer(e, e), lam * np.outer(e, e), beta=beta) for e in np.eye(3)]
    raise ValueError(f"case must be one of {FULL.cases}; received {case!r}")


def initial_density(grid, cfg):
    mus = MUS / np.linalg.norm(MUS, axis=1, keepdims=True)
    return mf.densities.vmf_mixture_density(grid, mus, cfg.kappa, floor=cfg.floor)


def head_terms_particles(system, X):
    """Per-head energies, rate terms C (H, H), the Condition 8 (exact) fraction per head, at tokens ``X``."""
    r = dg.radial_dominance(system, X)
    return system.energies(X), dg.energy_rate_terms(system, X), r["exact"].mean(axis=1)


def head_terms_field(pde, rho_lm):
    U = fd.head_forces(pde, rho_lm)
    C = fd.field_energy_rate_terms(pde, rho_lm, forces=U)
    cond = fd.field_radial_dominance(pde, rho_lm, forces=U)["exact"]
    g = pde.grid
    w = g.synthesis(rho_lm) * g.weights
    return pde.energies(rho_lm), C, np.einsum("ij,hij->h", w, cond) / w.sum()


def peaks_of(pde, rho_lm):
    g = pde.grid
    return density_peaks(g.synthesis(rho_lm).reshape(-1), g.nodes.reshape(-1, 3), g.weights.reshape(-1))


def long_runs(case, cfg):
    """Where the density's mass goes: the PDE at ``lmax_long`` to ``t_long`` (or its monitor) with the density's peaks
    (count, masses, centres) at every ``dt_long`` (the particles' clusters at ``t_long``: :mod:`.clusters`).  The first
    full run also stored ``long_particle_clusters`` (threshold-only counts of the same particle runs as
    :mod:`.clusters`, which supersedes them)."""
    pde = mf.ContinuumPDE(heads(case, cfg), cfg.lmax_long)
    rho0 = initial_density(pde.grid, cfg)
    t = np.round(np.arange(0.0, cfg.t_long + 1e-9, cfg.dt_long), 9)
    tr = mf.solve_continuum(pde, rho0, cfg.t_long, save=SaveAt(t_eval=t), progress=False)
    rho = pde.trajectory_coefficients(tr)
    pk = [peaks_of(pde, r) for r in rho]
    out = {"long_t": np.asarray(tr.t), "long_message": tr.message,
           "long_peaks": np.array([len(p["masses"]) for p in pk]),
           "long_top_masses": np.array([np.pad(np.sort(p["masses"])[::-1][:8], (0, max(0, 8 - len(p["masses"]))))
                                        for p in pk]),
           "long_final_centres": np.asarray(pk[-1]["centres"]), "long_final_masses": np.asarray(pk[-1]["masses"])}
    return out


def solve_pde(case, cfg):
    pde = mf.ContinuumPDE(heads(case, cfg), cfg.lmax)
    rho0 = initial_density(pde.grid, cfg)
    t = np.round(np.arange(0.0, cfg.t_max + 1e-9, cfg.dt_out), 9)
    tr = mf.solve_continuum(pde, rho0, cfg.t_max, save=SaveAt(t_eval=t), progress=False)
    rho = pde.trajectory_coefficients(tr)
    k = len(tr.t)
    terms = [head_terms_field(pde, r) for r in rho]
    peaks = peaks_of(pde, rho[-1])
    return pde, rho, {"t": np.asarray(tr.t), "status": tr.status, "message": tr.message, "n_times": k,
                      "energy": np.array([e for e, _, _ in terms]), "C": np.array([c for _, c, _ in terms]),
                      "cond": np.array([f for _, _, f in terms]), "peaks": peaks}


def particle_run(case, cfg, pde, rho, t, n, seed):
    system = mf.ParticleSystem(heads(case, cfg), summation="spectral", kernel_tol=cfg.spectral_tol)
    X0 = mf.densities.sample_particles(pde.grid, rho[0], n, seed=seed)
    tr = mf.solve_particles(system, X0, float(t[-1]), step=StepControl(rtol=cfg.rtol, atol=cfg.atol),
                            save=SaveAt(t_eval=t, observe=False), progress=False)
    X = tr.y
    out = {"mmd": np.array([mmd_particles_field(X[k], rho[k], pde.grid).distance for k in range(len(t))]),
           "w2": np.full(len(t), np.nan), "status": tr.status, "nfev": tr.nfev}
    out["w2_failed"] = 0
    if n <= cfg.w2_max_n:
        for k, tk in enumerate(t):
            if np.any(np.isclose(tk, cfg.w2_times)):
                try:
                    out["w2"][k] = w2_particles_field(X[k], rho[k], pde.grid).distance
                except RuntimeError:         # the semi-discrete Newton's documented failure on clustered tokens:
                    out["w2_failed"] += 1     # counted and reported, the value left out (NaN), never replaced
    terms = [head_terms_particles(system, X[k]) for k in range(len(t))]
    out["energy"] = np.array([e for e, _, _ in terms])
    out["C"] = np.array([c for _, c, _ in terms])
    out["cond"] = np.array([f for _, _, f in terms])
    out["clusters"] = clustering(X[-1], 0.99)["n_clusters"]
    return out


def run_case(case, cfg, out_dir: Path):
    path = out_dir / f"case_{case}.npz"
    if path.exists():
        return dict(np.load(path, allow_pickle=True))
    t0 = time.perf_counter()
    pde, rho, field = solve_pde(case, cfg)
    t = field["t"]
    ns, seeds, keys = [], [], ("mmd", "w2", "energy", "C", "cond")
    rows = {k: [] for k in keys + ("clusters", "status", "w2_failed")}
    for n in cfg.n_values:
        for s in range(cfg.seeds_small if n <= cfg.n_many_seeds else cfg.seeds_large):
            r = particle_run(case, cfg, pde, rho, t, n, seed=SEED + 1000 * s + n)
            ns.append(n)
            seeds.append(s)
            for k in rows:
                rows[k].append(r[k])
            print(f"[{case}] n = {n} seed {s}: MMD(t_end) {r['mmd'][-1]:.3g}, {r['nfev']} evaluations "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    iid = np.array([[mmd_iid_expectation(pde.grid, rho[k], n) for k in range(len(t))] for n in cfg.n_values])
    data = {"t": t, "n": np.array(ns), "seed": np.array(seeds), "n_values": np.array(cfg.n_values),
            "mmd_iid": iid, "pde_energy": field["energy"], "pde_C": field["C"], "pde_cond": field["cond"],
            "pde_status": field["status"], "pde_message": field["message"]}
    peaks = field["peaks"]
    data["pde_peak_centres"] = np.asarray(peaks["centres"])
    data["pde_peak_masses"] = np.asarray(peaks["masses"])
    for k in rows:
        data[k] = np.array(rows[k])
    data.update(long_runs(case, cfg))
    data["seconds"] = time.perf_counter() - t0
    np.savez(path, **data)
    return data


def run(out_dir: Path, quick: bool = False, cases=None) -> dict:
    cfg = QUICK if quick else FULL
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = {}
    from studies.orthogonal_heads.clusters import clusters_case

    for case in (cases or cfg.cases):
        d = run_case(case, cfg, out_dir)
        clusters_case(case, cfg, out_dir)
        summary[case] = {"pde_status": int(d["pde_status"]), "runs": int(len(d["n"])), "seconds": float(d["seconds"])}
    save_json(out_dir / "data.json", {"config": asdict(cfg), "quick": quick, "summary": summary})
    return summary


if __name__ == "__main__":
    if "--case" in sys.argv:
        i = sys.argv.index("--case")
        case = sys.argv[i + 1]
        del sys.argv[i:i + 2]
        quick = "--quick" in sys.argv
        out = Path(__file__).parent / ("output-quick" if quick else "output")
        run_case(case, QUICK if quick else FULL, out)
    else:
        from studies.orthogonal_heads.report import report

        main(run, report, Path(__file__).parent / "output", __doc__)
