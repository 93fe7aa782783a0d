r"""Stationary states of the noisy continuum on the full sphere S^2 (:class:`meanfield.ContinuumPDE`), any shape.

MODEL.md section 7.  For zonal heads with mean, softmax or Sinkhorn normalization the velocity is a gradient, and
so for general heads with mean normalization and ``V = c M`` (``Phi = sum_h c_h A_K^h rho``, their
bi-spherical operators, MODEL.md section 8; the rotations that leave every head invariant, :func:`symmetry_axes`,
replace the full rotation group below),
``X = grad_S Phi[rho]``, and the stationary states solve ``rho = G(rho) = exp(Phi[rho] / nu) / Z``.  On the
model's spherical-harmonic coefficients this is solved by an inexact Newton-Krylov method: GMRES on the
Jacobian ``I - DG`` applied matrix-free,

.. math:: DG\,\delta = P\Big[f\, \frac{\delta\Phi - \int f\,\delta\Phi}{\nu}\Big],\qquad
          \delta\Phi = \sum_h \frac{1}{\beta} K_h * \delta \ \ (\text{mean}),\quad
          \sum_h \frac{K_h * \delta}{\beta\, Z_h} \ \ (\text{softmax}),\quad
          -\sum_h \frac{u_h}{\beta} \ \ (\text{Sinkhorn, see } \_Ops),

one synthesis and one analysis of the model's grid per product (``P`` the analysis, ``f = G(rho)`` on the
grid).  Rotations map stationary states to stationary states: the orbit's tangents ``L_k rho``
(``L_k f = (e_k x x) . grad f``, :func:`rotation_generators`) span the kernel of ``I - DG``.  They are
removed by phase conditions on every Newton step ``delta``: ``<c_j, delta> = 0`` with multipliers
``omega_j`` (the bordered system ``J delta + sum_j omega_j c_j = -F``), ``c_j`` an orthonormal basis of the span
of ``L_k rho`` at the current iterate (an SVD: its rank is the orbit's dimension, :data:`PHASE_RANK_TOL`).
The number of neutral modes removed at the solution is reported.  A solve that does not converge, or whose state the grid does not resolve, returns a status
saying so.

:func:`sphere_spectrum` gives the leading eigenvalues of the PDE linearized at a state (ARPACK on the
model's own tendency, matrix-free), with the neutral rotation modes identified.

A state is a :class:`~meanfield.analysis.equilibria.StationaryState` (the one stationary-state type, here in the
``"spherical_harmonics"`` basis: ``state.rho_lm``, plus the Krylov counts and the removed rotation modes).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator, eigs, gmres

from ..core import cost, validate
from ..core.bispherical import is_axial
from ..core.kernels import NORMALIZATIONS
from ..core.sinkhorn import solve_scaling
from ..core.sphere import SphereGrid, from_real_basis, resize_coefficients, to_real_basis
from ..models.continuum import ContinuumPDE
from .equilibria import ROUNDOFF, StationaryState, at_noise

__all__ = ["GibbsProblem", "gibbs_problem_cost", "SECONDS_PER_FLOP", "gibbs_map", "rotation_generators", "symmetry_axes", "solve_sphere_state", "sphere_spectrum",
           "sphere_resolution_error", "sphere_branch", "sphere_block_spectrum", "SPHERE_RESOLUTION_TOL"]

SPHERE_RESOLUTION_TOL = 1e-8
"""Largest :func:`sphere_resolution_error` of a state counted as resolved (on the S^2 grid; the axisymmetric
solver's is :data:`meanfield.analysis.equilibria.RESOLUTION_TOL`, 1e-10, on its exact Gauss nodes)."""


def _state_and_noise(pde, state, positive=True):
    """``(rho_lm, nu)`` of ``state``: a :class:`~meanfield.analysis.equilibria.StationaryState` on S^2 gives its own
    ``rho_lm`` and ``nu``; coefficients take the
    model's ``nu`` (``> 0`` when ``positive``: the Gibbs map divides by it).  The coefficients are not checked here."""
    if isinstance(state, StationaryState):
        rho, nu, where = state.coefficients_in("spherical_harmonics"), state.nu, "the state's nu"
    else:
        rho, nu, where = state, pde.nu, ("the model's nu (pde.nu; a state at another noise: pass the StationaryState, or "
                                         "the model at_noise(pde, nu))")
    nu = validate.real("nu", nu, 0.0)
    if positive and not nu > 0:
        raise ValueError(f"nu must be positive (the Gibbs state exp(Phi / nu) / Z); received {where} = {nu!r}")
    return rho, nu


def _check(pde):
    if not isinstance(pde, ContinuumPDE):
        raise ValueError(f"pde must be a ContinuumPDE; received {type(pde).__name__}")
    if pde.general is not None:
        bad = [i for i, c in enumerate(pde.general.scales) if c is None]
        if bad:
            raise ValueError(f"pde: heads {bad} are general heads whose velocity is not a gradient (the self-consistency "
                             f"equation rho = exp(Phi / nu) / Z needs X = grad Phi): general heads are served with mean "
                             f"normalization and V = c M (X = c grad N); received another head")
        return pde
    if not pde.zonal:
        raise ValueError("pde must be on a spectral path (zonal heads, or general gradient heads: mean normalization, "
                         "V = c M): the self-consistency equation needs the velocity as a gradient, "
                         "X = grad Phi; summation='quadrature' has no potential")
    return pde


_GENERATORS = np.array([np.cross(np.eye(3)[k], np.eye(3)) for k in range(3)])   # G_k x = e_k x x (rows: G_k^T)


def symmetry_axes(pde) -> np.ndarray:
    """Orthonormal rows (r, 3): the axes ``w`` whose rotations leave every head invariant (the null space of
    ``w -> ([G(w), M_h], [G(w), V_h])``, ``G(w) x = w x x``): the identity (all of R^3) for zonal heads, one axis
    for the paper's plane and axis heads (any frame), none for generic ones.  Only these rotations map stationary
    states to stationary states: their orbit tangents are the neutral modes the phase conditions remove.

    Parameters
    ----------
    pde : ContinuumPDE
        A model on a spectral path with a potential (zonal heads, or general gradient heads).

    Returns
    -------
    ndarray, shape (r, 3)
        The axes, ``0 <= r <= 3`` (``numpy.eye(3)`` for zonal heads).

    Raises
    ------
    ValueError
        ``pde`` not a :class:`ContinuumPDE`, or one whose velocity is not a gradient (no potential).
    """
    pde = _check(pde)
    if pde.general is None:
        return np.eye(3)
    rows = []
    for h in pde.heads:
        for A in (h.M, h.V):                          # [G_k, A] for k = x, y, z, as columns of a 9 x 3 block
            rows.append(np.stack([(G.T @ A - A @ G.T).ravel() for G in _GENERATORS], axis=1) / (1 + np.abs(A).max()))
    _, sv, Vt = np.linalg.svd(np.vstack(rows))
    return Vt[np.concatenate([sv, np.zeros(3 - sv.size)]) <= 1e-12]


def _coeffs(grid, x, name):
    """Spherical-harmonic coefficients ``x`` (nalm,) of ``grid``, finite (named ValueError otherwise)."""
    a = grid._alm(x, name)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must hold finite coefficients; received {int(np.count_nonzero(~np.isfinite(a)))} "
                         f"non-finite (NaN or inf) of {a.size}")
    return a


