"""Token noise: stochastic particles on S^{d-1} (meanfield.core.sde, ParticleSystem(nu=...)).

Closed forms (MODEL.md section 3): without interaction the law is the spherical heat kernel, so
E <x(t), x(0)> = exp(-nu (d - 1) t) and the uniform measure is invariant; flat Brownian motion
has E |x(t) - x(0)|^2 = 2 nu d t.  Orders are slopes of log error against log dt.
"""

import warnings

import numpy as np
import pytest
from _helpers import sde_ends_on_one_path

import meanfield as mf
from meanfield.core.integrate import integrate
from meanfield.core.methods import METHODS, method_names
from meanfield.core.options import Checkpointing, SaveAt, StepControl
from meanfield.core.sde import Noise, NoiseStepWarning, brownian_increments, geodesic_noise


def _tokens(rng, n, d):
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _free(d, nu):
    """Particles without interaction (lambda = 0: zero velocity), only the noise."""
    return mf.ParticleSystem(mf.scalar_heads([0.0], d), nu=nu, summation="direct")


def _zero(t, X):
    return np.zeros_like(X)


def _slope(dts, errs):
    return np.polyfit(np.log(dts), np.log(errs), 1)[0]


@pytest.mark.parametrize("d", [3, 8])
@pytest.mark.parametrize("method", method_names(stochastic=True))
def test_heat_kernel_mean(d, method):
    """E <x(t), x(0)> = exp(-nu (d - 1) t), measured over n independent tokens with its standard error."""
    nu, T, n = 0.1, 1.0, 20000
    dt = 0.01 if method == "geodesic_strang" else 0.0025
    X0 = _tokens(np.random.default_rng(1), n, d)
    # without interaction the drift is 0: integrate the noise alone (pairwise sums of 20000 tokens would be idle work)
    traj = integrate(_zero, X0, (0.0, T), method=method, step=StepControl(dt=dt), noise=Noise(nu, 7), progress=False)
    c = np.einsum("nd,nd->n", traj.y_final, X0)
    mean, se = c.mean(), c.std(ddof=1) / np.sqrt(n)
    exact = np.exp(-nu * (d - 1) * T)
    # bias: weak order 2 (geodesic_strang, ~1e-6 here) or 1 (Euler-Maruyama, about nu^2 (d-1)^2 dt T / 2
    # <= 6e-4 for d = 8); 4 standard errors make a false alarm a 6e-5 event
    bias = 1e-5 if method == "geodesic_strang" else 0.5 * (nu * (d - 1)) ** 2 * dt * T
    assert abs(mean - exact) < 4 * se + bias, (mean, exact, se)


def test_uniform_measure_is_invariant():
    """Uniform tokens stay uniform: E x = 0 and E x x^T = I / d at t = 1 (within 5 standard errors)."""
    d, n = 3, 20000
    X0 = _tokens(np.random.default_rng(2), n, d)
    traj = integrate(_zero, X0, (0.0, 1.0), method="geodesic_strang", step=StepControl(dt=0.05), noise=Noise(0.3, 3),
                     progress=False)
    X = traj.y_final
    se = 1.0 / np.sqrt(d * n)               # sd of one coordinate of a uniform point is 1/sqrt(d)
    assert np.abs(X.mean(axis=0)).max() < 5 * se
    second = X.T @ X / n
    # sd of x_i x_j (i != j) is 1/sqrt(d (d + 2)) < 1/sqrt(d), of x_i^2 less than 1/sqrt(d): 5 se bounds both
    assert np.abs(second - np.eye(d) / d).max() < 5 * se


def test_flat_geometry_is_brownian_motion():
    """Flat tokens without drift: E |x(t) - x(0)|^2 = 2 nu d t (both schemes exact in law here)."""
    d, n, nu, T = 4, 20000, 0.2, 1.0
    X0 = np.random.default_rng(4).standard_normal((n, d))
    for method in method_names(stochastic=True):
        traj = integrate(_zero, X0, (0.0, T), method=method, step=StepControl(dt=0.1), noise=Noise(nu, 5, "flat"),
                         progress=False)
        r2 = np.sum((traj.y_final - X0) ** 2, axis=1)
        # r2 / (2 nu T) is chi^2_d: sd sqrt(2 d) (2 nu T); 4 standard errors
        assert abs(r2.mean() - 2 * nu * d * T) < 4 * np.sqrt(2 * d) * 2 * nu * T / np.sqrt(n)


