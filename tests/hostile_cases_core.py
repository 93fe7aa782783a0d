"""Hostile-input cases (see ``hostile_registry``): heads, models, the driver, the core modules, step rules,
particle and field diagnostics, closed forms."""

from __future__ import annotations

import numpy as np
from hostile_registry import (  # noqa: I001  # noqa: F401
    AXI,
    B_AXI,
    BS,
    C_CIRC,
    CIRC,
    CPDE,
    GRID,
    H3,
    H_SINGLE,
    HUGE,
    INF,
    NAN,
    PS,
    RHO,
    X3,
    XB,
    Bad,
    _poke,
    _st,
    _types,
    array,
    choice,
    entry,
    flag,
    heads,
    int_pos,
    method,
    real_finite,
    real_nonneg,
    real_pos,
    seed,
    tokens,
)

import meanfield as mf

# --------------------------------------------------------------------------------- core: heads
entry("Head", mf.Head, lambda: dict(M=np.eye(3), V=np.eye(3), beta=1.0, kernel="exp", normalization="mean"),
      bad={"M": lambda b: array(b["M"], extra=(np.eye(3)[:2],)), "V": lambda b: array(b["V"], extra=(np.eye(4),)),
           "beta": real_pos(), "kernel": choice(), "normalization": choice()})
entry("scalar_heads", mf.scalar_heads, lambda: dict(lambdas=[1.0, -0.5], d=3, beta=1.0),
      bad={"lambdas": [None, "x", [], [NAN], [INF], [1j], [[1.0]]], "d": int_pos(2), "beta": real_pos()},
      names={"lambdas": ("lambda",)})
entry("orthogonal_block_heads", mf.orthogonal_block_heads, lambda: dict(d=4, n_heads=2, strengths=1.0, beta=1.0),
      bad={"d": int_pos(2), "n_heads": int_pos(1, 5), "strengths": real_finite(), "beta": real_pos()})
entry("random_symmetric_heads", mf.random_symmetric_heads, lambda: dict(d=3, n_heads=2, seed=0, scale=1.0, beta=1.0),
      bad={"d": int_pos(2), "n_heads": int_pos(1), "seed": seed(), "scale": real_nonneg(), "beta": real_pos()},
      huge={"d": [HUGE], "n_heads": [HUGE]})
entry("perturbed_value_heads", mf.perturbed_value_heads, lambda: dict(heads=H3(), epsilon=0.1, seed=0),
      bad={"heads": lambda b: heads(b["heads"]), "epsilon": real_nonneg(), "seed": seed()})
entry("approx_orthogonal_heads", mf.approx_orthogonal_heads,
      lambda: dict(d=4, n_heads=2, delta=0.1, alpha=1.0, rank=1, beta=1.0),
      bad={"d": int_pos(2), "n_heads": int_pos(1), "delta": real_nonneg(), "alpha": real_finite(),
           "rank": int_pos(1, 9), "beta": real_pos()},
      huge={"d": [HUGE]})
entry("required_lmax", mf.required_lmax, lambda: dict(heads=H_SINGLE(), tolerance=1e-6, cap=64),
      bad={"heads": lambda b: heads(b["heads"]), "tolerance": real_pos(), "cap": int_pos(1)},
      huge={"cap": [HUGE]})

# --------------------------------------------------------------------------------- models
_model_heads = {"heads": lambda b: heads(b["heads"])}
entry("ParticleSystem", mf.ParticleSystem, lambda: dict(heads=H3(), geometry="sphere", summation="auto"),
      bad={**_model_heads, "geometry": choice(), "summation": choice(), "kernel_tol": real_pos(),
           "nu": real_nonneg(), "chunk_bytes": int_pos(1), "lmax": int_pos(1)})
entry("ParticleSystem.velocity", method(PS, "velocity"), lambda: dict(X=X3(), w=None),
      bad={"X": lambda b: tokens(X3()), "w": [np.full(8, 0.5), np.full(7, 1 / 7), _poke(np.full(8, 1 / 8), NAN), "w"]})
entry("ParticleSystem.rhs", method(PS, "rhs"), lambda: dict(t=0.0, y=X3()),     # a stage: off the sphere is legal
      bad={"y": lambda b: tokens(X3(), unit=False)}, names={"y": ("X",)}, propagates_nonfinite=("y",))
