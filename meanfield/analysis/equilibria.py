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

Branches that leave the uniform state at the zero of ``sigma_l`` are parametrized by their amplitude
``b_l`` (:func:`branch_state`, :func:`branch_states`); :func:`linear_spectrum` gives the model's linearized
spectrum at any state.  The classification of the transition built on them is
:mod:`meanfield.analysis.phase_transition`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from scipy.special import roots_jacobi

from ..core import validate
from ..core.kernels import NORMALIZATIONS
from ..core.sinkhorn import SinkhornError, solve_scaling
from ..models.axisymmetric import AxisymmetricPDE

__all__ = ["StationaryState", "STATE_BASES", "at_noise", "potential", "self_consistency_residual", "solve_stationary", "free_energy_gap",
           "branch_state", "branch_states", "degree_one_state", "has_free_energy", "normalizations_have_free_energy", "noise_problem", "beta_problem", "resolution_error", "nu_sharp", "linear_spectrum", "RESOLUTION_TOL", "ROUNDOFF"]

RESOLUTION_TOL = 1e-10
"""Largest :func:`resolution_error` of a state counted as resolved (the classification reports 6 significant
digits; states enter it through ``nu``, which is first order in the potential's error)."""
ROUNDOFF = 1e-13
"""Errors of the potential below this fraction of its largest coefficient (``l = 0`` included) are round-off, not
truncation: :func:`resolution_error` counts them as 0, so that the uniform state (whose ``l >= 1`` potential is
itself round-off) and states within round-off of it are resolved at any ``lmax`` (a state with structure of
relative size ``a`` is measured as before while its errors exceed ``1e-13 / a`` of that structure)."""


STATE_BASES = ("gegenbauer", "spherical_harmonics")
"""The coefficient bases of a :class:`StationaryState`: Gegenbauer ``b`` (lmax+1,) of an
:class:`~meanfield.models.axisymmetric.AxisymmetricPDE` on ``S^{d-1}`` (this module), or spherical-harmonic
``rho_lm`` (nalm,) of a :class:`~meanfield.models.continuum.ContinuumPDE` on ``S^2``
(:mod:`meanfield.analysis.sphere_states`)."""


@dataclass(frozen=True)
class StationaryState:
    """One stationary solve, on either geometry (the one stationary-state type: :func:`solve_stationary` and the
    branch functions here, :func:`~meanfield.analysis.sphere_states.solve_sphere_state` and
    :func:`~meanfield.analysis.sphere_states.sphere_branch` on S^2).

    Parameters
    ----------
    coefficients : ndarray
        The state: Gegenbauer ``b`` (lmax+1,) (``basis="gegenbauer"``) or spherical-harmonic ``rho_lm`` (nalm,)
        (``basis="spherical_harmonics"``); also :attr:`b` / :attr:`rho_lm`, by basis.
    nu : float
        The state's noise (a state is a pair (coefficients, ``nu``)).
    status : int
        0 converged, 1 Newton did not converge (or did not start), 2 not resolved at ``lmax``.
    message : str
    residual : float
        The final residual: max norm of the self-consistency residual (axisymmetric), of ``rho - G(rho)`` relative
        to ``max |rho_lm|`` (S^2).
    newton : int
        Newton iterations.
    resolution : float
        The state's resolution error (:func:`resolution_error`,
        :func:`~meanfield.analysis.sphere_states.sphere_resolution_error`).
    basis : str
        One of :data:`STATE_BASES`.
    krylov, products : int
        Krylov iterations and Jacobian products plus residual evaluations of a Newton-Krylov solve (S^2; 0 for
        the direct Newton solve of the axisymmetric problem).
    removed : int
        Neutral rotation modes removed at the state (S^2: the orbit's dimension, 2 for an axisymmetric state, 3
        for a generic one, 0 for uniform; 0 in the axisymmetric block, which has none).

    Raises
    ------
    ValueError
        If ``basis`` is not one of :data:`STATE_BASES`.
    """

    coefficients: np.ndarray
    nu: float
    status: int
    message: str
    residual: float
    newton: int
    resolution: float
    basis: str = "gegenbauer"
    krylov: int = 0
    products: int = 0
    removed: int = 0

    def __post_init__(self):
        validate.choice("basis", self.basis, STATE_BASES)

    @property
    def success(self) -> bool:
        """Whether the solve converged to a resolved state (``status == 0``)."""
        return self.status == 0

    def coefficients_in(self, basis) -> np.ndarray:
        """The coefficients, checked to be in ``basis`` (the basis of the caller's model).

        Parameters
        ----------
        basis : str
            One of :data:`STATE_BASES`.

        Returns
        -------
        ndarray
            :attr:`coefficients`.

        Raises
        ------
        ValueError
            If ``basis`` is not one of :data:`STATE_BASES`, or the state is in the other one (a state of the other
            geometry's model).
        """
        validate.choice("basis", basis, STATE_BASES)
        if self.basis != basis:
            model = {"gegenbauer": "an AxisymmetricPDE", "spherical_harmonics": "a ContinuumPDE on S^2"}
            raise ValueError(f"state must be a state of {model[basis]} (basis {basis!r}); received a state in the "
                             f"{self.basis!r} basis (of {model[self.basis]}); for d = 3 an axisymmetric state's "
                             f"sphere coefficients are AxisymmetricPDE.to_sphere_coefficients(b, grid)")
        return self.coefficients

    @property
    def b(self) -> np.ndarray:
        """The Gegenbauer coefficients (lmax+1,) of an axisymmetric state (``basis="gegenbauer"``).

        Raises
        ------
        AttributeError
            For a state on S^2 (its coefficients are :attr:`rho_lm`).
        """
        if self.basis != "gegenbauer":
            raise AttributeError(f"b: the coefficients of a state in the {self.basis} basis are rho_lm (a state of "
                                 f"a ContinuumPDE on S^2); b is the Gegenbauer coefficients of an axisymmetric state")
        return self.coefficients

    @property
    def rho_lm(self) -> np.ndarray:
        """The spherical-harmonic coefficients (nalm,) of a state on S^2 (``basis="spherical_harmonics"``).

        Raises
        ------
        AttributeError
            For an axisymmetric state (its coefficients are :attr:`b`).
        """
        if self.basis != "spherical_harmonics":
            raise AttributeError(f"rho_lm: the coefficients of a state in the {self.basis} basis are b (a state of "
                                 f"an AxisymmetricPDE); rho_lm is the spherical-harmonic coefficients of a state on S^2")
        return self.coefficients


