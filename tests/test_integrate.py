"""Tests of meanfield.integrate: tableau identities, measured orders, error control, hooks."""

from dataclasses import replace

import numpy as np
import pytest
from scipy.linalg import expm

from meanfield.core.integrate import Trajectory, integrate
from meanfield.core.options import Checkpointing, SaveAt, StepControl
from meanfield.core.tableaux import SCHEMES, Tableau, rk_step

J = np.array([[0.0, -1.0], [1.0, 0.0]])
ADAPTIVE = sorted(k for k, v in SCHEMES.items() if v.adaptive)


def rotation_problem(g, G):
    """Nonlinear, non-autonomous y' = g(t) |y|^2 J y on R^2 from y0 = (1, 0).

    |y| = 1 is conserved by the exact flow, so y(t) = (cos G(t), sin G(t)) with G' = g; the
    schemes do not conserve |y|, so the nonlinearity is exercised.
    """
    def rhs(t, y):
        return g(t) * (y @ y) * (J @ y)

    def exact(t):
        return np.array([np.cos(G(t)), np.sin(G(t))])

    return rhs, exact


# phase G(t) = t + sin(t)/2: every scheme's error is in its asymptotic regime on the dt ranges below
ROT_COS = rotation_problem(lambda t: 1 + 0.5 * np.cos(t), lambda t: t + 0.5 * np.sin(t))
# phase G(t) = log(1 + t): used for the embedded weights (on ROT_COS the leading error
# constant of bs32's embedded 2nd-order solution nearly vanishes, giving a pre-asymptotic slope)
ROT_DECAY = rotation_problem(lambda t: 1 / (1 + t), np.log1p)
T_ORDER = 4.0
# first exponent k of dt = 2^-k per order: coarse enough that the finest error stays >= 1e-12
# (far above round-off), fine enough to be past the pre-asymptotic range.  5 points each.
K_START = {1: 6, 2: 4, 3: 4, 4: 3, 5: 3}


def measured_order(tableau, problem):
    rhs, exact = problem
    dts = 2.0 ** -np.arange(K_START[tableau.order], K_START[tableau.order] + 5)
    errs = [np.max(np.abs(integrate(rhs, [1.0, 0.0], (0.0, T_ORDER), method=tableau,
                                    step=StepControl(dt=h, adaptive=False)).y_final - exact(T_ORDER))) for h in dts]
    return np.polyfit(np.log(dts), np.log(errs), 1)[0]


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_tableau_identities(name):
    tab = SCHEMES[name]
    s = len(tab.b)
    assert tab.name == name and tab.A.shape == (s, s) and tab.c.shape == (s,)
    # coefficients are exact rationals rounded to float: sums agree to a few ulps
    assert abs(tab.b.sum() - 1) < 1e-14
    np.testing.assert_allclose(tab.A.sum(axis=1), tab.c, rtol=0, atol=1e-14)
    # strictly lower triangular (explicit scheme): exact zeros on and above the diagonal
    assert np.all(np.triu(tab.A) == 0)
    assert tab.adaptive == (tab.b_err is not None) == (tab.err_order is not None)
    if tab.adaptive:
        assert abs(tab.b_err.sum() - 1) < 1e-14  # same reason: exact rationals in float
        assert tab.err_order == tab.order - 1


def test_registry_contents():
    expected = {"euler": 1, "heun": 2, "midpoint": 2, "rk3": 3, "rk4": 4, "bs32": 3, "dopri5": 5}
    assert {k: SCHEMES[k].order for k in expected} == expected  # integers: exact
    assert ADAPTIVE == ["bs32", "dopri5"]
    assert SCHEMES["bs32"].fsal and SCHEMES["dopri5"].fsal and not SCHEMES["rk4"].fsal


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_measured_order(name):
    # slope of log(error) vs log(dt) over 5 halvings; 0.25 absorbs the remaining
    # higher-order contamination (observed slopes lie within 0.17 of the order)
    # while still separating consecutive orders
    tab = SCHEMES[name]
    assert abs(measured_order(tab, ROT_COS) - tab.order) < 0.25