entry("ParticleSystem.energy", method(PS, "energy"), lambda: dict(X=X3()), bad={"X": lambda b: tokens(X3())})

entry("BatchedSystem", lambda **kw: __import__("meanfield.models.batched", fromlist=["x"]).BatchedSystem(**kw),
      lambda: dict(heads=H3(), geometry="sphere", causal=False, summation="direct"),
      bad={**_model_heads, "geometry": choice(), "causal": flag(), "summation": choice(), "kernel_tol": real_pos(),
           "chunk_bytes": int_pos(1)})
entry("BatchedSystem.velocity", method(BS, "velocity"), lambda: dict(X=XB()),
      bad={"X": lambda b: [None, "X", XB().astype(complex) * (1 + 1j), _poke(XB(), NAN), _poke(XB(), INF),
                           XB()[..., :-1], XB()[..., None], 2.0 * XB(), XB()[0, 0]]},
      huge={"X": [np.broadcast_to(XB()[:1, :1], (1, 100000, 3))]})
entry("BatchedSystem.rhs", method(BS, "rhs"), lambda: dict(t=0.0, y=XB()),
      bad={"y": lambda b: [None, "y", _poke(XB(), NAN), XB()[..., :-1], XB()[0], XB().astype(complex)]},
      names={"y": ("X",)}, propagates_nonfinite=("y",))       # a stage: off the sphere (2 X) is legal
entry("BatchedSystem.field", method(BS, "field"), lambda: dict(X=XB()),
      bad={"X": lambda b: [None, _poke(XB(), NAN), XB().astype(complex) * (1 + 1j), XB()[..., :-1]]})

entry("ContinuumPDE", mf.ContinuumPDE, lambda: dict(heads=H_SINGLE(), lmax=8, nu=0.0, kernel_tol=1e-6),
      bad={**_model_heads, "lmax": int_pos(1), "nu": real_nonneg(), "kernel_tol": real_nonneg(), "summation": choice()},
      huge={"lmax": [HUGE]})
entry("ContinuumPDE.velocity", method(CPDE, "velocity"), lambda: dict(rho_lm=RHO()),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True)})
entry("ContinuumPDE.rhs", method(CPDE, "rhs"), lambda: dict(t=0.0, y=CPDE().state(RHO())),
      bad={"y": lambda b: array(b["y"])}, propagates_nonfinite=("y",))
entry("ContinuumPDE.energies", method(CPDE, "energies"), lambda: dict(rho_lm=RHO()),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True)})

entry("CirclePDE", mf.CirclePDE, lambda: dict(heads=mf.scalar_heads([1.0], 2), kmax=16, nu=0.0),
      bad={**_model_heads, "kmax": int_pos(1), "nu": real_nonneg(), "kernel_tol": real_nonneg(), "summation": choice()},
      huge={"kmax": [HUGE, 10**10]},
      edge={"heads": [mf.scalar_heads([1.0], 2, beta=750.0, normalization="softmax")]})
entry("CirclePDE.velocity", method(CIRC, "velocity"), lambda: dict(c=C_CIRC()),
      bad={"c": lambda b: array(b["c"], complex_ok=True)})
entry("CirclePDE.rhs", method(CIRC, "rhs"), lambda: dict(t=0.0, y=CIRC().state(C_CIRC())),
      bad={"y": lambda b: array(b["y"])}, propagates_nonfinite=("y",))
entry("CirclePDE.energies", method(CIRC, "energies"), lambda: dict(c=C_CIRC()),
      bad={"c": lambda b: array(b["c"], complex_ok=True)})


def _imaginary_mass(c):
    c = np.array(c, dtype=complex)
    c[0] += 0.5j                # the mass c_0 of a real density is real: refused, never dropped
    return c


entry("CirclePDE.state", method(CIRC, "state"), lambda: dict(c=C_CIRC()),
      bad={"c": lambda b: array(b["c"], complex_ok=True, extra=(_imaginary_mass(b["c"]),))})
entry("CirclePDE.project", method(CIRC, "project"), lambda: dict(profile=lambda t: 1.0 + 0.1 * np.cos(t)),
      bad={"profile": [None, "profile", lambda t: np.ones(5), lambda t: np.ones((t.size, 2)), lambda t: 1.0,
                       lambda t: np.nan * t, lambda t: np.where(t > 1, np.inf, 1.0), lambda t: 1.0 + 0.1j * np.sin(t),
                       lambda t: t > 1, lambda t: [None] * t.size]})

