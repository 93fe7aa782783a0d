"""The per-run guard of direct O(n^2) sums (ParticleSystem.check_direct_run, solve_particles'
direct_limit_s) and the evaluation count it rests on (core.integrate.estimate_nfev)."""

import numpy as np
import pytest

import meanfield as mf
from meanfield.core.integrate import estimate_nfev, integrate
from meanfield.core.options import SaveAt, StepControl
from meanfield.models import particles
from meanfield.models.particles import DIRECT_PAIR_RATE, DIRECT_RUN_LIMIT_S
from meanfield.workflow.paired import ParticleSettings, PDESettings


def direct_system(lams=(1.0, -0.5), **kw):
    return mf.ParticleSystem(mf.scalar_heads(list(lams), 3, beta=2.0), summation="direct", **kw)


def never(t, X):
    raise AssertionError("the observer ran: the run was not refused up front")


# ---------------------------------------------------------------------------- the evaluation count
@pytest.mark.parametrize("method, dt, t_eval", [("rk4", 0.1, [0.0, 0.25, 1.0]), ("euler", 0.05, None),
                                                ("heun", 0.3, np.linspace(0, 1, 11)), ("rk4", 1 / 3, [0, 1 / 3, 1])])
def test_fixed_step_count_is_exact(method, dt, t_eval):
    # fixed steps without FSAL: the count is the driver's, evaluation for evaluation (no tolerance)
    est = estimate_nfev(method, (0.0, 1.0), dt=dt, t_eval=t_eval)
    tr = integrate(lambda t, y: -y, np.ones(3), (0.0, 1.0), method=method, step=StepControl(dt=dt),
                   save=SaveAt(t_eval=t_eval))
    assert not est["lower_bound"]
    assert est["nfev"] == tr.nfev and est["steps"] == tr.n_steps


@pytest.mark.parametrize("method", ["dopri5", "bs32"])
def test_adaptive_count_is_a_lower_bound(method):
    t_eval = np.linspace(0, 2, 11)
    est = estimate_nfev(method, (0.0, 2.0), t_eval=t_eval)
    tr = integrate(lambda t, y: np.cos(3 * t) * y, np.ones(2), (0.0, 2.0), method=method,
                   step=StepControl(rtol=1e-8, atol=1e-10), save=SaveAt(t_eval=t_eval))
    assert est["lower_bound"] and est["steps"] == 10
    assert est["nfev"] <= tr.nfev


# ---------------------------------------------------------------------------- ParticleSystem.check_direct_run
def test_check_direct_run_estimate_and_refusal():
    system = direct_system()
    cost = system.check_direct_run(1000, 100, records=11, record_passes=3)
    # (100 + 33) passes x 2 heads x 1000^2 pairs at DIRECT_PAIR_RATE: exact arithmetic
    assert cost["passes"] == 133 and cost["pairs"] == 133 * 2 * 1000**2
    assert cost["seconds"] == pytest.approx(cost["pairs"] / DIRECT_PAIR_RATE, rel=1e-15)
    with pytest.raises(ValueError, match=r"direct_limit_s = 1 s.*summation='spectral'"):
        system.check_direct_run(1000, 100, records=11, record_passes=3, limit_s=1.0)
    with pytest.raises(ValueError, match="direct_limit_s must be"):
        system.check_direct_run(1000, 100, limit_s=-1.0)


def test_spectral_right_hand_sides_are_counted_at_their_own_rate():
    # issue 33: a spectral run was estimated by its step overhead alone; its O(n) sums count now
    spectral = mf.ParticleSystem(mf.scalar_heads([1.0, -0.5], 3, beta=2.0))      # auto: spectral from 2000 on
    cost = spectral.check_direct_run(10**4, 10**3, limit_s=float("inf"))
    assert cost["passes"] == 0                                                    # no direct O(n^2) pass
    # 10^3 evaluations x 10^4 tokens x SPECTRAL_SECONDS_PER_TOKEN: exact arithmetic (one product)
    assert cost["spectral_s"] == pytest.approx(1e7 * particles.SPECTRAL_SECONDS_PER_TOKEN, rel=1e-15)
    with pytest.raises(ValueError, match="spectral right-hand sides"):
        spectral.check_direct_run(10**6, 10**6, limit_s=1.0)
    with pytest.raises(ValueError, match="observer records"):                   # its direct records are
        spectral.check_direct_run(10**6, 10**6, records=11, record_passes=1, limit_s=1e-9)