def test_weak_order_euler_maruyama():
    """Global weak error of E <x(T), x(0)> for projected Euler-Maruyama falls like dt (order 1)."""
    d, nu, T, n = 3, 0.5, 1.0, 100000
    X0 = _tokens(np.random.default_rng(5), n, d)
    dts, errs = [1 / 8, 1 / 16, 1 / 32], []
    for dt in dts:
        traj = integrate(lambda t, X: np.zeros_like(X), X0, (0.0, T), method="euler_maruyama",
                         step=StepControl(dt=dt), noise=Noise(nu, 11), progress=False)
        c = np.einsum("nd,nd->n", traj.y_final, X0)
        errs.append(abs(c.mean() - np.exp(-nu * (d - 1) * T)))
        # the bias (0.01-0.05 here) must dominate the standard error (~1.5e-3) for the slope to mean anything
        assert errs[-1] > 5 * c.std() / np.sqrt(n)
    # declared weak order 1; pre-asymptotic slopes measured 0.8-0.9 at these steps
    assert abs(_slope(dts, errs) - METHODS["euler_maruyama"].weak_order) < 0.3, errs


@pytest.mark.parametrize("d", [3, 8])
def test_weak_order_geodesic_noise_step(d):
    """Local weak error of the geodesic noise step, E cos(theta) - exp(-nu (d-1) h), is O(h^3) (weak order 2);
    with c = 1 (the plain geodesic random walk) it is O(h^2) (weak order 1).

    Measured with the control variate 1 - theta^2 / 2 + theta^4 / 24, whose mean is known exactly, so the
    standard error is O(h^3 / sqrt(N)) with a small constant against an O(h^3) signal.
    """
    nu, N = 1.0, 400000
    rng = np.random.default_rng(6)
    X = _tokens(rng, N, d)
    local = {}
    for corrected in (True, False):
        # steps where each error is resolved and asymptotic (the plain walk's h^3 term is large at h ~ 0.1)
        hs = np.array([0.2, 0.1, 0.05]) if corrected else np.array([0.05, 0.025, 0.0125])
        errs = []
        for h in hs:
            dW = np.sqrt(h) * rng.standard_normal((N, d))
            Y = geodesic_noise(X, dW, nu, h) if corrected else None
            P = dW - np.einsum("nd,nd->n", dW, X)[:, None] * X
            c = 1 - nu * (d - 2) * h / 3 if corrected else 1.0
            theta2 = 2 * nu * c * np.sum(P**2, axis=1)
            cos = np.einsum("nd,nd->n", Y, X) if corrected else np.cos(np.sqrt(theta2))
            if corrected:   # the scheme's own output is cos(theta) (to round-off)
                assert np.abs(cos - np.cos(np.sqrt(theta2))).max() < 1e-12
            z = cos - (1 - theta2 / 2 + theta2**2 / 24)
            # exact means: E theta^2 = 2 nu c h (d - 1), E theta^4 = 4 nu^2 c^2 h^2 (d^2 - 1)
            est = z.mean() + 1 - nu * c * h * (d - 1) + 4 * (nu * c * h) ** 2 * (d * d - 1) / 24
            se = z.std() / np.sqrt(N)
            err = est - np.exp(-nu * (d - 1) * h)
            assert abs(err) > 3 * se      # resolved (3 standard errors): the slope measures the scheme, not sampling
            errs.append(abs(err))
        local[corrected] = _slope(hs, errs)
    # local orders 3 and 2 (weak orders 2 and 1); measured 2.9-3.0 and 2.0 here
    assert abs(local[True] - 3) < 0.35, local
    assert abs(local[False] - 2) < 0.35, local


@pytest.mark.parametrize("method", method_names(stochastic=True))
def test_strong_order_with_interaction(method):
    """Strong error against a fine solution driven by the same Brownian path falls like dt^(1/2)."""
    d, n, nu, T, paths = 3, 12, 0.2, 0.5, 30
    system = mf.ParticleSystem(mf.scalar_heads([1.0], d, beta=2.0), nu=nu, summation="direct")
    X0 = _tokens(np.random.default_rng(8), n, d)
    levels, fine = [2, 3, 4, 5], 8            # dt = T / 2^level, reference T / 2^8
    sq = np.zeros(len(levels))
    rng = np.random.default_rng(9)
    for _ in range(paths):
        dW = np.sqrt(T / 2 ** (fine + 1)) * rng.standard_normal((2 ** (fine + 1), n, d))   # half-step increments
        ends = sde_ends_on_one_path(method, system.rhs, X0, T, dW, levels, fine, nu)
        for i, L in enumerate(levels):
            sq[i] += np.mean(np.sum((ends[L] - ends[fine]) ** 2, axis=1)) / paths
    rms = np.sqrt(sq)
    dts = T / 2.0 ** np.array(levels)
    # declared strong order 1/2 (non-commuting noise fields P_x e_k: no Levy areas); measured 0.5-0.6,
    # and a 30-path RMS has ~15% relative error per level
    assert abs(_slope(dts, rms) - METHODS[method].strong_order) < 0.2, rms