def _step(h):
    return validate.real("h", h, positive=True)


class _Ops:
    """The potential and its linearization on one grid (the model's, or a finer one for the resolution check).

    Per head, by its normalization: mean heads add ``(1/beta) K * rho`` (one summed multiplier), row-local
    normalizing heads (softmax) ``(1/beta) log Z``, Sinkhorn heads ``-(1/beta) log a`` with ``a K[a rho] = 1``
    solved on the grid (:func:`meanfield.core.sinkhorn.solve_scaling`, the model's tolerance).  Linearized,
    a Sinkhorn head's ``delta Phi = -u / beta`` with ``(I + a K[a rho .]) u = -a K[a delta rho]``, solved by GMRES
    (the doubly stochastic operator has its spectrum in [-1, 1]: ``I + P`` is well conditioned for exp heads).
    """

    def __init__(self, pde, grid):
        self.grid = grid
        li = grid.l_index
        self.linear = np.zeros(grid.nalm)
        self.normalizing, self.solving = [], []
        self.tol = getattr(pde, "sinkhorn_tol", 1e-12)
        self.general = pde.general                     # gradient heads: Phi = sum_h c_h N_h, N_h = A_K rho
        if self.general is not None:
            return
        for head, m in zip(pde.heads, pde.operator.multipliers):
            norm = NORMALIZATIONS[head.normalization]
            if not norm.row_local:
                self.solving.append((head.beta, m["normalizer"][li]))
            elif norm.uses_normalizer:
                self.normalizing.append((head.beta, m["normalizer"][li]))
            else:
                self.linear += m["potential"][li]

    def _kernel(self, mult, f):
        """``K[f]`` on the grid for a field ``f`` on the grid (surface measure)."""
        g = self.grid
        return g.synthesis(mult * g.analysis(f))

    def general_potential(self, rho_lm):
        """``sum_h c_h A_K^h rho`` of gradient general heads, truncated at the grid's degree (as the PDE's ``N``)."""
        g, op = self.grid, self.general
        b = resize_coefficients(rho_lm, g.lmax, op.lmax)
        N = sum(c * op.apply(i, "potential", b) for i, c in enumerate(op.scales))
        return resize_coefficients(N, op.lmax, g.lmax)

    def potential_terms(self, rho_lm):
        """The potential's coefficient vectors (one per linear term) of ``rho_lm``: the resolution check's input."""
        if self.general is not None:
            return [self.general_potential(rho_lm)]
        return [m * rho_lm for m in [self.linear] + [m for _, m in self.normalizing + self.solving] if np.any(m)]

    def potential(self, rho_lm):
        g = self.grid
        if self.general is not None:
            return g.synthesis(self.general_potential(rho_lm)), []
        phi = g.synthesis(self.linear * rho_lm)
        Z = []
        for beta, mult in self.normalizing:
            Z.append(g.synthesis(mult * rho_lm))
            if np.any(Z[-1] <= 0):
                raise ValueError("the normalizer Z of a softmax head is not positive on the grid")
            phi += np.log(Z[-1]) / beta
        if self.solving:
            rho = g.synthesis(rho_lm)
            if np.any(rho <= 0):
                raise ValueError("the density must be positive on the grid for a Sinkhorn scaling (a K[a rho] = 1 has "
                                 "no positive solution otherwise)")
            for i, (beta, mult) in enumerate(self.solving):
                res = solve_scaling(lambda f, mult=mult: self._kernel(mult, f.reshape(g.shape) * rho).ravel(),
                                    rho.size, tol=self.tol, where=f"Sinkhorn head {i} (beta = {beta:g})")
                a = res.a.reshape(g.shape)
                Z.append((a, rho))
                phi -= np.log(a) / beta
        return phi, Z

    def dpotential(self, delta_lm, Z):
        g = self.grid
        if self.general is not None:                   # linear in rho
            return g.synthesis(self.general_potential(delta_lm))
        out = g.synthesis(self.linear * delta_lm)
        k = len(self.normalizing)
        for (beta, mult), z in zip(self.normalizing, Z[:k]):
            out += g.synthesis(mult * delta_lm) / (beta * z)
        if self.solving:
            drho = g.synthesis(delta_lm)
            for (beta, mult), (a, rho) in zip(self.solving, Z[k:]):
                rhs = (-a * self._kernel(mult, a * drho)).ravel()
                op = LinearOperator((rhs.size, rhs.size), dtype=float,
                                    matvec=lambda u, a=a, rho=rho, mult=mult:
                                    u + (a * self._kernel(mult, a * rho * u.reshape(g.shape))).ravel())
                u, info = gmres(op, rhs, rtol=1e-12, atol=0.0, restart=40, maxiter=200)
                if info != 0:
                    raise ValueError(f"the Sinkhorn linearization did not converge (GMRES info {info})")
                out -= u.reshape(g.shape) / beta
        return out

    def gibbs(self, rho_lm, nu, with_phi=False):
        phi, Z = self.potential(rho_lm)
        e = np.exp((phi - phi.max()) / nu)
        f = e / self.grid.integrate(e)
        return (f, Z, phi) if with_phi else (f, Z)