def _check_model(pde):
    if not isinstance(pde, AxisymmetricPDE):
        raise ValueError(f"pde must be an AxisymmetricPDE; received {type(pde).__name__}")
    return pde


def at_noise(pde, nu):
    """The model ``pde`` at noise ``nu``: the one place where a state's or a branch's noise becomes a model's.

    A stationary state is a pair (coefficients, ``nu``); the functions of this module and of
    :mod:`meanfield.analysis.sphere_states` that analyse bare coefficients take the noise from the model, so a
    caller holding coefficients at another noise builds the model there with this function, in the open.

    Parameters
    ----------
    pde : AxisymmetricPDE or ContinuumPDE
        The model (any model whose ``nu`` is a dataclass field).
    nu : float
        Noise ``nu >= 0``.

    Returns
    -------
    model
        ``pde`` itself when its ``nu`` equals ``nu``, else ``dataclasses.replace(pde, nu=nu)`` (the same heads
        and discretization; nothing else changes).

    Raises
    ------
    ValueError
        If ``pde`` is not a dataclass model with a ``nu`` field, or ``nu`` is not a finite number ``>= 0``.
    """
    from dataclasses import fields, is_dataclass

    if isinstance(pde, type) or not is_dataclass(pde) or "nu" not in {f.name for f in fields(pde)}:
        raise ValueError(f"pde must be a model with a noise field nu (AxisymmetricPDE, ContinuumPDE); received "
                         f"{type(pde).__name__}")
    nu = validate.real("nu", nu, 0.0)
    return pde if pde.nu == nu else replace(pde, nu=nu)


def _coefficients_and_noise(pde, state, positive=True):
    """``(b, nu)`` of ``state``: a :class:`StationaryState` gives its own ``b`` and ``nu``; coefficients ``b``
    (lmax+1,) take the model's ``nu`` (``> 0`` when ``positive``: the Gibbs map divides by it)."""
    if isinstance(state, StationaryState):
        b, nu, where = state.coefficients_in("gegenbauer"), state.nu, "the state's nu"
    else:
        b, nu, where = state, pde.nu, "the model's nu (pde.nu; a state at another noise: pass the StationaryState, " \
                                      "or the model at_noise(pde, nu))"
    b = validate.real_array("b", b, (pde.lmax + 1,))
    nu = validate.real("nu", nu, 0.0)
    if positive and not nu > 0:
        raise ValueError(f"nu must be positive (the Gibbs state exp(Phi / nu) / Z); received {where} = {nu!r}")
    return b, nu


