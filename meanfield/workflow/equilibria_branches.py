r"""Branches of stationary states for ``meanfield equilibria``: the model of a config, the uniform branch, the
branches switched at its branch points, and what is measured along them (MODEL.md section 7).

Each branch is a :class:`BranchRecord` (a frozen record of arrays, :func:`compute_branches`), saved as
``<name>.npz`` into the job's partial folder as it finishes (:meth:`BranchRecord.to_npz`) and taken from there by a
rerun (:meth:`BranchRecord.from_npz`); :mod:`meanfield.workflow.equilibria_job` turns the records into the dataset
and runs the job.

:func:`compute_branches` works in two stages: the uniform branch, then the branches switched at its branch points
(which depend on it only), one task per requested degree and side through
:func:`meanfield.workflow.tasks.iter_tasks`, the task runner of every grid of the package (a plain loop, or a local
dask scheduler of :data:`~meanfield.workflow.tasks.EXECUTORS`: ``executor``, ``meanfield equilibria --executor``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

from ..analysis import continuation as ct
from ..analysis import equilibria as eq
from ..analysis.phase_transition import MARCH_SECONDS_PER_CUBE, MARCH_SECONDS_PER_STATE
from ..core import cost, validate
from ..core.heads import scalar_heads
from ..models.axisymmetric import AxisymmetricPDE
from .equilibria_config import EquilibriaConfig
from .tasks import EXECUTORS, NpzStore, iter_tasks

__all__ = ["build_model", "check_config", "compute_branches", "config_has_free_energy", "degree_of", "Problem",
           "GAP_TOL", "BranchRecord", "kept_branch", "estimate_job", "JACOBIANS_PER_POINT",
           "SPHERE_SECONDS_PER_STATE"]

JACOBIANS_PER_POINT = 8
"""Dense solves (Jacobians) per point of a branch in the job's estimates (corrector iterations, tangent, spectrum;
measured 3 to 6 with the paper's two general heads at lmax 24, more near a located branch point), the axisymmetric
job's and the general heads' (:mod:`meanfield.workflow.equilibria_general`)."""
SPHERE_SECONDS_PER_STATE = 0.3
"""Seconds of one full-S^2 re-solve and spectrum at lmax 24 (measured about 0.3 s a state; scaled by (lmax + 1)^3
in :func:`estimate_job`)."""
GAP_TOL = 1e-12
"""Free-energy gaps smaller than this are taken as zero when looking for a Maxwell point (round-off at the
branch point, where the gap vanishes like ``b_l^4``)."""


# ----------------------------------------------------------------------------------------------- the record
_INTS = ("degree", "side", "status", "n_newton")
_STRS = ("message", "kind")


@dataclass(frozen=True)
class BranchRecord:
    """One branch of the equilibria job: what is computed along it and what ``partial/<name>.npz`` holds.

    ``N`` points, ``S`` special points, ``n`` unknowns (``lmax`` Gegenbauer coefficients ``b_1..b_lmax`` on the
    axisymmetric model; the real spherical-harmonic coordinates on S^2 with general heads), ``k`` eigenvalues.
    The fields after ``special_index`` belong to one kind of job and are None in the others.

    Parameters
    ----------
    u : ndarray, shape (N, n)
        The branch's states (the continuation's unknowns).
    p : ndarray, shape (N,)
        The parameter (``nu`` or ``beta``) at each point.
    t_p : ndarray, shape (N,)
        The parameter's component of the unit tangent.
    degree : int
        The degree of the critical mode followed (0: the uniform branch; -1: general heads).
    side : int
        The sign of the critical mode followed (0: the uniform or primary branch).
    status : int
        0 range or budget covered; 1 corrector (or a later solve) failed; 2 not resolved.
    message : str
        How the branch ended.
    n_newton : int
        Corrector iterations along the branch.
    eig : ndarray, shape (N, k), complex
        The leading eigenvalues of the linearization at each point.
    stable : ndarray, shape (N,)
        Stability of each point (bool on the axisymmetric model; 1 / 0 on S^2).
    resolution : ndarray, shape (N,)
        Resolution error of each state.
    special_kind, special_p, special_u, special_phi, special_index : ndarray
        The special points (folds, branch points, Maxwell points): kind (S,), parameter (S,), state (S, n), critical
        direction (S, n) and index along the branch (S,).
    order, gap : ndarray, shape (N,), optional
        Axisymmetric job: order parameter ``|b_1| / sqrt(d)`` and free-energy gap ``G - G_uniform``.
    sphere_status, sphere_nu, sphere_residual, sphere_removed : ndarray, shape (N,), optional
        Axisymmetric job with ``geometry.d = "sphere"``: every state solved again on S^2
        (:func:`meanfield.workflow.equilibria_sphere.add_sphere`).
    sphere_stable, sphere_eig, sphere_rotation, sphere_l0 : ndarray, optional
        The same: stability (N,), eigenvalues and their rotation parts (N, k + 3), zonal coefficients (N, lmax + 1).
    kind : str, optional
        General heads: ``"primary"`` or ``"switched"``.
    parent_p : float, optional
        General heads: ``nu`` of the branch point a switched branch leaves (NaN: the primary).
    first_moment, second_moment, free_energy, entropy, rotation, special_located : ndarray, optional
        General heads: the per-point measures of :mod:`meanfield.workflow.equilibria_general`.
    """

    u: np.ndarray
    p: np.ndarray
    t_p: np.ndarray
    degree: int
    side: int
    status: int
    message: str
    n_newton: int
    eig: np.ndarray
    stable: np.ndarray
    resolution: np.ndarray
    special_kind: np.ndarray
    special_p: np.ndarray
    special_u: np.ndarray
    special_phi: np.ndarray
    special_index: np.ndarray
    order: np.ndarray | None = None
    gap: np.ndarray | None = None
    sphere_status: np.ndarray | None = None
    sphere_nu: np.ndarray | None = None
    sphere_residual: np.ndarray | None = None
    sphere_removed: np.ndarray | None = None
    sphere_stable: np.ndarray | None = None
    sphere_eig: np.ndarray | None = None
    sphere_rotation: np.ndarray | None = None
    sphere_l0: np.ndarray | None = None
    kind: str | None = None
    parent_p: float | None = None
    first_moment: np.ndarray | None = None
    second_moment: np.ndarray | None = None
    free_energy: np.ndarray | None = None
    entropy: np.ndarray | None = None
    rotation: np.ndarray | None = None
    special_located: np.ndarray | None = None

    @property
    def n_points(self) -> int:
        """The number of points ``N``."""
        return len(self.p)

    def to_npz(self, path):
        """Write the record (its fields that are not None) to ``path`` (.npz) atomically, as the task store writes
        every result (:class:`meanfield.workflow.tasks.NpzStore`: a temporary file, then a rename).

        Parameters
        ----------
        path : pathlib.Path
            The file to write.

        Raises
        ------
        OSError
            If the folder cannot be written.
        """
        NpzStore.save({f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None},
                      Path(path))

    @classmethod
    def from_npz(cls, path) -> BranchRecord:
        """A record written by :meth:`to_npz` (its scalars back as ``int``, ``str`` and ``float``).

        Parameters
        ----------
        path : str or pathlib.Path

        Returns
        -------
        BranchRecord

        Raises
        ------
        OSError
            If the file cannot be read.
        ValueError
            If it is not a record's npz (unknown or missing fields).
        """
        arrays = NpzStore.load(path)
        known = {f.name for f in fields(cls)}
        if set(arrays) - known:
            raise ValueError(f"{path} is not a branch record: unknown fields {sorted(set(arrays) - known)}")
        arrays |= {k: int(arrays[k]) for k in _INTS if k in arrays}
        arrays |= {k: str(arrays[k]) for k in _STRS if k in arrays}
        if "parent_p" in arrays:
            arrays["parent_p"] = float(arrays["parent_p"])
        try:
            return cls(**arrays)
        except TypeError as err:
            raise ValueError(f"{path} is not a branch record: {err}") from None


# ----------------------------------------------------------------------------------------------- the model
def build_model(config: EquilibriaConfig, beta=None) -> AxisymmetricPDE:
    """The axisymmetric PDE of ``config``.

    Parameters
    ----------
    config : EquilibriaConfig
        The job's config.
    beta : float, optional
        Every head's ``beta`` replaced by this one.

    Returns
    -------
    AxisymmetricPDE
        The model; its ``nu`` is ``continuation.nu`` when the branch's parameter is ``beta`` (the noise of every
        state), and 0 when it is ``nu`` (the parameter: :meth:`Problem.at` gives the model at each point).

    Raises
    ------
    ValueError
        If the heads do not make a model.
    """
    d = config.geometry.dim
    heads = tuple(scalar_heads([h.lam], d, h.beta if beta is None else beta, h.kernel, h.normalization,
                               h.kernel_params)[0] for h in config.heads)
    c = config.continuation
    return AxisymmetricPDE(heads, d, config.geometry.lmax, nu=c.nu if c.parameter == "beta" else 0.0)


def config_has_free_energy(config):
    """Whether the config's heads have a free energy (mean, Sinkhorn; not softmax).

    Parameters
    ----------
    config : EquilibriaConfig
        The job's config.

    Returns
    -------
    bool
    """
    return eq.normalizations_have_free_energy(h.normalization for h in config.heads)


def estimate_job(config):
    """The cost estimate of an axisymmetric equilibria job (:mod:`meanfield.core.cost`): about
    ``2 (range) / step + 10`` points per branch (at most ``max_points``), each :data:`JACOBIANS_PER_POINT` dense
    solves of the axisymmetric model (the rates of :func:`~meanfield.analysis.phase_transition.estimate_march`),
    and with ``geometry.d = "sphere"`` each state of a switched branch solved again on S^2 with its spectrum
    (:data:`SPHERE_SECONDS_PER_STATE` at lmax 24, scaled by ``(lmax + 1)^3``).

    Parameters
    ----------
    config : EquilibriaConfig
        The job's config (axisymmetric heads).

    Returns
    -------
    meanfield.core.cost.Cost
        The estimated time (its ``check`` refuses a job above the limit).
    """
    c, L = config.continuation, config.geometry.lmax
    lo, hi = c.range
    points = int(min(c.max_points, 2 * (hi - lo) / c.step + 10))
    switched = len(c.degrees) * len(c.sides)
    axisym = JACOBIANS_PER_POINT * (MARCH_SECONDS_PER_STATE + MARCH_SECONDS_PER_CUBE * float(L + 1) ** 3)
    sphere = SPHERE_SECONDS_PER_STATE * ((L + 1) / 25.0) ** 3 if config.geometry.sphere else 0.0
    seconds = points * ((1 + switched) * axisym + switched * sphere)
    return cost.Cost(f"meanfield equilibria (lmax = {L}, about {points} points per branch, {1 + switched} branches"
                     f"{', every switched state on the full sphere' if config.geometry.sphere else ''})",
                     seconds=seconds, detail=f"{axisym:.2g} s per axisymmetric state"
                                             + (f", {sphere:.2g} s per S^2 state" if sphere else ""))


def check_config(config):
    """The checks of an axisymmetric equilibria job before anything is computed: its cost, its model, and (parameter
    nu) that the range holds the branch point of every requested degree.

    Parameters
    ----------
    config : EquilibriaConfig
        The job's config.

    Returns
    -------
    AxisymmetricPDE
        The model (:func:`build_model`).

    Raises
    ------
    ValueError
        A job above the time limit, heads that make no model, a degree above ``geometry.lmax``, or a
        ``continuation.nu_range`` that misses a requested degree's ``nu_l`` (named, with the fix).
    """
    estimate_job(config).check("a smaller geometry.lmax, a larger continuation.step, a narrower range or fewer "
                               "continuation.degrees / sides")
    pde = build_model(config)
    c = config.continuation
    lo, hi = c.range
    if c.parameter == "nu":
        for ell in c.degrees:
            if ell > pde.lmax:
                raise ValueError(f"continuation.degrees holds {ell} > geometry.lmax = {pde.lmax}")
            nu_l = eq.nu_sharp(pde, ell)
            if not lo < nu_l < hi:
                name = "nu_#" if ell == 1 else f"nu_{ell}"
                raise ValueError(f"continuation.nu_range = [{lo:g}, {hi:g}] never reaches {name} = {nu_l:.10g}, "
                                 f"where the degree-{ell} branch leaves the uniform state (sigma_{ell} = 0): widen "
                                 f"the range to contain it, or drop {ell} from continuation.degrees")
    return pde


class Problem:
    """The continuation problem of a config (``F``, ``J``: :func:`~meanfield.analysis.equilibria.noise_problem` or
    :func:`~meanfield.analysis.equilibria.beta_problem` of ``pde``) and the model at a point of its parameter.

    Parameters
    ----------
    config : EquilibriaConfig
        The job's config (its ``continuation.parameter`` chooses the problem).
    pde : AxisymmetricPDE
        Its model (:func:`build_model`).
    """

    def __init__(self, config, pde):
        self.config, self.pde = config, pde
        c = config.continuation
        self.parameter = c.parameter
        if c.parameter == "nu":
            self.F, self.J = eq.noise_problem(pde)
        else:
            self.F, self.J = eq.beta_problem(pde)
        self._models = {}
        self.progress = False              # per-state bars (the S^2 solves), set by compute_branches

    def at(self, p) -> AxisymmetricPDE:
        """The model at the parameter ``p``: the state ``(1, u)`` of a branch point at ``p`` is a state of this model,
        at its ``nu``.

        Parameters
        ----------
        p : float
            The parameter's value: the noise (``at_noise(pde, p)``, :func:`~meanfield.analysis.equilibria.at_noise`)
            or every head's ``beta`` (at ``continuation.nu``).

        Returns
        -------
        AxisymmetricPDE
            The model (kept for the next call at the same ``p``).
        """
        if p not in self._models:
            if len(self._models) > 64:
                self._models.clear()
            if self.parameter == "nu":
                self._models[p] = eq.at_noise(self.pde, float(p))
            else:
                self._models[p] = replace(self.pde, heads=tuple(h.replace(beta=float(p)) for h in self.pde.heads))
        return self._models[p]

    def resolved(self, u, p):
        """Why the march stops at ``(u, p)`` (a state the model does not resolve), or None.

        Parameters
        ----------
        u : ndarray, shape (lmax,)
            The state's coefficients ``b_1..b_lmax``.
        p : float
            The parameter.

        Returns
        -------
        str or None
            The reason (resolution error above :data:`meanfield.analysis.equilibria.RESOLUTION_TOL`), or None.
        """
        model = self.at(p)
        err = eq.resolution_error(model, np.r_[1.0, u])
        if err > eq.RESOLUTION_TOL:
            return (f"state not resolved at lmax = {model.lmax}: resolution error {err:.2e} > {eq.RESOLUTION_TOL:g} "
                    f"at {self.parameter} = {p:.10g} (use a larger geometry.lmax)")
        return None


# ----------------------------------------------------------------------------------------------- branches
def _point_data(prob, u, p):
    """Order parameter, free-energy gap, leading eigenvalues, stability and resolution at one state."""
    config = prob.config
    k = config.continuation.n_eigenvalues
    model = prob.at(p)
    b = np.r_[1.0, u]
    ev = eq.linear_spectrum(model, b)[:k]
    ev = np.pad(ev.astype(complex), (0, k - ev.size), constant_values=np.nan)
    gap = eq.free_energy_gap(model, b) if config_has_free_energy(config) else np.nan
    return (abs(b[1]) / np.sqrt(model.d), gap, ev, bool(ev[0].real < 0), eq.resolution_error(model, b))


def _branch_record(prob, br, degree, side):
    """The :class:`BranchRecord` of one branch (what ``partial/<name>.npz`` holds)."""
    lmax = prob.pde.lmax
    rows = [_point_data(prob, u, p) for u, p in zip(br.u, br.p)]
    if degree == 0:             # the uniform state is resolved at any lmax (its u is round-off, ~1e-18)
        rows = [r[:4] + (0.0,) for r in rows]
    sp = br.special
    rec = BranchRecord(u=br.u, p=br.p, t_p=br.t_p, degree=degree, side=side, status=br.status, message=br.message,
                       n_newton=br.n_newton, order=np.array([r[0] for r in rows]),
                       gap=np.array([r[1] for r in rows]), eig=np.array([r[2] for r in rows]),
                       stable=np.array([r[3] for r in rows]), resolution=np.array([r[4] for r in rows]),
                       special_kind=np.array([s.kind for s in sp], dtype="<U16"),
                       special_p=np.array([s.p for s in sp], dtype=float),
                       special_u=np.array([s.u for s in sp], dtype=float).reshape(len(sp), lmax),
                       special_phi=np.array([s.phi for s in sp], dtype=float).reshape(len(sp), lmax),
                       special_index=np.array([s.index for s in sp], dtype=int))
    if degree > 0 and prob.parameter == "nu" and config_has_free_energy(prob.config) and br.status != 1:
        rec = _add_maxwell(prob, rec)
    if prob.config.geometry.sphere:
        from .equilibria_sphere import add_sphere

        rec = add_sphere(prob, rec)
    return rec


def _add_maxwell(prob, rec):
    """Maxwell points of a switched branch: ``G - G_uniform`` changes sign between two points; Brent's method on
    the branch's amplitude ``b_l`` (:func:`~meanfield.analysis.equilibria.branch_state`, warm-started)."""
    from scipy import optimize

    pde, ell = prob.pde, rec.degree
    gap, u, p = rec.gap, rec.u, rec.p
    found = []
    for k in range(len(p) - 1):
        if not (abs(gap[k]) > GAP_TOL and abs(gap[k + 1]) > GAP_TOL and gap[k] * gap[k + 1] < 0):
            continue
        model, start = prob.at(p[k]), np.r_[1.0, u[k]]      # the branch's state at p[k]: its nu starts Newton
        states = {}

        def g(a):
            if a not in states:
                states[a] = eq.branch_state(model, a, ell, start=start)
                if not states[a].success:
                    raise RuntimeError(states[a].message)
            return eq.free_energy_gap(pde, states[a])
        try:
            a = optimize.brentq(g, u[k][ell - 1], u[k + 1][ell - 1], xtol=1e-13, rtol=1e-13)
        except RuntimeError as err:
            rec = replace(rec, status=1, message=f"the Maxwell point between points {k} and {k + 1} failed: {err}")
            break
        found.append((states[a].b[1:], states[a].nu, k))
    if found:
        n = len(found)
        rec = replace(rec, special_kind=np.append(rec.special_kind, ["maxwell"] * n).astype("<U16"),
                      special_p=np.append(rec.special_p, [f[1] for f in found]),
                      special_u=np.vstack([rec.special_u, [f[0] for f in found]]),
                      special_phi=np.vstack([rec.special_phi, np.full((n, pde.lmax), np.nan)]),
                      special_index=np.append(rec.special_index, [f[2] for f in found]).astype(int))
    return rec


