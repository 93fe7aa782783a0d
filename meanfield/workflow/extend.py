"""Continue a finished main-job run to a later time.

:func:`extend` takes a run dataset (:func:`meanfield.workflow.run.run`, or ``results.load("result.nc")``)
whose PDE and particles both reached its last time ``t1``, and continues both from their last
states -- the density ``rho_lm(t1)`` and the tokens ``X(t1)`` -- to ``t_final`` with the same
heads and settings; the dataset returned holds the old frames followed by the new ones (spaced as
the old, the last on ``t_final``), so that it reads as one run from 0 to ``t_final``.

The continuation starts a fresh integration at ``t1``: its steps are not those of one run from 0 to
``t_final``, so the numbers agree with such a run to the integrator's tolerance, not bit for bit.
The W2 series continues with the same settings.  With token noise the continuation draws its
Brownian increments from a seed drawn by ``default_rng([seed, 1, k])``, ``k`` the number of the
extension, so they are independent of the first leg's.

On the command line, ``meanfield run --extend DIR --t-final T`` writes the extended dataset into
``DIR`` as a *new* file ``<dataset stem>_to_<T>.nc`` (e.g. ``result_to_2.4.nc``): the finished
result is never replaced, and ``meanfield plot DIR/result_to_2.4.nc`` draws its figures.

>>> from meanfield.workflow import results
>>> ds2 = extend(results.load("meanfield-output/result.nc"), 2.4)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import xarray as xr

from ..core import cost, validate
from .inputs import parse_json
from .paired import paired_run
from .preflight import estimate_cost
from .results import config_of, density_coefficients
from .run import build_heads, paired_settings, run_dataset

__all__ = ["extend", "extended_name"]


def extended_name(dataset: str, t_final: float) -> str:
    """File name of the extension to ``t_final`` of the dataset file ``dataset`` (``result.nc`` -> ``result_to_2.4.nc``).

    Parameters
    ----------
    dataset : str or pathlib.Path
        The dataset file.
    t_final : float
        The extension's final time.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        ``dataset`` not a path with a name, or ``t_final`` not a finite number.
    """
    if not isinstance(dataset, (str, Path)) or not Path(dataset).stem:
        raise ValueError(f"dataset must be the path of a dataset file (str or Path); received {dataset!r}")
    t_final = validate.real("t_final", t_final)
    return f"{Path(dataset).stem}_to_{t_final:g}.nc"


def extend(ds: xr.Dataset, t_final, *, progress=None) -> xr.Dataset:
    """The run of ``ds`` continued from its last time to ``t_final`` (old frames, then the new ones).

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset whose PDE and particles both reached its last time (``pde_status`` and
        ``particle_status`` 0).
    t_final : float
        Greater than the last time of ``ds``.
    progress : bool or None
        Progress bars (None: only when stderr is a terminal).

    Returns
    -------
    xarray.Dataset
        The schema of :func:`meanfield.workflow.run.run_dataset` on the joined time axis; its config says
        ``integrator.t_final = t_final`` and ``n_frames`` the joined count, and the attribute
        ``extended_from`` lists the times each extension started from.

    The new frames are spaced as the old; a one-frame dataset (a run sliced to one time) has no spacing of its
    own and takes that of the run it came from (its config's ``t_final / (n_frames - 1)``).

    Raises
    ------
    ValueError
        ``ds`` is not a run dataset, its time axis (``ds["time"]``) is not a non-empty, finite, strictly
        increasing array, a run in it stopped early, or ``t_final`` is not after its last time.
    """
    if not isinstance(ds, xr.Dataset):
        raise ValueError(f"ds must be a run dataset (xarray.Dataset); received {type(ds).__name__}")
    config = config_of(ds)
    times = _time_axis(ds)
    t1 = float(times[-1])
    t_final = _after("t_final", t_final, t1)
    for side in ("pde", "particle"):
        if int(ds.attrs.get(f"{side}_status", -1)) != 0:
            raise ValueError(f"ds: only a run whose PDE and particles reached its last time t = {t1:g} can be "
                             f"extended; its {side} run ended with status {ds.attrs.get(f'{side}_status')!r} "
                             f"({ds.attrs.get(f'{side}_message', '')})")
    if progress is not None:
        validate.boolean("progress", progress)
    if times.size > 1:                             # the new frames are spaced as the old
        frame = (times[-1] - times[0]) / (times.size - 1)
    else:                                          # one frame has no spacing: that of the run it came from
        frame = config.integrator.t_final / (config.integrator.n_frames - 1)
    frames = (t_final - t1) / frame
    if not math.isfinite(frames):                  # t_final near the float limit: no count of frames to guard
        raise ValueError(f"t_final must be reachable in frames of the run's spacing {frame:g} from its last time "
                         f"t = {t1:g}; received {t_final!r}, (t_final - t) / {frame:g} overflows")
    k = max(1, math.ceil(frames - 1e-9))
    leg = replace(config, integrator=replace(config.integrator, t_final=t_final - t1, n_frames=k + 1))
    what = f"extend to t_final = {t_final:g} from t = {t1:g} ({k} new frames)"
    fix = "a t_final closer to the run's last time"
    joined = 2.0 * float(ds.nbytes) * (k + times.size) / max(times.size, 1)    # the new frames and the joined copy
    # the frames alone first: the preflight lays out the leg's (k + 1) frame times
    cost.guard(what, bytes=joined + 8.0 * (k + 1), detail="the joined dataset and the new frame times", fix=fix)
    est = estimate_cost(leg, pilot=False)    # the new leg from sizes (its start is not the config's: no pilot)
    cost.guard(what, bytes=est["memory_bytes"] + joined, seconds=est["seconds"],
               detail="preflight.estimate_cost of the new leg (sizes only), plus the joined dataset", fix=fix)
    t_new = np.linspace(0.0, t_final - t1, k + 1)
    previous = parse_json(ds.attrs.get("extended_from", "[]"), "the dataset's 'extended_from' attribute")
    settings = paired_settings(config)
    if config.pde.nu > 0:                          # fresh Brownian increments for this leg
        settings["seed"] = int(np.random.default_rng([config.seed, 1, len(previous) + 1]).integers(2**62))
    started = time.perf_counter()
    result = paired_run(build_heads(config), density_coefficients(ds, -1), config.particles.n, t_final - t1, t_new,
                        **settings, progress=progress, X0=ds["X"].values[-1])
    new = run_dataset(result, leg, elapsed_s=time.perf_counter() - started)
    new = new.assign_coords(time=new["time"].values + t1).isel(time=slice(1, None))
    for name in new.coords:                       # keep the old coordinates' attributes (CF)
        new[name].attrs = dict(ds[name].attrs)
    with_time = [v for v in ds.data_vars if "time" in ds[v].dims]
    joined = xr.concat([ds[with_time], new[with_time]], dim="time", combine_attrs="override")
    for v in ds.data_vars:
        if v not in with_time:
            joined[v] = ds[v]
    whole = replace(config, integrator=replace(config.integrator, t_final=t_final, n_frames=int(joined.sizes["time"])))
    attrs = dict(ds.attrs)
    attrs.update({k: v for k, v in new.attrs.items() if k.startswith(("pde_", "particle_", "elapsed"))})
    attrs.update(config=json.dumps(whole.to_dict(), sort_keys=True), extended_from=json.dumps(previous + [t1]))
    joined.attrs = attrs
    for v in joined.variables:
        joined[v].attrs = dict(ds[v].attrs)
        joined[v].encoding = {}                    # a loaded file's chunking and shapes do not apply
    return joined


def _time_axis(ds):
    """The time axis of ``ds`` as float64, refused by name unless non-empty, finite and strictly increasing."""
    if "time" not in ds.coords:
        raise ValueError(f"ds must be a run dataset with a time axis (coordinate 'time'); received a dataset with "
                         f"coordinates {sorted(map(str, ds.coords))}")
    try:
        times = np.asarray(ds["time"].values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"ds['time'] (the dataset's time axis) must hold real times; received dtype "
                         f"{ds['time'].dtype}") from None
    if times.ndim != 1 or times.size == 0 or not np.all(np.isfinite(times)) or np.any(np.diff(times) <= 0):
        raise ValueError(f"ds['time'] (the dataset's time axis) must be a non-empty, finite, strictly increasing "
                         f"1-d array of frame times; received {np.array2string(times, threshold=8)}")
    return times


def _after(name, x, t1):
    x = validate.real(name, x)
    if not x > t1:
        raise ValueError(f"{name} must be a number > {t1:g}, the last time of the run; received {x!r}")
    return x
