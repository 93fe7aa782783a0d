"""Random-weight heads (core/random_heads.py) and schedules of heads in t (core/schedules.py)."""

import numpy as np
import pytest

import meanfield as mf
from meanfield.core.densities import uniform_density
from meanfield.core.heads import scalar_heads
from meanfield.core.options import Checkpointing, SaveAt, StepControl
from meanfield.core.random_heads import SCORE_ENSEMBLES, VALUE_ENSEMBLES, random_heads
from meanfield.core.schedules import HeadSchedule, ScheduledSystem, integrate_schedule, random_layers
from meanfield.models.batched import BatchedSystem
from meanfield.models.step_rules import iterate


@pytest.mark.parametrize("score", SCORE_ENSEMBLES)
@pytest.mark.parametrize("value", VALUE_ENSEMBLES)
def test_random_heads_are_seeded_and_shaped(score, value):
    a = random_heads(4, 2, score=score, value=value, seed=7)
    b = random_heads(4, 2, score=score, value=value, seed=7)
    for x, y in zip(a, b):          # same seed, same draw: exactly equal (tolerance 0 is meaningful)
        np.testing.assert_array_equal(x.M, y.M)
        np.testing.assert_array_equal(x.V, y.V)
    if value in ("plus", "minus"):
        c = {"gaussian": 2.0, "wigner": 2.0, "goe": np.sqrt(5.0), "identity": 1.0}[score]
        sign = 1 if value == "plus" else -1
        # V = +-M^T / c_V: one division, exact to an ulp of entries O(1)
        np.testing.assert_allclose(a[0].V, sign * a[0].M.T / c, rtol=0, atol=1e-15)
    per = random_heads(4, 2, score=score, value=value, systems=3, seed=1)
    assert len(per) == 3 and all(len(h) == 2 for h in per)


def test_goe_and_wigner_variances():
    # 400 draws of d = 30: the sample variance of ~1.7e5 off-diagonal entries is within ~1% of its value;
    # 5% separates GOE (diagonal variance 2) from the peer's Wigner (diagonal variance 1) with a wide margin
    rng = np.random.default_rng(0)
    for score, diag in (("goe", 2.0), ("wigner", 1.0)):
        Ms = np.stack([h[0].M for h in random_heads(30, 1, score=score, systems=400, seed=rng)])
        off = Ms[:, ~np.eye(30, dtype=bool)]
        assert abs(off.var() - 1.0) < 0.05
        assert abs(np.diagonal(Ms, axis1=1, axis2=2).var() / diag - 1.0) < 0.05
        np.testing.assert_array_equal(Ms, np.swapaxes(Ms, 1, 2))     # symmetric by construction: exact


def test_schedule_refuses_overlapping_and_unsorted_times():
    h = scalar_heads([1.0], 3)
    with pytest.raises(ValueError, match=r"^schedule start times must be strictly increasing.*overlapping"):
        HeadSchedule([(0.0, h), (1.0, h), (1.0, h)])
    with pytest.raises(ValueError, match=r"^schedule start times must be strictly increasing.*unsorted"):
        HeadSchedule([(0.0, h), (2.0, h), (1.0, h)])
    with pytest.raises(ValueError, match=r"^schedule must be a non-empty sequence"):
        HeadSchedule([])
    with pytest.raises(ValueError, match=r"^schedule\[1\] heads must be"):
        HeadSchedule([(0.0, h), (1.0, "heads")])
    with pytest.raises(ValueError, match=r"^t must be >="):
        HeadSchedule([(0.0, h)]).heads_at(-1.0)


