"""Phase transitions of the noisy model: the Mun-Rosenzweig dichotomy, particle hysteresis, and beyond.

MODEL.md section 7 (issue 23 items 5 and 7).

(a) The dichotomy for one zonal mean exp head (``lambda = 1``) on ``S^{d-1}``, d = 2, 3, 4, 8, 64: ``beta_*^(d)``
    where the degree-1 branch's curvature ``nu_2`` changes sign
    (:func:`meanfield.analysis.phase_transition.beta_star_continuation`) against the Bessel root
    (:func:`~meanfield.analysis.phase_transition.beta_star_bessel`); the transition type at ``0.9`` and
    ``1.1 beta_*``; the window widths ``nu_fold - nu_#`` and ``nu_global - nu_#`` against ``beta / beta_*``
    (:func:`~meanfield.analysis.phase_transition.phase_transition`, each with its lmax-ladder check).
(b) Hysteresis from the particles (d = 3, ``beta = 2 beta_*^(3)``, spectral sums, ``geodesic_strang``): a
    piecewise-constant ramp of ``nu`` down from above ``nu_fold`` to below ``nu_#`` and back up
    (:func:`meanfield.workflow.ramp.noise_ramp`), the order parameter ``|mean x_i|`` at the end of every stage
    against the PDE branch ``b_1 / sqrt(3)``; jump locations per seed with Student-t intervals; escape times
    from uniform tokens at fixed ``nu`` near ``nu_#`` (censored at ``t_max``).
(c) Beyond the papers: softmax normalization (``nu_#``, type, ``nu_fold`` against beta; no free energy, so no
    ``nu_global``) and Sinkhorn normalization (the same, with ``nu_global`` from ``G = E_S - nu int rho log rho``;
    ``nu_#`` checked against the zero of the closed-form Sinkhorn ``sigma_1``), two heads of opposite signs
    (``lambda = [1, -0.3]``), degree-2 axisymmetric branches with their axisymmetric spectrum
    (:func:`~meanfield.analysis.equilibria.linear_spectrum`) and their full S^2 spectrum
    (:func:`meanfield.analysis.sphere_states.sphere_spectrum`).

Cost (2 shared cores): quick 17-35 s; full 10.6 min (638 s measured, machine shared: hysteresis 278 s, escape
273 s, fold hold 55 s, the PDE parts 31 s; data.json ``wall_seconds``).
Run from the repo root::

    python -m studies.phase_transitions.run [--quick]
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy.spatial.transform import Rotation

import meanfield as mf
from meanfield.analysis import equilibria as eq
from meanfield.analysis import phase_transition as pt
from meanfield.analysis import sphere_states as ss
from meanfield.analysis.stability import growth_rate
from meanfield.models.axisymmetric import AxisymmetricPDE
from meanfield.models.continuum import ContinuumPDE
from meanfield.workflow import ramp
from studies._common import main, mean_ci95, save_json


@dataclass(frozen=True)
class Settings:
    """Everything that differs between the quick and the full mode."""

    ds: tuple                 # dimensions of the dichotomy
    window_ratios: tuple      # beta / beta_* of the window widths
    # (b) hysteresis
    n: int                    # tokens
    seeds: int                # ramps
    dt: float                 # SDE step of the ramps
    down: tuple               # ramp segments (start, stop, step, stage_time), nu decreasing
    up: tuple                 # the same, nu increasing
    samples: int              # records per stage
    # (b) escape from uniform
    esc_n: int
    esc_seeds: int
    esc_offsets: tuple        # nu - nu_#
    esc_t_max: float
    esc_chunk: float          # stage length of the escape runs (the crossing is read inside it)
    esc_dt: float
    esc_more: tuple           # ((n, offsets), ...): more n (log growth of the escape time below nu_#, faster above)
    hold_offsets: tuple       # nu - nu_fold of the fold hold test (clustered tokens held at fixed nu)
    hold_seeds: int
    hold_time: float
    dt_check: tuple           # SDE steps of the step check (clustered state at nu = DT_CHECK_NU)
    dt_check_time: float
    # (c)
    softmax_betas: tuple
    two_head_betas: tuple
    deg2_amplitudes: tuple    # b_2 of the degree-2 states examined on S^2
    sphere_lmax: int
    # (b) hysteresis against n and the ramp rate (scale.py; cached per ramp)
    scale_ns: tuple = ()
    scale_factors: tuple = ()  # stage-time factors (2: a ramp twice as slow)
    scale_seeds: int = 0


QUICK = Settings(ds=(2, 3, 4, 8, 64), window_ratios=(1.1, 2.0),
                 n=2000, seeds=3, dt=0.025, down=((1.30, 0.90, 0.02, 1.0),), up=((0.92, 1.40, 0.02, 1.0),),
                 samples=3, esc_n=500, esc_seeds=3, esc_offsets=(-0.10, 0.03), esc_t_max=8.0, esc_chunk=2.0,
                 esc_dt=0.025, esc_more=((1000, (-0.10, 0.03)),), hold_offsets=(-0.02, 0.02), hold_seeds=1,
                 hold_time=15.0, dt_check=(0.05, 0.025), dt_check_time=4.0, softmax_betas=(2.0, 6.0), two_head_betas=(3.0,), deg2_amplitudes=(0.5,),
                 sphere_lmax=15, scale_ns=(600,), scale_factors=(1.0, 2.0), scale_seeds=2)
FULL = Settings(ds=(2, 3, 4, 8, 64), window_ratios=(1.05, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0),
                n=5000, seeds=10, dt=0.0125,
                down=((1.30, 1.10, 0.02, 1.0), (1.095, 0.90, 0.005, 1.5)),
                up=((0.92, 1.16, 0.02, 1.0), (1.165, 1.34, 0.005, 1.5)),
                samples=4, esc_n=1000, esc_seeds=10, esc_offsets=(-0.10, -0.03, 0.01, 0.03, 0.06),
                esc_t_max=60.0, esc_chunk=2.0, esc_dt=0.025, esc_more=((4000, (-0.03, 0.03)), (16000, (0.03,))),
                hold_offsets=(-0.02, 0.02), hold_seeds=10, hold_time=40.0, dt_check=(0.05, 0.025, 0.0125), dt_check_time=10.0,
                softmax_betas=(0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0), two_head_betas=(2.0, 3.0, 4.0, 6.0),
                deg2_amplitudes=(0.3, 0.8, 1.5, -0.4), sphere_lmax=31,
                scale_ns=(10000,), scale_factors=(1.0, 0.5, 2.0), scale_seeds=10)

D_PARTICLES = 3
DT_CHECK_NU = 1.15


# ------------------------------------------------------------------ (a) the dichotomy
def dichotomy(s: Settings) -> dict:
    rows, windows = [], []
    for d in s.ds:
        t0 = time.perf_counter()
        bc, bb = pt.beta_star_continuation(d), pt.beta_star_bessel(d)
        types = {}
        for ratio in (0.9, 1.1):
            c = pt.classify_transition(pt.phase_transition_model(d, ratio * bb))
            types[str(ratio)] = {"transition": c.transition, "nu_2": c.nu_2}
        rows.append(dict(d=d, beta_star_bessel=bb, beta_star_continuation=bc, rel_error=abs(bc / bb - 1),
                         types=types, seconds=time.perf_counter() - t0))
        for ratio in s.window_ratios:
            try:
                c = pt.phase_transition(d, ratio * bb)
                windows.append(dict(d=d, ratio=ratio, beta=ratio * bb, ok=True, nu_sharp=c.nu_sharp,
                                    nu_fold=c.nu_fold, nu_global=c.nu_global, transition=c.transition,
                                    lmax=c.lmax, change=c.discretization_change))
            except ValueError as exc:
                windows.append(dict(d=d, ratio=ratio, beta=ratio * bb, ok=False, error=str(exc)))
    return {"rows": rows, "windows": windows}


# ------------------------------------------------------------------ (b) the PDE branch and the particles
def pde_branch(beta, lmax=64, n_steps=120):
    """The degree-1 branch for d = 3: (nu, r = b_1 / sqrt 3) of the solved states and the classification."""
    pde = pt.phase_transition_model(D_PARTICLES, beta, lmax=lmax)
    states = [x for x in eq.branch_states(pde, pt._amplitudes(D_PARTICLES, 0.99, n_steps)) if x.success]
    nu = np.array([x.nu for x in states])
    r = np.array([x.b[1] for x in states]) / np.sqrt(D_PARTICLES)
    return nu, r, pt.phase_transition(D_PARTICLES, beta)


def window_spectra(beta, lmax=64, n_steps=120) -> dict:
    """Local stability of both states inside the window (the continuum, the paper's setting): the uniform state's
    sigma_1 (closed form, MODEL.md section 3) and the leading eigenvalue of the axisymmetric linearization
    (:func:`meanfield.analysis.equilibria.linear_spectrum`; the rotation modes m >= 1 of a cluster are neutral and
    not in it) at every solved state of the upper branch (past the fold) with nu_# < nu < nu_fold."""
    pde = pt.phase_transition_model(D_PARTICLES, beta, lmax=lmax)
    cls = pt.phase_transition(D_PARTICLES, beta)
    states = [x for x in eq.branch_states(pde, pt._amplitudes(D_PARTICLES, 0.99, n_steps)) if x.success]
    k = int(np.argmax([x.nu for x in states]))
    upper = [x for x in states[k + 1:] if cls.nu_sharp < x.nu < cls.nu_fold]
    lead = [float(eq.linear_spectrum(pde, x)[0].real) for x in upper]
    nus = [float(x.nu) for x in upper]
    sigma_1 = [float(growth_rate(1, [1.0], beta, nu=nu)) for nu in nus]
    return {"nu": nus, "cluster_leading_eigenvalue": lead, "uniform_sigma_1": sigma_1,
            "both_stable": bool(upper) and max(lead) < 0 and max(sigma_1) < 0}


HOLD_SEED_BASE = 20000
"""Seeds of the fold hold (uniform start, relaxation, hold: base, base + 1000, base + 2000, plus the seed index).
Fresh since the referee (issue 33): the first run used 300 / 3000 / 4000 + seed with 3 seeds; the rule (every seed
clustered at nu_fold - 0.02, dissolved at nu_fold + 0.02) is unchanged, the seeds are new and 10."""


def upper_branch(nu_b, r_b):
    """``r_upper(nu)`` of the stable clustered branch (past the fold), as an interpolant in ``nu``."""
    k = int(np.argmax(nu_b))
    nu_u, r_u = nu_b[k:][::-1], r_b[k:][::-1]           # increasing nu
    return lambda nu: np.interp(nu, nu_u, r_u, right=r_b[k])


def schedule(segments):
    out = []
    for a, b, step, T in segments:
        m = int(round(abs(b - a) / step)) + 1
        out += [(nu, T) for nu in np.linspace(a, b, m)]
    return np.array(out)


def run_ramp(heads, sched, X, seed, s, offset):
    """Consecutive stages of one schedule (nu, T) in runs of equal T; returns (nu, stage-end r, tokens)."""
    nus, ends = [], []
    k = 0
    while k < len(sched):
        j = k
        while j < len(sched) and sched[j, 1] == sched[k, 1]:
            j += 1
        res = ramp.noise_ramp(heads, X, sched[k:j, 0], sched[k, 1], dt=s.dt, seed=seed * 1000 + offset + k,
                              samples=s.samples, summation="spectral")
        nus += list(res.nus)
        ends += list(res.stage_end)
        X = res.X
        k = j
    return np.array(nus), np.array(ends), X


def jump(nus, r, level_of_nu, upward):
    """The first stage whose order parameter crosses half the upper branch (``upward``: rises above it on the
    down ramp; else falls below it on the up ramp); NaN if it never does."""
    lev = level_of_nu(nus)
    hit = np.nonzero(r > lev if upward else r < lev)[0]
    return float(nus[hit[0]]) if hit.size else float("nan")


def hysteresis(s: Settings, beta, r_up) -> dict:
    heads = mf.scalar_heads([1.0], D_PARTICLES, beta=beta)
    down, up = schedule(s.down), schedule(s.up)
    half = lambda nu: 0.5 * r_up(nu)      # noqa: E731  (past the fold: half of r at the fold)
    R_down, R_up, J_down, J_up = [], [], [], []
    t0 = time.perf_counter()
    for seed in range(s.seeds):
        X = mf.initial.uniform_sphere(s.n, D_PARTICLES, seed=500 + seed)
        nd, rd, X = run_ramp(heads, down, X, seed, s, 0)
        nu_up, ru, X = run_ramp(heads, up, X, seed, s, 500)
        R_down.append(rd)
        R_up.append(ru)
        J_down.append(jump(nd, rd, half, True))
        J_up.append(jump(nu_up, ru, half, False))
    return dict(nu_down=down[:, 0], nu_up=up[:, 0], r_down=np.array(R_down), r_up=np.array(R_up),
                jump_down=np.array(J_down), jump_up=np.array(J_up), seconds=time.perf_counter() - t0,
                ramp_rate_slow_down=float(s.down[-1][2] / s.down[-1][3]),
                ramp_rate_slow_up=float(s.up[-1][2] / s.up[-1][3]))


def dt_check(s: Settings, beta, r_up) -> dict:
    """The SDE step's bias on the clustered state: the order parameter at ``DT_CHECK_NU`` (second half of a run
    from a concentrated start, one seed per step) against the PDE branch."""
    heads = mf.scalar_heads([1.0], D_PARTICLES, beta=beta)
    X = mf.initial.uniform_sphere(s.n, D_PARTICLES, seed=42) + np.array([0.0, 0.0, 3.0])
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    rows = []
    for dt in s.dt_check:
        res = ramp.noise_ramp(heads, X, [DT_CHECK_NU], s.dt_check_time, dt=dt, seed=43, samples=11,
                              summation="spectral")
        rows.append(dict(dt=dt, r=float(res.stage_mean[0])))
    return {"nu": DT_CHECK_NU, "pde_r": float(r_up(DT_CHECK_NU)), "rows": rows}


def escape(s: Settings, beta, nu_sharp, r_up, n, offsets) -> dict:
    """Escape times from i.i.d. uniform tokens (n) at ``nu_# + offset``: the first time the order parameter
    exceeds half the upper branch; ``inf`` (stored as null) if not by ``esc_t_max`` (censored)."""
    heads = mf.scalar_heads([1.0], D_PARTICLES, beta=beta)
    stages = int(np.ceil(s.esc_t_max / s.esc_chunk))
    out = []
    t0 = time.perf_counter()
    for off in offsets:
        nu = nu_sharp + off
        level = 0.5 * float(r_up(nu))
        times = []
        for seed in range(s.esc_seeds):
            X = mf.initial.uniform_sphere(n, D_PARTICLES, seed=900 + seed)
            res = ramp.noise_ramp(heads, X, np.full(stages, nu), s.esc_chunk, dt=s.esc_dt, seed=7000 + seed,
                                  samples=9, summation="spectral", stop_above=level)
            times.append(ramp.first_crossing(res.times, res.order, level))
        out.append(dict(offset=off, nu=nu, n=n, level=level, times=times))
    return {"runs": out, "seconds": time.perf_counter() - t0}


def fold_hold(s: Settings, beta, nu_fold, r_up) -> dict:
    """The fold without a ramp: clustered tokens (relaxed at ``nu_fold - 0.05``) held at ``nu_fold + offset`` for
    ``hold_time``; the order parameter at the end (the stage mean of the last tenth) against half the branch."""
    heads = mf.scalar_heads([1.0], D_PARTICLES, beta=beta)
    rows = []
    t0 = time.perf_counter()
    for seed in range(s.hold_seeds):
        X = mf.initial.uniform_sphere(s.n, D_PARTICLES, seed=HOLD_SEED_BASE + seed) + np.array([0.0, 0.0, 3.0])
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        X = ramp.noise_ramp(heads, X, [nu_fold - 0.05], 5.0, dt=s.dt, seed=HOLD_SEED_BASE + 1000 + seed,
                            summation="spectral").X
        for off in s.hold_offsets:
            res = ramp.noise_ramp(heads, X, [nu_fold + off], s.hold_time, dt=s.dt, seed=HOLD_SEED_BASE + 2000 + seed,
                                  samples=21,
                                  summation="spectral")
            rows.append(dict(seed=seed, offset=off, nu=nu_fold + off, r_start=float(res.order[0, 0]),
                             r_end=float(res.order[0, -3:].mean()), half_branch=0.5 * float(r_up(nu_fold + off)),
                             trace=res.order[0]))
    return {"rows": rows, "seconds": time.perf_counter() - t0}


# ------------------------------------------------------------------ (c) beyond the papers
def normalization_scan(s: Settings, normalization: str, d=3) -> dict:
    """The classification of one zonal exp head under ``normalization`` (softmax: no free energy, so no
    nu_global; Sinkhorn: ``G = E_S - nu int rho log rho``) at the betas of ``s.softmax_betas``."""
    rows = []
    for beta in s.softmax_betas:
        try:
            c = pt.phase_transition(d, beta, normalization)
            rows.append(dict(beta=beta, ok=True, nu_sharp=c.nu_sharp, nu_2=c.nu_2, transition=c.transition,
                             nu_fold=c.nu_fold, nu_global=c.nu_global, lmax=c.lmax,
                             sigma_1_at_nu_sharp=float(growth_rate(1, [1.0], beta, normalization, c.nu_sharp, d=d)),
                             sigma_1_scale=float(growth_rate(1, [1.0], beta, normalization, 0.0, d=d))))
        except ValueError as exc:
            rows.append(dict(beta=beta, ok=False, error=str(exc)))
    ok = [r for r in rows if r["ok"]]
    return {"d": d, "normalization": normalization, "rows": rows,
            "all_continuous": bool(ok) and all(r["transition"] == "continuous" for r in ok),
            "max_nu_2": max((r["nu_2"] for r in ok), default=float("nan")),
            "nu_sharp_is_the_zero_of_sigma_1": bool(ok) and all(
                abs(r["sigma_1_at_nu_sharp"]) <= 1e-12 * abs(r["sigma_1_scale"]) for r in ok)}


def two_heads(s: Settings, lambdas=(1.0, -0.3), d=3, lmax=64) -> dict:
    model = lambda beta: AxisymmetricPDE(mf.scalar_heads(list(lambdas), d, beta=beta), d, lmax)   # noqa: E731
    rows = []
    for beta in s.two_head_betas:
        try:
            c = pt.classify_transition(model(beta))
            rows.append(dict(beta=beta, ok=True, **{k: getattr(c, k) for k in ("nu_sharp", "nu_2", "transition",
                                                                               "nu_fold", "nu_global")}))
        except (RuntimeError, ValueError) as exc:
            rows.append(dict(beta=beta, ok=False, error=str(exc)))
    f = lambda beta: pt.branch_curvature(model(beta))   # noqa: E731
    try:
        bstar = float(optimize.brentq(f, 0.5, 8.0, xtol=1e-12, rtol=1e-12))
    except ValueError as exc:
        bstar = f"not bracketed in [0.5, 8]: {exc}"
    types = {}
    if not isinstance(bstar, str):
        for ratio in (0.9, 1.1):
            types[str(ratio)] = pt.classify_transition(model(ratio * bstar)).transition
    return {"lambdas": list(lambdas), "d": d, "rows": rows, "beta_star_continuation": bstar, "types": types,
            "type_flips": types.get("0.9") == "continuous" and types.get("1.1") == "discontinuous",
            "ordering_holds": all(r["nu_sharp"] < r["nu_global"] < r["nu_fold"] for r in rows
                                  if r["ok"] and r["transition"] == "discontinuous")}


def _to_sphere(ax, b, grid):
    """Coefficients on ``grid`` of the axisymmetric density ``f`` (relative to sigma) with coefficients ``b``."""
    t = np.cos(grid.theta)
    f = b @ ax.basis(t)                                           # (nlat,)
    return grid.analysis(np.repeat((f / (4 * np.pi))[:, None], grid.nlon, axis=1))


def sphere_check(ax, b, nu, lmax, k=8):
    """Polish the axisymmetric state on the full S^2 and return its leading spectrum with the rotation parts."""
    pde = ContinuumPDE(ax.heads, lmax=lmax, nu=nu)
    st = ss.solve_sphere_state(pde, _to_sphere(ax, b, pde.grid))      # at the model's nu
    if not st.success:
        return dict(ok=False, message=st.message)
    ev, rot = ss.sphere_spectrum(pde, st.rho_lm, k=k)
    return dict(ok=True, message=st.message, removed=st.removed, eigenvalues_re=ev.real, eigenvalues_im=ev.imag,
                rotation=rot, newton=st.newton, krylov=st.krylov)


def degree_two(s: Settings, beta, d=3, lmax=64) -> dict:
    ax = pt.phase_transition_model(d, beta, lmax=lmax)
    out = {"nu_sharp_2": eq.nu_sharp(ax, 2), "states": []}
    up_deg1 = None
    for a in s.deg2_amplitudes:
        st = eq.branch_state(ax, a, 2)
        row = dict(amplitude=a, ok=st.success, message=st.message)
        if st.success:
            ev = eq.linear_spectrum(ax, st)
            row.update(nu=st.nu, axisym_top=ev[:4].real, b1=st.b[1])
            row["sphere"] = sphere_check(ax, st.b, st.nu, s.sphere_lmax)
        out["states"].append(row)
    # the stable degree-1 state at the same beta as the reference (two neutral rotations, the rest negative)
    st1 = eq.degree_one_state(ax, 0.85 * np.sqrt(d))
    if st1.success:
        up_deg1 = dict(nu=st1.nu, axisym_top=eq.linear_spectrum(ax, st1)[:4].real,
                       sphere=sphere_check(ax, st1.b, st1.nu, s.sphere_lmax))
    out["degree_one_reference"] = up_deg1
    return out


def degree_three(s: Settings, beta, n_amplitudes=50, a_max=0.2) -> dict:
    """Branch switching beyond degree 1 on the full S^2: from the degree-3 bifurcation of the uniform state
    (``nu_3``, where sigma_3 = 0) along the xyz pattern (``Im rho_32`` held), the tetrahedral branch."""
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], D_PARTICLES, beta), lmax=s.sphere_lmax)
    g = pde.grid
    nu3 = optimize.brentq(lambda nu: growth_rate(3, [1.0], beta, nu=nu), 1e-3, 5.0)
    uniform = mf.densities.uniform_density(g)
    amps = np.linspace(a_max / n_amplitudes, a_max, n_amplitudes)
    start = uniform + 1j * amps[0] * (np.arange(g.nalm) == g.index(3, 2))
    t0 = time.perf_counter()
    br = ss.sphere_branch(eq.at_noise(pde, nu3), amps, start, mode=(3, 2, "im"))
    seconds = time.perf_counter() - t0
    ok = [x for x in br if x.success]
    nus = np.array([x.nu for x in ok])
    slope = float(np.polyfit(np.log(amps[:4]), np.log(np.abs(nus[:4] - nu3)), 1)[0]) if len(ok) >= 4 else np.nan
    out = dict(nu_3=nu3, amplitudes=amps[:len(ok)].tolist(), nu=nus.tolist(), slope=slope, seconds=seconds,
               solved=len(ok), asked=len(amps), removed=[int(x.removed) for x in ok],
               newton=[int(x.newton) for x in ok], krylov=[int(x.krylov) for x in ok])
    if ok:
        last = ok[-1]
        V = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) / np.sqrt(3)
        P = mf.initial.uniform_sphere(400, 3, seed=1)
        f0 = pde.density_at(last.rho_lm, P)
        sym = []
        for axis, angle, flip in (([1, 1, 1], 2 * np.pi / 3, False), ([1, 0, 0], np.pi, False),
                                  ([0, 0, 1], np.pi / 2, True)):
            R = Rotation.from_rotvec(angle * np.asarray(axis) / np.linalg.norm(axis)).as_matrix() @ (np.diag([1.0, 1.0, -1.0]) if flip else np.eye(3))
            sym.append(float(np.abs(pde.density_at(last.rho_lm, P @ R.T) - f0).max() / f0.max()))
        vals, _ = ss.sphere_spectrum(pde, last, k=6)
        out.update(symmetry_errors=sym, at_clusters=pde.density_at(last.rho_lm, -V).tolist(),
                   between=pde.density_at(last.rho_lm, V).tolist(), top_eigenvalues=vals.real.tolist(),
                   fold_index=int(np.argmax(nus)), nu_fold_3_sampled=float(nus.max()),
                   **locate_fold(pde, ok, amps[:len(ok)], mode=(3, 2, "im")))
    return out


