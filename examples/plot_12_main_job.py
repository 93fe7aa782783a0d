"""
The main job in a script: config, run, results, figures, extension
==================================================================

What ``meanfield run`` does, step by step: a validated :class:`~meanfield.workflow.config.RunConfig`
(TOML in and out), :func:`~meanfield.workflow.run.run` (PDE + particles + W2 -> an xarray Dataset), the
NetCDF file with its config and provenance, the figures, and continuing a finished run to a later time.
"""

import tempfile
from pathlib import Path

import meanfield as mf
from meanfield.workflow import plotting, results, view
from meanfield.workflow.config import RunConfig
from meanfield.workflow.extend import extend
from meanfield.workflow.run import run, run_summary
from meanfield.workflow.schema import ConfigError

# %%
# Configs
# -------
cfg = RunConfig.from_dict({"pde": {"lmax": 15}, "particles": {"n": 200}})
print(cfg.pde.lmax, cfg.heads[0].beta)                           # 15 1.0 (others: defaults)
print(RunConfig.from_toml(cfg.to_toml()) == cfg)                 # True: TOML round trip
try:
    RunConfig.from_dict({"heads": [{"lam": 1.0}, {"beta": -2.0}]})
except ConfigError as err:
    print(err)          # heads[1].beta must be a finite number > 0; received -2.0

# %%
# A run, its file, its figures (quick sizes: lmax 15, 200 particles, t <= 0.5)
# ----------------------------------------------------------------------------
cfg = RunConfig.from_dict({"pde": {"lmax": 15}, "particles": {"n": 200},
                           "integrator": {"t_final": 0.5, "n_frames": 6}})
ds = run(cfg, progress=False)                                    # an xarray Dataset
print(run_summary(ds))
out = Path(tempfile.mkdtemp(prefix="meanfield-guide-"))
path = results.save(ds, out / "result.nc")                       # atomic NetCDF write
again = results.load(path)
print(results.config_of(again) == cfg)                           # True: the run can be repeated
print(sorted(again.data_vars)[:8], again.attrs["schema_version"])

# %%
# Continue the finished run to t = 0.7: old frames, then the new ones
longer = extend(again, float(again.time[-1]) + 0.2, progress=False)
print(longer.sizes["time"], longer.attrs["extended_from"])

# %%
# The figures of ``meanfield run``: energy and entropies, W2, the density maps
fig_energy = plotting.energy_curves(longer)
fig_w2 = plotting.w2_curve(longer)
fig_maps = plotting.density_maps(longer)

# %%
# The interactive page of ``meanfield view``: one self-contained HTML file (plotly.js embedded: it opens
# offline, no server), tokens and density on a sphere you can rotate, a time slider and the curves
page = view.write_view(path)                                     # -> result.html beside the dataset
print(page.name, f"{page.stat().st_size / 1e6:.1f} MB")

# %%
# Bad input is refused by name before anything is computed (issue 26's contract, enforced over the whole
# public API by tests/test_hostile_api.py)
try:
    mf.scalar_heads([1.0], 3, beta=float("nan"))
except ValueError as err:
    print(err)          # beta must be a positive finite number; received nan
