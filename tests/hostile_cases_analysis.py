"""Hostile-input cases (see ``hostile_registry``): transport, MMD, ensembles, clustering, the axisymmetric
analysis, equilibria and the phase transition, extend, the phase diagram and the command line."""

from __future__ import annotations

import functools

import numpy as np
from hostile_registry import (  # noqa: F401
    AXI,
    B_AXI,
    GRID,
    HUGE,
    INF,
    NAN,
    RHO,
    X3,
    XB,
    _poke,
    _types,
    array,
    choice,
    entry,
    flag,
    int_pos,
    real_finite,
    real_nonneg,
    real_pos,
    seed,
    tokens,
)

import meanfield as mf

# --------------------------------------------------------------------------------- analysis: transport, mmd
from meanfield.analysis import axisymmetric as _ax  # noqa: E402
from meanfield.analysis import clustering as _cl
from meanfield.analysis import ensembles as _en
from meanfield.analysis import equilibria as _eq
from meanfield.analysis import mmd as _mmd
from meanfield.analysis import phase_transition as _pt
from meanfield.analysis import semidiscrete as _sd
from meanfield.analysis import transport as _tr

entry("transport.w2_distance", _tr.w2_distance, lambda: dict(X=X3(), Y=X3()[::-1].copy()),
      bad={"X": lambda b: tokens(X3()), "Y": lambda b: tokens(X3()), "metric": choice(), "method": choice(),
           "a": [np.full(8, 0.5), "a"], "n_projections": int_pos(1)}, huge={"n_projections": [HUGE]})
entry("transport.w2_particles_density", _tr.w2_particles_density,
      lambda: dict(X=X3(), nodes=mf.initial.uniform_sphere(20, 3, seed=1), density_weights=np.full(20, 1 / 20)),
      bad={"X": lambda b: tokens(X3()), "nodes": lambda b: tokens(b["nodes"]),
           "density_weights": [np.full(20, 0.1), np.full(19, 1 / 19), _poke(np.full(20, 1 / 20), NAN), "w"]})
entry("transport.w2_particles_field", _tr.w2_particles_field, lambda: dict(X=X3(), rho_lm=RHO(), grid=GRID()),
      bad={"X": lambda b: tokens(X3()), "rho_lm": lambda b: array(b["rho_lm"], complex_ok=True),
           "metric": choice(), "tol": real_pos(), "n_quad": int_pos(1), "max_iter": int_pos(1),
           "epsilon": real_pos(0.5, 1e-6, 1.0, 1e-15)},        # above tol = 1e-8 (the masses' accuracy) or ducc0's range
      huge={"n_quad": [10**6]})
entry("transport.cost_matrix", _tr.cost_matrix, lambda: dict(X=X3(), Y=X3()),
      bad={"X": lambda b: tokens(X3()), "Y": lambda b: tokens(X3()), "metric": choice()})
entry("semidiscrete.solve_semidiscrete", _sd.solve_semidiscrete,
      lambda: dict(X=X3(), b=np.full(8, 1 / 8), grid=GRID(), rho_lm=RHO()),
      bad={"X": lambda b: tokens(X3()), "b": [np.full(8, 0.5), np.full(7, 1 / 7), _poke(np.full(8, 1 / 8), NAN), "b"],
           "rho_lm": lambda b: array(b["rho_lm"], complex_ok=True), "tol": real_pos(), "n_quad": int_pos(1),
           "max_iter": int_pos(1)}, huge={"n_quad": [10**6]})
entry("semidiscrete.grid_of_nodes", _sd.grid_of_nodes, lambda: dict(nodes=GRID().nodes.reshape(-1, 3)),
      bad={})     # documented: None for anything that is not a grid's nodes (see NO_BAD)
entry("semidiscrete.geodesic_bracket", _sd.geodesic_bracket,
      lambda: dict(sol=_sd.solve_semidiscrete(X3(), np.full(8, 1 / 8), GRID(), RHO())),
      bad={})