@pytest.mark.parametrize("name", ADAPTIVE)
def test_measured_order_of_embedded_weights(name):
    # the error estimator's weights b_err form a method of order err_order; same 0.25 margin
    # (observed within 0.03 on this problem)
    tab = SCHEMES[name]
    emb = Tableau(name + "-embedded", tab.A, tab.b_err, tab.c, tab.err_order)
    assert abs(measured_order(emb, ROT_DECAY) - tab.err_order) < 0.25


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_rk_step_single_step(name):
    # y' = 1 is integrated exactly by any consistent scheme (sum(b) = 1): error is round-off only
    tab = SCHEMES[name]
    y_new, y_err, k_last = rk_step(lambda t, y: np.ones_like(y), 0.0, np.zeros((2, 3)), 0.5, tab)
    np.testing.assert_allclose(y_new, 0.5, rtol=0, atol=1e-15)
    assert (y_err is None) == (not tab.adaptive)
    if tab.adaptive:  # b - b_err sums to zero: the estimate of an exact step is round-off
        np.testing.assert_allclose(y_err, 0.0, rtol=0, atol=1e-15)
    assert (k_last is None) == (not tab.fsal)


def test_fsal_k_last_is_rhs_at_new_state():
    rhs, _ = ROT_COS
    y_new, _, k_last = rk_step(rhs, 0.3, np.array([0.6, 0.8]), 0.1, SCHEMES["dopri5"])
    # same arithmetic on the same inputs, bar c[-1]*dt vs dt in t: agree to round-off
    np.testing.assert_allclose(k_last, rhs(0.4, y_new), rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", ADAPTIVE)
def test_adaptive_error_decreases_with_rtol(name):
    rhs, exact = ROT_COS
    t_eval = np.linspace(0.0, T_ORDER, 9)
    errs = []
    for rtol in (1e-4, 1e-6, 1e-8):
        r = integrate(rhs, [1.0, 0.0], (0.0, T_ORDER), method=name, step=StepControl(rtol=rtol, atol=1e-12),
                      save=SaveAt(t_eval=t_eval))
        assert r.success and r.method == name
        np.testing.assert_array_equal(r.t, t_eval)  # steps are clipped onto t_eval: exact times
        err = max(np.max(np.abs(y - exact(t))) for t, y in zip(r.t, r.y))
        # local control at rtol keeps the global error over a few periods well within 100 rtol
        assert err < 100 * rtol
        errs.append(err)
    # global error scales ~ rtol^(p/(p+1)); a 100x tighter rtol must gain at least 10x
    assert errs[1] < errs[0] / 10 and errs[2] < errs[1] / 10


@pytest.mark.parametrize("name,stages", [("dopri5", 7), ("bs32", 4)])
def test_rejections_and_fsal_nfev(name, stages):
    rhs, exact = ROT_COS
    r = integrate(rhs, [1.0, 0.0], (0.0, T_ORDER), method=name, step=StepControl(dt=2.0, rtol=1e-8, atol=1e-12))
    assert r.success and r.n_rejected >= 1  # a first step of 2.0 cannot meet rtol 1e-8
    # counts are integers, exact: rhs(t0) once, then (stages - 1) new evaluations per attempt (FSAL)
    assert r.nfev == 1 + (stages - 1) * (r.n_steps + r.n_rejected)
    r2 = integrate(rhs, [1.0, 0.0], (0.0, T_ORDER), method=name, step=StepControl(rtol=1e-8, atol=1e-12))
    # the Hairer-Wanner initial step costs exactly one more evaluation
    assert r2.nfev == 2 + (stages - 1) * (r2.n_steps + r2.n_rejected)
    assert np.max(np.abs(r2.y_final - exact(T_ORDER))) < 1e-6  # 100 rtol, as above


def test_adaptive_on_particle_array_and_dt_max():
    rng = np.random.default_rng(0)
    X0 = rng.normal(size=(5, 3))
    W = np.array([[0.0, -1.0, 0.5], [1.0, 0.0, -0.3], [-0.5, 0.3, 0.0]])
    r = integrate(lambda t, X: X @ W.T, X0, (0.0, 2.0), method="dopri5",
                  step=StepControl(rtol=1e-9, atol=1e-12, dt_max=0.05), save=SaveAt(t_eval=[0.0, 1.0, 2.0]))
    assert r.y.shape == (3, 5, 3) and r.y_final.shape == (5, 3)
    exact = np.stack([X0 @ expm(W * t).T for t in r.t])
    np.testing.assert_allclose(r.y, exact, rtol=0, atol=1e-7)  # 100 rtol times |X| ~ 1
    assert r.n_steps >= 2.0 / 0.05  # integer count: dt_max = 0.05 forces at least 40 steps


def sphere_flow(t, X):
    v = np.array([0.0, 0.0, 1.0])
    return v - (X @ v)[:, None] * X  # projected constant field: tangent to the unit sphere


@pytest.mark.parametrize("method,dt", [("rk4", 0.05), ("dopri5", None)])
def test_retraction_keeps_state_on_sphere(method, dt):
    X0 = np.random.default_rng(1).normal(size=(8, 3))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)

    def retract(X):
        return X / np.linalg.norm(X, axis=1, keepdims=True)

    r = integrate(sphere_flow, X0, (0.0, 3.0), method=method, step=StepControl(dt=dt),
                  save=SaveAt(t_eval=np.linspace(0, 3, 7)), retraction=retract)
    # normalizing a 3-vector leaves |x| within a few ulps of 1
    np.testing.assert_allclose(np.linalg.norm(r.y, axis=-1), 1.0, rtol=0, atol=1e-15)
    # the drift is one step's truncation error: rk4 at dt = 0.05 ~ dt^5, dopri5 ~ rtol 1e-6
    assert 0 < r.max_retraction < 1e-5
    r0 = integrate(sphere_flow, X0, (0.0, 3.0), method=method, step=StepControl(dt=dt))
    assert r0.max_retraction == 0.0  # no retraction: reported as exactly 0
    assert np.max(np.abs(np.linalg.norm(r0.y_final, axis=1) - 1)) > 1e-14  # the drift is real


