r"""Sinkhorn scalings of one head (MODEL.md section 6): the solve behind doubly stochastic attention.

Given a way to apply the head's kernel to a scalar source, ``apply(f)_i = sum_j w_j k(<x_i, M y_j>) f_j``
(particles: direct or spectral sums over the tokens; continuum: the kernel applied to ``f rho`` on the
grid), find ``a, b > 0`` with

.. math:: a_i \sum_j K_{ij} b_j w_j = 1, \qquad b_j \sum_i w_i a_i K_{ij} = 1,

so that ``P_ij = a_i K_ij b_j`` has both weighted marginals 1.  For a symmetric kernel (``M`` symmetric:
pass no ``apply_t``) ``a = b`` and the symmetric fixed point is iterated in the log domain,

.. math:: u \leftarrow \tfrac12 \bigl(u - \log \mathrm{apply}(e^u)\bigr), \qquad a = e^u,

whose linearization is ``(I - P) / 2`` on the deviation: it contracts by at least 1/2 per iteration
for a positive semi-definite kernel (exp with ``lambda > 0``), and by ``(1 - mu_min) / 2 < 1`` in general
(``mu_min > -1`` the smallest eigenvalue of the doubly stochastic ``P``).  Without symmetry the classic
alternating updates ``a = 1 / apply(b)``, ``b = 1 / apply_t(a)`` are used.

The marginal error ``max_i |a_i apply(b)_i - 1|`` (both marginals for the alternating case) is
reported; a solve that does not reach ``tol`` within ``maxiter`` raises :class:`SinkhornError`
naming the head and the error reached.  No other module iterates Sinkhorn scalings.

The arguments are checked (``ValueError`` naming the argument) and the memory of the solve's vectors
(:data:`SCALING_VECTORS` float64 arrays of the field's size) is estimated from ``n`` and refused above the
cost guard's limit (:func:`meanfield.core.cost.guard`) before anything is allocated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import validate
from .cost import guard

__all__ = ["SinkhornError", "SinkhornResult", "solve_scaling", "SINKHORN_TOL", "SINKHORN_MAXITER", "SCALING_VECTORS"]

SINKHORN_TOL = 1e-12
"""Default marginal tolerance: ``max_i |a_i (K b w)_i - 1|`` (relative, since the marginal is 1)."""

SINKHORN_MAXITER = 2000
"""Default iteration cap of :func:`solve_scaling`."""

SCALING_VECTORS = 6
"""float64 arrays of the field's size alive at once in :func:`solve_scaling`, counted by its memory estimate:
the iterate, its exponential (or ``b``), the kernel application, the log-marginal and two temporaries of the
error (the kernel application's own work space is the caller's)."""


class SinkhornError(ValueError):
    """A Sinkhorn solve that did not reach its tolerance (names the head and the error reached)."""


@dataclass(frozen=True)
class SinkhornResult:
    """Scalings of one head: ``a`` (n,), ``b`` (n,) (``b is a`` for a symmetric kernel), the marginal
    error reached and the number of kernel applications.

    Parameters
    ----------
    a : ndarray, shape (n,)
        Row scaling (the shape of the field for a batched or grid solve).
    b : ndarray, shape (n,)
        Column scaling (``b is a`` for a symmetric kernel).
    error : float
        Marginal error reached.
    n_apply : int
        Number of kernel applications.
    """

    a: np.ndarray
    b: np.ndarray
    error: float
    n_apply: int


def _check_positive(values, where, what):
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        bad = values[~(np.isfinite(values) & (values > 0))]
        raise SinkhornError(f"{where}: the kernel sums {what} must be finite and > 0 for a Sinkhorn scaling "
                            f"(a kernel that vanishes or overflows on these points); received e.g. "
                            f"{bad[:3].tolist()}")


def _check_shape(n):
    """``n`` (an integer >= 1, or a non-empty tuple of them) as a shape tuple."""
    if isinstance(n, (tuple, list)) and len(n) > 0:
        try:
            return tuple(validate.integer("n", k, 1) for k in n)
        except ValueError:
            pass
    elif not isinstance(n, (tuple, list)):
        try:
            return (validate.integer("n", n, 1),)
        except ValueError:
            pass
    raise ValueError(f"n must be an integer >= 1 or a non-empty tuple of them (the shape of the field); received {n!r}")


def _shaped(apply, name, shape):
    """``apply`` whose result is checked to be a real array of ``shape`` (a named ValueError otherwise)."""
    def checked(f):
        out = np.asarray(apply(f))
        if out.shape != shape or out.dtype.kind not in "fiu":
            raise ValueError(f"{name} must map arrays of shape {shape} to real arrays of that shape; received "
                             f"{out.dtype} of shape {out.shape}")
        return out
    return checked


def solve_scaling(apply, n, *, apply_t=None, tol=SINKHORN_TOL, maxiter=SINKHORN_MAXITER, where="head",
                  start=None) -> SinkhornResult:
    """Sinkhorn scalings of one head from its kernel applications.

    Parameters
    ----------
    apply : callable
        ``apply(f)`` (n,) -> (n,): ``sum_j w_j k_ij f_j`` at every target point.
    n : int or tuple of int
        Number of points (targets = sources), or the shape of a scalar field over them (a batch of
        systems, a grid): ``apply`` maps arrays of that shape to that shape.
    apply_t : callable, optional
        The transposed application ``sum_i w_i k_ij f_i`` (a non-symmetric kernel); None: symmetric.
    tol : float
        Marginal tolerance (see module docstring).
    maxiter : int
        Iteration cap; beyond it :class:`SinkhornError` with the error reached.
    where : str
        Names the head in errors (e.g. ``"heads[1]"``).
    start : ndarray (n,), optional
        Initial ``a`` (e.g. the previous step's scaling: a warm start), finite and > 0.

    Returns
    -------
    SinkhornResult
        The scalings, of the shape ``n``, with the error reached and the kernel applications used.

    Raises
    ------
    ValueError
        An argument out of its domain (named), an ``apply`` whose result has another shape, or vectors of
        ``n`` whose memory is above the cost guard's limit (:func:`meanfield.core.cost.guard`).
    SinkhornError
        Kernel sums that are not finite and positive, or no convergence within ``maxiter``.
    """
    shape = _check_shape(n)
    for name, f in (("apply", apply), ("apply_t", apply_t)):
        if not callable(f) and not (name == "apply_t" and f is None):
            raise ValueError(f"{name} must be a callable {name}(f) mapping arrays of shape {shape} to that shape"
                             + (" (or None: a symmetric kernel)" if name == "apply_t" else "") + f"; received {f!r}")
    tol = validate.real("tol", tol, positive=True)
    maxiter = validate.integer("maxiter", maxiter, 1)
    if not isinstance(where, str):
        raise ValueError(f"where must be a string naming the head in errors; received {where!r}")
    size = math.prod(shape)
    guard(f"solve_scaling(n={n!r})", bytes=SCALING_VECTORS * 8.0 * size,
          detail=f"{SCALING_VECTORS} float64 vectors of {size} entries", fix="a smaller n (fewer points)")
    if start is None:
        a = np.ones(shape)
    else:
        a = validate.real_array("start", start, shape).copy()
        if np.any(a <= 0):
            raise ValueError(f"start must be finite scalings > 0 of shape {shape}; received min {a.min()!r}")
    apply = _shaped(apply, "apply", shape)
    apply_t = None if apply_t is None else _shaped(apply_t, "apply_t", shape)
    count = 0
    err = np.inf
    if apply_t is None:
        u = np.log(a)
        for _ in range(maxiter + 1):
            Ka = apply(np.exp(u))
            count += 1
            _check_positive(Ka, where, "K a")
            r = u + np.log(Ka)                      # log of the marginal a * K a
            err = float(np.max(np.abs(np.expm1(r))))
            if err <= tol:
                a = np.exp(u)
                return SinkhornResult(a, a, err, count)
            u -= 0.5 * r
        raise SinkhornError(f"{where}: the Sinkhorn scaling did not converge in {maxiter} iterations: marginal "
                            f"error {err:.3g} > tol = {tol:g} (raise the tolerance or maxiter, or lower beta)")
    b = np.ones(shape)
    for _ in range(maxiter + 1):
        Kb = apply(b)
        count += 1
        _check_positive(Kb, where, "K b")
        a = 1.0 / Kb
        Kta = apply_t(a)
        count += 1
        _check_positive(Kta, where, "K^T a")
        # rows are exact for (a, b) after the a-update: the column marginal is the error left
        err = float(np.max(np.abs(b * Kta - 1.0)))
        if err <= tol:
            return SinkhornResult(a, b, err, count)
        b = 1.0 / Kta
    raise SinkhornError(f"{where}: the Sinkhorn scaling did not converge in {maxiter} iterations: marginal "
                        f"error {err:.3g} > tol = {tol:g} (raise the tolerance or maxiter, or lower beta)")
