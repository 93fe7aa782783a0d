"""The one entry point solve(model, start, t_final) (workflow/solve.py): each model reaches its solver, with the
same numbers as calling that solver (tolerance 0: the same code), and anything without rhs(t, y) is refused."""

import numpy as np
import pytest

import meanfield as mf
from meanfield.core.integrate import integrate
from meanfield.core.options import SaveAt, StepControl
from meanfield.models.batched import BatchedSystem

HEADS = mf.scalar_heads([1.0, 0.5], 3, beta=1.0)
SAVE = SaveAt(t_eval=[0.0, 0.05, 0.1], observe=False)


def test_each_model_reaches_its_solver():
    X0 = mf.initial.uniform_sphere(40, 3, seed=1)
    system = mf.ParticleSystem(HEADS)
    a, b = mf.solve(system, X0, 0.1, save=SAVE), mf.solve_particles(system, X0, 0.1, save=SAVE)
    np.testing.assert_array_equal(a.y, b.y)
    pde = mf.ContinuumPDE(HEADS, lmax=8, kernel_tol=1e-8)
    rho = mf.zonal_density(pde.grid, legendre=[1.0, 0.3])
    a, b = mf.solve(pde, rho, 0.1, save=SAVE), mf.solve_continuum(pde, rho, 0.1, save=SAVE)
    np.testing.assert_array_equal(a.y, b.y)
    assert a.message == b.message
    ax = mf.AxisymmetricPDE(mf.scalar_heads([1.0], 4, beta=1.0), d=4, lmax=8, kernel_tol=1e-8)
    c0 = ax.uniform()
    c0[1] = 0.2
    a, b = mf.solve(ax, c0, 0.1, save=SAVE), mf.solve_reduced(ax, c0, 0.1, save=SAVE)
    np.testing.assert_array_equal(a.y, b.y)


def test_other_token_models_and_plain_models_go_to_the_driver():
    batch = BatchedSystem(HEADS)
    X = np.stack([mf.initial.uniform_sphere(12, 3, seed=s) for s in (2, 3)])
    a = mf.solve(batch, X, 0.1, method="rk4", step=StepControl(dt=0.01), save=SAVE)
    b = integrate(batch.rhs, X, (0.0, 0.1), method="rk4", step=StepControl(dt=0.01), save=SAVE,
                  retraction=batch.retraction)
    np.testing.assert_array_equal(a.y, b.y)
    with pytest.raises(ValueError, match="X must"):              # the token model's own start checks
        mf.solve(batch, X[0], 0.1)

    class Decay:                                                 # a model of one's own: y' = -y
        def rhs(self, t, y):
            return -y
    tr = mf.solve(Decay(), np.ones(3), 1.0, method="rk4", step=StepControl(dt=1e-3), save=SaveAt(t_eval=[0, 1]))
    # rk4 at dt = 1e-3: global error ~ dt^4 / 120 ~ 1e-14 relative
    np.testing.assert_allclose(tr.y_final, np.exp(-1.0), rtol=1e-12)
    with pytest.raises(ValueError, match=r"model must implement rhs\(t, y\).*received object, missing \['rhs'\]"):
        mf.solve(object(), np.ones(3), 1.0)
    with pytest.raises(ValueError, match="t_final"):
        mf.solve(Decay(), np.ones(3), -1.0)


# ------------------------------------------------------------------------------ the protocol carries the load (issue 32)
def test_every_model_of_the_package_plans_its_own_runs():
    """Every class of meanfield.models with rhs(t, y) has plan, but BatchedSystem (ensembles of systems, solved by the
    driver with its check and retraction: the generic token-model row of solve)."""
    import importlib
    import inspect
    import pkgutil

    import meanfield.models
    from meanfield.core.model import SolvableModel

    with_rhs = {}
    for info in pkgutil.iter_modules(meanfield.models.__path__):
        mod = importlib.import_module(f"meanfield.models.{info.name}")
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and obj.__module__ == mod.__name__ and not name.startswith("_") \
                    and callable(getattr(obj, "rhs", None)):
                with_rhs[name] = obj
    assert {"ParticleSystem", "ContinuumPDE", "CirclePDE", "AxisymmetricPDE", "CausalSystem", "CausalCirclePDE",
            "CausalSpherePDE", "BatchedSystem"} <= set(with_rhs)
    without = sorted(n for n, cls in with_rhs.items() if not callable(getattr(cls, "plan", None)))
    assert without == ["BatchedSystem"]
    assert all(issubclass(cls, SolvableModel) for n, cls in with_rhs.items() if n != "BatchedSystem")


