r"""``meanfield equilibria`` with general heads (MODEL.md sections 7 and 8): stationary states on the full sphere.

With general heads (``M_h``, ``V_h`` given, mean normalization and ``V_h = c_h M_h``: the velocity is the gradient
of ``Phi = sum_h c_h A_K^h rho``) the uniform density is in general not stationary, so no branch leaves it.  The
job follows instead the **primary branch**: the stationary state the uniform density relaxes to at the top of
``continuation.nu_range`` (Newton from uniform; at large noise the state is unique and keeps the heads'
symmetries), continued down in ``nu`` by pseudo-arclength on the full sphere
(:class:`~meanfield.analysis.sphere_states.GibbsProblem`: every spherical-harmonic coefficient up to
``geometry.lmax``, dense Jacobians), through folds, with its simple branch points located; at each located branch
point the **switched branches** on the requested ``continuation.sides`` (the sign of the critical mode, oriented so
that its largest coefficient is positive).  Along every branch: the order parameter ``|int x rho|``, the
eigenvalues of the second moment ``int x x^T rho`` (where a state concentrates: a plane, an axis), the free energy
``G = 1/2 <rho, Phi[rho]> - nu int rho log rho`` (ascended by the flow; ``dG/dnu = -int rho log rho`` along a
branch), the leading eigenvalues of the PDE linearized on the whole sphere
(:func:`~meanfield.analysis.sphere_states.sphere_spectrum`) with the rotation modes of the heads' symmetries
identified and left out of the stability verdict, and the resolution error.

A symmetry-breaking bifurcation whose critical modes form a pair (a rotation-invariant family: the ``m = 1`` pair
of heads symmetric about an axis) does not change the sign of the Jacobian's determinant and is not a located
branch point: it shows as the loss of stability of the branch (two eigenvalues crossing together), which the
dataset records.  The switched branches, which depend on the primary only, run as one task each through
:func:`meanfield.workflow.tasks.iter_tasks` (a plain loop, or a local dask scheduler: ``executor``, the same records
bit for bit).  Resume, lock and provenance are the job's (:mod:`meanfield.workflow.equilibria_job`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import xarray as xr

from ..analysis import continuation as ct
from ..analysis import sphere_states as ss
from ..analysis.equilibria import at_noise
from ..core import cost, validate
from ..models.continuum import ContinuumPDE
from .equilibria_branches import JACOBIANS_PER_POINT, BranchRecord, kept_branch
from .equilibria_sphere import EXTRA_EIGENVALUES, NEUTRAL_TOL
from .tasks import EXECUTORS, iter_tasks

__all__ = ["general_model", "check_general", "general_branches", "general_dataset",
           "general_summary", "branch_label", "START_TOL"]

START_TOL = 1e-12
"""Largest residual ``max |u - G(u)|`` of the first state (Newton from the uniform density at ``nu_range[1]``)."""


def general_model(config) -> ContinuumPDE:
    """The S^2 model of a config with general heads (:func:`meanfield.workflow.run.build_heads`).

    Parameters
    ----------
    config : EquilibriaConfig
        A config whose heads give ``M`` and ``V``.

    Returns
    -------
    ContinuumPDE
        At ``lmax = geometry.lmax``, without noise (the continuation sets ``nu``).
    """
    from .run import build_heads

    return ContinuumPDE(build_heads(config), lmax=config.geometry.lmax)


def _points(config) -> int:
    c = config.continuation
    lo, hi = c.nu_range
    return int(min(c.max_points, 2 * (hi - lo) / c.step + 10))


def check_general(config) -> ss.GibbsProblem:
    """The continuation problem of ``config``, after the checks: gradient heads (``ValueError`` naming the head
    otherwise), heads that are not all zonal-like (the full rotation group makes every clustered state a sphere of
    states: give ``lam`` instead, the axisymmetric job), and the cost estimate of the branches
    (:mod:`meanfield.core.cost`).

    Parameters
    ----------
    config : EquilibriaConfig
        A config with general heads.

    Returns
    -------
    meanfield.analysis.sphere_states.GibbsProblem
        The continuation problem of its model.

    Raises
    ------
    ValueError
        Branches above the memory or time limit, heads all multiples of the identity, or heads that are not
        gradient heads (named ``heads``).
    """
    pde = general_model(config)
    g = pde.grid
    # the primary and the switches at two branch points (every located one is switched: a primary with more runs
    # longer than this estimate; the march's own max_points still bounds each branch)
    branches = 1 + 2 * len(config.continuation.sides)
    est = ss.gibbs_problem_cost(g.lmax, g.nlat * g.nlon, jacobians=JACOBIANS_PER_POINT * _points(config) * branches)
    cost.guard(f"meanfield equilibria with general heads (lmax = {g.lmax}, about {_points(config)} points per branch, "
               f"{branches} branches)", bytes=est.bytes, seconds=est.seconds, detail=est.detail,
               fix="a smaller geometry.lmax, a larger continuation.step or a narrower continuation.nu_range")
    if pde.general is None:                                   # every head M = V = lam I: the zonal path
        raise ValueError("heads: every head is invariant under all rotations (M and V multiples of the identity): "
                         "give them as zonal heads (lam), which the axisymmetric job continues from the uniform state")
    try:
        return ss.GibbsProblem(pde)
    except ValueError as err:
        raise ValueError(f"heads: {err}") from None


def branch_label(kind, side, parent_p=None) -> str:
    """``"primary"`` or ``"switched at nu = ... (+)"``.

    Parameters
    ----------
    kind : str
        ``"primary"`` or ``"switched"``.
    side : int
        The sign followed from the branch point (switched branches).
    parent_p : float, optional
        ``nu`` of the branch point a switched branch leaves.

    Returns
    -------
    str
    """
    if kind == "primary":
        return "primary"
    return f"switched at nu = {parent_p:.6g} ({'+' if side > 0 else '-'})"


def _orient(phi):
    """The null vector with its largest coefficient positive (a deterministic meaning of a side)."""
    return phi if phi[np.argmax(np.abs(phi))] > 0 else -phi


def _state(prob, u, nu):
    """First moment (3,), second-moment eigenvalues (3,), free energy and ``int rho log rho`` of the Gibbs state of
    ``u`` (the state itself at a stationary point; positive on the nodes, where a truncated expansion need not be).
    The free energy is NaN for a non-symmetric ``M_h`` (``P`` not symmetric: the Gibbs states are stationary, but
    not the critical points of ``G``)."""
    f, phi = prob._gibbs(u, nu)
    wf = prob._w * f
    x = prob.grid.nodes.reshape(-1, 3)
    r = np.r_[prob.r0, u]
    f_log_f = float(wf @ np.log(np.maximum(f, np.finfo(float).tiny)))
    G = 0.5 * float(r @ prob._P @ r) - nu * f_log_f if prob.symmetric else float("nan")
    return wf @ x, np.linalg.eigvalsh(x.T @ (wf[:, None] * x)), G, f_log_f


def _point(prob, u, nu, k):
    """Per state: :func:`_state`, the leading eigenvalues (k,), their rotation parts (k,), stability and resolution
    error."""
    pde = at_noise(prob.pde, nu)               # the model at the branch's parameter, the state's noise
    rho = prob.coefficients(u)
    first, second, G, f_log_f = _state(prob, u, nu)
    vals, rot = ss.sphere_spectrum(pde, rho, k=k)
    scale = float(np.abs(vals).max())
    neutral = (rot > 1 - NEUTRAL_TOL) & (np.abs(vals) <= np.sqrt(NEUTRAL_TOL) * scale)
    stable = int(bool(np.all(vals.real[~neutral] < 0)))
    return first, second, G, f_log_f, vals, rot, stable, ss.sphere_resolution_error(pde, rho)


def _record(prob, config, br, kind, side, parent_p):
    k = config.continuation.n_eigenvalues + EXTRA_EIGENVALUES
    rows = [_point(prob, u, p, k) for u, p in zip(br.u, br.p)]
    sp = br.special
    n = prob.size
    return BranchRecord(u=br.u, p=br.p, t_p=br.t_p, degree=-1, side=side, status=br.status, message=br.message,
                        n_newton=br.n_newton, kind=kind, parent_p=np.nan if parent_p is None else parent_p,
                        first_moment=np.array([r[0] for r in rows]), second_moment=np.array([r[1] for r in rows]),
                        free_energy=np.array([r[2] for r in rows]), entropy=-np.array([r[3] for r in rows]),
                        eig=np.array([r[4] for r in rows]), rotation=np.array([r[5] for r in rows]),
                        stable=np.array([r[6] for r in rows]), resolution=np.array([r[7] for r in rows]),
                        special_kind=np.array([s.kind for s in sp], dtype="<U16"),
                        special_p=np.array([s.p for s in sp], dtype=float),
                        special_u=np.array([s.u for s in sp], dtype=float).reshape(len(sp), n),
                        special_phi=np.array([_orient(s.phi) for s in sp], dtype=float).reshape(len(sp), n),
                        special_located=np.array([s.located for s in sp], dtype=bool),
                        special_index=np.array([s.index for s in sp], dtype=int))


def _stop(prob):
    """The march's ``stop``: why it ends at ``(u, p)`` (a state ``prob``'s lmax does not resolve), or None."""
    def resolved(u, p):
        err = ss.sphere_resolution_error(at_noise(prob.pde, p), prob.coefficients(u))
        if err > ss.SPHERE_RESOLUTION_TOL:
            return (f"state not resolved at lmax = {prob.grid.lmax}: resolution error {err:.2e} > "
                    f"{ss.SPHERE_RESOLUTION_TOL:g} at nu = {p:.10g} (use a larger geometry.lmax)")
        return None
    return resolved


def _march(prob, config):
    """The pseudo-arclength settings of every branch of ``config`` (its ``stop`` on ``prob``)."""
    c = config.continuation
    return dict(ds_max=c.step, ds_min=c.step * 1e-6, p_range=tuple(c.nu_range), max_steps=c.max_points,
                stop=_stop(prob))


def _name(j, side):
    return f"switched{j}_{'plus' if side > 0 else 'minus'}"


def _switched_task(config, folder, shared, item):
    """Stage 2 of :func:`general_branches`, one task: the switched branch ``item = (j, side, u, p, phi, index)``
    (the primary's special point ``j``: its state, ``nu``, oriented critical direction and segment) through
    :func:`~meanfield.workflow.equilibria_branches.kept_branch`, on the ``shared`` problem of stage 1 when the tasks
    run one after the other in this process (None: a problem of its own, :func:`check_general` of the config, for
    threads, which must not share a model, and for processes, to which a config pickles; the same records either
    way); returns ``(record, log lines)``."""
    j, side, u, p, phi, index = item
    prob = check_general(config) if shared is None else shared
    march = _march(prob, config)
    bp = ct.SpecialPoint("branch_point", u, p, phi, index)
    lines = []
    rec = kept_branch(folder, _name(j, side), lambda: _record(
        prob, config, ct.switch_branch(prob.F, prob.jacobian, bp, side=side, ds=config.continuation.step / 2,
                                       **march), "switched", side, bp.p), log=lines.append)
    return rec, lines


def general_branches(config, folder=None, progress=None, log=None, executor=None) -> list[BranchRecord]:
    """The primary branch and the switched ones (:class:`~meanfield.workflow.equilibria_branches.BranchRecord`),
    each saved into ``folder`` as it finishes and taken from there by a rerun.

    Two stages: the primary branch (here), then the switched branches, which depend on it only, one task per
    located branch point and side through :func:`meanfield.workflow.tasks.iter_tasks` (a plain loop, or a local
    dask scheduler of :data:`~meanfield.workflow.tasks.EXECUTORS`: the same calls, so the same records bit for
    bit, in the same order).

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
        The primary branch, then the switched ones by branch point (in the primary's order) and
        ``continuation.sides``.

    Raises
    ------
    ValueError
        If the config is refused (:func:`check_general`), the first state cannot be found, or ``progress`` is not
        a boolean or ``executor`` not None or one of :data:`~meanfield.workflow.tasks.EXECUTORS` (checked first).
    """
    from tqdm import tqdm

    if progress is not None:                          # before the primary branch (iter_tasks checks them again)
        validate.boolean("progress", progress)
    if executor is not None:
        validate.choice("executor", executor, list(EXECUTORS))
    prob = check_general(config)
    c = config.continuation
    hi = c.nu_range[1]
    folder = None if folder is None else Path(folder)
    desc = "equilibria (general heads, branches)"

    def primary():
        u0, res, it = prob.solve(np.zeros(prob.size), hi, tol=START_TOL)
        if res > START_TOL:
            raise ValueError(f"continuation.nu_range: Newton from the uniform density at nu = nu_range[1] = {hi:g} "
                             f"did not converge (residual {res:.3g} after {it} steps): raise nu_range[1], where the "
                             f"stationary state is close to uniform")
        br = ct.continue_branch(prob.F, prob.jacobian, u0, hi, ds=c.step, direction=-1, **_march(prob, config))
        return _record(prob, config, br, "primary", 0, None)

    # stage 1: the primary branch (its bar is replaced by stage 2's, which starts at 1: one bar on screen)
    bar = tqdm(total=1, desc=desc, leave=False, disable=None if progress is None else not progress)
    try:
        first = kept_branch(folder, "primary", primary, bar, log)
    finally:
        bar.close()
    items = [(int(j), side, first.special_u[j], float(first.special_p[j]), first.special_phi[j],
              int(first.special_index[j]))
             for j in np.flatnonzero(first.special_kind == "branch_point") if first.special_located[j]
             for side in c.sides]
    # stage 2: the switched branches, one task each
    out = [first] + [None] * len(items)
    shared = prob if executor in (None, "synchronous") else None     # one model per job where the tasks run in turn
    for i, (rec, lines) in iter_tasks(functools.partial(_switched_task, config, folder, shared), items,
                                      executor=executor, catch=False, progress=progress, desc=desc, done=1):
        out[1 + i] = rec
        for line in lines if log else ():
            log(line)
    return out


_DESCRIPTIONS = {
    "parameter": "the continuation parameter (nu)", "nu": "noise nu",
    "order_parameter": "|int x rho|: the norm of the first moment",
    "first_moment": "int x rho (the state's mean direction)",
    "second_moment": "eigenvalues of int x x^T rho, increasing (sum 1; one near 1: concentrated on an axis, two "
                     "near 1/2: on a plane)",
    "free_energy": "G = 1/2 <rho, Phi[rho]> - nu int rho log rho (the flow ascends G; NaN for a non-symmetric M_h)",
    "entropy": "-int rho log rho (dG/dnu along a branch, the envelope identity, where G exists)",
    "stable": "1: every eigenvalue on the full sphere < 0 but the rotation modes; 0: not; -1: no point",
    "eigenvalue_real": "real part of the leading eigenvalues of the PDE linearized on the full sphere",
    "eigenvalue_imag": "imaginary part of the leading eigenvalues",
    "rotation": "part of each eigenvector along the rotation orbit of the heads' symmetries (1: a neutral mode)",
    "resolution_error": "the resolution error of the state at lmax (sphere_resolution_error)",
    "coefficients": "the state's coordinates in the real orthonormal spherical-harmonic basis (to_real_basis)",
    "branch_kind": "primary (from the uniform density at nu_range[1]) or switched (at a branch point of the primary)",
    "branch_side": "sign of the critical mode followed (0: the primary)",
    "branch_parent_parameter": "nu of the branch point a switched branch leaves (NaN: the primary)",
    "branch_status": "0 range or budget covered; 1 corrector failed; 2 not resolved",
    "branch_message": "how the branch ended", "branch_n_points": "points of the branch",
    "special_branch": "branch of the special point", "special_kind": "fold or branch_point",
    "special_parameter": "nu of the special point", "special_located": "located to the arclength tolerance",
    "special_order_parameter": "|int x rho| at the special point",
    "special_free_energy": "G at the special point",
    "special_coefficients": "the special point's coordinates (real basis)",
}


def general_dataset(config, records, elapsed_s=float("nan")) -> xr.Dataset:
    """The equilibria dataset of :func:`general_branches`' records (dimensions ``branch``, ``point``,
    ``coefficient``, ``eigenvalue``, ``axis``, ``special``; variables in ``_DESCRIPTIONS``).  Attribute
    ``heads = "general"`` tells it from the axisymmetric job's.

    Parameters
    ----------
    config : EquilibriaConfig
        The job's config (general heads).
    records : list of BranchRecord
        The branches, primary first.
    elapsed_s : float
        Wall time of the computation (attribute ``elapsed_s``).

    Returns
    -------
    xarray.Dataset
    """
    from .._version import __version__
    from .results import SCHEMA_VERSION

    prob = ss.GibbsProblem(general_model(config))
    B, P = len(records), max(r.n_points for r in records)
    k = records[0].eig.shape[1]
    nc = prob.size + 1
    pad = lambda *shape: np.full((B, P) + shape, np.nan)       # noqa: E731
    par, G, S, order, res = pad(), pad(), pad(), pad(), pad()
    first, second, coeffs, rot = pad(3), pad(3), pad(nc), pad(k)
    ev = np.full((B, P, k), np.nan + 0j)
    stable = np.full((B, P), -1, np.int8)
    for i, r in enumerate(records):
        n = r.n_points
        par[i, :n], G[i, :n], S[i, :n], res[i, :n] = r.p, r.free_energy, r.entropy, r.resolution
        first[i, :n], second[i, :n] = r.first_moment, r.second_moment
        order[i, :n] = np.linalg.norm(r.first_moment, axis=1)
        coeffs[i, :n, 0], coeffs[i, :n, 1:] = prob.r0, r.u
        ev[i, :n], rot[i, :n], stable[i, :n] = r.eig, r.rotation, r.stable
    bp, sp = ("branch", "point"), [(i, j) for i, r in enumerate(records) for j in range(len(r.special_p))]
    sp_u = np.array([records[i].special_u[j] for i, j in sp]).reshape(len(sp), prob.size)
    states = [_state(prob, u, float(records[i].special_p[j])) for (i, j), u in zip(sp, sp_u)]
    sp_G, sp_order = [s_[2] for s_ in states], [float(np.linalg.norm(s_[0])) for s_ in states]
    variables = {"parameter": (bp, par), "nu": (bp, par.copy()), "order_parameter": (bp, order),
                 "first_moment": (bp + ("xyz",), first), "second_moment": (bp + ("axis",), second),
                 "free_energy": (bp, G), "entropy": (bp, S), "stable": (bp, stable),
                 "eigenvalue_real": (bp + ("eigenvalue",), ev.real), "eigenvalue_imag": (bp + ("eigenvalue",), ev.imag),
                 "rotation": (bp + ("eigenvalue",), rot), "resolution_error": (bp, res),
                 "coefficients": (bp + ("coefficient",), coeffs),
                 "branch_kind": (("branch",), np.array([str(r.kind) for r in records], object)),
                 "branch_side": (("branch",), np.array([int(r.side) for r in records])),
                 "branch_parent_parameter": (("branch",), np.array([float(r.parent_p) for r in records])),
                 "branch_status": (("branch",), np.array([int(r.status) for r in records])),
                 "branch_message": (("branch",), np.array([str(r.message) for r in records], object)),
                 "branch_n_points": (("branch",), np.array([r.n_points for r in records])),
                 "special_branch": (("special",), np.array([i for i, _ in sp], int)),
                 "special_kind": (("special",), np.array([str(records[i].special_kind[j]) for i, j in sp], object)),
                 "special_parameter": (("special",), np.array([records[i].special_p[j] for i, j in sp], float)),
                 "special_located": (("special",), np.array([bool(records[i].special_located[j]) for i, j in sp],
                                                            np.int8)),
                 "special_order_parameter": (("special",), np.array(sp_order, float)),
                 "special_free_energy": (("special",), np.array(sp_G, float)),
                 "special_coefficients": (("special", "coefficient"), np.c_[np.full(len(sp), prob.r0), sp_u])}
    attrs = {"schema_version": SCHEMA_VERSION, "kind": "equilibria",
             "meanfield_version": __version__, "config": json.dumps(config.to_dict(), sort_keys=True),
             "parameter": "nu", "d": 3, "lmax": config.geometry.lmax, "geometry": "sphere", "heads": "general",
             "stability": "eigenvalues of the PDE linearized on the full sphere, every azimuthal order; the rotation "
                          "modes of the heads' symmetries left out", "elapsed_s": elapsed_s,
             "classification_message": "the transition's classification (classify_transition) is made for zonal "
                                       "heads; with general heads the uniform density is not stationary",
             "free_energy_message": ("G = 1/2 <rho, Phi> - nu int rho log rho, ascended by the flow" if prob.symmetric
                                     else "NaN: a non-symmetric M_h has no free energy G (its Gibbs states are "
                                          "stationary, not the critical points of G)"),
             "title": "meanfield equilibria: branches of stationary states of the noisy mean-field PDE, general heads"}
    ds = xr.Dataset(variables, coords={"branch": np.arange(B), "point": np.arange(P), "xyz": ["x", "y", "z"],
                                       "axis": ["lowest", "middle", "highest"], "coefficient": np.arange(nc),
                                       "eigenvalue": np.arange(k), "special": np.arange(len(sp))}, attrs=attrs)
    for name, text in _DESCRIPTIONS.items():
        ds[name].attrs.update(long_name=text, units="1")
    return ds


def general_summary(ds) -> list[str]:
    """The lines of :func:`meanfield.workflow.equilibria_job.equilibria_summary` for a general-heads dataset.

    Parameters
    ----------
    ds : xarray.Dataset
        A dataset of :func:`general_dataset`.

    Returns
    -------
    list of str
        One line per branch and per special point.
    """
    lines = []
    for b in ds.branch.values:
        n = int(ds.branch_n_points[b])
        lab = branch_label(str(ds.branch_kind.values[b]), int(ds.branch_side[b]),
                           float(ds.branch_parent_parameter[b]))
        lines.append(f"  {lab}: {n} points, {int((ds.stable.values[b, :n] == 1).sum())} stable; status "
                     f"{int(ds.branch_status[b])} ({ds.branch_message.values[b]})")
    for s in ds.special.values:
        lines.append(f"  {ds.special_kind.values[s]} on branch {int(ds.special_branch[s])}: nu = "
                     f"{float(ds.special_parameter[s]):.10g}, order parameter "
                     f"{float(ds.special_order_parameter[s]):.6g}" +
                     ("" if int(ds.special_located[s]) else " (not located: the segment's end)"))
    return lines
