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

Cells are independent: ``scheduler`` (``"threads"``, ``"processes"``, ``"synchronous"``) runs them as
dask tasks (``dask.compute``), for large grids; None runs them in a loop with a progress bar.
"""

from __future__ import annotations

import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
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

__all__ = ["PhaseDiagramConfig", "load_phase_config", "phase_diagram", "equiangular_curve", "PHASE_SCHEDULERS",
           "MEASURES", "run_phase_diagram"]

PHASE_SCHEDULERS = ("threads", "processes", "synchronous")
"""``phase_diagram(scheduler=...)``: dask schedulers for the cells (None: a plain loop)."""

MEASURES = ("one_cluster", "pair_density", "median_clusters", "mean_gram_rank")


@dataclass(frozen=True)
class PhaseDiagramConfig:
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

    betas: tuple = field(default_factory=lambda: tuple(np.round(np.linspace(0.1, 9.0, 12), 10)))
    t_final: float = 30.0
    dt: float = 0.1
    record_every: int = 10
    n: int = 32
    d: int = 2
    batch: int = 256
    rule: str = "post_ln"
    score: str = "identity"
    value: str = "identity"
    per_system: bool = False
    normalization: str = "softmax"
    causal: bool = False
    seed: int = 0
    pair_threshold: float = ensembles.PAIR_THRESHOLD
    cluster_threshold: float = ensembles.CLUSTER_THRESHOLD
    rank_tol: float = ensembles.RANK_TOL

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
    """Read ``[phase_diagram]`` (or the top level) of a TOML file; unknown keys are refused by name.

    Parameters
    ----------
    path : str or path-like
        The TOML file.

    Returns
    -------
    PhaseDiagramConfig

    Raises
    ------
    ValueError
        A missing file, invalid TOML, a table that is not one, both ``betas`` and ``beta_range`` or a bad
        ``beta_range``, unknown keys, or values :class:`PhaseDiagramConfig` refuses.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"phase-diagram config {str(path)!r} does not exist")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"phase-diagram config {path} is not valid TOML: {err}") from None
    data = data.get("phase_diagram", data)
    if not isinstance(data, dict):
        raise ValueError(f"phase_diagram must be a table of settings ([phase_diagram] in TOML); received {data!r}")
    data = dict(data)
    if "beta_range" in data:
        if "betas" in data:
            raise ValueError(f"phase_diagram takes one of betas (a list) and beta_range ([beta_min, beta_max, count]); "
                             f"received both: betas = {data['betas']!r}, beta_range = {data['beta_range']!r}")
        r = data.pop("beta_range")
        if not isinstance(r, (list, tuple)) or len(r) != 3:
            raise ValueError(f"beta_range must be a list [beta_min, beta_max, count]; received {r!r}")
        lo = validate.real("beta_range[0]", r[0], positive=True)
        hi = validate.real("beta_range[1]", r[1], lo, what=f"a finite number >= beta_range[0] = {lo:g}")
        data["betas"] = tuple(np.linspace(lo, hi, validate.integer("beta_range[2]", r[2], 1)))
    allowed = set(PhaseDiagramConfig.__dataclass_fields__)
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(f"phase_diagram allows the keys {sorted(allowed | {'beta_range'})}; received unknown "
                         f"keys {unknown}")
    return PhaseDiagramConfig(**data)


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
        A dask scheduler of ``PHASE_SCHEDULERS`` (None: a loop here).
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
        validate.choice("scheduler", scheduler, PHASE_SCHEDULERS)
    if progress is not None:
        validate.boolean("progress", progress)
    estimate_phase_diagram(config).check("fewer betas, a smaller batch or n, a larger dt or a shorter t_final")
    started = time.perf_counter()
    if scheduler is None:
        from tqdm import tqdm

        cells = [_cell(config, b) for b in tqdm(config.betas, desc="phase diagram (beta)",
                                                 disable=None if progress is None else not progress)]
    else:
        import dask

        cells = dask.compute(*[dask.delayed(_cell)(config, b) for b in config.betas], scheduler=scheduler)
    data = {m: (("beta", "t"), np.stack([c[m] for c in cells])) for m in MEASURES}
    data["equiangular_time"] = (("beta",), equiangular_curve(config))
    attrs = {"schema_version": results.SCHEMA_VERSION, "kind": "phase_diagram",
             "config": repr(asdict(config)), "seconds": time.perf_counter() - started}
    return xr.Dataset(data, coords={"beta": list(config.betas), "t": config.times}, attrs=attrs)


def run_phase_diagram(config_path, out_dir, *, scheduler=None, progress=None) -> list[Path]:
    """What ``meanfield phase-diagram`` does: run, save ``phase_diagram.nc`` and ``phase_diagram.png``.

    Parameters
    ----------
    config_path : str or path-like
        The TOML file.
    out_dir : str or path-like
        The output folder.
    scheduler, progress
        As for :func:`phase_diagram`.

    Returns
    -------
    list of pathlib.Path
        The two files.
    """
    from .plotting import phase_diagram_figure

    config = load_phase_config(config_path)
    out = Path(out_dir)
    print(f"meanfield phase-diagram: {len(config.betas)} betas x {len(config.times)} times, "
          f"{config.batch} systems of {config.n} tokens -> {out}/", file=sys.stderr)
    ds = phase_diagram(config, scheduler=scheduler, progress=progress)
    nc = results.save(ds, out / "phase_diagram.nc")
    png = out / "phase_diagram.png"
    phase_diagram_figure(ds, config.pair_threshold, config.cluster_threshold).savefig(png, dpi=110)
    return [nc, png]