# y_final[:2] (hex), nfev and n_steps of short noisy runs recorded on main before the SDE schemes became
# steppers of the one driver (then a separate loop, core.sde.integrate_sde), same seed and arguments
_MAIN = {
    'euler_maruyama/sphere': [['0x1.a770212eb021ep-1', '-0x1.86cccaca41706p-2', '0x1.a6ac44f0ca34ap-2',
                               '0x1.33c29866ebabcp-2', '-0x1.62883c1960a5cp-1', '0x1.4fd0b2bce9c9fp-1'], 11, 11],
    'euler_maruyama/flat': [['0x1.4f11b6b5f1d90p+0', '-0x1.def06fdfdb784p-4', '0x1.6889b4828cd8dp-1',
                             '0x1.0e57ff5a535dcp-1', '-0x1.118f2f4e4d1e4p-3', '0x1.7e7feea548617p-1'], 11, 11],
    'geodesic_strang/sphere': [['0x1.9ef98bf67c529p-1', '-0x1.66667436303f3p-2', '0x1.e0f227c387ae3p-2',
                                '0x1.45174a498d7f2p-2', '-0x1.4c8e001f06aaap-1', '0x1.61bcd844ccb36p-1'], 22, 11],
    'geodesic_strang/flat': [['0x1.53cefc8d68058p+0', '-0x1.85fa9bcd36fd2p-4', '0x1.7bfbc1bdaff0fp-1',
                              '0x1.156769c76a6f6p-1', '-0x1.5baea60413dcfp-4', '0x1.820e4e2724d88p-1'], 22, 11],
}


@pytest.mark.parametrize("key", sorted(_MAIN))
def test_the_one_driver_gives_the_numbers_of_the_former_sde_loop(key):
    """Same seed, same Brownian increments, same arithmetic: bit for bit what the separate SDE loop gave
    (elementwise drifts only, so no BLAS summation order enters the recorded bits)."""
    method, geometry = key.split("/")
    X0 = np.random.default_rng(3).standard_normal((4, 3))
    X0 /= np.linalg.norm(X0, axis=1, keepdims=True)
    a = np.array([0.3, -0.2, 0.5])

    def drift(t, X):
        if geometry == "flat":
            return -0.5 * X + np.sin(t)
        v = np.cos(t) * a
        return v - (X @ v)[:, None] * X

    tr = integrate(drift, X0, (0.0, 1.0), method=method, step=StepControl(dt=0.1),
                   save=SaveAt(t_eval=[0.0, 0.37, 1.0]), noise=Noise(0.2, 11, geometry), progress=False)
    ref, nfev, steps = _MAIN[key]
    assert [float(v).hex() for v in tr.y_final[:2].ravel()] == ref             # exact: bit for bit
    assert (tr.nfev, tr.n_steps, tr.method) == (nfev, steps, method)


def test_noise_is_required_by_stochastic_methods_and_refused_by_the_others():
    X0 = _tokens(np.random.default_rng(1), 5, 3)
    with pytest.raises(ValueError, match=r"noise must be a Noise\(nu, seed, geometry\) for the stochastic method"):
        integrate(_zero, X0, (0.0, 1.0), method="euler_maruyama", step=StepControl(dt=0.1))
    with pytest.raises(ValueError, match=r"noise must be None for the deterministic method 'rk4'.*euler_maruyama"):
        integrate(_zero, X0, (0.0, 1.0), method="rk4", step=StepControl(dt=0.1), noise=Noise(0.1, 1))
    with pytest.raises(ValueError, match="retraction must be None for the stochastic method"):
        integrate(_zero, X0, (0.0, 1.0), method="euler_maruyama", step=StepControl(dt=0.1), noise=Noise(0.1, 1),
                  retraction=np.copy)
    with pytest.raises(ValueError, match="geometry must be one of"):
        Noise(0.1, 1, "torus")
    with pytest.raises(ValueError, match="seed must be None, an integer"):
        Noise(0.1, 1.5)


