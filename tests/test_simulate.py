"""Drivers (meanfield.workflow.simulate): solve_particles / solve_continuum times, observe hooks,
the resolution monitor's stop, and input errors that name the argument."""

import numpy as np
import pytest

import meanfield as mf
from meanfield import diagnostics, field_diagnostics
from meanfield.core.densities import perturbed_uniform, uniform_density, vmf_density
from meanfield.core.integrate import integrate
from meanfield.core.options import SaveAt, StepControl

PARTICLE_KEYS = {"energy", "energy_head", "dissipation", "entropy", "relative_entropy", "order_parameter",
                 "min_inner", "mean_inner", "n_clusters"}
CONTINUUM_KEYS = {"mass", "energy", "energy_head", "dissipation", "boltzmann_entropy", "negative_mass",
                  "spectral_tail", "max_density", "order_parameter", "second_moment", "relative_entropy"}


@pytest.fixture
def system():
    return mf.ParticleSystem(mf.scalar_heads([1.0, -0.5], 3, beta=2.0))


@pytest.fixture
def X0():
    return mf.initial.uniform_sphere(8, 3, seed=4)


def small_pde(**kw):
    kw.setdefault("normalization", "mean")
    # kernel_tol 1e-6: lmax 8 resolves exp(<x, y>) to 1e-9, no KernelResolutionWarning
    return mf.ContinuumPDE(mf.scalar_heads([1.0, 0.5], 3, beta=1.0, normalization=kw.pop("normalization")),
                           lmax=8, kernel_tol=1e-6, **kw)


# ---------------------------------------------------------------------------- particles
def test_solve_particles_default_and_given_times(system, X0):
    tr = mf.solve_particles(system, X0, 0.5, save=SaveAt(observe=False))
    # default: 11 equally spaced frames; every step is clipped onto them, so times are exact
    np.testing.assert_array_equal(tr.t, np.linspace(0.0, 0.5, 11))
    assert tr.status == 0 and tr.y.shape == (11, 8, 3) and tr.observables == {}
    np.testing.assert_array_equal(tr.y[0], X0)                         # the start is recorded as given
    t = [0.1, 0.25, 0.5]                                               # t0 itself need not be recorded
    tr2 = mf.solve_particles(system, X0, 0.5, step=StepControl(dt=0.05), save=SaveAt(t_eval=t, observe=False),
                             method="rk4")
    np.testing.assert_array_equal(tr2.t, t)
    assert tr2.method == "rk4" and tr2.n_steps == 10 and tr2.t_final == 0.5
    # the retraction keeps every token on the sphere: |x| = 1 to round-off of one normalization
    np.testing.assert_allclose(np.linalg.norm(tr2.y, axis=-1), 1.0, rtol=0, atol=1e-15)


def test_solve_particles_observe_records(system, X0):
    tr = mf.solve_particles(system, X0, 0.3, save=SaveAt(t_eval=[0.0, 0.1, 0.3]))
    assert set(tr.observables) == PARTICLE_KEYS
    obs = tr.observables
    assert obs["energy_head"].shape == (3, 2) and obs["entropy"].shape == (3, 2) and obs["energy"].shape == (3,)
    for k, X in enumerate(tr.y):
        # the hook evaluates the same functions on the same recorded states: identical floats
        assert obs["energy"][k] == system.energy(X)
        np.testing.assert_array_equal(obs["energy_head"][k], system.energies(X))
        assert obs["dissipation"][k] == diagnostics.dissipation(system, X)
    # per-head energies sum to the total (sum of 2 floats in another order: 1e-15 relative)
    np.testing.assert_allclose(obs["energy_head"].sum(axis=1), obs["energy"], rtol=1e-15)
    flat = mf.ParticleSystem(system.heads, "flat")
    assert set(mf.solve_particles(flat, X0, 0.1).observables) == PARTICLE_KEYS - {"min_inner", "mean_inner",
                                                                                   "n_clusters"}
    # the clustering threshold is passed on: at threshold -1 every token is in one cluster
    assert np.all(mf.solve_particles(system, X0, 0.1, threshold=-1.0).observables["n_clusters"] == 1)


def test_solve_particles_custom_observe_and_weights(system, X0):
    seen = []

    def hook(t, X):
        seen.append(t)
        return {"first": X[0], "t2": t * t}

    tr = mf.solve_particles(system, X0, 0.2, save=SaveAt(t_eval=[0.0, 0.2], observe=hook))
    assert seen == [0.0, 0.2] and set(tr.observables) == {"first", "t2"}    # once per recorded time
    np.testing.assert_array_equal(tr.observables["first"], tr.y[:, 0])
    # weights: uniform weights take the plain rhs, others the weighted one (different velocities)
    w = np.linspace(1.0, 2.0, 8)
    w /= w.sum()
    kw = dict(step=StepControl(dt=0.05), save=SaveAt(t_eval=[0.0, 0.2], observe=False), method="rk4")
    uni = mf.solve_particles(system, X0, 0.2, w=np.full(8, 1 / 8), **kw)
    np.testing.assert_array_equal(uni.y_final, mf.solve_particles(system, X0, 0.2, **kw).y_final)
    weighted = mf.solve_particles(system, X0, 0.2, w=w, **kw)
    assert np.abs(weighted.y_final - uni.y_final).max() > 1e-6         # the weights act
    # ... through the weighted right-hand side, with the sphere retraction: identical floats
    ref = integrate(system.weighted_rhs(w), X0, (0.0, 0.2), step=StepControl(dt=0.05), save=SaveAt(t_eval=[0.0, 0.2]),
                    method="rk4", retraction=system.retraction)
    np.testing.assert_array_equal(weighted.y_final, ref.y_final)


