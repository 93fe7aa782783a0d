r"""Phase diagrams over beta x t: ``meanfield phase-diagram CONFIG.toml`` and :func:`phase_diagram`.

For every ``beta`` of the grid, ``batch`` systems of ``n`` random tokens on S^{d-1} (the same seeded
starts for every beta) are iterated by a step rule of :mod:`meanfield.models.step_rules` (post-LN by
default, the peer's update) with one :class:`~meanfield.models.batched.BatchedSystem` call per cell;
every ``record_every`` layers the batch measures of :mod:`meanfield.analysis.ensembles` are recorded:

* ``one_cluster``      fraction of systems whose pairs all have ``<x_i, x_j> > pair_threshold``,
* ``pair_density``     fraction of pairs ``i != j`` above ``pair_threshold`` (mean over systems),
* ``median_clusters``  median rank of ``[<x_i, x_j> > cluster_threshold]``,
* ``mean_gram_rank``   mean number of Gram eigenvalues above ``rank_tol`` (the dimension spanned).

Heads: one head per system, ``M = V = I`` (``score = value = "identity"``, the peer's default) or
random weights (:func:`meanfield.core.random_heads.random_heads`, drawn once with ``seed + 1`` and shared
by every beta; ``per_system`` draws one per system).  The dataset also carries the equiangular
clustering curve of :func:`meanfield.analysis.theory.clustering_time` (scalar softmax/mean exp heads):
the time for the reduced ODE to carry ``gamma`` from 0 to ``pair_threshold``, drawn over the colour maps.

Cells are independent tasks of the package's one task runner
(:func:`meanfield.workflow.tasks.compute_tasks`): ``scheduler`` (a local dask scheduler of
:data:`meanfield.workflow.tasks.EXECUTORS`: ``"threads"``, ``"processes"``, ``"synchronous"``) runs them as dask
tasks, for large grids; None runs them in a loop with a progress bar.  The same cells give the same numbers, bit for
bit, whatever runs them.

A config file holds a table ``[phase_diagram]`` (or the keys at the top level) of :class:`PhaseDiagramConfig`'s
fields, read through the one config schema (:mod:`meanfield.workflow.schema`: unknown keys, wrong types and values
out of range are refused by name, ``phase_diagram.<key>``); ``beta_range = [beta_min, beta_max, count]`` may stand
for ``betas``::

    [phase_diagram]
    beta_range = [0.5, 9.0, 18]
    n = 32
    batch = 256
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import xarray as xr

from ..analysis import ensembles, theory
from ..core import cost, validate
from ..core.heads import scalar_heads
from ..core.kernels import NORMALIZATIONS
from ..core.random_heads import SCORE_ENSEMBLES, VALUE_ENSEMBLES, random_heads
from ..models.batched import BatchedSystem
from ..models.step_rules import ITERATE_BYTES_PER_RECORD, STEP_RULES, estimate_iterate, iterate
from . import results
from .jobs import JobFolder
from .schema import (
    ConfigError,
    Section,
    boolean_check,
    check_keys,
    choice_check,
    config_field,
    integer_check,
    read_toml_file,
    real_check,
    real_list_check,
    toml_table,
)
from .tasks import EXECUTORS, compute_tasks

__all__ = ["PhaseDiagramConfig", "load_phase_config", "phase_diagram", "equiangular_curve", "MEASURES",
           "run_phase_diagram"]


def __getattr__(name):
    """Module attribute fallback: ``PHASE_SCHEDULERS`` (until 0.3) raises an ``AttributeError`` naming its
    replacement, :data:`meanfield.workflow.tasks.EXECUTORS` (one home for the local dask schedulers).

    Parameters
    ----------
    name : str
        The attribute looked up.

    Raises
    ------
    AttributeError
        Always (this is called only for names the module does not define).
    """
    if name == "PHASE_SCHEDULERS":
        raise AttributeError("meanfield.workflow.phase_diagram.PHASE_SCHEDULERS moved to "
                             "meanfield.workflow.tasks.EXECUTORS (the local dask schedulers of every task runner)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

MEASURES = ("one_cluster", "pair_density", "median_clusters", "mean_gram_rank")


def _as_given(check):
    """``check`` run for its refusal only: the value kept as given (an integer threshold stays an integer, as it was
    before the schema, so that the dataset's ``config`` attribute is unchanged)."""
    def checked(path, v):
        check(path, v)
        return v
    return checked


_positive = real_check(0, lo_open=True, what="a positive finite number")   # the words of validate.real(positive=True)


@dataclass(frozen=True)
class PhaseDiagramConfig(Section):
    """Settings of a phase diagram (the TOML table ``[phase_diagram]``; defaults: the peer's cell).

    ``betas`` is a list of values, or ``[beta_min, beta_max, count]`` given as ``beta_range``.

    Parameters
    ----------
    betas : sequence of float
        Positive inverse temperatures (default 12 values from 0.1 to 9).
    t_final : float
        Final time, ``> 0``, a whole number of steps ``dt``.
    dt : float
        Layer step, ``> 0``.
    record_every : int
        Record every this many layers, ``>= 1``.
    n : int
        Tokens per system, ``>= 2``.
    d : int
        Dimension, ``>= 2``.
    batch : int
        Systems per cell, ``>= 1``.
    rule : str
        One of :data:`meanfield.models.step_rules.STEP_RULES`.
    score, value : str
        Ensembles of :mod:`meanfield.core.random_heads` (``"identity"`` both: one scalar head).
    per_system : bool
        Independent heads per system.
    normalization : str
        A name of :data:`meanfield.core.kernels.NORMALIZATIONS`.
    causal : bool
        Causal masks.
    seed : int
        ``>= 0``.
    pair_threshold, cluster_threshold : float
        In ``[-1, 1]`` (:mod:`meanfield.analysis.ensembles`).
    rank_tol : float
        ``> 0``.

    Raises
    ------
    ValueError
        Any field out of its range above, ``t_final`` not a whole number of steps, or sizes above the memory
        limit.
    """

    _path = "phase_diagram"
    betas: tuple = config_field(real_list_check(0, lo_open=True), doc="positive inverse temperatures (or beta_range)",
                                default_factory=lambda: tuple(np.round(np.linspace(0.1, 9.0, 12), 10)))
    t_final: float = config_field(_positive, 30.0, "final time, a whole number of steps dt")
    dt: float = config_field(_positive, 0.1, "layer step")
    record_every: int = config_field(integer_check(1), 10, "record every this many layers")
    n: int = config_field(integer_check(2), 32, "tokens per system")
    d: int = config_field(integer_check(2), 2, "dimension")
    batch: int = config_field(integer_check(1), 256, "systems per cell")
    rule: str = config_field(choice_check(STEP_RULES), "post_ln", f"step rule, one of {list(STEP_RULES)}")
    score: str = config_field(choice_check(SCORE_ENSEMBLES), "identity",
                              f"score ensemble, one of {list(SCORE_ENSEMBLES)}")
    value: str = config_field(choice_check(VALUE_ENSEMBLES), "identity",
                              f"value ensemble, one of {list(VALUE_ENSEMBLES)}")
    per_system: bool = config_field(boolean_check, False, "independent heads per system")
    normalization: str = config_field(choice_check(NORMALIZATIONS), "softmax", f"one of {list(NORMALIZATIONS)}")
    causal: bool = config_field(boolean_check, False, "causal masks")
    seed: int = config_field(integer_check(0), 0, "seed of the starts (heads: seed + 1)")
    pair_threshold: float = config_field(_as_given(real_check(-1, 1)), ensembles.PAIR_THRESHOLD,
                                         "pairs with <x_i, x_j> above this are clustered")
    cluster_threshold: float = config_field(_as_given(real_check(-1, 1)), ensembles.CLUSTER_THRESHOLD,
                                            "threshold of the cluster count (Gram rank)")
    rank_tol: float = config_field(_as_given(real_check(0, lo_open=True)), ensembles.RANK_TOL,
                                   "Gram eigenvalues above this count in the rank")

    def __post_init__(self):
        betas = validate.real_array("betas", self.betas, (None,))
        if betas.size == 0 or np.any(betas <= 0):
            raise ValueError(f"betas must be a non-empty list of positive numbers; received {list(self.betas)!r}")
        object.__setattr__(self, "betas", tuple(float(b) for b in betas))
        object.__setattr__(self, "t_final", validate.real("t_final", self.t_final, positive=True))
        object.__setattr__(self, "dt", validate.real("dt", self.dt, positive=True))
        steps = self.t_final / self.dt
        if abs(steps - round(steps)) > 1e-9 * steps:
            raise ValueError(f"t_final must be a whole number of steps dt = {self.dt}; received t_final = "
                             f"{self.t_final} ({steps:.6g} steps)")
        validate.integer("record_every", self.record_every, 1)
        validate.integer("n", self.n, 2)
        validate.integer("d", self.d, 2)
        validate.integer("batch", self.batch, 1)
        validate.choice("rule", self.rule, STEP_RULES)
        validate.choice("score", self.score, SCORE_ENSEMBLES)
        validate.choice("value", self.value, VALUE_ENSEMBLES)
        validate.boolean("per_system", self.per_system)
        validate.choice("normalization", self.normalization, NORMALIZATIONS)
        validate.boolean("causal", self.causal)
        validate.integer("seed", self.seed, 0)
        validate.real("pair_threshold", self.pair_threshold, -1, 1)
        validate.real("cluster_threshold", self.cluster_threshold, -1, 1)
        validate.real("rank_tol", self.rank_tol, 0, lo_open=True)
        # the memory of the sizes alone, before any head or token exists (the time is phase_diagram's guard)
        records = self.n_steps // self.record_every + 2
        mem = (32.0 * self.batch * float(self.n) ** 2 + 32.0 * self.batch * self.n * self.d
               + records * (8.0 * len(self.betas) * len(MEASURES) + ITERATE_BYTES_PER_RECORD))
        cost.guard(f"PhaseDiagramConfig(batch={self.batch}, n={self.n}, d={self.d}, t_final={self.t_final:g}, "
                   f"dt={self.dt:g}, record_every={self.record_every})", bytes=mem,
                   detail=f"(batch, n, n) score blocks and {records} records of {len(self.betas)} betas",
                   fix="a smaller batch or n, a larger dt or record_every, or a shorter t_final")

    @classmethod
    def from_dict(cls, d, path=None):
        """The validated settings of a ``[phase_diagram]`` table (missing keys take the defaults).

        Parameters
        ----------
        d : dict
            The table; ``beta_range = [beta_min, beta_max, count]`` may stand for ``betas``
            (``numpy.linspace(beta_min, beta_max, count)``).
        path : str, optional
            Its key in messages (default ``"phase_diagram"``).

        Returns
        -------
        PhaseDiagramConfig

        Raises
        ------
        ConfigError
            Not a table, an unknown key, a value refused by its field's check (named ``phase_diagram.<key>``), or both
            ``betas`` and ``beta_range`` or a bad ``beta_range``.
        ValueError
            What the constructor refuses across fields (``t_final`` not a whole number of steps, sizes above the
            memory limit).
        """
        path = path or cls._path
        check_keys(d, [*cls.__dataclass_fields__, "beta_range"], path)
        if "beta_range" in d:
            if "betas" in d:
                raise ConfigError(f"{path} takes one of betas (a list) and beta_range ([beta_min, beta_max, count]); "
                                  f"received both: betas = {d['betas']!r}, beta_range = {d['beta_range']!r}")
            d = dict(d)
            r = d.pop("beta_range")
            if not isinstance(r, (list, tuple)) or len(r) != 3:
                raise ConfigError(f"{path}.beta_range must be a list [beta_min, beta_max, count]; received {r!r}")
            lo = _positive(f"{path}.beta_range[0]", r[0])
            hi = real_check(lo, what=f"a finite number >= beta_range[0] = {lo:g}")(f"{path}.beta_range[1]", r[1])
            d["betas"] = tuple(np.linspace(lo, hi, integer_check(1)(f"{path}.beta_range[2]", r[2])))
        return super().from_dict(d, path)

    def to_toml(self) -> str:
        """TOML text of the settings: the ``[phase_diagram]`` table, each key with its description (the inverse of
        :func:`load_phase_config`).

        Returns
        -------
        str
        """
        lines = ["# meanfield phase-diagram CONFIG.toml", *toml_table(self._path, self.to_dict(), type(self))]
        return "\n".join(lines) + "\n"

    @property
    def n_steps(self) -> int:
        return int(round(self.t_final / self.dt))

    @property
    def times(self) -> np.ndarray:
        k = np.unique(np.append(np.arange(0, self.n_steps + 1, self.record_every), self.n_steps))
        return k * self.dt

    def heads(self, beta):
        """The heads of the cell at ``beta`` (a tuple, or one tuple per system).

        Parameters
        ----------
        beta : float
            The inverse temperature.

        Returns
        -------
        tuple of Head, or list of tuples of Head
        """
        if self.score == "identity" and self.value == "identity":
            return scalar_heads([1.0], self.d, beta=beta, normalization=self.normalization)
        return random_heads(self.d, 1, score=self.score, value=self.value, seed=self.seed + 1, beta=beta,
                            normalization=self.normalization, systems=self.batch if self.per_system else None)

    def starts(self):
        """The start tokens of every cell: ``batch`` systems of ``n`` uniform tokens from ``seed``.

        Returns
        -------
        ndarray, shape (batch, n, d)
        """
        X = np.random.default_rng(self.seed).standard_normal((self.batch, self.n, self.d))
        return X / np.linalg.norm(X, axis=-1, keepdims=True)


def load_phase_config(path) -> PhaseDiagramConfig:
    """Read ``[phase_diagram]`` (or the top level) of a TOML file through the config schema
    (:meth:`PhaseDiagramConfig.from_dict`); unknown keys, wrong types and values out of range are refused by name.

    Parameters
    ----------
    path : str or path-like
        The TOML file.

    Returns
    -------
    PhaseDiagramConfig

    Raises
    ------
    ConfigError
        A missing or unreadable file, invalid TOML, a table that is not one, both ``betas`` and ``beta_range`` or a
        bad ``beta_range``, an unknown key or a refused value (the message starts with the file).
    ValueError
        What :class:`PhaseDiagramConfig` refuses across fields (``t_final`` not a whole number of steps, sizes
        above the memory limit).
    """
    data = read_toml_file(path, "phase-diagram config")
    try:
        return PhaseDiagramConfig.from_dict(data.get("phase_diagram", data), "phase_diagram")
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None


def _cell(config, beta):
    system = BatchedSystem(config.heads(beta), causal=config.causal)
    observe = ensembles.ensemble_observer(config.pair_threshold, config.cluster_threshold, config.rank_tol)
    tr = iterate(system, config.starts(), config.dt, config.n_steps, config.rule, observe=observe,
                 every=config.record_every, save_states=False)
    return {m: tr.observables[m] for m in MEASURES}


def equiangular_curve(config):
    """Equiangular clustering time from ``gamma = 0`` to ``pair_threshold`` per beta (NaN where the
    closed form does not apply: random heads).

    Parameters
    ----------
    config : PhaseDiagramConfig
        The diagram.

    Returns
    -------
    ndarray, shape (len(betas),)

    Raises
    ------
    ValueError
        ``config`` not a PhaseDiagramConfig.
    """
    if not isinstance(config, PhaseDiagramConfig):
        raise ValueError(f"config must be a PhaseDiagramConfig; received {type(config).__name__}")
    if config.score != "identity" or config.value != "identity":
        return np.full(len(config.betas), np.nan)
    return np.array([theory.clustering_time(0.0, config.pair_threshold, [1.0], b, config.n,
                                            normalization=config.normalization) for b in config.betas])


PHASE_OBSERVER_SECONDS = 2e-8
"""Seconds per ``batch x n^3`` of one record of the batch measures (Gram ranks; measured 0.9e-8 at n = 32 and
6e-8 at n = 64, batch 64 and 256)."""
PHASE_CELL_SECONDS = 0.1
"""Seconds per beta beside the layers and records (the equiangular curve's ODE: measured 0.06 s)."""


def estimate_phase_diagram(config) -> cost.Cost:
    """Estimated peak memory and time of :func:`phase_diagram` (sizes only): every cell is one
    :func:`~meanfield.models.step_rules.iterate` without states (:func:`~meanfield.models.step_rules.estimate_iterate`
    of the first beta's system), run once per beta; memory is one cell's (cells in a loop) plus the dataset."""
    system = BatchedSystem(config.heads(config.betas[0]), causal=config.causal)
    B, n = config.batch, config.n
    cell = estimate_iterate(system, (B, n, config.d), config.n_steps, config.record_every, False)
    k, records = len(config.betas), config.n_steps // config.record_every + 2
    data = 8.0 * k * len(MEASURES) * records
    observe = records * B * float(n) ** 3 * PHASE_OBSERVER_SECONDS       # the batch measures of each record
    return cost.Cost(f"phase_diagram of {k} betas x {config.n_steps} layers of {B} systems of "
                     f"{n} tokens in d = {config.d}", cell.bytes + data + 32.0 * B * n * n,
                     k * (cell.seconds + observe + PHASE_CELL_SECONDS),
                     f"{k} cells of {cost.time_text(cell.seconds + observe + PHASE_CELL_SECONDS)} each: "
                     f"{cost.time_text(cell.seconds)} of layers, {records} records")


def phase_diagram(config=None, *, scheduler=None, progress=None) -> xr.Dataset:
    """Run the phase diagram of ``config`` (default :class:`PhaseDiagramConfig`); returns a Dataset
    with the :data:`MEASURES` on dims ``(beta, t)`` and ``equiangular_time`` on ``beta``.

    Parameters
    ----------
    config : PhaseDiagramConfig, optional
        The diagram.
    scheduler : str, optional
        A local dask scheduler of :data:`meanfield.workflow.tasks.EXECUTORS` (None: a loop here, with a progress
        bar); the cells run through :func:`~meanfield.workflow.tasks.compute_tasks` either way.
    progress : bool, optional
        Progress bar (None: only on a terminal).

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    ValueError
        ``config`` not a PhaseDiagramConfig, an unknown ``scheduler``, a non-boolean ``progress``, or a diagram
        above the memory or time limit.
    """
    config = PhaseDiagramConfig() if config is None else config
    if not isinstance(config, PhaseDiagramConfig):
        raise ValueError(f"config must be a PhaseDiagramConfig; received {type(config).__name__}")
    if scheduler is not None:
        validate.choice("scheduler", scheduler, EXECUTORS)
    if progress is not None:
        validate.boolean("progress", progress)
    estimate_phase_diagram(config).check("fewer betas, a smaller batch or n, a larger dt or a shorter t_final")
    started = time.perf_counter()
    cells = compute_tasks(functools.partial(_cell, config), config.betas, executor=scheduler, progress=progress,
                          desc="phase diagram (beta)")
    data = {m: (("beta", "t"), np.stack([c[m] for c in cells])) for m in MEASURES}
    data["equiangular_time"] = (("beta",), equiangular_curve(config))
    attrs = {"schema_version": results.SCHEMA_VERSION, "kind": "phase_diagram",
             "config": repr(asdict(config)), "seconds": time.perf_counter() - started}
    return xr.Dataset(data, coords={"beta": list(config.betas), "t": config.times}, attrs=attrs)


def run_phase_diagram(config_path, out_dir, *, scheduler=None, progress=None, force=False) -> list[Path]:
    """What ``meanfield phase-diagram`` does: run, save ``phase_diagram.nc`` (with provenance) and
    ``phase_diagram.png`` into ``out_dir``, the one shape of every job (:class:`~meanfield.workflow.jobs.JobFolder`:
    the folder locked while it writes, a finished diagram refused unless ``force``, stale temporaries removed).

    Parameters
    ----------
    config_path : str or path-like
        The TOML file.
    out_dir : str or path-like
        The output folder (made if missing).
    scheduler, progress
        As for :func:`phase_diagram`.
    force : bool
        Replace a finished diagram (and its figure).

    Returns
    -------
    list of pathlib.Path
        The two files.

    Raises
    ------
    ResultExists
        A finished diagram in ``out_dir`` without ``force`` (:class:`meanfield.workflow.jobs.ResultExists`).
    FolderInUse
        Another process writes into ``out_dir``.
    ValueError
        What :func:`load_phase_config` and :func:`phase_diagram` refuse, an empty ``out_dir`` or a non-boolean
        ``force``.
    """
    from .plotting import phase_diagram_figure

    config = load_phase_config(config_path)
    with JobFolder(out_dir, "phase_diagram.nc", force=force, what="phase diagram",
                   outputs=("phase_diagram.png",)) as folder:
        print(f"meanfield phase-diagram: {len(config.betas)} betas x {len(config.times)} times, "
              f"{config.batch} systems of {config.n} tokens -> {folder.path}/", file=sys.stderr)
        ds = phase_diagram(config, scheduler=scheduler, progress=progress)
        folder.remove_previous()                     # the checks of phase_diagram passed
        folder.save(ds)
        folder.save_figure(phase_diagram_figure(ds, config.pair_threshold, config.cluster_threshold),
                           "phase_diagram.png", dpi=110)
    return list(folder.paths)
