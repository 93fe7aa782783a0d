r"""Paired runs: particles and the mean-field PDE from the same start, compared by W2 (MODEL.md section 4).

:func:`paired_run` samples ``n`` particles from an initial density ``rho_0``, evolves them and the
continuum PDE with the same heads, records the diagnostics of both (energy, relative attention
entropy, dissipation, order parameter, clustering) and the distance

.. math:: W_2\Big(\mu_n(t),\ \sum_g \rho(x_g, t)\, w_g\, \delta_{x_g}\Big),\qquad
          \mu_n = \frac1n \sum_i \delta_{x_i},

at the requested times where both runs exist.  The density side lives on the nodes ``x_g`` and
weights ``w_g`` of a *transport grid* (decided by :func:`resolve_transport_grid` alone: by default
the PDE's own quadrature grid; recorded in ``PairedResult.config["transport_grid"]``).  Negative
density values are never clipped silently: ``negative="error"`` raises, ``negative="drop"`` drops
them and records the dropped mass per time.

If the PDE's resolution monitor stops it early, :class:`PairedResult` says when and why, the
particles continue to ``t_final`` and ``w2`` is NaN at the times the PDE did not reach.

Particle sums are :class:`meanfield.ParticleSystem`'s (``summation``: ``"direct"``, ``"spectral"``
(Funk-Hecke sums for zonal heads, bi-spherical operators for general ones), or ``"auto"``, the system's own rule),
integrated by
:func:`meanfield.solve_particles` and observed by :func:`meanfield.analysis.diagnostics.observer`
(its ``relative_entropy`` is the PDE's).  Recorded times are matched to ``t_eval`` by
:func:`align_times` (the one alignment of the package).  With a
:class:`~meanfield.workflow.checkpoint.Checkpointer` each phase (``"pde"``, ``"particles"``) is
checkpointed and resumed bit for bit; the main job (:func:`meanfield.workflow.run.run`) is this driver.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..analysis import diagnostics, transport
from ..core import validate
from ..core.choices import SAMPLINGS, SUMMATIONS, W2_METHODS, W2_METRICS, W2_NEGATIVE_POLICIES
from ..core.densities import check_density, sample_particles
from ..core.options import Checkpointing, Monitor, SaveAt, StepControl, option
from ..core.sphere import SphereGrid
from ..models.continuum import ContinuumPDE
from ..models.particles import ParticleSystem
from .checkpoint import Checkpointer, RunInterrupted
from .solve import solve

__all__ = ["PairedResult", "paired_run", "transport_grid", "resolve_transport_grid", "density_measure",
           "w2_densities", "align_times", "ParticleSettings", "PDESettings", "TransportSettings"]


# ---------------------------------------------------------------------------- the settings of a paired run
@dataclass(frozen=True, eq=False)
class ParticleSettings:
    """The particle side of :func:`paired_run` (:func:`meanfield.workflow.run.paired_settings` builds it
    from the ``[particles]`` and ``[integrator]`` sections of a :class:`~meanfield.workflow.config.RunConfig`).

    Attributes
    ----------
    sampling : {"iid", "stratified"}
    sums : {"auto", "direct", "spectral"}
        :class:`meanfield.ParticleSystem` ``summation``: ``"auto"`` is the system's own rule (spectral
        for heads with an lmax rule, zonal or general, from ``SPECTRAL_MIN_N`` tokens on, else direct), so ReLU
        heads run with direct sums; ``"spectral"`` raises where it does not apply.
    spectral_tol : float
        Accuracy of the spectral sums (``ParticleSystem`` ``kernel_tol``).
    method : str or None
        :func:`meanfield.solve_particles` ``method`` (None: ``"dopri5"`` without noise,
        ``"geodesic_strang"`` with).
    step : StepControl
        Its step control (``rtol``/``atol`` None: 1e-8, 1e-10); with noise a fixed ``dt`` is needed.

    Raises
    ------
    ValueError
        An unknown ``sampling`` or ``sums``, ``spectral_tol`` not a positive number, or ``step`` not a
        ``StepControl`` (the method is checked by the run).
    """

    sampling: str = "iid"
    sums: str = "auto"
    spectral_tol: float = 1e-12
    method: object = None
    step: StepControl = StepControl()

    def __post_init__(self):
        validate.choice("particles.sampling", self.sampling, SAMPLINGS)
        validate.choice("particles.sums", self.sums, SUMMATIONS)
        object.__setattr__(self, "spectral_tol", validate.real("particles.spectral_tol", self.spectral_tol,
                                                               positive=True))
        object.__setattr__(self, "step", option("particles.step", self.step, StepControl))


@validate.moved(tail_tol="a field of monitor: monitor=Monitor(tail_tol=...)",
                negative_tol="a field of monitor: monitor=Monitor(negative_tol=...)")
@dataclass(frozen=True, eq=False)
class PDESettings:
    """The PDE side of :func:`paired_run` (from the ``[pde]`` and ``[integrator]`` sections).

    Attributes
    ----------
    lmax : int
        Degree of the PDE.
    method : str
        :func:`meanfield.solve_continuum` ``method``; ``step`` its step control (``rtol``/``atol``
        None: 1e-8, 1e-12).
    monitor : bool or Monitor
        Stop once the density is no longer resolved, with the tolerances of a
        :class:`~meanfield.core.options.Monitor` (True: ``Monitor()``; False: never): ``monitor=`` of
        :func:`meanfield.solve`.

    Raises
    ------
    ValueError
        ``lmax`` not an integer ``>= 1``, ``step`` not a ``StepControl``, or ``monitor`` neither a boolean nor a
        ``Monitor`` (the method is checked by the run).
    TypeError
        ``tail_tol`` or ``negative_tol`` of 0.2: the message says they are fields of ``monitor`` now.
    """

    lmax: int = 31
    method: object = "dopri5"
    step: StepControl = StepControl()
    monitor: object = True

    def __post_init__(self):
        object.__setattr__(self, "lmax", validate.integer("pde.lmax", self.lmax, 1))
        object.__setattr__(self, "step", option("pde.step", self.step, StepControl))
        if not isinstance(self.monitor, (bool, np.bool_, Monitor)):
            raise ValueError(f"pde.monitor must be True, False or a meanfield.Monitor(tail_tol, negative_tol); "
                             f"received {self.monitor!r}")
        if not isinstance(self.monitor, Monitor):
            object.__setattr__(self, "monitor", bool(self.monitor))


@dataclass(frozen=True, eq=False)
class TransportSettings:
    """The W2 comparison of :func:`paired_run`.

    Attributes
    ----------
    grid : SphereGrid or None
        Carries the density in W2 (:func:`resolve_transport_grid`); default the PDE's quadrature grid.
    method, metric : str
        Passed to :func:`meanfield.analysis.transport.w2_particles_density` (``w2_method``, ``metric``).
    negative : {"drop", "error"}
        Negative density weights: dropped and reported in ``w2_negative_mass``, or an error.
    options : dict or None
        More keywords for :func:`meanfield.analysis.transport.w2_distance` (``max_exact``, ``n_projections``,
        ``seed``, ``reg``); ``seed`` defaults to the run's ``seed``.

    Raises
    ------
    ValueError
        An unknown ``method``, ``metric`` or ``negative``, ``grid`` neither None nor a ``SphereGrid``, or
        ``options`` neither None nor a dict.
    """

    grid: object = None
    method: str = "auto"
    metric: str = "geodesic"
    negative: str = "drop"
    options: object = None

    def __post_init__(self):
        validate.choice("transport.negative", self.negative, W2_NEGATIVE_POLICIES)
        validate.choice("transport.metric", self.metric, W2_METRICS)
        validate.choice("transport.method", self.method, W2_METHODS)
        if self.grid is not None and not isinstance(self.grid, SphereGrid):
            raise ValueError(f"transport.grid must be None or a SphereGrid (e.g. transport_grid(nlat)); received "
                             f"{type(self.grid).__name__}")
        if self.options is not None and not isinstance(self.options, dict):
            raise ValueError(f"transport.options must be None or a dict of w2_distance keywords; received "
                             f"{self.options!r}")


# ---------------------------------------------------------------------------- density side
def transport_grid(nlat, nlon=None) -> SphereGrid:
    """A Gauss-Legendre grid of ``nlat x nlon`` nodes (default ``nlon = 2 nlat``) to carry densities in W2.

    It integrates densities of degree ``<= min(2 nlat - 1, nlon - 1)`` exactly (see
    :func:`density_measure`); it is ``SphereGrid(nlat - 1, nlat=nlat, nlon=nlon)``.

    Parameters
    ----------
    nlat : int
        Gauss-Legendre latitudes, ``>= 3``.
    nlon : int, optional
        Longitudes, ``>= 2 nlat - 1`` (default ``2 nlat``).

    Returns
    -------
    SphereGrid
        Of degree ``nlat - 1`` with ``nlat x nlon`` nodes.

    Raises
    ------
    ValueError
        ``nlat`` not an integer ``>= 3``; ``nlon`` not an integer ``>= 2 nlat - 1``.
    """
    nlat = validate.integer("nlat", nlat, 3)
    nlon = 2 * nlat if nlon is None else nlon
    nlon = validate.integer("nlon", nlon, 2 * nlat - 1, what=f"an integer >= 2 nlat - 1 = {2 * nlat - 1}")
    return SphereGrid(int(nlat) - 1, nlat=int(nlat), nlon=int(nlon))


def resolve_transport_grid(pde: ContinuumPDE, transport_grid: SphereGrid | None = None) -> SphereGrid:
    """The grid whose nodes and weights carry the density of ``pde`` into W2 (the one place that decides).

    ``None`` gives the PDE's own quadrature grid ``pde.grid``; a given :class:`SphereGrid` must
    integrate degree-``lmax`` fields exactly, so that the weights ``rho(x_g) w_g`` sum to 1:
    ``nlat >= (lmax + 1) / 2`` and ``nlon >= lmax + 1``.

    Parameters
    ----------
    pde : ContinuumPDE
        The PDE whose densities are carried (its ``lmax`` and grid).
    transport_grid : SphereGrid, optional
        The grid asked for (None: ``pde.grid``).

    Returns
    -------
    SphereGrid
        ``transport_grid``, or ``pde.grid`` when None.

    Raises
    ------
    ValueError
        ``transport_grid`` neither a :class:`SphereGrid` nor None, or too coarse to integrate degree ``lmax``
        exactly (the message gives the ``nlat`` and ``nlon`` it needs).
    """
    g = pde.grid if transport_grid is None else transport_grid
    if not isinstance(g, SphereGrid):
        raise ValueError(f"transport_grid must be a SphereGrid or None; received {type(g).__name__}")
    if 2 * g.nlat < pde.lmax + 1 or g.nlon < pde.lmax + 1:
        raise ValueError(f"transport_grid (nlat={g.nlat}, nlon={g.nlon}) must integrate degree lmax = {pde.lmax} "
                         f"exactly: need nlat >= {(pde.lmax + 2) // 2} and nlon >= {pde.lmax + 1}")
    return g


def _grid_record(pde, g):
    return {"lmax": g.lmax, "nlat": g.nlat, "nlon": g.nlon, "nodes": g.nlat * g.nlon, "pde_grid": g is pde.grid}


def density_measure(pde: ContinuumPDE, rho_lm, transport_grid: SphereGrid | None = None):
    r"""Nodes and weights of the discrete measure :math:`\sum_g \rho(x_g) w_g \delta_{x_g}`.

    Parameters
    ----------
    pde : ContinuumPDE
        Defines the degree ``lmax`` of ``rho_lm``.
    rho_lm : ndarray, shape (nalm,)
        Density coefficients (mass 1).
    transport_grid : SphereGrid, optional
        Grid whose nodes and quadrature weights carry the density (:func:`resolve_transport_grid`;
        default ``pde.grid``).

    Returns
    -------
    nodes : ndarray, shape (G, 3)
    weights : ndarray, shape (G,)
        ``rho(x_g) w_g``; may contain negative entries (nothing is clipped here).  On a grid of
        degree ``lmax`` (the PDE's, or any with the same coefficient layout) ``rho`` comes from the
        exact grid synthesis, elsewhere from point evaluation.
    """
    g = resolve_transport_grid(pde, transport_grid)
    rho_lm = check_density(pde.grid, rho_lm)
    nodes = g.nodes.reshape(-1, 3)
    rho = g.synthesis(rho_lm) if g.lmax == pde.lmax else pde.grid.evaluate(rho_lm, nodes)
    return nodes, np.ravel(rho) * g.weights.reshape(-1)


def w2_densities(pde_a: ContinuumPDE, rho_a, pde_b: ContinuumPDE, rho_b, transport_grid: SphereGrid, *,
                 negative="drop", **kw):
    """W2 between two PDE densities (e.g. two ``lmax``) carried by the same transport grid.

    Both sides are :func:`density_measure` on ``transport_grid``; negative weights are
    ``"drop"``-ped (renormalizing the rest; the dropped mass of each side is reported in
    ``info["negative_mass_a"]`` / ``["negative_mass_b"]`` and their sum in ``negative_mass``) or
    raise (``"error"``).  Keywords go to :func:`meanfield.analysis.transport.w2_distance`.

    Parameters
    ----------
    pde_a, pde_b : ContinuumPDE
        The PDEs of the two densities (their ``lmax`` may differ).
    rho_a, rho_b : ndarray, shape (nalm,)
        The densities' coefficients (mass 1), of ``pde_a`` and ``pde_b``.
    transport_grid : SphereGrid
        The grid carrying both (:func:`resolve_transport_grid` of each PDE).
    negative : {"drop", "error"}
        What negative quadrature weights do.
    **kw
        Keywords of :func:`meanfield.analysis.transport.w2_distance` (``method``, ``metric``, ...).

    Returns
    -------
    TransportResult
        The distance, with ``negative_mass`` the sum of the dropped masses and ``info`` as above.

    Raises
    ------
    ValueError
        An unknown ``negative``; a density :func:`meanfield.core.densities.check_density` refuses or a grid
        :func:`resolve_transport_grid` refuses; a density with negative mass on the grid when
        ``negative="error"``; what :func:`~meanfield.analysis.transport.w2_distance` refuses.
    """
    validate.choice("negative", negative, W2_NEGATIVE_POLICIES)
    sides = []
    for name, pde, rho in (("a", pde_a, rho_a), ("b", pde_b, rho_b)):
        nodes, w = density_measure(pde, rho, transport_grid)
        neg = 0.0 - float(w[w < 0].sum())
        if neg > 0 and negative == "error":
            raise ValueError(f"density {name} has negative mass {neg:.3e} on the transport grid; "
                             f"pass negative='drop' to drop it and renormalize")
        keep = w > 0
        sides.append((nodes[keep], w[keep] / w[keep].sum(), neg))
    res = transport.w2_distance(sides[0][0], sides[1][0], sides[0][1], sides[1][1], **kw)
    info = dict(res.info, negative_mass_a=sides[0][2], negative_mass_b=sides[1][2])
    return transport.TransportResult(res.distance, res.cost, res.method, res.metric,
                                     sides[0][2] + sides[1][2], info)


# ---------------------------------------------------------------------------- result
@dataclass(frozen=True, eq=False)
class PairedResult:
    """Outcome of :func:`paired_run`.

    Attributes
    ----------
    times : ndarray, shape (T,)
        The requested times ``t_eval``.
    w2 : ndarray, shape (T,)
        ``W2(mu_n(t), rho(t))``; NaN where the PDE (or the particle run) did not reach ``t``.
    w2_methods : tuple of str, length T
        Method used at each time (``"exact"``, ``"sinkhorn"``, ``"sliced"``; ``""`` where NaN).
    w2_negative_mass : ndarray, shape (T,)
        Negative density mass dropped on the transport grid at each time (NaN where no W2).
    w2_info : tuple of dict, length T
        :attr:`meanfield.analysis.transport.TransportResult.info` per time (empty where no W2).
    particle_times : ndarray, shape (Tp,)
    particles : dict of str to ndarray, each of shape (Tp, ...)
        :data:`meanfield.analysis.diagnostics.OBSERVABLES` at ``particle_times``.
    particle_states : ndarray, shape (Tp, n, 3)
    pde_times : ndarray, shape (Tq,)
        Times reached by the PDE; when it stopped early the last one is the stopping time.
    pde : dict of str to ndarray, each of shape (Tq, ...)
        :func:`meanfield.analysis.field_diagnostics.field_observer` records (``energy``, ``relative_entropy`` (H,),
        ``spectral_tail``, ``negative_mass``, ...).
    pde_coefficients : ndarray, shape (Tq, nalm), complex
        ``rho_lm`` at ``pde_times``.
    pde_status : int
        0 reached ``t_final``; 1 stopped by the resolution monitor; -1 failed.
    pde_message : str
    pde_t_stop : float
        Time the PDE run ended (``t_final`` when it completed).
    particle_status : int
        As ``pde_status`` (0 reached ``t_final``; 2 interrupted without checkpoints; -1 failed).
    particle_message : str
    config : dict
        Every setting (heads, sizes, methods, seeds, the particle-sum method used
        (``particle_sums``), the transport grid, evaluation counts, timings).
    particle_t_stop : float
        Time the particle run ended.
    particle_max_retraction : float
        Largest distance an accepted step left the sphere before its retraction.
    """

    times: np.ndarray
    w2: np.ndarray
    w2_methods: tuple
    w2_negative_mass: np.ndarray
    w2_info: tuple
    particle_times: np.ndarray
    particles: dict
    particle_states: np.ndarray
    pde_times: np.ndarray
    pde: dict
    pde_coefficients: np.ndarray
    pde_status: int
    pde_message: str
    pde_t_stop: float
    particle_status: int
    particle_message: str
    config: dict = field(default_factory=dict)
    particle_t_stop: float = np.nan
    particle_max_retraction: float = np.nan

    @property
    def pde_stopped_early(self) -> bool:
        """True when the PDE ended before ``t_final`` (resolution monitor or failure)."""
        return self.pde_status != 0

    @property
    def w2_geodesic_bracket(self) -> np.ndarray:
        """Bounds ``(lower, upper)`` on the geodesic W2 at each time, shape (T, 2), where the semi-discrete
        path computed it (``info["geodesic_bracket"]`` of :func:`meanfield.analysis.transport.w2_particles_field`:
        exact chordal transport, geodesic W2 bracketed through the chordal/geodesic relation); NaN at the
        times of a node-based method (its geodesic W2 is exact for the node measure) or without a W2."""
        rows = [info.get("geodesic_bracket", (np.nan, np.nan)) for info in self.w2_info]
        return np.array(rows, dtype=float).reshape(len(rows), 2)

    @property
    def w2_method(self) -> str:
        """The W2 method(s) used, comma-joined if they differ between times."""
        return ",".join(sorted({m for m in self.w2_methods if m}))


# ---------------------------------------------------------------------------- driver
def _times(t_final, t_eval):
    validate.real("t_final", t_final, positive=True)
    t = np.linspace(0.0, float(t_final), 5) if t_eval is None else validate.real_array("t_eval", t_eval, (None,))
    if t.size == 0 or np.any(np.diff(t) <= 0) or t[0] < 0 or t[-1] > t_final:
        raise ValueError(f"t_eval must be a strictly increasing 1-d array in [0, t_final = {t_final}]; "
                         f"received {t_eval!r}")
    return t


def align_times(t_eval, t_recorded, tol=1e-9):
    """Indices mapping recorded times onto ``t_eval`` (the one time alignment of the package).

    Parameters
    ----------
    t_eval : ndarray, shape (T,)
    t_recorded : ndarray, shape (R,)
        Times a :class:`~meanfield.core.integrate.Trajectory` recorded (a prefix of ``t_eval``, plus a
        stopping time if an event fired).
    tol : float
        A recorded time matches ``t_eval[j]`` when within ``tol * max(1, |t|)`` (the integrators
        land on ``t_eval`` exactly; the tolerance only absorbs round-off of a round trip through files).

    Returns
    -------
    rows : ndarray of int, shape (K,)
        Positions in ``t_recorded`` of the times found in ``t_eval``.
    cols : ndarray of int, shape (K,)
        Their positions in ``t_eval``.
    """
    t_eval, t_recorded = np.asarray(t_eval, float), np.asarray(t_recorded, float)
    rows, cols = [], []
    for i, t in enumerate(t_recorded):
        j = int(np.argmin(np.abs(t_eval - t)))
        if abs(t_eval[j] - t) <= tol * max(1.0, abs(t)):
            rows.append(i)
            cols.append(j)
    return np.array(rows, dtype=int), np.array(cols, dtype=int)


def _phase(checkpoints, phase, solve, *args, **kw):
    """One integration phase, checkpointed (every ``checkpoints.every``) and resumable when ``checkpoints`` is
    given."""
    if checkpoints is None:
        return solve(*args, **kw)
    done = checkpoints.finished(phase)
    if done is not None:
        return done
    traj = solve(*args, checkpointing=Checkpointing(checkpoints.saver(phase), checkpoints.every,
                                                    checkpoints.state(phase)), **kw)
    if traj.status == 2:
        raise RunInterrupted(checkpoints.folder, f"{phase} run {traj.message}; state saved in {checkpoints.folder}")
    checkpoints.finish(phase, traj)
    return traj


@validate.moved(checkpoint_every="the period of the checkpointer: checkpoints=Checkpointer(folder, every=...)")
def paired_run(heads, rho_lm0, n_particles, t_final, t_eval=None, *, particles=None, pde=None, transport=None,
               nu=0.0, seed=None, progress=False, checkpoints=None, X0=None) -> PairedResult:
    """Run particles and the PDE from the same density and compare them by W2.

    Parameters
    ----------
    heads : sequence of Head
        Heads of dimension 3 (shared by both runs).
    rho_lm0 : ndarray, shape (nalm,), or callable
        Initial coefficients for ``lmax``, or ``builder(grid) -> rho_lm`` called with the PDE's
        grid (e.g. ``lambda g: densities.vmf_mixture_density(g, mus, kappas, floor=0.2)``).
    n_particles : int
        Number of particles (>= 2), drawn by :func:`meanfield.core.densities.sample_particles` on the
        PDE's grid.
    t_final : float
    t_eval : array_like, shape (T,), optional
        Increasing times in ``[0, t_final]`` (default 5 equispaced).
    particles : ParticleSettings, optional
        Sampling, sums and integrator of the particle side (default ``ParticleSettings()``).
    pde : PDESettings, optional
        Degree, integrator and resolution monitor of the PDE side (default ``PDESettings()``: lmax 31).
    transport : TransportSettings, optional
        The W2 comparison: transport grid, method, metric, negative weights, more options.
    seed : int, optional
        Seed of the sampling (and, by default, of sliced W2 projections).
    nu : float
        Token noise ``nu >= 0`` of both sides: ``ContinuumPDE(nu=nu)`` and ``ParticleSystem(nu=nu)``.
        With ``nu > 0`` the particles need a fixed ``particles.step.dt`` and an SDE scheme (default
        ``"geodesic_strang"``; an ODE scheme is refused by name), and the Brownian increments come
        from the stream ``default_rng([seed, 1])`` (independent of the sampling's).
    progress : bool or None
        tqdm bars for both integrations and the W2 series (None: only when stderr is a terminal).
    checkpoints : Checkpointer, optional
        Save the integrator state of each phase (``"pde"``, then ``"particles"``) every
        ``checkpoints.every`` units of simulated time (None: only on Ctrl-C) and on Ctrl-C, and continue from the
        states found there: a resumed run gives the same numbers, bit for bit.  An interrupt then raises
        :class:`~meanfield.workflow.checkpoint.RunInterrupted`.
    X0 : array_like, shape (n_particles, 3), optional
        Given initial particles (unit vectors) instead of a sample of ``rho_lm0`` (``particles.sampling`` is
        then not used; the config records ``sampling = "given"``), e.g. tokens from a file or the
        last particles of an earlier run.

    Returns
    -------
    PairedResult

    Raises
    ------
    ValueError
        Named, before any run: ``n_particles`` below 2; ``particles``, ``pde``, ``transport`` (or their ``step``)
        not of their settings class; an unknown sampling, particle summation, negative policy, metric or W2
        method; ``progress`` not a bool or None; a negative ``nu``; ``checkpoints`` not a ``Checkpointer``;
        ``t_final`` not positive or ``t_eval`` not strictly increasing in ``[0, t_final]``; heads or ``lmax`` the
        models refuse; a transport grid too coarse; ``rho_lm0`` not a density of mass 1; ``X0`` not
        ``n_particles`` unit vectors in ``R^3``.  During the runs: what the solvers and their cost guards
        refuse, and the W2 solvers' errors.
    RunInterrupted
        On Ctrl-C with ``checkpoints`` (the states are saved first).
    TypeError
        ``checkpoint_every`` of 0.2: the message says where the period is now (``Checkpointer(folder, every=)``).
    """
    validate.integer("n_particles", n_particles, 2)
    ps = option("particles", particles, ParticleSettings)       # each settings object checked its own fields
    qs = option("pde", pde, PDESettings)
    ts = option("transport", transport, TransportSettings)
    particle_step = ps.step.with_defaults(1e-8, 1e-10)
    pde_step = qs.step.with_defaults(1e-8, 1e-12)
    tolerances = Monitor() if isinstance(qs.monitor, bool) else qs.monitor      # recorded in the result's config
    if progress is not None:
        validate.boolean("progress", progress)
    nu = validate.real("nu", nu, 0.0)      # one noise for both sides: the particles' law is the noisy PDE's
    if checkpoints is not None and not isinstance(checkpoints, Checkpointer):
        raise ValueError(f"checkpoints must be a Checkpointer or None; received {type(checkpoints).__name__}")
    t = _times(t_final, t_eval)
    n = int(n_particles)
    w2_options = dict(ts.options or {})
    w2_options.setdefault("seed", seed)
    pde = ContinuumPDE(heads, qs.lmax, nu=nu)
    system = ParticleSystem(pde.heads, summation=ps.sums, kernel_tol=ps.spectral_tol, nu=nu)
    tg = resolve_transport_grid(pde, ts.grid)      # checked before the runs
    rho0 = rho_lm0(pde.grid) if callable(rho_lm0) else rho_lm0
    rho0 = check_density(pde.grid, rho0, "rho_lm0")
    timings = {}

    tic = time.perf_counter()
    sampling = ps.sampling
    if X0 is None:
        X0 = sample_particles(pde.grid, rho0, n, method=sampling, seed=seed)
    else:
        X0 = validate.unit_vectors("X0", X0, 3)
        if X0.shape[0] != n:
            raise ValueError(f"X0 must hold n_particles = {n} tokens (shape ({n}, 3)); received shape {X0.shape}")
        sampling = "given"
    timings["sampling"] = time.perf_counter() - tic
    # the particle run's up-front checks (method, dt, the direct-sum budget) before the PDE's minutes
    system.check_run(n, t_final, t_eval=t, method=ps.method, dt=particle_step.dt,
                     record_passes=diagnostics.observer_passes(system, n))

    tic = time.perf_counter()
    qtraj = _phase(checkpoints, "pde", solve, pde, rho0, t_final, method=qs.method, step=pde_step,
                   save=SaveAt(t_eval=t), monitor=qs.monitor, progress=progress)
    timings["pde"] = time.perf_counter() - tic
    coeffs = np.array([pde.coefficients(y) for y in qtraj.y], dtype=np.complex128).reshape(-1, pde.grid.nalm)

    tic = time.perf_counter()
    ptraj = _phase(checkpoints, "particles", solve, system, X0, t_final, method=ps.method, step=particle_step,
                   save=SaveAt(t_eval=t, observe=diagnostics.observer(system)), progress=progress,
                   **({"seed": None if seed is None else np.random.default_rng([seed, 1])} if nu > 0 else {}))
    timings["particles"] = time.perf_counter() - tic
    spectral = system.uses_spectral(n)

    tic = time.perf_counter()
    w2, neg, methods, infos = _w2_series(pde, tg, t, ptraj, qtraj.t, coeffs, progress, negative=ts.negative,
                                         metric=ts.metric, method=ts.method, **w2_options)
    timings["w2"] = time.perf_counter() - tic

    config = {"heads": [h.to_dict() for h in pde.heads], "n_particles": n, "t_final": float(t_final),
              "t_eval": t.tolist(), "lmax": int(qs.lmax), "sampling": sampling, "seed": seed, "nu": nu,
              "particle_sums": "spectral" if spectral else "direct", "particle_sums_requested": ps.sums,
              "spectral_lmax": system.spectral.lmax if spectral else None, "spectral_tol": ps.spectral_tol,
              "particle_method": ptraj.method, "particle_nfev": ptraj.nfev, "pde_method": qtraj.method,
              "pde_nfev": qtraj.nfev, "tail_tol": tolerances.tail_tol, "negative_tol": tolerances.negative_tol,
              "monitor": qs.monitor is not False,
              "transport_grid": _grid_record(pde, tg), "w2_method": ts.method, "metric": ts.metric,
              "negative": ts.negative, "w2_options": dict(w2_options), "timings": timings}
    return PairedResult(times=t, w2=w2, w2_methods=tuple(methods), w2_negative_mass=neg, w2_info=tuple(infos),
                        particle_times=ptraj.t, particles=dict(ptraj.observables), particle_states=ptraj.y,
                        pde_times=qtraj.t, pde=dict(qtraj.observables), pde_coefficients=coeffs,
                        pde_status=qtraj.status, pde_message=qtraj.message, pde_t_stop=qtraj.t_final,
                        particle_status=ptraj.status, particle_message=ptraj.message, config=config,
                        particle_t_stop=ptraj.t_final, particle_max_retraction=ptraj.max_retraction)


def _w2_series(pde, tg, t, ptraj, pde_times, coeffs, progress, **kw):
    """W2 (and dropped negative mass, method, info) at each ``t`` reached by both runs; NaN elsewhere."""
    from tqdm.auto import tqdm

    prow, pcol = align_times(t, ptraj.t)
    qrow, qcol = align_times(t, pde_times)
    ip, iq = np.full(t.size, -1), np.full(t.size, -1)
    ip[pcol], iq[qcol] = prow, qrow
    w2, neg = np.full(t.size, np.nan), np.full(t.size, np.nan)
    methods, infos = [""] * t.size, [{}] * t.size
    both = np.flatnonzero((ip >= 0) & (iq >= 0))
    for k in tqdm(both, desc="W2 particles vs PDE", leave=False, disable=None if progress is None else not progress):
        nodes, weights = density_measure(pde, coeffs[iq[k]], tg)
        res = transport.w2_particles_density(ptraj.y[ip[k]], nodes, weights, **kw)
        w2[k], neg[k], methods[k], infos[k] = res.distance, res.negative_mass + 0.0, res.method, res.info
    return w2, neg, methods, infos
