r"""The paper's hypotheses measured on heads (trained or built): orthogonality, alignment, symmetry, temperature.

MODEL.md's theorems hold under hypotheses on the heads: symmetric score matrices (``M_h = M_h^T``), aligned
values (``V_h = M_h``), (approximately) orthogonal heads (``|M_{h'} M_h|_2 <= delta``, Theorem 39) and
radial dominance (Condition 8).  This module measures how far a set of heads is from each:

* :func:`orthogonality` -- pairwise overlaps ``|M_g^T M_h|_2`` and their maximum off the diagonal, ``delta``
  (the quantity of Theorem 39), with two scale-free cosines beside it;
* :func:`alignment` -- Frobenius cosines of ``V`` with ``M`` and with ``sym(M) = (M + M^T) / 2``;
* :func:`symmetry` -- ``|sym(M)|_F / |M|_F``;
* :func:`spectrum` -- eigenvalues of ``sym(M)`` and singular values of ``M``;
* :func:`effective_beta` -- the inverse temperature of a transformer head on the unit sphere (LayerNorm gain
  and radius folded in);
* :func:`head_table` -- all of the above as one self-describing :class:`xarray.Dataset` over ``head``;
* :func:`trajectory_measures` -- along a token trajectory (layers or times): Condition 8 margins, per-head
  and total energies, attention entropies, clustering, ``delta``, and whether the energy is monotone.  The
  particle measures are those of :mod:`meanfield.analysis.diagnostics`,
  :meth:`meanfield.models.particles.ParticleSystem.energies` and :mod:`meanfield.analysis.clustering`.

Factored heads (:meth:`meanfield.core.heads.Head.from_factors`, ``M = A B^T`` with ``A, B`` of shape (d, r)) are
measured through their factors: every quantity costs ``O(d r^2)`` per head or pair (a thin QR of each factor,
``r x r`` products and decompositions), never a ``d x d`` product, and agrees with the dense computation to
rounding.  A dense head is the factored head ``(M, I)``.  Every measure is dimensionless (scores of unit tokens).
"""

from __future__ import annotations

import warnings
from functools import cached_property

import numpy as np
import xarray as xr

from .._version import __version__
from ..core import cost, validate
from ..core.heads import Head, check_heads
from ..models.particles import UNIT_NORM_TOL, ParticleSystem
from . import diagnostics
from .clustering import clustering

__all__ = ["orthogonality", "alignment", "symmetry", "spectrum", "effective_beta", "head_table",
           "trajectory_measures", "TRAJECTORY_PASSES"]

TRAJECTORY_PASSES = 6
"""Direct O(n^2) passes per time of :func:`trajectory_measures`: energies, forces (Condition 8), attention
entropies, and the exact energy rates (the velocity and the two kernel sums of the energy gradients)."""

_PAIR_SECONDS = 2e-5        # Python overhead of one head pair in orthogonality (measured ~1e-5 s, d = 64, r = 8)
_PAIR_WORK_SECONDS = 2e-9   # ... times d r^2 + r^3 per pair: measured 0.054 s per pair of dense heads (r = d = 384,
                            # one thread), i.e. ~5e-10 per unit: a margin of 4


class _LowRank:
    """``M = P Q^T`` with its thin-QR triangles: ``P = U_P R_P``, ``Q = U_Q R_Q`` (``Q = None``: the identity)."""

    def __init__(self, P, Q):
        self.P, self.Q = P, Q

    @cached_property
    def RP(self):
        return np.linalg.qr(self.P, mode="r")

    @cached_property
    def RQ(self):
        return None if self.Q is None else np.linalg.qr(self.Q, mode="r")

    def core(self):
        """``R_P R_Q^T``: its singular values are the nonzero ones of ``M``."""
        return self.RP if self.Q is None else self.RP @ self.RQ.T

    def inner_with(self, other) -> float:
        """``<M, M'>_F = sum((P^T P') * (Q^T Q'))`` (``O(d r r')``)."""
        if self.Q is None and other.Q is None:
            return float(np.sum(self.P * other.P))
        if self.Q is None:                  # <P, P' Q'^T> = sum((P Q') * P')
            return float(np.sum((self.P @ other.Q) * other.P))
        if other.Q is None:
            return float(np.sum((other.P @ self.Q) * self.P))
        return float(np.sum((self.P.T @ other.P) * (self.Q.T @ other.Q)))

    def transpose(self):
        """``M^T = Q P^T`` (a dense head's transpose is dense)."""
        return _LowRank(self.P.T.copy(), None) if self.Q is None else _LowRank(self.Q, self.P)

    def cross_norm(self, other) -> float:
        """``|M^T M'|_2 = |R_Q (P^T P') R_Q'^T|_2`` (``O(d r r')`` plus an ``r x r'`` SVD)."""
        G = self.P.T @ other.P
        if self.RQ is not None:
            G = self.RQ @ G
        if other.RQ is not None:
            G = G @ other.RQ.T
        return _op_norm(G)


