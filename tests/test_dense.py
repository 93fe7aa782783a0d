"""Dense output and root-located events of the driver (meanfield.core.dense, integrate(dense=, events=))."""

import numpy as np
import pytest

from meanfield.core.dense import Event, locate_root
from meanfield.core.integrate import integrate
from meanfield.core.options import Checkpointing, SaveAt, StepControl
from meanfield.core.sde import Noise


def _osc(t, y):
    return np.array([y[1], -y[0]])


Y0 = np.array([1.0, 0.0])           # y = (cos t, -sin t)


def _exact(t):
    return np.array([np.cos(t), -np.sin(t)])


def test_dense_output_is_fourth_order_between_the_steps():
    """dopri5 at fixed steps (order 5 at the step points): the error at mid-steps is the Hermite
    interpolant's, O(h^4); the observed order over h = 0.2, 0.1 is within 0.3 of 4."""
    errs = []
    for h in (0.2, 0.1):
        r = integrate(_osc, Y0, (0.0, 4.0), method="dopri5", step=StepControl(dt=h, adaptive=False),
                      save=SaveAt(dense=True), progress=False)
        mids = 0.5 * (r.dense.t[:-1] + r.dense.t[1:])
        errs.append(max(np.abs(r.dense(t) - _exact(t)).max() for t in mids))
    assert abs(np.log2(errs[0] / errs[1]) - 4.0) < 0.3, errs


def test_dense_output_passes_through_the_steps_and_changes_no_number():
    plain = integrate(_osc, Y0, (0.0, 3.0), method="rk4", step=StepControl(dt=0.1),
                      save=SaveAt(t_eval=[0.0, 1.05, 3.0]), progress=False)
    r = integrate(_osc, Y0, (0.0, 3.0), method="rk4", step=StepControl(dt=0.1),
                  save=SaveAt(t_eval=[0.0, 1.05, 3.0], dense=True), progress=False)
    np.testing.assert_array_equal(r.y, plain.y)                   # the same steps, the same floats
    assert r.nfev == plain.nfev + 1                               # only the derivative at the end is extra
    assert r.dense.t[0] == 0.0 and r.dense.t[-1] == 3.0 and 1.05 in r.dense.t
    np.testing.assert_array_equal(r.dense(1.05), r.y[1])          # the interpolant is exact at a step point
    with pytest.raises(ValueError, match=r"t must be inside the dense output's span \[0.0, 3.0\]"):
        r.dense(3.5)


def test_events_are_located_on_the_interpolant():
    """Roots of y_1 = cos t at pi/2 + k pi, to 1e-7 (dopri5 at rtol 1e-10: the solution's own error)."""
    kw = dict(method="dopri5", step=StepControl(rtol=1e-10, atol=1e-12), progress=False)
    r = integrate(_osc, Y0, (0.0, 8.0), events=[lambda t, y: y[0]], **kw)
    np.testing.assert_allclose(r.t_events[0], np.pi / 2 + np.pi * np.arange(3), rtol=0, atol=1e-7)
    np.testing.assert_allclose(r.y_events[0][:, 0], 0.0, rtol=0, atol=1e-7)
    assert r.status == 0 and r.dense is None                      # not terminal: the run goes on
    rising = integrate(_osc, Y0, (0.0, 8.0), events=[Event(lambda t, y: y[0], direction=1.0)], **kw)
    np.testing.assert_allclose(rising.t_events[0], [1.5 * np.pi], rtol=0, atol=1e-7)
    stop = integrate(_osc, Y0, (0.0, 8.0), events=[Event(lambda t, y: y[0], terminal=True)], **kw)
    assert stop.status == 1 and "event 0" in stop.message
    assert stop.t_final == stop.t_events[0][0] == stop.t[-1]
    assert abs(stop.t_final - np.pi / 2) < 1e-7                  # the solution's error, as above
    np.testing.assert_allclose(stop.y_final, [0.0, -1.0], rtol=0, atol=1e-7)


def test_locate_root_brackets_to_xtol():
    r = locate_root(lambda t: t**3 - 2.0, 0.0, 2.0, -2.0, 6.0, xtol=1e-13)
    assert abs(r - 2 ** (1 / 3)) < 1e-12                          # xtol plus round-off


def test_dense_and_events_are_refused_where_they_have_no_meaning():
    X0 = np.tile([[0.0, 0.0, 1.0]], (3, 1))
    with pytest.raises(ValueError, match="dense must be False and events empty for the method 'euler_maruyama'"):
        integrate(lambda t, X: 0 * X, X0, (0.0, 1.0), method="euler_maruyama", step=StepControl(dt=0.1),
                  save=SaveAt(dense=True), noise=Noise(0.1, 0))
    with pytest.raises(ValueError, match="checkpoint must be None"):
        integrate(_osc, Y0, (0.0, 1.0), method="rk4", step=StepControl(dt=0.1),
                  checkpointing=Checkpointing(save=print), events=[lambda t, y: y[0]])
    with pytest.raises(ValueError, match="events must be a sequence of Event"):
        integrate(_osc, Y0, (0.0, 1.0), method="rk4", step=StepControl(dt=0.1), events=[1.0])
    with pytest.raises(ValueError, match="direction must be a finite number"):
        Event(lambda t, y: 0.0, direction=np.nan)
