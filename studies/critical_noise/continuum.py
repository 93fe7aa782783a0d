r"""The noisy continuum limit: particles with token noise against the PDE with the same ``nu`` (MODEL.md 3-4).

Hypotheses (MODEL.md section 3, "Token noise on the particle side", and section 4):

* H1 -- the PDE ``d rho/dt + div(rho X[rho]) = nu Lap rho`` is the mean-field limit of the noisy
  particles ``dx_i = v_i dt - 2 nu x_i dt + sqrt(2 nu) P_x dW_i`` started i.i.d. from ``rho_0``;
* H2 -- the distance between the empirical measure ``mu_n(t)`` and ``rho(t)`` decays like
  ``n^{-1/2}`` up to logs (for ``n`` i.i.d. points of a smooth density on ``S^2``,
  ``E W2 ~ sqrt(log n / n)``; ``E MMD^2 = C / n`` exactly, :func:`meanfield.analysis.mmd.mmd_iid_expectation`).

Setup: two zonal mean exp heads ``lambda = (1, 0.5)``, ``beta = 1`` (``nu_c = 0.539``); the start
``0.8 (0.6 vMF(north, kappa 4) + 0.4 vMF(+x, kappa 4)) + 0.2 uniform`` of ``studies/continuum_limit``.
For each ``nu`` in ``(0,) + Settings.limit_nus``, each ``n`` and each seed, one
:func:`meanfield.workflow.paired.paired_run` (the same seed at every ``nu``: the same ``n`` starting tokens, so
``t = 0`` is shared and the noise-vs-noiseless comparison is paired); every PDE at the same ``lmax``
(noiseless: both ``dopri5``; noisy: particles ``geodesic_strang`` with a fixed ``dt``, the PDE
``lawson_dopri5``, the split stepper that takes ``nu Lap`` exactly).
Measured at ``Settings.limit_times``:

* ``W2`` (geodesic) against the *continuous* density, by semi-discrete OT (``w2_method="semidiscrete"``:
  no grid floor, one method at every ``n``; ``"auto"`` would switch from exact-on-nodes to
  semi-discrete within the range of ``n`` and bend the fit); the geodesic bracket width is recorded;
* the spectral ``MMD`` (Sobolev ``s = 2``, :func:`meanfield.analysis.mmd.mmd_particles_field`) and its
  i.i.d. expectation for ``rho(t)``;
* the i.i.d. baseline ``W2`` of ``n`` fresh i.i.d. samples of ``rho(t)`` (``t > 0``): how close a
  perfectly chaotic sample would be.

Checks: the step (the largest ``n`` again with ``dt / limit_dt_refine`` on the *same* Brownian path,
see :func:`paired_paths`, so that the per-seed difference is the discretization effect, not sampling
noise); the method (exact ``W2`` with the density on the PDE's quadrature nodes against semi-discrete,
at the smallest ``n``, one seed).
"""

from __future__ import annotations

import time

import numpy as np

import meanfield as mf
from meanfield.analysis import mmd, stability, transport
from meanfield.core.controllers import FixedGrid
from meanfield.core.options import StepControl
from meanfield.core.sde import brownian_increments, sde_step
from meanfield.workflow import paired
from meanfield.workflow.paired import ParticleSettings, PDESettings, TransportSettings
from studies._common import fit_slope, mean_ci

LAMBDAS, BETA = (1.0, 0.5), 1.0
MUS = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
KAPPA, BLOB_WEIGHTS, FLOOR = 4.0, (0.6, 0.4), 0.2
SEED = 13_000
MMD_S = 2.0                      # Sobolev order of the MMD kernel a_l = (1 + l(l+1))^-s


def initial_density(grid):
    return mf.densities.vmf_mixture_density(grid, MUS, KAPPA, BLOB_WEIGHTS, floor=FLOOR)


def heads():
    return mf.scalar_heads(LAMBDAS, 3, beta=BETA)


def _seed(i_n, k):
    return SEED + 1000 * k + i_n


def _paired(nu, n, seed, times, s, dt):
    return paired.paired_run(heads(), initial_density, n, times[-1], times, seed=seed, nu=nu,
                             particles=ParticleSettings(step=StepControl(dt=dt)),
                             pde=PDESettings(lmax=s.limit_lmax, method="lawson_dopri5" if nu > 0 else "dopri5",
                                             monitor=True),
                             transport=TransportSettings(method="semidiscrete"))


