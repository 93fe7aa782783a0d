"""IMEX Runge-Kutta pairs ARS(2,3,2) and ARS(4,4,3), and the measured orders of every split scheme on the noisy PDE.

Order conditions of the pairs (explicit, implicit and coupling), L-stability of the implicit parts,
the joint stability reach, orders as slopes of log error against log dt on ``ContinuumPDE(nu=...)``
(ETDRK2/4, Lawson RK4, Lawson DOPRI5 at fixed steps and its embedded solution, ARS), a step far
above ``1 / (nu lmax^2)`` at lmax 63, checkpoint/resume and ``t_eval`` through the one driver.
"""

from dataclasses import replace

import numpy as np
import pytest

from meanfield.core.densities import vmf_density
from meanfield.core.heads import scalar_heads
from meanfield.core.integrate import integrate
from meanfield.core.methods import METHODS, as_stepper
from meanfield.core.options import Checkpointing, SaveAt, StepControl
from meanfield.core.steppers import IMEXRK, LawsonRK
from meanfield.core.tableaux import IMEX_TABLEAUX, SCHEMES
from meanfield.models.continuum import ContinuumPDE
from meanfield.workflow.simulate import solve_continuum

QUIET = dict(monitor=False, progress=False)
RUN = dict(save=SaveAt(observe=False), **QUIET)


# ----------------------------------------------------------------------------- the tableaux
def _conditions(A, b, c):
    """Order conditions up to 4 for weights ``b`` and one stage matrix ``A`` on every internal node:
    ``{p: [(b^T Phi(tree), 1 / tree factorial)]}``.  With ``(b, A)`` running over the explicit and the
    implicit part, orders <= 3 give every coupling condition of an additive pair with shared ``c``."""
    Ac = A @ c
    return {1: [(b.sum(), 1.0)], 2: [(b @ c, 1 / 2)], 3: [(b @ c**2, 1 / 3), (b @ Ac, 1 / 6)],
            4: [(b @ c**3, 1 / 4), (b @ (c * Ac), 1 / 8), (b @ (A @ c**2), 1 / 12), (b @ (A @ Ac), 1 / 24)]}


@pytest.mark.parametrize("name", sorted(IMEX_TABLEAUX))
def test_ars_order_conditions(name):
    tab = IMEX_TABLEAUX[name]
    Ae, be, Ai, bi, c = tab.explicit.A, tab.explicit.b, tab.A, tab.b, tab.c
    # shared stage times; A[0] = 0 (the first stage is y_n), implicit part lower triangular
    np.testing.assert_allclose(Ae.sum(1), c, rtol=0, atol=1e-15)
    np.testing.assert_allclose(Ai.sum(1), c, rtol=0, atol=1e-15)
    assert not Ai[0].any() and np.array_equal(Ai, np.tril(Ai)) and np.array_equal(Ae, np.tril(Ae, -1))
    worst_next = 0.0
    for b in (be, bi):
        for A in (Ae, Ai):
            cond = _conditions(A, b, c)
            for p in range(1, tab.order + 1):
                # exact rationals (and sqrt 2) rounded to float, <= 5 stages: a few ulps of O(1) terms
                np.testing.assert_allclose([v for v, _ in cond[p]], [e for _, e in cond[p]], rtol=0, atol=1e-14)
            worst_next = max(worst_next, max(abs(v - e) for v, e in cond[tab.order + 1]))
    # the declared order is the order: some condition of order + 1 fails, far above round-off
    # (measured 0.040 for ars232, 0.097 for ars443)
    assert worst_next > 1e-2, worst_next


@pytest.mark.parametrize("name", sorted(IMEX_TABLEAUX))
def test_ars_implicit_part_is_l_stable_and_the_joint_reach(name):
    tab = IMEX_TABLEAUX[name]
    x = np.concatenate([[0.0], np.logspace(-4, 12, 400)])
    R = np.abs(tab.stability_function(-x, 0.0))
    # A-stable on the negative real axis (|R| <= 1 to round-off), L-stable: R(-1e12) ~ 1e-12 (R = O(1/|z|))
    assert R.max() <= 1 + 1e-14 and R[-1] < 1e-10
    # the joint reach: transport at any diffusion rate; stable just inside (97 %), unstable just outside (103 %)
    r = tab.imag_reach
    xs = np.concatenate([[0.0], np.logspace(-6, 15, 4000)])          # finer than the property's own grid
    assert np.abs(tab.stability_function(-xs, 0.97j * r)).max() <= 1.0 + 1e-12
    assert np.abs(tab.stability_function(-xs, 1.03j * r)).max() > 1.0
    # stiff modes under transport: ars443 (stiffly accurate) damps them, R = O(1 / |z_L|) (measured 8.5e-8 at
    # z_L = -1e8, z_N = 5i); ars232 tends to -delta z_N (|delta| = 2 sqrt 2 / 3), to O(1 / |z_L|) again
    stiff = abs(tab.stability_function(-1e8, 5j))
    assert stiff < 1e-6 if name == "ars443" else abs(stiff - 5 * 2 * np.sqrt(2) / 3) < 1e-6
    if name == "ars232":      # the stiff limit R -> -delta z_N: reach 1 / |delta| = 3 / (2 sqrt 2), to the bisection's 1e-12
        assert r == pytest.approx(3 / (2 * np.sqrt(2)), rel=1e-10)
        assert tab.explicit.imag_reach == pytest.approx(np.sqrt(3), rel=1e-12)   # explicit part: third order on lambda y
    else:                     # ars443: the explicit part's reach (x = 0) is the binding one
        assert r == tab.explicit.imag_reach
    assert as_stepper(name).imag_reach == r and as_stepper(name).real_reach == tab.explicit.real_reach