entry("mmd.mmd_weights", _mmd.mmd_weights, lambda: dict(lmax=8, kernel="sobolev", s=2.0),
      bad={"lmax": int_pos(0), "kernel": choice(), "s": real_pos(), "beta": real_pos()}, huge={"lmax": [HUGE]})
entry("mmd.mmd_particles_field", _mmd.mmd_particles_field, lambda: dict(X=X3(), rho_lm=RHO(), grid=GRID()),
      bad={"X": lambda b: tokens(X3()), "rho_lm": lambda b: array(b["rho_lm"], complex_ok=True),
           "a": [np.full(8, 0.5), "a"], "kernel": choice(), "s": real_pos(), "beta": real_pos()})
entry("mmd.mmd_iid_expectation", _mmd.mmd_iid_expectation, lambda: dict(grid=GRID(), rho_lm=RHO(), n=10),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True), "n": int_pos(1), "kernel": choice(),
           "s": real_pos(), "beta": real_pos()})

# --------------------------------------------------------------------------------- ensembles, clustering
for _n, _extra in (("gram", {}), ("pair_density", {"threshold": real_finite(1.5, -2.0)}),
                   ("one_cluster", {"threshold": real_finite(1.5, -2.0)}),
                   ("cluster_counts", {"threshold": real_finite(1.5, -2.0)}), ("gram_rank", {"tol": real_pos()})):
    entry(f"ensembles.{_n}", getattr(_en, _n), lambda: dict(X=XB()),
          bad={"X": lambda b: [None, "X", XB().astype(complex) * (1 + 1j), _poke(XB(), NAN), _poke(XB(), INF),
                               XB()[0, 0], 10.0 * XB()], **_extra})
entry("ensembles.ensemble_observer", _en.ensemble_observer, lambda: dict(),
      bad={"pair_threshold": real_finite(1.5), "cluster_threshold": real_finite(1.5), "rank_tol": real_pos()})
entry("clustering.clustering", _cl.clustering, lambda: dict(X=X3(), threshold=0.99),
      bad={"X": lambda b: tokens(X3()), "threshold": real_finite("0.9", 1.5, -2.0), "chunk_rows": int_pos(1),
           "method": choice()},
      # n = 2.5e5 in d = 16: 'auto' takes the direct path (d > 12), 6e10 inner products, refused (the issue's
      # (2000, 200) case is no longer huge: the tree path batches it, 0.7 s and 16 MiB; 'auto' takes the direct one)
      huge={"X": lambda b: [mf.initial.uniform_sphere(250_000, 16, seed=0)]}, names={"X": ("chunk_rows", "method")})
entry("clustering.mean_inner", _cl.mean_inner, lambda: dict(X=X3()), bad={"X": lambda b: tokens(X3())})

# --------------------------------------------------------------------------------- axisymmetric analysis
entry("axisymmetric.reduced_observer", _ax.reduced_observer, lambda: dict(pde=AXI()))
entry("axisymmetric.reduced_resolution_monitor", _ax.reduced_resolution_monitor, lambda: dict(pde=AXI()),
      bad={"tail_tol": _types(NAN, 0.0, -1.0), "negative_tol": _types(NAN, 0.0, -1.0)})
entry("axisymmetric.w2_marginal", _ax.w2_marginal,
      lambda: dict(X=mf.initial.uniform_sphere(50, 4, seed=0), profile=lambda t: np.ones_like(t), axis=None, cost="angle"),
      bad={"X": lambda b: tokens(b["X"]), "cost": choice(), "n_sub": int_pos(1),
           "axis": [np.zeros(4), np.ones(3), [NAN, 0, 0, 1], "axis"]}, huge={"n_sub": [HUGE]})
