r"""Stationary states of the noisy axisymmetric mean-field PDE, their degree-1 branch and its classification.

MODEL.md section 7.  For zonal heads whose velocity is a gradient, ``X = grad_S Phi[f]``, the stationary
states of :class:`meanfield.AxisymmetricPDE` (densities ``f`` of ``t = <x, e>`` relative to the normalized
uniform measure ``sigma`` on ``S^{d-1}``; ``d = 2``: even densities on the circle) solve the
self-consistency equation

.. math:: f = e^{\Phi[f] / \nu} \Big/ \int e^{\Phi[f] / \nu}\, d\sigma,\qquad
          \Phi = \sum_h \tfrac{1}{\beta} K_h * f \ \ (\text{mean}),\quad
          \Phi = \sum_h \tfrac{1}{\beta} \log Z_h \ \ (\text{softmax}),

solved here by Newton's method on the Gegenbauer coefficients ``b`` of the model (``b_0 = 1`` fixed:
the mass), with the Jacobian formed exactly from the model's multipliers and quadrature.  The axisymmetric
problem has ``lmax`` unknowns, so the Jacobian is dense and small (a direct solve); the residual and the
iteration count are reported, and a solve that does not converge, or whose state the model no longer
resolves (:func:`resolution_error`), returns a status saying so instead of a state.

With mean normalization the flow is the gradient ascent of the free energy
``G = E - nu int rho log rho``; :func:`free_energy_gap` returns ``G[f] - G[1]``.

The degree-1 branch that leaves the uniform state at ``nu_# = sigma_1``'s zero (:func:`degree_one_state`)
is parametrized by its amplitude ``b_1`` (the order parameter ``|<x>| = b_1 / sqrt(d)``): ``nu`` is a
single-valued function of ``b_1`` along it, so the fold of the branch in ``nu`` is the maximum of
``nu(b_1)`` and needs no arclength.  :func:`classify_transition` gives the transition type, ``nu_#``,
``nu_fold`` and the Maxwell point ``nu_global`` (where ``G`` of the stable clustered state equals
``G`` of uniform); :func:`beta_star_continuation` the ``beta`` where the branch's direction at ``nu_#``
changes sign, against the Bessel root :func:`beta_star_bessel` (Mun and Rosenzweig).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from scipy import optimize
from scipy.special import roots_jacobi

from ..core import validate
from ..core.heads import scalar_heads
from ..core.kernels import NORMALIZATIONS
from ..models.axisymmetric import AxisymmetricPDE

__all__ = ["StationaryState", "potential", "self_consistency_residual", "solve_stationary", "free_energy_gap",
           "degree_one_state", "resolution_error", "nu_sharp", "branch_curvature", "linear_spectrum", "classify_transition", "beta_star_bessel",
           "beta_star_continuation", "phase_transition_model", "phase_transition", "LMAX_LADDER"]

RESOLUTION_TOL = 1e-10
"""Largest :func:`resolution_error` of a state counted as resolved (the classification reports 6 significant
digits; states enter it through ``nu``, which is first order in the potential's error)."""


@dataclass(frozen=True)
class StationaryState:
    """One solve: the coefficients ``b`` (lmax+1,), ``nu``, ``status`` (0 converged, 1 Newton did not converge,
    2 not resolved at ``lmax``), ``message``, the final ``residual`` (max norm of the self-consistency
    residual), Newton ``iterations`` and the state's :func:`resolution_error`."""

    b: np.ndarray
    nu: float
    status: int
    message: str
    residual: float
    iterations: int
    resolution: float

    @property
    def success(self) -> bool:
        return self.status == 0

    @property
    def order_parameter(self) -> float:
        """``|int x rho| = |b_1| / sqrt(d)`` (``Q_1 = sqrt(d) t``)."""
        return float(abs(self.b[1]))


def _check_model(pde):
    if not isinstance(pde, AxisymmetricPDE):
        raise ValueError(f"pde must be an AxisymmetricPDE; received {type(pde).__name__}")
    for i, h in enumerate(pde.heads):
        if not NORMALIZATIONS[h.normalization].row_local:
            raise ValueError(f"heads[{i}]: normalization {h.normalization!r} is not supported by the stationary "
                             f"solver yet (allowed: row-local normalizations, "
                             f"{[k for k, v in NORMALIZATIONS.items() if v.row_local]})")
    return pde


@lru_cache(maxsize=16)
def _basis(pde):
    """The model's orthonormal basis at its nodes, (lmax+1, n), once per model (models are immutable)."""
    return pde.basis(pde.nodes)


def potential(pde, b, Q=None):
    """``Phi`` at the nodes (n,) and its derivative ``dPhi/db`` (n, lmax+1) (:data:`NORMALIZATIONS` decides
    the form: linear in ``f`` where the normalization uses no normalizer, ``(1/beta) log Z`` otherwise).
    ``Q``: the basis at other points (lmax+1, n') instead of the model's nodes."""
    Q = _basis(pde) if Q is None else Q
    phi = np.zeros(Q.shape[1])
    dphi = np.zeros((Q.shape[1], b.size))
    for head, m in zip(pde.heads, pde.multipliers):
        if NORMALIZATIONS[head.normalization].uses_normalizer:
            Z = (m["normalizer"] * b) @ Q
            if np.any(Z <= 0):
                raise ValueError("the normalizer Z of a softmax head is not positive on the nodes")
            phi += np.log(Z) / head.beta
            dphi += (Q * m["normalizer"][:, None]).T / (head.beta * Z[:, None])
        else:
            phi += (m["potential"] * b) @ Q
            dphi += (Q * m["potential"][:, None]).T
    return phi, dphi


def _gibbs(pde, b, nu):
    """``f = exp(Phi / nu) / Z`` at the nodes and the derivative of its coefficients in ``b`` and ``nu``."""
    Q = _basis(pde)
    w = pde.weights
    phi, dphi = potential(pde, b)
    e = np.exp((phi - phi.max()) / nu)
    f = e / (w @ e)
    mean_phi = w @ (f * phi)
    mean_dphi = (w * f) @ dphi
    Qw = Q * w
    db = Qw @ (f[:, None] * (dphi - mean_dphi) / nu)             # d(Q w f) / db
    dnu = Qw @ (f * -(phi - mean_phi) / nu ** 2)                 # d(Q w f) / dnu
    return Qw @ f, db, dnu


def self_consistency_residual(pde, b, nu):
    """``F(b) = b - P[exp(Phi[b] / nu) / Z]`` (lmax+1,): zero at a stationary state (``F_0 = 0`` always)."""
    pde = _check_model(pde)
    b = validate.real_array("b", b, (pde.lmax + 1,))
    nu = validate.real("nu", nu, positive=True)
    return b - _gibbs(pde, b, nu)[0]


def _residual(pde, b, nu):
    g, db, dnu = _gibbs(pde, b, nu)
    F = (b - g)[1:]
    return F, float(np.abs(F).max()) / max(1.0, float(np.abs(b).max())), db, dnu


def _newton(pde, b, nu, fixed, tol, maxiter):
    """Damped Newton on ``F_l = 0``, ``l >= 1`` (``b_0 = 1`` fixed).  ``fixed`` None: unknowns ``b_1..``; else
    ``b_fixed`` is held and ``nu`` is an unknown instead.  A step that does not lower the residual (or
    takes ``nu <= 0``) is halved, up to 30 times.  Returns ``(b, nu, residual, iterations, converged)``."""
    F, res, db, dnu = _residual(pde, b, nu)
    polish = None
    for it in range(maxiter + 1):
        if polish is not None:           # one step past tol reaches round-off; keep the better of the two
            return (b, nu, res, it, True) if res <= polish[2] else polish
        if res <= tol:
            polish = (b, nu, res, it, True)
        if it == maxiter:
            break
        J = (np.eye(b.size) - db)[1:, 1:]
        if fixed is not None:             # replace the column of the fixed amplitude by the nu column
            J[:, fixed - 1] = -dnu[1:]
        try:
            step = np.linalg.solve(J, -F)
        except np.linalg.LinAlgError:
            break
        dn = 0.0
        if fixed is not None:
            dn = step[fixed - 1]
            step[fixed - 1] = 0.0
        for _ in range(31):
            if nu + dn > 0:
                trial = b.copy()
                trial[1:] += step
                out = _residual(pde, trial, nu + dn)
                if out[1] < res or polish is not None:
                    break
            step, dn = 0.5 * step, 0.5 * dn
        else:
            break
        b, nu = trial, nu + dn
        F, res, db, dnu = out
    return polish or (b, nu, res, it, False)


@lru_cache(maxsize=16)
def _check_nodes(pde):
    """Gauss-Jacobi nodes, normalized weights and basis with twice the model's nodes (the quadrature check)."""
    alpha = (pde.d - 3) / 2.0
    t, w = roots_jacobi(2 * pde.nodes.size, alpha, alpha)
    return w / w.sum(), pde.basis(t)


def resolution_error(pde, b, nu) -> float:
    """How far the model's discretization is from resolving the Gibbs state of ``b``: the larger of

    * the potential's truncation, ``max_h |m_h b|`` over the top third of the degrees relative to its
      largest entry (``Phi`` is what the state depends on: ``f = exp(Phi / nu) / Z`` is exact pointwise);
    * the quadrature error of the projection ``b = P[f]``: the potential coefficients ``m_h P[f]`` with the
      model's nodes against twice as many, relative to the largest.
    """
    scale = [np.abs(m["normalizer"] * b)[1:] for m in pde.multipliers]
    top = max(float(c.max()) for c in scale)
    if top == 0:
        return 0.0
    cut = int(2 * pde.lmax / 3)
    tail = max(float(c[cut:].max()) for c in scale) / top
    w2, Q2 = _check_nodes(pde)
    phi2 = potential(pde, b, Q2)[0]
    e2 = np.exp((phi2 - phi2.max()) / nu)
    b2 = Q2 @ (w2 * e2 / (w2 @ e2))
    b1 = _gibbs(pde, b, nu)[0]
    quad = max(float(np.abs(m["normalizer"] * (b1 - b2))[1:].max()) for m in pde.multipliers) / top
    return max(tail, quad)


def _state(pde, b, nu, ok, res, it, tol):
    if not ok:
        return StationaryState(b, nu, 1, f"Newton did not converge: residual {res:.3g} > tol = {tol:g} after {it} "
                                         f"iterations", res, it, float("nan"))
    err = resolution_error(pde, b, nu)
    if err > RESOLUTION_TOL:
        return StationaryState(b, nu, 2, f"state not resolved at lmax = {pde.lmax}: resolution error {err:.2e} > "
                                         f"{RESOLUTION_TOL:g} (use a larger lmax)", res, it, err)
    return StationaryState(b, nu, 0, f"converged in {it} Newton iterations, residual {res:.2e}", res, it, err)


def solve_stationary(pde, b0, nu, *, tol=1e-11, maxiter=50) -> StationaryState:
    """A stationary state at noise ``nu`` by Newton from the coefficients ``b0`` (mass 1).

    ``tol`` bounds the max-norm of the self-consistency residual relative to ``max(1, max |b|)`` (the
    coefficients of a concentrated state grow like ``Q_l(1)``); once below it one more Newton step is taken
    (quadratic convergence: the result sits at round-off, about 1e-15 times ``lmax`` times ``max |b|``).  The state is not returned as converged unless the model resolves it.
    """
    pde = _check_model(pde)
    b0 = validate.real_array("b0", b0, (pde.lmax + 1,))
    if abs(b0[0] - 1.0) > 1e-12:
        raise ValueError(f"b0 must have mass b0[0] = 1 (within 1e-12); received {b0[0]!r}")
    nu = validate.real("nu", nu, positive=True)
    tol = validate.real("tol", tol, positive=True)
    maxiter = validate.integer("maxiter", maxiter, 1)
    b, nu, res, it, ok = _newton(pde, b0.copy(), nu, None, tol, maxiter)
    return _state(pde, b, nu, ok, res, it, tol)


def free_energy_gap(pde, b, nu) -> float:
    """``G[f] - G[uniform]`` with ``G = E - nu int rho log rho`` (mean normalization: the flow ascends ``G``),
    for the Gibbs state ``f = exp(Phi[b] / nu) / Z`` of ``b`` (at a stationary state, the state itself).

    In the model's normalization: ``E[b] - E[1] - nu int f log f dsigma`` with ``E`` of
    :meth:`AxisymmetricPDE.energies` and ``int f log f = <f Phi> / nu - log Z`` on the nodes (exact
    pointwise, where the truncated expansion ``b . Q`` of a concentrated state would not stay positive).
    """
    pde = _check_model(pde)
    if any(NORMALIZATIONS[h.normalization].uses_normalizer for h in pde.heads):
        raise ValueError("free_energy_gap needs heads with mean normalization (softmax has no free energy: "
                         "decide stability by the spectrum)")
    b = validate.real_array("b", b, (pde.lmax + 1,))
    nu = validate.real("nu", nu, positive=True)
    w = pde.weights
    phi = potential(pde, b)[0]
    top = phi.max()
    e = np.exp((phi - top) / nu)
    Z = w @ e
    f = e / Z
    f_log_f = (w @ (f * phi)) / nu - (top / nu + np.log(Z))
    E = pde.energies(b).sum() - pde.energies(pde.uniform()).sum()
    return float(E - nu * f_log_f)


def nu_sharp(pde) -> float:
    """``nu_#``: the noise at which ``sigma_1`` of the uniform state vanishes (degree 1 of the model's
    multipliers: ``sum_h m_1 / beta``, divided by ``m_0`` for normalizing heads)."""
    _, dphi = potential(pde, pde.uniform())
    Q = _basis(pde)
    # linearized Gibbs map at f = 1: delta b_1 = <Q_1, dPhi . delta b> / nu, so nu_# = <Q_1 dPhi_1>
    return float((pde.weights * Q[1]) @ dphi[:, 1])


def degree_one_state(pde, amplitude, *, start=None, nu_start=None, tol=1e-11, maxiter=50) -> StationaryState:
    """The state of the degree-1 branch with ``b_1 = amplitude`` (in ``(0, sqrt(d))``, ``b_1 = sqrt(d) |<x>|``);
    ``nu`` is solved for.

    ``start`` / ``nu_start``: a nearby state of the branch and its ``nu``.  Without them the branch is followed
    from the uniform state (at most 40 warm-started solves, steps of 0.025 in ``|<x>|``): Newton from uniform
    plus a large amplitude alone may not find the branch.
    """
    pde = _check_model(pde)
    amplitude = validate.real("amplitude", amplitude, positive=True)
    if not amplitude < np.sqrt(pde.d):
        raise ValueError(f"amplitude must lie in (0, sqrt(d)) = (0, {np.sqrt(pde.d):.6g}) (b_1 = sqrt(d) |<x>|); "
                         f"received {amplitude!r}")
    if start is None:
        steps = int(np.ceil(40 * amplitude / np.sqrt(pde.d)))
        if steps > 1:
            previous = _march(pde, np.linspace(amplitude / steps, amplitude, steps)[:-1])[-1]
            if not previous.success:
                return previous
            start, nu_start = previous.b, previous.nu
    if start is None:
        b, nu = pde.uniform(), nu_sharp(pde)
    else:
        b = validate.real_array("start", start, (pde.lmax + 1,)).copy()
        nu = nu_sharp(pde) if nu_start is None else validate.real("nu_start", nu_start, positive=True)
    b[1] = amplitude
    b, nu, res, it, ok = _newton(pde, b, nu, 1, tol, maxiter)
    return _state(pde, b, nu, ok, res, it, tol)


def branch_curvature(pde, eps=1e-2) -> float:
    """``nu_2`` in ``nu(b_1) = nu_# + nu_2 b_1^2 + O(b_1^4)`` along the degree-1 branch, from the solved
    states at ``b_1 = eps, 2 eps`` (Richardson: the ``b_1^4`` term cancels; at ``eps = 1e-2`` the ``b_1^6``
    term and the round-off of ``nu`` divided by ``eps^2`` are both about 1e-10).  ``nu_2 > 0``: subcritical
    (discontinuous transition); ``< 0``: supercritical (continuous)."""
    n0 = nu_sharp(pde)
    s1 = degree_one_state(pde, eps)
    s2 = degree_one_state(pde, 2 * eps, start=s1.b, nu_start=s1.nu)
    for s in (s1, s2):
        if not s.success:
            raise RuntimeError(f"branch_curvature: {s.message}")
    return float((16 * (s1.nu - n0) - (s2.nu - n0)) / (12 * eps ** 2))


def linear_spectrum(pde, b, nu) -> np.ndarray:
    """Eigenvalues of the model's linearized PDE at the state ``b`` and noise ``nu`` (the axisymmetric block),
    sorted by decreasing real part; the conserved mass (degree 0) is removed.

    The Jacobian of :meth:`AxisymmetricPDE.tendency` is formed column by column by central differences
    (exact up to round-off for mean heads, whose tendency is quadratic in ``b``).  At the uniform state the
    eigenvalues are the growth rates ``sigma_l``, ``l = 1..lmax``.  Perturbations that break the axial
    symmetry (azimuthal order ``m >= 1``, among them the neutral rotation of a clustered state) are not in
    this block.
    """
    pde = _check_model(pde)
    b = validate.real_array("b", b, (pde.lmax + 1,))
    nu = validate.real("nu", nu, 0.0)
    model = replace(pde, nu=nu)
    h = 1e-5
    J = np.empty((pde.lmax, pde.lmax))
    for j in range(1, pde.lmax + 1):
        e = np.zeros(pde.lmax + 1)
        e[j] = h
        J[:, j - 1] = (model.tendency(b + e) - model.tendency(b - e))[1:] / (2 * h)
    ev = np.linalg.eigvals(J)
    return ev[np.argsort(-ev.real)]


def phase_transition_model(d, beta, normalization="mean", lmax=48) -> AxisymmetricPDE:
    """One zonal exp head of strength 1 on ``S^{d-1}`` as an :class:`AxisymmetricPDE` (``d = 2``: the circle)."""
    d = validate.integer("d", d, 2)
    beta = validate.real("beta", beta, positive=True)
    return AxisymmetricPDE(scalar_heads([1.0], d, beta, normalization=normalization), d, lmax)


def _amplitudes(d, r_max, n_steps):
    """Branch amplitudes ``b_1 = sqrt(d) r``: ``2 n_steps / 3`` even steps of the order parameter ``r`` up to
    0.9, then ``n_steps / 3`` steps closing in geometrically on ``r_max`` (clusters sharpen fast there)."""
    n1 = max(3, 2 * n_steps // 3)
    r = np.linspace(0.9 / n1, 0.9, n1)
    if r_max > 0.9:
        r = np.append(r, 1 - (1 - 0.9) * ((1 - r_max) / 0.1) ** np.linspace(0, 1, n_steps - n1 + 1)[1:])
    else:
        r = np.linspace(r_max / n_steps, r_max, n_steps)
    return np.sqrt(d) * r


def _march(pde, grid):
    """States along the branch at the amplitudes ``grid``: list of StationaryState (stops at the first failure)."""
    out = []
    start, nu0 = pde.uniform(), nu_sharp(pde)
    for a in grid:
        s = degree_one_state(pde, a, start=start, nu_start=nu0)
        out.append(s)
        if not s.success:
            break
        start, nu0 = s.b, s.nu
    return out


def classify_transition(pde, *, r_max=0.999, n_steps=90) -> dict:
    """Transition type and critical noises of the degree-1 branch of ``pde`` (one or more zonal heads).

    Returns a dict: ``nu_sharp``; ``nu_2`` (the branch curvature); ``transition`` (``"continuous"`` if
    ``nu_2 < 0``, else ``"discontinuous"``); for a discontinuous transition ``nu_fold`` (the largest ``nu``
    along the branch, by Brent's method on ``nu(b_1)``), ``b1_fold``, and with mean normalization
    ``nu_global`` (the ``nu`` where ``G`` of the stable branch, ``b_1 > b1_fold``, equals ``G`` of uniform).
    For a continuous transition ``nu_fold = nu_global = nu_sharp`` (no fold; uniform is the global
    maximizer for ``nu >= nu_sharp``); without a free energy (softmax) ``nu_global`` is NaN.  The branch is
    marched in the order parameter ``r = b_1 / sqrt(d)`` up to ``r_max`` in ``n_steps`` warm-started solves
    (:func:`_amplitudes`); a march that stops (not resolved or not converged) before the quantities are
    bracketed raises ``RuntimeError`` with the solver's message.
    """
    pde = _check_model(pde)
    d = pde.d
    n0 = nu_sharp(pde)
    nu2 = branch_curvature(pde)
    out = {"nu_sharp": n0, "nu_2": nu2}
    has_G = not any(NORMALIZATIONS[h.normalization].uses_normalizer for h in pde.heads)
    if nu2 < 0:
        out.update(transition="continuous", nu_fold=n0, nu_global=n0 if has_G else float("nan"), b1_fold=0.0)
        return out
    r_max = validate.real("r_max", r_max, 0.0, 1.0, lo_open=True, hi_open=True)
    grid = _amplitudes(d, r_max, validate.integer("n_steps", n_steps, 6))
    states = _march(pde, grid)
    nus = np.array([s.nu for s in states if s.success])
    if nus.size < 3 or int(np.argmax(nus)) in (0, nus.size - 1):
        last = states[-1]
        raise RuntimeError(f"classify_transition: the fold of the degree-1 branch was not bracketed up to "
                           f"b_1 = {last.b[1]:.4g} ({last.message})")
    k = int(np.argmax(nus))
    cache = {}

    def state_at(a):
        if a not in cache:
            j = int(np.argmin(np.abs(grid[:nus.size] - a)))
            s = degree_one_state(pde, a, start=states[j].b, nu_start=states[j].nu)
            if not s.success:
                raise RuntimeError(f"classify_transition: {s.message}")
            cache[a] = s
        return cache[a]

    opt = optimize.minimize_scalar(lambda a: -state_at(a).nu, bracket=(grid[k - 1], grid[k], grid[k + 1]),
                                   method="brent", tol=1e-10)
    out.update(transition="discontinuous", nu_fold=float(-opt.fun), b1_fold=float(opt.x))
    if has_G:
        gaps = np.array([free_energy_gap(pde, s.b, s.nu) for s in states[:nus.size]])
        upper = np.nonzero((grid[:nus.size] > opt.x) & (gaps > 0))[0]
        if upper.size == 0:
            raise RuntimeError(f"classify_transition: G of the clustered branch stays below G of uniform up to "
                               f"b_1 = {grid[nus.size - 1]:.4g}: the Maxwell point was not bracketed")
        j = int(upper[0])
        lo = max(float(opt.x), grid[j - 1])
        a = optimize.brentq(lambda a: free_energy_gap(pde, state_at(a).b, state_at(a).nu), lo, grid[j],
                            xtol=1e-13, rtol=1e-13)
        out.update(nu_global=float(state_at(a).nu), b1_global=float(a))
    else:
        out.update(nu_global=float("nan"))
    return out


def _bessel_ratio(order, x, terms=400):
    """``I_{order+1}(x) / I_order(x)`` by its continued fraction (Gauss), evaluated backwards: no overflow or
    underflow for any order (``ive`` underflows at orders of a few hundred); 400 terms are exact to round-off
    for ``x <= 50``."""
    r = 0.0
    for k in range(terms, 0, -1):
        r = 1.0 / (2.0 * (order + k) / x + r)
    return r


def beta_star_bessel(d) -> float:
    """The root of ``I_{d/2+1}(beta) / I_{d/2}(beta) = 1/d`` (MODEL.md section 7), by Brent's method.

    The ratio rises from ``beta / (d + 2)`` at 0 to 1, so the root lies in ``(0, 2]`` (at ``beta = 2`` the
    ratio already exceeds ``1/d`` for every ``d >= 2``)."""
    d = validate.integer("d", d, 2)
    return float(optimize.brentq(lambda b: _bessel_ratio(d / 2, b) - 1.0 / d, 1e-3, 4.0, xtol=1e-15, rtol=1e-15))


def beta_star_continuation(d, normalization="mean", lmax=48, bracket=None) -> float:
    """The ``beta`` where the degree-1 branch's curvature ``nu_2`` (:func:`branch_curvature`) changes sign,
    by Brent's method on the solved branch (no Bessel root used)."""
    d = validate.integer("d", d, 2)
    f = lambda beta: branch_curvature(phase_transition_model(d, beta, normalization, lmax))   # noqa: E731
    lo, hi = (0.25, 1.0) if bracket is None else bracket
    while f(hi) < 0:
        lo, hi = hi, 2 * hi
    return float(optimize.brentq(f, lo, hi, xtol=1e-12, rtol=1e-12))


LMAX_LADDER = (48, 64, 96, 128, 192)
"""Degrees tried by :func:`phase_transition` until two successive ones agree (the discretization check)."""


def phase_transition(d, beta, normalization="mean", lmax=None, rtol=1e-9) -> dict:
    """:func:`classify_transition` of one zonal exp head of strength 1 on ``S^{d-1}`` at ``beta``, with its
    discretization checked: with ``lmax`` None, successive degrees of :data:`LMAX_LADDER` until ``nu_#``,
    ``nu_fold`` and ``nu_global`` of two successive ones agree to ``rtol`` (the result of the larger, its
    ``lmax`` and the change reported as ``lmax`` and ``discretization_change``); with ``lmax`` given, that
    degree and the next of the ladder above it.  ``ValueError`` if no degree of the ladder resolves it.
    """
    d = validate.integer("d", d, 2)
    beta = validate.real("beta", beta, positive=True)
    validate.choice("normalization", normalization, [k for k, v in NORMALIZATIONS.items() if v.row_local])
    ladder = LMAX_LADDER if lmax is None else (validate.integer("lmax", lmax, 8),) + tuple(
        L for L in LMAX_LADDER if L > lmax)[:1] or (lmax + 16,)
    keys = ("nu_sharp", "nu_fold", "nu_global")
    prev, errors = None, []
    for L in ladder:
        try:
            res = classify_transition(phase_transition_model(d, beta, normalization, L))
        except RuntimeError as exc:
            errors.append(f"lmax = {L}: {exc}")
            prev = None
            continue
        if prev is not None:
            change = max(abs(res[k] - prev[k]) / abs(res[k]) for k in keys if np.isfinite(res[k]))
            if change <= rtol:
                return {**res, "lmax": L, "discretization_change": change}
        prev = res
    raise ValueError(f"phase_transition(d = {d}, beta = {beta:g}): no two successive degrees of {ladder} agree "
                     f"to rtol = {rtol:g}; " + ("; ".join(errors) if errors else "the values still change"))
