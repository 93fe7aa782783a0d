"""Chunked kernel sums shared by the particle system and the continuum quadrature path (numpy only).

For one head and target points ``x_i``, source points ``y_j`` with weights ``w_j``:

.. math:: u_i = \\frac{\\sum_j w_j k(\\langle x_i, M y_j\\rangle) V y_j}{N_i},\\qquad
          N_i = 1 \\ (\\text{mean}) \\ \\text{or}\\ \\sum_j w_j k(\\langle x_i, M y_j\\rangle) \\ (\\text{softmax}).

Rows of the target-by-source score matrix are processed in chunks of about ``chunk_bytes``.  What a
kernel or a normalization does comes from the registries of :mod:`meanfield.core.kernels`.
"""

from __future__ import annotations

import numpy as np

from .kernels import KERNELS, NORMALIZATIONS

__all__ = ["row_chunks", "aggregate", "DirectSums", "LastScalings", "KERNEL_CACHE_BYTES", "pair_sum", "log_attention",
           "entropy_rows"]

KERNEL_CACHE_BYTES = 32 * 2**20
"""A solve over the tokens (Sinkhorn) keeps the kernel matrix of a head for its repeated applications when it
takes at most this many bytes (n <= 2048); beyond, every application recomputes it chunk by chunk."""