def gibbs_map(pde, state):
    """``G(rho)``: the coefficients of ``exp(Phi[rho] / nu) / Z`` (nalm,) on the model's grid.

    Parameters
    ----------
    pde : ContinuumPDE
        The model (a spectral path whose velocity is a gradient).
    state : StationaryState or array_like
        A state (its ``rho_lm`` and ``nu``), or coefficients ``rho_lm`` (nalm,) at the model's ``nu > 0``.

    Returns
    -------
    numpy.ndarray
        ``G(rho)`` (nalm,), complex.

    Raises
    ------
    ValueError
        If ``pde`` has no potential, the coefficients are not the grid's, or ``nu`` is not positive.
    """
    pde = _check(pde)
    rho_lm, nu = _state_and_noise(pde, state)
    ops = _Ops(pde, pde.grid)
    return pde.grid.analysis(ops.gibbs(_coeffs(pde.grid, rho_lm, "rho_lm"), nu)[0])


def rotation_generators(grid: SphereGrid, rho_lm):
    """``L_k rho`` (3, nalm), ``k = x, y, z``: ``(e_k x x) . grad rho``, the tangents of the rotation orbit
    (degree-preserving, so exact on the grid).

    Parameters
    ----------
    grid : SphereGrid
        The grid.
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density.

    Returns
    -------
    ndarray, shape (3, nalm), complex128
        The coefficients of ``L_x rho``, ``L_y rho``, ``L_z rho``.

    Raises
    ------
    ValueError
        ``grid`` not a :class:`SphereGrid`, or ``rho_lm`` not finite coefficients of its shape.
    """
    if not isinstance(grid, SphereGrid):
        raise ValueError(f"grid must be a SphereGrid; received {type(grid).__name__}")
    rho_lm = _coeffs(grid, rho_lm, "rho_lm")
    grad = grid.to_cartesian(grid.gradient(rho_lm))
    x = grid.nodes
    out = np.empty((3, grid.nalm), np.complex128)
    for k in range(3):
        axis = np.eye(3)[k]
        out[k] = grid.analysis(np.einsum("ijk,ijk->ij", np.cross(axis, x), grad))
    return out


def _real(z):
    return np.concatenate([z.real, z.imag])


def _complex(v):
    n = v.size // 2
    return v[:n] + 1j * v[n:]


def sphere_resolution_error(pde, state) -> float:
    """The potential's truncation (its top third of degrees relative to its largest, as for the axisymmetric
    solver) and the quadrature error of ``G`` (the model's grid against one twice as fine), the larger; either
    below :data:`meanfield.analysis.equilibria.ROUNDOFF` times the potential's largest coefficient (``l = 0``
    included) counts as 0 (round-off: the uniform state is resolved at any ``lmax``).

    Parameters
    ----------
    pde : ContinuumPDE
        The model.
    state : StationaryState or array_like
        A state (its ``rho_lm`` and ``nu``), or coefficients ``rho_lm`` (nalm,) at the model's ``nu > 0``.

    Returns
    -------
    float
        The relative error.

    Raises
    ------
    ValueError
        As :func:`gibbs_map`.
    """
    pde = _check(pde)
    rho_lm, nu = _state_and_noise(pde, state)
    return _resolution_error(pde, rho_lm, nu)


def _resolution_error(pde, rho_lm, nu):
    """:func:`sphere_resolution_error` at noise ``nu`` (the solver's own check)."""
    g = pde.grid
    rho_lm = _coeffs(g, rho_lm, "rho_lm")
    ops = _Ops(pde, g)
    terms = ops.potential_terms(rho_lm)
    pot = [np.abs(p)[g.l_index >= 1] for p in terms]
    top = max(float(p.max()) for p in pot)
    if top == 0:
        return 0.0
    floor = ROUNDOFF * max(float(np.abs(p).max()) for p in terms)          # the potential's round-off, l = 0 in
    high = g.l_index[g.l_index >= 1] > 2 * g.lmax / 3
    fine = SphereGrid(g.lmax, nlat=2 * g.nlat, nlon=2 * g.nlon)
    ops_fine = _Ops(pde, fine)
    G1 = g.analysis(ops.gibbs(rho_lm, nu)[0])
    G2 = fine.analysis(ops_fine.gibbs(rho_lm, nu)[0])
    errors = (max(float(p[high].max()) for p in pot), max(float(np.abs(p).max()) for p in ops.potential_terms(G1 - G2)))
    return max((e / top if e > floor else 0.0) for e in errors)


