"""The equiangular reduced ODEs of the normalization rules (meanfield/analysis/normalization.py)."""

import numpy as np
import pytest

import meanfield as mf
from meanfield.analysis import normalization as nz
from meanfield.models.batched import BatchedSystem
from meanfield.models.step_rules import RADIAL_RULES, limit_rhs

RULES = ("post_ln", "projected_euler", "ngpt", "pre_ln", "peri_ln")


def _particle_rates(rule, n, rho, r, lambdas, beta, normalization):
    """(rho', r') of an equiangular configuration measured on the library's batched sums."""
    X = mf.initial.equiangular(n, n, rho, seed=3)
    system = BatchedSystem(mf.scalar_heads(lambdas, n, beta, normalization=normalization))
    y = (r * X if rule in RADIAL_RULES else X)[None]
    v = limit_rhs(system, rule)(0.0, y)[0]
    if rule in RADIAL_RULES:                            # z' = v: x' = P_x v / r, r' = <x, v>
        dx = (v - np.sum(v * X, axis=1, keepdims=True) * X) / r
        dr = np.sum(v * X, axis=1)
    else:
        dx, dr = v, np.zeros(n)
    G = dx @ X.T
    drho = (G + G.T)[~np.eye(n, dtype=bool)]
    return drho, dr


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("normalization", ["softmax", "mean"])
def test_reduced_rates_match_particles(rule, normalization):
    lambdas, beta, n, rho, r = [1.0, 0.5], 1.3, 6, 0.2, 2.5
    drho, dr = _particle_rates(rule, n, rho, r, lambdas, beta, normalization)
    a, b = nz.equiangular_rule_rates(rho, r, rule, lambdas, beta, n, normalization)
    # the same numbers summed two ways (pairwise sums against the closed form): round-off, ~1e-15
    assert np.allclose(drho, a, rtol=1e-11, atol=1e-13)
    assert np.allclose(dr, b, rtol=1e-11, atol=1e-13)


def test_post_ln_is_the_projected_flow_of_theory():
    g = np.linspace(-0.14, 0.99, 23)
    a, _ = nz.equiangular_rule_rates(g, 1.0, "post_ln", [1.0, 2.0], 0.7, 8)
    # an independent closed form of meanfield.analysis.theory: round-off only
    assert np.allclose(a, mf.theory.equiangular_rate(g, [1.0, 2.0], 0.7, 8), rtol=1e-12, atol=1e-15)


def test_solution_matches_theory_and_keeps_small_gaps():
    t = np.linspace(0.5, 20.0, 40)
    q, r = nz.solve_equiangular_rule(0.0, "post_ln", [1.0], 1.0, 8, t)
    ref = 1.0 - mf.theory.solve_equiangular(0.0, [1.0], 1.0, 8, t)
    early = ref > 1e-4          # theory integrates gamma itself: ~1e-12 absolute, so 1 - gamma is good to ~1e-8 here
    # both DOP853 at rtol 1e-12; 1e-7 relative covers theory's absolute error on 1 - gamma >= 1e-4 (measured 5e-9)
    assert early.sum() >= 10 and np.allclose(q[early], ref[early], rtol=1e-7, atol=0)
    assert np.all(r == 1.0) and q[-1] > 0 and q[-1] < 1e-15


@pytest.mark.parametrize("rule, law", [("post_ln", "exponential"), ("ngpt", "exponential"),
                                       ("pre_ln", "power"), ("peri_ln", "power")])
def test_asymptotic_laws_of_the_reduced_ode(rule, law):
    assert nz.asymptotic_law(rule, [1.0], 1.0, 8) == (law, 2.0)
    T = np.array([1e3, 2e3]) if law == "power" else np.array([15.0, 16.0])
    q, _ = nz.solve_equiangular_rule(0.0, rule, [1.0], 1.0, 8, T)
    x = np.log(T) if law == "power" else T
    k = -np.diff(np.log(q))[0] / np.diff(x)[0]
    # the local rate/exponent at late times: corrections O(1 - rho) ~ 1e-13 (exp) or O(c/t) ~ 1e-3 (power)
    assert abs(k - 2.0) < (1e-8 if law == "exponential" else 5e-3)