def _measure(res, grid, times, seed, baseline):
    """W2 (from the run), MMD^2, its i.i.d. expectation, the bracket width and the i.i.d. baseline W2 per time."""
    T = len(times)
    out = {k: np.full(T, np.nan) for k in ("mmd2", "mmd2_iid", "bracket", "w2_iid")}
    for j, t in enumerate(times):
        iq = int(np.flatnonzero(np.isclose(res.pde_times, t))[0])
        rho = res.pde_coefficients[iq]
        X = res.particle_states[j]
        n = X.shape[0]
        out["mmd2"][j] = mmd.mmd_particles_field(X, rho, grid, s=MMD_S).cost
        out["mmd2_iid"][j] = mmd.mmd_iid_expectation(grid, rho, n, s=MMD_S)
        lo, hi = res.w2_info[j]["geodesic_bracket"]
        out["bracket"][j] = (hi - lo) / res.w2[j]
        if baseline and t > 0:
            Y = mf.densities.sample_particles(grid, rho, n, seed=np.random.default_rng([seed, 2, j]))
            out["w2_iid"][j] = transport.w2_particles_field(Y, rho, grid).distance
    return out


def _method_check(res, nu, s):
    """Exact W2 with the density on the PDE's quadrature nodes vs the semi-discrete value (last time, one run).

    The node measure's own distance to the density (the grid floor) is not computed: its
    semi-discrete solve on the ~18000 unequal nodes of lmax 63 takes minutes; the relative
    difference of the two distances is reported instead.
    """
    pde = mf.ContinuumPDE(heads(), s.limit_lmax, nu=nu)
    nodes, w = paired.density_measure(pde, res.pde_coefficients[-1])
    ex = transport.w2_particles_density(res.particle_states[-1], nodes, w, method="exact", negative="drop",
                                        grid_floor=False)
    lo, hi = res.w2_info[-1]["geodesic_bracket"]
    semi = float(res.w2[-1])
    return {"nu": nu, "n": int(res.particle_states.shape[1]), "t": float(res.times[-1]), "exact": ex.distance,
            "semidiscrete": semi, "rel_diff": abs(ex.distance - semi) / semi, "bracket": [lo, hi],
            "nodes": int(nodes.shape[0]), "negative_mass": ex.negative_mass}


def bridge(dW, refine, h, rng):
    """Brownian-bridge refinement: ``dW`` (k, ...) increments over ``h`` each, split into ``refine`` parts.

    Returns shape ``(k, refine, ...)``: ``Z_j - mean_j Z + dW / refine`` with ``Z_j ~ N(0, h / refine)``
    i.i.d.; the parts sum to ``dW`` and, given ``dW``, have the law of the sub-increments of the
    Brownian motion (the conditional law of i.i.d. Gaussians given their sum).
    """
    Z = np.sqrt(h / refine) * rng.standard_normal((dW.shape[0], refine) + dW.shape[1:])
    return Z - Z.mean(axis=1, keepdims=True) + dW[:, None] / refine


def paired_paths(system, X0, times, dt, seed, refine, fine_seed, method="geodesic_strang"):
    """End states of the noisy particles at ``dt`` and at ``dt / refine`` driven by one Brownian path.

    The coarse path is the one :func:`meanfield.solve_particles` takes with ``seed`` (a Generator or an
    integer): the driver draws each step's two half-step increments with
    :func:`meanfield.core.sde.brownian_increments` from that stream on the grid of
    :class:`meanfield.core.controllers.FixedGrid`, and :func:`meanfield.core.sde.sde_step` is the step
    rule; the replay therefore equals ``solve_particles(system, X0, times[-1], step=StepControl(dt=dt),
    seed=seed)`` bit for bit (checked by the study and its test).  The fine path refines it by the
    Brownian bridge: each coarse half-step increment ``dW`` over ``h`` is split into ``refine``
    increments ``Z_j - mean(Z) + dW / refine`` with ``Z_j ~ N(0, h / refine)`` i.i.d. (from the stream
    ``fine_seed``, an integer or a Generator): they sum to ``dW`` exactly and, given it, have the law of the
    path's sub-increments, so the fine run is a run of the same Brownian motion at the finer step.

    Returns ``(X_coarse, X_fine, steps)``: the states at ``times[-1]`` and the number of coarse steps.
    """
    nu, sphere = system.nu, system.geometry
    rng_c, rng_f = np.random.default_rng(seed), np.random.default_rng(fine_seed)   # a Generator passes through
    t_end = float(times[-1])
    targets = [float(t) for t in times if t > 0]
    grid = FixedGrid(0.0, t_end, dt)
    t, Xc, Xf, i, steps = 0.0, np.array(X0, float), np.array(X0, float), 0, 0
    while i < len(targets):
        t_new, land = grid.propose(t, targets[i])
        h = t_new - t
        dW = brownian_increments(rng_c, Xc.shape, h)                  # the driver's draw for this step
        Xc = sde_step(method, system.rhs, t, Xc, h, dW, nu, sphere)
        fine = bridge(dW, refine, 0.5 * h, rng_f).reshape((2 * refine,) + Xc.shape)
        for j in range(refine):
            Xf = sde_step(method, system.rhs, t + j * h / refine, Xf, h / refine, fine[2 * j:2 * j + 2], nu, sphere)
        grid.commit()
        t, steps = t_new, steps + 1
        i += bool(land)
    return Xc, Xf, steps


