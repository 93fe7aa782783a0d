"""
A first particle run
====================

Two scalar heads on S^2, 200 tokens from the uniform distribution, integrated to ``t = 2`` with the
default error-controlled scheme. The default observer records the energy (non-decreasing for these
heads), the attention entropies and the clustering measures at every output time.
"""

import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.analysis.clustering import clustering

N, T_FINAL = 200, 2.0                                            # quick sizes

# %%
# Heads, tokens, the system
# -------------------------
# ``scalar_heads`` gives ``M_h = V_h = lambda_h I``; a general :class:`~meanfield.core.heads.Head` takes any
# matrices, a kernel (``"exp"``, ``"relu"``, ``"sigmoid"``) and a normalization. A bad value raises a
# ``ValueError`` naming the argument.
heads = mf.scalar_heads([1.0, 0.5], d=3, beta=1.0)
h = mf.Head(M=np.diag([1.0, 1.0, 0.0]), V=np.eye(3), beta=1.0, kernel="relu", normalization="softmax")
print(heads[0].is_zonal, h.is_zonal, h.to_dict()["kernel"])     # True False relu

X0 = mf.initial.uniform_sphere(N, 3, seed=0)                     # (N, 3) unit vectors
Y = mf.initial.von_mises_fisher(100, [0.0, 0.0, 1.0], kappa=5.0, seed=1)
print(X0.shape, abs((Y ** 2).sum(axis=1) - 1).max() < 1e-12)

system = mf.ParticleSystem(heads)
print(mf.diagnostics.dissipation(system, X0) > 0)
print(mf.diagnostics.attention_entropy(system, X0, relative=True).shape)   # (heads, n)

# %%
# Integrate
# ---------
# ``traj`` is a :class:`~meanfield.core.integrate.Trajectory`: ``t``, ``y`` (the states), ``observables``,
# ``status``, ``message``, ``nfev``.
traj = mf.solve_particles(system, X0, t_final=T_FINAL, progress=False)
E = traj.observables["energy"]
print(traj.message, bool(np.all(np.diff(E) >= -1e-12)))         # energy is non-decreasing
print(sorted(traj.observables))
print("clusters at the end:", clustering(traj.y_final, threshold=0.99)["n_clusters"])

# %%
# Other kernels: sigmoid attention with its bias
# ----------------------------------------------
# Kernels and normalizations are registries (:data:`~meanfield.core.kernels.KERNELS`); zonal heads on S^2
# with n >= 2000 sum spectrally.
from meanfield.core.kernels import KERNELS

sig = mf.scalar_heads([1.0, -0.5], d=3, beta=3.0, kernel="sigmoid", kernel_params={"bias": -1.0})
print(sorted(KERNELS), dict(sig[0].kernel_params))               # ['exp', 'relu', 'sigmoid'] {'bias': -1.0}
X = mf.initial.uniform_sphere(3000, 3, seed=0)
sig_system = mf.ParticleSystem(sig)
print(sig_system.uses_spectral(3000), mf.diagnostics.dissipation(sig_system, X) > 0)   # True True

# %%
# Large n: spectral sums
# ----------------------
# For zonal exp heads on S^2 the sums over tokens are evaluated spectrally (Funk-Hecke multipliers) in
# O(n + lmax^2 log lmax), ``lmax`` chosen from the requested accuracy; ``summation="auto"`` does this from
# n = 2000. Against the pairwise sums at n = 3000, then one velocity at n = 100 000 (direct: minutes).
fast = mf.ParticleSystem(mf.scalar_heads([1.0, 0.5], 3, beta=5.0), summation="spectral", kernel_tol=1e-10)
slow = mf.ParticleSystem(mf.scalar_heads([1.0, 0.5], 3, beta=5.0), summation="direct")
print(fast.spectral_lmax, np.abs(fast.velocity(X) - slow.velocity(X)).max())     # ~1e-10
v = fast.velocity(mf.initial.uniform_sphere(100_000, 3, seed=0))
print(v.shape)

# %%
# The figure: energy and entropy against time, the tokens at the start and the end
fig = plt.figure(figsize=(10, 3.4))
ax = fig.add_subplot(1, 3, 1)
ax.plot(traj.t, E, label="energy")
ax.set_xlabel("t")
ax.set_title("energy (non-decreasing)")
ax = fig.add_subplot(1, 3, 2)
ax.plot(traj.t, traj.observables["entropy"])
ax.set_xlabel("t")
ax.set_title("attention entropy per head")
ax = fig.add_subplot(1, 3, 3, projection="3d")
ax.scatter(*X0.T, s=4, alpha=0.3, label="t = 0")
ax.scatter(*traj.y_final.T, s=8, color="C3", label=f"t = {T_FINAL:g}")
ax.set_title("tokens")
ax.legend(loc="lower left")
fig.tight_layout()
