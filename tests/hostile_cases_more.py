"""Hostile-input cases (see ``hostile_registry``): the analysis modules added after the first round of issue 26
(the step rules' equiangular reduced ODEs, the linear stability closed forms, pseudo-arclength continuation and
the stationary states on the full S^2); their modules are ``hostile_registry.MORE_MODULES``."""

from __future__ import annotations

import functools

import numpy as np
from hostile_registry import (  # noqa: F401
    H_SINGLE,
    HUGE,
    INF,
    NAN,
    X3,
    Bad,
    _types,
    array,
    choice,
    entry,
    flag,
    heads,
    int_pos,
    real_finite,
    real_nonneg,
    real_pos,
    seed,
    tokens,
)

import meanfield as mf
from meanfield.analysis import cluster_tracking as _tk
from meanfield.analysis import continuation as _ct
from meanfield.analysis import equilibria as _eq
from meanfield.analysis import normalization as _no
from meanfield.analysis import sphere_states as _ss
from meanfield.analysis import stability as _sb
from meanfield.core import sinkhorn as _sk
from meanfield.workflow import ramp as _rp

_LAMBDAS = [None, "x", [], [NAN], [INF], [1j], [[1.0, 2.0]]]          # head strengths: a non-empty 1-d real list
_RHO = _types(NAN, INF, 1.5, -1.0)                                      # a cosine of n = 4 tokens: in [-1/3, 1]

# --------------------------------------------------------------------------------- normalization (step rules)
_EQ = dict(rule="post_ln", lambdas=[1.0], beta=1.0, n=4)
entry("normalization.equiangular_rule_rates", _no.equiangular_rule_rates, lambda: dict(rho=0.5, r=1.0, **_EQ),
      bad={"rho": _RHO, "r": _types(NAN, INF, 0.0, -1.0), "rule": choice(), "lambdas": _LAMBDAS, "beta": real_pos(),
           "n": int_pos(2), "normalization": choice("sinkhorn")}, names={"lambdas": ("lambda",)})
entry("normalization.solve_equiangular_rule", _no.solve_equiangular_rule,
      lambda: dict(rho0=0.5, t=np.linspace(0.0, 1.0, 5), **_EQ),
      bad={"rho0": _RHO, "t": [None, "t", [], [NAN], [1.0, 0.5], [-1.0, 0.0], [[0.0, 1.0]], [0.0, 1j]],
           "rule": choice(), "lambdas": _LAMBDAS, "beta": real_pos(), "n": int_pos(2),
           "normalization": choice(), "r0": real_pos(), "rtol": real_pos(), "atol": real_pos()},
      names={"lambdas": ("lambda",)})
entry("normalization.asymptotic_law", _no.asymptotic_law, lambda: dict(_EQ),
      bad={"rule": choice(), "lambdas": [*_LAMBDAS, [-1.0]], "beta": real_pos(), "n": int_pos(2),
           "normalization": choice()}, names={"lambdas": ("lambda",)})

# --------------------------------------------------------------------------------- stability (closed forms)
_DEG = Bad([None, "1", True, 1.5, NAN, -1, [1.5], [-2], [1j]])           # degrees: integers >= 0
entry("stability.sphere_area", _sb.sphere_area, lambda: dict(d=3), bad={"d": int_pos(1)},
      edge={"d": [343, 344, HUGE]})         # Gamma(d/2) overflows near d = 344: the area underflows to 0 instead
entry("stability.funk_hecke_exp", _sb.funk_hecke_exp, lambda: dict(l=np.arange(4), a=2.0, d=3),
      bad={"l": _DEG, "a": _types(NAN, INF), "d": int_pos(2)})
entry("stability.funk_hecke_relu", _sb.funk_hecke_relu, lambda: dict(l=np.arange(4), a=2.0, d=3, power=1),
      bad={"l": _DEG, "a": _types(NAN, INF), "d": int_pos(2), "power": int_pos(0)},
      huge={"l": [[HUGE]]})
