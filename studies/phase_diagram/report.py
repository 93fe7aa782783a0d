"""Figure and report.md of the phase_diagram study (reads data.json written by run.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from meanfield.workflow.plotting import phase_diagram_figure
from studies._common import open_study_data, write_report


def report(data_dir: Path, out_dir: Path | None = None) -> Path:
    out, _, d = open_study_data(data_dir, out_dir)
    s, summ = d["settings"], d["summary"]
    betas, t = np.array(s["betas"]), np.array(d["t"])
    curve = np.array([np.nan if v is None else v for v in d["equiangular_time"]])
    ds = xr.Dataset({m: (("beta", "t"), np.array(v, dtype=float)) for m, v in d["measures"].items()},
                    coords={"beta": betas, "t": t})
    ds["equiangular_time"] = ("beta", curve)
    fig = phase_diagram_figure(ds)
    fig.suptitle(f"d = {s['d']}, n = {s['n']}, {s['batch']} starts per beta, post-LN dt = {s['dt']}, softmax, "
                 f"Q^T K = V = I")
    fig.savefig(out / "phase_diagram.png", dpi=110)
    th = np.array([np.nan if v is None else v for v in d["t_half_pair_density"]])
    ratio = summ["ratio_t_half_to_equiangular"]
    rho = float("nan") if summ["spearman_beta_t_half"] is None else summ["spearman_beta_t_half"]
    claims = [
        ("Peer's diagram: pairs cluster quickly at small beta; the clustered region recedes to later t as beta grows "
         "(metastability)",
         f"time for the pair density to reach 0.5, against beta: Spearman rho = {rho:.2f}; reached by t = "
         f"{s['t_final']:g} for {summ['n_betas_reaching_half']} of {len(betas)} betas; one-cluster fraction at "
         f"t = {s['t_final']:g}: {summ['one_cluster_final_small_beta']:.2f} (beta = {betas[0]:g}) vs "
         f"{summ['one_cluster_final_large_beta']:.2f} (beta = {betas[-1]:g})",
         "reproduced" if rho > 0.8 else "not reproduced (see figure)"),
        ("The equiangular clustering curve t*(beta) (reduced ODE, gamma 0 -> 0.999) traces the same trend",
         "t_half / t* over betas reaching 0.5: " + ("n/a" if ratio is None else
                                                    f"min {ratio[0]:.2f}, median {ratio[1]:.2f}, max {ratio[2]:.2f}"),
         "same trend, different constant (random starts are not equiangular, d = 2 is not the reduced ODE's "
         "symmetric state)" if ratio is not None else "n/a"),
    ]
    finite = np.isfinite(th)
    notes = (f"Run time {summ['seconds']:.0f} s for the whole diagram (one BatchedSystem call per beta). "
             f"Dashed: the equiangular curve; where it lies beyond t = {s['t_final']:g} it is not drawn. "
             f"t_half by beta: " + ", ".join(f"{b:.2f}: {v:.1f}" for b, v in zip(betas[finite], th[finite])))
    return write_report(out / "report.md", "Phase diagram of clustering (beta x t)", __import__(
        "studies.phase_diagram.run", fromlist=["run"]).__doc__.split("\n\n")[1], claims,
        [("phase_diagram.png", "pair density, one-cluster fraction, cluster count and Gram rank over (t, beta)")],
        notes)
