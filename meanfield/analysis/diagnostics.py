r"""Particle diagnostics (MODEL.md section 1): pure functions of a :class:`ParticleSystem` and tokens.

All functions take tokens ``X`` (n, d) and optional weights ``w`` (n,) (uniform by default).
Per-head forces ``u_i^h`` are the normalized aggregates of :meth:`ParticleSystem.forces`
(``f_i^h / n`` for mean normalization with uniform weights); for mean heads every condition
below is invariant under that common scaling (softmax heads are each divided by their own Z_i^h).

* :func:`dissipation` -- ``sum_i w_i |dx_i/dt|^2`` (= dE/dt for symmetric value-aligned mean heads)
* :func:`energy_rate_terms` -- the matrix ``C[h, h'] = sum_i w_i <P u_i^h, P u_i^{h'}>``
* :func:`radial_shadows` -- ``a_i^h = <u_i^h, x_i>``, ``|u_i^h|``, ``|P u_i^h|``
* :func:`radial_dominance` -- both readings of Condition 8 per token and head
* :func:`attention_entropy`, :func:`attention_entropy_rate` -- ``H_i^h`` and the covariance identity
* :func:`observer` -- the ``observe(t, X)`` hook of particle runs (:data:`OBSERVABLES`): energies,
  dissipation, Shannon ``entropy`` and ``relative_entropy`` (the PDE's), order parameter, clustering;
  O(n) wherever the system sums spectrally, for any token weights (:func:`observer_passes`)

Clustering measures live in :mod:`meanfield.analysis.clustering`.
"""

from __future__ import annotations

import numpy as np

from ..core import validate
from ..core.kernels import KERNELS, NORMALIZATIONS
from ..core.sums import entropy_rows, log_attention, score_sides
from ..models.particles import ParticleSystem, check_weights, project_tangent
from .clustering import clustering as _clustering
from .clustering import mean_inner

__all__ = ["dissipation", "energy_rate_terms", "radial_shadows", "radial_dominance",
           "attention_entropy", "attention_entropy_rate", "observer", "observer_passes", "OBSERVABLES"]

OBSERVABLES = ("energy", "energy_head", "dissipation", "entropy", "relative_entropy", "order_parameter",
               "min_inner", "mean_inner", "n_clusters")
"""What :func:`observer` records (the clustering measures on the sphere only)."""


def dissipation(system: ParticleSystem, X, w=None) -> float:
    """``sum_i w_i |dx_i/dt|^2`` (``(1/n) sum |dx_i/dt|^2`` for uniform weights).

    Parameters
    ----------
    system : ParticleSystem
        The heads and geometry.
    X : array_like, shape (n, d)
        Tokens.
    w : array_like, shape (n,), optional
        Token weights (default uniform).

    Returns
    -------
    float
        The dissipation.

    Raises
    ------
    ValueError
        Tokens or weights refused by :meth:`ParticleSystem.check`.
    """
    X, w = system.check(X, w)
    v = system.velocity(X, w)
    return float(w @ np.einsum("nd,nd->n", v, v))


def _projected_forces(system, X, w):
    U, _ = system.forces(X, w, checked=True)
    if system.geometry == "sphere":
        return U, np.stack([project_tangent(X, u) for u in U])
    return U, U


def energy_rate_terms(system: ParticleSystem, X, w=None):
    """Self and cross terms of the per-head energy rates, shape (H, H).

    .. math:: C_{hh'} = \\sum_i w_i \\langle P u_i^h, P u_i^{h'} \\rangle

    For symmetric value-aligned heads with mean normalization the row sums are the exact
    ``dE_h/dt`` (MODEL.md: ``(1/n^3) sum_i <f^h, P sum f^{h'}>``), the diagonal holds the self
    terms and ``<P u^h, P u^{h'}> = <u^h, u^{h'}> - a^h a^{h'}`` on the sphere.  For other heads
    compare with :meth:`ParticleSystem.energy_rates`, which is exact for any heads.

    Parameters
    ----------
    system : ParticleSystem
        The heads and geometry (``P`` is the tangent projection on the sphere, the identity when flat).
    X : array_like, shape (n, d)
        Tokens.
    w : array_like, shape (n,), optional
        Token weights (default uniform).

    Returns
    -------
    ndarray, shape (H, H)
        ``C[h, h']``.

    Raises
    ------
    ValueError
        Tokens or weights refused by :meth:`ParticleSystem.check`.
    """
    X, w = system.check(X, w)
    _, PU = _projected_forces(system, X, w)
    return np.einsum("n,hnd,knd->hk", w, PU, PU)


