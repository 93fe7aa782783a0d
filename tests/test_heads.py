"""Heads (meanfield.core.heads): validation of every argument, properties, round trips, and the
defining property of every preset (MODEL.md sections 1-2)."""

import dataclasses
import json

import numpy as np
import pytest
from scipy import linalg

import meanfield as mf
from meanfield.core.heads import check_exp_range, check_heads
from meanfield.core.kernels import EXP_LIMIT


def base(**changes):
    kw = dict(M=np.eye(3), V=np.eye(3), beta=1.0, kernel="exp", normalization="mean")
    kw.update(changes)
    return kw


# ------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("kwargs, match", [
    (dict(beta=0.0), "beta must be a positive finite number; received 0.0"),
    (dict(beta=-1.0), "beta"),
    (dict(beta=float("nan")), "beta"),
    (dict(kernel="gauss"), r"kernel must be one of \('exp', 'relu'.*\); received 'gauss'"),
    (dict(normalization="sum"), "normalization must be one of"),
    (dict(M=np.full((3, 3), np.nan)), "M must have finite entries"),
    (dict(V=np.eye(4)), "M and V must have the same shape"),
    (dict(M=np.ones(3)), "M must be a square matrix"),
])
def test_head_bad_input(kwargs, match):
    # moved unchanged from test_particles.py
    with pytest.raises(ValueError, match=match):
        mf.Head(**base(**kwargs))


@pytest.mark.parametrize("kwargs, match", [
    (dict(beta=float("inf")), r"beta must be a positive finite number; received inf"),
    (dict(beta=True), r"beta must be a positive finite number; received True"),
    (dict(beta="1.0"), r"beta must be a positive finite number; received '1.0'"),
    (dict(beta=None), r"beta must be a positive finite number; received None"),
    (dict(kernel="Exp"), r"kernel must be one of \('exp', 'relu'.*\); received 'Exp'"),
    (dict(normalization=None), r"normalization must be one of \('mean', 'softmax', 'sinkhorn'\); received None"),
    (dict(M=np.ones((1, 1)), V=np.ones((1, 1))), r"M must be a square matrix of size d x d with d >= 2; "
                                                 r"received shape \(1, 1\)"),
    (dict(M=np.ones((2, 3))), r"M must be a square matrix .* received shape \(2, 3\)"),
    (dict(V=np.ones((3, 2))), r"V must be a square matrix .* received shape \(3, 2\)"),
    (dict(V=np.diag([1.0, np.inf, 1.0])), r"V must have finite entries"),
    (dict(M=np.ones((2, 2, 2))), r"M must be a square matrix .* received shape \(2, 2, 2\)"),
])
def test_head_every_argument_is_checked_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mf.Head(**base(**kwargs))


def test_head_stores_validated_read_only_copies():
    M = np.diag([1.0, 2.0, 3.0])
    h = mf.Head(M, M, beta=2)                       # an int beta is accepted and stored as float
    assert isinstance(h.beta, float) and h.beta == 2.0
    M[0, 0] = 99.0                                  # the caller's array is copied: exact comparison
    assert h.M[0, 0] == 1.0 and h.V[0, 0] == 1.0
    with pytest.raises(ValueError, match="read-only"):
        h.M[1, 1] = 5.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        h.beta = 3.0
    assert h.dim == 3 and h.M.dtype == np.float64


# ------------------------------------------------------------------------------ properties
def test_is_zonal_and_scalar():
    assert mf.Head(-0.7 * np.eye(4), -0.7 * np.eye(4)).is_zonal
    assert mf.Head(-0.7 * np.eye(4), -0.7 * np.eye(4)).scalar == -0.7
    assert mf.Head(np.zeros((3, 3)), np.zeros((3, 3))).scalar == 0.0        # lambda = 0 is zonal too
    assert not mf.Head(np.eye(3), 2 * np.eye(3)).is_zonal                    # V != M
    assert not mf.Head(np.diag([1.0, 1.0, 2.0]), np.diag([1.0, 1.0, 2.0])).is_zonal
    off = np.eye(3)
    off[0, 1] = 1e-300                                                       # exact test, no tolerance
    assert mf.Head(off, off).scalar is None