entry("axisymmetric.w2_marginal_samples", _ax.w2_marginal_samples,
      lambda: dict(X=mf.initial.uniform_sphere(50, 4, seed=0), Y=mf.initial.uniform_sphere(50, 4, seed=1)),
      bad={"X": lambda b: tokens(b["X"]), "Y": lambda b: [*tokens(b["Y"]), mf.initial.uniform_sphere(50, 3, seed=1)],
           "cost": choice(), "axis": [np.zeros(4), [NAN, 0, 0, 1], "axis"]})

from meanfield.core import axisymmetric as _cax  # noqa: E402

entry("core.axisymmetric.sample_axisymmetric", _cax.sample_axisymmetric,
      lambda: dict(profile=lambda t: np.exp(t), n=50, d=4, seed=0),
      bad={"profile": [None, "profile", lambda t: -np.ones_like(t), lambda t: np.ones(3), lambda t: np.nan * t,
                       lambda t: np.zeros_like(t)],
           "n": int_pos(1), "d": int_pos(2), "n_grid": int_pos(101), "seed": seed(),
           "axis": [np.zeros(4), np.ones(4), np.ones(3) / np.sqrt(3), [NAN, 0, 0, 1], "axis"]},
      huge={"n": [HUGE, 10**10], "d": [HUGE, 10**10], "n_grid": [HUGE]})

@functools.cache
def AXI0():
    """AXI at nu = 0: no Gibbs state (the functions that need nu > 0 refuse it, naming nu)."""
    return _eq.at_noise(AXI(), 0.0)


# --------------------------------------------------------------------------------- equilibria, transition
entry("equilibria.potential", _eq.potential, lambda: dict(pde=AXI(), b=B_AXI()), bad={"b": lambda b: array(b["b"])})
entry("equilibria.at_noise", _eq.at_noise, lambda: dict(pde=AXI(), nu=0.7),
      bad={"pde": [None, "pde", mf.AxisymmetricPDE], "nu": real_nonneg()})
entry("equilibria.self_consistency_residual", _eq.self_consistency_residual,
      lambda: dict(pde=AXI(), state=B_AXI()), bad={"state": lambda b: array(b["state"]), "pde": [None, "pde", AXI0()]},
      names={"state": ("b",), "pde": ("pde", "nu")})
entry("equilibria.solve_stationary", _eq.solve_stationary, lambda: dict(pde=AXI(), b0=B_AXI(), maxiter=5),
      bad={"b0": lambda b: array(b["b0"]), "pde": [None, "pde", AXI0()], "tol": real_pos(), "maxiter": int_pos(1)},
      names={"pde": ("pde", "nu")})
entry("equilibria.free_energy_gap", _eq.free_energy_gap, lambda: dict(pde=AXI(), state=B_AXI()),
      bad={"state": lambda b: array(b["state"]), "pde": [None, "pde", AXI0()]},
      names={"state": ("b",), "pde": ("pde", "nu")})
entry("equilibria.branch_state", _eq.branch_state, lambda: dict(pde=AXI(), amplitude=0.05, degree=1, maxiter=10),
      bad={"amplitude": real_finite(), "degree": int_pos(1), "tol": real_pos(), "maxiter": int_pos(1)})
entry("equilibria.degree_one_state", _eq.degree_one_state, lambda: dict(pde=AXI(), amplitude=0.05, maxiter=10),
      bad={"amplitude": real_finite(), "tol": real_pos(), "maxiter": int_pos(1)})
entry("equilibria.branch_states", _eq.branch_states, lambda: dict(pde=AXI(), grid=[0.05, 0.1], degree=1),
      bad={"grid": [None, "g", [], [NAN], [1j]], "degree": int_pos(1)}, names={"grid": ("amplitude",)})
entry("equilibria.has_free_energy", _eq.has_free_energy, lambda: dict(pde=AXI()))
entry("equilibria.normalizations_have_free_energy", _eq.normalizations_have_free_energy,
      lambda: dict(names=["mean"]), bad={"names": [None, ["bogus"], [3], "x"]}, names={"names": ("normalization",)})
