"""Tests for meanfield.analysis.transport: closed forms, invariances, method agreement, input checks."""

import numpy as np
import pytest

from meanfield.analysis.transport import TransportResult, cost_matrix, w2_distance, w2_particles_density


def sphere_points(rng, n, d=3):
    v = rng.normal(size=(n, d))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def cluster(rng, n, mu, kappa):
    """vMF-like cluster: Gaussian perturbation of ``mu`` with variance 1/kappa, projected."""
    v = np.asarray(mu, float) + rng.normal(size=(n, 3)) / np.sqrt(kappa)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def random_weights(rng, n):
    a = rng.random(n) + 0.1
    return a / a.sum()


def gauss_legendre_nodes(L, nphi):
    """Nodes (L*nphi, 3) and weights summing to 4 pi: Gauss-Legendre in cos(theta), uniform in phi."""
    z, wz = np.polynomial.legendre.leggauss(L)
    phi = 2 * np.pi * (np.arange(nphi) + 0.5) / nphi
    Z, P = np.meshgrid(z, phi, indexing="ij")
    s = np.sqrt(1 - Z**2)
    nodes = np.stack([s * np.cos(P), s * np.sin(P), Z], -1).reshape(-1, 3)
    nodes /= np.linalg.norm(nodes, axis=1, keepdims=True)
    return nodes, (wz[:, None] * np.full(nphi, 2 * np.pi / nphi)).ravel()


@pytest.mark.parametrize("metric", ["geodesic", "chordal"])
def test_self_distance_is_zero(metric):
    rng = np.random.default_rng(0)
    X = sphere_points(rng, 300)
    a = random_weights(rng, 300)
    res = w2_distance(X, X, a, a, metric=metric, method="exact")
    assert isinstance(res, TransportResult) and res.method == "exact" and res.info["result_code"] == 1
    # The optimal plan is the identity; its diagonal costs are arccos(<x,x>)^2 with
    # <x,x> = 1 - O(1e-16), i.e. arccos ~ sqrt(2e-16) ~ 1.5e-8 per point (the sqrt(eps)
    # loss of arccos near 1, after clipping to [-1, 1]); emd adds ~1e-16 noise to the cost.
    # So the distance is at most ~2e-8: 1e-7 leaves a margin.
    assert res.distance < 1e-7
    assert abs(res.cost) < 1e-14  # cost = distance^2 ~ 2e-16


@pytest.mark.parametrize("theta", [0.1, 0.5, 1.0, 2.0, 3.0])
def test_point_masses_closed_form(theta):
    x = np.array([[0.0, 0.0, 1.0]])
    y = np.array([[np.sin(theta), 0.0, np.cos(theta)]])
    geo = w2_distance(x, y, metric="geodesic", method="exact")
    cho = w2_distance(x, y, metric="chordal", method="exact")
    # arccos(cos theta) is accurate to ~eps/sin(theta) <= 1e-15 for these angles.
    assert abs(geo.distance - theta) < 1e-12
    assert abs(cho.distance - 2 * np.sin(theta / 2)) < 1e-12


def test_cost_matrix_chordal_identity():
    rng = np.random.default_rng(1)
    X, Y = sphere_points(rng, 20), sphere_points(rng, 30)
    diff = np.sum((X[:, None, :] - Y[None, :, :]) ** 2, axis=-1)
    # 2 - 2<x,y> vs |x-y|^2: both O(1) sums of a few float64 terms, ~1e-15 apart.
    assert np.max(np.abs(cost_matrix(X, Y, "chordal") - diff)) < 1e-13
    geo = cost_matrix(X, Y, "geodesic")
    # chordal = 2 sin(theta/2) and geodesic = theta: same angles, error ~1e-15 / sin(theta).
    assert np.max(np.abs(np.sqrt(cost_matrix(X, Y, "chordal")) - 2 * np.sin(np.sqrt(geo) / 2))) < 1e-10


