"""Adversarial search for the worst per-head energy rate under approximately orthogonal heads.

Two heads of rank 2 in ``R^d`` (``d >= 4``), symmetric, value-aligned (``V_h = M_h``), exp kernel,
mean normalization, token weights ``w_i = 1/n``::

    M_h = alpha U_h B_h U_h^T,   B_h = R(phi_h) diag(tanh p_h1, tanh p_h2) R(phi_h)^T  (|B_h| < 1, any signs:
                                                                                     indefinite heads allowed)
    U_1 = [e_1, e_2],  U_2 = [c_1 e_1 + s_1 e_3, c_2 e_2 + s_2 e_4],  c_k = c sin(q_k),  s_k = sqrt(1 - c_k^2)

so ``U_1^T U_2 = diag(c_1, c_2)`` (every pair of rank-2 subspaces has this form after a rotation of
``R^d``, which the free tokens absorb) and ``|M_2 M_1|_op = alpha^2 |B_1 diag(c_k) B_2|_op <= alpha^2 c =
delta``: every parameter vector satisfies the hypothesis ``|M_h' M_h|_op <= delta`` of Thm 39.  Tokens are
unit vectors ``x_i = y_i / |y_i|`` (the flat rate is evaluated at a configuration on the sphere).

With ``A_i^h = sum_j w_j exp(beta <x_i, M_h x_j>) x_j`` (the aggregate with ``V = I``) and
``u_i^h = M_h A_i^h``, the exact per-head rate of head ``h`` is (MODEL.md section 1)::

    flat:    dE_h/dt = sum_i w_i ( |u_i^h|^2 + <u_i^h, u_i^h'> )
    sphere:  dE_h/dt = sum_i w_i ( |P u_i^h|^2 - a_i^h a_i^h' + <u_i^h, u_i^h'> ),   a_i^h = <u_i^h, x_i>

and ``|<u_i^h, u_i^h'>| = |<A_i^h, M_h M_h' A_i^h'>| <= delta |A_i^h| |A_i^h'|`` (Cauchy-Schwarz).  The
per-token margins, in units of that coupling scale ``b_i = |A_i^h| |A_i^h'|``::

    flat:                       m_i = |u_i^h|^2 / b_i                       (self-term dominance)
    sphere, exact Condition 8:  m_i = ( |P u_i^h|^2 - a_i^h a_i^h' ) / b_i
    sphere, norm-bounded:       m_i = ( |P u_i^h|^2 - |a_i^h| |u_i^h'| ) / b_i

and the token-summed margin ``m_sum = sum_i w_i m_i b_i / sum_i w_i b_i`` (a ``b``-weighted mean of
the ``m_i``, so ``m_sum >= min_i m_i``).  ``m_sum > delta`` (a fortiori ``min_i m_i > delta``) implies
``dE_h/dt >= sum_i w_i (m_i - delta) b_i >= 0``: the statement "margin > C delta implies monotone" holds
with ``C = 1``.  :func:`critical_margin` finds, by constrained optimization (SLSQP from random starts),
the largest margin a configuration with ``dE_h/dt <= 0`` can have, ``m*(delta)``; the sharp constant is
``m* / delta`` (<= 1).  :func:`min_rate_ratio` minimises ``dE_h/dt / self term`` at a fixed margin.
Everything is plain numpy, evaluated for a batch of parameter vectors at once so that the central
finite-difference Jacobians SLSQP needs cost one batched call; :func:`library_rates` and
:func:`library_margins` recompute rates and margins with ``meanfield`` (independent code) as a check.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

import meanfield as mf

RANK = 2
N_HEAD_PARAMS = 2 * 3 + RANK      # (p_1, p_2, phi) per head, then q_1, q_2
READINGS = ("flat", "exact", "norm_bounded")   # margin definitions (flat; the two readings on the sphere)
KINDS = ("sum", "token")                       # token-summed margin m_sum, or the per-token minimum
FD_STEP = 1e-5      # central differences: truncation ~ FD_STEP^2 (third derivative) ~ 1e-10, round-off ~ 1e-11
TINY = 1e-300


def n_params(n, d):
    return n * d + N_HEAD_PARAMS


def unpack(theta, n, d, c, alpha=1.0):
    """Parameters, shape (B, P) -> unit tokens ``X`` (B, n, d) and heads ``M`` (B, 2, d, d)."""
    theta = np.atleast_2d(theta)
    B = theta.shape[0]
    Y = theta[:, :n * d].reshape(B, n, d)
    X = Y / np.linalg.norm(Y, axis=2, keepdims=True)
    hp = theta[:, n * d:]
    ck = c * np.sin(hp[:, 6:8])
    sk = np.sqrt(1 - ck**2)
    U = np.zeros((B, 2, d, RANK))
    U[:, 0, 0, 0] = U[:, 0, 1, 1] = 1.0
    U[:, 1, 0, 0], U[:, 1, 2, 0], U[:, 1, 1, 1], U[:, 1, 3, 1] = ck[:, 0], sk[:, 0], ck[:, 1], sk[:, 1]
    p = hp[:, :6].reshape(B, 2, 3)
    cs, sn = np.cos(p[..., 2]), np.sin(p[..., 2])
    R = np.stack([np.stack([cs, -sn], -1), np.stack([sn, cs], -1)], -2)          # (B, 2, 2, 2)
    L = np.tanh(p[..., :2])
    Bm = np.einsum("bhij,bhj,bhkj->bhik", R, L, R)
    M = alpha * np.einsum("bhdi,bhij,bhej->bhde", U, Bm, U)
    return X, M


def terms(X, M, beta):
    """Per-token ingredients for head 0 against head 1 (batched): dict of arrays of shape (B, n)."""
    n = X.shape[1]
    S = np.einsum("bnd,bhde,bme->bhnm", X, M, X)             # scores s_ij^h
    K = np.exp(beta * S) / n
    A = np.einsum("bhnm,bmd->bhnd", K, X)                     # A_i^h
    U = np.einsum("bhde,bhne->bhnd", M, A)                    # u_i^h = M_h A_i^h
    a = np.einsum("bhnd,bnd->bhn", U, X)                      # radial shadows
    uu = np.einsum("bhnd,bhnd->bhn", U, U)
    nA = np.linalg.norm(A, axis=3)
    return dict(w=1.0 / n, self_flat=uu[:, 0], self_sphere=uu[:, 0] - a[:, 0] ** 2, radial=a[:, 0] * a[:, 1],
                cross=np.einsum("bnd,bnd->bn", U[:, 0], U[:, 1]), scale=nA[:, 0] * nA[:, 1],
                norm_other=np.sqrt(uu[:, 1]), a0=a[:, 0])


def geometry_of(reading):
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {READINGS}; received {reading!r}")
    return "flat" if reading == "flat" else "sphere"


def token_margins(t, reading):
    """Numerators ``m_i b_i`` of the per-token margins of a reading (see the module docstring), (B, n)."""
    if reading == "flat":
        return t["self_flat"]
    if reading == "exact":
        return t["self_sphere"] - t["radial"]
    return t["self_sphere"] - np.abs(t["a0"]) * t["norm_other"]


def scalars(t, reading):
    """Head-0 scalars of a batch: rate, self term, |terms| scale, summed margin, per-token margins."""
    geom = geometry_of(reading)
    w = t["w"]
    self_i = t["self_flat"] if geom == "flat" else t["self_sphere"]
    rate_i = self_i + t["cross"] - (t["radial"] if geom == "sphere" else 0.0)
    scale_i = np.abs(self_i) + np.abs(t["cross"]) + (np.abs(t["radial"]) if geom == "sphere" else 0.0)
    num = token_margins(t, reading)
    b = t["scale"] + TINY
    return dict(rate=w * rate_i.sum(1), self=w * self_i.sum(1), rate_scale=w * scale_i.sum(1) + TINY,
                margin_sum=num.sum(1) / b.sum(1), margin_token=num / b)


class Problem:
    """Head-0 scalars at one ``delta`` with cached values and central finite-difference Jacobians."""

    def __init__(self, reading, delta, n, d, beta, alpha=1.0):
        self.reading, self.n, self.d, self.beta, self.alpha = reading, n, d, beta, alpha
        self.c = delta / alpha**2
        self.P = n_params(n, d)
        self._key, self._val, self._jac = None, None, None

    def values(self, theta):
        return scalars(terms(*unpack(theta, self.n, self.d, self.c, self.alpha), self.beta), self.reading)

    def at(self, theta):
        """``(values, jacobians)`` at ``theta`` (one batched evaluation, cached)."""
        key = theta.tobytes()
        if key != self._key:
            E = np.eye(self.P) * FD_STEP
            v = self.values(np.vstack([theta[None], theta + E, theta - E]))
            self._val = {k: x[0] for k, x in v.items()}
            self._jac = {k: (x[1:self.P + 1] - x[self.P + 1:]) / (2 * FD_STEP) for k, x in v.items()}
            self._key = key
        return self._val, self._jac

    def neg_rate(self, theta):
        """``-rate / rate_scale`` and its gradient (the constraint ``dE_h/dt <= 0`` as ``>= 0``)."""
        v, j = self.at(theta)
        return (-v["rate"] / v["rate_scale"],
                -(j["rate"] * v["rate_scale"] - v["rate"] * j["rate_scale"]) / v["rate_scale"] ** 2)

    def rate_over_self(self, theta):
        v, j = self.at(theta)
        s = v["self"] + TINY
        return v["rate"] / s, (j["rate"] * s - v["rate"] * j["self"]) / s**2


def _start(rng, n, d, spread=None):
    """A random parameter vector: i.i.d. Gaussian tokens (``spread=None``), or tokens
    ``c + spread * noise`` about one random point ``c`` (a cluster: its tokens have alike per-token
    margins, the starts that reach ``kind="token"`` optima; i.i.d. starts mostly end infeasible there)."""
    if spread is None:
        Y = rng.standard_normal(n * d)
    else:
        Y = (rng.standard_normal(d)[None, :] + spread * rng.standard_normal((n, d))).ravel()
    return np.concatenate([Y, rng.normal(0.0, 1.5, N_HEAD_PARAMS)])


def _slsqp(fun, jac, x0, constraints, maxiter):
    """One SLSQP run with BLAS held to one thread: SLSQP's path amplifies the last bits of its linear algebra, whose
    summation order follows the BLAS thread count, so without the pin the end point (and the per-token margin
    found) depended on the machine's threads (issue 33: -2.5e-6 with 2 threads where 1 thread gives 0.27)."""
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore", RuntimeWarning)
        return minimize(fun, x0, jac=jac, method="SLSQP", constraints=constraints,
                        options=dict(maxiter=maxiter, ftol=1e-12))