@pytest.mark.parametrize("method,dt", [("rk4", 0.03), ("dopri5", None)])
def test_observe_at_t_eval(method, dt):
    X0 = np.random.default_rng(2).normal(size=(4, 3))
    t_eval = np.linspace(0.0, 1.0, 11)
    calls = []

    def observe(t, X):
        calls.append(t)
        return {"mean": X.mean(axis=0), "norm2": float(np.sum(X**2))}

    r = integrate(sphere_flow, X0, (0.0, 1.0), method=method, step=StepControl(dt=dt),
                  save=SaveAt(t_eval=t_eval, observe=observe))
    np.testing.assert_array_equal(r.t, t_eval)  # steps land on t_eval exactly (no tolerance)
    assert calls == list(t_eval)  # observe runs exactly once per recorded time, t0 included
    assert r.observables["mean"].shape == (11, 3) and r.observables["norm2"].shape == (11,)
    np.testing.assert_array_equal(r.observables["mean"], r.y.mean(axis=1))  # same arithmetic
    assert r.t_final == 1.0 and np.array_equal(r.y_final, r.y[-1])
    r2 = integrate(sphere_flow, X0, (0.0, 1.0), method=method, step=StepControl(dt=dt),
                   save=SaveAt(t_eval=t_eval, observe=observe, states=False))
    assert r2.y is None and np.array_equal(r2.observables["norm2"], r.observables["norm2"])


