"""
A parameter sweep on dask
=========================

A sweep names a base config and the keys to vary (dotted, heads by index); ``run_sweep`` runs each point
(one main-job run: PDE + particles + W2) as a task on a dask ``LocalCluster`` (or an existing scheduler),
writes each point atomically to ``points/pNNNN.nc`` with an index, skips finished points when re-run, and
``load_sweep`` returns one Dataset with a dimension per swept key. The generic runner under it,
:func:`~meanfield.workflow.tasks.run_tasks`, farms any picklable function the same way.
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

from meanfield.workflow.sweep import SweepSpec, load_sweep, run_sweep
from meanfield.workflow.tasks import read_index

# quick sizes: lmax 13, 60 particles, t <= 0.6, 2 x 2 points on 2 worker processes
base = {"pde": {"lmax": 13}, "particles": {"n": 60},
        "integrator": {"t_final": 0.6, "n_frames": 4},
        "outputs": {"figures": False, "animation": False, "w2_method": "semidiscrete"}}
spec = SweepSpec(base=base, parameters={"heads[0].beta": [0.5, 2.0], "particles.n": [60, 120]}, mode="grid")
print(len(spec.points), spec.points[0])

# %%
# Run it (the guard: dask's worker processes may import this file; they must not start a sweep of their own)
if __name__ == "__main__":
    out = Path(tempfile.mkdtemp(prefix="meanfield-sweep-"))
    rows = run_sweep(spec, out / "sweep", n_workers=2, progress=False)
    print([r["status"] for r in rows])
    again = run_sweep(spec, out / "sweep", progress=False)         # everything finished: no cluster starts
    print(sorted(read_index(out / "sweep")))

    ds = load_sweep(out / "sweep")
    print(ds["w2"].dims, ds["w2"].sizes)

    # the figure: W2 between particles and PDE over time, at each point
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for n in ds["particles.n"].values:
        w2 = ds["w2"].sel({"particles.n": n}).transpose("time", "heads[0].beta")
        ax.plot(ds["time"], w2, "o-", label=[f"beta {b:g}, n {n}" for b in ds["heads[0].beta"].values])
    ax.set_xlabel("t")
    ax.set_ylabel("W2(particles, PDE)")
    ax.legend(fontsize=8)
    fig.tight_layout()