def test_solves_own_options_are_refused_where_they_do_not_apply():
    X0 = mf.initial.uniform_sphere(10, 3, seed=1)
    with pytest.raises(ValueError, match=r"monitor applies to the models with a resolution monitor.*ParticleSystem"):
        mf.solve(mf.ParticleSystem(HEADS), X0, 0.1, monitor=mf.Monitor(tail_tol=1e-2))
    with pytest.raises(ValueError, match=r"monitor applies to .*received monitor=False for ParticleSystem"):
        mf.solve_particles(mf.ParticleSystem(HEADS), X0, 0.1, monitor=False)
    with pytest.raises(ValueError, match=r"monitor must be None, True, False or a meanfield.Monitor"):
        mf.solve(mf.ContinuumPDE(HEADS, lmax=8, kernel_tol=1e-8), None, 0.1, monitor=1e-3)
    pde = mf.ContinuumPDE(HEADS, lmax=8, kernel_tol=1e-8)
    rho = mf.zonal_density(pde.grid, legendre=[1.0, 0.3])
    with pytest.raises(ValueError, match=r"default observer of ContinuumPDE takes no settings; received \['threshold'\]"):
        mf.solve(pde, rho, 0.1, save=SaveAt(observe={"threshold": 0.5}))
    with pytest.raises(ValueError, match=r"particles' default observer takes the setting 'threshold'.*\['thresh'\]"):
        mf.solve(mf.ParticleSystem(HEADS), X0, 0.1, save=SaveAt(observe={"thresh": 0.5}))
    with pytest.raises(ValueError, match=r"threshold is a setting of the default observer"):
        mf.solve_particles(mf.ParticleSystem(HEADS), X0, 0.1, threshold=0.5, save=SaveAt(observe=False))


@pytest.mark.parametrize("old, where", [("tail_tol", r"monitor=Monitor\(tail_tol=...\)"),
                                        ("negative_tol", r"monitor=Monitor\(negative_tol=...\)"),
                                        ("threshold", r"save=SaveAt\(observe=\{'threshold': ...\}\)"),
                                        ("progress_label", r"progress='label'")])
def test_options_of_0_2_name_their_option_object(old, where):
    """The four loose options of 0.2 joined an option object; passing one names where it is now (a TypeError, as
    for a renamed keyword), for every model."""
    X0 = mf.initial.uniform_sphere(10, 3, seed=1)
    pde = mf.ContinuumPDE(HEADS, lmax=8, kernel_tol=1e-8)
    for model, start in ((mf.ParticleSystem(HEADS), X0), (pde, mf.zonal_density(pde.grid, legendre=[1.0, 0.3]))):
        with pytest.raises(TypeError, match=rf"^solve: {old} is now .*{where}; received {old}=0.5$"):
            mf.solve(model, start, 0.1, **{old: 0.5})


