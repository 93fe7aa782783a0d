"""The PDE's diffusion as a split scheme's linear part: ContinuumPDE.split, Lawson steppers, cfl_dt."""

import numpy as np
import pytest

from meanfield.core.densities import uniform_density, vmf_density
from meanfield.core.heads import scalar_heads
from meanfield.core.methods import as_stepper, method_names
from meanfield.core.options import Checkpointing, SaveAt, StepControl
from meanfield.models.continuum import ContinuumPDE
from meanfield.workflow.simulate import solve_continuum

QUIET = dict(monitor=False, progress=False)
RUN = dict(save=SaveAt(observe=False), **QUIET)


@pytest.fixture(scope="module")
def noisy():
    return ContinuumPDE(scalar_heads([1.0], 3, beta=2.0), lmax=15, nu=0.5, kernel_tol=1e-6)


@pytest.fixture(scope="module")
def rho(noisy):
    return vmf_density(noisy.grid, [0.0, 0.6, 0.8], 3.0)


def test_split_adds_up_to_rhs(noisy, rho):
    L, N = noisy.split()
    y = noisy.state(rho)
    full = noisy.rhs(0.0, y)
    # the same sums in another order: round-off relative to the largest term (diffusion ~ nu lmax^2 |y|)
    assert np.abs(L * y + N(0.0, y) - full).max() < 1e-12 * np.abs(L * y).max()
    assert L.shape == y.shape and L.max() == 0.0 and L.min() == pytest.approx(-0.5 * 15 * 16, rel=1e-15)


def test_pure_diffusion_is_exact():
    """Without interaction (lambda = 0) rho_lm(t) = exp(-nu l (l + 1) t) rho_lm(0): Lawson schemes integrate L
    exactly, so any step gives it to round-off."""
    pde = ContinuumPDE(scalar_heads([0.0], 3), lmax=12, nu=0.3)
    rho = vmf_density(pde.grid, [0.0, 0.0, 1.0], 4.0)
    for name in (n for n in method_names(exponential=True) if n.startswith("lawson_")):
        tr = solve_continuum(pde, rho, 1.0, method=name, step=StepControl(dt=0.25), **RUN)
        exact = np.exp(-0.3 * pde.grid.l_index * (pde.grid.l_index + 1.0)) * rho
        # exp(tau dt L) products of a few factors: a few ulps of |rho_lm|
        assert np.abs(pde.coefficients(tr.y_final) - exact).max() < 1e-14, name


@pytest.mark.parametrize("nu, expected, tol", [(0.05, 4.0, 0.35), (0.5, 3.5, 0.6)])
def test_lawson_rk4_order(rho, nu, expected, tol):
    """Fixed-step Lawson RK4: order 4 while dt nu lmax^2 is moderate; on the stiff edge (nu = 0.5,
    dt nu l(l+1) up to 8 here) Lawson schemes lose order (known order reduction).  Measured local slopes:
    3.81 (nu = 0.05; plain RK4 at nu = 0 gives 3.9: transport pre-asymptotics) and 3.73 (nu = 0.5)."""
    pde = ContinuumPDE(scalar_heads([1.0], 3, beta=2.0), lmax=15, nu=nu, kernel_tol=1e-6)
    T = 0.5
    ref = solve_continuum(pde, rho, T, method="lawson_dopri5", step=StepControl(rtol=1e-13, atol=1e-15), **RUN).y_final
    dts = np.array([T / 32, T / 64, T / 128]) if nu < 0.1 else np.array([T / 16, T / 32, T / 64])
    errs = [np.abs(solve_continuum(pde, rho, T, method="lawson_rk4", step=StepControl(dt=dt), **RUN).y_final - ref).max()
            for dt in dts]
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    # slopes of three levels; the bands hold the measured values (see the docstring) with margin
    assert abs(slope - expected) < tol, (errs, slope)
    print(f"lawson_rk4 order at nu = {nu}: {slope:.2f}")


def test_lawson_dopri5_step_does_not_pay_for_diffusion(rho):
    """At nu = 0.5 the adaptive Lawson step takes far fewer steps than dopri5 for the same tolerance,
    and the step count hardly changes when nu grows tenfold (it no longer scales with nu lmax^2)."""
    heads = scalar_heads([1.0], 3, beta=2.0)
    steps = {}
    for nu in (0.5, 5.0):
        pde = ContinuumPDE(heads, lmax=31, nu=nu, kernel_tol=1e-6)
        r = vmf_density(pde.grid, [0.0, 0.6, 0.8], 3.0)
        ref = solve_continuum(pde, r, 0.5, method="lawson_dopri5", step=StepControl(rtol=1e-12, atol=1e-14), **RUN).y_final
        for m in ("dopri5", "lawson_dopri5"):
            tr = solve_continuum(pde, r, 0.5, method=m, step=StepControl(rtol=1e-7, atol=1e-9), **RUN)
            steps[nu, m] = tr.n_steps
            # both meet the tolerance (error ~ 1e-9 measured; 1e-6 = 10 rtol covers the global accumulation)
            assert np.abs(tr.y_final - ref).max() < 1e-6
    assert steps[0.5, "lawson_dopri5"] * 2 < steps[0.5, "dopri5"], steps        # measured 3-4x fewer
    assert steps[5.0, "dopri5"] > 5 * steps[0.5, "dopri5"], steps               # explicit: ~ nu lmax^2
    assert steps[5.0, "lawson_dopri5"] <= 1.5 * steps[0.5, "lawson_dopri5"], steps


def test_cfl_dt_of_split_schemes_ignores_diffusion(noisy, rho):
    plain = ContinuumPDE(noisy.heads, lmax=15, kernel_tol=1e-6)
    for name in ("etdrk4", "lawson_rk4"):
        assert noisy.cfl_dt(rho, 0.5, name) == plain.cfl_dt(rho, 0.5, name)          # the same float
    assert noisy.cfl_dt(rho, 0.5, "rk4") < plain.cfl_dt(rho, 0.5, "rk4")           # explicit pays for it
    assert as_stepper("lawson_dopri5").adaptive and as_stepper("lawson_dopri5").split


def test_lawson_resume_bit_for_bit(noisy, rho):
    states = []
    t_eval = np.linspace(0, 0.4, 5)
    a = solve_continuum(noisy, rho, 0.4, method="lawson_dopri5", save=SaveAt(t_eval=t_eval, observe=False),
                        checkpointing=Checkpointing(save=states.append, every=0.1), **QUIET)
    assert len(states) >= 2
    b = solve_continuum(noisy, rho, 0.4, method="lawson_dopri5", save=SaveAt(t_eval=t_eval, observe=False),
                        checkpointing=Checkpointing(resume=states[1]), **QUIET)
    assert np.array_equal(a.y, b.y) and a.n_steps == b.n_steps                 # bit for bit
    u = uniform_density(noisy.grid)
    c = solve_continuum(noisy, u, 0.4, method="lawson_dopri5", save=SaveAt(t_eval=t_eval, observe=False), **QUIET)
    # the uniform density is a steady state: round-off growth only
    assert np.abs(c.y_final - noisy.state(u)).max() < 1e-13
