r"""General heads on S^2 as bi-spherical-harmonic operators (MODEL.md section 8).

A head's kernel ``K(x, y) = k(<x, M y>)`` (the kernel's rate, ``beta``, folded in) is, in the real
orthonormal basis ``Yb_k`` of :func:`meanfield.core.sphere.to_real_basis`,

.. math:: K(x, y) = \sum_{k, k'} A_{k k'}\, Yb_k(x)\, Yb_{k'}(y),\qquad
          A_{k k'} = \int\!\!\int Yb_k(x) K(x, y) Yb_{k'}(y)\, dx\, dy,

truncated at degree ``L`` in both variables.  Every sum over weighted sources is then one source transform,
one matrix product and one synthesis: with ``b[g]`` the coefficients of ``sum_j w_j g(y_j) delta_{y_j}`` (or
of ``g rho``), ``S[g](x) = sum_j w_j g(y_j) K(x, y_j) = sum_k Yb_k(x) (A b[g])_k``.  Because
``(V y)_c = sum_c' V_cc' y_c'``, the head aggregate ``u = S[V y]`` needs the three moments ``b[y_c']`` only,
and the value matrix acts on the three output coefficient vectors: four source transforms (``g = 1, y_1,
y_2, y_3``) serve every head.

The degree (:func:`kernel_degree`): for fixed ``x``, ``y -> k(<M^T x, y>)`` is zonal about ``M^T x`` with rate
``|M^T x| <= |M|_2``, and symmetrically in ``x``, so the zonal rule
(:func:`meanfield.core.zonal.required_lmax`) at ``lambda = |M|_2`` truncates both indices; the accuracy
reached is measured against the direct sums (``tests/test_bispherical.py``, ``benchmarks/general_heads.py``).

``A`` is computed once per head and kernel profile (:data:`PROFILES`: ``k``, its antiderivative ``K`` for the
energy and the gradient velocity, ``k log k`` for entropies), by quadrature on a Gauss-Legendre product grid of
``nq = L + 1 + max(8, ceil((L + 1) / 2))`` rings (exact for integrands of degree ``2 nq - 1 >= 3 L``): ``C[k, y]
= int Yb_k(x) K(x, y) dx`` by one analysis per node ``y``, then ``A[k, :]`` by one analysis per row.  When ``M``
commutes with every rotation about the z axis (``M = [[p, -q, 0], [q, p, 0], [0, 0, c]]``: the paper's
projection heads onto the xy plane and onto z), ``K(R x, R y) = K(x, y)`` and ``A`` couples only equal orders
``m``: ``C_lm(R_phi y) = e^{-i m phi} C_lm(y)``, so one node per ring suffices and, in the complex layout of
:mod:`meanfield.core.sphere`, ``(A b)_lm = sum_l' A^m_{l l'} b_l'm`` with
``A^m_{l l'} = 2 pi sum_i w_i C_lm(theta_i, 0) Y_l'm(theta_i, 0)``: ``O(L^3)`` entries, set up in milliseconds.
A head symmetric about another axis ``e`` (:func:`symmetry_axis`) is built so in the frame ``Q`` with ``Q e_z = e``
(``M' = Q^T M Q``) and applied as ``R_Q A' R_Q^T`` (two coefficient rotations per application, ducc0's
``rotate_alm`` through :func:`meanfield.core.sphere.rotate_coefficients`).

Costs are estimated from the sizes (:func:`estimate_operator`) and refused above the limits of
:mod:`meanfield.core.cost` before anything is allocated.  Numpy and :mod:`meanfield.core.sphere` only.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import cost, validate
from .heads import Head, check_heads
from .kernels import KERNELS, LMAX_CAP, NORMALIZATIONS
from .sphere import (
    SphereGrid,
    from_real_basis,
    legendre_table,
    nalm_for,
    resize_coefficients,
    rotate_coefficients,
    to_real_basis,
)
from .sums import CHUNK_BYTES  # work space of the kernel values of a dense build
from .zonal import has_lmax_rule, no_lmax_rule, required_lmax, truncation_level

__all__ = ["PROFILES", "kernel_degree", "is_axial", "potential_scale", "operator_norm", "estimate_operator",
           "HeadOperator", "head_operator", "GeneralOperator", "GeneralHeadSums", "OPERATOR_LMAX_CAP", "PointSources",
           "NodeSources", "SpectralAccuracyWarning", "kernel_bound", "kernel_range", "ACCURACY_LOSS", "cached_operator", "CACHE_BYTES",
           "truncation_tolerance", "symmetry_axis"]

PROFILES = ("normalizer", "potential", "entropy")
"""Kernel profiles an operator is built for: ``k`` (aggregates, normalizers, Sinkhorn), ``K`` (energies and the
gradient velocity of potential heads) and ``k log k`` (attention entropies of kernels that are not exp)."""

OPERATOR_LMAX_CAP = 128
"""Largest operator degree ``L`` the degree rule may choose for a general head (a dense operator of degree 128
holds 2.7e8 entries, 2 GiB; beyond, the direct sums are the way)."""

DENSE_SECONDS_PER_PAIR = 1e-8
"""Seconds per (quadrature node, source node) pair of a build: the kernel evaluation and the score product
(measured with ``benchmarks/general_heads.py``-style builds on the 2-core reference machine, one thread)."""
ANALYSIS_SECONDS_PER_NODE_DEGREE = 5e-10
"""Seconds of one quadrature-grid analysis per grid node and per degree ``L`` (ducc0; measured 2.4e-10 in dense builds,
6.6e-10 in axial ones at L = 32-96: the estimates are within a factor 2 of the builds)."""
PEAK_FACTOR = 1.4
"""Measured peak memory of a build over the sizes of its arrays (tracemalloc: 1.3 at L = 16-96, dense and axial)."""


class SpectralAccuracyWarning(UserWarning):
    """A normalizing head's row sums ``Z`` fall so far below the kernel's largest value that the spectral sums'
    absolute accuracy (``tolerance`` times ``max k`` times the total weight) is a large relative error of ``Z``, and so
    of the force ``U / Z``: the requested tolerance is not reached (use the direct sums, or a smaller tolerance)."""


ACCURACY_LOSS = 100.0
"""How much a normalizing head's row sums may lose of the requested accuracy before :class:`SpectralAccuracyWarning`
(and the bound above which ``summation="auto"`` keeps general softmax heads on the direct sums)."""


def kernel_range(head) -> tuple:
    """``(min |k|, max |k|)`` over the scores ``|s| <= |M|_2`` of unit vectors (kernels monotone in the score).

    Parameters
    ----------
    head : Head
        A head of dimension 3.

    Returns
    -------
    (float, float)
    """
    kern = KERNELS[head.kernel]
    top = kern.rate(head) * operator_norm(head)
    lo, hi = np.sort(np.abs(kern.scaled(head, np.array([-top, top]))))
    return float(lo), float(hi)


def kernel_bound(head) -> float:
    """``max |k(s)|`` over the scores ``|s| <= |M|_2`` of unit vectors (kernels monotone in the score).

    Parameters
    ----------
    head : Head
        A head of dimension 3.

    Returns
    -------
    float
    """
    return kernel_range(head)[1]


def operator_norm(head) -> float:
    """``|M|_2``, the largest rate of the head's kernel on the unit sphere (the degree rule's ``lambda``).

    Parameters
    ----------
    head : Head
        Any head.

    Returns
    -------
    float
    """
    return float(np.linalg.norm(head.M, 2))


def is_axial(M) -> bool:
    """Whether ``M`` (3 x 3) commutes with every rotation about the z axis (exactly: ``M = [[p, -q, 0],
    [q, p, 0], [0, 0, c]]``); then the operator couples equal orders ``m`` only.

    Parameters
    ----------
    M : array_like
        A matrix (anything but 3 x 3 gives False).

    Returns
    -------
    bool
    """
    M = np.asarray(M)
    return bool(M.shape == (3, 3) and M[0, 2] == 0 and M[1, 2] == 0 and M[2, 0] == 0 and M[2, 1] == 0
                and M[0, 0] == M[1, 1] and M[0, 1] == -M[1, 0])


_GEN = np.array([np.cross(np.eye(3)[k], np.eye(3)).T for k in range(3)])     # G_k x = e_k x x


def symmetry_axis(M):
    """The unit axis ``e`` whose rotations commute with ``M`` when it is unique (the null space of
    ``w -> [G(w), M]`` is one-dimensional, to round-off), else None (no axis, or every axis: ``M = lambda I``).

    Parameters
    ----------
    M : array_like, shape (3, 3)
        A score matrix.

    Returns
    -------
    ndarray, shape (3,), or None
    """
    M = np.asarray(M, dtype=float)
    C = np.stack([(G @ M - M @ G).ravel() for G in _GEN], axis=1) / (1.0 + np.abs(M).max())
    _, sv, Vt = np.linalg.svd(C)
    null = int(np.sum(sv <= 1e-12))
    return Vt[-1] / np.linalg.norm(Vt[-1]) if null == 1 else None


def _frame(e):
    """Euler angles ``(0, theta, phi)`` of ``Q = R_z(phi) R_y(theta)`` with ``Q e_z = e``, and ``Q``."""
    theta, phi = float(np.arccos(np.clip(e[2], -1.0, 1.0))), float(np.arctan2(e[1], e[0]))
    ct, st, cp, sp = np.cos(theta), np.sin(theta), np.cos(phi), np.sin(phi)
    Q = np.array([[cp, -sp, 0.0], [sp, cp, 0.0], [0.0, 0.0, 1.0]]) @ np.array([[ct, 0.0, st], [0.0, 1.0, 0.0],
                                                                              [-st, 0.0, ct]])
    return (0.0, theta, phi), Q


def potential_scale(head):
    """``c`` when the head's velocity is ``c grad N`` with ``N(x) = int K(<x, M y>) rho(y) dy`` (mean normalization and
    ``V = c M``, ``c`` real: ``grad_x K(<x, M y>) = k M y`` for any ``M``), else None.  ``V = c M`` is tested to
    round-off (``|V - c M| <= 1e-13 max |V|``): the gradient path then differs from the aggregate path by round-off.

    Parameters
    ----------
    head : Head
        Any head.

    Returns
    -------
    float or None
    """
    norm = NORMALIZATIONS[head.normalization]
    if not norm.row_local or norm.uses_normalizer:
        return None
    M, V = head.M, head.V
    i = np.unravel_index(np.argmax(np.abs(M)), M.shape)
    if M[i] == 0:
        return None
    c = float(V[i] / M[i])
    return c if np.abs(V - c * M).max() <= 1e-13 * np.abs(V).max() else None


def _surrogate(head, lam):
    return Head(lam * np.eye(3), lam * np.eye(3), beta=head.beta, kernel=head.kernel,
                normalization=head.normalization, kernel_params=dict(head.kernel_params))


def kernel_degree(head, tolerance, cap=OPERATOR_LMAX_CAP, *, where="head"):
    """The operator degree ``L`` of a general head at ``tolerance``: the zonal rule
    (:func:`meanfield.core.zonal.required_lmax`, criterion ``"sums"``) at ``lambda = |M|_2`` (at least 2); None
    when it exceeds ``cap``.  ``ValueError`` for kernels without an lmax rule (ReLU: give the degree).

    Parameters
    ----------
    head : Head
        A head of dimension 3.
    tolerance : float
        Relative accuracy, in (0, 1).
    cap : int
        Largest degree allowed (at most the zonal rule's own cap).
    where : str
        Names the head in the errors.

    Returns
    -------
    int or None
        ``L >= 2`` (2 for ``M = 0``), or None above ``cap``.

    Raises
    ------
    ValueError
        A head :func:`~meanfield.core.heads.check_heads` refuses or not of dimension 3, a kernel without an lmax
        rule, or arguments :func:`~meanfield.core.zonal.required_lmax` refuses.
    """
    (head,) = check_heads([head])
    if head.dim != 3:
        raise ValueError(f"{where} must have dimension d = 3 (operators act on S^2); received d = {head.dim}")
    if not has_lmax_rule(head):
        raise ValueError(no_lmax_rule(0, head).replace("heads[0]", where))
    lam = operator_norm(head)
    if lam == 0.0:
        return 2
    return required_lmax([_surrogate(head, lam)], tolerance, cap=min(int(cap), LMAX_CAP))


def truncation_tolerance(head, L) -> float:
    """The relative accuracy a degree ``L`` reaches for ``head``: the zonal truncation level (first neglected potential
    multiplier relative to the largest, :func:`meanfield.core.zonal.truncation_level`) at ``lambda = |M|_2``; defined
    for every kernel (ReLU included), 0 for ``M = 0``.

    Parameters
    ----------
    head : Head
        A head of dimension 3.
    L : int
        The degree.

    Returns
    -------
    float
    """
    lam = operator_norm(head)
    return 0.0 if lam == 0.0 else truncation_level(_surrogate(head, lam), int(L))


def _quadrature_grid_size(L):
    nq = L + 1 + max(8, (L + 2) // 2)
    return nq, 2 * nq


def estimate_operator(L, *, axial=False, count=1, what=None) -> cost.Cost:
    """Estimated peak memory and time of building ``count`` operators of degree ``L`` (sizes only): dense builds
    evaluate the kernel on all pairs of quadrature nodes and run one analysis per node and per coefficient; axial
    builds need one node per ring (``nq``) and ``nq`` analyses.

    Parameters
    ----------
    L : int
        Operator degree.
    axial : bool
        Axial (block) builds instead of dense ones.
    count : int
        Number of operators.
    what : str, optional
        What the estimate names (default: the operator and its degree).

    Returns
    -------
    meanfield.core.cost.Cost
    """
    nq, nlon = _quadrature_grid_size(L)
    nodes = float(nq * nlon)
    nb = float((L + 1) ** 2)
    analysis = ANALYSIS_SECONDS_PER_NODE_DEGREE * nodes * L
    if axial:
        stored = 16.0 * sum((L + 1 - m) ** 2 for m in range(L + 1))
        peak = PEAK_FACTOR * (8.0 * nq * nodes + 16.0 * nq * nalm_for(L) + stored)
        secs = count * (DENSE_SECONDS_PER_PAIR * nq * nodes + nq * analysis)
        detail = f"{count} axial operator(s): {nq} ring nodes x {nodes:.3g} grid nodes, {stored / 2**20:.3g} MiB each"
    else:
        stored = 8.0 * nb * nb
        peak = PEAK_FACTOR * (8.0 * nb * nodes + stored + CHUNK_BYTES)
        secs = count * (DENSE_SECONDS_PER_PAIR * nodes ** 2 + (nodes + nb) * analysis)
        detail = f"{count} dense operator(s): {nodes:.3g}^2 quadrature pairs, {stored / 2**20:.3g} MiB each"
    return cost.Cost(what or f"bispherical operator (L = {L}{', axial' if axial else ''})",
                     peak + (count - 1) * stored, secs, detail)


def _profile(head, key):
    """``(rate, f)``: the head's profile ``key`` as a function of scaled scores ``T = rate s`` (in place)."""
    kern = KERNELS[head.kernel]
    if key == "normalizer":
        return kern.rate(head), lambda T: kern.scaled(head, T, out=T)
    if key == "potential":
        div = kern.antiderivative_divisor(head)

        def potential(T):
            kern.antiderivative_scaled(head, T, out=T)
            T /= div
            return T

        return kern.rate(head), potential
    if key == "entropy":
        if not kern.positive:
            raise ValueError(f"kernel {head.kernel!r} can vanish: k log k (attention entropies) is not defined")

        def entropy(T):
            k = kern.scaled(head, T)
            return np.multiply(k, kern.log_scaled(head, T, out=T), out=T)

        return kern.rate(head), entropy
    raise ValueError(f"profile must be one of {list(PROFILES)}; received {key!r}")


@dataclass(frozen=True, eq=False)
class HeadOperator:
    """One head's operator for one profile, degree ``L``: ``dense`` ((L+1)^2 square, real basis) or ``blocks``
    (per order ``m``, complex (L-m+1) square, the axial case).  :meth:`apply` acts on coefficients in the layout
    of :mod:`meanfield.core.sphere` (``(..., nalm)``, the sources' ``b``) and returns the output's.

    Parameters
    ----------
    L : int
        Degree.
    dense : ndarray, shape ((L+1)^2, (L+1)^2), optional
        The operator in the real basis.
    blocks : tuple of ndarray, optional
        Per order ``m`` a complex (L-m+1, L-m+1) block (axial operators).
    euler : tuple of float, optional
        Euler angles of the frame an axial operator was built in (its axis not z).
    """

    L: int
    dense: np.ndarray | None = None
    blocks: tuple | None = None
    euler: tuple | None = None

    @property
    def nbytes(self) -> int:
        return int(self.dense.nbytes if self.dense is not None else sum(b.nbytes for b in self.blocks))

    def apply(self, b, transpose=False):
        """``A b`` (or ``A^T b``) for coefficients ``b`` of shape (nalm,) or (k, nalm).

        Parameters
        ----------
        b : array_like, shape (nalm,) or (k, nalm)
            Coefficients of degree ``L``.
        transpose : bool
            Apply ``A^T`` instead.

        Returns
        -------
        ndarray of complex128, the shape of ``b``
        """
        b = np.asarray(b, dtype=np.complex128)
        if self.dense is not None:
            r = to_real_basis(b, self.L)
            out = r @ (self.dense if transpose else self.dense.T)
            return from_real_basis(out, self.L)
        if self.euler is not None:        # axial about e = Q e_z: A = R_Q A' R_Q^T (ducc0's rotations)
            psi, theta, phi = self.euler
            inner = HeadOperator(self.L, blocks=self.blocks).apply(rotate_coefficients(b, self.L, -phi, -theta, -psi),
                                                                   transpose)
            return rotate_coefficients(inner, self.L, psi, theta, phi)
        out = np.empty_like(b)
        start = 0
        for m, A in enumerate(self.blocks):
            sl = slice(start, start + self.L + 1 - m)
            out[..., sl] = b[..., sl] @ (A.conj() if transpose else A.T)
            start = sl.stop
        if out.ndim:                                           # m = 0 entries of a real field are real
            out[..., :self.L + 1] = out[..., :self.L + 1].real
        return out


_CACHE = {}
"""Built operators shared by every :class:`GeneralOperator` (a model rebuilt by ``dataclasses.replace``, one particle
system per run of a study): key -> HeadOperator, the most recent last; at most :data:`CACHE_BYTES` held."""
CACHE_BYTES = 2**30
_CACHE_LOCK = threading.Lock()


def _cache_key(head, L, key):
    return (head.M.tobytes(), head.kernel, float(head.beta), tuple(sorted(head.kernel_params.items())), int(L), key)


def cached_operator(head, L, key="normalizer", *, nthreads=1) -> HeadOperator:
    """:func:`head_operator` through a small cache shared by all models (at most :data:`CACHE_BYTES`, least recently
    used dropped first): the same head, degree and profile are built once per process.

    Parameters
    ----------
    head, L, key, nthreads
        As for :func:`head_operator`.

    Returns
    -------
    HeadOperator

    Raises
    ------
    ValueError
        As for :func:`head_operator`.
    """
    k = _cache_key(head, L, key)
    with _CACHE_LOCK:
        op = _CACHE.pop(k, None)
        if op is not None:
            _CACHE[k] = op
            return op
    op = head_operator(head, L, key, nthreads=nthreads)
    with _CACHE_LOCK:
        _CACHE[k] = op
        while len(_CACHE) > 1 and sum(o.nbytes for o in _CACHE.values()) > CACHE_BYTES:
            _CACHE.pop(next(iter(_CACHE)))
    return op


def head_operator(head, L, key="normalizer", *, nthreads=1, symmetric=None, axial=None) -> HeadOperator:
    """The :class:`HeadOperator` of ``head`` for profile ``key`` at degree ``L`` (axial when :func:`is_axial`;
    ``axial=False`` forces the dense build, the check of the axial one).

    ``symmetric``: symmetrize (``A = (A + A^T) / 2``; exact for a symmetric ``M``, whose kernel is symmetric), so
    that the energy ``b^T A b / 2`` has the gradient ``A b`` to round-off; default: when ``M`` is symmetric.

    Parameters
    ----------
    head : Head
        A head of dimension 3.
    L : int
        Degree, ``>= 2``.
    key : {"normalizer", "potential", "entropy"}
        The profile: ``k``, ``K`` or ``k log k``.
    nthreads : int
        Threads of the transforms.
    symmetric : bool, optional
        Symmetrize the operator (default: when ``M`` is symmetric).
    axial : bool, optional
        None: axial when ``M`` has a symmetry axis; False: the dense build; True: axial, refused otherwise.

    Returns
    -------
    HeadOperator

    Raises
    ------
    ValueError
        A head :func:`~meanfield.core.heads.check_heads` refuses, ``L`` below 2, ``axial=True`` for an ``M``
        without a symmetry axis, an unknown profile (or ``"entropy"`` for a kernel that can vanish), or a
        build above the memory or time limit.
    """
    (head,) = check_heads([head])
    L = validate.integer("L", L, 2)
    euler = None
    if axial is None or axial:
        if not is_axial(head.M) and (e := symmetry_axis(head.M)) is not None:
            # axial about another axis e: build in the frame Q with Q e_z = e (M' = Q^T M Q, made exactly axial)
            euler, Q = _frame(e)
            Mp = Q.T @ head.M @ Q
            p_, q_ = 0.5 * (Mp[0, 0] + Mp[1, 1]), 0.5 * (Mp[1, 0] - Mp[0, 1])
            Ma = np.array([[p_, -q_, 0.0], [q_, p_, 0.0], [0.0, 0.0, Mp[2, 2]]])
            if np.abs(Mp - Ma).max() <= 1e-12 * (1.0 + np.abs(head.M).max()):
                op = head_operator(Head(Ma, np.eye(3), beta=head.beta, kernel=head.kernel,
                                        normalization=head.normalization, kernel_params=dict(head.kernel_params)),
                                   L, key, nthreads=nthreads, symmetric=symmetric, axial=True)
                return HeadOperator(L, blocks=op.blocks, euler=euler)
        if axial and not is_axial(head.M):
            raise ValueError("axial=True needs M commuting with the rotations about one axis (e.g. z: M = [[p, -q, 0], "
                             "[q, p, 0], [0, 0, c]]); received another M")
        axial = is_axial(head.M)
    estimate_operator(L, axial=axial).check("a larger tolerance (a smaller degree) or direct summation")
    if symmetric is None:
        symmetric = bool(np.array_equal(head.M, head.M.T))
    nq, nlon = _quadrature_grid_size(L)
    g = SphereGrid(L, nlat=nq, nlon=nlon, nthreads=nthreads)
    rate, prof = _profile(head, key)
    X = np.ascontiguousarray(g.nodes.reshape(-1, 3))
    if axial:
        th = g.theta
        Y0 = np.stack([np.sin(th), np.zeros_like(th), np.cos(th)], axis=1)      # one node per ring, phi = 0
        T = prof((rate * (Y0 @ head.M.T)) @ X.T)                                  # T[i, x] = rate <x, M y_i>
        C = np.stack([g.analysis(T[i].reshape(g.shape)) for i in range(nq)])     # C_lm(theta_i, 0)
        P = legendre_table(L, th)
        wq = g.ring_weights * g.nlon                                              # 2 pi x the GL weights
        blocks, start = [], 0
        for m in range(L + 1):
            sl = slice(start, start + L + 1 - m)
            A = (C[:, sl].T * wq) @ P[sl].T
            if symmetric:
                A = 0.5 * (A + A.conj().T)
            blocks.append(A)
            start = sl.stop
        return HeadOperator(L, blocks=tuple(blocks))
    nb, N = (L + 1) ** 2, X.shape[0]
    MY = rate * (X @ head.M.T)                       # row j: rate (M y_j)^T
    C = np.empty((nb, N))
    step = max(1, CHUNK_BYTES // (8 * N))
    for j0 in range(0, N, step):
        T = prof(MY[j0:j0 + step] @ X.T)             # T[j, x] = rate <x, M y_j>
        alm = np.stack([g.analysis(row.reshape(g.shape)) for row in T])
        C[:, j0:j0 + T.shape[0]] = to_real_basis(alm, L).T
    A = np.stack([g.analysis(row.reshape(g.shape)) for row in C])
    A = to_real_basis(A, L)
    del C
    if symmetric:
        A = 0.5 * (A + A.T)
    return HeadOperator(L, dense=np.ascontiguousarray(A))


# ---------------------------------------------------------------------------------------- heads
@dataclass(frozen=True, eq=False)
class GeneralOperator:
    """The operators of a set of heads on S^2 at one degree, built lazily (once per head and profile, thread-safe).

    Parameters
    ----------
    heads : sequence of Head
        Heads of dimension 3 (any ``M``, ``V``, kernel and normalization).
    lmax : int
        Operator degree ``L`` (:func:`kernel_degree` of the heads at a tolerance, or given).
    nthreads : int
        Threads of the transforms of the build.
    tolerance : float, optional
        The accuracy the degree was chosen for: normalizing heads whose row sums fall so low that it is not
        reached at the targets warn (:class:`SpectralAccuracyWarning`, with the accuracy reached); None: no check.

    Attributes
    ----------
    scales : tuple
        Per head :func:`potential_scale` (None: the aggregate path).
    axial : tuple of bool
        Per head whether its operators are axial (equal-``m``, about z or, rotated, about another axis).

    Raises
    ------
    ValueError
        Heads :func:`~meanfield.core.heads.check_heads` refuses or not of dimension 3, ``lmax`` below 2, or
        operators above the memory or time limit.
    """

    heads: tuple
    lmax: int
    nthreads: int = 1
    tolerance: float | None = None
    scales: tuple = field(init=False)
    axial: tuple = field(init=False)

    def __post_init__(self):
        heads = check_heads(self.heads)
        if heads[0].dim != 3:
            raise ValueError(f"heads must have dimension d = 3 (operators act on S^2); received d = {heads[0].dim}")
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("heads", heads)
        set_("lmax", validate.integer("lmax", self.lmax, 2))
        set_("scales", tuple(potential_scale(h) for h in heads))
        set_("axial", tuple(is_axial(h.M) or symmetry_axis(h.M) is not None for h in heads))
        set_("_ops", {})
        set_("_lock", threading.Lock())
        self.estimate().check("a larger tolerance (a smaller operator degree), or direct summation")

    def __reduce__(self):                      # a pickled copy rebuilds its operators lazily, unguarded: the guard
        return (_unpickle_operator, (self.heads, self.lmax, self.nthreads, self.tolerance))   # ran where it was made

    def check_normalizer(self, i, Z, mass):
        """Warn (:class:`SpectralAccuracyWarning`) when head ``i``'s row sums ``Z`` make the sums' absolute accuracy
        (``tolerance * kernel_bound * mass``) more than 100 times ``tolerance`` relative to ``min Z``.

        Parameters
        ----------
        i : int
            The head.
        Z : ndarray
            Its row sums at the targets.
        mass : float
            Total absolute mass of the sources.

        Warns
        -----
        SpectralAccuracyWarning
            When the accuracy reached is above ``100 tolerance``.
        """
        if self.tolerance is None or not np.size(Z) or not np.any(Z > 0):
            return
        zmin = float(np.min(Z[Z > 0]))
        reached = self.tolerance * kernel_bound(self.heads[i]) * mass / zmin if zmin > 0 else np.inf
        if reached > ACCURACY_LOSS * self.tolerance:
            h = self.heads[i]
            warnings.warn(f"heads[{i}] ({h.normalization}, {h.kernel}, beta |M|_2 = {h.beta * operator_norm(h):.3g}): "
                          f"its row sums fall to min Z = {zmin:.3g} while the kernel reaches {kernel_bound(h):.3g}, so "
                          f"the spectral sums' relative accuracy there is only bounded by {reached:.1e}, not by "
                          f"kernel_tol = {self.tolerance:.0e}; use the direct sums (ParticleSystem: summation="
                          f"'direct'; ContinuumPDE: summation='quadrature') or a smaller kernel_tol",
                          SpectralAccuracyWarning, stacklevel=validate.outside_stacklevel())

    def needed(self):
        """The (head, profile) pairs a velocity evaluation builds: ``potential`` for potential heads (``normalizer``
        divided by ``beta`` for exp kernels), ``normalizer`` for the others.

        Returns
        -------
        list of (int, str)
        """
        return [(i, "potential" if c is not None and not KERNELS[self.heads[i].kernel].log_linear else "normalizer")
                for i, c in enumerate(self.scales)]

    def estimate(self) -> cost.Cost:
        """Estimated peak memory and time of building the operators of one velocity evaluation.

        Returns
        -------
        meanfield.core.cost.Cost
        """
        dense = sum(not self.axial[i] for i, _ in self.needed())
        axial = len(self.heads) - dense
        parts = [estimate_operator(self.lmax, count=c, axial=a) for c, a in ((dense, False), (axial, True)) if c]
        return cost.Cost(f"the bispherical operators of {len(self.heads)} general head(s) at degree L = {self.lmax}",
                         sum(p.bytes for p in parts), sum(p.seconds for p in parts), "; ".join(p.detail for p in parts))

    def operator(self, i, key="normalizer") -> HeadOperator:
        """Head ``i``'s :class:`HeadOperator` for profile ``key`` (built on first use).

        Parameters
        ----------
        i : int
            The head.
        key : {"normalizer", "potential", "entropy"}
            The profile.

        Returns
        -------
        HeadOperator
            (For an exp kernel's potential, the normalizer operator scaled by ``1 / beta``.)

        Raises
        ------
        ValueError
            A build above the memory or time limit (next to the operators already built).
        """
        h = self.heads[i]
        if KERNELS[h.kernel].log_linear and key == "potential":   # k = exp(beta s): K = k / beta, no second operator
            key, scale = "normalizer", 1.0 / h.beta
        else:
            scale = 1.0
        op = self._ops.get((i, key))
        if op is None:
            with self._lock:
                op = self._ops.get((i, key))
                if op is None:          # the build's own estimate plus what this set of heads already holds
                    est = estimate_operator(self.lmax, axial=self.axial[i])
                    cost.Cost(f"a {key} operator of heads[{i}] (L = {self.lmax}) next to {len(self._ops)} built",
                              est.bytes + self.nbytes, est.seconds, est.detail).check(
                        "a larger tolerance (a smaller operator degree), or direct summation")
                    op = cached_operator(h, self.lmax, key, nthreads=self.nthreads)
                    self._ops[(i, key)] = op
        return op if scale == 1.0 else _Scaled(op, scale)

    def apply(self, i, key, b, transpose=False):
        """``A b`` of head ``i`` and profile ``key``.

        Parameters
        ----------
        i : int
            The head.
        key : str
            The profile.
        b : ndarray, shape (nalm,) or (k, nalm)
            Coefficients.
        transpose : bool
            Apply ``A^T``.

        Returns
        -------
        ndarray, the shape of ``b``
        """
        return self.operator(i, key).apply(b, transpose)

    @property
    def nbytes(self) -> int:
        """Bytes of the operators built so far."""
        return int(sum(op.nbytes for op in self._ops.values()))

    # -------------------------------------------------------------- sums in a space
    def head_sums(self, i, space):
        """The :class:`GeneralHeadSums` of head ``i`` in ``space``.

        Parameters
        ----------
        i : int
            The head.
        space : PointSources or NodeSources
            Sources and targets.

        Returns
        -------
        GeneralHeadSums
        """
        return GeneralHeadSums(self, i, space)

    def velocity(self, space, known=None, details=None, **solve):
        """``sum_h P_x u^h`` (n, 3) in ``space``: potential heads add ``c grad N`` (summed in coefficient space,
        one gradient), other mean heads add their aggregates in coefficient space (three syntheses), normalizing
        heads go through their :meth:`~meanfield.core.kernels.Normalization.force`.  ``details``: a dict filled
        with ``"D"``, per head its normalizer (None: 1).

        Parameters
        ----------
        space : PointSources or NodeSources
            Sources and targets.
        known : list of SinkhornResult or None, optional
            Per head, scalings already solved at this state.
        details : dict, optional
            Filled with ``"D"``.
        **solve
            ``tol``, ``maxiter`` of Sinkhorn solves.

        Returns
        -------
        ndarray, shape (n, 3)
            Tangent vectors at the targets.
        """
        pot = None
        agg = None
        v = np.zeros(space.vector_shape)
        D = [None] * len(self.heads)
        for i, h in enumerate(self.heads):
            norm = NORMALIZATIONS[h.normalization]
            c = self.scales[i]
            if c is not None:
                term = c * self.apply(i, "potential", space.coefficients())
                pot = term if pot is None else pot + term
            elif norm.row_local and not norm.uses_normalizer:
                term = h.V @ self.apply(i, "normalizer", space.moments())
                agg = term if agg is None else agg + term
            else:
                u, D[i], _ = norm.force(self.head_sums(i, space), where=f"heads[{i}]",
                                        known=None if known is None else known[i], **solve)
                v += u
        if details is not None:
            details["D"] = D
        if agg is not None:
            v += space.vectors(agg)
        v = space.project(v)
        if pot is not None:
            v += space.gradient(pot)
        return v

    def forces(self, space, known=None, **solve):
        """Per-head unprojected aggregates ``u^h`` (H, n, 3), normalizers (H, n) and scalings (list) in ``space``
        (the semantics of :meth:`meanfield.ParticleSystem.forces`).

        Parameters
        ----------
        space : PointSources or NodeSources
            Sources and targets.
        known : list of SinkhornResult or None, optional
            Per head, scalings already solved at this state.
        **solve
            ``tol``, ``maxiter`` of Sinkhorn solves.

        Returns
        -------
        U : ndarray, shape (H, n, 3)
        N : ndarray, shape (H, n)
        scalings : list of SinkhornResult or None
        """
        H = len(self.heads)
        U = np.empty((H,) + space.vector_shape)
        N = np.empty((H,) + space.shape)
        out = []
        for i, h in enumerate(self.heads):
            U[i], N[i], res = NORMALIZATIONS[h.normalization].force(
                self.head_sums(i, space), where=f"heads[{i}]", known=None if known is None else known[i], **solve)
            out.append(res)
        return U, N, out

    def energy(self, i, space):
        """``E_h = 1/2 sum_ij w_i w_j K(<x_i, M x_j>)`` (or the integral against ``rho``): ``b^T A_K b / 2``.

        Parameters
        ----------
        i : int
            The head.
        space : PointSources or NodeSources
            The sources.

        Returns
        -------
        float
        """
        b = space.coefficients()
        Ab = self.apply(i, "potential", b)
        return 0.5 * _inner(b, Ab, self.lmax)

    def entropy_sums(self, i, space, f=None):
        """``Q(x) = sum_j w_j f_j k log k (s(x, y_j))`` in ``space``: for exp kernels ``beta <x, M S[f y](x)>``
        (from the moments), otherwise the ``k log k`` operator on ``b[f]``.

        Parameters
        ----------
        i : int
            The head.
        space : PointSources or NodeSources
            Sources and targets.
        f : ndarray, optional
            Factors of the sources (None: 1).

        Returns
        -------
        ndarray, the space's scalar shape
        """
        h = self.heads[i]
        if KERNELS[h.kernel].log_linear:                # log k = beta s: from the moments
            S = space.vectors(self.apply(i, "normalizer", space.moments(f)))
            return h.beta * np.einsum("...c,...c->...", space.points, S @ h.M.T)
        return space.evaluate(self.apply(i, "entropy", space.coefficients(f)))


def _unpickle_operator(heads, lmax, nthreads, tolerance):
    with cost.limits(bytes=float("inf"), seconds=float("inf")):
        return GeneralOperator(heads, lmax, nthreads, tolerance)


class _Scaled:
    """An operator times a constant (the exp kernel's potential ``K = k / beta``)."""

    def __init__(self, op, scale):
        self.op, self.scale = op, scale

    @property
    def nbytes(self):
        return 0

    def apply(self, b, transpose=False):
        out = self.op.apply(b, transpose)
        out *= self.scale
        return out


def _inner(a, b, L):
    """``int f g`` of two real fields from their coefficients (m > 0 counted twice)."""
    w = np.full(nalm_for(L), 2.0)
    w[:L + 1] = 1.0
    return float(np.sum(w * (a.real * b.real + a.imag * b.imag)))


class GeneralHeadSums:
    """Kernel sums of head ``i`` of a :class:`GeneralOperator` in a space: the ``sums`` object of
    :meth:`meanfield.core.kernels.Normalization.force` (``fused``, ``apply``, ``apply_t``, ``aggregate``;
    unprojected aggregates, vectors last).

    Parameters
    ----------
    op : GeneralOperator
        The operators.
    i : int
        The head.
    space : PointSources or NodeSources
        Sources and targets.
    """

    axis = -1

    def __init__(self, op, i, space):
        self.op, self.i, self.space = op, i, space
        self.shape = tuple(space.shape)
        h = op.heads[i]
        self.apply_t = None if np.array_equal(h.M, h.M.T) else self._apply_t

    def _vector(self, moments):
        return self.space.vectors(self.op.heads[self.i].V @ self.op.apply(self.i, "normalizer", moments))

    def fused(self, norm):
        """The head's force in one pass: the aggregate combined with the row sums by ``norm``.

        Parameters
        ----------
        norm : meanfield.core.kernels.Normalization
            The head's normalization.

        Returns
        -------
        (ndarray, ndarray)
            ``norm.combine(U, Z)`` (n, 3) and ``norm.normalizer(Z)`` (n,).
        """
        U = self._vector(self.space.moments())
        if norm.uses_normalizer:
            Z = self.apply(None)
            h = self.op.heads[self.i]
            if not KERNELS[h.kernel].positive and self.op.tolerance is not None:
                # a kernel that vanishes (ReLU): rows whose sum lies within the sums' absolute accuracy of 0 cannot be
                # told from the rows without attention mass, which the direct sums give u = 0 (Z <= 0): so do these
                floor = self.op.tolerance * kernel_bound(h) * self.space.mass
                Z = np.where(Z > floor, Z, 0.0)
            self.op.check_normalizer(self.i, Z, self.space.mass)
        else:
            Z = np.ones(self.shape)
        return norm.combine(U, Z, self.axis), norm.normalizer(Z)

    def apply(self, f):
        """Row sums ``sum_j w_j f_j k(x_i, y_j)`` at the targets.

        Parameters
        ----------
        f : ndarray or None
            Factors of the sources (None: 1).

        Returns
        -------
        ndarray, the space's scalar shape
        """
        return self.space.evaluate(self.op.apply(self.i, "normalizer", self.space.coefficients(f)))

    def _apply_t(self, f):
        return self.space.evaluate(self.op.apply(self.i, "normalizer", self.space.coefficients(f), transpose=True))

    def aggregate(self, f):
        """Unprojected aggregates ``V sum_j w_j f_j k(x_i, y_j) y_j`` at the targets.

        Parameters
        ----------
        f : ndarray or None
            Factors of the sources (None: 1).

        Returns
        -------
        ndarray, shape (n, 3)
        """
        return self._vector(self.space.moments(f))


# ---------------------------------------------------------------------------------------- spaces
class _Space:
    """Sources and targets of the sums: ``points`` (n, 3) unit vectors, scalar fields (n,), vectors (n, 3)."""

    def _moments(self, f):
        P = self.points
        return np.stack([self._coefficients(P[:, c] if f is None else f * P[:, c]) for c in range(3)])

    def coefficients(self, f=None):
        """``b[f]``: coefficients of the sources scaled by ``f`` (None: 1)."""
        if f is not None:
            return self._coefficients(f)
        if self._b is None:
            self._b = self._coefficients(None)
        return self._b

    def moments(self, f=None):
        """``b[f y_c]``, c = 1..3, shape (3, nalm)."""
        if f is not None:
            return self._moments(f)
        if self._by is None:
            self._by = self._moments(None)
        return self._by

    def vectors(self, C):
        """Vectors (n, 3) from three coefficient vectors ``C`` (3, nalm)."""
        return np.stack([self.evaluate(c) for c in C], axis=-1)

    def project(self, v):
        """Tangent projection ``v - <v, x> x`` (in place)."""
        v -= np.einsum("ij,ij->i", v, self.points)[:, None] * self.points
        return v

    @property
    def vector_shape(self):
        return self.shape + (3,)


class PointSources(_Space):
    """Weighted tokens as sources and targets: a :class:`~meanfield.core.sphere.PointSet` (its degree the operator's)
    and weights ``w`` (n,).

    Parameters
    ----------
    pts : PointSet
        The points (degree the operator's).
    w : array_like, shape (n,)
        Their weights.
    """

    def __init__(self, pts, w):
        self.pts, self.w = pts, np.ascontiguousarray(w, dtype=np.float64)
        self.points = pts.points
        self.shape = (pts.n,)
        self.mass = float(np.abs(self.w).sum())
        self._b = self._by = None

    def _coefficients(self, f):
        return self.pts.adjoint(self.w if f is None else np.ascontiguousarray(self.w * f))

    def evaluate(self, c):
        """Values of a degree-``L`` field at the points.

        Parameters
        ----------
        c : ndarray, shape (nalm,)
            Coefficients.

        Returns
        -------
        ndarray, shape (n,)
        """
        return self.pts.evaluate(c)

    def gradient(self, c):
        """Cartesian surface gradient (n, 3) of a degree-``L`` field.

        Parameters
        ----------
        c : ndarray, shape (nalm,)
            Coefficients.

        Returns
        -------
        ndarray, shape (n, 3)
        """
        return self.pts.gradient(c)


class NodeSources(_Space):
    """A density on a PDE grid as sources, its nodes as targets: ``transforms`` a
    :class:`~meanfield.core.sphere.NodeTransforms` of the operator's degree on the grid, ``rho`` (nlat, nlon) the
    density's values; fields are flattened over the nodes.  :meth:`gradient` truncates to the grid's degree
    (the potential as the energy's exact gradient, MODEL.md section 3).

    Parameters
    ----------
    transforms : NodeTransforms
        Transforms of the operator's degree on the grid.
    rho : ndarray, shape (nlat, nlon)
        The density's values.
    """

    def __init__(self, transforms, rho):
        self.nt, self.grid = transforms, transforms.grid
        self.rho = rho
        self.points = self.grid.nodes.reshape(-1, 3)
        self.shape = (self.points.shape[0],)
        self.mass = float(self.grid.ring_weights @ np.abs(rho).sum(axis=1))
        self._b = self._by = None

    def _coefficients(self, f):
        return self.nt.adjoint(self.rho if f is None else self.rho * np.reshape(f, self.grid.shape))

    def evaluate(self, c):
        """Values of a degree-``L`` field at the nodes, flattened.

        Parameters
        ----------
        c : ndarray, shape (nalm,)
            Coefficients of the operator's degree.

        Returns
        -------
        ndarray, shape (nlat * nlon,)
        """
        return self.nt.synthesis(c).reshape(-1)

    def gradient(self, c):
        """Cartesian surface gradient at the nodes of the field truncated to the grid's degree.

        Parameters
        ----------
        c : ndarray, shape (nalm,)
            Coefficients of the operator's degree.

        Returns
        -------
        ndarray, shape (nlat * nlon, 3)
        """
        g = self.grid
        grad = g.gradient(resize_coefficients(c, self.nt.lmax, g.lmax))
        return g.to_cartesian(grad).reshape(-1, 3)
