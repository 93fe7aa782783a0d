"""Tests of meanfield.core.steppers: order conditions, stability regions, split (IMEX/exponential) steppers."""

from math import factorial

import numpy as np
import pytest

from meanfield.core.integrate import integrate
from meanfield.core.methods import METHODS, as_stepper, method_names
from meanfield.core.options import Checkpointing, SaveAt, StepControl
from meanfield.core.steppers import ETDRK2, ExplicitRK, IMEXEuler, Stepper, phi_functions
from meanfield.core.tableaux import IMEX_TABLEAUX, SCHEMES

# the split schemes other than the Lawson forms (those are tested in test_pde_split.py and test_imex.py)
_SPLIT = [k for k in method_names(split=True) if not k.startswith("lawson_")]


# ----------------------------------------------------------------------------- order conditions
def _conditions(A, b, c):
    """Butcher's order conditions by order: (value of b^T Phi(tree), 1 / tree factorial)."""
    Ac, Ac2, AAc = A @ c, A @ c**2, A @ (A @ c)
    return {
        1: [(b.sum(), 1)],
        2: [(b @ c, 1 / 2)],
        3: [(b @ c**2, 1 / 3), (b @ Ac, 1 / 6)],
        4: [(b @ c**3, 1 / 4), (b @ (c * Ac), 1 / 8), (b @ Ac2, 1 / 12), (b @ AAc, 1 / 24)],
        5: [(b @ c**4, 1 / 5), (b @ (c**2 * Ac), 1 / 10), (b @ (c * Ac2), 1 / 15), (b @ (c * AAc), 1 / 30),
            (b @ Ac**2, 1 / 20), (b @ (A @ c**3), 1 / 20), (b @ (A @ (c * Ac)), 1 / 40), (b @ (A @ Ac2), 1 / 60),
            (b @ (A @ AAc), 1 / 120)],
    }


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_order_conditions(name):
    tab = SCHEMES[name]
    pairs = [(tab.b, tab.order)] + ([(tab.b_err, tab.err_order)] if tab.adaptive else [])
    for b, order in pairs:
        cond = _conditions(tab.A, b, tab.c)
        for p in range(1, order + 1):
            # exact rationals rounded to float, summed over <= 7 stages: a few ulps of O(1) terms
            np.testing.assert_allclose([v for v, _ in cond[p]], [e for _, e in cond[p]], rtol=0, atol=1e-14)
        if order < 5:   # the declared order is the order: some condition of order + 1 fails, by
            # 8e-4 at least here (dopri5's embedded pair), ten orders of magnitude above round-off
            assert max(abs(v - e) for v, e in cond[order + 1]) > 1e-4


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_stability_polynomial_matches_exponential_to_the_order(name):
    tab = SCHEMES[name]
    g = tab.stability_polynomial
    p = tab.order
    # R(z) = e^z + O(z^(p+1)): g_k = 1/k! for k <= p (float sums of exact rationals: 1e-15),
    np.testing.assert_allclose(g[:p + 1], [1 / factorial(k) for k in range(p + 1)], rtol=0, atol=1e-15)
    # and the next coefficient differs (dopri5: 1/600 vs 1/720; the others: 0 vs 1/(p+1)!)
    nxt = g[p + 1] if len(g) > p + 1 else 0.0
    assert abs(nxt - 1 / factorial(p + 1)) > 1e-4
    # against the definition R(z) = 1 + z b^T (I - z A)^{-1} 1 at a few complex points: round-off
    for z in (0.3 + 0.2j, -1.5 + 0.7j, 2.0j):
        s = len(tab.b)
        ref = 1 + z * (tab.b @ np.linalg.solve(np.eye(s) - z * tab.A, np.ones(s)))
        assert abs(tab.stability_function(z) - ref) < 1e-13


# ----------------------------------------------------------------------------- stability reach
# known values: RK4 2 sqrt 2 and the real root of R(-x) = 1; 3-stage order 3 sqrt 3 and the real
# root of R(-x) = -1; dopri5 from bisection of the exact rational polynomial |R(iy)|^2 - 1 (60 digits)
REACH = {"euler": (0.0, 2.0), "heun": (0.0, 2.0), "midpoint": (0.0, 2.0),
         "rk3": (np.sqrt(3), 2.5127453266183286), "bs32": (np.sqrt(3), 2.5127453266183286),
         "rk4": (2 * np.sqrt(2), 2.785293563405282), "dopri5": (0.99718900863253, 3.3065678926349467)}