@pytest.mark.parametrize("kwargs, match", [
    (dict(t_final=0.0), r"t_final must be a positive finite number; received 0.0"),
    (dict(t_final=float("nan")), r"t_final must be a positive finite number; received nan"),
    (dict(t_final=float("inf")), r"t_final must be a positive finite number; received inf"),
    (dict(save=SaveAt(t_eval=[0.0, 2.0])), r"t_eval must be inside t_span \[0.0, 1.0\]"),
    (lambda: dict(save=SaveAt(t_eval=[0.5, 0.2])), r"t_eval must be a non-empty 1-d strictly increasing array"),
    (dict(method="rk5"), r"method must be one of \['bs32', .*\], a Tableau or a Stepper; received 'rk5'"),
    (dict(method="rk4"), r"dt must be a positive number for the fixed-step method 'rk4'; received None"),
    (dict(w=np.ones(8)), r"w must be 8 finite weights >= 0 summing to 1 \(to 1e-8\); received shape \(8,\), sum 8.0"),
    (dict(w=np.ones(3) / 3), r"w must be 8 finite weights >= 0 summing to 1 .*; received shape \(3,\)"),
    (lambda: dict(step=StepControl(rtol=-1.0)), r"rtol must be"),       # lambdas: refused when built
])
def test_solve_particles_input_errors(system, X0, kwargs, match):
    kw = dict(t_final=1.0, save=SaveAt(observe=False))
    with pytest.raises(ValueError, match=match):
        kw.update(kwargs() if callable(kwargs) else kwargs)
        mf.solve_particles(system, X0, kw.pop("t_final"), **kw)


# ---------------------------------------------------------------------------- continuum
def test_solve_continuum_times_and_observe():
    pde = small_pde(normalization="softmax")
    rho0 = vmf_density(pde.grid, [0, 0, 1.0], 1.0)
    t = np.array([0.0, 0.05, 0.1])
    tr = mf.solve_continuum(pde, rho0, 0.1, save=SaveAt(t_eval=t))
    np.testing.assert_array_equal(tr.t, t)                      # steps clipped onto t_eval: exact
    assert tr.status == 0 and tr.y.shape == (3, pde.n_state)
    assert set(tr.observables) == CONTINUUM_KEYS | {"min_normalizer"}   # softmax: normalizer reported
    # the recorded state at t = 0 is the start (real state vector <-> coefficients: exact)
    np.testing.assert_array_equal(pde.coefficients(tr.y[0]), rho0)
    obs = tr.observables
    assert obs["relative_entropy"].shape == (3, 2) and obs["energy_head"].shape == (3, 2)
    for k, y in enumerate(tr.y):
        # the hook evaluates the same functions on the same recorded states: identical floats
        assert obs["spectral_tail"][k] == field_diagnostics.field_spectral_tail(pde, pde.coefficients(y))
    # mass: degree-0 coefficient of a divergence is exactly zero, so only round-off (1e-14)
    np.testing.assert_allclose(obs["mass"], 1.0, rtol=0, atol=1e-14)
    default = mf.solve_continuum(pde, rho0, 0.1, save=SaveAt(observe=False))
    np.testing.assert_array_equal(default.t, np.linspace(0.0, 0.1, 11))
    assert default.observables == {}


def test_solve_continuum_noise_records_free_energy():
    pde = small_pde(nu=0.1)
    tr = mf.solve_continuum(pde, vmf_density(pde.grid, [0, 0, 1.0], 1.0), 0.05, save=SaveAt(t_eval=[0.0, 0.05]))
    assert set(tr.observables) == CONTINUUM_KEYS | {"free_energy", "free_energy_dissipation"}
    # free energy = E + nu * boltzmann_entropy (the hook's definition, one multiply-add: 1e-15)
    o = tr.observables
    np.testing.assert_allclose(o["free_energy"], o["energy"] + 0.1 * o["boltzmann_entropy"], rtol=1e-15)