def radial_shadows(system: ParticleSystem, X, w=None) -> dict:
    """Radial shadows and force norms per head and token.

    Parameters
    ----------
    system : ParticleSystem
        The heads and geometry.
    X : array_like, shape (n, d)
        Tokens.
    w : array_like, shape (n,), optional
        Token weights (default uniform).

    Returns
    -------
    dict with arrays of shape (H, n): ``a`` (``<u_i^h, x_i>``), ``norm`` (``|u_i^h|``),
    ``tangential`` (``|P u_i^h|``; equal to ``norm`` for flat dynamics).
    """
    X, w = system.check(X, w)
    U, PU = _projected_forces(system, X, w)
    return {"a": np.einsum("hnd,nd->hn", U, X), "norm": np.linalg.norm(U, axis=2),
            "tangential": np.linalg.norm(PU, axis=2)}


def radial_dominance(system: ParticleSystem, X, w=None) -> dict:
    """Both readings of Condition 8 (radial dominance) per head and token, shape (H, n).

    .. math::

        \\text{exact:}\\quad |P u_i^h|^2 \\ge a_i^h \\sum_{h' \\ne h} a_i^{h'},\\qquad
        \\text{norm-bounded:}\\quad |P u_i^h|^2 \\ge |a_i^h| \\sum_{h' \\ne h} |u_i^{h'}|

    Returns ``exact`` and ``norm_bounded`` (bool) and their margins (left minus right side).

    Parameters
    ----------
    system : ParticleSystem
        The heads and geometry.
    X : array_like, shape (n, d)
        Tokens.
    w : array_like, shape (n,), optional
        Token weights (default uniform).

    Returns
    -------
    dict
        ``exact``, ``norm_bounded`` (bool arrays) and ``exact_margin``, ``norm_bounded_margin`` (float
        arrays), each of shape (H, n).

    Raises
    ------
    ValueError
        Tokens or weights refused by :meth:`ParticleSystem.check`.
    """
    r = radial_shadows(system, X, w)
    a, nrm, tan2 = r["a"], r["norm"], r["tangential"] ** 2
    others_a = a.sum(axis=0, keepdims=True) - a
    others_norm = nrm.sum(axis=0, keepdims=True) - nrm
    m_exact = tan2 - a * others_a
    m_norm = tan2 - np.abs(a) * others_norm
    return {"exact": m_exact >= 0, "norm_bounded": m_norm >= 0,
            "exact_margin": m_exact, "norm_bounded_margin": m_norm}


def attention_entropy(system: ParticleSystem, X, w=None, relative=False):
    """Attention entropies per head and token, shape (H, n).

    ``p_ij^h ∝ w_j k_h(s_ij^h)``.  ``relative=False``: Shannon entropy
    ``H_i^h = -sum_j p_ij log p_ij`` (in ``[0, log n]`` for uniform weights).
    ``relative=True``: ``-sum_j p_ij log(p_ij / w_j)``, the discrete form of the continuum
    entropy ``H_h(x)`` of MODEL.md section 3 (``<= 0``; equals ``H_i^h - log n`` for uniform weights).

    Parameters
    ----------
    system : ParticleSystem
        The heads (Sinkhorn heads: rows of the scaled plan).
    X : array_like, shape (n, d)
        Tokens.
    w : array_like, shape (n,), optional
        Token weights (default uniform).
    relative : bool, optional
        The relative entropy instead of Shannon's (default False).

    Returns
    -------
    ndarray, shape (H, n)
        The entropies (NaN for a row without attention mass).

    Raises
    ------
    ValueError
        Tokens or weights refused by :meth:`ParticleSystem.check`, or a direct evaluation above
        :data:`~meanfield.models.particles.DIRECT_TIME_LIMIT_S` (always direct).
    """
    X, w = system.check(X, w)
    system.check_direct(X.shape[0], "attention_entropy (always direct)",
                        argument="system.spectral.entropies (relative entropies, spectral)")
    # Sinkhorn heads: rows p_ij = a_i k_ij b_j w_j, i.e. w scaled by b (None: row-local heads)
    scale = [None if r is None else r.b for r in system.sinkhorn_scalings(X, w, direct=True)]
    return np.stack([entropy_rows(head, X, X, w, system.chunk_bytes, relative, scale=b)
                     for head, b in zip(system.heads, scale)])


