"""Attention heads: score matrix ``M``, value matrix ``V``, inverse temperature, kernel, normalization.

A :class:`Head` is a frozen dataclass validated on construction; presets build the head
families of ``MODEL.md`` (scalar, orthogonal blocks, random symmetric, perturbed value
alignment, approximately orthogonal).  Kernels and normalizations are names of the registries
:data:`~meanfield.core.kernels.KERNELS` and :data:`~meanfield.core.kernels.NORMALIZATIONS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from . import cost, validate
from .kernels import KERNELS, NORMALIZATIONS, get_kernel, get_normalization

__all__ = [
    "Head",
    "scalar_heads",
    "orthogonal_block_heads",
    "random_symmetric_heads",
    "perturbed_value_heads",
    "approx_orthogonal_heads",
    "check_heads",
    "check_exp_range",
]


def _as_matrix(name, A):
    given = A
    if not isinstance(A, (str, bytes)) and np.iscomplexobj(A):     # refused, never cast (imaginary part dropped)
        raise ValueError(f"{name} must be a real square matrix of size d x d with d >= 2; received complex values "
                         f"{given!r}")
    try:
        A = None if isinstance(A, (str, bytes)) else np.array(A, dtype=float, copy=True)
    except (TypeError, ValueError, OverflowError):              # strings, complex, ragged or object data
        A = None
    if A is None:
        raise ValueError(f"{name} must be a real square matrix of size d x d with d >= 2; received {given!r}")
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 2:
        raise ValueError(f"{name} must be a square matrix of size d x d with d >= 2; received shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} must have finite entries; received a matrix containing NaN or inf")
    A.setflags(write=False)
    return A


@dataclass(frozen=True, eq=False)
class Head:
    """One attention head.

    Parameters
    ----------
    M : array_like, shape (d, d)
        Score matrix; scores are ``s_ij = <x_i, M x_j>``.
    V : array_like, shape (d, d)
        Value matrix.
    beta : float
        Inverse temperature, ``beta > 0`` (used by the ``"exp"`` and ``"sigmoid"`` kernels).
    kernel : str
        A name of :data:`~meanfield.core.kernels.KERNELS`: ``"exp"`` (``k(s) = exp(beta s)``),
        ``"relu"`` (``max(s, 0)``), ``"sigmoid"`` (``1 / (1 + exp(-(beta s + bias)))``).
    normalization : str
        A name of :data:`~meanfield.core.kernels.NORMALIZATIONS`: divide the aggregate by the
        total weight (``"mean"``) or by the row sum of the kernel (``"softmax"``).
    kernel_params : dict, optional
        The kernel's own parameters (e.g. ``{"bias": -1.0}`` for ``"sigmoid"``), validated by the
        kernel class; stored with the defaults filled in, as a read-only mapping.
    factors : tuple of four arrays, optional
        Low-rank factors ``(A, B, C, D)`` with ``M = A B^T`` (A, B of shape (d, r)) and ``V = C D^T``
        (C, D of shape (d, p)); usually given through :meth:`from_factors`.  When present the direct sums
        form the scores as ``(X A)(Y B)^T`` and the values as ``((Y D) C^T)``: ``O(n^2 r)`` work instead of
        ``O(n^2 d)``.  ``M`` and ``V`` must equal the products to rounding (checked).

    Raises
    ------
    ValueError
        A matrix that is not real, square, finite, or of a shape that matches the other; a ``beta`` that
        is not a positive number; an unknown kernel or normalization (the allowed names listed); factors
        of the wrong shapes or whose products are not ``M`` and ``V``.
    """

    M: np.ndarray
    V: np.ndarray
    beta: float = 1.0
    kernel: str = "exp"
    normalization: str = "mean"
    kernel_params: dict | None = None
    factors: tuple | None = None
    scalar: float | None = field(init=False, default=None)

    def __post_init__(self):
        M = _as_matrix("M", self.M)
        V = _as_matrix("V", self.V)
        if M.shape != V.shape:
            raise ValueError(f"M and V must have the same shape; received M {M.shape} and V {V.shape}")
        beta = validate.real("beta", self.beta, positive=True)
        params = get_kernel(self.kernel).check_params(self.kernel_params)
        get_normalization(self.normalization)
        object.__setattr__(self, "kernel_params", params)
        object.__setattr__(self, "M", M)
        object.__setattr__(self, "V", V)
        object.__setattr__(self, "beta", beta)
        object.__setattr__(self, "factors", None if self.factors is None else _check_factors(self.factors, M, V))
        lam = M[0, 0]
        d = M.shape[0]
        is_scalar = np.array_equal(M, lam * np.eye(d)) and np.array_equal(V, M)
        object.__setattr__(self, "scalar", float(lam) if is_scalar else None)

    @classmethod
    def from_factors(cls, A, B, C, D, beta=1.0, kernel="exp", normalization="mean", kernel_params=None) -> "Head":
        """A head given by low-rank factors: ``M = A B^T``, ``V = C D^T``.

        Parameters
        ----------
        A, B : array_like, shape (d, r)
            Score factors (a transformer head: ``A = W_Q^T / sqrt(d_head)``, ``B = W_K^T``, so that the score
            ``<x, M y> = <W_Q x, W_K y> / sqrt(d_head)``).
        C, D : array_like, shape (d, p)
            Value factors (a transformer head: ``C = W_O``, ``D = W_V^T``).
        beta, kernel, normalization, kernel_params
            As for :class:`Head`.

        Returns
        -------
        Head
            With ``M``, ``V`` the dense products and ``factors = (A, B, C, D)`` (read-only copies).

        Raises
        ------
        ValueError
            Factors that are not real finite 2-d arrays with ``d >= 2`` rows, ``A``/``B`` or ``C``/``D`` of
            different shapes, or rows that differ between the score and value factors.
        """
        F = _factor_arrays((A, B, C, D))
        _matrices_guard(f"Head.from_factors(d={F[0].shape[0]})", F[0].shape[0], 1)     # the dense M and V it forms
        return cls(F[0] @ F[1].T, F[2] @ F[3].T, beta, kernel, normalization, kernel_params, factors=F)

    @property
    def rank(self) -> tuple[int, int] | None:
        """``(r, p)``: the inner sizes of the score and value factors; None for a dense head."""
        return None if self.factors is None else (self.factors[0].shape[1], self.factors[2].shape[1])

    @property
    def dim(self) -> int:
        """Ambient dimension ``d``."""
        return self.M.shape[0]

    @property
    def is_zonal(self) -> bool:
        """True when ``M = V = lambda I`` (the interaction depends only on ``<x, y>``)."""
        return self.scalar is not None

    @property
    def is_symmetric_aligned(self) -> bool:
        """True when ``M`` is symmetric and ``V = M`` (the gradient-flow case of MODEL.md)."""
        return bool(np.allclose(self.M, self.M.T, rtol=0, atol=1e-14 * (1 + np.abs(self.M).max()))
                    and np.array_equal(self.M, self.V))

    def to_dict(self) -> dict:
        """Plain-Python description (lists of floats), inverse of :meth:`from_dict`.

        Returns
        -------
        dict
            Keys ``"M"``, ``"V"`` (nested lists of floats), ``"beta"``, ``"kernel"``, ``"normalization"``,
            and ``"kernel_params"`` (when not empty) and ``"factors"`` (four nested lists, factored heads only).
        """
        out = {"M": self.M.tolist(), "V": self.V.tolist(), "beta": self.beta,
               "kernel": self.kernel, "normalization": self.normalization}
        if self.kernel_params:
            out["kernel_params"] = dict(self.kernel_params)
        if self.factors is not None:
            out["factors"] = [F.tolist() for F in self.factors]
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "Head":
        """The head a :meth:`to_dict` description gives.

        Parameters
        ----------
        d : dict
            The constructor's keywords (``M``, ``V``, ``beta``, ``kernel``, ``normalization``, optionally
            ``kernel_params`` and ``factors``), as :meth:`to_dict` writes them.

        Returns
        -------
        Head
            Validated as by the constructor.

        Raises
        ------
        ValueError
            As for :class:`Head`.
        TypeError
            A key that is not a constructor keyword.
        """
        return cls(**d)

    def replace(self, **changes) -> "Head":
        """A copy with some fields changed (validated again).

        Changing ``M`` or ``V`` of a factored head drops its factors (they would no longer multiply to the new
        matrices); changing ``factors`` sets ``M`` and ``V`` to their products.

        Parameters
        ----------
        **changes
            New values of fields: ``M``, ``V``, ``beta``, ``kernel``, ``normalization``, ``kernel_params``,
            ``factors``.  A new ``kernel`` without ``kernel_params`` drops the old kernel's parameters.

        Returns
        -------
        Head
            A new head, validated as by the constructor.

        Raises
        ------
        ValueError
            An unknown field name, ``M`` or ``V`` given together with non-None ``factors``, or any value the
            constructor refuses.
        """
        kw = self.to_dict()
        if "kernel" in changes and "kernel_params" not in changes:
            kw.pop("kernel_params", None)            # parameters belong to the old kernel
        allowed = set(kw) | {"kernel_params", "factors"}
        unknown = set(changes) - allowed
        if unknown:
            raise ValueError(f"unknown Head fields {sorted(unknown)}; allowed {sorted(allowed)}")
        if "M" in changes or "V" in changes:
            if "factors" in changes and changes["factors"] is not None:
                raise ValueError("replace: give either M / V or factors, not both; received both")
            kw.pop("factors", None)
        kw.update(changes)
        if kw.get("factors") is not None:
            F = _factor_arrays(kw["factors"])
            kw.update(M=F[0] @ F[1].T, V=F[2] @ F[3].T, factors=F)
        return Head(**kw)


def _factor_arrays(factors):
    """The four factors ``(A, B, C, D)`` as read-only float arrays, shapes checked (named errors)."""
    if factors is None or isinstance(factors, (str, bytes)) or len(factors) != 4:
        raise ValueError(f"factors must be four arrays (A, B, C, D) with M = A B^T and V = C D^T; received {factors!r}")
    out = []
    for name, F in zip("ABCD", factors):
        if not isinstance(F, (str, bytes)) and np.iscomplexobj(F):
            raise ValueError(f"factor {name} must be a real 2-d array; received complex values")
        try:
            F = None if isinstance(F, (str, bytes)) else np.array(F, dtype=float, copy=True)
        except (TypeError, ValueError, OverflowError):
            F = None
        if F is None or F.ndim != 2 or F.shape[0] < 2 or F.shape[1] < 1:
            raise ValueError(f"factor {name} must be a real 2-d array of shape (d, r) with d >= 2, r >= 1; received "
                             f"{factors[ord(name) - 65]!r:.200}")
        if not np.all(np.isfinite(F)):
            raise ValueError(f"factor {name} must have finite entries; received an array containing NaN or inf")
        F.setflags(write=False)
        out.append(F)
    A, B, C, D = out
    if A.shape != B.shape or C.shape != D.shape or A.shape[0] != C.shape[0]:
        raise ValueError(f"factors must have shapes A, B (d, r) and C, D (d, p) with one d; received A {A.shape}, "
                         f"B {B.shape}, C {C.shape}, D {D.shape}")
    return tuple(out)


def _check_factors(factors, M, V):
    """Factors of ``M`` and ``V``: shapes checked, and the products equal to the matrices to rounding."""
    A, B, C, D = F = _factor_arrays(factors)
    if A.shape[0] != M.shape[0]:
        raise ValueError(f"factors must have d = {M.shape[0]} rows (the matrices' size); received {A.shape[0]}")
    for name, X, P, Q in (("M", M, A, B), ("V", V, C, D)):
        # rounding of a product of inner size r: a few r eps |P||Q| (entrywise bound); 1e3 eps leaves room for
        # the products a BLAS of another blocking computes, and is far below any factor error that matters
        bound = 1e3 * np.finfo(float).eps * (np.abs(P) @ np.abs(Q).T).max()
        off = np.abs(X - P @ Q.T).max()
        if not off <= bound:
            raise ValueError(f"factors do not multiply to {name}: max |{name} - {'AB' if name == 'M' else 'CD'}^T| = "
                             f"{off:.3g}, allowed {bound:.3g}")
    return F


def check_exp_range(heads):
    """Refuse heads whose kernel can overflow float64 on the unit sphere where no shift is possible
    (normalizations that do not shift rows: mean, Sinkhorn): exp heads with ``beta |M|_2 > EXP_LIMIT``
    (:meth:`Kernel.check_range`); softmax heads are evaluated shifted and never overflow.

    Parameters
    ----------
    heads : sequence of Head
        The heads (already validated, e.g. by :func:`check_heads`).

    Returns
    -------
    sequence of Head
        ``heads`` itself, unchanged.

    Raises
    ------
    ValueError
        An exp head with mean or Sinkhorn normalization and ``beta |M|_2 > EXP_LIMIT`` (named by its index).
    """
    for i, h in enumerate(heads):
        if not NORMALIZATIONS[h.normalization].shifts_rows:
            KERNELS[h.kernel].check_range(h, f"heads[{i}]")
    return heads


def check_heads(heads, d: int | None = None) -> tuple[Head, ...]:
    """Validate a non-empty sequence of heads sharing one dimension (``d`` if given).

    Parameters
    ----------
    heads : Head or iterable of Head
        One head or a non-empty sequence of them.
    d : int, optional
        The dimension every head must have.

    Returns
    -------
    tuple of Head
        The heads (a single head as a 1-tuple).

    Raises
    ------
    ValueError
        ``heads`` not a Head or an iterable of them (None, a string or a mapping included), an empty sequence,
        an element that is not a :class:`Head`, heads of different dimensions, or a dimension other than ``d``.
    """
    if isinstance(heads, Head):
        heads = (heads,)
    if heads is None or isinstance(heads, (str, bytes, Mapping)) or not isinstance(heads, Iterable):
        raise ValueError(f"heads must be a Head or a non-empty sequence of Head; received {heads!r}")
    heads = tuple(heads)
    if not heads:
        raise ValueError("heads must be a non-empty sequence of Head; received an empty sequence")
    for h in heads:
        if not isinstance(h, Head):
            raise ValueError(f"heads must contain Head objects; received {type(h).__name__}")
    dims = {h.dim for h in heads}
    if len(dims) != 1:
        raise ValueError(f"all heads must have the same dimension; received dimensions {sorted(dims)}")
    if d is not None and dims != {d}:
        raise ValueError(f"heads must have dimension d = {d}; received heads of dimension {dims.pop()}")
    return heads


def scalar_heads(lambdas, d, beta=1.0, kernel="exp", normalization="mean", kernel_params=None) -> tuple[Head, ...]:
    """Heads ``M_h = V_h = lambda_h I`` (zonal, symmetric, value-aligned).

    Parameters
    ----------
    lambdas : float or array_like, shape (H,)
        One real ``lambda_h`` per head (finite; a scalar gives one head).
    d : int
        Dimension, ``d >= 2``.
    beta, kernel, normalization, kernel_params
        As for :class:`Head`, shared by every head.

    Returns
    -------
    tuple of Head
        ``H`` zonal heads (``Head.is_zonal``).

    Raises
    ------
    ValueError
        ``lambdas`` not a non-empty 1-d sequence of finite reals, ``d`` not an integer ``>= 2``, the heads'
        matrices above the memory limit (:func:`meanfield.core.cost.guard`), or a value :class:`Head` refuses.
    """
    lambdas = np.atleast_1d(validate.real_array("lambdas", lambdas))
    if lambdas.ndim != 1 or lambdas.size == 0:
        raise ValueError(f"lambdas must be a non-empty 1-d sequence; received shape {lambdas.shape}")
    d = validate.integer("d", d, 2)
    _matrices_guard(f"scalar_heads(d={d}, {lambdas.size} head(s))", d, lambdas.size)
    return tuple(Head(lam * np.eye(d), lam * np.eye(d), beta, kernel, normalization, kernel_params) for lam in lambdas)


def _matrices_guard(what, d, n_heads):
    """The cost guard of ``n_heads`` heads of two (d, d) float64 matrices each (and one temporary): the dimension
    is bounded by the memory its matrices need (d = 10^6 would ask for terabytes)."""
    cost.guard(what, bytes=8.0 * d * d * (2 * n_heads + 1), seconds=1e-9 * d * d * n_heads,
               fix="a smaller d (or fewer heads)", detail=f"{n_heads} head(s) of two (d, d) float64 matrices")


def orthogonal_block_heads(d, n_heads, strengths=1.0, beta=1.0, kernel="exp",
                           normalization="mean", kernel_params=None) -> tuple[Head, ...]:
    """Heads acting on disjoint coordinate blocks: ``M_h = V_h = alpha_h P_h``, ``M_h' M_h = 0``.

    The ``d`` coordinates are split into ``n_heads`` contiguous blocks as evenly as possible
    (``numpy.array_split``); each block needs at least one coordinate.

    Parameters
    ----------
    d : int
        Dimension, ``d >= 2``.
    n_heads : int
        Number of heads, ``1 <= n_heads <= d``.
    strengths : float or array_like, shape (n_heads,)
        ``alpha_h``: one number for every head or one per head.
    beta, kernel, normalization, kernel_params
        As for :class:`Head`, shared by every head.

    Returns
    -------
    tuple of Head
        ``n_heads`` heads, ``P_h`` the orthogonal projection on block ``h``.

    Raises
    ------
    ValueError
        ``d`` or ``n_heads`` out of range, ``strengths`` neither one number nor ``n_heads`` numbers (or not
        finite), the matrices above the memory limit, or a value :class:`Head` refuses.
    """
    d = validate.integer("d", d, 2)
    n_heads = validate.integer("n_heads", n_heads, 1, d, what=f"an integer in [1, d={d}]")
    alphas = validate.real_array("strengths", strengths)
    if alphas.ndim > 1 or alphas.size not in (1, n_heads):
        raise ValueError(f"strengths must be one number or n_heads = {n_heads} numbers; received shape "
                         f"{alphas.shape}")
    alphas = np.broadcast_to(alphas.reshape(-1), (n_heads,))
    _matrices_guard(f"orthogonal_block_heads(d={d}, n_heads={n_heads})", d, n_heads)
    heads = []
    for a, block in zip(alphas, np.array_split(np.arange(d), n_heads)):
        P = np.zeros((d, d))
        P[block, block] = 1.0
        heads.append(Head(a * P, a * P, beta, kernel, normalization, kernel_params))
    return tuple(heads)


def random_symmetric_heads(d, n_heads, seed=None, scale=1.0, beta=1.0, kernel="exp",
                           normalization="mean", kernel_params=None) -> tuple[Head, ...]:
    """Random symmetric value-aligned heads, ``M = V = scale * (G + G^T) / (2 sqrt(d))``, G Gaussian.

    Parameters
    ----------
    d : int
        Dimension, ``d >= 2``.
    n_heads : int
        Number of heads, ``>= 1`` (one independent ``G`` each).
    seed : None, int or numpy.random.Generator
        The random source (:func:`meanfield.core.validate.rng`).
    scale : float
        ``>= 0``.
    beta, kernel, normalization, kernel_params
        As for :class:`Head`, shared by every head.

    Returns
    -------
    tuple of Head
        ``n_heads`` heads with ``M = V`` symmetric.

    Raises
    ------
    ValueError
        ``d`` below 2, ``n_heads`` below 1, a negative or non-finite ``scale``, an invalid ``seed``, the
        matrices above the memory or time limit (:func:`meanfield.core.cost.guard`), or a value :class:`Head`
        refuses.
    """
    d = validate.integer("d", d, 2)
    n_heads = validate.integer("n_heads", n_heads, 1)
    scale = validate.real("scale", scale, 0)        # >= 0: the ensemble is symmetric, -scale draws the same law
    # two (d, d) float64 matrices kept per head (M is V) plus the draw and its transpose; ~2e-8 s per entry
    cost.guard(f"random_symmetric_heads(d={d}, n_heads={n_heads})", bytes=8.0 * d * d * (n_heads + 3),
               seconds=6e-8 * d * d * n_heads, fix="a smaller d or fewer n_heads",
               detail=f"{n_heads} head(s) of a (d, d) float64 matrix")
    rng = validate.rng(seed)
    heads = []
    for _ in range(n_heads):
        G = rng.standard_normal((d, d))
        M = scale * (G + G.T) / (2 * np.sqrt(d))
        heads.append(Head(M, M, beta, kernel, normalization, kernel_params))
    return tuple(heads)


def perturbed_value_heads(heads, epsilon, seed=None) -> tuple[Head, ...]:
    """Replace ``V_h`` by ``M_h + Delta_h`` with a random ``Delta_h`` of operator norm ``epsilon``.

    Parameters
    ----------
    heads : Head or sequence of Head
        The heads (:func:`check_heads`); their ``M`` is kept.
    epsilon : float
        Operator norm of each perturbation, ``>= 0``.
    seed : None, int or numpy.random.Generator
        The random source (:func:`meanfield.core.validate.rng`); ``Delta_h`` is Gaussian, rescaled.

    Returns
    -------
    tuple of Head
        One head per input, ``V_h = M_h + Delta_h`` (factors dropped: :meth:`Head.replace`).

    Raises
    ------
    ValueError
        A negative or non-finite ``epsilon``, an invalid ``seed``, or heads :func:`check_heads` refuses.
    """
    epsilon = validate.real("epsilon", epsilon, 0)
    rng = validate.rng(seed)
    out = []
    for h in check_heads(heads):
        D = rng.standard_normal(h.M.shape)
        D *= epsilon / np.linalg.norm(D, 2)
        out.append(h.replace(V=h.M + D))
    return tuple(out)


def approx_orthogonal_heads(d, n_heads, delta, alpha=1.0, rank=1, beta=1.0, kernel="exp",
                            normalization="mean", kernel_params=None) -> tuple[Head, ...]:
    """Heads ``M_h = V_h = alpha U_h U_h^T`` on rank-``rank`` subspaces with ``|M_h' M_h|_op = delta``.

    Head ``h`` spans ``u_{h,k} = sqrt(1-c) e_{h,k} + sqrt(c) e_{0,k}`` (k = 1..rank) with a
    shared block ``e_0``; so ``<u_{h,k}, u_{h',k}> = c`` and ``|M_h' M_h|_op = alpha^2 c``,
    ``c = delta / alpha^2``.  The principal angle between the head subspaces is
    ``arccos(c)``.  Needs ``d >= (n_heads + 1) * rank`` and ``0 <= delta <= alpha^2``.

    Parameters
    ----------
    d : int
        Dimension, ``d >= 2`` and ``d >= (n_heads + 1) * rank``.
    n_heads : int
        Number of heads, ``>= 1``.
    delta : float
        The target ``|M_h' M_h|_op``, in ``[0, alpha^2]``.
    alpha : float
        Nonzero scale of each head.
    rank : int
        Rank of each head's subspace, ``>= 1``.
    beta, kernel, normalization, kernel_params
        As for :class:`Head`, shared by every head.

    Returns
    -------
    tuple of Head
        ``n_heads`` heads with ``M = V`` symmetric of rank ``rank``.

    Raises
    ------
    ValueError
        A size out of range (``d < (n_heads + 1) * rank`` included), ``alpha`` zero or not finite, ``delta``
        outside ``[0, alpha^2]``, the matrices above the memory or time limit, or a value :class:`Head` refuses.
    """
    n_heads = validate.integer("n_heads", n_heads, 1)
    rank = validate.integer("rank", rank, 1)
    alpha = validate.real("alpha", alpha, nonzero=True)
    d = validate.integer("d", d, 2)
    if d < (n_heads + 1) * rank:
        raise ValueError(f"d must be >= (n_heads + 1) * rank = {(n_heads + 1) * rank}; received d={d}")
    delta = validate.real("delta", delta)
    if not (0 <= delta <= alpha**2):
        raise ValueError(f"delta must lie in [0, alpha^2 = {alpha**2}]; received {delta!r}")
    cost.guard(f"approx_orthogonal_heads(d={d}, n_heads={n_heads})", bytes=8.0 * d * d * (n_heads + 1),
               seconds=3e-9 * d * d * rank * n_heads, fix="a smaller d or fewer n_heads",
               detail=f"{n_heads} head(s) of a (d, d) float64 matrix")
    c = delta / alpha**2
    heads = []
    for h in range(n_heads):
        U = np.zeros((d, rank))
        for k in range(rank):
            U[(h + 1) * rank + k, k] = np.sqrt(1 - c)
            U[k, k] = np.sqrt(c)
        M = alpha * U @ U.T
        heads.append(Head(M, M, beta, kernel, normalization, kernel_params))
    return tuple(heads)