@pytest.mark.parametrize("criterion, kw, start", [
    ("negative mass", dict(), lambda g: perturbed_uniform(g, {(1, 0): 0.5})),
    ("spectral tail", dict(monitor=mf.Monitor(tail_tol=1e-12)), lambda g: vmf_density(g, [0, 0, 1.0], 1.0)),
])
def test_monitor_stops_with_status_and_message(criterion, kw, start):
    pde = small_pde()
    rho0 = start(pde.grid)
    tr = mf.solve_continuum(pde, rho0, 1.0, **kw)
    # the start already violates the criterion: the run stops at t0 with status 1 (a clean stop)
    assert tr.status == 1 and tr.success and tr.n_steps == 0 and tr.t_final == 0.0
    assert tr.message.startswith("event at t = 0.0: density no longer resolved at lmax = 8: " + criterion)
    np.testing.assert_array_equal(tr.t, [0.0])                      # the stopping state is recorded
    assert set(tr.observables) >= {"negative_mass", "spectral_tail"}
    off = mf.solve_continuum(pde, rho0, 0.05, monitor=False, save=SaveAt(observe=False))
    assert off.status == 0 and off.t_final == 0.05                 # monitor=False: runs to the end


def test_monitor_stops_during_a_run():
    """A collapsing density stops once the tail exceeds tail_tol, with the time in the message."""
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta=4.0), lmax=12, kernel_tol=1e-6)
    rho0 = vmf_density(pde.grid, [0, 0, 1.0], 4.0)
    tol = 2.0 * field_diagnostics.field_spectral_tail(pde, rho0)         # concentration doubles the tail
    tr = mf.solve_continuum(pde, rho0, 5.0, monitor=mf.Monitor(tail_tol=tol))
    assert tr.status == 1 and 0 < tr.t_final < 5.0 and tr.t[-1] == tr.t_final
    assert f"event at t = {tr.t_final}" in tr.message and "spectral tail" in tr.message
    assert tr.observables["spectral_tail"][-1] > tol >= tr.observables["spectral_tail"][-2]


def test_solve_continuum_fixed_step_takes_the_cfl_step():
    pde = small_pde()
    rho0 = vmf_density(pde.grid, [0, 0, 1.0], 1.0)
    T = 1.0                                                         # 3 and 15 CFL steps
    dts = {cfl: pde.cfl_dt(rho0, cfl) for cfl in (0.5, 0.1)}
    for cfl, dt in dts.items():
        tr = mf.solve_continuum(pde, rho0, T, method="rk4", step=StepControl(cfl=None if cfl == 0.5 else cfl),
                                save=SaveAt(t_eval=[0.0, T], observe=False), monitor=False)
        # fixed steps on the grid k dt, the last one clipped onto T
        assert tr.status == 0 and tr.n_steps == int(np.ceil(T / dt - 1e-9))
        same = mf.solve_continuum(pde, rho0, T, method="rk4", step=StepControl(dt=dt),
                                  save=SaveAt(t_eval=[0.0, T], observe=False), monitor=False)
        np.testing.assert_array_equal(tr.y_final, same.y_final)   # identical step sequence: tolerance 0


@pytest.mark.parametrize("kwargs, match", [
    (dict(t_final=-1.0), r"t_final must be a positive finite number; received -1.0"),
    (dict(rho_lm0=np.zeros(3)), r"rho_lm0 must be a finite array of shape \(nalm,\) = \(45,\) for lmax = 8; "
                                r"received shape \(3,\)"),
    (lambda: dict(save=SaveAt(t_eval=[0.0, 0.5, 0.5])), r"t_eval must be a non-empty 1-d strictly increasing array"),
    (dict(method="leapfrog"), r"method must be one of"),
    (lambda: dict(step=StepControl(atol=-1.0)), r"atol must be"),       # lambdas: refused when built
])
def test_solve_continuum_input_errors(kwargs, match):
    pde = small_pde()
    kw = dict(rho_lm0=uniform_density(pde.grid), t_final=1.0, save=SaveAt(observe=False))
    with pytest.raises(ValueError, match=match):
        kw.update(kwargs() if callable(kwargs) else kwargs)
        mf.solve_continuum(pde, kw.pop("rho_lm0"), kw.pop("t_final"), **kw)


# ------------------------------------------------------------------- bugs found and fixed
def test_solve_particles_token_errors_name_X0(system, X0):
    # the token errors named "X" (check_tokens was called with its default name)
    with pytest.raises(ValueError, match=r"X0 rows must be unit vectors"):
        mf.solve_particles(system, 2 * X0, 1.0)
    with pytest.raises(ValueError, match=r"w must be"):
        mf.solve_particles(system, X0, 1.0, w=np.ones(len(X0)))


@pytest.mark.parametrize("t_final", ["1.0", None])
def test_t_final_non_number_named_error(system, X0, t_final):
    # was a TypeError from np.isfinite / float
    with pytest.raises(ValueError, match=rf"t_final must be a positive finite number; received {t_final!r}"):
        mf.solve_particles(system, X0, t_final)
    pde = small_pde()
    with pytest.raises(ValueError, match=rf"t_final must be a positive finite number; received {t_final!r}"):
        mf.solve_continuum(pde, uniform_density(pde.grid), t_final)


def test_solve_continuum_bad_cfl_named():
    pde = small_pde()
    with pytest.raises(ValueError, match="cfl"):
        mf.solve_continuum(pde, uniform_density(pde.grid), 1.0, method="rk4", step=StepControl(cfl=-1.0))