def _uniform(prob):
    c = prob.config.continuation
    lo, hi = c.range
    ds = c.step
    if prob.parameter == "nu":                 # below the spacing of the branch points, so none is skipped
        nus = sorted(x for x in (eq.nu_sharp(prob.pde, ell) for ell in range(1, prob.pde.lmax + 1)) if lo < x < hi)
        if len(nus) > 1:
            ds = min(ds, float(np.diff(nus).min()) / 3)
    ds = max(ds, (hi - lo) / (c.max_points - 2))    # the point budget covers the range (a branch point closer
    #                                                 than that to another is reported as the budget's)
    return ct.continue_branch(prob.F, prob.J, np.zeros(prob.pde.lmax), lo, ds=ds, ds_max=ds, ds_min=ds * 1e-6,
                              p_range=(lo, hi), max_steps=c.max_points, direction=1)


def _switched(prob, point, side):
    c = prob.config.continuation
    return ct.switch_branch(prob.F, prob.J, point, side=side, ds=c.step / 2, ds_max=c.step, ds_min=c.step * 1e-6,
                            p_range=c.range, max_steps=c.max_points, stop=prob.resolved)


def degree_of(phi):
    """The degree ``l`` of a critical direction: that of its largest coefficient.

    Parameters
    ----------
    phi : ndarray, shape (lmax,)
        The direction's coefficients ``b_1..b_lmax``.

    Returns
    -------
    int
        ``l >= 1``.
    """
    return int(np.argmax(np.abs(phi))) + 1