def _R(tab, z):
    """Stability function by its definition (independent of the polynomial coefficients)."""
    s = len(tab.b)
    return 1 + z * (tab.b @ np.linalg.solve(np.eye(s) - z * tab.A, np.ones(s)))


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_stability_reach_known_values(name):
    tab = SCHEMES[name]
    imag, real = REACH[name]
    # roots of a degree <= 12 polynomial polished by Newton: agree to ~1e-14 relative; the
    # dopri5 imaginary root is flat (|R|^2 - 1 ~ y^6 near it) and quoted to 13 digits
    assert abs(tab.imag_reach - imag) <= 1e-12 and abs(tab.real_reach - real) <= 1e-12
    if imag == 0.0:
        assert tab.imag_reach == 0.0       # exactly 0, not a tiny spurious root


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_stability_reach_is_the_edge_of_the_region(name):
    tab = SCHEMES[name]
    I, Rr = tab.imag_reach, tab.real_reach
    # inside: |R| <= 1 up to round-off of the linear solve (1e-13) on both axes
    assert max(abs(_R(tab, 1j * y)) for y in np.linspace(0, I, 201)) <= 1 + 1e-13
    assert max(abs(_R(tab, -x)) for x in np.linspace(0, Rr, 201)) <= 1 + 1e-13
    # just beyond (1e-4 relative, or 1e-2 when the reach is 0): |R| - 1 is first order in the
    # distance, ~1e-5 here, far above round-off; Heun's y^4/8 at 1e-2 is still 1e-9
    assert abs(_R(tab, 1j * max(I * (1 + 1e-4), 1e-2))) > 1 + 1e-10
    assert abs(_R(tab, -Rr * (1 + 1e-4))) > 1 + 1e-10


@pytest.mark.parametrize("name", sorted(k for k, v in SCHEMES.items() if v.imag_reach > 0))
def test_region_contains_the_cfl_triangle(name):
    """ContinuumPDE.cfl_dt relies on the triangle (0, i I, -R) lying in the stability region."""
    tab = SCHEMES[name]
    I, Rr = tab.imag_reach, tab.real_reach
    theta, scale = np.meshgrid(np.linspace(0, 1, 61), np.linspace(0, 1, 61))
    z = (scale * (-Rr * theta + 1j * I * (1 - theta))).ravel()
    # the vertices are on the boundary, where |R| = 1 holds to round-off (1e-13)
    assert np.abs(tab.stability_function(z)).max() <= 1 + 1e-13


def test_steppers_report_their_tableau_or_explicit_part():
    for name, tab in SCHEMES.items():
        st = as_stepper(name)
        assert isinstance(st, ExplicitRK) and st.tableau is tab and not st.split
        assert (st.name, st.order, st.adaptive, st.err_order, st.fsal) == (name, tab.order, tab.adaptive,
                                                                        tab.err_order, tab.fsal)
        assert st.imag_reach == tab.imag_reach and st.real_reach == tab.real_reach   # the same float
    assert METHODS["imex_euler"].explicit_tableau is SCHEMES["euler"]
    assert METHODS["etdrk2"].explicit_tableau is SCHEMES["heun"]
    assert METHODS["etdrk4"].explicit_tableau is SCHEMES["rk4"]
    assert all(isinstance(METHODS[k], Stepper) for k in _SPLIT)
    assert method_names(split=True, adaptive=True) == ["lawson_dopri5"]          # the one adaptive split scheme
    assert as_stepper(SCHEMES["rk4"]).tableau is SCHEMES["rk4"] and as_stepper(ETDRK2()).name == "etdrk2"
    with pytest.raises(ValueError, match=r"method must be one of \['bs32'.*'imex_euler', 'euler_maruyama', 'geodesic_strang'\].*received 'rk9'"):
        as_stepper("rk9")
    with pytest.raises(ValueError, match="linear must be None for the explicit scheme 'rk4'"):
        as_stepper("rk4").step(lambda t, y: y, 0.0, np.ones(2), 0.1, linear=np.ones(2))