def test_is_symmetric_aligned():
    rng = np.random.default_rng(1)
    G = rng.standard_normal((4, 4))
    S = G + G.T
    assert mf.Head(S, S).is_symmetric_aligned
    assert not mf.Head(G, G).is_symmetric_aligned                            # not symmetric
    assert not mf.Head(S, S + 1e-12).is_symmetric_aligned                   # V must equal M exactly
    # symmetry is judged to 1e-14 * (1 + max|M|): a round-off asymmetry (1e-16) passes, 1e-10 does not
    for eps, expected in ((1e-16, True), (1e-10, False)):
        A = S.copy()
        A[0, 1] += eps * (1 + np.abs(S).max())
        assert mf.Head(A, A).is_symmetric_aligned is expected


# ---------------------------------------------------------------------- to_dict / replace
@pytest.mark.parametrize("kernel, normalization", [("exp", "mean"), ("relu", "softmax")])
def test_to_dict_from_dict_round_trip(kernel, normalization):
    rng = np.random.default_rng(2)
    h = mf.Head(rng.standard_normal((3, 3)), rng.standard_normal((3, 3)), 0.37, kernel, normalization)
    d = h.to_dict()
    assert set(d) == {"M", "V", "beta", "kernel", "normalization"}
    back = mf.Head.from_dict(json.loads(json.dumps(d)))     # plain Python: survives JSON text
    # floats -> lists -> JSON -> floats is exact (repr round-trips float64): tolerance 0
    np.testing.assert_array_equal(back.M, h.M)
    np.testing.assert_array_equal(back.V, h.V)
    assert (back.beta, back.kernel, back.normalization) == (h.beta, h.kernel, h.normalization)
    with pytest.raises(ValueError, match="beta must be a positive finite number"):
        mf.Head.from_dict({**d, "beta": -1.0})               # from_dict validates like the constructor


def test_replace():
    h = mf.scalar_heads([1.5], 3, beta=2.0)[0]
    r = h.replace(beta=4.0, normalization="softmax")
    assert (r.beta, r.normalization, r.scalar) == (4.0, "softmax", 1.5) and h.beta == 2.0   # h untouched
    assert h.replace(V=np.zeros((3, 3))).scalar is None               # derived field recomputed
    with pytest.raises(ValueError, match=r"unknown Head fields \['gamma'\]; allowed \['M', 'V', 'beta', "):
        h.replace(gamma=1.0)
    with pytest.raises(ValueError, match="unknown Head fields"):
        h.replace(scalar=2.0)                                          # derived, not settable
    with pytest.raises(ValueError, match="kernel must be one of"):
        h.replace(kernel="tanh")                                       # validated again


# -------------------------------------------------------------------- check_heads, exp range
def test_check_heads():
    h = mf.scalar_heads([1.0], 3)[0]
    assert check_heads(h) == (h,)                                      # a single Head is wrapped
    assert check_heads([h, h], d=3) == (h, h)
    for heads, kw, match in [
        ((), {}, "heads must be a non-empty sequence of Head; received an empty sequence"),
        ([h, np.eye(3)], {}, "heads must contain Head objects; received ndarray"),
        ([h, mf.scalar_heads([1.0], 4)[0]], {}, r"same dimension; received dimensions \[3, 4\]"),
        ([h], {"d": 5}, "heads must have dimension d = 5; received heads of dimension 3"),
    ]:
        with pytest.raises(ValueError, match=match):
            check_heads(heads, **kw)


def test_check_exp_range():
    ok = mf.scalar_heads([1.0], 3, beta=EXP_LIMIT)                     # beta |M|_2 = 700: at the limit
    assert check_exp_range(ok) is ok
    too_big = mf.scalar_heads([1.0, -1.0], 3, beta=EXP_LIMIT * (1 + 1e-12))
    # the message names the offending head (its index), the limit and the value received
    with pytest.raises(ValueError, match=r"heads\[0\]: beta \* \|M\|_2 must be <= 700 .* received 700"):
        check_exp_range(too_big)
    # the operator norm counts, not the entries: M = 2 I scaled by beta = 351 gives 702
    with pytest.raises(ValueError, match=r"heads\[1\]: .*received 702"):
        check_exp_range(mf.scalar_heads([0.5, 2.0], 3, beta=351.0))
    # softmax heads are evaluated shifted and ReLU has no exponential: never refused
    for kernel, normalization in (("exp", "softmax"), ("relu", "mean")):
        heads = mf.scalar_heads([10.0], 3, beta=1000.0, kernel=kernel, normalization=normalization)
        assert check_exp_range(heads) is heads


