r"""Pseudo-arclength continuation of ``F(u, p) = 0`` with fold and branch-point detection (numpy, scipy).

A branch is a curve ``(u(s), p(s))`` parametrized by arclength.  From a solution and the tangent
``t = (t_u, t_p)`` (the null vector of ``[F_u  F_p]``, oriented like the previous one), the predictor is
``(u, p) + ds t`` and the corrector solves the bordered system

.. math:: F(u, p) = 0, \qquad \langle t_u, u - \hat u\rangle + t_p (p - \hat p) = 0

by Newton (Keller).  The step is halved when it fails and grown after easy steps.  A step fails when the
corrector does not converge, when a residual, a Newton update or the Jacobian at the new point is not finite (a
predictor thrown out of ``F``'s range by a huge ``ds``), or when a linear-algebra routine inside it raises
(``numpy.linalg.LinAlgError``, ``scipy.sparse.linalg.ArpackError``, in this module or in ``F`` and ``jacobian``);
below ``ds_min`` the branch ends with status 1 and the last failure in its message, never with a traceback.  Along the
branch two test functions are watched (Govaerts, *Numerical methods for bifurcations of dynamical equilibria*):

* the parameter component of the tangent ``t_p`` changes sign at a **fold** (a limit point in ``p``);
* the sign of ``det [[F_u, F_p], [t_u^T, t_p]]`` changes at a **branch point** (another branch crosses);

each located to ``tol_s`` in arclength by Brent's method on the corresponding continuous quantity (``t_p``;
the sign of that determinant times the smallest singular value of its matrix).  A step that crosses two
branch points at once sees no sign change: keep ``ds_max`` below the spacing of the points sought.  The Jacobians are dense: the axisymmetric and circle problems have
at most a few hundred unknowns.

The problem is given as ``F(u, p) -> (n,)`` and ``jacobian(u, p) -> (F_u (n, n), F_p (n,))``; nothing here knows
about the models (:mod:`meanfield.analysis.equilibria` supplies their self-consistency residuals).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import optimize
from scipy.sparse.linalg import ArpackError

from ..core import cost, validate

__all__ = ["Branch", "SpecialPoint", "continue_branch", "switch_branch", "tangent"]

_NUMERICAL = (np.linalg.LinAlgError, ArpackError)
"""Failures of the linear algebra inside a step (ours or ``F``'s / ``jacobian``'s): the step fails, it is halved."""

POINT_OVERHEAD_BYTES = 200
"""Bytes of Python objects per stored point beyond its floats (the array object of ``u``, the floats ``p`` and
``t_p``, three list slots), counted by the memory estimate of :func:`continue_branch`."""


class _StepFailed(Exception):
    """A step of the march failed (its message says how): halve ``ds``."""


def _finite(*arrays):
    return all(np.all(np.isfinite(a)) for a in arrays)


@dataclass(frozen=True)
class SpecialPoint:
    """A fold (``kind = "fold"``) or branch point (``"branch_point"``) located on a branch: its state ``u``,
    parameter ``p``, the null vector ``phi`` of ``F_u`` there (branch points; the fold's too), the segment
    ``index`` (between points ``index`` and ``index + 1``) and ``located``: False when the refinement failed
    (no sign change of the continuous test quantity; for a fold also a corrector that did not converge; at a
    branch point the bordered system is singular and its corrector converges slowly by nature), so that the
    point is only the segment's end, not located to ``tol_s``.

    Parameters
    ----------
    kind : {"fold", "branch_point"}
    u : ndarray, shape (n,)
        State.
    p : float
        Parameter.
    phi : ndarray, shape (n,)
        Null vector of ``F_u``.
    index : int
        The segment.
    located : bool
        Whether the refinement succeeded.
    """

    kind: str
    u: np.ndarray
    p: float
    phi: np.ndarray
    index: int
    located: bool = True


@dataclass(frozen=True)
class Branch:
    """The points of a continuation, ``u`` (N, n) and ``p`` (N,), their tangents' ``t_p`` (N,), the special
    points found, ``status`` (0: the parameter range or step budget was covered; 1: the corrector failed at the
    smallest step; 2: ``stop(u, p)`` asked to stop) and a ``message``; ``n_newton`` counts corrector
    iterations.

    Parameters
    ----------
    u : ndarray, shape (N, n)
    p : ndarray, shape (N,)
    t_p : ndarray, shape (N,)
    special : tuple of SpecialPoint
    status : int
    message : str
    n_newton : int
    """

    u: np.ndarray
    p: np.ndarray
    t_p: np.ndarray
    special: tuple = field(default_factory=tuple)
    status: int = 0
    message: str = ""
    n_newton: int = 0

    @property
    def folds(self):
        return tuple(s for s in self.special if s.kind == "fold")

    @property
    def branch_points(self):
        return tuple(s for s in self.special if s.kind == "branch_point")


def tangent(Fu, Fp, previous=None):
    """Unit null vector of ``[F_u  F_p]`` (n, n+1), oriented so that ``<t, previous> > 0`` (else ``t_p > 0``).

    Parameters
    ----------
    Fu : array_like, shape (n, n)
        Jacobian in ``u``.
    Fp : array_like, shape (n,)
        Derivative in ``p``.
    previous : array_like, shape (n + 1,), optional
        The previous tangent.

    Returns
    -------
    ndarray, shape (n + 1,)

    Raises
    ------
    ValueError
        ``Fu`` not a finite square matrix, or ``Fp`` / ``previous`` not finite of their shapes.
    """
    Fu = validate.real_array("Fu", Fu)
    if Fu.ndim != 2 or Fu.shape[0] != Fu.shape[1]:
        raise ValueError(f"Fu must be a square (n, n) matrix (the Jacobian in u); received shape {Fu.shape}")
    Fp = validate.real_array("Fp", Fp, (Fu.shape[0],))
    A = np.column_stack([Fu, Fp])
    t = np.linalg.svd(A)[2][-1]
    ref = validate.real_array("previous", previous, (Fu.shape[1] + 1,)) if previous is not None else \
        np.r_[np.zeros(Fu.shape[1]), 1.0]
    return -t if t @ ref < 0 else t


def _correct(F, jacobian, u, p, t, u_hat, p_hat, tol, maxiter, radius=np.inf):
    """Newton on the bordered system; returns (u, p, converged, iterations, why).

    ``radius``: the longest Newton step (longer ones are shortened to it).  Near a branch point the bordered
    system is nearly singular and an undamped step can throw the iterate far off, to another branch or out of
    ``F``'s domain (a negative ``beta``), depending on round-off; :func:`_locate` caps the steps at its segment's
    length so that its corrections stay near the branch it follows.  A non-finite residual, Jacobian or update,
    or a ``LinAlgError`` / ``ArpackError`` (here or in ``F``, ``jacobian``), stops the iteration unconverged;
    ``why`` says which (empty when converged).
    """
    why = f"no convergence in {maxiter} Newton iterations"
    with np.errstate(over="ignore", invalid="ignore"):      # a huge predictor: refused below, not warned about
        for it in range(1, maxiter + 1):
            try:
                res = np.asarray(F(u, p))
                r = np.append(res, t[:-1] @ (u - u_hat) + t[-1] * (p - p_hat))
                if not _finite(r):
                    return u, p, False, it, f"non-finite residual F at p = {p:.10g}"
                Fu, Fp = jacobian(u, p)
                Fu, Fp = np.asarray(Fu), np.asarray(Fp)
                if not _finite(Fu, Fp):
                    return u, p, False, it, f"non-finite Jacobian at p = {p:.10g}"
                A = np.block([[Fu, Fp[:, None]], [t[None, :]]])
                step = np.linalg.solve(A, -r)
            except _NUMERICAL as exc:
                return u, p, False, it, f"{type(exc).__name__}: {exc}"
            if not _finite(step):
                return u, p, False, it, "non-finite Newton update"
            size = np.linalg.norm(step)
            if size > radius:
                step *= radius / size
            u, p = u + step[:-1], p + step[-1]
            if not _finite(u, p):
                return u, p, False, it, "the Newton iterate overflowed"
            if np.abs(step).max() <= tol * max(1.0, np.abs(u).max()):
                try:
                    resid = np.abs(F(u, p)).max()
                except _NUMERICAL as exc:
                    return u, p, False, it, f"{type(exc).__name__}: {exc}"
                if resid <= 1e3 * tol * max(1.0, np.abs(u).max()):
                    return u, p, True, it, ""
    return u, p, False, maxiter, why


def _det_sign(Fu, Fp, t):
    sign, _ = np.linalg.slogdet(np.block([[Fu, Fp[:, None]], [t[None, :]]]))
    return sign


def continue_branch(F, jacobian, u0, p0, *, ds=0.05, ds_min=1e-6, ds_max=0.5, p_range=(-np.inf, np.inf),
                    max_steps=200, tol=1e-12, tol_s=1e-10, direction=1.0, t0=None, stop=None) -> Branch:
    """Follow the branch of ``F(u, p) = 0`` through ``(u0, p0)`` (a solution) by pseudo-arclength.

    ``direction``: +1 or -1, the initial sense in ``p``; or ``t0``, an initial tangent (n+1,): branch switching
    at a branch point ``(u0, p0)`` along ``t0 = (phi, 0)`` (:func:`switch_branch`), where the first segment's
    test functions change sign by construction and are not reported.  The march ends when ``p`` leaves ``p_range``, after ``max_steps`` points, when a step
    fails at ``ds_min`` (status 1: the corrector did not converge, a value overflowed or a linear-algebra routine
    raised; the message names the last failure), or when ``stop(u, p)`` returns a message (status 2).

    ``max_steps`` bounds the points kept: their memory (``max_steps`` points of ``n + 2`` floats, in lists and
    then in the :class:`Branch`'s arrays) is estimated before the march and refused above the cost guard's limit
    (:func:`meanfield.core.cost.guard`, ``ValueError`` naming ``max_steps``).

    Parameters
    ----------
    F : callable
        ``F(u, p) -> ndarray`` of shape (n,).
    jacobian : callable
        ``jacobian(u, p) -> (F_u, F_p)``, shapes (n, n) and (n,).
    u0 : array_like, shape (n,)
        A solution's state.
    p0 : float
        Its parameter.
    ds, ds_min, ds_max : float
        Initial, smallest and largest arclength step, ``0 < ds_min <= ds <= ds_max``.
    p_range : (float, float)
        ``(low, high)``, ``low < high`` (infinite ends allowed).
    max_steps : int
        Most points, ``>= 1``.
    tol : float
        Newton tolerance, ``> 0``.
    tol_s : float
        Arclength tolerance of special-point location, ``> 0``.
    direction : {1, -1}
        Initial sense in ``p`` (left at +1 with ``t0``).
    t0 : array_like, shape (n + 1,), optional
        Initial tangent.
    stop : callable, optional
        ``stop(u, p) -> str or None``.

    Returns
    -------
    Branch

    Raises
    ------
    ValueError
        ``F``, ``jacobian`` or ``stop`` not callable; non-finite ``u0`` / ``p0``; steps not positive or not in
        order; a bad ``p_range``, ``tol``, ``tol_s``, ``max_steps``, ``direction`` or ``t0``; ``(u0, p0)`` not a
        solution (to ``1e3 tol``); or points above the memory limit.
    """
    for name, f in (("F", F), ("jacobian", jacobian)):
        if not callable(f):
            raise ValueError(f"{name} must be a callable {name}(u, p); received {f!r}")
    if stop is not None and not callable(stop):
        raise ValueError(f"stop must be None or a callable stop(u, p) returning a message; received {stop!r}")
    u = validate.real_array("u0", u0).astype(float).copy()
    p = validate.real("p0", p0)
    ds = validate.real("ds", ds, positive=True)
    ds_min = validate.real("ds_min", ds_min, positive=True)
    ds_max = validate.real("ds_max", ds_max, positive=True)
    if not ds_min <= ds <= ds_max:
        raise ValueError(f"ds must lie in [ds_min, ds_max] = [{ds_min:g}, {ds_max:g}]; received ds = {ds:g}")
    tol = validate.real("tol", tol, positive=True)
    tol_s = validate.real("tol_s", tol_s, positive=True)
    if not isinstance(p_range, (tuple, list, np.ndarray)) or len(p_range) != 2 or \
            not validate.real("p_range[0]", p_range[0], finite=False) < validate.real("p_range[1]", p_range[1],
                                                                                     finite=False):
        raise ValueError(f"p_range must be (low, high) with low < high; received {p_range!r}")
    max_steps = validate.integer("max_steps", max_steps, 1)
    per_point = 2 * 8 * (u.size + 2) + POINT_OVERHEAD_BYTES
    cost.guard(f"continue_branch(max_steps={max_steps}) with n = {u.size} unknowns", bytes=max_steps * per_point,
               detail=f"max_steps points x {per_point} B: n + 2 floats kept in lists and copied into the Branch, "
                      f"+ {POINT_OVERHEAD_BYTES} B of Python objects", fix="a smaller max_steps")
    if isinstance(direction, (bool, np.bool_)) or direction not in (1, -1, 1.0, -1.0):
        raise ValueError(f"direction must be +1 or -1; received {direction!r}")
    if t0 is not None and direction != 1:
        raise ValueError("direction must be left at +1 with t0 (the initial tangent gives the sense); received "
                         f"direction = {direction!r}")
    if np.abs(F(u, p)).max() > 1e3 * tol * max(1.0, np.abs(u).max()):
        raise ValueError(f"(u0, p0) must solve F = 0 (to 1e3 tol); received a residual "
                         f"{np.abs(F(u, p)).max():.3g}")
    Fu, Fp = jacobian(u, p)
    if t0 is None:
        t = tangent(Fu, Fp) * (1.0 if direction > 0 else -1.0)
    else:                                  # at a branch point the null space of [F_u F_p] is 2-D: take t0 itself
        t = validate.real_array("t0", t0, (u.size + 1,))
        t = t / np.linalg.norm(t)
    us, ps, tps, special = [u], [p], [t[-1]], []
    sign = _det_sign(Fu, Fp, t)
    n_newton, status, message = 0, 0, f"{max_steps} points"
    while len(us) < max_steps:
        try:
            un, pn, tn, new_sign, found, it = _step(F, jacobian, u, p, t, sign, ds, tol, tol_s, len(us) - 1,
                                                   first=len(us) == 1 and t0 is not None)
        except _StepFailed as exc:
            n_newton += exc.args[1]
            ds /= 2
            if ds < ds_min:
                status, message = 1, (f"the corrector failed at the smallest step ds = {ds_min:g} (p = {p:.10g}): "
                                      f"{exc.args[0]}")
                break
            continue
        n_newton += it
        special += found
        if not (p_range[0] <= pn <= p_range[1]):
            message = f"the branch left the range p in {p_range} after p = {p:.10g}"
            break
        u, p, t, sign = un, pn, tn, new_sign
        us.append(u)
        ps.append(p)
        tps.append(t[-1])
        if stop is not None:
            why = stop(u, p)
            if why:
                status, message = 2, str(why)
                break
        ds = min(ds_max, ds * (1.5 if it <= 3 else 1.0))
    return Branch(np.array(us), np.array(ps), np.array(tps), tuple(special), status, message, n_newton)


def _step(F, jacobian, u, p, t, sign, ds, tol, tol_s, index, first):
    """One step of length ``ds`` from ``(u, p)`` along ``t``: the new point, its tangent and determinant sign, the
    special points of the segment and the Newton iterations; raises :class:`_StepFailed` (message, iterations)."""
    with np.errstate(over="ignore", invalid="ignore"):
        u_hat, p_hat = u + ds * t[:-1], p + ds * t[-1]
    if not _finite(u_hat, p_hat):
        raise _StepFailed(f"the predictor overflowed (ds = {ds:g})", 0)
    un, pn, ok, it, why = _correct(F, jacobian, u_hat, p_hat, t, u_hat, p_hat, tol, 12)
    if not ok:
        raise _StepFailed(why, it)
    try:
        Fu, Fp = jacobian(un, pn)
        Fu, Fp = np.asarray(Fu), np.asarray(Fp)
        if not _finite(Fu, Fp):
            raise _StepFailed(f"non-finite Jacobian at the new point p = {pn:.10g}", it)
        tn = tangent(Fu, Fp, t)
        new_sign = _det_sign(Fu, Fp, tn)
        found = []
        if tn[-1] * t[-1] < 0 and not first:    # leaving a branch point (first): its own crossing is not new
            found.append(_locate(F, jacobian, u, p, t, ds, tol, tol_s, "fold", index, (un, pn, Fu)))
        if new_sign * sign < 0 and not first:
            found.append(_locate(F, jacobian, u, p, t, ds, tol, tol_s, "branch_point", index, (un, pn, Fu)))
    except _NUMERICAL as exc:
        raise _StepFailed(f"{type(exc).__name__} at the new point p = {pn:.10g}: {exc}", it) from None
    return un, pn, tn, new_sign, found, it


class _Unlocated(Exception):
    """The refinement of a special point met a point it cannot use (a failed, non-finite correction)."""


def _locate(F, jacobian, u, p, t, ds, tol, tol_s, kind, index, end):
    """The special point between ``(u, p)`` and the next point ``end = (u, p, F_u)`` at arclength ``ds``, by Brent's
    method on ``t_p(s)`` (fold) or the signed smallest singular value of the bordered Jacobian (branch point).

    When the refinement fails (no sign change, Brent's method not converged, a correction that is not finite or
    raises in the linear algebra) the point is ``end``, with ``located=False``.
    """
    cache = {}
    failed = [False]

    def solve(s):
        if s not in cache:
            un, pn, ok, _, _ = _correct(F, jacobian, u + s * t[:-1], p + s * t[-1], t, u + s * t[:-1],
                                        p + s * t[-1], tol, 40, radius=ds)
            if not _finite(un, pn):
                raise _Unlocated
            failed[0] |= not ok and kind == "fold"   # at a branch point the bordered system is singular
            Fu, Fp = jacobian(un, pn)
            Fu, Fp = np.asarray(Fu), np.asarray(Fp)
            if not _finite(Fu, Fp):
                raise _Unlocated
            cache[s] = (un, pn, Fu, Fp, ok)
        return cache[s]

    if kind == "fold":
        g = lambda s: tangent(solve(s)[2], solve(s)[3], t)[-1]              # noqa: E731
    else:
        def g(s):                          # sign(det A) * smallest singular value of A: continuous, 0 at the point
            un, pn, Fu, Fp, _ = solve(s)
            A = np.block([[Fu, Fp[:, None]], [tangent(Fu, Fp, t)[None, :]]])
            return float(np.linalg.slogdet(A)[0] * np.linalg.svd(A, compute_uv=False)[-1])
    # Brent's method needs about log2(ds / tol_s) bisections at worst: room for them (a huge ds included)
    maxiter = max(100, 3 * int(np.ceil(np.log2(ds) - np.log2(tol_s))))      # (ds / tol_s may overflow)
    try:
        s, info = optimize.brentq(g, 0.0, ds, xtol=tol_s, rtol=1e-14, maxiter=maxiter, full_output=True,
                                  disp=False)
        if not info.converged:
            raise _Unlocated
        un, pn, Fu, _, ok = solve(s)
    except (ValueError, _Unlocated, *_NUMERICAL):   # ValueError: no sign change of the smooth quantity
        (un, pn, Fu), ok, failed[0] = end, True, True
    if not ok and np.abs(F(un, pn)).max() > 1e3 * tol * max(1.0, np.abs(un).max()):
        failed[0] = True                   # the point returned is not on the branch: not located
    phi = np.linalg.svd(Fu)[2][-1]
    return SpecialPoint(kind, un, float(pn), phi, index, located=not failed[0])


def switch_branch(F, jacobian, point: SpecialPoint, *, side=1.0, **kw) -> Branch:
    """Follow the other branch through a branch point: start along its null vector ``phi`` (``side`` +1 or -1
    picks the half-branch), keyword arguments as :func:`continue_branch`.  For a bifurcation from a trivial
    branch (the uniform state) ``phi`` is the critical mode, the tangent of the new branch there.

    Parameters
    ----------
    F, jacobian
        As for :func:`continue_branch`.
    point : SpecialPoint
        A branch point.
    side : {1, -1}
        The half-branch.
    **kw
        Keywords of :func:`continue_branch` (not ``t0``).

    Returns
    -------
    Branch

    Raises
    ------
    ValueError
        ``point`` not a branch point, ``side`` not +1 or -1, or what :func:`continue_branch` refuses.
    """
    if not isinstance(point, SpecialPoint) or point.kind != "branch_point":
        raise ValueError(f"point must be a SpecialPoint of kind 'branch_point'; received {point!r}")
    if isinstance(side, (bool, np.bool_)) or side not in (1, -1, 1.0, -1.0):
        raise ValueError(f"side must be +1 or -1; received {side!r}")
    return continue_branch(F, jacobian, point.u, point.p, t0=side * np.r_[point.phi, 0.0], **kw)
