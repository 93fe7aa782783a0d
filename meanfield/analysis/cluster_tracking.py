r"""Cluster tracking along trajectories: identities, masses, centres and merge events over time.

Two kinds of saved states (numpy and scipy only; no model is needed):

* **particles** -- tokens ``X`` (T, n, d) on the sphere (:func:`track_particle_clusters`).  A frame's
  clusters are the connected components of the graph linking tokens with ``<x_i, x_j> >= threshold`` (the
  graph of :func:`meanfield.analysis.clustering.clustering`), kept when their mass (token weight) is at least
  ``min_mass``; the tokens of lighter components are *unclustered* (label ``-1``).  Clusters of consecutive
  frames are matched **by token membership**.
* **densities** -- values of a density on quadrature nodes (T, m) of the sphere or circle
  (:func:`track_density_peaks`; coefficients of a :class:`meanfield.SphereGrid` through
  :func:`sphere_grid_frames`).  A frame's clusters are the local maxima of the density above a threshold
  (:func:`density_peaks`: a node above its neighbours in the convex hull of the nodes), each with the mass of its
  Voronoi cell (nodes assigned to the nearest peak), so the masses sum to the total mass to round-off.
  Peaks of consecutive frames are matched **by nearest centre**.

Matching rule (both kinds).  Each cluster ``c`` of frame ``t`` has at most one *successor* in frame
``t + 1``: for particles the cluster holding more than half of ``c``'s weight (``inherit`` of it), for
densities the nearest peak (within ``max_jump`` radians if given).  A cluster of frame ``t + 1`` with one
predecessor keeps its identity; with none it is *born* (a new identity); with two or more it is a **merge**:
a new identity, and a :class:`MergeEvent` (frame, time, the parents' identities and masses).  A cluster with
no successor *ends* (dissolved below ``min_mass``, split evenly, or its peak vanished).

The result, :class:`ClusterTrack`, holds everything by identity: masses and centres per frame (NaN where
the identity is not alive), birth and end frames, the merges and (particles) the label of every token in
every frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import ConvexHull, QhullError

from ..core import cost, validate
from .clustering import _merge_labels

__all__ = ["ClusterTrack", "MergeEvent", "track_particle_clusters", "density_peaks", "track_density_peaks",
           "sphere_grid_frames", "TRACKING_UNIT_TOL"]

TRACKING_UNIT_TOL = 1e-8
"""Largest ``| |x|^2 - 1 |`` of tokens and nodes accepted (never renormalized silently)."""

_PAIRS_PER_S = 2e8            # measured rate of the chunked Gram products, d = 3 (the cost guard's estimate)
_CHUNK_ELEMS = 2**22          # inner products formed at once (32 MiB)


@dataclass(frozen=True)
class MergeEvent:
    """Two or more clusters of frame ``frame - 1`` whose successor is one cluster ``child`` of ``frame``.

    ``time`` is ``times[frame]`` (the first frame where the clusters are one; the merge happened in
    ``(times[frame - 1], times[frame]]``), ``parents`` their identities (ascending), ``parent_masses`` their
    masses at ``frame - 1``, ``child_mass`` the child's mass at ``frame``.

    Parameters
    ----------
    frame : int
    time : float
    parents : tuple of int
    child : int
    parent_masses : tuple of float
    child_mass : float
    """

    frame: int
    time: float
    parents: tuple
    child: int
    parent_masses: tuple
    child_mass: float


@dataclass(frozen=True)
class ClusterTrack:
    """Clusters over time (:func:`track_particle_clusters`, :func:`track_density_peaks`).

    Attributes
    ----------
    kind : {"particles", "density"}
    times : ndarray (T,)
    mass : ndarray (T, K)
        Mass of identity ``k`` (0..K-1) at frame ``t``; NaN where it is not alive.
    centre : ndarray (T, K, d)
        Its centre: the normalized weighted mean of its tokens (particles), the peak node (density); NaN
        where not alive.
    born, ended : ndarray (K,) of int
        First frame alive, and the first frame after the last one alive (``T`` if alive at the end).
    merges : tuple of MergeEvent
        In order of frame.
    labels : ndarray (T, n) of int or None
        Particles: the identity of each token per frame, ``-1`` for unclustered tokens.
    unclustered_mass : ndarray (T,)
        Particles: the weight outside every cluster; density: the total mass minus the clusters' masses
        (round-off: the Voronoi cells partition the nodes).
    total_mass : ndarray (T,)
        Particles: the sum of the weights (1); density: ``sum_j w_j f_j`` per frame.
    params : dict
        The arguments that defined the clusters (threshold, min_mass, ...).
    """

    kind: str
    times: np.ndarray
    mass: np.ndarray
    centre: np.ndarray
    born: np.ndarray
    ended: np.ndarray
    merges: tuple
    labels: np.ndarray | None
    unclustered_mass: np.ndarray
    total_mass: np.ndarray
    params: dict = field(default_factory=dict)

    @property
    def n_clusters(self) -> np.ndarray:
        """Number of clusters alive per frame, shape (T,)."""
        return np.sum(np.isfinite(self.mass), axis=1)

    @property
    def n_ids(self) -> int:
        """Number of identities ``K`` ever alive (the columns of ``mass``)."""
        return int(self.mass.shape[1])

    @property
    def merge_times(self) -> np.ndarray:
        """``times[frame]`` of every merge event, in order, shape (len(merges),)."""
        return np.array([e.time for e in self.merges], dtype=float)

    def alive(self, frame) -> np.ndarray:
        """Identities alive at ``frame``.

        Parameters
        ----------
        frame : int
            A frame index (negative counts from the end).

        Returns
        -------
        ndarray of int

        Raises
        ------
        ValueError
            ``frame`` not an integer index of ``times``.
        """
        frame = validate.integer("frame", frame, -len(self.times), len(self.times) - 1)
        return np.flatnonzero(np.isfinite(self.mass[frame]))

    def first_merge(self, after=None):
        """The first :class:`MergeEvent` (at a time ``> after`` if given), or None.

        Parameters
        ----------
        after : float, optional
            Only merges at later times.

        Returns
        -------
        MergeEvent or None

        Raises
        ------
        ValueError
            ``after`` not a real number (NaN refused).
        """
        after = -np.inf if after is None else validate.real("after", after, finite=False)
        return next((e for e in self.merges if e.time > after), None)

    def summary(self) -> dict:
        """A JSON-ready description: sizes, parameters, clusters per frame and the merges.

        Returns
        -------
        dict
            ``kind``, ``frames``, ``identities``, ``params``, ``times``, ``n_clusters`` and ``merges`` (a list of
            dicts), plain Python values.
        """
        return {"kind": self.kind, "frames": int(len(self.times)), "identities": self.n_ids,
                "params": dict(self.params), "times": self.times.tolist(), "n_clusters": self.n_clusters.tolist(),
                "merges": [{"frame": e.frame, "time": e.time, "parents": list(e.parents), "child": e.child,
                            "parent_masses": list(e.parent_masses), "child_mass": e.child_mass}
                           for e in self.merges]}


# ------------------------------------------------------------------------------------------- arguments
def _times(times, T):
    if times is None:
        return np.arange(T, dtype=float)
    t = validate.real_array("times", times)
    if t.shape != (T,):
        raise ValueError(f"times must have shape (T,) = ({T},), one time per frame; received shape {t.shape}")
    if T > 1 and not np.all(np.diff(t) > 0):
        raise ValueError("times must be strictly increasing; received a non-increasing step at index "
                         f"{int(np.flatnonzero(np.diff(t) <= 0)[0])}")
    return t


def _frames(name, X):
    X = validate.real_array(name, X)
    if X.ndim != 3 or X.shape[0] < 1 or X.shape[1] < 1 or X.shape[2] < 2:
        raise ValueError(f"{name} must have shape (T, n, d) with T >= 1, n >= 1, d >= 2 (tokens per frame); "
                         f"received shape {X.shape}")
    return X


def _unit_frames(name, X, tol):
    dev = float(np.abs(np.einsum("tnd,tnd->tn", X, X) - 1).max())
    if dev > tol:
        raise ValueError(f"{name} rows must be unit vectors (| |x|^2 - 1 | <= {tol:g}); received max deviation "
                         f"{dev:.3g}")


# ------------------------------------------------------------------------------------------- particles
def _components(X, threshold):
    """Component label per token of the graph ``<x_i, x_j> >= threshold`` (row chunks of the Gram matrix)."""
    n = X.shape[0]
    rows = max(1, _CHUNK_ELEMS // n)
    labels = np.arange(n)
    for i in range(0, n, rows):
        G = X[i:i + rows] @ X.T
        r, c = np.nonzero(G >= threshold)
        if np.any(labels[r + i] != labels[c]):
            labels = _merge_labels(labels, r + i, labels[c])
    return np.unique(labels, return_inverse=True)[1]


class _Book:
    """Identities, their masses and centres per frame, births, ends and merges (both kinds)."""

    def __init__(self, T, d):
        self.T, self.d = T, d
        self.mass, self.centre, self.born, self.ended, self.merges = [], [], [], [], []

    def new(self, frame):
        self.mass.append({})
        self.centre.append({})
        self.born.append(frame)
        self.ended.append(self.T)
        return len(self.born) - 1

    def first(self, masses, centres):
        """Identities of the clusters of frame 0 (all born there), with their masses and centres."""
        ids = np.array([self.new(0) for _ in range(len(masses))], dtype=np.intp)
        for c, k in enumerate(ids):
            self.mass[k][0], self.centre[k][0] = float(masses[c]), centres[c]
        return ids

    def link(self, frame, pred_ids, succ, n_new, masses, centres, times, prev_mass):
        """Identities of the ``n_new`` clusters of ``frame`` given ``succ[j]`` (successor of the j-th old
        cluster, -1 for none) and the old identities ``pred_ids``; record masses, centres, merges, ends."""
        preds = [[] for _ in range(n_new)]
        for j, s in enumerate(succ):
            if s >= 0:
                preds[s].append(pred_ids[j])
            else:
                self.ended[pred_ids[j]] = frame
        ids = np.empty(n_new, dtype=np.intp)
        for c in range(n_new):
            p = sorted(preds[c])
            if len(p) == 1:
                ids[c] = p[0]
                continue
            ids[c] = self.new(frame)
            if len(p) >= 2:
                for q in p:
                    self.ended[q] = frame
                self.merges.append(MergeEvent(frame, float(times[frame]), tuple(int(q) for q in p), int(ids[c]),
                                              tuple(float(prev_mass[q]) for q in p), float(masses[c])))
        for c in range(n_new):
            self.mass[ids[c]][frame] = float(masses[c])
            self.centre[ids[c]][frame] = centres[c]
        return ids

    def arrays(self):
        K = len(self.born)
        cost.guard(f"cluster tracks of {K} identities over {self.T} frames in d = {self.d}",
                   bytes=8.0 * self.T * K * (self.d + 1), detail="(T, K) masses and (T, K, d) centres, float64",
                   fix="a larger min_mass (fewer identities) or fewer frames")
        mass = np.full((self.T, K), np.nan)
        centre = np.full((self.T, K, self.d), np.nan)
        for k in range(K):
            for f, m in self.mass[k].items():
                mass[f, k] = m
                centre[f, k] = self.centre[k][f]
        return mass, centre, np.array(self.born, dtype=np.intp), np.array(self.ended, dtype=np.intp)


def _successors(prev_lab, lab, w, prev_mass, n_new, inherit):
    """Per old cluster, the new cluster holding more than ``inherit`` of its weight (-1: none).  The
    overlaps are summed over the (old, new) pairs that occur (sparse: singletons of many tokens stay O(n))."""
    succ = np.full(prev_mass.size, -1, dtype=np.intp)
    both = (prev_lab >= 0) & (lab >= 0)
    if not both.any():
        return succ
    key = prev_lab[both].astype(np.int64) * n_new + lab[both]
    pairs, inv = np.unique(key, return_inverse=True)
    overlap = np.bincount(inv, weights=w[both])
    old, new = pairs // n_new, pairs % n_new
    ok = overlap > inherit * prev_mass[old]               # inherit >= 1/2: at most one pair per old cluster
    succ[old[ok]] = new[ok]
    return succ


def track_particle_clusters(X, times=None, w=None, threshold=0.99, min_mass=0.0, inherit=0.5) -> ClusterTrack:
    """Clusters of tokens along a trajectory, matched between frames by token membership.

    Parameters
    ----------
    X : array (T, n, d)
        Unit tokens per frame (``| |x|^2 - 1 | <= TRACKING_UNIT_TOL``, never renormalized).
    times : array (T,), optional
        Strictly increasing frame times (default ``0, 1, ..., T - 1``).
    w : array (n,), optional
        Token weights (non-negative, summing to 1; default uniform).
    threshold : float in [-1, 1]
        Tokens with ``<x_i, x_j> >= threshold`` are linked; a cluster is a connected component.
    min_mass : float in [0, 1)
        Components lighter than this are not clusters (their tokens are unclustered, label -1).
    inherit : float in [0.5, 1)
        A cluster's successor is the next frame's cluster holding more than ``inherit`` of its weight (>= 1/2:
        at most one successor).

    Returns
    -------
    ClusterTrack
        ``kind="particles"``; masses are sums of weights, centres normalized weighted means of the members.

    Notes
    -----
    Cost: ``T n^2`` inner products (row chunks of at most ``2**22``), refused by the cost guard above its
    time limit; memory ``O(T n)`` for the labels plus ``O(T K d)`` for ``K`` identities (guarded).

    Raises
    ------
    ValueError
        ``X`` not real and finite of shape (T, n, d) or rows not unit vectors; ``times`` not strictly
        increasing of shape (T,); ``w`` not probability weights; ``threshold``, ``min_mass`` or ``inherit``
        out of range; or work above the memory or time limit.
    """
    X = _frames("X", X)
    T, n, d = X.shape
    t = _times(times, T)
    w = np.full(n, 1.0 / n) if w is None else validate.probability_weights("w", w, n)
    threshold = validate.real("threshold", threshold, -1, 1, what="a finite number in [-1, 1]")
    min_mass = validate.real("min_mass", min_mass, 0, 1, hi_open=True, what="a number in [0, 1)")
    inherit = validate.real("inherit", inherit, 0.5, 1, hi_open=True, what="a number in [0.5, 1)")
    pairs = float(T) * n * n
    cost.guard(f"track_particle_clusters of T = {T} frames of n = {n} tokens", bytes=16.0 * T * n + 8.0 * _CHUNK_ELEMS,
               seconds=pairs / _PAIRS_PER_S, detail=f"{pairs:.3g} inner products at {_PAIRS_PER_S:.0e}/s, (T, n) labels",
               fix="fewer frames (subsample times) or fewer tokens")
    _unit_frames("X", X, TRACKING_UNIT_TOL)
    book = _Book(T, d)
    labels = np.full((T, n), -1, dtype=np.intp)
    unclustered = np.empty(T)
    prev_ids = prev_lab = None
    prev_mass = {}
    for f in range(T):
        comp = _components(X[f], threshold)
        cm = np.bincount(comp, weights=w)
        keep = np.flatnonzero(cm >= min_mass) if min_mass > 0 else np.arange(cm.size)
        local = np.full(cm.size, -1, dtype=np.intp)
        local[keep] = np.arange(keep.size)
        lab = local[comp]                                     # cluster index in this frame, -1 unclustered
        inside = lab >= 0
        masses = np.bincount(lab[inside], weights=w[inside], minlength=keep.size)
        sums = np.zeros((keep.size, d))
        np.add.at(sums, lab[inside], w[inside, None] * X[f][inside])
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            centres = np.where(norms > 0, sums / norms, np.nan)
        if prev_ids is None:
            ids = book.first(masses, centres)
        else:
            succ = np.full(prev_ids.size, -1, dtype=np.intp)
            if prev_ids.size and keep.size:
                succ = _successors(prev_lab, lab, w, np.array([prev_mass[k] for k in prev_ids]), keep.size,
                                   inherit)
            ids = book.link(f, prev_ids, succ, keep.size, masses, centres, t, prev_mass)
        labels[f] = np.where(inside, ids[np.maximum(lab, 0)], -1) if ids.size else -1
        unclustered[f] = float(w[~inside].sum())
        prev_ids, prev_lab = ids, lab
        prev_mass = {int(k): float(m) for k, m in zip(ids, masses)}
    mass, centre, born, ended = book.arrays()
    return ClusterTrack("particles", t, mass, centre, born, ended, tuple(book.merges), labels, unclustered,
                        np.full(T, float(w.sum())),
                        {"threshold": threshold, "min_mass": min_mass, "inherit": inherit, "n": n, "d": d})


# ------------------------------------------------------------------------------------------- densities
def _nodes(nodes, weights):
    P = validate.real_array("nodes", nodes)
    if P.ndim != 2 or P.shape[0] < 2 or P.shape[1] < 2:
        raise ValueError(f"nodes must have shape (m, d) with m >= 2, d >= 2 (quadrature nodes); received shape "
                         f"{P.shape}")
    dev = float(np.abs(np.einsum("md,md->m", P, P) - 1).max())
    if dev > TRACKING_UNIT_TOL:
        raise ValueError(f"nodes must be unit vectors (| |x|^2 - 1 | <= {TRACKING_UNIT_TOL:g}); received max "
                         f"deviation {dev:.3g}")
    m = P.shape[0]
    wq = validate.real_array("weights", weights)
    if wq.shape != (m,) or np.any(wq <= 0):
        raise ValueError(f"weights must be {m} positive quadrature weights, one per node (shape ({m},)); received "
                         f"shape {wq.shape}" + ("" if wq.shape != (m,) else f", min {wq.min():.3g}"))
    return P, wq


def _edges(P):
    """Neighbour pairs of the nodes: the edges of their convex hull (the spherical Delaunay triangulation on
    S^2, the polygon on the circle), both directions, shape (2, e)."""
    m, d = P.shape
    cost.guard(f"density peaks on m = {m} nodes in d = {d}", bytes=8.0 * m * d * (d + 1) * 4,
               seconds=2e-6 * m * 2 ** max(d - 3, 0), detail="the convex hull of the nodes (Qhull)",
               fix="a coarser grid")
    try:
        simplices = ConvexHull(P).simplices
    except QhullError as err:
        raise ValueError(f"nodes must span the sphere (their convex hull gives the neighbours); Qhull refused "
                         f"them: {str(err).splitlines()[0]}") from None
    a = np.concatenate([simplices[:, [i, j]] for i in range(d) for j in range(d) if i != j])
    lone = np.setdiff1d(np.arange(m), simplices)
    if lone.size:     # a node off the hull (a duplicate) has no neighbour: it would be a peak by default
        raise ValueError(f"nodes must be distinct vertices of their convex hull (every node needs neighbours); "
                         f"received {lone.size} node(s) that are not, e.g. index {int(lone[0])} (a duplicate?)")
    return np.unique(a, axis=0).T


def _peaks(f, P, wq, edges, threshold):
    """Peak node indices (by decreasing height), Voronoi masses, cell per node, total mass."""
    i, j = edges
    # a peak is above every neighbour; ties go to the lower node index (one peak per flat pair)
    dominated = (f[j] > f[i]) | ((f[j] == f[i]) & (j < i))
    above = np.bincount(i[dominated], minlength=f.size) == 0
    thr = float(wq @ f / wq.sum()) if threshold is None else threshold
    pk = np.flatnonzero(above & (f > thr))
    pk = pk[np.argsort(-f[pk], kind="stable")]
    total = float(wq @ f)
    if pk.size == 0:
        return pk, np.zeros(0), np.full(f.size, -1, dtype=np.intp), total
    cell = np.empty(f.size, dtype=np.intp)
    step = max(1, _CHUNK_ELEMS // pk.size)
    for i in range(0, f.size, step):
        cell[i:i + step] = np.argmax(P[i:i + step] @ P[pk].T, axis=1)
    return pk, np.bincount(cell, weights=wq * f, minlength=pk.size), cell, total


def density_peaks(values, nodes, weights, threshold=None) -> dict:
    """Local maxima of a density on quadrature nodes and the masses of their Voronoi cells.

    Parameters
    ----------
    values : array (m,)
        The density at the nodes.
    nodes : array (m, d)
        Unit quadrature nodes (e.g. ``SphereGrid.nodes.reshape(-1, 3)``, or ``(cos t, sin t)`` on the circle).
    weights : array (m,)
        Positive quadrature weights (mass = ``sum_j weights_j values_j``).
    threshold : float, optional
        Peaks must exceed it (default: the mean value ``sum w f / sum w``, i.e. the uniform level).

    A peak is a node above each of its neighbours, the nodes it shares an edge with in the convex hull of the
    nodes (on S^2 the spherical Delaunay triangulation, on the circle the two adjacent nodes; ties: the
    lower node index wins).  A fixed number of nearest nodes is not enough: near the poles of a
    latitude-longitude grid the nearest nodes all lie on one ring.

    Returns
    -------
    dict
        ``index`` (p,) peak nodes by decreasing height, ``centres`` (p, d), ``heights`` (p,), ``masses`` (p,)
        (Voronoi cells: every node to its nearest peak), ``cell`` (m,) the peak of each node (-1 if none),
        ``total_mass``.

    Raises
    ------
    ValueError
        ``nodes`` not unit vectors or ``weights`` not positive of matching length, ``values`` not finite with
        one per node, or a non-finite ``threshold``.
    """
    P, wq = _nodes(nodes, weights)
    f = validate.real_array("values", values)
    if f.shape != (P.shape[0],):
        raise ValueError(f"values must have shape (m,) = ({P.shape[0]},), one per node; received shape {f.shape}")
    if threshold is not None:
        threshold = validate.real("threshold", threshold)
    pk, masses, cell, total = _peaks(f, P, wq, _edges(P), threshold)
    return {"index": pk, "centres": P[pk], "heights": f[pk], "masses": masses, "cell": cell, "total_mass": total}


def track_density_peaks(values, nodes, weights, times=None, threshold=None, max_jump=None) -> ClusterTrack:
    """Density peaks along a trajectory (:func:`density_peaks` per frame), matched by nearest centre.

    Parameters
    ----------
    values : array (T, m)
        The density at the nodes, per frame.
    nodes, weights, threshold
        As for :func:`density_peaks` (the same nodes for every frame).
    times : array (T,), optional
        Strictly increasing frame times (default ``0, 1, ..., T - 1``).
    max_jump : float in (0, pi], optional
        A peak's successor is the nearest peak of the next frame, only if at most this far (radians).

    Returns
    -------
    ClusterTrack
        ``kind="density"``, ``labels=None``; centres are peak nodes (grid resolution).

    Raises
    ------
    ValueError
        ``nodes`` / ``weights`` refused as by :func:`density_peaks`, ``values`` not finite of shape (T, m),
        ``times`` not strictly increasing of shape (T,), a non-finite ``threshold``, or ``max_jump`` outside
        ``(0, pi]``.
    """
    P, wq = _nodes(nodes, weights)
    F = validate.real_array("values", values)
    if F.ndim != 2 or F.shape[1] != P.shape[0] or F.shape[0] < 1:
        raise ValueError(f"values must have shape (T, m) = (T, {P.shape[0]}), one row per frame; received shape "
                         f"{F.shape}")
    T = F.shape[0]
    t = _times(times, T)
    if threshold is not None:
        threshold = validate.real("threshold", threshold)
    if max_jump is not None:
        max_jump = validate.real("max_jump", max_jump, 0, np.pi, lo_open=True, what="an angle in (0, pi]")
    nb = _edges(P)
    book = _Book(T, P.shape[1])
    unclustered, total_mass = np.empty(T), np.empty(T)
    prev_ids, prev_c, prev_mass = None, None, {}
    for f in range(T):
        pk, masses, _, total = _peaks(F[f], P, wq, nb, threshold)
        centres = P[pk]
        if prev_ids is None:
            ids = book.first(masses, centres)
        else:
            succ = np.full(prev_ids.size, -1, dtype=np.intp)
            if prev_ids.size and pk.size:
                cos = prev_c @ centres.T
                succ = cos.argmax(axis=1)
                if max_jump is not None:
                    far = np.arccos(np.clip(cos[np.arange(prev_ids.size), succ], -1, 1)) > max_jump
                    succ[far] = -1
            ids = book.link(f, prev_ids, succ, pk.size, masses, centres, t, prev_mass)
        unclustered[f], total_mass[f] = total - float(masses.sum()), total
        prev_ids, prev_c = ids, centres
        prev_mass = {int(i): float(m) for i, m in zip(ids, masses)}
    mass, centre, born, ended = book.arrays()
    return ClusterTrack("density", t, mass, centre, born, ended, tuple(book.merges), None, unclustered, total_mass,
                        {"threshold": threshold, "max_jump": max_jump, "m": P.shape[0]})


def sphere_grid_frames(grid, rho_lm) -> tuple:
    """``(values (T, m), nodes (m, 3), weights (m,))`` of spherical-harmonic coefficients ``rho_lm`` (T, nalm)
    (or one frame (nalm,)) on a :class:`meanfield.SphereGrid`, for :func:`track_density_peaks`.

    Parameters
    ----------
    grid : SphereGrid
        The grid.
    rho_lm : array_like, shape (T, nalm) or (nalm,)
        Coefficients per frame.

    Returns
    -------
    values : ndarray, shape (T, m)
    nodes : ndarray, shape (m, 3)
    weights : ndarray, shape (m,)

    Raises
    ------
    ValueError
        ``grid`` not a SphereGrid, ``rho_lm`` not finite coefficients of the grid's ``nalm``, or values above
        the memory limit.
    """
    from ..core.sphere import SphereGrid

    if not isinstance(grid, SphereGrid):
        raise ValueError(f"grid must be a meanfield.SphereGrid; received {type(grid).__name__}")
    nd = np.ndim(rho_lm) if not isinstance(rho_lm, (str, bytes)) else 0
    if nd not in (1, 2):
        raise ValueError(f"rho_lm must have shape (T, nalm) or (nalm,) with nalm = {grid.nalm} (the grid's "
                         f"coefficients); received {type(rho_lm).__name__} with {nd} dimensions")
    shape = (grid.nalm,) if nd == 1 else (np.shape(rho_lm)[0], grid.nalm)
    a = validate.complex_array("rho_lm", rho_lm, shape)
    a = a[None] if a.ndim == 1 else a
    cost.guard(f"sphere_grid_frames of {a.shape[0]} frames on a grid of {grid.nodes[..., 0].size} nodes",
               bytes=8.0 * a.shape[0] * grid.nodes[..., 0].size, detail="(T, m) float64 values",
               fix="fewer frames or a coarser grid")
    values = np.stack([np.asarray(grid.synthesis(c)).real.ravel() for c in a])
    return values, grid.nodes.reshape(-1, 3), np.asarray(grid.weights, float).ravel()
