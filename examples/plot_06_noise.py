"""
Noisy particles and the noisy PDE
=================================

Token noise of generator ``nu Lap_S`` on S^{d-1}: the particles integrate an SDE (the stochastic schemes
of the one driver, reproducible bit for bit from ``seed``), the PDE gains the diffusion ``-nu l (l + 1)``
per coefficient, which the split schemes (Lawson, ETD, IMEX) treat exactly or implicitly, so their stable
step does not shrink like ``1 / (nu lmax^2)``.
"""

import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.core.methods import method_names

N, NU = 5000, 0.25                                              # quick sizes

# %%
# Pure noise: ``E<x(t), x(0)> = exp(-nu (d - 1) t)``
# --------------------------------------------------
noisy = mf.ParticleSystem(mf.scalar_heads([0.0], d=3), nu=NU, summation="direct")  # noise only
X0 = mf.initial.uniform_sphere(N, 3, seed=0)
t_eval = np.linspace(0.0, 1.0, 11)
traj = mf.solve_particles(noisy, X0, t_final=1.0, step=mf.StepControl(dt=0.05), seed=1,
                          save=mf.SaveAt(t_eval=t_eval, observe=False))
corr = np.einsum("tnd,nd->tn", traj.y, X0)
c = corr[-1]
print(c.mean(), c.std() / np.sqrt(len(c)))     # 0.61 = exp(-0.5) within a few standard errors

# %%
# The stochastic schemes are steppers of ``integrate``; the noise comes as ``mf.Noise(nu, seed)``
print(method_names(stochastic=True))                             # ['euler_maruyama', 'geodesic_strang']
tr2 = mf.integrate(lambda t, X: np.zeros_like(X), X0[:200], (0.0, 1.0), method="geodesic_strang",
                   step=mf.StepControl(dt=0.05), noise=mf.Noise(NU, seed=1))
print(tr2.nfev)

# %%
# Interaction and noise: particles and the PDE
# --------------------------------------------
heads = mf.scalar_heads([1.0], 3, beta=2.0)
pde = mf.ContinuumPDE(heads, lmax=15, nu=0.5)
rho_lm = mf.densities.vmf_density(pde.grid, [0.0, 0.6, 0.8], 3.0)
dt = pde.cfl_dt(rho_lm, 0.5, "ars443")        # transport only: the same at any nu
sol = mf.solve_continuum(pde, rho_lm, 0.2, method="ars443", step=mf.StepControl(dt=dt),
                         save=mf.SaveAt(observe=False), monitor=False)
print(sol.method, sol.n_steps, dt == mf.ContinuumPDE(pde.heads, lmax=15, nu=50.0).cfl_dt(rho_lm, 0.5, "ars443"))

# the adaptive split scheme with the default observer, against noisy particles from the same start
sol = mf.solve_continuum(pde, rho_lm, 1.0, method="lawson_dopri5", save=mf.SaveAt(t_eval=t_eval), progress=False)
Xp = mf.densities.sample_particles(pde.grid, rho_lm, 2000, seed=2)
part = mf.solve_particles(mf.ParticleSystem(heads, nu=0.5), Xp, t_final=1.0, step=mf.StepControl(dt=0.02),
                          seed=3, save=mf.SaveAt(t_eval=t_eval), progress=False)
print(sol.message, part.message)

# %%
# The figure: the correlation decay, and the energy of the noisy PDE and of the noisy particles
fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
axes[0].errorbar(t_eval, corr.mean(axis=1), yerr=2 * corr.std(axis=1) / np.sqrt(N), fmt="o", label="particles")
axes[0].plot(t_eval, np.exp(-NU * 2 * t_eval), "k-", label="exp(-nu (d - 1) t)")
axes[0].set_xlabel("t")
axes[0].legend()
axes[0].set_title("pure noise, d = 3")
axes[1].plot(sol.t, sol.observables["energy"], label="PDE (lawson_dopri5)")
axes[1].plot(part.t, part.observables["energy"], "o", label="2000 noisy particles")
axes[1].set_xlabel("t")
axes[1].legend()
axes[1].set_title("energy, nu = 0.5")
fig.tight_layout()
