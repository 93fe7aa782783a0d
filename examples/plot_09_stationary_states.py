"""
Stationary states and a bifurcation diagram
===========================================

With noise the flow has stationary states ``rho = exp(Phi[rho] / nu) / Z`` (MODEL.md section 7). On the
axisymmetric PDE (any d) :mod:`meanfield.analysis.equilibria` solves them by Newton,
:mod:`meanfield.analysis.phase_transition` classifies the degree-1 transition (``nu_#``, ``nu_fold``, the
Maxwell point ``nu_global``), :mod:`meanfield.analysis.continuation` follows branches by pseudo-arclength,
and :mod:`meanfield.workflow.equilibria_job` (``meanfield equilibria``) assembles the bifurcation diagram.
"""

import numpy as np

from meanfield.analysis import continuation as ct
from meanfield.analysis import equilibria as eq
from meanfield.analysis import phase_transition as pt
from meanfield.workflow.equilibria_job import equilibria, equilibria_summary
from meanfield.workflow.plotting import bifurcation_figure

# %%
# The transition on S^2 at twice the critical beta
# ------------------------------------------------
print(pt.beta_star_bessel(3), pt.beta_star_continuation(3))      # 1.816154525..., the same to 1e-10
pde = pt.phase_transition_model(3, 2 * pt.beta_star_bessel(3), lmax=32)
out = pt.classify_transition(pde)                                  # discontinuous: nu_# < nu_global < nu_fold
print(out)                                                         # Transition(discontinuous, nu_sharp=..., ...)

# %%
# One stationary state, its spectrum, and the uniform branch's branch points
s = eq.degree_one_state(pde, 1.5)                                  # a clustered state on the upper branch
print(s.message, s.nu, eq.linear_spectrum(pde, s)[:2])             # at the state's nu; stable: leading < 0
F, J = eq.noise_problem(pde)                                       # the uniform branch and its branch points
br = ct.continue_branch(F, J, np.zeros(pde.lmax), 1.5, ds=0.05, ds_max=0.05, p_range=(0.5, 1.5), direction=-1)
print([(p.kind, round(p.p, 8)) for p in br.branch_points])         # nu_l = m_l / beta

# %%
# The bifurcation diagram of the built-in configuration (``meanfield equilibria`` without a config file:
# one mean exp head at ``beta = 2 beta_*^(3)`` on S^2, the degree-1 branch through its fold)
ds = equilibria(progress=False)
print(equilibria_summary(ds))
fig = bifurcation_figure(ds)
