"""Command line ``meanfield``: the main job, configs, plots, studies and closed forms.

* ``meanfield run [CONFIG.toml] [--out DIR] [--force]`` -- PDE and particles from one start, compared
  by W2 (no CONFIG: the built-in default, about a minute on 2 cores); writes a NetCDF dataset, PNG
  figures and a GIF into DIR (default ``./meanfield-output``) and prints a summary.  Before
  computing it runs every check of ``meanfield config check`` and prints an estimate of time and
  memory.  Ctrl-C (exit 130) and SIGTERM (exit 143, what ``timeout`` and cluster schedulers send)
  save the integrator states; ``meanfield run --resume DIR`` continues the run.  A folder in use
  by another run is refused (a lock names its process); a folder that holds a finished result is
  refused unless ``--force`` (which replaces the result and its figures).
  ``meanfield run --extend DIR --t-final T`` continues the finished run in DIR to T and writes the
  whole run as a new file ``DIR/result_to_T.nc`` (:mod:`meanfield.workflow.extend`).
* ``meanfield sweep SWEEP.toml [--scheduler ADDRESS]`` -- the main job over parameter points on
  dask.distributed (see :mod:`meanfield.workflow.sweep`); re-running skips finished points.  When every point
  is done, the combined dataset ``sweep.nc`` and its figure ``sweep.png`` are written (rewritten by a re-run).
* ``meanfield config --default`` -- print the default config as TOML (every key; keys without a
  default are commented out); ``meanfield config FILE`` validates a config file and
  ``meanfield config check FILE`` also runs every check ``run`` makes before computing.
* ``meanfield plot RESULT.nc [--out DIR]`` -- redraw every figure from a results file.
* ``meanfield view RESULT.nc [--out PAGE.html]`` -- one self-contained interactive HTML page of a run, a sweep
  point or a phase diagram (:mod:`meanfield.workflow.view`; default ``RESULT.html`` beside the file).
* ``meanfield study NAME [--quick] [--out DIR]`` -- run ``python -m studies.NAME.run`` from the
  repository (``meanfield study --list`` lists them).
* ``meanfield theory {beta-star,lambda-max,growth-rates}`` -- closed forms of MODEL.md.
* ``meanfield phase-diagram CONFIG.toml [--out DIR] [--force]`` -- beta x t phase diagram of batched systems
  (:mod:`meanfield.workflow.phase_diagram`).
* ``meanfield equilibria [CONFIG.toml] [--out DIR] [--force] [--executor threads|processes|synchronous]`` --
  branches of stationary states of the noisy PDE (uniform, switched at its branch points; ``--executor`` runs the
  switched branches as dask tasks), their stability, free energy, folds and Maxwell point: a
  NetCDF dataset and a bifurcation figure (:mod:`meanfield.workflow.equilibria_job`; resumable, a rerun
  continues an interrupted job; exit 1 when a branch failed); ``--print-default`` prints the default config;
  ``--map MAP.toml [--scheduler ADDRESS]`` the transition over a (d, beta) grid as dask tasks
  (:mod:`meanfield.workflow.transition_map`).

Every job (run, equilibria, equilibria --map, phase-diagram) has one folder shape
(:class:`meanfield.workflow.jobs.JobFolder`): a folder in use by another job is refused, a finished result is
refused unless ``--force``, and the dataset (with provenance) is written before the figures.

Invalid arguments, configs and files exit with status 2 and a one-line message, never a traceback;
``-q`` silences the status lines on stderr, ``-v`` adds the checks' details; ``meanfield --version``.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..core import validate
from ..core.kernels import NORMALIZATIONS

__all__ = ["main", "build_parser", "studies_root", "available_studies"]

DEFAULT_OUT = "meanfield-output"


class _Signals:
    """SIGINT and SIGTERM raise KeyboardInterrupt once (so the run saves its state); later ones are ignored.

    ``received`` is the first signal's number (None if none); the exit status is 128 + it.
    """

    def __init__(self):
        self.received, self.saved = None, {}

    def _handler(self, signum, frame):
        if self.received is None:
            self.received = signum
            raise KeyboardInterrupt
        # a second Ctrl-C while the state is being saved: ignored, the save finishes

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self.saved[sig] = signal.signal(sig, self._handler)
            except ValueError:              # not the main thread (e.g. called from a worker): leave as is
                pass
        return self

    def __exit__(self, *exc):
        for sig, old in self.saved.items():
            signal.signal(sig, old)
        return False

    @property
    def status(self):
        return 128 + (self.received or signal.SIGINT)


_SIGNALS = _Signals()


def _say(args, text):
    """A status line on stderr, unless -q."""
    if getattr(args, "verbosity", 0) >= 0:
        print(text, file=sys.stderr, flush=True)


def _signal_name():
    return "SIGTERM" if _SIGNALS.received == signal.SIGTERM else "Ctrl-C"


def _run(args):
    from .checkpoint import RunInterrupted
    from .config import RunConfig, load_config
    from .jobs import FiguresInterrupted, main_job, resume_job

    started = time.perf_counter()
    progress = False if args.no_progress or args.verbosity < 0 else None
    def log(line):                      # the checks' details only with -v
        if args.verbosity > 0 or not line.startswith("start resolved"):
            _say(args, f"meanfield run: {line}")
    if args.extend is not None or args.t_final is not None:
        return _extend(args, progress)
    try:
        if args.resume is not None:
            if args.config is not None or args.out != DEFAULT_OUT or args.force:
                raise ValueError("meanfield run --resume DIR takes no CONFIG and no --out (nor --force; the run "
                                 "continues in DIR with its saved config)")
            _say(args, f"meanfield run: resuming the run in {args.resume}/")
            out_dir, out = args.resume, resume_job(args.resume, progress=progress, log=log)
        else:
            if not args.out or not args.out.strip():
                raise ValueError(f"--out must name a folder; received {args.out!r}")
            config = RunConfig() if args.config is None else load_config(args.config)
            _say(args, f"meanfield run: {'built-in default' if args.config is None else args.config} -> "
                       f"{args.out}/")
            out_dir, out = args.out, main_job(config, args.out, progress=progress, force=args.force, log=log)
    except RunInterrupted as err:
        print(f"meanfield: interrupted ({_signal_name()}): {err}\ncontinue with: meanfield run --resume "
              f"{err.folder.parent}", file=sys.stderr)
        return _SIGNALS.status
    except FiguresInterrupted as err:
        print(f"meanfield: interrupted ({_signal_name()}) while writing the figures; {err.path} is complete; "
              f"redraw the figures with: meanfield plot {err.path}", file=sys.stderr)
        return _SIGNALS.status
    except KeyboardInterrupt:                   # outside the integrators (start-up, W2): phases are saved
        folder = Path(args.resume or args.out or ".")
        hint = (f"; continue with: meanfield run --resume {folder}" if (folder / "checkpoint").is_dir() else "")
        print(f"meanfield: interrupted ({_signal_name()}){hint}", file=sys.stderr)
        return _SIGNALS.status
    print(out["summary"])
    print(f"wrote {len(out['paths'])} files to {out_dir}/: {', '.join(p.name for p in out['paths'])} "
          f"({time.perf_counter() - started:.1f} s)")
    return 0


def _sweep(args):
    from .sweep import SWEEP_FIGURE, SWEEP_FILE, load_sweep_spec, run_sweep

    spec = load_sweep_spec(args.sweep)
    out = Path(args.out) if args.out else Path(args.sweep).with_suffix("")
    print(f"meanfield sweep: {len(spec.points)} points -> {out}/ "
          f"({'scheduler ' + args.scheduler if args.scheduler else f'LocalCluster, {args.workers} workers'})",
          file=sys.stderr)
    rows = run_sweep(spec, out, scheduler=args.scheduler, n_workers=args.workers,
                     progress=False if args.no_progress else None)
    failed = [r for r in rows if r["status"] != "done"]
    print(f"{len(rows) - len(failed)} of {len(rows)} points done; index: {out / 'index.json'}")
    for r in failed:
        print(f"  {r['id']} {r['params']}: {r['status']} {r['error']}")
    if failed:
        print(f"no {SWEEP_FILE} written ({len(failed)} point{'s' * (len(failed) != 1)} not done); re-run the sweep to "
              f"retry {'them' if len(failed) != 1 else 'it'}")
    else:
        print(f"wrote {out / SWEEP_FILE} (all points, one dataset) and {out / SWEEP_FIGURE}")
    return 0 if not failed else 1


def _config(args):
    from .config import RunConfig, load_config

    file = args.file
    if file == "check":
        if args.target is None:
            raise ValueError("meanfield config check needs a FILE; received none")
        file = args.target
    elif args.target is not None:
        raise ValueError(f"meanfield config takes one FILE (or 'check FILE'); received {args.file!r} "
                         f"{args.target!r}")
    if args.default == (file is not None):
        raise ValueError("meanfield config needs exactly one of --default or FILE")
    if args.default:
        sys.stdout.write(RunConfig().to_toml(all_keys=True))
        return 0
    config = load_config(file)
    if args.file == "check":
        from .preflight import preflight

        for line in preflight(config):
            print(f"  {line}")
        print(f"{file}: valid; every check of meanfield run passed")
    else:
        print(f"{file}: valid (meanfield config check {file} also runs the checks made before computing)")
    return 0


def _plot(args):
    from . import plotting, results

    ds = results.load(args.result)
    out = Path(args.out) if args.out else Path(args.result).resolve().parent
    try:
        paths = plotting.save_figures(ds, out, dpi=results.config_of(ds).outputs.dpi,
                                      animation=not args.no_animation)
    except KeyError as err:
        name = re.search(r"'([^']+)'", str(err.args[0]) if err.args else "")
        name = name.group(1) if name else (err.args[0] if err.args else "?")
        raise ValueError(f"{args.result} lacks the variable {name!r} that a figure needs; received a dataset "
                         f"with {len(ds.data_vars)} variables (write it with meanfield run)") from None
    print(f"wrote {len(paths)} figures to {out}/: {', '.join(p.name for p in paths)}")
    return 0


def _view(args):
    from .view import write_view

    started = time.perf_counter()
    limits = {k: v for k, v in (("max_frames", args.frames), ("max_particles", args.particles)) if v is not None}
    path = write_view(args.result, args.out, **limits)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {time.perf_counter() - started:.1f} s); open it in "
          f"a browser (no server needed)")
    return 0


def studies_root() -> Path:
    """The repository's ``studies/`` folder (next to the installed ``meanfield`` package).

    Returns
    -------
    pathlib.Path
        (It need not exist: an installed wheel has no studies.)
    """
    import meanfield

    return Path(meanfield.__file__).resolve().parents[1] / "studies"


def available_studies(root=None) -> list[str]:
    """Names of the study packages (folders with a ``run.py``) under ``root``.

    Parameters
    ----------
    root : str or path-like, optional
        Default :func:`studies_root`.

    Returns
    -------
    list of str
        Sorted; empty when ``root`` is not a folder.
    """
    root = studies_root() if root is None else Path(root)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "run.py").is_file()
                  and not p.name.startswith(("_", ".")))


def _study(args):
    root = studies_root()
    names = available_studies(root)
    if args.list:
        if args.name is not None:
            raise ValueError(f"meanfield study --list takes no NAME; received {args.name!r}")
        for name in names:
            print(name)
        return 0
    if args.name is None:
        raise ValueError(f"meanfield study needs a NAME (or --list); available studies: {names or 'none'}")
    if not root.is_dir():
        raise ValueError(f"no studies folder at {root} (studies live in the source repository, not in an "
                         f"installed wheel)")
    if args.name not in names:
        raise ValueError(f"unknown study {args.name!r}; available studies: {names or 'none'}")
    cmd = [sys.executable, "-m", f"studies.{args.name}.run"] + (["--quick"] if args.quick else [])
    if args.out is None and not args.quick and not args.force:
        raise ValueError(f"a full run of study {args.name!r} writes into its committed outputs "
                         f"(studies/{args.name}/); pass --out DIR for another folder, or --force to replace them")
    if args.out is not None:
        if not args.out.strip():
            raise ValueError(f"--out must name a folder; received {args.out!r}")
        cmd += ["--out", str(Path(args.out).resolve())]
    _say(args, f"running {' '.join(cmd[1:])} in {root.parent}")
    return subprocess.call(cmd, cwd=root.parent)


_THEORY_OPTIONS = {"beta-star": {"H", "n", "alpha"}, "lambda-max": {"beta", "n"},
                   "growth-rates": {"lambdas", "beta", "normalization", "nu", "lmax", "d"},
                   "phase-transition": {"d", "beta", "normalization", "lmax"}}
"""The options each ``meanfield theory`` quantity uses; any other one given is refused."""


def _theory(args):
    import math

    from ..analysis import stability, theory

    given = {k for k in ("H", "n", "alpha", "beta", "lambdas", "normalization", "nu", "lmax", "d")
             if getattr(args, k) is not None}
    extra = sorted(given - _THEORY_OPTIONS[args.quantity])
    if extra:
        raise ValueError(f"meanfield theory {args.quantity} takes the options "
                         f"{sorted('--' + o for o in _THEORY_OPTIONS[args.quantity])}; received "
                         f"{['--' + o for o in extra]}")
    if args.quantity == "beta-star":
        H, n, alpha = (2 if args.H is None else args.H), (32 if args.n is None else args.n), (args.alpha or 1.0)
        print(f"c*(H={H}) = {theory.c_star(H):.12f}")
        value = theory.beta_star(H, n, alpha)
        caveat = ""
        if not math.isfinite(value):
            caveat = "  (a single head has no cross-head coupling: no threshold)"
        elif value <= 0:
            caveat = (f"  (outside the formula's range: negative because n < 1 + (H-1)/c* = "
                      f"{1 + (H - 1) / theory.c_star(H):.4g}; no positive beta satisfies the condition's "
                      f"threshold, so no critical temperature is predicted)")
        print(f"beta*(H={H}, n={n}, alpha={alpha}) = {value:.12f}{caveat}")
    elif args.quantity == "lambda-max":
        beta, n = (args.beta or 1.0), (32 if args.n is None else args.n)
        print(f"lambda_max(beta={beta}, n={n}) = {theory.lambda_max(beta, n):.12f}")
        print(f"inflection(beta={beta}, n={n}) = {theory.phi_inflection(beta, n):.12f}")
    elif args.quantity == "phase-transition":
        _phase_transition(args)
    else:
        lambdas = args.lambdas or [1.0]
        beta, nu = (args.beta or 1.0), (0.0 if args.nu is None else args.nu)
        normalization, lmax = (args.normalization or "mean"), (8 if args.lmax is None else args.lmax)
        d = 3 if args.d is None else args.d
        for ell in range(1, lmax + 1):
            s = stability.growth_rate(ell, lambdas, beta, normalization, nu, d=d)
            print(f"sigma_{ell} = {s:.10g}")
    return 0


def _phase_transition(args):
    """``meanfield theory phase-transition``: one zonal exp head of strength 1 on S^{d-1} (MODEL.md section 7)."""
    import math

    from ..analysis import phase_transition as equilibria

    d = 3 if args.d is None else args.d
    normalization = args.normalization or "mean"
    if args.beta is None:
        if args.lmax is not None or args.normalization is not None:
            raise ValueError("meanfield theory phase-transition without --beta prints beta_star (one mean head) and "
                             "takes only --d; received --lmax or --normalization")
        print(f"beta_star = {equilibria.beta_star_bessel(d):.12g}  (root of I_(d/2+1)/I_(d/2) = 1/d, d = {d})")
        print(f"beta_star_continuation = {equilibria.beta_star_continuation(d):.12g}  (where the degree-1 branch's "
              f"direction at nu_# changes sign)")
        return
    r = equilibria.phase_transition(d, args.beta, normalization, args.lmax)
    cont = r.transition == "continuous"
    print(f"nu_sharp = {r.nu_sharp:.12g}  (sigma_1 of the uniform state vanishes)")
    print(f"nu_fold = {r.nu_fold:.12g}" + ("  (= nu_sharp: no fold, the branch is supercritical)" if cont else
                                           "  (the subcritical branch turns)"))
    if math.isfinite(r.nu_global):
        print(f"nu_global = {r.nu_global:.12g}" + ("  (= nu_sharp)" if cont else
                                                   "  (G of the clustered state equals G of uniform)"))
    else:
        print(f"nu_global = nan  ({normalization} normalization has no free energy)")
    print(f"transition = {r.transition}")
    print(f"# d = {d}, beta = {args.beta:g}, {normalization}; branch curvature nu_2 = {r.nu_2:.6g}; lmax = "
          f"{r.lmax} (relative change from the previous degree {r.discretization_change:.1e})")


def _extend(args, progress):
    """``meanfield run --extend DIR --t-final T``: a new dataset file in DIR, the finished result untouched."""
    from . import results
    from .extend import extend, extended_name
    from .jobs import FolderLock

    if args.extend is None or args.t_final is None:
        raise ValueError("meanfield run --extend DIR needs --t-final T (and --t-final needs --extend DIR); received "
                         f"--extend {args.extend!r}, --t-final {args.t_final!r}")
    if args.config is not None or args.resume is not None or args.out != DEFAULT_OUT:
        raise ValueError("meanfield run --extend DIR takes no CONFIG, --resume or --out (the extension is "
                         "written into DIR)")
    folder = Path(args.extend)
    started = time.perf_counter()
    if not folder.is_dir():                 # checked before the lock, which would create it
        raise ValueError(f"--extend must name the folder of a finished run (holding its .nc dataset); received "
                         f"{str(folder)!r}, not a folder")
    with FolderLock(folder):
        names = sorted(p.name for p in folder.glob("*.nc") if "_to_" not in p.name)
        if not names:
            raise ValueError(f"--extend must name the folder of a finished run (holding its .nc dataset); received "
                             f"{str(folder)!r}")
        source = folder / ("result.nc" if "result.nc" in names else names[0])
        ds = results.load(source)
        target = folder / extended_name(source.name, args.t_final)
        if target.exists() and not args.force:
            raise ValueError(f"{target} exists; pass --force to replace it, or choose another --t-final")
        _say(args, f"meanfield run: extending {source} from t = {float(ds.time[-1]):g} to t = {args.t_final:g}")
        new = results.add_provenance(extend(ds, args.t_final, progress=progress))
        path = results.save(new, target)
    print(f"wrote {path} ({time.perf_counter() - started:.1f} s); draw its figures with: meanfield plot {path}")
    return 0


def _int_at_least(lo):
    """argparse type: an integer >= lo, with the allowed range and the received text in the error."""

    def parse(s):
        try:
            return validate.integer("value", int(s), lo)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lo}; received {s}") from None

    return parse


_positive_int, _positive_int_1 = _int_at_least(2), _int_at_least(1)


def _positive_float(s):
    """argparse type: a positive finite number, with the received text in the error."""
    try:
        return validate.real("value", float(s), positive=True)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive finite number; received {s}") from None


def _version():
    from .._version import __version__

    return f"meanfield {__version__}"


def build_parser():
    """The ``meanfield`` command's argument parser, every subcommand with its handler as ``func``.

    Returns
    -------
    argparse.ArgumentParser
    """
    p = argparse.ArgumentParser(prog="meanfield", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=_version())
    common = argparse.ArgumentParser(add_help=False)
    loud = common.add_mutually_exclusive_group()
    loud.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1, default=0,
                      help="more detail on stderr")
    loud.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1,
                      help="no status lines or progress on stderr (errors only)")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", parents=[common], help="run the main job: PDE and particles from one start, compared by W2")
    r.add_argument("config", nargs="?", default=None, help="TOML config (default: the built-in demonstration)")
    r.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default ./{DEFAULT_OUT})")
    r.add_argument("--force", action="store_true",
                   help="replace a finished result (and its figures) in --out; run beyond the available memory")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    r.add_argument("--resume", default=None, metavar="DIR",
                   help="continue the interrupted run whose output folder is DIR")
    r.add_argument("--extend", default=None, metavar="DIR",
                   help="continue the finished run in DIR to --t-final; writes DIR/<dataset>_to_<T>.nc")
    r.add_argument("--t-final", dest="t_final", type=_positive_float, default=None, metavar="T",
                   help="with --extend: the new final time (after the run's last time)")
    r.set_defaults(func=_run)
    sw = sub.add_parser("sweep", parents=[common],
                        help="run the main job over a grid or list of parameter points (dask)")
    sw.add_argument("sweep", help="sweep TOML file (see meanfield.workflow.sweep)")
    sw.add_argument("--out", default=None, help="output folder (default: the sweep file's name); it gets "
                    "points/, index.json and, when every point is done, sweep.nc and sweep.png")
    sw.add_argument("--scheduler", default=None, metavar="ADDRESS", help="an existing dask scheduler")
    sw.add_argument("--workers", type=_positive_int_1, default=2, help="LocalCluster workers (default 2)")
    sw.add_argument("--no-progress", action="store_true", help="no progress bar")
    sw.set_defaults(func=_sweep)
    c = sub.add_parser("config", parents=[common],
                       help="print the default config (--default), validate a FILE, or 'check FILE' (every check)")
    c.add_argument("file", nargs="?", default=None, help="TOML config to validate, or the word 'check'")
    c.add_argument("target", nargs="?", default=None, help="after 'check': the TOML config to check")
    c.add_argument("--default", action="store_true", help="print the default config as TOML (every key)")
    c.set_defaults(func=_config)
    pl = sub.add_parser("plot", parents=[common], help="redraw every figure from a results file")
    pl.add_argument("result", help="NetCDF file written by meanfield run")
    pl.add_argument("--out", default=None, help="output folder (default: the file's folder)")
    pl.add_argument("--no-animation", action="store_true", help="skip the GIF")
    pl.set_defaults(func=_plot)
    vw = sub.add_parser("view", parents=[common], help="an interactive HTML page of a results file (plotly, "
                                                       "self-contained)")
    vw.add_argument("result", help="NetCDF file written by meanfield run, sweep or phase-diagram")
    vw.add_argument("--out", default=None, metavar="PAGE.html", help="the page (default: RESULT.html beside the file)")
    vw.add_argument("--frames", type=_int_at_least(2), default=None,
                    help="most times on the slider (default view.MAX_FRAMES = 60)")
    vw.add_argument("--particles", type=_positive_int_1, default=None,
                    help="most tokens drawn (default view.MAX_PARTICLES = 500)")
    vw.set_defaults(func=_view)
    s = sub.add_parser("study", parents=[common], help="run a study of studies/ (python -m studies.NAME.run)")
    s.add_argument("name", nargs="?", default=None, help="study name (a folder of studies/)")
    s.add_argument("--list", action="store_true", help="list the available studies")
    s.add_argument("--quick", action="store_true", help="the small fast version")
    s.add_argument("--out", default=None, help="output folder (default: the study's committed outputs, "
                                                "which a full run replaces only with --force)")
    s.add_argument("--force", action="store_true", help="a full run may replace the study's committed outputs")
    s.set_defaults(func=_study)
    t = sub.add_parser("theory", parents=[common], help="print closed forms of MODEL.md",
                       description="Closed forms of MODEL.md.  beta-star takes --H --n --alpha; lambda-max takes "
                                   "--beta --n; growth-rates takes --lambdas --beta --normalization --nu --lmax --d; "
                                   "phase-transition takes --d [--beta --normalization --lmax].  "
                                   "Other options are refused.")
    t.add_argument("quantity", choices=list(_THEORY_OPTIONS), help="which closed form")
    t.add_argument("--H", type=_positive_int_1, default=None, help="number of heads (beta-star; default 2)")
    t.add_argument("--n", type=_positive_int, default=None, help="number of tokens (beta-star, lambda-max; "
                                                                 "default 32)")
    t.add_argument("--alpha", type=_positive_float, default=None, help="head strength alpha (beta-star; default 1)")
    t.add_argument("--beta", type=_positive_float, default=None,
                   help="inverse temperature (lambda-max, growth-rates, phase-transition; default 1, "
                        "phase-transition: none prints beta_star)")
    t.add_argument("--lambdas", type=float, nargs="+", default=None,
                   help="head strengths lambda_h, one per head (growth-rates; default 1)")
    t.add_argument("--normalization", choices=list(NORMALIZATIONS), default=None,
                   help="normalization of the heads (growth-rates, phase-transition; default mean, as Head)")
    t.add_argument("--nu", type=float, default=None, help="noise strength nu >= 0 (growth-rates; default 0)")
    t.add_argument("--lmax", type=_positive_int_1, default=None, help="largest degree l printed (growth-rates; "
                                                                      "default 8); the discretization degree "
                                                                      "(phase-transition; default: chosen)")
    t.add_argument("--d", type=_int_at_least(2), default=None,
                   help="dimension d of the sphere S^{d-1} (growth-rates, phase-transition; >= 2, default 3)")
    t.set_defaults(func=_theory)
    ph = sub.add_parser("phase-diagram", help="beta x t phase diagram of batched token systems (NetCDF + figure)")
    ph.add_argument("config", help="TOML file with a [phase_diagram] table (see meanfield.workflow.phase_diagram)")
    ph.add_argument("--out", default="phase-diagram-output", help="output folder")
    ph.add_argument("--force", action="store_true", help="replace a finished phase diagram in --out")
    ph.add_argument("--executor", default=None, choices=["threads", "processes", "synchronous"],
                    help="run the beta cells as dask tasks on this local executor (--scheduler means a dask "
                         "scheduler's ADDRESS in every command: sweep, equilibria --map)")
    ph.add_argument("--scheduler", default=None, metavar="ADDRESS", help=argparse.SUPPRESS)
    ph.add_argument("--no-progress", action="store_true", help="no progress bar")
    ph.set_defaults(func=_phase_diagram)
    e = sub.add_parser("equilibria", parents=[common],
                       help="branches of stationary states, stability, free energy, folds, Maxwell point (NetCDF + "
                            "figure); --map: the transition over (d, beta)")
    e.add_argument("config", nargs="?", default=None, help="TOML config (default: the built-in one; see "
                                                             "--print-default)")
    e.add_argument("--out", default=None, help="output folder (default ./equilibria-output, with --map "
                                                "./transition-map-output)")
    e.add_argument("--force", action="store_true", help="replace a finished result in --out")
    e.add_argument("--print-default", action="store_true", help="print the default config as TOML")
    e.add_argument("--map", default=None, metavar="MAP.toml", help="the (d, beta) map of the transition (dask tasks)")
    e.add_argument("--scheduler", default=None, metavar="ADDRESS", help="with --map: an existing dask scheduler")
    e.add_argument("--workers", type=_positive_int_1, default=2, help="with --map: LocalCluster workers (default 2)")
    e.add_argument("--executor", default=None, choices=["threads", "processes", "synchronous"],
                   help="run the switched branches as dask tasks on this local executor (--scheduler means a dask "
                        "scheduler's ADDRESS in every command: sweep, equilibria --map)")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.set_defaults(func=_equilibria)
    return p


def _equilibria(args):
    if args.map is not None:
        if args.executor is not None:
            raise ValueError(f"--executor applies to the branches of one config; --map runs its cells on a dask "
                             f"cluster (--scheduler ADDRESS or --workers N); received --executor {args.executor}")
        return _transition_map(args)
    from .equilibria_config import EquilibriaConfig, load_equilibria_config
    from .equilibria_job import equilibria_job

    if args.print_default:
        if args.config is not None:
            raise ValueError(f"meanfield equilibria --print-default takes no CONFIG; received {args.config!r}")
        sys.stdout.write(EquilibriaConfig().to_toml())
        return 0
    if args.scheduler is not None:
        raise ValueError("--scheduler applies to --map only (the branches of one config run here)")
    out_dir = args.out or "equilibria-output"
    if not out_dir.strip():
        raise ValueError(f"--out must name a folder; received {out_dir!r}")
    started = time.perf_counter()
    config = EquilibriaConfig() if args.config is None else load_equilibria_config(args.config)
    _say(args, f"meanfield equilibria: {'built-in default' if args.config is None else args.config} -> {out_dir}/")
    try:
        out = equilibria_job(config, out_dir, progress=False if args.no_progress or args.verbosity < 0 else None,
                             force=args.force, log=lambda line: _say(args, f"meanfield equilibria: {line}"),
                             executor=args.executor)
    except KeyboardInterrupt:
        print(f"meanfield: interrupted ({_signal_name()}); the finished branches are kept in {out_dir}/partial; "
              f"continue with the same command", file=sys.stderr)
        return _SIGNALS.status
    print(out["summary"])
    print(f"wrote {len(out['paths'])} files to {out_dir}/: {', '.join(p.name for p in out['paths'])} "
          f"({time.perf_counter() - started:.1f} s)")
    for line in out["failures"]:
        print(f"meanfield equilibria: branch failed: {line}", file=sys.stderr)
    return 1 if out["failures"] else 0


def _transition_map(args):
    from .transition_map import run_transition_map

    if args.config is not None or args.print_default:
        raise ValueError("meanfield equilibria --map MAP.toml takes no CONFIG and no --print-default")
    out_dir = args.out or "transition-map-output"
    if not out_dir.strip():
        raise ValueError(f"--out must name a folder; received {out_dir!r}")
    _say(args, f"meanfield equilibria --map {args.map} -> {out_dir}/ "
               f"({'scheduler ' + args.scheduler if args.scheduler else f'LocalCluster, {args.workers} workers'})")
    out = run_transition_map(args.map, out_dir, scheduler=args.scheduler, n_workers=args.workers,
                             progress=False if args.no_progress or args.verbosity < 0 else None, force=args.force)
    print(f"wrote {', '.join(str(p) for p in out['paths'])}")
    for line in out["failures"]:
        print(f"meanfield equilibria --map: cell failed: {line}", file=sys.stderr)
    return 1 if out["failures"] else 0


def _phase_diagram(args):
    from .phase_diagram import run_phase_diagram

    if args.scheduler is not None:
        raise ValueError(f"meanfield phase-diagram runs its cells locally: --scheduler (an existing dask scheduler's "
                         f"ADDRESS in sweep and equilibria --map) is not supported here; use --executor threads, "
                         f"processes or synchronous; received --scheduler {args.scheduler}")
    if not args.out or not args.out.strip():
        raise ValueError(f"--out must name a folder; received {args.out!r}")
    paths = run_phase_diagram(args.config, args.out, scheduler=args.executor,
                              progress=False if args.no_progress else None, force=args.force)
    print(f"wrote {', '.join(str(p) for p in paths)}")
    return 0


def main(argv=None) -> int:
    """The ``meanfield`` command; returns the exit status (0 ok, 1 failed points, 2 bad input,
    130 Ctrl-C, 143 SIGTERM).

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status; input errors (``ValueError``, ``OSError``) are printed, not raised.
    """
    global _SIGNALS
    _SIGNALS = _Signals()
    try:
        with _SIGNALS:
            args = build_parser().parse_args(argv)
            try:
                status = args.func(args)
                sys.stdout.flush()
                return status
            except BrokenPipeError:         # `meanfield config --default | head -1`: the reader had enough
                try:
                    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                except (OSError, ValueError, AttributeError):
                    pass
                return 0
            except ValueError as err:          # ConfigError, SchemaError and library input errors
                print(f"meanfield: error: {err}", file=sys.stderr)
                return 2
            except OSError as err:             # an output folder that cannot be written, ...
                print(f"meanfield: error: {err.strerror or err}: {err.filename or ''}", file=sys.stderr)
                return 2
    except KeyboardInterrupt:                   # Ctrl-C / SIGTERM during start-up (imports, parsing)
        print(f"meanfield: interrupted ({_signal_name()})", file=sys.stderr)
        return _SIGNALS.status


if __name__ == "__main__":
    sys.exit(main())