# --------------------------------------------------------------------------------- presets
def test_presets():
    # moved unchanged from test_particles.py
    heads = mf.orthogonal_block_heads(6, 3, strengths=[1.0, 2.0, 3.0])
    for i, h in enumerate(heads):
        for j, g in enumerate(heads):
            if i != j:
                assert np.abs(g.M @ h.M).max() == 0.0  # disjoint blocks: exact zeros
    ap = mf.approx_orthogonal_heads(6, 2, delta=0.3, alpha=1.5, rank=2)
    # |M_2 M_1|_op = delta by construction (round-off of sqrt products, 1e-14)
    assert np.linalg.norm(ap[1].M @ ap[0].M, 2) == pytest.approx(0.3, abs=1e-14)
    pert = mf.perturbed_value_heads(mf.random_symmetric_heads(4, 2, seed=1), 0.2, seed=2)
    for h in pert:
        assert np.linalg.norm(h.V - h.M, 2) == pytest.approx(0.2, rel=1e-12)
    assert mf.scalar_heads([1.0, -2.0], 3)[1].scalar == -2.0 and mf.scalar_heads([1.0], 3)[0].is_zonal


def test_scalar_heads():
    heads = mf.scalar_heads([0.5, -2.0, 3], 4, beta=1.5, kernel="relu", normalization="softmax")
    assert len(heads) == 3
    for h, lam in zip(heads, [0.5, -2.0, 3.0]):
        # lambda * I built exactly: tolerance 0
        np.testing.assert_array_equal(h.M, lam * np.eye(4))
        np.testing.assert_array_equal(h.V, h.M)
        assert h.scalar == lam and h.is_zonal and h.is_symmetric_aligned
        assert (h.beta, h.kernel, h.normalization) == (1.5, "relu", "softmax")
    assert len(mf.scalar_heads(2.0, 3)) == 1                          # a scalar strength: one head
    for lambdas in ([], [[1.0, 2.0]]):
        with pytest.raises(ValueError, match="lambdas must be a non-empty 1-d sequence; received shape"):
            mf.scalar_heads(lambdas, 3)


@pytest.mark.parametrize("d, n_heads", [(2, 2), (6, 3), (7, 3), (5, 1)])
def test_orthogonal_block_heads(d, n_heads):
    strengths = np.arange(1.0, n_heads + 1)
    heads = mf.orthogonal_block_heads(d, n_heads, strengths=strengths, beta=0.7)
    assert len(heads) == n_heads
    total = np.zeros((d, d))
    for h, a in zip(heads, strengths):
        P = h.M / a
        # a coordinate projection scaled by alpha_h: P^2 = P, V = M (exact entries 0 and alpha)
        np.testing.assert_array_equal(P @ P, P)
        np.testing.assert_array_equal(h.V, h.M)
        assert h.is_symmetric_aligned and h.beta == 0.7 and np.trace(P) >= 1
        total += P
        for g in heads:
            if g is not h:
                np.testing.assert_array_equal(g.M @ h.M, 0.0)        # M_h' M_h = 0 exactly
    np.testing.assert_array_equal(total, np.eye(d))                   # the blocks cover every coordinate
    for bad in (0, d + 1, 2.0):
        with pytest.raises(ValueError, match=rf"n_heads must be an integer in \[1, d={d}\]; received {bad!r}"):
            mf.orthogonal_block_heads(d, bad)


@pytest.mark.parametrize("delta, alpha, rank, n_heads", [(0.3, 1.5, 2, 2), (0.0, 1.0, 1, 3), (0.2, 0.8, 1, 2),
                                                         (1.0, 1.0, 1, 2)])
def test_approx_orthogonal_heads(delta, alpha, rank, n_heads):
    d = (n_heads + 1) * rank + 1
    heads = mf.approx_orthogonal_heads(d, n_heads, delta, alpha=alpha, rank=rank)
    c = delta / alpha ** 2
    for h in heads:
        # M = alpha U U^T with orthonormal U: eigenvalues alpha (rank times) and 0; round-off 1e-14
        ev = np.linalg.eigvalsh(h.M)
        np.testing.assert_allclose(np.sort(ev)[-rank:], alpha, rtol=0, atol=1e-14)
        np.testing.assert_allclose(ev[:-rank], 0.0, rtol=0, atol=1e-14)
        assert h.is_symmetric_aligned
    for i in range(n_heads):
        for j in range(n_heads):
            if i != j:
                # |M_h' M_h|_op = alpha^2 c = delta (products of square roots: round-off 1e-14)
                assert abs(np.linalg.norm(heads[j].M @ heads[i].M, 2) - delta) <= 1e-14
                if c < 1:
                    # every principal angle between the head subspaces is arccos(c); SVD-based angles
                    # are accurate to ~1e-15 / sin(angle), and sin(angle) >= 0.6 here
                    ang = linalg.subspace_angles(linalg.orth(heads[i].M), linalg.orth(heads[j].M))
                    np.testing.assert_allclose(ang, np.arccos(c), rtol=0, atol=1e-12)


