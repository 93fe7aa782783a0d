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
