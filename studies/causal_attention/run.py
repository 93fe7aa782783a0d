"""Causal attention: convergence to one cluster, the Rényi-parking count of meta-stable clusters, the mean-field limit.

Papers (read through the stored pages: for arXiv 2411.04990 the abstract and the caption of its Figure 2 only; for
arXiv 2501.18322 the abstract only).  Karagodin, Polyanskiy and Rigollet (NeurIPS 2024) prove that causally masked
self-attention with ``V = I`` converges to one cluster for any key-query matrix, and connect the long-lived
(meta-stable) clusters to the Rényi parking problem: their Figure 2 (``d = 2``, ``n = 200``, ``beta = 64``,
``Q = K = V = I``) marks Rényi centers at separation ``delta = 4 beta^(-1/2)``, so the number of meta-stable clusters
should be about the parking constant 0.7476 times the circle's length over ``delta`` (``0.7476 * 2 pi sqrt(beta) /
4``, growing as ``beta^(1/2)``).  Castin, Ablin, Carrillo and Peyré show masked attention has a well-posed mean-field
limit (conditional on the position).

Setting: ``meanfield.models.causal.CausalSystem`` (direct sums), one zonal softmax head ``M = V = I`` (exp kernel,
``beta``), tokens i.i.d. uniform on S^1 (S^2 for the secondary parking runs), dopri5 (rtol 1e-6, atol 1e-9) with the
retraction; ``meanfield.models.causal_continuum.CausalCirclePDE`` (64 modes, 24 Gauss positions) for the continuum.

Parts and decision rules (fixed before any data of the full run were seen):

1. **Convergence to one cluster** (Thm 4.1 of 2411.04990; hypotheses: ``V = I``, any ``K^T Q``, tokens on the
   sphere, causal mask).  For ``beta`` in ``conv_betas``, ``n`` in ``conv_ns``, ``seeds`` seeds: the time ``T1`` at
   which every token is within ``conv_eps`` rad of token 0 (token 0 is fixed), up to ``t_max``.  Verdict:
   *reproduced* if every run reaches one cluster; *refuted* if a run stops at ``t_max`` in a stationary
   multi-cluster state (largest speed below ``STATIONARY_SPEED`` while the largest angle to token 0 exceeds 1e-2); else
   *reproduced with sharpened hypotheses* (every unfinished run still moving: convergence slower than ``t_max``, the
   law of ``T1`` in ``beta`` stated).  Reported: median ``T1`` per (beta, n) with seeds' range, the slope of
   ``log T1`` against ``beta`` (an exponential law) and against ``log n``.
2. **Meta-stable clusters against the Rényi parking count** on S^1 (the heuristic of 2411.04990; hypotheses:
   ``d = 2``, ``Q = K = V = I``, ``n = 200``, large ``beta``, ``delta = 4 beta^(-1/2)``).  For ``beta`` in
   ``park_betas`` and ``seeds`` seeds at ``n = 200`` (and ``park_n_large`` on fewer betas), the number of groups of
   tokens separated by gaps larger than ``delta / 4`` at the times ``park_times``; the primary time is
   ``park_primary`` (after the collapse of the clusters, before most merges).  Predictions: the jamming count
   ``0.7476 * 2 pi / delta`` and the finite-n greedy count (the Rényi centers of the same tokens in their order).
   ``e`` = the slope of log (mean count) against log beta, with a 95 % bootstrap interval over seeds (2000
   resamples).  Verdict: *reproduced* if the interval contains 1/2 and every beta's mean count is within 20 % of the
   jamming count; *reproduced with sharpened hypotheses* if the interval contains 1/2 but a beta is off the jamming
   count by more than 20 %, or the interval misses 1/2 while every beta's mean count is within 20 % of the finite-n
   greedy count (the meta-stable clusters are the Rényi centers of the sample); *refuted* otherwise.
   Secondary, S^2 (no verdict: the paper's figure is on S^1): counts against the greedy count of the same tokens and
   the planar random-sequential-adsorption jamming count ``0.547 * 16 / delta^2`` (discs of diameter ``delta`` on
   area ``4 pi``; curvature ignored), exponent of beta against 1.
3. **The mean-field limit** (2501.18322, masked attention; hypotheses: compactly supported data, smooth kernel, a
   finite horizon): the W2 (geodesic, exact, per window of positions: ``w2_windows`` positions windows, averaged)
   between ``n`` causal particles (i.i.d. from ``f(theta, s) = 1 + amp cos(theta - pi s)``) and the continuum at
   ``mf_time``, over ``mf_ns`` and ``seeds`` seeds; slope of log (mean W2) against log n with its 95 % t interval
   (dof = #n - 2).  Verdict: *reproduced* if the interval's upper end is below 0 and it meets [-0.6, -0.4] (the
   i.i.d. rate 1/2); *reproduced with sharpened hypotheses* if it is below 0 but misses that band; *refuted* if its
   upper end is at or above 0.

4. **The "lost in the middle" profile** (Duerinckx, Geshkovski, Rossi, arXiv 2605.09213: read through the stored
   pages, the abstract and the first paragraphs of the introduction only; their retrieval profile is built from
   the next-order (O(1/n)) correlations of the particle system, whose definition could not be read).  Their stated
   hypotheses: causal self-attention dynamics (the toy decoder), i.i.d. uniformly distributed tokens, an explicit
   smallness condition (not recovered).  Measured here: the attention received by each position,
   ``R_j = sum_{i >= j} a_ij`` (``CausalSystem.attention_received``; softmax rows sum to 1, ``sum_j R_j = n``), and
   its mean-field limit ``r(s)`` (``CausalCirclePDE.attention_received``, integrating to 1), compared as means over
   ``lim_windows`` windows of positions at the same times ``lim_times``; closed forms at ``lambda = 0`` (uniform
   attention): ``R_j = H_n - H_j``, ``r(s) = -log s``.

   (a) *Mean-field limit of the profile* (beta = ``lim_beta``, start ``1 + lim_amp cos(theta - pi s)``): ``e`` =
   slope of log (mean over seeds of the largest window difference at ``lim_times[-1]``) against log n, 95 % t
   interval (dof = #n - 2).  Verdict as in part 3: *reproduced* if the interval's upper end is below 0 and it meets
   [-0.6, -0.4]; *reproduced with sharpened hypotheses* if below 0 but missing the band; *refuted* otherwise.
   (b) *U shape for i.i.d. uniform tokens* (``lim_uniform_n`` tokens, ``lim_uniform_seeds`` seeds, beta =
   ``lim_beta``): the window means averaged over seeds at each time ``t > 0``.  Primacy: window 0 is the largest;
   recency: the last window exceeds the smallest window mean by more than its 95 % half-width over seeds; a unique
   interior minimum: exactly one window smaller than both neighbours, not at an end.  Verdict: *reproduced* if
   primacy, recency and a unique interior minimum hold at every ``t > 0``; *reproduced with sharpened hypotheses*
   if all three hold at some but not all times; *outside the hypotheses* if primacy holds at every time but the U
   never forms (the attention received is the first-order (mean-field) quantity, not the paper's next-order
   retrieval profile; for i.i.d. uniform tokens the continuum is the stationary uniform state and ``r(s) = -log
   s``); *refuted* if primacy fails at some ``t > 0``.
5. **The S^2 continuum** (``CausalSpherePDE``, ``sph_lmax``, ``sph_positions`` Gauss positions) against causal
   particles on S^2 (start ``(1 + sph_amp <x, e(s)>) / 4 pi``, ``e(s)`` turning by pi over the positions, beta =
   ``sph_beta``): W2 (geodesic, exact) per window of positions to the window's density on the grid nodes, at
   ``sph_time``; the rule of part 3 on the slope in n.
6. **The S^2 continuum with a general head** (added 2026-12-04, rule fixed before its data were seen: the rule of
   part 3): as part 5 with one softmax head ``M = I + gen_perturb R_1``, ``V = I + gen_perturb R_2`` (fixed standard
   normal ``R``, neither symmetric nor ``V = I``: outside the zonal setting, inside the hypotheses of 2501.18322,
   which allow any ``Q``, ``K``, ``V``), the continuum through the bi-spherical operators (``CausalSpherePDE``
   general path), the particles by the direct causal sums, fresh seeds (stream 10).

Not done (said in the report): the paper's next-order retrieval profile itself.

Cost (2 cores): quick about 25 s; full about 14-18 min (part 6: 2.2 min) (``run(out, parts=(...))`` reruns some parts only, keeping the
others' data).  Run from the repository root::

    python -m studies.causal_attention.run [--quick]
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from meanfield.core.heads import Head, scalar_heads
from meanfield.core.integrate import integrate
from meanfield.core.options import SaveAt, StepControl
from meanfield.models.causal import CausalSystem
from meanfield.models.causal_continuum import CausalCirclePDE, CausalSpherePDE
from studies._common import load_json, main, save_json
from studies.causal_attention.common import (
    circle_clusters,
    renyi_centers,
    renyi_delta,
    sample_sphere_tokens,
    sample_tokens,
    sphere_clusters,
    sphere_w2_windows,
    w2_windows,
    window_means,
)

STATIONARY_SPEED = 1e-10
SEED = 3636


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode (saved as ``config``)."""

    seeds: int
    conv_betas: tuple
    conv_ns: tuple
    conv_eps: float
    t_max: float
    park_betas: tuple
    park_n: int
    park_times: tuple
    park_primary: float
    park_n_large: int
    park_betas_large: tuple
    park_seeds_large: int
    sphere_betas: tuple
    sphere_n: int
    mf_beta: float
    mf_amp: float
    mf_time: float
    mf_ns: tuple
    mf_kmax: int
    mf_positions: int
    w2_windows: int
    w2_nodes: int
    lim_beta: float
    lim_amp: float
    lim_times: tuple
    lim_ns: tuple
    lim_kmax: int
    lim_positions: int
    lim_windows: int
    lim_uniform_n: int
    lim_uniform_seeds: int
    lim_seeds: int
    sph_beta: float
    sph_amp: float
    sph_time: float
    sph_ns: tuple
    sph_seeds: int
    sph_lmax: int
    sph_positions: int
    sph_windows: int
    sph_grid: int
    gen_perturb: float