PHASE_RANK_TOL = 1e-3
"""Orbit directions with singular values below this fraction of the largest are not fixed in a Newton step
(an iterate near a symmetric state: the vanishing direction is not a neutral mode of the solution)."""


def _orbit_basis(grid, rho, rtol, axes=None):
    """Orthonormal rows (r, 2 nalm) spanning the rotation orbit's tangent at ``rho`` (singular values of
    ``(L_w rho)`` for the symmetry ``axes`` (rows, default the three coordinate axes) above ``rtol`` times the
    largest; none at uniform)."""
    axes = np.eye(3) if axes is None else np.asarray(axes)
    if not len(axes):
        return np.zeros((0, 2 * grid.nalm))
    L = axes @ np.array([_real(x) for x in rotation_generators(grid, rho)])
    _, sv, Vt = np.linalg.svd(L, full_matrices=False)
    scale = float(np.abs(rho[grid.l_index >= 1]).max(initial=0.0))
    keep = (sv > rtol * sv[0]) & (sv > 1e-10 * scale)
    return Vt[keep]


def solve_sphere_state(pde, rho_lm0, *, tol=1e-10, maxiter=30, phase=True, krylov_maxiter=200,
                       amplitude=None, mode=(1, 0, "re")) -> StationaryState:
    """A stationary state of ``pde`` at its own noise ``pde.nu`` by Newton-Krylov from the coefficients ``rho_lm0``
    (another noise: the model :func:`~meanfield.analysis.equilibria.at_noise`).

    ``tol``: the residual ``max |rho - G(rho)|`` relative to ``max |rho_lm|``.  ``phase``: fix the rotation by
    phase conditions (module docstring); False solves the singular system as it is.
    GMRES tolerance ``min(0.1, residual)`` per Newton step (inexact Newton).  ``amplitude``: hold the
    coefficient ``rho_10`` (a cluster's pull along the z axis) at this value and solve for ``nu`` instead
    (``nu`` is then the start): the branch of :func:`sphere_branch`.  ``mode = (l, m, part)`` names the held
    coefficient instead: the real (``"re"``) or imaginary (``"im"``) part of ``rho_lm``, ``0 <= m <= l``
    (e.g. ``(3, 2, "im")``, the ``xyz`` pattern of the tetrahedral branch from the degree-3 bifurcation).

    Parameters
    ----------
    pde : ContinuumPDE
        The model; its ``nu > 0`` is the state's noise (with ``amplitude``: the start of the solved ``nu``).
    rho_lm0 : array_like or StationaryState
        The start (nalm,), mass 1; a :class:`~meanfield.analysis.equilibria.StationaryState` gives its coefficients (and, with ``amplitude``, its
        ``nu`` as the start of the solved one).
    tol, maxiter, phase, krylov_maxiter, amplitude, mode
        As above.

    Returns
    -------
    StationaryState
        The state (``status`` 0 converged, 1 not converged, 2 not resolved).

    Raises
    ------
    ValueError
        If ``pde`` has no potential, its ``nu`` is 0, ``rho_lm0`` is not the grid's or has another mass, or an
        option is out of range.
    """
    pde = _check(pde)
    if isinstance(rho_lm0, StationaryState) and amplitude is not None:     # nu is solved for: the start's own
        rho_lm0, nu = _state_and_noise(pde, rho_lm0)
    else:                                                               # the model's nu
        rho_lm0 = rho_lm0.coefficients_in("spherical_harmonics") if isinstance(rho_lm0, StationaryState) else rho_lm0
        nu = _state_and_noise(pde, rho_lm0)[1]
    g = pde.grid
    rho = np.array(_coeffs(g, rho_lm0, "rho_lm0"), dtype=np.complex128)
    mass = g.integrate(g.synthesis(rho))
    if abs(mass - 1.0) > 1e-10:
        raise ValueError(f"rho_lm0 must have mass 1 (within 1e-10); received mass {mass!r}")
    tol = validate.real("tol", tol, positive=True)
    maxiter = validate.integer("maxiter", maxiter, 1)
    phase = validate.boolean("phase", phase)
    krylov_maxiter = validate.integer("krylov_maxiter", krylov_maxiter, 1)
    k, part = _mode(g, mode)                  # checked whether or not amplitude holds it
    ops = _Ops(pde, g)
    axes = symmetry_axes(pde)
    n = 2 * g.nalm
    j = None                                  # the held coefficient's slot of the real vector carries delta nu
    if amplitude is not None:
        j = k + (g.nalm if part == "im" else 0)
        a = validate.real("amplitude", amplitude)
        if part == "re":
            rho[k] = a + 1j * rho[k].imag
        else:
            rho[k] = rho[k].real + 1j * a
    products, krylov = 0, 0
    res = np.inf
    failure = None
    for it in range(maxiter + 1):
        try:
            f, Z, phi = ops.gibbs(rho, nu, with_phi=True)
        except ValueError as exc:          # an iterate outside the model's domain (Z <= 0, rho <= 0 for Sinkhorn)
            failure, res = str(exc), np.inf
            break
        products += 1
        F = rho - g.analysis(f)
        res = float(np.abs(F).max() / np.abs(rho).max())
        if res <= tol:
            break
        if it == maxiter:
            break
        C = _orbit_basis(g, rho, PHASE_RANK_TOL, axes) if phase else np.zeros((0, n))
        if j is not None:                  # the slot of rho_10 carries delta nu: drop it, re-orthonormalize
            C[:, j] = 0.0
            C = np.linalg.qr(C.T)[0].T if len(C) else C
        na = len(C)

        dG_dnu = _real(g.analysis(-f * (phi - g.integrate(f * phi)) / nu ** 2)) if j is not None else None

        def matvec(v, f=f, Z=Z, C=C, na=na, dG_dnu=dG_dnu):
            w = v[:n].copy()
            if j is not None:
                w[j] = 0.0
            d = _complex(w)
            dphi = ops.dpotential(d, Z)
            df = f * (dphi - g.integrate(f * dphi)) / nu
            out = _real(d) - _real(g.analysis(df))
            if j is not None:
                out = out - dG_dnu * v[j]
            if na:
                return np.concatenate([out + C.T @ v[n:], C @ v[:n]])
            return out

        A = LinearOperator((n + na, n + na), matvec=matvec, dtype=float)
        rhs = -np.concatenate([_real(F), np.zeros(na)])
        count = [0]
        step, info = gmres(A, rhs, rtol=min(0.1, res), atol=0.0, restart=min(krylov_maxiter, 60),
                           maxiter=krylov_maxiter, callback=lambda r: count.__setitem__(0, count[0] + 1),
                           callback_type="pr_norm")
        krylov += count[0]
        products += count[0]
        if info < 0:
            failure, res = f"GMRES breakdown (info {info})", np.inf
            break
        if j is not None:
            if not nu + step[j] > 0:               # the held amplitude asks for no noise at all: no such state
                failure, res = (f"a Newton step with the held coefficient {mode} = "
                                f"{rho[k].real if part == 're' else rho[k].imag:.6g} drove nu to {nu + step[j]:.3g} "
                                f"<= 0 (the amplitude may exceed what any stationary state with noise holds: |rho_lm| "
                                f"of a density is at most {np.sqrt((2 * g.l_index[k] + 1) / (4 * np.pi)):.4g}; or "
                                f"start nearer the branch)"), np.inf
                break
            nu = nu + step[j]
            step[j] = 0.0
        rho = rho + _complex(step[:n])
        rho[g.m_index == 0] = rho[g.m_index == 0].real        # a real field: m = 0 coefficients are real
    if failure is not None:
        return StationaryState(rho, nu, 1, f"Newton-Krylov stopped after {it} Newton steps: {failure}", res, it,
                               float("nan"), "spherical_harmonics", krylov, products, 0)
    err = _resolution_error(pde, rho, nu)
    removed = len(_orbit_basis(g, rho, 1e-6, axes)) if phase else 0
    common = dict(residual=res, newton=it, krylov=krylov, products=products, removed=removed, resolution=err,
                  basis="spherical_harmonics")
    if res > tol:
        return StationaryState(rho, nu, 1, f"Newton-Krylov did not converge: residual {res:.3g} > tol = {tol:g} after "
                                           f"{it} Newton steps ({krylov} Krylov iterations)", **common)
    if err > SPHERE_RESOLUTION_TOL:
        return StationaryState(rho, nu, 2, f"state not resolved at lmax = {g.lmax}: resolution error {err:.2e} > "
                                           f"{SPHERE_RESOLUTION_TOL:g} (use a larger lmax)", **common)
    return StationaryState(rho, nu, 0, f"converged in {it} Newton steps, {krylov} Krylov iterations, residual "
                                       f"{res:.2e}", **common)


