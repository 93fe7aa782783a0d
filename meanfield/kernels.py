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


def aggregate(head, targets, sources, w, chunk_bytes):
    """Normalized aggregates ``u`` (n_t, d) and normalizers ``N`` (n_t,) of one head.

    A softmax row with ``N = 0`` (possible only for ReLU kernels) has no attention mass: its
    ``u`` is 0.  Exp softmax rows are shifted by their maximum score, so nothing overflows.
    """
    Y = sources @ head.M.T          # row j: (M y_j)^T
    YV = sources @ head.V.T         # row j: (V y_j)^T
    softmax = head.normalization == "softmax"
    U = np.empty((targets.shape[0], targets.shape[1]))
    N = np.ones(targets.shape[0])
    for sl in row_chunks(targets.shape[0], sources.shape[0], chunk_bytes):
        S = targets[sl] @ Y.T
        if softmax and head.kernel == "exp":
            shift = S.max(axis=1, keepdims=True)
            K = np.exp(head.beta * (S - shift))
        else:
            K = kernel(head, S)
        K *= w
        U[sl] = K @ YV
        if softmax:
            Z = K.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                U[sl] /= np.where(Z > 0, Z, np.inf)[:, None]
            N[sl] = Z * np.exp(head.beta * shift[:, 0]) if head.kernel == "exp" else Z
    return U, N


def pair_sum(head, X, w, chunk_bytes):
    """Energy of one head, ``1/2 sum_ij w_i w_j K(<x_i, M x_j>)``."""
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
    ``-sum_j p_ij log(p_ij / w_j)`` (the discrete continuum entropy, <= 0).
    """
    Y = sources @ head.M.T
    out = np.empty(targets.shape[0])
    with np.errstate(divide="ignore"):
        logw = np.log(w) if relative else 0.0
    for sl in row_chunks(targets.shape[0], sources.shape[0], chunk_bytes):
        L = log_attention(head, targets[sl] @ Y.T, w)
        P = np.exp(L)
        out[sl] = -np.sum(np.where(P > 0, P * (L - logw), 0.0), axis=1)
    return out