@lru_cache(maxsize=16)
def _basis(pde):
    """The model's orthonormal basis at its nodes, (lmax+1, n), once per model (models are immutable)."""
    return pde.basis(pde.nodes)


def _sinkhorn_potential(head, m, b, Q, w, maxiter):
    """``-(1/beta) log a`` of a Sinkhorn head at the nodes and its derivative in ``b``: ``a K[a f] = 1`` with
    ``K = Q^T diag(m) Q diag(w)`` (the model's kernel on its nodes), solved by
    :func:`meanfield.core.sinkhorn.solve_scaling`; linearized, ``(diag K[a f] + diag(a) K diag(f)) da =
    -diag(a) K diag(a) df`` with ``df = Q^T db``."""
    f = b @ Q
    if np.any(f <= 0):
        raise ValueError("the density of a Sinkhorn state must be positive on the nodes (the scaling a K[a f] = 1 "
                         "has no positive solution otherwise)")
    K = (Q.T * m["normalizer"]) @ (Q * w)
    # to round-off (1e-14), not the model's run tolerance: Newton and the continuation need F exact to ~1e-13
    res = solve_scaling(lambda g: K @ (g * f), f.size, tol=1e-14, maxiter=maxiter,
                        where=f"a Sinkhorn head (beta = {head.beta:g})")
    a = res.a
    A = np.diag(K @ (a * f)) + a[:, None] * K * f[None, :]
    da = -np.linalg.solve(A, (a[:, None] * K * a[None, :]) @ Q.T)            # (n, lmax+1)
    return -np.log(a) / head.beta, -(da / a[:, None]) / head.beta, a


def potential(pde, b, Q=None, w=None):
    """``Phi`` at the nodes (n,) and its derivative ``dPhi/db`` (n, lmax+1) (:data:`NORMALIZATIONS` decides
    the form: linear in ``f`` where the normalization uses no normalizer (mean), ``(1/beta) log Z`` for a
    row-local one (softmax), ``-(1/beta) log a`` with the Sinkhorn scaling ``a`` otherwise).
    ``Q``, ``w``: the basis (lmax+1, n) and normalized quadrature weights (n,) at other nodes instead of the
    model's (both or neither).

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model.
    b : array_like, shape (lmax+1,)
        Gegenbauer coefficients of the density.
    Q : array_like, shape (lmax+1, n), optional
        The model's orthonormal basis at other nodes.
    w : array_like, shape (n,), optional
        Normalized quadrature weights at those nodes.

    Returns
    -------
    phi : ndarray, shape (n,)
        ``Phi`` at the nodes.
    dphi : ndarray, shape (n, lmax+1)
        ``dPhi/db``.

    Raises
    ------
    ValueError
        ``pde`` not an :class:`AxisymmetricPDE`, ``b``, ``Q`` or ``w`` not finite arrays of their shapes, only
        one of ``Q`` and ``w`` given, a softmax normalizer ``Z`` or (Sinkhorn) a density that is not positive
        on the nodes; :class:`~meanfield.core.sinkhorn.SinkhornError` (a ``ValueError``) when a Sinkhorn
        scaling does not converge.
    """
    pde = _check_model(pde)
    b = validate.real_array("b", b, (pde.lmax + 1,))
    if (Q is None) != (w is None):
        raise ValueError(f"Q and w must be given together (the basis and weights at other nodes) or not at all; "
                         f"received Q {'None' if Q is None else 'given'} and w {'None' if w is None else 'given'}")
    if Q is not None:
        Q = validate.real_array("Q", Q, (pde.lmax + 1, "n"))
        w = validate.real_array("w", w, (Q.shape[1],))
    return _potential(pde, b, Q, w)


def _potential(pde, b, Q=None, w=None):
    """:func:`potential` without the checks (the Newton loops call it with their own, checked ``b``)."""
    Q = _basis(pde) if Q is None else Q
    w = pde.weights if w is None else w
    phi = np.zeros(Q.shape[1])
    dphi = np.zeros((Q.shape[1], b.size))
    for head, m in zip(pde.heads, pde.multipliers):
        norm = NORMALIZATIONS[head.normalization]
        if not norm.row_local:
            p, dp, _ = _sinkhorn_potential(head, m, b, Q, w, pde.sinkhorn_maxiter)
            phi += p
            dphi += dp
        elif norm.uses_normalizer:
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
    phi, dphi = _potential(pde, b)
    e = np.exp((phi - phi.max()) / nu)
    f = e / (w @ e)
    mean_phi = w @ (f * phi)
    mean_dphi = (w * f) @ dphi
    Qw = Q * w
    db = Qw @ (f[:, None] * (dphi - mean_dphi) / nu)             # d(Q w f) / db
    dnu = Qw @ (f * -(phi - mean_phi) / nu ** 2)                 # d(Q w f) / dnu
    return Qw @ f, db, dnu