def _op_norm(A) -> float:
    return float(np.linalg.svd(A, compute_uv=False)[0]) if A.size else 0.0


def _score(head) -> _LowRank:
    return _LowRank(head.M, None) if head.factors is None else _LowRank(head.factors[0], head.factors[1])


def _value(head) -> _LowRank:
    return _LowRank(head.V, None) if head.factors is None else _LowRank(head.factors[2], head.factors[3])


def _cosine(num, a, b) -> float:
    """``num / (a b)``; NaN when ``a b = 0`` (the cosine of a zero matrix is undefined)."""
    den = a * b
    return float(num / den) if den > 0 else float("nan")


def _one_head(name, head) -> Head:
    if not isinstance(head, Head):
        raise ValueError(f"{name} must be a meanfield.core.heads.Head; received {type(head).__name__}")
    return head


def _norms(L) -> tuple[float, float]:
    """``(|M|_2, |M|_F)``."""
    C = L.core()
    return _op_norm(C), float(np.linalg.norm(C))


def orthogonality(heads) -> dict:
    r"""Pairwise overlaps of the heads' score matrices: how far they are from orthogonal heads.

    .. math::

        O_{gh} = |M_g^T M_h|_2,\qquad \delta = \max_{g \ne h} O_{gh},\qquad
        \cos^F_{gh} = \frac{|\langle M_g, M_h\rangle_F|}{|M_g|_F |M_h|_F},\qquad
        \hat O_{gh} = \frac{|M_g^T M_h|_2}{|M_g|_2 |M_h|_2}

    Theorem 39 (MODEL.md, approximately orthogonal heads) uses the absolute ``delta``: its heads are
    symmetric, where ``M_g^T M_h = M_g M_h`` is MODEL.md's ``M_{h'} M_h``; for any heads ``|M_g^T M_h|_2``
    bounds the cross term ``<M_g y, M_h z>`` of the forces of value-aligned heads.  ``delta`` carries the heads'
    scale (``alpha^2 c`` for :func:`~meanfield.core.heads.approx_orthogonal_heads`); ``overlap_normalized`` (in
    ``[0, 1]``; the cosine of the smallest principal angle between the ranges for projections) and the Frobenius
    cosine are scale-free companions (the cosine averages over directions, the operator overlap takes the
    worst one).  ``value_overlap`` is ``|V_g^T V_h|_2``, the bound of the cross term itself for any values.

    Parameters
    ----------
    heads : Head or sequence of Head
        One dimension ``d``; factored heads are measured through their factors (``O(d r^2)`` per pair).

    Returns
    -------
    dict
        ``overlap``, ``overlap_normalized``, ``frobenius_cosine``, ``value_overlap``: arrays (H, H) (the
        diagonal of ``overlap`` is ``|M_h|_2^2``, of the cosines 1; NaN where a matrix is zero);
        ``delta`` and ``delta_normalized``: the largest off-diagonal ``overlap`` and ``overlap_normalized``
        (0.0 for one head: no pair).

    Raises
    ------
    ValueError
        ``heads`` not a non-empty sequence of Head of one dimension; an estimated time above the cost guard's
        limit (many heads of a large dense ``d``).
    """
    heads = check_heads(heads)
    H, d = len(heads), heads[0].dim
    r = max(d if h.factors is None else max(h.rank) for h in heads)
    pairs = H * (H + 1) // 2
    cost.guard(f"orthogonality of {H} heads (d = {d}, inner size {r})", bytes=8.0 * 4 * H * d * r,
               seconds=pairs * (_PAIR_SECONDS + _PAIR_WORK_SECONDS * (d * r * r + r**3)),
               fix="fewer heads, or factored heads (Head.from_factors)",
               detail=f"{pairs} pairs of Gram products and SVDs")
    S, V = [_score(h) for h in heads], [_value(h) for h in heads]
    op, fro = np.array([_norms(L) for L in S]).T
    overlap, cos_f, value = np.empty((H, H)), np.empty((H, H)), np.empty((H, H))
    for g in range(H):
        for h in range(g, H):
            overlap[g, h] = overlap[h, g] = S[g].cross_norm(S[h])     # |M_h^T M_g| = |(M_g^T M_h)^T|
            value[g, h] = value[h, g] = V[g].cross_norm(V[h])
            cos_f[g, h] = cos_f[h, g] = _cosine(abs(S[g].inner_with(S[h])), fro[g], fro[h])
    with np.errstate(divide="ignore", invalid="ignore"):
        normalized = np.where(np.outer(op, op) > 0, overlap / np.outer(op, op), np.nan)
    off = ~np.eye(H, dtype=bool)
    return {"overlap": overlap, "overlap_normalized": normalized, "frobenius_cosine": cos_f, "value_overlap": value,
            "delta": float(overlap[off].max()) if H > 1 else 0.0,
            "delta_normalized": float(np.nanmax(normalized[off], initial=0.0)) if H > 1 else 0.0}