SECONDS_PER_FLOP = 1e-10
"""Seconds per floating-point operation of the dense products of :class:`GibbsProblem` (measured: its Jacobian at
``lmax = 24``, 0.97 GFlop, in 0.027 s with two threads; 1e-10 is the one-thread figure, conservative)."""


def gibbs_problem_cost(lmax, nodes, jacobians=1) -> cost.Cost:
    """Peak bytes of a :class:`GibbsProblem` (``S``, ``W``, ``S P`` and a product's temporary, ``nodes x N``
    each, and four ``N x N`` matrices of a Jacobian and its bordered solve) and the seconds of ``jacobians``
    Jacobians (``2 N^2 nodes`` operations each), ``N = (lmax + 1)^2``.

    Parameters
    ----------
    lmax : int
        Largest degree, ``>= 0``.
    nodes : int
        Grid nodes, ``>= 1``.
    jacobians : int, optional
        Jacobians formed, ``>= 0`` (default 1).

    Returns
    -------
    Cost
        The estimate (not checked against the limits: :meth:`~meanfield.core.cost.Cost.check` does).

    Raises
    ------
    ValueError
        An argument that is not an integer in its range.
    """
    lmax = validate.integer("lmax", lmax, 0)
    nodes = validate.integer("nodes", nodes, 1)
    jacobians = validate.integer("jacobians", jacobians, 0)
    N = (lmax + 1) ** 2
    return cost.Cost(f"GibbsProblem(lmax={lmax})", bytes=8.0 * (4 * nodes * N + 4 * N * N),
                     seconds=jacobians * 2.0 * N * N * nodes * SECONDS_PER_FLOP,
                     detail=f"{N} real coefficients on {nodes} grid nodes, {jacobians} dense Jacobian(s)")