def locate_fold(pde, states, amps, mode) -> dict:
    """The fold of an amplitude-held branch located, not sampled: Brent's maximization of ``nu(a)`` over the
    bracket of the largest sampled ``nu`` (each ``nu(a)`` an amplitude-held solve warm-started from the nearest
    sampled state, to ``tol = 1e-12``; ``xtol`` 1e-10 in the amplitude: ``nu`` is flat there, so its error is
    about the square of that).  ``fold_located`` is False (and ``nu_fold_3`` the sampled maximum) when the
    maximum is at an end of the samples or a solve fails."""
    nus = np.array([x.nu for x in states])
    k = int(np.argmax(nus))
    if k in (0, len(nus) - 1):
        return dict(nu_fold_3=float(nus[k]), a_fold_3=float(amps[k]), fold_located=False)

    def nu_at(a):
        j = int(np.argmin(np.abs(amps - a)))
        st = ss.solve_sphere_state(pde, states[j], tol=1e-12, amplitude=a, mode=mode)
        if not st.success:
            raise RuntimeError(st.message)
        return st.nu

    try:
        opt = optimize.minimize_scalar(lambda a: -nu_at(a), bracket=(amps[k - 1], amps[k], amps[k + 1]),
                                       method="brent", tol=1e-10)
    except RuntimeError:
        return dict(nu_fold_3=float(nus[k]), a_fold_3=float(amps[k]), fold_located=False)
    return dict(nu_fold_3=float(-opt.fun), a_fold_3=float(opt.x), fold_located=True)


