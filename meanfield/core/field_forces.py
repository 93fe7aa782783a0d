r"""The per-head "kernel sums, then normalization" loop of the spectral PDE models, written once.

Every continuum model (:class:`meanfield.ContinuumPDE` on S^2, :class:`meanfield.CirclePDE` on S^1,
:class:`meanfield.AxisymmetricPDE` on S^{d-1}) represents the density by coefficients ``b`` in a basis
where zonal heads are diagonal (Funk-Hecke), and provides a *space*: an object with

* ``multiply(b, m)``: coefficients times per-coefficient multipliers,
* ``gradient(c, key)``: the (tangential) gradient of coefficients ``c`` on the grid, vector axis ``axis``,
* ``evaluate(c, key)``: values of coefficients ``c`` on the grid,
* ``analysis(values)``: coefficients of grid values (quadrature; used by solving normalizations only),
* ``zeros(key)``: a zero vector field; ``axis``: the vector axis; ``shape``: a scalar field's shape.

(``key`` names a work array the space may reuse.)  :func:`field_velocity` forms, head by head,

.. math:: U_h[f] = \nabla\, c[K_h]\, (f\rho),\qquad Z_h[f] = c[k_h]\, (f\rho)

(``f = 1``: the multipliers on ``b`` itself) and hands them to the head's
:meth:`meanfield.core.kernels.Normalization.field_force`, which owns the map to the force: ``U[1]``
(mean), ``U[1] / Z[1]`` (softmax), ``a U[a]`` with ``a Z[a] = 1`` (Sinkhorn).  Heads whose
normalization does not use ``Z`` (mean) are linear in the kernel: their potentials are summed before one
gradient.  No name of a normalization appears here.

Sinkhorn scalings are cached for the last state only (keyed by the bytes of ``b``): the observer, the
energies and the next right-hand side at one state share one solve.  A solve is never started from a
*previous* state's scaling, although that would save iterations: the result would then depend on the
history of calls at the level of the tolerance, and a resumed run (no history) would not repeat the
uninterrupted one bit for bit.  The start ``Z[1]^{-1/2}`` is a function of the state alone.
"""

from __future__ import annotations

import numpy as np

from .kernels import NORMALIZATIONS
from .sinkhorn import SINKHORN_MAXITER, SINKHORN_TOL

__all__ = ["field_velocity", "field_scalings", "field_entropies", "ScalingCache", "check_solved_heads", "LineSpace",
           "normalizers_and_errors"]


class LineSpace:
    """The part of a one-dimensional model's space for :func:`field_velocity` that does not depend on its basis:
    coefficients times multipliers, values of shape ``shape`` on the model's nodes and velocities as (1, n) along
    one tangent direction.  A model's subclass adds ``gradient``, ``evaluate`` and ``analysis``.

    Parameters
    ----------
    pde : object
        The model (the subclass reads its basis from it).
    shape : tuple of int
        Shape of values on the model's nodes.
    """

    axis = 0

    def __init__(self, pde, shape):
        self.pde = pde
        self.shape = shape

    def multiply(self, c, m):
        """Coefficients times per-coefficient multipliers.

        Parameters
        ----------
        c, m : ndarray
            Coefficients and multipliers (broadcast).

        Returns
        -------
        ndarray
            ``m * c``.
        """
        return m * c

    def zeros(self, key):
        """A zero velocity, shape ``(1,) + shape``.

        Parameters
        ----------
        key : str
            The work array's name (unused here: a fresh array every call).

        Returns
        -------
        ndarray, shape (1,) + shape
        """
        return np.zeros((1,) + tuple(self.shape))


def normalizers_and_errors(details, n):
    """From :func:`field_velocity`'s ``details``: the normalizers ``D`` (H, n; 1 where a head has none) and the
    Sinkhorn marginal errors (H,; NaN for row-local heads).

    Parameters
    ----------
    details : dict
        ``"D"`` and ``"scalings"``, as :func:`field_velocity` fills them.
    n : int
        Number of nodes.

    Returns
    -------
    D : ndarray, shape (H, n)
    err : ndarray, shape (H,)
    """
    D = np.ones((len(details["D"]), n))
    err = np.full(len(details["D"]), np.nan)
    for h, (Dh, res) in enumerate(zip(details["D"], details["scalings"])):
        if Dh is not None:
            D[h] = Dh
        if res is not None:
            err[h] = res.error
    return D, err


def check_solved_heads(heads, zonal):
    """Refuse heads whose normalization needs a solve (Sinkhorn) off the spectral (zonal) path.

    Parameters
    ----------
    heads : sequence of Head
        The model's heads.
    zonal : bool
        Whether the model uses a spectral path that solves scalings.

    Raises
    ------
    ValueError
        A Sinkhorn head when ``zonal`` is False.
    """
    solving = [i for i, h in enumerate(heads) if not NORMALIZATIONS[h.normalization].row_local]
    if solving and not zonal:
        raise ValueError(f"heads {solving} have normalization {heads[solving[0]].normalization!r}, which the "
                         f"quadrature path (non-zonal heads or summation='quadrature') does not support: it needs "
                         f"zonal heads (M = V = lambda I) and the spectral path")


class ScalingCache:
    """The Sinkhorn scalings of the last state seen (``{head index: SinkhornResult}``), keyed by the
    state's bytes; one reference swap per new state (safe to share between threads)."""

    __slots__ = ("_entry",)

    def __init__(self):
        self._entry = (None, {})

    def __reduce__(self):                      # a copy or a pickled model starts empty
        return (ScalingCache, ())

    def lookup(self, key):
        """The results kept for the state ``key``; a new empty dict (replacing the old) for a new state.

        Parameters
        ----------
        key : bytes
            The state's bytes.

        Returns
        -------
        dict
            ``{head index: SinkhornResult}``, filled by the caller.
        """
        k, results = self._entry
        if k != key:
            results = {}
            self._entry = (key, results)
        return results