@pytest.mark.parametrize("metric", ["geodesic", "chordal"])
def test_rotation_invariance(metric):
    rng = np.random.default_rng(2)
    X, Y = sphere_points(rng, 150), sphere_points(rng, 120)
    a, b = random_weights(rng, 150), random_weights(rng, 120)
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q * np.sign(np.diag(R))
    d0 = w2_distance(X, Y, a, b, metric=metric, method="exact").distance
    d1 = w2_distance(X @ Q.T, Y @ Q.T, a, b, metric=metric, method="exact").distance
    # Rotation changes inner products by ~1e-16; the optimal cost is Lipschitz in C, and no
    # pair in the plan is near coincident, so the arccos sqrt(eps) effect does not enter.
    assert abs(d0 - d1) < 1e-10


@pytest.mark.parametrize("metric", ["geodesic", "chordal"])
def test_exact_vs_debiased_sinkhorn(metric):
    rng = np.random.default_rng(3)
    X, Y = sphere_points(rng, 200), sphere_points(rng, 200)
    a = random_weights(rng, 200)
    exact = w2_distance(X, Y, a, metric=metric, method="exact")
    sk = w2_distance(X, Y, a, metric=metric, method="sinkhorn")
    assert sk.method == "sinkhorn" and sk.info["reg"] > 0
    # Measured at n = 200, reg = 1e-3 max C, 5 seeds: the raw entropic cost is 2.7-4.0 %
    # (geodesic) / 0.5-0.8 % (chordal) above exact; the debiased distance is 0.26-0.53 %
    # (geodesic) / 0.04-0.1 % (chordal) below exact. 2 % is a 4x margin on the worst case.
    assert abs(sk.distance / exact.distance - 1) < 0.02
    # Debiasing must improve on the raw entropic cost.
    assert abs(sk.cost - exact.cost) < abs(sk.info["raw_cost"] - exact.cost)


def test_sliced_identical_and_clusters():
    rng = np.random.default_rng(4)
    X = sphere_points(rng, 300)
    same = w2_distance(X, X, method="sliced", seed=0)
    # Identical projected coordinates on every circle; POT's circle solver (binary search,
    # eps 1e-6) then returns 0 up to round-off.
    assert same.method == "sliced" and same.distance < 1e-6
    A = cluster(rng, 200, [0, 0, 1], 50.0)
    B = cluster(rng, 200, [1, 0, 0], 50.0)
    exact = w2_distance(A, B, method="exact").distance
    ssw = w2_distance(A, B, method="sliced", seed=0, n_projections=200)
    assert ssw.info["n_projections"] == 200 and ssw.info["seed"] == 0
    # Spherical sliced W2 (radians) is not a bound on W2: measured 1.04-1.07 x exact here (and
    # 0.6-0.7 x exact for two uniform samples). Assert only the same order, with margin.
    assert ssw.distance > 0 and 0.8 < ssw.distance / exact < 1.3
    # Euclidean sliced W2 <= chordal W2 is guaranteed: each projection is 1-Lipschitz.
    sw = w2_distance(A, B, metric="chordal", method="sliced", seed=0).distance
    assert 0 < sw <= w2_distance(A, B, metric="chordal", method="exact").distance


def test_particles_vs_uniform_density_rate():
    nodes, w = gauss_legendre_nodes(32, 64)
    density_weights = w / (4 * np.pi)  # uniform rho = 1/(4 pi)
    # Gauss-Legendre integrates constants exactly: the mass is 1 to round-off.
    assert abs(density_weights.sum() - 1) < 1e-13
    ns = np.array([100, 400, 1600])
    dist = np.array([np.mean([w2_particles_density(sphere_points(np.random.default_rng(s), n), nodes,
                                                   density_weights).distance for s in range(3)])
                     for n in ns])
    # Measured means 0.27, 0.16, 0.08 (grid of 2048 nodes contributes ~0.003).
    assert np.all(np.diff(dist) < 0) and dist[-1] < 0.12
    slope = np.polyfit(np.log(ns), np.log(dist), 1)[0]
    # Empirical measures of n i.i.d. points on a 2-manifold: W2 ~ n^{-1/2} up to log factors
    # (measured slope -0.43); [-0.7, -0.3] allows the logs and 3-seed averaging noise.
    assert -0.7 < slope < -0.3