entry("stability.growth_rate", _sb.growth_rate, lambda: dict(l=np.arange(1, 5), lambdas=[1.0, -0.5], beta=1.0),
      bad={"l": _DEG, "lambdas": _LAMBDAS, "beta": real_pos(), "normalization": choice(), "nu": real_nonneg(),
           "d": int_pos(2)}, names={"lambdas": ("lambda",)})
entry("stability.growth_rate_heads", _sb.growth_rate_heads,
      lambda: dict(l=np.arange(1, 5), heads=mf.scalar_heads([1.0, -0.5], 3), nu=0.1),
      bad={"l": _DEG, "heads": [None, "heads", (), np.eye(3), (mf.Head(np.diag([1.0, 2.0, 3.0]), np.eye(3)),)],
           "nu": real_nonneg()})
entry("stability.most_unstable_degree", _sb.most_unstable_degree, lambda: dict(lambdas=[1.0], beta=2.0),
      bad={"lambdas": _LAMBDAS, "beta": real_pos(), "normalization": choice(), "nu": real_nonneg(),
           "d": int_pos(2), "lmax": int_pos(1)}, huge={"lmax": [HUGE]}, names={"lambdas": ("lambda",)})
entry("stability.critical_noise", _sb.critical_noise, lambda: dict(lambdas=[1.0], beta=2.0),
      bad={"lambdas": _LAMBDAS, "beta": real_pos(), "normalization": choice(), "d": int_pos(2), "lmax": int_pos(1)},
      huge={"lmax": [HUGE]}, names={"lambdas": ("lambda",)})

# --------------------------------------------------------------------------------- continuation
# the fold of u^3 - u + p = 0 (tests/test_continuation.py); F and jacobian are the caller's callables: fuzzed
# through their values (a callable that is no callable), the numbers with the foreign types
_F = lambda u, p: np.array([u[0] ** 3 - u[0] + p])                                 # noqa: E731
_J = lambda u, p: (np.array([[3 * u[0] ** 2 - 1]]), np.array([1.0]))              # noqa: E731
_U0 = np.array([-1.3247179572447460])                                               # the real root at p = 1
entry("continuation.continue_branch", _ct.continue_branch,
      lambda: dict(F=_F, jacobian=_J, u0=_U0, p0=1.0, ds=0.05, ds_max=0.1, p_range=(-1.0, 1.0), max_steps=20,
                   direction=-1),
      bad={"F": [None, "F", 3.0], "jacobian": [None, "J", 3.0], "u0": [None, "u", [NAN], [1j], np.array([1.0])],
           "p0": real_finite(), "ds": real_pos(), "ds_min": real_pos(), "ds_max": real_pos(),
           "p_range": [None, "r", (1.0,), (1.0, -1.0), (NAN, 1.0), ("a", 1.0)], "max_steps": int_pos(1),
           "tol": real_pos(), "tol_s": real_pos(), "direction": [None, "1", 2, 0, True, NAN],
           "t0": [np.zeros(2), [NAN, 1.0], [1.0], "t"], "stop": ["stop", 3]},
      huge={"max_steps": [HUGE]},             # the memory of max_steps points, estimated before the march
      edge={"ds_max": [1e300]},               # steps that overflow F are halved: a branch, never a traceback
      names={"u0": ("(u0, p0)",), "p0": ("(u0, p0)",)})
entry("continuation.tangent", _ct.tangent, lambda: dict(Fu=np.array([[2.0]]), Fp=np.array([1.0])),
      bad={"Fu": [None, "F", np.array([[NAN]]), np.array([[1j]]), np.ones((1, 2)), np.ones(1)],
           "Fp": [None, "F", np.array([INF]), np.ones(3)], "previous": ["p", [NAN, 1.0], np.ones(5)]})


@functools.cache
def _BP():
    F = lambda x, p: np.array([x[0] * (x[0] ** 2 - p), x[1] - p])                    # noqa: E731
    J = lambda x, p: (np.array([[3 * x[0] ** 2 - p, 0.0], [0.0, 1.0]]), np.array([-x[0], -1.0]))  # noqa: E731
    br = _ct.continue_branch(F, J, np.array([0.0, -1.0]), -1.0, ds=0.07, ds_max=0.1, p_range=(-1, 1), max_steps=100)
    return F, J, br.branch_points[0]