def field_velocity(heads, mult, b, space, *, linear=None, rho=None, tol=SINKHORN_TOL, maxiter=SINKHORN_MAXITER,
                   cache=None, details=None):
    r"""``sum_h u_h`` in ``space`` from the coefficients ``b`` of the density.

    Parameters
    ----------
    heads : sequence of Head
    mult : callable
        ``mult(i, key)``: head ``i``'s multipliers ``"potential"`` (``c[K]``) or ``"normalizer"`` (``c[k]``),
        one per coefficient of ``b``.
    b : ndarray
        Coefficients of the density (or weighted measure).
    space : object
        See the module docstring.
    linear : ndarray, optional
        The summed potential multipliers of the heads whose normalization does not use ``Z`` (None: no
        such head, or handle them one by one).
    rho : ndarray, optional
        The density on the grid (``space.evaluate(b)``); needed by solving normalizations (Sinkhorn) only.
    tol, maxiter : Sinkhorn tolerance and iteration cap (:func:`meanfield.core.sinkhorn.solve_scaling`).
    cache : ScalingCache, optional
    details : dict, optional
        Filled with ``"D"`` (list of per-head normalizers, None meaning 1) and ``"scalings"`` (list of
        SinkhornResult or None).

    Returns
    -------
    The velocity, a vector field of ``space`` (a work array of the space when it has one).
    """
    v = space.zeros("v") if linear is None else space.gradient(space.multiply(b, linear), "v")
    D, scalings = [None] * len(heads), [None] * len(heads)
    known = cache.lookup(np.asarray(b).tobytes()) if cache is not None else {}
    for i, head in enumerate(heads):
        norm = NORMALIZATIONS[head.normalization]
        if linear is not None and not norm.uses_normalizer:
            continue

        aggregate, apply = _applications(mult, b, space, rho, i)
        force = norm.field_force(aggregate, apply, space.shape, axis=space.axis, tol=tol, maxiter=maxiter,
                                 where=f"heads[{i}]", known=known.get(i))
        if force.scaling is not None:
            known[i] = force.scaling
        v += force.u
        D[i], scalings[i] = force.D, force.scaling
    if details is not None:
        details["D"], details["scalings"] = D, scalings
    return v


def field_scalings(heads, mult, b, space, *, rho, tol=SINKHORN_TOL, maxiter=SINKHORN_MAXITER, cache=None):
    """The scalings of the heads whose normalization is not row-local (Sinkhorn), without their forces:
    a list with a :class:`~meanfield.core.sinkhorn.SinkhornResult` per such head and None for the others
    (the same solves, start and cache as :func:`field_velocity`).

    Parameters
    ----------
    heads, mult, b, space, rho, tol, maxiter, cache
        As for :func:`field_velocity` (``rho`` required).

    Returns
    -------
    list of SinkhornResult or None
        One entry per head.
    """
    known = cache.lookup(np.asarray(b).tobytes()) if cache is not None else {}
    out = [None] * len(heads)
    for i, head in enumerate(heads):
        norm = NORMALIZATIONS[head.normalization]
        if norm.row_local:
            continue
        out[i] = known[i] = norm.field_scaling(_applications(mult, b, space, rho, i)[1], space.shape, tol=tol, maxiter=maxiter, where=f"heads[{i}]",
                                               known=known.get(i))
    return out


def field_entropies(heads, mult, b, space, *, has_entropy, rho=None, tol=SINKHORN_TOL, maxiter=SINKHORN_MAXITER,
                    cache=None):
    """Relative attention entropies ``H_h`` (H,) + ``space.shape`` by each head's
    :meth:`~meanfield.core.kernels.Normalization.field_entropy` (the multipliers ``mult(i, "entropy")``,
    ``c[k log k]``); NaN for the heads with ``has_entropy[i]`` False (kernels that can vanish).

    Parameters
    ----------
    heads, mult, b, space, rho, tol, maxiter, cache
        As for :func:`field_velocity`.
    has_entropy : sequence of bool
        Per head, whether its kernel is positive (an entropy exists).

    Returns
    -------
    ndarray, shape (H,) + space.shape
    """
    out = np.full((len(heads),) + tuple(space.shape), np.nan)
    scalings = field_scalings(heads, mult, b, space, rho=rho, tol=tol, maxiter=maxiter, cache=cache) \
        if any(not NORMALIZATIONS[h.normalization].row_local for h in heads) else [None] * len(heads)
    for i, head in enumerate(heads):
        if has_entropy[i]:
            _, apply = _applications(mult, b, space, rho, i)
            _, apply_entropy = _applications(mult, b, space, rho, i, "entropy", "R")
            out[i] = NORMALIZATIONS[head.normalization].field_entropy(apply, apply_entropy, scalings[i])
    return out


def _applications(mult, b, space, rho, i, key="normalizer", work="Z"):
    """``(aggregate, apply)`` of head ``i``: ``f -> grad c[K] (f rho)`` and ``f -> c[key] (f rho)`` in
    ``space`` (``key`` ``"normalizer"``: ``c[k]``; ``"entropy"``: ``c[k log k]``)."""

    def sources(f, k):
        if f is None:
            return space.multiply(b, mult(i, k))
        if rho is None:
            raise ValueError(f"heads[{i}]: a solving normalization (Sinkhorn) needs the density on the grid (rho) "
                             f"and a space with an analysis; this call gave none")
        return space.multiply(space.analysis(f * rho), mult(i, k))

    return (lambda f: space.gradient(sources(f, "potential"), "grad"),
            lambda f: space.evaluate(sources(f, key), work))
