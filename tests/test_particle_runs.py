"""Particle runs against closed forms: equiangular reduced ODEs and measured temporal orders
(was test_validation.py, too close to test_validate.py: 0.2.0 names test files after what they test)."""

import numpy as np
import pytest

from meanfield import theory
from meanfield.core.heads import scalar_heads
from meanfield.core.initial import equiangular, uniform_sphere
from meanfield.core.options import SaveAt, StepControl
from meanfield.core.tableaux import SCHEMES
from meanfield.models.particles import ParticleSystem
from meanfield.workflow.simulate import solve_particles


def gram_offdiag(X):
    G = X @ X.T
    return G[~np.eye(len(X), dtype=bool)]


@pytest.mark.parametrize("kernel, normalization", [("exp", "softmax"), ("exp", "mean"),
                                                   ("relu", "mean"), ("relu", "softmax")])
def test_equiangular_particles_match_reduced_ode(kernel, normalization):
    n, d, beta, lambdas, gamma0 = 5, 6, 1.0, [1.0, 0.5], 0.1
    system = ParticleSystem(scalar_heads(lambdas, d, beta=beta, kernel=kernel, normalization=normalization))
    X0 = equiangular(n, d, gamma0, seed=1)
    t = np.linspace(0, 2.0, 9)
    tr = solve_particles(system, X0, 2.0, step=StepControl(rtol=1e-11, atol=1e-13),
                         save=SaveAt(t_eval=t, observe=False))
    assert tr.status == 0
    gam = np.array([gram_offdiag(X) for X in tr.y])
    # scalar heads preserve equiangularity: spread of the Gram entries stays at round-off
    assert np.ptp(gam, axis=1).max() < 1e-9
    exact = theory.solve_equiangular(gamma0, lambdas, beta, n, t, kernel=kernel, normalization=normalization)
    # both integrations at rtol ~1e-11: agreement to 1e-8 absolute leaves margin for the
    # retraction's O(dt^(p+1)) local perturbations
    np.testing.assert_allclose(gam.mean(axis=1), exact, atol=1e-8)
    assert exact[-1] > gamma0 + 0.05    # the run actually moved


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_particle_temporal_order(name):
    """Fixed steps on the sphere with retraction: log-error slope matches the declared order."""
    scheme = SCHEMES[name]
    system = ParticleSystem(scalar_heads([1.0, -0.5], 3, beta=2.0, normalization="softmax"))
    X0 = uniform_sphere(12, 3, seed=2)
    T = 1.0
    ref = solve_particles(system, X0, T, method="dopri5", step=StepControl(rtol=1e-13, atol=1e-15),
                          save=SaveAt(observe=False)).y_final
    dts = np.array([0.1, 0.05, 0.025, 0.0125]) if scheme.order <= 2 else np.array([0.2, 0.1, 0.05, 0.025])
    err = [np.abs(solve_particles(system, X0, T, method=name, step=StepControl(dt=dt, adaptive=False),
                                  save=SaveAt(t_eval=[0, T], observe=False)).y_final - ref).max() for dt in dts]
    slope = np.polyfit(np.log(dts), np.log(err), 1)[0]
    # the retraction is a second-order-small change per step, so it keeps the order of every
    # scheme; 0.3 allows the pre-asymptotic coarse steps
    assert abs(slope - scheme.order) < 0.3, (name, slope, err)