def row_chunks(n_rows, n_cols, chunk_bytes):
    """Row slices of at most ``chunk_bytes`` of float64 rows of length ``n_cols``."""
    step = max(1, int(chunk_bytes // (8 * n_cols)))
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


def _max_score(head, *points):
    """Bound on ``|s| = |<x, M y>|`` for these points: ``|M|_2 max|x| max|y|``."""
    bound = np.linalg.norm(head.M, 2)
    for P in points:
        bound *= np.sqrt(np.einsum("ij,ij->i", P, P).max()) if P.size else 0.0
    return bound


def aggregate(head, targets, sources, w, chunk_bytes):
    """Normalized aggregates ``u`` (n_t, d) and normalizers ``N`` (n_t,) of one head.

    A row with ``Z = 0`` (possible only for kernels that vanish, e.g. ReLU) has no attention mass:
    with a normalizing normalization (softmax) its ``u`` is 0.  Rows of a normalizing head are shifted
    by their largest ``log k`` when the kernel could overflow or underflow
    (:meth:`Kernel.needs_shift`), so nothing overflows.  Per chunk the work is two matrix products and
    one in-place kernel evaluation (the kernel's rate, ``beta``, is folded into the sources, ``w``
    into the values).
    """
    kern, norm = KERNELS[head.kernel], NORMALIZATIONS[head.normalization]
    Y = sources @ head.M.T          # row j: (M y_j)^T
    YV = sources @ head.V.T         # row j: (V y_j)^T
    normalized = norm.uses_normalizer
    shifted = norm.shifts_rows and kern.needs_shift(head, _max_score(head, targets, sources))
    weighted = w > 0
    all_weighted = bool(weighted.all())
    Y = kern.rate(head) * Y
    d = targets.shape[1]
    wYV = w[:, None] * (np.column_stack([YV, np.ones(len(w))]) if normalized else YV)   # last column: Z
    UZ = np.empty((targets.shape[0], wYV.shape[1]))
    N = np.ones(targets.shape[0])
    for sl in row_chunks(targets.shape[0], sources.shape[0], chunk_bytes):
        K = targets[sl] @ Y.T
        if shifted:                  # largest log k among sources that carry weight (w_j > 0)
            kern.log_scaled(head, K, out=K)
            if not all_weighted:
                K[:, ~weighted] = -np.inf          # weightless sources add nothing (and must not overflow)
            shift = K.max(axis=1)
            K -= shift[:, None]
            np.exp(K, out=K)
        else:
            kern.scaled(head, K, out=K)
        np.matmul(K, wYV, out=UZ[sl])
        if normalized:
            Z = UZ[sl, d]
            norm.combine(UZ[sl, :d], Z)
            N[sl] = Z * np.exp(shift) if shifted else Z
    return (UZ[:, :d] if normalized else UZ), N


class DirectSums:
    """One head's kernel sums over weighted point sources by chunked direct summation: the ``sums`` object
    of :meth:`meanfield.core.kernels.Normalization.force`.

    ``fused(norm)`` is :func:`aggregate` (``U[1]`` and ``Z`` in one pass, unchanged); the solve of a
    non-row-local normalization (Sinkhorn; targets are the sources) uses ``apply(f) = sum_j w_j k_ij f_j``,
    ``apply_t`` (``sum_i w_i k_ij f_i``; None when ``M`` is exactly symmetric) and
    ``aggregate(f) = sum_j w_j f_j k_ij V y_j``.  The kernel matrix is kept between applications when it
    fits in :data:`KERNEL_CACHE_BYTES`.
    """

    axis = -1

    def __init__(self, head, targets, sources, w, chunk_bytes):
        self.head, self.targets, self.sources, self.w, self.chunk_bytes = head, targets, sources, w, chunk_bytes
        self.shape = (targets.shape[0],)
        self._square = targets is sources
        symmetric = self._square and np.array_equal(head.M, head.M.T)
        self.apply_t = None if symmetric else self._apply_t
        self._K = None

    def fused(self, norm):
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
                self._K = kern.scaled(head, X @ (kern.rate(head) * (X @ head.M.T)).T)
            yield slice(None), (self._K.T if transpose else self._K)
            return
        Y = kern.rate(head) * (X @ (head.M if transpose else head.M.T))
        for sl in row_chunks(n, n, self.chunk_bytes):
            yield sl, kern.scaled(head, X[sl] @ Y.T)

    def _sum(self, f, transpose):
        wf = self.w if f is None else self.w * f
        out = np.empty(self.shape)
        for sl, K in self._blocks(transpose):
            np.matmul(K, wf, out=out[sl])
        return out

    def apply(self, f):
        return self._sum(f, False)

    def _apply_t(self, f):
        return self._sum(f, True)

    def aggregate(self, f):
        wYV = (self.w if f is None else self.w * f)[:, None] * (self.sources @ self.head.V.T)
        out = np.empty(self.shape + (wYV.shape[1],))
        for sl, K in self._blocks(False):
            np.matmul(K, wYV, out=out[sl])
        return out


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
        k, value = self._entry
        return value if k == key else None

    def put(self, key, value):
        self._entry = (key, value)
        return value


def pair_sum(head, X, w, chunk_bytes):
    """Energy of one head, ``1/2 sum_ij w_i w_j K(<x_i, M x_j>)``."""
    kern = KERNELS[head.kernel]
    Y = kern.rate(head) * (X @ head.M.T)
    total = 0.0
    for sl in row_chunks(X.shape[0], X.shape[0], chunk_bytes):
        K = X[sl] @ Y.T
        kern.antiderivative_scaled(head, K, out=K)
        total += w[sl] @ (K @ w)
    return 0.5 * total / kern.antiderivative_divisor(head)


def log_attention(head, S, w):
    """Row log-probabilities ``log p_ij`` with ``p_ij ∝ w_j k(s_ij)`` (log-sum-exp: stable for any kernel)."""
    with np.errstate(divide="ignore"):
        L = KERNELS[head.kernel].log_value(head, S) + np.log(w)
    Lmax = L.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        L = L - Lmax - np.log(np.exp(L - Lmax).sum(axis=1, keepdims=True))
    return L


def entropy_rows(head, targets, sources, w, chunk_bytes, relative=False, scale=None):
    """Attention entropy of each target row, shape (n_t,).

    ``p_ij ∝ w_j k(<x_i, M y_j>)`` (``∝ w_j scale_j k(...)`` with ``scale``: the rows of a Sinkhorn head,
    ``scale = b``, whose normalizer is ``1 / a_i``); Shannon ``-sum_j p_ij log p_ij`` or, with ``relative=True``,
    ``-sum_j p_ij log(p_ij / w_j)`` (the discrete continuum entropy, <= 0).  A row without
    attention mass (a vanishing kernel such as ReLU, every weighted k = 0) has no distribution: NaN.
    """
    Y = sources @ head.M.T
    out = np.empty(targets.shape[0])
    pw = w if scale is None else w * scale
    with np.errstate(divide="ignore"):
        logw = np.log(w) if relative else 0.0
    for sl in row_chunks(targets.shape[0], sources.shape[0], chunk_bytes):
        L = log_attention(head, targets[sl] @ Y.T, pw)
        P = np.exp(L)
        with np.errstate(invalid="ignore"):      # 0 * (-inf) where p = 0 (ReLU): discarded by where
            out[sl] = -np.sum(np.where(P > 0, P * (L - logw), 0.0), axis=1)
        out[sl][~np.any(P > 0, axis=1)] = np.nan   # no attention mass (k = 0 on every weighted source): undefined
    return out