def _name(degree, side):
    return "uniform" if degree == 0 else f"degree{degree}_{'plus' if side > 0 else 'minus'}"


def kept_branch(folder, name, make, bar=None, log=None) -> BranchRecord:
    """The branch record ``name``: from ``folder/<name>.npz`` when a run finished it earlier (told to ``log``), else
    ``make()``, saved there (:meth:`BranchRecord.to_npz`); ``bar`` (tqdm) advances by one.

    Parameters
    ----------
    folder : pathlib.Path or None
        The job's partial folder (None: nothing is read or saved).
    name : str
        The branch's file stem.
    make : callable
        ``make() -> BranchRecord``, called when the folder has no finished record.
    bar : tqdm, optional
    log : callable, optional
        ``log(line)`` told when a record is taken from the folder.

    Returns
    -------
    BranchRecord

    Raises
    ------
    ValueError
        If the folder's file is not a branch record.
    """
    path = None if folder is None else Path(folder) / f"{name}.npz"
    if path is not None and path.is_file():
        rec = BranchRecord.from_npz(path)
        if log:
            log(f"{name}: finished earlier ({rec.n_points} points), taken from {path}")
    else:
        rec = make()
        if path is not None:
            rec.to_npz(path)
    if bar is not None:
        bar.update(1)
    return rec