def test_particle_schedule_equals_sequential_runs(rng):
    h1, h2 = scalar_heads([1.0], 3, beta=2.0), scalar_heads([-0.5], 3, beta=1.0)
    sched = HeadSchedule([(0.0, h1), (0.5, h2)])
    X0 = rng.standard_normal((12, 3))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
    make = lambda heads: mf.ParticleSystem(heads, summation="direct")    # noqa: E731
    tr = integrate_schedule(sched, make, X0, (0.0, 1.0), step=StepControl(dt=0.05),
                            save=SaveAt(t_eval=[0.0, 0.5, 1.0]), method="rk4")
    p1, p2 = make(h1), make(h2)
    a = mf.integrate(p1.rhs, X0, (0.0, 0.5), method="rk4", step=StepControl(dt=0.05), retraction=p1.retraction)
    b = mf.integrate(p2.rhs, a.y_final, (0.5, 1.0), method="rk4", step=StepControl(dt=0.05), retraction=p2.retraction)
    # the same calls in the same order: bit for bit
    np.testing.assert_array_equal(tr.y_final, b.y_final)
    np.testing.assert_array_equal(tr.t, [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(tr.y[1], a.y_final)
    assert tr.n_steps == a.n_steps + b.n_steps


def test_zonal_schedule_drives_the_continuum_pde():
    h1, h2 = scalar_heads([1.0], 3, beta=1.0), scalar_heads([0.5], 3, beta=2.0)
    sched = HeadSchedule([(0.0, h1), (0.2, h2)])
    assert sched.zonal
    pdes = {}

    def make(heads):
        pdes[len(pdes)] = mf.ContinuumPDE(heads, lmax=16)
        return pdes[len(pdes) - 1]

    grid = mf.SphereGrid(16)
    rho = uniform_density(grid).copy()
    rho[(grid.l_index == 1) & (grid.m_index == 0)] += 0.05
    y0 = mf.ContinuumPDE(h1, lmax=16).state(rho)
    tr = integrate_schedule(sched, make, y0, (0.0, 0.4), method="rk4", step=StepControl(dt=0.02))
    a = mf.integrate(pdes[0].rhs, y0, (0.0, 0.2), method="rk4", step=StepControl(dt=0.02))
    b = mf.integrate(pdes[1].rhs, a.y_final, (0.2, 0.4), method="rk4", step=StepControl(dt=0.02))
    np.testing.assert_array_equal(tr.y_final, b.y_final)          # same calls, same order: bit for bit
    assert not np.array_equal(a.y_final, b.y_final)               # the second layer did move the density


def test_random_layers_redraw_and_step_rules_follow_the_schedule(rng):
    sched = random_layers(3, 3, 0.3, seed=4, score="goe", value="plus", beta=1.0)
    assert not np.array_equal(sched.entries[0][1][0].M, sched.entries[1][1][0].M)
    np.testing.assert_allclose(sched.starts, [0.0, 0.3, 0.6], rtol=0, atol=1e-15)   # k * 0.3 to an ulp
    X0 = rng.standard_normal((2, 6, 3))
    X0 /= np.linalg.norm(X0, axis=-1, keepdims=True)
    scheduled = ScheduledSystem(sched, BatchedSystem)
    tr = iterate(scheduled, X0, 0.1, 9, "post_ln", save_states=False)
    y = X0
    for k in range(9):                                   # layer k uses the heads in force at t = k dt
        y = iterate(BatchedSystem(sched.heads_at(k * 0.1)), y, 0.1, 1, "post_ln", save_states=False).y_final
    np.testing.assert_array_equal(tr.y_final, y)          # same operations in the same order: bit for bit


def test_piecewise_rhs_restarts_error_control_at_the_breakpoint(rng):
    """Adaptive steps across a schedule: one driver run over a Piecewise rhs gives the numbers (and the
    counters) of one run per segment, each from the state the previous one reached: the error control
    and the first derivative restart at the breakpoint."""
    from meanfield.core.integrate import Piecewise

    h1, h2 = scalar_heads([1.0], 3, beta=2.0), scalar_heads([-0.5], 3, beta=1.0)
    X0 = rng.standard_normal((8, 3))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
    p1, p2 = (mf.ParticleSystem(h, summation="direct") for h in (h1, h2))
    step = StepControl(rtol=1e-8, atol=1e-10)
    pw = Piecewise((0.0, 0.45), lambda k: ((p1, p2)[k].rhs, (p1, p2)[k].retraction))
    tr = mf.integrate(pw, X0, (0.0, 1.0), method="dopri5", step=step, save=SaveAt(t_eval=[0.0, 0.3, 1.0]),
                      progress=False)
    a = mf.integrate(p1.rhs, X0, (0.0, 0.45), method="dopri5", step=step, save=SaveAt(t_eval=[0.0, 0.3, 0.45]),
                     retraction=p1.retraction, progress=False)
    b = mf.integrate(p2.rhs, a.y_final, (0.45, 1.0), method="dopri5", step=step, retraction=p2.retraction,
                     progress=False)
    np.testing.assert_array_equal(tr.y_final, b.y_final)           # the same steps and arithmetic: bit for bit
    np.testing.assert_array_equal(tr.y[1], a.y[1])                 # t = 0.3, recorded; 0.45 is not a t_eval time
    np.testing.assert_array_equal(tr.t, [0.0, 0.3, 1.0])
    assert (tr.nfev, tr.n_steps, tr.n_rejected) == (a.nfev + b.nfev, a.n_steps + b.n_steps, a.n_rejected + b.n_rejected)
    with pytest.raises(ValueError, match="checkpoint must be None for a Piecewise rhs"):
        mf.integrate(pw, X0, (0.0, 1.0), method="dopri5", checkpointing=Checkpointing(save=print))
    with pytest.raises(ValueError, match="retraction must be None with a Piecewise rhs"):
        mf.integrate(pw, X0, (0.0, 1.0), method="dopri5", retraction=p1.retraction)
    with pytest.raises(ValueError, match="starts must be a non-empty strictly increasing"):
        Piecewise((0.5, 0.5), lambda k: (p1.rhs, None))