entry("continuation.switch_branch", _ct.switch_branch,
      lambda: dict(F=_BP()[0], jacobian=_BP()[1], point=_BP()[2], side=1.0, p_range=(-1, 1), max_steps=10),
      bad={"point": [None, "bp"], "side": [None, "1", 0, 2, True, NAN], "max_steps": int_pos(1)},
      huge={"max_steps": [HUGE]})

# --------------------------------------------------------------------------------- noise ramps and Sinkhorn scalings
# (their modules are still in hostile_registry.MODULES_NOT_FUZZED: these entries fuzz their callables all the same)
entry("ramp.noise_ramp", _rp.noise_ramp,
      lambda: dict(heads=H_SINGLE(), X0=X3(), nus=[0.5], stage_time=0.1, dt=0.05, seed=0, samples=3,
                   summation="direct"),
      bad={"heads": lambda b: heads(b["heads"]), "X0": lambda b: tokens(X3()),
           "nus": [None, "nus", [], [NAN], [INF], [0.0], [-0.5], [1j], [[0.5]]], "stage_time": real_pos(),
           "dt": real_pos(), "seed": seed(), "samples": int_pos(2), "method": choice("rk4"),
           "summation": choice(), "stop_above": real_pos()},
      huge={"samples": [HUGE], "dt": [1e-12], "stage_time": [1e12], "nus": [np.full(10**7, 0.5)]})
_T, _V = np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 0.2, 0.6, 0.9])
entry("ramp.first_crossing", _rp.first_crossing, lambda: dict(times=_T, values=_V, level=0.4),
      bad={"times": lambda b: array(_T, extra=(_T[::-1].copy(), np.array([]))), "values": lambda b: array(_V),
           "level": real_finite()})
entry("ramp.order_parameter", _rp.order_parameter, lambda: dict(X=X3()), bad={"X": lambda b: tokens(X3())})
entry("ramp.stage_seed", _rp.stage_seed, lambda: dict(seed=7, stage=1), bad={"seed": seed(7.0), "stage": int_pos(0)})

@functools.cache
def _SK():
    """A positive definite kernel on 4 tokens."""
    return np.exp(X3()[:4] @ X3()[:4].T)


entry("sinkhorn.solve_scaling", _sk.solve_scaling, lambda: dict(apply=lambda f: _SK() @ f / 4, n=4),
      bad={"apply": [None, "K", 3.0, lambda f: np.ones(3)], "n": int_pos(1, (), (2, 0), "4"),
           "apply_t": ["K", 3.0, lambda f: f[:2]], "tol": real_pos(), "maxiter": int_pos(1), "where": [None, 3],
           "start": [np.full(4, -1.0), [NAN] * 4, np.ones(3), "s", np.ones(4) * 1j]},
      huge={"n": [HUGE, (HUGE, HUGE)]})


# --------------------------------------------------------------------------------- sphere states
@functools.cache
def SPDE():
    return mf.ContinuumPDE(mf.scalar_heads([1.0], 3, 4.0), lmax=8, kernel_tol=1e-4)   # 8.5e-5 truncated: small


@functools.cache
def SPDE_NU():
    """SPDE at nu = 0.5 (the Gibbs functions take the noise from the model)."""
    return _eq.at_noise(SPDE(), 0.5)


@functools.cache
def S_RHO():
    """A mass-1 state near a degree-1 cluster on SPDE's grid."""
    g = SPDE().grid
    return g.analysis((1.0 + 0.3 * g.nodes[..., 2]) / (4 * np.pi))


@functools.cache
def _pde_bad():
    """Models without a potential: another model, a general head that is no gradient, the quadrature path (built
    lazily, on first use)."""
    return [None, "pde", mf.CirclePDE(mf.scalar_heads([1.0], 2), kmax=8, kernel_tol=1e-6),
            mf.ContinuumPDE([mf.Head(np.diag([1.0, 0.5, 0.2]), np.diag([1.0, 0.7, 0.2]))], lmax=4),   # V != c M
            mf.ContinuumPDE(mf.scalar_heads([1.0], 3, 4.0), lmax=8, summation="quadrature")]


