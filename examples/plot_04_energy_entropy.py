"""
Energy and entropy identities
=============================

Along a particle trajectory the energy's rate equals the dissipation ``sum_i w_i |dx_i/dt|^2`` (mean
normalization, symmetric heads): checked by finite differences of the recorded energy against the recorded
dissipation. The attention entropy per head is recorded by the same observer; the PDE's energy rises and its
mass stays 1. Sinkhorn attention has its own energy ``E_S`` with the same identity.
"""

import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf

N = 300                                                          # quick sizes

system = mf.ParticleSystem(mf.scalar_heads([1.0, 0.5], d=3, beta=2.0))
X0 = mf.initial.uniform_sphere(N, 3, seed=0)
t_eval = np.linspace(0.0, 2.0, 81)
traj = mf.solve_particles(system, X0, t_final=2.0, save=mf.SaveAt(t_eval=t_eval),
                          step=mf.StepControl(rtol=1e-10, atol=1e-12), progress=False)
E, D = traj.observables["energy"], traj.observables["dissipation"]
dEdt = np.gradient(E, traj.t, edge_order=2)
rel = np.max(np.abs(dEdt[2:-2] - D[2:-2])) / np.max(D)
print(f"max |dE/dt - dissipation| / max dissipation = {rel:.1e}")   # finite-difference error, ~1e-4
assert rel < 1e-2

# %%
# Entropies: Shannon attention entropy in [0, log n] per head, and the relative one
H = traj.observables["entropy"]
print(H.shape, bool(np.all(H <= np.log(N) + 1e-12)), traj.observables["relative_entropy"][-1])

# %%
# Sinkhorn energy: ``dE_S/dt = sum_i w_i |dx_i/dt|^2`` (exp kernels, symmetric M, V = M)
sk = mf.ParticleSystem(mf.scalar_heads([1.0], d=3, beta=2.0, normalization="sinkhorn"), summation="direct")
tsk = mf.solve_particles(sk, mf.initial.uniform_sphere(150, 3, seed=2), t_final=1.0,
                         save=mf.SaveAt(t_eval=np.linspace(0, 1, 41)), step=mf.StepControl(rtol=1e-10, atol=1e-12),
                         progress=False)
Es, Ds = tsk.observables["energy"], tsk.observables["dissipation"]
print("Sinkhorn:", np.max(np.abs(np.gradient(Es, tsk.t, edge_order=2) - Ds)[2:-2]) / np.max(Ds))

# %%
# The PDE: energy non-decreasing, mass 1
pde = mf.ContinuumPDE(mf.scalar_heads([1.0, 0.5], d=3, beta=2.0), lmax=15)
sol = mf.solve_continuum(pde, mf.densities.vmf_mixture_density(pde.grid, [[0, 0, 1]], [1.0], floor=0.5),
                         t_final=0.5, progress=False)
print(bool(np.all(np.diff(sol.observables["energy"]) >= -1e-12)), abs(sol.observables["mass"] - 1).max())

# %%
# The figure
fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
axes[0].plot(traj.t, dEdt, label="dE/dt (finite differences)")
axes[0].plot(traj.t, D, "--", label="dissipation")
axes[0].set_xlabel("t")
axes[0].legend()
axes[0].set_title("energy identity, mean heads")
axes[1].plot(traj.t, H)
axes[1].axhline(np.log(N), color="k", lw=0.8)
axes[1].set_title("attention entropy per head (log n: line)")
axes[1].set_xlabel("t")
axes[2].plot(sol.t, sol.observables["energy"])
axes[2].set_title("PDE energy")
axes[2].set_xlabel("t")
fig.tight_layout()