def _sym_parts(L):
    """``(|M|_F^2, <M, M^T>_F)``: ``|sym M|_F^2 = (|M|_F^2 + <M, M^T>_F) / 2``."""
    return L.inner_with(L), L.inner_with(L.transpose())


def symmetry(head) -> float:
    r"""``|sym(M)|_F / |M|_F`` with ``sym(M) = (M + M^T) / 2``: 1 for a symmetric ``M``, 0 for an antisymmetric
    one, about ``1/sqrt(2)`` for a Gaussian random matrix (its symmetric and antisymmetric parts have equal
    expected norms).

    Parameters
    ----------
    head : Head

    Returns
    -------
    float
        In ``[0, 1]``; NaN for ``M = 0``.

    Raises
    ------
    ValueError
        ``head`` not a Head.
    """
    L = _score(_one_head("head", head))
    m2, mt = _sym_parts(L)
    return _cosine(np.sqrt(max(0.5 * (m2 + mt), 0.0)), np.sqrt(m2), 1.0)


def alignment(head) -> dict:
    r"""How close the values are to the scores (the value-aligned case ``V = M`` of the gradient flow).

    .. math:: c = \frac{\langle V, M\rangle_F}{|V|_F |M|_F},\qquad
              c_{\mathrm{sym}} = \frac{\langle V, \mathrm{sym}(M)\rangle_F}{|V|_F |\mathrm{sym}(M)|_F}

    Parameters
    ----------
    head : Head

    Returns
    -------
    dict
        ``cosine`` (1 for ``V = M``, -1 for ``V = -M``) and ``cosine_sym`` (1 for ``V = sym(M)``), in
        ``[-1, 1]``; NaN where a matrix is zero (an antisymmetric ``M`` has ``sym(M) = 0``).

    Raises
    ------
    ValueError
        ``head`` not a Head.
    """
    head = _one_head("head", head)
    M, V = _score(head), _value(head)
    m2, mt = _sym_parts(M)
    vm, vmt = V.inner_with(M), V.inner_with(M.transpose())
    v = np.sqrt(V.inner_with(V))
    return {"cosine": _cosine(vm, v, np.sqrt(m2)),
            "cosine_sym": _cosine(0.5 * (vm + vmt), v, np.sqrt(max(0.5 * (m2 + mt), 0.0)))}