def test_fixed_grid_hits_times_without_drift():
    ones = lambda t, y: np.ones_like(y)  # noqa: E731
    r = integrate(ones, [0.0], (0.0, 1.0), method="rk4", step=StepControl(dt=0.1))
    # t = t0 + k dt, snapped onto the end: exactly 10 steps (4 evaluations each, rhs(t0) reused)
    assert r.n_steps == 10 and r.t_final == 1.0 and r.nfev == 40
    r = integrate(ones, [0.0], (0.0, 1.0), method="rk4", step=StepControl(dt=0.1),
                  save=SaveAt(t_eval=[0.0, 0.25, 1.0]))
    # the grid is kept: 0.2 -> 0.25 -> 0.3 adds exactly one step
    assert r.n_steps == 11 and np.array_equal(r.t, [0.0, 0.25, 1.0])
    r = integrate(ones, [0.0], (0.0, 100.0), method="euler", step=StepControl(dt=0.01))
    assert r.n_steps == 10_000 and r.t_final == 100.0  # 10^4 steps, no accumulated drift in t
    assert abs(r.y_final[0] - 100.0) < 1e-9  # y sums 10^4 steps: round-off ~ 1e4 * eps * 100


def test_event_stops_run():
    def event(t, y):
        return "crossed 0.55" if y[0] > 0.55 else None

    r = integrate(lambda t, y: np.ones_like(y), [0.0], (0.0, 1.0), method="rk4", step=StepControl(dt=0.1),
                  save=SaveAt(observe=lambda t, y: {"y": y[0]}), event=event)
    assert r.status == 1 and r.success and "crossed 0.55" in r.message
    assert abs(r.t_final - 0.6) < 1e-12  # first grid point past 0.55; grid arithmetic round-off
    assert r.t[-1] == r.t_final and np.array_equal(r.y[-1], r.y_final)  # stopping state recorded
    assert r.t.shape == (2,) and r.observables["y"].shape == (2,)  # t0 and the stop
    assert str(round(r.t_final, 6)) in r.message
    r = integrate(lambda t, y: np.ones_like(y), [1.0], (0.0, 1.0), step=StepControl(dt=0.1), event=event)
    assert r.status == 1 and r.n_steps == 0 and r.nfev == 1 and list(r.t) == [0.0]  # fires at t0


@pytest.mark.parametrize("method", ["rk4", "dopri5"])
def test_non_finite_state_fails(method):
    def rhs(t, y):
        return np.full_like(y, np.nan) if t > 0.5 else -y

    r = integrate(rhs, [1.0, 2.0], (0.0, 2.0), method=method, step=StepControl(dt=0.1),
                  save=SaveAt(t_eval=np.linspace(0, 2, 21)))
    assert r.status == -1 and not r.success and "non-finite" in r.message
    assert r.t_final <= 0.5 + 1e-12 and np.all(np.isfinite(r.y))  # the last good state is kept
    assert np.all(r.t <= r.t_final)


def test_max_steps_and_step_underflow():
    # adaptive: the step count is not known in advance, the run stops with status -1
    r = integrate(lambda t, y: -y, [1.0], (0.0, 1.0), method="dopri5",
                  step=StepControl(rtol=1e-12, atol=1e-14, max_steps=5))
    assert r.status == -1 and "max_steps" in r.message and r.n_steps + r.n_rejected == 5
    # fixed steps: a dt needing more than max_steps steps is refused before any work
    with pytest.raises(ValueError, match=r"dt must be at least .* > max_steps = 5"):
        integrate(lambda t, y: -y, [1.0], (0.0, 1.0), step=StepControl(dt=0.1, max_steps=5))
    rng = np.random.default_rng(3)
    noise = lambda t, y: 1e8 * rng.normal(size=y.shape)  # noqa: E731  (no step can meet atol)
    r = integrate(noise, [0.0], (0.0, 1.0), method="dopri5", step=StepControl(atol=1e-12, rtol=1e-12))
    assert r.status == -1 and "underflow" in r.message


