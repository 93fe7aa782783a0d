r"""The full-sphere check of the equilibria job: ``geometry.d = "sphere"`` (MODEL.md section 7).

The branches are continued on the axisymmetric PDE of S^2 (``d = 3``, :mod:`meanfield.workflow.equilibria_branches`);
every state of a switched branch is then solved again on the full sphere (:class:`meanfield.ContinuumPDE`,
spherical harmonics up to the same ``lmax``) by Newton-Krylov with phase conditions
(:func:`meanfield.analysis.sphere_states.solve_sphere_state`; degree-1 branches hold ``rho_10`` and solve for
``nu``, the branch's own parametrization, so folds are passed; other degrees are solved at the branch's
``nu``), and its stability is decided by the leading eigenvalues of the PDE linearized on the whole sphere,
every azimuthal order (:func:`~meanfield.analysis.sphere_states.sphere_spectrum`, ARPACK), with the neutral
rotation modes identified (eigenvectors along the rotation orbit, eigenvalue 0) and left out of the verdict.
At the uniform state the spectrum is ``sigma_l`` in every order ``m``, so the uniform branch keeps the
axisymmetric eigenvalues.  A point whose S^2 solve fails stops the branch's S^2 part there with the solver's
status and message (the branch's status and message say so).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..analysis import sphere_states as ss
from ..models.continuum import ContinuumPDE

__all__ = ["sphere_model", "add_sphere", "NEUTRAL_TOL", "EXTRA_EIGENVALUES"]

NEUTRAL_TOL = 1e-6
"""An eigenvector counts as a rotation mode when its part along the orbit's tangent exceeds ``1 - NEUTRAL_TOL``
and its eigenvalue is below ``sqrt(NEUTRAL_TOL)`` times the largest in size (measured: 1e-11 against 3)."""
EXTRA_EIGENVALUES = 3
"""Eigenvalues computed beyond ``continuation.n_eigenvalues`` on S^2: room for the (up to 3) rotation modes."""


def sphere_model(prob, p) -> ContinuumPDE:
    """The S^2 model at the parameter ``p``: the heads and the noise of the axisymmetric model there
    (:meth:`~meanfield.workflow.equilibria_branches.Problem.at`), spherical harmonics up to its ``lmax``.

    Parameters
    ----------
    prob : Problem
        The job's continuation problem.
    p : float
        The parameter's value.

    Returns
    -------
    ContinuumPDE
        The model (kept for the next call at the same heads and noise).
    """
    model = prob.at(p)
    key = ("sphere", tuple(h.beta for h in model.heads), model.nu)
    if key not in prob._models:
        if len(prob._models) > 64:
            prob._models.clear()
        prob._models[key] = ContinuumPDE(model.heads, lmax=model.lmax, nu=model.nu)
    return prob._models[key]


def add_sphere(prob, rec):
    """``rec`` (a :class:`~meanfield.workflow.equilibria_branches.BranchRecord`) with the S^2 arrays: ``sphere_status`` (-1 not solved), ``sphere_nu``,
    ``sphere_residual``, ``sphere_removed`` (neutral modes removed by the phase conditions), ``sphere_stable``,
    ``sphere_eig`` (N, k + 3) and ``sphere_rotation`` (their part along the rotation orbit), ``sphere_l0``
    (the zonal coefficients ``rho_l0``, N x (lmax+1)).

    Parameters
    ----------
    prob : Problem
        The job's continuation problem (:class:`~meanfield.workflow.equilibria_branches.Problem`).
    rec : BranchRecord
        An axisymmetric branch.

    Returns
    -------
    BranchRecord
        A new record with the ``sphere_*`` fields (and status 1 or 2 with the message if an S^2 solve failed).
    """
    n, k = rec.n_points, prob.config.continuation.n_eigenvalues + EXTRA_EIGENVALUES
    lmax = prob.pde.lmax
    out = {"sphere_status": np.full(n, -1), "sphere_nu": np.full(n, np.nan), "sphere_residual": np.full(n, np.nan),
           "sphere_removed": np.full(n, -1), "sphere_stable": np.full(n, -1),
           "sphere_eig": np.full((n, k), np.nan + 0j), "sphere_rotation": np.full((n, k), np.nan),
           "sphere_l0": np.full((n, lmax + 1), np.nan)}
    if rec.degree == 0:                          # uniform: sigma_l in every azimuthal order, no rotation mode
        out["sphere_status"][:] = 0
        out["sphere_nu"][:] = [prob.at(p).nu for p in rec.p]
        out["sphere_residual"][:] = 0.0
        out["sphere_removed"][:] = 0
        out["sphere_stable"][:] = rec.stable
        m = min(k, rec.eig.shape[1])
        out["sphere_eig"][:, :m] = rec.eig[:, :m]
        out["sphere_rotation"][:, :m] = 0.0
        out["sphere_l0"][:, 0] = 1 / np.sqrt(4 * np.pi)
        out["sphere_l0"][:, 1:] = 0.0
        return replace(rec, **out)
    from tqdm import tqdm

    ell = rec.degree
    points = tqdm(list(zip(rec.u, rec.p)), desc=f"S^2 states (degree {ell})", leave=False,
                  disable=None if prob.progress is None else not prob.progress)
    for i, (u, p) in enumerate(points):
        ax = prob.at(p)
        pde = sphere_model(prob, p)                  # at the branch's nu: the state's noise (degree 1: the start)
        g = pde.grid
        rho0 = ax.to_sphere_coefficients(np.r_[1.0, u], pde.grid)
        if ell == 1 and prob.parameter == "nu":
            st = ss.solve_sphere_state(pde, rho0, amplitude=float(rho0[g.index(1, 0)].real))
        else:
            st = ss.solve_sphere_state(pde, rho0)
        out["sphere_status"][i], out["sphere_nu"][i], out["sphere_residual"][i] = st.status, st.nu, st.residual
        out["sphere_removed"][i] = st.removed
        out["sphere_l0"][i] = [st.rho_lm[g.index(j, 0)].real for j in range(lmax + 1)]
        if not st.success:
            rec = replace(rec, status=st.status,
                          message=f"the S^2 solve at point {i} ({prob.parameter} = {p:.10g}) failed: {st.message}")
            break
        vals, rot = ss.sphere_spectrum(pde, st, k=k)
        out["sphere_eig"][i], out["sphere_rotation"][i] = vals, rot
        scale = float(np.abs(vals).max())
        neutral = (rot > 1 - NEUTRAL_TOL) & (np.abs(vals) <= np.sqrt(NEUTRAL_TOL) * scale)
        out["sphere_stable"][i] = int(bool(np.all(vals.real[~neutral] < 0)))
    points.close()
    return replace(rec, **out)


_TEXT = {
    "sphere_status": "status of the state solved on the full sphere (0 converged, 1 not, 2 not resolved, -1 not "
                     "solved)",
    "sphere_nu": "nu of the state solved on the full sphere", "sphere_residual": "its self-consistency residual",
    "sphere_removed": "neutral rotation modes removed by the phase conditions (the orbit's dimension)",
    "sphere_stable": "1: every non-rotation eigenvalue on the full sphere < 0; 0: not; -1: not solved",
    "sphere_eigenvalue_real": "real part of the leading eigenvalues on the full sphere (all azimuthal orders)",
    "sphere_eigenvalue_imag": "imaginary part of the leading eigenvalues on the full sphere",
    "sphere_rotation": "part of each eigenvector along the rotation orbit (1: a neutral rotation mode)",
    "sphere_rho_l0": "zonal spherical-harmonic coefficients rho_l0 of the state on the full sphere",
}


def sphere_variables(records, P, lmax):
    """The S^2 variables of the dataset (branch, point[, sphere_eigenvalue | l]) and their descriptions."""
    B, k = len(records), records[0].sphere_eig.shape[1]
    pad = {"sphere_status": -1, "sphere_removed": -1, "sphere_stable": -1}
    out = {}
    for key in ("sphere_status", "sphere_nu", "sphere_residual", "sphere_removed", "sphere_stable"):
        a = np.full((B, P), pad.get(key, np.nan), np.int8 if key in pad else float)
        for i, r in enumerate(records):
            a[i, :r.n_points] = getattr(r, key)
        out[key] = (("branch", "point"), a)
    ev, rot, l0 = np.full((B, P, k), np.nan + 0j), np.full((B, P, k), np.nan), np.full((B, P, lmax + 1), np.nan)
    for i, r in enumerate(records):
        n = r.n_points
        ev[i, :n], rot[i, :n], l0[i, :n] = r.sphere_eig, r.sphere_rotation, r.sphere_l0
    dims = ("branch", "point", "sphere_eigenvalue")
    out.update(sphere_eigenvalue_real=(dims, ev.real), sphere_eigenvalue_imag=(dims, ev.imag),
               sphere_rotation=(dims, rot), sphere_rho_l0=(("branch", "point", "l"), l0))
    return out, _TEXT