def self_consistency_residual(pde, state):
    """``F(b) = b - P[exp(Phi[b] / nu) / Z]`` (lmax+1,): zero at a stationary state (``F_0 = 0`` always).

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model (its kernels; its ``nu`` for bare coefficients).
    state : StationaryState or array_like
        A state (its ``b`` and its ``nu``), or coefficients ``b`` (lmax+1,) at the model's ``nu``.

    Returns
    -------
    numpy.ndarray
        The residual (lmax+1,).

    Raises
    ------
    ValueError
        If ``pde`` is not an :class:`AxisymmetricPDE`, ``b`` has the wrong shape or ``nu`` is not positive.
    """
    pde = _check_model(pde)
    b, nu = _coefficients_and_noise(pde, state)
    return b - _gibbs(pde, b, nu)[0]


def _residual(pde, b, nu):
    g, db, dnu = _gibbs(pde, b, nu)
    F = (b - g)[1:]
    return F, float(np.abs(F).max()) / max(1.0, float(np.abs(b).max())), db, dnu


def _solve(pde, b, nu, fixed, tol, maxiter):
    """:func:`_newton`, and the state it reaches (:class:`StationaryState`); a Sinkhorn scaling that does not
    converge at the start is status 1 with its message."""
    try:
        b, nu, res, it, ok = _newton(pde, b, nu, fixed, tol, maxiter)
    except SinkhornError as exc:
        return StationaryState(b, nu, 1, f"Newton did not start: {exc}", float("nan"), 0, float("nan"))
    return _state(pde, b, nu, ok, res, it, tol)


def _newton(pde, b, nu, fixed, tol, maxiter):
    """Damped Newton on ``F_l = 0``, ``l >= 1`` (``b_0 = 1`` fixed).  ``fixed`` None: unknowns ``b_1..``; else
    ``b_fixed`` is held and ``nu`` is an unknown instead.  A step that does not lower the residual (or
    takes ``nu <= 0``) is halved, up to 30 times.  Returns ``(b, nu, residual, iterations, converged)``."""
    try:
        F, res, db, dnu = _residual(pde, b, nu)
    except SinkhornError:                  # a scaling that does not converge: _solve reports it (status 1)
        raise
    except ValueError:                     # the start lies outside the model's domain (f <= 0 for Sinkhorn)
        return b, nu, np.inf, 0, False     # _state reports it as not resolved
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
                try:
                    out = _residual(pde, trial, nu + dn)
                except ValueError:         # a trial outside the model's domain (f <= 0) or whose Sinkhorn
                    out = None             # scaling fails: a shorter step
                if out is not None and (out[1] < res or polish is not None):
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


def resolution_error(pde, state) -> float:
    """How far the model's discretization is from resolving the Gibbs state of ``b``: the larger of

    * the potential's truncation, ``max_h |m_h b|`` over the top third of the degrees relative to its
      largest entry (``Phi`` is what the state depends on: ``f = exp(Phi / nu) / Z`` is exact pointwise);
    * the quadrature error of the projection ``b = P[f]``: the potential coefficients ``m_h P[f]`` with the
      model's nodes against twice as many, relative to the largest.

    Either error below :data:`ROUNDOFF` times the potential's largest coefficient (``l = 0`` included) counts as 0:
    round-off, not truncation (the uniform state is resolved at any ``lmax``).

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model.
    state : StationaryState or array_like
        A state (its ``b`` and ``nu``), or coefficients ``b`` (lmax+1,) at the model's ``nu > 0``.

    Returns
    -------
    float
        The relative error (0 when resolved to round-off).

    Raises
    ------
    ValueError
        As :func:`self_consistency_residual`.
    """
    pde = _check_model(pde)
    b, nu = _coefficients_and_noise(pde, state)
    return _resolution_error(pde, b, nu)