# ------------------------------------------------------------------ the study
def run(out_dir: Path, quick: bool = False) -> dict:
    s = QUICK if quick else FULL
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    wall = {}
    t0 = time.perf_counter()
    a = dichotomy(s)
    wall["dichotomy"] = time.perf_counter() - t0

    beta = 2 * pt.beta_star_bessel(D_PARTICLES)
    t0 = time.perf_counter()
    nu_b, r_b, cls = pde_branch(beta)
    k = int(np.argmax(nu_b))
    r_up = upper_branch(nu_b, r_b)
    wall["pde_branch"] = time.perf_counter() - t0
    hy = hysteresis(s, beta, r_up)
    wall["hysteresis"] = hy["seconds"]
    t0 = time.perf_counter()
    dtc = dt_check(s, beta, r_up)
    wall["dt_check"] = time.perf_counter() - t0
    es = escape(s, beta, cls.nu_sharp, r_up, s.esc_n, s.esc_offsets)
    for n2, offsets in s.esc_more:
        es2 = escape(s, beta, cls.nu_sharp, r_up, n2, offsets)
        es["runs"] += es2["runs"]
        es["seconds"] += es2["seconds"]
    wall["escape"] = es["seconds"]
    hold = fold_hold(s, beta, cls.nu_fold, r_up)
    wall["fold_hold"] = hold["seconds"]
    spectra = window_spectra(beta)
    from studies.phase_transitions.scale import hysteresis_scale
    hs = hysteresis_scale(out_dir, s, s.scale_ns, s.scale_factors, s.scale_seeds, beta, r_up, progress=None)
    wall["hysteresis_scale"] = sum(r["seconds"] for r in hs["rows"])

    t0 = time.perf_counter()
    c = {"softmax": normalization_scan(s, "softmax"), "sinkhorn": normalization_scan(s, "sinkhorn"),
         "two_heads": two_heads(s), "degree_two": degree_two(s, beta), "degree_three": degree_three(s, beta)}
    wall["beyond"] = time.perf_counter() - t0

    jd, ju = mean_ci95(hy["jump_down"]), mean_ci95(hy["jump_up"])
    summary = {
        "beta_star_max_rel_error": max(r["rel_error"] for r in a["rows"]),
        "type_flips_at_beta_star": all(r["types"]["0.9"]["transition"] == "continuous"
                                       and r["types"]["1.1"]["transition"] == "discontinuous" for r in a["rows"]),
        "ordering_holds": all(w["nu_sharp"] < w["nu_global"] < w["nu_fold"] for w in a["windows"] if w["ok"]),
        "beta": beta, "nu_sharp": cls.nu_sharp, "nu_fold": cls.nu_fold, "nu_global": cls.nu_global,
        "jump_down": list(jd), "jump_up": list(ju), "n": s.n, "seeds": s.seeds,
        "escaped": {f"n={e['n']},{e['offset']:+g}": int(np.isfinite(e["times"]).sum()) for e in es["runs"]},
        "fold_hold": [(h["offset"], h["r_end"], h["half_branch"]) for h in hold["rows"]],
        "wall_seconds": wall,
    }
    np.savez_compressed(out_dir / "data.npz", branch_nu=nu_b, branch_r=r_b, branch_fold_index=k,
                        nu_down=hy["nu_down"], nu_up=hy["nu_up"], r_down=hy["r_down"], r_up=hy["r_up"],
                        jump_down=hy["jump_down"], jump_up=hy["jump_up"])
    save_json(out_dir / "data.json", {"summary": summary, "settings": asdict(s), "dichotomy": a,
                                      "classification_d3": cls.to_dict(), "escape": es, "dt_check": dtc, "fold_hold": hold,
                                      "window_spectra": spectra,
                                      "hysteresis": {k: v for k, v in hy.items() if k.startswith(("ramp", "sec"))},
                                      "beyond": c, "hysteresis_scale": hs})
    return summary


if __name__ == "__main__":
    from studies.phase_transitions.report import report
    main(run, report, Path(__file__).parent / "output", __doc__)
