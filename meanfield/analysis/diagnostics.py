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
* :func:`clustering` -- min / mean pairwise inner product and clusters at a threshold
* :func:`observer` -- a ready-made ``observe(t, y)`` hook for :func:`meanfield.integrate.integrate`
* :func:`particle_observer` -- the hook of the paired runs and the main job (:data:`PARTICLE_OBSERVABLES`):
  energies, dissipation, *relative* entropy (comparable with the PDE's), order parameter, clustering
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from ..core import validate
from ..core.kernels import KERNELS
from ..core.sums import entropy_rows, log_attention
from ..models.particles import ParticleSystem, project_tangent

__all__ = ["dissipation", "energy_rate_terms", "radial_shadows", "radial_dominance",
           "attention_entropy", "attention_entropy_rate", "clustering", "observer", "particle_observer",
           "PARTICLE_OBSERVABLES"]

PARTICLE_OBSERVABLES = ("energy", "energy_head", "dissipation", "entropy", "order_parameter",
                        "min_inner", "mean_inner", "n_clusters")
"""What :func:`particle_observer` records (the clustering measures on the sphere only)."""


def dissipation(system: ParticleSystem, X, w=None) -> float:
    """``sum_i w_i |dx_i/dt|^2`` (``(1/n) sum |dx_i/dt|^2`` for uniform weights)."""
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
    """
    X, w = system.check(X, w)
    _, PU = _projected_forces(system, X, w)
    return np.einsum("n,hnd,knd->hk", w, PU, PU)


def radial_shadows(system: ParticleSystem, X, w=None) -> dict:
    """Radial shadows and force norms per head and token.

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
    """
    X, w = system.check(X, w)
    system.check_direct(X.shape[0], "attention_entropy (always direct)",
                        argument="system.spectral.entropies (relative entropies, spectral)")
    return np.stack([entropy_rows(head, X, X, w, system.chunk_bytes, relative) for head in system.heads])


def attention_entropy_rate(system: ParticleSystem, X, Xdot=None, w=None):
    r"""Entropy rates from the covariance identity (kernels with ``k > 0``), shape (H, n).

    .. math:: \dot H_i^h = -\big(\textstyle\sum_j p_{ij} \ell_{ij}\dot \ell_{ij}
              - (\sum_j p_{ij} \ell_{ij})(\sum_j p_{ij}\dot \ell_{ij})\big),\quad
              \ell = \log k(s),\ \dot\ell = (\log k)'(s)\,\dot s,\quad
              \dot s_{ij} = \langle \dot x_i, M x_j\rangle + \langle x_i, M \dot x_j\rangle

    (exp: ``ell = beta s``, i.e. ``-beta^2 Cov_p(s, sdot)``, MODEL.md section 1).  Exact for any
    motion ``Xdot`` (default: the flow) of the relative entropy, and of the Shannon entropy when the
    weights are uniform.
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
        if not kern.positive:
            raise ValueError(f"attention_entropy_rate needs kernels with k > 0 (one of "
                             f"{[k for k, v in KERNELS.items() if v.positive]}); head {h} has kernel {head.kernel!r}")
        Y, Ydot = X @ head.M.T, Xdot @ head.M.T
        for sl in system.chunks(n):
            S = X[sl] @ Y.T
            Sdot = Xdot[sl] @ Y.T + X[sl] @ Ydot.T
            P = np.exp(log_attention(head, S, w))
            ell, elldot = kern.log_value(head, S), kern.log_derivative(head, S) * Sdot
            m, md = np.sum(P * ell, axis=1), np.sum(P * elldot, axis=1)
            out[h, sl] = -(np.sum(P * ell * elldot, axis=1) - m * md)
    return out


def clustering(X, threshold=0.99, chunk_rows=2048) -> dict:
    """Clustering measures of unit tokens ``X`` (n, d).

    Returns ``min_inner`` and ``mean_inner`` (over pairs ``i != j``) and ``n_clusters``: the
    connected components of the graph linking tokens with ``<x_i, x_j> >= threshold``.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must have shape (n, d) with n >= 2; received shape {X.shape}")
    if not (-1 <= threshold <= 1):
        raise ValueError(f"threshold must lie in [-1, 1]; received {threshold!r}")
    n = X.shape[0]
    s = X.sum(axis=0)
    mean_inner = (s @ s - np.einsum("nd,nd->", X, X)) / (n * (n - 1))
    min_inner, rows, cols = np.inf, [], []
    for i in range(0, n, chunk_rows):
        G = X[i:i + chunk_rows] @ X.T
        idx = np.arange(G.shape[0])
        G[idx, i + idx] = np.inf
        min_inner = min(min_inner, G.min())
        r, c = np.nonzero(G >= threshold)
        rows.append(r + i)
        cols.append(c)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    A = csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    n_clusters = connected_components(A, directed=False)[0]
    return {"min_inner": float(min_inner), "mean_inner": float(mean_inner), "n_clusters": int(n_clusters)}


def _shannon_entropies(system, X, w):
    """Shannon attention entropies (H, n) by the sums the system uses: spectral (relative + log n, uniform
    weights only) when ``system.uses_spectral(n)``, otherwise direct (refused beyond the direct limit)."""
    if w is None and system.uses_spectral(X.shape[0]):
        return system.spectral.entropies(X, np.full(X.shape[0], 1.0 / X.shape[0])) + np.log(X.shape[0])
    return attention_entropy(system, X, w)


def _inner_measures(X, threshold, full):
    """:func:`clustering` (``full``) or only its O(n) measure ``mean_inner = (|sum x|^2 - n) / (n (n - 1))``."""
    if full:
        return clustering(X, threshold)
    s = X.sum(axis=0)
    n = X.shape[0]
    return {"mean_inner": float((s @ s - np.einsum("nd,nd->", X, X)) / (n * (n - 1)))}


def observer(system: ParticleSystem, w=None, threshold=0.99, per_token=False, clustering=True):
    """An ``observe(t, X)`` hook recording energy, per-head energies, dissipation, mean
    attention entropy per head and clustering measures (optionally per-token entropies).

    Every sum follows ``system.uses_spectral(n)``: at large n with zonal heads on S^2 the energies,
    dissipation and (uniform weights) entropies are spectral, O(n); a direct path that would exceed
    :data:`meanfield.particles.DIRECT_TIME_LIMIT_S` is refused up front.  ``clustering=False`` records
    only the O(n) ``mean_inner`` of the clustering measures.
    """
    full_clustering = validate.boolean("clustering", clustering)

    def observe(t, X):
        E = system.energies(X, w)
        H = _shannon_entropies(system, np.asarray(X, dtype=float), w)
        rec = {"energy": E.sum(), "energy_head": E, "dissipation": dissipation(system, X, w),
               "entropy": H.mean(axis=1) if w is None else H @ np.asarray(w, dtype=float)}
        if per_token:
            rec["entropy_token"] = H
        if system.geometry == "sphere":
            rec.update(_inner_measures(np.asarray(X, dtype=float), threshold, full_clustering))
        return rec

    return observe


def particle_observer(system: ParticleSystem, w=None, threshold=0.99, clustering=True):
    """The ``observe(t, X)`` hook of the paired runs and the main job (:data:`PARTICLE_OBSERVABLES`).

    Per recorded time: ``energy`` (total) and ``energy_head`` (H,); ``dissipation``
    ``sum_i w_i |dx_i/dt|^2``; ``entropy`` (H,) the mean over tokens of the *relative* attention
    entropy, ``H_i^h - log n`` for uniform weights (``<= 0``; MODEL.md section 3: the quantity
    compared with the PDE's ``H_h``); ``order_parameter`` ``|sum_i w_i x_i|``; on the sphere the
    :func:`clustering` measures ``min_inner``, ``mean_inner``, ``n_clusters`` (at ``threshold``).

    Every sum is the one the system uses (``system.uses_spectral(n)``): direct pairwise sums, or
    spectral Funk-Hecke sums, for the entropy too.  ``w`` (n,): token weights (default uniform;
    the entropy is then the plain mean over tokens).  A direct path that would exceed
    :data:`meanfield.particles.DIRECT_TIME_LIMIT_S` is refused up front; ``clustering=False`` records only
    the O(n) ``mean_inner`` of the clustering measures (for n where the pairwise ones do not fit).
    """
    if not isinstance(system, ParticleSystem):
        raise ValueError(f"system must be a ParticleSystem; received {type(system).__name__}")
    full_clustering = validate.boolean("clustering", clustering)

    def observe(t, X):
        X, wv = system.check(X, w)
        E = system.energies(X, wv)
        if system.uses_spectral(X.shape[0]):
            H = system.spectral.entropies(X, wv)
        else:
            H = attention_entropy(system, X, wv, relative=True)
        rec = {"energy": float(E.sum()), "energy_head": E, "dissipation": dissipation(system, X, wv),
               "entropy": H.mean(axis=1) if w is None else H @ wv,
               "order_parameter": float(np.linalg.norm(X.mean(axis=0) if w is None else wv @ X))}
        if system.geometry == "sphere":
            rec.update(_inner_measures(X, threshold, full_clustering))
        return rec

    return observe