def critical_margin(reading, delta, n, d, beta, rng, restarts, kind="sum", maxiter=200, alpha=1.0,
                    feas_tol=1e-9, starts=(), spread=None):
    """Largest margin of a configuration whose head-0 rate is ``<= 0`` (best of ``restarts`` SLSQP runs
    from random starts, and of one run from each parameter vector in ``starts``: warm starts).

    ``kind="sum"`` maximises the summed margin ``m_sum(theta)`` subject to ``rate <= 0``; ``kind="token"``
    maximises a variable ``m`` subject to ``m_i(theta) >= m`` for every token and ``rate <= 0``.
    ``spread``: random starts with i.i.d. tokens (``None``) or clustered tokens (see :func:`_start`).
    Returns ``(m_star, theta, n_feasible)``: ``m_star`` is the best margin over the restarts that end
    feasible (``rate / rate_scale <= feas_tol``), ``nan`` if none did.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; received {kind!r}")
    if spread is not None and not spread > 0:
        raise ValueError(f"spread must be None or a positive number; received {spread!r}")
    pb = Problem(reading, delta, n, d, beta, alpha)
    P = pb.P
    if kind == "sum":
        fun = lambda th: -pb.at(th)[0]["margin_sum"]  # noqa: E731
        jac = lambda th: -pb.at(th)[1]["margin_sum"]  # noqa: E731
        cons = [dict(type="ineq", fun=lambda th: pb.neg_rate(th)[0], jac=lambda th: pb.neg_rate(th)[1])]
    else:
        fun = lambda z: -z[-1]  # noqa: E731
        jac = lambda z: np.concatenate([np.zeros(P), [-1.0]])  # noqa: E731
        cons = [dict(type="ineq", fun=lambda z: pb.at(z[:-1])[0]["margin_token"] - z[-1],
                     jac=lambda z: np.hstack([pb.at(z[:-1])[1]["margin_token"].T, -np.ones((n, 1))])),
                dict(type="ineq", fun=lambda z: pb.neg_rate(z[:-1])[0],
                     jac=lambda z: np.concatenate([pb.neg_rate(z[:-1])[1], [0.0]]))]
    best, arg, feasible = -np.inf, None, 0
    for th0 in [_start(rng, n, d, spread) for _ in range(restarts)] + [np.asarray(x, float) for x in starts]:
        x0 = th0 if kind == "sum" else np.concatenate([th0, [pb.values(th0)["margin_token"].min() - 1.0]])
        res = _slsqp(fun, jac, x0, cons, maxiter)
        th = res.x if kind == "sum" else res.x[:-1]
        v = pb.values(th)
        if v["rate"][0] / v["rate_scale"][0] <= feas_tol:
            feasible += 1
            m = v["margin_sum"][0] if kind == "sum" else v["margin_token"][0].min()
            if m > best:
                best, arg = float(m), th
    return (best if arg is not None else float("nan")), arg, feasible


def min_rate_ratio(reading, delta, n, d, beta, rng, restarts, margin=None, maxiter=200, alpha=1.0,
                   feas_tol=1e-9):
    """Smallest head-0 ``dE_h/dt / self term`` over tokens and heads (best of ``restarts``).

    With ``margin`` the search is restricted to ``m_sum >= margin``; without, the rate is normalized by
    the sum of the absolute values of its terms instead (a value in [-1, 1]: the self term alone can be
    driven to 0, so the unrestricted ratio to it is unbounded below).  Returns ``(value, theta)``.
    """
    pb = Problem(reading, delta, n, d, beta, alpha)
    if margin is None:
        fun = lambda th: -pb.neg_rate(th)[0]  # noqa: E731
        jac = lambda th: -pb.neg_rate(th)[1]  # noqa: E731
        cons = []
    else:
        fun = lambda th: pb.rate_over_self(th)[0]  # noqa: E731
        jac = lambda th: pb.rate_over_self(th)[1]  # noqa: E731
        cons = [dict(type="ineq", fun=lambda th: pb.at(th)[0]["margin_sum"] - margin,
                     jac=lambda th: pb.at(th)[1]["margin_sum"])]
    best, arg = np.inf, None
    for _ in range(restarts):
        res = _slsqp(fun, jac, _start(rng, n, d), cons, maxiter)
        ok = margin is None or pb.values(res.x)["margin_sum"][0] >= margin - feas_tol
        val = float(fun(res.x))
        if ok and val < best:
            best, arg = val, res.x
    return (best if arg is not None else float("nan")), arg


def _system(theta, delta, n, d, beta, geometry, alpha=1.0):
    X, M = unpack(theta, n, d, delta / alpha**2, alpha)
    return X[0], mf.ParticleSystem([mf.Head(m, m, beta) for m in M[0]], geometry), M[0]


def library_rates(theta, delta, n, d, beta, geometry, alpha=1.0):
    """``(own, library)``: head-0 rate of this module and ``ParticleSystem.energy_rates`` (independent code)."""
    X, system, _ = _system(theta, delta, n, d, beta, geometry, alpha)
    own = Problem("flat" if geometry == "flat" else "exact", delta, n, d, beta, alpha).values(theta)["rate"][0]
    return float(own), float(system.energy_rates(X)[0])


def library_margins(theta, delta, n, d, beta, alpha=1.0):
    """Largest difference between the per-token Condition 8 margins (both readings, head 0) of this module
    and of ``diagnostics.radial_dominance``, relative to the smallest coupling scale ``b_i``."""
    X, system, M = _system(theta, delta, n, d, beta, "sphere", alpha)
    lib = mf.diagnostics.radial_dominance(system, X)
    t = terms(X[None], M[None], beta)
    b = t["scale"][0]
    return max(float(np.abs(lib[f"{r}_margin"][0] - token_margins(t, r)[0]).max() / b.min())
               for r in ("exact", "norm_bounded"))


def op_delta(theta, delta, n, d, alpha=1.0):
    """The actual ``|M_2 M_1|_op`` of a parameter vector (<= delta by construction)."""
    _, M = unpack(theta, n, d, delta / alpha**2, alpha)
    return float(np.linalg.norm(M[0, 1] @ M[0, 0], 2))


def library_condition8(theta, delta, n, d, beta, reading, alpha=1.0):
    """``(holds, rate)``: whether ``diagnostics.radial_dominance`` (independent code) finds Condition 8 in
    ``reading`` (``"exact"`` or ``"norm_bounded"``) at every token of head 0, and head 0's
    ``ParticleSystem.energy_rates``; a per-token optimum with ``m* > 0`` and ``dE_h/dt <= 0`` must give
    ``(True, rate <= ~0)``."""
    if reading not in ("exact", "norm_bounded"):
        raise ValueError(f"reading must be 'exact' or 'norm_bounded'; received {reading!r}")
    X, system, _ = _system(theta, delta, n, d, beta, "sphere", alpha)
    return bool(mf.diagnostics.radial_dominance(system, X)[reading][0].all()), float(system.energy_rates(X)[0])
