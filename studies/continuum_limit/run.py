"""Continuum limit: particles versus the mean-field PDE on S^2, compared by W2 (MODEL.md section 4).

Setup: two zonal mean-normalized exp heads ``lambda = (1.0, 0.5)``, ``beta = 1``; initial density
``0.8 * (0.6 vMF(north, kappa 4) + 0.4 vMF(+x, kappa 4)) + 0.2 uniform``.  Four parts:

A. W2 against n.  For each ``n`` (full: 256 ... 16384) one :func:`meanfield.workflow.paired.paired_run` with
   the PDE at lmax 63; ``W2(mu_n(t), rho(t))`` (geodesic) at t = 0, 0.3, 0.6, with the density on a
   64 x 128 Gauss-Legendre transport grid (8192 nodes).  Exact ``emd2`` for ``n <= 4096`` (n x 8192
   cost matrix); the spherical *sliced* distance (a different discrepancy; full: 50 projections,
   quick: 10) for every ``n``.  Fitted slopes of ``log W2`` against ``log n`` and ``log(n / log n)``.
   A floor check: W2 at t = 0, n = 1024, against transport grids of 2048, 4608 and 8192 nodes.
B. PDE self-convergence: lmax 31, 47, 63 against lmax 79 (L2 norm of the difference; W2 between the
   two densities on a shared 40 x 80 grid).
C. Energy and relative attention entropy (``H - log n``) of particles and PDE, overlaid.
D. Loss of resolution: ``beta = 2``; the PDE at lmax 31 and 63 stops (resolution monitor,
   spectral tail > 1e-3) while two independent particle runs (n = 1024) continue to t = 1.2; their
   mutual W2, energy, entropy and cluster count after the stop.

Particles use spectral (Funk-Hecke) sums (exact to 1e-12 for these zonal heads) with dopri5.
Cost on this 2-core machine: quick ~10-30 s; full ~250 s of CPU (5 min wall clock; 10.5 min when
the machine is shared).  Run from the repo root::

    python -m studies.continuum_limit.run [--quick]
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield.analysis import transport
from meanfield.analysis.clustering import clustering
from meanfield.core.options import SaveAt
from meanfield.workflow import paired
from meanfield.workflow.paired import PDESettings, TransportSettings
from studies._common import fit_slope, main, save_json

LAMBDAS = (1.0, 0.5)
MUS = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
KAPPA, BLOB_WEIGHTS, FLOOR = 4.0, (0.6, 0.4), 0.2
SEED = 20260



@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode (saved as ``config`` in data.json)."""

    beta: float
    n_values: tuple       # part A: particle numbers
    n_exact_max: int      # exact W2 up to this n, sliced beyond
    lmax: int             # PDE of parts A and C
    t_eval: tuple
    w2_times: tuple       # times (among t_eval) where W2 is computed
    tg_nlat: int          # transport grid of part A: tg_nlat x 2 tg_nlat Gauss-Legendre nodes
    floor_n: int | None   # floor check (n; None: skipped) ...
    floor_nlat: tuple     # ... against transport grids of these nlat
    conv_lmax: tuple      # part B: lmax values ...
    conv_ref: int         # ... against this reference lmax ...
    conv_nlat: int        # ... W2 on a conv_nlat x 2 conv_nlat grid
    res_beta: float       # part D: beta, PDE lmax values, particle number, times, transport grid
    res_lmax: tuple
    res_n: int
    res_t: tuple
    res_nlat: int
    n_proj: int           # projections of the sliced distance


FULL = Settings(beta=1.0, n_values=(256, 512, 1024, 2048, 4096, 8192, 16384), n_exact_max=4096, lmax=63,
                t_eval=(0.0, 0.3, 0.6, 0.9, 1.2), w2_times=(0.0, 0.3, 0.6), tg_nlat=64,
                floor_n=1024, floor_nlat=(32, 48, 64),
                conv_lmax=(31, 47, 63), conv_ref=79, conv_nlat=40,
                res_beta=2.0, res_lmax=(31, 63), res_n=1024, res_t=tuple(np.linspace(0, 1.2, 13).tolist()),
                res_nlat=32, n_proj=50)
QUICK = Settings(beta=1.0, n_values=(64, 256, 1024), n_exact_max=1024, lmax=31,
                 t_eval=(0.0, 0.25, 0.5, 0.75), w2_times=(0.0, 0.25, 0.5), tg_nlat=32,
                 floor_n=None, floor_nlat=(),
                 conv_lmax=(15, 23), conv_ref=31, conv_nlat=16,
                 res_beta=2.0, res_lmax=(23,), res_n=256, res_t=tuple(np.linspace(0, 0.6, 7).tolist()),
                 res_nlat=16, n_proj=10)


def initial_density(grid):
    return mf.densities.vmf_mixture_density(grid, MUS, KAPPA, BLOB_WEIGHTS, floor=FLOOR)


def _slope(x, y):
    """Least-squares slope of log y against log x; points with a non-finite or non-positive ``y``
    (W2 not computed at that n) are left out; ``nan`` if fewer than 2 remain."""
    return fit_slope(x, y, log_x=True, log_y=True, drop_invalid=True).slope


