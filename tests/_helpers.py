"""Small helpers shared by several test modules (plain functions: import them explicitly)."""

import numpy as np

from meanfield.core.densities import uniform_density
from meanfield.models.particles import retract_sphere

FD_STEP = 1e-5
# Central differences: truncation ~ h^2 |E'''| ~ 1e-10, round-off ~ eps |E| / h ~ 1e-11;
# 1e-7 relative leaves a wide margin while catching any O(1) or missing-factor error.
FD_RTOL = 1e-7


def fd_energy_rate(system, X, V, w=None):
    """d/ds E(X(s)) at s = 0 along X(s) = X + s V (flat) or its retraction (sphere)."""
    move = (lambda Y: retract_sphere(Y)) if system.geometry == "sphere" else (lambda Y: Y)
    Ep = system.energies(move(X + FD_STEP * V), w)
    Em = system.energies(move(X - FD_STEP * V), w)
    return (Ep - Em) / (2 * FD_STEP)


def smooth_density(grid, seed=0, amp=0.004, lmax_pert=5):
    """Uniform plus a random real perturbation of degrees 1..lmax_pert (positive for small amp)."""
    rng = np.random.default_rng(seed)
    rho_lm = uniform_density(grid).copy()
    sel = (grid.l_index >= 1) & (grid.l_index <= lmax_pert)
    rho_lm[sel] += amp * (rng.standard_normal(sel.sum()) + 1j * rng.standard_normal(sel.sum()))
    rho_lm[grid.m_index == 0] = rho_lm[grid.m_index == 0].real
    return rho_lm