FULL = Settings(seeds=10, conv_betas=(0.5, 1.0, 2.0, 4.0, 6.0), conv_ns=(16, 64, 256), conv_eps=1e-3, t_max=5000.0,
                park_betas=(16.0, 22.6, 32.0, 45.3, 64.0, 90.5, 128.0, 181.0, 256.0), park_n=200,
                park_times=(3.0, 10.0, 30.0, 100.0, 300.0), park_primary=30.0, park_n_large=800,
                park_betas_large=(16.0, 64.0, 256.0), park_seeds_large=10, sphere_betas=(8.0, 16.0, 32.0, 64.0),
                sphere_n=400, mf_beta=1.0, mf_amp=0.5, mf_time=2.0, mf_ns=(128, 256, 512, 1024, 2048, 4096),
                mf_kmax=64, mf_positions=24, w2_windows=4, w2_nodes=1024, lim_beta=4.0, lim_amp=0.5,
                lim_times=(0.0, 1.0, 3.0), lim_ns=(256, 512, 1024, 2048, 4096, 8192), lim_kmax=64, lim_positions=24,
                lim_windows=8, lim_uniform_n=2048, lim_uniform_seeds=10, lim_seeds=20, sph_beta=2.0, sph_amp=0.5,
                sph_time=1.0, sph_ns=(128, 256, 512, 1024, 2048), sph_seeds=10, sph_lmax=12, sph_positions=8,
                sph_windows=4, sph_grid=32, gen_perturb=0.3)
