r"""Fast particle sums on S^2 for zonal heads by spherical harmonics (Funk-Hecke), O(n + lmax^2 log lmax).

For zonal heads ``M_h = V_h = lambda_h I`` on ``S^2`` the interaction depends on ``t = <x, y>`` only,
so every sum over sources is a degree-wise multiplier applied to the coefficients of the weighted
empirical measure ``mu = sum_j w_j delta_{x_j}``:

.. math::

    b_{lm} = \sum_j w_j \overline{Y_{lm}(x_j)},\qquad
    \sum_j w_j g(\langle x, x_j\rangle) = \sum_{lm} c_l[g]\, b_{lm} Y_{lm}(x),\qquad
    c_l[g] = 2\pi \int_{-1}^{1} g(t) P_l(t)\, dt .

With the potential ``N_h(x) = sum_j w_j K_h(lambda_h <x, x_j>)`` (``K`` the kernel antiderivative)
and ``Z_h(x) = sum_j w_j k_h(lambda_h <x, x_j>)``, the tangent part of the head aggregate is
``grad_S N_h`` and its normal part is ``R_h x`` with ``R_h = sum_j w_j k_h(s) s``; so

.. math:: u_i^h = \frac{\nabla_S N_h(x_i) + R_h(x_i)\, x_i}{D_h(x_i)},\qquad D_h = 1 \text{ or } Z_h,

exactly the direct sums of :mod:`meanfield.core.sums`, the self-interaction ``j = i`` included.
Sinkhorn heads (MODEL.md section 6) solve their scalings with ``apply(f) = c[k] b[w f]`` evaluated at the
tokens (one adjoint and one synthesis per application: O(n + lmax^2 log lmax)), then sum ``a grad N[w b]``.
The multipliers and their mean/softmax combination are a :class:`meanfield.core.zonal.ZonalOperator`
(each kernel of :data:`meanfield.core.kernels.KERNELS` supplies its multipliers: closed forms for
exp, ``c[K] = 4 pi i_l(a) / beta``, ``c[k] = 4 pi i_l(a)``, ``c[k s] = 4 pi lambda i_l'(a)`` with
``a = beta lambda``; Gauss-Legendre quadrature on each half of [-1, 1] otherwise).

The degree ``lmax`` is :func:`meanfield.core.zonal.required_lmax`: the smallest ``L >= 2`` whose neglected tail, weighted by the growth of a point-evaluated
gradient, is below ``kernel_tol``.  Exp multipliers decay super-exponentially beyond
``l ~ beta |lambda|`` (``lmax`` 11, 19, 26 for ``beta = 1, 5, 10`` at 1e-10); sigmoid ones
exponentially (``lmax`` 15, 47, 85 at 1e-10).  ReLU multipliers decay algebraically
(``c[K] ~ l^{-3}``), the velocity converges only algebraically in ``lmax``: ReLU heads have no lmax
rule, need an explicit ``lmax``, and the accuracy reached is measured in ``benchmarks/RESULTS.md``
(never near 1e-10).
Point transforms are :class:`meanfield.core.sphere.PointSet` (:meth:`~meanfield.core.sphere.PointSet.directions`):
the angles and tangent frame of the tokens are computed once per evaluation, in one fused pass with the
radial projection ``x / |x|``, and shared by every transform of that evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core import validate
from ..core.heads import check_heads
from ..core.kernels import LMAX_CAP, NORMALIZATIONS
from ..core.sinkhorn import SINKHORN_MAXITER, SINKHORN_TOL
from ..core.sphere import PointSet, SphereGrid
from ..core.sums import LastScalings
from ..core.zonal import PointSpace, ZonalOperator, has_lmax_rule, no_lmax_rule, required_lmax
from .generalsum import GeneralSpectralSum

__all__ = ["SpectralSum", "spectral_supported", "spectral_sum"]


def spectral_supported(heads, geometry="sphere", lmax=None):
    """Why spectral summation does not apply (a message), or ``None`` when it does: d = 3, the
    sphere, and (when ``lmax`` is not given) kernels with an lmax rule.  Zonal heads use the Funk-Hecke
    multipliers (:class:`SpectralSum`), any other heads the bi-spherical operators
    (:class:`meanfield.models.generalsum.GeneralSpectralSum`).  Never raises for valid heads.

    Parameters
    ----------
    heads : Head or sequence of Head
        The heads (:func:`~meanfield.core.heads.check_heads`).
    geometry : str
        The tokens' geometry (``"sphere"`` or ``"flat"``).
    lmax : int, optional
        A given degree (then kernels without an lmax rule are allowed).

    Returns
    -------
    str or None

    Raises
    ------
    ValueError
        Heads :func:`~meanfield.core.heads.check_heads` refuses.
    """
    heads = check_heads(heads)
    if heads[0].dim != 3:
        return (f"spectral summation needs d = 3 (tokens on S^2: spherical harmonics); received d = {heads[0].dim} "
                f"(the direct sums serve any d)")
    if geometry != "sphere":
        return f"spectral summation needs geometry 'sphere'; received {geometry!r}"
    if lmax is None:
        for i, h in enumerate(heads):
            if not has_lmax_rule(h):
                return no_lmax_rule(i, h)
    return None


@validate.renamed(tolerance="kernel_tol")
def spectral_sum(heads, kernel_tol=1e-10, lmax=None, nthreads=1, **solve):
    """The spectral sum of ``heads``: :class:`SpectralSum` (Funk-Hecke) when every head is zonal, else
    :class:`meanfield.models.generalsum.GeneralSpectralSum` (bi-spherical operators); the same public methods.

    Parameters
    ----------
    heads : Head or sequence of Head
        Heads of dimension 3.
    kernel_tol : float
        Requested relative accuracy, in ``[1e-14, 1)``.
    lmax : int, optional
        Degree (default: the rule at ``kernel_tol``).
    nthreads : int
        Threads of the transforms.
    **solve
        ``sinkhorn_tol``, ``sinkhorn_maxiter``.

    Returns
    -------
    SpectralSum or GeneralSpectralSum

    Raises
    ------
    ValueError
        As for the class chosen.
    TypeError
        The keyword ``tolerance`` of 0.2 (now ``kernel_tol``).
    """
    heads = check_heads(heads)
    cls = SpectralSum if all(h.is_zonal for h in heads) else GeneralSpectralSum
    return cls(heads, kernel_tol, lmax=lmax, nthreads=nthreads, **solve)


@validate.renamed(tolerance="kernel_tol")
@dataclass(frozen=True, eq=False)
class SpectralSum:
    """Spectral (Funk-Hecke) evaluation of the particle velocity, aggregates and energy.

    Parameters
    ----------
    heads : sequence of Head
        Zonal heads of dimension 3.
    kernel_tol : float
        Requested accuracy relative to the size of the sums (see Notes), in ``[1e-14, 1)``.
    lmax : int, optional
        Degree; default :func:`meanfield.core.zonal.required_lmax` of the heads at ``kernel_tol``
        (``ValueError`` when that exceeds :data:`meanfield.core.kernels.LMAX_CAP`, or for kernels without an lmax rule,
        e.g. ReLU, which need it given).
    nthreads : int
        Threads of the spherical-harmonic transforms.
    sinkhorn_tol, sinkhorn_maxiter :
        Marginal tolerance and iteration cap of the scalings of Sinkhorn heads
        (:func:`meanfield.core.sinkhorn.solve_scaling`, from a cold start at every call).

    Notes
    -----
    Errors are relative to the largest aggregate ``max_i |u_i^h|`` scale of the sums (the transforms
    run at ``epsilon = kernel_tol / 1000``, floored at 1e-14: ducc0's accuracy relative to the L2
    norm of the data; measured errors are 1e-12..3e-11 of the aggregates at kernel_tol 1e-10).
    Points off the unit sphere (Runge-Kutta stages) are evaluated at ``x / |x|``: a smooth extension
    of the field that agrees with the direct sum on the sphere.

    Raises
    ------
    ValueError
        Heads not zonal, not of dimension 3, or refused by :func:`~meanfield.core.heads.check_heads`; a
        kernel without an lmax rule and no ``lmax``; ``kernel_tol`` outside ``[1e-14, 1)``; a rule's degree
        above :data:`~meanfield.core.kernels.LMAX_CAP`; ``lmax`` below 2; or a grid above the memory or
        time limit.
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
    operator: ZonalOperator = field(init=False)

    def __post_init__(self):
        heads = check_heads(self.heads)
        why = spectral_supported(heads, lmax=self.lmax)
        if why is None and not all(h.is_zonal for h in heads):
            why = ("SpectralSum needs zonal heads (M = V = lambda I); received a non-zonal head (use spectral_sum, "
                   "which takes GeneralSpectralSum for general heads)")
        if why is not None:
            raise ValueError(why)
        tol = validate.real("kernel_tol", self.kernel_tol, 1e-14, 1, hi_open=True, what="a number in [1e-14, 1)")
        lmax = self.lmax
        if lmax is None:
            lmax = required_lmax(heads, tol)
            if lmax is None:
                raise ValueError(f"kernel_tol = {tol:.1e} needs lmax > LMAX_CAP = {LMAX_CAP} for these heads "
                                 f"(beta |lambda| too large); use a larger kernel_tol or direct summation")
        else:
            lmax = validate.integer("lmax", lmax, 2, what="an integer >= 2 or None")
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("heads", heads)
        set_("kernel_tol", tol)
        set_("lmax", int(lmax))
        set_("grid", SphereGrid(int(lmax), nthreads=self.nthreads))
        set_("operator", ZonalOperator(heads, self.lmax, l_index=self.grid.l_index))
        set_("_epsilon", max(tol * 1e-3, 1e-14))
        # heads whose normalization solves over the tokens (Sinkhorn) are summed one by one after their solve;
        # the others keep the operator's fused velocity (mean heads share one gradient)
        solved = tuple(i for i, h in enumerate(heads) if not NORMALIZATIONS[h.normalization].row_local)
        local = [h for i, h in enumerate(heads) if i not in solved]
        set_("_solved", solved)
        set_("_local", self.operator if not solved else
             (ZonalOperator(local, self.lmax, l_index=self.grid.l_index) if local else None))
        set_("_solve", {"tol": self.sinkhorn_tol, "maxiter": self.sinkhorn_maxiter})
        set_("_last", LastScalings())

    # ------------------------------------------------------------------ building blocks
    def coefficients(self, X, w):
        """Coefficients ``b_lm = sum_j w_j conj(Y_lm(x_j))`` of the weighted measure, shape (nalm,).

        ``X`` (n, 3) is projected radially onto the sphere; ``w`` (n,) real.

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
        return self._points(X).adjoint(validate.real_vector("w", w, X.shape[0]))

    def _points(self, X):
        return PointSet.directions(self.grid, validate.points3("X", X), self._epsilon)

    # ------------------------------------------------------------------ public sums
    def velocity(self, X, w=None):
        """Tangent velocities ``sum_h P_x u^h = sum_h grad N_h / D_h`` at the tokens, shape (n, 3).

        Parameters
        ----------
        X : ndarray, shape (n, 3)
        w : ndarray, shape (n,), optional
            Token weights (the same convention as :class:`meanfield.models.particles.ParticleSystem`);
            default uniform ``1/n``, as :meth:`meanfield.ParticleSystem.velocity`.

        Returns
        -------
        ndarray, shape (n, 3)
            NaN everywhere when a row of ``X`` is zero or not finite (a blown-up stage).

        Raises
        ------
        ValueError
            ``X`` not real of shape (n, 3), or ``w`` not real, finite, of shape (n,).
        """
        X = validate.points3("X", X)
        if w is None:
            w = np.full(X.shape[0], 1.0 / X.shape[0])
        pts = self.directions(X, scratch=True)
        if pts is None:                        # a blown-up integrator stage: NaN, reported by integrate
            return np.full(X.shape, np.nan)
        return self.velocity_at(pts, validate.real_vector("w", w, pts.n))

    def directions(self, X, scratch=False):
        """The :class:`~meanfield.core.sphere.PointSet` of the directions of float64 rows ``X`` (n, 3) at
        this sum's accuracy, in one pass (radial projection, angles, ``norms2``); None where a row is
        not finite or zero.  With :meth:`velocity_at`, the velocity of callers that check the rows
        from ``norms2`` (:meth:`meanfield.ParticleSystem.velocity`) instead of in a pass of their own.
        ``scratch=True``: in this thread's reused buffers, overwritten by the next such call (use the
        point set at once and drop it; saves the page faults of fresh arrays, ~8 ms at n = 10^6).

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
        b = pts.adjoint(w)
        if not self._solved:
            return self.operator.velocity(b, PointSpace(pts))
        space = PointSpace(pts, w)
        known = self._known(pts, w, b, space)
        v = np.zeros((pts.n, 3)) if self._local is None else self._local.velocity(b, space)
        for i in self._solved:
            v += NORMALIZATIONS[self.heads[i].normalization].force(self.operator.head_sums(i, b, space),
                                                                   known=known[i])[0]
        return v

    def _known(self, pts, w, b, space):
        """Per head the Sinkhorn scaling at this state (None for row-local heads), from the last-state cache
        (:class:`~meanfield.core.sums.LastScalings`, keyed by the points' angles and the weights) or solved."""
        key = ("spectral", pts.loc.tobytes(), w.tobytes())
        known = self._last.get(key)
        if known is None:
            known = [None] * len(self.heads)
            for i in self._solved:
                sums = self.operator.head_sums(i, b, space)
                res = NORMALIZATIONS[self.heads[i].normalization].scalings(sums.apply, sums.shape, where=f"heads[{i}]",
                                                                            **self._solve)
                res.a.setflags(write=False)                 # shared by every call at this state
                known[i] = res
            self._last.put(key, known)
        return known

    def _state(self, X, w):
        """Point set, validated weights, coefficients, space and known scalings of tokens ``X``."""
        pts = self._points(X)
        w = validate.real_vector("w", w, pts.n)
        b = pts.adjoint(w)
        space = PointSpace(pts, w)
        return pts, w, b, space, (self._known(pts, w, b, space) if self._solved else [None] * len(self.heads))

    def forces(self, X, w, scalings=False):
        """Per-head aggregates ``u^h`` before projection and their normalizers.

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
            1 (mean), ``Z_h`` (softmax; a row with ``Z <= 0``, ReLU only, gets ``u = 0``) or ``1 / a``
            (Sinkhorn).
        scalings : list (only with ``scalings=True``)
            Per head the :class:`~meanfield.core.sinkhorn.SinkhornResult` of a Sinkhorn head, else None.
        """
        pts, w, b, space, known = self._state(X, w)
        U, N, res = self.operator.forces(b, space, pts.points, known=known, **self._solve)
        return (U, N, res) if scalings else (U, N)

    def scalings(self, X, w):
        """Per head the :class:`~meanfield.core.sinkhorn.SinkhornResult` of a Sinkhorn head (scalings ``a = b``,
        marginal error reached), None for row-local heads.

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
        return list(self._state(X, w)[4])

    def energies(self, X, w):
        """Per-head energies, shape (H,): ``E_h = 1/2 sum_ij w_i w_j K_h(s_ij)`` by Parseval, or ``E_S`` of a
        Sinkhorn head (:meth:`meanfield.core.kernels.SinkhornNormalization.energy`) from its scalings.

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
        b = self.coefficients(X, w)
        g = self.grid
        out = np.array([0.5 * g.inner(b, g.multiply_degree(b, m["potential"])) for m in self.operator.multipliers])
        if self._solved:
            pts, w, b, space, known = self._state(X, w)
            for i in self._solved:
                sums = self.operator.head_sums(i, b, space)
                out[i] = NORMALIZATIONS[self.heads[i].normalization].energy(self.heads[i], sums, known[i], w)
        return out

    def entropies(self, X, w, shannon=False):
        r"""Relative attention entropies ``H_i^h - log n`` per head and token, shape (H, n).

        ``-sum_j p_ij log(p_ij / w_j)`` with ``p_ij = w_j k_h(s_ij) / Z_i`` (for uniform weights the
        Shannon entropy ``H_i^h`` minus ``log n``), the self-interaction included:

        .. math:: H_i^h = \log Z_h(x_i) - Q_h(x_i) / Z_h(x_i),\qquad
                  Q_h = \sum_j w_j k_h \log k_h (s_{ij}),

        equal to ``meanfield.diagnostics.attention_entropy(system, X, w, relative=True)`` to
        ``kernel_tol`` (relative to ``max |log Z|``).  NaN rows for heads whose kernel can vanish (ReLU).

        For a Sinkhorn head the rows are ``p_ij = a_i k_h(s_ij) b_j w_j`` and, with ``Z = c[k] b[w b]``
        (``= 1 / a`` at the solution), ``H = log Z - (Q[w b] + c[k] b[w b log b]) / Z``.

        ``shannon=True``: the Shannon entropies ``-sum_j p_ij log p_ij`` instead, i.e. the relative ones
        minus ``sum_j p_ij log w_j`` (``log w`` for uniform weights; otherwise one more kernel sum, with
        sources ``w log w`` (``0 log 0 = 0``), times ``b`` for a Sinkhorn head).

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
        pts, w, b, space, known = self._state(X, w)
        H = np.full((len(self.heads), pts.n), np.nan)
        local = [i for i in range(len(self.heads)) if i not in self._solved]
        if local:                                    # row-local heads: the operator's entropies (no solve)
            H[local] = self._local.entropies(b, space)
        op = self.operator
        for i in self._solved:
            if "entropy" not in op.multipliers[i]:
                continue                             # no distribution where k vanishes (as for softmax rows)
            s = known[i].b
            bs, bl = space.coefficients(s), space.coefficients(s * np.log(s))
            Z = op.normalizer(bs, space, i)
            Q = space.evaluate(space.multiply(bs, op._mult(i, "entropy")), "R")
            H[i] = np.log(Z) - (Q + op.normalizer(bl, space, i)) / Z
        if not shannon:
            return H
        if np.all(w == w[0]):
            return H - np.log(w[0])
        with np.errstate(divide="ignore"):
            logw = np.where(w > 0, np.log(w), 0.0)
        for i in range(len(self.heads)):
            if np.all(np.isnan(H[i])):
                continue
            s = known[i].b if known[i] is not None else None
            num = op.normalizer(space.coefficients(logw if s is None else s * logw), space, i)
            H[i] -= num / op.normalizer(b if s is None else space.coefficients(s), space, i)
        return H
