"""ContinuumPDE.cfl_dt asks the scheme for its stability reach (meanfield.core.steppers)."""

import math

import pytest

from meanfield.core.densities import uniform_density, vmf_density
from meanfield.core.heads import scalar_heads
from meanfield.core.methods import METHODS
from meanfield.core.options import SaveAt, StepControl
from meanfield.core.tableaux import SCHEMES
from meanfield.models.continuum import ContinuumPDE
from meanfield.workflow.simulate import solve_continuum


@pytest.fixture(scope="module")
def pdes():
    heads = scalar_heads([1.0], 3, beta=2.0)
    return ContinuumPDE(heads, lmax=10, kernel_tol=1e-6), ContinuumPDE(heads, lmax=10, nu=0.05, kernel_tol=1e-6)


@pytest.fixture(scope="module")
def rho(pdes):
    return vmf_density(pdes[0].grid, [0.0, 0.6, 0.8], 3.0)


@pytest.mark.parametrize("name", sorted(k for k, v in SCHEMES.items() if v.imag_reach > 0))
def test_cfl_dt_is_the_schemes_reach_over_the_rates(pdes, rho, name):
    plain, noisy = pdes
    tab = SCHEMES[name]
    a = plain.lmax * plain.max_speed(rho)
    d = noisy.nu * noisy.lmax * (noisy.lmax + 1)
    # the same few floating-point operations in another order: 1e-15 relative
    assert plain.cfl_dt(rho, 0.5, name) == pytest.approx(0.5 * tab.imag_reach / a, rel=1e-15)
    assert noisy.cfl_dt(rho, 0.7, tab) == pytest.approx(0.7 / (a / tab.imag_reach + d / tab.real_reach), rel=1e-15)


def test_rk4_default_and_the_changed_constant(pdes, rho):
    plain, noisy = pdes
    a = plain.lmax * plain.max_speed(rho)
    # default scheme rk4: 2 sqrt 2 along the imaginary axis (the former constant 2.8 sat 1 % inside it,
    # and above RK4's real reach 2.785, where |R(-2.8)| = 1.022 > 1): 1e-15 relative, as above
    assert plain.cfl_dt(rho) == pytest.approx(0.5 * 2 * math.sqrt(2) / a, rel=1e-15)
    assert plain.cfl_dt(rho) == plain.cfl_dt(rho, 0.5, "rk4")                  # the same call: exact
    assert abs(SCHEMES["rk4"].stability_function(-2.8)) > 1.02                 # 1.0224: margin 2e-3
    # pure diffusion (uniform density: no velocity) is held to the real reach 2.785
    d = noisy.nu * noisy.lmax * (noisy.lmax + 1)
    u = uniform_density(noisy.grid)
    assert noisy.max_speed(u) < 1e-12           # |X| of the uniform density is round-off
    assert noisy.cfl_dt(u, 1.0) == pytest.approx(SCHEMES["rk4"].real_reach / d, rel=1e-9)


def test_cfl_dt_refuses_schemes_unstable_for_transport(pdes, rho):
    plain, noisy = pdes
    for name in ("euler", "heun", "midpoint", "imex_euler", "etdrk2"):
        allowed = r"\['ars232', 'ars443', 'bs32', 'dopri5', 'etdrk4', 'lawson_dopri5', 'lawson_rk4', 'rk3', 'rk4'\]"
        with pytest.raises(ValueError, match=rf"scheme must be .*imaginary axis.*{allowed}.*received '{name}'"):
            plain.cfl_dt(rho, 0.5, name)
    # without transport (uniform density: degree 0 only, X = 0) Euler is fine: diffusion alone, real reach 2
    d = noisy.nu * noisy.lmax * (noisy.lmax + 1)
    assert noisy.cfl_dt(uniform_density(noisy.grid), 0.5, "euler") == pytest.approx(0.5 * 2.0 / d, rel=1e-9)
    assert METHODS["etdrk2"].real_reach == 2.0
    for bad in (0.0, -1.0, float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match="cfl must be a positive finite number"):
            plain.cfl_dt(rho, bad)
    with pytest.raises(ValueError, match="method must be one of"):
        plain.cfl_dt(rho, 0.5, "rk9")


def test_solve_continuum_takes_the_schemes_cfl_step(pdes, rho):
    plain, _ = pdes
    T = 0.3
    dt = plain.cfl_dt(rho, 0.5, "rk3")
    tr = solve_continuum(plain, rho, T, method="rk3", save=SaveAt(t_eval=[0.0, T], observe=False), monitor=False,
                         progress=False)
    assert tr.success and tr.n_steps == math.ceil(T / dt)        # integers: the grid t0 + k dt, exact
    tr = solve_continuum(plain, rho, T, method="dopri5", step=StepControl(adaptive=False),
                         save=SaveAt(t_eval=[0.0, T], observe=False), monitor=False, progress=False)
    # dopri5's region reaches only 0.997 along the imaginary axis (not 2.8): a smaller step
    assert tr.n_steps == math.ceil(T / plain.cfl_dt(rho, 0.5, "dopri5")) and tr.n_steps > math.ceil(T / dt)
    with pytest.raises(ValueError, match="received 'euler'"):
        solve_continuum(plain, rho, T, method="euler", save=SaveAt(observe=False), progress=False)
    assert solve_continuum(plain, rho, T, method="euler", step=StepControl(dt=0.01), save=SaveAt(observe=False),
                           monitor=False, progress=False).success                          # an explicit dt is the user's call
