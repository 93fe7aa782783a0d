r"""Random-weight heads: the ensembles of borjanG/2023-transformers-rotf (``phase-diagrams.py``), seeded.

Score matrices ``M`` (``score``)::

    "identity"   M = I;
    "gaussian"   M = G_1 G_2 / sqrt(d), the product K^T Q of two standard Gaussian matrices;
    "wigner"     M = (G + G^T) / c with c = 2 on the diagonal and sqrt 2 off it (the peer's
                 "Wigner": every entry of variance 1, the diagonal included);
    "goe"        M = (G + G^T) / sqrt 2 (GOE: variance 1 off the diagonal, 2 on it).

Value matrices ``V`` (``value``)::

    "identity"   V = I;
    "gaussian"   V = G G^T / sqrt(d) (a random positive semi-definite V, as the peer draws it);
    "plus"       V = + M^T / c_V, "minus": V = - M^T / c_V (gradient ascent / descent of the
                 peer's V = +-KQ), with c_V = sqrt(d) (gaussian, wigner), sqrt(d + 1) (goe),
                 1 (identity).

The transposes translate the peer's row convention (``x_i^T M x_j``, outputs ``u^T V``) to
meanfield's ``V x_j``; ``M`` is the same.  Entries are not scaled by ``1/sqrt(d)`` beyond the above
(the peer's choice): use ``scale`` to multiply ``M``.

:func:`random_heads` draws one tuple of heads, or one per system (``systems=B``: independent draws,
the per-system heads of :class:`~meanfield.models.batched.BatchedSystem`); redraw at every layer
with a :class:`~meanfield.core.schedules.HeadSchedule` (:func:`random_layers`).
"""

from __future__ import annotations

import numpy as np

from . import cost, validate
from .heads import Head

__all__ = ["SCORE_ENSEMBLES", "VALUE_ENSEMBLES", "score_matrix", "value_matrix", "random_heads"]

SCORE_ENSEMBLES = ("gaussian", "wigner", "goe", "identity")
"""Allowed ``score`` of :func:`random_heads`."""

VALUE_ENSEMBLES = ("identity", "gaussian", "plus", "minus")
"""Allowed ``value`` of :func:`random_heads`."""

_VALUE_NORM = {"gaussian": lambda d: np.sqrt(d), "wigner": lambda d: np.sqrt(d), "goe": lambda d: np.sqrt(d + 1.0),
               "identity": lambda d: 1.0}


RANDOM_HEADS_SECONDS_PER_FLOP = 1e-10
"""Seconds per ``d^3`` of one (d, d) matrix product in :func:`random_heads` (measured 1.0e-10 with one
product per head, d = 500 and 1000, one thread); drawing a (d, d) Gaussian matrix: about 2e-8 s per entry."""


def estimate_random_heads(d, n_heads=1, systems=None, score="gaussian", value="identity") -> cost.Cost:
    """Estimated peak memory and time of :func:`random_heads` (sizes only): the heads keep two (d, d) float64
    matrices each, and one draw holds about two more (measured with tracemalloc: 48 bytes per d^2 for one head)."""
    count = float(n_heads) * (1 if systems is None else systems)
    products = (score == "gaussian") + (value == "gaussian")
    draws = (score != "identity") * (2 if score == "gaussian" else 1) + (value == "gaussian")
    secs = count * (products * float(d) ** 3 * RANDOM_HEADS_SECONDS_PER_FLOP + draws * 2e-8 * float(d) ** 2)
    return cost.Cost(f"random_heads(d={d}, n_heads={n_heads}, systems={systems})",
                     (16.0 * count + 32.0) * float(d) ** 2, secs,
                     f"{count:.0f} head(s) of two (d, d) float64 matrices, score={score!r}, value={value!r}")