# ----------------------------------------------------------------------------- phi functions
def test_phi_functions():
    z = np.array([-50.0, -3.0, -1.0 - 1e-12, -0.999999, -0.3, -1e-9, 0.0, 1e-9, 0.5, 0.999999, 1.0, 2.0])
    phi = phi_functions(z, 3)
    ez = np.exp(z)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = [ez, (ez - 1) / z, (ez - 1 - z) / z**2, (ez - 1 - z - z**2 / 2) / z**3]
    for k in range(4):
        assert phi[k][6] == 1 / factorial(k)           # phi_k(0) = 1/k! (exact: the series' last term)
        big = np.abs(z) >= 0.1     # both branches (series below |z| = 1, recurrence above) vs closed forms
        # relative 1e-13: the closed forms lose ~log10(1/|z|^k) digits at |z| >= 0.1 (1e-12 at k = 3)
        np.testing.assert_allclose(phi[k][big], exact[k][big], rtol=1e-12 if k == 3 else 1e-13)
    # tiny |z| (series branch): phi_k = 1/k! + z/(k+1)! to round-off, where the closed forms are useless
    for k in range(4):
        np.testing.assert_allclose(phi[k][[5, 7]], 1 / factorial(k) + z[[5, 7]] / factorial(k + 1), rtol=1e-15)
    # complex argument (a dispersive linear part): against the closed form at |z| = 2 and the series at 0.5
    zc = np.array([2.0j, -1.0 + 1.7j, 0.5j])
    pc = phi_functions(zc, 2)
    np.testing.assert_allclose(pc[2][:2], (np.exp(zc[:2]) - 1 - zc[:2]) / zc[:2] ** 2, rtol=1e-14)
    np.testing.assert_allclose(pc[1][2], (np.exp(0.5j) - 1) / 0.5j, rtol=1e-14)  # |z| = 0.5: 1 digit lost at most


# ----------------------------------------------------------------------------- split steppers
LIN = np.array([-1.0, -8.0, -30.0])


def exact(t):
    return np.array([np.cos(t), np.exp(-t) / (1 + t), 1 + 0.5 * np.sin(2 * t)])


def dexact(t):
    return np.array([-np.sin(t), -np.exp(-t) / (1 + t) - np.exp(-t) / (1 + t) ** 2, np.cos(2 * t)])


def nonlinear(t, y):
    """Manufactured N: y' = LIN * y + N(t, y) has the exact solution ``exact`` (nonlinear, coupled)."""
    Y = exact(t)
    g = lambda u: np.array([u[0] * u[2], np.sin(u[0] + u[1]), u[1] ** 2 - u[0]])  # noqa: E731
    return dexact(t) - LIN * Y + g(y) - g(Y)


@pytest.mark.parametrize("name", _SPLIT)
def test_split_stepper_measured_order(name):
    stepper = METHODS[name]
    dts = 2.0 ** -np.arange(6, 11)      # |dt L| <= 0.5: past ETD's pre-asymptotic range at stiff L
    errs = [np.max(np.abs(integrate(nonlinear, exact(0.0), (0.0, 2.0), method=name, step=StepControl(dt=h),
                                    linear=LIN).y_final
                          - exact(2.0))) for h in dts]
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    # same margin as the explicit schemes' test (0.25); observed 0.999 (imex_euler), 1.94 (etdrk2), 3.95 (etdrk4),
    # 1.96 (ars232), 2.78 (ars443: pre-asymptotic at |dt L| up to 0.47, local slopes 2.87-2.98 from dt = 2^-8 on;
    # tests/test_imex.py measures it on the PDE)
    assert abs(slope - stepper.order) < 0.25, (name, slope, errs)
    assert errs[-1] < 100 * dts[-1] ** stepper.order   # err ~ C dt^p with a modest C (observed 1.5, 3.2, 20; 0.8, 28)


