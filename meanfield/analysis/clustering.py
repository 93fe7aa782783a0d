r"""Clustering measures of unit tokens (:func:`clustering`): min / mean pairwise inner product and the
number of clusters at a threshold, by all ``n^2`` inner products or by a KD-tree and a grid of clique
cells (:func:`clustering`, ``method``).  numpy and scipy only; no model is needed.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from ..core import cost, validate

__all__ = ["clustering", "mean_inner", "CLUSTERING_METHODS", "CLUSTERING_TREE_MIN_N", "CLUSTERING_TREE_MAX_D",
           "CLUSTERING_DIRECT_MAX_N", "CLUSTERING_UNIT_TOL"]


def mean_inner(X) -> float:
    """``(|sum_i x_i|^2 - sum_i |x_i|^2) / (n (n - 1))``: the mean inner product over pairs ``i != j``, O(n).

    ``X`` (n, d), ``n >= 2``: finite unit rows (``| |x|^2 - 1 | <= 1e-8``, never renormalized), as for
    :func:`clustering`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Unit tokens, ``n >= 2``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``X`` not real and finite of shape (n, d) with ``n >= 2``, or rows not unit vectors.
    """
    return _mean_inner(validate.unit_vectors("X", X, min_rows=2, tol=CLUSTERING_UNIT_TOL))


def _mean_inner(X) -> float:
    n = X.shape[0]
    s = X.sum(axis=0)
    return float((s @ s - np.einsum("nd,nd->", X, X)) / (n * (n - 1)))


CLUSTERING_METHODS = ("auto", "direct", "tree")
CLUSTERING_TREE_MIN_N = 2048       # 'auto' takes the tree path from this n on (below both take < 15 ms, d = 3)
CLUSTERING_TREE_MAX_D = 12         # ... and only up to this d: uniform tokens, the tree / direct break-even
CLUSTERING_DIRECT_MAX_N = 200_000  # the direct path refuses larger n (4e10 inner products, minutes)
_DIRECT_PAIRS_PER_S = 2e8          # measured rate of the direct path, d = 3 (for the refusal's estimate)
_DIRECT_CHUNK_ELEMS = 2**24        # the direct path forms at most this many inner products at once (128 MiB)
_UNIT_TOL = 1e-12                  # tree path: rows of X must satisfy | |x|^2 - 1 | <= this
_SLACK = 1e-12                     # tree path: margin on squared radii, >> the round-off d*eps of |x-y|^2, <x,y>
_SMALL_PAIR = 256                  # tree path: neighbour cells with <= this many point pairs: all checked at once,
_MATMUL_PAIR = 16384               # ... else one by one (skipping joined cells), by a product up to this many pairs
_PAIR_BATCH = 2**20                # tree path: point pairs checked per vectorized batch (d <= 8) ...
_PAIR_ELEMS = 2**23                # ... and at most this many gathered coordinates per batch (64 MiB; was
                                   # 2**20 pairs in any d: 3 GiB of gathered tokens in d = 200)
_CELL_PAIR_BYTES = 128             # tree path: bytes held per candidate cell pair (the pairs, their filter, the
                                   # joined lists: measured 122 at 2e6 pairs, d = 200; gaps in batches)


CLUSTERING_UNIT_TOL = 1e-8
"""Largest ``| |x|^2 - 1 |`` :func:`clustering` accepts (tokens of spherical runs are unit to ~1e-15)."""


def clustering(X, threshold=0.99, chunk_rows=2048, method="auto") -> dict:
    """Clustering measures of unit tokens ``X`` (n, d).

    Returns ``min_inner`` and ``mean_inner`` (over pairs ``i != j``) and ``n_clusters``: the
    connected components of the graph linking tokens with ``<x_i, x_j> >= threshold``.

    Parameters
    ----------
    X : array (n, d), n >= 2, finite
    threshold : float in [-1, 1]
    chunk_rows : int >= 1
        Rows of the Gram matrix formed at once on the direct path (capped so that a chunk holds
        at most 2**24 inner products).
    method : {"auto", "direct", "tree"}
        ``"direct"`` forms all n^2 inner products in row chunks (the reference; O(n^2) time,
        O(n) memory beyond a chunk); it refuses ``n > CLUSTERING_DIRECT_MAX_N``.
        ``"tree"`` never forms them: ``mean_inner`` is exact from ``|sum_i x_i|^2`` (both
        paths), ``min_inner`` is the inner product of the farthest pair, found as the nearest
        neighbour of each antipode ``-x_i`` in a KD-tree, and the components come from cells of
        a grid small enough that each cell is a clique, joined when a pair of neighbouring
        cells holds a linked pair (each candidate pair checked by its inner product).  It needs
        unit rows (``| |x|^2 - 1 | <= 1e-12``) and ``threshold < 1 - 1e-12``.
        ``"auto"``: the tree path when ``n >= CLUSTERING_TREE_MIN_N`` (2048), ``d <=
        CLUSTERING_TREE_MAX_D`` (12) and the tree path applies, else the direct path (so the
        default run, n = 1000, keeps the reference numbers).  Measured (benchmarks/clustering.py,
        one thread), direct / tree time for uniform tokens at n = 1e4: ~20 in d = 3, 2.3 in d = 8,
        0.9 in d = 12, 0.4 in d = 16, 0.13 in d = 64 (at n = 3e4: 1.2 in d = 12, 1.0 in d = 16,
        0.26 in d = 24): in high d the cells hold single tokens and a KD-tree query visits most
        leaves.  Tight clusters favour the tree in every d (1.5x in d = 64).  At n = 1e6, d = 3 the
        tree path takes 2-4 s (uniform or three tight clusters) with ~160 MiB peak memory.
        Where the direct path would refuse (n > 2e5) and ``d > 12``, ask for ``method="tree"``
        or subsample ``X``.

    Notes
    -----
    Both paths give the same ``n_clusters`` except for pairs whose inner product lies within
    the round-off of the direct matrix product (~d eps) of ``threshold``, and ``min_inner`` to
    ~1e-15 (the same extreme pair, up to summation order and ``| |x|^2 - 1 |``).

    Returns
    -------
    dict
        ``min_inner`` (float), ``mean_inner`` (float) and ``n_clusters`` (int).

    Raises
    ------
    ValueError
        ``X`` not real and finite of shape (n, d) with ``n >= 2`` or rows not unit vectors (to
        :data:`CLUSTERING_UNIT_TOL`); ``threshold`` outside ``[-1, 1]``; an unknown ``method``; ``chunk_rows``
        below 1; ``method="tree"`` where it does not apply (rows not unit to 1e-12, ``threshold >= 1 - 1e-12``),
        or the direct path with ``n > CLUSTERING_DIRECT_MAX_N``; or the tree path above the memory limit.
    """
    X = validate.real_array("X", X, ("n", "d"))      # NaN, inf, complex, str, ragged: refused by name
    if X.shape[0] < 2:
        raise ValueError(f"X must have shape (n, d) with n >= 2; received shape {X.shape}")
    threshold = validate.real("threshold", threshold, -1, 1, what="a finite number in [-1, 1]")
    method = validate.choice("method", method, CLUSTERING_METHODS)
    chunk_rows = validate.integer("chunk_rows", chunk_rows, 1)
    n, d = X.shape
    gamma = _mean_inner(X)
    e_max = float(np.abs(np.einsum("nd,nd->n", X, X) - 1).max())
    if e_max > CLUSTERING_UNIT_TOL:        # the measures are of directions: never renormalize silently
        raise ValueError(f"X rows must be unit vectors (| |x|^2 - 1 | <= {CLUSTERING_UNIT_TOL:g}); received max "
                         f"| |x|^2 - 1 | = {e_max:.3e}")
    problem = _tree_problem(threshold, e_max)
    if method == "auto":
        tree_pays = n >= CLUSTERING_TREE_MIN_N and d <= CLUSTERING_TREE_MAX_D
        method = "tree" if tree_pays and problem is None else "direct"
    if method == "tree":
        if problem is not None:
            raise ValueError(f"method='tree': {problem}; use method='direct'")
        min_inner, n_clusters = _clustering_tree(X, threshold, e_max)
    else:
        if n > CLUSTERING_DIRECT_MAX_N:
            hint = ("use method='tree'" if problem is None else f"the tree path does not apply: {problem}")
            if problem is None and d > CLUSTERING_TREE_MAX_D:
                hint += f" (slow in d = {d} > {CLUSTERING_TREE_MAX_D}) or subsample X"
            raise ValueError(
                f"clustering(method='direct') of X with n = {n} > {CLUSTERING_DIRECT_MAX_N} tokens forms "
                f"n^2 = {float(n) * n:.1e} inner products, about {float(n) * n / _DIRECT_PAIRS_PER_S / 60:.0f} "
                f"min at {_DIRECT_PAIRS_PER_S:.0e}/s; {hint}")
        min_inner, n_clusters = _clustering_direct(X, threshold, chunk_rows)
    return {"min_inner": float(min_inner), "mean_inner": gamma, "n_clusters": int(n_clusters)}


def _tree_problem(threshold, e_max):
    """Why the tree path does not apply (a phrase), or None."""
    if e_max > _UNIT_TOL:
        return (f"rows of X must be unit vectors to | |x|^2 - 1 | <= {_UNIT_TOL:g} "
                f"(the KD-tree answers distance questions); received max deviation {e_max:.3g}")
    if 2 - 2 * threshold - 2 * e_max - _SLACK <= _SLACK:
        return f"threshold must be < 1 - {_SLACK:g} (closer to 1 round-off decides the graph); received {threshold!r}"
    return None


def _clustering_direct(X, threshold, chunk_rows):
    """min_inner and n_clusters from all inner products, in row chunks; components are merged
    chunk by chunk (the edge list of a chunk is dropped after it), so memory stays O(n + chunk)."""
    n = X.shape[0]
    rows = max(1, min(chunk_rows, _DIRECT_CHUNK_ELEMS // n))
    min_inner, labels = np.inf, np.arange(n)
    for i in range(0, n, rows):
        G = X[i:i + rows] @ X.T
        idx = np.arange(G.shape[0])
        G[idx, i + idx] = np.inf
        min_inner = min(min_inner, G.min())
        r, c = np.nonzero(G >= threshold)
        if np.any(labels[r + i] != labels[c]):
            labels = _merge_labels(labels, r + i, labels[c])
    return min_inner, np.unique(labels).size


def _merge_labels(labels, a, b):
    """Representative token per component after adding edges ``(a, b)`` to the components ``labels``."""
    n = labels.size
    rows, cols = np.concatenate([np.arange(n), a]), np.concatenate([labels, b])
    comp = connected_components(csr_matrix((np.ones(rows.size, dtype=bool), (rows, cols)), shape=(n, n)),
                                directed=False)[1]
    rep = np.empty(comp.max() + 1, dtype=np.intp)
    rep[comp] = np.arange(n)
    return rep[comp]


def _kdtree(P):
    """KD-tree with sliding-midpoint splits: median splits (scipy's default) made the antipode
    queries ~50x slower on tight clusters (30000 tokens in 3 vMF clusters: 2.3 s vs 0.05 s)."""
    return cKDTree(P, balanced_tree=False, compact_nodes=False)


def _group_rows(A):
    """Rows of ``A`` (float64 or int64) grouped by equality: ``order`` (equal rows adjacent),
    ``starts`` and ``counts`` of the groups in that order.  Rows are sorted by a 64-bit hash, so
    equal rows whose hash collides with another row's may fall into several groups: callers only
    rely on every group holding equal rows."""
    bits = np.ascontiguousarray(A).view(np.uint64)
    h = np.full(len(A), 0x9E3779B97F4A7C15, dtype=np.uint64)
    for col in bits.T:                       # splitmix64 finalizer over the columns
        h ^= col
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    order = np.argsort(h)
    B = A[order]
    new = np.ones(len(A), dtype=bool)
    new[1:] = np.any(B[1:] != B[:-1], axis=1)
    starts = np.flatnonzero(new)
    return order, starts, np.diff(np.append(starts, len(A)))


def _clustering_tree(X, threshold, e_max):
    """min_inner and n_clusters without the n x n matrix (unit rows, threshold < 1 - 1e-12)."""
    order, starts, counts = _group_rows(X)
    U = X[order[starts]]                     # distinct tokens: coincident ones share a clique cell
    dup = counts > 1
    if len(U) == 1:
        return U[0] @ U[0], 1
    # farthest pair = nearest neighbour of the antipode (|x + y|^2 = 2 + 2<x, y> for unit x, y); the
    # best pair of a sample bounds the search radius (halves the time on uniform tokens)
    m = len(U)
    tree = _kdtree(U)
    sample = np.arange(0, m, max(1, m // 1024))
    dist, j = tree.query(-U[sample], k=2)
    bound = np.where(j[:, 0] == sample, dist[:, 1], dist[:, 0]).min() * (1 + 1e-9) + 1e-12
    dist, j = tree.query(-U, k=1, distance_upper_bound=bound)
    self_hit = np.flatnonzero(j == np.arange(m))         # x_i nearest to -x_i: all others at distance >= 2
    if self_hit.size:
        j[self_hit] = tree.query(-U[self_hit], k=2, distance_upper_bound=bound)[1][:, 1]
    found = np.flatnonzero(j < m)                        # others are farther from -x_i than the sample's best
    min_inner = np.einsum("nd,nd->n", U[found], U[j[found]]).min()
    if dup.any():
        min_inner = min(min_inner, np.einsum("nd,nd->n", U[dup], U[dup]).min())
    return min_inner, _components_tree(U, threshold, e_max)


def _components_tree(U, threshold, e_max):
    """Components of the graph <u_i, u_j> >= threshold over distinct unit tokens ``U``.

    Cells of side ``s = r_in / sqrt(d)`` are cliques: two tokens in one cell have
    ``|x - y|^2 <= r_in^2 = 2 - 2 t - 2 e_max - slack``, so ``<x, y> >= t + slack / 2``.  A linked pair
    has ``|x - y|^2 <= r_out^2 = 2 - 2 t + 2 e_max + slack`` and lies in one cell or in two cells
    whose boxes are that close.  Such cell pairs are joined if one of their token pairs passes
    ``<x, y> >= t``: first the pair of the cells' first tokens; then, for cells not yet joined,
    all pairs at once when there are few, else (one cell pair at a time, skipping those already
    joined) a product or the nearest neighbours of the smaller cell in a KD-tree of the larger.
    """
    n, d = U.shape
    r2_out = 2 - 2 * threshold + 2 * e_max + _SLACK
    s = np.sqrt((2 - 2 * threshold - 2 * e_max - _SLACK) / d)
    keys = np.floor(U / s).astype(np.int64)
    order, starts, counts = _group_rows(keys)
    m = counts.size
    if m == 1:
        return 1
    cell_keys = keys[order[starts]]
    rho = np.sqrt(r2_out) / s                # r_out in cell units
    tree = _kdtree(cell_keys.astype(float))
    radius = rho + np.sqrt(d) + 1e-6
    n_pairs = m * (m - 1) / 2                # every cell pair a candidate (high d, low threshold): count them first
    if n_pairs * _CELL_PAIR_BYTES > cost.current_limits()[0]:
        n_pairs = (float(tree.count_neighbors(tree, radius)) - m) / 2
    cost.guard(f"clustering(method='tree') of X with n = {n} distinct tokens in d = {d} at threshold = {threshold:g}",
               bytes=n_pairs * _CELL_PAIR_BYTES, detail=f"{n_pairs:.3g} candidate pairs of {m} grid cells x "
               f"{_CELL_PAIR_BYTES} bytes", fix="method='direct' (O(n) memory beyond a chunk), a threshold closer to "
               "1 or a subsample of X")
    pairs = tree.query_pairs(radius, output_type="ndarray")
    keep, step = np.zeros(len(pairs), dtype=bool), max(1, _PAIR_ELEMS // d)
    for p0 in range(0, len(pairs), step):    # the (pairs, d) gaps in batches: never all at once
        pr = pairs[p0:p0 + step]
        gap = np.maximum(np.abs(cell_keys[pr[:, 0]] - cell_keys[pr[:, 1]]) - 1, 0)
        keep[p0:p0 + step] = np.einsum("pd,pd->p", gap, gap) <= rho**2 * (1 + 1e-9)
    pairs = pairs[keep]
    a, b = pairs[:, 0], pairs[:, 1]
    # first pass: the first tokens of the two cells (joins most neighbour cells in dense regions)
    first = U[order[starts]]
    sure = _row_dots(first, a, b) >= threshold
    k, comp = _components(m, a[sure], b[sure])
    todo = comp[a] != comp[b]
    a, b = a[todo], b[todo]
    prod = counts[a] * counts[b]
    small = prod <= _SMALL_PAIR
    linked = _small_cell_links(U, order, starts, counts, a[small], b[small], prod[small], threshold)
    k, merged = _components(k, comp[a[small][linked]], comp[b[small][linked]])
    comp = merged[comp]
    parent, trees, merges = list(range(k)), {}, 0

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def members(c):
        return U[order[starts[c]:starts[c] + counts[c]]]

    for p in np.flatnonzero(~small):
        ra, rb = find(comp[a[p]]), find(comp[b[p]])
        if ra == rb:
            continue
        big, sm = (a[p], b[p]) if counts[a[p]] >= counts[b[p]] else (b[p], a[p])
        if counts[big] * counts[sm] <= _MATMUL_PAIR:
            linked = np.any(members(sm) @ members(big).T >= threshold)
        else:
            if big not in trees:
                trees[big] = _kdtree(members(big))
            linked = _cells_linked(trees[big], members(big), members(sm), r2_out, threshold)
        if linked:
            parent[ra] = rb
            merges += 1
    return k - merges


def _row_dots(P, a, b):
    """``<P[a_k], P[b_k]>`` for every k, gathering at most ``_PAIR_ELEMS`` coordinates at once."""
    out, step = np.empty(a.size), max(1, _PAIR_ELEMS // P.shape[1])
    for k in range(0, a.size, step):
        out[k:k + step] = np.einsum("pd,pd->p", P[a[k:k + step]], P[b[k:k + step]])
    return out


def _components(m, a, b):
    """Number and labels of the connected components of the graph on m nodes with edges (a, b)."""
    return connected_components(csr_matrix((np.ones(a.size, dtype=bool), (a, b)), shape=(m, m)),
                                directed=False)


def _small_cell_links(U, order, starts, counts, a, b, prod, threshold):
    """For cell pairs (a, b) with few point pairs: does any pair have <x, y> >= threshold?"""
    linked = np.zeros(a.size, dtype=bool)
    cum = np.cumsum(prod)
    batch = min(_PAIR_BATCH, max(1, _PAIR_ELEMS // U.shape[1]))     # gathered U[i], U[j]: (batch, d) each
    p0 = 0
    while p0 < a.size:
        p1 = max(p0 + 1, int(np.searchsorted(cum, (cum[p0 - 1] if p0 else 0) + batch, side="right")))
        pr = prod[p0:p1]
        pid = np.repeat(np.arange(p0, p1), pr)
        k = np.arange(pid.size) - np.repeat(np.cumsum(pr) - pr, pr)
        cb = counts[b[pid]]
        i = order[starts[a[pid]] + k // cb]
        j = order[starts[b[pid]] + k % cb]
        ok = np.einsum("nd,nd->n", U[i], U[j]) >= threshold
        linked[p0:p1] = np.bincount(pid[ok] - p0, minlength=p1 - p0) > 0
        p0 = p1
    return linked


def _cells_linked(tree, P, Q, r2_out, threshold):
    """Is some pair (p in P, q in Q) at <p, q> >= threshold?  ``tree`` is a KD-tree of P; Q is
    queried in growing batches (a linked pair is usually found in the first)."""
    r_out = np.sqrt(r2_out)
    lo, size = 0, 256
    while lo < len(Q):
        Qb = Q[lo:lo + size]
        lo, size = lo + size, 8 * size
        dist, j = tree.query(Qb, k=1, distance_upper_bound=r_out)
        hit = np.isfinite(dist)
        if not hit.any():
            continue
        if np.any(np.einsum("nd,nd->n", Qb[hit], P[j[hit]]) >= threshold):
            return True
        # only round-off apart from the threshold: check every token within r_out of those queries
        for q, near in zip(Qb[hit], tree.query_ball_point(Qb[hit], r_out)):
            if np.any(P[near] @ q >= threshold):
                return True
    return False