def _resolution_error(pde, b, nu):
    """:func:`resolution_error` of checked coefficients ``b`` at noise ``nu`` (the solvers' own check)."""
    kinds = [NORMALIZATIONS[h.normalization].uses_normalizer for h in pde.heads]
    mults = [m["normalizer"] if normalized else m["potential"] for m, normalized in zip(pde.multipliers, kinds)]
    scale = [np.abs(m * b)[1:] for m in mults]
    top = max(float(c.max()) for c in scale)
    if top == 0:
        return 0.0
    floor = ROUNDOFF * max(float(np.abs(m * b).max()) for m in mults)     # the potential's round-off, l = 0 in
    cut = int(2 * pde.lmax / 3)
    w2, Q2 = _check_nodes(pde)
    phi2 = _potential(pde, b, Q2, w2)[0]
    e2 = np.exp((phi2 - phi2.max()) / nu)
    b2 = Q2 @ (w2 * e2 / (w2 @ e2))
    b1 = _gibbs(pde, b, nu)[0]
    errors = (max(float(c[cut:].max()) for c in scale), max(float(np.abs(m * (b1 - b2))[1:].max()) for m in mults))
    return max((e / top if e > floor else 0.0) for e in errors)


def _state(pde, b, nu, ok, res, it, tol):
    if not ok and res == np.inf:
        return StationaryState(b, nu, 2, f"state not resolved at lmax = {pde.lmax}: the start leaves the model's "
                                         f"domain (a Sinkhorn head needs a positive density on the nodes; the "
                                         f"truncated expansion of a sharp state is not; use a larger lmax)",
                               res, it, float("nan"))
    if not ok:
        return StationaryState(b, nu, 1, f"Newton did not converge: residual {res:.3g} > tol = {tol:g} after {it} "
                                         f"iterations", res, it, float("nan"))
    err = _resolution_error(pde, b, nu)
    if err > RESOLUTION_TOL:
        return StationaryState(b, nu, 2, f"state not resolved at lmax = {pde.lmax}: resolution error {err:.2e} > "
                                         f"{RESOLUTION_TOL:g} (use a larger lmax)", res, it, err)
    return StationaryState(b, nu, 0, f"converged in {it} Newton iterations, residual {res:.2e}", res, it, err)


def solve_stationary(pde, b0, *, tol=1e-11, maxiter=50) -> StationaryState:
    """A stationary state of ``pde`` at its own noise ``pde.nu`` by Newton from the coefficients ``b0`` (mass 1).

    ``tol`` bounds the max-norm of the self-consistency residual relative to ``max(1, max |b|)`` (the
    coefficients of a concentrated state grow like ``Q_l(1)``); once below it one more Newton step is taken
    (quadratic convergence: the result sits at round-off, about 1e-15 times ``lmax`` times ``max |b|``).  The
    state is not returned as converged unless the model resolves it.

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model; the state is sought at its ``nu > 0`` (another noise: :func:`at_noise`).
    b0 : array_like
        The start (lmax+1,), ``b0[0] = 1``.
    tol : float
        Residual tolerance (above).
    maxiter : int
        Newton iterations at most.

    Returns
    -------
    StationaryState
        The state (``status`` 0 converged, 1 not converged, 2 not resolved).

    Raises
    ------
    ValueError
        If ``pde`` is not an :class:`AxisymmetricPDE` or its ``nu`` is 0, ``b0`` has the wrong shape or mass, or
        ``tol`` / ``maxiter`` are out of range.
    """
    pde = _check_model(pde)
    b0 = validate.real_array("b0", b0, (pde.lmax + 1,))
    if abs(b0[0] - 1.0) > 1e-12:
        raise ValueError(f"b0 must have mass b0[0] = 1 (within 1e-12); received {b0[0]!r}")
    _, nu = _coefficients_and_noise(pde, b0)
    tol = validate.real("tol", tol, positive=True)
    maxiter = validate.integer("maxiter", maxiter, 1)
    return _solve(pde, b0.copy(), nu, None, tol, maxiter)


def normalizations_have_free_energy(names) -> bool:
    """Whether heads of these normalizations ascend a free energy ``G = E - nu int rho log rho``: mean (``E`` the
    energy) and Sinkhorn (``E_S``), not a row-local normalizer such as softmax (MODEL.md section 7).
    ``names``: an iterable of normalization names (not a bare string).

    Parameters
    ----------
    names : iterable of str
        Names of :data:`~meanfield.core.kernels.NORMALIZATIONS`.

    Returns
    -------
    bool
        True unless a name is a row-local normalization with a normalizer (softmax); True for no names.

    Raises
    ------
    ValueError
        ``names`` a string or not iterable, or an unknown normalization name.
    """
    if isinstance(names, (str, bytes)) or not hasattr(names, "__iter__"):
        raise ValueError(f"names must be an iterable of normalization names {tuple(NORMALIZATIONS)} (not a bare "
                         f"string); received {names!r}")
    names = [validate.choice("normalization", n, NORMALIZATIONS) for n in names]
    return not any(NORMALIZATIONS[n].uses_normalizer and NORMALIZATIONS[n].row_local for n in names)


