"""Seeded initial token configurations on ``S^{d-1}`` (MODEL.md sections 1-2).

Every function takes ``seed`` (an int, None or a ``numpy.random.Generator``) and returns
tokens ``X`` of shape (n, d) with unit rows.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import vonmises_fisher

from . import cost, validate

__all__ = ["uniform_sphere", "von_mises_fisher", "vmf_mixture", "equiangular", "orthonormal",
           "random_rotation"]


INITIAL_SECONDS_PER_ENTRY = 5e-8
"""Seconds per drawn float64 entry (Gaussian draws and normalization: ~2e-8; scipy's vMF sampler a few times more)."""
DENSE_SECONDS_PER_FLOP = 1e-10
"""Seconds per ``d^3`` of a dense factorization (QR, eigh) of a (d, d) matrix."""


def _check_nd(n, d, n_min=1):
    return validate.integer("n", n, n_min), validate.integer("d", d, 2)


def _guard(what, entries=0.0, dense=0, fix="smaller sizes"):
    """Refuse (:func:`meanfield.core.cost.guard`) a draw of ``entries`` float64 numbers (four arrays of that
    size at the peak: draws, norms, copies) plus a dense (dense, dense) factorization (four matrices)."""
    cost.guard(what, bytes=32.0 * entries + 32.0 * float(dense) ** 2,
               seconds=INITIAL_SECONDS_PER_ENTRY * entries + DENSE_SECONDS_PER_FLOP * float(dense) ** 3, fix=fix)


def uniform_sphere(n, d=3, seed=None):
    """n i.i.d. points uniform on ``S^{d-1}`` (normalized Gaussians).

    Parameters
    ----------
    n : int
        Number of tokens, ``>= 1``.
    d : int
        Dimension, ``>= 2``.
    seed : None, int or numpy.random.Generator
        The random source.

    Returns
    -------
    ndarray, shape (n, d)
        Unit rows.

    Raises
    ------
    ValueError
        ``n`` or ``d`` out of range, an invalid ``seed``, or sizes above the memory or time limit
        (:func:`meanfield.core.cost.guard`).
    """
    n, d = _check_nd(n, d)
    _guard(f"uniform_sphere(n={n}, d={d})", float(n) * d, fix="a smaller n or d")
    X = validate.rng(seed).standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def random_rotation(d, seed=None):
    """A Haar-random rotation matrix in SO(d).

    Parameters
    ----------
    d : int
        Dimension, ``>= 2``.
    seed : None, int or numpy.random.Generator
        The random source.

    Returns
    -------
    ndarray, shape (d, d)
        Orthogonal with determinant +1.

    Raises
    ------
    ValueError
        ``d`` below 2, an invalid ``seed``, or a ``d`` above the memory or time limit.
    """
    d = validate.integer("d", d, 2)
    _guard(f"random_rotation(d={d})", dense=d, fix="a smaller d")
    Q, R = np.linalg.qr(validate.rng(seed).standard_normal((d, d)))
    Q = Q * np.sign(np.diag(R))
    if np.linalg.det(Q) < 0:
        Q[:, 0] = -Q[:, 0]
    return Q


def von_mises_fisher(n, mu, kappa, seed=None):
    """n i.i.d. draws from the von Mises-Fisher law with mean direction ``mu`` and concentration ``kappa``.

    Parameters
    ----------
    n : int
        Number of tokens, ``>= 1``.
    mu : array_like, shape (d,)
        Mean direction, a unit vector (``d >= 2``).
    kappa : float
        Concentration, ``>= 0`` (0: uniform, :func:`uniform_sphere`).
    seed : None, int or numpy.random.Generator
        The random source.

    Returns
    -------
    ndarray, shape (n, d)
        Unit rows.

    Raises
    ------
    ValueError
        ``mu`` not a unit vector of length ``>= 2``, ``n`` below 1, a negative or non-finite ``kappa``, an
        invalid ``seed``, or sizes above the memory or time limit.
    """
    mu = validate.unit_vector("mu", mu)
    n, _ = _check_nd(n, mu.size)
    kappa = validate.real("kappa", kappa, 0)
    _guard(f"von_mises_fisher(n={n}, d={mu.size})", 4.0 * n * mu.size, fix="a smaller n")
    if kappa == 0:
        return uniform_sphere(n, mu.size, seed)
    return np.atleast_2d(vonmises_fisher(mu, kappa).rvs(n, random_state=validate.rng(seed)))


def vmf_mixture(n, mus, kappas, weights=None, seed=None):
    """n draws from a mixture of vMF laws; component sizes are multinomial with ``weights``.

    Parameters
    ----------
    n : int
        Number of tokens, ``>= 1``.
    mus : array_like, shape (K, d)
        Mean directions, unit rows.
    kappas : float or array_like, shape (K,)
        Concentrations ``>= 0``: one for all components or one each.
    weights : array_like, shape (K,), optional
        Probability weights of the components (default equal).
    seed : None, int or numpy.random.Generator
        The random source.

    Returns
    -------
    ndarray, shape (n, d)
        Unit rows, in random order.

    Raises
    ------
    ValueError
        ``n`` below 1; ``mus`` not a non-empty (K, d) array of unit vectors; ``kappas`` neither one number nor
        ``K``, or negative; ``weights`` not ``K`` probabilities summing to 1; an invalid ``seed``; or sizes
        above the memory or time limit.
    """
    n = validate.integer("n", n, 1)
    mus = np.atleast_2d(validate.real_array("mus", mus))        # each row is checked by von_mises_fisher
    if mus.ndim != 2 or mus.shape[0] < 1:
        raise ValueError(f"mus must be unit vectors of shape (K, d) with K >= 1; received shape {mus.shape}")
    k = mus.shape[0]
    kappas = validate.real_array("kappas", kappas)
    if kappas.ndim > 1 or kappas.size not in (1, k):
        raise ValueError(f"kappas must be a number or {k} numbers (one per row of mus); received shape {kappas.shape}")
    if np.any(kappas < 0):
        raise ValueError(f"kappas must be finite numbers >= 0; received {kappas.tolist()!r}")
    _guard(f"vmf_mixture(n={n}, d={mus.shape[1]})", 6.0 * n * mus.shape[1], fix="a smaller n")
    kappas = np.broadcast_to(kappas.reshape(-1) if kappas.ndim else kappas, (k,))
    weights = validate.probability_weights("weights", weights, k)
    rng = validate.rng(seed)
    counts = rng.multinomial(n, weights)
    parts = [von_mises_fisher(c, mu, kap, rng) for c, mu, kap in zip(counts, mus, kappas) if c > 0]
    X = np.concatenate(parts)
    return X[rng.permutation(n)]


def equiangular(n, d, gamma, seed=None):
    """n unit vectors with ``<x_i, x_j> = gamma`` for all ``i != j``.

    Needs ``-1/(n-1) <= gamma < 1`` and ``n <= d`` (``n <= d + 1`` when ``gamma = -1/(n-1)``,
    the regular simplex).  Built as the symmetric square root of the Gram matrix
    ``(1-gamma) I + gamma 1 1^T``, then rotated by a random rotation when ``seed`` is given.

    Parameters
    ----------
    n : int
        Number of tokens, ``>= 2``.
    d : int
        Dimension, ``>= 2``.
    gamma : float
        The common inner product, in ``[-1/(n-1), 1)``.
    seed : None, int or numpy.random.Generator
        None: the unrotated configuration (spanning the first coordinates); otherwise the random rotation's source.

    Returns
    -------
    ndarray, shape (n, d)
        Unit rows.

    Raises
    ------
    ValueError
        ``n`` or ``d`` out of range, ``gamma`` outside ``[-1/(n-1), 1)``, a Gram matrix of rank above ``d``
        (``n > d``, or ``n > d + 1`` for the simplex), an invalid ``seed``, or sizes above the memory or time
        limit.
    """
    n, d = _check_nd(n, d, n_min=2)
    gamma = validate.real("gamma", gamma)
    if not (-1.0 / (n - 1) - 1e-15 <= gamma < 1):
        raise ValueError(f"gamma must lie in [-1/(n-1), 1) = [{-1.0 / (n - 1):.6g}, 1); received {gamma!r}")
    _guard(f"equiangular(n={n}, d={d})", float(n) * d, dense=max(n, d if seed is not None else 0),
           fix="a smaller n (or d)")
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
    """n <= d orthonormal tokens (the first n basis vectors, randomly rotated when ``seed`` is given).

    Parameters
    ----------
    n : int
        Number of tokens, ``1 <= n <= d``.
    d : int
        Dimension, ``>= 2``.
    seed : None, int or numpy.random.Generator
        None: the basis vectors themselves; otherwise the random rotation's source.

    Returns
    -------
    ndarray, shape (n, d)
        Orthonormal rows.

    Raises
    ------
    ValueError
        ``n`` or ``d`` out of range (``n > d`` included), an invalid ``seed``, or sizes above the memory or time
        limit.
    """
    n, d = _check_nd(n, d)
    if n > d:
        raise ValueError(f"n must be <= d = {d} for orthonormal tokens; received n = {n}")
    _guard(f"orthonormal(n={n}, d={d})", float(n) * d, dense=d if seed is not None else 0, fix="a smaller d")
    X = np.eye(n, d)
    if seed is not None:
        X = X @ random_rotation(d, seed).T
    return X
