"""Chunked kernel sums shared by the particle system and the continuum quadrature path (numpy, torch).

For one head and target points ``x_i``, source points ``y_j`` with weights ``w_j``:

.. math:: u_i = \\frac{\\sum_j w_j k(\\langle x_i, M y_j\\rangle) V y_j}{N_i},\\qquad
          N_i = 1 \\ (\\text{mean}) \\ \\text{or}\\ \\sum_j w_j k(\\langle x_i, M y_j\\rangle) \\ (\\text{softmax}).

Rows of the target-by-source score matrix are processed in chunks of about ``chunk_bytes``.  What a
kernel or a normalization does comes from the registries of :mod:`meanfield.core.kernels`.

Factored heads (:meth:`Head.from_factors <meanfield.core.heads.Head.from_factors>`, ``M = A B^T``, ``V = C D^T``
of inner sizes ``r, p < d``) are summed through their factors: every sum forms its scores as ``T S^T`` from the
sides of :func:`score_sides` (dense: ``X`` and ``Y M^T``; factored: ``X A`` and ``Y B``) and its values from
:func:`value_sides` (dense: ``Y V^T``; factored: the p-vectors ``Y D``, lifted by ``C^T`` once at the end), so
the pairwise work is ``O(n^2 r)`` instead of ``O(n^2 d)``.  Dense heads take exactly the operations they always did.

Every sum is written once over the Python array API (:mod:`meanfield.core.backends`): numpy arrays in give numpy
arrays out, by exactly the numpy operations of the numpy-only code (in place where it was, bit for bit); torch tensors
(CPU or CUDA, float64 or float32) in give torch tensors out, the head's matrices converted once per device
(:func:`meanfield.core.backends.like`).  Points and weights share one namespace, device and dtype; a numpy scalar field
``f`` given to :class:`DirectSums` (the Sinkhorn solve's vectors) is converted to the points' backend.
"""

from __future__ import annotations

import math

import numpy as np

from . import backends
from .kernels import KERNELS, NORMALIZATIONS, score_norm

__all__ = ["row_chunks", "aggregate", "DirectSums", "LastScalings", "KERNEL_CACHE_BYTES", "pair_sum", "log_attention",
           "entropy_rows", "factored_sides", "score_sides", "value_sides", "lift_values", "CHUNK_BYTES"]

CHUNK_BYTES = 8 * 2**20
"""Default work space (bytes) of one block of score rows of the direct sums: the ``chunk_bytes`` default of
:class:`~meanfield.models.batched.BatchedSystem`, :func:`~meanfield.models.batched.estimate_batched`,
:class:`~meanfield.models.causal.CausalSystem`, :func:`~meanfield.models.causal.causal_direct_sums`,
:func:`~meanfield.models.causal.causal_attention_received` and the operator builds of
:mod:`meanfield.core.bispherical`.

Two models keep their own, older default, because the size of a row block changes the last bits of the sums (the
matrix products of a block of another height round differently): :class:`~meanfield.models.particles.ParticleSystem`
keeps 1 MiB and :class:`~meanfield.models.continuum.ContinuumPDE` and :class:`~meanfield.models.circle.CirclePDE`
(quadrature path) 4 MiB.  Measured: ``ParticleSystem(summation="direct").velocity`` at 1 MiB and 8 MiB differs by
up to 6e-16 (not bit-identical) at n = 500 and 3000 (d = 3, softmax and mean heads), and the quadrature velocities at
4 MiB and 8 MiB differ by 5e-19 (``lmax = 32``, 4900 nodes) and 4e-17 (``kmax = 512``, 1539 nodes); identical where
one block holds every row (n = 50, ``lmax = 16``)."""

KERNEL_CACHE_BYTES = 32 * 2**20
"""A solve over the tokens (Sinkhorn) keeps the kernel matrix of a head for its repeated applications when it
takes at most this many bytes (n <= 2048); beyond, every application recomputes it chunk by chunk."""


def _new(xp, fill, shape, ref):
    """A new array of ``shape`` with ``ref``'s dtype (and device): ``fill`` is ``"empty"`` or ``"ones"``."""
    if xp is np:
        return (np.empty if fill == "empty" else np.ones)(shape, dtype=ref.dtype)
    return getattr(xp, fill)(shape, dtype=ref.dtype, device=ref.device)


