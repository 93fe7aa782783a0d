"""The one method table (meanfield.core.methods.METHODS): every scheme, its capability flags, and a
check over every entry that it is the scheme its flags say (order of accuracy, evaluations per step)."""

import numpy as np
import pytest

from meanfield.core.integrate import integrate
from meanfield.core.methods import FLAGS, METHODS, as_stepper, capabilities, method_names
from meanfield.core.options import StepControl
from meanfield.core.sde import Noise
from meanfield.core.tableaux import IMEX_TABLEAUX, SCHEMES


def test_the_table_holds_every_scheme_once():
    # every tableau, the two Lawson forms, every split scheme and both stochastic schemes: no second registry
    expected = set(SCHEMES) | set(IMEX_TABLEAUX) | {"lawson_dopri5", "lawson_rk4", "imex_euler", "etdrk2", "etdrk4",
                                                    "euler_maruyama", "geodesic_strang"}
    assert set(METHODS) == expected and len(METHODS) == len(expected)
    assert all(METHODS[k].name == k for k in METHODS)


@pytest.mark.parametrize("name", list(METHODS))
def test_flags_are_consistent(name):
    c = capabilities(name)
    assert set(c) == set(FLAGS)
    assert c["explicit"] + c["split"] + c["stochastic"] == 1             # exactly one kind
    assert not c["exponential"] or c["split"]                           # exact L only in a split scheme
    assert not c["adaptive"] or (METHODS[name].err_order is not None and not c["stochastic"])
    assert as_stepper(name) is METHODS[name]


def test_selection_by_flags_and_the_error_lists_the_table():
    assert method_names(stochastic=True) == ["euler_maruyama", "geodesic_strang"]
    assert method_names(adaptive=True) == ["bs32", "dopri5", "lawson_dopri5"]
    assert method_names(exponential=True) == ["lawson_dopri5", "lawson_rk4", "etdrk2", "etdrk4"]
    assert method_names() == list(METHODS)
    with pytest.raises(ValueError, match=r"flag must be one of \['explicit'"):
        method_names(implicit=True)
    with pytest.raises(ValueError, match=r"method must be one of \['bs32', .*'geodesic_strang'\], a Tableau"):
        as_stepper("rk9")
    with pytest.raises(ValueError, match=r"method must be one of \['euler_maruyama', 'geodesic_strang'\].*'rk4'"):
        as_stepper("rk4", stochastic=True)


def _N(t, y):
    return 0.5 * np.sin(y) + np.cos(t)


_L = np.array([-1.0, -2.0])


@pytest.mark.parametrize("name", method_names(stochastic=False))
def test_every_deterministic_entry_converges_at_its_order(name):
    """y' = L y + N(t, y) at fixed steps dt = 1/10, 1/20 against a tight dopri5 run: the observed order
    log2(e(dt) / e(dt/2)) is within 0.35 of the declared one (the asymptotic regime is reached at these
    steps for every scheme here; 0.35 leaves room for the pre-asymptotic terms, not for a wrong order)."""
    y0 = np.array([0.7, -0.4])
    ref = integrate(lambda t, y: _L * y + _N(t, y), y0, (0.0, 1.0), method="dopri5",
                    step=StepControl(rtol=1e-13, atol=1e-15), progress=False).y_final
    stepper = METHODS[name]
    errs = []
    for dt in (0.1, 0.05):
        kw = dict(linear=_L) if stepper.split else {}
        rhs = _N if stepper.split else (lambda t, y: _L * y + _N(t, y))
        r = integrate(rhs, y0, (0.0, 1.0), method=name, step=StepControl(dt=dt, adaptive=False), progress=False, **kw)
        errs.append(np.abs(r.y_final - ref).max())
    observed = np.log2(errs[0] / errs[1])
    assert abs(observed - stepper.order) < 0.35, (name, observed, errs)


@pytest.mark.parametrize("name", method_names(stochastic=True))
def test_every_stochastic_entry_makes_its_declared_drift_evaluations(name):
    X0 = np.tile([[0.0, 0.0, 1.0]], (3, 1))
    r = integrate(lambda t, X: np.zeros_like(X), X0, (0.0, 1.0), method=name, step=StepControl(dt=0.1),
                  noise=Noise(0.1, 0), progress=False)
    assert r.n_steps == 10 and r.nfev == 10 * METHODS[name].n_drift        # integers: exact
    assert np.abs(np.linalg.norm(r.y_final, axis=1) - 1).max() < 1e-14      # on the sphere to round-off