entry("AxisymmetricPDE", mf.AxisymmetricPDE, lambda: dict(heads=mf.scalar_heads([1.0], 4), d=4, lmax=12, nu=0.5),
      bad={**_model_heads, "d": int_pos(2), "lmax": int_pos(1), "nu": real_nonneg(),
           "axis": [np.zeros(4), np.ones(4), np.ones(3) / np.sqrt(3), [NAN] * 4, "axis"]},
      huge={"lmax": [HUGE]}, names={"d": ("heads",)})
entry("AxisymmetricPDE.velocity", method(AXI, "velocity"), lambda: dict(b=B_AXI()),
      bad={"b": lambda b: array(b["b"])})
entry("AxisymmetricPDE.rhs", method(AXI, "rhs"), lambda: dict(t=0.0, y=AXI().state(B_AXI())),
      bad={"y": lambda b: array(b["y"])}, propagates_nonfinite=("y",))
entry("AxisymmetricPDE.energies", method(AXI, "energies"), lambda: dict(b=B_AXI()),
      bad={"b": lambda b: array(b["b"])})

entry("SphereGrid", mf.SphereGrid, lambda: dict(lmax=8),
      bad={"lmax": int_pos(0), "nlat": int_pos(1), "nlon": int_pos(1), "nthreads": int_pos(1)},
      huge={"lmax": [HUGE]})

# --------------------------------------------------------------------------------- driver and solvers
entry("integrate", mf.integrate, lambda: dict(rhs=lambda t, y: -y, y0=np.ones(2), t_span=(0.0, 1.0), method="rk4",
                                              step=mf.StepControl(dt=0.1)),
      bad={"y0": [None, "y0", np.array([1.0, NAN]), np.array([INF, 1.0]), np.ones(2) * (1 + 1j)], "t_span": [None, "t", (0.0,), (0.0, NAN), (0.0, INF), (1.0, 1j)],
           "method": choice()},
      huge={"step": [mf.StepControl(dt=1e-9)]}, names={"step": ("dt", "max_steps")})
entry("Noise", mf.Noise, lambda: dict(nu=0.1, seed=0, geometry="sphere"),
      bad={"nu": real_nonneg(), "seed": seed(), "geometry": choice()})
entry("StepControl", mf.StepControl, lambda: dict(dt=0.1), finite=False,     # dt_max = inf by default
      bad={"dt": real_pos(), "rtol": real_pos(), "atol": real_nonneg(), "dt_max": [None, "1", True, NAN, 0.0, -1.0],
           "max_steps": int_pos(1)})
entry("SaveAt", mf.SaveAt, lambda: dict(t_eval=[0.0, 1.0]),
      bad={"t_eval": [np.array([1.0, NAN]), "t", [1j], [[0.0, 1.0]]], "states": flag(), "dense": flag()})
entry("Monitor", mf.Monitor, lambda: dict(tail_tol=1e-3, negative_tol=1e-4), finite=False,   # inf: never stops
      bad={"tail_tol": [None, "1", True, NAN, 0.0, -1.0], "negative_tol": [None, "1", True, NAN, 0.0, -1.0]})
entry("Checkpointing", mf.Checkpointing, lambda: dict(save=None, every=None),
      bad={"every": real_pos(), "resume": ["resume", 3, [1, 2]]})
entry("solve", mf.solve, lambda: dict(model=PS(), start=X3(), t_final=0.1),
      bad={"start": lambda b: tokens(X3()), "t_final": real_nonneg()}, names={"start": ("X", "X0", "y0")})
entry("solve_particles", mf.solve_particles, lambda: dict(system=PS(), X0=X3(), t_final=0.1),
      bad={"X0": lambda b: tokens(X3()), "t_final": real_nonneg()})
entry("solve_continuum", mf.solve_continuum, lambda: dict(pde=CPDE(), rho_lm0=RHO(), t_final=0.05),
      bad={"rho_lm0": lambda b: array(b["rho_lm0"], complex_ok=True), "t_final": real_nonneg()},
      names={"rho_lm0": ("rho",)})
entry("solve_reduced", mf.solve_reduced, lambda: dict(pde=CIRC(), c0=C_CIRC(), t_final=0.1),
      bad={"c0": lambda b: array(b["c0"], complex_ok=True, extra=(_imaginary_mass(b["c0"]),)),
           "t_final": real_nonneg()})
