r"""The equilibria job: ``meanfield equilibria CONFIG.toml --out DIR`` (MODEL.md section 7).

From an :class:`~meanfield.workflow.equilibria_config.EquilibriaConfig` it computes, on the axisymmetric PDE
(:class:`meanfield.AxisymmetricPDE`, ``S^{d-1}``; ``d = 2`` the circle):

* the **uniform branch**: the uniform state continued in the parameter (``nu``, or every head's ``beta`` at
  a fixed ``nu``) by pseudo-arclength (:func:`~meanfield.analysis.continuation.continue_branch` on
  :func:`~meanfield.analysis.equilibria.noise_problem` / ``beta_problem``), with its branch points (where a
  ``sigma_l`` of the uniform state vanishes; the degree ``l`` is the critical mode's);
* the **switched branches**: at each branch point of a requested degree, the branch leaving it
  (:func:`~meanfield.analysis.continuation.switch_branch`) on each requested side (the sign of ``b_l``),
  followed through folds until the parameter leaves its range, the point budget ends, the corrector fails
  (status 1) or its states are no longer resolved at ``lmax`` (status 2,
  :func:`~meanfield.analysis.equilibria.resolution_error`);
* along every branch: the order parameter ``|b_1| / sqrt(d)``, the free-energy gap ``G - G_uniform``
  (mean normalization; NaN otherwise), the leading eigenvalues of the linearization
  (:func:`~meanfield.analysis.equilibria.linear_spectrum`, the axisymmetric block: the rotation modes of a
  clustered state, azimuthal order ``m >= 1``, are not in it, so no neutral mode needs removing there) and
  stability (all of them ``< 0``); the folds; the Maxwell points (``G`` of the branch equals ``G`` of uniform,
  by Brent's method on the amplitude-parametrized states); for parameter ``nu`` the classification of the
  degree-1 transition (:func:`~meanfield.analysis.phase_transition.classify_transition`) as attributes.

With general heads (``M``, ``V`` given; ``geometry.d = "sphere"``) the branches are the primary branch and its
switches on the full sphere instead (:mod:`meanfield.workflow.equilibria_general`, its own dataset variables,
``attrs["heads"] = "general"``); the job's folder, lock, resume and ``executor`` are the same.

:func:`equilibria_job` writes the dataset (:func:`equilibria_dataset`, variables listed there) and the bifurcation
figure into a folder.  Each branch is saved to ``DIR/partial/`` as it finishes; a rerun of the same config
skips the finished branches (the same numbers, bit for bit) and the folder is removed once the dataset is
written.  A finished result is replaced only with ``force``.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import xarray as xr

from ..analysis import equilibria as eq
from ..analysis.phase_transition import classify_transition
from ..core import validate
from .equilibria_branches import (
    BranchRecord,
    Problem,
    build_model,
    check_config,
    compute_branches,
    config_has_free_energy,
    degree_of,
)
from .equilibria_config import EquilibriaConfig
from .inputs import parse_json
from .jobs import JobFolder, remove_stale_temporaries
from .tasks import EXECUTORS

__all__ = ["equilibria_dataset", "equilibria", "equilibria_job", "load_equilibria",
           "equilibria_summary", "failures", "equilibria_config_of", "EQUILIBRIA_SCHEMA_VERSION",
           "FIGURE_FILE", "PARTIAL"]


_RENAMED = {"to_dataset": "equilibria_dataset", "summary": "equilibria_summary"}
"""The names of 0.2 and their replacements (one public name, one meaning: issue 32)."""


def __getattr__(name):
    """Module attribute fallback: the names of 0.2 (:data:`_RENAMED`) raise an ``AttributeError`` naming their
    replacement.

    Parameters
    ----------
    name : str
        The attribute looked up.

    Raises
    ------
    AttributeError
        Always (this is called only for names the module does not define).
    """
    if name == "EquilibriaExists":
        raise AttributeError("meanfield.workflow.equilibria_job.EquilibriaExists was replaced by "
                             "meanfield.workflow.jobs.ResultExists in 0.3 (every job's refusal of a finished result)")
    if name in _RENAMED:
        raise AttributeError(f"meanfield.workflow.equilibria_job.{name} was renamed {_RENAMED[name]} in 0.3 (the run's are run_dataset and run_summary)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

EQUILIBRIA_SCHEMA_VERSION = 1
"""Layout of the equilibria dataset (attribute ``equilibria_schema_version``; ``kind = "equilibria"``)."""
FIGURE_FILE = "bifurcation.png"
PARTIAL = "partial"
"""The folder of ``DIR`` holding finished branches of an unfinished job."""


# ----------------------------------------------------------------------------------------------- dataset
_DESCRIPTIONS = {
    "parameter": "continuation parameter (attribute parameter: nu or beta)", "nu": "noise nu",
    "beta": "inverse temperature beta of every head",
    "order_parameter": "order parameter |int x rho| = |b_1| / sqrt(d)",
    "amplitude": "the branch's amplitude |b_l| / Q_l(1), l its degree (1 at a point mass; l = 1: the order "
                 "parameter; the uniform branch: 0)",
    "free_energy_gap": "free-energy gap G - G_uniform, G = E - nu int rho log rho (mean; Sinkhorn: E_S; NaN for softmax)",
    "stable": "1: every eigenvalue of the axisymmetric block < 0; 0: not; -1: no point",
    "eigenvalue_real": "real part of the leading eigenvalues of the linearized PDE (axisymmetric block)",
    "eigenvalue_imag": "imaginary part of the leading eigenvalues of the linearized PDE (axisymmetric block)",
    "coefficients": "Gegenbauer coefficients b_l of the state (density w.r.t. the normalized uniform measure)",
    "resolution_error": "resolution error of the state at lmax (meanfield.analysis.equilibria.resolution_error)",
    "branch_degree": "degree l of the branch point the branch leaves (0: the uniform branch)",
    "branch_side": "sign of the branch's amplitude b_l (0: the uniform branch)",
    "branch_status": "0: the range or point budget was covered; 1: the corrector failed; 2: states not resolved",
    "branch_message": "how the branch ended", "branch_n_points": "number of points of the branch",
    "special_branch": "index of the branch holding the special point",
    "special_kind": "fold, branch_point or maxwell", "special_parameter": "parameter at the special point",
    "special_degree": "degree of a branch point's critical mode (0 otherwise)",
    "special_order_parameter": "order parameter at the special point",
    "special_amplitude": "amplitude |b_l| / Q_l(1) at the special point (l: its branch's degree; a branch "
                         "point's own degree)",
    "special_free_energy_gap": "free-energy gap G - G_uniform at the special point",
    "special_coefficients": "Gegenbauer coefficients b_l at the special point",
}


def equilibria_dataset(config: EquilibriaConfig, records: list[BranchRecord], classification=None,
                       elapsed_s=float("nan")):
    """The equilibria dataset of :func:`compute_branches`' records.

    Dimensions ``branch``, ``point`` (padded with NaN), ``l`` (0..lmax), ``eigenvalue`` and ``special``.
    Variables: ``parameter``, ``nu``, ``beta``, ``order_parameter``, ``amplitude``, ``free_energy_gap``,
    ``stable`` (int8, -1 where no point), ``resolution_error`` (branch, point); ``eigenvalue_real`` /
    ``_imag`` (branch, point, eigenvalue); ``coefficients`` (branch, point, l); ``branch_degree``,
    ``branch_side``, ``branch_status``, ``branch_message``, ``branch_n_points`` (branch); ``special_branch``,
    ``special_kind``, ``special_parameter``, ``special_degree``, ``special_order_parameter``,
    ``special_amplitude``, ``special_free_energy_gap``
    (special) and ``special_coefficients`` (special, l).  Attributes: ``kind = "equilibria"``, the schema
    versions, ``config`` (JSON), ``parameter``, ``d``, ``lmax``, the classification of the degree-1 transition
    (``nu_sharp``, ``nu_2``, ``transition``, ``nu_fold``, ``b1_fold``, ``nu_global``, ``b1_global``; parameter
    nu) or ``classification_message``.  (Named ``to_dataset`` in 0.2; the run's is
    :func:`meanfield.workflow.run.run_dataset`.)

    Parameters
    ----------
    config : EquilibriaConfig
    records : list of BranchRecord
        The branch records of :func:`~meanfield.workflow.equilibria_branches.compute_branches`, in order.
    classification : dict, optional
        Attributes of the degree-1 transition (``Transition.to_dict()`` of
        :func:`~meanfield.analysis.phase_transition.classify_transition`), or ``classification_message``.
    elapsed_s : float
        Wall time of the computation (attribute ``elapsed_s``).

    Returns
    -------
    xarray.Dataset
    """
    from .._version import __version__
    from .results import SCHEMA_VERSION

    c, lmax, d = config.continuation, config.geometry.lmax, config.geometry.dim
    B, P, k = len(records), max(r.n_points for r in records), c.n_eigenvalues
    model0 = build_model(config)
    top = model0.basis(np.array([1.0]))[:, 0]                   # Q_l(1): |b_l| of a point mass
    data = {name: np.full((B, P), np.nan) for name in ("parameter", "nu", "beta", "order_parameter", "amplitude",
                                                       "free_energy_gap", "resolution_error")}
    stable = np.full((B, P), -1, np.int8)
    ev = np.full((B, P, k), np.nan + 0j)
    coeffs = np.full((B, P, lmax + 1), np.nan)
    for i, r in enumerate(records):
        n = r.n_points
        data["parameter"][i, :n] = r.p
        data["nu"][i, :n] = r.p if c.parameter == "nu" else c.nu
        data["beta"][i, :n] = r.p if c.parameter == "beta" else (model0.heads[0].beta if len(
            {h.beta for h in config.heads}) == 1 else np.nan)
        data["order_parameter"][i, :n] = r.order
        data["amplitude"][i, :n] = np.abs(r.u[:, r.degree - 1]) / top[r.degree] if r.degree else 0.0
        data["free_energy_gap"][i, :n] = r.gap
        data["resolution_error"][i, :n] = r.resolution
        stable[i, :n] = r.stable
        ev[i, :n] = r.eig
        coeffs[i, :n, 0] = 1.0
        coeffs[i, :n, 1:] = r.u
    variables = {name: (("branch", "point"), v) for name, v in data.items()}
    variables.update(stable=(("branch", "point"), stable), eigenvalue_real=(("branch", "point", "eigenvalue"), ev.real),
                     eigenvalue_imag=(("branch", "point", "eigenvalue"), ev.imag),
                     coefficients=(("branch", "point", "l"), coeffs))
    variables.update({f"branch_{key}": (("branch",), np.array([getattr(r, key) for r in records], dtype=dt))
                      for key, dt in (("degree", int), ("side", int), ("status", int), ("message", object))})
    variables["branch_n_points"] = (("branch",), np.array([r.n_points for r in records]))
    sp = [(i, kind, p, u) for i, r in enumerate(records)
          for kind, p, u in zip(r.special_kind, r.special_p, r.special_u)]
    sp_deg = [(degree_of(phi) if kind == "branch_point" else 0) for r in records
              for kind, phi in zip(r.special_kind, r.special_phi)]
    sp_u = np.array([np.r_[1.0, s[3]] for s in sp]).reshape(len(sp), lmax + 1)
    gaps = []
    prob = Problem(config, model0)
    for i, kind, p, u in sp:
        gaps.append(eq.free_energy_gap(prob.at(p), np.r_[1.0, u]) if config_has_free_energy(config) else np.nan)
    variables.update(special_branch=(("special",), np.array([s[0] for s in sp], int)),
                     special_kind=(("special",), np.array([str(s[1]) for s in sp], object)),
                     special_parameter=(("special",), np.array([s[2] for s in sp], float)),
                     special_degree=(("special",), np.array(sp_deg, int)),
                     special_order_parameter=(("special",), np.abs(sp_u[:, 1]) / np.sqrt(d)),
                     special_amplitude=(("special",), np.array([
                         abs(u[ell]) / top[ell] if ell else 0.0 for u, ell in zip(sp_u, [
                             deg or records[s[0]].degree for s, deg in zip(sp, sp_deg)])], float)),
                     special_free_energy_gap=(("special",), np.array(gaps, float)),
                     special_coefficients=(("special", "l"), sp_u))
    attrs = {"schema_version": SCHEMA_VERSION, "equilibria_schema_version": EQUILIBRIA_SCHEMA_VERSION,
             "kind": "equilibria", "meanfield_version": __version__,
             "config": json.dumps(config.to_dict(), sort_keys=True), "parameter": c.parameter, "d": d, "lmax": lmax,
             "geometry": "sphere" if config.geometry.sphere else "axisymmetric",
             "stability": "eigenvalues of the axisymmetric block (azimuthal order 0); the rotation modes of a "
                          "clustered state (m >= 1) are not in it" + (
                              "; sphere_stable: every azimuthal order on the full sphere, the rotation modes left out"
                              if config.geometry.sphere else ""), "elapsed_s": elapsed_s,
             "title": "meanfield equilibria: branches of stationary states of the noisy mean-field PDE"}
    for key, val in (classification or {}).items():
        attrs[key] = val
    descriptions = dict(_DESCRIPTIONS)
    if config.geometry.sphere:
        from .equilibria_sphere import sphere_variables

        more, text = sphere_variables(records, P, lmax)
        variables.update(more)
        descriptions.update(text)
    ds = xr.Dataset(variables, coords={"branch": np.arange(B), "point": np.arange(P), "l": np.arange(lmax + 1),
                                       "eigenvalue": np.arange(k), "special": np.arange(len(sp))}, attrs=attrs)
    for name, text in descriptions.items():
        ds[name].attrs.update(long_name=text, units="1")
    return ds


def _classification(config):
    """``classify_transition`` of the degree-1 branch (parameter nu), as attributes (or why not)."""
    if config.continuation.parameter != "nu":
        return {"classification_message": "the classification of the transition is made for parameter nu only"}
    try:
        res = classify_transition(build_model(config))
    except (RuntimeError, ValueError) as err:
        return {"classification_message": f"classify_transition failed: {err}"}
    return {k: (float(v) if not isinstance(v, str) else v) for k, v in res.to_dict().items()}


def equilibria(config: EquilibriaConfig | None = None, folder=None, progress=None, log=None,
               executor=None) -> xr.Dataset:
    """The equilibria dataset of ``config`` (default: the built-in one); ``folder``: where finished branches are
    kept (and taken from) while it runs.

    Parameters
    ----------
    config : EquilibriaConfig, optional
        The job's config (default ``EquilibriaConfig()``).
    folder : str or path-like, optional
        The partial folder of finished branches (None: nothing is kept).
    progress : bool, optional
        Progress bars (None: only on a terminal).
    log : callable, optional
        ``log(line)`` told of each branch taken from ``folder``.
    executor : {"threads", "processes", "synchronous"}, optional
        Run the switched branches on this local dask scheduler
        (:func:`~meanfield.workflow.equilibria_branches.compute_branches`, or with general heads
        :func:`~meanfield.workflow.equilibria_general.general_branches`; None: a plain loop).

    Returns
    -------
    xarray.Dataset
        :func:`equilibria_dataset` (or, general heads, :func:`~meanfield.workflow.equilibria_general.general_dataset`).

    Raises
    ------
    ValueError
        ``config`` not an EquilibriaConfig, a non-boolean ``progress``, an unknown ``executor``, or what the job's
        checks refuse (cost, a range missing a requested branch point, heads the general path refuses).
    """
    config = EquilibriaConfig() if config is None else config
    if not isinstance(config, EquilibriaConfig):
        raise ValueError(f"config must be an EquilibriaConfig; received {type(config).__name__}")
    if progress is not None:
        validate.boolean("progress", progress)
    _check_executor(executor)
    started = time.perf_counter()
    if config.general:
        from .equilibria_general import general_branches, general_dataset

        records = general_branches(config, None if folder is None else Path(folder), progress, log,
                                   executor=executor)
        ds = general_dataset(config, records, elapsed_s=time.perf_counter() - started)
        ds.attrs["equilibria_schema_version"] = EQUILIBRIA_SCHEMA_VERSION
        return ds
    records = compute_branches(config, folder, progress, log, executor=executor)
    return equilibria_dataset(config, records, _classification(config), elapsed_s=time.perf_counter() - started)


# ----------------------------------------------------------------------------------------------- the job
def load_equilibria(path) -> xr.Dataset:
    """Read an equilibria dataset.

    Parameters
    ----------
    path : str or path-like
        The NetCDF file.

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    ValueError
        A missing or unreadable file, or another kind of dataset (or another equilibria schema version).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"equilibria file {str(path)!r} does not exist")
    try:
        with xr.open_dataset(path, engine="netcdf4") as f:
            ds = f.load()
    except OSError as err:
        raise ValueError(f"cannot read equilibria file {str(path)!r} as NetCDF: {err}") from None
    if ds.attrs.get("kind") != "equilibria" or int(ds.attrs.get("equilibria_schema_version", -1)) != \
            EQUILIBRIA_SCHEMA_VERSION:
        raise ValueError(f"{path} is not an equilibria dataset of schema {EQUILIBRIA_SCHEMA_VERSION} (kind = "
                         f"{ds.attrs.get('kind')!r}, equilibria_schema_version = "
                         f"{ds.attrs.get('equilibria_schema_version')!r})")
    return ds