def spectrum(head) -> dict:
    r"""Eigenvalues of ``sym(M)`` and singular values of ``M``, each of length ``d``, in decreasing order.

    For a factored head (``M = A B^T``, inner size r) ``sym(M) = W J W^T`` with ``W = [A, B]`` and
    ``J = [[0, I], [I, 0]] / 2``: its nonzero eigenvalues are those of ``R J R^T`` (``W = Q R``, at most 2r of
    them) and the singular values of ``M`` are those of ``R_A R_B^T``; the other ``d - 2r`` (``d - r``) values
    are exactly 0.  ``O(d r^2)``.

    Parameters
    ----------
    head : Head

    Returns
    -------
    dict
        ``sym_eigenvalues`` (d,) decreasing (the largest is the top attention direction, the smallest the most
        repulsive), ``singular_values`` (d,) decreasing (``|M|_2`` first).

    Raises
    ------
    ValueError
        ``head`` not a Head.
    """
    head = _one_head("head", head)
    d = head.dim
    if head.factors is None:
        ev = np.linalg.eigvalsh(0.5 * (head.M + head.M.T))
        sv = np.linalg.svd(head.M, compute_uv=False)
    else:
        A, B = head.factors[:2]
        r = A.shape[1]
        R = np.linalg.qr(np.hstack([A, B]), mode="r")
        J = np.zeros((2 * r, 2 * r))
        J[:r, r:] = J[r:, :r] = 0.5 * np.eye(r)
        core = R @ J @ R.T
        ev = np.concatenate([np.linalg.eigvalsh(0.5 * (core + core.T)), np.zeros(max(d - core.shape[0], 0))])
        sv = np.concatenate([np.linalg.svd(_score(head).core(), compute_uv=False), np.zeros(max(d - r, 0))])
    return {"sym_eigenvalues": np.sort(ev)[::-1][:d].copy(), "singular_values": np.sort(sv)[::-1][:d].copy()}


def _gain(gain, d):
    return np.ones(d) if gain is None else validate.real_array("gain", gain, (d,))


def _radius(radius, d):
    return float(np.sqrt(d)) if radius is None else validate.real("radius", radius, positive=True)


def effective_beta(head, gain=None, radius=None) -> float:
    r"""The inverse temperature a head has on the unit sphere once a LayerNorm has set the tokens' scale.

    A pre-LN transformer attends between ``x = g * (radius z)``: ``z`` a unit vector, ``g`` (d,) the LayerNorm
    gain (elementwise), ``radius = sqrt(d)`` (the normalized vector has mean 0 and variance 1 over its d
    entries).  The score is then

    .. math:: \beta \langle x, M x'\rangle = \beta\,\mathrm{radius}^2 \langle z, G M G z'\rangle,\quad G = \mathrm{diag}(g),
              \qquad \beta_{\mathrm{eff}} = \beta\,\mathrm{radius}^2\, |G M G|_2

    so that the unit-sphere head is ``beta_eff`` times a score matrix of operator norm 1.  For a scalar head
    ``M = lambda I`` with unit gain, ``beta_eff = beta d |lambda|``.  The LayerNorm's bias is ignored, and so is
    the constraint that ``z`` be orthogonal to the ones vector (its mean is subtracted).

    Parameters
    ----------
    head : Head
    gain : array_like (d,), optional
        LayerNorm gain ``g``, finite (default ones).
    radius : float, optional
        Norm of the normalized tokens before the gain, ``> 0`` (default ``sqrt(d)``).

    Returns
    -------
    float
        ``beta radius^2 |diag(g) M diag(g)|_2`` (``O(d r^2)`` for a factored head).

    Raises
    ------
    ValueError
        ``head`` not a Head; ``gain`` not d finite reals; ``radius`` not a finite number > 0.
    """
    head = _one_head("head", head)
    d = head.dim
    g, rad = _gain(gain, d), _radius(radius, d)
    if head.factors is None:
        norm = _op_norm(g[:, None] * head.M * g[None, :])
    else:
        A, B = head.factors[:2]
        norm = _op_norm(_LowRank(g[:, None] * A, g[:, None] * B).core())
    return head.beta * rad**2 * norm