def test_approx_orthogonal_heads_trained_angle():
    """MODEL.md: trained heads have principal angles of 70-85 degrees; delta = alpha^2 cos(theta)."""
    theta = np.deg2rad(75.0)
    heads = mf.approx_orthogonal_heads(3, 2, delta=2.0 ** 2 * np.cos(theta), alpha=2.0)
    ang = linalg.subspace_angles(linalg.orth(heads[0].M), linalg.orth(heads[1].M))
    # one rank-1 angle; SVD round-off ~1e-15, cos/arccos round trip ~1e-16 / sin(75 deg)
    assert ang.shape == (1,) and abs(ang[0] - theta) <= 1e-12
    with pytest.raises(ValueError, match=r"d must be >= \(n_heads \+ 1\) \* rank = 6; received d=5"):
        mf.approx_orthogonal_heads(5, 2, 0.1, rank=2)
    with pytest.raises(ValueError, match=r"delta must lie in \[0, alpha\^2 = 4.0\]; received 4.5"):
        mf.approx_orthogonal_heads(6, 2, 4.5, alpha=2.0)
    with pytest.raises(ValueError, match="delta must lie in"):
        mf.approx_orthogonal_heads(6, 2, -0.1)


@pytest.mark.parametrize("epsilon", [0.0, 1e-3, 0.2, 5.0])
def test_perturbed_value_heads(epsilon):
    heads = mf.random_symmetric_heads(4, 3, seed=1) + mf.orthogonal_block_heads(4, 2)
    pert = mf.perturbed_value_heads(heads, epsilon, seed=2)
    assert len(pert) == len(heads)
    for h, p in zip(heads, pert):
        np.testing.assert_array_equal(p.M, h.M)                           # M untouched
        assert (p.beta, p.kernel, p.normalization) == (h.beta, h.kernel, h.normalization)
        # |V - M|_2 = epsilon: D scaled by epsilon / |D|_2, one SVD round-off (1e-12 relative)
        assert abs(np.linalg.norm(p.V - p.M, 2) - epsilon) <= 1e-12 * max(epsilon, 1e-300)
    if epsilon == 0:
        assert all(p.is_symmetric_aligned for p in pert)                 # V = M + 0 exactly
    # seeded: the same seed gives the same perturbation (tolerance 0), another seed another one
    again = mf.perturbed_value_heads(heads, epsilon, seed=2)
    assert all(np.array_equal(a.V, b.V) for a, b in zip(pert, again))
    if epsilon > 0:
        other = mf.perturbed_value_heads(heads, epsilon, seed=3)
        assert not np.array_equal(other[0].V, pert[0].V)


def test_perturbed_value_heads_bad_input():
    heads = mf.scalar_heads([1.0], 3)
    for eps in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"epsilon must be a finite number >= 0; received"):
            mf.perturbed_value_heads(heads, eps)
    with pytest.raises(ValueError, match="heads must be a non-empty sequence"):
        mf.perturbed_value_heads((), 0.1)


@pytest.mark.parametrize("d, n_heads, scale", [(2, 1, 1.0), (5, 3, 0.3), (8, 2, 4.0)])
def test_random_symmetric_heads(d, n_heads, scale):
    heads = mf.random_symmetric_heads(d, n_heads, seed=7, scale=scale, beta=0.9, normalization="softmax")
    assert len(heads) == n_heads
    for h in heads:
        # (G + G^T) is symmetric exactly in floating point (addition commutes): tolerance 0
        np.testing.assert_array_equal(h.M, h.M.T)
        np.testing.assert_array_equal(h.V, h.M)
        assert h.is_symmetric_aligned and (h.beta, h.normalization) == (0.9, "softmax")
    # seeded reproducible: same seed -> identical matrices, also through a Generator
    again = mf.random_symmetric_heads(d, n_heads, seed=7, scale=scale)
    gen = mf.random_symmetric_heads(d, n_heads, seed=np.random.default_rng(7), scale=scale)
    for a, b, c in zip(heads, again, gen):
        np.testing.assert_array_equal(a.M, b.M)
        np.testing.assert_array_equal(a.M, c.M)
    assert not np.array_equal(mf.random_symmetric_heads(d, 1, seed=8, scale=scale)[0].M, heads[0].M)
    if n_heads > 1:
        assert not np.array_equal(heads[0].M, heads[1].M)                # independent draws per head