def equilibria_config_of(ds: xr.Dataset) -> EquilibriaConfig:
    """The validated config stored in an equilibria dataset's ``config`` attribute (the job can be repeated).

    Parameters
    ----------
    ds : xarray.Dataset
        An equilibria dataset.

    Returns
    -------
    EquilibriaConfig

    Raises
    ------
    ValueError
        Not an equilibria dataset with a ``config`` attribute, or an attribute that is not a valid config
        (:class:`~meanfield.workflow.schema.ConfigError`).
    """
    if ds.attrs.get("kind") != "equilibria" or "config" not in ds.attrs:
        raise ValueError(f"ds must be an equilibria dataset with a 'config' attribute; received kind = "
                         f"{ds.attrs.get('kind')!r}")
    return EquilibriaConfig.from_dict(parse_json(ds.attrs["config"], "the dataset's 'config' attribute"))


def _label(degree, side):
    return "uniform" if degree == 0 else f"degree {degree} (b_{degree} {'>' if side > 0 else '<'} 0)"


def failures(ds: xr.Dataset) -> list[str]:
    """One line per branch that did not end normally (status 1 or 2), naming it, its status and message.

    Parameters
    ----------
    ds : xarray.Dataset
        An equilibria dataset.

    Returns
    -------
    list of str
    """
    return [f"{_branch_name(ds, b)}: status {int(ds.branch_status[b])}: {ds.branch_message.values[b]}"
            for b in ds.branch.values if int(ds.branch_status[b]) != 0]


