"""Clustering measures over a batch of token systems (B, n, d): what a phase-diagram cell records.

Each measure is computed per system from the Gram matrices ``G_b = X_b X_b^T`` (one batched matrix
product); :func:`ensemble_observer` averages them over the batch for
:func:`meanfield.core.integrate.integrate` / :func:`meanfield.models.step_rules.iterate`.  The thresholds follow
borjanG/2023-transformers-rotf (``phase-diagrams.py``): a pair is "together" when
``<x_i, x_j> > 0.999``, the cluster count is the rank of the 0/1 matrix ``[<x_i, x_j> > 0.9999]``
and the Gram-rank dimension counts eigenvalues of ``G_b`` above ``1e-3``.  Tokens must be unit vectors
(``| |x|^2 - 1 | <= UNIT_TOL = 3e-8``, :func:`meanfield.core.validate.unit_vectors`): the thresholds are cosines.
"""

from __future__ import annotations

import numpy as np

from ..core import cost, validate

__all__ = ["UNIT_TOL", "PAIR_THRESHOLD", "CLUSTER_THRESHOLD", "RANK_TOL", "gram", "pair_density", "one_cluster",
           "cluster_counts", "gram_rank", "ensemble_observer"]

UNIT_TOL = 3e-8
"""Largest ``| |x|^2 - 1 |`` of the tokens these measures accept: every token set that
:class:`~meanfield.models.batched.BatchedSystem` accepts (``| |x| - 1 | <= 1e-8``, i.e. ``| |x|^2 - 1 | <=
2.0000001e-8``) passes, so that ``iterate``'s observer never refuses its own start; the measures threshold
cosines near 1 (0.999, 0.9999), far above this."""

PAIR_THRESHOLD = 0.999
CLUSTER_THRESHOLD = 0.9999
RANK_TOL = 1e-3


def _batch(X):
    """Tokens (B, n, d), n >= 2, every row a unit vector (the measures threshold ``<x_i, x_j>``: never renormalized)."""
    X = validate.real_array("X", X, ("B", "n", "d"))
    if X.shape[0] < 1 or X.shape[1] < 2:
        raise ValueError(f"X must have B >= 1 systems of n >= 2 tokens (pairs are measured); received shape {X.shape}")
    validate.unit_vectors("X", X.reshape(-1, X.shape[2]), tol=UNIT_TOL)
    return X


GRAM_MAX_BYTES = 2 * 2**30
"""Largest ``8 B n^2`` bytes of Gram matrices these measures form (they are dense and cubic-cost:
meant for ensembles of small systems; use :func:`meanfield.analysis.clustering.clustering` for large n)."""


def gram(X):
    """Gram matrices ``X_b X_b^T``, shape (B, n, n); refused (by the cost guard) beyond :data:`GRAM_MAX_BYTES`.

    Parameters
    ----------
    X : array_like, shape (B, n, d)
        ``B >= 1`` systems of ``n >= 2`` unit tokens.

    Returns
    -------
    ndarray, shape (B, n, n)

    Raises
    ------
    ValueError
        ``X`` not real and finite of shape (B, n, d) with ``B >= 1``, ``n >= 2``, rows not unit vectors, or Gram
        matrices above :data:`GRAM_MAX_BYTES`.
    """
    X = _batch(X)
    B, n = X.shape[:2]
    cost.guard(f"Gram matrices of X of shape {X.shape}", bytes=8.0 * B * n * n, limit_bytes=GRAM_MAX_BYTES,
               limit_name_bytes="GRAM_MAX_BYTES", detail="B n^2 doubles",
               fix="fewer systems (batch) or tokens (n): these ensemble measures are for many small systems; "
                   "use meanfield.analysis.clustering.clustering per system for large n",
               lift="raise meanfield.analysis.ensembles.GRAM_MAX_BYTES")
    return X @ np.swapaxes(X, 1, 2)


def pair_density(X, threshold=PAIR_THRESHOLD):
    """Per system, the fraction of ordered pairs ``i != j`` with ``<x_i, x_j> > threshold``, shape (B,).

    Parameters
    ----------
    X : array_like, shape (B, n, d)
        ``B >= 1`` systems of ``n >= 2`` unit tokens.
    threshold : float
        In ``[-1, 1]``.

    Returns
    -------
    ndarray, shape (B,)

    Raises
    ------
    ValueError
        ``X`` not real and finite of shape (B, n, d) with ``B >= 1``, ``n >= 2``, rows not unit vectors, or Gram
        matrices above :data:`GRAM_MAX_BYTES`, or ``threshold`` outside ``[-1, 1]``.
    """
    threshold = validate.real("threshold", threshold, -1, 1)
    G = gram(X)
    n = G.shape[1]
    off = ~np.eye(n, dtype=bool)
    return (G[:, off] > threshold).mean(axis=1)