_TABLE_TEXT = {
    "beta": "inverse temperature of the head",
    "rank_bound": "inner size r of the score factors (M = A B^T), d for a dense head: rank(M) <= rank_bound",
    "norm_op": "|M|_2, operator norm of the score matrix",
    "norm_frobenius": "|M|_F",
    "symmetry": "|sym(M)|_F / |M|_F (1 symmetric, 0 antisymmetric, ~0.71 Gaussian)",
    "alignment": "<V, M>_F / (|V|_F |M|_F) (1 for V = M, -1 for V = -M)",
    "alignment_sym": "<V, sym(M)>_F / (|V|_F |sym(M)|_F)",
    "effective_beta": "beta radius^2 |diag(g) M diag(g)|_2: the inverse temperature on the unit sphere",
    "sym_eig_top": "largest eigenvalues of sym(M), decreasing",
    "sym_eig_bottom": "smallest eigenvalues of sym(M), increasing",
    "singular_values": "largest singular values of M, decreasing",
    "overlap": "|M_g^T M_h|_2 (Theorem 39's delta is its largest off-diagonal entry)",
    "overlap_normalized": "|M_g^T M_h|_2 / (|M_g|_2 |M_h|_2)",
    "frobenius_cosine": "|<M_g, M_h>_F| / (|M_g|_F |M_h|_F)",
    "value_overlap": "|V_g^T V_h|_2",
    "gain": "LayerNorm gain g of effective_beta",
}


def head_table(heads, gain=None, radius=None, n_spectrum=None) -> xr.Dataset:
    """Every measure of this module for a set of heads, as one :class:`xarray.Dataset`.

    Parameters
    ----------
    heads : Head or sequence of Head
        One dimension ``d``.
    gain : array_like (d,), optional
        LayerNorm gain for :func:`effective_beta` (default ones).
    radius : float, optional
        Token radius for :func:`effective_beta` (default ``sqrt(d)``).
    n_spectrum : int, optional
        How many of the largest and smallest eigenvalues of ``sym(M)`` and of the largest singular values to keep,
        ``1 <= n_spectrum <= d`` (default ``min(4, d)``).

    Returns
    -------
    xarray.Dataset
        Dims ``head`` (H), ``head_pair`` (H: the second head of a pair), ``eig`` (n_spectrum), ``dim`` (d).  Per
        head: ``beta``, ``rank_bound``, ``norm_op``, ``norm_frobenius``, ``symmetry``, ``alignment``,
        ``alignment_sym``, ``effective_beta``; ``sym_eig_top``, ``sym_eig_bottom``, ``singular_values`` on
        ``(head, eig)``; the :func:`orthogonality` matrices on ``(head, head_pair)``; ``gain`` on ``dim``.
        Attributes: ``delta`` and ``delta_normalized``, ``radius``, ``d``, ``n_heads``, ``theorem_delta`` (which
        measure Theorem 39 uses), ``kind = "head_table"``, ``meanfield_version``; every variable has a
        ``long_name`` and ``units = "1"`` (scores of unit tokens are dimensionless).

    Raises
    ------
    ValueError
        As :func:`orthogonality` and :func:`effective_beta`; ``n_spectrum`` not an integer in ``[1, d]``.
    """
    heads = check_heads(heads)
    H, d = len(heads), heads[0].dim
    k = min(4, d) if n_spectrum is None else validate.integer("n_spectrum", n_spectrum, 1, d,
                                                             what=f"an integer in [1, d = {d}]")
    g, rad = _gain(gain, d), _radius(radius, d)
    orth = orthogonality(heads)
    spectra = [spectrum(h) for h in heads]
    norms = np.array([_norms(_score(h)) for h in heads])
    al = [alignment(h) for h in heads]
    hh, he = ("head", "head_pair"), ("head", "eig")
    data = {"beta": (("head",), np.array([h.beta for h in heads])),
            "rank_bound": (("head",), np.array([d if h.factors is None else h.rank[0] for h in heads])),
            "norm_op": (("head",), norms[:, 0]), "norm_frobenius": (("head",), norms[:, 1]),
            "symmetry": (("head",), np.array([symmetry(h) for h in heads])),
            "alignment": (("head",), np.array([a["cosine"] for a in al])),
            "alignment_sym": (("head",), np.array([a["cosine_sym"] for a in al])),
            "effective_beta": (("head",), np.array([effective_beta(h, g, rad) for h in heads])),
            "sym_eig_top": (he, np.array([s["sym_eigenvalues"][:k] for s in spectra])),
            "sym_eig_bottom": (he, np.array([s["sym_eigenvalues"][::-1][:k] for s in spectra])),
            "singular_values": (he, np.array([s["singular_values"][:k] for s in spectra])),
            **{name: (hh, orth[name]) for name in ("overlap", "overlap_normalized", "frobenius_cosine",
                                                   "value_overlap")},
            "gain": (("dim",), g)}
    attrs = {"kind": "head_table", "meanfield_version": __version__, "d": d, "n_heads": H, "radius": rad,
             "delta": orth["delta"], "delta_normalized": orth["delta_normalized"],
             "theorem_delta": "Theorem 39 (approximately orthogonal heads) bounds |M_g^T M_h|_2 <= delta: the "
                              "variable overlap and the attribute delta (absolute, with the heads' scale)",
             "title": "meanfield head measures: orthogonality, alignment, symmetry, spectrum, effective beta"}
    ds = xr.Dataset(data, coords={"head": np.arange(H), "head_pair": np.arange(H), "eig": np.arange(k),
                                  "dim": np.arange(d)}, attrs=attrs)
    for name, text in _TABLE_TEXT.items():
        ds[name].attrs.update(long_name=text, units="1")
    return ds


