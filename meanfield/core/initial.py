"""Seeded initial token configurations on ``S^{d-1}`` (MODEL.md sections 1-2).

Every function takes ``seed`` (an int, None or a ``numpy.random.Generator``) and returns
tokens ``X`` of shape (n, d) with unit rows.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import vonmises_fisher

__all__ = ["uniform_sphere", "von_mises_fisher", "vmf_mixture", "equiangular", "orthonormal",
           "random_rotation"]


def _rng(seed):
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _check_nd(n, d, n_min=1):
    if not (isinstance(n, (int, np.integer)) and n >= n_min):
        raise ValueError(f"n must be an integer >= {n_min}; received {n!r}")
    if not (isinstance(d, (int, np.integer)) and d >= 2):
        raise ValueError(f"d must be an integer >= 2; received {d!r}")


def _unit(name, mu, d=None):
    mu = np.asarray(mu, dtype=float)
    if mu.ndim != 1 or (d is not None and mu.size != d) or not np.all(np.isfinite(mu)):
        raise ValueError(f"{name} must be a finite vector of length d{'' if d is None else f' = {d}'}; "
                         f"received {mu!r}")
    nrm = np.linalg.norm(mu)
    if abs(nrm - 1) > 1e-8:
        raise ValueError(f"{name} must be a unit vector; received norm {nrm!r}")
    return mu


def uniform_sphere(n, d=3, seed=None):
    """n i.i.d. points uniform on ``S^{d-1}`` (normalized Gaussians)."""
    _check_nd(n, d)
    X = _rng(seed).standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def random_rotation(d, seed=None):
    """A Haar-random rotation matrix in SO(d)."""
    Q, R = np.linalg.qr(_rng(seed).standard_normal((d, d)))
    Q = Q * np.sign(np.diag(R))
    if np.linalg.det(Q) < 0:
        Q[:, 0] = -Q[:, 0]
    return Q


def von_mises_fisher(n, mu, kappa, seed=None):
    """n i.i.d. draws from the von Mises-Fisher law with mean direction ``mu`` and concentration ``kappa``."""
    mu = _unit("mu", mu)
    _check_nd(n, mu.size)
    if not (np.isfinite(kappa) and kappa >= 0):
        raise ValueError(f"kappa must be a finite number >= 0; received {kappa!r}")
    if kappa == 0:
        return uniform_sphere(n, mu.size, seed)
    return np.atleast_2d(vonmises_fisher(mu, kappa).rvs(n, random_state=_rng(seed)))


def vmf_mixture(n, mus, kappas, weights=None, seed=None):
    """n draws from a mixture of vMF laws; component sizes are multinomial with ``weights``."""
    mus = np.atleast_2d(np.asarray(mus, dtype=float))
    k = mus.shape[0]
    kappas = np.broadcast_to(np.asarray(kappas, dtype=float), (k,))
    weights = np.full(k, 1.0 / k) if weights is None else np.asarray(weights, dtype=float)
    if weights.shape != (k,) or np.any(weights < 0) or abs(weights.sum() - 1) > 1e-10:
        raise ValueError(f"weights must be {k} nonnegative numbers summing to 1; received {weights!r}")
    rng = _rng(seed)
    counts = rng.multinomial(n, weights)
    parts = [von_mises_fisher(c, mu, kap, rng) for c, mu, kap in zip(counts, mus, kappas) if c > 0]
    X = np.concatenate(parts)
    return X[rng.permutation(n)]


def equiangular(n, d, gamma, seed=None):
    """n unit vectors with ``<x_i, x_j> = gamma`` for all ``i != j``.

    Needs ``-1/(n-1) <= gamma < 1`` and ``n <= d`` (``n <= d + 1`` when ``gamma = -1/(n-1)``,
    the regular simplex).  Built as the symmetric square root of the Gram matrix
    ``(1-gamma) I + gamma 1 1^T``, then rotated by a random rotation when ``seed`` is given.
    """
    _check_nd(n, d, n_min=2)
    if not (-1.0 / (n - 1) - 1e-15 <= gamma < 1):
        raise ValueError(f"gamma must lie in [-1/(n-1), 1) = [{-1.0 / (n - 1):.6g}, 1); received {gamma!r}")
    G = (1 - gamma) * np.eye(n) + gamma * np.ones((n, n))
    evals, evecs = np.linalg.eigh(G)
    evals = np.clip(evals, 0, None)   # only the simplex case has a (round-off) zero eigenvalue
    rank = int(np.sum(evals > 1e-12))
    if rank > d:
        raise ValueError(f"an equiangular set of n = {n} tokens with gamma = {gamma} needs d >= {rank}; received d = {d}")
    F = evecs[:, -rank:] * np.sqrt(evals[-rank:])      # F F^T = G, rank columns
    X = np.zeros((n, d))
    X[:, :rank] = F
    X /= np.linalg.norm(X, axis=1, keepdims=True)       # exact unit rows (round-off level change)
    if seed is not None:
        X = X @ random_rotation(d, seed).T
    return X


def orthonormal(n, d, seed=None):
    """n <= d orthonormal tokens (the first n basis vectors, randomly rotated when ``seed`` is given)."""
    _check_nd(n, d)
    if n > d:
        raise ValueError(f"n must be <= d = {d} for orthonormal tokens; received n = {n}")
    X = np.eye(d)[:n]
    if seed is not None:
        X = X @ random_rotation(d, seed).T
    return X