def test_random_symmetric_heads_scale():
    """M = scale (G + G^T) / (2 sqrt d): off-diagonal entries have variance scale^2 / (2 d)."""
    d, scale = 10, 3.0
    M = np.stack([h.M for h in mf.random_symmetric_heads(d, 400, seed=0, scale=scale)])
    off = M[:, ~np.eye(d, dtype=bool)]
    var = off.var()
    # 400 * 90 / 2 = 18000 independent entries: relative standard error of the variance
    # sqrt(2 / 18000) ~ 0.011; 5 % is more than 4 standard errors
    assert abs(var / (scale ** 2 / (2 * d)) - 1) <= 0.05


# ------------------------------------------------------------------- bugs found and fixed
def test_approx_orthogonal_heads_zero_alpha_named_error():
    # was a ZeroDivisionError (delta / alpha**2 before any check)
    with pytest.raises(ValueError, match=r"alpha must be a finite number and != 0; received 0.0"):
        mf.approx_orthogonal_heads(4, 2, 0.0, alpha=0.0)


@pytest.mark.parametrize("make", [lambda: mf.random_symmetric_heads(3, 0, seed=0),
                                  lambda: mf.approx_orthogonal_heads(4, 0, 0.1)])
def test_zero_heads_refused(make):
    # was an empty tuple
    with pytest.raises(ValueError, match=r"n_heads must be an integer >= 1; received 0"):
        make()


def test_perturbed_value_heads_non_number_epsilon():
    # was a TypeError from np.isfinite
    with pytest.raises(ValueError, match=r"epsilon must be a finite number >= 0; received '0.1'"):
        mf.perturbed_value_heads(mf.scalar_heads([1.0], 3), "0.1")


def test_orthogonal_block_heads_strengths_length_named():
    # was numpy's broadcast message
    with pytest.raises(ValueError, match=r"strengths must be one number or n_heads = 2 numbers; received shape \(3,\)"):
        mf.orthogonal_block_heads(4, 2, strengths=[1.0, 2.0, 3.0])


# ------------------------------------------------- preset arguments unchecked before, now refused by name
@pytest.mark.parametrize("make, match", [
    (lambda: mf.random_symmetric_heads(3, True, seed=0), r"n_heads must be an integer >= 1; received True"),
    (lambda: mf.random_symmetric_heads(3.0, 2, seed=0), r"d must be an integer >= 2; received 3.0"),
    (lambda: mf.random_symmetric_heads(3, 2, seed=0, scale=float("nan")),
     r"scale must be a finite number >= 0; received nan"),
    (lambda: mf.random_symmetric_heads(3, 2, seed=1.5),
     r"seed must be None, an integer >= 0 or a numpy.random.Generator; received 1.5"),
    (lambda: mf.random_symmetric_heads(3, 2, seed=-1), r"seed must be None, an integer >= 0"),
    (lambda: mf.perturbed_value_heads(mf.scalar_heads([1.0], 3), 0.1, seed="a"), r"seed must be None"),
    (lambda: mf.approx_orthogonal_heads(6, 2, 0.1, rank=0), r"rank must be an integer >= 1; received 0"),
    (lambda: mf.approx_orthogonal_heads(6, 2, "0.1"), r"delta must be a finite number; received '0.1'"),
    (lambda: mf.approx_orthogonal_heads(6, 2, 0.1, alpha=np.inf), r"alpha must be a finite number and != 0"),
    (lambda: mf.approx_orthogonal_heads(6.0, 2, 0.1), r"d must be an integer >= 2; received 6.0"),
    (lambda: mf.orthogonal_block_heads(4, 2, strengths=[1.0, np.nan]), r"strengths must be finite real number\(s\)"),
    (lambda: mf.orthogonal_block_heads(4, True), r"n_heads must be an integer in \[1, d=4\]; received True"),
    (lambda: mf.scalar_heads([1.0, np.nan], 3), r"lambdas must be finite real number\(s\); received"),
    (lambda: mf.scalar_heads(["a"], 3), r"lambdas must be finite real number\(s\); received"),
    (lambda: mf.scalar_heads([1.0], 3.5), r"d must be an integer >= 2; received 3.5"),
    (lambda: mf.Head(np.array([["a", "b"], ["c", "d"]]), np.eye(2)),
     r"M must be a real square matrix of size d x d with d >= 2; received array\(\[\['a'"),
])
def test_preset_arguments_refused_by_name(make, match):
    with pytest.raises(ValueError, match=match):
        make()