entry("equilibria.noise_problem", _eq.noise_problem, lambda: dict(pde=AXI()))
entry("equilibria.beta_problem", _eq.beta_problem, lambda: dict(pde=AXI()), bad={"pde": [None, "pde", AXI0()]},
      names={"pde": ("pde", "nu")})
entry("equilibria.resolution_error", _eq.resolution_error, lambda: dict(pde=AXI(), state=B_AXI()),
      bad={"state": lambda b: array(b["state"]), "pde": [None, "pde", AXI0()]},
      names={"state": ("b",), "pde": ("pde", "nu")})
entry("equilibria.nu_sharp", _eq.nu_sharp, lambda: dict(pde=AXI(), degree=1), bad={"degree": int_pos(1, 99)})
entry("equilibria.linear_spectrum", _eq.linear_spectrum, lambda: dict(pde=AXI(), state=AXI().uniform()),
      bad={"state": lambda b: array(b["state"])}, names={"state": ("b",)})   # pde.nu = 0: the noiseless one
entry("phase_transition.branch_curvature", _pt.branch_curvature, lambda: dict(pde=AXI(), eps=0.01),
      bad={"eps": real_pos(1e-7, 5e-4)})    # below CURVATURE_EPS_MIN: round-off / eps^2
entry("phase_transition.classify_transition", _pt.classify_transition,
      lambda: dict(pde=_pt.phase_transition_model(3, 4.0, lmax=24), r_max=0.9, n_steps=8), bad={"r_max": real_pos(1.5), "n_steps": int_pos(1)},
      huge={"n_steps": [HUGE]}, finite=False)
entry("phase_transition.beta_star_bessel", _pt.beta_star_bessel, lambda: dict(d=3), bad={"d": int_pos(2)})
entry("phase_transition.beta_star_continuation", _pt.beta_star_continuation, lambda: dict(d=3, lmax=16),
      bad={"d": int_pos(2), "normalization": choice(), "lmax": int_pos(1), "beta_max": real_pos()},
      huge={"lmax": [HUGE]})
entry("phase_transition.phase_transition_model", _pt.phase_transition_model, lambda: dict(d=3, beta=2.0, lmax=16),
      bad={"d": int_pos(2), "beta": real_pos(), "normalization": choice(), "lmax": int_pos(1)},
      huge={"lmax": [HUGE]})
entry("phase_transition.phase_transition", _pt.phase_transition, lambda: dict(d=3, beta=2.0, lmax=16),
      bad={"d": int_pos(2), "beta": real_pos(), "normalization": choice(), "lmax": int_pos(1), "rtol": real_pos()},
      huge={"lmax": [HUGE]}, finite=False, traced=False)     # its Newton loops run 10x slower traced

# --------------------------------------------------------------------------------- workflow: extend, phase diagram
from meanfield.workflow import extend as _ext  # noqa: E402
from meanfield.workflow import phase_diagram as _pd


@functools.cache
def RUN_DS():
    from meanfield.workflow.config import RunConfig
    from meanfield.workflow.run import run

    cfg = RunConfig.from_dict({"pde": {"lmax": 11}, "particles": {"n": 40}, "initial": {"kappas": [1.0]}, "seed": 3,
                               "integrator": {"t_final": 0.1, "n_frames": 2},
                               "outputs": {"figures": False, "animation": False}})
    return run(cfg, progress=False)


entry("extend.extend", _ext.extend, lambda: dict(ds=RUN_DS(), t_final=0.2, progress=False),
      bad={"t_final": real_finite(0.05, 0.0, 1e308), "progress": flag(),
           "ds": lambda b: [None, "ds", b["ds"].isel(time=slice(0, 0)), b["ds"].assign_coords(time=[0.1, 0.0]),
                            b["ds"].assign_coords(time=[0.0, NAN]), b["ds"].assign_coords(time=[0.1, 0.1])]},
      huge={"t_final": [1e9]},
      edge={"ds": lambda b: [b["ds"].isel(time=[-1])]})     # one frame: the spacing of its run (config)