def test_wide_heads_cost_more_per_pair():
    # a head-pair of width d > PAIR_WIDTH costs d / PAIR_WIDTH times the base rate (measured 37-41 ns at d = 384 on
    # one core; the estimate, 60 ns, stays above it); at d = 3 the rate is SECONDS_PER_PAIR exactly
    from meanfield.core import cost as cost_mod
    wide = mf.ParticleSystem(mf.scalar_heads([1.0], 384, beta=1.0))
    narrow = mf.ParticleSystem(mf.scalar_heads([1.0], 3, beta=1.0), summation="direct")
    assert wide.direct_cost(1000)["seconds"] == pytest.approx(1e6 * cost_mod.SECONDS_PER_PAIR * 384 / 64, rel=1e-15)
    assert narrow.direct_cost(1000)["seconds"] == pytest.approx(1e6 * cost_mod.SECONDS_PER_PAIR, rel=1e-15)
    r = np.random.default_rng(0)
    A, B, C, D = (r.standard_normal((384, 32)) for _ in range(4))
    factored = mf.ParticleSystem([mf.Head.from_factors(A, B, C, D, normalization="softmax")])
    assert factored.direct_cost(1000)["seconds"] == pytest.approx(1e6 * cost_mod.SECONDS_PER_PAIR, rel=1e-15)


def test_heads_without_spectral_path_say_so():
    heads = mf.scalar_heads([1.0], 4, beta=2.0)                                  # d = 4: no spectral sums
    with pytest.raises(ValueError, match="no spectral path"):
        mf.ParticleSystem(heads).check_direct_run(10**5, 1000, limit_s=1.0)


# ---------------------------------------------------------------------------- solve_particles
def test_solve_particles_refuses_a_long_direct_run_up_front():
    # n = 5e4, 2 direct heads, dopri5 to t = 1 with 11 records: at least 62 right-hand sides + 33
    # observer passes = 95 passes x 5e9 head-pairs, ~4750 s at 1e8 head-pairs/s > DIRECT_RUN_LIMIT_S
    X0 = mf.initial.uniform_sphere(50_000, 3, seed=1)
    with pytest.raises(ValueError, match=r"at least 95 direct O\(n\^2\) passes.*direct_limit_s = 3600 s"):
        mf.solve_particles(direct_system(), X0, 1.0)
    with pytest.raises(ValueError, match="at least 62 direct"):                  # a custom hook: rhs only
        mf.solve_particles(direct_system(), X0, 1.0, save=SaveAt(observe=never), direct_limit_s=1000.0)


def test_default_observer_is_spectral_with_any_weights(monkeypatch):
    """The default solve_particles beyond SPECTRAL_MIN_N records with O(n) sums only, whatever the weights:
    every direct pairwise sum raises here, and a direct_limit_s of 0.05 s refuses any counted direct pass (one pass:
    2 heads x 2500^2 pairs = 0.125 s) while it admits the run's spectral sums (counted since issue 33: about 8
    evaluations x 2500 tokens x SPECTRAL_SECONDS_PER_TOKEN = 0.01 s, plus one step's overhead)."""
    from meanfield.analysis import diagnostics
    from meanfield.models import particles
    from meanfield.models.particles import SPECTRAL_MIN_N

    def direct(*a, **k):
        raise AssertionError("a direct O(n^2) sum was called")

    for module, name in ((diagnostics, "entropy_rows"), (diagnostics, "attention_entropy"),
                         (particles, "DirectSums"), (particles, "pair_sum")):
        monkeypatch.setattr(module, name, direct)
    system = mf.ParticleSystem(mf.scalar_heads([1.0, 0.5], 3, beta=2.0))     # the README's heads
    n = SPECTRAL_MIN_N + 500
    X0 = mf.initial.uniform_sphere(n, 3, seed=6)
    ramp = np.linspace(0.5, 1.5, n)
    for w in (None, np.full(n, 1.0 / n), ramp / ramp.sum()):
        assert diagnostics.observer_passes(system, n, w) == 0
        tr = mf.solve_particles(system, X0, 0.02, save=SaveAt(t_eval=[0.0, 0.02]), w=w, direct_limit_s=0.05,
                                progress=False)
        assert tr.status == 0 and tr.observables["entropy"].shape == tr.observables["relative_entropy"].shape == (2, 2)
    direct_system = mf.ParticleSystem(system.heads, summation="direct")
    assert diagnostics.observer_passes(direct_system, n) == 3                    # energies, dissipation, entropy
    assert diagnostics.observer_passes(direct_system, n, ramp / ramp.sum()) == 4  # + Shannon, non-uniform w