class GibbsProblem:
    r"""The self-consistency equation ``rho = G(rho)`` of a model with a linear potential (mean heads: zonal, or
    general with ``V = c M``) as ``F(u, nu) = 0`` on real coordinates, with its dense Jacobian: the input of
    :func:`meanfield.analysis.continuation.continue_branch` on the full sphere.

    ``u`` holds a density's coordinates in the real orthonormal basis (:func:`meanfield.core.sphere.to_real_basis`)
    without the first (mass 1 fixes ``rho_00 = 1 / sqrt(4 pi)``): ``(lmax + 1)^2 - 1`` unknowns.  With ``S`` the
    synthesis onto the model's grid (real basis), ``W = S^T diag(w)`` the Gauss-Legendre analysis, ``P`` the
    potential's matrix (``Phi = P rho``, independent of ``nu``) and ``f = G(rho)`` on the grid,

    .. math:: F = u - (W f)_{1:},\qquad F_u = I - \big(W \operatorname{diag}(f) (I - 1 (w f)^T) S P / \nu\big)_{1:, 1:},
              \qquad F_\nu = (W [f (\Phi - \textstyle\int f \Phi)])_{1:} / \nu^2,

    the same equation as :func:`solve_sphere_state` (to round-off), formed once per model (``S``, ``W``, ``P``:
    ``(lmax+1)^2`` columns) and then by dense products.  Rotations that leave every head invariant
    (:func:`symmetry_axes`) make ``F_u`` singular at states they move: the continuation suits states that keep the
    heads' continuous symmetries (the branch from the uniform state at large ``nu`` does).

    Parameters
    ----------
    pde : ContinuumPDE
        A model with a potential linear in ``rho``: mean heads, zonal or general with ``V = c M`` (its ``nu``
        is not used: ``nu`` is an argument of the methods).

    Raises
    ------
    ValueError
        ``pde`` not a :class:`ContinuumPDE` with a potential, softmax or Sinkhorn heads, or matrices above the
        cost guard's limits (:func:`gibbs_problem_cost`, :func:`meanfield.core.cost.guard`).
    """

    def __init__(self, pde):
        pde = _check(pde)
        ops = _Ops(pde, pde.grid)
        if ops.normalizing or ops.solving:
            raise ValueError("pde: GibbsProblem needs a potential linear in rho (mean normalization, zonal heads or "
                             "general heads with V = c M); received softmax or Sinkhorn heads (use "
                             "solve_sphere_state)")
        self.pde, self.grid = pde, pde.grid
        g, L = self.grid, pde.grid.lmax
        N = (L + 1) ** 2
        gibbs_problem_cost(L, g.nlat * g.nlon).check(fix="a smaller lmax")
        E = from_real_basis(np.eye(N), L)
        self._S = np.stack([g.synthesis(e).ravel() for e in E], axis=1)            # (nodes, N)
        self._w = g.weights.ravel()
        self._W = self._S.T * self._w                                               # (N, nodes)
        if ops.general is not None:
            self._P = to_real_basis(ops.general_potential(E), L).T
        else:
            lin = ops.linear                                   # per-(l, m) multipliers, real: cos and sin alike
            self._P = np.diag(np.r_[lin, lin[L + 1:]])
        self._SP = self._S @ self._P
        self.symmetric = bool(np.abs(self._P - self._P.T).max() <= 1e-12 * max(np.abs(self._P).max(), 1e-300))
        """Whether the potential's matrix is symmetric (``M_h`` symmetric): only then are the Gibbs states the
        critical points of ``G = 1/2 <rho, P rho> - nu int rho log rho`` (the flow's free energy, MODEL.md 7)."""
        self.size = N - 1
        self.r0 = 1.0 / np.sqrt(4 * np.pi)

    def coefficients(self, u) -> np.ndarray:
        """The model's coefficients ``rho_lm`` (nalm,) of the coordinates ``u``.

        Parameters
        ----------
        u : array_like, shape (size,)
            Real coordinates without the mass.

        Returns
        -------
        ndarray, shape (nalm,), complex128
            Coefficients of mass 1.

        Raises
        ------
        ValueError
            ``u`` not a finite real array of shape (size,).
        """
        u = validate.real_array("u", u, (self.size,))
        return from_real_basis(np.r_[self.r0, u], self.grid.lmax)

    def coordinates(self, rho_lm) -> np.ndarray:
        """The coordinates ``u`` of coefficients ``rho_lm`` of mass 1 (the inverse of :meth:`coefficients`).

        Parameters
        ----------
        rho_lm : array_like, shape (nalm,)
            Coefficients of the model's grid.

        Returns
        -------
        ndarray, shape (size,)
            The real coordinates without the first.

        Raises
        ------
        ValueError
            ``rho_lm`` not finite coefficients of the grid's shape, or a mass that is not 1 (to 1e-10 relative).
        """
        r = to_real_basis(_coeffs(self.grid, rho_lm, "rho_lm"), self.grid.lmax)
        if abs(r[0] - self.r0) > 1e-10 * self.r0:
            raise ValueError(f"rho_lm must have mass 1 (rho_00 = 1/sqrt(4 pi) to 1e-10 relative); received mass "
                             f"{r[0] / self.r0!r}")
        return r[1:]

    def _gibbs(self, u, nu):
        phi = self._SP @ np.r_[self.r0, u]
        e = np.exp((phi - phi.max()) / nu)
        f = e / (self._w @ e)
        return f, phi

    def F(self, u, nu):
        """``u - G(u)`` (size,).

        Parameters
        ----------
        u : ndarray, shape (size,)
            Coordinates (not checked).
        nu : float
            Noise, ``> 0`` (not checked).

        Returns
        -------
        ndarray, shape (size,)
            ``F(u, nu)``.
        """
        f, _ = self._gibbs(u, nu)
        return u - (self._W @ f)[1:]

    def jacobian(self, u, nu):
        """``(F_u (size, size), F_nu (size,))``.

        Parameters
        ----------
        u : ndarray, shape (size,)
            Coordinates (not checked).
        nu : float
            Noise, ``> 0`` (not checked).

        Returns
        -------
        Fu : ndarray, shape (size, size)
            ``dF/du``.
        Fnu : ndarray, shape (size,)
            ``dF/dnu``.
        """
        f, phi = self._gibbs(u, nu)
        wf = self._w * f
        B = self._SP[:, 1:]
        B = f[:, None] * (B - wf @ B) / nu
        Fu = np.eye(self.size) - (self._W @ B)[1:]
        Fp = (self._W @ (f * (phi - wf @ phi)))[1:] / nu ** 2
        return Fu, Fp

    def solve(self, u0, nu, *, tol=1e-12, maxiter=50):
        """Newton on ``F(., nu) = 0`` from ``u0``: ``(u, residual, iterations)`` (the residual in the max norm).

        Parameters
        ----------
        u0 : array_like, shape (size,)
            Start coordinates.
        nu : float
            Noise, ``> 0``.
        tol : float, optional
            Stop once ``max |F| <= tol`` (default 1e-12).
        maxiter : int, optional
            Newton steps at most, ``>= 1`` (default 50).

        Returns
        -------
        tuple
            ``(u, residual, iterations)``: coordinates (size,), ``max |F(u, nu)|`` (a float; above ``tol``
            when the iteration stopped at ``maxiter``) and the Newton steps taken.

        Raises
        ------
        ValueError
            ``u0`` not finite of shape (size,), ``nu`` not a positive number, or ``maxiter`` not an integer
            ``>= 1``.
        """
        u = validate.real_array("u0", u0, (self.size,)).astype(float).copy()
        nu = validate.real("nu", nu, positive=True)
        res = np.inf
        for it in range(validate.integer("maxiter", maxiter, 1) + 1):
            F = self.F(u, nu)
            res = float(np.abs(F).max())
            if res <= tol or it == maxiter:
                break
            u -= np.linalg.solve(self.jacobian(u, nu)[0], F)
        return u, res, it