def test_post_ln_rate_scales_with_head_strength():
    # softmax: K = sum lambda_h; mean: K = sum lambda_h e^{beta lambda_h}
    assert nz.asymptotic_law("post_ln", [1.0, 0.5], 1.0, 8) == ("exponential", 3.0)
    law, k = nz.asymptotic_law("post_ln", [1.0], 2.0, 8, normalization="mean")
    assert law == "exponential" and abs(k - 2 * np.exp(2.0)) < 1e-12      # round-off


def test_refusals():
    with pytest.raises(ValueError, match="rule must be one of"):
        nz.equiangular_rule_rates(0.1, 1.0, "mix_ln", [1.0], 1.0, 8)
    with pytest.raises(ValueError, match="r must be positive"):
        nz.equiangular_rule_rates(0.1, 0.0, "pre_ln", [1.0], 1.0, 8)
    with pytest.raises(ValueError, match="rho must lie in"):
        nz.equiangular_rule_rates(-0.5, 1.0, "pre_ln", [1.0], 1.0, 8)
    with pytest.raises(ValueError, match="rho0 must be < 1"):
        nz.solve_equiangular_rule(1.0, "pre_ln", [1.0], 1.0, 8, [1.0])
    with pytest.raises(ValueError, match="t must be a non-empty 1-d increasing"):
        nz.solve_equiangular_rule(0.0, "pre_ln", [1.0], 1.0, 8, [2.0, 1.0])
    with pytest.raises(ValueError, match="normalization must be one of"):
        nz.asymptotic_law("pre_ln", [1.0], 1.0, 8, normalization="sinkhorn")
    with pytest.raises(ValueError, match="positive radial field"):
        nz.asymptotic_law("post_ln", [-1.0], 1.0, 8)


@pytest.fixture
def deadline():
    """Fail (instead of hanging the suite) if the body runs past ``s`` seconds (SIGALRM, main thread)."""
    import signal

    def arm(s):
        def on_alarm(signum, frame):
            raise TimeoutError(f"still running after {s} s")
        signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(s)

    old = signal.getsignal(signal.SIGALRM)
    yield arm
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("normalization", ["softmax", "mean"])
def test_zero_heads_do_not_move(rule, normalization, deadline):
    """Every lambda_h = 0: u = 0 has no direction, so nGPT and peri-LN do not move (the discrete rules'
    normalize maps u = 0 to 0); the solver used to divide by |u| = 0 and hang on the NaN rate."""
    drho, dr = _particle_rates(rule, 6, 0.2, 2.5, [0.0, 0.0], 1.3, normalization)
    a, b = nz.equiangular_rule_rates(0.2, 2.5, rule, [0.0, 0.0], 1.3, 6, normalization)
    assert np.all(drho == 0) and np.all(dr == 0) and a == 0 and b == 0      # exactly: u = 0
    deadline(30)
    q, r = nz.solve_equiangular_rule(0.2, rule, [0.0], 1.0, 6, [0.0, 0.5, 1.0], normalization, r0=2.5)
    # the closed form, rho and r constant: exactly, up to the solver's exp(log(.)) round trip of its unknowns
    assert np.allclose(q, 0.8, rtol=1e-15, atol=0) and np.allclose(r, 2.5, rtol=1e-15, atol=0)


@pytest.mark.parametrize("rule", ["ngpt", "peri_ln"])
def test_unit_field_rules_are_scale_free_down_to_tiny_heads(rule):
    """nGPT and peri-LN move with u / |u|: scaling (lambda, 1/beta) by 1e-300 leaves the softmax rates unchanged
    (|u|^2 ~ 1e-600 underflowed to 0 before, giving -inf / NaN rates)."""
    big = nz.equiangular_rule_rates(0.3, 2.0, rule, [1.0, 3.0], 1.0, 6)
    tiny = nz.equiangular_rule_rates(0.3, 2.0, rule, [1e-300, 3e-300], 1e300, 6)
    assert np.allclose(tiny, big, rtol=1e-14, atol=0)                          # round-off of the rescaling