# ------------------------------------------------------------------------------------------------ trajectories
def _heads_at(name, heads):
    try:
        return check_heads(heads)
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None


def _schedule(heads_per_time, n_times, d):
    """One validated tuple of heads per time, all of dimension ``d`` and one count."""
    if isinstance(heads_per_time, Head) or (isinstance(heads_per_time, (list, tuple)) and heads_per_time
                                             and all(isinstance(h, Head) for h in heads_per_time)):
        per = [_heads_at("heads_per_time", heads_per_time)] * n_times
    else:
        if heads_per_time is None or isinstance(heads_per_time, (str, bytes)) or not hasattr(heads_per_time, "__len__"):
            raise ValueError(f"heads_per_time must be a sequence of Head (the same heads at every time) or one "
                             f"sequence of Head per time ({n_times}); received {heads_per_time!r:.200}")
        if len(heads_per_time) != n_times:
            raise ValueError(f"heads_per_time must hold one sequence of heads per time of X ({n_times}); received "
                             f"{len(heads_per_time)}")
        per = [_heads_at(f"heads_per_time[{t}]", h) for t, h in enumerate(heads_per_time)]
    counts, dims = {len(h) for h in per}, {h[0].dim for h in per}
    if len(counts) != 1:
        raise ValueError(f"heads_per_time must hold the same number of heads at every time; received {sorted(counts)}")
    if dims != {d}:
        raise ValueError(f"heads_per_time must have the dimension of the tokens X, d = {d}; received heads of "
                         f"dimension {sorted(dims)}")
    return per


def _monotone(E, rtol):
    """Whether ``E`` (T, ...) is non-decreasing along axis 0, each step to ``rtol`` of the larger ``|E|``."""
    if E.shape[0] < 2:
        return np.ones(E.shape[1:], dtype=bool)
    dE = np.diff(E, axis=0)
    scale = np.maximum(np.abs(E[1:]), np.abs(E[:-1]))
    return np.all(dE >= -rtol * scale, axis=0)


_TRAJECTORY_TEXT = {
    "energy": "total energy E = sum_h E_h (ParticleSystem.energies)",
    "energy_head": "per-head energy E_h",
    "energy_increment": "E(t_k) - E(t_{k-1}) (NaN at the first time)",
    "energy_rate_head": "exact dE_h/dt along the flow of the heads at that time (ParticleSystem.energy_rates)",
    "condition8_exact_margin": "min over tokens of |P u_i^h|^2 - a_i^h sum_{h' != h} a_i^{h'} (Condition 8, exact)",
    "condition8_norm_bounded_margin": "min over tokens of |P u_i^h|^2 - |a_i^h| sum_{h' != h} |u_i^{h'}|",
    "condition8_exact_fraction": "weight of the tokens where the exact reading of Condition 8 holds",
    "condition8_norm_bounded_fraction": "weight of the tokens where the norm-bounded reading holds",
    "condition8_exact": "the exact reading holds at every token and head",
    "condition8_norm_bounded": "the norm-bounded reading holds at every token and head",
    "entropy": "token-weighted mean Shannon attention entropy -sum_j p_ij log p_ij (in [0, log n])",
    "n_clusters": "connected components of the graph <x_i, x_j> >= threshold",
    "mean_inner": "mean <x_i, x_j> over pairs i != j",
    "min_inner": "min <x_i, x_j> over pairs",
    "delta": "max_{g != h} |M_g^T M_h|_2 of the heads at that time (Theorem 39)",
    "energy_monotone": "E non-decreasing along the trajectory (each step to monotone_rtol)",
    "energy_head_monotone": "E_h non-decreasing along the trajectory (each step to monotone_rtol)",
}