def sphere_spectrum(pde, state, k=10, *, h=1e-6):
    """The ``k`` eigenvalues of largest real part of the PDE linearized at a state, and how much of each
    eigenvector lies along the rotation orbit ``L_k rho`` (1: a neutral rotation mode).

    ARPACK (``scipy.sparse.linalg.eigs``, ``which="LR"``) on the Jacobian of :meth:`ContinuumPDE.tendency`
    applied by central differences (step ``h`` relative to ``max |rho_lm|``; exact to round-off for mean heads,
    whose tendency is quadratic) on the mass-free coefficients.

    Parameters
    ----------
    pde : ContinuumPDE
        The model.
    state : StationaryState or array_like
        A :class:`~meanfield.analysis.equilibria.StationaryState`: the PDE at the state's own noise, ``at_noise(pde, state.nu)``
        (:func:`meanfield.analysis.equilibria.at_noise`); or coefficients ``rho_lm`` (nalm,): the PDE ``pde`` as
        given, at its ``nu >= 0``.
    k : int
        Eigenvalues wanted, ``1 <= k < 2 nalm - 2``.
    h : float
        The difference step, relative to ``max |rho_lm|``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The eigenvalues (k,) and their parts along the rotation orbit (k,).

    Raises
    ------
    ValueError
        If ``pde`` has no potential, the coefficients are not the grid's, or ``k`` or ``h`` is out of range.
    """
    pde = _check(pde)
    rho_lm, nu = _state_and_noise(pde, state, positive=False)
    model = at_noise(pde, nu)
    g = model.grid
    rho = np.array(_coeffs(g, rho_lm, "rho_lm"), dtype=np.complex128)
    k = validate.integer("k", k, 1, 2 * g.nalm - 2)           # ARPACK: k < n - 1 for the (n, n) real operator
    step = _step(h) * np.abs(rho).max()
    n = 2 * g.nalm

    def matvec(v):
        d = _complex(np.asarray(v, dtype=float))
        d[g.l_index == 0] = 0.0
        d[g.m_index == 0] = d[g.m_index == 0].real
        out = (model.tendency(rho + step * d) - model.tendency(rho - step * d)) / (2 * step)
        out[g.m_index == 0] = out[g.m_index == 0].real
        return _real(out)

    A = LinearOperator((n, n), matvec=matvec, dtype=float)
    vals, vecs = eigs(A, k=k, which="LR", tol=1e-12, v0=np.ones(n), ncv=min(n - 1, max(4 * k, 40)))
    order = np.argsort(-vals.real)
    vals, vecs = vals[order], vecs[:, order]
    L = symmetry_axes(pde) @ np.array([_real(x) for x in rotation_generators(g, rho)])
    Q, _ = np.linalg.qr(L.T[:, np.linalg.norm(L, axis=1) > 1e-10 * max(np.abs(rho).max(), 1e-300)])
    rot = np.array([np.linalg.norm(Q.T @ v) / np.linalg.norm(v) if Q.size else 0.0
                    for v in vecs.T])
    return vals, rot