def _branch_name(ds, b):
    if ds.attrs.get("heads") == "general":
        from .equilibria_general import branch_label

        return branch_label(str(ds.branch_kind.values[b]), int(ds.branch_side[b]), float(ds.branch_parent_parameter[b]))
    return _label(int(ds.branch_degree[b]), int(ds.branch_side[b]))


def equilibria_summary(ds: xr.Dataset) -> str:
    """A few lines describing an equilibria dataset: model, branches, special points, classification (the text
    ``meanfield equilibria`` prints; named ``summary`` in 0.2, the run's is :func:`meanfield.workflow.run.run_summary`).

    Parameters
    ----------
    ds : xarray.Dataset
        An equilibria dataset (:func:`equilibria`, or one loaded by :func:`load_equilibria`).

    Returns
    -------
    str

    Raises
    ------
    KeyError
        If ``ds`` lacks a variable or attribute of the equilibria schema.
    """
    cfg = parse_json(ds.attrs["config"], "the dataset's 'config' attribute")
    par = ds.attrs["parameter"]
    heads = ", ".join(("general M, V" if "M" in h else f"lambda {h.get('lam', 1.0):g}")
                      + (f" beta {h['beta']:.6g}" if "beta" in h else "")
                      + f" {h['kernel']}/{h['normalization']}" for h in cfg["heads"])
    where = ("S^2, every state also on the full sphere" if ds.attrs.get("geometry") == "sphere" else
             f"S^{ds.attrs['d'] - 1} (d = {ds.attrs['d']})")
    lines = [f"meanfield equilibria: {len(cfg['heads'])} head(s) [{heads}]; {where}, lmax {ds.attrs['lmax']}; {par} "
             f"in {cfg['continuation'][par + '_range']}"]
    if ds.attrs.get("heads") == "general":
        from .equilibria_general import general_summary

        return "\n".join(lines + general_summary(ds) + [f"  {ds.attrs['classification_message']}"])
    for b in ds.branch.values:
        n = int(ds.branch_n_points[b])
        stable = ds["sphere_stable" if "sphere_stable" in ds else "stable"].values[b, :n]
        lines.append(f"  {_label(int(ds.branch_degree[b]), int(ds.branch_side[b]))}: {n} points, "
                     f"{int((stable == 1).sum())} stable; status {int(ds.branch_status[b])} "
                     f"({ds.branch_message.values[b]})")
    for s in ds.special.values:
        kind = str(ds.special_kind.values[s])
        extra = f" (degree {int(ds.special_degree[s])})" if kind == "branch_point" else ""
        lines.append(f"  {kind}{extra} on branch {int(ds.special_branch[s])}: {par} = "
                     f"{float(ds.special_parameter[s]):.10g}, order parameter "
                     f"{float(ds.special_order_parameter[s]):.6g}")
    if "transition" in ds.attrs:
        lines.append(f"  degree-1 transition: {ds.attrs['transition']}; nu_sharp = {ds.attrs['nu_sharp']:.10g}, "
                     f"nu_fold = {ds.attrs['nu_fold']:.10g}, nu_global = {ds.attrs['nu_global']:.10g} "
                     f"(classify_transition)")
    elif "classification_message" in ds.attrs:
        lines.append(f"  {ds.attrs['classification_message']}")
    return "\n".join(lines)