def test_inputs_untouched_and_integer_state_promoted():
    y0 = np.array([[1, 0], [0, 1]])
    r = integrate(lambda t, y: -y, y0, (0.0, 1.0), step=StepControl(dt=0.1))
    assert y0.dtype.kind == "i" and np.array_equal(y0, [[1, 0], [0, 1]])  # caller's array intact
    np.testing.assert_allclose(r.y_final, np.exp(-1.0) * np.eye(2), rtol=1e-6)  # rk4, dt 0.1: ~1e-7
    assert isinstance(r, Trajectory) and r.y.shape == (2, 2, 2)


def test_progress_bar_does_not_change_result(capsys):
    rhs, _ = ROT_COS
    a = integrate(rhs, [1.0, 0.0], (0.0, 1.0), step=StepControl(dt=0.01), progress=True)
    b = integrate(rhs, [1.0, 0.0], (0.0, 1.0), step=StepControl(dt=0.01), progress=False)
    assert np.array_equal(a.y, b.y)  # same arithmetic, bit for bit
    assert "rk4" in capsys.readouterr().err  # the forced bar was drawn on stderr


def _decay(t, y):
    return -y


@pytest.mark.parametrize("kwargs,match", [
    (lambda: dict(method="rk5"), r"method must be one of \['bs32'.*received 'rk5'"),
    (lambda: dict(method="rk4", step=StepControl(dt=None)), "dt must be"),
    (lambda: dict(step=StepControl(dt=-0.1)), "dt must be"),
    (lambda: dict(t_span=(1.0, 0.0)), "t_span must be"),
    (lambda: dict(t_span=(0.0, 1.0, 2.0)), "t_span must be"),
    (lambda: dict(save=SaveAt(t_eval=[0.0, 0.5, 0.5])), "t_eval must be"),
    (lambda: dict(save=SaveAt(t_eval=[[0.0, 0.5]])), "t_eval must be"),
    (lambda: dict(save=SaveAt(t_eval=[0.0, 2.0])), "t_eval must be inside t_span"),
    (lambda: dict(method="dopri5", step=StepControl(rtol=-1.0)), "rtol must be"),
    (lambda: dict(method="dopri5", step=StepControl(atol=-1.0)), "atol must be"),
    (lambda: dict(method="dopri5", step=StepControl(dt_max=0.0)), "dt_max must be"),
    (lambda: dict(step=StepControl(dt=0.1, max_steps=0)), "max_steps must be"),
    (lambda: dict(step=StepControl(adaptive=True)), "adaptive must be"),
    (lambda: dict(y0=[np.nan]), "y0 must be"),
    (lambda: dict(rhs=lambda t, y: np.zeros(3)), r"rhs must be .*received \(3,\)"),
    (lambda: dict(save=SaveAt(observe=3)), "observe must be"),
])
def test_bad_inputs_raise_named_errors(kwargs, match):
    """The option objects refuse their own bad fields when built, the driver the rest: the same messages."""
    with pytest.raises(ValueError, match=match):
        args = dict(rhs=_decay, y0=[1.0], t_span=(0.0, 1.0), step=StepControl(dt=0.1))
        args.update(kwargs())
        rhs, y0, t_span = args.pop("rhs"), args.pop("y0"), args.pop("t_span")
        integrate(rhs, y0, t_span, **args)


def test_adaptive_scheme_with_fixed_dt_requires_dt():
    with pytest.raises(ValueError, match="dt must be"):
        integrate(_decay, [1.0], (0.0, 1.0), method="dopri5", step=StepControl(adaptive=False))
    r = integrate(_decay, [1.0], (0.0, 1.0), method=replace(SCHEMES["rk4"], name="my-rk4"), step=StepControl(dt=0.1))
    assert r.method == "my-rk4" and r.success  # a Tableau instance is accepted as method


# ---------------------------------------------------------------- checkpoint and resume
def _rotation_rhs(t, y):
    return np.stack([-y[:, 1], y[:, 0]], axis=1) * (1 + 0.5 * np.sin(t)) + 0.1 * y ** 2