QUICK = Settings(seeds=3, conv_betas=(1.0, 4.0), conv_ns=(16, 32), conv_eps=1e-3, t_max=2000.0,
                 park_betas=(16.0, 64.0), park_n=100, park_times=(10.0, 30.0), park_primary=30.0, park_n_large=0,
                 park_betas_large=(), park_seeds_large=0, sphere_betas=(16.0,), sphere_n=100, mf_beta=1.0,
                 mf_amp=0.5, mf_time=1.0, mf_ns=(64, 256), mf_kmax=32, mf_positions=12, w2_windows=2, w2_nodes=256,
                 lim_beta=4.0, lim_amp=0.5, lim_times=(0.0, 1.0), lim_ns=(128, 512), lim_kmax=32, lim_positions=12,
                 lim_windows=4, lim_uniform_n=256, lim_uniform_seeds=3, lim_seeds=3, sph_beta=2.0, sph_amp=0.5,
                 sph_time=0.5, sph_ns=(64, 256), sph_seeds=2, sph_lmax=8, sph_positions=4, sph_windows=2, sph_grid=16,
                 gen_perturb=0.3)

STEP = StepControl(rtol=1e-6, atol=1e-9, max_steps=500000)


def _head(beta, d):
    return scalar_heads([1.0], d, beta=beta, normalization="softmax")