def has_free_energy(pde) -> bool:
    """:func:`normalizations_have_free_energy` of the heads of ``pde``.

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model.

    Returns
    -------
    bool
        Whether its flow ascends a free energy (no softmax head).

    Raises
    ------
    ValueError
        ``pde`` not an :class:`AxisymmetricPDE`.
    """
    return normalizations_have_free_energy(h.normalization for h in _check_model(pde).heads)


def free_energy_gap(pde, state) -> float:
    """``G[f] - G[uniform]`` with ``G = E - nu int rho log rho`` (mean heads: ``E``; Sinkhorn heads: ``E_S``;
    the flow ascends ``G``), for the Gibbs state ``f = exp(Phi[b] / nu) / Z`` of ``b`` (at a stationary state,
    the state itself).

    In the model's normalization: ``E[b] - E[1] - nu int f log f dsigma`` with ``E`` of
    :meth:`AxisymmetricPDE.energies` and ``int f log f = <f Phi> / nu - log Z`` on the nodes (exact
    pointwise, where the truncated expansion ``b . Q`` of a concentrated state would not stay positive).

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model (mean or Sinkhorn heads).
    state : StationaryState or array_like
        A state (its ``b`` and ``nu``), or coefficients ``b`` (lmax+1,) at the model's ``nu > 0``.

    Returns
    -------
    float
        ``G[f] - G[1]``.

    Raises
    ------
    ValueError
        For softmax heads (no free energy), or as :func:`self_consistency_residual`.
    """
    if not has_free_energy(pde):
        raise ValueError("free_energy_gap needs heads with mean or Sinkhorn normalization (softmax has no free "
                         "energy: decide stability by the spectrum)")
    b, nu = _coefficients_and_noise(pde, state)
    w = pde.weights
    phi = _potential(pde, b)[0]
    top = phi.max()
    e = np.exp((phi - top) / nu)
    Z = w @ e
    f = e / Z
    f_log_f = (w @ (f * phi)) / nu - (top / nu + np.log(Z))
    E = pde.energies(b).sum() - pde.energies(pde.uniform()).sum()
    return float(E - nu * f_log_f)


def nu_sharp(pde, degree=1) -> float:
    """The noise at which ``sigma_l`` of the uniform state vanishes, ``l = degree`` (``nu_#`` for degree 1:
    ``sum_h m_l / beta`` of the model's multipliers, divided by ``m_0`` for normalizing heads).

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model (its ``nu`` is not used).
    degree : int, optional
        The degree ``l``, in ``[1, lmax]`` (default 1).

    Returns
    -------
    float
        ``nu_l``, computed as ``<Q_l, dPhi/db_l>`` at the uniform state.

    Raises
    ------
    ValueError
        ``pde`` not an :class:`AxisymmetricPDE`, ``degree`` not an integer in ``[1, lmax]``, or (Sinkhorn
        heads) a scaling solve that fails.
    """
    pde = _check_model(pde)
    degree = validate.integer("degree", degree, 1, pde.lmax)
    _, dphi = _potential(pde, pde.uniform())
    Q = _basis(pde)
    # linearized Gibbs map at f = 1: delta b_l = <Q_l, dPhi . delta b> / nu, so nu_l = <Q_l dPhi_l>
    return float((pde.weights * Q[degree]) @ dphi[:, degree])


def degree_one_state(pde, amplitude, *, start=None, tol=1e-11, maxiter=50) -> StationaryState:
    """:func:`branch_state` of degree 1: ``b_1 = amplitude`` in ``(0, sqrt(d))`` (``b_1 = sqrt(d) |<x>|``).

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model.
    amplitude : float
        ``b_1``.
    start : StationaryState or array_like, optional
        As for :func:`branch_state`.
    tol, maxiter
        As for :func:`solve_stationary`.

    Returns
    -------
    StationaryState
        The state, its ``nu`` solved for.

    Raises
    ------
    ValueError
        As :func:`branch_state`.
    """
    return branch_state(pde, amplitude, 1, start=start, tol=tol, maxiter=maxiter)