def test_observer_settings_and_monitor_objects_are_the_old_options():
    """``save.observe={"threshold": s}`` is the 0.2 ``threshold=s``, ``monitor=Monitor(...)`` the 0.2 tolerances:
    the same calls, so the records agree exactly (tolerance 0)."""
    X0 = mf.initial.uniform_sphere(40, 3, seed=2)
    system = mf.ParticleSystem(HEADS)
    a = mf.solve(system, X0, 0.3, save=SaveAt(observe={"threshold": 0.5}))
    b = mf.solve_particles(system, X0, 0.3, threshold=0.5)
    c = mf.solve(system, X0, 0.3)
    for key in a.observables:
        np.testing.assert_array_equal(a.observables[key], b.observables[key])
    assert not np.array_equal(a.observables["n_clusters"], c.observables["n_clusters"])   # 0.5 is not 0.99
    from meanfield.analysis import diagnostics
    assert a.observables["n_clusters"][0] == diagnostics.observer(system, None, 0.5)(0.0, X0)["n_clusters"]
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta=4.0), lmax=12, kernel_tol=1e-6)
    from meanfield.core.densities import vmf_density
    rho0 = vmf_density(pde.grid, [0, 0, 1.0], 4.0)
    tol = 2.0 * mf.field_diagnostics.field_spectral_tail(pde, rho0)
    m = mf.solve(pde, rho0, 5.0, monitor=mf.Monitor(tail_tol=tol))
    hook = mf.field_diagnostics.field_resolution_monitor(pde, tol, 1e-4)
    n = mf.solve(pde, rho0, 5.0, monitor=False, event=hook)
    assert m.status == n.status == 1 and m.t_final == n.t_final and m.message == n.message
    with pytest.raises(ValueError, match=r"tail_tol must be a number > 0 or inf"):
        mf.Monitor(tail_tol=0.0)
    assert mf.Monitor(tail_tol=np.inf).tail_tol == np.inf


def test_the_causal_continuum_is_solved_by_its_plan():
    from meanfield.models.causal_continuum import CausalCirclePDE

    pde = CausalCirclePDE(mf.scalar_heads([1.0], 2, 4.0), kmax=16, positions=8)
    a = mf.solve(pde, pde.uniform(), 0.2, save=SaveAt(t_eval=[0.0, 0.2]))
    b = integrate(pde.rhs, pde.state(pde.uniform()), (0.0, 0.2), method="dopri5",
                  step=StepControl(rtol=1e-8, atol=1e-12), save=SaveAt(t_eval=[0.0, 0.2]))
    np.testing.assert_array_equal(a.y, b.y)                       # the same call: tolerance 0
    with pytest.raises(ValueError, match="CausalCirclePDE has no split part"):
        mf.solve(pde, pde.uniform(), 0.2, method="etdrk4")


def test_the_plans_resolve_each_models_defaults():
    X0 = mf.initial.uniform_sphere(40, 3, seed=1)
    plan = mf.ParticleSystem(HEADS).plan(X0, 1.0)
    assert (plan.method, plan.step.rtol, plan.step.atol, plan.label) == ("dopri5", 1e-8, 1e-10, "particles")
    assert plan.noise is None and plan.retraction is not None
    noisy = mf.ParticleSystem(HEADS, nu=0.1).plan(X0, 1.0, step=StepControl(dt=0.01), seed=3)
    assert noisy.method == "geodesic_strang" and noisy.noise is not None and noisy.retraction is None
    pde = mf.ContinuumPDE(HEADS, lmax=8, kernel_tol=1e-8, nu=0.05)
    rho = mf.zonal_density(pde.grid, legendre=[1.0, 0.3])
    plan = pde.plan(rho, 1.0)
    assert (plan.method, plan.step.atol, plan.linear) == ("dopri5", 1e-12, None)
    split = pde.plan(rho, 1.0, method="etdrk4")
    assert split.linear is not None and split.step.dt == pde.cfl_dt(rho, 0.5, "etdrk4")   # the model's CFL rule
    circle = mf.CirclePDE(mf.scalar_heads([1.0], 2, 1.0), kmax=16, nu=0.1)
    with pytest.raises(ValueError, match="CirclePDE has no split part"):
        circle.plan(circle.uniform(), 1.0, method="etdrk2")


def test_a_model_of_ones_own_is_solved_by_its_plan():
    """A model that only implements rhs and plan: solve follows the plan (its method, step and retraction)."""
    from meanfield.core.model import RunPlan

    class Decay:
        def rhs(self, t, y):
            return -y

        def plan(self, start, t_final, *, method=None, step=None, t_eval=None, rate=1.0):
            y0 = np.asarray(start, dtype=float)
            return RunPlan(self.rhs, y0, "rk4", StepControl(dt=0.01), np.linspace(0.0, t_final, 3), label="decay")

    tr = mf.solve(Decay(), [1.0, 2.0], 1.0, progress=False)
    assert tr.method == "rk4" and tr.y.shape == (3, 2)
    # rk4 at dt = 0.01: global error ~ dt^4 / 120 ~ 1e-10; 1e-9 leaves a factor 10
    np.testing.assert_allclose(tr.y[-1], np.exp(-1.0) * np.array([1.0, 2.0]), rtol=1e-9)
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['speed'\] for Decay.*\['rate'\]"):
        mf.solve(Decay(), [1.0], 1.0, speed=2.0)


    class Observed(Decay):                                    # an observer of its own, a plan that counts no records
        def observer(self):
            return lambda t, y: {"norm": float(np.linalg.norm(y))}

    tr = mf.solve(Observed(), [1.0, 2.0], 1.0, progress=False)
    np.testing.assert_allclose(tr.observables["norm"][-1], np.exp(-1.0) * np.sqrt(5.0), rtol=1e-9)