@pytest.mark.parametrize("method", ["rk4", "dopri5", "bs32"])
def test_resume_from_checkpoint_is_bit_for_bit(method):
    y0 = np.array([[1.0, 0.0], [0.3, 0.2]])
    kw = dict(method=method, step=StepControl(dt=0.01 if method == "rk4" else None, rtol=1e-8, atol=1e-10),
              save=SaveAt(t_eval=np.linspace(0, 2, 9), observe=lambda t, y: {"s": y.sum()}))
    full = integrate(_rotation_rhs, y0, (0.0, 2.0), **kw)
    saved = []
    integrate(_rotation_rhs, y0, (0.0, 2.0), checkpointing=Checkpointing(save=saved.append, every=0.3), **kw)
    assert len(saved) >= 5
    resumed = integrate(_rotation_rhs, y0, (0.0, 2.0), checkpointing=Checkpointing(resume=saved[2]), **kw)
    # same step sequence, same arithmetic: identical floats (tolerance 0)
    np.testing.assert_array_equal(resumed.y, full.y)
    np.testing.assert_array_equal(resumed.observables["s"], full.observables["s"])
    assert (resumed.nfev, resumed.n_steps) == (full.nfev, full.n_steps)


def test_interrupt_returns_work_and_resumes():
    calls = {"n": 0}

    def rhs(t, y):
        calls["n"] += 1
        if calls["n"] == 150:
            raise KeyboardInterrupt
        return _rotation_rhs(t, y)

    y0 = np.array([[1.0, 0.0]])
    kw = dict(method="rk4", step=StepControl(dt=0.01), save=SaveAt(t_eval=np.linspace(0, 1, 11)))
    saved = []
    part = integrate(rhs, y0, (0.0, 1.0), checkpointing=Checkpointing(save=saved.append), **kw)
    assert part.status == 2 and "interrupted" in part.message and not part.success
    assert 0 < part.t_final < 1 and len(part.t) >= 2 and len(saved) == 1
    resumed = integrate(rhs, y0, (0.0, 1.0), checkpointing=Checkpointing(resume=saved[0]), **kw)
    full = integrate(_rotation_rhs, y0, (0.0, 1.0), **kw)
    np.testing.assert_array_equal(resumed.y, full.y)   # bit for bit (fixed steps)


def test_resume_rejects_foreign_checkpoint():
    y0 = np.array([[1.0, 0.0]])
    saved = []
    integrate(_rotation_rhs, y0, (0.0, 1.0), method="rk4", step=StepControl(dt=0.01),
              checkpointing=Checkpointing(save=saved.append, every=0.2))
    with pytest.raises(ValueError, match="resume must be a checkpoint of method 'dopri5'"):
        integrate(_rotation_rhs, y0, (0.0, 1.0), method="dopri5", checkpointing=Checkpointing(resume=saved[0]))
    with pytest.raises(ValueError, match="resume must be a checkpoint of the same t_span"):
        integrate(_rotation_rhs, y0, (0.0, 2.0), method="rk4", step=StepControl(dt=0.01),
                  checkpointing=Checkpointing(resume=saved[0]))
    with pytest.raises(ValueError, match="every must be a positive finite number"):
        integrate(_rotation_rhs, y0, (0.0, 1.0), method="rk4", step=StepControl(dt=0.01),
                  checkpointing=Checkpointing(every=-1.0))


@pytest.mark.parametrize("method", ["rk4", "dopri5"])
def test_rhs_reusing_its_output_buffer(method):
    """An rhs returning the same array every call (a common optimization) gives the same run."""
    buf = np.empty((2, 2))

    def reusing(t, y):
        buf[...] = _rotation_rhs(t, y)
        return buf

    y0 = np.array([[1.0, 0.0], [0.3, 0.2]])
    kw = dict(method=method, step=StepControl(dt=0.01 if method == "rk4" else None, rtol=1e-8, atol=1e-10))
    a = integrate(reusing, y0, (0.0, 1.0), **kw)
    b = integrate(_rotation_rhs, y0, (0.0, 1.0), **kw)
    np.testing.assert_array_equal(a.y, b.y)      # identical arithmetic: tolerance 0