def test_fixed_step_and_noisy_runs_are_counted():
    X0 = mf.initial.uniform_sphere(3000, 3, seed=2)
    # rk4, dt = 1e-3 to t = 1: 1000 steps x 4 stages = 4000 right-hand sides, 2 heads x 9e6 pairs each:
    # 7.2e10 head-pairs, 720 s: below the default limit, above 600 s
    with pytest.raises(ValueError, match=r"4000 direct O\(n\^2\) passes.*4000 right-hand sides \(1000 steps of rk4\)"):
        mf.solve_particles(direct_system(), X0, 1.0, method="rk4", step=StepControl(dt=1e-3),
                           save=SaveAt(observe=never), direct_limit_s=600.0)
    noisy = direct_system(nu=0.1)
    with pytest.raises(ValueError, match=r"2000 right-hand sides \(1000 steps of geodesic_strang\)"):
        mf.solve_particles(noisy, X0, 1.0, step=StepControl(dt=1e-3), save=SaveAt(observe=never), seed=1,
                           direct_limit_s=60.0)


def test_runs_below_the_limit_are_unchanged():
    system = direct_system()
    X0 = mf.initial.uniform_sphere(40, 3, seed=3)
    a = mf.solve_particles(system, X0, 0.3)
    b = mf.solve_particles(system, X0, 0.3, direct_limit_s=np.inf)
    np.testing.assert_array_equal(a.y, b.y)                 # the guard only refuses; it changes no number
    np.testing.assert_array_equal(a.observables["energy"], b.observables["energy"])
    assert DIRECT_RUN_LIMIT_S == 3600.0
    with pytest.raises(ValueError, match="direct_limit_s must be"):
        mf.solve_particles(system, X0, 0.3, direct_limit_s=0.0)


def test_noisy_step_count_matches_the_driver():
    # geodesic_strang: 2 drift evaluations per fixed step, steps on the grid and the output times
    system = direct_system(nu=0.1)
    X0 = mf.initial.uniform_sphere(20, 3, seed=5)
    t_eval = [0.0, 0.05, 0.3]
    tr = mf.solve_particles(system, X0, 0.3, step=StepControl(dt=0.02), save=SaveAt(t_eval=t_eval, observe=False),
                            seed=3)
    steps = estimate_nfev("euler", (0.0, 0.3), dt=0.02, t_eval=t_eval)["steps"]
    assert tr.nfev == 2 * steps and tr.n_steps == steps


def test_paired_run_refuses_a_too_long_direct_particle_run_before_its_pde(monkeypatch):
    """The guard fires before the PDE phase: the PDE is never solved."""
    import meanfield as mf
    from meanfield.core import densities
    from meanfield.workflow import paired

    called = []
    monkeypatch.setattr(paired, "solve", lambda *a, **k: called.append(1))
    heads = mf.scalar_heads([1.0], 3, beta=1.0)
    with pytest.raises(ValueError, match=r"direct O\(n\^2\) passes.*direct_limit_s"):
        # direct sums, 4000 tokens, fixed rk4 steps of 1e-5 to t = 1: 4e5 evaluations x 1.6e7 pairs >> 1 h
        paired.paired_run(heads, lambda g: densities.uniform_density(g), 4000, 1.0,
                          particles=ParticleSettings(sums="direct", method="rk4", step=StepControl(dt=1e-5)),
                          pde=PDESettings(lmax=7))
    assert called == []