def test_ars_registry_and_no_error_control():
    for name, tab in IMEX_TABLEAUX.items():
        st = as_stepper(name)
        assert isinstance(st, IMEXRK) and st is METHODS[name] and st.split and not st.adaptive
        assert (st.name, st.order, st.err_order, st.explicit_tableau) == (name, tab.order, None, tab.explicit)
    assert as_stepper("ars443").fsal and not as_stepper("ars232").fsal     # stiffly accurate pair / not
    with pytest.raises(ValueError, match=r"adaptive must be None, False, or True for the adaptive schemes.*'ars443'"):
        integrate(lambda t, y: -y, [1.0], (0.0, 1.0), method="ars443", step=StepControl(adaptive=True))
    with pytest.raises(ValueError, match="dt must be a positive number for the fixed-step method 'ars232'"):
        integrate(lambda t, y: -y, [1.0], (0.0, 1.0), method="ars232")


@pytest.mark.parametrize("name", sorted(IMEX_TABLEAUX))
def test_ars_coefficient_cache_never_mixes_problems(name):
    """The registry's stepper keeps the last ``1 / (1 - dt a_ii L)``; another L or dt must not reuse it."""
    L0 = np.array([-1.0, -8.0, -30.0])
    rhs = lambda t, y: np.array([np.sin(t) * y[1], -y[0] * y[2], np.cos(y[0])])  # noqa: E731
    kw = dict(method=METHODS[name], save=SaveAt(t_eval=[0.0, 0.37, 1.0]))             # 0.37: a shortened step
    for L, dt in ((L0, 0.01), (2 * L0, 0.01), (2 * L0, 0.02), (L0, 0.02)):
        a = integrate(rhs, [1.0, 0.5, -0.2], (0.0, 1.0), step=StepControl(dt=dt), linear=L.copy(), **kw)
        b = integrate(rhs, [1.0, 0.5, -0.2], (0.0, 1.0), step=StepControl(dt=dt), linear=L,
                      **{**kw, "method": IMEXRK(IMEX_TABLEAUX[name])})      # a fresh stepper: no cache
        np.testing.assert_array_equal(a.y, b.y)             # same coefficients, same arithmetic: tolerance 0


# ----------------------------------------------------------------------------- orders on the noisy PDE
_D5 = SCHEMES["dopri5"]
EMBEDDED = LawsonRK(replace(_D5, name="dopri5_embedded", b=_D5.b_err, order=4, b_err=None, err_order=None))
"""Lawson DOPRI5's embedded (order 4) solution as a stepper of its own: y_new - y_err of lawson_dopri5."""


@pytest.fixture(scope="module")
def references():
    """lawson_dopri5 at rtol 1e-13 to T = 0.5 (differs from rtol 1e-12 by 1e-13 at nu = 0.05, 2e-15 at 0.5)."""
    out = {}
    for nu in (0.05, 0.5):
        pde = ContinuumPDE(scalar_heads([1.0], 3, beta=2.0), lmax=15, nu=nu, kernel_tol=1e-6)
        rho = vmf_density(pde.grid, [0.0, 0.6, 0.8], 3.0)
        out[nu] = pde, rho, solve_continuum(pde, rho, 0.5, method="lawson_dopri5",
                                            step=StepControl(rtol=1e-13, atol=1e-15), **RUN).y_final
    return out


# measured slopes over the three steps (nu = 0.05 / 0.5): etdrk2 1.92 / 1.95, etdrk4 3.93 / 3.94, lawson_rk4
# 3.90 / 3.95, lawson_dopri5 4.95 / 5.05, its embedded solution 3.87 / 3.91, ars232 2.06 / 1.95, ars443 2.92 / 2.91
# (the smallest errors stay >= 80x above the reference's error; lawson_dopri5 at nu = 0.5 uses larger steps for that)
@pytest.mark.parametrize("nu", [0.05, 0.5])
@pytest.mark.parametrize("name, order", [("etdrk2", 2), ("etdrk4", 4), ("lawson_rk4", 4), ("lawson_dopri5", 5),
                                         ("embedded", 4), ("ars232", 2), ("ars443", 3)])