_PDE_BAD = lambda b: _pde_bad()                                                      # noqa: E731
_RHO_LM = lambda b: array(S_RHO(), complex_ok=True)                                  # noqa: E731
_PDE_BAD_NU = lambda b: _pde_bad() + [SPDE()]                                       # noqa: E731  (nu = 0)
entry("sphere_states.gibbs_map", _ss.gibbs_map, lambda: dict(pde=SPDE_NU(), state=S_RHO()),
      bad={"pde": _PDE_BAD_NU, "state": _RHO_LM}, names={"state": ("rho_lm",), "pde": ("pde", "nu")})
entry("sphere_states.GibbsProblem", _ss.GibbsProblem, lambda: dict(pde=SPDE()),
      bad={"pde": lambda b: _pde_bad() + [mf.ContinuumPDE(mf.scalar_heads([1.0], 3, 2.0, normalization="softmax"),
                                                           lmax=8)]})
entry("sphere_states.gibbs_problem_cost", _ss.gibbs_problem_cost, lambda: dict(lmax=8, nodes=162),
      bad={"lmax": int_pos(0), "nodes": int_pos(1), "jacobians": int_pos(0)})
entry("sphere_states.symmetry_axes", _ss.symmetry_axes, lambda: dict(pde=SPDE()), bad={"pde": [None, "pde"]})
entry("sphere_states.rotation_generators", _ss.rotation_generators, lambda: dict(grid=SPDE().grid, rho_lm=S_RHO()),
      bad={"grid": [None, "grid"], "rho_lm": _RHO_LM})
entry("sphere_states.sphere_resolution_error", _ss.sphere_resolution_error,
      lambda: dict(pde=SPDE_NU(), state=S_RHO()), bad={"pde": _PDE_BAD_NU, "state": _RHO_LM},
      names={"state": ("rho_lm",), "pde": ("pde", "nu")})
entry("sphere_states.solve_sphere_state", _ss.solve_sphere_state,
      lambda: dict(pde=SPDE_NU(), rho_lm0=S_RHO(), maxiter=3),
      bad={"pde": _PDE_BAD_NU, "rho_lm0": lambda b: array(S_RHO(), complex_ok=True, extra=(2.0 * S_RHO(),)),
           "tol": real_pos(), "maxiter": int_pos(1), "phase": flag(),
           "krylov_maxiter": int_pos(1), "amplitude": real_finite(),
           "mode": [None, "m", (0, 0, "re"), (1, 2, "re"), (1, 0, "bogus"), (1, 0, "im"), (99, 0, "re")]},
      names={"mode": ("mode", "amplitude"), "pde": ("pde", "nu")}, finite=False)
entry("sphere_states.sphere_spectrum", _ss.sphere_spectrum, lambda: dict(pde=SPDE_NU(), state=S_RHO(), k=3),
      bad={"pde": _PDE_BAD, "state": _RHO_LM, "k": int_pos(1), "h": real_pos()},
      names={"state": ("rho_lm",)}, huge={"k": [HUGE]})
entry("sphere_states.sphere_block_spectrum", _ss.sphere_block_spectrum,
      lambda: dict(pde=SPDE_NU(), state=SPDE().grid.analysis(np.full(SPDE().grid.shape, 1 / (4 * np.pi))), m=1),
      bad={"pde": _PDE_BAD, "state": _RHO_LM, "m": int_pos(0, 99), "h": real_pos()}, names={"state": ("rho_lm",)})
entry("sphere_states.sphere_branch", _ss.sphere_branch,
      lambda: dict(pde=SPDE_NU(), amplitudes=[0.1], start=S_RHO(), maxiter=3),
      bad={"pde": _PDE_BAD_NU, "amplitudes": [None, "a", [NAN], [1j]], "start": _RHO_LM,
           "tol": real_pos(), "maxiter": int_pos(1), "mode": [None, "m", (0, 0, "re"), (1, 0, "bogus")]},
      names={"amplitudes": ("amplitude",), "start": ("rho_lm0",), "mode": ("mode",), "pde": ("pde", "nu")},
      finite=False)


# --------------------------------------------------------------------------------- workflow: preflight, view
from meanfield.workflow import preflight as _pf  # noqa: E402
from meanfield.workflow import view as _vw
from meanfield.workflow.config import RunConfig  # noqa: E402