def _matmul_into(xp, A, B, out, sl):
    """``out[sl] = A @ B`` (numpy: written in place by ``np.matmul(..., out=)``)."""
    if xp is np:
        np.matmul(A, B, out=out[sl])
    else:
        out[sl] = A @ B


def _exp_inplace(xp, K):
    """``exp(K)``, in place for numpy."""
    return np.exp(K, out=K) if xp is np else xp.exp(K)


def row_chunks(n_rows, n_cols, chunk_bytes):
    """Row slices of at most ``chunk_bytes`` of float64 rows of length ``n_cols``.

    Parameters
    ----------
    n_rows : int
        Number of rows to cover.
    n_cols : int
        Row length (entries of 8 bytes), > 0.
    chunk_bytes : float
        Memory budget of one chunk; at least one row per chunk whatever the budget.

    Returns
    -------
    list of slice
        Consecutive slices covering ``range(n_rows)`` (empty for ``n_rows = 0``).
    """
    step = max(1, int(chunk_bytes // (8 * n_cols)))
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


def factored_sides(head) -> tuple[bool, bool]:
    """Whether the direct sums of ``head`` use its factors: ``(scores, values)``.

    Parameters
    ----------
    head : Head

    Returns
    -------
    tuple of two bool
        ``scores``: the head has factors with ``r < d`` (the scores as ``(X A)(Y B)^T``); ``values``: with
        ``p < d`` (the values as ``(Y D) C^T``).  A factor as wide as ``d`` saves nothing (it would cost more
        than the dense product), so that side is summed densely; a dense head gives ``(False, False)``.
    """
    if head.factors is None:
        return False, False
    d = head.dim
    return head.factors[0].shape[1] < d, head.factors[2].shape[1] < d


def score_sides(head, targets, sources, transpose=False):
    """The two sides whose product gives the scores: ``T S^T = [<x_i, M y_j>]`` (``M^T`` with ``transpose``).

    Parameters
    ----------
    head : Head
    targets : ndarray, shape (n_t, d)
    sources : ndarray, shape (n_s, d)
    transpose : bool
        The scores of ``M^T`` (``<x_i, M^T y_j>``).

    Returns
    -------
    T : ndarray, shape (n_t, k)
        Dense head: ``targets`` itself (no copy); factored: ``targets @ A`` (``@ B`` with ``transpose``).
    S : ndarray, shape (n_s, k)
        Dense: ``sources @ M.T`` (rows ``(M y_j)^T``; ``@ M`` with ``transpose``); factored: ``sources @ B``
        (``@ A``).  ``k = d`` (dense) or ``r`` (factored).
    L : ndarray of shape (d, r), or None
        The lift of the source side: ``sources @ M.T = S @ L.T`` (``L = A``; ``B`` with ``transpose``); None for a
        dense head (``S`` is already ``sources @ M.T``).

    Raises
    ------
    ValueError
        Never for validated inputs (shapes come from the models' checks).
    """
    if not factored_sides(head)[0]:
        M = head.M if transpose else head.M.T
        return targets, sources @ backends.like(M, sources, head, "M" if transpose else "M.T"), None
    A, B = (backends.like(F, targets, head, name) for F, name in zip(head.factors[:2], "AB"))
    if transpose:
        A, B = B, A
    return targets @ A, sources @ B, A


def value_sides(head, sources):
    """The value coordinates of the sources and the map that lifts their aggregates to ``R^d``.

    Parameters
    ----------
    head : Head
    sources : ndarray, shape (n_s, d)

    Returns
    -------
    W : ndarray, shape (n_s, m)
        Dense head: ``sources @ V.T`` (rows ``(V y_j)^T``, ``m = d``); factored (``p < d``): ``sources @ D``
        (rows ``(D^T y_j)^T``, ``m = p``).
    C : ndarray of shape (d, p), or None
        An aggregate ``U`` of rows of ``W`` is ``lift_values(U, C) = U @ C.T`` in ``R^d`` (None: ``U`` itself).

    Raises
    ------
    ValueError
        Never for validated inputs.
    """
    if not factored_sides(head)[1]:
        return sources @ backends.like(head.V.T, sources, head, "V.T"), None
    return sources @ backends.like(head.factors[3], sources, head, "D"), backends.like(head.factors[2], sources, head,
                                                                                       "C")


def lift_values(U, C):
    """An aggregate of value coordinates in ``R^d``: ``U @ C.T``, or ``U`` itself when ``C`` is None.

    Parameters
    ----------
    U : ndarray, shape (..., m)
    C : ndarray of shape (d, m), or None
        From :func:`value_sides`.

    Returns
    -------
    ndarray, shape (..., d)

    Raises
    ------
    ValueError
        Never for arrays from :func:`value_sides`.
    """
    return U if C is None else U @ C.T


def _fused_sides(head, X):
    """``X A``, ``X B``, ``X D`` and ``C`` of a factored head whose targets are its sources, from one product with
    the concatenated factors ``[A | B | D]`` (kept on the head): 36 products of inner size r per 12 heads cost
    about a quarter of a velocity at d = 384, r = 32, n = 512, one wide product about half of that
    (benchmarks/factored_heads.py).  Equal to the three products up to rounding (the same dot products in another
    blocking)."""
    cached = head.__dict__.get("_fused_factors")
    if cached is None:
        A, B, C, D = head.factors
        cached = (np.ascontiguousarray(np.concatenate([A, B, D], axis=1)), A.shape[1], D.shape[1])
        object.__setattr__(head, "_fused_factors", cached)
    ABD, r, p = cached
    P = X @ ABD
    return P[:, :r], P[:, r:2 * r], P[:, 2 * r:], head.factors[2]


def _max_score(head, *points):
    """Bound on ``|s| = |<x, M y>|`` for these points: ``|M|_2 max|x| max|y|``."""
    bound = score_norm(head)
    last = factor = None
    for P in points:
        if P is not last:            # targets that are the sources: one pass over them
            last, factor = P, _largest_norm(P)
        bound *= factor
    return bound


def _largest_norm(P):
    """``max_i |p_i|`` of the rows of ``P`` (0 for no rows), a Python float for other namespaces."""
    xp = backends.foreign(P)
    if xp is None:
        return np.sqrt(np.einsum("ij,ij->i", P, P).max()) if P.size else 0.0
    return float(xp.sqrt(xp.max(xp.sum(P * P, axis=1)))) if P.shape[0] * P.shape[1] else 0.0


def aggregate(head, targets, sources, w, chunk_bytes, lift=True):
    """Normalized aggregates ``u`` (n_t, d) and normalizers ``N`` (n_t,) of one head.

    A row with ``Z = 0`` (possible only for kernels that vanish, e.g. ReLU) has no attention mass:
    with a normalizing normalization (softmax) its ``u`` is 0.  Rows of a normalizing head are shifted
    by their largest ``log k`` when the kernel could overflow or underflow
    (:meth:`Kernel.needs_shift`), so nothing overflows.  Per chunk the work is two matrix products and
    one in-place kernel evaluation (the kernel's rate, ``beta``, is folded into the sources, ``w``
    into the values); a factored head forms them from its r- and p-vectors (:func:`score_sides`,
    :func:`value_sides`) and lifts the aggregate by ``C^T`` once.  Arrays of any backend (one namespace, device and
    dtype for ``targets``, ``sources`` and ``w``), results in it.  ``lift=False`` returns ``(U, N, C)`` with the
    aggregate in value coordinates and the lift ``C`` (None for a dense value side): a caller summing heads lifts
    their concatenation once (:meth:`meanfield.models.particles.ParticleSystem.velocity`).

    Parameters
    ----------
    head : Head
        The head (matrices or factors, kernel, normalization).
    targets : ndarray or array API array, shape (n_t, d)
        Target points ``x_i``.
    sources : ndarray or array API array, shape (n_s, d)
        Source points ``y_j`` (may be ``targets`` itself).
    w : ndarray or array API array, shape (n_s,)
        Source weights ``w_j >= 0``.
    chunk_bytes : float
        Memory budget of one chunk of score rows (:func:`row_chunks`).
    lift : bool, optional
        Return the aggregate in ``R^d`` (default) or in value coordinates with its lift.

    Returns
    -------
    tuple
        ``(u, N)``: ``u`` shape (n_t, d), ``N`` shape (n_t,) (ones for mean); with ``lift=False``
        ``(U, N, C)``, ``U`` shape (n_t, m) in value coordinates and ``C`` of shape (d, m) or None.
    """
    xp = backends.namespace(targets, sources, w)
    kern, norm = KERNELS[head.kernel], NORMALIZATIONS[head.normalization]
    if targets is sources and isinstance(sources, np.ndarray) and sources.dtype == np.float64 \
            and all(factored_sides(head)):
        T, Y, YV, C = _fused_sides(head, sources)      # one product X [A | B | D] instead of three narrow ones
    else:
        T, Y, _ = score_sides(head, targets, sources)  # dense: T = targets, row j of Y: (M y_j)^T
        YV, C = value_sides(head, sources)             # dense: row j: (V y_j)^T; factored: (D^T y_j)^T
    normalized = norm.uses_normalizer
    shifted = norm.shifts_rows and kern.needs_shift(head, _max_score(head, targets, sources))
    weighted = w > 0
    all_weighted = bool(xp.all(weighted))
    Y = kern.rate(head) * Y
    d = YV.shape[1]                                    # the value coordinates (d, or p of a factored head)
    if normalized:                                     # last column: Z
        YV = xp.concat([YV, _new(xp, "ones", (YV.shape[0], 1), YV)], axis=1)
    wYV = w[:, None] * YV
    UZ = _new(xp, "empty", (targets.shape[0], wYV.shape[1]), wYV)
    N = _new(xp, "ones", (targets.shape[0],), wYV)
    for sl in row_chunks(targets.shape[0], sources.shape[0], chunk_bytes):
        K = T[sl] @ Y.T
        if shifted:                  # largest log k among sources that carry weight (w_j > 0)
            K = kern.log_scaled(head, K, out=K)
            if not all_weighted:
                K[:, ~weighted] = -math.inf          # weightless sources add nothing (and must not overflow)
            shift = xp.max(K, axis=1)
            K -= shift[:, None]
            K = _exp_inplace(xp, K)
        else:
            K = kern.scaled(head, K, out=K)
        _matmul_into(xp, K, wYV, UZ, sl)
        if normalized:
            Z = UZ[sl, d]
            norm.combine(UZ[sl, :d], Z)
            N[sl] = Z * xp.exp(shift) if shifted else Z
    U = UZ[:, :d] if normalized else UZ
    return (lift_values(U, C), N) if lift else (U, N, C)


class DirectSums:
    """One head's kernel sums over weighted point sources by chunked direct summation: the ``sums`` object
    of :meth:`meanfield.core.kernels.Normalization.force`.

    ``fused(norm)`` is :func:`aggregate` (``U[1]`` and ``Z`` in one pass, unchanged); the solve of a
    non-row-local normalization (Sinkhorn; targets are the sources) uses ``apply(f) = sum_j w_j k_ij f_j``,
    ``apply_t`` (``sum_i w_i k_ij f_i``; None when ``M`` is exactly symmetric) and
    ``aggregate(f) = sum_j w_j f_j k_ij V y_j``.  The kernel matrix is kept between applications when it
    fits in :data:`KERNEL_CACHE_BYTES`.  Points of any backend; results in it (a numpy ``f`` is converted in).

    Parameters
    ----------
    head : Head
        The head.
    targets : ndarray or array API array, shape (n_t, d)
        Target points (the solves need ``targets is sources``).
    sources : ndarray or array API array, shape (n_s, d)
        Source points.
    w : ndarray or array API array, shape (n_s,)
        Source weights.
    chunk_bytes : float
        Memory budget of one chunk of score rows.
    """

    axis = -1

    def __init__(self, head, targets, sources, w, chunk_bytes):
        self.head, self.targets, self.sources, self.w, self.chunk_bytes = head, targets, sources, w, chunk_bytes
        self.shape = (targets.shape[0],)
        self._square = targets is sources
        self._K = None

    @property
    def apply_t(self):
        """The transposed application, or None when ``M`` is exactly symmetric (decided on first use: only a
        solve reads it, and the comparison of a (d, d) matrix with its transpose costs ~0.5 ms at d = 384)."""
        if not hasattr(self, "_symmetric"):
            self._symmetric = self._square and np.array_equal(self.head.M, self.head.M.T)
        return None if self._symmetric else self._apply_t

    def fused(self, norm):
        """``U[1]`` and ``Z`` in one pass, combined: :func:`aggregate` of the head.

        Parameters
        ----------
        norm : Normalization
            The head's normalization (unused: :func:`aggregate` reads it from the head).

        Returns
        -------
        tuple
            ``(u, N)``, shapes (n_t, d) and (n_t,).
        """
        return aggregate(self.head, self.targets, self.sources, self.w, self.chunk_bytes)

    def _blocks(self, transpose):
        """``(slice, k block)`` over the target rows: ``k(<x_i, M y_j>)`` (or ``k(<y_i, M^T x_j>)``)."""
        if not self._square:
            raise ValueError("a solve over the tokens needs targets = sources (one point set)")
        kern, head = KERNELS[self.head.kernel], self.head
        X = self.sources
        n = X.shape[0]
        if 8 * n * n <= KERNEL_CACHE_BYTES:        # one kept matrix; its transpose serves apply_t
            if self._K is None:
                T, S, _ = score_sides(head, X, X)      # dense: T = X, S = X M^T
                self._K = kern.scaled(head, T @ (kern.rate(head) * S).T)
            yield slice(None), (self._K.T if transpose else self._K)
            return
        T, S, _ = score_sides(head, X, X, transpose)
        Y = kern.rate(head) * S
        for sl in row_chunks(n, n, self.chunk_bytes):
            yield sl, kern.scaled(head, T[sl] @ Y.T)

    def _sum(self, f, transpose):
        xp = backends.namespace(self.w)
        wf = self.w if f is None else self.w * backends.like(f, self.w)
        out = _new(xp, "empty", self.shape, wf)
        for sl, K in self._blocks(transpose):
            _matmul_into(xp, K, wf, out, sl)
        return out

    def apply(self, f):
        """The kernel applied to scaled sources: ``sum_j w_j k_ij f_j`` at every point.

        Parameters
        ----------
        f : array, shape (n,), or None
            Source scaling (numpy or the points' backend; None: ``f = 1``).

        Returns
        -------
        array, shape (n,)
            In the points' backend.

        Raises
        ------
        ValueError
            Targets that are not the sources (a solve needs one point set).
        """
        return self._sum(f, False)

    def _apply_t(self, f):
        return self._sum(f, True)

    def aggregate(self, f):
        """The aggregate of scaled sources: ``U[f]_i = sum_j w_j f_j k_ij V y_j``.

        Parameters
        ----------
        f : array, shape (n,), or None
            Source scaling (numpy or the points' backend; None: ``f = 1``).

        Returns
        -------
        array, shape (n, d)
            In the points' backend.

        Raises
        ------
        ValueError
            Targets that are not the sources (a solve needs one point set).
        """
        xp = backends.namespace(self.w)
        YV, C = value_sides(self.head, self.sources)
        wYV = (self.w if f is None else self.w * backends.like(f, self.w))[:, None] * YV
        out = _new(xp, "empty", self.shape + (wYV.shape[1],), wYV)
        for sl, K in self._blocks(False):
            _matmul_into(xp, K, wYV, out, sl)
        return lift_values(out, C)


class LastScalings:
    """The Sinkhorn scalings of the last state a system saw, keyed by the state's bytes (tokens, weights):
    the right-hand side, the energies, the entropies and the forces at one state share one solve.

    Never a warm start from a *previous* state (results would depend on the history of calls at the
    level of the tolerance, and a resumed run would not repeat an uninterrupted one bit for bit): a hit
    returns exactly what the solve would.  One reference swap per new state; not pickled (a copy starts
    empty).
    """

    __slots__ = ("_entry",)

    def __init__(self):
        self._entry = (None, None)

    def __reduce__(self):
        return (LastScalings, ())

    def get(self, key):
        """The scalings stored for ``key``, or None.

        Parameters
        ----------
        key : object
            The state's key (compared with ``==``).

        Returns
        -------
        object or None
            The value of the last :meth:`put` when its key equals ``key``, otherwise None.
        """
        k, value = self._entry
        return value if k == key else None

    def put(self, key, value):
        """Store ``value`` for ``key``, replacing the previous entry.

        Parameters
        ----------
        key : object
            The state's key.
        value : object
            The scalings of that state.

        Returns
        -------
        object
            ``value`` itself.
        """
        self._entry = (key, value)
        return value


def pair_sum(head, X, w, chunk_bytes):
    """Energy of one head, ``1/2 sum_ij w_i w_j K(<x_i, M x_j>)`` (a float: a numpy float64 for numpy points, a
    Python float for the others, summed in their dtype).

    Parameters
    ----------
    head : Head
        The head.
    X : ndarray or array API array, shape (n, d)
        Points.
    w : ndarray or array API array, shape (n,)
        Weights.
    chunk_bytes : float
        Memory budget of one chunk of score rows.

    Returns
    -------
    float
        The energy.
    """
    kern = KERNELS[head.kernel]
    T, S, _ = score_sides(head, X, X)
    Y = kern.rate(head) * S
    total = 0.0
    for sl in row_chunks(X.shape[0], X.shape[0], chunk_bytes):
        K = T[sl] @ Y.T
        K = kern.antiderivative_scaled(head, K, out=K)
        total += w[sl] @ (K @ w)
    if backends.foreign(X) is not None:
        total = float(total)
    return 0.5 * total / kern.antiderivative_divisor(head)


def log_attention(head, S, w):
    """Row log-probabilities ``log p_ij`` with ``p_ij ∝ w_j k(s_ij)`` (log-sum-exp: stable for any kernel).

    Parameters
    ----------
    head : Head
        The head (its kernel).
    S : ndarray or array API array, shape (n_t, n_s)
        Scores ``s_ij``.
    w : ndarray or array API array, shape (n_s,)
        Source weights (``w_j = 0``: ``log p_ij = -inf``).

    Returns
    -------
    array, shape (n_t, n_s)
        ``log p_ij`` (``-inf`` where ``p = 0``; NaN rows where no source has attention mass).
    """
    xp = backends.namespace(S, w)
    with np.errstate(divide="ignore"):
        L = KERNELS[head.kernel].log_value(head, S) + xp.log(w)
    Lmax = xp.max(L, axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        L = L - Lmax - xp.log(xp.sum(xp.exp(L - Lmax), axis=1, keepdims=True))
    return L


def entropy_rows(head, targets, sources, w, chunk_bytes, relative=False, scale=None):
    """Attention entropy of each target row, shape (n_t,).

    ``p_ij ∝ w_j k(<x_i, M y_j>)`` (``∝ w_j scale_j k(...)`` with ``scale``: the rows of a Sinkhorn head,
    ``scale = b``, whose normalizer is ``1 / a_i``); Shannon ``-sum_j p_ij log p_ij`` or, with ``relative=True``,
    ``-sum_j p_ij log(p_ij / w_j)`` (the discrete continuum entropy, <= 0).  A row without
    attention mass (a vanishing kernel such as ReLU, every weighted k = 0) has no distribution: NaN.  Arrays of any
    backend (a numpy ``scale`` is converted to it), the result in it.

    Parameters
    ----------
    head : Head
        The head.
    targets : ndarray or array API array, shape (n_t, d)
        Target points.
    sources : ndarray or array API array, shape (n_s, d)
        Source points.
    w : ndarray or array API array, shape (n_s,)
        Source weights.
    chunk_bytes : float
        Memory budget of one chunk of score rows.
    relative : bool, optional
        The entropy relative to the weights (default False: Shannon).
    scale : array, shape (n_s,), optional
        Extra source scaling (a Sinkhorn head's ``b``).

    Returns
    -------
    array, shape (n_t,)
        The entropy of each row (NaN for rows without attention mass).
    """
    xp = backends.namespace(targets, sources, w)
    T, Y, _ = score_sides(head, targets, sources)
    out = _new(xp, "empty", (targets.shape[0],), w)
    pw = w if scale is None else w * backends.like(scale, w)
    with np.errstate(divide="ignore"):
        logw = xp.log(w) if relative else 0.0
    for sl in row_chunks(targets.shape[0], sources.shape[0], chunk_bytes):
        L = log_attention(head, T[sl] @ Y.T, pw)
        P = xp.exp(L)
        with np.errstate(invalid="ignore"):      # 0 * (-inf) where p = 0 (ReLU): discarded by where
            out[sl] = -xp.sum(xp.where(P > 0, P * (L - logw), 0.0), axis=1)
        out[sl][~xp.any(P > 0, axis=1)] = math.nan   # no attention mass (k = 0 on every weighted source): undefined
    return out