def test_split_steppers_on_a_stiff_linear_part():
    """L = -1e4 at dt = 0.05 (|dt L| = 500): explicit RK4 blows up (|R(-500)| ~ 3e9 per step), the split
    steppers do not."""
    L = np.array([-1.0, -1e4])
    N = lambda t, y: np.array([np.sin(t), 1.0])  # noqa: E731  (y2 relaxes to 1e-4 within ~1e-4 time)
    y0 = np.array([1.0, 1.0])
    with np.errstate(over="ignore", invalid="ignore"):
        r = integrate(N, y0, (0.0, 2.0), method="rk4", step=StepControl(dt=0.05), linear=L)
    assert r.status == -1 and "non-finite" in r.message
    # exact: y2(t) = 1e-4 + (1 - 1e-4) e^{-1e4 t} = 1e-4 at t = 2 (the transient e^{-2e4} underflows)
    for name in _SPLIT:
        r = integrate(N, y0, (0.0, 2.0), method=name, step=StepControl(dt=0.05), linear=L)
        assert r.success
        # ETD integrates the constant forcing exactly (weights summing to h phi_1(hL)); IMEX Euler's fixed point is
        # dt / (dt * 1e4) = 1e-4, approached by a factor 1/501 per step: both at 1e-4 to round-off (1e-12 relative)
        assert abs(r.y_final[1] - 1e-4) < 1e-16


@pytest.mark.parametrize("name", _SPLIT)
def test_split_steppers_exact_on_the_linear_part_and_explicit_at_zero(name):
    L = np.array([-3.0, 0.5, -0.01])
    r = integrate(lambda t, y: np.zeros_like(y), np.ones(3), (0.0, 2.0), method=name, step=StepControl(dt=0.3),
                  linear=L)
    if name.startswith("etd"):    # ETD: e^{L t} with t = 2 reached in 7 steps of products of exp: a few ulps per step
        np.testing.assert_allclose(r.y_final, np.exp(2.0 * L), rtol=1e-14)
    if name in IMEX_TABLEAUX:     # IMEX RK: each step multiplies by the implicit part's R(dt L) (t_eval clips the last)
        R = IMEX_TABLEAUX[name].stability_function
        want = R(0.3 * L, 0) ** 6 * R(0.2 * L, 0)
        np.testing.assert_allclose(r.y_final, want.real, rtol=1e-13)   # 7 steps of a few stage divisions: ulps
    # L = 0: the step is its explicit tableau's, up to the order of floating-point operations
    rhs = lambda t, y: np.array([y[1], -np.sin(y[0])])  # noqa: E731
    stepper = METHODS[name]
    a = integrate(rhs, [1.0, 0.0], (0.0, 3.0), method=name, step=StepControl(dt=0.1), linear=np.zeros(2))
    b = integrate(rhs, [1.0, 0.0], (0.0, 3.0), method=stepper.explicit_tableau, step=StepControl(dt=0.1))
    np.testing.assert_allclose(a.y, b.y, rtol=0, atol=1e-14)        # 30 steps of O(1) values: round-off
    assert a.nfev == b.nfev                                           # the same stages: integers, exact
    c = integrate(rhs, [1.0, 0.0], (0.0, 3.0), method=name, step=StepControl(dt=0.1))   # linear=None means L = 0
    np.testing.assert_array_equal(a.y, c.y)       # zeros(2) and the scalar 0 give the same floats


def test_imex_euler_with_zero_linear_part_is_euler_bit_for_bit():
    rhs = lambda t, y: np.array([y[1], -np.sin(y[0])])  # noqa: E731
    c = integrate(rhs, [1.0, 0.0], (0.0, 3.0), method="imex_euler", step=StepControl(dt=0.1))
    d = integrate(rhs, [1.0, 0.0], (0.0, 3.0), method="euler", step=StepControl(dt=0.1))
    np.testing.assert_array_equal(c.y, d.y)      # y + dt N divided by exactly 1.0: bit for bit