def test_negative_density_weights():
    rng = np.random.default_rng(5)
    nodes = sphere_points(rng, 50)
    dw = np.full(50, 1.0 / 50)
    dw[:3] -= 0.03  # three negative entries, negative mass 3 * (0.03 - 0.02) = 0.03
    dw[3:6] += 0.03
    X = sphere_points(rng, 40)
    with pytest.raises(ValueError, match=r"negative mass 3\.0+e-02"):
        w2_particles_density(X, nodes, dw)
    res = w2_particles_density(X, nodes, dw, negative="drop")
    # The mass bookkeeping is a sum of 3 float64 terms: exact to ~1e-16.
    assert abs(res.negative_mass - 0.03) < 1e-14 and res.info["n_dropped"] == 3
    assert res.distance > 0
    with pytest.raises(ValueError, match="density_weights must be 50 finite weights summing to 1"):
        w2_particles_density(X, nodes, dw * 1.01, negative="drop")


def test_auto_choice_is_recorded():
    rng = np.random.default_rng(6)
    X, Y = sphere_points(rng, 30), sphere_points(rng, 40)
    small = w2_distance(X, Y)
    assert small.method == "exact" and "max_exact" in small.info["auto"]
    big = w2_distance(X, Y, max_exact=100, seed=1)
    assert big.method == "sliced" and big.info["seed"] == 1 and "max_exact" in big.info["auto"]


def test_emd_non_convergence_raises():
    rng = np.random.default_rng(7)
    X, Y = sphere_points(rng, 300), sphere_points(rng, 300)
    # 10 network-simplex pivots cannot solve a 300 x 300 problem (~1e4 are needed): the
    # result code is 3 and the function must refuse rather than return the partial cost.
    with pytest.raises(RuntimeError, match="result code 3"):
        w2_distance(X, Y, method="exact", max_iter=10)


def test_input_checks():
    rng = np.random.default_rng(8)
    X, Y = sphere_points(rng, 10), sphere_points(rng, 12)
    with pytest.raises(ValueError, match="metric must be one of"):
        w2_distance(X, Y, metric="euclid")
    with pytest.raises(ValueError, match="method must be one of"):
        w2_distance(X, Y, method="fast")
    # |y|^2 - 1 = 2e-7 (core.validate.unit_vectors, tolerance 1e-8 on |y|^2 - 1)
    with pytest.raises(ValueError, match=r"Y must be unit vectors .*received max deviation 2e-07"):
        w2_distance(X, Y * (1 + 1e-7))
    with pytest.raises(ValueError, match="X must be finite unit vectors"):
        w2_distance(np.where(np.arange(30).reshape(10, 3) == 4, np.nan, X), Y)
    with pytest.raises(ValueError, match=r"Y must have shape \(n, 3\), n >= 1; received shape \(2, 4\)"):
        w2_distance(X, np.eye(4)[:2])
    with pytest.raises(ValueError, match=r"a must be 10 finite weights .*received shape \(9,\)"):
        w2_distance(X, Y, np.full(9, 1 / 9))
    with pytest.raises(ValueError, match=r"b must be 12 finite weights >= 0 summing to 1 .*sum 1\.2"):
        w2_distance(X, Y, None, np.full(12, 0.1))
    with pytest.raises(ValueError, match=r"a must be 10 finite weights >= 0 .*min -0\.1"):
        w2_distance(X, Y, np.r_[-0.1, np.full(9, 1.1 / 9)])
    with pytest.raises(ValueError, match="negative must be one of"):
        w2_particles_density(X, Y, np.full(12, 1 / 12), negative="clip")