def part_a(cfg, heads):
    """W2 against n (exact and sliced), particle and PDE observables of each paired run."""
    ns, t = cfg.n_values, np.asarray(cfg.t_eval)
    tg = paired.transport_grid(cfg.tg_nlat)
    T, H = len(t), len(heads)
    out = {k: np.full((len(ns), T), np.nan) for k in ("w2_exact", "w2_sliced", "p_energy", "p_order")}
    out["p_entropy"] = np.full((len(ns), T, H), np.nan)
    out["wall_w2"] = np.zeros(len(ns))
    wanted = np.isin(t, cfg.w2_times)
    pde_rec = None
    for i, n in enumerate(ns):
        exact = n <= cfg.n_exact_max
        tic = time.perf_counter()
        res = paired.paired_run(heads, initial_density, n, t[-1], t, seed=SEED + i, pde=PDESettings(lmax=cfg.lmax),
                                transport=TransportSettings(grid=tg, method="exact" if exact else "sliced",
                                                            options=None if exact else {"n_projections": cfg.n_proj,
                                                                                        "seed": 0}))
        out["w2_exact" if exact else "w2_sliced"][i] = np.where(wanted, res.w2, np.nan)
        if exact:   # the sliced discrepancy for the same states, for a series over every n
            for k in np.nonzero(wanted & np.isfinite(res.w2))[0]:
                iq = int(np.nonzero(res.pde_times == t[k])[0][0])
                nodes, w = paired.density_measure(mf.ContinuumPDE(heads, cfg.lmax), res.pde_coefficients[iq], tg)
                out["w2_sliced"][i, k] = transport.w2_particles_density(
                    res.particle_states[k], nodes, w, negative="drop", method="sliced", n_projections=cfg.n_proj,
                    seed=0).distance
        out["wall_w2"][i] = time.perf_counter() - tic
        out["p_energy"][i] = res.particles["energy"]
        out["p_entropy"][i] = res.particles["relative_entropy"]
        out["p_order"][i] = res.particles["order_parameter"]
        print(f"  A: n = {n}: W2 {np.round(res.w2, 4)} ({res.w2_method}), {out['wall_w2'][i]:.1f} s", flush=True)
        pde_rec = res
    out["pde_times"] = pde_rec.pde_times
    out["pde_energy"] = pde_rec.pde["energy"]
    out["pde_entropy"] = pde_rec.pde["relative_entropy"]
    out["pde_order"] = pde_rec.pde["order_parameter"]
    meta = {"pde_message": pde_rec.pde_message, "pde_t_stop": pde_rec.pde_t_stop, "pde_status": pde_rec.pde_status,
            "spectral_lmax": pde_rec.config["spectral_lmax"], "transport_nodes": tg.nlat * tg.nlon,
            "w2_negative_mass_max": float(np.nanmax(pde_rec.w2_negative_mass))}
    return out, meta


def part_floor(cfg, heads):
    """W2 at t = 0 of one sample against the density on transport grids of growing size."""
    if not cfg.floor_n:
        return {"floor_nodes": np.zeros(0), "floor_w2": np.zeros(0)}
    pde = mf.ContinuumPDE(heads, cfg.lmax)
    rho0 = initial_density(pde.grid)
    X = mf.densities.sample_particles(pde.grid, rho0, cfg.floor_n, seed=SEED + 99)
    nodes, vals = [], []
    for nlat in cfg.floor_nlat:
        g = paired.transport_grid(nlat)
        Y, w = paired.density_measure(pde, rho0, g)
        vals.append(transport.w2_particles_density(X, Y, w, method="exact").distance)
        nodes.append(g.nlat * g.nlon)
    return {"floor_nodes": np.array(nodes), "floor_w2": np.array(vals)}


def part_b(cfg, heads):
    """PDE self-convergence in lmax against a reference lmax."""
    t = np.asarray(cfg.t_eval)
    tg = paired.transport_grid(cfg.conv_nlat)
    runs = {}
    for L in cfg.conv_lmax + (cfg.conv_ref,):
        pde = mf.ContinuumPDE(heads, L)
        tr = mf.solve_continuum(pde, initial_density(pde.grid), t[-1], save=SaveAt(t_eval=t), progress=False)
        runs[L] = (pde, tr)
    pref, tref = runs[cfg.conv_ref]
    g = pref.grid
    l2 = np.full((len(cfg.conv_lmax), len(t)), np.nan)
    w2 = np.full_like(l2, np.nan)
    stop = {}
    for i, L in enumerate(cfg.conv_lmax):
        pde, tr = runs[L]
        stop[L] = tr.t_final if tr.status != 0 else None
        for k, s in enumerate(t):
            ia, ib = np.nonzero(tr.t == s)[0], np.nonzero(tref.t == s)[0]
            if not (ia.size and ib.size):
                continue
            ra, rb = pde.coefficients(tr.y[ia[0]]), pref.coefficients(tref.y[ib[0]])
            pad = np.zeros(g.nalm, complex)       # rho_L as a degree-lmax_ref field
            pad[g.mstart[pde.grid.m_index].astype(int) + pde.grid.l_index] = ra
            l2[i, k] = np.sqrt(g.inner(pad - rb, pad - rb))
            if s > 0 and s in cfg.w2_times:
                w2[i, k] = paired.w2_densities(pde, ra, pref, rb, tg, method="exact").distance
    ref_stop = tref.t_final if tref.status != 0 else None
    return {"conv_l2": l2, "conv_w2": w2}, {"stop": {str(k): v for k, v in stop.items()}, "ref_stop": ref_stop}