def _step_check(nu, n, seeds, last, s, grid):
    """The step check at one ``nu``: per seed, W2 and MMD^2 at ``dt`` and ``dt / refine`` on one path.

    ``seeds`` are the main runs' sampling seeds, ``last[k]`` their ``(X0, X(t), rho(t), w2)`` at the
    last time; the coarse replay is compared with the main run's state (``replay_max_diff``).
    """
    pde = mf.ContinuumPDE(heads(), s.limit_lmax, nu=nu)
    system = mf.ParticleSystem(pde.heads, summation=ParticleSettings().sums, kernel_tol=ParticleSettings().spectral_tol,
                               nu=nu)
    tg = paired.resolve_transport_grid(pde, None)
    ts = TransportSettings(method="semidiscrete")
    times = np.asarray(s.limit_times, float)
    out = {k: [] for k in ("w2", "w2_fine", "mmd2", "mmd2_fine", "mmd2_iid", "replay_max_diff", "replay_w2_diff")}
    for seed, (X0, X_main, rho, w2_main) in zip(seeds, last):
        Xc, Xf, _ = paired_paths(system, X0, times, s.limit_dt, np.random.default_rng([seed, 1]), s.limit_dt_refine,
                                 np.random.default_rng([seed, 3]))
        nodes, weights = paired.density_measure(pde, rho, tg)
        for key, X in (("", Xc), ("_fine", Xf)):
            w = transport.w2_particles_density(X, nodes, weights, method=ts.method, metric=ts.metric,
                                               negative=ts.negative, seed=seed).distance
            out["w2" + key].append(w)
            out["mmd2" + key].append(mmd.mmd_particles_field(X, rho, grid, s=MMD_S).cost)
        out["mmd2_iid"].append(mmd.mmd_iid_expectation(grid, rho, n, s=MMD_S))
        out["replay_max_diff"].append(float(np.max(np.abs(Xc - X_main))))
        out["replay_w2_diff"].append(abs(out["w2"][-1] - w2_main))
    w2c, w2f = np.array(out["w2"]), np.array(out["w2_fine"])
    ac, af = np.array(out["mmd2"]) / out["mmd2_iid"], np.array(out["mmd2_fine"]) / out["mmd2_iid"]
    res = {"nu": nu, "n": n, "t": float(times[-1]), "dt": s.limit_dt, "dt_fine": s.limit_dt / s.limit_dt_refine,
           "seeds": len(seeds), "paired": "one Brownian path per seed (the fine increments sum to the coarse ones)",
           "w2": list(mean_ci(w2c)), "w2_fine": list(mean_ci(w2f)), "w2_diff": list(mean_ci(w2c - w2f)),
           "mmd2_over_iid": list(mean_ci(ac)), "mmd2_over_iid_fine": list(mean_ci(af)),
           "mmd2_over_iid_diff": list(mean_ci(ac - af)),
           "replay_max_diff": max(out["replay_max_diff"]), "replay_max_w2_diff": max(out["replay_w2_diff"])}
    res.update({f"{k}_samples": v for k, v in out.items()})
    return {k: (float(v) if isinstance(v, np.floating) else v) for k, v in res.items()}


def _fits(ns, w2, mmd2, nus, times):
    """Slopes (with standard errors) of log mean W2 and log rms MMD against log n, per nu and time."""
    fits = {}
    for a, nu in enumerate(nus):
        for j, t in enumerate(times):
            fw = fit_slope(ns, w2[a, :, :, j].mean(axis=-1), log_x=True, log_y=True)
            fl = fit_slope(ns / np.log(ns), w2[a, :, :, j].mean(axis=-1), log_x=True, log_y=True)
            fm = fit_slope(ns, np.sqrt(mmd2[a, :, :, j].mean(axis=-1)), log_x=True, log_y=True)
            fits[f"nu={nu:g},t={t:g}"] = {"nu": nu, "t": t, "w2_slope": fw.slope, "w2_stderr": fw.stderr,
                                          "w2_C": float(np.exp(fw.intercept)), "w2_slope_n_over_log_n": fl.slope,
                                          "w2_stderr_n_over_log_n": fl.stderr,
                                          "mmd_slope": fm.slope, "mmd_stderr": fm.stderr}
    return fits


