r"""The map of the phase transition over (d, beta): ``meanfield equilibria --map MAP.toml --out DIR``.

For one zonal exp head of strength 1 on ``S^{d-1}`` (MODEL.md section 7), every cell of a grid of dimensions
``d`` and inverse temperatures ``beta`` (absolute, or as multiples of ``beta_*^(d)``, the Bessel root) is one
call of :func:`meanfield.analysis.phase_transition.phase_transition` (the type, ``nu_#``, ``nu_fold``,
``nu_global``, with its discretization check), run as an independent task on the resumable dask task runner
(``run_tasks``: a LocalCluster or an existing scheduler; a rerun skips finished cells, a failed cell is
recorded with its error and does not stop the others).  The cells are gathered into a NetCDF dataset and a
figure (type, and ``nu_fold / nu_#`` over the grid).

A map file (TOML)::

    [map]
    d = [2, 3, 4]
    beta_ratio = [0.5, 2.0]        # multiples of beta_*^(d); or beta = [...] (absolute), not both
    normalization = "mean"         # or "softmax", "sinkhorn"
    lmax = 32                      # optional: the first degree of the ladder (default: phase_transition's)
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import xarray as xr

from ..analysis.phase_transition import beta_star_bessel, phase_transition
from ..core import cost
from ..core.kernels import NORMALIZATIONS
from .jobs import JobFolder
from .schema import (
    ConfigError,
    Section,
    choice_check,
    config_field,
    integer_check,
    optional_check,
    read_toml_file,
    real_check,
    toml_table,
    unique_list,
)
from .tasks import run_tasks

__all__ = ["TransitionMapConfig", "load_map_config", "map_cell", "transition_map", "run_transition_map",
           "MAP_FILE", "MAP_FIGURE", "QUANTITIES", "CELL_SECONDS"]

MAP_FILE, MAP_FIGURE = "transition_map.nc", "transition_map.png"
QUANTITIES = ("nu_sharp", "nu_2", "nu_fold", "nu_global", "lmax", "discretization_change")


def _distinct(item):
    """The checker of a non-empty list of distinct values, each checked by ``item``."""
    return lambda path, v: unique_list(path, v, item)


@dataclass(frozen=True)
class TransitionMapConfig(Section):
    """The grid: ``d`` (integers >= 2), and ``beta`` (absolute) or ``beta_ratio`` (multiples of beta_*^(d)),
    ``normalization`` (mean, softmax or sinkhorn) and the ladder's first ``lmax`` (None: the default ladder).

    Parameters
    ----------
    d : sequence of int
        Distinct dimensions in ``[2, 4096]``.
    beta : sequence of float, optional
        Distinct positive inverse temperatures.
    beta_ratio : sequence of float, optional
        Distinct positive multiples of ``beta_*^(d)`` (exactly one of ``beta``, ``beta_ratio``).
    normalization : str
        A name of :data:`meanfield.core.kernels.NORMALIZATIONS`.
    lmax : int, optional
        First degree of the ladder, in ``[8, 512]``.

    Raises
    ------
    ConfigError
        Empty or repeated lists, values out of range, both or neither of ``beta`` and ``beta_ratio``, or an
        unknown normalization.
    """

    _path = "map"
    d: tuple = config_field(_distinct(integer_check(2, 4096)), (2, 3),
                            "dimensions d of R^d (states on S^(d-1)), distinct")
    beta: tuple | None = config_field(optional_check(_distinct(real_check(0, lo_open=True))), None,
                                      "inverse temperatures (absolute), distinct; or beta_ratio, not both")
    beta_ratio: tuple | None = config_field(optional_check(_distinct(real_check(0, lo_open=True))), (0.5, 2.0),
                                            "multiples of beta_*^(d), distinct; or beta, not both")
    normalization: str = config_field(choice_check(NORMALIZATIONS), "mean", f"one of {list(NORMALIZATIONS)}")
    lmax: int | None = config_field(optional_check(integer_check(8, 512)), None,
                                    "first degree of the ladder (omitted: the default)")

    def __post_init__(self):
        # the fields' own checks (those of from_dict, so that both ways of building one say the same), in order
        check = {f.name: f.metadata["check"] for f in fields(self)}
        object.__setattr__(self, "d", check["d"]("map.d", self.d))
        if (self.beta is None) == (self.beta_ratio is None):
            raise ConfigError(f"map needs exactly one of beta (absolute) or beta_ratio (multiples of beta_*^(d)); "
                              f"received beta = {self.beta!r}, beta_ratio = {self.beta_ratio!r}")
        for name in (self.axis, "normalization", "lmax"):
            object.__setattr__(self, name, check[name](f"map.{name}", getattr(self, name)))

    @classmethod
    def from_dict(cls, d, path=None):
        """The validated grid of a ``[map]`` table (``beta`` alone replaces the default ``beta_ratio``).

        Parameters
        ----------
        d : dict
            The table.
        path : str, optional
            Its key in messages (default ``"map"``).

        Returns
        -------
        TransitionMapConfig

        Raises
        ------
        ConfigError
            Not a table, an unknown key, or a value refused (named ``map.<key>``), both or neither of ``beta`` and
            ``beta_ratio``.
        """
        if isinstance(d, dict) and "beta" in d and "beta_ratio" not in d:
            d = {**d, "beta_ratio": None}
        return super().from_dict(d, path)

    def to_toml(self) -> str:
        """TOML text of the grid, the ``[map]`` table with each key's description (the inverse of
        :func:`load_map_config`).

        Returns
        -------
        str
        """
        return "\n".join(["# meanfield equilibria --map MAP.toml", *toml_table("map", self.to_dict(), type(self))]) \
            + "\n"

    @property
    def axis(self) -> str:
        return "beta" if self.beta is not None else "beta_ratio"

    def points(self) -> list[dict]:
        """One JSON dict per cell: ``d``, ``beta`` (absolute), and ``beta_ratio`` when the grid is relative.

        Returns
        -------
        list of dict
            In order of ``d``, then the ``beta`` axis.
        """
        out = []
        for d in self.d:
            for x in getattr(self, self.axis):
                if self.axis == "beta":
                    out.append({"d": d, "beta": x})
                else:
                    out.append({"d": d, "beta_ratio": x, "beta": x * beta_star_bessel(d)})
        return out

    def to_dict(self) -> dict:
        """The ``[map]`` table (lists, numbers, strings; unset values left out).

        Returns
        -------
        dict
        """
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in
                (("d", self.d), (self.axis, getattr(self, self.axis)), ("normalization", self.normalization),
                 ("lmax", self.lmax)) if v is not None}


def load_map_config(path) -> TransitionMapConfig:
    """Read ``[map]`` of a TOML file; unknown keys are refused by name.

    Parameters
    ----------
    path : str or path-like
        The map file.

    Returns
    -------
    TransitionMapConfig

    Raises
    ------
    ConfigError
        An unreadable file or invalid TOML, tables other than ``[map]``, an unknown key, or values
        :class:`TransitionMapConfig` refuses (the message starts with the file).
    """
    path = Path(path)
    data = read_toml_file(path, "map")
    if set(data) != {"map"} or not isinstance(data["map"], dict):
        raise ConfigError(f"{path}: a map file holds one table [map]; received the keys {sorted(data)}")
    try:
        return TransitionMapConfig.from_dict(data["map"], "map")
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None


CELL_SECONDS = 2.0
"""Seconds of one cell (:func:`map_cell`: :func:`~meanfield.analysis.phase_transition.phase_transition` over two
degrees of the ladder) in the map's cost estimate: measured 0.4 s (d = 64), 1.6 s (d = 3) and 3.6 s (d = 8) on
the shared 2-core machine at lmax 48 and 64."""


def map_cell(point: dict, normalization="mean", lmax=None) -> dict:
    """One cell: :func:`phase_transition` at ``point["d"]``, ``point["beta"]`` (what a map task runs).

    Parameters
    ----------
    point : dict
        ``d`` and ``beta``.
    normalization : str
        The head's normalization.
    lmax : int, optional
        First degree of the ladder.

    Returns
    -------
    dict
        The quantities of :data:`QUANTITIES` as floats and ``discontinuous`` (0 or 1).
    """
    r = phase_transition(point["d"], point["beta"], normalization, lmax)
    out = {k: float(getattr(r, k)) for k in QUANTITIES}
    out["discontinuous"] = int(r.transition == "discontinuous")
    return out


def transition_map(config: TransitionMapConfig, out_dir, *, scheduler=None, n_workers=2, progress=None,
                   client=None) -> xr.Dataset:
    """Run the cells not yet finished in ``out_dir`` (``out_dir/tasks/``, :func:`run_tasks`) and gather the map.

    Dimensions ``d`` and ``beta`` (or ``beta_ratio``, with ``beta`` then a (d, beta_ratio) variable); variables
    ``discontinuous`` (1 discontinuous, 0 continuous, -1 failed), ``nu_sharp``, ``nu_2``, ``nu_fold``,
    ``nu_global``, ``lmax``, ``discretization_change`` (NaN where a cell failed) and ``error`` (the failure's
    message, '' otherwise).

    Parameters
    ----------
    config : TransitionMapConfig
        The grid.
    out_dir : str or path-like
        The map's folder.
    scheduler, n_workers, progress, client
        As for :func:`~meanfield.workflow.tasks.run_tasks`.

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    ValueError
        ``config`` not a TransitionMapConfig, a map above the time limit, or what
        :func:`~meanfield.workflow.tasks.run_tasks` refuses.
    """
    if not isinstance(config, TransitionMapConfig):
        raise ValueError(f"config must be a TransitionMapConfig; received {type(config).__name__}")
    cells = len(config.d) * len(getattr(config, config.axis))
    workers = 1 if client is not None or scheduler is not None else max(1, int(n_workers))
    cost.guard(f"meanfield equilibria --map of {cells} cells ({len(config.d)} d x "
               f"{len(getattr(config, config.axis))} {config.axis})", seconds=cells * CELL_SECONDS / workers,
               detail=f"{CELL_SECONDS:g} s a cell over {workers} worker(s); finished cells are skipped when it runs",
               fix=f"fewer values of map.d or map.{config.axis} (or more --workers)")
    points = config.points()
    task = functools.partial(map_cell, normalization=config.normalization, lmax=config.lmax)
    rows = run_tasks(task, points, Path(out_dir) / "tasks", store="npz", scheduler=scheduler, n_workers=n_workers,
                     progress=progress, client=client, key_prefix="transition-map", desc="transition map (cells)",
                     inputs=points)
    shape = (len(config.d), len(getattr(config, config.axis)))
    data = {k: np.full(shape, np.nan) for k in QUANTITIES}
    kind, errors = np.full(shape, -1, np.int8), np.full(shape, "", object)
    beta = np.array([p["beta"] for p in points]).reshape(shape)
    for n, row in enumerate(rows):
        i, j = divmod(n, shape[1])
        if row["status"] == "done":
            with np.load(Path(out_dir).resolve() / "tasks" / row["path"], allow_pickle=False) as res:
                res = {k: res[k] for k in res.files}
            for k in QUANTITIES:
                data[k][i, j] = float(res[k])
            kind[i, j] = int(res["discontinuous"])
        else:
            errors[i, j] = row["error"] or row["status"]
    dims = ("d", config.axis)
    variables = {k: (dims, v) for k, v in data.items()}
    variables.update(discontinuous=(dims, kind), error=(dims, errors))
    coords = {"d": list(config.d), config.axis: list(getattr(config, config.axis))}
    if config.axis == "beta_ratio":
        variables["beta"] = (dims, beta)
        coords["beta_star"] = ("d", [beta_star_bessel(d) for d in config.d])
    from .._version import __version__
    from .results import SCHEMA_VERSION

    attrs = {"schema_version": SCHEMA_VERSION, "kind": "transition_map", "meanfield_version": __version__,
             "config": json.dumps(config.to_dict(), sort_keys=True), "normalization": config.normalization,
             "model": "one zonal exp head of strength 1 on S^(d-1) (meanfield.analysis.phase_transition)"}
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def run_transition_map(config_path, out_dir, *, scheduler=None, n_workers=2, progress=None, force=False) -> dict:
    """What ``meanfield equilibria --map`` does: the map of ``config_path`` into ``out_dir``
    (``transition_map.nc``, ``transition_map.png``; the cells' files in ``out_dir/tasks``, kept for reruns), the
    one shape of every job (:class:`~meanfield.workflow.jobs.JobFolder`: the folder locked while it writes, a finished
    map refused unless ``force``, stale temporaries removed, the dataset saved with provenance, the figure after it).

    Parameters
    ----------
    config_path : str or path-like
        The map file.
    out_dir : str or path-like
        The output folder.
    scheduler, n_workers, progress
        As for :func:`transition_map`.
    force : bool
        Replace a finished map.

    Returns
    -------
    dict
        ``dataset``, ``paths`` (the files written) and ``failures`` (one line per failed cell).

    Raises
    ------
    ResultExists
        A finished map in ``out_dir`` without ``force`` (:class:`meanfield.workflow.jobs.ResultExists`; finished
        cells are kept and reused with ``force``).
    FolderInUse
        Another process writes into ``out_dir``.
    ValueError
        What :func:`load_map_config` (ConfigError) or :func:`transition_map` refuses.
    """
    config = load_map_config(config_path)
    with JobFolder(out_dir, MAP_FILE, force=force, what="map", outputs=(MAP_FIGURE,)) as folder:
        ds = transition_map(config, folder.path, scheduler=scheduler, n_workers=n_workers, progress=progress)
        from .plotting import transition_map_figure

        folder.remove_previous()                     # the checks of transition_map passed
        folder.save(ds)
        folder.save_figure(transition_map_figure(ds), MAP_FIGURE, dpi=110)
    failed = [f"d = {int(d)}, {config.axis} = {x:g}: {ds['error'].values[i, j]}"
              for i, d in enumerate(ds["d"].values) for j, x in enumerate(ds[config.axis].values)
              if ds["discontinuous"].values[i, j] < 0]
    return {"dataset": ds, "paths": list(folder.paths), "failures": failed}
