"""The transformer's discrete step rules (models/step_rules.py): exact identities and convergence orders."""

import numpy as np
import pytest

import meanfield as mf
from meanfield.core.heads import random_symmetric_heads, scalar_heads
from meanfield.core.options import SaveAt, StepControl
from meanfield.models.batched import BatchedSystem
from meanfield.models.step_rules import STEP_RULES, directions, iterate, limit_rhs, step


def _cap_tokens(rng, B, n, d, spread=0.8):
    """Tokens in a cap around e_d: the attention field stays away from 0, so the unit-field rules are smooth."""
    X = spread * rng.standard_normal((B, n, d))
    X[..., -1] += 1.0
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


@pytest.mark.parametrize("rule", STEP_RULES)
def test_each_rule_converges_to_its_limit_at_order_one(rng, rule):
    heads = random_symmetric_heads(3, 2, seed=1, beta=2.0, normalization="softmax")
    bs = BatchedSystem(heads)
    X = _cap_tokens(rng, 3, 10, 3)
    T = 1.0
    # reference: RK4 at dt = T/1600 (error ~1e-12, far below the Euler-type errors ~1e-4 measured here)
    ref = mf.integrate(limit_rhs(bs, rule), X, (0.0, T), method="rk4", step=StepControl(dt=T / 1600),
                       save=SaveAt(states=False)).y_final
    dts = np.array([T / 50, T / 100, T / 200, T / 400])
    errs = [np.abs(directions(iterate(bs, X, dt, round(T / dt), rule, save_states=False).y_final, rule)
                   - directions(ref, rule)).max() for dt in dts]
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    # every rule is an Euler-type map of its limit: order 1; +-0.1 allows the pre-asymptotic drift of
    # four halvings while excluding order 0 (no convergence) and order 2
    assert abs(slope - 1.0) < 0.1, (rule, errs, slope)
    assert errs[-1] < 1e-2


def test_post_ln_is_the_peer_step(rng):
    # x <- normalize(x + dt softmax(beta X X^T) X): borjanG/2023-transformers-rotf with KQ = V = Id
    beta, dt = 4.0, 0.1
    bs = BatchedSystem(scalar_heads([1.0], 3, beta=beta, normalization="softmax"))
    X = _cap_tokens(rng, 4, 8, 3, spread=2.0)
    S = beta * X @ np.swapaxes(X, 1, 2)
    P = np.exp(S - S.max(axis=-1, keepdims=True))
    P /= P.sum(axis=-1, keepdims=True)
    Y = X + dt * P @ X
    Y /= np.linalg.norm(Y, axis=-1, keepdims=True)
    # same products in another order: a few ulps on unit vectors
    np.testing.assert_allclose(step(bs, X, dt, "post_ln"), Y, rtol=0, atol=1e-15 * 8)


def test_post_ln_is_projected_euler_with_a_slowed_clock(rng):
    # normalize(x + dt u) = normalize(x + tau P_x u) with tau = dt / (1 + dt <x, u>), token by token
    bs = BatchedSystem(random_symmetric_heads(3, 2, seed=2, beta=1.5, normalization="softmax"))
    X = _cap_tokens(rng, 2, 6, 3, spread=2.0)
    dt = 0.2
    u = bs.field(X)
    tau = dt / (1 + dt * np.sum(X * u, axis=-1, keepdims=True))
    P = u - np.sum(X * u, axis=-1, keepdims=True) * X
    Y = X + tau * P
    Y /= np.linalg.norm(Y, axis=-1, keepdims=True)
    # an algebraic identity: round-off only
    np.testing.assert_allclose(step(bs, X, dt, "post_ln"), Y, rtol=0, atol=1e-14)


def test_pre_ln_radius_grows_by_the_radial_field(rng):
    # one pre-LN layer: z <- z + dt u(z/|z|); from radius 1, |z|^2 = 1 + 2 dt <x, u> + dt^2 |u|^2 exactly
    bs = BatchedSystem(scalar_heads([1.0], 3, beta=2.0, normalization="softmax"))
    X = _cap_tokens(rng, 2, 5, 3, spread=2.0)
    dt = 0.3
    u = bs.field(X)
    Z = iterate(bs, X, dt, 1, "pre_ln").y_final
    expect = 1 + 2 * dt * np.sum(X * u, axis=-1) + dt**2 * np.sum(u * u, axis=-1)
    np.testing.assert_allclose(np.sum(Z * Z, axis=-1), expect, rtol=0, atol=1e-14)   # round-off of O(1) sums


def test_iterate_records_observables_and_refuses_bad_input(rng):
    bs = BatchedSystem(scalar_heads([1.0], 3, beta=1.0, normalization="softmax"))
    X = _cap_tokens(rng, 2, 4, 3)
    tr = iterate(bs, X, 0.1, 5, "ngpt", every=2, observe=lambda t, x: {"norm": np.linalg.norm(x, axis=-1).max()})
    np.testing.assert_allclose(tr.t, [0.0, 0.2, 0.4, 0.5], rtol=0, atol=1e-15)    # k * dt, exact up to 1 ulp
    np.testing.assert_allclose(tr.observables["norm"], 1.0, rtol=0, atol=1e-15)   # unit rows to 1 ulp
    with pytest.raises(ValueError, match=r"^rule must be one of"):
        iterate(bs, X, 0.1, 5, "post-ln")
    with pytest.raises(ValueError, match=r"^dt must be"):
        iterate(bs, X, -0.1, 5)
    with pytest.raises(ValueError, match=r"^X0 must have d = 3"):
        iterate(bs, X[..., :2], 0.1, 5)