def run_limit(s, progress=print):
    """Run the whole part; returns ``(arrays, summary)`` (arrays for ``data.npz``, summary for ``data.json``)."""
    tic, cpu = time.perf_counter(), time.process_time()
    nus = (0.0,) + tuple(s.limit_nus)
    ns, times, K = np.asarray(s.limit_n), np.asarray(s.limit_times, float), s.limit_seeds
    shape = (len(nus), len(ns), K, len(times))
    A = {k: np.full(shape, np.nan) for k in ("w2", "mmd2", "mmd2_iid", "bracket", "w2_iid")}
    pde_info, method_checks = {}, []
    last = {a: [] for a in range(len(nus))}
    grid = mf.ContinuumPDE(heads(), s.limit_lmax).grid
    for a, nu in enumerate(nus):
        tails, negs = [], []
        for i, n in enumerate(ns):
            t0 = time.perf_counter()
            for k in range(K):
                res = _paired(nu, int(n), _seed(i, k), times, s, s.limit_dt)
                if res.pde_status != 0 or res.particle_status != 0:
                    raise RuntimeError(f"nu = {nu}, n = {n}: PDE {res.pde_message!r}, "
                                       f"particles {res.particle_message!r}")
                A["w2"][a, i, k] = res.w2
                for key, v in _measure(res, grid, times, _seed(i, k), True).items():
                    A[key][a, i, k] = v
                tails.append(float(np.max(res.pde["spectral_tail"])))
                negs.append(float(np.max(res.pde["negative_mass"])))
                if i == 0 and k == 0:
                    method_checks.append(_method_check(res, nu, s))
                if i == len(ns) - 1 and nu > 0:        # kept for the step check
                    last[a].append((res.particle_states[0], res.particle_states[-1], res.pde_coefficients[-1],
                                    float(res.w2[-1])))
            progress(f"  limit: nu = {nu:g}, n = {n}: W2 {np.round(A['w2'][a, i].mean(axis=0), 4)}, "
                     f"MMD^2 / iid {np.round(A['mmd2'][a, i].mean(axis=0) / A['mmd2_iid'][a, i, 0], 2)} "
                     f"({time.perf_counter() - t0:.1f} s)")
        pde_info[f"{nu:g}"] = {"max_spectral_tail": max(tails), "max_negative_mass": max(negs)}
    # the step check: the largest n again with dt / limit_dt_refine on the same Brownian paths, last time only
    n_big, i_big = int(ns[-1]), len(ns) - 1
    dt_check = {}
    for a, nu in enumerate(nus):
        if nu == 0:
            continue
        seeds = [_seed(i_big, k) for k in range(K)]
        v = _step_check(nu, n_big, seeds, last[a], s, grid)
        dt_check[f"{nu:g}"] = v
        progress(f"  dt check nu = {nu:g}: MMD^2 / iid {v['mmd2_over_iid'][0]:.2f} (dt {s.limit_dt}) vs "
                 f"{v['mmd2_over_iid_fine'][0]:.2f}, paired difference {v['mmd2_over_iid_diff'][0]:+.2f} +- "
                 f"{v['mmd2_over_iid_diff'][1]:.2f}; replay max diff {v['replay_max_diff']:.1e}")
    fits = _fits(ns, A["w2"], A["mmd2"], nus, times)
    # paired comparison with the noiseless runs: per-seed ratio W2(nu) / W2(0), same n, t, start
    ratio = A["w2"][1:] / A["w2"][:1]
    rm, rh = mean_ci(ratio, axis=2)
    summary = {"nus": nus, "n_values": ns, "times": times, "seeds": K, "lmax": s.limit_lmax, "dt": s.limit_dt,
               "nu_c": float(stability.critical_noise(list(LAMBDAS), BETA)),
               "heads": [h.to_dict() for h in heads()], "fits": fits, "pde": pde_info, "method_checks": method_checks,
               "dt_check": dt_check, "w2_ratio_to_noiseless": {"mean": rm, "ci95": rh},
               "initial_density": {"mus": MUS, "kappa": KAPPA, "weights": BLOB_WEIGHTS, "floor": FLOOR},
               "max_bracket_rel_width": float(np.nanmax(A["bracket"])),
               "t0_identical_across_nu": bool(np.all(A["w2"][:, :, :, 0] == A["w2"][:1, :, :, 0])),
               "wall_seconds": time.perf_counter() - tic, "cpu_seconds": time.process_time() - cpu}
    arrays = {f"limit_{k}": v for k, v in A.items()}
    arrays.update(limit_nus=np.asarray(nus), limit_n=ns, limit_times=times)
    return arrays, summary