def _switched_task(config, folder, progress, shared, item):
    """Stage 2 of :func:`compute_branches`, one task: the switched branch ``item = (ell, side, sign, u, p, phi,
    index)`` (the branch point's state, parameter, critical direction and segment) through :func:`kept_branch`, on
    the ``shared`` :class:`Problem` of stage 1 when the tasks run one after the other in this process (None: a
    Problem of its own, for threads, whose tasks must not share its closures and model caches, and for processes, to
    which a config pickles where a Problem does not; the same records either way); returns ``(record, log
    lines)``."""
    ell, side, sign, u, p, phi, index = item
    prob = shared
    if prob is None:
        prob = Problem(config, build_model(config))
        prob.progress = progress
    point = ct.SpecialPoint("branch_point", u, p, phi, index)
    lines = []
    rec = kept_branch(folder, _name(ell, side),
                      lambda: _branch_record(prob, _switched(prob, point, sign), ell, side), log=lines.append)
    return rec, lines


def compute_branches(config: EquilibriaConfig, folder=None, progress=None, log=None, executor=None
                     ) -> list[BranchRecord]:
    """Every branch of ``config`` as a :class:`BranchRecord` (uniform first), saving each into ``folder`` as it
    finishes and taking the ones already there.

    Two stages: the uniform branch (here), then the switched branches, which depend on it only, one task per
    requested ``(degree, side)`` through :func:`meanfield.workflow.tasks.iter_tasks` (a plain loop, or a local
    dask scheduler of :data:`~meanfield.workflow.tasks.EXECUTORS`: the same calls, so the same records bit for
    bit, in the same order).  Every requested degree's branch point is checked before any switched branch starts.

    Parameters
    ----------
    config : EquilibriaConfig
    folder : pathlib.Path, optional
        The job's partial folder (None: nothing is saved or taken).
    progress : bool, optional
        Progress bar over the branches (None: tqdm decides).
    log : callable, optional
        ``log(line)`` told of each branch taken from ``folder``.
    executor : {"threads", "processes", "synchronous"}, optional
        Run the switched branches on this local dask scheduler (None: a plain loop).

    Returns
    -------
    list of BranchRecord
        The uniform branch, then the switched ones in the order of ``continuation.degrees`` x ``sides``.

    Raises
    ------
    ValueError
        If ``config`` is not an :class:`EquilibriaConfig`, is above the cost limits, its range never reaches a
        requested degree's branch point, ``progress`` not a boolean or None, or ``executor`` is not None or one of
        :data:`~meanfield.workflow.tasks.EXECUTORS` (both checked before any branch).
    """
    from tqdm import tqdm

    if not isinstance(config, EquilibriaConfig):
        raise ValueError(f"config must be an EquilibriaConfig; received {type(config).__name__}")
    if progress is not None:                          # before the uniform branch (iter_tasks checks them again)
        validate.boolean("progress", progress)
    if executor is not None:
        validate.choice("executor", executor, list(EXECUTORS))
    pde = check_config(config)
    prob = Problem(config, pde)
    prob.progress = progress
    c = config.continuation
    folder = None if folder is None else Path(folder)
    wanted = [(ell, s) for ell in c.degrees for s in c.sides]
    # stage 1: the uniform branch (its bar is replaced by stage 2's, which starts at 1: one bar on screen)
    bar = tqdm(total=1 + len(wanted), desc="equilibria (branches)", leave=False,
               disable=None if progress is None else not progress)
    try:
        uni = kept_branch(folder, "uniform", lambda: _branch_record(prob, _uniform(prob), 0, 0), bar, log)
    finally:
        bar.close()
    points = [ct.SpecialPoint("branch_point", uni.special_u[j], float(uni.special_p[j]), uni.special_phi[j],
                              int(uni.special_index[j]))
              for j in np.flatnonzero(uni.special_kind == "branch_point")]
    items = []
    for ell, side in wanted:
        at = [bp for bp in points if degree_of(bp.phi) == ell]
        if not at:
            raise ValueError(f"continuation.{c.parameter}_range = {list(c.range)} holds no branch point of degree "
                             f"{ell} of the uniform state (the uniform branch found "
                             f"{[(degree_of(bp.phi), round(bp.p, 8)) for bp in points]}): widen the range, or drop "
                             f"{ell} from continuation.degrees")
        bp = at[0]
        sign = side * (1.0 if bp.phi[ell - 1] > 0 else -1.0)
        items.append((ell, side, sign, bp.u, bp.p, bp.phi, bp.index))
    # stage 2: the switched branches, one task each
    out = [uni] + [None] * len(items)
    shared = prob if executor in (None, "synchronous") else None     # one model per job where the tasks run in turn
    for i, (rec, lines) in iter_tasks(functools.partial(_switched_task, config, folder, progress, shared), items,
                                      executor=executor, catch=False, progress=progress,
                                      desc="equilibria (branches)", done=1):
        out[1 + i] = rec
        for line in lines if log else ():
            log(line)
    return out