def one_cluster(X, threshold=PAIR_THRESHOLD):
    """Per system, whether every pair has ``<x_i, x_j> > threshold`` (one cluster), shape (B,) of bool.

    Parameters
    ----------
    X : array_like, shape (B, n, d)
        ``B >= 1`` systems of ``n >= 2`` unit tokens.
    threshold : float
        In ``[-1, 1]``.

    Returns
    -------
    ndarray of bool, shape (B,)

    Raises
    ------
    ValueError
        As for :func:`pair_density`.
    """
    return pair_density(X, threshold) == 1.0


def cluster_counts(X, threshold=CLUSTER_THRESHOLD):
    """Per system, the rank of ``[<x_i, x_j> > threshold]`` (the number of clusters when they are
    well separated: a block matrix of ones has one unit of rank per block), shape (B,) of int.

    Parameters
    ----------
    X : array_like, shape (B, n, d)
        ``B >= 1`` systems of ``n >= 2`` unit tokens.
    threshold : float
        In ``[-1, 1]``.

    Returns
    -------
    ndarray of int, shape (B,)

    Raises
    ------
    ValueError
        ``X`` not real and finite of shape (B, n, d) with ``B >= 1``, ``n >= 2``, rows not unit vectors, or Gram
        matrices above :data:`GRAM_MAX_BYTES`, or ``threshold`` outside ``[-1, 1]``.
    """
    threshold = validate.real("threshold", threshold, -1, 1)
    A = (gram(X) > threshold).astype(float)
    return np.linalg.matrix_rank(A).astype(int)


def gram_rank(X, tol=RANK_TOL):
    """Per system, the number of eigenvalues of ``X_b X_b^T`` above ``tol`` (the dimension the tokens
    span, to ``tol``), shape (B,) of int.

    Parameters
    ----------
    X : array_like, shape (B, n, d)
        ``B >= 1`` systems of ``n >= 2`` unit tokens.
    tol : float
        ``> 0``.

    Returns
    -------
    ndarray of int, shape (B,)

    Raises
    ------
    ValueError
        ``X`` not real and finite of shape (B, n, d) with ``B >= 1``, ``n >= 2``, rows not unit vectors, or Gram
        matrices above :data:`GRAM_MAX_BYTES`, or ``tol`` not positive and finite.
    """
    tol = validate.real("tol", tol, 0, lo_open=True)
    return (np.linalg.eigvalsh(gram(X)) > tol).sum(axis=1)


def ensemble_observer(pair_threshold=PAIR_THRESHOLD, cluster_threshold=CLUSTER_THRESHOLD, rank_tol=RANK_TOL):
    """``observe(t, X) -> dict`` of batch summaries: ``one_cluster`` (fraction of systems in one cluster),
    ``pair_density`` (mean over systems), ``median_clusters``, ``mean_gram_rank``.

    Parameters
    ----------
    pair_threshold : float
        Of :func:`pair_density` and :func:`one_cluster`, in ``[-1, 1]``.
    cluster_threshold : float
        Of :func:`cluster_counts`, in ``[-1, 1]``.
    rank_tol : float
        Of :func:`gram_rank`, ``> 0``.

    Returns
    -------
    callable
        ``observe(t, X) -> dict`` of four floats (``X`` refused as by :func:`gram`).

    Raises
    ------
    ValueError
        A threshold outside ``[-1, 1]`` or a ``rank_tol`` that is not positive and finite.
    """
    validate.real("pair_threshold", pair_threshold, -1, 1)
    validate.real("cluster_threshold", cluster_threshold, -1, 1)
    validate.real("rank_tol", rank_tol, 0, lo_open=True)

    def observe(t, X):
        G = gram(X)                                  # once for the three measures
        n = G.shape[1]
        dens = (G[:, ~np.eye(n, dtype=bool)] > pair_threshold).mean(axis=1)
        return {"one_cluster": float(np.mean(dens == 1.0)), "pair_density": float(dens.mean()),
                "median_clusters": float(np.median(np.linalg.matrix_rank((G > cluster_threshold).astype(float)))),
                "mean_gram_rank": float((np.linalg.eigvalsh(G) > rank_tol).sum(axis=1).mean())}

    return observe