def _uniform(rng, n, d):
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def run_convergence(cfg):
    shape = (len(cfg.conv_betas), len(cfg.conv_ns), cfg.seeds)
    T1, angle, speed = np.full(shape, np.nan), np.empty(shape), np.empty(shape)
    for a, beta in enumerate(cfg.conv_betas):
        cs = CausalSystem(_head(beta, 2))
        for b, n in enumerate(cfg.conv_ns):
            for s in range(cfg.seeds):
                X0 = _uniform(np.random.default_rng([SEED, 1, a, b, s]), n, 2)

                def one(t, y):
                    return "one cluster" if np.arccos(np.clip(y @ y[0], -1, 1)).max() < cfg.conv_eps else None

                tr = integrate(cs.rhs, X0, (0.0, cfg.t_max), method="dopri5", retraction=cs.retraction, event=one,
                               step=STEP, save=SaveAt(t_eval=[0.0, cfg.t_max], observe=False))
                Y = tr.y[-1]
                if tr.status == 1:
                    T1[a, b, s] = tr.t[-1]
                angle[a, b, s] = np.arccos(np.clip(Y @ Y[0], -1, 1)).max()
                speed[a, b, s] = np.linalg.norm(cs.velocity(Y / np.linalg.norm(Y, axis=1, keepdims=True)), axis=1).max()
    return {"conv_T1": T1, "conv_angle": angle, "conv_speed": speed}


def _park(cfg, betas, n, seeds, d, tag):
    times = (0.0,) + tuple(cfg.park_times)
    counts = np.empty((len(betas), seeds, len(times)), int)
    greedy = np.empty((len(betas), seeds), int)
    for a, beta in enumerate(betas):
        cs = CausalSystem(_head(beta, d))
        delta = renyi_delta(beta)
        for s in range(seeds):
            X0 = _uniform(np.random.default_rng([SEED, tag, a, s]), n, d)
            tr = integrate(cs.rhs, X0, (0.0, times[-1]), method="dopri5", retraction=cs.retraction, step=STEP,
                           save=SaveAt(t_eval=times, observe=False))
            for k, Y in enumerate(tr.y):
                if d == 2:
                    counts[a, s, k] = circle_clusters(np.arctan2(Y[:, 1], Y[:, 0]), delta / 4)[0]
                else:
                    counts[a, s, k] = sphere_clusters(Y, delta / 4)
            greedy[a, s] = len(renyi_centers(X0, delta))
    return counts, greedy


def run_parking(cfg):
    out = {}
    out["park_counts"], out["park_greedy"] = _park(cfg, cfg.park_betas, cfg.park_n, cfg.seeds, 2, 2)
    if cfg.park_n_large:
        out["park_large_counts"], out["park_large_greedy"] = _park(cfg, cfg.park_betas_large, cfg.park_n_large,
                                                                   cfg.park_seeds_large, 2, 3)
    out["sphere_counts"], out["sphere_greedy"] = _park(cfg, cfg.sphere_betas, cfg.sphere_n, cfg.seeds, 3, 4)
    return out