def part_d(cfg):
    """Resolution loss at larger beta: PDE stops, particles go on."""
    heads = mf.scalar_heads(LAMBDAS, 3, beta=cfg.res_beta)
    t = np.asarray(cfg.res_t)
    tg = paired.transport_grid(cfg.res_nlat)
    out, meta, states = {}, {}, []
    for j, L in enumerate(cfg.res_lmax):
        res = paired.paired_run(heads, initial_density, cfg.res_n, t[-1], t, seed=SEED + 500 + j,
                                pde=PDESettings(lmax=L), transport=TransportSettings(grid=tg, method="exact"))
        out[f"res_w2_l{L}"] = res.w2
        out[f"res_pde_times_l{L}"] = res.pde_times
        out[f"res_pde_energy_l{L}"] = res.pde["energy"]
        out[f"res_pde_entropy_l{L}"] = res.pde["relative_entropy"]
        out[f"res_pde_tail_l{L}"] = res.pde["spectral_tail"]
        out[f"res_p_energy_{j}"] = res.particles["energy"]
        out[f"res_p_entropy_{j}"] = res.particles["relative_entropy"]
        out[f"res_p_clusters_{j}"] = np.array([clustering(X)["n_clusters"] for X in res.particle_states])
        meta[str(L)] = {"t_stop": res.pde_t_stop, "message": res.pde_message, "status": res.pde_status}
        states.append(res.particle_states)
    if len(states) < 2:   # quick mode: a second independent particle run at the same size
        res = paired.paired_run(heads, initial_density, cfg.res_n, t[-1], t, seed=SEED + 600,
                                pde=PDESettings(lmax=cfg.res_lmax[0]),
                                transport=TransportSettings(grid=tg, method="exact"))
        states.append(res.particle_states)
    out["res_pp_w2"] = np.array([transport.w2_distance(a, b, method="exact").distance for a, b in zip(*states[:2])])
    return out, meta


def run(out_dir: Path, quick: bool = False) -> dict:
    cfg = QUICK if quick else FULL
    heads = mf.scalar_heads(LAMBDAS, 3, beta=cfg.beta)
    tic = time.perf_counter()
    cpu = time.process_time()
    a, meta_a = part_a(cfg, heads)
    floor = part_floor(cfg, heads)
    b, meta_b = part_b(cfg, heads)
    d, meta_d = part_d(cfg)
    t = np.asarray(cfg.t_eval)
    ns = np.asarray(cfg.n_values)
    fits = {}
    for k, s in enumerate(t):
        if s not in cfg.w2_times:
            continue
        ex = a["w2_exact"][:, k]
        fits[f"t={s:g}"] = {
            "exact_slope": _slope(ns, ex),
            "exact_slope_vs_n_over_log_n": _slope(ns / np.log(ns), ex),
            "sliced_slope": _slope(ns, a["w2_sliced"][:, k]),
            "exact_n_range": [int(ns[np.isfinite(ex)].min()), int(ns[np.isfinite(ex)].max())]
            if np.isfinite(ex).any() else None}
    dE0 = np.abs(a["p_energy"][:, 0] - a["pde_energy"][0])
    fits["energy_error_t0_slope"] = _slope(ns, dE0)
    summary = {
        "quick": quick, "config": asdict(cfg), "heads": [h.to_dict() for h in heads],
        "initial_density": {"mus": MUS.tolist(), "kappa": KAPPA, "weights": BLOB_WEIGHTS, "floor": FLOOR},
        "fits": fits, "pde_main": meta_a, "self_convergence": {**meta_b, "max_l2": float(np.nanmax(b["conv_l2"])),
                                                                  "max_w2": float(np.nanmax(b["conv_w2"]))},
        "resolution_case": meta_d, "wall_seconds": time.perf_counter() - tic, "cpu_seconds": time.process_time() - cpu,
        "sliced_projections": cfg.n_proj}
    np.savez_compressed(Path(out_dir) / "data.npz", n_values=ns, t_eval=t, w2_times=np.asarray(cfg.w2_times),
                        conv_lmax=np.asarray(cfg.conv_lmax), res_t=np.asarray(cfg.res_t),
                        res_lmax=np.asarray(cfg.res_lmax), **a, **floor, **b, **d)
    save_json(Path(out_dir) / "data.json", summary)
    return {"fits": fits, "pde_t_stop": meta_a["pde_t_stop"], "resolution_case": meta_d,
            "wall_seconds": summary["wall_seconds"]}


if __name__ == "__main__":
    from studies.continuum_limit.report import report

    main(run, report, Path(__file__).parent / "output", __doc__)
