"""The Sinkhorn scaling solve (MODEL.md section 6) on dense kernel matrices, where the answer is checkable."""

import numpy as np
import pytest

from meanfield.core.kernels import NORMALIZATIONS
from meanfield.core.sinkhorn import SinkhornError, solve_scaling


def _kernel(rng, n, d, beta, symmetric=True):
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    M = rng.standard_normal((d, d))
    M = M + M.T if symmetric else M
    return np.exp(beta * X @ M @ X.T / np.linalg.norm(M, 2))


@pytest.mark.parametrize("beta", [0.5, 4.0])
def test_symmetric_scaling_is_doubly_stochastic(rng, beta):
    n = 60
    K = _kernel(rng, n, 3, beta)
    w = rng.uniform(0.5, 1.5, n)
    w /= w.sum()
    res = solve_scaling(lambda f: K @ (w * f), n, tol=1e-13)
    P = res.a[:, None] * K * res.b[None, :]
    # both weighted marginals are 1 to the requested tolerance 1e-13 (plus a few ulps of the final apply: 1e-12
    # leaves room for 60 terms of round-off)
    assert np.max(np.abs(P @ w - 1)) <= 1e-12
    assert np.max(np.abs(w @ P - 1)) <= 1e-12
    assert res.error <= 1e-13 and res.b is res.a


def test_nonsymmetric_scaling_matches_both_marginals(rng):
    n = 40
    K = _kernel(rng, n, 4, 2.0, symmetric=False)
    w = np.full(n, 1.0 / n)
    res = solve_scaling(lambda f: K @ (w * f), n, apply_t=lambda f: K.T @ (w * f), tol=1e-12, maxiter=5000)
    P = res.a[:, None] * K * res.b[None, :]
    assert np.max(np.abs(P @ w - 1)) <= 1e-12          # rows exact by construction (round-off)
    assert np.max(np.abs(w @ P - 1)) <= 1e-12          # columns: the reported error


def test_symmetric_iteration_contracts_by_half_for_a_positive_definite_kernel(rng):
    # exp(beta <x, y>) with beta > 0 is positive definite on the sphere: error at least halves per step
    n = 50
    X = rng.standard_normal((n, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    K = np.exp(3.0 * X @ X.T)
    w = np.full(n, 1.0 / n)
    res = solve_scaling(lambda f: K @ (w * f), n, tol=1e-12)
    # from a start error of order 1, halving reaches 1e-12 within log2(1e12) = 40 applications, + 5 for the
    # start's error above 1 and the final check: 45 (a slower iteration, e.g. undamped, would fail this)
    assert res.n_apply <= 45


def test_non_convergence_names_the_head_and_the_error(rng):
    K = _kernel(rng, 30, 3, 4.0)
    with pytest.raises(SinkhornError, match=r"heads\[2\].*did not converge in 3 iterations: marginal error"):
        solve_scaling(lambda f: K @ f / 30, 30, tol=1e-14, maxiter=3, where="heads[2]")


def test_vanishing_kernel_sums_are_refused():
    with pytest.raises(SinkhornError, match="must be finite and > 0"):
        solve_scaling(lambda f: np.zeros_like(f), 5, where="heads[0]")


def test_warm_start_converges_at_once(rng):
    n = 40
    K = _kernel(rng, n, 3, 2.0)
    apply = lambda f: K @ f / n                                        # noqa: E731
    first = solve_scaling(apply, n, tol=1e-12)
    again = solve_scaling(apply, n, tol=1e-12, start=first.a)
    assert again.n_apply == 1 and np.allclose(again.a, first.a, rtol=1e-12, atol=0)


def test_registry_entry_is_not_row_local():
    norm = NORMALIZATIONS["sinkhorn"]
    assert not norm.row_local and not norm.shifts_rows and norm.uses_normalizer
    with pytest.raises(NotImplementedError, match="not row-local"):
        norm.combine(np.ones((2, 3)), np.ones(2))


# ------------------------------------------------------------------------------------------- cost and input checks
def _never(f):
    raise AssertionError("a refused solve must not apply the kernel")


@pytest.mark.parametrize("n", [10**12, (10**6, 10**6)])
def test_huge_sizes_are_refused_by_the_cost_guard_before_allocating(n):
    # 6 float64 vectors of 10^12 entries: 44 TiB, far above MEMORY_LIMIT_BYTES; refused from n alone (np.ones(n)
    # would have been the first allocation)
    with pytest.raises(ValueError, match=r"solve_scaling\(n=.*of memory.*MEMORY_LIMIT_BYTES = 4 GiB; use a smaller n"):
        solve_scaling(_never, n)


def test_the_memory_estimate_is_six_vectors_of_n(rng):
    from meanfield.core import cost
    from meanfield.core.sinkhorn import SCALING_VECTORS

    K = _kernel(rng, 20, 3, 1.0)
    apply = lambda f: K @ f / 20                                        # noqa: E731
    with cost.limits(bytes=SCALING_VECTORS * 8 * 20):
        assert solve_scaling(apply, 20).error <= 1e-12
    with cost.limits(bytes=SCALING_VECTORS * 8 * 20 - 1):
        with pytest.raises(ValueError, match=r"solve_scaling\(n=20\) would need about 960 B of memory"):
            solve_scaling(apply, 20)


def test_numpy_integers_and_shapes_are_accepted(rng):
    K = _kernel(rng, 12, 3, 1.0)
    a = solve_scaling(lambda f: K @ f / 12, np.int64(12)).a
    b = solve_scaling(lambda f: (K @ f.ravel() / 12).reshape(3, 4), (3, np.int32(4))).a
    assert a.shape == (12,) and b.shape == (3, 4) and np.allclose(a, b.ravel(), rtol=1e-11, atol=0)


@pytest.mark.parametrize("kw, match", [
    (dict(n=0), r"^n must be an integer >= 1 or a non-empty tuple of them"), (dict(n=2.5), "^n must"),
    (dict(n=True), "^n must"), (dict(n="4"), "^n must"), (dict(n=()), "^n must"), (dict(n=(2, 0)), "^n must"),
    (dict(n=None), "^n must"), (dict(tol=np.nan), "^tol must be a positive finite number"), (dict(tol=0.0), "^tol"),
    (dict(tol=-1.0), "^tol"), (dict(maxiter=0), "^maxiter must be an integer >= 1"), (dict(maxiter=2.5), "^maxiter"),
    (dict(apply="K"), "^apply must be a callable"), (dict(apply_t=3), "^apply_t must be a callable"),
    (dict(where=3), "^where must be a string"), (dict(start=-np.ones(4)), "^start must be finite scalings > 0"),
    (dict(start=np.array([1.0, np.nan, 1.0, 1.0])), "^start must be a finite real array of shape"),
    (dict(start=np.ones(3)), r"^start must be a finite real array of shape \(4,\); received shape \(3,\)"),
    (dict(apply=lambda f: np.ones(3)), r"^apply must map arrays of shape \(4,\) to real arrays of that shape; "
                                       r"received float64 of shape \(3,\)"),
    (dict(apply_t=lambda f: f[:, None]), r"^apply_t must map arrays of shape \(4,\)")])
def test_bad_arguments_are_refused_by_name(kw, match):
    args = dict(apply=lambda f: f / 4 + 0.5 * f.mean(), n=4)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        solve_scaling(args.pop("apply"), args.pop("n"), **args)