def run_mean_field(cfg):
    heads = _head(cfg.mf_beta, 2)
    amp = cfg.mf_amp

    def prof(th, s):
        return 1 + amp * np.cos(th - np.pi * s) + 0 * th

    pde = CausalCirclePDE(heads, cfg.mf_kmax, positions=cfg.mf_positions)
    c0 = pde.project(prof)
    tr = integrate(pde.rhs, pde.state(c0), (0.0, cfg.mf_time), method="dopri5", step=StepControl(rtol=1e-9, atol=1e-11),
                   save=SaveAt(t_eval=[0.0, cfg.mf_time], observe=pde.observer()))
    c = pde.coefficients(tr.y[-1])
    cs = CausalSystem(heads, summation="spectral", kernel_tol=1e-9)
    w2 = np.empty((len(cfg.mf_ns), cfg.seeds, 2))
    for a, n in enumerate(cfg.mf_ns):
        for s in range(cfg.seeds):
            X0 = sample_tokens(np.random.default_rng([SEED, 5, a, s]), n, prof, 1 + amp)
            tp = integrate(cs.rhs, X0, (0.0, cfg.mf_time), method="dopri5", retraction=cs.retraction, step=STEP,
                           save=SaveAt(t_eval=[0.0, cfg.mf_time], observe=False))
            w2[a, s, 0] = w2_windows(tp.y[0], pde, c0, cfg.w2_windows, cfg.w2_nodes).mean()
            w2[a, s, 1] = w2_windows(tp.y[-1], pde, c, cfg.w2_windows, cfg.w2_nodes).mean()
    return {"mf_w2": w2, "mf_pde_status": tr.status, "mf_mass_drift": float(np.abs(pde.mass(c) - pde.mass(c0)).max()),
            "mf_position_error": pde.position_error(c), "mf_tail": float(np.abs(c[:, -4:]).max()),
            "mf_order": np.asarray(tr.observables["order_parameter_mean"])}