def test_split_scheme_orders_on_the_noisy_pde(references, nu, name, order):
    pde, rho, ref = references[nu]
    T = 0.5
    dts = T / (np.array([32, 64, 128]) if (name, nu) == ("lawson_dopri5", 0.5) else np.array([64, 128, 256]))
    method = EMBEDDED if name == "embedded" else name
    errs = [np.abs(solve_continuum(pde, rho, T, method=method, step=StepControl(dt=dt, adaptive=False), **RUN).y_final - ref).max()
            for dt in dts]
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    # the same band as every other order test here (0.25): the measured slopes (above) are 0.1 inside it at most
    assert abs(slope - order) < 0.25, (name, nu, slope, errs)
    assert as_stepper(method).order == order


# ----------------------------------------------------------------------------- stiff diffusion
@pytest.mark.parametrize("name", sorted(IMEX_TABLEAUX))
def test_ars_step_does_not_depend_on_nu_lmax2(name):
    """lmax 63, nu = 5: 1 / (nu lmax (lmax + 1)) = 5e-5.  The ARS pairs take the transport step of
    cfl_dt (the same float at nu = 5 and nu = 50), 67-99x that, and stay bounded and accurate; RK4
    (real reach 2.785: stable below 1.4e-4) blows up at a step 20x smaller than theirs."""
    heads = scalar_heads([1.0], 3, beta=2.0)
    pde = ContinuumPDE(heads, lmax=63, nu=5.0, kernel_tol=1e-6)
    rho = vmf_density(pde.grid, [0.0, 0.6, 0.8], 20.0)               # content up to l ~ 60
    dt = pde.cfl_dt(rho, 0.5, name)
    assert dt == ContinuumPDE(heads, lmax=63, nu=50.0, kernel_tol=1e-6).cfl_dt(rho, 0.5, name)
    assert dt * 5.0 * 63 * 64 > 50
    tr = solve_continuum(pde, rho, 0.2, method=name, step=StepControl(dt=dt), **RUN)
    ref = solve_continuum(pde, rho, 0.2, method="lawson_dopri5", step=StepControl(rtol=1e-10, atol=1e-12), **RUN).y_final
    assert tr.success and np.all(np.isfinite(tr.y_final))
    # bounded: no coefficient above the mean's 1 / sqrt(4 pi) = 0.282; mass kept to round-off
    assert np.abs(tr.y_final).max() <= np.abs(ref).max() * (1 + 1e-12)
    assert abs(tr.y_final[0] - pde.state(rho)[0]) < 1e-14
    # accurate: measured 4.7e-6 (ars232) and 7.9e-7 (ars443) against the reference; 5e-5 leaves 10x
    assert np.abs(tr.y_final - ref).max() < 5e-5
    with np.errstate(all="ignore"):
        bad = solve_continuum(pde, rho, 0.2, method="rk4", step=StepControl(dt=dt / 20), **RUN)
    assert bad.status == -1 and "non-finite" in bad.message


def test_ars_resume_and_t_eval_bit_for_bit(references):
    pde, rho, _ = references[0.5]
    t_eval = [0.0, 0.05, 0.137, 0.3, 0.4]            # 0.137 is off the step grid: a shortened step lands on it
    for name in IMEX_TABLEAUX:
        states = []
        a = solve_continuum(pde, rho, 0.4, method=name, step=StepControl(dt=0.01),
                            save=SaveAt(t_eval=t_eval, observe=False),
                            checkpointing=Checkpointing(save=states.append, every=0.1), **QUIET)
        assert len(states) >= 2 and np.array_equal(a.t, t_eval)
        b = solve_continuum(pde, rho, 0.4, method=name, step=StepControl(dt=0.01),
                            save=SaveAt(t_eval=t_eval, observe=False),
                            checkpointing=Checkpointing(resume=states[1]), **QUIET)
        assert np.array_equal(a.y, b.y) and (a.n_steps, a.nfev) == (b.n_steps, b.nfev)     # bit for bit
        # the recorded states are states of the run: the one at 0.137 against a run that ends there (same steps)
        c = solve_continuum(pde, rho, 0.137, method=name, step=StepControl(dt=0.01), save=SaveAt(t_eval=t_eval[:3], observe=False),
                            **QUIET)
        np.testing.assert_array_equal(a.y[2], c.y_final)


@pytest.mark.parametrize("method", ["lawson_rk4", "imex_euler", "etdrk2"])
def test_a_split_scheme_on_a_reduced_model_is_refused_by_name(method):
    """The circle and axisymmetric models have no split part: a split scheme silently ran as its explicit tableau
    (the diffusion explicit, the stability the scheme promises gone).  Refused, naming the explicit schemes."""
    import meanfield as mf

    pde = mf.CirclePDE(mf.scalar_heads([1.0], 2, 1.0), kmax=16, nu=0.1)
    with pytest.raises(ValueError, match=rf"method must be an explicit scheme for CirclePDE.*received the split "
                                         rf"scheme '{method}'"):
        mf.solve_reduced(pde, pde.uniform(), 0.1, method=method)
