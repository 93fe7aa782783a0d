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