def run_lost_in_middle(cfg):
    """The attention received by each position (the "lost in the middle" profile), particles and continuum."""
    out = {}
    W = cfg.lim_windows
    # closed forms (lambda = 0: uniform attention over the prefix): particles H_n - H_j, continuum -log s
    n = cfg.lim_ns[-1]
    X = _uniform(np.random.default_rng([SEED, 6]), n, 2)
    R0 = CausalSystem(scalar_heads([0.0], 2, beta=1.0, normalization="softmax")).attention_received(X)[0]
    harmonic = np.cumsum((1.0 / np.arange(1, n + 1))[::-1])[::-1]
    pde0 = CausalCirclePDE(scalar_heads([0.0], 2, beta=1.0, normalization="softmax"), 16, positions=cfg.lim_positions)
    sj = (np.arange(n) + 0.5) / n
    r0 = pde0.attention_received(pde0.project(lambda th, s: 1 + cfg.lim_amp * np.cos(th - np.pi * s)), sj)[0]
    out["lim_closed_particles"] = float(np.abs(R0 - harmonic).max())
    out["lim_closed_continuum"] = float(np.abs(r0 + np.log(sj)).max())
    # a non-uniform start: the profile moves, particles against the continuum at the same times
    heads = _head(cfg.lim_beta, 2)
    amp = cfg.lim_amp

    def prof(th, s):
        return 1 + amp * np.cos(th - np.pi * s) + 0 * th

    pde = CausalCirclePDE(heads, cfg.lim_kmax, positions=cfg.lim_positions)
    times = tuple(cfg.lim_times)
    tr = integrate(pde.rhs, pde.state(pde.project(prof)), (0.0, times[-1]), method="dopri5",
                   step=StepControl(rtol=1e-9, atol=1e-11), save=SaveAt(t_eval=times, observe=False))
    cs_all = [pde.coefficients(y) for y in tr.y]
    s_fine = np.linspace(0.0, 1.0, 201)[1:]
    out["lim_s_fine"] = s_fine
    out["lim_r_fine"] = np.stack([pde.attention_received(c, s_fine)[0] for c in cs_all])
    out["lim_position_error"] = max(pde.position_error(c) for c in cs_all)
    cs = CausalSystem(heads, summation="spectral", kernel_tol=1e-9)
    err = np.empty((len(cfg.lim_ns), cfg.lim_seeds, len(times)))
    pm = np.empty((len(cfg.lim_ns), cfg.lim_seeds, len(times), W))
    cm = np.empty((len(cfg.lim_ns), len(times), W))
    for a, n in enumerate(cfg.lim_ns):
        sj = (np.arange(n) + 0.5) / n
        cm[a] = np.stack([window_means(pde.attention_received(c, sj)[0], W) for c in cs_all])
        for s in range(cfg.lim_seeds):
            X0 = sample_tokens(np.random.default_rng([SEED, 7, a, s]), n, prof, 1 + amp)
            tp = integrate(cs.rhs, X0, (0.0, times[-1]), method="dopri5", retraction=cs.retraction, step=STEP,
                           save=SaveAt(t_eval=times, observe=False))
            for k, Y in enumerate(tp.y):
                Y = Y / np.linalg.norm(Y, axis=1, keepdims=True)
                pm[a, s, k] = window_means(cs.attention_received(Y)[0], W)
            err[a, s] = np.abs(pm[a, s] - cm[a]).max(axis=1)
    out.update(lim_err=err, lim_particle_means=pm, lim_continuum_means=cm)
    # i.i.d. uniform tokens (the paper's hypothesis): the continuum is the stationary uniform state, r = -log s
    n = cfg.lim_uniform_n
    uniform = CausalCirclePDE(heads, cfg.lim_kmax, positions=cfg.lim_positions)
    out["lim_uniform_tendency"] = float(np.abs(uniform.tendency(uniform.uniform())).max())
    um = np.empty((cfg.lim_uniform_seeds, len(times), W))
    for s in range(cfg.lim_uniform_seeds):
        X0 = _uniform(np.random.default_rng([SEED, 8, s]), n, 2)
        tp = integrate(cs.rhs, X0, (0.0, times[-1]), method="dopri5", retraction=cs.retraction, step=STEP,
                       save=SaveAt(t_eval=times, observe=False))
        for k, Y in enumerate(tp.y):
            um[s, k] = window_means(cs.attention_received(Y / np.linalg.norm(Y, axis=1, keepdims=True))[0], W)
    out["lim_uniform_means"] = um
    out["lim_uniform_continuum"] = window_means(-np.log((np.arange(n) + 0.5) / n), W)
    return out


def general_head(cfg):
    """Part 6's head: ``M = I + gen_perturb R_1``, ``V = I + gen_perturb R_2`` (``R`` standard normal, fixed by the
    study's seed; neither symmetric), softmax, exp, ``beta = sph_beta``."""
    R = np.random.default_rng([SEED, 6]).standard_normal((2, 3, 3))
    return [Head(np.eye(3) + cfg.gen_perturb * R[0], np.eye(3) + cfg.gen_perturb * R[1], beta=cfg.sph_beta,
                 normalization="softmax")]


