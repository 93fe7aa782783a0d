"""
The PDE beyond S^2: the circle and S^{d-1} in any dimension
===========================================================

For axisymmetric data the PDE on S^{d-1} reduces to densities of ``t = <x, e>`` in Gegenbauer coefficients
(:class:`~meanfield.models.axisymmetric.AxisymmetricPDE`, any ``d``); on S^1 the PDE runs in Fourier modes
(:class:`~meanfield.models.circle.CirclePDE`, zonal heads spectrally, any 2 x 2 heads by quadrature).
Particles in d = 128 are compared with the PDE through the exact 1-D W2 of the polar-angle marginal.
"""

import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.analysis.axisymmetric import w2_marginal
from meanfield.core.axisymmetric import sample_axisymmetric

D, N = 128, 500                                                  # quick sizes

# %%
# S^{127}
# -------
profile = lambda t: np.exp(np.sqrt(D) * (t - 1))
pde = mf.AxisymmetricPDE(mf.scalar_heads([1.0], d=D, beta=1.0), d=D, lmax=32)
b0 = pde.project_profile(profile)                                # f relative to the normalized measure
b0 = b0 / b0[0]                                                  # mass 1
sol = mf.solve_reduced(pde, b0, t_final=0.5)
print(sol.message, sol.observables["energy"][-1] > sol.observables["energy"][0])

# particles from the same density, compared through the polar-angle marginal (exact 1-D W2)
X0 = sample_axisymmetric(profile, N, D, seed=0)
print(w2_marginal(X0, lambda t: np.maximum(pde.evaluate(b0, t), 0)))   # ~ n^{-1/2} / sqrt(d)

# %%
# S^1 in Fourier modes
# --------------------
circ = mf.CirclePDE(mf.scalar_heads([1.0], d=2, beta=2.0), kmax=32)
c0 = circ.project(lambda th: np.exp(np.cos(th)))
csol = mf.solve_reduced(circ, c0 / c0[0].real, t_final=0.3)
print(csol.message, sorted(csol.observables))

# %%
# The figure: the density of t = <x, e> on S^127 at the start and the end, the PDE's energy on S^1
t = np.linspace(-0.3, 1.0, 400)
fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
axes[0].plot(t, pde.evaluate(b0, t), label="t = 0")
axes[0].plot(t, pde.evaluate(pde.coefficients(sol.y_final), t), label="t = 0.5")
axes[0].set_xlabel("t = <x, e>")
axes[0].set_title(f"S^{D - 1}: density relative to uniform")
axes[0].legend()
axes[1].plot(csol.t, csol.observables["energy"])
axes[1].set_xlabel("t")
axes[1].set_title("S^1: energy")
fig.tight_layout()