def test_explicit_scheme_with_linear_part_folds_it_into_rhs():
    L = np.array([-2.0, 0.3])
    N = lambda t, y: np.array([np.cos(t) * y[1], -y[0] ** 2])  # noqa: E731
    a = integrate(N, [1.0, 0.5], (0.0, 1.0), method="dopri5", linear=L, save=SaveAt(t_eval=[0.0, 0.5, 1.0]))
    b = integrate(lambda t, y: L * y + N(t, y), [1.0, 0.5], (0.0, 1.0), method="dopri5",
                  save=SaveAt(t_eval=[0.0, 0.5, 1.0]))
    np.testing.assert_array_equal(a.y, b.y)      # the same arithmetic: tolerance 0
    assert a.nfev == b.nfev


def test_split_scheme_checkpoint_resume_is_bit_for_bit():
    kw = dict(method="etdrk2", step=StepControl(dt=0.01),
              save=SaveAt(t_eval=np.linspace(0, 1, 5), observe=lambda t, y: {"s": y.sum()}), linear=LIN)
    full = integrate(nonlinear, exact(0.0), (0.0, 1.0), **kw)
    saved = []
    integrate(nonlinear, exact(0.0), (0.0, 1.0), checkpointing=Checkpointing(save=saved.append, every=0.2), **kw)
    resumed = integrate(nonlinear, exact(0.0), (0.0, 1.0), checkpointing=Checkpointing(resume=saved[1]), **kw)
    np.testing.assert_array_equal(resumed.y, full.y)       # same steps, same arithmetic: tolerance 0
    np.testing.assert_array_equal(resumed.observables["s"], full.observables["s"])
    assert (resumed.nfev, resumed.n_steps, resumed.method) == (full.nfev, full.n_steps, "etdrk2")


@pytest.mark.parametrize("kwargs,match", [
    (dict(linear=np.ones(4)), r"linear must be .*broadcasting to y0's shape \(3,\); received shape \(4,\)"),
    (dict(linear=[np.nan, 0, 0]), "linear must be .*received an array containing NaN"),
    (dict(linear=[1j, 0, 0]), "linear must be None or a finite real numeric array.*complex128"),
    (dict(linear="abc"), "linear must be"),
    (dict(step=StepControl(adaptive=True)), r"adaptive must be None, False, or True for the adaptive schemes.*'etdrk2'"),
    (dict(step=StepControl(dt=None)), "dt must be a positive number for the fixed-step method 'etdrk2'"),
])
def test_split_bad_inputs(kwargs, match):
    args = dict(method="etdrk2", step=StepControl(dt=0.1), linear=LIN)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        integrate(nonlinear, exact(0.0), (0.0, 1.0), **args)


def test_custom_stepper_through_the_driver():
    """The interface is all the driver needs: a user Stepper (here IMEX Euler under a new name) runs."""
    from dataclasses import dataclass

    @dataclass(frozen=True, eq=False)
    class Mine(IMEXEuler):
        name: str = "mine"

    r = integrate(nonlinear, exact(0.0), (0.0, 1.0), method=Mine(), step=StepControl(dt=0.01), linear=LIN)
    s = integrate(nonlinear, exact(0.0), (0.0, 1.0), method="imex_euler", step=StepControl(dt=0.01), linear=LIN)
    assert r.method == "mine" and np.array_equal(r.y, s.y)     # same steps: tolerance 0


@pytest.mark.parametrize("name", ["etdrk2", "etdrk4"])
def test_exponential_coefficients_cache_never_mixes_problems(name):
    """The registry's steppers keep the last phi coefficients; another L or dt must not reuse them."""
    shared = METHODS[name]
    kw = dict(method=shared, save=SaveAt(t_eval=[0.0, 0.37, 1.0]))          # 0.37 is off the grid: a shortened step
    for L, dt in ((LIN, 0.01), (2 * LIN, 0.01), (2 * LIN, 0.02), (LIN, 0.02)):
        a = integrate(nonlinear, exact(0.0), (0.0, 1.0), step=StepControl(dt=dt), linear=L.copy(), **kw)
        fresh = type(shared)()                                 # no cache yet
        b = integrate(nonlinear, exact(0.0), (0.0, 1.0), step=StepControl(dt=dt), linear=L, **{**kw, "method": fresh})
        np.testing.assert_array_equal(a.y, b.y)              # same coefficients, same arithmetic: tolerance 0