def attention_entropy_rate(system: ParticleSystem, X, Xdot=None, w=None):
    r"""Entropy rates from the covariance identity (kernels with ``k > 0``), shape (H, n).

    .. math:: \dot H_i^h = -\big(\textstyle\sum_j p_{ij} \ell_{ij}\dot \ell_{ij}
              - (\sum_j p_{ij} \ell_{ij})(\sum_j p_{ij}\dot \ell_{ij})\big),\quad
              \ell = \log k(s),\ \dot\ell = (\log k)'(s)\,\dot s,\quad
              \dot s_{ij} = \langle \dot x_i, M x_j\rangle + \langle x_i, M \dot x_j\rangle

    (exp: ``ell = beta s``, i.e. ``-beta^2 Cov_p(s, sdot)``, MODEL.md section 1).  Exact for any
    motion ``Xdot`` (default: the flow) of the relative entropy, and of the Shannon entropy when the
    weights are uniform.

    Parameters
    ----------
    system : ParticleSystem
        The heads (row-local normalizations, kernels with ``k > 0``).
    X : array_like, shape (n, d)
        Tokens.
    Xdot : array_like, shape (n, d), optional
        Token velocities (default the system's flow at ``X``).
    w : array_like, shape (n,), optional
        Token weights (default uniform).

    Returns
    -------
    ndarray, shape (H, n)
        ``dH_i^h/dt``.

    Raises
    ------
    ValueError
        Tokens or weights refused by :meth:`ParticleSystem.check`, three direct passes above
        :data:`~meanfield.models.particles.DIRECT_TIME_LIMIT_S`, ``Xdot`` of another shape than ``X``, a
        Sinkhorn head, or a kernel that vanishes somewhere (relu).
    """
    X, w = system.check(X, w)
    system.check_direct(X.shape[0], "attention_entropy_rate (always direct)", passes=3,
                        argument="time differences of the spectral entropies (system.spectral.entropies)")
    Xdot = system.velocity(X, w) if Xdot is None else np.asarray(Xdot, dtype=float)
    if Xdot.shape != X.shape:
        raise ValueError(f"Xdot must have the shape of X {X.shape}; received {Xdot.shape}")
    n = X.shape[0]
    out = np.empty((system.n_heads, n))
    for h, head in enumerate(system.heads):
        kern = KERNELS[head.kernel]
        if not NORMALIZATIONS[head.normalization].row_local:
            raise ValueError(f"attention_entropy_rate needs row-local normalizations (mean, softmax): the "
                             f"covariance identity does not hold for the Sinkhorn rows of heads[{h}], whose "
                             f"scalings move with the tokens; received normalization {head.normalization!r} "
                             f"(use time differences of attention_entropy)")
        if not kern.positive:
            raise ValueError(f"attention_entropy_rate needs kernels with k > 0 (one of "
                             f"{[k for k, v in KERNELS.items() if v.positive]}); head {h} has kernel {head.kernel!r}")
        # s = T Y^T: dense T = X, rows of Y (M x_j)^T; factored (M = A B^T) T = X A, Y = X B (O(n^2 r) per product)
        T, Y, _ = score_sides(head, X, X)
        Tdot, Ydot, _ = score_sides(head, Xdot, Xdot)
        for sl in system.chunks(n):
            S = T[sl] @ Y.T
            Sdot = Tdot[sl] @ Y.T + T[sl] @ Ydot.T
            P = np.exp(log_attention(head, S, w))
            ell, elldot = kern.log_value(head, S), kern.log_derivative(head, S) * Sdot
            m, md = np.sum(P * ell, axis=1), np.sum(P * elldot, axis=1)
            out[h, sl] = -(np.sum(P * ell * elldot, axis=1) - m * md)
    return out


def _is_uniform(w) -> bool:
    """Whether validated weights ``w`` (n,) are all equal (then ``1/n`` up to the weights' tolerance)."""
    return bool(np.all(w == w[0]))


def _entropies(system, X, w, uniform):
    r"""Shannon and relative attention entropies, each (H, n), by the sums the system uses.

    Relative: ``R_i = -sum_j p_ij log(p_ij / w_j) = log Z_i - Q_i / Z_i`` (spectral:
    :meth:`SpectralSum.entropies <meanfield.models.fastsum.SpectralSum.entropies>`).  Shannon:
    ``H_i = R_i - sum_j p_ij log w_j``, i.e. ``R_i - log w`` for uniform weights and otherwise
    ``R_i - (1/Z_i) sum_j w_j log(w_j) k_ij``, one more kernel sum (sources ``w log w``, ``0 log 0 = 0``).
    Spectral wherever ``system.uses_spectral(n)``, for any weights; otherwise direct (refused up front
    beyond the direct limit).
    """
    if system.uses_spectral(X.shape[0]):
        spec = system.spectral
        if uniform:
            R = spec.entropies(X, w)
            return R - np.log(w[0]), R
        R = spec.entropies(X, w)
        H = spec.entropies(X, w, shannon=True)
        return H, R
    R = attention_entropy(system, X, w, relative=True)
    return (R - np.log(w[0]) if uniform else attention_entropy(system, X, w)), R