entry("extend.extended_name", _ext.extended_name, lambda: dict(dataset="result.nc", t_final=2.0),
      bad={"dataset": [None, 3], "t_final": real_finite()})
_PD_SMALL = dict(betas=(1.0, 4.0), t_final=0.4, dt=0.1, record_every=2, n=6, batch=3, d=2, seed=0)
entry("phase_diagram.PhaseDiagramConfig", _pd.PhaseDiagramConfig, lambda: dict(_PD_SMALL),
      bad={"betas": [None, "b", (), (NAN,), (-1.0,), (1j,)], "t_final": real_pos(), "dt": real_pos(),
           "record_every": int_pos(1), "n": int_pos(2), "d": int_pos(2), "batch": int_pos(1), "rule": choice(),
           "score": choice(), "normalization": choice(), "causal": flag(), "seed": seed()},
      huge={"n": [HUGE], "batch": [HUGE], "t_final": [1e12]})
entry("phase_diagram.phase_diagram", _pd.phase_diagram,
      lambda: dict(config=_pd.PhaseDiagramConfig(**_PD_SMALL), progress=False),
      bad={"config": ["cfg", {"betas": "x"}], "scheduler": choice(), "progress": flag()})
entry("phase_diagram.equiangular_curve", _pd.equiangular_curve,
      lambda: dict(config=_pd.PhaseDiagramConfig(**_PD_SMALL)), bad={"config": [None, "cfg"]}, finite=False)


def _toml_file(text):
    import tempfile

    f = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    f.write(text)
    f.close()
    return f.name


entry("phase_diagram.load_phase_config", lambda text: _pd.load_phase_config(_toml_file(text)),
      lambda: dict(text="betas = [1.0, 2.0]\nn = 6\nbatch = 3\nt_final = 0.4\n"),
      bad={"text": ["betas = 'x'\n", "beta_range = 5\n", "betas = [1.0]\nbeta_range = [1.0, 2.0, 3]\n",
                    "n = -1\n", "bogus = 1\n", "t_final = nan\n", "= =\n"]},
      names={"text": ("betas", "beta_range", "n", "bogus", "t_final", "TOML", "toml")})
entry("phase_diagram.run_phase_diagram", lambda text, out: _pd.run_phase_diagram(_toml_file(text), out),
      lambda: dict(text="betas = [1.0]\nn = 4\nbatch = 2\nt_final = 0.2\nrecord_every = 1\n",
                   out=__import__("tempfile").mkdtemp()),
      bad={"text": ["beta_range = 5\n", "betas = [1.0]\nbeta_range = [1.0, 2.0, 3]\n"]},
      names={"text": ("betas", "beta_range")}, traced=False)


# --------------------------------------------------------------------------------- the command line
def cli(argv_of):
    """A CLI call as a keyword function: exit 2 with an 'error' line and no traceback becomes a ValueError
    carrying stderr (a clear refusal); a traceback or another exit code is returned (and fails)."""
    def run(**kw):
        import contextlib
        import io

        from meanfield.workflow.cli import main

        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                rc = main(argv_of(**kw))
            except SystemExit as e:         # argparse's own refusals (a bad option value): exit 2 with a usage line
                rc = e.code
        text = err.getvalue()
        if rc == 2 and "Traceback" not in text and text.strip():
            raise ValueError(text)
        return {"rc": rc, "stderr": text[-400:]}
    return run


def _npy(a):
    import tempfile

    f = tempfile.NamedTemporaryFile(suffix=".npy", delete=False)
    np.save(f, a)
    f.close()
    return f.name


_RUN_TOML = ('[pde]\nlmax = 11\n[initial]\nkappas = [1.0]\n[particles]\nn = 12\n[integrator]\nt_final = 0.1\nn_frames = 2\n'
             '[outputs]\nfigures = false\nanimation = false\n')
