r"""Fast particle sums on S^2 for general heads (any ``M_h``, ``V_h``, kernel and normalization), O(n).

The kernel of each head is a bi-spherical-harmonic operator of degree ``L``
(:class:`meanfield.core.bispherical.GeneralOperator`, MODEL.md section 8); every sum over the tokens is a few
scattered transforms (ducc0's ``adjoint_synthesis_general`` / ``synthesis_general`` through
:class:`~meanfield.core.sphere.PointSet`) and one small matrix product per head:

* the moments ``b[w y_c]`` (three adjoints, shared by every head) give each head's aggregate
  ``u^h = V_h S_h[y]``; mean heads add theirs in coefficient space before three syntheses;
* potential heads (mean, ``M`` symmetric, ``V = c M``) add ``c grad N_h`` with ``N_h = A_K b[w]``: one adjoint and
  one gradient synthesis for all of them together, as zonal heads;
* softmax heads divide by ``Z_h = S_h[1]``; Sinkhorn heads solve their scalings with ``apply(f) = S_h[f]``
  (and its transpose for a non-symmetric ``M``);
* energies ``b^T A_K b / 2``; entropies ``log Z - Q / Z`` with ``Q = beta <x, M S_h[y]>`` for exp kernels.

The same semantics as the direct sums of :mod:`meanfield.core.sums` (self term included) to ``kernel_tol``
(relative to the largest aggregate; tokens off the sphere, Runge-Kutta stages, are evaluated at ``x / |x|``).
:class:`GeneralSpectralSum` has the public methods of :class:`meanfield.models.fastsum.SpectralSum`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core import cost, validate
from ..core.bispherical import (
    OPERATOR_LMAX_CAP,
    GeneralOperator,
    PointSources,
    estimate_operator,
    is_axial,
    kernel_degree,
    kernel_range,
    truncation_tolerance,
)
from ..core.heads import check_heads
from ..core.kernels import KERNELS, NORMALIZATIONS
from ..core.sinkhorn import SINKHORN_MAXITER, SINKHORN_TOL
from ..core.sphere import PointSet, SphereGrid
from ..core.sums import LastScalings

__all__ = ["GeneralSpectralSum", "general_degree"]


@validate.renamed(tolerance="kernel_tol")
def general_degree(heads, kernel_tol):
    """The operator degree of ``heads`` at ``kernel_tol``: the largest :func:`~meanfield.core.bispherical.kernel_degree`
    (ValueError naming the head when one needs more than
    :data:`~meanfield.core.bispherical.OPERATOR_LMAX_CAP`, or has no degree rule).

    Parameters
    ----------
    heads : sequence of Head
        Heads of dimension 3.
    kernel_tol : float
        Relative accuracy, in (0, 1).

    Returns
    -------
    int
        ``L >= 2``.

    Raises
    ------
    ValueError
        A head needing a degree above the cap, a kernel without a degree rule, or a head
        :func:`~meanfield.core.bispherical.kernel_degree` refuses.
    TypeError
        The keyword ``tolerance`` of 0.2 (now ``kernel_tol``).
    """
    L = 2
    for i, h in enumerate(heads):
        Li = kernel_degree(h, kernel_tol, where=f"heads[{i}]")
        if Li is None:
            mem = cost.memory_text(estimate_operator(OPERATOR_LMAX_CAP, axial=is_axial(h.M)).bytes)
            raise ValueError(f"heads[{i}] needs an operator degree L above OPERATOR_LMAX_CAP = {OPERATOR_LMAX_CAP} at "
                             f"kernel_tol = {kernel_tol:.1e} (beta |M|_2 = {h.beta * np.linalg.norm(h.M, 2):.4g}; an "
                             f"operator at the cap alone needs about {mem}); use a larger kernel_tol, an explicit lmax, "
                             f"or summation='direct'")
        L = max(L, Li)
    return L


@validate.renamed(tolerance="kernel_tol")
@dataclass(frozen=True, eq=False)
class GeneralSpectralSum:
    """Spectral (bi-spherical operator) evaluation of the particle velocity, forces, energies and entropies.

    Parameters
    ----------
    heads : sequence of Head
        Heads of dimension 3, any ``M``, ``V``, kernel and normalization.
    kernel_tol : float
        Requested accuracy relative to the size of the sums, in ``[1e-14, 1)``.
    lmax : int, optional
        Operator degree ``L``; default :func:`general_degree` of the heads at ``kernel_tol`` (kernels without a
        degree rule, ReLU, need it given; its accuracy is measured in ``benchmarks/RESULTS_general_heads.md``).
    nthreads : int
        Threads of the transforms.
    sinkhorn_tol, sinkhorn_maxiter :
        As for :class:`meanfield.models.fastsum.SpectralSum`.

    Notes
    -----
    The operators are built on first use (:attr:`operator`, its cost estimated and guarded at construction).

    Raises
    ------
    ValueError
        Heads :func:`~meanfield.core.heads.check_heads` refuses or not of dimension 3; ``kernel_tol`` outside
        ``[1e-14, 1)``; ``lmax`` below 2; a degree the rule cannot give (:func:`general_degree`); or a grid or
        operators above the memory or time limit.
    TypeError
        The keyword ``tolerance`` of 0.2 (now ``kernel_tol``).
    """

    heads: tuple
    kernel_tol: float = 1e-10
    lmax: int | None = None
    nthreads: int = 1
    sinkhorn_tol: float = SINKHORN_TOL
    sinkhorn_maxiter: int = SINKHORN_MAXITER
    grid: SphereGrid = field(init=False)
    operator: GeneralOperator = field(init=False)

    def __post_init__(self):
        heads = check_heads(self.heads)
        if heads[0].dim != 3:
            raise ValueError(f"spectral summation needs d = 3 (tokens on S^2); received d = {heads[0].dim}")
        tol = validate.real("kernel_tol", self.kernel_tol, 1e-14, 1, hi_open=True, what="a number in [1e-14, 1)")
        if self.lmax is None:
            lmax = general_degree(heads, tol)
        else:
            lmax = validate.integer("lmax", self.lmax, 2, what="an integer >= 2 or None")
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("heads", heads)
        set_("kernel_tol", tol)
        set_("lmax", int(lmax))
        set_("grid", SphereGrid(int(lmax), nthreads=self.nthreads))
        # the accuracy the operators' checks assume: the requested kernel_tol, or what an explicit degree reaches
        reach = tol if self.lmax is None else max([tol] + [truncation_tolerance(h, lmax) for h in heads])
        set_("operator", GeneralOperator(heads, int(lmax), nthreads=self.nthreads, tolerance=reach))
        set_("_epsilon", max(tol * 1e-3, 1e-14))
        set_("_solved", tuple(i for i, h in enumerate(heads) if not NORMALIZATIONS[h.normalization].row_local))
        set_("_solve", {"tol": self.sinkhorn_tol, "maxiter": self.sinkhorn_maxiter})
        set_("_last", LastScalings())

    def conditioning(self) -> float:
        """The a-priori loss of accuracy of the normalizing (softmax) heads: the largest ``max k / min k`` over the
        scores ``|s| <= |M|_2`` (row sums are at least ``min k`` times the total weight, the sums' absolute accuracy is
        ``kernel_tol`` times ``max k`` times it); 1 without such heads, ``inf`` for kernels that vanish.  ``summation=
        "auto"`` stays direct above :data:`meanfield.core.bispherical.ACCURACY_LOSS` (exp: ``beta |M|_2 > 2.30``), the
        loss the operators' own check warns beyond.

        Returns
        -------
        float
            ``>= 1``, possibly ``inf``.
        """
        out = 1.0
        for h in self.heads:
            if NORMALIZATIONS[h.normalization].uses_normalizer:
                lo, hi = kernel_range(h)
                out = max(out, np.inf if lo == 0 else hi / lo)
        return float(out)

    # ------------------------------------------------------------------ building blocks
    def directions(self, X, scratch=False):
        """The :class:`~meanfield.core.sphere.PointSet` of the directions of rows ``X`` (n, 3) at the operator's
        degree (None where a row is not finite or zero); as :meth:`meanfield.models.fastsum.SpectralSum.directions`.

        Parameters
        ----------
        X : ndarray, shape (n, 3), float64
            Rows (not validated).
        scratch : bool
            Use this thread's reused buffers.

        Returns
        -------
        PointSet or None
        """
        return PointSet._directions(self.grid, X, self._epsilon, scratch)

    def _space(self, X, w):
        pts = PointSet.directions(self.grid, validate.points3("X", X), self._epsilon)
        return PointSources(pts, validate.real_vector("w", w, pts.n))

    def coefficients(self, X, w):
        """Coefficients ``b_lm = sum_j w_j conj(Y_lm(x_j))`` of the weighted measure at degree ``lmax``.

        Parameters
        ----------
        X : array_like, shape (n, 3)
            Tokens (rows projected radially onto the sphere).
        w : array_like, shape (n,)
            Token weights.

        Returns
        -------
        ndarray, shape (nalm,), complex128

        Raises
        ------
        ValueError
            ``X`` not of shape (n, 3), a zero or non-finite row, or ``w`` not real, finite, of shape (n,).
        """
        return self._space(X, w).coefficients()

    def _known(self, space):
        """Per head the Sinkhorn scaling at this state (None for row-local heads), cached for the last state."""
        if not self._solved:
            return [None] * len(self.heads)
        key = ("general", space.pts.loc.tobytes(), space.w.tobytes())
        known = self._last.get(key)
        if known is None:
            known = [None] * len(self.heads)
            for i in self._solved:
                sums = self.operator.head_sums(i, space)
                res = NORMALIZATIONS[self.heads[i].normalization].scalings(
                    sums.apply, sums.shape, apply_t=sums.apply_t, where=f"heads[{i}]", **self._solve)
                res.a.setflags(write=False)
                res.b.setflags(write=False)
                known[i] = res
            self._last.put(key, known)
        return known

    # ------------------------------------------------------------------ public sums
    def velocity(self, X, w=None):
        """Tangent velocities ``sum_h P_x u^h`` at the tokens (n, 3) (default weights ``1/n``).

        Parameters
        ----------
        X : array_like, shape (n, 3)
            Tokens.
        w : array_like, shape (n,), optional
            Token weights (default ``1/n``).

        Returns
        -------
        ndarray, shape (n, 3)
            NaN everywhere when a row is zero or not finite.

        Raises
        ------
        ValueError
            ``X`` not real of shape (n, 3), or ``w`` not real, finite, of shape (n,).
        """
        X = validate.points3("X", X)
        if w is None:
            w = np.full(X.shape[0], 1.0 / X.shape[0])
        pts = self.directions(X)
        if pts is None:
            return np.full(X.shape, np.nan)
        return self.velocity_at(pts, validate.real_vector("w", w, pts.n))

    def velocity_at(self, pts, w):
        """:meth:`velocity` at a point set from :meth:`directions`, for validated float64 weights ``w`` (n,).

        Parameters
        ----------
        pts : PointSet
            From :meth:`directions`.
        w : ndarray, shape (n,), float64
            Validated weights.

        Returns
        -------
        ndarray, shape (n, 3)
        """
        space = PointSources(pts, w)
        return self.operator.velocity(space, known=self._known(space), **self._solve)

    def forces(self, X, w, scalings=False):
        """Per-head unprojected aggregates ``u^h`` (H, n, 3) and normalizers (H, n) (and the scalings), as
        :meth:`meanfield.models.fastsum.SpectralSum.forces`.

        Parameters
        ----------
        X : array_like, shape (n, 3)
            Tokens (rows projected radially onto the sphere).
        w : array_like, shape (n,)
            Token weights.
        scalings : bool
            Also return the scalings.

        Returns
        -------
        U : ndarray, shape (H, n, 3)
        N : ndarray, shape (H, n)
        scalings : list (only with ``scalings=True``)
        """
        space = self._space(X, w)
        U, N, res = self.operator.forces(space, known=self._known(space), **self._solve)
        return (U, N, res) if scalings else (U, N)

    def scalings(self, X, w):
        """Per head the Sinkhorn scaling (:class:`~meanfield.core.sinkhorn.SinkhornResult`), None for row-local heads.

        Parameters
        ----------
        X : array_like, shape (n, 3)
            Tokens (rows projected radially onto the sphere).
        w : array_like, shape (n,)
            Token weights.

        Returns
        -------
        list of SinkhornResult or None
        """
        return list(self._known(self._space(X, w)))

    def energies(self, X, w):
        """Per-head energies (H,): ``E_h = 1/2 sum_ij w_i w_j K_h(s_ij)`` (``b^T A_K b / 2``), or ``E_S`` of a
        Sinkhorn head from its scalings.

        Parameters
        ----------
        X : array_like, shape (n, 3)
            Tokens (rows projected radially onto the sphere).
        w : array_like, shape (n,)
            Token weights.

        Returns
        -------
        ndarray, shape (H,)
        """
        space = self._space(X, w)
        known = self._known(space)
        out = np.empty(len(self.heads))
        for i, h in enumerate(self.heads):
            if known[i] is None:
                out[i] = self.operator.energy(i, space)
            else:
                out[i] = NORMALIZATIONS[h.normalization].energy(h, self.operator.head_sums(i, space), known[i],
                                                                space.w)
        return out

    def entropies(self, X, w, shannon=False):
        r"""Relative attention entropies ``-sum_j p_ij log(p_ij / w_j)`` per head and token (H, n), as
        :meth:`meanfield.models.fastsum.SpectralSum.entropies` (``shannon=True``: ``-sum_j p_ij log p_ij``);
        NaN rows for kernels that can vanish (ReLU).

        Parameters
        ----------
        X : array_like, shape (n, 3)
            Tokens (rows projected radially onto the sphere).
        w : array_like, shape (n,)
            Token weights.
        shannon : bool
            Shannon entropies instead of relative ones.

        Returns
        -------
        ndarray, shape (H, n)
        """
        space = self._space(X, w)
        known = self._known(space)
        op = self.operator
        H = np.full((len(self.heads), space.shape[0]), np.nan)
        w = space.w
        with np.errstate(divide="ignore"):
            logw = np.where(w > 0, np.log(np.where(w > 0, w, 1.0)), 0.0)
        for i, h in enumerate(self.heads):
            if not KERNELS[h.kernel].positive:
                continue
            sums = op.head_sums(i, space)
            s = None if known[i] is None else known[i].b
            Z = sums.apply(s)
            Q = op.entropy_sums(i, space, s)
            if s is not None:
                Q = Q + sums.apply(s * np.log(s))
            H[i] = np.log(Z) - Q / Z
            if shannon:
                H[i] -= sums.apply(logw if s is None else s * logw) / Z
        return H