def observer_passes(system: ParticleSystem, n, w=None) -> int:
    """Direct O(n^2) passes one :func:`observer` record makes over ``n`` tokens: 0 wherever the system
    sums spectrally (any weights), else 3 (energies, dissipation, relative entropies) plus 1 for the
    Shannon entropies of non-uniform weights.  :func:`meanfield.solve_particles` counts them in its
    up-front cost estimate (:meth:`ParticleSystem.check_direct_run`).

    Parameters
    ----------
    system : ParticleSystem
        The system observed.
    n : int
        Number of tokens, ``>= 1``.
    w : array_like, shape (n,), optional
        Token weights (None or all equal: uniform).

    Returns
    -------
    int
        0, 3 or 4.

    Raises
    ------
    ValueError
        ``n`` not an integer ``>= 1``.
    """
    n = validate.integer("n", n, 1)
    if system.uses_spectral(n):
        return 0
    return 3 if w is None or _is_uniform(np.asarray(w, dtype=float)) else 4


def _inner_measures(X, threshold, full):
    """:func:`~meanfield.analysis.clustering.clustering` (``full``) or only its O(n) ``mean_inner``."""
    return _clustering(X, threshold) if full else {"mean_inner": mean_inner(X)}


def observer(system: ParticleSystem, w=None, threshold=0.99, per_token=False, clustering=True):
    """The ``observe(t, X)`` hook of particle runs (:data:`OBSERVABLES`): :func:`meanfield.solve_particles`'
    default, the paired runs' and the main job's.

    Per recorded time: ``energy`` (total) and ``energy_head`` (H,); ``dissipation``
    ``sum_i w_i |dx_i/dt|^2``; ``entropy`` (H,) the weighted mean over tokens of the Shannon attention
    entropy ``H_i^h = -sum_j p_ij log p_ij`` (MODEL.md section 1, in ``[0, log n]`` for uniform
    weights); ``relative_entropy`` (H,) the weighted mean of ``-sum_j p_ij log(p_ij / w_j)``
    (``H_i^h - log n`` for uniform weights, ``<= 0``: MODEL.md section 3, the quantity compared with
    the PDE's ``relative_entropy``); ``order_parameter`` ``|sum_i w_i x_i|``; on the sphere the
    :func:`~meanfield.analysis.clustering.clustering` measures ``min_inner``, ``mean_inner``,
    ``n_clusters`` (at ``threshold``).  ``per_token=True`` adds ``entropy_token`` and
    ``relative_entropy_token`` (H, n).

    Every sum is the one the system uses (``system.uses_spectral(n)``): spectral Funk-Hecke sums,
    O(n), for every quantity and any token weights ``w`` (n,) (default uniform; uniform weights given
    explicitly are the same case, and give the same record, as ``w=None``), or direct pairwise sums
    (:func:`observer_passes` of them per record), refused up front beyond
    :data:`meanfield.particles.DIRECT_TIME_LIMIT_S`.  ``clustering=False`` records only the O(n)
    ``mean_inner`` of the clustering measures (the KD-tree path of the others is O(n log n), but its
    constant is larger than the sums').

    Parameters
    ----------
    system : ParticleSystem
        The system of the run.
    w : array_like, shape (n,), optional
        Token weights (default uniform).
    threshold : float, optional
        Inner-product threshold of ``n_clusters``, in [-1, 1] (default 0.99).
    per_token : bool, optional
        Also record the per-token entropies (default False).
    clustering : bool, optional
        Record every clustering measure (default True) or only ``mean_inner``.

    Returns
    -------
    callable
        ``observe(t, X)`` -> dict of the recorded quantities at tokens ``X`` (n, d).

    Raises
    ------
    ValueError
        ``system`` not a :class:`ParticleSystem`, ``clustering`` or ``per_token`` not a bool, ``threshold``
        outside [-1, 1], or weights that are not a probability vector.
    """
    if not isinstance(system, ParticleSystem):
        raise ValueError(f"system must be a ParticleSystem; received {type(system).__name__}")
    full_clustering = validate.boolean("clustering", clustering)
    per_token = validate.boolean("per_token", per_token)
    threshold = validate.real("threshold", threshold, -1, 1)
    uniform = w is None or _is_uniform(check_weights(w, np.size(w)))

    def observe(t, X):
        X, wv = system.check(X, w)
        E = system.energies(X, wv)
        H, R = _entropies(system, X, wv, uniform)
        mean = (lambda A: A.mean(axis=1)) if uniform else (lambda A: A @ wv)
        rec = {"energy": float(E.sum()), "energy_head": E, "dissipation": dissipation(system, X, wv),
               "entropy": mean(H), "relative_entropy": mean(R),
               "order_parameter": float(np.linalg.norm(X.mean(axis=0) if uniform else wv @ X))}
        if per_token:
            rec["entropy_token"], rec["relative_entropy_token"] = H, R
        if system.geometry == "sphere":
            rec.update(_inner_measures(X, threshold, full_clustering))
        return rec

    return observe
