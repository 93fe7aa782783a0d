"""
A beta x t phase diagram of clustering
======================================

Many small systems at once (:class:`~meanfield.models.batched.BatchedSystem`, one ``(B, n, d)`` array),
iterated with the transformer's own update rule (post-LN), and the fraction of runs in one cluster over
``(beta, t)`` (:mod:`meanfield.workflow.phase_diagram`; the study ``studies/phase_diagram`` runs 256 starts x
45 betas).
"""

import numpy as np

import meanfield as mf
from meanfield.analysis.ensembles import ensemble_observer
from meanfield.models.batched import BatchedSystem
from meanfield.models.step_rules import iterate
from meanfield.workflow.phase_diagram import PhaseDiagramConfig, phase_diagram
from meanfield.workflow.plotting import phase_diagram_figure

# %%
# One ensemble, one beta
# ----------------------
X0 = np.random.default_rng(0).standard_normal((256, 32, 2))
X0 /= np.linalg.norm(X0, axis=-1, keepdims=True)
system = BatchedSystem(mf.scalar_heads([1.0], 2, beta=4.0, normalization="softmax"))
traj = iterate(system, X0, 0.1, 300, "post_ln", observe=ensemble_observer(), every=50)
print(traj.observables["one_cluster"])        # fraction of the 256 runs in one cluster, every 5 time units

# %%
# The diagram (quick sizes: 64 systems of 16 tokens, 8 betas, t <= 15)
# ---------------------------------------------------------------------
config = PhaseDiagramConfig(betas=tuple(np.linspace(0.5, 8.0, 8)), t_final=15.0, n=16, batch=64, seed=0)
ds = phase_diagram(config, progress=False)
print(ds["one_cluster"].sizes, float(ds.attrs["seconds"]))
fig = phase_diagram_figure(ds)
