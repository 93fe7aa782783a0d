"""
The continuum PDE and its resolution monitor
============================================

The mean-field continuity equation on S^2 in spherical harmonics (``lmax`` 15 here): a von Mises-Fisher
start, two heads, its energy (non-decreasing) and mass (conserved), the density on the grid, and the
resolution monitor that stops a run once ``lmax`` no longer resolves the density.
"""

import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf

LMAX, T_FINAL = 15, 0.5                                          # quick sizes

# %%
# Fields on S^2
# -------------
# A :class:`~meanfield.core.sphere.SphereGrid` is a Gauss-Legendre grid with its transforms; densities are
# coefficient arrays ``rho_lm``.
grid = mf.SphereGrid(LMAX)
rho_lm = mf.densities.vmf_mixture_density(grid, [[0, 0, 1], [1, 0, 0]], [3.0, 3.0], floor=0.2)
rho = grid.synthesis(rho_lm)                                     # (nlat, nlon) grid values
print(round(grid.integrate(rho), 12))                            # mass 1.0
X = mf.densities.sample_particles(grid, rho_lm, 500, seed=0)     # (500, 3) samples of rho
print(X.shape)

# %%
# Solve the PDE
# -------------
pde = mf.ContinuumPDE(mf.scalar_heads([1.0, 0.5], d=3, beta=1.0), lmax=LMAX)
rho0 = mf.densities.vmf_mixture_density(pde.grid, [[0, 0, 1]], [1.0], floor=0.5)
sol = mf.solve_continuum(pde, rho0, t_final=T_FINAL, progress=False)
obs = sol.observables
print(sol.message, obs["energy"][-1] >= obs["energy"][0], abs(obs["mass"][-1] - 1) < 1e-12)
rho_end = pde.coefficients(sol.y_final)                          # coefficients at the end
print(mf.field_diagnostics.field_spectral_tail(pde, rho_end) < 1e-3)   # still resolved

# %%
# The resolution monitor
# ----------------------
# A sharper start at a low degree: the monitor (negative mass, spectral tail) stops the run with status 1
# and says when and why, instead of returning an unresolved density.
coarse = mf.ContinuumPDE(mf.scalar_heads([1.0], d=3, beta=2.0), lmax=13)
sharp = mf.densities.vmf_mixture_density(coarse.grid, [[0, 0, 1], [1, 0, 0]], [2.0, 2.0], floor=0.0)
stopped = mf.solve_continuum(coarse, sharp, t_final=4.0, progress=False)
print(stopped.status, stopped.message)

# %%
# The figure: the density at the start and the end, the tail of the stopped run
fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
for ax, c, title in [(axes[0], rho0, "rho(0)"), (axes[1], rho_end, f"rho({T_FINAL:g})")]:
    im = ax.imshow(pde.grid.synthesis(c), extent=(0, 360, -90, 90), aspect="auto", origin="upper")
    ax.set_title(title)
    ax.set_xlabel("longitude")
    fig.colorbar(im, ax=ax)
axes[0].set_ylabel("latitude")
axes[2].semilogy(stopped.t, stopped.observables["spectral_tail"], label="spectral tail")
axes[2].semilogy(stopped.t, np.maximum(stopped.observables["negative_mass"], 1e-16), label="negative mass")
axes[2].set_xlabel("t")
axes[2].set_title("lmax 13: the monitor's quantities")
axes[2].legend()
fig.tight_layout()