def test_interrupt_inside_observe_resumes_bit_for_bit():
    """Ctrl-C while the observe hook runs (between a step and its record) loses nothing."""
    calls = {"n": 0}

    def observe(t, y):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return {"s": y.sum()}

    y0 = np.array([[1.0, 0.0], [0.3, 0.2]])
    kw = dict(method="dopri5", step=StepControl(rtol=1e-8, atol=1e-10))
    t_eval = np.linspace(0, 1, 5)
    saved = []
    part = integrate(_rotation_rhs, y0, (0.0, 1.0), save=SaveAt(t_eval=t_eval, observe=observe),
                     checkpointing=Checkpointing(save=saved.append), **kw)
    assert part.status == 2 and len(part.t) == len(part.observables["s"]) == 2
    resumed = integrate(_rotation_rhs, y0, (0.0, 1.0), save=SaveAt(t_eval=t_eval, observe=observe),
                        checkpointing=Checkpointing(resume=saved[-1]), **kw)
    full = integrate(_rotation_rhs, y0, (0.0, 1.0), save=SaveAt(t_eval=t_eval, observe=lambda t, y: {"s": y.sum()}),
                     **kw)
    np.testing.assert_array_equal(resumed.t, full.t)          # each time once, none repeated
    np.testing.assert_array_equal(resumed.y, full.y)
    np.testing.assert_array_equal(resumed.observables["s"], full.observables["s"])


def test_schemes_have_one_home_and_checkpoint_keys_are_kept():
    import meanfield
    from meanfield.core import integrate as module
    from meanfield.core import steppers, tableaux
    # the registry lives in core.tableaux (the top level's SCHEMES is it); the driver and the
    # steppers use it without exporting it again (0.1's re-exports were removed in 0.2.0)
    assert meanfield.SCHEMES is tableaux.SCHEMES and SCHEMES is tableaux.SCHEMES
    for name in ("SCHEMES", "Tableau", "rk_step"):
        assert name in tableaux.__all__ and name not in module.__all__ and name not in steppers.__all__
    # a checkpoint state keeps its keys (files written before the split still resume)
    saved = []
    integrate(_rotation_rhs, np.array([[1.0, 0.0]]), (0.0, 1.0), method="dopri5",
              checkpointing=Checkpointing(save=saved.append, every=0.5))
    assert list(saved[0]) == ["method", "t_span", "t_eval", "t", "y", "k0", "h", "i_target", "n_steps", "n_rejected",
                              "k_grid", "max_retraction", "rejected_last", "nfev", "rec_t", "rec_y", "rec_obs",
                              "settings"]                  # appended (older files without it still resume)


def test_resume_with_other_step_settings_is_refused():
    # a checkpoint continues only the run it came from: another dt (fixed) or rtol (adaptive) would
    # silently change the step sequence (a grid point behind the current time, or another answer)
    for method, first, other in (("rk4", dict(step=StepControl(dt=0.1)), dict(step=StepControl(dt=0.05))),
                                 ("dopri5", dict(step=StepControl(rtol=1e-6)), dict(step=StepControl(rtol=1e-8)))):
        saved = []
        integrate(_rotation_rhs, np.array([[1.0, 0.0]]), (0.0, 1.0), method=method,
                  checkpointing=Checkpointing(save=saved.append, every=0.5), **first)
        with pytest.raises(ValueError, match="same step settings"):
            integrate(_rotation_rhs, np.array([[1.0, 0.0]]), (0.0, 1.0), method=method,
                      checkpointing=Checkpointing(resume=saved[0]), **other)
        old = {k: v for k, v in saved[0].items() if k != "settings"}     # a file from before: still resumes
        integrate(_rotation_rhs, np.array([[1.0, 0.0]]), (0.0, 1.0), method=method,
                  checkpointing=Checkpointing(resume=old), **first)
