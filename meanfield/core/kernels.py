"""Kernel sums shared by the particle system and the continuum quadrature path (numpy only).

For one head and target points ``x_i``, source points ``y_j`` with weights ``w_j``:

.. math:: u_i = \\frac{\\sum_j w_j k(\\langle x_i, M y_j\\rangle) V y_j}{N_i},\\qquad
          N_i = 1 \\ (\\text{mean}) \\ \\text{or}\\ \\sum_j w_j k(\\langle x_i, M y_j\\rangle) \\ (\\text{softmax}).

Rows of the target-by-source score matrix are processed in chunks of about ``chunk_bytes``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["kernel", "antiderivative", "row_chunks", "aggregate", "pair_sum", "log_attention", "entropy_rows"]


def kernel(head, S):
    """Kernel values ``k(S)``: ``exp(beta S)`` or ``max(S, 0)``."""
    if head.kernel == "exp":
        return np.exp(head.beta * S)
    return np.maximum(S, 0.0)


def antiderivative(head, S):
    """``K(S)`` with ``K' = k``: ``exp(beta S) / beta`` or ``relu(S)^2 / 2`` (the energy density)."""
    if head.kernel == "exp":
        return np.exp(head.beta * S) / head.beta
    return 0.5 * np.maximum(S, 0.0) ** 2


def row_chunks(n_rows, n_cols, chunk_bytes):
    """Row slices of at most ``chunk_bytes`` of float64 rows of length ``n_cols``."""
    step = max(1, int(chunk_bytes // (8 * n_cols)))
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


def _exp_safe(head, *points):
    """True when ``beta |s| <= 600`` for all scores of these points (``|s| <= |M|_2 max|x| max|y|``):
    ``exp(beta s)`` then neither overflows nor underflows, so no max-shift is needed."""
    bound = head.beta * np.linalg.norm(head.M, 2)
    for P in points:
        bound *= np.sqrt(np.einsum("ij,ij->i", P, P).max()) if P.size else 0.0
    return bound <= 600.0


def aggregate(head, targets, sources, w, chunk_bytes):
    """Normalized aggregates ``u`` (n_t, d) and normalizers ``N`` (n_t,) of one head.

    A softmax row with ``N = 0`` (possible only for ReLU kernels) has no attention mass: its
    ``u`` is 0.  Exp softmax rows are shifted by their maximum score when ``beta |s|`` could exceed
    600, so nothing overflows.  Per chunk the work is two matrix products and one in-place ``exp``
    (``beta`` is folded into the sources, ``w`` into the values).
    """
    Y = sources @ head.M.T          # row j: (M y_j)^T
    YV = sources @ head.V.T         # row j: (V y_j)^T
    softmax = head.normalization == "softmax"
    is_exp = head.kernel == "exp"
    shifted = softmax and is_exp and not _exp_safe(head, targets, sources)
    weighted = w > 0
    all_weighted = bool(weighted.all())
    if is_exp:
        Y = head.beta * Y
    d = targets.shape[1]
    wYV = w[:, None] * (np.column_stack([YV, np.ones(len(w))]) if softmax else YV)   # last column: Z
    UZ = np.empty((targets.shape[0], wYV.shape[1]))
    N = np.ones(targets.shape[0])
    for sl in row_chunks(targets.shape[0], sources.shape[0], chunk_bytes):
        K = targets[sl] @ Y.T
        if shifted:                  # largest score among sources that carry weight (w_j > 0)
            if not all_weighted:
                K[:, ~weighted] = -np.inf          # weightless sources add nothing (and must not overflow)
            shift = K.max(axis=1)
            K -= shift[:, None]
        if is_exp:
            np.exp(K, out=K)
        else:
            np.maximum(K, 0.0, out=K)
        np.matmul(K, wYV, out=UZ[sl])
        if softmax:
            Z = UZ[sl, d]
            with np.errstate(invalid="ignore", divide="ignore"):
                UZ[sl, :d] /= np.where(Z > 0, Z, np.inf)[:, None]
            N[sl] = Z * np.exp(shift) if shifted else Z
    return (UZ[:, :d] if softmax else UZ), N


def pair_sum(head, X, w, chunk_bytes):
    """Energy of one head, ``1/2 sum_ij w_i w_j K(<x_i, M x_j>)``."""
    if head.kernel == "exp":                     # K = exp(beta s) / beta, beta folded into Y
        Y = head.beta * (X @ head.M.T)
        total = 0.0
        for sl in row_chunks(X.shape[0], X.shape[0], chunk_bytes):
            K = X[sl] @ Y.T
            np.exp(K, out=K)
            total += w[sl] @ (K @ w)
        return 0.5 * total / head.beta
    Y = X @ head.M.T
    return sum(0.5 * w[sl] @ (antiderivative(head, X[sl] @ Y.T) @ w)
               for sl in row_chunks(X.shape[0], X.shape[0], chunk_bytes))


def log_attention(head, S, w):
    """Row log-probabilities ``log p_ij`` with ``p_ij ∝ w_j k(s_ij)`` (stable for exp)."""
    with np.errstate(divide="ignore"):
        logw = np.log(w)
        if head.kernel == "exp":
            L = head.beta * S + logw
        else:
            L = np.log(np.maximum(S, 0.0)) + logw
    Lmax = L.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        L = L - Lmax - np.log(np.exp(L - Lmax).sum(axis=1, keepdims=True))
    return L


def entropy_rows(head, targets, sources, w, chunk_bytes, relative=False):
    """Attention entropy of each target row, shape (n_t,).

    ``p_ij ∝ w_j k(<x_i, M y_j>)``; Shannon ``-sum_j p_ij log p_ij`` or, with ``relative=True``,
    ``-sum_j p_ij log(p_ij / w_j)`` (the discrete continuum entropy, <= 0).  A row without
    attention mass (ReLU kernel, every weighted score <= 0) has no distribution: NaN.
    """
    Y = sources @ head.M.T
    out = np.empty(targets.shape[0])
    with np.errstate(divide="ignore"):
        logw = np.log(w) if relative else 0.0
    for sl in row_chunks(targets.shape[0], sources.shape[0], chunk_bytes):
        L = log_attention(head, targets[sl] @ Y.T, w)
        P = np.exp(L)
        with np.errstate(invalid="ignore"):      # 0 * (-inf) where p = 0 (ReLU): discarded by where
            out[sl] = -np.sum(np.where(P > 0, P * (L - logw), 0.0), axis=1)
        out[sl][~np.any(P > 0, axis=1)] = np.nan   # no attention mass (ReLU, all s <= 0): undefined
    return out
