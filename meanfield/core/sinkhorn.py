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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SinkhornError", "SinkhornResult", "solve_scaling", "SINKHORN_TOL", "SINKHORN_MAXITER"]

SINKHORN_TOL = 1e-12
"""Default marginal tolerance: ``max_i |a_i (K b w)_i - 1|`` (relative, since the marginal is 1)."""

SINKHORN_MAXITER = 2000
"""Default iteration cap of :func:`solve_scaling`."""


class SinkhornError(ValueError):
    """A Sinkhorn solve that did not reach its tolerance (names the head and the error reached)."""


@dataclass(frozen=True)
class SinkhornResult:
    """Scalings of one head: ``a`` (n,), ``b`` (n,) (``b is a`` for a symmetric kernel), the marginal
    error reached and the number of kernel applications."""

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
        Initial ``a`` (e.g. the previous step's scaling: a warm start).
    """
    a = np.ones(n) if start is None else np.array(start, dtype=float)
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
    b = np.ones(n)
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