entry("zonal_density", mf.zonal_density,
      lambda: dict(grid=GRID(), mu=np.linspace(-1.0, 1.0, 9), rho=1.0 + 0.5 * np.linspace(-1.0, 1.0, 9)),
      bad={"mu": lambda b: [None, "mu", b["mu"][::-1].copy(), _poke(b["mu"], NAN), b["mu"][:1], b["mu"] * 2,
                            b["mu"] + 0j * b["mu"] + 1j],
           "rho": lambda b: array(b["rho"], extra=(-b["rho"],))}, names={"mu": ("profile",), "rho": ("profile",)})
entry("density_from_coefficients", mf.density_from_coefficients,
      lambda: dict(grid=GRID(), coefficients=RHO()),
      bad={"coefficients": lambda b: array(b["coefficients"], complex_ok=True, strict_shape=False)})

# --------------------------------------------------------------------------------- core modules
entry("densities.uniform_density", mf.densities.uniform_density, lambda: dict(grid=GRID()))
entry("densities.perturbed_uniform", mf.densities.perturbed_uniform,
      lambda: dict(grid=GRID(), perturbations={(2, 0): 0.01}),
      bad={"perturbations": [None, "p", {(20, 0): 0.1}, {(2, 0): NAN}, {(2, 3): 0.1}]},
      edge={"perturbations": [{(2, 0): 10.0}]})    # a signed density is legal here (the tests start from one);
                                                   # sample_particles and the resolution monitor refuse negative mass
entry("densities.vmf_density", mf.densities.vmf_density, lambda: dict(grid=GRID(), mu=[0.0, 0.0, 1.0], kappa=2.0),
      bad={"mu": [None, "mu", [0, 0], [NAN, 0, 1], [0, 0, 2.0], [1j, 0, 0]], "kappa": real_nonneg()},
      edge={"kappa": [1e-12, 700.0]})
entry("densities.vmf_mixture_density", mf.densities.vmf_mixture_density,
      lambda: dict(grid=GRID(), mus=np.eye(3)[:2], kappas=[1.0, 2.0], weights=[0.5, 0.5]),
      bad={"mus": lambda b: tokens(b["mus"]), "kappas": [None, "k", [1.0], [NAN, 1.0], [-1.0, 1.0]],
           "weights": [[0.5, 0.6], [1.0], [NAN, 0.5], "w"], "floor": real_nonneg(1.5)})
entry("densities.density_from_particles", mf.densities.density_from_particles,
      lambda: dict(grid=GRID(), X=X3()),       # kappa = inf is documented: the truncated empirical measure
      bad={"X": lambda b: tokens(X3()),
           "kappa": Bad(_types(NAN, -INF, 0.0, -1.0),
                        lambda: _st().sampled_from([NAN, -INF]) | _st().floats(max_value=0.0, allow_nan=False))},
      edge={"kappa": [INF]})
entry("densities.oversampled_negative_mass", mf.densities.oversampled_negative_mass,
      lambda: dict(grid=GRID(), rho_lm=RHO()),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True), "oversample": int_pos(1)},
      huge={"oversample": [HUGE]})
entry("densities.sample_particles", mf.densities.sample_particles,
      lambda: dict(grid=GRID(), rho_lm=RHO(), n=10, seed=0),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True), "n": int_pos(1), "method": choice(),
           "seed": seed(), "negative": choice()}, huge={"n": [HUGE]})
entry("densities.normalize", mf.densities.normalize, lambda: dict(grid=GRID(), rho_lm=RHO()),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True)})
entry("densities.check_density", mf.densities.check_density, lambda: dict(grid=GRID(), rho_lm=RHO()),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True)})
entry("densities.vmf_multiplier", mf.densities.vmf_multiplier, lambda: dict(lmax=8, kappa=2.0),
      bad={"lmax": int_pos(0), "kappa": real_nonneg()}, huge={"lmax": [HUGE]})
entry("densities.default_kde_kappa", mf.densities.default_kde_kappa, lambda: dict(lmax=8),
      bad={"lmax": int_pos(0)})

entry("initial.uniform_sphere", mf.initial.uniform_sphere, lambda: dict(n=5, d=3, seed=0),
      bad={"n": int_pos(1), "d": int_pos(2), "seed": seed()}, huge={"n": [HUGE], "d": [HUGE]})