def test_seed_reproducible_and_resume_bit_for_bit():
    """The same seed gives the same run bit for bit; a run resumed from a checkpoint equals an uninterrupted one."""
    d = 3
    system = mf.ParticleSystem(mf.scalar_heads([1.0], d, beta=2.0), nu=0.3, summation="direct")
    X0 = _tokens(np.random.default_rng(10), 40, d)
    t_eval = np.linspace(0, 1.0, 5)
    states = []
    a = mf.solve_particles(system, X0, 1.0, step=StepControl(dt=0.05), save=SaveAt(t_eval=t_eval),
                           checkpointing=Checkpointing(save=states.append, every=0.3), seed=12)
    b = mf.solve_particles(system, X0, 1.0, step=StepControl(dt=0.05), save=SaveAt(t_eval=t_eval), seed=12)
    c = mf.solve_particles(system, X0, 1.0, step=StepControl(dt=0.05), save=SaveAt(t_eval=t_eval), seed=13)
    assert np.array_equal(a.y, b.y) and np.array_equal(a.y_final, b.y_final)      # bit for bit
    assert np.abs(a.y_final - c.y_final).max() > 1e-3                           # another seed, another path
    assert len(states) >= 2
    r = mf.solve_particles(system, X0, 1.0, step=StepControl(dt=0.05), save=SaveAt(t_eval=t_eval),
                           checkpointing=Checkpointing(resume=states[1]), seed=999)
    assert np.array_equal(r.y, a.y) and np.array_equal(r.y_final, a.y_final)      # bit for bit
    for key in a.observables:
        assert np.array_equal(r.observables[key], a.observables[key])


@pytest.mark.parametrize("bad", [-0.1, np.nan, np.inf, True, "0.1"])
def test_bad_nu_is_named(bad):
    with pytest.raises(ValueError, match="nu"):
        mf.ParticleSystem(mf.scalar_heads([1.0], 3), nu=bad)


def test_step_range_refused_or_warned():
    X0 = _tokens(np.random.default_rng(11), 10, 8)     # ParticleSystem path: few tokens
    system = _free(8, 1.0)
    with pytest.raises(ValueError, match="dt must be < 6 / \\(nu \\(d - 2\\)\\) = 1"):
        mf.solve_particles(system, X0, 2.0, step=StepControl(dt=1.5), save=SaveAt(observe=False))
    with pytest.warns(NoiseStepWarning, match="0.5 / \\(nu \\(d - 1\\)\\)"):
        mf.solve_particles(system, X0, 1.0, step=StepControl(dt=0.5), save=SaveAt(observe=False),
                           method="euler_maruyama")
    with pytest.raises(ValueError, match="dt must be a positive number"):
        mf.solve_particles(system, X0, 1.0, save=SaveAt(observe=False))
    with pytest.raises(ValueError, match="method must be one of"):
        mf.solve_particles(system, X0, 1.0, step=StepControl(dt=0.1), save=SaveAt(observe=False), method="dopri5")


def test_noiseless_default_unchanged():
    """nu = 0 keeps the deterministic dopri5 path (method None means dopri5)."""
    system = mf.ParticleSystem(mf.scalar_heads([1.0], 3), summation="direct")
    X0 = _tokens(np.random.default_rng(12), 20, 3)
    a = mf.solve_particles(system, X0, 0.5, save=SaveAt(observe=False))
    b = mf.solve_particles(system, X0, 0.5, method="dopri5", save=SaveAt(observe=False))
    assert a.method == "dopri5" and np.array_equal(a.y_final, b.y_final)        # the same code path
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        brownian_increments(np.random.default_rng(0), (2, 3), 0.1)


def test_a_generator_passed_as_seed_is_advanced_and_resume_checks_settings():
    # numpy's convention: a Generator handed in is consumed, so two calls give two Brownian paths
    d = 3
    system = mf.ParticleSystem(mf.scalar_heads([0.0], d), nu=0.3, summation="direct")
    X0 = _tokens(np.random.default_rng(10), 20, d)
    g = np.random.default_rng(5)
    a = mf.solve_particles(system, X0, 0.5, step=StepControl(dt=0.05), save=SaveAt(observe=False), seed=g)
    b = mf.solve_particles(system, X0, 0.5, step=StepControl(dt=0.05), save=SaveAt(observe=False), seed=g)
    assert np.abs(a.y_final - b.y_final).max() > 1e-3
    fresh = mf.solve_particles(system, X0, 0.5, step=StepControl(dt=0.05), save=SaveAt(observe=False),
                               seed=np.random.default_rng(5))
    assert np.array_equal(fresh.y_final, a.y_final)                     # the first call: the seed's own stream
    # a checkpoint continues only a run with the same dt and nu
    states = []
    mf.solve_particles(system, X0, 1.0, step=StepControl(dt=0.05), save=SaveAt(observe=False),
                       checkpointing=Checkpointing(save=states.append, every=0.3), seed=1)
    with pytest.raises(ValueError, match="settings"):
        mf.solve_particles(system, X0, 1.0, step=StepControl(dt=0.1), save=SaveAt(observe=False),
                           checkpointing=Checkpointing(resume=states[0]), seed=1)
    other = mf.ParticleSystem(mf.scalar_heads([0.0], d), nu=0.2, summation="direct")
    with pytest.raises(ValueError, match="settings"):
        mf.solve_particles(other, X0, 1.0, step=StepControl(dt=0.05), save=SaveAt(observe=False),
                           checkpointing=Checkpointing(resume=states[0]), seed=1)