def _sphere_w2(cfg, heads, particles, stream, tag):
    """CausalSpherePDE against causal particles on S^2: W2 per window of positions at ``sph_time``."""
    amp = cfg.sph_amp

    def prof(X, s):
        e = np.stack([np.cos(np.pi * s), np.sin(np.pi * s), np.zeros_like(s)], axis=-1)
        return (1 + amp * np.sum(X * e, axis=-1)) / (4 * np.pi)

    pde = CausalSpherePDE(heads, cfg.sph_lmax, positions=cfg.sph_positions)
    c0 = pde.project(lambda X, s: prof(X, np.full(X.shape[:-1], s)))
    t0 = time.perf_counter()
    tr = integrate(pde.rhs, pde.state(c0), (0.0, cfg.sph_time), method="dopri5",
                   step=StepControl(rtol=1e-8, atol=1e-10), save=SaveAt(t_eval=[0.0, cfg.sph_time], observe=False))
    pde_seconds = time.perf_counter() - t0
    c = pde.coefficients(tr.y[-1])
    w2 = np.empty((len(cfg.sph_ns), cfg.sph_seeds, 2))
    for a, n in enumerate(cfg.sph_ns):
        for s in range(cfg.sph_seeds):
            X0 = sample_sphere_tokens(np.random.default_rng([SEED, stream, a, s]), n, prof, (1 + amp) / (4 * np.pi))
            tp = integrate(particles.rhs, X0, (0.0, cfg.sph_time), method="dopri5", retraction=particles.retraction,
                           step=STEP, save=SaveAt(t_eval=[0.0, cfg.sph_time], observe=False))
            w2[a, s, 0] = sphere_w2_windows(tp.y[0], pde, c0, cfg.sph_windows, cfg.sph_grid).mean()
            Y = tp.y[-1] / np.linalg.norm(tp.y[-1], axis=1, keepdims=True)
            w2[a, s, 1] = sphere_w2_windows(Y, pde, c, cfg.sph_windows, cfg.sph_grid).mean()
    return {f"{tag}_w2": w2, f"{tag}_pde_status": tr.status, f"{tag}_pde_seconds": pde_seconds,
            f"{tag}_mass_drift": float(np.abs(pde.mass(c) - pde.mass(c0)).max()),
            f"{tag}_position_error": pde.position_error(c)}


def run_sphere_continuum(cfg):
    """Part 5: the zonal head (Funk-Hecke path), particles by the causal spectral sums."""
    heads = _head(cfg.sph_beta, 3)
    return _sphere_w2(cfg, heads, CausalSystem(heads, summation="spectral", kernel_tol=1e-9), 9, "sph")


def run_sphere_general(cfg):
    """Part 6: a general head (bi-spherical operators), particles by the direct causal sums, fresh seeds."""
    heads = general_head(cfg)
    return _sphere_w2(cfg, heads, CausalSystem(heads, summation="direct"), 10, "sphg")


PARTS = {"convergence": run_convergence, "parking": run_parking, "mean_field": run_mean_field,
         "lost_in_middle": run_lost_in_middle, "sphere": run_sphere_continuum, "sphere_general": run_sphere_general}


def run(out_dir: Path, quick: bool = False, parts=None) -> dict:
    """Run the study's ``parts`` (default all of :data:`PARTS`) into ``out_dir``; a subset replaces those parts'
    data in an existing ``data.npz`` of the same mode and keeps the rest (and their times)."""
    cfg = QUICK if quick else FULL
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seconds = {}
    data = {}
    if parts is not None and (out_dir / "data.npz").exists():
        old = load_json(out_dir / "data.json")
        if old["quick"] == quick:
            data = dict(np.load(out_dir / "data.npz"))
            seconds = dict(old["summary"]["seconds"])
    for name in (tuple(PARTS) if parts is None else tuple(parts)):
        t0 = time.perf_counter()
        data.update(PARTS[name](cfg))
        seconds[name] = time.perf_counter() - t0
    np.savez(out_dir / "data.npz", **{k: np.asarray(v) for k, v in data.items()})
    summary = {"seconds": seconds, "converged": int(np.isfinite(data["conv_T1"]).sum()),
               "runs": int(data["conv_T1"].size),
               "park_mean_primary": [float(x) for x in
                                     data["park_counts"][:, :, 1 + cfg.park_times.index(cfg.park_primary)].mean(1)]}
    save_json(out_dir / "data.json", {"config": asdict(cfg), "quick": quick, "summary": summary})
    return summary


if __name__ == "__main__":
    from studies.causal_attention.report import report

    main(run, report, Path(__file__).parent / "output", __doc__)