_RUN = {"pde": {"lmax": 11}, "particles": {"n": 40}, "initial": {"kappas": [1.0]}, "seed": 3,
        "integrator": {"t_final": 0.1, "n_frames": 2}, "outputs": {"figures": False, "animation": False}}


@functools.cache
def RUN_CFG():
    return RunConfig.from_dict(_RUN)


@functools.cache
def RUN_FILE():
    """A small run's result file (the run of hostile_cases_analysis.RUN_DS) and a file of each wrong kind: not
    NetCDF, not meanfield, X transposed, a NaN time, and (huge.nc) coefficients declared (never written) with
    l = m = 20001."""
    import tempfile
    from pathlib import Path

    import netCDF4
    from hostile_cases_analysis import RUN_DS

    from meanfield.workflow import results

    d = Path(tempfile.mkdtemp())
    (d / "notes.nc").write_text("not a NetCDF file\n")
    __import__("xarray").Dataset({"x": ("i", np.arange(3.0))}).to_netcdf(d / "other.nc")
    ds = RUN_DS()
    ds.assign(X=ds["X"].transpose("time", "dim", "particle")).to_netcdf(d / "transposed.nc")
    ds.assign_coords(time=np.full(ds.sizes["time"], np.nan)).to_netcdf(d / "nan_time.nc")
    ds.drop_vars(["rho_lm_real", "rho_lm_imag", "l", "m"]).to_netcdf(d / "huge.nc")
    with netCDF4.Dataset(d / "huge.nc", "a") as f:
        f.createDimension("l", 20001)
        f.createDimension("m", 20001)
        for name in ("rho_lm_real", "rho_lm_imag"):
            f.createVariable(name, "f8", ("time", "l", "m"), chunksizes=(1, 256, 256), fill_value=np.nan)
    return str(results.save(RUN_DS(), d / "result.nc")), d


_CONFIG_BAD = [None, "cfg", dict(_RUN)]
entry("preflight.estimate_cost", _pf.estimate_cost, lambda: dict(config=RUN_CFG(), pilot=False),
      bad={"config": _CONFIG_BAD, "pilot": flag()})
entry("preflight.preflight", _pf.preflight, lambda: dict(config=RUN_CFG(), force=False),
      bad={"config": _CONFIG_BAD, "force": flag()}, traced=False)       # its pilot runs the PDE: slow under tracemalloc
entry("preflight.available_memory", _pf.available_memory, lambda: dict())
_PATH_BAD = lambda b: [None, 3] + [str(RUN_FILE()[1] / f) for f in ("missing.nc", "notes.nc", "other.nc",  # noqa: E731
                                                                       "transposed.nc", "nan_time.nc")]
_PATH_HUGE = lambda b: [str(RUN_FILE()[1] / "huge.nc")]  # noqa: E731
_PATH_NAMES = ("path", "file", "meanfield result")
entry("view.load_viewable", _vw.load_viewable, lambda: dict(path=RUN_FILE()[0]), bad={"path": _PATH_BAD},
      huge={"path": _PATH_HUGE}, names={"path": _PATH_NAMES})
entry("view.default_output", _vw.default_output, lambda: dict(path="result.nc"), bad={"path": [None, 3, 2.5]})
entry("view.build_figure", _vw.build_figure, lambda: dict(kind="run", ds=_vw.load_viewable(RUN_FILE()[0])[1]),
      bad={"kind": choice(), "ds": lambda b: [None, "ds", b["ds"].transpose("time", "dim", "particle", ...),
                                               b["ds"].assign_coords(time=b["ds"]["time"].values[::-1].copy())],
           "max_frames": int_pos(2), "max_particles": int_pos(1),
           "nlat": int_pos(4)}, huge={"nlat": [HUGE]}, traced=False)      # plotly figures: slow under tracemalloc
entry("view.write_view", _vw.write_view,
      lambda: dict(path=RUN_FILE()[0], out=str(RUN_FILE()[1] / "page.html")),
      bad={"path": _PATH_BAD, "out": [3, str(RUN_FILE()[1] / "page.txt")], "max_frames": int_pos(2),
           "nlat": int_pos(4)}, huge={"path": _PATH_HUGE, "nlat": [HUGE]}, names={"path": _PATH_NAMES, "out": ("--out",)},
      traced=False)