def trajectory_measures(X, heads_per_time, weights=None, times=None, threshold=0.99, monotone_rtol=1e-9) -> xr.Dataset:
    r"""The hypotheses and their consequences along a token trajectory: per time (or layer) of ``X``.

    At each time ``t_k`` the particle system of the heads active then (:class:`ParticleSystem`, sphere) gives:
    the two readings of Condition 8 (:func:`~meanfield.analysis.diagnostics.radial_dominance`; their smallest
    margin over tokens and the weight of the tokens where they hold), the per-head and total energies
    (:meth:`~meanfield.models.particles.ParticleSystem.energies`) and the exact per-head rates ``dE_h/dt`` along
    the flow (:meth:`~meanfield.models.particles.ParticleSystem.energy_rates`), the mean attention entropies
    (:func:`~meanfield.analysis.diagnostics.attention_entropy`), the clustering measures
    (:func:`~meanfield.analysis.clustering.clustering` at ``threshold``) and the heads' ``delta``
    (:func:`orthogonality`).  Whether the total and per-head energies are non-decreasing along the trajectory
    (the gradient flow of symmetric value-aligned mean heads ascends ``E``, MODEL.md section 1) is checked
    step by step: ``E(t_{k+1}) - E(t_k) >= -monotone_rtol * max(|E(t_k)|, |E(t_{k+1})|)``.

    Parameters
    ----------
    X : array_like (n_times, n, d)
        Unit tokens (``| |x|^2 - 1 | <= 1e-8``, never renormalized), ``n_times >= 1``, ``n >= 2``, ``d >= 2``.
    heads_per_time : sequence of Head, or sequence (n_times) of sequences of Head
        The same heads at every time, or the heads of each time (a layer's heads); one count ``H`` and the
        dimension ``d`` throughout.
    weights : array_like (n,), optional
        Token weights, ``>= 0`` summing to 1 (default uniform).
    times : array_like (n_times,), optional
        The ``time`` coordinate, finite and strictly increasing (default ``0, 1, ...``: layer indices).
    threshold : float
        Clustering threshold on ``<x_i, x_j>``, in ``[-1, 1]``.
    monotone_rtol : float
        Relative tolerance of the monotonicity check, ``>= 0``: the rounding and integrator error of a
        recorded trajectory (near a clustered state the true increments are tiny).

    Returns
    -------
    xarray.Dataset
        Dims ``time`` (n_times) and ``head`` (H): ``energy``, ``energy_increment``, ``condition8_exact``,
        ``condition8_norm_bounded``, ``entropy`` (per head), ``n_clusters``, ``mean_inner``, ``min_inner``,
        ``delta`` on ``time``; ``energy_head``, ``energy_rate_head``, ``condition8_*_margin`` and
        ``condition8_*_fraction`` on ``(time, head)``; ``energy_monotone`` (scalar) and ``energy_head_monotone``
        (``head``).  Attributes: ``threshold``, ``monotone_rtol``, ``n``, ``d``, ``kind``, ``meanfield_version``.

    Raises
    ------
    ValueError
        ``X`` not a finite (n_times, n, d) array of unit rows; ``heads_per_time`` empty, of mixed dimensions or
        counts, of another ``d`` or of another length than ``X``; bad ``weights``, ``times``, ``threshold`` or
        ``monotone_rtol``; a direct O(n^2) cost above the particle system's limits.
    """
    X = validate.real_array("X", X, ("n_times", "n", "d"))
    T, n, d = X.shape
    if T < 1 or n < 2 or d < 2:
        raise ValueError(f"X must have shape (n_times, n, d) with n_times >= 1, n >= 2 and d >= 2; received shape "
                         f"{X.shape}")
    validate.unit_vectors("X", X.reshape(-1, d), tol=UNIT_NORM_TOL)
    per = _schedule(heads_per_time, T, d)
    w = validate.probability_weights("weights", weights, n)
    tc = np.arange(T, dtype=float) if times is None else validate.real_array("times", times, (T,))
    if T > 1 and not np.all(np.diff(tc) > 0):
        raise ValueError(f"times must be strictly increasing; received {tc!r:.200}")
    threshold = validate.real("threshold", threshold, -1, 1, what="a finite number in [-1, 1]")
    rtol = validate.real("monotone_rtol", monotone_rtol, 0)
    systems, deltas = {}, {}
    for heads in per:
        key = tuple(map(id, heads))
        if key not in systems:
            systems[key], deltas[key] = ParticleSystem(heads), orthogonality(heads)["delta"]
    H = len(per[0])
    next(iter(systems.values())).check_direct_run(n, 0, records=T, record_passes=TRAJECTORY_PASSES,
                                                  what="trajectory_measures")
    out = {k: np.empty((T, H)) for k in ("energy_head", "energy_rate_head", "condition8_exact_margin",
                                         "condition8_norm_bounded_margin", "condition8_exact_fraction",
                                         "condition8_norm_bounded_fraction", "entropy")}
    clus = {k: np.empty(T) for k in ("n_clusters", "mean_inner", "min_inner", "delta")}
    for t, heads in enumerate(per):
        key = tuple(map(id, heads))
        system, Xt = systems[key], X[t]
        out["energy_head"][t] = system.energies(Xt, w)
        out["energy_rate_head"][t] = system.energy_rates(Xt, w=w)
        rd = diagnostics.radial_dominance(system, Xt, w)
        for reading in ("exact", "norm_bounded"):
            out[f"condition8_{reading}_margin"][t] = rd[f"{reading}_margin"].min(axis=1)
            out[f"condition8_{reading}_fraction"][t] = rd[reading] @ w
        out["entropy"][t] = diagnostics.attention_entropy(system, Xt, w) @ w
        c = clustering(Xt, threshold)
        for k in ("n_clusters", "mean_inner", "min_inner"):
            clus[k][t] = c[k]
        clus["delta"][t] = deltas[key]
    E = out["energy_head"].sum(axis=1)
    overflow = not (np.all(np.isfinite(out["energy_head"])) and np.all(np.isfinite(out["energy_rate_head"])))
    if overflow:                 # exp(beta s) past float64 (beta s > 709): said, never a silent inf / NaN
        warnings.warn("trajectory_measures: the energies or their rates overflow float64 (exp(beta <x, M y>) with "
                      "beta <x, M y> > 709): energy_*, energy_rate_head and the monotonicity flags are not "
                      "meaningful here (attrs['energy_overflow'] = 1); Condition 8, entropies and clustering are "
                      "unaffected (they use the normalized forces)", RuntimeWarning, stacklevel=2)
    th = ("time", "head")
    data = {"energy": (("time",), E), "energy_increment": (("time",), np.r_[np.nan, np.diff(E)]),
            **{k: (th, v) for k, v in out.items()},
            "condition8_exact": (("time",), np.all(out["condition8_exact_margin"] >= 0, axis=1)),
            "condition8_norm_bounded": (("time",), np.all(out["condition8_norm_bounded_margin"] >= 0, axis=1)),
            "n_clusters": (("time",), clus["n_clusters"].astype(int)),
            **{k: (("time",), clus[k]) for k in ("mean_inner", "min_inner", "delta")},
            "energy_monotone": ((), bool(_monotone(E, rtol))),
            "energy_head_monotone": (("head",), _monotone(out["energy_head"], rtol))}
    attrs = {"kind": "trajectory_measures", "meanfield_version": __version__, "n": n, "d": d, "n_heads": H,
             "threshold": threshold, "monotone_rtol": rtol, "geometry": "sphere", "energy_overflow": int(overflow),
             "forces": "u_i^h: the normalized per-head aggregates of ParticleSystem.forces (f_i^h / n for mean heads)",
             "title": "meanfield head measures along a trajectory: Condition 8, energies, entropies, clustering"}
    ds = xr.Dataset(data, coords={"time": tc, "head": np.arange(H)}, attrs=attrs)
    for name, text in _TRAJECTORY_TEXT.items():
        ds[name].attrs.update(long_name=text, units="1")
    return ds