entry("cli.config_check", cli(lambda text: ["config", "check", _toml_file(text)]),
      lambda: dict(text=_RUN_TOML),
      bad={"text": lambda b: [b["text"] + "[bogus]\nx = 1\n", b["text"].replace("lmax = 11", "lmax = -7"),
                              b["text"].replace("n = 12", f'n = 12\npositions = "{_npy(X3()[:, :2] + 0j)}"'),
                              b["text"].replace("n = 12", f'n = 8\npositions = "{_npy(X3().astype(complex))}"')]},
      names={"text": ("bogus", "lmax", "positions")})
entry("cli.phase_diagram", cli(lambda text, out: ["phase-diagram", _toml_file(text), "--out", out]),
      lambda: dict(text="betas = [1.0]\nn = 4\nbatch = 2\nt_final = 0.2\nrecord_every = 1\n",
                   out=__import__("tempfile").mkdtemp()),
      bad={"text": ["beta_range = 5\n", "betas = [1.0]\nbeta_range = [1.0, 2.0, 3]\n", "n = 'x'\n"]},
      names={"text": ("betas", "beta_range", "n")}, traced=False)

# the commands issue 33's probe drove from the shell: theory phase-transition (the dimension's guard), equilibria
# (config keys, the cost estimate of a large lmax on the sphere or a long march), view (files of the wrong layout)
entry("cli.theory_phase_transition", cli(lambda d, beta: ["theory", "phase-transition", "--d", d]
                                         + ([] if beta is None else ["--beta", beta])),
      lambda: dict(d="3", beta=None),
      bad={"d": ["1", "x", "2.5", "nan", ""], "beta": ["nan", "-1", "0", "inf", "x"]},
      huge={"d": ["20000", "1000000"]}, names={"d": ("--d", "d="), "beta": ("--beta",)})
_EQ_TOML = ('[[heads]]\nlam = 1.0\nbeta = 1.0\n[geometry]\nd = 3\nlmax = 12\n[continuation]\nnu_range = [0.3, 0.45]\n'
            'max_points = 12\n[outputs]\nfigures = false\n')
entry("cli.equilibria", cli(lambda text, out: ["equilibria", _toml_file(text), "--out",      # one folder per call:
                                                __import__("tempfile").mkdtemp(dir=out), "-q"]),   # parallel probes
      lambda: dict(text=_EQ_TOML, out=__import__("tempfile").mkdtemp()),
      bad={"text": lambda b: [b["text"].replace("lmax = 12", "lmax = -3"), b["text"].replace("lmax = 12", 'lmax = "x"'),
                              b["text"].replace("nu_range = [0.3, 0.45]", "nu_range = [0.8, 1.0]"),
                              b["text"].replace("nu_range = [0.3, 0.45]", "nu_range = [0.45, 0.3]"),
                              b["text"] + "[bogus]\nx = 1\n", b["text"].replace("d = 3", 'd = "plane"'),
                              b["text"].replace("= 1.0\nbeta", "= nan\nbeta"), "= =\n"]},
      huge={"text": lambda b: [b["text"].replace("lmax = 12", "lmax = 512").replace("d = 3", 'd = "sphere"'),
                               b["text"].replace("lmax = 12", "lmax = 512").replace("max_points = 12",
                                                                                    "max_points = 100000")
                               .replace("nu_range = [0.3, 0.45]", "nu_range = [0.3, 40.0]")]},
      names={"text": ("lmax", "nu_range", "bogus", "heads", "TOML", "toml", "lam", "parameter", "continuation")},
      traced=False)


def _view_argv(path, out):
    from hostile_cases_more import RUN_FILE

    return ["view", RUN_FILE()[0] if path is None else str(RUN_FILE()[1] / path), "--out", out, "-q"]


entry("cli.view", cli(_view_argv), lambda: dict(path=None, out=str(__import__("tempfile").mkdtemp()) + "/page.html"),
      bad={"path": ["missing.nc", "notes.nc", "other.nc", "transposed.nc", "nan_time.nc"]},
      huge={"path": ["huge.nc"]}, names={"path": ("path", "file", "meanfield result", ".nc")}, traced=False)
