r"""One zonal operator: the Funk-Hecke form of zonal heads on S^2, shared by the PDE, the spectral
particle sums and the attention entropies.

For zonal heads ``M_h = V_h = lambda_h I`` every sum (or integral) over sources is a degree-wise
multiplier applied to the coefficients ``b_lm`` of the weighted measure (or density):

.. math:: N_h = c[K_h] b,\quad Z_h = c[k_h] b,\quad R_h = c[k_h s] b,\quad Q_h = c[k_h \log k_h] b,

and the velocity is ``sum_h grad N_h / D_h`` (``D_h = 1`` for mean heads, ``Z_h`` for softmax; the
:data:`~meanfield.core.kernels.NORMALIZATIONS` entry says which), the unprojected aggregate adds
the normal part ``R_h x``, and the relative attention entropy is ``H_h = log Z_h - Q_h / Z_h``.
:class:`ZonalOperator` holds the multipliers and applies them in a *space*: :class:`GridSpace`
(values on a :class:`~meanfield.core.sphere.SphereGrid`, vectors first) or :class:`PointSpace`
(values at points, :class:`~meanfield.core.sphere.PointSet`, vectors last).
:func:`required_lmax` is the one rule for the degree a tolerance needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import cost, validate
from .field_forces import field_entropies, field_velocity
from .heads import check_heads
from .kernels import KERNELS, LMAX_CAP, NORMALIZATIONS, Kernel, check_finite_multipliers
from .sinkhorn import SINKHORN_MAXITER, SINKHORN_TOL

__all__ = ["zonal_multipliers", "required_lmax", "LMAX_CRITERIA", "has_lmax_rule", "truncation_level", "ZonalOperator", "GridSpace",
           "PointSpace"]


def _check_zonal(head):
    if not head.is_zonal:
        raise ValueError("head must be zonal (M = V = lambda I) for spectral summation; received a non-zonal head")


def zonal_multipliers(head, lmax, *, where="head"):
    r"""Funk-Hecke multipliers of one zonal head ``M = V = lambda I``, each of shape (lmax+1,).

    With ``s = lambda t``, ``k`` the head's kernel and ``K`` its antiderivative (see
    :meth:`meanfield.core.kernels.Kernel.multipliers`; exp: ``c[K] = 4 pi i_l(a) / beta``,
    ``c[k] = 4 pi i_l(a)``, ``c[k s] = 4 pi lambda i_l'(a)``, ``a = beta lambda``).

    Parameters
    ----------
    head : Head
        A zonal head.
    lmax : int
        Largest degree, ``>= 0``.
    where : str
        Names the head in the errors.

    Returns
    -------
    dict
        With ``"potential"`` (``c[K(lambda t)]``), ``"normalizer"`` (``c[k(lambda t)]``),
        ``"normal"`` (``c[k(lambda t) lambda t]``, the radial part of the aggregate) and, for kernels
        with ``k > 0``, ``"entropy"`` (``c[k log k]``).

    Raises
    ------
    ValueError
        A head that is not zonal, ``lmax`` not an integer ``>= 0``, or multipliers that overflow float64.
    """
    _check_zonal(head)
    out = KERNELS[head.kernel].multipliers(head, validate.integer("lmax", lmax, 0))
    return check_finite_multipliers(head, out, where)        # beta |lambda| beyond float64 range refused


def no_lmax_rule(i, head):
    """The message for ``heads[i]`` whose kernel has no lmax rule."""
    return (f"heads[{i}] has kernel {head.kernel!r}, whose Funk-Hecke multipliers decay only algebraically: "
            f"it has no lmax rule (kernels with one: {[k for k, v in KERNELS.items() if v.has_lmax_rule]}); "
            f"pass lmax explicitly")


LMAX_CRITERIA = ("sums", "pde")


REQUIRED_LMAX_BYTES_PER_DEGREE = 250.0
"""Peak bytes per degree ``l <= cap + 64`` of an lmax rule (the multipliers, the gradient growth and their
tails; measured with tracemalloc: 80-100 for exp, 170-210 for the quadrature-based sigmoid)."""
REQUIRED_LMAX_SECONDS = 1.2e-6
"""Seconds per degree of a closed-form lmax rule (exp: 0.06 s at cap 50000), and per degree squared of a
quadrature-based one (sigmoid: nodes grow with the degree; 0.2 s at cap 512, 30 s at cap 5000)."""


def estimate_required_lmax(heads, cap) -> cost.Cost:
    """Estimated peak memory and time of :func:`required_lmax` up to ``cap`` (sizes only, cache ignored)."""
    n = float(cap) + 65.0
    quad = sum(type(KERNELS[h.kernel]).multipliers is Kernel.multipliers for h in heads)
    secs = REQUIRED_LMAX_SECONDS * ((len(heads) - quad) * n + quad * n * n)
    return cost.Cost(f"required_lmax(cap={cap})", REQUIRED_LMAX_BYTES_PER_DEGREE * n, secs,
                     f"multipliers of {len(heads)} head(s) up to degree cap + 64, {quad} by quadrature")


def required_lmax(heads, tolerance, cap=LMAX_CAP, *, criterion="sums"):
    r"""Smallest degree ``L >= 2`` resolving every head's Funk-Hecke tail to ``tolerance``.

    ``criterion="sums"`` (the default: the accuracy of spectral particle sums, as below) or
    ``"pde"``: the check of :class:`meanfield.ContinuumPDE` at ``kernel_tol = tolerance``, the first
    neglected potential multiplier relative to the largest (:func:`truncation_level`) ``<= tolerance``,
    i.e. the smallest ``lmax`` at which the PDE accepts the heads without a
    ``KernelResolutionWarning``.

    The maximum over heads of :meth:`meanfield.core.kernels.Kernel.lmax_rule`: for the potential and
    normalizer multipliers ``c`` and the gradient growth ``G_l = (2l+1)/(4 pi) sqrt(l(l+1)+1)``,
    ``sum_{l > L} |c_l| G_l <= tolerance max_l |c_l| G_l`` (exp: ``lmax`` 11, 19, 26 for
    ``beta = 1, 5, 10`` at 1e-10).

    Parameters
    ----------
    heads : sequence of Head
        Zonal heads of dimension 3.
    tolerance : float
        Requested relative accuracy, in (0, 1).
    cap : int
        Largest degree allowed.

    Returns
    -------
    int or None
        The degree, or ``None`` when it would exceed ``cap``.

    Raises
    ------
    ValueError
        For a head whose kernel has no lmax rule (multipliers decaying algebraically, e.g. ReLU), or
        whose multipliers overflow float64.
    """
    heads = check_heads(heads)
    tolerance = validate.real("tolerance", tolerance, 0, 1, lo_open=True, hi_open=True)
    cap = validate.integer("cap", cap, 2)
    validate.choice("criterion", criterion, LMAX_CRITERIA)
    estimate_required_lmax(heads, cap).check("a smaller cap (the largest degree the rule may choose)")
    L = 2
    for i, h in enumerate(heads):
        _check_zonal(h)
        zonal_multipliers(h, 2, where=f"heads[{i}]")    # refuses beta |lambda| beyond float64 range
        if not has_lmax_rule(h):
            raise ValueError(no_lmax_rule(i, h))
        L = max(L, KERNELS[h.kernel].lmax_rule(h, tolerance, cap) if criterion == "sums"
                else _pde_lmax(h, tolerance, cap))
    return L if L <= cap else None


def _pde_lmax(head, tolerance, cap):
    """Smallest ``L >= 2`` with ``truncation_level(head, L) <= tolerance`` (``cap + 1`` if none)."""
    pot = np.abs(zonal_multipliers(head, cap + 1)["potential"])
    level = pot[3:] / np.maximum.accumulate(pot)[3:]          # level[L - 2] = truncation_level(head, L)
    ok = np.flatnonzero(level <= tolerance)
    return int(ok[0]) + 2 if ok.size else cap + 1


def truncation_level(head, lmax, *, where="head") -> float:
    """``|c_{lmax+1}[K]| / max_l |c_l[K]|``: the first potential multiplier a degree-``lmax``
    truncation neglects, relative to the largest (the check of :class:`meanfield.ContinuumPDE`,
    defined for every kernel, ReLU included; multipliers beyond float64 refused, the error starting
    with ``where``).

    Parameters
    ----------
    head : Head
        A zonal head.
    lmax : int
        The truncation degree, ``>= 0``.
    where : str
        Names the head in the errors.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        As for :func:`zonal_multipliers`.
    """
    pot = zonal_multipliers(head, lmax + 1, where=where)["potential"]
    return float(abs(pot[-1]) / np.abs(pot).max())


def has_lmax_rule(head) -> bool:
    """Whether the head's kernel has an lmax rule (its multipliers decay faster than any power).

    Parameters
    ----------
    head : Head
        Any head.

    Returns
    -------
    bool
    """
    return KERNELS[head.kernel].has_lmax_rule


# ---------------------------------------------------------------------------------------- spaces
class GridSpace:
    """Fields on a :class:`SphereGrid` (tangent vectors as (2, nlat, nlon)); optional work arrays
    (dict with ``v``, ``grad``, ``Z``: grid-shaped; ``alm``: coefficients) avoid allocations.

    Parameters
    ----------
    grid : SphereGrid
        The grid.
    work : dict of str to ndarray, optional
        Work arrays written into and returned instead of new ones.
    """

    axis = 0

    def __init__(self, grid, work=None):
        self.grid, self.work = grid, work

    def _w(self, key):
        return None if self.work is None else self.work.get(key)

    def multiply(self, b, mult_lm):
        """Coefficients times per-coefficient multipliers (into the ``alm`` work array when given).

        Parameters
        ----------
        b, mult_lm : ndarray, shape (nalm,)
            Coefficients and multipliers.

        Returns
        -------
        ndarray, shape (nalm,)
        """
        return np.multiply(b, mult_lm, out=self._w("alm"))

    def gradient(self, f_lm, key):
        """Surface gradient on the grid (:meth:`SphereGrid.gradient`).

        Parameters
        ----------
        f_lm : ndarray, shape (nalm,)
            Coefficients.
        key : str
            The work array to write into, when there is one.

        Returns
        -------
        ndarray, shape (2, nlat, nlon)
        """
        return self.grid.gradient(f_lm, out=self._w(key))

    def evaluate(self, f_lm, key):
        """Values on the grid (:meth:`SphereGrid.synthesis`).

        Parameters
        ----------
        f_lm : ndarray, shape (nalm,)
            Coefficients.
        key : str
            The work array to write into, when there is one.

        Returns
        -------
        ndarray, shape (nlat, nlon)
        """
        return self.grid.synthesis(f_lm, out=self._w(key))

    def analysis(self, values):
        """Coefficients of grid values (GL quadrature; the sources of a Sinkhorn head).

        Parameters
        ----------
        values : ndarray, shape (nlat, nlon)
            Real grid values.

        Returns
        -------
        ndarray, shape (nalm,), complex128
        """
        return self.grid.analysis(values)

    @property
    def shape(self):
        """Shape of a scalar field."""
        return self.grid.shape

    def zeros(self, key):
        """A zero tangent field (the work array ``key`` zeroed, when there is one).

        Parameters
        ----------
        key : str
            The work array's name.

        Returns
        -------
        ndarray, shape (2, nlat, nlon)
        """
        out = self._w(key)
        if out is None:
            return np.zeros((2,) + self.grid.shape)
        out.fill(0.0)
        return out


class PointSpace:
    """Fields at the points of a :class:`PointSet` (vectors as (n, 3)); ``w`` (n,), the weights of the
    points, is needed by :meth:`coefficients` only (sums with scaled sources: Sinkhorn heads).

    Parameters
    ----------
    points : PointSet
        The points.
    w : ndarray, shape (n,), optional
        Their weights.
    """

    axis = -1

    def __init__(self, points, w=None):
        self.points, self.w = points, w

    def coefficients(self, f):
        """Coefficients of the measure ``sum_j w_j f_j delta_{x_j}`` (sources scaled by ``f``).

        Parameters
        ----------
        f : ndarray, shape (n,)
            The sources' factors.

        Returns
        -------
        ndarray, shape (nalm,), complex128
        """
        return self.points.adjoint(np.ascontiguousarray(self.w * f))

    def multiply(self, b, mult_lm):
        """Coefficients times per-coefficient multipliers.

        Parameters
        ----------
        b, mult_lm : ndarray, shape (nalm,)
            Coefficients and multipliers.

        Returns
        -------
        ndarray, shape (nalm,)
        """
        return b * mult_lm

    def gradient(self, f_lm, key):
        """Cartesian surface gradient at the points (:meth:`PointSet.gradient`).

        Parameters
        ----------
        f_lm : ndarray, shape (nalm,)
            Coefficients.
        key : str
            Unused (no work arrays).

        Returns
        -------
        ndarray, shape (n, 3)
        """
        return self.points.gradient(f_lm)

    def evaluate(self, f_lm, key):
        """Values at the points (:meth:`PointSet.evaluate`).

        Parameters
        ----------
        f_lm : ndarray, shape (nalm,)
            Coefficients.
        key : str
            Unused (no work arrays).

        Returns
        -------
        ndarray, shape (n,)
        """
        return self.points.evaluate(f_lm)

    @property
    def shape(self):
        """Shape of a scalar field."""
        return (self.points.n,)

    def zeros(self, key):
        """A zero vector field at the points.

        Parameters
        ----------
        key : str
            Unused (no work arrays).

        Returns
        -------
        ndarray, shape (n, 3)
        """
        return np.zeros((self.points.n, 3))


class ZonalHeadSums:
    """Kernel sums of head ``i`` of a :class:`ZonalOperator` in a space: the ``sums`` object of
    :meth:`meanfield.core.kernels.Normalization.force`.

    ``fused(norm)``: ``U[1] = grad N + R x`` (the normal part only with ``points``, the (n, 3) points of a
    :class:`PointSpace`; without, the tangent part ``grad N``) and ``Z``, combined by ``norm``.  For a
    solve (Sinkhorn; zonal kernels are symmetric, ``apply_t = None``): ``apply(f) = c[k] b[f]`` and
    ``aggregate(f)`` (the same sums with ``b[f]`` the coefficients of the sources scaled by ``f``,
    ``space.coefficients(f)``; ``f = None``: ``b`` itself) in the space.
    """

    apply_t = None

    def __init__(self, operator, i, b, space, points=None):
        self.op, self.i, self.b, self.space, self.points = operator, i, b, space, points
        self.shape, self.axis = tuple(space.shape), space.axis

    def _vector(self, b):
        sp, op = self.space, self.op
        U = sp.gradient(sp.multiply(b, op._mult(self.i, "potential")), "grad")
        if self.points is not None:
            U += sp.evaluate(sp.multiply(b, op._mult(self.i, "normal")), "R")[:, None] * self.points
        return U

    def fused(self, norm):
        U = self._vector(self.b)
        Z = self.op.normalizer(self.b, self.space, self.i) if norm.uses_normalizer else np.ones(self.shape)
        return norm.combine(U, Z, self.axis), norm.normalizer(Z)

    def _coefficients(self, f):
        return self.b if f is None else self.space.coefficients(f)

    def apply(self, f):
        return self.op.normalizer(self._coefficients(f), self.space, self.i)

    def aggregate(self, f):
        return self._vector(self._coefficients(f))


# ---------------------------------------------------------------------------------------- operator
@dataclass(frozen=True, eq=False)
class ZonalOperator:
    """Per-head Funk-Hecke multipliers of zonal heads and their mean/softmax combination.

    Parameters
    ----------
    heads : sequence of Head
        Zonal heads (``M = V = lambda I``) of dimension 3.
    lmax : int
        Largest degree, ``>= 0``.
    l_index : ndarray of int, optional
        Degree of each coefficient of the coefficient layout used (``SphereGrid.l_index``): the
        multipliers are expanded per coefficient once (``*_lm`` attributes).

    Attributes
    ----------
    multipliers : tuple of dict
        :func:`zonal_multipliers` of each head (shape (lmax+1,) each).
    linear_potential : ndarray (lmax+1,) or None
        Sum of the potential multipliers of the heads whose normalization does not use ``Z`` (mean):
        their velocities add up to one gradient.
    normalized : tuple of int
        Indices of the heads whose normalization uses ``Z`` (softmax).

    Raises
    ------
    ValueError
        Heads :func:`~meanfield.core.heads.check_heads` refuses, not zonal or not of dimension 3, ``lmax``
        not an integer ``>= 0``, or multipliers that overflow float64.
    """

    heads: tuple
    lmax: int
    l_index: np.ndarray | None = None
    multipliers: tuple = field(init=False)
    linear_potential: np.ndarray | None = field(init=False)
    normalized: tuple = field(init=False)

    def __post_init__(self):
        heads = check_heads(self.heads)
        for h in heads:
            _check_zonal(h)
        if heads[0].dim != 3:
            raise ValueError(f"heads must have dimension d = 3 (zonal operators act on S^2); "
                             f"received d = {heads[0].dim}")
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("heads", heads)
        set_("lmax", validate.integer("lmax", self.lmax, 0))
        mult = tuple(zonal_multipliers(h, self.lmax, where=f"heads[{i}]") for i, h in enumerate(heads))
        set_("multipliers", mult)
        linear = [m["potential"] for h, m in zip(heads, mult) if not NORMALIZATIONS[h.normalization].uses_normalizer]
        set_("linear_potential", np.sum(linear, axis=0) if linear else None)
        set_("normalized", tuple(i for i, h in enumerate(heads) if NORMALIZATIONS[h.normalization].uses_normalizer))
        if self.l_index is not None:
            li = np.asarray(self.l_index)
            set_("_lm", {"linear": None if self.linear_potential is None else self.linear_potential[li],
                         **{(i, key): m[key][li] for i, m in enumerate(mult) for key in m}})
        else:
            set_("_lm", None)

    def _mult(self, i, key):
        if self._lm is not None:
            return self._lm[i if key is None else (i, key)]
        return self.linear_potential if key is None else self.multipliers[i][key]

    def velocity(self, b, space, *, rho=None, tol=SINKHORN_TOL, maxiter=SINKHORN_MAXITER, cache=None,
                 details=None):
        """``sum_h grad N_h / D_h`` in ``space`` from the coefficients ``b`` of the measure or density.

        Heads with a linear normalization share one gradient; each normalizing head costs one
        gradient and one evaluation; a Sinkhorn head solves its scaling on the grid (needs ``rho``, the
        density's grid values, and a :class:`GridSpace`).  The loop is
        :func:`meanfield.core.field_forces.field_velocity` (options and ``details`` there).

        Parameters
        ----------
        b : ndarray, shape (nalm,)
            Coefficients of the measure or density.
        space : GridSpace or PointSpace
            Where the velocity is formed.
        rho, tol, maxiter, cache, details
            As for :func:`~meanfield.core.field_forces.field_velocity`.

        Returns
        -------
        ndarray
            A vector field of ``space``: (2, nlat, nlon) on a grid, (n, 3) at points.
        """
        linear = None if self.linear_potential is None else self._mult("linear", None)
        return field_velocity(self.heads, self._mult, b, space, linear=linear, rho=rho, tol=tol, maxiter=maxiter,
                              cache=cache, details=details)

    def normalizer(self, b, space, i):
        """``Z_h = c[k_h] b`` of head ``i`` in ``space``.

        Parameters
        ----------
        b : ndarray, shape (nalm,)
            Coefficients.
        space : GridSpace or PointSpace
            Where ``Z_h`` is evaluated.
        i : int
            The head.

        Returns
        -------
        ndarray
            A scalar field of ``space``.
        """
        return space.evaluate(space.multiply(b, self._mult(i, "normalizer")), "Z")

    def head_sums(self, i, b, space, points=None):
        """The :class:`ZonalHeadSums` of head ``i`` for the coefficients ``b`` in ``space``.

        Parameters
        ----------
        i : int
            The head.
        b : ndarray, shape (nalm,)
            Coefficients.
        space : GridSpace or PointSpace
            Where the sums are formed.
        points : ndarray, shape (n, 3), optional
            The points of a PointSpace (adds the normal part of the aggregate).

        Returns
        -------
        ZonalHeadSums
        """
        return ZonalHeadSums(self, i, b, space, points)

    def forces(self, b, space, points, known=None, **solve):
        """Per-head aggregates ``u^h = (grad N_h + R_h x) / D_h`` (H, n, 3), normalizers (H, n) and the
        scaling of each head (None for row-local normalizations) at ``points`` (n, 3) of a
        :class:`PointSpace` (the unprojected forces of the particle system), by
        :meth:`~meanfield.core.kernels.Normalization.force` (``solve``: its ``tol``, ``maxiter``; ``known``:
        per head the scalings already solved at this state, or None).

        Parameters
        ----------
        b : ndarray, shape (nalm,)
            Coefficients of the weighted measure of the points.
        space : PointSpace
            The points' space.
        points : ndarray, shape (n, 3)
            The points.
        known : list of SinkhornResult or None, optional
            Per head, scalings already solved at this state.
        **solve
            ``tol``, ``maxiter`` of the Sinkhorn solves.

        Returns
        -------
        U : ndarray, shape (H, n, 3)
        N : ndarray, shape (H, n)
        scalings : list of SinkhornResult or None
        """
        H, n = len(self.heads), points.shape[0]
        U = np.empty((H, n, 3))
        N = np.empty((H, n))
        scalings = []
        for i, h in enumerate(self.heads):
            U[i], N[i], res = NORMALIZATIONS[h.normalization].force(
                self.head_sums(i, b, space, points), where=f"heads[{i}]",
                known=None if known is None else known[i], **solve)
            scalings.append(res)
        return U, N, scalings

    def entropies(self, b, space, *, rho=None, tol=SINKHORN_TOL, maxiter=SINKHORN_MAXITER, cache=None):
        """Relative attention entropies, shape (H,) + the space's field shape: ``H_h = log Z_h - Q_h / Z_h``
        for row-local heads, the Sinkhorn attention's ``-log a - a (Q[a rho] + Z[a log a rho])`` for Sinkhorn
        heads (needs ``rho``; :func:`meanfield.core.field_forces.field_entropies`).

        ``-int p log(p / rho) rho`` with ``p = k / Z`` (or ``-sum_j p_ij log(p_ij / w_j)`` for a
        weighted measure); NaN for heads whose kernel can vanish (no distribution where ``Z = 0``;
        ``c[k log k]`` not defined by the registry).

        Parameters
        ----------
        b : ndarray, shape (nalm,)
            Coefficients.
        space : GridSpace or PointSpace
            Where the entropies are formed.
        rho, tol, maxiter, cache
            As for :meth:`velocity`.

        Returns
        -------
        ndarray, shape (H,) + space.shape
        """
        return field_entropies(self.heads, self._mult, b, space, has_entropy=["entropy" in m for m in self.multipliers],
                               rho=rho, tol=tol, maxiter=maxiter, cache=cache)