def _check_executor(executor):
    """``executor``: None or one of :data:`~meanfield.workflow.tasks.EXECUTORS`."""
    if executor is not None:
        validate.choice("executor", executor, list(EXECUTORS))


def _check(config):
    """The config's checks and cost estimate (axisymmetric, or general heads on the full sphere)."""
    if config.general:
        from .equilibria_general import check_general

        return check_general(config)
    return check_config(config)


def _partial_matches(partial, text):
    f = partial / "config.toml"
    return f.is_file() and f.read_text() == text


def equilibria_job(config: EquilibriaConfig | None = None, out_dir="equilibria-output", progress=None, force=False,
                   log=None, executor=None) -> dict:
    """Compute the branches of ``config`` and write the dataset and the bifurcation figure into ``out_dir``.

    Finished branches go to ``out_dir/partial/`` as they finish; a rerun with the same config continues from
    them (an interrupted job gives the same numbers, bit for bit, as an uninterrupted one); the folder is removed
    once the dataset is written.  A folder holding a finished result (or the partial branches of another
    config) is refused unless ``force``, which removes them once the config's checks pass.  The folder is the
    one shape of every job (:class:`~meanfield.workflow.jobs.JobFolder`): locked while the job writes, stale
    temporaries removed, the dataset saved atomically with provenance, the figure after it.

    Parameters
    ----------
    config : EquilibriaConfig, optional
        The job's config (default ``EquilibriaConfig()``).
    out_dir : str or path-like
        The output folder (made if missing).
    progress : bool, optional
        Progress bars (None: only on a terminal).
    force : bool
        Replace a finished result, or discard another config's partial branches.
    log : callable, optional
        ``log(line)`` told of each branch taken from the partial folder.
    executor : {"threads", "processes", "synchronous"}, optional
        Run the switched branches on this local dask scheduler (None: a plain loop), the same records bit for bit
        (:func:`~meanfield.workflow.equilibria_branches.compute_branches`, or with general heads
        :func:`~meanfield.workflow.equilibria_general.general_branches`).

    Returns
    -------
    dict
        ``dataset``, ``paths`` (written files), ``summary`` (str) and ``failures`` (one line per branch that
        stopped with status 1 or 2; the command exits non-zero when there are any).

    Raises
    ------
    ResultExists
        A finished result in ``out_dir`` without ``force`` (:class:`meanfield.workflow.jobs.ResultExists`).
    ValueError
        ``config`` not an EquilibriaConfig, a non-boolean ``force``, an empty ``out_dir``, another config's partial
        branches without ``force``, an unknown ``executor``, or what the job's checks refuse.
    FolderInUse
        Another process holds the folder's lock.
    """
    config = EquilibriaConfig() if config is None else config
    if not isinstance(config, EquilibriaConfig):
        raise ValueError(f"config must be an EquilibriaConfig; received {type(config).__name__}")
    _check_executor(executor)                             # before the folder is touched
    text = config.to_toml()
    with JobFolder(out_dir, config.outputs.dataset, force=force, outputs=(FIGURE_FILE,)) as folder:
        partial = folder.path / PARTIAL
        another = partial.exists() and not _partial_matches(partial, text)
        if another and not folder.force:
            raise ValueError(f"out_dir {str(folder.path)!r} holds the unfinished branches of another config "
                             f"({partial}); rerun that config to finish it, or pass --force to discard them")
        _check(config)                                     # bad input before anything is removed or written
        folder.remove_previous()
        if another:
            shutil.rmtree(partial)
        partial.mkdir(exist_ok=True)
        remove_stale_temporaries(partial)
        (partial / "config.toml").write_text(text)
        ds = equilibria(config, partial, progress, log, executor)
        folder.save(ds)
        shutil.rmtree(partial)
        if config.outputs.figures:
            from .plotting import bifurcation_figure  # matplotlib only when a figure is asked for

            folder.save_figure(bifurcation_figure(ds), FIGURE_FILE, dpi=config.outputs.dpi)
    return {"dataset": ds, "paths": list(folder.paths), "summary": equilibria_summary(ds), "failures": failures(ds)}
