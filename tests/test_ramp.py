"""The piecewise-constant noise ramp driver (meanfield.workflow.ramp)."""

import numpy as np
import pytest

import meanfield as mf
from meanfield.workflow import ramp


def _pole(n, seed=0):
    X = mf.initial.uniform_sphere(n, 3, seed=seed) + np.array([0.0, 0.0, 40.0])
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_free_tokens_decorrelate_at_the_heat_kernel_rate_stage_by_stage():
    # lambda = 0: no interaction, E <x(t), x(0)> = exp(-2 nu t) on S^2 (MODEL.md section 3), so the mean of
    # tokens starting at (nearly) the pole decays by exp(-2 nu_k T) in stage k, whatever nu was before
    heads = mf.scalar_heads([0.0], 3, beta=1.0)
    X0 = _pole(2000)
    m0 = ramp.order_parameter(X0)
    res = ramp.noise_ramp(heads, X0, [0.4, 0.1], 0.5, dt=0.01, seed=3, samples=3, summation="direct")
    expected = m0 * np.exp(-2 * np.array([0.4 * 0.5, 0.4 * 0.5 + 0.1 * 0.5]))
    # n = 2000 tokens: the mean's sampling error is about 1 / sqrt(3 n) = 0.013 per axis; weak order 2 in
    # dt = 0.01 adds ~1e-4; 0.04 is three standard errors
    assert np.allclose(res.stage_end, expected, atol=0.04), (res.stage_end, expected)
    assert res.times.shape == (2, 3) and res.times[1, 0] == pytest.approx(0.5, abs=1e-12)
    # the last record is the returned state's order parameter (the same array: exact)
    assert res.order[-1, -1] == ramp.order_parameter(res.X)
    assert not res.stopped


def test_ramp_is_reproducible_and_stages_draw_their_own_increments():
    heads = mf.scalar_heads([1.0], 3, beta=2.0)
    X0 = mf.initial.uniform_sphere(300, 3, seed=1)
    a = ramp.noise_ramp(heads, X0, [0.5, 0.5], 0.2, dt=0.05, seed=7, summation="direct")
    b = ramp.noise_ramp(heads, X0, [0.5, 0.5], 0.2, dt=0.05, seed=7, summation="direct")
    c = ramp.noise_ramp(heads, X0, [0.5, 0.5], 0.2, dt=0.05, seed=8, summation="direct")
    assert np.array_equal(a.X, b.X) and np.array_equal(a.order, b.order)     # bit for bit
    assert not np.array_equal(a.X, c.X)
    assert ramp.stage_seed(7, 0) != ramp.stage_seed(7, 1) != ramp.stage_seed(8, 0)


def test_stop_above_ends_the_ramp_after_the_crossing_stage():
    heads = mf.scalar_heads([0.0], 3, beta=1.0)
    X0 = _pole(500)
    # free tokens from the pole: r starts near 1 and decays, so r > 0.5 in the first stage already
    res = ramp.noise_ramp(heads, X0, [0.2, 0.2, 0.2], 0.1, dt=0.05, seed=0, summation="direct", stop_above=0.5)
    assert res.nus.size == 1 and res.stopped and res.order.shape == (1, 5)


def test_first_crossing_interpolates_and_censors():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    v = np.array([0.0, 0.2, 0.6, 0.9])
    assert ramp.first_crossing(t, v, 0.4) == pytest.approx(1.5, abs=1e-14)      # linear between 1 and 2
    assert ramp.first_crossing(t, v, 0.95) == np.inf
    assert ramp.first_crossing(t, v, -1.0) == 0.0


@pytest.mark.parametrize("kw, match", [(dict(nus=[0.5, -1.0]), "nus"), (dict(nus=[]), "nus"),
                                        (dict(stage_time=0.0), "stage_time"), (dict(samples=1), "samples"),
                                        (dict(dt=-0.1), "dt")])
def test_bad_input_is_refused_by_name(kw, match):
    args = dict(nus=[0.5], stage_time=0.1, dt=0.05, seed=0, samples=3)
    args.update(kw)
    heads = mf.scalar_heads([1.0], 3, beta=1.0)
    with pytest.raises(ValueError, match=match):
        ramp.noise_ramp(heads, _pole(10), args.pop("nus"), args.pop("stage_time"), summation="direct", **args)


# ------------------------------------------------------------------------------------------- cost and input checks
def _never_run(*args, **kw):
    raise AssertionError("a refused ramp must not start a stage")


def test_huge_samples_are_refused_by_the_cost_guard_before_any_stage(monkeypatch):
    # 10^9 samples of 10 tokens in d = 3: the records alone are 2 x 10^9 x 30 floats = 447 GiB, above 4 GiB;
    # refused from the sizes, before the output times (8 GB themselves) are allocated or a stage starts
    monkeypatch.setattr(ramp, "solve", _never_run)
    heads = mf.scalar_heads([1.0], 3, beta=1.0)
    with pytest.raises(ValueError, match=r"noise_ramp\(samples=1000000000.*of memory.*MEMORY_LIMIT_BYTES.*fewer samples"):
        ramp.noise_ramp(heads, _pole(10), [0.5], 0.1, dt=0.05, seed=0, samples=10**9, summation="direct")


