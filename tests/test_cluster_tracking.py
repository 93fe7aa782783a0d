"""Cluster tracking along trajectories (meanfield.analysis.cluster_tracking)."""

import numpy as np
import pytest

import meanfield as mf
from meanfield.analysis import cluster_tracking as ct


def _cap(centre_angle, n, spread, rng, z=0.0):
    """n unit tokens near the point at longitude ``centre_angle`` (latitude z), jittered by ``spread`` radians."""
    th = centre_angle + spread * rng.standard_normal(n)
    ph = z + spread * rng.standard_normal(n)
    return np.stack([np.cos(th) * np.cos(ph), np.sin(th) * np.cos(ph), np.sin(ph)], axis=1)


def _merging(T=60, n=30, spread=1e-4, seed=0, third=True):
    """Clusters A, B at longitudes +-a(t), a(t) = 0.4 (1 - t) on t in [0, 1]; C fixed at the pole (never merges).
    The jitter of each token is fixed (the clusters translate rigidly)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, T)
    jit = spread * rng.standard_normal((3 * n, 2))
    X = []
    for tt in t:
        a = 0.4 * (1 - tt)
        th = np.concatenate([np.full(n, a), np.full(n, -a), np.full(n, 0.0)]) + jit[:, 0]
        ph = np.concatenate([np.zeros(2 * n), np.full(n, 1.2)]) + jit[:, 1]
        P = np.stack([np.cos(th) * np.cos(ph), np.sin(th) * np.cos(ph), np.sin(ph)], axis=1)
        X.append(P if third else P[:2 * n])
    return t, np.array(X)


def test_merge_time_within_one_frame():
    t, X = _merging()
    thr = 0.995
    tr = ct.track_particle_clusters(X, t, threshold=thr)
    # the two centres are one link apart when 2 a(t) = arccos(thr): t* = 1 - arccos(thr) / 0.8 (the jitter, 1e-4
    # rad, moves it by ~1e-4 / 0.4 in t, far below one frame dt = 1/59)
    t_star = 1 - np.arccos(thr) / 0.8
    assert len(tr.merges) == 1
    e = tr.merges[0]
    dt = t[1] - t[0]
    assert t_star <= e.time <= t_star + dt + 1e-12          # first frame at or after t*: within one frame
    assert e.parents == (0, 1) and e.child == 3             # A and B (ids 0, 1) merged; C (id 2) is untouched
    # masses of A, B and C are 1/3 each to round-off until the merge; the child holds 2/3
    assert np.allclose(e.parent_masses, [1 / 3, 1 / 3], atol=1e-15) and abs(e.child_mass - 2 / 3) < 1e-15
    assert np.all(tr.n_clusters[:e.frame] == 3) and np.all(tr.n_clusters[e.frame:] == 2)
    assert np.all(np.isfinite(tr.mass[:, 2]))               # C is alive throughout, one identity
    assert tr.born.tolist() == [0, 0, 0, e.frame] and tr.ended.tolist() == [e.frame, e.frame, len(t), len(t)]
    # centres: C's is the normalized mean of its tokens; the child's lies on the equator at longitude ~0
    assert np.allclose(tr.centre[-1, 3], [1, 0, 0], atol=1e-3)
    assert tr.first_merge() is e and tr.first_merge(after=e.time) is None


def test_masses_conserved_to_round_off():
    t, X = _merging(seed=3)
    rng = np.random.default_rng(1)
    w = rng.random(X.shape[1])
    w /= w.sum()
    for min_mass in (0.0, 0.2, 0.5):
        tr = ct.track_particle_clusters(X, t, w=w, threshold=0.995, min_mass=min_mass)
        total = np.nansum(tr.mass, axis=1) + tr.unclustered_mass
        # a sum of n = 90 weights in two orders: |error| <= n eps ~ 2e-14
        assert np.abs(total - 1).max() < 1e-13
        # labels carry the same masses as the per-identity table
        for f in (0, len(t) - 1):
            for k in tr.alive(f):
                assert abs(w[tr.labels[f] == k].sum() - tr.mass[f, k]) < 1e-14
    # min_mass = 0.5: before the merge no cluster is heavy enough (1/3 each); after, the pair (about 2/3)
    # is born as a cluster (a birth, not a merge: its parents were not clusters)
    tr = ct.track_particle_clusters(X, t, threshold=0.995, min_mass=0.5)
    assert tr.merges == () and tr.n_clusters[0] == 0 and tr.n_clusters[-1] == 1


def test_uniform_tokens_are_singletons_and_identities_persist():
    X = mf.initial.uniform_sphere(50, 3, seed=2)
    tr = ct.track_particle_clusters(np.stack([X, X]), threshold=1.0)
    # threshold 1: only coincident tokens link: 50 singletons, the same identities in both frames
    assert tr.n_ids == 50 and tr.merges == () and np.array_equal(tr.labels[0], tr.labels[1])


def test_density_peaks_of_two_vmf_bumps_at_their_centres():
    grid = mf.SphereGrid(48)
    P, wq = grid.nodes.reshape(-1, 3), grid.weights.ravel()
    mu = np.array([[0.3, 0.5, 0.81], [-0.6, 0.2, -0.5]])
    mu /= np.linalg.norm(mu, axis=1, keepdims=True)
    kappa = 20.0
    f = sum(np.exp(kappa * (P @ m - 1)) for m in mu)
    r = ct.density_peaks(f, P, wq)
    assert len(r["index"]) == 2
    # each peak is the grid node nearest to a centre (up to the other bump's tail, exp(-20 (1 - cos 2.3)) ~ 1e-16):
    # within the grid's resolution, the largest distance of a point to its nearest node (~ pi / nlat)
    nlat = grid.nodes.shape[0]
    ang = np.arccos(np.clip(np.sort(r["centres"] @ mu.T, axis=None)[-2:], -1, 1))
    assert np.all(ang <= np.pi / nlat)
    # Voronoi masses: partition of the quadrature sum, to round-off; each ~ the bump's own mass 2 pi (1 - e^-2k)/k
    assert abs(r["masses"].sum() - wq @ f) < 1e-12 * (wq @ f)
    assert np.allclose(np.sort(r["masses"]), 2 * np.pi / kappa * (1 - np.exp(-2 * kappa)), rtol=1e-6)


def test_density_peaks_merge_on_the_circle_within_one_frame():
    # f(theta) = exp(k cos(theta - a)) + exp(k cos(theta + a)) has two maxima iff k sin^2 a > cos a
    m, kappa = 20000, 8.0
    th = 2 * np.pi * np.arange(m) / m
    P, wq = np.stack([np.cos(th), np.sin(th)], axis=1), np.full(m, 2 * np.pi / m)
    a = np.linspace(0.8, 0.05, 76)
    F = np.array([np.exp(kappa * np.cos(th - s)) + np.exp(kappa * np.cos(th + s)) for s in a])
    tr = ct.track_density_peaks(F, P, wq, times=np.arange(a.size, dtype=float), threshold=0.0)
    from scipy.optimize import brentq

    a_star = brentq(lambda s: kappa * np.sin(s) ** 2 - np.cos(s), 0.05, 0.8)
    frame_star = np.flatnonzero(a < a_star)[0]        # the first frame with one maximum
    assert len(tr.merges) == 1
    # the grid (2 pi / 20000 = 3e-4 rad) resolves the two maxima up to a - a* ~ 1e-3 rad, far less than the
    # frame step in a (0.01): detected at the first one-maximum frame or one frame earlier
    assert frame_star - 1 <= tr.merges[0].frame <= frame_star
    # Voronoi masses sum to the quadrature mass per frame (round-off); the two halves are equal by symmetry up
    # to the peaks' rounding to nodes, which moves the cell boundary (at theta = 0) by at most one node: a mass
    # of f(0) 2 pi / m per node, two allowed
    assert np.abs(tr.unclustered_mass).max() < 1e-12 * tr.total_mass.max()
    assert abs(tr.mass[0, 0] - tr.mass[0, 1]) <= 2 * F[0, 0] * 2 * np.pi / m


def test_sphere_grid_frames_and_tracking_pde_coefficients():
    grid = mf.SphereGrid(16)
    P = grid.nodes.reshape(-1, 3)
    f = np.exp(6 * P[:, 2]).reshape(grid.nodes.shape[:2])
    a = grid.analysis(f)
    values, nodes, weights = ct.sphere_grid_frames(grid, np.stack([a, a]))
    tr = ct.track_density_peaks(values, nodes, weights)
    # one bump at the north pole, one identity for both frames, its centre the top ring (resolution pi / nlat)
    assert tr.n_ids == 1 and np.all(tr.n_clusters == 1)
    assert np.arccos(tr.centre[-1, 0, 2]) <= np.pi / grid.nodes.shape[0]


@pytest.mark.parametrize("kw, word", [
    (dict(X=np.zeros((3, 4))), "X"),
    (dict(X=2 * np.ones((2, 3, 3)) / np.sqrt(3)), "X"),
    (dict(times=[0.0, 0.0]), "times"),
    (dict(times=[0.0]), "times"),
    (dict(threshold=1.5), "threshold"),
    (dict(min_mass=1.0), "min_mass"),
    (dict(inherit=0.4), "inherit"),
    (dict(w=np.full(5, 0.5)), "w"),
])
def test_named_errors_particles(kw, word):
    X = np.stack([mf.initial.uniform_sphere(5, 3, seed=0)] * 2)
    args = dict(X=X, **{k: v for k, v in kw.items() if k != "X"})
    if "X" in kw:
        args["X"] = kw["X"]
    with pytest.raises(ValueError, match=word):
        ct.track_particle_clusters(**args)


def test_named_errors_density_and_cost_guard():
    P = mf.initial.uniform_sphere(20, 3, seed=0)
    w = np.full(20, 0.1)
    with pytest.raises(ValueError, match="weights"):
        ct.density_peaks(np.ones(20), P, -w)
    with pytest.raises(ValueError, match="nodes"):
        ct.density_peaks(np.ones(20), 2 * P, w)
    with pytest.raises(ValueError, match="values"):
        ct.density_peaks(np.ones(19), P, w)
    with pytest.raises(ValueError, match="nodes"):        # all on one great circle: no hull in 3-d
        ct.density_peaks(np.ones(20), np.c_[P[:, :2] / np.linalg.norm(P[:, :2], axis=1, keepdims=True),
                                           np.zeros(20)], w)
    with pytest.raises(ValueError, match="max_jump"):
        ct.track_density_peaks(np.ones((2, 20)), P, w, max_jump=0.0)
    with pytest.raises(ValueError, match="grid"):
        ct.sphere_grid_frames("grid", np.zeros(3))
    # 500 frames of 40000 tokens: 8e11 inner products, ~4000 s > the 1 h limit: refused before any work
    big = np.broadcast_to(mf.initial.uniform_sphere(40000, 3, seed=0), (500, 40000, 3))
    with pytest.raises(ValueError, match="track_particle_clusters"):
        ct.track_particle_clusters(big)


def test_duplicate_node_is_refused_not_a_peak():
    # a duplicated node is no vertex of the hull and had no neighbours: it was reported as a peak of its own
    # (a cosine bump on 64 circle nodes plus a copy of node 10 gave peaks [0, 64]); now a named error
    m = 64
    th = 2 * np.pi * np.arange(m) / m
    P = np.c_[np.cos(th), np.sin(th)]
    assert list(ct.density_peaks(np.cos(th), P, np.full(m, 1.0 / m))["index"]) == [0]
    with pytest.raises(ValueError, match="nodes must be distinct vertices"):
        ct.density_peaks(np.r_[np.cos(th), np.cos(th[10])], np.vstack([P, P[10:11]]), np.full(m + 1, 1.0 / (m + 1)))