def test_causal_attention_goes_through_solve_with_its_estimate_and_observer():
    from meanfield.models.causal import CausalSystem

    system = CausalSystem(HEADS)
    X0 = mf.initial.uniform_sphere(30, 3, seed=4)
    a = mf.solve(system, X0, 0.1, save=SaveAt(t_eval=[0.0, 0.1]))
    b = integrate(system.rhs, X0, (0.0, 0.1), method="dopri5", step=StepControl(rtol=1e-8, atol=1e-10),
                  save=SaveAt(t_eval=[0.0, 0.1], observe=system.observer()), retraction=system.retraction)
    np.testing.assert_array_equal(a.y, b.y)                       # the same code path: tolerance 0
    assert set(a.observables) == set(b.observables)
    with pytest.raises(ValueError, match=r"CausalSystem run.*would take an estimated.*direct_limit_s"):
        mf.solve(system, X0, 10.0, method="rk4", step=StepControl(dt=1e-6), direct_limit_s=1.0)
    with pytest.raises(ValueError, match="method must be an explicit scheme for CausalSystem"):
        mf.solve(system, X0, 0.1, method="geodesic_strang", step=StepControl(dt=0.01))
    with pytest.raises(ValueError, match="direct_limit_s must be"):          # the name solve was given
        mf.solve(system, X0, 0.1, direct_limit_s=-1.0)


def test_empty_observer_settings_are_the_default_observer_and_integrate_refuses_a_dict():
    """``observe={}`` is the default observer with no settings (never silently none); a bare ``integrate`` has
    no default observer, so a dict there is refused by name."""
    X0 = mf.initial.uniform_sphere(20, 3, seed=3)
    system = mf.ParticleSystem(HEADS)
    a = mf.solve(system, X0, 0.2, save=SaveAt(observe={}))
    b = mf.solve(system, X0, 0.2)
    assert a.observables and set(a.observables) == set(b.observables)
    for key in b.observables:
        np.testing.assert_array_equal(a.observables[key], b.observables[key])      # the same calls: tolerance 0
    with pytest.raises(ValueError, match=r"^save.observe must be True, False, None or a callable for integrate"):
        integrate(lambda t, y: -y, np.ones(2), (0.0, 0.1), save=SaveAt(observe={"threshold": 0.5}))


def test_threshold_given_twice_blank_labels_and_numpy_booleans():
    X0 = mf.initial.uniform_sphere(10, 3, seed=1)
    system = mf.ParticleSystem(HEADS)
    with pytest.raises(ValueError, match=r"threshold given twice: threshold=0.5 and save.observe\['threshold'\] = 0.9"):
        mf.solve_particles(system, X0, 0.1, threshold=0.5, save=SaveAt(observe={"threshold": 0.9}))
    same = mf.solve_particles(system, X0, 0.1, threshold=0.5, save=SaveAt(observe={"threshold": 0.5}))
    assert same.status == 0
    with pytest.raises(ValueError, match=r"progress must be None, True, False or a non-empty label; received '  '"):
        mf.solve(system, X0, 0.1, progress="  ")
    pde = mf.ContinuumPDE(HEADS, lmax=8, kernel_tol=1e-8)
    rho = mf.zonal_density(pde.grid, legendre=[1.0, 0.3])
    on = mf.solve(pde, rho, 0.05, monitor=np.True_, save=SaveAt(observe=False))
    off = mf.solve(pde, rho, 0.05, monitor=np.False_, save=SaveAt(observe=False))
    assert on.status == off.status == 0