def branch_state(pde, amplitude, degree=1, *, start=None, tol=1e-11, maxiter=50) -> StationaryState:
    """The state of the branch leaving uniform at degree ``degree`` with ``b_degree = amplitude``; ``nu`` is
    solved for (the model's own ``nu`` is not used but as a start, below).  Degree 1: one cluster; degree ``l``:
    the axisymmetric pattern of ``Q_l`` (degree 2 with ``amplitude > 0``: two antipodal clusters; ``< 0``: a band
    around the equator).

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model.
    amplitude : float
        ``b_degree``, ``0 < |amplitude| < Q_l(1)`` (the value at a point mass; ``sqrt(d)`` for degree 1).
    degree : int
        The branch's degree ``l`` (``1 <= l <= lmax``).
    start : StationaryState or array_like, optional
        A nearby state of the branch: a :class:`StationaryState` (its ``b`` and its ``nu`` start Newton), or
        coefficients (lmax+1,) with mass 1 whose noise is the model's ``nu`` (``nu_l`` of :func:`nu_sharp` when
        the model's is 0).  Without it the branch is followed from the uniform state in at most 40
        warm-started solves (Newton from uniform plus a large amplitude alone may not find the branch).
    tol, maxiter
        As for :func:`solve_stationary`.

    Returns
    -------
    StationaryState
        The state, its ``nu`` solved for.

    Raises
    ------
    ValueError
        If ``pde`` is not an :class:`AxisymmetricPDE`, ``degree`` or ``amplitude`` is out of range, or ``start``
        has the wrong shape or mass.
    """
    pde = _check_model(pde)
    degree = validate.integer("degree", degree, 1, pde.lmax)
    amplitude = validate.real("amplitude", amplitude, nonzero=True)
    tol = validate.real("tol", tol, positive=True)
    maxiter = validate.integer("maxiter", maxiter, 1)
    top = float(pde.basis(np.array([1.0]))[degree, 0])
    if not abs(amplitude) < top:
        raise ValueError(f"amplitude must lie in (-{top:.6g}, {top:.6g}) without 0 for degree {degree} (|b_l| <= "
                         f"Q_l(1), a point mass); received {amplitude!r}")
    if start is None:
        steps = int(np.ceil(40 * abs(amplitude) / top))
        if steps > 1:                      # march (with its step halvings) and keep the last state
            return branch_states(pde, np.linspace(amplitude / steps, amplitude, steps), degree)[-1]
        b, nu = pde.uniform(), nu_sharp(pde, degree)
    else:
        if isinstance(start, StationaryState):
            b, nu = start.coefficients_in("gegenbauer"), start.nu
        else:
            b, nu = start, (pde.nu if pde.nu > 0 else nu_sharp(pde, degree))
        b = validate.real_array("start", b, (pde.lmax + 1,)).copy()
        if abs(b[0] - 1.0) > 1e-12:
            raise ValueError(f"start must have mass start[0] = 1 (within 1e-12); received {b[0]!r}")
        nu = validate.real("start.nu", nu, positive=True)
    b[degree] = amplitude
    return _solve(pde, b, nu, degree, tol, maxiter)


def linear_spectrum(pde, state) -> np.ndarray:
    """Eigenvalues of the model's linearized PDE at a state (the axisymmetric block), sorted by decreasing real
    part; the conserved mass (degree 0) is removed.

    The Jacobian of :meth:`AxisymmetricPDE.tendency` is formed column by column by central differences
    (exact up to round-off for mean heads, whose tendency is quadratic in ``b``).  At the uniform state the
    eigenvalues are the growth rates ``sigma_l``, ``l = 1..lmax``.  Perturbations that break the axial
    symmetry (azimuthal order ``m >= 1``, among them the neutral rotation of a clustered state) are not in
    this block.

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model.
    state : StationaryState or array_like
        A :class:`StationaryState`: the PDE at the state's own noise, ``at_noise(pde, state.nu)``
        (:func:`at_noise`); or coefficients ``b`` (lmax+1,): the PDE ``pde`` as given, at its ``nu >= 0``
        (``0``: the noiseless PDE's linearization).

    Returns
    -------
    numpy.ndarray
        The ``lmax`` eigenvalues (complex).

    Raises
    ------
    ValueError
        If ``pde`` is not an :class:`AxisymmetricPDE` or ``b`` has the wrong shape.
    """
    pde = _check_model(pde)
    b, nu = _coefficients_and_noise(pde, state, positive=False)
    model = at_noise(pde, nu)
    h = 1e-5
    J = np.empty((pde.lmax, pde.lmax))
    for j in range(1, pde.lmax + 1):
        e = np.zeros(pde.lmax + 1)
        e[j] = h
        J[:, j - 1] = (model.tendency(b + e) - model.tendency(b - e))[1:] / (2 * h)
    ev = np.linalg.eigvals(J)
    return ev[np.argsort(-ev.real)]