def sphere_block_spectrum(pde, state, m, *, h=1e-6):
    """All eigenvalues (sorted by decreasing real part) of the PDE linearized at a state axisymmetric about the
    z axis, in the block of azimuthal order ``m``: perturbations ``sum_l c_l Y_lm`` (degrees ``l >= max(m, 1)``).

    A z-axisymmetric state commutes with rotations about z and with the reflection ``phi -> -phi``, so the
    linearization is block-diagonal in ``m`` with real blocks (acting on the ``cos(m phi)`` modes; the
    ``sin(m phi)`` modes repeat each eigenvalue for ``m >= 1``).  Each block is formed densely, a column per
    degree, by central differences of :meth:`ContinuumPDE.tendency` (step ``h`` relative to ``max |rho_lm|``).
    The ``m = 1`` block holds the neutral rotation mode of a non-uniform state (eigenvalue 0); the ``m = 0``
    block is the axisymmetric model's spectrum (:func:`meanfield.analysis.equilibria.linear_spectrum`).

    Parameters
    ----------
    pde : ContinuumPDE
        The model.
    state : StationaryState or array_like
        As for :func:`sphere_spectrum` (a state at its own noise, or coefficients at the model's).
    m : int
        The azimuthal order, ``0 <= m <= lmax``.
    h : float
        The difference step, relative to ``max |rho_lm|``.

    Returns
    -------
    numpy.ndarray
        The block's eigenvalues.

    Raises
    ------
    ValueError
        If the heads or the state are not axisymmetric about z, or an argument is out of range.
    """
    pde = _check(pde)
    if pde.general is not None and not all(is_axial(h.M) and is_axial(h.V) and h.M[0, 1] == 0 and h.V[0, 1] == 0
                                           for h in pde.heads):
        raise ValueError("sphere_block_spectrum needs heads that commute with rotations about z and with the "
                         "reflection y -> -y (the block structure in m): general heads M = V-like diag(p, p, c); "
                         "use sphere_spectrum for other heads")
    rho_lm, nu = _state_and_noise(pde, state, positive=False)
    model = at_noise(pde, nu)
    g = model.grid
    rho = np.array(_coeffs(g, rho_lm, "rho_lm"), dtype=np.complex128)
    m = validate.integer("m", m, 0, g.lmax)
    h = _step(h)
    off = np.abs(rho[g.m_index > 0]).max(initial=0.0)
    if off > 1e-12 * np.abs(rho).max():
        raise ValueError(f"rho_lm must be axisymmetric about the z axis (m != 0 coefficients 0, to 1e-12 relative) "
                         f"for the block spectrum; received m != 0 coefficients up to {off:.3g}")
    idx = [g.index(ell, m) for ell in range(max(m, 1), g.lmax + 1)]
    step = h * np.abs(rho).max()
    J = np.empty((len(idx), len(idx)))
    for col, j in enumerate(idx):
        d = np.zeros(g.nalm, np.complex128)
        d[j] = step
        J[:, col] = ((model.tendency(rho + d) - model.tendency(rho - d))[idx] / (2 * step)).real
    ev = np.linalg.eigvals(J)
    return ev[np.argsort(-ev.real)]


def _mode(grid, mode):
    """``(position, part)`` of the held coefficient ``mode = (l, m, "re" | "im")``."""
    if not (isinstance(mode, tuple) and len(mode) == 3):
        raise ValueError(f"mode must be a tuple (l, m, part) with part 're' or 'im'; received {mode!r}")
    l = validate.integer("mode[0] (l)", mode[0], 1, grid.lmax)
    m = validate.integer("mode[1] (m)", mode[1], 0, l)
    part = validate.choice("mode[2] (part)", mode[2], ("re", "im"))
    if part == "im" and m == 0:
        raise ValueError(f"mode {mode!r} holds the imaginary part of an m = 0 coefficient, which is 0 for a real "
                         f"density; use part 're' or m >= 1")
    return grid.index(l, m), part


def sphere_branch(pde, amplitudes, start, *, tol=1e-10, maxiter=30, mode=(1, 0, "re")):
    """States of ``pde`` along a branch parametrized by one coefficient (the amplitudes, in order; by default
    ``rho_10``, else ``mode``, see :func:`solve_sphere_state`), each solve of :func:`solve_sphere_state`
    (``amplitude=``, ``nu`` solved for) warm-started from the last.

    Parameters
    ----------
    pde : ContinuumPDE
        The model.
    amplitudes : array_like
        The held coefficient's values, in order.
    start : StationaryState or array_like
        Near the first state: a :class:`~meanfield.analysis.equilibria.StationaryState` (its coefficients and its ``nu``), or coefficients (e.g. a
        degree-1 cluster along z, or uniform plus a small degree-3 ``xyz`` pattern) at the model's ``nu > 0``.
    tol, maxiter, mode
        As for :func:`solve_sphere_state`.

    Returns
    -------
    list of StationaryState
        The states, ending at the first failure.

    Raises
    ------
    ValueError
        If ``amplitudes`` is empty or not 1-d, or as :func:`solve_sphere_state`.
    """
    amplitudes = validate.real_array("amplitudes", amplitudes)
    if amplitudes.ndim != 1 or amplitudes.size == 0:
        raise ValueError(f"amplitudes must be a non-empty 1-d sequence of finite amplitudes; received shape "
                         f"{amplitudes.shape}")
    out = []
    for a in amplitudes:
        s = solve_sphere_state(pde, start, tol=tol, maxiter=maxiter, amplitude=a, mode=mode)
        out.append(s)
        if not s.success:
            break
        start = s
    return out