entry("initial.von_mises_fisher", mf.initial.von_mises_fisher, lambda: dict(n=5, mu=[0.0, 0.0, 1.0], kappa=2.0),
      bad={"n": int_pos(1), "mu": [None, "mu", [0.0], [NAN, 0, 1], [0, 0, 2.0], [1j, 0, 0]], "kappa": real_nonneg()},
      huge={"n": [HUGE]}, edge={"kappa": [1e-12, 1e6]})
entry("initial.vmf_mixture", mf.initial.vmf_mixture, lambda: dict(n=6, mus=np.eye(3)[:2], kappas=[1.0, 2.0]),
      bad={"n": int_pos(1), "mus": lambda b: [None, "mus", b["mus"] * 2, _poke(b["mus"], NAN), b["mus"] * (1 + 1j)],
           "kappas": [None, "k", [NAN, 1.0], [-1.0, 1.0]],
           "weights": [[0.5, 0.6], [1.0], [NAN, 0.5], "w"]}, huge={"n": [HUGE]})
entry("initial.equiangular", mf.initial.equiangular, lambda: dict(n=4, d=4, gamma=0.3),
      bad={"n": int_pos(1), "d": int_pos(2), "gamma": real_finite(1.5, -2.0)}, huge={"n": [HUGE]})
entry("initial.orthonormal", mf.initial.orthonormal, lambda: dict(n=3, d=4, seed=0),
      bad={"n": int_pos(1, 5), "d": int_pos(1), "seed": seed()}, huge={"d": [HUGE]})
entry("initial.random_rotation", mf.initial.random_rotation, lambda: dict(d=3, seed=0),
      bad={"d": int_pos(1), "seed": seed()}, huge={"d": [HUGE]})

from meanfield.core import random_heads as _rh  # noqa: E402
from meanfield.core import schedules as _sch

entry("random_heads.random_heads", _rh.random_heads, lambda: dict(d=3, n_heads=2, seed=0),
      bad={"d": int_pos(2), "n_heads": int_pos(1), "score": choice(), "value": choice(), "systems": int_pos(1),
           "seed": seed(), "scale": real_nonneg(), "beta": real_pos()},
      huge={"d": [100000], "n_heads": [HUGE], "systems": [HUGE]})
entry("random_heads.score_matrix", _rh.score_matrix, lambda: dict(score="gaussian", d=3, rng=np.random.default_rng(0)),
      bad={"score": choice(), "d": int_pos(1), "rng": ["rng", 2.5]}, huge={"d": [HUGE]})
entry("random_heads.value_matrix", _rh.value_matrix,
      lambda: dict(value="identity", score="gaussian", M=np.eye(3), rng=np.random.default_rng(0)),
      bad={"value": choice(), "M": lambda b: array(b["M"], extra=(np.eye(3)[:2],))})
entry("schedules.HeadSchedule", _sch.HeadSchedule, lambda: dict(entries=((0.0, H3()), (1.0, H3()))),
      bad={"entries": lambda b: [None, "e", (), ((NAN, H3()),), ((0.0, H3()), (0.0, H3())),
                                 ((0.0, H3()), (1.0, mf.scalar_heads([1.0], 4))), ((0.0, None),)]},
      names={"entries": ("schedule",)})
entry("schedules.ScheduledSystem", _sch.ScheduledSystem,
      lambda: dict(schedule=_sch.HeadSchedule(((0.0, H3()),)), make_system=mf.ParticleSystem),
      bad={"schedule": [None, "s", H3()], "make_system": [None, "f", 3]})
entry("schedules.random_layers", _sch.random_layers, lambda: dict(d=3, n_layers=2, layer_time=0.5, seed=0),
      bad={"d": int_pos(2), "n_layers": int_pos(1), "layer_time": real_pos(), "t0": real_finite()},
      huge={"n_layers": [HUGE]})
entry("schedules.integrate_schedule", _sch.integrate_schedule,
      lambda: dict(schedule=_sch.HeadSchedule(((0.0, H3()), (0.05, H3()))), make_system=mf.ParticleSystem,
                   y0=X3(), t_span=(0.0, 0.1), method="rk4", step=mf.StepControl(dt=0.01)),
      bad={"y0": lambda b: tokens(X3()), "t_span": [None, (0.0, NAN), (0.0,), "t"]},
      names={"y0": ("X",)})

