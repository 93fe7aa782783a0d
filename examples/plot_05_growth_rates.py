"""
Growth rates of the uniform state in any dimension
==================================================

The uniform state's linearization is diagonal in spherical harmonics (Gegenbauer polynomials on S^{d-1}):
the closed forms ``sigma_l`` of :mod:`meanfield.analysis.stability` for any ``d``, the critical noise, and
the closed forms of :mod:`meanfield.analysis.theory` (``beta*``, ``lambda_max``). The last section measures a
growth rate on the axisymmetric PDE itself and compares it with the formula.
"""

import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.analysis import stability

# %%
# Closed forms
# ------------
print(mf.theory.beta_star(2, 32))                                # ~1.476388 (MODEL.md)
print(stability.growth_rate([1, 2, 3, 4], [1.0], 6.0))          # 9.34, 19.61, 23.35, 19.97
print(mf.theory.lambda_max(2.0, 32))

ls = np.arange(1, 21)
rates = {d: stability.growth_rate(ls, [1.0], 6.0, d=d) for d in (2, 3, 8, 32, 128)}
for d, r in rates.items():
    print(f"d = {d:3d}: most unstable degree l* = {ls[np.argmax(r)]}, sigma = {r.max():.3f}")

# %%
# Heads with their own beta: ``growth_rate_heads``; with noise ``nu`` every rate drops by ``nu l (l + d - 2)``
heads = (*mf.scalar_heads([1.0], 3, beta=6.0), *mf.scalar_heads([-0.5], 3, beta=2.0))
print(stability.growth_rate_heads([1, 2], heads))
print(stability.growth_rate([1, 2, 3], [1.0], 6.0, nu=0.5))

# %%
# Measured on the PDE: a small degree-2 perturbation of the uniform state on S^7
# ------------------------------------------------------------------------------
# ``AxisymmetricPDE`` holds densities of ``t = <x, e>`` in Gegenbauer coefficients ``b_l`` (relative to the
# normalized uniform measure, so uniform is ``b = (1, 0, 0, ...)``).
d, beta, eps = 8, 6.0, 1e-6
pde = mf.AxisymmetricPDE(mf.scalar_heads([1.0], d=d, beta=beta), d=d, lmax=24)
b0 = np.zeros(pde.lmax + 1)
b0[0], b0[2] = 1.0, eps
sol = mf.solve_reduced(pde, b0, t_final=0.2, save=mf.SaveAt(t_eval=np.linspace(0, 0.2, 11)),
                       step=mf.StepControl(rtol=1e-10, atol=1e-14))
b2 = np.array([pde.coefficients(y)[2] for y in sol.y])
measured = np.polyfit(sol.t, np.log(np.abs(b2)), 1)[0]
predicted = stability.growth_rate([2], [1.0], beta, d=d)[0]
print(f"sigma_2 on S^{d - 1}: measured {measured:.6f}, closed form {predicted:.6f}")
assert abs(measured - predicted) < 1e-3 * abs(predicted)          # linear regime: eps^2 effects ~1e-6

# %%
# The figure: sigma_l against l in several dimensions
fig, ax = plt.subplots(figsize=(6, 3.6))
for d_, r in rates.items():
    ax.plot(ls, r, "o-", ms=3, label=f"d = {d_}")
ax.axhline(0, color="k", lw=0.8)
ax.set_xlabel("degree l")
ax.set_ylabel("sigma_l")
ax.set_title("growth rates of the uniform state, beta = 6, one head")
ax.legend()
fig.tight_layout()
