"""Metastability of clusters: the energy staircase, merge times against beta, the number of metastable
clusters against the most unstable mode, and the closest pair at large beta.

Model: tokens on S^{d-1} under one mean-normalized exp head ``M = V = I`` (the unnormalized self-attention
model "USA" of Geshkovski-Koubbi-Polyanskiy-Rigollet, arXiv 2410.06833, whose energy
``E = (1/(2 beta n^2)) sum_ij exp(beta <x_i, x_j>)`` it climbs, dE/dt >= 0).  Times are reported in the
rescaled unit ``tau = e^beta t`` (the speed of a token inside a tight cluster of mass m is O(m) there) and
energies as ``e^-beta E``.  Clusters are tracked with :func:`meanfield.analysis.cluster_tracking.
track_particle_clusters` (components of ``<x_i, x_j> >= cos 0.05`` on S^2, ``cos 0.005`` on S^1, clusters of mass >= ``min_mass``, identities
by token membership); a run has *formed* at the first frame where at most 10 % of the mass is unclustered.

A. Staircase (S^2, i.i.d. uniform start, ``stair_betas`` x ``seeds``): the energy against log tau; the
   fraction of the energy gained after formation that is gained within a window of ``window_dec`` decades
   around merge events (vs the fraction of log-time those windows cover), and the energy jump of each *clean*
   isolated pair merge (across its window nothing else changes in the tracked mass: the unclustered mass and
   ``sum_k m_k^2`` change only by the merge, ``2 m_a m_b``) against the point-cluster value ``m_a m_b / beta``
   (``(m_a + m_b)^2 - m_a^2 - m_b^2`` over ``2 beta``).
   The same runs give the formation time, the first merge after formation against beta (outside the
   theorem's well-separated hypothesis), the cluster count at formation against ``l*`` and the count of
   maxima of a random degree-``l*`` field (``l*(l*+1)/(2 sqrt 3)``), which merge pair came first (the
   closest?) and the speed of the closest pair against the others on the plateau.
B. First merge of three well-separated caps (the theorem's hypothesis: k = 3 caps, closest centres at
   ``cap_angle``, fixed as beta grows; ``cap_n`` tokens per cap, vMF ``cap_kappa``) for ``cap_betas`` x
   ``seeds``; one cap draw per seed, shared by every beta, so the seed is the independent unit.  Per seed,
   log(first merge time) is fitted against beta (exponential), against log beta (power law) and against both
   (an exponential rate with a free power-law prefactor); the statistics of the verdict are the per-seed
   ``log(RSS_power / RSS_exp)`` and the per-seed rate of the joint fit, with Student-t intervals over the seeds
   (seeds - 1 dof).  Compared with the same fits for the three point clusters (weighted tokens at the centres:
   the reduced prediction) and with the large-beta rate ``1 - cos(cap_angle)``.  At tau = 10 (three caps intact) the
   speed of the closest pair over the third cap's, against the same ratio of three point clusters at the measured
   centres and masses (the caps drift from the initial geometry by then, more at smaller beta).
C. Circle (d = 2, i.i.d. uniform start, ``circle_betas`` x ``seeds``): cluster count at formation against
   ``k* = argmax_k sigma_k`` (Bruno-Pasqualotto-Agazzi, arXiv 2410.23228; sigma_k of
   :func:`meanfield.analysis.stability.growth_rate` with d = 2).
E. Circle PDE (the mean-field limit, BPA's own hypotheses): ``CirclePDE`` (``pde_kmax`` modes) from
   ``1 + eps sum_k a_k e^{ik theta}`` (complex Gaussian ``a_k`` in the modes ``1..min(K/4, 4 k* + 8)``, one draw
   per (beta, seed), shared by every eps), run to ``(ln(1/eps) + 30) / sigma_max`` or until the resolution
   monitor stops it; density peaks (:func:`meanfield.analysis.cluster_tracking.track_density_peaks`, above the
   uniform level) counted at the first frame where the density reaches 3 times uniform, against ``k*``.  The
   claim is the limit eps -> 0: besides the fixed ``pde_eps`` (1e-3 .. 1e-9), every beta runs at the eps where
   the linear-phase selectivity ``eps^-(1 - sigma_2 / sigma_1)`` equals each level of ``pde_selectivity``
   (down to 1e-100 at beta = 10).  Such eps are carried exactly: the perturbation lives in its own Fourier
   coefficients, the mean mode's tendency is exactly 0 and every product is formed from O(eps) values, so
   round-off is relative to eps, not to the uniform level; the integrator's atol is rescaled to 1e-8 of the
   perturbation in segments of the linear phase (until it reaches 1e-6), and the linear phase is checked
   against ``c_k(0) e^{sigma_k t}`` at k* and the runner-up.
D. Closest pair at large beta (a consistency check of the velocity formula, no randomness): four point
   clusters, the closest pair at ``pair_angles[0]``, the other pair at ``pair_angles[1]``; the speed ratio
   against beta vs ``exp(beta (cos a_0 - cos a_1)) sin a_0 / sin a_1``.

Seeds: every random part was drawn afresh after the referee of issue 33 (offsets ``SEED_*`` below; the seeds
before were 1000 beta + s, 5000 beta + s, 7000 beta + s and 9000 beta + s, all below 400000).

Cost (2 shared cores, nice, one BLAS thread): quick ~1 min, full ~5-8 min (see ``wall_s`` in data.json).
Run from the repo root::

    python -m studies.metastability.run [--quick]
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import meanfield as mf
from meanfield.analysis import stability
from meanfield.analysis.cluster_tracking import track_particle_clusters
from meanfield.core.options import SaveAt, StepControl
from studies._common import fit_slope, main, mean_ci95, save_json, wilson95

THRESHOLD = float(np.cos(0.05))     # S^2: link tokens closer than 0.05 rad (2.9 degrees): uniform tokens (n = 200,
                                    # mean spacing ~0.25 rad) rarely chain, formed clusters (spread decaying
                                    # exponentially) are single components
THRESHOLD_CIRCLE = float(np.cos(0.005))   # S^1: 0.005 rad, 1/6 of the mean spacing 2 pi / 200 of uniform tokens
FORMED = 0.10             # formed: at most this much mass outside clusters
RTOL, ATOL = 1e-6, 1e-9
# fresh seeds (issue 33 referee round): never used before by this study (the earlier ones are all below 400000)
SEED_STAIR, SEED_CAPS, SEED_CIRCLE, SEED_PDE = 1_500_000, 2_500_000, 3_000_000, 4_000_000
# (the staircase ran first on 1_000_000 + 1000 beta + s; its jump test failed there on merges that absorbed untracked
# mass inside their window and was then restricted to clean pair merges, so it now runs on 1_500_000 + 1000 beta + s)
# (the caps were first drawn from 2_000_000 + s; their speed test was then changed after a quick run had been
# seen, so every cap run now uses 2_500_000 + s)
PDE_SWITCH = 1e-6         # E: the linear phase runs in segments until the largest perturbation mode reaches this


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    seeds: int                # independent draws per beta (every part)
    stair_betas: tuple        # A: S^2 uniform starts ...
    stair_n: int
    stair_tau: float          # ... to tau = stair_tau, frames log-spaced from tau = 0.1
    frames: int
    min_mass: float           # clusters: at least this mass
    window_dec: float         # A: half-width (decades of tau) of the window around a merge
    cap_betas: tuple          # B
    cap_n: int
    cap_angle: float          # degrees between the two closest caps
    cap_kappa: float
    circle_betas: tuple       # C
    circle_n: int
    pair_angles: tuple        # D (radians)
    pair_betas: tuple
    pde_betas: tuple = ()     # E (empty: circle_betas)
    pde_kmax: int = 256
    pde_eps: tuple = (1e-3, 1e-6, 1e-9)   # fixed perturbation sizes: the claim is the limit eps -> 0
    pde_sel_verdict: float = 10.0   # the verdict's eps: min(min pde_eps, S^(-1/gap)), selectivity >= S at every beta
    pde_sel_former: float = 2.0     # the former hypothesis: the eps where eps^(-gap) equals S exactly (<= 1e-2 only)


QUICK = Settings(seeds=10, stair_betas=(8.0, 16.0), stair_n=100, stair_tau=1e3, frames=200, min_mass=0.03, window_dec=0.15,
                 cap_betas=(6.0, 12.0, 18.0, 22.0), cap_n=6, cap_angle=50.0, cap_kappa=1e4, circle_betas=(5.0,),
                 circle_n=100, pair_angles=(0.5, 0.9), pair_betas=(5.0, 10.0, 20.0), pde_betas=(5.0, 10.0),
                 pde_eps=(1e-3, 1e-9))
FULL = Settings(seeds=10, stair_betas=(4.0, 8.0, 16.0, 32.0), stair_n=200, stair_tau=3e3, frames=400, min_mass=0.02,
                window_dec=0.15, cap_betas=(6.0, 9.0, 12.0, 15.0, 18.0, 21.0, 24.0), cap_n=15, cap_angle=50.0,
                cap_kappa=1e4, circle_betas=(2.0, 5.0, 10.0, 20.0, 40.0), circle_n=200, pair_angles=(0.5, 0.9),
                pair_betas=(5.0, 10.0, 20.0, 40.0, 80.0))


def system(beta, d):
    return mf.ParticleSystem(mf.scalar_heads([1.0], d, beta=beta), summation="direct")


def evolve(beta, X0, tau, w=None, rtol=RTOL, atol=ATOL):
    """Tokens at the rescaled times ``tau`` (t = e^-beta tau), shape (T, n, d)."""
    sysm = system(beta, X0.shape[1])
    tr = mf.solve_particles(sysm, X0, tau[-1] * np.exp(-beta), w=w, step=StepControl(rtol=rtol, atol=atol),
                            save=SaveAt(t_eval=tau * np.exp(-beta), observe=False), method="dopri5", progress=False)
    if tr.status != 0:
        raise RuntimeError(f"particle run failed at beta = {beta}: status {tr.status}")
    return sysm, tr.y


def formed_frame(track):
    f = np.flatnonzero(track.unclustered_mass <= FORMED)
    return int(f[0]) if f.size else None


def most_unstable(beta, d):
    ls = np.arange(1, int(np.ceil(np.e * beta)) + 21)
    return int(ls[np.argmax(stability.growth_rate(ls, [1.0], beta, d=d))])


# ----------------------------------------------------------------------------- A: staircase from uniform
def _cluster_speeds(beta, X, track, frame):
    """Speed of each cluster alive at ``frame`` driven by the *other* tokens, and the centres.

    The mean-normalized velocity is linear in the measure, ``v_i = P_{x_i} (1/n) sum_j e^{beta <x_i, x_j>} x_j``,
    so it splits exactly by source; a cluster's own tokens only contract it (their mean pull is O(width^2)), the
    others move it: the speed is the norm of the mean over its tokens of the pull of the tokens outside it, in
    rescaled units (times e^-beta)."""
    ids = track.alive(frame)
    lab = track.labels[frame]
    n = X.shape[0]
    speeds = []
    for k in ids:
        A, B = X[lab == k], X[lab != k]
        F = np.exp(beta * (A @ B.T - 1.0)) @ B / n
        F -= np.einsum("nd,nd->n", F, A)[:, None] * A
        speeds.append(np.linalg.norm(F.mean(axis=0)))
    return ids, np.array(speeds), track.centre[frame, ids]


def point_speeds(beta, C, m):
    """:func:`_cluster_speeds` for point clusters at centres ``C`` with masses ``m``: the pull of the others."""
    C, m = np.asarray(C, float), np.asarray(m, float)
    out = []
    for k in range(len(C)):
        o = np.arange(len(C)) != k
        F = (m[o] * np.exp(beta * (C[o] @ C[k] - 1.0))) @ C[o]
        out.append(np.linalg.norm(F - (F @ C[k]) * C[k]))
    return np.array(out)


def staircase_run(beta, seed, s: Settings):
    X0 = mf.initial.uniform_sphere(s.stair_n, 3, seed=SEED_STAIR + 1000 * int(beta) + seed)
    tau = np.geomspace(0.1, s.stair_tau, s.frames)
    sysm, Y = evolve(beta, X0, tau)
    E = np.array([sysm.energy(X) for X in Y]) * np.exp(-beta)
    tr = track_particle_clusters(Y, tau, threshold=THRESHOLD, min_mass=s.min_mass)
    f0 = formed_frame(tr)
    drop = float(max(0.0, -np.diff(E).min()) / E[-1])      # largest decrease between frames, relative
    # monotone to 1e-9 relative: the integrator's error (rtol 1e-6 per step) on flat plateaus is far below it
    out = dict(beta=beta, seed=seed, formed=f0 is not None, energy_monotone=drop <= 1e-9, max_rel_decrease=drop)
    if f0 is None:
        return out, tau, E, tr
    merges = [e for e in tr.merges if e.frame > f0]
    out.update(tau_formed=float(tau[f0]), count_formed=int(tr.n_clusters[f0]), count_final=int(tr.n_clusters[-1]),
               n_merges=len(merges), tau_first_merge=float(merges[0].time) if merges else None)
    # energy gained after formation inside the windows around merges, and the log-time those windows cover;
    # every merge event counts (one just before formation still collapses after it)
    lt = np.log10(tau)
    win = np.zeros(tau.size - 1, dtype=bool)
    for e in tr.merges:
        lm = np.log10(e.time)
        win |= (lt[1:] >= lm - s.window_dec) & (lt[:-1] <= lm + s.window_dec)
    k = np.arange(f0, tau.size - 1)
    dE = np.diff(E)[k]
    gained = float(dE.sum())
    out["frac_energy_in_windows"] = float(dE[win[k]].sum() / gained) if gained > 0 else None
    out["frac_logtime_in_windows"] = float(np.sum(np.diff(lt)[k][win[k]]) / (lt[-1] - lt[f0]))
    # each merge's jump (energy across its window) vs the point-cluster jump m_a m_b / beta: isolated pair merges;
    # "clean" ones (the test's): across the window the tracked mass changes only by the merge
    jumps, jumps_all = [], []
    sq = np.nansum(tr.mass ** 2, axis=1)
    for e in merges:
        lm = np.log10(e.time)
        alone = sum(abs(np.log10(o.time) - lm) <= 2 * s.window_dec for o in tr.merges) == 1
        if len(e.parents) != 2 or not alone:        # one pair merging, no other merge in its window
            continue
        a, b = np.searchsorted(lt, lm - s.window_dec) - 1, np.searchsorted(lt, lm + s.window_dec)
        if a < f0 or b >= tau.size:
            continue
        ma, mb = e.parent_masses
        ratio = float((E[b] - E[a]) / (ma * mb / beta))
        jumps_all.append(ratio)
        if (abs(tr.unclustered_mass[b] - tr.unclustered_mass[a]) <= 1e-9 and abs(e.child_mass - ma - mb) <= 1e-9
                and abs(sq[b] - sq[a] - 2 * ma * mb) <= 1e-9):
            jumps.append(ratio)
    out["jump_ratios"] = jumps
    out["jump_ratios_all"] = jumps_all
    # which pair merged: the closest pair of centres at the frame before (largest inner product)?
    closest = []
    for e in merges:
        ids = tr.alive(e.frame - 1)
        if len(ids) < 3 or len(e.parents) != 2:
            continue
        C = tr.centre[e.frame - 1, ids]
        G = C @ C.T - 2 * np.eye(len(ids))
        i, j = np.unravel_index(np.argmax(G), G.shape)
        closest.append(bool({int(ids[i]), int(ids[j])} == set(e.parents)))
    out["merge_was_closest"] = closest
    # the plateau after formation (geometric middle of formation and first merge): closest pair's speed vs others
    if merges and tr.n_clusters[f0] >= 4:
        fm = int(np.searchsorted(tau, np.sqrt(tau[f0] * merges[0].time)))
        fm = min(max(fm, f0), merges[0].frame - 1)
        ids, sp, C = _cluster_speeds(beta, Y[fm], tr, fm)
        if len(ids) >= 4:
            G = C @ C.T - 2 * np.eye(len(ids))
            i, j = np.unravel_index(np.argmax(G), G.shape)
            others = np.delete(sp, [i, j])
            out["plateau_speed_ratio"] = float(np.mean(sp[[i, j]]) / np.median(others))
    return out, tau, E, tr


def staircase_part(s: Settings):
    rows, traces = [], {}
    for beta in s.stair_betas:
        for seed in range(s.seeds):
            row, tau, E, tr = staircase_run(beta, seed, s)
            rows.append(row)
            if seed == 0:
                traces[f"tau_{beta:g}"] = tau
                traces[f"energy_{beta:g}"] = E
                traces[f"clusters_{beta:g}"] = tr.n_clusters
                traces[f"merges_{beta:g}"] = tr.merge_times
    per_beta = []
    for beta in s.stair_betas:
        R = [r for r in rows if r["beta"] == beta]
        F = [r for r in R if r["formed"]]
        fe = [r["frac_energy_in_windows"] for r in F if r.get("frac_energy_in_windows") is not None and r["n_merges"]]
        ft = [r["frac_logtime_in_windows"] for r in F if r.get("frac_energy_in_windows") is not None and r["n_merges"]]
        jumps = sum((r["jump_ratios"] for r in F), [])
        jumps_all = sum((r["jump_ratios_all"] for r in F), [])
        # the merges of one run are not independent draws: one mean jump ratio per run, the runs the unit
        jump_runs = [float(np.mean(r["jump_ratios"])) for r in F if r["jump_ratios"]]
        closest = sum((r["merge_was_closest"] for r in F), [])
        first = [r["tau_first_merge"] for r in F if r.get("tau_first_merge")]
        ratios = [r["plateau_speed_ratio"] for r in F if r.get("plateau_speed_ratio")]
        ls = most_unstable(beta, 3)
        counts = [r["count_formed"] for r in F]
        per_beta.append(dict(
            beta=beta, runs=len(R), formed=len(F), l_star=ls, maxima_pred=ls * (ls + 1) / (2 * np.sqrt(3)),
            count_formed=mean_ci95(counts), count_over_lstar=mean_ci95(np.array(counts) / ls),
            count_over_maxima=mean_ci95(np.array(counts) / (ls * (ls + 1) / (2 * np.sqrt(3)))),
            log_tau_formed=mean_ci95(np.log([r["tau_formed"] for r in F])),
            log_tau_first_merge=mean_ci95(np.log(first)), n_first_merge=len(first),
            frac_energy=mean_ci95(fe), frac_logtime=mean_ci95(ft),
            excess=mean_ci95(np.array(fe) - np.array(ft)), n_staircase=len(fe),
            jump_ratio=mean_ci95(jumps), n_jumps=len(jumps), jump_ratio_runs=mean_ci95(jump_runs),
            n_jump_runs=len(jump_runs), jump_ratio_all=mean_ci95(jumps_all), n_jumps_all=len(jumps_all),
            closest_first=[int(sum(closest)), len(closest)],
            closest_first_wilson=wilson95(sum(closest), len(closest)) if closest else [None, None],
            log_speed_ratio=mean_ci95(np.log(ratios)), n_speed=len(ratios),
            energy_monotone=all(r["energy_monotone"] for r in R),
            max_rel_decrease=max(r["max_rel_decrease"] for r in R)))
    # formation and first merge against beta (uniform start): slopes of log tau over all runs (each run its own
    # seed: independent; descriptive, outside the theorem's hypotheses)
    F = [r for r in rows if r["formed"]]
    fit_f = _fit([r["beta"] for r in F], [r["tau_formed"] for r in F])
    M = [r for r in F if r.get("tau_first_merge")]
    fit_m = _fit([r["beta"] for r in M], [r["tau_first_merge"] for r in M])
    return dict(rows=rows, per_beta=per_beta, fit_formed=fit_f, fit_first_merge=fit_m), traces


def _fit(beta, tau):
    """Slope of log tau against beta with the half-width of its 95 % Student-t interval (m - 2 dof)."""
    from scipy import stats

    beta, tau = np.asarray(beta, float), np.asarray(tau, float)
    if beta.size < 3 or np.unique(beta).size < 2:
        return dict(slope=None, half=None, n=int(beta.size))
    f = fit_slope(beta, tau, log_y=True)
    return dict(slope=f.slope, half=float(stats.t.ppf(0.975, f.n_points - 2) * f.stderr), intercept=f.intercept,
                n=f.n_points)


# ----------------------------------------------------------------------------- B: well-separated caps
def cap_centres(angle_deg):
    th = np.deg2rad(angle_deg)
    c = np.array([[1.0, 0.0, 0.0], [np.cos(th), np.sin(th), 0.0]])
    return np.vstack([c, -(c[0] + c[1]) / np.linalg.norm(c[0] + c[1])])


def point_merge_time(beta, C, tau):
    """First merge time of the point clusters ``C`` (equal weights), the same detection as the caps."""
    w = np.full(len(C), 1.0 / len(C))
    _, Y = evolve(beta, C, tau, w=w, rtol=1e-9, atol=1e-12)
    tr = track_particle_clusters(Y, tau, w=w, threshold=THRESHOLD)
    return float(tr.merges[0].time) if tr.merges else None


def seed_fits(beta, log_tau):
    """Fits of one seed's ``log tau`` over the betas: exponential ``a + b beta``, power law ``a + p log beta`` and
    both ``a + b beta + c log beta`` (an exponential rate with a free power-law prefactor)."""
    b, y = np.asarray(beta, float), np.asarray(log_tau, float)
    one = np.ones_like(b)

    def lsq(*cols):
        A = np.column_stack([one, *cols])
        coef = np.linalg.lstsq(A, y, rcond=None)[0]
        r = y - A @ coef
        return coef, float(r @ r)

    (aE, bE), rE = lsq(b)
    (_, pP), rP = lsq(np.log(b))
    (_, bN, cN), _ = lsq(b, np.log(b))
    return dict(slope=float(bE), intercept=float(aE), power=float(pP), rss_exp=rE, rss_pow=rP,
                log_rss_ratio=float(np.log(rP / rE)), rate_joint=float(bN), prefactor_power=float(cN),
                local_slopes=(np.diff(y) / np.diff(b)).tolist())


def caps_part(s: Settings):
    C = cap_centres(s.cap_angle)
    th = np.deg2rad(s.cap_angle)
    # one cap draw per seed, shared by every beta: the seed is the independent unit of every interval below
    starts = []
    for seed in range(s.seeds):
        rng = np.random.default_rng(SEED_CAPS + seed)
        starts.append(np.concatenate([mf.initial.von_mises_fisher(s.cap_n, c, s.cap_kappa, seed=rng) for c in C]))
    rows, points = [], []
    for beta in s.cap_betas:
        # horizon: 6 x the two-point estimate e^{beta (1 - cos th)} / (beta sin^2 th (2/3))
        est = np.exp(beta * (1 - np.cos(th))) / (beta * np.sin(th) ** 2 * 2 / 3)
        tau = np.geomspace(0.1, 6 * est + 10, s.frames)
        tp = point_merge_time(beta, C, tau)
        points.append(dict(beta=beta, tau_point=tp, estimate=float(est)))
        for seed in range(s.seeds):
            _, Y = evolve(beta, starts[seed], tau)
            tr = track_particle_clusters(Y, tau, threshold=THRESHOLD, min_mass=0.5 / len(C))
            e = tr.merges[0] if tr.merges else None
            # on the plateau (tau = 10: caps contracted about e^-3 in width): the speed of the closest pair (caps 0,
            # 1) against the third cap's, each driven by the other caps (exact velocities split by source)
            # and the same ratio for three point clusters at the measured centres and masses (the caps move by
            # tau = 10, more at smaller beta: the geometry is measured, not assumed)
            ratio = angle = predicted = None
            if e is not None and tr.n_clusters[0] == 3:
                fm = int(np.searchsorted(tau, 10.0))
                if fm < e.frame and tr.n_clusters[fm] == 3:
                    ids, sp, cen = _cluster_speeds(beta, Y[fm], tr, fm)
                    if list(ids) == [0, 1, 2]:
                        ratio = float(np.mean(sp[:2]) / sp[2])
                        angle = float(np.degrees(np.arccos(np.clip(cen[0] @ cen[1], -1, 1))))
                        ps = point_speeds(beta, cen, tr.mass[fm, ids])
                        predicted = float(np.mean(ps[:2]) / ps[2])
            rows.append(dict(beta=beta, seed=seed, clusters_start=int(tr.n_clusters[0]), plateau_speed_ratio=ratio,
                             predicted_speed_ratio=predicted, pair_angle_deg=angle,
                             tau_first_merge=float(e.time) if e else None,
                             merged_closest=bool(e is not None and set(e.parents) == {0, 1}),
                             frame_dt_rel=float(tau[1] / tau[0] - 1)))
    ok = [r for r in rows if r["tau_first_merge"] and r["clusters_start"] == 3]
    betas = list(s.cap_betas)
    # per seed (a merge at every beta): the three fits; the verdict's statistics are log(RSS_pow / RSS_exp) and the
    # joint fit's rate, Student-t over the seeds
    per_seed = []
    for seed in range(s.seeds):
        R = sorted((r for r in ok if r["seed"] == seed), key=lambda r: r["beta"])
        if [r["beta"] for r in R] != betas:
            continue
        f = seed_fits(betas, np.log([r["tau_first_merge"] for r in R]))
        f["seed"] = seed
        f["slope_beta_tau"] = float(fit_slope(betas, [r["beta"] * r["tau_first_merge"] for r in R], log_y=True).slope)
        per_seed.append(f)

    def over_seeds(key):
        return mean_ci95([f[key] for f in per_seed])

    slope = over_seeds("slope")
    fit = dict(slope=slope[0], half=slope[1], intercept=over_seeds("intercept")[0], n=len(per_seed), unit="seeds")
    local = np.array([f["local_slopes"] for f in per_seed]) if per_seed else np.zeros((0, len(betas) - 1))
    local_ci = [mean_ci95(local[:, j]) for j in range(len(betas) - 1)]
    pts = [p for p in points if p["tau_point"]]
    fit_pt = (seed_fits([p["beta"] for p in pts], np.log([p["tau_point"] for p in pts])) if len(pts) >= 4
              else None)
    # the pair's speed over the third cap's at tau = 10 (3 caps intact): per seed, the mean over the betas of
    # log(measured / point clusters at the measured geometry), and the slopes in beta of both (>= 2 betas)
    speed, speed_pred, resid = [], [], []
    for seed in range(s.seeds):
        R = [r for r in rows if r["seed"] == seed and r["plateau_speed_ratio"]]
        if len({r["beta"] for r in R}) >= 2:
            b = [r["beta"] for r in R]
            speed.append(fit_slope(b, [r["plateau_speed_ratio"] for r in R], log_y=True).slope)
            speed_pred.append(fit_slope(b, [r["predicted_speed_ratio"] for r in R], log_y=True).slope)
            resid.append(float(np.mean([np.log(r["plateau_speed_ratio"] / r["predicted_speed_ratio"]) for r in R])))
    sp = mean_ci95(speed)
    spp = mean_ci95(speed_pred)
    res = mean_ci95(resid)
    used = [r for r in rows if r["plateau_speed_ratio"]]
    far = np.arccos(C[2] @ C[0])
    closest = [float(np.mean([r["merged_closest"] for r in ok if r["seed"] == seed]))
               for seed in range(s.seeds) if any(r["seed"] == seed for r in ok)]
    per_beta = [dict(beta=b, log_tau=mean_ci95([np.log(r["tau_first_merge"]) for r in ok if r["beta"] == b]),
                     n=sum(r["beta"] == b for r in ok)) for b in s.cap_betas]
    return dict(rows=rows, points=points, per_seed=per_seed, fit=fit,
                log_rss_ratio=over_seeds("log_rss_ratio"), rate_joint=over_seeds("rate_joint"),
                prefactor_power=over_seeds("prefactor_power"), power=over_seeds("power"),
                local_slopes=local_ci, local_betas=[0.5 * (a + b) for a, b in zip(betas[:-1], betas[1:])],
                fit_point=fit_pt, fit_beta_tau=dict(zip(("slope", "half"), over_seeds("slope_beta_tau")), n=len(per_seed)),
                fit_speed=dict(slope=sp[0], half=sp[1], n=len(speed), unit="seeds", predicted_slope=spp[0],
                               predicted_half=spp[1], log_ratio_to_points=res,
                               betas=sorted({r["beta"] for r in used}),
                               pair_angle_range=[min((r["pair_angle_deg"] for r in used), default=None),
                                                 max((r["pair_angle_deg"] for r in used), default=None)],
                               largest_ratio=max((r["plateau_speed_ratio"] for r in used), default=None)),
                speed_rate=float(np.cos(th) - np.cos(far)), rate_large_beta=float(1 - np.cos(th)), per_beta=per_beta,
                n_ok=len(ok), n_runs=len(rows), closest_first=[sum(r["merged_closest"] for r in ok), len(ok)],
                closest_first_seeds=[len(closest), *mean_ci95(closest)])


# ----------------------------------------------------------------------------- C: circle counts
def circle_part(s: Settings):
    rows, per_beta = [], []
    for beta in s.circle_betas:
        kstar = most_unstable(beta, 2)
        ks = np.arange(1, 4 * kstar + 10)
        sig = stability.growth_rate(ks, [1.0], beta, d=2) * np.exp(-beta)      # rates in tau
        tau = np.geomspace(0.1, 40.0 / sig.max(), s.frames // 2)
        counts, later = [], []
        for seed in range(s.seeds):
            X0 = mf.initial.uniform_sphere(s.circle_n, 2, seed=SEED_CIRCLE + 1000 * int(beta) + seed)
            _, Y = evolve(beta, X0, tau)
            tr = track_particle_clusters(Y, tau, threshold=THRESHOLD_CIRCLE, min_mass=s.min_mass)
            f0 = formed_frame(tr)
            row = dict(beta=beta, seed=seed, k_star=kstar, formed=f0 is not None)
            if f0 is not None:
                f1 = min(int(np.searchsorted(tau, 3 * tau[f0])), tau.size - 1)
                row.update(tau_formed=float(tau[f0]), count_formed=int(tr.n_clusters[f0]),
                           count_3x=int(tr.n_clusters[f1]))
                counts.append(row["count_formed"])
                later.append(row["count_3x"])
            rows.append(row)
        per_beta.append(dict(beta=beta, k_star=kstar, sigma_max=float(sig.max()), runs=s.seeds, formed=len(counts),
                             count_formed=mean_ci95(counts), count_3x=mean_ci95(later),
                             diff=mean_ci95(np.array(counts) - kstar)))
    return dict(rows=rows, per_beta=per_beta)


# ----------------------------------------------------------------------------- E: circle PDE
def pde_eps_cells(s: Settings, gap):
    """The (eps, roles) of one beta: the fixed ``pde_eps`` (role ``"fixed"``); the verdict's eps
    ``min(min pde_eps, S^(-1/gap))`` with ``S = pde_sel_verdict`` (role ``"S=10"``: selectivity ``eps^-gap >= S``);
    the former hypothesis's eps ``S^(-1/gap)`` with ``S = pde_sel_former`` exactly (role ``"S=2"``), left out where
    it exceeds 1e-2 (not a small perturbation)."""
    cells = {float(e): ["fixed"] for e in s.pde_eps}

    def add(e, role):
        key = next((k for k in cells if np.isclose(k, e, rtol=1e-12, atol=0)), float(e))
        cells.setdefault(key, []).append(role)

    add(min(min(s.pde_eps), s.pde_sel_verdict ** (-1.0 / gap)), f"S={s.pde_sel_verdict:g}")
    e = s.pde_sel_former ** (-1.0 / gap)
    if e <= 1e-2:
        add(e, f"S={s.pde_sel_former:g}")
    return sorted(cells.items(), key=lambda kv: -kv[0])


def pde_run(pde, c0, T, smax, sig, kstar, runner_up):
    """One circle-PDE run from ``c0`` to ``T``: the linear phase in segments (atol 1e-8 of the perturbation's
    size at each segment start) until the largest mode reaches ``PDE_SWITCH``, then the nonlinear phase with 601
    frames.  Returns ``(times, values on the product grid, status, t_switch, linear-phase errors)``."""
    L = c0.size - 1
    c, t = c0.copy(), 0.0
    amp = float(np.abs(c[1:]).max())
    lin_err = None
    while amp < PDE_SWITCH and t < T:
        dseg = min(np.log(PDE_SWITCH / amp) + 0.1, np.log(1e3)) / smax
        tr = mf.solve_reduced(pde, c, dseg, step=StepControl(rtol=1e-8, atol=1e-8 * amp),
                              save=SaveAt(t_eval=np.array([0.0, dseg]), observe=False), progress=False)
        if tr.status != 0:
            raise RuntimeError(f"linear phase stopped (status {tr.status}) at t = {t:g}")
        c, t = pde.coefficients(tr.y[-1]).copy(), t + dseg
        amp = float(np.abs(c[1:]).max())
    if t > 0:
        # modes k* and the runner-up against c_k(0) e^{sigma_k t} (their nonlinear corrections are O(amp) relative)
        lin_err = [float(abs(c[k] / (c0[k] * np.exp(sig[k] * t)) - 1)) for k in (kstar, runner_up) if k <= L]
    rest = T - t
    step = StepControl(rtol=1e-8, atol=min(1e-12, 1e-8 * amp))
    tr = mf.solve_reduced(pde, c, rest, step=step, save=SaveAt(t_eval=np.linspace(0.0, rest, 601), observe=False),
                          progress=False)
    return tr.t + t, tr.y, int(tr.status), t, lin_err


def pde_part(s: Settings):
    import warnings

    from meanfield.analysis.cluster_tracking import track_density_peaks
    from meanfield.models.circle import CircleResolutionWarning

    m = 4 * s.pde_kmax
    th = 2 * np.pi * np.arange(m) / m
    nodes, weights = np.stack([np.cos(th), np.sin(th)], axis=1), np.full(m, 1.0 / m)   # mass 1: dtheta / 2 pi
    rows, per_beta = [], []
    for beta in (s.pde_betas or s.circle_betas):
        kstar = most_unstable(beta, 2)
        ks = np.arange(1, 4 * kstar + 10)
        rates = stability.growth_rate(ks, [1.0], beta, d=2)
        smax = rates.max()
        sig = np.r_[0.0, stability.growth_rate(np.arange(1, s.pde_kmax + 1), [1.0], beta, d=2)]
        with warnings.catch_warnings():      # the kernel's neglected multipliers: checked by the monitor's tail
            warnings.simplefilter("ignore", CircleResolutionWarning)
            pde = mf.CirclePDE(mf.scalar_heads([1.0], 2, beta=beta), kmax=s.pde_kmax)
        L = min(s.pde_kmax // 4, 4 * kstar + 8)
        order = np.argsort(rates)[::-1]
        runner_up = int(ks[order[1]])
        gap = float(1 - rates[order[1]] / rates[order[0]])
        draws = [np.random.default_rng(SEED_PDE + 1000 * int(beta) + seed) for seed in range(s.seeds)]
        draws = [(g.standard_normal(L) + 1j * g.standard_normal(L)) / np.sqrt(2) for g in draws]
        for eps, roles in pde_eps_cells(s, gap):
            # horizon: the linear phase takes ~ln(1/eps) / sigma_max, then 30 / sigma_max for the nonlinear phase
            T = (np.log(1.0 / eps) + 30.0) / smax
            counts, devs, lin = [], [], []
            for seed in range(s.seeds):
                c = pde.uniform()
                c[1:L + 1] += eps * draws[seed]     # the same shape at every eps of this beta (paired across eps)
                t, Y, status, t_switch, lin_err = pde_run(pde, c, T, smax, sig, kstar, runner_up)
                V = np.array([pde.synthesis(y.view(np.complex128), m) for y in Y])
                trk = track_density_peaks(V, nodes, weights, times=t)
                f = np.flatnonzero(V.max(axis=1) >= 3.0)
                frame = int(f[0]) if f.size else len(t) - 1
                row = dict(beta=beta, eps=eps, seed=seed, k_star=kstar, reached_3=bool(f.size), status=status,
                           t_stop_over_T=float(t[-1] / T), t_reach_sigma=float(t[frame] * smax),
                           t_switch_sigma=float(t_switch * smax), linear_error=lin_err,
                           count=int(trk.n_clusters[frame]), count_last=int(trk.n_clusters[-1]),
                           mass_error=float(np.abs(trk.unclustered_mass).max()))
                rows.append(row)
                if lin_err:
                    lin.append(max(lin_err))
                if f.size:                   # a count only where the pattern formed within the horizon
                    counts.append(row["count"])
                    devs.append(abs(row["count"] - kstar))
            # selectivity of the linear phase: the runner-up mode's amplitude relative to k*'s when k*'s has grown
            # from eps to O(1) is eps^(1 - sigma_2 / sigma_1); k* stands out only if eps^-(1 - sigma_2 / sigma_1) >> 1
            per_beta.append(dict(beta=beta, eps=eps, roles=roles, k_star=kstar, runner_up=runner_up, runs=s.seeds,
                                 formed=len(counts), counts=counts, count=mean_ci95(counts), abs_dev=mean_ci95(devs),
                                 n_at_kstar=int(sum(c == kstar for c in counts)),
                                 gap=gap, selectivity=float(eps ** -gap),
                                 linear_error=float(max(lin)) if lin else None,
                                 reached_3=sum(r["reached_3"] for r in rows if r["beta"] == beta and r["eps"] == eps)))
    return dict(rows=rows, per_beta=per_beta)


# ----------------------------------------------------------------------------- D: closest pair, static
def pair_part(s: Settings):
    a0, a1 = s.pair_angles
    C = np.array([[1.0, 0, 0], [np.cos(a0), np.sin(a0), 0], [-1.0, 0, 0], [-np.cos(a1), 0, np.sin(a1)]])
    w = np.full(4, 0.25)
    rows = []
    for beta in s.pair_betas:
        V = system(beta, 3).velocity(C, w)
        sp = np.linalg.norm(V, axis=1)
        ratio = float(np.min(sp[:2]) / np.max(sp[2:]))
        pred = float(np.exp(beta * (np.cos(a0) - np.cos(a1))) * np.sin(a0) / np.sin(a1))
        rows.append(dict(beta=beta, ratio=ratio, predicted=pred, rel_error=float(abs(ratio / pred - 1))))
    f = fit_slope([r["beta"] for r in rows], [r["ratio"] for r in rows], log_y=True)
    return dict(rows=rows, slope=f.slope, predicted_slope=float(np.cos(a0) - np.cos(a1)))


# ----------------------------------------------------------------------------- driver
def run(out_dir: Path, quick: bool = False) -> dict:
    s = QUICK if quick else FULL
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    stair, traces = staircase_part(s)
    t1 = time.perf_counter()
    caps = caps_part(s)
    t2 = time.perf_counter()
    circle = circle_part(s)
    pde = pde_part(s)
    pair = pair_part(s)
    t3 = time.perf_counter()
    np.savez_compressed(out_dir / "data.npz", **traces)
    summary = dict(mode="quick" if quick else "full", seeds=s.seeds,
                   first_merge_slope_caps=[caps["fit"]["slope"], caps["fit"]["half"]],
                   first_merge_slope_points=caps["fit_point"]["slope"] if caps["fit_point"] else None,
                   rate_large_beta=caps["rate_large_beta"], caps_log_rss_ratio=caps["log_rss_ratio"],
                   caps_rate_joint=caps["rate_joint"],
                   first_merge_slope_uniform=[stair["fit_first_merge"]["slope"], stair["fit_first_merge"]["half"]],
                   circle_counts={f"{p['beta']:g}": [p["k_star"], *p["count_formed"]] for p in circle["per_beta"]},
                   pde_counts={f"{p['beta']:g}@{p['eps']:g}": [p["k_star"], *p["count"]] for p in pde["per_beta"]},
                   wall_s=dict(staircase=t1 - t0, caps=t2 - t1, circle_pde_and_pair=t3 - t2, total=t3 - t0))
    save_json(out_dir / "data.json", dict(settings=s.__dict__, summary=summary, staircase=stair, caps=caps,
                                          circle=circle, pde=pde, pair=pair))
    return summary


if __name__ == "__main__":
    from studies.metastability.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