# --------------------------------------------------------------------------------- step rules
from meanfield.models import step_rules as _sr  # noqa: E402

entry("step_rules.StepRule", _sr.StepRule, lambda: dict(name="post_ln", order=1),
      bad={"name": choice(), "order": int_pos(1, 9), "layer_dt": real_pos()}, names={"name": ("rule",)})
entry("step_rules.step", _sr.step, lambda: dict(system=BS(), y=XB(), dt=0.1, rule="post_ln"),
      bad={"y": lambda b: [None, "y", XB().astype(complex) * (1 + 1j), _poke(XB(), NAN), _poke(XB(), INF),
                           XB()[..., :-1], 2.0 * XB()],
           "dt": real_pos(), "rule": choice()}, names={"y": ("X",)})
entry("step_rules.iterate", _sr.iterate, lambda: dict(system=BS(), X0=XB(), dt=0.1, n_steps=3, rule="post_ln"),
      bad={"X0": lambda b: [None, "X", _poke(XB(), NAN), XB()[..., :-1], 2.0 * XB()], "dt": real_pos(),
           "n_steps": int_pos(0), "rule": choice(), "every": int_pos(1), "save_states": flag()},
      huge={"n_steps": [HUGE]}, edge={"n_steps": [0]})      # 0 layers: documented, the start alone
if hasattr(_sr, "check_state"):      # added by the contract branch (issue 26)
    entry("step_rules.check_state", _sr.check_state, lambda: dict(system=BS(), y=XB(), rule="post_ln"),
          bad={"y": lambda b: [None, "y", XB().astype(complex) * (1 + 1j), _poke(XB(), NAN), XB()[..., :-1],
                               2.0 * XB()], "rule": choice()})
entry("step_rules.limit_rhs", _sr.limit_rhs, lambda: dict(system=BS(), rule="post_ln"), bad={"rule": choice()})
entry("step_rules.directions", _sr.directions, lambda: dict(y=XB(), rule="post_ln"),
      bad={"y": lambda b: [None, "y", _poke(XB(), NAN), XB().astype(complex) * (1 + 1j)], "rule": choice()})

# --------------------------------------------------------------------------------- particle diagnostics
for _n in ("dissipation", "energy_rate_terms", "radial_shadows", "radial_dominance", "attention_entropy",
           "attention_entropy_rate"):
    entry(f"diagnostics.{_n}", getattr(mf.diagnostics, _n), lambda: dict(system=PS(), X=X3()),
          bad={"X": lambda b: tokens(X3()), "w": [np.full(8, 0.5), np.full(7, 1 / 7), "w"]})
entry("diagnostics.observer", mf.diagnostics.observer, lambda: dict(system=PS(), threshold=0.99),
      bad={"threshold": real_finite(1.5, -2.0), "per_token": flag(), "clustering": flag(),
           "w": [np.full(8, 0.5), "w"]})
entry("diagnostics.observer_passes", mf.diagnostics.observer_passes, lambda: dict(system=PS(), n=8),
      bad={"n": int_pos(1)})

# --------------------------------------------------------------------------------- field diagnostics
for _n in ("mass", "field_negative_mass", "field_spectral_tail", "concentration", "boltzmann_entropy",
           "field_attention_entropy", "field_dissipation", "free_energy_dissipation"):
    entry(f"field_diagnostics.{_n}", getattr(mf.field_diagnostics, _n), lambda: dict(pde=CPDE(), rho_lm=RHO()),
          bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True)})
for _n in ("head_forces", "field_radial_shadows", "field_radial_dominance", "field_energy_rate_terms"):
    entry(f"field_diagnostics.{_n}", getattr(mf.field_diagnostics, _n), lambda: dict(pde=CPDE(), rho_lm=RHO()),
          bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True),
               **({} if _n == "head_forces" else {"forces": ["f", np.zeros((1, 2, 3, 3)), [[1.0]]]})})
entry("field_diagnostics.field_observer", mf.field_diagnostics.field_observer, lambda: dict(pde=CPDE(), entropy=True),
      bad={"entropy": flag()})
entry("field_diagnostics.field_resolution_monitor", mf.field_diagnostics.field_resolution_monitor,
      lambda: dict(pde=CPDE(), tail_tol=1e-3, negative_tol=1e-4),
      bad={"tail_tol": _types(NAN, 0.0, -1.0), "negative_tol": _types(NAN, 0.0, -1.0)})