def test_the_time_estimate_counts_every_stage(monkeypatch):
    # samples = 2001 over stage_time 0.1 with dt = 0.05: 2000 steps per stage (estimate_nfev), each counted
    # STEP_OVERHEAD_S (the 10 tokens' direct sums add 4e-3 s): one stage ~0.5 s passes a limit of two stages' steps,
    # three stages are refused by name, before the first one runs
    from meanfield.core import cost

    heads = mf.scalar_heads([1.0], 3, beta=1.0)
    limit = 2 * 2000 * cost.STEP_OVERHEAD_S
    args = dict(dt=0.05, seed=0, samples=2001, summation="direct")
    with cost.limits(seconds=limit):
        res = ramp.noise_ramp(heads, _pole(10), [0.5], 0.1, **args)
        assert res.order.shape == (1, 2001)
        monkeypatch.setattr(ramp, "solve", _never_run)
        with pytest.raises(ValueError, match=r"noise_ramp\(samples=2001, len\(nus\) = 3 stage\(s\).*2000 steps.*would "
                                             r"take an estimated.*TIME_LIMIT_S.*fewer samples, a larger dt, a shorter "
                                             r"stage_time or fewer stages in nus"):
            ramp.noise_ramp(heads, _pole(10), [0.5, 0.5, 0.5], 0.1, **args)


def test_stage_seed_refuses_non_integers_and_accepts_numpy_integers():
    assert ramp.stage_seed(np.int64(7), np.int32(1)) == ramp.stage_seed(7, 1)
    for seed, stage, name in ((7.5, 0, "seed"), (7.0, 0, "seed"), (True, 0, "seed"), (-1, 0, "seed"),
                              ("7", 0, "seed"), (7, 1.0, "stage"), (7, -1, "stage"), (7, None, "stage")):
        with pytest.raises(ValueError, match=rf"^{name} must be an integer >= 0; received"):
            ramp.stage_seed(seed, stage)


def test_order_parameter_takes_unit_tokens_only():
    X = _pole(50)
    assert ramp.order_parameter(X * (1 + 4e-9)) == pytest.approx(ramp.order_parameter(X), rel=1e-8)   # |x|^2 - 1 < 1e-8
    with pytest.raises(ValueError, match=r"X must be unit vectors .*received max deviation 3"):      # |2x|^2 - 1 = 3
        ramp.order_parameter(2 * X)
    with pytest.raises(ValueError, match=r"X must have shape \(n, d\), n >= 1; received shape \(0, 3\)"):
        ramp.order_parameter(np.zeros((0, 3)))
    for bad in (X[0], np.where(np.arange(3) == 1, np.nan, X), "X", X.astype(complex)):
        with pytest.raises(ValueError, match=r"^X must"):
            ramp.order_parameter(bad)


def test_first_crossing_refuses_bad_samples_and_levels_by_name():
    t = np.array([0.0, 1.0, 1.0, 2.0])                   # a tie: stage boundaries are recorded twice
    v = np.array([0.0, 0.2, 0.5, 0.9])
    assert ramp.first_crossing(t, v, 0.4) == 1.0
    for kw, match in ((dict(level=np.nan), "^level must be a finite number"), (dict(level=None), "^level"),
                      (dict(times=[0.0, 2.0, 1.0, 3.0]), r"^times must be non-decreasing.*times\[1\] = 2.0"),
                      (dict(times=[0.0, np.nan, 2.0, 3.0]), "^times must be finite"),
                      (dict(values=[0.0, np.inf, 0.5, 0.9]), "^values must be finite"),
                      (dict(values=[0.0, 0.5]), r"same shape; received \(4,\) and \(2,\)"),
                      (dict(values=v[:, None]), r"same shape; received \(4,\) and \(4, 1\)"),
                      (dict(times=[], values=[]), "^times must hold at least one sample")):
        args = dict(times=t, values=v, level=0.4)
        args.update(kw)
        with pytest.raises(ValueError, match=match):
            ramp.first_crossing(**args)


def test_first_crossing_reads_a_ramp_result():
    heads = mf.scalar_heads([0.0], 3, beta=1.0)
    res = ramp.noise_ramp(heads, _pole(200), [0.5, 0.5], 0.2, dt=0.05, seed=1, samples=3, summation="direct")
    # r decays from ~1: it is above 0.5 at once, never above 1.5
    assert ramp.first_crossing(res.times, res.order, 0.5) == 0.0
    assert ramp.first_crossing(res.times, res.order, 1.5) == np.inf