def score_matrix(score, d, rng):
    """One score matrix of the ensemble ``score`` (see the module docstring), shape (d, d); ``rng`` a
    ``numpy.random.Generator`` (or a seed).

    Parameters
    ----------
    score : str
        One of :data:`SCORE_ENSEMBLES`.
    d : int
        Dimension, ``>= 1``.
    rng : None, int or numpy.random.Generator
        The random source (advanced when a Generator).

    Returns
    -------
    ndarray, shape (d, d)

    Raises
    ------
    ValueError
        An unknown ensemble, ``d`` below 1, an invalid ``rng``, or a ``d`` above the memory or time limit.
    """
    validate.choice("score", score, SCORE_ENSEMBLES)
    d = validate.integer("d", d, 1)
    rng = validate.rng(rng, "rng")
    estimate_random_heads(d, 1, None, score, "identity").check("a smaller d")
    if score == "identity":
        return np.eye(d)
    G = rng.standard_normal((d, d))
    if score == "gaussian":
        return G @ rng.standard_normal((d, d)) / np.sqrt(d)
    if score == "wigner":
        return (G + G.T) / (np.full((d, d), np.sqrt(2.0)) + (2.0 - np.sqrt(2.0)) * np.eye(d))
    return (G + G.T) / np.sqrt(2.0)                     # goe


def value_matrix(value, score, M, rng):
    """One value matrix of the ensemble ``value`` given the score ensemble and its draw ``M`` (d, d).

    Parameters
    ----------
    value : str
        One of :data:`VALUE_ENSEMBLES`.
    score : str
        One of :data:`SCORE_ENSEMBLES` (fixes the normalization ``c_V`` of ``V = +-M^T / c_V``).
    M : array_like, shape (d, d)
        The score matrix drawn.
    rng : None, int or numpy.random.Generator
        The random source (``"gaussian"`` values only draw).

    Returns
    -------
    ndarray, shape (d, d)

    Raises
    ------
    ValueError
        An unknown ensemble, ``M`` not a finite square matrix, or an invalid ``rng``.
    """
    validate.choice("value", value, VALUE_ENSEMBLES)
    validate.choice("score", score, SCORE_ENSEMBLES)
    M = validate.real_array("M", M, ("d", "d"))
    if M.shape[0] != M.shape[1] or M.shape[0] < 1:
        raise ValueError(f"M must be a square (d, d) score matrix with d >= 1; received shape {M.shape}")
    d = M.shape[0]
    rng = validate.rng(rng, "rng")
    if value == "identity":
        return np.eye(d)
    if value == "gaussian":
        G = rng.standard_normal((d, d))
        return G @ G.T / np.sqrt(d)
    sign = 1.0 if value == "plus" else -1.0
    return sign * M.T / _VALUE_NORM[score](d)


def random_heads(d, n_heads=1, *, score="gaussian", value="identity", systems=None, seed=None, scale=1.0,
                 beta=1.0, kernel="exp", normalization="softmax", kernel_params=None):
    """Heads with random score and value matrices.

    Parameters
    ----------
    d, n_heads : int
    score : str
        One of :data:`SCORE_ENSEMBLES`.
    value : str
        One of :data:`VALUE_ENSEMBLES`.
    systems : int or None
        None: one tuple of heads (shared by every system); ``B``: a list of ``B`` independent tuples.
    seed : None, int or numpy.random.Generator
    scale : float
        Factor on ``M`` (applied before ``V = +-M^T / c_V`` is formed).
    beta, kernel, normalization, kernel_params
        As for :class:`~meanfield.core.heads.Head` (softmax by default, as in the peer).

    Returns
    -------
    tuple of Head, or list of ``systems`` tuples

    Raises
    ------
    ValueError
        ``d`` below 2, ``n_heads`` or ``systems`` below 1, an unknown ensemble, a ``scale`` that is not positive
        and finite, an invalid ``seed``, sizes above the memory or time limit, or a value :class:`Head` refuses.
    """
    d = validate.integer("d", d, 2)
    n_heads = validate.integer("n_heads", n_heads, 1)
    validate.choice("score", score, SCORE_ENSEMBLES)
    validate.choice("value", value, VALUE_ENSEMBLES)
    if systems is not None:
        systems = validate.integer("systems", systems, 1, what="None or a positive integer")
    scale = validate.real("scale", scale, positive=True)
    estimate_random_heads(d, n_heads, systems, score, value).check("a smaller d, fewer n_heads or systems")
    rng = validate.rng(seed)

    def draw():
        heads = []
        for _ in range(n_heads):
            M = scale * score_matrix(score, d, rng)
            heads.append(Head(M, value_matrix(value, score, M, rng), beta, kernel, normalization, kernel_params))
        return tuple(heads)

    return draw() if systems is None else [draw() for _ in range(systems)]
