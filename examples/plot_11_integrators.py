"""
The one integrator: schemes, options, dense output and events
=============================================================

Every solver runs on :func:`~meanfield.core.integrate.integrate` with the schemes of one method table
(:data:`~meanfield.core.methods.METHODS`): explicit Runge-Kutta tableaux, split schemes for
``y' = L y + N(t, y)`` with a diagonal ``L``, and the stochastic schemes. Settings come as three frozen
objects (``StepControl``, ``SaveAt``, ``Checkpointing``). Here: a convergence check of the orders,
located events on the dense output, and a checkpoint/resume that is bit-identical.
"""

import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.core.dense import Event
from meanfield.core.methods import capabilities, method_names

traj = mf.integrate(lambda t, y: -y, np.array([1.0]), (0.0, 1.0), method="rk4", step=mf.StepControl(dt=0.01))
print(sorted(mf.SCHEMES), abs(traj.y_final[0] - np.exp(-1.0)) < 1e-9)
print(method_names(split=True))
print(capabilities("etdrk4"))

# %%
# Measured orders: error at t = 1 against the step
# ------------------------------------------------
rhs = lambda t, y: np.array([y[1], -y[0]])                       # y = (cos t, -sin t)
dts = np.array([0.2, 0.1, 0.05, 0.025])
errors = {}
for method in ("euler", "heun", "rk4"):
    errors[method] = [abs(mf.integrate(rhs, np.array([1.0, 0.0]), (0.0, 1.0), method=method,
                                       step=mf.StepControl(dt=dt)).y_final[0] - np.cos(1.0)) for dt in dts]
    print(method, "slope", round(np.polyfit(np.log(dts), np.log(errors[method]), 1)[0], 2))

# %%
# Dense output and located events
# -------------------------------
r = mf.integrate(rhs, np.array([1.0, 0.0]), (0.0, 8.0), method="dopri5",
                 step=mf.StepControl(rtol=1e-10, atol=1e-12), save=mf.SaveAt(dense=True),
                 events=[Event(lambda t, y: y[0])])
print(r.t_events[0] / np.pi, r.dense(1.0)[0] - np.cos(1.0))     # [0.5 1.5 2.5], ~2e-9

# %%
# Checkpoints: a resumed run equals an uninterrupted one, bit for bit
# -------------------------------------------------------------------
system = mf.ParticleSystem(mf.scalar_heads([1.0], d=3, beta=1.0))
X0 = mf.initial.uniform_sphere(100, 3, seed=0)
saved = []
full = mf.integrate(system.rhs, X0, (0.0, 1.0), method="dopri5", retraction=system.retraction,
                    checkpointing=mf.Checkpointing(saved.append, every=0.5))
resumed = mf.integrate(system.rhs, X0, (0.0, 1.0), method="dopri5", retraction=system.retraction,
                       checkpointing=mf.Checkpointing(resume=saved[0]))
print(len(saved), np.array_equal(full.y_final, resumed.y_final))   # True

# %%
# The figure: error against step (slopes 1, 2, 4) and the located zeros of cos t
fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
for method, err in errors.items():
    axes[0].loglog(dts, err, "o-", label=method)
axes[0].set_xlabel("dt")
axes[0].set_ylabel("error at t = 1")
axes[0].legend()
ts = np.linspace(0, 8, 400)
axes[1].plot(ts, [r.dense(t)[0] for t in ts], label="dense output")
axes[1].plot(r.t_events[0], np.zeros_like(r.t_events[0]), "ro", label="events")
axes[1].set_xlabel("t")
axes[1].legend()
fig.tight_layout()