def branch_states(pde, grid, degree=1):
    """States along the degree-``degree`` branch at the amplitudes ``grid`` (increasing in size, of one sign),
    each warm-started from the last (from the uniform state at ``nu_l`` first); a step whose solve fails is
    retried through intermediate amplitudes (up to five halvings).

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model.
    grid : array_like
        Amplitudes ``b_degree``, of one sign, increasing in size.
    degree : int
        The branch's degree.

    Returns
    -------
    list of StationaryState
        The states at the amplitudes of ``grid``, ending at the first failure.

    Raises
    ------
    ValueError
        If ``grid`` is empty, of both signs or not increasing in size, or as :func:`branch_state`.
    """
    grid = validate.real_array("grid", grid).reshape(-1)
    if grid.size == 0 or not (np.all(grid > 0) or np.all(grid < 0)) or np.any(np.diff(np.abs(grid)) <= 0):
        raise ValueError(f"grid must be amplitudes of one sign, increasing in size; received {grid.tolist()[:6]}"
                         f"{' ...' if grid.size > 6 else ''}")
    out = []
    start = StationaryState(pde.uniform(), nu_sharp(pde, degree), 0, f"the uniform state at nu_{degree}", 0.0, 0, 0.0)
    a0 = 0.0
    for a in grid:
        s = branch_state(pde, a, degree, start=start)
        halvings = 0
        while not s.success and (s.status == 1 or s.residual == np.inf) and halvings < 5:   # smaller steps
            halvings += 1
            mids = a0 + (a - a0) * np.arange(1, 2 ** halvings + 1) / 2 ** halvings
            last = start
            for m in mids:
                s = branch_state(pde, m, degree, start=last)
                if not s.success:
                    break
                last = s
        out.append(s)
        if not s.success:
            break
        start, a0 = s, a
    return out


def noise_problem(pde):
    """The self-consistency equation as ``F(u, nu) = 0`` for :func:`meanfield.analysis.continuation.continue_branch`
    (``u = b[1:]``, ``b_0 = 1``), with its exact Jacobian ``(F_u, F_nu)``.

    The continuation parameter is the noise: ``F(u, nu)`` is the self-consistency residual of the model at that
    noise, ``at_noise(pde, nu)`` (:func:`at_noise`; its kernels do not depend on ``nu``, so the model is not
    rebuilt per evaluation), and ``pde``'s own ``nu`` is not used.

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model (its heads and discretization).

    Returns
    -------
    (F, jacobian)
        ``F(u, nu) -> (lmax,)`` and ``jacobian(u, nu) -> (F_u (lmax, lmax), F_nu (lmax,))``.

    Raises
    ------
    ValueError
        If ``pde`` is not an :class:`AxisymmetricPDE`.
    """
    pde = _check_model(pde)

    def full(u):
        return np.r_[1.0, u]

    def F(u, nu):
        b = full(u)
        return (b - _gibbs(pde, b, nu)[0])[1:]

    def jacobian(u, nu):
        _, db, dnu = _gibbs(pde, full(u), nu)
        return (np.eye(u.size + 1) - db)[1:, 1:], -dnu[1:]

    return F, jacobian


def beta_problem(pde):
    """The self-consistency equation at the model's noise ``pde.nu`` as ``F(u, beta) = 0``: every head's ``beta``
    is set to the parameter (the model is rebuilt, so ``F_beta`` is a central difference, step ``1e-6 beta``).

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model; its ``nu > 0`` is the noise of every state (another noise: :func:`at_noise`).

    Returns
    -------
    (F, jacobian)
        ``F(u, beta) -> (lmax,)`` and ``jacobian(u, beta) -> (F_u, F_beta)``.

    Raises
    ------
    ValueError
        If ``pde`` is not an :class:`AxisymmetricPDE` or its ``nu`` is 0.
    """
    pde = _check_model(pde)
    nu = validate.real("pde.nu", pde.nu, positive=True)
    models = {}

    def model(beta):
        if beta not in models:
            if len(models) > 64:
                models.clear()
            models[beta] = replace(pde, heads=tuple(h.replace(beta=beta) for h in pde.heads))
        return models[beta]

    def F(u, beta):
        b = np.r_[1.0, u]
        return (b - _gibbs(model(beta), b, nu)[0])[1:]

    def jacobian(u, beta):
        b = np.r_[1.0, u]
        db = _gibbs(model(beta), b, nu)[1]
        h = 1e-6 * beta
        return (np.eye(b.size) - db)[1:, 1:], (F(u, beta + h) - F(u, beta - h)) / (2 * h)

    return F, jacobian