# --------------------------------------------------------------------------------- theory (closed forms)
th = mf.theory
_lam = {"lambdas": [None, "l", [], [NAN], [INF], [1j]]}
_beta, _n = {"beta": real_pos()}, {"n": int_pos(2)}
entry("theory.equiangular_rate", th.equiangular_rate, lambda: dict(gamma=0.2, lambdas=[1.0], beta=1.0, n=4),
      bad={"gamma": real_finite(2.0), **_lam, **_beta, **_n, "kernel": choice(), "normalization": choice()})
entry("theory.solve_equiangular", th.solve_equiangular,
      lambda: dict(gamma0=0.2, lambdas=[1.0], beta=1.0, n=4, t=[0.0, 1.0]),
      bad={"gamma0": real_finite(2.0), **_lam, **_beta, **_n, "t": [None, "t", [NAN], [1j], [1.0, 0.0]]})
entry("theory.clustering_time", th.clustering_time,
      lambda: dict(gamma0=0.2, gamma_target=0.9, lambdas=[1.0], beta=1.0, n=4),
      bad={"gamma0": real_finite(2.0), "gamma_target": real_finite(2.0), **_lam, **_beta, **_n}, finite=False)
entry("theory.linearized_clustering_time", th.linearized_clustering_time,
      lambda: dict(gamma0=0.2, gamma_target=0.9, lambdas=[1.0], beta=1.0, n=4),
      bad={"gamma0": real_finite(2.0), "gamma_target": real_finite(2.0), **_lam, **_beta, **_n}, finite=False)
entry("theory.late_rate", th.late_rate, lambda: dict(lambdas=[1.0], beta=1.0), bad={**_lam, **_beta})
for _f in ("phi", "phi_derivative", "phi_second_derivative"):
    entry(f"theory.{_f}", getattr(th, _f), lambda: dict(lam=0.5, beta=1.0, n=4),
          bad={"lam": real_finite(), **_beta, **_n}, names={"lam": ("lambda",)})
entry("theory.lambda_max", th.lambda_max, lambda: dict(beta=1.0, n=4), bad={**_beta, **_n})
entry("theory.phi_inflection", th.phi_inflection, lambda: dict(beta=1.0, n=4), bad={**_beta, **_n}, finite=False)
entry("theory.early_rate", th.early_rate, lambda: dict(lambdas=[1.0, 0.5], beta=1.0, n=4), bad={**_lam, **_beta, **_n})
entry("theory.heterogeneity_gain", th.heterogeneity_gain, lambda: dict(lambdas=[1.0, 0.5], beta=1.0, n=4),
      bad={**_lam, **_beta, **_n})
entry("theory.c_star", th.c_star, lambda: dict(H=2), bad={"H": int_pos(1)})
entry("theory.beta_star", th.beta_star, lambda: dict(H=2, n=8), bad={"H": int_pos(1), **_n, "alpha": real_pos()},
      finite=False)
# radial_fraction and radial_dominance_margins take any finite real beta (documented: beta* may be negative)
entry("theory.radial_fraction", th.radial_fraction, lambda: dict(beta=1.0, alpha=1.0, n=4),
      bad={"beta": real_finite(), "alpha": real_finite(), **_n})
entry("theory.equiangular_layer", th.equiangular_layer, lambda: dict(rho=0.5, beta=2.0, n=8, alpha=1.0),
      bad={"rho": real_finite(1.0, -0.5), **_beta, **_n, "alpha": real_nonneg()})
entry("theory.critical_scaling_limit", th.critical_scaling_limit, lambda: dict(rho=0.5, gamma=2.0, alpha=1.0),
      bad={"rho": real_finite(1.0, -0.1), "gamma": real_pos(), "alpha": real_nonneg()})
entry("theory.radial_dominance_margins", th.radial_dominance_margins, lambda: dict(beta=1.0, alphas=[1.0, 0.5], n=4),
      bad={"beta": real_finite(), "alphas": [None, "a", [], [NAN], [1j]], **_n, "normalization": choice(), "reading": choice()},
      finite=False)
entry("theory.radial_dominance_threshold", th.radial_dominance_threshold, lambda: dict(alphas=[1.0, 0.5], n=4),
      bad={"alphas": [None, "a", [], [NAN], [1j]], **_n, "normalization": choice(), "reading": choice()},
      finite=False)
