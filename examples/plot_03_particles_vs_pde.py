"""
Particles against the PDE: W2 and MMD
=====================================

Sample particles from the PDE's initial density, run both with the same heads, and compare them at common
times by the 2-Wasserstein distance (``paired_run``, the main job's engine). Then the distances themselves:
exact W2 between point sets, W2 against a density's grid nodes, the semi-discrete W2 against the continuous
density (no grid floor) and the spectral MMD with its i.i.d. expectation.
"""

import matplotlib.pyplot as plt

import meanfield as mf
import meanfield.analysis.transport as tr  # imports POT (a second or two)
from meanfield.analysis.mmd import mmd_iid_expectation, mmd_particles_field
from meanfield.workflow.paired import PDESettings, TransportSettings, paired_run

N_PAIRED, N_FIELD = 500, 4000                                    # quick sizes (studies: up to 10^6)

# %%
# A paired run
# ------------
# W2 against the continuous density (``"semidiscrete"``); the default ``"auto"`` takes the exact W2 to the
# PDE grid's nodes at this size, and reports that measure's own distance to the density (its grid floor).
heads = mf.scalar_heads([1.0, 0.5], 3, beta=1.0)
start = lambda grid: mf.densities.vmf_mixture_density(grid, [[0, 0, 1], [1, 0, 0]], [4.0, 4.0], floor=0.2)
res = paired_run(heads, start, n_particles=N_PAIRED, t_final=0.4, t_eval=[0.0, 0.2, 0.4],
                 pde=PDESettings(lmax=23), transport=TransportSettings(method="semidiscrete"), seed=0)
print(res.w2, res.w2_methods, res.pde_message)                   # W2(mu_n(t), rho(t)) and the PDE status                                   # W2(mu_n(t), rho(t)) and the PDE status

# %%
# W2 between point sets and against a density's nodes
# ----------------------------------------------------
X = mf.initial.uniform_sphere(200, 3, seed=0)
Y = mf.initial.uniform_sphere(200, 3, seed=1)
res1 = tr.w2_distance(X, Y)                                      # exact, squared geodesic cost
grid = mf.SphereGrid(15)
uniform = mf.densities.uniform_density(grid)
mass = (grid.synthesis(uniform) * grid.weights).reshape(-1)      # rho * quadrature weight
res2 = tr.w2_particles_density(X, grid.nodes.reshape(-1, 3), mass)
print(res1.method, res1.distance, res2.distance, res2.info["grid_floor"])

# %%
# Semi-discrete W2 and the MMD at larger n
# ----------------------------------------
grid = mf.SphereGrid(31)
rho_lm = mf.densities.vmf_mixture_density(grid, [[0, 0, 1], [1, 0, 0]], [4, 4], floor=0.2)
ns = [250, 1000, N_FIELD]
w2s, mmds, iid = [], [], []
for n in ns:
    Xn = mf.densities.sample_particles(grid, rho_lm, n, seed=1)
    sd = tr.w2_particles_field(Xn, rho_lm, grid, metric="chordal")
    mmd = mmd_particles_field(Xn, rho_lm, grid, kernel="sobolev", s=2.0)     # H^-2 norm, milliseconds
    w2s.append(sd.distance)
    mmds.append(mmd.distance)
    iid.append(mmd_iid_expectation(grid, rho_lm, n, kernel="sobolev", s=2.0) ** 0.5)
    print(n, sd.distance, sd.info["newton_iterations"], mmd.distance, iid[-1])

# %%
# The figure: W2 over time in the paired run; both distances against n (slope -1/2)
fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
axes[0].plot(res.times, res.w2, "o-")
axes[0].set_xlabel("t")
axes[0].set_title(f"W2(particles, PDE), n = {N_PAIRED}")
axes[1].loglog(ns, w2s, "o-", label="semi-discrete W2 (chordal)")
axes[1].loglog(ns, mmds, "s-", label="MMD, H^-2")
axes[1].loglog(ns, iid, "k--", label="MMD of i.i.d. samples (expected)")
axes[1].set_xlabel("n")
axes[1].legend()
fig.tight_layout()