# --------------------------------------------------------------------------------- cluster tracking
@functools.cache
def _TRACK_X():
    X = mf.initial.uniform_sphere(8, 3, seed=0)
    return np.stack([X, X])


@functools.cache
def _PEAK_FRAME():
    from hostile_registry import GRID, RHO

    return _tk.sphere_grid_frames(GRID(), np.stack([RHO(), RHO()]))


_TIMES_BAD = ["t", [0.0, 0.0], [0.0], [0.0, NAN], [1.0, 0.0]]
_NODES_BAD = lambda b: tokens(b["nodes"])      # noqa: E731
_QW_BAD = lambda b: [None, "w", -b["weights"], b["weights"][:-1], np.where(np.arange(b["weights"].size) == 1, NAN,  # noqa: E731
                                                                           b["weights"])]
entry("cluster_tracking.track_particle_clusters", _tk.track_particle_clusters, lambda: dict(X=_TRACK_X()),
      bad={"X": lambda b: tokens(b["X"]), "times": _TIMES_BAD,
           "w": [np.full(8, 0.5), "w", np.where(np.arange(8) == 1, NAN, 1 / 8)],
           "threshold": real_finite("0.9", 1.5, -2.0), "min_mass": _types(NAN, 1.0, -0.1),
           "inherit": _types(NAN, 0.4, 1.0)},
      # 500 frames of 40000 tokens: 8e11 inner products (~4000 s), refused before any work
      huge={"X": lambda b: [np.broadcast_to(mf.initial.uniform_sphere(40000, 3, seed=0), (500, 40000, 3))]},
      names={"X": ("track_particle_clusters",)})
entry("cluster_tracking.density_peaks", _tk.density_peaks,
      lambda: dict(values=_PEAK_FRAME()[0][0], nodes=_PEAK_FRAME()[1], weights=_PEAK_FRAME()[2]),
      bad={"values": lambda b: array(b["values"]), "nodes": _NODES_BAD, "weights": _QW_BAD,
           "threshold": real_finite("0.1")})
entry("cluster_tracking.track_density_peaks", _tk.track_density_peaks,
      lambda: dict(values=_PEAK_FRAME()[0], nodes=_PEAK_FRAME()[1], weights=_PEAK_FRAME()[2]),
      bad={"values": lambda b: array(b["values"]), "nodes": _NODES_BAD, "weights": _QW_BAD, "times": _TIMES_BAD,
           "threshold": real_finite("0.1"), "max_jump": _types(NAN, INF, 0.0, -1.0, 4.0)})
entry("cluster_tracking.sphere_grid_frames", _tk.sphere_grid_frames,
      lambda: dict(grid=mf.SphereGrid(8), rho_lm=_PEAK_RHO()),
      bad={"grid": [None, "grid"], "rho_lm": lambda b: array(b["rho_lm"], complex_ok=True)})


@functools.cache
def _PEAK_RHO():
    from hostile_registry import RHO

    return RHO()


# --------------------------------------------------------------------------------- factored heads (issue 34)
def _FACTORS():
    """Score and value factors of one (d = 3, r = p = 2) head: A, B, C, D of shape (3, 2)."""
    rng = np.random.default_rng(34)
    return {k: rng.standard_normal((3, 2)) for k in "ABCD"}


def _factor_bad(name):
    """Bad factors: the array kinds, a row count d < 2, and a shape that disagrees with its partner (A/B, C/D)."""
    return lambda b: array(b[name], extra=(b[name][:1], b[name][:, :1], np.ones((4, 2))))


entry("Head.from_factors", mf.Head.from_factors,
      lambda: dict(**_FACTORS(), beta=1.0, kernel="exp", normalization="softmax"),
      bad={**{k: _factor_bad(k) for k in "ABCD"}, "beta": real_pos(), "kernel": choice(), "normalization": choice(),
           "kernel_params": [{"bias": 1.0}, "bias", [1.0]]})
